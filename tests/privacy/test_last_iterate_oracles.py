"""Oracle tests for dp_infer.privacy.last_iterate.

Oracles:
* the shifted-RDP ratio (1+c)(1-c^K)/((1-c)(1+c^K)) evaluated in 60-digit mpmath, including
  c within 1e-13 of 1, K = 10^18 and K = inf, where the float formula needs log1p / expm1;
* closed forms at the ends: c = 0 (the last iterate is one Gaussian step: rho = h beta^2 Delta^2
  / 4 whatever K), c = 1 (K), K = inf ((1+c)/(1-c)), releasing every iterate = the path bound;
* the contraction of the gradient map of a quadratic with curvatures m_U, M_U is the spectral
  norm of I - h diag(m_U, M_U) (numpy's matrix 2-norm), admissible exactly up to h = 2/(m_U+M_U);
* every calibrated beta meets its target exactly in float64 (no tolerance) and is tight, checked
  against the 60-digit rho and the CKS conversion.
"""

import math

import mpmath
import numpy as np
import pytest

from dp_infer.privacy import last_iterate as LI
from dp_infer.privacy import path as P
from dp_infer.privacy.conversions import linear_rdp_epsilon, linear_rdp_rho
from dp_infer.privacy.events import ZcdpEvent
from tests.support.strict_tolerance import approx


mpmath.mp.dps = 60


def _mp_ratio(x, K):
    """(2 - x)(1 - c^K) / (x (1 + c^K)) with c = 1 - x, in 60 digits (x exact as a binary float)."""
    x = mpmath.mpf(x)
    if x == 0:
        return mpmath.mpf(K)
    if K == math.inf:
        return (2 - x) / x
    ck = (1 - x) ** K
    return (2 - x) * (1 - ck) / (x * (1 + ck))


def _mp_rho(beta, s, h, K, m, chains=1):
    beta, s, h, m = (mpmath.mpf(v) for v in (beta, s, h, m))
    x = h * beta * m  # 1 - c, in 60 digits
    if K == math.inf:
        ratio = (2 - x) / x
    else:
        ck = (1 - x) ** K
        ratio = (2 - x) * (1 - ck) / (x * (1 + ck))
    return chains * h * beta**2 * s**2 / 4 * ratio


# --------------------------------------------------------------------------- the ratio


@pytest.mark.parametrize("c", [0.0, 1e-300, 0.25, 0.5, 0.9, 0.999, 1 - 2.0**-20, 1 - 1e-9, 1 - 1e-13, 1.0])
@pytest.mark.parametrize("K", [1, 2, 3, 10, 1000, 10**6, 10**12, 10**18, math.inf])
def test_ratio_against_60_digits(c, K):
    x = 1.0 - c  # exact in binary for these c
    got = LI.shifted_rdp_ratio(c, K)
    want = _mp_ratio(x, K) if c < 1.0 else (mpmath.inf if K == math.inf else mpmath.mpf(K))
    if want == mpmath.inf:
        assert got == math.inf
        return
    assert got == approx(float(want), rel=1e-12)
    assert 1.0 - 1e-15 <= got <= K * (1 + 1e-15)


def test_ratio_closed_forms_at_the_ends():
    for K in (1, 2, 17, 10**9):
        assert LI.shifted_rdp_ratio(0.0, K) == 1.0  # c = 0: only the last step counts
        assert LI.shifted_rdp_ratio(1.0, K) == float(K)  # c = 1: K steps of a plain Gaussian path
    assert LI.shifted_rdp_ratio(0.0, math.inf) == 1.0
    assert LI.shifted_rdp_ratio(0.5, math.inf) == 3.0  # (1 + c)/(1 - c)
    assert LI.shifted_rdp_ratio(0.75, math.inf) == 7.0
    assert LI.shifted_rdp_ratio(0.5, 1) == 1.0
    assert LI.shifted_rdp_ratio(0.5, 2) == approx(1.8, rel=1e-15)  # (sum w)^2/sum w^2 = 2.25/1.25


