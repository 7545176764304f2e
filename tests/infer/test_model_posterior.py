"""fit(model=..., target="posterior"): your own NumPyro model's tempered posterior (issue 27), per-row
covariates and group indices through model_kwargs, and outputs that say what the draws are.

Oracles: ULA's exact stationary law on a conjugate Gaussian model (mean unbiased, variance
1 / (m (1 - h m / 2)) in the whitened coordinate); the gradient difference of the potential actually
run on neighbouring datasets (the sensitivity the plan charges); the plans of neighbouring
datasets (bit-identical); the ledger (nothing charged on a refused input).
"""

from __future__ import annotations

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from click.testing import CliRunner

import dp_infer
from dp_infer.diagnostics import DRAWS_ATTR, ESTIMATE_STATEMENT, REPORT_ATTR
from dp_infer.privacy.ledger import Ledger
from dp_infer.privacy.float32_margin import FLOAT32_GRADIENT_MARGIN


def gauss(X=None, y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def logreg(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 3.0).expand([X.shape[1]]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 3.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w + b), obs=y)


def hierarchical(X=None, y=None, group=None, num_groups=3):
    """Group intercepts, non-centred; the group index is a per-row keyword argument."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    with numpyro.plate("groups", num_groups):
        z = numpyro.sample("z", dist.Normal(0.0, 1.0))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Normal(mu + tau * z[group] + w * X[:, 0], 1.0), obs=y)


def _hier_data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 3, n)
    X = rng.normal(size=(n, 1))
    y = np.array([-1.0, 0.0, 1.0])[g] + 0.7 * X[:, 0] + rng.normal(size=n)
    return X, y, g


@pytest.mark.slow
def test_conjugate_model_matches_ulas_exact_law_with_the_prior_untempered():
    """mu ~ N(0, 2^2), y_i ~ N(mu, 1): in phi = mu / 2 the potential is beta mean_i (2 phi - y_i)^2 / 2
    + phi^2 / 2, Gaussian with curvature m = 4 beta + 1 and minimiser 2 beta ybar / m. ULA at step h
    has mean exactly that and variance 1 / (m (1 - h m / 2)). A tempered prior (scaled by beta / n)
    would give curvature ~ 4 beta: with 4 beta = 0.42 the sd would be 2.0x larger. Tolerance: 4
    ArviZ MCSEs of the mean and of the sd (the clip is checked inactive on every draw)."""
    rng = np.random.default_rng(0)
    n, C = 400, 30.0
    y = np.clip(rng.normal(0.5, 1.0, n), -2.0, 2.0)
    run = dp_infer.fit(model=gauss, X=np.zeros((n, 1)), y=y, target="posterior", eps=2.0, delta=1e-5,
                       clip_norm=C, smoothness=4.0, prior_scales=2.0, mixing_rate=1.0, ess=1000, seed=11,
                       kernel="langevin",
                       progress_bar=False)
    p = run.plan
    # the clip's 2 C / n, with the float32 margin the posterior mode plans with
    assert p.target == "posterior"
    assert p.sensitivity == pytest.approx(2 * C / n * (1 + FLOAT32_GRADIENT_MARGIN), rel=1e-12)
    assert 0.2 < 4 * p.beta < 2.0, "the prior and the tempered likelihood must both matter for this oracle"
    mu = run.get_samples(group_by_chain=True)["mu"]
    assert np.max(np.abs(2.0 * (mu.reshape(-1)[:, None] - y[None, :]))) < C  # the clip never bites
    m = 4 * p.beta + 1.0
    h = p.step_size
    mean_phi, var_phi = 2 * p.beta * y.mean() / m, 1.0 / (m * (1 - h * m / 2))
    ds = az.from_dict({"posterior": {"mu": mu}})["posterior"].to_dataset()
    se_m, se_s = float(az.mcse(ds, method="mean")["mu"]), float(az.mcse(ds, method="sd")["mu"])
    assert abs(mu.mean() - 2 * mean_phi) <= 4 * se_m, (mu.mean(), 2 * mean_phi, se_m)
    assert abs(mu.std() - 2 * np.sqrt(var_phi)) <= 4 * se_s, (mu.std(), 2 * np.sqrt(var_phi), se_s)
    ach = run.report()["posterior"]["achieved"]
    assert ach["max_rhat"] < 1.01 and ach["min_ess_bulk"] >= 400


def _neighbours(n=50):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] > 0).astype(float)
    X2, y2 = X.copy(), y.copy()
    X2[0], y2[0] = [80.0, -60.0], 1.0 - y[0]  # the most extreme row a neighbour can bring
    return (X, y), (X2, y2)


@pytest.mark.slow
def test_the_sensitivity_charged_holds_for_the_function_run_and_plans_ignore_the_data():
    """Neighbouring datasets (one extreme row replaced): the potentials actually run differ in
    gradient by at most beta * Delta_P = beta * 2 C / n at every phi (clip in the prior-whitened
    metric), and the bound is nearly attained. A Euclidean clip in theta would let the prior scale
    3 through: 3x the charged sensitivity. The two plans are identical."""
    (X, y), (X2, y2) = _neighbours()
    kw = dict(target="posterior", eps=1.0, delta=1e-5, clip_norm=1.0, ess=8, num_draws=20, seed=1,
              progress_bar=False)
    a = dp_infer.fit(model=logreg, X=X, y=y, **kw)
    b = dp_infer.fit(model=logreg, X=X2, y=y2, **kw)
    assert a.plan.as_dict() == b.plan.as_dict()
    assert np.asarray(a.plan.posterior.model.prior_scales) == pytest.approx(3.0, rel=0.05)  # whitened by the prior
    bound = a.plan.beta * a.plan.sensitivity
    phis = jax.random.normal(jax.random.PRNGKey(0), (64, 3)) * 2.0
    ga, gb = jax.vmap(jax.grad(a.potential))(phis), jax.vmap(jax.grad(b.potential))(phis)
    diff = np.asarray(jnp.linalg.norm(ga - gb, axis=1))
    assert diff.max() <= bound * (1 + 1e-5), (diff.max(), bound)
    assert diff.max() >= 0.5 * bound  # the test can fail: the extreme row pushes the clip to its bound


def test_group_indices_pass_as_model_kwargs_and_are_checked_before_any_charge(tmp_path):
    X, y, g = _hier_data()
    led = Ledger(tmp_path / "ledger.sqlite")
    led.register_dataset("d", 10.0, 1e-4)
    base = dict(target="posterior", eps=1.0, delta=1e-5, ess=8, num_draws=20, progress_bar=False, ledger=led,
                dataset_id="d")
    bad = [({"group": g}, None, "index_ranges"),
           ({"group": g[:-1]}, {"group": 3}, "leading dimension n = 60"),
           ({"group": np.r_[g[:-1], 3]}, {"group": 3}, "[0, 2]"),
           ({"group": g}, {"group": 0}, "index_ranges['group']"),
           ({"group": np.where(g == 0, np.nan, 1.0)}, None, "finite"),
           ({"group": g, "X": X}, {"group": 3}, "passed as X="),
           ({"group": g}, {"group": 3, "other": 2}, "not in model_kwargs")]
    for mk, ranges, needle in bad:
        with pytest.raises(ValueError, match=None) as e:
            dp_infer.fit(model=hierarchical, X=X, y=y, model_kwargs=mk, index_ranges=ranges, **base)
        assert needle in str(e.value), (needle, str(e.value))
        assert len(str(e.value).splitlines()) == 1
    assert led.history("d") == []  # nothing was charged


@pytest.mark.slow
def test_the_docs_hierarchical_example_runs(tmp_path):
    """The hierarchical example of docs/how-to/bring-your-own-model.md, executed as written (with a
    ledger added and a fixed seed): named constrained sites with plate dims, the index's declared
    range in the model description, one charge."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "how-to" / "bring-your-own-model.md").read_text()
    block = text.split("def hierarchical(X=None, y=None, group=None, num_groups=8):")[1].split("```")[0]
    code = "def hierarchical(X=None, y=None, group=None, num_groups=8):" + block
    led = Ledger(tmp_path / "ledger.sqlite")
    led.register_dataset("d", 10.0, 1e-4)
    code = code.replace("clip_norm=2.0, ess=400)", "clip_norm=2.0, ess=400, seed=2, progress_bar=False, "
                                                   "ledger=led, dataset_id='d', coords={'groups': list('abcdefgh')})")
    assert "seed=2" in code
    ns = {"np": np, "numpyro": numpyro, "dist": dist, "dp_infer": dp_infer, "led": led}
    exec(compile(code, "bring-your-own-model.md", "exec"), ns)
    run = ns["run"]
    assert len(led.history("d")) == 1
    s = run.get_samples()
    assert set(s) == {"mu", "tau", "z", "w"} and s["z"].shape[1:] == (8,) and np.all(s["tau"] > 0)
    assert list(run.to_datatree()["posterior"]["z"].coords["groups"].values) == list("abcdefgh")
    assert run.model_description["row_arguments"] == {"group": {"per_row_shape": [], "kind": "index",
                                                                "range": [0, 7]}}
    assert run.report()["posterior"]["achieved"]["max_rhat"] < 1.05


