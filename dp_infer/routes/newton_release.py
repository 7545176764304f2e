"""The posterior mode's interval release: Newton steps of a weighted data loss from the draws' mean.

A posterior-mode run's tempered draws locate the data's estimate only roughly: their mean sits
up to ``sqrt(n / beta)`` untempered sds away, pulled by the prior and, for a non-quadratic loss, by
the tempered target's skew (a logistic model at n = 5,000, eps = 1: 8 sds). Their covariance is no
guide to the data's curvature either: the tempered draws spread over a region where the loss is
flatter (there: 3x too flat). Newton steps of the data's own loss from the draws' mean close the
distance in a few steps (3 there, on the smooth logistic loss; the chain's clipped link has linear
pieces where Newton's method jumps). The points are post-processing of released draws; the
gradients, the curvatures and the scores' second moment come from the rows. This module releases
them with Gaussian mechanisms (:func:`dp_infer.releases.newton.release_newton_statistics`: this module
holds the plan's side, the schedule, the event and the forecasts, and reads no rows), all charged as
one part of the run's event (:func:`dp_infer.routes.posterior.plan_posterior`'s ``interval_share``).

The loss. A generalised linear loss ``phi(<theta, x>, y)`` with ``|phi'| <= G`` and
``0 <= phi'' <= kappa`` (the loss's declared link bounds), in the run's metric ``theta = C psi``
(C public: planned, or adapted from released draws), each row weighted by
``w_i = min(1, rho^2 / ||C^T x_i||^2)``: a weight that depends on the row and public quantities
only -- never on the label or theta -- so the weighted loss is smooth and convex, and its
estimating equation ``mean_i w_i phi'(z_i, y_i) x_i = 0`` holds at the true parameter of a
correctly specified GLM whatever the weights (a Fisher-consistent weighted likelihood). The
weights bound every row's contribution: the gradient ``w_i phi' C^T x_i`` has norm
``<= G min(||C^T x_i||, rho^2 / ||C^T x_i||) <= G rho`` and the curvature row
``sqrt(w_i phi'') C^T x_i`` squared norm ``<= kappa rho^2``. ``rho^2`` is :data:`RHO_FACTOR` ``^2``
times the rows' mean ``||C^T x||^2`` implied by the run's second moment (public), so most rows
keep weight 1.

The release, stage by stage (:data:`SCHEDULE`; each statistic a Gaussian mechanism, replace-one
sensitivities: a mean gradient ``2 G rho / n`` in L2, a gram of rows of squared norm ``<= b``:
``sqrt(2) b / n`` on the upper triangle, via :func:`~dp_infer.releases.second_moment.private_second_moment_of_gram`,
projected onto the PSD cone): at the point of each stage the curvature ``H`` and the gradient
``g``, then a Newton step ``point - C H^-1 g`` held inside the draws' bulk (:data:`TRUST_RADIUS`);
the last stage adds the scores' second moment ``J`` and its statistics form the interval
(:mod:`dp_infer.diagnostics.released_interval`). GDP composes: ``mu^2 = sum mu_k^2``.

Assumptions: replace-one neighbours with n public; the points, the weights and the metric are
public (functions of released draws, public inputs and this release's earlier stages: adaptive
composition); the noise is the float32 Gaussian the rest of the package draws (threat model).

**Curvature from public features** (``interval_curvature="public"``, :data:`PUBLIC_SCHEDULE`). For a
canonical GLM with unit dispersion (logistic, Poisson: ``LossBehaviour.label_free_curvature``) the link's
curvature ``phi''(z)`` does not depend on the label, so the weighted curvature
``H(theta) = mean_i w_i phi''(<theta, x_i>) C^T x_i x_i^T C`` is a function of the features only, and so
is the model-based scores' second moment ``J = mean_i w_i^2 phi''(<theta, x_i>) C^T x_i x_i^T C``, which
equals ``E[w^2 phi'^2 C^T x x^T C]`` where the model is correctly specified (``E[phi'^2 | x] = phi''``).
Given feature rows ``X_public`` the user declares public, drawn from the private rows' distribution,
both are computed from them at no privacy cost (same weights rule on the public rows), and only the
d-dimensional mean gradients are released from the private rows: the whole interval share of mu^2
goes to them (:data:`PUBLIC_INTERVAL_SHARE` of the run's mu^2 by default). Two more things change with the
curvature free. The path: each stage moves to the minimiser of the loss's public surrogate anchored at the
released gradient (:func:`dp_infer.releases.newton.public_surrogate_step`, each coordinate within
:data:`PUBLIC_STEP_BOX` draws' sds) instead of a linear step held within one draws' sd, so it reaches the
estimate from a draws' mean many data sds away (on the Adult-shaped design the linear path did not, and the
numeric columns' intervals covered 0.27). The metric: the release works in the coordinates that whiten the public
curvature at the draws' mean (:func:`dp_infer.routes.public_rows.public_release_metric`), with ``rho`` from the
public rows, rather than the run's metric, so the gradient's isotropic noise has the same ratio to the sampling
error in every direction the data inform; ``rho`` is the factor of :data:`RHO_GRID` (times the public rows' root
mean ``||C^T x||``) whose interval width, predicted from the public rows, is smallest
(:func:`dp_infer.routes.public_rows.predicted_width_ratio`). The weights: ``min(1, rho / ||C^T x||)``
(:data:`PUBLIC_WEIGHT_POWER` 1), not the private release's ``min(1, rho^2 / ||C^T x||^2)``: the square was there
so that the released curvature's rows ``sqrt(w phi'') C^T x`` have a bounded norm; with the curvature public only
the gradient's bound ``G rho`` is needed, which the first power gives, and it keeps more of each high-leverage
row's information (Adult, eps = 1, at the non-private MAP: predicted median width 2.54x with the square, 1.99x
with the first power). Where the loss declares its link's label-free derivative envelope (the logistic loss:
``max(s, 1 - s)``), each stage divides ``||C^T x||`` by it over ``G`` at the stage's public point
(:func:`dp_infer.routes.public_rows.link_envelope`): the weighted gradient is still within ``G rho`` whatever the
label, and a row the model finds uncertain keeps up to twice its weight (Adult: median width on the coefficients
the non-private posterior determines 1.69-1.84x without it, 1.47-1.65x with it; docs/results.md). Then no curvature signal-to-noise rule applies; the intervals' width over the sampling
error is set by the last gradient's noise, ``sqrt(1 + 4 d RHO_FACTOR^2 G^2 / (n mu_g^2 kappa_P))``
(:func:`interval_width_forecast` with ``curvature="public"``: it grows like ``d / (n mu^2)``, not like
the private curvature's ``d^3 / (n mu)^2`` noise-to-signal). The assumptions this adds: the public
rows' feature distribution is the private rows' (else H and J describe another population: the
intervals' centre and width are off by the difference), and, for ``J``, a correctly specified model
(the intervals are the model-based, not the sandwich, ones).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_positive, check_positive_int
from ..losses.base import PerExampleLoss
from ..privacy.events import GdpEvent
from .preconditioning import GRAM_SENSITIVITY_FACTOR

__all__ = ["NewtonRelease", "DEFAULT_INTERVAL_SHARE", "SCHEDULE", "RHO_FACTOR", "TRUST_RADIUS",
           "MIN_CURVATURE_SNR", "curvature_snr", "default_interval_share", "interval_width_forecast", "link_bounds",
           "residual_scores_mean_square", "RESIDUAL_LOSSES",
           "noise_floor", "newton_releasable", "newton_event",
           "last_gradient_mu", "weight_radius", "PUBLIC_SCHEDULE", "INTERVAL_CURVATURES",
           "schedule", "check_interval_curvature", "public_curvature_refusal", "PUBLIC_STEP_BOX", "PUBLIC_INTERVAL_SHARE",
           "RHO_GRID", "check_public_rows", "PUBLIC_WEIGHT_POWER", "weight_power"]

#: share of the target's mu^2 a posterior run reserves for the interval release by default: the
#: intervals' width is set by the last stage's gradient noise (its variance over the sampling
#: variance is about ``20 d / (n mu_g^2)``), while the draws only need to bring the first point
#: within Newton's reach, so the release gets the larger share
DEFAULT_INTERVAL_SHARE = 0.7

#: below this curvature signal to noise (:func:`curvature_snr`) a run reserves no interval release: the
#: released curvature would be noise in most directions and the intervals mostly the prior's, while the
#: budget would be taken from the draws. Measured (python -m benchmarks.intervals --adult 4 8): Adult
#: (d = 100, n = 30k) at eps = 4 and 8 (signal to noise 1.1 and 2.0) left 75 and 63 of 100
#: coordinates to the prior; logistic n = 5000, d = 5 at eps = 1 (4.9) covered 0.95 at 1.6x
MIN_CURVATURE_SNR = 4.0

#: the release's stages: the statistics released at each point, with their shares of its mu^2
SCHEDULE = ((("curvature", 0.06), ("gradient", 0.05)),
            (("curvature", 0.06), ("gradient", 0.05)),
            (("curvature", 0.06), ("gradient", 0.05)),
            (("curvature", 0.15), ("score", 0.05), ("gradient", 0.47)))

#: the stages with ``interval_curvature="public"``: the curvature and the scores' second moment come from
#: public feature rows (free), so every stage releases its gradient only. The last gradient sets the
#: intervals' width and gets most of the share; the stage before it sets how far the last point lies from
#: the weighted loss's minimiser (the last step's length: the long-step flag reads that stage's noise too)
PUBLIC_SCHEDULE = ((("gradient", 0.04),),
                   (("gradient", 0.06),),
                   (("gradient", 0.15),),
                   (("gradient", 0.75),))

#: the interval release's default share of the run's mu^2 with ``interval_curvature="public"``: each public
#: stage lands on the public surrogate's minimiser (:func:`dp_infer.releases.newton.public_surrogate_step`)
#: however far the draws' mean is, so the chains need only put it inside their bulk and the release gets more
#: than :data:`DEFAULT_INTERVAL_SHARE`
PUBLIC_INTERVAL_SHARE = 0.85

#: where the interval release's curvature comes from: ``"private"`` (released from the rows, the default)
#: or ``"public"`` (computed from ``X_public``, feature rows declared public; see the module doc)
INTERVAL_CURVATURES = ("private", "public")

#: the public-curvature release weighs a row ``min(1, (rho / ||C^T x||)^PUBLIC_WEIGHT_POWER)`` (the private one:
#: power 2, so that its curvature rows are bounded too); a release records its power (``weight_power``)
PUBLIC_WEIGHT_POWER = 1

#: ``rho^2`` is this factor squared times the rows' mean ``||C^T x||^2`` (rows beyond it weigh less)
RHO_FACTOR = 1.0

#: the factors of the public rows' root mean ``||C^T x||`` among which a public-curvature release picks its
#: weights' radius (:func:`dp_infer.routes.public_rows.public_release_metric`: the one whose predicted interval
#: width, from the public rows, is smallest)
RHO_GRID = tuple(float(2.0 ** (k / 4)) for k in range(-12, 5))

#: a Newton step before the last is shortened to this Mahalanobis radius in the draws' covariance:
#: the estimate lies inside the tempered posterior's bulk; a noisy curvature must not throw the point
#: out of it into a flat region where the next curvature is smaller still (measured: at n = 3000, d = 3,
#: eps = 1, ess = 200, a radius of 3 let 4 of 20 runs diverge to 15-20 sds, coverage 0.77; 1: 0.95)
TRUST_RADIUS = 1.0

#: a public-curvature stage (:func:`dp_infer.releases.newton.public_surrogate_step`) moves each coordinate of
#: theta at most this many draws' sds: the estimate lies inside the tempered draws' bulk, and the public
#: surrogate's minimiser is trusted over all of it (the private path's linear step, on a noisy curvature, only
#: within :data:`TRUST_RADIUS`); the box only stops a coordinate whose released gradient, pushed by noise, the
#: surrogate cannot reach
PUBLIC_STEP_BOX = 5.0


@dataclass(frozen=True)
class NewtonRelease:
    """What the interval release published (all public: noisy statistics and their noise scales).

    ``path``: every point (theta; the first is the draws' mean), the last being where the final
    statistics were taken; ``chol``: the metric's C; ``gradient``: the last noisy mean gradient in
    psi-coordinates (the loss's L2 term included); ``curvature`` / ``score``: the last noisy,
    PSD-projected ``H`` and ``J`` (psi); ``*_sd``: their noise sd per entry; ``rho``: the weights'
    radius; ``mu``: the whole release's GDP; ``n``: rows; ``loss``: the loss's name;
    ``curvature_source``: ``"private"`` (H and J released, noisy) or ``"public"`` (H and the model-based
    J computed from ``public_rows`` feature rows declared public, whose bytes hash to
    ``public_rows_sha256``: exact, sds 0); ``weight_power``: the rows' weights are ``min(1, (rho / ||C^T
    x||)^weight_power)`` (2: private curvature, and releases made before the public one's first power);
    ``weight_envelope``: True where each stage's weights divide ``||C^T x||`` by the link's label-free derivative
    envelope at the stage's point (:func:`dp_infer.routes.public_rows.link_envelope`; the intervals' weights: at the
    last point, ``path[-1]``), False (releases made before it, and losses without one): not;
    ``previous_gradient_sd``: the noise sd of the gradient of the
    stage before the last (public curvature: it sets the last step's expected length); ``centre``: public
    curvature only, the public surrogate's minimiser anchored at the last gradient (theta;
    :func:`dp_infer.releases.newton.public_surrogate_step`), the intervals' data centre in place of one linear
    Newton step from the last point (post-processing: free); None: the linear step (private curvature, and
    releases made before it was added)."""

    path: tuple
    chol: tuple
    gradient: tuple
    gradient_sd: float
    curvature: tuple
    curvature_sd: float
    score: tuple
    score_sd: float
    rho: float
    mu: float
    n: int
    loss: str
    curvature_source: str = "private"
    public_rows: int | None = None
    public_rows_sha256: str | None = None
    previous_gradient_sd: float | None = None
    centre: tuple | None = None
    weight_power: int = 2
    weight_envelope: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def link_bounds(loss: PerExampleLoss) -> tuple[float, float] | None:
    """``(G, kappa)``: the declared bounds on ``|phi'|`` and ``phi''`` of a generalised linear loss,
    or None where the loss declares none (public)."""
    if not isinstance(loss, PerExampleLoss) or loss.index_fn is None:
        return None
    c = loss.constants
    G = c.link_derivative_bound
    if G is None or not math.isfinite(G) or not math.isfinite(loss.row_norm):
        return None
    kappa = (c.smoothness - c.strong_convexity) / (loss.row_norm * loss.row_norm)
    return (float(G), float(kappa)) if math.isfinite(kappa) and kappa > 0 else None


def newton_releasable(loss: PerExampleLoss, num_features: int) -> bool:
    """Whether the release applies: a generalised linear loss with declared link bounds whose
    parameter has one coordinate per feature. Public inputs only."""
    return link_bounds(loss) is not None and loss.num_params(num_features) == num_features


def schedule(curvature: str = "private") -> tuple:
    """The release's stages for ``curvature`` (:data:`SCHEDULE` or :data:`PUBLIC_SCHEDULE`)."""
    if curvature not in INTERVAL_CURVATURES:
        raise ValueError(f"interval_curvature must be one of {INTERVAL_CURVATURES}, got {curvature!r}")
    return PUBLIC_SCHEDULE if curvature == "public" else SCHEDULE


