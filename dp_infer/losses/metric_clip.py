"""Per-example gradients bounded in a preconditioner's metric: the clipped GLM losses.

For a generalised linear loss ``l(theta; x, y) = phi(<theta, x>, y)`` the per-example gradient is
``g = phi'(z) x`` (``z = <theta, x>``). Run preconditioned Langevin in ``phi``-coordinates
(``theta = C phi``, ``P = C C^T``): the per-example gradient there is ``C^T g = phi'(z) C^T x``,
and ``||C^T g|| <= tau`` for every row and label is the same as ``|phi'| <= a_x`` with the per-row
level ``a_x = tau / ||C^T x||`` (a function of the row and public quantities only). Each loss
below replaces ``phi'`` by a derivative bounded by ``a_x`` that is itself the derivative of a
convex, C^1 link ``f(z, y, a)``, so

* the chain is EXACTLY unadjusted Langevin on the Gibbs posterior
  ``prior x exp(-beta mean_i f(<theta, x_i>, y_i, a_i))``: rows whose derivative stays inside the
  level are untouched; NUTS can run on the same target as an oracle (:func:`clipped_potential`
  returns the value, not only the gradient);
* the replace-one sensitivity of the mean loss's gradient in ``phi``-coordinates is at most
  ``2 tau / n`` whatever the rows are (every per-example gradient has norm <= tau).

How the derivative is bounded (closed forms; where the link's own derivative bound is below ``a``
nothing changes):

* **logistic: a label-free weight (Fisher consistent).** ``phi' = s - y`` with ``s = sigmoid(z)``
  is replaced by ``w (s - y)``, ``w = min(1, a / max(s, 1 - s))``: the largest weight that keeps
  ``|w (s - y)| <= a`` for BOTH labels. The weight depends on the row and theta, never on the
  label, so ``E[w (s - y) | x] = 0`` at the true parameter of a correctly specified model: the
  clipped target's mode is a consistent estimator (a Mallows-type weighted likelihood), and the
  clip costs efficiency (rows of high leverage count less), not bias. Clipping the derivative
  itself (``clip(s - y, -a, a)``, DP-SGD's clip, the "Huberised" link) tempers only the rows with a
  large residual, which pulls the estimate toward 0 by an amount that does not shrink with n:
  measured on balanced synthetic data (d = 10, eps = 1, the plan's beta and radius) the Huberised
  target's mode sits 13 (n = 1e5) and 56 (n = 1e6) untempered sds from the data's MAP, the weighted
  one's 0.18 and 0.18 (docs/how-to/posterior.md, "Lever 1"). In the margin ``m = (2y - 1) z``, with
  ``m_k = log(a / (1 - a))`` for ``a > 1/2`` (else 0): ``softplus(-m)`` for ``|m| <= m_k``,
  ``a e^-m + c_+`` above, ``-a m + c_-`` below (constants for continuity). Its curvature is at most
  ``1/2`` (the logistic's own is ``1/4``): :data:`CLIPPED_CURVATURE_FACTOR`.
* huber(t) of the residual ``r = z - y``: huber with threshold ``min(t, a)`` (the residual's
  derivative clipped; for errors symmetric about 0 this keeps the location consistent);
* smoothed hinge(gamma), margin ``m``: unchanged for ``m >= 1 - a gamma``, tangent line of slope
  ``-a`` below (for ``a < 1``; a margin loss, not a likelihood: no consistency to keep).

The planner parametrises ``tau = r_clip / sqrt(beta)``: ``sqrt(beta) ||C^T g|| = sqrt(g^T (beta
P) g)`` and ``(beta P)^-1 = kappa_P S + Lambda / beta`` is the preconditioner's model of the
per-example curvature, so ``r_clip`` is the gradient's Mahalanobis radius in that (Fisher-like)
metric; for a calibrated model ``E[g^T H^-1 g] = d`` (the Fisher identity), so ``r_clip`` is
chosen as a multiple of ``sqrt(d)`` -- public, never from the data (DESIGN invariant 10).
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_positive
from .base import PerExampleLoss

__all__ = ["CLIPPABLE_LOSSES", "CLIPPED_CURVATURE_FACTOR", "DEFAULT_CLIP_FACTOR", "clippable", "clipped_link",
           "clip_levels", "clipped_potential", "clipped_row_share", "default_clip_radius", "resolve_clip_radius"]


def _logistic(z, y, a, params):
    """The logistic link with the label-free weight ``min(1, a / max(s, 1 - s))`` (module doc)."""
    m = (2.0 * y - 1.0) * z
    a1 = jnp.minimum(a, 1.0)  # a >= 1: nothing changes (|s - y| <= 1)
    big = a1 > 0.5
    a_s = jnp.where(big, a1, 0.75)  # a safe value where the knot is 0 (unused there)
    m_k = jnp.where(big, jnp.log(a_s) - jnp.log1p(-a_s), 0.0)  # sigmoid(m_k) = a for a > 1/2
    e_k = jnp.exp(-m_k)
    above = m >= m_k  # ties to the outer pieces: with a <= 1/2 the middle piece is empty (m_k = 0)
    below = (m < -m_k) & ~above
    c_hi = jax.nn.softplus(-m_k) - a1 * e_k  # continuity at m = m_k
    c_lo = jax.nn.softplus(m_k) - a1 * m_k  # continuity at m = -m_k
    m_mid = jnp.where(above | below, 0.0, m)  # a safe value outside the middle piece (no clip gradient)
    hi = a1 * jnp.exp(-jnp.where(above, m, m_k)) + c_hi
    lo = -a1 * jnp.where(below, m, -m_k) + c_lo
    return jnp.where(above, hi, jnp.where(below, lo, jax.nn.softplus(-m_mid)))


def _huber(z, y, a, params):
    t = jnp.minimum(params["threshold"], a)
    r = z - y
    ar = jnp.abs(r)
    return jnp.where(ar <= t, 0.5 * r * r, t * (ar - 0.5 * t))


def _smoothed_hinge(z, y, a, params):
    g = params["smoothing"]
    m = (2.0 * y - 1.0) * z
    a1 = jnp.minimum(a, 1.0)
    knee = 1.0 - a1 * g  # where the derivative reaches -a1 (inside the quadratic piece)
    quad = (1.0 - m) ** 2 / (2.0 * g)
    base = jnp.where(m >= 1.0, 0.0, jnp.where(m <= 1.0 - g, 1.0 - m - 0.5 * g, quad))
    lin = (1.0 - knee) ** 2 / (2.0 * g) - a1 * (m - knee)
    return jnp.where((a < 1.0) & (m < knee), lin, base)


#: built-in losses with a closed-form clipped link (module doc), and the declared parameters it needs
CLIPPABLE_LOSSES: dict[str, Callable] = {"logistic": _logistic, "huber": _huber, "smoothed_hinge": _smoothed_hinge}

#: the posterior mode's default clip radius is this multiple of sqrt(dim) (:func:`default_clip_radius`)
DEFAULT_CLIP_FACTOR = 1.0

#: the clipped link's curvature bound over the loss's own (``sup |f''| / sup |phi''|``): the step
#: size of a clipped plan uses it (the logistic's weighted link reaches 1/2 where its own is 1/4)
CLIPPED_CURVATURE_FACTOR: dict[str, float] = {"logistic": 2.0, "huber": 1.0, "smoothed_hinge": 1.0}


def _params(loss: PerExampleLoss) -> dict:
    if loss.name == "huber":
        return {"threshold": float(loss.constants.link_derivative_bound)}
    if loss.name == "smoothed_hinge":
        # phi'' <= 1 / gamma: M = R^2 / gamma (+ l2), recover gamma from the declared constants
        return {"smoothing": loss.row_norm ** 2 / (loss.constants.smoothness - loss.l2)}
    return {}


def clippable(loss: PerExampleLoss) -> bool:
    """Whether ``loss`` has a clipped closed form here: a built-in GLM loss of ``CLIPPABLE_LOSSES``
    with its index function, not already clipped per example."""
    return loss.name in CLIPPABLE_LOSSES and loss.index_fn is not None and loss.clip_norm is None


def clipped_link(loss: PerExampleLoss) -> Callable[[jax.Array, jax.Array, jax.Array], jax.Array]:
    """``f(z, y, a)``: the loss's link with its derivative bounded by ``a`` for every label
    (elementwise; how, per loss, in the module doc).

    Raises for a loss without a closed form here (``CLIPPABLE_LOSSES``)."""
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss, got {type(loss).__name__}")
    if not clippable(loss):
        raise ValueError(f"clipping in the metric needs one of the built-in GLM losses {tuple(CLIPPABLE_LOSSES)}, "
                         f"got {loss.name!r}: pass clip_radius=None")
    f, params = CLIPPABLE_LOSSES[loss.name], _params(loss)
    return lambda z, y, a: f(z, y, a, params)


def clip_levels(XC, tau: float):
    """Per-row levels ``a_i = tau / ||(X C)_i||`` (``inf`` for a zero row: nothing to clip).

    ``XC``: the rows in phi-coordinates (``X @ C``); ``tau``: the clip on ``||C^T g||``."""
    tau = check_positive("tau", tau)
    norms = jnp.sqrt(jnp.sum(XC * XC, axis=1))
    return jnp.where(norms > 0, tau / jnp.where(norms > 0, norms, 1.0), jnp.inf)


def clipped_potential(loss: PerExampleLoss, X, y, *, beta: float, C, tau: float, prior_precision):
    """``(U, V)``: the potential of the clipped chain's target in theta- and phi-coordinates.

    ``U(theta) = beta mean_i f(<theta, x_i>, y_i, a_i) + sum(prior_precision theta^2) / 2`` with
    ``a_i = tau / ||C^T x_i||`` and ``V(phi) = U(C phi)`` (``X C`` formed once). ``grad V`` is the
    mean of per-example gradients bounded by ``tau`` in phi-coordinates, plus the prior's.
    The L2 term of the loss (if any) is added unclipped (it is the same for every row)."""
    f = clipped_link(loss)
    dtype = jnp.promote_types(jnp.asarray(X).dtype, jnp.float32)
    X = jnp.asarray(X, dtype=dtype)
    y = jnp.asarray(y, dtype=dtype)
    C = jnp.asarray(C, dtype=dtype)
    lam = jnp.asarray(prior_precision, dtype=dtype)
    XC = X @ C
    a = clip_levels(XC, tau)
    b = float(beta)

    def data_free(theta):
        u = 0.5 * jnp.sum(lam * theta * theta)
        return u + 0.5 * loss.l2 * b * jnp.sum(theta * theta) if loss.l2 else u

    def U(theta):
        return b * jnp.mean(f(X @ theta, y, a)) + data_free(theta)

    def V(phi):
        theta = C @ phi
        return b * jnp.mean(f(XC @ phi, y, a)) + data_free(theta)

    return U, V


def clipped_row_share(loss: PerExampleLoss, X, y, theta, C, tau: float) -> float:
    """NON-PRIVATE diagnostic (reads the rows): the share of rows whose derivative at ``theta`` the
    clip changes (for the logistic loss: rows whose weight is below 1). Never part of a release or a
    report (DESIGN invariants 2 and 10)."""
    X = np.asarray(X, dtype=np.float64)
    XC = X @ np.asarray(C, dtype=np.float64)
    a = clip_levels(jnp.asarray(XC), tau)
    z = jnp.asarray(X @ np.asarray(theta, dtype=np.float64))
    yy = jnp.asarray(y, dtype=z.dtype)
    f = clipped_link(loss)
    own = np.asarray(jax.vmap(jax.grad(lambda zz, yv: loss.index_fn(zz, yv)))(z, yy))
    clipped = np.asarray(jax.vmap(jax.grad(f))(z, yy, a.astype(z.dtype)))
    return float(np.mean(np.abs(clipped - own) > 1e-9 * np.maximum(1.0, np.abs(own))))


def default_clip_radius(dim: int, factor: float = DEFAULT_CLIP_FACTOR) -> float:
    """``factor * sqrt(dim)``: the clip radius from public inputs only (see the module docstring)."""
    return check_positive("clip factor", factor) * math.sqrt(dim)


def resolve_clip_radius(clip_radius, loss: PerExampleLoss, dim: int) -> float | None:
    """``"auto"`` -> :func:`default_clip_radius` for a :func:`clippable` loss, else None; a number is
    returned as is (checked by the planner); None stays None. Public inputs only."""
    if isinstance(clip_radius, str):
        if clip_radius != "auto":
            raise ValueError(f"clip_radius must be 'auto', None or a number > 0, got {clip_radius!r}")
        return default_clip_radius(dim) if clippable(loss) else None
    return clip_radius
