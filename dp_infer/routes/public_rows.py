"""What feature rows declared public say about the interval release, before it reads a private row: its
weights, the public curvature and model-based ``J``, the metric that whitens them, the weights' radius, and the
intervals' width predicted from them (the plan's side of ``interval_curvature="public"``; the release itself,
which reads the rows, is :mod:`dp_infer.releases.newton`; the module doc of :mod:`dp_infer.routes.newton_release`
derives both).

The functions are pure: called on public rows, public points and public constants (as the plan and the forecast
call them) they are free. :func:`row_weights` and :func:`link_envelope` are also the release's rule for the
private rows (a row's weight depends on its features and public quantities only, never on its label), which
:mod:`dp_infer.releases.newton` applies to them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_positive
from ..losses.base import PerExampleLoss
from .newton_release import PUBLIC_WEIGHT_POWER, RHO_FACTOR, RHO_GRID, last_gradient_mu, link_bounds

__all__ = ["row_weights", "link_envelope", "public_curvature_terms", "public_hessian", "public_curvature",
           "whitening_metric", "predicted_width_ratio", "public_release_metric", "PublicReleaseDesign",
           "public_release_design", "public_interval_width_forecast"]


def row_weights(XC: np.ndarray, rho: float, power: int = 2, envelope=None) -> np.ndarray:
    """The release's weights ``w = min(1, (rho / (r ||C^T x||))^power)`` of rows ``XC = X C`` (a zero row weighs 1;
    ``power`` 2 for the private release, :data:`~dp_infer.routes.newton_release.PUBLIC_WEIGHT_POWER` for the
    public one; ``envelope``: each row's ``r`` in (0, 1], :func:`link_envelope` at the stage's point, None: 1):
    a function of the row's features and public quantities only, never of its label (the module doc of
    :mod:`dp_infer.routes.newton_release`)."""
    if power not in (1, 2):
        raise ValueError(f"power must be 1 or 2, got {power!r}")
    sq = np.sum(XC * XC, axis=1)
    if envelope is not None:
        sq = sq * np.square(envelope)
    safe = np.where(sq > 0, sq, 1.0)
    return np.where(sq > 0, np.minimum(1.0, rho * rho / safe if power == 2 else rho / np.sqrt(safe)), 1.0)


def link_envelope(loss: PerExampleLoss, z) -> np.ndarray | None:
    """Each row's ``r = sup_y |phi'(z, y)| / G`` (in (0, 1]) at scores ``z = <theta, x>`` for a loss whose behaviour
    declares its link's label-free derivative envelope (logistic: ``max(s, 1 - s)``, ``G = 1``), else None (``r = 1``
    for every row). A row weighed ``min(1, rho / (r ||C^T x||))`` has a weighted gradient of norm ``<= G rho``
    whatever its label, as with ``r = 1``, but keeps up to ``1 / r`` times more of itself: twice as much for a
    logistic row the model finds uncertain (``s = 1/2``). ``theta`` public (a release's stage point): public."""
    env = loss.behaviour.link_derivative_envelope
    bounds = link_bounds(loss)
    if env is None or bounds is None:
        return None
    r = np.asarray(env(np.asarray(z, dtype=np.float64))) / bounds[0]  # the envelope is handed float64 scores
    if not np.all((r > 0) & (r <= 1.0 + 1e-12)):
        raise ValueError(f"the {loss.name} loss's link_derivative_envelope must lie in (0, G = {bounds[0]}]")
    return np.minimum(r, 1.0)


def public_curvature_terms(loss: PerExampleLoss, z: np.ndarray) -> np.ndarray:
    """``phi''(z, 0)`` per row (label-free curvature), float64, floored at 0 (a convex link's rounding)."""
    with jax.enable_x64(True):
        zz = jnp.asarray(z, dtype=jnp.float64)
        k = np.asarray(jax.vmap(jax.grad(jax.grad(loss.index_fn)))(zz, jnp.zeros_like(zz)), dtype=np.float64)
    return np.maximum(k, 0.0)


def public_hessian(XA: np.ndarray, r: np.ndarray, *, l2: float = 0.0, A: np.ndarray | None = None) -> np.ndarray:
    """``mean_i r_i (XA)_i (XA)_i^T + l2 A^T A``: the public rows' curvature in the coordinates ``A`` maps to
    theta (``XA = X_public A``), ``r_i`` each row's weighted curvature (``w phi''`` for the loss's Hessian,
    ``w^2 phi''`` for the model-based J); the loss's L2 term is unweighted. The one formula of the public
    curvature (:func:`public_curvature`, in psi), the width predictor's and the surrogate's Newton step's (in
    draws' sds)."""
    H = (XA * r[:, None]).T @ XA / XA.shape[0]
    return H + l2 * (A.T @ A) if l2 else H


def public_curvature(loss: PerExampleLoss, X_public: np.ndarray, theta, C: np.ndarray, rho: float):
    """``(H, J)`` at ``theta`` from feature rows declared public (psi-coordinates, the loss's L2 term in H):
    ``H = mean w phi'' C^T x x^T C`` and the model-based ``J = mean w^2 phi'' C^T x x^T C``, with the release's
    weights ``w = min(1, rho / (r ||C^T x||))`` (:data:`~dp_infer.routes.newton_release.PUBLIC_WEIGHT_POWER`, ``r``
    the link's envelope at ``theta``, :func:`link_envelope`) computed on the public rows. Needs a label-free curvature
    (:func:`~dp_infer.routes.newton_release.public_curvature_refusal`): the labels passed to the link are
    zeros, which its curvature ignores. Reads no private row: free."""
    Xp = np.asarray(X_public, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    XC = Xp @ C
    z = Xp @ np.asarray(theta, dtype=np.float64)
    w = row_weights(XC, rho, PUBLIC_WEIGHT_POWER, link_envelope(loss, z))
    k = public_curvature_terms(loss, z)
    H = public_hessian(XC, w * k, l2=float(loss.l2 or 0.0), A=C)
    return H, public_hessian(XC, w * w * k)


def whitening_metric(curvature, prior_precision, n: int, *, purpose: str) -> np.ndarray:
    """``C`` (lower triangular) with ``C C^T = (F + diag(prior_precision) / n)^-1``: the metric that whitens a mean
    per-row curvature ``F`` (symmetrised) plus the prior's precision spread over ``n`` rows, which keeps the
    directions ``F`` does not span finite. Used by the loss route's public release (``F`` the public rows' mean
    Hessian) and the model route's weighted one (``F`` the model's expected information on the public rows).
    Raises ``ValueError`` naming ``prior_precision`` (and ``purpose``) where the sum is not positive definite."""
    F = np.asarray(curvature, dtype=np.float64)
    lam = np.broadcast_to(np.asarray(prior_precision, dtype=np.float64), (F.shape[0],))
    ev, U = np.linalg.eigh(0.5 * (F + F.T) + np.diag(lam) / n)
    if not np.all(ev > 0):
        raise ValueError(f"prior_precision must be positive for {purpose} (the metric needs it)")
    return np.linalg.cholesky((U / ev) @ U.T)


def predicted_width_ratio(loss: PerExampleLoss, X_public: np.ndarray, point, C: np.ndarray, rho: float,
                          prior_precision, n: int, mu_last: float) -> float:
    """The median over coordinates of the intervals' sd over the non-private posterior's, predicted from the
    public rows alone for weights' radius ``rho`` (the release's, :func:`link_envelope` at ``point`` included): the
    weighted model-based ``H_w = mean w phi'' C^T x x^T C`` and
    ``J_w = mean w^2 phi'' C^T x x^T C`` at ``point``, the last gradient's noise ``sd_g = 2 G rho / (n mu_last)``,
    the data's precision ``H_w (J_w / n + sd_g^2 I)^-1 H_w`` combined with the prior's (as
    :mod:`dp_infer.diagnostics.released_interval` combines them), against ``(n H_1 + Lambda)^-1`` with unit weights.
    Public rows, a released point and public constants: free."""
    return _width_predictor(loss, X_public, point, C, prior_precision, n, mu_last)(rho)


def _width_predictor(loss: PerExampleLoss, X_public: np.ndarray, point, C: np.ndarray, prior_precision, n: int,
                     mu_last: float):
    """``rho -> predicted_width_ratio(..., rho, ...)``, with the rows' curvature, the prior and the unit-weight
    reference (none of which depends on ``rho``) computed once."""
    Xp, C = np.asarray(X_public, dtype=np.float64), np.asarray(C, dtype=np.float64)
    d = Xp.shape[1]
    XC = Xp @ C
    z = Xp @ np.asarray(point, dtype=np.float64)
    k, r = public_curvature_terms(loss, z), link_envelope(loss, z)
    l2 = float(loss.l2 or 0.0)  # the loss's own L2 term: curvature for the estimate and its reference alike
    H1 = public_hessian(XC, k, l2=l2, A=C)
    lam = np.broadcast_to(np.asarray(prior_precision, dtype=np.float64), (d,))
    lp = C.T @ (lam[:, None] * C)
    ref = np.sqrt(np.diag(C @ np.linalg.inv(n * H1 + lp) @ C.T))
    G = link_bounds(loss)[0]

    def ratio(rho: float) -> float:
        w = row_weights(XC, rho, PUBLIC_WEIGHT_POWER, r)
        Hw, Jw = public_hessian(XC, w * k, l2=l2, A=C), public_hessian(XC, w * w * k)  # J: scores only
        sd_g = 2.0 * G * rho / (n * mu_last)
        Q = Hw @ np.linalg.solve(Jw / n + sd_g * sd_g * np.eye(d), Hw) + lp
        sd = np.sqrt(np.diag(C @ np.linalg.inv(0.5 * (Q + Q.T)) @ C.T))
        return float(np.median(sd / ref))

    return ratio


def public_release_metric(loss: PerExampleLoss, X_public: np.ndarray, point, prior_precision, n: int,
                          mu_last: float | None = None):
    """``(C, rho)`` for a public-curvature release: the metric that whitens the public curvature at ``point``
    (``C C^T = (H_pub + Lambda / n)^-1``, theta-coordinates, unweighted rows; the prior's precision over n keeps
    directions the public rows do not span finite) and the weights' radius ``rho``.

    Why not the run's metric: the gradient's noise is isotropic in the release's psi-coordinates, and the
    sampling error of the gradient there is ``C^T J C / n``. The run's metric whitens the TEMPERED posterior,
    whose prior share differs by coordinate, so the noise-to-sampling ratio differs by direction and the typical
    interval pays for the worst ones (measured on the Adult-shaped design, n = 30,000, d = 100, eps = 1: median
    width 2.6x the non-private on the coefficients it determines). Whitening the curvature makes the ratio the
    same in every direction the data inform (2.1x there, at the same share); rows of high leverage
    ``x^T H^-1 x`` (rare levels) are the ones the weights shrink.

    ``rho``: :data:`~dp_infer.routes.newton_release.RHO_FACTOR` times the root of the public rows' mean
    ``||C^T x||^2`` when ``mu_last`` (the last gradient's GDP mu) is None; given it, the factor in
    :data:`~dp_infer.routes.newton_release.RHO_GRID` that minimises :func:`predicted_width_ratio` on the public
    rows. Where leverage is heavy-tailed the mean is set by a few rows and a smaller radius is better (Adult:
    the 99th percentile of ``||C^T x||`` is 3.9x the root mean square; predicted median width 2.92x at factor 1,
    2.52x at 0.71). Public rows, a released point and public constants: free."""
    choice = public_release_design(loss, X_public, point, prior_precision, n, mu_last)
    return choice.chol, choice.rho


class PublicReleaseDesign(NamedTuple):
    """A public-curvature release's metric ``chol`` (C), weights' radius ``rho`` and, where the radius was chosen
    for a last gradient's mu, the median width ratio :func:`predicted_width_ratio` predicts at it (else None)."""
    chol: np.ndarray
    rho: float
    predicted_width: float | None


def public_release_design(loss: PerExampleLoss, X_public: np.ndarray, point, prior_precision, n: int,
                          mu_last: float | None = None) -> PublicReleaseDesign:
    """:func:`public_release_metric` with the predicted width of the radius it chose kept (the grid's minimum),
    so a forecast need not build the predictor again."""
    Xp = np.asarray(X_public, dtype=np.float64)
    d = Xp.shape[1]
    n = check_positive("n", n)
    lam = np.broadcast_to(np.asarray(prior_precision, dtype=np.float64), (d,))
    H = public_curvature(loss, Xp, np.asarray(point, dtype=np.float64), np.eye(d), 1e300)[0]
    C = whitening_metric(H, lam, n, purpose="a public-curvature release")
    XC = Xp @ C
    rho0 = float(np.sqrt(np.mean(np.sum(XC * XC, axis=1))))
    if mu_last is None:
        return PublicReleaseDesign(C, RHO_FACTOR * rho0, None)
    check_positive("mu_last", mu_last)
    predict = _width_predictor(loss, Xp, point, C, lam, n, mu_last)
    widths = [predict(f * rho0) for f in RHO_GRID]
    best = int(np.argmin(widths))
    return PublicReleaseDesign(C, float(RHO_GRID[best]) * rho0, float(widths[best]))


def public_interval_width_forecast(loss: PerExampleLoss, X_public: np.ndarray, prior_precision, n: int,
                                   mu_interval: float, point=None) -> float:
    """Before anything is charged: the median coordinate's interval sd over the non-private posterior's for a
    public-curvature release of GDP ``mu_interval``, read from the public rows as the release will read them
    (:func:`public_release_design` at ``point``: the radius it chooses and :func:`predicted_width_ratio` there, its
    last gradient's mu from :func:`~dp_infer.routes.newton_release.last_gradient_mu`). ``point`` (theta) defaults
    to the prior's centre (0): the release is made at the draws' mean, which is not known yet, and where the model
    separates rows well there, a logistic row carries less information for the same weight, so the run may measure
    somewhat wider (Adult, eps = 1, docs/results.md). Assumes the public rows are drawn like the private ones and
    the model is correctly specified. Unlike :func:`~dp_infer.routes.newton_release.interval_width_forecast` (the
    rows' norm spread evenly over ``d`` directions, a typical curvature), it sees the design's leverage and the
    weights."""
    Xp = np.asarray(X_public, dtype=np.float64)
    d = Xp.shape[1]
    try:
        lam = np.asarray(prior_precision, dtype=np.float64)  # None reads as nan: refused below
    except (TypeError, ValueError):  # not numbers
        lam = np.asarray(np.nan)
    if lam.shape not in ((), (d,)) or not np.all(np.isfinite(lam) & (lam > 0)):
        raise ValueError(f"prior_precision must be a number or {d} numbers in (0, inf) for the intervals' width "
                         f"forecast, got {prior_precision!r}")
    lam = np.broadcast_to(lam, (d,))
    theta = np.zeros(d) if point is None else np.asarray(point, dtype=np.float64)
    last = last_gradient_mu(check_positive("mu_interval", mu_interval), n=n)
    return public_release_design(loss, Xp, theta, lam, n, mu_last=last).predicted_width
