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
            kernel="langevin", adapt_metric=None, mesh=None):
    n, d = X.shape
    fc = forecast_posterior(loss, n, d, eps=eps, delta=DELTA, prior_precision=prior, ess=ess, rows=rows,
                            clip_radius=clip_radius, kernel=kernel, adapt_metric=adapt_metric)
    t0 = time.perf_counter()
    run = fit_posterior(loss, X, y, eps=eps, delta=DELTA, prior_precision=prior, ess=ess, rows=rows, seed=seed,
                        progress_bar=False, clip_radius=clip_radius, kernel=kernel, adapt_metric=adapt_metric,
                        mesh=mesh)
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
        row.update(_noise_aware(run, X_test, y_test, sd0))
    row["_run"] = run
    return row


def _noise_aware(run, X_test, y_test, sd0) -> dict:
    """The noise-aware interval's centre (post-processing of the same draws) as a point estimate,
    and its width over the untempered posterior's; its refusal (e.g. a prior share above its
    bound) is recorded, not hidden."""
    try:
        iv = run.noise_aware_interval(0.9)
    except ValueError as e:
        return {"noise_aware": f"refused: {str(e).splitlines()[0][:160]}"}
    from .posterior_metrics import accuracy_of

    return {"noise_aware": "ok", "noise_aware_accuracy": accuracy_of(iv.centre, X_test, y_test),
            "noise_aware_width_ratio_median": float(np.median(iv.sd / sd0))}


def offsets(run, X, y, theta_map, sd0) -> dict:
    """NON-PRIVATE diagnostics of a clipped run on synthetic data, in untempered posterior sds
    (median and max over coordinates) against the untempered MAP: the draws' mean (what "draws
    within 0.1 sd" is checked with); for comparison, the mode DP-SGD's clip of the derivative
    (``clip(s - y, -a, a)``, the logistic link before 2026-11-27) would target at the run's own final
    metric, levels and beta, and the share of rows it clips there; and the mode at the same beta and
    prior without any clip (the prior's own pull)."""
    flat = run.draws().reshape(-1, X.shape[1])
    out = {"mean_offset_median": float(np.median(np.abs(flat.mean(0) - theta_map) / sd0)),
           "mean_offset_max": float(np.max(np.abs(flat.mean(0) - theta_map) / sd0))}
    post = run.plan.posterior
    tau = post.clip_tau
    if tau is None:
        return out
    from dp_infer.routes.posterior import preconditioner_chol

    n, d = X.shape
    beta, lam = run.plan.beta, np.asarray(run.plan.prior_precision, dtype=np.float64) * np.ones(d)

    def mode(a):
        th = theta_map.copy()
        for _ in range(60):
            p = 1.0 / (1.0 + np.exp(-X @ th))
            r = p - y
            inside = np.abs(r) <= a
            g = beta * X.T @ np.clip(r, -a, a) / n + lam * th
            H = beta * (X * np.where(inside, p * (1 - p), 0.0)[:, None]).T @ X / n + np.diag(lam)
            step = np.linalg.solve(H, g)
            th = th - step
            if np.max(np.abs(step)) < 1e-12:
                break
        return th, float(1.0 - inside.mean())

    th_clip, share = mode(tau / np.linalg.norm(X @ preconditioner_chol(run.plan), axis=1))
    th_temp, _ = mode(np.full(n, np.inf))  # the same beta and prior, no clip: the prior's own pull
    out.update({"dp_sgd_clip_mode_offset_median": float(np.median(np.abs(th_clip - theta_map) / sd0)),
                "dp_sgd_clip_mode_offset_max": float(np.max(np.abs(th_clip - theta_map) / sd0)),
                "tempered_mode_offset_max": float(np.max(np.abs(th_temp - theta_map) / sd0)),
                "dp_sgd_clip_row_share_at_mode": share})
    return out


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
        r.pop("_run")
        log(json.dumps(r))
        rows.append(r)
    return rows


