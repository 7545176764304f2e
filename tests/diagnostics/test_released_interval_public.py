"""Intervals from an interval release whose curvature comes from public feature rows
(``interval_curvature="public"``: dp_infer.routes.newton_release, dp_infer.releases.newton,
dp_infer.diagnostics.released_interval)."""

from __future__ import annotations

import math
import warnings

import jax
import numpy as np
import pytest
from scipy.optimize import minimize

from dp_infer import losses
from dp_infer.diagnostics.released_interval import released_interval
from dp_infer.infer.posterior import fit_posterior
from dp_infer.privacy.conversions import gdp_epsilon, gdp_mu
from dp_infer.releases.newton import public_surrogate_step, release_newton_statistics
from dp_infer.routes.newton_release import (PUBLIC_INTERVAL_SHARE, PUBLIC_SCHEDULE, PUBLIC_STEP_BOX,
                                            default_interval_share, interval_width_forecast, newton_event,
                                            weight_radius)
from dp_infer.routes.public_rows import public_curvature, public_interval_width_forecast

THETA = np.linspace(-2.0, 2.0, 5)
PRIOR = 0.01


def _rows(n, seed, theta=THETA):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, theta.size))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ theta))).astype(float)
    return X, y


def _laplace(X, y, prior=PRIOR):
    """The non-private posterior's Laplace approximation (MAP, sd) under the same prior."""
    def f(t):
        z = X @ t
        return np.sum(np.logaddexp(0, z) - y * z) + 0.5 * prior * t @ t

    def g(t):
        return X.T @ (1 / (1 + np.exp(-X @ t)) - y) + prior * t

    t = minimize(f, np.zeros(X.shape[1]), jac=g, method="L-BFGS-B", options={"gtol": 1e-9}).x
    s = 1 / (1 + np.exp(-X @ t))
    return t, np.sqrt(np.diag(np.linalg.inv((X * (s * (1 - s))[:, None]).T @ X + prior * np.eye(X.shape[1]))))


def test_the_public_event_has_gradient_parts_only_and_composes_to_its_mu():
    ev = newton_event(0.3, n=1000, curvature="public")
    parts = ev.metadata["parts"]
    assert {p["statistic"] for p in parts} == {"gradient"}
    assert len(parts) == len(PUBLIC_SCHEDULE)
    assert math.sqrt(sum(p["mu"] ** 2 for p in parts)) == pytest.approx(0.3, rel=1e-12)
    assert ev.metadata["curvature"] == "public"


def test_the_forecast_is_the_last_gradients_noise_over_the_sampling_variance():
    # sqrt(1 + 4 d / (n mu_g^2 kappa_P)), mu_g^2 = share * 0.75 * mu^2 (PUBLIC_SCHEDULE's last gradient), the share
    # 0.85 (PUBLIC_INTERVAL_SHARE) by default
    n, d, mu, kP = 30162, 100, gdp_mu(1.0, 1e-5), 0.125
    w = interval_width_forecast(n, d, mu, typical_curvature=kP, share=0.7, curvature="public")
    assert w == pytest.approx(math.sqrt(1 + 4 * d / (n * 0.7 * 0.75 * mu * mu * kP)), rel=1e-12)
    assert w < interval_width_forecast(n, d, mu, typical_curvature=kP, share=0.7)  # all of the share on gradients
    w0 = interval_width_forecast(n, d, mu, typical_curvature=kP, curvature="public")
    assert w0 == pytest.approx(math.sqrt(1 + 4 * d / (n * 0.85 * 0.75 * mu * mu * kP)), rel=1e-12)


def test_public_curvature_gets_the_larger_default_share():
    loss = losses.logistic(row_norm=1.0)
    assert default_interval_share(loss, 100, n=30000, mu=0.3, curvature="public") == (PUBLIC_INTERVAL_SHARE, None)
    assert PUBLIC_INTERVAL_SHARE > default_interval_share(loss, 5, n=30000, mu=0.3)[0]


