"""Coverage and width of the posterior mode's intervals for theta (issue 37, part 3), on data with a known truth.

``python -m benchmarks.intervals [--datasets N] [--designs logistic_small ...] [--n-for adult_shaped=8] [--md PATH]
[--json PATH]``

Each dataset is drawn afresh from a known parameter (fixed per design); each run is the library's
default posterior mode (clipped, adapted metric, the interval release where its default rule makes one)
at the stated (eps, 1e-5). Per design and per class of coordinate it reports, pooled over coordinates and
datasets, the coverage of the truth at nominal 0.90 with its Monte-Carlo error ``sqrt(p (1 - p) / N)``
and the median sd over the non-private reference's (the untempered posterior's Laplace sd at the MAP
for logistic, the M-estimator's sandwich sd for Huber: large-n stand-ins for the non-private
posterior), for three intervals built from the same data at equal eps:

* **run**: :meth:`dp_infer.infer.run.PrivateRun.intervals` (the run's charged interval release,
  :mod:`dp_infer.diagnostics.released_interval`). Where the default rule
  (:func:`dp_infer.routes.newton_release.default_interval_share`: the released curvature's signal to
  noise below 4) makes no release, the default run has no intervals (``intervals()`` says why); the
  benchmark then also runs the same data with the release forced (``interval_share=0.7``, the default
  share) and measures those intervals, labelled "forced".
* **tempered**: the default run's tempered draws' 90% credible interval (5% / 95% quantiles).
* **laplace**: a noise-aware Laplace posterior from the estimate route (:func:`laplace_anchor`): a
  private point estimate from ``dp_infer.fit(..., target="estimate")`` at GDP ``sqrt(1 - s) mu``, then
  one stage of the interval release's statistics (curvature, scores' second moment, gradient, the
  same public primitives and the same split as the last stage of
  :data:`dp_infer.routes.newton_release.SCHEDULE`) at that estimate, at GDP ``sqrt(s) mu``, read by
  :func:`dp_infer.diagnostics.released_interval.released_interval` (a one-step Newton centre, the
  sandwich plus the release noise, combined with the prior). Every part is a GDP event (the estimate
  route's Langevin path is ``mu``-GDP; each statistic a Gaussian mechanism), so the composition is
  exact: ``mu_total^2 = sum mu_k^2 = mu^2`` with ``mu = gdp_mu(eps, delta)`` (the exact Gaussian
  privacy profile, Balle & Wang 2018), the same conversion the posterior run is charged with;
  checked per run with :class:`dp_infer.privacy.accountant.Accountant`.

Classes of coordinate: by each interval's own flag ("not flagged", "prior", "long step", "unresolved"), and for the
Adult-shaped design by column kind ("rare level": a one-hot level with frequency below 1%, "common
level", "numeric", "intercept").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

Z90 = 1.6448536269514722
PRIOR = 0.01  # prior precision: N(0, 100 I)
DELTA = 1e-5
LAPLACE_SHARE = 0.7  # the anchor's share of mu^2 for the curvature stage (the run's DEFAULT_INTERVAL_SHARE)

DESIGNS = {
    # name: (loss, n, d, eps)
    "logistic_small": ("logistic", 5000, 5, 1.0),
    "huber_small": ("huber", 5000, 5, 1.0),
    "logistic_2k": ("logistic", 2000, 3, 1.0),
    "logistic_d20": ("logistic", 5000, 20, 1.0),
    "adult_shaped": ("logistic", 30000, 100, 1.0),
    "logistic_10": ("logistic", 5000, 10, 1.0),
}
DEFAULT_DESIGNS = ["logistic_small", "huber_small", "logistic_2k", "logistic_d20", "adult_shaped"]

#: the Adult-shaped design's categoricals (levels each; the most frequent is the reference level, dropped)
ADULT_LEVELS = (9, 16, 7, 15, 6, 5, 2, 41)
ADULT_NUMERIC = 6
RARE = 0.01  # a level with frequency below this is "rare"


def _adult_structure():
    """The Adult-shaped design's public structure: level probabilities (Zipf-like, exponent 1.5, so the
    long categoricals have levels of 0.1-0.5%), the column kinds, and the true effects (fixed)."""
    rng = np.random.default_rng(12345)
    probs = []
    for k in ADULT_LEVELS:
        p = 1.0 / np.arange(1, k + 1) ** 1.5
        probs.append(p / p.sum())
    kinds, freq = ["intercept"], [1.0]
    for p in probs:
        for q in p[1:]:  # level 0 (the most frequent) is the reference
            kinds.append("rare level" if q < RARE else "common level")
            freq.append(float(q))
    kinds += ["numeric"] * ADULT_NUMERIC
    freq += [1.0] * ADULT_NUMERIC
    d = len(kinds)
    effects = np.concatenate([[-1.0], rng.normal(0.0, 0.5, size=d - 1 - ADULT_NUMERIC),
                              np.linspace(-1.0, 1.0, ADULT_NUMERIC)])
    return probs, kinds, np.array(freq), effects


def _adult_data(n, seed):
    probs, kinds, _, effects = _adult_structure()
    rng = np.random.default_rng(seed)
    cols = [np.ones((n, 1))]
    for p in probs:
        lv = rng.choice(p.size, size=n, p=p)
        cols.append((lv[:, None] == np.arange(1, p.size)[None, :]).astype(float))
    cols.append(np.clip(rng.normal(0.0, 0.5, size=(n, ADULT_NUMERIC)), -1.0, 1.0))
    raw = np.concatenate(cols, axis=1)
    scale = math.sqrt(1 + len(ADULT_LEVELS) + ADULT_NUMERIC)  # the largest possible row norm
    X = raw / scale
    theta = effects * scale
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-X @ theta))).astype(float)
    return X, y, theta


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


def design_data(design: str, seed: int):
    """``(X, y, theta)`` of one dataset of ``design`` (:data:`DESIGNS`): rows drawn afresh per seed, the
    truth fixed per design."""
    kind, n, d, _ = DESIGNS[design]
    return _adult_data(n, seed) if design == "adult_shaped" else _data(kind, n, d, seed)


def coordinate_kinds(design: str) -> list:
    d = DESIGNS[design][2]
    return _adult_structure()[1] if design == "adult_shaped" else ["coefficient"] * d


def reference_sd(kind, X, y, prior):
    """The non-private reference: the untempered posterior's Laplace sd at the MAP (logistic) or the Huber
    M-estimator's sandwich sd (huber), at the non-private estimate."""
    from scipy.optimize import minimize

    n, d = X.shape
    if kind == "logistic":
        def f(t):
            z = X @ t
            return np.sum(np.logaddexp(0, z) - y * z) + 0.5 * prior * t @ t

        def g(t):
            return X.T @ (1 / (1 + np.exp(-X @ t)) - y) + prior * t

        t = minimize(f, np.zeros(d), jac=g, method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-8}).x
        s = 1 / (1 + np.exp(-X @ t))
        H = (X * (s * (1 - s))[:, None]).T @ X + prior * np.eye(d)
        return np.sqrt(np.diag(np.linalg.inv(H)))

    def f(t):
        r = X @ t - y
        a = np.abs(r)
        return np.sum(np.where(a <= 1.0, 0.5 * r * r, a - 0.5))

    def g(t):
        return X.T @ np.clip(X @ t - y, -1.0, 1.0)

    t = minimize(f, np.zeros(d), jac=g, method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-10}).x
    r = X @ t - y
    psi, dpsi = np.clip(r, -1, 1), (np.abs(r) <= 1).astype(float)
    H = (X * dpsi[:, None]).T @ X
    J = (X * (psi ** 2)[:, None]).T @ X
    Hi = np.linalg.inv(H)
    return np.sqrt(np.diag(Hi @ J @ Hi))


