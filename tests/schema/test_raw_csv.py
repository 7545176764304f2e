"""Issue 41, a first try on a user's own CSV: the delimiter is sniffed by one rule for every reader,
``other`` only where a row can reach it, skewed columns proposed on a log scale (with a comment),
YAML errors with a place, the suggested prior precision, and a private draft at small n that
says what it can resolve and flags what the noise made meaningless."""

import gzip
import math
import re

import numpy as np
import pandas as pd
import pytest

from dp_infer.schema import FeatureMap, load_schema, numeric, save_schema
from dp_infer.schema import draft as D
from dp_infer.schema.advice import suggest_prior_precision
from dp_infer.schema.io import schema_from_text
from dp_infer.schema.readers import read_table, sniff_delimiter
from dp_infer.schema.spec import Schema


def _table(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(18, 90, n).astype(str),
        "job": rng.choice(["admin.", "blue-collar", "services", "retired"], n),
        "duration": np.maximum(np.round(rng.lognormal(5.3, 0.9, n)), 1).astype(int).astype(str),
        "balance": np.round(rng.lognormal(6.5, 1.4, n) - 300).astype(int).astype(str),
        "x": np.round(rng.normal(size=n), 3).astype(str),
        "y": rng.choice(["no", "yes"], n, p=[0.8, 0.2]),
    })


def _write(df, path, sep=";", quote_text=True):
    def cell(v):
        return f'"{v}"' if quote_text and not v.lstrip("-").replace(".", "", 1).isdigit() else v
    lines = [sep.join(f'"{c}"' for c in df.columns)] + [sep.join(cell(v) for v in row) for row in df.to_numpy(str)]
    text = "\n".join(lines) + "\n"
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


# 1. the delimiter ------------------------------------------------------------------------------

@pytest.mark.parametrize("sep,name", [(";", "d.csv"), ("\t", "d.tsv"), ("|", "d.txt"), (";", "d.csv.gz")])
def test_the_delimiter_is_sniffed_and_recorded_for_every_later_reader(tmp_path, sep, name):
    path = _write(_table(), tmp_path / name, sep=sep)
    assert sniff_delimiter(path) == sep
    res = D.draft_nonprivate(path, "y")  # no delimiter given: the old reader saw one column 'age;job;...'
    assert [c.name for c in res.schema.columns] == ["age", "job", "duration", "balance", "x"]
    assert res.schema.read == {"delimiter": sep}
    save_schema(res, tmp_path / "s.yaml")
    sch = load_schema(tmp_path / "s.yaml")
    assert sch.read["delimiter"] == sep
    enc = FeatureMap(sch).transform(path)  # check / sample / predict read through the schema
    assert enc.X.shape[0] == 400


def test_a_comma_file_is_still_read_as_before_and_records_nothing(tmp_path):
    path = _write(_table(), tmp_path / "d.csv", sep=",")
    res = D.draft_nonprivate(path, "y")
    assert res.schema.read is None and read_table(path).attrs["delimiter"] == ","


def test_an_ambiguous_delimiter_asks_for_it_in_one_line(tmp_path):
    path = tmp_path / "amb.csv"
    path.write_text("a;b,c\n1;2,3\n4;5,6\n")  # ';' and ',' both split every line evenly
    with pytest.raises(ValueError, match=r"ambiguous.*--delimiter") as e:
        D.draft_nonprivate(path)
    assert "\n" not in str(e.value)
    assert read_table(path, delimiter=";").columns.tolist() == ["a", "b,c"]  # an explicit one wins


def test_a_wrong_delimiter_names_the_right_one(tmp_path):
    path = _write(_table(), tmp_path / "d.csv", sep=";")
    with pytest.raises(ValueError, match=r"read as ONE column.*--delimiter ';'"):
        D.draft_nonprivate(path, "y", delimiter=",")
    sch = Schema(columns=(numeric("age", 18, 90),), extra_columns="ignore", read={"delimiter": ","})
    with pytest.raises(ValueError, match=r"--delimiter ';'"):
        FeatureMap(sch).transform(path, target="ignore")


# 2. levels no row can touch --------------------------------------------------------------------

def test_other_only_where_a_row_can_reach_it(tmp_path):
    df = _table()
    res = D.draft_nonprivate(df, "y")
    job = res.schema.column("job")
    assert job.unknown == "error" and "other" not in job.all_levels
    assert FeatureMap(res.schema).dim == 1 + 1 + 3 + 1 + 1 + 1  # intercept, age, job (4 - ref), duration, balance, x
    asked = D.draft_nonprivate(df, "y", other_level=True).schema.column("job")
    assert asked.unknown == "other"
    cut = D.draft_nonprivate(df, "y", max_levels=2).schema.column("job")  # truncated: rows map to other
    assert cut.unknown == "other" and len(cut.levels) == 2 and "map to 'other'" in cut.note


