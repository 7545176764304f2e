"""Calibrated plans meet their (eps, delta) target exactly, checked against exact privacy curves."""

import math

import numpy as np
import pytest

from dp_infer import L2Ball, losses
from dp_infer.routes.calibrate import calibrate
from dp_infer.losses import LossConstants
from dp_infer.privacy.conversions import gdp_delta, gdp_epsilon
from dp_infer.privacy.exact import ula_quadratic_law

# 1-D quadratic family ell(theta; d) = (theta - d)^2 / 2 with d in [-1, 1]: G = 2, M = m = 1.
QUAD = LossConstants(lipschitz=math.inf, grad_diff=2.0, smoothness=1.0, strong_convexity=1.0)
N = 100


@pytest.mark.parametrize("eps,delta,chains", [(1.0, 1e-5, 1), (0.5, 1e-6, 3), (4.0, 1e-3, 2)])
def test_trajectory_plan_is_exactly_the_target_gaussian_dp(eps, delta, chains):
    plan = calibrate(QUAD, N, 1, eps=eps, delta=delta, route="trajectory", num_chains=chains)
    # quadratic loss: the path is exactly mu-GDP with mu = beta (G/n) sqrt(K t / 2) in real arithmetic; the plan
    # charges G / n times 1.001, the float32 margin at this n (dp_infer.privacy.float32_margin)
    mu = plan.beta * (2.0 / N) * 1.001 * math.sqrt(chains * plan.horizon / 2)
    assert plan.event.mu == pytest.approx(mu, rel=1e-12)
    assert gdp_delta(eps, mu) <= delta * (1 + 1e-9)
    assert gdp_delta(eps, mu) == pytest.approx(delta, rel=1e-6)  # tight: no privacy left unused
    assert plan.spent()["eps"] <= eps * (1 + 1e-12)


@pytest.mark.parametrize("eps,delta,chains", [(1.0, 1e-5, 1), (2.0, 1e-6, 2)])
def test_last_iterate_plan_meets_target_on_the_exact_ula_law(eps, delta, chains):
    """ULA on the quadratic: the last iterate under D and D' is Gaussian with the same variance
    and means differing by (1 - c^K) * 2/n, i.e. exactly mu-GDP with mu = shift / sd per chain."""
    plan = calibrate(QUAD, N, 1, eps=eps, delta=delta, route="last_iterate", lam_rel=0.0,
                     num_chains=chains)
    assert plan.release == "last_iterate" and plan.thinning == plan.num_steps
    a, v = ula_quadratic_law(plan.beta, 1.0, 0.0, plan.step_size, plan.num_steps)
    b, v2 = ula_quadratic_law(plan.beta, 1.0, 2.0 / N, plan.step_size, plan.num_steps)
    assert v == pytest.approx(v2)
    mu_exact = math.sqrt(chains) * abs(b - a) / math.sqrt(v)
    exact_delta = gdp_delta(eps, mu_exact)
    assert exact_delta <= delta
    # the RDP-based claim is valid but not wildly loose (within 25% in eps)
    assert gdp_epsilon(mu_exact, delta) >= 0.75 * eps


def test_pure_plan_spends_exactly_eps_and_purifies():
    loss = losses.logistic(row_norm=1.0, domain=L2Ball(5, 3.0))
    plan = calibrate(loss, 1000, 5, eps=1.0, delta=None)
    assert plan.route == "pure" and plan.delta == 0.0 and plan.release == "purified_mean"
    assert plan.spent()["eps"] == pytest.approx(1.0)
    # the upstream trajectory is (0.9, delta_a)-DP with the delta_a the purification assumed
    mu = plan.beta * (2.0 / 1000) * math.sqrt(plan.num_chains * plan.horizon / 2)
    assert gdp_epsilon(mu, log_delta=plan.upstream_log_delta) <= 0.9 * (1 + 1e-9)
    assert plan.purification["log_delta"] == pytest.approx(plan.upstream_log_delta)
    assert plan.purification["eps_prime"] == pytest.approx(0.1)


def test_auto_prefers_smallest_risk_bound_and_explains_all_routes():
    plan = calibrate(losses.logistic(), 30162, 108, eps=1.0, delta=1e-5, num_chains=2)
    text = plan.explain()
    for r in ("trajectory", "last_iterate", "stationary", "pure", "discretised_renyi"):
        assert r in text
    feasible = [o for o in plan.options if o.feasible]
    best = min(feasible, key=lambda o: o.excess_risk_bound)
    assert plan.route == best.route
    assert "chosen" in plan.notes[-1]


