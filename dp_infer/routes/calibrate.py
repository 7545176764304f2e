"""Choose the privacy route and its parameters from the target and the declared assumptions.

:func:`calibrate` evaluates every route the seeds give, checks its assumptions against the
loss's declared constants (never against the data), and returns the :class:`SamplingPlan` of
the best feasible one; ``plan.explain()`` shows all of them side by side.

Routes (see the concepts page of the docs):

* ``trajectory`` — seed 001 Lemma 2.2: the whole path is mu-GDP, mu = beta Delta sqrt(K t/2).
  Anytime, no convexity needed for privacy; costs grow with the horizon t.
* ``last_iterate`` — contractive noisy iterations (shifted Renyi divergence): for an
  m-strongly convex, M-smooth potential and h <= 2/(beta (m + M)), the final iterate's RDP
  stays bounded as the number of steps grows. Only the last iterate of each chain is released.
  Needs strong convexity (here: an L2 regulariser lam_rel, loss level).
* ``stationary`` — seed 002: an exact draw of exp(-beta (L + lam_rel/2 |theta|^2)) is
  Delta sqrt(beta / m)-GDP; an approximate sampler at TV tau adds (1 + e^eps) tau to delta.
  Feasible only when an explicit ULA bound (Vempala-Wibisono, seed-001 digest §6.7) reaches
  the TV target within ``max_steps``; usually it does not, and the plan says so.
* ``pure`` — pure eps on a bounded domain: the trajectory route at (eps (1 - f), delta_a) with a
  tiny delta_a, its posterior mean (post-processing, inside the convex domain) purified by seed
  003's Algorithm 1 (uniform mixing with probability omega, Laplace noise) to (eps, 0)-DP. The
  exponential-mechanism beta = eps n / (2 L diam) (seed 001 Thm 2.1) is shown for reference: it
  needs an exact sampler, which finite Langevin runs are not.

Excess-risk bounds quoted are those of the target distribution (convex loss): p / beta for the
Gibbs posterior (seed 001 Thm 2.4) plus the regulariser's bias lam_rel R^2 / 2, with R an
a-priori scale of ||theta*|| (``theta_scale``, not computed from the data).
"""

from __future__ import annotations

import dataclasses
import math

from .._validation import (
    check_choice, check_delta, check_nonnegative, check_positive, check_positive_int, check_target_epsilon,
)
from ..domains import Domain, Euclidean
from ..losses import LossConstants, PerExampleLoss
from .plan import KERNELS, RouteOption, SamplingPlan, explain_options, plan_trajectory
from ..privacy import last_iterate as li
from ..privacy import pure as pure_privacy
from ..privacy import purification as purif
from ..privacy import stationary as stat
from ..privacy.conversions import linear_rdp_rho

__all__ = ["ROUTES", "RouteOption", "calibrate", "explain_options", "default_regulariser"]

ROUTES = ("trajectory", "last_iterate", "stationary", "pure")


def default_regulariser(constants: LossConstants, n: int, dim: int, rho: float,
                        theta_scale: float) -> float:
    """A data-independent loss-level L2 strength lam_rel for the routes that need strong convexity.

    Balances the privacy-limited excess risk p / beta, with beta = 2 lam rho / Delta^2 (the
    last-iterate / stationary limit), against the regulariser's bias lam R^2 / 2:
    lam* = (Delta / R) sqrt(p / (2 rho)), Delta = G / n.
    """
    delta_s = constants.grad_diff / n
    return delta_s / theta_scale * math.sqrt(dim / (2.0 * rho))


def _trajectory(constants, n, dim, eps, delta, horizon, num_chains, kernel, friction, num_draws, lam_abs):
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


_CLIPPED_REASON = ("needs a contraction: the loss clips per-example gradients, and a clipped gradient "
                   "map is not a contraction whatever the declared m and M (use the trajectory route)")


