"""Coverage and width of the posterior mode's intervals for theta (issue 37), on data with a known truth.

``python -m benchmarks.intervals [--datasets N] [--designs logistic_small huber_small ...] [--md PATH]``

Each dataset is drawn afresh from a known parameter; each run is the library's default posterior
mode (clipped, adapted metric, the interval release) at the stated eps. Per design it reports, pooled
over coordinates and datasets: the coverage of the truth by the run's 90% intervals
(:meth:`dp_infer.infer.run.PrivateRun.intervals`) with its Monte-Carlo error
``sqrt(p (1 - p) / N)``, the same for the tempered draws' 90% credible intervals (the anchor a user
read until now), and the median width over the non-private reference's (the MLE's sandwich sd for
Huber, the untempered Laplace sd for logistic: large-n stand-ins for the non-private posterior).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

DESIGNS = {
    # name: (loss, n, d, eps)
    "logistic_small": ("logistic", 5000, 5, 1.0),
    "logistic_10": ("logistic", 5000, 10, 1.0),
    "logistic_2k": ("logistic", 2000, 3, 1.0),
    "huber_small": ("huber", 5000, 5, 1.0),
}


def _data(kind, n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    theta = np.linspace(-2.0, 2.0, d) if d > 1 else np.array([1.0])
    if kind == "logistic":
        y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-X @ theta))).astype(float)
    else:
        y = np.clip(X @ theta + 0.3 * rng.standard_t(5, size=n), -5.0, 5.0)
    return X, y, theta


def _reference_sd(kind, X, y, prior):
    """The non-private reference: the untempered posterior's Laplace sd (logistic) or the Huber
    M-estimator's sandwich sd (huber), at the non-private estimate."""
    from scipy.optimize import minimize

    n, d = X.shape
    if kind == "logistic":
        def f(t):
            z = X @ t
            return np.sum(np.logaddexp(0, z) - y * z) + 0.5 * prior * t @ t

        t = minimize(f, np.zeros(d), method="BFGS").x
        s = 1 / (1 + np.exp(-X @ t))
        H = (X * (s * (1 - s))[:, None]).T @ X + prior * np.eye(d)
        return np.sqrt(np.diag(np.linalg.inv(H)))

    def f(t):
        r = X @ t - y
        a = np.abs(r)
        return np.sum(np.where(a <= 1.0, 0.5 * r * r, a - 0.5))

    t = minimize(f, np.zeros(d), method="BFGS").x
    r = X @ t - y
    psi, dpsi = np.clip(r, -1, 1), (np.abs(r) <= 1).astype(float)
    H = (X * dpsi[:, None]).T @ X
    J = (X * (psi ** 2)[:, None]).T @ X
    Hi = np.linalg.inv(H)
    return np.sqrt(np.diag(Hi @ J @ Hi))


def one(args):
    design, seed = args
    import jax

    jax.config.update("jax_platforms", "cpu")
    from dp_infer import losses
    from dp_infer.infer.posterior import fit_posterior

    kind, n, d, eps = DESIGNS[design]
    X, y, theta = _data(kind, n, d, seed)
    prior = 0.01
    loss = losses.logistic(row_norm=1.0) if kind == "logistic" else losses.huber(1.0, row_norm=1.0)
    t0 = time.time()
    run = fit_posterior(loss, X, y, eps=eps, delta=1e-5, prior_precision=prior, ess=400, seed=1000 + seed,
                        progress_bar=False)
    secs = time.time() - t0
    iv = run.intervals(0.9)
    draws = run.draws().reshape(-1, d)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    ref = _reference_sd(kind, X, y, prior)
    return {"design": design, "seed": seed, "covered": ((iv.lower <= theta) & (theta <= iv.upper)).tolist(),
            "tempered_covered": ((lo <= theta) & (theta <= hi)).tolist(),
            "width_ratio": (iv.sd / ref).tolist(), "tempered_ratio": (draws.std(axis=0) / ref).tolist(),
            "z": ((iv.centre - theta) / iv.sd).tolist(), "flags": list(iv.flags), "seconds": secs,
            "beta_over_n": run.plan.beta / n}


