"""fit(model=...): one call from a NumPyro model to a private, ArviZ-native posterior, with NumPyro's
conventions (chain_method, init strategies, extra_fields) limited to what the guarantee covers."""

from __future__ import annotations

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import Predictive
from numpyro.infer.initialization import (init_to_feasible, init_to_mean, init_to_median, init_to_sample,
                                          init_to_uniform, init_to_value)

import dp_infer
from dp_infer.diagnostics import REPORT_ATTR, is_private
from dp_infer.model.bridge import loss_from_model
from dp_infer.model.initial import initial_positions, prior_curvature
from dp_infer.privacy.ledger import Ledger


def logreg(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w + b), obs=y)


def grouped(X=None, y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("groups", 3):
        a = numpyro.sample("a", dist.Normal(mu, 1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Normal(a[X[:, 0].astype(jnp.int32)], 1.0), obs=y)


def tight_prior(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 0.05).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2)) / 2
    y = (X @ np.array([2.0, -1.0]) + rng.logistic(size=n) > 0).astype(float)
    return X, y


FAST = dict(eps=2.0, delta=1e-5, horizon=2.0, num_chains=2, progress_bar=False)


def test_one_call_gives_named_constrained_sites_with_plate_dims_and_predictive_works():
    rng = np.random.default_rng(1)
    Xg = np.c_[rng.integers(0, 3, 45), rng.normal(size=45)]
    yg = rng.normal(size=45)
    run = dp_infer.fit(model=grouped, X=Xg, y=yg, seed=2, coords={"groups": ["north", "east", "south"]}, **FAST)
    s = run.get_samples()
    assert set(s) == {"mu", "a"} and s["a"].shape[1:] == (3,)
    dt = run.to_datatree()
    assert dt["posterior"]["a"].dims == ("chain", "draw", "groups")
    assert list(dt["posterior"]["groups"].values) == ["north", "east", "south"]
    assert is_private(dt) and isinstance(dt.attrs[REPORT_ATTR], dict)
    assert dt.attrs["dp_infer_model"]["latent_sites"]["a"]["dims"] == ["groups"]
    # posterior predictive from the private draws: NumPyro's Predictive, directly
    pred = Predictive(grouped, s)(jax.random.key(0), X=jnp.asarray(Xg[:4]))
    assert pred["y"].shape == (s["mu"].shape[0], 4)


def test_the_report_says_what_was_declared_and_the_noise_source():
    X, y = _data()
    run = dp_infer.fit(model=logreg, X=X, y=y, seed=3, clip_norm=0.5, **FAST)
    rep = run.report()
    assert rep["model"]["clip_norm"] == 0.5 and rep["model"]["smoothness_source"] == "default: clip_norm"
    assert rep["model"]["init_strategy"] == {"name": "init_to_uniform", "radius": 2.0}
    assert rep["potential"]["loss"]["grad_diff"] == 1.0 and rep["sensitivity"] == pytest.approx(1.0 / 60 * 1.001)  # float32 margin
    assert rep["randomness"]["reproducible_by_seed_holder"] is True
    assert "seed" not in str(rep["model"])


def test_neighbouring_datasets_give_identical_plans_reports_and_starts():
    X, y = _data()
    Xp, yp = X.copy(), y.copy()
    Xp[0], yp[0] = [-3.0, 3.0], 1.0 - y[0]
    a = dp_infer.fit(model=logreg, X=X, y=y, seed=4, **FAST)
    b = dp_infer.fit(model=logreg, X=Xp, y=yp, seed=4, **FAST)
    assert a.report() == b.report()
    ma, mb = loss_from_model(logreg, X, y, clip_norm=1.0), loss_from_model(logreg, Xp, yp, clip_norm=1.0)
    for strategy in (None, init_to_sample, init_to_feasible, init_to_uniform(radius=0.5)):
        np.testing.assert_array_equal(np.asarray(initial_positions(ma, strategy, jax.random.key(5), 3)),
                                      np.asarray(initial_positions(mb, strategy, jax.random.key(5), 3)))


def test_init_strategies_accepted_and_their_starts():
    X, y = _data()
    ml = loss_from_model(logreg, X, y, clip_norm=1.0)
    u = np.asarray(initial_positions(ml, init_to_uniform(radius=0.5), jax.random.key(0), 4))
    assert u.shape == (4, 3) and np.all(np.abs(u) < 0.5) and len({tuple(r) for r in u}) == 4
    np.testing.assert_array_equal(np.asarray(initial_positions(ml, init_to_feasible, jax.random.key(0), 2)), 0.0)
    v = np.asarray(initial_positions(ml, init_to_value(values={"w": jnp.array([0.3, -0.2]), "b": 0.7}),
                                     jax.random.key(0), 2))
    np.testing.assert_allclose(v[0], ml.unconstrain({"w": jnp.array([0.3, -0.2]), "b": jnp.array(0.7)}), rtol=1e-6)
    run = dp_infer.fit(model=logreg, X=X, y=y, seed=1, init_strategy=init_to_value(values={"b": 0.7}), **FAST)
    assert any("declared public" in a for a in run.report()["model"]["init_strategy"]["assumptions"])


