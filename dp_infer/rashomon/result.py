"""What a Rashomon run returns: the released draws, the privacy report, and the measures on
rows the caller declares public."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..losses import PerExampleLoss
from .measures import RashomonMeasures, evaluate
from .models import LinearModelClass


@dataclass
class RashomonResult:
    """Draws of a Rashomon sampler, its privacy report, and the measures on evaluation data.

    ``draws`` has shape (chains, draws, dim) and holds every released draw (burn-in included,
    it is part of the accounted path; ``burn_in`` draws per chain are dropped by
    :meth:`flat_draws`). ``privacy`` is the privacy report (a dict; :meth:`report` renders it).
    Nothing computed from the private data other than the released draws (no L*, threshold,
    minimiser, loss, membership or row count beyond the public n) is stored here.
    """

    #: the stored result type (:mod:`dp_infer.infer.result`; a fallback file's ``kind``)
    result_kind: ClassVar[str] = "rashomon"

    draws: np.ndarray
    mode: str
    psi: float
    privacy: dict
    loss: PerExampleLoss
    burn_in: int = 0
    model: LinearModelClass | None = None
    feature_names: list | None = None

    @property
    def is_private(self) -> bool:
        return self.mode != "nonprivate"

    @property
    def dim(self) -> int:
        return int(self.draws.shape[-1])

    def flat_draws(self) -> np.ndarray:
        """Post-burn-in draws pooled over chains, shape (N, dim)."""
        return self.draws[:, self.burn_in:].reshape(-1, self.draws.shape[-1])

    def measures(self, X_eval=None, y_eval=None, *, public: bool | None = None, reference=None,
                 features=None, capacity: bool = True, patterns: bool = True,
                 reliance: bool = True, num_permutations: int | None = None) -> RashomonMeasures:
        """Every Rashomon measure of the released draws, on evaluation rows declared PUBLIC.

        Measures are post-processing of the draws plus the rows you pass, and cost no privacy
        only if those rows are public: pass ``public=True`` to declare it (rows of the private
        training file are private, and their per-row measures are a release this run does not
        pay for: they are refused). Rows are given WITHOUT the intercept column (the model class
        adds it). ``reference`` (coefficients) defaults to the mean of the draws; ``features``
        selects the columns (or groups) for model class reliance (needs ``y_eval``), computed by
        the exact pairwise swap or, with ``num_permutations=k``, k random permutations.
        """
        if X_eval is not None and public is not True:
            raise ValueError("public must be True to evaluate on rows: declare the evaluation rows public "
                             "(public=True); rows of the private file would be a release this run does not "
                             "pay for")
        return evaluate(self.flat_draws(), self.model, X_eval, y_eval, reference=reference,
                        features=features, feature_names=self.feature_names, capacity=capacity,
                        patterns=patterns, reliance=reliance, num_permutations=num_permutations)

    def report(self, measures: RashomonMeasures | None = None):
        """A printable report (text via ``str()``, HTML in notebooks) of the privacy block, the
        draws and, if given, the measures."""
        from .report import RashomonReport

        if measures is None:
            measures = self.measures()
        return RashomonReport(self, measures)

    def _repr_html_(self) -> str:
        return self.report()._repr_html_()

    def to_dict(self, measures: RashomonMeasures | None = None, *, include_draws: bool = False,
                per_row: bool = True) -> dict:
        """JSON-ready dict: mode, psi, model, privacy report, measures (of the draws alone when
        ``measures`` is None), and the released draws with ``include_draws``."""
        from .report import jsonable

        if measures is None:
            measures = self.measures()
        d = {"mode": self.mode, "psi": self.psi, "is_private": self.is_private,
             "model": None if self.model is None else self.model.describe(),
             "loss": self.loss.describe(), "feature_names": self.feature_names,
             "draws_shape": list(self.draws.shape), "burn_in": self.burn_in,
             "privacy": jsonable(self.privacy), "measures": measures.to_dict(per_row=per_row)}
        if include_draws:
            d["draws"] = jsonable(self.draws)
        return jsonable(d)
