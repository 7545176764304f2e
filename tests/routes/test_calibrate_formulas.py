"""Oracle tests for dp_infer.calibrate.

Oracles from the documented formulas of each route (module and function docstrings):
* default_regulariser: lam* = (Delta / R) sqrt(p / (2 rho)), Delta = G / n;
* last_iterate: h = 1 / (beta (m + M)), ceil(relaxations / (h beta m)) steps, lam = beta lam_rel,
  risk bound p / beta + lam_rel R^2 / 2, and the event's eps within the target (the accountant)
  and within 1e-6 of it (the closed-form beta spends the whole target);
* stationary: tau = 0.1 delta / (1 + e^eps) by default, Vempala-Wibisono's step and step count,
  the start law N(0, I / M_U);
* pure: eps' = f eps, the Laplace scale 1e-3 diam by default, the exponential mechanism's
  beta = eps n / (2 L diam) for reference;
* calibrate: every option reported, the feasible one with the smallest risk bound chosen.
"""

import math

import pytest

from dp_infer.routes.calibrate import ROUTES, calibrate, default_regulariser
from dp_infer.domains import Box, L2Ball
from dp_infer.losses import LossConstants
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.conversions import linear_rdp_rho
from tests.support.mp_oracles import gdp_total_delta_mp

C = LossConstants(lipschitz=2.0, grad_diff=2.0, smoothness=0.5, strong_convexity=0.0)
N, DIM = 5000, 4


def _opt(plan, route):
    return next(o for o in plan.options if o.route == route)


def test_default_regulariser_is_the_closed_form():
    rho = 0.3
    assert default_regulariser(C, N, DIM, rho, 7.0) == pytest.approx(2.0 / N / 7.0 * math.sqrt(DIM / (2 * rho)),
                                                                      rel=1e-15)


@pytest.mark.parametrize("lam_rel,k,relax", [(0.01, 1, 10.0), (0.2, 3, 4.0)])
def test_last_iterate_plan_follows_its_formulas(lam_rel, k, relax):
    eps, delta, R = 1.0, 1e-6, 5.0
    p = calibrate(C, N, DIM, eps=eps, delta=delta, route="last_iterate", lam_rel=lam_rel, num_chains=k,
                  relaxations=relax, theta_scale=R)
    m, M = C.strong_convexity + lam_rel, C.smoothness + lam_rel
    s = C.grad_diff / N * 1.001  # the float32 margin at this n (dp_infer.privacy.float32_margin)
    assert p.sensitivity == s and p.num_chains == k and p.route == p.release == "last_iterate"
    want_beta = 4 * m * linear_rdp_rho(eps, delta) / (k * s * s * (2 - m / (m + M)))
    assert p.beta == pytest.approx(want_beta, rel=2e-9) and p.beta <= want_beta
    assert p.step_size == pytest.approx(1 / (p.beta * (m + M)), rel=1e-15)
    assert p.num_steps == math.ceil(relax / (p.step_size * p.beta * m)) == p.thinning and p.burn_in == 0
    assert p.lam == pytest.approx(p.beta * lam_rel, rel=1e-15)
    assert p.excess_risk_bound == pytest.approx(DIM / p.beta + lam_rel * R * R / 2, rel=1e-14)
    assert p.relaxation_time == pytest.approx(1 / (p.step_size * p.beta * m), rel=1e-14)
    # the beta is the K -> inf bound's: a finite run spends a little less (stated slack 2% at 4 relaxations)
    spent = Accountant([p.event]).get_epsilon(delta)
    assert eps * 0.98 <= spent <= eps * (1 + 1e-9)
    o = _opt(p, "last_iterate")
    assert o.feasible and o.beta == p.beta and o.details["lam_rel"] == lam_rel and o.details["num_steps"] == p.num_steps
    assert p.notes[-1] == "chosen: forced by the caller" and f"{relax:g} relaxation times" in p.notes[0]
    assert p.assumptions == (f"loss-level strong convexity m = {m:g} from the L2 regulariser lam_rel = {lam_rel:g} "
                             "(U = beta (L + lam_rel/2 |theta|^2))", f"loss-level smoothness M = {M:g} (declared)",
                             "sensitivity G / n times 1 + 0.001 for the chain's float32 rounding "
                             "(dp_infer.privacy.float32_margin)")
    assert o.assumptions == p.assumptions and p.sampling_error_tv is None
    assert o.reason == "privacy of the final iterate stays bounded as the chain runs (strongly convex potential)"
    assert o.releases == f"the last iterate of each of {k} chain(s) only" and o.excess_risk_bound == p.excess_risk_bound
    assert o.details == {"rho": p.event.rho, "step_size": p.step_size, "num_steps": p.num_steps, "lam_rel": lam_rel}


