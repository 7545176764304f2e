"""Sums of per-example losses and gradients over row blocks: memory O(block x d) beyond the data.

``blocked_loss_sum(example_fn, theta, X, y, weight, block_rows=B, clip_norm=C)`` is

    S(theta) = sum_i w_i ell(theta; x_i, y_i)        (w_i in {0, 1}; w = None means all 1)

evaluated ``B`` rows at a time with ``lax.scan`` over full blocks plus one remainder block, so no
temporary larger than a block is ever built (in particular no (n, d) matrix of per-example
gradients, and no copy of X: blocks are ``dynamic_slice`` views of the data). Its gradient is
defined by a ``jax.custom_vjp`` whose forward pass accumulates the per-block gradients in the
same scan (a plain reverse-mode scan would stack per-block residuals, i.e. O(n) memory).

* Unclipped (``clip_norm=None``): the gradient is ``sum_i w_i grad ell_i``, the gradient of S.
* Clipped: each per-example gradient is rescaled to norm ``<= clip_norm`` (a non-finite one
  counts as 0) before the sum, exactly as :func:`dp_infer.losses.clipped_loss` defines it; the
  per-example gradients of one block are the only (B, d) temporary.

The function computed is the same as the unblocked one (only the order of the float additions
differs), so a loss's constants and every privacy plan made from them are unchanged. Weights are
public (they mark padding rows of a sharded layout, never data); a weight-0 row contributes
exactly 0 (its loss is masked with ``where``; the gradient of a loss with a declared finite
Lipschitz bound is finite at any admissible row, and the zero row used for padding is admissible).

Accumulation: every block sum and the running total are in the dtype of ``theta`` (float32 by
default) whatever the dtype of X (bfloat16 rows are promoted block by block).

Block size (:func:`default_row_block`): the result does not depend on it (to float rounding), only
the speed and the memory beyond X do. On a CPU a block of a few thousand rows stays in the cache
while its value and gradient are taken (:data:`CPU_BLOCK_ROWS`); on a GPU or TPU each block is a
sequential step of the scan, i.e. at least one kernel launch and a pass too small to fill the
device, so the default there is all rows in one block whenever X and one block's temporaries fit in
:data:`DEVICE_MEMORY_FRACTION` of the device's memory (measured on an H200, n = 2e6, d = 100:
8.9 ms per step in blocks of 4096 rows, 0.90 ms in one block).
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.flatten_util import ravel_pytree

from .._validation import check_positive_int

__all__ = ["clip_tree", "clipped_mean", "blocked_loss_sum", "blocked_loss_sum_and_grad", "block_layout",
           "default_row_block", "row_block_rule", "CPU_BLOCK_ROWS", "DEVICE_MEMORY_FRACTION", "ASSUMED_DEVICE_BYTES",
           "ASSUMED_CHAINS"]

#: rows per block on a CPU (a float32 block at d = 100 is 1.6 MB: about the L2 cache of one core)
CPU_BLOCK_ROWS = 4096
#: fraction of an accelerator's memory that X plus one block's temporaries may take for the
#: default to be "all rows in one block" (the rest is left to the chains' states, XLA's own
#: buffers and other programs)
DEVICE_MEMORY_FRACTION = 0.5
#: an accelerator's memory when ``device.memory_stats()`` does not say (the smallest current
#: data-centre GPU memory, 16 GiB: an underestimate only makes the default block smaller)
ASSUMED_DEVICE_BYTES = 16 * 2**30
#: the smallest default block on an accelerator when all rows do not fit in one
MIN_DEVICE_BLOCK_ROWS = 65536
#: chains evaluated together (vectorised) that the default block allows temporaries for: they
#: share X but each has its own per-block temporaries (the posterior mode runs 4 chains by default)
ASSUMED_CHAINS = 4
_ACCELERATORS = ("gpu", "cuda", "rocm", "tpu", "metal")


def clip_tree(g, clip_norm):
    """Rescale one example's gradient to norm <= clip_norm; a non-finite gradient becomes 0
    (so the sensitivity bound holds for the function actually run, whatever the loss does).
    Returns ``(clipped, was_clipped)``."""
    flat, unravel = ravel_pytree(g)
    norm = jnp.linalg.norm(flat)
    finite = jnp.isfinite(norm)
    scale = jnp.where(finite, jnp.minimum(1.0, clip_norm / jnp.maximum(norm, 1e-30)), 0.0)
    return unravel(jnp.where(finite, flat, 0.0) * scale), jnp.logical_or(norm > clip_norm, ~finite)


def clipped_mean(example_fn, clip_norm, theta, X, y):
    """Mean per-example loss whose ``jax.grad`` is the mean of per-example gradients each clipped
    by :func:`clip_tree` (the unblocked form of ``blocked_loss_sum(..., clip_norm=...) / n``)."""

    @jax.custom_vjp
    def f(theta):
        return jnp.mean(jax.vmap(example_fn, in_axes=(None, 0, 0))(theta, X, y))

    def fwd(theta):
        vals, grads = jax.vmap(jax.value_and_grad(example_fn), in_axes=(None, 0, 0))(theta, X, y)
        clipped, _ = jax.vmap(clip_tree, in_axes=(0, None))(grads, clip_norm)
        return jnp.mean(vals), jax.tree_util.tree_map(lambda a: jnp.mean(a, axis=0), clipped)

    def bwd(mean_grad, ct):
        return (jax.tree_util.tree_map(lambda a: ct * a, mean_grad),)

    f.defvjp(fwd, bwd)
    return f(theta)


def block_layout(n: int, block_rows: int) -> tuple[int, int, int]:
    """``(block, full_blocks, remainder)`` for ``n`` rows in blocks of at most ``block_rows``."""
    n = check_positive_int("n", n)
    b = min(check_positive_int("block_rows", block_rows), n)
    return b, n // b, n % b


def _device_bytes(device) -> tuple[int, str]:
    """``(bytes, source)``: the device's memory limit from ``memory_stats()["bytes_limit"]`` where
    the backend reports it, else :data:`ASSUMED_DEVICE_BYTES`."""
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - backends without memory statistics raise or return None
        stats = None
    limit = (stats or {}).get("bytes_limit")
    if limit:
        return int(limit), "memory_stats"
    return ASSUMED_DEVICE_BYTES, "assumed"


def row_block_rule(n: int, d: int, dtype="float32", device=None, *,
                   memory_fraction: float = DEVICE_MEMORY_FRACTION, chains: int = ASSUMED_CHAINS) -> dict:
    """The default block of :func:`default_row_block` with the reason for it (for a run's
    description): ``{"block_rows", "platform", "rule", ...}``."""
    n = check_positive_int("n", n)
    d = check_positive_int("d", d)
    chains = check_positive_int("chains", chains)
    if not 0 < float(memory_fraction) <= 1:
        raise ValueError(f"memory_fraction must be in (0, 1], got {memory_fraction!r}")
    device = jax.devices()[0] if device is None else device
    platform = str(getattr(device, "platform", "cpu")).lower()
    if platform not in _ACCELERATORS:
        b = min(CPU_BLOCK_ROWS, n)
        return {"block_rows": b, "platform": platform,
                "rule": f"cpu: blocks of {CPU_BLOCK_ROWS} rows (cache-sized)"}
    limit, source = _device_bytes(device)
    budget = float(memory_fraction) * limit
    x_bytes = n * d * int(jnp.dtype(dtype).itemsize)
    # one block of B rows, per chain: a float32 (B, d) temporary (the promoted block, or the
    # per-example gradients when the loss clips) and a few float32 vectors of length B
    per_row = chains * (4 * d + 8 * 4)
    info = {"platform": platform, "device_bytes": limit, "device_bytes_source": source,
            "memory_fraction": float(memory_fraction), "chains": chains, "x_bytes": x_bytes}
    if x_bytes + n * per_row <= budget:
        return {"block_rows": n, **info,
                "rule": f"{platform}: all rows in one block (X + one block's temporaries fit in "
                        f"{memory_fraction:g} of the device's memory, {source})"}
    fit = int((budget - x_bytes) // per_row)
    b = min(n, max(MIN_DEVICE_BLOCK_ROWS, fit // CPU_BLOCK_ROWS * CPU_BLOCK_ROWS))
    return {"block_rows": b, **info,
            "rule": f"{platform}: blocks of {b} rows (all rows do not fit in {memory_fraction:g} "
                    f"of the device's memory, {source})"}


def default_row_block(n: int, d: int, dtype="float32", device=None, *,
                      memory_fraction: float = DEVICE_MEMORY_FRACTION, chains: int = ASSUMED_CHAINS) -> int:
    """Default rows per block for ``n`` rows of ``d`` features stored as ``dtype`` on ``device``
    (default: JAX's first device).

    * CPU: :data:`CPU_BLOCK_ROWS` (capped at n), a cache-sized block.
    * GPU / TPU: ``n`` (all rows in one block) when X plus one block's temporaries for ``chains``
      vectorised chains (per chain a float32 (n, d) array and a few float32 vectors of length n)
      take at most ``memory_fraction`` of the device's memory (``memory_stats()["bytes_limit"]``, else :data:`ASSUMED_DEVICE_BYTES`);
      otherwise the largest multiple of :data:`CPU_BLOCK_ROWS` that fits, at least
      :data:`MIN_DEVICE_BLOCK_ROWS`.

    Only speed and memory depend on the block, never the result (beyond float rounding) nor any
    privacy constant. Pass ``block_rows`` explicitly to override it."""
    return int(row_block_rule(n, d, dtype, device, memory_fraction=memory_fraction, chains=chains)["block_rows"])


def _block_values(example_fn, theta, Xb, yb, wb):
    vals = jax.vmap(example_fn, in_axes=(None, 0, 0))(theta, Xb, yb)
    vals = vals.astype(jnp.result_type(theta))
    return vals if wb is None else jnp.where(wb > 0, vals, jnp.zeros_like(vals))


def _block_value_and_grad(example_fn, clip_norm, theta, Xb, yb, wb):
    if clip_norm is None:
        return jax.value_and_grad(lambda t: jnp.sum(_block_values(example_fn, t, Xb, yb, wb)))(theta)
    vals, grads = jax.vmap(jax.value_and_grad(example_fn), in_axes=(None, 0, 0))(theta, Xb, yb)
    clipped, _ = jax.vmap(clip_tree, in_axes=(0, None))(grads, clip_norm)
    vals = vals.astype(jnp.result_type(theta))
    if wb is not None:
        vals = jnp.where(wb > 0, vals, jnp.zeros_like(vals))
        clipped = jax.tree_util.tree_map(lambda a: a * wb.astype(a.dtype).reshape((-1,) + (1,) * (a.ndim - 1)),
                                         clipped)
    return jnp.sum(vals), jax.tree_util.tree_map(lambda a: jnp.sum(a, axis=0).astype(jnp.result_type(theta)),
                                                 clipped)


def _fold(block_fn, X, y, w, block_rows):
    """sum over row blocks of ``block_fn(Xb, yb, wb)`` (a pytree): block 0 starts the sum (so the
    carry has the type of a block's result, also under ``shard_map``), the other full blocks are
    scanned, the remainder block is added last."""
    b, q, r = block_layout(X.shape[0], block_rows)

    def take(start, size):
        Xb = lax.dynamic_slice_in_dim(X, start, size)
        yb = lax.dynamic_slice_in_dim(y, start, size)
        wb = None if w is None else lax.dynamic_slice_in_dim(w, start, size)
        return Xb, yb, wb

    def body(acc, i):
        part = block_fn(*take(i * b, b))
        return jax.tree_util.tree_map(jnp.add, acc, part), None

    acc = block_fn(*take(0, b))
    if q > 1:
        acc, _ = lax.scan(body, acc, jnp.arange(1, q))
    if r:
        acc = jax.tree_util.tree_map(jnp.add, acc, block_fn(*take(q * b, r)))
    return acc


@partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def _sum(example_fn, clip_norm, block_rows, theta, X, y, w):
    return _fold(lambda Xb, yb, wb: jnp.sum(_block_values(example_fn, theta, Xb, yb, wb)), X, y, w, block_rows)


def _value_and_grad(example_fn, clip_norm, block_rows, theta, X, y, w):
    return _fold(partial(_block_value_and_grad, example_fn, clip_norm, theta), X, y, w, block_rows)


def _sum_fwd(example_fn, clip_norm, block_rows, theta, X, y, w):
    return _value_and_grad(example_fn, clip_norm, block_rows, theta, X, y, w)


def _sum_bwd(example_fn, clip_norm, block_rows, grad, ct):
    # the data get no cotangent (None = symbolic zero: no (n, d) buffer of zeros is built)
    return jax.tree_util.tree_map(lambda a: ct * a, grad), None, None, None


_sum.defvjp(_sum_fwd, _sum_bwd)


def blocked_loss_sum(example_fn: Callable, theta, X, y, weight=None, *, block_rows: int,
                     clip_norm: float | None = None):
    """``sum_i w_i ell(theta; x_i, y_i)`` in row blocks (see the module docstring).

    :param example_fn: ``ell(theta, x, y) -> scalar`` for one row.
    :param weight: ``None`` or a public 0/1 vector of length n (0 marks padding rows).
    :param block_rows: rows per block (>= 1; capped at n).
    :param clip_norm: per-example gradient clipping norm (``None``: no clipping).
    Differentiable once in ``theta`` (reverse mode); X, y and the weights get zero cotangents.
    """
    check_positive_int("block_rows", block_rows)
    return _sum(example_fn, clip_norm, int(block_rows), theta, X, y, weight)


def blocked_loss_sum_and_grad(example_fn: Callable, theta, X, y, weight=None, *, block_rows: int,
                              clip_norm: float | None = None):
    """``(S(theta), grad S(theta))`` of :func:`blocked_loss_sum` in one pass over the rows (the
    gradient clipped per example when ``clip_norm`` is given); not itself differentiable."""
    check_positive_int("block_rows", block_rows)
    return _value_and_grad(example_fn, clip_norm, int(block_rows), theta, X, y, weight)
