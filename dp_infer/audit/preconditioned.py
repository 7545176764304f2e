"""Audit of the preconditioned trajectory route on a 2-D quadratic family.

Per-example loss ``l(theta; x) = ||theta - x||^2 / 2`` with rows in the box ``[-1, 1]^2``; the
gradient difference between rows is ``x' - x``, so in the metric of a fixed preconditioner P the
sensitivity of the mean loss is ``Delta_P = max_{x, x' in box} ||P^(1/2) (x - x')|| / n``
(attained at opposite vertices). D holds the canary at the maximising vertex ``v``, D' at ``-v``,
the other rows at 0. The chains are preconditioned ULA (:mod:`dp_infer.kernels.preconditioned`)
with beta from the path route at ``Delta_P``, run as the posterior mode runs them: the Langevin
kernel's step (:func:`dp_infer.kernels.langevin.build_kernel`) on the reparametrised potential
``V(phi) = U(C phi)`` (:func:`dp_infer.kernels.preconditioned.reparametrise`), ``theta = C phi``; the statistic is the path's Neyman-Pearson
statistic: with ``u = c_D - c_D'`` the two paths' log-likelihood ratio is affine in
``<u, theta_K - theta_0> + h beta <P u, sum_{k<K} theta_k>`` (each step's mean shift ``h beta P u``
is measured in the noise covariance ``2 h P``), so the audit is as strong as the claim is tight.
"""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import random

from ..kernels import langevin
from ..kernels.preconditioned import Preconditioner, reparametrise
from ..privacy import path as path_privacy
from ..privacy.conversions import gdp_epsilon
from ..randomness import secret_key
from .statistics import AuditResult, audit_statistics

__all__ = ["preconditioned_audit"]


def preconditioned_audit(P=((2.0, 0.9), (0.9, 0.6)), *, eps: float = 2.0, delta: float = 1e-5, n: int = 100,
                         horizon: float = 1.0, step_size: float = 0.01, num_samples: int = 100_000,
                         confidence: float = 0.95, seed: int | None = None, unsafe: bool = False) -> AuditResult:
    """Audit the path route's claim for preconditioned ULA with the given ``P`` (module docstring).

    ``unsafe=True`` calibrates beta with the Euclidean sensitivity ``max ||x - x'|| / n`` instead of
    the P-metric one (the bug a preconditioned accountant must not have): the audit's power check.
    """
    pre = Preconditioner.from_matrix(np.asarray(P, dtype=np.float64))
    Pm = pre.matrix
    verts = [np.array(v, dtype=np.float64) for v in itertools.product((-1.0, 1.0), repeat=2)]
    diffs = [(a, b) for a in verts for b in verts]
    v_best, w_best = max(diffs, key=lambda ab: float((ab[0] - ab[1]) @ Pm @ (ab[0] - ab[1])))
    sens = math.sqrt(float((v_best - w_best) @ Pm @ (v_best - w_best))) / n
    claimed_sens = 2.0 * math.sqrt(2.0) / n if unsafe else sens
    beta = path_privacy.beta_max(eps, delta=delta, sensitivity=claimed_sens, time=horizon)
    K = int(round(horizon / step_size))
    h = horizon / K
    mu = path_privacy.path_mu(beta, sens, K * h)
    c_d, c_dp = v_best / n, w_best / n  # mean of the rows (canary at v / at -v, others 0)
    u = c_d - c_dp
    Pu = Pm @ u

    def stats(key, c):
        c32 = jnp.asarray(c, jnp.float32)
        V, to_theta, _ = reparametrise(lambda th: 0.5 * beta * jnp.sum((th - c32) ** 2), pre)  # beta x mean loss
        step = langevin.build_kernel(jax.grad(V), h)

        def one(k):
            def body(carry, kk):
                st, acc = carry
                st2, _ = step(kk, st)
                return (st2, acc + to_theta(st.z)), None

            init = langevin.init(jnp.zeros(2, jnp.float32))
            (last, acc), _ = jax.lax.scan(body, (init, jnp.zeros(2, jnp.float32)), random.split(k, K))
            return to_theta(last.z), acc

        out = []
        keys = random.split(key, num_samples)
        run = jax.jit(jax.vmap(one))
        for i in range(0, num_samples, 50_000):
            last, acc = run(keys[i:i + 50_000])
            out.append(np.asarray(last, np.float64) @ u + h * beta * (np.asarray(acc, np.float64) @ Pu))
        return np.concatenate(out)

    key, source = secret_key(seed)
    k_d, k_dp = random.split(key)
    t_d, t_dp = stats(k_d, c_d), stats(k_dp, c_dp)
    lb, tau, s, fpr_u, fnr_u = audit_statistics(t_d, t_dp, delta=delta, confidence=confidence)
    params = {"n": n, "beta": beta, "step_size": h, "num_steps": K, "sensitivity_P": sens, "mu": mu,
              "P": Pm.tolist(), "key_source": source.describe()}
    return AuditResult("quadratic_2d", "trajectory_preconditioned" + ("_unsafe" if unsafe else ""), "llr_P", float(eps), float(delta), lb,
                       confidence, num_samples, tau, s, fpr_u, fnr_u, gdp_epsilon(mu, delta), params)