@pytest.mark.parametrize("strategy,message", [
    (init_to_median, "init_strategy init_to_median is refused on private data"),
    (init_to_mean, "init_strategy init_to_mean is refused on private data"),
    (lambda site=None: None, "cannot check that a custom strategy ignores the data"),
])
def test_data_informed_init_strategies_are_refused_before_any_charge(tmp_path, strategy, message):
    X, y = _data()
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", 5.0, 1e-5)
    with pytest.raises(ValueError, match=message):
        dp_infer.fit(model=logreg, X=X, y=y, init_strategy=strategy, ledger=led, dataset_id="d", **FAST)
    assert led.spent("d")["n_runs"] == 0


def _local_latent(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", X.shape[0]):
        u = numpyro.sample("u", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(w + u, 1.0), obs=y)


def _empirical_bayes(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(jnp.mean(y), 1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Normal(w, 1.0), obs=y)


@pytest.mark.parametrize("kwargs,message", [
    (dict(model=_local_latent), "latent site 'u' lies inside the data plate"),
    (dict(model=_empirical_bayes), "prior of the model depends on the data arguments"),
    (dict(model=logreg, extra_fields=("potential_energy",)), "function of the private data"),
    (dict(model=logreg, extra_fields=("accept_prob",)), "not a field of the langevin kernel's state"),
    (dict(model=logreg, dims={"v": ["k"]}), r"dims names site\(s\) \['v'\]"),
    (dict(model=logreg, clip_norm=0.0), "clip_norm must lie in"),
    (dict(model=logreg, loss=dp_infer.logistic()), "either a loss or model"),
])
def test_what_the_model_path_cannot_cover_is_one_line_before_any_charge(tmp_path, kwargs, message):
    X, y = _data()
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", 5.0, 1e-5)
    with pytest.raises(ValueError, match=message) as e:
        dp_infer.fit(X=X, y=y, ledger=led, dataset_id="d", **{**FAST, **kwargs})
    assert "\n" not in str(e.value)
    assert led.spent("d")["n_runs"] == 0


def test_chain_methods_give_the_same_draws_and_extra_fields_are_collected():
    X, y = _data()
    runs = [dp_infer.fit(model=logreg, X=X, y=y, seed=9, chain_method=m, extra_fields=("i",), **FAST)
            for m in ("vectorized", "sequential", "parallel")]
    for r in runs[1:]:
        np.testing.assert_allclose(r.theta, runs[0].theta, rtol=1e-5, atol=1e-6)
    steps = np.asarray(runs[0].mcmc.get_extra_fields(group_by_chain=True)["i"])
    assert steps[0, -1] == runs[0].plan.num_steps
    with pytest.warns(UserWarning, match="NOT covered"):
        dbg = dp_infer.fit(model=logreg, X=X, y=y, seed=9, debug=True, extra_fields=("potential_energy",), **FAST)
    assert "potential_energy" in dbg.mcmc.get_extra_fields()
    assert not is_private(dbg.to_datatree(debug=True)) and is_private(dbg.to_datatree())


def test_the_prior_curvature_shrinks_the_step_but_not_beta():
    X, y = _data()
    ml = loss_from_model(tight_prior, X, y, clip_norm=1.0, smoothness=1.0)
    c = prior_curvature(ml)
    assert c == pytest.approx(1 / 0.05**2, rel=1e-4)  # N(0, 0.05): Hessian 400 I everywhere
    kw = dict(eps=2.0, delta=1e-5, horizon=20.0, num_chains=2)
    a = dp_infer.infer.fit_model.plan_model(ml, 60, **kw)[0]
    b = dp_infer.infer.fit_model.plan_model(ml, 60, prior_curvature_bound=0.0, **kw)[0]
    assert a.beta == b.beta and a.event == b.event
    assert a.step_size < b.step_size and a.step_size * (a.beta * 1.0 + c) <= 0.5 * (1 + 1e-9)


def test_summary_is_over_the_released_draws_after_burn_in():
    X, y = _data()
    run = dp_infer.fit(model=logreg, X=X, y=y, seed=6, **FAST)
    dt = run.to_datatree()
    burn = run.plan.burn_in
    assert dt["warmup_posterior"].sizes["draw"] == burn
    assert dt["posterior"].sizes["draw"] == run.plan.num_draws - burn
    table = az.summary(dt)
    np.testing.assert_allclose(table.loc["b", "mean"], run.get_samples()["b"].mean(), atol=0.006)
    text = run.summary()
    # an estimate-mode run never looks like a posterior (issue 27, part 4)
    assert "Estimate-path summary" in text and "Posterior summary" not in text
    assert "estimate path, not a posterior" in text and "routes_considered" not in text


def test_a_bridged_loss_is_not_fitted_without_its_prior():
    X, y = _data()
    ml = loss_from_model(logreg, X, y, clip_norm=1.0, smoothness=1.0)
    with pytest.raises(ValueError, match="would drop the model's prior"):
        dp_infer.fit(ml.loss, X, y, **FAST)
    # the bridged loss knows the model's dimension (intercept included): no shape error in sample
    plan = dp_infer.plan_trajectory(ml.loss.constants, 60, ml.dim, eps=2.0, delta=1e-5, horizon=0.5)
    run = dp_infer.sample(ml.loss, X, y, plan, prior_potential=ml.prior_potential, seed=1, progress_bar=False)
    assert run.theta.shape[-1] == ml.dim == 3
