"""Benchmark glue of issue 37's interval reports: the public-curvature coverage run takes any logistic design and
refuses the others by name; the NumPyro-model run reports what ``run.intervals`` says, figures or the reason."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.posterior_levers import _model_intervals
from benchmarks.public_curvature import adult_shaped_coverage


def test_the_coverage_run_refuses_a_design_without_a_label_free_curvature():
    with pytest.raises(ValueError, match="design must be a logistic design.*'huber_small'"):
        adult_shaped_coverage([0], "huber_small")


def test_a_model_runs_intervals_are_reported_as_figures_or_as_the_runs_reason():
    class NoRelease:
        def intervals(self, prob):
            raise ValueError("this run has no interval release: because")

    assert _model_intervals(NoRelease(), np.ones(3)) == "none: this run has no interval release: because"
    iv = SimpleNamespace(flags=("", "prior: the data say little", ""), sd=np.array([2.0, 9.0, 3.0]),
                         determined=np.array([True, False, False]))
    run = SimpleNamespace(intervals=lambda prob: iv)
    assert _model_intervals(run, np.array([1.0, 1.0, 2.0])) == {
        "determined": 1, "flagged": 1, "coordinates": 3, "width_ratio_median_unflagged": 1.75}
