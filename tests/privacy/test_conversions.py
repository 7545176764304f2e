"""Conversions in the regimes and on the return values that the cross-checks elsewhere do not reach.

Oracles: high-precision (mpmath) evaluation of the exact formulas; closed forms at the ends of
the parameter space (a zero curve, an infinite curve, eps = 0, rho = 0); exhaustive search of
the CKS expression over a fine order grid (any order gives a valid bound, so the continuous
optimum must be at most every grid value, and a fine grid comes within a stated slack of it);
exact safe-side checks without tolerance where a function promises a safe side; the Gaussian
mechanism whose RDP curve is exactly rho * alpha (any valid conversion is at least its eps).

Oracle tests for the survivors of conversions.py's mutation run (issue 19).

Oracles: the exact continuous optimum of the CKS conversion of a linear curve (its first-order
condition solved by bisection in 60-digit mpmath: the CKS log delta of rho * alpha is convex in
alpha), closed forms, and exact safe-side checks.
"""

import math
import warnings
import mpmath as mp
import numpy as np
import pytest
from dp_infer.privacy import conversions as C, events as E
from tests.support.mp_oracles import gdp_log_delta_mp

# orders 1 + 1e-14 .. 1 + 1e14: a fine geometric grid (ratio 1.0065 between neighbours, duplicates of
# float64 rounding near 1 removed)
FINE = np.unique(1.0 + np.geomspace(1e-14, 1e14, 10001))


def _cks_eps(a, r, ld):
    return r + math.log1p(-1.0 / a) - (ld + math.log(a)) / (a - 1.0)


def _cks_log_delta(a, r, eps):
    return (a - 1.0) * (r - eps + math.log1p(-1.0 / a)) - math.log(a)


# --------------------------------------------------------------------------- pure eps -> RDP


def _rr_renyi(eps, a):
    """Exact Renyi divergence of order a between the two outputs of randomized response (mpmath)."""
    with mp.workdps(150):
        eps, a = mp.mpf(eps), mp.mpf(a)
        return mp.log((mp.e ** (a * eps) + mp.e ** ((1 - a) * eps)) / (1 + mp.e**eps)) / (a - 1)


@pytest.mark.parametrize("eps", [1e-30, 1e-12, 1e-9, 1e-7, 1e-6, 1e-4, 1e-2, 0.5, 3.0, 30.0, 299.0, 301.0, 700.0])
def test_pure_rdp_envelope_equals_high_precision_randomized_response(eps):
    # the envelope is EXACT for randomized response: any error below it under-reports. The old
    # logaddexp difference cancelled (eps = 1e-6, alpha = 1.001 came out 11% low; eps <= 1e-7 gave 0).
    alpha = np.array([1 + 1e-12, 1 + 1e-9, 1 + 1e-6, 1.001, 1.1, 2.0, 10.0, 1e3, 1e6, 1e12])
    ours = C.pure_dp_rdp(eps, alpha)
    ref = np.array([float(_rr_renyi(eps, a)) for a in alpha])
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=0)
    assert np.all(ours >= 0.0)


def test_pure_rdp_of_eps_zero_is_zero_everywhere():
    # a 0-DP mechanism has identical output laws: every Renyi divergence is 0
    for alpha in ([1.5, 2.0, 1e6], np.array([[1.1, 3.0], [7.0, 9.0]]), 2.0):
        out = C.pure_dp_rdp(0.0, alpha)
        assert out.dtype == np.float64 and out.shape == np.shape(alpha)
        assert np.all(out == 0.0)


@pytest.mark.parametrize("alpha", [1.0, 0.999, math.inf, math.nan, [2.0, 1.0]])
def test_renyi_orders_must_exceed_one(alpha):
    for call in (lambda: C.pure_dp_rdp(0.5, alpha), lambda: E.GdpEvent(0.5).rdp(alpha),
                 lambda: E.ZcdpEvent(0.1).rdp(alpha), lambda: E.PureDpEvent(0.5).rdp(alpha)):
        with pytest.raises(ValueError, match="alpha"):
            call()


# --------------------------------------------------------------------------- Gaussian DP far out


@pytest.mark.parametrize("eps", [0.0, 1e-3, 100.0, 1e45, 1e300])
@pytest.mark.parametrize("delta", [0.9, 0.5, 0.3, 1e-5, 1e-300])
def test_gdp_mu_is_safe_and_largest_over_the_whole_range(eps, delta):
    # mu-GDP => (eps, delta) exactly, and 1e-9 more does not (at eps = 1e45 the old bracket cap
    # returned mu = inf: an over-report; at delta > 1/e a bracket on log delta >= 1 never closes)
    ld = math.log(delta)
    mu = C.gdp_mu(eps, delta)
    assert math.isfinite(mu) and mu > 0
    assert C.gdp_log_delta(eps, mu) <= ld
    assert C.gdp_log_delta(eps, mu * (1 + 1e-9)) > ld