def summarise(rows):
    out = {}
    for design in sorted({r["design"] for r in rows}):
        rs = [r for r in rows if r["design"] == design]
        cov = np.concatenate([r["covered"] for r in rs]).astype(float)
        tcov = np.concatenate([r["tempered_covered"] for r in rs]).astype(float)
        p, tp, N = cov.mean(), tcov.mean(), cov.size
        out[design] = {"datasets": len(rs), "coordinates": N, "coverage": p, "coverage_mc_se": math.sqrt(p * (1 - p) / N),
                       "tempered_coverage": tp, "tempered_mc_se": math.sqrt(tp * (1 - tp) / N),
                       "median_width_ratio": float(np.median(np.concatenate([r["width_ratio"] for r in rs]))),
                       "median_tempered_ratio": float(np.median(np.concatenate([r["tempered_ratio"] for r in rs]))),
                       "flagged": int(sum(1 for r in rs for f in r["flags"] if f)),
                       "median_seconds": float(np.median([r["seconds"] for r in rs])),
                       "beta_over_n": float(np.median([r["beta_over_n"] for r in rs]))}
    return out


def to_markdown(summary, command):
    lines = [f"Command: `{command}`", "",
             "| design (loss, n, d, eps) | datasets x coords | coverage at 0.90 (+- MC se) | tempered draws' coverage "
             "| median width / non-private | tempered sd / non-private | flagged | beta / n | s per run |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, s in summary.items():
        k, n, d, eps = DESIGNS[name]
        lines.append(f"| {name} ({k}, {n}, {d}, {eps:g}) | {s['datasets']} x {s['coordinates'] // s['datasets']} | "
                     f"{s['coverage']:.3f} +- {s['coverage_mc_se']:.3f} | {s['tempered_coverage']:.3f} +- "
                     f"{s['tempered_mc_se']:.3f} | {s['median_width_ratio']:.2f} | {s['median_tempered_ratio']:.1f} | "
                     f"{s['flagged']} | {s['beta_over_n']:.4f} | {s['median_seconds']:.0f} |")
    return "\n".join(lines)


def adult(eps: float = 1.0, seed: int = 7) -> dict:
    """Adult at (eps, 1e-5) with the demo's defaults: the run's intervals against the non-private posterior
    under the same prior (its Laplace approximation at the MAP: n = 30k, d = 100, where BvM holds)."""
    from scipy.optimize import minimize

    from dp_infer import losses
    from dp_infer.cli.demo import DEMO_PRIOR_PRECISION
    from dp_infer.infer.posterior import fit_posterior
    from dp_infer.schema.adult import load_adult_raw

    a = load_adult_raw()
    rows = a.feature_map.admissible_rows()
    X, y = np.asarray(a.X_train, dtype=np.float64), np.asarray(a.y_train, dtype=np.float64)
    n, d = X.shape
    lam = DEMO_PRIOR_PRECISION
    t0 = time.time()
    run = fit_posterior(losses.logistic(row_norm=rows.max_norm()), X, y, eps=eps, delta=1e-5, prior_precision=lam,
                        rows=rows, seed=seed, progress_bar=False, ess=400, num_draws=400)
    secs = time.time() - t0
    try:
        iv = run.intervals(0.9)
    except ValueError as e:
        return {"eps": eps, "n": n, "d": d, "skipped": str(e), "beta_over_n": run.plan.beta / n, "seconds": secs}

    def f(t):
        z = X @ t
        return np.sum(np.logaddexp(0, z) - y * z) + 0.5 * lam * t @ t

    def g(t):
        return X.T @ (1 / (1 + np.exp(-X @ t)) - y) + lam * t

    t = minimize(f, np.zeros(d), jac=g, method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-8}).x
    s = 1 / (1 + np.exp(-X @ t))
    sd_np = np.sqrt(np.diag(np.linalg.inv((X * (s * (1 - s))[:, None]).T @ X + lam * np.eye(d))))
    z90 = 1.6448536269514722
    np_det = (np.abs(t) > z90 * sd_np)
    ours = iv.determined
    both = np_det & ours
    signs = np.sign(iv.centre[both]) == np.sign(t[both])
    ratio = iv.sd / sd_np
    Xt, yt = np.asarray(a.X_test, dtype=np.float64), np.asarray(a.y_test, dtype=np.float64) > 0.5
    return {"eps": eps, "n": n, "d": d, "np_determined": int(np_det.sum()), "determined": int(ours.sum()),
            "determined_of_np": int(both.sum()), "share_of_np": float(both.sum() / max(np_det.sum(), 1)),
            "signs_right": float(signs.mean()) if signs.size else float("nan"),
            "median_width_on_np_determined": float(np.median(ratio[np_det])),
            "median_width_all": float(np.median(ratio)),
            "predicted_width_median": float(np.median(iv.width_ratio[np_det])),
            "median_abs_z_vs_map": float(np.median(np.abs(iv.centre - t) / np.hypot(iv.sd, sd_np))),
            "flagged": int(sum(1 for fl in iv.flags if fl)),
            "accuracy_centre": float(np.mean(((Xt @ iv.centre) > 0) == yt)),
            "accuracy_tempered_mean": float(np.mean(((Xt @ run.posterior_mean()) > 0) == yt)),
            "accuracy_nonprivate": float(np.mean(((Xt @ t) > 0) == yt)),
            "beta_over_n": run.plan.beta / n, "seconds": secs,
            "per_coordinate": {"name": list(a.feature_names), "measured_ratio": ratio.tolist(),
                               "predicted_ratio": iv.width_ratio.tolist()}}


