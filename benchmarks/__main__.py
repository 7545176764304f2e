"""``python -m benchmarks [--quick] [SECTION ...] [--only SECTION ...]``: run the benchmarks, write
benchmarks/results/results.json, results.md and PNG plots, and docs/results.md.

A run of some sections keeps the other sections of the previous results.json (unless ``--fresh``),
each with its own provenance (command, start time, load average): every section's figures and
ratios come from one run, and the report says which."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

from ._common import machine

SECTIONS = ("audits", "kernels", "hardware", "chains", "utility", "quality", "posterior_coverage", "mechanisms_a",
            "mechanisms_b", "data", "model", "model_posterior", "rashomon_compare", "scaling")
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "results")
DOCS = os.path.join(os.path.dirname(HERE), "docs", "results.md")


def log(msg):
    print(msg, flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks")
    p.add_argument("--quick", action="store_true", help="~3 minute version (smaller problems, fewer seeds)")
    p.add_argument("sections", nargs="*", metavar="SECTION",
                   help="run only these sections (same as --only), e.g. `python -m benchmarks quality`")
    p.add_argument("--only", nargs="*", choices=SECTIONS, help="run only these sections")
    p.add_argument("--no-docs", action="store_true", help="do not rewrite docs/results.md")
    p.add_argument("--render", action="store_true",
                   help="run nothing: re-render results.md and docs/results.md from the last results.json")
    p.add_argument("--fresh", action="store_true",
                   help="with SECTION/--only: drop the previous run's other sections instead of keeping them")
    a = p.parse_args(argv)
    unknown = [s for s in a.sections if s not in SECTIONS]
    if unknown:
        p.error(f"unknown section(s) {unknown}; choose from {', '.join(SECTIONS)}")
    a.only = list(dict.fromkeys((a.only or []) + list(a.sections))) or None
    os.makedirs(OUT, exist_ok=True)
    if a.render:
        return _render_only()
    res = {"command": "python -m benchmarks" + (" --quick" if a.quick else "")
           + (" --only " + " ".join(a.only) if a.only else ""),
           "quick": a.quick, "machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
           "run_id": time.time_ns(), "sections": {}, "runtime_s": {}}
    log(f"machine: {res['machine']}")
    res["provenance"] = {}
    kept = _previous_sections(a.only) if a.only and not a.fresh else {}
    for name, (sec, prov) in kept.items():  # sections of earlier runs, each with its own provenance
        res["sections"][name], res["provenance"][name] = sec, prov
    for name in a.only or SECTIONS:
        mod = __import__(f"benchmarks.{name}", fromlist=["run"])
        t0 = time.perf_counter()
        log(f"[{name}] ...")
        try:
            res["sections"][name] = mod.run(a.quick, log=log)
        except Exception:  # noqa: BLE001 - record and carry on
            res["sections"][name] = {"error": traceback.format_exc()}
            log(res["sections"][name]["error"])
        res["runtime_s"][name] = time.perf_counter() - t0
        res["provenance"][name] = {"command": res["command"], "started": res["started"], "run_id": res["run_id"],
                                   "loadavg_at_start": res["machine"].get("loadavg_at_start"),
                                   "runtime_s": res["runtime_s"][name]}
        log(f"[{name}] {res['runtime_s'][name]:.1f} s")
        with open(os.path.join(OUT, "results.json"), "w") as f:  # incremental: partial runs leave results
            json.dump(res, f, indent=1, default=float)
    res["sections"] = {k: res["sections"][k] for k in SECTIONS if k in res["sections"]}
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(res, f, indent=1, default=float)
    _write(res, docs=not a.no_docs)
    return 0


def _write(res: dict, *, docs: bool) -> None:
    from .report import mutation_results, plots, to_markdown

    md = to_markdown(res)
    with open(os.path.join(OUT, "results.md"), "w") as f:
        f.write(md)
    plots(res, OUT)
    if docs:
        kept = [k for k, p in res.get("provenance", {}).items() if not _same_run(p, res)]
        os.makedirs(os.path.dirname(DOCS), exist_ok=True)
        from .posterior_levers import kept_block  # its own command's section survives a re-render

        tail = kept_block(DOCS)  # read before the page is rewritten
        with open(DOCS, "w") as f:
            f.write("# Benchmark results\n\n" "Latest run of `" + res["command"] + "` (regenerate with the same "
                    "command; raw numbers in `benchmarks/results/results.json`, plots next to it)"
                    + (f"; the sections {', '.join(kept)} are kept from earlier runs, named in the table below" if kept else "")
                    + ".\n\n" + md + mutation_results(os.path.dirname(DOCS)) + tail)
    log(f"wrote {OUT}/results.json, results.md and plots" + ("" if not docs else f"; {DOCS}"))


def _same_run(prov: dict, res: dict) -> bool:
    """Whether a section's provenance is the run ``res`` (by run id: two runs can start in the same second)."""
    if "run_id" in prov and "run_id" in res:
        return prov["run_id"] == res["run_id"]
    return prov["started"] == res["started"]  # results.json written before run ids


def _render_only() -> int:
    path = os.path.join(OUT, "results.json")
    if not os.path.exists(path):
        print(f"python -m benchmarks: --render needs {path} from an earlier run", file=sys.stderr)
        return 2
    with open(path) as f:
        _write(json.load(f), docs=True)
    return 0


def _previous_sections(running: list[str]) -> dict:
    """Sections of the previous results.json that this run does not redo, with their provenance."""
    path = os.path.join(OUT, "results.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        prev = json.load(f)
    out = {}
    for name, sec in prev.get("sections", {}).items():
        if name in running or name not in SECTIONS:
            continue
        prov = prev.get("provenance", {}).get(name) or {
            "command": prev["command"], "started": prev["started"], "run_id": prev.get("run_id"),
            "loadavg_at_start": prev["machine"].get("loadavg_at_start"), "runtime_s": prev["runtime_s"].get(name)}
        out[name] = (sec, prov)
    return out


if __name__ == "__main__":
    sys.exit(main())
