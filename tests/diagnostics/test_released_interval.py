"""Intervals for theta from a posterior run's interval release (dp_infer.diagnostics.released_interval)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import norm

from dp_infer import losses
from dp_infer.diagnostics.released_interval import format_intervals, released_interval
from dp_infer.infer.posterior import fit_posterior


def _release(H, J, g, *, C=None, last=None, sd_g=1e-3, sd_h=1e-9, sd_j=1e-9):
    d = len(g)
    C = np.eye(d) if C is None else C
    last = np.zeros(d) if last is None else last
    return {"path": [list(last)], "chol": C.tolist(), "gradient": list(g), "gradient_sd": sd_g,
            "curvature": np.asarray(H).tolist(), "curvature_sd": sd_h, "score": np.asarray(J).tolist(),
            "score_sd": sd_j, "rho": 1.0, "mu": 1.0, "n": 100, "loss": "logistic"}


def test_the_interval_is_the_closed_form_noise_aware_laplace_posterior():
    # an independent closed form: the centre c = C (psi_p - H^-1 g), V = C H^-1 (J/n + sd^2 I) H^-1 C', combined
    # with the prior N(0, Lambda^-1) in theta: precision V^-1 + Lambda, mean (V^-1 + Lambda)^-1 V^-1 c
    rng = np.random.default_rng(3)
    d, n = 3, 2000
    A = rng.normal(size=(d, d))
    H = A @ A.T + d * np.eye(d)
    B = rng.normal(size=(d, d))
    J = B @ B.T + np.eye(d)
    C = np.linalg.cholesky(np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]]))
    g = rng.normal(size=d) * 0.1
    last = np.array([0.5, -1.0, 2.0])
    lam = np.array([0.5, 1.0, 2.0])
    sd_g = 0.02
    iv = released_interval(_release(H, J, g, C=C, last=last, sd_g=sd_g), n=n, prior_precision=lam, prob=0.9)
    Hi = np.linalg.inv(H)
    c = last - C @ Hi @ g
    V = C @ Hi @ (J / n + sd_g ** 2 * np.eye(d)) @ Hi @ C.T
    P = np.linalg.inv(V) + np.diag(lam)
    mean = np.linalg.solve(P, np.linalg.solve(V, c))
    sd = np.sqrt(np.diag(np.linalg.inv(P)))
    np.testing.assert_allclose(iv.data_centre, c, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(iv.data_sd, np.sqrt(np.diag(V)), rtol=1e-9)
    np.testing.assert_allclose(iv.centre, mean, rtol=1e-8)
    np.testing.assert_allclose(iv.sd, sd, rtol=1e-8)
    np.testing.assert_allclose(iv.upper - iv.lower, 2 * norm.ppf(0.95) * sd, rtol=1e-8)


def test_directions_without_information_fall_back_to_the_prior_and_are_flagged():
    # H's second eigenvalue sits inside its noise (2 sqrt(d) sd): that coordinate is the prior's, and flagged
    H = np.diag([1.0, 1e-6, 1.0])
    J = np.diag([1.0, 1.0, 1.0])
    iv = released_interval(_release(H, J, np.zeros(3), sd_h=1e-3, sd_j=1e-3), n=1000, prior_precision=1.0)
    assert iv.flags[1].startswith("prior")
    assert iv.sd[1] == pytest.approx(1.0, rel=0.05)  # the prior's sd
    assert iv.flags[0] == iv.flags[2] == ""
    assert iv.sd[0] < 0.1
    assert not iv.determined[1]
    text = format_intervals(iv, ["a", "b", "c"])
    assert "prior" in text and "1 mostly the prior's" in text


def _unresolved_release(loading, z, *, C=None, n=1000, sd_g=1e-3, sd_h=0.05):
    """H with eigenvalue 1e-6 (under its noise floor 2 sqrt(3) sd_h) along u = (loading, sqrt(1 - loading^2), 0)
    and 1 along v (orthogonal to it in the first two coordinates) and e3; J = I / 2 (above its floor); the last
    gradient 0.05 along v (a last step of 0.05, about 2 data sds: no "long step") and z of its sds along u, the
    sd being the closed form sqrt(sd_g^2 + u^T J u / n + sd_h^2 |step|^2) (the gradient's noise, its sampling
    error, the curvature's noise turning the step into u)."""
    u = np.array([loading, math.sqrt(1.0 - loading ** 2), 0.0])
    v = np.array([u[1], -u[0], 0.0])
    H = np.outer(v, v) + 1e-6 * np.outer(u, u) + np.diag([0.0, 0.0, 1.0])
    sd = math.sqrt(sd_g ** 2 + 0.5 / n + sd_h ** 2 * 0.05 ** 2)
    return _release(H, 0.5 * np.eye(3), z * sd * u + 0.05 * v, C=C, sd_g=sd_g, sd_h=sd_h, sd_j=1e-9)


@pytest.mark.parametrize("loading, z, C, flagged", [
    (0.4, 3.5, None, True),
    (0.4, 2.5, None, False),  # within 3 sds of 0: the point may be the estimate along u
    (0.4, -3.5, None, True),  # either side of 0
    (0.35, 10.0, None, True),
    (0.25, 10.0, np.diag([2.0, 0.5, 3.0]), False),  # loading below 0.3, whatever the metric's scales
    (0.35, 10.0, np.diag([0.2, 5.0, 3.0]), True),
])
def test_a_coordinate_resting_on_an_unresolved_direction_is_flagged(loading, z, C, flagged):
    """A direction within the curvature's noise (left to the prior) whose last gradient is z of its sds from 0:
    the data put the estimate elsewhere along it. Coordinate 0 rests on it with ``loading`` (not prior-dominated:
    the prior gives loading^2 of its variance); coordinate 1 (loading above 0.9) is the prior's, and keeps that
    flag; coordinate 2 is orthogonal to it. The score is the closed form |u^T g| / sqrt(sd_g^2 + u^T J u / n),
    the loading the cosine between u and the coordinate's row of C (a diagonal metric leaves it |u_j|)."""
    lam = 1.0 if C is None else 1.0 / np.diag(C) ** 2  # the prior isotropic in psi, as with C = I
    iv = released_interval(_unresolved_release(loading, z, C=C), n=1000, prior_precision=lam)
    assert iv.flags[1].startswith("prior"), iv.flags
    assert iv.flags[2] == "" and iv.unresolved_score[2] == 0.0
    if loading >= 0.3:
        assert iv.unresolved_score[0] == pytest.approx(abs(z), rel=1e-9)
    else:
        assert iv.unresolved_score[0] == 0.0
    if flagged:
        assert iv.flags[0] == ("unresolved: it rests on a direction whose curvature the release could not resolve, "
                               f"and the last gradient along it is {abs(z):.1f} sds from 0: the estimate lies "
                               "elsewhere along it, how far the release cannot say; the interval may miss (a larger "
                               "eps or n resolves it)")
        assert not iv.determined[0]
        assert ("\nflags: unresolved: the coordinate rests on a direction the release could not resolve"
                in format_intervals(iv))
    else:
        assert iv.flags[0] == "", iv.flags
        assert "\nflags:" not in format_intervals(iv)  # the "prior" flag is counted on the summary line
    assert iv.to_dict()["unresolved_score"] == list(iv.unresolved_score)


def test_an_unresolved_direction_is_inherited_by_what_the_model_prior_informs():
    """A model run's release (J standing in for the curvature): coordinate 0 rests on an unresolved direction,
    coordinate 1 is the stand-in's "prior". Under the model's own prior (stored draws' summary, built by hand:
    coordinate 1 informed through the prior's structure, sd 0.3 of a prior sd 1) it inherits the doubt; the
    orthogonal coordinate 2 keeps none."""
    from dp_infer.diagnostics.model_prior import model_released_interval
    from dp_infer.model.score_release import RELEASE_KIND
    from dp_infer.routes.newton_release import noise_floor

    n, sd_g, sd_j = 1000, 1e-3, 1e-3
    u = np.array([0.4, math.sqrt(0.84), 0.0])
    v = np.array([u[1], -u[0], 0.0])
    J = 0.5 * np.outer(v, v) + 1e-6 * np.outer(u, u) + np.diag([0.0, 0.0, 0.5])
    sd = math.sqrt(sd_g ** 2 + noise_floor(3, sd_j) / n)  # J's floored eigenvalue along u stands in for it
    rel = _release(J, J, 4.0 * sd * u, sd_g=sd_g, sd_h=sd_j, sd_j=sd_j)
    rel.update(kind=RELEASE_KIND, n=n, clip_norm=2.0, prior_mean=[0.0] * 3, prior_sd=[1.0] * 3, names=None)
    stand = model_released_interval(rel)
    assert stand.unresolved_score[0] == pytest.approx(4.0, rel=1e-9)
    assert stand.flags[0].startswith("unresolved: it rests on") and stand.flags[1].startswith("prior")
    levels = np.linspace(0.005, 0.995, 199)
    sds = np.array([0.3, 0.3, 0.05])
    post = {"levels": levels.tolist(), "quantiles": (norm.ppf(levels)[:, None] * sds).tolist(), "sd": sds.tolist(),
            "mean": [0.0] * 3, "max_rhat": 1.0, "min_ess": 1000.0, "divergences": 0, "num_draws": 4000,
            "method": "hand-built"}
    iv = model_released_interval(dict(rel, model_prior_posterior=post))
    assert iv.flags[0] == stand.flags[0]
    assert iv.flags[1] == ("unresolved: informed through the prior's structure by coordinates that rest on a direction "
                           "the release could not resolve (0); the interval may miss")
    assert iv.flags[2] == ""


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5])
def test_prob_outside_the_open_interval_is_refused(bad):
    with pytest.raises(ValueError, match="prob"):
        released_interval(_release(np.eye(2), np.eye(2), np.zeros(2)), n=10, prior_precision=1.0, prob=bad)


