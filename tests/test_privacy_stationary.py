"""Stationary (exact Gibbs draw) route: Gopi-Lee-Liu GDP, TV slack, corrected Theorem 2.7."""

import math

import numpy as np
import pytest

from dp_infer.privacy import exact as X
from dp_infer.privacy import stationary as S
from dp_infer.privacy.accountant import Accountant

N_REC = 100
DELTA = 2.0 / N_REC  # seed-001 §10.2 family: (theta - d)^2/2, d in [-1, 1], worst neighbours
GRID = np.linspace(-2.0, 2.0, 400001)  # C = [-2, 2]


def _gaussian_pair_delta(m1, m2, sd, eps):
    x = np.linspace(min(m1, m2) - 14 * sd, max(m1, m2) + 14 * sd, 200001)
    return X.hockey_stick_delta(x, -0.5 * ((x - m1) / sd) ** 2, -0.5 * ((x - m2) / sd) ** 2, eps)


def test_quadratic_loss_gives_exactly_the_gaussian_mechanism():
    # Gibbs of beta (theta - dbar)^2 m/2 is N(dbar, 1/(beta m)); neighbours shift dbar by Delta/m
    for beta, m in [(10.0, 1.0), (180.0, 1.0), (50.0, 3.0)]:
        mu = S.gibbs_gdp_mu(beta, DELTA * m, m)  # gradient difference of the loss is m * (mean shift)
        sd = 1.0 / math.sqrt(beta * m)
        for eps in [0.0, 0.5, 1.0, 2.0]:
            assert _gaussian_pair_delta(0.0, DELTA, sd, eps) == pytest.approx(X.gdp_delta(eps, mu), rel=1e-6, abs=1e-13)


def test_regularised_exponential_mechanism_constant_on_gaussian_special_cases():
    n, k, mu = 50, 400.0, 0.3
    # linear losses f(x; s) = s x, |s| <= 1: G = |s - s'| = 2; posterior N(-sbar/mu, 1/(k mu))
    G = 2.0
    sd = 1.0 / math.sqrt(k * mu)
    gdp = S.regularized_exp_mech_mu(k, G, n, mu)
    assert gdp == pytest.approx(G * math.sqrt(k) / (n * math.sqrt(mu)))
    for eps in [0.2, 1.0]:
        assert _gaussian_pair_delta(0.0, G / (n * mu), sd, eps) == pytest.approx(X.gdp_delta(eps, gdp), rel=1e-6)
    # quadratic losses (x - s)^2/2 plus the regulariser: strong convexity 1 + mu, shift Delta/(1 + mu)
    gdp2 = S.regularized_exp_mech_mu(k, G, n, mu, loss_strong_convexity=1.0)
    sd2 = 1.0 / math.sqrt(k * (1 + mu))
    assert _gaussian_pair_delta(0.0, G / n / (1 + mu), sd2, 1.0) == pytest.approx(X.gdp_delta(1.0, gdp2), rel=1e-6)


def test_non_gaussian_pair_is_dominated_by_the_gdp_curve():
    # P ~ exp(-m x^2/2 - a|x|), Q ~ exp(-m x^2/2 - a|x - 1|): U_Q - U_P is 2a-Lipschitz, s = 2a/sqrt(m)
    x = np.linspace(-15, 16, 310001)
    for m, a in [(1.0, 0.5), (1.0, 2.0), (4.0, 0.3)]:
        lp = -m * x**2 / 2 - a * np.abs(x)
        lq = -m * x**2 / 2 - a * np.abs(x - 1)
        s = 2 * a / math.sqrt(m)
        for eps in [0.0, 0.5, 1.0, 2.0]:
            exact = X.hockey_stick_delta(x, lp, lq, eps)
            assert exact <= X.gdp_delta(eps, s) + 1e-9
        assert X.hockey_stick_delta(x, lp, lq, 0.0) > 0.3 * X.gdp_delta(0.0, s)  # not a vacuous comparison


def test_calibrated_stationary_draw_meets_its_claim_on_C():
    eps, delta = 1.0, 1e-5
    b = S.stationary_beta_max(eps, delta, sensitivity=DELTA, strong_convexity=1.0)
    mu = S.gibbs_gdp_mu(b, DELTA, 1.0)
    assert X.gdp_delta(eps, mu) == pytest.approx(delta, rel=1e-9)
    for dbar in [0.0, 0.98]:  # truncation to C = [-2, 2] (also near the boundary)
        lp = -b * (GRID - dbar) ** 2 / 2
        lq = -b * (GRID - dbar + DELTA) ** 2 / 2
        d = X.hockey_stick_delta(GRID, lp, lq, eps)
        assert d <= delta * (1 + 1e-6)
        for e in [0.3, 2.0]:
            assert X.hockey_stick_delta(GRID, lp, lq, e) <= X.gdp_delta(e, mu) * (1 + 1e-6) + 1e-300
    # the exact beta_max of the (unconstrained) Gaussian mechanism is recovered: sigma = Delta/mu*
    assert b == pytest.approx((X.gdp_mu(eps, delta) / DELTA) ** 2, rel=1e-12)


