"""Per-example losses that carry the constants the privacy analysis needs.

A loss is ``ell(theta, x, y) -> scalar`` for one example, with ``theta`` a flat parameter vector.
Constants (seed-001 digest §2.2), all with respect to replace-one neighbouring datasets:

* ``lipschitz`` L: sup over the domain and the data bounds of ||grad ell(theta; d)||_2.
* ``grad_diff`` G: sup ||grad ell(theta; d) - grad ell(theta; d')||_2 (G <= 2L). The gradient
  sensitivity of the mean loss is G / n.
* ``smoothness`` M: Lipschitz constant of grad ell (None if unknown).
* ``strong_convexity`` m: from an explicit L2 regulariser only (data curvature is never assumed).
* ``value_range``: sup - inf of ell over the domain (needed by the pure-eps route; None if unbounded).
* ``clipped``: the gradients are clipped per example (:func:`clipped_loss`). Clipping keeps the
  sensitivity but breaks the gradient map's contraction, so routes that need a contraction
  (last iterate, stationary) refuse such losses.
* ``smoothness_is_declared``: M was declared by the user and is not checked by the library; a
  guarantee that needs it states it as an assumption.
* ``convex``: every per-example loss is convex in theta (declared; True for every built-in loss,
  False by default for a custom one). Routes that need convexity (the proximal sampler) refuse a
  loss that does not declare it.
* ``link_derivative_bound``: for a generalised linear loss ``phi(<theta, x>, y)``, a bound ``a`` on
  ``|phi'|`` (the gradient is ``phi' x``). It lets a sensitivity be computed over the rows that can
  occur, in any metric (:mod:`dp_infer.privacy.metric_sensitivity`); None for other losses.

A generalised linear loss also carries ``index_fn = phi`` (vectorised over rows): the empirical
loss is then ``mean(phi(X @ theta, y))``, one matrix product (the same function as the per-example
``fn``, evaluated faster), and a linear reparametrisation ``theta = C phi`` folds ``C`` into the
data once (``X C``) instead of on every step (:meth:`dp_infer.potentials.GibbsPotential.reparametrised`).

Constants come from *declared* bounds on the data (row norm, label range) and are enforced:
``check_data`` refuses rows or labels outside the declared bounds (nothing is clipped silently);
:func:`dp_infer.datasets.clip_rows` clips rows and reports how many it clipped.
For a user loss, :func:`clipped_loss` clips per-example gradients inside ``jax.grad`` so the
sensitivity holds for the function actually run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_finite_array, check_nonnegative, check_positive, check_positive_int
from ..domains import Domain, Euclidean
from .behaviour import CUSTOM, LossBehaviour
from .row_blocks import blocked_loss_sum, clip_tree, clipped_mean


__all__ = ["LossConstants", "PerExampleLoss", "ExampleLoss", "glm_loss", "domain_radius", "constants_with_l2",
           "clipped_loss", "clipped_fraction", "with_l2", "ROW_NORM_SLACK"]

#: relative slack of every row-norm check (float rounding of rows normalised to the bound): rows with
#: ``||x|| <= row_norm * (1 + ROW_NORM_SLACK)`` are accepted, and a release whose sensitivity rests on
#: the rows' norms uses that bound (:func:`dp_infer.infer.posterior.fit_posterior`'s second moment)
ROW_NORM_SLACK = 1e-6

ExampleLoss = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


@dataclass(frozen=True)
class LossConstants:
    """Constants of a per-example loss on a domain, under declared data bounds."""

    lipschitz: float
    grad_diff: float
    smoothness: float | None = None
    strong_convexity: float = 0.0
    value_range: float | None = None
    clipped: bool = False
    smoothness_is_declared: bool = False
    link_derivative_bound: float | None = None
    convex: bool = False

    def gradient_sensitivity(self, n: int) -> float:
        """sup_theta ||grad L(theta; D) - grad L(theta; D')|| for the mean loss over n examples."""
        return self.grad_diff / check_positive_int("n", n)

    def require_finite_grad_diff(self) -> None:
        """Refuse (ValueError) a G that is not a finite number > 0: every gradient-noise route divides it by n."""
        G = self.grad_diff
        if not math.isfinite(G) or G <= 0:
            raise ValueError(f"the loss has no finite gradient-difference bound G (grad_diff = {G!r}; must be a "
                             "finite number > 0): declare data bounds (row_norm, label range), use a bounded "
                             "domain, or use clipped_loss()")

    def as_dict(self) -> dict:
        return {
            "lipschitz": self.lipschitz,
            "grad_diff": self.grad_diff,
            "smoothness": self.smoothness,
            "strong_convexity": self.strong_convexity,
            "value_range": self.value_range,
            "clipped": self.clipped,
            "smoothness_is_declared": self.smoothness_is_declared,
            "link_derivative_bound": self.link_derivative_bound,
            "convex": self.convex,
        }


@dataclass(frozen=True)
class PerExampleLoss:
    """A per-example loss with its constants and declared data bounds.

    ``fn(theta, x, y)`` is the loss of one example (``theta`` flat, ``x`` a feature row,
    ``y`` a label). ``mean(theta, X, y)`` is the empirical loss L(theta; D) = (1/n) sum ell.
    ``l2`` adds (l2/2)||theta||^2 to every example (strong convexity l2, same for all examples,
    so it does not change G).
    """

    name: str
    fn: ExampleLoss
    constants: LossConstants
    row_norm: float
    label_check: Callable[[np.ndarray], None] | None = None
    l2: float = 0.0
    domain: Domain | None = None
    num_params_fn: Callable[[int], int] = field(default=lambda d: d)
    clip_norm: float | None = None
    index_fn: Callable[[jax.Array, jax.Array], jax.Array] | None = None
    #: what the loss does beyond its value and constants (clip link, prediction, CLI name):
    #: :mod:`dp_infer.losses.behaviour`; set by each built-in loss's constructor
    behaviour: LossBehaviour = CUSTOM

    def num_params(self, num_features: int) -> int:
        """Length of the flat parameter vector for data with ``num_features`` columns."""
        return self.num_params_fn(num_features)

    def example(self, theta, x, y):
        return self._with_l2_term(self.fn(theta, x, y), theta)

    def _with_l2_term(self, base, theta):
        return base + 0.5 * self.l2 * jnp.sum(theta**2) if self.l2 else base

    def per_example(self, theta, X, y):
        """Vector of per-example losses, shape (n,)."""
        if self.index_fn is not None:
            return self.index_losses(X @ theta, y, theta)
        return jax.vmap(self.example, in_axes=(None, 0, 0))(theta, X, y)

    def index_losses(self, z, y, theta):
        """Per-example losses of a generalised linear loss from its linear index ``z = X theta``
        (``theta`` enters only the L2 term). Raises for a loss without ``index_fn``."""
        if self.index_fn is None:
            raise ValueError(f"the {self.name} loss is not declared generalised linear (no index_fn)")
        return self._with_l2_term(self.index_fn(z, y), theta)

    def mean(self, theta, X, y, *, block_rows: int | None = None):
        """Empirical loss L(theta; D) = mean of per-example losses.

        ``block_rows`` evaluates it (and its gradient, clipped or not) ``block_rows`` rows at a
        time (:mod:`dp_infer.losses.row_blocks`): the same function, memory O(block x d) beyond X.
        """
        if block_rows is not None:
            return self.sum(theta, X, y, block_rows=block_rows) / X.shape[0]
        if self.clip_norm is not None:
            return clipped_mean(self.example, self.clip_norm, theta, X, y)
        return jnp.mean(self.per_example(theta, X, y))

    def sum(self, theta, X, y, weight=None, *, block_rows: int):
        """sum_i w_i ell(theta; x_i, y_i) in row blocks (w: public 0/1 padding mask or None)."""
        return blocked_loss_sum(self.example, theta, X, y, weight, block_rows=block_rows,
                                clip_norm=self.clip_norm)

    def gradient_sensitivity(self, n: int) -> float:
        return self.constants.gradient_sensitivity(n)

    def check_data(self, X, y) -> tuple[np.ndarray, np.ndarray]:
        """Validate data against the declared bounds; raise (never clip) on violation."""
        X = check_finite_array("X", X, ndim=2)
        y = check_finite_array("y", y, ndim=1)
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"X and y must have the same number of rows, got {X.shape[0]} and {y.shape[0]}")
        norms = np.linalg.norm(X, axis=1)
        over = int(np.sum(norms > self.row_norm * (1 + ROW_NORM_SLACK)))
        if over and self.clip_norm is None:
            raise ValueError(
                f"X: a row exceeds the declared row_norm={self.row_norm} (every row must have l2 norm <= "
                "row_norm); clip the rows with dp_infer.datasets.clip_rows, which reports how many (locally)"
            )
        if self.label_check is not None:
            self.label_check(y)
        return X, y

    def describe(self) -> dict:
        return {
            "name": self.name,
            "row_norm": self.row_norm,
            "l2": self.l2,
            "clip_norm": self.clip_norm,
            "domain": None if self.domain is None else self.domain.describe(),
            **self.constants.as_dict(),
        }


