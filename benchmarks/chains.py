"""Vectorised chains: per-step time of K = 1, 4, 16, 64 chains (chain_method="vectorized") relative to one.

Per-step time is the slope between a short and a long run (NumPyro re-compiles its collection
loop on each MCMC.run, a fixed cost that is reported separately as ``fixed_s``).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import random
from numpyro.infer import MCMC

from dp_infer.kernels import Langevin

from ._common import logistic_potential, marginal_step_times


def run(quick: bool, log=print):
    from dp_infer.datasets import load_adult

    a = load_adult()
    X = jnp.asarray(a.X_train, jnp.float32)
    y = jnp.asarray(a.y_train, jnp.float32)
    n, d = X.shape
    U, _ = logistic_potential(X, y, float(n))
    h = 0.5 / (n / 4 + 1)
    steps = 100 if quick else 500
    rows = []
    for k in (1, 4, 16, 64):
        def mk(nsteps, k=k):
            mcmc = MCMC(Langevin(potential_fn=lambda z: U(z["theta"]), step_size=h), num_warmup=0,
                        num_samples=nsteps, num_chains=k, chain_method="vectorized", progress_bar=False)
            keys = iter(random.split(random.PRNGKey(k), 1000))
            init = {"theta": jnp.zeros((k, d)) if k > 1 else jnp.zeros(d)}

            def go():
                mcmc.run(next(keys), init_params=init)
                return mcmc.get_samples()["theta"]

            return go

        r = marginal_step_times({"m": mk}, steps // 5, steps, rounds=2)["m"]
        rows.append({"chains": k, "steps": steps, "seconds": r["total_s"], "per_step_s": r["per_step_s"],
                     "fixed_s": r["fixed_s"]})
        log(f"  [chains] K={k}: {r['per_step_s'] * 1e3:.2f} ms/step (marginal), total {r['total_s']:.2f} s")
    for r in rows:
        r["time_vs_one"] = r["per_step_s"] / rows[0]["per_step_s"]
        r["per_chain_cost_vs_one"] = r["time_vs_one"] / r["chains"]
    return {"rows": rows}
