r"""AdaSSP linear regression (Wang 2018, Alg. 2) and its purified, pure-DP version (seed 003 Alg. 13).

Data: rows with ``||x||_2 <= row_norm`` and labels ``|y| <= label_bound`` (declared, enforced: a row
or label outside raises ValueError). AdaSSP releases three noisy statistics and solves a ridge
system with them:

1. ``lambda_min(X^T X) + N(0, s1^2)``, l2 sensitivity ``B_x^2`` (Weyl: the difference of two rank-one
   PSD matrices has spectral norm <= max(||x||^2, ||x'||^2));
2. the upper triangle (with diagonal) of ``X^T X`` + N(0, s2^2) per entry, mirrored; sensitivity
   ``sqrt(2) B_x^2`` under replace-one (``||x x^T - x' x'^T||_F^2 <= ||x||^4 + ||x'||^4``);
3. ``X^T y + N(0, s3^2 I)``, sensitivity ``2 B_x B_y``.

Each is a Gaussian mechanism, (Delta_i / s_i)-GDP; the three get equal shares ``mu / sqrt(3)`` of
the GDP budget ``mu = gdp_mu(eps, delta)`` (exact Gaussian profile, tighter than Wang's eps/3 split
with the classical calibration). The ridge is Wang's:
``lambda = max(0, s2 sqrt(d log(2 d^2 / rho)) - lambda_lo)`` with the high-probability lower bound
``lambda_lo = max(0, lambda_min_noisy - s1 Phi^{-1}(1 - rho/3))``; theta = (XtX_noisy + lambda I)^{-1} Xty_noisy
(post-processing of the three releases).

Pure AdaSSP (Alg. 13): project theta onto an l2 ball of declared radius (the seed's R~ has hidden
constants; the radius only affects utility) and purify (Algorithm 1). The pure budget eps is split
by :func:`~dp_infer.mechanisms.purifier.plan_purification` (eps' = 0.1 eps by default, upstream at
(0.9 eps, delta_a) with delta_a making the Laplace scale 1e-3 of the diameter); the event is
``PureDpEvent(eps)`` = upstream eps + eps' (Theorem 7 / 12 with Theorem 1).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from .._validation import check_finite_array, check_positive, check_target_epsilon
from ..domains import L2Ball
from ..privacy import purification as _pur
from ..privacy.conversions import gdp_mu, resolve_log_delta
from ..privacy.events import GdpEvent
from ..randomness import gaussian_noise, secret_key
from ._release import Release
from .purifier import plan_purification

__all__ = ["adassp", "pure_adassp", "adassp_sensitivities"]


def adassp_sensitivities(row_norm: float, label_bound: float) -> dict:
    """Replace-one l2 sensitivities of the three released statistics."""
    bx = check_positive("row_norm", row_norm)
    by = check_positive("label_bound", label_bound)
    return {"lambda_min": bx * bx, "xtx_upper": math.sqrt(2.0) * bx * bx, "xty": 2.0 * bx * by}


def _check_data(X, y, row_norm, label_bound):
    X = check_finite_array("X", X, ndim=2)
    y = check_finite_array("y", y, ndim=1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have one label per row of X ({X.shape[0]}), got {y.shape[0]}")
    over = int(np.sum(np.linalg.norm(X, axis=1) > row_norm * (1 + 1e-12)))
    if over:
        raise ValueError(f"X: a row exceeds the declared row_norm={row_norm:g} (l2 norm <= row_norm; clip the rows first)")
    over = int(np.sum(np.abs(y) > label_bound * (1 + 1e-12)))
    if over:
        raise ValueError(f"y: a label exceeds the declared label_bound={label_bound:g} (|y| <= label_bound; clip first)")
    return X, y


def _adassp_core(key, X, y, sig: dict, rho: float) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    d = X.shape[1]
    with jax.enable_x64(True):
        k1, k2, k3 = jax.random.split(key, 3)
        z1 = float(gaussian_noise(k1, (), jnp.float64))
        Z = np.asarray(gaussian_noise(k2, (d, d), jnp.float64))
        z3 = np.asarray(gaussian_noise(k3, (d,), jnp.float64))
    xtx = X.T @ X
    lam_min_noisy = float(np.linalg.eigvalsh(xtx)[0]) + sig["lambda_min"] * z1
    E = np.triu(Z)
    E = E + np.triu(E, 1).T
    xtx_noisy = xtx + sig["xtx_upper"] * E
    xty_noisy = X.T @ y + sig["xty"] * z3
    lam_lo = max(0.0, lam_min_noisy - sig["lambda_min"] * float(special.ndtri(1.0 - rho / 3.0)))
    lam = max(0.0, sig["xtx_upper"] * math.sqrt(d * math.log(2.0 * d * d / rho)) - lam_lo)
    A = xtx_noisy + lam * np.eye(d)
    try:
        theta = np.linalg.solve(A, xty_noisy)
    except np.linalg.LinAlgError:
        theta = np.linalg.lstsq(A, xty_noisy, rcond=None)[0]
    return theta


def _adassp_run(key, X, y, eps, ld, row_norm, label_bound, rho):
    sens = adassp_sensitivities(row_norm, label_bound)
    mu = gdp_mu(eps, log_delta=ld)
    mu_i = mu / math.sqrt(3.0)
    sig = {k: v / mu_i for k, v in sens.items()}
    theta = _adassp_core(key, X, y, sig, rho)
    events = tuple((GdpEvent(mu=mu_i, label=f"adassp_{name}",
                             assumptions=(f"rows ||x||_2 <= {row_norm:g}, labels |y| <= {label_bound:g} (checked)",
                                          f"replace-one l2 sensitivity of {name} <= {sens[name]:.6g}"),
                             metadata={"sensitivity": sens[name], "sigma": sig[name]}), 1)
                   for name in ("lambda_min", "xtx_upper", "xty"))
    params = {"mechanism": "adassp", "mu": mu, "sigmas": sig, "rho": rho, "target_eps": eps, "log_delta": ld}
    return theta, events, params


def _check_rho(rho) -> float:
    rho = float(rho)
    if not (0.0 < rho < 1.0):
        raise ValueError(f"rho must lie in (0, 1), got {rho!r}")
    return rho


def adassp(X: Any, y: Any, *, eps: float, row_norm: float, label_bound: float, delta: float | None = None,
           log_delta: float | None = None, rho: float = 0.05, seed: int | None = None) -> Release:
    """(eps, delta)-DP AdaSSP estimate of the least-squares coefficients (GDP accounting).

    ``rho`` is the failure probability of the ridge's high-probability bounds (utility only).
    """
    eps = check_target_epsilon(eps)
    ld = resolve_log_delta(delta, log_delta)
    rho = _check_rho(rho)
    adassp_sensitivities(row_norm, label_bound)
    X, y = _check_data(X, y, row_norm, label_bound)
    key, source = secret_key(seed)
    theta, events, params = _adassp_run(key, X, y, eps, ld, row_norm, label_bound, rho)
    return Release(value=theta, events=events, params=params, randomness=source.describe())


def pure_adassp(X: Any, y: Any, *, eps: float, radius: float, row_norm: float, label_bound: float,
                eps_prime_fraction: float = 0.1, omega: float = 0.01, laplace_scale: float | None = None,
                log_delta: float | None = None, rho: float = 0.05, seed: int | None = None) -> Release:
    """Pure eps-DP linear regression: AdaSSP at (eps - eps', delta_a), projected onto the l2 ball of
    ``radius``, purified with eps' (seed 003 Alg. 13). ``log_delta`` overrides delta_a (seed recipe)."""
    eps = check_target_epsilon(eps)
    radius = check_positive("radius", radius)
    rho = _check_rho(rho)
    adassp_sensitivities(row_norm, label_bound)
    X, y = _check_data(X, y, row_norm, label_bound)
    domain = L2Ball(X.shape[1], radius)
    plan = plan_purification(domain, eps, eps_prime_fraction=eps_prime_fraction, omega=omega,
                             laplace_scale=laplace_scale, log_delta=log_delta)
    key, source = secret_key(seed)
    import jax

    k_up, k_pur = jax.random.split(key)
    theta_a, _, up_params = _adassp_run(k_up, X, y, plan.eps_upstream, plan.log_delta, row_norm,
                                        label_bound, rho)
    with jax.enable_x64(True):
        import jax.numpy as jnp

        theta = np.asarray(domain.project(jnp.asarray(theta_a, dtype=jnp.float64)), dtype=np.float64)
    value = _pur.purify(k_pur, theta, plan.params, domain)
    event = _pur.purified_event(plan.eps_upstream, plan.params, label="pure_adassp")
    return Release(value=value, events=((event, 1),),
                   params={"mechanism": "pure_adassp", "radius": radius, "upstream": up_params,
                           "purification": plan.params.to_dict(), "target_eps": eps},
                   randomness=source.describe())