def one_stage_release(loss, X, y, *, point, mu: float, key) -> tuple[dict, list]:
    """One stage of the interval release at the public ``point`` (the private estimate), at GDP ``mu``:
    the weighted curvature, the scores' second moment and the mean gradient, split as the last stage of
    :data:`~dp_infer.routes.newton_release.SCHEDULE`, in the identity metric with ``rho`` = the loss's row
    norm (every row of these designs has norm <= 1, so every weight is 1: the plain loss). Returns the
    release (the fields :func:`~dp_infer.diagnostics.released_interval.released_interval` reads) and the
    GDP events of its three Gaussian mechanisms."""
    import jax
    import jax.numpy as jnp

    from dp_infer.privacy.events import GdpEvent
    from dp_infer.randomness import gaussian_noise
    from dp_infer.routes.newton_release import SCHEDULE, link_bounds
    from dp_infer.releases.newton import weighted_rows
    from dp_infer.releases.second_moment import private_second_moment_of_gram

    G_link, kappa = link_bounds(loss)
    n, d = X.shape
    rho = float(loss.row_norm)
    if np.max(np.linalg.norm(X, axis=1)) > rho * (1 + 1e-9):
        raise ValueError("a row's norm exceeds the loss's row_norm")  # the sensitivities below rest on it
    C = np.eye(d)
    shares = dict(SCHEDULE[-1])
    total = sum(shares.values())
    mus = {k: math.sqrt(v / total) * mu for k, v in shares.items()}
    Gr, Wr = weighted_rows(loss, X, y, point, C, rho)
    slack = 1.0 + 1e-9
    k_h, k_j, k_g = jax.random.split(key, 3)
    Hr = private_second_moment_of_gram(Wr.T @ Wr, n, max_sq_norm=kappa * rho * rho * slack, mu=mus["curvature"], key=k_h)
    Jr = private_second_moment_of_gram(Gr.T @ Gr, n, max_sq_norm=(G_link * rho) ** 2 * slack, mu=mus["score"], key=k_j)
    sd_g = 2.0 * G_link * rho * slack / n / mus["gradient"]
    g = Gr.mean(axis=0) + (loss.l2 * np.asarray(point) if loss.l2 else 0.0)
    with jax.enable_x64(True):  # the privacy noise the library's releases draw (dp_infer.randomness, issue 40)
        z = np.asarray(gaussian_noise(k_g, (d,), jnp.float64), dtype=np.float64)
    g = g + z * sd_g
    H = Hr.matrix + (loss.l2 * np.eye(d) if loss.l2 else 0.0)
    release = {"path": [list(map(float, point))], "chol": C.tolist(), "gradient": g.tolist(), "gradient_sd": sd_g,
               "curvature": H.tolist(), "curvature_sd": float(Hr.event.metadata["noise_sd"]), "score": Jr.matrix.tolist(),
               "score_sd": float(Jr.event.metadata["noise_sd"]), "rho": rho, "mu": mu, "n": n, "loss": loss.name}
    events = [Hr.event, Jr.event, GdpEvent(mu=mus["gradient"], label="anchor gradient")]
    return release, events