def test_ratio_inputs():
    for bad in (-0.1, 1.0 + 1e-12, 2.0, math.nan):
        with pytest.raises(ValueError, match="contraction"):
            LI.shifted_rdp_ratio(bad, 3)
    for bad in (0, -1, 2.5, True, math.nan, -math.inf):
        with pytest.raises(ValueError, match="num_steps"):
            LI.shifted_rdp_ratio(0.5, bad)


def test_contractive_iteration_rho_is_the_shift_over_the_noise_times_the_ratio():
    assert LI.contractive_iteration_rho(0.5, 0.3, 2.0, 4) == approx(
        0.09 / 8.0 * float(_mp_ratio(0.5, 4)), rel=1e-14)
    assert LI.contractive_iteration_rho(0.9, 0.0, 1.0, 10) == 0.0
    with pytest.raises(ValueError, match="shift"):
        LI.contractive_iteration_rho(0.5, -0.1, 1.0, 3)
    with pytest.raises(ValueError, match="noise_std"):
        LI.contractive_iteration_rho(0.5, 0.1, 0.0, 3)


def test_optimal_allocation_at_c_0_spends_everything_on_the_last_step():
    a, z = LI.optimal_shift_allocation(0.0, 0.4, 5)
    np.testing.assert_array_equal(a, [0.0, 0.0, 0.0, 0.0, 0.4])
    np.testing.assert_array_equal(z, [0.0, 0.4, 0.4, 0.4, 0.4, 0.0])
    a, z = LI.optimal_shift_allocation(1.0, 0.4, 3)
    np.testing.assert_array_equal(a, [0.4, 0.4, 0.4])
    np.testing.assert_array_equal(z, [0.0, 0.0, 0.0, 0.0])
    a, z = LI.optimal_shift_allocation(0.5, 1.0, 1)
    np.testing.assert_allclose(a, [1.0], rtol=1e-15)
    for bad in (-0.5, 1.5):
        with pytest.raises(ValueError, match="contraction"):
            LI.optimal_shift_allocation(bad, 1.0, 3)
    with pytest.raises(ValueError, match="shift"):
        LI.optimal_shift_allocation(0.5, -1.0, 3)


# --------------------------------------------------------------------------- ULA's contraction


@pytest.mark.parametrize("h, m, M", [(0.1, 1.0, 3.0), (0.4, 1.0, 3.0), (0.5, 1.0, 3.0), (0.3, 2.0, 2.0),
                                     (1e-6, 1e-3, 1e3), (0.5, 2.0, 2.0)])
def test_ula_contraction_is_the_spectral_norm_of_the_gradient_map(h, m, M):
    c = LI.ula_contraction(h, m, M)
    J = np.eye(2) - h * np.diag([m, M])  # Jacobian of x -> x - h grad U for curvatures m and M
    assert c == approx(np.linalg.norm(J, 2), rel=1e-15, abs=1e-16)
    assert c == approx(1.0 - h * m, rel=1e-15, abs=1e-16)  # on the admissible range


def test_ula_contraction_is_admissible_up_to_two_over_m_plus_M_and_not_beyond():
    m, M = 1.0, 3.0
    assert LI.ula_contraction(0.5, m, M) == 0.5  # h (m + M) = 2 exactly
    LI.ula_contraction(0.5 * (1 + 1e-13), m, M)  # rounding of a computed step is tolerated
    # the tolerance is inclusive: h (m + M) equal to 2 (1 + 1e-12) in float64 is still admitted
    edge = 2.0 * (1.0 + 1e-12)
    assert (edge / 2.0) * (1.0 + 1.0) == edge
    LI.ula_contraction(edge / 2.0, 1.0, 1.0)
    for h in (0.5 * (1 + 1e-9), 0.5001, 0.6, 1.0):
        with pytest.raises(ValueError, match=r"step_size must lie in \(0, 2/\(m_U \+ M_U\)\] = \(0, 0.5\]"):
            LI.ula_contraction(h, m, M)
    LI.ula_contraction(0.1, 2.0, 2.0)  # M = m is allowed
    with pytest.raises(ValueError, match="smoothness_u must be >= strong_convexity_u"):
        LI.ula_contraction(0.1, 2.0, 2.0 * (1 - 1e-12))
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="strong_convexity_u"):
            LI.ula_contraction(0.1, bad, 1.0)
        with pytest.raises(ValueError, match="smoothness_u"):
            LI.ula_contraction(0.1, 0.5, bad)
        with pytest.raises(ValueError, match="step_size"):
            LI.ula_contraction(bad, 0.5, 1.0)