def plan_table(eps_list, log=print):
    """Plans only (no sampling) on the FULL Adult training set: the private second moment is
    released (a real release, seed fixed) and the run's plan made, as fit_posterior does; with
    and without the clip. Cheap: the figures that need no chain."""
    import jax

    from dp_infer.routes.posterior import plan_posterior
    from dp_infer.releases.second_moment import private_second_moment

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
        r.pop("_run")
        r["factor"] = f
        log(json.dumps(r))
        out.append(r)
    return out


def synthetic(log=print, kernel="underdamped", chains_up_to=1_000_000, sizes=(10_000, 100_000, 1_000_000),
              shard_from=None, compare_one_device=False):
    """Synthetic logistic, d = 10, eps = 1: the plan's beta / n against the formula at n = 1e4, 1e5,
    1e6 (the plan caps beta at n, the rest widens the clip radius), and chains (clipped, adapted
    metric) up to ``chains_up_to`` rows: the draws' sd against the untempered Laplace sd, and the
    draws' mean and the clipped target's mode against the untempered MAP (:func:`offsets`).
    From ``shard_from`` rows on, the rows are sharded over every device (``mesh="auto"``; on a CPU,
    ``XLA_FLAGS=--xla_force_host_platform_device_count=K`` simulates K devices); with
    ``compare_one_device`` the same run (same seed) on one device too: the largest difference of
    the draws."""
    import jax

    out = []
    d = 10
    loss = losses.logistic(row_norm=math.sqrt(d))
    for n in sizes:
        fc = forecast_posterior(loss, n, d, eps=1.0, delta=DELTA, prior_precision=1.0, clip_radius="auto",
                                kernel=kernel)
        r = {"n": n, "d": d, "eps": 1.0, "forecast_beta_over_n": fc.beta_over_n,
             "formula_beta_over_n": formula_beta_over_n(n, 1.0, math.sqrt(d), 400), "forecast_steps": fc.num_steps}
        if n <= chains_up_to:
            X, y = _synthetic_data(n, d)
            th0, C0 = map_laplace(X, y, 1.0)
            sd0 = np.sqrt(np.diag(C0))
            sharded = shard_from is not None and n >= shard_from
            r.update(one_run(loss, X, y, None, None, eps=1.0, rows=None, sd0=sd0, seed=3, prior=1.0, kernel=kernel,
                             mesh="auto" if sharded else None))
            run = r.pop("_run")
            r["devices"] = jax.device_count() if sharded else 1
            if sharded:
                r["placement"] = run.report()["potential"]["placement"]
            if sharded and compare_one_device:
                t0 = time.perf_counter()
                one = fit_posterior(loss, X, y, eps=1.0, delta=DELTA, prior_precision=1.0, ess=400, seed=3,
                                    progress_bar=False, clip_radius="auto", kernel=kernel)
                r["one_device_seconds"] = time.perf_counter() - t0
                r["one_device_max_abs_diff"] = float(np.max(np.abs(one.theta - run.theta)))
                r["draws_sd"] = float(np.median(run.theta.reshape(-1, d).std(axis=0)))
            r.update(offsets(run, X, y, th0, sd0))
        log(json.dumps(r))
        out.append(r)
    return out


def rhat_floor(dim: int = 108, chains: int = 4, draws: int = 1000, reps: int = 20, ess_list=(400, 600, 1000, 2000),
               seed: int = 0, log=print):
    """What max R-hat over ``dim`` coordinates a PERFECT sampler shows at a given bulk ESS: ``chains``
    stationary AR(1) chains (started in the stationary law, so nothing is left to converge) whose
    per-coordinate ESS is the given total, ArviZ's rank-normalised split R-hat, ``reps`` repetitions
    (median and 90th percentile of the max). No privacy, no data: the floor the R-hat target meets."""
    import arviz as az

    rng = np.random.default_rng(seed)
    out = []
    for ess in ess_list:
        e = ess / chains
        rho = (draws - e) / (draws + e)  # AR(1) with N (1 - rho) / (1 + rho) = e per chain
        mx = []
        for _ in range(reps):
            x = np.empty((chains, draws, dim))
            x[:, 0] = rng.normal(size=(chains, dim))
            for t in range(1, draws):
                x[:, t] = rho * x[:, t - 1] + math.sqrt(1 - rho * rho) * rng.normal(size=(chains, dim))
            mx.append(float(np.max(np.asarray(az.rhat(x)))))
        r = {"ess": ess, "dim": dim, "chains": chains, "max_rhat_median": float(np.median(mx)),
             "max_rhat_q90": float(np.quantile(mx, 0.9))}
        log(json.dumps(r))
        out.append(r)
    return out


