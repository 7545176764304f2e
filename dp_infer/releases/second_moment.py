"""Second moments released from rows: ``X' X / n`` of private rows with Gaussian noise at ``mu``-GDP,
or of public rows for free (:mod:`dp_infer.routes.preconditioning` holds the :class:`SecondMoment`
type, the stand-ins a plan is made with, and the metric built from it; this module is the one that
reads rows).

``private``: ``X' X / n + N(0, sigma^2)`` on the upper triangle, replace-one sensitivity
``sqrt(2) R^2 / n`` (:data:`~dp_infer.routes.preconditioning.GRAM_SENSITIVITY_FACTOR`) over the admissible rows, symmetrised and projected
onto the PSD cone (post-processing), its :class:`~dp_infer.privacy.events.GdpEvent` charged in the
same plan as the chain.

The sensitivity, exactly: ``sqrt(2) R^2 / n`` (:func:`~dp_infer.routes.preconditioning.gram_sensitivity`;
the proof is at :data:`~dp_infer.routes.preconditioning.GRAM_SENSITIVITY_FACTOR`), attained by two
orthogonal rows of norm R (``x = R e_1``, ``x' = R e_2``). The triangle inequality's ``2 R^2 / n``
(used before 2026-11-29) was loose by sqrt(2) (issue 40, part 3); ``tests/routes/test_preconditioning.py``
checks both the bound and its attainment.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_delta, check_finite_array, check_positive, check_positive_int
from ..privacy.events import GdpEvent
from ..randomness import gaussian_noise
from ..routes.preconditioning import SecondMoment, gaussian_spectral_bound, gram_sensitivity

__all__ = ["public_second_moment", "private_second_moment", "private_second_moment_of_gram"]


def public_second_moment(X_public) -> SecondMoment:
    """``X_public' X_public / m`` from PUBLIC rows (costs no privacy; the caller vouches that the
    rows are public and disjoint from the private ones)."""
    Xp = check_finite_array("X_public", X_public, ndim=2)
    return SecondMoment(Xp.T @ Xp / Xp.shape[0], "public",
                        notes=(f"second moment of {Xp.shape[0]} public rows (declared public by the caller)",))


def _psd(S: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh(0.5 * (S + S.T))
    P = (V * np.maximum(w, 0.0)) @ V.T
    return 0.5 * (P + P.T)   # the product is symmetric only up to rounding; this is exactly symmetric


def private_second_moment(X, *, max_sq_norm: float, mu: float, key, failure: float = 1e-6) -> SecondMoment:
    """Release ``X' X / n`` with Gaussian noise at ``mu``-GDP (replace-one, n public).

    ``max_sq_norm``: a bound on ``||x||^2`` that every admissible row meets (the caller checks the
    rows against it; e.g. ``rows.max_norm() ** 2``). ``key``: a JAX key (secret). The noise is
    added to the upper triangle (including the diagonal) and mirrored; the result is projected
    onto the PSD cone (post-processing): :func:`private_second_moment_of_gram`.
    """
    X = check_finite_array("X", X, ndim=2)
    R2 = check_positive("max_sq_norm", max_sq_norm)
    if float(np.max(np.einsum("ij,ij->i", X, X))) > R2 * (1 + 1e-9):
        raise ValueError(f"a row of X has squared norm above max_sq_norm = {R2:g}")
    return private_second_moment_of_gram(X.T @ X, X.shape[0], max_sq_norm=R2, mu=mu, key=key, failure=failure)


def private_second_moment_of_gram(gram, n: int, *, max_sq_norm: float, mu: float, key,
                                  failure: float = 1e-6) -> SecondMoment:
    """The release of :func:`private_second_moment` from ``gram = X' X`` (d, d) and the public ``n``,
    for rows summed elsewhere (e.g. on the devices that hold them:
    :func:`dp_infer.parallel.sharded_posterior.sharded_second_moment`). The CALLER has checked every
    row against ``max_sq_norm``: the sensitivity ``sqrt(2) max_sq_norm / n`` rests on it."""
    G = check_finite_array("gram", gram, ndim=2)
    R2 = check_positive("max_sq_norm", max_sq_norm)
    mu = check_positive("mu", mu)
    failure = check_delta(failure, "failure")
    n = check_positive_int("n", n)
    d = G.shape[0]
    if G.shape != (d, d):
        raise ValueError(f"gram must be square (X'X), got shape {G.shape}")
    sens = gram_sensitivity(R2, n)  # ||upper(x x^T - x' x'^T)||_2 <= ||x x^T - x' x'^T||_F <= sqrt(2) R^2
    sd = sens / mu
    with jax.enable_x64(True):  # privacy noise: 53-bit quantiles, tail to 11.4 sds (dp_infer.randomness)
        noise = np.asarray(gaussian_noise(key, (d, d), jnp.float64), dtype=np.float64) * sd
    upper = np.triu(noise)
    E = upper + np.triu(upper, 1).T
    S_hat = _psd(G / n + E)
    event = GdpEvent(mu=mu, label="private_second_moment",
                     assumptions=(f"replace-one neighbours, n = {n} public; every row has ||x||^2 <= {R2:g}",
                                  f"Gaussian noise sd {sd:.4g} on the {d * (d + 1) // 2} upper-triangle entries "
                                  "of X'X/n (replace-one sensitivity sqrt(2) R^2 / n)",),
                     metadata={"sensitivity": sens, "noise_sd": sd, "n": n, "dim": d})
    return SecondMoment(S_hat, "private", event, sd, gaussian_spectral_bound(d, sd, failure), failure,
                        notes=(f"X'X/n released at {mu:.4g}-GDP and projected onto the PSD cone",))
