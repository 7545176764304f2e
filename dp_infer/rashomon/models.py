"""Linear model classes for Rashomon sets: the loss the sampler runs, the intercept, and what
the measures need (scores, predictions, the prediction loss WITHOUT the penalty).

``linear_model("logistic" | "squared" | "smoothed_hinge", row_norm=R, l2=..., intercept=True)``
appends a constant column 1 to every row (the design row ``(x, 1)`` has norm at most
``sqrt(R^2 + 1)``, which is the row bound the loss's constants are computed for); the user never
adds it by hand. Rows are checked against the declared ``R`` before the column is appended.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import check_choice, check_finite_array, check_positive
from ..domains import Domain
from ..losses import PerExampleLoss, logistic, smoothed_hinge, squared

KINDS = ("logistic", "squared", "smoothed_hinge")


def _softplus(s):
    return np.logaddexp(0.0, s)


@dataclass(frozen=True)
class LinearModelClass:
    """A linear model class ``score = <theta, (x, 1)>`` with its per-example loss.

    ``loss`` acts on design rows (intercept column included) and carries the constants the
    privacy analysis uses. ``prediction_loss`` is the same loss WITHOUT the L2 penalty (what
    model reliance compares). Public description only: no data.
    """

    kind: str
    loss: PerExampleLoss
    row_norm: float
    intercept: bool
    hinge_smoothing: float | None = None
    label_bound: float | None = None

    @property
    def task(self) -> str:
        return "regression" if self.kind == "squared" else "classification"

    @property
    def probabilistic(self) -> bool:
        """True when the model gives class probabilities (logistic); hinge gives labels only."""
        return self.kind == "logistic"

    def num_params(self, num_features: int) -> int:
        return num_features + int(self.intercept)

    def num_features(self, dim: int) -> int:
        return dim - int(self.intercept)

    def feature_names(self, names, dim: int) -> list[str]:
        """Names of the coefficients: the given column names (or x0, x1, ...) plus 'intercept'."""
        p = self.num_features(dim)
        if names is None:
            names = [f"x{j}" for j in range(p)]
        names = [str(v) for v in names]
        if len(names) != p:
            raise ValueError(f"feature_names must have {p} entries (one per column), got {len(names)}")
        return names + (["intercept"] if self.intercept else [])

    def check_rows(self, X, name: str = "X", *, dim: int | None = None) -> np.ndarray:
        """``X`` as float64, finite, 2-D, rows within the declared norm, the width the draws need."""
        X = check_finite_array(name, X, ndim=2)
        if dim is not None and X.shape[1] != self.num_features(dim):
            extra = " + intercept" if self.intercept else ""
            raise ValueError(f"{name} must have {self.num_features(dim)} columns (the draws have {dim} "
                             f"coefficients: {self.num_features(dim)} features{extra}), got {X.shape[1]}")
        norms = np.linalg.norm(X, axis=1)
        over = int(np.sum(norms > self.row_norm * (1 + 1e-6)))
        if over:
            raise ValueError(f"{name}: a row exceeds the declared row_norm={self.row_norm:g} (l2 norm <= "
                             "row_norm); clip the rows with dp_infer.datasets.clip_rows")
        return X

    def design(self, X, name: str = "X", *, dim: int | None = None) -> np.ndarray:
        """The design rows: ``X`` checked, with the intercept column appended."""
        X = self.check_rows(X, name, dim=dim)
        return np.column_stack([X, np.ones(X.shape[0])]) if self.intercept else X

    def check_labels(self, y, num_rows: int, name: str = "y") -> np.ndarray:
        y = check_finite_array(name, y, ndim=1)
        if y.shape[0] != num_rows:
            raise ValueError(f"{name} must have one label per row ({num_rows}), got {y.shape[0]}")
        if self.task == "classification":
            bad = ~np.isin(y, (0.0, 1.0))
            if bad.any():
                raise ValueError(f"{name} must contain only 0/1 labels for a {self.kind} model; a label is not "
                                 "0 or 1")
        elif self.label_bound is not None and np.any(np.abs(y) > self.label_bound):
            raise ValueError(f"{name}: a label exceeds the declared label_bound={self.label_bound:g} "
                             "(|y| <= label_bound)")
        return y

    def scores(self, draws, X, *, name: str = "X_eval") -> np.ndarray:
        """Scores of every row under every draw, shape (rows, draws); ``X`` without intercept."""
        th = np.asarray(draws, dtype=np.float64)
        return self.design(X, name, dim=th.shape[1]) @ th.T

    def prediction_loss(self, scores, y) -> np.ndarray:
        """Per-example loss of the scores WITHOUT the L2 penalty (broadcasts y over columns)."""
        s = np.asarray(scores, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).reshape((-1,) + (1,) * (s.ndim - 1))
        if self.kind == "logistic":
            return _softplus(s) - y * s
        if self.kind == "squared":
            return 0.5 * (s - y) ** 2
        g = self.hinge_smoothing
        z = (2.0 * y - 1.0) * s
        return np.where(z >= 1.0, 0.0, np.where(z <= 1.0 - g, 1.0 - z - 0.5 * g, (1.0 - z) ** 2 / (2.0 * g)))

    def predictions(self, scores) -> np.ndarray:
        """P(y = 1) for logistic, the fitted value for squared, the 0/1 label for the hinge."""
        s = np.asarray(scores, dtype=np.float64)
        if self.kind == "logistic":
            return 0.5 * (1.0 + np.tanh(0.5 * s))
        if self.kind == "squared":
            return s
        return (s > 0).astype(np.float64)

    def describe(self) -> dict:
        return {"kind": self.kind, "task": self.task, "intercept": self.intercept,
                "row_norm": self.row_norm, "design_row_norm": self.loss.row_norm, "l2": self.loss.l2,
                "hinge_smoothing": self.hinge_smoothing, "label_bound": self.label_bound,
                "loss": self.loss.describe()}


def linear_model(kind: str = "logistic", *, row_norm: float = 1.0, l2: float = 0.0,
                 intercept: bool = True, domain: Domain | None = None, label_bound: float | None = None,
                 hinge_smoothing: float = 1.0) -> LinearModelClass:
    """A linear model class for :func:`sample_rashomon` and the measures.

    :param kind: ``"logistic"`` (0/1 labels, probabilities), ``"smoothed_hinge"`` (0/1 labels,
        hard labels, smoothing ``hinge_smoothing``) or ``"squared"`` (``|y| <= label_bound``;
        needs a bounded ``domain``).
    :param row_norm: declared bound R on ``||x||`` (features, before the intercept column).
    :param l2: L2 penalty on every coefficient (intercept included); ``l2 > 0`` certifies L*.
    :param intercept: append a constant column 1 (design rows then have norm <= sqrt(R^2 + 1)).
    :param domain: parameter set (dimension = features + intercept).
    """
    kind = check_choice("kind", kind, KINDS)
    R = check_positive("row_norm", row_norm)
    if not isinstance(intercept, (bool, np.bool_)):
        raise ValueError(f"intercept must be True or False, got {intercept!r}")
    Rd = math.sqrt(R * R + 1.0) if intercept else R
    if kind == "logistic":
        loss = logistic(row_norm=Rd, l2=l2, domain=domain)
    elif kind == "smoothed_hinge":
        hinge_smoothing = check_positive("hinge_smoothing", hinge_smoothing)
        loss = smoothed_hinge(hinge_smoothing, row_norm=Rd, l2=l2, domain=domain)
    else:
        if label_bound is None:
            raise ValueError("label_bound is required for kind='squared' (a bound on |y| in (0, inf))")
        label_bound = check_positive("label_bound", label_bound)
        loss = squared(label_bound, domain, row_norm=Rd, l2=l2)
    return LinearModelClass(kind, loss, R, bool(intercept),
                            hinge_smoothing if kind == "smoothed_hinge" else None,
                            label_bound if kind == "squared" else None)
