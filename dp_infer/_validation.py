"""Input checks shared by every module: each names the parameter and its allowed range."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def check_positive(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float if it is > 0 (and finite unless ``allow_inf``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if math.isnan(v) or v <= 0 or (math.isinf(v) and not allow_inf):
        rng = "(0, inf]" if allow_inf else "(0, inf)"
        raise ValueError(f"{name} must lie in {rng}, got {value!r}")
    return v


def check_nonnegative(name: str, value: Any) -> float:
    """Return ``value`` as a float if it is finite and >= 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must lie in [0, inf), got {value!r}")
    return v


#: Largest privacy target a planner accepts. Beyond it the guarantee is vacuous anyway, and the
#: exponentials of the conversions (e^eps, e^{eps/2} mu-searches) leave float64's range.
MAX_TARGET_EPSILON = 100.0


def check_epsilon(value: Any, name: str = "eps") -> float:
    """Privacy epsilon: finite and > 0."""
    return check_positive(name, value)


def check_target_epsilon(value: Any, name: str = "eps") -> float:
    """A privacy *target* for a planner: in (0, MAX_TARGET_EPSILON]."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not 0 < v <= MAX_TARGET_EPSILON:  # also refuses NaN
        raise ValueError(f"{name} must lie in (0, {MAX_TARGET_EPSILON:g}] (a larger target gives no "
                         f"meaningful privacy), got {value!r}")
    return v


def check_choice(name: str, value: Any, choices) -> Any:
    """``value`` if it is one of ``choices`` (compared with ==), else a one-line error."""
    if value not in tuple(choices):
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_delta(value: Any, name: str = "delta", *, allow_zero: bool = False) -> float:
    """Privacy delta: in (0, 1) (or [0, 1) with ``allow_zero``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    lo_ok = v >= 0 if allow_zero else v > 0
    if math.isnan(v) or not lo_ok or v >= 1:
        rng = "[0, 1)" if allow_zero else "(0, 1)"
        raise ValueError(f"{name} must lie in {rng}, got {value!r}")
    return v


def check_positive_int(name: str, value: Any) -> int:
    """A strictly positive integer (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def check_finite_array(name: str, value: Any, *, ndim: int | None = None) -> np.ndarray:
    """Convert to a float64 numpy array and refuse NaN/inf or a wrong number of dimensions."""
    arr = np.asarray(value, dtype=np.float64)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(
            f"{name} contains a non-finite value (NaN or inf); every entry must be a finite number: "
            "clean or impute it before fitting"
        )
    return arr
