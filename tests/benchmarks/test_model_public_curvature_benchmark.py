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
    assert "give --adult or --coverage N" in capsys.readouterr().err


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
