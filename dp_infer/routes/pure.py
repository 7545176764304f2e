"""The pure route: pure eps on a bounded domain. The trajectory route at (eps (1 - f), delta_a) with a
tiny delta_a, its posterior mean purified by seed 003's Algorithm 1 (uniform mixing, Laplace noise)."""

from __future__ import annotations

import dataclasses
import math

from ..privacy import pure as pure_privacy
from ..privacy import purification as purif
from .plan import RouteOption, plan_trajectory

__all__ = ["option"]

def _plan(constants, n, dim, eps, domain, horizon, num_chains, num_draws, eps_prime_fraction,
          omega, purification_scale):
    if domain is None or not domain.bounded:
        return RouteOption("pure", False, "needs a bounded domain (L2Ball or Box) for purification")
    eps_prime = eps * eps_prime_fraction
    eps_a = eps - eps_prime
    scale = purification_scale if purification_scale is not None else 1e-3 * domain.diameter
    ld = purif.required_log_delta(domain, eps_prime, omega, scale)
    em_beta = pure_privacy.pure_beta(eps, n, constants.lipschitz, domain.diameter) \
        if math.isfinite(constants.lipschitz) else None
    try:
        plan = plan_trajectory(constants, n, dim, eps=eps_a, log_delta=ld, horizon=horizon,
                               num_chains=num_chains, num_draws=num_draws)
    except ValueError as e:
        return RouteOption("pure", False, str(e))
    params = purif.purification_parameters(domain, eps_prime, omega, log_delta=ld)
    event = purif.purified_event(eps_a, params)
    plan = dataclasses.replace(
        plan, route="pure", eps=eps, delta=0.0, event=event, release="purified_mean",
        purification=params.to_dict(),
        notes=plan.notes + (f"upstream trajectory at ({eps_a:g}, exp({ld:.1f}))-DP; only its purified "
                            f"posterior mean is released (Laplace scale {params.laplace_scale:.3g}, "
                            f"omega {omega:g})",))
    return RouteOption(
        "pure", True, "pure eps-DP on a bounded domain via purification of an (eps, delta) trajectory",
        beta=plan.beta, excess_risk_bound=plan.excess_risk_bound,
        releases="one purified posterior-mean estimate (draws themselves are not released)",
        assumptions=event.assumptions,
        details={"upstream_eps": eps_a, "upstream_log_delta": ld, "eps_prime": eps_prime,
                 "laplace_scale": params.laplace_scale, "omega": omega,
                 "exponential_mechanism_beta_exact_sampler_only": em_beta}, plan=plan)


def option(constants, n: int, dim: int, eps: float, delta, choices) -> RouteOption:
    """The pure route (seed 003): a trajectory at (eps (1 - f), tiny delta) purified to pure eps."""
    c = choices
    return _plan(constants, n, dim, eps, c.domain, c.horizon, c.num_chains, c.num_draws, c.eps_prime_fraction,
                 c.omega, c.purification_scale)
