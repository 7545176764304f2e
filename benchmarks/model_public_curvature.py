"""A NumPyro model's interval release with ``J`` from PUBLIC features (issue 37): the Adult model and coverage.

``python -m benchmarks.model_public_curvature --adult [--eps 1] [--seed 0] [--clip-norm 8] [--json PATH]``:
the Adult logistic model written in NumPyro (the demo's table: UCI Adult through the shipped schema, 30,162
training rows, d = 100, prior N(0, 10^2) per coefficient, the demo's prior precision 0.01), run through
``fit(model=..., target="posterior", preconditioner="fisher", interval_curvature="public", X_public=...)``
with the features of Adult's public test file declared public (their labels unused). Against the
non-private Laplace posterior under the same prior (computed here non-privately, for the comparison only):
the issue's Adult targets (the share of the non-private 90% intervals' determined coefficients these
determine, their signs, the median width there), coverage of the non-private MAP, the flags, the wall time.
``--curvature private`` runs the same model with the released ``J`` (at eps = 1 no release: its signal to
noise is below the rule).

``python -m benchmarks.model_public_curvature --adult-forecast``: the same model's plan and interval forecast
read before the charge (``dp_infer.forecast_model_posterior``; nothing charged, no run), at the prior's centre
and at the MAP of Adult's public test file (``forecast_at``: that file's labels declared public too), to set
beside the width and typical sd the ``--adult`` runs measure.

``python -m benchmarks.model_public_curvature --coverage 50 [--design logistic_small] [--start 0]``: coverage
of a known truth by the same kind of model (a logistic NumPyro model, prior N(0, 10^2)) on
:mod:`benchmarks.intervals`'s logistic designs (eps 1, ess 400, clip_norm 10 in the prior-whitened metric:
the prior sd times the rows' norm bound 1, so the clip never binds and the estimand is the truth; public
rows: n feature rows of the same design drawn with seed 50,000 + s; run seed 1000 + s), per class of
coordinate with its binomial se, against the non-private Laplace posterior under the same prior. The
loss path's figures on the same designs come from ``python -m benchmarks.public_curvature --adult-shaped N
--design D``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

from benchmarks.public_curvature import Z90, intervals_against_nonprivate, nonprivate_laplace
from ._common import report_result

PRIOR = 0.01  # prior precision: N(0, 100 I), the demo's


def logistic_model(prior_sd: float):
    """A NumPyro logistic regression with independent N(0, prior_sd^2) coefficients."""
    import numpyro
    import numpyro.distributions as dist

    def model(X=None, y=None):
        w = numpyro.sample("w", dist.Normal(0.0, prior_sd).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)

    return model


def _accuracy(X, y, theta) -> float:
    return float(np.mean((X @ theta > 0) == (y > 0.5)))


def adult_setup(eps: float = 1.0, clip_norm: float = 8.0, curvature: str = "public"):
    """``(model, X, y, X_test, y_test, options)``: the Adult model's data and the run's options (module doc)."""
    from dp_infer.schema.adult import load_adult_raw

    a = load_adult_raw()
    X, y = np.asarray(a.X_train, dtype=np.float64), np.asarray(a.y_train, dtype=np.float64)
    Xt, yt = np.asarray(a.X_test, dtype=np.float64), np.asarray(a.y_test, dtype=np.float64)
    prior_sd = 1.0 / math.sqrt(PRIOR)
    row_norm = a.feature_map.admissible_rows().max_norm()
    kw = dict(interval_curvature="public", X_public=Xt) if curvature == "public" else {}
    opts = dict(eps=eps, delta=1e-5, clip_norm=clip_norm, smoothness=0.25 * prior_sd ** 2 * row_norm ** 2,
                preconditioner="fisher", kernel="underdamped", ess=400, progress_bar=False, **kw)
    return logistic_model(prior_sd), X, y, Xt, yt, opts


def adult_forecast(eps: float = 1.0, clip_norm: float = 8.0) -> dict:
    """The Adult model's interval forecast before the charge (:func:`dp_infer.forecast_model_posterior`, nothing
    charged, no run): at the prior's centre (the default, a floor) and at the MAP of Adult's public test file
    (its labels as well as its features declared public: ``forecast_at``, a public guess of the estimate)."""
    import dp_infer

    model, X, y, Xt, yt, opts = adult_setup(eps, clip_norm)
    t0 = time.time()
    centre = dp_infer.forecast_model_posterior(model, X, y, **opts)
    t_pub = nonprivate_laplace(Xt, yt, PRIOR)[0]
    at = dp_infer.forecast_model_posterior(model, X, y, forecast_at={"w": t_pub}, **opts)
    return {"eps": eps, "clip_norm": clip_norm, "n": int(X.shape[0]), "public_rows": int(Xt.shape[0]),
            "seconds": time.time() - t0, "eps_charged": 0.0,
            "prior_centre": {"width_ratio": centre.interval_width, "typical_sd": centre.interval_typical_sd},
            "public_test_map": {"width_ratio": at.interval_width, "typical_sd": at.interval_typical_sd},
            "explain_at_public_map": at.explain()}


def adult_model(eps: float = 1.0, seed: int = 0, clip_norm: float = 8.0, curvature: str = "public",
                save: str | None = None) -> dict:
    import dp_infer

    model, X, y, Xt, yt, opts = adult_setup(eps, clip_norm, curvature)
    n, d = X.shape
    t0 = time.time()
    run = dp_infer.fit(model=model, X=X, y=y, target="posterior", seed=seed, **opts)
    secs = time.time() - t0
    if save:
        run.save(save)
    out = {"eps": eps, "seed": seed, "n": n, "d": d, "clip_norm": clip_norm, "curvature": curvature,
           "public_rows": int(Xt.shape[0]) if curvature == "public" else 0, "seconds": secs,
           "beta_over_n": run.plan.beta / n, "eps_charged": run.plan.eps,
           **run.achieved_mixing()}
    rel = run.report_extras.get("interval_release")
    if rel is None:
        out.update(release_made=False, skipped=run.report_extras.get("interval_release_skipped"))
        return out
    iv = run.intervals(0.9)
    t, sd_np = nonprivate_laplace(X, y, PRIOR)
    ratio = iv.sd / sd_np
    np_excl = np.abs(t) > Z90 * sd_np
    contain = (iv.lower <= t) & (t <= iv.upper)
    unflagged = np.array([not f for f in iv.flags])
    figures = intervals_against_nonprivate(iv, t, sd_np)
    out.update(release_made=True, curvature_source=rel.get("curvature_source", "private"), mu_interval=rel["mu"],
               gradient_sd=rel["gradient_sd"], label_draws=rel.get("label_draws"),
               release_metric=rel.get("release_metric", "clipped"), rho=rel.get("rho"),
               predicted_width_ratio=rel.get("predicted_width_ratio"),
               **forecast_against_run(run.report_extras.get("interval_forecast"), iv.sd, ratio),
               np_exclude_zero=int(np_excl.sum()), determined=int(iv.determined.sum()),
               determined_share_of_np=figures["share_determined"], determined_signs_right=figures["signs_right"],
               median_width_ratio_np_determined=figures["median_width_over_np_sd"],
               median_width_ratio=float(np.median(ratio)), median_width_ratio_unflagged=float(
                   np.median(ratio[unflagged])) if unflagged.any() else None,
               contain_map=int(contain.sum()), contain_map_unflagged=int(contain[unflagged].sum()),
               unflagged=int(unflagged.sum()),
               flag_kinds={k: int(sum(1 for f in iv.flags if f.startswith(k)))
                           for k in ("prior", "long step", "unresolved", "mixing")},
               run_estimate_width_ratio_unflagged=float(np.median(iv.width_ratio[unflagged]))
               if unflagged.any() else None,
               test_accuracy_interval_centre=_accuracy(Xt, yt, iv.centre),
               test_accuracy_posterior_mean=_accuracy(Xt, yt, run.draws().reshape(-1, d).mean(axis=0)),
               test_accuracy_nonprivate_map=_accuracy(Xt, yt, t), method=iv.method)
    if rel.get("release_metric") == "weighted":  # the intervals' own estimand: the weighted MAP on these rows
        tw = nonprivate_laplace(X, y, PRIOR, weights=weighted_release_weights(X, rel))[0]
        inside = (iv.lower <= tw) & (tw <= iv.upper)
        out.update(contain_weighted_map=int(inside.sum()),
                   contain_weighted_map_unflagged=int(inside[unflagged].sum()),
                   median_abs_z_vs_weighted_map_unflagged=float(np.median(np.abs(iv.centre - tw)[unflagged]
                                                                          / iv.sd[unflagged]))
                   if unflagged.any() else None)
    return out


def forecast_against_run(forecast, sd, ratio) -> dict:
    """The plan's interval forecast (made from the public rows before the charge; None without a weighted
    release) beside what the run measured: the median coordinate's interval sd over the non-private one
    (``ratio``, per coordinate) and its interval sd (``sd``, unconstrained units), and forecast / measured."""
    if forecast is None:
        return {}
    width, typical = float(np.median(ratio)), float(np.median(sd))
    return {"forecast_width_ratio": forecast["width_ratio"], "measured_width_ratio": width,
            "forecast_over_measured_width": forecast["width_ratio"] / width,
            "forecast_typical_sd": forecast["typical_sd"], "measured_typical_sd": typical,
            "forecast_over_measured_sd": forecast["typical_sd"] / typical}


def weighted_release_weights(X, rel) -> np.ndarray:
    """A logistic model's weighted release's row weights ``min(1, rho / (max(p, 1 - p) ||chol^T x||))`` at its last
    point (``p`` the model's probability there; ``chol`` maps the release's whitened coordinates to theta, so
    ``||chol^T x||`` is the phi-score's ``||M^T s x||`` per unit residual): the non-private oracle of the weights the
    release computed from each row's every label (:func:`dp_infer.model.weighted_release.row_bounds`)."""
    p = 1.0 / (1.0 + np.exp(-X @ np.asarray(rel["path"][-1], dtype=np.float64)))
    bound = np.maximum(p, 1.0 - p) * np.linalg.norm(X @ np.asarray(rel["chol"], dtype=np.float64), axis=1)
    return np.minimum(1.0, float(rel["rho"]) / np.maximum(bound, 1e-300))


def model_coverage(seeds, design: str = "logistic_small", clip_norm: float = 10.0, log=print) -> dict:
    import dp_infer
    from benchmarks.intervals import DELTA, DESIGNS, coordinate_kinds, design_data

    if DESIGNS[design][0] != "logistic":
        raise ValueError(f"design must be a logistic design, got {design!r}")
    kinds = np.array(coordinate_kinds(design))
    model = logistic_model(1.0 / math.sqrt(PRIOR))
    cov, det, npd, ratio, secs, flagged, fc = [], [], [], [], [], [], []
    for s in seeds:
        X, y, theta = design_data(design, s)
        Xp = design_data(design, 50000 + s)[0]
        t0 = time.time()
        run = dp_infer.fit(model=model, X=X, y=y, target="posterior", eps=DESIGNS[design][3], delta=DELTA,
                           clip_norm=clip_norm, ess=400, seed=1000 + s, progress_bar=False,
                           interval_curvature="public", X_public=Xp)
        secs.append(time.time() - t0)
        iv = run.intervals(0.9)
        t, sd_np = nonprivate_laplace(X, y, PRIOR)
        cov.append((iv.lower <= theta) & (theta <= iv.upper))
        det.append(iv.determined)
        npd.append(np.abs(t) > Z90 * sd_np)
        ratio.append(iv.sd / sd_np)
        flagged.append([bool(f) for f in iv.flags])
        fc.append(forecast_against_run(run.report_extras.get("interval_forecast"), iv.sd, ratio[-1]))
        log(json.dumps({"seed": s, "covered": cov[-1].tolist(), "determined": det[-1].tolist(),
                        "np_determined": npd[-1].tolist(), "width_ratio": ratio[-1].tolist(),
                        "flags": list(iv.flags), "seconds": secs[-1], **fc[-1]}))
    cov, det, npd, ratio, flagged = map(np.array, (cov, det, npd, ratio, flagged))

    def rate(c):
        p = float(c.mean())
        return {"coverage": p, "se": float(np.sqrt(p * (1 - p) / c.size)), "intervals": int(c.size)}

    return {"design": design, "datasets": len(seeds), "seeds": list(seeds), "clip_norm": clip_norm, "all": rate(cov),
            "unflagged": rate(cov[~flagged]) if (~flagged).any() else None,
            "by_kind": {k: dict(rate(cov[:, kinds == k]), median_width_ratio=float(np.median(ratio[:, kinds == k])))
                        for k in dict.fromkeys(kinds)},
            "median_width_ratio": float(np.median(ratio)),
            "coverage_se_over_datasets": float(cov.mean(axis=1).std(ddof=1) / np.sqrt(len(seeds)))
            if len(seeds) > 1 else None,
            "determined_share_of_np": float((det & npd).sum() / max(npd.sum(), 1)),
            "flagged_share": float(flagged.mean()), "mean_seconds_per_run": float(np.mean(secs)),
            **forecast_summary(fc)}


def forecast_summary(rows) -> dict:
    """Over datasets: the median and range of forecast / measured (width ratio and typical sd), and the share
    of datasets where each is within 25% (the issue's target: 0.75 <= forecast / measured <= 1.25)."""
    rows = [r for r in rows if r]
    if not rows:
        return {}
    out = {}
    for k in ("width", "sd"):
        q = np.array([r[f"forecast_over_measured_{k}"] for r in rows])
        out[f"forecast_over_measured_{k}"] = {"median": float(np.median(q)), "min": float(q.min()),
                                              "max": float(q.max()),
                                              "within_25_percent": float(np.mean((q >= 0.75) & (q <= 1.25)))}
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.model_public_curvature")
    p.add_argument("--adult", action="store_true", help="the Adult model written in NumPyro (module doc)")
    p.add_argument("--adult-forecast", action="store_true",
                   help="the Adult model's interval forecast only (nothing charged, no run; module doc)")
    p.add_argument("--coverage", type=int, metavar="DATASETS", help="coverage of a known truth over this many datasets")
    p.add_argument("--start", type=int, default=0, help="with --coverage: the first dataset's seed")
    p.add_argument("--design", default="logistic_small")
    p.add_argument("--eps", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--clip-norm", type=float, default=None)
    p.add_argument("--curvature", default="public", choices=("public", "private"))
    p.add_argument("--json")
    p.add_argument("--save", help="with --adult: save the run there (PrivateRun.save)")
    a = p.parse_args(argv)
    if not (a.adult or a.coverage or a.adult_forecast):
        p.error("give --adult, --adult-forecast or --coverage N")
    if a.adult_forecast:
        r = adult_forecast(a.eps, 8.0 if a.clip_norm is None else a.clip_norm)
    elif a.adult:
        r = adult_model(a.eps, a.seed, 8.0 if a.clip_norm is None else a.clip_norm, a.curvature, a.save)
    else:
        r = model_coverage(range(a.start, a.start + a.coverage), a.design, 10.0 if a.clip_norm is None else a.clip_norm,
                           log=lambda s: print(s, file=sys.stderr, flush=True))
    report_result("model_public_curvature", argv, r, a.json)


if __name__ == "__main__":
    main()
