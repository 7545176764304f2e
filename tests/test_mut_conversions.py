"""Oracle tests for the survivors of conversions.py's mutation run (issue 19).

Oracles: the exact continuous optimum of the CKS conversion of a linear curve (its first-order
condition solved by bisection in 60-digit mpmath: the CKS log delta of rho * alpha is convex in
alpha), closed forms, and exact safe-side checks.
"""

import math

import mpmath as mp
import pytest

from dp_infer.privacy import conversions as C

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
    with mp.workdps(60 + 2 * max(0, math.ceil(math.log10(max(eps, rho, 1.0))))):  # e^eps Phi(b) cancels in the exponent
        e, m = mp.mpf(eps), mp.sqrt(2 * mp.mpf(rho))
        return mp.log(mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2))


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


@pytest.mark.parametrize("eps,delta", [(1e26, 0.9), (1e30, 0.5), (1e300, 1e-300)])
def test_linear_rho_for_an_enormous_target(eps, delta):
    rho = C.linear_rdp_rho(eps, delta)
    assert C.linear_rdp_epsilon(rho, delta)[0] <= eps
    assert _gaussian_log_delta_mp(eps, rho) <= math.log(delta)
    # (not >= Mironov's closed form here: its optimal order 1 + sqrt(log(1/delta) / rho) is not a float)
