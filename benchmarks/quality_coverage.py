"""Coverage in simulation: do private 90% credible intervals cover the true parameter?

Logistic regression, d = 10 (an intercept and 9 covariates uniform on [-1, 1], rows of norm <=
sqrt(10)), n = 10,000, a fixed theta*, ``reps`` replicated datasets, (1, 1e-5)-DP, prior N(0, I):

* ``posterior_mode``: the library's posterior mode (private second moment with 10% of mu^2,
  4 chains, ess 400), draws' 5% and 95% quantiles;
* ``laplace_noise_aware``: the noise-aware Gaussian posterior from private Newton steps
  (:func:`benchmarks.baselines.newton_laplace_posterior`), mean +- 1.645 sd, and its damped
  variant ``laplace_damped`` (the one that is usable on Adult's 108 dimensions);
* ``nonprivate``: the untempered posterior's Laplace approximation at the exact MAP (float64
  Newton; at n = 10,000 and d = 10 it is the reference for widths), mean +- 1.645 sd.

Widths are reported relative to the non-private posterior's on the same dataset. The tempered
posterior (beta << n) is wider by about ``sqrt(n / beta)`` (the plan's ``interval_inflation``)
and shrunk toward the prior mean; both show up here.

Linear regression by noisy sufficient statistics (same design, y = x' theta* + N(0, 1), |y|
clipped at a declared bound that the simulated labels essentially never reach; the count is
reported): the noise-aware posterior vs the naive plug-in posterior vs the exact posterior.
Coverage MC error: sd sqrt(0.9 0.1 / reps) (2.1 points at 200 replicates).
"""

from __future__ import annotations

import math
import time

import jax
import numpy as np

from dp_infer import losses
from dp_infer.privacy.conversions import gdp_mu

from .baselines import conjugate_linear_posterior, newton_laplace_posterior, ssp_linear_regression
from .posterior_batch import plan_private, run_logistic_plans

Z90 = 1.6448536269514722


def true_theta(d: int) -> np.ndarray:
    """A fixed theta*: intercept -0.5, covariates N(0, 1) drawn once (seed 0)."""
    return np.concatenate([[-0.5], np.random.default_rng(0).normal(0.0, 1.0, d - 1)])


def design(n: int, d: int, rng) -> np.ndarray:
    return np.concatenate([np.ones((n, 1)), rng.uniform(-1.0, 1.0, (n, d - 1))], axis=1)


def logistic_data(n: int, theta, seed: int):
    rng = np.random.default_rng(1000 + seed)
    X = design(n, theta.size, rng)
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-X @ theta))).astype(np.float64)
    return X, y


def map_laplace(X, y, lam: float, iters: int = 30):
    """Exact MAP of the untempered posterior by Newton (float64) and its Laplace covariance."""
    n, d = X.shape
    th = np.zeros(d)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-X @ th))
        g = X.T @ (p - y) + lam * th
        H = (X * (p * (1 - p))[:, None]).T @ X + lam * np.eye(d)
        step = np.linalg.solve(H, g)
        th = th - step
        if np.max(np.abs(step)) < 1e-12:
            break
    p = 1.0 / (1.0 + np.exp(-X @ th))
    H = (X * (p * (1 - p))[:, None]).T @ X + lam * np.eye(d)
    return th, np.linalg.inv(H)


def _summary(covered: np.ndarray, widths: np.ndarray, ref_widths: np.ndarray) -> dict:
    cov = covered.mean(axis=0)
    ratio = widths / ref_widths
    return {"coverage": cov.tolist(), "coverage_min": float(cov.min()), "coverage_mean": float(cov.mean()),
            "width_ratio": np.median(ratio, axis=0).tolist(), "width_ratio_median": float(np.median(ratio)),
            "width_mean": float(widths.mean())}