def _weighted_minimiser(X, y, C, rho, l2=0.0, at=None):
    """The weighted logistic loss's minimiser (the public release's weights min(1, rho / (max(s, 1 - s) ||C^T x||)),
    s the model's probability at the stage's point ``at``; None: the weights without the envelope), by scipy: the
    oracle."""
    XC = X @ C
    r = 1.0 if at is None else np.maximum(1 / (1 + np.exp(-X @ at)), 1 / (1 + np.exp(X @ at)))
    w = np.minimum(1.0, rho / (r * np.linalg.norm(XC, axis=1)))

    def f(t):
        z = X @ t
        return np.mean(w * (np.logaddexp(0, z) - y * z)) + 0.5 * l2 * t @ t

    def g(t):
        return X.T @ (w * (1 / (1 + np.exp(-X @ t)) - y)) / len(y) + l2 * t

    return minimize(f, np.zeros(X.shape[1]), jac=g, method="L-BFGS-B",
                    options={"gtol": 1e-13, "ftol": 1e-15, "maxiter": 5000}).x, w


def _psi_gradient(X, y, w, theta, C, l2=0.0):
    return C.T @ (X.T @ (w * (1 / (1 + np.exp(-X @ theta)) - y)) / len(y) + l2 * theta)


@pytest.mark.parametrize("l2", [0.0, 0.05])
def test_with_the_private_rows_as_public_one_surrogate_step_lands_on_the_weighted_minimiser(l2):
    # with X_public = X the surrogate IS the private weighted loss (up to a constant), so one step from a far
    # point, given the exact gradient there, lands on its minimiser (scipy's, the oracle), however far the start
    X, y = _rows(3000, 11)
    C = np.diag([0.9, 1.1, 1.0, 0.8, 1.2])
    rho = 0.6
    start = _weighted_minimiser(X, y, C, rho, l2)[0] + np.array([3.0, -4.0, 2.0, 5.0, -3.0])  # many data sds away
    t_hat, w = _weighted_minimiser(X, y, C, rho, l2, at=start)  # (sd ~ 0.1 here); the weights: the stage's, at start
    assert np.any(w < 1)
    loss = losses.logistic(row_norm=1.0, l2=l2)
    nxt = public_surrogate_step(loss, X, start, _psi_gradient(X, y, w, start, C, l2), C, rho,
                                np.eye(5) * 4.0, PUBLIC_STEP_BOX)
    np.testing.assert_allclose(nxt, t_hat, atol=2e-4)
    # a linear Newton step from there does not (the loss is curved over the distance): the test tells them apart
    H = public_curvature(loss, X, start, C, rho)[0]
    lin = start - C @ np.linalg.solve(H, _psi_gradient(X, y, w, start, C, l2))
    assert np.max(np.abs(lin - t_hat)) > 0.5


def test_a_gradient_the_surrogate_cannot_reach_holds_that_coordinate_at_its_box_edge():
    # the third coordinate's released gradient is pushed below what sum w sigma(z) x can reach (a noise draw far
    # beyond the gradient's range): F falls without end along it, so it stops at box * its draws' sd; the others
    # still reach their minimiser given that coordinate (checked by the box-free optimum of the rest)
    X, y = _rows(2000, 12)
    C, rho = np.eye(5), 10.0
    t_hat, w = _weighted_minimiser(X, y, C, rho)
    g = _psi_gradient(X, y, w, t_hat, C)
    g[2] -= 5.0  # |x| <= 1 and sigma in (0, 1): no theta has a gradient of -5 in any coordinate
    cov = np.diag([0.04, 0.09, 0.25, 0.01, 0.16])
    loss = losses.logistic(row_norm=1.0)
    nxt = public_surrogate_step(loss, X, t_hat, g, C, rho, cov, 3.0)
    sd = np.sqrt(np.diag(cov))
    assert nxt[2] == pytest.approx(t_hat[2] + 3.0 * sd[2], rel=1e-9)
    assert np.all(np.abs(nxt - t_hat) <= 3.0 * sd * (1 + 1e-12))
    # the rest: the weighted loss minimised over the other coordinates with the third held there
    free = [0, 1, 3, 4]

    def f(u):
        t = nxt.copy()
        t[free] = u
        z = X @ t
        return np.mean(w * (np.logaddexp(0, z) - y * z)) - t[2] * (g[2] - _psi_gradient(X, y, w, t_hat, C)[2])

    rest = minimize(f, t_hat[free], method="BFGS", options={"gtol": 1e-10}).x
    np.testing.assert_allclose(nxt[free], rest, atol=1e-4)


