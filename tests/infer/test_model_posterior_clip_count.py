"""The posterior mode releases the private count of the clipped rows (issue 41, friction point 8), as the
estimate mode does: ``fit(model=..., target="posterior", clip_norm=...)`` and a clipped loss's
``fit(loss, target="posterior")`` keep it in ``run.clipped_rows``, its Gaussian part composed into the
plan's event (the charge and the report at exactly the target), through ``extend()`` and a saved file.

Oracles: the closed-form GDP trade-off (delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),
solved here with scipy, independent of the library's conversions), dp-accounting's PLD composition of the
run's part with a Gaussian mechanism of noise 1 / mu_count, the plan made with no count at the run's share,
the exact count of the clipped rows computed by hand (the whitened gradient of a logistic likelihood).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from scipy import optimize, stats

import dp_infer
from dp_infer import losses
from dp_infer.infer.fit_model import prepare_model
from dp_infer.infer.model_posterior import fit_model_posterior
from dp_infer.infer.model_posterior_plan import plan_model_posterior
from dp_infer.model.clipping import DEFAULT_COUNT_SHARE
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import GdpEvent
from dp_infer.privacy.ledger import Ledger
from dp_infer.privacy.float32_margin import FLOAT32_GRADIENT_MARGIN

EPS, DELTA, C, S = 1.0, 1e-5, 0.5, 2.0  # S: the declared prior scale (whitening), so grad_phi = S grad_theta
RUN = dict(target="posterior", eps=EPS, delta=DELTA, clip_norm=C, prior_scales=S, ess=8, num_draws=20,
           progress_bar=False)


def logreg(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, S).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)


def _data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ np.array([1.5, -1.0])))).astype(float)
    return X, y


def _gdp_eps(mu: float, delta: float) -> float:
    """The closed-form mu-GDP curve inverted at delta (Dong, Roth and Su), by scipy's root finder."""
    f = lambda e: stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2) - delta
    return optimize.brentq(f, 0.0, 50.0, xtol=1e-13)


def _gdp_mu(eps: float, delta: float) -> float:
    return optimize.brentq(lambda m: _gdp_eps(m, delta) - eps, 1e-2, 5.0, xtol=1e-13)


def _ledger(tmp_path) -> Ledger:
    led = Ledger(tmp_path / "ledger.sqlite")
    led.register_dataset("d", eps_budget=10.0, delta_budget=DELTA)  # spent eps is read at DELTA
    return led


def _plan_without_count(X, y, eps, interval_share):
    ml = prepare_model(logreg, X, y, C, None, None, None, None, "X", "y")[0]
    return plan_model_posterior(ml, len(y), eps=eps, delta=DELTA, clip_norm=C, prior_scales_=S, ess=8,
                                num_chains=4, num_draws=20, interval_share=interval_share)[0]


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    X, y = _data()
    led = _ledger(tmp_path_factory.mktemp("count"))
    with pytest.warns(UserWarning, match=r"the clip .* is active on about"):
        run = dp_infer.fit(model=logreg, X=X, y=y, seed=1, ledger=led, dataset_id="d", **RUN)
    return run, led, X, y


def test_the_count_is_released_and_its_part_composes_to_the_target(counted):
    run, led, X, y = counted
    c = run.clipped_rows
    assert c is not None and c["n"] == len(y) and c["clip_norm"] == C
    mu = _gdp_mu(EPS, DELTA)
    mu_count = math.sqrt(DEFAULT_COUNT_SHARE) * mu
    assert c["mu"] == pytest.approx(mu_count, rel=1e-8) and c["noise_sd"] == pytest.approx(1 / mu_count, rel=1e-8)
    assert run.report()["clipped_rows"] == {k: c[k] for k in ("at", "clip_norm", "mu", "noise_sd")}
    assert "released (charged, Gaussian-DP mu" in run.summary()
    # the run is the plan made without a count at the rest of the target (sqrt(1 - share) mu) ...
    eps_run = _gdp_eps(math.sqrt(1 - DEFAULT_COUNT_SHARE) * mu, DELTA)
    alone = _plan_without_count(X, y, eps_run, run.plan.posterior.interval_share)
    assert run.plan.beta == pytest.approx(alone.beta, rel=1e-9)
    assert run.plan.posterior.mu_path == pytest.approx(alone.posterior.mu_path, rel=1e-9)
    # ... with the count appended as one more part: the total is the asked eps at the asked delta
    parts = run.plan.event.metadata["parts"]
    assert [p["label"] for p in parts][-1] == "clipped_row_count" and parts[-1]["mu"] == pytest.approx(c["mu"])
    assert [p["label"] for p in parts[:-1]] == [p["label"] for p in alone.event.metadata["parts"]]
    assert run.plan.event.mu == pytest.approx(math.hypot(alone.event.mu, mu_count), rel=1e-12)
    rep = run.report()
    assert rep["eps_spent"] == pytest.approx(EPS, abs=1e-6) and rep["delta"] == DELTA and run.plan.eps == EPS
    assert _gdp_eps(run.plan.event.mu, DELTA) == pytest.approx(rep["eps_spent"], abs=1e-6)
    lib = Accountant([GdpEvent(mu=alone.event.mu), GdpEvent(mu=mu_count)]).get_epsilon(DELTA)
    assert lib == pytest.approx(rep["eps_spent"], abs=1e-6)
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    pld = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(dp_accounting.GaussianDpEvent(1 / alone.event.mu))
    pld.compose(dp_accounting.GaussianDpEvent(1 / mu_count))
    assert pld.get_epsilon(DELTA) == pytest.approx(EPS, abs=2e-3)  # PLD's pessimistic discretisation
    # the ledger was charged exactly the report's event, once
    (charge,) = led.history("d")
    assert charge["event"]["mu"] == pytest.approx(run.plan.event.mu, rel=1e-12)
    assert led.spent("d")["eps"] == pytest.approx(rep["eps_spent"], abs=1e-9)


