"""Adult's interval release with its curvature from PUBLIC features (issue 37): does the demo's run get intervals?

``python -m benchmarks.public_curvature [--eps 1] [--seed 0] [--json PATH]``;
``python -m benchmarks.public_curvature --adult-shaped 16 [--design logistic_d20]``: coverage of a known truth on
the simulated Adult-shaped design (or another logistic design) instead (:func:`adult_shaped_coverage`, about 40 s a
dataset at d = 100);
``python -m benchmarks.public_curvature --noise-check 20 --seed 0``: the release remade with 20 fresh noise
keys from the same draws, its centres' spread against the stated sd (:func:`adult_noise_check`, ~5 min);
``python -m benchmarks.public_curvature --radius-check 12 --seed 0``: the release remade from the same draws at
each of the radius grid's first 12 factors with the same 12 noise keys, the share of the non-private posterior's
determined coefficients it determines (:func:`adult_radius_check`, ~4 min);
``python -m benchmarks.public_curvature --mu-check 12 --seed 0``: the release remade from the same draws at
multiples of its mu (:data:`MU_FACTORS`) with the same 12 noise keys: what budget the 60% target would take
(:func:`adult_mu_check`, ~4 min);
``python -m benchmarks.public_curvature --misses --seed 0``: which of those coefficients the intervals miss, by
column frequency and by the non-private ``|MAP| / sd`` (:func:`adult_misses`, ~1 min).

The demo's setting (:mod:`dp_infer.cli.demo`: UCI Adult through the shipped schema, all 30,162 training
rows, the schema's admissible rows, prior precision :data:`~dp_infer.cli.demo.DEMO_PRIOR_PRECISION`,
:data:`~dp_infer.cli.demo.QUICK_ESS` effective draws, :data:`~dp_infer.cli.demo.QUICK_DRAWS` kept draws
per chain) at (eps, 1e-5), with ``interval_curvature="public"`` and ``X_public`` = the features of
Adult's public test file (the rows the demo already declares public for its forecast; their labels are
not used). Against the non-private Laplace posterior under the same prior (the MAP and the inverse
Hessian there, computed here non-privately for the comparison only) it reports: whether the release was
made, the median and 90th percentile of the intervals' sd over the non-private sd, how many of the 100
intervals contain the non-private MAP, how many exclude 0 against how many non-private 90% intervals
exclude 0, the flagged coordinates, and the wall time of the private run.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ._common import report_result

Z90 = 1.6448536269514722


def nonprivate_laplace(X, y, prior, weights=None):
    """The non-private posterior's Laplace approximation: the MAP and its sds (inverse Hessian). ``weights``:
    per-row weights of the log-likelihood (the interval release's ``min(1, (rho / ||C^T x||)^power)``: then the
    MAP is the intervals' own estimand on these rows, the weighted likelihood's)."""
    from scipy.optimize import minimize

    d = X.shape[1]
    w = np.ones(X.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)

    def f(t):
        z = X @ t
        return np.sum(w * (np.logaddexp(0, z) - y * z)) + 0.5 * prior * t @ t

    def g(t):
        return X.T @ (w * (1 / (1 + np.exp(-X @ t)) - y)) + prior * t

    t = minimize(f, np.zeros(d), jac=g, method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-8}).x
    s = 1 / (1 + np.exp(-X @ t))
    return t, np.sqrt(np.diag(np.linalg.inv((X * (w * s * (1 - s))[:, None]).T @ X + prior * np.eye(d))))


def intervals_against_nonprivate(iv, t, sd) -> dict:
    """Issue 37's figures for one run's intervals ``iv`` (a
    :class:`~dp_infer.diagnostics.released_interval.ParameterIntervals`) against the non-private MAP ``t`` and sds
    ``sd`` under the same prior, every benchmark's one definition: of the coefficients the non-private 90% intervals
    determine (``|t| > 1.645 sd``), the share the run's intervals determine (``iv.determined``: excluding 0 and not
    flagged, what the run's table counts; target >= 0.6); of every coefficient the run determines, the share with the
    non-private MAP's sign (>= 0.95; None where it determines none); the median width over the non-private sd on
    the non-private posterior's determined coefficients (<= 2); how many intervals contain the MAP; how many are
    flagged."""
    det, got = np.abs(t) > Z90 * sd, np.asarray(iv.determined)
    return {"np_determined": int(det.sum()),
            "share_determined": float((got & det).sum() / max(int(det.sum()), 1)),
            "signs_right": float(np.mean(np.sign(iv.centre[got]) == np.sign(t[got]))) if got.any() else None,
            "median_width_over_np_sd": float(np.median((iv.sd / sd)[det])) if det.any() else None,
            "contain_map": int(np.sum((iv.lower <= t) & (t <= iv.upper))), "dim": int(t.size),
            "flagged": int(sum(1 for f in iv.flags if f))}


def adult_demo_run(eps: float, seed: int, curvature: str):
    """The demo's posterior run on Adult (quick plan, the test file's features as ``X_public``):
    ``(adult, X, y, prior precision, run, seconds)``."""
    from dp_infer.cli.demo import DEMO_PRIOR_PRECISION, QUICK_DRAWS, QUICK_ESS
    from dp_infer.infer.posterior import fit_posterior
    from dp_infer.schema.adult import load_adult_raw

    a = load_adult_raw()
    rows = a.feature_map.admissible_rows()
    X, y = np.asarray(a.X_train, dtype=np.float64), np.asarray(a.y_train, dtype=np.float64)
    lam = DEMO_PRIOR_PRECISION
    t0 = time.time()
    run = fit_posterior(demo_loss(a), X, y, eps=eps, delta=1e-5, prior_precision=lam,
                        rows=rows, seed=seed, progress_bar=False, ess=QUICK_ESS, num_draws=QUICK_DRAWS,
                        interval_curvature=curvature, X_public=np.asarray(a.X_test, dtype=np.float64))
    return a, X, y, lam, run, time.time() - t0


def demo_loss(adult):
    """The demo run's loss: logistic, its row norm bound from the schema's admissible rows."""
    from dp_infer import losses

    return losses.logistic(row_norm=adult.feature_map.admissible_rows().max_norm())


def adult_public_curvature(eps: float = 1.0, seed: int = 0, curvature: str = "public") -> dict:
    a, X, y, lam, run, secs = adult_demo_run(eps, seed, curvature)
    n, d = X.shape
    out = {"eps": eps, "seed": seed, "n": n, "d": d, "public_rows": int(np.shape(a.X_test)[0]), "curvature": curvature,
           "seconds": secs, "beta_over_n": run.plan.beta / n}
    try:
        iv = run.intervals(0.9)
    except ValueError as e:
        out.update(release_made=False, skipped=str(e))
        return out
    t, sd_np = nonprivate_laplace(X, y, lam)
    tw = _weighted_map(X, y, lam, run.report_extras["interval_release"])
    ratio = iv.sd / sd_np
    np_excl = np.abs(t) > Z90 * sd_np
    excl = (iv.lower > 0) | (iv.upper < 0)
    rel = run.report_extras["interval_release"]
    figures = intervals_against_nonprivate(iv, t, sd_np)
    out.update(release_made=True, curvature_source=rel.get("curvature_source"), mu_interval=rel["mu"],
               gradient_sd=rel["gradient_sd"],
               median_width_ratio=float(np.median(ratio)), p90_width_ratio=float(np.percentile(ratio, 90)),
               contain_map=int(np.sum((iv.lower <= t) & (t <= iv.upper))),
               exclude_zero=int(excl.sum()), exclude_zero_of_np=int((excl & np_excl).sum()),
               np_exclude_zero=int(np_excl.sum()), determined=int(iv.determined.sum()),
               sign_disagreements=int(np.sum(excl & np_excl & (np.sign(iv.centre) != np.sign(t)))),
               flagged=int(sum(1 for f in iv.flags if f)),
               flag_kinds={k: int(sum(1 for f in iv.flags if f.startswith(k))) for k in ("prior", "long step")},
               median_abs_z_vs_map=float(np.median(np.abs(iv.centre - t) / np.hypot(iv.sd, sd_np))),
               contain_weighted_map=int(np.sum((iv.lower <= tw) & (tw <= iv.upper))),
               # the intervals' estimand is the WEIGHTED likelihood's minimiser: under misspecification its signs
               # can differ from the unweighted MAP's
               determined_signs_right_vs_weighted_map=float(
                   np.mean(np.sign(iv.centre[iv.determined]) == np.sign(tw[iv.determined]))
                   if iv.determined.any() else float("nan")),
               rho=float(rel["rho"]),
               unflagged=int(sum(1 for f in iv.flags if not f)),
               data_share_over_0_9=int(np.sum(np.asarray(iv.data_share) > 0.9)),
               contain_map_data_share_over_0_9=int(np.sum(((iv.lower <= t) & (t <= iv.upper))[np.asarray(iv.data_share) > 0.9])),
               contain_map_unflagged=int(np.sum(((iv.lower <= t) & (t <= iv.upper))[[not f for f in iv.flags]])),
               median_abs_z_vs_map_missed=float(np.median((np.abs(iv.centre - t) / iv.sd)[~((iv.lower <= t) & (t <= iv.upper))])),
               predicted_median_width_ratio=float(np.median(iv.width_ratio)),
               # the Adult targets (intervals_against_nonprivate): the share of the non-private posterior's
               # determined coefficients determined (>= 0.6), their signs right (>= 0.95), the median width there (<= 2)
               determined_share_of_np=figures["share_determined"], determined_signs_right=figures["signs_right"],
               median_width_ratio_np_determined=figures["median_width_over_np_sd"],
               test_accuracy_interval_centre=_accuracy(a, iv.centre),
               test_accuracy_posterior_mean=_accuracy(a, run.draws().reshape(-1, d).mean(axis=0)),
               test_accuracy_nonprivate_map=_accuracy(a, t),
               forecast_note=[nt for nt in run.planned.notes if "public curvature" in nt],
               method=iv.method, notes=list(iv.notes))
    return out


def _accuracy(adult, theta) -> float:
    """Accuracy on Adult's public test file of the sign of ``<theta, x>``."""
    Xt, yt = np.asarray(adult.X_test, dtype=np.float64), np.asarray(adult.y_test, dtype=np.float64)
    return float(np.mean((Xt @ np.asarray(theta, dtype=np.float64) > 0) == (yt > 0.5)))


