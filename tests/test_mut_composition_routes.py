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
from dp_infer.privacy.events import ApproxDpEvent, GdpEvent, PureDpEvent


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
