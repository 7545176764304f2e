"""Reduced-precision storage of the rows, with the declared row bound rechecked on the cast data.

Storing X as bfloat16 halves the bytes a full-batch gradient reads. The sampler then computes the
loss of the CAST rows (promoted to float32 block by block, accumulated in float32: see
:mod:`dp_infer.losses.row_blocks`), so the sensitivity must hold for those rows, not for the float32
ones: rounding to nearest can lengthen a row by up to a relative 2^-8 and push a row that sat on
the declared bound ``||x|| <= R`` over it. Two guards:

* ``rounding="toward_zero"`` (default) truncates the mantissa, so every coordinate keeps its sign
  and does not grow in magnitude: ``||cast(x)|| <= ||x|| <= R`` for every row by construction;
* whatever the rounding, :func:`check_cast_rows` recomputes every row norm of the cast data in
  float64 and refuses (``ValueError``) any row over the bound, before anything runs.

Labels are kept in their own dtype (exact small integers); only X is cast.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .._validation import check_choice
from ..losses.base import ROW_NORM_SLACK

__all__ = ["DATA_DTYPES", "ROUNDINGS", "cast_rows", "check_cast_rows", "storage_dtype"]

#: dtypes the rows may be stored in (accumulation is float32 either way)
DATA_DTYPES = ("float32", "bfloat16")
ROUNDINGS = ("toward_zero", "nearest")


def storage_dtype(name: str) -> np.dtype:
    """The numpy dtype of a storage name in :data:`DATA_DTYPES`."""
    check_choice("dtype", name, DATA_DTYPES)
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(np.float32)


def cast_rows(X, dtype: str = "bfloat16", *, rounding: str = "toward_zero") -> np.ndarray:
    """X (finite) as ``dtype``; bfloat16 with ``rounding`` ``"toward_zero"`` (magnitudes never
    grow) or ``"nearest"`` (ties to even). Works on any block of rows; returns a new array."""
    target = storage_dtype(dtype)
    check_choice("rounding", rounding, ROUNDINGS)
    x32 = np.ascontiguousarray(X, dtype=np.float32)
    if target == np.float32:
        return x32
    if rounding == "nearest":
        return x32.astype(target)
    # bfloat16 is the top half of a float32: dropping the low 16 bits truncates the mantissa,
    # i.e. rounds toward zero (sign-magnitude format), for normal and subnormal values alike
    top = (x32.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return top.view(target)


def check_cast_rows(X_cast, row_norm: float, *, name: str = "X") -> None:
    """Refuse (one-line ``ValueError``) any row of the cast data whose float64 norm exceeds
    ``row_norm`` (the same relative slack :data:`~dp_infer.losses.base.ROW_NORM_SLACK` as :meth:`dp_infer.losses.PerExampleLoss.check_data`)
    or any non-finite value. ``row_norm = inf`` (clipped losses) checks finiteness only."""
    x = np.asarray(X_cast).astype(np.float64)
    bad = ~np.isfinite(x)
    if bad.any():
        raise ValueError(f"{name} contains a non-finite value after the cast to "
                         f"{np.asarray(X_cast).dtype}; clean them before fitting")
    if math.isinf(row_norm):
        return
    norms = np.linalg.norm(x, axis=1)
    over = int(np.sum(norms > row_norm * (1 + ROW_NORM_SLACK)))
    if over:
        raise ValueError(
            f"{name}: a row exceeds the declared row_norm={row_norm} after the cast to "
            f"{np.asarray(X_cast).dtype}; cast with rounding='toward_zero', "
            "which never lengthens a row")
