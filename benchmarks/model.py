"""Section ``model``: your own NumPyro model against the built-in loss on the same problem.

Adult (all 108 public features, rows of norm <= 1), logistic likelihood. Two ways to the same
private posterior at eps = 1, delta = 1e-5 (the same sensitivity G / n = 2 / n, so the same beta):

* ``loss``: ``dp_infer.fit(logistic(row_norm=1), X, y, ...)`` -- the hand-written loss;
* ``model``: ``dp_infer.fit(model=logreg, X=X, y=y, clip_norm=1, smoothness=0.25, ...)`` -- a NumPyro
  model with a wide N(0, 10^2) prior, per-example gradients through the model trace, clipped.

Measured in the same run (process-CPU times: on the shared machine the wall clock mostly measures
the other sessions' load):

* one gradient of the potential, what every Langevin step computes (jitted, warmed up, blocks of
  20 calls, the two paths round-robin so the load falls on both alike; best block; ratio =
  model / loss);
* one whole ``fit`` (planning, tracing, compilation and the chains; best over seeds; its wall
  time beside it);
* the test accuracy of the released posterior mean on the public test file (mean over seeds).
"""

from __future__ import annotations

import time

import numpy as np


def logreg_model(X=None, y=None):
    """Bayesian logistic regression as a user writes it in NumPyro: w ~ N(0, 10^2 I), y ~ Bernoulli(logit X w)."""
    import numpyro
    import numpyro.distributions as dist

    w = numpyro.sample("w", dist.Normal(0.0, 10.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)


def fit_once(kind, X, y, horizon, seed):
    """One private fit at eps = 1 by the built-in loss (``kind="loss"``) or the NumPyro model (``"model"``)."""
    import dp_infer

    kw = dict(eps=1.0, delta=1e-5, horizon=horizon, num_chains=2, seed=seed, progress_bar=False)
    if kind == "loss":
        return dp_infer.fit(dp_infer.logistic(row_norm=1.0), X, y, **kw)
    return dp_infer.fit(model=logreg_model, X=X, y=y, clip_norm=1.0, smoothness=0.25, **kw)


def gradient_functions(X, y, beta, chains=2) -> dict:
    """``{"loss": call, "model": call}``: each call takes the jitted gradient of the potential at
    ``chains`` positions (vmapped: the chains share each pass over the rows), warmed up."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    import dp_infer
    from dp_infer.model.bridge import loss_from_model

    from ._common import block

    U_loss = dp_infer.gibbs_potential(dp_infer.logistic(row_norm=1.0), X, y, beta=beta)
    ml = loss_from_model(logreg_model, X, y, clip_norm=1.0, smoothness=0.25)
    U_model = dataclasses.replace(dp_infer.gibbs_potential(ml.loss, X, y, beta=beta), prior_potential=ml.prior_potential)
    theta = jnp.asarray(np.random.default_rng(0).normal(size=(chains, X.shape[1])) * 0.1, dtype=jnp.float32)
    g_loss = jax.jit(jax.vmap(jax.grad(U_loss)))
    g_model = jax.jit(jax.vmap(jax.grad(U_model)))
    fns = {"loss": lambda: g_loss(theta), "model": lambda: g_model(theta)}
    for f in fns.values():
        block(f())
    return fns


def _gradient_times(X, y, beta, rounds, reps=20):
    from ._common import block

    fns = gradient_functions(X, y, beta)
    best = {k: float("inf") for k in fns}
    for _ in range(rounds):  # round-robin, CPU time of a block of calls: the machine's load falls on both alike
        for k, f in fns.items():
            c0 = time.process_time()
            for _ in range(reps):
                block(f())
            best[k] = min(best[k], (time.process_time() - c0) / reps)
    return best


def run(quick: bool, log=print) -> dict:
    from dp_infer.datasets import load_adult
    from dp_infer.infer.nonprivate import accuracy

    data = load_adult()
    X, y = data.X_train, data.y_train
    if quick:
        X, y = X[:5000], y[:5000]
    horizon = 0.5 if quick else 1.0
    seeds = (1, 2) if quick else (1, 2, 3)
    rows = []
    for kind in ("loss", "model"):
        accs, walls, cpus = [], [], []
        for s in seeds:
            t0, c0 = time.perf_counter(), time.process_time()
            r = fit_once(kind, X, y, horizon, s)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            accs.append(accuracy(r.estimate(), data.X_test, data.y_test))
        rows.append({"path": kind, "beta": r.plan.beta, "step_size": r.plan.step_size, "steps": r.plan.num_steps,
                     "fit_s": float(np.min(walls)), "fit_cpu_s": float(np.min(cpus)),
                     "acc_mean": float(np.mean(accs)), "acc_sd": float(np.std(accs)),
                     "seeds": list(seeds)})
        log(f"  {kind}: fit {rows[-1]['fit_s']:.1f} s wall, {rows[-1]['fit_cpu_s']:.1f} s CPU (best of {len(seeds)}), "
            f"acc {np.mean(accs):.4f}")
    grad = _gradient_times(X, y, rows[0]["beta"], rounds=5 if quick else 10)
    for r in rows:
        r["grad_ms"] = grad[r["path"]] * 1e3
        r["grad_vs_loss"] = grad[r["path"]] / grad["loss"]
    log(f"  gradient (2 chains, CPU): loss {grad['loss'] * 1e3:.2f} ms, model {grad['model'] * 1e3:.2f} ms")
    return {"n": int(X.shape[0]), "d": int(X.shape[1]), "horizon": horizon, "rows": rows}
