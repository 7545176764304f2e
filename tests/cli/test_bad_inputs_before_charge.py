"""Findings 5-7 of issue 30: nothing is charged for a run that then fails on its inputs.

Every case below is a bad input the audit saw charged BEFORE it failed. Each is run through a
public entry point (the CLI through its console entry point ``dp_infer.cli.run`` -- what a user
sees -- and the Python API) against a ledger that holds a registered budget and one completed
run; the ledger must be byte-for-byte unchanged in what it reports (spent eps, history) and the
error must be ONE line that names the parameter.
"""

import importlib.util

import numpy as np
import pytest

import dp_infer
from dp_infer import losses
from dp_infer.privacy.events import GdpEvent
from dp_infer.privacy.ledger import Ledger
from tests.support.cli import run_cli

DS = "default"


def _csv(path, rows, header=("a", "b", "label")):
    path.write_text("\n".join([",".join(header)] + [",".join(str(v) for v in r) for r in rows]) + "\n")
    return path


@pytest.fixture
def env(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, size=(60, 2))
    y = (X[:, 0] > 0).astype(int)
    good = _csv(tmp_path / "good.csv", [[*x, t] for x, t in zip(X, y)])
    labels3 = _csv(tmp_path / "labels3.csv", [[*x, t + (i == 3)] for i, (x, t) in enumerate(zip(X, y))])
    (tmp_path / "a_file").write_text("x")
    ledger = tmp_path / "ledger.sqlite"
    led = Ledger(ledger)
    led.register_dataset(DS, 100.0, 1e-3)
    led.complete(led.charge(DS, GdpEvent(mu=0.5, label="earlier run"), run_label="earlier"))
    return dict(tmp=tmp_path, good=good, labels3=labels3, ledger=ledger, X=X, y=y.astype(float))


def _state(ledger):
    led = Ledger(ledger)
    return led.spent(DS), [(h["run_label"], h["status"]) for h in led.history(DS)]


def _cli_cases(e):
    t, good, L = e["tmp"], e["good"], e["ledger"]
    base = ["sample", good, "--target", "label", "--ledger", L, "--no-progress", "--horizon", "0.05"]
    cases = [
        (base + ["--out", "/no/such/dir/run.zip"], "--out"),
        (base + ["--out", t / "a_file" / "run.zip"], "--out"),
        (base + ["--out", t / "run.txt"], "--out"),
        (base + ["--reproducible-seed", 2**64], "--reproducible-seed"),
        (base + ["--reproducible-seed", 2**64, "--key-impl", "threefry2x32"], "--reproducible-seed"),
        (base + ["--chains", 10**9], "chains"),
        (["sample", good, "--target", "label", "--ledger", L, "--mode", "posterior", "--prior-precision", "1",
          "--ess", 10**9, "--no-progress"], "ess"),
        (base + ["--dataset-id", "default "], "--dataset-id"),
        (["schema", "draft", good, "--target", "label", "--private", "--eps", "1", "--ledger", L,
          "-o", "/no/such/dir/s.yaml"], "-o/--out"),
        (["rashomon", e["labels3"], "--target", "label", "--ledger", L, "--draws", "20", "--horizon", "0.1"],
         "y"),
    ]
    if importlib.util.find_spec("zarr") is None:
        cases.append((base + ["--out", t / "run.zarr"], "zarr"))
    return cases


def test_cli_bad_inputs_are_refused_before_the_charge(env, monkeypatch, capsys):
    before = _state(env["ledger"])
    for args, name in _cli_cases(env):
        code, _, err = run_cli(monkeypatch, capsys, args, expect_exit=True)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code != 0, args
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, err)
        assert "unexpected" not in lines[0], (args, err)
        assert name in lines[0], (args, lines[0])
        assert _state(env["ledger"]) == before, (args, lines[0])


def test_an_empty_ledger_file_is_not_a_fresh_ledger(env, monkeypatch, capsys):
    empty = env["tmp"] / "truncated.sqlite"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="empty file, not a dp_infer ledger"):
        Ledger(empty)
    for args in (["budget", "register", empty, "--eps", "1", "--delta", "1e-5"],
                 ["sample", env["good"], "--target", "label", "--ledger", empty, "--no-progress"]):
        code, _, err = run_cli(monkeypatch, capsys, args, expect_exit=True)
        assert code != 0 and len(err.strip().splitlines()) == 1 and "empty file" in err, err
        assert empty.stat().st_size == 0


def _normal_model(X=None, y=None):
    import numpyro
    import numpyro.distributions as dist

    w = numpyro.sample("w", dist.Normal(0, 1).expand([2]).to_event(1))
    with numpyro.plate("rows", 60 if X is None else X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=(0.0 if X is None else X @ w)), obs=y)


def test_python_bad_inputs_are_refused_before_the_charge(env):
    X, y, L = env["X"], env["y"], env["ledger"]
    loss = losses.logistic()
    kw = dict(eps=1.0, delta=1e-5, ledger=L, horizon=0.05, progress_bar=False)
    cases = [
        (lambda: dp_infer.fit(loss, X, y, seed=-1, **kw), "seed"),
        (lambda: dp_infer.fit(loss, X, y, seed="abc", **kw), "seed"),
        (lambda: dp_infer.fit(loss, X, y, seed=2**64, **kw), "seed"),
        (lambda: dp_infer.fit(loss, X, y, key_impl="x", **kw), "key_impl"),
        (lambda: dp_infer.fit(loss, X, y, chain_method="x", **kw), "chain_method"),
        (lambda: dp_infer.fit(loss, X, y, num_chains=10**9, **kw), "chains"),
        (lambda: dp_infer.fit(loss, X, y, dataset_id="default ", **kw), "dataset_id"),
        (lambda: dp_infer.fit(model=_normal_model, X=X, y=y, chain_method="x", **kw), "chain_method"),
        (lambda: dp_infer.fit(model=_normal_model, X=X, y=y, seed=-1, **kw), "seed"),
        (lambda: dp_infer.fit(loss, X, y, eps=1.0, delta=1e-5, ledger=L, target="posterior", prior_precision=1.0,
                              chain_method="x", progress_bar=False), "chain_method"),
        (lambda: dp_infer.fit(loss, X, y, eps=1.0, delta=1e-5, ledger=L, target="posterior", prior_precision=1.0,
                              ess=10**9, progress_bar=False), "ess"),
    ]
    before = _state(L)
    for call, name in cases:
        with pytest.raises(ValueError) as ei:
            call()
        msg = str(ei.value)
        assert "\n" not in msg and name in msg, msg
        assert _state(L) == before, msg
