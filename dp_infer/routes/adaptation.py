"""The schedule of a posterior plan whose metric is adapted from the chains' own draws.

Public inputs only: the windows' Langevin times, the settling time after the last change of
metric, and the adapted phases' step safety. How many windows (``adaptation_windows="auto"``):
20, 40, 80, then doubling while the last window is shorter than the planned metric's worst
relaxation time ``r`` (at most :data:`MAX_AUTO_WINDOWS`). The released second moment ``S_hat`` has
noise of spectral norm at most ``e``, so in an eigendirection with eigenvalue ``s`` the planned
precision ``beta kappa_P s + Lambda`` can overstate the target's by up to
``r_s = beta kappa_P min(e, s) / (beta kappa_P (s - e)_+ + Lambda)``: the metric can be ``1 + r_s``
times too narrow there (in variance) and that direction relaxes in Langevin time up to ``1 + r_s``,
which the last window before sampling has to see settle. ``r = max_s r_s``; before the release,
its supremum over every matrix the release can give, ``beta kappa_P e / min(Lambda)``.
Measured on Adult (docs/results.md): three windows reach the planned ESS at r = 14-50, not at
r = 93 and 168, where four do.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEFAULT_ADAPTATION_WINDOWS", "MAX_AUTO_WINDOWS", "SETTLE_TIME", "ADAPTED_STEP_SAFETY",
           "worst_relaxation_time", "auto_windows"]

#: Langevin time of the metric-adaptation windows (``adapt_metric=True``; times ``friction`` for the
#: kinetic chain): the first runs in the planned metric after the burn-in, each next one in the metric
#: adapted from the previous window's draws, the sampling phase in the metric adapted from the last
DEFAULT_ADAPTATION_WINDOWS = (20.0, 40.0, 80.0)
#: ``adaptation_windows="auto"``: at most this many windows
MAX_AUTO_WINDOWS = 7
#: Langevin time the final phase runs (and drops as burn-in) before its draws count, after the last
#: change of metric (the clip levels, hence the clipped target, move slightly with the metric)
SETTLE_TIME = 2.0
#: ``h M`` in the adapted phases, with M the global curvature bound in the adapted metric: stable
#: everywhere (ULA needs h M < 2); a direction of curvature lambda has its variance inflated by
#: ``1 / (1 - h lambda / 2)``, under 1% for the lambda ~ 1 an adapted metric gives the bulk
ADAPTED_STEP_SAFETY = 1.0


def worst_relaxation_time(beta: float, kappa_P: float, noise_bound: float, prior_precision_min: float,
                          second_moment_eigenvalues=None) -> float:
    """``r`` (module doc), in Langevin time. ``second_moment_eigenvalues``: those of the released
    ``S_hat`` (public: a release); ``None`` before the release (the supremum is returned)."""
    if noise_bound <= 0.0:
        return 0.0
    if second_moment_eigenvalues is None:
        return beta * kappa_P * noise_bound / prior_precision_min
    s = np.asarray(second_moment_eigenvalues, dtype=np.float64)
    over = beta * kappa_P * np.minimum(noise_bound, np.maximum(s, 0.0))
    return float(np.max(over / (beta * kappa_P * np.maximum(s - noise_bound, 0.0) + prior_precision_min)))


def auto_windows(r: float) -> list[float]:
    """The windows (Langevin times, before the kinetic scaling): the defaults, then doubling while
    the last is shorter than ``r``, at most :data:`MAX_AUTO_WINDOWS`."""
    w = list(DEFAULT_ADAPTATION_WINDOWS)
    while w[-1] < r and len(w) < MAX_AUTO_WINDOWS:
        w.append(2.0 * w[-1])
    return w
