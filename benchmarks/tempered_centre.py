"""Where the posterior mode's tempered draws sit (issue 37): the draws' mean against the clipped target's
mode, against NUTS on the same target, and against the truth.

Issue 37's arithmetic treats the tempered target as Gaussian: its draws' mean would then locate the data's
estimate to ``sqrt(n / beta) / sqrt(k)`` untempered sds, and an interval ``mean +- z sqrt(MCSE^2 +
(beta / n) var)`` would need no released curvature. This benchmark measures the assumption on the simulated
designs of :mod:`benchmarks.intervals` (truth known), one default posterior run per (design, seed, ess):

* **sampler**: the private chain's mean and sd against NUTS (numpyro, 500 warm-up + 1,000 draws, no privacy)
  on the run's own clipped target ``run.potential`` -- the same function, so a gap here is the sampler's;
* **skew**: the target's mean (NUTS) against its mode (L-BFGS on the same potential): a gap here is the
  tempered target's shape, which no sampler removes;
* **centre**: the draws' mean against the truth, and the coverage at nominal 0.90 of the Gaussian
  arithmetic's interval above (MCSE from ArviZ).

Distances are in the non-private reference's sds (:func:`benchmarks.intervals.reference_sd`: the untempered
posterior's Laplace sd at the MAP), medians per class of coordinate. Reads the rows non-privately for the
oracles (NUTS, the mode, the reference); the runs themselves are the library's default private runs at
(1, 1e-5).

Command: ``python -m benchmarks.tempered_centre --designs adult_shaped logistic_d20 --seeds 0 1 --ess 40 400``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from .intervals import DELTA, DESIGNS, PRIOR, Z90, coordinate_kinds, design_data, reference_sd


def _mode(U, start):
    import jax
    import jax.numpy as jnp
    from scipy.optimize import minimize

    vg = jax.jit(jax.value_and_grad(U))

    def fg(t):
        v, g = vg(jnp.asarray(t))
        return float(v), np.asarray(g, dtype=float)

    return minimize(fg, start, jac=True, method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-9}).x


def _nuts(U, start, seed: int) -> np.ndarray:
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS

    mcmc = MCMC(NUTS(potential_fn=U), num_warmup=500, num_samples=1000, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), init_params=jnp.asarray(start))
    return np.asarray(mcmc.get_samples())


def one(design: str, seed: int, ess: int) -> dict:
    """One default run and its oracles; per-coordinate arrays (lists) and the run's beta / n."""
    import arviz_stats
    import jax

    jax.config.update("jax_enable_x64", True)
    from dp_infer import losses
    from dp_infer.infer.posterior import fit_posterior

    kind, n, d, eps = DESIGNS[design]
    X, y, theta = design_data(design, seed)
    loss = losses.logistic(row_norm=1.0) if kind == "logistic" else losses.huber(1.0, row_norm=1.0)
    ref = reference_sd(kind, X, y, PRIOR)
    t0 = time.time()
    run = fit_posterior(loss, X, y, eps=eps, delta=DELTA, prior_precision=PRIOR, ess=ess, seed=1000 + seed,
                        progress_bar=False)
    seconds = time.time() - t0
    draws = run.draws()
    flat = draws.reshape(-1, d)
    mean, var = flat.mean(axis=0), flat.var(axis=0)
    mcse = np.array([float(np.asarray(arviz_stats.mcse(np.asarray(draws[:, :, j])))) for j in range(d)])
    bn = run.plan.beta / n
    U = run.potential
    mode = _mode(U, mean)
    nuts = _nuts(U, mode, seed)
    sd = np.sqrt(mcse ** 2 + bn * var)
    return {"design": design, "seed": seed, "ess": ess, "beta_over_n": bn, "seconds": seconds,
            "kinds": coordinate_kinds(design),
            "sampler_gap": (np.abs(mean - nuts.mean(axis=0)) / ref).tolist(),
            "sd_ratio": (np.sqrt(var) / nuts.std(axis=0)).tolist(),
            "skew_gap": (np.abs(nuts.mean(axis=0) - mode) / ref).tolist(),
            "mode_error": (np.abs(mode - theta) / ref).tolist(),
            "mean_error": (np.abs(mean - theta) / ref).tolist(),
            "covered": (np.abs(mean - theta) <= Z90 * sd).tolist(),
            "width": (sd / ref).tolist(), "mcse": (mcse / ref).tolist()}


def table(rows) -> str:
    head = ("| design | ess asked | seeds | beta / n | class (coordinates) | private mean - NUTS mean | sd private / NUTS "
            "| target mean - mode | mode - truth | mean - truth | MCSE | Gaussian arithmetic's interval: coverage "
            "at 0.90 | its width |\n|" + "---|" * 13)
    out = [head]
    keys = sorted({(r["design"], r["ess"]) for r in rows})
    for design, ess in keys:
        rs = [r for r in rows if r["design"] == design and r["ess"] == ess]
        kinds = np.array(rs[0]["kinds"])
        cat = {k: np.concatenate([np.asarray(r[k], dtype=float) for r in rs])
               for k in ("sampler_gap", "sd_ratio", "skew_gap", "mode_error", "mean_error", "covered", "width",
                         "mcse")}
        allk = np.tile(kinds, len(rs))
        bn = np.median([r["beta_over_n"] for r in rs])
        for cls in ["all"] + sorted(set(kinds)):
            sel = np.ones(allk.size, bool) if cls == "all" else allk == cls
            if cls != "all" and sel.all():
                continue
            c = cat["covered"][sel]
            se = np.sqrt(c.mean() * (1 - c.mean()) / c.size)
            out.append(f"| {design} | {ess} | {len(rs)} | {bn:.4f} | {cls} ({sel.sum()}) | "
                       f"{np.median(cat['sampler_gap'][sel]):.2f} | {np.median(cat['sd_ratio'][sel]):.2f} | "
                       f"{np.median(cat['skew_gap'][sel]):.2f} | {np.median(cat['mode_error'][sel]):.2f} | "
                       f"{np.median(cat['mean_error'][sel]):.2f} | {np.median(cat['mcse'][sel]):.2f} | "
                       f"{c.mean():.3f} +- {se:.3f} | {np.median(cat['width'][sel]):.2f} |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--designs", nargs="+", default=["adult_shaped", "logistic_d20"], choices=sorted(DESIGNS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--ess", nargs="+", type=int, default=[40, 400])
    a = p.parse_args(argv)
    import jax

    jax.config.update("jax_platforms", "cpu")
    t0 = time.time()
    rows = []
    for design in a.designs:
        for ess in a.ess:
            for seed in a.seeds:
                rows.append(one(design, seed, ess))
                print(f"# {design} ess {ess} seed {seed}: run {rows[-1]['seconds']:.0f} s", flush=True)
    print(table(rows))
    print(f"\n# {time.time() - t0:.0f} s in all")


if __name__ == "__main__":
    main()
