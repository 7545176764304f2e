"""Gradient sensitivity in a preconditioner's metric, over the rows that can actually occur.

A preconditioned Langevin step ``theta <- theta - h P grad U + sqrt(2h) P^(1/2) xi`` is a
Gaussian mechanism with covariance ``2 h P``; between neighbouring datasets the means differ by
``h P (grad U_D - grad U_D')``, so its Mahalanobis shift is ``sqrt(h/2) ||P^(1/2) (grad U_D -
grad U_D')||``. With ``U = beta L + prior`` (the prior is data independent) and L the mean of n
per-example losses, the per-step GDP is ``sqrt(h/2) beta Delta_P`` with

    Delta_P = sup_{theta, rows z, z'} ||P^(1/2) (grad l(theta; z) - grad l(theta; z'))|| / n.

For a generalised linear loss ``l(theta; x, y) = phi(<theta, x>, y)`` with ``|phi'| <= a`` the
gradient is ``phi' x``, so ``Delta_P <= 2 a sqrt(max_x x^T P x) / n`` over the admissible rows x.
:func:`max_quadratic_form` bounds ``max_x x^T P x`` from above by the smaller of

* the ball bound ``lambda_max(P) R^2`` (rows of norm <= R), and
* the block bound: rows are a product of independent blocks (intercept, numeric intervals, one
  active level per categorical group; :class:`dp_infer.schema.admissible.AdmissibleRows`), so
  ``x^T P x = sum_{b, b'} u_b^T P_{bb'} u_b'`` and each pair term is at most its maximum over the
  blocks' vertices (a convex function's maximum over a polytope sits at a vertex).

Both are upper bounds (the block bound is exact for block-diagonal P); an upper bound only ever
over-states the privacy cost. Directions that no admissible row reaches contribute nothing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import check_positive, check_positive_int

__all__ = ["max_quadratic_form", "metric_gradient_sensitivity", "brute_force_max_quadratic_form"]


def _check_P(P) -> np.ndarray:
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"P must be a square matrix, got shape {P.shape}")
    if not np.all(np.isfinite(P)):
        raise ValueError("P must be finite")
    if not np.allclose(P, P.T, rtol=1e-10, atol=1e-12 * max(1.0, float(np.abs(P).max()))):
        raise ValueError("P must be symmetric")
    return 0.5 * (P + P.T)


def _block_vertices(rows) -> list[tuple[list[int], np.ndarray]]:
    out = []
    for b in rows.blocks:
        V = np.asarray(list(b.vertices()), dtype=np.float64).reshape(-1, len(b.indices))
        out.append((list(b.indices), V))
    return out


def _block_bound(P: np.ndarray, verts) -> float:
    """``sum_{b, b'} max_{u in V_b, u' in V_b'} |u^T P_{bb'} u'|`` in one matrix product: every
    vertex embedded in R^d (zeros outside its block), ``Q = E P E^T``, then the largest ``|Q|`` of
    each (block, block) tile (the same sum as the pair loop, without 'for' over block pairs)."""
    d = P.shape[0]
    sizes = [V.shape[0] for _, V in verts]
    E = np.zeros((sum(sizes), d))
    r = 0
    for idx, V in verts:
        E[r:r + V.shape[0], idx] = V
        r += V.shape[0]
    Q = np.abs(E @ P @ E.T)
    starts = np.cumsum([0] + sizes[:-1])
    tiles = np.maximum.reduceat(np.maximum.reduceat(Q, starts, axis=0), starts, axis=1)
    return float(tiles.sum())


def max_quadratic_form(P, *, rows: Any = None, row_norm: float | None = None) -> float:
    """An upper bound on ``sup_x x^T P x`` over admissible rows (see the module docstring).

    ``rows``: an object with ``dim`` and ``blocks`` (each with ``indices`` and ``vertices()``),
    e.g. :meth:`dp_infer.schema.FeatureMap.admissible_rows`; ``row_norm``: the declared bound on
    ``||x||``. At least one is needed; with both, the smaller bound is returned.
    """
    P = _check_P(P)
    if rows is None and row_norm is None:
        raise ValueError("give rows (admissible rows of a schema) and/or row_norm (a norm bound)")
    bounds = []
    if row_norm is not None:
        R = check_positive("row_norm", row_norm)
        bounds.append(max(float(np.linalg.eigvalsh(P)[-1]), 0.0) * R * R)
    if rows is not None:
        if int(rows.dim) != P.shape[0]:
            raise ValueError(f"rows have dim {rows.dim} but P is {P.shape[0]} x {P.shape[0]}")
        bounds.append(_block_bound(P, _block_vertices(rows)))
    return min(bounds)


def brute_force_max_quadratic_form(P, rows, limit: int = 200_000) -> float:
    """``max_x x^T P x`` by enumerating every vertex row (small schemas only; a test oracle)."""
    P = _check_P(P)
    X = np.asarray(rows.vertices(limit=limit), dtype=np.float64)
    return float(np.max(np.einsum("ij,jk,ik->i", X, P, X)))


def metric_gradient_sensitivity(P, n: int, *, link_derivative_bound: float | None = None,
                                grad_diff: float | None = None, rows: Any = None,
                                row_norm: float | None = None) -> float:
    """``Delta_P``: sup ||P^(1/2) (grad l(z) - grad l(z'))|| / n (mean loss over n examples).

    GLM losses (gradient = phi' x with |phi'| <= ``link_derivative_bound``):
    ``2 a sqrt(max_x x^T P x) / n`` over the admissible rows. Otherwise, from the loss's
    gradient-difference bound G: ``sqrt(lambda_max(P)) G / n``. The smaller valid bound wins.
    """
    n = check_positive_int("n", n)
    P = _check_P(P)
    cands = []
    if link_derivative_bound is not None:
        a = check_positive("link_derivative_bound", link_derivative_bound)
        cands.append(2.0 * a * math.sqrt(max_quadratic_form(P, rows=rows, row_norm=row_norm)) / n)
    if grad_diff is not None and math.isfinite(grad_diff):
        G = check_positive("grad_diff", grad_diff)
        cands.append(math.sqrt(max(float(np.linalg.eigvalsh(P)[-1]), 0.0)) * G / n)
    if not cands:
        raise ValueError("need a link_derivative_bound (GLM loss) or a finite grad_diff to bound the sensitivity")
    return min(cands)