def test_schemas_that_declare_other_keep_working():
    sch = schema_from_text("columns:\n  - {name: job, kind: categorical, levels: [a, b], unknown: other}\n")
    enc = FeatureMap(sch).transform(pd.DataFrame({"job": ["a", "b", "zzz"]}), target="ignore")
    assert enc.feature_names == ["intercept", "job=b", "job=other"] and enc.report.unknown_levels == {"job": 1}


# 3. skewed columns -----------------------------------------------------------------------------

def test_skewed_columns_get_a_log_scale_quantile_bounds_and_a_comment(tmp_path):
    df = _table(2000)
    res = D.draft_nonprivate(df, "y")
    dur, bal = res.schema.column("duration"), res.schema.column("balance")
    v = df.duration.astype(float)
    assert dur.transform == "log1p" and dur.bounds[0] == v.min() and dur.bounds[1] < v.max()
    assert dur.bounds[1] >= v.quantile(0.995)
    assert bal.transform == "none" and bal.bounds[1] < df.balance.astype(float).max()  # negatives: no log
    assert res.schema.column("age").transform == "none" and res.schema.column("x").transform == "none"
    text = res.yaml()
    above = text.split("- name: duration")[0].splitlines()[-1]
    assert above.startswith("# ") and "min/max" in above
    assert "# skewed (skewness" in text
    assert load_schema(save_schema(res, tmp_path / "s.yaml")) == res.schema  # comments do not change the schema
    lin = D.draft_nonprivate(df, "y", log_skewed=False).schema.column("duration")
    assert lin.transform == "none" and lin.bounds == (v.min(), v.max())


def test_positive_continuous_skew_gets_log():
    rng = np.random.default_rng(1)
    p = D.skew_proposal(rng.lognormal(0, 1.2, 3000) + 0.5)
    assert p["transform"] == "log" and p["bounds"][0] > 0
    assert D.skew_proposal(rng.normal(size=3000)) is None


@pytest.mark.parametrize("tf,lo,hi", [("log1p", 0.0, 2000.0), ("log1p", 3.0, 50.0), ("log", 0.5, 1e4)])
def test_log_transforms_keep_the_admissible_rows_and_the_norm_bound(tf, lo, hi):
    sch = Schema(columns=(numeric("a", lo, hi, transform=tf), numeric("b", 0, 1)), extra_columns="ignore")
    fm = FeatureMap(sch)
    # values below and above the bounds are clipped BEFORE the transform (even -5 under log)
    vals = np.concatenate([[lo - 5, lo], np.geomspace(max(lo, 1e-3), hi, 50), [hi, hi * 10]])
    X = fm.transform(pd.DataFrame({"a": vals, "b": np.ones_like(vals)}), target="ignore").X
    cb = np.asarray(fm.admissible_rows().coordinate_bounds())
    assert np.all(X >= cb[:, 0] - 1e-12) and np.all(X <= cb[:, 1] + 1e-12)
    assert np.linalg.norm(X, axis=1).max() <= fm.row_norm * (1 + 1e-12)
    assert math.isclose(np.linalg.norm(X, axis=1).max(), fm.row_norm, rel_tol=1e-9)  # the bound is attained
    assert X[:, 1].min() == pytest.approx(-fm.scale) and X[:, 1].max() == pytest.approx(fm.scale)


# 4. YAML errors with a place -------------------------------------------------------------------

