"""benchmarks.new_table: its table is the design its doc states, and its figures are the issue's, computed by hand."""

from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.new_table import CATEGORICAL, compare, make_table


def test_the_table_is_fixed_by_its_seed_and_the_misspecified_one_differs_only_in_its_labels():
    a, b = make_table(3000, 1), make_table(3000, 1)
    assert a.equals(b) and not a.equals(make_table(3000, 2))
    assert list(a.columns) == [f"num{j}" for j in range(6)] + [c for c, _ in CATEGORICAL] + ["label"]
    for name, k in CATEGORICAL:
        assert set(a[name]) <= {f"L{i}" for i in range(k)}
    # 6 numerics + sum(levels - 1) one-hot columns + the intercept: the 45 coefficients the doc states
    assert 6 + sum(k - 1 for _, k in CATEGORICAL) + 1 == 45
    m = make_table(3000, 1, misspecified=True)
    assert m.drop(columns="label").equals(a.drop(columns="label"))
    assert (m["label"] != a["label"]).mean() > 0.05  # the square, interaction and scale move the labels
    assert set(a["label"]) == {"pos", "neg"}


def test_the_figures_are_the_issues_against_the_nonprivate_posterior():
    # by hand: three coefficients the non-private posterior determines (|t| > 1.645 sd) and one it does not
    t, sd = np.array([3.0, -2.0, 0.5, 4.0]), np.ones(4)
    iv = SimpleNamespace(lower=np.array([0.5, -3.0, -1.0, -0.5]), upper=np.array([5.0, -0.1, 2.0, 3.5]),
                         centre=np.array([2.75, -1.55, 0.5, 4.0]), sd=np.array([1.2, 1.4, 1.5, 2.0]),
                         flags=("", "", "prior: the data say little", ""))
    got = compare(iv, t, sd)
    assert got["np_determined"] == 3
    assert got["share_determined"] == pytest.approx(2 / 3)  # coordinates 0 and 1; 3 straddles 0
    assert got["signs_right"] == 1.0
    assert got["median_width_over_np_sd"] == pytest.approx(1.4)  # median of 1.2, 1.4, 2.0
    assert got["contain_map"] == 3 and got["flagged"] == 1 and got["dim"] == 4  # 4.0 lies above (-0.5, 3.5)
    iv.centre = np.array([-2.75, -1.55, 0.5, 4.0])  # a wrong sign among the determined
    assert compare(iv, t, sd)["signs_right"] == pytest.approx(0.5)
