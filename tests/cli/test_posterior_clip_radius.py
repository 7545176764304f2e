"""Issue 27, lever 1 on the command line: ``dp-infer sample --mode posterior --clip-radius auto|R``.

* a bad value is refused before anything is charged, in one line naming ``--clip-radius`` and the
  allowed range (the ledger is unchanged);
* the option runs the same plan as the Python option it maps to (``fit_posterior(clip_radius=...)``
  with the same seed: same beta, same sensitivity, same draws), the oracle being the Python API;
* without the option nothing is clipped (the default is unchanged), and the help says it is opt-in.
"""

import math
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import dp_infer
from dp_infer import cli
from dp_infer.cli import main
from dp_infer.privacy.ledger import Ledger


def _csv(tmp_path, n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) / 2
    y = (X @ np.array([1.5, -1.0, 0.5]) + 0.3 * rng.normal(size=n) > 0).astype(int)
    path = tmp_path / "data.csv"
    rows = ["a,b,c,label"] + [",".join(f"{v:.6f}" for v in X[i]) + f",{y[i]}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n")
    return path


BASE = ["--target", "label", "--row-norm", "3", "--mode", "posterior", "--prior-precision", "1", "--ess", "40",
        "--eps", "2", "--no-progress", "--reproducible-seed", "5"]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "abc", "", "Auto"])
def test_a_bad_clip_radius_is_refused_before_the_charge(tmp_path, monkeypatch, capsys, value):
    path, ledger = _csv(tmp_path), tmp_path / "ledger.sqlite"
    Ledger(ledger).register_dataset("default", 10.0, 1e-5)
    monkeypatch.setattr(sys, "argv", ["dp-infer", "sample", str(path), *BASE, "--ledger", str(ledger),
                                      "--clip-radius", value])
    with pytest.raises(SystemExit) as exc:
        cli.run()
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert "--clip-radius" in err and "(0, inf)" in err and "auto" in err, err
    assert Ledger(ledger).spent("default")["n_runs"] == 0


def test_clip_radius_is_refused_in_estimate_mode(tmp_path):
    res = CliRunner().invoke(main, ["sample", str(_csv(tmp_path)), "--target", "label", "--clip-radius", "1"])
    assert res.exit_code != 0 and "--clip-radius applies to --mode posterior only" in str(res.exception)


def test_help_says_the_clip_is_the_default_and_how_to_turn_it_off():
    res = CliRunner().invoke(main, ["sample", "--help"])
    text = " ".join(res.output.split())
    assert "--clip-radius" in text and "the default for the logistic" in text and "'none': no clip" in text


@pytest.mark.parametrize("value", ["1.5", "auto"])
def test_the_option_runs_the_python_option_it_maps_to(tmp_path, value):
    path = _csv(tmp_path)
    out = tmp_path / "run.zip"
    res = CliRunner().invoke(main, ["sample", str(path), *BASE, "--clip-radius", value, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "per-example gradients clipped in the preconditioner's metric at radius" in res.output
    cli_run = dp_infer.PrivateRun.load(out)
    radius = 1.5 if value == "1.5" else math.sqrt(3)  # auto: DEFAULT_CLIP_FACTOR * sqrt(dim), dim = 3
    assert cli_run.plan.posterior.clip_radius == pytest.approx(radius, rel=1e-12)

    X, y, _ = dp_infer.datasets.load_csv(str(path), "label")
    X, _ = dp_infer.datasets.clip_rows(X, 3.0)
    from dp_infer.infer.posterior import fit_posterior

    py_run = fit_posterior(dp_infer.losses.logistic(row_norm=3.0), X, y, eps=2.0, delta=1e-5, prior_precision=1.0,
                           ess=40, seed=5, progress_bar=False, clip_radius=float(value) if value != "auto" else "auto")
    assert py_run.plan.beta == cli_run.plan.beta and py_run.plan.sensitivity == cli_run.plan.sensitivity
    np.testing.assert_array_equal(np.asarray(py_run.draws(), dtype=np.float32),
                                  np.asarray(cli_run.draws(), dtype=np.float32))


def test_without_the_option_the_clip_is_auto_and_none_turns_it_off(tmp_path):
    out = tmp_path / "run.zip"
    res = CliRunner().invoke(main, ["sample", str(_csv(tmp_path)), *BASE, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "per-example gradients clipped in the preconditioner's metric at radius" in res.output
    assert dp_infer.PrivateRun.load(out).plan.posterior.clip_radius == pytest.approx(math.sqrt(3), rel=1e-12)
    out_none = tmp_path / "run_none.zip"
    res = CliRunner().invoke(main, ["sample", str(_csv(tmp_path)), *BASE, "--clip-radius", "none", "--out",
                                    str(out_none)])
    assert res.exit_code == 0, res.output
    assert "per-example gradients: not clipped" in res.output
    assert dp_infer.PrivateRun.load(out_none).plan.posterior.clip_radius is None