@pytest.mark.slow
def test_group_indices_reach_the_likelihood_row_by_row():
    """The per-row group index is the row's own: the loss the kernel runs equals the model's
    log-likelihood evaluated with the full group vector (NumPyro's log_density, clip inactive)."""
    from numpyro.infer.util import log_likelihood

    X, y, g = _hier_data(n=30)
    ml = dp_infer.loss_from_model(hierarchical, X, y, clip_norm=1e6, model_kwargs={"group": g, "num_groups": 3},
                                  index_ranges={"group": 3})
    rows = ml.pack_rows(X, {"group": g, "num_groups": 3}, {"group": 3})
    theta = jnp.linspace(-1.0, 1.0, ml.dim)
    ours = ml.loss.per_example(theta, jnp.asarray(rows), jnp.asarray(y))
    params = ml.constrain(theta[None])
    ref = log_likelihood(hierarchical, {k: v for k, v in params.items()}, X=jnp.asarray(X), y=jnp.asarray(y),
                         group=jnp.asarray(g), num_groups=3)["y"][0]
    np.testing.assert_allclose(np.asarray(ours), -np.asarray(ref), rtol=1e-5, atol=1e-5)
    # a different assignment of groups gives a different loss (the index is not ignored)
    rows2 = ml.pack_rows(X, {"group": (g + 1) % 3, "num_groups": 3}, {"group": 3})
    assert not np.allclose(np.asarray(ml.loss.per_example(theta, jnp.asarray(rows2), jnp.asarray(y))), np.asarray(ours))