# --------------------------------------------------------------------------- the slope


@pytest.mark.parametrize("beta, s, h, K, m, M", [
    (50.0, 0.02, 0.01, 500, 1.0, 1.0),
    (3.0, 0.1, 1e-14, 10**18, 1.0 / 3.0, 1.0),       # h beta m = 1e-14: needs log1p / expm1
    (3.0, 0.1, 1e-14, 10**6, 1.0 / 3.0, 1.0),        # K h beta m << 1: the path value
    (1e4, 1e-3, 1e-9, 10**12, 2.0, 5.0),
    (1.0, 0.1, 1e-9, 10**12, 1.0, 2.0),              # 1 - c = 1e-9: x, not 1 - c (cancellation: 1e-7)
    (7.0, 0.3, 3.3e-10, 10**13, 0.9, 4.0),
    (2.0, 0.5, 0.25, 7, 1.0, 3.0),                   # h beta (m + M) = 2: the boundary
])
def test_last_iterate_rho_against_60_digits(beta, s, h, K, m, M):
    got = LI.last_iterate_rho(beta, s, h, K, m, M)
    assert got == approx(float(_mp_rho(beta, s, h, K, m)), rel=1e-11)
    assert got <= P.path_rho(beta, s, K * h) * (1 + 1e-12)
    assert LI.last_iterate_rho(beta, s, h, K, m, M, num_chains=3) == approx(3 * got, rel=1e-15)


def test_at_c_0_the_last_iterate_is_one_gaussian_step():
    # m = M and h beta m = 1: phi_D is constant, x_K = phi_D(x_{K-1}) + noise is a Gaussian
    # mechanism with shift h beta Delta and variance 2h: rho = (h beta Delta)^2 / (2 * 2h)
    beta, s, m = 4.0, 0.3, 2.0
    h = 1.0 / (beta * m)
    one_step = (h * beta * s) ** 2 / (4.0 * h)
    for K in (1, 2, 50, 10**9):
        assert LI.last_iterate_rho(beta, s, h, K, m, m) == approx(one_step, rel=1e-15)
    assert LI.last_iterate_rho(beta, s, h, None, m, m, release_steps=[3, 4, 9]) == approx(3 * one_step,
                                                                                               rel=1e-15)


@pytest.mark.parametrize("K", [1, 2, 3, 10, 10**6])
def test_inside_the_step_tolerance_the_contraction_is_abs_one_minus_h_beta_m(K):
    # m = M, h beta m = 1 + 5e-13 (admitted: h beta (m + M) <= 2 (1 + 1e-12)). The gradient map is
    # (h beta m - 1)-Lipschitz, c = 5e-13 > 0; the ratio at c = 1 - h beta m = -5e-13 is 2e-12 lower
    # for even K (an under-report, found by mutation testing of the x >= 1 branch)
    h, s = 1.0 + 5e-13, 0.1
    got = LI.last_iterate_rho(1.0, s, h, K, 1.0, 1.0)
    c = abs(1 - mpmath.mpf(h))
    want = mpmath.mpf(h) * s * s / 4 * (1 + c) * (1 - c**K) / ((1 - c) * (1 + c**K))
    assert got == approx(float(want), rel=1e-14)


def test_releasing_every_iterate_is_the_path_bound():
    beta, s, h, m, M = 20.0, 0.05, 0.01, 1.0, 2.0
    for K in (1, 2, 5):
        rho = LI.last_iterate_rho(beta, s, h, None, m, M, release_steps=list(range(1, K + 1)))
        assert rho == approx(P.path_rho(beta, s, K * h), rel=1e-14)


