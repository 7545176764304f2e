"""Oracle tests for dp_infer.privacy.ledger_records.

Oracles: the budget error's fields against the arithmetic it documents (remaining = budget -
spent, exactly) and against an independent Accountant composition; the receipt against the
ledger's own spend; ISO times against ``datetime`` from first principles (the epoch, a leap day);
the JSON round trip against events built by hand, including one whose JSON form loses a field
(it must be refused, since a later reader would account a different event).
"""

import datetime as dt
import json
import math
from pathlib import Path

import pytest

from dp_infer.privacy import ledger_records as LR
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import (ApproxDpEvent, GdpEvent, PureDpEvent, RdpCurveEvent, ZcdpEvent,
                                     event_from_dict)
from dp_infer.privacy.ledger import Ledger

DELTA = 1e-5


# --------------------------------------------------------------------------- default path


def test_default_path_strips_and_expands_the_environment_variable(monkeypatch, tmp_path):
    assert LR.LEDGER_ENV_VAR == "DP_INFER_LEDGER"
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("DP_INFER_LEDGER", "  ~/sub/l.sqlite \n")
    assert LR.default_ledger_path() == tmp_path / "sub" / "l.sqlite"
    monkeypatch.setenv("DP_INFER_LEDGER", str(tmp_path / "abs.sqlite"))
    assert LR.default_ledger_path() == tmp_path / "abs.sqlite"
    # blank (or whitespace only) means "not set": the default under the home directory
    for blank in ("", "   ", "\t\n"):
        monkeypatch.setenv("DP_INFER_LEDGER", blank)
        assert LR.default_ledger_path() == Path.home() / ".dp_infer" / "ledger.sqlite"
        assert LR.default_ledger_path() == tmp_path / ".dp_infer" / "ledger.sqlite"
    monkeypatch.delenv("DP_INFER_LEDGER")
    assert LR.default_ledger_path() == tmp_path / ".dp_infer" / "ledger.sqlite"


# --------------------------------------------------------------------------- budget error


def test_budget_error_fields_follow_their_definitions():
    e = LR.BudgetExceededError("adult", 2.0, 1e-6, 1.25, 2.5, 1.5, run_label="run-7")
    assert isinstance(e, RuntimeError)
    assert (e.dataset_id, e.eps_budget, e.delta_budget, e.eps_spent, e.eps_requested_total, e.eps_run,
            e.run_label) == ("adult", 2.0, 1e-6, 1.25, 2.5, 1.5, "run-7")
    assert e.eps_remaining == 2.0 - 1.25 == 0.75
    msg = str(e)
    for part in ("'adult'", "'run-7'", "eps spent 1.25", "eps_budget 2", "delta_budget 1e-06",
                 "remaining 0.75", "costs eps 1.5", "would reach eps 2.5 > 2", "nothing was recorded"):
        assert part in msg, part
    # the run label defaults to the empty string
    assert LR.BudgetExceededError("d", 1.0, DELTA, 0.0, 3.0, 3.0).run_label == ""


def test_refused_charge_reports_the_accountants_numbers(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=1.5, delta_budget=DELTA)
    first, second = GdpEvent(0.3), PureDpEvent(1.2)
    r = led.charge("d", first, run_label="a")
    with pytest.raises(LR.BudgetExceededError) as info:
        led.charge("d", second, run_label="b")
    e = info.value
    assert e.dataset_id == "d" and e.run_label == "b" and e.eps_budget == 1.5 and e.delta_budget == DELTA
    assert e.eps_spent == Accountant([first]).get_epsilon(DELTA) == r.eps_spent
    assert e.eps_run == Accountant([second]).get_epsilon(DELTA)
    assert e.eps_requested_total == max(Accountant([first, second]).get_epsilon(DELTA), e.eps_spent, e.eps_run)
    assert e.eps_requested_total > 1.5
    assert e.eps_remaining == 1.5 - e.eps_spent


# --------------------------------------------------------------------------- receipt


