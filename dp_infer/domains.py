"""Parameter sets C for the sampler: projection, membership, diameter, uniform draws.

All domains act on a flat parameter vector of length ``dim`` (float arrays, JAX or NumPy).
Diameters are Euclidean (l2) unless stated; ``inf`` for an unbounded set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from ._validation import check_finite_array, check_positive, check_positive_int

__all__ = ["Domain", "Euclidean", "L2Ball", "Box", "covers"]


class Domain:
    """Base class: a closed convex subset of R^dim."""

    dim: int

    @property
    def diameter(self) -> float:
        """l2 diameter sup ||a - b||_2 over the set (inf if unbounded)."""
        raise NotImplementedError

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.diameter)

    def project(self, theta: jax.Array) -> jax.Array:
        """Euclidean projection onto the set (identity inside it)."""
        raise NotImplementedError

    def contains(self, theta, tol: float = 1e-9) -> bool | jax.Array:
        """True where theta lies in the set up to ``tol``; works on a trailing axis of size dim."""
        theta = jnp.asarray(theta)
        return jnp.linalg.norm(theta - self.project(theta), axis=-1) <= tol

    def sample_uniform(self, key: jax.Array, shape: tuple[int, ...] = ()) -> jax.Array:
        """Uniform draws on the set, shape ``shape + (dim,)`` (bounded sets only)."""
        raise NotImplementedError

    def default_init(self) -> jax.Array:
        """A data-independent initial point inside the set."""
        raise NotImplementedError

    def lq_diameter(self, q: float) -> float:
        """l_q diameter, used by purification (seed 003)."""
        raise NotImplementedError

    def describe(self) -> dict:
        return {"kind": type(self).__name__, "dim": self.dim, "diameter": self.diameter}


@dataclass(frozen=True)
class Euclidean(Domain):
    """All of R^dim (no projection)."""

    dim: int

    def __post_init__(self):
        check_positive_int("dim", self.dim)

    @property
    def diameter(self) -> float:
        return math.inf

    def project(self, theta):
        return theta

    def contains(self, theta, tol: float = 1e-9):
        theta = jnp.asarray(theta)
        return jnp.all(jnp.isfinite(theta), axis=-1)

    def sample_uniform(self, key, shape=()):
        raise ValueError("Euclidean domain is unbounded: it has no uniform distribution")

    def default_init(self):
        return jnp.zeros(self.dim)

    def lq_diameter(self, q: float) -> float:
        return math.inf


@dataclass(frozen=True)
class L2Ball(Domain):
    """{theta : ||theta - center||_2 <= radius}."""

    dim: int
    radius: float
    center: np.ndarray | None = field(default=None)

    def __post_init__(self):
        check_positive_int("dim", self.dim)
        object.__setattr__(self, "radius", check_positive("radius", self.radius))
        c = np.zeros(self.dim) if self.center is None else check_finite_array("center", self.center, ndim=1)
        if c.shape != (self.dim,):
            raise ValueError(f"center must have shape ({self.dim},), got {c.shape}")
        object.__setattr__(self, "center", c)

    @property
    def diameter(self) -> float:
        return 2.0 * self.radius

    def project(self, theta):
        c = jnp.asarray(self.center, dtype=jnp.result_type(theta))
        diff = theta - c
        norm = jnp.linalg.norm(diff, axis=-1, keepdims=True)
        scale = jnp.minimum(1.0, self.radius / jnp.maximum(norm, 1e-300))
        return c + diff * scale

    def sample_uniform(self, key, shape=()):
        kd, kr = jax.random.split(key)
        g = jax.random.normal(kd, shape + (self.dim,))
        g = g / jnp.linalg.norm(g, axis=-1, keepdims=True)
        u = jax.random.uniform(kr, shape + (1,))
        return jnp.asarray(self.center) + self.radius * u ** (1.0 / self.dim) * g

    def default_init(self):
        return jnp.asarray(self.center)

    def lq_diameter(self, q: float) -> float:
        # l_q diameter of an l2 ball of radius r: 2 r d^{max(0, 1/q - 1/2)}
        if q == math.inf:
            return 2.0 * self.radius
        return 2.0 * self.radius * self.dim ** max(0.0, 1.0 / q - 0.5)

    def describe(self) -> dict:
        return {**super().describe(), "radius": self.radius, "center": self.center.tolist()}


@dataclass(frozen=True)
class Box(Domain):
    """Axis-aligned box prod_i [lower_i, upper_i]."""

    lower: np.ndarray
    upper: np.ndarray

    def __post_init__(self):
        lo = check_finite_array("lower", np.atleast_1d(self.lower), ndim=1)
        hi = check_finite_array("upper", np.atleast_1d(self.upper), ndim=1)
        if lo.shape != hi.shape:
            raise ValueError(f"lower and upper must have the same shape, got {lo.shape} and {hi.shape}")
        if np.any(hi <= lo):
            raise ValueError("upper must exceed lower in every coordinate")
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)

    @classmethod
    def cube(cls, dim: int, half_width: float) -> "Box":
        check_positive_int("dim", dim)
        h = check_positive("half_width", half_width)
        return cls(-h * np.ones(dim), h * np.ones(dim))

    @property
    def dim(self) -> int:  # type: ignore[override]
        return int(self.lower.shape[0])

    @property
    def diameter(self) -> float:
        return float(np.linalg.norm(self.upper - self.lower))

    def project(self, theta):
        return jnp.clip(theta, jnp.asarray(self.lower), jnp.asarray(self.upper))

    def sample_uniform(self, key, shape=()):
        u = jax.random.uniform(key, shape + (self.dim,))
        return jnp.asarray(self.lower) + u * jnp.asarray(self.upper - self.lower)

    def default_init(self):
        return jnp.asarray(0.5 * (self.lower + self.upper))

    def lq_diameter(self, q: float) -> float:
        w = self.upper - self.lower
        if q == math.inf:
            return float(w.max())
        return float(np.sum(w**q) ** (1.0 / q))

    def describe(self) -> dict:
        return {**super().describe(), "lower": self.lower.tolist(), "upper": self.upper.tolist()}


def covers(outer: Domain | None, inner: Domain, tol: float = 1e-12) -> bool:
    """True when ``inner`` is a subset of ``outer`` (``outer`` None or unbounded: all of R^dim).

    Exact for L2Ball / Box in either role (a ball inside a box: its centre +- radius per
    coordinate; a box inside a ball: its farthest corner). Any other pair counts as not covered.
    ``tol`` is relative to the outer set's size (float rounding only).
    """
    if outer is None or isinstance(outer, Euclidean):
        return True
    if outer.dim != inner.dim or not inner.bounded:
        return False
    slack = tol * max(1.0, outer.diameter)
    if isinstance(outer, L2Ball):
        if isinstance(inner, L2Ball):
            return float(np.linalg.norm(inner.center - outer.center)) + inner.radius <= outer.radius + slack
        if isinstance(inner, Box):
            far = np.maximum(np.abs(inner.lower - outer.center), np.abs(inner.upper - outer.center))
            return float(np.linalg.norm(far)) <= outer.radius + slack
        return False
    if isinstance(outer, Box):
        if isinstance(inner, L2Ball):
            lo, hi = inner.center - inner.radius, inner.center + inner.radius
        elif isinstance(inner, Box):
            lo, hi = inner.lower, inner.upper
        else:
            return False
        return bool(np.all(lo >= outer.lower - slack) and np.all(hi <= outer.upper + slack))
    return False
