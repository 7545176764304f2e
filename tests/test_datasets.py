"""The embedded Adult data and row clipping."""

import math
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dp_infer import datasets, domains, losses


def test_clip_rows_reports_count():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 2.0]])
    Xc, rep = datasets.clip_rows(X, row_norm=1.0)
    assert rep.n_clipped == 2 and rep.n_rows == 3
    np.testing.assert_allclose(np.linalg.norm(Xc, axis=1), [1.0, 0.5, 1.0])
    np.testing.assert_allclose(Xc[0], [0.6, 0.8])


def test_adult_is_embedded_and_bounded():
    a = datasets.load_adult()
    assert a.X_train.shape[0] == 30162 and a.X_test.shape[0] == 15060  # rows without '?'
    assert a.dropped_missing == {"train": 32561 - 30162, "test": 16281 - 15060}
    assert np.linalg.norm(a.X_train, axis=1).max() <= 1 + 1e-12
    assert a.X_train.shape[1] == len(a.feature_names)
    assert set(np.unique(a.y_train)) == {0.0, 1.0}
    assert "CC BY 4.0" in a.attribution


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_load_csv_sniffs_the_field_delimiter(tmp_path, delimiter):
    # issue 41: `dp-infer sample file.csv` read a ';'-delimited file as one column named 'a;b;y'
    path = tmp_path / "d.csv"
    path.write_text(delimiter.join(["a", "b", "y"]) + "\n" + "\n".join(
        delimiter.join(f"{v:.2f}" for v in (0.1 * i, 0.2, i % 2)) for i in range(5)) + "\n")
    X, y, names = datasets.load_csv(path, "y")
    assert names == ["a", "b"] and X.shape == (5, 2)
    np.testing.assert_allclose(y, [0, 1, 0, 1, 0])
    np.testing.assert_allclose(X[:, 0], [0.0, 0.1, 0.2, 0.3, 0.4])


def test_load_csv_with_one_column_reads_commas(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("y\n1\n0\n")
    X, y, names = datasets.load_csv(path, "y")
    assert names == [] and X.shape == (2, 0)
