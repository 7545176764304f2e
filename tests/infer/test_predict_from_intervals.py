"""Predictions from a run's interval release (``run.predict(X, source="intervals")``, ``dp-infer predict --from
intervals``): the plug-in at the intervals' centre, checked against its closed form; the draws stay the default;
runs that have no such centre are refused with the reason."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dp_infer import losses
from dp_infer.infer.posterior import fit_posterior
from dp_infer.infer.run import PrivateRun
from tests.support.cli import run_cli

# the slow tier: two posterior fits (about 25 s of CPU) pushed the everyday tier past its 3 minutes (194 s)
pytestmark = pytest.mark.slow

THETA = np.array([2.0, -1.5, 1.0, 0.5, -0.5])
NAMES = ["a", "b", "c", "d", "e"]


def _rows(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, THETA.size))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-X @ THETA))).astype(float)
    return pd.DataFrame(X, columns=NAMES), y


@pytest.fixture(scope="module")
def public_run():
    # at eps = 1 with public curvature the release takes 0.85 of mu^2: the tempered draws sit near the prior
    # (beta / n about 1e-3 here), the intervals' centre near the data's estimate
    X, y = _rows(4000, 0)
    Xp, _ = _rows(1500, 1)
    run = fit_posterior(losses.logistic(row_norm=1.0), X, y, eps=1.0, delta=1e-5, prior_precision=0.01, seed=3,
                        progress_bar=False, ess=30, interval_curvature="public", X_public=Xp.to_numpy())
    return run


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.mark.filterwarnings("ignore:the chains did not mix")
def test_the_intervals_source_is_the_plug_in_at_their_centre_and_the_draws_stay_the_default(public_run, tmp_path):
    Xt, yt = _rows(2000, 2)
    centre = public_run.intervals(0.9).centre
    z = Xt.to_numpy() @ centre
    np.testing.assert_allclose(public_run.predict_proba(Xt, source="intervals"), _sigmoid(z), rtol=1e-5)
    np.testing.assert_array_equal(public_run.predict(Xt, source="intervals"), (z > 0).astype(float))
    draws = public_run.draws().reshape(-1, THETA.size)
    idx = np.linspace(0, draws.shape[0] - 1, min(1000, draws.shape[0])).round().astype(int)
    np.testing.assert_allclose(public_run.predict_proba(Xt), _sigmoid(Xt.to_numpy() @ draws[idx].T).mean(axis=1),
                               rtol=1e-5)
    # what the source is for: the tempered draws are shrunk toward the prior's 0, so their predictive probabilities
    # are pulled toward 1/2, while the centre's are the truth's up to the release's error. Measured at this seed:
    # log loss 0.537 (centre), 0.589 (draws), 0.537 (truth). The paired differences over the same 2,000 rows have
    # se 0.0056 (draws - centre: 0.052, so the 0.03 margin is 4 se below it) and 0.0005 (centre - truth: 0.0001)
    def log_loss(p):
        return float(-np.mean(yt * np.log(p) + (1 - yt) * np.log(1 - p)))

    ll_centre = log_loss(public_run.predict_proba(Xt, source="intervals"))
    ll_draws = log_loss(public_run.predict_proba(Xt))
    ll_truth = log_loss(_sigmoid(Xt.to_numpy() @ THETA))
    assert ll_centre <= ll_truth + 0.03 and ll_centre < ll_draws - 0.03, (ll_centre, ll_draws, ll_truth)
    # a saved and loaded run predicts the same from its stored release
    loaded = PrivateRun.load(public_run.save(tmp_path / "r.zip"))
    np.testing.assert_allclose(loaded.predict_proba(Xt, source="intervals"), _sigmoid(z), rtol=1e-5)


@pytest.mark.filterwarnings("ignore:the chains did not mix")
def test_a_run_without_a_centre_is_refused_with_the_reason(public_run, monkeypatch, capsys, tmp_path):
    X, y = _rows(600, 4)
    with pytest.raises(ValueError, match=r"source must be one of \('draws', 'intervals'\), got 'centre'"):
        public_run.predict(X, source="centre")
    bare = fit_posterior(losses.logistic(row_norm=1.0), X, y, eps=1.0, delta=1e-5, prior_precision=0.01, seed=0,
                         progress_bar=False, ess=30, interval_share=0.0)
    with pytest.raises(ValueError, match="source='intervals': this run has no interval release"):
        bare.predict_proba(X, source="intervals")
    assert bare.predict(X).shape == (600,)  # the draws still predict
    # the command says the same, naming its own option
    bare.feature_names = list(NAMES)
    X.to_csv(tmp_path / "rows.csv", index=False)
    code, so, err = run_cli(monkeypatch, capsys, ["predict", bare.save(tmp_path / "bare.zip"), tmp_path / "rows.csv",
                                                  "--from", "intervals"])
    assert code != 0 and "--from intervals: this run has no interval release" in so + err
    assert "(--from draws)" in so + err and "Traceback" not in so + err


@pytest.mark.filterwarnings("ignore:the chains did not mix")
def test_the_command_predicts_from_the_centre_when_asked_and_says_it_can(public_run, monkeypatch, capsys, tmp_path):
    public_run.feature_names = list(NAMES)
    path = public_run.save(tmp_path / "run.zip")
    Xt, _ = _rows(50, 5)
    Xt[["c", "a", "e", "d", "b"]].to_csv(tmp_path / "rows.csv", index=False)
    code, so, err = run_cli(monkeypatch, capsys, ["predict", path, tmp_path / "rows.csv", "--out", tmp_path / "d.csv"])
    assert code == 0, err
    assert "from the released draws after burn-in" in so and "--from intervals predicts from their centre" in so
    code, so, err = run_cli(monkeypatch, capsys, ["predict", path, tmp_path / "rows.csv", "--from", "intervals",
                                                  "--out", tmp_path / "c.csv"])
    assert code == 0, err
    assert "centre of the intervals for theta (plug-in)" in so and "--from intervals predicts" not in so
    got = pd.read_csv(tmp_path / "c.csv")
    np.testing.assert_allclose(got["probability"], _sigmoid(Xt.to_numpy() @ public_run.intervals(0.9).centre),
                               rtol=1e-5)
    code, so, err = run_cli(monkeypatch, capsys, ["predict", path, tmp_path / "rows.csv", "--from", "mean"])
    assert code != 0 and "Traceback" not in so + err
