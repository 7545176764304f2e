"""dp_infer.mechanisms._release.Release: the one place a mechanism's budget is composed outside the
accountant (pure events are summed).

Oracles: basic composition of pure events is the sum of count x eps (exact, and tight: randomized
response composed k times reaches it at delta = 0); events with a delta or a GDP part are composed by
dp-accounting (PLD), never by the sum.
"""

import math

import numpy as np
import pytest
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from dp_infer.mechanisms import Release
from dp_infer.privacy.events import ApproxDpEvent, GdpEvent, PureDpEvent


def test_pure_release_sums_count_times_epsilon():
    r = Release(value=1.0, events=((PureDpEvent(0.3, label="a"), 3), (PureDpEvent(0.25, label="b"), 2)),
                params={"x": np.float64(2.0)}, randomness={"source": "test"})
    assert r.is_pure
    assert r.epsilon() == pytest.approx(0.3 * 3 + 0.25 * 2, rel=1e-15)
    rep = r.report()
    assert rep["epsilon"] == r.epsilon() and rep["delta"] == 0.0 and rep["route"] == "pure_basic"
    assert [c["count"] for c in rep["components"]] == [3, 2]
    assert [c["event"]["label"] for c in rep["components"]] == ["a", "b"]
    assert rep["params"] == {"x": 2.0} and rep["randomness"] == {"source": "test"}
    # at a delta, the accountant answers (never above the sum; below it only by the PLD's tightening)
    e6 = r.epsilon(1e-6)
    assert e6 <= r.epsilon() + 1e-9


def test_a_pure_event_with_a_tv_error_or_a_delta_is_not_summed():
    tv = PureDpEvent(0.5, tv_error=1e-4, label="tv")
    r = Release(value=None, events=((tv, 2),))
    assert not r.is_pure
    with pytest.raises(ValueError):
        r.epsilon()       # no delta given for a release that is not pure
    approx = Release(value=None, events=((ApproxDpEvent(0.4, 1e-7), 2),))
    assert not approx.is_pure
    e = approx.epsilon(1e-5)
    # (0.4, 1e-7) twice at delta 1e-5: dp-accounting's PLD of the (eps, delta) pair, composed
    pld = pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(0.4, 1e-7),
                                          value_discretization_interval=1e-5).self_compose(2)
    assert e >= pld.get_epsilon_for_delta(1e-5) - 1e-4
    assert e <= 0.8 + 1e-9


def test_a_release_with_a_gaussian_part_is_composed_by_the_accountant():
    g = GdpEvent(mu=0.5, label="g")
    r = Release(value=None, events=((PureDpEvent(0.2), 1), (g, 4)))
    assert not r.is_pure
    delta = 1e-5
    got = r.epsilon(delta)
    pld = pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(0.2, 0.0),
                                          value_discretization_interval=1e-5)
    pld = pld.compose(pld_lib.from_gaussian_mechanism(2.0, value_discretization_interval=1e-5).self_compose(4))
    ref = pld.get_epsilon_for_delta(delta)
    assert got >= ref - 1e-3 and got <= ref * 1.01 + 1e-3
    rep = r.report(delta)
    assert rep["epsilon"] == pytest.approx(got, rel=1e-12) and rep["delta"] == pytest.approx(delta, rel=1e-12)
    assert r.accountant().get_epsilon(delta) == pytest.approx(got, rel=1e-12)
    # log_delta is the same question
    assert r.epsilon(log_delta=math.log(delta)) == pytest.approx(got, rel=1e-9)


def test_a_pure_release_reported_at_a_delta_is_composed_by_the_accountant():
    # 200 pure 0.05 events: the sum is 10, but at delta = 1e-6 their optimal composition is far below it;
    # dp-accounting's PLD of the pure (0.05, 0) pair composed 200 times is the oracle
    r = Release(value=None, events=((PureDpEvent(0.05), 200),))
    delta = 1e-6
    ref = pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(0.05, 0.0),
                                          value_discretization_interval=1e-4).self_compose(200).get_epsilon_for_delta(delta)
    assert ref < 5.0                                       # the sum (10) would be 2x off
    rep = r.report(delta)
    assert rep["delta"] == pytest.approx(delta, rel=1e-12) and rep["route"] != "pure_basic"
    assert ref - 1e-2 <= rep["epsilon"] <= ref * 1.01 + 1e-2
    assert rep["epsilon"] == pytest.approx(r.epsilon(delta), rel=1e-12)
    # with no delta the pure sum is the answer
    assert r.report()["epsilon"] == pytest.approx(10.0, rel=1e-12) and r.report()["delta"] == 0.0


def test_report_at_log_delta_answers_the_same_question_as_at_delta():
    r = Release(value=None, events=((PureDpEvent(0.2), 1), (GdpEvent(mu=0.5), 4)))
    at_delta = r.report(1e-5)
    at_log = r.report(log_delta=math.log(1e-5))
    assert at_log["epsilon"] == pytest.approx(at_delta["epsilon"], rel=1e-9)
    assert at_log["delta"] == pytest.approx(1e-5, rel=1e-9)
    # a delta below the float range only through log_delta: eps grows as delta shrinks
    assert r.report(log_delta=-800.0)["epsilon"] > at_delta["epsilon"]