def logistic_coverage(reps: int, *, n: int = 10_000, d: int = 10, eps: float = 1.0, delta: float = 1e-5,
                      lam: float = 1.0, ess: int = 400, batch: int = 25, log=print) -> dict:
    theta = true_theta(d)
    loss = losses.logistic(row_norm=math.sqrt(d))
    mu = gdp_mu(eps, delta)
    res = {"n": n, "d": d, "reps": reps, "eps": eps, "delta": delta, "prior_precision": lam, "ess": ess,
           "theta_star": theta.tolist()}
    inside = {"posterior_mode": [], "laplace_noise_aware": [], "laplace_damped": [], "nonprivate": []}
    width = {k: [] for k in inside}
    betas, ess_min, rhat_max, infl = [], [], [], []
    t_ours = t_lap = 0.0
    for start in range(0, reps, batch):
        idx = list(range(start, min(reps, start + batch)))
        data = [logistic_data(n, theta, s) for s in idx]
        t0 = time.perf_counter()
        plans = [plan_private(loss, X, key=jax.random.PRNGKey(50_000 + s), eps=eps, delta=delta,
                              prior_precision=lam, ess=ess, max_sq_norm=float(d)) for s, (X, _) in zip(idx, data)]
        draws = run_logistic_plans(plans, data, key=jax.random.PRNGKey(60_000 + start))
        t_ours += time.perf_counter() - t0
        from dp_infer.diagnostics import check_mixing

        for s, (X, y), p, dr in zip(idx, data, plans, draws):
            mix = check_mixing({"theta": dr})
            ess_min.append(float(mix.min_ess_bulk))
            rhat_max.append(float(mix.max_rhat))
            betas.append(p.beta)
            infl.append(p.posterior.interval_inflation)
            flat = dr.reshape(-1, d)
            lo, hi = np.quantile(flat, [0.05, 0.95], axis=0)
            inside["posterior_mode"].append((lo <= theta) & (theta <= hi))
            width["posterior_mode"].append(hi - lo)
            for name, damp in (("laplace_noise_aware", False), ("laplace_damped", True)):
                t1 = time.perf_counter()
                m, C, _ = newton_laplace_posterior(X, y, key=jax.random.PRNGKey(70_000 + s), mu=mu,
                                                   prior_precision=lam, row_norm=math.sqrt(d), damp_final=damp)
                t_lap += time.perf_counter() - t1
                sd = np.sqrt(np.diag(C))
                inside[name].append(np.abs(m - theta) <= Z90 * sd)
                width[name].append(2 * Z90 * sd)
            m0, C0 = map_laplace(X, y, lam)
            sd0 = np.sqrt(np.diag(C0))
            inside["nonprivate"].append(np.abs(m0 - theta) <= Z90 * sd0)
            width["nonprivate"].append(2 * Z90 * sd0)
        log(f"  [quality/coverage] {idx[-1] + 1}/{reps} datasets; ours so far "
            f"{np.mean(np.asarray(inside['posterior_mode']), axis=0).min():.3f} min coverage")
    ref = np.asarray(width["nonprivate"])
    res["methods"] = {k: _summary(np.asarray(inside[k]), np.asarray(width[k]), ref) for k in inside}
    res["posterior_mode"] = {"beta_median": float(np.median(betas)), "beta_over_n_median": float(np.median(betas) / n),
                             "interval_inflation_median": float(np.median(infl)),
                             "min_ess_bulk_median": float(np.median(ess_min)), "min_ess_bulk_min": float(np.min(ess_min)),
                             "max_rhat_median": float(np.median(rhat_max)), "max_rhat_max": float(np.max(rhat_max)),
                             "seconds_total": t_ours}
    res["laplace_seconds_total"] = t_lap
    return res


def linear_coverage(reps: int, *, n: int = 10_000, d: int = 10, eps: float = 1.0, delta: float = 1e-5,
                    lam: float = 1.0, noise_sd: float = 1.0, log=print) -> dict:
    theta = true_theta(d)
    R = math.sqrt(d)
    B = float(np.abs(theta).sum() + 6.0 * noise_sd)  # |x' theta| <= sum |theta_j|; +6 sd: declared bound
    mu = gdp_mu(eps, delta)
    inside = {"ssp_noise_aware": [], "ssp_naive": [], "nonprivate": []}
    width = {k: [] for k in inside}
    clipped = 0
    for s in range(reps):
        rng = np.random.default_rng(2000 + s)
        X = design(n, d, rng)
        y = X @ theta + noise_sd * rng.normal(size=n)
        clipped += int(np.sum(np.abs(y) > B))
        y = np.clip(y, -B, B)
        r = ssp_linear_regression(X, y, key=jax.random.PRNGKey(80_000 + s), mu=mu, row_norm=R, label_bound=B,
                                  prior_precision=lam, noise_var=noise_sd ** 2)
        m0, C0 = conjugate_linear_posterior(X, y, prior_precision=lam, noise_var=noise_sd ** 2)
        for k, (m, C) in {"ssp_noise_aware": (r["mean"], r["cov"]), "ssp_naive": (r["naive_mean"], r["naive_cov"]),
                          "nonprivate": (m0, C0)}.items():
            sd = np.sqrt(np.diag(C))
            inside[k].append(np.abs(m - theta) <= Z90 * sd)
            width[k].append(2 * Z90 * sd)
    ref = np.asarray(width["nonprivate"])
    out = {"n": n, "d": d, "reps": reps, "eps": eps, "delta": delta, "noise_sd": noise_sd, "label_bound": B,
           "labels_clipped": clipped, "prior_precision": lam}
    out["methods"] = {k: _summary(np.asarray(inside[k]), np.asarray(width[k]), ref) for k in inside}
    log(f"  [quality/coverage] linear SSP: noise-aware min coverage {out['methods']['ssp_noise_aware']['coverage_min']:.3f}, "
        f"naive {out['methods']['ssp_naive']['coverage_min']:.3f}")
    return out


def run(quick: bool, log=print) -> dict:
    reps = 20 if quick else 200
    return {"logistic": logistic_coverage(reps, log=log), "linear_ssp": linear_coverage(reps, log=log)}
