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
