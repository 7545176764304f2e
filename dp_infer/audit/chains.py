"""Vectorised ULA chains for the audits (running statistics only, no trajectories in memory),
the exact GDP of ULA's final iterate on a quadratic, and exact truncated-Gaussian draws."""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax, random
from scipy import stats

from ..kernels import langevin as ula

# --------------------------------------------------------------------------- chains


def ula_batch(key, num_chains: int, grad_fn: Callable, x0, h: float, num_steps: int, *,
               project=None, chunk: int = 100_000, extremes: bool = False):
    """Vectorised ULA chains (functional core) returning (final x, sum_{k<K} x_k) per chain,
    plus (max_k x_k, min_k x_k) over the released path x_1..x_K with ``extremes``.

    The scan carries running statistics so no trajectory is kept in memory; chains are
    processed in chunks of ``chunk``.
    """
    x0 = jnp.asarray(x0, jnp.float32)
    transition = ula.keyed_transition(ula.build_kernel(grad_fn, h, project))

    @jax.jit
    def run(keys):
        def one(k):
            st = ula.init(x0, k)
            big = jnp.full_like(x0, jnp.inf)

            def body(carry, _):
                s, acc, hi, lo = carry
                nxt, _ = transition(s)
                return (nxt, acc + s.z, jnp.maximum(hi, nxt.z), jnp.minimum(lo, nxt.z)), None

            (last, acc, hi, lo), _ = lax.scan(body, (st, jnp.zeros_like(x0), -big, big), None,
                                              length=num_steps)
            return last.z, acc, hi, lo

        return jax.vmap(one)(keys)

    keys = random.split(key, num_chains)
    outs = [[], [], [], []]
    for i in range(0, num_chains, chunk):
        for store, arr in zip(outs, run(keys[i:i + chunk])):
            store.append(np.asarray(arr, dtype=np.float64))
    res = tuple(np.concatenate(o) for o in outs)
    return res if extremes else res[:2]


def ula_final_mu(beta: float, h: float, K: int, shift: float) -> float:
    """GDP mu of ULA's final iterate on beta (x - c)^2/2, c differing by ``shift``, from x_0 = 0.

    The final iterate is Gaussian with mean (1 - c^K) c_D (c = 1 - h beta) and variance
    2h (1 - c^{2K}) / (1 - c^2) for both datasets, so the pair is exactly mu-GDP.
    """
    cc = 1.0 - h * beta
    return (1 - cc ** K) * shift / math.sqrt(2 * h * (1 - cc ** (2 * K)) / (1 - cc * cc))


def truncnorm_draws(key, n: int, mean: float, sd: float, lo: float, hi: float) -> np.ndarray:
    """Exact draws from N(mean, sd^2) truncated to [lo, hi] (float64 inverse CDF)."""
    u = np.asarray(random.uniform(key, (n,), dtype=jnp.float32), dtype=np.float64)
    a, b = (lo - mean) / sd, (hi - mean) / sd
    return stats.truncnorm.ppf(np.clip(u, 1e-12, 1 - 1e-12), a, b, loc=mean, scale=sd)