def test_routes_that_need_a_contraction_refuse_clipped_losses_and_missing_constants():
    clipped = LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=0.5, strong_convexity=0.1, clipped=True)
    p = calibrate(clipped, N, DIM, eps=1.0, delta=1e-5)
    assert p.route == "trajectory"
    assert "clips per-example gradients" in _opt(p, "last_iterate").reason
    assert "drift is the loss gradient" in _opt(p, "stationary").reason
    for route in ("last_iterate", "stationary"):
        with pytest.raises(ValueError, match="clips"):
            calibrate(clipped, N, DIM, eps=1.0, delta=1e-5, route=route)
    no_m = calibrate(C, N, DIM, eps=1.0, delta=1e-5, lam_rel=0.0)
    assert "strong convexity" in _opt(no_m, "last_iterate").reason and "strong convexity" in _opt(no_m, "stationary").reason
    assert [o.route for o in no_m.options] == ["trajectory", "last_iterate", "stationary", "pure"]
    no_M = LossConstants(lipschitz=1.0, grad_diff=2.0, strong_convexity=0.1)
    with pytest.raises(ValueError, match="smoothness M"):
        calibrate(no_M, N, DIM, eps=1.0, delta=1e-5, route="last_iterate")
    with pytest.raises(ValueError, match="smoothness M"):
        calibrate(no_M, N, DIM, eps=1.0, delta=1e-5, route="stationary")


def test_stationary_route_follows_the_vempala_wibisono_bound():
    # a loose target (delta = 0.1, tau = 5e-3): the bound needs ~8 log(KL0 / tau^2) / tau^2 steps
    eps, delta, lam_rel, R, tau = 2.0, 0.1, 0.5, 1.0, 5e-3
    big = LossConstants(lipschitz=1.0, grad_diff=1.0, smoothness=2.0, strong_convexity=1.0)
    p = calibrate(big, 10, 1, eps=eps, delta=delta, route="stationary", lam_rel=lam_rel, theta_scale=R,
                  tv_target=tau, max_steps=1e8)
    m = 1.0 + lam_rel
    M_U, c = p.beta * (2.0 + lam_rel), p.beta * m
    h = min(c / (4 * M_U ** 2), c * tau ** 2 / (8 * 1 * M_U ** 2))
    kl0 = 0.5 * math.log(M_U / c) + 0.5 * M_U * R * R
    steps = math.log(max(kl0, tau ** 2) / tau ** 2) / (c * h)
    assert p.step_size == pytest.approx(h, rel=1e-14) and p.num_steps == math.ceil(steps)
    assert p.sampling_error_tv == tau and p.event.tv_error == tau
    assert p.init_law == "gaussian" and p.init_scale == pytest.approx(1 / math.sqrt(M_U), rel=1e-15)
    assert p.lam == pytest.approx(p.beta * lam_rel) and p.num_chains == 1 and p.thinning == p.num_steps
    assert p.excess_risk_bound == pytest.approx(1 / p.beta + lam_rel * R * R / 2, rel=1e-14)
    # the target met exactly: delta_mu(eps) + (1 + e^eps) tau in 200-digit arithmetic, no tolerance
    assert gdp_total_delta_mp(eps, p.event.mu, tau) <= delta
    # without tv_target: tau = 0.1 delta / (1 + e^eps); too many steps: infeasible, with the count
    q = calibrate(big, 10, 1, eps=eps, delta=delta, lam_rel=lam_rel, max_steps=10)
    o = _opt(q, "stationary")
    assert not o.feasible and o.details["tv_target"] == pytest.approx(0.1 * delta / (1 + math.exp(eps)), rel=1e-15)
    assert "max_steps = 10" in o.reason and o.details["num_steps_needed"] > 10
    with pytest.raises(ValueError, match="unprojected"):
        calibrate(big, 10, 1, eps=eps, delta=delta, route="stationary", lam_rel=lam_rel, domain=Box([-1.0], [1.0]))


