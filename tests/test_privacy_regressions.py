"""Regressions found by mutation testing and by edge-regime probing (issue 19), each checked
against an oracle that does not share the code under test: closed forms, the exact Gaussian
profile, or a second construction of the same object.

* ``Accountant.report`` at eps = 0 for a tiny pure event crashed inside dp-accounting's
  RDP-to-delta conversion (``log1p(-exp(-r))`` of r ~ 1e-18); that route now gives no bound and
  the others answer. Oracle: a pure eps0 event's exact delta at eps = 0 is tanh(eps0 / 2).
* ``get_epsilon`` with a subnormal TV error raised OverflowError (expm1 of ~730); and returned
  eps = inf when every feasible eps lay in the last 1/128 of its search range (the grid stopped
  one cell short). Oracle: the accountant's own delta at the returned eps, and the pure event's
  eps0 (feasible by construction).
* ``path_delta(method="rdp_grid")`` returned delta = 0 (log -inf) when dp-accounting's float delta
  underflowed below 1e-308. Oracle: the exact Gaussian profile (``method="gdp"``) is a lower bound
  on every valid conversion.
* ``calibrate`` crashed (``cannot convert float NaN to integer``) on a NaN or infinite G instead of
  a one-line error.
* ``Accountant`` raised OverflowError (inside dp-accounting's PLD construction, e^eps) for a pure
  or approximate event with eps > ~709.8 and for a Gaussian part with mu > ~3e4; the PLD route now
  gives no bound there and the others answer. Oracle: randomized response / the (eps0, delta0)
  mechanism's exact eps in 50-digit mpmath (a lower bound on any valid report), and the Gaussian
  part alone (a composition leaks at least as much as its part).
* ``losses.with_l2`` kept the old value range (which includes 0.5 l2 r^2 over the domain): a larger
  l2 under-reported the pure-eps route's sensitivity. Oracle: the same loss built with that l2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_infer import losses
from dp_infer.routes.calibrate import calibrate
from dp_infer.domains import L2Ball
from dp_infer.losses import LossConstants
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import ApproxDpEvent, GdpEvent, PureDpEvent
from dp_infer.privacy.path import path_delta


@pytest.mark.parametrize("eps0", [1e-9, 1e-12, 1e-15])
def test_report_at_eps_zero_of_a_tiny_pure_event_bounds_the_exact_delta(eps0):
    rep = Accountant([PureDpEvent(eps0)]).report(eps=0.0)
    exact = math.tanh(eps0 / 2.0)  # TV distance of the worst pure-eps0 pair = its delta at eps = 0
    assert exact <= rep["delta"] <= 2.0 * exact + 1e-300  # never below; RDP->DP costs at most sqrt(2) here
    assert rep["routes_log_delta"]["rdp_dp_accounting"] == 0.0  # that route gave no bound, none invented


def test_epsilon_with_a_subnormal_tv_error_is_the_tv_free_epsilon():
    delta = 1e-5
    with_tv = Accountant([GdpEvent(1.0, tv_error=5e-324)])
    eps = with_tv.get_epsilon(delta)
    assert math.isfinite(eps)
    assert with_tv.get_delta(eps) <= delta  # the reported eps meets the target, TV slack included
    # a TV error of 5e-324 moves delta by (1 + e^eps) 5e-324: the eps of the exact Gaussian profile
    assert eps == pytest.approx(Accountant([GdpEvent(1.0)]).get_epsilon(delta), rel=1e-9)


@pytest.mark.parametrize("margin", [1.001, 1.005, 1.0075])
def test_epsilon_found_when_feasible_only_in_the_last_cell_of_the_search(margin):
    # pure eps0 = 1 plus TV tau: (1 + e^eps) tau = delta at eps = log(margin e) ~ 1 + (margin - 1), so
    # the feasible eps lie in [~1, eps_hi): within the last 1/128 of [0, eps_hi] for these margins
    delta = 1e-5
    eps_hi = 1.0 + math.log(margin)
    tau = delta / (1.0 + math.exp(eps_hi))
    acc = Accountant([PureDpEvent(1.0, tv_error=tau)])
    eps = acc.get_epsilon(delta)
    assert eps <= 1.0  # eps = eps0 is feasible: privacy delta 0 and TV (1 + e) tau < delta
    assert acc.get_delta(eps) <= delta


@pytest.mark.parametrize("time", [1e-1, 1e-2, 1e-3, 1e-4, 1e-5])
def test_rdp_grid_path_delta_never_below_the_exact_gaussian_profile(time):
    ld_grid = path_delta(1.0, 1.0, time, 1.0, method="rdp_grid", log=True)
    ld_exact = path_delta(1.0, 1.0, time, 1.0, method="gdp", log=True)
    assert math.isfinite(ld_grid)
    assert ld_grid >= ld_exact


def test_rdp_grid_path_delta_is_continuous_across_the_float_underflow():
    # log delta of the grid conversion is monotone in the horizon and has no jump to -inf where
    # dp-accounting's float delta underflows (between t = 1e-2 and 1e-3 for eps = 1)
    ts = np.geomspace(1e-1, 1e-4, 40)
    lds = [path_delta(1.0, 1.0, float(t), 1.0, method="rdp_grid", log=True) for t in ts]
    assert all(np.isfinite(lds))
    assert all(b <= a + 1e-9 for a, b in zip(lds, lds[1:]))


@pytest.mark.parametrize("G", [math.nan, math.inf, 0.0, -1.0])
def test_calibrate_refuses_a_loss_without_a_finite_positive_g_in_one_line(G):
    with pytest.raises(ValueError, match=r"grad_diff = .*must be a finite number > 0") as e:
        calibrate(LossConstants(lipschitz=1.0, grad_diff=G, smoothness=0.25), 1000, 3, eps=1.0, delta=1e-5)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("make", [
    lambda l2: losses.logistic(row_norm=1.0, l2=l2, domain=L2Ball(dim=3, radius=2.0)),
    lambda l2: losses.huber(row_norm=1.0, l2=l2, domain=L2Ball(dim=3, radius=2.0)),
])
@pytest.mark.parametrize("l2_from, l2_to", [(0.0, 0.5), (0.5, 0.0), (0.1, 2.0)])
def test_with_l2_gives_the_constants_of_the_loss_built_with_that_l2(make, l2_from, l2_to):
    got = losses.with_l2(make(l2_from), l2_to).constants
    want = make(l2_to).constants
    for field in ("lipschitz", "grad_diff", "smoothness", "strong_convexity", "value_range"):
        g, w = getattr(got, field), getattr(want, field)
        assert (g is None and w is None) or g == pytest.approx(w, rel=1e-12, abs=1e-12), field


def test_events_beyond_float_range_of_e_to_the_eps_are_accounted_not_a_crash():
    import mpmath as mp

    from dp_infer.privacy import conversions as C

    delta = 1e-5
    with mp.workdps(50):
        d, e0, d0 = mp.mpf(delta), mp.mpf(1000), mp.mpf("1e-6")
        rr = 1000 + mp.log(1 - d - d * mp.exp(-e0))  # randomized response: delta(eps) = (e^e0 - e^eps) / (1 + e^e0)
        approx_exact = mp.log(mp.exp(e0) - (d - d0) / (1 - d0) * (1 + mp.exp(e0)))
    e = Accountant([PureDpEvent(1000.0)]).get_epsilon(delta)
    assert rr <= e <= 1000.0
    e = Accountant([ApproxDpEvent(1000.0, 1e-6)]).get_epsilon(delta)
    assert approx_exact <= e <= 1000.0
    rep = Accountant([PureDpEvent(1000.0)]).report(eps=0.0)
    assert rep["log_delta_privacy"] == 0.0 and rep["routes_log_delta"]["pld"] == 0.0
    # a huge Gaussian part composed with a pure event: finite, and at least the Gaussian part's eps
    e = Accountant([GdpEvent(1e5), PureDpEvent(1.0)]).get_epsilon(delta)
    assert C.gdp_epsilon(1e5, delta) <= e < math.inf


# --- issue 40: an outside audit's findings, each refused before anything is charged --------------

_DELTA40 = 1e-5


def _ledger40(tmp_path):
    from dp_infer.privacy.ledger import Ledger

    led = Ledger(tmp_path / "ledger.sqlite")
    led.register_dataset("default", 1000.0, _DELTA40)
    return led


def _logistic_rows(n=200, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ np.array([1.0, -1.0, 0.5])[:d]))).astype(float)
    return X, y


def _logreg(X, y=None):
    import numpyro
    import numpyro.distributions as dist

    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("rows", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)


def test_sample_refuses_a_posterior_mode_plan(tmp_path):
    # issue 40 (1): dp_infer.sample ran a posterior plan as an estimate-mode plan (no metric, no clip,
    # no prior: eps ~ 6.7 spent where the plan's event said 1)
    import dp_infer
    from dp_infer.routes.posterior import plan_posterior

    X, y = _logistic_rows()
    loss = losses.logistic(row_norm=1.0)
    led = _ledger40(tmp_path)
    plan = plan_posterior(loss, len(y), X.shape[1], eps=1.0, delta=_DELTA40, prior_precision=1.0, ess=50)
    with pytest.raises(ValueError, match=r"plan: .*target='posterior'.*sample_posterior") as e:
        dp_infer.sample(loss, X, y, plan, seed=0, progress_bar=False)
    assert "\n" not in str(e.value)
    assert led.history("default") == []


def test_sample_model_refuses_a_model_posterior_plan(tmp_path):
    # issue 40 (1): the same through sample(model=..., plan=<fit(model=..., target='posterior') plan>)
    import dp_infer
    from dp_infer.infer.fit_model import prepare_model
    from dp_infer.infer.model_posterior_plan import plan_model_posterior

    X, y = _logistic_rows()
    led = _ledger40(tmp_path)
    ml = prepare_model(_logreg, X, y, 1.0, None, None, None, None, "X", "y")[0]
    plan, _, _ = plan_model_posterior(ml, len(y), eps=1.0, delta=_DELTA40, clip_norm=1.0, ess=50)
    assert plan.target == "posterior"
    with pytest.raises(ValueError, match=r"plan: .*target='posterior'") as e:
        dp_infer.sample(model=_logreg, X=X, y=y, plan=plan, clip_norm=1.0, seed=0, progress_bar=False)
    assert "\n" not in str(e.value)
    assert led.history("default") == []


def test_extend_a_model_run_keeps_the_clipped_row_count_in_its_report(tmp_path):
    # issue 40 (2): extend() after fit(model=...) dropped the charged clipped-row count from the event
    # (report eps 1.0 -> 0.9749 while the ledger had 1.0026)
    import dp_infer

    X, y = _logistic_rows()
    led = _ledger40(tmp_path)
    run = dp_infer.fit(model=_logreg, X=X, y=y, eps=1.0, delta=_DELTA40, clip_norm=1.0, seed=1,
                       progress_bar=False, ledger=led)
    assert "clipped_row_count" in run.plan.event.label
    run.extend(num_steps=run.plan.thinning * 10, ledger=led)
    spent = led.spent("default")["eps"]
    reported = run.report()["eps_spent"]
    assert reported >= spent - 1e-6  # never under-reported
    assert reported == pytest.approx(spent, rel=1e-6)


def test_model_posterior_refuses_a_plan_beyond_the_step_counter_before_charging(tmp_path):
    # issue 40 (3): fit(model=..., target='posterior', ess=1e11) charged, then NumPyro overflowed
    import dp_infer

    X, y = _logistic_rows()
    led = _ledger40(tmp_path)
    with pytest.raises(ValueError, match=r"horizon/ess: the plan needs .* steps per chain") as e:
        dp_infer.fit(model=_logreg, X=X, y=y, eps=1.0, delta=_DELTA40, clip_norm=1.0, seed=1, ess=int(1e11),
                     target="posterior", progress_bar=False, ledger=led)
    assert "\n" not in str(e.value)
    assert led.history("default") == []


def _hand_built_rows(labels):
    import jax.numpy as jnp

    from dp_infer.parallel.sharding import ShardedRows, data_mesh

    X, _ = _logistic_rows(n=200)
    y = np.resize(np.asarray(labels, dtype=np.float32), len(X))
    mesh = data_mesh()
    return ShardedRows(jnp.asarray(X, jnp.float32), jnp.asarray(y), jnp.ones(len(X), jnp.float32), len(X),
                       mesh, 4096, "float32", "toward_zero")


def test_a_hand_built_sharded_rows_is_refused_before_charging(tmp_path):
    # issue 40 (4): a ShardedRows built by hand skipped the label and row checks (labels {1, 5} for the
    # logistic loss: eps = 1 reported, the worst pair at 4.5x the bound)
    from dp_infer.infer.posterior import fit_posterior

    led = _ledger40(tmp_path)
    loss = losses.logistic(row_norm=1.0)
    with pytest.raises(ValueError, match=r"ShardedRows: .*shard_rows") as e:
        fit_posterior(loss, _hand_built_rows([1.0, 5.0]), None, eps=1.0, delta=_DELTA40, prior_precision=1.0,
                      ess=50, seed=0, progress_bar=False, ledger=led)
    assert "\n" not in str(e.value)
    assert led.history("default") == []


def test_rows_placed_for_another_loss_are_rechecked_before_charging(tmp_path):
    # issue 40 (4): rows checked for a squared loss (labels in [-5, 5]) reach fit() with the logistic loss
    import dp_infer
    from dp_infer.parallel.sharding import shard_rows

    X, _ = _logistic_rows(n=200)
    y = np.resize(np.array([1.0, 5.0]), len(X))
    led = _ledger40(tmp_path)
    rows = shard_rows(losses.squared(5.0, L2Ball(3, radius=2.0)), X, y)
    with pytest.raises(ValueError, match=r"y must contain only 0/1 labels") as e:
        dp_infer.fit(losses.logistic(row_norm=1.0), rows, None, eps=1.0, delta=_DELTA40, seed=0,
                     progress_bar=False, ledger=led)
    assert "\n" not in str(e.value)
    assert led.history("default") == []
    wider = shard_rows(losses.squared(5.0, L2Ball(3, radius=2.0), row_norm=2.0), 2.0 * X, y)
    with pytest.raises(ValueError, match=r"row_norm"):
        dp_infer.fit(losses.squared(5.0, L2Ball(3, radius=2.0)), wider, None, eps=1.0, delta=_DELTA40, seed=0,
                     progress_bar=False, ledger=led)
    assert led.history("default") == []


@pytest.mark.parametrize("bad", [2.5, 0.5, 3.000001])
def test_poisson_refuses_non_integer_counts_before_charging(tmp_path, bad):
    # issue 40 (5): counts of 2.5 were fitted and charged while -3 was refused "(integers)"
    from dp_infer.infer.estimators import PrivatePoissonRegression

    X, _ = _logistic_rows(n=50)
    y = np.resize(np.array([0.0, 1.0, 3.0]), len(X))
    y[7] = bad
    led = _ledger40(tmp_path)
    est = PrivatePoissonRegression(max_count=10, eps=1.0, horizon=0.2, num_chains=1, random_state=0, ledger=led,
                                   dataset_id="default")
    with pytest.raises(ValueError, match=r"y must be integer counts in \{0, 1, \.\.\., 10\}") as e:
        est.fit(X, y)
    assert "\n" not in str(e.value)
    assert led.history("default") == []
    with pytest.raises(ValueError, match=r"y must be integer counts"):
        losses.poisson(10.0, L2Ball(3, 2.0)).check_data(X, y)


def test_cli_says_when_the_route_does_not_use_the_requested_horizon(tmp_path, monkeypatch, capsys):
    # issue 40 (5): `dp-infer sample --horizon 1e12` ran route last_iterate at horizon 490.5, silently
    import pandas as pd

    from tests.support.cli import run_cli

    X, y = _logistic_rows(n=300)
    csv = tmp_path / "train.csv"
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "label": y}).to_csv(csv, index=False)
    ledger = tmp_path / "ledger.sqlite"
    base = ["sample", csv, "--target", "label", "--no-progress", "--ledger", ledger, "--budget", "5", "1e-5"]
    # forced onto a route that sets its own horizon: refused, nothing charged
    code, out, err = run_cli(monkeypatch, capsys, base + ["--route", "last_iterate", "--horizon", "1e12"],
                             expect_exit=True)
    assert code != 0 and "--horizon" in err and "last_iterate" in err
    assert not ledger.exists() or _ledger_history(ledger) == []
    # route auto: one line says what replaced the request, before the charge
    code, out, err = run_cli(monkeypatch, capsys, base + ["--horizon", "1e12", "--chains", "1"])
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if "--horizon 1e+12" in ln]
    assert len(lines) == 1 and "last_iterate" in lines[0], out
    assert out.index(lines[0]) < out.index(f"ledger {ledger}:")


def test_python_fit_refuses_a_horizon_the_chosen_route_does_not_run(tmp_path):
    # issue 40 (6), the Python door: fit(horizon=1e12) with route 'auto' ran last_iterate at its own
    # horizon and said nothing (the CLI said it in one line); now refused before the charge, naming
    # the route that would have replaced it; an unset horizon keeps the default behaviour
    import dp_infer

    X, y = _logistic_rows(n=300)
    led = _ledger40(tmp_path)
    with pytest.raises(ValueError, match=r"^horizon: the route chosen, 'last_iterate', sets its own horizon") as e:
        dp_infer.fit(losses.logistic(row_norm=1.0), X, y, eps=1.0, delta=1e-5, horizon=1e12, ledger=led)
    assert "\n" not in str(e.value)
    assert led.history("default") == []
    run = dp_infer.fit(losses.logistic(row_norm=1.0), X, y, eps=1.0, delta=1e-5, horizon=0.5, seed=0,
                       progress_bar=False, ledger=led)
    assert run.plan.route == "trajectory" and run.plan.horizon == pytest.approx(0.5, rel=0.05)


def _ledger_history(path):
    from dp_infer.privacy.ledger import Ledger

    led = Ledger(path)
    return [h for d in led.datasets() for h in led.history(d["dataset_id"])]


def test_rows_placed_for_another_loss_are_refused_by_fit_posterior_before_charging(tmp_path):
    # issue 40 (4), the posterior mode: rows checked for a squared loss (labels in [-5, 5]) reach
    # fit_posterior with the logistic loss; refused before the charge (was: after, when the potential was built)
    from dp_infer.infer.posterior import fit_posterior
    from dp_infer.parallel.sharding import shard_rows

    X, _ = _logistic_rows(n=200)
    y = np.resize(np.array([1.0, 5.0]), len(X))
    led = _ledger40(tmp_path)
    rows = shard_rows(losses.squared(5.0, L2Ball(3, radius=2.0)), X, y)
    with pytest.raises(ValueError, match=r"y must contain only 0/1 labels"):
        fit_posterior(losses.logistic(row_norm=1.0), rows, None, eps=1.0, delta=_DELTA40, prior_precision=1.0,
                      seed=0, progress_bar=False, ledger=led)
    assert led.history("default") == []
