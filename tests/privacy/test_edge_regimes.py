"""Edge regimes of the accounting that random cross-checks never reach.

Oracles: dp-accounting itself (same formula, independent code), the exact eps of the Gaussian
mechanism that realises a linear RDP curve (any valid conversion of the curve must be at least
that: the curve does not rule that mechanism out), closed forms, and exact safe-side checks
without tolerance wherever the code promises a safe side (a calibrated parameter must meet its
target exactly, in float64, not within a tolerance).
"""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rpa

from dp_infer.privacy import conversions as C
from dp_infer.privacy import events as E
from dp_infer.privacy import last_iterate as LI
from dp_infer.privacy import path as P
from dp_infer.privacy import pure as PU
from dp_infer.privacy import stationary as S
from dp_infer.privacy.accountant import Accountant

DP_ORDERS = np.asarray(rpa.DEFAULT_RDP_ORDERS, dtype=np.float64)


def _gaussian_lower(rho, delta):
    """Exact eps of the Gaussian mechanism whose RDP curve is exactly rho * alpha."""
    return C.gdp_epsilon(math.sqrt(2.0 * rho), delta)


# --------------------------------------------------------------------------- gap 1: KL shortcut


@pytest.mark.parametrize("rho,delta", [(1e-6, 1e-5), (5e-4, 1e-3), (1e-8, 1e-6), (1e-10, 1e-7), (2e-3, 1e-2)])
def test_tiny_rho_is_not_rounded_to_zero_by_the_kl_shortcut(rho, delta):
    # the whole curve sits below delta; the KL shortcut (eps = 0 iff delta^2 >= 1 - e^-rho) must not fire
    assert delta**2 < -math.expm1(-rho) or rho == 0  # the regime: delta^2 < KL-bound, so eps > 0
    ref, _ = dp_accounting.rdp.compute_epsilon(DP_ORDERS, rho * DP_ORDERS, delta)
    e_grid, _ = C.rdp_epsilon(DP_ORDERS, rho * DP_ORDERS, delta)
    assert e_grid == pytest.approx(ref, rel=1e-12)
    e_lin, _ = C.linear_rdp_epsilon(rho, delta)
    e_acc = Accountant([E.ZcdpEvent(rho)]).get_epsilon(delta)
    low = _gaussian_lower(rho, delta)
    assert low > 0
    for e in (e_grid, e_lin, e_acc):
        assert e >= low  # exact: never below a mechanism that has this curve
    assert e_acc <= ref + 1e-15


def test_kl_shortcut_fires_exactly_where_it_should():
    # delta^2 >= 1 - e^-rho  =>  eps = 0 (Pinsker-type bound, dp-accounting's shortcut)
    # (on a grid the smallest order's value bounds the KL divergence; continuously, rho itself)
    rho = 1e-8
    d_kl = math.sqrt(-math.expm1(-rho))
    d_grid = math.sqrt(-math.expm1(-rho * DP_ORDERS[0]))
    for delta in (d_grid * 1.001, 0.5):
        assert C.rdp_epsilon(DP_ORDERS, rho * DP_ORDERS, delta)[0] == 0.0
        assert dp_accounting.rdp.compute_epsilon(DP_ORDERS, rho * DP_ORDERS, delta)[0] == 0.0
    assert C.rdp_epsilon(DP_ORDERS, rho * DP_ORDERS, d_grid * 0.999)[0] > 0.0
    for delta in (d_kl * 1.001, 0.5):
        assert C.linear_rdp_epsilon(rho, delta)[0] == 0.0
    # just below the KL value the CKS term decides; it may still be 0 only where the Gaussian
    # mechanism with this curve has eps = 0 too
    for delta in (d_kl * 0.999, d_kl * 0.1, d_kl * 1e-3):
        assert C.linear_rdp_epsilon(rho, delta)[0] >= _gaussian_lower(rho, delta)
    # delta side: log delta(0) is at most the KL value 0.5 log(1 - e^-R) (R: the smallest order's value)
    ld, _ = C.rdp_log_delta(DP_ORDERS, rho * DP_ORDERS, 0.0)
    assert ld <= 0.5 * math.log(-math.expm1(-rho * DP_ORDERS[0])) + 1e-15
    ld_lin, _ = C.linear_rdp_log_delta(rho, 0.0)
    assert ld_lin <= 0.5 * math.log(-math.expm1(-rho)) + 1e-15
    # and both are above the Gaussian mechanism's exact delta at eps = 0 (a realisable curve)
    assert ld >= C.gdp_log_delta(0.0, math.sqrt(2 * rho)) and ld_lin >= C.gdp_log_delta(0.0, math.sqrt(2 * rho))


