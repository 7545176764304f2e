"""Agreement of two sets of MCMC draws of the same target, with Monte-Carlo error and verdicts.

Used by the posterior-quality benchmark (issue 12) to compare our draws with a NUTS reference.
Draws are arrays ``(chains, draws, d)``; every figure is per coordinate, in units of the
reference's posterior sd.

* mean agreement: ``Delta_j = |mean_ours_j - mean_ref_j| / sd_ref_j``; its Monte-Carlo standard
  error in sd units is ``se_j = sqrt(1 / ESS_ours_j + 1 / ESS_ref_j)`` (bulk ESS of each set;
  the two sets are independent). Verdict "met" when no coordinate has ``Delta_j > 0.1 + 3 se_j``
  (issue 12's 0.1 sd bar, widened by three MC standard errors so that MC noise alone almost never
  fails it).
* noise floor: the 95% quantile of ``max_j |Z_j|`` with independent ``Z_j ~ N(0, se_j^2)``, i.e.
  the value max_j Delta_j would reach from MC noise alone for identical targets. Closed form up to
  a root: ``prod_j (2 Phi(t / se_j) - 1) = 0.95`` solved by bisection. Coordinates are treated as
  independent; by Sidak's inequality correlated Gaussian coordinates only make ``max |Z_j|``
  smaller in the sense ``P(max |Z_j| <= t) >= prod_j P(|Z_j| <= t)``, so this floor is an upper
  bound on the correlated one's 95% quantile.
* sd ratio ``r_j = sd_ours_j / sd_ref_j``; its MC standard error by the Gaussian approximation
  ``se(sd_hat) / sd ~ 1 / sqrt(2 ESS)`` (exact for iid Gaussian draws to first order), with the
  ESS of the sd (ArviZ ``method="sd"``) of each set: ``se_r_j = r_j sqrt(1/(2 ESS_ours_j) +
  1/(2 ESS_ref_j))`` (delta method on the ratio). Verdict "met" when every ratio lies in
  ``[0.9 - 3 se_r_j, 1.1 + 3 se_r_j]``.
"""

from __future__ import annotations

import math

import arviz as az
import numpy as np

MEAN_BAR = 0.1
SD_BAND = (0.9, 1.1)
N_SE = 3.0
FLOOR_LEVEL = 0.95


def ess(draws, method: str = "bulk") -> np.ndarray:
    """ArviZ ESS per coordinate of ``(chains, draws, d)`` draws."""
    return np.asarray(az.ess(np.asarray(draws, dtype=np.float64), method=method), dtype=np.float64)


def rhat(draws) -> np.ndarray:
    return np.asarray(az.rhat(np.asarray(draws, dtype=np.float64)), dtype=np.float64)


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def noise_floor(se, level: float = FLOOR_LEVEL) -> float:
    """The ``level`` quantile of ``max_j |Z_j|``, ``Z_j ~ N(0, se_j^2)`` independent (closed form
    ``prod_j (2 Phi(t / se_j) - 1) = level``, bisection to 1e-10 relative)."""
    se = np.asarray(se, dtype=np.float64).ravel()
    if se.size == 0 or np.any(~np.isfinite(se)) or np.any(se <= 0):
        raise ValueError("se must be a non-empty array of positive finite numbers")

    def cdf(t):
        return math.exp(sum(math.log(max(2.0 * _phi(t / s) - 1.0, 1e-300)) for s in se))

    lo, hi = 0.0, float(se.max())
    while cdf(hi) < level:
        hi *= 2.0
    while hi - lo > 1e-10 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if cdf(mid) < level else (lo, mid)
    return 0.5 * (lo + hi)


def compare(ours, ref) -> dict:
    """Per-coordinate agreement of ``ours`` with ``ref`` (both ``(chains, draws, d)``), raw figures
    and verdicts (module docstring for the rules)."""
    ours, ref = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if ours.ndim != 3 or ref.ndim != 3 or ours.shape[-1] != ref.shape[-1]:
        raise ValueError(f"draws must be (chains, draws, d) with the same d, got {ours.shape} and {ref.shape}")
    o, r = ours.reshape(-1, ours.shape[-1]), ref.reshape(-1, ref.shape[-1])
    sd = r.std(axis=0, ddof=1)
    z = np.abs(o.mean(0) - r.mean(0)) / sd
    ratio = o.std(0, ddof=1) / sd
    ess_o, ess_r = ess(ours), ess(ref)
    se = np.sqrt(1 / ess_o + 1 / ess_r)
    se_ratio = ratio * np.sqrt(0.5 / ess(ours, "sd") + 0.5 / ess(ref, "sd"))
    beyond = z > MEAN_BAR + N_SE * se
    lo, hi = SD_BAND[0] - N_SE * se_ratio, SD_BAND[1] + N_SE * se_ratio
    out_band = (ratio < lo) | (ratio > hi)
    floor = noise_floor(se)
    return {"max_abs_mean_diff_over_sd": float(z.max()), "median_abs_mean_diff_over_sd": float(np.median(z)),
            "argmax_mean_diff": int(np.argmax(z)),
            "frac_mean_diff_within_0.1_sd": float(np.mean(z <= MEAN_BAR)),
            "max_mean_diff_in_mc_se": float(np.max(z / se)), "median_mc_se_over_sd": float(np.median(se)),
            "max_mc_se_over_sd": float(se.max()),
            "noise_floor_max_abs_mean_diff": floor, "noise_floor_level": FLOOR_LEVEL,
            "coords_mean_beyond_bar_plus_3se": int(beyond.sum()),
            "mean_met": bool(not beyond.any()),
            "sd_ratio_min": float(ratio.min()), "sd_ratio_max": float(ratio.max()),
            "sd_ratio_median": float(np.median(ratio)),
            "frac_sd_ratio_in_0.9_1.1": float(np.mean((ratio >= SD_BAND[0]) & (ratio <= SD_BAND[1]))),
            "median_sd_ratio_mc_se": float(np.median(se_ratio)), "max_sd_ratio_mc_se": float(se_ratio.max()),
            "coords_sd_ratio_outside_band_3se": int(out_band.sum()),
            "sd_met": bool(not out_band.any()),
            "met": bool(not beyond.any() and not out_band.any()),
            "ess_ours_min": float(ess_o.min()), "ess_ref_min": float(ess_r.min()), "d": int(z.size),
            "rule": "mean: |diff| / sd_ref <= 0.1 + 3 se, se = sqrt(1/ESS_ours + 1/ESS_ref) (bulk ESS); sd ratio in "
                    "[0.9 - 3 se_r, 1.1 + 3 se_r], se_r = r sqrt(1/(2 ESS_sd,ours) + 1/(2 ESS_sd,ref)) (Gaussian "
                    "approximation); noise floor: 95% quantile of max_j |N(0, se_j^2)|, independent coordinates "
                    "(closed form, an upper bound for correlated ones by Sidak's inequality)"}
