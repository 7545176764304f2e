"""CLI for your own data: draft (non-private and private), sample --schema with --split or --test-csv,
predict from the stored schema, and bad input refused with one line before any budget is spent."""

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from dp_infer.cli import main
from dp_infer.privacy.ledger import Ledger


def _write_csv(path, n=800, seed=0, delimiter=","):
    rng = np.random.default_rng(seed)
    age = rng.integers(20, 70, n)
    colour = rng.choice(["red", "green", "blue"], n)
    logit = (age - 45) / 8 + np.where(colour == "red", 2.0, -1.0)
    label = np.where(logit + 0.5 * rng.normal(size=n) > 0, 2, 1)  # coded 1/2 as in many code books
    lines = [delimiter.join(["id", "age", "colour", "label"])]
    lines += [delimiter.join([str(i), str(a), c, str(lab)]) for i, (a, c, lab) in enumerate(zip(age, colour, label))]
    path.write_text("\n".join(lines) + "\n")
    return path


SCHEMA = """
target: {name: label, kind: binary, positive: [2], negative: [1]}
ignore: [id]
columns:
  - {name: age, kind: numeric, bounds: [18, 80]}
  - {name: colour, kind: categorical, levels: [green, red, blue]}
"""


def test_sample_with_schema_split_and_predict(tmp_path):
    data = _write_csv(tmp_path / "d.csv")
    (tmp_path / "s.yaml").write_text(SCHEMA)
    out = tmp_path / "run.zip"
    args = ["sample", str(data), "--schema", str(tmp_path / "s.yaml"), "--split", "0.3", "--split-seed", "4",
            "--eps", "4", "--horizon", "0.5", "--reproducible-seed", "1", "--no-progress"]
    quiet = CliRunner().invoke(main, args)  # without the flag nothing computed on private rows is shown
    assert quiet.exit_code == 0, quiet.output
    assert "NON-PRIVATE" not in quiet.output and "test accuracy of" not in quiet.output
    res = CliRunner().invoke(main, args + ["--nonprivate-diagnostics", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "NON-PRIVATE local data report" in res.output and "560 train rows, 240 held-out rows" in res.output
    acc = float(res.output.split("test accuracy of the released estimate")[1].split(":")[1].split()[0])
    assert acc > 0.75
    from dp_infer.diagnostics import get_report, load

    dt = load(out)
    stored = json.loads(dt.attrs["dp_infer_schema"])
    assert stored["target"]["positive"] == ["2"] and json.loads(dt.attrs["dp_infer_feature_names"])[0] == "intercept"
    # the schema's feature names are the draws' ArviZ coords (theta[intercept], not theta[0])
    assert list(dt["posterior"]["theta"].coords["feature"].values[:2]) == json.loads(dt.attrs["dp_infer_feature_names"])[:2]
    blob = json.dumps({k: str(v) for k, v in dt.attrs.items()})
    assert "n_rows_read" not in blob and "NON-PRIVATE" not in blob  # no local report in the run
    assert get_report(dt)["eps_spent"] <= 4 * (1 + 1e-9)
    pred = CliRunner().invoke(main, ["predict", str(out), str(data), "-o", str(tmp_path / "p.csv")])
    assert pred.exit_code == 0, pred.output
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0] == "probability,prediction" and len(lines) == 801
    # labels come back in the schema's own values (positive 2, negative 1), not 0/1
    rows = [ln.split(",") for ln in lines[1:]]
    assert {r[1] for r in rows} <= {"1", "2"} and all((float(p) > 0.5) == (lab == "2") for p, lab in rows)


def test_draft_nonprivate_then_private_with_ledger(tmp_path):
    data = _write_csv(tmp_path / "d.tsv", n=4000, delimiter="\t")
    res = CliRunner().invoke(main, ["schema", "draft", str(data), "-o", str(tmp_path / "np.yaml"),
                                    "--target", "label", "--delimiter", "\t"])
    assert res.exit_code == 0, res.output
    assert "NON-PRIVATE DRAFT" in res.output and (tmp_path / "np.yaml").read_text().startswith("# NON-PRIVATE DRAFT")
    led = tmp_path / "l.sqlite"
    res = CliRunner().invoke(main, ["schema", "draft", str(data), "-o", str(tmp_path / "p.yaml"), "--target", "label",
                                    "--delimiter", "\t", "--private", "--eps", "2", "--kind", "id=numeric",
                                    "--ledger", str(led), "--budget", "3", "1e-5"])
    assert res.exit_code == 0, res.output
    assert "charged (eps = 2, delta = 1e-06) before drafting" in res.output
    text = (tmp_path / "p.yaml").read_text()
    assert text.startswith("# PRIVATE DRAFT (OpenDP)") and "delimiter: \"\\t\"" in text
    assert len(Ledger(led).history("default")) == 1
    chk = CliRunner().invoke(main, ["schema", "check", str(data), "--schema", str(tmp_path / "p.yaml")])
    assert chk.exit_code == 0, chk.output
    assert "row-norm bound 1 (exact)" in chk.output and "NON-PRIVATE" in chk.output


def test_draft_option_errors(tmp_path):
    data = _write_csv(tmp_path / "d.csv", n=20)
    for args, needle in ((["--budget", "1", "1e-5"], "--budget needs --ledger"),
                         (["--ledger", str(tmp_path / "l.sqlite")], "a --private draft only"),
                         (["--private"], "needs --eps")):
        res = CliRunner().invoke(main, ["schema", "draft", str(data), "-o", str(tmp_path / "s.yaml"), *args])
        assert res.exit_code != 0 and needle in str(res.exception), (args, res.output)
    assert not (tmp_path / "l.sqlite").exists()


def _run_cli(args, cwd):
    return subprocess.run([sys.executable, "-c", "from dp_infer.cli import run; run()", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("case,needle", [
    ("unknown_column", "['id'] of"),
    ("missing_column", "['colour'] declared in the schema are missing"),
    ("non_numeric", "not a finite number"),
    ("bad_label", "not among the declared labels"),
    ("empty", "is empty"),
    ("inverted", "lo < hi"),
    ("infinite", "finite"),
    ("duplicate", "duplicate column name(s) ['age']"),
    ("not_a_table", "not a table"),
])
def test_bad_input_one_line_and_nothing_charged(tmp_path, case, needle):
    data = _write_csv(tmp_path / "d.csv", n=50)
    schema = SCHEMA
    text = data.read_text()
    if case == "unknown_column":
        schema = SCHEMA.replace("ignore: [id]\n", "")
    elif case == "missing_column":
        text = "\n".join(",".join(f for j, f in enumerate(line.split(",")) if j != 2) for line in text.splitlines())
    elif case == "non_numeric":
        text = text.replace("\n3,", "\n3x,", 1).replace(",", ",", 1)
        lines = text.splitlines()
        f = lines[5].split(",")
        f[1] = "forty"
        lines[5] = ",".join(f)
        text = "\n".join(lines)
    elif case == "bad_label":
        lines = text.splitlines()
        lines[3] = lines[3].rsplit(",", 1)[0] + ",3"
        text = "\n".join(lines)
    elif case == "empty":
        text = ""
    elif case == "inverted":
        schema = SCHEMA.replace("[18, 80]", "[80, 18]")
    elif case == "infinite":
        schema = SCHEMA.replace("[18, 80]", "[18, .inf]")
    elif case == "duplicate":
        text = text.replace("id,age", "age,age", 1)
    elif case == "not_a_table":
        data = tmp_path / "d.png"
        data.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\xff\xfe\x00")
        text = None
    if text is not None:
        data.write_text(text)
    (tmp_path / "s.yaml").write_text(schema)
    led = tmp_path / "l.sqlite"
    proc = _run_cli(["sample", str(data), "--schema", "s.yaml", "--no-progress", "--ledger", str(led),
                     "--budget", "5", "1e-5"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and needle in err, err
    assert not led.exists() or Ledger(led).history("default") == []


# issue 41: a first try on a user's own CSV ---------------------------------------------------------

def test_draft_sniffs_a_semicolon_file_and_check_reads_it_the_same_way(tmp_path):
    data = _write_csv(tmp_path / "d.csv", n=300, delimiter=";")
    res = CliRunner().invoke(main, ["schema", "draft", str(data), "-o", str(tmp_path / "s.yaml"), "--target", "label"])
    assert res.exit_code == 0, res.output
    assert "delimiter ';' recorded under read:" in res.output
    assert "suggested --prior-precision" in res.output and "row scale" in res.output
    text = (tmp_path / "s.yaml").read_text()
    assert "delimiter: ;" in text and "unknown: other" not in text  # colour: 3 levels, none truncated
    chk = CliRunner().invoke(main, ["schema", "check", str(data), "--schema", str(tmp_path / "s.yaml")])
    assert chk.exit_code == 0, chk.output
    assert "300 rows read" in chk.output and "suggested --prior-precision" in chk.output
    res = CliRunner().invoke(main, ["schema", "draft", str(data), "-o", str(tmp_path / "o.yaml"), "--target", "label",
                                    "--other-level"])
    assert res.exit_code == 0 and "unknown: other" in (tmp_path / "o.yaml").read_text()


def test_ambiguous_delimiter_and_broken_yaml_are_one_line_errors(tmp_path):
    (tmp_path / "amb.csv").write_text("a;b,c\n1;2,3\n4;5,6\n")
    proc = _run_cli(["schema", "draft", "amb.csv", "-o", "s.yaml"], tmp_path)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and "\n" not in err and "ambiguous" in err and "--delimiter" in err, err
    data = _write_csv(tmp_path / "d.csv", n=30)
    (tmp_path / "bad.yaml").write_text(SCHEMA.replace("bounds: [18, 80]}", "bounds: [18, 80], note: age: in years}"))
    proc = _run_cli(["schema", "check", str(data), "--schema", "bad.yaml"], tmp_path)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and "\n" not in err and "Traceback" not in proc.stderr, proc.stderr
    assert err.startswith("error: schema bad.yaml, line 5, column ") and "must be quoted" in err, err


def test_private_draft_at_n100_eps1_says_what_it_resolves_and_exits_4(tmp_path):
    pytest.importorskip("opendp")
    rng = np.random.default_rng(5)
    x1 = [f"{v:.4f}" for v in rng.normal(size=100)]
    x1[3] = "NaN"
    lines = ["x1,x2"] + [f"{a},{b:.3f}" for a, b in zip(x1, rng.uniform(1.0, 1.4, 100))]
    (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
    led = tmp_path / "l.sqlite"
    base = ["schema", "draft", "d.csv", "-o", "s.yaml", "--private", "--eps", "1", "--ledger", str(led),
            "--budget", "5", "1e-5"]
    # the kind test alone is noise at n = 100: refused before the charge
    proc = _run_cli(base, tmp_path)
    assert proc.returncode == 2 and "private draft plan (before any charge): n = 100" in proc.stdout
    assert "nothing was charged" in proc.stderr and Ledger(led).history("default") == []
    proc = _run_cli(base + ["--kind", "x1=numeric", "--kind", "x2=numeric"], tmp_path)
    err = proc.stderr.strip()
    # the draft's noise is secret, so either of the two ways x1's bounds go meaningless at n = 100 can occur
    # (dp_infer.schema.draft: no bin passes the threshold, or those that pass hold under half the rows)
    assert "x1: no bin" in err or "x1: the bins that passed the noise threshold hold" in err, err
    assert "\n" not in err and len(Ledger(led).history("default")) == 1
    assert proc.stdout.index("private draft plan") < proc.stdout.index("charged (eps = 1")
    if proc.returncode == 2:
        # x2's 100 rows fill the bin [1, 1.5) (count ~100 +- Laplace(4)), but each of the ~290 empty bins of the
        # grid passes the threshold 35 with probability exp(-35 / 4) / 2 = 8e-5, so with probability ~2.3% a
        # noise bin passes too and x2's lower bound rests on it: refused by its reason, nothing drafted
        assert err.startswith("error: data: no feature column could be drafted privately at n = 100"), err
        assert "x2: the lower bound rests on one isolated bin" in err or "x2: the upper bound rests" in err, err
        return
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert err.startswith("error: private draft: 1 entry unresolved"), err
    text = (tmp_path / "s.yaml").read_text()
    assert "# - name: x1" in text and "ignore: [x1]" in text and "bounds: [1.0, 1.5]" in text
