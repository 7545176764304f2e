"""Accountant: composition and conversions against dp-accounting and exact oracles."""

import json
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import common, privacy_loss_distribution as pldlib
from dp_accounting.rdp import rdp_privacy_accountant as rpa

from dp_infer.privacy import exact as X
from dp_infer.privacy.accountant import DEFAULT_ORDERS, Accountant, compose
from dp_infer.privacy.events import ApproxDpEvent, GdpEvent, PrivacyEvent, PureDpEvent, RdpCurveEvent, ZcdpEvent
from dp_infer.privacy.conversions import gdp_epsilon, linear_rdp_epsilon, pure_dp_rdp

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