def adult_markdown(rows) -> str:
    lines = ["| eps | NP determined | ours determined (of NP's) | share | signs right | median width / NP (on NP's) "
             "| predicted | median |centre - MAP| / combined sd | flagged | accuracy: centre / tempered mean / NP "
             "| beta / n | s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['eps']:g} | no interval release: {r['skipped'].split(': ', 1)[-1]} |" + " |" * 10)
            continue
        lines.append(f"| {r['eps']:g} | {r['np_determined']} of {r['d']} | {r['determined']} ({r['determined_of_np']}) | "
                     f"{r['share_of_np']:.2f} | {r['signs_right']:.3f} | {r['median_width_on_np_determined']:.2f} | "
                     f"{r['predicted_width_median']:.2f} | {r['median_abs_z_vs_map']:.2f} | {r['flagged']} | "
                     f"{r['accuracy_centre']:.4f} / {r['accuracy_tempered_mean']:.4f} / {r['accuracy_nonprivate']:.4f} | "
                     f"{r['beta_over_n']:.5f} | {r['seconds']:.0f} |")
    return "\n".join(lines)


def main(argv=None):
    import sys

    p = argparse.ArgumentParser(prog="python -m benchmarks.intervals")
    p.add_argument("--datasets", type=int, default=50)
    p.add_argument("--designs", nargs="*", default=list(DESIGNS), choices=list(DESIGNS))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--md")
    p.add_argument("--json")
    p.add_argument("--adult", nargs="*", type=float, metavar="EPS",
                   help="also Adult at these eps (default 1) against the non-private posterior")
    a = p.parse_args(argv)
    if a.adult is not None:
        res = [adult(e) for e in (a.adult or [1.0])]
        print(adult_markdown(res))
        if a.json:
            json.dump(res, open(a.json + ".adult.json", "w"), indent=1)
        if a.datasets == 0:
            return
    jobs = [(dsg, s) for dsg in a.designs for s in range(a.datasets)]
    with ProcessPoolExecutor(a.workers) as ex:
        rows = list(ex.map(one, jobs))
    summary = summarise(rows)
    md = to_markdown(summary, "python -m benchmarks.intervals " + " ".join(sys.argv[1:] if argv is None else argv))
    print(md)
    if a.md:
        open(a.md, "w").write(md + "\n")
    if a.json:
        json.dump({"summary": summary, "rows": rows}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
