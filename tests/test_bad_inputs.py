"""Every bad input gets one clear line naming the parameter and the allowed range, before any
budget is charged or any draw is lost (CLI through its real entry point, and Python)."""

import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dp_infer
from dp_infer import cli, losses
from dp_infer.routes.calibrate import calibrate
from dp_infer.domains import L2Ball
from dp_infer.privacy.ledger import Ledger
from dp_infer.rashomon import sample_rashomon
from tests.support.cli import run_cli


def write_csv(path, header, rows):
    path.write_text("\n".join([",".join(header)] + [",".join(str(v) for v in r) for r in rows]) + "\n")
    return path


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, size=(60, 2))
    y = (X[:, 0] > 0).astype(int)
    good = write_csv(tmp_path / "good.csv", ["a", "b", "label"], [[*x, t] for x, t in zip(X, y)])
    f = {
        "good": good,
        "missing_col": write_csv(tmp_path / "test_missing.csv", ["a", "label"], [[0.1, 1], [0.2, 0]]),
        "text_cell": write_csv(tmp_path / "text.csv", ["a", "b", "label"], [[0.1, "high", 1], [0.2, 0.1, 0]]),
        "ragged": write_csv(tmp_path / "ragged.csv", ["a", "b", "label"], [[0.1, 0.2, 1], [0.2, 0]]),
        "dup": write_csv(tmp_path / "dup.csv", ["a", "a", "label"], [[0.1, 0.2, 1]]),
        "labels3": write_csv(tmp_path / "labels3.csv", ["a", "b", "label"], [[0.1, 0.2, 2], [0.2, 0.1, 0]]),
        "header_only": write_csv(tmp_path / "header.csv", ["a", "b", "label"], []),
    }
    (tmp_path / "empty.csv").write_text("")
    f["empty"] = tmp_path / "empty.csv"
    (tmp_path / "binary.csv").write_bytes(bytes(range(256)) * 4)
    f["binary"] = tmp_path / "binary.csv"
    (tmp_path / "notes.txt").write_text("not a run\n")
    f["text"] = tmp_path / "notes.txt"
    with zipfile.ZipFile(tmp_path / "trunc.zip", "w") as z:
        z.writestr("posterior.nc", b"CDF\x01 truncated")
    f["truncated"] = tmp_path / "trunc.zip"
    (tmp_path / "ledger.txt").write_text("this is not sqlite " * 50)
    f["not_sqlite"] = tmp_path / "ledger.txt"
    f["ledger"] = tmp_path / "ledger.sqlite"
    return f


