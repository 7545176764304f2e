"""All the measures of a set of draws on PUBLIC evaluation rows, in one object.

:func:`evaluate` is what :meth:`RashomonResult.measures` calls: coefficient ranges and sign
stability (draws only), and on the rows given: viable prediction ranges, ambiguity and
discrepancy against a stated reference, Rashomon capacity, the pattern Rashomon ratio, and with
labels model class reliance and the variable importance cloud. Everything is post-processing
of the released draws plus the evaluation rows, which the caller declares public.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .multiplicity import (
    ambiguity, coefficient_ranges, discrepancy, draws_2d, prediction_ranges, rashomon_capacity,
    sign_stability,
)
from .ratio import pattern_rashomon_ratio
from .reliance import model_class_reliance


def group_name(names, group) -> str:
    """A feature group's name: the column name, or the shared prefix of one-hot 'var=level' columns."""
    cols = [str(names[c]) for c in group]
    prefixes = {c.split("=", 1)[0] for c in cols}
    if len(cols) > 1 and len(prefixes) == 1 and all("=" in c for c in cols):
        return prefixes.pop()
    return " + ".join(cols)


@dataclass(frozen=True)
class RashomonMeasures:
    """Measures of ``num_draws`` draws on ``num_rows`` public rows (None where not computed).

    Per-row arrays (prediction ranges, flips, capacity) refer to the evaluation rows, which are
    public by the caller's declaration. ``reference`` names the model ambiguity and discrepancy
    compare against. ``feature_names`` names the coefficients (intercept last if any).
    """

    num_draws: int
    num_rows: int | None
    task: str
    reference: str
    feature_names: list
    coefficient_ranges: dict
    sign_stability: dict
    prediction_ranges: dict | None = None
    ambiguity: dict | None = None
    discrepancy: float | None = None
    capacity: dict | None = None
    patterns: dict | None = None
    reliance: dict | None = None
    notes: tuple = field(default=())

    def __getitem__(self, key):  # mapping-style access, e.g. m["ambiguity"]["flip_rate"]
        return getattr(self, key)

    def to_dict(self, *, per_row: bool = True) -> dict:
        """JSON-ready (lists, floats). ``per_row=False`` keeps only the summaries."""
        from .report import jsonable

        d = {k: getattr(self, k) for k in ("num_draws", "num_rows", "task", "reference", "feature_names",
                                            "coefficient_ranges", "sign_stability", "discrepancy",
                                            "patterns", "notes")}
        if self.prediction_ranges is not None:
            pr = self.prediction_ranges
            d["prediction_ranges"] = {"mean_width": float(pr["width"].mean()),
                                      "max_width": float(pr["width"].max()),
                                      **({"low": pr["low"], "high": pr["high"]} if per_row else {})}
        if self.ambiguity is not None:
            a = self.ambiguity
            d["ambiguity"] = {"flip_rate": a["flip_rate"], "num_flipped": a["num_flipped"],
                              **({"flipped": a["flipped"]} if per_row else {})}
        if self.capacity is not None:
            c = dict(self.capacity)
            if not per_row:
                c.pop("capacity")
            d["capacity"] = c
        if self.reliance is not None:
            r = dict(self.reliance)
            r.pop("se")
            if not per_row:
                r.pop("cloud")
            d["model_class_reliance"] = r
        return jsonable(d)

    def text(self) -> str:
        from .report import measures_text

        return measures_text(self)

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        from .report import measures_html

        return measures_html(self)


def evaluate(draws, model, X_eval=None, y_eval=None, *, reference=None, reference_label: str | None = None,
             features=None, feature_names=None, capacity: bool = True, patterns: bool = True,
             reliance: bool = True, num_permutations: int | None = None) -> RashomonMeasures:
    """Every measure of ``draws`` on the (public) rows ``X_eval`` / labels ``y_eval``.

    ``reference`` (coefficients) defaults to the mean of the draws, itself post-processing of
    the released draws. ``features``: columns (or groups) for model class reliance (default all);
    ``num_permutations``: None for the exact pairwise swap, k >= 2 for k random permutations
    (their largest Monte-Carlo standard error is reported as ``max_se``).
    Inputs are checked (widths, lengths, labels) before anything is computed.
    """
    th = draws_2d(draws)
    dim = th.shape[1]
    names = list(feature_names) if feature_names is not None else [f"theta{j}" for j in range(dim)]
    if len(names) != dim:
        raise ValueError(f"feature_names must have {dim} entries, got {len(names)}")
    task = model.task if model is not None else "classification"
    if reference is None:
        ref, ref_label = th.mean(axis=0), "mean of the released draws (post-processing)"
    else:
        ref = np.asarray(reference, dtype=np.float64)
        if ref.shape != (dim,) or not np.all(np.isfinite(ref)):
            raise ValueError(f"reference must be {dim} finite coefficients, got shape {ref.shape}")
        ref_label = reference_label or "user-supplied reference coefficients"
    out = dict(num_draws=int(th.shape[0]), num_rows=None, task=task, reference=ref_label, feature_names=names,
               coefficient_ranges=coefficient_ranges(th), sign_stability=sign_stability(th))
    if X_eval is None:
        if y_eval is not None:
            raise ValueError("y_eval needs X_eval")
        return RashomonMeasures(**out)
    S_check = model.check_rows(X_eval, "X_eval", dim=dim) if model is not None else None
    X = S_check if S_check is not None else np.asarray(X_eval, dtype=np.float64)
    if y_eval is not None:
        y = model.check_labels(y_eval, X.shape[0], "y_eval") if model is not None else np.asarray(y_eval, float)
        if model is None and y.shape != (X.shape[0],):
            raise ValueError(f"y_eval must have one label per row ({X.shape[0]}), got shape {y.shape}")
    out["num_rows"] = int(X.shape[0])
    out["prediction_ranges"] = prediction_ranges(th, X, model=model)
    notes = []
    if task == "classification":
        out["ambiguity"] = ambiguity(th, X, ref, model=model)
        out["discrepancy"] = discrepancy(th, X, ref, model=model)
        if capacity:
            out["capacity"] = rashomon_capacity(th, X, model=model)
        if patterns:
            out["patterns"] = pattern_rashomon_ratio(th, X, model=model)
    if y_eval is not None and reliance:
        if model is None:
            notes.append("model class reliance needs a linear_model(...) (prediction loss without penalty)")
        else:
            r = model_class_reliance(th, X, y, model, features=features, num_permutations=num_permutations)
            r["max_se"] = float(np.nanmax(r["se"])) if num_permutations is not None else 0.0
            r["feature_names"] = [group_name(names, g) for g in r["features"]]
            out["reliance"] = r
    return RashomonMeasures(**out, notes=tuple(notes))
