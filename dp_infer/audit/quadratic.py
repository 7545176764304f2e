"""The 1-D quadratic family: the worst case of the path and Gaussian analyses, one audit per route."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import random

from ..randomness import secret_key
from .chains import truncnorm_draws, ula_batch, ula_final_mu
from .statistics import AuditResult, audit_statistics

ROUTES = ("trajectory", "trajectory_unsafe", "last_iterate", "stationary", "pure", "purified",
          "rashomon_path", "rashomon_path_unsafe")


def quadratic_audit(route: str = "trajectory", *, eps: float = 3.0, delta: float = 1e-5, n: int = 100,
                    horizon: float = 1.0, num_samples: int = 200_000, confidence: float = 0.95,
                    statistic: str | None = None, seed: int | None = None, eps_prime: float = 0.5,
                    omega: float = 0.05, mixing_times: float = 8.0, psi: float = 0.01) -> AuditResult:
    """Audit one route on the 1-D quadratic family with a canary at +1 (D) / -1 (D').

    ``num_samples`` independent chains (draws) per side. ``statistic``: ``"llr"`` (path LLR
    statistic; trajectory routes only, default there), ``"final"`` (last iterate), or for the
    Rashomon routes ``"range"`` (default) / ``"mean"`` / ``"final"``. ``psi``: Rashomon threshold.
    """
    from ..routes import plan as plan_mod
    from ..losses import LossConstants
    from ..privacy import last_iterate, path, pure, stationary
    from ..privacy.conversions import gdp_epsilon, linear_rdp_epsilon

    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    consts = LossConstants(lipschitz=2.0, grad_diff=2.0, smoothness=1.0, strong_convexity=1.0)
    sens = consts.grad_diff / n
    c_d, c_dp = 1.0 / n, -1.0 / n          # mean(d) with the canary at +1 / -1, others 0
    k_d, k_dp, k_p = random.split(secret_key(seed)[0], 3)
    params: dict = {"n": n, "sensitivity": sens}
    claimed, claimed_delta, eps_exact = eps, delta, None
    stat = statistic or ("llr" if route.startswith("trajectory") else
                         "range" if route.startswith("rashomon") else "final")
    if stat == "llr" and not route.startswith("trajectory"):
        raise ValueError("the llr statistic is for the trajectory routes (the released path)")
    if stat in ("range", "mean") and not route.startswith("rashomon"):
        raise ValueError(f"the {stat!r} statistic is for the Rashomon routes")

    def chains(beta, h, K, project=None):
        out = []
        for key, c in ((k_d, c_d), (k_dp, c_dp)):
            g = lambda z, c=c: beta * (z - c)  # noqa: E731  grad of beta * (z - mean d)^2 / 2
            fin, acc = ula_batch(key, num_samples, g, jnp.zeros(()), h, K, project=project)
            out.append(fin - 0.0 + h * beta * acc if stat == "llr" else fin)
        return out

    if route in ("trajectory", "trajectory_unsafe"):
        pl = plan_mod.plan_trajectory(consts, n, 1, eps=eps, delta=delta, horizon=horizon)
        h, K = pl.step_size, pl.num_steps
        beta = pl.beta
        if route == "trajectory_unsafe":
            beta = path.lemma_3_1_beta_unsafe(eps, delta, sensitivity=sens, time=horizon)
            h = horizon / K  # same grid; beta M h stays < 2 (checked below)
        if beta * h >= 2:
            raise ValueError("unstable step for the audit")
        mu = path.path_mu(beta, sens, K * h)
        eps_exact = gdp_epsilon(mu, delta)
        params.update(beta=beta, step_size=h, num_steps=K, mu=mu)
        t_d, t_dp = chains(beta, h, K)
    elif route == "last_iterate":
        beta = last_iterate.last_iterate_beta_max(eps, delta, sensitivity=sens, strong_convexity=1.0)
        h = 0.5 / beta
        K = int(math.ceil(mixing_times / (h * beta)))
        rho = last_iterate.last_iterate_rho(beta, sens, h, K, 1.0, 1.0)
        claimed = linear_rdp_epsilon(rho, delta)[0]   # the accountant's eps for the run (<= eps)
        eps_exact = gdp_epsilon(ula_final_mu(beta, h, K, sens), delta)
        params.update(beta=beta, step_size=h, num_steps=K, rho=rho, target_eps=eps)
        t_d, t_dp = chains(beta, h, K)
    elif route == "stationary":
        beta = stationary.stationary_beta_max(eps, delta, sensitivity=sens, strong_convexity=1.0)
        h = 0.5 / beta
        K = int(math.ceil(mixing_times / (h * beta)))
        eps_exact = gdp_epsilon(ula_final_mu(beta, h, K, sens), delta)
        params.update(beta=beta, step_size=h, num_steps=K)
        t_d, t_dp = chains(beta, h, K)
    elif route == "pure":
        beta = pure.pure_beta(eps, n, lipschitz=consts.lipschitz, diameter=2.0)
        claimed_delta = 0.0
        sd = 1.0 / math.sqrt(beta)
        t_d = truncnorm_draws(k_d, num_samples, c_d, sd, -1.0, 1.0)
        t_dp = truncnorm_draws(k_dp, num_samples, c_dp, sd, -1.0, 1.0)
        from ..privacy.exact import max_log_ratio

        grid = np.linspace(-1.0, 1.0, 200_001)
        eps_exact = max_log_ratio(grid, -beta * (grid - c_d) ** 2 / 2, -beta * (grid - c_dp) ** 2 / 2)
        params.update(beta=beta)
    elif route.startswith("rashomon"):
        from ..rashomon import plan_rashomon

        rp = plan_rashomon(consts, n, 1, psi, mode="path", eps=eps, delta=delta, horizon=horizon)
        beta, h, K = rp.beta, rp.step_size, rp.num_steps
        if route == "rashomon_path_unsafe":  # the beta a G/n-only analysis would give, same grid
            beta = path.beta_max(eps, delta=delta, sensitivity=sens, time=K * h)
            if beta * h >= 2:
                raise ValueError("unstable step for the audit")
        params.update(beta=beta, step_size=h, num_steps=K, psi=psi, thresholded_sensitivity=rp.sensitivity,
                      threshold_width=rp.threshold_width)
        out = []
        for key, c in ((k_d, c_d), (k_dp, c_dp)):
            # gradient of beta f_w((z - c)^2/2 + k) with the sampler's smoothed threshold (ramp width
            # w): exact L* = k, flat on |z - c| <= sqrt(2 psi), slope clip(u / w, 0, 1) beyond
            g = lambda z, c=c, w=rp.threshold_width: beta * jnp.clip(  # noqa: E731
                ((z - c) ** 2 / 2 - psi) / w, 0.0, 1.0) * (z - c)
            fin, acc, hi, lo = ula_batch(key, num_samples, g, jnp.zeros(()), h, K, extremes=True)
            out.append({"final": fin, "mean": acc / K, "range": 0.5 * (hi + lo)}[stat])
        t_d, t_dp = out
    else:  # purified
        from ..domains import L2Ball
        from ..privacy import purification

        dom = L2Ball(dim=1, radius=1.0)
        pl = plan_mod.plan_trajectory(consts, n, 1, eps=eps, delta=delta, horizon=horizon)
        pp = purification.purification_parameters(dom, eps_prime, omega, delta=delta)
        claimed = eps + eps_prime
        claimed_delta = 0.0
        proj = lambda x: jnp.clip(x, -1.0, 1.0)  # noqa: E731  projection onto C = [-1, 1]
        fin_d, fin_dp = chains(pl.beta, pl.step_size, pl.num_steps, project=proj)
        kp1, kp2 = random.split(k_p)
        t_d = purification.purify(kp1, fin_d[:, None], pp, dom)[:, 0]
        t_dp = purification.purify(kp2, fin_dp[:, None], pp, dom)[:, 0]
        params.update(beta=pl.beta, step_size=pl.step_size, num_steps=pl.num_steps, eps_upstream=eps,
                      eps_prime=eps_prime, omega=omega, laplace_scale=pp.laplace_scale)
    lb, tau, s, fpr_u, fnr_u = audit_statistics(t_d, t_dp, delta=claimed_delta, confidence=confidence)
    return AuditResult("quadratic", route, stat, float(claimed), float(claimed_delta), lb, confidence,
                       num_samples, tau, s, fpr_u, fnr_u, eps_exact, params)