def _weighted_map(X, y, lam, rel) -> np.ndarray:
    """The NON-PRIVATE MAP of the release's own weighted likelihood (its weights ``min(1, (rho / ||C^T x||)^power)`` in
    the release's metric C): the intervals' estimand on these rows, which differs from the unweighted MAP's by the
    weighting's efficiency loss (and, for a misspecified model, by the weighting's shift of the estimand)."""
    return nonprivate_laplace(X, y, lam, weights=_release_weights(X, rel))[0]


def _release_weights(X, rel) -> np.ndarray:
    """The interval release's row weights ``min(1, (rho / (r ||C^T x||))^weight_power)`` in its metric C, ``r`` the
    logistic link's envelope ``max(s, 1 - s)`` at the last point where the release records ``weight_envelope`` (else
    1; the power 2 for a release made before it was recorded)."""
    from dp_infer.routes.public_rows import row_weights

    r = None
    if rel.get("weight_envelope"):
        r = 1.0 / (1.0 + np.exp(-np.abs(X @ np.asarray(rel["path"][-1], dtype=np.float64))))
    return row_weights(X @ np.asarray(rel["chol"], dtype=np.float64), float(rel["rho"]),
                       int(rel.get("weight_power") or 2), r)


def expected_share_determined(estimand, width_sd, noise_sd) -> np.ndarray:
    """Per coordinate, the chance that a 90% interval of sd ``width_sd`` whose centre is
    ``N(estimand, noise_sd^2)`` excludes 0 (the arithmetic behind "how many coefficients can be determined")."""
    est, w, s = (np.asarray(v, dtype=np.float64) for v in (estimand, width_sd, noise_sd))
    from scipy.stats import norm

    return norm.cdf((np.abs(est) - Z90 * w) / s) + norm.cdf((-np.abs(est) - Z90 * w) / s)


