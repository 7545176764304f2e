"""The feature map a schema defines: built from the schema ALONE, then applied to rows.

Coding (identifiable: no direction of theta is flat on every admissible row):

* ``intercept`` (optional): a constant coordinate 1;
* numeric: ``t(clip(v, lo, hi))`` mapped linearly from [t(lo), t(hi)] onto [-1, 1];
* ordinal: the rank ``r`` of ``K`` levels mapped to ``2 r / (K - 1) - 1``;
* categorical: one 0/1 coordinate per level except the reference level (all zeros);
* binary: one 0/1 coordinate, 1 for the second level;
* ``missing: {fill: v}``: the fill value is encoded as above, plus a 0/1 indicator coordinate
  ``<name>:missing`` unless ``indicator: false``;
* ``missing: neutral`` (the default): every coordinate of the column is 0 (the centre of its
  encoded range, or its reference level), which every column already admits;
* a missing target label is an error (a row is never dropped silently: n stays the file's row
  count), except in a schema that already drops rows (``missing: drop`` on a column: n is then
  private, see :mod:`dp_infer.schema.spec`), where the row is dropped too.

Then every coordinate is multiplied by ``s = row_norm / R`` where ``R`` is the exact largest
norm of an encoded row (:meth:`FeatureMap.admissible_rows` before scaling), so the largest
admissible row has norm exactly ``row_norm``. Bounds, levels and ``s`` never depend on the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .admissible import AdmissibleRows, Block, ConstantBlock, IntervalBlock, OneOfBlock, UnionBlock
from .readers import delimiter_hint, read_table
from .report import DataReport
from .spec import OTHER_LEVEL, Column, Schema

__all__ = ["FeatureMap", "EncodedData"]

_TF = {"none": lambda a: a, "log": np.log, "log1p": np.log1p}


@dataclass
class EncodedData:
    """Encoded rows: ``X`` (n, dim), ``y`` (n,) or None, the feature names, and the NON-PRIVATE
    local :class:`~dp_infer.schema.report.DataReport` (never release it)."""

    X: np.ndarray
    y: np.ndarray | None
    feature_names: list[str]
    report: DataReport
    kept: np.ndarray  # bool mask over the rows read (non-private)


def as_level_strings(s: pd.Series) -> pd.Series:
    """Cells as level strings: integral numbers without '.0', strings stripped."""
    if pd.api.types.is_bool_dtype(s):
        return s.map(lambda v: str(bool(v)).lower() if not pd.isna(v) else v)
    if pd.api.types.is_numeric_dtype(s):
        def fmt(v):
            if pd.isna(v):
                return v
            f = float(v)
            return str(int(f)) if f.is_integer() else repr(f)
        return s.map(fmt)
    return s.map(lambda v: v if (v is None or (isinstance(v, float) and math.isnan(v))) else str(v).strip())


def missing_mask(s: pd.Series, na_values: tuple[str, ...]) -> np.ndarray:
    miss = s.isna().to_numpy(dtype=bool).copy()
    if not pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        miss |= s.map(lambda v: isinstance(v, str) and v.strip() in na_values).to_numpy(dtype=bool)
    return miss


def _parse_numbers(s: pd.Series, where: str, ok: np.ndarray) -> np.ndarray:
    """Floats from the cells where ``ok``; a non-number raises naming the first offending row."""
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        vals = s.to_numpy(dtype=float, na_value=np.nan)
    else:
        vals = pd.to_numeric(s.map(lambda v: v.strip() if isinstance(v, str) else v),
                             errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ok & ~np.isfinite(vals)
    if bad.any():
        raise ValueError(f"{where}: a cell is not a finite number (declared numeric; the value is not "
                         "shown: it is private)")
    return vals


class _Layout:
    """Where one column's coordinates go and how to encode it (before the global scale)."""

    def __init__(self, col: Column, start: int):
        self.col = col
        self.start = start
        fill = col.missing.policy == "fill"
        self.indicator = fill and col.missing.indicator
        if col.kind in ("numeric", "ordinal"):
            self.names = [col.name]
        else:
            lv = [v for v in col.all_levels if v != col.reference_level]
            self.levels = lv
            self.names = [f"{col.name}={v}" for v in lv]
        if self.indicator:
            self.names.append(f"{col.name}:missing")
        self.width = len(self.names)

    # -- encode a scalar-valued feature into [-1, 1]
    def unit(self, v: np.ndarray) -> np.ndarray:
        col = self.col
        if col.kind == "numeric":
            lo, hi = col.bounds
            tf = _TF[col.transform]
            tlo, thi = float(tf(lo)), float(tf(hi))
            return 2.0 * (tf(v) - tlo) / (thi - tlo) - 1.0
        k = len(col.levels)
        return 2.0 * v / (k - 1) - 1.0

    def fill_point(self) -> np.ndarray:
        """Encoded coordinates of a filled missing cell (indicator excluded)."""
        col = self.col
        if col.kind == "numeric":
            return self.unit(np.array([float(col.missing.fill)]))
        if col.kind == "ordinal":
            return self.unit(np.array([float(col.levels.index(str(col.missing.fill)))]))
        return np.array([1.0 if v == str(col.missing.fill) else 0.0 for v in self.levels])

    def block(self) -> Block:
        col, idx = self.col, tuple(range(self.start, self.start + self.width))
        scalar = col.kind in ("numeric", "ordinal")
        if not self.indicator:
            if scalar:
                return IntervalBlock(col.name, idx[0], -1.0, 1.0)
            return OneOfBlock(col.name, idx, [1.0] * len(idx))
        fill = tuple((float(f), float(f)) for f in self.fill_point())
        if scalar:
            alts = [((-1.0, 1.0), (0.0, 0.0)), fill + ((1.0, 1.0),)]
        else:
            k = len(self.levels)
            alts = [tuple((0.0, 0.0) for _ in range(k)) + ((0.0, 0.0),)]
            alts += [tuple((1.0, 1.0) if j == i else (0.0, 0.0) for j in range(k)) + ((0.0, 0.0),)
                     for i in range(k)]
            alts.append(fill + ((1.0, 1.0),))
        return UnionBlock(col.name, idx, tuple(alts))