def test_the_public_path_reaches_the_estimate_without_noise_where_linear_steps_did_not():
    # Adult-like curvature: an intercept-heavy design whose draws' mean sits far from the estimate. Without noise
    # (mu huge) the public path's last point is the weighted minimiser to within the public rows' curvature gap
    rng = np.random.default_rng(5)
    n, d = 20000, 6
    X = np.concatenate([np.ones((n, 1)), rng.normal(0, 0.5, (n, d - 1)).clip(-1, 1)], axis=1) / math.sqrt(d)
    theta = np.array([-2.5, 2.0, -1.5, 1.0, 0.5, -0.5]) * math.sqrt(d)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ theta))).astype(float)
    Xp = np.concatenate([np.ones((8000, 1)), rng.normal(0, 0.5, (8000, d - 1)).clip(-1, 1)], axis=1) / math.sqrt(d)
    C, rho = np.eye(d), 10.0
    t_hat, w = _weighted_minimiser(X, y, C, rho)
    Hn = public_curvature(losses.logistic(row_norm=1.0), X, t_hat, C, rho)[0]
    data_sd = np.sqrt(np.diag(np.linalg.inv(Hn) / n))
    start = t_hat + 30 * data_sd * np.array([1, -1, 1, -1, 1, -1])
    cov = np.diag((30 * data_sd) ** 2)  # the draws' spread: the start is one draws' sd off in each coordinate
    rel = release_newton_statistics(losses.logistic(row_norm=1.0), X, y, point=start, chol=C, rho=rho, mu=1e7,
                                    key=jax.random.key(0), trust_covariance=cov, X_public=Xp)
    off = np.abs(np.asarray(rel.path[-1]) - t_hat) / data_sd
    # the curvature gap between 8,000 public and 20,000 private rows, contracted three times (measured: 0.004;
    # the linear steps held within the draws' sd, as the private path takes them: 3.1)
    assert off.max() < 0.05, off
    first = np.abs(np.asarray(rel.path[1]) - t_hat) / data_sd
    assert first.max() < 5 and first.max() > off.max()  # one stage from 30 sds (measured: 1.7); each contracts


def test_the_data_centre_is_the_surrogates_minimiser_not_a_linear_step(monkeypatch):
    # one public stage (the schedule patched) from a point far off the estimate, with the private rows as the
    # public ones and almost no noise: the release's centre is the surrogate's minimiser anchored at the last
    # gradient, so the intervals' data centre lands on the weighted minimiser (scipy's: the oracle) however far
    # the last point; the same release read as a linear Newton step (``centre`` removed: what releases made
    # before it hold, and still read) is many data sds off. On Adult (eps = 1) the linear step's centres spread
    # 1.3x their stated sd at the median over 20 noise keys, most where a coefficient is large (docs/results.md)
    import dp_infer.routes.newton_release as nr

    monkeypatch.setattr(nr, "PUBLIC_SCHEDULE", ((("gradient", 1.0),),))
    X, y = _rows(4000, 21, theta=THETA * 1.5)
    C, rho = np.eye(5), 0.8
    t0 = _weighted_minimiser(X, y, C, rho)[0]
    loss = losses.logistic(row_norm=1.0)
    data_sd = np.sqrt(np.diag(np.linalg.inv(public_curvature(loss, X, t0, C, rho)[0]) / 4000))
    start = t0 + 8 * data_sd * np.array([1, -1, 1, -1, 1])
    t_hat, w = _weighted_minimiser(X, y, C, rho, at=start)  # the one stage's weights: at its point
    assert np.any(w < 1)
    rel = release_newton_statistics(loss, X, y, point=start, chol=C, rho=rho, mu=1e7, key=jax.random.key(3),
                                    trust_covariance=np.diag((8 * data_sd) ** 2), X_public=X)
    assert len(rel.path) == 1 and rel.centre is not None
    iv = released_interval(rel, n=4000, prior_precision=1e-12, prob=0.9)
    assert np.max(np.abs(iv.data_centre - t_hat) / data_sd) < 1e-3
    linear = dict(rel.to_dict(), centre=None)
    iv_lin = released_interval(linear, n=4000, prior_precision=1e-12, prob=0.9)
    assert np.max(np.abs(iv_lin.data_centre - t_hat) / data_sd) > 0.5
    # the step the long-step flag reads is the one taken: from the last point to the centre, in data sds
    np.testing.assert_allclose(iv.newton_step, np.abs(start - iv.data_centre) / iv.data_sd, rtol=1e-9)
    # the variance is the release's own: the centre changes nothing else
    np.testing.assert_allclose(iv.sd, iv_lin.sd, rtol=1e-12)


