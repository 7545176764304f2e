"""Clipping a model's gradients: the default from the likelihood and declared bounds, the refusal
for Poisson without a count bound, the charged private count, and the how-to's code
(docs/how-to/clipping.md) run as written."""

from __future__ import annotations

import math
import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dp_infer
from dp_infer.model.clipping import composed_event, count_part_appended, default_clip_norm, split_budget
from dp_infer.privacy.conversions import gdp_epsilon, gdp_mu
from dp_infer.privacy.events import ApproxDpEvent, GdpEvent

ROOT = Path(__file__).resolve().parents[2]


def logreg(X=None, y=None):
    b = numpyro.sample("b", dist.Normal(0.0, 2.0))
    w = numpyro.sample("w", dist.Normal(0.0, 2.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=b + X @ w), obs=y)


def normal(X=None, y=None):
    b = numpyro.sample("b", dist.Normal(0.0, 2.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Normal(b + X[:, 0], 1.0), obs=y)


def poisson(X=None, y=None):
    b = numpyro.sample("b", dist.Normal(0.0, 2.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Poisson(jnp.exp(b + X[:, 0])), obs=y)


def test_default_clip_from_the_likelihood_and_declared_bounds():
    C, why = default_clip_norm(logreg, 3)
    assert C == pytest.approx(math.sqrt(2.0)) and "assumed" in why  # |y - p| <= 1, ||(1, x)|| <= sqrt(2)
    C, why = default_clip_norm(logreg, 3, {"x_norm": 3.0})
    assert C == pytest.approx(math.sqrt(10.0)) and "declared" in why
    C, _ = default_clip_norm(poisson, 1, {"y_max": 20.0, "x_norm": 1.0})
    assert C == pytest.approx(20.0 * math.sqrt(2.0))
    with pytest.raises(ValueError, match=r"Poisson.*bounds=\{'y_max': Y\}"):
        default_clip_norm(poisson, 1)
    with pytest.warns(UserWarning, match="Normal, whose per-example gradient has no bound"):
        assert default_clip_norm(normal, 1)[0] == 1.0
    with pytest.raises(ValueError, match="bounds: unknown key"):
        default_clip_norm(logreg, 3, {"y_maks": 3})


def test_poisson_without_a_bound_is_refused_before_the_ledger_is_charged(tmp_path):
    from dp_infer.privacy.ledger import Ledger

    X, y = np.zeros((20, 1)), np.ones(20)
    led = Ledger(tmp_path / "l.db")
    led.register_dataset("d", 5.0, 1e-5)
    with pytest.raises(ValueError, match="Poisson"):
        dp_infer.fit(model=poisson, X=X, y=y, eps=1.0, delta=1e-5, ledger=led, dataset_id="d", progress_bar=False)
    assert led.spent("d")["n_runs"] == 0


def test_the_count_and_the_run_compose_to_the_target():
    eps, delta, share = 1.0, 1e-5, 0.05
    eps_run, mu_c = split_budget(eps, delta, share)
    mu = gdp_mu(eps, delta)
    assert gdp_mu(eps_run, delta) ** 2 + mu_c ** 2 == pytest.approx(mu ** 2, rel=1e-9)
    ev = composed_event(GdpEvent(mu=gdp_mu(eps_run, delta), label="run"), mu_c)
    assert gdp_epsilon(ev.mu, delta) == pytest.approx(eps, rel=1e-9)
    assert split_budget(eps, delta, 0.0) == (eps, 0.0)
    with pytest.raises(ValueError, match="clip_count_share"):
        split_budget(eps, delta, 1.0)


@pytest.mark.slow
def test_a_fit_reports_the_charged_count_and_spends_exactly_the_target():
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(400, 1))
    y = rng.poisson(np.exp(1.0 + 2.0 * X[:, 0])).astype(float)
    with pytest.warns(UserWarning, match="active on about"):
        run = dp_infer.fit(model=poisson, X=X, y=y, eps=2.0, delta=1e-5, clip_norm=0.5, seed=2, horizon=0.5,
                           progress_bar=False)
    rep = run.report()
    assert rep["eps_spent"] == pytest.approx(2.0, rel=1e-6)  # run + count = the target, not more
    assert rep["clipped_rows"]["noise_sd"] == pytest.approx(1.0 / rep["clipped_rows"]["mu"])
    # exact count at the released mean, recomputed here: the model has one latent (b), d eta / d b = 1,
    # so a row is clipped when |y - rate| > 0.5
    b = float(run.posterior_mean()[0])
    exact = int(np.sum(np.abs(y - np.exp(b + X[:, 0])) > 0.5))
    c = run.clipped_rows
    # the noisy count is within 5 noise sd of the exact one (fails with probability < 1e-6)
    assert abs(c["noisy_count"] - exact) < 5 * c["noise_sd"]
    # a run without the count spends the same target on the chain alone
    run0 = dp_infer.fit(model=poisson, X=X, y=y, eps=2.0, delta=1e-5, clip_norm=0.5, seed=2, horizon=0.5,
                        progress_bar=False, clip_count_share=0.0)
    assert run0.clipped_rows is None and run0.plan.beta > run.plan.beta


@pytest.mark.slow
def test_the_how_to_runs_and_shows_the_bias(capsys):
    text = (ROOT / "docs" / "how-to" / "clipping.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(code) == 1
    ns: dict = {}
    exec(compile(code[0], "docs/how-to/clipping.md", "exec"), ns)  # noqa: S102 - our own docs page
    out = capsys.readouterr().out
    assert "refused:" in out
    fits, ref = ns["fits"], ns["ref"]
    bad, good, safe = fits["clip 1"], fits["clip 6"], fits["declared y_max=40"]
    # the bad clip: most rows clipped (private count, 5 sd margin) and the intercept off NUTS's by more
    # than 0.05 (NUTS's posterior sd of b is about 0.02 at n = 1000)
    assert bad.clipped_rows["noisy_count"] - 5 * bad.clipped_rows["noise_sd"] > 0.5 * 1000
    assert abs(bad.get_samples()["b"].mean() - ref["b"]) > 0.05
    # the declared bound: nothing clipped (within 5 noise sd), and a larger sensitivity (smaller beta)
    assert safe.clipped_rows["noisy_count"] < 5 * safe.clipped_rows["noise_sd"]
    assert safe.plan.beta < good.plan.beta < bad.plan.beta
    # the typical-size clip: under a tenth of the rows clipped, draws centred on NUTS's (4 of their sd)
    assert good.clipped_rows["noisy_count"] < 0.1 * 1000
    for run in (good, safe):
        s = run.get_samples()["b"]
        assert abs(s.mean() - ref["b"]) < 4 * s.std()


@pytest.mark.parametrize("mu_count", [0.3, 1.0, 2.5])
def test_the_count_composes_into_the_run_event_keeping_what_it_carries(mu_count):
    # GDP composes by mu^2; the run's tv_error (distance of the mechanism run from the ideal one) and assumptions
    # are kept, the count's part is recorded by name; mu_count = 1 is a count like any other (not a "no count")
    run = GdpEvent(mu=0.8, label="run", assumptions=("a",), tv_error=1e-7)
    for ev in (composed_event(run, mu_count), count_part_appended(run, mu_count)):  # no parts: composed
        assert ev.mu == pytest.approx(math.hypot(0.8, mu_count), rel=1e-12)
        assert ev.tv_error == 1e-7 and ev.label == "run + clipped_row_count"
        assert ev.assumptions[0] == "a" and "replace-one sensitivity 1" in ev.assumptions[-1]
        parts = ev.metadata["parts"]
        assert [p["label"] for p in parts] == ["run", "clipped_row_count"]
        assert parts[1]["mu"] == pytest.approx(mu_count)
    # a run event with parts (the posterior mode's): the count is appended flat, the run's metadata kept
    flat = GdpEvent(mu=0.8, label="posterior", assumptions=("b",), tv_error=2e-7,
                    metadata={"parts": [{"label": "path", "mu": 0.6}, {"label": "sm", "mu": math.sqrt(0.28)}], "n": 9})
    ev = count_part_appended(flat, mu_count)
    assert ev.mu == pytest.approx(math.hypot(0.8, mu_count), rel=1e-12) and ev.tv_error == 2e-7
    assert [p["label"] for p in ev.metadata["parts"]] == ["path", "sm", "clipped_row_count"] and ev.metadata["n"] == 9
    assert ev.label == "posterior + clipped_row_count" and ev.assumptions[0] == "b"
    assert "replace-one sensitivity 1" in ev.assumptions[-1]


def test_no_count_leaves_the_event_alone_and_a_non_gdp_event_is_refused():
    run = GdpEvent(mu=0.8, label="run")
    assert composed_event(run, 0.0) is run and count_part_appended(run, 0.0) is run
    pure = ApproxDpEvent(epsilon=1.0, delta=1e-6, label="pure route")
    with pytest.raises(ValueError, match=r"^the clipped-row count composes with a Gaussian-DP run event only \(the "
                                         r"trajectory route\); pass clip_count_share=0 for this route$"):
        composed_event(pure, 0.1)


def binomial(X=None, y=None):
    b = numpyro.sample("b", dist.Normal(0.0, 2.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Binomial(total_count=5, logits=b + X[:, 0]), obs=y)


def categorical(X=None, y=None):
    b = numpyro.sample("b", dist.Normal(0.0, 2.0).expand([3]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Categorical(logits=b + X[:, :1]), obs=y)


def bernoulli_event(X=None, y=None):  # the likelihood wrapped (Independent): its base family decides
    b = numpyro.sample("b", dist.Normal(0.0, 2.0))
    numpyro.sample("y", dist.Bernoulli(logits=b + X[:, 0]).to_event(1), obs=y)


@pytest.mark.parametrize("model,score", [(binomial, 5.0), (categorical, math.sqrt(2.0)), (bernoulli_event, 1.0)])
def test_the_default_clip_reads_each_familys_score_bound(model, score):
    # |score| <= total_count (Binomial), ||e_y - p|| <= sqrt(2) (Categorical), 1 (Bernoulli, also when wrapped by
    # to_event): clip_norm = s_max sqrt(1 + R^2) with R = 2 declared
    C, why = default_clip_norm(model, 1, {"x_norm": 2.0})
    assert C == pytest.approx(score * math.sqrt(5.0), rel=1e-12), why
    assert f"|score| <= {score:g}" in why


def test_bad_bounds_and_shares_are_named():
    with pytest.raises(ValueError, match=r"^bounds must be a dict with keys among \('x_norm', 'y_max'\), got list$"):
        default_clip_norm(logreg, 3, [1.0])
    with pytest.raises(ValueError, match=r"bounds\['x_norm'\]"):
        default_clip_norm(logreg, 3, {"x_norm": -1.0})
    from dp_infer.model.clipping import check_count_share

    for bad in (1.0, 1, 1.5, -0.1, True, "0.1"):
        with pytest.raises(ValueError, match=r"^clip_count_share must lie in \[0, 1\), got "):
            check_count_share(bad)
    assert check_count_share(0) == 0.0 and check_count_share(0.05) == 0.05


def test_the_counts_noise_is_the_float64_gaussian_of_its_key_at_sd_1_over_mu():
    # the noise-scale oracle: with a known key the released count is exactly the exact count plus (1 / mu) times
    # the package's 53-bit Gaussian of that key (float64), so its scale, sign and precision are pinned
    import jax

    from dp_infer.model.clipping import private_example_clip_count
    from dp_infer.randomness import gaussian_noise

    def example(theta, x, y):
        z = jnp.dot(theta, x)
        return jnp.logaddexp(0.0, z) - y * z

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 2)) * 2.0
    y = (rng.random(300) < 0.5).astype(float)
    theta = np.array([1.0, -0.5])
    g = (1 / (1 + np.exp(-X @ theta)) - y)[:, None] * X
    exact = int(np.sum(np.linalg.norm(g, axis=1) > 1.0))
    key = jax.random.key(17)
    c = private_example_clip_count(example, theta, X, y, 1.0, 0.25, key)
    with jax.enable_x64(True):
        z = float(gaussian_noise(key, (), jnp.float64))
    assert c["noisy_count"] == round(exact + 4.0 * z, 1) and c["noise_sd"] == 4.0 and c["n"] == 300
    assert abs(z) > 0.05  # the sign of the noise shows
    z32 = float(gaussian_noise(key, (), jnp.float32))
    assert round(exact + 4.0 * z32, 1) != c["noisy_count"]  # the float32 draw differs: the test tells them apart


def test_the_counts_share_and_the_warnings_threshold():
    # share = noisy / n held to [0, 1]; the warning fires exactly when share - 2 sd / n > 0.1 (the count says the
    # clip touches more than a tenth of the rows beyond two noise sds), and says the share in percent
    from dp_infer.model.clipping import clip_warning

    base = {"clip_norm": 0.5, "noise_sd": 10.0, "n": 1000, "noisy_count": 0.0}
    assert clip_warning({**base, "share": 0.12}) is None            # 0.12 - 0.02 = 0.10: not above
    assert clip_warning({**base, "share": 0.1201}) is not None       # just above
    assert clip_warning({**base, "share": 0.1199}) is None
    assert "active on about 13% of the rows" in clip_warning({**base, "share": 0.13})
    import jax

    from dp_infer.model.clipping import private_example_clip_count

    def example(theta, x, y):
        return 0.5 * (jnp.dot(theta, x) - y) ** 2

    X = np.ones((50, 1))
    y = np.where(np.arange(50) < 20, 10.0, 0.0)  # the first 20 rows' gradients (norm 10) are clipped, the rest 0
    c = private_example_clip_count(example, np.zeros(1), X, y, 1.0, 50.0, jax.random.key(1))
    assert abs(c["noisy_count"] - 20) < 0.2 and c["share"] == pytest.approx(0.4, abs=0.005)  # noise sd 0.02 rows
    none = private_example_clip_count(example, np.zeros(1), X, np.zeros(50), 1.0, 50.0, jax.random.key(2))
    every = private_example_clip_count(example, np.zeros(1), X, np.full(50, 10.0), 1.0, 50.0, jax.random.key(3))
    assert 0.0 <= none["share"] < 0.002 and 0.998 < every["share"] <= 1.0  # held to [0, 1] either side
