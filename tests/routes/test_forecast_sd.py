"""The forecast of the tempered draws' sd (:func:`dp_infer.routes.forecast.tempered_sd_ratios`): the fixed
point it solves, the logistic link's curvature under a spread score against numerical quadrature, the
Gaussian arithmetic where a loss declares no spread, the public rows' mean squares, and (slow tier) the
forecast against what a run then measures."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.special import expit

from dp_infer import losses
from dp_infer.routes.forecast import CLOSE_TO_PRIOR, forecast_posterior, tempered_sd_ratios


def test_a_constant_curvature_gives_the_gaussian_arithmetic_coordinate_by_coordinate():
    lam = np.array([0.01, 0.1, 1.0, 2.0])
    m2 = np.array([0.3, 0.0, 1e-3, 0.05])
    r, v, k = tempered_sd_ratios(40.0, lam, m2, 0.125)
    np.testing.assert_allclose(r, np.sqrt(lam / (lam + 40.0 * 0.125 * m2)), rtol=1e-12)
    assert k == 0.125 and r[1] == 1.0  # a feature that is always 0: the prior's sd
    assert v == pytest.approx(np.sum(m2 * r ** 2 / lam), rel=1e-9)  # v = sum m2_j s_j^2


def test_the_spread_solves_its_fixed_point_and_a_wider_spread_flattens_the_curvature():
    lam, m2 = np.full(5, 0.01), np.full(5, 0.2)
    k = losses.logistic().behaviour.bound_spread_curvature()
    r, v, kv = tempered_sd_ratios(13.9, lam, m2, lambda u: k(u, math.inf))
    assert kv == pytest.approx(k(v, math.inf), rel=1e-12)
    assert v == pytest.approx(float(np.sum(m2 / (lam + 13.9 * kv * m2))), rel=1e-9)
    # the flattened target is wider than the Gaussian arithmetic at the link's curvature at 0 (1/4)
    assert kv < 0.25 and np.all(r > np.sqrt(lam / (lam + 13.9 * 0.25 * m2)))


def test_of_several_self_consistent_spreads_the_narrowest_is_taken():
    # one coordinate, lam = m2 = 1, beta = 9: with k = 1 the spread is 0.1; a curvature that vanishes past
    # v = 0.5 has a second fixed point at v = 1 (the prior's): the narrower one is returned
    def k(v):
        return 1.0 / (1.0 + (v / 0.5) ** 40)

    r, v, _ = tempered_sd_ratios(9.0, 1.0, [1.0], k)
    assert v == pytest.approx(0.1, rel=1e-6) and r[0] == pytest.approx(math.sqrt(0.1), rel=1e-6)


def test_a_curvature_of_zero_everywhere_leaves_the_prior():
    r, v, k = tempered_sd_ratios(5.0, [0.5, 2.0], [0.1, 0.4], lambda u: 0.0)
    np.testing.assert_array_equal(r, [1.0, 1.0])
    assert v == pytest.approx(0.1 / 0.5 + 0.4 / 2.0) and k == 0.0


@pytest.mark.parametrize("bad, match", [
    (dict(feature_mean_square=[0.1, -1.0]), "feature_mean_square must be >= 0"),
    (dict(feature_mean_square=[0.1, np.nan]), "feature_mean_square contains a non-finite"),
    (dict(prior_precision=[0.0, 1.0]), "prior_precision must be finite and > 0"),
    (dict(beta=-1.0), "beta"),
])
def test_bad_inputs_are_refused_by_name(bad, match):
    kw = dict(beta=1.0, prior_precision=[1.0, 1.0], feature_mean_square=[0.1, 0.2], mean_curvature=0.1)
    kw.update(bad)
    with pytest.raises(ValueError, match=match):
        tempered_sd_ratios(**kw)


def _quad_logistic_curvature(v, a):
    """The oracle: the clipped logistic's curvature (metric_clip's closed form, written out here from its
    pieces) averaged over z ~ N(0, v) and both labels, by scipy's adaptive quadrature split at the knots."""
    a1 = min(a, 1.0)
    m_k = math.log(a1 / (1 - a1)) if 0.5 < a1 < 1 else 0.0

    def c(m):
        s = expit(m)
        if a1 >= 1.0 or abs(m) <= m_k and a1 > 0.5:
            return s * (1 - s)
        return a1 * math.exp(-m) if m >= m_k else 0.0

    if v == 0.0:
        return 0.5 * (c(0.0) + c(-0.0))
    sd = math.sqrt(v)
    pts = sorted({-m_k, 0.0, m_k})
    f = lambda z: 0.5 * (c(z) + c(-z)) * math.exp(-0.5 * (z / sd) ** 2) / (sd * math.sqrt(2 * math.pi))  # noqa: E731
    edges = [-12 * sd] + pts + [12 * sd]
    return sum(integrate.quad(f, lo, hi, epsabs=1e-12, epsrel=1e-10)[0] for lo, hi in zip(edges, edges[1:]))


@pytest.mark.parametrize("v", [0.0, 0.01, 1.0, 10.0, 100.0])
@pytest.mark.parametrize("a", [math.inf, 0.9, 0.6, 0.5, 0.2, 0.05])
def test_the_logistic_spread_curvature_matches_quadrature(v, a):
    k = losses.logistic().behaviour.bound_spread_curvature()
    assert k(v, a) == pytest.approx(_quad_logistic_curvature(v, a), rel=1e-8, abs=1e-12)