@pytest.mark.slow
def test_estimate_mode_output_never_looks_like_a_posterior(tmp_path):
    X, y, g = _hier_data()
    kw = dict(model_kwargs={"group": g, "num_groups": 3}, index_ranges={"group": 3}, eps=1.0, delta=1e-5,
              seed=4, progress_bar=False)
    est = dp_infer.fit(model=hierarchical, X=X, y=y, horizon=0.5, num_chains=2, **kw)
    text = est.summary()
    assert "Estimate-path summary" in text and "Posterior summary" not in text and ESTIMATE_STATEMENT in text
    assert "WARNING: R-hat" in text  # the mixing warnings are shown beside it
    assert est.to_datatree().attrs[DRAWS_ATTR].startswith(ESTIMATE_STATEMENT)
    path = est.save(tmp_path / "est.zip")
    assert dp_infer.diagnostics.load(path).attrs[DRAWS_ATTR].startswith(ESTIMATE_STATEMENT)
    assert ESTIMATE_STATEMENT in dp_infer.diagnostics.format_report(est.report())
    post = dp_infer.fit(model=hierarchical, X=X, y=y, target="posterior", ess=8, num_draws=20, **kw)
    beta = post.plan.beta
    want = f"posterior (tempered at beta = {beta:.4g}, beta/n = {beta / 60:.3g})"
    assert want in post.summary() and "Posterior summary" in post.summary()
    assert post.to_datatree().attrs[DRAWS_ATTR] == want
    assert post.to_datatree().attrs[REPORT_ATTR]["target"] == "posterior"


def test_cli_estimate_run_says_estimate_path(tmp_path):
    from dp_infer.cli import main

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = (X[:, 0] > 0).astype(int)
    path = tmp_path / "data.csv"
    path.write_text("\n".join(["a,b,label"] + [f"{X[i, 0]:.5f},{X[i, 1]:.5f},{y[i]}" for i in range(200)]) + "\n")
    res = CliRunner().invoke(main, ["sample", str(path), "--target", "label", "--row-norm", "3", "--horizon", "0.2",
                                    "--no-progress"])
    assert res.exit_code == 0, res.output
    assert ESTIMATE_STATEMENT in res.output