def test_receipt_to_dict_is_every_field(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=3.0, delta_budget=DELTA)
    r = led.charge("d", ZcdpEvent(0.01), run_label="x", count=2)
    d = r.to_dict()
    assert d == {"run_id": r.run_id, "dataset_id": "d", "run_label": "x", "eps_run": r.eps_run,
                 "eps_spent": r.eps_spent, "eps_remaining": r.eps_remaining, "eps_budget": 3.0,
                 "delta": DELTA, "charged_at": r.charged_at, "ledger_path": str(tmp_path / "l.sqlite")}
    assert r.eps_run == Accountant([(ZcdpEvent(0.01), 2)]).get_epsilon(DELTA)
    assert r.eps_remaining == 3.0 - r.eps_spent
    json.dumps(d)  # a receipt is JSON-able as is


# --------------------------------------------------------------------------- times


def test_iso_times_are_utc_and_none_stays_none():
    assert LR.iso(None) is None
    assert LR.iso(0.0) == "1970-01-01T00:00:00+00:00"
    leap = dt.datetime(2024, 2, 29, 23, 59, 30, 250000, tzinfo=dt.timezone.utc)
    assert LR.iso(leap.timestamp()) == "2024-02-29T23:59:30.250000+00:00"
    assert dt.datetime.fromisoformat(LR.iso(1.7e9)).timestamp() == 1.7e9


def test_history_times_are_iso_of_the_charge(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=3.0, delta_budget=DELTA)
    r = led.charge("d", GdpEvent(0.1))
    h = led.history("d")[0]
    assert h["charged_at"] == dt.datetime.fromtimestamp(r.charged_at, tz=dt.timezone.utc).isoformat()
    assert h["completed_at"] is None and h["run_label"] == ""
    led.complete(r)
    assert dt.datetime.fromisoformat(led.history("d")[0]["completed_at"]).tzinfo == dt.timezone.utc


# --------------------------------------------------------------------------- validators


@pytest.mark.parametrize("bad", ["", "   ", "\t", None, 3, b"adult", ["adult"]])
def test_dataset_id_must_be_a_non_blank_string(bad):
    with pytest.raises(ValueError, match="dataset_id must be a non-empty string"):
        LR.check_dataset_id(bad)


def test_valid_ids_and_labels_pass_unchanged():
    for s in ("adult", " padded ", "ü"):
        assert LR.check_dataset_id(s) == s
        assert LR.check_run_label(s) == s
    assert LR.check_run_label(None) == ""
    assert LR.check_run_label("") == ""


@pytest.mark.parametrize("bad", [3, 1.5, b"x", ["x"], True])
def test_run_label_must_be_a_string_or_none(bad):
    with pytest.raises(ValueError, match="run_label must be a string"):
        LR.check_run_label(bad)


# --------------------------------------------------------------------------- JSON round trip

EVENTS = [
    GdpEvent(0.7, label="g", assumptions=("a", "b"), metadata={"beta": 2.0, "steps": [1, 2]}),
    ZcdpEvent(0.01, tv_error=1e-9),
    RdpCurveEvent(orders=(1.5, 2.0, 8.0), values=(0.1, 0.2, math.inf)),
    PureDpEvent(0.5, label="p"),
    ApproxDpEvent(1.0, 1e-7),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.kind)
def test_serialised_event_is_its_sorted_json_and_rebuilds_equal(event):
    rebuilt, text = LR.serialise_event(event)
    assert text == json.dumps(event.to_dict(), sort_keys=True)
    assert json.loads(text) == event.to_dict()
    assert rebuilt == event and type(rebuilt) is type(event)
    assert rebuilt == event_from_dict(json.loads(text))
    assert dict(rebuilt.metadata) == json.loads(text)["metadata"]


class _GdpWithExtra(GdpEvent):
    """A GDP event whose JSON carries a field event_from_dict does not read back."""

    def _payload(self):
        return {**super()._payload(), "extra_sigma": 3.0}


def test_event_that_does_not_round_trip_is_refused_and_not_recorded(tmp_path):
    with pytest.raises(ValueError, match="does not survive a JSON round trip"):
        LR.serialise_event(_GdpWithExtra(0.5))
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=3.0, delta_budget=DELTA)
    with pytest.raises(ValueError, match="'gdp' does not survive a JSON round trip; cannot be recorded"):
        led.charge("d", _GdpWithExtra(0.5))
    assert led.history("d") == []


@pytest.mark.parametrize("bad", [{"kind": "gdp", "mu": 0.1}, 0.1, None, "gdp"])
def test_non_events_are_refused_by_name(bad):
    with pytest.raises(ValueError, match=r"event must be a PrivacyEvent .* got " + type(bad).__name__):
        LR.serialise_event(bad)
