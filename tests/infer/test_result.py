"""One result protocol (issue 38, part 3): every route's result is a PrivateResult, and a run file is
loaded by the result type it stores, not by its route's name."""

from __future__ import annotations

import numpy as np
import pytest

import dp_infer
from dp_infer.infer.proximal import ProximalRun
from dp_infer.infer.result import RESULT_TYPE_ATTR, PrivateResult, stored_result_kind
from tests.infer.test_one_door import DELTA, data  # noqa: F401 - fixture


@pytest.fixture(scope="module")
def runs(data):
    X, y = data
    return {
        "estimate": dp_infer.fit(dp_infer.logistic(row_norm=1.0), X, y, eps=1.0, delta=DELTA, seed=1,
                                 progress_bar=False),
        "proximal": dp_infer.fit(dp_infer.hinge(row_norm=1.0), X, y, eps=1.0, delta=DELTA, seed=1),
        "posterior": dp_infer.fit(dp_infer.logistic(row_norm=1.0), X, y, eps=1.0, delta=DELTA, target="posterior",
                                  prior_precision=1.0, ess=50, seed=3, progress_bar=False),
    }


@pytest.mark.parametrize("route,kind", [("estimate", "private_run"), ("proximal", "proximal_run"),
                                        ("posterior", "posterior_run")])
def test_every_route_returns_a_private_result_with_its_stored_type(runs, route, kind):
    run = runs[route]
    assert isinstance(run, PrivateResult)
    assert run.result_kind == kind
    assert run.draws().shape[-1] == run.estimate().shape[0]


def test_intervals_answer_or_say_why_on_every_route(runs):
    # n = 200 is too few rows for a curvature release at eps = 1: the posterior run says so too
    for route, why in (("estimate", "posterior-mode run"), ("proximal", "final position per chain"),
                       ("posterior", "released curvature would be noise")):
        with pytest.raises(ValueError, match=why):
            runs[route].intervals(0.9)


def test_loading_dispatches_on_the_stored_type(tmp_path, runs):
    from dp_infer.diagnostics import load, save

    path = runs["proximal"].save(tmp_path / "prox.zip")
    dt = load(path)
    assert stored_result_kind(dt) == "proximal_run"
    assert isinstance(dp_infer.PrivateRun.load(path), ProximalRun)
    # a file written before the type was stored still loads by its report (the proximal route)
    del dt.attrs[RESULT_TYPE_ATTR]
    old = save(dt, tmp_path / "old.zip")
    assert isinstance(dp_infer.PrivateRun.load(old), ProximalRun)
    # an unknown type is refused, naming the attribute's value
    dt.attrs[RESULT_TYPE_ATTR] = "quantum_run"
    odd = save(dt, tmp_path / "odd.zip")
    with pytest.raises(ValueError, match="unknown result type 'quantum_run'"):
        dp_infer.PrivateRun.load(odd)
    # a trajectory run is stored as a PrivateRun and comes back as one, with the same draws
    p2 = runs["estimate"].save(tmp_path / "traj.zip")
    back = dp_infer.PrivateRun.load(p2)
    assert type(back) is dp_infer.PrivateRun
    np.testing.assert_allclose(back.draws(), runs["estimate"].draws(), rtol=1e-6)
