"""dp_infer.schema.admissible: the sup-type bounds a sensitivity is computed from, by brute force.

Oracles, written here without the module's code: the admissible set of a small schema is listed
as the product of each feature's possible values (an interval's two ends, a categorical's reference
level and each level, the intercept's one value, a filled-and-flagged feature's two boxes), every
convex sup (the norm, a linear form, its absolute value) is attained at one of these corners, so the
max over the listed corners is the exact answer; random points drawn inside each box never exceed it
(and lie in the set), points just outside one box do not.
"""

import itertools
import math

import numpy as np
import pytest

from dp_infer.schema.admissible import AdmissibleRows, ConstantBlock, IntervalBlock, OneOfBlock, UnionBlock

# intercept (coord 0), age in [-1.5, 3] (coord 1), colour one-of (coords 2-4) with values 1, -2, 0.5,
# income filled-and-flagged (coords 5, 6): value in [-0.5, 2] with flag 0, or (0.3, 1)
INTERCEPT = 1.0
AGE = (-1.5, 3.0)
COLOUR = (1.0, -2.0, 0.5)
INCOME = (((-0.5, 2.0), (0.0, 0.0)), ((0.3, 0.3), (1.0, 1.0)))


def _rows():
    return AdmissibleRows(7, (ConstantBlock("intercept", 0, INTERCEPT), IntervalBlock("age", 1, *AGE),
                              OneOfBlock("colour", (2, 3, 4), COLOUR), UnionBlock("income", (5, 6), INCOME)),
                          ("intercept", "age", "colour", "income"))


def _corners():
    colour = [(0.0, 0.0, 0.0)] + [tuple(v if j == k else 0.0 for j in range(3)) for k, v in enumerate(COLOUR)]
    income = [(a, b) for box in INCOME for a in sorted(set(box[0])) for b in sorted(set(box[1]))]
    return np.array([(INTERCEPT, a, *c, *i) for a in AGE for c in colour for i in income])


def _inside(rng, m):
    """m random admissible rows (uniform in a random box of each block)."""
    out = np.zeros((m, 7))
    out[:, 0] = INTERCEPT
    out[:, 1] = rng.uniform(*AGE, m)
    k = rng.integers(0, 4, m)
    for j in range(3):
        out[:, 2 + j] = np.where(k == j + 1, COLOUR[j], 0.0)
    alt = rng.integers(0, 2, m)
    out[:, 5] = np.where(alt == 0, rng.uniform(-0.5, 2.0, m), 0.3)
    out[:, 6] = np.where(alt == 0, 0.0, 1.0)
    return out


def test_max_norm_is_the_largest_corner_norm_and_bounds_every_row():
    A, C = _rows(), _corners()
    want = float(np.max(np.linalg.norm(C, axis=1)))
    # by hand: 1 + 3^2 + (-2)^2 + max(2^2, 0.3^2 + 1) = 18
    assert want == pytest.approx(math.sqrt(18.0), rel=1e-15)
    assert A.max_norm() == pytest.approx(want, rel=1e-15)
    X = _inside(np.random.default_rng(0), 2000)
    assert np.max(np.linalg.norm(X, axis=1)) <= A.max_norm() * (1 + 1e-15)
    assert A.describe()["max_norm"] == A.max_norm()


@pytest.mark.parametrize("seed", range(6))
def test_max_linear_and_abs_linear_are_the_corner_maxima(seed):
    A, C = _rows(), _corners()
    w = np.random.default_rng(seed).normal(size=7)
    assert A.max_linear(w) == pytest.approx(float(np.max(C @ w)), rel=1e-12, abs=1e-12)
    assert A.max_abs_linear(w) == pytest.approx(float(np.max(np.abs(C @ w))), rel=1e-12, abs=1e-12)
    X = _inside(np.random.default_rng(seed + 100), 500)
    assert np.max(np.abs(X @ w)) <= A.max_abs_linear(w) + 1e-12
    with pytest.raises(ValueError, match=r"w must have shape \(7,\)"):
        A.max_linear(np.ones(6))


def test_coordinate_bounds_are_the_corner_ranges():
    A, C = _rows(), _corners()
    np.testing.assert_array_equal(A.coordinate_bounds(), np.stack([C.min(axis=0), C.max(axis=0)], axis=1))


def test_vertices_are_the_corners():
    A, C = _rows(), _corners()
    V = A.vertices()
    assert A.num_vertices() == len(C) == len(V)
    assert {tuple(r) for r in V} == {tuple(r) for r in C}
    with pytest.raises(ValueError, match="limit"):
        A.vertices(limit=len(C) - 1)


def test_contains_accepts_admissible_rows_and_refuses_rows_just_outside():
    A = _rows()
    X = _inside(np.random.default_rng(1), 300)
    assert A.contains(X).all() and A.contains(_corners()).all()
    eps = 1e-6
    for j, delta in [(0, eps), (1, AGE[1] + eps), (1, AGE[0] - eps)]:
        Y = X[:5].copy()
        Y[:, j] = delta if j else INTERCEPT + delta
        assert not A.contains(Y).any()
    # two categorical levels at once, the flag with a free value, the flag half set
    for coords, vals in [((2, 3), (1.0, -2.0)), ((5, 6), (1.5, 1.0)), ((6,), (0.5,))]:
        Y = X[:5].copy()
        Y[:, list(coords)] = vals
        assert not A.contains(Y).any()
    # the boxes are closed: every corner is inside without any tolerance
    assert A.contains(_corners(), tol=0.0).all()
    # within the tolerance
    Y = X[:5].copy()
    Y[:, 1] = AGE[1] + 1e-10
    assert A.contains(Y).all()


