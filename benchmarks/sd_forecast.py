"""The forecast of the tempered draws' sd against what the run then measures (issue 37, part 4: "forecast ... the
typical sd before anything is charged, within 25% of what the run then measures").

For each case a default posterior run at (1, 1e-5) with prior N(0, 100 I) (precision 0.01) is made, and the
median over coordinates of the draws' sd over the prior sd (what :mod:`dp_infer.diagnostics.prior_dominance`
reports) is compared with the forecast made before it from public inputs only
(:func:`dp_infer.forecast_posterior`): with each coordinate's feature mean square from public rows where the case
has them, and from the row norm spread evenly (``R^2 / d``) otherwise; beside it the Gaussian arithmetic at the
plan's constant curvature ``kappa / 2`` (the forecast before 2026-11-30). Also the number of coordinates forecast
and measured prior-dominated (sd at least 0.9 of the prior's), and where the run makes an interval release, the
intervals' forecast width (``forecast.interval_width``) against the measured median width over the non-private
posterior's on the coordinates the intervals do not flag. On the Huber design the width is forecast with the
residuals' sd declared (``residual_scale``, the design's own), and the forecast without it is shown beside.

Cases: the coverage benchmark's simulated designs (:mod:`benchmarks.intervals`; public rows: another n rows of
the design, at most 15,000, seed 50,000), Adult through its schema at 5,000 random rows (seeds 0, 1; no public rows, as a user's
small table) and all 30,162 rows, with the demo's public curvature (the test file's features public) and with the
private curvature. Command: ``python -m benchmarks.sd_forecast`` (a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

PRIOR = 0.01
SIM_DESIGNS = ("logistic_small", "logistic_2k", "logistic_d20", "huber_small", "adult_shaped")
#: the sd of the Huber design's residuals, 0.3 t5 (:mod:`benchmarks.intervals`): 0.3 sqrt(5 / 3)
HUBER_RESIDUAL_SD = 0.3 * math.sqrt(5.0 / 3.0)


def _measure(loss, X, y, *, X_public=None, seed=1000, residual_scale=None, **fit_kw) -> dict:
    import dp_infer

    n, d = X.shape
    fc_declared = (dp_infer.forecast_posterior(loss, n, d, eps=1.0, delta=1e-5, prior_precision=PRIOR,
                                               residual_scale=residual_scale, **fit_kw)
                   if residual_scale is not None else None)
    fc_even = dp_infer.forecast_posterior(loss, n, d, eps=1.0, delta=1e-5, prior_precision=PRIOR, **fit_kw)
    fc_pub = (dp_infer.forecast_posterior(loss, n, d, eps=1.0, delta=1e-5, prior_precision=PRIOR, X_public=X_public,
                                          **fit_kw) if X_public is not None else None)
    t0 = time.time()
    run = dp_infer.fit(loss, X, y, eps=1.0, delta=1e-5, target="posterior", prior_precision=PRIOR, seed=seed,
                       progress_bar=False, X_public=X_public if fit_kw.get("interval_curvature") == "public" else None,
                       **fit_kw)
    seconds = time.time() - t0
    ratio = run.draws().reshape(-1, d).std(axis=0) * math.sqrt(PRIOR)
    kappa_p = run.plan.posterior.step.preconditioner_curvature
    gaussian = math.sqrt(PRIOR / (PRIOR + run.plan.beta * kappa_p * _even_mean_square(loss, d)))
    width_undeclared = (fc_pub or fc_even).interval_width
    width, width_fc = None, (fc_declared or fc_pub or fc_even).interval_width
    if width_fc is not None:  # the run made an interval release: its width on the coordinates it does not flag
        from benchmarks.intervals import reference_sd

        iv = run.intervals(0.9)
        ref = reference_sd("huber" if loss.behaviour.name == "huber" else "logistic", X, y, PRIOR)
        plain = np.array([not f for f in iv.flags])
        width = float(np.median((iv.sd / ref)[plain])) if plain.any() else None
    return {"n": n, "d": d, "beta_over_n": run.plan.beta / n, "measured": float(np.median(ratio)),
            "measured_count": int(np.sum(ratio >= 0.9)), "even": fc_even.sd_ratio_to_prior,
            "even_count": fc_even.prior_dominated_count,
            "public": None if fc_pub is None else fc_pub.sd_ratio_to_prior,
            "public_count": None if fc_pub is None else fc_pub.prior_dominated_count,
            "gaussian": gaussian, "width": width, "width_forecast": width_fc, "residual_scale": residual_scale,
            "width_forecast_undeclared": width_undeclared,
            "same_beta": abs(fc_even.beta / run.plan.beta - 1) < 1e-9, "seconds": seconds}


def _even_mean_square(loss, d: int) -> float:
    from dp_infer.routes.preconditioning import second_moment_row_bound

    return second_moment_row_bound(loss, None) / d


def simulated(design: str) -> dict:
    from dp_infer import losses
    from benchmarks.intervals import DESIGNS, design_data

    kind, n, d, _ = DESIGNS[design]
    X, y, _ = design_data(design, 0)
    Xp, _, _ = design_data(design, 50_000)
    loss = losses.logistic(row_norm=1.0) if kind == "logistic" else losses.huber(1.0, row_norm=1.0)
    # Huber: the residuals' sd declared as a user who knows the noise would (the design's t5 errors of scale 0.3)
    scale = HUBER_RESIDUAL_SD if kind == "huber" else None
    return {"case": f"{design} (simulated)", **_measure(loss, X, y, X_public=Xp[:15_000], residual_scale=scale)}


def adult(n: int | None, seed: int = 0, curvature: str = "private") -> dict:
    from dp_infer import losses
    from dp_infer.schema.adult import load_adult_raw

    a = load_adult_raw()
    X, y = a.X_train, a.y_train
    if n is not None:
        idx = np.random.default_rng(seed).choice(X.shape[0], n, replace=False)
        X, y = X[idx], y[idx]
    loss = losses.logistic(row_norm=a.feature_map.row_norm)
    public = None if n is not None else a.X_test  # a small table: no public rows, as a user's own
    name = (f"Adult, {n} random rows (seed {seed})" if n is not None
            else f"Adult, all rows, {curvature} curvature")
    return {"case": name, **_measure(loss, X, y, X_public=public, seed=seed, interval_curvature=curvature)}


def to_markdown(rows) -> str:
    out = ["| case | n | d | beta / n | measured median sd / prior sd | forecast: public rows | "
           "forecast: even spread | Gaussian arithmetic (before) | forecast / measured (the forecast shown) | "
           "prior-dominated: measured / forecast |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        shown = r["public"] if r["public"] is not None else r["even"]
        count = r["public_count"] if r["public_count"] is not None else r["even_count"]
        pub = "--" if r["public"] is None else f"{r['public']:.3f}"
        out.append(f"| {r['case']} | {r['n']} | {r['d']} | {r['beta_over_n']:.3g} | {r['measured']:.3f} | {pub} | "
                   f"{r['even']:.3f} | {r['gaussian']:.3f} | {shown / r['measured']:.2f} | "
                   f"{r['measured_count']} / {count} |")
    out += ["", "Interval width over the non-private posterior's (the run's intervals on the coordinates they do not "
            "flag, median; reference: the untempered posterior's Laplace sd at the MAP, or Huber's sandwich):", "",
            "| case | forecast width | measured width | forecast / measured | without the declared residual scale |",
            "|---|---|---|---|---|"]
    for r in rows:
        undeclared = ("--" if r.get("residual_scale") is None else
                      f"{r['width_forecast_undeclared']:.2f} ({r['width_forecast_undeclared'] / r['width']:.2f}); "
                      f"declared sd {r['residual_scale']:.3g}" if r["width"] is not None else "--")
        if r["width"] is not None:
            out.append(f"| {r['case']} | {r['width_forecast']:.2f} | {r['width']:.2f} | "
                       f"{r['width_forecast'] / r['width']:.2f} | {undeclared} |")
        else:
            why = "no interval release" if r["width_forecast"] is None else "every coordinate flagged"
            out.append(f"| {r['case']} | -- | -- | {why} | -- |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--designs", nargs="*", default=list(SIM_DESIGNS))
    p.add_argument("--adult-seeds", nargs="*", type=int, default=[0, 1])
    p.add_argument("--no-full-adult", action="store_true")
    a = p.parse_args(argv)
    rows = [simulated(d) for d in a.designs]
    rows += [adult(5000, s) for s in a.adult_seeds]
    if not a.no_full_adult:
        rows += [adult(None, 7, "public"), adult(None, 7, "private")]
    for r in rows:
        assert r["same_beta"], r  # the forecast plans as the run does
    print(to_markdown(rows))


if __name__ == "__main__":
    main()
