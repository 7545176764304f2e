"""The forecast's wall-time cost model (one model for the forecast and the demo).

Oracle: the calibration written out here -- 2.5 ms a step for 4 chains on 30162 x 100 rows on the
project's idle 2-core machine (the demo measured 58.8 s against its forecast of 58 s, README) --
scaled by rows x parameters x chains, with a floor at 5% of that shape.
"""

from __future__ import annotations

import math

import pytest

from dp_infer import losses
from dp_infer.routes.forecast import FIXED_SECONDS, forecast_posterior, sampling_seconds


def test_the_cost_model_is_the_calibration_scaled_by_shape():
    assert sampling_seconds(1000, 30162, 100, 4) == pytest.approx(2.5, rel=1e-12)
    assert sampling_seconds(1000, 30162, 200, 4) == pytest.approx(5.0, rel=1e-12)
    assert sampling_seconds(2000, 30162, 100, 8) == pytest.approx(10.0, rel=1e-12)
    floor = sampling_seconds(1000, 100, 10, 4)  # far below 5% of the calibration shape
    assert floor == pytest.approx(2.5 * 0.05, rel=1e-12) == sampling_seconds(1000, 10, 10, 1)


def test_the_forecast_uses_it_on_the_expected_steps():
    loss = losses.logistic(row_norm=math.sqrt(5))
    fc = forecast_posterior(loss, 20000, 5, eps=1.0, delta=1e-5, prior_precision=1.0, clip_radius="auto")
    assert fc.seconds == pytest.approx(FIXED_SECONDS + sampling_seconds(fc.num_steps, 20000, 5, 4), rel=1e-12)
