"""The posterior mode's levers on Adult and on synthetic logistic data (issue 27, parts 2, 3, 6).

``python -m benchmarks.posterior_levers [--n-sub N] [--eps 0.5 1 2 4 8] [--synthetic] --json F --md F``

Adult (:func:`benchmarks.adult_rows.load_adult_natural`, prior N(0, 1 / 0.17), rows admissible,
private X'X/n with 10% of mu^2, 4 chains, ESS 400): the DEFAULT posterior mode (per-example
gradients clipped in the preconditioner's metric at radius sqrt(d)) at each eps, with

* beta / n from the plan and the forecast's prediction from public inputs
  (:func:`dp_infer.routes.posterior.forecast_posterior`), and the lead's formula
  ``mu_path^2 n c / (4 r^2 ESS)`` (c the declared mixing rate, r the clip radius) beside it;
* the interval-width ratio against the untempered posterior: median over coordinates of the
  draws' sd over the sd of the Laplace approximation at beta = n (exact MAP, NON-PRIVATE
  reference; 90% intervals of Gaussian-like marginals scale with the sd);
* accuracy of the posterior mean, predictive log loss on the public test rows, max R-hat and min
  bulk ESS of the released draws (ArviZ), the whole call's wall time and the forecast's.

Synthetic (``--synthetic``): logistic data with d = 10 at n in {1e4, 1e5} (and 1e6, plan only):
beta / n of the plan against the formula, and at n = 1e4 the draws' sd against the untempered
Laplace sd.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from dp_infer import losses
from dp_infer.infer.posterior import fit_posterior
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.routes.forecast import forecast_posterior
from dp_infer.routes.posterior import DEFAULT_MIXING_RATE

from .adult_rows import load_adult_natural
from .posterior_metrics import posterior_summary
from .quality_coverage import map_laplace

PRIOR_PRECISION = 0.17
DELTA = 1e-5


def formula_beta_over_n(n: int, eps: float, r: float, ess: int, share: float = 0.1,
                        c: float = DEFAULT_MIXING_RATE) -> float:
    """The lead's approximation ``mu_path^2 n c / (4 r^2 ESS)`` (burn-in ignored)."""
    mu2 = (1 - share) * gdp_mu(eps, DELTA) ** 2
    return mu2 * n * c / (4 * r * r * ess)


def one_run(loss, X, y, X_test, y_test, *, eps, rows, sd0, seed, ess=400, clip_radius="auto", prior=PRIOR_PRECISION,
            kernel="langevin", adapt_metric=None):
    n, d = X.shape
    fc = forecast_posterior(loss, n, d, eps=eps, delta=DELTA, prior_precision=prior, ess=ess, rows=rows,
                            clip_radius=clip_radius, kernel=kernel, adapt_metric=adapt_metric)
    t0 = time.perf_counter()
    run = fit_posterior(loss, X, y, eps=eps, delta=DELTA, prior_precision=prior, ess=ess, rows=rows, seed=seed,
                        progress_bar=False, clip_radius=clip_radius, kernel=kernel, adapt_metric=adapt_metric)
    draws = run.draws()
    secs = time.perf_counter() - t0
    post = run.report()["posterior"]
    flat = draws.reshape(-1, d)
    row = {"eps": eps, "n": n, "d": d, "beta": run.plan.beta, "beta_over_n": run.plan.beta / n,
           "forecast_beta_over_n": fc.beta_over_n,
           "formula_beta_over_n": (formula_beta_over_n(n, eps, post["clip_radius"], ess)
                                   if post.get("clip_radius") else None),
           "clip_radius": post.get("clip_radius"), "interval_inflation_planned": post["interval_inflation"],
           "width_ratio_median": float(np.median(flat.std(axis=0) / sd0)),
           "min_ess_bulk": post["achieved"]["min_ess_bulk"], "max_rhat": post["achieved"]["max_rhat"],
           "num_steps": sum(p["num_steps"] for p in (post.get("adaptation") or {}).get("phases", [])) or run.plan.num_steps,
           "kernel": kernel, "adapted": bool(post.get("adaptation")),
           "width_ratio_q90": float(np.quantile(flat.std(axis=0) / sd0, 0.9)),
           "forecast_steps": fc.num_steps, "seconds": secs,
           "forecast_seconds": fc.seconds, "sd_ratio_to_prior_median": float(np.median(flat.std(axis=0)) *
                                                                              math.sqrt(prior)),
           "forecast_sd_ratio_to_prior": fc.sd_ratio_to_prior}
    if X_test is not None:
        row.update(posterior_summary(draws, X_test, y_test))
    return row


