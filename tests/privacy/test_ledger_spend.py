"""Oracle tests for dp_infer.privacy.ledger.

Oracles: an independent Accountant composition of the same events (the ledger's spend is never a
running sum); the arithmetic the records document (remaining = budget - spent, exactly); the
process id and the wall clock around a charge; a second SQLite connection reading the file as a
reviewer would; a charge that lands exactly on the budget is within it (the refusal is for
eps > budget). Every refusal is checked to leave the file unchanged.
"""

import dataclasses
import datetime as dt
import math
import os
import re
import sqlite3
import threading
import time

import pytest

from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import GdpEvent, PureDpEvent, ZcdpEvent
from dp_infer.privacy.ledger import BudgetExceededError, Ledger, UnknownDatasetError

DELTA = 1e-5


def _ledger(tmp_path, budget=5.0, name="d"):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset(name, eps_budget=budget, delta_budget=DELTA)
    return led


def test_datasets_lists_every_budget_with_its_registration_time(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    t0 = time.time()
    assert led.register_dataset("b", eps_budget=2.0, delta_budget=1e-6) == \
        {"dataset_id": "b", "eps_budget": 2.0, "delta_budget": 1e-6}
    led.register_dataset("a", eps_budget=1.5, delta_budget=DELTA)
    t1 = time.time()
    ds = Ledger(tmp_path / "l.sqlite").datasets()
    assert [(d["dataset_id"], d["eps_budget"], d["delta_budget"]) for d in ds] == [("a", 1.5, DELTA), ("b", 2.0, 1e-6)]
    for d in ds:
        t = dt.datetime.fromisoformat(d["created_at"])
        assert t.utcoffset() == dt.timedelta(0) and t0 - 1e-3 <= t.timestamp() <= t1 + 1e-3
    with pytest.raises(ValueError, match="delta_budget"):
        led.register_dataset("a", eps_budget=1.5, delta_budget=1e-6)  # a different delta is a different budget


def test_a_charge_that_exactly_fills_the_budget_is_accepted_and_its_receipt_is_the_ledgers_arithmetic(tmp_path):
    ev = GdpEvent(0.9)
    eps_run = Accountant([ev]).get_epsilon(DELTA)
    led = _ledger(tmp_path, budget=eps_run)  # the budget is exactly this run's eps
    t0 = time.time()
    r = led.charge("d", ev, run_label="fill", count=1)
    t1 = time.time()
    assert (r.eps_run, r.eps_spent, r.eps_remaining, r.eps_budget, r.delta) == (eps_run, eps_run, 0.0, eps_run, DELTA)
    assert r.dataset_id == "d" and r.run_label == "fill" and r.ledger_path == str(tmp_path / "l.sqlite")
    assert t0 <= r.charged_at <= t1
    with pytest.raises(BudgetExceededError):
        led.charge("d", GdpEvent(1e-3))
    assert led.spent("d")["n_runs"] == 1


def test_receipt_fields_follow_their_definitions_over_several_charges(tmp_path):
    led = _ledger(tmp_path, budget=4.0)
    e1, e2 = GdpEvent(0.3), GdpEvent(0.5)
    led.charge("d", e1, run_label="a")
    t0 = time.time()
    r = led.charge("d", e2, run_label="b", count=2)
    t1 = time.time()
    assert r.eps_spent == pytest.approx(Accountant([e1, (e2, 2)]).get_epsilon(DELTA), rel=1e-12)
    assert r.eps_remaining == 4.0 - r.eps_spent  # exactly the documented difference
    assert r.eps_run == pytest.approx(Accountant([(e2, 2)]).get_epsilon(DELTA), rel=1e-12)
    assert r.eps_budget == 4.0 and r.delta == DELTA and r.run_label == "b" and r.dataset_id == "d"
    assert r.ledger_path == str(led.path) and t0 <= r.charged_at <= t1
    assert led.history("d")[-1]["time"] == r.charged_at and led.history("d")[-1]["run_id"] == r.run_id


def test_history_and_plot_rows_are_the_recorded_runs(tmp_path):
    from dp_infer.privacy.ledger_records import iso

    led = _ledger(tmp_path)
    a, b = PureDpEvent(0.4), ZcdpEvent(0.01)
    r1 = led.charge("d", a, run_label="first", count=2)
    r2 = led.charge("d", b)  # unlabelled
    led.complete(r1.run_id)  # an integer run id works as well as the receipt
    hist = led.history("d")
    assert [set(h) for h in hist] == [{"run_id", "run_label", "status", "time", "charged_at", "completed_at", "event",
                                       "count", "eps_run", "eps_after", "delta", "pid"}] * 2
    assert [h["run_id"] for h in hist] == [r1.run_id, r2.run_id]
    assert [(h["count"], h["status"], h["delta"], h["pid"]) for h in hist] == \
        [(2, "completed", DELTA, os.getpid()), (1, "charged", DELTA, os.getpid())]
    assert [h["event"] for h in hist] == [a.to_dict(), b.to_dict()]
    assert [h["time"] for h in hist] == [r1.charged_at, r2.charged_at]
    assert [h["charged_at"] for h in hist] == [iso(r1.charged_at), iso(r2.charged_at)]
    assert [h["eps_run"] for h in hist] == [r1.eps_run, r2.eps_run]
    assert [h["eps_after"] for h in hist] == [r1.eps_spent, r2.eps_spent]
    assert hist[0]["eps_run"] == Accountant([(a, 2)]).get_epsilon(DELTA)
    assert hist[1]["eps_after"] == Accountant([(a, 2), b]).get_epsilon(DELTA)
    assert hist[1]["completed_at"] is None
    assert dt.datetime.fromisoformat(hist[0]["completed_at"]) >= dt.datetime.fromisoformat(hist[0]["charged_at"])
    assert abs(hist[0]["time"] - dt.datetime.fromisoformat(hist[0]["charged_at"]).timestamp()) <= 1e-6  # ISO keeps microseconds
    assert led.records_for_plot("d") == [
        {"run": "first", "run_id": r1.run_id, "status": "completed", "eps_run": r1.eps_run,
         "eps_cumulative": r1.eps_spent, "eps_remaining": 5.0 - r1.eps_spent, "eps_budget": 5.0},
        {"run": f"run {r2.run_id}", "run_id": r2.run_id, "status": "charged", "eps_run": r2.eps_run,
         "eps_cumulative": r2.eps_spent, "eps_remaining": 5.0 - r2.eps_spent, "eps_budget": 5.0}]
    s = led.spent("d")
    assert (s["n_runs"], s["n_charged"], s["n_completed"], s["eps_budget"], s["delta_budget"]) == (2, 1, 1, 5.0, DELTA)
    assert s["eps"] == Accountant([(a, 2), b]).get_epsilon(DELTA) and s["remaining_eps"] == 5.0 - s["eps"]


def test_the_accountant_of_a_dataset_holds_exactly_its_events(tmp_path):
    led = _ledger(tmp_path)
    led.register_dataset("other", eps_budget=5.0, delta_budget=DELTA)
    led.charge("d", GdpEvent(0.3), count=3)
    led.charge("other", GdpEvent(1.1))
    acc = led.accountant("d")
    assert isinstance(acc, Accountant) and acc.ledger == ((GdpEvent(0.3), 3),)
    assert acc.get_epsilon(DELTA) == led.spent("d")["eps"]
    assert led.accountant("other").gdp_mu() == 1.1
    with pytest.raises(UnknownDatasetError, match="dataset_id 'nope'.*known: \\['d', 'other'\\]"):
        led.accountant("nope")
    with pytest.raises(ValueError, match="dataset_id"):
        led.accountant("")
    with pytest.raises(UnknownDatasetError):
        led.history("nope")


def test_complete_refuses_what_is_not_a_run_of_this_ledger(tmp_path):
    led = _ledger(tmp_path)
    led.register_dataset("e", eps_budget=5.0, delta_budget=DELTA)
    r = led.charge("d", GdpEvent(0.2))
    for bad in (True, "1", 1.0, None):
        with pytest.raises(ValueError, match="^receipt must be a ChargeReceipt or an integer run_id"):
            led.complete(bad)
    with pytest.raises(ValueError, match=re.escape(f"run_id {r.run_id + 7}) is not in the ledger at {str(led.path)!r}")):
        led.complete(r.run_id + 7)
    other = led.charge("e", GdpEvent(0.2))
    forged = type(r)(**{**r.to_dict(), "run_id": other.run_id})  # a receipt of "d" naming e's run
    with pytest.raises(ValueError, match="belongs to dataset 'e'"):
        led.complete(forged)
    assert [h["status"] for h in led.history("e")] == ["charged"]
    led.complete(r)
    first = led.history("d")[0]["completed_at"]
    led.complete(r)  # idempotent: the completion time is not moved
    assert led.history("d")[0]["completed_at"] == first


def test_refusals_name_the_dataset_run_and_ledger(tmp_path):
    led = _ledger(tmp_path, budget=1.0)
    led.register_dataset("e", eps_budget=1.0, delta_budget=DELTA)
    with pytest.raises(BudgetExceededError) as info:
        led.charge("d", GdpEvent(5.0), run_label="big-run")
    err = info.value
    assert err.dataset_id == "d" and err.run_label == "big-run"
    assert err.eps_budget == 1.0 and err.delta_budget == DELTA and err.eps_spent == 0.0
    assert err.eps_run == Accountant([GdpEvent(5.0)]).get_epsilon(DELTA) == err.eps_requested_total
    # a receipt of dataset "d" presented as if of "e" is refused, and the row stays charged
    r = led.charge("d", GdpEvent(0.1), run_label="small")
    with pytest.raises(ValueError, match="belongs to dataset 'd'"):
        led.complete(dataclasses.replace(r, dataset_id="e"))
    assert led.history("d")[0]["status"] == "charged"


def test_a_file_that_is_not_a_ledger_is_refused_by_name(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not an sqlite database" * 100)
    with pytest.raises(ValueError, match="is not a dp_infer ledger"):
        Ledger(junk)
    with pytest.raises(ValueError, match="must be a file, not a directory"):
        Ledger(tmp_path)
    for bad in ("", "   ", 3, None.__class__):
        with pytest.raises(ValueError, match="^path must be a file path"):
            Ledger(bad)
    # a ledger written by another schema version is refused, not misread
    path = tmp_path / "v.sqlite"
    Ledger(path)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with pytest.raises(ValueError, match="schema_version 2, this dp_infer reads schema_version 1"):
        Ledger(path)


def test_the_file_is_durable_and_a_reviewer_reads_the_same_numbers(tmp_path):
    led = _ledger(tmp_path)
    r = led.charge("d", GdpEvent(0.5), run_label="x")
    with sqlite3.connect(tmp_path / "l.sqlite") as con:
        row = con.execute("SELECT count, status, eps_run, eps_after, pid FROM runs WHERE run_id = ?",
                          (r.run_id,)).fetchone()
        version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    assert row == (1, "charged", r.eps_run, r.eps_spent, os.getpid()) and version == "1"
    assert r.eps_run == Accountant([GdpEvent(0.5)]).get_epsilon(DELTA)
    assert repr(led) == f"Ledger({str(tmp_path / 'l.sqlite')!r})"
    assert math.isfinite(r.eps_spent)


def test_status_counts_are_zero_for_a_status_no_run_has(tmp_path):
    led = _ledger(tmp_path)
    assert (led.spent("d")["n_charged"], led.spent("d")["n_completed"], led.spent("d")["eps"]) == (0, 0, 0.0)
    led.charge("d", GdpEvent(0.2))
    assert (led.spent("d")["n_charged"], led.spent("d")["n_completed"]) == (1, 0)


def test_a_ledger_in_a_new_nested_directory_is_created_and_errors_name_the_file(tmp_path):
    nested = tmp_path / "a" / "b" / "c" / "l.sqlite"
    Ledger(nested).register_dataset("d", eps_budget=1.0, delta_budget=DELTA)
    assert nested.exists() and Ledger(nested).datasets()[0]["dataset_id"] == "d"
    with pytest.raises(ValueError, match=re.escape(repr(str(tmp_path)))):
        Ledger(tmp_path)  # a directory
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not an sqlite database" * 100)
    with pytest.raises(ValueError, match=re.escape(repr(str(junk)))):
        Ledger(junk)
    with sqlite3.connect(nested) as con:
        con.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    with pytest.raises(ValueError, match=re.escape(f"ledger at {str(nested)!r} has schema_version 7")):
        Ledger(nested)


def test_a_charge_waits_for_another_writer_instead_of_failing(tmp_path):
    # another process holds the write lock for 6 s (sqlite3's default busy timeout is 5 s): the charge
    # waits for it (the ledger's timeout is 120 s) and then succeeds, it does not fail with "locked"
    led = _ledger(tmp_path)
    holder = sqlite3.connect(tmp_path / "l.sqlite", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(6.0, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        t0 = time.monotonic()
        r = led.charge("d", GdpEvent(0.1))
        assert time.monotonic() - t0 >= 5.5 and r.run_id >= 1
    finally:
        release.join()
        holder.close()
