"""The posterior mode's levers: the clip in the metric (plan side), the forecast, and the plan's
independence of the private data (DESIGN invariant 10)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dp_infer import losses
from dp_infer.infer.posterior import fit_posterior
from dp_infer.losses.metric_clip import resolve_clip_radius
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.routes.forecast import forecast_posterior
from dp_infer.routes.posterior import plan_posterior
from dp_infer.privacy.float32_margin import FLOAT32_GRADIENT_MARGIN


def test_clip_sets_beta_in_closed_form():
    """With the clip binding, Delta = 2 r / (sqrt(beta) n), so mu = 2 r sqrt(beta K t / 2) / n and
    beta = mu^2 n^2 / (2 r^2 K t), whatever the second moment (here the prior's)."""
    n, d, r = 20_000, 6, 2.5
    plan = plan_posterior(losses.logistic(row_norm=3.0), n, d, eps=1.0, delta=1e-5, prior_precision=1.0,
                          clip_radius=r)
    mu = gdp_mu(1.0, 1e-5)
    f32 = 1.0 + FLOAT32_GRADIENT_MARGIN  # the planned sensitivity's float32 margin
    beta = mu ** 2 * n ** 2 / (2 * r * r * f32 ** 2 * plan.num_chains * plan.horizon)
    assert plan.beta == pytest.approx(beta, rel=1e-8)
    assert plan.sensitivity == pytest.approx(2 * r / (math.sqrt(plan.beta) * n) * f32, rel=1e-12)
    assert plan.posterior.clip_tau == pytest.approx(r / math.sqrt(plan.beta), rel=1e-12)
    assert plan.posterior.sensitivity_bound.startswith("per-example gradients clipped")
    old = plan_posterior(losses.logistic(row_norm=3.0), n, d, eps=1.0, delta=1e-5, prior_precision=1.0)
    assert plan.beta > 10 * old.beta  # the lever: a typical radius instead of the worst row's
    assert any("clipped in the preconditioner's metric" in a for a in plan.assumptions)


def test_clip_refused_for_losses_without_a_clipped_form():
    with pytest.raises(ValueError, match="clip_radius=None"):
        plan_posterior(losses.multinomial_logistic(3, row_norm=1.0), 100, 6, eps=1.0, delta=1e-5,
                       prior_precision=1.0, curvature=0.5, clip_radius=1.0)
    with pytest.raises(ValueError, match="clip_radius"):
        plan_posterior(losses.logistic(), 100, 2, eps=1.0, delta=1e-5, prior_precision=1.0, clip_radius=-1.0)
    assert resolve_clip_radius("auto", losses.logistic(), 9) == pytest.approx(3.0)
    assert resolve_clip_radius("auto", losses.multinomial_logistic(3), 9) is None
    assert resolve_clip_radius(None, losses.logistic(), 9) is None
    with pytest.raises(ValueError, match="clip_radius must be"):
        resolve_clip_radius("big", losses.logistic(), 9)


def _neighbours():
    rng = np.random.default_rng(0)
    n = 60
    X = np.column_stack([np.ones(n), rng.uniform(-1, 1, n)]) / math.sqrt(2)
    y = (rng.uniform(size=n) < 0.5).astype(float)
    X2, y2 = X.copy(), y.copy()
    X2[-1], y2[-1] = np.array([1.0, -1.0]) / math.sqrt(2), 1.0 - y[-1]  # the rarest admissible row, flipped label
    X[-1] = np.array([1.0, 1.0]) / math.sqrt(2)
    return X, y, X2, y2


@pytest.mark.parametrize("preconditioner", ["prior", pytest.param("private", marks=pytest.mark.slow)])
def test_plan_and_report_identical_on_neighbouring_datasets(preconditioner):
    """Invariant 10: neighbouring datasets (differing in the rarest admissible row) give bit-identical
    plans and reports. With the private second moment, the plan is a function of the release, so
    the release is fixed (same SecondMoment) for both datasets to isolate the planner."""
    from dp_infer.releases.second_moment import private_second_moment
    import jax

    X, y, X2, y2 = _neighbours()
    loss = losses.logistic(row_norm=1.0)
    pre = preconditioner
    if preconditioner == "private":  # one release, used for both: the plan must not see anything else
        pre = private_second_moment(X, max_sq_norm=1.0, mu=0.1, key=jax.random.PRNGKey(0))
    kw = dict(eps=1.0, delta=1e-5, prior_precision=1.0, ess=20, num_chains=2, preconditioner=pre, seed=5,
              progress_bar=False, clip_radius="auto")
    r1, r2 = fit_posterior(loss, X, y, **kw, adapt_metric=False), fit_posterior(loss, X2, y2, **kw, adapt_metric=False)
    assert r1.plan == r2.plan
    assert json.dumps(r1.plan.as_dict(), sort_keys=True, default=str) == json.dumps(r2.plan.as_dict(), sort_keys=True,
                                                                                   default=str)
    rep1, rep2 = r1.report(), r2.report()
    for rep in (rep1, rep2):
        rep["posterior"].pop("achieved")  # ArviZ checks of the released draws (post-processing)
        rep.pop("interval_release", None)  # released outputs (noisy statistics), like the draws: not the plan
        rep.pop("intervals", None)
    assert json.dumps(rep1, sort_keys=True, default=str) == json.dumps(rep2, sort_keys=True, default=str)
    assert r1.plan.posterior.clip_radius == pytest.approx(math.sqrt(2))  # "auto": sqrt(d)


def test_forecast_matches_the_run_and_warns_near_the_prior():
    X, y, _, _ = _neighbours()
    loss = losses.logistic(row_norm=1.0)
    fc = forecast_posterior(loss, X.shape[0], 2, eps=1.0, delta=1e-5, prior_precision=1.0, ess=20, num_chains=2,
                            clip_radius="auto")
    run = fit_posterior(loss, X, y, eps=1.0, delta=1e-5, prior_precision=1.0, ess=20, num_chains=2, seed=1,
                        progress_bar=False, clip_radius="auto")
    assert fc.beta == run.plan.beta  # the clip sets the sensitivity: beta does not depend on the release
    assert fc.num_steps >= run.plan.num_steps  # the public step bound holds the released noise (w.p. 1 - 1e-6)
    assert fc.close_to_prior and "WARNING" in fc.explain()  # 60 rows at eps = 1: the prior's
    big = forecast_posterior(loss, 10 ** 6, 2, eps=1.0, delta=1e-5, prior_precision=1.0, clip_radius=None)
    assert not big.close_to_prior and "WARNING" not in big.explain()
    assert big.beta_at_double_ess < big.beta
    # default: "auto"; no interval release (with it the draws get 30% of mu^2 and doubling the draws un-caps beta)
    clipped = forecast_posterior(loss, 10 ** 6, 2, eps=1.0, delta=1e-5, prior_precision=1.0, interval_share=0.0)
    assert clipped.beta == 10 ** 6 and clipped.beta_at_double_ess == 10 ** 6  # capped at n (untempered)
    assert clipped.interval_width is None and "none, interval_share=0" in clipped.intervals  # no release, no width
    assert big.interval_inflation == pytest.approx(math.sqrt(10 ** 6 / big.beta))
    with pytest.raises(ValueError, match="precond_share"):
        forecast_posterior(loss, 100, 2, eps=1.0, delta=1e-5, prior_precision=1.0, precond_share=1.5)