def adult(eps_list, n_sub, log=print, kernel="langevin", adapt_metric=None):
    a = load_adult_natural()
    X, y = a.X_train, a.y_train
    if n_sub:
        idx = np.random.default_rng(0).permutation(X.shape[0])[:n_sub]
        X, y = X[idx], y[idx]
    _, C0 = map_laplace(X, y, PRIOR_PRECISION)
    sd0 = np.sqrt(np.diag(C0))
    loss = losses.logistic(row_norm=a.rows.max_norm())
    rows = []
    for eps in eps_list:
        r = one_run(loss, X, y, a.X_test, a.y_test, eps=eps, rows=a.rows, sd0=sd0, seed=int(10 * eps) + 1,
                    kernel=kernel, adapt_metric=adapt_metric)
        log(json.dumps(r))
        rows.append(r)
    return rows


def plan_table(eps_list, log=print):
    """Plans only (no sampling) on the FULL Adult training set: the private second moment is
    released (a real release, seed fixed) and the run's plan made, as fit_posterior does; with
    and without the clip. Cheap: the figures that need no chain."""
    import jax

    from dp_infer.routes.posterior import plan_posterior
    from dp_infer.routes.preconditioning import private_second_moment

    a = load_adult_natural()
    X = a.X_train
    n, d = X.shape
    loss = losses.logistic(row_norm=a.rows.max_norm())
    out = []
    for eps in eps_list:
        sm = private_second_moment(X, max_sq_norm=a.rows.max_norm() ** 2, mu=math.sqrt(0.1) * gdp_mu(eps, DELTA),
                                   key=jax.random.PRNGKey(int(10 * eps)))
        r = {"eps": eps, "n": n, "d": d}
        from dp_infer.routes.posterior import expected_steps

        for name, clip, kw in (("clip", math.sqrt(d), dict(adapt_metric=True, kernel="underdamped")),
                               ("noclip", None, {})):
            plan = plan_posterior(loss, n, d, eps=eps, delta=DELTA, prior_precision=PRIOR_PRECISION, second_moment=sm,
                                  rows=a.rows, clip_radius=clip, **kw)
            r[name] = {"beta_over_n": plan.beta / n, "inflation": math.sqrt(n / plan.beta),
                       "steps": expected_steps(plan)}
        r["formula_beta_over_n"] = formula_beta_over_n(n, eps, math.sqrt(d), 400)
        fc = forecast_posterior(loss, n, d, eps=eps, delta=DELTA, prior_precision=PRIOR_PRECISION, rows=a.rows,
                                clip_radius="auto", kernel="underdamped")
        r["forecast_seconds"] = fc.seconds
        log(json.dumps(r))
        out.append(r)
    return out


def _synthetic_data(n: int, d: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = np.clip(rng.normal(size=(n, d)), -1, 1)
    X[:, 0] = 1.0
    theta = rng.normal(size=d) * 0.5
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ theta))).astype(float)
    return X, y


