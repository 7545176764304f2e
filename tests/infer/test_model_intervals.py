"""Intervals for a NumPyro model's posterior-mode run (issue 37, part 1): the score release
(dp_infer.model.score_release) reserved in the plan, charged with the run, read by run.intervals().

Oracles: the GDP composition of the plan's parts (and dp-accounting's PLD accountant on them); the
ledger's recorded event; the non-private zero of the mean clipped score (a release at mu = 1e7 from
the same start) against which the private centres' noise is checked for calibration; simulated
logistic and hierarchical data with known truth.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dp_infer
from dp_infer.infer.model_posterior_plan import plan_model_posterior
from dp_infer.diagnostics.model_prior import model_released_interval
from dp_infer.model.clipping import DEFAULT_COUNT_SHARE
from dp_infer.model.score_release import release_score_statistics
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.privacy.ledger import Ledger

DELTA = 1e-5
TRUTH = np.array([1.0, -0.5, 0.25])


def logreg(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 2.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)


def hier(X=None, y=None, group=None, num_groups=3):
    """Logistic group intercepts, centred, with a half-normal scale; the group index is a per-row keyword."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    with numpyro.plate("groups", num_groups):
        a = numpyro.sample("a", dist.Normal(mu, tau))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=a[group] + w * X[:, 0]), obs=y)


def _logit_data(seed, n, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    truth = TRUTH[:d]
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ truth))).astype(float)
    return X, y, truth


# ---------------------------------------------------------------------------------- (1) the budget
def test_the_plan_reserves_the_release_and_interval_share_0_is_the_old_plan():
    """The release's GDP part is in the plan's event before any data is read; the parts compose to the
    event's mu (GDP: mu^2 adds), which is at most the target's; dp-accounting's PLD accountant on the
    parts gives at most the target eps (its discretisation is pessimistic: 1% slack). interval_share=0
    is the plan made without the option, field for field."""
    X, y, _ = _logit_data(0, 2000)
    ml = dp_infer.loss_from_model(logreg, X, y, clip_norm=4.0)
    kw = dict(eps=1.0, delta=DELTA, clip_norm=4.0, ess=50)
    base, _, _ = plan_model_posterior(ml, 2000, **kw)
    zero, _, _ = plan_model_posterior(ml, 2000, interval_share=0, **kw)
    assert zero.as_dict() == base.as_dict()
    assert [p["label"] for p in base.event.metadata["parts"]] == [base.event.metadata["parts"][0]["label"]]
    assert base.posterior.mu_interval == 0.0

    mu = gdp_mu(1.0, DELTA)
    plan, _, _ = plan_model_posterior(ml, 2000, interval_share=0.5, **kw)
    parts = plan.event.metadata["parts"]
    assert parts[-1]["label"].startswith("model_score_release")
    assert not any(p["label"].startswith("newton_release") for p in parts)
    assert parts[-1]["mu"] == pytest.approx(math.sqrt(0.5) * mu, rel=1e-12)
    assert plan.posterior.mu_interval == pytest.approx(math.sqrt(0.5) * mu, rel=1e-12)
    assert plan.event.mu == pytest.approx(math.sqrt(sum(p["mu"] ** 2 for p in parts)), rel=1e-12)
    assert plan.event.mu <= mu * (1 + 1e-12)
    assert plan.beta < base.beta  # the path got the rest of the budget
    # the release's own parts (statistics and their sensitivities) compose to its mu
    inner = parts[-1]["metadata"]["parts"]
    assert math.sqrt(sum(p["mu"] ** 2 for p in inner)) == pytest.approx(parts[-1]["mu"], rel=1e-12)
    assert {p["statistic"]: p["sensitivity"] for p in inner} == {"gradient": 2 * 4.0 / 2000,
                                                               "score": math.sqrt(2) * 16.0 / 2000}
    import dp_accounting

    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    for p in parts:
        acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier=1.0 / p["mu"]))
    assert acc.get_epsilon(DELTA) <= 1.0 * 1.01
    # with the Fisher preconditioner's release too: three parts, still within the target
    from dp_infer.routes.preconditioning import pending_second_moment

    pending = pending_second_moment(2000, ml.dim, max_sq_norm=16.0, mu=math.sqrt(0.1) * mu)
    fplan, _, _ = plan_model_posterior(ml, 2000, second_moment=pending, interval_share=0.5, **kw)
    fparts = fplan.event.metadata["parts"]
    assert [p["label"].split(" ")[0] for p in fparts][1:] == ["private_second_moment", "model_score_release"]
    assert fplan.event.mu == pytest.approx(math.sqrt(sum(p["mu"] ** 2 for p in fparts)), rel=1e-12)
    assert fplan.event.mu <= mu * (1 + 1e-12)


