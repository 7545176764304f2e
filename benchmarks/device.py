"""One device benchmark: what the chains' gradient costs on the machine at hand, against its memory.

    python -m benchmarks.device [--quick | --large | --smoke] [--n N ..] [--blocks B ..] [--md PATH] [--json PATH]
    XLA_FLAGS=--xla_force_host_platform_device_count=2 python -m benchmarks.device --quick   # 2 CPU "devices"

Measured in one process (the device count is fixed when JAX starts), logistic loss, d = 100:

* memory bandwidth: a full reduction over a large float32 array (read) and ``a * 1.0001`` with the
  buffer donated (read + write), jitted, best of several;
* the chains' row-blocked gradient (:class:`dp_infer.parallel.sharding.ShardedPotential`, value
  and gradient in one pass, rows sharded over every device) against the block size, float32 and
  bfloat16 rows; the default block of this device (:func:`dp_infer.losses.row_blocks.default_row_block`)
  is marked;
* the plain autodiff full-batch gradient (``jax.value_and_grad`` of the vmapped mean loss, the
  unblocked path) on the same float32 rows.

n = 1e6 by default; ``--large`` adds 1e7 (X = 4 GB in float32: an accelerator's size); ``--quick``
runs 1e5 and 1e6 with fewer repeats; ``--smoke`` is the smallest configuration (seconds, for the
tests). Variants of one n are timed interleaved (round robin, best time each), so their ratios are
fair on a shared machine; "GB/s" is X's bytes per step over the step time (the blocked step reads
X once), "of read" that over the measured read bandwidth.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import jax
import jax.numpy as jnp

D = 100
BLOCKS = (1024, 4096, 16384, 65536)


def _best(calls: dict, rounds: int) -> dict:
    for f in calls.values():  # compile and warm up
        jax.block_until_ready(f())
    best = {k: float("inf") for k in calls}
    for _ in range(rounds):
        for k, f in calls.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f())
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def bandwidth(mb: float, rounds: int) -> dict:
    a = jnp.ones((int(mb * 2**20) // 4,), jnp.float32)
    nbytes = a.nbytes
    read = jax.jit(jnp.sum)
    copy = jax.jit(lambda x: x * 1.0001, donate_argnums=0)
    state = {"a": a}

    def do_copy():
        state["a"] = copy(state["a"])
        return state["a"]

    t = _best({"read": lambda: read(state["a"]), "copy": do_copy}, rounds)
    return {"array_MB": nbytes / 2**20, "read_GBps": nbytes / t["read"] / 1e9,
            "copy_GBps": 2 * nbytes / t["copy"] / 1e9}


def steps(n: int, d: int, blocks, rounds: int) -> list[dict]:
    """Step times of the blocked potential (every block size, f32 and bf16) and the autodiff baseline."""
    from benchmarks._scaling_worker import SyntheticRows
    from dp_infer.losses import logistic
    from dp_infer.parallel.sharding import ShardedPotential, data_mesh, shard_rows

    loss = logistic(row_norm=1.0, l2=1e-3)
    mesh = data_mesh()
    X, y = SyntheticRows(n, d), SyntheticRows(n, d, labels=True)
    theta = jnp.full((d,), 0.01, jnp.float32)
    calls, meta = {}, {}
    for dtype in ("float32", "bfloat16"):
        placed = shard_rows(loss, X, y, mesh, dtype=dtype)  # the default block of this device
        default, m = placed.block_rows, int(placed.X.shape[0]) // placed.row_shards
        sizes = sorted({min(b, m) for b in blocks} | {m, default})
        for b in sizes:
            data = dataclasses.replace(placed, block_rows=b)
            U = ShardedPotential(loss, data, float(n))
            f = jax.jit(jax.value_and_grad(U))
            args = U.args()
            calls[(dtype, b)] = lambda f=f, args=args: f(theta, *args)
            meta[(dtype, b)] = {"n": n, "d": d, "dtype": dtype, "path": "blocked", "block_rows": b,
                                "rows_per_shard": m, "default": b == default,
                                "x_bytes": int(placed.X.nbytes)}
        if dtype == "float32":
            Xf, yf = placed.X, placed.y  # n real rows when the shards need no padding
            if int(Xf.shape[0]) != n:
                Xf, yf = Xf[:n], yf[:n]
            g = jax.jit(jax.value_and_grad(lambda t, A, b: loss.mean(t, A, b)))
            calls[("float32", "autodiff")] = lambda: g(theta, Xf, yf)
            meta[("float32", "autodiff")] = {"n": n, "d": d, "dtype": "float32", "path": "autodiff full batch",
                                             "block_rows": None, "rows_per_shard": m, "default": False,
                                             "x_bytes": int(Xf.nbytes)}
    t = _best(calls, rounds)
    rows = []
    for k, s in t.items():
        r = dict(meta[k], step_s=s)
        r["GBps"] = r["x_bytes"] / s / 1e9
        rows.append(r)
    return rows


def run(sizes, *, d: int = D, blocks=BLOCKS, rounds: int = 5, bw_mb: float = 512, log=print) -> dict:
    dev = jax.devices()[0]
    res = {"command": None, "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "backend": jax.default_backend(),
           "device_kind": getattr(dev, "device_kind", str(dev)), "device_count": jax.device_count(),
           "xla_flags": os.environ.get("XLA_FLAGS", ""), "loadavg_at_start": os.getloadavg(),
           "jax": jax.__version__, "d": d}
    res["bandwidth"] = bandwidth(bw_mb, max(3, rounds))
    log(f"[device] {res['device_count']} x {res['device_kind']}: read {res['bandwidth']['read_GBps']:.2f} GB/s, "
        f"copy {res['bandwidth']['copy_GBps']:.2f} GB/s")
    res["rows"] = []
    for n in sizes:
        t0 = time.perf_counter()
        rows = steps(int(n), d, blocks, rounds)
        res["rows"] += rows
        log(f"[device] n = {int(n):.0e}: {len(rows)} variants in {time.perf_counter() - t0:.1f} s")
    res["loadavg_at_end"] = os.getloadavg()
    return res


def markdown(res: dict) -> str:
    bw = res["bandwidth"]
    L = [f"Device: {res['device_count']} x {res['device_kind']} ({res['backend']}; jax {res['jax']}); "
         f"load average at start {', '.join(f'{x:.1f}' for x in res['loadavg_at_start'])}, at end "
         f"{', '.join(f'{x:.1f}' for x in res['loadavg_at_end'])}. "
         f"Bandwidth over a {bw['array_MB']:.0f} MB float32 array: read {bw['read_GBps']:.2f} GB/s, "
         f"copy (read + write) {bw['copy_GBps']:.2f} GB/s.", "",
         f"One step = value and gradient of the logistic potential, d = {res['d']}, rows sharded over "
         f"{res['device_count']} device(s); best of interleaved rounds. \"vs default\": step time over the "
         "default block's (same n and dtype).", "",
         "| n | X dtype | path | block rows (per shard) | ms per step | GB/s (X bytes / step) | of read bandwidth | vs default |",
         "|---|---|---|---|---|---|---|---|"]
    default = {(r["n"], r["dtype"]): r["step_s"] for r in res["rows"] if r["default"]}
    for r in res["rows"]:
        blk = "—" if r["block_rows"] is None else (
            f"{r['block_rows']}" + (" (all)" if r["block_rows"] == r["rows_per_shard"] else "")
            + (" **default**" if r["default"] else ""))
        base = default.get((r["n"], "float32" if r["path"] != "blocked" else r["dtype"]))
        ratio = f"{r['step_s'] / base:.2f}" if base else "—"
        L.append(f"| {r['n']:.0e} | {r['dtype']} | {r['path']} | {blk} | {r['step_s'] * 1e3:.2f} | "
                 f"{r['GBps']:.2f} | {r['GBps'] / bw['read_GBps']:.2f} | {ratio} |")
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.device", description=__doc__.split("\n\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="n = 1e5 and 1e6, fewer rounds")
    size.add_argument("--large", action="store_true", help="n = 1e6 and 1e7 (X = 4 GB in float32)")
    size.add_argument("--smoke", action="store_true", help="the smallest configuration (seconds; for the tests)")
    p.add_argument("--n", type=float, nargs="+", metavar="N", help="row counts to run instead (e.g. --n 1e6 2e6)")
    p.add_argument("--blocks", type=int, nargs="+", metavar="B",
                   help=f"block sizes besides the default and all rows (default {' '.join(map(str, BLOCKS))})")
    p.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (best of)")
    p.add_argument("--md", metavar="PATH", help="also write the Markdown table to PATH")
    p.add_argument("--json", metavar="PATH", help="write the raw figures as JSON to PATH")
    a = p.parse_args(argv)
    blocks = tuple(a.blocks) if a.blocks else None
    if a.smoke:
        res = run([4000], d=10, blocks=blocks or (512,), rounds=a.rounds or 2, bw_mb=4)
    elif a.quick:
        res = run([int(x) for x in a.n or (1e5, 1e6)], blocks=blocks or BLOCKS, rounds=a.rounds or 3, bw_mb=256)
    else:
        res = run([int(x) for x in a.n or ([1e6, 1e7] if a.large else [1e6])], blocks=blocks or BLOCKS,
                  rounds=a.rounds or 5, bw_mb=1024)
    res["command"] = "python -m benchmarks.device" + "".join(f" {x}" for x in (argv if argv is not None else sys.argv[1:]))
    md = markdown(res)
    print(md)
    if a.md:
        with open(a.md, "w") as f:
            f.write(f"`{res['command']}`" + (f" (XLA_FLAGS={res['xla_flags']})" if res["xla_flags"] else "")
                    + "\n\n" + md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