def test_release_level_coverage_of_the_truth_with_public_curvature():
    # 60 datasets, n = 5000 private, 2000 public rows, d = 5, eps = 1 (mu_interval^2 = 0.7 mu^2): the release from a
    # point 0.3 off the truth in every coordinate (the draws' mean's typical error) with a trust covariance that
    # lets the first step reach. 300 coordinate-intervals: binomial se at 0.9 is sqrt(0.09 / 300) = 0.017; the
    # band [0.84, 0.96] is about 3.5 se either side. Widths: the sd over the non-private Laplace sd, median within
    # [1, 2.5] (forecast sqrt(1 + 4 * 5 / (5000 * 0.49 mu^2 * 0.125)) = 1.4 at mu = 0.44)
    loss = losses.logistic(row_norm=1.0)
    mu = math.sqrt(0.7) * gdp_mu(1.0, 1e-5)
    hits, ratios = [], []
    for seed in range(60):
        X, y = _rows(5000, 1000 + seed)
        Xp, _ = _rows(2000, 5000 + seed)
        C = np.eye(5)
        rho = weight_radius(C, Xp.T @ Xp / len(Xp))
        rel = release_newton_statistics(loss, X, y, point=THETA + 0.3, chol=C, rho=rho, mu=mu,
                                        key=jax.random.PRNGKey(seed), trust_covariance=np.eye(5), X_public=Xp)
        assert rel.curvature_source == "public" and rel.public_rows == 2000 and rel.curvature_sd == 0.0
        iv = released_interval(rel, n=5000, prior_precision=PRIOR, prob=0.9)
        hits.extend(((iv.lower <= THETA) & (THETA <= iv.upper)).tolist())
        if seed < 10:
            ratios.extend((iv.sd / _laplace(X, y)[1]).tolist())
    cov = float(np.mean(hits))
    assert 0.84 <= cov <= 0.96, cov
    assert 1.0 <= float(np.median(ratios)) <= 2.5, np.median(ratios)


@pytest.mark.filterwarnings("ignore:the chains did not mix")
def test_a_run_with_public_curvature_covers_the_truth():
    # 8 full runs (ess 50, n = 5000, 2000 public rows, d = 5, eps = 1): 40 coordinate-intervals, binomial se at 0.9
    # sqrt(0.09 / 40) = 0.047; the band [0.75, 1] is about 3 se below. Widths within [1, 3]x the non-private
    # Laplace sd (median). The private-curvature run's release is made too, and differs (it is the default).
    loss = losses.logistic(row_norm=1.0)
    hits, ratios = [], []
    for seed in range(8):
        X, y = _rows(5000, 200 + seed)
        Xp, _ = _rows(2000, 9000 + seed)
        run = fit_posterior(loss, X, y, eps=1.0, delta=1e-5, prior_precision=PRIOR, seed=seed, progress_bar=False,
                            ess=50, interval_curvature="public", X_public=Xp)
        iv = run.intervals(0.9)
        hits.extend(((iv.lower <= THETA) & (THETA <= iv.upper)).tolist())
        ratios.extend((iv.sd / _laplace(X, y)[1]).tolist())
        if seed == 0:
            rel = run.report_extras["interval_release"]
            assert rel["curvature_source"] == "public" and rel["public_rows"] == 2000
            rep = run.report()
            assert "public feature rows" in rep["intervals"]["method"]
            assert any("2000 public feature rows" in nt for nt in rep["intervals"]["notes"])
            assert "correctly specified" in iv.estimand
            assert any("interval release with public curvature" in nt for nt in run.planned.notes)
    cov = float(np.mean(hits))
    assert cov >= 0.75, cov
    assert 1.0 <= float(np.median(ratios)) <= 3.0, np.median(ratios)


