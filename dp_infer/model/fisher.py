"""The scores' second moment of a NumPyro model at a public point: the data preconditioner of the
model path's posterior mode (``fit(model=..., target="posterior", preconditioner="fisher")``).

``F = (1/n) sum_i g_i g_i^T`` with ``g_i`` the per-example score (the gradient of the negative
log-likelihood) of row i in the prior-whitened coordinates ``phi = theta / s``, taken at the
public point ``phi = 0`` (the unconstrained origin: no data, no draw), each clipped to the run's
``clip_norm`` C. It is the empirical Fisher information at that point. Released with the Gaussian
mechanism of :func:`dp_infer.releases.second_moment.private_second_moment_of_gram`: every clipped
score has ``||g_i||^2 <= C^2``, so the replace-one sensitivity of ``F``'s upper triangle is ``sqrt(2) C^2 / n``,
whatever the model does (a non-finite score counts as 0, as in the run's own clip).

Why it preconditions (and bounds the curvature, for the step): for a GLM ``-log p(y | eta)`` with
a linear predictor ``eta = <x~, theta>`` the per-example Hessian is ``phi''(eta) x~ x~^T``. For
the logistic model at ``eta = 0`` (the origin of a zero-mean prior), ``g_i = (1/2 - y_i) s x~_i``,
so ``g_i g_i^T = s^2 x~ x~^T / 4``: the largest per-example Hessian at EVERY theta. Then
``beta H(phi) <= beta F`` and the metric ``(beta kappa_P F + I)^-1`` makes the tempered posterior
about isotropic, as the private ``X'X / n`` does for the built-in losses. For other models the
relation ``H_i(phi) <= kappa g_i g_i^T`` (``kappa``: the plan's declared ``fisher_curvature``) is an
assumption the plan states; it sets the step size only (accuracy, never the privacy guarantee).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._validation import check_positive, check_positive_int
from .score_release import symmetric_score_function

__all__ = ["score_gram", "FISHER_POINT"]

#: the public point at which the scores are taken: the unconstrained origin (prior-whitened coordinates)
FISHER_POINT = "the unconstrained origin (phi = 0)"


def score_gram(example_fn, X, y, *, dim: int, clip_norm: float, block_rows: int = 8192) -> tuple[np.ndarray, float]:
    """``(sum_i g_i g_i^T, max_i ||g_i||^2)`` for the per-example gradients ``g_i`` of
    ``example_fn(phi, x, y)`` at ``phi = 0``, read as :func:`~dp_infer.model.score_release.symmetric_score_function`
    reads them (the mean of those at ``+-KINK_OFFSET u``: NumPyro's ``Bernoulli(logits=...)`` has a kink in its
    automatic derivative at exactly the origin's ``eta = 0``), each clipped to ``clip_norm`` (a non-finite
    gradient is 0). The clip is applied in float64 a hair inside the radius, so ``||g_i||^2 <= clip_norm^2`` holds
    exactly for the sum returned (the release's sensitivity rests on it). Rows are taken ``block_rows`` at a time
    (memory O(block_rows x dim))."""
    C = check_positive("clip_norm", clip_norm)
    dim = check_positive_int("dim", dim)
    block_rows = check_positive_int("block_rows", block_rows)
    X, y = jnp.asarray(X), jnp.asarray(y)
    n = int(X.shape[0])
    scores = symmetric_score_function(example_fn, dim)
    origin = jnp.zeros((dim,))  # the default float dtype (float64 under x64)
    gram = np.zeros((dim, dim))
    top = 0.0
    for lo in range(0, n, block_rows):
        g = np.asarray(scores(origin, X[lo:lo + block_rows], y[lo:lo + block_rows]), dtype=np.float64)
        g = np.where(np.all(np.isfinite(g), axis=1, keepdims=True), g, 0.0)
        norm = np.linalg.norm(g, axis=1, keepdims=True)
        # the factor 1 - 1e-12 absorbs float64 rounding: every row's norm ends below C, not at C (1 + 1e-16)
        g = g * np.minimum(1.0, C * (1.0 - 1e-12) / np.maximum(norm, 1e-300))
        gram += g.T @ g
        top = max(top, float(np.max(np.sum(g * g, axis=1))))  # a block is never empty
    return gram, top