def test_pure_route_splits_eps_and_reports_the_exponential_mechanism():
    dom = L2Ball(DIM, 3.0)
    p = calibrate(C, N, DIM, eps=2.0, delta=None, domain=dom, eps_prime_fraction=0.25, omega=0.05)
    o = _opt(p, "pure")
    assert p.route == "pure" and p.delta == 0.0 and p.eps == 2.0 and p.spent()["eps"] == pytest.approx(2.0, rel=1e-12)
    assert o.details["eps_prime"] == pytest.approx(0.5) and o.details["upstream_eps"] == pytest.approx(1.5)
    assert o.details["laplace_scale"] == pytest.approx(1e-3 * dom.diameter, rel=1e-12) and o.details["omega"] == 0.05
    assert o.details["exponential_mechanism_beta_exact_sampler_only"] == pytest.approx(2.0 * N / (2 * 2.0 * 6.0))
    assert p.purification["omega"] == 0.05 and p.release == "purified_mean"
    assert [x.route for x in p.options] == ["pure", "trajectory", "last_iterate", "stationary"]
    assert all("pure eps" in x.reason for x in p.options[1:])
    s = calibrate(C, N, DIM, eps=2.0, delta=0, domain=dom, purification_scale=0.5)
    assert _opt(s, "pure").details["laplace_scale"] == pytest.approx(0.5, rel=1e-12)
    inf_l = LossConstants(lipschitz=math.inf, grad_diff=2.0, smoothness=0.5)
    assert _opt(calibrate(inf_l, N, DIM, eps=2.0, domain=dom), "pure").details[
        "exponential_mechanism_beta_exact_sampler_only"] is None
    with pytest.raises(ValueError, match="bounded domain"):
        calibrate(C, N, DIM, eps=2.0)


def test_auto_chooses_the_smallest_risk_bound_and_the_trajectory_regulariser_is_opt_in():
    strong = LossConstants(lipschitz=2.0, grad_diff=2.0, smoothness=0.5, strong_convexity=0.05)
    p = calibrate(strong, N, DIM, eps=1.0, delta=1e-5)
    feasible = [o for o in p.options if o.feasible]
    assert p.route == min(feasible, key=lambda o: o.excess_risk_bound).route
    assert p.notes[-1].startswith("chosen: the feasible route with the smallest excess-risk bound")
    # a long horizon costs the trajectory (p / beta grows like sqrt(t)), not the last iterate: listed second, chosen
    long = calibrate(strong, N, DIM, eps=1.0, delta=1e-5, horizon=1000.0)
    assert [o.route for o in long.options if o.feasible][:2] == ["trajectory", "last_iterate"]
    assert long.route == "last_iterate" and long.excess_risk_bound < _opt(long, "trajectory").excess_risk_bound
    assert _opt(p, "trajectory").plan.lam == 0.0
    assert [o.route for o in p.options] == ["trajectory", "last_iterate", "stationary", "pure", "discretised_renyi"]
    t = calibrate(strong, N, DIM, eps=1.0, delta=1e-5, route="trajectory", lam_rel=0.1)
    assert t.lam == pytest.approx(0.1 * t.beta, rel=1e-15)
    rho = linear_rdp_rho(1.0, 1e-5) / 2
    two = calibrate(strong, N, DIM, eps=1.0, delta=1e-5, num_chains=2, route="last_iterate")
    assert _opt(two, "last_iterate").details["lam_rel"] == pytest.approx(default_regulariser(strong, N, DIM, rho, 10.0))


