"""Sampler quality: ESS per second of our (unadjusted) Langevin vs NumPyro NUTS.

Target: the non-private posterior exp(-n L(theta; D)) N(theta; 0, I) on Adult logistic
regression (beta = n, N(0, 1) prior), on a subsample of the training rows (stated in the
output) so that NUTS finishes in the time budget. NUTS: 500 warmup (step size and diagonal
mass adapted) + 500 draws, 1 chain. Langevin: step h = 0.5 / M_U (M_U = n/4 + 1), burn-in of a
quarter of the steps, thinned. ESS (ArviZ bulk ESS) min and median over coordinates, per second
of wall time. NUTS is timed on one run of warmup + sampling including its JIT compilation (a
few seconds; a second run would double the section's cost); ESS/s for NUTS uses that whole time
(warmup is part of its cost). Langevin: compilation excluded (second call), burn-in included. ULA is biased by O(h) (its mean/variance differ from the
posterior's); the table also reports the max |mean difference| / posterior sd against NUTS.
"""

from __future__ import annotations

import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
from jax import random
from numpyro.infer import MCMC, NUTS

from dp_infer.kernels import langevin

from ._common import logistic_potential, timed


def run(quick: bool, log=print):
    from dp_infer.datasets import load_adult

    a = load_adult()
    n_sub = 3000 if quick else 30162
    idx = np.random.default_rng(0).permutation(a.X_train.shape[0])[:n_sub]
    X = jnp.asarray(a.X_train[idx], jnp.float32)
    y = jnp.asarray(a.y_train[idx], jnp.float32)
    n, d = X.shape
    U, _ = logistic_potential(X, y, float(n), lam=1.0)
    pot = lambda z: U(z["theta"])  # noqa: E731
    n_w, n_s = (200, 200) if quick else (500, 500)
    nuts = MCMC(NUTS(potential_fn=pot), num_warmup=n_w, num_samples=n_s, progress_bar=False)
    t0 = time.perf_counter()
    nuts.run(random.PRNGKey(2), init_params={"theta": jnp.zeros(d)}, extra_fields=("num_steps",))
    jax.block_until_ready(nuts.get_samples()["theta"])
    t_nuts = time.perf_counter() - t0
    zs_nuts = np.asarray(nuts.get_samples()["theta"])
    steps_nuts = int(np.asarray(nuts.get_extra_fields()["num_steps"]).sum())
    ess_nuts = np.asarray(az.ess(zs_nuts[None]))

    M_U = n / 4 + 1.0
    h = 0.5 / M_U
    K = 10_000 if quick else 60_000
    thin = 20
    f = jax.jit(lambda k: langevin.sample_chain(k, U, jnp.zeros(d), h, K, thinning=thin).z)
    f = f.lower(random.PRNGKey(3)).compile()  # compile outside the timed region, run once
    t0 = time.perf_counter()
    zs = jax.block_until_ready(f(random.PRNGKey(3)))
    t_ula = time.perf_counter() - t0
    zs = np.asarray(zs)[(K // thin) // 4:]
    ess_ula = np.asarray(az.ess(zs[None]))
    sd = zs_nuts.std(0)
    bias = float(np.max(np.abs(zs.mean(0) - zs_nuts.mean(0)) / sd))
    out = {"n_subsample": n, "d": d,
           "nuts": {"seconds": t_nuts, "warmup": n_w, "draws": n_s, "grad_evals": steps_nuts,
                    "ess_min": float(ess_nuts.min()), "ess_median": float(np.median(ess_nuts)),
                    "ess_min_per_s": float(ess_nuts.min() / t_nuts), "ess_median_per_s": float(np.median(ess_nuts) / t_nuts)},
           "langevin": {"seconds": t_ula, "steps": K, "step_size": h, "thinning": thin,
                        "ess_min": float(ess_ula.min()), "ess_median": float(np.median(ess_ula)),
                        "ess_min_per_s": float(ess_ula.min() / t_ula), "ess_median_per_s": float(np.median(ess_ula) / t_ula),
                        "max_abs_mean_diff_over_sd_vs_nuts": bias}}
    log(f"  [quality] NUTS ESS/s min {out['nuts']['ess_min_per_s']:.2f} median {out['nuts']['ess_median_per_s']:.2f}; "
        f"ULA min {out['langevin']['ess_min_per_s']:.2f} median {out['langevin']['ess_median_per_s']:.2f}; bias {bias:.2f} sd")
    return out
