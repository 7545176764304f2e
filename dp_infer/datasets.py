"""Embedded data (UCI Adult) and data-independent preprocessing.

Preprocessing must not leak: every statistic used to transform the private rows is either
fixed a priori (the Adult feature map below uses the public schema in ``adult.names`` and
declared value ranges) or computed on *public* data (:func:`fit_public_scaling`). Rows are then
clipped to a norm bound by :func:`clip_rows`, which reports how many it clipped. Rows with
missing values are dropped and the count is reported.

UCI Adult (Census Income), Becker & Kohavi (1996), UCI Machine Learning Repository,
https://doi.org/10.24432/C5XW20, licensed CC BY 4.0. Shipped unchanged in ``dp_infer/data/adult``.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from ._validation import check_finite_array, check_positive

__all__ = ["ClipReport", "clip_rows", "fit_public_scaling", "standardise", "AdultData", "load_adult",
           "load_csv", "ADULT_ATTRIBUTION"]

ADULT_ATTRIBUTION = ("UCI Adult (Census Income), Becker & Kohavi (1996), UCI Machine Learning "
                     "Repository, https://doi.org/10.24432/C5XW20, CC BY 4.0")


@dataclass(frozen=True)
class ClipReport:
    """How many rows a norm clip changed (a count over private data: report, don't release raw)."""

    n_rows: int
    n_clipped: int
    row_norm: float

    @property
    def fraction(self) -> float:
        return self.n_clipped / self.n_rows if self.n_rows else 0.0

    def as_dict(self) -> dict:
        return {"n_rows": self.n_rows, "n_clipped": self.n_clipped, "row_norm": self.row_norm}


def clip_rows(X, row_norm: float = 1.0, names=None) -> tuple[np.ndarray, ClipReport]:
    """Scale every row with ||x||_2 > row_norm down to norm row_norm; report how many.

    A row whose norm overflows float64 (a cell near 1e155 or beyond) would be scaled to zeros:
    it is refused instead, naming the column (``names``: the column names, else its index)."""
    R = check_positive("row_norm", row_norm)
    X = check_finite_array("X", X, ndim=2)
    with np.errstate(over="ignore"):
        norms = np.linalg.norm(X, axis=1)
    if not np.all(np.isfinite(norms)):
        big = np.abs(X) > 1e150
        j = int(np.argmax(big.any(axis=0))) if big.any() else int(np.argmax(np.abs(X).max(axis=0)))
        col = repr(str(names[j])) if names is not None and j < len(names) else f"{j}"
        raise ValueError(f"X: column {col} holds a value too large for its row's norm to be computed "
                         "(|value| above about 1e150); rescale that column (declared units) before fitting")
    over = norms > R
    scale = np.where(over, R / np.maximum(norms, 1e-300), 1.0)
    return X * scale[:, None], ClipReport(int(X.shape[0]), int(over.sum()), R)


def fit_public_scaling(X_public) -> tuple[np.ndarray, np.ndarray]:
    """Centre and scale (column mean, column sd; sd 0 -> 1) from PUBLIC data only.

    Statistics of the private training rows would be a release not covered by the sampler's
    guarantee; use a public reference sample or declared ranges instead.
    """
    X = check_finite_array("X_public", X_public, ndim=2)
    sd = X.std(axis=0)
    return X.mean(axis=0), np.where(sd > 0, sd, 1.0)


def standardise(X, center, scale, row_norm: float | None = None):
    """(X - center) / scale, then (optionally) clip rows to ``row_norm`` with a report."""
    X = check_finite_array("X", X, ndim=2)
    center = check_finite_array("center", np.broadcast_to(center, X.shape[1:]), ndim=1)
    scale = check_finite_array("scale", np.broadcast_to(scale, X.shape[1:]), ndim=1)
    if np.any(scale <= 0):
        raise ValueError("scale must be > 0 in every column")
    Z = (X - center) / scale
    if row_norm is None:
        return Z
    return clip_rows(Z, row_norm)


# ---------------------------------------------------------------------------------------------
# UCI Adult
# ---------------------------------------------------------------------------------------------

_ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
                  "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
                  "hours-per-week", "native-country", "income"]