def test_a_yaml_error_names_file_line_and_column(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("columns:\n  - name: age\n    kind: numeric\n    bounds: [18, 90]\n    note: bounds: read by hand\n")
    with pytest.raises(ValueError) as e:
        load_schema(p)
    msg = str(e.value)
    assert msg.startswith(f"schema {p}, line 5, column 17: not valid YAML: mapping values are not allowed here")
    assert "must be quoted" in msg and "\n" not in msg
    (tmp_path / "s.json").write_text('{"columns": [\n  {"name": "a",}\n]}')
    with pytest.raises(ValueError, match=r"s.json, line 2, column \d+: not valid JSON"):
        load_schema(tmp_path / "s.json")


# 5. the prior precision ------------------------------------------------------------------------

def test_the_suggested_prior_precision_follows_the_row_scale():
    res = D.draft_nonprivate(_table(), "y")
    fm = FeatureMap(res.schema)
    adv = suggest_prior_precision(res.schema)
    assert fm.raw_max_norm == pytest.approx(math.sqrt(1 + 5))  # intercept + 5 columns, each at most 1
    assert adv.sd == pytest.approx(2.5 * fm.raw_max_norm) and adv.precision == pytest.approx(1 / adv.sd ** 2)
    assert res.advice.precision == adv.precision and f"--prior-precision {adv.precision:.3g}" in res.yaml()
    assert suggest_prior_precision(res.schema, sd_raw=1.0).sd == pytest.approx(fm.raw_max_norm)


# 7. a private draft at small n -----------------------------------------------------------------

def _small(n=100, seed=3):
    rng = np.random.default_rng(seed)
    x1 = np.round(rng.normal(size=n), 4).astype(str).astype(object)
    x1[7] = "NaN"  # one missing cell: the column must not be dropped for it
    x2 = np.round(rng.uniform(1.0, 1.4, n), 3).astype(str)  # one bin of the grid, [1, 1.5): resolvable
    return pd.DataFrame({"x1": x1, "x2": x2})


def test_private_draft_at_n100_eps1_flags_meaningless_bounds(tmp_path, monkeypatch):
    pytest.importorskip("opendp")
    from dp_infer.privacy.ledger import Ledger

    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", 5.0, 1e-5)
    said = []
    real_charge = Ledger.charge
    monkeypatch.setattr(Ledger, "charge", lambda self, *a, **k: (said.append("charge"), real_charge(self, *a, **k))[1])
    try:
        res = D.draft_private(_small(), None, eps=1.0, delta=1e-6, kinds={"x1": "numeric", "x2": "numeric"},
                              ledger=led, dataset_id="d", on_plan=said.append)
    except ValueError as e:  # the rare outcome below where x2 is unresolved too: nothing left to draft, said so
        assert said[1] == "charge" and "no feature column could be drafted privately" in str(e)
        assert re.search(r"x2: the (lower|upper) bound rests on one isolated bin", str(e)), str(e)
        return
    assert said[0].startswith("private draft plan (before any charge): n = 100") and said[1] == "charge"
    assert "35 noisy rows" in said[0]
    # The grid's empty bins pass the threshold T = (2/eps) log(20 k) with probability about 2.5% per column
    # (0.5 exp(-T/b) per bin, b = 2/eps, over k bins): the draft's own design, whose rules then name the result
    # meaningless. So each column has two correct outcomes, and the test accepts both, by their reasons.
    # x1 ~ N(0, 1) spreads over ~20 narrow bins of ~5 rows: no data bin passes (5 + Laplace(b) > 35 has
    # probability ~1e-4 per bin); an empty bin that passes holds < 50 of the 100 rows: unresolved either way
    why_x1 = res.unresolved.get("x1", "")
    assert ("no bin of the DP histogram passed" in why_x1
            or re.search(r"the bins that passed the noise threshold hold \d+ of the n = 100 rows", why_x1)), why_x1
    # x2: 100 rows in [1, 1.5) vs threshold 35 and Laplace noise: resolved to that bin, unless an empty bin
    # passed too (about 2.5%), when a bound rests on that isolated noise bin and the draft, with no column
    # left, refuses after the charge and says why (the except above)
    text = res.yaml()
    assert f"# UNRESOLVED: {why_x1[:40]}" in text and "# - name: x1" in text
    assert "UNRESOLVED at n = 100, eps = 1" in text
    assert [c.name for c in res.schema.columns] == ["x2"] and res.schema.ignore == ("x1",)
    assert res.schema.column("x2").bounds == (1.0, 1.5)
    sch = load_schema(save_schema(res, tmp_path / "s.yaml"))
    assert sch.ignore == ("x1",) and FeatureMap(sch).transform(_small(), target="ignore").X.shape == (100, 2)


def test_private_draft_that_can_resolve_nothing_is_refused_before_the_charge(tmp_path):
    pytest.importorskip("opendp")
    from dp_infer.privacy.ledger import Ledger

    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", 5.0, 1e-5)
    said = []
    with pytest.raises(ValueError, match=r"can resolve nothing.*nothing was charged.*--kind"):
        D.draft_private(_small(), None, eps=1.0, delta=1e-6, ledger=led, dataset_id="d", on_plan=said.append)
    assert "kind test" in said[0] and "UNRELIABLE" in said[0]
    assert led.history("d") == []


def test_bounds_the_noise_made_meaningless_are_named():
    k, eps, n = 200, 0.5, 1000
    T = D._threshold(eps, k)
    ok = np.zeros(k)
    ok[100:105] = n / 5
    assert D._bounds_meaningless(ok, eps, n) == ""
    assert "no bin" in D._bounds_meaningless(np.full(k, T / 2), eps, n)
    few = np.zeros(k)
    few[100] = 0.3 * n  # the passing bins hold 30% of the rows
    assert "hold 300 of the n = 1000" in D._bounds_meaningless(few, eps, n)
    far = ok.copy()
    far[190] = T + 1  # one isolated noise-sized bin, far out, above the 98% quantile mass (T+1 > 2% of n)
    assert (T + 1) / (n + T + 1) > 0.02
    assert "upper bound rests on one isolated bin" in D._bounds_meaningless(far, eps, n)
    real = ok.copy()
    real[190] = 0.2 * n  # a real, well-populated second mode is kept
    assert D._bounds_meaningless(real, eps, n) == ""
