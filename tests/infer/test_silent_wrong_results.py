"""Findings 8-9 of issue 30: silent wrong results become clear one-line errors.

Each case was, before, a result that looked genuine: an edited eps_spent reported as spent, a
zip member inflated without bound, a Bernoulli model fitted on y = 2, a 3-class public test
file scored by a binary model, a 1e300 cell that zeroed its row, NaN draws predicting class 0,
``predict --model`` ignored, a run zip without its draws reported as "unexpected KeyError".
"""

import math
import json
import zipfile

import numpy as np
import pytest

import dp_infer
from dp_infer import losses
from dp_infer.datasets import clip_rows
from dp_infer.diagnostics import io as dio
from dp_infer.diagnostics import load, save
from dp_infer.diagnostics.privacy_report import REPORT_ATTR, get_report
from dp_infer.infer.run import PrivateRun
from dp_infer.privacy.ledger import Ledger
from tests.support.cli import run_cli


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.5, 0.5, size=(n, 2))
    return X, (X[:, 0] > 0).astype(float)


@pytest.fixture(scope="module")
def run_file(tmp_path_factory):
    X, y = _data()
    run = dp_infer.fit(losses.logistic(), X, y, eps=1.0, delta=1e-5, horizon=0.05, num_draws=20, seed=3,
                       progress_bar=False)
    path = tmp_path_factory.mktemp("runs") / "run.zip"
    run.save(path)
    return path


def test_an_edited_eps_spent_is_refused_on_load(run_file, tmp_path):
    PrivateRun.load(run_file)  # the genuine file loads
    dt = load(run_file)
    rep = get_report(dt)
    rep["eps_spent"] = rep["eps_spent"] / 10
    dt.attrs[REPORT_ATTR] = json.dumps(rep)
    save(dt, tmp_path / "edited.zip")
    with pytest.raises(ValueError, match="eps_spent .* does not match its stored privacy event"):
        PrivateRun.load(tmp_path / "edited.zip")


def test_a_zip_member_is_read_with_a_size_cap(tmp_path, monkeypatch):
    p = tmp_path / "bomb.zip"
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("_root.nc", b"\0" * 200_000)  # compresses to a few hundred bytes
    monkeypatch.setattr(dio, "MAX_ZIP_READ_BYTES", 10_000)
    with pytest.raises(ValueError, match="MAX_ZIP_READ_BYTES"):
        load(p)


def _bernoulli(X=None, y=None):
    import numpyro
    import numpyro.distributions as dist

    w = numpyro.sample("w", dist.Normal(0, 1).expand([2]).to_event(1))
    with numpyro.plate("rows", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)


def test_observations_outside_the_model_support_are_refused_before_the_charge(tmp_path):
    X, y = _data()
    y[4] = 2.0
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("default", 10.0, 1e-3)
    with pytest.raises(ValueError, match="^y: an observation lies outside the support of the observed site 'y'"):
        dp_infer.fit(model=_bernoulli, X=X, y=y, eps=1.0, delta=1e-5, ledger=led, progress_bar=False)
    assert led.history("default") == []


def _csv(path, X, y):
    path.write_text("a,b,label\n" + "\n".join(f"{a},{b},{t:g}" for (a, b), t in zip(X, y)) + "\n")
    return path


def test_a_test_csv_with_other_labels_and_a_huge_cell_are_refused(tmp_path, monkeypatch, capsys):
    X, y = _data()
    good = _csv(tmp_path / "good.csv", X, y)
    y3 = y.copy()
    y3[:5] = 2
    three = _csv(tmp_path / "three.csv", X, y3)
    for args, needle in ((["sample", good, "--target", "label", "--test-csv", three, "--no-progress"], "--test-csv"),):
        code, out, err = run_cli(monkeypatch, capsys, args, expect_exit=True)
        assert code != 0 and needle in err and len(err.strip().splitlines()) == 1, err
        assert "accuracy" not in out
    Xh = X.copy()
    Xh[3, 1] = 1e300
    huge = _csv(tmp_path / "huge.csv", Xh, y)
    code, out, err = run_cli(monkeypatch, capsys, ["sample", huge, "--target", "label", "--no-progress"], expect_exit=True)
    assert code != 0 and "column 'b'" in err and "1e+300" not in err, err
    with pytest.raises(ValueError, match="column 1 holds a value too large"):
        clip_rows(Xh)


def test_nan_draws_are_refused_at_predict(run_file):
    run = PrivateRun.load(run_file)
    run.theta = run.theta.copy()
    run.theta[0, -1, 0] = np.nan
    with pytest.raises(ValueError, match="^theta: the released draws hold a non-finite value"):
        run.predict(np.zeros((3, 2)))


def test_predict_model_where_it_does_not_apply_and_a_run_zip_without_draws(run_file, tmp_path, monkeypatch, capsys):
    X, y = _data(5)
    data = _csv(tmp_path / "new.csv", X, y)
    mf = tmp_path / "m.py"
    mf.write_text("def model(X=None, y=None):\n    pass\n")
    code, _, err = run_cli(monkeypatch, capsys, ["predict", run_file, data, "--model", f"{mf}:model"], expect_exit=True)
    assert code != 0 and err.startswith("error: --model:") and len(err.strip().splitlines()) == 1, err
    stripped = tmp_path / "nodraws.zip"
    with zipfile.ZipFile(run_file) as src, zipfile.ZipFile(stripped, "w") as dst:
        for name in src.namelist():
            if not name.startswith("posterior"):
                dst.writestr(name, src.read(name))
    code, _, err = run_cli(monkeypatch, capsys, ["predict", stripped, data], expect_exit=True)
    assert code != 0 and "unexpected" not in err and "posterior" in err and len(err.strip().splitlines()) == 1, err


def test_rows_the_data_check_accepts_never_fail_the_second_moment_after_the_charge(tmp_path):
    """Rows normalised in float32 overshoot the bound by ~1e-7: the loss's check accepts them (slack
    ROW_NORM_SLACK), so the private second moment's sensitivity must cover them too. On the code
    before the fix the release refused them AFTER the ledger was charged."""
    from dp_infer.infer.posterior import fit_posterior
    from dp_infer.losses import logistic
    from dp_infer.losses.base import ROW_NORM_SLACK
    from dp_infer.privacy.ledger import Ledger

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X *= 1 + 0.5 * ROW_NORM_SLACK  # accepted by the data check, above the declared row_norm = 1
    y = (rng.random(300) < 0.5).astype(float)
    led = Ledger(tmp_path / "ledger.sqlite")
    led.register_dataset("d", 10.0, 1e-3)
    run = fit_posterior(logistic(), X, y, eps=1.0, delta=1e-5, prior_precision=1.0, ess=20, seed=0,
                        progress_bar=False, ledger=led, dataset_id="d", clip_radius=None)  # the release is the same
    spent = led.spent("d")
    assert (spent["n_runs"], spent["n_completed"]) == (1, 1)
    # the release's bound is the checked one: sensitivity 2 (1 + slack)^2 / n
    sm = run.plan.event.metadata["parts"][1]
    assert sm["metadata"]["sensitivity"] == pytest.approx(math.sqrt(2) * (1 + ROW_NORM_SLACK) ** 2 / 300, rel=1e-12)
