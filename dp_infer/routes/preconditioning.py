"""Preconditioners fixed before sampling, and where their information comes from.

A preconditioned Langevin chain targets the same law with ``theta <- theta - h P grad U +
sqrt(2h) P^(1/2) xi``; a good ``P`` approximates the inverse Hessian of ``U = beta L + prior``, so
every direction relaxes at about the same rate and the step is no longer set by the stiffest
direction. ``P`` must not be computed from the private data unless that computation is itself an
accounted release (DESIGN invariant 1). Sources (:class:`SecondMoment`):

* ``"prior"`` -- no data: ``P = Lambda^-1`` from the prior precision alone;
* ``"public"`` -- ``X_public' X_public / m`` from rows that are public (seed 004 ch. 4's public-
  data preconditioning), free;
* ``"private"`` -- ``X' X / n + N(0, sigma^2)`` on the upper triangle (a Gaussian mechanism:
  replace-one sensitivity ``sqrt(2) R^2 / n`` (:data:`GRAM_SENSITIVITY_FACTOR`) over the
  admissible rows), symmetrised and projected onto the PSD cone (post-processing). It is charged as
  a :class:`~dp_infer.privacy.events.GdpEvent` in the same plan as the chain (GDP composes
  adaptively, so the chain may depend on the release).

The second moments computed from rows (public or private) are released by
:mod:`dp_infer.releases.second_moment`: this module holds what a plan needs (the type, the prior's and
the pending release's stand-ins, the metric), and reads no data.

From a second moment ``S`` the planner builds ``P(beta) = (beta kappa S + Lambda)^-1``: for a GLM
with ``|phi''| <= kappa`` (logistic: 1/4) ``beta kappa S + Lambda`` bounds the Hessian of U.

A fourth source is the chain itself (:func:`adapted_metric`): the covariance of draws the run has
already released. It costs nothing more (post-processing of an accounted release; GDP composes
adaptively), and with per-example gradients clipped in the metric
(:mod:`dp_infer.losses.metric_clip`) the sensitivity ``2 tau / n`` holds in every metric, so the
planned guarantee does not depend on which metric the adaptation picks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_delta, check_finite_array, check_positive, check_positive_int
from ..losses.base import ROW_NORM_SLACK
from ..privacy.events import GdpEvent

__all__ = ["GRAM_SENSITIVITY_FACTOR", "gram_sensitivity", "SecondMoment", "prior_second_moment", "second_moment_row_bound",
           "gaussian_spectral_bound", "pending_second_moment", "precision_matrix", "adapted_metric"]

#: the replace-one l2 sensitivity of the upper triangle (with its diagonal) of a gram ``sum_i v_i v_i^T``
#: whose vectors have ``||v||^2 <= b``, in units of ``b``: ``sqrt(2)``. Replacing ``v`` by ``v'`` changes
#: the gram by ``A = v v^T - v' v'^T``; the upper triangle's l2 norm is at most ``||A||_F`` and
#: ``||A||_F^2 = ||v||^4 + ||v'||^4 - 2 (v . v')^2 <= 2 b^2``, attained by two orthogonal vectors of the
#: largest norm. (The triangle inequality gives 2: loose by sqrt(2), the constant used before 2026-11-29.)
GRAM_SENSITIVITY_FACTOR = math.sqrt(2.0)


def gram_sensitivity(max_sq_norm: float, n: int) -> float:
    """The replace-one l2 sensitivity of the upper triangle of ``X' X / n`` for rows with
    ``||x||^2 <= max_sq_norm``: ``sqrt(2) max_sq_norm / n`` (:data:`GRAM_SENSITIVITY_FACTOR`). The
    release (:func:`~dp_infer.releases.second_moment.private_second_moment_of_gram`) and its stand-in
    (:func:`pending_second_moment`) both take their noise from it, so plans made before and after the
    release agree by construction."""
    return GRAM_SENSITIVITY_FACTOR * max_sq_norm / n


@dataclass(frozen=True)
class SecondMoment:
    """A (released or public) estimate of ``E[x x^T]`` and where it came from.

    ``noise_sd``: sd of the Gaussian noise per upper-triangle entry (0 unless private);
    ``noise_norm_bound``: a bound on the spectral norm of that noise holding with probability
    ``>= 1 - noise_bound_failure`` (used only for the step size, a stability matter).
    """

    matrix: np.ndarray | None
    source: str
    event: GdpEvent | None = None
    noise_sd: float = 0.0
    noise_norm_bound: float = 0.0
    noise_bound_failure: float = 0.0
    notes: tuple[str, ...] = field(default=())

    def describe(self) -> dict:
        return {"source": self.source, "noise_sd": self.noise_sd,
                "noise_norm_bound": self.noise_norm_bound, "noise_bound_failure": self.noise_bound_failure,
                "event": None if self.event is None else self.event.to_dict(), "notes": list(self.notes)}


def prior_second_moment() -> SecondMoment:
    """No data at all: the preconditioner is the prior covariance."""
    return SecondMoment(None, "prior", notes=("preconditioner from the prior precision only (no data)",))


def gaussian_spectral_bound(d: int, sd: float, failure: float) -> float:
    """P(||E||_2 > sd (2 sqrt(d) + t)) <= 2 exp(-t^2 / 2) for a symmetric Gaussian E whose
    upper-triangle entries are N(0, sd^2) (Bandeira and van Handel 2016, with constant 1; the
    bound is used for the step size only, never for privacy). ``failure`` in (0, 1)."""
    failure = check_delta(failure, "failure")
    t = math.sqrt(2.0 * math.log(2.0 / failure))
    return sd * (2.0 * math.sqrt(d) + t)


def pending_second_moment(n: int, dim: int, *, max_sq_norm: float, mu: float, failure: float = 1e-6) -> SecondMoment:
    """The stand-in for a :func:`~dp_infer.releases.second_moment.private_second_moment` release not made yet: no matrix, but its
    event and the public noise figures the release will carry (per-entry sd ``sqrt(2) R^2 / (n mu)`` and
    its spectral bound), so a plan made with it before the release (to validate and charge the run)
    has the same beta and windows as the plan made after it. Public inputs only."""
    n = check_positive_int("n", n)
    d = check_positive_int("dim", dim)
    R2 = check_positive("max_sq_norm", max_sq_norm)
    mu = check_positive("mu", mu)
    failure = check_delta(failure, "failure")
    sd = gram_sensitivity(R2, n) / mu
    return SecondMoment(None, "private (pending)", GdpEvent(mu=mu, label="private_second_moment"), sd,
                        gaussian_spectral_bound(d, sd, failure), failure)


def second_moment_row_bound(loss, rows=None) -> float:
    """The bound on ``||x||^2`` a release of X'X/n rests on: the admissible rows' largest squared norm,
    else the loss's ``row_norm`` with the slack its data check accepts
    (:data:`~dp_infer.losses.base.ROW_NORM_SLACK`), so no row that passed the check can fail the
    release's own check after the charge. ``inf`` for a loss without a row bound."""
    if rows is not None:
        return float(rows.max_norm()) ** 2
    return (float(loss.row_norm) * (1 + ROW_NORM_SLACK)) ** 2


