"""Run files read back as what they hold (issues 28 and 29, left over):

* a proximal run's file (``ProximalRun.save``) comes back from ``PrivateRun.load`` as a
  ``ProximalRun`` with equal draws, report and predictions, and its report is checked against its
  stored event like any run file (an edited eps is refused);
* a model run's released, charged clip count is saved and loaded with the run, checked against the
  charge its report describes, and ``print_summary`` shows it as a released figure.

The oracle is the run object in memory before ``save``: every figure must come back bit for bit.
"""

import json
import zipfile

import numpy as np
import pytest

import dp_infer
from dp_infer.infer.proximal import ProximalRun, fit_proximal
from dp_infer.infer.run import PrivateRun
from dp_infer.losses import nonsmooth


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.5, 0.5, size=(n, 2))
    return X, (X[:, 0] > 0).astype(float)


@pytest.fixture(scope="module")
def proximal_run():
    import pandas as pd

    X, y = _data()
    return fit_proximal(nonsmooth.hinge(), pd.DataFrame(X, columns=["a", "b"]), y, eps=0.3, delta=1e-5,
                        num_chains=3, seed=2), X


@pytest.mark.slow  # the proximal sampler's float64 compilation: over 10 s on a loaded machine
def test_a_proximal_run_file_loads_back_as_a_proximal_run(proximal_run, tmp_path):
    run, X = proximal_run
    path = run.save(tmp_path / "prox.zip")
    for back in (PrivateRun.load(path), ProximalRun.load(path)):
        assert type(back) is ProximalRun
        np.testing.assert_array_equal(back.final, run.final)
        assert back.report() == run.report()
        assert back.plan == run.plan
        assert back.feature_names == ["a", "b"] and back.loss_name == "hinge"
        np.testing.assert_array_equal(back.predict(X), run.predict(X))
    with pytest.raises(ValueError, match="model"):
        PrivateRun.load(path, model=lambda X, y=None: None)


def _edit_report(path, out, edit):
    """Rewrite the root member of a run zip with ``edit`` applied to its JSON report."""
    import io

    import xarray as xr

    from dp_infer.diagnostics.privacy_report import REPORT_ATTR

    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(out, "w") as zout:
        for name in zin.namelist():
            raw = zin.read(name)
            if name == "_root.nc":
                with xr.open_dataset(io.BytesIO(raw), engine="scipy") as ds:
                    ds = ds.load()
                rep = json.loads(ds.attrs[REPORT_ATTR])
                edit(rep)
                ds.attrs[REPORT_ATTR] = json.dumps(rep)
                raw = ds.to_netcdf(engine="scipy")
            zout.writestr(name, raw)
    return out


@pytest.mark.slow
def test_an_edited_proximal_run_file_is_refused(proximal_run, tmp_path):
    run, _ = proximal_run
    path = run.save(tmp_path / "prox.zip")

    def halve(rep):
        rep["eps_spent"] = rep["eps_spent"] / 2

    edited = _edit_report(path, tmp_path / "edited.zip", halve)
    with pytest.raises(ValueError, match="eps_spent"):
        PrivateRun.load(edited)
    with pytest.raises(ValueError, match="eps_spent"):
        ProximalRun.load(edited)


def test_a_loss_run_file_is_not_taken_for_a_proximal_one(tmp_path):
    X, y = _data()
    run = dp_infer.fit(dp_infer.losses.logistic(), X, y, eps=1.0, delta=1e-5, horizon=0.05, seed=1,
                       progress_bar=False)
    path = run.save(tmp_path / "run.zip")
    assert type(PrivateRun.load(path)) is PrivateRun
    with pytest.raises(ValueError, match="not hold a proximal run"):
        ProximalRun.load(path)


def _model(X, y=None):
    import numpyro
    import numpyro.distributions as dist

    w = numpyro.sample("w", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("rows", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)


@pytest.fixture(scope="module")
def model_run():
    X, y = _data(80, seed=3)
    run = dp_infer.fit(model=_model, X=X, y=y, eps=1.0, delta=1e-5, horizon=0.05, seed=4, progress_bar=False,
                       clip_norm=0.5)
    assert run.clipped_rows is not None  # the default clip_count_share releases a charged count
    return run, X


def test_the_released_clip_count_survives_save_and_load(model_run, tmp_path):
    run, X = model_run
    path = run.save(tmp_path / "model.zip")
    back = PrivateRun.load(path, model=_model)
    assert back.clipped_rows == run.clipped_rows
    assert back.report() == run.report()  # the charged parameters of the count included
    np.testing.assert_array_equal(back.predict(X), run.predict(X))
    line = [s for s in back.summary().splitlines() if "clip_norm" in s]
    c = run.clipped_rows
    assert len(line) == 1 and "released" in line[0] and f"{c['noisy_count']:.1f} of {c['n']}" in line[0]


def test_a_clip_count_that_does_not_match_its_charge_is_refused(model_run, tmp_path):
    run, _ = model_run
    import dataclasses

    forged = dataclasses.replace(run, clipped_rows={**run.clipped_rows, "noise_sd": run.clipped_rows["noise_sd"] / 10})
    path = forged.save(tmp_path / "forged.zip")
    with pytest.raises(ValueError, match="clipped-row count"):
        PrivateRun.load(path, model=_model)
