"""The delta that the noise generator's departure from N(0, 1) adds to an event (issue 40).

The accountant assumes real-valued Gaussian noise. A generator departs from it in two ways:

* **mass it moves** (:func:`noise_delta`): if each coordinate's law ``Q`` is within ``tau`` of
  N(0, 1) in total variation, then for any event ``S`` of ``N`` coordinate-draws,
  ``Q'(S) <= P'(S) + N tau <= e^eps P(S) + delta + N tau <= e^eps Q(S) + delta + (1 + e^eps) N tau``:
  the mechanism is (eps, delta + (1 + e^eps) N tau)-DP wherever the ideal one is (eps, delta).
  :func:`dp_infer.randomness.gaussian_noise` has ``tau = 2**-97`` (its law without the grid).
* **a hard truncation** (:func:`truncation_delta`): noise on ``[-T, T]`` only (the float32
  ``jax.random.normal`` stops at 5.42 sds). A neighbour whose noise is shifted by ``Delta`` sds
  puts mass ``s = (Phi(-(T - Delta)) - Phi(-T)) / (1 - 2 Phi(-T))`` where the other run has
  none, so delta at *every* eps is at least ``1 - (1 - s)^N`` over ``N`` such draws: a lower
  bound of what truncation costs (its grid, a quarter of an sd wide at the top for float32,
  costs more and is not in this figure). The TV route above gives nothing useful there
  (``tau = 2 Phi(-T) = 6e-8`` per coordinate).

Both are arithmetic on public figures (counts, shifts, eps): nothing here reads data.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .._validation import check_positive
from ..randomness import JAX_FLOAT32_NORMAL_MAX, NOISE_TAIL_SD, NOISE_TV_PER_DRAW

__all__ = ["noise_delta", "truncation_delta", "sliver_mass", "NOISE_TAIL_SD", "NOISE_TV_PER_DRAW",
           "JAX_FLOAT32_NORMAL_MAX"]


def _count(name: str, value) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number >= 0 (a count of coordinate-draws), got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number >= 0 (a count of coordinate-draws), got {value!r}") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0 (a count of coordinate-draws), got {value!r}")
    return v


def noise_delta(num_draws, eps: float, tv_per_draw: float = NOISE_TV_PER_DRAW) -> float:
    """``(1 + e^eps) * num_draws * tv_per_draw``: the delta added to an (eps, delta) statement
    about ``num_draws`` Gaussian coordinate-draws when each coordinate's law is within
    ``tv_per_draw`` of N(0, 1) in total variation (default: :func:`~dp_infer.randomness.gaussian_noise`'s
    2**-97). Capped at 1."""
    n = _count("num_draws", num_draws)
    eps = float(eps)
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    tau = float(tv_per_draw)
    if not (0.0 <= tau <= 1.0):
        raise ValueError(f"tv_per_draw must lie in [0, 1], got {tv_per_draw!r}")
    if tau == 0.0 or n == 0.0:
        return 0.0
    return float(min(1.0, math.exp(math.log1p(math.exp(eps)) + math.log(n) + math.log(tau))))


def sliver_mass(shift: float, tail_sd: float = JAX_FLOAT32_NORMAL_MAX) -> float:
    """For N(0, 1) truncated to ``[-tail_sd, tail_sd]``: the mass that noise shifted by ``shift``
    sds puts outside the unshifted noise's support, ``(Phi(-(T - shift)) - Phi(-T)) / (1 - 2 Phi(-T))``
    (computed in log space: no cancellation for small shifts)."""
    T = check_positive("tail_sd", tail_sd)
    s = abs(float(shift))
    if not math.isfinite(s):
        raise ValueError(f"shift must be finite, got {shift!r}")
    if s == 0.0:
        return 0.0
    if s >= 2 * T:
        return 1.0
    log_sf_T = stats.norm.logsf(T)
    ratio = math.expm1(float(stats.norm.logsf(T - s) - log_sf_T))  # (sf(T - s) - sf(T)) / sf(T)
    z = -math.expm1(math.log(2.0) + log_sf_T)  # 1 - 2 sf(T)
    return float(min(1.0, math.exp(log_sf_T) * ratio / z))


def truncation_delta(shift: float, num_draws, tail_sd: float = JAX_FLOAT32_NORMAL_MAX) -> float:
    """``1 - (1 - s)^N``, ``s = sliver_mass(shift, tail_sd)``: the chance that some of ``N``
    coordinate-draws, each shifted by ``shift`` sds between the neighbours, lands where the
    other run's truncated sampler has no mass. A lower bound, at every eps, on the delta that a
    truncation at ``tail_sd`` adds (the default: float32 ``jax.random.normal``'s 5.42)."""
    n = _count("num_draws", num_draws)
    s = sliver_mass(shift, tail_sd)
    if s == 0.0 or n == 0.0:
        return 0.0
    if s >= 1.0:
        return 1.0
    return float(-np.expm1(n * np.log1p(-s)))
