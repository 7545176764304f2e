"""Oracle tests for dp_infer.privacy.accountant (mutation testing, issue 19).

Oracles that do not share the accountant's code:
* the exact Gaussian privacy profile in 200-digit mpmath (tests/mp_oracles.py), plus the TV slack ``(1 + e^eps) tau``;
* randomized response: a pure eps0 event's delta at eps = 0 is at least ``tanh(eps0 / 2)``;
* the CKS conversion in closed form at a single Renyi order;
* the zCDP curve ``alpha rho`` at any order.
"""

import math

import numpy as np
import pytest

from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import ApproxDpEvent, GdpEvent, PureDpEvent, ZcdpEvent
from mp_oracles import gdp_total_delta_mp


def _cks_epsilon(rho, alpha, delta):
    """CKS conversion of a zCDP curve at the single order alpha (closed form)."""
    return alpha * rho + math.log1p(-1 / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)


# --------------------------------------------------------------------------- orders


def test_orders_given_as_python_ints_even_beyond_int64_are_float_orders():
    # 10**20 does not fit an int64: it must still be read as the order 1e20, and the curve's orders
    # are float64 whatever numbers the user passed
    rho = 0.1
    acc = Accountant([ZcdpEvent(rho)], orders=[2, 3, 10**20])
    orders, values = acc.rdp_curve()
    assert orders.dtype == np.float64 and orders.tolist() == [2.0, 3.0, 1e20]
    assert values.tolist() == [2 * rho, 3 * rho, 1e20 * rho]
    small = Accountant([ZcdpEvent(rho)], orders=[2, 3])
    assert small.rdp_curve()[0].dtype == np.float64
    assert small.get_epsilon(1e-5) == pytest.approx(min(_cks_epsilon(rho, a, 1e-5) for a in (2.0, 3.0)), rel=1e-12)


def test_the_rest_of_an_approximate_ledger_is_accounted_on_the_accountants_orders():
    # zCDP + one (eps_a, delta_a) event: only basic composition applies; with the single order 2 the
    # zCDP part's eps is the CKS formula there at delta - delta_a (the default grid would give 4.8)
    rho, delta, eps_a, delta_a = 0.5, 1e-5, 0.1, 1e-7
    acc = Accountant([ZcdpEvent(rho), ApproxDpEvent(eps_a, delta_a)], orders=[2.0])
    assert acc.get_epsilon(delta) == pytest.approx(eps_a + _cks_epsilon(rho, 2.0, delta - delta_a), rel=1e-12)


def test_the_rest_of_an_approximate_ledger_is_accounted_with_the_accountants_pld_discretization():
    # a setting of the ledger applies to every part of it: the basic route's eps is eps_a plus the
    # rest's eps under the SAME discretization (0.2 is coarse enough that the rest's PLD loses to
    # its rdp route; 1e-4 is fine enough that it wins -- so the setting changes the answer)
    rest, eps_a, delta_a, delta = [(PureDpEvent(0.5), 20)], 0.1, 1e-7, 1e-5
    got = {}
    for disc in (0.2, 1e-4):
        acc = Accountant(rest + [(ApproxDpEvent(eps_a, delta_a), 1)], pld_discretization=disc)
        want = eps_a + Accountant(rest, pld_discretization=disc).get_epsilon(delta - delta_a)
        got[disc] = acc.epsilon_by_route(delta)["basic"]
        assert got[disc] == pytest.approx(want, rel=1e-12)
    assert got[0.2] > got[1e-4] + 1e-3


# --------------------------------------------------------------------------- eps with a TV error


def test_eps_zero_is_found_when_delta_lies_between_two_and_three_tv_errors():
    # total delta at eps = 0 is delta_mu(0) + 2 tau = 4e-7 + 2e-5 <= 2.5e-5: eps = 0 is feasible,
    # although 3 tau > delta (the infeasibility test is (1 + e^0) tau >= delta, nothing looser)
    mu, tau, delta = 1e-6, 1e-5, 2.5e-5
    assert gdp_total_delta_mp(0.0, mu, tau) <= delta
    acc = Accountant([GdpEvent(mu, tv_error=tau)])
    assert acc.get_epsilon(delta) == 0.0


