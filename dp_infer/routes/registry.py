"""The routes, as a registry: one module per route, one record each, one loop in ``calibrate``.

Every route turns a privacy target and public inputs (n, the dimension, the loss's declared
constants, the caller's choices) into a plan that carries its privacy event; none reads data.

=============  ==========  ==================================================  =========================
route          target      planner                                             run by (dp_infer.infer)
=============  ==========  ==================================================  =========================
trajectory     estimate    :func:`dp_infer.routes.trajectory.option`            ``fit.sample``
last_iterate   estimate    :func:`dp_infer.routes.last_iterate.option`          ``fit.sample``
stationary     estimate    :func:`dp_infer.routes.stationary.option`            ``fit.sample``
pure           estimate    :func:`dp_infer.routes.pure.option`                  ``fit.sample`` + purify
posterior      posterior   :func:`dp_infer.routes.posterior.plan_posterior`     ``posterior.sample_posterior``
proximal       estimate    :func:`dp_infer.privacy.proximal.plan_proximal`      ``proximal.sample_proximal``
=============  ==========  ==================================================  =========================

The estimate routes share one signature, ``option(constants, n, dim, eps, delta, choices) ->
RouteOption``, so :func:`dp_infer.routes.calibrate.calibrate` is a loop over
:data:`ESTIMATE_ROUTES`; the posterior and proximal routes take other inputs (a prior; a
non-smooth loss) and are chosen by the target and the loss in :func:`dp_infer.infer.fit.fit`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..domains import Domain
from . import last_iterate, pure, stationary, trajectory

__all__ = ["Route", "RouteChoices", "REGISTRY", "ESTIMATE_ROUTES", "route_names"]


@dataclass(frozen=True)
class RouteChoices:
    """The caller's validated, data-independent choices that the estimate routes read.

    ``lam_rel``: the loss-level L2 strength of the routes that need strong convexity;
    ``lam_trajectory``: the trajectory route's (0 unless the caller gave ``lam_rel``).
    """

    domain: Domain | None
    horizon: float
    num_chains: int
    kernel: str
    friction: float | None
    num_draws: int
    lam_rel: float
    lam_trajectory: float
    theta_scale: float
    relaxations: float
    tv_target: float | None
    max_steps: float
    eps_prime_fraction: float
    omega: float
    purification_scale: float | None


@dataclass(frozen=True)
class Route:
    """One privacy route: its name, what it plans for, what it releases and needs, and (for the
    estimate routes) its planner ``option(constants, n, dim, eps, delta, choices)``."""

    name: str
    target: str
    releases: str
    needs: str
    option: Callable | None = None
    pure_eps: bool = False


REGISTRY: dict[str, Route] = {r.name: r for r in (
    Route("trajectory", "estimate", "every draw of every chain", "a gradient bound G", trajectory.option),
    Route("last_iterate", "estimate", "the last iterate of each chain",
          "strong convexity (an L2 regulariser) and smoothness", last_iterate.option),
    Route("stationary", "estimate", "the final draw of one chain",
          "strong convexity, smoothness and an explicit sampler TV bound", stationary.option),
    Route("pure", "estimate", "one purified posterior-mean estimate", "a bounded domain", pure.option,
          pure_eps=True),
    Route("posterior", "posterior", "every draw of every chain (theta = C phi)",
          "a Gaussian prior and a GLM link bound or a gradient bound"),
    Route("proximal", "estimate", "the final position of each chain",
          "a convex Lipschitz loss without smoothness"),
)}

#: the routes ``calibrate`` compares for an estimate target, in the order ``explain()`` lists them
ESTIMATE_ROUTES = ("trajectory", "last_iterate", "stationary", "pure")


def route_names() -> tuple[str, ...]:
    """Every registered route's name."""
    return tuple(REGISTRY)