def _mu(eps):
    from dp_infer.privacy.conversions import gdp_mu

    return gdp_mu(eps, 1e-5)


def _logistic(n, d, seed, theta):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ theta))).astype(float)
    return X, y


def _laplace(X, y, prior):
    def f(t):
        z = X @ t
        return np.sum(np.logaddexp(0, z) - y * z) + 0.5 * prior * t @ t

    t = minimize(f, np.zeros(X.shape[1]), method="BFGS").x
    s = 1 / (1 + np.exp(-X @ t))
    return t, np.sqrt(np.diag(np.linalg.inv((X * (s * (1 - s))[:, None]).T @ X + prior * np.eye(X.shape[1]))))


def test_a_default_posterior_run_reports_intervals_near_the_non_private_posterior():
    # n = 4000, eps = 2: the run's intervals (the default clipped, adapted chain plus the interval release) against
    # the non-private Laplace posterior under the same prior. Tolerances: centres within 4 combined sds (the
    # interval's sd includes the privacy noise), widths between 1 and 4x; the tempered draws are >= 10x wider
    theta = np.array([1.5, -1.0, 0.5])
    X, y = _logistic(4000, 3, 0, theta)
    run = fit_posterior(losses.logistic(row_norm=1.0), X, y, eps=2.0, delta=1e-5, prior_precision=0.01, seed=5,
                        progress_bar=False)
    iv = run.intervals(0.9)
    mle, sd_np = _laplace(X, y, 0.01)
    assert np.all(np.abs(iv.centre - mle) < 4 * np.hypot(iv.sd, sd_np))
    assert np.all((iv.sd > sd_np) & (iv.sd < 4 * sd_np))
    assert np.all(run.draws().reshape(-1, 3).std(axis=0) > 10 * sd_np)
    # the forecast made before anything is charged (public inputs only) is within 25% of the measured width
    from dp_infer.routes.forecast import forecast_posterior
    from dp_infer.routes.newton_release import interval_width_forecast

    fc = forecast_posterior(losses.logistic(row_norm=1.0), 4000, 3, eps=2.0, delta=1e-5, prior_precision=0.01)
    width = interval_width_forecast(4000, 3, _mu(2.0),
                                    typical_curvature=run.plan.posterior.step.preconditioner_curvature)
    assert f"{width:.2g}x" in fc.intervals and fc.interval_width == pytest.approx(width, rel=1e-12)
    assert abs(width / float(np.median(iv.sd / sd_np)) - 1) < 0.25
    assert np.all((iv.lower > 0) | (iv.upper < 0))  # every coefficient's interval excludes 0 (|theta| / sd_np >= 6)
    assert int(np.sum(iv.determined)) >= 2  # a coordinate flagged (a long last step) does not count
    rep = run.report()
    assert rep["intervals"]["determined"] == int(np.sum(iv.determined))
    parts = [p["label"].split(" ")[0] for p in rep["event"]["metadata"]["parts"]]
    assert "newton_release" in parts
    assert "Intervals for theta" in run.summary()


