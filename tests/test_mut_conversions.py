"""Oracle tests for the survivors of conversions.py's mutation run (issue 19).

Oracles: the exact continuous optimum of the CKS conversion of a linear curve (its first-order
condition solved by bisection in 60-digit mpmath: the CKS log delta of rho * alpha is convex in
alpha), closed forms, and exact safe-side checks.
"""

import math

import mpmath as mp
import pytest

from dp_infer.privacy import conversions as C
from mp_oracles import gdp_log_delta_mp

# --------------------------------------------------------------------------- linear curve -> delta

_MIN_ORDER_GAP = 1e-12  # linear_rdp_log_delta searches alpha - 1 >= 1e-12 (alpha > 1 stays a float)


def _linear_cks_log_delta_exact(rho, eps):
    """min(KL, min over alpha - 1 >= 1e-12 of the CKS log delta of the curve rho * alpha at eps), 60 digits.

    g(alpha) = (alpha - 1)(rho alpha - eps + log(1 - 1/alpha)) - log(alpha) has
    g'(alpha) = rho (2 alpha - 1) - eps + log(1 - 1/alpha), strictly increasing: g is convex and its
    minimum is the root of g' (bisection in u = log(alpha - 1); log(1 - 1/alpha) = -log1p(e^-u) keeps its
    digits at both ends).
    """
    with mp.workdps(60):
        rho, eps = mp.mpf(rho), mp.mpf(eps)

        def dg(u):
            return rho * (1 + 2 * mp.exp(u)) - eps - mp.log1p(mp.exp(-u))

        def g(u):
            return mp.exp(u) * (rho * (1 + mp.exp(u)) - eps - mp.log1p(mp.exp(-u))) - mp.log1p(mp.exp(u))

        lo, hi = mp.log(mp.mpf(_MIN_ORDER_GAP)), mp.mpf(1000)
        assert dg(hi) > 0
        if dg(lo) < 0:
            for _ in range(250):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if dg(mid) < 0 else (lo, mid)
        cks = g(lo)
        kl = mp.log(-mp.expm1(-rho)) / 2
        return float(min(cks, kl, 0))


_RHOS = [1e-300, 1e-100, 1e-20, 1e-16, 1e-12, 1e-6, 1e-2, 1.0, 10.0, 22.0, 26.0]
_EPSS = [0.0, 1e-20, 1e-10, 1e-3, 0.5, 5.0, 50.0, 1e4]


@pytest.mark.parametrize("rho", _RHOS)
def test_linear_log_delta_is_the_exact_continuous_optimum(rho):
    # any order gives a valid bound, so the value can only be at or above the continuous optimum
    # (up to float rounding of the expression: 1e-15 absolute in log delta, 5 ulps of delta); it must
    # also attain it (1e-10 relative: scipy's bounded search stops at ~1e-8 relative in log(alpha - 1),
    # 5e-12 relative in log delta at rho = 1e-100): no order range the optimum can fall in is left out -- alpha ~
    # 1/sqrt(2 rho) at eps ~ 0 (beyond 1e7 for rho < 1e-14), alpha - 1 ~ e^(eps - rho) for large rho,
    # alpha ~ eps / (2 rho) for large eps
    for eps in _EPSS:
        exact = _linear_cks_log_delta_exact(rho, eps)
        ld, a = C.linear_rdp_log_delta(rho, eps)
        assert ld >= exact - 1e-15 * max(1.0, abs(exact)), (rho, eps)
        assert ld <= exact + 1e-10 * abs(exact) + 1e-15, (rho, eps)


def _cks_log_delta_mp(rho, eps, alpha):
    with mp.workdps(60):
        a = mp.mpf(alpha)
        return (a - 1) * (rho * a - eps + mp.log(1 - 1 / a)) - mp.log(a)


def _gaussian_log_delta_mp(eps, rho):
    """log delta(eps) of the Gaussian mechanism with mu = sqrt(2 rho) (its RDP curve is exactly rho * alpha)."""
    dps = 60 + 2 * max(0, math.ceil(math.log10(max(eps, rho, 1.0))))  # e^eps Phi(b) cancels in the exponent
    with mp.workdps(dps):
        return gdp_log_delta_mp(eps, mp.sqrt(2 * mp.mpf(rho)), dps)


@pytest.mark.parametrize("rho,eps", [(1e-300, 1e6), (1e-300, 1e10), (1e-200, 1e100), (1e-30, 1e300), (5e-324, 1.0)])
def test_linear_log_delta_where_the_optimal_order_is_beyond_float(rho, eps):
    # alpha* ~ eps / (2 rho) overflows e^u (OverflowError) or float itself (inf search bounds); every
    # order gives a valid bound, so the answer is the CKS value at the order it names (-inf where that
    # value is below -1.8e308), never below the exact optimum
    ld, a = C.linear_rdp_log_delta(rho, eps)
    assert a > 1.0 and math.isfinite(a) and ld <= 0.0
    at_a = _cks_log_delta_mp(rho, eps, a)
    assert ld == float(at_a) or ld == pytest.approx(float(at_a), rel=1e-12, abs=0)
    assert ld >= _linear_cks_log_delta_exact(rho, eps)


