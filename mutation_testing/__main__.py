"""``python -m mutation_testing [module ...]`` (``./dev mutants``): mutation testing of the
privacy-critical modules with mutmut, one module at a time.

For each module listed in ``targets.toml`` (all of them, in ``order``, when none is named):

1. a scratch copy of the project (dp_infer, tests, docs) is made under ``.mutation/<module>/`` (never in the work tree);
2. ``mutmut run`` mutates only that module and, for each mutant, runs only those tests of the
   module's entry that call the mutated function;
3. every mutant is classified ``killed`` / ``timeout`` / ``survived`` / ``no tests``, and a
   surviving mutant is further marked
   * ``cosmetic`` when it changes only text that no computation reads (an error message, a
     validator's parameter name, an event label, an assumption text; never metadata, which
     ``privacy_cost_of_chains`` reads back) -- decided on the
     Python AST of the original and mutated function, see :func:`cosmetic`;
   * ``equivalent`` / ``unreachable`` / ``safe-side`` when it matches an entry of
     ``equivalent.toml`` of that class (with its reason; see :data:`CLASSES`). An entry matches on
     module, function, the removed and added source text AND ``function_sha``, a hash of the
     original function's code (:func:`function_sha`): when the function changes, its entries
     expire, and the mutant is reported ``stale`` -- a survivor until a human re-reviews it;
   anything else is a real survivor: a gap in the tests.

Prints a table and writes ``.mutation/results.json`` (merged across runs). Exit status 1 when
a real survivor, a stale entry or an untested mutant remains.

``python -m mutation_testing --check-equivalents`` checks ``equivalent.toml`` against the current
source without running mutmut (stale, unstamped or unclassified entries, ``unreachable`` without
``guard``, functions that no longer exist); ``--stamp`` fills ``function_sha`` for entries that
have none (never overwriting one: a stale entry needs a re-review, not a new hash).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from .cosmetic import cosmetic, function_defs
from .equivalents import (
    CLASSES, EQUIVALENTS, CurrentShas, check_equivalents, class_counts, load_equivalents, match_entry, stamp,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCRATCH = ROOT / ".mutation"
RESULTS = SCRATCH / "results.json"



def load_targets() -> dict:
    with open(HERE / "targets.toml", "rb") as f:
        return tomllib.load(f)


def mirrored_tests(module: str) -> list[str]:
    """The tests of ``dp_infer/<package>/<module>.py`` in the mirrored layout: ``tests/<package>/
    test_<module>.py`` and its aspects ``test_<module>_<aspect>.py`` (not the tests of a sibling
    module whose name starts the same way, e.g. ``ledger_records.py`` for ``ledger.py``)."""
    path = Path(module)
    rel = path.relative_to("dp_infer")
    folder = ROOT / "tests" / rel.parent
    stem = rel.stem
    siblings = {p.stem for p in (ROOT / "dp_infer" / rel.parent).glob("*.py")}
    out = []
    for t in sorted(folder.glob(f"test_{stem}*.py")):
        rest = t.stem[len("test_"):]
        if rest == stem or (rest.startswith(stem + "_") and rest not in siblings):
            out.append(t.relative_to(ROOT).as_posix())
    return out


def tests_for(module: str, targets: dict) -> list[str]:
    """A module's tests: ``tests`` of its entry in targets.toml when given (the whole list), else its
    mirrored tests (:func:`mirrored_tests`) plus the entry's ``also``."""
    entry = targets.get("modules", {}).get(module, {})
    if "tests" in entry:
        return list(entry["tests"])
    out = mirrored_tests(module)
    out += [t for t in entry.get("also", []) if t not in out]
    return out


# --------------------------------------------------------------------------- classification


def mutant_sources(mutants_file: Path) -> dict[str, str]:
    src = mutants_file.read_text()
    tree = ast.parse(src)
    return {name: ast.get_source_segment(src, node) for name, node in function_defs(tree).items()}


def diff_lines(orig: str, mut: str) -> tuple[str, str]:
    import difflib

    o, m = orig.splitlines()[1:], mut.splitlines()[1:]  # skip the def line (name differs)
    rem = [line.strip() for line in difflib.ndiff(o, m) if line.startswith("- ")]
    add = [line.strip() for line in difflib.ndiff(o, m) if line.startswith("+ ")]
    if orig.splitlines()[0].split("(", 1)[1:] != mut.splitlines()[0].split("(", 1)[1:]:
        rem.insert(0, orig.splitlines()[0].split("(", 1)[1].strip())
        add.insert(0, mut.splitlines()[0].split("(", 1)[1].strip())
    return " / ".join(rem), " / ".join(add)


def _function_of(key: str) -> str:
    name = key.rsplit(".", 1)[1]
    return name.rsplit("__mutmut_", 1)[0]