def test_the_route_named_at_eps_zero_is_the_one_that_gave_the_figure():
    # pure eps0 = 1e-3 with tau = 1e-5 at delta = 1e-3: eps = 0 is feasible (tanh(eps0/2) + 2 tau
    # < delta). The route reported is the one whose delta at eps = 0 is the smallest, not the one
    # that wins at another eps (at eps = 1 the basic pure route gives delta = 0 first)
    eps0, tau, delta = 1e-3, 1e-5, 1e-3
    acc = Accountant([PureDpEvent(eps0, tv_error=tau)])
    rep = acc.report(delta)
    at0 = acc.report(eps=0.0)
    primary = {k: v for k, v in at0["routes_log_delta"].items() if k != "rdp_dp_accounting"}
    assert rep["epsilon"] == 0.0
    assert isinstance(rep["route"], str) and rep["route"] == min(primary, key=primary.get)
    assert rep["log_delta_privacy"] == at0["log_delta_privacy"] == primary[rep["route"]]
    # the figure is a valid bound for randomized response, the mechanism that realises pure eps0
    assert rep["log_delta_privacy"] >= math.log(math.tanh(eps0 / 2)) - 1e-12


# (mu, tau) with a feasible set narrower than one grid cell lying in the second-to-last cell of the
# search grid (no grid point feasible, the total's grid minimum at index 126 of 128): tau just below
# the largest feasible tau for mu = 10 at delta = 1e-5, found in 50-digit mpmath (the minimum of the
# total sits at eps 92.649, 0.9876 of the range eps_hi where (1 + e^eps) tau = delta)
_TAU_MAX_MU10 = 1.81079211055e-46


@pytest.mark.parametrize("tau", [_TAU_MAX_MU10 * (1 - 1e-6), _TAU_MAX_MU10 * (1 - 1e-4)])
def test_a_narrow_feasible_set_in_the_second_to_last_grid_cell_is_found(tau):
    mu, delta = 10.0, 1e-5
    e = Accountant([GdpEvent(mu, tv_error=tau)]).get_epsilon(delta)
    assert 92.0 < e < 93.0
    assert gdp_total_delta_mp(e, mu, tau) <= delta < gdp_total_delta_mp(e * (1 - 1e-7), mu, tau)


def test_a_sampling_slack_just_beyond_float_range_is_infinite_not_an_error():
    # log((1 + e^eps) tau) = 709.9: e^709.9 exceeds the largest float (e^709.78), so the slack is
    # +inf (a vacuous statement), not an OverflowError
    tau = 1e-3
    eps = 709.9 - math.log(tau)
    rep = Accountant([GdpEvent(1.0, tv_error=tau)]).report(eps=eps)
    assert rep["delta_sampling"] in (math.inf, "inf") and rep["log_delta"] == 0.0


@pytest.mark.parametrize("mu,tau", [(1.0, 6e-6), (0.5, 8.55697253e-07 * 1.001)])
def test_an_infeasible_target_reports_infinite_eps_and_no_route(mu, tau):
    # (1.0, 6e-6): 2 tau > delta, nothing is feasible even at eps = 0; (0.5, ...): the closed-form
    # total exceeds delta everywhere (test_privacy_accountant_report checks it on a fine grid), so the
    # search refines and gives up. Either way no route gave a figure.
    delta = 1e-5
    grid = np.linspace(0.0, math.log(delta / tau), 2001) if delta > 2 * tau else np.array([0.0])
    assert min(gdp_total_delta_mp(float(e), mu, tau) for e in grid[::50]) > delta
    rep = Accountant([GdpEvent(mu, tv_error=tau)]).report(delta)
    assert rep["epsilon"] == "inf" or rep["epsilon"] == math.inf
    assert rep["route"] == "none" and rep["delta_sampling"] is None


def test_a_target_exactly_on_the_routes_boundary_labels_a_real_route():
    # every route gives delta = 1 at eps = 0 for a pure 1000-DP event: the report still names the
    # route that gave the figure (the first to answer), never "none", and the figure is delta = 1
    acc = Accountant([PureDpEvent(1000.0)])
    rep = acc.report(eps=0.0)
    assert rep["log_delta_privacy"] == 0.0
    assert rep["route"] in rep["routes_log_delta"] and rep["route"] != "none"


# --------------------------------------------------------------------------- errors


def test_compose_refuses_an_unknown_event_naming_its_type():
    with pytest.raises(ValueError, match=r"^event must be .* got str$"):
        Accountant().compose("gdp")
    with pytest.raises(ValueError, match=r"got dict$"):
        Accountant().compose({"kind": "gdp", "mu": 1.0})