def test_tv_slack_is_charged_with_the_corrected_factor_and_is_tight():
    # worst case: a sampler within TV tau of each target can move tau mass into the optimal
    # distinguishing set under D and tau out of it under D': delta grows by exactly (1 + e^eps) tau
    mu, eps, tau = 1.0, 1.0, 1e-3
    x = np.linspace(-12, 13, 500001)
    p = np.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)
    q = np.exp(-0.5 * (x - mu) ** 2) / math.sqrt(2 * math.pi)
    x0 = eps / mu + mu / 2  # optimal set for delta(Q || P): {x > x0}
    inside = x > x0
    u_in = ((x > x0) & (x < x0 + 1)).astype(float)  # uniform on [x0, x0 + 1]
    u_out = ((x < x0) & (x > x0 - 1)).astype(float)
    w = np.exp(X.trapezoid_log_weights(x))
    u_in /= np.sum(w * u_in)
    u_out /= np.sum(w * u_out)
    a_q = q + tau * (u_in - q * (~inside) / np.sum(w * q * (~inside)))  # TV(a_q, q) = tau
    a_p = p + tau * (u_out - p * inside / np.sum(w * p * inside))      # TV(a_p, p) = tau
    assert a_q.min() >= 0 and a_p.min() >= 0
    d = X.hockey_stick_delta(x, np.log(a_q), np.log(a_p), eps, both=False)
    claimed = X.gdp_delta(eps, mu) + (1 + math.exp(eps)) * tau
    assert d <= claimed * (1 + 1e-5)
    assert d == pytest.approx(claimed, rel=1e-4)  # attained
    assert d > X.gdp_delta(eps, mu) + tau  # the paper's "+ tau" under-reports
    # and the accountant / calibrator charge exactly this
    ev = S.stationary_event(1.0, 1.0, 1.0, tv_error=tau)
    assert ev.mu == pytest.approx(1.0)
    assert Accountant([ev]).get_delta(eps) == pytest.approx(claimed, rel=1e-9)
    b = S.stationary_beta_max(eps, 1e-5, sensitivity=0.02, strong_convexity=1.0, tv_error=1e-6)
    mu_b = S.gibbs_gdp_mu(b, 0.02, 1.0)
    assert X.gdp_delta(eps, mu_b) + (1 + math.e) * 1e-6 == pytest.approx(1e-5, rel=1e-8)
    assert b < S.stationary_beta_max(eps, 1e-5, sensitivity=0.02, strong_convexity=1.0)


def test_multiple_draws_compose():
    ev = S.stationary_event(100.0, 0.02, 1.0, num_draws=4, tv_error=1e-8)
    assert ev.mu == pytest.approx(2 * S.gibbs_gdp_mu(100.0, 0.02, 1.0))
    assert ev.tv_error == pytest.approx(4e-8)
    b4 = S.stationary_beta_max(1.0, 1e-5, sensitivity=0.02, strong_convexity=1.0, num_draws=4)
    assert b4 == pytest.approx(S.stationary_beta_max(1.0, 1e-5, sensitivity=0.02, strong_convexity=1.0) / 4)


def _thresholded_logdens(beta, dbar, psi):
    return -beta * np.maximum((GRID - dbar) ** 2 / 2, psi)


@pytest.mark.parametrize("psi", [0.0, 1e-4, 1e-3, 1e-2])
def test_corrected_theorem_2_7_meets_its_claim(psi):
    eps, delta = 1.0, 1e-5
    b = S.theorem_2_7_beta_max(eps, delta, sensitivity=DELTA, strong_convexity=1.0, smoothness=1.0, psi=psi)
    # the digest's printed (c) uses e^{beta psi} <= e; the exact LSI constant is never worse
    d_psi = DELTA + math.sqrt(2 * psi)
    digest = min(1 / psi if psi > 0 else math.inf,
                 eps / (2 * d_psi * (4 * math.sqrt(2 * psi) + DELTA)),
                 eps**2 / (8 * math.e * d_psi**2 * math.log(1 / delta)))
    assert b >= digest
    if psi > 0:
        assert b * psi <= 1.0 + 1e-12
    # exact privacy of the thresholded Gibbs pair on C = [-2, 2] (worst-case neighbours)
    for dbar in [0.0, 0.9]:
        d = X.hockey_stick_delta(GRID, _thresholded_logdens(b, dbar, psi), _thresholded_logdens(b, dbar + DELTA, psi), eps)
        assert d <= delta


def test_theorem_2_7_monotone_in_psi_and_eps():
    kw = dict(sensitivity=DELTA, strong_convexity=1.0, smoothness=1.0)
    bs = [S.theorem_2_7_beta_max(1.0, 1e-5, psi=p, **kw) for p in [0.0, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]]
    assert all(b2 < b1 for b1, b2 in zip(bs, bs[1:]))
    assert S.theorem_2_7_beta_max(2.0, 1e-5, psi=1e-3, **kw) > S.theorem_2_7_beta_max(1.0, 1e-5, psi=1e-3, **kw)
    # at psi = 0 it never exceeds the exact GDP calibration of the same Gaussian mechanism
    assert bs[0] <= S.stationary_beta_max(1.0, 1e-5, sensitivity=DELTA, strong_convexity=1.0)


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: S.gibbs_gdp_mu(1.0, 0.1, 0.0), "strong_convexity"),
        (lambda: S.gibbs_gdp_mu(-1.0, 0.1, 1.0), "beta"),
        (lambda: S.regularized_exp_mech_mu(1.0, 1.0, 0, 1.0), "n"),
        (lambda: S.regularized_exp_mech_mu(1.0, 1.0, 10, 0.0), "mu"),
        (lambda: S.stationary_beta_max(1.0, 1e-5, sensitivity=0.1, strong_convexity=1.0, tv_error=1e-5), "tv_error"),
        (lambda: S.stationary_event(1.0, 0.1, 1.0, num_draws=0), "num_draws"),
        (lambda: S.theorem_2_7_beta_max(1.0, 1e-5, sensitivity=0.1, strong_convexity=1.0, smoothness=1.0, psi=-1.0), "psi"),
        (lambda: S.theorem_2_7_beta_max(1.0, 2.0, sensitivity=0.1, strong_convexity=1.0, smoothness=1.0, psi=0.1), "delta"),
    ],
)
def test_bad_inputs_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
