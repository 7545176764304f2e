"""Event types and single-event conversions, cross-checked against dp-accounting and closed forms.

Oracle tests for dp_infer.privacy.events.

An event is the unit a ledger stores and a reviewer reads back: its numbers must survive every
way it is stored (JSON, pickle, copy) exactly, with its read-only metadata, and a number given in
any numeric type must be stored as the float it denotes. The old import path of the conversions
keeps working for one release, with a warning that points at the caller's line.
"""

import json
import math
import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rpa
from scipy import integrate, stats
from dp_infer.privacy import events as E, conversions as C, conversions, events
import copy
import fractions
import pathlib
import pickle
import warnings
from dp_infer.privacy.events import (
    ApproxDpEvent,
    GdpEvent,
    PureDpEvent,
    RdpCurveEvent,
    ZcdpEvent,
    event_from_dict,
)

DP_ORDERS = np.asarray(rpa.DEFAULT_RDP_ORDERS, dtype=np.float64)


# --------------------------------------------------------------------------- Gaussian DP
@pytest.mark.parametrize("mu", [0.05, 0.268, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-10])
def test_gdp_epsilon_matches_dp_accounting_analytic_gaussian(mu, delta):
    ours = C.gdp_epsilon(mu, delta)
    ref = dp_accounting.get_epsilon_gaussian(1.0 / mu, delta)
    assert ours == pytest.approx(ref, rel=1e-9, abs=1e-11)


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-5), (1.0, 1e-5), (2.0, 1e-6), (8.0, 1e-9)])
def test_gdp_mu_matches_dp_accounting_sigma_and_round_trips(eps, delta):
    mu = C.gdp_mu(eps, delta)
    assert mu == pytest.approx(1.0 / dp_accounting.get_sigma_gaussian(eps, delta), rel=1e-9)
    assert C.gdp_log_delta(eps, mu) == pytest.approx(math.log(delta), abs=1e-9)
    assert C.gdp_epsilon(mu, delta) == pytest.approx(eps, abs=1e-10)


def test_gdp_profile_equals_quadrature_of_gaussian_pair():
    # delta(eps) = int (phi(x - mu) - e^eps phi(x))_+ dx, independent of the closed form
    mu = 0.7
    for eps in [0.0, 0.3, 1.0, 2.5]:
        x0 = eps / mu + mu / 2.0  # the integrand is positive exactly for x > x0
        quad, _ = integrate.quad(lambda x: stats.norm.pdf(x - mu) - math.exp(eps) * stats.norm.pdf(x), x0, np.inf,
                                 epsabs=1e-15, epsrel=1e-12)
        assert C.gdp_delta(eps, mu) == pytest.approx(quad, rel=1e-8, abs=1e-16)


def test_gdp_log_delta_is_finite_deep_in_the_tail_and_monotone():
    eps = np.linspace(0, 200, 401)
    ld = np.array([C.gdp_log_delta(e, 0.5) for e in eps])
    assert np.all(np.isfinite(ld)) and np.all(np.diff(ld) < 0)
    # far tail: compare with an independent mpmath evaluation
    import mpmath as mp

    mp.mp.dps = 60
    mu, e = mp.mpf("0.5"), mp.mpf(50)
    ref = mp.ncdf(-e / mu + mu / 2) - mp.e**e * mp.ncdf(-e / mu - mu / 2)
    assert C.gdp_log_delta(50.0, 0.5) == pytest.approx(float(mp.log(ref)), rel=1e-9)


def test_gdp_tradeoff_duality_with_profile():
    # delta(eps) = sup_z (1 - G_mu(z) - e^eps z)
    mu = 1.0
    z = np.linspace(0, 1, 200001)
    g = C.gdp_tradeoff(z, mu)
    for eps in [0.0, 0.5, 1.0]:
        assert np.max(1 - g - math.exp(eps) * z) == pytest.approx(C.gdp_delta(eps, mu), abs=1e-6)
    assert C.gdp_tradeoff(0.05, 1.0) == pytest.approx(stats.norm.cdf(stats.norm.ppf(0.95) - 1.0), rel=1e-12)


