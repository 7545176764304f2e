"""The set of encoded rows a feature map can produce ("admissible rows"), block by block.

A schema's feature map sends every row to a vector whose coordinates fall into independent
*blocks*, one per feature (plus the intercept). Each block is a finite union of boxes over its
own coordinates ("alternatives"); the admissible set is the product of the blocks. Three kinds
cover the schema's features:

* :class:`ConstantBlock` -- one coordinate that always takes the same value (the intercept);
* :class:`IntervalBlock` -- one coordinate anywhere in [lo, hi] (numeric, ordinal);
* :class:`OneOfBlock` -- a group of coordinates of which at most one is non-zero, coordinate
  ``k`` taking ``values[k]`` when active; all zeros is the reference level (categorical,
  binary);

and :class:`UnionBlock` is the general form (a list of boxes), used for a feature whose missing
values are filled and flagged by an indicator coordinate (the value coordinate is either free
with the indicator 0, or the fill value with the indicator 1).

Because blocks are independent, sup-type quantities are exact sums of per-block maxima:
``max_norm() = sqrt(sum_b max_{alternative} sum_{coord} max(lo^2, hi^2))`` and
``max_linear(w) = sum_b max_{alternative} sum_{coord} max(w lo, w hi)``. When two features read
the same data column (``exact`` is False) the product set contains rows that cannot occur
together, and these numbers are upper bounds rather than attained maxima.

Issue 12's sensitivity "over the rows that can actually occur" reads this object: e.g. the
gradient of a GLM loss at x is a multiple of x, so sup over admissible x of ||P^(1/2) x|| (or of
|<w, x>|) replaces the norm ball.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Block", "ConstantBlock", "IntervalBlock", "OneOfBlock", "UnionBlock", "AdmissibleRows"]

Box = tuple[tuple[float, float], ...]  # per coordinate of the block: (lo, hi)


@dataclass(frozen=True)
class Block:
    """A set of values for the coordinates ``indices``: the union of the boxes ``alternatives``."""

    name: str
    indices: tuple[int, ...]
    alternatives: tuple[Box, ...]

    def __post_init__(self):
        for box in self.alternatives:
            if len(box) != len(self.indices):
                raise ValueError(f"block {self.name!r}: every alternative needs {len(self.indices)} intervals")
            for lo, hi in box:
                if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                    raise ValueError(f"block {self.name!r}: intervals must be finite with lo <= hi")

    @property
    def kind(self) -> str:
        return "union"

    def max_sq_norm(self) -> float:
        """sup of the squared l2 norm of the block's coordinates (exact)."""
        return max(sum(max(lo * lo, hi * hi) for lo, hi in box) for box in self.alternatives)

    def coordinate_bounds(self) -> np.ndarray:
        """(len(indices), 2): the smallest and largest value of each coordinate over the block."""
        arr = np.asarray(self.alternatives, dtype=float)  # (alts, coords, 2)
        return np.stack([arr[:, :, 0].min(axis=0), arr[:, :, 1].max(axis=0)], axis=1)

    def max_linear(self, w: np.ndarray) -> float:
        """sup of <w, x_block> over the block (w restricted to the block's coordinates)."""
        return max(sum(max(wi * lo, wi * hi) for wi, (lo, hi) in zip(w, box)) for box in self.alternatives)

    def vertices(self):
        """Every vertex of every box (finite; includes each point where a sup above is attained)."""
        seen = set()
        for box in self.alternatives:
            for v in itertools.product(*[sorted({lo, hi}) for lo, hi in box]):
                if v not in seen:
                    seen.add(v)
                    yield v

    def scaled(self, s: float) -> "Block":
        alts = tuple(tuple((s * lo, s * hi) for lo, hi in box) for box in self.alternatives)
        return type(self)._rebuild(self, alts)

    @staticmethod
    def _rebuild(block: "Block", alts) -> "Block":
        return UnionBlock(block.name, block.indices, alts)

    def describe(self) -> dict:
        return {"kind": self.kind, "name": self.name, "indices": list(self.indices),
                "alternatives": [[list(iv) for iv in box] for box in self.alternatives]}


class UnionBlock(Block):
    """General block: a finite union of boxes over its coordinates."""


class ConstantBlock(Block):
    """One coordinate fixed at ``value`` (the intercept)."""

    def __init__(self, name: str, index: int, value: float):
        super().__init__(name, (index,), (((value, value),),))

    @property
    def kind(self) -> str:
        return "constant"

    @property
    def value(self) -> float:
        return self.alternatives[0][0][0]

    @staticmethod
    def _rebuild(block, alts):
        return ConstantBlock(block.name, block.indices[0], alts[0][0][0])

    def describe(self) -> dict:
        return {"kind": "constant", "name": self.name, "index": self.indices[0], "value": self.value}


