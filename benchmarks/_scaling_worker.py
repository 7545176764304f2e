"""One measurement of the scaling section per process (device count and peak memory are per process).

    python -m benchmarks._scaling_worker step N D DTYPE STEPS BLOCK      # one device: steps/s + peak RSS
    python -m benchmarks._scaling_worker baseline N D STEPS              # the unsharded path (closed X)
    python -m benchmarks._scaling_worker devices N D STEPS BLOCK         # 8 simulated devices: 1 vs 8
    python -m benchmarks._scaling_worker dtypes N D STEPS BLOCK          # f32 vs bf16, interleaved timing
    python -m benchmarks._scaling_worker bandwidth MB                     # read bandwidth (a full reduction)
    python -m benchmarks._scaling_worker adult                           # Adult accuracy f32 vs bf16

Each prints one JSON line. Rows are generated chunk by chunk (never a host copy of X): peak RSS
minus the RSS after start-up is X on the device plus the temporaries of placement and stepping.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

if len(sys.argv) > 1 and sys.argv[1] == "devices":
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb() -> float:
    """This process's peak RSS (VmHWM of its own address space). Not ``ru_maxrss``: on Linux that
    keeps the high-water mark of the process that forked us across exec, so a worker started by a
    large benchmark runner would report the runner's peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class SyntheticRows:
    """Rows of norm <= 1 made chunk by chunk from (seed, chunk start): X[s:e] costs O((e-s) d)."""

    def __init__(self, n, d, labels=False):
        self.n, self.d, self.labels = n, d, labels
        self.shape = (n, d) if not labels else (n,)
        self.ndim = len(self.shape)
        self.w = np.random.default_rng(1).normal(size=d) * 3 / np.sqrt(d)

    def __len__(self):
        return self.n

    def __getitem__(self, sl):
        s, e = sl.start or 0, min(sl.stop, self.n)
        rng = np.random.default_rng([7, s])
        X = (rng.normal(size=(e - s, self.d)) / np.sqrt(self.d)).astype(np.float32)
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
        if not self.labels:
            return X
        return (rng.random(e - s) < 1 / (1 + np.exp(-X @ self.w))).astype(np.float32)


def _compiled_chain(U, args, dim, steps):
    """A jitted ULA chain of ``steps`` steps on U (data as arguments); returns (call, compile s)."""
    from dp_infer.kernels.langevin import sample_chain

    @jax.jit
    def run(key, *data):
        return sample_chain(key, lambda th: U(th, *data), jnp.zeros(dim), 1e-4, steps).last_state.z

    t0 = time.perf_counter()
    run(jax.random.PRNGKey(0), *args).block_until_ready()
    return (lambda r: run(jax.random.PRNGKey(r), *args).block_until_ready()), time.perf_counter() - t0


def _best_times(calls: dict, rounds: int = 3) -> dict:
    """Best wall time per call, the calls interleaved round-robin (fair under a shared machine)."""
    best = {k: float("inf") for k in calls}
    for r in range(rounds):
        for k, f in calls.items():
            t0 = time.perf_counter()
            f(r + 1)
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def _chain_runner(U, args, dim, steps):
    call, compile_s = _compiled_chain(U, args, dim, steps)
    return _best_times({"x": call})["x"] / steps, compile_s


def step(n, d, dtype, steps, block):
    from dp_infer.losses import logistic
    from dp_infer.parallel.sharding import ShardedPotential, data_mesh, shard_rows

    n, d, steps, block = int(n), int(d), int(steps), int(block)
    base = rss_mb()
    loss = logistic(row_norm=1.0, l2=1e-3)
    data = shard_rows(loss, SyntheticRows(n, d), SyntheticRows(n, d, labels=True), data_mesh(jax.devices()[:1]),
                      dtype=dtype, block_rows=block)
    placed = rss_mb()
    U = ShardedPotential(loss, data, float(n))
    per_step, compile_s = _chain_runner(U, U.args(), d, steps)
    x_mb = data.X.nbytes / 2**20
    return {"n": n, "d": d, "dtype": dtype, "block_rows": block, "step_s": per_step, "compile_s": compile_s,
            "x_MB": x_mb, "bytes_per_step": int(data.X.nbytes), "rss_base_MB": base, "rss_placed_MB": placed,
            "peak_MB": peak_mb(), "peak_over_x": (peak_mb() - base) / x_mb}


