"""The adaptation windows of a clipped, adapted posterior plan (``adaptation_windows="auto"``).

Oracles: the rule written out here from public quantities (``r = beta kappa_P e / min(Lambda)``
with ``e = sd (2 sqrt(d) + sqrt(2 log(2 / 1e-6)))``, ``sd = 2 R^2 / (n mu_S)``: windows 20, 40, 80,
doubling while the last is below r, at most 7); the path accountant's closed form over the whole
time those windows make; the plan made before the release (stand-in) against the plan made after it.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from dp_infer import losses
from dp_infer.privacy import path as path_privacy
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.routes.adaptation import MAX_AUTO_WINDOWS, SETTLE_TIME
from dp_infer.routes.posterior import plan_posterior
from dp_infer.privacy.float32_margin import FLOAT32_GRADIENT_MARGIN
from dp_infer.routes.preconditioning import pending_second_moment
from dp_infer.releases.second_moment import private_second_moment

N, D, R2, LAM = 2000, 6, 6.0, 0.01  # a wide prior: the noise can mislead the metric by a lot
LOSS = losses.logistic(row_norm=math.sqrt(R2))


def _rows(seed=0, rare=True):
    """An intercept, two numeric columns and three indicator columns; ``rare``: levels in 0.5% of
    rows (like Adult's rare categories: S's eigenvalues there fall below the release's noise)."""
    rng = np.random.default_rng(seed)
    X = np.c_[np.ones(N), rng.uniform(-1, 1, size=(N, 2)),
              rng.uniform(size=(N, D - 3)) < (0.005 if rare else 0.5)].astype(float)
    return X


def _expected_windows(beta, e, s_hat=None, kappa_P=0.125):
    """The rule written out: r the largest over S_hat's eigenvalues s of
    beta kappa_P min(e, s) / (beta kappa_P (s - e)_+ + Lambda); without S_hat its supremum."""
    if s_hat is None:
        r = beta * kappa_P * e / LAM
    else:
        r = max(beta * kappa_P * min(e, max(s, 0.0)) / (beta * kappa_P * max(s - e, 0.0) + LAM) for s in s_hat)
    w = [20.0, 40.0, 80.0]
    while w[-1] < r and len(w) < 7:
        w.append(2 * w[-1])
    return w


@pytest.mark.parametrize("eps", [0.25, 4.0, 16.0])
def test_auto_windows_follow_the_rule_and_the_event_covers_them(eps):
    mu_s = math.sqrt(0.1) * gdp_mu(eps, 1e-5)
    sm = private_second_moment(_rows(), max_sq_norm=R2, mu=mu_s, key=jax.random.PRNGKey(0))
    sd = math.sqrt(2) * R2 / (N * mu_s)   # the gram's upper-triangle sensitivity sqrt(2) R^2 / n
    e = sd * (2 * math.sqrt(D) + math.sqrt(2 * math.log(2 / 1e-6)))
    assert sm.noise_norm_bound == pytest.approx(e, rel=1e-12)
    plan = plan_posterior(LOSS, N, D, eps=eps, delta=1e-5, prior_precision=LAM, second_moment=sm,
                          clip_radius=math.sqrt(D), adapt_metric=True, kernel="underdamped")
    post, ad = plan.posterior, plan.posterior.adaptation
    want = _expected_windows(plan.beta, e, np.linalg.eigvalsh(sm.matrix))
    assert ad.windows == pytest.approx([2.0 * w for w in want])  # friction 2 scales them
    assert len(ad.windows) <= MAX_AUTO_WINDOWS
    t = post.burn_in_time + sum(ad.windows) + SETTLE_TIME + post.sample_time
    clip_bound = 2 * math.sqrt(D) / (math.sqrt(plan.beta) * N) * (1 + FLOAT32_GRADIENT_MARGIN)  # and the float32 margin
    mu_path = path_privacy.path_mu(plan.beta, clip_bound, t, 2.0, 4)
    assert post.mu_path == pytest.approx(mu_path, rel=1e-12)
    assert plan.event.mu == pytest.approx(math.hypot(mu_path, mu_s), rel=1e-12)
    assert plan.event.mu <= gdp_mu(eps, 1e-5) * (1 + 1e-12)
    if eps == 0.5:
        assert len(want) == 3  # the defaults where the noise cannot mislead the metric much
    if eps == 16.0:
        assert 3 < len(want) < MAX_AUTO_WINDOWS and not post.beta_capped_at_n  # the rule is exercised


def test_declared_windows_are_kept_and_auto_costs_beta_only_through_time():
    sm = private_second_moment(_rows(), max_sq_norm=R2, mu=0.3, key=jax.random.PRNGKey(0))
    kw = dict(eps=16.0, delta=1e-5, prior_precision=LAM, second_moment=sm, clip_radius=math.sqrt(D),
              adapt_metric=True)
    auto = plan_posterior(LOSS, N, D, **kw)
    three = plan_posterior(LOSS, N, D, adaptation_windows=(20.0, 40.0, 80.0), **kw)
    assert three.posterior.adaptation.windows == (20.0, 40.0, 80.0)
    assert len(auto.posterior.adaptation.windows) > 3
    assert auto.beta < three.beta  # more windows, more time, a smaller beta at the same mu
    assert max(auto.event.mu, three.event.mu) <= gdp_mu(16.0, 1e-5) * (1 + 1e-12)


def test_the_plan_before_the_release_never_spends_less_time_than_the_plan_after_it():
    """fit_posterior charges the (eps, delta) target after planning with the stand-in, then plans
    with the release: the stand-in's windows are the supremum over every release, so the run's plan
    has at most as many (a beta at least as large, the same target met) and with the same windows
    the same beta and event."""
    for eps in (1.0, 16.0):
        mu_s = math.sqrt(0.1) * gdp_mu(eps, 1e-5)
        real = private_second_moment(_rows(rare=False), max_sq_norm=R2, mu=mu_s, key=jax.random.PRNGKey(1))
        pend = pending_second_moment(N, D, max_sq_norm=R2, mu=mu_s)
        assert pend.matrix is None and pend.noise_sd == pytest.approx(real.noise_sd, rel=1e-12)
        assert pend.noise_norm_bound == pytest.approx(real.noise_norm_bound, rel=1e-12)
        kw = dict(eps=eps, delta=1e-5, prior_precision=LAM, clip_radius=math.sqrt(D), adapt_metric=True)
        a = plan_posterior(LOSS, N, D, second_moment=pend, **kw)
        b = plan_posterior(LOSS, N, D, second_moment=real, **kw)
        wa, wb = a.posterior.adaptation.windows, b.posterior.adaptation.windows
        assert wa[:len(wb)] == wb and len(wa) >= len(wb)
        assert a.beta <= b.beta * (1 + 1e-12)
        if wa == wb:
            assert a.beta == pytest.approx(b.beta, rel=1e-12) and a.event.mu == pytest.approx(b.event.mu, rel=1e-12)
        assert max(a.event.mu, b.event.mu) <= gdp_mu(eps, 1e-5) * (1 + 1e-12)
    assert len(wa) > len(wb)  # at eps = 16 the release's eigenvalues are above its noise: fewer windows


@pytest.mark.parametrize("bad", ["fast", "", None])
def test_bad_windows_named(bad):
    with pytest.raises(ValueError, match="adaptation_windows must be 'auto' or one or more"):
        plan_posterior(LOSS, N, D, eps=1.0, delta=1e-5, prior_precision=LAM, clip_radius=2.0, adapt_metric=True,
                       adaptation_windows=bad)