def public_curvature_refusal(loss) -> str | None:
    """Why ``interval_curvature="public"`` cannot serve ``loss`` (one line), or None: it needs a generalised
    linear loss whose curvature does not depend on the label and whose scores' variance is its curvature
    under the model (``loss.behaviour.label_free_curvature``: logistic, Poisson; not Huber, whose curvature
    depends on the residual). Public inputs only."""
    if link_bounds(loss) is None:
        return "the interval release needs a generalised linear loss with declared link bounds"
    if not getattr(getattr(loss, "behaviour", None), "label_free_curvature", False):
        return (f"the {loss.name} loss's curvature depends on the label (or it declares no label-free curvature), "
                "so public features cannot give it; use interval_curvature='private'")
    return None


def check_interval_curvature(interval_curvature, loss, num_features: int, X_public, *,
                             sharded: bool = False) -> np.ndarray | None:
    """``interval_curvature`` checked by name, before anything is charged: ``None`` for ``"private"``, the
    public feature rows as a float64 array for ``"public"`` (which needs ``X_public`` with X's columns, finite,
    at least one row per column, a label-free curvature (:func:`public_curvature_refusal`) and one device)."""
    if interval_curvature not in INTERVAL_CURVATURES:
        raise ValueError(f"interval_curvature must be one of {INTERVAL_CURVATURES}, got {interval_curvature!r}")
    if interval_curvature == "private":
        return None
    why = public_curvature_refusal(loss)
    if why is not None:
        raise ValueError(f"interval_curvature='public': {why}")
    if sharded:
        raise ValueError("interval_curvature='public': the interval release runs on one device; this run's rows are "
                         "on a mesh")
    return check_public_rows(X_public, num_features)


