"""Rashomon runs as a person reads them and as they leave the process: report() text and HTML,
to_dict() / JSON, plots, the ``dp-infer rashomon`` command (report, --json, --ledger), the ledger
from Python, and NOTHING PRIVATE in any output: no L*, minimiser, threshold base, training loss or
clipped-row count, and neighbouring datasets give identical privacy blocks and CLI headers."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer import rashomon as R
from dp_infer.privacy.ledger import BudgetExceededError, Ledger
from tests.support.cli import run_cli

PSI = 0.02


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [0.5, 0.4, 0.3]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ [2.0, -1.0, 0.5]))).astype(float)
    return X, y


def _neighbour(X, y):
    Xp, yp = X.copy(), y.copy()
    Xp[0], yp[0] = [0.9, -0.3, 0.2], 1.0 - y[0]
    return Xp, yp


MODEL = R.linear_model("logistic", row_norm=1.0, l2=0.05)


@pytest.fixture(scope="module")
def runs():
    X, y = _data()
    Xe, ye = _data(40, seed=1)
    X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    Xe = Xe / np.maximum(np.linalg.norm(Xe, axis=1, keepdims=True), 1.0)
    Xp, yp = _neighbour(X, y)
    kw = dict(eps=1.0, delta=1e-5, horizon=0.3, num_chains=2, num_draws=60, seed=4, feature_names=["a", "b", "c"])
    res = [R.sample_rashomon(MODEL, A, b, PSI, **kw) for A, b in ((X, y), (Xp, yp))]
    return dict(X=X, y=y, Xp=Xp, yp=yp, Xe=Xe, ye=ye, res=res, m=res[0].measures(Xe, ye, public=True))


def test_report_text_html_and_dict(runs):
    res, m = runs["res"][0], runs["m"]
    text = str(res.report(m))
    for needle in ("Rashomon set of a logistic model with intercept", "privacy report", "guarantee",
                   "threshold_width", "model class reliance", "Rashomon capacity", "pattern Rashomon ratio",
                   "ambiguity (flip rate)", "viable prediction ranges", "intercept", "reference model: mean of"):
        assert needle in text, needle
    html = res.report(m)._repr_html_()
    assert html.startswith("<h4>") and "<table>" in html and "MCR+" in html
    assert "<table>" in res._repr_html_()
    d = res.to_dict(m)
    s = json.dumps(d)  # JSON-ready
    back = json.loads(s)
    assert back["measures"]["model_class_reliance"]["feature_names"] == ["a", "b", "c"]
    assert len(back["measures"]["prediction_ranges"]["low"]) == 40
    assert back["privacy"]["eps_spent"] == pytest.approx(1.0)
    assert "draws" not in back and len(res.to_dict(include_draws=True)["draws"]) == 2
    assert "prediction_ranges" not in res.to_dict()["measures"]  # no rows given: draws-only measures
    assert m["ambiguity"]["flip_rate"] == m.ambiguity["flip_rate"]  # mapping-style access


def test_measures_refuse_rows_not_declared_public(runs):
    res = runs["res"][0]
    with pytest.raises(ValueError, match="public must be True"):
        res.measures(runs["Xe"], runs["ye"])
    with pytest.raises(ValueError, match="public must be True"):
        res.measures(runs["Xe"], public=False)


def test_nothing_private_in_any_output(runs):
    X, y = runs["X"], runs["y"]
    res, m = runs["res"][0], runs["m"]
    mini = R.rashomon_minimum(MODEL.loss, MODEL.design(X), y)
    base = R.threshold_base(mini, MODEL.loss.constants.strong_convexity, R.DEFAULT_TOL)
    with jax.enable_x64(True):
        train_loss = float(MODEL.loss.mean(jnp.asarray(res.flat_draws().mean(0)), jnp.asarray(MODEL.design(X)),
                                           jnp.asarray(y)))
    # the released draws themselves are left out of the repr: they are the release, and the set's draws
    # sit near theta* (one of them matched a coordinate of theta* to 6 digits under another noise
    # stream: a coincidence of the release, not a leak of the minimiser)
    outputs = [str(res.report(m)), res.report(m)._repr_html_(), json.dumps(res.to_dict(m)),
               repr({k: v for k, v in dataclasses.asdict(res).items() if k != "draws"})]
    secrets = [mini.value, base, base + PSI, train_loss, *mini.theta]
    for text in outputs:
        for v in secrets:  # printed rounded, or written in full (its leading digits)
            for form in (f"{v:.6g}", f"{v:.5g}", repr(float(v))[:8]):
                assert form not in text, (v, form)
        for key in ("L_star", "theta_star", "threshold_base", "minimiser", "n_clipped", "rows clipped"):
            assert key not in text
    # neighbouring datasets, same seed: identical privacy blocks (only the draws, and what is
    # computed from them, differ)
    a, b = (r.to_dict()["privacy"] for r in runs["res"])
    assert a == b
    assert not np.array_equal(runs["res"][0].draws, runs["res"][1].draws)


def test_plots(runs):
    import matplotlib

    matplotlib.use("Agg")
    from dp_infer.rashomon import plots

    m = runs["m"]
    for ax in (plots.plot_prediction_ranges(m), plots.plot_model_class_reliance(m),
               plots.plot_importance_cloud(m), plots.plot_importance_cloud(m, features=(0, 1)),
               plots.plot_coefficient_ranges(m)):
        assert ax.get_title()
    with pytest.raises(ValueError, match="no model class reliance"):
        plots.plot_model_class_reliance(runs["res"][0].measures())


def test_ledger_from_python(tmp_path, runs):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", 1.2, 1e-5)
    X, y = runs["X"], runs["y"]
    kw = dict(eps=1.0, delta=1e-5, horizon=0.2, num_chains=2, num_draws=20, seed=1)
    res = R.sample_rashomon(MODEL, X, y, PSI, ledger=led, dataset_id="d", **kw)
    assert led.spent("d")["eps"] == pytest.approx(res.privacy["eps_spent"], rel=1e-6)
    assert [h["status"] for h in led.history("d")] == ["completed"]
    with pytest.raises(BudgetExceededError):  # refused before the data are used
        R.sample_rashomon(MODEL, X, y, PSI, ledger=str(tmp_path / "l.sqlite"), dataset_id="d", **kw)
    assert len(led.history("d")) == 1


# ------------------------------------------------------------------------------ the command line

def _csv(path, X, y, names=("a", "b", "c")):
    rows = [",".join(names + ("label",))] + [",".join(f"{v:.6f}" for v in x) + f",{int(t)}" for x, t in zip(X, y)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_cli_report_json_and_neighbours(monkeypatch, capsys, tmp_path):
    X, y = _data()
    X[0] = [2.0, 0.0, 0.0]  # clipped in D, not in D' below
    Xp, yp = X.copy(), y.copy()
    Xp[0] = [0.1, 0.0, 0.0]
    Xe, ye = _data(40, seed=1)
    Xe = Xe / np.maximum(np.linalg.norm(Xe, axis=1, keepdims=True), 1.0)
    ev = _csv(tmp_path / "eval.csv", Xe, ye)
    outs = []
    for k, (A, b) in enumerate(((X, y), (Xp, yp))):
        tr = _csv(tmp_path / f"train{k}.csv", A, b)
        js = tmp_path / f"out{k}.json"
        code, out, err = run_cli(monkeypatch, capsys, [
            "rashomon", tr, "--target", "label", "--eval-csv", ev, "--psi", "0.02", "--horizon", "0.2",
            "--chains", "2", "--draws", "40", "--reproducible-seed", "3", "--json", str(js)])
        assert code in (0, None), err
        outs.append(out.replace(f"train{k}.csv", "train.csv"))
        d = json.loads(js.read_text())
        assert d["measures"]["model_class_reliance"]["method"] == "exact pairwise swap"
        assert d["model"]["intercept"] is True and d["feature_names"] == ["a", "b", "c", "intercept"]
    out = outs[0]
    for needle in ("privacy report", "Rashomon capacity", "model class reliance", "wrote"):
        assert needle in out
    assert "clipped:" not in out and "NON-PRIVATE (computed" not in out
    head = [o.split("coefficients over")[0] for o in outs]
    assert head[0] == head[1]  # privacy block and data lines do not depend on the private rows
    code, out, err = run_cli(monkeypatch, capsys, [
        "rashomon", str(tmp_path / "train0.csv"), "--target", "label", "--horizon", "0.2", "--chains", "1",
        "--draws", "20", "--nonprivate-diagnostics", "--loss", "smoothed-hinge", "--mode", "nonprivate",
        "--beta", "50"])
    assert code in (0, None), err
    assert "private rows clipped: 1" in out and "NON-PRIVATE" in out and "smoothed_hinge" in out
    assert "row-wise measures need a public evaluation set" in out


def test_cli_ledger_and_bad_options(monkeypatch, capsys, tmp_path):
    X, y = _data()
    tr = _csv(tmp_path / "train.csv", X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1), y)
    led = str(tmp_path / "l.sqlite")
    base = ["rashomon", tr, "--target", "label", "--horizon", "0.2", "--chains", "1", "--draws", "20",
            "--ledger", led, "--dataset-id", "t"]
    code, out, err = run_cli(monkeypatch, capsys, base + ["--budget", "1.2", "1e-5"])
    assert code in (0, None), err
    assert "charged" in out
    code, out, err = run_cli(monkeypatch, capsys, base)
    assert code != 0 and "budget" in err.lower(), err
    assert "privacy report" not in out  # refused before sampling
    for args, needle in [
        (["--loss", "squared"], "--loss squared needs --label-bound and --radius"),
        (["--threshold-width", "0"], "--threshold-width must lie in (0, inf)"),
        (["--mcr-permutations", "1"], "--mcr-permutations must be an integer >= 2"),
        (["--json", str(tmp_path / "nodir" / "x.json")], "does not exist"),
        (["--loss", "smoothed-hinge", "--hinge-smoothing", "-1"], "hinge_smoothing must lie in (0, inf)"),
    ]:
        code, out, err = run_cli(monkeypatch, capsys, ["rashomon", tr, "--target", "label", *args])
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code != 0 and len(lines) == 1 and needle in lines[0], (needle, err)
        assert "privacy report" not in out
