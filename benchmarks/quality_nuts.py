"""NUTS references for the posterior-quality benchmark (non-private, labelled so).

* :func:`tempered_vs_nuts`: the posterior mode's released draws (Adult, eps = 1) are draws of
  ``N(0, 1/lam) x exp(-beta L)``; NumPyro NUTS samples the same target (same beta, same prior,
  same rows; 4 chains, warmup adapts a diagonal mass matrix -- fine here: non-private). Per
  coordinate: ``|mean_ours - mean_nuts| / sd_nuts`` and ``sd_ours / sd_nuts``, with the
  Monte-Carlo standard error of the mean difference in sd units, ``sqrt(1/ESS_ours + 1/ESS_nuts)``
  per coordinate, so a reader can tell ULA's O(h) bias from sampling noise.
* :func:`nonprivate_ess_per_second`: the untempered posterior (beta = n, N(0, 1) prior) on Adult.
  Our best kernel for a non-private target is preconditioned ULA with ``P`` the inverse Hessian
  of U at its exact MAP (a non-private preconditioner: allowed, nothing is released), step
  ``h`` in the whitened coordinates, 4 chains from the MAP; NUTS with 4 chains (500 warmup + 500
  draws each) in the same run. ESS/s: bulk ESS min (and median) over coordinates per second of
  wall time; NUTS is timed including warmup and compilation (its adaptation is part of its
  cost), ours with compilation excluded and burn-in included (stated in the table).
"""

from __future__ import annotations

import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC, NUTS

from dp_infer.kernels import langevin
from dp_infer.kernels.preconditioned import Preconditioner, reparametrise

from .quality_coverage import map_laplace


def _potential(X, y, beta: float, lam: float):
    Xj, yj = jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32)
    n = Xj.shape[0]

    def U(theta):
        z = Xj @ theta
        return beta * jnp.sum(jax.nn.softplus(z) - yj * z) / n + 0.5 * lam * jnp.dot(theta, theta)

    return U


def _nuts(U, d: int, *, warmup: int, draws: int, chains: int, key):
    mcmc = MCMC(NUTS(potential_fn=lambda z: U(z["theta"])), num_warmup=warmup, num_samples=draws,
                num_chains=chains, chain_method="vectorized", progress_bar=False)
    t0 = time.perf_counter()
    mcmc.run(key, init_params={"theta": jnp.zeros((chains, d))}, extra_fields=("num_steps",))
    th = np.asarray(jax.block_until_ready(mcmc.get_samples(group_by_chain=True)["theta"]), dtype=np.float64)
    secs = time.perf_counter() - t0
    grads = int(np.asarray(mcmc.get_extra_fields()["num_steps"]).sum())
    return th, secs, grads


def _ess(draws):
    return np.asarray(az.ess(np.asarray(draws)), dtype=np.float64)


def _rhat(draws):
    return np.asarray(az.rhat(np.asarray(draws)), dtype=np.float64)


def compare(ours, ref) -> dict:
    """Per-coordinate agreement of two sets of draws (chains, draws, d) of the same target."""
    o = ours.reshape(-1, ours.shape[-1])
    r = ref.reshape(-1, ref.shape[-1])
    sd = r.std(axis=0)
    z = np.abs(o.mean(0) - r.mean(0)) / sd
    ratio = o.std(0) / sd
    se = np.sqrt(1 / _ess(ours) + 1 / _ess(ref))
    return {"max_abs_mean_diff_over_sd": float(z.max()), "median_abs_mean_diff_over_sd": float(np.median(z)),
            "frac_mean_diff_within_0.1_sd": float(np.mean(z <= 0.1)),
            "max_mean_diff_in_mc_se": float(np.max(z / se)), "median_mc_se_over_sd": float(np.median(se)),
            "sd_ratio_min": float(ratio.min()), "sd_ratio_max": float(ratio.max()),
            "sd_ratio_median": float(np.median(ratio)), "frac_sd_ratio_in_0.9_1.1": float(np.mean((ratio >= 0.9) & (ratio <= 1.1)))}


