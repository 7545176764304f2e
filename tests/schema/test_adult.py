"""Adult from its raw files through the shipped schema reproduces the embedded pipeline.

Oracles: the embedded pipeline ``datasets.load_adult`` (kept unchanged) -- same kept rows and
labels; on every row the embedded pipeline did not shrink (row norm < 1), its matrix is an exact
linear image of the schema's (complete one-hot + intercept = a linear recoding of reference
coding; the numeric features are affine in each other's declared ranges); and the non-private
fits agree in test accuracy up to the rows the embedded pipeline shrank.
"""

import numpy as np
import pytest

from dp_infer import losses
from dp_infer.infer import nonprivate
from dp_infer.datasets import load_adult
from dp_infer.schema import FeatureMap
from dp_infer.schema.adult import adult_schema, load_adult_raw


@pytest.fixture(scope="module")
def both():
    return load_adult_raw(), load_adult()


def test_same_rows_and_labels(both):
    a, b = both
    assert a.X_train.shape == (30162, 100) and b.X_train.shape == (30162, 108)
    np.testing.assert_array_equal(a.y_train, b.y_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert a.report_train.dropped_missing["workclass"] + a.report_train.dropped_missing["occupation"] \
        + a.report_train.dropped_missing["native-country"] == b.dropped_missing["train"]
    assert a.report_train.n_rows_clipped == 0 and a.report_test.n_rows_clipped == 0


def test_embedded_matrix_is_a_linear_image_on_unshrunk_rows(both):
    a, b = both
    for Xa, Xb in ((a.X_train, b.X_train), (a.X_test, b.X_test)):
        keep = np.linalg.norm(Xb, axis=1) < 1 - 1e-9  # rows the embedded clip_rows left alone
        assert keep.mean() > 0.97
        A, *_ = np.linalg.lstsq(Xa[keep], Xb[keep], rcond=None)
        assert np.abs(Xa[keep] @ A - Xb[keep]).max() < 1e-10
        # and the shrunk rows are not (the embedded pipeline changed them, the schema clipped nothing)
        assert np.abs(Xa[~keep] @ A - Xb[~keep]).max() > 1e-3


def test_identifiable_and_row_bound_exact(both):
    a, _ = both
    fm = a.feature_map
    assert fm.raw_max_norm == pytest.approx(np.sqrt(17))  # 1 + 8 numeric + 8 groups
    assert np.linalg.norm(a.X_train, axis=1).max() <= 1 + 1e-12
    # all level combinations of the groups give a full-rank design: no flat direction of theta
    adm = fm.admissible_rows()
    assert adm.max_norm() == pytest.approx(1.0) and not adm.exact  # two columns feed two features each
    groups = [b for b in adm.blocks if b.kind == "one_of"]
    assert sum(len(g.indices) for g in groups) == 99 - 8


def test_nonprivate_accuracy_agrees(both):
    # 0.8507 (embedded) vs 0.8483 (schema): the 2.2% of rows the embedded pipeline shrank (large
    # capital gains dominate after /5000) differ; every other row is a linear recoding.
    accs = []
    for d in both:
        th, _, _ = nonprivate.minimize_loss(losses.logistic(1.0), d.X_train, d.y_train)
        accs.append(nonprivate.accuracy(th, d.X_test, d.y_test))
    assert abs(accs[0] - accs[1]) < 0.005, accs


def test_shipped_schema_is_public_only():
    sch = adult_schema()
    assert sch.read["header"] is False and sch.read["names"][-1] == "income"
    assert FeatureMap(sch).feature_names[:2] == ["intercept", "age"]
    assert sch.column("workclass").reference_level == "Private"  # first level of adult.names
