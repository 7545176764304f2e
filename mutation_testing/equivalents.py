"""The accepted mutants of ``equivalent.toml``: their classes, the hash that ties each to its
function's code (so an entry expires when the function changes), matching, checking and stamping."""

from __future__ import annotations

import ast
import hashlib
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

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


class CurrentShas:
    """Current ``function_sha`` of (module, function), read from the work tree once per module."""

    def __init__(self, root: Path = ROOT):
        self.root, self._src = root, {}

    def __call__(self, module: str, function: str) -> str | None:
        if module not in self._src:
            p = self.root / module
            self._src[module] = ast.parse(p.read_text()) if p.exists() else None
        tree = self._src[module]
        return None if tree is None else function_sha(tree, function)


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