def clip_sweep(factors=(0.5, 1.0, 2.0, None), log=print):
    """Synthetic n = 1e4, d = 10, eps = 1: the clip radius (a multiple of sqrt(d); None = no clip)
    against beta / n, the measured width ratio and the mixing."""
    n, d = 10_000, 10
    X, y = _synthetic_data(n, d)
    _, C0 = map_laplace(X, y, 1.0)
    sd0 = np.sqrt(np.diag(C0))
    loss = losses.logistic(row_norm=math.sqrt(d))
    out = []
    for f in factors:
        r = one_run(loss, X, y, None, None, eps=1.0, rows=None, sd0=sd0, seed=3, prior=1.0,
                    clip_radius=None if f is None else f * math.sqrt(d))
        r["factor"] = f
        log(json.dumps(r))
        out.append(r)
    return out


def synthetic(log=print, kernel="underdamped", chains_up_to=100_000):
    """Synthetic logistic, d = 10, eps = 1: the plan's beta / n against the formula at n = 1e4, 1e5,
    1e6 (the plan caps beta at n, the rest widens the clip radius), and chains (clipped, adapted
    metric) up to ``chains_up_to`` rows: the draws' sd against the untempered Laplace sd."""
    out = []
    d = 10
    loss = losses.logistic(row_norm=math.sqrt(d))
    for n in (10_000, 100_000, 1_000_000):
        fc = forecast_posterior(loss, n, d, eps=1.0, delta=DELTA, prior_precision=1.0, clip_radius="auto",
                                kernel=kernel)
        r = {"n": n, "d": d, "eps": 1.0, "forecast_beta_over_n": fc.beta_over_n,
             "formula_beta_over_n": formula_beta_over_n(n, 1.0, math.sqrt(d), 400), "forecast_steps": fc.num_steps}
        if n <= chains_up_to:
            X, y = _synthetic_data(n, d)
            _, C0 = map_laplace(X, y, 1.0)
            r.update(one_run(loss, X, y, None, None, eps=1.0, rows=None, sd0=np.sqrt(np.diag(C0)), seed=3, prior=1.0,
                             kernel=kernel))
        log(json.dumps(r))
        out.append(r)
    return out


