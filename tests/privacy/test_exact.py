"""The numerical oracles themselves, against independent computations."""

import math

import numpy as np
import pytest
from dp_accounting.pld import common, privacy_loss_distribution as pldlib
from scipy import integrate, stats

from dp_infer.privacy import exact as X


def test_hockey_stick_on_a_grid_equals_the_gaussian_closed_form_both_directions():
    mu = 0.8
    x = np.linspace(-12, 13, 300001)
    lp, lq = -0.5 * x**2, -0.5 * (x - mu) ** 2
    for eps in [0.0, 0.5, 1.0, 3.0]:
        ref = X.gdp_delta(eps, mu)
        assert X.hockey_stick_delta(x, lp, lq, eps, both=False) == pytest.approx(ref, rel=1e-7)
        assert X.hockey_stick_delta(x, lq, lp, eps, both=False) == pytest.approx(ref, rel=1e-7)
    assert X.hockey_stick_epsilon(x, lp, lq, 1e-5) == pytest.approx(X.gdp_epsilon(mu, 1e-5), abs=1e-6)


def test_hockey_stick_asymmetric_pair_takes_the_max():
    # Laplace vs shifted Laplace is symmetric; a Gaussian vs a wider Gaussian is not
    x = np.linspace(-30, 30, 600001)
    lp = stats.norm.logpdf(x, 0, 1)
    lq = stats.norm.logpdf(x, 0, 1.5)
    eps = 0.2
    f = lambda a, b: integrate.quad(lambda t: max(0.0, a(t) - math.exp(eps) * b(t)), -30, 30, limit=400, points=[-3, 0, 3])[0]  # noqa: E731
    pq = f(lambda t: stats.norm.pdf(t, 0, 1), lambda t: stats.norm.pdf(t, 0, 1.5))
    qp = f(lambda t: stats.norm.pdf(t, 0, 1.5), lambda t: stats.norm.pdf(t, 0, 1))
    assert pq != pytest.approx(qp, rel=1e-2)
    assert X.hockey_stick_delta(x, lp, lq, eps) == pytest.approx(max(pq, qp), rel=1e-5)


def test_gaussian_renyi_matches_numerical_integration():
    m1, v1, m2, v2 = 0.3, 0.8, -0.2, 1.1
    for a in [1.5, 2.0, 4.0]:
        integrand = lambda t: math.exp(a * stats.norm.logpdf(t, m1, math.sqrt(v1))  # noqa: E731
                                       + (1 - a) * stats.norm.logpdf(t, m2, math.sqrt(v2)))
        ref = math.log(integrate.quad(integrand, -20, 20, limit=400)[0]) / (a - 1)
        assert X.gaussian_renyi(a, m1, v1, m2, v2) == pytest.approx(ref, rel=1e-9)
    assert X.gaussian_renyi(3.0, 0.0, 2.0, 0.0, 1.0) == math.inf  # alpha v2 + (1 - alpha) v1 <= 0


def test_ula_quadratic_law_matches_simulation():
    beta, m, dbar, h, K = 20.0, 1.0, 0.4, 0.02, 40
    mean, var = X.ula_quadratic_law(beta, m, dbar, h, K, init_mean=-1.0, init_var=0.25)
    rng = np.random.default_rng(0)
    n = 200000
    x = -1.0 + 0.5 * rng.standard_normal(n)
    for _ in range(K):
        x = x - h * beta * m * (x - dbar) + math.sqrt(2 * h) * rng.standard_normal(n)
    assert abs(x.mean() - mean) < 5 * math.sqrt(var / n)
    assert abs(x.var() - var) < 5 * var * math.sqrt(2 / n)


def test_ou_formula_limits():
    # small t: the path value alpha beta^2 Delta^2 t / 4 (Delta = m * mean shift); large t: stationary
    a, b, m, s = 2.0, 5.0, 1.0, 0.1
    assert X.ou_last_iterate_rdp(a, b, m, s, 1e-6) == pytest.approx(a * b**2 * (m * s) ** 2 * 1e-6 / 4, rel=1e-5)
    assert X.ou_last_iterate_rdp(a, b, m, s, 50.0) == pytest.approx(a * b * m * s**2 / 2, rel=1e-12)


@pytest.mark.parametrize("eps,k", [(0.1, 50), (0.7, 6)])
def test_exact_pure_composition_against_dp_accounting_pld(eps, k):
    pld = pldlib.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, 0.0),
                                         value_discretization_interval=1e-5).self_compose(k)
    for et in [0.0, 0.5 * k * eps, 0.9 * k * eps]:
        assert math.exp(X.pure_composition_log_delta(eps, k, et)) == pytest.approx(pld.get_delta_for_epsilon(et), rel=1e-3, abs=1e-12)
    assert X.pure_composition_log_delta(eps, k, k * eps) == -math.inf


def test_laplace_convolution_helpers_match_quadrature():
    b = 0.07
    y = np.array([-0.4, 0.1, 0.55, 1.3])
    got = X.laplace_convolved_log_density(y, b, atoms=(0.2,), atom_weights=(0.3,), uniform=(0.0, 1.0), uniform_weight=0.7)
    lap = lambda t: math.exp(-abs(t) / b) / (2 * b)  # noqa: E731
    for yi, g in zip(y, got):
        ref = 0.3 * lap(yi - 0.2) + 0.7 * integrate.quad(lambda x: lap(yi - x), 0, 1, points=[yi] if 0 < yi < 1 else None)[0]
        assert g == pytest.approx(math.log(ref), rel=1e-9)
    # continuous part on a grid equals the closed-form truncated Gaussian convolution
    cx = np.linspace(0, 1, 40001)
    m, sd = 0.45, 0.1
    cl = stats.norm.logpdf(cx, m, sd)
    grid_val = X.laplace_convolved_log_density(y, b, cont_x=cx, cont_logdens=cl, cont_weight=1.0)
    closed = X.truncated_gaussian_laplace_log_density(y, b, m, sd, 0.0, 1.0)
    np.testing.assert_allclose(grid_val, closed, rtol=1e-6)