# (arguments, expected fragment of the one-line error). "{good}" etc. are file placeholders.
CLI_CASES = [
    (["demo", "--eps", "-1"], "eps must lie in (0, 100]"),
    (["demo", "--eps", "1000"], "eps must lie in (0, 100]"),
    (["demo", "--eps", "nan"], "eps must lie in"),
    (["demo", "--delta", "2"], "delta must lie in (0, 1)"),
    (["demo", "--delta", "0"], "delta must lie in (0, 1)"),
    (["demo", "--mode", "estimate", "--horizon", "-1"], "horizon must lie in (0, inf)"),
    (["demo", "--mode", "estimate", "--horizon", "0"], "horizon must lie in (0, inf)"),
    (["demo", "--chains", "0"], "--chains"),
    (["demo", "--mode", "estimate", "--pure"], "bounded domain"),
    (["demo", "--mode", "estimate", "--pure", "--radius", "-3"], "--radius must lie in (0, inf)"),
    (["demo", "--kernel", "langevin", "--friction", "1"], "friction applies to kernel='underdamped' only"),
    (["demo", "--friction", "-1"], "friction must lie in (0, inf)"),  # the posterior demo runs the kinetic kernel
    (["demo", "--kernel", "underdamped", "--friction", "-1"], "friction must lie in (0, inf)"),
    (["demo", "--mode", "estimate", "--lam-rel", "-1"], "lam_rel must lie in [0, inf)"),
    (["demo", "--mode", "estimate", "--route", "pure"], "route 'pure' releases pure eps-DP"),
    (["demo", "--budget", "1", "1e-5"], "--budget needs --ledger"),
    (["demo", "--reproducible-seed", "-1"], "--reproducible-seed"),
    (["demo", "--key-impl", "md5"], "--key-impl"),
    (["demo", "--horizon", "2"], "--horizon applies to --mode estimate only"),
    (["demo", "--radius", "3"], "--radius applies to --mode estimate only"),
    (["demo", "--lam-rel", "0.1"], "--lam-rel applies to --mode estimate only"),
    (["demo", "--pure"], "--pure is not available in --mode posterior"),
    (["demo", "--mode", "estimate", "--interval-curvature", "public"], "--interval-curvature applies to --mode posterior only"),
    (["demo", "--interval-curvature", "both"], "--interval-curvature"),
    (["demo", "--route", "last_iterate"], "--mode posterior runs the trajectory route"),
    (["demo", "--ess", "2"], "--ess must be an integer >= 4"),
    (["demo", "--prior-precision", "-1"], "--prior-precision must lie in (0, inf)"),
    (["demo", "--prior-precision", "inf"], "--prior-precision must lie in (0, inf)"),
    (["demo", "--precond-share", "1"], "--precond-share must lie in (0, 1)"),
    (["demo", "--mode", "estimate", "--ess", "400"], "--ess applies to --mode posterior only"),
    (["demo", "--mode", "estimate", "--prior-precision", "1"], "--prior-precision applies to --mode posterior only"),
    (["sample", "{good}", "--target", "label", "--mode", "posterior", "--ledger", "{ledger}", "--budget", "5",
      "1e-5"], "--prior-precision: --mode posterior needs a Gaussian prior"),
    (["sample", "{good}", "--target", "label", "--mode", "posterior", "--prior-precision", "1", "--loss", "hinge"],
     "--mode posterior needs a smooth loss"),
    (["sample", "{good}", "--target", "zz"], "target column 'zz' not in"),
    (["sample", "{good}", "--target", "label", "--test-csv", "{missing_col}", "--ledger", "{ledger}",
      "--budget", "5", "1e-5"], "lacks the feature column(s) ['b']"),
    (["sample", "{text_cell}", "--target", "label"], "column 'b': not a number: 'high'"),
    (["sample", "{ragged}", "--target", "label"], "2 fields, expected 3"),
    (["sample", "{dup}", "--target", "label"], "duplicate column names: ['a']"),
    (["sample", "{empty}", "--target", "label"], "is empty"),
    (["sample", "{header_only}", "--target", "label"], "has a header but no data rows"),
    (["sample", "{binary}", "--target", "label"], "is not a text CSV file"),
    (["sample", "{labels3}", "--target", "label"], "y must contain only 0/1 labels"),
    (["sample", "{good}", "--target", "label", "--row-norm", "0"], "row_norm must lie in (0, inf)"),
    (["sample", "{good}", "--target", "label", "--eps", "0", "--ledger", "{ledger}", "--budget", "5", "1e-5"],
     "eps must lie in (0, 100]"),
    (["report", "{truncated}"], "is not a readable dp_infer run file"),
    (["report", "{text}"], "is not a readable dp_infer run file"),
    (["budget", "{not_sqlite}"], "is not a dp_infer ledger"),
    (["rashomon", "{good}", "--adult"], "exactly one of CSV_FILE or --adult"),
    (["rashomon", "{good}"], "--target is required"),
    (["rashomon", "--adult", "--psi", "-1"], "--psi must lie in [0, inf)"),
    (["rashomon", "--adult", "--mode", "nonprivate"], "--beta is required"),
    (["rashomon", "--adult", "--beta", "10"], "--beta applies to --mode nonprivate only"),
    (["rashomon", "--adult", "--eps", "0"], "--eps must lie in (0, 100]"),
    (["rashomon", "--adult", "--mode", "nonprivate", "--beta", "5", "--ledger", "{ledger}"],
     "--ledger applies to private runs only"),
    (["rashomon", "{good}", "--target", "label", "--eval-csv", "{missing_col}"], "lacks the feature column(s)"),
    (["rashomon", "--adult", "--horizon", "-2"], "--horizon must lie in (0, inf)"),
]


@pytest.mark.parametrize("args,needle", CLI_CASES, ids=[" ".join(a)[:60] for a, _ in CLI_CASES])
def test_cli_bad_input_is_one_line_before_any_charge(monkeypatch, capsys, files, args, needle):
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    code, out, err = run_cli(monkeypatch, capsys, args, expect_exit=True)
    assert code != 0
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    assert needle in lines[0], lines[0]
    assert "--progress" not in out  # nothing ran
    if files["ledger"].exists():  # a ledger may be registered, but never charged
        led = Ledger(files["ledger"])
        assert all(led.spent(d["dataset_id"])["n_runs"] == 0 for d in led.datasets())


def test_cli_budget_of_an_unknown_dataset(monkeypatch, capsys, files):
    Ledger(files["ledger"]).register_dataset("adult", 1.0, 1e-5)
    code, _, err = run_cli(monkeypatch, capsys, ["budget", str(files["ledger"]), "--dataset-id", "other"], expect_exit=True)
    assert code == 2 and "dataset_id 'other' is not registered" in err and "Traceback" not in err


def test_cli_out_is_written_even_if_the_report_fails(monkeypatch, capsys, files, tmp_path):
    out = tmp_path / "run.zip"

    def broken(report):
        raise RuntimeError("formatting exploded")

    monkeypatch.setattr(cli.fit_commands, "print_report", broken)
    code, _, err = run_cli(monkeypatch, capsys, ["sample", str(files["good"]), "--target", "label",
                                                 "--horizon", "0.2", "--no-progress", "--out", str(out)],
                             expect_exit=True)
    assert code == 3 and "unexpected RuntimeError: formatting exploded" in err and "Traceback" not in err
    assert out.exists()  # the paid-for draws are on disk