@pytest.mark.parametrize("rho", [1e-9, 1e-6, 1e-3, 0.1, 3.0, 40.0])
@pytest.mark.parametrize("eps", [0.0, 1e-3, 0.5, 5.0, 30.0])
def test_rdp_log_delta_matches_dp_accounting_and_gaussian_lower_bound(rho, eps):
    d_ref, _ = rpa.compute_delta(DP_ORDERS, rho * DP_ORDERS, eps)
    ld, _ = C.rdp_log_delta(DP_ORDERS, rho * DP_ORDERS, eps)
    # same formula; dp-accounting's log1p(-exp(-r)) loses ~1e-8 relative at r ~ 1e-9 (ours: expm1)
    assert math.exp(ld) == pytest.approx(d_ref, rel=1e-6, abs=1e-300)
    ld_lin, _ = C.linear_rdp_log_delta(rho, eps)
    assert ld_lin <= ld + 1e-12  # continuous order search is never worse than the grid
    assert ld_lin >= C.gdp_log_delta(eps, math.sqrt(2 * rho)) - 1e-12
    acc = Accountant([E.ZcdpEvent(rho)])
    assert acc.get_log_delta(eps) >= C.gdp_log_delta(eps, math.sqrt(2 * rho)) - 1e-12
    assert acc.get_log_delta(eps) <= ld + 1e-12


# --------------------------------------------------------------------------- gap 2: safe-side rounding


EPS_GRID = [1e-3, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0]
DELTA_GRID = [0.3, 1e-2, 1e-5, 1e-9, 1e-15, 1e-40]


@pytest.mark.parametrize("delta", DELTA_GRID)
def test_gdp_mu_is_on_the_safe_side_exactly(delta):
    ld = math.log(delta)
    for eps in EPS_GRID:
        mu = C.gdp_mu(eps, delta)
        assert C.gdp_log_delta(eps, mu) <= ld  # exact, no tolerance: the promise of the function
        assert C.gdp_log_delta(eps, mu * (1 + 1e-9)) > ld  # and it is the largest such mu (to 1e-9)
        mu_l = C.gdp_mu(eps, log_delta=ld)
        assert C.gdp_log_delta(eps, mu_l) <= ld


@pytest.mark.parametrize("mu", [1e-3, 0.05, 0.5, 1.0, 3.0, 10.0])
def test_gdp_epsilon_is_on_the_safe_side_exactly(mu):
    for delta in DELTA_GRID:
        ld = math.log(delta)
        e = C.gdp_epsilon(mu, delta)
        assert C.gdp_log_delta(e, mu) <= ld
        if e > 0:
            assert C.gdp_log_delta(e * (1 - 1e-9), mu) > ld  # and it is the smallest such eps


@pytest.mark.parametrize("delta", [1e-2, 1e-5, 1e-12, 1e-30])
def test_linear_rdp_rho_and_mironov_inverse_are_on_the_safe_side(delta):
    for eps in EPS_GRID:
        rho = C.linear_rdp_rho(eps, delta)
        assert C.linear_rdp_epsilon(rho, delta)[0] <= eps
        assert C.linear_rdp_epsilon(rho * (1 + 1e-7), delta)[0] > eps
        rm = C.zcdp_rho_for_epsilon_mironov(eps, delta)
        assert C.zcdp_epsilon_mironov(rm, delta) == pytest.approx(eps, rel=1e-12)
        assert rm <= rho


@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
@pytest.mark.parametrize("method", P.PATH_METHODS)
def test_path_calibrators_meet_their_target_exactly(delta, method):
    for eps in [0.05, 1.0, 8.0]:
        for k, friction in [(1, None), (3, 2.0)]:
            b = P.beta_max(eps, delta, sensitivity=0.02, time=3.0, num_chains=k, friction=friction, method=method)
            assert P.path_epsilon(b, 0.02, 3.0, delta, num_chains=k, friction=friction, method=method) <= eps
            assert P.path_epsilon(b * (1 + 1e-6), 0.02, 3.0, delta, num_chains=k, friction=friction,
                                  method=method) > eps
            t = P.time_max(eps, delta, sensitivity=0.02, beta=b, num_chains=k, friction=friction, method=method)
            assert P.path_epsilon(b, 0.02, t, delta, num_chains=k, friction=friction, method=method) <= eps
            assert t >= 3.0 * (1 - 1e-6)


@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_stationary_and_last_iterate_calibrators_meet_their_target_exactly(delta):
    ld = math.log(delta)
    for eps in [0.05, 1.0, 8.0]:
        for nd, tv in [(1, 0.0), (3, 1e-3 * delta / (3 * (1 + math.exp(eps))))]:
            b = S.stationary_beta_max(eps, delta, sensitivity=0.01, strong_convexity=0.5, num_draws=nd, tv_error=tv)
            ev = S.stationary_event(b, 0.01, 0.5, num_draws=nd, tv_error=tv)
            assert Accountant([ev]).get_log_delta(eps) <= ld * (1 - 1e-12)  # total delta incl. TV slack
            ev_up = S.stationary_event(b * (1 + 1e-6), 0.01, 0.5, num_draws=nd, tv_error=tv)
            assert Accountant([ev_up]).get_log_delta(eps) > ld
        for k in (1, 4):
            b = LI.last_iterate_beta_max(eps, delta, sensitivity=0.01, strong_convexity=0.5, num_chains=k)
            # uniform bound over every admissible h and K: rho <= K beta Delta^2 / (2 m)
            assert C.linear_rdp_epsilon(k * b * 0.01**2 / (2 * 0.5), delta)[0] <= eps
            for h_frac, steps in [(1.0, None), (0.5, 7), (0.9, 10_000)]:
                h = h_frac * 1.0 / (b * (0.5 + 2.0))
                bb = LI.last_iterate_beta_max(eps, delta, sensitivity=0.01, strong_convexity=0.5, smoothness=2.0,
                                              step_size=h, num_steps=steps, num_chains=k)
                assert h * bb * (0.5 + 2.0) <= 2.0 * (1 + 1e-12)  # contraction regime
                rho = (k * LI.last_iterate_rho_limit(bb, 0.01, 0.5, h) if steps is None
                       else LI.last_iterate_rho(bb, 0.01, h, steps, 0.5, 2.0, num_chains=k))
                assert C.linear_rdp_epsilon(rho, delta)[0] <= eps


