"""The scores' second moment of a NumPyro model at the origin (dp_infer.model.fisher): the release
the model path's posterior mode preconditions with (issue 27).

Oracles: the closed form of a logistic model's scores at the origin (``g_i = (1/2 - y_i) s x_i``);
the clip's bound on every row and on a replaced row's change of the gram; the release against
``private_second_moment`` of the rows ``s x / 2`` with the same key.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dp_infer
from dp_infer.model.fisher import score_gram
from dp_infer.releases.second_moment import private_second_moment, private_second_moment_of_gram

S = 2.0  # the prior's sd


def logreg(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, S).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)


def logistic_rows(n=400, seed=0, scales=(1.0, 0.5, 0.2)):
    """Rows with very different column scales (the prior's isotropic metric fits them badly)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(scales))) * np.asarray(scales) / 1.5
    logits = X @ np.array([1.0, -2.0, 3.0])
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logits))).astype(float)
    return X, y


def whitened_nll(X, y, clip_norm):
    ml = dp_infer.loss_from_model(logreg, X, y, clip_norm=clip_norm)
    s = jnp.full((ml.dim,), S)
    return lambda phi, x, yy: ml.loss.fn(s * phi, x, yy)


def test_the_scores_at_the_origin_of_a_logistic_model_are_its_rows_halved():
    """At phi = 0 the whitened score of row i is (sigma(0) - y_i) s x_i = (1/2 - y_i) s x_i: its gram
    is s^2 X'X / 4 (no clip binds at C = 10), and a row whose score exceeds the clip enters at norm C."""
    X, y = logistic_rows()
    fn = whitened_nll(X, y, 10.0)
    G, top = score_gram(fn, X, y, dim=3, clip_norm=10.0, block_rows=150)  # three blocks, the last short
    assert G == pytest.approx(S * S * X.T @ X / 4, rel=1e-5)
    assert top == pytest.approx(float(np.max(np.sum((S * X / 2) ** 2, axis=1))), rel=1e-5)
    # the clip: C below the largest score's norm, every row rescaled to at most C (in float64, inside)
    C = 0.3
    g = (0.5 - y)[:, None] * S * X
    norm = np.linalg.norm(g, axis=1, keepdims=True)
    assert np.mean(norm > C) > 0.1, "the clip must bind on some rows for this check"
    gc = g * np.minimum(1.0, C / norm)
    G2, top2 = score_gram(fn, X, y, dim=3, clip_norm=C)
    assert G2 == pytest.approx(gc.T @ gc, rel=1e-5)
    assert top2 <= C * C


def test_rows_orthogonal_to_the_diagonal_are_read_off_the_kink():
    """Rows whose whitened predictor is 0 along the all-ones diagonal (x = (a, -a): contrasts) sat on NumPyro's
    Bernoulli-logit kink at both points of a diagonal offset, where jax.grad gives -s x for y = 1 and 0 for y = 0
    instead of -+s x / 2 (such a row entered the gram up to 4x too large, or not at all). The public random
    direction reads them as the closed form does."""
    a = np.array([1.0, -2.0, 0.5, 3.0])
    X = np.stack([a, -a], axis=1)
    y = np.array([1.0, 1.0, 0.0, 1.0])
    G, top = score_gram(whitened_nll(X, y, 100.0), X, y, dim=2, clip_norm=100.0)
    g = (0.5 - y)[:, None] * S * X
    assert G == pytest.approx(g.T @ g, rel=1e-5)
    assert top == pytest.approx(float(np.max(np.sum(g * g, axis=1))), rel=1e-5)


def test_a_score_that_is_not_finite_counts_as_zero():
    X = np.array([[1.0, 2.0], [np.inf, 0.0], [0.5, 0.5]])
    y = np.ones(3)

    def fn(phi, x, yy):
        return jnp.sum(phi * x) * yy

    G, top = score_gram(fn, X, y, dim=2, clip_norm=100.0)
    rows = np.array([[1.0, 2.0], [0.5, 0.5]])
    assert G == pytest.approx(rows.T @ rows)
    assert top == pytest.approx(5.0)


@pytest.mark.parametrize("kw, needle", [
    (dict(clip_norm=0.0), "clip_norm"), (dict(clip_norm=float("inf")), "clip_norm"),
    (dict(dim=0), "dim"), (dict(block_rows=0), "block_rows"),
])
def test_score_gram_names_a_bad_argument(kw, needle):
    X, y = logistic_rows(n=10)
    args = dict(dim=3, clip_norm=1.0) | kw
    with pytest.raises(ValueError, match=rf"^{needle}\b"):
        score_gram(whitened_nll(X, y, 1.0), X, y, **args)


def test_the_release_is_the_private_second_moment_of_the_halved_rows_with_the_same_key():
    """The same mechanism, the same noise: the model path's release of its scores equals
    private_second_moment of the rows s x / 2 (each of norm <= C), key for key."""
    X, y = logistic_rows()
    n = X.shape[0]
    fn = whitened_nll(X, y, 10.0)
    G, _ = score_gram(fn, X, y, dim=3, clip_norm=10.0)
    key = jax.random.PRNGKey(4)
    a = private_second_moment_of_gram(G, n, max_sq_norm=100.0, mu=0.3, key=key)
    b = private_second_moment(S * X / 2, max_sq_norm=100.0, mu=0.3, key=key)
    assert a.matrix == pytest.approx(b.matrix, rel=1e-4, abs=1e-6)
    assert a.event.mu == b.event.mu and a.noise_sd == b.noise_sd


def worst_pair(n=50, seed=0):
    """D and D' differ in row 0: scores (1/2) S x at the origin of norm 10 S / 2, in orthogonal
    directions (both clipped to C = 1: the Frobenius change of the gram is sqrt(2) C^2, the most a
    replaced row can make); the other rows are small."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.1, 0.1, size=(n, 2))
    y = np.zeros(n)
    X2 = X.copy()
    X[0], X2[0] = [10.0, 0.0], [0.0, 10.0]
    return (X, y), (X2, y)


def test_a_replaced_row_moves_the_scores_gram_by_at_most_the_release_bound():
    """||G(D) - G(D')||_F <= sqrt(2) C^2 (the sensitivity the release charges, times n; it bounds the
    upper triangle's l2 change) on the worst pair, and the pair attains it: the clip, not the rows,
    bounds the change (without it the change would be 100x)."""
    (X, y), (X2, y2) = worst_pair()
    C = 1.0
    Ga, _ = score_gram(whitened_nll(X, y, C), X, y, dim=2, clip_norm=C)
    Gb, _ = score_gram(whitened_nll(X2, y2, C), X2, y2, dim=2, clip_norm=C)
    diff = float(np.linalg.norm(Ga - Gb))
    assert diff <= np.sqrt(2) * C * C * (1 + 1e-6)
    assert diff == pytest.approx(np.sqrt(2) * C * C, rel=1e-3)