def adult_shortfall(seed: int = 0, noise_factors=(1.0, 0.8, 0.7, 0.6, 0.5)) -> dict:
    """Why Adult's intervals determine fewer of the non-private posterior's determined coefficients than the
    60% target: the release split into the leverage weighting (the weighted likelihood's model-based sandwich
    sd, no noise) and the privacy noise (``sqrt(sd^2 - sd_w^2)``), the share the arithmetic expects from the
    measured widths (:func:`expected_share_determined`), against the share measured, and the share expected
    if the noise were scaled by each of ``noise_factors`` (``1 / factor`` times the release's mu)."""
    _, X, y, lam, run, _ = adult_demo_run(1.0, seed, "public")
    iv = run.intervals(0.9)
    rel = run.report_extras["interval_release"]
    t, sd = nonprivate_laplace(X, y, lam)
    tw = _weighted_map(X, y, lam, rel)
    w = _release_weights(X, rel)
    s = 1 / (1 + np.exp(-X @ tw))
    Hi = np.linalg.inv((X * (w * s * (1 - s))[:, None]).T @ X + lam * np.eye(X.shape[1]))
    sd_w = np.sqrt(np.diag(Hi @ ((X * (w**2 * s * (1 - s))[:, None]).T @ X) @ Hi))
    noise = np.sqrt(np.maximum(np.asarray(iv.sd) ** 2 - sd_w**2, 1e-300))
    det = np.abs(t) > Z90 * sd

    def q(v):
        return [round(float(x), 3) for x in np.percentile(v[det], [25, 50, 75])]

    scaled = {}
    for c in noise_factors:
        width = np.sqrt(sd_w**2 + (c * noise) ** 2)
        scaled[str(c)] = {"expected_share": float(expected_share_determined(tw, width, c * noise)[det].mean()),
                          "median_width_over_np_sd": float(np.median((width / sd)[det]))}
    return {"seed": seed, "np_determined": int(det.sum()),
            "measured_determined_of_np": int((iv.determined & det).sum()),
            "measured_share": float((iv.determined & det).sum() / det.sum()),
            "width_over_np_sd_quartiles": q(np.asarray(iv.sd) / sd),
            "weighting_only_sd_over_np_sd_quartiles": q(sd_w / sd),
            "noise_over_np_sd_quartiles": q(noise / sd),
            "share_weighting_alone_would_determine": float((np.abs(tw) > Z90 * sd_w)[det].mean()),
            "expected_share_around_weighted_map": float(expected_share_determined(tw, iv.sd, noise)[det].mean()),
            "expected_share_around_map": float(expected_share_determined(t, iv.sd, noise)[det].mean()),
            "centre_minus_weighted_map_over_sd_median": float(np.median((np.abs(iv.centre - tw) / iv.sd)[det])),
            "noise_scaled": scaled}


