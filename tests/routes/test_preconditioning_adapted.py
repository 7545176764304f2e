"""The metric adapted from released draws (dp_infer.routes.preconditioning.adapted_metric).

Oracles: Gaussian draws of a known covariance (the expanded eigenvalues against the known ones,
tolerance from the sampling sd of a variance, sqrt(2 / N)); the expand-only rule checked in the
Loewner order against the current metric; the Brascamp-Lieb cap exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_infer.routes.preconditioning import adapted_metric


def _chol(d, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(d, d))
    return np.linalg.cholesky(A @ A.T / d + 0.5 * np.eye(d))


def test_expands_where_the_draws_spread_more_and_keeps_the_rest():
    d, N = 4, 20000
    C = _chol(d, 0)
    # in the current coordinates phi = C^-1 theta the draws have variances 4, 2.25, 0.25, 0.09
    # along an orthonormal basis Q: the new metric's phi-eigenvalues are max(w, 1) = 4, 2.25, 1, 1
    rng = np.random.default_rng(1)
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    w_true = np.array([4.0, 2.25, 0.25, 0.09])
    phi = rng.normal(size=(N, d)) * np.sqrt(w_true) @ Q.T
    theta = phi @ C.T
    P = adapted_metric(theta.reshape(4, N // 4, d), current_chol=C, prior_precision=1e-6)
    Ci = np.linalg.inv(C)
    got = np.sort(np.linalg.eigvalsh(Ci @ P @ Ci.T))[::-1]
    want = np.array([4.0, 2.25, 1.0, 1.0])
    tol = 4 * want * math.sqrt(2 / N)  # sampling sd of a variance estimate: var sqrt(2 / N)
    assert np.all(np.abs(got - want) <= tol)
    # the expanded directions are the draws' own (Q's first two columns)
    top = np.linalg.eigh(Ci @ P @ Ci.T)[1][:, -2:]
    assert np.linalg.norm(top.T @ Q[:, 2:]) < 0.05


@pytest.mark.parametrize("seed", range(5))
def test_never_narrower_than_the_current_metric(seed):
    """Loewner order: P_new - P_current is PSD whenever the cap does not bind (the chain never gets
    slower in any direction than the metric it already had)."""
    d = 6
    C = _chol(d, seed)
    rng = np.random.default_rng(100 + seed)
    theta = rng.normal(size=(300, d)) * rng.uniform(0.1, 3.0, size=d)  # any draws at all
    P = adapted_metric(theta, current_chol=C, prior_precision=1e-9)
    assert np.linalg.eigvalsh(P - C @ C.T)[0] >= -1e-9 * np.linalg.norm(P)


def test_capped_at_the_prior_covariance():
    """Brascamp-Lieb: a Gaussian prior times a log-concave likelihood has covariance <= Lambda^-1;
    draws spread far wider (e.g. far from stationarity) are capped there exactly."""
    d = 3
    lam = np.array([0.5, 2.0, 4.0])
    theta = np.random.default_rng(0).normal(size=(500, d)) * 100.0
    P = adapted_metric(theta, current_chol=np.eye(d), prior_precision=lam)
    assert np.linalg.eigvalsh(P)[-1] == pytest.approx(1 / lam.min(), rel=1e-12)


@pytest.mark.parametrize("kw, needle", [
    (dict(theta_draws=np.zeros((1, 3))), "theta_draws must have shape"),
    (dict(theta_draws=np.full((5, 3), np.nan)), "theta_draws"),
    (dict(current_chol=np.eye(2)), "current_chol"),
    (dict(prior_precision=np.ones(2)), "prior_precision"),
])
def test_bad_inputs(kw, needle):
    args = dict(theta_draws=np.random.default_rng(0).normal(size=(10, 3)), current_chol=np.eye(3),
                prior_precision=1.0)
    args.update(kw)
    with pytest.raises(ValueError, match=needle):
        adapted_metric(args.pop("theta_draws"), **args)
