"""Shared helpers: timing, machine description, synthetic data, the Adult logistic potential."""

from __future__ import annotations

import json
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 ** 2:.1f} GiB"
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"nproc": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)), "cpu": cpu, "memory": mem,
            "python": platform.python_version(), "jax": jax.__version__, "backend": jax.default_backend(),
            "loadavg_at_start": load}


def block(x):
    return jax.tree_util.tree_map(lambda a: a.block_until_ready() if hasattr(a, "block_until_ready") else a, x)


def timed(fn, *, repeats: int = 3):
    """Call fn once to compile/warm up, then ``repeats`` times; return (best seconds, last result)."""
    out = block(fn())
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        out = block(fn())
        best = min(best, time.perf_counter() - t)
    return best, out


def timed_interleaved(fns: dict, *, rounds: int = 3) -> dict:
    """Warm up every callable, then time them round-robin ``rounds`` times; best time per name.

    Interleaving spreads the machine's background load (shared cores) evenly over the variants,
    so ratios between them are fairer than with back-to-back blocks.
    """
    for f in fns.values():
        block(f())
    best = {k: float("inf") for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            block(f())
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def marginal_step_times(makers: dict, n_small: int, n_large: int, *, rounds: int = 3) -> dict:
    """Per-step cost as a slope: (t(n_large) - t(n_small)) / (n_large - n_small), interleaved.

    ``makers[name](num_steps)`` returns a zero-argument callable running that many steps. The
    slope removes per-run fixed costs (NumPyro's MCMC.run re-traces and re-compiles its
    collection loop on every call, ~1 s here), which are reported separately as ``fixed_s``.
    """
    fns = {}
    for k, mk in makers.items():
        fns[(k, n_small)] = mk(n_small)
        fns[(k, n_large)] = mk(n_large)
    t = timed_interleaved(fns, rounds=rounds)
    out = {}
    for k in makers:
        per = (t[(k, n_large)] - t[(k, n_small)]) / (n_large - n_small)
        per = per if per > 0 else float("nan")  # timing noise larger than the step cost
        out[k] = {"per_step_s": per, "total_s": t[(k, n_large)], "fixed_s": t[(k, n_large)] - n_large * per,
                  "steps": n_large}
    return out


def synthetic_logistic(n: int, d: int, seed: int = 0):
    """Rows of norm <= 1 and labels from a random logistic model (float32, generated on device)."""
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    X = jax.random.normal(k1, (n, d), jnp.float32) / np.sqrt(d)
    X = X / jnp.maximum(1.0, jnp.linalg.norm(X, axis=1, keepdims=True))
    w = jax.random.normal(k2, (d,)) * 3.0
    y = jax.random.bernoulli(k3, jax.nn.sigmoid(X @ w)).astype(jnp.float32)
    return X, y


def logistic_potential(X, y, beta: float, lam: float = 1.0):
    """U(theta) = beta * mean logistic loss + lam/2 ||theta||^2 (the benchmark target)."""
    n = X.shape[0]

    def U(theta):
        z = X @ theta
        return beta * jnp.sum(jax.nn.softplus(z) - y * z) / n + 0.5 * lam * jnp.dot(theta, theta)

    def grad_U(theta):  # closed form: two passes over X
        z = X @ theta
        return beta * (X.T @ (jax.nn.sigmoid(z) - y)) / n + lam * theta

    return U, grad_U


def report_result(module: str, argv, result, json_path=None) -> None:
    """A benchmark command's ending: the command line it ran (``python -m benchmarks.<module> ...``), the
    result as indented JSON on stdout and, with ``json_path``, in that file. ``argv``: the arguments ``main``
    was given (None: ``sys.argv[1:]``)."""
    print(f"command: python -m benchmarks.{module} " + " ".join(sys.argv[1:] if argv is None else argv))
    print(json.dumps(result, indent=1))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result, f, indent=1)
