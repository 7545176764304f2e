"""Issue 30, item 5, for the Python API of the Rashomon sampler: nothing that can fail after the charge.

``sample_rashomon`` charges the ledger, then reads the data and samples. Every other part of its result
(the privacy report, the randomness description, the guarantee text, the pure mode's purification
parameters and accountant) is data independent, so it is built BEFORE the charge: a failure there
must leave the ledger exactly as it was (it used to be charged and the draws lost). The one step left
after the charge is the pure mode's purification of the final draws, whose raw input must never be
kept (it is not covered by the pure guarantee); the last test checks that a failure there keeps the
charge and writes no file.

Oracle: the ledger's own record of the spend (``Ledger.spent``), before and after.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer import rashomon as R
from dp_infer.domains import Box
from dp_infer.losses import LossConstants, PerExampleLoss
from dp_infer.privacy import purification as purif
from dp_infer.privacy.ledger import Ledger
from dp_infer.randomness import KeySource
from dp_infer.rashomon.plan import RashomonPlan

DS = "default"


def _loss(dom):
    fn = lambda th, x, y: 0.5 * jnp.sum((th - x) ** 2)  # noqa: E731
    return PerExampleLoss("quad", fn, LossConstants(lipschitz=3.0, grad_diff=2.0, smoothness=1.0,
                                                    strong_convexity=1.0), 1.0, domain=dom)


@pytest.fixture
def ledger(tmp_path):
    led = Ledger(tmp_path / "ledger.sqlite")
    led.register_dataset(DS, 100.0, 1e-3)
    return led


def _boom(*args, **kwargs):
    raise RuntimeError("injected failure")


def _run(mode, ledger, **kw):
    dom = Box.cube(1, 2.0)
    X = np.linspace(-0.5, 0.5, 40)[:, None]
    args = dict(mode=mode, eps=1.0, horizon=0.2, num_chains=2, num_draws=20, seed=0, domain=dom, ledger=ledger)
    if mode == "path":
        args["delta"] = 1e-5
    args.update(kw)
    return R.sample_rashomon(_loss(dom), X, np.zeros(40), 0.05, **args)


def test_the_report_is_built_before_the_charge(ledger, monkeypatch):
    monkeypatch.setattr(RashomonPlan, "as_dict", _boom)
    with pytest.raises(RuntimeError, match="injected"):
        _run("path", ledger)
    assert ledger.spent(DS)["n_runs"] == 0 and ledger.spent(DS)["eps"] == 0.0


def test_the_pure_modes_report_is_built_before_the_charge(ledger, monkeypatch):
    monkeypatch.setattr(KeySource, "describe", _boom)
    with pytest.raises(RuntimeError, match="injected"):
        _run("pure", ledger)
    assert ledger.spent(DS)["n_runs"] == 0 and ledger.spent(DS)["eps"] == 0.0


def test_a_successful_run_is_charged_once_with_its_report(ledger):
    res = _run("path", ledger)
    spent = ledger.spent(DS)
    # the ledger states its spend at its own delta (1e-3 > the run's 1e-5): positive, not above eps_spent
    assert spent["n_runs"] == 1 and 0 < spent["eps"] <= res.privacy["eps_spent"]
    assert res.privacy["ledger"] == {"dataset_id": DS, "charged_before_sampling": True}
    assert res.privacy["guarantee"].endswith("trajectory of 2 chain(s)")
    pure = _run("pure", ledger)
    assert ledger.spent(DS)["n_runs"] == 2 and pure.draws.shape == (2, 1, 1)
    assert pure.privacy["eps_spent"] == pytest.approx(1.0) and math.isclose(pure.privacy["delta"], 0.0)


def test_a_failed_purification_keeps_the_charge_and_never_the_raw_trajectory(ledger, monkeypatch, tmp_path):
    monkeypatch.setattr(purif, "purify", _boom)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(RuntimeError, match="injected"):
        _run("pure", ledger)
    assert ledger.spent(DS)["n_runs"] == 1                                # privacy was spent: the charge stays
    assert not list(tmp_path.glob("*.npz"))                             # and the raw draws were not written
