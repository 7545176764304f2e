"""PrivateRun as an artefact: picklable, saved and loaded with its plan, report and model description,
predictions from the released draws, continuation charged as a longer horizon."""

from __future__ import annotations

import dataclasses
import math
import pickle

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pandas as pd
import pytest

import dp_infer
from dp_infer import diagnostics as D
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.ledger import Ledger
from dp_infer.infer.run import PrivateRun, extended_plan


def logreg(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w + b), obs=y)


def counts(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 0.5).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Poisson(jnp.exp(X @ w)), obs=y)


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) / 2
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = (X @ np.array([2.0, -1.0, 0.5]) + rng.logistic(size=n) > 0).astype(float)
    return X, y


FAST = dict(eps=2.0, delta=1e-5, horizon=2.0, num_chains=2, progress_bar=False)


@pytest.fixture(scope="module")
def loss_run():
    X, y = _data()
    df = pd.DataFrame(X, columns=["age", "hours", "score"])
    return dp_infer.fit(dp_infer.logistic(), df, y, seed=11, **FAST), df


@pytest.fixture(scope="module")
def model_run():
    X, y = _data()
    return dp_infer.fit(model=logreg, X=X, y=y, seed=12, **FAST), X


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def test_pickle_keeps_the_release_and_drops_the_data_and_the_key(loss_run):
    run, df = loss_run
    blob = pickle.dumps(run)
    back = pickle.loads(blob)
    assert back.plan == run.plan and back.report() == {k: v for k, v in run.report().items()}
    np.testing.assert_array_equal(back.theta, run.theta)
    np.testing.assert_allclose(back.predict_proba(df), run.predict_proba(df))
    with pytest.raises(ValueError, match="private data are never saved"):
        back.potential
    with pytest.raises(ValueError, match="no MCMC object"):
        back.mcmc
    # the private rows are not in the pickle (they live in the potential only)
    assert np.asarray(df.to_numpy(), dtype=np.float32).tobytes()[:64] not in blob
    assert run.mcmc.last_state.rng_key is not None and b"rng_key" not in blob


@pytest.mark.parametrize("suffix", [".zip", ".nc"])
def test_save_and_load_a_loss_run(tmp_path, loss_run, suffix):
    run, df = loss_run
    path = run.save(tmp_path / f"run{suffix}")
    back = PrivateRun.load(path)
    assert back.plan == run.plan
    assert back.report() == run.report()
    np.testing.assert_array_equal(back.theta, run.theta)
    np.testing.assert_array_equal(back.diverging, run.diverging)
    assert back.feature_names == ["age", "hours", "score"]
    np.testing.assert_allclose(back.predict_proba(df), run.predict_proba(df), rtol=1e-6)
    # the tree is ArviZ native: feature coords, burn-in in warmup_posterior, one structured report
    dt = D.load(path)
    assert list(dt["posterior"]["feature"].values) == ["age", "hours", "score"]
    assert dt["warmup_posterior"].sizes["draw"] == run.plan.burn_in
    assert isinstance(dt.attrs[D.REPORT_ATTR], dict) and dt.attrs[D.REPORT_ATTR]["route"] == "trajectory"
    assert dt.attrs["dp_infer_privacy_summary"].startswith("(2, 1e-05)-DP; route trajectory")


def test_a_purified_run_keeps_feature_coords_and_predicts_by_name(tmp_path, loss_run):
    _, df = loss_run
    y = (df.to_numpy() @ np.array([2.0, -1.0, 0.5]) > 0).astype(float)
    pure = dp_infer.fit(dp_infer.logistic(), df, y, eps=1.0, delta=None, domain=dp_infer.L2Ball(3, 5.0),
                        seed=13, progress_bar=False)
    assert pure.plan.release == "purified_mean"
    dt = pure.to_datatree()
    assert list(dt["posterior"]["feature"].values) == ["age", "hours", "score"]
    back = PrivateRun.load(pure.save(tmp_path / "pure.zip"))
    np.testing.assert_allclose(back.estimate(), pure.estimate(), rtol=1e-6)
    expect = _sigmoid(df.to_numpy() @ pure.estimate())
    np.testing.assert_allclose(back.predict_proba(df[["score", "hours", "age"]]), expect, rtol=1e-5)


def test_save_and_load_a_model_run_with_and_without_the_model(tmp_path, model_run):
    run, X = model_run
    path = run.save(tmp_path / "model.zip")
    back = PrivateRun.load(path, model=logreg)
    np.testing.assert_allclose(back.theta, run.theta, rtol=1e-5, atol=1e-6)  # flat draws rebuilt from sites
    np.testing.assert_allclose(back.predict_proba(X[:7]), run.predict_proba(X[:7]), rtol=1e-6)
    bare = PrivateRun.load(path)
    assert set(bare.get_samples()) == {"w", "b"}
    with pytest.raises(ValueError, match="predictions need the NumPyro model"):
        bare.predict(X[:3])
    with pytest.raises(ValueError, match="use get_samples"):
        bare.draws()


