"""Coverage of a hierarchical NumPyro model's intervals (issue 37, parts 3 and 6).

``python -m benchmarks.hierarchical_intervals --datasets 50 [--json LOG] [--eps 2] [--n 4000] [--groups 4] [--ess K]
[--start S] [--rescore]`` (``--ess``: the runs' planned effective draws, default the library's; ``--start``: run seeds
S..49 only; ``--rescore``: read the logged rows' intervals again from the releases each row stores, running no chain)
``python -m benchmarks.hierarchical_intervals --diagnose 3,6 [--clip-norm 2]``: where each dataset's release loses
the truth, against non-private oracles (:func:`diagnose`: the clipped estimating equation's zero, the scores'
second moment at the draws' mean and at that zero), one JSON line per dataset and a table.

The defaults (n = 4,000, 4 groups: d = 7, eps = 2) are where the default run makes its interval release
(the released J's forecast signal to noise n mu_J / (32 d^1.5) is 2.8, the rule's threshold 2). With 8
groups (d = 11) at eps = 1 it is 0.71 and the run makes none (measured, 2 datasets); 12,000 rows would
bring it to 2.1, at about 10 minutes a run on this 2-core machine (the steps grow with n, and so does
each step's cost).

The model: group intercepts ``a_g ~ N(mu, tau)`` (centred, as a user writes it), ``mu ~ N(0, 1)``,
``tau ~ HalfNormal(1)``, a slope ``w ~ N(0, 1)`` on one standard-normal covariate, and a logistic
likelihood ``y ~ Bernoulli(logit = a[group] + w x)``; the group index is a per-row keyword. Each
dataset draws its truth from the prior (``mu, tau, a, w``; seed ``s``) and ``n`` rows (groups
uniform). The run: ``dp_infer.fit(model=..., target="posterior", eps, delta=1e-5, clip_norm=2,
seed=90000 + s)``, its defaults otherwise.

The truth is drawn from the prior, so an exact posterior given what was released covers it at the
nominal rate on average over datasets, in every coordinate (the simulation-based-calibration
identity): 0.90 at nominal 0.90 is the oracle, with Monte-Carlo se ``sqrt(0.09 / N)``. Three intervals
per coordinate (unconstrained: ``log tau``), all from the same run:

* **model prior**: ``run.intervals(0.9)``, the default: the release's likelihood times the model's own
  prior, sampled by NUTS (:mod:`dp_infer.diagnostics.model_prior`);
* **Gaussian stand-in**: the same release combined with the prior's per-coordinate Gaussian stand-in
  (what the run reported before; ``mu`` and ``log tau`` fall back to their prior there);
* **tempered**: the tempered draws' 5-95% quantiles.

Also reported: the share of coordinates flagged, the median interval sd per class, and NUTS's
parametrisation and divergences (the funnel: decentred when the centred run diverges).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from benchmarks.model_posterior import hier_centred as hier  # centred group intercepts, as a user writes them

CLASSES = ("group intercept", "mu", "log tau", "slope")

#: the runs' clip on the per-example scores (w.r.t. the prior-whitened latents)
CLIP_NORM = 2.0


def dataset(seed: int, n: int, groups: int):
    """Truth from the prior and rows: ``(X, y, group, truth)``, truth in the unconstrained order of the
    run's coordinates (a[0..G-1], mu, log tau, w)."""
    rng = np.random.default_rng(seed)
    mu, tau, w = rng.normal(), abs(rng.normal()), rng.normal()
    a = mu + tau * rng.normal(size=groups)
    g = rng.integers(0, groups, n)
    X = rng.normal(size=(n, 1))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(a[g] + w * X[:, 0])))).astype(float)
    return X, y, g, np.r_[a, mu, np.log(tau), w]


def classes(groups: int) -> list:
    return ["group intercept"] * groups + ["mu", "log tau", "slope"]


def fitted(seed: int, *, n: int, groups: int, eps: float, clip_norm: float = CLIP_NORM, ess: int | None = None):
    """The benchmark's run on dataset ``seed``: ``(run, X, y, group, truth, wall seconds)``; ``ess``: the run's
    planned effective draws (None: the library's default)."""
    import dp_infer

    X, y, g, truth = dataset(seed, n, groups)
    t0 = time.time()
    run = dp_infer.fit(model=hier, X=X, y=y, target="posterior", eps=eps, delta=1e-5, clip_norm=clip_norm,
                       seed=90000 + seed, model_kwargs={"group": g, "num_groups": groups},
                       index_ranges={"group": groups}, progress_bar=False, **({} if ess is None else {"ess": ess}))
    return run, X, y, g, truth, time.time() - t0


