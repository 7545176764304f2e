"""``dp-infer demo``: options checked before anything runs, and the forecast it prints before
sampling is the plan the run makes (public inputs only)."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from dp_infer.cli import main
from dp_infer.cli.demo import QUICK_DRAWS, QUICK_ESS, expected_seconds, forecast_plan


def test_full_and_plots_belong_to_the_posterior_demo():
    res = CliRunner().invoke(main, ["demo", "--mode", "estimate", "--full"])
    assert res.exit_code != 0 and "--full and --plots apply to --mode posterior only" in str(res.exception)
    res = CliRunner().invoke(main, ["demo", "--help"])
    assert "--full" in res.output and "--plots" in res.output


@pytest.mark.slow
def test_forecast_uses_public_inputs_and_matches_the_planner():
    from dp_infer import losses
    from dp_infer.schema.adult import load_adult_raw

    a = load_adult_raw()
    rows = a.feature_map.admissible_rows()
    loss = losses.logistic(row_norm=rows.max_norm())
    n, d = a.X_train.shape
    kw = dict(eps=1.0, delta=1e-5, prior_precision=0.01, ess=QUICK_ESS, chains=4, rows=rows, precond_share=0.1,
              num_draws=QUICK_DRAWS)
    p = forecast_plan(loss, n, d, X_public=a.X_test, **kw)
    # the private release's share of the budget is charged in the forecast exactly as in the run
    assert p.posterior.mu_second_moment == pytest.approx(math.sqrt(0.1) * p.event.mu, rel=1e-9)
    assert p.posterior.predicted_ess == pytest.approx(QUICK_ESS)
    # another public stand-in (half the test rows) moves the steps a little, never the budget
    q = forecast_plan(loss, n, d, X_public=a.X_test[::2], **kw)
    assert q.event.mu == pytest.approx(p.event.mu, rel=1e-9)
    assert 0.8 < q.num_steps / p.num_steps < 1.25
    assert 0 < expected_seconds(p) < 120
    # one cost model: the forecast's (dp_infer.routes.forecast.sampling_seconds) on the plan's expected steps
    from dp_infer.routes.forecast import sampling_seconds
    from dp_infer.routes.posterior import expected_steps

    assert expected_seconds(p) == pytest.approx(sampling_seconds(expected_steps(p), n, d, 4), rel=1e-12)
