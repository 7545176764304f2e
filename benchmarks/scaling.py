"""Past one device: steps/s and bytes/s against the read bandwidth for n in {1e5, 1e6, 1e7} x d = 100,
bfloat16 vs float32 rows, peak memory vs the size of X, and 1 vs 8 simulated devices.

Every figure comes from a fresh subprocess (:mod:`benchmarks._scaling_worker`): the device count
is fixed when JAX starts, and peak RSS is per process. Ratios that matter are measured inside one
process with the variants interleaved (f32 vs bf16; 1 vs 8 devices). On a 2-core machine the
8 "devices" are threads sharing those cores: the 1-vs-8 figure is the overhead of the sharded
program (collectives, padding, per-device dispatch), not a speed-up.

Bytes per step: the blocked evaluation reads each block of X once per step (value and gradient
from the same block while it is in cache), so ``n d itemsize`` bytes; the unsharded baseline
(autodiff of the vmapped mean) reads X twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
D = 100
BLOCK = 4096


def _worker(*args, log=print, timeout=3600) -> dict:
    cmd = [sys.executable, "-m", "benchmarks._scaling_worker", *map(str, args)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd[2:])} failed:\n{p.stderr[-2000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    log(f"  [scaling] {' '.join(map(str, args))}: {json.dumps(out)[:300]}")
    return out


def _steps(n: int) -> int:
    """Enough steps for ~2e9 bytes of reads per timed call (>= 5)."""
    return max(5, int(2e9 // (n * D * 4)))


def run(quick: bool, log=print) -> dict:
    sizes = [100_000, 1_000_000] if quick else [100_000, 1_000_000, 10_000_000]
    bound = 1_000_000  # the bandwidth-bound size of the issue (X = 400 MB in float32)
    res = {"d": D, "block_rows": BLOCK, "quick": quick, "loadavg": os.getloadavg()}
    res["bandwidth"] = _worker("bandwidth", 512, log=log)
    rows = []
    for n in sizes:
        for dtype in ("float32", "bfloat16"):
            r = _worker("step", n, D, dtype, _steps(n), BLOCK, log=log)
            r["GBps"] = r["bytes_per_step"] / r["step_s"] / 1e9
            r["fraction_of_read_bw"] = r["GBps"] / res["bandwidth"]["read_GBps"]
            rows.append(r)
    res["one_device"] = rows
    res["baseline"] = _worker("baseline", bound, D, _steps(bound), log=log)
    res["dtypes"] = _worker("dtypes", bound, D, _steps(bound), BLOCK, log=log)
    res["devices"] = _worker("devices", 200_000 if quick else bound, D, _steps(bound), BLOCK, log=log)
    res["adult"] = _worker("adult", log=log)
    return res


def markdown(s: dict) -> list[str]:
    """The section's Markdown lines (used by benchmarks/report.py)."""
    bw = s["bandwidth"]["read_GBps"]
    L = ["## Past one device (sharded, blocked potential; logistic, d = 100)", "",
         f"Load average at the start of the section: {', '.join(f'{x:.1f}' for x in s['loadavg'])} "
         "(2 cores shared: absolute times are noisy; the interleaved ratios below are the robust figures). "
         f"Read bandwidth (full reduction over a {s['bandwidth']['array_MB']:.0f} MB array): {bw:.2f} GB/s. "
         f"Rows in blocks of {s['block_rows']}; one ULA step = value and gradient, X read once.", "",
         "| n | X dtype | X MB | ms per step | GB/s | of read bandwidth | steps/s | peak RSS over start-up / X | "
         "peak RSS - start-up - X (MB) |", "|---|---|---|---|---|---|---|---|---|"]
    # one-device rows run in separate processes at different times: a fraction above 1 means the
    # shared machine was busier during the bandwidth probe than during that step
    for r in s["one_device"]:
        extra = r["peak_MB"] - r["rss_base_MB"] - r["x_MB"]
        L.append(f"| {r['n']:.0e} | {r['dtype']} | {r['x_MB']:.0f} | {r['step_s'] * 1e3:.2f} | {r['GBps']:.2f} | "
                 f"{r['fraction_of_read_bw']:.2f} | {1 / r['step_s']:.1f} | {r['peak_over_x']:.2f} | {extra:.0f} |")
    L += ["", "The last column is what memory costs beyond X: placement chunks, one block's temporaries and "
          "XLA's compilation (a fixed cost); flat in n means it does not grow with n."]
    b, t = s["baseline"], s["dtypes"]
    L += ["", f"Unsharded path before this work (X on the host, checked in float64, closed over by the potential, "
          f"autodiff gradient of the vmapped mean: X read twice), n = {b['n']:.0e}: {b['step_s'] * 1e3:.2f} ms per step, peak RSS over "
          f"start-up {b['peak_over_x']:.2f} x X (compile {b['compile_s']:.1f} s: X is embedded in the program).", "",
          f"bfloat16 vs float32 rows, n = {t['n']:.0e}, interleaved in one process: {t['f32_step_s'] * 1e3:.2f} vs "
          f"{t['bf16_step_s'] * 1e3:.2f} ms per step, speed-up **{t['bf16_speedup']:.2f}x** (goal >= 1.5x, not met on this CPU: "
          "XLA:CPU's compiled step converts each bf16 block into a float32 copy (a `convert` fusion in the "
          "optimised HLO) that both matrix products then read, so halving the bytes of X does not halve the "
          "traffic; smaller blocks, which keep that copy in L2, lose more to per-block overhead).", ""]
    dv = s["devices"]
    base = dv["rows"][0]["step_s"]
    L += [f"1 vs {dv['device_count']} simulated CPU devices (n = {dv['n']:.0e}, same 2 cores, interleaved): the ratio "
          "is the overhead of the sharded program, NOT a speed-up. The timed chain is a single chain, so the "
          "chain-split layout's two device groups both evaluate the full sum (duplicated work): that row shows the "
          "cost of the layout, not its use (several chains, more devices than the data need).", "",
          "| layout | ms per step | time vs 1 device | compile s |", "|---|---|---|---|"]
    for r in dv["rows"]:
        L.append(f"| {r['layout']} | {r['step_s'] * 1e3:.2f} | {r['step_s'] / base:.2f} | {r['compile_s']:.1f} |")
    a = s["adult"]
    L += ["", f"Adult (n = {a['n']}, eps = 1, delta = 1e-5, trajectory route, 1 chain, {a['rows'][0]['seeds']} seeds): "
          "test accuracy of the released estimate with X stored as", "",
          "| X dtype | private accuracy (mean +- sd) | non-private accuracy on the same rows | max row norm after the cast |",
          "|---|---|---|---|"]
    for r in a["rows"]:
        L.append(f"| {r['dtype']} | {r['private_acc_mean']:.4f} +- {r['private_acc_sd']:.4f} | "
                 f"{r['nonprivate_acc']:.4f} | {r['max_row_norm']:.6f} |")
    return L + [""]