@pytest.mark.parametrize("kwargs,name", [
    (dict(eps=0.0), "eps"), (dict(delta=1.5), "delta"), (dict(n=0), "n"), (dict(dim=0), "dim"),
    (dict(domain="ball"), "Domain or None, got str"), (dict(domain=Box([0.0], [1.0])), "domain.dim"),
    (dict(theta_scale=0.0), "theta_scale"), (dict(horizon=0.0), "horizon"), (dict(num_chains=0), "num_chains"),
    (dict(num_draws=0), "num_draws"), (dict(relaxations=0.0), "relaxations"), (dict(max_steps=0.0), "max_steps"),
    (dict(tv_target=0.0), "tv_target"), (dict(tv_target=1.0), "tv_target"), (dict(lam_rel=-1.0), "lam_rel"),
    (dict(kernel="hmc"), "kernel"), (dict(friction=1.0), "friction"), (dict(kernel="underdamped", friction=0.0), "friction"),
    (dict(purification_scale=0.0), "purification_scale"), (dict(route="fast"), "route"),
    (dict(delta=None, route="trajectory"), "needs route 'pure'"), (dict(route="pure"), "releases pure eps-DP"),
    (dict(eps_prime_fraction=1.0), "eps_prime_fraction"), (dict(eps_prime_fraction=0.0), "eps_prime_fraction"),
    (dict(omega=0.0), "omega"), (dict(omega=1.5), "omega"),
])
def test_bad_inputs_are_refused_by_name_before_any_route(kwargs, name):
    args = dict(n=N, dim=DIM, eps=1.0, delta=1e-5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        calibrate(C, **args)


def test_edges_and_loss_types():
    assert ROUTES == ("trajectory", "last_iterate", "stationary", "pure")
    with pytest.raises(ValueError, match="PerExampleLoss or LossConstants"):
        calibrate({"G": 2.0}, N, DIM, eps=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="grad_diff"):
        calibrate(LossConstants(lipschitz=1.0, grad_diff=math.inf, smoothness=1.0), N, DIM, eps=1.0, delta=1e-5)
    p = calibrate(C, N, DIM, eps=1.0, delta=1e-5, omega=1.0, tv_target=0.5, kernel="underdamped")
    assert p.kernel == "underdamped" and p.friction == 1.0
    with pytest.raises(ValueError, match="no feasible route"):
        calibrate(LossConstants(lipschitz=1.0, grad_diff=2.0), N, DIM, eps=1.0, delta=1e-5)


def test_every_option_reports_its_feasibility_reason_and_numbers():
    strong = LossConstants(lipschitz=2.0, grad_diff=2.0, smoothness=0.5, strong_convexity=0.05)
    p = calibrate(strong, N, DIM, eps=1.0, delta=1e-5, num_draws=7)
    t = _opt(p, "trajectory")
    assert t.feasible and t.reason == "anytime guarantee for the whole path; no convexity needed for privacy"
    assert t.beta == t.plan.beta and t.excess_risk_bound == t.plan.excess_risk_bound
    assert t.details == {"mu": t.plan.event.mu, "horizon": t.plan.horizon, "num_steps": t.plan.num_steps}
    assert t.releases == f"the full trajectory of 1 chain(s) ({t.plan.num_draws} draws each)"
    assert t.assumptions == ("convexity only for the p/beta bound and mixing (not for privacy)",)
    assert t.plan.num_draws == t.plan.num_steps // t.plan.thinning and t.plan.thinning > 1  # 7 draws asked
    li = _opt(p, "last_iterate")
    assert li.plan.eps == 1.0 and li.plan.delta == 1e-5
    # no smoothness: every route infeasible, each saying why
    none = LossConstants(lipschitz=1.0, grad_diff=2.0, strong_convexity=0.1)
    with pytest.raises(ValueError) as info:
        calibrate(none, N, DIM, eps=1.0, delta=1e-5)
    msg = str(info.value)
    assert "trajectory: the loss declares no smoothness M" in msg
    assert "last_iterate: needs a declared smoothness M (step-size condition)" in msg
    assert "stationary: needs a declared smoothness M for the sampler's TV bound" in msg
    clipped = LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=0.5, strong_convexity=0.1, clipped=True)
    o = _opt(calibrate(clipped, N, DIM, eps=1.0, delta=1e-5), "last_iterate")
    assert (o.route, o.feasible, o.plan) == ("last_iterate", False, None)
    flat = _opt(calibrate(C, N, DIM, eps=1.0, delta=1e-5, lam_rel=0.0), "last_iterate")
    assert (flat.feasible, flat.reason) == (False, "needs strong convexity: declare an L2 regulariser (lam_rel > 0)")


