"""Every ```` ```python ```` block in docs/ runs (issue 41): a page's blocks run in order, in one namespace,
in a fresh interpreter whose working directory is a temporary folder (so ``run.save("run.zip")`` and
``ledger="budget.sqlite"`` write there, never into the repository).

A block that reads the reader's own data (``X``, ``y``, ``"train.csv"``, a ``run``) gets it from a hidden
setup, an HTML comment placed just before the block, which the site does not show::

    <!-- snippet-setup
    X, y = ...
    -->

A block that cannot run in one process says so, with its reason, in ``<!-- snippet-skip: reason -->``
just before it; :data:`SKIPPED` lists every such block, so a skip cannot be added silently.

Tracebacks name the page and the line of the Markdown file (the block's code is compiled with the
page's path and padded to its line).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
DIRECTIVE = re.compile(r"<!--\s*(snippet-setup|snippet-skip:)(.*)-->\Z", re.S)

#: the blocks that are not run ("page:line" of the fence -> the reason the page gives)
SKIPPED = {
    "docs/scaling-out.md": ["two processes"],
}


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def page_blocks(page: Path) -> list[dict]:
    return blocks_of(page.read_text(), page.relative_to(ROOT).as_posix())


def blocks_of(text: str, rel: str) -> list[dict]:
    """The python blocks of a page's ``text`` in order: ``{"label", "line", "code", "setup", "skip", ...}``
    (setup and skip from the directive just before the fence, if any; lines 1-based in the page)."""
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip()
        setup, skip, setup_line = "", None, 0
        start = before.rfind("<!--") if before.endswith("-->") else -1
        d = DIRECTIVE.match(before, start) if start >= 0 else None
        if d is not None:
            if d.group(1) == "snippet-setup":
                setup = d.group(2).strip("\n")
                setup_line = _line(text, d.start(2)) + 1
            else:
                skip = d.group(2).strip()
        line = _line(text, m.start()) + 1  # the first line of code
        out.append({"label": f"{rel}:{line - 1}", "line": line, "code": m.group(1), "setup": setup,
                    "setup_line": setup_line, "skip": skip, "file": rel})
    return out


def pages_with_blocks() -> list[Path]:
    return [p for p in sorted(DOCS.rglob("*.md")) if page_blocks(p)]


RUNNER = r"""
import json, sys, traceback
blocks = json.load(open(sys.argv[1]))
ns = {"__name__": "__main__"}
for b in blocks:
    for part, line in (("setup", b["setup_line"]), ("code", b["line"])):
        src = b[part]
        if not src.strip():
            continue
        where = b["file"] + (" (setup)" if part == "setup" else "")
        try:
            exec(compile("\n" * (line - 1) + src, where, "exec"), ns)
        except BaseException:
            traceback.print_exc()
            print("SNIPPET FAILED: " + b["label"] + (" (its setup)" if part == "setup" else ""))
            sys.exit(1)
    print("ran " + b["label"], flush=True)
"""


def test_every_skip_is_listed_with_its_reason():
    found = {}
    for page in pages_with_blocks():
        for b in page_blocks(page):
            if b["skip"] is not None:
                assert b["skip"], f"{b['label']}: snippet-skip without a reason"
                found.setdefault(b["file"], []).append(b["skip"])
    assert set(found) == set(SKIPPED), found
    for f, reasons in SKIPPED.items():
        assert len(found[f]) == len(reasons) and all(r in g for r, g in zip(reasons, found[f])), found[f]


def test_the_parser_reads_setups_skips_and_lines():
    text = ("# t\n\n<!-- snippet-setup\nx = 1\n-->\n```python\ny = x + 1\n```\n\ntext\n\n"
            "<!-- snippet-skip: needs two hosts -->\n```python\nraise SystemExit\n```\n\n```python\nz = 3\n```\n")
    a, b, c = blocks_of(text, "probe.md")
    assert a["setup"] == "x = 1" and a["code"] == "y = x + 1\n" and a["skip"] is None
    assert text.splitlines()[a["line"] - 1] == "y = x + 1" and text.splitlines()[a["setup_line"] - 1] == "x = 1"
    assert b["skip"] == "needs two hosts" and b["setup"] == ""
    assert c["skip"] is None and c["setup"] == "" and c["code"] == "z = 3\n"


@pytest.mark.parametrize("page", pages_with_blocks(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_the_page_runs(page, tmp_path):
    blocks = [b for b in page_blocks(page) if b["skip"] is None]
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps(blocks))
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, JAX_PLATFORMS="cpu", MPLBACKEND="Agg", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(spec)], cwd=work, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"{page.relative_to(ROOT)}:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    assert proc.stdout.count("ran docs/") == len(blocks)
