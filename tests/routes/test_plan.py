"""Oracle tests for dp_infer.routes.plan.

Oracles that do not share plan.py's code: the trajectory route's closed form (beta = mu* /
(Delta sqrt(K t / (2 gamma))), Delta = G / n times the float32 margin of dp_infer.privacy.float32_margin,
1.001 at these n, mu* the Gaussian profile's root in 60-digit mpmath), the step-size rules the
docstrings state (h M_U <= safety for ULA; h <= safety / sqrt(M_U) and
h <= safety / friction for the kinetic scheme; at least ``min_steps`` steps; the exact horizon;
the coarsest such step whose step count is a multiple of the thinning), and the plan's own
documented arithmetic (draws, burn-in, excess-risk bound p / beta, relaxation time 1 / (m_U h)).
"""

import json
import math

import numpy as np
import pytest

from dp_infer.losses import LossConstants
from dp_infer.routes.plan import RouteOption, SamplingPlan, explain_options, plan_trajectory, step_schedule
from dp_infer.privacy.events import GdpEvent, PureDpEvent
from tests.support.mp_oracles import gdp_mu_for_delta_mp

#: the planned sensitivity's float32 margin at n <= 33,554 (dp_infer.privacy.float32_margin)
F32 = 1.0 + 1e-3

CONSTS = LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=0.25, strong_convexity=0.1)


@pytest.mark.parametrize("kernel,friction,k,t", [("langevin", None, 1, 1.0), ("langevin", None, 3, 2.5),
                                                 ("underdamped", 4.0, 2, 1.0), ("underdamped", None, 1, 3.0)])
def test_beta_is_the_exact_gdp_calibration(kernel, friction, k, t):
    eps, delta, n = 1.0, 1e-5, 2000
    plan = plan_trajectory(CONSTS, n, 3, eps=eps, delta=delta, horizon=t, num_chains=k, kernel=kernel,
                           friction=friction)
    gamma = 1.0 if kernel == "langevin" else (1.0 if friction is None else friction)
    want = gdp_mu_for_delta_mp(eps, delta) / (CONSTS.grad_diff / n * F32 * math.sqrt(k * t / (2 * gamma)))
    assert plan.beta == pytest.approx(want, rel=1e-10)
    assert plan.sensitivity == CONSTS.grad_diff / n * F32
    # past n = 33,554 the margin grows as n 2^-25 (the float32 excess grows linearly in n)
    big = plan_trajectory(CONSTS, 10 ** 6, 3, eps=eps, delta=delta, horizon=t, num_chains=k, kernel=kernel,
                          friction=friction)
    assert big.sensitivity == CONSTS.grad_diff / 10 ** 6 * (1 + 10 ** 6 / 2 ** 25)
    assert plan.friction == (None if kernel == "langevin" else gamma)
    assert plan.event.mu == pytest.approx(gdp_mu_for_delta_mp(eps, delta), rel=1e-10)
    assert plan.spent()["eps"] <= eps and plan.spent()["delta"] == delta
    assert plan.route == "trajectory" and plan.num_chains == k and plan.kernel == kernel


def _coarsest_step(h0, horizon, thinning):
    """The documented step: the smallest step count >= horizon / h0 that is a multiple of thinning."""
    steps = thinning * math.ceil(math.ceil(horizon / h0) / thinning)
    return steps, horizon / steps


@pytest.mark.parametrize("kernel,friction,lam,safety,draws,min_steps", [
    ("langevin", None, 0.0, 0.5, 1000, 200), ("langevin", None, 2.0, 1.5, 7, 200),
    ("langevin", None, 0.0, 0.5, 10, 5000), ("underdamped", 0.3, 0.0, 0.5, 50, 10),
    ("underdamped", 40.0, 1.0, 0.8, 3, 10)])