@pytest.mark.parametrize("log_delta", [-690.0, -800.0, -3000.0])
def test_gdp_mu_at_eps_zero_and_astronomically_small_delta(log_delta):
    # at eps = 0, delta_mu(0) = 2 Phi(mu/2) - 1 ~ 0.4 mu: the largest mu is ~2.5 delta, below the
    # smallest float for log delta < -745; 0 is then the only safe answer
    mu = C.gdp_mu(0.0, log_delta=log_delta)
    assert C.gdp_log_delta(0.0, mu) <= log_delta
    if log_delta > -695:  # below, the bracket search stops at mu = e^-701 and answers 0
        assert mu > 0 and C.gdp_log_delta(0.0, mu * (1 + 1e-9)) > log_delta


def _gdp_log_delta_reference(eps, mu):
    with mp.workdps(400):
        e, m = mp.mpf(eps), mp.mpf(mu)
        return float(mp.log(mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2)))


@pytest.mark.parametrize("mu", [1e-300, 1e-17, 1e-12, 1e-9, 1e-6, 1e-4, 1e-2, 0.3, 3.0, 20.0])
def test_gdp_log_delta_equals_an_extended_precision_evaluation(mu):
    # for small mu the two tails cancel: in float64 alone mu = 1e-12, eps = 1e-11 came out 13% low
    # in delta, and mu = 1e-17 gave delta = 0 (log -inf) at every eps
    for t in (0.0, 0.1, 1.0, 3.0, 10.0, 30.0):
        for eps in {t * mu, t}:
            if eps / mu > 1e150:
                continue  # Phi(-eps/mu) is beyond float64 even in log space
            ref = _gdp_log_delta_reference(eps, mu)
            ours = C.gdp_log_delta(eps, mu)
            # an upper bound (float rounding is added, never subtracted; log_ndtr's last ulp aside)
            # within 1e-10 relative
            assert ref - 1e-15 * abs(ref) <= ours <= ref + 1e-10 * max(1.0, abs(ref))


def test_tiny_gdp_parameter_at_astronomically_small_delta():
    # mu = 1e-17 at delta = e^-3000: eps ~ mu sqrt(2 * 3000), not 0
    e = C.gdp_epsilon(1e-17, log_delta=-3000.0)
    assert e > 0 and C.gdp_log_delta(e, 1e-17) <= -3000.0
    assert C.gdp_log_delta(e / 4, 1e-17) > -3000.0  # (brentq's xtol 1e-15 is coarse at eps ~ 1e-15)


def test_gdp_profile_never_nan_for_extreme_arguments():
    for eps, mu in [(1e300, 0.37), (1e300, 1e-300), (1e10, 1.0), (0.0, 1e300), (1e300, 1e300), (5.0, 1e200)]:
        ld = C.gdp_log_delta(eps, mu)
        assert not math.isnan(ld) and ld <= 0.0
    assert C.gdp_log_delta(1e300, 0.37) == -math.inf  # Phi(-eps/mu + mu/2) underflows: delta = 0
    assert C.gdp_epsilon(1e200, 1e-5) == math.inf     # eps ~ mu^2 / 2 is beyond float64
    assert C.gdp_epsilon(1e5, 1e-5) == pytest.approx(0.5e10, rel=1e-3)


@pytest.mark.parametrize("alpha", [-0.1, 1.5, [0.2, 2.0], math.nan])
def test_gdp_tradeoff_refuses_type_one_errors_outside_the_unit_interval(alpha):
    with pytest.raises(ValueError, match="alpha"):
        C.gdp_tradeoff(alpha, 1.0)


# --------------------------------------------------------------------------- RDP curves -> (eps, delta)


def test_zero_curve_converts_to_no_privacy_loss():
    # identical output laws: delta(eps) = 0 at every eps >= 0, and eps = 0 at every delta
    orders = np.array([1.5, 2.0, 8.0, 64.0])
    zero = np.zeros_like(orders)
    for eps in (0.0, 0.1, 5.0):
        assert C.rdp_log_delta(orders, zero, eps)[0] == -math.inf
    for delta in (1e-12, 0.3):
        assert C.rdp_epsilon(orders, zero, delta)[0] == 0.0
    assert C.linear_rdp_epsilon(0.0, 1e-6) == (0.0, math.inf)
    assert C.linear_rdp_log_delta(0.0, 0.0)[0] == -math.inf
    assert C.linear_rdp_log_delta(0.0, 2.0)[0] == -math.inf


