"""Finding 1 of issue 30: n is public under every schema missing-value policy.

Oracle: neighbouring files. Two CSV files differ in ONE cell (present in one, missing in the
other); the plan the private fit path makes from them (n, beta, the whole plan as JSON) must be
bit-identical, or -- for the explicit ``missing: drop`` policy, which makes n private -- both
must be refused by the same error, decided on the schema alone.
"""

import json

import numpy as np
import pytest

import dp_infer.schema as S
from dp_infer.routes.calibrate import calibrate
from dp_infer.cli.schema_commands import schema_sample_data
from dp_infer.schema import FeatureMap, Schema, save_schema

N = 120


def _files(tmp_path, column):
    """Two neighbouring CSVs: row 7's ``column`` present in a.csv, missing ('?') in b.csv."""
    rng = np.random.default_rng(3)
    age = rng.integers(20, 60, N)
    color = rng.choice(["r", "g", "b"], N)
    edu = rng.choice(["lo", "mid", "hi"], N)
    y = rng.choice(["yes", "no"], N)
    rows = [dict(age=str(a), color=c, edu=e, y=t) for a, c, e, t in zip(age, color, edu, y)]
    out = []
    for name, blank in (("a.csv", False), ("b.csv", True)):
        lines = ["age,color,edu,y"]
        for i, r in enumerate(rows):
            r = dict(r)
            if blank and i == 7:
                r[column] = "?"
            lines.append(",".join(r[k] for k in ("age", "color", "edu", "y")))
        p = tmp_path / name
        p.write_text("\n".join(lines) + "\n")
        out.append(p)
    return out


POLICIES = {
    "default": {},
    "neutral": {"missing": "neutral"},
    "fill+indicator": {"missing": {"fill": 40}},
    "fill, no indicator": {"missing": {"fill": 40, "indicator": False}},
}


def _with_fill(kw, fill):
    """``kw`` with a declared fill value swapped for ``fill`` (one that suits the column)."""
    return {k: ({**v, "fill": fill} if isinstance(v, dict) else v) for k, v in kw.items()}


def _schema(policy_kw, cat_policy_kw=None):
    cat_kw = policy_kw if cat_policy_kw is None else cat_policy_kw
    return Schema(columns=(S.numeric("age", 20, 60, **policy_kw),
                           S.categorical("color", ["r", "g", "b"], **_with_fill(cat_kw, "g")),
                           S.ordinal("edu", ["lo", "mid", "hi"], **_with_fill(cat_kw, "mid"))),
                  target=S.binary_target("y", "yes", "no"))


def _plan_json(csv, schema_file):
    d = schema_sample_data(csv, schema_file, echo=lambda *_: None)
    plan = calibrate(d.make_loss("logistic", 1.0, None), d.X.shape[0], d.X.shape[1], eps=1.0, delta=1e-5)
    return d.X.shape[0], plan.beta, json.dumps(plan.as_dict(), sort_keys=True, default=str)


@pytest.mark.parametrize("column", ["age", "color", "edu"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_neighbouring_files_give_identical_n_and_plan(tmp_path, policy, column):
    sf = save_schema(_schema(POLICIES[policy]), tmp_path / "s.yaml")
    a, b = _files(tmp_path, column)
    na, beta_a, ja = _plan_json(a, sf)
    nb, beta_b, jb = _plan_json(b, sf)
    assert na == nb == N
    assert beta_a == beta_b  # bit-identical
    assert ja == jb


@pytest.mark.parametrize("column", ["age", "color"])
def test_explicit_drop_is_refused_on_the_schema_alone(tmp_path, column):
    sch = _schema({"missing": "drop"} if column == "age" else {}, {"missing": "drop"} if column == "color" else {})
    assert not sch.n_is_public
    sf = save_schema(sch, tmp_path / "s.yaml")
    a, b = _files(tmp_path, column)
    msgs = []
    for f in (a, b):
        with pytest.raises(ValueError, match="missing: drop, which makes n private") as ei:
            schema_sample_data(f, sf, echo=lambda *_: None)
        msgs.append(str(ei.value))
        assert "\n" not in str(ei.value)
    assert msgs[0] == msgs[1]


def test_default_policy_is_neutral_and_admissible():
    col = S.numeric("age", 20, 60)
    assert col.missing.policy == "neutral" and col.to_dict()["missing"] == "neutral"
    fm = FeatureMap(_schema({}))
    import pandas as pd

    enc = fm.transform(pd.DataFrame({"age": ["?"], "color": [""], "edu": ["NA"], "y": ["no"]}))
    assert enc.X.shape == (1, fm.dim)
    np.testing.assert_array_equal(enc.X[0, 1:], 0.0)  # every coordinate but the intercept is 0
    assert np.all(fm.admissible_rows().contains(enc.X))


def test_a_missing_label_is_an_error_not_a_dropped_row(tmp_path):
    sf = save_schema(_schema({}), tmp_path / "s.yaml")
    a, _ = _files(tmp_path, "age")
    text = a.read_text().splitlines()
    text[9] = text[9].rsplit(",", 1)[0] + ",?"
    a.write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError, match="target column 'y'.*missing label") as ei:
        schema_sample_data(a, sf, echo=lambda *_: None)
    assert "row" not in str(ei.value).split("missing label")[0]  # no row number of the private file


def test_private_draft_never_writes_drop(tmp_path):
    pytest.importorskip("opendp")
    from dp_infer.schema.draft import draft_private

    a, _ = _files(tmp_path, "age")
    res = draft_private(a, "y", eps=5.0, delta=1e-6, kinds={"age": "numeric"})
    assert res.schema.columns
    for c in res.schema.columns:
        assert c.missing.policy != "drop"
    assert res.schema.n_is_public
