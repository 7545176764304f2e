"""The conversions take any real number, as the float64 it denotes (issue 30, finding 10).

``dp_infer.privacy.conversions`` is "pure functions of numbers, float64 on the host": a Renyi order
or a type-I error given as a Python int beyond int64, a Fraction, or an int array is the real
number it denotes. Oracle: the same call on the float64 value (exactly representable inputs, so
the answers must be identical), and float64 results. These killed equivalent.toml entries that
had called ``np.asarray(x)`` without ``dtype=float64`` equivalent: an object array then reaches
``np.isfinite`` (TypeError) or an int array is echoed back as int.

Also: ``linear_rdp_epsilon`` where the optimal order lies beyond float (rho = 1e-320, log delta =
-1e300): every grid order is clipped to alpha - 1 = e^700, the search has one point, and the
answer is the CKS bound at that order (80-digit mpmath), not an IndexError.
"""

from fractions import Fraction

import mpmath
import numpy as np

from dp_infer.privacy.conversions import check_alpha, check_orders, gdp_tradeoff, linear_rdp_epsilon, pure_dp_rdp


def test_orders_beyond_int64_and_fractions_are_the_reals_they_denote():
    big = 2**70  # not an int64: np.asarray(big) without a dtype is an object array
    a = check_alpha(big)
    assert a.dtype == np.float64 and a == 2.0**70
    assert check_alpha(Fraction(3, 2)) == 1.5
    o = check_orders("orders", [2, 3, big])
    assert o.dtype == np.float64 and o.tolist() == [2.0, 3.0, 2.0**70]
    assert pure_dp_rdp(1.0, big) == pure_dp_rdp(1.0, 2.0**70)
    assert pure_dp_rdp(1.0, [Fraction(3, 2), 2]).tolist() == pure_dp_rdp(1.0, [1.5, 2.0]).tolist()


def test_integer_orders_give_float64_results():
    assert check_alpha([2, 3]).dtype == np.float64
    assert pure_dp_rdp(0.0, [2, 3]).dtype == np.float64  # the eps = 0 shortcut returns zeros_like(alpha)
    assert check_orders("orders", [2, 3]).dtype == np.float64


def test_gdp_tradeoff_takes_fractions_and_integers():
    want = gdp_tradeoff([0.5, 0.25, 0.0, 1.0], 1.0)
    got = gdp_tradeoff([Fraction(1, 2), Fraction(1, 4), 0, 1], 1.0)
    assert got.dtype == np.float64 and got.tolist() == want.tolist()


def test_linear_rdp_epsilon_where_every_order_clips_to_the_last():
    rho, ld = 1e-320, -1e300
    eps, order = linear_rdp_epsilon(rho, log_delta=ld)
    with mpmath.workdps(80):
        a = 1 + mpmath.exp(700)
        r, L = mpmath.mpf(rho), mpmath.mpf(ld)
        cks = r * a + mpmath.log1p(-1 / a) - (L + mpmath.log(a)) / (a - 1)  # CKS Prop. 12 at that order
        assert mpmath.mpf(order) == mpmath.mpf(float(a))
        assert mpmath.mpf(eps) >= cks * (1 - mpmath.mpf(2) ** -50)  # the bound at the named order
        assert abs(mpmath.mpf(eps) / cks - 1) < 1e-12
