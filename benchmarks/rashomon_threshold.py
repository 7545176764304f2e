"""Rashomon benchmark, threshold part: faithfulness at the threshold and MCR against the exact set.

The 2-D logistic case of the issue "Rashomon sets users can trust" (n = 200, l2 = 0.01, psi = 0.02,
beta = 1e4, exact law on a 1201 x 1201 grid): :func:`threshold_faithfulness` measures the share of
in-set draws above 0.9 psi and the 97.5% quantile of coefficient 0 for the old plan (hard
threshold, step 0.5 / (beta M)) and the current one (smoothed threshold, step from the jump);
:func:`mcr_against_exact` the error of MCR- / MCR+ from the draws against the exact MCR over the
set. Called by :func:`benchmarks.rashomon_compare.run`.
"""

from __future__ import annotations

import math
import time

import numpy as np

def _issue_case(n: int = 200, seed: int = 0):
    """The 2-D logistic case: rows of norm <= 1, labels from a logistic model, l2 = 0.01."""
    from dp_infer import rashomon as R

    rng = np.random.default_rng(seed)

    def draw(m):
        X = rng.normal(size=(m, 2)) * [0.6, 0.4]
        X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
        return X, (rng.uniform(size=m) < 1 / (1 + np.exp(-X @ [2.0, -1.0]))).astype(float)

    (X, y), (Xe, ye) = draw(n), draw(n)
    return X, y, Xe, ye, R.linear_model("logistic", row_norm=1.0, l2=0.01, intercept=False)


def _excess(model, X, y, P, level):
    import jax
    import jax.numpy as jnp

    with jax.enable_x64(True):
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        f = jax.jit(jax.vmap(lambda t: model.loss.mean(t, Xj, yj)))
        return np.asarray(f(jnp.asarray(np.asarray(P, dtype=np.float64)))) - level


def _chain_stats(model, X, y, z, level, psi):
    """In-set share, share above 0.9 psi among in-set draws and q97.5 of coefficient 0, with SEs."""
    u = _excess(model, X, y, z.reshape(-1, 2), level).reshape(z.shape[:2])
    ing = u <= 0
    share = np.array([(a[b] > -0.1 * psi).mean() for a, b in zip(u, ing)])
    k = z.shape[0]
    return {"in_set": float(ing.mean()), "in_set_se": float(ing.mean(1).std(ddof=1) / math.sqrt(k)),
            "share_above_09psi": float(share.mean()), "share_se": float(share.std(ddof=1) / math.sqrt(k)),
            "q975_coef0": float(np.quantile(z[..., 0], 0.975)), "draws": int(z.shape[0] * z.shape[1])}


