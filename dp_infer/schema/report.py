"""The local data report: what the feature map did to the rows (NON-PRIVATE).

Counts of dropped, clipped, filled and unknown-level cells are functions of the private data.
They are shown to the data holder on screen and nowhere else: a :class:`DataReport` is never
put into a run report, an exported DataTree or the privacy ledger, and its ``as_dict`` says so
in its first key.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

__all__ = ["DataReport", "ClippingWarning", "NON_PRIVATE_NOTICE"]

NON_PRIVATE_NOTICE = ("NON-PRIVATE local data report: counts computed from the data; show them "
                      "to the data holder only, never release them")


class ClippingWarning(UserWarning):
    """More rows than the schema's ``clip_warn_fraction`` had a value clipped (NON-PRIVATE, local
    only: emitted only on request, ``FeatureMap.transform(..., nonprivate_warnings=True)`` or the
    CLI's ``--nonprivate-diagnostics``)."""


@dataclass
class DataReport:
    """Counts over the private rows (local use only; see the module docstring)."""

    source: str = ""
    n_rows_read: int = 0
    n_rows_kept: int = 0
    dropped_missing: dict = field(default_factory=dict)   # column -> rows dropped for a missing cell
    filled_missing: dict = field(default_factory=dict)    # column -> cells filled
    clipped_low: dict = field(default_factory=dict)       # feature -> values raised to lo
    clipped_high: dict = field(default_factory=dict)      # feature -> values lowered to hi
    unknown_levels: dict = field(default_factory=dict)    # column -> cells mapped to 'other'
    n_rows_clipped: int = 0                              # kept rows with at least one clipped value
    target_clipped: int = 0
    ignored_columns: list = field(default_factory=list)
    non_private: bool = True

    @property
    def fraction_rows_clipped(self) -> float:
        return self.n_rows_clipped / self.n_rows_kept if self.n_rows_kept else 0.0

    def warn_if_clipped(self, threshold: float) -> bool:
        """Emit a :class:`ClippingWarning` when the clipped-row share exceeds ``threshold``."""
        if self.fraction_rows_clipped > threshold:
            warnings.warn(f"NON-PRIVATE: {self.source}: {self.n_rows_clipped} of {self.n_rows_kept} rows "
                          f"({100 * self.fraction_rows_clipped:.1f}%) had a value clipped to its declared "
                          f"bounds (more than clip_warn_fraction = {threshold:g}); check the bounds "
                          "(local, non-private notice)", ClippingWarning, stacklevel=3)
            return True
        return False

    def as_dict(self) -> dict:
        return {"NON_PRIVATE": NON_PRIVATE_NOTICE, "source": self.source,
                "n_rows_read": self.n_rows_read, "n_rows_kept": self.n_rows_kept,
                "dropped_missing": dict(self.dropped_missing), "filled_missing": dict(self.filled_missing),
                "clipped_low": dict(self.clipped_low), "clipped_high": dict(self.clipped_high),
                "unknown_levels": dict(self.unknown_levels), "n_rows_clipped": self.n_rows_clipped,
                "target_clipped": self.target_clipped, "ignored_columns": list(self.ignored_columns)}

    def format(self) -> str:
        """Lines for the screen, headed by the non-private notice."""
        lines = [f"{NON_PRIVATE_NOTICE}:",
                 f"  {self.source}: {self.n_rows_read} rows read, {self.n_rows_kept} kept"]
        for label, d in (("rows dropped for a missing value", self.dropped_missing),
                         ("missing cells filled", self.filled_missing),
                         ("values clipped up to the lower bound", self.clipped_low),
                         ("values clipped down to the upper bound", self.clipped_high),
                         ("unknown levels mapped to 'other'", self.unknown_levels)):
            nz = {k: v for k, v in d.items() if v}
            if nz:
                lines.append(f"  {label}: " + ", ".join(f"{k} {v}" for k, v in nz.items()))
        lines.append(f"  rows with a clipped value: {self.n_rows_clipped} "
                     f"({100 * self.fraction_rows_clipped:.2f}%)")
        if self.target_clipped:
            lines.append(f"  target values clipped: {self.target_clipped}")
        if self.ignored_columns:
            lines.append(f"  columns ignored: {', '.join(self.ignored_columns)}")
        return "\n".join(lines)
