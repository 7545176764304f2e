"""Oracle tests for dp_infer.privacy.ledger (mutation testing, issue 19).

Oracles: the receipt's fields against the arithmetic they document (remaining = budget - spent,
exactly) and an independent Accountant composition of the same events; a charge that lands
exactly on the budget is within it (the refusal is for eps > budget); ``complete`` by integer
run id; ``accountant()`` equals a fresh Accountant of the recorded events.
"""

import dataclasses
import re
import time

import pytest

from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import GdpEvent, PureDpEvent
from dp_infer.privacy.ledger import BudgetExceededError, Ledger, UnknownDatasetError

DELTA = 1e-5


def test_receipt_fields_follow_their_definitions(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=4.0, delta_budget=DELTA)
    e1, e2 = GdpEvent(0.3), GdpEvent(0.5)
    led.charge("d", e1, run_label="a")
    t0 = time.time()
    r = led.charge("d", e2, run_label="b", count=2)
    t1 = time.time()
    want = Accountant([e1, (e2, 2)]).get_epsilon(DELTA)
    assert r.eps_spent == pytest.approx(want, rel=1e-12)
    assert r.eps_remaining == 4.0 - r.eps_spent  # exactly the documented difference
    assert r.eps_run == pytest.approx(Accountant([(e2, 2)]).get_epsilon(DELTA), rel=1e-12)
    assert r.eps_budget == 4.0 and r.delta == DELTA and r.run_label == "b" and r.dataset_id == "d"
    assert r.ledger_path == str(led.path) and t0 <= r.charged_at <= t1
    assert led.history("d")[-1]["time"] == r.charged_at and led.history("d")[-1]["run_id"] == r.run_id


def test_a_charge_exactly_at_the_budget_is_accepted(tmp_path):
    # a budget equal to the Accountant's eps of the run (a float stored and read back exactly):
    # eps = budget is within it; anything more is refused
    ev = GdpEvent(0.7)
    budget = Accountant([ev]).get_epsilon(DELTA)
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=budget, delta_budget=DELTA)
    r = led.charge("d", ev)
    assert r.eps_spent == budget and r.eps_remaining == 0.0
    with pytest.raises(BudgetExceededError):
        led.charge("d", PureDpEvent(1e-9))
    assert led.spent("d")["n_runs"] == 1


def test_complete_by_integer_run_id_and_refusals(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=10.0, delta_budget=DELTA)
    r = led.charge("d", GdpEvent(0.2), run_label="x")
    led.complete(r.run_id)
    assert led.history("d")[0]["status"] == "completed"
    for bad in (True, "1", 1.0, None):
        with pytest.raises(ValueError, match="receipt must be a ChargeReceipt or an integer run_id"):
            led.complete(bad)
    with pytest.raises(ValueError, match="not in the ledger"):
        led.complete(r.run_id + 100)


def test_accountant_holds_every_recorded_event(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=10.0, delta_budget=DELTA)
    led.charge("d", GdpEvent(0.4))
    led.charge("d", PureDpEvent(0.1), count=3)
    acc = led.accountant("d")
    assert isinstance(acc, Accountant)
    assert acc.get_epsilon(DELTA) == Accountant([GdpEvent(0.4), (PureDpEvent(0.1), 3)]).get_epsilon(DELTA)
    assert acc.get_epsilon(DELTA) == led.spent("d")["eps"]
    with pytest.raises(UnknownDatasetError, match="dataset_id 'nope'"):
        led.accountant("nope")
    with pytest.raises(ValueError, match="dataset_id"):
        led.accountant("")
    assert repr(led) == f"Ledger({str(led.path)!r})"


def test_history_and_plot_rows_carry_every_documented_field(tmp_path):
    import os

    from dp_infer.privacy.ledger_records import _iso

    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=6.0, delta_budget=DELTA)
    r1 = led.charge("d", GdpEvent(0.3), run_label="first", count=2)
    led.complete(r1)
    r2 = led.charge("d", PureDpEvent(0.2))  # unlabelled, left charged
    h = led.history("d")
    assert [set(x) for x in h] == [{"run_id", "run_label", "status", "time", "charged_at", "completed_at", "event",
                                    "count", "eps_run", "eps_after", "delta", "pid"}] * 2
    assert [x["run_id"] for x in h] == [r1.run_id, r2.run_id]
    assert [x["status"] for x in h] == ["completed", "charged"]
    assert [x["count"] for x in h] == [2, 1] and [x["pid"] for x in h] == [os.getpid()] * 2
    assert [x["delta"] for x in h] == [DELTA, DELTA]
    assert [x["time"] for x in h] == [r1.charged_at, r2.charged_at]
    assert [x["charged_at"] for x in h] == [_iso(r1.charged_at), _iso(r2.charged_at)]
    assert h[0]["completed_at"] is not None and h[0]["completed_at"] >= h[0]["charged_at"]
    assert h[1]["completed_at"] is None
    assert [x["eps_run"] for x in h] == [r1.eps_run, r2.eps_run]
    assert [x["eps_after"] for x in h] == [r1.eps_spent, r2.eps_spent]
    assert h[1]["event"] == PureDpEvent(0.2).to_dict()
    plot = led.records_for_plot("d")
    assert plot == [{"run": "first", "run_id": r1.run_id, "status": "completed", "eps_run": r1.eps_run,
                     "eps_cumulative": r1.eps_spent, "eps_remaining": 6.0 - r1.eps_spent, "eps_budget": 6.0},
                    {"run": f"run {r2.run_id}", "run_id": r2.run_id, "status": "charged", "eps_run": r2.eps_run,
                     "eps_cumulative": r2.eps_spent, "eps_remaining": 6.0 - r2.eps_spent, "eps_budget": 6.0}]


def test_refusals_name_the_dataset_run_and_ledger(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=1.0, delta_budget=DELTA)
    led.register_dataset("e", eps_budget=1.0, delta_budget=DELTA)
    with pytest.raises(BudgetExceededError) as info:
        led.charge("d", GdpEvent(5.0), run_label="big-run")
    err = info.value
    assert err.dataset_id == "d" and err.run_label == "big-run"
    assert err.eps_budget == 1.0 and err.delta_budget == DELTA and err.eps_spent == 0.0
    assert err.eps_run == Accountant([GdpEvent(5.0)]).get_epsilon(DELTA) == err.eps_requested_total
    # a receipt of dataset "d" presented as if of "e" is refused, and the row stays charged
    r = led.charge("d", GdpEvent(0.1), run_label="small")
    forged = dataclasses.replace(r, dataset_id="e")
    with pytest.raises(ValueError, match="belongs to dataset 'd'"):
        led.complete(forged)
    assert led.history("d")[0]["status"] == "charged"
    with pytest.raises(ValueError, match=re.escape(repr(str(led.path)))):
        led.complete(r.run_id + 100)