def test_pure_calibration_is_exact():
    for eps, n, lip, diam in [(0.1, 100, 1.0, 2.0), (3.0, 7, 0.3, 11.0)]:
        b = PU.pure_beta(eps, n, lip, diam)
        assert PU.pure_epsilon(b, n, lip, diam) == pytest.approx(eps, rel=1e-15)
        assert PU.pure_event(b, n, lip, diam).epsilon <= eps * (1 + 2e-16)
        assert PU.pure_sensitivity(n, lip, diam) == pytest.approx(lip * diam / n, rel=1e-15)


# --------------------------------------------------------------------------- one step and very many


@pytest.mark.parametrize("count", [1, 2, 10_000, 10**6])
def test_gdp_chain_counts_compose_as_root_sum_of_squares(count):
    mu = 0.003
    acc = Accountant().compose(E.GdpEvent(mu), count=count)
    assert acc.gdp_mu() == pytest.approx(mu * math.sqrt(count), rel=1e-12)
    assert acc.get_epsilon(1e-6) == pytest.approx(dp_accounting.get_epsilon_gaussian(1 / (mu * math.sqrt(count)),
                                                                                     1e-6), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("rho,count", [(1e-7, 1), (1e-7, 10**5), (0.2, 3), (1e-3, 1000)])
def test_zcdp_counts_between_gaussian_and_dp_accounting(rho, count):
    acc = Accountant().compose(E.ZcdpEvent(rho), count=count)
    e = acc.get_epsilon(1e-6)
    racc = dp_accounting.rdp.RdpAccountant(orders=DP_ORDERS)
    racc.compose(dp_accounting.ZCDpEvent(rho), count)
    assert _gaussian_lower(rho * count, 1e-6) <= e <= racc.get_epsilon(1e-6) + 1e-15
    assert acc.linear_rho() == pytest.approx(rho * count, rel=1e-12)


@pytest.mark.parametrize("eps", [1e-4, 1e-2, 1.0, 20.0])
def test_pure_event_alone_and_composed(eps):
    # one pure event at delta: at least randomized response's exact eps at that delta, at most eps
    delta = 1e-6
    rr = math.log(math.exp(eps) - delta * (1 + math.exp(eps))) if math.exp(eps) > delta * (1 + math.exp(eps)) else 0
    e = Accountant([E.PureDpEvent(eps)]).get_epsilon(delta)
    assert max(rr, 0.0) - 1e-12 <= e <= eps
    assert Accountant([E.PureDpEvent(eps)]).get_delta(eps) == 0.0
    # k pure events: never above basic composition k * eps
    for k in (2, 30):
        assert Accountant([(E.PureDpEvent(eps), k)]).get_epsilon(delta) <= k * eps * (1 + 1e-12)


def test_large_eps_and_tiny_delta_stay_finite_and_ordered():
    mu = 25.0
    e5 = C.gdp_epsilon(mu, 1e-5)
    e300 = C.gdp_epsilon(mu, log_delta=-700.0)
    assert math.isfinite(e300) and e300 > e5 > mu * mu / 2 - 1  # eps ~ mu^2/2 + mu z
    assert C.gdp_log_delta(e300, mu) <= -700.0
    assert C.gdp_log_delta(0.0, 1e-12) < 0
    rho = 40.0
    assert C.linear_rdp_epsilon(rho, log_delta=-700.0)[0] >= _gaussian_lower(rho, 1e-300)


def test_every_route_event_states_its_assumptions():
    # a guarantee is stated only with the conditions it needs (DESIGN invariant 11)
    evs = [
        P.path_event(1.0, 0.01, 1.0),
        P.path_event(1.0, 0.01, 1.0, friction=2.0),
        LI.last_iterate_event(1.0, 0.01, 0.1, 10, 0.5, 2.0),
        S.stationary_event(1.0, 0.01, 0.5),
        PU.pure_event(1.0, 100, 1.0, 2.0),
    ]
    for ev in evs:
        assert len(ev.assumptions) >= 3 and all(len(a) > 20 for a in ev.assumptions)
        assert ev.label
