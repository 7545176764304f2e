"""The arithmetic behind results.md's "Why Adult falls short of 60%" (benchmarks.public_curvature --shortfall)."""

import numpy as np
import pytest

from benchmarks.public_curvature import Z90, expected_share_determined


def test_expected_share_is_the_chance_a_noisy_centre_clears_the_half_width():
    # a centre at 0 with the interval's own sd: |N(0, s)| > z90 s, the two-sided 10% exactly
    assert expected_share_determined(0.0, 1.3, 1.3) == pytest.approx(0.10, abs=1e-9)
    # almost no noise: determined exactly when the estimand clears the half-width
    got = expected_share_determined([1.7, 1.6, -1.7], 1.0, 1e-9)
    np.testing.assert_array_equal(got > 0.5, [True, False, True])
    assert got[0] == pytest.approx(1.0) and got[1] == pytest.approx(0.0, abs=1e-12)
    # against simulation (fixed key; 200,000 draws: se of a share near 0.7 is 0.001, tolerance 5 se)
    rng = np.random.default_rng(5)
    est, w, s = 2.1, 1.0, 0.8
    c = est + s * rng.standard_normal(200_000)
    sim = np.mean(np.abs(c) > Z90 * w)
    assert expected_share_determined(est, w, s) == pytest.approx(sim, abs=0.005)
    # the sign of the estimand does not matter
    assert expected_share_determined(-est, w, s) == pytest.approx(expected_share_determined(est, w, s), rel=1e-12)
