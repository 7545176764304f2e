"""One driver (issue 38): every entry point that spends goes through :func:`dp_infer.infer.driver.execute`,
which charges exactly the plan's event (``plan_charges(plan)``) before the route reads the data,
refuses bad input and unrunnable plans before the charge, and keeps the draws when a step after the
charge fails.

The walk spies on :func:`dp_infer.infer.driver.run_route` (the one place a route's private computation
starts): at that moment the ledger must already hold, as its newest rows, the plan's own charges; and
every ledger row an entry point leaves must come from such a run.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dp_infer.infer import driver
from dp_infer.infer.driver import Hooks, Route, execute, plan_charges, register_route, route_for
from dp_infer.infer.fallback import DrawsKeptError
from dp_infer.privacy.events import GdpEvent
from dp_infer.privacy.ledger import Ledger
from tests.infer.test_one_door import DELTA, _ledger, _python_entry_points, data, write_csv  # noqa: F401 - fixture


# ---------------------------------------------------------------------- the driver alone
@dataclasses.dataclass
class _Plan:
    event: GdpEvent
    num_steps: int = 10
    num_chains: int = 1
    dim: int = 1
    route: str = "toy"


def _toy_route(seen, *, mu=0.5, steps=10, fail_in_run=False):
    def plan(public):
        if public.get("bad"):
            raise ValueError("bad: must be False")
        return _Plan(GdpEvent(mu=mu, label="toy"), num_steps=steps)

    def run(plan, data, public):
        seen.append(("run", data))
        if fail_in_run:
            raise RuntimeError("the run failed")
        return {"draws": np.ones((1, 3, 1)), "plan": plan}

    return Route("toy", plan, run)


def _rows(led):
    return led.history("default")


def test_execute_charges_the_plans_event_before_the_run_and_completes_after(tmp_path):
    led = _ledger(tmp_path)
    seen = []

    def run(plan, data, public):
        hist = _rows(led)  # the charge is on disk when the data are first read
        seen.append([(h["status"], h["event"]) for h in hist])
        return "result"

    route = Route("toy", lambda public: _Plan(GdpEvent(mu=0.5, label="toy")), run)
    assert execute(route, {}, "rows", ledger=led) == "result"
    assert seen == [[("charged", GdpEvent(mu=0.5, label="toy").to_dict())]]
    assert [h["status"] for h in _rows(led)] == ["completed"]
    assert _rows(led)[0]["run_label"].startswith("dp_infer toy toy ")


def test_a_refused_plan_or_preflight_charges_nothing_and_never_runs(tmp_path):
    led = _ledger(tmp_path)
    seen = []
    with pytest.raises(ValueError, match="bad: must be False"):
        execute(_toy_route(seen), {"bad": True}, "rows", ledger=led)
    # 2**31 steps overflow NumPyro's counter: refused by the default preflight, with the CLI's prefix
    with pytest.raises(ValueError, match=r"^--horizon/ess: the plan needs"):
        execute(_toy_route(seen, steps=2 ** 31), {}, "rows", ledger=led, prefix="--")
    assert seen == [] and _rows(led) == []


def test_a_ledger_given_as_a_function_is_opened_only_after_the_checks(tmp_path):
    opened = []

    def open_():
        opened.append(1)
        return _ledger(tmp_path)

    with pytest.raises(ValueError):
        execute(_toy_route([], steps=2 ** 31), {}, "rows", ledger=open_)
    assert opened == []
    execute(_toy_route([]), {}, "rows", ledger=open_)
    assert opened == [1]


def test_a_failed_run_keeps_its_charge_and_a_failed_finish_keeps_the_draws(tmp_path):
    led = _ledger(tmp_path)
    with pytest.raises(RuntimeError, match="the run failed"):
        execute(_toy_route([], fail_in_run=True), {}, "rows", ledger=led)
    # the data may have been read: the spend is never refunded
    assert [h["status"] for h in _rows(led)] == ["charged"]

    def finish(result, keeper, receipt):
        raise OSError("disk full")

    # after the charge the keeper holds the result: a failure in the caller's steps tries to keep it (a toy
    # result cannot be written, and the error says the run was charged); a real run's draws are kept
    with pytest.raises(OSError, match="disk full") as err:
        execute(_toy_route([]), {}, "rows", ledger=led, hooks=Hooks(finish=finish, out=tmp_path / "run.zip"))
    assert any("was charged" in note for note in err.value.__notes__)
    assert [h["status"] for h in _rows(led)] == ["charged", "completed"]


def test_a_failed_finish_keeps_a_real_runs_draws(tmp_path, data):
    import dp_infer
    from dp_infer.infer.fit import ESTIMATE_ROUTE, estimate_public

    X, y = data
    loss = dp_infer.logistic(row_norm=1.0)
    public = estimate_public(loss, len(X), X.shape[1], eps=1.0, delta=DELTA,
                             sample_options=dict(seed=1, progress_bar=False))

    def finish(result, keeper, receipt):
        raise OSError("disk full")

    with pytest.raises(DrawsKeptError) as err:
        execute(ESTIMATE_ROUTE, public, (loss, X, y), hooks=Hooks(finish=finish, out=tmp_path / "run.zip"))
    kept = dp_infer.PrivateRun.load(err.value.path)
    assert kept.draws().shape[-1] == X.shape[1] and np.all(np.isfinite(kept.draws()))


def test_plan_charges_is_the_plans_event_once_or_its_own_list():
    ev = GdpEvent(mu=0.3, label="x")
    assert plan_charges(_Plan(ev)) == [(ev, 1)]

    class Several:
        def charges(self):
            return [(ev, 4)]

    assert plan_charges(Several()) == [(ev, 4)]
    with pytest.raises(ValueError, match="without an event"):
        plan_charges(object())


def test_routes_are_registered_once_by_name():
    import dp_infer.infer.fit  # noqa: F401 - registers the estimate route
    import dp_infer.infer.posterior  # noqa: F401

    assert route_for("estimate").name == "estimate" and route_for("posterior").name == "posterior"
    with pytest.raises(ValueError, match="no route 'nope' is registered"):
        route_for("nope")
    with pytest.raises(ValueError, match="registered already"):
        register_route(Route("estimate", lambda p: None, lambda p, d, q: None))


# ---------------------------------------------------------------------- the walk over every entry point
ENTRY_POINTS = ["fit estimate", "fit proximal", "fit model", "fit model posterior", "fit model posterior, fisher",
                "estimator", "rashomon", "fit posterior", "extend"]


def _more_entry_points(X, y):
    import dp_infer

    def posterior(led):
        return dp_infer.fit(dp_infer.logistic(row_norm=1.0), X, y, eps=1.0, delta=DELTA, target="posterior",
                            prior_precision=1.0, ess=50, seed=3, progress_bar=False, ledger=led)

    def extend(led):
        run = dp_infer.fit(dp_infer.logistic(row_norm=1.0), X, y, eps=1.0, delta=DELTA, seed=1, progress_bar=False,
                           ledger=led)
        run.extend(num_steps=run.plan.thinning * 10, ledger=led)
        return run

    return {"fit posterior": posterior, "extend": extend}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_every_entry_point_charges_exactly_its_plans_event_before_reading_the_data(tmp_path, data, entry,
                                                                                   monkeypatch):
    X, y = data
    led = _ledger(tmp_path)
    runs = []
    original = driver.run_route

    def spy(route, plan, rows, public):
        hist = _rows(led)
        charges = plan_charges(plan)
        newest = hist[len(hist) - len(charges):]
        # the newest rows are this plan's own charges, each charged (not completed) as the run starts
        assert [(h["event"], h["count"], h["status"]) for h in newest] == \
            [(ev.to_dict(), count, "charged") for ev, count in charges], route.name
        runs.append((route.name, len(charges)))
        return original(route, plan, rows, public)

    monkeypatch.setattr(driver, "run_route", spy)
    entries = {**_python_entry_points(X, y), **_more_entry_points(X, y)}
    entries[entry](led)
    hist = _rows(led)
    assert runs, f"{entry} did not run through dp_infer.infer.driver.execute"
    # every row the entry point left was charged by a run of the driver (none beside it)
    assert sum(count for _, count in runs) == len(hist)
    assert all(h["status"] == "completed" for h in hist)


def test_bad_input_is_refused_before_the_charge_at_every_entry_point(tmp_path, data):
    import dp_infer
    from dp_infer.infer.estimators import PrivateLogisticRegression
    from dp_infer.rashomon import linear_model, sample_rashomon

    X, y = data
    led = _ledger(tmp_path)
    y_bad = y.copy()
    y_bad[0] = 3.0  # not a 0/1 label
    calls = [
        lambda: dp_infer.fit(dp_infer.logistic(row_norm=1.0), X, y_bad, eps=1.0, delta=DELTA, ledger=led),
        lambda: dp_infer.fit(dp_infer.logistic(row_norm=1.0), X, y_bad, eps=1.0, delta=DELTA, target="posterior",
                             prior_precision=1.0, ledger=led),
        lambda: dp_infer.fit(dp_infer.hinge(row_norm=1.0), X, y_bad, eps=1.0, delta=DELTA, ledger=led),
        lambda: PrivateLogisticRegression(eps=-1.0, delta=DELTA, ledger=led).fit(X, y),
        lambda: sample_rashomon(linear_model("logistic", row_norm=1.0, l2=0.1, intercept=False), X, y_bad, 0.05,
                                eps=1.0, delta=DELTA, ledger=led),
        lambda: sample_rashomon(linear_model("logistic", row_norm=1.0, l2=0.1, intercept=False), X, y, 0.05,
                                eps=1.0, delta=DELTA, seed=-1, ledger=led),
    ]
    for call in calls:
        with pytest.raises(ValueError):
            call()
    assert _rows(led) == []


def test_the_cli_runs_through_the_driver(tmp_path, data, monkeypatch):
    from click.testing import CliRunner

    from dp_infer.cli import main

    X, y = data
    csv = write_csv(tmp_path / "d.csv", X, y)
    names = []
    original = driver.run_route

    def spy(route, plan, rows, public):
        names.append(route.name)
        return original(route, plan, rows, public)

    monkeypatch.setattr(driver, "run_route", spy)
    led_path = tmp_path / "ledger.sqlite"
    common = ["--ledger", str(led_path), "--budget", "1000", str(DELTA), "--reproducible-seed", "1"]
    for argv in (["sample", str(csv), "--target", "y", "--eps", "1", "--chains", "1", "--no-progress"],
                 ["sample", str(csv), "--target", "y", "--eps", "1", "--loss", "hinge", "--no-progress"],
                 ["rashomon", str(csv), "--target", "y", "--eps", "1", "--draws", "50", "--l2", "0.1"]):
        res = CliRunner().invoke(main, argv + common)
        assert res.exit_code == 0, res.output
    assert names == ["estimate", "proximal", "rashomon"]
    hist = Ledger(led_path).history("default")
    assert [h["run_label"].split(" 20")[0] for h in hist] == ["dp-infer sample trajectory", "dp-infer sample proximal",
                                                              "dp-infer rashomon rashomon_path"]