def check_public_rows(X_public, num_features: int) -> np.ndarray:
    """``X_public`` as a finite float64 array with X's ``num_features`` columns and at least that many rows (and
    2), or a one-line ``ValueError`` naming it (checked before anything is charged; a loss's or a model's)."""
    if X_public is None:
        raise ValueError("interval_curvature='public' needs X_public (feature rows you declare public, drawn from the "
                         "private rows' distribution)")
    Xp = np.asarray(X_public, dtype=np.float64)
    if Xp.ndim != 2 or Xp.shape[1] != num_features:
        raise ValueError(f"interval_curvature='public': X_public must have X's {num_features} columns, got shape "
                         f"{Xp.shape}")
    if Xp.shape[0] < max(num_features, 2) or not np.all(np.isfinite(Xp)):
        raise ValueError(f"interval_curvature='public': X_public must be finite with at least "
                         f"{max(num_features, 2)} rows (one per column), got {Xp.shape[0]}")
    return Xp


def curvature_snr(n: int, d: int, mu: float, share: float = None) -> float:
    """The last curvature release's signal to noise, from public inputs: a typical eigenvalue of the
    weighted curvature in the metric (``kappa_P rho^2 / d`` with the planner's typical curvature
    ``kappa_P = kappa / 2``) over the spectral size of its noise (``2 sqrt(d)`` entries' sds,
    ``sd = sqrt(2) kappa rho^2 / (n mu_H)``): ``n mu_H / (4 sqrt(2) d^1.5)``, ``mu_H`` the last curvature's share
    of the release (:data:`SCHEDULE`) of ``share`` of ``mu^2``."""
    share = DEFAULT_INTERVAL_SHARE if share is None else share
    mu_h = math.sqrt(share * dict(SCHEDULE[-1])["curvature"]) * mu
    return n * mu_h / (4.0 * GRAM_SENSITIVITY_FACTOR * d ** 1.5)