def laplace_anchor(loss, X, y, *, eps: float, delta: float, prior, share: float = LAPLACE_SHARE, seed: int = 0):
    """The noise-aware Laplace anchor (module doc): the estimate route at ``gdp_epsilon(sqrt(1 - share) mu)``,
    one release stage at ``sqrt(share) mu``, ``mu = gdp_mu(eps, delta)``. Returns ``(intervals, info)``;
    ``info`` has the composed mu and eps (checked not to exceed the target)."""
    import jax

    from dp_infer import fit
    from dp_infer.diagnostics.released_interval import released_interval
    from dp_infer.privacy.accountant import Accountant
    from dp_infer.privacy.conversions import gdp_epsilon, gdp_mu
    from dp_infer.privacy.events import GdpEvent

    mu = gdp_mu(eps, delta)
    mu_est, mu_rel = math.sqrt(1.0 - share) * mu, math.sqrt(share) * mu
    est = fit(loss, X, y, eps=gdp_epsilon(mu_est, delta), delta=delta, target="estimate", seed=seed,
              progress_bar=False)
    ev = est.plan.event
    if not isinstance(ev, GdpEvent) or ev.mu > mu_est * (1 + 1e-9):
        raise AssertionError(f"the estimate route's event is not the planned GDP: {ev}")
    point = np.asarray(est.estimate(), dtype=np.float64)
    release, events = one_stage_release(loss, X, y, point=point, mu=mu_rel, key=jax.random.PRNGKey(10_000 + seed))
    acc = Accountant([ev, *events])
    mu_total = acc.gdp_mu()
    if mu_total is None or mu_total > mu * (1 + 1e-9):
        raise AssertionError(f"the anchor spends GDP {mu_total} > {mu}")
    iv = released_interval(release, n=X.shape[0], prior_precision=prior, prob=0.9)
    return iv, {"mu_total": mu_total, "eps_total": gdp_epsilon(mu_total, delta), "mu_estimate": ev.mu,
                "estimate_route": est.plan.route}


