"""Every field of the accountant's JSON report, against closed forms and independent evaluation.

A report is what a user (and the ledger) keeps; a field computed wrongly is a privacy statement
made wrongly. Oracles: the exact Gaussian profile for GDP ledgers (delta_privacy, routes),
the TV slack (1 + e^eps) tau in closed form, the RDP curve alpha mu^2 / 2 on dp-accounting's
orders, dp-accounting's own RDP conversion for the cross-check route, and the JSON text itself
(allow_nan=False, +-inf as strings).
"""

import json
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rpa

from dp_infer.privacy import conversions as C
from dp_infer.privacy.accountant import Accountant, compose
from dp_infer.privacy.events import ApproxDpEvent, GdpEvent, PureDpEvent, RdpCurveEvent, ZcdpEvent
from tests.support.mp_oracles import gdp_log_delta_mp, gdp_total_delta_mp

DP_ORDERS = np.asarray(rpa.DEFAULT_RDP_ORDERS, dtype=np.float64)


def _json(rep):
    return json.loads(json.dumps(rep, allow_nan=False))


def test_report_at_a_target_delta_for_a_gdp_ledger_with_sampling_error():
    tau, mu1, k, delta = 1e-8, 0.3, 2, 1e-5
    acc = Accountant([(GdpEvent(mu1, label="chain", tv_error=tau), k)])
    rep = _json(acc.report(delta))
    mu = mu1 * math.sqrt(k)
    e = rep["epsilon"]
    assert rep["kind"] == "gdp" and rep["mu"] == pytest.approx(mu, rel=1e-15)
    assert rep["rho"] == pytest.approx(mu * mu / 2, rel=1e-15) and rep["tv_error"] == pytest.approx(k * tau, rel=1e-15)
    assert rep["components"] == [{"event": GdpEvent(mu1, label="chain", tv_error=tau).to_dict(), "count": k}]
    assert rep["rdp"]["orders"] == DP_ORDERS.tolist()
    np.testing.assert_allclose(rep["rdp"]["values"], DP_ORDERS * mu * mu / 2, rtol=1e-14)
    # target and the two parts of the total delta at the reported eps
    assert rep["delta"] == pytest.approx(delta, rel=1e-15) and rep["log_delta"] == pytest.approx(math.log(delta))
    assert rep["route"] == "gdp" and rep["route_info"] == {}
    assert rep["log_delta_privacy"] == pytest.approx(C.gdp_log_delta(e, mu), rel=1e-12)
    assert rep["delta_privacy"] == pytest.approx(C.gdp_delta(e, mu), rel=1e-12)
    assert rep["delta_sampling"] == pytest.approx((1 + math.exp(e)) * k * tau, rel=1e-12)
    assert rep["delta_privacy"] + rep["delta_sampling"] <= delta * (1 + 1e-12)
    # per-route eps without the TV part: the exact GDP inverse, and RDP conversions above it
    routes = rep["routes_ideal"]
    assert set(routes) == {"gdp", "rdp", "rdp_dp_accounting"}
    assert routes["gdp"] == pytest.approx(C.gdp_epsilon(mu, delta), rel=1e-12)
    ref, _ = dp_accounting.rdp.compute_epsilon(acc._rdp_route().orders, acc._rdp_route().values, delta)
    assert routes["rdp_dp_accounting"] == pytest.approx(ref, rel=1e-12)
    assert routes["gdp"] < routes["rdp"] <= routes["rdp_dp_accounting"] + 1e-12
    assert e > routes["gdp"]  # the sampling slack costs eps


def test_report_at_a_target_eps():
    tau, mu, eps = 1e-7, 0.5, 1.5
    acc = Accountant([GdpEvent(mu, tv_error=tau), GdpEvent(0.0)])
    rep = _json(acc.report(eps=eps))
    slack = (1 + math.exp(eps)) * tau
    assert rep["epsilon"] == eps and rep["route"] == "gdp"
    assert rep["log_delta_privacy"] == pytest.approx(C.gdp_log_delta(eps, mu), rel=1e-13)
    assert rep["delta_privacy"] == pytest.approx(C.gdp_delta(eps, mu), rel=1e-13)
    assert rep["delta_sampling"] == pytest.approx(slack, rel=1e-13)
    assert rep["delta"] == pytest.approx(C.gdp_delta(eps, mu) + slack, rel=1e-13)
    assert rep["log_delta"] == pytest.approx(math.log(C.gdp_delta(eps, mu) + slack), rel=1e-13)
    lds = rep["routes_log_delta"]
    assert set(lds) == {"gdp", "rdp", "rdp_dp_accounting"}
    assert lds["gdp"] == pytest.approx(C.gdp_log_delta(eps, mu), rel=1e-13)
    d_ref, _ = rpa.compute_delta(DP_ORDERS, DP_ORDERS * mu * mu / 2, eps)
    assert lds["gdp"] < lds["rdp"] <= math.log(d_ref) + 1e-12
    # without sampling error the slack is exactly 0
    rep0 = _json(Accountant([GdpEvent(mu)]).report(eps=eps))
    assert rep0["delta_sampling"] == 0.0 and rep0["delta"] == pytest.approx(rep0["delta_privacy"], rel=1e-15)


