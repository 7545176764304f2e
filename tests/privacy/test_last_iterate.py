"""Last-iterate (privacy amplification by iteration) bound for strongly convex ULA."""

import math

import numpy as np
import pytest

from dp_infer.privacy import exact as X
from dp_infer.privacy import last_iterate as LI
from dp_infer.privacy import path as P
from dp_infer.privacy import stationary as S
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import ZcdpEvent
from dp_infer.privacy.conversions import linear_rdp_epsilon, linear_rdp_rho


@pytest.mark.parametrize("c", [0.0, 0.3, 0.9, 0.999, 1 - 1e-9, 1.0])
def test_ratio_is_between_1_and_K_and_equals_cauchy_schwarz_form(c):
    for K in [1, 2, 7, 100, 5000]:
        r = LI.shifted_rdp_ratio(c, K)
        w = c ** (K - np.arange(1, K + 1, dtype=np.float64))
        assert 1.0 - 1e-12 <= r <= K * (1 + 1e-12)
        assert r == pytest.approx(w.sum() ** 2 / np.sum(w * w), rel=1e-9)
    assert LI.shifted_rdp_ratio(c, 1) == pytest.approx(1.0)


@pytest.mark.parametrize("c,K", [(0.5, 10), (0.9, 50), (0.99, 400), (0.999, 3000), (1.0, 20)])
def test_optimal_shift_allocation_is_feasible_and_attains_the_bound(c, K):
    s = 0.37
    a, z = LI.optimal_shift_allocation(c, s, K)
    assert np.all(a >= 0)
    assert np.all(z >= -1e-12 * s * K)  # every intermediate shift is non-negative
    assert abs(z[-1]) <= 1e-9 * s * K  # ends unshifted (the released iterate's own divergence)
    # sum a_k^2 / (2 sigma^2) with sigma = 1 equals the closed form's slope
    assert np.sum(a * a) / 2.0 == pytest.approx(LI.contractive_iteration_rho(c, s, 1.0, K), rel=1e-9)
    # closed form of the intermediate shifts from the derivation
    if c < 1:
        k = np.arange(K + 1)
        zk = s * (1 - c**k) * (1 - c ** (K - k)) / ((1 - c) * (1 + c**K))
        np.testing.assert_allclose(z, zk, atol=1e-9 * s * K)


def test_any_other_feasible_allocation_costs_more():
    # random feasible allocations (ending at z_K = 0, z_k >= 0) never beat the optimum
    rng = np.random.default_rng(0)
    c, s, K = 0.8, 1.0, 12
    best = LI.contractive_iteration_rho(c, s, 1.0, K)
    target = s * (1 - c**K) / (1 - c)
    w = c ** (K - np.arange(1, K + 1))
    for _ in range(200):
        a = rng.exponential(size=K)
        a *= target / np.sum(w * a)  # satisfy sum c^{K-k} a_k = s (1 - c^K)/(1 - c)
        assert np.sum(a * a) / 2 >= best * (1 - 1e-12)


def test_never_above_path_bound_and_first_order_equal():
    beta, s, m, M = 40.0, 0.02, 1.0, 3.0
    for h in [1e-4, 1e-3, 1e-2]:
        for K in [1, 10, 100, 1000, 10000]:
            if h * beta * (m + M) > 2:
                continue
            rho_li = LI.last_iterate_rho(beta, s, h, K, m, M)
            rho_path = P.path_rho(beta, s, K * h)
            assert rho_li <= rho_path * (1 + 1e-12)
            x = K * h * beta * m
            if x < 0.05:  # second-order agreement: relative gap O((K h m_U)^2)
                assert 1 - rho_li / rho_path <= x * x


def test_limit_is_the_stationary_gaussian_mechanism_value():
    beta, s, m, M = 100.0, 0.02, 0.5, 2.0
    stationary_rho = S.gibbs_gdp_mu(beta, s, m) ** 2 / 2  # alpha beta Delta^2/(2m)
    assert stationary_rho == pytest.approx(beta * s * s / (2 * m))
    prev = 0.0
    for h in [5e-3, 1e-3, 1e-4, 1e-5]:
        lim = LI.last_iterate_rho(beta, s, h, 10**9, m, M)
        assert lim == pytest.approx(LI.last_iterate_rho_limit(beta, s, m, h), rel=1e-9)
        assert lim <= stationary_rho
        assert lim > prev
        prev = lim
    assert prev == pytest.approx(stationary_rho, rel=1e-5 * beta * m)  # gap = h beta m / 2


