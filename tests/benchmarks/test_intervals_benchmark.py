"""The pieces of benchmarks.intervals (issue 37 part 3): the designs, the noise-aware Laplace anchor
against its closed form, its privacy composition, and the summary's Monte-Carlo errors. No timings."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from benchmarks import intervals as B
from dp_infer import losses
from dp_infer.diagnostics.released_interval import released_interval
from dp_infer.privacy.conversions import gdp_mu


def test_adult_shaped_design():
    X, y, theta = B._adult_data(3000, 0)  # the generator at a smaller n
    X2, _, theta2 = B._adult_data(3000, 1)
    kinds = B.coordinate_kinds("adult_shaped")
    assert X.shape == (3000, 100) == X2.shape and len(kinds) == 100 and theta.shape == (100,)
    np.testing.assert_array_equal(theta, theta2)  # the truth is fixed; the rows are drawn afresh
    assert np.max(np.linalg.norm(X, axis=1)) <= 1.0 + 1e-12
    assert set(kinds) == {"intercept", "rare level", "common level", "numeric"}
    assert 15 <= kinds.count("rare level") <= 60 and kinds.count("numeric") == B.ADULT_NUMERIC
    freq = B._adult_structure()[2]
    levels = np.array([k.endswith("level") for k in kinds])
    np.testing.assert_allclose(X[:, levels].mean(axis=0) * math.sqrt(15), freq[levels], atol=0.02)
    assert set(np.unique(y)) == {0.0, 1.0}


def _closed_form(X, y, point, prior):
    """The noise-free one-step Laplace interval for logistic: centre point - H^-1 g, variance
    H^-1 J H^-1 / n, combined with the N(0, prior^-1 I) prior."""
    n, d = X.shape
    p = 1 / (1 + np.exp(-X @ point))
    H = (X * (p * (1 - p))[:, None]).T @ X / n
    G = X * (p - y)[:, None]
    J = G.T @ G / n
    c = point - np.linalg.solve(H, G.mean(axis=0))
    Hi = np.linalg.inv(H)
    V = Hi @ J @ Hi / n
    Q = np.linalg.inv(V) + prior * np.eye(d)
    Qi = np.linalg.inv(Q)
    return Qi @ np.linalg.solve(V, c), np.sqrt(np.diag(Qi))


def test_one_stage_release_matches_closed_form_when_the_noise_vanishes():
    rng = np.random.default_rng(0)
    n, d = 4000, 3
    X = rng.normal(size=(n, d)) * 0.5
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    theta = np.array([1.0, -0.5, 0.25])
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ theta))).astype(float)
    point = theta + 0.05  # a public point near the estimate
    loss = losses.logistic(row_norm=1.0)
    rel, events = B.one_stage_release(loss, X, y, point=point, mu=1e7, key=jax.random.PRNGKey(0))
    iv = released_interval(rel, n=n, prior_precision=0.01)
    centre, sd = _closed_form(X, y, point, 0.01)
    np.testing.assert_allclose(iv.sd, sd, rtol=1e-3)
    np.testing.assert_allclose(iv.centre, centre, atol=1e-3 * sd.max())
    assert not any(iv.flags)
    # the three Gaussian mechanisms compose to the stated mu, split as the schedule's last stage
    assert math.isclose(math.sqrt(sum(e.mu ** 2 for e in events)), 1e7, rel_tol=1e-12)


def test_laplace_anchor_spends_the_runs_eps():
    rng = np.random.default_rng(1)
    n, d = 2000, 2
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ np.array([1.0, -1.0])))).astype(float)
    iv, info = B.laplace_anchor(losses.logistic(row_norm=1.0), X, y, eps=1.0, delta=1e-5, prior=0.01, seed=0)
    assert info["mu_total"] <= gdp_mu(1.0, 1e-5) * (1 + 1e-9)
    assert 0.999 <= info["eps_total"] <= 1.0 + 1e-9
    assert iv.sd.shape == (2,) and np.all(np.isfinite(iv.centre))


def test_one_stage_release_refuses_rows_beyond_the_row_norm():
    X = np.array([[2.0, 0.0], [0.0, 0.5]])
    with pytest.raises(ValueError, match="row_norm"):
        B.one_stage_release(losses.logistic(row_norm=1.0), X, np.array([0.0, 1.0]), point=np.zeros(2), mu=1.0,
                            key=jax.random.PRNGKey(0))


def _row(design, seed, cov, flags):
    d = len(cov)
    rec = {"covered": cov, "ratio": [1.5] * d, "flags": flags}
    return {"design": design, "seed": seed, "seconds_run": 1.0, "seconds_laplace": 1.0, "beta_over_n": 0.003,
            "laplace_info": {"eps_total": 1.0}, "run": rec, "tempered": {"covered": [True] * d, "ratio": [50.0] * d},
            "laplace": rec, "run_forced": False}


def test_summary_reports_the_monte_carlo_error_per_class():
    rows = [_row("logistic_2k", s, [True, s % 2 == 0, True], ["not flagged", "prior", "not flagged"])
            for s in range(10)]
    s = B.summarise(rows)["logistic_2k"]
    e = s["by_kind"]["all"]["run"]
    assert e["N"] == 30 and math.isclose(e["coverage"], 25 / 30)
    assert math.isclose(e["mc_se"], math.sqrt((25 / 30) * (5 / 30) / 30))
    assert s["by_flag"]["run"]["all / prior"]["coverage"] == 0.5
    assert s["by_flag"]["run"]["all / not flagged"]["N"] == 20
    md = B.to_markdown(B.summarise(rows), "python -m benchmarks.intervals")
    assert "0.833 +- 0.068 / 0.056 (30)" in md and "logistic_2k" in md
