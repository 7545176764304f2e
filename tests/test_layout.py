"""The tree reads as the architecture: no import cycle, no overlong module, the public API and its
docs page list the same names, and the architecture page lists every module."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import dp_infer

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "dp_infer"
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _import_graph() -> dict[str, set[str]]:
    """module -> project modules it imports anywhere in its source (also inside functions)."""
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if is_pkg else name.split(".")[:-1]
                    here = here[: len(here) - (node.level - 1)]
                    base = ".".join(here + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            edges.update(t for t in targets if t in mods and t != name)
        # a package re-exporting its own children is not a cycle
        graph[name] = {m for m in edges if not m.startswith(name + ".") and name != "dp_infer"}
    return graph


def _cycles(graph):
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return comps


def test_no_import_cycles():
    assert _cycles(_import_graph()) == []


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_module_imports_alone_in_a_fresh_interpreter():
    mods = sorted(_modules())
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    # one interpreter per module would take minutes; instead import them in reverse dependency
    # order (leaves last) so a module that only works after a sibling was imported is caught
    proc = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", code, *mods[::-1]],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_module_length_is_a_guideline_reported_not_a_limit():
    """~400 lines is a prompt to ask whether a module holds two concerns (the layout check reports the
    longest), never a limit to squeeze under: this only guards against a runaway file."""
    long = {m: len(p.read_text().splitlines()) for m, p in _modules().items()}
    assert {m: n for m, n in long.items() if n > 3 * MAX_LINES} == {}


def test_public_api_and_its_docs_page_list_the_same_names():
    page = (ROOT / "docs" / "api" / "index.md").read_text()
    listed = set(re.findall(r"^\| `(\w+)` \|", page, re.M))
    assert listed == set(dp_infer.__all__)
    for name in dp_infer.__all__:
        assert hasattr(dp_infer, name), name


def test_architecture_page_lists_every_module_and_nothing_else():
    page = (ROOT / "docs" / "architecture.md").read_text()
    listed = set(re.findall(r"`(dp_infer/[\w/]+\.py)`", page))
    actual = {p.relative_to(ROOT).as_posix() for p in PKG.rglob("*.py")
              if p.name != "__init__.py" or p.parent.name in ("cli",)}
    actual -= {"dp_infer/data/__init__.py", "dp_infer/data/adult/__init__.py"}
    assert listed - actual == set(), "the page names modules that do not exist"
    assert actual - listed == set(), "modules missing from the architecture page"


def test_the_tests_mirror_the_package_and_the_slow_tier_names_real_paths():
    from tests.conftest import HERE, LONG_FIRST, SLOW, SLOW_TESTS

    for entry in SLOW:
        assert (HERE / entry).exists(), f"tests/conftest.py SLOW names a missing path: {entry}"
    for node in SLOW_TESTS + LONG_FIRST:
        path, name = node.split("::")
        assert re.search(rf"^def {re.escape(name.split('[')[0])}\(", (HERE / path).read_text(), re.M), node
    # every test folder is a package of dp_infer (or the benchmarks', the harness's, the helpers')
    folders = {p.name for p in HERE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    assert folders - packages <= {"support", "benchmarks", "mutation_testing"}, folders - packages