def one(seed: int, *, n: int, groups: int, eps: float, ess: int | None = None) -> dict:
    run, X, y, g, truth, wall = fitted(seed, n=n, groups=groups, eps=eps, ess=ess)
    rel = run.report_extras.get("interval_release")
    out = {"seed": seed, "wall_s": wall, "truth": truth.tolist()}
    if rel is None:
        out["skipped"] = run.report_extras.get("interval_release_skipped")
        return out
    post = rel.get("model_prior_posterior") or {}
    th = np.asarray(run.draws(), dtype=np.float64).reshape(-1, truth.size)  # tempered, unconstrained
    lo_t, hi_t = np.quantile(th, [0.05, 0.95], axis=0)
    out.update(interval_records(rel, truth))
    out.update({
        "names": rel["names"],
        "tempered": {"cover": ((lo_t <= truth) & (truth <= hi_t)).tolist(), "sd": th.std(axis=0).tolist()},
        "nuts": {k: post.get(k) for k in ("parametrisation", "max_rhat", "min_ess", "divergences")},
        "beta_over_n": float(run.plan.beta) / n,
        "release": json.loads(json.dumps(rel, default=lambda v: np.asarray(v).tolist())),  # for --rescore
    })
    return out


def interval_records(rel: dict, truth) -> dict:
    """The default intervals (the release's likelihood under the model's own prior: what ``run.intervals(0.9)``
    reads from the release) and the Gaussian stand-in's, against ``truth``: coverage, sd, flags. Post-processing
    of the stored release only, so a row log's intervals can be read again after a change to the interval code
    (``--rescore``)."""
    from dp_infer.diagnostics.model_prior import model_released_interval

    truth = np.asarray(truth, dtype=np.float64)
    iv = model_released_interval(rel, prob=0.9)
    stand = model_released_interval({k: v for k, v in rel.items() if k != "model_prior_posterior"}, prob=0.9)
    return {"model_prior": {"cover": ((iv.lower <= truth) & (truth <= iv.upper)).tolist(), "sd": iv.sd.tolist(),
                            "flagged": [bool(f) for f in iv.flags], "flags": [f.split(":")[0] for f in iv.flags]},
            "stand_in": {"cover": ((stand.lower <= truth) & (truth <= stand.upper)).tolist(), "sd": stand.sd.tolist(),
                         "flagged": [bool(f) for f in stand.flags]}}


def model_scores(theta, X, y, g, groups: int) -> np.ndarray:
    """Per-row gradients of the model's negative log-likelihood w.r.t. theta (unconstrained order: a[0..G-1],
    mu, log tau, w), written out by hand: ``r = sigmoid(a[g] + w x) - y`` on ``a[g]`` and ``r x`` on ``w``, 0 on
    ``mu`` and ``log tau`` (they enter through the prior only). An oracle for the library's autodiff scores."""
    theta = np.asarray(theta, dtype=np.float64)
    z = theta[g] + theta[-1] * X[:, 0]
    r = 0.5 * (1.0 + np.tanh(0.5 * z)) - y  # the sigmoid, without overflow
    out = np.zeros((y.size, groups + 3))
    out[np.arange(y.size), g] = r
    out[:, -1] = r * X[:, 0]
    return out


def clipped_whitened_scores(theta, scales, X, y, g, groups: int, clip_norm: float) -> np.ndarray:
    """The scores the release averages: w.r.t. ``phi = theta / scales`` (so ``scales`` times the theta-scores),
    each row clipped to ``clip_norm`` in L2."""
    G = model_scores(theta, X, y, g, groups) * np.asarray(scales, dtype=np.float64)
    norm = np.linalg.norm(G, axis=1, keepdims=True)
    return G * np.minimum(1.0, clip_norm / np.maximum(norm, 1e-300))


def clipped_zero(start, scales, X, y, g, groups: int, clip_norm: float, iters: int = 50):
    """``(theta, H)``: the zero of the mean clipped whitened score (the release's estimand) in the likelihood's
    coordinates (``a``, ``w``; ``mu`` and ``log tau`` stay at ``start``), by Newton's method on a central-difference
    Jacobian ``H`` (phi coordinates, returned at the zero; least squares where it is singular), each step halved
    until the mean score's norm falls, and that Jacobian."""
    s = np.asarray(scales, dtype=np.float64)
    lik = list(range(groups)) + [groups + 2]
    phi = np.asarray(start, dtype=np.float64) / s

    def mean_score(ph):
        return clipped_whitened_scores(ph * s, s, X, y, g, groups, clip_norm).mean(axis=0)[lik]

    for _ in range(iters):
        f = mean_score(phi)
        H = np.empty((len(lik), len(lik)))
        for k, j in enumerate(lik):
            e = np.zeros_like(phi)
            e[j] = 1e-6
            H[:, k] = (mean_score(phi + e) - mean_score(phi - e)) / 2e-6
        step = np.linalg.lstsq(0.5 * (H + H.T), f, rcond=None)[0]
        t = 1.0  # halve the step until the mean score's norm falls (a saturated group flattens the equation)
        while t > 1e-6:
            trial = phi.copy()
            trial[lik] -= t * step
            if np.linalg.norm(mean_score(trial)) < np.linalg.norm(f):
                break
            t *= 0.5
        phi = trial
        if np.max(np.abs(t * step)) < 1e-11:
            break
    return phi * s, H


