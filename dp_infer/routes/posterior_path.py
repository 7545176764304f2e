"""The posterior mode's path and its privacy cost as functions of the inverse temperature (public
inputs only): the per-example sensitivity in the preconditioner's metric, the whole Langevin time of a
chain (burn-in, adaptation windows, settling, sampling), the path's GDP mu, and the coldest beta
whose path meets a budget. :func:`dp_infer.routes.posterior.plan_posterior` builds the plan on them.

Units: beta is the inverse temperature of ``U = beta L + (1/2) theta' Lambda theta`` with ``L`` the
mean loss (beta = n is the untempered posterior); times are Langevin time.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np

from ..losses import LossConstants
from ..privacy import path as path_privacy
from ..privacy.metric_sensitivity import metric_gradient_sensitivity
from .adaptation import SETTLE_TIME, auto_windows, worst_relaxation_time
from ..privacy.float32_margin import float32_gradient_margin
from .preconditioning import SecondMoment, precision_matrix

__all__ = ["PosteriorBudget", "posterior_budget", "PathCost", "SensitivityBound", "coldest_beta", "widest_clip_radius",
           "BETA_RANGE"]

#: the inverse temperatures the bisection searches (geometric)
BETA_RANGE = (1e-8, 1e8)


@dataclasses.dataclass(frozen=True)
class PosteriorBudget:
    """The target's GDP ``mu_total`` split as ``mu_total^2 = mu_sm^2 + mu_interval^2 + mu_path^2``:
    the preconditioner's second moment (already released or pending), the interval release after
    sampling, and the chains' path."""

    mu_total: float
    mu_sm: float
    mu_interval: float
    mu_path: float


def posterior_budget(mu_total: float, second_moment: SecondMoment, interval_share: float) -> PosteriorBudget:
    """The path's share of ``mu_total`` once the second moment's mu and ``interval_share`` of
    ``mu_total^2`` are taken; refused (one line) when nothing is left for the path."""
    mu_sm = 0.0 if second_moment.event is None else float(second_moment.event.mu)
    if mu_sm >= mu_total:
        raise ValueError(f"the second moment already spends mu = {mu_sm:.4g} of the target's mu = {mu_total:.4g}: "
                         "release it with a smaller share of the budget")
    if isinstance(interval_share, bool) or not (0.0 <= float(interval_share) < 1.0):
        raise ValueError(f"interval_share must lie in [0, 1), got {interval_share!r}")
    mu_int = math.sqrt(float(interval_share)) * mu_total
    if mu_sm ** 2 + mu_int ** 2 >= mu_total ** 2 * (1 - 1e-9):
        raise ValueError(f"interval_share = {interval_share:g} and the second moment's mu = {mu_sm:.4g} leave no budget "
                         f"for the path (target mu = {mu_total:.4g}): lower interval_share or precond_share")
    return PosteriorBudget(mu_total, mu_sm, mu_int, math.sqrt(mu_total ** 2 - mu_sm ** 2 - mu_int ** 2))


@dataclasses.dataclass(frozen=True)
class SensitivityBound:
    """The replace-one sensitivity of a posterior chain's mean gradient in its metric (units of the
    gradient in phi-coordinates, per unit beta): ``real`` in real arithmetic, and which bound gives it
    (``source``, one of the three labels below) and ``margin``, the float32 share added
    (:func:`~dp_infer.privacy.float32_margin.float32_gradient_margin`); ``planned`` is what the plan charges,
    ``real`` times ``1 + margin``."""

    CLIP = "per-example gradients clipped in the metric (2 tau / n)"
    ROWS = "admissible rows (block bound)"
    BALL = "row-norm ball"

    real: float
    source: str
    margin: float

    @property
    def planned(self) -> float:
        return self.real * (1.0 + self.margin)