def interval_width_forecast(n: int, d: int, mu: float, *, typical_curvature: float, share: float = None,
                            curvature: str = "private", link_bound: float = 1.0,
                            scores_mean_square: float | None = None) -> float:
    """The intervals' width over the non-private posterior's for a typical coordinate, from public
    inputs: ``sqrt(1 + 4 d RHO_FACTOR^2 G^2 / (n mu_g^2 j))`` (the last gradient's noise over the
    sampling variance; ``G`` the link's bound ``link_bound``, ``mu_g`` the last gradient's share of ``share`` of
    ``mu^2``, ``j`` the scores' mean square per unit ``(x^T v)^2``: ``scores_mean_square`` where the caller knows
    it (:func:`residual_scores_mean_square` for a regression loss with a declared residual scale), else the
    planner's typical curvature ``kappa_P`` stands in for it). Measured against it (docs/results.md): logistic
    n = 5000, d = 5, eps = 1: 1.53 forecast, 1.65 measured; n = 2000, d = 3: 1.74 and 2.06.

    ``curvature="public"``: the same expression with the last gradient's share of :data:`PUBLIC_SCHEDULE`
    (0.7 of the release instead of 0.47). The derivation: the centre's privacy noise has covariance
    ``H^-1 sd_g^2 H^-1`` with ``sd_g = 2 G rho / (n mu_g)``, its sampling error ``H^-1 J H^-1 / n``; in a
    typical direction ``J ~ j rho^2 / (d RHO_FACTOR^2)`` (the rows' mean ``||C^T x||^2`` spread over d
    directions, whatever the metric C), so the noise's variance over the sampling variance is
    ``4 d RHO_FACTOR^2 G^2 / (n mu_g^2 j)``, and the width ratio is the root of one plus it (no curvature
    noise: H and J are exact; H cancels)."""
    share = _default_share(curvature) if share is None else share
    j = typical_curvature if scores_mean_square is None else check_positive("scores_mean_square",
                                                                            scores_mean_square)
    mu_g2 = share * dict(schedule(curvature)[-1])["gradient"] * mu * mu
    return math.sqrt(1.0 + 4.0 * d * RHO_FACTOR ** 2 * link_bound ** 2 / (n * mu_g2 * j))