# --------------------------------------------------------------------------- RDP conversions
@pytest.mark.parametrize("seed", range(5))
def test_rdp_epsilon_and_delta_equal_dp_accounting(seed):
    rng = np.random.default_rng(seed)
    rho = 10 ** rng.uniform(-4, 0)
    extra = 10 ** rng.uniform(-3, 0)
    curve = rho * DP_ORDERS + extra * np.log1p(DP_ORDERS)  # any non-decreasing curve
    for delta in [1e-3, 1e-6, 1e-12]:
        e_ref, a_ref = dp_accounting.rdp.compute_epsilon(DP_ORDERS, curve, delta)
        e, a = C.rdp_epsilon(DP_ORDERS, curve, delta)
        assert e == pytest.approx(e_ref, rel=1e-12, abs=1e-14) and a == a_ref
        e_log, _ = C.rdp_epsilon(DP_ORDERS, curve, log_delta=math.log(delta))
        assert e_log == pytest.approx(e_ref, rel=1e-12, abs=1e-14)
    for eps in [0.1, 1.0, 5.0]:
        d_ref, _ = rpa.compute_delta(DP_ORDERS, curve, eps)
        ld, _ = C.rdp_log_delta(DP_ORDERS, curve, eps)
        assert math.exp(ld) == pytest.approx(d_ref, rel=1e-10, abs=1e-300)


def test_rdp_epsilon_works_where_dp_accounting_cannot_take_delta():
    rho = 1e-4
    e, _ = C.rdp_epsilon(DP_ORDERS, rho * DP_ORDERS, log_delta=-3000.0)
    # the grid tops out at 1024: the CKS value at alpha=1024 is the answer
    a = 1024.0
    assert e == pytest.approx(rho * a + math.log1p(-1 / a) - (-3000.0 + math.log(a)) / (a - 1), rel=1e-12)


@pytest.mark.parametrize("rho", [1e-4, 1e-3, 1e-2, 0.125, 1.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_linear_rdp_continuous_optimum_never_beaten_by_grid(rho, delta):
    e, a_star = C.linear_rdp_epsilon(rho, delta)
    fine = 1.0 + np.geomspace(1e-4, 1e7, 200001)
    e_fine, _ = C.rdp_epsilon(fine, rho * fine, delta)
    e_dp, _ = dp_accounting.rdp.compute_epsilon(DP_ORDERS, rho * DP_ORDERS, delta)
    assert e <= e_fine + 1e-10 and e_fine <= e + 1e-6  # the fine grid approaches the optimum
    assert e <= e_dp + 1e-12
    # and it sits below Mironov's closed form, which upper-bounds the CKS expression
    assert e <= C.zcdp_epsilon_mironov(rho, delta) + 1e-12


def test_anchor_table_values_recomputed():
    # anchors-dp §1.4: continuous optimum vs default grid (recomputed here, not pasted)
    e_cont, _ = C.linear_rdp_epsilon(1e-4, 1e-5)
    e_grid, _ = dp_accounting.rdp.compute_epsilon(DP_ORDERS, 1e-4 * DP_ORDERS, 1e-5)
    opacus_like = np.concatenate([np.arange(1.1, 11.0, 0.1), np.arange(12, 64)])
    e_opacus, _ = dp_accounting.rdp.compute_epsilon(opacus_like, 1e-4 * opacus_like, 1e-5)
    assert e_cont < e_grid < e_opacus
    assert e_opacus / e_cont > 2.0  # the grid that stops at 63 loosens the bound by > 2x here


def test_linear_rdp_rho_inverts_linear_rdp_epsilon():
    for eps, delta in [(0.5, 1e-5), (1.0, 1e-5), (3.0, 1e-8)]:
        rho = C.linear_rdp_rho(eps, delta)
        assert C.linear_rdp_epsilon(rho, delta)[0] == pytest.approx(eps, abs=1e-10)
        assert rho >= C.zcdp_rho_for_epsilon_mironov(eps, delta)


def test_linear_rdp_log_delta_is_consistent_with_epsilon():
    rho = 0.02
    for eps in [0.3, 1.0, 2.0]:
        ld, _ = C.linear_rdp_log_delta(rho, eps)
        e_back, _ = C.linear_rdp_epsilon(rho, log_delta=ld)
        assert e_back == pytest.approx(eps, abs=1e-7)


def test_mironov_inverse_closed_form():
    for eps, delta in [(1.0, 1e-5), (0.1, 1e-3)]:
        rho = C.zcdp_rho_for_epsilon_mironov(eps, delta)
        assert C.zcdp_epsilon_mironov(rho, delta) == pytest.approx(eps, rel=1e-13)


# --------------------------------------------------------------------------- pure eps -> RDP
@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 3.0])
def test_pure_rdp_envelope_matches_randomized_response_in_dp_accounting(eps):
    # binary randomized response with parameter eps: noise_parameter p = 2/(1+e^eps)
    acc = dp_accounting.rdp.RdpAccountant(orders=DP_ORDERS,
                                          neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_accounting.RandomizedResponseDpEvent(noise_parameter=2.0 / (1.0 + math.exp(eps)), num_buckets=2))
    ours = C.pure_dp_rdp(eps, DP_ORDERS)
    np.testing.assert_allclose(ours, acc._rdp, rtol=1e-9, atol=1e-13)
    # Bun-Steinke (2016, Prop. 3.3) sinh form, and the two cruder envelopes
    a = DP_ORDERS
    with np.errstate(over="ignore", invalid="ignore"):
        bs = np.log((np.sinh(a * eps) - np.sinh((a - 1) * eps)) / np.sinh(eps)) / (a - 1)
    ok = np.isfinite(bs)
    np.testing.assert_allclose(ours[ok], bs[ok], rtol=1e-9, atol=1e-12)
    assert np.all(ours <= np.minimum(eps, a * eps**2 / 2) + 1e-15)