def tempered_vs_nuts(X, y, draws, *, beta: float, lam: float, quick: bool, log=print) -> dict:
    d = X.shape[1]
    U = _potential(X, y, beta, lam)
    w, s = (300, 500) if quick else (500, 1000)
    ref, secs, grads = _nuts(U, d, warmup=w, draws=s, chains=4, key=jax.random.PRNGKey(201))
    out = {"beta": beta, "prior_precision": lam, "nuts": {"warmup": w, "draws": s, "chains": 4, "seconds": secs,
                                                          "grad_evals": grads, "min_ess_bulk": float(_ess(ref).min()),
                                                          "max_rhat": float(_rhat(ref).max())},
           "ours": {"min_ess_bulk": float(_ess(draws).min()), "max_rhat": float(_rhat(draws).max())}}
    out.update(compare(draws, ref))
    log(f"  [quality/nuts] tempered target: max |mean diff| {out['max_abs_mean_diff_over_sd']:.3f} sd "
        f"({out['max_mean_diff_in_mc_se']:.1f} MC se), sd ratio [{out['sd_ratio_min']:.3f}, {out['sd_ratio_max']:.3f}]")
    return out


def nonprivate_ess_per_second(X, y, *, quick: bool, step: float = 0.1, log=print) -> dict:
    n, d = X.shape
    lam = 1.0
    U = _potential(X, y, float(n), lam)
    w, s = (200, 200) if quick else (500, 500)
    ref, t_nuts, grads = _nuts(U, d, warmup=w, draws=s, chains=4, key=jax.random.PRNGKey(301))
    ess_nuts = _ess(ref)
    # our kernel: preconditioned ULA, P = inverse Hessian of U at the exact MAP (non-private)
    th_map, cov = map_laplace(np.asarray(X, np.float64), np.asarray(y, np.float64), lam)
    pre = Preconditioner.from_matrix(cov)
    V, to_theta, to_phi = reparametrise(U, pre)
    steps = 4000 if quick else 20_000
    thin = 10
    burn = steps // thin // 5
    phi0 = to_phi(jnp.asarray(th_map, jnp.float32))

    def chains(key):
        return jax.vmap(lambda k: langevin.sample_chain(k, V, phi0, step, steps, thinning=thin).z)(
            jax.random.split(key, 4))

    f = jax.jit(chains).lower(jax.random.PRNGKey(302)).compile()
    t0 = time.perf_counter()
    phi = jax.block_until_ready(f(jax.random.PRNGKey(302)))
    t_ours = time.perf_counter() - t0
    ours = np.asarray(to_theta(phi), dtype=np.float64)[:, burn:]
    ess_ours = _ess(ours)
    out = {"n": n, "d": d, "prior_precision": lam,
           "nuts": {"seconds": t_nuts, "warmup": w, "draws": s, "chains": 4, "grad_evals": grads,
                    "ess_min": float(ess_nuts.min()), "ess_median": float(np.median(ess_nuts)),
                    "ess_min_per_s": float(ess_nuts.min() / t_nuts), "ess_median_per_s": float(np.median(ess_nuts) / t_nuts),
                    "ess_min_per_1000_grads": float(1000 * ess_nuts.min() / grads),
                    "max_rhat": float(_rhat(ref).max())},
           "preconditioned_ula": {"seconds": t_ours, "steps": steps, "step_size": step, "thinning": thin, "chains": 4,
                                  "burn_in_draws": burn, "grad_evals": 4 * steps,
                                  "ess_min": float(ess_ours.min()), "ess_median": float(np.median(ess_ours)),
                                  "ess_min_per_s": float(ess_ours.min() / t_ours),
                                  "ess_min_per_1000_grads": float(1000 * ess_ours.min() / (4 * steps)),
                                  "ess_median_per_s": float(np.median(ess_ours) / t_ours),
                                  "max_rhat": float(_rhat(ours).max())}}
    out["agreement"] = compare(ours, ref)
    out["ess_min_per_s_ratio"] = out["preconditioned_ula"]["ess_min_per_s"] / out["nuts"]["ess_min_per_s"]
    # machine- and compile-free: effective draws per gradient evaluation (NUTS: leapfrog steps of warmup + sampling)
    out["ess_min_per_grad_ratio"] = (out["preconditioned_ula"]["ess_min_per_1000_grads"]
                                     / out["nuts"]["ess_min_per_1000_grads"])
    log(f"  [quality/nuts] non-private: NUTS min ESS/s {out['nuts']['ess_min_per_s']:.2f}, preconditioned ULA "
        f"{out['preconditioned_ula']['ess_min_per_s']:.2f} (x{out['ess_min_per_s_ratio']:.1f}; per gradient x{out['ess_min_per_grad_ratio']:.1f}); bias "
        f"{out['agreement']['max_abs_mean_diff_over_sd']:.3f} sd, sd ratio {out['agreement']['sd_ratio_median']:.3f}")
    return out