#: the losses whose link is a function of the residual ``<theta, x> - y``, for which a declared residual scale
#: gives the scores' mean square
RESIDUAL_LOSSES = ("huber", "squared")
#: the residual grid of the scores' mean square: this many points over +-RESIDUAL_GRID_SDS sds (trapezoid rule;
#: a kinked link such as Huber's converges as the grid's step squared, about 1e-7 relative here)
RESIDUAL_GRID_POINTS = 40001
RESIDUAL_GRID_SDS = 10.0


def residual_scores_mean_square(loss: PerExampleLoss, residual_scale: float) -> float:
    """``E[phi'(r)^2]`` for residuals ``r ~ N(0, residual_scale^2)``: the scores' mean square per unit ``(x^T v)^2`` of
    a regression loss (:data:`RESIDUAL_LOSSES`; Huber's ``phi'`` is the residual clipped at its threshold), by
    the trapezoid rule on a fine grid of the loss's own link (its kink rules out Gauss-Hermite).
    ``residual_scale`` is a public assumption (the residuals' sd at the estimate, in the labels' units: domain
    knowledge or earlier public data), never read from the private rows. Refused by name for a loss whose link is
    not a residual's."""
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss, got {type(loss).__name__}")
    name = loss.behaviour.name
    if name not in RESIDUAL_LOSSES or loss.index_fn is None:
        raise ValueError(f"residual_scale applies to a regression loss ({', '.join(RESIDUAL_LOSSES)}), got "
                         f"{name}: leave residual_scale=None (the model fixes its scores' spread)")
    try:
        sigma = float(residual_scale)
    except (TypeError, ValueError):
        sigma = float("nan")
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"residual_scale must be a number in (0, inf) (the residuals' sd), got {residual_scale!r}")
    t = np.linspace(-RESIDUAL_GRID_SDS, RESIDUAL_GRID_SDS, RESIDUAL_GRID_POINTS)
    with jax.enable_x64(True):
        r = jnp.asarray(sigma * t, dtype=jnp.float64)  # label 0 at index r: the residual is r
        score = np.asarray(jax.vmap(jax.grad(loss.index_fn))(r, jnp.zeros_like(r)), dtype=np.float64)
    density = np.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    return float(np.trapezoid(density * score * score, t))