def test_scaled_scales_every_bound():
    A = _rows()
    S = A.scaled(2.5)
    assert S.max_norm() == pytest.approx(2.5 * A.max_norm(), rel=1e-15)
    np.testing.assert_allclose(S.coordinate_bounds(), 2.5 * A.coordinate_bounds(), rtol=1e-15)
    assert {tuple(r) for r in S.vertices()} == {tuple(2.5 * r) for r in _corners()}
    assert [b.kind for b in S.blocks] == ["constant", "interval", "one_of", "union"]
    assert [b.name for b in S.blocks] == [b.name for b in A.blocks]
    assert S.feature_names == A.feature_names and S.exact is True
    assert S.describe()["blocks"][2]["values"] == [2.5 * v for v in COLOUR]
    loose = AdmissibleRows(A.dim, A.blocks, A.feature_names, exact=False, notes=("two blocks read one column",))
    L = loose.scaled(0.5)
    assert L.exact is False and L.notes == ("two blocks read one column",)


def test_blocks_refuse_malformed_input_and_must_cover_every_coordinate():
    with pytest.raises(ValueError, match="lo <= hi"):
        IntervalBlock("a", 0, 2.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        IntervalBlock("a", 0, 0.0, math.inf)
    with pytest.raises(ValueError, match="needs 2 intervals"):
        UnionBlock("u", (0, 1), (((0.0, 1.0),),))
    with pytest.raises(ValueError, match="one value per coordinate"):
        OneOfBlock("c", (0, 1), (1.0,))
    with pytest.raises(ValueError, match="exactly once"):
        AdmissibleRows(2, (IntervalBlock("a", 0, 0.0, 1.0),), ("a",))
    with pytest.raises(ValueError, match="exactly once"):
        AdmissibleRows(1, (IntervalBlock("a", 0, 0.0, 1.0), IntervalBlock("b", 0, 0.0, 1.0)), ("a", "b"))


def test_describe_round_trips_each_block():
    d = _rows().describe()
    assert d["dim"] == 7 and d["exact"] is True
    kinds = [b["kind"] for b in d["blocks"]]
    assert kinds == ["constant", "interval", "one_of", "union"]
    assert d["blocks"][0] == {"kind": "constant", "name": "intercept", "index": 0, "value": INTERCEPT}
    assert d["blocks"][1] == {"kind": "interval", "name": "age", "index": 1, "lo": AGE[0], "hi": AGE[1]}
    assert d["blocks"][2] == {"kind": "one_of", "name": "colour", "indices": [2, 3, 4], "values": list(COLOUR)}
    assert d["blocks"][3] == {"kind": "union", "name": "income", "indices": [5, 6],
                              "alternatives": [[list(iv) for iv in box] for box in INCOME]}


def test_linear_sups_are_computed_in_float64_for_a_float32_or_integer_w():
    """A float32 (or integer) w gives the float64 answer: the sup is a sensitivity bound, and a
    float32 product can round below it."""
    A, C = _rows(), _corners()
    w32 = np.random.default_rng(7).normal(size=7).astype(np.float32)
    w64 = w32.astype(np.float64)
    assert A.max_linear(w32) == pytest.approx(float(np.max(C @ w64)), rel=1e-15)
    assert A.max_abs_linear(w32) == pytest.approx(float(np.max(np.abs(C @ w64))), rel=1e-15)
    wi = np.array([1, -2, 3, 0, 1, -1, 2])
    assert A.max_linear(wi) == pytest.approx(float(np.max(C @ wi)), rel=1e-15)


def test_vertex_limit_is_inclusive_and_defaults_to_1e5():
    A, C = _rows(), _corners()
    assert len(A.vertices(limit=len(C))) == len(C)
    # one coordinate, 50000 disjoint intervals and one point: 100001 vertices > the default 1e5
    alts = tuple(((2.0 * i, 2.0 * i + 1.0),) for i in range(50_000)) + (((-1.0, -1.0),),)
    big = AdmissibleRows(1, (UnionBlock("u", (0,), alts),), ("u",))
    assert big.num_vertices() == 100_001
    with pytest.raises(ValueError, match="100001 vertices"):
        big.vertices()
    assert _rows().scaled(1.0).describe()["notes"] == []
    noted = AdmissibleRows(A.dim, A.blocks, A.feature_names, notes=("n1",))
    assert noted.describe()["notes"] == ["n1"]


def test_a_corner_shared_by_two_boxes_is_one_vertex():
    u = UnionBlock("u", (0,), (((0.0, 1.0),), ((1.0, 2.0),), ((2.0, 2.0),)))
    assert list(u.vertices()) == [(0.0,), (1.0,), (2.0,)]
    assert AdmissibleRows(1, (u,), ("u",)).num_vertices() == 3
