"""Which coordinates the prior decides, measured on the released draws (post-processing, free).

A posterior-mode run samples ``N(m, Lambda^-1) x exp(-beta L)``. Where ``beta`` times the data's
curvature in a coordinate is small against the prior's precision ``lambda_j`` (a rare category
level, few rows, a small eps), that coordinate's draws are the prior's: their sd is close to the
prior sd ``lambda_j^-1/2``, and no interval read from them says anything about the data.

The forecast (:func:`dp_infer.routes.forecast.forecast_posterior`) predicts this before anything is
spent, from public inputs only, coordinate by coordinate (:func:`dp_infer.routes.forecast.tempered_sd_ratios`:
within 25% of the measured median in every case of docs/results.md, "The tempered draws' sd, forecast";
on 5,000 rows of Adult at eps = 1 it says 0.96 of the prior's sd, the runs measure 0.99).
This module says it after the run, coordinate by coordinate, from the released draws: the ratio
``sd_j(draws) sqrt(lambda_j)``, and the coordinates where it is at least ``threshold``
(:data:`~dp_infer.routes.forecast.CLOSE_TO_PRIOR`, 0.9: the forecast's own threshold).

Assumptions and units: a diagonal prior (one precision per coordinate, in the parameters' units);
the draws after burn-in, all chains pooled. The sd of k effective draws has a relative Monte-Carlo
error of about ``1 / sqrt(2 k)`` (3.5% at 400): a coordinate near the threshold can fall on either
side of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .._validation import check_finite_array
from ..routes.forecast import CLOSE_TO_PRIOR

__all__ = ["PriorDominance", "prior_dominance", "run_prior_dominance"]


@dataclass(frozen=True)
class PriorDominance:
    """``sd_ratio``: the draws' sd over the prior sd, per coordinate; ``threshold``: the ratio at or
    above which a coordinate counts as the prior's; ``interval_release``: the run also released intervals for
    theta (its interval release), which carry what the data say where the tempered draws do not, so the text
    says the draws say little, not the data."""

    sd_ratio: np.ndarray
    threshold: float
    interval_release: bool = False

    @property
    def dominated(self) -> np.ndarray:
        """Boolean mask: the coordinates whose draws' sd is at least ``threshold`` of the prior's."""
        return self.sd_ratio >= self.threshold

    @property
    def median_ratio(self) -> float:
        return float(np.median(self.sd_ratio))

    def text(self, names=None, *, show: int = 5) -> str:
        """One line for a user: how many coordinates the prior decides, a few of them by name, and
        the median ratio."""
        d = self.sd_ratio.size
        idx = np.flatnonzero(self.dominated)
        names = [f"theta[{i}]" for i in range(d)] if names is None else list(names)
        if len(names) != d:
            raise ValueError(f"names: {len(names)} names for {d} coordinates")
        head = (f"prior-dominated coordinates (the draws' sd at least {self.threshold:g} of the prior's, measured): "
                f"{idx.size} of {d}; median sd / prior sd {self.median_ratio:.2f}")
        if idx.size == 0:
            return head
        order = idx[np.argsort(-self.sd_ratio[idx])][:show]
        listed = ", ".join(f"{names[i]} {self.sd_ratio[i]:.2f}" for i in order)
        more = f", and {idx.size - order.size} more" if idx.size > order.size else ""
        if self.median_ratio < self.threshold:
            warn = ""
        elif self.interval_release:
            warn = (" -- the tempered draws say little about the data in most coordinates; the intervals for theta "
                    "(the interval release) carry what the data say")
        else:
            warn = (" -- most coordinates say little about the data: more rows, a larger eps, fewer effective draws "
                    "or a tighter prior change this")
        return f"{head} ({listed}{more}){warn}"


def prior_dominance(draws, prior_precision, *, threshold: float = CLOSE_TO_PRIOR) -> PriorDominance:
    """Measure, per coordinate, the draws' sd over the prior sd.

    ``draws``: shape (..., dim), all leading axes pooled (e.g. (chains, draws, dim)); ``prior_precision``:
    a number or one positive precision per coordinate (a diagonal prior); ``threshold`` in (0, 1]."""
    D = check_finite_array("draws", draws)
    if D.ndim < 2 or D.shape[-1] == 0:
        raise ValueError(f"draws must have shape (..., dim) with at least 2 draws, got shape {D.shape}")
    D = D.reshape(-1, D.shape[-1])
    if D.shape[0] < 2:
        raise ValueError(f"draws must hold at least 2 draws, got {D.shape[0]}")
    lam = np.broadcast_to(np.asarray(prior_precision, dtype=np.float64), (D.shape[1],)) \
        if np.ndim(prior_precision) == 0 else np.asarray(prior_precision, dtype=np.float64)
    if lam.shape != (D.shape[1],):
        raise ValueError(f"prior_precision must be a number or one value per coordinate ({D.shape[1]}), "
                         f"got shape {lam.shape}")
    if not np.all(np.isfinite(lam) & (lam > 0)):
        raise ValueError("prior_precision must be finite and > 0 in every coordinate")
    if not 0 < float(threshold) <= 1:
        raise ValueError(f"threshold must lie in (0, 1], got {threshold!r}")
    return PriorDominance(D.std(axis=0, ddof=1) * np.sqrt(lam), float(threshold))


def run_prior_dominance(run, *, threshold: float = CLOSE_TO_PRIOR) -> PriorDominance | None:
    """:func:`prior_dominance` of a posterior-mode run of a per-example loss (its draws after burn-in and
    its plan's prior precision), or None for other runs (the estimate mode has no prior; a NumPyro
    model's priors are its own sites'). ``interval_release``: whether the run holds an interval release
    (:func:`dp_infer.diagnostics.intervals.run_intervals` reads it)."""
    plan = run.plan
    if (getattr(plan, "target", "estimate") != "posterior" or plan.prior_precision is None
            or getattr(run, "model_description", None) is not None or run.theta is None):
        return None
    released = (getattr(run, "report_extras", None) or {}).get("interval_release") is not None
    return replace(prior_dominance(run.draws(), plan.prior_precision, threshold=threshold), interval_release=released)
