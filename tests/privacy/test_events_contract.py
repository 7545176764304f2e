"""The event types' contract: float64 parameters, every field kept through JSON, closed-form RDP
curves, the matching dp-accounting events, and one-line errors for what an event cannot hold.

Oracles: closed forms (alpha mu^2 / 2, alpha rho, the randomized-response envelope, the step
envelope of a grid curve), dp-accounting's own RDP of the counterpart event, and exact equality
of every field after a JSON round trip.
"""

import json
import math

import dp_accounting
import jax.numpy as jnp
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rpa

from dp_infer.privacy import events as E

DP_ORDERS = np.asarray(rpa.DEFAULT_RDP_ORDERS, dtype=np.float64)
COMMON = dict(label="chain_a", assumptions=("first assumption", "second assumption"), tv_error=1e-9,
              metadata={"beta": 2.0, "steps": [1, 2], "name": "x"})


def _all_kinds(**common):
    return [
        E.GdpEvent(0.3, **common),
        E.ZcdpEvent(0.01, **common),
        E.RdpCurveEvent(orders=(1.5, 2.0, 10.0), values=(0.1, 0.2, math.inf), **common),
        E.PureDpEvent(0.7, **common),
        E.ApproxDpEvent(1.0, 1e-7, **common),
    ]


@pytest.mark.parametrize("ev", _all_kinds(**COMMON), ids=lambda e: e.kind)
def test_every_field_of_every_kind_survives_json(ev):
    back = E.event_from_dict(json.loads(json.dumps(ev.to_dict(), allow_nan=False)))
    assert type(back) is type(ev) and back == ev
    assert (back.label, back.assumptions, back.tv_error) == ("chain_a", COMMON["assumptions"], 1e-9)
    assert dict(back.metadata) == {"beta": 2.0, "steps": [1, 2], "name": "x"}
    assert dict(ev.metadata) == dict(back.metadata)


@pytest.mark.parametrize("d,expected", [
    ({"kind": "gdp", "mu": 0.5}, E.GdpEvent(0.5)),
    ({"kind": "zcdp", "rho": 0.02}, E.ZcdpEvent(0.02)),
    ({"kind": "rdp", "orders": [2.0, 4.0], "values": [0.1, "inf"]}, E.RdpCurveEvent(orders=(2.0, 4.0),
                                                                                 values=(0.1, math.inf))),
    ({"kind": "pure", "epsilon": 0.4}, E.PureDpEvent(0.4)),
    ({"kind": "approx", "epsilon": 0.4, "delta": 1e-8}, E.ApproxDpEvent(0.4, 1e-8)),
])
def test_a_minimal_dict_gets_the_documented_defaults(d, expected):
    ev = E.event_from_dict(d)
    assert ev == expected
    assert (ev.label, ev.assumptions, ev.tv_error, dict(ev.metadata)) == ("", (), 0.0, {})


@pytest.mark.parametrize("d", [{"mu": 0.5}, [("kind", "gdp")], "gdp", {"kind": "laplace", "epsilon": 1.0}])
def test_event_dicts_need_a_known_kind(d):
    with pytest.raises(ValueError, match="kind"):
        E.event_from_dict(d)


@pytest.mark.parametrize("make,field", [
    (lambda x: E.GdpEvent(x), "mu"),
    (lambda x: E.ZcdpEvent(x), "rho"),
    (lambda x: E.PureDpEvent(x), "epsilon"),
    (lambda x: E.ApproxDpEvent(x, 1e-6), "epsilon"),
    (lambda x: E.ApproxDpEvent(0.5, x), "delta"),
    (lambda x: E.GdpEvent(0.1, tv_error=x), "tv_error"),
])
@pytest.mark.parametrize("value", [np.float32(0.3), jnp.float32(0.3), 0, np.int64(0)])
def test_parameters_are_stored_as_python_floats(make, field, value):
    # accounting is float64 on the host: a float32 parameter squared in float32 loses ~1e-8
    ev = make(value)
    x = getattr(ev, field)
    assert type(x) is float and x == float(value)


def test_assumptions_and_metadata_are_frozen_copies():
    meta = {"beta": 2.0}
    ev = E.GdpEvent(0.1, assumptions=["a list", 7], metadata=meta)
    assert ev.assumptions == ("a list", "7") and hash(ev) == hash(E.GdpEvent(0.1, assumptions=("a list", "7")))
    meta["beta"] = 3.0
    assert ev.metadata["beta"] == 2.0
    orders = [2.0, 3.0]
    rev = E.RdpCurveEvent(orders=orders, values=np.array([0.1, 0.2], dtype=np.float32))
    assert rev.orders == (2.0, 3.0) and all(type(v) is float for v in rev.orders + rev.values)
    assert rev.values == (float(np.float32(0.1)), float(np.float32(0.2)))


# --------------------------------------------------------------------------- RDP curves