def precision_matrix(second_moment: SecondMoment, beta: float, curvature: float, prior_precision,
                     *, noise_margin: float = 0.0) -> np.ndarray:
    """``beta curvature (S + noise_margin I) + Lambda``: the matrix whose inverse is ``P``."""
    lam = np.asarray(prior_precision, dtype=np.float64)
    d = lam.shape[0]
    A = np.diag(lam).astype(np.float64)
    if second_moment.matrix is not None:
        S = np.asarray(second_moment.matrix, dtype=np.float64)
        if S.shape != (d, d):
            raise ValueError(f"the second moment is {S.shape[0]} x {S.shape[1]} but the prior has {d} coordinates")
        A = A + beta * curvature * (S + noise_margin * np.eye(d))
    return 0.5 * (A + A.T)


def adapted_metric(theta_draws, *, current_chol, prior_precision) -> np.ndarray:
    """A wider preconditioner ``P`` from released draws: the current metric, expanded wherever the
    draws spread more than it assumes, never contracted.

    ``theta_draws``: shape ``(chains, draws, d)`` (or ``(draws, d)``), draws the run has released
    (post-processing only: no private data is read), made with the metric ``P = C C^T``,
    ``current_chol = C``. ``prior_precision``: the Gaussian prior's precision ``Lambda``.

    In the current coordinates ``phi = C^-1 theta`` the draws' pooled covariance (all chains, one
    mean: a slow direction's between-chain spread counts) has eigenpairs ``(w, v)``; the new metric
    is ``C V diag(max(w, 1)) V^T C^T``, its eigenvalues then capped at ``1 / min(Lambda)``.
    Why only expand: a metric too narrow in a direction slows the chain there (the privacy budget
    buys fewer effective draws), one too wide only makes it stiffer (smaller steps: compute). The
    sample covariance of a few hundred correlated draws in d ~ 100 under-estimates its smallest
    eigenvalues badly (Marchenko-Pastur), so contracting would trade a known-good metric for
    noise, while its spuriously large eigenvalues cost at most a few times the steps. The cap: for
    ``U = convex + Lambda / 2 ||theta||^2`` the target's covariance is at most ``Lambda^-1``
    (Brascamp-Lieb). Units: theta's.
    """
    th = check_finite_array("theta_draws", theta_draws)
    if th.ndim == 3:
        th = th.reshape(-1, th.shape[-1])
    if th.ndim != 2 or th.shape[0] < 2:
        raise ValueError(f"theta_draws must have shape (chains, draws, d) or (draws, d) with >= 2 draws, got "
                         f"{np.shape(theta_draws)}")
    d = th.shape[1]
    C = check_finite_array("current_chol", current_chol, ndim=2)
    lam = np.asarray(prior_precision, dtype=np.float64)
    lam = np.full(d, float(lam)) if lam.ndim == 0 else lam
    if lam.shape != (d,) or C.shape != (d, d):
        raise ValueError(f"prior_precision must have shape ({d},) and current_chol ({d}, {d})")
    phi = np.linalg.solve(C, th.T).T
    w, V = np.linalg.eigh(np.cov(phi, rowvar=False).reshape(d, d))
    B = C @ V
    P = (B * np.maximum(w, 1.0)) @ B.T
    ev, W = np.linalg.eigh(0.5 * (P + P.T))
    P = (W * np.minimum(ev, 1.0 / float(np.min(lam)))) @ W.T
    return 0.5 * (P + P.T)