def test_report_of_mixed_and_empty_ledgers():
    acc = Accountant([ZcdpEvent(0.01), (PureDpEvent(0.05), 3)])
    rep = _json(acc.report(1e-6))
    assert rep["kind"] == "mixed" and rep["mu"] is None and rep["rho"] is None
    a = DP_ORDERS
    np.testing.assert_allclose(rep["rdp"]["values"], 0.01 * a + 3 * C.pure_dp_rdp(0.05, a), rtol=1e-13)
    assert rep["route"] in rep["routes_ideal"] and rep["epsilon"] == pytest.approx(min(
        v for k, v in rep["routes_ideal"].items() if k != "rdp_dp_accounting"), rel=1e-12)
    lin = _json(Accountant([GdpEvent(0.2), ZcdpEvent(0.01)]).report(1e-6))
    assert lin["kind"] == "mixed" and lin["mu"] is None and lin["rho"] == pytest.approx(0.02 + 0.01, rel=1e-15)
    one = _json(Accountant([(ZcdpEvent(0.01), 2)]).report(1e-6))
    assert one["kind"] == "zcdp" and one["rho"] == pytest.approx(0.02, rel=1e-15) and one["mu"] is None
    empty = _json(Accountant().report(1e-6))
    assert (empty["kind"], empty["mu"], empty["rho"], empty["rdp"], empty["components"]) == ("none", None, None,
                                                                                            None, [])
    assert empty["epsilon"] == 0.0 and empty["delta_privacy"] == 0.0 and empty["log_delta_privacy"] == "-inf"
    # no target: only the ledger's description
    plain = _json(acc.report())
    assert "epsilon" not in plain and plain["kind"] == "mixed" and len(plain["components"]) == 2


def test_report_of_an_approximate_event_has_no_rdp_curve_and_basic_composition():
    acc = Accountant([GdpEvent(0.5), ApproxDpEvent(0.1, 1e-7)])
    rep = _json(acc.report(1e-5))
    assert rep["rdp"] is None and rep["kind"] == "mixed"
    assert rep["routes_ideal"]["basic"] == pytest.approx(C.gdp_epsilon(0.5, 1e-5 - 1e-7) + 0.1, rel=1e-9)
    # infeasible target: eps = inf, the privacy part is all of delta and there is no sampling part
    bad = _json(acc.report(5e-8))
    assert bad["epsilon"] == "inf" and bad["route"] == "none" and bad["delta_sampling"] is None
    assert bad["delta_privacy"] == 1.0 and bad["log_delta_privacy"] == 0.0


def test_report_refuses_two_targets_and_bad_eps():
    acc = Accountant([GdpEvent(0.1)])
    for kw in ({"delta": 1e-5, "eps": 1.0}, {"log_delta": -5.0, "eps": 1.0}):
        with pytest.raises(ValueError, match="either"):
            acc.report(**kw)
    with pytest.raises(ValueError, match="eps"):
        acc.report(eps=-1.0)


# --------------------------------------------------------------------------- ledger operations


