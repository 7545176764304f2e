"""The float32 gradient measurement behind the posterior plan's margin (benchmarks.float32_gradient)."""

from __future__ import annotations

import numpy as np

from benchmarks.float32_gradient import neighbour_excess
from dp_infer import losses
from dp_infer.routes.posterior_path import FLOAT32_GRADIENT_MARGIN


def test_the_float64_difference_keeps_the_clip_bound_and_float32_stays_inside_the_margin():
    # oracles that could disagree: the clip bounds every replace-one difference by beta 2 tau / n exactly, so the
    # float64 ratio is <= 1 (to 1e-12); float32 adds rounding, nonzero (the measurement sees it) and, at states
    # of the size the chains visit with a large prior gradient, inside the planned margin (measured: 1.8e-4)
    rng = np.random.default_rng(4)
    n, d = 2000, 6
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = (rng.uniform(size=n) < 0.5).astype(float)
    C = np.linalg.cholesky(np.eye(d) * 0.5 + 0.1)
    states = rng.normal(0, 3.0, (4, d))
    pairs = [(int(rng.integers(n)), int(rng.integers(n))) for _ in range(10)]
    r = neighbour_excess(losses.logistic(row_norm=1.0), X, y, beta=50.0, chol=C, tau=0.3,
                         prior_precision=np.full(d, 20.0), states=states, pairs=pairs)
    assert r["pairs"] == 40 and r["sensitivity"] == 50.0 * 2 * 0.3 / n
    assert r["max_ratio_float64"] <= 1 + 1e-12
    assert 0.5 < r["max_ratio_float64"]  # some pair comes near the bound: the ratio is measured, not 0
    assert 0 < r["max_excess_float32"] < FLOAT32_GRADIENT_MARGIN
    assert r["max_grad_norm"] > 5 * 50.0 * 0.3  # the prior dominates |grad V| (the data part is at most beta tau)
