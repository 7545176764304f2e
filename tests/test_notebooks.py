"""Execute every notebook in notebooks/ with the project's own interpreter; check none has outputs.

The kernel is a throw-away kernelspec written to a temporary JUPYTER_PATH whose argv starts
with ``sys.executable``: the notebooks run in the same environment as the tests (the venv made
by ``./dev test``), never in whatever ``python3`` kernel happens to be installed elsewhere.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL_NAME = "dp-infer-test-python"
CELL_TIMEOUT = 300  # seconds per cell
INLINE = "module://matplotlib_inline.backend_inline"


def test_notebooks_exist():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_committed_without_outputs(path):
    raw = json.loads(path.read_text())
    # every cell carries its id (nbformat 4.5: a missing id is a warning now and an error later)
    assert all("id" in c for c in raw["cells"]), f"{path.name}: cells without an id: " + \
        str([i for i, c in enumerate(raw["cells"]) if "id" not in c])
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert cell.get("outputs", []) == [], f"{path.name}: cell {i} has outputs; clear them before committing"
        assert cell.get("execution_count") is None, f"{path.name}: cell {i} has an execution count"


@pytest.fixture(scope="module")
def venv_kernel(tmp_path_factory):
    """A kernelspec that launches ipykernel with this very interpreter."""
    jdir = tmp_path_factory.mktemp("jupyter")
    kdir = jdir / "kernels" / KERNEL_NAME
    kdir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"dp_infer tests ({sys.executable})",
        "language": "python",
    }
    (kdir / "kernel.json").write_text(json.dumps(spec))
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(jdir) + (os.pathsep + old if old else "")
    # the kernel inherits the environment: keep JAX on the CPU and matplotlib headless
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        yield KERNEL_NAME
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, venv_kernel, tmp_path):
    nb = nbformat.read(path, as_version=4)
    # first cell: prove the kernel is this interpreter (not a stray system python3)
    probe = nbformat.v4.new_code_cell("import sys; print(sys.executable)")
    nb.cells.insert(0, probe)
    client = nbclient.NotebookClient(
        nb,
        kernel_name=venv_kernel,
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(tmp_path)}},  # run in a scratch dir: files land there
    )
    old_backend = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = INLINE  # the kernel's figures become outputs the docs page shows
    t0 = time.perf_counter()
    try:
        client.execute()
    finally:
        os.environ["MPLBACKEND"] = old_backend if old_backend is not None else "Agg"
    seconds = time.perf_counter() - t0
    printed = "".join(o.get("text", "") for o in nb.cells[0].outputs if o.get("output_type") == "stream").strip()
    assert Path(printed).resolve() == Path(sys.executable).resolve(), (
        f"notebook kernel ran {printed!r}, not the test interpreter {sys.executable!r}"
    )
    # the executed copy (outputs + measured wall time) is what the docs site renders; it goes to
    # build/notebooks/ (git-ignored), never into the committed notebook
    nb.cells.pop(0)
    _hooks().store_executed(path, nb, seconds)


def _hooks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("dp_infer_docs_hooks", ROOT / "docs_hooks" / "notebooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_page_of_an_executed_notebook_shows_its_outputs_and_time(tmp_path, monkeypatch):
    """The docs hook renders a cached execution: text and PNG outputs, and the measured run time."""
    hooks = _hooks()
    src = tmp_path / "99_demo.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("A demo title\n\nSome words."),
                                         nbformat.v4.new_code_cell("print('hi')")])
    nbformat.write(nb, src)
    monkeypatch.setattr(hooks, "CACHE_DIR", tmp_path / "cache")
    page = hooks.render(src)
    assert page.startswith("# A demo title") and "Not executed in this build" in page
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi\n"),
                           nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="})]
    hooks.store_executed(src, nb, 12.34)
    page = hooks.render(src)
    assert "Run in 12 s" in page and "```text\nhi\n```" in page and "data:image/png;base64,iVBORw0KGgo=" in page
    # a changed source is not rendered with the old outputs
    nb2 = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("A demo title"),
                                          nbformat.v4.new_code_cell("print('changed')")])
    nbformat.write(nb2, src)
    assert "Not executed in this build" in hooks.render(src)
