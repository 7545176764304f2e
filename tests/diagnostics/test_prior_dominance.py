"""The prior-dominated coordinates of a posterior run, measured on its released draws."""

import re

import numpy as np
import pytest

import dp_infer
from dp_infer import losses
from dp_infer.diagnostics.prior_dominance import prior_dominance, run_prior_dominance


def test_the_ratio_is_the_draws_sd_over_the_prior_sd():
    # oracle: Gaussian draws of known sd. 20,000 draws: the sd's relative Monte-Carlo error is
    # 1 / sqrt(2 * 20000) = 0.005; tolerance 5 of those
    lam = np.array([4.0, 1.0, 0.25, 0.01])
    ratio = np.array([0.2, 0.85, 0.95, 1.0])
    sd = ratio / np.sqrt(lam)
    draws = np.random.default_rng(0).normal(size=(4, 5000, 4)) * sd + np.array([3.0, -1.0, 0.0, 10.0])
    pd = prior_dominance(draws, lam)
    np.testing.assert_allclose(pd.sd_ratio, ratio, rtol=0.025)
    assert pd.dominated.tolist() == [False, False, True, True]
    assert pd.median_ratio == pytest.approx(np.median(pd.sd_ratio))
    # a scalar prior precision is every coordinate's; the threshold moves the mask
    same = prior_dominance(draws[..., 1:2], 1.0, threshold=0.8)
    assert same.dominated.tolist() == [True]


def test_the_line_names_the_dominated_coordinates_largest_first():
    pd = prior_dominance(np.random.default_rng(1).normal(size=(2, 4000, 7)) * np.array([0.1, 1, 1, 1, 1, 1, 1.2]), 1.0)
    line = pd.text(list("abcdefg"), show=2)
    assert "6 of 7" in line and "g 1.2" in line and "and 4 more" in line
    assert "say little about the data" in line  # the median coordinate is the prior's
    assert not re.search(r"\ba \d", line)  # the determined coordinate (sd 0.1) is not listed
    with pytest.raises(ValueError, match="names: 2 names for 7"):
        pd.text(["a", "b"])


@pytest.mark.parametrize("bad, match", [
    (dict(draws=np.zeros((1, 3))), "at least 2 draws"),
    (dict(draws=np.zeros(5)), r"shape \(\.\.\., dim\)"),
    (dict(prior_precision=np.ones(2)), "one value per coordinate"),
    (dict(prior_precision=np.array([1.0, 0.0, 1.0])), "> 0 in every coordinate"),
    (dict(threshold=1.5), r"threshold must lie in \(0, 1\]"),
    (dict(draws=np.full((10, 3), np.nan)), "draws"),
])
def test_bad_arguments_are_named(bad, match):
    args = dict(draws=np.random.default_rng(0).normal(size=(10, 3)), prior_precision=np.ones(3))
    args.update(bad)
    threshold = args.pop("threshold", 0.9)
    with pytest.raises(ValueError, match=match):
        prior_dominance(args["draws"], args["prior_precision"], threshold=threshold)


def test_a_rare_level_is_the_priors_and_the_run_says_so():
    # a column that is 1 on 0.3% of 3,000 rows (about 9 rows): beta times its curvature is far below the
    # prior precision 1, so its draws keep the prior's sd; the intercept and the slope are the data's
    rng = np.random.default_rng(0)
    n = 3000
    X = np.c_[np.ones(n), np.clip(rng.normal(size=n), -1, 1), (rng.uniform(size=n) < 0.003)] / np.sqrt(3)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(X @ np.array([0.5, 2.0, 1.0]))))).astype(float)
    run = dp_infer.fit(losses.logistic(row_norm=1.0), X, y, eps=2.0, delta=1e-5, target="posterior",
                       prior_precision=1.0, seed=3, progress_bar=False, ess=100)
    pd = run_prior_dominance(run)
    assert pd.dominated.tolist() == [False, False, True], pd.sd_ratio
    assert pd.sd_ratio[:2].max() < 0.75  # measured 0.47 and 0.65
    assert "prior-dominated coordinates" in run.summary() and "1 of 3" in run.summary()
    est = dp_infer.fit(losses.logistic(row_norm=1.0), X, y, eps=2.0, delta=1e-5, seed=3, progress_bar=False)
    assert run_prior_dominance(est) is None  # the estimate mode has no prior


def _run_like(draws, extras):
    """A finished posterior-mode loss run as run_prior_dominance reads it: its plan's target and prior, its draws,
    its released extras."""
    from types import SimpleNamespace

    plan = SimpleNamespace(target="posterior", prior_precision=1.0)
    return SimpleNamespace(plan=plan, theta=draws, model_description=None, report_extras=extras,
                           draws=lambda: draws)


def test_where_the_run_released_intervals_the_line_says_the_draws_not_the_data_say_little():
    # the same prior-dominated draws (median ratio 1.0): with an interval release the intervals carry the data, so
    # the line must not tell the user that the data say little (the summary prints those intervals above it)
    draws = np.random.default_rng(2).normal(size=(2, 3000, 3))
    without = run_prior_dominance(_run_like(draws, {}))
    with_release = run_prior_dominance(_run_like(draws, {"interval_release": {"kind": "newton"}}))
    assert not without.interval_release and with_release.interval_release
    np.testing.assert_array_equal(without.sd_ratio, with_release.sd_ratio)
    a, b = without.text(list("xyz")), with_release.text(list("xyz"))
    assert "most coordinates say little about the data: more rows" in a and "interval release" not in a
    assert ("the tempered draws say little about the data in most coordinates; the intervals for theta (the interval "
            "release) carry what the data say") in b and "more rows" not in b
    assert a.split(" -- ")[0] == b.split(" -- ")[0]  # the measurement itself is the same line
    # a skipped release (its reason recorded) is no release
    assert not run_prior_dominance(_run_like(draws, {"interval_release_skipped": "signal to noise"})).interval_release
    # and where the draws are the data's, neither says anything more
    sharp = run_prior_dominance(_run_like(draws * 0.1, {"interval_release": {}}))
    assert " -- " not in sharp.text(list("xyz"))