def _pretty_function(fn: str) -> str:
    return fn[2:] if fn.startswith("x_") else fn[1:].replace("ǁ", ".").strip(".")


# --------------------------------------------------------------------------- running


def _scratch_for(module: str) -> Path:
    return SCRATCH / module.replace("/", "__").removesuffix(".py")


def prepare(module: str, tests: list[str], max_children: int) -> Path:
    d = _scratch_for(module)
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "dp_infer", d / "dp_infer", ignore=ignore)
    shutil.copytree(ROOT / "tests", d / "tests", ignore=ignore)
    shutil.copytree(ROOT / "docs", d / "docs", ignore=ignore)  # tests that run a how-to read it (also_copy below)
    base = (ROOT / "pyproject.toml").read_text()
    cfg = {
        "source_paths": ["dp_infer"],
        "only_mutate": [module],
        "pytest_add_cli_args_test_selection": tests,
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-x", "-q", "--all"],  # the slow tier too
        "process_isolation": "forkserver",
        "use_git_change_detection": False,
        "also_copy": ["docs"],  # tests that run a how-to read it
    }
    lines = ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in cfg.items()]
    (d / "pyproject.toml").write_text(base + "\n".join(lines) + "\n")
    return d


def classify(module: str, statuses: dict[str, str], srcs: dict[str, str], equivalents, shas,
             names=()) -> tuple[dict, list, list]:
    """Counts, survivors and accepted mutants of one module from mutmut's statuses by mutant name
    (``killed`` / ``timeout`` / ``survived`` / ``no tests`` / other) and the mutated functions'
    sources (``<fn>__mutmut_orig`` and ``<fn>__mutmut_<i>``). ``shas(module, function)`` gives the
    current function_sha an entry must carry to accept a mutant (:func:`match_entry`)."""
    counts = {"mutants": 0, "killed": 0, "timeout": 0, "cosmetic": 0, **{c: 0 for c in CLASSES},
              "survived": 0, "stale": 0, "no tests": 0, "other": 0}
    survivors, accepted = [], []
    for key, status in sorted(statuses.items()):
        counts["mutants"] += 1
        if names and not any(key == n or fnmatch.fnmatch(key, n) for n in names):
            continue  # not re-run this time (--previous-survivors / --only)
        if status in ("killed", "timeout"):
            counts[status] += 1
            continue
        fn = _function_of(key)
        name = key.rsplit(".", 1)[1]
        pretty = _pretty_function(fn)
        orig, mut = srcs.get(fn + "__mutmut_orig"), srcs.get(name)
        if orig is None or mut is None:
            counts["other"] += 1
            survivors.append({"mutant": key, "status": status, "function": pretty, "removed": "?", "added": "?"})
            continue
        if status in ("survived", "no tests") and cosmetic(orig, mut):
            counts["cosmetic"] += 1
            continue
        rem, add = diff_lines(orig, mut)
        hit = match_entry(module, pretty, rem, add, equivalents, shas(module, pretty))
        if hit is not None and hit[0] != "stale":
            counts[hit[0]] += 1
            accepted.append({"mutant": key, "function": pretty, "removed": rem, "added": add, "class": hit[0],
                             "reason": hit[1]["reason"]})
            continue
        if hit is not None:  # an entry reviewed on other code of the function: a survivor until re-reviewed
            status = "stale"
        counts[status if status in ("survived", "no tests", "stale") else "other"] += 1
        survivors.append({"mutant": key, "status": status, "function": pretty, "removed": rem, "added": add})
    return counts, survivors, accepted


