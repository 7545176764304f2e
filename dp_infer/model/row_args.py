"""Per-row keyword arguments of a NumPyro model: covariates and group indices over the data plate.

``fit(model=..., model_kwargs={"group": g, "num_groups": 8}, index_ranges={"group": 8})``: an array
whose leading dimension is n is part of the row (a replace-one neighbour may change it; the clipped
per-example gradient covers it); an integer array is an index whose declared range is checked (JAX
clamps an out-of-range index silently); any non-array value is a public constant passed unchanged.
The per-row arrays ride as extra float columns after X inside the loss (:func:`pack_row_args`) and
are unpacked per row with their own shapes and dtypes (:meth:`RowArg.unpack`).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

__all__ = ["MAX_INDEX_RANGE", "RowArg", "check_model_kwargs", "pack_row_args"]

#: largest declared index range: indices ride as float32 columns, exact below 2**24
MAX_INDEX_RANGE = 2 ** 24


@dataclass(frozen=True)
class RowArg:
    """A per-row keyword argument of the model: its name, per-row shape, and (for an index) its
    declared range ``0 .. index_range - 1`` (None for a float covariate)."""

    name: str
    shape: tuple[int, ...]
    index_range: int | None = None

    @property
    def width(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    def describe(self) -> dict:
        d = {"per_row_shape": list(self.shape), "kind": "index" if self.index_range is not None else "covariate"}
        if self.index_range is not None:
            d["range"] = [0, self.index_range - 1]
        return d

    def placeholder(self, k: int, value: float = 0.0):
        if self.index_range is not None:
            v = int(min(max(value, 0), self.index_range - 1))
            return jnp.full((k,) + self.shape, v, dtype=jnp.int32)
        return jnp.full((k,) + self.shape, value)

    def unpack(self, cols):
        """Columns of one row (width,) -> the argument of one row, shape (1,) + shape."""
        v = jnp.reshape(cols, (1,) + self.shape)
        return jnp.round(v).astype(jnp.int32) if self.index_range is not None else v


def check_model_kwargs(model_kwargs, index_ranges, n: int, *, x_name: str = "X",
                       y_name: str = "y") -> tuple[tuple[RowArg, ...], dict, dict]:
    """Split and check ``model_kwargs``: ``(row_args, row_values, static)``.

    Per-row arrays (leading dimension ``n``) must be finite; integer (or boolean) arrays are
    indices and need ``index_ranges[name] = G`` (an integer >= 1) with every value in ``0 .. G-1``.
    Non-array values are public constants passed unchanged. One-line ``ValueError`` otherwise
    (before any budget is charged).
    """
    if model_kwargs is None:
        model_kwargs = {}
    if index_ranges is None:
        index_ranges = {}
    if not isinstance(model_kwargs, dict):
        raise ValueError(f"model_kwargs must be a dict of keyword arguments of the model, got {type(model_kwargs).__name__}")
    if not isinstance(index_ranges, dict):
        raise ValueError(f"index_ranges must be a dict name -> number of levels, got {type(index_ranges).__name__}")
    row_args, values, static = [], {}, {}
    for k, v in model_kwargs.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"model_kwargs: keys must be argument names, got {k!r}")
        if k in (x_name, y_name):
            raise ValueError(f"model_kwargs[{k!r}]: the data arguments {x_name!r} and {y_name!r} are passed as X= "
                             "and y=, not in model_kwargs")
        if v is None or isinstance(v, (bool, int, float, str)) or callable(v):
            if k in index_ranges:
                raise ValueError(f"index_ranges[{k!r}]: model_kwargs[{k!r}] is not a per-row array")
            static[k] = v
            continue
        a = np.asarray(v)
        if a.ndim == 0:
            raise ValueError(f"model_kwargs[{k!r}]: a 0-d array; pass a public constant as a Python number")
        if a.shape[0] != n:
            raise ValueError(f"model_kwargs[{k!r}] must be a per-row array with leading dimension n = {n} (one entry "
                             f"per row of X), got shape {a.shape}; pass public constants as Python numbers")
        if a.dtype.kind in "biu":
            if k not in index_ranges:
                raise ValueError(f"model_kwargs[{k!r}] holds integers (an index, e.g. a group): declare its range "
                                 f"with index_ranges={{{k!r}: number_of_levels}} (values 0 .. levels - 1), or pass "
                                 "floats for a numeric covariate")
            G = index_ranges[k]
            if isinstance(G, bool) or not isinstance(G, (int, np.integer)) or not 1 <= G <= MAX_INDEX_RANGE:
                raise ValueError(f"index_ranges[{k!r}] must be an integer in [1, {MAX_INDEX_RANGE}], got {G!r}")
            a = a.astype(np.int64)
            if a.size and (a.min() < 0 or a.max() >= G):
                raise ValueError(f"model_kwargs[{k!r}]: every index must lie in [0, {int(G) - 1}] "
                                 f"(index_ranges[{k!r}] = {int(G)})")
            row_args.append(RowArg(k, tuple(int(s) for s in a.shape[1:]), int(G)))
        elif a.dtype.kind == "f":
            if k in index_ranges:
                raise ValueError(f"index_ranges[{k!r}]: model_kwargs[{k!r}] holds floats; pass an integer array "
                                 "for an index")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"model_kwargs[{k!r}] must be finite (no NaN or inf)")
            row_args.append(RowArg(k, tuple(int(s) for s in a.shape[1:])))
        else:
            raise ValueError(f"model_kwargs[{k!r}] must be a numeric array (float covariate or integer index), "
                             f"got dtype {a.dtype}")
        values[k] = a
    extra = [k for k in index_ranges if k not in model_kwargs]
    if extra:
        raise ValueError(f"index_ranges names {extra} that are not in model_kwargs")
    return tuple(row_args), values, static


def pack_row_args(X, row_args, values) -> np.ndarray:
    """X with the per-row arguments appended as columns (float64), shape (n, d + widths)."""
    X = np.asarray(X, dtype=np.float64)
    cols = [X] + [np.asarray(values[r.name], dtype=np.float64).reshape(X.shape[0], r.width) for r in row_args]
    return np.concatenate(cols, axis=1) if len(cols) > 1 else X


