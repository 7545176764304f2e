"""What a Rashomon run returns: the released draws, the report, and measures on public rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import (
    check_finite_array,
)
from ..losses import PerExampleLoss
from .measures import (
    ambiguity,
    coefficient_ranges,
    discrepancy,
    model_class_reliance,
    prediction_ranges,
    sign_stability,
)


@dataclass
class RashomonResult:
    """Draws of a Rashomon sampler, its privacy report, and the measures on evaluation data.

    ``draws`` has shape (chains, draws, dim) and holds every released draw (burn-in included,
    it is part of the accounted path; ``burn_in`` draws per chain are dropped by
    :meth:`flat_draws`). Nothing computed from the private data other than the released draws
    (no L*, threshold, minimiser, loss or membership) is stored here.
    """

    draws: np.ndarray
    mode: str
    psi: float
    report: dict
    loss: PerExampleLoss
    burn_in: int = 0

    @property
    def is_private(self) -> bool:
        return self.mode != "nonprivate"

    def flat_draws(self) -> np.ndarray:
        """Post-burn-in draws pooled over chains, shape (N, dim)."""
        return self.draws[:, self.burn_in:].reshape(-1, self.draws.shape[-1])

    def measures(self, X_eval, y_eval=None, *, reference=None, features=None,
                 task: str = "classification", seed: int | None = None) -> dict:
        """Rashomon measures of the released draws on a USER-SUPPLIED evaluation set.

        The evaluation set must be public or held out: measures are post-processing of the
        draws plus that set and cost no privacy only then. ``reference`` defaults to the mean
        of the draws (itself post-processing). ``features``: indices for model class reliance
        (needs ``y_eval``; default: all).
        """
        th = self.flat_draws()
        X_eval = check_finite_array("X_eval", X_eval, ndim=2)
        ref = th.mean(axis=0) if reference is None else check_finite_array("reference", reference, ndim=1)
        out = {
            "mode": self.mode,
            "privacy": "NON-PRIVATE reference run" if not self.is_private else
                       f"released draws are {self.report.get('guarantee', 'private')}",
            "evaluated_on": "user-supplied evaluation set (must be public or held out to be free)",
            "num_draws": int(th.shape[0]),
            "coefficient_ranges": coefficient_ranges(th),
            "sign_stability": sign_stability(th),
            "prediction_ranges": prediction_ranges(th, X_eval, link="logistic" if task == "classification" else "identity"),
        }
        if task == "classification":
            out["ambiguity"] = ambiguity(th, X_eval, ref)
            out["discrepancy"] = discrepancy(th, X_eval, ref)
        if y_eval is not None:
            y_eval = check_finite_array("y_eval", y_eval, ndim=1)
            feats = range(X_eval.shape[1]) if features is None else features
            out["model_class_reliance"] = {
                int(j): model_class_reliance(th, X_eval, y_eval, int(j), self.loss, seed=seed) for j in feats}
        return out
