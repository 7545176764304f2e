"""Oracle tests for the accountant's conversion routes.

Oracles: the exact optimal composition of k pure eps-DP events (Kairouz, Oh, Viswanath 2015,
Thm 3.3, in 80-digit mpmath), the exact Gaussian profile, and the fact that every route reports a
probability (log delta <= 0).

Each conversion route of the accountant against its own closed form, including the routes that
do not win (they appear in every report and must each be a valid bound on their own).

Oracles: basic composition (Dwork et al. 2006) with the exact Gaussian profile for the rest; pure
eps-DP has delta = 0 at every eps' >= eps and basic composition says nothing (delta = 1) below the
sum; dp-accounting's own RDP conversion of the same grid curve; the documented order grid.
"""

from __future__ import annotations

import math
import pytest
from dp_infer.privacy import conversions as C
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import ApproxDpEvent, GdpEvent, PureDpEvent, ZcdpEvent, RdpCurveEvent
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rpa
from dp_infer.privacy.composition_routes import DEFAULT_ORDERS, _default_orders


def _kov_log_delta(eps: float, k: int, eps_total: float) -> float:
    """log of the exact delta(eps_total) of k-fold eps-DP (optimal composition), 80 digits."""
    import mpmath as mp

    with mp.workdps(80):
        e, big = mp.mpf(eps), mp.mpf(eps_total)
        s = mp.fsum(mp.binomial(k, i) * max(mp.exp((k - i) * e) - mp.exp(big + i * e), 0) for i in range(k + 1))
        return float(mp.log(s / (1 + mp.exp(e)) ** k))


def _num(v):
    return -math.inf if v == "-inf" else float(v)


@pytest.mark.parametrize("eps,k,eps_total", [(1.0, 100, 93.0), (1.0, 1000, 900.0), (1.0, 1000, 999.0)])
def test_pld_route_never_below_the_optimal_composition_where_delta_is_tiny(eps, k, eps_total):
    # dp-accounting's FFT self-composition leaves ~1e-15 absolute noise in the tail probabilities
    # (even negative ones): the route once reported delta = 0 for 1000 x 1-DP at eps = 900 (exact
    # delta e^-169.5) and 3e-6 below the exact delta at 1.4e-10
    acc = Accountant([(PureDpEvent(eps), k)])
    exact = _kov_log_delta(eps, k, eps_total)
    assert _num(acc.report(eps=eps_total)["routes_log_delta"]["pld"]) >= exact
    assert acc.get_log_delta(eps_total) >= exact
    # the other direction: at the exact delta of eps_total no valid route reports a smaller eps
    assert acc.epsilon_by_route(log_delta=exact)["pld"] >= eps_total
    assert acc.get_epsilon(log_delta=exact) >= eps_total


def test_basic_route_reports_a_probability_where_the_rest_is_vacuous():
    # GDP mu = 20 at eps = 0: the exact delta is 1 - 2e-23; plus delta_a it exceeds 1. Basic
    # composition then says delta <= 1 (log 0), never a log delta above 0
    acc = Accountant([GdpEvent(20.0), ApproxDpEvent(0.5, 1e-3)])
    rest = C.gdp_delta(0.0, 20.0)
    assert rest + 1e-3 > 1.0
    rl = acc.report(eps=0.5)["routes_log_delta"]
    assert rl["basic"] == 0.0 and all(_num(v) <= 0.0 for v in rl.values())
    # away from the cap: log(delta_rest(eps - eps_a) + delta_a), the rest's exact Gaussian profile
    acc = Accountant([GdpEvent(2.0), ApproxDpEvent(0.5, 1e-3)])
    assert acc.report(eps=4.5)["routes_log_delta"]["basic"] == pytest.approx(
        math.log(C.gdp_delta(4.0, 2.0) + 1e-3), rel=1e-12)


@pytest.mark.parametrize("rho,delta", [(1e-6, 0.5), (1e-3, 0.1)])
def test_rdp_route_at_eps_zero_reports_an_order_that_gives_eps_zero(rho, delta):
    # eps = 0 from the RDP route: at the reported order either the CKS expression is <= 0 or the
    # KL shortcut holds (delta >= sqrt(1 - e^{-rho a}), Pinsker via D_1 <= D_a)
    rep = Accountant([ZcdpEvent(rho)]).report(delta)
    assert rep["epsilon"] == 0.0 and rep["route"] == "rdp"
    a = rep["route_info"]["optimal_order"]
    cks = rho * a + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1)
    assert a > 1 and (cks <= 0.0 or math.sqrt(-math.expm1(-rho * a)) <= delta)


