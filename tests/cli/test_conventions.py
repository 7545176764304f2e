"""Command-line conventions: one way to name the ledger (``--ledger FILE`` everywhere, the old
positional form of ``budget`` kept as an alias), and a line on stderr when a spending command runs
without a ledger (nothing records the spend)."""

from __future__ import annotations


import numpy as np

from tests.support.cli import run_cli


def test_budget_takes_ledger_like_every_spending_command(monkeypatch, capsys, tmp_path):
    led = tmp_path / "l.sqlite"
    code, out, err = run_cli(monkeypatch, capsys, ["budget", "register", "--ledger", led, "--eps", 2, "--delta", 1e-5])
    assert code == 0 and "budget eps = 2" in out, err
    code, out, err = run_cli(monkeypatch, capsys, ["budget", "history", "--ledger", led])
    assert code == 0 and "no run charged yet" in out, err
    for args in (["budget", "--ledger", led], ["budget", "show", "--ledger", led], ["budget", led]):  # last: alias
        code, out, err = run_cli(monkeypatch, capsys, args)
        assert code == 0 and "spent eps = 0 of 2" in out, (args, err)
    code, out, err = run_cli(monkeypatch, capsys, ["budget", "register", led, "--ledger", tmp_path / "o.sqlite",
                                                   "--eps", 2, "--delta", 1e-5])
    assert code != 0 and "give the ledger once" in err
    code, out, err = run_cli(monkeypatch, capsys, ["budget", "history"])
    assert code != 0 and "--ledger FILE is required" in err


def _tiny_csv(path):
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, size=(40, 2))
    y = (X[:, 0] > 0).astype(int)
    path.write_text("a,b,y\n" + "\n".join(f"{a:.4f},{b:.4f},{t}" for (a, b), t in zip(X, y)) + "\n")
    return path


def test_a_spend_without_a_ledger_says_so_on_stderr(monkeypatch, capsys, tmp_path):
    csv = _tiny_csv(tmp_path / "t.csv")
    args = ["sample", csv, "--target", "y", "--horizon", 0.05, "--chains", 1, "--no-progress", "--reproducible-seed", 1]
    code, out, err = run_cli(monkeypatch, capsys, args)
    assert code == 0, err
    assert "no --ledger" in err and "not recorded" in err and "no --ledger" not in out
    code, out, err = run_cli(monkeypatch, capsys, [*args, "--ledger", tmp_path / "l.sqlite", "--budget", 5, 1e-5])
    assert code == 0 and "no --ledger" not in err and "charged" in out, err
