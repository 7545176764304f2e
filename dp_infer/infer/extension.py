"""A run's continuation (:meth:`dp_infer.infer.run.PrivateRun.extend`): how many steps, and the plan
that covers the whole, longer path (its event is the exact GDP of that path, composed with the
releases made before it)."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

from ..privacy import path as path_privacy
from ..privacy.events import GdpEvent, event_from_dict
from ..routes.plan import SamplingPlan

__all__ = ["extension_steps", "extended_plan", "ContinuationPlan", "continuation_plan", "EXTEND_ROUTE"]


def extension_steps(plan: SamplingPlan, num_steps, horizon) -> int:
    """The number of steps of a continuation: ``num_steps`` (a multiple of the plan's thinning) or
    ``horizon`` more Langevin time rounded up to whole thinned steps; exactly one of the two."""
    if (num_steps is None) == (horizon is None):
        raise ValueError("give exactly one of num_steps (an integer > 0) or horizon (> 0)")
    if horizon is not None:
        if isinstance(horizon, bool) or not isinstance(horizon, (int, float)) or not horizon > 0:
            raise ValueError(f"horizon must lie in (0, inf), got {horizon!r}")
        num_steps = int(np.ceil(horizon / plan.step_size / plan.thinning)) * plan.thinning
    if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)) or num_steps <= 0:
        raise ValueError(f"num_steps must be an integer > 0, got {num_steps!r}")
    if num_steps % plan.thinning:
        raise ValueError(f"num_steps must be a multiple of the plan's thinning {plan.thinning}, got {num_steps}")
    return int(num_steps)


def extended_plan(plan: SamplingPlan, steps: int) -> SamplingPlan:
    """``plan`` covering ``steps`` more steps of the same chains: the trajectory event of the
    whole path (beta, sensitivity, step size, chains unchanged), eps recomputed at plan.delta."""
    total = plan.num_steps + int(steps)
    # a posterior run that adapted its metric ran warm-up phases before these steps: they are part of the path
    adaptation = None if plan.posterior is None else plan.posterior.adaptation
    warmup = 0.0 if adaptation is None else float(adaptation.warmup_time)
    event = path_privacy.path_event(plan.beta, plan.sensitivity, warmup + total * plan.step_size, plan.friction,
                                    plan.num_chains)
    parts = list(plan.event.metadata.get("parts") or ())
    if parts:
        # a composed event (the path first, then the releases charged with it: the posterior mode's private
        # second moment, a model run's clipped-row count) keeps every release: GDP composes as
        # mu^2 = mu_path^2 + sum mu_release^2 (issue 40: dropping the count under-reported the run)
        others = [event_from_dict(p) for p in parts[1:]]
        if not all(isinstance(e, GdpEvent) for e in others):
            raise ValueError("plan: its event composes a release that is not Gaussian DP; the continuation "
                             "cannot be accounted in closed form")
        event = GdpEvent(mu=math.sqrt(float(event.mu) ** 2 + sum(float(e.mu) ** 2 for e in others)),
                         label=plan.event.label, assumptions=plan.event.assumptions,
                         metadata={**dict(plan.event.metadata), "parts": [event.to_dict()] + parts[1:]})
    new = dataclasses.replace(plan, num_steps=total, event=event, options=())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps = new.spent()["eps"]
    note = (f"extended by {steps} steps (post_warmup_state continuation): the event covers the whole path "
            f"of {total} steps; target eps {plan.eps:g} -> spent {eps:.6g}")
    return dataclasses.replace(new, eps=eps, notes=tuple(plan.notes) + (note,))


@dataclasses.dataclass(frozen=True)
class ContinuationPlan:
    """A run's continuation by ``steps`` more steps: ``event`` is the increment charged (the exact GDP
    of the added path time, which composed with the first run's event gives ``plan.event``);
    ``plan`` is the run's plan covering the whole, longer path."""

    plan: SamplingPlan
    steps: int
    event: GdpEvent

    @property
    def route(self) -> str:
        return self.plan.route


def continuation_plan(plan: SamplingPlan, num_steps=None, horizon=None) -> ContinuationPlan:
    """The continuation of ``plan`` by ``num_steps`` (or ``horizon`` more Langevin time): public."""
    steps = extension_steps(plan, num_steps, horizon)
    increment = path_privacy.path_event(plan.beta, plan.sensitivity, steps * plan.step_size, plan.friction,
                                        plan.num_chains)
    return ContinuationPlan(extended_plan(plan, steps), steps, increment)


def _plan_continuation(public) -> ContinuationPlan:
    return continuation_plan(public["plan"], public["num_steps"], public["horizon"])


def _run_continuation(cplan: ContinuationPlan, run, public):
    """Every chain continued from its last state (NumPyro's ``post_warmup_state``) for the plan's steps."""
    mcmc = run.mcmc
    mcmc.post_warmup_state = mcmc.last_state
    mcmc.num_samples = cplan.steps
    mcmc.run(mcmc.post_warmup_state.rng_key, *run.run_arguments())
    return run


def _preflight_continuation(cplan: ContinuationPlan, prefix: str = "") -> None:
    from .preflight import check_plan_resources

    check_plan_resources(cplan.plan, prefix=prefix)


def _register():
    from .driver import Route, register_route

    return register_route(Route("extend", _plan_continuation, _run_continuation,
                                label=lambda c: f"dp_infer extend {c.route} +{c.steps} steps",
                                preflight=_preflight_continuation))


#: a trajectory run's continuation (:meth:`dp_infer.infer.run.PrivateRun.extend`): charged the increment
EXTEND_ROUTE = _register()
