"""benchmarks.model_public_curvature: the coverage command's summary is what its per-dataset records say, and
the command line refuses to run without a mode."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.intervals import design_data
from benchmarks.model_public_curvature import main, model_coverage
from benchmarks.public_curvature import nonprivate_laplace


def test_the_command_needs_a_mode(capsys):
    with pytest.raises(SystemExit):
        main([])
    assert "give --adult, --adult-forecast or --coverage N" in capsys.readouterr().err


@pytest.mark.slow
def test_one_dataset_of_the_coverage_run_records_what_it_measured():
    """logistic_2k (n 2000, d 3), one dataset: one record of three intervals, whose coverage indicators and
    width ratios the summary averages (its coverage, its median width); the ratios' denominator, the
    non-private Laplace sd, is finite on this design."""
    logs = []
    r = model_coverage([0], design="logistic_2k", log=logs.append)
    (rec,) = [json.loads(s) for s in logs]
    X, y, theta = design_data("logistic_2k", 0)
    _, sd_np = nonprivate_laplace(X, y, 0.01)
    assert r["all"]["intervals"] == 3 and r["all"]["coverage"] == pytest.approx(np.mean(rec["covered"]))
    assert len(rec["width_ratio"]) == 3 and np.all(np.asarray(rec["width_ratio"]) > 0.5)
    assert r["median_width_ratio"] == pytest.approx(np.median(rec["width_ratio"]), rel=1e-12)
    # the ratio's denominator is the non-private Laplace sd under the benchmark's prior
    assert np.all(np.isfinite(sd_np)) and r["clip_norm"] == 10.0


@pytest.mark.slow  # 30 s: a whole weighted release (its stages' surrogate solves compile)
def test_the_weighted_map_oracle_weighs_each_row_as_the_release_did():
    """weighted_release_weights (the benchmark's oracle of the intervals' estimand) reads the release's rho, chol and
    last point: ``min(1, rho / (max(p, 1 - p) ||chol^T x||))`` must equal ``min(1, rho / B)`` with ``B`` the row's
    largest whitened score over both labels, enumerated by the release's own code (row_bounds) at that point."""
    import jax

    from benchmarks.model_public_curvature import weighted_release_weights
    from dp_infer.model import weighted_release as wr
    from dp_infer.model.public_information import public_second_moment
    from tests.infer.test_model_intervals import _logit_data, logreg
    from tests.infer.test_model_weighted_release import _whitened_nll

    import dp_infer

    X, y, _ = _logit_data(7, 800)
    s = np.full(3, 2.0)
    nll = _whitened_nll(s)
    ml = dp_infer.loss_from_model(logreg, X, y, clip_norm=100.0)
    pj = public_second_moment(nll, ml.observation_sampler(), X, s, clip_norm=100.0)
    rel = wr.release_weighted_scores(nll, X, y, point=np.array([0.1, -0.2, 0.3]), scales=s, clip_norm=100.0, mu=2.0,
                                     key=jax.random.PRNGKey(1), trust_covariance=np.eye(3), prior_mean=np.zeros(3),
                                     prior_sd=np.full(3, 10.0), public=pj, labels=(0.0, 1.0))
    last = np.asarray(rel["path"][-1]) / s  # the release's phi (whitened by the scales)
    G, _ = wr.enumerated_scores(nll, X, last, (0.0, 1.0))
    M = np.asarray(rel["chol"]) / s[:, None]
    bound = wr.row_bounds(G, M)
    expected = np.minimum(1.0, rel["rho"] / bound)
    assert 0.0 < expected.min() < 1.0  # some rows weigh less than 1: the comparison is not all ones
    np.testing.assert_allclose(weighted_release_weights(X, rel), expected, rtol=1e-5)
