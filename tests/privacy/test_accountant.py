"""Accountant: composition and conversions against dp-accounting and exact oracles.

Oracle tests for dp_infer.privacy.accountant.

Oracles that do not share the accountant's code:
* the exact Gaussian privacy profile in 200-digit mpmath (tests/support/mp_oracles.py), plus the TV slack ``(1 + e^eps) tau``;
* randomized response: a pure eps0 event's delta at eps = 0 is at least ``tanh(eps0 / 2)``;
* the CKS conversion in closed form at a single Renyi order;
* the zCDP curve ``alpha rho`` at any order.
"""

import json
import math
import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import common, privacy_loss_distribution as pldlib
from dp_accounting.rdp import rdp_privacy_accountant as rpa
from dp_infer.privacy import exact as X
from dp_infer.privacy.accountant import DEFAULT_ORDERS, Accountant, compose
from dp_infer.privacy.events import (
    ApproxDpEvent,
    GdpEvent,
    PrivacyEvent,
    PureDpEvent,
    RdpCurveEvent,
    SubsampledGaussianEvent,
    ZcdpEvent,
)
from dp_infer.privacy.conversions import gdp_epsilon, linear_rdp_epsilon, pure_dp_rdp
from tests.support.mp_oracles import gdp_total_delta_mp

DP_ORDERS = np.asarray(rpa.DEFAULT_RDP_ORDERS, dtype=np.float64)


def test_gdp_composition_is_root_sum_of_squares_and_matches_pld_accountant():
    acc = Accountant().compose(GdpEvent(0.1), count=100)  # = 1-GDP
    assert acc.gdp_mu() == pytest.approx(1.0)
    assert acc.get_epsilon(1e-5) == pytest.approx(dp_accounting.get_epsilon_gaussian(1.0, 1e-5), rel=1e-9)
    pld = dp_accounting.pld.PLDAccountant()
    pld.compose(dp_accounting.GaussianDpEvent(10.0), 100)
    e_pld = pld.get_epsilon(1e-5)
    # PLD is pessimistic by at most its discretisation; exact GDP is the tight value
    assert acc.get_epsilon(1e-5) <= e_pld <= acc.get_epsilon(1e-5) + 1e-3
    rdp = dp_accounting.rdp.RdpAccountant(orders=DP_ORDERS)
    rdp.compose(dp_accounting.GaussianDpEvent(10.0), 100)
    _, curve = acc.rdp_curve(DP_ORDERS)
    np.testing.assert_allclose(curve, rdp._rdp, rtol=1e-12)
    # exact GDP is tighter than RDP (anchors-dp §1.3: 4.377 vs 4.73)
    assert acc.get_epsilon(1e-5) < rdp.get_epsilon(1e-5)


def test_heterogeneous_gdp_chains():
    acc = compose(GdpEvent(0.3), GdpEvent(0.4), counts=[1, 1])
    assert acc.gdp_mu() == pytest.approx(0.5)
    acc2 = Accountant([(GdpEvent(0.3), 4)])  # four chains
    assert acc2.gdp_mu() == pytest.approx(0.6)


def test_zcdp_matches_rdp_accountant_and_is_not_looser():
    acc = Accountant([(ZcdpEvent(0.01), 3)])
    rdp = dp_accounting.rdp.RdpAccountant(orders=DP_ORDERS)
    rdp.compose(dp_accounting.ZCDpEvent(0.01), 3)
    e_ref = rdp.get_epsilon(1e-6)
    e = acc.get_epsilon(1e-6)
    assert e <= e_ref + 1e-12
    assert e == pytest.approx(linear_rdp_epsilon(0.03, 1e-6)[0], rel=1e-9)
    assert acc.linear_rho() == pytest.approx(0.03)
    with pytest.raises(dp_accounting.UnsupportedEventError):  # why zCDP never goes to PLD
        dp_accounting.pld.PLDAccountant().compose(dp_accounting.ZCDpEvent(0.01))


def test_mixed_gdp_and_rdp_uses_the_gdp_rdp_curve():
    acc = Accountant([GdpEvent(0.5), ZcdpEvent(0.02)])
    rho = 0.5**2 / 2 + 0.02
    assert acc.linear_rho() == pytest.approx(rho)
    assert acc.get_epsilon(1e-5) == pytest.approx(linear_rdp_epsilon(rho, 1e-5)[0], rel=1e-8)
    rdp = dp_accounting.rdp.RdpAccountant(orders=DP_ORDERS)
    rdp.compose(dp_accounting.GaussianDpEvent(2.0))
    rdp.compose(dp_accounting.ZCDpEvent(0.02))
    assert acc.get_epsilon(1e-5) <= rdp.get_epsilon(1e-5) + 1e-12
    # and the composed result is never below what the GDP part alone costs
    assert acc.get_epsilon(1e-5) >= gdp_epsilon(0.5, 1e-5)


