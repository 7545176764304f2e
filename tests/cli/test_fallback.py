"""Issue 30, "What to build" item 5, on the command line: once a run is charged, a failure in a
later step (writing --out, the mixing diagnostics, the report) keeps the draws in a fallback file.

Each case injects the failure with monkeypatch, runs the console entry point (what a user sees)
and checks: exit code 2 and ONE line on stderr, no traceback, naming the fallback file; the ledger
keeps the charge; the file sits next to --out and holds exactly the draws that the same command
with the same --reproducible-seed writes to --out when nothing fails (the oracle: a second,
successful run), which ``dp-infer report`` reads back.
"""

import errno
import re

import numpy as np
import pytest

from tests.support.cli import run_cli
from dp_infer.privacy.ledger import Ledger

DS = "default"


def _csv(path, X, y):
    rows = ["a,b,label"] + [f"{a},{b},{int(t)}" for (a, b), t in zip(X, y)]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def env(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, size=(60, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=60) > 0).astype(int)
    ledger = tmp_path / "ledger.sqlite"
    Ledger(ledger).register_dataset(DS, 100.0, 1e-3)
    (tmp_path / "out").mkdir()
    return dict(tmp=tmp_path, csv=_csv(tmp_path / "d.csv", X, y), ledger=ledger)


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", str(args[1]) if len(args) > 1 else None)


def _broken(*args, **kwargs):
    raise KeyError("injected failure after sampling")


