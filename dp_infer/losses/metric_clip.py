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
  ``1/2`` (the logistic's own is ``1/4``): its behaviour's ``clipped_curvature_factor`` is 2.
* huber(t) of the residual ``r = z - y``: huber with threshold ``min(t, a)`` (the residual's
  derivative clipped; for errors symmetric about 0 this keeps the location consistent);
* smoothed hinge(gamma), margin ``m``: unchanged for ``m >= 1 - a gamma``, tangent line of slope
  ``-a`` below (for ``a < 1``; a margin loss, not a likelihood: no consistency to keep).

Each link lives beside its loss (:mod:`dp_infer.losses.glm`) and is carried by the loss's behaviour
(``loss.behaviour.clipped_link``, :mod:`dp_infer.losses.behaviour`) with its parameters and its
curvature factor: a GLM loss of your own clips once its behaviour declares a link.

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
from .registry import BUILTIN_BEHAVIOURS

__all__ = ["CLIPPABLE_LOSSES", "CLIPPED_CURVATURE_FACTOR", "DEFAULT_CLIP_FACTOR", "clippable", "clipped_link",
           "clip_levels", "clipped_potential", "clipped_potential_of_rows", "clipped_row_share", "default_clip_radius",
           "resolve_clip_radius"]


#: the posterior mode's default clip radius is this multiple of sqrt(dim) (:func:`default_clip_radius`)
DEFAULT_CLIP_FACTOR = 1.0


def _builtin(field: str) -> dict:
    return {b.name: getattr(b, field) for b in BUILTIN_BEHAVIOURS if b.clippable}


#: the built-in losses with a clipped link, and each one's link ``f(z, y, a, params)``: read from
#: the losses' behaviours (``loss.behaviour.clipped_link``; the links live beside their losses)
CLIPPABLE_LOSSES: dict[str, Callable] = _builtin("clipped_link")

#: the clipped link's curvature bound over the loss's own (``sup |f''| / sup |phi''|``) of the built-in
#: clippable losses: the step size of a clipped plan uses it (the logistic's weighted link reaches 1/2
#: where its own is 1/4); read from ``loss.behaviour.clipped_curvature_factor``
CLIPPED_CURVATURE_FACTOR: dict[str, float] = _builtin("clipped_curvature_factor")


def clippable(loss: PerExampleLoss) -> bool:
    """Whether ``loss`` has a clipped closed form: a GLM loss (with its index function, not already
    clipped per example) whose behaviour carries a clipped link (``loss.behaviour.clipped_link``)."""
    return loss.behaviour.clippable and loss.index_fn is not None and loss.clip_norm is None


def clipped_link(loss: PerExampleLoss) -> Callable[[jax.Array, jax.Array, jax.Array], jax.Array]:
    """``f(z, y, a)``: the loss's link with its derivative bounded by ``a`` for every label
    (elementwise; how, per loss, in the module doc), from the loss's behaviour.

    Raises for a loss without one (:func:`clippable`)."""
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss, got {type(loss).__name__}")
    if not clippable(loss):
        raise ValueError(f"clipping in the metric needs a GLM loss whose behaviour has a clipped link (built in: "
                         f"{tuple(CLIPPABLE_LOSSES)}), got {loss.name!r}: pass clip_radius=None")
    return loss.behaviour.bound_clipped_link()


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
    The L2 term of the loss (if any) is added unclipped (it is the same for every row).
    ``V`` is :func:`clipped_potential_of_rows` with this dataset's rows bound."""
    f = clipped_link(loss)
    dtype = jnp.promote_types(jnp.asarray(X).dtype, jnp.float32)
    X = jnp.asarray(X, dtype=dtype)
    y = jnp.asarray(y, dtype=dtype)
    C = jnp.asarray(C, dtype=dtype)
    lam = jnp.asarray(prior_precision, dtype=dtype)
    XC = X @ C
    a = clip_levels(XC, tau)
    b = float(beta)
    data_free = _data_free_potential(loss, b, lam)
    V_rows = clipped_potential_of_rows(loss, beta=b, C=C, prior_precision=lam)

    def U(theta):
        return b * jnp.mean(f(X @ theta, y, a)) + data_free(theta)

    def V(phi):
        return V_rows(phi, XC, y, a)

    return U, V


def clipped_potential_of_rows(loss: PerExampleLoss, *, beta: float, C, prior_precision):
    """``V(phi, XC, y, a)``: the clipped chain's potential in phi-coordinates with the rows as arguments,
    ``beta mean_i f((XC)_i phi, y_i, a_i) + sum(prior_precision theta^2) / 2`` (+ the loss's L2 term) at
    ``theta = C phi``; ``XC`` the rows in phi-coordinates (``X @ C``), ``a`` their levels
    (:func:`clip_levels`). The one formula the chain runs (:func:`clipped_potential` binds its rows), so a
    measurement over neighbouring datasets (``benchmarks.float32_gradient``) computes what the chain
    computes; ``C`` and ``prior_precision`` in the dtype the rows have."""
    f = clipped_link(loss)
    b = float(beta)
    data_free = _data_free_potential(loss, b, prior_precision)

    def V(phi, XC, y, a):
        return b * jnp.mean(f(XC @ phi, y, a)) + data_free(C @ phi)

    return V


def _data_free_potential(loss: PerExampleLoss, beta: float, prior_precision):
    """``theta -> sum(prior_precision theta^2) / 2`` plus the loss's L2 term ``beta l2 |theta|^2 / 2``
    (unclipped: the same for every row)."""
    lam = prior_precision

    def data_free(theta):
        u = 0.5 * jnp.sum(lam * theta * theta)
        return u + 0.5 * loss.l2 * beta * jnp.sum(theta * theta) if loss.l2 else u

    return data_free


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
