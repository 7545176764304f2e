"""The last-iterate route: for an m-strongly convex, M-smooth potential and h <= 2/(beta (m + M)),
the final iterate's RDP stays bounded as the number of steps grows (only the last iterate of
each chain is released)."""

from __future__ import annotations

import math

from ..privacy import last_iterate as li
from ..privacy.conversions import linear_rdp_rho
from ..privacy.float32_margin import float32_margin_assumption, with_float32_margin
from .plan import RouteOption, SamplingPlan

__all__ = ["option", "CLIPPED_REASON"]

CLIPPED_REASON = ("needs a contraction: the loss clips per-example gradients, and a clipped gradient "
                   "map is not a contraction whatever the declared m and M (use the trajectory route)")


def _plan(constants, n, dim, eps, delta, num_chains, lam_rel, theta_scale, relaxations):
    if constants.clipped:
        return RouteOption("last_iterate", False, CLIPPED_REASON)
    if constants.smoothness is None:
        return RouteOption("last_iterate", False, "needs a declared smoothness M (step-size condition)")
    m = constants.strong_convexity + lam_rel
    if m <= 0:
        return RouteOption("last_iterate", False,
                           "needs strong convexity: declare an L2 regulariser (lam_rel > 0)")
    M = constants.smoothness + lam_rel
    s = with_float32_margin(constants.grad_diff / n, n)
    # beta from the bound uniform in the number of steps at h = 1/(beta (m + M)):
    # rho(K -> inf) = beta s^2 (2 - h beta m) / (4 m) with h beta = 1/(m + M).
    rho_max = linear_rdp_rho(eps, delta)
    beta = 4.0 * m * rho_max / (num_chains * s * s * (2.0 - m / (m + M)))
    beta = beta * (1 - 1e-9)
    h = 1.0 / (beta * (m + M))
    num_steps = int(math.ceil(relaxations / (h * beta * m)))
    event = li.last_iterate_event(beta, s, h, num_steps, m, M, num_chains=num_chains)
    from ..privacy.accountant import Accountant

    eps_spent = Accountant([event]).get_epsilon(delta)
    if eps_spent > eps * (1 + 1e-9):  # the closed-form beta must meet the target
        raise AssertionError(f"last-iterate calibration overspent: {eps_spent} > {eps}")
    lam_abs = beta * lam_rel
    plan = SamplingPlan(
        route="last_iterate", eps=eps, delta=delta, beta=beta, lam=lam_abs, step_size=h,
        num_steps=num_steps, num_chains=num_chains, kernel="langevin", friction=None,
        thinning=num_steps, burn_in=0, n=n, dim=dim, sensitivity=s, event=event,
        assumptions=(f"loss-level strong convexity m = {m:g} from the L2 regulariser "
                     f"lam_rel = {lam_rel:g} (U = beta (L + lam_rel/2 |theta|^2))",
                     f"loss-level smoothness M = {M:g} (declared)",
                     float32_margin_assumption(n, "G / n")),
        sampling_error_tv=None, excess_risk_bound=dim / beta + 0.5 * lam_rel * theta_scale**2,
        relaxation_time=1.0 / (h * beta * m), release="last_iterate",
        notes=(f"{relaxations:g} relaxation times 1/(h beta m) from the data-independent start",))
    return RouteOption(
        "last_iterate", True,
        "privacy of the final iterate stays bounded as the chain runs (strongly convex potential)",
        beta=beta, excess_risk_bound=plan.excess_risk_bound,
        releases=f"the last iterate of each of {num_chains} chain(s) only",
        assumptions=plan.assumptions, details={"rho": event.rho, "step_size": h, "num_steps": num_steps,
                                               "lam_rel": lam_rel}, plan=plan)


def option(constants, n: int, dim: int, eps: float, delta: float, choices) -> RouteOption:
    """The last-iterate route (contractive noisy iterations, shifted Renyi divergence)."""
    c = choices
    return _plan(constants, n, dim, eps, delta, c.num_chains, c.lam_rel, c.theta_scale, c.relaxations)
