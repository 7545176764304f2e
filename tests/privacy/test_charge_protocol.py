"""The one charge protocol (privacy.ledger.charged): charge before the body, complete after it,
a crash keeps the charge, a refusal runs nothing and records nothing."""

from __future__ import annotations

import pytest

from dp_infer.privacy.events import GdpEvent
from dp_infer.privacy.ledger import BudgetExceededError, Ledger, charged, open_ledger, unique_run_label


def _ledger(tmp_path, eps=2.0):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps, 1e-5)
    return led


def test_charge_is_on_disk_before_the_body_and_completed_after(tmp_path):
    led = _ledger(tmp_path)
    seen = {}
    with charged(str(led.path), "d", GdpEvent(0.5), "run") as receipt:
        seen["during"] = [r["status"] for r in Ledger(led.path).history("d")]
    assert seen["during"] == ["charged"]
    assert [r["status"] for r in led.history("d")] == ["completed"]
    # the recorded spend is the accountant's eps of the event at the dataset's delta
    assert led.spent("d")["eps"] == pytest.approx(receipt.eps_run, rel=1e-12)
    assert receipt.eps_run == pytest.approx(led.accountant("d").get_epsilon(1e-5), rel=1e-12)


def test_a_crash_in_the_body_keeps_the_charge(tmp_path):
    led = _ledger(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        with charged(led, "d", GdpEvent(0.5), "run"):
            raise RuntimeError("boom")
    hist = led.history("d")
    assert [r["status"] for r in hist] == ["charged"]
    assert led.spent("d")["eps"] > 0


def test_an_overspend_runs_nothing_and_records_nothing(tmp_path):
    led = _ledger(tmp_path, eps=0.1)
    ran = []
    with pytest.raises(BudgetExceededError):
        with charged(led, "d", GdpEvent(1.0), "run"):
            ran.append(1)
    assert ran == [] and led.history("d") == []


def test_no_ledger_yields_none_and_budget_without_ledger_is_refused(tmp_path):
    with charged(None, "d", GdpEvent(1.0), "run") as receipt:
        assert receipt is None
    with pytest.raises(ValueError, match="budget needs a ledger"):
        with charged(None, "d", GdpEvent(1.0), "run", budget=(1.0, 1e-5)):
            pass
    with pytest.raises(ValueError, match="ledger must be"):
        open_ledger(3.0)


def test_budget_is_registered_then_charged_and_on_charge_sees_the_receipt(tmp_path):
    got = []
    with charged(tmp_path / "new.sqlite", "adult", GdpEvent(0.3), "cli", budget=(3.0, 1e-6),
                 on_charge=lambda led, rec: got.append((led.spent("adult")["n_charged"], rec.run_label))):
        pass
    assert got[0][0] == 1 and got[0][1].startswith("cli ")
    assert Ledger(tmp_path / "new.sqlite").spent("adult")["eps_budget"] == 3.0


def test_labels_are_unique_and_carry_no_seed():
    a, b = unique_run_label("dp_infer fit"), unique_run_label("dp_infer fit")
    assert a != b and a.startswith("dp_infer fit ")
