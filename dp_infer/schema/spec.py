"""The schema model: public facts about the columns of a table, declared before any data is read.

A :class:`Schema` lists feature columns (:class:`Column`) and an optional :class:`Target`.
Everything the feature map needs -- bounds, levels, reference levels, transforms, missing-value
policies -- comes from here, never from the rows. Each constructor validates its arguments and
raises a one-line ``ValueError`` naming the offending field.

Column kinds
------------
``numeric``      value in declared ``bounds`` [lo, hi] (raw units); an optional ``transform``
                 (``log`` or ``log1p``; ``none``/``clip`` = identity) is applied after clipping.
``categorical``  one of the declared ``levels``; a ``reference`` level (default: the first)
                 is coded as all zeros; an unknown value is an error (``unknown: error``) or
                 the extra level ``other`` (``unknown: other``).
``binary``       exactly two levels; one coordinate, 1 for the second level.
``ordinal``      ordered levels; one coordinate, the rank mapped linearly onto [-1, 1].

Target kinds: ``binary`` (declared ``positive`` and ``negative`` labels, coded 1/0), ``numeric``
(declared ``bounds``, clipped), ``count`` (integers in [0, ``max_count``], clipped above).

Missing values: per column, ``neutral`` (the default: every encoded coordinate of the column is
0 -- the centre of a numeric or ordinal column's encoded range, the reference level of a
categorical or binary column; no extra coordinate, so the admissible rows do not change),
``fill`` (a declared fill value inside the bounds / among the levels, plus a 0/1 indicator
coordinate unless ``indicator: false``) or ``drop`` (the row is dropped). Under ``neutral`` and
``fill`` a missing cell never removes a row, so n is the number of rows in the file: public.
``drop`` makes n a function of the private cells (two files differing in one cell, present vs
missing, have different n): the private fit path (``dp-infer sample --schema``) refuses it and
:attr:`Schema.n_is_public` is False; keep it for public files. Which cells count as missing: the
schema's ``na_values`` strings plus null cells of typed tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from ._checks import SchemaError, check_bounds, check_choice, check_levels, check_name, schema_error
from .target import TARGET_KINDS, Target

__all__ = ["Missing", "Column", "Target", "Schema", "SchemaError", "COLUMN_KINDS", "TARGET_KINDS",
           "TRANSFORMS", "OTHER_LEVEL", "MISSING_POLICIES"]

COLUMN_KINDS = ("numeric", "categorical", "binary", "ordinal")
TRANSFORMS = ("none", "clip", "log", "log1p")
OTHER_LEVEL = "other"
DEFAULT_NA_VALUES = ("", "NA", "NaN", "?")
#: per-column missing-value policies; ``neutral`` is the default (n stays public)
MISSING_POLICIES = ("neutral", "fill", "drop")


@dataclass(frozen=True)
class Missing:
    """Missing-value policy of one column: ``neutral`` (default: encoded coordinates 0, n stays
    public), ``fill`` with a declared value (plus a 0/1 indicator coordinate when ``indicator``),
    or ``drop`` the row (n becomes private: see the module docstring)."""

    policy: str = "neutral"
    fill: Any = None
    indicator: bool = True

    def __post_init__(self):
        check_choice("missing", "policy", self.policy, MISSING_POLICIES)
        if self.policy == "fill" and self.fill is None:
            raise schema_error("missing", "policy 'fill' needs a declared fill value")
        if not isinstance(self.indicator, bool):
            raise schema_error("missing", f"indicator must be true or false, got {self.indicator!r}")

    def to_dict(self) -> Any:
        if self.policy in ("drop", "neutral"):
            return self.policy
        return {"fill": self.fill, "indicator": self.indicator}

    @classmethod
    def from_obj(cls, where: str, obj: Any) -> "Missing":
        if obj is None or obj == "neutral":
            return cls()
        if obj == "drop":
            return cls("drop")
        if isinstance(obj, Missing):
            return obj
        if isinstance(obj, Mapping):
            unknown = set(obj) - {"fill", "indicator"}
            if unknown:
                raise schema_error(where, f"unknown key(s) {sorted(unknown)} in missing (allowed: fill, indicator)")
            if "fill" not in obj:
                raise schema_error(where, "missing must be 'neutral', 'drop' or {fill: VALUE, indicator: true|false}")
            return cls("fill", obj["fill"], obj.get("indicator", True))
        raise schema_error(where, f"missing must be 'neutral', 'drop' or {{fill: VALUE, indicator: true|false}}, "
                                  f"got {obj!r}")


@dataclass(frozen=True)
class Column:
    """One feature: its ``name`` (feature name), ``kind`` and declared public facts.

    ``source`` is the data column it reads (default: ``name``); two features may read the same
    column (e.g. a linear and a log1p feature of one amount).
    """

    name: str
    kind: str
    bounds: tuple[float, float] | None = None
    transform: str = "none"
    levels: tuple[str, ...] = ()
    reference: str | None = None
    unknown: str = "error"
    source: str | None = None
    missing: Missing = field(default_factory=Missing)
    note: str = ""

    def __post_init__(self):
        name = check_name("column", self.name)
        where = f"column {name!r}"
        check_choice(where, "kind", self.kind, COLUMN_KINDS)
        if self.source is not None:
            check_name(where + " source", self.source)
        object.__setattr__(self, "missing", Missing.from_obj(where, self.missing))
        if self.kind == "numeric":
            if self.bounds is None:
                raise schema_error(where, "a numeric column needs bounds [lo, hi]")
            if self.levels:
                raise schema_error(where, "levels are only for categorical, binary or ordinal columns")
            lo, hi = check_bounds(where, self.bounds)
            tf = check_choice(where, "transform", self.transform or "none", TRANSFORMS)
            if tf == "log" and lo <= 0:
                raise schema_error(where, f"transform 'log' needs bounds with lo > 0, got lo = {lo}")
            if tf == "log1p" and lo <= -1:
                raise schema_error(where, f"transform 'log1p' needs bounds with lo > -1, got lo = {lo}")
            object.__setattr__(self, "bounds", (lo, hi))
            object.__setattr__(self, "transform", "none" if tf == "clip" else tf)
            if self.missing.policy == "fill":
                try:
                    f = float(self.missing.fill)
                except (TypeError, ValueError):
                    raise schema_error(where, f"missing fill must be a number, got {self.missing.fill!r}") from None
                if not lo <= f <= hi:
                    raise schema_error(where, f"missing fill {f} must lie inside the bounds [{lo}, {hi}]")
        else:
            if self.bounds is not None:
                raise schema_error(where, f"bounds are only for numeric columns, not {self.kind}")
            if self.transform not in (None, "none"):
                raise schema_error(where, f"transform is only for numeric columns, not {self.kind}")
            lv = check_levels(where, self.levels, min_count=1)
            extra = 1 if (self.unknown == OTHER_LEVEL and self.kind == "categorical") else 0
            if len(lv) + extra < 2:
                raise schema_error(where, f"needs at least 2 levels (declared levels, plus 'other' when "
                                  f"unknown: other), got {list(lv)}")
            if self.kind == "binary" and len(lv) != 2:
                raise schema_error(where, f"a binary column has exactly 2 levels, got {list(lv)}")
            check_choice(where, "unknown", self.unknown, ("error", OTHER_LEVEL))
            if self.unknown == OTHER_LEVEL and self.kind != "categorical":
                raise schema_error(where, "unknown: other is only for categorical columns")
            if self.unknown == OTHER_LEVEL and OTHER_LEVEL in lv:
                raise schema_error(where, f"level {OTHER_LEVEL!r} is reserved for unknown: other")
            object.__setattr__(self, "levels", lv)
            if self.reference is not None:
                if self.kind != "categorical":
                    raise schema_error(where, "reference is only for categorical columns")
                ref = str(self.reference)
                if ref not in self.all_levels:
                    raise schema_error(where, f"reference {ref!r} is not a declared level {list(self.all_levels)}")
                object.__setattr__(self, "reference", ref)
            if self.missing.policy == "fill" and str(self.missing.fill) not in self.all_levels:
                raise schema_error(where, f"missing fill {self.missing.fill!r} is not a declared level")

    @property
    def column(self) -> str:
        """The data column this feature reads."""
        return self.source or self.name

    @property
    def all_levels(self) -> tuple[str, ...]:
        """Declared levels, plus ``other`` when ``unknown: other``."""
        return self.levels + ((OTHER_LEVEL,) if self.unknown == OTHER_LEVEL else ())

    @property
    def reference_level(self) -> str | None:
        """Level coded as all zeros (categorical: declared reference or the first level)."""
        if self.kind == "categorical":
            return self.reference if self.reference is not None else self.levels[0]
        if self.kind == "binary":
            return self.levels[0]
        return None

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.source is not None:
            d["source"] = self.source
        if self.kind == "numeric":
            d["bounds"] = list(self.bounds)
            if self.transform != "none":
                d["transform"] = self.transform
        else:
            d["levels"] = list(self.levels)
            if self.reference is not None:
                d["reference"] = self.reference
            if self.unknown != "error":
                d["unknown"] = self.unknown
        d["missing"] = self.missing.to_dict()
        if self.note:
            d["note"] = self.note
        return d


_SCHEMA_KEYS = ("version", "name", "description", "columns", "target", "intercept", "row_norm",
                "na_values", "extra_columns", "ignore", "clip_warn_fraction", "read")
#: CSV dialect keys a schema may carry under ``read`` (defaults for reading a delimited file)
READ_KEYS = ("delimiter", "header", "names", "quotechar", "comment", "skiprows", "encoding")


@dataclass(frozen=True)
class Schema:
    """A table's public schema.

    ``intercept``: prepend a constant coordinate. ``row_norm``: encoded rows are scaled so that
    the largest admissible row has exactly this l2 norm (``None``: no scaling). ``extra_columns``:
    what to do with data columns the schema does not mention (``error`` or ``ignore``; columns
    listed in ``ignore`` are always skipped). ``clip_warn_fraction``: a NON-PRIVATE local warning
    is shown, on request only, when more than this share of rows had a value clipped. ``read``: optional CSV
    dialect (``delimiter``, ``header``, ``names``, ``quotechar``, ``comment``, ``skiprows``,
    ``encoding``) used as defaults when a delimited file is read with this schema.
    """

    columns: tuple[Column, ...]
    target: Target | None = None
    intercept: bool = True
    row_norm: float | None = 1.0
    na_values: tuple[str, ...] = DEFAULT_NA_VALUES
    extra_columns: str = "error"
    ignore: tuple[str, ...] = ()
    clip_warn_fraction: float = 0.05
    name: str = ""
    description: str = ""
    read: Mapping | None = None

    def __post_init__(self):
        cols = tuple(self.columns)
        if not cols:
            raise schema_error("columns", "at least one feature column is required")
        for c in cols:
            if not isinstance(c, Column):
                raise schema_error("columns", f"every column must be a Column, got {type(c).__name__}")
        names = [c.name for c in cols]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise schema_error("columns", f"duplicate column name(s) {dup}")
        object.__setattr__(self, "columns", cols)
        if self.target is not None:
            if not isinstance(self.target, Target):
                raise schema_error("target", f"must be a Target, got {type(self.target).__name__}")
            if self.target.name in {c.column for c in cols}:
                raise schema_error("target", f"{self.target.name!r} is also a feature column")
        if not isinstance(self.intercept, bool):
            raise schema_error("intercept", f"must be true or false, got {self.intercept!r}")
        if self.row_norm is not None:
            try:
                r = float(self.row_norm)
            except (TypeError, ValueError):
                r = math.nan
            if not (math.isfinite(r) and r > 0):
                raise schema_error("row_norm", f"must be a number in (0, inf) or null, got {self.row_norm!r}")
            object.__setattr__(self, "row_norm", r)
        if isinstance(self.na_values, (str, bytes)):
            raise schema_error("na_values", f"must be a list of strings, got {self.na_values!r}")
        object.__setattr__(self, "na_values", tuple(str(v) for v in self.na_values))
        check_choice("extra_columns", "extra_columns", self.extra_columns, ("error", "ignore"))
        if isinstance(self.ignore, (str, bytes)):
            raise schema_error("ignore", f"must be a list of column names, got {self.ignore!r}")
        ign = tuple(str(v) for v in self.ignore)
        used = {c.column for c in cols} | ({self.target.name} if self.target else set())
        clash = sorted(set(ign) & used)
        if clash:
            raise schema_error("ignore", f"column(s) {clash} are both used and ignored")
        object.__setattr__(self, "ignore", ign)
        try:
            f = float(self.clip_warn_fraction)
        except (TypeError, ValueError):
            f = math.nan
        if not 0 <= f <= 1:
            raise schema_error("clip_warn_fraction", f"must lie in [0, 1], got {self.clip_warn_fraction!r}")
        object.__setattr__(self, "clip_warn_fraction", f)
        if self.read is not None:
            if not isinstance(self.read, Mapping):
                raise schema_error("read", f"must be a mapping of CSV options {list(READ_KEYS)}, got {self.read!r}")
            unknown = sorted(set(self.read) - set(READ_KEYS))
            if unknown:
                raise schema_error("read", f"unknown key(s) {unknown} (allowed: {list(READ_KEYS)})")
            object.__setattr__(self, "read", dict(self.read))

    # ------------------------------------------------------------------ views
    @property
    def source_columns(self) -> tuple[str, ...]:
        """Data columns the features read (each once, in schema order)."""
        return tuple(dict.fromkeys(c.column for c in self.columns))

    @property
    def n_is_public(self) -> bool:
        """True when no column drops rows (no ``missing: drop``): the number of encoded rows is
        then the number of rows in the file, whatever the cells hold. A schema property, never a
        function of the data."""
        return not self.drop_columns

    @property
    def drop_columns(self) -> tuple[str, ...]:
        """Feature names whose missing-value policy is ``drop`` (they make n private)."""
        return tuple(c.name for c in self.columns if c.missing.policy == "drop")

    def require_public_n(self, where: str = "schema") -> None:
        """Refuse a schema whose ``missing: drop`` would make n private (checked on the schema
        alone, before any row is read)."""
        if self.drop_columns:
            raise ValueError(f"{where}: column(s) {list(self.drop_columns)} declare missing: drop, which makes "
                             "n private (a file with one more missing cell has one row fewer); declare "
                             "missing: neutral (the default) or missing: {fill: VALUE}")

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise ValueError(f"column must be one of {[c.name for c in self.columns]}, got {name!r}")

    def with_target(self, target: Target | None) -> "Schema":
        return replace(self, target=target)

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict:
        d: dict[str, Any] = {"version": 1}
        if self.name:
            d["name"] = self.name
        if self.description:
            d["description"] = self.description
        d.update({"intercept": self.intercept, "row_norm": self.row_norm,
                  "na_values": list(self.na_values), "extra_columns": self.extra_columns})
        if self.ignore:
            d["ignore"] = list(self.ignore)
        if self.read:
            d["read"] = dict(self.read)
        d["clip_warn_fraction"] = self.clip_warn_fraction
        if self.target is not None:
            d["target"] = self.target.to_dict()
        d["columns"] = [c.to_dict() for c in self.columns]
        return d

    @classmethod
    def from_dict(cls, d: Any) -> "Schema":
        """Build and validate a schema from plain data (as read from YAML or JSON)."""
        if not isinstance(d, Mapping):
            raise schema_error("file", f"the top level must be a mapping with a 'columns' list, got {type(d).__name__}")
        unknown = sorted(set(d) - set(_SCHEMA_KEYS))
        if unknown:
            raise schema_error("file", f"unknown key(s) {unknown} (allowed: {list(_SCHEMA_KEYS)})")
        if d.get("version", 1) != 1:
            raise schema_error("version", f"must be 1, got {d.get('version')!r}")
        raw_cols = d.get("columns")
        if not isinstance(raw_cols, list):
            raise schema_error("columns", f"must be a list of column entries, got {raw_cols!r}")
        cols = tuple(_column_from_dict(c) for c in raw_cols)
        target = _target_from_dict(d["target"]) if d.get("target") is not None else None
        kw = {k: d[k] for k in ("intercept", "row_norm", "na_values", "extra_columns", "ignore",
                                "clip_warn_fraction", "name", "description", "read") if k in d}
        return cls(columns=cols, target=target, **kw)


_COLUMN_KEYS = {f.name for f in fields(Column)}
_TARGET_KEYS = {f.name for f in fields(Target)}


def _column_from_dict(d: Any) -> Column:
    if not isinstance(d, Mapping) or "name" not in d:
        raise schema_error("columns", f"each entry must be a mapping with a 'name', got {d!r}")
    unknown = sorted(set(d) - _COLUMN_KEYS)
    if unknown:
        raise schema_error(f"column {d['name']!r}", f"unknown key(s) {unknown} (allowed: {sorted(_COLUMN_KEYS)})")
    if "kind" not in d:
        raise schema_error(f"column {d['name']!r}", f"kind is required (one of {list(COLUMN_KINDS)})")
    kw = dict(d)
    if kw.get("bounds") is not None and not isinstance(kw["bounds"], (list, tuple)):
        raise schema_error(f"column {d['name']!r}", f"bounds must be two numbers [lo, hi], got {kw['bounds']!r}")
    if kw.get("bounds") is not None:
        kw["bounds"] = tuple(kw["bounds"])
    if "levels" in kw:
        kw["levels"] = check_levels(f"column {d['name']!r}", kw["levels"], min_count=0)
    if kw.get("transform") is None:
        kw.pop("transform", None)
    return Column(**kw)


def _target_from_dict(d: Any) -> Target:
    if not isinstance(d, Mapping) or "name" not in d or "kind" not in d:
        raise schema_error("target", f"must be a mapping with 'name' and 'kind', got {d!r}")
    unknown = sorted(set(d) - _TARGET_KEYS)
    if unknown:
        raise schema_error(f"target {d['name']!r}", f"unknown key(s) {unknown} (allowed: {sorted(_TARGET_KEYS)})")
    kw = dict(d)
    for k in ("positive", "negative"):
        if k in kw and isinstance(kw[k], list):
            kw[k] = tuple(kw[k])
    if kw.get("bounds") is not None:
        if not isinstance(kw["bounds"], (list, tuple)):
            raise schema_error(f"target {d['name']!r}", f"bounds must be two numbers [lo, hi], got {kw['bounds']!r}")
        kw["bounds"] = tuple(kw["bounds"])
    return Target(**kw)
