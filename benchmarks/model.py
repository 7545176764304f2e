"""Section ``model``: your own NumPyro model against the built-in loss on the same problem.

Adult (all 108 public features, rows of norm <= 1), logistic likelihood. Two ways to the same
private posterior at eps = 1, delta = 1e-5 (the same sensitivity G / n = 2 / n, so the same beta):

* ``loss``: ``dp_infer.fit(logistic(row_norm=1), X, y, ...)`` -- the hand-written loss;
* ``model``: ``dp_infer.fit(model=logreg, X=X, y=y, clip_norm=1, smoothness=0.25, ...)`` -- a NumPyro
  model with a wide N(0, 10^2) prior, per-example gradients through the model trace, clipped.

Measured in the same run: marginal seconds per step (two horizons, the difference over the
difference in steps, so compilation and set-up drop out), the fixed cost per call, and the test
accuracy of the released posterior mean on the public test file (mean over seeds).
"""

from __future__ import annotations

import time

import numpy as np


def _model(X=None, y=None):
    import numpyro
    import numpyro.distributions as dist

    w = numpyro.sample("w", dist.Normal(0.0, 10.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)


def _fit(kind, X, y, horizon, seed):
    import dp_infer

    kw = dict(eps=1.0, delta=1e-5, horizon=horizon, num_chains=2, seed=seed, progress_bar=False)
    if kind == "loss":
        return dp_infer.fit(dp_infer.logistic(row_norm=1.0), X, y, **kw)
    return dp_infer.fit(model=_model, X=X, y=y, clip_norm=1.0, smoothness=0.25, **kw)


def run(quick: bool, log=print) -> dict:
    from dp_infer.datasets import load_adult
    from dp_infer.nonprivate import accuracy

    data = load_adult()
    X, y = data.X_train, data.y_train
    if quick:
        X, y = X[:5000], y[:5000]
    horizons = (0.25, 0.5) if quick else (0.5, 1.0)
    seeds = (1, 2) if quick else (1, 2, 3)
    rows = []
    for kind in ("loss", "model"):
        times, steps = [], []
        for h in horizons:
            t0 = time.perf_counter()
            r = _fit(kind, X, y, h, seeds[0])
            times.append(time.perf_counter() - t0)
            steps.append(r.plan.num_steps)
        per_step = (times[1] - times[0]) / max(steps[1] - steps[0], 1)
        accs = []
        for s in seeds:
            r = _fit(kind, X, y, horizons[1], s)
            accs.append(accuracy(r.estimate(), data.X_test, data.y_test))
        rows.append({"path": kind, "beta": r.plan.beta, "step_size": r.plan.step_size, "steps": steps[1],
                     "per_step_s": per_step, "fixed_s": times[0] - per_step * steps[0],
                     "acc_mean": float(np.mean(accs)), "acc_sd": float(np.std(accs)), "seeds": list(seeds)})
        log(f"  {kind}: {per_step * 1e3:.2f} ms/step, fixed {rows[-1]['fixed_s']:.1f} s, acc {np.mean(accs):.4f}")
    base = rows[0]["per_step_s"]
    for r in rows:
        r["step_time_vs_loss"] = r["per_step_s"] / base if base > 0 else float("nan")
    return {"n": int(X.shape[0]), "d": int(X.shape[1]), "horizons": list(horizons), "rows": rows}