def adult_noise_check(seed: int = 0, keys: int = 20) -> dict:
    """Is the intervals' stated sd the release's noise? The demo's Adult run (eps = 1, seed ``seed``), then its
    interval release made again ``keys`` times from the same draws and inputs with fresh noise (keys 100 ..
    100 + keys - 1, the run's mu), and once nearly noise-free (mu x 1e6). On the coefficients the non-private
    posterior determines: the centres' empirical sd over the keys against the stated sd (the oracle: the noise
    itself, which the stated sd must not understate), the noise-free centre's and the keys' mean centre's
    distance from the weighted MAP (the estimand on these rows) in stated sds, and how often the intervals
    cover the weighted MAP. Monte-Carlo error: the empirical sd of ``keys`` draws has relative se
    ``1 / sqrt(2 (keys - 1))`` (0.16 at 20); the keys' mean centre has se ``sd / sqrt(keys)`` (0.22 stated sds
    at 20, so a median |mean - estimand| near 0.15 is noise alone). The same for the data's part alone (the
    release's Gaussian likelihood before the prior: ``data_centre`` and ``data_sd``) against the weighted
    likelihood's own minimiser (prior 1e-6), on the determined coefficients whose data sd is finite; and the keys'
    mean centre's offset from the weighted MAP toward 0 (positive: toward the prior's mean), the noise-aware
    posterior's extra shrinkage: the release's noise lowers the data's precision against the prior's."""
    import jax

    c = _rerelease(seed)
    run, X, y, lam, det = c["run"], c["X"], c["y"], c["lam"], c["det"]
    rel = run.report_extras["interval_release"]
    assert c["inputs"]["rho"] == rel["rho"], "the inputs differ from the run's own release"
    mu = run.plan.posterior.mu_interval

    t0 = time.time()
    free = _remade_interval(c, mu * 1e6, jax.random.key(0))
    ivs = [_remade_interval(c, mu, jax.random.key(100 + k)) for k in range(keys)]
    cs, sds = np.array([iv.centre for iv in ivs]), np.array([iv.sd for iv in ivs])
    tw = _weighted_map(X, y, lam, rel)
    stated = np.median(sds, axis=0)

    def q(v, mask=det):
        return [round(float(x), 3) for x in np.percentile(v[mask], [25, 50, 75])]

    z = (cs - tw) / sds
    # the data's part alone (before the prior): its centre against the weighted likelihood's own minimiser, where
    # the data sd is finite (coordinates clear of the directions the public rows do not span)
    tmle = _weighted_map(X, y, 1e-6, rel)
    dcs, dsds = np.array([iv.data_centre for iv in ivs]), np.array([iv.data_sd for iv in ivs])
    ok = det & np.all(np.isfinite(dsds), axis=0)
    dstated = np.median(dsds, axis=0)
    zd = (dcs - tmle) / dsds

    return {"seed": seed, "keys": keys, "np_determined": int(det.sum()), "release_seconds": (time.time() - t0) / (keys + 1),
            "data_part_coordinates": int(ok.sum()),
            "data_empirical_over_stated_sd_quartiles": q(dcs.std(axis=0, ddof=1) / dstated, ok),
            "data_mean_centre_minus_weighted_mle_abs_quartiles": q(np.abs(dcs.mean(axis=0) - tmle) / dstated, ok),
            "data_cover_weighted_mle": float(np.mean(np.abs(zd[:, ok]) < Z90)),
            "mean_centre_minus_weighted_map_toward_zero_quartiles": q(-(cs.mean(axis=0) - tw) * np.sign(tw) / stated),
            "empirical_over_stated_sd_quartiles": q(cs.std(axis=0, ddof=1) / stated),
            "noise_free_sd_over_stated_sd_quartiles": q(free.sd / stated),
            "noise_free_centre_minus_weighted_map_abs_quartiles": q(np.abs(free.centre - tw) / stated),
            "mean_centre_minus_weighted_map_abs_quartiles": q(np.abs(cs.mean(axis=0) - tw) / stated),
            "mean_centre_minus_noise_free_abs_quartiles": q(np.abs(cs.mean(axis=0) - free.centre) / stated),
            "cover_weighted_map": float(np.mean(np.abs(z[:, det]) < Z90)),
            "cover_weighted_map_all": float(np.mean(np.abs(z) < Z90)),
            "median_abs_z_weighted_map": float(np.median(np.abs(z[:, det])))}


