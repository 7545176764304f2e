"""The benchmark runner keeps the sections of an earlier run, each labelled with the run that made it.

A reader of docs/results.md must be able to tell, for every figure, which single run produced it:
a partial run (``python -m benchmarks quality``) must neither silently drop the other sections
nor present them as its own.
"""

from __future__ import annotations

import json

import benchmarks.__main__ as runner
from benchmarks.report import to_markdown


def _fake_module(name, value):
    class M:
        @staticmethod
        def run(quick, log=print):
            return {"value": value}

    return M


def _run(monkeypatch, tmp_path, argv, values):
    monkeypatch.setattr(runner, "OUT", str(tmp_path / "results"))
    monkeypatch.setattr(runner, "DOCS", str(tmp_path / "docs" / "results.md"))
    real_import = __import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("benchmarks.") and name.split(".")[1] in values:
            return _fake_module(name, values[name.split(".")[1]])
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr("builtins.__import__", fake_import)
    monkeypatch.setattr("benchmarks.report.plots", lambda res, out: None)
    assert runner.main(argv) == 0
    monkeypatch.setattr("builtins.__import__", real_import)
    with open(tmp_path / "results" / "results.json") as f:
        return json.load(f)


def test_a_partial_run_keeps_earlier_sections_with_their_own_provenance(monkeypatch, tmp_path):
    first = _run(monkeypatch, tmp_path, ["--quick", "hardware", "model"], {"hardware": 1, "model": 2})
    assert first["sections"] == {"hardware": {"value": 1}, "model": {"value": 2}}
    second = _run(monkeypatch, tmp_path, ["model"], {"model": 3})
    assert second["sections"] == {"hardware": {"value": 1}, "model": {"value": 3}}
    assert second["provenance"]["hardware"]["command"] == "python -m benchmarks --quick --only hardware model"
    assert second["provenance"]["model"]["command"] == "python -m benchmarks --only model"
    docs = (tmp_path / "docs" / "results.md").read_text()
    assert "the sections hardware are kept from earlier runs" in docs
    assert "| hardware | `python -m benchmarks --quick --only hardware model` |" in docs
    assert "| model | `python -m benchmarks --only model` |" in docs


def test_fresh_drops_earlier_sections_and_one_run_has_no_provenance_table(monkeypatch, tmp_path):
    _run(monkeypatch, tmp_path, ["--quick", "hardware"], {"hardware": 1})
    res = _run(monkeypatch, tmp_path, ["--fresh", "model"], {"model": 3})
    assert list(res["sections"]) == ["model"]
    assert "Sections come from more than one run" not in to_markdown(res)
    docs = (tmp_path / "docs" / "results.md").read_text()
    assert "kept from earlier runs" not in docs


def test_render_rewrites_the_docs_from_the_last_run_with_the_mutation_table(monkeypatch, tmp_path):
    _run(monkeypatch, tmp_path, ["--quick", "hardware"], {"hardware": 1})
    (tmp_path / "docs" / "mutation-testing.md").write_text(
        "# M\n\n## Results\n\nMeasured by X.\n\n| module | killed |\n|---|---|\n| a.py | 3 |\n\nWhat is left: b.py\n")
    assert runner.main(["--render"]) == 0
    docs = (tmp_path / "docs" / "results.md").read_text()
    assert "Latest run of `python -m benchmarks --quick --only hardware`" in docs
    assert "Measured by X." in docs and "| a.py | 3 |" in docs
    assert "What is left" not in docs


def test_render_without_a_previous_run_says_what_is_missing(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(runner, "OUT", str(tmp_path / "results"))
    assert runner.main(["--render"]) == 2
    assert "--render needs" in capsys.readouterr().err


def test_a_rerender_keeps_the_sections_their_own_commands_wrote(tmp_path):
    # the levers block and every section appended after it (device, intervals, noise) survive
    # python -m benchmarks rewriting docs/results.md; the generated part before them is replaced
    from benchmarks.posterior_levers import BEGIN, END, kept_block

    page = tmp_path / "results.md"
    page.write_text(f"# Benchmark results\n\n## generated\nold\n\n{BEGIN}\n## levers\nx\n{END}\n\n"
                    "## Device benchmark\ny\n\n## Intervals for theta\nz\n")
    kept = kept_block(str(page))
    assert kept.startswith(f"\n{BEGIN}") and "## Device benchmark" in kept and kept.rstrip().endswith("z")
    assert "## generated" not in kept
    page.write_text("# no levers here\n## Intervals\nz\n")
    assert kept_block(str(page)) == ""
