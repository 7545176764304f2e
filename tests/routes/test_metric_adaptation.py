"""The metric adaptation's pure core (dp_infer.routes.metric_adaptation): init / phase / update /
final, checked without sampling, on draws made up here, against the plan's own schedule."""

import dataclasses
import math
import warnings

import numpy as np
import pytest

import dp_infer
from dp_infer.routes import metric_adaptation as ma
from dp_infer.routes.plan import step_schedule
from dp_infer.routes.posterior_details import AdaptedPhase
from dp_infer.routes.posterior import plan_posterior, preconditioner_chol, step_bound_matrix
from dp_infer.routes.preconditioning import adapted_metric, pending_second_moment

LOSS = dp_infer.logistic(row_norm=1.0)
N, D = 5000, 3


def _plan(**kw):
    sm = pending_second_moment(N, D, max_sq_norm=1.0, mu=0.1)
    return plan_posterior(LOSS, N, D, eps=1.0, delta=1e-5, prior_precision=1.0, second_moment=sm, clip_radius=2.0,
                          adapt_metric=True, adaptation_windows=(7.0, 11.0), num_chains=2, num_draws=50, **kw)


def _draws(spec, scale, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(2, spec.num_steps // spec.thinning, D)) * scale


def test_the_phases_follow_the_plans_schedule_and_the_metric_comes_from_each_windows_draws():
    plan = _plan()
    post, ad = plan.posterior, plan.posterior.adaptation
    state = ma.init(plan)
    np.testing.assert_array_equal(state.chol, preconditioner_chol(plan))
    assert ma.num_phases(plan) == 3 and state.theta_last.shape == (2, D) and not state.theta_last.any()
    # phase 0: burn-in + window 1 at the plan's own step, about 200 draws kept per chain
    s0 = ma.phase(plan, state)
    assert (s0.index, s0.time, s0.keep_from, s0.final) == (0, post.burn_in_time + 7.0, post.burn_in_time, False)
    assert s0.num_steps % s0.thinning == 0 and s0.step_size == pytest.approx(s0.time / s0.num_steps, rel=1e-15)
    assert s0.step_size <= plan.step_size and s0.thinning == max(1, math.ceil(s0.time / plan.step_size) // 200)
    theta0 = _draws(s0, np.array([3.0, 1.0, 0.5]), 0)
    state = ma.update(plan, state, s0, theta0)
    first = int(math.floor(theta0.shape[1] * s0.keep_from / s0.time))
    want = adapted_metric(theta0[:, first:, :], current_chol=preconditioner_chol(plan), prior_precision=np.ones(D))
    np.testing.assert_allclose(state.chol @ state.chol.T, want, rtol=1e-12)
    np.testing.assert_array_equal(state.theta_last, theta0[:, -1, :])
    # phase 1: the step from the curvature bound in the adapted metric, at the adapted safety
    s1 = ma.phase(plan, state)
    M = float(np.linalg.eigvalsh(state.chol.T @ step_bound_matrix(plan) @ state.chol)[-1])
    h, steps, _ = step_schedule(M, horizon=11.0, num_draws=1, friction=plan.friction, safety=ad.step_safety,
                                min_steps=200)
    assert (s1.index, s1.time, s1.keep_from, s1.final) == (1, 11.0, 0.0, False)
    assert s1.num_steps >= steps and s1.step_size <= h * (1 + 1e-12)
    state = ma.update(plan, state, s1, _draws(s1, 1.0, 1))
    # the sampling phase keeps the plan's draws, and its metric is not adapted again
    s2 = ma.phase(plan, state)
    assert s2.final and s2.keep_from is None and s2.time == pytest.approx(ad.settle_time + post.sample_time)
    chol_before = state.chol
    state = ma.update(plan, state, s2, _draws(s2, 1.0, 2))
    np.testing.assert_array_equal(state.chol, chol_before)
    with pytest.raises(ValueError, match="has run every phase"):
        ma.phase(plan, state)
    out = ma.final(plan, state)
    assert [p.time for p in out.posterior.adaptation.phases] == [s0.time, s1.time, s2.time]
    assert (out.step_size, out.num_steps, out.thinning) == (s2.step_size, s2.num_steps, s2.thinning)
    assert out.burn_in == math.ceil((s2.num_steps // s2.thinning) * ad.settle_time / s2.time)
    np.testing.assert_allclose(np.asarray(out.preconditioner), chol_before @ chol_before.T, rtol=1e-15)
    assert out.event == plan.event and out.beta == plan.beta  # every phase was accounted in the plan
    assert "adapted from the chains' own draws in 2 windows" in out.notes[-1]


def test_misuse_is_refused_by_name():
    plan = _plan()
    fixed = plan_posterior(LOSS, N, D, eps=1.0, delta=1e-5, prior_precision=1.0)
    with pytest.raises(ValueError, match="adapt_metric=True"):
        ma.init(fixed)
    state = ma.init(plan)
    s0 = ma.phase(plan, state)
    bad = _draws(s0, 1.0, 0)
    bad[1, 3, 2] = np.nan
    with pytest.raises(ValueError, match="adaptation phase 0 produced non-finite draws"):
        ma.update(plan, state, s0, bad)
    with pytest.raises(ValueError, match="ran 0 of 3 phases"):
        ma.final(plan, state)


@pytest.mark.parametrize("kernel", ["langevin", "underdamped"])
@pytest.mark.parametrize("scale", [1e-4, 0.3, 1.0, 2.5])
def test_every_later_phase_is_the_schedule_of_its_metrics_curvature_bound(kernel, scale):
    """A window or the sampling phase after the first: the step and steps of ``step_schedule`` for the
    LARGEST eigenvalue of C^T A C (C the current metric, A the plan's bound matrix), over the phase's time,
    with the kernel's friction, the adapted step safety and at least 200 steps, then thinned to about
    200 kept draws (a window) or the plan's draws (the sampling phase), the steps a whole number of
    thinnings. Metrics made up here (distinct eigenvalues; scale 1e-4 makes the 200-step floor bind)."""
    plan = _plan(kernel=kernel)
    ad = plan.posterior.adaptation
    w = ad.windows  # (7, 11) in Langevin time; the kinetic chain's are scaled by its friction
    sched = [(plan.posterior.burn_in_time + w[0], plan.posterior.burn_in_time), (w[1], 0.0),
             (ad.settle_time + plan.posterior.sample_time, None)]
    chol = scale * np.array([[1.0, 0.0, 0.0], [0.4, 0.7, 0.0], [-0.2, 0.1, 0.3]])
    done = ma.AdaptationState(chol=chol, theta_last=np.zeros((2, D)))
    s0 = ma.phase(plan, done)
    for k in (1, 2):
        state = dataclasses.replace(done, phases=(AdaptedPhase(1.0, 0.01, 100, 1),) * k)
        spec = ma.phase(plan, state)
        M = float(np.linalg.eigvalsh(chol.T @ step_bound_matrix(plan) @ chol).max())
        _, steps, _ = step_schedule(M, horizon=sched[k][0], num_draws=1, friction=plan.friction,
                                    safety=ad.step_safety, min_steps=200)
        thin = max(1, steps // (plan.num_draws if k == 2 else ma.WINDOW_DRAWS))
        steps = thin * math.ceil(steps / thin)
        assert (spec.index, spec.time, spec.keep_from, spec.final) == (k, sched[k][0], sched[k][1], k == 2)
        assert (spec.num_steps, spec.thinning) == (steps, thin), (spec, steps, thin)
        assert spec.step_size == sched[k][0] / steps
        if scale == 1e-4 and k == 1:
            assert (spec.num_steps, spec.thinning) == (200, 1)  # the floor: 200 steps
    # the first phase ignores the metric: the plan's own step
    assert s0.step_size <= plan.step_size and s0.index == 0


def test_a_metric_whose_curvature_overflows_is_refused_by_name_and_a_non_plan_too():
    """C^T A C overflowing float64 (it raised numpy's "Eigenvalues did not converge" before) is a
    curvature bound of inf: refused by name."""
    plan = _plan()
    state = ma.AdaptationState(chol=1e200 * np.eye(D), theta_last=np.zeros((2, D)),
                               phases=(AdaptedPhase(1.0, 0.01, 100, 1),))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the refusal is the one line a user sees: no overflow warning before it
        with pytest.raises(ValueError, match=r"the adapted metric's step cannot be planned \(curvature bound inf\)"):
            ma.phase(plan, state)
    with warnings.catch_warnings():  # an infinite factor (0 x inf: invalid, NaN entries) is refused the same way
        warnings.simplefilter("error")
        inf_state = dataclasses.replace(state, chol=np.diag([np.inf, 1.0, 1.0]))
        with pytest.raises(ValueError, match=r"curvature bound inf"):
            ma.phase(plan, inf_state)
    for bad in ("not a plan", None):
        with pytest.raises(ValueError, match="plan must be a posterior-mode plan with adapt_metric=True"):
            ma.init(bad)


def test_the_final_plan_reads_its_burn_in_and_relaxation_from_the_last_phase():
    """final(): burn-in draws = ceil(draws * settle_time / time) of the last phase (draws = steps //
    thinning), relaxation time 1 / (declared mixing rate x step); a last phase made up here (1001 steps,
    thinning 7, time 10) so that neither equals the plan's own (burn-in 1 at settle time 2)."""
    plan = _plan()
    ad, post = plan.posterior.adaptation, plan.posterior
    last = AdaptedPhase(time=10.0, step_size=10.0 / 1001, num_steps=1001, thinning=7)
    state = ma.AdaptationState(chol=np.eye(D), theta_last=np.zeros((2, D)),
                               phases=(AdaptedPhase(1.0, 0.01, 100, 1),) * 2 + (last,))
    out = ma.final(plan, state)
    assert out.burn_in == math.ceil(143 * ad.settle_time / 10.0) == 29 != plan.burn_in
    assert out.relaxation_time == pytest.approx(1.0 / (post.mixing_rate_declared * (10.0 / 1001)), rel=1e-15)
    assert (out.num_steps, out.thinning, out.step_size) == (1001, 7, 10.0 / 1001)


def test_update_keeps_float64_states_from_float32_draws():
    plan = _plan()
    state = ma.init(plan)
    s0 = ma.phase(plan, state)
    theta = _draws(s0, 1.0, 3).astype(np.float32)
    out = ma.update(plan, state, s0, theta)
    assert out.theta_last.dtype == np.float64 and out.chol.dtype == np.float64