def test_release_steps_are_gaps_and_may_end_at_num_steps():
    beta, s, h, m, M = 20.0, 0.05, 0.01, 1.0, 2.0
    one = lambda K: LI.last_iterate_rho(beta, s, h, K, m, M)  # noqa: E731
    assert LI.last_iterate_rho(beta, s, h, 10, m, M, release_steps=[10]) == one(10)
    assert LI.last_iterate_rho(beta, s, h, 10, m, M, release_steps=[4, 10]) == approx(one(4) + one(6),
                                                                                            rel=1e-15)
    assert LI.last_iterate_rho(beta, s, h, None, m, M, release_steps=[2, 3, 7]) == approx(
        one(2) + one(1) + one(4), rel=1e-15)
    assert LI.last_iterate_rho(beta, s, h, 12, m, M, release_steps=[4, 10]) == approx(one(4) + one(6),
                                                                                            rel=1e-15)
    for bad in ([], [0, 3], [3, 2], [3, 3], [2.0, 3]):
        with pytest.raises(ValueError, match="release_steps"):
            LI.last_iterate_rho(beta, s, h, None, m, M, release_steps=bad)
    with pytest.raises(ValueError, match="release_steps must not exceed num_steps=9, got 10$"):
        LI.last_iterate_rho(beta, s, h, 9, m, M, release_steps=[4, 7, 10])
    with pytest.raises(ValueError, match="num_steps"):
        LI.last_iterate_rho(beta, s, h, None, m, M)


def test_slope_inputs():
    args = dict(beta=20.0, sensitivity=0.05, step_size=0.01, num_steps=10, strong_convexity=1.0, smoothness=2.0)
    assert LI.last_iterate_rho(**{**args, "sensitivity": 0.0}) == 0.0
    for name, bad in (("beta", 0.0), ("beta", -1.0), ("sensitivity", -0.1), ("step_size", 0.0),
                      ("strong_convexity", 0.0), ("smoothness", -1.0), ("num_steps", 0)):
        with pytest.raises(ValueError, match=name):
            LI.last_iterate_rho(**{**args, name: bad})
    with pytest.raises(ValueError, match="num_chains"):
        LI.last_iterate_rho(**args, num_chains=0)


def test_rdp_is_alpha_times_rho_on_orders_above_one():
    # issue 30 (finding 13): this test compared last_iterate_rdp with alpha * last_iterate_rho,
    # which is its implementation. Oracle now: the closed form of the shifted-divergence bound
    # evaluated in 50-digit mpmath from the inputs, rho = (h beta^2 Delta^2 / 4) (1 + c)(1 - c^K) /
    # ((1 - c)(1 + c^K)) with the contraction c = max(|1 - h beta m|, |1 - h beta M|) = 0.8 here
    # (h beta m = 0.2, h beta M = 0.4), times K_chains, times the order.
    beta, s, h, K, m, M = 20.0, 0.05, 0.01, 10, 1.0, 2.0
    args = (beta, s, h, K, m, M)
    al = np.array([1.0 + 1e-9, 1.5, 2.0, 64.0, 1e6])
    with mpmath.workdps(50):
        b, d, hh = mpmath.mpf(beta), mpmath.mpf(s), mpmath.mpf(h)
        c = max(abs(1 - hh * b * m), abs(1 - hh * b * M))
        rho = hh * b**2 * d**2 / 4 * (1 + c) * (1 - c**K) / ((1 - c) * (1 + c**K))
        for chains in (1, 2):
            got = LI.last_iterate_rdp(al, *args, num_chains=chains)
            for a, g in zip(al, got):
                want = chains * rho * mpmath.mpf(a)
                assert abs(mpmath.mpf(g) / want - 1) < 1e-14, (chains, a, g, want)
    for bad in (1.0, 0.5, -2.0, math.inf, math.nan, [2.0, 1.0]):
        with pytest.raises(ValueError, match=r"alpha \(Renyi order\) must lie in \(1, inf\)"):
            LI.last_iterate_rdp(bad, *args)