def _last_iterate(constants, n, dim, eps, delta, num_chains, lam_rel, theta_scale, relaxations):
    if constants.clipped:
        return RouteOption("last_iterate", False, _CLIPPED_REASON)
    if constants.smoothness is None:
        return RouteOption("last_iterate", False, "needs a declared smoothness M (step-size condition)")
    m = constants.strong_convexity + lam_rel
    if m <= 0:
        return RouteOption("last_iterate", False,
                           "needs strong convexity: declare an L2 regulariser (lam_rel > 0)")
    M = constants.smoothness + lam_rel
    s = constants.grad_diff / n
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
                     f"loss-level smoothness M = {M:g} (declared)",),
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


def _stationary(constants, n, dim, eps, delta, lam_rel, theta_scale, tv_target, max_steps, domain):
    if constants.clipped:
        return RouteOption("stationary", False, _CLIPPED_REASON.replace("a contraction", "a Gibbs target "
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


def _pure(constants, n, dim, eps, domain, horizon, num_chains, num_draws, eps_prime_fraction,
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


def calibrate(loss: PerExampleLoss | LossConstants, n: int, dim: int, *, eps: float,
              delta: float | None = None, route: str = "auto", domain: Domain | None = None,
              lam_rel: float | None = None, theta_scale: float = 10.0, horizon: float = 1.0,
              num_chains: int = 1, kernel: str = "langevin", friction: float | None = None,
              num_draws: int = 1000, relaxations: float = 10.0, tv_target: float | None = None,
              max_steps: float = 2e6, eps_prime_fraction: float = 0.1, omega: float = 0.01,
              purification_scale: float | None = None) -> SamplingPlan:
    """The plan of the best feasible route for (eps, delta) — or pure eps when ``delta`` is None or 0.

    ``route="auto"`` picks, among feasible routes for the target, the one with the smallest
    excess-risk bound of its target distribution; any route name forces that route (a clear
    error says why it is infeasible). ``lam_rel`` (loss-level L2 strength for the routes that
    need strong convexity) defaults to :func:`default_regulariser`; the trajectory route uses no
    regulariser unless ``lam_rel`` is given. Everything here is data independent.
    """
    constants = loss.constants if isinstance(loss, PerExampleLoss) else loss
    if not isinstance(constants, LossConstants):
        raise ValueError("loss must be a PerExampleLoss or LossConstants")
    if domain is None and isinstance(loss, PerExampleLoss):
        domain = loss.domain
    # Every user choice is validated here, before any route is evaluated: a bad value is an
    # error, never a silent switch to another route.
    constants.require_finite_grad_diff()
    eps = check_target_epsilon(eps)
    pure_target = delta is None or delta == 0
    if not pure_target:
        delta = check_delta(delta)
    n = check_positive_int("n", n)
    dim = check_positive_int("dim", dim)
    if domain is not None and not isinstance(domain, Domain):
        raise ValueError(f"domain must be a dp_infer.domains.Domain or None, got {type(domain).__name__}")
    if domain is not None and domain.dim != dim:
        raise ValueError(f"domain.dim = {domain.dim} does not match the parameter dimension {dim}")
    theta_scale = check_positive("theta_scale", theta_scale)
    horizon = check_positive("horizon", horizon)
    num_chains = check_positive_int("num_chains", num_chains)
    num_draws = check_positive_int("num_draws", num_draws)
    relaxations = check_positive("relaxations", relaxations)
    max_steps = check_positive("max_steps", max_steps)
    if tv_target is not None:
        tv_target = check_positive("tv_target", tv_target)
        if tv_target >= 1:
            raise ValueError(f"tv_target must lie in (0, 1), got {tv_target!r}")
    if lam_rel is not None:
        lam_rel = check_nonnegative("lam_rel", lam_rel)
    check_choice("kernel", kernel, KERNELS)
    if kernel == "underdamped":
        friction = check_positive("friction", 1.0 if friction is None else friction)
    elif friction is not None:
        raise ValueError("friction applies to kernel='underdamped' only")
    if purification_scale is not None:
        purification_scale = check_positive("purification_scale", purification_scale)
    if route != "auto" and route not in ROUTES:
        raise ValueError(f"route must be 'auto' or one of {ROUTES}, got {route!r}")
    if pure_target and route not in ("auto", "pure"):
        raise ValueError(f"a pure-eps target (delta = 0) needs route 'pure', got {route!r}")
    if not pure_target and route == "pure":
        raise ValueError("route 'pure' releases pure eps-DP: pass delta=None (or 0)")
    if not 0 < eps_prime_fraction < 1:
        raise ValueError(f"eps_prime_fraction must lie in (0, 1), got {eps_prime_fraction!r}")
    if not 0 < omega <= 1:
        raise ValueError(f"omega must lie in (0, 1], got {omega!r}")

    options: list[RouteOption] = []
    if pure_target:
        options.append(_pure(constants, n, dim, eps, domain, horizon, num_chains, num_draws,
                             eps_prime_fraction, omega, purification_scale))
        for r in ("trajectory", "last_iterate", "stationary"):
            options.append(RouteOption(r, False, "gives (eps, delta)-DP only; the target is pure eps"))
    else:
        rho = linear_rdp_rho(eps, delta) / num_chains
        lam_sc = (check_nonnegative("lam_rel", lam_rel) if lam_rel is not None
                  else default_regulariser(constants, n, dim, rho, theta_scale))
        lam_traj = 0.0 if lam_rel is None else lam_sc
        traj = _trajectory(constants, n, dim, eps, delta, horizon, num_chains, kernel, friction,
                           num_draws, 0.0)
        if traj.plan is not None and lam_traj:
            traj = _trajectory(constants, n, dim, eps, delta, horizon, num_chains, kernel, friction,
                               num_draws, lam_traj * traj.plan.beta)
        options.append(traj)
        options.append(_last_iterate(constants, n, dim, eps, delta, num_chains, lam_sc,
                                     theta_scale, relaxations))
        options.append(_stationary(constants, n, dim, eps, delta, lam_sc, theta_scale, tv_target,
                                   max_steps, domain))
        options.append(RouteOption("pure", False, "the target is (eps, delta); pass delta=None for pure eps"))
        options.extend(_optional_routes(constants, n, dim, eps, delta, lam_sc))

    if route == "auto":
        feasible = [o for o in options if o.feasible and o.plan is not None]
        if not feasible:
            reasons = "; ".join(f"{o.route}: {o.reason}" for o in options)
            raise ValueError(f"no feasible route for this target and these assumptions ({reasons})")
        chosen = min(feasible, key=lambda o: o.excess_risk_bound if o.excess_risk_bound is not None else math.inf)
        why = (f"chosen: the feasible route with the smallest excess-risk bound of its target "
               f"({chosen.excess_risk_bound:.4g})")
    else:
        chosen = next(o for o in options if o.route == route)
        if not chosen.feasible or chosen.plan is None:
            raise ValueError(f"route {route!r} is not feasible here: {chosen.reason}")
        why = "chosen: forced by the caller"
    return dataclasses.replace(chosen.plan, options=tuple(options),
                               notes=chosen.plan.notes + (why,))


def _optional_routes(constants, n, dim, eps, delta, lam_rel):
    """Reference-only routes (reported, never run): seed 004's discretised Renyi conditions."""
    from ..privacy import discretised

    out = []
    m = constants.strong_convexity + lam_rel
    if constants.smoothness is not None and m > 0:
        try:
            req = discretised.discretised_renyi_requirements(
                eps, delta, n=n, dim=dim, grad_diff=constants.grad_diff,
                smoothness=constants.smoothness + lam_rel, strong_convexity=m)
            out.append(RouteOption("discretised_renyi", False,
                                   f"reference only ({'practical' if req.practical else 'impractical'}): "
                                   f"{req.reason}", details=req.as_dict()))
        except ValueError as e:
            out.append(RouteOption("discretised_renyi", False, f"reference calculator refused: {e}"))
    return out