def test_the_noisy_count_is_near_the_exact_count_of_clipped_rows(counted):
    run, _, X, y = counted
    c = run.clipped_rows
    w = np.asarray(run.get_samples()["w"]).mean(axis=0)  # the released posterior mean
    assert np.allclose(w, run.posterior_mean())
    # the clip acts on the whitened latents phi = w / S: grad_phi = S (sigmoid(x.w) - y) x
    norms = S * np.abs(1 / (1 + np.exp(-X @ w)) - y) * np.linalg.norm(X, axis=1)
    exact = int(np.sum(norms > C))
    assert 0.1 * len(y) < exact < len(y)  # the count is informative here (and the warning was right)
    assert abs(c["noisy_count"] - exact) < 5 * c["noise_sd"]
    assert "warning" in c


def test_neighbouring_datasets_give_identical_plans_and_charges(counted):
    run, _, X, y = counted
    X2, y2 = X.copy(), y.copy()
    X2[0], y2[0] = [8.0, -8.0], 1.0 - y2[0]  # one row replaced by an extreme one
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        other = dp_infer.fit(model=logreg, X=X2, y=y2, seed=2, **RUN)
    assert other.plan.as_dict() == run.plan.as_dict()
    assert other.report()["clipped_rows"] == run.report()["clipped_rows"]


def test_an_invalid_share_is_refused_by_name_before_anything_is_charged(tmp_path):
    X, y = _data(n=50)
    led = _ledger(tmp_path)
    for bad in (1.5, -0.1, 1.0, float("nan"), True, "0.1"):
        for fit in (lambda: dp_infer.fit(model=logreg, X=X, y=y, clip_count_share=bad, ledger=led, dataset_id="d",
                                         **RUN),
                    lambda: fit_model_posterior(logreg, X, y, eps=EPS, delta=DELTA, clip_count_share=bad, ledger=led,
                                                dataset_id="d", progress_bar=False)):
            with pytest.raises(ValueError, match=r"clip_count_share must lie in \[0, 1\)") as e:
                fit()
            assert "\n" not in str(e.value)
    assert led.history("d") == []


@pytest.mark.filterwarnings("ignore:the chains did not mix")  # ess=8 in 20 draws: a tiny run, mixed or not
def test_share_zero_makes_no_count_says_why_and_plans_at_the_full_target(tmp_path):
    X, y = _data()
    run = dp_infer.fit(model=logreg, X=X, y=y, seed=1, clip_count_share=0, **RUN)
    assert run.clipped_rows is None and "clipped_rows" not in run.report()
    assert "clip_count_share=0" in run.report()["clipped_rows_skipped"]
    alone = _plan_without_count(X, y, EPS, run.plan.posterior.interval_share)
    assert run.plan.as_dict() == alone.as_dict()
    assert "clipped_row_count" not in run.plan.event.label
    back = dp_infer.PrivateRun.load(run.save(tmp_path / "r.zip"), model=logreg)
    assert back.clipped_rows is None and back.report()["clipped_rows_skipped"] == run.report()["clipped_rows_skipped"]


