"""Deprecated: ``dp-infer rashomon`` moved to :mod:`dp_infer.rashomon.cli` in 0.2 (removed in the
next release)."""

import warnings

from .rashomon.cli import rashomon_command

__all__ = ["rashomon_command"]

warnings.warn("dp_infer.rashomon_cli moved to dp_infer.rashomon.cli; the old path will be removed in the "
              "next release", DeprecationWarning, stacklevel=2)