def test_posterior_mode_refuses_options_it_does_not_use():
    X, y, g = _hier_data()
    for bad, needle in ((dict(horizon=2.0), "horizon"), (dict(route="last_iterate"), "trajectory"),
                        (dict(debug=True), "debug")):
        with pytest.raises(ValueError, match=needle):
            dp_infer.fit(model=gauss, X=X, y=y, target="posterior", eps=1.0, delta=1e-5, **bad)
    with pytest.raises(ValueError, match="prior_scales"):
        dp_infer.fit(model=gauss, X=X, y=y, target="posterior", eps=1.0, delta=1e-5, prior_scales=[1.0, -1.0])


@pytest.mark.slow
def test_estimator_posterior_target_gives_draws_of_the_posterior_mode():
    from dp_infer.infer.estimators import PrivateLogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3)) / 3
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]  # rows within the declared row_norm 1
    y = (X @ np.array([3.0, -2.0, 1.0]) + rng.logistic(size=400) > 0).astype(int)
    est = PrivateLogisticRegression(target="posterior", ess=50, num_chains=4, eps=2.0, random_state=0).fit(X, y)
    assert est.report_["target"] == "posterior" and "achieved" in est.report_["posterior"]
    assert est.sample_posterior().shape[1] == 3 and est.coef_.shape == (3,)
    with pytest.raises(ValueError, match="target"):
        PrivateLogisticRegression(target="bogus").fit(X, y)


def scale_model(X=None, y=None):
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(0.0, tau), obs=y)


def test_the_prior_keeps_the_log_jacobian_of_constrained_latents():
    """Regression (the tau collapse of issue 27): in the unconstrained coordinate u = log tau the prior
    of tau ~ HalfNormal(1) has potential e^(2u) / 2 - u (+ const): the -u is the log-Jacobian, which
    NumPyro adds as an observed factor site. Masking it (as every observed site was masked before)
    leaves e^(2u) / 2, flat as u -> -inf: an improper prior under which tau collapses to 0."""
    y = np.array([0.3, -0.2, 1.1])
    ml = dp_infer.loss_from_model(scale_model, np.zeros((3, 1)), y, clip_norm=1.0)
    us = np.array([-4.0, -1.0, 0.0, 1.5])
    got = np.array([float(ml.prior_potential(jnp.array([u]))) for u in us])
    want = np.exp(2 * us) / 2 - us
    np.testing.assert_allclose(got - got[2], want - want[2], rtol=1e-5, atol=1e-5)



def test_diverged_chains_are_reported_not_silently_nan():
    """warn_if_diverged: a non-finite draw or the kernel's flag in any chain warns with the count and
    the remedy; clean draws (and a run without draws) stay silent."""
    import warnings

    from dp_infer.infer.posterior import warn_if_diverged

    theta = np.zeros((4, 10, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warn_if_diverged(theta, np.zeros((4, 10), dtype=bool))
        warn_if_diverged(None, None)
    nan = theta.copy()
    nan[2, 5:, 0] = np.nan
    with pytest.warns(RuntimeWarning, match=r"^1 of 4 chains diverged \(12% of the draws"):
        warn_if_diverged(nan, None)
    flag = np.zeros((4, 10), dtype=bool)
    flag[0, 9] = flag[3, 1:] = True
    with pytest.warns(RuntimeWarning, match=r"^2 of 4 chains diverged .* kernel='langevin'"):
        warn_if_diverged(theta, flag)


@pytest.mark.slow
def test_the_kinetic_kernel_on_a_centred_hierarchy_diverges_and_says_so():
    """Why a model's posterior mode keeps the overdamped kernel by default: on a centred 8-group
    hierarchy (tau ~ HalfNormal(1), the funnel's neck far stiffer than the prior's curvature at the
    plan's fixed points) the kinetic step, of order 1 / sqrt(M), sends a chain to non-finite values;
    the run says so. The default (overdamped) run of the same model stays finite."""
    import warnings

    from benchmarks.model_posterior import G_HIER, hier_centred, hier_data

    X, y, g = hier_data()
    kw = dict(model=hier_centred, X=X, y=y, model_kwargs={"group": g}, index_ranges={"group": G_HIER},
              target="posterior", eps=1.0, delta=1e-5, clip_norm=2.0, ess=400, seed=0, progress_bar=False)
    with pytest.warns(RuntimeWarning, match="chains diverged"):
        bad = dp_infer.fit(kernel="underdamped", **kw)
    assert not np.all(np.isfinite(bad.theta))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        good = dp_infer.fit(**kw)
    assert np.all(np.isfinite(good.theta)) and good.plan.kernel == "langevin"
