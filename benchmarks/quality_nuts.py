"""NUTS references for the posterior-quality benchmark (NON-PRIVATE: nothing here is released).

Every NUTS reference is NumPyro NUTS with a dense mass matrix fixed at the Laplace covariance of
its own target (inverse Hessian of U at U's exact MAP, float64 Newton on the same rows; the
target's curvature is read from the private data, which is fine for a non-private reference),
chains started at that MAP, step-size adaptation only (``adapt_mass_matrix=False``). On Adult's
collinear one-hot blocks this is what lets NUTS take long trajectories at all.

* :func:`tempered_vs_nuts`: the posterior mode's draws (Adult, eps = 1) are draws of
  ``N(0, 1/lam) x exp(-beta L)``, ``U = beta * mean loss + lam/2 |theta|^2``; NUTS samples the same
  target (same beta, same prior, same rows). Compared per coordinate
  (:func:`benchmarks.quality_compare.compare`): the 4 released chains, and a 16-chain re-run of
  the same plan (:func:`benchmarks.quality_adult.rerun_plan`, a NON-PRIVATE diagnostic of the
  sampler whose extra chains only lower the MC error).
* :func:`nonprivate_ess_per_second`: the untempered posterior (beta = n, N(0, 1) prior) on Adult.
  Our kernel for a non-private target: preconditioned ULA with ``P`` the same Laplace covariance
  (non-private), steps ``h = 0.1`` and ``0.05`` in the whitened coordinates, 4 chains from the
  MAP, the same Langevin time for both steps. ESS/s: min (and median) bulk ESS over coordinates
  per second of wall time; NUTS is timed with warmup and compilation (its step-size adaptation is
  part of its cost), ULA with burn-in and without compilation (stated in the table). ESS per
  gradient evaluation (NUTS: leapfrog steps of warmup and sampling, all chains; ULA: every step
  of every chain) is free of compilation and machine load.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC, NUTS

from dp_infer import losses
from dp_infer.kernels import langevin
from dp_infer.kernels.preconditioned import Preconditioner, reparametrise
from dp_infer.potentials import GibbsPotential

from .posterior_metrics import posterior_summary
from .quality_compare import compare, ess, rhat
from .quality_coverage import map_laplace

NUTS_LABEL = ("NON-PRIVATE reference: NUTS, dense mass matrix fixed at the Laplace covariance of the same target "
              "(inverse Hessian of U at its exact MAP), chains started at the MAP, step-size adaptation only")


def _potential(X, y, beta: float, lam: float) -> GibbsPotential:
    """``U(theta) = beta * mean_i [softplus(x_i' theta) - y_i x_i' theta] + lam/2 |theta|^2`` (float32):
    the library's Gibbs potential, so NUTS and our kernels differentiate the same function (the
    preconditioned kernels through its reparametrisation, ``X C`` formed once)."""
    Xj, yj = jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32)
    row_norm = float(np.linalg.norm(np.asarray(X, np.float64), axis=1).max())
    return GibbsPotential(losses.logistic(row_norm=row_norm), Xj, yj, float(beta), float(lam))


def laplace_reference(X, y, beta: float, lam: float):
    """Exact MAP of ``U = beta * mean loss + lam/2 |theta|^2`` and the inverse Hessian of U there.

    ``U = (beta / n) [sum loss + (lam n / beta)/2 |theta|^2]``: the MAP is the untempered MAP at
    prior precision ``lam n / beta`` and the inverse Hessian is ``n / beta`` times its covariance."""
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    n = X.shape[0]
    th, C = map_laplace(X, y, lam * n / beta)
    cov = C * (n / beta)
    return th, 0.5 * (cov + cov.T)


def nuts_fixed_mass(U, theta0, cov, *, warmup: int, draws: int, chains: int, key):
    """NUTS on ``U`` with ``inverse_mass_matrix = cov`` (dense, fixed), every chain from ``theta0``.

    Returns ``(draws (chains, draws, d) float64, seconds incl. warmup and compilation, leapfrog
    steps of warmup + sampling summed over chains, adapted step size)``."""
    kern = NUTS(potential_fn=lambda z: U(z["theta"]), dense_mass=True, adapt_mass_matrix=False,
                inverse_mass_matrix=jnp.asarray(cov, jnp.float32))
    mcmc = MCMC(kern, num_warmup=warmup, num_samples=draws, num_chains=chains, chain_method="vectorized",
                progress_bar=False)
    init = {"theta": jnp.tile(jnp.asarray(theta0, jnp.float32), (chains, 1))}
    k1, k2 = jax.random.split(key)
    t0 = time.perf_counter()
    mcmc.warmup(k1, init_params=init, extra_fields=("num_steps",), collect_warmup=True)
    grads = int(np.asarray(mcmc.get_extra_fields()["num_steps"]).sum())
    mcmc.run(k2, extra_fields=("num_steps",))
    th = np.asarray(jax.block_until_ready(mcmc.get_samples(group_by_chain=True)["theta"]), dtype=np.float64)
    secs = time.perf_counter() - t0
    grads += int(np.asarray(mcmc.get_extra_fields()["num_steps"]).sum())
    step = float(np.mean(np.asarray(mcmc.last_state.adapt_state.step_size)))
    return th, secs, grads, step


def _nuts_summary(ref, secs, grads, step, w, s, chains) -> dict:
    e = ess(ref)
    return {"label": NUTS_LABEL, "warmup": w, "draws": s, "chains": chains, "seconds": secs, "grad_evals": grads,
            "step_size": step, "min_ess_bulk": float(e.min()), "ess_min": float(e.min()),
            "ess_median": float(np.median(e)), "ess_min_per_s": float(e.min() / secs),
            "ess_median_per_s": float(np.median(e) / secs), "ess_min_per_1000_grads": float(1000 * e.min() / grads),
            "max_rhat": float(rhat(ref).max())}


def tempered_vs_nuts(X, y, draws, *, beta: float, lam: float, quick: bool, rerun=None, test=None,
                     log=print, potential=None) -> dict:
    """NUTS on the released draws' target; ``draws`` the 4 released chains, ``rerun`` (optional) the
    16-chain NON-PRIVATE re-run of the same plan, both ``(chains, draws, d)`` after burn-in.
    ``test = (X_test, y_test)`` (optional): held-out metrics of both posterior means -- how accurate
    the target itself is at this beta, against what the released draws reach."""
    # ``potential``: the released run's own target U(theta) when it is not the plain Gibbs posterior
    # (the default posterior mode clips gradients in the metric: a Huberised loss); the Laplace
    # reference of the unclipped target then only sets NUTS's mass matrix and start
    U = _potential(X, y, beta, lam) if potential is None else potential
    th_map, cov = laplace_reference(X, y, beta, lam)
    w, s = (200, 500) if quick else (300, 1500)
    ref, secs, grads, step = nuts_fixed_mass(U, th_map, cov, warmup=w, draws=s, chains=4, key=jax.random.PRNGKey(201))
    out = {"beta": beta, "prior_precision": lam, "nuts": _nuts_summary(ref, secs, grads, step, w, s, 4),
           "ours": {"min_ess_bulk": float(ess(draws).min()), "max_rhat": float(rhat(draws).max()),
                    "chains": int(draws.shape[0]), "draws_per_chain": int(draws.shape[1])}}
    c = compare(draws, ref)
    out.update(c)  # the released draws' figures, also at top level (older readers)
    out["released"] = {"label": "released draws (4 chains, private run)", **out["ours"], **c}
    if test is not None:
        out["nuts"]["test"] = posterior_summary(ref, *test)
        out["released"]["test"] = posterior_summary(draws, *test)
    rows = [("released", out["released"])]
    if rerun is not None:
        out["rerun"] = {"label": f"NON-PRIVATE diagnostic: the same plan re-run with {rerun.shape[0]} chains",
                        "min_ess_bulk": float(ess(rerun).min()), "max_rhat": float(rhat(rerun).max()),
                        "chains": int(rerun.shape[0]), "draws_per_chain": int(rerun.shape[1]), **compare(rerun, ref)}
        rows.append(("rerun", out["rerun"]))
    log(f"  [quality/nuts] tempered NUTS: min ESS {out['nuts']['ess_min']:.0f}, max R-hat {out['nuts']['max_rhat']:.3f}, "
        f"{secs:.0f} s" + (f"; held-out accuracy of the posterior mean {out['nuts']['test']['accuracy_posterior_mean']:.4f} "
                           f"(released {out['released']['test']['accuracy_posterior_mean']:.4f})" if test is not None else ""))
    for name, r in rows:
        log(f"  [quality/nuts] tempered, {name} ({r['chains']} chains): max |mean diff| {r['max_abs_mean_diff_over_sd']:.3f} sd "
            f"(floor {r['noise_floor_max_abs_mean_diff']:.3f}), {r['coords_mean_beyond_bar_plus_3se']} coords beyond "
            f"0.1 + 3 se, sd ratio [{r['sd_ratio_min']:.3f}, {r['sd_ratio_max']:.3f}] -> "
            f"{'met' if r['met'] else 'NOT met'}")
    return out


def _ula(U, th_map, cov, *, step: float, horizon: float, chains: int, draws: int, key):
    pre = Preconditioner.from_matrix(cov)
    V, to_theta, to_phi = reparametrise(U, pre)
    steps = int(round(horizon / step))
    thin = max(1, steps // draws)
    phi0 = to_phi(jnp.asarray(th_map, jnp.float32))

    def run(k):
        return jax.vmap(lambda kk: langevin.sample_chain(kk, V, phi0, step, steps, thinning=thin).z)(
            jax.random.split(k, chains))

    f = jax.jit(run).lower(key).compile()
    t0 = time.perf_counter()
    phi = jax.block_until_ready(f(key))
    secs = time.perf_counter() - t0
    th = np.asarray(to_theta(phi), dtype=np.float64)
    burn = th.shape[1] // 5
    return th[:, burn:], secs, steps, thin, burn


def nonprivate_ess_per_second(X, y, *, quick: bool, steps=(0.1, 0.05), log=print) -> dict:
    n, d = X.shape
    lam = 1.0
    U = _potential(X, y, float(n), lam)
    th_map, cov = laplace_reference(X, y, float(n), lam)
    w, s = (200, 500) if quick else (300, 2000)
    ref, t_nuts, grads, nstep = nuts_fixed_mass(U, th_map, cov, warmup=w, draws=s, chains=4,
                                                key=jax.random.PRNGKey(301))
    out = {"n": n, "d": d, "prior_precision": lam, "nuts": _nuts_summary(ref, t_nuts, grads, nstep, w, s, 4),
           "ula": []}
    log(f"  [quality/nuts] non-private NUTS: min ESS {out['nuts']['ess_min']:.0f}, max R-hat "
        f"{out['nuts']['max_rhat']:.3f}, {t_nuts:.0f} s, {grads} leapfrog steps, step size {nstep:.3f}")
    horizon, ndraws = (400.0, 400) if quick else (2000.0, 2000)
    for i, h in enumerate(steps):
        th, secs, nsteps, thin, burn = _ula(U, th_map, cov, step=h, horizon=horizon, chains=4, draws=ndraws,
                                             key=jax.random.PRNGKey(302 + i))
        e = ess(th)
        r = {"label": "preconditioned ULA, P = Laplace covariance at the MAP (non-private), chains from the MAP",
             "seconds": secs, "steps": nsteps, "step_size": h, "horizon": horizon, "thinning": thin, "chains": 4,
             "burn_in_draws": burn, "grad_evals": 4 * nsteps, "ess_min": float(e.min()),
             "ess_median": float(np.median(e)), "ess_min_per_s": float(e.min() / secs),
             "ess_median_per_s": float(np.median(e) / secs),
             "ess_min_per_1000_grads": float(1000 * e.min() / (4 * nsteps)), "max_rhat": float(rhat(th).max())}
        r["ess_min_per_s_ratio"] = r["ess_min_per_s"] / out["nuts"]["ess_min_per_s"]
        r["ess_min_per_grad_ratio"] = r["ess_min_per_1000_grads"] / out["nuts"]["ess_min_per_1000_grads"]
        r["agreement"] = compare(th, ref)
        out["ula"].append(r)
        g = r["agreement"]
        log(f"  [quality/nuts] non-private ULA h={h:g}: min ESS/s {r['ess_min_per_s']:.2f} vs NUTS "
            f"{out['nuts']['ess_min_per_s']:.2f} (x{r['ess_min_per_s_ratio']:.2f}; per gradient "
            f"x{r['ess_min_per_grad_ratio']:.2f}); bias {g['max_abs_mean_diff_over_sd']:.3f} sd (floor "
            f"{g['noise_floor_max_abs_mean_diff']:.3f}), sd ratio [{g['sd_ratio_min']:.3f}, {g['sd_ratio_max']:.3f}] -> "
            f"{'met' if g['met'] else 'NOT met'}")
    best = out["ula"][0]
    # backward-compatible keys: the first step size (h = 0.1) is "our best kernel"
    out["preconditioned_ula"], out["agreement"] = best, best["agreement"]
    out["ess_min_per_s_ratio"], out["ess_min_per_grad_ratio"] = best["ess_min_per_s_ratio"], best["ess_min_per_grad_ratio"]
    return out