def test_pure_options_report_what_they_release_and_pass_the_run_choices_on():
    dom = L2Ball(DIM, 3.0)
    p = calibrate(C, N, DIM, eps=2.0, domain=dom, horizon=2.0, num_chains=2, num_draws=5)
    o = _opt(p, "pure")
    assert (p.horizon, p.num_chains) == (pytest.approx(2.0, rel=1e-15), 2) and p.num_draws >= 5
    assert p.num_draws == p.num_steps // p.thinning and p.thinning > 1
    assert o.reason == "pure eps-DP on a bounded domain via purification of an (eps, delta) trajectory"
    assert o.releases == "one purified posterior-mean estimate (draws themselves are not released)"
    assert o.beta == p.beta and o.assumptions == p.event.assumptions
    assert set(o.details) == {"upstream_eps", "upstream_log_delta", "eps_prime", "laplace_scale", "omega",
                              "exponential_mechanism_beta_exact_sampler_only"}
    assert o.details["upstream_log_delta"] == p.upstream_log_delta
    assert p.notes[-2].startswith("upstream trajectory at (1.8, exp(")
    assert calibrate(C, N, DIM, eps=2.0, domain=dom, route="pure").route == "pure"
    with pytest.raises(ValueError, match=r"pure: needs a bounded domain \(L2Ball or Box\) for purification"):
        calibrate(C, N, DIM, eps=2.0)
    with pytest.raises(ValueError, match="pure: the loss declares no smoothness M"):
        calibrate(LossConstants(lipschitz=1.0, grad_diff=2.0), N, DIM, eps=2.0, domain=dom)


def test_underdamped_trajectory_keeps_its_friction_and_a_long_last_iterate_run_spends_its_target():
    t = calibrate(C, N, DIM, eps=1.0, delta=1e-5, route="trajectory", kernel="underdamped", friction=3.0)
    assert t.kernel == "underdamped" and t.friction == 3.0
    assert _opt(t, "trajectory").details["mu"] == pytest.approx(t.event.mu)
    # many relaxation times: the finite run's spend approaches the K -> inf bound from below
    p = calibrate(C, N, DIM, eps=1.0, delta=1e-6, route="last_iterate", lam_rel=0.05, relaxations=60.0)
    spent = Accountant([p.event]).get_epsilon(1e-6)
    assert 1.0 - 1e-8 <= spent <= 1.0 + 1e-9


# -------------------------------------------------------------- the stationary route in every regime

STAT = dict(eps=2.0, delta=0.1, lam_rel=0.5, theta_scale=3.0, tv_target=5e-3)  # R != 1: R^2 != R^3 != 1/R^2


def _stat_constants(G):
    return LossConstants(lipschitz=1.0, grad_diff=G, smoothness=2.0, strong_convexity=1.0)