def run_module(module: str, tests: list[str], *, max_children: int, equivalents, names=(), shas=None) -> dict:
    d = prepare(module, tests, max_children)
    t0 = time.perf_counter()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONDONTWRITEBYTECODE": "1"}
    exe = shutil.which("mutmut") or str(Path(sys.executable).with_name("mutmut"))
    with open(d / "mutmut.log", "w") as log:
        proc = subprocess.run([exe, "run", "--max-children", str(max_children), *names], cwd=d, env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    runtime = time.perf_counter() - t0
    meta_path = d / "mutants" / (module + ".meta")
    if not meta_path.exists():
        raise SystemExit(f"mutmut produced no results for {module} (exit {proc.returncode}); see {d / 'mutmut.log'}")
    from mutmut.stats import status_by_exit_code

    meta = json.loads(meta_path.read_text())
    srcs = mutant_sources(d / "mutants" / module)
    statuses = {key: status_by_exit_code.get(code, "other") for key, code in meta["exit_code_by_key"].items()}
    counts, survivors, accepted = classify(module, statuses, srcs, equivalents, shas or CurrentShas(), names)
    return {"module": module, "tests": tests, "counts": counts, "survivors": survivors,
            "accepted": accepted, "runtime_s": round(runtime, 1),
            "command": f"./dev mutants {module}", "date": time.strftime("%Y-%m-%d")}


REPORTED = ("killed", "timeout", "cosmetic", *CLASSES, "survived", "stale", "no tests")


def print_table(results: list[dict]) -> None:
    hdr = ("module", "mutants", *REPORTED, "time")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in results:
        c = r["counts"]
        cells = [str(c.get(k, 0)) for k in REPORTED]
        print(f"| {r['module']} | {c['mutants']} | " + " | ".join(cells) + f" | {r['runtime_s']:.0f} s |")


def print_class_table(equivalents) -> None:
    counts = class_counts(equivalents)
    print("| module | " + " | ".join(CLASSES) + " | total |")
    print("|---|" + "---|" * (len(CLASSES) + 1))
    tot = {c: 0 for c in CLASSES}
    for m, row in counts.items():
        print(f"| {m} | " + " | ".join(str(row.get(c, 0)) for c in CLASSES) + f" | {sum(row.values())} |")
        for c in CLASSES:
            tot[c] += row.get(c, 0)
    print("| **total** | " + " | ".join(f"**{tot[c]}**" for c in CLASSES) + f" | **{sum(tot.values())}** |")


def main(argv=None) -> int:
    targets = load_targets()
    p = argparse.ArgumentParser(prog="./dev mutants", description=__doc__.split("\n\n")[0])
    p.add_argument("modules", nargs="*", help="module paths (default: every module in targets.toml)")
    p.add_argument("--max-children", type=int, default=2, help="parallel mutant workers (default 2)")
    p.add_argument("--list", action="store_true", help="list the modules and their tests, run nothing")
    p.add_argument("--previous-survivors", action="store_true",
                   help="re-run only the mutants that survived (or had no test) in the last recorded run")
    p.add_argument("--only", metavar="PATTERN", action="append", default=[],
                   help="run only the mutants whose mutmut name matches this glob (repeatable), e.g. "
                        "'*_PldRoute*' after a change to one class (results then count only those)")
    p.add_argument("--check-equivalents", action="store_true",
                   help="check mutation_testing/equivalent.toml against the current source (no mutmut run): "
                        "stale or unstamped entries, a missing class, unreachable without guard, functions "
                        "that no longer exist; prints the per-module class counts; exit 1 on any problem")
    p.add_argument("--stamp", action="store_true",
                   help="fill function_sha for the entries of equivalent.toml that have none (after reviewing "
                        "them); never overwrites an existing one")
    a = p.parse_args(argv)
    if a.stamp:
        n = stamp(EQUIVALENTS, CurrentShas())
        print(f"stamped {n} entries of {EQUIVALENTS.relative_to(ROOT)}")
        if not a.check_equivalents:
            return 0
    if a.check_equivalents:
        equivalents = load_equivalents()
        problems = check_equivalents(equivalents, CurrentShas())
        print_class_table(equivalents)
        for line in problems:
            print(line)
        print(f"{len(equivalents)} entries, {len(problems)} problems")
        return 1 if problems else 0
    modules = a.modules or targets["order"]
    for m in modules:
        if m not in targets["order"] and m not in targets.get("modules", {}):
            p.error(f"module must be one of the targets in mutation_testing/targets.toml, got {m!r}")
        if not tests_for(m, targets):
            p.error(f"no tests for {m!r}: neither tests/<package>/test_<module>.py nor a list in targets.toml")
    if a.list:
        for m in modules:
            print(m, "<-", " ".join(tests_for(m, targets)))
        return 0
    equivalents = load_equivalents()
    shas = CurrentShas()
    SCRATCH.mkdir(exist_ok=True)
    results, bad = [], False
    for m in modules:
        tests = [t for t in tests_for(m, targets) if (ROOT / t).exists()]
        print(f"[{m}] mutating; tests: {' '.join(tests)}", flush=True)
        names = tuple(a.only)
        if a.previous_survivors and RESULTS.exists():
            prev = json.loads(RESULTS.read_text()).get(m, {})
            names += tuple(x["mutant"] for x in prev.get("survivors", []))
        r = run_module(m, tests, max_children=a.max_children, equivalents=equivalents, names=names, shas=shas)
        results.append(r)
        merged = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}  # other runs may have written
        merged[m] = r
        RESULTS.write_text(json.dumps(merged, indent=1))
        for s in r["survivors"]:
            bad = True
            print(f"  {s['status'].upper()}: {s['function']}: - {s['removed']}\n{'':10}+ {s['added']}", flush=True)
        c = r["counts"]
        print(f"  {c['mutants']} mutants: " + ", ".join(f"{c[k]} {k}" for k in REPORTED)
              + f" ({r['runtime_s']:.0f} s)", flush=True)
    print()
    print_table(results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