def threshold_faithfulness(quick: bool, log) -> dict:
    import jax
    import jax.numpy as jnp

    from dp_infer import rashomon as R
    from dp_infer.kernels.langevin import sample_chain

    psi, beta = 0.02, 1e4
    X, y, _, _, model = _issue_case()
    mini = R.rashomon_minimum(model.loss, X, y)
    level = mini.value + psi
    # exact law of exp(-beta max{L, L* + psi}) on a 1201 x 1201 grid
    g = [np.linspace(c - 3, c + 3, 1201) for c in mini.theta]
    G0, G1 = np.meshgrid(*g, indexing="ij")
    u = _excess(model, X, y, np.stack([G0.ravel(), G1.ravel()], 1), level)
    wt = np.exp(-beta * np.maximum(u, 0.0))
    wt /= wt.sum()
    inG = u <= 0
    order = np.argsort(G0.ravel())
    exact = {"in_set": float(wt[inG].sum()),
             "share_above_09psi": float(wt[inG & (u > -0.1 * psi)].sum() / wt[inG].sum()),
             "q975_coef0": float(G0.ravel()[order][np.searchsorted(np.cumsum(wt[order]), 0.975)]),
             "coef0_range_in_set": [float(G0.ravel()[inG].min()), float(G0.ravel()[inG].max())]}
    # the smoothed target the current plan runs on (ramp of width w = psi / 20 outside the set)
    w = R.WIDTH_FRACTION * psi
    ws = np.exp(-beta * np.where(u <= 0, 0.0, np.where(u <= w, u * u / (2 * w), u - w / 2)))
    ws /= ws.sum()
    smoothed = {"in_set": float(ws[inG].sum()),
                "share_above_09psi": float(ws[inG & (u > -0.1 * psi)].sum() / ws[inG].sum()),
                "q975_coef0": float(G0.ravel()[order][np.searchsorted(np.cumsum(ws[order]), 0.975)])}
    chains, horizon = (16, 1.5) if quick else (32, 3.0)
    out = {"psi": psi, "beta": beta, "n": 200, "l2": 0.01, "chains": chains, "horizon": horizon, "exact": exact,
           "exact_smoothed": smoothed}
    # old plan: hard threshold, step 0.5 / (beta M)
    M = model.loss.constants.smoothness
    h_old = 0.5 / (beta * M)
    thin = max(1, int(math.ceil(horizon / h_old)) // 400)
    K = thin * int(math.ceil(horizon / h_old / thin))
    Xj, yj = jnp.asarray(X, dtype=jnp.float32), jnp.asarray(y, dtype=jnp.float32)
    U = lambda t: beta * jnp.maximum(model.loss.mean(t, Xj, yj), level)  # noqa: E731
    t0 = time.time()
    keys = jax.random.split(jax.random.PRNGKey(0), chains)
    z = np.asarray(jax.jit(jax.vmap(lambda k: sample_chain(k, U, jnp.zeros(2), h_old, K, thinning=thin).z))(keys))
    out["old"] = {**_chain_stats(model, X, y, z[:, z.shape[1] // 2:], level, psi), "step": h_old, "steps": K,
                  "seconds": time.time() - t0}
    log(f"  old plan: {out['old']}")
    t0 = time.time()
    res = R.sample_rashomon(model, X, y, psi, mode="nonprivate", beta=beta, horizon=horizon, num_chains=chains,
                            num_draws=800, seed=1)
    out["new"] = {**_chain_stats(model, X, y, res.draws[:, res.burn_in:], level, psi),
                  "step": res.privacy["step_size"], "steps": res.privacy["num_steps"],
                  "threshold_width": res.privacy["threshold_width"], "seconds": time.time() - t0}
    log(f"  current plan: {out['new']}")
    out["_draws"] = res.flat_draws()
    return out


def mcr_against_exact(draws, log) -> dict:
    """MCR-/MCR+ from the current plan's draws (exact pairwise swap, loss without penalty) against
    the exact MCR over the set (its boundary traced on 1440 rays plus an interior grid)."""
    import jax
    import jax.numpy as jnp

    from dp_infer import rashomon as R

    psi = 0.02
    X, y, Xe, ye, model = _issue_case()
    mini = R.rashomon_minimum(model.loss, X, y)
    with jax.enable_x64(True):
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        phi = np.linspace(0, 2 * np.pi, 1440, endpoint=False)
        d = np.stack([np.cos(phi), np.sin(phi)], 1)
        Lr = jax.jit(jax.vmap(lambda r, dd: model.loss.mean(jnp.asarray(mini.theta) + r * dd, Xj, yj)))
        lo, hi = np.zeros(len(phi)), np.full(len(phi), 20.0)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            above = np.asarray(Lr(jnp.asarray(mid), jnp.asarray(d))) > mini.value + psi
            hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
    bd = mini.theta + lo[:, None] * d
    grid = np.stack(np.meshgrid(np.linspace(bd[:, 0].min(), bd[:, 0].max(), 60),
                                np.linspace(bd[:, 1].min(), bd[:, 1].max(), 60)), -1).reshape(-1, 2)
    grid = grid[_excess(model, X, y, grid, mini.value + psi) <= 0]
    exact = R.model_reliance(np.vstack([bd, grid]), Xe, ye, model)["reliance"]
    got = R.model_class_reliance(draws, Xe, ye, model)
    # the same on the penalised loss (what the old code compared) for contrast
    pen = model.loss.l2 / 2 * np.sum(np.vstack([bd, grid]) ** 2, axis=1)
    e = R.model_reliance(np.vstack([bd, grid]), Xe, ye, model, kind="difference")
    ratio_pen = (e["e_switch"] + pen[:, None]) / (e["e_orig"] + pen)[:, None]
    out = {"exact_minus": exact.min(0).tolist(), "exact_plus": exact.max(0).tolist(),
           "exact_penalised_minus": ratio_pen.min(0).tolist(), "exact_penalised_plus": ratio_pen.max(0).tolist(),
           "draws_minus": got["mcr_minus"].tolist(), "draws_plus": got["mcr_plus"].tolist(),
           "abs_error_minus": np.abs(got["mcr_minus"] - exact.min(0)).tolist(),
           "abs_error_plus": np.abs(got["mcr_plus"] - exact.max(0)).tolist(),
           "num_draws": int(np.asarray(draws).shape[0]), "eval_rows": int(Xe.shape[0])}
    log(f"  MCR: {out}")
    return out