@pytest.mark.parametrize("rho,delta", [(50.0, 1e-5), (8.0, 1e-3), (1e-12, 1e-8), (1e-13, 1e-10)])
def test_rdp_route_at_the_ends_of_the_order_grid(rho, delta):
    # optimal order below 2 (large rho) and beyond the grid's last order 1e6 + 1 (tiny rho): the
    # continuous search brackets the first / last grid cell. Oracles: the Gaussian mechanism with
    # mu = sqrt(2 rho) is rho-zCDP, so its exact eps is a lower bound; the reported eps is the CKS
    # expression at the reported order, and the search never does worse than the grid
    acc = Accountant([ZcdpEvent(rho)])
    rep = acc.report(delta)
    a, e = rep["route_info"]["optimal_order"], rep["epsilon"]
    assert rep["route"] == "rdp" and a > 1
    assert e >= C.gdp_epsilon(math.sqrt(2.0 * rho), delta)
    cks = rho * a + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1)
    assert e == pytest.approx(cks, rel=1e-12)
    orders, values = acc.rdp_curve()
    assert e <= C.rdp_epsilon(orders, values, delta)[0]
    assert (a < 2.0) if rho > 1 else (a > 1e6 / 2)


@pytest.mark.parametrize("mu,eps_a,delta_a", [(0.5, 0.3, 1e-6), (2.0, 1.0, 3e-6), (0.1, 0.0, 5e-6)])
def test_basic_route_is_basic_composition_with_the_exact_gaussian_rest(mu, eps_a, delta_a):
    acc = Accountant([GdpEvent(mu), ApproxDpEvent(eps_a, delta_a)])
    delta = 1e-5
    assert acc.epsilon_by_route(delta)["basic"] == pytest.approx(C.gdp_epsilon(mu, delta - delta_a) + eps_a, rel=1e-12)
    for eps in (eps_a + 0.2, eps_a + 1.5):
        ld = acc.report(eps=eps)["routes_log_delta"]["basic"]
        assert ld == pytest.approx(math.log(C.gdp_delta(eps - eps_a, mu) + delta_a), rel=1e-12)
    # below eps_a basic composition says nothing; at or below delta_a no eps works
    assert acc.report(eps=eps_a * 0.5)["routes_log_delta"]["basic"] == 0.0 if eps_a > 0 else True
    assert acc.epsilon_by_route(delta_a)["basic"] == math.inf


def test_basic_route_of_approximate_events_alone_and_with_delta_zero():
    # only (eps, delta) events: eps_total at any delta > delta_total; a (1, 0)-DP event is pure
    acc = Accountant([(ApproxDpEvent(0.4, 1e-7), 3)])
    assert acc.epsilon_by_route(1e-5)["basic"] == pytest.approx(1.2, rel=1e-15)
    assert acc.report(eps=1.3)["routes_log_delta"]["basic"] == pytest.approx(math.log(3e-7), rel=1e-12)
    acc = Accountant([GdpEvent(0.5), ApproxDpEvent(1.0, 0.0)])
    assert acc.epsilon_by_route(1e-5)["basic"] == pytest.approx(C.gdp_epsilon(0.5, 1e-5) + 1.0, rel=1e-12)
    assert acc.report(eps=2.5)["routes_log_delta"]["basic"] == pytest.approx(math.log(C.gdp_delta(1.5, 0.5)), rel=1e-12)


def test_pure_routes_at_and_below_the_total_epsilon():
    below = Accountant([PureDpEvent(1.0)]).report(eps=0.5)["routes_log_delta"]
    assert below["pure_basic"] == 0.0  # nothing below the sum
    assert all(v <= 0.0 for v in below.values())
    above = Accountant([PureDpEvent(1.0)]).report(eps=2.0)["routes_log_delta"]
    assert above["pure_basic"] == above["pld"] == above["rdp_dp_accounting"] == "-inf"  # JSON: -inf as a string
    assert above["rdp"] < -1e5  # the RDP route tends to delta = 0 (a finite order can only approach it)


def test_route_info_names_the_route_parameters():
    assert Accountant([GdpEvent(0.5)]).report(1e-5)["route_info"] == {"mu": 0.5}
    rep = Accountant([GdpEvent(0.5), PureDpEvent(0.1)]).report(1e-5)
    assert rep["route"] == "pld" and rep["route_info"] == {"discretization": 1e-4}


def test_grid_curve_delta_equals_dp_accounting_on_the_same_grid():
    # a grid RDP curve is not refined between orders: the route is the CKS conversion on the grid,
    # which is dp-accounting's compute_delta on the same orders
    ev = RdpCurveEvent(orders=[2.0, 4.0, 8.0, 16.0], values=[0.1, 0.2, 0.4, 0.8])
    acc = Accountant([ev])
    r = acc._rdp_route()
    for eps in (0.5, 1.0, 3.0):
        ref, _ = rpa.compute_delta(r.orders, r.values, eps)
        assert acc.get_log_delta(eps) == pytest.approx(math.log(ref), rel=1e-9)
        rl = acc.report(eps=eps)["routes_log_delta"]
        assert rl["rdp"] == pytest.approx(rl["rdp_dp_accounting"], rel=1e-9)


