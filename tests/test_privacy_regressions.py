"""Regressions found by mutation testing and by edge-regime probing (issue 19), each checked
against an oracle that does not share the code under test: closed forms, the exact Gaussian
profile, or a second construction of the same object.

* ``Accountant.report`` at eps = 0 for a tiny pure event crashed inside dp-accounting's
  RDP-to-delta conversion (``log1p(-exp(-r))`` of r ~ 1e-18); that route now gives no bound and
  the others answer. Oracle: a pure eps0 event's exact delta at eps = 0 is tanh(eps0 / 2).
* ``get_epsilon`` with a subnormal TV error raised OverflowError (expm1 of ~730); and returned
  eps = inf when every feasible eps lay in the last 1/128 of its search range (the grid stopped
  one cell short). Oracle: the accountant's own delta at the returned eps, and the pure event's
  eps0 (feasible by construction).
* ``path_delta(method="rdp_grid")`` returned delta = 0 (log -inf) when dp-accounting's float delta
  underflowed below 1e-308. Oracle: the exact Gaussian profile (``method="gdp"``) is a lower bound
  on every valid conversion.
* ``calibrate`` crashed (``cannot convert float NaN to integer``) on a NaN or infinite G instead of
  a one-line error.
* ``Accountant`` raised OverflowError (inside dp-accounting's PLD construction, e^eps) for a pure
  or approximate event with eps > ~709.8 and for a Gaussian part with mu > ~3e4; the PLD route now
  gives no bound there and the others answer. Oracle: randomized response / the (eps0, delta0)
  mechanism's exact eps in 50-digit mpmath (a lower bound on any valid report), and the Gaussian
  part alone (a composition leaks at least as much as its part).
* ``losses.with_l2`` kept the old value range (which includes 0.5 l2 r^2 over the domain): a larger
  l2 under-reported the pure-eps route's sensitivity. Oracle: the same loss built with that l2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_infer import losses
from dp_infer.routes.calibrate import calibrate
from dp_infer.domains import L2Ball
from dp_infer.losses import LossConstants
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import ApproxDpEvent, GdpEvent, PureDpEvent
from dp_infer.privacy.path import path_delta


@pytest.mark.parametrize("eps0", [1e-9, 1e-12, 1e-15])
def test_report_at_eps_zero_of_a_tiny_pure_event_bounds_the_exact_delta(eps0):
    rep = Accountant([PureDpEvent(eps0)]).report(eps=0.0)
    exact = math.tanh(eps0 / 2.0)  # TV distance of the worst pure-eps0 pair = its delta at eps = 0
    assert exact <= rep["delta"] <= 2.0 * exact + 1e-300  # never below; RDP->DP costs at most sqrt(2) here
    assert rep["routes_log_delta"]["rdp_dp_accounting"] == 0.0  # that route gave no bound, none invented


def test_epsilon_with_a_subnormal_tv_error_is_the_tv_free_epsilon():
    delta = 1e-5
    with_tv = Accountant([GdpEvent(1.0, tv_error=5e-324)])
    eps = with_tv.get_epsilon(delta)
    assert math.isfinite(eps)
    assert with_tv.get_delta(eps) <= delta  # the reported eps meets the target, TV slack included
    # a TV error of 5e-324 moves delta by (1 + e^eps) 5e-324: the eps of the exact Gaussian profile
    assert eps == pytest.approx(Accountant([GdpEvent(1.0)]).get_epsilon(delta), rel=1e-9)


@pytest.mark.parametrize("margin", [1.001, 1.005, 1.0075])
def test_epsilon_found_when_feasible_only_in_the_last_cell_of_the_search(margin):
    # pure eps0 = 1 plus TV tau: (1 + e^eps) tau = delta at eps = log(margin e) ~ 1 + (margin - 1), so
    # the feasible eps lie in [~1, eps_hi): within the last 1/128 of [0, eps_hi] for these margins
    delta = 1e-5
    eps_hi = 1.0 + math.log(margin)
    tau = delta / (1.0 + math.exp(eps_hi))
    acc = Accountant([PureDpEvent(1.0, tv_error=tau)])
    eps = acc.get_epsilon(delta)
    assert eps <= 1.0  # eps = eps0 is feasible: privacy delta 0 and TV (1 + e) tau < delta
    assert acc.get_delta(eps) <= delta


@pytest.mark.parametrize("time", [1e-1, 1e-2, 1e-3, 1e-4, 1e-5])
def test_rdp_grid_path_delta_never_below_the_exact_gaussian_profile(time):
    ld_grid = path_delta(1.0, 1.0, time, 1.0, method="rdp_grid", log=True)
    ld_exact = path_delta(1.0, 1.0, time, 1.0, method="gdp", log=True)
    assert math.isfinite(ld_grid)
    assert ld_grid >= ld_exact


def test_rdp_grid_path_delta_is_continuous_across_the_float_underflow():
    # log delta of the grid conversion is monotone in the horizon and has no jump to -inf where
    # dp-accounting's float delta underflows (between t = 1e-2 and 1e-3 for eps = 1)
    ts = np.geomspace(1e-1, 1e-4, 40)
    lds = [path_delta(1.0, 1.0, float(t), 1.0, method="rdp_grid", log=True) for t in ts]
    assert all(np.isfinite(lds))
    assert all(b <= a + 1e-9 for a, b in zip(lds, lds[1:]))


@pytest.mark.parametrize("G", [math.nan, math.inf, 0.0, -1.0])
def test_calibrate_refuses_a_loss_without_a_finite_positive_g_in_one_line(G):
    with pytest.raises(ValueError, match=r"grad_diff = .*must be a finite number > 0") as e:
        calibrate(LossConstants(lipschitz=1.0, grad_diff=G, smoothness=0.25), 1000, 3, eps=1.0, delta=1e-5)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("make", [
    lambda l2: losses.logistic(row_norm=1.0, l2=l2, domain=L2Ball(dim=3, radius=2.0)),
    lambda l2: losses.huber(row_norm=1.0, l2=l2, domain=L2Ball(dim=3, radius=2.0)),
])
@pytest.mark.parametrize("l2_from, l2_to", [(0.0, 0.5), (0.5, 0.0), (0.1, 2.0)])
def test_with_l2_gives_the_constants_of_the_loss_built_with_that_l2(make, l2_from, l2_to):
    got = losses.with_l2(make(l2_from), l2_to).constants
    want = make(l2_to).constants
    for field in ("lipschitz", "grad_diff", "smoothness", "strong_convexity", "value_range"):
        g, w = getattr(got, field), getattr(want, field)
        assert (g is None and w is None) or g == pytest.approx(w, rel=1e-12, abs=1e-12), field


def test_events_beyond_float_range_of_e_to_the_eps_are_accounted_not_a_crash():
    import mpmath as mp

    from dp_infer.privacy import conversions as C

    delta = 1e-5
    with mp.workdps(50):
        d, e0, d0 = mp.mpf(delta), mp.mpf(1000), mp.mpf("1e-6")
        rr = 1000 + mp.log(1 - d - d * mp.exp(-e0))  # randomized response: delta(eps) = (e^e0 - e^eps) / (1 + e^e0)
        approx_exact = mp.log(mp.exp(e0) - (d - d0) / (1 - d0) * (1 + mp.exp(e0)))
    e = Accountant([PureDpEvent(1000.0)]).get_epsilon(delta)
    assert rr <= e <= 1000.0
    e = Accountant([ApproxDpEvent(1000.0, 1e-6)]).get_epsilon(delta)
    assert approx_exact <= e <= 1000.0
    rep = Accountant([PureDpEvent(1000.0)]).report(eps=0.0)
    assert rep["log_delta_privacy"] == 0.0 and rep["routes_log_delta"]["pld"] == 0.0
    # a huge Gaussian part composed with a pure event: finite, and at least the Gaussian part's eps
    e = Accountant([GdpEvent(1e5), PureDpEvent(1.0)]).get_epsilon(delta)
    assert C.gdp_epsilon(1e5, delta) <= e < math.inf