def _numpyro_adult():
    """``(adult_model, data, model loss, smoothness)``: the Adult logistic model written in NumPyro
    (prior N(0, 1/0.17)) and its per-example curvature bound ``0.25 s^2 max ||x||^2`` in the
    prior-whitened coordinates over the admissible rows."""
    import numpyro
    import numpyro.distributions as dist

    from dp_infer.infer.fit_model import prepare_model

    prior_sd = 1.0 / math.sqrt(PRIOR_PRECISION)

    def adult_model(X=None, y=None):
        w = numpyro.sample("w", dist.Normal(0.0, prior_sd).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)

    a = load_adult_natural()
    smooth = 0.25 * prior_sd ** 2 * a.rows.max_norm() ** 2
    ml, *_ = prepare_model(adult_model, a.X_train, a.y_train, 1.0, smooth, None, None, None, "X", "y", None, None)
    return adult_model, a, ml, smooth


def numpyro_adult_cost(eps_list, log=print):
    """The same Adult logistic model written in NumPyro (``fit(model=..., target="posterior")``):
    its plan at each eps (prior N(0, 1/0.17), clip_norm 1 in the prior-whitened metric, curvature
    bound ``0.25 s^2 max ||x||^2`` over the admissible rows, kinetic kernel, ESS 400) and the
    measured cost of one gradient of its potential (4 chains, jitted, best of 3 blocks of 10): the
    chains' expected wall time on this machine. No chain is run (see docs/results.md)."""
    import jax
    import jax.numpy as jnp

    from dp_infer.infer.model_posterior_plan import plan_model_posterior
    from dp_infer.potentials import GibbsPotential

    _, a, ml, smooth = _numpyro_adult()
    X, y = a.X_train, a.y_train
    out, grad_s = [], None
    for eps in eps_list:
        plan, scales, loss = plan_model_posterior(ml, X.shape[0], eps=eps, delta=DELTA, clip_norm=1.0, ess=400,
                                                  kernel="underdamped", smoothness=smooth)
        if grad_s is None:
            s = jnp.asarray(scales, dtype=jnp.float32)
            pot = GibbsPotential(loss, jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32), plan.beta,
                                 prior_potential=lambda phi: ml.prior_potential(s * phi))
            g = jax.jit(jax.vmap(jax.grad(pot)))
            p = jnp.zeros((4, X.shape[1]), jnp.float32)
            g(p).block_until_ready()
            best = math.inf
            for _ in range(3):
                t0 = time.perf_counter()
                for i in range(10):
                    r_ = g(p + 0.01 * i)
                r_.block_until_ready()
                best = min(best, (time.perf_counter() - t0) / 10)
            grad_s = best
        r = {"eps": eps, "beta_over_n": plan.beta / X.shape[0], "steps": plan.num_steps, "gradient_seconds": grad_s,
             "expected_hours": plan.num_steps * grad_s / 3600, "smoothness": smooth,
             "prior_sd_ratio_floor": plan.posterior.model.prior_sd_ratio_floor}
        log(json.dumps(r))
        out.append(r)
    return out


