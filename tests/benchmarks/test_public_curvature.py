"""benchmarks.public_curvature: the issue's figures every interval benchmark reports, computed by hand, and the
arithmetic behind results.md's "Why Adult falls short of 60%" (--shortfall)."""

import numpy as np
import pytest

from benchmarks.public_curvature import Z90, expected_share_determined, intervals_against_nonprivate
from dp_infer.diagnostics.released_interval import ParameterIntervals


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


def _intervals(lower, upper, centre, sd, flags):
    z = np.zeros(len(lower))
    return ParameterIntervals(lower=np.array(lower), upper=np.array(upper), centre=np.array(centre), sd=np.array(sd),
                              data_centre=z, data_sd=z, untempered_sd=np.ones_like(z), prior_sd=np.ones_like(z),
                              data_share=z, newton_step=z, flags=tuple(flags), prob=0.9, estimand="test")


def test_the_figures_are_the_issues_against_the_nonprivate_posterior():
    # by hand: four coefficients the non-private posterior determines (|t| > 1.645 sd) and one it does not
    t, sd = np.array([3.0, -2.0, 0.5, 4.0, 2.5]), np.ones(5)
    iv = _intervals(lower=[0.5, -3.0, -1.0, -0.5, 0.2], upper=[5.0, -0.1, 2.0, 3.5, 4.0],
                    centre=[2.75, -1.55, 0.5, 4.0, 2.1], sd=[1.2, 1.4, 1.5, 2.0, 3.0],
                    flags=["", "", "prior: the data say little", "", "long step: the centre may not have converged"])
    got = intervals_against_nonprivate(iv, t, sd)
    assert got["np_determined"] == 4
    # coordinates 0 and 1; 3 straddles 0; 4 excludes 0 but is flagged, so the run does not call it determined
    assert got["share_determined"] == pytest.approx(2 / 4)
    assert got["signs_right"] == 1.0
    assert got["median_width_over_np_sd"] == pytest.approx(1.7)  # median of 1.2, 1.4, 2.0, 3.0
    assert got["contain_map"] == 4 and got["flagged"] == 2 and got["dim"] == 5  # 4.0 lies above (-0.5, 3.5)
    wrong = _intervals(iv.lower, iv.upper, [-2.75, -1.55, 0.5, 4.0, 2.1], iv.sd, iv.flags)  # a wrong sign
    assert intervals_against_nonprivate(wrong, t, sd)["signs_right"] == pytest.approx(0.5)
    none = _intervals(iv.lower, iv.upper, iv.centre, iv.sd, ["prior: the data say little"] * 5)
    assert intervals_against_nonprivate(none, t, sd)["signs_right"] is None
    assert intervals_against_nonprivate(none, t, sd)["share_determined"] == 0.0
