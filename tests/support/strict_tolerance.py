"""``approx``: pytest.approx without its default absolute tolerance of 1e-12.

Oracle tests of privacy numbers compare values that can be ~1e-3 or smaller, where pytest's
default ``abs=1e-12`` would hide a relative error of 1e-9 or more (it hid a 2e-12 under-report in
``last_iterate_rho``). Import it as ``from strict_tolerance import approx``.
"""

from __future__ import annotations

import pytest


def approx(expected, rel=None, abs=0.0):
    """``pytest.approx(expected, rel=rel, abs=abs)`` with ``abs`` defaulting to 0."""
    return pytest.approx(expected, rel=rel, abs=abs)