def numpyro_adult_runs(eps_list, log=print, seed_offset=0):
    """The same Adult logistic model written in NumPyro, run through ``fit(model=..., target="posterior",
    preconditioner="fisher")``: the scores' second moment at the origin released with 10% of mu^2, the
    chains in the metric it gives (kinetic kernel, clip_norm 1 in the prior-whitened metric, ESS 400),
    with the built-in rows' metrics (width ratio against the untempered Laplace sd, accuracy, log loss,
    R-hat, ESS, steps, wall time)."""
    import dp_infer
    from dp_infer.infer.model_posterior_plan import plan_model_posterior

    adult_model, a, ml, smooth = _numpyro_adult()
    X, y = a.X_train, a.y_train
    _, C0 = map_laplace(X, y, PRIOR_PRECISION)
    sd0 = np.sqrt(np.diag(C0))
    out = []
    for eps in eps_list:
        prior_plan, _, _ = plan_model_posterior(ml, X.shape[0], eps=eps, delta=DELTA, clip_norm=1.0, ess=400,
                                                kernel="underdamped", smoothness=smooth)
        t0 = time.perf_counter()
        run = dp_infer.fit(model=adult_model, X=X, y=y, target="posterior", eps=eps, delta=DELTA, clip_norm=1.0,
                           smoothness=smooth, preconditioner="fisher", kernel="underdamped", ess=400,
                           seed=int(10 * eps) + 1 + seed_offset, progress_bar=False)
        draws = run.draws()
        secs = time.perf_counter() - t0
        post = run.report()["posterior"]
        flat = draws.reshape(-1, X.shape[1])
        r = {"eps": eps, "preconditioner": "fisher", "beta_over_n": run.plan.beta / X.shape[0],
             "width_ratio_median": float(np.median(flat.std(axis=0) / sd0)),
             "width_ratio_q90": float(np.quantile(flat.std(axis=0) / sd0, 0.9)),
             "max_rhat": post["achieved"]["max_rhat"], "min_ess_bulk": post["achieved"]["min_ess_bulk"],
             "num_steps": run.plan.num_steps, "step_size": run.plan.step_size, "seconds": secs,
             "prior_metric_steps": prior_plan.num_steps, "prior_metric_beta_over_n": prior_plan.beta / X.shape[0],
             "divergences": int(np.sum(run.diverging)) if getattr(run, "diverging", None) is not None else None}
        r.update(posterior_summary(draws, a.X_test, a.y_test))
        r["intervals"] = _model_intervals(run, sd0)
        log(json.dumps(r))
        out.append(r)
    return out