def _rerelease(seed: int):
    """The demo's Adult run (eps = 1, seed ``seed``) and what remaking its interval release needs: the loss, the
    rows, the public rows, the run's release inputs (:func:`~dp_infer.infer.posterior.interval_release_inputs`),
    the non-private MAP and sds under the same prior, and which coefficients the non-private posterior determines."""
    from dp_infer.infer.posterior import interval_release_inputs

    a, X, y, lam, run, _ = adult_demo_run(1.0, seed, "public")
    Xp, loss = np.asarray(a.X_test, dtype=np.float64), demo_loss(a)
    t, sd_np = nonprivate_laplace(X, y, lam)
    return {"run": run, "loss": loss, "X": X, "y": y, "Xp": Xp, "inputs": interval_release_inputs(run, loss, Xp),
            "lam": lam, "t": t, "sd_np": sd_np, "det": np.abs(t) > Z90 * sd_np}


def _remade_interval(c: dict, mu: float, key, rho: float | None = None):
    """The 90% intervals of :func:`_rerelease`'s run with its interval release made again at GDP ``mu`` with the
    noise ``key``, from the same draws, metric and (unless ``rho`` is given) weights' radius."""
    from dp_infer.diagnostics.released_interval import released_interval
    from dp_infer.releases.newton import release_newton_statistics

    inputs = c["inputs"] if rho is None else dict(c["inputs"], rho=rho)
    r = release_newton_statistics(c["loss"], c["X"], c["y"], mu=mu, key=key, X_public=c["Xp"], **inputs)
    return released_interval(r.to_dict(), n=c["run"].plan.n, prior_precision=c["run"].plan.prior_precision, prob=0.9)


