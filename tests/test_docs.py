"""The documentation site builds with ``mkdocs build --strict`` (every warning is an error).

The build runs on a copy of docs/ in a temporary directory, so nothing is written into the
repository. ``docs/results.md`` belongs to the benchmarks; if it is not there yet a stub stands
in for it in the copy only (the nav links to it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings")
pytest.importorskip("material")

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path):
    config = (ROOT / "mkdocs.yml").read_text()
    assert "docs_dir: docs" in config and "paths: [.]" in config
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    if not (docs / "results.md").exists():
        (docs / "results.md").write_text("# Results\n\nBenchmark results are not generated yet.\n")
    cfg = tmp_path / "mkdocs.yml"
    assert "  - docs_hooks/notebooks.py" in config
    cfg.write_text(config.replace("docs_dir: docs", f"docs_dir: {docs.as_posix()!r}")
                   .replace("paths: [.]", f"paths: [{ROOT.as_posix()!r}]")
                   .replace("  - docs_hooks/notebooks.py", f"  - {(ROOT / 'docs_hooks' / 'notebooks.py').as_posix()!r}"))
    site = tmp_path / "site"
    env = dict(os.environ, JAX_PLATFORMS="cpu", MPLBACKEND="Agg", NO_MKDOCS_2_WARNING="1")
    env.pop("DP_INFER_DOCS_EXECUTE", None)  # the test builds from cached executions only (tests/test_notebooks.py)
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(cfg), "-d", str(site)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    assert (site / "index.html").exists()
    # every notebook is a page of the site (with its outputs when an executed copy exists)
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = site / "notebooks" / nb.stem / "index.html"
        assert page.exists(), f"{nb.name} is not rendered into the site"
        assert "Executed" in page.read_text() or "Not executed in this build" in page.read_text()
    api = (site / "api" / "fit" / "index.html").read_text()
    assert "plan_trajectory" in api or "PrivateRun" in api, "API reference was not generated from docstrings"
