"""MkDocs hook: the notebooks in ``notebooks/`` rendered as pages of the site, with their outputs.

The notebooks are committed WITHOUT outputs. Outputs come from one of two places, never from git:

* the test run: ``tests/test_notebooks.py`` writes each executed notebook, with its wall time,
  to ``build/notebooks/`` (git-ignored), keyed by the hash of the committed source;
* the docs build itself, with ``DP_INFER_DOCS_EXECUTE=1`` (``./dev docs`` sets it): any notebook
  without a fresh executed copy is executed here with nbclient and cached the same way.

Otherwise a page shows the code and says how to get the outputs. Each page states the run time
that was measured when it was executed (so the stated time is the true one). Markdown cells are
copied, code cells become ``python`` blocks, text outputs ``text`` blocks, PNG outputs inline
images; nothing else (HTML widgets) is rendered.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
CACHE_DIR = ROOT / "build" / "notebooks"
PAGE_DIR = "notebooks"  # site path of the rendered pages: notebooks/<stem>.md


def source_hash(path: Path) -> str:
    """Hash of a notebook's committed source (cells' sources only: metadata edits do not count)."""
    nb = json.loads(path.read_text())
    src = json.dumps([(c.get("cell_type"), "".join(c.get("source", ""))) for c in nb.get("cells", [])])
    return hashlib.sha256(src.encode()).hexdigest()[:16]


def cache_path(path: Path) -> Path:
    return CACHE_DIR / f"{path.stem}.{source_hash(path)}.ipynb"


def store_executed(path: Path, nb, seconds: float) -> Path:
    """Write an executed notebook (an ``nbformat`` node) and its wall time to the cache."""
    import nbformat

    nb.metadata["dp_infer_executed"] = {"seconds": round(float(seconds), 1),
                                        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                        "cpus": os.cpu_count()}
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    out = cache_path(path)
    nbformat.write(nb, out)
    return out


def execute(path: Path, timeout: int = 600):
    """Execute a notebook with this interpreter's kernel (``python3`` kernelspec of the env)."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # the kernel's figures must become outputs: the inline backend, whatever the build process uses
    old_backend = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    (ROOT / "build").mkdir(exist_ok=True)  # the notebooks' working directory (files they write land there)
    t0 = time.perf_counter()
    try:
        nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(ROOT / "build")}}).execute()
    finally:
        if old_backend is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = old_backend
    return nb, time.perf_counter() - t0


def _fence(text: str, lang: str) -> str:
    ticks = "````" if "```" in text else "```"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}\n"


def render(path: Path) -> str:
    """The notebook as a Markdown page (with outputs if an executed copy is cached)."""
    cached = cache_path(path)
    nb = json.loads((cached if cached.exists() else path).read_text())
    meta = nb.get("metadata", {}).get("dp_infer_executed")
    parts = []
    titled = False
    if meta:
        note = (f"!!! note \"Executed\"\n    Run in {meta['seconds']:.0f} s ({meta['cpus']} CPUs, {meta['when']}) "
                f"by the test run or the docs build; the notebook itself is `notebooks/{path.name}`.\n")
    else:
        note = (f"!!! note \"Not executed in this build\"\n    The outputs appear when the site is built with "
                     f"`./dev docs` (or after `./dev test`); the notebook is `notebooks/{path.name}`.\n")
    for cell in nb.get("cells", []):
        src = "".join(cell.get("source", ""))
        if cell.get("cell_type") == "markdown":
            if not titled and src.strip() and not src.lstrip().startswith("#"):
                src = "# " + src.lstrip()  # the notebook's first line is the page title
            parts.append(src + "\n")
            if not titled:
                parts.append(note)  # right under the title
            titled = True
            continue
        if cell.get("cell_type") != "code" or not src.strip():
            continue
        parts.append(_fence(src, "python"))
        for o in cell.get("outputs", []):
            kind = o.get("output_type")
            if kind == "stream":
                parts.append(_fence("".join(o.get("text", "")), "text"))
            elif kind in ("execute_result", "display_data"):
                data = o.get("data", {})
                if "image/png" in data:
                    png = data["image/png"]
                    png = png if isinstance(png, str) else "".join(png)
                    parts.append(f'<img alt="output" src="data:image/png;base64,{png.strip()}"/>\n')
                elif "text/plain" in data:
                    txt = data["text/plain"]
                    parts.append(_fence(txt if isinstance(txt, str) else "".join(txt), "text"))
            elif kind == "error":
                parts.append(_fence(f"{o.get('ename')}: {o.get('evalue')}", "text"))
    if not titled:
        parts.insert(0, note)
    return "\n".join(parts)


def on_files(files, config):  # noqa: D103 - MkDocs hook
    from mkdocs.structure.files import File

    execute_now = os.environ.get("DP_INFER_DOCS_EXECUTE") == "1"
    for path in sorted(NOTEBOOK_DIR.glob("*.ipynb")):
        if execute_now and not cache_path(path).exists():
            print(f"docs: executing {path.name} ...", file=sys.stderr, flush=True)
            nb, secs = execute(path)
            store_executed(path, nb, secs)
        files.append(File.generated(config, f"{PAGE_DIR}/{path.stem}.md", content=render(path)))
    return files


__all__ = ["render", "execute", "store_executed", "cache_path", "source_hash", "on_files"]
