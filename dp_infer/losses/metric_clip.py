"""Per-example gradients clipped in a preconditioner's metric: a Huberised GLM loss.

For a generalised linear loss ``l(theta; x, y) = phi(<theta, x>, y)`` the per-example gradient is
``g = phi'(z) x`` (``z = <theta, x>``). Run preconditioned Langevin in ``phi``-coordinates
(``theta = C phi``, ``P = C C^T``, fixed before sampling): the per-example gradient there is
``C^T g = phi'(z) C^T x``. Clipping it to norm ``tau``,

    C^T g  ->  C^T g * min(1, tau / ||C^T g||),

is the same as clipping the scalar ``phi'`` to ``[-a_x, a_x]`` with ``a_x = tau / ||C^T x||``
(a per-row level: a function of the row and public quantities only). For a convex ``phi`` the
clipped derivative is the derivative of a convex, C^1 "Huberised" link: ``phi`` itself where
``|phi'| <= a_x`` and its tangent line beyond the points where ``|phi'| = a_x``. So

* the clipped chain is EXACTLY unadjusted Langevin on the Gibbs posterior
  ``prior x exp(-beta mean_i phi_{a_i}(<theta, x_i>, y_i))`` of a convex modified loss: rows whose
  derivative stays inside the level are untouched; only high-leverage, high-residual rows are
  tempered (their loss grows linearly, not faster). NUTS can run on the same target as an oracle
  (:func:`huberised_potential` returns the value, not only the gradient);
* the replace-one sensitivity of the mean loss's gradient in ``phi``-coordinates is at most
  ``2 tau / n`` whatever the rows are (every clipped per-example gradient has norm <= tau).

The planner parametrises ``tau = r_clip / sqrt(beta)``: ``sqrt(beta) ||C^T g|| = sqrt(g^T (beta
P) g)`` and ``(beta P)^-1 = kappa_P S + Lambda / beta`` is the preconditioner's model of the
per-example curvature, so ``r_clip`` is the gradient's Mahalanobis radius in that (Fisher-like)
metric; for a calibrated model ``E[g^T H^-1 g] = d`` (the Fisher identity), so ``r_clip`` is
chosen as a multiple of ``sqrt(d)`` -- public, never from the data (DESIGN invariant 10).

Closed forms (``a > 0`` the level; where the link's own derivative bound is below ``a`` nothing is
clipped):

* logistic, margin ``m = (2y - 1) z``: ``softplus(-m)`` for ``m >= m_a``, and
  ``softplus(-m_a) - a (m - m_a)`` below, ``m_a = log((1 - a) / a)`` (where ``sigmoid(-m) = a``);
* huber(t) of the residual ``r = z - y``: huber with threshold ``min(t, a)``;
* smoothed hinge(gamma), margin ``m``: unchanged for ``m >= 1 - a gamma``, tangent line of slope
  ``-a`` below (for ``a < 1``).
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_positive
from .base import PerExampleLoss

__all__ = ["CLIPPABLE_LOSSES", "huberised_link", "clip_levels", "huberised_potential", "clipped_row_share"]


def _logistic(z, y, a, params):
    m = (2.0 * y - 1.0) * z
    clip = a < 1.0
    a_s = jnp.where(clip, a, 0.5)  # safe value where nothing is clipped (m_a = 0, unused)
    m_a = jnp.log1p(-a_s) - jnp.log(a_s)
    lin = jax.nn.softplus(-m_a) - a_s * (m - m_a)
    below = clip & (m < m_a)
    return jnp.where(below, lin, jax.nn.softplus(-jnp.where(below, m_a, m)))


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


#: built-in losses with a closed-form Huberised link, and the declared parameters it needs
CLIPPABLE_LOSSES: dict[str, Callable] = {"logistic": _logistic, "huber": _huber, "smoothed_hinge": _smoothed_hinge}


def _params(loss: PerExampleLoss) -> dict:
    if loss.name == "huber":
        return {"threshold": float(loss.constants.link_derivative_bound)}
    if loss.name == "smoothed_hinge":
        # phi'' <= 1 / gamma: M = R^2 / gamma (+ l2), recover gamma from the declared constants
        return {"smoothing": loss.row_norm ** 2 / (loss.constants.smoothness - loss.l2)}
    return {}


def huberised_link(loss: PerExampleLoss) -> Callable[[jax.Array, jax.Array, jax.Array], jax.Array]:
    """``f(z, y, a)``: the loss's link with its derivative clipped to ``[-a, a]`` (elementwise).

    Raises for a loss without a closed form here (``CLIPPABLE_LOSSES``)."""
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss, got {type(loss).__name__}")
    if loss.name not in CLIPPABLE_LOSSES or loss.index_fn is None or loss.clip_norm is not None:
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


def huberised_potential(loss: PerExampleLoss, X, y, *, beta: float, C, tau: float, prior_precision):
    """``(U, V)``: the potential of the clipped chain's target in theta- and phi-coordinates.

    ``U(theta) = beta mean_i f(<theta, x_i>, y_i, a_i) + sum(prior_precision theta^2) / 2`` with
    ``a_i = tau / ||C^T x_i||`` and ``V(phi) = U(C phi)`` (``X C`` formed once). ``grad V`` is the
    mean of per-example gradients clipped to ``tau`` in phi-coordinates, plus the prior's.
    The L2 term of the loss (if any) is added unclipped (it is the same for every row)."""
    f = huberised_link(loss)
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
    """NON-PRIVATE diagnostic (reads the rows): the share of rows whose gradient at ``theta`` is
    clipped. Never part of a release or a report (DESIGN invariants 2 and 10)."""
    X = np.asarray(X, dtype=np.float64)
    XC = X @ np.asarray(C, dtype=np.float64)
    a = np.asarray(clip_levels(jnp.asarray(XC), tau))
    z = jnp.asarray(X @ np.asarray(theta, dtype=np.float64))
    d = np.asarray(jax.vmap(jax.grad(lambda zz, yy: loss.index_fn(zz, yy)))(z, jnp.asarray(y, dtype=z.dtype)))
    return float(np.mean(np.abs(d) > a * (1 + 1e-9)))


def default_clip_radius(dim: int, factor: float) -> float:
    """``factor * sqrt(dim)``: the clip radius from public inputs only (see the module docstring)."""
    return check_positive("clip factor", factor) * math.sqrt(dim)