def _model_intervals(run, sd0) -> dict | str:
    """What ``run.intervals(0.9)`` says for a model run (issue 37: intervals on every posterior run): how many
    coordinates it determines and flags, and its median width over the untempered Laplace sd on the coordinates
    it does not flag; or why the run has none."""
    try:
        iv = run.intervals(0.9)
    except ValueError as e:
        return f"none: {e}"
    plain = np.array([not f for f in iv.flags])
    return {"determined": int(np.sum(iv.determined)), "flagged": int(np.sum(~plain)), "coordinates": int(plain.size),
            "width_ratio_median_unflagged": float(np.median((iv.sd / sd0)[plain])) if plain.any() else None}


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
                 "accuracy (post. mean) | pred. log loss | max R-hat | min bulk ESS | steps | seconds | forecast s | "
                 "noise-aware centre: accuracy | noise-aware width ratio (median) |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in res["adult"]:
            L.append(f"| {r['eps']:g} | {r.get('kernel', 'langevin')}, {'adapted' if r.get('adapted') else 'planned'} | "
                     f"{r['beta_over_n']:.3g} | {r['forecast_beta_over_n']:.3g} | "
                     f"{r['formula_beta_over_n']:.3g} | {r['width_ratio_median']:.2f} | "
                     f"{r.get('width_ratio_q90', float('nan')):.2f} | "
                     f"{r['interval_inflation_planned']:.2f} | {r['accuracy_posterior_mean']:.4f} | "
                     f"{r['predictive_log_loss']:.4f} | {r['max_rhat']:.3f} | {r['min_ess_bulk']:.0f} | "
                     f"{r['num_steps']} | {r['seconds']:.0f} | {r['forecast_seconds']:.0f} | "
                     + (f"{r['noise_aware_accuracy']:.4f} | {r['noise_aware_width_ratio_median']:.2f} |"
                        if r.get("noise_aware") == "ok" else
                        f"{'refused' if str(r.get('noise_aware', '-')).startswith('refused') else '-'} | |"))
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
        L.append("| n | beta / n (plan) | formula | clip radius | width ratio | draws' mean - MAP (untempered sds, "
                 "median / max) | DP-SGD's clip (the old link) at the same levels: its mode - MAP (median / max) | "
                 "rows it clips there | same beta, no clip: mode - MAP (max) | max R-hat | "
                 "min bulk ESS | steps | seconds | devices |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        nan = float("nan")
        for r in res["synthetic"]:
            L.append(f"| {r['n']} | {r.get('beta_over_n', r['forecast_beta_over_n']):.3g} | "
                     f"{r['formula_beta_over_n']:.3g} | {r.get('clip_radius') or nan:.3g} | "
                     f"{r.get('width_ratio_median', nan):.2f} | "
                     f"{r.get('mean_offset_median', nan):.2f} / {r.get('mean_offset_max', nan):.2f} | "
                     f"{r.get('dp_sgd_clip_mode_offset_median', nan):.2f} / "
                     f"{r.get('dp_sgd_clip_mode_offset_max', nan):.2f} | "
                     f"{r.get('dp_sgd_clip_row_share_at_mode', nan):.3f} | "
                     f"{r.get('tempered_mode_offset_max', nan):.2f} | "
                     f"{r.get('max_rhat', nan):.3f} | {r.get('min_ess_bulk', nan):.0f} | "
                     f"{r.get('num_steps', r.get('forecast_steps'))} | {r.get('seconds', nan):.0f} | "
                     f"{r.get('devices', 1)} |")
        for r in res["synthetic"]:
            if "one_device_max_abs_diff" in r:
                L.append(f"\nn = {r['n']} on {r['devices']} devices (rows sharded, {r['placement']['rows_per_shard']} "
                         f"per device) against the same seed on one device ({r['one_device_seconds']:.0f} s): the "
                         f"draws differ by at most {r['one_device_max_abs_diff']:.2g} (the draws' sd is "
                         f"{r['draws_sd']:.3g}): the same chains, float32 sums in another order.")
    if res.get("rhat_floor"):
        r0 = res["rhat_floor"][0]
        L.append(f"\nThe R-hat a perfect sampler shows: {r0['chains']} stationary AR(1) chains per coordinate with the "
                 f"given bulk ESS, max of ArviZ's rank-normalised split R-hat over {r0['dim']} coordinates "
                 "(20 repetitions).\n")
        L.append("| bulk ESS per coordinate | max R-hat, median | max R-hat, 90th percentile |")
        L.append("|---|---|---|")
        for r in res["rhat_floor"]:
            L.append(f"| {r['ess']} | {r['max_rhat_median']:.4f} | {r['max_rhat_q90']:.4f} |")
    if res.get("numpyro_cost"):
        L.append("\nThe same Adult model written in NumPyro (`fit(model=..., target=\"posterior\")`, prior N(0, 1/0.17), "
                 "clip_norm 1 in the prior-whitened metric, curvature bound 0.25 s^2 max||x||^2, kinetic kernel, ESS 400): "
                 "its plan and the measured cost of one gradient of its potential (4 chains) on this machine; no chain "
                 "run.\n")
        L.append("| eps | beta / n | steps per chain | one gradient, 4 chains (ms) | expected chain time (h) | "
                 "sd floor / prior sd |")
        L.append("|---|---|---|---|---|---|")
        for r in res["numpyro_cost"]:
            L.append(f"| {r['eps']:g} | {r['beta_over_n']:.3g} | {r['steps']} | {1e3 * r['gradient_seconds']:.1f} | "
                     f"{r['expected_hours']:.1f} | {r['prior_sd_ratio_floor']:.3f} |")
    if res.get("numpyro_runs"):
        L.append("\nThe same Adult model written in NumPyro, run: `fit(model=adult_model, target=\"posterior\", "
                 "preconditioner=\"fisher\", clip_norm=1, kernel=\"underdamped\", ess=400)` (the scores' second "
                 "moment at the origin released with 10% of mu^2; prior N(0, 1/0.17)); width ratio as above "
                 "(NON-PRIVATE Laplace reference); the last two columns are the plan the prior's metric alone "
                 "would have made.\n")
        L.append("| eps | beta / n | width ratio (median) | width ratio (q90) | accuracy (post. mean) | pred. log loss "
                 "| max R-hat | min bulk ESS | divergences | steps | seconds | prior metric: beta / n | prior metric: "
                 "steps |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in res["numpyro_runs"]:
            L.append(f"| {r['eps']:g} | {r['beta_over_n']:.3g} | {r['width_ratio_median']:.2f} | "
                     f"{r['width_ratio_q90']:.2f} | {r['accuracy_posterior_mean']:.4f} | "
                     f"{r['predictive_log_loss']:.4f} | {r['max_rhat']:.3f} | {r['min_ess_bulk']:.0f} | "
                     f"{r['divergences']} | {r['num_steps']} | {r['seconds']:.0f} | "
                     f"{r['prior_metric_beta_over_n']:.3g} | {r['prior_metric_steps']} |")
        L.append("\nIntervals for theta (`run.intervals(0.9)`; width over the untempered Laplace sd, median on the "
                 "coordinates they do not flag):\n")
        for r in res["numpyro_runs"]:
            iv = r.get("intervals")
            if isinstance(iv, dict):
                w = iv["width_ratio_median_unflagged"]
                L.append(f"- eps = {r['eps']:g}: {iv['determined']} of {iv['coordinates']} determined, {iv['flagged']} "
                         f"flagged" + (f", median width {w:.2f}x" if w is not None else ""))
            elif iv is not None:
                L.append(f"- eps = {r['eps']:g}: {iv}")
    return "\n".join(L) + "\n"


BEGIN = "<!-- posterior_levers: begin -->"
END = "<!-- posterior_levers: end -->"


def kept_block(docs_path: str) -> str:
    """The sections of an existing docs/results.md that their own commands write: the levers section
    (this module's ``--docs``, between its markers) and every section after it (the device, interval
    and noise benchmarks append theirs there), so that ``python -m benchmarks`` re-rendering the page
    keeps them; "" if there is no levers section."""
    if not __import__("os").path.exists(docs_path):
        return ""
    text = open(docs_path).read()
    if BEGIN not in text or END not in text:
        return ""
    return "\n" + text[text.index(BEGIN):].rstrip() + "\n"


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
    p.add_argument("--synthetic-n", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--shard-from", type=int, default=None,
                   help="shard the synthetic rows over every device from this n on (mesh='auto')")
    p.add_argument("--compare-one-device", action="store_true",
                   help="with --shard-from: the same run on one device, and the draws' largest difference")
    p.add_argument("--plans", action="store_true", help="plans only on the full Adult training set, every eps")
    p.add_argument("--sweep", action="store_true", help="clip radius sweep on synthetic data (n = 1e4, d = 10)")
    p.add_argument("--kernel", choices=["langevin", "underdamped"], default="underdamped",
                   help="the chains' kernel (default underdamped: the demo's)")
    p.add_argument("--numpyro-cost", action="store_true",
                   help="the Adult model written in NumPyro: plans at every eps and the measured gradient cost")
    p.add_argument("--numpyro-runs", type=float, nargs="+", default=None, metavar="EPS",
                   help="the Adult model written in NumPyro: chains with preconditioner='fisher' at these eps")
    p.add_argument("--rhat-floor", action="store_true",
                   help="max R-hat over 108 coordinates of perfect (stationary AR(1)) chains at each bulk ESS")
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
        res["synthetic"] = synthetic(kernel=a.kernel, sizes=a.synthetic_n, shard_from=a.shard_from,
                                     compare_one_device=a.compare_one_device)
    if a.rhat_floor:
        res["rhat_floor"] = rhat_floor()
    if a.numpyro_cost:
        res["numpyro_cost"] = numpyro_adult_cost(a.eps or [0.5, 1.0, 2.0, 4.0, 8.0])
    if a.numpyro_runs:
        res["numpyro_runs"] = numpyro_adult_runs(a.numpyro_runs)
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