def test_limit_defaults_to_the_stationary_gaussian_mechanism():
    # h -> 0: beta Delta^2 / (2m), the exact RDP slope of the Gibbs posterior on a quadratic
    assert LI.last_iterate_rho_limit(10.0, 0.2, 0.5) == approx(10.0 * 0.04 / 1.0, rel=1e-15)
    assert LI.last_iterate_rho_limit(10.0, 0.2, 0.5, 0.1) == approx(10.0 * 0.04 * 1.5 / 2.0, rel=1e-15)
    # the K -> inf limit of the slope at that h
    assert LI.last_iterate_rho(10.0, 0.2, 0.1, 10**12, 0.5, 1.0) == approx(
        LI.last_iterate_rho_limit(10.0, 0.2, 0.5, 0.1), rel=1e-14)
    for name, kw in (("beta", dict(beta=0.0)), ("sensitivity", dict(sensitivity=-1.0)),
                     ("strong_convexity", dict(strong_convexity=0.0)), ("step_size", dict(step_size=-0.1))):
        with pytest.raises(ValueError, match=name):
            LI.last_iterate_rho_limit(**{**dict(beta=1.0, sensitivity=0.1, strong_convexity=1.0), **kw})


# --------------------------------------------------------------------------- event and epsilon


def test_event_carries_the_slope_of_chains_and_releases():
    ev = LI.last_iterate_event(20.0, 0.05, 0.01, 12, 1.0, 2.0, num_chains=4, release_steps=[4, 10])
    assert isinstance(ev, ZcdpEvent)
    assert ev.rho == LI.last_iterate_rho(20.0, 0.05, 0.01, 12, 1.0, 2.0, num_chains=4, release_steps=[4, 10])
    assert ev.rho == approx(4 * (LI.last_iterate_rho(20.0, 0.05, 0.01, 4, 1.0, 2.0)
                                        + LI.last_iterate_rho(20.0, 0.05, 0.01, 6, 1.0, 2.0)), rel=1e-15)
    assert ev.assumptions == LI._ASSUMPTIONS and len(ev.assumptions) == 7
    assert ev.metadata["release_steps"] == [4, 10] and ev.metadata["num_chains"] == 4
    one = LI.last_iterate_event(20.0, 0.05, 0.01, 12, 1.0, 2.0)  # defaults: one chain, the last iterate
    assert one.metadata["release_steps"] == [12] and one.metadata["num_chains"] == 1
    assert one.rho == approx(20.0 * 0.05**2 * 0.01 * 20.0 / 4 * float(_mp_ratio(0.01 * 20.0, 12)), rel=1e-12)


@pytest.mark.parametrize("delta", [1e-5, 1e-12, 0.3])
def test_epsilon_is_the_cks_conversion_of_the_slope(delta):
    args = (20.0, 0.05, 0.01, 50, 1.0, 2.0)
    rho = LI.last_iterate_rho(*args, num_chains=3, release_steps=[20, 50])
    want = linear_rdp_epsilon(rho, delta)[0]
    assert LI.last_iterate_epsilon(*args, delta, num_chains=3, release_steps=[20, 50]) == want
    assert LI.last_iterate_epsilon(*args, log_delta=math.log(delta), num_chains=3, release_steps=[20, 50]) == \
        approx(want, rel=1e-12)


# --------------------------------------------------------------------------- calibration


@pytest.mark.parametrize("eps, delta", [(1e-3, 1e-5), (1.0, 1e-5), (8.0, 1e-10), (50.0, 1e-3)])
@pytest.mark.parametrize("k", [1, 5])
def test_uniform_beta_max_meets_the_target_exactly_and_is_tight(eps, delta, k):
    s, m = 0.01, 0.5
    b = LI.last_iterate_beta_max(eps, delta, sensitivity=s, strong_convexity=m, num_chains=k)
    rho_max = linear_rdp_rho(eps, delta)
    rho = k * b * s * s / (2 * m)
    assert rho <= rho_max  # exact, no tolerance
    assert rho >= rho_max * (1 - 1e-12)
    assert b == approx(2 * m * rho_max / (k * s * s), rel=1e-12)
    # for every (h, K) the slope is at most the uniform one
    for h, K in ((0.01 / (b * (m + 2.0)), 10**6), (0.1 / (b * (m + 2.0)), 10), (1.0 / (b * (m + 2.0)), 10**9)):
        assert k * LI.last_iterate_rho(b, s, h, K, m, 2.0) <= rho_max * (1 + 1e-12)