def _release_scores(c: dict, keys: int, mu: float, rho: float) -> dict:
    """The interval release of :func:`_rerelease`'s run made again at GDP ``mu`` and weights' radius ``rho`` with the
    noise keys 100 .. 100 + keys - 1. Over the keys (:func:`intervals_against_nonprivate`'s figures): the mean share
    of the non-private posterior's determined coefficients the intervals determine with its se (the keys are
    independent draws of the release's noise), the mean share of the coefficients the intervals determine with the
    non-private MAP's sign, and the median over keys of the median width over the non-private sd on the non-private
    posterior's determined coefficients."""
    import jax

    share, signs, width = [], [], []
    for k in range(keys):
        f = intervals_against_nonprivate(_remade_interval(c, mu, jax.random.key(100 + k), rho), c["t"], c["sd_np"])
        share.append(f["share_determined"])
        signs.append(np.nan if f["signs_right"] is None else f["signs_right"])
        width.append(f["median_width_over_np_sd"])
    return {"share_determined_mean": round(float(np.mean(share)), 3),
            "share_determined_se": round(float(np.std(share, ddof=1) / np.sqrt(keys)), 3),
            "signs_right_mean": round(float(np.nanmean(signs)), 3),
            "median_width_over_np_sd": round(float(np.median(width)), 3)}


def adult_radius_check(seed: int = 0, keys: int = 12, factors: int = 12) -> dict:
    """Does the weights' radius the release picks (the grid's narrowest predicted width) cost determined
    coefficients? The demo's Adult run (eps = 1, seed ``seed``), then its interval release made again from the same
    draws, metric and mu at each of the first ``factors`` factors of
    :data:`~dp_infer.routes.newton_release.RHO_GRID` (times the public rows' root mean ``||C^T x||``), each with the
    same noise keys (:func:`_release_scores`). Per factor: the width the release's predictor gives at the draws' mean
    (what the pick reads), and the scores over the keys."""
    from dp_infer.routes.public_rows import predicted_width_ratio
    from dp_infer.routes.newton_release import RHO_GRID, link_bounds

    c = _rerelease(seed)
    run, inputs, loss, Xp = c["run"], c["inputs"], c["loss"], c["Xp"]
    rel, n, mu = run.report_extras["interval_release"], run.plan.n, run.plan.posterior.mu_interval
    C = np.asarray(inputs["chol"], dtype=np.float64)
    rho0 = float(np.sqrt(np.mean(np.sum((Xp @ C) ** 2, axis=1))))
    mu_last = 2.0 * link_bounds(loss)[0] * float(rel["rho"]) / (n * float(rel["gradient_sd"]))
    rows = [{"factor": round(f, 3),
             "predicted_width": round(predicted_width_ratio(loss, Xp, inputs["point"], C, f * rho0, c["lam"], n,
                                                            mu_last), 3),
             **_release_scores(c, keys, mu, f * rho0)} for f in RHO_GRID[:factors]]
    return {"seed": seed, "keys": keys, "np_determined": int(c["det"].sum()),
            "picked_factor": round(inputs["rho"] / rho0, 3),
            "run_share_determined":
                intervals_against_nonprivate(run.intervals(0.9), c["t"], c["sd_np"])["share_determined"],
            "radii": rows}


#: :func:`adult_mu_check`'s factors on the interval release's mu: 1.085 is all of the run's mu^2 given to the
#: release (``1 / sqrt(PUBLIC_INTERVAL_SHARE)``), 1e6 a nearly noise-free release (the weighted estimand's ceiling)
MU_FACTORS = (1.0, 1.085, 1.25, 1.5, 2.0, 3.0, 1e6)