# --------------------------------------------------------------------------- events
def test_events_are_immutable_and_serialise_round_trip():
    evs = [
        E.GdpEvent(0.3, label="path", assumptions=("a", "b"), tv_error=1e-9, metadata={"beta": 2.0, "t": [1, 2]}),
        E.ZcdpEvent(0.01),
        E.RdpCurveEvent(orders=(1.5, 2.0, 10.0), values=(0.1, 0.2, float("inf"))),
        E.SubsampledGaussianEvent(orders=(2.0, 8.0), values=(0.01, 0.05), noise_multiplier=1.5, sampling_prob=0.01,
                                  compositions=1000, neighboring="add_remove", label="sgld"),
        E.PureDpEvent(0.7),
        E.ApproxDpEvent(1.0, 1e-7),
    ]
    for ev in evs:
        d = ev.to_dict()
        s = json.dumps(d)  # plain JSON
        back = E.event_from_dict(json.loads(s))
        assert back == ev and back.to_dict() == d
        with pytest.raises(Exception):
            ev.label = "changed"  # frozen
    with pytest.raises(TypeError):
        evs[0].metadata["beta"] = 3.0  # read-only mapping


def test_rdp_curve_event_uses_monotone_step_envelope():
    ev = E.RdpCurveEvent(orders=(2.0, 4.0), values=(0.1, 0.3))
    np.testing.assert_allclose(ev.rdp([1.5, 2.0, 3.0, 4.0]), [0.1, 0.1, 0.3, 0.3])
    assert np.isinf(ev.rdp([5.0])[0])


def test_dp_accounting_counterparts():
    assert isinstance(E.GdpEvent(0.5).to_dp_accounting(), dp_accounting.GaussianDpEvent)
    assert E.GdpEvent(0.5).to_dp_accounting().noise_multiplier == pytest.approx(2.0)
    assert isinstance(E.ZcdpEvent(0.1).to_dp_accounting(), dp_accounting.ZCDpEvent)
    assert E.PureDpEvent(1.0).to_dp_accounting() is None  # never LaplaceDpEvent


def test_subsampled_gaussian_event_names_its_mechanism_for_dp_accounting():
    ev = E.SubsampledGaussianEvent(orders=(2.0,), values=(0.1,), noise_multiplier=2.0, sampling_prob=0.05,
                                   compositions=300)
    assert isinstance(ev, E.RdpCurveEvent) and ev.neighboring == "replace_one"
    d = ev.to_dp_accounting()
    assert isinstance(d, dp_accounting.SelfComposedDpEvent) and d.count == 300
    assert d.event.sampling_probability == 0.05 and d.event.event.noise_multiplier == 2.0
    assert ev.neighboring_relation() == dp_accounting.NeighboringRelation.REPLACE_ONE
    # its PLD is dp-accounting's, built from those parameters alone; count copies compose count x the steps
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    ref = pldlib.from_gaussian_mechanism(standard_deviation=2.0, sampling_prob=0.05, pessimistic_estimate=True,
                                         neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE,
                                         value_discretization_interval=1e-3).self_compose(600)
    assert ev.pld(1e-3, count=2).get_epsilon_for_delta(1e-6) == ref.get_epsilon_for_delta(1e-6)
    single = E.SubsampledGaussianEvent(orders=(2.0,), values=(0.1,), noise_multiplier=2.0, sampling_prob=0.05,
                                       compositions=1, neighboring="add_remove")
    assert single.neighboring_relation() == dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    assert single.pld(1e-3).get_epsilon_for_delta(1e-6) > 0


def test_gaussian_and_laplace_statistic_events():
    ev = E.gaussian_mechanism_event(2.0, 4.0)
    assert ev.mu == pytest.approx(0.5)
    ev = E.laplace_mechanism_event(1.0, 10.0)
    assert isinstance(ev, E.PureDpEvent) and ev.epsilon == pytest.approx(0.1)


