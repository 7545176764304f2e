"""Small functional helpers shared by the kernels' cores and their NumPyro adapter: divergence
flags computed from theta alone, projections onto a domain, float casting and flattening."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import vmap
from jax.flatten_util import ravel_pytree

from .._validation import check_positive
from ..domains import Domain, Euclidean

__all__ = ["DEFAULT_DIVERGENCE_RADIUS", "SamplingAlgorithm", "make_divergence_fn", "resolve_projection",
           "default_divergence_radius", "as_float_tree", "logdensity_to_grad", "plan_parameters",
           "COVERED_FIELDS", "DEBUG_FIELDS", "check_extra_fields"]

#: state fields of the NumPyro adapters covered by the guarantee (functions of the released path)
COVERED_FIELDS = {"langevin": ("z", "i", "diverging"), "underdamped": ("z", "v", "i", "diverging")}
#: fields of the debug states: functions of the private data (never released)
DEBUG_FIELDS = ("potential_energy", "grad_norm")


def check_extra_fields(extra_fields, kernel: str, debug: bool) -> tuple[str, ...]:
    """NumPyro's ``extra_fields``, limited to what the guarantee covers (the others: debug only)."""
    if isinstance(extra_fields, str) or not isinstance(extra_fields, (tuple, list)):
        raise ValueError(f"extra_fields must be a tuple of state field names, got {extra_fields!r}")
    covered = COVERED_FIELDS[kernel]
    for name in extra_fields:
        if name in DEBUG_FIELDS and not debug:
            raise ValueError(f"extra_fields {name!r} is a function of the private data, not covered by the "
                             f"guarantee: collect it only with debug=True (a NON-PRIVATE run); covered: {covered}")
        if name not in covered and name not in DEBUG_FIELDS:
            raise ValueError(f"extra_fields {name!r} is not a field of the {kernel} kernel's state; covered: "
                             f"{covered}, debug only: {DEBUG_FIELDS}")
    return tuple(extra_fields)

DEFAULT_DIVERGENCE_RADIUS = 1e6


# --------------------------------------------------------------------------------------------
# small functional helpers shared by the cores
# --------------------------------------------------------------------------------------------


class SamplingAlgorithm(NamedTuple):
    """What ``as_top_level_api`` returns (BlackJAX's shape): ``init(position, rng_key=None)`` and
    ``step(rng_key, state) -> (state, info)``, pure functions to jit, vmap and scan."""

    init: Callable
    step: Callable


def logdensity_to_grad(logdensity_fn: Callable) -> Callable:
    """``z -> grad U(z)`` for the potential ``U = -logdensity_fn`` (BlackJAX's sign convention)."""
    if not callable(logdensity_fn):
        raise ValueError(f"logdensity_fn must be a callable z -> log density, got {logdensity_fn!r}")
    grad_logdensity = jax.grad(logdensity_fn)
    return lambda z: jax.tree.map(jnp.negative, grad_logdensity(z))


def plan_parameters(plan: Any, kernel: str, step_size, friction=None) -> tuple[float, float | None]:
    """(step_size, friction) from a :class:`~dp_infer.routes.plan.SamplingPlan` or the explicit values.

    With a plan, the step size (and friction) are the plan's: giving a different explicit value
    is refused, as is a plan made for another kernel. Without one, the step size is required.
    """
    if plan is None:
        if step_size is None:
            raise ValueError("step_size is required (or pass plan=, whose step size is then used); "
                             "it must lie in (0, inf)")
        return step_size, friction
    for attr in ("kernel", "step_size", "beta", "event"):
        if not hasattr(plan, attr):
            raise ValueError(f"plan must be a dp_infer SamplingPlan, got {type(plan).__name__}")
    if plan.kernel != kernel:
        raise ValueError(f"plan was made for kernel {plan.kernel!r}, not {kernel!r}: re-plan with kernel={kernel!r}")
    if step_size is not None and not math.isclose(float(step_size), float(plan.step_size), rel_tol=1e-12):
        raise ValueError(f"step_size={step_size!r} differs from the plan's {plan.step_size!r}: the plan's "
                         "privacy event covers its own step size only (omit step_size)")
    if kernel == "underdamped":
        if friction is not None and not math.isclose(float(friction), float(plan.friction), rel_tol=1e-12):
            raise ValueError(f"friction={friction!r} differs from the plan's {plan.friction!r} (omit friction)")
        friction = plan.friction
    return float(plan.step_size), friction


def _non_finite(x):
    return jnp.logical_not(jnp.all(jnp.isfinite(x)))


def _non_finite_or_outside(x, radius):
    return jnp.logical_or(_non_finite(x), jnp.linalg.norm(x) > radius)


def make_divergence_fn(radius: float | None = None) -> Callable:
    """``flat_theta -> bool``: any coordinate non-finite, or ``||flat_theta||_2 > radius``.

    ``radius`` ``None`` or ``inf`` checks finiteness only. The result pickles.
    """
    if radius is None or math.isinf(radius):
        return _non_finite
    return partial(_non_finite_or_outside, radius=float(radius))


def resolve_projection(project) -> Callable | None:
    """A Domain or a callable on the flat position -> callable or ``None`` (no projection)."""
    if project is None or isinstance(project, Euclidean):
        return None
    if isinstance(project, Domain):
        return project.project
    if callable(project):
        return project
    raise ValueError(
        f"project must be a dp_infer.domains.Domain, a callable on the flat position or None, got {project!r}"
    )


def default_divergence_radius(domain, divergence_radius) -> float:
    """Resolve ``divergence_radius``: explicit value, else inf for bounded domains, else 1e6."""
    if divergence_radius is not None:
        return check_positive("divergence_radius", divergence_radius, allow_inf=True)
    if isinstance(domain, Domain):
        return math.inf if domain.bounded else DEFAULT_DIVERGENCE_RADIUS
    if domain is not None:  # a custom projection callable: assume it keeps theta bounded
        return math.inf
    return DEFAULT_DIVERGENCE_RADIUS


def as_float_tree(tree):
    """Cast integer / bool leaves to the default float dtype (noise needs a float dtype)."""

    def cast(a):
        a = jnp.asarray(a)
        return a if jnp.issubdtype(a.dtype, jnp.floating) else a.astype(jnp.result_type(float))

    return jax.tree.map(cast, tree)


def is_traced(*xs) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(xs))


def flatten_positions(z, batched: bool):
    """Flat position(s) and the unravel function of one chain."""
    if batched:
        one = jax.tree.map(lambda a: a[0], z)
        _, unravel = ravel_pytree(one)
        flat = vmap(lambda t: ravel_pytree(t)[0])(z)
        return flat, vmap(unravel)
    flat, unravel = ravel_pytree(z)
    return flat, unravel
