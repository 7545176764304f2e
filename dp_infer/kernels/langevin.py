"""Unadjusted (overdamped) Langevin algorithm, optionally projected onto a domain.

Update (potential ``U`` already includes the inverse temperature; the kernel never decides
privacy)::

    theta_{k+1} = Pi_C( theta_k - h * grad U(theta_k) + sqrt(2 h) * xi_k ),   xi_k ~ N(0, I)

``Pi_C`` is the Euclidean projection onto the domain (identity without a domain); it is applied
*after* the noise, as in the projected noisy gradient descent of the path-privacy argument
(seed-001 digest, A3 / Lemma 2.2). There is no Metropolis correction: the chain targets
``exp(-U)`` only up to an O(h) bias (for a Gaussian with curvature ``m`` the stationary
variance is ``1 / (m (1 - h m / 2))``), and a projected chain puts atoms of mass O(sqrt(h))
on the boundary of the domain (digest pitfall 20). Both are accuracy effects; privacy
depends only on the integrated time ``num_steps * step_size`` (digest pitfall 25).

Two layers, BlackJAX style:

* a pure functional core, BlackJAX style: :class:`LangevinState`, :class:`LangevinInfo`,
  :func:`init`, :func:`build_kernel` (returns ``step(rng_key, state) -> (state, info)``),
  :func:`as_top_level_api` (``logdensity_fn`` in, ``init`` / ``step`` out, the privacy plan as an
  argument) and :func:`sample_chain` (``lax.scan`` driver);
* :class:`Langevin`, a thin :class:`numpyro.infer.mcmc.MCMCKernel` adapter (see
  :mod:`dp_infer.kernels._numpyro` for the behaviour shared with the underdamped kernel).

Key discipline shared by both layers: a transition splits ``state.rng_key`` into
``(next_key, noise_key)``, draws the noise from ``noise_key`` and stores ``next_key``.
``sample_chain(key, ...)`` therefore reproduces the draws of a single NumPyro chain whose
state was initialised with ``rng_key=key`` (for ``MCMC.run(k)`` with one chain that key is
``jax.random.split(k)[0]``; see :meth:`Langevin.init`).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax, random
from jax.flatten_util import ravel_pytree

from .._validation import check_positive, check_positive_int
from ..domains import Domain
from ..randomness import gaussian_noise
from ._common import (
    SamplingAlgorithm, as_float_tree, default_divergence_radius, logdensity_to_grad, make_divergence_fn,
    plan_parameters, resolve_projection,
)
from ._numpyro import LangevinKernelBase

__all__ = [
    "LangevinState",
    "LangevinInfo",
    "LangevinDebugState",
    "LangevinChain",
    "init",
    "build_kernel",
    "keyed_transition",
    "sample_chain",
    "as_top_level_api",
    "make_divergence_fn",
    "Langevin",
]


class LangevinState(NamedTuple):
    """State of an unadjusted Langevin chain. Everything in it is covered by the path accountant.

    * ``i`` -- number of transitions taken (int32 scalar);
    * ``z`` -- the position, any pytree of float arrays (a dict of unconstrained sites for a
      NumPyro model);
    * ``diverging`` -- True once the position became non-finite or left the divergence radius
      (sticky: stays True afterwards); a function of theta alone;
    * ``rng_key`` -- the chain's key (``None`` is allowed when ``step`` is always called with
      explicit keys).
    """

    i: jax.Array
    z: Any
    diverging: jax.Array
    rng_key: Any


class LangevinInfo(NamedTuple):
    """What a step reports besides the new state: public, theta-only fields.

    * ``diverging`` -- the new position is non-finite or outside the divergence radius (this
      step only; the state's flag is the sticky version).

    Nothing here is computed from the potential: no energy, no gradient, no acceptance.
    """

    diverging: jax.Array


class LangevinDebugState(NamedTuple):
    """:class:`LangevinState` plus two **non-private** fields (``debug=True`` only).

    ``potential_energy`` (U at ``z``) and ``grad_norm`` (||grad U(z)||) are functions of the
    private data: they are *not* covered by any privacy guarantee and must never be released.
    """

    i: jax.Array
    z: Any
    diverging: jax.Array
    rng_key: Any
    potential_energy: jax.Array
    grad_norm: jax.Array


class LangevinChain(NamedTuple):
    """Output of :func:`sample_chain`: stacked positions, stacked divergence flags, last state."""

    z: Any
    diverging: jax.Array
    last_state: LangevinState


def _check_step_size(step_size):
    if isinstance(step_size, jax.core.Tracer):
        return step_size
    return check_positive("step_size", step_size)


def init(position, rng_key=None, *, divergence_fn: Callable | None = None) -> LangevinState:
    """Initial state at ``position`` (which must be chosen without looking at private data).

    ``divergence_fn(flat_theta) -> bool`` defaults to "any coordinate non-finite".
    """
    position = as_float_tree(position)
    flat, _ = ravel_pytree(position)
    div_fn = make_divergence_fn(None) if divergence_fn is None else divergence_fn
    return LangevinState(jnp.zeros((), jnp.int32), position, div_fn(flat), rng_key)


def build_kernel(
    grad_fn: Callable,
    step_size: float,
    project: Callable | Domain | None = None,
    divergence_fn: Callable | None = None,
) -> Callable:
    """Return ``step(rng_key, state) -> (state, info)`` for ULA with gradient ``grad_fn``.

    :param grad_fn: ``z -> grad U(z)`` with the same pytree structure as ``z`` (from a log
        density: :func:`as_top_level_api`, or :func:`~dp_infer.kernels._common.logdensity_to_grad`).
    :param step_size: h > 0.
    :param project: a :class:`~dp_infer.domains.Domain` or a callable on the flat position,
        applied after the noise (``None``: no projection).
    :param divergence_fn: ``flat_theta -> bool``; default flags non-finite positions only.

    ``step`` draws the Gaussian noise from ``rng_key`` and leaves ``state.rng_key`` untouched
    (use :func:`keyed_transition` to drive a chain from its own key). ``info`` is a
    :class:`LangevinInfo` (theta-only fields).
    """
    h = _check_step_size(step_size)
    proj = resolve_projection(project)
    div_fn = make_divergence_fn(None) if divergence_fn is None else divergence_fn

    def step(rng_key, state: LangevinState) -> tuple[LangevinState, LangevinInfo]:
        x, unravel = ravel_pytree(state.z)
        g, _ = ravel_pytree(grad_fn(state.z))
        noise = gaussian_noise(rng_key, x.shape, x.dtype)
        x_new = x - h * g.astype(x.dtype) + jnp.sqrt(2.0 * h).astype(x.dtype) * noise
        if proj is not None:
            x_new = proj(x_new)
        div_now = div_fn(x_new)
        diverging = jnp.logical_or(state.diverging, div_now)
        return LangevinState(state.i + 1, unravel(x_new), diverging, state.rng_key), LangevinInfo(div_now)

    return step


def as_top_level_api(
    logdensity_fn: Callable,
    step_size: float | None = None,
    *,
    plan=None,
    domain: Callable | Domain | None = None,
    divergence_radius: float | None = None,
) -> SamplingAlgorithm:
    """BlackJAX-style ULA: ``algo.init(position, rng_key=None)``, ``algo.step(rng_key, state)``.

    ::

        algo = langevin.as_top_level_api(logdensity_fn, plan=plan)   # or step_size=h
        state = algo.init(x0)                                         # x0 chosen without the data
        state, info = algo.step(key, state)                           # jit / vmap / scan freely

    :param logdensity_fn: ``z -> log density`` of the target (``-U``; for a private run the
        tempered log density the plan was made for, e.g. ``-gibbs_potential(..., beta=plan.beta)``).
    :param step_size: h > 0; omit it when ``plan`` is given.
    :param plan: a :class:`~dp_infer.routes.plan.SamplingPlan` for ``kernel="langevin"``: its step size
        is used (an explicit different ``step_size`` is refused). The privacy of the run is the
        plan's only if you take ``plan.num_steps`` steps per chain on ``plan.num_chains`` chains.
    :param domain: Domain or callable projection on the flat position (after the noise).
    :param divergence_radius: ``||theta||`` above which ``info.diverging`` is set (default as
        :func:`sample_chain`).

    ``step`` uses the key it is given (the state's own key is carried, not consumed); drive a
    chain from the state's key with :func:`keyed_transition` if you prefer NumPyro's convention.
    """
    h, _ = plan_parameters(plan, "langevin", step_size)
    grad_fn = logdensity_to_grad(logdensity_fn)
    div_fn = make_divergence_fn(default_divergence_radius(domain, divergence_radius))
    step = build_kernel(grad_fn, h, domain, div_fn)

    def init_fn(position, rng_key=None) -> LangevinState:
        return init(position, rng_key, divergence_fn=div_fn)

    return SamplingAlgorithm(init_fn, step)


def keyed_transition(step: Callable) -> Callable:
    """Turn ``step(rng_key, state) -> (state, info)`` into ``transition(state) -> (state, info)``
    that consumes ``state.rng_key``.

    ``state.rng_key`` is split into ``(next_key, noise_key)``; the noise uses ``noise_key`` and
    ``next_key`` is stored. Works for the overdamped, underdamped and SGLD states.
    """

    def transition(state):
        next_key, noise_key = random.split(state.rng_key)
        new, info = step(noise_key, state)
        return new._replace(rng_key=next_key), info

    return transition


def scan_chain(transition, state, num_steps, thinning, extract):
    num_steps = check_positive_int("num_steps", num_steps)
    thinning = check_positive_int("thinning", thinning)
    if num_steps % thinning:
        raise ValueError(
            f"num_steps must be a multiple of thinning, got num_steps={num_steps}, thinning={thinning}"
        )

    def outer(s, _):
        if thinning == 1:
            s = transition(s)[0]
        else:
            s = lax.fori_loop(0, thinning, lambda _, t: transition(t)[0], s)
        return s, extract(s)

    return lax.scan(outer, state, None, length=num_steps // thinning)


def sample_chain(
    rng_key,
    potential_fn: Callable | None,
    x0,
    step_size: float,
    num_steps: int,
    *,
    project: Callable | Domain | None = None,
    thinning: int = 1,
    grad_fn: Callable | None = None,
    divergence_radius: float | None = None,
) -> LangevinChain:
    """Run ``num_steps`` ULA steps from ``x0`` with ``lax.scan`` and keep every ``thinning``-th.

    Give ``potential_fn`` (``z -> U(z)``, differentiated with ``jax.grad``) or ``grad_fn``
    (then ``potential_fn`` may be ``None``). ``project`` is a Domain or a callable on the flat
    position. Returns :class:`LangevinChain` with ``z`` of leading size
    ``num_steps // thinning`` (the draws after steps ``thinning, 2 thinning, ...``; ``x0`` is
    not included), matching what ``numpyro.infer.MCMC(Langevin(...), num_warmup=0,
    num_samples=num_steps, thinning=thinning)`` collects for one chain.

    Privacy note: the accountant must be charged for ``num_steps * step_size`` of Langevin
    time, whatever the thinning.
    """
    if grad_fn is None:
        if potential_fn is None:
            raise ValueError("sample_chain needs potential_fn or grad_fn")
        grad_fn = jax.grad(potential_fn)
    radius = default_divergence_radius(project, divergence_radius)
    div_fn = make_divergence_fn(radius)
    state = init(x0, rng_key, divergence_fn=div_fn)
    transition = keyed_transition(build_kernel(grad_fn, step_size, project, div_fn))
    last, (zs, divs) = scan_chain(transition, state, num_steps, thinning, lambda s: (s.z, s.diverging))
    return LangevinChain(zs, divs, last)


class Langevin(LangevinKernelBase):
    """Unadjusted Langevin algorithm (ULA) as a NumPyro ``MCMCKernel``, full-batch gradients.

    ``theta <- Pi_C(theta - h grad U(theta) + sqrt(2 h) xi)``; no Metropolis correction, no
    warmup adaptation. Use as ``MCMC(Langevin(...), num_warmup=0, num_samples=N)``.

    :param model: a NumPyro model (its potential, in unconstrained space, is ``U``). Exactly
        one of ``model`` / ``potential_fn``.
    :param potential_fn: ``z -> U(z)`` on a pytree ``z``; ``init_params`` must then be passed
        to ``MCMC.run`` (or a ``domain`` given, whose ``default_init()`` is used).
    :param float step_size: h > 0 (required, keyword-only).
    :param domain: optional :class:`~dp_infer.domains.Domain` on the flattened (unconstrained)
        position; every step is projected onto it after the noise.
    :param divergence_radius: flag ``diverging`` when ``||theta_flat||_2`` exceeds it
        (default: 1e6 without a domain or for an unbounded one; ``inf`` -- only non-finite
        positions -- for a bounded domain, where projected chains cannot leave the set).
    :param init_strategy: NumPyro init strategy for ``model`` kernels; must be data
        independent (default ``init_to_median`` of prior draws).
    :param bool debug: add the **non-private** ``potential_energy`` and ``grad_norm`` fields
        to the state (:class:`LangevinDebugState`).

    Privacy-relevant read-only properties: :attr:`step_size`, :meth:`integrated_time`.
    See :class:`~dp_infer.kernels._numpyro.LangevinKernelBase` for the init, divergence and
    chain-method semantics.
    """

    _state_cls = LangevinState
    _debug_state_cls = LangevinDebugState

    def _core_init(self, z, rng_key):
        return init(z, rng_key, divergence_fn=self._divergence_fn)

    def _core_transition(self, grad_fn):
        transition = keyed_transition(
            build_kernel(grad_fn, self._step_size, self._projection, self._divergence_fn)
        )
        return lambda state: transition(state)[0]