def _flag_class(f: str) -> str:
    return "not flagged" if not f else f.split(":")[0]


def one(args):
    design, seed = args
    import jax

    jax.config.update("jax_platforms", "cpu")
    from dp_infer import losses
    from dp_infer.infer.posterior import fit_posterior
    from dp_infer.routes.newton_release import DEFAULT_INTERVAL_SHARE

    kind, n, d, eps = DESIGNS[design]
    X, y, theta = design_data(design, seed)
    loss = losses.logistic(row_norm=1.0) if kind == "logistic" else losses.huber(1.0, row_norm=1.0)
    ref = reference_sd(kind, X, y, PRIOR)
    out = {"design": design, "seed": seed, "theta": theta.tolist(), "ref_sd": ref.tolist()}

    def iv_record(iv):
        return {"covered": ((iv.lower <= theta) & (theta <= iv.upper)).tolist(), "ratio": (iv.sd / ref).tolist(),
                "z": ((iv.centre - theta) / iv.sd).tolist(), "flags": [_flag_class(f) for f in iv.flags]}

    t0 = time.time()
    run = fit_posterior(loss, X, y, eps=eps, delta=DELTA, prior_precision=PRIOR, ess=400, seed=1000 + seed,
                        progress_bar=False)
    out["seconds_run"] = time.time() - t0
    out["beta_over_n"] = run.plan.beta / n
    draws = run.draws().reshape(-1, d)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    out["tempered"] = {"covered": ((lo <= theta) & (theta <= hi)).tolist(), "ratio": (draws.std(axis=0) / ref).tolist()}
    try:
        out["run"] = iv_record(run.intervals(0.9))
        out["run_forced"] = False
    except ValueError as e:
        out["skipped"] = str(e)
        t0 = time.time()
        forced = fit_posterior(loss, X, y, eps=eps, delta=DELTA, prior_precision=PRIOR, ess=400, seed=1000 + seed,
                               progress_bar=False, interval_share=DEFAULT_INTERVAL_SHARE)
        out["seconds_forced"] = time.time() - t0
        out["run"] = iv_record(forced.intervals(0.9))
        out["run_forced"] = True
    t0 = time.time()
    iv, info = laplace_anchor(loss, X, y, eps=eps, delta=DELTA, prior=PRIOR, seed=seed)
    out["seconds_laplace"] = time.time() - t0
    out["laplace"] = iv_record(iv)
    out["laplace_info"] = info
    return out


def _cov(c):
    c = np.asarray(c, dtype=float)
    N = c.size
    if N == 0:
        return None
    p = float(c.mean())
    return {"N": N, "coverage": p, "mc_se": math.sqrt(p * (1 - p) / N)}


