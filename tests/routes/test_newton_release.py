"""The interval release (dp_infer.routes.newton_release): its bounds, its noise and its event."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from dp_infer import losses
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.routes.newton_release import SCHEDULE, link_bounds, newton_event, newton_releasable, weight_radius
from dp_infer.releases.newton import release_newton_statistics, weighted_rows
from dp_infer.routes.posterior import plan_posterior


def _rows(n=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ np.array([1.0, -1.0, 0.5][:d])))).astype(float)
    return X, y


def _adversarial_rows(loss):
    """``(C, X, y)``: a metric and rows tiny, aligned with the metric's widest direction, of huge leverage, zero,
    with both labels (logistic) or large residuals (Huber)."""
    C = np.diag([30.0, 1.0, 0.05])
    X = np.array([[1.0, 0, 0], [0.999, 0.0447, 0], [0, 0, 1.0], [1e-6, 0, 0], [0.6, 0.8, 0], [0, 0, 0]])
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.0]) if loss.name == "logistic" else np.array([5, -5, 3, 0, -4, 1.0])
    return C, X, y


@pytest.mark.parametrize("loss", [losses.logistic(row_norm=1.0), losses.huber(1.0, row_norm=1.0)])
def test_every_row_stays_inside_the_bounds_the_sensitivity_rests_on(loss):
    # adversarial rows: tiny, aligned with the metric's widest direction, huge leverage, both labels / large residuals
    G_link, kappa = link_bounds(loss)
    C, X, y = _adversarial_rows(loss)
    for rho in (0.01, 0.7, 5.0):
        for theta in (np.zeros(3), np.array([50.0, -50.0, 50.0])):
            G, W = weighted_rows(loss, X, y, theta, C, rho)
            assert np.all(np.linalg.norm(G, axis=1) <= G_link * rho * (1 + 1e-9))
            assert np.all(np.sum(W * W, axis=1) <= kappa * rho * rho * (1 + 1e-9))
    # without the weights (rho = 1e9: all weights 1) the same rows break the rho = 0.7 bounds, so the test can fail
    G, W = weighted_rows(loss, X, y, np.array([50.0, -50.0, 50.0]), C, 1e9)
    assert np.linalg.norm(G, axis=1).max() > 10 * G_link * 0.7
    G, W = weighted_rows(loss, X, np.zeros(6), np.zeros(3), C, 1e9)  # residuals 0: Huber curvature 1
    assert np.sum(W * W, axis=1).max() > 10 * kappa * 0.7 ** 2


@pytest.mark.parametrize("loss", [losses.logistic(row_norm=1.0), losses.huber(1.0, row_norm=1.0)])
def test_the_public_releases_first_power_weights_keep_the_gradient_bound_and_more_of_each_row(loss):
    # the public-curvature release weighs rows min(1, rho / ||C^T x||) (PUBLIC_WEIGHT_POWER): the gradient bound G rho
    # that its only released statistic rests on holds for the same adversarial rows, and a row beyond rho keeps
    # rho / ||C^T x|| of its weight, not the square's (rho / ||C^T x||)^2
    from dp_infer.releases.newton import row_weights
    from dp_infer.routes.newton_release import PUBLIC_WEIGHT_POWER, weight_power

    assert PUBLIC_WEIGHT_POWER == 1 and weight_power("public") == 1 and weight_power("private") == 2
    G_link, _ = link_bounds(loss)
    C, X, y = _adversarial_rows(loss)
    for rho in (0.01, 0.7, 5.0):
        for theta in (np.zeros(3), np.array([50.0, -50.0, 50.0])):
            G, _ = weighted_rows(loss, X, y, theta, C, rho, power=1)
            assert np.all(np.linalg.norm(G, axis=1) <= G_link * rho * (1 + 1e-9))
    w1, w2 = row_weights(X @ C, 0.7, 1), row_weights(X @ C, 0.7, 2)
    np.testing.assert_allclose(w1[0], 0.7 / 30.0, rtol=1e-12)
    np.testing.assert_allclose(w2[0], (0.7 / 30.0) ** 2, rtol=1e-12)
    assert w1[5] == 1.0 and w1[3] == 1.0  # a zero row and a tiny one weigh 1
    with pytest.raises(ValueError, match="power must be 1 or 2"):
        row_weights(X @ C, 0.7, 3)


def test_the_release_noise_has_the_stated_sd_and_the_event_the_planned_mu():
    # the last gradient's noise over 100 keys against its stated sd (chi-square: sd of the sd estimate ~ 1/sqrt(2 N d))
    X, y = _rows()
    loss = losses.logistic(row_norm=1.0)
    C = np.eye(3) * 2.0
    rho = weight_radius(C, X.T @ X / len(X))
    mu = 0.5
    rel = [release_newton_statistics(loss, X, y, point=np.zeros(3), chol=C, rho=rho, mu=mu,
                                     key=jax.random.PRNGKey(k), trust_covariance=np.eye(3) * 1e-12)
           for k in range(100)]
    # a trust covariance of 1e-12 keeps every point at the start: the last gradient is taken at 0 in every release
    assert all(np.allclose(r.path[-1], 0.0, atol=1e-4) for r in rel)
    G, _ = weighted_rows(loss, X, y, np.zeros(3), C, rho)
    exact = G.mean(axis=0)
    noise = np.array([r.gradient for r in rel]) - exact
    sd = rel[0].gradient_sd
    share = dict(SCHEDULE[-1])["gradient"]
    assert sd == pytest.approx(2.0 * rho / (len(X) * math.sqrt(share) * mu), rel=1e-6)
    assert float(np.std(noise)) == pytest.approx(sd, rel=4 / math.sqrt(2 * noise.size))
    assert abs(float(np.mean(noise))) < 4 * sd / math.sqrt(noise.size)
    ev = newton_event(mu, n=len(X))
    assert math.sqrt(sum(p["mu"] ** 2 for p in ev.metadata["parts"])) == pytest.approx(mu, rel=1e-12)


def test_the_plan_reserves_the_interval_share_and_composes_it():
    loss = losses.logistic(row_norm=1.0)
    mu = gdp_mu(1.0, 1e-5)
    plain = plan_posterior(loss, 4000, 3, eps=1.0, delta=1e-5, prior_precision=1.0)
    shared = plan_posterior(loss, 4000, 3, eps=1.0, delta=1e-5, prior_precision=1.0, interval_share=0.5)
    parts = {p["label"].split(" ")[0]: p["mu"] for p in shared.event.metadata["parts"]}
    assert parts["newton_release"] == pytest.approx(math.sqrt(0.5) * mu, rel=1e-9)
    assert shared.event.mu <= mu * (1 + 1e-9)
    assert shared.posterior.mu_path == pytest.approx(mu / math.sqrt(2), rel=1e-6)
    assert shared.beta < plain.beta  # the path spends less
    for bad in (1.0, -0.1, float("nan"), True):
        with pytest.raises(ValueError, match="interval_share"):
            plan_posterior(loss, 4000, 3, eps=1.0, delta=1e-5, prior_precision=1.0, interval_share=bad)


def test_which_losses_the_release_serves():
    assert newton_releasable(losses.logistic(row_norm=1.0), 3)
    assert newton_releasable(losses.huber(1.0, row_norm=1.0), 3)
    assert not newton_releasable(losses.multinomial_logistic(3, row_norm=1.0), 3)  # one parameter per class
    # the release itself refuses such a loss by name before reading a row (no link bounds to bound the rows by)
    X, y = _rows()
    with pytest.raises(ValueError, match=r"^loss: the interval release needs a generalised linear loss with "
                                         r"declared link bounds$"):
        release_newton_statistics(losses.multinomial_logistic(3, row_norm=1.0), X, y, point=np.zeros(3),
                                  chol=np.eye(3), rho=1.0, mu=0.5, key=jax.random.PRNGKey(0),
                                  trust_covariance=np.eye(3))


def test_no_budget_is_reserved_where_the_released_curvature_would_be_noise():
    # the signal to noise n mu_H / (4 sqrt(2) d^1.5): Adult's shape at eps = 1 (0.46) gets no release and says why,
    # in one line; a small design (n = 5000, d = 5: 6.9) gets the default share
    from dp_infer.routes.newton_release import DEFAULT_INTERVAL_SHARE, MIN_CURVATURE_SNR, curvature_snr, \
        default_interval_share

    loss = losses.logistic(row_norm=1.0)
    mu = gdp_mu(1.0, 1e-5)
    assert curvature_snr(30162, 100, mu) == pytest.approx(0.46, abs=0.01)
    share, why = default_interval_share(loss, 100, n=30162, mu=mu)
    assert share == 0.0 and "signal to noise 0.46" in why and "\n" not in why
    assert default_interval_share(loss, 5, n=5000, mu=mu) == (DEFAULT_INTERVAL_SHARE, None)
    # the rule's edge: just above and below the threshold
    n_edge = math.ceil(MIN_CURVATURE_SNR * 4 * math.sqrt(2) * 10 ** 1.5 / (math.sqrt(DEFAULT_INTERVAL_SHARE * dict(SCHEDULE[-1])
                                                                      ["curvature"]) * mu))
    assert default_interval_share(loss, 10, n=n_edge, mu=mu)[0] == DEFAULT_INTERVAL_SHARE
    assert default_interval_share(loss, 10, n=n_edge - 2, mu=mu)[0] == 0.0
    assert default_interval_share(loss, 5, sharded=True)[0] == 0.0


def test_the_weight_radius_is_rho_factor_times_the_root_mean_metric_row_norm():
    # closed form: rho = RHO_FACTOR sqrt(tr(C^T S C)) = RHO_FACTOR sqrt(mean ||C^T x||^2) for S = X^T X / n (the
    # rows' own metric norms, an independent computation); a trace far from 1 tells rho from its reciprocal
    from dp_infer.routes.newton_release import RHO_FACTOR

    X, _ = _rows(200, 3, seed=3)
    C = np.array([[4.0, 0.0, 0.0], [1.0, 2.0, 0.0], [0.5, -1.0, 3.0]])
    mean_sq = float(np.mean(np.sum((X @ C) ** 2, axis=1)))
    assert mean_sq > 4.0
    rho = weight_radius(C, X.T @ X / len(X))
    assert rho == pytest.approx(RHO_FACTOR * math.sqrt(mean_sq), rel=1e-12)
    # float32 inputs give the float64 answer (the metric and the moment are promoted before the product)
    assert weight_radius(C.astype(np.float32), (X.T @ X / len(X)).astype(np.float32)) == pytest.approx(
        RHO_FACTOR * math.sqrt(float(np.trace(C.astype(np.float32).astype(np.float64).T
                                              @ (X.T @ X / len(X)).astype(np.float32).astype(np.float64)
                                              @ C.astype(np.float32).astype(np.float64)))), rel=1e-14)
    # a zero moment is floored, never 0 (the release divides by rho)
    assert weight_radius(C, np.zeros((3, 3))) == RHO_FACTOR * 1e-150


@pytest.mark.parametrize("curvature", ["private", "public"])
def test_the_event_states_its_public_n_and_refuses_bad_inputs_by_name(curvature):
    ev = newton_event(0.3, n=1234, curvature=curvature)
    assert ev.mu == 0.3 and ev.metadata["n"] == 1234
    assert ev.assumptions[0].startswith("replace-one neighbours, n = 1234 public; ")
    for mu in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"^mu must lie in \(0, inf\), got "):
            newton_event(mu, n=1234, curvature=curvature)
    for n in (0, -3, 2.5):
        with pytest.raises(ValueError, match=r"^n must be an integer >= 1, got "):
            newton_event(0.3, n=n, curvature=curvature)


def test_the_event_says_what_it_releases_and_what_its_bound_rests_on_in_the_report():
    # the label and the assumptions are what a reviewer reads in the privacy report: pinned whole for both kinds
    rows = ("replace-one neighbours, n = 50 public; rows weighted by min(1, rho^2 / ||C^T x||^2) (label- and "
            "theta-free), so every gradient has ||C^T g|| <= G rho")
    public_rows = ("replace-one neighbours, n = 50 public; rows weighted by min(1, rho / ||C^T x||) (label- and "
                   "theta-free), so every gradient has ||C^T g|| <= G rho")
    post = "the points, the weights and the metric are post-processing of released draws and of this release's " \
           "earlier stages"
    private = newton_event(0.3, n=50)
    assert private.label == ("newton_release (curvatures, gradients and the scores' second moment of a weighted data "
                             "loss near the estimate, for the intervals)")
    assert private.assumptions == (rows + " and every curvature row squared norm <= kappa rho^2", post)
    public = newton_event(0.3, n=50, curvature="public")
    assert public.label == ("newton_release (gradients of a weighted data loss near the estimate, for the intervals; "
                            "curvature and scores' second moment from public feature rows)")
    assert public.assumptions == (public_rows, post, "the curvature and the scores' second moment are computed from "
                                                     "feature rows the user declares public (X_public): no privacy cost")
    assert public.metadata["curvature"] == "public" and "curvature" not in private.metadata
    # the parts split mu^2 by the schedule's shares, in stage order
    for ev, c in ((private, "private"), (public, "public")):
        parts = ev.metadata["parts"]
        assert [p["stage"] for p in parts] == sorted(p["stage"] for p in parts)
        assert sum(p["mu"] ** 2 for p in parts) == pytest.approx(0.09, rel=1e-12)
