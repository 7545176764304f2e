r"""Projected noisy (DP) gradient descent on a bounded domain, and its purified pure-DP version.

DP-GD: ``theta_{t+1} = Proj_C(theta_t - eta (grad L(theta_t; D) + N(0, sigma^2 I)))`` for T steps from
the domain's data-independent initial point, releasing the average of the iterates theta_1..theta_T
(it lies in C, which is convex). The mean loss's gradient has replace-one sensitivity G / n (the
loss's declared ``grad_diff``), so each step is (G / (n sigma))-GDP and the run is
``mu = sqrt(T) G / (n sigma)``-GDP (adaptive composition); sigma comes from ``mu = gdp_mu(eps, delta)``.
Step size (data independent): ``eta = Diam(C) / sqrt(T (L^2 + d sigma^2))``, the standard choice for
projected stochastic subgradient steps with second moment L^2 + d sigma^2.

Pure DP-GD (seed 003 Algorithm 4, with full batches instead of subsampling): run DP-GD at
(eps - eps', delta_a) and purify the average (Algorithm 1). Events: ``GdpEvent(mu)`` resp.
``PureDpEvent(eps)``. The library's own pure route (``dp_infer.fit(..., delta=None)``) does the same
with a Langevin trajectory instead of DP-GD.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import check_epsilon, check_positive_int
from ..domains import Domain
from ..losses import PerExampleLoss
from ..privacy import purification as _pur
from ..privacy.events import GdpEvent, gdp_mu, resolve_log_delta
from ..randomness import secret_key
from ._release import Release
from .purifier import plan_purification

__all__ = ["dp_gd", "pure_dp_gd"]


def _check(loss, X, y, domain, steps):
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer PerExampleLoss, got {type(loss).__name__}")
    if not isinstance(domain, Domain) or not domain.bounded:
        raise ValueError("domain must be a bounded dp_infer Domain (L2Ball or Box)")
    T = check_positive_int("steps", steps)
    X, y = loss.check_data(X, y)
    d = loss.num_params(X.shape[1])
    if domain.dim != d:
        raise ValueError(f"domain.dim must equal the number of parameters {d}, got {domain.dim}")
    c = loss.constants
    if not (math.isfinite(c.grad_diff) and math.isfinite(c.lipschitz)):
        raise ValueError("loss must declare a finite lipschitz and grad_diff on the domain (bounded gradients)")
    return X, y, T, d


def _dp_gd_run(key, loss, X, y, domain, T, eps, ld):
    import jax
    import jax.numpy as jnp
    from jax import lax

    n = X.shape[0]
    d = domain.dim
    c = loss.constants
    mu = gdp_mu(eps, log_delta=ld)
    sens = c.grad_diff / n
    sigma = math.sqrt(T) * sens / mu
    eta = domain.diameter / math.sqrt(T * (c.lipschitz ** 2 + d * sigma ** 2))
    Xj, yj = jnp.asarray(X, dtype=jnp.float32), jnp.asarray(y, dtype=jnp.float32)
    grad = jax.grad(lambda th: loss.mean(th, Xj, yj))

    def step(theta, k):
        g = grad(theta) + sigma * jax.random.normal(k, (d,))
        nxt = domain.project(theta - eta * g)
        return nxt, nxt

    theta0 = jnp.asarray(domain.default_init(), dtype=jnp.float32)
    _, path = lax.scan(step, theta0, jax.random.split(key, T))
    avg = np.asarray(path, dtype=np.float64).mean(axis=0)
    event = GdpEvent(mu=mu, label="dp_gd",
                     assumptions=(f"the mean loss's gradient has replace-one sensitivity <= G/n = {sens:.6g} "
                                  "(declared grad_diff; data bounds checked)",
                                  "step size, horizon and initial point fixed independently of the data"),
                     metadata={"steps": T, "sigma": sigma, "step_size": eta, "sensitivity": sens})
    return avg, event, {"mechanism": "dp_gd", "steps": T, "sigma": sigma, "step_size": eta, "mu": mu,
                        "target_eps": eps, "log_delta": ld}


def dp_gd(loss: PerExampleLoss, X: Any, y: Any, *, eps: float, domain: Domain, steps: int = 200,
          delta: float | None = None, log_delta: float | None = None, seed: int | None = None) -> Release:
    """(eps, delta)-DP projected gradient descent; value = average iterate (in the domain)."""
    eps = check_epsilon(eps)
    ld = resolve_log_delta(delta, log_delta)
    X, y, T, _ = _check(loss, X, y, domain, steps)
    key, source = secret_key(seed)
    avg, event, params = _dp_gd_run(key, loss, X, y, domain, T, eps, ld)
    return Release(value=avg, events=((event, 1),), params=params, randomness=source.describe())


def pure_dp_gd(loss: PerExampleLoss, X: Any, y: Any, *, eps: float, domain: Domain, steps: int = 200,
               eps_prime_fraction: float = 0.1, omega: float = 0.01, laplace_scale: float | None = None,
               log_delta: float | None = None, seed: int | None = None) -> Release:
    """Pure eps-DP: DP-GD at (eps - eps', delta_a), its average purified with eps' (seed 003 Alg. 4).

    ``log_delta`` overrides delta_a (e.g. the seed's Corollary 4 recipe
    :func:`~dp_infer.privacy.purification.corollary4_log_delta`).
    """
    eps = check_epsilon(eps)
    X, y, T, _ = _check(loss, X, y, domain, steps)
    plan = plan_purification(domain, eps, eps_prime_fraction=eps_prime_fraction, omega=omega,
                             laplace_scale=laplace_scale, log_delta=log_delta)
    key, source = secret_key(seed)
    import jax
    import jax.numpy as jnp

    k_gd, k_pur = jax.random.split(key)
    avg, _, up = _dp_gd_run(k_gd, loss, X, y, domain, T, plan.eps_upstream, plan.log_delta)
    with jax.enable_x64(True):
        point = np.asarray(domain.project(jnp.asarray(avg, dtype=jnp.float64)), dtype=np.float64)
    value = _pur.purify(k_pur, point, plan.params, domain)
    event = _pur.purified_event(plan.eps_upstream, plan.params, label="pure_dp_gd")
    return Release(value=value, events=((event, 1),),
                   params={"mechanism": "pure_dp_gd", "upstream": up, "purification": plan.params.to_dict(),
                           "target_eps": eps},
                   randomness=source.describe())
