"""UCI Adult from its raw files through the shipped public schema (the worked example).

``load_adult_raw()`` reads ``adult.data.gz`` / ``adult.test.gz`` (shipped unchanged in
``dp_infer/data/adult``, or files given by path) with the column names of ``adult.names``, and
encodes them with ``dp_infer/data/adult/schema.yaml`` (or any schema given). Compared with the
embedded pipeline :func:`dp_infer.datasets.load_adult`, which stays as it is:

* the coding is identifiable (a reference level per categorical group instead of complete
  one-hot groups next to the intercept, which left an exactly flat direction);
* out-of-range values are clipped to the declared bounds per value (counted in the NON-PRIVATE
  report) instead of shrinking the whole row; capital gain is declared on its census range
  [0, 99999], so in practice no value of the shipped files is clipped;
* rows are scaled by the exact largest encoded norm (sqrt(17) for the shipped schema), the same
  divisor as the embedded pipeline.

UCI Adult (Census Income), Becker & Kohavi (1996), UCI Machine Learning Repository,
https://doi.org/10.24432/C5XW20, licensed CC BY 4.0.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from .feature_map import FeatureMap
from .io import load_schema, schema_from_text
from .report import DataReport
from .spec import Schema

__all__ = ["ADULT_COLUMNS", "adult_schema", "load_adult_raw", "AdultSchemaData"]

#: column names of the raw files, from adult.names (the files have no header)
ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
                 "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
                 "hours-per-week", "native-country", "income"]


def adult_schema() -> Schema:
    """The shipped schema ``dp_infer/data/adult/schema.yaml``."""
    text = resources.files("dp_infer.data.adult").joinpath("schema.yaml").read_text()
    return schema_from_text(text, where="schema dp_infer/data/adult/schema.yaml")


@dataclass(frozen=True)
class AdultSchemaData:
    """Adult encoded by a schema. ``report_train`` / ``report_test`` are NON-PRIVATE (local only)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: list[str]
    feature_map: FeatureMap
    report_train: DataReport
    report_test: DataReport


def _raw(name: str, path) -> Path | object:
    if path is not None:
        return Path(path)
    return resources.files("dp_infer.data.adult").joinpath(name)


def load_adult_raw(schema=None, *, train_file=None, test_file=None) -> AdultSchemaData:
    """Read the raw Adult files (gzip CSV, no header, '|' comment line) and encode them by
    ``schema`` (default: :func:`adult_schema`; a path or a :class:`Schema`)."""
    sch = adult_schema() if schema is None else load_schema(schema)
    fmap = FeatureMap(sch)
    out = []
    for name, path in (("adult.data.gz", train_file), ("adult.test.gz", test_file)):
        src = _raw(name, path)
        with resources.as_file(src) as p:
            enc = fmap.transform(p)  # the schema's read: section names the columns
        out.append(enc)
    tr, te = out
    return AdultSchemaData(tr.X, tr.y, te.X, te.y, tr.feature_names, fmap, tr.report, te.report)