@pytest.mark.parametrize("G,n,dim", [(1.0, 10, 3), (1.0, 10000, 2), (1000.0, 1, 1)])  # beta ~ 2e2, 2e8, 2e-6
def test_stationary_plan_and_option_follow_the_documented_bound_in_every_regime(G, n, dim):
    eps, delta, lam_rel, R, tau = (STAT[k] for k in ("eps", "delta", "lam_rel", "theta_scale", "tv_target"))
    p = calibrate(_stat_constants(G), n, dim, route="stationary", max_steps=1e9, **STAT)
    m, s = 1.0 + lam_rel, G / n
    # beta: the largest with delta_mu(eps) + (1 + e^eps) tau <= delta, mu = Delta sqrt(beta / m) (seed 002)
    mu = s * math.sqrt(p.beta / m)
    assert p.event.mu == pytest.approx(mu, rel=1e-14) and p.event.tv_error == tau
    assert gdp_total_delta_mp(eps, mu, tau) <= delta < gdp_total_delta_mp(eps, mu * (1 + 1e-6), tau)
    # Vempala-Wibisono: h = min(c / (4 M_U^2), c tau^2 / (8 p M_U^2)), KL0 of the N(0, I / M_U) start
    M_U, c = p.beta * (2.0 + lam_rel), p.beta * m
    h = min(c / (4 * M_U ** 2), c * tau ** 2 / (8 * dim * M_U ** 2))
    kl0 = 0.5 * dim * math.log(M_U / c) + 0.5 * M_U * R * R
    steps = math.log(max(kl0, tau ** 2) / tau ** 2) / (c * h)
    assert p.step_size == pytest.approx(h, rel=1e-14) and p.num_steps == math.ceil(steps) == p.thinning
    assert (p.n, p.dim, p.sensitivity, p.burn_in, p.num_chains, p.kernel, p.friction) == (n, dim, s, 0, 1, "langevin", None)
    assert (p.eps, p.delta, p.route, p.release, p.init_law) == (eps, delta, "stationary", "last_iterate", "gaussian")
    assert p.init_scale == pytest.approx(1 / math.sqrt(M_U), rel=1e-15)
    assert p.notes == ("final draw at TV <= 0.005 from the Gibbs target: delta includes (1 + e^eps) tau",
                       "chosen: forced by the caller")
    assert p.relaxation_time == pytest.approx(1 / (h * p.beta * m), rel=1e-14)
    assert p.lam == pytest.approx(p.beta * lam_rel, rel=1e-15)
    assert p.excess_risk_bound == pytest.approx(dim / p.beta + lam_rel * R * R / 2, rel=1e-14)
    o = _opt(p, "stationary")
    assert o.feasible and o.reason == "one draw within an explicit TV bound of the exact Gibbs distribution"
    assert o.releases == "the final draw of one chain" and o.assumptions == p.assumptions and len(p.assumptions) == 3
    assert (o.beta, o.excess_risk_bound) == (p.beta, p.excess_risk_bound)
    assert o.details == {"tv_target": tau, "step_size": p.step_size, "num_steps_needed": pytest.approx(steps, rel=1e-12),
                         "lam_rel": lam_rel}


def test_stationary_max_steps_is_inclusive_and_an_impractical_option_keeps_its_numbers():
    eps, delta, lam_rel, R, tau = (STAT[k] for k in ("eps", "delta", "lam_rel", "theta_scale", "tv_target"))
    q = calibrate(_stat_constants(1.0), 10, 2, max_steps=10, **STAT)
    o = _opt(q, "stationary")
    steps = o.details["num_steps_needed"]
    assert o.feasible is False and o.plan is None and o.releases == "one exact-enough draw per chain"
    mu = 0.1 * math.sqrt(o.beta / (1.0 + lam_rel))
    assert gdp_total_delta_mp(eps, mu, tau) <= delta < gdp_total_delta_mp(eps, mu * (1 + 1e-6), tau)
    assert o.excess_risk_bound == pytest.approx(2 / o.beta + lam_rel * R * R / 2, rel=1e-14)
    assert set(o.details) == {"tv_target", "step_size", "num_steps_needed", "lam_rel"} and o.details["lam_rel"] == lam_rel
    # "within max_steps": a budget of exactly the steps needed is enough, one ulp less is not
    p = calibrate(_stat_constants(1.0), 10, 2, route="stationary", max_steps=steps, **STAT)
    assert p.num_steps == math.ceil(steps) and p.beta == o.beta
    with pytest.raises(ValueError, match="impractical"):
        calibrate(_stat_constants(1.0), 10, 2, route="stationary", max_steps=math.nextafter(steps, 0), **STAT)


# -------------------------------------------------------------- what the remaining options report