def test_rdp_curves_are_the_closed_forms():
    a = np.array([1.01, 2.0, 7.5, 1e4])
    np.testing.assert_allclose(E.GdpEvent(0.4).rdp(a), a * 0.4**2 / 2, rtol=1e-15)
    np.testing.assert_allclose(E.ZcdpEvent(0.03).rdp(a), a * 0.03, rtol=1e-15)
    # eps-DP: the exact envelope, randomized response's Renyi divergence (80-digit mpmath), on the
    # safe side without tolerance (issue 30, finding 13: this compared with pure_dp_rdp, the call
    # PureDpEvent.rdp makes)
    import mpmath

    got = E.PureDpEvent(0.6).rdp(a)
    with mpmath.workdps(80):
        e = mpmath.mpf(0.6)
        for al, g in zip(a, got):
            al = mpmath.mpf(al)
            rr = mpmath.log((mpmath.exp(al * e) + mpmath.exp((1 - al) * e)) / (1 + mpmath.exp(e))) / (al - 1)
            assert rr <= mpmath.mpf(g) <= rr * (1 + mpmath.mpf(1e-12)), (al, g)
    assert E.ApproxDpEvent(1.0, 1e-6).rdp(a) is None  # no RDP curve: only basic composition / PLD
    # the Gaussian curve is dp-accounting's RDP of the Gaussian mechanism with sigma = 1/mu
    acc = dp_accounting.rdp.RdpAccountant(orders=DP_ORDERS)
    acc.compose(dp_accounting.GaussianDpEvent(1 / 0.4))
    np.testing.assert_allclose(E.GdpEvent(0.4).rdp(DP_ORDERS), acc._rdp, rtol=1e-12)


def test_grid_curve_keeps_zeros_and_takes_the_running_maximum():
    ev = E.RdpCurveEvent(orders=(1.5, 2.0, 4.0, 8.0), values=(0.0, 0.0, 0.3, 0.2))
    assert ev.values == (0.0, 0.0, 0.3, 0.3)  # non-decreasing envelope: an upper bound at every order
    np.testing.assert_array_equal(ev.rdp([1.2, 1.5, 1.7, 2.0, 3.0, 8.0, 9.0]), [0.0, 0.0, 0.0, 0.0, 0.3, 0.3, np.inf])


@pytest.mark.parametrize("values", [(0.1, math.nan), (0.1, -1e-9), (math.nan, 0.1)])
def test_grid_curve_refuses_nan_and_negative_values(values):
    with pytest.raises(ValueError, match="values"):
        E.RdpCurveEvent(orders=(2.0, 3.0), values=values)


def test_approximate_event_accepts_delta_zero():
    ev = E.ApproxDpEvent(0.5, 0.0)  # (eps, 0) is a valid approximate-DP statement
    assert ev.delta == 0.0 and E.event_from_dict(ev.to_dict()) == ev


# --------------------------------------------------------------------------- dp-accounting counterparts


@pytest.mark.parametrize("mu", [0.0, 0.5, 1.0, 4.0])
def test_gdp_counterpart_is_the_gaussian_mechanism(mu):
    dpe = E.GdpEvent(mu).to_dp_accounting()
    if mu == 0.0:
        assert isinstance(dpe, dp_accounting.NoOpDpEvent)
    else:
        assert isinstance(dpe, dp_accounting.GaussianDpEvent) and dpe.noise_multiplier == 1.0 / mu


@pytest.mark.parametrize("rho", [0.0, 0.02, 1.0])
def test_zcdp_counterpart_carries_rho(rho):
    dpe = E.ZcdpEvent(rho).to_dp_accounting()
    assert isinstance(dpe, dp_accounting.ZCDpEvent) and dpe.rho == rho
    acc = dp_accounting.rdp.RdpAccountant(orders=DP_ORDERS)
    acc.compose(dpe)
    np.testing.assert_allclose(acc._rdp, rho * DP_ORDERS, rtol=1e-15)


def test_events_without_a_dp_accounting_counterpart():
    # pure events are never LaplaceDpEvent (Laplace composes more tightly than a generic eps-DP
    # mechanism), grid curves have no event type there
    assert E.PureDpEvent(1.0).to_dp_accounting() is None
    assert E.RdpCurveEvent(orders=(2.0,), values=(0.1,)).to_dp_accounting() is None
    assert E.ApproxDpEvent(1.0, 1e-6).to_dp_accounting() is None


# --------------------------------------------------------------------------- statistics


def test_statistic_events_state_their_sensitivity():
    g = E.gaussian_mechanism_event(2.0, 4.0, assumptions=("bounded rows",))
    assert g.mu == 0.5 and g.assumptions[0].startswith("l2 sensitivity of the statistic <= 2")
    assert g.assumptions[1] == "bounded rows" and dict(g.metadata) == {"sensitivity": 2.0, "sigma": 4.0}
    lap = E.laplace_mechanism_event(1.0, 10.0)
    assert lap.epsilon == 0.1 and lap.assumptions[0].startswith("l1 sensitivity of the statistic <= 1")
    for call, name in [(lambda: E.gaussian_mechanism_event(1.0, 0.0), "sigma"),
                       (lambda: E.gaussian_mechanism_event(-1.0, 1.0), "sensitivity"),
                       (lambda: E.laplace_mechanism_event(1.0, 0.0), "scale"),
                       (lambda: E.laplace_mechanism_event(-1.0, 1.0), "l1_sensitivity")]:
        with pytest.raises(ValueError, match=name):
            call()


def test_non_finite_numbers_reach_json_as_text_and_nan_never():
    with pytest.raises(ValueError, match="NaN"):
        E.GdpEvent(0.1, metadata={"v": math.nan}).to_dict()
    for x, text in [(math.inf, "inf"), (-math.inf, "-inf")]:
        d = E.GdpEvent(0.1, metadata={"v": x, "w": [np.float32(1.5), np.int64(3), True, None]}).to_dict()
        assert d["metadata"] == {"v": text, "w": [1.5, 3, True, None]}
        json.dumps(d, allow_nan=False)


def test_label_must_be_text():
    with pytest.raises(ValueError, match="label"):
        E.GdpEvent(0.1, label=3)