def test_step_size_steps_and_thinning_follow_the_stated_rules(kernel, friction, lam, safety, draws, min_steps):
    horizon = 3.0
    plan = plan_trajectory(CONSTS, 500, 2, eps=2.0, delta=1e-6, horizon=horizon, kernel=kernel, friction=friction,
                           lam=lam, num_draws=draws, step_safety=safety, min_steps=min_steps, burn_in_fraction=0.3)
    M_U = plan.beta * CONSTS.smoothness + lam
    stable = safety / M_U if friction is None else min(safety / math.sqrt(M_U), safety / friction)
    h0 = min(stable, horizon / min_steps)
    thinning = max(1, math.ceil(horizon / h0) // draws)
    steps, h = _coarsest_step(h0, horizon, thinning)
    assert (plan.thinning, plan.num_steps) == (thinning, steps)
    assert plan.step_size == pytest.approx(h, rel=1e-15) and plan.step_size <= h0 * (1 + 1e-15)
    assert plan.num_steps >= min_steps and plan.num_steps % plan.thinning == 0
    assert plan.horizon == pytest.approx(horizon, rel=1e-15)
    # num_draws draws, or every step when the run has fewer steps than that
    assert plan.num_draws == plan.num_steps // plan.thinning >= min(draws, math.ceil(horizon / h0))
    assert plan.burn_in == int(0.3 * plan.num_draws)
    assert plan.excess_risk_bound == pytest.approx(2 / plan.beta, rel=1e-15)
    m_U = plan.beta * CONSTS.strong_convexity + lam
    assert plan.relaxation_time == pytest.approx(1 / (m_U * plan.step_size), rel=1e-14)
    assert plan.lam == lam and plan.n == 500 and plan.dim == 2 and plan.notes == ()


@pytest.mark.parametrize("M_U,friction,safety,draws,min_steps", [
    (3.0, None, 0.5, 10, 200), (1e4, None, 1.9, 1000, 1), (1e4, 2.0, 0.5, 7, 1), (0.01, 50.0, 0.5, 1, 3),
    (2e5, None, 0.5, 3, 5)])
def test_step_schedule_is_the_documented_rule(M_U, friction, safety, draws, min_steps):
    horizon = 2.0
    stable = safety / M_U if friction is None else min(safety / math.sqrt(M_U), safety / friction)
    h0 = min(stable, horizon / min_steps)
    thinning = max(1, math.ceil(horizon / h0) // draws)
    steps, h = _coarsest_step(h0, horizon, thinning)
    got = step_schedule(M_U, horizon=horizon, num_draws=draws, friction=friction, safety=safety,
                        min_steps=min_steps)
    assert got[1:] == (steps, thinning) and got[0] == pytest.approx(h, rel=1e-15)
    assert got[0] <= h0 * (1 + 1e-15) and got[0] * got[1] == pytest.approx(horizon, rel=1e-15)


@pytest.mark.parametrize("M_U", [math.inf, 1.7e308, 1e308])
def test_step_schedule_without_a_finite_step_count_says_inf(M_U):
    # 1e308: the step 5e-309 is subnormal and horizon / step overflows; inf: no step at all
    assert step_schedule(M_U, horizon=1.0, num_draws=10) == (0.0, math.inf, 1)
    # the documented defaults: safety 0.5 and at least 200 steps
    assert step_schedule(1e-3, horizon=1.0, num_draws=1000) == (1 / 200, 200, 1)
    assert step_schedule(1e3, horizon=1.0, num_draws=1000) == (1 / 2000, 2000, 2)
    big = step_schedule(1e300, horizon=1.0, num_draws=10)[1]  # still finite: an int
    assert isinstance(big, int) and big == pytest.approx(2e300, rel=1e-15)


@pytest.mark.parametrize("lam,consts", [(1e308, CONSTS), (0.0, LossConstants(lipschitz=1.0, grad_diff=2.0,
                                                                              smoothness=1e308))])
def test_a_curvature_that_overflows_is_refused_by_name(lam, consts):
    with pytest.raises(ValueError, match="beta \\* M \\+ lam .* lower lam or the declared smoothness M"):
        plan_trajectory(consts, 500, 2, eps=1.0, delta=1e-5, lam=lam)


def test_a_plan_without_strong_convexity_says_it_has_no_mixing_guarantee():
    flat = LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=0.25, strong_convexity=0.0)
    plan = plan_trajectory(flat, 500, 2, eps=1.0, delta=1e-5)
    assert plan.relaxation_time is None and len(plan.notes) == 1 and "no mixing guarantee" in plan.notes[0]
    with_lam = plan_trajectory(flat, 500, 2, eps=1.0, delta=1e-5, lam=0.5)
    assert with_lam.notes == () and with_lam.relaxation_time == pytest.approx(1 / (0.5 * with_lam.step_size))
    assert "note: " + plan.notes[0] in plan.explain().splitlines()


def test_log_delta_gives_the_same_plan_and_is_recorded():
    a = plan_trajectory(CONSTS, 500, 2, eps=1.0, delta=1e-7)
    b = plan_trajectory(CONSTS, 500, 2, eps=1.0, log_delta=math.log(1e-7))
    assert b.beta == pytest.approx(a.beta, rel=1e-12) and b.upstream_log_delta == math.log(1e-7)
    assert b.delta == pytest.approx(1e-7, rel=1e-15) and a.upstream_log_delta == math.log(1e-7)
    tiny = plan_trajectory(CONSTS, 500, 2, eps=1.0, log_delta=-800.0)  # below float's delta
    assert tiny.delta == 0.0 and tiny.upstream_log_delta == -800.0 and 0 < tiny.beta < a.beta


@pytest.mark.parametrize("kwargs,name", [
    (dict(burn_in_fraction=1.0), "burn_in_fraction"), (dict(burn_in_fraction=-0.1), "burn_in_fraction"),
    (dict(step_safety=2.0), "step_safety"), (dict(step_safety=0.0), "step_safety"),
    (dict(kernel="hmc"), "kernel"), (dict(friction=1.0), "friction"),
    (dict(kernel="underdamped", friction=0.0), "friction"), (dict(log_delta=0.0, delta=None), "log_delta"),
    (dict(log_delta=-math.inf, delta=None), "log_delta"), (dict(log_delta=math.nan, delta=None), "log_delta"),
    (dict(log_delta=-3.0), "delta"), (dict(delta=None), "delta"), (dict(eps=0.0), "eps"),
    (dict(horizon=0.0), "horizon"), (dict(num_chains=0), "num_chains"), (dict(lam=-1.0), "lam"),
    (dict(num_draws=0), "num_draws"),
])
def test_bad_inputs_are_refused_by_name(kwargs, name):
    args = dict(eps=1.0, delta=1e-5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        plan_trajectory(CONSTS, 500, 2, **args)


def test_edges_of_the_allowed_ranges_are_accepted():
    p = plan_trajectory(CONSTS, 500, 2, eps=1.0, delta=1e-5, burn_in_fraction=0.0, step_safety=1.99)
    assert p.burn_in == 0 and p.step_size * p.beta * CONSTS.smoothness <= 1.99
    with pytest.raises(ValueError, match="smoothness"):
        plan_trajectory(LossConstants(lipschitz=1.0, grad_diff=2.0), 500, 2, eps=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="grad_diff"):
        plan_trajectory(LossConstants(lipschitz=1.0, grad_diff=math.inf, smoothness=1.0), 500, 2, eps=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="n must"):
        plan_trajectory(CONSTS, 0, 2, eps=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="dim must"):
        plan_trajectory(CONSTS, 500, 0, eps=1.0, delta=1e-5)


def test_assumptions_name_the_constants_and_n():
    p = plan_trajectory(CONSTS, 777, 2, eps=1.0, delta=1e-5)
    text = " ".join(p.assumptions)
    assert "G = 2" in text and "n = 777" in text
    d = p.as_dict()
    assert d["assumptions"] == list(p.assumptions) + list(p.event.assumptions)


# --------------------------------------------------------------------------- the plan object


def _pure_plan(eps_event=0.7, delta=0.0, event=None, **kw):
    return SamplingPlan(route="pure", eps=1.0, delta=delta, beta=2.0, lam=0.0, step_size=0.1, num_steps=30,
                        num_chains=1, kernel="langevin", friction=None, thinning=4, burn_in=1, n=10, dim=1,
                        sensitivity=0.1, event=event or PureDpEvent(eps_event), **kw)


def test_spent_of_a_pure_plan_is_its_event_and_other_plans_ask_the_accountant():
    p = _pure_plan(0.7)
    assert p.spent() == {"eps": 0.7, "delta": 0.0}
    assert p.horizon == pytest.approx(3.0, rel=1e-15) and p.num_draws == 7
    with pytest.raises(ValueError, match="PureDpEvent"):
        _pure_plan(event=GdpEvent(0.5)).spent()
    g = _pure_plan(event=GdpEvent(0.5), delta=1e-5)
    assert g.spent()["eps"] == g.accountant().get_epsilon(1e-5) and g.spent()["delta"] == 1e-5
    assert g.accountant().ledger == ((GdpEvent(0.5), 1),)


def test_as_dict_is_json_with_every_field_and_the_derived_numbers():
    opt = RouteOption("pure", True, "", beta=2.0, excess_risk_bound=0.5, releases="draws", assumptions=("a",),
                      details={"x": np.float32(0.5), "k": object})
    p = _pure_plan(notes=("n1",), options=(opt,))
    d = p.as_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["horizon"] == p.horizon and d["num_draws"] == 7 and d["event"] == p.event.to_dict()
    assert d["mu"] is None and d["eps_spent"] == 0.7 and d["notes"] == ["n1"] and d["assumptions"] == list(p.event.assumptions)
    assert d["routes_considered"] == [{"route": "pure", "feasible": True, "reason": "", "beta": 2.0,
                                       "excess_risk_bound": 0.5, "releases": "draws", "assumptions": ["a"],
                                       "details": {"x": 0.5, "k": str(object)}}]
    assert "event" not in _pure_plan().as_dict()["event"] and "routes_considered" not in _pure_plan().as_dict()
    assert _pure_plan(event=GdpEvent(0.5), delta=1e-5).as_dict()["mu"] == 0.5


def test_explain_marks_the_chosen_route_and_gives_reasons_for_the_others():
    opts = (RouteOption("pure", True, "", beta=2.0, excess_risk_bound=0.123456, releases="all draws"),
            RouteOption("stationary", False, "needs strong convexity"))
    p = _pure_plan(notes=("careful",), options=opts)
    lines = explain_options(p).splitlines()
    assert lines[0] == "target: eps = 1, delta = 0; n = 10, dim = 1"
    assert lines[1].split() == ["route", "feasible", "beta", "risk", "bound", "releases", "/", "reason"]
    assert lines[2].startswith("*pure") and lines[2].split()[1:5] == ["True", "2", "0.1235", "all"]
    assert lines[3].startswith(" stationary") and lines[3].split()[1:4] == ["False", "-", "-"]
    assert lines[3].endswith("needs strong convexity") and lines[4] == "note: careful" and len(lines) == 5
    assert p.explain() == explain_options(p)


def test_documented_defaults_and_assumptions():
    # the signature's documented defaults: horizon 1, one chain, 1000 draws, at least 200 steps
    default = plan_trajectory(CONSTS, 500, 2, eps=1.0, delta=1e-5)
    explicit = plan_trajectory(CONSTS, 500, 2, eps=1.0, delta=1e-5, horizon=1.0, num_chains=1, num_draws=1000,
                               min_steps=200, kernel="langevin", lam=0.0, burn_in_fraction=0.5, step_safety=0.5)
    assert default == explicit
    # 2000 steps (min_steps binds): the default 1000 draws thin by exactly 2
    soft = LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=1e-9)
    long = plan_trajectory(soft, 500, 2, eps=1.0, delta=1e-5, min_steps=2000)
    assert (long.num_steps, long.thinning, long.num_draws) == (2000, 2, 1000)
    tiny = plan_trajectory(LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=1e-9), 500, 2, eps=1.0,
                           delta=1e-5, num_draws=10**6)
    assert tiny.num_steps == 200 and tiny.num_draws == 200  # min_steps binds, every step a draw
    # the report states what the guarantee assumes, as a reviewer reads it
    assert default.assumptions[2:] == ("sensitivity G / n times 1 + 0.001 for the chain's float32 rounding "
                                       "(dp_infer.privacy.float32_margin)",
                                       "initial point, beta, step size, horizon and chains are data independent",
                                       "no Metropolis correction and no warmup adaptation")
    flat = plan_trajectory(LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=0.25), 500, 2, eps=1.0, delta=1e-5)
    assert flat.notes == ("no strong convexity declared (lam = 0, loss m = 0): the privacy guarantee holds, but "
                          "there is no mixing guarantee; check R-hat/ESS",)


def test_as_dict_copies_every_field_but_the_event_and_options():
    opt = RouteOption("pure", True, "")
    p = _pure_plan(options=(opt,))
    d = p.as_dict()
    names = {f for f in SamplingPlan.__dataclass_fields__} - {"event", "options"}
    assert names <= set(d) and "options" not in d
    assert set(d) - names == {"horizon", "num_draws", "event", "mu", "eps_spent", "routes_considered"}
    assert (d["route"], d["beta"], d["num_steps"], d["thinning"], d["kernel"], d["friction"]) == \
        ("pure", 2.0, 30, 4, "langevin", None)
