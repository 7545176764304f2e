"""benchmarks.new_table: its table is the design its doc states (its figures are
benchmarks.public_curvature.intervals_against_nonprivate's, tested in test_public_curvature.py)."""

import numpy as np
from benchmarks.new_table import CATEGORICAL, make_table


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
