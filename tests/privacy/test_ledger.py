"""Persistent privacy ledger: restart, refusal, Accountant composition, concurrency, killed runs."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import sqlite3
import time

import pytest

from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import GdpEvent, PureDpEvent, ZcdpEvent
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.privacy.ledger import (
    charged,
    BudgetExceededError,
    ChargeReceipt,
    Ledger,
    UnknownDatasetError,
    default_ledger_path,
)

DELTA = 1e-5


def _mp_context():
    """A forkserver context whose server imports the ledger (and jax, via dp_infer) once.

    Spawned workers would each pay a full ``import dp_infer`` (jax, dp-accounting: several CPU
    seconds apiece, over a minute for 8 workers on a loaded 2-core box). A forkserver gives the
    same isolation (children are forked from a clean, single-threaded server process, not from
    this multithreaded pytest process) while paying the import once. Falls back to spawn.
    """
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["dp_infer.privacy.ledger", __name__])
    return ctx


# --------------------------------------------------------------------------- subprocess workers
# (module level so that the spawn start method can import them)


def _charge_worker(path, dataset_id, mu, barrier, results):
    ledger = Ledger(path)
    barrier.wait(timeout=120)  # all workers charge at the same moment
    try:
        r = ledger.charge(dataset_id, GdpEvent(mu), run_label=f"worker-{os.getpid()}")
        results.put(("ok", r.run_id))
    except BudgetExceededError as e:
        results.put(("refused", e.eps_spent))
    except BaseException as e:  # noqa: BLE001 - report anything else to the parent
        results.put(("error", repr(e)))


def _killed_worker(path, dataset_id, mu, charge_done, failed):
    try:
        ledger = Ledger(path)
        with charged(ledger, dataset_id, GdpEvent(mu), "killed-run"):
            charge_done.set()
            time.sleep(600)  # the parent SIGKILLs us here, before complete() runs
    except BaseException:
        failed.set()
        raise


# --------------------------------------------------------------------------- tests


def test_budget_survives_restart_and_composition_is_the_accountants(tmp_path):
    path = tmp_path / "ledger.sqlite"
    led = Ledger(path)
    led.register_dataset("adult", eps_budget=5.0, delta_budget=DELTA)
    led.register_dataset("adult", eps_budget=5.0, delta_budget=DELTA)  # idempotent
    e1, e2 = GdpEvent(0.4, label="a"), GdpEvent(0.7, label="b")
    r1 = led.charge("adult", e1, run_label="first")
    assert isinstance(r1, ChargeReceipt) and r1.run_id >= 1
    led.complete(r1)
    del led

    led2 = Ledger(path)  # "restart": a fresh object on the same file
    s = led2.spent("adult")
    assert s["n_runs"] == 1
    assert s["eps"] == pytest.approx(Accountant([e1]).get_epsilon(DELTA), rel=1e-12)
    r2 = led2.charge("adult", e2, run_label="second")

    want = Accountant([e1, e2]).get_epsilon(DELTA)
    # independent check of the composition: GDP composes as mu = sqrt(mu1^2 + mu2^2)
    assert want == pytest.approx(Accountant([GdpEvent(math.hypot(0.4, 0.7))]).get_epsilon(DELTA), rel=1e-9)
    assert want < Accountant([e1]).get_epsilon(DELTA) + Accountant([e2]).get_epsilon(DELTA)  # not a plain sum

    s = Ledger(path).spent("adult")
    assert s["eps"] == pytest.approx(want, rel=1e-12)
    assert s["delta"] == DELTA and s["n_runs"] == 2
    assert s["remaining_eps"] == pytest.approx(5.0 - want, rel=1e-12)
    assert r2.eps_spent == pytest.approx(want, rel=1e-12)

    hist = Ledger(path).history("adult")
    assert [h["run_label"] for h in hist] == ["first", "second"]
    assert [h["status"] for h in hist] == ["completed", "charged"]
    assert hist[0]["event"] == e1.to_dict() and hist[1]["event"] == e2.to_dict()
    assert hist[1]["eps_after"] == pytest.approx(want, rel=1e-12)

    plot = Ledger(path).records_for_plot("adult")
    assert [p["run"] for p in plot] == ["first", "second"]
    assert plot[1]["eps_cumulative"] == pytest.approx(want, rel=1e-12)
    assert plot[1]["eps_run"] == pytest.approx(Accountant([e2]).get_epsilon(DELTA), rel=1e-12)
    assert all(p["eps_cumulative"] + p["eps_remaining"] == pytest.approx(5.0) for p in plot)


def test_charge_over_budget_is_refused_and_not_recorded(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=1.0, delta_budget=DELTA)
    first = PureDpEvent(0.6)
    led.charge("d", first, run_label="ok")
    before = led.spent("d")
    with pytest.raises(BudgetExceededError) as info:
        led.charge("d", PureDpEvent(0.6), run_label="too-much")
    err = info.value
    assert "spent" in str(err) and "remaining" in str(err)
    assert err.eps_spent == pytest.approx(before["eps"])
    assert err.eps_remaining == pytest.approx(1.0 - before["eps"])
    assert err.eps_requested_total == pytest.approx(Accountant([(first, 2)]).get_epsilon(DELTA)) and \
        err.eps_requested_total > 1.0
    after = led.spent("d")
    assert after == before and len(led.history("d")) == 1
    # a mixed composition that fits is accepted, and spent matches the Accountant on the same events
    z = ZcdpEvent(0.001)
    led.charge("d", z, count=3)
    assert led.spent("d")["eps"] == pytest.approx(Accountant([first, (z, 3)]).get_epsilon(DELTA), rel=1e-12)


def test_charged_completes_on_clean_exit_and_stays_charged_on_error(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", eps_budget=10.0, delta_budget=DELTA)
    with charged(led, "d", GdpEvent(0.5), "clean") as rec:
        assert led.history("d")[-1]["status"] == "charged"  # recorded before the body runs
    with pytest.raises(RuntimeError, match="boom"):
        with charged(led, "d", GdpEvent(0.5), "crashed"):
            raise RuntimeError("boom")
    hist = led.history("d")
    assert [(h["run_label"].split()[0], h["status"]) for h in hist] == [("clean", "completed"), ("crashed", "charged")]
    assert led.spent("d")["eps"] == pytest.approx(Accountant([(GdpEvent(0.5), 2)]).get_epsilon(DELTA), rel=1e-12)
    led.complete(rec)  # idempotent


def test_concurrent_processes_cannot_jointly_overspend(tmp_path):
    path = str(tmp_path / "l.sqlite")
    budget = 1.0
    mu = gdp_mu(0.35 * budget, DELTA)  # each run alone costs 35% of the budget
    ev = GdpEvent(mu)
    assert Accountant([ev]).get_epsilon(DELTA) == pytest.approx(0.35 * budget, rel=1e-6)
    # how many identical runs fit, by the Accountant
    n_fit = 0
    while Accountant([(ev, n_fit + 1)]).get_epsilon(DELTA) <= budget:
        n_fit += 1
    assert 1 <= n_fit < 8

    Ledger(path).register_dataset("d", eps_budget=budget, delta_budget=DELTA)
    n_proc = 8
    ctx = _mp_context()
    barrier, results = ctx.Barrier(n_proc), ctx.Queue()
    procs = [ctx.Process(target=_charge_worker, args=(path, "d", mu, barrier, results)) for _ in range(n_proc)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=180) for _ in range(n_proc)]
    for p in procs:
        p.join(timeout=60)
    assert not [o for o in outcomes if o[0] == "error"], outcomes
    n_ok = sum(o[0] == "ok" for o in outcomes)
    # identical events: the serialised charges accept exactly the ones that fit
    assert n_ok == n_fit, outcomes
    s = Ledger(path).spent("d")
    assert s["n_runs"] == n_ok
    assert s["eps"] <= budget
    assert s["eps"] == pytest.approx(Accountant([(ev, n_ok)]).get_epsilon(DELTA), rel=1e-12)


def test_killed_run_stays_charged_and_counts(tmp_path):
    path = str(tmp_path / "l.sqlite")
    Ledger(path).register_dataset("d", eps_budget=10.0, delta_budget=DELTA)
    ctx = _mp_context()
    charged, failed = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_killed_worker, args=(path, "d", 0.8, charged, failed))
    p.start()
    try:
        t0 = time.monotonic()
        while not charged.wait(timeout=0.2):
            assert not failed.is_set() and p.is_alive(), "worker failed before charging"
            assert time.monotonic() - t0 < 180, "worker never charged"
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.join(timeout=60)
    assert p.exitcode == -signal.SIGKILL
    led = Ledger(path)
    hist = led.history("d")
    assert [(h["run_label"].split()[0], h["status"]) for h in hist] == [("killed-run", "charged")]
    assert led.spent("d")["eps"] == pytest.approx(Accountant([GdpEvent(0.8)]).get_epsilon(DELTA), rel=1e-12)
    assert led.spent("d")["n_charged"] == 1


def test_bad_inputs_name_the_parameter(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    with pytest.raises(ValueError, match="eps_budget"):
        led.register_dataset("d", eps_budget=-1.0, delta_budget=DELTA)
    with pytest.raises(ValueError, match="eps_budget"):
        led.register_dataset("d", eps_budget=math.inf, delta_budget=DELTA)
    for bad in (0.0, 1.0, -0.1, 2.0, math.nan):
        with pytest.raises(ValueError, match=r"delta_budget.*\(0, 1\)"):
            led.register_dataset("d", eps_budget=1.0, delta_budget=bad)
    with pytest.raises(ValueError, match="dataset_id"):
        led.register_dataset("", eps_budget=1.0, delta_budget=DELTA)
    with pytest.raises(UnknownDatasetError, match="dataset_id 'nope'"):
        led.charge("nope", GdpEvent(0.1))
    with pytest.raises(UnknownDatasetError, match="dataset_id"):
        led.spent("nope")
    led.register_dataset("d", eps_budget=1.0, delta_budget=DELTA)
    with pytest.raises(ValueError, match="eps_budget"):
        led.register_dataset("d", eps_budget=2.0, delta_budget=DELTA)  # different budget
    with pytest.raises(ValueError, match="event"):
        led.charge("d", {"kind": "gdp", "mu": 0.1})
    with pytest.raises(ValueError, match="count"):
        led.charge("d", GdpEvent(0.1), count=0)
    with pytest.raises(ValueError, match="path"):
        Ledger(":memory:")
    assert led.history("d") == []  # nothing recorded by any of the failures


def test_default_ledger_path(monkeypatch, tmp_path):
    monkeypatch.setenv("DP_INFER_LEDGER", str(tmp_path / "x" / "my.sqlite"))
    assert default_ledger_path() == tmp_path / "x" / "my.sqlite"
    led = Ledger()
    assert led.path == tmp_path / "x" / "my.sqlite" and led.path.exists()
    monkeypatch.delenv("DP_INFER_LEDGER")
    assert str(default_ledger_path()).endswith(os.path.join(".dp_infer", "ledger.sqlite"))
    # the file is an ordinary SQLite database a reviewer can open
    with sqlite3.connect(led.path) as con:
        assert {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")} >= {"datasets", "runs"}