@pytest.mark.parametrize("beta,h,K,x0", [(50.0, 0.01, 500, 0.0), (180.0, 1e-3, 20000, -1.5), (5.0, 0.2, 3, 0.7)])
def test_bound_equals_exact_rdp_of_ula_on_a_quadratic(beta, h, K, x0):
    # loss (theta - dbar)^2/2 (m = M = 1), neighbours dbar = 0 vs 0.02 (Delta = 0.02); ULA's K-th
    # iterate is Gaussian: the oracle is the exact Renyi divergence of the two Gaussians
    s, m = 0.02, 1.0
    mean_d, var_d = X.ula_quadratic_law(beta, m, 0.0, h, K, init_mean=x0)
    mean_p, var_p = X.ula_quadratic_law(beta, m, s / m, h, K, init_mean=x0)
    rho = LI.last_iterate_rho(beta, s, h, K, m, m)
    for alpha in [1.5, 2.0, 10.0]:
        exact = X.gaussian_renyi(alpha, mean_d, var_d, mean_p, var_p)
        assert exact <= alpha * rho * (1 + 1e-10)
        assert exact == pytest.approx(alpha * rho, rel=1e-8)  # tight for quadratics


def test_multiple_releases_compose_exactly_for_a_quadratic():
    beta, s, m, h = 50.0, 0.02, 1.0, 0.01
    K1, K2 = 30, 80
    rho = LI.last_iterate_rho(beta, s, h, None, m, m, release_steps=[K1, K2])
    assert rho == pytest.approx(LI.last_iterate_rho(beta, s, h, K1, m, m) + LI.last_iterate_rho(beta, s, h, K2 - K1, m, m))
    # exact joint law of (x_K1, x_K2) from x0 = 0: same covariance, mean difference dm
    c = 1 - h * beta * m
    g = K2 - K1
    v1 = 2 * h * (1 - c ** (2 * K1)) / (1 - c * c)
    vg = 2 * h * (1 - c ** (2 * g)) / (1 - c * c)
    cov = np.array([[v1, c**g * v1], [c**g * v1, c ** (2 * g) * v1 + vg]])
    dm = (s / m) * np.array([1 - c**K1, 1 - c**K2])
    exact_rho = 0.5 * dm @ np.linalg.solve(cov, dm)  # D_alpha = alpha/2 dm^T cov^{-1} dm
    assert exact_rho <= rho * (1 + 1e-10)
    assert exact_rho == pytest.approx(rho, rel=1e-8)
    # releasing more iterates costs more than the last one alone
    assert rho > LI.last_iterate_rho(beta, s, h, K2, m, m)


def test_ou_comparison():
    # seed-001 §10.4 setting: beta = 5, gradient difference 0.1 (m = 1, so mean shift 0.1), alpha = 2
    beta, m, s, alpha = 5.0, 1.0, 0.1, 2.0
    for t in [1e-2, 0.1, 1.0, 10.0]:
        ou = X.ou_last_iterate_rdp(alpha, beta, m, s / m, t)
        path = alpha * P.path_rho(beta, s, t)
        assert ou <= path * (1 + 1e-12)  # the path bound dominates the OU last iterate
        # the generic contractive bound applied to the EXACT OU discretisation is the OU value
        for K in [1, 7, 100]:
            u = beta * m * t / K
            c = math.exp(-u)
            shift = (1 - c) * s / m
            noise_std = math.sqrt(-math.expm1(-2 * u) / (beta * m))
            assert alpha * LI.contractive_iteration_rho(c, shift, noise_std, K) == pytest.approx(ou, rel=1e-9)
        # ULA's bound converges to the OU value as h -> 0 at fixed t
        # (relative gap O(h beta m): ULA's stationary variance is inflated by 1/(1 - h beta m/2))
        errs = []
        for K in [100, 1000, 10000, 100000]:
            h = t / K
            if h * beta * 2 * m > 2:
                continue
            errs.append(abs(alpha * LI.last_iterate_rho(beta, s, h, K, m, m) / ou - 1))
            assert errs[-1] <= h * beta * m
        assert errs[-1] < 1e-3 and all(e2 <= e1 for e1, e2 in zip(errs, errs[1:]))