CASES = {
    "estimate, writing --out": (["--horizon", "0.05"], "dp_infer.diagnostics.save", _no_space, "writing --out"),
    "estimate, mixing diagnostics": (["--horizon", "0.05"], "dp_infer.cli.fit_commands.mixing_block", _broken,
                                     "the mixing diagnostics"),
    "posterior, writing --out": (["--mode", "posterior", "--prior-precision", "1", "--ess", "8"],
                                 "dp_infer.diagnostics.save", _no_space, "writing --out"),
    "posterior, mixing diagnostics": (["--mode", "posterior", "--prior-precision", "1", "--ess", "8"],
                                      "dp_infer.cli.posterior.mixing_block", _broken, "mixing diagnostics"),
    "proximal, writing --out": (["--loss", "hinge", "--eps", "0.3"], "dp_infer.diagnostics.save", _no_space,
                                "writing --out"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_failure_after_sampling_keeps_the_draws(env, monkeypatch, capsys, case):
    extra, target, failure, step = CASES[case]
    out = env["tmp"] / "out" / "run.zip"
    base = ["sample", env["csv"], "--target", "label", "--ledger", env["ledger"], "--no-progress",
            "--reproducible-seed", 11, *extra]
    with monkeypatch.context() as m:
        m.setattr(target, failure)
        code, _, err = run_cli(m, capsys, base + ["--out", out])
    assert code in (2, 3), err
    lines = err.strip().splitlines()
    assert "Traceback" not in err
    last = lines[-1]
    assert last.startswith("error: ") and step in last, err
    found = re.search(r"kept in (\S+\.npz)", last)
    assert found, last
    kept = found.group(1)
    assert kept.startswith(str(out.parent))  # next to --out
    assert out.exists() == (step != "writing --out")  # written before the later steps
    out.unlink(missing_ok=True)
    assert Ledger(env["ledger"]).spent(DS)["n_runs"] == 1  # the charge stays

    # the oracle: the same command and seed without the failure writes the same draws to --out
    code, _, err2 = run_cli(monkeypatch, capsys, base + ["--out", out])
    assert code in (0, None), err2
    import dp_infer

    good, back = dp_infer.PrivateRun.load(out), dp_infer.PrivateRun.load(kept)
    assert type(good) is type(back)
    np.testing.assert_array_equal(np.asarray(back.draws(drop_burn_in=False)),
                                  np.asarray(good.draws(drop_burn_in=False)))
    assert back.report()["eps_spent"] == good.report()["eps_spent"]
    with np.load(kept) as f:  # numpy alone reads it too
        assert f["theta"].shape[0] == good.draws(drop_burn_in=False).shape[0]

    code, printed, err3 = run_cli(monkeypatch, capsys, ["report", kept, "--plots", env["tmp"] / "plots"])
    assert code in (0, None), err3
    assert "eps" in printed


def test_a_private_draft_is_kept_when_writing_it_fails(tmp_path, monkeypatch, capsys):
    """``schema draft --private`` releases a schema (charged): if -o cannot be written after the
    draft, the draft is kept in a fallback YAML next to -o that equals what -o gets on success
    (same draft object: the oracle is the text save_schema writes for it)."""
    import dp_infer.schema as schema_pkg
    from dp_infer.schema import load_schema

    rng = np.random.default_rng(1)
    n = 2000
    data = tmp_path / "d.csv"
    data.write_text("age,colour,label\n" + "\n".join(
        f"{a},{c},{t}" for a, c, t in zip(rng.integers(20, 70, n), rng.choice(["red", "blue"], n),
                                          rng.integers(0, 2, n))) + "\n")
    ledger = tmp_path / "l.sqlite"
    out = tmp_path / "s.yaml"
    real_save = schema_pkg.save_schema
    kept_schema = {}

    def failing_save(schema, path, header=""):
        kept_schema["schema"], kept_schema["header"] = schema, header
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(schema_pkg, "save_schema", failing_save)
    code, _, err = run_cli(monkeypatch, capsys, ["schema", "draft", data, "--target", "label", "-o", out,
                                                 "--private", "--eps", "2", "--ledger", ledger, "--budget", "3",
                                                 "1e-5"])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "writing -o/--out failed" in err and "private draft (its privacy is spent) was kept in" in err, err
    kept = re.search(r"kept in (\S+\.yaml)", err).group(1)
    assert kept.startswith(str(tmp_path)) and not out.exists()
    assert len(Ledger(ledger).history(DS)) == 1
    real_save(kept_schema["schema"], out, header=kept_schema["header"])
    assert open(kept).read() == out.read_text()
    assert load_schema(kept).to_dict() == load_schema(out).to_dict()


def _fake_fit_posterior(loss, X, y, *, eps, delta, prior_precision, ess, num_chains, kernel, friction, rows,
                        precond_share, num_draws, **kw):
    """The demo's sampler replaced by draws of the right shape on the demo's own plan (the demo's
    steps after sampling are what is tested here, not the sampler)."""
    from dp_infer.cli.demo import forecast_plan
    from dp_infer.infer.posterior import PosteriorRun

    plan = forecast_plan(loss, X.shape[0], X.shape[1], eps=eps, delta=delta, prior_precision=prior_precision, ess=ess,
                         chains=num_chains, rows=rows, precond_share=precond_share, X_public=X[:3000],
                         num_draws=num_draws, kernel=kernel, friction=friction)
    theta = 0.1 * np.random.default_rng(0).normal(size=(plan.num_chains, plan.num_draws, plan.dim))
    return PosteriorRun(plan, theta, np.zeros(theta.shape[:2], dtype=bool), {"source": "test"}, {"kind": "test"})


@pytest.mark.parametrize("fail", [False, True])
def test_the_demo_keeps_its_draws_when_a_later_step_fails(tmp_path, monkeypatch, capsys, fail):
    import importlib

    demo = importlib.import_module("dp_infer.cli.demo")  # the package's `demo` is the click command
    posterior = importlib.import_module("dp_infer.infer.posterior")

    monkeypatch.setattr(posterior, "fit_posterior", _fake_fit_posterior)
    kept_runs = []
    real_table = demo._coefficient_table

    def table(draws, names, mix):
        kept_runs.append(np.array(draws))
        if fail:
            raise KeyError("injected failure after sampling")
        return real_table(draws, names, mix)

    monkeypatch.setattr(demo, "_coefficient_table", table)
    out = tmp_path / "demo.zip"
    code, printed, err = run_cli(monkeypatch, capsys, ["demo", "--no-progress", "--out", out, "--plots",
                                                       tmp_path / "plots", "--reproducible-seed", 1])
    if not fail:  # the steps after sampling run to the end (the refactor into _report_demo_run)
        assert code in (0, None), err
        assert "the tempered draws (a private posterior at beta / n" in printed and "plots in" in printed
        return
    assert code == 3 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert "the mixing diagnostics and the coefficient table failed" in last, last
    kept = re.search(r"kept in (\S+\.npz)", last).group(1)
    assert kept.startswith(str(tmp_path)) and out.exists()  # --out was written before the table
    np.testing.assert_array_equal(np.load(kept)["theta"], dp_infer_load(out).theta)
    np.testing.assert_array_equal(dp_infer_load(kept).draws(), kept_runs[0])


def dp_infer_load(path):
    import dp_infer

    return dp_infer.PrivateRun.load(path)


def test_rashomon_keeps_its_draws_when_writing_json_fails(env, monkeypatch, capsys):
    from dp_infer.rashomon.result import RashomonResult

    seen = []
    real_measures = RashomonResult.measures

    def measures(self, *args, **kwargs):
        seen.append(np.array(self.draws))
        return real_measures(self, *args, **kwargs)

    monkeypatch.setattr(RashomonResult, "measures", measures)
    monkeypatch.setattr(RashomonResult, "to_dict", _broken)
    out = env["tmp"] / "out" / "r.json"
    code, _, err = run_cli(monkeypatch, capsys, ["rashomon", env["csv"], "--target", "label", "--ledger", env["ledger"],
                                                 "--draws", "20", "--horizon", "0.1", "--json", out])
    assert code == 3 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert "writing --json failed" in last and "NumPy .npz archive" in last, last
    kept = re.search(r"kept in (\S+\.npz)", last).group(1)
    assert kept.startswith(str(out.parent))
    with np.load(kept) as f:
        np.testing.assert_array_equal(f["theta"], seen[0])
        assert f["kind"].item() == "rashomon"
    assert Ledger(env["ledger"]).spent(DS)["n_runs"] == 1
    with pytest.raises(ValueError, match="numpy.load"):
        dp_infer_load(kept)