def markdown(res) -> str:
    L = []
    if res.get("adult"):
        n = res["adult"][0]["n"]
        L.append(f"Adult, n = {n}, d = {res['adult'][0]['d']}, default posterior mode (clip radius sqrt(d) in the "
                 "preconditioner's metric, private X'X/n with 10% of mu^2, 4 chains, ESS 400 asked, prior "
                 f"N(0, 1/{PRIOR_PRECISION})); width ratio: median over coordinates of the draws' sd over the "
                 "untempered posterior's Laplace sd (NON-PRIVATE reference).\n")
        L.append("| eps | kernel, metric | beta / n (plan) | forecast | formula | width ratio (median) | width ratio (90% of "
                 "coords below) | planned inflation sqrt(n/beta) | "
                 "accuracy (post. mean) | pred. log loss | max R-hat | min bulk ESS | steps | seconds | forecast s |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in res["adult"]:
            L.append(f"| {r['eps']:g} | {r.get('kernel', 'langevin')}, {'adapted' if r.get('adapted') else 'planned'} | "
                     f"{r['beta_over_n']:.3g} | {r['forecast_beta_over_n']:.3g} | "
                     f"{r['formula_beta_over_n']:.3g} | {r['width_ratio_median']:.2f} | "
                     f"{r.get('width_ratio_q90', float('nan')):.2f} | "
                     f"{r['interval_inflation_planned']:.2f} | {r['accuracy_posterior_mean']:.4f} | "
                     f"{r['predictive_log_loss']:.4f} | {r['max_rhat']:.3f} | {r['min_ess_bulk']:.0f} | "
                     f"{r['num_steps']} | {r['seconds']:.0f} | {r['forecast_seconds']:.0f} |")
    if res.get("plans"):
        L.append("\nFull Adult (n = 30162, d = 108), plans only (the private X'X/n released, the run's plan made; "
                 "no chain run): the clip (radius sqrt(d)) with the adapted metric and the kinetic kernel (expected "
                 "steps per chain) against no clip (the Python default).\n")
        L.append("| eps | beta / n, clip | formula | inflation sqrt(n / beta), clip | steps per chain, clip | "
                 "forecast wall time (idle machine) | beta / n, no clip | inflation, no clip | steps, no clip |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for r in res["plans"]:
            c, o = r["clip"], r["noclip"]
            L.append(f"| {r['eps']:g} | {c['beta_over_n']:.3g} | {r['formula_beta_over_n']:.3g} | {c['inflation']:.2f} | "
                     f"{c['steps']} | {r['forecast_seconds']:.0f} s | {o['beta_over_n']:.3g} | {o['inflation']:.1f} | "
                     f"{o['steps']} |")
    if res.get("synthetic"):
        L.append("\nSynthetic logistic, d = 10, eps = 1, prior N(0, 1), ESS 400: beta / n of the plan (= the "
                 "forecast: the clip sets the sensitivity) against the formula mu_path^2 n c / (4 r^2 ESS).\n")
        L.append("| n | beta / n (plan) | formula | width ratio | max R-hat | min bulk ESS | seconds |")
        L.append("|---|---|---|---|---|---|---|")
        for r in res["synthetic"]:
            L.append(f"| {r['n']} | {r.get('beta_over_n', r['forecast_beta_over_n']):.3g} | "
                     f"{r['formula_beta_over_n']:.3g} | {r.get('width_ratio_median', float('nan')):.2f} | "
                     f"{r.get('max_rhat', float('nan')):.3f} | {r.get('min_ess_bulk', float('nan')):.0f} | "
                     f"{r.get('seconds', float('nan')):.0f} |")
    return "\n".join(L) + "\n"


BEGIN = "<!-- posterior_levers: begin -->"
END = "<!-- posterior_levers: end -->"


def kept_block(docs_path: str) -> str:
    """The levers section of an existing docs/results.md (written by this module's ``--docs``),
    so that ``python -m benchmarks`` re-rendering the page keeps it; "" if there is none."""
    if not __import__("os").path.exists(docs_path):
        return ""
    text = open(docs_path).read()
    if BEGIN not in text or END not in text:
        return ""
    return "\n" + text[text.index(BEGIN):text.index(END) + len(END)] + "\n"


def write_docs(docs_path: str, section: str) -> None:
    """Insert or replace the levers section in docs/results.md (between the two markers)."""
    text = open(docs_path).read() if __import__("os").path.exists(docs_path) else "# Benchmark results\n"
    block = f"{BEGIN}\n{section.rstrip()}\n{END}"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    with open(docs_path, "w") as f:
        f.write(text)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.posterior_levers")
    p.add_argument("--n-sub", type=int, default=None, help="subsample Adult's training rows (prototyping)")
    p.add_argument("--eps", type=float, nargs="*", default=[0.5, 1.0, 2.0, 4.0, 8.0])
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--plans", action="store_true", help="plans only on the full Adult training set, every eps")
    p.add_argument("--sweep", action="store_true", help="clip radius sweep on synthetic data (n = 1e4, d = 10)")
    p.add_argument("--kernel", choices=["langevin", "underdamped"], default="underdamped",
                   help="the chains' kernel (default underdamped: the demo's)")
    p.add_argument("--no-adapt", action="store_true", help="keep the planned metric (the metric clip without adaptation)")
    p.add_argument("--json", default=None)
    p.add_argument("--md", default=None)
    a = p.parse_args(argv)
    res = {"command": "python -m benchmarks.posterior_levers " + " ".join(argv or __import__("sys").argv[1:]),
           "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    if a.plans:
        res["plans"] = plan_table(a.eps)
    elif a.eps:
        res["adult"] = adult(a.eps, a.n_sub, kernel=a.kernel, adapt_metric=False if a.no_adapt else None)
    if a.synthetic:
        res["synthetic"] = synthetic(kernel=a.kernel)
    if a.sweep:
        res["sweep"] = clip_sweep()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=float)
    md = markdown(res)
    print(md)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)


if __name__ == "__main__":
    main()