def test_the_regularised_trajectory_keeps_every_run_choice():
    kw = dict(eps=1.0, delta=1e-5, route="trajectory", kernel="underdamped", friction=3.0, horizon=2.0,
              num_draws=7, num_chains=2)
    t = calibrate(C, N, DIM, lam_rel=0.1, **kw)
    plain = calibrate(C, N, DIM, **kw)
    assert (t.kernel, t.friction, t.num_chains, t.horizon) == ("underdamped", 3.0, 2, pytest.approx(2.0, rel=1e-15))
    assert t.num_draws == t.num_steps // t.thinning and t.thinning > 1 and t.num_draws == plain.num_draws
    assert t.lam == pytest.approx(0.1 * t.beta, rel=1e-15) and plain.lam == 0.0
    # privacy: the whole path of both chains is mu-GDP, mu = beta Delta sqrt(K t / (2 gamma)), within the target
    mu = t.beta * (C.grad_diff / N * 1.001) * math.sqrt(2 * 2.0 / (2 * 3.0))  # Delta with the float32 margin
    assert t.event.mu == pytest.approx(mu, rel=1e-12) and gdp_total_delta_mp(1.0, mu, 0.0) <= 1e-5
    # no route at all: every refusal listed, also with a regulariser for the trajectory
    none = LossConstants(lipschitz=1.0, grad_diff=2.0, strong_convexity=0.1)
    with pytest.raises(ValueError, match="no feasible route") as info:
        calibrate(none, N, DIM, eps=1.0, delta=1e-5, lam_rel=0.1)
    assert ("(trajectory: the loss declares no smoothness M" in str(info.value)
            and "; last_iterate: needs a declared smoothness M (step-size condition); stationary: needs" in str(info.value))


def test_options_outside_the_target_say_so():
    dom = L2Ball(DIM, 3.0)
    p = calibrate(C, N, DIM, eps=2.0, domain=dom)
    for r in ("trajectory", "last_iterate", "stationary"):
        o = _opt(p, r)
        assert (o.feasible, o.reason, o.plan, o.beta) == (False, "gives (eps, delta)-DP only; the target is pure eps", None, None)
    o = _opt(calibrate(C, N, DIM, eps=1.0, delta=1e-5, domain=dom), "pure")
    assert (o.feasible, o.reason, o.plan) == (False, "the target is (eps, delta); pass delta=None for pure eps", None)


def test_discretised_renyi_is_reported_with_the_regularised_constants_never_chosen():
    from dp_infer.privacy.discretised import discretised_renyi_requirements

    strong = LossConstants(lipschitz=2.0, grad_diff=2.0, smoothness=0.5, strong_convexity=0.05)
    p = calibrate(strong, N, DIM, eps=1.0, delta=1e-5, lam_rel=0.1)
    req = discretised_renyi_requirements(1.0, 1e-5, n=N, dim=DIM, grad_diff=2.0, smoothness=0.5 + 0.1,
                                         strong_convexity=0.05 + 0.1)
    o = _opt(p, "discretised_renyi")
    assert (o.feasible, o.plan, o.beta) == (False, None, None) and o.details == req.as_dict()
    assert o.reason == f"reference only ({'practical' if req.practical else 'impractical'}): {req.reason}"
    quad = LossConstants(lipschitz=2.0, grad_diff=2.0, smoothness=1.0, strong_convexity=1.0)  # M = m: practical
    assert _opt(calibrate(quad, N, DIM, eps=1.0, delta=1e-5, lam_rel=0.0), "discretised_renyi").reason.startswith(
        "reference only (practical): ")
    # declared M below m (a clipped loss, so no contraction route is tried): the calculator refuses,
    # the option says so, the trajectory route stands
    odd = LossConstants(lipschitz=2.0, grad_diff=2.0, smoothness=0.05, strong_convexity=0.1, clipped=True)
    q = calibrate(odd, N, DIM, eps=1.0, delta=1e-5, lam_rel=0.0)
    o = _opt(q, "discretised_renyi")
    assert (o.feasible, o.plan) == (False, None) and o.reason.startswith("reference calculator refused: smoothness")
    assert [x.route for x in q.options][-1] == "discretised_renyi" and q.route != "discretised_renyi"