def summarise(rows):
    """Per design: coverage and median width for each method, pooled, by column kind, and by each
    method's own flag class."""
    out = {}
    for design in [k for k in DESIGNS if any(r["design"] == k for r in rows)]:
        rs = [r for r in rows if r["design"] == design]
        kinds = np.array(coordinate_kinds(design))
        s = {"datasets": len(rs), "forced": bool(rs[0].get("run_forced")), "skipped": rs[0].get("skipped"),
             "seconds_per_dataset": float(np.median([r["seconds_run"] + r.get("seconds_forced", 0.0)
                                                      + r["seconds_laplace"] for r in rs])),
             "beta_over_n": float(np.median([r["beta_over_n"] for r in rs])),
             "laplace_eps_total": float(max(r["laplace_info"]["eps_total"] for r in rs)),
             "by_kind": {}, "by_flag": {}}
        classes = ["all"] + (sorted(set(kinds.tolist())) if len(set(kinds.tolist())) > 1 else [])
        for cls in classes:
            mask = np.ones(kinds.size, bool) if cls == "all" else kinds == cls
            entry = {}
            for m in ("run", "tempered", "laplace"):
                cov = np.concatenate([np.asarray(r[m]["covered"])[mask] for r in rs])
                rat = np.concatenate([np.asarray(r[m]["ratio"])[mask] for r in rs])
                # coordinates of one dataset share its noise: the se of the per-dataset coverages' mean
                per = np.array([np.mean(np.asarray(r[m]["covered"])[mask]) for r in rs])
                cl = float(per.std(ddof=1) / math.sqrt(len(rs))) if len(rs) > 1 else float("nan")
                entry[m] = dict(_cov(cov), median_ratio=float(np.median(rat)), clustered_se=cl)
            s["by_kind"][cls] = entry
        for m in ("run", "laplace"):
            fl = {}
            for cls in classes:
                mask = np.ones(kinds.size, bool) if cls == "all" else kinds == cls
                flags = np.concatenate([np.asarray(r[m]["flags"])[mask] for r in rs])
                cov = np.concatenate([np.asarray(r[m]["covered"])[mask] for r in rs])
                rat = np.concatenate([np.asarray(r[m]["ratio"])[mask] for r in rs])
                for f in sorted(set(flags.tolist())):
                    k = flags == f
                    fl[f"{cls} / {f}"] = dict(_cov(cov[k]), median_ratio=float(np.median(rat[k])))
            s["by_flag"][m] = fl
        out[design] = s
    return out


def _fmt(e):
    cl = e.get("clustered_se")
    return (f"{e['coverage']:.3f} +- {e['mc_se']:.3f}" + (f" / {cl:.3f}" if cl is not None and math.isfinite(cl) else "")
            + f" ({e['N']})")


