"""Hardware bound: bytes moved per full-batch gradient step vs measured memory bandwidth.

A full-batch logistic gradient reads X twice (X theta, then X^T r): ``2 n d 4`` bytes in float32
(plus O(n) vectors). Bandwidth is measured in the same run with a large array copy
(``a * 1.0001`` with the buffer donated: one read + one write) and a full reduction (read only),
jitted, best of 10; the gradient step (read dominated) is compared with the read bandwidth.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._common import logistic_potential, synthetic_logistic, timed


def run(quick: bool, log=print):
    n = 200_000 if quick else 1_000_000
    d = 100
    X, y = synthetic_logistic(n, d)
    _, grad_U = logistic_potential(X, y, float(n))
    g = jax.jit(grad_U)
    th = jnp.zeros(d)
    t_grad, _ = timed(lambda: g(th), repeats=10)
    big = jnp.ones((max(n * d, 50_000_000),), jnp.float32)
    # read bandwidth: a full reduction over the array (no output allocation)
    rd = jax.jit(lambda a: jnp.sum(a))
    t_read, _ = timed(lambda: rd(big), repeats=10)
    # copy bandwidth (read + write), output buffer donated back so no fresh pages are faulted in
    cp = jax.jit(lambda a: a * 1.0001, donate_argnums=0)
    state = {"a": big}

    def copy():
        state["a"] = cp(state["a"])
        return state["a"]

    t_copy, _ = timed(copy, repeats=10)
    bw_copy = 2 * big.nbytes / t_copy
    bw = big.nbytes / t_read
    bytes_step = 2 * X.nbytes + 4 * (3 * n + 2 * d)
    achieved = bytes_step / t_grad
    log(f"  [hardware] grad step {t_grad * 1e3:.2f} ms, {achieved / 1e9:.2f} GB/s vs read {bw / 1e9:.2f} GB/s, "
        f"copy {bw_copy / 1e9:.2f} GB/s")
    return {"n": n, "d": d, "grad_step_s": t_grad, "bytes_per_step": bytes_step, "achieved_GBps": achieved / 1e9,
            "read_GBps": bw / 1e9, "copy_GBps": bw_copy / 1e9, "array_MB": big.nbytes / 1e6,
            "fraction_of_bandwidth": achieved / bw}