def baseline(n, d, steps):
    """The pre-sharding path at the same n: X on the host, checked, closed over by the potential."""
    from dp_infer.losses import logistic
    from dp_infer.potentials import gibbs_potential

    n, d, steps = int(n), int(d), int(steps)
    base = rss_mb()
    loss = logistic(row_norm=1.0, l2=1e-3)
    X, y = SyntheticRows(n, d)[0:n], SyntheticRows(n, d, labels=True)[0:n]
    U = gibbs_potential(loss, X, y, beta=float(n))
    x_mb = X.nbytes / 2**20
    per_step, compile_s = _chain_runner(lambda th: U(th), (), d, steps)
    return {"n": n, "d": d, "step_s": per_step, "compile_s": compile_s, "x_MB": x_mb,
            "peak_MB": peak_mb(), "peak_over_x": (peak_mb() - base) / x_mb}


def devices(n, d, steps, block):
    from dp_infer.losses import logistic
    from dp_infer.parallel.sharding import ShardedPotential, data_mesh, shard_rows

    n, d, steps, block = int(n), int(d), int(steps), int(block)
    loss = logistic(row_norm=1.0, l2=1e-3)
    X, y = SyntheticRows(n, d), SyntheticRows(n, d, labels=True)
    out = {"n": n, "d": d, "device_count": jax.device_count(), "rows": []}
    calls, compile_s = {}, {}
    for label, mesh in [("1 device", data_mesh(jax.devices()[:1])), ("8 devices (rows)", data_mesh()),
                        ("8 devices (2 chain x 4 row shards)", data_mesh(chain_shards=2))]:
        U = ShardedPotential(loss, shard_rows(loss, X, y, mesh, block_rows=block), float(n))
        calls[label], compile_s[label] = _compiled_chain(U, U.args(), d, steps)
    t = _best_times(calls)
    out["rows"] = [{"layout": k, "step_s": v / steps, "compile_s": compile_s[k]} for k, v in t.items()]
    return out


def dtypes(n, d, steps, block):
    from dp_infer.losses import logistic
    from dp_infer.parallel.sharding import ShardedPotential, data_mesh, shard_rows

    n, d, steps, block = int(n), int(d), int(steps), int(block)
    loss = logistic(row_norm=1.0, l2=1e-3)
    X, y = SyntheticRows(n, d), SyntheticRows(n, d, labels=True)
    calls = {}
    for dtype in ("float32", "bfloat16"):
        U = ShardedPotential(loss, shard_rows(loss, X, y, data_mesh(jax.devices()[:1]), dtype=dtype,
                                              block_rows=block), float(n))
        calls[dtype] = _compiled_chain(U, U.args(), d, steps)[0]
    t = _best_times(calls, rounds=5)
    return {"n": n, "d": d, "block_rows": block, "f32_step_s": t["float32"] / steps,
            "bf16_step_s": t["bfloat16"] / steps, "bf16_speedup": t["float32"] / t["bfloat16"]}


def bandwidth(mb):
    a = jnp.ones((int(float(mb) * 2**20) // 4,), jnp.float32)
    f = jax.jit(jnp.sum)
    f(a).block_until_ready()
    best = _best_times({"r": lambda r: f(a).block_until_ready()}, rounds=10)["r"]
    return {"array_MB": a.nbytes / 2**20, "read_GBps": a.nbytes / best / 1e9}


def adult():
    import dp_infer
    from dp_infer.datasets import load_adult
    from dp_infer.losses import logistic
    from dp_infer.infer.nonprivate import accuracy, minimize_loss
    from dp_infer.parallel.sharding import data_mesh, shard_rows

    data = load_adult()
    loss = logistic(row_norm=1.0, l2=1e-3)
    out = {"n": int(len(data.y_train)), "rows": []}
    for dtype in ("float32", "bfloat16"):
        placed = shard_rows(loss, data.X_train, data.y_train, data_mesh(), dtype=dtype)
        X_run = np.asarray(placed.X[:placed.n]).astype(np.float64)  # the rows the sampler sees
        ref = minimize_loss(loss, X_run, data.y_train)[0]
        accs = []
        for seed in range(5):
            run = dp_infer.fit(loss, placed, None, eps=1.0, delta=1e-5, num_chains=1, seed=seed, progress_bar=False)
            accs.append(accuracy(run.estimate(), data.X_test, data.y_test))
        out["rows"].append({"dtype": dtype, "private_acc_mean": float(np.mean(accs)), "private_acc_sd": float(np.std(accs)),
                            "nonprivate_acc": float(accuracy(np.asarray(ref), data.X_test, data.y_test)), "seeds": 5,
                            "max_row_norm": float(np.linalg.norm(X_run, axis=1).max())})
    return out


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    print(json.dumps({"step": step, "baseline": baseline, "devices": devices, "dtypes": dtypes, "bandwidth": bandwidth,
                      "adult": adult}[mode](*args)), flush=True)
