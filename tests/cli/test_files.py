"""The command line around runs and budgets: dp-infer predict (columns by name), budget register |
history, and sample / report printing the same checks of the same draws."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import pytest

from tests.support.cli import run_cli
from dp_infer.infer.run import PrivateRun


@pytest.fixture(scope="module")
def csvs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)) / 2
    y = (X @ np.array([2.0, -1.0, 0.5]) + rng.logistic(size=300) > 0).astype(int)
    df = pd.DataFrame(X, columns=["a", "b", "c"]).assign(label=y)
    df.to_csv(d / "train.csv", index=False)
    new = df.head(25)
    new[["c", "label", "a", "b"]].to_csv(d / "new_permuted.csv", index=False)
    new[["a", "c"]].to_csv(d / "new_missing.csv", index=False)
    new[["c", "label", "a", "b"]].to_csv(d / "new_semicolon.csv", index=False, sep=";")
    return d, new


def _mixing_table(text: str, header: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if header in ln)
    return [ln.split() for ln in lines[start + 1:start + 6] if ln.startswith("theta")]


def test_sample_and_report_print_the_same_checks_and_predict_matches_by_name(monkeypatch, capsys, csvs, tmp_path):
    d, new = csvs
    out = tmp_path / "run.zip"
    led = tmp_path / "led.sqlite"
    code, so, err = run_cli(monkeypatch, capsys, ["budget", "register", led, "--dataset-id", "census",
                                                  "--eps", "3", "--delta", "1e-5"])
    assert code == 0, err
    code, so, err = run_cli(monkeypatch, capsys, ["sample", d / "train.csv", "--target", "label", "--no-progress",
                                                  "--horizon", "0.5", "--out", out, "--ledger", led,
                                                  "--dataset-id", "census"])
    assert code == 0, err
    sampled = _mixing_table(so, "max R-hat")
    code, rep, err = run_cli(monkeypatch, capsys, ["report", out, "--plots", tmp_path / "plots"])
    assert code == 0, err
    assert sampled and sampled == _mixing_table(rep, "Mixing checks")
    # predict: columns matched by name (permuted, with an extra label column), rows clipped as in training
    preds = tmp_path / "preds.csv"
    code, so, err = run_cli(monkeypatch, capsys, ["predict", out, d / "new_permuted.csv", "--out", preds])
    assert code == 0, err
    got = pd.read_csv(preds)
    run = PrivateRun.load(out)
    Xn = new[["a", "b", "c"]].to_numpy()
    Xn = Xn / np.maximum(1.0, np.linalg.norm(Xn, axis=1, keepdims=True))
    np.testing.assert_allclose(got["probability"], run.predict_proba(Xn), rtol=1e-5)
    np.testing.assert_array_equal(got["prediction"], (got["probability"] > 0.5).astype(int))
    # a ';'-delimited file is read as such (issue 41: it was read as one column 'c;label;a;b')
    semi = tmp_path / "preds_semi.csv"
    code, so, err = run_cli(monkeypatch, capsys, ["predict", out, d / "new_semicolon.csv", "--out", semi])
    assert code == 0, err
    np.testing.assert_array_equal(pd.read_csv(semi)["probability"], got["probability"])
    code, so, err = run_cli(monkeypatch, capsys, ["predict", out, d / "new_missing.csv"])
    assert code == 2 and "lacks the feature column(s) ['b']" in err and len(err.strip().splitlines()) == 1
    # the history view: one unique, seed-free label per charged run
    code, so, err = run_cli(monkeypatch, capsys, ["budget", "history", led])
    assert "dataset 'census'" in so and "dp-infer sample trajectory" in so and "completed" in so
    code, so, err = run_cli(monkeypatch, capsys, ["budget", "register", led, "--dataset-id", "census",
                                                  "--eps", "5", "--delta", "1e-5"])
    assert code == 2 and "cannot be changed" in err
    code, so, err = run_cli(monkeypatch, capsys, ["budget", led, "--dataset-id", "census"])
    assert "spent eps = " in so and "over 1 run(s)" in so


def test_predict_from_a_model_run_needs_and_loads_the_model(monkeypatch, capsys, tmp_path):
    src = tmp_path / "mymodel.py"
    src.write_text(textwrap.dedent("""
        import numpyro, numpyro.distributions as dist

        def logreg(X=None, y=None):
            w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
            with numpyro.plate("data", X.shape[0]):
                numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)
    """))
    from dp_infer.cli.predict import load_model_function

    model = load_model_function(f"{src}:logreg")
    rng = np.random.default_rng(1)
    df = pd.DataFrame(rng.normal(size=(60, 2)) / 2, columns=["u", "v"])
    y = (df["u"] - df["v"] + rng.logistic(size=60) > 0).astype(float).to_numpy()
    import dp_infer

    run = dp_infer.fit(model=model, X=df, y=y, eps=2.0, delta=1e-5, horizon=1.0, seed=2, progress_bar=False)
    path = run.save(tmp_path / "m.zip")
    df[["v", "u"]].to_csv(tmp_path / "rows.csv", index=False)
    code, so, err = run_cli(monkeypatch, capsys, ["predict", path, tmp_path / "rows.csv"])
    assert code == 2 and "--model: " in err and "was fitted from a NumPyro model" in err  # CLI words (issue 30)
    code, so, err = run_cli(monkeypatch, capsys, ["predict", path, tmp_path / "rows.csv", "--model", f"{src}:logreg",
                                                  "--out", tmp_path / "p.csv"])
    assert code == 0, err
    np.testing.assert_allclose(pd.read_csv(tmp_path / "p.csv")["probability"], run.predict_proba(df), rtol=1e-5)
    code, so, err = run_cli(monkeypatch, capsys, ["predict", path, tmp_path / "rows.csv", "--model", "nope"])
    assert code == 2 and "--model must be FILE.py:FUNCTION" in err