def default_interval_share(loss, num_features: int, *, sharded: bool = False, n: int | None = None,
                           mu: float | None = None, curvature: str = "private") -> tuple[float, str | None]:
    """``(share, reason)``: :data:`DEFAULT_INTERVAL_SHARE` where the release applies
    (:func:`newton_releasable`, one device) and, given ``n`` and the target's ``mu``, where its
    curvature would carry information (:func:`curvature_snr` >= :data:`MIN_CURVATURE_SNR`); else 0
    and the reason, in one line. With ``curvature="public"`` no curvature is released, so the
    signal-to-noise rule does not apply, and the share is :data:`PUBLIC_INTERVAL_SHARE`. Public inputs only."""
    if sharded:
        return 0.0, "the interval release runs on one device; this run's rows are on a mesh"
    if not newton_releasable(loss, num_features):
        return 0.0, "the interval release needs a generalised linear loss with declared link bounds"
    if n is not None and mu is not None and schedule(curvature) is SCHEDULE:
        snr = curvature_snr(n, num_features, mu)
        if snr < MIN_CURVATURE_SNR:
            need = MIN_CURVATURE_SNR / snr
            return 0.0, (f"at n = {n}, d = {num_features} and this eps the released curvature would be noise (signal to "
                         f"noise {snr:.2f} < {MIN_CURVATURE_SNR:g}: it grows like n mu / d^1.5), so the run reserves no budget "
                         f"for it; about {need:.1f}x the rows or the GDP mu would do"
                         + (", or feature rows you can declare public (interval_curvature='public', X_public=...)"
                            if public_curvature_refusal(loss) is None else ""))
    return _default_share(curvature), None