def test_default_order_grid_as_documented():
    # dense in log(alpha - 1) from 1e-4 to 1e6 (1601 points) plus dp-accounting's grid, sorted, unique
    for g in (_default_orders(), DEFAULT_ORDERS):
        dense = 1.0 + np.geomspace(1e-4, 1e6, 1601)
        dp = np.asarray(rpa.DEFAULT_RDP_ORDERS, dtype=np.float64)
        assert g.dtype == np.float64 and np.all(np.diff(g) > 0)
        assert set(dp).issubset(set(g)) and set(dense).issubset(set(g))
        assert g.size == np.unique(np.concatenate([dense, dp])).size
        assert g.min() == pytest.approx(1.0001, rel=1e-15) and g.max() == pytest.approx(1e6 + 1, rel=1e-15)


def _optimal_pure_composition_log_delta(eps, k, eps_total):
    """Exact delta(eps') of k-fold eps-DP (Kairouz, Oh, Viswanath 2015, Thm 3.3), 60 digits."""
    import mpmath as mp

    with mp.workdps(60):
        e, big = mp.mpf(eps), mp.mpf(eps_total)
        s = mp.fsum(mp.binomial(k, i) * max(mp.exp((k - i) * e) - mp.exp(big + i * e), 0) for i in range(k + 1))
        return float(mp.log(s / (1 + mp.exp(e)) ** k))


@pytest.mark.parametrize("k,eps", [(100, 0.1), (10, 0.5), (30, 0.2), (2, 0.5)])
def test_pld_route_is_never_below_the_optimal_composition_of_pure_events(k, eps):
    # losses on the PLD grid: dp-accounting is exact up to float summation (seen 3e-12 relative
    # BELOW the optimum); the route's relative margin must put it on the safe side, without tolerance
    acc = Accountant([(PureDpEvent(eps), k)])
    for eps_total in (0.3, 1.0, 2.0, 3.0):
        if eps_total >= k * eps:  # basic composition is exact there: delta = 0
            assert acc.report(eps=eps_total)["routes_log_delta"]["pld"] == "-inf"
            continue
        exact = _optimal_pure_composition_log_delta(eps, k, eps_total)
        pld = acc.report(eps=eps_total)["routes_log_delta"]["pld"]
        assert exact <= pld <= exact + 2e-6


def test_pld_route_of_an_approximate_event_keeps_its_delta():
    # an (eps, delta)-DP event has delta(eps) >= delta on its worst-case pair: the route cannot go below
    # (the privacy-loss distribution of the worst pair puts mass delta on an infinite loss)
    acc = Accountant([(ApproxDpEvent(0.5, 1e-6), 2)])
    exact = math.log(-math.expm1(2 * math.log1p(-1e-6)))  # 1 - (1 - delta)^2 at every eps >= 2 * 0.5
    for eps in (1.0, 3.0):
        assert exact <= acc.report(eps=eps)["routes_log_delta"]["pld"] <= exact + 1e-5


def test_every_route_reports_a_probability_for_a_heavy_ledger_at_eps_zero():
    # 10 x 5-DP at eps = 0: delta is within 1e-6 of 1 -- after the PLD's safety margin still at most 1
    rl = Accountant([(PureDpEvent(5.0), 10)]).report(eps=0.0)["routes_log_delta"]
    assert all(v <= 0.0 for v in rl.values()) and rl["pld"] == 0.0


@pytest.mark.parametrize("rho,delta", [(0.1, 1e-5), (2.0, 1e-8), (1e-4, 1e-3)])
def test_rdp_route_reports_the_order_that_achieves_its_eps(rho, delta):
    # linear curve rho * alpha: the reported eps is the CKS expression at the reported order, and
    # no order on a dense 2e5-point grid does better (beyond the search tolerance)
    rep = Accountant([ZcdpEvent(rho)]).report(delta)
    a, e = rep["route_info"]["optimal_order"], rep["epsilon"]

    def cks(x):
        return rho * x + np.log1p(-1 / x) - (math.log(delta) + np.log(x)) / (x - 1)

    assert rep["route"] == "rdp" and a > 1
    assert e == pytest.approx(cks(a), rel=1e-12)
    grid = 1 + np.geomspace(1e-6, 1e7, 200_001)
    assert e <= cks(grid).min() * (1 + 1e-12)


def test_basic_route_holds_at_the_events_own_delta_and_not_below_it():
    """An (eps, delta) event alone is eps-DP at exactly its delta (a PTR release asked for its eps at the delta it
    was run with used to get inf); below that delta the basic route has no finite eps. With other events beside
    it, their delta share at delta_a itself is 0, so the route stays inf there (the rest's curve decides)."""
    acc = Accountant([ApproxDpEvent(1.0, 1e-6)])
    assert acc.epsilon_by_route(1e-6)["basic"] == 1.0
    assert acc.get_epsilon(1e-6) <= 1.0
    assert acc.epsilon_by_route(0.999e-6)["basic"] == math.inf
    rest = Accountant([GdpEvent(0.5), ApproxDpEvent(1.0, 1e-6)])
    assert rest.epsilon_by_route(1e-6)["basic"] == math.inf