def domain_radius(domain: Domain | None) -> float:
    """Largest ||theta|| on the domain (inf when unbounded)."""
    if domain is None or not domain.bounded:
        return math.inf
    c = np.asarray(domain.default_init(), dtype=float)
    return float(np.linalg.norm(c) + domain.diameter)


def constants_with_l2(lip: float, grad_diff: float, smooth: float | None, l2: float, domain: Domain | None,
             value_range_fn: Callable[[float], float | None], link: float | None = None,
             convex: bool = False) -> LossConstants:
    r = domain_radius(domain)
    lip_total = lip + l2 * r if l2 else lip
    smooth_total = None if smooth is None else smooth + l2
    vr = value_range_fn(r) if math.isfinite(r) else None
    if vr is not None and l2:
        vr = vr + 0.5 * l2 * r * r
    # the L2 term is the same for every example: it cancels in a gradient DIFFERENCE, so a GLM's
    # link bound |phi'| <= a still bounds grad l(z) - grad l(z') = phi'(z) x - phi'(z') x'
    # ``convex``: declared by the caller (every built-in loss passes True)
    return LossConstants(lipschitz=lip_total, grad_diff=grad_diff, smoothness=smooth_total,
                         strong_convexity=l2, value_range=vr, link_derivative_bound=link, convex=convex)