@pytest.mark.filterwarnings("ignore:the chains did not mix")
def test_the_ledger_is_charged_the_reports_event_whose_eps_is_the_asked_one(tmp_path):
    from dp_infer.privacy.ledger import Ledger

    X, y = _rows(2000, 1)
    Xp, _ = _rows(500, 2)
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("default", 10.0, 1e-3)
    run = fit_posterior(losses.logistic(row_norm=1.0), X, y, eps=1.0, delta=1e-5, prior_precision=PRIOR, seed=0,
                        progress_bar=False, ess=30, interval_curvature="public", X_public=Xp, ledger=led)
    (h,) = led.history("default")
    rep = run.report()
    assert h["event"]["mu"] == pytest.approx(rep["event"]["mu"], rel=1e-12)
    assert gdp_epsilon(h["event"]["mu"], 1e-5) == pytest.approx(1.0, rel=1e-6)
    (newton,) = [p for p in h["event"]["metadata"]["parts"] if p["label"].startswith("newton_release")]
    assert {p["statistic"] for p in newton["metadata"]["parts"]} == {"gradient"}
    assert newton["mu"] == pytest.approx(run.plan.posterior.mu_interval, rel=1e-12)
    assert math.sqrt(sum(p["mu"] ** 2 for p in newton["metadata"]["parts"])) == pytest.approx(newton["mu"], rel=1e-12)
    # the run's release spent what the plan reserved: its mu is the planned interval mu
    assert run.report_extras["interval_release"]["mu"] == pytest.approx(newton["mu"], rel=1e-12)
    # the plan's note states the width forecast read from the public rows before the charge
    width = public_interval_width_forecast(losses.logistic(row_norm=1.0), Xp, PRIOR, 2000, newton["mu"])
    assert any(f"about {width:.2g}x" in t and "read from the public rows" in t for t in run.plan.notes)


def test_neighbouring_datasets_give_identical_plans(monkeypatch):
    # the charged plan of a public-curvature run is made from public inputs only: replacing one private row
    # (features and label) changes nothing in it
    import dp_infer.infer.posterior as post

    captured = []

    def fake_execute(route, public, data=None, **kw):
        captured.append(route.plan(public))

    monkeypatch.setattr(post, "execute", fake_execute)
    X, y = _rows(3000, 4)
    Xp, _ = _rows(800, 5)
    X2, y2 = X.copy(), y.copy()
    X2[17] = np.array([0.0, 0.0, 1.0, 0.0, 0.0])
    y2[17] = 1.0 - y2[17]
    for Xi, yi in ((X, y), (X2, y2)):
        fit_posterior(losses.logistic(row_norm=1.0), Xi, yi, eps=1.0, delta=1e-5, prior_precision=PRIOR, seed=0,
                      progress_bar=False, interval_curvature="public", X_public=Xp)
    a, b = captured
    assert a.event.to_dict() == b.event.to_dict()
    assert a.notes == b.notes and a.beta == b.beta and a.preconditioner == b.preconditioner
    assert any("interval release with public curvature" in nt for nt in a.notes)
    assert a.posterior.mu_interval > 0


@pytest.mark.parametrize("case, match", [
    ("wrong width", "X_public must have X's 5 columns"),
    ("huber", "curvature depends on the label"),
    ("no X_public", "needs X_public"),
    ("unknown", "interval_curvature must be one of"),
])
def test_public_curvature_it_cannot_serve_is_refused_before_the_charge(tmp_path, case, match):
    from dp_infer.privacy.ledger import Ledger

    X, y = _rows(300, 3)
    Xp, _ = _rows(100, 6)
    loss = losses.logistic(row_norm=1.0)
    kw = dict(interval_curvature="public", X_public=Xp)
    if case == "wrong width":
        kw["X_public"] = Xp[:, :4]
    elif case == "huber":
        loss, y = losses.huber(1.0, row_norm=1.0), X @ THETA
    elif case == "no X_public":
        kw["X_public"] = None
    else:
        kw["interval_curvature"] = "both"
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("default", 100.0, 1e-3)
    with pytest.raises(ValueError, match=match) as e:
        fit_posterior(loss, X, y, eps=1.0, delta=1e-5, prior_precision=1.0, seed=0, progress_bar=False, ledger=led,
                      **kw)
    assert "interval_curvature" in str(e.value) and "\n" not in str(e.value)
    assert led.history("default") == []


@pytest.mark.filterwarnings("ignore:the chains did not mix")
@pytest.mark.parametrize("public", [False, True])
def test_the_release_inputs_are_the_runs_own(public):
    """interval_release_inputs (what benchmarks.public_curvature --noise-check remakes releases from) gives the
    metric, radius and starting point the run's own release was made with, for both curvature sources; a
    release made from them with the same mu has the run's event and its first point."""
    from dp_infer.infer.posterior import interval_release_inputs

    loss = losses.logistic(row_norm=1.0)
    X, y = _rows(3000, 5)
    Xp = _rows(1000, 6)[0] if public else None
    run = fit_posterior(loss, X, y, eps=1.0, delta=1e-5, prior_precision=PRIOR, seed=1, progress_bar=False, ess=30,
                        interval_curvature="public" if public else "private", X_public=Xp)
    rel = run.report_extras["interval_release"]
    inp = interval_release_inputs(run, loss, Xp)
    np.testing.assert_allclose(inp["chol"], np.asarray(rel["chol"]), rtol=1e-12, atol=0)
    assert inp["rho"] == pytest.approx(rel["rho"], rel=1e-12)
    np.testing.assert_allclose(inp["point"], np.asarray(rel["path"][0]), rtol=1e-12, atol=1e-15)
    again = release_newton_statistics(loss, X, y, mu=run.plan.posterior.mu_interval, key=jax.random.key(7),
                                      X_public=Xp, **inp)
    assert again.mu == rel["mu"] and again.curvature_source == rel["curvature_source"]
    assert again.path[0] == tuple(rel["path"][0])


