"""Issue 30, "What to build" item 5: draws that were charged are never lost.

A failure injected AFTER sampling (the report builder, the estimator's store, a model run's
private clip count, extend's bookkeeping) must leave the ledger's charge in place, write the
released draws to a fallback file that holds them exactly, and raise an error whose message names
that file. The oracle for "exactly" is the run object the error carries (the draws the sampler
returned), compared bit for bit with what ``numpy.load`` and ``PrivateRun.load`` read back.
"""

import numpy as np
import pytest

import dp_infer
from dp_infer import losses
from dp_infer.infer import fallback
from dp_infer.infer.fallback import DrawsKeptError, keep_draws, read_fallback
from dp_infer.infer.run import PrivateRun
from dp_infer.privacy.ledger import Ledger

DS = "default"


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.5, 0.5, size=(n, 2))
    return X, (X[:, 0] > 0).astype(float)


@pytest.fixture
def ledger(tmp_path):
    led = Ledger(tmp_path / "ledger" / "ledger.sqlite")
    led.register_dataset(DS, 100.0, 1e-3)
    return led


@pytest.fixture(scope="module")
def small_run():
    X, y = _data()
    return dp_infer.fit(losses.logistic(), X, y, eps=1.0, delta=1e-5, horizon=0.05, seed=4, progress_bar=False)


def _boom(*args, **kwargs):
    raise RuntimeError("injected failure after sampling")


def _check_kept(err: DrawsKeptError, led: Ledger, n_runs: int = 1):
    path = err.value.path
    assert path.exists() and str(path) in str(err.value)  # the message names the file
    assert path.parent == led.path.parent  # no --out: the ledger's directory
    spent = led.spent(DS)
    assert spent["n_runs"] == n_runs and spent["eps"] > 0  # the charge is kept
    return path


def test_fit_keeps_the_draws_when_a_step_after_sampling_fails(ledger, monkeypatch):
    X, y = _data()
    # the step after sampling in fit: labelling the draws with the DataFrame's column names
    import pandas as pd

    Xdf = pd.DataFrame(X, columns=["a", "b"])
    def set_names(self, value):  # the constructor sets None; the labelling after sampling fails
        if value is not None:
            _boom()
        self.__dict__["feature_names"] = value

    monkeypatch.setattr(PrivateRun, "feature_names", property(lambda self: self.__dict__.get("feature_names"),
                                                              set_names), raising=False)
    with pytest.raises(DrawsKeptError) as err:
        dp_infer.fit(losses.logistic(), Xdf, y, eps=1.0, delta=1e-5, horizon=0.05, num_chains=2, seed=3,
                     progress_bar=False, ledger=ledger)
    monkeypatch.undo()
    path = _check_kept(err, ledger)
    assert isinstance(err.value.__cause__, RuntimeError)
    run = err.value.run
    with np.load(path) as f:  # numpy alone reads it, no pickle
        np.testing.assert_array_equal(f["theta"], run.released_draws())
        assert f["report_level"].item() == "report"
    back = PrivateRun.load(path)
    np.testing.assert_array_equal(back.theta, run.theta)
    np.testing.assert_array_equal(back.diverging, run.diverging)
    assert back.report()["eps_spent"] == run.report()["eps_spent"]
    assert back.plan.event == run.plan.event


def test_the_estimator_keeps_the_draws_when_storing_the_release_fails(ledger, monkeypatch):
    pytest.importorskip("sklearn")
    from dp_infer.infer.estimators import PrivateLogisticRegression

    X, y = _data()
    monkeypatch.setattr(PrivateLogisticRegression, "_store", _boom)
    est = PrivateLogisticRegression(eps=1.0, horizon=0.05, random_state=1, ledger=ledger.path, dataset_id=DS)
    with pytest.raises(DrawsKeptError) as err:
        est.fit(X, y)
    path = _check_kept(err, ledger)
    data = read_fallback(path)
    np.testing.assert_array_equal(data["theta"], err.value.run.released_draws())
    assert data["failed_step"].item().startswith("PrivateLogisticRegression.fit")


def test_a_failed_report_still_keeps_the_plan_and_the_draws(ledger, monkeypatch, small_run):
    """The report builder itself fails (and fails again while the fallback is written): the file
    falls back to the plan and its event, which PrivateRun.load still reads and checks."""
    run = small_run
    monkeypatch.setattr(PrivateRun, "report", _boom)
    with pytest.raises(DrawsKeptError) as err:
        with keep_draws(run, ledger=ledger, step="the report"):
            run.report()
    monkeypatch.undo()
    data = read_fallback(err.value.path)
    assert data["report_level"].item() == "plan"
    back = PrivateRun.load(err.value.path)
    np.testing.assert_array_equal(back.theta, run.theta)
    assert back.plan.event == run.plan.event