def test_orders_with_an_infinite_curve_are_ignored():
    # an unknown (+inf) divergence at some orders leaves the others' bounds: the result equals the
    # conversion on the finite part alone
    orders = np.array([1.5, 2.0, 4.0, 16.0, 64.0])
    vals = 0.02 * orders
    cut = vals.copy()
    cut[3:] = np.inf
    for eps in (0.0, 0.3, 2.0):
        assert C.rdp_log_delta(orders, cut, eps) == C.rdp_log_delta(orders[:3], vals[:3], eps)
    for delta in (1e-9, 1e-3):
        assert C.rdp_epsilon(orders, cut, delta) == C.rdp_epsilon(orders[:3], vals[:3], delta)
    everywhere = np.full(orders.shape, np.inf)
    assert C.rdp_log_delta(orders, everywhere, 1.0)[0] == 0.0
    assert C.rdp_epsilon(orders, everywhere, 1e-5)[0] == math.inf


@pytest.mark.parametrize("values,name", [([0.1, math.nan, 0.3], "values"), ([0.1, -1e-3, 0.3], "values"),
                                         ([0.1, None, 0.3], "values"), ([0.1, 0.2], "values"),
                                         ([0.1, "x", 0.3], "values")])
def test_rdp_conversions_refuse_invalid_curves(values, name):
    orders = [2.0, 4.0, 8.0]
    with pytest.raises(ValueError, match=name):
        C.rdp_epsilon(orders, values, 1e-5)
    with pytest.raises(ValueError, match=name):
        C.rdp_log_delta(orders, values, 1.0)