def to_markdown(summary, command, wall=None):
    lines = [f"Command: `{command}`" + (f" (wall time {wall / 60:.0f} min, one process)" if wall else ""), "",
             "Coverage of the truth at nominal 0.90 (+- Monte-Carlo se sqrt(p (1 - p) / N) / the se of the "
             "per-dataset coverages' mean, which counts the coordinates of one dataset as one draw; (N coordinates)) "
             "and median sd over the non-private reference's, per design and class of coordinate:", "",
             "| design (loss, n, d, eps) | datasets | class | run's intervals | width | tempered draws | width "
             "| noise-aware Laplace (estimate route) | width |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, s in summary.items():
        k, n, d, eps = DESIGNS[name]
        label = f"{name} ({k}, {n}, {d}, {eps:g})" + (" [release forced: default skips it]" if s["forced"] else "")
        for cls, e in s["by_kind"].items():
            lines.append(f"| {label} | {s['datasets']} | {cls} | {_fmt(e['run'])} | {e['run']['median_ratio']:.2f} | "
                         f"{_fmt(e['tempered'])} | {e['tempered']['median_ratio']:.1f} | {_fmt(e['laplace'])} | "
                         f"{e['laplace']['median_ratio']:.2f} |")
            label = ""
    lines += ["", "By each interval's own flag (coordinates pooled over datasets):", "",
              "| design | class / flag | run's intervals | width | | class / flag | noise-aware Laplace | width |",
              "|---|---|---|---|---|---|---|---|"]
    for name, s in summary.items():
        a, b = list(s["by_flag"]["run"].items()), list(s["by_flag"]["laplace"].items())
        for i in range(max(len(a), len(b))):
            ca = f"{a[i][0]} | {_fmt(a[i][1])} | {a[i][1]['median_ratio']:.2f}" if i < len(a) else " | | "
            cb = f"{b[i][0]} | {_fmt(b[i][1])} | {b[i][1]['median_ratio']:.2f}" if i < len(b) else " | | "
            lines.append(f"| {name if i == 0 else ''} | {ca} | | {cb} |")
    lines += ["", "| design | s per dataset (all runs) | beta / n (default run) | anchor's composed eps | default release |",
              "|---|---|---|---|---|"]
    for name, s in summary.items():
        why = ("skipped: " + s["skipped"].split(": ", 1)[-1].split(";")[0]) if s["skipped"] else "made"
        lines.append(f"| {name} | {s['seconds_per_dataset']:.0f} | {s['beta_over_n']:.4f} | {s['laplace_eps_total']:.4f} | "
                     f"{why} |")
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
    np_det = (np.abs(t) > Z90 * sd_np)
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
    p = argparse.ArgumentParser(prog="python -m benchmarks.intervals")
    p.add_argument("--datasets", type=int, default=50, help="datasets per design")
    p.add_argument("--n-for", nargs="*", default=[], metavar="DESIGN=N", help="per-design dataset counts")
    p.add_argument("--designs", nargs="*", default=DEFAULT_DESIGNS, choices=list(DESIGNS))
    p.add_argument("--md")
    p.add_argument("--json", help="rows are appended to PATH.rows.jsonl as they finish; the summary to PATH")
    p.add_argument("--resume", action="store_true", help="skip (design, seed) pairs already in PATH.rows.jsonl")
    p.add_argument("--adult", nargs="*", type=float, metavar="EPS",
                   help="also Adult at these eps (default 1) against the non-private posterior")
    a = p.parse_args(argv)
    command = "python -m benchmarks.intervals " + " ".join(sys.argv[1:] if argv is None else argv)
    if a.adult is not None:
        res = [adult(e) for e in (a.adult or [1.0])]
        print(adult_markdown(res))
        if a.json:
            json.dump(res, open(a.json + ".adult.json", "w"), indent=1)
        if a.datasets == 0:
            return
    counts = {dsg: a.datasets for dsg in a.designs}
    for item in a.n_for:
        k, v = item.split("=")
        counts[k] = int(v)
    rows, done = [], set()
    log = a.json + ".rows.jsonl" if a.json else None
    if log and a.resume:
        try:
            for line in open(log):
                r = json.loads(line)
                if (r["design"], r["seed"]) not in done:  # a pair logged twice is counted once
                    rows.append(r)
                    done.add((r["design"], r["seed"]))
        except FileNotFoundError:
            pass
    t_start = time.time()
    for dsg in a.designs:  # one process, one dataset at a time
        for s in range(counts[dsg]):
            if (dsg, s) in done:
                continue
            r = one((dsg, s))
            rows.append(r)
            if log:
                with open(log, "a") as fh:
                    fh.write(json.dumps(r) + "\n")
            print(f"{dsg} {s}: {r['seconds_run'] + r.get('seconds_forced', 0) + r['seconds_laplace']:.0f} s",
                  file=sys.stderr, flush=True)
    rows = [r for r in rows if r["design"] in counts and r["seed"] < counts[r["design"]]]
    summary = summarise(rows)
    md = to_markdown(summary, command, time.time() - t_start)
    print(md)
    if a.md:
        open(a.md, "w").write(md + "\n")
    if a.json:
        json.dump({"summary": summary, "command": command}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