def diagnose(seed: int, *, n: int, groups: int, eps: float, clip_norm: float = CLIP_NORM,
             ess: int | None = None) -> dict:
    """Where dataset ``seed``'s interval release loses the truth, against non-private oracles (rows read freely:
    a diagnostic, not a release). In the likelihood's coordinates (``a``, ``w``), in units of the estimand's own
    sampling sd (the clipped equation's sandwich ``H^-1 J H^-1 / n`` at its zero):

    * ``clip_bias_sds``: the truth's distance from the estimand (the zero of the mean clipped score);
    * ``draws_mean_sds`` / ``path_end_sds`` / ``centre_sds``: the draws' mean, the release's last point and the
      intervals' data centre from the estimand;
    * ``J_ratio``: the clipped scores' second moment at the draws' mean (where the release takes ``J``) over the
      same at the estimand, per coordinate (diagonal): above 1, the release's curvature is too large there, its
      steps too short and its variance too small;
    * ``J_eigenvalues`` at the draws' mean against ``J_floor``, the release's noise floor ``2 sqrt(d) s_J``;
    * ``clipped_share``: rows whose whitened score exceeds the clip at the estimand."""
    from dp_infer.routes.newton_release import noise_floor

    run, X, y, g, truth, wall = fitted(seed, n=n, groups=groups, eps=eps, clip_norm=clip_norm, ess=ess)
    rel = run.report_extras.get("interval_release")
    out = {"seed": seed, "truth": truth.tolist(), "wall_s": wall, "clip_norm": clip_norm, "ess": ess,
           "beta_over_n": float(run.plan.beta) / n}
    if rel is None:
        out["skipped"] = f"no release: {run.report_extras.get('interval_release_skipped')}"
        return out
    s = np.diag(np.asarray(rel["chol"], dtype=np.float64))
    lik = list(range(groups)) + [groups + 2]
    zero, H = clipped_zero(truth, s, X, y, g, groups, clip_norm)
    ev = np.linalg.eigvalsh(0.5 * (H + H.T))
    if ev[0] <= 1e-9 * ev[-1]:  # e.g. a group whose rows all share one label: the estimand is at infinity
        out["skipped"] = ("the mean clipped score has no finite zero (its Jacobian is singular where the search ends: "
                          "a group whose rows all share one label?)")
        return out
    Gz = clipped_whitened_scores(zero, s, X, y, g, groups, clip_norm)[:, lik]
    Jz = Gz.T @ Gz / n
    Hi = np.linalg.inv(0.5 * (H + H.T))
    sd = s[lik] * np.sqrt(np.diag(Hi @ Jz @ Hi) / n)  # theta units
    mean = np.asarray(rel["path"][0], dtype=np.float64)
    G0 = clipped_whitened_scores(mean, s, X, y, g, groups, clip_norm)[:, lik]
    J0 = G0.T @ G0 / n
    reported = run.intervals(0.9)  # data_centre: the release's own (the model prior replaces centre, sd, ends)

    def sds(v):
        return np.round((np.asarray(v, dtype=np.float64)[lik] - zero[lik]) / sd, 2).tolist()

    raw = np.linalg.norm(model_scores(zero, X, y, g, groups) * s, axis=1)
    out.update({"names": [rel["names"][j] for j in lik] if rel.get("names") else None,
                "estimand": zero[lik].tolist(), "estimand_sd": sd.tolist(),
                "clip_bias_sds": sds(truth), "draws_mean_sds": sds(mean),
                "path_end_sds": sds(rel["path"][-1]), "centre_sds": sds(reported.data_centre),
                "J_ratio": np.round(np.diag(J0) / np.diag(Jz), 2).tolist(),
                "J_eigenvalues": np.round(np.linalg.eigvalsh(J0), 4).tolist(),
                "J_floor": noise_floor(truth.size, float(rel["score_sd"])),
                "clipped_share": float(np.mean(raw > clip_norm)),
                "covered": [bool(v) for v in
                            (reported.lower[lik] <= truth[lik]) & (truth[lik] <= reported.upper[lik])]})
    return out


