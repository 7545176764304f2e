"""dp_infer.routes plans from public inputs only (issue 38): no module there imports a release
primitive (dp_infer.releases: the functions that read rows), the randomness that noises a release,
or anything above it that reads data (infer, parallel, model, cli)."""

import ast
from pathlib import Path

import dp_infer

ROUTES = Path(dp_infer.__file__).parent / "routes"
FORBIDDEN = ("dp_infer.releases", "dp_infer.randomness", "dp_infer.infer", "dp_infer.parallel", "dp_infer.model",
             "dp_infer.cli")


def _imports(path: Path) -> set[str]:
    """Absolute module names a routes module imports (relative imports resolved against dp_infer.routes)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ["dp_infer", "routes"][: max(0, 2 - (node.level - 1))] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out |= {mod} | {f"{mod}.{a.name}" for a in node.names}
    return out


def test_no_routes_module_imports_a_data_reader_or_noise():
    offenders = {p.name: sorted(m for m in _imports(p) if m.startswith(FORBIDDEN)) for p in ROUTES.glob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_relative_imports(tmp_path):
    # the resolver itself: '..releases' from dp_infer/routes/x.py is dp_infer.releases, '.plan' is dp_infer.routes.plan
    tree = "from ..releases.newton import weighted_rows\nfrom .plan import SamplingPlan\nimport dp_infer.randomness\n"
    p = tmp_path / "probe.py"
    p.write_text(tree)
    got = _imports(p)
    assert "dp_infer.releases.newton" in got and "dp_infer.routes.plan" in got and "dp_infer.randomness" in got