def test_the_ledger_is_charged_the_event_with_the_release_and_the_release_is_made(tmp_path):
    X, y, truth = _logit_data(1, 3000, d=2)
    led = Ledger(tmp_path / "ledger.sqlite")
    led.register_dataset("d", 10.0, 1e-4)
    run = dp_infer.fit(model=logreg, X=X, y=y, target="posterior", eps=2.0, delta=DELTA, clip_norm=4.0, ess=50,
                       num_draws=200, interval_share=0.6, seed=5, progress_bar=False, ledger=led, dataset_id="d")
    (rec,) = led.history("d")
    assert rec["event"]["mu"] == pytest.approx(run.plan.event.mu, rel=1e-12)
    labels = [p["label"] for p in rec["event"]["metadata"]["parts"]]
    # the release, then the clipped-row count (issue 41), whose share is taken out of the target first
    assert labels[-2].startswith("model_score_release") and labels[-1] == "clipped_row_count"
    rel = run.report_extras["interval_release"]
    mu_run = math.sqrt(1 - DEFAULT_COUNT_SHARE) * gdp_mu(2.0, DELTA)
    assert rel["kind"] == "model_score" and rel["mu"] == pytest.approx(math.sqrt(0.6) * mu_run)
    iv = run.intervals(0.9)
    # the release's likelihood under the model's own prior (dp_infer.diagnostics.model_prior), its estimand the release's
    assert iv.method.startswith("noise-aware posterior under the model's own prior") and "clipped score" in iv.estimand
    assert rel["model_prior_posterior"]["max_rhat"] < 1.05 and rel["model_prior_posterior"]["divergences"] == 0
    assert rel["names"] == ["w[0]", "w[1]"]
    assert all(f == "" for f in iv.flags), iv.flags
    assert np.all(iv.width_ratio > 1.0)  # the release's noise is accounted: wider than the non-private posterior
    assert np.all(np.abs(iv.centre - truth) < 4 * iv.sd)
    rep = run.report()
    assert rep["intervals"]["dim"] == 2 and "error" not in rep["intervals"]
    # the release travels with the run file: a loaded run gives the same intervals
    loaded = dp_infer.PrivateRun.load(run.save(tmp_path / "run.zip"), model=logreg)
    iv2 = loaded.intervals(0.9)
    np.testing.assert_allclose(iv2.lower, iv.lower, rtol=1e-12)
    np.testing.assert_allclose(iv2.upper, iv.upper, rtol=1e-12)
    assert "intervals" in run.to_datatree().children


def test_interval_share_0_makes_no_release_and_the_default_says_why_it_skipped():
    X, y, _ = _logit_data(2, 300, d=2)
    kw = dict(model=logreg, X=X, y=y, target="posterior", eps=1.0, delta=DELTA, clip_norm=4.0, ess=8,
              num_draws=20, seed=1, progress_bar=False)
    run0 = dp_infer.fit(interval_share=0, **kw)
    assert "interval_release" not in run0.report_extras and run0.plan.posterior.mu_interval == 0.0
    with pytest.raises(ValueError, match="no interval release"):
        run0.intervals()
    run = dp_infer.fit(**kw)  # default: n = 300, d = 2, eps = 1 forecasts a J within the noise
    why = run.report_extras["interval_release_skipped"]
    assert "signal to noise" in why and run.plan.posterior.mu_interval == 0.0
    assert run.plan.event.to_dict() == run0.plan.event.to_dict()
    with pytest.raises(ValueError, match="signal to noise"):
        run.intervals()