# ------------------------------------------------------------------ Python API


def _xy(n=50, d=2):
    rng = np.random.default_rng(1)
    X = rng.uniform(-0.5, 0.5, size=(n, d))
    return X, (X[:, 0] > 0).astype(float)


X, Y = _xy()
LOSS = losses.logistic()
FIT_CASES = [
    (dict(eps=1000.0), "eps must lie in (0, 100]"),
    (dict(eps=0.0), "eps must lie in (0, 100]"),
    (dict(delta=1.5), "delta must lie in (0, 1)"),
    (dict(horizon=-1.0), "horizon must lie in (0, inf)"),
    (dict(num_chains=0), "num_chains must be an integer >= 1"),
    (dict(num_draws=0), "num_draws must be an integer >= 1"),
    (dict(seed=-1), "seed must be None"),
    (dict(seed=1.5), "seed must be None"),
    (dict(key_impl="md5"), "key_impl must be one of"),
    (dict(route="hmc"), "route must be 'auto' or one of"),
    (dict(kernel="hmc"), "kernel must be one of"),
    (dict(lam_rel=-0.1), "lam_rel must lie in [0, inf)"),
    (dict(domain=L2Ball(5, 1.0)), "domain.dim = 5 does not match"),
    (dict(tv_target=2.0), "tv_target must lie in (0, 1)"),
    (dict(delta=None, route="trajectory"), "needs route 'pure'"),
]


@pytest.mark.parametrize("kw,needle", FIT_CASES, ids=[str(k) for k, _ in FIT_CASES])
def test_fit_bad_arguments(kw, needle):
    args = dict(eps=1.0, delta=1e-5, progress_bar=False)
    args.update(kw)
    with pytest.raises(ValueError, match=None) as e:
        dp_infer.fit(LOSS, X, Y, **args)
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("data,needle", [
    ((np.where(np.arange(100).reshape(50, 2) == 3, np.nan, X), Y), "non-finite"),
    ((X, Y[:-1]), "same number of rows"),
    ((X * 10, Y), "exceeds the declared row_norm"),
    ((X, Y + 2), "0/1 labels"),
    ((X[:, 0], Y), "must be a 2-D array"),
])
def test_fit_bad_data(data, needle):
    with pytest.raises(ValueError) as e:
        dp_infer.fit(LOSS, *data, eps=1.0, delta=1e-5, progress_bar=False)
    assert needle in str(e.value)


def test_sample_with_a_plan_for_other_data():
    plan = calibrate(LOSS, 49, 2, eps=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="the plan was made for n = 49 rows but X has 50"):
        dp_infer.sample(LOSS, X, Y, plan)
    with pytest.raises(ValueError, match="chain_method must be one of"):
        dp_infer.sample(LOSS, X, Y, calibrate(LOSS, 50, 2, eps=1.0, delta=1e-5), chain_method="pmap")


@pytest.mark.parametrize("kw,needle", [
    (dict(mode="pure", eps=1.0, delta=1e-5, domain=L2Ball(2, 2.0)), "pass delta=None"),
    (dict(mode="path", eps=1.0, delta=1e-5, tol=-1.0), "tol must lie in [0, inf)"),
    (dict(mode="path", eps=1.0, delta=1e-5, float_slack=float("nan")), "float_slack"),
    (dict(mode="bogus"), "mode must be one of"),
    (dict(mode="pure", eps=1.0), "needs a bounded domain"),
    (dict(mode="nonprivate", beta=1.0, eps=1.0), "do not apply to mode='nonprivate'"),
    (dict(mode="path", eps=1.0, delta=1e-5, beta=3.0), "beta is calibrated"),
])
def test_rashomon_bad_arguments(kw, needle):
    with pytest.raises(ValueError) as e:
        sample_rashomon(losses.logistic(l2=0.1), X, Y, 0.01, num_draws=10, **kw)
    assert needle in str(e.value)


def test_kernel_wrong_sized_init_is_a_clear_error():
    from numpyro.infer import MCMC

    A = jnp.ones((4, 3))
    mcmc = MCMC(dp_infer.Langevin(potential_fn=lambda z: jnp.sum((A @ z["theta"]) ** 2), step_size=0.01),
                num_warmup=0, num_samples=3, progress_bar=False)
    with pytest.raises(ValueError, match=r"init_params \(flat size 2 per chain\) do not fit the potential"):
        mcmc.run(jax.random.PRNGKey(0), init_params={"theta": jnp.zeros(2)})


def test_load_of_a_missing_or_foreign_file(tmp_path):
    from dp_infer.diagnostics import load

    with pytest.raises(ValueError, match="does not exist"):
        load(tmp_path / "nope.zip")
    import xarray as xr

    xr.Dataset({"a": ("x", np.arange(3.0))}).to_netcdf(tmp_path / "data.nc", engine="scipy")
    with pytest.raises(ValueError, match="not a dp_infer run"):
        load(tmp_path / "data.nc")
