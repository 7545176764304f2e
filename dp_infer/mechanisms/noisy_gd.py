r"""Projected noisy (DP) gradient descent on a bounded domain, and its purified pure-DP version.

DP-GD: ``theta_{t+1} = Proj_C(theta_t - eta (grad L(theta_t; D) + N(0, sigma^2 I)))`` for T steps from
the domain's data-independent initial point, releasing the average of the iterates theta_1..theta_T
(it lies in C, which is convex). The mean loss's gradient has replace-one sensitivity G / n (the
loss's declared ``grad_diff``), so each step is (G / (n sigma))-GDP and the run is
``mu = sqrt(T) G / (n sigma)``-GDP (adaptive composition); sigma comes from ``mu = gdp_mu(eps, delta)``, with
``G / n`` times ``1 + float32_gradient_margin(n)`` for the float32 steps (:mod:`dp_infer.privacy.float32_margin`;
DP-SGD's noise multiplier below is in units of ``C`` and its event's of ``C`` with the same margin).
Step size (data independent): ``eta = Diam(C) / sqrt(T (L^2 + d sigma^2))``, the standard choice for
projected stochastic subgradient steps with second moment L^2 + d sigma^2.

DP-SGD (seed 003 Algorithm 3 with Poisson instead of fixed-size sampling): each record joins a
step's batch with probability q, per-example gradients are clipped to norm C (so the sensitivity
holds for the function run, whatever the loss declares), and
``theta <- Proj(theta - eta ((1/(q n)) sum_batch clip_C(grad) + N(0, sigma_g^2 I)))``. This is the
Poisson-subsampled Gaussian mechanism of :mod:`dp_infer.privacy.minibatch` with noise multiplier
``z = q n sigma_g / C``; its replace-one event (the Renyi curve of the antipodal pair, which dominates
vector-valued clipped gradients, min with the unamplified 2C curve) is reused as is, and z is calibrated by
bisection on the accountant (in log delta, so the tiny deltas of purification work).

Pure DP-GD / DP-SGD (seed 003 Algorithm 4): run the upstream at (eps - eps', delta_a) and purify the
average (Algorithm 1). The library's own pure route (``dp_infer.fit(..., delta=None)``) does the same
with a Langevin trajectory.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import check_positive, check_positive_int, check_target_epsilon
from ..domains import Domain
from ..losses import PerExampleLoss
from ..privacy import purification as _pur
from ..privacy.conversions import gdp_mu, resolve_log_delta
from ..privacy.events import GdpEvent
from ..privacy.float32_margin import float32_margin_assumption, with_float32_margin
from ..randomness import gaussian_noise, secret_key
from ._release import Release
from .assumptions import require_constants_cover
from .purifier import plan_purification

__all__ = ["dp_gd", "pure_dp_gd", "dp_sgd_noise_multiplier", "dp_sgd", "pure_dp_sgd"]


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
    require_constants_cover(loss, domain, "noisy gradient descent")
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
    sens = with_float32_margin(c.grad_diff / n, n)  # the steps run in float32 (dp_infer.privacy.float32_margin)
    sigma = math.sqrt(T) * sens / mu
    eta = domain.diameter / math.sqrt(T * (c.lipschitz ** 2 + d * sigma ** 2))
    Xj, yj = jnp.asarray(X, dtype=jnp.float32), jnp.asarray(y, dtype=jnp.float32)
    grad = jax.grad(lambda th: loss.mean(th, Xj, yj))

    def step(theta, k):
        g = grad(theta) + sigma * gaussian_noise(k, (d,))
        nxt = domain.project(theta - eta * g)
        return nxt, nxt

    theta0 = jnp.asarray(domain.default_init(), dtype=jnp.float32)
    _, path = lax.scan(step, theta0, jax.random.split(key, T))
    avg = np.asarray(path, dtype=np.float64).mean(axis=0)
    event = GdpEvent(mu=mu, label="dp_gd",
                     assumptions=(f"the mean loss's gradient has replace-one sensitivity <= G/n = "
                                  f"{c.grad_diff / n:.6g} (declared grad_diff; data bounds checked)",
                                  float32_margin_assumption(n, "G / n"),
                                  "step size, horizon and initial point fixed independently of the data"),
                     metadata={"steps": T, "sigma": sigma, "step_size": eta, "sensitivity": sens})
    return avg, event, {"mechanism": "dp_gd", "steps": T, "sigma": sigma, "step_size": eta, "mu": mu,
                        "target_eps": eps, "log_delta": ld}


def dp_gd(loss: PerExampleLoss, X: Any, y: Any, *, eps: float, domain: Domain, steps: int = 200,
          delta: float | None = None, log_delta: float | None = None, seed: int | None = None) -> Release:
    """(eps, delta)-DP projected gradient descent; value = average iterate (in the domain)."""
    eps = check_target_epsilon(eps)
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
    eps = check_target_epsilon(eps)
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


# ---------------------------------------------------------------------------------------------
# DP-SGD (Poisson subsampling, per-example clipping)
# ---------------------------------------------------------------------------------------------


def _sgd_event(z: float, steps: int, q: float, clip_norm: float, n: int):
    from ..privacy.minibatch import minibatch_event

    # minibatch_event is parametrised as SGLD (beta, h); any h with beta = q n sqrt(2/h) / (z C)
    # describes the same Poisson-subsampled Gaussian mechanism with noise multiplier z (in units of C; the
    # event charges C with the float32 margin, so its own multiplier is z / (1 + float32_gradient_margin(n)))
    beta = q * n * math.sqrt(2.0) / (z * clip_norm)
    return minibatch_event(beta, 1.0, steps, q, clip_norm, n, label="dp_sgd")


def dp_sgd_noise_multiplier(eps: float, *, steps: int, q: float, clip_norm: float, n: int,
                            delta: float | None = None, log_delta: float | None = None, rtol: float = 1e-2) -> float:
    """Smallest noise multiplier z (to ``rtol``, rounded up) whose replace-one event meets (eps, delta)."""
    from ..privacy.accountant import Accountant

    eps = check_target_epsilon(eps)
    ld = resolve_log_delta(delta, log_delta)
    T = check_positive_int("steps", steps)
    n = check_positive_int("n", n)

    def ok(z: float) -> bool:
        return Accountant([_sgd_event(z, T, q, clip_norm, n)]).get_epsilon(log_delta=ld) <= eps

    lo = hi = 1.0
    while not ok(hi):
        hi *= 2.0
    while ok(lo):
        lo /= 2.0
        if lo < 1e-6:
            return hi
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def _dp_sgd_run(key, loss, X, y, domain, T, q, clip_norm, eps, ld):
    import jax
    import jax.numpy as jnp
    from jax import lax

    n, d = X.shape[0], domain.dim
    z = dp_sgd_noise_multiplier(eps, steps=T, q=q, clip_norm=clip_norm, n=n, log_delta=ld)
    sigma_g = z * clip_norm / (q * n)
    eta = domain.diameter / math.sqrt(T * (clip_norm ** 2 / q + d * sigma_g ** 2))
    Xj, yj = jnp.asarray(X, dtype=jnp.float32), jnp.asarray(y, dtype=jnp.float32)
    per_example = jax.vmap(jax.grad(loss.example), in_axes=(None, 0, 0))

    def step(theta, k):
        kb, kn = jax.random.split(k)
        g = per_example(theta, Xj, yj)
        g = g * jnp.minimum(1.0, clip_norm / jnp.maximum(jnp.linalg.norm(g, axis=1, keepdims=True), 1e-30))
        mask = jax.random.bernoulli(kb, q, (n,)).astype(g.dtype)
        est = (mask @ g) / (q * n) + sigma_g * gaussian_noise(kn, (d,))
        nxt = domain.project(theta - eta * est)
        return nxt, nxt

    theta0 = jnp.asarray(domain.default_init(), dtype=jnp.float32)
    _, path = lax.scan(step, theta0, jax.random.split(key, T))
    event = _sgd_event(z, T, q, clip_norm, n)
    return np.asarray(path, dtype=np.float64).mean(axis=0), event, {
        "mechanism": "dp_sgd", "steps": T, "q": q, "clip_norm": clip_norm, "noise_multiplier": z,
        "sigma": sigma_g, "step_size": eta, "target_eps": eps, "log_delta": ld}


def _check_sgd(q, clip_norm):
    try:
        qv = float(q)
    except (TypeError, ValueError):
        raise ValueError(f"q (sampling probability) must lie in (0, 1], got {q!r}") from None
    if not (0.0 < qv <= 1.0):
        raise ValueError(f"q (sampling probability) must lie in (0, 1], got {q!r}")
    return qv, check_positive("clip_norm", clip_norm)


def dp_sgd(loss: PerExampleLoss, X: Any, y: Any, *, eps: float, domain: Domain, steps: int = 200,
           q: float = 0.01, clip_norm: float = 1.0, delta: float | None = None, log_delta: float | None = None,
           seed: int | None = None) -> Release:
    """(eps, delta)-DP projected DP-SGD with Poisson rate q and per-example clipping at clip_norm."""
    eps = check_target_epsilon(eps)
    ld = resolve_log_delta(delta, log_delta)
    q, clip_norm = _check_sgd(q, clip_norm)
    X, y, T, _ = _check(loss, X, y, domain, steps)
    key, source = secret_key(seed)
    avg, event, params = _dp_sgd_run(key, loss, X, y, domain, T, q, clip_norm, eps, ld)
    return Release(value=avg, events=((event, 1),), params=params, randomness=source.describe())


def pure_dp_sgd(loss: PerExampleLoss, X: Any, y: Any, *, eps: float, domain: Domain, steps: int = 200,
                q: float = 0.01, clip_norm: float = 1.0, eps_prime_fraction: float = 0.1, omega: float = 0.01,
                laplace_scale: float | None = None, log_delta: float | None = None,
                seed: int | None = None) -> Release:
    """Pure eps-DP: DP-SGD at (eps - eps', delta_a), its average purified with eps' (seed 003 Alg. 4)."""
    eps = check_target_epsilon(eps)
    q, clip_norm = _check_sgd(q, clip_norm)
    X, y, T, _ = _check(loss, X, y, domain, steps)
    plan = plan_purification(domain, eps, eps_prime_fraction=eps_prime_fraction, omega=omega,
                             laplace_scale=laplace_scale, log_delta=log_delta)
    key, source = secret_key(seed)
    import jax
    import jax.numpy as jnp

    k_sgd, k_pur = jax.random.split(key)
    avg, _, up = _dp_sgd_run(k_sgd, loss, X, y, domain, T, q, clip_norm, plan.eps_upstream, plan.log_delta)
    with jax.enable_x64(True):
        point = np.asarray(domain.project(jnp.asarray(avg, dtype=jnp.float64)), dtype=np.float64)
    value = _pur.purify(k_pur, point, plan.params, domain)
    event = _pur.purified_event(plan.eps_upstream, plan.params, label="pure_dp_sgd")
    return Release(value=value, events=((event, 1),),
                   params={"mechanism": "pure_dp_sgd", "upstream": up, "purification": plan.params.to_dict(),
                           "target_eps": eps},
                   randomness=source.describe())