def test_calibrated_last_iterate_meets_its_claim_on_the_quadratic_family():
    # seed-001 §10.2: (theta - d)^2/2, d in [-1, 1], n = 100, worst-case neighbours (Delta = 2/n)
    n, eps, delta = 100, 1.0, 1e-5
    s, m, M = 2.0 / n, 1.0, 1.0
    h, K = 1e-3, 20000
    b = LI.last_iterate_beta_max(eps, delta, sensitivity=s, strong_convexity=m, smoothness=M, step_size=h, num_steps=K)
    assert LI.last_iterate_epsilon(b, s, h, K, m, M, delta) == pytest.approx(eps, abs=1e-8)
    mean_d, var = X.ula_quadratic_law(b, m, 0.0, h, K)
    mean_p, _ = X.ula_quadratic_law(b, m, s, h, K)
    sd = math.sqrt(var)
    x = np.linspace(-12 * sd, 12 * sd + s, 200001)
    d = X.hockey_stick_delta(x, -0.5 * ((x - mean_d) / sd) ** 2, -0.5 * ((x - mean_p) / sd) ** 2, eps)
    assert d <= delta
    # the uniform bound (any h, any K) is smaller but also valid
    b_uni = LI.last_iterate_beta_max(eps, delta, sensitivity=s, strong_convexity=m)
    assert b_uni <= b
    assert b_uni == pytest.approx(2 * m * linear_rdp_rho(eps, delta) / s**2)


def test_beta_max_is_monotone_target():
    s, m, M, h, K = 0.01, 1.0, 4.0, 1e-3, 5000
    bs = np.linspace(1.0, 2.0 / (h * (m + M)), 50)
    rhos = [LI.last_iterate_rho(b, s, h, K, m, M) for b in bs]
    assert np.all(np.diff(rhos) > 0)  # rho increases in beta on the admissible range


def test_event_and_accountant():
    ev = LI.last_iterate_event(50.0, 0.02, 0.01, 500, 1.0, 1.0, num_chains=3)
    assert isinstance(ev, ZcdpEvent)
    assert ev.rho == pytest.approx(3 * LI.last_iterate_rho(50.0, 0.02, 0.01, 500, 1.0, 1.0))
    acc = Accountant([ev])
    assert acc.get_epsilon(1e-5) == pytest.approx(linear_rdp_epsilon(ev.rho, 1e-5)[0], rel=1e-9)
    text = " ".join(ev.assumptions)
    assert "strongly convex" in text and "2 / (beta (m + M))" in text


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: LI.last_iterate_rho(50.0, 0.02, 0.03, 10, 1.0, 1.0), "step_size"),  # h beta (m+M) = 3 > 2
        (lambda: LI.last_iterate_rho(50.0, 0.02, 0.01, 10, 0.0, 1.0), "strong_convexity"),
        (lambda: LI.last_iterate_rho(50.0, 0.02, 0.01, 10, -1.0, 1.0), "strong_convexity"),
        (lambda: LI.last_iterate_rho(50.0, 0.02, 0.01, 10, 2.0, 1.0), "smoothness"),
        (lambda: LI.last_iterate_rho(50.0, 0.02, 0.01, 0, 1.0, 1.0), "num_steps"),
        (lambda: LI.last_iterate_rho(50.0, 0.02, 0.01, 10, 1.0, 1.0, release_steps=[5, 5]), "release_steps"),
        (lambda: LI.last_iterate_rho(50.0, 0.02, 0.01, 10, 1.0, 1.0, release_steps=[5, 20]), "release_steps"),
        (lambda: LI.ula_contraction(0.1, 0.0, 1.0), "strong_convexity_u"),
        (lambda: LI.shifted_rdp_ratio(1.5, 3), "contraction"),
        (lambda: LI.last_iterate_beta_max(1.0, 1e-5, sensitivity=0.1, strong_convexity=1.0, step_size=0.1), "smoothness"),
        (lambda: LI.last_iterate_beta_max(1.0, 1e-5, sensitivity=0.1, strong_convexity=1.0, num_steps=10), "num_steps"),
    ],
)
def test_bad_inputs_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