def test_tv_delta_slack_is_the_corrected_factor():
    assert C.tv_delta_slack(0.1, 1e-6) == pytest.approx((1 + math.exp(0.1)) * 1e-6)
    # the paper's "+tau" would be about 2.1x too small at eps = 0.1
    assert C.tv_delta_slack(0.1, 1e-6) / 1e-6 > 2.1


# --------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: E.GdpEvent(-1.0), "mu"),
        (lambda: E.ZcdpEvent(float("nan")), "rho"),
        (lambda: E.PureDpEvent(-0.1), "epsilon"),
        (lambda: E.ApproxDpEvent(1.0, 1.5), "delta"),
        (lambda: E.GdpEvent(0.1, tv_error=-1e-3), "tv_error"),
        (lambda: E.GdpEvent(0.1, tv_error=1.0), "tv_error"),
        (lambda: E.RdpCurveEvent(orders=(2.0, 1.5), values=(0.1, 0.2)), "orders"),
        (lambda: E.RdpCurveEvent(orders=(0.5, 2.0), values=(0.1, 0.2)), "orders"),
        (lambda: E.RdpCurveEvent(orders=(1.5, 2.0), values=(0.1,)), "values"),
        (lambda: C.gdp_epsilon(0.5, 0.0), "delta"),
        (lambda: C.gdp_epsilon(0.5, 1.2), "delta"),
        (lambda: C.gdp_epsilon(0.5, log_delta=0.5), "log_delta"),
        (lambda: C.gdp_epsilon(0.5, 1e-5, log_delta=-3.0), "delta"),
        (lambda: C.gdp_mu(-1.0, 1e-5), "eps"),
        (lambda: C.pure_dp_rdp(1.0, [0.5]), "alpha"),
        (lambda: C.linear_rdp_rho(0.0, 1e-5), "eps"),
        (lambda: E.event_from_dict({"kind": "laplace"}), "kind"),
        (lambda: E.SubsampledGaussianEvent(orders=(2.0,), values=(0.1,), noise_multiplier=0.0), "noise_multiplier"),
        (lambda: E.SubsampledGaussianEvent(orders=(2.0,), values=(0.1,), sampling_prob=1.0), "sampling_prob"),
        (lambda: E.SubsampledGaussianEvent(orders=(2.0,), values=(0.1,), sampling_prob=0.0), "sampling_prob"),
        (lambda: E.SubsampledGaussianEvent(orders=(2.0,), values=(0.1,), compositions=0), "compositions"),
        (lambda: E.SubsampledGaussianEvent(orders=(2.0,), values=(0.1,), compositions=2.5), "compositions"),
        (lambda: E.SubsampledGaussianEvent(orders=(2.0,), values=(0.1,), compositions=True), "compositions"),
        (lambda: E.SubsampledGaussianEvent(orders=(2.0,), values=(0.1,), neighboring="swap"), "neighboring"),
    ],
)
def test_bad_inputs_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


_EVENTS = [
    GdpEvent(0.7, label="chain", assumptions=("convex",), tv_error=1e-9, metadata={"beta": 3.0, "k": 4}),
    ZcdpEvent(0.02, tv_error=0.0, metadata={"rows": [1, 2]}),
    RdpCurveEvent(orders=(2.0, 8.0, 64.0), values=(0.1, 0.5, float("inf")), label="curve"),
    E.SubsampledGaussianEvent(orders=(2.0, 8.0), values=(0.1, 0.5), noise_multiplier=0.9, sampling_prob=0.2,
                              compositions=7, metadata={"q": 0.2}),
    PureDpEvent(1.5, metadata={"scale": 2.0}),
    ApproxDpEvent(0.3, 1e-7, tv_error=1e-12),
]


@pytest.mark.parametrize("ev", _EVENTS, ids=lambda e: e.kind)
def test_pickle_and_copies_keep_every_field_and_the_metadata_read_only(ev):
    for back in (pickle.loads(pickle.dumps(ev)), copy.deepcopy(ev), copy.copy(ev)):
        assert back == ev and type(back) is type(ev)
        assert dict(back.metadata) == dict(ev.metadata)
        with pytest.raises(TypeError):
            back.metadata["beta"] = 1.0  # still a read-only view after the round trip
    # pickling does not thaw the original either
    with pytest.raises(TypeError):
        ev.metadata["x"] = 1


