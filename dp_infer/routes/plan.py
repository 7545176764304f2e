"""Sampling plans: beta, step size, horizon and chains chosen from the privacy target and the
loss's declared constants, never from the data.

A :class:`SamplingPlan` is data independent by construction: its inputs are (eps, delta), the
number of examples n (public: replace-one adjacency keeps n fixed), the parameter dimension,
the loss constants and user choices (horizon, chains, kernel, regulariser). It carries the
privacy event that the run will spend, so a reviewer can recompute the guarantee.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields

from .._validation import (
    check_delta, check_nonnegative, check_positive, check_positive_int, check_target_epsilon,
)
from ..losses import LossConstants
from ..privacy import path as path_privacy
from ..privacy.accountant import Accountant
from ..privacy.events import PrivacyEvent
from ..privacy.float32_margin import float32_margin_assumption, with_float32_margin
from .posterior_details import PosteriorDetails

__all__ = ["SamplingPlan", "RouteOption", "plan_trajectory", "step_schedule", "explain_options"]

KERNELS = ("langevin", "underdamped")


@dataclass(frozen=True)
class RouteOption:
    """One route evaluated for a target: feasible or not, why, and its key numbers."""

    route: str
    feasible: bool
    reason: str
    beta: float | None = None
    excess_risk_bound: float | None = None
    releases: str = ""
    assumptions: tuple[str, ...] = ()
    details: dict = field(default_factory=dict)
    plan: SamplingPlan | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict:
        return {"route": self.route, "feasible": self.feasible, "reason": self.reason,
                "beta": self.beta, "excess_risk_bound": self.excess_risk_bound,
                "releases": self.releases, "assumptions": list(self.assumptions),
                "details": self.details}



@dataclass(frozen=True)
class SamplingPlan:
    """Everything the sampler needs, plus the privacy it will spend (data independent).

    Units: ``step_size`` and ``horizon`` are Langevin time for the potential
    U = beta * L + (lam/2)||theta||^2 (L the mean loss); ``num_steps = horizon / step_size``
    per chain; ``thinning`` keeps every thinning-th state as a draw; ``burn_in`` draws are
    released too (they are part of the accounted path) but dropped from estimates.
    ``init_law``: ``"point"`` (every chain starts at the domain's data-independent default
    point, 0 without a domain) or ``"gaussian"`` (each chain starts from an independent
    N(0, init_scale^2 I) draw -- the start law the stationary route's TV certificate assumes).
    ``target``: ``"estimate"`` (accuracy first: the plan optimises an excess-risk bound) or
    ``"posterior"`` (:func:`dp_infer.routes.posterior.plan_posterior`: a requested number of
    effective draws of ``prior x exp(-beta L)``, with the Gaussian prior's precision
    ``prior_precision`` (per coordinate), a preconditioner ``P`` fixed before sampling (the chain
    runs ``theta <- theta - h P grad U + sqrt(2h) P^(1/2) xi``; ``step_size`` is then in the
    reparametrised coordinates ``phi = C^-1 theta``, ``P = C C^T``) and the rest of the plan in
    ``posterior``, a :class:`~dp_infer.routes.posterior_details.PosteriorDetails`: forecast, budget
    split, step rule, clip and adaptation schedule).
    """

    route: str
    eps: float
    delta: float
    beta: float
    lam: float
    step_size: float
    num_steps: int
    num_chains: int
    kernel: str
    friction: float | None
    thinning: int
    burn_in: int
    n: int
    dim: int
    sensitivity: float
    event: PrivacyEvent
    assumptions: tuple[str, ...] = ()
    sampling_error_tv: float | None = None
    excess_risk_bound: float | None = None
    relaxation_time: float | None = None
    notes: tuple[str, ...] = field(default=())
    release: str = "trajectory"
    upstream_log_delta: float | None = None
    purification: dict | None = None
    init_law: str = "point"
    init_scale: float | None = None
    target: str = "estimate"
    prior_precision: tuple[float, ...] | None = None
    preconditioner: tuple[tuple[float, ...], ...] | None = None
    posterior: PosteriorDetails | None = None
    options: tuple = field(default=(), compare=False)

    @property
    def horizon(self) -> float:
        return self.num_steps * self.step_size

    @property
    def num_draws(self) -> int:
        return self.num_steps // self.thinning

    def accountant(self) -> Accountant:
        return Accountant([self.event])

    def spent(self) -> dict:
        """(eps, delta) actually spent, recomputed by the accountant from the event.

        A pure-DP plan (delta = 0) reports the event's epsilon (basic composition is exact for
        a single pure event)."""
        from ..privacy.events import PureDpEvent

        if self.delta == 0:
            if not isinstance(self.event, PureDpEvent):
                raise ValueError("a pure-DP plan must carry a PureDpEvent")
            return {"eps": float(self.event.epsilon), "delta": 0.0}
        acc = self.accountant()
        return {"eps": acc.get_epsilon(self.delta), "delta": self.delta}

    def explain(self) -> str:
        """The routes side by side: feasibility, beta, bounds and why this one was chosen."""
        return explain_options(self)

    def as_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("event", "options")}
        d["horizon"] = self.horizon
        d["num_draws"] = self.num_draws
        d["posterior"] = None if self.posterior is None else self.posterior.to_dict()
        d["event"] = self.event.to_dict()
        d["mu"] = getattr(self.event, "mu", None)
        d["eps_spent"] = self.spent()["eps"]
        d["assumptions"] = list(self.assumptions) + list(self.event.assumptions)
        d["notes"] = list(self.notes)
        if self.options:
            d["routes_considered"] = [o.as_dict() for o in self.options]
        return json.loads(json.dumps(d, default=_json_default))


def _json_default(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def _stable_step(M_U: float, friction: float | None, safety: float) -> float:
    """Step size from the potential's smoothness M_U (and friction for the kinetic scheme).

    ULA on a quadratic with curvature M_U is stable for h < 2 / M_U and inflates that
    direction's variance by 1 / (1 - h M_U / 2); ``safety`` = h M_U (default 0.5: at most
    a 33% inflation in the stiffest direction, none in flat ones).
    """
    if friction is None:
        return safety / M_U
    return min(safety / math.sqrt(M_U), safety / friction)


def step_schedule(M_U: float, *, horizon: float, num_draws: int, friction: float | None = None,
                  safety: float = 0.5, min_steps: int = 200) -> tuple[float, float, int]:
    """``(step_size, num_steps, thinning)`` for integrated time ``horizon`` on a potential of
    smoothness ``M_U`` (the largest Hessian eigenvalue of U, in U's own units).

    The step is the stable one of :func:`_stable_step`, and at most ``horizon / min_steps``; the
    step count is rounded UP to a whole number of thinnings (``thinning = num_steps //
    num_draws``, at least 1), so the step only shrinks, and then set to hit the horizon exactly.
    Data independent: M_U comes from declared constants. When M_U is so large that no finite
    float step count exists (M_U overflows, or horizon / step does), ``num_steps`` is
    ``math.inf`` (with step 0.0 and thinning 1): the caller refuses by name.
    """
    h = min(_stable_step(M_U, friction, safety), horizon / min_steps)
    if not h > 0 or not math.isfinite(horizon / h):
        return 0.0, math.inf, 1
    num_steps = int(math.ceil(horizon / h))
    thinning = max(1, num_steps // num_draws)
    num_steps = thinning * int(math.ceil(num_steps / thinning))
    return horizon / num_steps, num_steps, thinning


def plan_trajectory(constants: LossConstants, n: int, dim: int, *, eps: float,
                    delta: float | None = None, log_delta: float | None = None,
                    horizon: float = 1.0, num_chains: int = 1, kernel: str = "langevin",
                    friction: float | None = None, lam: float = 0.0, num_draws: int = 1000,
                    burn_in_fraction: float = 0.5, step_safety: float = 0.5,
                    min_steps: int = 200) -> SamplingPlan:
    """Trajectory route (seed-001 Lemma 2.2, exact GDP): the whole path of every chain is released.

    beta is the largest value whose K chains of integrated time ``horizon`` meet (eps, delta)
    exactly: beta = mu*(eps, delta) / (Delta sqrt(K t / (2 gamma))) with Delta = G / n and
    gamma = friction (1 for the overdamped kernel). No convexity is needed for privacy;
    mixing and the excess-risk bound p / beta need convexity (stated in the assumptions).
    """
    eps = check_target_epsilon(eps)
    if (delta is None) == (log_delta is None):
        raise ValueError("give exactly one of delta (in (0, 1)) or log_delta (< 0)")
    if delta is not None:
        delta = check_delta(delta)
        log_delta = math.log(delta)
    elif not (math.isfinite(log_delta) and log_delta < 0):
        raise ValueError(f"log_delta must be a finite number < 0, got {log_delta!r}")
    else:
        delta = math.exp(log_delta)  # may underflow to 0 for purification's tiny upstream delta
    n = check_positive_int("n", n)
    dim = check_positive_int("dim", dim)
    horizon = check_positive("horizon", horizon)
    num_chains = check_positive_int("num_chains", num_chains)
    lam = check_nonnegative("lam", lam)
    num_draws = check_positive_int("num_draws", num_draws)
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if not 0 <= burn_in_fraction < 1:
        raise ValueError(f"burn_in_fraction must lie in [0, 1), got {burn_in_fraction!r}")
    if not 0 < step_safety < 2:
        raise ValueError(f"step_safety must lie in (0, 2) (h * M_U; ULA diverges at 2), got {step_safety!r}")
    constants.require_finite_grad_diff()
    if constants.smoothness is None:
        raise ValueError("the loss declares no smoothness M: the step size cannot be chosen from "
                         "the loss constants; pass smoothness= to clipped_loss()")
    if kernel == "underdamped":
        friction = check_positive("friction", 1.0 if friction is None else friction)
    else:
        if friction is not None:
            raise ValueError("friction applies to kernel='underdamped' only")
    sensitivity = with_float32_margin(constants.grad_diff / n, n)
    beta = path_privacy.beta_max(eps, log_delta=log_delta, sensitivity=sensitivity, time=horizon,
                                 friction=friction, num_chains=num_chains)
    M_U = beta * constants.smoothness + lam
    h, num_steps, thinning = step_schedule(M_U, horizon=horizon, num_draws=num_draws, friction=friction,
                                           safety=step_safety, min_steps=min_steps)
    if num_steps == math.inf:
        raise ValueError(f"the potential's curvature beta * M + lam = {beta:.4g} * {constants.smoothness:g} "
                         f"+ {lam:g} is too large: the number of steps overflows float; lower lam or the "
                         "declared smoothness M")
    event = path_privacy.path_event(beta, sensitivity, horizon, friction, num_chains)
    m_U = beta * constants.strong_convexity + lam
    assumptions = (
        f"per-example gradient difference <= G = {constants.grad_diff:g} for every theta "
        "(enforced by declared data bounds or gradient clipping)",
        f"replace-one neighbouring datasets with n = {n} (public)",
        float32_margin_assumption(n, "G / n"),
        "initial point, beta, step size, horizon and chains are data independent",
        "no Metropolis correction and no warmup adaptation",
    )
    notes = []
    if m_U <= 0:
        notes.append("no strong convexity declared (lam = 0, loss m = 0): the privacy guarantee "
                     "holds, but there is no mixing guarantee; check R-hat/ESS")
    return SamplingPlan(
        route="trajectory", eps=eps, delta=delta, beta=beta, lam=lam, step_size=h,
        num_steps=num_steps, num_chains=num_chains, kernel=kernel, friction=friction,
        thinning=thinning, burn_in=int(burn_in_fraction * (num_steps // thinning)), n=n, dim=dim,
        sensitivity=sensitivity, event=event, assumptions=assumptions,
        sampling_error_tv=None,
        excess_risk_bound=dim / beta,
        relaxation_time=(1.0 / m_U / h) if m_U > 0 else None,
        notes=tuple(notes), upstream_log_delta=log_delta,
    )


def explain_options(plan: SamplingPlan) -> str:
    """Text table comparing the routes considered for ``plan``."""
    lines = [f"target: eps = {plan.eps:g}, delta = {plan.delta:g}; n = {plan.n}, dim = {plan.dim}",
             f"{'route':<20}{'feasible':<10}{'beta':>12}{'risk bound':>12}  releases / reason"]
    for o in plan.options:
        b = f"{o.beta:.4g}" if o.beta is not None else "-"
        r = f"{o.excess_risk_bound:.4g}" if o.excess_risk_bound is not None else "-"
        mark = "*" if o.route == plan.route else " "
        text = o.releases if o.feasible else o.reason
        lines.append(f"{mark}{o.route:<19}{str(o.feasible):<10}{b:>12}{r:>12}  {text}")
    lines.extend(f"note: {n}" for n in plan.notes)
    return "\n".join(lines)
