"""The schema model, its files, the feature map and the admissible-row description.

Oracles: hand-computed encodings of small tables; brute-force enumeration of every level
combination (and every bound of every numeric) for the exact row-norm and coordinate bounds;
the rank of the encoded level combinations for identifiability.
"""

import itertools
import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import dp_infer.schema as S
from dp_infer.schema import FeatureMap, Schema


def small_schema(**kw):
    cols = (S.numeric("age", 20, 60), S.categorical("color", ["r", "g", "b"]),
            S.binary("sex", ["F", "M"]), S.ordinal("edu", ["lo", "mid", "hi"]))
    return Schema(columns=cols, target=S.binary_target("y", "yes", "no"), **kw)


# ---------------------------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------------------------

def test_encoding_matches_hand_computation_and_scale_is_exact():
    fm = FeatureMap(small_schema())
    assert fm.feature_names == ["intercept", "age", "color=g", "color=b", "sex=M", "edu"]
    # raw max norm^2 = 1 (intercept) + 1 (age) + 1 (one level) + 1 (sex) + 1 (edu) = 5
    assert fm.raw_max_norm == pytest.approx(math.sqrt(5))
    df = pd.DataFrame({"age": ["20", "40", "70"], "color": ["r", "b", "g"], "sex": ["M", "F", "M"],
                       "edu": ["mid", "hi", "lo"], "y": ["yes", "no", "yes"]})
    with pytest.warns(S.ClippingWarning):  # one row of three clipped > 5%
        enc = fm.transform(df)
    want = np.array([[1, -1, 0, 0, 1, 0], [1, 0, 0, 1, 0, 1], [1, 1, 1, 0, 1, -1]]) / math.sqrt(5)
    np.testing.assert_allclose(enc.X, want, atol=1e-12)
    np.testing.assert_array_equal(enc.y, [1, 0, 1])
    assert enc.report.clipped_high == {"age": 1} and enc.report.n_rows_clipped == 1
    assert np.all(fm.admissible_rows().contains(enc.X))


def test_transforms_missing_fill_indicator_and_unknown_other():
    cols = (S.numeric("inc", 0, 999, transform="log1p", missing={"fill": 9}),
            S.categorical("c", ["a", "b"], unknown="other", missing={"fill": "a", "indicator": False}))
    fm = FeatureMap(Schema(columns=cols, intercept=False, row_norm=None))
    assert fm.feature_names == ["inc", "inc:missing", "c=b", "c=other"]
    with pytest.warns(S.ClippingWarning):
        enc = fm.transform(pd.DataFrame({"inc": ["99", "?", "5000"], "c": ["b", "", "zzz"]}))
    u = lambda v: 2 * math.log1p(v) / math.log1p(999) - 1  # noqa: E731
    want = [[u(99), 0, 1, 0], [u(9), 1, 0, 0], [1, 0, 0, 1]]
    np.testing.assert_allclose(enc.X, want, atol=1e-12)
    assert enc.report.filled_missing == {"inc": 1, "c": 1} and enc.report.unknown_levels == {"c": 1}


def test_columns_matched_by_name_not_position():
    fm = FeatureMap(small_schema())
    df = pd.DataFrame({"age": ["30"], "color": ["g"], "sex": ["F"], "edu": ["lo"], "y": ["no"]})
    a = fm.transform(df).X
    b = fm.transform(df[["y", "edu", "sex", "color", "age"]]).X
    np.testing.assert_array_equal(a, b)


def test_drop_policy_drops_rows_and_counts_them():
    fm = FeatureMap(small_schema())
    df = pd.DataFrame({"age": ["30", "?", "40"], "color": ["g", "r", "NA"], "sex": ["F"] * 3,
                       "edu": ["lo"] * 3, "y": ["no", "yes", ""]})
    enc = fm.transform(df)
    assert enc.X.shape[0] == 1 and list(enc.kept) == [True, False, False]
    assert enc.report.dropped_missing == {"age": 1, "color": 1, "sex": 0, "edu": 0, "y": 0}


# ---------------------------------------------------------------------------------------------
# admissible rows: brute force
# ---------------------------------------------------------------------------------------------