def test_an_edited_fallback_file_is_refused(tmp_path, small_run):
    run = small_run
    path = fallback.write_fallback(run, out=tmp_path / "run.zip")
    assert path.parent == tmp_path and path.name.startswith("run.draws-") and path.suffix == ".npz"
    data = dict(np.load(path))
    import json

    rep = json.loads(data["report_json"].item())
    rep["eps_spent"] = rep["eps_spent"] / 2  # under-reported spend
    data["report_json"] = np.asarray(json.dumps(rep))
    edited = tmp_path / "edited.npz"
    np.savez(edited, **data)
    with pytest.raises(ValueError, match="eps_spent"):
        PrivateRun.load(edited)


def test_a_fallback_file_never_overwrites(tmp_path, small_run):
    paths = {fallback.write_fallback(small_run, out=tmp_path / "r.zip") for _ in range(3)}
    assert len(paths) == 3 and all(p.exists() for p in paths)


def test_an_interrupt_after_sampling_keeps_the_draws_too(tmp_path, small_run):
    with pytest.raises(DrawsKeptError, match="interrupted") as err:
        with keep_draws(small_run, out=tmp_path / "run.zip", step="the plots"):
            raise KeyboardInterrupt
    np.testing.assert_array_equal(np.load(err.value.path)["theta"], small_run.released_draws())


def test_nothing_is_written_when_the_failure_comes_before_the_draws(tmp_path):
    with pytest.raises(RuntimeError, match="injected"):
        with keep_draws(out=tmp_path / "run.zip"):
            _boom()
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_out_directory_falls_back_to_the_ledger_then_the_temp_dir(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    led_dir = tmp_path / "led"
    led_dir.mkdir()
    real_access = fallback.os.access
    monkeypatch.setattr(fallback.os, "access", lambda p, mode: False if str(p) == str(ro) else real_access(p, mode))
    dirs = fallback.fallback_directories(ro / "run.zip", led_dir / "ledger.sqlite")
    assert dirs[0] == led_dir and dirs[-1] == fallback.Path(fallback.tempfile.gettempdir())
    assert fallback.fallback_directories("/no/such/dir/run.zip", None) == [
        fallback.Path(fallback.tempfile.gettempdir())]


@pytest.mark.slow  # a NumPyro model end to end: about 6 s on a loaded machine
def test_fit_model_keeps_the_draws_when_the_clip_count_fails(ledger, monkeypatch):
    import numpyro
    import numpyro.distributions as dist

    from dp_infer.infer import fit_model as fm

    def model(X, y=None):
        w = numpyro.sample("w", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("rows", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)

    X, y = _data()
    monkeypatch.setattr(fm, "private_clip_count", _boom)
    with pytest.raises(DrawsKeptError) as err:
        dp_infer.fit(model=model, X=X, y=y, eps=1.0, delta=1e-5, horizon=0.05, seed=7, progress_bar=False,
                     ledger=ledger, clip_norm=1.0)
    path = _check_kept(err, ledger)
    run = err.value.run
    data = read_fallback(path)
    np.testing.assert_array_equal(data["site:w"], run.site_draws(drop_burn_in=False)["w"])
    back = PrivateRun.load(path, model=model)
    np.testing.assert_array_equal(back.samples["w"], data["site:w"])
    np.testing.assert_array_equal(back.predict(X[:5]), run.predict(X[:5]))


def test_extend_keeps_the_new_segment_when_its_bookkeeping_fails(ledger, monkeypatch):
    X, y = _data()
    run = dp_infer.fit(losses.logistic(), X, y, eps=1.0, delta=1e-5, horizon=0.05, seed=8, progress_bar=False)
    before = run.theta.copy()
    monkeypatch.setattr(PrivateRun, "released_segment", _boom)
    with pytest.raises(DrawsKeptError) as err:
        run.extend(num_steps=20, ledger=ledger)
    monkeypatch.undo()
    path = _check_kept(err, ledger)
    data = read_fallback(path)
    np.testing.assert_array_equal(data["theta"], before)
    np.testing.assert_array_equal(data["extension:theta"], np.asarray(run.mcmc.get_samples(group_by_chain=True)["theta"]))
    assert data["report"]["num_steps"] == run.plan.num_steps + 20  # the whole path, as charged
    np.testing.assert_array_equal(run.theta, before)  # the run object is left as it was
    with pytest.raises(ValueError, match="numpy.load"):
        PrivateRun.load(path)


def test_a_fallback_file_is_never_unpickled_and_a_bomb_is_refused(tmp_path, small_run, monkeypatch):
    path = fallback.write_fallback(small_run, out=tmp_path / "run.zip")
    data = dict(np.load(path))
    data["theta"] = np.array([object()], dtype=object)  # would need pickle
    bad = tmp_path / "pickled.npz"
    np.savez(bad, **data)
    with pytest.raises(ValueError, match="not a readable dp_infer fallback file"):
        PrivateRun.load(bad)
    import dp_infer.diagnostics.io as dio

    monkeypatch.setattr(dio, "MAX_ZIP_READ_BYTES", 100)
    with pytest.raises(ValueError, match="MAX_ZIP_READ_BYTES"):
        PrivateRun.load(path)
