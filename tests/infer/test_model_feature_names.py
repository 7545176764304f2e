"""Model runs carry the features' names (issue 41): a NumPyro model's coefficient vector with one entry
per column is labelled by the DataFrame's columns or by ``feature_names=`` in the summary, the ArviZ
export's coords, the intervals and predictions, as a built-in loss's run is; a wrong ``feature_names``
is refused before anything is charged."""

from __future__ import annotations

import numpy as np
import numpyro
import numpyro.distributions as dist
import pandas as pd
import pytest

import dp_infer
from dp_infer.privacy.ledger import Ledger

NAMES = ["age", "hours", "score"]


def logreg(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 3.0).expand([X.shape[1]]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 3.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w + b), obs=y)


def _data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ np.array([2.0, -1.0, 0.5])))).astype(float)
    return X, y


def _named(run):
    text = run.summary()
    dt = run.to_datatree()
    return text, dt


def test_an_estimate_run_of_an_array_names_its_coefficients_by_feature_names():
    X, y = _data()
    run = dp_infer.fit(model=logreg, X=X, y=y, eps=1.0, delta=1e-5, feature_names=NAMES, seed=1,
                       progress_bar=False, num_draws=60)
    text, dt = _named(run)
    for name in NAMES:
        assert f"w[{name}]" in text
    assert "w[0]" not in text
    assert list(dt.posterior["w"].dims)[-1] == "feature"
    assert [str(v) for v in dt.posterior["feature"].values] == NAMES
    assert run.feature_names == NAMES
    # predictions match new rows' columns by name
    frame = pd.DataFrame(X[:5], columns=NAMES)[NAMES[::-1]]
    np.testing.assert_allclose(run.predict_proba(frame), run.predict_proba(X[:5]), rtol=1e-6)
    # the names survive a save and load
    back = dp_infer.PrivateRun.load(_save(run), model=logreg)
    assert back.feature_names == NAMES and f"w[{NAMES[0]}]" in back.summary()


def test_a_posterior_run_of_a_dataframe_names_its_summary_coords_and_intervals():
    X, y = _data()
    run = dp_infer.fit(model=logreg, X=pd.DataFrame(X, columns=NAMES), y=y, eps=1.0, delta=1e-5,
                       target="posterior", ess=40, num_draws=60, interval_share=0.2, seed=2, progress_bar=False)
    text, dt = _named(run)
    for name in NAMES:
        assert f"w[{name}]" in text
    assert [str(v) for v in dt.posterior["feature"].values] == NAMES
    assert dt.posterior["w"].dims[-1] == "feature"
    # the intervals (text and the tree's group) name the unconstrained coordinates by feature too
    assert "Intervals for theta" in text
    iv_lines = text.split("Intervals for theta", 1)[1]
    assert all(f"w[{name}]" in iv_lines for name in NAMES)
    assert sorted(str(v) for v in dt["intervals"]["theta_dim_0"].values) == sorted([f"w[{n}]" for n in NAMES] + ["b"])


def _save(run):
    import tempfile
    from pathlib import Path

    return run.save(Path(tempfile.mkdtemp()) / "run.zip")


def test_the_users_coords_win_and_a_site_of_another_length_is_left_alone():
    X, y = _data(n=500)
    run = dp_infer.fit(model=logreg, X=pd.DataFrame(X, columns=NAMES), y=y, eps=1.0, delta=1e-5,
                       coords={"w_dim_0": ["a", "b", "c"]}, seed=1, progress_bar=False, num_draws=30)
    dt = run.to_datatree()
    assert [str(v) for v in dt.posterior["w_dim_0"].values] == ["a", "b", "c"]
    assert dt.posterior["b"].dims == ("chain", "draw")


@pytest.mark.parametrize("names, match", [(["a", "b"], "3 entries"), (["a", "a", "b"], "distinct"),
                                          ("abc", "list of names"), (["x", "y", "z"], "differ from the DataFrame")])
def test_wrong_feature_names_are_refused_before_any_charge(tmp_path, names, match):
    X, y = _data(n=200)
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.register_dataset("d", eps_budget=10.0, delta_budget=1e-3)
    Xin = pd.DataFrame(X, columns=NAMES) if match.startswith("differ") else X
    for target in ("estimate", "posterior"):
        with pytest.raises(ValueError, match=match):
            dp_infer.fit(model=logreg, X=Xin, y=y, eps=1.0, delta=1e-5, target=target, feature_names=names,
                         ledger=ledger, dataset_id="d", progress_bar=False)
    assert ledger.history("d") == []


def test_a_loss_run_takes_feature_names_too_and_a_posterior_run_keeps_a_dataframes_columns():
    from dp_infer import losses

    X, y = _data(n=800)
    est = dp_infer.fit(losses.logistic(row_norm=1.0), X, y, eps=1.0, delta=1e-5, feature_names=NAMES, seed=1,
                       progress_bar=False, num_draws=30)
    assert est.feature_names == NAMES and "theta[hours]" in est.summary()
    post = dp_infer.fit(losses.logistic(row_norm=1.0), pd.DataFrame(X, columns=NAMES), y, eps=1.0, delta=1e-5,
                        target="posterior", prior_precision=1.0, ess=30, num_draws=40, seed=1, progress_bar=False)
    assert post.feature_names == NAMES
    assert [str(v) for v in post.to_datatree().posterior["feature"].values] == NAMES
    with pytest.raises(ValueError, match="3 entries"):
        dp_infer.fit(losses.logistic(row_norm=1.0), X, y, eps=1.0, delta=1e-5, feature_names=["a"])