# Declared (a priori) numeric transforms: name -> (column, transform, lo, hi); the transformed
# value is mapped from [lo, hi] to [-1, 1] (a linear map, not a clip). Ranges are fixed from the
# schema's meaning, never from the rows; out-of-range rows are left to clip_rows, which counts them.
_ADULT_NUMERIC = {
    "age": ("age", "id", 15.0, 95.0),
    "log-fnlwgt": ("fnlwgt", "log", 9.0, 15.0),
    "education-num": ("education-num", "id", 0.0, 16.0),
    "hours-per-week": ("hours-per-week", "id", 0.0, 100.0),
    "capital-gain/5000": ("capital-gain", "id", -5000.0, 5000.0),
    "capital-loss/5000": ("capital-loss", "id", -5000.0, 5000.0),
    "log1p-capital-gain": ("capital-gain", "log1p", 0.0, 12.0),
    "log1p-capital-loss": ("capital-loss", "log1p", 0.0, 12.0),
}
_TRANSFORMS = {"id": lambda v: v, "log": math.log, "log1p": math.log1p}
_ADULT_CATEGORICAL = ["workclass", "education", "marital-status", "occupation", "relationship",
                      "race", "sex", "native-country"]


def _adult_schema() -> dict[str, list[str]]:
    text = resources.files("dp_infer.data.adult").joinpath("adult.names").read_text()
    levels = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("|"):
            name, rest = line.split(":", 1)
            name = name.strip()
            if name in _ADULT_CATEGORICAL:
                levels[name] = [v.strip().rstrip(".") for v in rest.split(",")]
    missing = set(_ADULT_CATEGORICAL) - set(levels)
    if missing:
        raise RuntimeError(f"adult.names lacks the levels of {sorted(missing)}")
    return levels


def _read_adult(fname: str) -> list[list[str]]:
    raw = resources.files("dp_infer.data.adult").joinpath(fname).read_bytes()
    rows = []
    for rec in csv.reader(io.StringIO(gzip.decompress(raw).decode())):
        if len(rec) != len(_ADULT_COLUMNS):
            continue  # blank lines and the test file's comment line
        rows.append([v.strip() for v in rec])
    return rows