def test_the_logistic_spread_curvature_limits():
    k = losses.logistic().behaviour.bound_spread_curvature()
    assert k(0.0, math.inf) == pytest.approx(0.25) and k(0.0, 0.3) == pytest.approx(0.3)
    # wide and unclipped: the probit approximation 1/4 / sqrt(1 + pi v / 8) to a few percent
    assert k(50.0, math.inf) == pytest.approx(0.25 / math.sqrt(1 + math.pi * 50 / 8), rel=0.03)
    # wide and clipped at a <= 1/2: a E[e^-|z|] / 2, and E[e^-|z|] -> 2 / (sd sqrt(2 pi)) (1 - 1 / v)
    assert k(400.0, 0.1) == pytest.approx(0.1 * 2 / (20 * math.sqrt(2 * math.pi)) / 2, rel=0.005)


def test_a_loss_without_a_declared_spread_keeps_the_plans_constant_curvature():
    huber = losses.huber(1.0, row_norm=1.0)
    assert huber.behaviour.bound_spread_curvature() is None
    fc = forecast_posterior(huber, 5000, 5, eps=1.0, delta=1e-5, prior_precision=0.01)
    from dp_infer.routes.preconditioning import second_moment_row_bound

    kappa_p, m2 = 0.5, second_moment_row_bound(huber, None) / 5  # half the link's curvature bound; R^2 / d
    assert fc.sd_ratio_to_prior == pytest.approx(math.sqrt(0.01 / (0.01 + fc.beta * kappa_p * m2)), rel=1e-12)


def test_public_rows_give_each_coordinate_its_mean_square_and_the_count_follows():
    rng = np.random.default_rng(0)
    X = np.zeros((1000, 4))
    X[:, 0] = 1.0 / math.sqrt(2)  # an intercept
    X[:, 1] = rng.uniform(-0.5, 0.5, 1000)
    X[rng.uniform(size=1000) < 0.3, 2] = 0.5  # a common level
    X[:3, 3] = 0.5  # a level in 3 rows of 1000
    loss = losses.logistic(row_norm=1.0)
    fc = forecast_posterior(loss, 2000, 4, eps=1.0, delta=1e-5, prior_precision=0.01, X_public=X)
    even = forecast_posterior(loss, 2000, 4, eps=1.0, delta=1e-5, prior_precision=0.01)
    m2 = (X ** 2).mean(axis=0)
    spread, tau = loss.behaviour.bound_spread_curvature(), fc.clip_radius / math.sqrt(fc.beta)
    r, _, _ = tempered_sd_ratios(fc.beta, 0.01, m2, lambda v: spread(v, tau / math.sqrt(v) if v > 0 else math.inf))
    np.testing.assert_allclose(fc.sd_ratios, r, rtol=1e-9)
    assert fc.sd_ratios[3] > CLOSE_TO_PRIOR > fc.sd_ratios[0]  # the rare level is the prior's, the intercept not
    assert fc.prior_dominated_count == int(np.sum(r >= CLOSE_TO_PRIOR))
    assert "1000 public feature rows" in fc.explain() and "spread evenly" in even.explain()
    assert even.sd_ratios == (even.sd_ratios[0],) * 4  # one typical coordinate, four times


@pytest.mark.parametrize("kw, match", [
    (dict(X_public=np.ones((5, 3))), "X_public must have 4 columns"),
    (dict(X_public=np.ones((5, 4)), feature_mean_square=0.1), "X_public or feature_mean_square, not both"),
    (dict(feature_mean_square=[0.1, 0.2]), "feature_mean_square must be a number > 0 or 4 numbers"),
    (dict(feature_mean_square=-1.0), "feature_mean_square"),
])
def test_the_forecasts_feature_inputs_are_checked_by_name(kw, match):
    with pytest.raises(ValueError, match=match):
        forecast_posterior(losses.logistic(), 100, 4, eps=1.0, delta=1e-5, prior_precision=1.0, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("design", ["logistic_small", "logistic_2k"])
def test_the_forecast_typical_sd_is_within_a_quarter_of_the_runs(design):
    """The issue's target (within 25% of what the run then measures), on the coverage benchmark's simulated
    logistic designs at their defaults (dataset 0). Measured 2026-11-30: forecast 0.594 against 0.592 (n 5000, d 5) and
    0.751 against 0.753 (n 2000, d 3); the Gaussian arithmetic at the plan's curvature said 0.167 and 0.247.
    The draws' sd has a relative Monte-Carlo error of about 1 / sqrt(2 ess) = 3.5% at 400 effective draws."""
    import dp_infer
    from benchmarks.intervals import design_data

    X, y, _ = design_data(design, 0)
    n, d = X.shape
    loss = losses.logistic(row_norm=1.0)
    fc = forecast_posterior(loss, n, d, eps=1.0, delta=1e-5, prior_precision=0.01)
    run = dp_infer.fit(loss, X, y, eps=1.0, delta=1e-5, target="posterior", prior_precision=0.01, seed=1000,
                       progress_bar=False)
    assert run.plan.beta == pytest.approx(fc.beta, rel=1e-9)
    measured = float(np.median(run.draws().reshape(-1, d).std(axis=0)) * math.sqrt(0.01))
    assert abs(fc.sd_ratio_to_prior / measured - 1) < 0.25, (fc.sd_ratio_to_prior, measured)


def test_a_prior_precision_per_coordinate_gives_each_coordinate_its_own_ratio():
    from dp_infer.routes.preconditioning import second_moment_row_bound

    huber = losses.huber(1.0, row_norm=1.0)
    lam = np.array([0.01, 0.1, 1.0, 10.0, 100.0])
    fc = forecast_posterior(huber, 5000, 5, eps=1.0, delta=1e-5, prior_precision=lam)
    m2 = second_moment_row_bound(huber, None) / 5
    np.testing.assert_allclose(fc.sd_ratios, np.sqrt(lam / (lam + fc.beta * 0.5 * m2)), rtol=1e-12)
    assert fc.sd_ratio_to_prior == pytest.approx(float(np.median(fc.sd_ratios)), rel=1e-12)
