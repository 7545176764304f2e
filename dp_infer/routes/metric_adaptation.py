"""Adapting a posterior plan's metric from the chains' own draws, as ``init / phase / update / final``
(the shape of BlackJAX's window adaptation): a pure core that the runner drives.

The runner (:func:`dp_infer.infer.posterior.sample_posterior`) only runs chains:

    state = init(plan)
    while True:
        spec = phase(plan, state)            # the phase's metric, step, steps and thinning
        theta = <run spec.num_steps steps in the metric state.chol from state.theta_last>
        state = update(plan, state, spec, theta)
        if spec.final:
            break
    plan = final(plan, state)                # the final phase's plan, with the phases recorded

Nothing here reads private data: each step size comes from the plan's global curvature bound in the
current metric (:func:`~dp_infer.routes.posterior.step_bound_matrix`, public), and each new metric is
post-processing of released draws (:func:`~dp_infer.routes.preconditioning.adapted_metric`). The
plan's event covers every phase (burn-in, windows, settling, sampling: the planner accounted the
whole time with the clip's metric-free sensitivity ``2 tau / n``), so no phase re-plans or charges.
Units: Langevin time (the kinetic chain's windows are already scaled by its friction in the plan).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .plan import SamplingPlan, step_schedule
from .posterior import preconditioner_chol, step_bound_matrix
from .posterior_details import AdaptedPhase
from .preconditioning import adapted_metric

__all__ = ["AdaptationState", "PhaseSpec", "WINDOW_DRAWS", "init", "phase", "update", "final", "num_phases"]

#: draws per chain kept from an adaptation window for the covariance (the window's whole path is
#: released anyway; these are the ones the metric is estimated from)
WINDOW_DRAWS = 200


@dataclass(frozen=True)
class PhaseSpec:
    """One phase to run: ``num_steps`` steps of ``step_size`` (Langevin time ``time``), keeping every
    ``thinning``-th state. ``keep_from``: the Langevin time from which a window's draws feed the next
    metric (the burn-in is skipped); ``final``: the sampling phase (its draws are the run's)."""

    index: int
    time: float
    step_size: float
    num_steps: int
    thinning: int
    keep_from: float | None
    final: bool


@dataclass(frozen=True)
class AdaptationState:
    """The current metric's Cholesky factor (theta = C phi), the chains' last released states (the next
    phase starts there), and the phases run so far."""

    chol: np.ndarray
    theta_last: np.ndarray
    phases: tuple[AdaptedPhase, ...] = ()


def _schedule(plan: SamplingPlan) -> list[tuple[float, float | None]]:
    post = plan.posterior
    ad = post.adaptation
    windows = list(ad.windows)
    burn = post.burn_in_time
    return ([(burn + windows[0], burn)] + [(w, 0.0) for w in windows[1:]]
            + [(ad.settle_time + post.sample_time, None)])


def _adaptive(plan: SamplingPlan):
    if not isinstance(plan, SamplingPlan) or plan.posterior is None or plan.posterior.adaptation is None:
        raise ValueError("plan must be a posterior-mode plan with adapt_metric=True")
    return plan.posterior.adaptation


def num_phases(plan: SamplingPlan) -> int:
    """The windows plus the sampling phase."""
    return len(_adaptive(plan).windows) + 1


def init(plan: SamplingPlan) -> AdaptationState:
    """The planned metric, chains at the prior mean (0): data independent."""
    _adaptive(plan)
    return AdaptationState(chol=preconditioner_chol(plan), theta_last=np.zeros((plan.num_chains, plan.dim)))


def phase(plan: SamplingPlan, state: AdaptationState) -> PhaseSpec:
    """The next phase: the first (burn-in and window 1) at the plan's step, every later one at the
    adapted step safety with the curvature bound ``lambda_max(C^T A C)`` in the current metric."""
    ad = _adaptive(plan)
    k = len(state.phases)
    schedule = _schedule(plan)
    if k >= len(schedule):
        raise ValueError("the adaptation has run every phase: call final()")
    time_k, keep_from = schedule[k]
    if k == 0:
        h_k = plan.step_size
        steps_k = int(math.ceil(time_k / h_k))
    else:
        C = state.chol
        with np.errstate(over="ignore", invalid="ignore"):
            B = C.T @ step_bound_matrix(plan) @ C
        M_k = float(np.linalg.eigvalsh(B)[-1]) if np.all(np.isfinite(B)) else math.inf  # overflow: refused below
        h_k, steps_k, _ = step_schedule(M_k, horizon=time_k, num_draws=1, friction=plan.friction,
                                        safety=ad.step_safety, min_steps=200)
        if not math.isfinite(steps_k):
            raise ValueError(f"the adapted metric's step cannot be planned (curvature bound {M_k:.4g})")
        steps_k = int(steps_k)
    is_final = keep_from is None
    thin_k = max(1, steps_k // (plan.num_draws if is_final else WINDOW_DRAWS))
    steps_k = thin_k * int(math.ceil(steps_k / thin_k))
    return PhaseSpec(index=k, time=time_k, step_size=time_k / steps_k, num_steps=steps_k, thinning=thin_k,
                     keep_from=keep_from, final=is_final)


def update(plan: SamplingPlan, state: AdaptationState, spec: PhaseSpec, theta) -> AdaptationState:
    """Record the phase; after a window, the metric adapted from its draws past ``keep_from``.

    ``theta``: the phase's released draws, shape (chains, draws, d). Non-finite draws mean the
    curvature bound did not hold: refused by name (the caller's run stops; its charge stands)."""
    theta = np.asarray(theta, dtype=np.float64)
    if not np.all(np.isfinite(theta)):
        raise ValueError(f"adaptation phase {spec.index} produced non-finite draws (step {spec.step_size:.4g}); the "
                         "curvature bound does not hold: lower curvature= or use adapt_metric=False")
    phases = state.phases + (AdaptedPhase(time=spec.time, step_size=spec.step_size, num_steps=spec.num_steps,
                                          thinning=spec.thinning),)
    chol = state.chol
    if not spec.final:
        first = int(math.floor(theta.shape[1] * spec.keep_from / spec.time))
        P = adapted_metric(theta[:, first:, :], current_chol=chol, prior_precision=np.asarray(plan.prior_precision))
        chol = np.linalg.cholesky(P)
    return AdaptationState(chol=chol, theta_last=theta[:, -1, :], phases=phases)


def final(plan: SamplingPlan, state: AdaptationState) -> SamplingPlan:
    """The plan of the final phase (its metric, step and steps) with the phases' record in
    ``posterior.adaptation.phases``; its event is the plan's (every phase was accounted)."""
    ad = _adaptive(plan)
    if len(state.phases) != num_phases(plan):
        raise ValueError(f"the adaptation ran {len(state.phases)} of {num_phases(plan)} phases")
    post = plan.posterior
    last = state.phases[-1]
    draws = last.num_steps // last.thinning
    windows = ad.windows
    P_final = state.chol @ state.chol.T
    return dataclasses.replace(
        plan, preconditioner=tuple(tuple(float(v) for v in row) for row in P_final), step_size=last.step_size,
        num_steps=last.num_steps, thinning=last.thinning,
        burn_in=int(math.ceil(draws * ad.settle_time / last.time)),
        relaxation_time=1.0 / (post.mixing_rate_declared * last.step_size),
        posterior=dataclasses.replace(post, adaptation=ad.with_phases(state.phases)),
        notes=tuple(plan.notes) + (
            f"metric adapted from the chains' own draws in {len(windows)} windows (Langevin time "
            f"{', '.join(f'{w:g}' for w in windows)} after {post.burn_in_time:g} of burn-in); the draws are the final "
            f"phase's ({last.num_steps} steps of {last.step_size:.4g}); the event covers every phase",))