@pytest.mark.parametrize("rho", [1e-12, 1e-9, 1e-6, 1e-3, 0.1, 1.0, 3.0, 40.0])
def test_linear_log_delta_is_the_continuous_optimum(rho):
    # every order gives a valid bound: the continuous optimum is at most each grid value (to 1e-9
    # relative: the scalar search's own tolerance), and a grid with ratio 1.0065 between orders
    # comes within 1e-4 relative of it (the CKS expression is smooth in log(alpha - 1))
    for eps in (0.0, 1e-6, 1e-3, 0.5, 5.0, 30.0, 100.0):
        ld, a = C.linear_rdp_log_delta(rho, eps)
        grid, _ = C.rdp_log_delta(FINE, rho * FINE, eps)
        assert ld <= grid + 1e-9 * abs(grid)
        assert ld >= grid - 1e-4 * abs(grid) - 1e-12
        assert ld >= C.gdp_log_delta(eps, math.sqrt(2 * rho)) - 1e-9 * abs(ld)  # realisable: the Gaussian
        # the returned order is the one that attains the returned value
        if a == 1.0:  # the KL limit alpha -> 1
            assert ld == pytest.approx(0.5 * math.log(-math.expm1(-rho)), rel=1e-12)
        else:
            assert a > 1.0 and _cks_log_delta(a, rho * a, eps) == pytest.approx(ld, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("rho", [1e-12, 1e-9, 1e-6, 1e-3, 0.1, 1.0, 3.0, 40.0])
def test_linear_epsilon_is_the_continuous_optimum_and_names_its_order(rho):
    for delta in (0.9, 0.3, 1e-3, 1e-9, 1e-40):
        e, a = C.linear_rdp_epsilon(rho, delta)
        grid, _ = C.rdp_epsilon(FINE, rho * FINE, delta)
        assert e <= grid + 1e-9 * grid
        assert e >= grid - 1e-4 * grid - 1e-12
        ld = math.log(delta)
        if a == 1.0:  # the KL shortcut: delta^2 >= 1 - e^{-rho} >= 1 - e^{-KL}
            assert e == 0.0 and 2 * ld >= math.log(-math.expm1(-rho))
        else:
            assert a > 1.0 and max(0.0, _cks_eps(a, rho * a, ld)) == pytest.approx(e, rel=1e-9, abs=1e-12)


def test_grid_conversions_name_the_order_that_attains_the_value():
    orders = np.asarray([1.25, 1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0, 256.0])
    curve = 0.01 * orders + 0.003 * np.log1p(orders)
    for delta in (1e-3, 1e-8):
        e, a = C.rdp_epsilon(orders, curve, delta)
        i = int(np.flatnonzero(orders == a)[0])
        assert e == pytest.approx(_cks_eps(a, curve[i], math.log(delta)), rel=1e-13)
    for eps in (0.2, 2.0):
        ld, a = C.rdp_log_delta(orders, curve, eps)
        i = int(np.flatnonzero(orders == a)[0])
        assert ld == pytest.approx(min(_cks_log_delta(a, curve[i], eps), 0.5 * math.log(-math.expm1(-curve[i]))),
                                   rel=1e-13)


@pytest.mark.parametrize("delta", [0.9, 0.5, 1e-3, 1e-12])
def test_linear_rdp_rho_on_the_safe_side_over_the_whole_target_range(delta):
    # large eps with delta near 1: CKS's rho is far above Mironov's (x1e6 at eps = 1e-3,
    # delta = 0.5), so the bracket has to be widened many times
    for eps in (1e-3, 0.3, 30.0, 100.0):
        rho = C.linear_rdp_rho(eps, delta)
        assert C.linear_rdp_epsilon(rho, delta)[0] <= eps
        assert C.linear_rdp_epsilon(rho * (1 + 1e-7), delta)[0] > eps
        assert rho >= C.zcdp_rho_for_epsilon_mironov(eps, delta)


# --------------------------------------------------------------------------- TV slack


@pytest.mark.parametrize("tv", [0.0, 1e-12, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("eps", [0.0, 1.0, 50.0, 699.0, 705.0, 1000.0])
def test_tv_slack_is_the_closed_form_or_infinite(tv, eps):
    with mp.workdps(50):
        exact = float(mp.mpf(tv) * (1 + mp.e ** mp.mpf(eps)))
    s = C.tv_delta_slack(eps, tv)
    if tv == 0.0:
        assert s == 0.0
    elif eps < 700:
        assert s == pytest.approx(exact, rel=1e-14)
    else:
        assert s >= exact  # inf where (1 + e^eps) leaves (or nearly leaves) float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        C.tv_delta_slack(eps, tv)


# --------------------------------------------------------------------------- inputs at the boundaries


def test_a_single_order_is_a_valid_curve():
    # the CKS conversion at one order, in closed form
    e, a = C.rdp_epsilon([3.0], [0.05], 1e-6)
    assert a == 3.0 and e == pytest.approx(_cks_eps(3.0, 0.05, math.log(1e-6)), rel=1e-14)
    ld, a = C.rdp_log_delta([3.0], [0.05], 1.0)
    assert a == 3.0 and ld == pytest.approx(_cks_log_delta(3.0, 0.05, 1.0), rel=1e-14)


@pytest.mark.parametrize("orders", [[], [[2.0, 3.0], [4.0, 5.0]], [1.0, 2.0], [0.5, 2.0], [2.0, 2.0, 3.0],
                                    [3.0, 2.0], [2.0, math.inf], [2.0, math.nan]])
def test_orders_must_be_increasing_renyi_orders(orders):
    # order 1 would make the CKS term log(1 - 1/alpha) = -inf (eps 0: an under-report); a repeated
    # order with two values would let the smaller one win
    values = np.full(np.shape(orders), 0.1)
    for call in (lambda: C.rdp_epsilon(orders, values, 1e-5), lambda: C.rdp_log_delta(orders, values, 1.0),
                 lambda: E.RdpCurveEvent(orders=orders, values=values)):
        with pytest.raises(ValueError, match="orders"):
            call()


@pytest.mark.parametrize("x", [-1e-300, -1e-12, -1e-3, -0.5, -0.6931, -0.6932, -1.0, -40.0, -700.0, -800.0])
def test_log1mexp_has_full_relative_precision(x):
    # log(1 - e^x): near 0 it needs expm1, far out log1p; either formula alone loses all digits at one end
    with mp.workdps(400):  # enough digits that 1 - e^x is exact at both ends
        ref = float(mp.log(1 - mp.exp(mp.mpf(x))))
    assert C._log1mexp(x) == pytest.approx(ref, rel=1e-14, abs=0)


def test_the_kl_value_keeps_its_digits_when_rho_is_large():
    # delta(0) of a linear curve with large rho is the KL value sqrt(1 - e^{-rho}) ~ 1 - e^{-rho}/2:
    # its log is ~ -e^{-rho}/2, not 0 (the accountant works with log delta)
    for rho in (40.0, 60.0):  # (at rho = 20 the CKS term is already below the KL value)
        ld, a = C.linear_rdp_log_delta(rho, 0.0)
        with mp.workdps(60):
            ref = float(mp.log(-mp.expm1(-mp.mpf(rho))) / 2)
        assert a == 1.0 and ld == pytest.approx(ref, rel=1e-12)


def test_zero_gdp_parameter_is_no_privacy_loss():
    for eps in (0.0, 0.5, 30.0):
        assert C.gdp_log_delta(eps, 0.0) == -math.inf and C.gdp_delta(eps, 0.0) == 0.0
    assert C.gdp_epsilon(0.0, 1e-9) == 0.0


@pytest.mark.parametrize("log_delta", [0.0, 0.5, -math.inf, math.nan, "abc", None])
def test_log_delta_must_be_a_negative_finite_number(log_delta):
    if log_delta is None:
        with pytest.raises(ValueError, match="delta"):
            C.resolve_log_delta(None, None)
        return
    with pytest.raises(ValueError, match="log_delta"):
        C.resolve_log_delta(log_delta=log_delta)
    with pytest.raises(ValueError, match="log_delta"):
        C.gdp_epsilon(0.5, log_delta=log_delta)


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
