"""The posterior mode: plan for a number of effective draws of ``prior x exp(-beta L)``.

On every route, k effective draws at inverse temperature beta in a direction of curvature c cost
about ``mu ~ beta Delta sqrt(k / c)`` (DESIGN, "Draws that are a posterior"): more draws mean a
flatter target. The estimate mode (:func:`dp_infer.routes.calibrate.calibrate`) optimises an
excess-risk bound; this mode asks for ``ess`` effective draws over ``K`` chains and chooses beta,
the horizon, the step and the preconditioner so that the released trajectory can hold them.

The chain is preconditioned Langevin with ``P(beta) = (beta kappa S + Lambda)^-1``
(:mod:`dp_infer.routes.preconditioning`): in the coordinates ``phi = C^-1 theta`` (``P = C C^T``) every
direction then relaxes at a rate close to 1, and

* integrated autocorrelation time ``2 / c`` per unit of Langevin time for a direction of
  curvature c (overdamped Ornstein-Uhlenbeck), so K chains of time ``t`` hold about
  ``K c t / 2`` effective draws; ``c`` is the DECLARED ``mixing_rate`` (the slowest direction's
  curvature in phi coordinates; it depends on the data, so it is an assumption of the
  prediction, not of the guarantee, and the achieved ESS is reported after the run);
* the path accountant with the sensitivity in the P metric over the admissible rows,
  ``Delta_P(beta)`` (:mod:`dp_infer.privacy.metric_sensitivity`): ``mu_path = beta Delta_P
  sqrt(K t / 2)`` (``/ gamma`` for the underdamped kernel); beta is the largest value meeting the
  target after any released second moment is charged (GDP composes: ``mu^2 = mu_S^2 +
  mu_path^2``).

Nothing here reads the private data: the inputs are n, the dimension, declared constants, the
prior, the admissible rows and (optionally) a released or public second moment.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .._validation import (
    check_choice, check_delta, check_finite_array, check_positive, check_positive_int, check_target_epsilon,
)
from ..losses import LossConstants, PerExampleLoss
from .plan import KERNELS, SamplingPlan, step_schedule
from .adaptation import (ADAPTED_STEP_SAFETY, DEFAULT_ADAPTATION_WINDOWS, SETTLE_TIME)
from .preconditioning import SecondMoment, precision_matrix, prior_second_moment
from ..privacy import path as path_privacy
from ..privacy.conversions import gdp_epsilon, gdp_mu
from ..privacy.events import GdpEvent
from ..losses.metric_clip import DEFAULT_CLIP_FACTOR, clipped_link
from .newton_release import interval_width_forecast, newton_event, schedule
from ..privacy.float32_margin import float32_margin_assumption
from .posterior_path import PathCost, coldest_beta, posterior_budget, widest_clip_radius
from .posterior_details import AdaptationSchedule, ClipRule, PosteriorDetails, StepRule

__all__ = ["plan_posterior", "preconditioner_chol", "step_bound_matrix", "expected_steps", "DEFAULT_ESS", "DEFAULT_MIXING_RATE",
           "DEFAULT_POSTERIOR_KERNEL",
           "DEFAULT_CLIP_FACTOR", "DEFAULT_ADAPTATION_WINDOWS", "ADAPTED_STEP_SAFETY"]

#: ArviZ's usual bar: bulk ESS >= 400 over 4 chains
DEFAULT_ESS = 400
#: declared curvature of the slowest direction in preconditioned coordinates (see module doc)
DEFAULT_MIXING_RATE = 0.4
#: a posterior-mode run's kernel unless one is given: the kinetic one buys the same privacy per effective
#: draw in about 6x fewer steps on Adult (eps = 1: 18,875 against Langevin's 120,793; docs/results.md)
DEFAULT_POSTERIOR_KERNEL = "underdamped"


#: Largest prior precision accepted (prior sd 1e-50): far beyond any real prior, and far enough below
#: float's range that the preconditioner's matrices (beta * curvature * S + precision) stay finite.
MAX_PRIOR_PRECISION = 1e100


def _prior_precision(prior_precision, dim: int) -> np.ndarray:
    if prior_precision is None:
        raise ValueError("the posterior mode needs a proper prior: pass prior_precision (a number > 0 or one "
                         "per coordinate); an improper flat prior has no posterior to draw from")
    lam = np.asarray(prior_precision, dtype=np.float64)
    if lam.ndim == 0:
        lam = np.full(dim, float(lam))
    if lam.shape != (dim,):
        raise ValueError(f"prior_precision must be a number or have shape ({dim},), got {lam.shape}")
    if not np.all(np.isfinite(lam)) or np.any(lam <= 0):
        raise ValueError("prior_precision must lie in (0, inf) in every coordinate (a flat prior is improper)")
    if np.any(lam > MAX_PRIOR_PRECISION):
        raise ValueError(f"prior_precision must be at most {MAX_PRIOR_PRECISION:g} in every coordinate (a prior "
                         f"sd below 1e-50 is a point mass: fix that coordinate instead), got max {lam.max():g}")
    return lam


def _curvature(c: LossConstants, row_norm: float | None, curvature: float | None) -> float:
    if curvature is not None:
        return check_positive("curvature", curvature)
    if c.smoothness is None or row_norm is None or not math.isfinite(row_norm):
        raise ValueError("pass curvature= (a bound on |phi''| of the GLM loss): the loss declares no smoothness "
                         "per unit row norm")
    return (c.smoothness - c.strong_convexity) / (row_norm * row_norm)


def _check_clip_and_adaptation(loss: PerExampleLoss, clip_radius, adapt_metric, adaptation_windows):
    """``(clip_radius, windows)``: the clip radius checked (a loss without a clipped closed form is
    refused), and the adaptation windows' Langevin times, or None for ``"auto"``. Adapting the metric
    needs the clip (it bounds the sensitivity in every metric)."""
    if clip_radius is not None:
        clip_radius = check_positive("clip_radius", clip_radius)
        clipped_link(loss)  # refuses a loss without a clipped closed form
    if not isinstance(adapt_metric, bool):
        raise ValueError(f"adapt_metric must be True or False, got {adapt_metric!r}")
    auto = isinstance(adaptation_windows, str)
    if auto and adaptation_windows != "auto":
        raise ValueError(f"adaptation_windows must be 'auto' or one or more Langevin times in (0, inf), got "
                         f"{adaptation_windows!r}")
    windows = None
    if adapt_metric:
        if clip_radius is None:
            raise ValueError("adapt_metric=True needs clip_radius (the clip bounds the sensitivity in every metric; "
                             "without it the adapted metric's sensitivity is not known before sampling)")
        if not auto:
            try:
                windows = tuple(float(w) for w in adaptation_windows)
            except (TypeError, ValueError):
                windows = ()
            if not windows or not all(math.isfinite(w) and w > 0 for w in windows):
                raise ValueError(f"adaptation_windows must be 'auto' or one or more Langevin times in (0, inf), got "
                                 f"{adaptation_windows!r}")
    return clip_radius, windows


def preconditioned_curvature_bound(P: np.ndarray, second_moment: SecondMoment, beta: float, kappa_step: float,
                                   prior_precision: np.ndarray, row_norm: float | None) -> float:
    """The step's curvature bound ``M_phi``: the largest eigenvalue of ``C^T (beta kappa (S + e I) +
    Lambda) C`` (``P = C C^T``; the Hessian of U in phi coordinates lies below it), or, with no data
    information, of ``C^T (beta kappa R^2 I + Lambda) C`` (the declared bound in every direction)."""
    C = np.linalg.cholesky(P)
    A_step = precision_matrix(second_moment, beta, kappa_step, prior_precision,
                              noise_margin=second_moment.noise_norm_bound)
    if second_moment.matrix is None:
        A_step = np.diag(prior_precision) + beta * kappa_step * (row_norm or 1.0) ** 2 * np.eye(P.shape[0])
    return float(np.linalg.eigvalsh(C.T @ A_step @ C)[-1])


def _posterior_assumptions(loss: PerExampleLoss, clip_radius, rows, n: int) -> tuple:
    """What the posterior plan's guarantee assumes, in words (the report's ``assumptions``)."""
    c = loss.constants
    return (
        "Gaussian prior N(0, diag(1 / prior_precision)), data independent",
        f"per-example gradients phi'(<theta, x>) x with |phi'| <= {c.link_derivative_bound}" if
        c.link_derivative_bound is not None else f"per-example gradient difference <= G = {c.grad_diff:g}",
        *(() if clip_radius is None else (
            f"per-example gradients clipped in the preconditioner's metric to ||C^T g|| <= {clip_radius:.4g} / "
            "sqrt(beta) (the target is the Gibbs posterior of the clipped loss, dp_infer.losses.metric_clip)",)),
        "rows in the admissible set of the schema" if rows is not None else f"rows of norm <= {loss.row_norm:g}",
        f"replace-one neighbouring datasets with n = {n} (public)",
        "initial point (the prior mean), beta, preconditioner, step, horizon and chains are fixed before "
        "sampling from public inputs and accounted releases only",
    )


def posterior_event(path_event, second_moment: SecondMoment, mu_interval: float, n: int,
                    interval_curvature: str = "private") -> GdpEvent:
    """The run's event: the path, the second moment's release and the interval release composed in
    GDP (``mu^2 = sum mu_k^2``), each kept as a part (``metadata["parts"]``, the path first)."""
    parts = [path_event] + ([second_moment.event] if second_moment.event is not None else [])
    if mu_interval > 0:
        parts.append(newton_event(mu_interval, n=n, curvature=interval_curvature))
    mu = math.sqrt(sum(float(e.mu) ** 2 for e in parts))
    return GdpEvent(mu=mu, label="posterior_mode", assumptions=tuple(a for e in parts for a in e.assumptions),
                    metadata={"parts": [e.to_dict() for e in parts]})


def plan_posterior(loss: PerExampleLoss, n: int, dim: int, *, eps: float, delta: float,
                   prior_precision, ess: int = DEFAULT_ESS, num_chains: int = 4,
                   second_moment: SecondMoment | None = None, rows: Any = None,
                   kernel: str = "langevin", friction: float | None = None,
                   mixing_rate: float = DEFAULT_MIXING_RATE, burn_in_time: float = 10.0,
                   step_safety: float = 0.25, curvature: float | None = None,
                   preconditioner_curvature: float | None = None, num_draws: int = 1000,
                   clip_radius: float | None = None, adapt_metric: bool = False,
                   adaptation_windows: tuple[float, ...] | str = "auto",
                   interval_share: float = 0.0, path_budget: float | None = None,
                   interval_curvature: str = "private", public_interval_width: float | None = None) -> SamplingPlan:
    """A posterior-mode plan for ``ess`` effective draws over ``num_chains`` chains at (eps, delta).

    ``prior_precision``: the Gaussian prior's precision (number or one per coordinate; mean 0).
    ``second_moment``: the preconditioner's information (:mod:`dp_infer.routes.preconditioning`; default
    the prior alone); a private one's GDP is subtracted from the budget. ``rows``: the admissible
    rows (a schema's :class:`~dp_infer.schema.admissible.AdmissibleRows`) for the sensitivity over
    the rows that can occur; without it the declared row norm is used. ``mixing_rate``: the
    declared curvature of the slowest preconditioned direction (predicted ESS only).
    ``step_safety``: ``h M_phi`` (ULA inflates the stiffest direction's variance by
    ``1 / (1 - h M_phi / 2)``; 0.25 keeps it under 15%). ``curvature``: a bound kappa on the GLM's
    ``|phi''|`` (default from the loss: ``(M - m) / R^2``, 1/4 for logistic), used for the step;
    ``preconditioner_curvature``: the typical curvature the preconditioner assumes (default
    ``kappa / 2``: fitted probabilities are rarely all 1/2), a tuning choice that moves the
    mixing rate, never the guarantee.
    ``clip_radius``: clip every per-example gradient in the preconditioner's metric
    (:mod:`dp_infer.losses.metric_clip`): ``||C^T g|| <= tau = clip_radius / sqrt(beta)``, i.e. the
    gradient's Mahalanobis radius in the metric ``(beta P)^-1 = kappa_P S + Lambda / beta`` is at
    most ``clip_radius``; the target becomes the Gibbs posterior of a clipped loss and the
    sensitivity is ``min(2 tau / n, the admissible-rows bound)``. ``None``: no clip (the loss's own
    link bound). Public: a multiple of ``sqrt(dim)`` (:data:`DEFAULT_CLIP_FACTOR`), never from data.
    ``adapt_metric``: adapt the preconditioner from the chains' own draws
    (:func:`dp_infer.routes.preconditioning.adapted_metric`) in windows of Langevin time
    ``adaptation_windows`` after the burn-in (each window's metric adapted from the previous window's
    draws), then sample in the metric adapted from the last window. ``"auto"`` (default): the
    number of windows from the planned metric's worst relaxation time
    (:mod:`dp_infer.routes.adaptation`; public inputs only). Needs
    ``clip_radius`` (the clip bounds the sensitivity by ``2 tau / n`` in EVERY metric, so the
    guarantee is fixed before sampling whatever metric the adaptation finds); the whole time (burn-in,
    windows, settling, sampling) is accounted, and the adapted metric is post-processing of that
    released path (GDP composes adaptively). The plan's step and step count are those of the
    planned metric; the adapted phases choose their steps from the released second moment's
    curvature bound in the adapted metric (:func:`step_bound_matrix`).
    ``interval_share``: the share of the target's ``mu^2`` reserved for the interval release made
    after sampling (Newton steps of a weighted data loss from the draws' mean,
    :mod:`dp_infer.routes.newton_release`); 0 (the planner's default): none. Its event is part of
    the plan's event. ``interval_curvature``: ``"private"`` (default: the release's curvature and scores'
    second moment are released from the rows) or ``"public"`` (computed by the run from feature rows
    declared public, so the release is gradients only: :data:`~dp_infer.routes.newton_release.PUBLIC_SCHEDULE`;
    the plan notes the intervals' width forecast). The plan does not see the public rows:
    ``public_interval_width`` is the width forecast its caller read from them
    (:func:`dp_infer.routes.public_rows.public_interval_width_forecast`, as ``fit`` does), noted as it is; None:
    the closed form with the rows spread evenly over the ``dim`` directions
    (:func:`~dp_infer.routes.newton_release.interval_width_forecast`).
    ``path_budget``: the path's GDP mu is at most this (default: the path's share of the budget). A run
    that plans again once its second moment is released passes the charged plan's own path mu
    (``plan.posterior.mu_path``), so the plan it runs never spends more than the plan it was charged for.
    """
    schedule(interval_curvature)  # refuses an unknown source by name
    if public_interval_width is not None:
        public_interval_width = check_positive("public_interval_width", public_interval_width)
    q = _checked_inputs(loss, n, dim, eps=eps, delta=delta, prior_precision=prior_precision, ess=ess,
                        num_chains=num_chains, second_moment=second_moment, rows=rows, kernel=kernel,
                        friction=friction, mixing_rate=mixing_rate, burn_in_time=burn_in_time,
                        step_safety=step_safety, curvature=curvature,
                        preconditioner_curvature=preconditioner_curvature, num_draws=num_draws)
    path = _path_plan(loss, q, clip_radius=clip_radius, adapt_metric=adapt_metric,
                      adaptation_windows=adaptation_windows, interval_share=interval_share, path_budget=path_budget)
    event = posterior_event(path.path_event, q.sm, path.budget.mu_interval, q.n, interval_curvature)
    step = _step_plan(loss, q, path, step_safety=step_safety)
    posterior = _details(q, path, step, event, interval_share=interval_share)
    draws = step.num_steps // step.thinning
    return SamplingPlan(
        route="trajectory", eps=q.eps, delta=q.delta, beta=path.beta, lam=0.0, step_size=step.h,
        num_steps=step.num_steps, num_chains=q.num_chains, kernel=kernel, friction=q.friction,
        thinning=step.thinning, burn_in=int(math.ceil(draws * q.burn_in_time / path.t)),
        n=q.n, dim=q.dim, sensitivity=path.delta_P, event=event,
        assumptions=_posterior_assumptions(loss, path.clip_radius, rows, q.n),
        excess_risk_bound=None, relaxation_time=1.0 / (q.mixing_rate * step.h),
        notes=_posterior_notes(q, path, posterior, event) + _public_curvature_notes(q, path, interval_curvature,
                                                                                    public_interval_width),
        target="posterior",
        prior_precision=tuple(float(v) for v in q.lam),
        preconditioner=tuple(tuple(float(v) for v in row) for row in path.P), posterior=posterior)


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """The planner's inputs, checked: public numbers only."""

    eps: float
    delta: float
    n: int
    dim: int
    ess: int
    num_chains: int
    num_draws: int
    mixing_rate: float
    burn_in_time: float
    friction: float | None
    lam: np.ndarray
    sm: SecondMoment
    rows: Any
    row_norm: float | None
    kappa: float
    kappa_P: float


def _checked_inputs(loss, n, dim, *, eps, delta, prior_precision, ess, num_chains, second_moment, rows, kernel,
                    friction, mixing_rate, burn_in_time, step_safety, curvature, preconditioner_curvature,
                    num_draws) -> _Inputs:
    """Every input checked by name, before anything is planned (one-line errors)."""
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss, got {type(loss).__name__}")
    c = loss.constants
    eps = check_target_epsilon(eps)
    delta = check_delta(delta)
    n = check_positive_int("n", n)
    dim = check_positive_int("dim", dim)
    ess = check_positive_int("ess", ess)
    num_chains = check_positive_int("num_chains", num_chains)
    num_draws = check_positive_int("num_draws", num_draws)
    mixing_rate = check_positive("mixing_rate", mixing_rate)
    burn_in_time = check_positive("burn_in_time", burn_in_time)
    if not 0 < step_safety < 2:
        raise ValueError(f"step_safety must lie in (0, 2) (h * M; ULA diverges at 2), got {step_safety!r}")
    check_choice("kernel", kernel, KERNELS)
    if kernel == "underdamped":
        friction = check_positive("friction", 2.0 if friction is None else friction)
    elif friction is not None:
        raise ValueError("friction applies to kernel='underdamped' only")
    lam = _prior_precision(prior_precision, dim)
    sm = prior_second_moment() if second_moment is None else second_moment
    if not isinstance(sm, SecondMoment):
        raise ValueError(f"second_moment must be a dp_infer.routes.preconditioning.SecondMoment, got {type(sm).__name__}")
    if rows is not None and int(rows.dim) != dim:
        raise ValueError(f"rows have dim {rows.dim} but the model has {dim} parameters")
    row_norm = loss.row_norm if math.isfinite(loss.row_norm) else None
    if c.link_derivative_bound is None and not math.isfinite(c.grad_diff):
        raise ValueError("the loss has neither a GLM link bound nor a finite gradient-difference bound G")
    kappa = _curvature(c, row_norm, curvature)
    kappa_P = 0.5 * kappa if preconditioner_curvature is None else check_positive(
        "preconditioner_curvature", preconditioner_curvature)
    return _Inputs(eps, delta, n, dim, ess, num_chains, num_draws, mixing_rate, burn_in_time, friction, lam, sm,
                   rows, row_norm, kappa, kappa_P)


@dataclasses.dataclass(frozen=True)
class _PathPlan:
    """The path the budget buys: beta, the Langevin time, the clip, the adaptation schedule, the metric
    and the path's event."""

    budget: Any
    beta: float
    capped: bool
    t: float
    t_sample: float
    gamma: float
    clip_radius: float | None
    adaptation: AdaptationSchedule | None
    P: np.ndarray
    delta_P: float
    sensitivity_source: str
    path_event: Any


def _path_plan(loss, q: _Inputs, *, clip_radius, adapt_metric, adaptation_windows, interval_share,
               path_budget=None) -> _PathPlan:
    """The coldest beta whose path (burn-in, adaptation windows, sampling) meets the path's share of
    the budget (:mod:`dp_infer.routes.posterior_path`), capped at n (the budget left then widens the
    clip), the metric ``P = (beta kappa_P S + Lambda)^-1`` and the path's GDP event."""
    c, sm, friction, num_chains, burn_in_time, n = loss.constants, q.sm, q.friction, q.num_chains, q.burn_in_time, q.n
    budget = posterior_budget(gdp_mu(q.eps, q.delta), sm, interval_share)
    mu_path = budget.mu_path if path_budget is None else min(budget.mu_path,
                                                             check_positive("path_budget", path_budget))
    # position IAT: 2 / c (overdamped), 2 gamma / c (kinetic, friction gamma); the privacy cost of
    # time t is sqrt(t) resp. sqrt(t / gamma), so k draws cost the same ~ sqrt(2 k / c) either way
    gamma = 1.0 if friction is None else friction
    t_sample = 2.0 * q.ess * gamma / (num_chains * q.mixing_rate)
    clip_radius, windows = _check_clip_and_adaptation(loss, clip_radius, adapt_metric, adaptation_windows)
    cost = PathCost(c, n, sm, q.kappa_P, q.lam, q.rows, q.row_norm, clip_radius, adapt_metric, windows, t_sample,
                    burn_in_time, gamma, friction, num_chains)
    beta = coldest_beta(cost.mu_of, mu_path)
    capped = beta > n
    if capped:
        beta = float(n)
    adaptation = None
    if adapt_metric:
        wins = [w * gamma for w in cost.windows_at(beta)]
        adaptation = AdaptationSchedule(
            windows=tuple(wins), settle_time=SETTLE_TIME, warmup_time=burn_in_time + sum(wins),
            step_safety=ADAPTED_STEP_SAFETY,
            windows_rule=("auto: doubling until the last is >= the planned metric's worst relaxation "
                          f"time r = {cost.worst_relaxation(beta):.4g}" if windows is None else "declared"))
    t = cost.time_at(beta)
    if capped and clip_radius is not None:
        # never colder than the untempered posterior (beta = n, L the mean loss); with the clip, the
        # budget left over buys a larger radius (less clipping)
        clip_radius = widest_clip_radius(cost, beta, mu_path)
        cost = dataclasses.replace(cost, clip_radius=clip_radius)
    A = precision_matrix(sm, beta, q.kappa_P, q.lam)
    P = np.linalg.inv(A)
    P = 0.5 * (P + P.T)
    bound = cost.sensitivity_bound(beta)
    delta_P = bound.planned
    sensitivity_line = ("per-example gradients clipped to ||C^T g|| <= tau in whatever metric C the run uses, "
                        "including one adapted from its own released draws (sensitivity 2 tau / n)"
                        if adapt_metric else
                        f"sensitivity in the preconditioner's metric: {bound.source} "
                        "(dp_infer.privacy.metric_sensitivity)")
    path_ev = path_privacy.path_event(beta, delta_P, t, friction, num_chains,
                                      extra_assumptions=(sensitivity_line,
                                                         float32_margin_assumption(n, "in the metric")))
    if path_ev.mu > mu_path * (1 + 1e-12):
        raise AssertionError("posterior plan overspent the path budget")  # pragma: no cover
    return _PathPlan(budget, beta, capped, t, t_sample, gamma, clip_radius, adaptation, P, delta_P, bound.source,
                     path_ev)


@dataclasses.dataclass(frozen=True)
class _StepPlan:
    h: float
    num_steps: int
    thinning: int
    M_phi: float
    kappa_step: float


def _step_plan(loss, q: _Inputs, path: _PathPlan, *, step_safety) -> _StepPlan:
    """The step from the curvature bound in the planned metric (the clipped link's where the
    gradients are clipped), the step count for the path's time and the thinning for ``num_draws``."""
    kappa = q.kappa
    # the clipped link's curvature can exceed the loss's own (the logistic's weighted link: 1/2 vs 1/4)
    kappa_step = kappa * (loss.behaviour.clipped_curvature_factor if path.clip_radius is not None else 1.0)
    M_phi = preconditioned_curvature_bound(path.P, q.sm, path.beta, kappa_step, q.lam, q.row_norm)
    h, num_steps, thinning = step_schedule(M_phi, horizon=path.t, num_draws=q.num_draws, friction=q.friction,
                                           safety=step_safety, min_steps=200)
    if num_steps == math.inf:
        beta = path.beta
        raise ValueError(f"the step size cannot be planned: the preconditioned curvature is {M_phi:.4g} "
                         f"(curvature = {kappa:g}, beta = {beta:.4g}) and the number of steps overflows float; "
                         "lower curvature")
    return _StepPlan(h, num_steps, thinning, M_phi, kappa_step)


def _details(q: _Inputs, path: _PathPlan, step: _StepPlan, event, *, interval_share) -> PosteriorDetails:
    """The plan's typed details: forecast, budget split, metric source, step rule, clip, adaptation."""
    beta, n, delta, sm, clip_radius, delta_P = path.beta, q.n, q.delta, q.sm, path.clip_radius, path.delta_P
    mu = float(event.mu)
    mu_sm, mu_int = path.budget.mu_sm, path.budget.mu_interval
    predicted = q.num_chains * q.mixing_rate * path.t_sample / (2.0 * path.gamma)
    # marginal privacy cost of one more effective draw at this beta and preconditioner
    t_next = path.t + path.t_sample / q.ess
    mu_next = math.sqrt(path_privacy.path_mu(beta, delta_P, t_next, q.friction, q.num_chains) ** 2 + mu_sm ** 2
                        + mu_int ** 2)
    return PosteriorDetails(
        ess_target=q.ess, predicted_ess=predicted, mixing_rate_declared=q.mixing_rate,
        burn_in_time=q.burn_in_time, sample_time=path.t_sample, beta_over_n=beta / n,
        interval_inflation=math.sqrt(n / beta), beta_capped_at_n=path.capped,
        mu_path=path.path_event.mu, mu_second_moment=mu_sm, mu_interval=mu_int, interval_share=float(interval_share),
        eps_per_extra_effective_draw=gdp_epsilon(mu_next, delta) - gdp_epsilon(mu, delta),
        second_moment=sm.describe(),
        sensitivity_bound=path.sensitivity_source,
        # the global curvature bound's ingredients (step_bound_matrix): released or public only
        step=StepRule(curvature=q.kappa, preconditioner_curvature=q.kappa_P, step_curvature=step.kappa_step,
                      bound_M_phi=step.M_phi, noise_margin=sm.noise_norm_bound,
                      row_norm_sq=(q.row_norm or 1.0) ** 2),
        clip=None if clip_radius is None else ClipRule(radius=clip_radius, tau=clip_radius / math.sqrt(beta)),
        adaptation=path.adaptation)


def _posterior_notes(q: _Inputs, path: _PathPlan, post: PosteriorDetails, event) -> tuple[str, ...]:
    n, mu, clip_radius = q.n, float(event.mu), path.clip_radius
    return (*((f"beta capped at n = {n} (the untempered posterior): the budget allows more; "
               + (f"the rest widened the clip radius to {clip_radius:.4g}" if clip_radius is not None else
                  f"the plan spends mu = {mu:.4g} of the target's {path.budget.mu_total:.4g}"),) if path.capped else ()),
            f"predicted bulk ESS {post.predicted_ess:.0f} over {q.num_chains} chains assumes the slowest preconditioned "
            f"direction has curvature >= {q.mixing_rate:g} (declared); the achieved ESS is reported after the run",
            f"interval inflation sqrt(n / beta) = {math.sqrt(n / path.beta):.3g} relative to the untempered posterior")


def _public_curvature_notes(q: _Inputs, path: _PathPlan, interval_curvature: str,
                            public_width: float | None = None) -> tuple[str, ...]:
    """With ``interval_curvature="public"`` and an interval release: what it releases and its width forecast
    (``public_width``, read from the public rows by the caller, or else the closed form from n, d, mu and the
    planner's typical curvature)."""
    mu_int = path.budget.mu_interval
    if interval_curvature != "public" or mu_int <= 0:
        return ()
    if public_width is None:
        mu_total = path.budget.mu_total
        width = interval_width_forecast(q.n, q.dim, mu_total, typical_curvature=q.kappa_P,
                                        share=(mu_int / mu_total) ** 2, curvature="public")
        forecast = (f"intervals forecast at about {width:.2g}x the non-private posterior's width for a typical "
                    "coordinate (the rows spread evenly over the directions; the public rows' own reading: "
                    "dp_infer.forecast_posterior with X_public)")
    else:
        forecast = (f"intervals forecast at about {public_width:.2g}x the "
                    "non-private posterior's width for the median coordinate (read from the public rows at the "
                    "prior's centre)")
    return (f"interval release with public curvature: gradients only (mu = {mu_int:.4g}); the curvature and the "
            "model-based scores' second moment come from the public feature rows (X_public, assumed drawn from the "
            f"private rows' distribution; a correctly specified model); {forecast}",)


def preconditioner_chol(plan: SamplingPlan) -> np.ndarray:
    """The Cholesky factor C of a posterior plan's preconditioner (``P = C C^T``)."""
    if plan.preconditioner is None:
        raise ValueError("this plan has no preconditioner (target 'estimate')")
    P = check_finite_array("plan.preconditioner", plan.preconditioner, ndim=2)
    return np.linalg.cholesky(0.5 * (P + P.T))


def step_bound_matrix(plan: SamplingPlan) -> np.ndarray:
    """``A`` with ``Hess U <= A`` everywhere (theta coordinates), from the plan alone.

    With a second moment ``S`` (released or public, noise bound ``e``): ``A = beta kappa (S + e I)
    + Lambda``, recovered from the plan's ``P^-1 = beta kappa_P S + Lambda``; without one (the
    prior preconditioner): ``beta kappa R^2 I + Lambda``; kappa is the clipped link's curvature
    bound when the gradients are clipped (``step_curvature``). The adapted phases take their step from
    ``lambda_max(C^T A C)`` in the adapted metric ``C``: no private data is read.
    """
    if plan.preconditioner is None or plan.posterior is None:
        raise ValueError("this plan has no preconditioner (target 'estimate')")
    rule = plan.posterior.step
    lam = np.asarray(plan.prior_precision, dtype=np.float64)
    kappa_P, kappa_s = float(rule.preconditioner_curvature), float(rule.step_curvature)
    if plan.posterior.second_moment.get("source") == "prior":
        A = np.diag(lam) + plan.beta * kappa_s * float(rule.row_norm_sq) * np.eye(plan.dim)
    else:
        P = np.asarray(plan.preconditioner, dtype=np.float64)
        A = (np.diag(lam) + (kappa_s / kappa_P) * (np.linalg.inv(0.5 * (P + P.T)) - np.diag(lam))
             + plan.beta * kappa_s * float(rule.noise_margin) * np.eye(plan.dim))
    return 0.5 * (A + A.T)


def expected_steps(plan: SamplingPlan, M_phi: float | None = None, step_safety: float = 0.25) -> int:
    """Kernel steps per chain the run will take (a forecast for wall time; not a privacy quantity).

    Without adaptation: the plan's ``num_steps``. With ``adapt_metric``: the burn-in and first window
    at the plan's step, the rest at :data:`ADAPTED_STEP_SAFETY` with the curvature bound ``M_phi``
    (default: the planned metric's, ``posterior.step.bound_M_phi``; the adapted metric's bound was
    measured 1-2x that on Adult); a given ``M_phi`` also sets the first phase's step (at
    ``step_safety``), for a forecast made before the second moment is released."""
    ad = None if plan.posterior is None else plan.posterior.adaptation
    if ad is None:
        return int(plan.num_steps)
    M = float(plan.posterior.step.bound_M_phi if M_phi is None else M_phi)
    t_first = plan.posterior.burn_in_time + ad.windows[0]
    if M_phi is None:
        first = int(math.ceil(t_first / plan.step_size))
    else:  # the planned metric's step from the given bound (a forecast made before the release)
        _, first, _ = step_schedule(M, horizon=t_first, num_draws=1, friction=plan.friction, safety=step_safety,
                                    min_steps=200)
    _, rest, _ = step_schedule(M, horizon=plan.horizon - t_first, num_draws=1, friction=plan.friction,
                               safety=ad.step_safety, min_steps=200)
    return first + int(rest)