def test_rdp_curve_event_composes_with_grid_envelope():
    curve = 0.01 * DP_ORDERS
    acc = Accountant([RdpCurveEvent(orders=tuple(DP_ORDERS), values=tuple(curve)), GdpEvent(0.2)])
    e = acc.get_epsilon(1e-5)
    ref, _ = dp_accounting.rdp.compute_epsilon(DP_ORDERS, curve + 0.02 * DP_ORDERS, 1e-5)
    # the accountant's grid contains dp-accounting's, so it can only be tighter, and the step
    # envelope between grid points keeps it valid (>= the continuous optimum for rho = 0.03)
    assert e <= ref + 1e-12
    assert e >= linear_rdp_epsilon(0.03, 1e-5)[0] - 1e-12


@pytest.mark.parametrize("eps,k", [(0.1, 100), (0.5, 10), (1.0, 3)])
def test_pure_composition_not_under_reported(eps, k):
    acc = Accountant([(PureDpEvent(eps), k)])
    delta = 1e-5
    e = acc.get_epsilon(delta)
    exact = X.pure_composition_epsilon(eps, k, delta)  # optimal composition (KOV), the true value
    pld = pldlib.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, 0.0)).self_compose(k)
    e_pld = pld.get_epsilon_for_delta(delta)
    # never below the true optimum; at most a hair (the PLD route's 1e-6 relative delta safety
    # margin) above dp-accounting's generic pure-DP PLD
    # (tolerances are float64 rounding of two independent exact computations, ~1e-14)
    assert exact - 1e-12 <= e <= min(e_pld + 1e-5, k * eps + 1e-12)
    # the accountant's delta at its eps is consistent with the exact optimum
    assert X.pure_composition_log_delta(eps, k, e) <= math.log(delta) + 1e-12
    # LaplaceDpEvent would under-report relative to the generic pure-DP PLD (anchors-dp §1.5)
    lap = dp_accounting.pld.PLDAccountant()
    lap.compose(dp_accounting.LaplaceDpEvent(1.0 / eps), k)
    if k >= 10:
        assert lap.get_epsilon(delta) < e_pld - 1e-3


def test_pure_only_at_delta_zero_uses_basic_composition():
    acc = Accountant([(PureDpEvent(0.2), 5)])
    assert acc.get_delta(1.0) == 0.0
    assert acc.get_log_delta(0.99) > -math.inf


def test_pure_with_gdp_routes_agree_with_dp_accounting_pld():
    acc = Accountant([GdpEvent(0.5), (PureDpEvent(0.1), 10)])
    routes = acc.epsilon_by_route(1e-5)
    assert set(routes) >= {"rdp", "pld", "rdp_dp_accounting"}
    # independent PLD built directly with dp-accounting
    ref = pldlib.from_gaussian_mechanism(standard_deviation=2.0).compose(
        pldlib.from_privacy_parameters(common.DifferentialPrivacyParameters(0.1, 0.0)).self_compose(10))
    assert routes["pld"] == pytest.approx(ref.get_epsilon_for_delta(1e-5), abs=2e-3)
    # the RDP route's curve is GDP + randomized-response envelope
    a = np.array([2.0, 8.0, 30.0])
    np.testing.assert_allclose(acc.rdp_curve(a)[1], a * 0.125 + 10 * pure_dp_rdp(0.1, a))
    assert acc.get_epsilon(1e-5) == pytest.approx(min(routes["rdp"], routes["pld"]), rel=1e-12)


