"""Poisson-subsampled stochastic gradient Langevin dynamics (SGLD) with per-example clipping.

For data too large for full-batch steps. Potential ``U = beta * L(theta; D)`` with
``L = (1/n) sum_i l_i``; one step is::

    B_i ~ Bernoulli(q) i.i.d. (i = 1..n),     g = (1 / (q n)) sum_i B_i clip_C(grad l_i(theta)),
    theta <- Proj(theta - h beta g + sqrt(2 h) xi),     xi ~ N(0, I).

* Poisson sampling is implemented with a fixed-size mask: a Bernoulli(q) draw for every row,
  the clipped per-example gradients weighted by it. This is exact Poisson sampling and has
  static shapes (jit / scan friendly); the cost per step is that of a full pass, so the benefit
  over :mod:`dp_infer.kernels.langevin` is privacy amplification, not speed. (A gather-based
  variable batch would save compute but not change the law.)
* ``g`` is unbiased for the full-batch *clipped* mean gradient
  ``(1/n) sum_i clip_C(grad l_i(theta))``.
* Every per-example gradient is clipped to norm ``clip_norm`` even if the loss declares a
  smaller gradient bound: sensitivity must hold for the function actually run (DESIGN
  invariant 4).
* The normaliser ``n``: by default ``X.shape[0]``, which is public under replace-one adjacency
  (the library's default). Under add/remove adjacency the row count is itself private: pass a
  fixed public ``normaliser`` (and account with the same ``n``), so that adding or removing a
  record moves the estimate by at most ``C / (q n)``.
* Privacy: :func:`dp_infer.privacy.minibatch.minibatch_event` (the path accountant with
  ``Delta = G / n`` does NOT apply to minibatch gradients; seed-001 digest §9 item 14).
  Released: the theta-trajectory only; the masks stay internal.

Key discipline (same as :mod:`dp_infer.kernels.langevin`): a transition splits
``state.rng_key`` into ``(next_key, step_key)``; the Gaussian noise is
``normal(step_key)`` and the batch mask is drawn from ``fold_in(step_key, 1)``. With ``q = 1``
the mask is all ones and the chain coincides with the full-batch clipped ULA chain of
:func:`dp_infer.kernels.langevin.sample_chain` run from the same key.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import random
from numpyro.infer.mcmc import MCMCKernel

from .._validation import check_positive, check_positive_int
from ..domains import Domain
from ..randomness import gaussian_noise
from ._common import SamplingAlgorithm, default_divergence_radius, make_divergence_fn, resolve_projection
from .langevin import scan_chain, keyed_transition

__all__ = [
    "SGLDState",
    "SGLDInfo",
    "SGLDChain",
    "init",
    "clipped_per_example_grads",
    "minibatch_gradient",
    "build_kernel",
    "keyed_transition",
    "sample_chain",
    "as_top_level_api",
    "MinibatchSGLD",
]


class SGLDState(NamedTuple):
    """State of a subsampled Langevin chain (everything in it is covered by the accountant).

    ``i`` transitions taken; ``z`` flat position; ``diverging`` sticky flag (function of theta
    only); ``rng_key`` the chain's key.
    """

    i: jax.Array
    z: jax.Array
    diverging: jax.Array
    rng_key: Any


class SGLDInfo(NamedTuple):
    """Public, theta-only output of a step: ``diverging`` (this step's new position is non-finite
    or outside the divergence radius). The batch mask is NOT reported: amplification by
    subsampling needs it secret."""

    diverging: jax.Array


class SGLDChain(NamedTuple):
    """Output of :func:`sample_chain`: stacked positions, divergence flags and the last state."""

    z: jax.Array
    diverging: jax.Array
    last_state: SGLDState


def _check_q(q):
    if isinstance(q, jax.core.Tracer):
        return q
    try:
        v = float(q)
    except (TypeError, ValueError):
        raise ValueError(f"q (sampling probability) must lie in (0, 1], got {q!r}") from None
    if not (0.0 < v <= 1.0):
        raise ValueError(f"q (sampling probability) must lie in (0, 1], got {q!r}")
    return v


def _check_scalar(name, value):
    if isinstance(value, jax.core.Tracer):
        return value
    return check_positive(name, value)


def init(position, rng_key=None, *, divergence_fn: Callable | None = None) -> SGLDState:
    """Initial state at a flat ``position`` chosen without looking at the private data."""
    x = jnp.asarray(position)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    if x.ndim != 1:
        raise ValueError(f"x0 must be a flat 1-D parameter vector, got shape {x.shape}")
    div_fn = make_divergence_fn(None) if divergence_fn is None else divergence_fn
    return SGLDState(jnp.zeros((), jnp.int32), x, div_fn(x), rng_key)


def _clip_rows(G, clip_norm):
    norms = jnp.linalg.norm(G, axis=1, keepdims=True)
    scale = jnp.minimum(1.0, clip_norm / jnp.maximum(norms, 1e-30))
    return G * scale


def clipped_per_example_grads(example_fn: Callable, theta, X, y, clip_norm) -> jax.Array:
    """``(n, d)`` per-example gradients of ``example_fn(theta, x, y)``, each clipped to ``clip_norm``."""
    G = jax.vmap(jax.grad(example_fn), in_axes=(None, 0, 0))(theta, X, y)
    return _clip_rows(G, clip_norm)


def minibatch_gradient(rng_key, example_fn: Callable, theta, X, y, q, clip_norm, normaliser=None) -> jax.Array:
    """Poisson-subsampled clipped gradient estimate ``(1/(q n)) sum_i B_i clip_C(grad l_i)``.

    ``B_i ~ Bernoulli(q)`` from ``rng_key``; ``n`` is ``normaliser`` (default: the number of rows,
    then the estimate is unbiased for the full-batch clipped mean gradient).
    """
    G = clipped_per_example_grads(example_fn, theta, X, y, clip_norm)
    rows = G.shape[0]
    n = rows if normaliser is None else normaliser
    mask = random.bernoulli(rng_key, q, (rows,)).astype(G.dtype)
    return (mask @ G) / (q * n)


def build_kernel(example_fn: Callable, X, y, beta, step_size, q, clip_norm,
                 project: Callable | Domain | None = None, divergence_fn: Callable | None = None,
                 normaliser: int | None = None) -> Callable:
    """Return ``step(rng_key, state) -> (state, info)`` for Poisson-subsampled clipped SGLD.

    :param example_fn: per-example loss ``(theta, x, y) -> scalar`` (e.g. ``PerExampleLoss.example``).
    :param beta: inverse temperature (> 0); :param step_size: h (> 0);
    :param q: Poisson sampling probability in (0, 1]; :param clip_norm: C (> 0);
    :param normaliser: the public n of ``1/(q n)`` (default ``X.shape[0]``; give a fixed value under
    add/remove adjacency). The noise is ``normal(rng_key)``; the mask uses ``fold_in(rng_key, 1)``.
    """
    beta = _check_scalar("beta", beta)
    h = _check_scalar("step_size", step_size)
    q = _check_q(q)
    C = _check_scalar("clip_norm", clip_norm)
    X = jnp.asarray(X)
    y = jnp.asarray(y)
    if X.ndim < 1 or X.shape[0] == 0:
        raise ValueError(f"X must hold at least one example (rows on axis 0), got shape {X.shape}")
    if y.shape[:1] != X.shape[:1]:
        raise ValueError(f"y must have one label per row of X, got {y.shape[:1]} and {X.shape[:1]}")
    if normaliser is not None:
        normaliser = check_positive_int("normaliser", normaliser)
    proj = resolve_projection(project)
    div_fn = make_divergence_fn(None) if divergence_fn is None else divergence_fn

    def step(rng_key, state: SGLDState) -> tuple[SGLDState, SGLDInfo]:
        x = state.z
        g = minibatch_gradient(random.fold_in(rng_key, 1), example_fn, x, X, y, q, C, normaliser)
        noise = gaussian_noise(rng_key, x.shape, x.dtype)
        x_new = x - h * beta * g.astype(x.dtype) + jnp.sqrt(2.0 * h).astype(x.dtype) * noise
        if proj is not None:
            x_new = proj(x_new)
        div_now = div_fn(x_new)
        diverging = jnp.logical_or(state.diverging, div_now)
        return SGLDState(state.i + 1, x_new, diverging, state.rng_key), SGLDInfo(div_now)

    return step


def as_top_level_api(logdensity_fn, X, y, *, beta, step_size, q, clip_norm,
                     domain: Callable | Domain | None = None,
                     divergence_radius: float | None = None, normaliser: int | None = None) -> SamplingAlgorithm:
    """BlackJAX-style subsampled SGLD: ``algo.init(position, rng_key=None)`` and
    ``algo.step(rng_key, state) -> (state, info)``.

    :param logdensity_fn: the per-example log likelihood ``(theta, x, y) -> log p(y | x, theta)``
        (its negative is the per-example loss whose gradients are clipped), or a
        :class:`~dp_infer.losses.PerExampleLoss` (used as the loss).
    ``beta``, ``step_size``, ``q``, ``clip_norm`` and ``normaliser`` are as :func:`build_kernel`. There
    is no :class:`~dp_infer.routes.plan.SamplingPlan` for this kernel: account the run with
    :func:`dp_infer.privacy.minibatch.minibatch_event` (one entry per step).
    """
    if hasattr(logdensity_fn, "example"):
        example_fn = logdensity_fn.example
    elif callable(logdensity_fn):
        example_fn = lambda theta, x, yy: -logdensity_fn(theta, x, yy)  # noqa: E731
    else:
        raise ValueError(f"logdensity_fn must be a callable (theta, x, y) -> log density or a PerExampleLoss, "
                         f"got {logdensity_fn!r}")
    div_fn = make_divergence_fn(default_divergence_radius(domain, divergence_radius))
    step = build_kernel(example_fn, X, y, beta, step_size, q, clip_norm, domain, div_fn, normaliser)

    def init_fn(position, rng_key=None) -> SGLDState:
        return init(position, rng_key, divergence_fn=div_fn)

    return SamplingAlgorithm(init_fn, step)


def sample_chain(rng_key, loss, X, y, beta, step_size, num_steps, q, clip_norm, x0,
                 project: Callable | Domain | None = None, thinning: int = 1, *,
                 divergence_radius: float | None = None, normaliser: int | None = None) -> SGLDChain:
    """Run ``num_steps`` subsampled SGLD steps from ``x0`` with ``lax.scan``; keep every ``thinning``-th.

    ``loss`` is a :class:`~dp_infer.losses.PerExampleLoss` (its ``example``) or a callable
    ``(theta, x, y) -> scalar``. Returns :class:`SGLDChain` with ``z`` of shape
    ``(num_steps // thinning, d)`` (``x0`` excluded). Charge the accountant with
    :func:`dp_infer.privacy.minibatch.minibatch_event` for ``num_steps`` steps (whatever the
    thinning) with ``n = X.shape[0]`` (replace-one), or ``n = normaliser`` (add/remove: give the
    fixed public ``normaliser``).
    """
    example_fn = loss.example if hasattr(loss, "example") else loss
    if not callable(example_fn):
        raise ValueError(f"loss must be a PerExampleLoss or a callable (theta, x, y) -> scalar, got {loss!r}")
    check_positive_int("num_steps", num_steps)
    check_positive_int("thinning", thinning)
    radius = default_divergence_radius(project, divergence_radius)
    div_fn = make_divergence_fn(radius)
    state = init(x0, rng_key, divergence_fn=div_fn)
    step = build_kernel(example_fn, X, y, beta, step_size, q, clip_norm, project, div_fn, normaliser)
    last, (zs, divs) = scan_chain(keyed_transition(step), state, num_steps, thinning,
                                   lambda s: (s.z, s.diverging))
    return SGLDChain(zs, divs, last)


class MinibatchSGLD(MCMCKernel):
    """Poisson-subsampled clipped SGLD as a NumPyro ``MCMCKernel`` on a flat parameter vector.

    ``MCMC(MinibatchSGLD(loss, X, y, beta=..., step_size=..., q=..., clip_norm=...),
    num_warmup=0, num_samples=T).run(key, init_params=x0)`` (or give ``domain``, whose
    data-independent ``default_init()`` is used and onto which every step is projected).
    Mirrors :class:`~dp_infer.kernels.langevin.Langevin`: no warmup (it would look at the data),
    the init key is split into ``(chain_key, init_key)`` and the chain consumes ``chain_key``
    exactly as :func:`sample_chain` does: with one chain, ``MCMC.run(k)`` draws the same path
    as ``sample_chain(random.split(k)[0], ...)``. Vectorised chains are supported. Account with
    :func:`dp_infer.privacy.minibatch.minibatch_event` (``num_steps = num_samples``,
    ``n = privacy_params["n"]``, ``num_chains`` chains); ``normaliser`` as in :func:`sample_chain`.
    """

    sample_field = "z"

    def __init__(self, loss, X, y, *, beta, step_size, q, clip_norm, domain: Domain | None = None,
                 divergence_radius: float | None = None, normaliser: int | None = None):
        example_fn = loss.example if hasattr(loss, "example") else loss
        if not callable(example_fn):
            raise ValueError(f"loss must be a PerExampleLoss or a callable (theta, x, y) -> scalar, got {loss!r}")
        self._beta = check_positive("beta", beta)
        self._step_size = check_positive("step_size", step_size)
        self._q = _check_q(q)
        self._clip_norm = check_positive("clip_norm", clip_norm)
        self._domain = domain
        self._div_fn = make_divergence_fn(default_divergence_radius(domain, divergence_radius))
        self._n = int(jnp.shape(X)[0]) if normaliser is None else check_positive_int("normaliser", normaliser)
        transition = keyed_transition(build_kernel(example_fn, X, y, self._beta, self._step_size, self._q,
                                                   self._clip_norm, domain, self._div_fn, self._n))
        self._transition = lambda state: transition(state)[0]

    # public, data-independent parameters (what the accountant needs)
    @property
    def privacy_params(self) -> dict:
        return {"beta": self._beta, "step_size": self._step_size, "q": self._q, "clip_norm": self._clip_norm,
                "n": self._n}

    @property
    def default_fields(self):
        return ("z", "diverging")

    def get_diagnostics_str(self, state):
        return f"step size {self._step_size:.2e}, q {self._q:.3g}"

    def init(self, rng_key, num_warmup, init_params=None, model_args=(), model_kwargs=None):
        if num_warmup:
            raise ValueError(f"num_warmup must be 0 for MinibatchSGLD, got {num_warmup!r}: warmup adaptation "
                             "looks at the private data and is not covered by the privacy guarantee")
        batched = jnp.ndim(rng_key) == 2 if not jnp.issubdtype(jnp.asarray(rng_key).dtype, jax.dtypes.prng_key) \
            else jnp.ndim(rng_key) == 1
        if batched:
            chain_key = jax.vmap(lambda k: random.split(k)[0])(rng_key)
        else:
            chain_key = random.split(rng_key)[0]
        if init_params is None:
            if self._domain is None:
                raise ValueError("init_params must be passed to MCMC.run(..., init_params=...) "
                                 "(or give a domain, whose data-independent default_init() is then used)")
            x0 = jnp.asarray(self._domain.default_init(), dtype=jnp.result_type(float))
            init_params = jnp.broadcast_to(x0, (chain_key.shape[0],) + x0.shape) if batched else x0
        init_params = jnp.asarray(init_params)
        if not jnp.issubdtype(init_params.dtype, jnp.floating):
            init_params = init_params.astype(jnp.result_type(float))
        make = lambda x, k: init(x, k, divergence_fn=self._div_fn)  # noqa: E731
        return jax.vmap(make)(init_params, chain_key) if batched else make(init_params, chain_key)

    def sample(self, state, model_args, model_kwargs):
        if jnp.ndim(state.i) == 1:
            return jax.vmap(self._transition)(state)
        return self._transition(state)
