"""The command line: demo output, CSV sampling to a run file, report, and clear input errors."""

import numpy as np
import pytest
from click.testing import CliRunner

from dp_infer.cli import main
from dp_infer.privacy.ledger import Ledger


def Ledger_labels(path) -> str:
    return " ".join(r["run"] for r in Ledger(path).records_for_plot("default"))


def test_demo_prints_report_accuracy_and_diagnostics():
    res = CliRunner().invoke(main, ["demo", "--mode", "estimate", "--no-progress", "--horizon", "0.5"])
    assert res.exit_code == 0, res.output
    out = res.output
    for needle in ("CC BY 4.0", "Privacy report", "mu = ", "inverse temperature beta", "step size h",
                   "horizon", "chains", "assumptions", "R-hat", "ESS", "test accuracy of the released",
                   "Routes considered", "operating-system entropy"):
        assert needle in out, needle
    # nothing computed on the private rows beyond the release is printed by default
    for needle in ("non-private fit", "clipped", "dropped", "NON-PRIVATE"):
        assert needle not in out, needle
    acc = float(out.split("test accuracy of the released estimate")[1].split(":")[1].split()[0])
    assert acc > 0.8  # far above the 0.754 majority class even at a short horizon


def test_nonprivate_diagnostics_only_behind_their_flag_and_labelled():
    res = CliRunner().invoke(main, ["demo", "--mode", "estimate", "--no-progress", "--horizon", "0.2", "--nonprivate-diagnostics",
                                    "--reproducible-seed", "3"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if "clipped" in ln or "non-private fit" in ln]
    assert len(lines) == 2 and all("NON-PRIVATE" in ln for ln in lines)
    assert "reproducible by whoever holds that seed" in res.output


def test_sample_csv_writes_run_file_and_report_reads_it(tmp_path):
    rng = np.random.default_rng(0)
    n, d = 400, 3
    X = rng.normal(size=(n, d))
    y = (X @ np.array([1.5, -1.0, 0.5]) + 0.3 * rng.normal(size=n) > 0).astype(int)
    path = tmp_path / "data.csv"
    rows = ["a,b,c,label"] + [",".join(f"{v:.6f}" for v in X[i]) + f",{y[i]}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n")
    out = tmp_path / "run.zip"
    res = CliRunner().invoke(main, ["sample", str(path), "--target", "label", "--row-norm", "3",
                                    "--eps", "2", "--no-progress", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "clipped to norm 3" in res.output and "rows clipped:" not in res.output and out.exists()
    rep = CliRunner().invoke(main, ["report", str(out), "--plots", str(tmp_path / "plots")])
    assert rep.exit_code == 0, rep.output
    assert "eps" in rep.output and list((tmp_path / "plots").glob("*.png"))


def test_ledger_refuses_a_run_over_budget(tmp_path):
    led = tmp_path / "ledger.sqlite"
    args = ["demo", "--mode", "estimate", "--no-progress", "--horizon", "0.2", "--ledger", str(led), "--budget", "1.2", "1e-5"]  # 2 runs of eps 1 compose to ~1.46
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    second = CliRunner().invoke(main, args)
    assert second.exit_code != 0
    assert "budget" in str(second.exception).lower() or "budget" in second.output.lower()
    assert "seed" not in Ledger_labels(led)
    # the refused run was not recorded: the ledger still holds one run of eps 1
    rep = CliRunner().invoke(main, ["budget", str(led), "--plot", str(tmp_path / "budget.png")])
    assert rep.exit_code == 0, rep.output
    assert "over 1 run(s)" in rep.output and (tmp_path / "budget.png").stat().st_size > 0


@pytest.mark.parametrize("args,needle", [(["--eps", "-1"], "eps"), (["--delta", "2"], "delta"),
                                         (["--pure"], "bounded domain"), (["--radius", "-3", "--pure"], "radius")])
def test_bad_inputs_name_the_parameter(args, needle):
    res = CliRunner().invoke(main, ["demo", "--mode", "estimate", "--no-progress", *args])
    assert res.exit_code != 0
    assert needle in str(res.exception)