def test_numbers_of_any_numeric_type_are_stored_as_the_float_they_denote():
    ev = GdpEvent(np.float32(0.5), tv_error=np.float32(0.25))
    assert type(ev.tv_error) is float and ev.tv_error == 0.25
    assert type(PureDpEvent(1, tv_error=fractions.Fraction(1, 4)).tv_error) is float
    # values given as Python ints, one beyond int64: the RDP curve is the floats they denote
    curve = RdpCurveEvent(orders=(2, 3), values=(1, 10**20))
    assert curve.values == (1.0, 1e20) and all(type(v) is float for v in curve.values)
    assert float(curve.rdp(2.5)) == 1e20 and float(curve.rdp(2.0)) == 1.0
    # a subsampled Gaussian's parameters, given as NumPy scalars: stored as the float / int they denote,
    # so the event writes plain JSON (an np.int64 count would not serialise) and reads back equal
    sub = E.SubsampledGaussianEvent(orders=(2.0,), values=(0.1,), noise_multiplier=np.float32(1.5),
                                    sampling_prob=np.float32(0.25), compositions=np.int64(40))
    assert type(sub.noise_multiplier) is float and type(sub.sampling_prob) is float and type(sub.compositions) is int
    assert (sub.noise_multiplier, sub.sampling_prob, sub.compositions) == (1.5, 0.25, 40)
    assert E.event_from_dict(json.loads(json.dumps(sub.to_dict()))) == sub


def test_subsampled_gaussian_pld_is_the_mechanisms_own_for_every_step_count():
    """``pld(interval, count)``: ``count * compositions`` steps of dp-accounting's PLD, one copy by default."""
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    def ref(steps):
        p = pldlib.from_gaussian_mechanism(standard_deviation=1.3, sampling_prob=0.1, value_discretization_interval=1e-3,
                                           neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
        return (p.self_compose(steps) if steps > 1 else p).get_epsilon_for_delta(1e-6)

    for compositions, count in ((1, 1), (2, 1), (1, 2), (3, 1)):
        ev = E.SubsampledGaussianEvent(orders=(2.0,), values=(1.0,), noise_multiplier=1.3, sampling_prob=0.1,
                                       compositions=compositions)
        got = ev.pld(1e-3) if count == 1 else ev.pld(1e-3, count)
        assert got.get_epsilon_for_delta(1e-6) == pytest.approx(ref(compositions * count), rel=1e-8)
    # and the step counts differ enough that the comparison tells them apart
    assert ref(2) > 1.1 * ref(1) and ref(3) > 1.05 * ref(2)  # measured 1.16x and about 1.1x


def test_metadata_of_any_type_is_written_as_json_and_read_back():
    meta = {"grid": np.array([1.0, 2.5]), "path": pathlib.PurePosixPath("runs/a"), "ratio": fractions.Fraction(1, 3),
            "n": np.int64(7), "flag": np.bool_(True), "none": None}
    ev = GdpEvent(1.0, metadata=meta)
    d = ev.to_dict()
    assert d["metadata"] == {"grid": [1.0, 2.5], "path": "runs/a", "ratio": "1/3", "n": 7, "flag": True,
                             "none": None}
    text = json.dumps(d, allow_nan=False)
    assert event_from_dict(json.loads(text)) == ev
    assert dict(event_from_dict(json.loads(text)).metadata) == d["metadata"]


def test_infinite_numbers_are_written_as_signed_strings():
    ev = RdpCurveEvent(orders=(2.0, 4.0), values=(1.0, float("inf")))
    d = ev.to_dict()
    assert d["values"] == [1.0, "inf"] and event_from_dict(json.loads(json.dumps(d))) == ev
    assert events._json_float(float("-inf")) == "-inf" and events._json_float(-0.0) == 0.0


def test_moved_conversions_warn_from_the_callers_line_and_still_work():
    name = conversions.__all__[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = getattr(events, name)
    assert fn is getattr(conversions, name)
    assert len(caught) == 1 and caught[0].category is DeprecationWarning
    msg = str(caught[0].message)
    assert f"dp_infer.privacy.events.{name}" in msg and f"dp_infer.privacy.conversions.{name}" in msg
    assert "removed in the next release" in msg
    # stacklevel 2: attributed to the code that used the old path, not to events.py's warn line
    # (the exact frame is not asserted: a tracer or wrapper may add one)
    assert caught[0].filename != events.__file__


def test_an_unknown_attribute_is_the_usual_attribute_error():
    with pytest.raises(AttributeError, match=r"^module 'dp_infer.privacy.events' has no attribute 'nope'$"):
        events.nope  # noqa: B018
    assert not hasattr(events, "gdp_delta_old")
