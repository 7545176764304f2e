"""Privacy-utility on Adult: test accuracy (mean, sd over seeds) vs eps at delta = 1e-5.

Methods:
* ``dp_infer_auto_2chains``: ``dp_infer.fit(logistic(), X, y, eps=, delta=1e-5, num_chains=2)``:
  the demo's configuration (calibrated route, horizon 1); estimate = posterior mean of the draws.
* ``dp_infer_last_iterate``: ``fit(..., route="last_iterate")`` (data-independent default L2
  regulariser); only the final iterate is released and used as the estimate.
* ``dp_infer_pure``: ``fit(..., delta=None, domain=L2Ball(d, 30))``: pure eps via purification of
  the trajectory's posterior mean (comparable with diffprivlib's pure eps).
* ``dpgd``: full-batch DP gradient descent (own implementation): per-example gradients clipped to
  C = 1, summed, Gaussian noise sigma = 2 C / mu_step with mu_step = gdp_mu(eps, delta)/sqrt(T)
  (replace-one adjacency: the clipped sum moves by at most 2C; exact GDP composition of T steps),
  T = 200, lr = 2, theta <- theta - lr (sum + noise) / n.
* ``diffprivlib``: diffprivlib LogisticRegression (pure eps, data_norm=1, C=1), run in a separate
  venv (benchmarks/.dpl-venv, created on first use) through a subprocess.
* ``nonprivate``: dp_infer.infer.nonprivate.minimize_loss (L-BFGS, float64).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from dp_infer.domains import L2Ball
from dp_infer.losses import logistic
from dp_infer.infer.nonprivate import accuracy, minimize_loss
from dp_infer.privacy.conversions import gdp_mu

DPL_VENV = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".dpl-venv")
DPL_PYTHON = os.path.join(DPL_VENV, "bin", "python")
# diffprivlib 0.6.6 needs scikit-learn < 1.8 and (for its L-BFGS call) scipy < 1.15
DPL_REQUIREMENTS = ["diffprivlib==0.6.6", "scikit-learn<1.8", "scipy<1.15", "numpy<2.3"]


def _ensure_dpl_venv(log) -> str | None:
    """Create the separate diffprivlib environment on first use; None if it cannot be built."""
    if os.path.exists(DPL_PYTHON):
        return None
    log(f"  [utility] creating {DPL_VENV} for diffprivlib (separate: it pins scikit-learn < 1.8)")
    try:
        subprocess.run([sys.executable, "-m", "venv", DPL_VENV], check=True, capture_output=True, timeout=300)
        subprocess.run([DPL_PYTHON, "-m", "pip", "install", "-q", *DPL_REQUIREMENTS], check=True,
                       capture_output=True, text=True, timeout=900)
    except (subprocess.SubprocessError, OSError) as e:
        return f"could not build the diffprivlib environment: {e}"
    return None


def dpgd(X, y, eps, delta, seed, T=200, lr=2.0, clip=1.0):
    n, d = X.shape
    mu_step = gdp_mu(eps, delta) / math.sqrt(T)
    sigma = 2.0 * clip / mu_step
    Xj, yj = jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32)

    @jax.jit
    def run(key):
        def step(th, k):
            r = jax.nn.sigmoid(Xj @ th) - yj
            norms = jnp.abs(r) * jnp.linalg.norm(Xj, axis=1)
            scale = jnp.minimum(1.0, clip / jnp.maximum(norms, 1e-12))
            g = Xj.T @ (r * scale) + sigma * jax.random.normal(k, (d,))
            return th - lr * g / n, None

        return jax.lax.scan(step, jnp.zeros(d), jax.random.split(key, T))[0]

    return np.asarray(run(jax.random.PRNGKey(seed)))


def dp_infer_seeds(loss, X, y, eps, delta, seeds, *, domain=None, **calib):
    """Estimates of ``len(seeds)`` independent runs of the calibrated plan, computed in ONE
    vectorised MCMC call (compute batching only): the plan for one run has K chains; we sample
    K * len(seeds) independent chains and give each run its own group of K. Each group has
    exactly the law of a separate K-chain run; the pure route purifies each group's mean."""
    import dataclasses

    from dp_infer.routes.calibrate import calibrate
    from dp_infer.infer.fit import purify_estimate, sample

    plan = calibrate(loss, X.shape[0], X.shape[1], eps=eps, delta=delta, domain=domain, **calib)
    K = plan.num_chains
    run_ = sample(loss, X, y, dataclasses.replace(plan, num_chains=K * len(seeds),
                                                    release="trajectory" if plan.release == "purified_mean"
                                                    else plan.release),
                  domain=domain, seed=int(seeds[0]), progress_bar=False)
    draws = run_.draws()  # (K * seeds, draws, d)
    out = []
    for i, s in enumerate(seeds):
        est = draws[i * K:(i + 1) * K].reshape(-1, X.shape[1]).mean(axis=0)
        if plan.release == "purified_mean":
            est = purify_estimate(plan, domain, est, jax.random.PRNGKey(1000 + int(s)))
        out.append(est)
    return out, plan