def glm_loss(name: str, link: Callable[[jax.Array, jax.Array], jax.Array], constants: LossConstants,
             row_norm: float, label_check=None, l2: float = 0.0, domain: Domain | None = None,
             behaviour: LossBehaviour = CUSTOM) -> PerExampleLoss:
    """A generalised linear loss ``ell(theta; x, y) = link(<theta, x>, y)`` (+ its L2 term).

    ``link`` maps arrays of indices and labels elementwise (it is evaluated on ``X @ theta``);
    the per-example ``fn`` is the same link of one dot product. The constants are the caller's;
    ``behaviour`` (clipped link, prediction rule, CLI name: :mod:`dp_infer.losses.behaviour`) too.
    """

    def fn(theta, x, y):
        return link(jnp.dot(theta, x), y)

    return PerExampleLoss(name, fn, constants, row_norm, label_check, l2, domain, index_fn=link, behaviour=behaviour)


# ----------------------------------------------------------------------------------------------
# Per-example gradient clipping for any loss
# ----------------------------------------------------------------------------------------------

def clipped_fraction(loss: PerExampleLoss, theta, X, y) -> float:
    """Share of examples whose gradient is clipped at ``theta`` (reads private data: debug only)."""
    if loss.clip_norm is None:
        return 0.0
    grads = jax.vmap(jax.grad(loss.example), in_axes=(None, 0, 0))(theta, X, y)
    _, was = jax.vmap(clip_tree, in_axes=(0, None))(grads, loss.clip_norm)
    return float(jnp.mean(was))


def clipped_loss(fn: ExampleLoss, clip_norm: float, *, name: str = "clipped",
                 smoothness: float | None = None, domain: Domain | None = None,
                 convex: bool = False) -> PerExampleLoss:
    """Wrap any per-example loss so that jax.grad of its mean is the mean of clipped gradients.

    Each per-example gradient is rescaled to norm <= clip_norm (a ``jax.custom_vjp``), so
    L = clip_norm and G = 2 clip_norm hold for the function actually run, whatever ``fn`` is.
    A non-finite per-example gradient counts as 0. The clipped drift no longer targets
    exp(-beta L) unless no clip is active; ``smoothness`` (if declared) is the user's claim and
    is not enforced (``constants.smoothness_is_declared``). Clipping breaks contraction, so the
    last-iterate and stationary routes refuse clipped losses. Rows are not norm-checked.
    ``convex`` declares ``fn`` convex in theta (not checked: an assumption).
    """
    C = check_positive("clip_norm", clip_norm)
    if not isinstance(convex, bool):
        raise ValueError(f"convex must be True or False, got {convex!r}")
    if smoothness is not None:
        smoothness = check_positive("smoothness", smoothness)
    consts = LossConstants(lipschitz=C, grad_diff=2 * C, smoothness=smoothness, clipped=True,
                           smoothness_is_declared=smoothness is not None, convex=convex)
    return PerExampleLoss(name, fn, consts, math.inf, None, 0.0, domain, clip_norm=C)


def with_l2(loss: PerExampleLoss, l2: float) -> PerExampleLoss:
    """A copy of a built-in loss with a different L2 regulariser (constants recomputed)."""
    l2 = check_nonnegative("l2", l2)
    c = loss.constants
    base_m = c.strong_convexity - loss.l2
    r = domain_radius(loss.domain)
    lip = c.lipschitz - (loss.l2 * r if loss.l2 and math.isfinite(r) else 0.0)
    vr = c.value_range  # sup - inf over the domain includes the L2 term's 0.5 l2 r^2: swap old for new
    if vr is not None and math.isfinite(r):
        vr = vr - 0.5 * loss.l2 * r * r + 0.5 * l2 * r * r
    consts = replace(
        c,
        value_range=vr,
        lipschitz=lip + (l2 * r if l2 else 0.0),
        smoothness=None if c.smoothness is None else c.smoothness - loss.l2 + l2,
        strong_convexity=base_m + l2,
    )
    return replace(loss, l2=l2, constants=consts)
