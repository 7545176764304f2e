"""Validation helpers of the schema model: each raises a one-line :class:`SchemaError`."""

from __future__ import annotations

import math
from typing import Any, Sequence

__all__ = ["SchemaError"]


class SchemaError(ValueError):
    """An invalid schema (a ``ValueError``: one line naming the field and the allowed values)."""


def schema_error(where: str, msg: str) -> SchemaError:
    return SchemaError(f"schema {where}: {msg}")


def check_name(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise schema_error(where, f"name must be a non-empty string, got {value!r}")
    return value


def check_bounds(where: str, bounds: Any) -> tuple[float, float]:
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise schema_error(where, f"bounds must be two numbers [lo, hi], got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise schema_error(where, f"bounds must be finite, got [{lo}, {hi}]")
    if not lo < hi:
        raise schema_error(where, f"bounds must satisfy lo < hi, got [{lo}, {hi}] (inverted or empty)")
    return lo, hi


def check_levels(where: str, levels: Any, *, min_count: int = 1) -> tuple[str, ...]:
    if isinstance(levels, (str, bytes)) or not isinstance(levels, Sequence):
        raise schema_error(where, f"levels must be a list of strings, got {levels!r}")
    out = tuple(str(v) for v in levels)
    if len(out) < min_count:
        raise schema_error(where, f"levels must hold at least {min_count} value(s), got {list(out)}")
    dup = sorted({v for v in out if out.count(v) > 1})
    if dup:
        raise schema_error(where, f"levels must be distinct, {dup} repeated")
    return out


def check_choice(where: str, key: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise schema_error(where, f"{key} must be one of {list(allowed)}, got {value!r}")
    return value
