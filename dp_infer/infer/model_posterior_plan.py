"""The data-independent plan of a NumPyro model's posterior run (:mod:`dp_infer.infer.model_posterior` runs it).

:func:`plan_model_posterior` plans on the model's per-example nll in the prior-whitened coordinates
(:func:`whitened_loss`: ``phi = theta / s`` with the prior's scales ``s``, per-example gradients clipped to
``clip_norm`` there), with the identity preconditioner or, given the scores' second moment (released, or its
pending stand-in before the release), the Fisher metric; it composes the interval release's and the
clipped-row count's events into the plan's, and forecasts how close to the prior the draws will be. Public
inputs only: n, the model read on placeholder rows, its prior's scales, the options.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._validation import check_finite_array, check_positive
from ..losses import PerExampleLoss, clipped_loss
from ..model import score_release as _sr
from ..model.bridge import ModelLoss
from ..model.clipping import check_count_share, count_part_appended, split_budget
from ..model.fisher import FISHER_POINT
from ..model.initial import prior_curvature
from ..model.initial import prior_scales as model_prior_scales
from ..privacy.events import GdpEvent
from ..routes.plan import SamplingPlan, step_schedule
from ..routes.posterior import DEFAULT_ESS, DEFAULT_MIXING_RATE, plan_posterior
from ..routes.posterior_details import ModelPrior
from ..routes.preconditioning import SecondMoment

__all__ = ["plan_model_posterior", "whitened_loss", "CLOSE_TO_PRIOR", "MODEL_PRECONDITIONERS"]

#: the model path's preconditioners: the prior's scales alone, or with the scores' private second moment
MODEL_PRECONDITIONERS = ("prior", "fisher")

#: the forecast warns when every posterior sd will be at least this share of the prior's
CLOSE_TO_PRIOR = 0.9


def whitened_loss(ml: ModelLoss, scales, clip_norm: float, smoothness: float | None = None) -> PerExampleLoss:
    """The model's per-example nll in prior-whitened coordinates, ``l(phi) = nll(scales * phi)``,
    with per-example gradients (w.r.t. phi) clipped to ``clip_norm``: the clip in the metric
    ``P = diag(scales^2)``. Its constants: L = clip_norm, G = 2 clip_norm (for the function run)."""
    s = jnp.asarray(check_finite_array("prior_scales", scales, ndim=1))
    raw = ml.loss.fn

    def nll_phi(phi, x, y):
        return raw(s * phi, x, y)

    loss = clipped_loss(nll_phi, clip_norm, name="model_nll_whitened", smoothness=smoothness)
    return dataclasses.replace(loss, num_params_fn=ml.loss.num_params_fn)


def _check_scales(scales, dim: int) -> np.ndarray:
    s = np.asarray(scales, dtype=np.float64)
    if s.ndim == 0:
        s = np.full(dim, float(s))
    if s.shape != (dim,) or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"prior_scales must be a number or {dim} numbers in (0, inf) (one per unconstrained "
                         f"coordinate), got shape {s.shape}")
    return s


def plan_model_posterior(ml: ModelLoss, n: int, *, eps: float, delta: float, clip_norm: float,
                         smoothness: float | None = None, prior_scales_: Any = None, ess: int = DEFAULT_ESS,
                         num_chains: int = 4, kernel: str = "langevin", friction: float | None = None,
                         mixing_rate: float = DEFAULT_MIXING_RATE, num_draws: int = 1000,
                         second_moment: SecondMoment | None = None, fisher_curvature: float = 1.0,
                         interval_share: float = 0.0, clip_count_share: float = 0.0,
                         interval_curvature: str = "private", interval_weighted: bool = False,
                         **plan_kwargs) -> tuple[SamplingPlan, np.ndarray, PerExampleLoss]:
    """The data-independent posterior-mode plan for a model: ``(plan, scales, whitened loss)``.

    :func:`~dp_infer.routes.posterior.plan_posterior` on the whitened, metric-clipped loss with the
    identity preconditioner (prior precision 1 per whitened coordinate); the model prior's extra
    curvature (measured at fixed public points) enters the step only. The plan's
    ``preconditioner`` is ``diag(scales^2)`` in theta coordinates (so ``theta = C phi`` with
    ``C = diag(scales)``), its assumptions name the model's prior, and ``plan.posterior`` gains
    the clip, the scales' source and the prior-closeness forecast.

    ``second_moment``: the scores' second moment at the unconstrained origin
    (:mod:`dp_infer.model.fisher`, released privately, or its pending stand-in before the release).
    Then the metric in the whitened coordinates is ``P = (beta kappa_P F + c I)^-1`` (``c``: the
    prior's curvature there, at least 1) and the step assumes each per-example curvature is at most
    ``fisher_curvature`` times ``g_i g_i^T`` (exact with 1 for a logistic model with a zero-mean
    prior); the release's event is part of the plan's.

    ``clip_count_share``: the share of the target's ``mu^2`` taken out (by
    :func:`~dp_infer.model.clipping.split_budget`, before anything else is planned) for the private
    count of the rows whose gradient the clip touches, released after the draws
    (:func:`fit_model_posterior`): the run, its releases included, is planned at the rest, and the
    count's Gaussian part is appended to the plan's event, so ``plan.eps`` and the event are the
    whole target's. 0 (the default here): no count, the plan exactly as before.

    ``interval_curvature``: where the interval release's ``J`` comes from (``"private"``: released; ``"public"``:
    from public feature rows, the release's event then holds its mean scores only,
    :data:`~dp_infer.model.score_release.PUBLIC_SCHEDULE`). ``interval_weighted`` (public only): the scores are
    weighted in the metric that whitens the public information (:mod:`dp_infer.model.weighted_release`; decided
    from the model's observation support and the public rows, :func:`~dp_infer.model.weighted_release.release_labels`).
    """
    C = check_positive("clip_norm", clip_norm)
    _sr.schedule(interval_curvature)  # refuses an unknown source by name
    count_share = check_count_share(clip_count_share)
    eps_run, mu_count = split_budget(eps, delta, count_share) if count_share > 0 else (eps, 0.0)
    kappa = C if smoothness is None else check_positive("smoothness", smoothness)
    if prior_scales_ is None:
        scales, source = model_prior_scales(ml), "prior draws (fixed public key), robust 16-84% scale"
    else:
        scales, source = _check_scales(prior_scales_, ml.dim), "declared by the user"
    loss = whitened_loss(ml, scales, C, kappa)
    s = jnp.asarray(scales)
    white = dataclasses.replace(ml, prior_potential=lambda phi: ml.prior_potential(s * phi))
    c_prior = prior_curvature(white)
    interval_share = _sr.check_interval_share(interval_share)
    kw = dict(eps=eps_run, delta=delta, ess=ess, num_chains=num_chains, kernel=kernel,
              friction=friction, mixing_rate=mixing_rate, num_draws=num_draws, **plan_kwargs)
    if interval_share > 0:  # else plan_posterior's own default (0): the plan exactly as before
        kw["interval_share"] = interval_share
    if second_moment is None:
        plan = plan_posterior(loss, n, ml.dim, curvature=kappa, prior_precision=1.0, **kw)
        if c_prior > 1.0:  # the prior is stiffer than its Gaussian stand-in somewhere: a smaller step
            plan2 = plan_posterior(loss, n, ml.dim, curvature=kappa + (c_prior - 1.0) / plan.beta,
                                   prior_precision=1.0, **kw)
            if plan2.beta != plan.beta:  # pragma: no cover - beta does not depend on the curvature here
                raise AssertionError("the step-size curvature changed beta")
            plan = plan2
    else:
        kappa_F = check_positive("fisher_curvature", fisher_curvature)
        plan = plan_posterior(loss, n, ml.dim, curvature=kappa_F, prior_precision=max(1.0, c_prior),
                              second_moment=second_moment, **kw)
    floor = 1.0 / math.sqrt(1.0 + plan.beta * kappa)
    close = floor >= CLOSE_TO_PRIOR
    post = plan.posterior
    forecast_steps = None
    if second_moment is not None and second_moment.matrix is None:
        # before the release: the run's metric (beta kappa_P F + c I)^-1 and step matrix
        # beta kappa (F + e I) + c I give M_phi <= max(1, kappa / kappa_P) + beta kappa e / c whatever F is
        ratio = fisher_curvature / post.step.preconditioner_curvature
        M = max(1.0, ratio) + plan.beta * fisher_curvature * second_moment.noise_norm_bound / max(1.0, c_prior)
        _, forecast_steps, _ = step_schedule(M, horizon=plan.horizon, num_draws=plan.num_draws, friction=plan.friction,
                                             safety=plan_kwargs.get("step_safety", 0.25), min_steps=200)
        forecast_steps = int(forecast_steps)
    model_prior = ModelPrior(
        prior="the model's own prior, untempered (only the likelihood is tempered)",
        preconditioner_source=(f"prior scales per unconstrained coordinate: {source}" if second_moment is None
                               else f"prior scales per unconstrained coordinate ({source}), then the scores' "
                                    f"second moment at {FISHER_POINT} ({second_moment.source})"),
        prior_scales=tuple(float(v) for v in scales),
        clip=f"per-example gradients clipped to {C:g} in the preconditioner's metric (||C^T g|| <= {C:g})",
        clip_norm=C, smoothness=kappa,
        smoothness_source="declared" if smoothness is not None else "default: clip_norm",
        fisher_curvature=None if second_moment is None else float(fisher_curvature),
        prior_curvature_whitened=c_prior, prior_sd_ratio_floor=floor, close_to_prior=close,
        forecast_num_steps=forecast_steps)
    assumptions = (
        "the model's prior (data independent: read on placeholder rows, checked not to change with them)",
        f"per-example gradients (w.r.t. the prior-whitened latents) clipped to norm {C:g}: "
        f"Delta_P = 2 * {C:g} / n for the function run",
        f"replace-one neighbouring datasets with n = {n} (public); per-row covariates are part of the row",
        "initial points (the init strategy on placeholder rows), beta, preconditioner (prior scales), step, "
        "horizon and chains are fixed before sampling from public inputs only",
    ) + (() if second_moment is None else (
        f"the metric's data part is the scores' second moment at {FISHER_POINT}, released privately (its own "
        "event, composed with the path's); beta, step and horizon are re-planned from that release "
        "(post-processing) at the same total (eps, delta)",
        f"step size: every per-example curvature is at most {fisher_curvature:g} x g_i g_i^T with g_i the "
        "clipped score at the origin (exact with 1 for a logistic model with a zero-mean prior; an assumption "
        "otherwise, for the step only, never the privacy guarantee)"))
    notes = tuple(plan.notes) + (
        (f"forecast: every posterior sd will be at least {floor:.3g} x the prior's (curvature <= {kappa:g} "
         f"per example in whitened coordinates{'' if smoothness is not None else ', a default'}): at this n and "
         f"eps the draws will be within {100 * (1 - CLOSE_TO_PRIOR):.0f}% of the prior" if close else
         f"forecast: posterior sds can shrink to {floor:.3g} x the prior's at most (curvature <= {kappa:g})"),) + (
        () if forecast_steps is None else
        (f"forecast: about {forecast_steps} steps per chain once the scores' second moment is released (the bound "
         "on the metric's curvature from the release's noise alone; this plan, made before it, steps for "
         "the isotropic bound)",))
    event = plan.event
    if interval_share > 0:
        # the reserved part is the model's score release, not the loss route's Newton release: same mu,
        # its own sensitivities (2 C / n, sqrt(2) C^2 / n) and assumptions
        score_ev = _sr.score_release_event(post.mu_interval, n=n, clip_norm=C, curvature=interval_curvature,
                                           weighted=interval_weighted)
        parts = [p for p in event.metadata["parts"] if not str(p.get("label", "")).startswith("newton_release")]
        newton_assumptions = set(a for p in event.metadata["parts"] if str(p.get("label", "")).startswith(
            "newton_release") for a in p.get("assumptions", ()))
        event = GdpEvent(mu=event.mu, label=event.label,
                         assumptions=tuple(a for a in event.assumptions if a not in newton_assumptions)
                         + score_ev.assumptions, metadata={**event.metadata, "parts": parts + [score_ev.to_dict()]})
        public_j = interval_curvature == "public"
        model_prior = dataclasses.replace(model_prior, interval_release=(
            "mean weighted scores (label-free weights in the metric that whitens the public information) in "
            "noise-aware steps from the draws' mean, their curvature and second moment from public feature rows, "
            "every label of the observation's support enumerated (dp_infer.model.weighted_release)"
            if interval_weighted else
            "mean clipped scores in scoring steps from the draws' mean, their second moment from public feature "
            "rows with labels drawn from the model (dp_infer.model.score_release, dp_infer.model.public_information)"
            if public_j else "mean clipped scores and their second moment in scoring steps from the draws' mean "
                             "(dp_infer.model.score_release)"))
        assumptions = assumptions + (f"interval release: {post.interval_share:g} of the target's mu^2 "
                                     f"(mu = {post.mu_interval:.4g}), "
                                     + ("scores weighted to norm <= rho in the metric that whitens the public "
                                        "information; H and J from public feature rows (X_public), not released"
                                        if interval_weighted else f"scores clipped to {C:g}"
                                        + ("; J from public feature rows (X_public), not released" if public_j
                                           else "")),)
    if mu_count > 0:
        # the private count of the clipped rows (released after the draws, at their mean): one more GDP part
        event = count_part_appended(event, mu_count)
        assumptions = assumptions + (
            f"clipped-row count: {count_share:g} of the target's mu^2 (mu = {mu_count:.4g}) taken out first, the "
            f"run and its releases planned at eps = {eps_run:.6g}; the number of rows whose per-example gradient "
            f"(prior-whitened) exceeds {C:g} at the released posterior mean, Gaussian noise sd 1 / mu",)
    D = np.diag(scales)
    P = D @ np.asarray(plan.preconditioner, dtype=np.float64) @ D  # theta = s * phi: the metric in theta
    plan = dataclasses.replace(plan, eps=eps, assumptions=assumptions, notes=notes,
                               posterior=dataclasses.replace(post, model=model_prior),
                               prior_precision=None, event=event,
                               preconditioner=tuple(tuple(float(v) for v in row) for row in P))
    return plan, scales, loss