def _enumerate_rows(schema: Schema) -> pd.DataFrame:
    """Every combination of every level and both bounds of every numeric (raw cells)."""
    options = []
    for c in schema.columns:
        if c.kind == "numeric":
            vals = [str(c.bounds[0]), str(c.bounds[1])]
        else:
            vals = list(c.all_levels)
        if c.missing.policy == "fill":
            vals = vals + ["?"]
        options.append(vals)
    rows = list(itertools.product(*options))
    return pd.DataFrame(rows, columns=[c.column for c in schema.columns])


@pytest.mark.parametrize("intercept", [True, False])
def test_max_norm_and_coordinate_bounds_by_enumeration(intercept):
    cols = (S.numeric("x", -3, 1), S.numeric("z", 1, 100, transform="log", missing={"fill": 50}),
            S.categorical("c", ["a", "b", "c"], reference="b", unknown="other"),
            S.ordinal("o", ["1", "2", "3", "4"], missing={"fill": "2"}), S.binary("s", ["n", "y"]))
    sch = Schema(columns=cols, intercept=intercept)
    fm = FeatureMap(sch)
    adm = fm.admissible_rows()
    X = fm.transform(_enumerate_rows(sch), target="ignore").X
    # the encoded numeric maps are monotone, so the bounds' encodings are every extreme value
    assert np.linalg.norm(X, axis=1).max() == pytest.approx(adm.max_norm(), rel=1e-12)
    assert adm.max_norm() == pytest.approx(1.0)  # scaled to row_norm exactly
    cb = adm.coordinate_bounds()
    np.testing.assert_allclose(cb[:, 0], X.min(axis=0), atol=1e-12)
    np.testing.assert_allclose(cb[:, 1], X.max(axis=0), atol=1e-12)
    assert np.all(adm.contains(X)) and adm.exact
    # every vertex of the product set is a row the map produces (interior ordinal ranks are not vertices)
    V = adm.vertices()
    assert {tuple(np.round(v, 9)) for v in V} <= {tuple(np.round(x, 9)) for x in X}
    # sup <w, x> over admissible rows equals the brute-force max over the enumeration
    rng = np.random.default_rng(0)
    for _ in range(5):
        w = rng.normal(size=fm.dim)
        assert adm.max_linear(w) == pytest.approx((X @ w).max(), rel=1e-12)
        assert adm.max_abs_linear(w) == pytest.approx(np.abs(X @ w).max(), rel=1e-12)


def test_identifiable_coding_has_full_rank_and_complete_one_hot_does_not():
    sch = Schema(columns=(S.categorical("a", ["1", "2", "3"]), S.categorical("b", ["x", "y"]),
                          S.numeric("n", 0, 1)))
    X = FeatureMap(sch).transform(_enumerate_rows(sch), target="ignore").X
    assert np.linalg.matrix_rank(X) == X.shape[1]
    # the complete one-hot + intercept coding of the same rows has a flat direction
    full = np.column_stack([np.ones(len(X)), pd.get_dummies(_enumerate_rows(sch)[["a", "b"]]).to_numpy(float)])
    assert np.linalg.matrix_rank(full) < full.shape[1]


def test_shared_source_column_is_flagged_as_upper_bound():
    sch = Schema(columns=(S.numeric("g", 0, 10), S.numeric("lg", 0, 10, transform="log1p", source="g")))
    adm = FeatureMap(sch).admissible_rows()
    assert not adm.exact and "read the same column 'g'" in adm.notes[0]


