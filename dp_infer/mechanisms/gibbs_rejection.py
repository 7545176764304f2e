"""Exact draws from a Gibbs measure ``exp(-beta L(theta))`` restricted to an intersection of balls,
for an m-strongly convex L, by rejection sampling from a Gaussian envelope.

Envelope: for any anchor ``a`` and subgradient ``g`` of L at a, strong convexity gives
``L(theta) >= Q(theta) = L(a) + <g, theta - a> + (m/2)|theta - a|^2`` everywhere. Proposals are
drawn from ``exp(-beta Q)`` = ``N(a - g/m, I / (beta m))``; a proposal outside the set is
rejected, one inside is accepted with probability ``exp(-beta (L(theta) - Q(theta)))`` <= 1.
Accepted points have exactly the law ``exp(-beta L) 1_C / Z`` whatever the anchor: the anchor
(e.g. a minimiser computed from the data) changes only how many proposals are needed, which is
a running-time side channel the exponential mechanism's guarantee does not cover.

The declared m is checked on every proposal: ``L - Q < -tol`` means the strong convexity
the caller declared is false, and the draw is refused (an inexact sampler would void the pure
guarantee).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax, random

from .._validation import check_positive, check_positive_int
from ..randomness import gaussian_noise

__all__ = ["BallIntersection", "exact_gibbs_draw"]


class BallIntersection:
    """``{theta : |theta - c_i| <= r_i for all i}`` (closed, convex; float64 on the host)."""

    def __init__(self, centers, radii):
        c = np.atleast_2d(np.asarray(centers, dtype=np.float64))
        r = np.atleast_1d(np.asarray(radii, dtype=np.float64))
        if c.shape[0] != r.shape[0] or c.ndim != 2:
            raise ValueError(f"centers (k, p) and radii (k,) must agree, got {c.shape} and {r.shape}")
        if not (np.all(np.isfinite(c)) and np.all(r > 0)):
            raise ValueError("centers must be finite and radii must lie in (0, inf]")
        self.centers, self.radii = c, r

    @property
    def dim(self) -> int:
        return self.centers.shape[1]

    def diameter_bound(self) -> float:
        """An upper bound on the diameter: twice the smallest radius."""
        return float(2.0 * np.min(self.radii))

    def intersect(self, center, radius) -> "BallIntersection":
        return BallIntersection(np.vstack([self.centers, np.asarray(center, dtype=np.float64)[None]]),
                                np.append(self.radii, float(radius)))

    def contains(self, theta) -> bool:
        return bool(np.all(np.linalg.norm(self.centers - np.asarray(theta)[None], axis=1) <= self.radii))


MAX_BALLS = 32  # the ball list is padded to this length (radius inf) so one compilation serves all rounds
_COMPILED: dict = {}


def _draw_impl(mean_loss, m, batch, tol, max_proposals, key, data, beta, centers, radii, anchor):
    a = anchor
    La, g = jax.value_and_grad(mean_loss)(a, data)
    mean = a - g / m
    sd = 1.0 / jnp.sqrt(beta * m)

    def one(k):
        k1, k2 = random.split(k)
        th = mean + sd * gaussian_noise(k1, a.shape, a.dtype)
        inside = jnp.all(jnp.linalg.norm(centers - th[None], axis=1) <= radii)
        d = th - a
        gap = mean_loss(th, data) - (La + jnp.dot(g, d) + 0.5 * m * jnp.dot(d, d))
        bad = gap < -tol * (1.0 + jnp.abs(La))
        ok = inside & (jnp.log(random.uniform(k2, (), a.dtype)) <= -beta * jnp.maximum(gap, 0.0))
        return th, ok, bad & inside

    def cond(c):
        return jnp.logical_not(c[1]) & jnp.logical_not(c[4]) & (c[3] < max_proposals)

    def body(c):
        k, _, th, used, viol = c
        k, sub = random.split(k)
        ths, oks, bads = jax.vmap(one)(random.split(sub, batch))
        first = jnp.argmax(oks)
        any_ok = jnp.any(oks)
        n_used = jnp.where(any_ok, first + 1, batch).astype(a.dtype)
        return (k, any_ok, jnp.where(any_ok, ths[first], th), used + n_used, viol | jnp.any(bads))

    init = (key, jnp.zeros((), bool), jnp.zeros_like(a), jnp.zeros((), a.dtype), jnp.zeros((), bool))
    _, done, theta, used, viol = lax.while_loop(cond, body, init)
    return theta, done, used, viol


def exact_gibbs_draw(key, mean_loss: Callable, data, domain: BallIntersection, *, beta: float,
                     strong_convexity: float, anchor, batch: int = 8, max_proposals: float = 1e8,
                     tol: float = 1e-9):
    """One exact draw of ``exp(-beta L) 1_domain`` (float64); returns (theta, proposals).

    :param mean_loss: ``(theta, data) -> L(theta)`` (JAX, float64), m-strongly convex on R^p;
        pass the same function object across calls to reuse the compilation.
    :param data: pytree of arrays the loss reads (e.g. ``(X, y)``).
    :param anchor: any point (the envelope's tangent point); a minimiser makes it tight for a
        quadratic L.
    :param max_proposals: stop with an error rather than loop for ever (no draw is released
        then; the error says the envelope is too loose for these inputs).
    """
    beta = check_positive("beta", beta)
    m = check_positive("strong_convexity", strong_convexity)
    b = check_positive_int("batch", batch)
    k = domain.centers.shape[0]
    if k > MAX_BALLS:
        raise ValueError(f"at most {MAX_BALLS} balls are supported, got {k}")
    centers = np.zeros((MAX_BALLS, domain.dim))
    centers[:k] = domain.centers
    radii = np.full(MAX_BALLS, np.inf)
    radii[:k] = domain.radii
    ck = (mean_loss, m, b, tol, float(max_proposals))
    if ck not in _COMPILED:
        _COMPILED[ck] = jax.jit(lambda *args, _ck=ck: _draw_impl(*_ck, *args))
    with jax.enable_x64(True):
        data = jax.tree_util.tree_map(lambda v: jnp.asarray(v, jnp.float64), data)
        theta, done, used, viol = _COMPILED[ck](key, data, jnp.float64(beta), jnp.asarray(centers),
                                                 jnp.asarray(radii), jnp.asarray(anchor, jnp.float64))
        done, viol, used = bool(done), bool(viol), float(used)
        theta = np.asarray(theta)
    if viol:
        raise ValueError("strong_convexity is not a valid lower curvature of the loss: the quadratic envelope "
                         "lies above it at a proposal (the declared m is false)")
    if not done:
        raise RuntimeError(f"no proposal accepted after {used:.3g}: the Gaussian envelope is too loose here")
    return theta, used
