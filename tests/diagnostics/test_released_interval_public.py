"""Intervals from an interval release whose curvature comes from public feature rows
(``interval_curvature="public"``: dp_infer.routes.newton_release, dp_infer.releases.newton,
dp_infer.diagnostics.released_interval)."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from scipy.optimize import minimize

from dp_infer import losses
from dp_infer.diagnostics.released_interval import released_interval
from dp_infer.infer.posterior import fit_posterior
from dp_infer.privacy.conversions import gdp_epsilon, gdp_mu
from dp_infer.releases.newton import public_curvature, release_newton_statistics
from dp_infer.routes.newton_release import (PUBLIC_SCHEDULE, interval_width_forecast, newton_event,
                                            weight_radius)

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


def test_public_curvature_is_the_weighted_model_curvature_and_model_based_score_moment():
    # an independent closed form for the logistic link: H = mean w s(1-s) C'x x'C (+ l2), J = mean w^2 s(1-s) C'x x'C
    rng = np.random.default_rng(0)
    Xp = rng.normal(size=(400, 3)) * np.array([1.0, 0.3, 2.0])
    C = np.array([[1.5, 0, 0], [0.2, 0.7, 0], [0.1, -0.3, 0.4]])
    theta = np.array([0.5, -1.0, 0.2])
    rho = 0.8
    loss = losses.logistic(row_norm=10.0)
    H, J = public_curvature(loss, Xp, theta, C, rho)
    XC = Xp @ C
    w = np.minimum(1.0, rho ** 2 / np.sum(XC * XC, axis=1))
    s = 1 / (1 + np.exp(-Xp @ theta))
    v = s * (1 - s)
    np.testing.assert_allclose(H, (XC * (w * v)[:, None]).T @ XC / 400, rtol=2e-5)
    np.testing.assert_allclose(J, (XC * (w * w * v)[:, None]).T @ XC / 400, rtol=2e-5)
    assert np.any(w < 1)  # the weights bind on some rows, so the test tells w from w^2


def test_the_public_event_has_gradient_parts_only_and_composes_to_its_mu():
    ev = newton_event(0.3, n=1000, curvature="public")
    parts = ev.metadata["parts"]
    assert {p["statistic"] for p in parts} == {"gradient"}
    assert len(parts) == len(PUBLIC_SCHEDULE)
    assert math.sqrt(sum(p["mu"] ** 2 for p in parts)) == pytest.approx(0.3, rel=1e-12)
    assert ev.metadata["curvature"] == "public"


def test_the_forecast_is_the_last_gradients_noise_over_the_sampling_variance():
    # sqrt(1 + 4 d / (n mu_g^2 kappa_P)), mu_g^2 = share * 0.7 * mu^2 (PUBLIC_SCHEDULE's last gradient)
    n, d, mu, kP = 30162, 100, gdp_mu(1.0, 1e-5), 0.125
    w = interval_width_forecast(n, d, mu, typical_curvature=kP, share=0.7, curvature="public")
    assert w == pytest.approx(math.sqrt(1 + 4 * d / (n * 0.7 * 0.7 * mu * mu * kP)), rel=1e-12)
    assert w < interval_width_forecast(n, d, mu, typical_curvature=kP, share=0.7)  # all of the share on gradients


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