class IntervalBlock(Block):
    """One coordinate anywhere in [lo, hi]."""

    def __init__(self, name: str, index: int, lo: float, hi: float):
        super().__init__(name, (index,), (((lo, hi),),))

    @property
    def kind(self) -> str:
        return "interval"

    @property
    def interval(self) -> tuple[float, float]:
        return self.alternatives[0][0]

    @staticmethod
    def _rebuild(block, alts):
        return IntervalBlock(block.name, block.indices[0], *alts[0][0])

    def describe(self) -> dict:
        return {"kind": "interval", "name": self.name, "index": self.indices[0],
                "lo": self.interval[0], "hi": self.interval[1]}


class OneOfBlock(Block):
    """At most one coordinate non-zero; coordinate k equals ``values[k]`` when active.

    All zeros (the reference level) is always admissible.
    """

    def __init__(self, name: str, indices, values):
        indices, values = tuple(indices), tuple(float(v) for v in values)
        if len(indices) != len(values):
            raise ValueError(f"block {name!r}: one value per coordinate")
        zero = tuple((0.0, 0.0) for _ in indices)
        alts = [zero] + [tuple((v, v) if j == k else (0.0, 0.0) for j in range(len(indices)))
                         for k, v in enumerate(values)]
        super().__init__(name, indices, tuple(alts))
        object.__setattr__(self, "values", values)

    @property
    def kind(self) -> str:
        return "one_of"

    @staticmethod
    def _rebuild(block, alts):
        return OneOfBlock(block.name, block.indices, [alts[k + 1][k][0] for k in range(len(block.indices))])

    def describe(self) -> dict:
        return {"kind": "one_of", "name": self.name, "indices": list(self.indices),
                "values": list(self.values)}


@dataclass(frozen=True)
class AdmissibleRows:
    """The product of independent blocks covering coordinates 0..dim-1 exactly once.

    ``exact`` is False when some data column feeds more than one block (then the product set is
    a superset of the rows that can occur and the sup-type methods give upper bounds).
    """

    dim: int
    blocks: tuple[Block, ...]
    feature_names: tuple[str, ...]
    exact: bool = True
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        idx = sorted(i for b in self.blocks for i in b.indices)
        if idx != list(range(self.dim)):
            raise ValueError("blocks must cover the coordinates 0..dim-1 exactly once")

    def max_norm(self) -> float:
        """sup ||x||_2 over admissible rows (exact when ``exact``; else an upper bound)."""
        return math.sqrt(sum(b.max_sq_norm() for b in self.blocks))

    def coordinate_bounds(self) -> np.ndarray:
        """(dim, 2) array: [min, max] of each coordinate over admissible rows (exact per coordinate)."""
        out = np.zeros((self.dim, 2))
        for b in self.blocks:
            out[list(b.indices)] = b.coordinate_bounds()
        return out

    def max_linear(self, w) -> float:
        """sup <w, x> over admissible rows (exact when ``exact``); ``max_abs_linear`` for |.|."""
        w = np.asarray(w, dtype=float)
        if w.shape != (self.dim,):
            raise ValueError(f"w must have shape ({self.dim},), got {w.shape}")
        return float(sum(b.max_linear(w[list(b.indices)]) for b in self.blocks))

    def max_abs_linear(self, w) -> float:
        """sup |<w, x>| over admissible rows."""
        w = np.asarray(w, dtype=float)
        return max(self.max_linear(w), self.max_linear(-w))

    def num_vertices(self) -> int:
        return math.prod(sum(1 for _ in b.vertices()) for b in self.blocks)

    def vertices(self, limit: int = 100_000) -> np.ndarray:
        """All vertex rows of the product set (for brute-force checks on small schemas)."""
        if self.num_vertices() > limit:
            raise ValueError(f"limit: the admissible set has {self.num_vertices()} vertices (> {limit})")
        per_block = [list(b.vertices()) for b in self.blocks]
        rows = []
        for combo in itertools.product(*per_block):
            x = np.zeros(self.dim)
            for b, v in zip(self.blocks, combo):
                x[list(b.indices)] = v
            rows.append(x)
        return np.asarray(rows)

    def contains(self, X, tol: float = 1e-9) -> np.ndarray:
        """Boolean mask: which rows of X lie in the admissible set (up to ``tol``)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        ok = np.ones(X.shape[0], dtype=bool)
        for b in self.blocks:
            sub = X[:, list(b.indices)]
            inside = np.zeros(X.shape[0], dtype=bool)
            for box in b.alternatives:
                lo = np.array([iv[0] for iv in box]) - tol
                hi = np.array([iv[1] for iv in box]) + tol
                inside |= np.all((sub >= lo) & (sub <= hi), axis=1)
            ok &= inside
        return ok

    def scaled(self, s: float) -> "AdmissibleRows":
        return AdmissibleRows(self.dim, tuple(b.scaled(s) for b in self.blocks), self.feature_names,
                              self.exact, self.notes)

    def describe(self) -> dict:
        return {"dim": self.dim, "exact": self.exact, "max_norm": self.max_norm(),
                "notes": list(self.notes), "blocks": [b.describe() for b in self.blocks]}
