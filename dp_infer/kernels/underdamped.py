"""Underdamped (kinetic) Langevin, Euler kinetic scheme, unit mass, friction gamma.

SDE: ``dX = V dt``, ``dV = -gamma V dt - grad U(X) dt + sqrt(2 gamma) dW``; its stationary law is
``exp(-U(x)) N(v; 0, I)``. The discretisation (seed-001 digest section 4.10) is::

    v_{k+1} = v_k - h (gamma v_k + grad U(x_k)) + sqrt(2 gamma h) xi_k,     xi_k ~ N(0, I)
    x_{k+1} = Pi_C( x_k + h v_{k+1} )

Why this scheme: each step is a Gaussian mechanism on ``v`` (mean shift ``h Delta_U``,
variance ``2 gamma h``), so the per-step RDP is ``alpha h Delta_U^2 / (4 gamma)`` and the whole
``(x, v)`` path is covered (``x_{k+1}`` is a post-processing of ``(x_k, v_{k+1})``).
Splittings that end with an un-noised kick (BAOAB) leak the gradient and are deliberately
not implemented (digest pitfall 21, DESIGN invariant 8).

The privacy accountant charges ``alpha Delta_U^2 t / (4 gamma)`` for ``t = num_steps * h`` of
kinetic time: it divides :meth:`UnderdampedLangevin.integrated_time` by ``friction``.

Projection (optional ``domain``): only the position is projected (after ``x + h v``); the
velocity is left as computed. This is a post-processing of covered quantities, so privacy is
unaffected; the stationary law near the boundary is only approximately the truncated target
(plus atoms on the boundary, as for projected ULA).

The scheme is first order: for a Gaussian target the stationary covariance of ``(x, v)`` is
the solution of a discrete Lyapunov equation, not ``diag(1/m, 1)`` (tested exactly).

Initial velocity: ``v_0 ~ N(0, I)`` (the velocity marginal of the target), drawn from the
chain's own key -- data independent. :func:`init` also accepts an explicit ``velocity``.

Exported by default: only ``z`` (the position) and ``diverging`` (computed from the position
alone); ``v`` stays in the state and can be collected with ``extra_fields=("v",)`` (it is
covered by the accountant, unlike BAOAB's final velocity).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import random
from jax.flatten_util import ravel_pytree
from numpyro.infer.initialization import init_to_median

from .._validation import check_positive
from ..domains import Domain
from ..randomness import gaussian_noise
from ._common import (
    SamplingAlgorithm, as_float_tree, default_divergence_radius, logdensity_to_grad, make_divergence_fn,
    plan_parameters, resolve_projection,
)
from ._numpyro import LangevinKernelBase
from .langevin import scan_chain, keyed_transition

__all__ = [
    "UnderdampedLangevinState",
    "UnderdampedLangevinInfo",
    "UnderdampedLangevinDebugState",
    "UnderdampedChain",
    "init",
    "build_kernel",
    "keyed_transition",
    "sample_chain",
    "as_top_level_api",
    "UnderdampedLangevin",
]


class UnderdampedLangevinState(NamedTuple):
    """State of a kinetic Langevin chain (all fields covered by the path accountant).

    ``z`` position pytree, ``v`` velocity (same pytree structure), ``diverging`` sticky flag
    computed from ``z`` alone, ``i`` step counter, ``rng_key`` the chain's key.
    """

    i: jax.Array
    z: Any
    v: Any
    diverging: jax.Array
    rng_key: Any


class UnderdampedLangevinInfo(NamedTuple):
    """Public, theta-only output of a step besides the state: ``diverging`` (the new position is
    non-finite or outside the divergence radius; this step only). The velocity is in the state
    (covered by the accountant); nothing here is computed from the potential."""

    diverging: jax.Array


class UnderdampedLangevinDebugState(NamedTuple):
    """:class:`UnderdampedLangevinState` plus the **non-private** ``potential_energy`` and
    ``grad_norm`` at ``z`` (``debug=True`` only; never release them)."""

    i: jax.Array
    z: Any
    v: Any
    diverging: jax.Array
    rng_key: Any
    potential_energy: jax.Array
    grad_norm: jax.Array


class UnderdampedChain(NamedTuple):
    """Output of :func:`sample_chain`: stacked positions, velocities, divergence flags, last state."""

    z: Any
    v: Any
    diverging: jax.Array
    last_state: UnderdampedLangevinState


def _check(name, value):
    if isinstance(value, jax.core.Tracer):
        return value
    return check_positive(name, value)


def init(position, rng_key=None, *, velocity=None, divergence_fn: Callable | None = None):
    """Initial state at ``position`` with ``velocity`` or, by default, ``v_0 ~ N(0, I)``.

    The default velocity is drawn from ``rng_key``: ``rng_key`` is split into
    ``(state_key, velocity_key)`` and ``state_key`` is stored in the state.
    """
    position = as_float_tree(position)
    flat, unravel = ravel_pytree(position)
    if velocity is None:
        if rng_key is None:
            raise ValueError("underdamped.init needs rng_key to draw v_0 ~ N(0, I) (or pass velocity=...)")
        rng_key, kv = random.split(rng_key)
        velocity = unravel(gaussian_noise(kv, flat.shape, flat.dtype))
    else:
        velocity = as_float_tree(velocity)
        vflat, _ = ravel_pytree(velocity)
        if vflat.shape != flat.shape:
            raise ValueError(f"velocity must flatten to shape {flat.shape}, got {vflat.shape}")
    div_fn = make_divergence_fn(None) if divergence_fn is None else divergence_fn
    return UnderdampedLangevinState(jnp.zeros((), jnp.int32), position, velocity, div_fn(flat), rng_key)


def build_kernel(
    grad_fn: Callable,
    step_size: float,
    friction: float,
    project: Callable | Domain | None = None,
    divergence_fn: Callable | None = None,
) -> Callable:
    """Return ``step(rng_key, state) -> (state, info)`` for the Euler kinetic Langevin scheme.

    :param grad_fn: ``z -> grad U(z)`` (same pytree structure as ``z``).
    :param step_size: h > 0.
    :param friction: gamma > 0.
    :param project: Domain or callable on the flat position (applied to ``x`` only).
    :param divergence_fn: ``flat_position -> bool``; default: non-finite position.
    """
    h = _check("step_size", step_size)
    gamma = _check("friction", friction)
    proj = resolve_projection(project)
    div_fn = make_divergence_fn(None) if divergence_fn is None else divergence_fn

    def step(rng_key, state: UnderdampedLangevinState):
        x, unravel = ravel_pytree(state.z)
        v, _ = ravel_pytree(state.v)
        g, _ = ravel_pytree(grad_fn(state.z))
        dt = x.dtype
        noise = gaussian_noise(rng_key, x.shape, dt)
        v_new = v - h * (gamma * v + g.astype(dt)) + jnp.sqrt(2.0 * gamma * h).astype(dt) * noise
        x_new = x + h * v_new
        if proj is not None:
            x_new = proj(x_new)
        div_now = div_fn(x_new)
        diverging = jnp.logical_or(state.diverging, div_now)
        new = UnderdampedLangevinState(state.i + 1, unravel(x_new), unravel(v_new), diverging, state.rng_key)
        return new, UnderdampedLangevinInfo(div_now)

    return step


def as_top_level_api(
    logdensity_fn: Callable,
    step_size: float | None = None,
    friction: float | None = None,
    *,
    plan=None,
    domain: Callable | Domain | None = None,
    divergence_radius: float | None = None,
) -> SamplingAlgorithm:
    """BlackJAX-style kinetic Langevin: ``algo.init(position, rng_key=None, velocity=None)``
    and ``algo.step(rng_key, state) -> (state, info)``.

    ``plan`` (a :class:`~dp_infer.routes.plan.SamplingPlan` for ``kernel="underdamped"``) supplies the
    step size and friction; otherwise both are required. ``init`` draws ``v_0 ~ N(0, I)`` from
    ``rng_key`` unless ``velocity`` is given. ``logdensity_fn`` is ``-U``.
    """
    h, gamma = plan_parameters(plan, "underdamped", step_size, friction)
    if gamma is None:
        raise ValueError("friction is required for the underdamped kernel (or pass plan=); it must lie in (0, inf)")
    grad_fn = logdensity_to_grad(logdensity_fn)
    div_fn = make_divergence_fn(default_divergence_radius(domain, divergence_radius))
    step = build_kernel(grad_fn, h, gamma, domain, div_fn)

    def init_fn(position, rng_key=None, velocity=None) -> UnderdampedLangevinState:
        return init(position, rng_key, velocity=velocity, divergence_fn=div_fn)

    return SamplingAlgorithm(init_fn, step)


def sample_chain(
    rng_key,
    potential_fn: Callable | None,
    x0,
    step_size: float,
    friction: float,
    num_steps: int,
    *,
    v0=None,
    project: Callable | Domain | None = None,
    thinning: int = 1,
    grad_fn: Callable | None = None,
    divergence_radius: float | None = None,
) -> UnderdampedChain:
    """Run ``num_steps`` kinetic-Euler steps with ``lax.scan``; keep every ``thinning``-th state.

    Same conventions as :func:`dp_infer.kernels.langevin.sample_chain`; ``v0=None`` draws
    ``v_0 ~ N(0, I)`` from ``rng_key`` exactly as :class:`UnderdampedLangevin` does, so
    ``sample_chain(state_key, ...)`` reproduces a NumPyro chain initialised with that key.
    Privacy: charge ``num_steps * step_size / friction`` of overdamped-equivalent time.
    """
    if grad_fn is None:
        if potential_fn is None:
            raise ValueError("sample_chain needs potential_fn or grad_fn")
        grad_fn = jax.grad(potential_fn)
    div_fn = make_divergence_fn(default_divergence_radius(project, divergence_radius))
    state = init(x0, rng_key, velocity=v0, divergence_fn=div_fn)
    transition = keyed_transition(build_kernel(grad_fn, step_size, friction, project, div_fn))
    last, (zs, vs, divs) = scan_chain(
        transition, state, num_steps, thinning, lambda s: (s.z, s.v, s.diverging)
    )
    return UnderdampedChain(zs, vs, divs, last)


class UnderdampedLangevin(LangevinKernelBase):
    """Kinetic Langevin (Euler kinetic scheme, unit mass) as a NumPyro ``MCMCKernel``.

    ``v <- v - h (gamma v + grad U(x)) + sqrt(2 gamma h) xi;  x <- Pi_C(x + h v)``. No
    Metropolis correction, no warmup. ``v_0 ~ N(0, I)`` from the chain's own key.

    :param model: NumPyro model, or
    :param potential_fn: ``z -> U(z)`` (then pass ``init_params`` or a ``domain``).
    :param float step_size: h > 0 (keyword-only, required).
    :param float friction: gamma > 0 (keyword-only, required).
    :param domain: optional Domain on the flat (unconstrained) position; only ``x`` is projected.
    :param divergence_radius: as for :class:`~dp_infer.kernels.Langevin`.
    :param init_strategy: as for :class:`~dp_infer.kernels.Langevin` (data independent).
    :param bool debug: as for :class:`~dp_infer.kernels.Langevin` (adds non-private fields).

    State :class:`UnderdampedLangevinState` ``(i, z, v, diverging, rng_key)``; default export
    ``("z", "diverging")``; ``extra_fields=("v",)`` collects velocities (covered by the
    accountant). Privacy parameters: :attr:`step_size`, :attr:`friction`,
    :meth:`integrated_time` (kinetic time ``N h``; the accountant divides it by ``friction``:
    RDP ``alpha Delta_U^2 N h / (4 gamma)``).
    """

    _state_cls = UnderdampedLangevinState
    _debug_state_cls = UnderdampedLangevinDebugState

    def __init__(
        self,
        model=None,
        potential_fn=None,
        *,
        step_size,
        friction,
        domain: Domain | None = None,
        divergence_radius: float | None = None,
        init_strategy=init_to_median,
        debug: bool = False,
    ):
        if friction is None:
            raise ValueError("friction is required and must lie in (0, inf)")
        self._friction = check_positive("friction", friction)
        super().__init__(
            model,
            potential_fn,
            step_size=step_size,
            domain=domain,
            divergence_radius=divergence_radius,
            init_strategy=init_strategy,
            debug=debug,
        )

    @property
    def friction(self) -> float:
        """Friction gamma (data independent; the accountant divides the time by it)."""
        return self._friction

    def integrated_time(self, num_steps: int) -> float:
        """Kinetic time ``num_steps * step_size``. The path RDP is
        ``alpha Delta_U^2 integrated_time / (4 friction)``: divide by :attr:`friction` to get
        the overdamped-equivalent time used by the overdamped accountant."""
        return super().integrated_time(num_steps)

    def _core_init(self, z, rng_key):
        return init(z, rng_key, divergence_fn=self._divergence_fn)

    def _core_transition(self, grad_fn):
        transition = keyed_transition(
            build_kernel(grad_fn, self._step_size, self._friction, self._projection, self._divergence_fn)
        )
        return lambda state: transition(state)[0]
