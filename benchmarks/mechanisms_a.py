"""Mechanisms of issue 15 (part A): non-smooth losses, public-data mirror descent, iterated EM.

``nonsmooth`` -- hinge-loss SVM (test accuracy) and median regression of hours-per-week (test
pinball loss, tau = 0.5) on Adult at eps in {0.5, 1, 2}, delta = 1e-5:
  * ``proximal``: ``dp_infer.fit`` on the hinge / pinball loss (no smoothness -> the proximal
    sampler, exact linearised oracle, one chain, final position released) on a uniformly random
    subsample of ``n_sub`` training rows (its cost grows like (n s)^2: the full data need ~1e5+ steps
    of a full pass each, see ``planned_steps_full``);
  * ``langevin_smoothed``: ``fit`` on the smoothed twin (width 0.5; trajectory route, 2 chains)
    on the same subsample and on all rows;
  * ``dpgd``: full-batch DP (sub)gradient descent on the kinked loss, T = 200, lr = 2, clip 1
    (exact GDP composition), on the subsample and on all rows.
``public`` -- logistic regression on Adult: a public split of 1, 2 or 5% of the training rows,
chosen uniformly at random (fixed permutation), the rest private. PDA-DPMD (quadratic mirror map
= public logistic Hessian at the public minimiser + ridge 1e-3, normalised as in the thesis) vs
DP-GD warm-started at the same public minimiser, T = 200, clip 1, over a grid of step sizes
(not tuned privately: the table shows every step size, as the thesis grid-searched too); the
public minimiser alone and cold-start DP-GD for reference.
``iterated_em`` -- mean estimation in p = 2 (|x| <= 1, C_0 the unit ball, eps = 1): excess
empirical risk of the iterated exponential mechanism (explicit radii) vs the single one.
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from dp_infer.privacy.conversions import gdp_mu

DELTA = 1e-5


def _dpgd_generic(loss, X, y, eps, delta, seed, T=200, lr=2.0, clip=1.0, l2=0.0):
    """Full-batch DP gradient descent on any per-example loss (clipped per-example (sub)gradients)."""
    n, d = X.shape
    sigma = 2.0 * clip / (gdp_mu(eps, delta) / math.sqrt(T))
    Xj, yj = jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32)
    grads = jax.vmap(jax.grad(loss.fn), in_axes=(None, 0, 0))

    @jax.jit
    def run(key):
        def step(th, k):
            g = grads(th, Xj, yj)
            g = g * jnp.minimum(1.0, clip / jnp.maximum(jnp.linalg.norm(g, axis=1, keepdims=True), 1e-12))
            return th - lr * (g.sum(axis=0) + sigma * jax.random.normal(k, (d,))) / n, None

        return jax.lax.scan(step, jnp.zeros(d), jax.random.split(key, T))[0]

    return np.asarray(run(jax.random.PRNGKey(seed)))


def _quantile_data(a, idx_cols=None):
    """Median regression target: hours-per-week (mapped to [-1, 1]); features: every other column."""
    j = a.feature_names.index("hours-per-week")
    width = math.sqrt(1 + 8 + 8)  # load_adult divides rows by this

    def split(X):
        y = X[:, j] * width
        return np.delete(X, j, axis=1), y

    Xtr, ytr = split(a.X_train)
    Xte, yte = split(a.X_test)
    return Xtr, ytr, Xte, yte


def _pinball(theta, X, y, tau=0.5):
    r = y - X @ theta
    return float(np.mean(np.maximum(tau * r, (tau - 1) * r)))


def _nonsmooth(quick, log):
    import dp_infer
    from dp_infer.datasets import load_adult
    from dp_infer.losses.nonsmooth import hinge, quantile, smoothed_hinge, smoothed_quantile
    from dp_infer.infer.nonprivate import accuracy, minimize_loss
    from dp_infer.infer.proximal import proximal_plan_for

    a = load_adult()
    eps_list = [1.0] if quick else [0.5, 1.0, 2.0]
    seeds = [0, 1] if quick else [0, 1, 2]
    n_sub = 500 if quick else 2000
    sub = np.random.default_rng(12345).permutation(a.X_train.shape[0])[:n_sub]
    Xq, yq, Xqt, yqt = _quantile_data(a)
    tasks = {
        "hinge_svm": dict(loss=hinge(), smooth=smoothed_hinge(0.5), X=a.X_train, y=a.y_train, Xt=a.X_test,
                          yt=a.y_test, metric=lambda th, X, y: accuracy(th, X, y), metric_name="test accuracy",
                          reference=smoothed_hinge(0.01)),
        "median_regression": dict(loss=quantile(0.5), smooth=smoothed_quantile(0.5, 0.5), X=Xq, y=yq, Xt=Xqt,
                                  yt=yqt, metric=_pinball, metric_name="test pinball loss (tau = 0.5)",
                                  reference=smoothed_quantile(0.5, 0.01)),
    }
    out = {"eps": eps_list, "delta": DELTA, "seeds": seeds, "n_sub": n_sub, "n_full": int(a.X_train.shape[0]),
           "tasks": {}}
    for name, t in tasks.items():
        X, y, Xt, yt, metric = t["X"], t["y"], t["Xt"], t["yt"], t["metric"]
        th_np, _, _ = minimize_loss(t["reference"], X, y, l2=1e-6)
        res = {"metric": t["metric_name"], "nonprivate_full": metric(th_np, Xt, yt), "methods": {}, "timing_s": {},
               "planned_steps_full": {}, "proximal_info": {}}
        for e in eps_list:
            try:
                res["planned_steps_full"][str(e)] = proximal_plan_for(t["loss"], X.shape[0], X.shape[1], eps=e,
                                                                      delta=DELTA, max_steps=1e15).num_steps
            except ValueError as err:
                res["planned_steps_full"][str(e)] = str(err)

        def sweep(label, f):
            rows, t0 = [], time.perf_counter()
            for e in eps_list:
                vals = [f(e, s) for s in seeds]
                rows.append({"eps": e, "mean": float(np.mean(vals)), "sd": float(np.std(vals, ddof=1)), "values": vals})
                log(f"  [mechanisms_a] {name} {label} eps={e}: {rows[-1]['mean']:.4f} +- {rows[-1]['sd']:.4f}")
            res["methods"][label] = rows
            res["timing_s"][label] = time.perf_counter() - t0

        def prox(e, s):
            run = dp_infer.fit(t["loss"], X[sub], y[sub], eps=e, delta=DELTA, seed=1000 + s)
            res["proximal_info"][f"{e}/{s}"] = {"num_steps": run.plan.num_steps, "rgo_scale": run.plan.rgo_scale,
                                                "seconds": run.elapsed_seconds,
                                                "proposals_per_step": run.debug_info["proposals_per_step"]}
            return metric(run.estimate(), Xt, yt)

        sweep(f"proximal (n={n_sub})", prox)
        sweep(f"langevin_smoothed (n={n_sub})", lambda e, s: metric(
            dp_infer.fit(t["smooth"], X[sub], y[sub], eps=e, delta=DELTA, num_chains=2, seed=2000 + s,
                         progress_bar=False).estimate(), Xt, yt))
        sweep("langevin_smoothed (all rows)", lambda e, s: metric(
            dp_infer.fit(t["smooth"], X, y, eps=e, delta=DELTA, num_chains=2, seed=3000 + s,
                         progress_bar=False).estimate(), Xt, yt))
        sweep(f"dpgd (n={n_sub})", lambda e, s: metric(_dpgd_generic(t["loss"], X[sub], y[sub], e, DELTA, 4000 + s), Xt, yt))
        sweep("dpgd (all rows)", lambda e, s: metric(_dpgd_generic(t["loss"], X, y, e, DELTA, 5000 + s), Xt, yt))
        out["tasks"][name] = res
    return out


def _public(quick, log):
    from benchmarks.utility import dpgd
    from dp_infer.datasets import load_adult
    from dp_infer.losses import logistic
    from dp_infer.mechanisms import dp_gd_warm_start, pda_dpmd
    from dp_infer.infer.nonprivate import accuracy

    a = load_adult()
    fracs = [0.02] if quick else [0.01, 0.02, 0.05]
    eps_list = [1.0] if quick else [0.5, 1.0, 2.0]
    lrs = [2.0, 8.0] if quick else [2.0, 8.0, 32.0]
    seeds = [0] if quick else [0, 1, 2]
    perm = np.random.default_rng(2024).permutation(a.X_train.shape[0])
    out = {"fractions": fracs, "eps": eps_list, "step_sizes": lrs, "seeds": seeds, "rows": [],
           "split": "uniformly random permutation (numpy default_rng(2024)) of the training rows; the first "
                    "fraction is public, the rest private"}
    loss = logistic()
    for f in fracs:
        k = int(round(f * len(perm)))
        pub, priv = perm[:k], perm[k:]
        Xp, yp, X, y = a.X_train[pub], a.y_train[pub], a.X_train[priv], a.y_train[priv]
        for e in eps_list:
            row = {"fraction": f, "n_public": k, "n_private": len(priv), "eps": e}
            for lr in lrs:
                for label, fn in (("pda_dpmd", pda_dpmd), ("dpgd_warm", dp_gd_warm_start)):
                    accs, t0 = [], time.perf_counter()
                    for s in seeds:
                        r = fn(loss, X, y, Xp, yp, eps=e, delta=DELTA, num_steps=200, step_size=lr, clip_norm=1.0,
                               public_l2=1e-3, seed=100 * s + 7)
                        accs.append(accuracy(r.value, a.X_test, a.y_test))
                        row["public_only"] = accuracy(np.asarray(r.params["theta_public"]), a.X_test, a.y_test)
                    row[f"{label}@{lr:g}"] = float(np.mean(accs))
                    row[f"{label}@{lr:g}_sd"] = float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0
                    row[f"{label}@{lr:g}_s"] = time.perf_counter() - t0
            row["dpgd_cold@2"] = float(np.mean([accuracy(dpgd(X, y, e, DELTA, 300 + s), a.X_test, a.y_test)
                                                for s in seeds]))
            log(f"  [mechanisms_a] public {f:.0%} eps={e}: " + ", ".join(
                f"{k2}={v:.4f}" for k2, v in row.items() if isinstance(v, float) and "@" in k2 and not k2.endswith(("_sd", "_s"))))
            out["rows"].append(row)
    return out


def _iterated(quick, log):
    from dp_infer.domains import L2Ball
    from dp_infer.losses import LossConstants, PerExampleLoss
    from dp_infer.mechanisms import exponential_mechanism, iterated_exponential_mechanism

    loss = PerExampleLoss("mean_sq", lambda t, x, y: 0.5 * jnp.sum((t - x) ** 2),
                          LossConstants(lipschitz=2.0, grad_diff=2.0, smoothness=1.0, strong_convexity=1.0), 1.0)
    p, eps = 2, 1.0
    ns = [10**3, 10**4] if quick else [10**3, 10**4, 10**5]
    reps = 10 if quick else 30
    rng = np.random.default_rng(7)
    out = {"p": p, "eps": eps, "reps": reps, "rows": []}
    for n in ns:
        X = rng.normal(size=(n, p))
        X = 0.5 * X / np.maximum(1, np.linalg.norm(X, axis=1, keepdims=True)) + 0.2
        y = np.zeros(n)
        xbar = X.mean(axis=0)
        t0 = time.perf_counter()
        it = [iterated_exponential_mechanism(loss, X, y, eps=eps, domain=L2Ball(p, 1.0), seed=s, anchor=xbar)
              for s in range(reps)]
        si = [exponential_mechanism(loss, X, y, eps=eps, domain=L2Ball(p, 1.0), seed=s, anchor=xbar) for s in range(reps)]
        ex = lambda rs: [0.5 * float(np.sum((r.value - xbar) ** 2)) for r in rs]  # noqa: E731
        row = {"n": n, "rounds": len(it[0].params["rounds"]), "iterated": float(np.mean(ex(it))),
               "iterated_se": float(np.std(ex(it), ddof=1) / math.sqrt(reps)), "single": float(np.mean(ex(si))),
               "single_se": float(np.std(ex(si), ddof=1) / math.sqrt(reps)),
               "single_theory": p * 2.0 / (eps * n), "final_diameter_bound": it[0].params["rounds"][-1]["diameter_bound"],
               "seconds": time.perf_counter() - t0}
        log(f"  [mechanisms_a] iterated EM n={n}: iterated {row['iterated']:.3g}, single {row['single']:.3g}")
        out["rows"].append(row)
    return out


def run(quick: bool, log=print):
    res = {}
    for name, f in (("iterated_em", _iterated), ("public", _public), ("nonsmooth", _nonsmooth)):
        t0 = time.perf_counter()
        res[name] = f(quick, log)
        res[name]["runtime_s"] = time.perf_counter() - t0
    return res


def markdown(m: dict) -> list[str]:
    """Markdown of this section for benchmarks/report.py (non-smooth losses, public data, iterated EM)."""
    L: list[str] = []
    ns = m.get("nonsmooth", {})
    for task, r in ns.get("tasks", {}).items():
        eps = ns["eps"]
        L += [f"## Non-smooth loss on Adult: {task} ({r['metric']}, mean ± sd over seeds {ns['seeds']}, "
              f"delta = {ns['delta']:g})", "",
              "| method | " + " | ".join(f"eps={e:g}" for e in eps) + " | time (s) |", "|---|" + "---|" * (len(eps) + 1)]
        for name, rows in r["methods"].items():
            L.append(f"| {name} | " + " | ".join(f"{x['mean']:.4f} ± {x['sd']:.4f}" for x in rows)
                     + f" | {r['timing_s'].get(name, 0):.0f} |")
        L.append(f"| non-private (all {ns['n_full']} rows) | " + " | ".join(f"{r['nonprivate_full']:.4f}" for _ in eps) + " | |")
        steps = ", ".join(f"eps={k}: {v:.3g}" if isinstance(v, (int, float)) else f"eps={k}: {v}"
                          for k, v in r["planned_steps_full"].items())
        info = r.get("proximal_info", {})
        if info:
            pps = [v["proposals_per_step"] for v in info.values()]
            L.append(f"\nProximal sampler on the subsample: {min(v['num_steps'] for v in info.values())}-"
                     f"{max(v['num_steps'] for v in info.values())} steps, oracle proposals per step "
                     f"{min(pps):.2f}-{max(pps):.2f}. Planned steps on all {ns['n_full']} rows (each a pass over "
                     f"them): {steps}.")
        L.append("")
    pu = m.get("public", {})
    if pu.get("rows"):
        lrs = pu["step_sizes"]
        L += ["## Public data: PDA-DPMD vs DP-GD warm-started on public data (Adult logistic, test accuracy, "
              f"T = 200, delta = {DELTA:g}, seeds {pu['seeds']})", "", f"Public split: {pu['split']}.", "",
              "| public | eps | public minimiser | DP-GD cold (lr 2) | "
              + " | ".join(f"PDA-DPMD lr {lr:g} | DP-GD warm lr {lr:g}" for lr in lrs) + " |",
              "|---|---|---|---|" + "---|---|" * len(lrs)]
        for r in pu["rows"]:
            L.append(f"| {r['fraction']:.0%} ({r['n_public']}) | {r['eps']:g} | {r['public_only']:.4f} | "
                     f"{r['dpgd_cold@2']:.4f} | " + " | ".join(
                         f"{r[f'pda_dpmd@{lr:g}']:.4f} | {r[f'dpgd_warm@{lr:g}']:.4f}" for lr in lrs) + " |")
        L.append("")
    it = m.get("iterated_em", {})
    if it.get("rows"):
        L += [f"## Iterated vs single exponential mechanism (mean estimation, p = {it['p']}, eps = {it['eps']:g}, "
              f"pure DP, {it['reps']} runs)", "",
              "| n | rounds | iterated excess risk | single excess risk | single theory 2p/(eps n) | "
              "final diameter bound | s |", "|---|---|---|---|---|---|---|"]
        for r in it["rows"]:
            L.append(f"| {r['n']} | {r['rounds']} | {r['iterated']:.3g} ± {r['iterated_se']:.2g} | "
                     f"{r['single']:.3g} ± {r['single_se']:.2g} | {r['single_theory']:.3g} | "
                     f"{r['final_diameter_bound']:.3g} | {r['seconds']:.0f} |")
        L.append("")
    return L
