"""The Python form of a schema: short constructors for columns and targets.

``Schema(columns=(numeric("age", 18, 90), categorical("region", ["n", "s"])),
target=binary_target("y", "yes", "no"))`` is the same schema as the YAML file with those entries.
"""

from __future__ import annotations

from typing import Any, Sequence

from .spec import Column, Missing, Target

__all__ = ["numeric", "categorical", "binary", "ordinal", "binary_target", "numeric_target", "count_target"]

# ---------------------------------------------------------------------------------------------

def numeric(name: str, lo: float, hi: float, *, transform: str = "none", source: str | None = None,
            missing: Any = "neutral") -> Column:
    """A numeric feature with public bounds [lo, hi] (raw units) and an optional transform."""
    return Column(name, "numeric", bounds=(lo, hi), transform=transform, source=source,
                  missing=Missing.from_obj(f"column {name!r}", missing))


def categorical(name: str, levels: Sequence[str], *, reference: str | None = None,
                unknown: str = "error", source: str | None = None, missing: Any = "neutral") -> Column:
    """A categorical feature with public levels (reference level coded as all zeros)."""
    return Column(name, "categorical", levels=tuple(levels), reference=reference, unknown=unknown,
                  source=source, missing=Missing.from_obj(f"column {name!r}", missing))


def binary(name: str, levels: Sequence[str], *, source: str | None = None, missing: Any = "neutral") -> Column:
    """A two-level feature: one coordinate, 1 for ``levels[1]``."""
    return Column(name, "binary", levels=tuple(levels), source=source,
                  missing=Missing.from_obj(f"column {name!r}", missing))


def ordinal(name: str, levels: Sequence[str], *, source: str | None = None, missing: Any = "neutral") -> Column:
    """Ordered levels: one coordinate, rank mapped linearly onto [-1, 1]."""
    return Column(name, "ordinal", levels=tuple(levels), source=source,
                  missing=Missing.from_obj(f"column {name!r}", missing))


def binary_target(name: str, positive: Any, negative: Any) -> Target:
    """Binary label: values in ``positive`` -> 1, in ``negative`` -> 0, anything else an error."""
    return Target(name, "binary", positive=positive, negative=negative)


def numeric_target(name: str, lo: float, hi: float) -> Target:
    """Real label with public bounds (values outside are clipped and counted)."""
    return Target(name, "numeric", bounds=(lo, hi))


def count_target(name: str, max_count: int) -> Target:
    """Count label: integers in [0, max_count] (larger counts clipped and counted)."""
    return Target(name, "count", max_count=max_count)
