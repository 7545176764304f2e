"""benchmarks.sd_forecast (issue 37 parts 4 and 5): one simulated case end to end (the forecast plans as the run
does, both forecasts and the measurement are reported, the interval width beside its forecast), and the table's
columns. No timings."""

from __future__ import annotations

import pytest

from benchmarks import sd_forecast as B


@pytest.mark.slow
def test_one_simulated_case_end_to_end():
    r = B.simulated("logistic_2k")  # n 2000, d 3: a few seconds
    assert r["same_beta"] and r["n"] == 2000 and r["d"] == 3
    assert 0 < r["measured"] <= 1.2 and 0 < r["even"] <= 1 and 0 < r["public"] <= 1
    # measured 2026-11-30: 0.753 against 0.751 (the test holds the 25%); the Gaussian arithmetic 0.247
    assert abs(r["public"] / r["measured"] - 1) < 0.25 and r["gaussian"] < 0.5 * r["measured"]
    assert (r["width"] is None) == (r["width_forecast"] is None)
    text = B.to_markdown([r])
    assert "| logistic_2k (simulated) | 2000 | 3 |" in text and "Interval width" in text


@pytest.mark.slow
def test_the_huber_width_forecast_with_the_declared_residual_sd_is_within_the_band():
    r = B.simulated("huber_small")  # n 5000, d 5, the design's residual sd declared: about 15 s
    assert r["same_beta"] and r["residual_scale"] == pytest.approx(0.387, abs=1e-3)
    # measured 2026-12-03 (seed 1000, fixed): forecast 1.47 against 1.58 (0.93); the typical curvature's stand-in
    # 1.16 (0.73), outside the 25%
    assert abs(r["width_forecast"] / r["width"] - 1) < 0.25
    assert r["width_forecast_undeclared"] / r["width"] < 0.75
    assert "declared sd 0.387" in B.to_markdown([r])


def test_the_table_says_why_a_case_has_no_width():
    row = {"case": "c", "n": 10, "d": 2, "beta_over_n": 0.01, "measured": 0.5, "public": None, "even": 0.45,
           "gaussian": 0.2, "measured_count": 0, "even_count": 0, "public_count": None, "width": None,
           "width_forecast": None}
    text = B.to_markdown([row, {**row, "case": "f", "width_forecast": 2.0}])
    assert "| c | 10 | 2 | 0.01 | 0.500 | -- | 0.450 | 0.200 | 0.90 | 0 / 0 |" in text
    assert "| c | -- | -- | no interval release |" in text and "| f | -- | -- | every coordinate flagged |" in text
    declared = {**row, "case": "h", "width": 1.6, "width_forecast": 1.5, "width_forecast_undeclared": 1.2,
                "residual_scale": 0.4}
    assert "| h | 1.50 | 1.60 | 0.94 | 1.20 (0.75); declared sd 0.4 |" in B.to_markdown([declared])