def adult_mu_check(seed: int = 0, keys: int = 12, factors=MU_FACTORS) -> dict:
    """How much more budget would Adult's 60% take? The demo's Adult run (eps = 1, seed ``seed``), then its interval
    release made again from the same draws, metric and weights' radius at the run's interval mu times each of
    ``factors`` (:data:`MU_FACTORS`), each with the same noise keys (:func:`_release_scores`). A factor ``f`` on mu is
    ``f^2`` on the release's mu^2 and so on eps (GDP's eps grows about linearly in mu); a factor above
    ``1 / sqrt(PUBLIC_INTERVAL_SHARE)`` needs more than the run's whole budget. The largest factor shows the ceiling
    the release's estimand (the weighted likelihood's MAP) sets with nearly no noise."""
    from dp_infer.routes.newton_release import PUBLIC_INTERVAL_SHARE

    c = _rerelease(seed)
    run = c["run"]
    mu = run.plan.posterior.mu_interval
    rows = [{"mu_factor": f, "release_mu": round(f * mu, 4), **_release_scores(c, keys, f * mu, c["inputs"]["rho"])}
            for f in factors]
    return {"seed": seed, "keys": keys, "np_determined": int(c["det"].sum()), "interval_mu": round(mu, 4),
            "whole_budget_factor": round(1.0 / np.sqrt(PUBLIC_INTERVAL_SHARE), 4), "factors": rows}


def adult_misses(seed: int = 0) -> dict:
    """Where the demo's intervals (eps = 1, seed ``seed``) miss the non-private posterior's determined coefficients:
    those coefficients split by how often their column is nonzero (below 0.5% of the rows, 0.5-5%, at least 5%)
    and by the non-private ``|MAP| / sd`` (1.645-2.5, 2.5-4, at least 4): per class, how many the non-private
    posterior determines, how many the private intervals do, and (by frequency) the median ``|MAP| / sd`` and
    the median interval width over the non-private sd."""
    _, X, y, lam, run, _ = adult_demo_run(1.0, seed, "public")
    iv = run.intervals(0.9)
    t, sd = nonprivate_laplace(X, y, lam)
    z = np.abs(t) / sd
    det, excl, freq = z > Z90, (iv.lower > 0) | (iv.upper < 0), np.mean(X != 0, axis=0)
    out = {"seed": seed, "np_determined": int(det.sum()), "by_column_frequency": {}, "by_nonprivate_z": {}}
    for name, m in (("below 0.5%", freq < 0.005), ("0.5-5%", (freq >= 0.005) & (freq < 0.05)),
                    ("at least 5%", freq >= 0.05)):
        k = det & m
        out["by_column_frequency"][name] = {
            "np_determined": int(k.sum()), "private_determined": int((excl & k).sum()),
            "median_np_z": float(np.median(z[k])) if k.any() else None,
            "median_width_over_np_sd": float(np.median((iv.sd / sd)[k])) if k.any() else None}
    for lo, hi in ((Z90, 2.5), (2.5, 4.0), (4.0, np.inf)):
        k = det & (z >= lo) & (z < hi)
        out["by_nonprivate_z"][f"{lo:.3g}-{hi:.3g}"] = {"np_determined": int(k.sum()),
                                                       "private_determined": int((excl & k).sum())}
    return out