@dataclass(frozen=True)
class AdultData:
    """Adult train/test split after the fixed feature map and row clipping."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: list[str]
    dropped_missing: dict = field(default_factory=dict)
    clip_train: ClipReport | None = None
    clip_test: ClipReport | None = None
    attribution: str = ADULT_ATTRIBUTION


def _adult_features(rows, levels) -> tuple[np.ndarray, np.ndarray, list[str], int]:
    idx = {c: i for i, c in enumerate(_ADULT_COLUMNS)}
    names = ["intercept"] + list(_ADULT_NUMERIC)
    for c in _ADULT_CATEGORICAL:
        names += [f"{c}={v}" for v in levels[c]]
    X, y, dropped = [], [], 0
    for r in rows:
        if "?" in r:
            dropped += 1
            continue
        feats = [1.0]
        for col, tf, lo, hi in _ADULT_NUMERIC.values():
            v = _TRANSFORMS[tf](float(r[idx[col]]))
            feats.append(2.0 * (v - lo) / (hi - lo) - 1.0)
        for c in _ADULT_CATEGORICAL:
            one = [0.0] * len(levels[c])
            one[levels[c].index(r[idx[c]])] = 1.0
            feats += one
        X.append(feats)
        y.append(1.0 if r[idx["income"]].startswith(">50K") else 0.0)
    return np.asarray(X), np.asarray(y), names, dropped


def load_adult(row_norm: float = 1.0) -> AdultData:
    """UCI Adult with a data-independent feature map, rows clipped to ``row_norm``.

    Features: an intercept, eight numeric features mapped from declared ranges to [-1, 1]
    (age, log fnlwgt, education-num, hours, capital gain/loss both linear (/5000) and log1p)
    and one-hot encodings of the eight categorical columns with levels from the public schema.
    Every row is then divided by sqrt(1 + 8 + 8) so that in-range rows have norm <= 1, and
    clipped to
    ``row_norm`` (the counts are in ``clip_train``/``clip_test``). Rows with missing values
    ('?') are dropped; the counts are in ``dropped_missing``. Label: income > 50K.
    """
    levels = _adult_schema()
    out = {}
    dropped = {}
    width = math.sqrt(1 + len(_ADULT_NUMERIC) + len(_ADULT_CATEGORICAL))
    for split, fname in (("train", "adult.data.gz"), ("test", "adult.test.gz")):
        X, y, names, nd = _adult_features(_read_adult(fname), levels)
        Xc, rep = clip_rows(X / width, row_norm)
        out[split] = (Xc, y, rep)
        dropped[split] = nd
    return AdultData(out["train"][0], out["train"][1], out["test"][0], out["test"][1], names,
                     dropped, out["train"][2], out["test"][2])


#: the field delimiters :func:`load_csv` recognises
CSV_DELIMITERS = ",;\t|"


def sniff_delimiter(fh, sample_bytes: int = 65536) -> str:
    """The field delimiter of the open text file ``fh`` (rewound after): ``csv.Sniffer`` over its
    first ``sample_bytes`` among :data:`CSV_DELIMITERS`, ``","`` when that is undecidable (one column)."""
    sample = fh.read(sample_bytes)
    fh.seek(0)
    try:
        return csv.Sniffer().sniff(sample, delimiters=CSV_DELIMITERS).delimiter
    except csv.Error:
        return ","


def load_csv(path: str | Path, target: str, columns: list[str] | None = None
             ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Read a numeric CSV with a header; return (X, y, feature names). Non-numeric or missing
    cells raise an error naming the column (nothing is dropped silently).

    ``columns``: the feature names to return, in this order (e.g. a training file's names, so a
    test file is matched by NAME, not by position); a missing one is an error. The field delimiter
    is sniffed among :data:`CSV_DELIMITERS` from the file's first lines (``csv.Sniffer``; a file
    whose lines it cannot decide is read with commas), as the schema's reader does.
    """
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            reader = csv.reader(fh, delimiter=sniff_delimiter(fh))
            try:
                header = [h.strip() for h in next(reader)]
            except StopIteration:
                raise ValueError(f"{path} is empty") from None
            rows = [r for r in reader if r]
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a text CSV file") from None
    if len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise ValueError(f"{path} has duplicate column names: {dup}")
    if target not in header:
        raise ValueError(f"target column {target!r} not in {path} (columns: {header})")
    if not rows:
        raise ValueError(f"{path} has a header but no data rows")
    t = header.index(target)
    data = np.empty((len(rows), len(header)))
    for i, r in enumerate(rows):
        if len(r) != len(header):
            raise ValueError(f"{path} line {i + 2}: {len(r)} fields, expected {len(header)}")
        for j, v in enumerate(r):
            try:
                data[i, j] = float(v)
            except ValueError:
                raise ValueError(f"{path} line {i + 2}, column {header[j]!r}: not a number: {v!r}") from None
    if not np.all(np.isfinite(data)):
        bad = np.argwhere(~np.isfinite(data))[0]
        raise ValueError(f"{path} line {bad[0] + 2}, column {header[bad[1]]!r}: non-finite value")
    names = [h for j, h in enumerate(header) if j != t]
    if columns is not None:
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(f"{path} lacks the feature column(s) {missing} (columns are matched by name)")
        idx = [header.index(c) for c in columns]
        return data[:, idx], data[:, t], list(columns)
    return np.delete(data, t, axis=1), data[:, t], names