# -------------------------------------------------------------------- (3) refused before the charge
@pytest.mark.parametrize("share, needle", [(-0.1, "[0, 1)"), (1.0, "[0, 1)"), (1.5, "[0, 1)"), (True, "[0, 1)"),
                                           ("0.5", "[0, 1)"), (float("nan"), "[0, 1)")])
def test_bad_interval_share_is_refused_before_the_charge(tmp_path, share, needle):
    X, y, _ = _logit_data(3, 200, d=2)
    led = Ledger(tmp_path / "ledger.sqlite")
    led.register_dataset("d", 10.0, 1e-4)
    with pytest.raises(ValueError) as e:
        dp_infer.fit(model=logreg, X=X, y=y, target="posterior", eps=1.0, delta=DELTA, ess=8, num_draws=20,
                     interval_share=share, progress_bar=False, ledger=led, dataset_id="d")
    msg = str(e.value)
    assert "interval_share" in msg and needle in msg and len(msg.splitlines()) == 1, msg
    assert led.history("d") == []


def test_interval_share_with_the_fisher_preconditioner_must_leave_room_for_it(tmp_path):
    X, y, _ = _logit_data(3, 200, d=2)
    led = Ledger(tmp_path / "ledger.sqlite")
    led.register_dataset("d", 10.0, 1e-4)
    with pytest.raises(ValueError) as e:
        dp_infer.fit(model=logreg, X=X, y=y, target="posterior", eps=1.0, delta=DELTA, ess=8, num_draws=20,
                     preconditioner="fisher", precond_share=0.3, interval_share=0.7, progress_bar=False,
                     ledger=led, dataset_id="d")
    msg = str(e.value)
    assert "interval_share" in msg and "[0, 0.7)" in msg and len(msg.splitlines()) == 1, msg
    assert led.history("d") == []


# ------------------------------------------------------------------------ (2) calibration, coverage
def test_the_release_noise_is_accounted_in_the_reported_sd():
    """No sampling: the release alone, 60 keys, from a fixed public start (n = 3000, d = 2, the GDP mu
    of eps = 1 at a 0.7 share). Its centres' deviations from the non-private release's (mu = 1e7: the
    dataset's zero of the mean clipped score) over the reported sd's noise part (the reported variance
    less the non-private J^-1 / n) are about standard normal if the noise is accounted. Their sd is at
    most 1.3 (the sd of a 60-draw sd is about 0.09: 3.3 of those), and at least 0.55: the reported noise
    is conservative by design (J's noise through the step, by the delta method, and J's PSD floors;
    measured 0.81 to 0.99 over 80 keys at two key offsets), but not by 2x. Their mean is within 0.45
    (3.5 / sqrt(60))."""
    X, y, _ = _logit_data(4, 3000, d=2)
    s = np.full(2, 2.0)

    def nll(phi, x, yy):
        z = x @ (s * phi)
        return jnp.logaddexp(0.0, z) - yy * z

    start = np.array([0.8, -0.3]) / s
    kw = dict(point=start, scales=s, clip_norm=4.0, trust_covariance=np.eye(2) * 0.25, prior_mean=np.zeros(2),
              prior_sd=np.full(2, 2.0))
    ref = model_released_interval(release_score_statistics(nll, X, y, mu=1e7, key=jax.random.PRNGKey(0), **kw))
    mu = math.sqrt(0.7) * gdp_mu(1.0, DELTA)
    z = []
    for k in range(60):
        iv = model_released_interval(release_score_statistics(nll, X, y, mu=mu, key=jax.random.PRNGKey(100 + k), **kw))
        noise_sd = np.sqrt(iv.data_sd ** 2 - ref.data_sd ** 2)
        z.append((iv.data_centre - ref.data_centre) / noise_sd)
    z = np.asarray(z)
    assert np.all((0.55 < z.std(axis=0)) & (z.std(axis=0) < 1.3)), z.std(axis=0)
    assert np.all(np.abs(z.mean(axis=0)) < 0.45), z.mean(axis=0)