def test_copy_from_dict_and_compose_keep_the_ledger_and_its_settings():
    acc = Accountant([(GdpEvent(0.3, label="a"), 2), PureDpEvent(0.2), ApproxDpEvent(0.1, 1e-9)],
                     pld_discretization=3e-4)
    cp = acc.copy()
    assert cp.ledger == acc.ledger and cp._pld_discretization == 3e-4 and np.array_equal(cp._orders, acc._orders)
    cp.compose(GdpEvent(1.0))
    assert len(acc.ledger) == 3  # a copy, not a view
    d = json.loads(json.dumps(acc.to_dict()))
    assert d["pld_discretization"] == 3e-4
    back = Accountant.from_dict(d)
    assert back.ledger == acc.ledger and back._pld_discretization == 3e-4
    assert Accountant.from_dict({"events": []}).ledger == () and Accountant.from_dict({})._pld_discretization == 1e-4
    assert compose(GdpEvent(0.3), ZcdpEvent(0.1)).ledger == ((GdpEvent(0.3), 1), (ZcdpEvent(0.1), 1))
    assert compose(GdpEvent(0.3), counts=[4]).gdp_mu() == pytest.approx(0.6, rel=1e-15)
    assert acc.kinds() == {"gdp", "pure", "approx"}
    assert repr(acc) == "Accountant([gdp:ax2, pure:-x1, approx:-x1])"


def test_custom_orders_are_used_and_checked():
    orders = [1.5, 2.0, 3.0, 1.5]
    acc = Accountant([ZcdpEvent(0.01)], orders=orders)
    assert acc._orders.tolist() == [1.5, 2.0, 3.0]
    o, v = acc.rdp_curve()
    assert o.tolist() == [1.5, 2.0, 3.0] and np.allclose(v, 0.01 * o, rtol=1e-15)
    # the curve at any requested order, and the conversion never below the exact Gaussian's eps
    a = np.array([1.01, 5.0, 1e3])
    assert np.allclose(acc.rdp_curve(a)[1], 0.01 * a, rtol=1e-15)
    assert acc.get_epsilon(1e-5) >= C.gdp_epsilon(math.sqrt(0.02), 1e-5)
    for bad in ([1.0, 2.0], [2.0, math.inf], [math.nan]):
        with pytest.raises(ValueError, match="orders"):
            Accountant(orders=bad)
    for bad in (0.0, -1e-4, math.nan):
        with pytest.raises(ValueError, match="pld_discretization"):
            Accountant(pld_discretization=bad)


def test_gdp_and_linear_summaries_refuse_other_kinds():
    assert Accountant([GdpEvent(0.3), PureDpEvent(0.1)]).gdp_mu() is None
    assert Accountant([GdpEvent(0.3), PureDpEvent(0.1)]).linear_rho() is None
    assert Accountant([GdpEvent(0.3), RdpCurveEvent(orders=(2.0,), values=(0.1,))]).linear_rho() is None
    assert Accountant([GdpEvent(0.3), ApproxDpEvent(0.1, 1e-9)]).rdp_curve() is None
    assert Accountant([ZcdpEvent(0.1)]).gdp_mu() is None
    assert Accountant().gdp_mu() == 0.0 and Accountant().linear_rho() == 0.0 and Accountant().tv_error == 0.0


def test_report_at_a_log_delta_target_beyond_float_delta():
    # delta = e^-3000 is not a float: the target is given as log_delta, and the reported eps must
    # satisfy the exact profile there (safe side, no tolerance) and be tight to 1e-9 relative
    rep = Accountant([GdpEvent(1.0)]).report(log_delta=-3000.0)
    e = rep["epsilon"]
    assert rep["log_delta"] == -3000.0 and rep["route"] == "gdp"
    assert gdp_log_delta_mp(e, 1.0) <= -3000.0 < gdp_log_delta_mp(e * (1 - 1e-9), 1.0)


def test_report_without_sampling_error_at_an_eps_beyond_exp_range():
    # mu = 100 at delta = 1e-10: eps ~ 5635 > log(max float); no TV error, so no sampling slack
    rep = _json(Accountant([GdpEvent(100.0)]).report(1e-10))
    e = rep["epsilon"]
    assert e > 709.8 and rep["delta_sampling"] == 0.0 and rep["tv_error"] == 0.0
    assert gdp_log_delta_mp(e, 100.0) <= math.log(1e-10) < gdp_log_delta_mp(e * (1 - 1e-9), 100.0)


def test_report_at_a_huge_eps_with_sampling_error_is_vacuous_not_an_error():
    # (1 + e^800) tau overflows a float: the slack is +inf (the statement is vacuous), not an OverflowError
    tau = 1e-9
    rep = _json(Accountant([GdpEvent(1.0, tv_error=tau)]).report(eps=800.0))
    assert rep["delta_sampling"] == "inf" and rep["delta"] == "inf" and rep["log_delta"] == 0.0
    rep = _json(Accountant([GdpEvent(1.0, tv_error=tau)]).report(eps=700.0))
    assert rep["delta_sampling"] == pytest.approx(math.exp(700.0) * tau, rel=1e-12)