class FeatureMap:
    """The data-independent feature map of a :class:`~dp_infer.schema.spec.Schema`."""

    def __init__(self, schema: Schema):
        if not isinstance(schema, Schema):
            raise ValueError(f"schema must be a dp_infer.schema.Schema, got {type(schema).__name__}")
        self.schema = schema
        names: list[str] = []
        blocks: list[Block] = []
        if schema.intercept:
            names.append("intercept")
            blocks.append(ConstantBlock("intercept", 0, 1.0))
        self._layouts: list[_Layout] = []
        for col in schema.columns:
            lay = _Layout(col, len(names))
            self._layouts.append(lay)
            names += lay.names
            blocks.append(lay.block())
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"schema columns: encoded feature name(s) {dup} collide; rename a column")
        self.feature_names = names
        self.dim = len(names)
        sources = [c.column for c in schema.columns]
        shared = sorted({s for s in sources if sources.count(s) > 1})
        notes = tuple(f"features {[c.name for c in schema.columns if c.column == s]} read the same column "
                      f"{s!r}: the product set is a superset of the rows that occur; sup-type numbers "
                      "are upper bounds" for s in shared)
        raw = AdmissibleRows(self.dim, tuple(blocks), tuple(names), exact=not shared, notes=notes)
        self.raw_max_norm = raw.max_norm()
        self.scale = 1.0 if schema.row_norm is None else schema.row_norm / self.raw_max_norm
        self._admissible = raw.scaled(self.scale)

    # ------------------------------------------------------------------ public facts
    def admissible_rows(self) -> AdmissibleRows:
        """The admissible-row description (after scaling): blocks, ``max_norm()``, ``coordinate_bounds()``."""
        return self._admissible

    @property
    def row_norm(self) -> float:
        """The exact bound on the encoded row norm (the loss's ``row_norm``)."""
        return self._admissible.max_norm()

    def describe(self) -> dict:
        return {"dim": self.dim, "feature_names": list(self.feature_names), "scale": self.scale,
                "row_norm": self.row_norm, "exact": self._admissible.exact}

    # ------------------------------------------------------------------ applying the map
    def transform(self, data: Any, *, target: str = "required", nonprivate_warnings: bool = False,
                  **read_kwargs) -> EncodedData:
        """Encode a table (path, DataFrame, Arrow/polars table): columns matched by NAME.

        ``target``: ``"required"`` (the schema's target must be present), ``"optional"`` (used if
        present) or ``"ignore"``. Out-of-bound numbers are clipped and unknown levels handled as
        declared; the counts go to the returned NON-PRIVATE report. Raises a one-line
        ``ValueError`` (missing column, non-numeric value, undeclared level or label, ...)
        before anything else is computed from the rows; it names the column and what it allows,
        never a cell's value or its row. ``nonprivate_warnings``: emit the NON-PRIVATE
        :class:`~dp_infer.schema.report.ClippingWarning` (a private count; whether it fires
        depends on the rows), off by default so nothing private reaches stderr unasked.
        """
        if target not in ("required", "optional", "ignore"):
            raise ValueError(f"target must be 'required', 'optional' or 'ignore', got {target!r}")
        where = str(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") else type(data).__name__
        sch = self.schema
        is_path = isinstance(data, (str, bytes)) or hasattr(data, "__fspath__")
        df = read_table(data, **({**(sch.read or {}), **read_kwargs} if is_path else read_kwargs))
        cols = list(df.columns)
        missing_cols = [c for c in sch.source_columns if c not in cols]
        if missing_cols:
            raise ValueError(f"data: column(s) {missing_cols} declared in the schema are missing from "
                             f"{where} (columns: {cols})" + delimiter_hint(cols))
        tname = sch.target.name if sch.target is not None else None
        use_target = tname is not None and target != "ignore" and (target == "required" or tname in cols)
        if use_target and tname not in cols:
            raise ValueError(f"data: target column {tname!r} is missing from {where} (columns: {cols})")
        known = set(sch.source_columns) | set(sch.ignore) | ({tname} if tname else set())
        extra = [c for c in cols if c not in known]
        if extra and sch.extra_columns == "error":
            raise ValueError(f"data: column(s) {extra} of {where} are not in the schema; declare them, "
                             "list them under 'ignore', or set extra_columns: ignore")
        rep = DataReport(source=where, n_rows_read=int(df.shape[0]),
                         ignored_columns=[c for c in cols if c not in known or c in sch.ignore])
        miss = {c: missing_mask(df[c], sch.na_values) for c in sch.source_columns}
        drop = np.zeros(df.shape[0], dtype=bool)
        for col in sch.columns:
            if col.missing.policy == "drop":
                newly = miss[col.column] & ~drop
                rep.dropped_missing[col.column] = rep.dropped_missing.get(col.column, 0) + int(newly.sum())
                drop |= miss[col.column]
        if use_target:
            tmiss = missing_mask(df[tname], sch.na_values)
            if tmiss.any() and sch.n_is_public:
                raise ValueError(f"data: target column {tname!r} of {where} has a missing label; a row is "
                                 "never dropped for it (n is public): label or remove such rows in the file")
            rep.dropped_missing[tname] = int((tmiss & ~drop).sum())  # only under missing: drop
            drop |= tmiss
        keep = ~drop
        X = np.zeros((df.shape[0], self.dim))
        if sch.intercept:
            X[:, 0] = 1.0
        clipped_row = np.zeros(df.shape[0], dtype=bool)
        for lay in self._layouts:
            clipped_row |= self._encode_column(lay, df[lay.col.column], miss[lay.col.column], keep, X, rep)
        y = self._encode_target(df[tname], keep, rep) if use_target else None
        X = X[keep] * self.scale
        rep.n_rows_kept = int(keep.sum())
        rep.n_rows_clipped = int((clipped_row & keep).sum())
        if rep.n_rows_kept == 0:
            raise ValueError(f"data: no row of {where} is left after dropping rows with missing values")
        if nonprivate_warnings:
            rep.warn_if_clipped(sch.clip_warn_fraction)
        return EncodedData(X, None if y is None else y[keep], list(self.feature_names), rep, keep)

    def _encode_column(self, lay: _Layout, s: pd.Series, miss: np.ndarray, keep: np.ndarray,
                       X: np.ndarray, rep: DataReport) -> np.ndarray:
        col, j = lay.col, lay.start
        present = keep & ~miss
        filled = keep & miss  # fill or neutral policy (drop removed the others)
        clipped = np.zeros(len(s), dtype=bool)
        where = f"data column {col.column!r}"
        if col.kind == "numeric":
            v = _parse_numbers(s, where, present)
            lo, hi = col.bounds
            low, high = present & (v < lo), present & (v > hi)
            rep.clipped_low[col.name] = int(low.sum())
            rep.clipped_high[col.name] = int(high.sum())
            clipped = low | high
            v = np.where(present, np.clip(np.nan_to_num(v, nan=lo), lo, hi), lo)
            X[:, j] = np.where(present, lay.unit(v), 0.0)
        else:
            lv = as_level_strings(s)
            declared = set(col.levels)
            unknown = present & ~lv.isin(declared).to_numpy()
            if unknown.any() and col.unknown != OTHER_LEVEL:
                raise ValueError(f"{where}: a cell is not a declared level of "
                                 f"{col.name!r} (levels: {list(col.levels)}); declare it or set unknown: other")
            if col.unknown == OTHER_LEVEL:
                rep.unknown_levels[col.column] = int(unknown.sum())
                lv = lv.where(~unknown, OTHER_LEVEL)
            if col.kind == "ordinal":
                rank = lv.map({v: float(i) for i, v in enumerate(col.levels)}).to_numpy(dtype=float, na_value=0.0)
                X[:, j] = np.where(present, lay.unit(rank), 0.0)
            else:
                arr = lv.to_numpy(dtype=object)
                for k, level in enumerate(lay.levels):
                    X[:, j + k] = (present & (arr == level)).astype(float)
        if filled.any():
            rep.filled_missing[col.column] = rep.filled_missing.get(col.column, 0) + int(filled.sum())
        if filled.any() and col.missing.policy == "fill":
            fp = lay.fill_point()
            X[np.ix_(filled, np.arange(j, j + len(fp)))] = fp
        if lay.indicator:
            X[:, j + lay.width - 1] = filled.astype(float)
        return clipped

    def _encode_target(self, s: pd.Series, keep: np.ndarray, rep: DataReport) -> np.ndarray:
        t = self.schema.target
        where = f"target {t.name!r}"
        if t.kind == "binary":
            lv = as_level_strings(s)
            pos, neg = lv.isin(t.positive).to_numpy(), lv.isin(t.negative).to_numpy()
            bad = keep & ~(pos | neg)
            if bad.any():
                raise ValueError(f"{where}: a label is not among the declared "
                                 f"labels (positive {list(t.positive)}, negative {list(t.negative)})")
            return pos.astype(float)
        v = _parse_numbers(s, where, keep)
        if t.kind == "count":
            bad = keep & ((v < 0) | (np.floor(np.nan_to_num(v)) != np.nan_to_num(v)))
            if bad.any():
                raise ValueError(f"{where}: a cell is not a count (an integer >= 0)")
            lo, hi = 0.0, float(t.max_count)
        else:
            lo, hi = t.bounds
        out = keep & ((v < lo) | (v > hi))
        rep.target_clipped = int(out.sum())
        return np.clip(np.nan_to_num(v, nan=lo), lo, hi)
