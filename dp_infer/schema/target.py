"""The label column of a schema: binary (declared labels), bounded numeric, or count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._checks import check_bounds, check_choice, check_name, schema_error

__all__ = ["Target", "TARGET_KINDS"]

TARGET_KINDS = ("binary", "numeric", "count")


@dataclass(frozen=True)
class Target:
    """The label column: ``binary`` (declared positive/negative labels), ``numeric`` (bounds),
    or ``count`` (integers in [0, max_count]). Rows with a missing target are dropped."""

    name: str
    kind: str
    positive: tuple[str, ...] = ()
    negative: tuple[str, ...] = ()
    bounds: tuple[float, float] | None = None
    max_count: int | None = None
    note: str = ""

    def __post_init__(self):
        name = check_name("target", self.name)
        where = f"target {name!r}"
        check_choice(where, "kind", self.kind, TARGET_KINDS)
        if self.kind == "binary":
            pos = (self.positive,) if isinstance(self.positive, (str, int, float)) else self.positive
            neg = (self.negative,) if isinstance(self.negative, (str, int, float)) else self.negative
            pos, neg = tuple(str(v) for v in pos), tuple(str(v) for v in neg)
            if not pos or not neg:
                raise schema_error(where, "a binary target needs declared positive and negative label(s)")
            both = sorted(set(pos) & set(neg))
            if both:
                raise schema_error(where, f"labels {both} are declared both positive and negative")
            object.__setattr__(self, "positive", pos)
            object.__setattr__(self, "negative", neg)
        elif self.positive or self.negative:
            raise schema_error(where, "positive/negative labels are only for a binary target")
        if self.kind == "numeric":
            if self.bounds is None:
                raise schema_error(where, "a numeric target needs bounds [lo, hi]")
            object.__setattr__(self, "bounds", check_bounds(where, self.bounds))
        elif self.bounds is not None:
            raise schema_error(where, "bounds are only for a numeric target (a count target has max_count)")
        if self.kind == "count":
            m = self.max_count
            if isinstance(m, bool) or not isinstance(m, int) or m < 1:
                raise schema_error(where, f"max_count must be an integer >= 1, got {m!r}")
        elif self.max_count is not None:
            raise schema_error(where, "max_count is only for a count target")

    @property
    def label_bound(self) -> float:
        """sup |y| over admissible targets (1 for binary)."""
        if self.kind == "binary":
            return 1.0
        if self.kind == "count":
            return float(self.max_count)
        return max(abs(self.bounds[0]), abs(self.bounds[1]))

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.kind == "binary":
            d["positive"] = list(self.positive)
            d["negative"] = list(self.negative)
        elif self.kind == "numeric":
            d["bounds"] = list(self.bounds)
        else:
            d["max_count"] = self.max_count
        if self.note:
            d["note"] = self.note
        return d