def test_copy_keeps_custom_orders_cks_closed_form_at_the_only_order():
    # with one order alpha the RDP route's eps is the CKS formula there (no search):
    # eps = alpha rho + log(1 - 1/alpha) - (log delta + log alpha) / (alpha - 1)
    rho, delta, a = 0.5, 1e-5, 2.0
    want = a * rho + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1)
    acc = Accountant([ZcdpEvent(rho)], orders=[a])
    for x in (acc, acc.copy(), acc.copy().copy()):
        assert x.rdp_curve()[0].tolist() == [a]
        assert x.get_epsilon(delta) == pytest.approx(want, rel=1e-13)


def test_total_delta_is_a_probability_when_the_sampling_slack_exceeds_one():
    # tau = 0.4 at eps = 1: (1 + e) tau = 1.49 -- the total delta is capped at 1 (log 0), never above
    acc = Accountant([GdpEvent(1.0, tv_error=0.4)])
    for e in (0.0, 1.0, 5.0):
        assert acc.get_log_delta(e) == 0.0 and acc.get_delta(e) == 1.0
    # and below the cap it is exactly log(delta_mu(eps) + (1 + e^eps) tau)
    acc = Accountant([GdpEvent(1.0, tv_error=1e-3)])
    assert acc.get_delta(1.0) == pytest.approx(C.gdp_delta(1.0, 1.0) + (1 + math.e) * 1e-3, rel=1e-12)


# (mu, tau): tau well inside the feasible range, and within 0.1% / 1e-6 of the largest tau for
# which any eps is feasible at delta = 1e-5 (there the feasible eps form a narrow interval that
# the 128-point grid can miss: the search must still find it)
_TV_CASES = [(0.01, 1e-12), (0.01, 2e-6), (0.1, 1e-6), (0.5, 1e-9), (0.5, 8.55697253e-07 * 0.999),
             (0.5, 8.55697253e-07 * 0.999999), (1.0, 6.95440374e-08 * 0.999), (2.0, 1.86538404e-10 * 0.999)]


@pytest.mark.parametrize("mu,tau", _TV_CASES)
def test_epsilon_with_sampling_error_is_the_smallest_feasible_eps(mu, tau):
    # total delta(eps) = delta_mu(eps) + (1 + e^eps) tau, evaluated in 200 digits: the reported eps
    # meets the target exactly (no tolerance) and 1e-7 less does not
    delta = 1e-5
    acc = Accountant([GdpEvent(mu, tv_error=tau)])
    e = acc.get_epsilon(delta)
    assert 0 < e < math.inf
    assert gdp_total_delta_mp(e, mu, tau) <= delta < gdp_total_delta_mp(e * (1 - 1e-7), mu, tau)
    assert acc.get_log_delta(e) <= math.log(delta)


@pytest.mark.parametrize("mu,tau", [(0.5, 8.55697253e-07 * 1.001), (1.0, 6.95440374e-08 * 1.001), (3.0, 1e-12),
                                    (0.1, 5e-6)])
def test_epsilon_with_sampling_error_is_infinite_when_no_eps_is_feasible(mu, tau):
    # the closed-form total delta exceeds the target on a fine grid of every eps that could work
    # ((1 + e^eps) tau < delta bounds eps above), so no finite eps may be reported
    delta = 1e-5
    hi = math.log(max(delta / tau - 1, 1.0))
    grid = np.linspace(0.0, hi, 4001)
    total = np.array([C.gdp_delta(float(x), mu) for x in grid]) + (1 + np.exp(grid)) * tau
    assert total.min() > delta
    assert Accountant([GdpEvent(mu, tv_error=tau)]).get_epsilon(delta) == math.inf


def test_epsilon_with_sampling_error_is_zero_when_eps_zero_is_feasible():
    # delta_mu(0) = 2 Phi(mu / 2) - 1 ~ 4e-7 for mu = 1e-6, plus 2 tau: below 1e-5
    acc = Accountant([GdpEvent(1e-6, tv_error=1e-9)])
    assert gdp_total_delta_mp(0.0, 1e-6, 1e-9) <= 1e-5
    assert acc.get_epsilon(1e-5) == 0.0 and acc.report(1e-5)["epsilon"] == 0.0