def test_on_a_one_hot_design_the_surrogate_step_meets_the_box_optimality_conditions():
    # the case the solver is for: an intercept plus one-hot levels (some rare), so the coordinates correlate
    # strongly, and noise that pushes many released gradients beyond reach. The oracle is the Karush-Kuhn-Tucker
    # conditions of min F over the box, F's gradient computed here by numpy: a coordinate inside the box has a
    # zero gradient, one on an edge a gradient pointing out of the box. Tolerance 1e-9 of the gradient's scale
    # (measured: 6e-13; two Newton iterations leave 3e-4, so a solver stopped early fails)
    rng = np.random.default_rng(21)
    m, levels = 4000, 12
    freq = np.r_[np.full(4, 0.2), np.full(levels - 4, 0.2 / (levels - 4))]
    lv = rng.choice(levels, size=m, p=freq / freq.sum())
    X = np.concatenate([np.ones((m, 1)), np.eye(levels)[lv], rng.normal(0, 0.3, (m, 2)).clip(-1, 1)], axis=1) / 2.0
    d = X.shape[1]
    C, rho = np.eye(d), 10.0
    p = rng.normal(0, 0.5, d)
    y = (rng.uniform(size=m) < 1 / (1 + np.exp(-X @ rng.normal(0, 1.0, d)))).astype(float)
    # a released gradient: the labelled rows' at p plus noise of 0.004, beyond what the rarest levels' (frequency
    # 0.025) gradients can reach for some of them: those stop on the box's edge
    g = X.T @ (1 / (1 + np.exp(-X @ p)) - y) / m + rng.normal(0, 0.004, d)
    cov = np.diag(rng.uniform(0.2, 1.0, d))
    half = 2.0
    loss = losses.logistic(row_norm=1.0)
    nxt = public_surrogate_step(loss, X, p, g, C, rho, cov, half)
    sd = np.sqrt(np.diag(cov))
    v = (nxt - p) / sd
    assert np.all(np.abs(v) <= half * (1 + 1e-12))

    def grad_L(t):  # the public surrogate's gradient: mean w sigma(z) x (w = 1 here: rho exceeds every row's norm)
        return X.T @ (1 / (1 + np.exp(-X @ t))) / m

    dF = sd * (grad_L(nxt) - grad_L(p) + g)  # F's gradient in the box's coordinates (C = I: g is theta's)
    scale = np.max(np.abs(sd * g))
    edge_hi, edge_lo = v >= half * (1 - 1e-9), v <= -half * (1 - 1e-9)
    inside = ~(edge_hi | edge_lo)
    assert 2 <= edge_hi.sum() + edge_lo.sum() <= d - 4  # both kinds occur: the test is not vacuous
    np.testing.assert_array_less(np.abs(dF[inside]), 1e-9 * scale)
    assert np.all(dF[edge_hi] <= 1e-9 * scale) and np.all(dF[edge_lo] >= -1e-9 * scale)


def test_a_flat_surrogate_moves_each_coordinate_to_the_box_edge_against_its_gradient():
    # zero public features and no L2 term: the surrogate is linear, F(theta) = const + g . (theta - p), so its
    # minimiser over the box is the corner against g (units: each coordinate's draws' sd) and a coordinate with
    # g = 0 stays; the Newton step's curvature floor must keep this finite (no overflow, no NaN)
    cov = np.diag([1.0, 4.0, 0.25])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # an overflow in the step is a failure, not a warning
        nxt = public_surrogate_step(losses.logistic(row_norm=1.0), np.zeros((50, 3)), np.zeros(3),
                                    np.array([0.3, -0.2, 0.0]), np.eye(3), 1.0, cov, 2.0)
    np.testing.assert_allclose(nxt, [-2.0, 4.0, 0.0], atol=1e-12)
