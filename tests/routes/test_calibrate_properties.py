"""Property tests (Hypothesis) of the planners and route calibrators, plus the curvature audit.

* every plan's step satisfies its stability bound, exactly: h (beta M + lam) <= step_safety
  for the overdamped kernel (ULA on curvature M_U is stable iff h M_U < 2), the kinetic bound
  for the underdamped one, h <= 2 / (beta (m + M)) on the last-iterate route;
* calibration round-trips: plan for eps, account the plan's event: <= eps, and >= eps (1 - 1e-6);
* more steps (horizon), chains, sensitivity or beta never lower eps;
* an empirical check on a target whose curvature EQUALS the declared M: ULA with the plan's step
  on U = beta M theta^2 / 2 has the closed-form stationary variance 1 / (beta M (1 - h beta M / 2))
  (finite only for h beta M < 2). A step chosen without beta in the curvature bound fails it.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dp_infer.routes.calibrate import calibrate
from dp_infer.kernels import langevin
from dp_infer.losses import LossConstants
from dp_infer.routes.plan import plan_trajectory, step_schedule
from dp_infer.privacy import last_iterate as LI
from dp_infer.privacy import minibatch as mb
from dp_infer.privacy import path as P
from dp_infer.privacy import stationary as S
from dp_infer.privacy.accountant import Accountant

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)


def log_uniform(lo, hi):
    return st.floats(math.log(lo), math.log(hi)).map(math.exp)


EPS = log_uniform(0.05, 20.0)
DELTA = log_uniform(1e-12, 1e-2)


@st.composite
def constants(draw):
    G = draw(log_uniform(0.1, 10.0))
    M = draw(log_uniform(0.01, 100.0))
    m = draw(st.sampled_from([0.0, 0.5])) * M
    return LossConstants(lipschitz=G / 2, grad_diff=G, smoothness=M, strong_convexity=m)


@SETTINGS
@given(constants(), st.integers(10, 10**6), st.integers(1, 50), EPS, DELTA, log_uniform(0.01, 100.0),
       st.integers(1, 8), st.sampled_from(["langevin", "underdamped"]), log_uniform(0.05, 1.9),
       log_uniform(1e-6, 10.0))
def test_trajectory_plan_is_stable_and_round_trips(consts, n, dim, eps, delta, horizon, chains, kernel, safety, lam):
    plan = plan_trajectory(consts, n, dim, eps=eps, delta=delta, horizon=horizon, num_chains=chains, kernel=kernel,
                           step_safety=safety, lam=lam)
    M_U = plan.beta * consts.smoothness + plan.lam
    if kernel == "langevin":
        assert plan.step_size * M_U <= safety * (1 + 1e-12)  # exact up to the final division
    else:
        assert plan.step_size <= min(safety / math.sqrt(M_U), safety / plan.friction) * (1 + 1e-12)
    assert plan.horizon == pytest.approx(horizon, rel=1e-12)
    assert plan.num_steps % plan.thinning == 0
    spent = Accountant([plan.event]).get_epsilon(delta)
    assert spent <= eps
    assert spent >= eps * (1 - 1e-6)
    # the event is the path accountant's for the plan's own numbers (not the target's)
    # (the sensitivity with the float32 margin of dp_infer.privacy.float32_margin: max(1e-3, n 2^-25))
    margin = max(1e-3, n / 2 ** 25)
    assert plan.event.mu == pytest.approx(P.path_mu(plan.beta, consts.grad_diff / n * (1 + margin), plan.horizon,
                                                    plan.friction, chains), rel=1e-12)


@SETTINGS
@given(st.one_of(log_uniform(1e-300, 1e300), st.floats(1e300, math.inf)), log_uniform(1e-3, 1e3),
       st.integers(1, 10**6), st.one_of(st.none(), log_uniform(1e-3, 1e3)), log_uniform(0.05, 1.9),
       st.integers(1, 10**4))
def test_step_schedule_is_stable_or_says_inf(M_U, horizon, draws, friction, safety, min_steps):
    h, steps, thinning = step_schedule(M_U, horizon=horizon, num_draws=draws, friction=friction, safety=safety,
                                       min_steps=min_steps)
    stable = safety / M_U if friction is None else min(safety / math.sqrt(M_U), safety / friction)
    if steps == math.inf:  # only when the step count is beyond float
        h0 = min(stable, horizon / min_steps)
        assert (h, thinning) == (0.0, 1) and (h0 == 0 or horizon / h0 > 1.7e308)
        return
    assert h <= min(stable, horizon / min_steps) * (1 + 1e-12) and steps >= min_steps
    assert steps % thinning == 0 and h * steps == pytest.approx(horizon, rel=1e-12)
    assert steps // thinning >= min(draws, steps)  # the asked-for draws, or every step


@SETTINGS
@given(log_uniform(1e-3, 10.0), log_uniform(1e-5, 1.0), log_uniform(1e-3, 1e3), st.integers(1, 16), DELTA,
       log_uniform(1.0 + 1e-6, 10.0), st.sampled_from(["beta", "sensitivity", "time", "chains"]))
def test_path_eps_never_decreases_in_any_cost_parameter(beta, s, t, k, delta, f, which):
    base = dict(beta=beta, sensitivity=s, time=t, num_chains=k)
    more = dict(base)
    more[{"beta": "beta", "sensitivity": "sensitivity", "time": "time", "chains": "num_chains"}[which]] = (
        k + int(f) if which == "chains" else base[which] * f)
    for method in ("gdp", "rdp"):
        e0 = P.path_epsilon(base["beta"], base["sensitivity"], base["time"], delta, num_chains=base["num_chains"],
                            method=method)
        e1 = P.path_epsilon(more["beta"], more["sensitivity"], more["time"], delta, num_chains=more["num_chains"],
                            method=method)
        assert e1 >= e0 * (1 - 1e-9)


@SETTINGS
@given(EPS, DELTA, log_uniform(1e-5, 1.0), log_uniform(1e-3, 10.0), log_uniform(1.0, 100.0), st.integers(1, 8),
       st.integers(1, 10**5), st.integers(0, 3))
def test_last_iterate_calibration_round_trip_and_monotone_in_steps(eps, delta, s, m, ratio, k, steps, extra_pow):
    M = m * ratio
    b = LI.last_iterate_beta_max(eps, delta, sensitivity=s, strong_convexity=m, num_chains=k)
    for frac in (1.0, 0.3):
        h = frac * 2.0 / (b * (m + M))
        assert h * b * (m + M) <= 2.0 * (1 + 1e-12)
        rho = LI.last_iterate_rho(b, s, h, steps, m, M, num_chains=k)
        rho_more = LI.last_iterate_rho(b, s, h, steps * 10**extra_pow + 1, m, M, num_chains=k)
        assert rho_more >= rho * (1 - 1e-12)          # more steps never lower the RDP
        assert rho_more <= k * LI.last_iterate_rho_limit(b, s, m, h) * (1 + 1e-12)  # ... up to the K -> inf limit
        # never above the path bound of the same run (amplification by iteration only helps)
        assert rho <= P.path_rho(b, s, steps * h, num_chains=k) * (1 + 1e-12)
        e = LI.last_iterate_epsilon(b, s, h, steps, m, M, delta, num_chains=k)
        assert e <= eps


@SETTINGS
@given(EPS, DELTA, log_uniform(1e-5, 1.0), log_uniform(1e-3, 10.0), st.integers(1, 5))
def test_stationary_calibration_round_trip(eps, delta, s, m, draws):
    b = S.stationary_beta_max(eps, delta, sensitivity=s, strong_convexity=m, num_draws=draws)
    ev = S.stationary_event(b, s, m, num_draws=draws)
    # the calibrator meets delta at eps exactly (tests/privacy/test_edge_regimes.py); the
    # accountant's eps is that of a second root finder, the smallest feasible eps to within ~4 ulp
    e = Accountant([ev]).get_epsilon(delta)
    assert e <= eps * (1 + 1e-12) and e >= eps * (1 - 1e-6)
    assert Accountant([ev]).get_log_delta(eps) <= math.log(delta)
    assert S.gibbs_gdp_mu(b * 1.5, s, m) > S.gibbs_gdp_mu(b, s, m)  # larger beta, larger mu


@settings(SETTINGS, max_examples=6)
@given(log_uniform(0.01, 0.9), st.integers(1, 300), st.integers(1, 3), log_uniform(5.0, 200.0))
def test_minibatch_eps_never_decreases_in_steps_chains_or_beta(q, steps, chains, beta):
    kw = dict(step_size=1e-3, q=q, clip_norm=1.0, n=1000, neighboring="add_remove")

    def eps(b, t, k):
        return mb.minibatch_epsilon(b, num_steps=t, num_chains=k, delta=1e-6, pld_check=False, **kw)["epsilon"]

    e0 = eps(beta, steps, chains)
    assert eps(beta, steps + 7, chains) >= e0 * (1 - 1e-9)
    assert eps(beta, steps, chains + 1) >= e0 * (1 - 1e-9)
    assert eps(beta * 1.3, steps, chains) >= e0 * (1 - 1e-9)


@settings(SETTINGS, max_examples=12)
@given(EPS, log_uniform(1e-9, 1e-3), st.integers(100, 10**5), st.integers(1, 20), st.integers(1, 4),
       st.sampled_from([0.0, 0.3]))
def test_calibrate_round_trip_and_stability_on_every_route(eps, delta, n, dim, chains, m):
    consts = LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=1.0, strong_convexity=m)
    plan = calibrate(consts, n, dim, eps=eps, delta=delta, num_chains=chains)
    spent = plan.spent()["eps"]
    assert spent <= eps * (1 + 1e-9)
    assert spent >= eps * (1 - 1e-3)   # stated slack: routes spend their target up to 0.1%
    M_total = plan.beta * consts.smoothness + plan.lam
    if plan.route == "last_iterate":
        m_total = plan.beta * (consts.strong_convexity) + plan.lam
        assert plan.step_size * (m_total + M_total) <= 2.0 * (1 + 1e-12)
    else:
        assert plan.step_size * M_total < 2.0


# --------------------------------------------------------------------------- curvature equal to the declared M


@pytest.mark.parametrize("eps,n,M", [(1.0, 1000, 1.0), (4.0, 30_000, 0.25)])
def test_plan_step_is_stable_on_a_target_whose_curvature_is_the_declared_M(eps, n, M):
    # per-example loss M/2 (theta - x)^2 with mean(x) = 0: U = beta M theta^2 / 2 exactly, curvature beta M
    consts = LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=M, strong_convexity=M)
    plan = plan_trajectory(consts, n, 1, eps=eps, delta=1e-5, horizon=1.0)
    c = plan.beta * M
    hc = plan.step_size * c
    assert hc <= 0.5 * (1 + 1e-12)
    oracle = 1.0 / (c * (1.0 - hc / 2.0))    # ULA's exact stationary variance on this quadratic
    chains, steps = 4000, int(math.ceil(12.0 / hc))  # contraction (1 - hc)^steps < e^-12
    keys = jax.random.split(jax.random.PRNGKey(5), chains)
    run = jax.jit(jax.vmap(lambda k: langevin.sample_chain(k, None, jnp.zeros(1), plan.step_size, steps,
                                                           grad_fn=lambda z: c * z).last_state.z[0]))
    v = float(np.var(np.asarray(run(keys), np.float64), ddof=1))
    se = oracle * math.sqrt(2.0 / (chains - 1))  # SE of a Gaussian sample variance
    assert abs(v - oracle) < 4.5 * se
    # a step that ignored beta (h M <= 1/2 instead of h beta M <= 1/2) is unstable here: h beta M >= 2
    assert (0.5 / M) * c >= 2.0