def test_a_run_without_the_release_says_why_it_has_no_intervals():
    X, y = _logistic(500, 2, 1, np.array([1.0, -1.0]))
    run = fit_posterior(losses.logistic(row_norm=1.0), X, y, eps=1.0, delta=1e-5, prior_precision=1.0, seed=1,
                        progress_bar=False, ess=100, interval_share=0.0)
    with pytest.raises(ValueError, match="no interval release"):
        run.intervals()
    assert "not available" in run.summary()


def test_interval_share_for_a_loss_it_cannot_serve_is_refused_before_the_charge(tmp_path):
    from dp_infer.privacy.ledger import Ledger

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = rng.integers(0, 3, size=200).astype(float)
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("default", 100.0, 1e-3)
    with pytest.raises(ValueError, match="interval_share"):
        fit_posterior(losses.multinomial_logistic(3, row_norm=1.0), X, y, eps=1.0, delta=1e-5, prior_precision=1.0,
                      seed=0, progress_bar=False, interval_share=0.5, ledger=led, preconditioner="prior")
    assert led.history("default") == []


@pytest.mark.slow
def test_coverage_of_the_truth_on_simulated_logistic_data():
    # 20 datasets x 3 coordinates, n = 3000, eps = 1: coverage of the true parameter by the 90% intervals.
    # Monte-Carlo se at 0.9: sqrt(0.09 / 60) = 0.039; the band [0.78, 0.98] is about 3 se either side
    theta = np.array([1.5, -1.0, 0.5])
    hits = []
    for seed in range(20):
        X, y = _logistic(3000, 3, 100 + seed, theta)
        run = fit_posterior(losses.logistic(row_norm=1.0), X, y, eps=1.0, delta=1e-5, prior_precision=0.01,
                            seed=seed, progress_bar=False, ess=200)
        iv = run.intervals(0.9)
        hits.extend(((iv.lower <= theta) & (theta <= iv.upper)).tolist())
    cov = float(np.mean(hits))
    assert 0.78 <= cov <= 0.98, cov
    assert math.isfinite(cov)


def test_the_arviz_export_carries_the_intervals_and_a_saved_run_gives_them_back(tmp_path):
    from dp_infer.infer.run import PrivateRun

    X, y = _logistic(3000, 3, 2, np.array([1.5, -1.0, 0.5]))
    run = fit_posterior(losses.logistic(row_norm=1.0), X, y, eps=2.0, delta=1e-5, prior_precision=0.01, seed=2,
                        progress_bar=False, ess=100)
    run.feature_names = ["a", "b", "c"]
    iv = run.intervals(0.9)
    dt = run.to_datatree()
    group = dt["intervals"].to_dataset()
    np.testing.assert_allclose(group["lower"].values, iv.lower)
    assert list(group["lower"].coords[group["lower"].dims[0]].values) == ["a", "b", "c"]
    back = PrivateRun.load(run.save(tmp_path / "run.zip"))
    np.testing.assert_allclose(back.intervals(0.9).upper, iv.upper)
