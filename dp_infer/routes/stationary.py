"""The stationary route (seed 002): an exact draw of exp(-beta (L + lam_rel/2 |theta|^2)) is
Delta sqrt(beta / m)-GDP; an approximate sampler at TV tau adds (1 + e^eps) tau to delta."""

from __future__ import annotations

import math

from ..domains import Euclidean
from ..privacy import stationary as stat
from .last_iterate import CLIPPED_REASON
from .plan import RouteOption, SamplingPlan

__all__ = ["option"]

def _plan(constants, n, dim, eps, delta, lam_rel, theta_scale, tv_target, max_steps, domain):
    if constants.clipped:
        return RouteOption("stationary", False, CLIPPED_REASON.replace("a contraction", "a Gibbs target "
                                                                        "whose drift is the loss gradient"))
    if domain is not None and not isinstance(domain, Euclidean):
        return RouteOption("stationary", False,
                           "its explicit ULA TV bound assumes an unprojected chain on R^d; a bounded "
                           "domain projects every step (use the trajectory or last-iterate route)")
    m = constants.strong_convexity + lam_rel
    if m <= 0:
        return RouteOption("stationary", False,
                           "needs strong convexity: declare an L2 regulariser (lam_rel > 0)")
    if constants.smoothness is None:
        return RouteOption("stationary", False, "needs a declared smoothness M for the sampler's TV bound")
    s = constants.grad_diff / n
    tau = tv_target if tv_target is not None else 0.1 * delta / (1 + math.exp(eps))
    try:
        beta = stat.stationary_beta_max(eps, delta, sensitivity=s, strong_convexity=m, tv_error=tau)
    except ValueError as e:
        return RouteOption("stationary", False, str(e))
    # explicit ULA bound (Vempala-Wibisono; seed-001 digest §6.7): KL <= e^{-c h k} KL0 + 8 h p M_U^2 / c
    M_U, c = beta * (constants.smoothness + lam_rel), beta * m
    h = min(c / (4 * M_U**2), c * tau**2 / (8 * dim * M_U**2))
    kl0 = 0.5 * dim * math.log(M_U / c) + 0.5 * M_U * theta_scale**2  # N(0, I/M_U) start, ||theta*|| <= R
    steps = math.log(max(kl0, tau**2) / tau**2) / (c * h)
    details = {"tv_target": tau, "step_size": h, "num_steps_needed": steps, "lam_rel": lam_rel}
    if steps > max_steps:
        return RouteOption(
            "stationary", False,
            f"impractical: the explicit ULA bound needs about {steps:.3g} steps to reach TV {tau:.2g} "
            f"(> max_steps = {max_steps:g})", beta=beta,
            excess_risk_bound=dim / beta + 0.5 * lam_rel * theta_scale**2,
            releases="one exact-enough draw per chain", details=details)
    # at least one step: a start law already within the bound (KL0 <= tau^2, e.g. M = m and a small
    # M_U R^2) needs none, but a plan of zero steps has no draw to release (thinning 0)
    num_steps = max(1, int(math.ceil(steps)))
    event = stat.stationary_event(beta, s, m, tv_error=tau)
    plan = SamplingPlan(
        route="stationary", eps=eps, delta=delta, beta=beta, lam=beta * lam_rel, step_size=h,
        num_steps=num_steps, num_chains=1, kernel="langevin", friction=None, thinning=num_steps,
        burn_in=0, n=n, dim=dim, sensitivity=s, event=event,
        assumptions=(f"loss-level strong convexity m = {m:g} (L2 regulariser lam_rel = {lam_rel:g})",
                     f"||theta*|| <= theta_scale = {theta_scale:g} (initial-KL bound)",
                     "ULA TV bound of Vempala-Wibisono (LSI constant beta m, smoothness beta M), "
                     "for the start law N(0, I / M_U) the run uses and no projection"),
        sampling_error_tv=tau, excess_risk_bound=dim / beta + 0.5 * lam_rel * theta_scale**2,
        relaxation_time=1.0 / (h * beta * m), release="last_iterate",
        init_law="gaussian", init_scale=1.0 / math.sqrt(M_U),
        notes=(f"final draw at TV <= {tau:.2g} from the Gibbs target: delta includes (1 + e^eps) tau",))
    return RouteOption("stationary", True,
                       "one draw within an explicit TV bound of the exact Gibbs distribution",
                       beta=beta, excess_risk_bound=plan.excess_risk_bound,
                       releases="the final draw of one chain", assumptions=plan.assumptions,
                       details=details, plan=plan)


def option(constants, n: int, dim: int, eps: float, delta: float, choices) -> RouteOption:
    """The stationary route (seed 002): one draw within an explicit TV bound of the Gibbs target."""
    c = choices
    return _plan(constants, n, dim, eps, delta, c.lam_rel, c.theta_scale, c.tv_target, c.max_steps, c.domain)
