"""``python -m mutation_testing [module ...]`` (``./dev mutants``): mutation testing of the
privacy-critical modules with mutmut, one module at a time.

For each module listed in ``targets.toml`` (all of them, in ``order``, when none is named):

1. a scratch copy of the project is made under ``.mutation/<module>/`` (never in the work tree);
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
import hashlib
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
# Keyword arguments / parameters that are text only (never read by a computation). NOT metadata:
# an event's metadata is read back (privacy_cost_of_chains recomputes mu and eps from it; issue 30).
_TEXT_KEYWORDS = {"label", "assumptions", "extra_assumptions", "name"}


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


EQUIVALENTS = HERE / "equivalent.toml"

# The classes of an accepted (surviving, not cosmetic) mutant, each reported separately.
CLASSES = {
    "equivalent": "no input at all can tell it from the original",
    "unreachable": "differs only on inputs that cannot reach the function; `guard` names the "
                   "validator / caller check / test that shows it",
    "safe-side": "changes observable output, but only in the privacy-safe direction (more eps or "
                 "delta reported, more refused, more noise); the reason says which and why",
}


def load_equivalents(path: Path | None = None) -> list[dict]:
    with open(path or EQUIVALENTS, "rb") as f:
        return tomllib.load(f).get("mutant", [])


def function_node(source: str | ast.Module, function: str) -> ast.AST | None:
    """The def of ``function`` (``name`` at module level or ``Class.method``) in ``source`` (text or
    its parsed module)."""
    body = (source if isinstance(source, ast.Module) else ast.parse(source)).body
    *classes, name = function.split(".")
    for cls in classes:
        body = next((n.body for n in body if isinstance(n, ast.ClassDef) and n.name == cls), None)
        if body is None:
            return None
    return next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
                None)


def function_sha(source: str | ast.Module, function: str) -> str | None:
    """First 16 hex digits of sha256 of ``ast.unparse`` of the function's def (decorators
    included): comments and formatting do not change it, any change of code does. None if the
    function does not exist in ``source``."""
    node = function_node(source, function)
    if node is None:
        return None
    return hashlib.sha256(ast.unparse(node).encode()).hexdigest()[:16]


class _Shas:
    """Current ``function_sha`` of (module, function), read from the work tree once per module."""

    def __init__(self, root: Path = ROOT):
        self.root, self._src = root, {}

    def __call__(self, module: str, function: str) -> str | None:
        if module not in self._src:
            p = self.root / module
            self._src[module] = ast.parse(p.read_text()) if p.exists() else None
        tree = self._src[module]
        return None if tree is None else function_sha(tree, function)


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
    return False


_FREE_KEYWORDS = {"label"}  # whole value free to change: a label is text nothing reads back


def _under_free_keyword(path) -> bool:
    return any(isinstance(node, ast.keyword) and node.arg in _FREE_KEYWORDS for node, _ in path)


def _dropped_free_keywords(a, b) -> bool:
    """``b`` is the keyword list ``a`` minus some label= arguments."""
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
    message context (raise, f-string, a validator's parameter name, a label / assumption text
    argument or default), or a change of a ``label=`` argument (dropped or replaced). Dropping
    ``assumptions=`` is NOT cosmetic (an event must state its assumptions), and nothing under
    ``metadata=`` is: computations read it back (``privacy_cost_of_chains``).
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


def match_entry(module: str, function: str, removed: str, added: str, equivalents,
                current_sha: str | None) -> tuple[str, dict] | None:
    """The entry of ``equivalents`` for this mutant and its class, ``("stale", entry)`` when an
    entry has the same text but was reviewed on other code of the function (its ``function_sha``
    is not ``current_sha``, or it has none), else None. A stale entry does not accept the mutant."""
    stale = None
    for e in equivalents:
        if e["module"] == module and e["function"] == function and e["removed"] == removed and e["added"] == added:
            if current_sha is not None and e.get("function_sha") == current_sha and e.get("class") in CLASSES:
                return e["class"], e
            stale = stale or e
    return ("stale", stale) if stale is not None else None


def check_equivalents(equivalents, shas) -> list[str]:
    """Problems of ``equivalent.toml`` against the current source, one line each (empty: all
    good). ``shas(module, function)`` gives the function's current hash, None if it is gone."""
    problems, seen = [], set()
    for i, e in enumerate(equivalents, 1):
        where = f"entry {i} ({e.get('module')}: {e.get('function')}: {e.get('added', '')!s:.60})"
        missing = [k for k in ("module", "function", "removed", "added", "reason") if k not in e]
        if missing:
            problems.append(f"{where}: missing {', '.join(missing)}")
            continue
        key = (e["module"], e["function"], e["removed"], e["added"])
        if key in seen:
            problems.append(f"{where}: listed twice")
        seen.add(key)
        if e.get("class") not in CLASSES:
            problems.append(f"{where}: class must be one of {', '.join(CLASSES)}, got {e.get('class')!r}")
        if e.get("class") == "unreachable" and not str(e.get("guard", "")).strip():
            problems.append(f"{where}: an unreachable entry must name its guard (guard = \"...\")")
        sha = shas(e["module"], e["function"])
        if sha is None:
            problems.append(f"{where}: function {e['function']!r} no longer exists in {e['module']}")
        elif "function_sha" not in e:
            problems.append(f"{where}: no function_sha (python -m mutation_testing --stamp, after review)")
        elif e["function_sha"] != sha:
            problems.append(f"{where}: stale: {e['function']} changed since the entry was reviewed "
                            f"(function_sha {e['function_sha']}, now {sha}); re-review the entry, then "
                            f"replace its function_sha")
    return problems


def stamp(path: Path, shas) -> int:
    """Add ``function_sha`` to every entry of ``path`` that has none (right after its ``function``
    line); never touches an entry that has one. Returns the number stamped."""
    text = path.read_text()
    parts = text.split("[[mutant]]")
    n = 0
    for j in range(1, len(parts)):
        block = parts[j]
        entry = tomllib.loads(block)
        if "function_sha" in entry or "module" not in entry or "function" not in entry:
            continue
        sha = shas(entry["module"], entry["function"])
        if sha is None:
            continue  # the function is gone: --check-equivalents reports it
        lines = block.split("\n")
        k = next(i for i, line in enumerate(lines) if line.startswith("function ="))
        lines.insert(k + 1, f'function_sha = "{sha}"')
        parts[j] = "\n".join(lines)
        n += 1
    path.write_text("[[mutant]]".join(parts))
    return n


def class_counts(equivalents) -> dict[str, dict[str, int]]:
    """Per module: how many entries of each class."""
    out: dict[str, dict[str, int]] = {}
    for e in equivalents:
        row = out.setdefault(e["module"], {c: 0 for c in CLASSES})
        row[e.get("class", "?")] = row.get(e.get("class", "?"), 0) + 1
    return dict(sorted(out.items()))


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
    counts, survivors, accepted = classify(module, statuses, srcs, equivalents, shas or _Shas(), names)
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
        n = stamp(EQUIVALENTS, _Shas())
        print(f"stamped {n} entries of {EQUIVALENTS.relative_to(ROOT)}")
        if not a.check_equivalents:
            return 0
    if a.check_equivalents:
        equivalents = load_equivalents()
        problems = check_equivalents(equivalents, _Shas())
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
    shas = _Shas()
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
