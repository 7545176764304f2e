"""The default row block (dp_infer.losses.row_blocks.default_row_block): cache-sized on a CPU, all
rows in one block on a GPU/TPU when X and one block's temporaries fit in the stated fraction of the
device's memory; the caller's block wins; and the result does not depend on the block.

Accelerators are faked (an object with ``platform`` and ``memory_stats``): the rule reads nothing
else of a device."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer.losses import clipped_loss, logistic
from dp_infer.losses import row_blocks
from dp_infer.losses.row_blocks import (ASSUMED_CHAINS, ASSUMED_DEVICE_BYTES, CPU_BLOCK_ROWS, DEVICE_MEMORY_FRACTION,
                                        MIN_DEVICE_BLOCK_ROWS, blocked_loss_sum_and_grad, default_row_block,
                                        row_block_rule)
from dp_infer.parallel.sharding import ShardedPotential, data_mesh, shard_rows

GiB = 2**30


class FakeDevice:
    def __init__(self, platform="gpu", bytes_limit=None):
        self.platform, self._limit = platform, bytes_limit

    def memory_stats(self):
        return None if self._limit is None else {"bytes_limit": self._limit, "bytes_in_use": 0}


class NoStats:
    platform = "tpu"

    def memory_stats(self):
        raise NotImplementedError


def test_cpu_block_is_cache_sized():
    cpu = jax.devices("cpu")[0]
    assert default_row_block(1_000_000, 100, "float32", cpu) == CPU_BLOCK_ROWS == 4096
    assert default_row_block(1_000_000, 100, "bfloat16", cpu) == CPU_BLOCK_ROWS
    assert default_row_block(1000, 100, device=cpu) == 1000  # capped at n
    assert default_row_block(1_000_000, 100) == 4096  # default device: the tests run on the CPU
    assert "cpu" in row_block_rule(10**6, 100, device=cpu)["rule"]


def test_gpu_all_rows_when_they_fit():
    h200 = FakeDevice("gpu", 140 * GiB)
    # the measurement: n = 2e6, d = 100 (X = 0.8 GB) runs in one block
    assert default_row_block(2_000_000, 100, "float32", h200) == 2_000_000
    rule = row_block_rule(2_000_000, 100, "float32", h200)
    assert rule["device_bytes_source"] == "memory_stats" and "one block" in rule["rule"]
    assert rule["memory_fraction"] == DEVICE_MEMORY_FRACTION
    assert default_row_block(10_000_000, 100, "bfloat16", FakeDevice("tpu", 96 * GiB)) == 10_000_000
    # the temporaries of 4 vectorised chains (clipped per-example gradients) would not fit in 32 GiB
    assert default_row_block(10_000_000, 100, "bfloat16", FakeDevice("tpu", 32 * GiB)) < 10_000_000
    assert default_row_block(10_000_000, 100, "bfloat16", FakeDevice("tpu", 32 * GiB), chains=1) == 10_000_000


def test_gpu_too_large_for_one_block():
    small = FakeDevice("gpu", 16 * GiB)
    n, d = 30_000_000, 100  # X alone is 12 GB > half of 16 GiB
    b = default_row_block(n, d, "float32", small)
    assert b == MIN_DEVICE_BLOCK_ROWS < n
    # X fits but one block of all rows does not: the largest multiple of 4096 that fits
    n = 15_000_000  # X = 6 GB, all-rows temporaries another 6.5 GB
    b = default_row_block(n, d, "float32", small)
    assert MIN_DEVICE_BLOCK_ROWS <= b < n and b % CPU_BLOCK_ROWS == 0
    assert n * d * 4 + ASSUMED_CHAINS * b * (4 * d + 32) <= DEVICE_MEMORY_FRACTION * 16 * GiB
    # all of the device for one chain lets all rows in
    assert default_row_block(n, d, "float32", small, memory_fraction=1.0, chains=1) == n


def test_gpu_without_memory_stats_uses_the_stated_assumption():
    for dev in (FakeDevice("gpu", None), NoStats()):
        rule = row_block_rule(1_000_000, 100, "float32", dev)
        assert rule["device_bytes_source"] == "assumed" and rule["device_bytes"] == ASSUMED_DEVICE_BYTES
        assert rule["block_rows"] == 1_000_000


def test_default_device_is_jax_first(monkeypatch):
    monkeypatch.setattr(row_blocks.jax, "devices", lambda *a: [FakeDevice("gpu", 80 * GiB)])
    assert default_row_block(2_000_000, 100) == 2_000_000


@pytest.mark.parametrize("bad", [dict(n=0), dict(d=0), dict(memory_fraction=0.0), dict(memory_fraction=1.5),
                                 dict(chains=0)])
def test_rejects_bad_arguments(bad):
    args = dict(n=10, d=3, memory_fraction=0.5, chains=1) | bad
    with pytest.raises(ValueError):
        default_row_block(args["n"], args["d"], memory_fraction=args["memory_fraction"], chains=args["chains"])


def _data(n=300, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = (rng.random(n) < 0.5).astype(np.float32)
    return X, y


def test_shard_rows_reports_the_block_and_the_override_wins():
    loss = logistic(l2=0.1)
    X, y = _data(10_000, 4)
    mesh = data_mesh(jax.devices()[:1])
    placed = shard_rows(loss, X, y, mesh)
    desc = placed.describe()
    assert desc["block_rows"] == 4096 and desc["block_rows_rule"].startswith("default: cpu")
    given = shard_rows(loss, X, y, mesh, block_rows=32).describe()
    assert given["block_rows"] == 32 and given["block_rows_rule"] == "given by the caller"
    U = ShardedPotential(loss, placed, 10_000.0)
    assert U.describe()["placement"]["block_rows"] == 4096


def test_shard_rows_on_an_accelerator_takes_all_rows(monkeypatch):
    # the CPU device treated as an accelerator (memory_stats: none -> the assumed 16 GiB)
    monkeypatch.setattr(row_blocks, "_ACCELERATORS", row_blocks._ACCELERATORS + ("cpu",))
    loss = logistic(l2=0.1)
    X, y = _data(10_000, 4)
    placed = shard_rows(loss, X, y, data_mesh(jax.devices()[:1]))
    assert placed.block_rows == 10_000
    assert "all rows in one block" in placed.describe()["block_rows_rule"]


@pytest.mark.parametrize("clip", [False, True])
def test_results_do_not_depend_on_the_block(clip):
    X, y = _data(300, 5)
    loss = logistic(l2=0.1)
    example = loss.example
    clip_norm = 0.3 if clip else None
    th = jnp.asarray(np.random.default_rng(1).normal(size=5), jnp.float32)
    ref_v, ref_g = blocked_loss_sum_and_grad(example, th, X, y, block_rows=300, clip_norm=clip_norm)
    for b in (1, 7, 64, 4096):
        v, g = blocked_loss_sum_and_grad(example, th, X, y, block_rows=b, clip_norm=clip_norm)
        np.testing.assert_allclose(float(v), float(ref_v), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(g), np.asarray(ref_g), rtol=1e-5, atol=1e-6)
    if clip:  # the clip acted (the comparison could fail)
        full = jax.vmap(jax.grad(example), in_axes=(None, 0, 0))(th, X, y)
        assert float(jnp.max(jnp.linalg.norm(full, axis=1))) > clip_norm


def test_sharded_potential_same_across_default_and_given_blocks(monkeypatch):
    X, y = _data(1000, 5, seed=2)
    loss = clipped_loss(lambda t, x, yy: jnp.logaddexp(0.0, -(2 * yy - 1) * jnp.dot(t, x)), 0.5)
    mesh = data_mesh(jax.devices()[:1])
    th = jnp.linspace(-1.0, 1.0, 5)
    vals = []
    for block in (None, 1000, 33):
        U = ShardedPotential(loss, shard_rows(loss, X, y, mesh, block_rows=block), 1000.0)
        vals.append(jax.value_and_grad(U)(th, *U.args()))
    monkeypatch.setattr(row_blocks, "_ACCELERATORS", row_blocks._ACCELERATORS + ("cpu",))
    U = ShardedPotential(loss, shard_rows(loss, X, y, mesh), 1000.0)
    assert U.data.block_rows == 1000
    vals.append(jax.value_and_grad(U)(th, *U.args()))
    for v, g in vals[1:]:
        np.testing.assert_allclose(float(v), float(vals[0][0]), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(g), np.asarray(vals[0][1]), rtol=1e-5, atol=1e-6)