def diagnosis_table(rows: list) -> str:
    """:func:`diagnose`'s rows as a markdown table: per dataset, the largest |distance| from the estimand (in its
    sds, over the likelihood's coordinates) of the truth, the draws' mean, the release's last point and the
    intervals' data centre; the largest J ratio; J's smallest eigenvalue at the draws' mean over its noise floor;
    the share of rows clipped at the estimand; the coordinates covered."""
    lines = ["| dataset | max \\|truth - estimand\\| | draws' mean | last point | data centre | max J ratio | "
             "J's smallest eigenvalue / floor | rows clipped | covered |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "estimand" not in r:
            lines.append(f"| {r['seed']} | {r.get('skipped')} | | | | | | | |")
            continue
        m = [max(abs(v) for v in r[k]) for k in ("clip_bias_sds", "draws_mean_sds", "path_end_sds", "centre_sds")]
        lines.append(f"| {r['seed']} | " + " | ".join(f"{v:.1f}" for v in m)
                     + f" | {max(r['J_ratio']):.2f} | {min(r['J_eigenvalues']) / r['J_floor']:.2f} | "
                     f"{r['clipped_share']:.3f} | {sum(r['covered'])} of {len(r['covered'])} |")
    return "\n".join(lines)


def summarise(rows: list, groups: int) -> dict:
    done = [r for r in rows if "model_prior" in r]
    kinds = np.array(classes(groups))
    res = {"datasets": len(done), "skipped": len(rows) - len(done),
           "skip_reasons": sorted({str(r.get("skipped")) for r in rows if "model_prior" not in r})}
    if not done:
        return res
    for method in ("model_prior", "stand_in", "tempered"):
        cov = np.array([r[method]["cover"] for r in done], dtype=float)
        sd = np.array([r[method]["sd"] for r in done], dtype=float)
        per = {}
        for c in ("all",) + CLASSES:
            cols = np.ones(kinds.size, bool) if c == "all" else kinds == c
            p = float(cov[:, cols].mean()) if done else float("nan")
            by_ds = cov[:, cols].mean(axis=1)
            per[c] = {"coverage": p, "se_pooled": float(np.sqrt(p * (1 - p) / cov[:, cols].size)) if done else None,
                      "se_datasets": float(by_ds.std(ddof=1) / np.sqrt(len(done))) if len(done) > 1 else None,
                      "median_sd": float(np.median(sd[:, cols])) if done else None,
                      "N": int(cov[:, cols].size)}
            if method != "tempered":
                fl = np.array([r[method]["flagged"] for r in done], dtype=bool)
                per[c]["flagged"] = float(fl[:, cols].mean())
                ok = ~fl[:, cols]
                pu = float(cov[:, cols][ok].mean()) if ok.any() else float("nan")
                per[c]["unflagged"] = {"coverage": pu, "N": int(ok.sum()),
                                       "se": float(np.sqrt(pu * (1 - pu) / ok.sum())) if ok.any() else None}
        res[method] = per
    # conditional on the truth's size (not SBC-calibrated per stratum; a diagnostic of where coverage is lost)
    T = np.array([r["truth"] for r in done], dtype=float)
    big = (np.abs(T[:, :groups]).max(axis=1) > 2.0) | (np.abs(T[:, -1]) > 1.5)
    cov = np.array([r["model_prior"]["cover"] for r in done], dtype=float)
    fl = np.array([r["model_prior"]["flagged"] for r in done], dtype=bool)
    res["by_effect_size"] = {name: {"datasets": int(m.sum()), "coverage": float(cov[m].mean()) if m.any() else None,
                                    "unflagged": float(cov[m][~fl[m]].mean()) if (~fl[m]).any() else None,
                                    "flagged": float(fl[m].mean()) if m.any() else None}
                             for name, m in (("large (max |a_g| > 2 or |w| > 1.5)", big), ("moderate", ~big))}
    res["nuts_parametrisation"] = {p: sum(1 for r in done if (r["nuts"]["parametrisation"] or "").startswith(p))
                                   for p in ("centred", "non-centred")}
    res["nuts_divergent_runs"] = sum(1 for r in done if (r["nuts"]["divergences"] or 0) > 0)
    res["nuts_max_rhat"] = max((r["nuts"]["max_rhat"] or 0.0) for r in done) if done else None
    res["median_wall_s"] = float(np.median([r["wall_s"] for r in rows])) if rows else None
    res["median_beta_over_n"] = float(np.median([r["beta_over_n"] for r in done])) if done else None
    return res


def to_markdown(s: dict, command: str) -> str:
    lines = [f"Command: `{command}`", "",
             f"{s['datasets']} datasets (truth drawn from the prior), {s['skipped']} without a release; coverage at "
             "nominal 0.90 +- the pooled se / the se over datasets (N coordinates); median interval sd; share flagged:", "",
             "| class | model prior (default) | sd | flagged | Gaussian stand-in | sd | flagged | tempered draws | sd |",
             "|---|---|---|---|---|---|---|---|---|"]
    unfl = []
    for c in ("all",) + CLASSES:
        e = s["model_prior"][c]["unflagged"]
        unfl.append(f"{c} {e['coverage']:.3f} +- {(e['se'] or 0):.3f} ({e['N']})")
    for c in ("all",) + CLASSES:
        cells = []
        for m in ("model_prior", "stand_in", "tempered"):
            e = s[m][c]
            cells.append(f"{e['coverage']:.3f} +- {e['se_pooled']:.3f} / {e['se_datasets']:.3f} ({e['N']})")
            cells.append(f"{e['median_sd']:.3f}")
            if m != "tempered":
                cells.append(f"{e['flagged']:.2f}")
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines += ["", "The default's coverage on the coordinates it does not flag (+- pooled se; N): " + "; ".join(unfl)]
    lines += ["", "By the truth's size (the default's coverage, on its unflagged coordinates, share flagged): " + "; ".join(
        f"{k}: {v['datasets']} datasets, {v['coverage']:.3f}, {v['unflagged']:.3f}, {v['flagged']:.2f}"
        for k, v in s["by_effect_size"].items() if v["datasets"])]
    lines += ["", f"NUTS kept: {s['nuts_parametrisation']}; runs with any divergence: {s['nuts_divergent_runs']}; "
                  f"max split R-hat {s['nuts_max_rhat']:.3f}; median wall {s['median_wall_s']:.0f} s a dataset; "
                  f"median beta / n {s['median_beta_over_n']:.4f}"]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.hierarchical_intervals")
    p.add_argument("--datasets", type=int, default=50)
    p.add_argument("--n", type=int, default=4000)
    p.add_argument("--groups", type=int, default=4)
    p.add_argument("--eps", type=float, default=2.0)
    p.add_argument("--json", help="row log (one JSON object a line); rows already there are kept (resume)")
    p.add_argument("--diagnose", help="comma-separated seeds: print where each one's release loses the truth "
                                      "(diagnose(): non-private oracles) instead of the coverage run")
    p.add_argument("--clip-norm", type=float, default=CLIP_NORM, help="with --diagnose: the runs' clip_norm")
    p.add_argument("--ess", type=int, default=None, help="the runs' planned effective draws (default: the library's)")
    p.add_argument("--start", type=int, default=0, help="the first dataset's seed (run seeds start..datasets-1)")
    p.add_argument("--rescore", action="store_true", help="with --json: read the logged rows' intervals again from "
                                                          "their stored releases (post-processing: no chain is run)")
    a = p.parse_args(argv)
    if a.diagnose:
        rows = []
        for seed in (int(v) for v in a.diagnose.split(",")):
            rows.append(diagnose(seed, n=a.n, groups=a.groups, eps=a.eps, clip_norm=a.clip_norm, ess=a.ess))
            print(json.dumps(rows[-1]), flush=True)
        print(diagnosis_table(rows))
        return
    rows = []
    if a.json and os.path.exists(a.json):
        rows = [json.loads(line) for line in open(a.json) if line.strip()]
    if a.rescore:
        if not rows:
            raise SystemExit("--rescore needs --json with a row log")
        rows = [dict(r, **interval_records(r["release"], r["truth"])) if "release" in r else r for r in rows]
    have = {r["seed"] for r in rows}
    for s in range(a.start, a.datasets):
        if s in have or a.rescore:
            continue
        r = one(s, n=a.n, groups=a.groups, eps=a.eps, ess=a.ess)
        rows.append(r)
        if a.json:
            with open(a.json, "a") as f:
                f.write(json.dumps(r) + "\n")
        print(f"dataset {s}: {r['wall_s']:.0f} s, nuts {r.get('nuts')}", flush=True)
    summary = summarise([r for r in rows if a.start <= r["seed"] < a.datasets], a.groups)
    command = "python -m benchmarks.hierarchical_intervals " + " ".join(sys.argv[1:] if argv is None else argv)
    print(json.dumps(summary, indent=1))
    if summary["datasets"]:
        print(to_markdown(summary, command))


if __name__ == "__main__":
    main()
