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
X once), "of read" that over the measured read bandwidth. Each block size is timed for one chain and
for :data:`CHAINS` chains evaluated together (``jax.vmap`` over theta, as NumPyro's vectorised
chains do: the chains share each read of X).

Optional sections (each in fresh subprocesses or the same process, as noted):

* ``--demo``: ``python -m dp_infer.cli demo --no-progress`` three times in subprocesses, with a new
  compilation cache directory: cold cache, then the same seed again (every program found in the
  cache), then fresh noise (what a user's second run gets: the chains close over the private metric,
  so their programs differ). Wall time, the demo's own split and its compilation seconds.
* ``--model``: the NumPyro-written logistic model on Adult against the built-in loss
  (:mod:`benchmarks.model`'s problem): one gradient of the potential for :data:`CHAINS` chains, and
  one whole ``fit`` of each with its compilation seconds.

The synthetic rows are drawn with ``jax.random`` on the default device (norm <= 1, logistic labels),
so n = 1e7 takes seconds to make, and copied to the host once; both dtypes are placed from that copy.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

D = 100
BLOCKS = (1024, 4096, 16384, 65536)
#: chains evaluated together in the vectorised rows (the posterior mode's default chain count)
CHAINS = 4
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def synthetic_rows(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` float32 rows of norm <= 1 and 0/1 logistic labels, drawn on JAX's default device and
    returned on the host (X then y)."""

    @jax.jit
    def make(key):
        kx, kw, ky = jax.random.split(key, 3)
        X = jax.random.normal(kx, (n, d), jnp.float32) / jnp.sqrt(d)
        # a norm a rounding above 1 is scaled below it (the loss's declared bound is checked exactly)
        X = X / jnp.maximum(1.0, jnp.linalg.norm(X, axis=1, keepdims=True) * (1 + 1e-6))
        w = jax.random.normal(kw, (d,)) * 3 / jnp.sqrt(d)
        y = (jax.random.uniform(ky, (n,)) < jax.nn.sigmoid(X @ w)).astype(jnp.float32)
        return X, y

    X, y = make(jax.random.PRNGKey(seed))
    return np.asarray(X), np.asarray(y)


def steps(n: int, d: int, blocks, rounds: int, chains: int = CHAINS) -> list[dict]:
    """Step times of the blocked potential (every block size, f32 and bf16, one chain and ``chains``
    vectorised) and the autodiff baseline."""
    from dp_infer.losses import logistic
    from dp_infer.parallel.sharding import ShardedPotential, data_mesh, shard_rows

    loss = logistic(row_norm=1.0, l2=1e-3)
    mesh = data_mesh()
    X, y = synthetic_rows(n, d)
    theta = jnp.full((d,), 0.01, jnp.float32)
    thetas = theta + 0.001 * jnp.arange(chains, dtype=jnp.float32)[:, None]
    calls, meta = {}, {}
    for dtype in ("float32", "bfloat16"):
        placed = shard_rows(loss, X, y, mesh, dtype=dtype)  # the default block of this device
        default, m = placed.block_rows, int(placed.X.shape[0]) // placed.row_shards
        sizes = sorted({min(b, m) for b in blocks} | {m, default})
        for b in sizes:
            data = dataclasses.replace(placed, block_rows=b)
            U = ShardedPotential(loss, data, float(n))
            args = U.args()
            f = jax.jit(jax.value_and_grad(U))
            fv = jax.jit(jax.vmap(jax.value_and_grad(U), in_axes=(0,) + (None,) * len(args)))
            for k, call in ((1, lambda f=f, args=args: f(theta, *args)),
                            (chains, lambda fv=fv, args=args: fv(thetas, *args))):
                calls[(dtype, b, k)] = call
                meta[(dtype, b, k)] = {"n": n, "d": d, "dtype": dtype, "path": "blocked", "block_rows": b,
                                       "chains": k, "rows_per_shard": m, "default": b == default,
                                       "x_bytes": int(placed.X.nbytes)}
        if dtype == "float32":
            Xf, yf = placed.X, placed.y  # n real rows when the shards need no padding
            if int(Xf.shape[0]) != n:
                Xf, yf = Xf[:n], yf[:n]
            g = jax.jit(jax.value_and_grad(lambda t, A, b: loss.mean(t, A, b)))
            calls[("float32", "autodiff", 1)] = lambda: g(theta, Xf, yf)
            meta[("float32", "autodiff", 1)] = {"n": n, "d": d, "dtype": "float32", "path": "autodiff full batch",
                                                "block_rows": None, "chains": 1, "rows_per_shard": m,
                                                "default": False, "x_bytes": int(Xf.nbytes)}
        del placed
    t = _best(calls, rounds)
    rows = []
    for k, s in t.items():
        r = dict(meta[k], step_s=s)
        r["GBps"] = r["x_bytes"] / s / 1e9
        rows.append(r)
    return rows


def _demo_once(cache: str, plots: str, extra: list[str], log) -> dict:
    """One ``dp-infer demo`` in a fresh process with the compilation cache in ``cache``."""
    env = dict(os.environ, DP_INFER_JAX_CACHE=cache, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    cmd = [sys.executable, "-m", "dp_infer.cli", "demo", "--no-progress", "--plots", plots, *extra]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=plots)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"demo failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    text = out.stdout
    row = {"args": " ".join(extra) or "(fresh noise)", "wall_s": wall}
    m = re.search(r"time: (\d+) s \(forecast (\d+) s, second-moment release \+ compilation \+ sampling (\d+) s, "
                  r"checks (\d+) s, plots (\d+) s\)", text)
    if m:
        row.update(zip(("reported_s", "forecast_s", "release_sampling_s", "checks_s", "plots_s"), map(int, m.groups())))
    m = re.search(r"compilation: ([\d.]+) s of the release and sampling \((\d+) programs: (\d+) compiled by XLA, "
                  r"(\d+) loaded from the compilation cache, ([\d.]+) s", text)
    if m:
        row.update(compile_s=float(m.group(1)), programs=int(m.group(2)), compiled=int(m.group(3)),
                   cache_hits=int(m.group(4)), xla_s=float(m.group(5)))
    acc = re.search(r"accuracy of the posterior mean ([\d.]+)", text)
    row["accuracy"] = float(acc.group(1)) if acc else None
    log(f"[device] demo {row['args']}: {wall:.1f} s wall; " + ", ".join(f"{k} {v}" for k, v in row.items()
                                                                      if k not in ("args", "wall_s")))
    return row


def demo_rows(log=print, seed: int = 1) -> list[dict]:
    """The demo three times with a new cache: cold, the same seed (all cached), fresh noise."""
    with tempfile.TemporaryDirectory() as tmp:
        cache, plots = os.path.join(tmp, "jax"), os.path.join(tmp, "plots")
        os.makedirs(plots)
        rows = []
        for label, extra in (("cold cache", ["--reproducible-seed", str(seed)]),
                             ("warm cache, same seed", ["--reproducible-seed", str(seed)]),
                             ("warm cache, fresh noise", [])):
            r = _demo_once(cache, plots, extra, log)
            r["run"] = label
            rows.append(r)
    return rows


def model_rows(log=print, rounds: int = 10, chains: int = CHAINS) -> list[dict]:
    """The NumPyro logistic model on Adult against the built-in loss: gradient for ``chains`` chains
    (wall time, device synchronised; the two interleaved) and one whole fit each."""
    from benchmarks.model import fit_once, gradient_functions
    from dp_infer.compilation import CompileClock
    from dp_infer.datasets import load_adult

    a = load_adult()
    X, y = a.X_train, a.y_train
    fits = {}
    for kind in ("loss", "model"):
        with CompileClock() as clock:
            t0 = time.perf_counter()
            r = fit_once(kind, X, y, horizon=1.0, seed=1)  # returns host arrays: the chains have finished
            fits[kind] = {"fit_s": time.perf_counter() - t0, "compile_s": clock.seconds, "beta": r.plan.beta,
                          "steps": r.plan.num_steps}
    fns = gradient_functions(X, y, fits["loss"]["beta"], chains)
    t = _best(fns, rounds)
    rows = [{"path": k, "n": int(X.shape[0]), "d": int(X.shape[1]), "chains": chains, "grad_s": t[k], **fits[k]}
            for k in ("loss", "model")]
    for r in rows:
        log(f"[device] {r['path']}: gradient ({chains} chains) {r['grad_s'] * 1e3:.3f} ms; fit {r['fit_s']:.1f} s "
            f"(compilation {r['compile_s']:.1f} s, {r['steps']} steps)")
    return rows


def run(sizes, *, d: int = D, blocks=BLOCKS, rounds: int = 5, bw_mb: float = 512, demo: bool = False,
        model: bool = False, log=print) -> dict:
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
    for name, wanted, section in (("demo", demo, demo_rows), ("model", model, model_rows)):
        if wanted:  # a failed optional section is reported in the table, after the rows measured above
            try:
                res[name] = section(log)
            except Exception as e:  # noqa: BLE001
                res[f"{name}_error"] = f"{type(e).__name__}: {e}"
                log(f"[device] {name} failed: {res[f'{name}_error']}")
    res["loadavg_at_end"] = os.getloadavg()
    return res


def _demo_markdown(rows) -> list[str]:
    L = ["", "The demo (`python -m dp_infer.cli demo --no-progress`, posterior mode, Adult, eps = 1), three fresh "
         "processes sharing one new compilation cache. \"release + sampling\" is the demo's own figure; "
         "\"compilation\" is the part of it spent tracing, lowering and compiling (JAX's monitoring events).", "",
         "| run | wall s | demo's total s | forecast s | release + sampling s | of which compilation s | programs compiled / loaded from the cache | checks s | plots s | accuracy |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['run']} | {r['wall_s']:.1f} | {r.get('reported_s', '—')} | {r.get('forecast_s', '—')} | "
                 f"{r.get('release_sampling_s', '—')} | {r.get('compile_s', '—')} | {r.get('compiled', '—')} / {r.get('cache_hits', '—')} | "
                 f"{r.get('checks_s', '—')} | {r.get('plots_s', '—')} | {r.get('accuracy') or '—'} |")
    return L


def _model_markdown(rows) -> list[str]:
    base = next(r for r in rows if r["path"] == "loss")["grad_s"]
    L = ["", f"Your own NumPyro model (Adult, n = {rows[0]['n']}, d = {rows[0]['d']}, logistic, eps = 1) against the "
         "built-in loss: the potential's gradient at "
         f"{rows[0]['chains']} chains (vmapped, best of interleaved rounds), and one whole fit (2 chains, horizon 1).", "",
         "| path | gradient ms | vs loss | fit s | of which compilation s | steps |", "|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['path']} | {r['grad_s'] * 1e3:.3f} | {r['grad_s'] / base:.2f} | {r['fit_s']:.1f} | "
                 f"{r['compile_s']:.1f} | {r['steps']} |")
    return L


def markdown(res: dict) -> str:
    bw = res["bandwidth"]
    L = [f"Device: {res['device_count']} x {res['device_kind']} ({res['backend']}; jax {res['jax']}); "
         f"load average at start {', '.join(f'{x:.1f}' for x in res['loadavg_at_start'])}, at end "
         f"{', '.join(f'{x:.1f}' for x in res['loadavg_at_end'])}. "
         f"Bandwidth over a {bw['array_MB']:.0f} MB float32 array: read {bw['read_GBps']:.2f} GB/s, "
         f"copy (read + write) {bw['copy_GBps']:.2f} GB/s.", "",
         f"One step = value and gradient of the logistic potential, d = {res['d']}, rows sharded over "
         f"{res['device_count']} device(s), for one chain or {CHAINS} chains vmapped (they share each read of X); "
         "best of interleaved rounds. \"GB/s\": X's bytes over the step time (a step of several chains reads X "
         "once); \"vs default\": step time over the default block's (same n, dtype and chains).", "",
         "| n | X dtype | path | chains | block rows (per shard) | ms per step | GB/s (X bytes / step) | of read bandwidth | vs default |",
         "|---|---|---|---|---|---|---|---|---|"]
    default = {(r["n"], r["dtype"], r["chains"]): r["step_s"] for r in res["rows"] if r["default"]}
    for r in res["rows"]:
        blk = "—" if r["block_rows"] is None else (
            f"{r['block_rows']}" + (" (all)" if r["block_rows"] == r["rows_per_shard"] else "")
            + (" **default**" if r["default"] else ""))
        base = default.get((r["n"], "float32" if r["path"] != "blocked" else r["dtype"], r["chains"]))
        ratio = f"{r['step_s'] / base:.2f}" if base else "—"
        L.append(f"| {r['n']:.0e} | {r['dtype']} | {r['path']} | {r['chains']} | {blk} | {r['step_s'] * 1e3:.2f} | "
                 f"{r['GBps']:.2f} | {r['GBps'] / bw['read_GBps']:.2f} | {ratio} |")
    if res.get("demo"):
        L += _demo_markdown(res["demo"])
    if res.get("model"):
        L += _model_markdown(res["model"])
    L += [f"\n{name}: FAILED ({res[f'{name}_error']})" for name in ("demo", "model") if f"{name}_error" in res]
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
    p.add_argument("--demo", action="store_true", help="also time the demo: cold cache, warm same seed, fresh noise")
    p.add_argument("--model", action="store_true", help="also time the NumPyro model against the built-in loss")
    p.add_argument("--md", metavar="PATH", help="also write the Markdown table to PATH")
    p.add_argument("--json", metavar="PATH", help="write the raw figures as JSON to PATH")
    a = p.parse_args(argv)
    blocks = tuple(a.blocks) if a.blocks else None
    extra = {"demo": a.demo, "model": a.model}
    if a.smoke:
        res = run([4000], d=10, blocks=blocks or (512,), rounds=a.rounds or 2, bw_mb=4, **extra)
    elif a.quick:
        res = run([int(x) for x in a.n or (1e5, 1e6)], blocks=blocks or BLOCKS, rounds=a.rounds or 3, bw_mb=256,
                  **extra)
    else:
        res = run([int(x) for x in a.n or ([1e6, 1e7] if a.large else [1e6])], blocks=blocks or BLOCKS,
                  rounds=a.rounds or 5, bw_mb=1024, **extra)
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