def test_infeasible_routes_give_reasons():
    with pytest.raises(ValueError, match="bounded domain"):
        calibrate(losses.logistic(), 100, 3, eps=1.0, delta=None)
    with pytest.raises(ValueError, match="strong convexity"):
        calibrate(losses.logistic(), 100, 3, eps=1.0, delta=1e-5, route="last_iterate", lam_rel=0.0)
    with pytest.raises(ValueError, match="impractical"):
        calibrate(losses.logistic(), 30162, 108, eps=1.0, delta=1e-5, route="stationary")
    with pytest.raises(ValueError, match="route"):
        calibrate(losses.logistic(), 100, 3, eps=1.0, delta=1e-5, route="magic")
    with pytest.raises(ValueError, match="delta"):
        calibrate(losses.logistic(), 100, 3, eps=1.0, delta=1.5)
    with pytest.raises(ValueError, match="eps"):
        calibrate(losses.logistic(), 100, 3, eps=-1.0, delta=1e-5)


def test_calibration_is_monotone():
    b = [calibrate(QUAD, N, 1, eps=e, delta=1e-5, route="trajectory").beta for e in (0.5, 1, 2)]
    assert b[0] < b[1] < b[2]
    bn = [calibrate(QUAD, n, 1, eps=1.0, delta=1e-5, route="trajectory").beta for n in (50, 100, 200)]
    assert bn[0] < bn[1] < bn[2]
    bt = [calibrate(QUAD, N, 1, eps=1.0, delta=1e-5, route="trajectory", horizon=t).beta for t in (0.5, 1, 2)]
    assert bt[0] > bt[1] > bt[2]


def test_stationary_route_when_its_tv_bound_is_reachable_accounts_the_sampling_error():
    """1-D quadratic with a loose TV target: the explicit ULA bound is reachable, the plan
    releases one final draw, and delta = delta_mu(eps) + (1 + e^eps) tau stays within target."""
    eps, delta, tau = 1.0, 0.1, 5e-3  # the ULA bound needs ~8 log(KL0/tau^2)/tau^2 steps: tau must be loose
    plan = calibrate(QUAD, N, 1, eps=eps, delta=delta, route="stationary", lam_rel=0.0,
                     tv_target=tau, theta_scale=1.0, max_steps=1e7)
    assert plan.route == "stationary" and plan.release == "last_iterate"
    assert plan.sampling_error_tv == tau and plan.event.tv_error == tau
    # exact draw of exp(-beta L) for the quadratic family: N(mean, 1/beta), shift 2/n
    mu_exact = (2.0 / N) * math.sqrt(plan.beta)
    assert gdp_delta(eps, mu_exact) + (1 + math.exp(eps)) * tau <= delta * (1 + 1e-9)
    assert plan.accountant().get_delta(eps) <= delta * (1 + 1e-9)
    # the ULA discretisation bias bound at the planned step: 8 h p M_U^2 / c <= tau^2 (KL)
    M_U = c = plan.beta
    assert 8 * plan.step_size * 1 * M_U**2 / c <= tau**2 * (1 + 1e-9)


def test_fit_runs_the_last_iterate_and_pure_routes_end_to_end():
    import dp_infer

    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = (X @ np.array([2.0, -1.0, 0.5]) > 0).astype(float)
    run = dp_infer.fit(losses.logistic(), X, y, eps=1.0, delta=1e-5, route="last_iterate",
                       lam_rel=0.05, num_chains=3, progress_bar=False)
    assert run.draws().shape == (3, 1, 3)  # only the last iterate of each chain
    assert dict(run.to_datatree().posterior.sizes)["draw"] == 1
    assert run.report()["eps_spent"] <= 1.0
    ball = L2Ball(3, 5.0)
    pure = dp_infer.fit(losses.logistic(), X, y, eps=1.0, delta=None, domain=ball, progress_bar=False)
    est = pure.estimate()
    assert est.shape == (3,) and np.all(np.isfinite(est))
    assert pure.report()["eps_spent"] == pytest.approx(1.0)
    # the default export holds only the purified estimate, not the (eps, delta_a) draws
    assert dict(pure.to_datatree().posterior.sizes)["draw"] == 1
