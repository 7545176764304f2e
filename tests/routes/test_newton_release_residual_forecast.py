"""The intervals' width forecast of a regression loss with a declared residual scale (issue 37, part 4): the scores'
mean square of Gaussian residuals against its closed form, the width against the closed form it enters, and the
refusals, before anything is planned."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dp_infer import losses
from dp_infer.domains import L2Ball
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.routes.forecast import forecast_posterior
from dp_infer.routes.newton_release import (DEFAULT_INTERVAL_SHARE, PUBLIC_INTERVAL_SHARE, PUBLIC_SCHEDULE,
                                            RHO_FACTOR, SCHEDULE, interval_width_forecast,
                                            residual_scores_mean_square)


def _huber_closed_form(sigma: float, delta: float) -> float:
    """E[min(r^2, delta^2)] for r ~ N(0, sigma^2): the clipped residual's second moment, c = delta / sigma."""
    c = delta / sigma
    return sigma * sigma * ((2 * norm.cdf(c) - 1) - 2 * c * norm.pdf(c)) + 2 * delta * delta * norm.sf(c)


@pytest.mark.parametrize("sigma,delta", [(0.1, 1.0), (0.387, 1.0), (1.0, 1.0), (3.0, 1.0), (0.8, 2.5)])
def test_huber_scores_mean_square_is_the_clipped_gaussian_second_moment(sigma, delta):
    got = residual_scores_mean_square(losses.huber(delta, row_norm=1.0), sigma)
    assert got == pytest.approx(_huber_closed_form(sigma, delta), rel=1e-6)  # the grid's error is about 1e-7
    assert got <= min(sigma * sigma, delta * delta) * (1 + 1e-9)  # the clip keeps it under both limits


def test_the_squared_losss_scores_mean_square_is_the_residual_variance():
    loss = losses.squared(2.0, L2Ball(3, 1.0), row_norm=1.0)
    assert residual_scores_mean_square(loss, 0.7) == pytest.approx(0.49, rel=1e-10)


def test_the_width_closed_form_reads_the_link_bound_and_the_scores_mean_square():
    # sqrt(1 + 4 d RHO_FACTOR^2 G^2 / (n mu_g^2 j)), mu_g^2 = share * (SCHEDULE's last gradient share) * mu^2
    n, d, mu, share, G, j = 5000, 5, gdp_mu(1.0, 1e-5), 0.7, 2.5, 0.3
    last = dict(SCHEDULE[-1])["gradient"]
    want = math.sqrt(1 + 4 * d * RHO_FACTOR ** 2 * G ** 2 / (n * share * last * mu * mu * j))
    got = interval_width_forecast(n, d, mu, typical_curvature=0.5, share=share, link_bound=G, scores_mean_square=j)
    assert got == pytest.approx(want, rel=1e-12)
    # without a scores' mean square the typical curvature stands in, at the unit link bound by default
    plain = interval_width_forecast(n, d, mu, typical_curvature=0.5, share=share)
    assert plain == pytest.approx(math.sqrt(1 + 4 * d * RHO_FACTOR ** 2 / (n * share * last * mu * mu * 0.5)),
                                  rel=1e-12)
    with pytest.raises(ValueError, match="scores_mean_square"):
        interval_width_forecast(n, d, mu, typical_curvature=0.5, scores_mean_square=0.0)


def test_forecast_posterior_uses_the_declared_residual_scale_for_the_width():
    loss = losses.huber(1.0, row_norm=1.0)
    kw = dict(eps=1.0, delta=1e-5, prior_precision=0.01)
    plain = forecast_posterior(loss, 5000, 5, **kw)
    small = forecast_posterior(loss, 5000, 5, residual_scale=0.387, **kw)
    large = forecast_posterior(loss, 5000, 5, residual_scale=2.0, **kw)
    share = plain.intervals.split("of mu^2")[0]
    assert "70%" in share  # the default release share this closed form is checked at
    last = dict(SCHEDULE[-1])["gradient"]
    mu = gdp_mu(1.0, 1e-5)
    j = _huber_closed_form(0.387, 1.0)
    want = math.sqrt(1 + 4 * 5 * RHO_FACTOR ** 2 / (5000 * 0.7 * last * mu * mu * j))
    assert small.interval_width == pytest.approx(want, rel=1e-6)
    assert "residual_scale = 0.387" in small.intervals
    # small residuals next to the threshold carry little sampling error, so the noise weighs more: wider than the
    # typical curvature's stand-in (kappa_P = 1/2) says; residuals beyond the threshold: narrower
    assert small.interval_width > 1.2 * plain.interval_width and large.interval_width < plain.interval_width
    assert small.beta == plain.beta  # the scale is read by the width's forecast only, never by the plan


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "abc", [0.3]])
def test_a_bad_residual_scale_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=r"residual_scale must be a number in \(0, inf\)"):
        forecast_posterior(losses.huber(1.0, row_norm=1.0), 5000, 5, eps=1.0, delta=1e-5, prior_precision=0.01,
                           residual_scale=bad)


def test_a_residual_scale_for_a_classification_loss_is_refused_by_name():
    with pytest.raises(ValueError, match=r"residual_scale applies to a regression loss \(huber, squared\), got "
                                         "logistic: leave residual_scale=None"):
        forecast_posterior(losses.logistic(row_norm=1.0), 5000, 5, eps=1.0, delta=1e-5, prior_precision=0.01,
                           residual_scale=0.5)
    assert np.isfinite(forecast_posterior(losses.logistic(row_norm=1.0), 5000, 5, eps=1.0, delta=1e-5,
                                          prior_precision=0.01).interval_width)
    with pytest.raises(ValueError, match="loss must be a dp_infer.losses.PerExampleLoss, got str"):
        residual_scores_mean_square("huber", 0.5)


def test_the_width_follows_the_weights_radius_factor_and_the_default_shares(monkeypatch):
    import dp_infer.routes.newton_release as NR

    n, d, mu = 5000, 5, gdp_mu(1.0, 1e-5)
    last, last_pub = dict(SCHEDULE[-1])["gradient"], dict(PUBLIC_SCHEDULE[-1])["gradient"]
    # no share given: the curvature source's default share (DEFAULT_INTERVAL_SHARE, PUBLIC_INTERVAL_SHARE)
    assert interval_width_forecast(n, d, mu, typical_curvature=0.5) == pytest.approx(
        math.sqrt(1 + 4 * d / (n * DEFAULT_INTERVAL_SHARE * last * mu * mu * 0.5)), rel=1e-12)
    assert interval_width_forecast(n, d, mu, typical_curvature=0.5, curvature="public") == pytest.approx(
        math.sqrt(1 + 4 * d / (n * PUBLIC_INTERVAL_SHARE * last_pub * mu * mu * 0.5)), rel=1e-12)
    # the radius is RHO_FACTOR times the rows' root mean square norm: the noise's sd scales with it
    monkeypatch.setattr(NR, "RHO_FACTOR", 2.0)
    assert interval_width_forecast(n, d, mu, typical_curvature=0.5, share=0.7) == pytest.approx(
        math.sqrt(1 + 4 * d * 4.0 / (n * 0.7 * last * mu * mu * 0.5)), rel=1e-12)
