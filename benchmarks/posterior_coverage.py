"""Coverage in simulation of the posterior mode's noise-aware interval (issue 27 part 5).

Synthetic logistic regression with a known truth (``benchmarks.quality_coverage``'s design: an
intercept and ``d - 1`` covariates uniform on [-1, 1], theta* fixed), ``reps`` replicated datasets
per n, each fitted by the library's posterior mode exactly as a user would
(``dp_infer.fit(loss, X, y, target="posterior", eps, delta, prior_precision)``, the current
defaults, fixed seeds). Per dataset, in the same run:

* ``noise_aware`` -- :meth:`PrivateRun.noise_aware_interval` (90%, the defaults): the tempered
  posterior's mode from the draws' mean and third cumulant, the prior divided out of it, sampling
  sd from the draws' covariance (``beta / n``), Monte-Carlo error of the centre from ArviZ's MCSE
  of its influence series, the ULA step's variance inflation undone;
* ``noise_aware_first_order`` -- the same from the draws' mean (``skew_correction=False``: the
  Gaussian, first-order Bernstein-von Mises version);
* ``noise_aware_plain`` -- neither correction (``theta_bar +- z sqrt(diag(Cov) beta / n + mcse^2)``,
  the first idea: shows what the prior's shrinkage does);
* ``tempered_credible`` -- the draws' 5% and 95% quantiles (the tempered posterior itself);
* ``laplace_noise_aware`` -- the existing noise-aware Laplace baseline
  (:func:`benchmarks.baselines.newton_laplace_posterior`) at the same (eps, delta);
* ``nonprivate`` -- the untempered posterior's Laplace approximation at the exact MAP (the width
  reference: widths are reported relative to its interval on the same dataset).

Coverage is the fraction of datasets whose interval holds theta*_j, with its binomial standard
error ``sqrt(c (1 - c) / reps)``; the pooled rate over coordinates is given too (its SE ignores the
correlation between coordinates, so read it as a lower bound on the SE).

Command: ``python -m benchmarks.posterior_coverage [--quick] [--reps R] [--n 2000 10000]``
(prints a markdown section; ``--json PATH`` keeps the raw numbers).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import jax
import numpy as np

from .baselines import newton_laplace_posterior
from .quality_coverage import Z90, logistic_data, map_laplace, true_theta

METHODS = ("noise_aware", "noise_aware_first_order", "noise_aware_plain", "tempered_credible", "laplace_noise_aware",
           "nonprivate")


class _Released:
    """What a posterior-mode run releases, as the interval reads it (plan fields + draws after burn-in)."""

    def __init__(self, plan, draws, mixing):
        self.plan, self._draws, self.mixing = plan, draws, mixing

    def draws(self):
        return self._draws


def _fitted(n, d, s, X, y, *, loss, eps, delta, lam, kw, cache):
    """``dp_infer.fit(..., target="posterior")`` for dataset ``s`` (seed 90_000 + s), or its cached release."""
    import types

    import dp_infer

    path = os.path.join(cache, f"n{n}_d{d}_eps{eps:g}_lam{lam:g}_{kw.get('ess', 'default')}_s{s}.npz") if cache else None
    if path and os.path.exists(path):
        z = np.load(path)
        plan = types.SimpleNamespace(target="posterior", beta=float(z["beta"]), n=n, prior_precision=z["lam"],
                                     kernel=str(z["kernel"]), step_size=float(z["step_size"]),
                                     preconditioner=z["P"])
        return _Released(plan, z["draws"], {"min_ess_bulk": float(z["ess"]), "max_rhat": float(z["rhat"])}), float(z["secs"])
    t0 = time.perf_counter()
    run = dp_infer.fit(loss, X, y, target="posterior", eps=eps, delta=delta, prior_precision=lam,
                       seed=90_000 + s, progress_bar=False, **kw)
    secs = time.perf_counter() - t0
    mix = run.achieved_mixing()
    if path:
        os.makedirs(cache, exist_ok=True)
        np.savez(path, draws=run.draws(), beta=run.plan.beta, lam=np.asarray(run.plan.prior_precision),
                 kernel=run.plan.kernel, step_size=run.plan.step_size, P=np.asarray(run.plan.preconditioner),
                 ess=mix["min_ess_bulk"], rhat=mix["max_rhat"], secs=secs)
    return _Released(run.plan, run.draws(), mix), secs


def one_n(n: int, reps: int, *, d: int = 5, eps: float = 1.0, delta: float = 1e-5, lam: float = 1.0,
          ess: int | None = None, cache: str | None = None, log=print) -> dict:
    from dp_infer import losses
    from dp_infer.diagnostics.noise_aware import run_noise_aware_interval
    from dp_infer.privacy.conversions import gdp_mu

    theta = true_theta(d)
    loss = losses.logistic(row_norm=math.sqrt(d))
    mu = gdp_mu(eps, delta)
    inside = {k: [] for k in METHODS}
    width = {k: [] for k in METHODS}
    extra = {"beta": [], "prior_share": [], "mc_share": [], "centre_err_over_sampling_sd": [], "min_ess_bulk": [],
             "max_rhat": [], "refused": 0, "seconds": 0.0}
    # the noise-aware interval models the unclipped Gibbs posterior (clipped runs are refused): the
    # configuration measured here is the unclipped, overdamped one
    kw = {"clip_radius": None, "kernel": "langevin"} | ({} if ess is None else {"ess": ess})
    for s in range(reps):
        X, y = logistic_data(n, theta, s)
        run, secs = _fitted(n, d, s, X, y, loss=loss, eps=eps, delta=delta, lam=lam, kw=kw, cache=cache)
        extra["seconds"] += secs
        extra["min_ess_bulk"].append(run.mixing["min_ess_bulk"])
        extra["max_rhat"].append(run.mixing["max_rhat"])
        extra["beta"].append(run.plan.beta)
        m0, C0 = map_laplace(X, y, lam)
        sd0 = np.sqrt(np.diag(C0))
        try:
            iv = run_noise_aware_interval(run, 0.9)
        except ValueError as e:  # refused (prior-dominated draws): counted as not covering, infinite width
            extra["refused"] += 1
            log(f"  [posterior_coverage] n={n} rep {s}: refused ({e})")
            inside["noise_aware"].append(np.zeros(d, bool))
            width["noise_aware"].append(np.full(d, np.inf))
        else:
            inside["noise_aware"].append((iv.lower <= theta) & (theta <= iv.upper))
            width["noise_aware"].append(iv.upper - iv.lower)
            extra["prior_share"].append(iv.prior_share)
            extra["mc_share"].append((iv.monte_carlo_sd ** 2 / iv.sd ** 2).tolist())
            extra["centre_err_over_sampling_sd"].append(((iv.centre - m0) / sd0).tolist())
        for name, kw_iv in (("noise_aware_first_order", {"skew_correction": False}),
                            ("noise_aware_plain", {"skew_correction": False, "shrinkage_correction": False})):
            try:
                other = run_noise_aware_interval(run, 0.9, **kw_iv)
                inside[name].append((other.lower <= theta) & (theta <= other.upper))
                width[name].append(other.upper - other.lower)
            except ValueError:
                inside[name].append(np.zeros(d, bool))
                width[name].append(np.full(d, np.inf))
        flat = run.draws().reshape(-1, d)
        lo, hi = np.quantile(flat, [0.05, 0.95], axis=0)
        inside["tempered_credible"].append((lo <= theta) & (theta <= hi))
        width["tempered_credible"].append(hi - lo)
        m, C, _ = newton_laplace_posterior(X, y, key=jax.random.PRNGKey(70_000 + s), mu=mu, prior_precision=lam,
                                           row_norm=math.sqrt(d))
        sd = np.sqrt(np.diag(C))
        inside["laplace_noise_aware"].append(np.abs(m - theta) <= Z90 * sd)
        width["laplace_noise_aware"].append(2 * Z90 * sd)
        inside["nonprivate"].append(np.abs(m0 - theta) <= Z90 * sd0)
        width["nonprivate"].append(2 * Z90 * sd0)
        if (s + 1) % 10 == 0 or s + 1 == reps:
            c = np.mean(inside["noise_aware"], axis=0)
            log(f"  [posterior_coverage] n={n}: {s + 1}/{reps} datasets, noise-aware coverage so far "
                f"{' '.join(f'{v:.2f}' for v in c)}")
    ref = np.asarray(width["nonprivate"])
    out = {"n": n, "d": d, "reps": reps, "eps": eps, "delta": delta, "prior_precision": lam,
           "ess": ess, "theta_star": theta.tolist(), "methods": {}}
    for k in METHODS:
        hit = np.asarray(inside[k], dtype=float)
        cov = hit.mean(axis=0)
        ratio = np.asarray(width[k]) / ref
        out["methods"][k] = {"coverage": cov.tolist(), "coverage_se": np.sqrt(cov * (1 - cov) / reps).tolist(),
                             "coverage_pooled": float(hit.mean()),
                             "coverage_pooled_se": float(math.sqrt(hit.mean() * (1 - hit.mean()) / hit.size)),
                             "width_ratio_median": np.median(ratio, axis=0).tolist(),
                             "width_ratio_median_all": float(np.median(ratio))}
    b = np.asarray(extra["beta"])
    err = np.asarray(extra["centre_err_over_sampling_sd"]) if extra["centre_err_over_sampling_sd"] else np.zeros((1, d))
    out["posterior_mode"] = {
        "beta_median": float(np.median(b)), "beta_over_n_median": float(np.median(b) / n),
        "prior_share_median": float(np.median(extra["prior_share"])) if extra["prior_share"] else float("nan"),
        "mc_share_median": np.median(np.asarray(extra["mc_share"]), axis=0).tolist() if extra["mc_share"] else [],
        "centre_minus_map_over_sd0_mean": err.mean(axis=0).tolist(),
        "centre_minus_map_over_sd0_sd": err.std(axis=0).tolist(),
        "min_ess_bulk_median": float(np.nanmedian(extra["min_ess_bulk"])),
        "max_rhat_max": float(np.nanmax(extra["max_rhat"])), "refused": extra["refused"],
        "seconds_total": extra["seconds"]}
    return out


def run(quick: bool, log=print, *, ns=None, reps=None, ess=None, cache=None) -> dict:
    ns = ns or ((2000,) if quick else (2000, 10_000))
    reps = reps or (10 if quick else 100)
    return {"runs": [one_n(n, reps, ess=ess, cache=cache, log=log) for n in ns]}


def to_markdown(res: dict, command: str = "") -> str:
    L = []
    for r in res["runs"]:
        pm = r["posterior_mode"]
        L += [f"## Noise-aware interval of the posterior mode: coverage in simulation (logistic, d = {r['d']}, "
              f"n = {r['n']}, {r['reps']} datasets, eps = {r['eps']:g}, delta = {r['delta']:g}, prior N(0, 1/{r['prior_precision']:g})"
              + ("" if r.get("ess") is None else f", ess = {r['ess']}") + ")",
              ""]
        if command:
            L += [f"Command: `{command}`.", ""]
        L += ["Nominal 90%; coverage per coordinate ± its binomial SE; pooled = all coordinates together; width "
              "relative to the untempered posterior's interval on the same dataset (median).", "",
              "| method | coverage per coordinate (± SE) | pooled | median width ratio |", "|---|---|---|---|"]
        for k, v in r["methods"].items():
            cells = " ".join(f"{c:.2f}±{s:.2f}" for c, s in zip(v["coverage"], v["coverage_se"]))
            L.append(f"| {k} | {cells} | {v['coverage_pooled']:.3f} ± {v['coverage_pooled_se']:.3f} | "
                     f"{v['width_ratio_median_all']:.2f} |")
        L += ["", f"Posterior mode{'' if r.get('ess') is None else ' (ess = %d)' % r['ess']}: median beta {pm['beta_median']:.3g} (beta / n = {pm['beta_over_n_median']:.2e}), "
              f"median prior share of the draws' precision {pm['prior_share_median']:.2f}, Monte-Carlo share of the "
              f"interval's variance (median per coordinate) {' '.join(f'{v:.2f}' for v in pm['mc_share_median'])}; "
              f"centre - exact MAP in untempered sds: mean {' '.join(f'{v:+.2f}' for v in pm['centre_minus_map_over_sd0_mean'])} "
              f"(sd {' '.join(f'{v:.2f}' for v in pm['centre_minus_map_over_sd0_sd'])}); "
              f"min bulk ESS median {pm['min_ess_bulk_median']:.0f}, max R-hat {pm['max_rhat_max']:.3f}; "
              f"refused {pm['refused']}; {pm['seconds_total']:.0f} s of sampling.", ""]
    return "\n".join(L)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.posterior_coverage")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int)
    p.add_argument("--n", type=int, nargs="*")
    p.add_argument("--ess", type=int, help="effective draws asked of the posterior mode (default: the library's)")
    p.add_argument("--cache", help="directory keeping each run's released draws (re-evaluate intervals without refitting)")
    p.add_argument("--json")
    a = p.parse_args(argv)
    t0 = time.time()
    res = run(a.quick, ns=a.n, reps=a.reps, ess=a.ess, cache=a.cache)
    res["seconds"] = time.time() - t0
    cmd = "python -m benchmarks.posterior_coverage" + (" --quick" if a.quick else "") + (
        f" --reps {a.reps}" if a.reps else "") + (" --n " + " ".join(map(str, a.n)) if a.n else "") + (
        f" --ess {a.ess}" if a.ess else "")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    print(to_markdown(res, cmd))


if __name__ == "__main__":
    main()