@pytest.mark.parametrize("rho,delta", [(1e26, 0.9), (1e30, 0.5), (1e300, 1e-300)])
def test_linear_epsilon_of_an_enormous_rho(rho, delta):
    # Mironov's starting order 1 + sqrt(log(1/delta) / rho) rounds to 1 (log1p(-1) failed); the answer
    # is the CKS eps at a representable order, at least the exact eps of the Gaussian mechanism whose
    # curve is rho * alpha (delta(eps) of that mechanism <= delta)
    e, a = C.linear_rdp_epsilon(rho, delta)
    assert a > 1.0 and math.isfinite(e)
    with mp.workdps(60):
        am = mp.mpf(a)
        cks = rho * am + mp.log(1 - 1 / am) - (mp.log(delta) + mp.log(am)) / (am - 1)
    assert e == pytest.approx(float(cks), rel=1e-12, abs=0)
    assert _gaussian_log_delta_mp(e, rho) <= math.log(delta)


def test_linear_epsilon_where_the_optimal_order_is_beyond_float():
    # Mironov's optimal order 1 + sqrt(log(1/delta) / rho) ~ 4e311 (rho = 5e-324, log delta = -1e300):
    # the search around it overflowed e^u; the answer is the CKS eps at a float order
    rho, ld = 5e-324, -1e300
    e, a = C.linear_rdp_epsilon(rho, log_delta=ld)
    assert 1.0 < a < math.inf and 0.0 < e < 1.0
    with mp.workdps(60):
        am = mp.mpf(a)
        cks = rho * am + mp.log(1 - 1 / am) - (ld + mp.log(am)) / (am - 1)
    assert e == pytest.approx(float(cks), rel=1e-12, abs=0)


@pytest.mark.parametrize("eps,delta", [(1e26, 0.9), (1e30, 0.5), (1e300, 1e-300)])
def test_linear_rho_for_an_enormous_target(eps, delta):
    rho = C.linear_rdp_rho(eps, delta)
    assert C.linear_rdp_epsilon(rho, delta)[0] <= eps
    assert _gaussian_log_delta_mp(eps, rho) <= math.log(delta)
    # (not >= Mironov's closed form here: its optimal order 1 + sqrt(log(1/delta) / rho) is not a float)


@pytest.mark.parametrize("eps,delta", [(1.0, 0.9), (0.5, 0.99), (2.0, 1 - 1e-6), (0.5, 1 - 1e-12)])
def test_linear_rho_far_above_mironov(eps, delta):
    # delta near 1: the CKS rho is 5x to 50x Mironov's closed form (the bracket's start) and above e,
    # so the bracket is widened several times; safe (the Gaussian mechanism with this curve is
    # (eps, delta)-DP, exactly) and tight (1e-7 more rho is not)
    rho = C.linear_rdp_rho(eps, delta)
    assert rho > 5 * C.zcdp_rho_for_epsilon_mironov(eps, delta) and rho > math.e
    assert C.linear_rdp_epsilon(rho, delta)[0] <= eps
    assert C.linear_rdp_epsilon(rho * (1 + 1e-7), delta)[0] > eps
    assert _gaussian_log_delta_mp(eps, rho) <= math.log(delta)


# --------------------------------------------------------------------------- Gaussian profile, extended precision


def _gdp_log_delta_reference(eps, mu):
    with mp.workdps(400):
        e, m = mp.mpf(eps), mp.mpf(mu)
        return float(mp.log(mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2)))


@pytest.mark.parametrize("mu", [c * 10.0**-k for k in range(36, 46) for c in (1.0, 2.3, 5.7)]
                         + [1e-305, 1e-310, 5e-311, 3e-313, 1e-316, 1e-320])
def test_gdp_log_delta_where_the_first_extended_pass_is_all_rounding(mu):
    # delta_mu(eps) / Phi(a) = 1 - e^x ~ mu: at mu ~ 1e-40 the first 40-digit pass of the extended
    # evaluation leaves x as a rounding residue (0 or one ulp of either sign); only an x resolved to 20
    # digits may be used (one ulp taken as x makes delta up to several times too small or too large);
    # for subnormal mu the 20 digits are reached only after the precision has been doubled several times
    # (at mu = 5e-311 a pass with 10 digits of x is already 2e-14 low)
    for eps in (0.0, mu, 3.0 * mu):
        ref = _gdp_log_delta_reference(eps, mu)
        ours = C.gdp_log_delta(eps, mu)
        assert ref - 1e-15 * abs(ref) <= ours <= ref + 1e-10 * abs(ref), (eps, mu)


@pytest.mark.parametrize("mu", [12.0, 40.0, 1e3, 1e150])
def test_gdp_log_delta_near_one_is_never_positive(mu):
    # delta_mu(eps) ~ 1 for large mu: log delta is a tiny negative number, and the rounding bound that
    # raises the float result must not lift it above log 1 = 0 (delta is a probability)
    for eps in (0.0, 1.0, mu):
        ref = _gdp_log_delta_reference(eps, mu)
        ours = C.gdp_log_delta(eps, mu)
        assert ref <= ours <= 0.0
