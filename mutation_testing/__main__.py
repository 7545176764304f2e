"""``python -m mutation_testing [module ...]`` (``./dev mutants``): mutation testing of the
privacy-critical modules with mutmut, one module at a time.

For each module listed in ``targets.toml`` (all of them, in ``order``, when none is named):

1. a scratch copy of the project is made under ``.mutation/<module>/`` (never in the work tree);
2. ``mutmut run`` mutates only that module and, for each mutant, runs only those tests of the
   module's entry that call the mutated function;
3. every mutant is classified ``killed`` / ``timeout`` / ``survived`` / ``no tests``, and a
   surviving mutant is further marked
   * ``cosmetic`` when it changes only text that no computation reads (an error message, a
     validator's parameter name, an event label, an assumption text, metadata) -- decided on the
     Python AST of the original and mutated function, see :func:`cosmetic`;
   * ``equivalent`` when it matches an entry of ``equivalent.toml`` (with its reason);
   anything else is a real survivor: a gap in the tests.

Prints a table and writes ``.mutation/results.json`` (merged across runs). Exit status 1 when
a real survivor (or an untested mutant) remains.
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCRATCH = ROOT / ".mutation"
RESULTS = SCRATCH / "results.json"

# Calls whose string arguments only feed a message (validators name the parameter in their error).
_MESSAGE_CALLS = ("check_", "_check", "resolve_log_delta", "warn", "warning", "info", "debug", "error")
# Keyword arguments / parameters that are text or metadata only (never read by a computation).
_TEXT_KEYWORDS = {"label", "assumptions", "extra_assumptions", "metadata", "name"}


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


def load_equivalents() -> list[dict]:
    with open(HERE / "equivalent.toml", "rb") as f:
        return tomllib.load(f).get("mutant", [])


# --------------------------------------------------------------------------- classification


def _function_defs(tree: ast.AST) -> dict[str, ast.AST]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _ast_diffs(a, b, path=()):
    """Pairs (ancestor path, node_a, node_b) where the two trees differ (names of defs ignored)."""
    if type(a) is not type(b):
        return [(path, a, b)]
    if isinstance(a, ast.AST):
        out = []
        for f in a._fields:
            if f == "name" and isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            out += _ast_diffs(getattr(a, f, None), getattr(b, f, None), path + ((a, f),))
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [(path, a, b)]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += _ast_diffs(x, y, path + ((a, i),))
        return out
    return [] if a == b else [(path, a, b)]


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")


def _text_context(path) -> bool:
    """True if the node at the end of ``path`` sits where only a message / label / metadata is built."""
    for i, (node, field) in enumerate(path):
        if isinstance(node, (ast.Raise, ast.JoinedStr)):
            return True
        if isinstance(node, ast.keyword) and node.arg in _TEXT_KEYWORDS:
            return True
        if isinstance(node, ast.Call) and field == "args" and _call_name(node).startswith(_MESSAGE_CALLS):
            return True
        if isinstance(node, ast.arguments) and field in ("defaults", "kw_defaults"):
            # default value of a text parameter (e.g. label="gibbs_pure_draw")
            idx = path[i + 1][1] if i + 1 < len(path) else None
            params = node.args[len(node.args) - len(node.defaults):] if field == "defaults" else node.kwonlyargs
            if isinstance(idx, int) and idx < len(params) and params[idx].arg in _TEXT_KEYWORDS:
                return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in ("meta", "extra", "metadata")
                                                for t in node.targets):
            return True
    return False


_FREE_KEYWORDS = {"label", "metadata"}  # whole value free to change: never read by a computation


def _under_free_keyword(path) -> bool:
    return any(isinstance(node, ast.keyword) and node.arg in _FREE_KEYWORDS for node, _ in path)


def _dropped_free_keywords(a, b) -> bool:
    """``b`` is the keyword list ``a`` minus some label=/metadata= arguments."""
    if not (isinstance(a, list) and isinstance(b, list) and all(isinstance(k, ast.keyword) for k in a + b)):
        return False
    kept = [ast.dump(k) for k in b]
    dropped = [k for k in a if ast.dump(k) not in kept]
    return len(a) - len(b) == len(dropped) and all(k.arg in _FREE_KEYWORDS for k in dropped)


def _is_text(x) -> bool:
    return isinstance(x, str) or (isinstance(x, ast.Constant) and isinstance(x.value, str))


def _is_text_or_none(x) -> bool:
    return _is_text(x) or x is None or (isinstance(x, ast.Constant) and x.value is None)


def cosmetic(orig_src: str, mutant_src: str) -> bool:
    """The mutant differs from the original only in text that no computation reads.

    Every difference must be either a string constant (replaced by another string or None) in a
    message context (raise, f-string, a validator's parameter name, a label / assumption text /
    metadata argument or default), or a change of a ``label=`` / ``metadata=`` argument (dropped or
    replaced). Dropping ``assumptions=`` is NOT cosmetic: an event must state its assumptions.
    """
    diffs = _ast_diffs(ast.parse(orig_src), ast.parse(mutant_src))
    if not diffs:
        return True
    for path, a, b in diffs:
        if _under_free_keyword(path) or _dropped_free_keywords(a, b):
            continue
        if _is_text(a) and _is_text_or_none(b) and _text_context(path):
            continue
        return False
    return True


def mutant_sources(mutants_file: Path) -> dict[str, str]:
    src = mutants_file.read_text()
    tree = ast.parse(src)
    return {name: ast.get_source_segment(src, node) for name, node in _function_defs(tree).items()}


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


def is_equivalent(module: str, function: str, removed: str, added: str, equivalents) -> str | None:
    for e in equivalents:
        if e["module"] == module and e["function"] == function and e["removed"] == removed and e["added"] == added:
            return e["reason"]
    return None


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
    base = (ROOT / "pyproject.toml").read_text()
    cfg = {
        "source_paths": ["dp_infer"],
        "only_mutate": [module],
        "pytest_add_cli_args_test_selection": tests,
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-x", "-q", "--all"],  # the slow tier too
        "process_isolation": "forkserver",
        "use_git_change_detection": False,
    }
    lines = ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in cfg.items()]
    (d / "pyproject.toml").write_text(base + "\n".join(lines) + "\n")
    return d


def run_module(module: str, tests: list[str], *, max_children: int, equivalents, names=()) -> dict:
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
    counts = {"mutants": 0, "killed": 0, "timeout": 0, "survived": 0, "no tests": 0, "cosmetic": 0,
              "equivalent": 0, "other": 0}
    survivors, equivalent_list = [], []
    for key, code in sorted(meta["exit_code_by_key"].items()):
        counts["mutants"] += 1
        if names and not any(key == n or fnmatch.fnmatch(key, n) for n in names):
            continue  # not re-run this time (--previous-survivors / --only)
        status = status_by_exit_code.get(code, "other")
        if status == "killed":
            counts["killed"] += 1
            continue
        if status == "timeout":
            counts["timeout"] += 1
            continue
        fn = _function_of(key)
        name = key.rsplit(".", 1)[1]
        orig, mut = srcs.get(fn + "__mutmut_orig"), srcs.get(name)
        if orig is None or mut is None:
            counts["other"] += 1
            survivors.append({"mutant": key, "status": status, "function": _pretty_function(fn),
                              "removed": "?", "added": "?"})
            continue
        if status in ("survived", "no tests") and cosmetic(orig, mut):
            counts["cosmetic"] += 1
            continue
        rem, add = diff_lines(orig, mut)
        reason = is_equivalent(module, _pretty_function(fn), rem, add, equivalents)
        if reason is not None:
            counts["equivalent"] += 1
            equivalent_list.append({"function": _pretty_function(fn), "removed": rem, "added": add, "reason": reason})
            continue
        counts["survived" if status == "survived" else ("no tests" if status == "no tests" else "other")] += 1
        survivors.append({"mutant": key, "status": status, "function": _pretty_function(fn), "removed": rem,
                          "added": add})
    return {"module": module, "tests": tests, "counts": counts, "survivors": survivors,
            "equivalent": equivalent_list, "runtime_s": round(runtime, 1),
            "command": f"./dev mutants {module}", "date": time.strftime("%Y-%m-%d")}


def print_table(results: list[dict]) -> None:
    hdr = ("module", "mutants", "killed", "timeout", "cosmetic", "equivalent", "survived", "no tests", "time")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in results:
        c = r["counts"]
        print(f"| {r['module']} | {c['mutants']} | {c['killed']} | {c['timeout']} | {c['cosmetic']} | "
              f"{c['equivalent']} | {c['survived']} | {c['no tests']} | {r['runtime_s']:.0f} s |")


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
    a = p.parse_args(argv)
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
    SCRATCH.mkdir(exist_ok=True)
    results, bad = [], False
    for m in modules:
        tests = [t for t in tests_for(m, targets) if (ROOT / t).exists()]
        print(f"[{m}] mutating; tests: {' '.join(tests)}", flush=True)
        names = tuple(a.only)
        if a.previous_survivors and RESULTS.exists():
            prev = json.loads(RESULTS.read_text()).get(m, {})
            names += tuple(x["mutant"] for x in prev.get("survivors", []))
        r = run_module(m, tests, max_children=a.max_children, equivalents=equivalents, names=names)
        results.append(r)
        merged = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}  # other runs may have written
        merged[m] = r
        RESULTS.write_text(json.dumps(merged, indent=1))
        for s in r["survivors"]:
            bad = True
            print(f"  {s['status'].upper()}: {s['function']}: - {s['removed']}\n{'':10}+ {s['added']}", flush=True)
        c = r["counts"]
        print(f"  {c['mutants']} mutants: {c['killed']} killed, {c['timeout']} timed out, {c['cosmetic']} cosmetic, "
              f"{c['equivalent']} equivalent, {c['survived']} survived, {c['no tests']} untested "
              f"({r['runtime_s']:.0f} s)", flush=True)
    print()
    print_table(results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