def test_block_kinds_describe_the_documented_shapes():
    adm = FeatureMap(small_schema()).admissible_rows()
    kinds = [b.kind for b in adm.blocks]
    assert kinds == ["constant", "interval", "one_of", "one_of", "interval"]
    d = adm.describe()
    assert d["blocks"][2]["indices"] == [2, 3] and d["max_norm"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# schema files
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_schema_file_round_trip(tmp_path, suffix):
    sch = small_schema(read={"delimiter": ";"})
    path = S.save_schema(sch, tmp_path / f"s{suffix}", header="a header")
    assert S.load_schema(path) == sch
    if suffix == ".yaml":
        assert path.read_text().startswith("# a header\n")


# ---------------------------------------------------------------------------------------------
# bad input: one line naming the field, raised before anything is computed
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("entry,needle", [
    ({"name": "a", "kind": "numeric", "bounds": [5, 1]}, "lo < hi"),
    ({"name": "a", "kind": "numeric", "bounds": [0, math.inf]}, "finite"),
    ({"name": "a", "kind": "numeric", "bounds": [0, ".inf"]}, "bounds"),
    ({"name": "a", "kind": "numeric"}, "needs bounds"),
    ({"name": "a", "kind": "numeric", "bounds": [0, 1], "transform": "log"}, "lo > 0"),
    ({"name": "a", "kind": "categorical", "levels": ["x", "x"]}, "distinct"),
    ({"name": "a", "kind": "categorical", "levels": ["x", "y"], "reference": "z"}, "reference"),
    ({"name": "a", "kind": "binary", "levels": ["x", "y", "z"]}, "exactly 2"),
    ({"name": "a", "kind": "text"}, "kind must be one of"),
    ({"name": "a", "kind": "numeric", "bounds": [0, 1], "colour": 3}, "unknown key(s) ['colour']"),
    ({"name": "a", "kind": "numeric", "bounds": [0, 1], "missing": {"fill": 7}}, "inside the bounds"),
])
def test_bad_column_entries(entry, needle):
    with pytest.raises(ValueError) as e:
        Schema.from_dict({"columns": [entry]})
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_bad_schema_level_entries():
    with pytest.raises(ValueError, match=r"duplicate column name\(s\) \['a'\]"):
        Schema(columns=(S.numeric("a", 0, 1), S.numeric("a", 0, 2)))
    with pytest.raises(ValueError, match="unknown key"):
        Schema.from_dict({"columns": [{"name": "a", "kind": "numeric", "bounds": [0, 1]}], "colums": []})
    with pytest.raises(ValueError, match="both positive and negative"):
        S.binary_target("y", ["1"], ["1", "2"])
    with pytest.raises(ValueError, match="also a feature column"):
        Schema(columns=(S.numeric("a", 0, 1),), target=S.numeric_target("a", 0, 1))
    with pytest.raises(ValueError, match="not valid YAML"):
        S.io.schema_from_text("columns: [a, b")


def _frame(**over):
    d = {"age": ["30", "40"], "color": ["g", "r"], "sex": ["F", "M"], "edu": ["lo", "hi"], "y": ["no", "yes"]}
    d.update(over)
    return pd.DataFrame(d)


@pytest.mark.parametrize("frame,needle", [
    (_frame().drop(columns="color"), "['color'] declared in the schema are missing"),
    (_frame(extra=["1", "2"]), "['extra'] of DataFrame are not in the schema"),
    (_frame(age=["30", "thirty"]), "data row 2 holds 'thirty', not a finite number"),
    (_frame(age=["30", "inf"]), "not a finite number"),
    (_frame(y=["no", "maybe"]), "'maybe', not among the declared labels"),
    (_frame(color=["g", "purple"]), "'purple', not a declared level of 'color'"),
    (_frame().drop(columns="y"), "target column 'y' is missing"),
])
def test_bad_data(frame, needle):
    with pytest.raises(ValueError) as e:
        FeatureMap(small_schema()).transform(frame)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_extra_columns_ignore_and_ignore_list():
    df = _frame(extra=["1", "2"])
    assert FeatureMap(small_schema(extra_columns="ignore")).transform(df).report.ignored_columns == ["extra"]
    assert FeatureMap(small_schema(ignore=("extra",))).transform(df).X.shape == (2, 6)


# ---------------------------------------------------------------------------------------------
# readers
# ---------------------------------------------------------------------------------------------

def test_csv_dialects_parquet_and_arrow_give_the_same_matrix(tmp_path):
    fm = FeatureMap(small_schema())
    df = _frame()
    want = fm.transform(df).X
    (tmp_path / "a.csv").write_text('age;color;sex;edu;y\n"30";g;F;lo;no\n40;"r";M;hi;yes\n')
    np.testing.assert_array_equal(fm.transform(tmp_path / "a.csv", delimiter=";").X, want)
    (tmp_path / "b.csv").write_text("30,g,F,lo,no\n40,r,M,hi,yes\n")
    got = fm.transform(tmp_path / "b.csv", header=False, names=["age", "color", "sex", "edu", "y"]).X
    np.testing.assert_array_equal(got, want)
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    typed = pd.DataFrame({"age": [30, 40], "color": ["g", "r"], "sex": ["F", "M"], "edu": ["lo", "hi"],
                          "y": ["no", "yes"]})
    pq.write_table(pa.Table.from_pandas(typed), tmp_path / "c.parquet")
    np.testing.assert_array_equal(fm.transform(tmp_path / "c.parquet").X, want)
    np.testing.assert_array_equal(fm.transform(pa.Table.from_pandas(typed)).X, want)


def test_quoted_delimiters_inside_cells(tmp_path):
    sch = Schema(columns=(S.categorical("c", ["a,b", "c"]),), intercept=False, row_norm=None)
    (tmp_path / "q.csv").write_text('c\n"a,b"\nc\n')
    np.testing.assert_array_equal(FeatureMap(sch).transform(tmp_path / "q.csv").X, [[0.0], [1.0]])


@pytest.mark.parametrize("content,needle", [
    (b"", "is empty"),
    (b"age,color,sex,edu,y\n", "has a header but no rows"),
    (b"age,age,sex,edu,y\n1,2,F,lo,no\n", "duplicate column name(s) ['age']"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\xff\xfe", "not a table"),
    (b'{\n  "a": 1,\n  "b": [1, 2, 3]\n}\n', "not a table"),
])
def test_bad_files(tmp_path, content, needle):
    p = tmp_path / "bad.csv"
    p.write_bytes(content)
    with pytest.raises(ValueError) as e:
        FeatureMap(small_schema()).transform(p)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_not_a_parquet_file(tmp_path):
    pytest.importorskip("pyarrow")
    p = tmp_path / "x.parquet"
    p.write_text("age,color\n1,2\n")
    with pytest.raises(ValueError, match="is not a Parquet table"):
        FeatureMap(small_schema()).transform(p)


def test_data_report_is_marked_non_private_and_warns_locally():
    sch = small_schema(clip_warn_fraction=0.4)
    df = _frame(age=["10", "40"])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        enc = FeatureMap(sch).transform(df)
    assert any(issubclass(x.category, S.ClippingWarning) for x in w)
    d = enc.report.as_dict()
    assert list(d)[0] == "NON_PRIVATE" and "never release" in d["NON_PRIVATE"]
    assert enc.report.format().startswith("NON-PRIVATE")
    json.dumps(d)


def test_admissible_rows_feed_the_metric_sensitivity():
    """The privacy code's block bound over a schema's admissible rows is valid (>= the brute-force
    maximum over every vertex row) and never above the norm-ball bound."""
    from dp_infer.privacy.metric_sensitivity import brute_force_max_quadratic_form, max_quadratic_form

    sch = Schema(columns=(S.numeric("x", -3, 1), S.categorical("c", ["a", "b", "c"], unknown="other"),
                          S.ordinal("o", ["1", "2", "3"], missing={"fill": "2"}), S.binary("s", ["n", "y"])))
    adm = FeatureMap(sch).admissible_rows()
    rng = np.random.default_rng(0)
    for _ in range(5):
        A = rng.normal(size=(adm.dim, adm.dim))
        P = A @ A.T / adm.dim
        exact = brute_force_max_quadratic_form(P, adm)
        bound = max_quadratic_form(P, rows=adm, row_norm=adm.max_norm())
        assert exact <= bound * (1 + 1e-12)
        assert bound <= np.linalg.eigvalsh(P)[-1] * adm.max_norm() ** 2 * (1 + 1e-12)
    D = np.diag(rng.uniform(0.5, 2.0, adm.dim))  # diagonal P: the block bound is exact
    assert max_quadratic_form(D, rows=adm) == pytest.approx(brute_force_max_quadratic_form(D, adm), rel=1e-12)
