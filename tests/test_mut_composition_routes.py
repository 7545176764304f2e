"""Oracle tests for the accountant's conversion routes (mutation testing, issue 19).

Oracles: the exact optimal composition of k pure eps-DP events (Kairouz, Oh, Viswanath 2015,
Thm 3.3, in 80-digit mpmath), the exact Gaussian profile, and the fact that every route reports a
probability (log delta <= 0).
"""

from __future__ import annotations

import math

import pytest

from dp_infer.privacy import conversions as C
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import ApproxDpEvent, GdpEvent, PureDpEvent, ZcdpEvent


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