def adult_shaped_coverage(seeds, design: str = "adult_shaped") -> dict:
    """Coverage of a known truth with public curvature on one of :mod:`benchmarks.intervals`'s logistic designs
    (default the Adult-shaped one: n = 30,000, d = 100; eps = 1, prior N(0, 100 I), ess 400; public rows: n
    feature rows of the same design drawn with seed 50,000 + s; run seed 1000 + s), against the
    non-private Laplace posterior under the same prior: coverage per class of coordinate with its binomial se,
    the share of the non-private intervals' determined coefficients these determine, their signs, and the median
    width ratio there."""
    from benchmarks.intervals import DELTA, DESIGNS, PRIOR, coordinate_kinds, design_data
    from dp_infer import losses
    from dp_infer.infer.posterior import fit_posterior

    if DESIGNS[design][0] != "logistic":
        raise ValueError(f"design must be a logistic design (public curvature needs a label-free one), got {design!r}")
    kinds = np.array(coordinate_kinds(design))
    cov, det, npd, sign, ratio, secs = [], [], [], [], [], []
    for s in seeds:
        X, y, theta = design_data(design, s)
        Xp = design_data(design, 50000 + s)[0]
        t0 = time.time()
        run = fit_posterior(losses.logistic(row_norm=1.0), X, y, eps=1.0, delta=DELTA, prior_precision=PRIOR,
                            ess=400, seed=1000 + s, progress_bar=False, interval_curvature="public", X_public=Xp)
        secs.append(time.time() - t0)
        iv = run.intervals(0.9)
        t, sd_np = nonprivate_laplace(X, y, PRIOR)
        cov.append((iv.lower <= theta) & (theta <= iv.upper))
        det.append(iv.determined)
        npd.append(np.abs(t) > Z90 * sd_np)
        sign.append(np.sign(iv.centre) == np.sign(t))
        ratio.append(iv.sd / sd_np)
        print(f"seed {s}: coverage {cov[-1].mean():.2f}, {secs[-1]:.0f} s", file=sys.stderr, flush=True)
    cov, det, npd, sign, ratio = map(np.array, (cov, det, npd, sign, ratio))

    def rate(c):
        p = float(c.mean())
        return {"coverage": p, "se": float(np.sqrt(p * (1 - p) / c.size)), "intervals": int(c.size)}

    return {"design": design, "datasets": len(seeds), "seeds": list(seeds), "all": rate(cov),
            "by_kind": {k: dict(rate(cov[:, kinds == k]), median_width_ratio=float(np.median(ratio[:, kinds == k])))
                        for k in dict.fromkeys(kinds)},
            "median_width_ratio": float(np.median(ratio)),
            "coverage_se_over_datasets": float(cov.mean(axis=1).std(ddof=1) / np.sqrt(len(seeds)))
            if len(seeds) > 1 else None,
            "determined_share_of_np": float((det & npd).sum() / npd.sum()),
            "determined_signs_right": float(sign[det].mean()),
            "median_width_ratio_np_determined": float(np.median(ratio[npd])),
            "determined_per_dataset": det.sum(axis=1).tolist(), "np_determined_per_dataset": npd.sum(axis=1).tolist(),
            "mean_seconds_per_run": float(np.mean(secs))}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.public_curvature")
    p.add_argument("--eps", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--curvature", default="public", choices=("public", "private"))
    p.add_argument("--json")
    p.add_argument("--adult-shaped", type=int, metavar="DATASETS",
                   help="instead: coverage of the truth on the simulated Adult-shaped design over this many datasets")
    p.add_argument("--design", default="adult_shaped",
                   help="with --adult-shaped: another logistic design of benchmarks.intervals (e.g. logistic_d20)")
    p.add_argument("--shortfall", action="store_true",
                   help="instead: Adult's shortfall against the 60%% target split into weighting and noise, by the arithmetic")
    p.add_argument("--noise-check", type=int, metavar="KEYS",
                   help="instead: the interval release made again with this many fresh noise keys from the same draws: "
                        "is the stated sd the noise's?")
    p.add_argument("--radius-check", type=int, metavar="KEYS",
                   help="instead: the interval release made again at each weights' radius of the grid with this many "
                        "noise keys: the determined share per radius")
    p.add_argument("--mu-check", type=int, metavar="KEYS",
                   help="instead: the interval release made again at multiples of its mu with this many noise keys: "
                        "the determined share per multiple")
    p.add_argument("--misses", action="store_true",
                   help="instead: the non-private posterior's determined coefficients the intervals miss, by class")
    a = p.parse_args(argv)
    r = (adult_shaped_coverage(range(a.adult_shaped), a.design) if a.adult_shaped
         else adult_misses(a.seed) if a.misses
         else adult_radius_check(a.seed, a.radius_check) if a.radius_check
         else adult_mu_check(a.seed, a.mu_check) if a.mu_check
         else adult_noise_check(a.seed, a.noise_check) if a.noise_check
         else adult_shortfall(a.seed) if a.shortfall
         else adult_public_curvature(a.eps, a.seed, a.curvature))
    report_result("public_curvature", argv, r, a.json)


if __name__ == "__main__":
    main()
