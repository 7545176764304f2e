"""benchmarks.device cannot rot: its smallest configuration runs end to end (seconds) and writes its table."""

from __future__ import annotations

import json

from benchmarks import device


def test_smoke_run_writes_markdown_and_json(tmp_path, capsys):
    md, js = tmp_path / "device.md", tmp_path / "device.json"
    assert device.main(["--smoke", "--md", str(md), "--json", str(js)]) == 0
    res = json.loads(js.read_text())
    assert res["bandwidth"]["read_GBps"] > 0 and res["bandwidth"]["copy_GBps"] > 0
    rows = res["rows"]
    paths = {(r["dtype"], r["path"]) for r in rows}
    assert paths == {("float32", "blocked"), ("bfloat16", "blocked"), ("float32", "autodiff full batch")}
    assert sum(r["default"] for r in rows) == 2  # the default block marked once per dtype
    m = rows[0]["rows_per_shard"]  # 4000 rows over the tests' devices
    assert {r["block_rows"] for r in rows if r["path"] == "blocked"} == {512, m}
    assert all(r["step_s"] > 0 for r in rows)
    text = md.read_text()
    assert text.startswith("`python -m benchmarks.device --smoke") and "| n | X dtype | path |" in text
    assert text.count("\n| 4e+03 |") == len(rows)
    assert "**default**" in capsys.readouterr().out
