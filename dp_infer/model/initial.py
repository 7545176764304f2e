"""Data-independent starts and step-size facts for a NumPyro model (:mod:`dp_infer.model.bridge`).

Init strategies (NumPyro's names) are evaluated on the model called with public placeholder rows,
from the chain's own key, once: no re-draw until the potential is finite (NumPyro's MCMC
re-draws until the potential *of the private data* is finite, a data-dependent selection).

=========================  ==========================================================
``init_to_uniform``        accepted (default): uniform in ``(-radius, radius)`` in the
                           unconstrained space, independent per chain
``init_to_feasible``       accepted: the unconstrained zero point
``init_to_sample``         accepted: one prior draw (the prior is checked not to read the data)
``init_to_value``          accepted: the values are YOUR declaration that they are public (not
                           computed from the private data); reported as an assumption
``init_to_median``,        refused: a statistic of many model draws that NumPyro re-draws
``init_to_mean``           until the potential of the private data is finite
any other callable         refused: dp_infer cannot check that it ignores the data
=========================  ==========================================================

:func:`prior_curvature` gives the largest Hessian eigenvalue of the prior potential at fixed
public points: the planner adds it to the step-size condition (it never enters privacy).
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions.transforms import biject_to
from numpyro.infer.initialization import init_to_uniform

from .bridge import ModelLoss

__all__ = ["ACCEPTED_INIT_STRATEGIES", "check_init_strategy", "initial_positions", "prior_curvature",
           "prior_draws", "prior_scales"]

ACCEPTED_INIT_STRATEGIES = ("init_to_uniform", "init_to_feasible", "init_to_sample", "init_to_value")
_REFUSED = {
    "init_to_median": "it summarises many draws of the model called with the data and, in NumPyro's MCMC, is "
                      "re-drawn until the potential of the private data is finite: a start chosen with the data",
    "init_to_mean": "it summarises many draws of the model called with the data and, in NumPyro's MCMC, is "
                    "re-drawn until the potential of the private data is finite: a start chosen with the data",
}
_ADVICE = ("use init_to_uniform (default), init_to_feasible, init_to_sample, or init_to_value with public "
           "values (DESIGN invariant 1: nothing that feeds the sampler looks at the data)")


def _strategy_name(strategy) -> str:
    fn = getattr(strategy, "func", strategy)
    return getattr(fn, "__name__", type(strategy).__name__)


def check_init_strategy(strategy) -> tuple[str, tuple[str, ...]]:
    """(name, assumptions) of an accepted strategy; a one-line ``ValueError`` (with the reason)
    for a refused one. ``None`` means ``init_to_uniform``."""
    if strategy is None:
        return "init_to_uniform", ()
    if not callable(strategy):
        raise ValueError(f"init_strategy must be a NumPyro init strategy, got {strategy!r}; {_ADVICE}")
    name = _strategy_name(strategy)
    if name in _REFUSED:
        raise ValueError(f"init_strategy {name} is refused on private data: {_REFUSED[name]}; {_ADVICE}")
    if name not in ACCEPTED_INIT_STRATEGIES:
        raise ValueError(f"init_strategy {name!r} is refused: dp_infer cannot check that a custom strategy "
                         f"ignores the data; {_ADVICE}")
    if name == "init_to_value":
        values = dict(getattr(strategy, "keywords", {}).get("values") or {})
        return name, (f"initial values of {sorted(values)} declared public by the user (not computed from the "
                      "private data)",)
    return name, ()


def _one_start(ml: ModelLoss, strategy, key) -> jax.Array:
    seeded = handlers.substitute(handlers.seed(ml.model, key), substitute_fn=strategy)
    tr = handlers.trace(seeded).get_trace(**ml.placeholder(1))
    z = {k: biject_to(ml.supports[k]).inv(tr[k]["value"]) for k in ml.latent_sites}
    return ravel_pytree(z)[0]


def initial_positions(ml: ModelLoss, strategy, key, num_chains: int) -> jax.Array:
    """Flat unconstrained starts, shape ``(num_chains, ml.dim)``: one evaluation of the strategy per
    chain on placeholder rows, keyed by ``fold_in(key, chain)``; never re-drawn."""
    check_init_strategy(strategy)
    strategy = init_to_uniform if strategy is None else strategy
    starts = [_one_start(ml, strategy, jax.random.fold_in(key, c)) for c in range(num_chains)]
    out = jnp.stack(starts).astype(jnp.result_type(float))
    if not bool(jnp.all(jnp.isfinite(out))):
        raise ValueError("init_strategy gave a non-finite start (check init_to_value's values and the supports)")
    return out


def prior_draws(ml: ModelLoss, key, num_draws: int) -> np.ndarray:
    """``num_draws`` flat unconstrained draws of the model's prior, shape ``(num_draws, dim)``:
    the model run on placeholder rows (never the private ones), observed sites ignored."""
    from numpyro.infer.initialization import init_to_sample

    keys = jax.random.split(key, int(num_draws))
    return np.asarray(jax.jit(jax.vmap(lambda k: _one_start(ml, init_to_sample, k)))(keys), dtype=np.float64)


def prior_scales(ml: ModelLoss, *, num_draws: int = 4000, key=None) -> np.ndarray:
    """A robust prior scale per unconstrained coordinate: half the 16%-84% inter-quantile range of
    ``num_draws`` prior draws (the sd for a normal prior; finite for heavy-tailed ones), from a
    FIXED public key (default ``PRNGKey(0)``: the prior is public, so the scales -- and every plan
    made from them -- are a deterministic function of the model). Degenerate coordinates get 1.
    """
    draws = prior_draws(ml, jax.random.PRNGKey(0) if key is None else key, num_draws)
    lo, hi = np.quantile(draws, [0.15865525393145707, 0.8413447460685429], axis=0)
    s = 0.5 * (hi - lo)
    return np.where(np.isfinite(s) & (s > 0), s, 1.0)


def prior_curvature(ml: ModelLoss, points=None) -> float:
    """Largest eigenvalue of the prior potential's Hessian (unconstrained space) over ``points``.

    Default points: the unconstrained zero point and the diagonal corners ``+-1`` (public, fixed).
    A heuristic for the step size only: the prior is data independent, and on the trajectory route
    the step size does not enter the privacy guarantee.
    """
    if points is None:
        points = [jnp.zeros(ml.dim), jnp.ones(ml.dim), -jnp.ones(ml.dim)]
    hess = jax.jit(jax.hessian(ml.prior_potential))
    top = 0.0
    for p in points:
        H = np.asarray(hess(jnp.asarray(p, dtype=jnp.result_type(float))), dtype=np.float64)
        if not np.all(np.isfinite(H)):
            continue
        top = max(top, float(np.linalg.eigvalsh(0.5 * (H + H.T))[-1]))
    return top if math.isfinite(top) else 0.0


def describe_strategy(strategy: Callable | None) -> dict:
    """Report entry of an init strategy (its name and, for init_to_uniform, the radius)."""
    name, assumptions = check_init_strategy(strategy)
    d = {"name": name}
    radius = getattr(strategy, "keywords", {}).get("radius") if strategy is not None else None
    if name == "init_to_uniform":
        d["radius"] = 2.0 if radius is None else float(radius)
    if assumptions:
        d["assumptions"] = list(assumptions)
    return d
