"""The trajectory route (seed 001 Lemma 2.2): the whole path of K chains is mu-GDP with
mu = beta Delta sqrt(K t / 2); anytime, no convexity needed for privacy."""

from __future__ import annotations

from .plan import RouteOption, plan_trajectory

__all__ = ["option"]

def _plan(constants, n, dim, eps, delta, horizon, num_chains, kernel, friction, num_draws, lam_abs):
    try:
        plan = plan_trajectory(constants, n, dim, eps=eps, delta=delta, horizon=horizon,
                               num_chains=num_chains, kernel=kernel, friction=friction,
                               lam=lam_abs, num_draws=num_draws)
    except ValueError as e:
        return RouteOption("trajectory", False, str(e))
    return RouteOption(
        "trajectory", True,
        "anytime guarantee for the whole path; no convexity needed for privacy",
        beta=plan.beta, excess_risk_bound=plan.excess_risk_bound,
        releases=f"the full trajectory of {num_chains} chain(s) ({plan.num_draws} draws each)",
        assumptions=("convexity only for the p/beta bound and mixing (not for privacy)",),
        details={"mu": plan.event.mu, "horizon": plan.horizon, "num_steps": plan.num_steps},
        plan=plan)


def option(constants, n: int, dim: int, eps: float, delta: float, choices) -> RouteOption:
    """The trajectory route for (eps, delta): without a regulariser, or with the caller's
    ``lam_rel`` (absolute strength ``lam_rel * beta``, so beta is planned first without it)."""
    c = choices
    opt = _plan(constants, n, dim, eps, delta, c.horizon, c.num_chains, c.kernel, c.friction, c.num_draws, 0.0)
    if opt.plan is not None and c.lam_trajectory:
        opt = _plan(constants, n, dim, eps, delta, c.horizon, c.num_chains, c.kernel, c.friction, c.num_draws,
                    c.lam_trajectory * opt.plan.beta)
    return opt
