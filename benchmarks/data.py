"""Your own data: Adult through the shipped schema (raw files) vs the embedded pipeline.

Same run, same plan settings, same seeds: load time, non-private test accuracy, private test
accuracy and mixing (max R-hat, min bulk ESS of the released draws) at (eps, 1e-5); and a private
schema draft of the raw training file (OpenDP) with its time and the share of rows its bounds
clip (a count over public Adult data, for the benchmark only).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

DELTA = 1e-5


def _private(X, y, Xt, yt, eps, seed):
    from dp_infer import fit, losses
    from dp_infer.infer import nonprivate
    from dp_infer.diagnostics import check_mixing, to_datatree

    t0 = time.perf_counter()
    run = fit(losses.logistic(row_norm=1.0), X, y, eps=eps, delta=DELTA, horizon=1.0, num_chains=2,
              seed=seed, progress_bar=False)
    secs = time.perf_counter() - t0
    rep = run.report()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mix = check_mixing(to_datatree({"theta": run.draws()}, rep), rep)
    return {"acc": nonprivate.accuracy(run.estimate(), Xt, yt), "rhat": float(mix.max_rhat),
            "ess": float(mix.min_ess_bulk), "seconds": secs, "route": run.plan.route}


def run(quick: bool, log=print):
    from dp_infer import losses
    from dp_infer.infer import nonprivate
    from dp_infer.datasets import load_adult
    from dp_infer.schema import FeatureMap
    from dp_infer.schema.adult import ADULT_COLUMNS, load_adult_raw
    from dp_infer.schema.draft import draft_private

    t0 = time.perf_counter()
    emb = load_adult()
    t_emb = time.perf_counter() - t0
    t0 = time.perf_counter()
    sch = load_adult_raw()
    t_sch = time.perf_counter() - t0
    log(f"  [data] load: embedded {t_emb:.2f} s, schema route {t_sch:.2f} s")
    routes = {"embedded (complete one-hot)": (emb.X_train, emb.y_train, emb.X_test, emb.y_test),
              "schema (identifiable)": (sch.X_train, sch.y_train, sch.X_test, sch.y_test)}
    nonpriv = {}
    for name, (X, y, Xt, yt) in routes.items():
        th, _, _ = nonprivate.minimize_loss(losses.logistic(1.0), X, y)
        nonpriv[name] = nonprivate.accuracy(th, Xt, yt)
        lam = np.linalg.eigvalsh(X.T @ X / X.shape[0])
        nonpriv[name + " flat"] = int((lam < 1e-10).sum())  # directions no training row moves
    eps_list = [1.0] if quick else [0.5, 1.0, 2.0]
    seeds = [0, 1, 2] if quick else [0, 1, 2, 3, 4]
    rows = []
    for eps in eps_list:
        for name, (X, y, Xt, yt) in routes.items():
            rs = [_private(X, y, Xt, yt, eps, s) for s in seeds]
            acc = np.array([r["acc"] for r in rs])
            row = {"route": name, "eps": eps, "acc_mean": float(acc.mean()), "acc_sd": float(acc.std(ddof=1)),
                   "rhat_median": float(np.median([r["rhat"] for r in rs])),
                   "ess_median": float(np.median([r["ess"] for r in rs])),
                   "seconds": float(np.mean([r["seconds"] for r in rs])), "plan_route": rs[0]["route"],
                   "dim": int(X.shape[1])}
            rows.append(row)
            log(f"  [data] eps={eps:g} {name}: acc {row['acc_mean']:.4f} ± {row['acc_sd']:.4f}, "
                f"max R-hat (median over seeds) {row['rhat_median']:.2f}, min bulk ESS {row['ess_median']:.1f}")
    from importlib import resources

    raw = resources.files("dp_infer.data.adult").joinpath("adult.data.gz")
    with resources.as_file(raw) as p:
        t0 = time.perf_counter()
        dr = draft_private(p, "income", eps=1.0, delta=1e-6, header=False, names=ADULT_COLUMNS, comment="|")
        t_draft = time.perf_counter() - t0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            enc = FeatureMap(dr.schema).transform(p)
    draft = {"eps": 1.0, "delta": 1e-6, "seconds": t_draft, "columns": len(dr.schema.columns),
             "fraction_rows_clipped": enc.report.fraction_rows_clipped, "dim": FeatureMap(dr.schema).dim}
    log(f"  [data] private draft (eps 1): {t_draft:.1f} s, {draft['columns']} columns, "
        f"{100 * draft['fraction_rows_clipped']:.1f}% of rows clipped by its bounds")
    return {"load_s": {"embedded": t_emb, "schema": t_sch}, "nonprivate": nonpriv, "rows": rows,
            "seeds": seeds, "delta": DELTA, "draft": draft}
