"""Cost of the privacy noise (issue 40): ``dp_infer.randomness.gaussian_noise`` against
``jax.random.normal``, per draw and per Langevin step.

    .venv/bin/python benchmarks/noise_cost.py            # CPU, best of 7 interleaved repeats

Prints the time of a jitted scan of steps with each draw and the ratio. The step is the ULA
step of ``dp_infer.kernels.langevin`` (x - h grad U(x) + sqrt(2h) xi) on a logistic-regression
potential with n rows and d coordinates, vmapped over chains; the draw alone is the same scan
without the gradient.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from dp_infer.randomness import gaussian_noise


def _best_pair(f_old, f_new, *args, repeats=7):
    """Best-of-``repeats`` times of the two, interleaved (a shared machine's load hits both alike)."""
    jax.block_until_ready(f_old(*args))  # compile
    jax.block_until_ready(f_new(*args))
    ts = {0: [], 1: []}
    for _ in range(repeats):
        for i, fn in enumerate((f_old, f_new)):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            ts[i].append(time.perf_counter() - t0)
    return min(ts[0]), min(ts[1])


def make_scan(draw, steps, chains, d, X=None, y=None, h=1e-3):
    def grad(x):
        if X is None:
            return jnp.zeros_like(x)
        p = jax.nn.sigmoid(X @ x)
        return X.T @ (p - y) / X.shape[0]

    def chain(key, x0):
        def body(x, k):
            xi = draw(k, x.shape, x.dtype)
            return x - h * grad(x) + jnp.sqrt(2.0 * h) * xi, None
        x, _ = jax.lax.scan(body, x0, jax.random.split(key, steps))
        return x

    return jax.jit(lambda key: jax.vmap(chain)(jax.random.split(key, chains), jnp.zeros((chains, d))))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    old = lambda k, s, dt: jax.random.normal(k, s, dt)  # noqa: E731
    new = gaussian_noise
    key = jax.random.key(0)
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {a.steps} steps, best of {a.repeats}")
    print(f"{'case':44s} {'normal s':>10s} {'new s':>10s} {'ratio':>6s}")
    for label, chains, d, n in [("draw only, 4 chains x d 10", 4, 10, 0),
                                ("draw only, 4 chains x d 1000", 4, 1000, 0),
                                ("ULA step, 4 chains, d 10, n 1000", 4, 10, 1000),
                                ("ULA step, 4 chains, d 100, n 10000", 4, 100, 10000),
                                ("ULA step, 4 chains, d 1000, n 1000", 4, 1000, 1000)]:
        X = y = None
        if n:
            X = jnp.asarray(rng.normal(size=(n, d)) / np.sqrt(d), jnp.float32)
            y = jnp.asarray(rng.integers(0, 2, n), jnp.float32)
        t_old, t_new = _best_pair(make_scan(old, a.steps, chains, d, X, y), make_scan(new, a.steps, chains, d, X, y),
                                  key, repeats=a.repeats)
        print(f"{label:44s} {t_old:10.4f} {t_new:10.4f} {t_new / t_old:6.2f}")


if __name__ == "__main__":
    main()
