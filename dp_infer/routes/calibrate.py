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
from ..domains import Domain
from ..losses import LossConstants, PerExampleLoss
from ..privacy.conversions import linear_rdp_rho
from .plan import KERNELS, RouteOption, SamplingPlan, explain_options
from .registry import ESTIMATE_ROUTES, REGISTRY, RouteChoices

__all__ = ["ROUTES", "RouteOption", "calibrate", "explain_options", "default_regulariser"]

#: the route names calibrate accepts (the registry's estimate routes)
ROUTES = ESTIMATE_ROUTES


def default_regulariser(constants: LossConstants, n: int, dim: int, rho: float,
                        theta_scale: float) -> float:
    """A data-independent loss-level L2 strength lam_rel for the routes that need strong convexity.

    Balances the privacy-limited excess risk p / beta, with beta = 2 lam rho / Delta^2 (the
    last-iterate / stationary limit), against the regulariser's bias lam R^2 / 2:
    lam* = (Delta / R) sqrt(p / (2 rho)), Delta = G / n.
    """
    delta_s = constants.grad_diff / n
    return delta_s / theta_scale * math.sqrt(dim / (2.0 * rho))


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
        rho, lam_sc, lam_traj = None, 0.0, 0.0
    else:
        rho = linear_rdp_rho(eps, delta) / num_chains
        lam_sc = lam_rel if lam_rel is not None else default_regulariser(constants, n, dim, rho, theta_scale)
        lam_traj = 0.0 if lam_rel is None else lam_sc
    choices = RouteChoices(domain=domain, horizon=horizon, num_chains=num_chains, kernel=kernel,
                           friction=friction, num_draws=num_draws, lam_rel=lam_sc, lam_trajectory=lam_traj,
                           theta_scale=theta_scale, relaxations=relaxations, tv_target=tv_target,
                           max_steps=max_steps, eps_prime_fraction=eps_prime_fraction, omega=omega,
                           purification_scale=purification_scale)
    for name in ESTIMATE_ROUTES:  # the registry's estimate routes, each planned or refused with its reason
        r = REGISTRY[name]
        if r.pure_eps != pure_target:
            options.append(RouteOption(name, False, "the target is (eps, delta); pass delta=None for pure eps"
                                       if r.pure_eps else "gives (eps, delta)-DP only; the target is pure eps"))
        else:
            options.append(r.option(constants, n, dim, eps, None if pure_target else delta, choices))
    if pure_target:  # the pure route first, as explain() has always listed it
        options.sort(key=lambda o: o.route != "pure")
    else:
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