@pytest.mark.slow
def test_coverage_of_the_truth_on_a_logistic_model():
    """8 datasets, n = 5000, d = 3, eps = 2, clip 4 (clipped on about 1% of the rows at the estimate),
    90% intervals: the 24 pooled indicators cover at a rate within [0.70, 1.0] (binomial sd 0.061 at
    0.9 over 24; about 3 sds below, coordinates of one dataset not independent). The 20-dataset
    measurement (55 of 60, 0.92) is in docs/how-to/numpyro-model.md; 8 keep the slow tier's time."""
    hits, ratios = [], []
    for r in range(8):
        X, y, truth = _logit_data(r, 5000)
        run = dp_infer.fit(model=logreg, X=X, y=y, target="posterior", eps=2.0, delta=DELTA, clip_norm=4.0, ess=200,
                           seed=1000 + r, progress_bar=False)
        iv = run.intervals(0.9)
        hits.append((iv.lower <= truth) & (truth <= iv.upper))
        ratios.append(iv.width_ratio)
    cover = float(np.mean(hits))
    assert 0.70 <= cover <= 1.0, (cover, np.mean(hits, axis=0))
    assert 1.0 < float(np.median(ratios)) < 2.0


@pytest.mark.slow
def test_a_hierarchical_model_reports_intervals_and_its_prior_informs_mu_and_tau():
    """Centred group intercepts a_g ~ N(mu, tau), tau ~ HalfNormal(1), a logistic likelihood through a_g
    and a slope w. The likelihood's scores have no mu or tau component: under the prior's Gaussian
    stand-in (a release read without the stored posterior) those two unconstrained coordinates are the
    prior's ("prior" flags). Under the model's own prior (the run's default: NUTS over the release's
    likelihood times the exact prior, dp_infer.diagnostics.model_prior) the released a_g inform them
    through the hierarchy: mu and log tau are no longer flagged, and their sds are below 0.6 of the
    stand-in's (measured 0.45 and 0.41). a_g and w are determined by the data and within 3.3 sds of the
    truth (two-sided 0.001 each). Intervals are for the unconstrained coordinates (tau's is log tau)."""
    rng = np.random.default_rng(0)
    n = 6000
    g = rng.integers(0, 3, n)
    X = rng.normal(size=(n, 1))
    a_true, w_true = np.array([-0.8, 0.0, 0.7]), 0.8
    y = (rng.random(n) < 1 / (1 + np.exp(-(a_true[g] + w_true * X[:, 0])))).astype(float)
    run = dp_infer.fit(model=hier, X=X, y=y, target="posterior", eps=2.0, delta=DELTA, clip_norm=2.0, ess=200,
                       seed=3, model_kwargs={"group": g}, index_ranges={"group": 3}, progress_bar=False)
    rel = run.report_extras["interval_release"]
    assert rel["names"] == ["a[0]", "a[1]", "a[2]", "mu", "tau (log)", "w"]
    post = rel["model_prior_posterior"]
    assert post["max_rhat"] < 1.05 and post["divergences"] == 0, post["tried"]
    stand_in = model_released_interval({k: v for k, v in rel.items() if k != "model_prior_posterior"}, prob=0.9)
    flags = [f.split(":")[0] for f in stand_in.flags]
    assert flags[3] == "prior" and flags[4] == "prior", stand_in.flags
    iv = run.intervals(0.9)
    assert iv.flags == ("",) * 6, iv.flags
    assert np.all(iv.sd[[3, 4]] < 0.6 * stand_in.sd[[3, 4]]), (iv.sd, stand_in.sd)
    truth = np.r_[a_true, w_true]
    centre, sd = iv.centre[[0, 1, 2, 5]], iv.sd[[0, 1, 2, 5]]
    assert np.all(np.abs(centre - truth) < 3.3 * sd), (centre, sd)
    assert "the model's prior combined exactly" in iv.notes[-1]
    # x non-private: over the noise-free likelihood under the same exact prior, so privacy only widens
    # (measured 1.0-1.5; 0.9 leaves the reference run's Monte-Carlo error, about 3% on an sd)
    assert np.all(iv.width_ratio > 0.9), iv.width_ratio