@pytest.mark.filterwarnings("ignore:the chains did not mix")
def test_save_load_and_extend_keep_the_count(tmp_path):
    """With every release of the posterior mode (the Fisher metric's second moment, re-planned after the
    charge, and the interval release) the count stays the last part: in the re-made plan the run reports,
    in a saved file and through extend(), whose path part is re-made."""
    X, y = _data()
    led = _ledger(tmp_path)
    with pytest.warns(UserWarning, match="is active on about"):
        run = dp_infer.fit(model=logreg, X=X, y=y, seed=3, ledger=led, dataset_id="d", preconditioner="fisher",
                           interval_share=0.1, **RUN)
    labels = [p["label"].split(" ")[0] for p in run.plan.event.metadata["parts"]]
    assert len(labels) == 4 and labels[0].endswith("langevin_path") and labels[-1] == "clipped_row_count", labels
    assert run.report()["eps_spent"] == pytest.approx(EPS, abs=1e-6)
    assert led.spent("d")["eps"] == pytest.approx(run.report()["eps_spent"], abs=1e-9)
    c = dict(run.clipped_rows)
    back = dp_infer.PrivateRun.load(run.save(tmp_path / "r.zip"), model=logreg)
    assert back.clipped_rows == c and back.report()["clipped_rows"] == run.report()["clipped_rows"]
    assert back.report()["eps_spent"] == pytest.approx(run.report()["eps_spent"], rel=1e-12)
    run.extend(num_steps=run.plan.thinning * 5, ledger=led, dataset_id="d")
    rep = run.report()
    assert run.clipped_rows == c and rep["clipped_rows"] == {k: c[k] for k in ("at", "clip_norm", "mu", "noise_sd")}
    parts = run.plan.event.metadata["parts"]
    assert parts[-1]["label"] == "clipped_row_count" and parts[-1]["mu"] == pytest.approx(c["mu"])
    assert run.plan.event.mu == pytest.approx(math.sqrt(sum(p["mu"] ** 2 for p in parts)), rel=1e-12)
    spent = led.spent("d")["eps"]
    assert rep["eps_spent"] > EPS and rep["eps_spent"] >= spent - 1e-6  # never under-reported
    assert rep["eps_spent"] == pytest.approx(spent, rel=1e-6)


def _example(theta, x, y):
    z = jnp.dot(theta, x)
    return jnp.logaddexp(0.0, z) - y * z


def test_a_clipped_loss_in_the_posterior_mode_gets_the_count_too(tmp_path):
    """fit(clipped_loss, target='posterior'): the loss's own clip runs (no metric clip: it is not a GLM
    loss with a clipped link), so the rows it touches are counted as in the estimate mode."""
    X, y = _data()
    loss = losses.clipped_loss(_example, 0.5, smoothness=1.0)
    led = _ledger(tmp_path)
    kw = dict(target="posterior", eps=EPS, delta=DELTA, prior_precision=1.0, preconditioner="prior", curvature=1.0,
              ess=8, num_draws=20, seed=1, progress_bar=False)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        run = dp_infer.fit(loss, X, y, ledger=led, dataset_id="d", **kw)
        off = dp_infer.fit(loss, X, y, clip_count_share=0, **kw)
    # the loss's clip is the one run (and the float32 margin on it)
    assert run.plan.sensitivity == pytest.approx(2 * 0.5 / len(y) * (1 + FLOAT32_GRADIENT_MARGIN), rel=1e-12)
    c = run.clipped_rows
    mu_count = math.sqrt(DEFAULT_COUNT_SHARE) * _gdp_mu(EPS, DELTA)
    assert c["mu"] == pytest.approx(mu_count, rel=1e-8) and c["noise_sd"] == pytest.approx(1 / mu_count, rel=1e-8)
    assert run.report()["eps_spent"] == pytest.approx(EPS, abs=1e-6)
    assert led.history("d")[0]["event"]["mu"] == pytest.approx(run.plan.event.mu, rel=1e-12)
    assert run.plan.event.metadata["parts"][-1]["label"] == "clipped_row_count"
    theta = run.posterior_mean()
    exact = int(np.sum(np.abs(1 / (1 + np.exp(-X @ theta)) - y) * np.linalg.norm(X, axis=1) > 0.5))
    assert abs(c["noisy_count"] - exact) < 5 * c["noise_sd"]
    assert off.clipped_rows is None and "clip_count_share=0" in off.report()["clipped_rows_skipped"]
    assert off.plan.event.mu == pytest.approx(_gdp_mu(EPS, DELTA), rel=1e-6)
    with pytest.raises(ValueError, match=r"clip_count_share must lie in \[0, 1\)"):
        dp_infer.fit(loss, X, y, clip_count_share=1.5, ledger=led, dataset_id="d", **kw)
    assert len(led.history("d")) == 1
    # extend(): the path part is re-made, the count's part stays, and the report never under-states the ledger
    run.extend(num_steps=run.plan.thinning * 5, ledger=led, dataset_id="d")
    parts = run.plan.event.metadata["parts"]
    assert parts[-1]["label"] == "clipped_row_count" and parts[-1]["mu"] == pytest.approx(mu_count, rel=1e-8)
    assert run.plan.event.mu == pytest.approx(math.sqrt(sum(p["mu"] ** 2 for p in parts)), rel=1e-12)
    rep, spent = run.report()["eps_spent"], led.spent("d")["eps"]
    assert rep > EPS and rep == pytest.approx(spent, rel=1e-6)