@dataclasses.dataclass(frozen=True)
class PathCost:
    """A posterior-mode chain's privacy cost as a function of beta (public inputs only).

    ``sample_time`` and ``burn_in_time``: Langevin time; ``gamma``: the kinetic kernel's friction
    (1 overdamped; its windows scale by it); ``windows``: the adaptation windows' base Langevin times,
    or None for ``"auto"`` (from the planned metric's worst relaxation time); ``adapt_metric``: the
    metric is adapted from the chains' draws (then only the clip's bound holds, in every metric).
    """

    constants: LossConstants
    n: int
    second_moment: SecondMoment
    kappa_P: float
    prior_precision: np.ndarray
    rows: Any
    row_norm: float | None
    clip_radius: float | None
    adapt_metric: bool
    windows: tuple | None
    sample_time: float
    burn_in_time: float
    gamma: float
    friction: float | None
    num_chains: int

    @functools.cached_property
    def _second_moment_spectrum(self):
        sm = self.second_moment
        return None if sm.matrix is None else np.linalg.eigvalsh(0.5 * (sm.matrix + sm.matrix.T))

    def worst_relaxation(self, beta: float) -> float:
        """The planned metric's worst relaxation time at this beta (:mod:`dp_infer.routes.adaptation`)."""
        return worst_relaxation_time(beta, self.kappa_P, float(self.second_moment.noise_norm_bound),
                                     float(np.min(self.prior_precision)), self._second_moment_spectrum)

    def windows_at(self, beta: float) -> list:
        """The windows' Langevin times (before the kinetic scaling) at this beta."""
        return auto_windows(self.worst_relaxation(beta)) if self.windows is None else list(self.windows)

    def time_at(self, beta: float) -> float:
        """The whole Langevin time of a chain at this beta: burn-in, windows (the kinetic chain explores
        gamma times slower per unit of time, IAT 2 gamma / c: its windows scale so), settling, sampling."""
        t = self.sample_time + self.burn_in_time
        return t + (self.gamma * sum(self.windows_at(beta)) + SETTLE_TIME if self.adapt_metric else 0.0)

    def sensitivity_bound(self, beta: float, radius: float | None = None) -> SensitivityBound:
        """The replace-one sensitivity of the mean gradient in the metric at this beta, in real
        arithmetic, and which bound gives it: the metric's bound over the rows (or the row-norm ball),
        and with the clip ``2 tau / n``, ``tau = radius / sqrt(beta)`` (the only bound that holds in an
        adapted metric, unknown before sampling; else the smaller of the two, the clip at a tie)."""
        c = self.constants
        radius = self.clip_radius if radius is None else radius
        P = np.linalg.inv(precision_matrix(self.second_moment, beta, self.kappa_P, self.prior_precision))
        s = metric_gradient_sensitivity(P, self.n, link_derivative_bound=c.link_derivative_bound,
                                        grad_diff=c.grad_diff, rows=self.rows, row_norm=self.row_norm)
        source = SensitivityBound.ROWS if self.rows is not None else SensitivityBound.BALL
        if radius is not None:
            clip_bound = 2.0 * radius / (math.sqrt(beta) * self.n)  # every clipped ||C^T g|| <= tau
            if self.adapt_metric or clip_bound <= s:
                s, source = clip_bound, SensitivityBound.CLIP
        return SensitivityBound(s, source, float32_gradient_margin(self.n))

    def sensitivity(self, beta: float, radius: float | None = None) -> float:
        """The sensitivity the plan charges: :meth:`sensitivity_bound`'s real-arithmetic bound times
        ``1 +`` :func:`~dp_infer.privacy.float32_margin.float32_gradient_margin` for the chains' float32
        rounding."""
        return self.sensitivity_bound(beta, radius).planned

    def mu_of(self, beta: float, radius: float | None = None) -> float:
        """The path's GDP mu at this beta (increasing in beta: the windows only grow with it)."""
        return path_privacy.path_mu(beta, self.sensitivity(beta, radius), self.time_at(beta), self.friction,
                                    self.num_chains)


def coldest_beta(mu_of, mu_path: float) -> float:
    """The largest beta whose path costs at most ``mu_path`` (geometric bisection over
    :data:`BETA_RANGE`; ``mu_of`` increasing: beta * Delta_P(beta) grows with beta). The lower end
    is returned, so the plan's mu never exceeds ``mu_path``."""
    lo, hi = BETA_RANGE
    if mu_of(lo) > mu_path:
        raise ValueError("no inverse temperature meets the target at this ess: ask for fewer effective draws")
    for _ in range(200):  # geometric bisection; beta * Delta_P(beta) increases with beta
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if mu_of(mid) > mu_path else (mid, hi)
        if hi / lo < 1 + 1e-10:
            break
    return lo


def widest_clip_radius(cost: PathCost, beta: float, mu_path: float) -> float:
    """At a beta capped at n, the largest clip radius (from the planned one up to 1e6 times it)
    whose path still meets ``mu_path``: the budget left over buys less clipping (geometric bisection;
    mu grows with the radius)."""
    r_lo, r_hi = cost.clip_radius, cost.clip_radius * 1e6
    if cost.mu_of(beta, r_hi) <= mu_path:
        r_lo = r_hi
    for _ in range(200):
        if r_hi / r_lo < 1 + 1e-10:
            break
        mid = math.sqrt(r_lo * r_hi)
        ok = cost.mu_of(beta, mid) <= mu_path
        r_lo, r_hi = (mid, r_hi) if ok else (r_lo, mid)
    return r_lo
