"""benchmarks.device cannot rot: its smallest configuration runs end to end (seconds) and writes its table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import device


def test_smoke_run_writes_markdown_and_json(tmp_path, capsys):
    md, js = tmp_path / "device.md", tmp_path / "device.json"
    assert device.main(["--smoke", "--md", str(md), "--json", str(js)]) == 0
    res = json.loads(js.read_text())
    assert res["bandwidth"]["read_GBps"] > 0 and res["bandwidth"]["copy_GBps"] > 0
    rows = res["rows"]
    paths = {(r["dtype"], r["path"], r["chains"]) for r in rows}
    assert paths == {("float32", "blocked", 1), ("float32", "blocked", device.CHAINS), ("bfloat16", "blocked", 1),
                     ("bfloat16", "blocked", device.CHAINS), ("float32", "autodiff full batch", 1)}
    assert sum(r["default"] for r in rows) == 4  # the default block marked once per dtype and chain count
    m = rows[0]["rows_per_shard"]  # 4000 rows over the tests' devices
    assert {r["block_rows"] for r in rows if r["path"] == "blocked"} == {512, m}
    assert all(r["step_s"] > 0 for r in rows)
    assert "demo" not in res and "model" not in res  # optional sections, not asked
    text = md.read_text()
    assert text.startswith("`python -m benchmarks.device --smoke") and "| n | X dtype | path | chains |" in text
    assert text.count("\n| 4e+03 |") == len(rows)
    assert "**default**" in capsys.readouterr().out


def test_synthetic_rows_meet_the_declared_bound():
    X, y = device.synthetic_rows(5000, 12, seed=3)
    assert X.shape == (5000, 12) and X.dtype == np.float32 and y.shape == (5000,)
    assert np.linalg.norm(X, axis=1).max() <= 1.0 and set(np.unique(y)) == {0.0, 1.0}
    assert 0.2 < y.mean() < 0.8  # logistic labels, not constant
    again, _ = device.synthetic_rows(5000, 12, seed=3)
    assert np.array_equal(X, again)


DEMO_OUT = """time: 37 s (forecast 1 s, second-moment release + compilation + sampling 32 s, checks 2 s, plots 2 s)
  compilation: 12.5 s of the release and sampling (110 programs: 70 compiled by XLA, 40 loaded from the compilation cache, 10.9 s; tracing and lowering 1.5 s)
public test data: accuracy of the posterior mean 0.7937; posterior predictive accuracy 0.7952
"""


def test_demo_section_reads_the_demos_own_lines(monkeypatch, tmp_path):
    """The demo section parses what ``dp-infer demo`` prints (its format is pinned by the CLI's tests),
    and a failed section is reported, never taken for a measurement."""
    import subprocess

    calls = []

    def fake(cmd, **kw):
        calls.append((cmd, kw["env"]["DP_INFER_JAX_CACHE"]))
        return subprocess.CompletedProcess(cmd, 0, stdout=DEMO_OUT, stderr="")

    monkeypatch.setattr(device.subprocess, "run", fake)
    rows = device.demo_rows(log=lambda *_: None)
    assert [r["run"] for r in rows] == ["cold cache", "warm cache, same seed", "warm cache, fresh noise"]
    assert len({c for _, c in calls}) == 1  # one cache for the three
    assert calls[0][0][-2:] == ["--reproducible-seed", "1"] and "--reproducible-seed" not in calls[2][0]
    r = rows[0]
    assert (r["reported_s"], r["release_sampling_s"], r["compile_s"], r["compiled"], r["cache_hits"],
            r["accuracy"]) == (37, 32, 12.5, 70, 40, 0.7937)
    md = "\n".join(device._demo_markdown(rows))
    assert "| cold cache |" in md and "| 12.5 | 70 / 40 |" in md

    monkeypatch.setattr(device.subprocess, "run",
                        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 2, stdout="", stderr="error: boom"))
    with pytest.raises(RuntimeError, match="demo failed.*boom"):
        device.demo_rows(log=lambda *_: None)