def _default_share(curvature: str) -> float:
    """The release's default share of the run's mu^2 for a curvature source."""
    return PUBLIC_INTERVAL_SHARE if curvature == "public" else DEFAULT_INTERVAL_SHARE


def weight_power(curvature: str = "private") -> int:
    """The power of the rows' weights ``min(1, (rho / ||C^T x||)^power)`` for a curvature source: 2 for the
    private release (its curvature rows must be bounded too), :data:`PUBLIC_WEIGHT_POWER` for the public one."""
    return PUBLIC_WEIGHT_POWER if schedule(curvature) is PUBLIC_SCHEDULE else 2


def weight_radius(chol, second_moment) -> float:
    """``rho``: :data:`RHO_FACTOR` times the root of the rows' mean ``||C^T x||^2 = tr(C^T S C)``
    for the rows' second moment ``S`` (public: released or declared)."""
    C = np.asarray(chol, dtype=np.float64)
    S = np.asarray(second_moment, dtype=np.float64)
    return RHO_FACTOR * math.sqrt(max(float(np.trace(C.T @ S @ C)), 1e-300))


def _parts(mu: float, curvature: str = "private") -> list:
    return [(kind, math.sqrt(share) * mu, stage) for stage, parts in enumerate(schedule(curvature))
            for kind, share in parts]


def newton_event(mu: float, *, n: int, curvature: str = "private") -> GdpEvent:
    """The release's event, planned before any data is read (its noise scales follow from ``rho``,
    which the run's final metric fixes: recorded in the release). ``curvature="public"``: gradients
    only (:data:`PUBLIC_SCHEDULE`; the curvature and J come from public feature rows, free)."""
    mu = check_positive("mu", mu)
    n = check_positive_int("n", n)
    if schedule(curvature) is PUBLIC_SCHEDULE:
        return GdpEvent(mu=mu, label="newton_release (gradients of a weighted data loss near the estimate, for the "
                                     "intervals; curvature and scores' second moment from public feature rows)",
                        assumptions=(f"replace-one neighbours, n = {n} public; rows weighted by min(1, rho / "
                                     "||C^T x||) (label- and theta-free), so every gradient has ||C^T g|| <= G rho",
                                     "the points, the weights and the metric are post-processing of released draws "
                                     "and of this release's earlier stages",
                                     "the curvature and the scores' second moment are computed from feature rows the "
                                     "user declares public (X_public): no privacy cost"),
                        metadata={"parts": [{"statistic": k, "mu": v, "stage": st}
                                            for k, v, st in _parts(mu, curvature)],
                                  "n": n, "curvature": "public"})
    return GdpEvent(mu=mu, label="newton_release (curvatures, gradients and the scores' second moment of a weighted "
                                 "data loss near the estimate, for the intervals)",
                    assumptions=(f"replace-one neighbours, n = {n} public; rows weighted by min(1, rho^2 / ||C^T x||^2) "
                                 "(label- and theta-free), so every gradient has ||C^T g|| <= G rho and every "
                                 "curvature row squared norm <= kappa rho^2",
                                 "the points, the weights and the metric are post-processing of released draws and of "
                                 "this release's earlier stages"),
                    metadata={"parts": [{"statistic": k, "mu": v, "stage": st} for k, v, st in _parts(mu)], "n": n})


def last_gradient_mu(mu: float, *, n: int, curvature: str = "public") -> float:
    """The GDP mu of the release's last gradient (its final stage's), read from the event that is charged
    (:func:`newton_event`), so that whoever sizes the weights' radius for it uses the figure the release does."""
    return float(newton_event(mu, n=n, curvature=curvature).metadata["parts"][-1]["mu"])


def noise_floor(d: int, sd: float) -> float:
    """The spectral size of a released d x d matrix's noise (entries of sd ``sd``): ``2 sqrt(d) sd``.
    A released curvature's eigenvalues below it carry no information; they are floored there."""
    return 2.0 * math.sqrt(d) * sd
