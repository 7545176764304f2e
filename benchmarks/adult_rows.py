"""Adult in natural units with its admissible rows (the posterior-quality benchmark's data).

Features (``dp_infer.datasets.load_adult``'s data-independent map, undone to natural units): an
intercept 1, eight numeric features mapped from declared ranges to [-1, 1] and clamped to it
coordinate-wise (a per-row, data-independent map; the count of clamped rows is reported), and
complete one-hot codings of the eight categorical columns. Every row then lies in the product
of blocks "intercept = 1", "numeric in [-1, 1]" and "exactly one level per group": the
admissible rows, of norm <= sqrt(17). The intercept minus a complete one-hot group is orthogonal
to every admissible row (a direction no row reaches: zero sensitivity, sampled from the prior).

:class:`AdultRows` is the minimal interface :mod:`dp_infer.privacy.metric_sensitivity` reads
(``dim``, ``blocks`` with ``indices`` and ``vertices()``) plus ``contains`` and ``max_norm``
(what ``fit_posterior`` checks); a schema's ``AdmissibleRows`` is the general form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class _Block:
    indices: tuple[int, ...]
    verts: tuple[tuple[float, ...], ...]

    def vertices(self):
        return iter(self.verts)


class AdultRows:
    """Admissible rows: intercept 1, numerics in [-1, 1], one active level per complete group."""

    def __init__(self, num_numeric: int, group_sizes: list[int]):
        blocks, j = [_Block((0,), ((1.0,),))], 1
        self.numeric = tuple(range(1, 1 + num_numeric))
        for _ in range(num_numeric):
            blocks.append(_Block((j,), ((-1.0,), (1.0,))))
            j += 1
        self.groups = []
        for k in group_sizes:
            idx = tuple(range(j, j + k))
            blocks.append(_Block(idx, tuple(tuple(r) for r in np.eye(k))))
            self.groups.append(idx)
            j += k
        self.blocks, self.dim = tuple(blocks), j

    def spanning_rows(self) -> np.ndarray:
        """Admissible rows spanning every reachable direction: a base row (numerics +1, first
        level of each group) and its one-coordinate / one-level changes (public, data free)."""
        base = np.zeros(self.dim)
        base[0] = 1.0
        base[list(self.numeric)] = 1.0
        for idx in self.groups:
            base[idx[0]] = 1.0
        out = [base]
        for j in self.numeric:
            r = base.copy()
            r[j] = -1.0
            out.append(r)
        for idx in self.groups:
            for k in idx[1:]:
                r = base.copy()
                r[idx[0]], r[k] = 0.0, 1.0
                out.append(r)
        return np.asarray(out)

    def max_norm(self) -> float:
        return math.sqrt(1 + len(self.numeric) + len(self.groups))

    def contains(self, X, tol: float = 1e-9) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        ok = np.abs(X[:, 0] - 1.0) <= tol
        num = X[:, list(self.numeric)]
        ok &= np.all(np.abs(num) <= 1.0 + tol, axis=1)
        for idx in self.groups:
            G = X[:, list(idx)]
            ok &= (np.abs(G.sum(axis=1) - 1.0) <= tol) & np.all((np.abs(G) <= tol) | (np.abs(G - 1) <= tol), axis=1)
        return ok


@dataclass(frozen=True)
class AdultNatural:
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    rows: AdultRows
    clamped_train: int
    clamped_test: int
    feature_names: list


def load_adult_natural() -> AdultNatural:
    from dp_infer.datasets import load_adult

    a = load_adult(row_norm=1e9)  # no clipping: rows are re-scaled to natural units below
    names = a.feature_names
    num = [i for i, nm in enumerate(names) if i > 0 and "=" not in nm]
    groups, cur, prev = [], [], None
    for i, nm in enumerate(names):
        if "=" in nm:
            g = nm.split("=", 1)[0]
            if g != prev and cur:
                groups.append(len(cur))
                cur = []
            cur.append(i)
            prev = g
    groups.append(len(cur))
    width = math.sqrt(1 + len(num) + len(groups))
    out = []
    for X in (a.X_train, a.X_test):
        Z = X * width
        clamped = int(np.sum(np.any(np.abs(Z[:, num]) > 1.0, axis=1)))
        Z[:, num] = np.clip(Z[:, num], -1.0, 1.0)
        out.append((Z, clamped))
    rows = AdultRows(len(num), groups)
    if num != list(rows.numeric) or not np.all(rows.contains(out[0][0])):
        raise RuntimeError("the Adult feature map changed: rebuild AdultRows")
    return AdultNatural(out[0][0], a.y_train, out[1][0], a.y_test, rows, out[0][1], out[1][1], names)
