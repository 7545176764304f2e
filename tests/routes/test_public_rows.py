"""The intervals' width forecast read from public feature rows (dp_infer.routes.public_rows), before anything is
charged: against a closed form on a design where every row has the same leverage, and as the figure the plan and
forecast_posterior state."""

import math

import numpy as np
import pytest

from dp_infer import losses
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.routes.forecast import forecast_posterior
from dp_infer.routes.newton_release import PUBLIC_INTERVAL_SHARE, interval_width_forecast, newton_event
from dp_infer.routes.posterior import plan_posterior
from dp_infer.routes.public_rows import public_interval_width_forecast

D = 4


def _balanced(m: int = 4000) -> np.ndarray:
    """Rows ``+-sqrt(d) e_j``, every level and sign equally often: second moment I, and every row the same
    ``||C^T x||`` in the public metric."""
    j = np.arange(m) % D
    sign = np.where((np.arange(m) // D) % 2 == 0, 1.0, -1.0)
    X = np.zeros((m, D))
    X[np.arange(m), j] = sign * math.sqrt(D)
    return X


def test_on_equal_leverage_the_forecast_is_one_plus_4d_over_n_mu_squared():
    # logistic at theta = 0 (the prior's centre): phi'' = 1/4 and the envelope r = max(s, 1 - s) = 1/2 on every
    # row. The metric whitens H = I / 4 (the prior's 1e-9 aside): C = 2 I, ||C^T x||^2 = 4 d for every row. A
    # radius rho <= r ||C^T x|| = sqrt(d) gives every row the weight w = rho / sqrt(d), so H_w = w I and
    # J_w = w^2 I in psi; the last gradient's noise sd_g = 2 rho / (n mu_g) makes the data's variance
    # (w^2 / n + sd_g^2) / w^2 against 1 / n: width^2 = 1 + 4 d / (n mu_g^2) for every such rho (larger radii are
    # wider), mu_g the last gradient's share of the release (PUBLIC_SCHEDULE)
    loss = losses.logistic(row_norm=math.sqrt(D))
    n, mu_int = 5000, 0.25
    mu_g = newton_event(mu_int, n=n, curvature="public").metadata["parts"][-1]["mu"]
    assert mu_g == pytest.approx(math.sqrt(0.75) * mu_int, rel=1e-12)
    got = public_interval_width_forecast(loss, _balanced(), 1e-9, n, mu_int)
    assert got == pytest.approx(math.sqrt(1 + 4 * D / (n * mu_g ** 2)), rel=1e-6)
    # the closed form spreads the rows evenly at the planner's typical curvature kappa / 2 and no envelope: it
    # says sqrt(1 + 32 d / (n mu_g^2)) here, 8x the noise share
    spread = interval_width_forecast(n, D, mu_int, typical_curvature=0.125, share=1.0, curvature="public")
    assert spread == pytest.approx(math.sqrt(1 + 32 * D / (n * mu_g ** 2)), rel=1e-12)
    assert got < spread


def test_at_a_point_where_the_rows_are_confident_the_forecast_is_wider():
    # away from 0 a logistic row's curvature s(1 - s) falls faster than its envelope: less information per unit of
    # the weights' radius, so the same release is wider against the non-private posterior
    loss = losses.logistic(row_norm=math.sqrt(D))
    at0 = public_interval_width_forecast(loss, _balanced(), 0.01, 5000, 0.25)
    far = public_interval_width_forecast(loss, _balanced(), 0.01, 5000, 0.25, point=np.full(D, 1.5))
    assert far > 1.2 * at0


@pytest.mark.parametrize("bad", [None, 0.0, -1.0, float("nan"), np.ones(D + 1), "abc", [0.01, "x", 1.0, 1.0]])
def test_a_bad_prior_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="prior_precision must be a number or 4 numbers in"):
        public_interval_width_forecast(losses.logistic(row_norm=2.0), _balanced(40), bad, 5000, 0.25)


def test_forecast_posterior_reads_the_width_from_the_public_rows():
    loss = losses.logistic(row_norm=math.sqrt(D))
    n, Xp = 5000, _balanced()
    fc = forecast_posterior(loss, n, D, eps=1.0, delta=1e-5, prior_precision=0.01, X_public=Xp,
                            interval_curvature="public")
    mu_int = math.sqrt(PUBLIC_INTERVAL_SHARE) * gdp_mu(1.0, 1e-5)
    assert fc.interval_width == pytest.approx(public_interval_width_forecast(loss, Xp, 0.01, n, mu_int), rel=1e-9)
    assert f"{fc.interval_width:.2g}x" in fc.intervals and "read from them" in fc.intervals
    # a figure the caller already read is taken as given (the demo passes the one it printed)
    again = forecast_posterior(loss, n, D, eps=1.0, delta=1e-5, prior_precision=0.01, X_public=Xp,
                               interval_curvature="public", public_interval_width=1.37)
    assert again.interval_width == 1.37
    # without public rows the closed form for a typical coordinate
    private = forecast_posterior(loss, n, D, eps=1.0, delta=1e-5, prior_precision=0.01)
    assert "read from them" not in private.intervals


def test_the_plan_notes_the_width_it_is_given_or_the_closed_form_and_refuses_a_bad_one():
    loss = losses.logistic(row_norm=1.0)
    kw = dict(eps=1.0, delta=1e-5, prior_precision=0.01, interval_share=PUBLIC_INTERVAL_SHARE,
              interval_curvature="public")

    def note(plan):
        (line,) = [t for t in plan.notes if t.startswith("interval release with public curvature")]
        return line

    given = note(plan_posterior(loss, 5000, D, public_interval_width=1.234, **kw))
    assert "about 1.2x" in given and "read from the public rows" in given
    assert "spread evenly" in note(plan_posterior(loss, 5000, D, **kw))
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="public_interval_width"):
            plan_posterior(loss, 5000, D, public_interval_width=bad, **kw)