def test_a_start_law_already_within_the_tv_bound_still_runs_one_step():
    # M = m and a tiny beta (G / n = 1000): KL0 = M_U R^2 / 2 < tau^2, so the bound needs no step;
    # the plan still runs one (zero steps left thinning 0 and num_draws a ZeroDivisionError)
    tau = 5e-3
    c = LossConstants(lipschitz=1.0, grad_diff=1000.0, smoothness=1.0, strong_convexity=1.0)
    p = calibrate(c, 1, 1, eps=2.0, delta=0.1, lam_rel=0.5, theta_scale=1.0, tv_target=tau, route="stationary")
    M_U = p.beta * 1.5
    assert 0.5 * M_U * 1.0 < tau ** 2 and _opt(p, "stationary").details["num_steps_needed"] == 0.0
    assert (p.num_steps, p.thinning, p.num_draws, p.burn_in) == (1, 1, 1, 0)
    assert p.as_dict()["num_draws"] == 1 and "stationary" in p.explain()


def test_stationary_refusals_say_exactly_why():
    strong = LossConstants(lipschitz=2.0, grad_diff=2.0, smoothness=0.5, strong_convexity=0.05)
    box = calibrate(strong, N, DIM, eps=1.0, delta=1e-5, domain=Box([-1.0] * DIM, [1.0] * DIM))
    o = _opt(box, "stationary")
    assert (o.feasible, o.plan, o.reason) == (False, None, "its explicit ULA TV bound assumes an unprojected chain on "
                                              "R^d; a bounded domain projects every step (use the trajectory or "
                                              "last-iterate route)")
    o = _opt(calibrate(C, N, DIM, eps=1.0, delta=1e-5, lam_rel=0.0), "stationary")
    assert (o.feasible, o.reason) == (False, "needs strong convexity: declare an L2 regulariser (lam_rel > 0)")
    clipped = LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=0.5, strong_convexity=0.1, clipped=True)
    o = _opt(calibrate(clipped, N, DIM, eps=1.0, delta=1e-5), "stationary")
    assert o.feasible is False and o.reason.startswith(
        "needs a Gibbs target whose drift is the loss gradient: the loss clips per-example gradients")
    # a TV target whose slack (1 + e^eps) tau alone exceeds delta: refused with the calculator's reason
    loose = calibrate(C, N, DIM, eps=1.0, delta=1e-5, tv_target=0.5)
    o = _opt(loose, "stationary")
    assert (o.feasible, o.plan) == (False, None) and o.reason.startswith("tv_error too large") and loose.route != "stationary"


def test_documented_defaults():
    # M = 2.112: the trajectory needs 4000 steps, which the default 1000 draws thin by exactly 4 (2.11 before the
    # float32 margin lowered beta by 0.1%)
    strong = LossConstants(lipschitz=2.0, grad_diff=2.0, smoothness=2.112, strong_convexity=0.05)
    assert _opt(calibrate(strong, N, DIM, eps=1.0, delta=1e-5), "trajectory").plan.thinning == 4
    explicit = dict(route="auto", theta_scale=10.0, horizon=1.0, num_chains=1, kernel="langevin", num_draws=1000,
                    relaxations=10.0, max_steps=2e6, eps_prime_fraction=0.1, omega=0.01)
    p, q = calibrate(strong, N, DIM, eps=1.0, delta=1e-5), calibrate(strong, N, DIM, eps=1.0, delta=1e-5, **explicit)
    assert (p, p.options) == (q, q.options)  # a plan's equality leaves out its options: compare them too
    dom = L2Ball(DIM, 3.0)
    explicit.update(delta=None)
    p, q = calibrate(C, N, DIM, eps=1.0, domain=dom), calibrate(C, N, DIM, eps=1.0, domain=dom, **explicit)
    assert (p, p.options) == (q, q.options)


def test_default_max_steps_is_two_million():
    # a TV target whose bound needs 2e6 + 1/2 steps (tau found once by bisection on the closed form)
    c = LossConstants(lipschitz=1.0, grad_diff=1.0, smoothness=1.0, strong_convexity=1.0)
    kw = dict(eps=2.0, delta=0.1, lam_rel=0.5, theta_scale=1.0, tv_target=0.007655731003567751)
    o = _opt(calibrate(c, 10, 1, **kw), "stationary")
    assert not o.feasible and 2e6 < o.details["num_steps_needed"] < 2e6 + 1
    assert calibrate(c, 10, 1, route="stationary", max_steps=2e6 + 1, **kw).num_steps == 2_000_001