@pytest.mark.parametrize("eps, delta", [(1e-3, 1e-5), (0.5, 1e-5), (4.0, 1e-8)])
@pytest.mark.parametrize("K", [1, 100, 10**5, None])
@pytest.mark.parametrize("k", [1, 3])
def test_beta_max_at_a_step_meets_the_target_exactly_and_is_tight(eps, delta, K, k):
    s, m, M, h = 0.01, 0.5, 2.0, 1e-3
    b = LI.last_iterate_beta_max(eps, delta, sensitivity=s, strong_convexity=m, smoothness=M, step_size=h,
                                 num_steps=K, num_chains=k)
    b_cap = 2.0 / (h * (m + M))
    rho_max = linear_rdp_rho(eps, delta)

    def rho(bb):
        return k * (LI.last_iterate_rho_limit(bb, s, m, h) if K is None else LI.last_iterate_rho(bb, s, h, K, m, M))

    assert 0.0 < b <= b_cap
    assert rho(b) <= rho_max  # exact, no tolerance
    mp = (k * mpmath.mpf(b) * s * s * (2 - h * mpmath.mpf(b) * m) / (4 * m) if K is None
          else _mp_rho(b, s, h, K, m, k))
    assert float(mp) <= rho_max * (1 + 1e-12)
    if b < b_cap:  # tight: a hair more beta exceeds the target
        assert rho(b * (1 + 1e-8)) > rho_max
        assert float(mp) >= rho_max * (1 - 1e-8)
    else:  # the step's stability cap binds
        assert rho(b_cap) <= rho_max
    assert linear_rdp_epsilon(rho(b), delta)[0] <= eps * (1 + 1e-9)


def test_beta_max_returns_the_cap_when_the_target_allows_any_stable_beta():
    s, m, M, h = 1e-4, 0.5, 2.0, 1e-3
    b_cap = 2.0 / (h * (m + M))
    assert LI.last_iterate_beta_max(20.0, 1e-5, sensitivity=s, strong_convexity=m, smoothness=M,
                                    step_size=h, num_steps=10) == b_cap
    assert LI.last_iterate_beta_max(20.0, 1e-5, sensitivity=s, strong_convexity=m, smoothness=M,
                                    step_size=h) == b_cap
    # and not when the chains use the budget up
    b = LI.last_iterate_beta_max(0.01, 1e-5, sensitivity=s, strong_convexity=m, smoothness=M,
                                 step_size=h, num_chains=1000)
    assert b < b_cap


def test_beta_max_with_log_delta_equals_with_delta():
    kw = dict(sensitivity=0.01, strong_convexity=0.5, smoothness=2.0, step_size=1e-3, num_steps=1000)
    assert LI.last_iterate_beta_max(1.0, log_delta=math.log(1e-6), **kw) == approx(
        LI.last_iterate_beta_max(1.0, 1e-6, **kw), rel=1e-9)
    assert LI.last_iterate_beta_max(1.0, log_delta=math.log(1e-6), sensitivity=0.01, strong_convexity=0.5) == \
        approx(LI.last_iterate_beta_max(1.0, 1e-6, sensitivity=0.01, strong_convexity=0.5), rel=1e-9)


def test_beta_max_inputs():
    for name, kw in (("sensitivity", dict(sensitivity=0.0)), ("strong_convexity", dict(strong_convexity=-1.0)),
                     ("num_chains", dict(num_chains=0)), ("step_size", dict(step_size=0.0, smoothness=1.0)),
                     ("smoothness", dict(step_size=0.1, smoothness=0.0))):
        with pytest.raises(ValueError, match=name):
            LI.last_iterate_beta_max(1.0, 1e-5, **{**dict(sensitivity=0.1, strong_convexity=1.0), **kw})
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="eps"):
            LI.last_iterate_beta_max(bad, 1e-5, sensitivity=0.1, strong_convexity=1.0)