def test_predictions_are_the_mean_over_released_draws(loss_run, model_run):
    run, df = loss_run
    th = run.draws().reshape(-1, 3)
    expect = _sigmoid(df.to_numpy() @ th.T).mean(axis=1)
    np.testing.assert_allclose(run.predict_proba(df), expect, rtol=1e-5)
    np.testing.assert_array_equal(run.predict(df), (expect > 0.5).astype(int))
    # columns matched by name: permuted and extra columns give the same; a missing one is an error
    permuted = df[["score", "age", "hours"]].assign(label=1)
    np.testing.assert_allclose(run.predict_proba(permuted), expect, rtol=1e-5)
    with pytest.raises(ValueError, match=r"lacks the feature column\(s\) \['hours'\]"):
        run.predict(df[["age", "score"]])
    mrun, X = model_run
    s = mrun.get_samples()
    manual = _sigmoid(X[:5] @ s["w"].T + s["b"]).mean(axis=1)
    np.testing.assert_allclose(mrun.predict_proba(X[:5]), manual, rtol=1e-5)


def test_a_count_model_predicts_its_mean_and_refuses_probabilities():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 2)) / 2
    y = rng.poisson(np.exp(X @ np.array([0.5, -0.5]))).astype(float)
    run = dp_infer.fit(model=counts, X=X, y=y, seed=5, clip_norm=5.0, **FAST)
    s = run.get_samples()
    np.testing.assert_allclose(run.predict(X[:4]), np.exp(X[:4] @ s["w"].T).mean(axis=1), rtol=1e-5)
    with pytest.raises(ValueError, match="binary or categorical likelihood"):
        run.predict_proba(X[:4])


def test_extend_equals_one_longer_run_and_is_charged_as_a_longer_horizon(tmp_path):
    X, y = _data()
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", 10.0, 1e-5)
    run = dp_infer.fit(dp_infer.logistic(), X, y, seed=21, ledger=led, dataset_id="d", **FAST)
    plan0 = run.plan
    mu0 = plan0.event.mu
    extra = 2 * plan0.thinning * 10
    run.extend(extra, ledger=led, dataset_id="d")
    # one run of the longer plan from the same seed gives the very same draws (same key stream)
    long_plan = extended_plan(plan0, extra)
    assert run.plan == long_plan
    ref = dp_infer.sample(dp_infer.logistic(), X, y, long_plan, seed=21, progress_bar=False)
    np.testing.assert_allclose(run.theta, ref.theta, rtol=1e-5, atol=1e-6)
    # privacy: the whole path's GDP, sqrt(mu0^2 + mu_increment^2) = beta Delta sqrt(K t_total / 2)
    t_total = (plan0.num_steps + extra) * plan0.step_size
    exact = plan0.beta * plan0.sensitivity * math.sqrt(plan0.num_chains * t_total / 2)
    assert run.plan.event.mu == pytest.approx(exact, rel=1e-12)
    inc = run.extensions[0]["mu_increment"]
    assert math.hypot(mu0, inc) == pytest.approx(exact, rel=1e-12)
    # the ledger holds the first run and the increment; composed, they are the whole path
    assert led.spent("d")["n_runs"] == 2
    assert led.spent("d")["eps"] == pytest.approx(Accountant([run.plan.event]).get_epsilon(1e-5), rel=1e-6)
    assert run.report()["eps_spent"] > plan0.eps and run.report()["extensions"][0]["steps"] == extra


def test_continuation_outside_extend_is_flagged_and_final_draw_routes_refuse():
    X, y = _data()
    run = dp_infer.fit(dp_infer.logistic(), X, y, seed=22, **FAST)
    with pytest.raises(ValueError, match="exactly one of num_steps"):
        run.extend()
    with pytest.raises(ValueError, match="num_steps must be an integer > 0"):
        run.extend(-1)
    from dp_infer.infer.extension import extension_steps as _extension_steps

    with pytest.raises(ValueError, match="multiple of the plan's thinning 4"):
        _extension_steps(dataclasses.replace(run.plan, thinning=4), 6, None)
    assert _extension_steps(dataclasses.replace(run.plan, thinning=4), None, 5 * run.plan.step_size) == 8
    mcmc = run.mcmc
    mcmc.post_warmup_state = mcmc.last_state
    mcmc.run(mcmc.post_warmup_state.rng_key)
    assert "ran" in run.report()["warning"] and "PrivateRun.extend" in run.report()["warning"]
    li = dp_infer.fit(dp_infer.logistic(l2=0.05), X, y, route="last_iterate", seed=1, eps=2.0, delta=1e-5,
                      num_chains=2, progress_bar=False)
    with pytest.raises(ValueError, match="only the trajectory route can be extended"):
        li.extend(10)


def test_report_and_sample_compute_the_same_diagnostics_on_the_same_draws(tmp_path, loss_run):
    run, _ = loss_run
    dt = run.to_datatree()
    back = D.load(run.save(tmp_path / "r.zip"))
    a, b = D.check_mixing(dt), D.check_mixing(back)
    assert a.num_draws == b.num_draws == run.plan.num_draws - run.plan.burn_in
    assert a.max_rhat == pytest.approx(b.max_rhat) and a.min_ess_bulk == pytest.approx(b.min_ess_bulk)
