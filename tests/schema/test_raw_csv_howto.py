"""docs/how-to/raw-csv.md runs as written: its bash block's commands (draft -> check -> sample ->
report) are executed one by one on the shipped table, in a temporary directory, and each must
succeed; the prior precision the page passes is the one the draft suggests; the shipped table is
the one its committed script writes."""

import gzip
import shlex
import time
from importlib.resources import files
from pathlib import Path

import pytest
from click.testing import CliRunner

from dp_infer.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "raw-csv.md"
DATA = files("dp_infer.data") / "examples" / "marketing.csv.gz"


def _commands() -> list[list[str]]:
    block = PAGE.read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    cmds = []
    for line in block.splitlines():
        if line.startswith("./dev dp-infer "):
            args = shlex.split(line.removeprefix("./dev dp-infer ").replace('"$DATA"', str(DATA)))
            cmds.append(args)
    return cmds


def test_the_shipped_table_is_what_its_script_writes(tmp_path):
    from dp_infer.data.examples import make_marketing

    out = make_marketing.write(tmp_path / "m.csv")
    assert gzip.decompress(Path(str(DATA)).read_bytes()).decode() == out.read_text()
    head = out.read_text().splitlines()[0]
    assert head.count(";") == 7 and "," not in head


@pytest.mark.slow
def test_the_raw_csv_howto_runs_as_written(tmp_path, monkeypatch):
    cmds = _commands()
    assert [c[:2] for c in cmds] == [["schema", "draft"], ["schema", "check"], ["sample", str(DATA)], ["report", "run.zip"]]
    assert "posterior" in cmds[2][cmds[2].index("--mode") + 1]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    timings, outputs = [], []
    for args in cmds:
        t0 = time.perf_counter()
        res = CliRunner().invoke(main, args)
        timings.append(time.perf_counter() - t0)
        assert res.exit_code == 0, (args, res.output, res.exception)
        outputs.append(res.output)
    print("how-to wall seconds per command:", [round(t, 1) for t in timings])
    draft, check, sample, report = outputs
    assert "delimiter ';' recorded under read:" in draft
    schema = (tmp_path / "marketing.yaml").read_text()
    assert "transform: log1p" in schema and "# skewed (skewness" in schema and "unknown: other" not in schema
    suggested = draft.split("suggested --prior-precision ")[1].split()[0]
    assert cmds[2][cmds[2].index("--prior-precision") + 1] == suggested  # the page uses the printed suggestion
    assert "2000 rows read" in check
    assert (tmp_path / "run.zip").exists() and "Privacy report" in report
