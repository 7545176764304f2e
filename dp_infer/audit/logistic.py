"""Logistic regression with a label-flip canary: checks that nothing leaks beyond the claim on a
non-quadratic model (not a worst case)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import random

from ..randomness import secret_key
from .chains import ula_batch
from .statistics import AuditResult, audit_statistics


def logistic_audit(*, eps: float = 2.0, delta: float = 1e-5, n: int = 50, dim: int = 3, horizon: float = 1.0,
                   num_samples: int = 20_000, confidence: float = 0.95, seed: int | None = None,
                   unsafe: bool = False) -> AuditResult:
    """Trajectory route on logistic regression with a label-flipped canary row (see module doc)."""
    from ..routes import plan as plan_mod
    from ..losses import logistic
    from ..privacy import path

    loss = logistic(row_norm=1.0)
    kx, ky, k_d, k_dp = random.split(secret_key(seed)[0], 4)
    X = np.asarray(random.normal(kx, (n, dim)), dtype=np.float64)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = np.asarray(random.bernoulli(ky, 0.5, (n,)), dtype=np.float64)
    xc = np.zeros(dim)
    xc[0] = 1.0
    X[0] = xc
    pl = plan_mod.plan_trajectory(loss.constants, n, dim, eps=eps, delta=delta, horizon=horizon)
    beta = pl.beta
    if unsafe:
        beta = path.lemma_3_1_beta_unsafe(eps, delta, sensitivity=loss.constants.grad_diff / n, time=horizon)
    Xj = jnp.asarray(X, jnp.float32)
    out = []
    for key, yc in ((k_d, 1.0), (k_dp, 0.0)):
        yy = jnp.asarray(np.concatenate([[yc], y[1:]]), jnp.float32)

        def grad_fn(th, yy=yy):
            z = Xj @ th
            return beta * (Xj.T @ (jax.nn.sigmoid(z) - yy)) / n

        fin, _ = ula_batch(key, num_samples, grad_fn, jnp.zeros(dim), pl.step_size, pl.num_steps, chunk=20_000)
        out.append(fin @ xc)
    lb, tau, s, fpr_u, fnr_u = audit_statistics(out[0], out[1], delta=delta, confidence=confidence)
    return AuditResult("logistic", "trajectory_unsafe" if unsafe else "trajectory", "final_projection",
                       float(eps), float(delta), lb, confidence, num_samples, tau, s, fpr_u, fnr_u, None,
                       {"n": n, "dim": dim, "beta": beta, "step_size": pl.step_size, "num_steps": pl.num_steps})