def run(quick: bool, log=print):
    from dp_infer.datasets import load_adult

    a = load_adult()
    Xtr, ytr, Xte, yte = a.X_train, a.y_train, a.X_test, a.y_test
    eps_list = [0.1, 0.5, 1.0, 2.0, 4.0, 8.0]
    seeds = [0, 1] if quick else [0, 1, 2, 3, 4]
    if quick:
        eps_list = [0.5, 2.0]
    delta = 1e-5
    loss = logistic()
    res = {"eps": eps_list, "delta": delta, "seeds": seeds, "methods": {}, "timing_s": {}}
    t0 = time.perf_counter()
    th, _, _ = minimize_loss(loss, Xtr, ytr)
    res["nonprivate"] = accuracy(th, Xte, yte)
    res["timing_s"]["nonprivate"] = time.perf_counter() - t0

    def sweep(name, f, batched=False):
        t0 = time.perf_counter()
        out = []
        for e in eps_list:
            accs = ([accuracy(th, Xte, yte) for th in f(e, seeds)] if batched
                    else [accuracy(f(e, s), Xte, yte) for s in seeds])
            out.append({"eps": e, "mean": float(np.mean(accs)), "sd": float(np.std(accs, ddof=1)), "accs": accs})
            log(f"  [utility] {name} eps={e}: {out[-1]['mean']:.4f} +- {out[-1]['sd']:.4f}")
        res["methods"][name] = out
        res["timing_s"][name] = time.perf_counter() - t0

    # the demo's configuration: calibrated route (trajectory here), 2 chains, horizon 1
    sweep("dp_infer_auto_2chains", lambda e, ss: dp_infer_seeds(loss, Xtr, ytr, e, delta, ss,
                                                                num_chains=2)[0], batched=True)
    sweep("dp_infer_last_iterate", lambda e, ss: dp_infer_seeds(loss, Xtr, ytr, e, delta, ss,
                                                                route="last_iterate")[0], batched=True)
    # pure eps (comparable with diffprivlib): trajectory + purification on an L2 ball of radius 30
    ball = L2Ball(Xtr.shape[1], 30.0)
    sweep("dp_infer_pure", lambda e, ss: dp_infer_seeds(loss, Xtr, ytr, e, None, ss, domain=ball)[0],
          batched=True)
    sweep("dpgd", lambda e, s: dpgd(Xtr, ytr, e, delta, s))
    res["diffprivlib"] = _diffprivlib(Xtr, ytr, Xte, yte, eps_list, seeds, log)
    return res


def _diffprivlib(Xtr, ytr, Xte, yte, eps_list, seeds, log):
    err = _ensure_dpl_venv(log)
    if err is not None:
        return {"absent": err}
    with tempfile.TemporaryDirectory() as td:
        f = os.path.join(td, "adult.npz")
        np.savez(f, Xtr=Xtr, ytr=ytr, Xte=Xte, yte=yte)
        cmd = [DPL_PYTHON, os.path.join(os.path.dirname(__file__), "_dpl_runner.py"), f,
               json.dumps(eps_list), json.dumps(seeds)]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            return {"absent": "diffprivlib run timed out"}
        if p.returncode != 0:
            return {"absent": f"diffprivlib failed: {p.stderr[-500:]}"}
        out = json.loads(p.stdout.strip().splitlines()[-1])
        out["timing_s"] = time.perf_counter() - t0
        for r in out["rows"]:
            log(f"  [utility] diffprivlib eps={r['eps']}: {r['mean']:.4f} +- {r['sd']:.4f}")
        return out