def _sub(count_steps=200, sigma=1.2, q=0.02, relation="replace_one"):
    # its curve: the replace-one antipodal pair's (valid for add/remove too, which it dominates)
    from dp_infer.privacy.minibatch import replace_one_rdp

    a = np.array([1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
    return SubsampledGaussianEvent(orders=tuple(a), values=tuple(count_steps * replace_one_rdp(a, sigma, q)),
                                   noise_multiplier=sigma, sampling_prob=q, compositions=count_steps,
                                   neighboring=relation)


@pytest.mark.parametrize("relation", ["replace_one", "add_remove"])
def test_subsampled_gaussian_composes_on_the_pld_route_with_gdp_and_pure_events(relation):
    """The PLD route composes a subsampled Gaussian as its own PLD, with the ledger's GDP and pure parts;
    oracle: the same composition built with dp-accounting alone, from the events' parameters."""
    ev = _sub(relation=relation)
    acc = Accountant([(ev, 2), GdpEvent(0.3), (PureDpEvent(0.05), 3)])
    routes = acc.epsilon_by_route(1e-6)
    rel = getattr(dp_accounting.NeighboringRelation, "REPLACE_ONE" if relation == "replace_one" else "ADD_OR_REMOVE_ONE")
    ref = (pldlib.from_gaussian_mechanism(standard_deviation=1.2, sampling_prob=0.02, neighboring_relation=rel,
                                          value_discretization_interval=1e-4).self_compose(400)
           .compose(pldlib.from_gaussian_mechanism(standard_deviation=1 / 0.3, value_discretization_interval=1e-4))
           .compose(pldlib.from_privacy_parameters(common.DifferentialPrivacyParameters(0.05, 0.0),
                                                   value_discretization_interval=1e-4).self_compose(3)))
    assert routes["pld"] == pytest.approx(ref.get_epsilon_for_delta(1e-6), rel=1e-4)
    # the RDP route still converts the carried curve (count 2 -> twice the values), and is the looser here
    a = np.array([2.0, 8.0])
    np.testing.assert_allclose(acc.rdp_curve(a)[1], 2 * ev.rdp(a) + 0.3**2 / 2 * a + 3 * pure_dp_rdp(0.05, a))
    assert acc.get_epsilon(1e-6) == routes["pld"] < routes["rdp"]
    assert acc.report(delta=1e-6)["route"] == "pld"
    # and it survives the ledger's dict form, still on the PLD route
    back = Accountant.from_dict(json.loads(json.dumps(acc.to_dict())))
    assert back.get_epsilon(1e-6) == acc.get_epsilon(1e-6)


def test_subsampled_gaussian_beside_a_zcdp_event_is_accounted_by_its_curve():
    """zCDP has no PLD: the whole ledger goes by RDP, the subsampled event by the curve it carries."""
    ev = _sub()
    acc = Accountant([ev, ZcdpEvent(0.01)])
    routes = acc.epsilon_by_route(1e-6)
    assert "pld" not in routes
    alone = RdpCurveEvent(orders=ev.orders, values=ev.values)
    assert acc.get_epsilon(1e-6) == Accountant([alone, ZcdpEvent(0.01)]).get_epsilon(1e-6)


def test_a_vacuous_subsampled_event_gives_no_pld_bound_and_the_curve_answers():
    a = (2.0, 8.0)
    ev = SubsampledGaussianEvent(orders=a, values=(math.inf, math.inf), noise_multiplier=0.01, sampling_prob=0.5,
                                 compositions=10)
    acc = Accountant([ev])
    assert math.isinf(acc.epsilon_by_route(1e-6)["pld"]) and math.isinf(acc.get_epsilon(1e-6))


def test_approx_events_compose_basic_and_pld():
    acc = Accountant([GdpEvent(0.5), ApproxDpEvent(0.1, 1e-6)])
    routes = acc.epsilon_by_route(1e-5)
    assert "rdp" not in routes
    basic = gdp_epsilon(0.5, 1e-5 - 1e-6) + 0.1
    assert routes["basic"] == pytest.approx(basic, rel=1e-9)
    assert acc.get_epsilon(1e-5) <= basic + 1e-12
    # delta at eps: basic composition bound holds
    assert acc.get_delta(2.0) <= math.exp(X.gdp_log_delta(1.9, 0.5)) + 1e-6 + 1e-15
    # infeasible: delta below the approx event's own delta
    assert math.isinf(acc.get_epsilon(5e-7))


def test_tv_error_is_reported_separately_and_added_with_the_correct_factor():
    tau = 1e-7
    acc = Accountant([(GdpEvent(0.4, tv_error=tau), 2)])
    rep = acc.report(1e-5)
    e = rep["epsilon"]
    assert rep["tv_error"] == pytest.approx(2 * tau)
    assert rep["delta_sampling"] == pytest.approx((1 + math.exp(e)) * 2 * tau)
    assert rep["delta_privacy"] == pytest.approx(X.gdp_delta(e, 0.4 * math.sqrt(2)), rel=1e-9)
    assert rep["delta_privacy"] + rep["delta_sampling"] <= 1e-5 * (1 + 1e-12)
    # eps is the smallest feasible one: slightly smaller eps is infeasible
    assert X.gdp_delta(e * (1 - 1e-6), 0.4 * math.sqrt(2)) + (1 + math.exp(e * (1 - 1e-6))) * 2 * tau > 1e-5
    assert e > gdp_epsilon(0.4 * math.sqrt(2), 1e-5)  # TV costs privacy
    # delta at eps adds the slack
    assert acc.get_delta(1.0) == pytest.approx(X.gdp_delta(1.0, 0.4 * math.sqrt(2)) + (1 + math.e) * 2 * tau)
    # TV too large for the target delta: infinite eps, still a valid JSON report
    bad = Accountant([GdpEvent(0.1, tv_error=1e-5)])
    assert math.isinf(bad.get_epsilon(1e-5))
    assert json.loads(json.dumps(bad.report(1e-5), allow_nan=False))["epsilon"] == "inf"


def test_report_is_json_and_contains_the_pieces():
    acc = Accountant([(GdpEvent(0.3, label="path", assumptions=("x",)), 4), PureDpEvent(0.05)])
    rep = acc.report(1e-5)
    s = json.dumps(rep, allow_nan=False)
    back = json.loads(s)
    assert back["kind"] == "mixed" and back["mu"] is None
    assert len(back["components"]) == 2 and back["components"][0]["count"] == 4
    assert back["rdp"]["orders"][0] == pytest.approx(DP_ORDERS[0])
    assert back["epsilon"] == pytest.approx(acc.get_epsilon(1e-5))
    rep2 = Accountant([GdpEvent(0.3)]).report(eps=1.0)
    assert rep2["kind"] == "gdp" and rep2["mu"] == pytest.approx(0.3)
    assert rep2["delta"] == pytest.approx(X.gdp_delta(1.0, 0.3))
    json.dumps(rep2, allow_nan=False)


def test_accountant_round_trips_through_a_dict():
    acc = Accountant([(GdpEvent(0.3), 2), ZcdpEvent(0.01), PureDpEvent(0.2), ApproxDpEvent(0.1, 1e-8)])
    back = Accountant.from_dict(json.loads(json.dumps(acc.to_dict())))
    assert back.ledger == acc.ledger
    assert back.get_epsilon(1e-5) == pytest.approx(acc.get_epsilon(1e-5), rel=1e-12)


def test_tiny_delta_in_log_space():
    acc = Accountant([GdpEvent(0.01)])
    e = acc.get_epsilon(log_delta=-2000.0)
    assert math.isfinite(e)
    assert X.gdp_log_delta(e, 0.01) == pytest.approx(-2000.0, abs=1e-6)
    accz = Accountant([ZcdpEvent(1e-6)])
    ez = accz.get_epsilon(log_delta=-2000.0)
    assert math.isfinite(ez) and ez == pytest.approx(linear_rdp_epsilon(1e-6, log_delta=-2000.0)[0], rel=1e-8)


def test_default_orders_are_dense_and_contain_dp_accounting_grid():
    assert set(DP_ORDERS).issubset(set(DEFAULT_ORDERS))
    assert DEFAULT_ORDERS.size > 1000 and DEFAULT_ORDERS.min() < 1.001 and DEFAULT_ORDERS.max() >= 1e6


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: Accountant().compose(GdpEvent(0.1), count=0), "count"),
        (lambda: Accountant().compose(GdpEvent(0.1), count=1.5), "count"),
        (lambda: Accountant().compose("gdp"), "event"),
        (lambda: Accountant().compose(PrivacyEvent()), "event"),
        (lambda: Accountant([GdpEvent(0.1)]).get_epsilon(2.0), "delta"),
        (lambda: Accountant([GdpEvent(0.1)]).get_delta(-1.0), "eps"),
        (lambda: Accountant(orders=[0.5, 2.0]), "orders"),
        (lambda: Accountant([GdpEvent(0.1)]).report(1e-5, eps=1.0), "either"),
        (lambda: compose(GdpEvent(0.1), counts=[1, 2]), "counts"),
    ],
)
def test_bad_inputs_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


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
    # total exceeds delta everywhere (tests/privacy/test_accountant_report checks it on a fine grid), so the
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
