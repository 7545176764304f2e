"""A NumPyro model's public-J interval release with label-free weights in the metric that whitens the public
information (dp_infer.model.weighted_release; issue 37: the model route's intervals were 2.9x the non-private
sd on the Adult model against the loss route's 2.1x, and its clip biased them).

Oracles: the observation's support as NumPyro declares it; the per-row label probabilities summing to 1; the
non-private maximum-likelihood estimate and its Laplace sd (Newton's method here); the weighted MLE and its
sandwich sd computed here from the rows with the release's own weights; the closed form of the predicted width
in the isotropic case; GDP composition of the plan's parts; the sensitivity bound checked row by row for every
label.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dp_infer
from dp_infer.diagnostics.model_prior import model_released_interval
from dp_infer.infer.model_posterior_plan import plan_model_posterior
from dp_infer.model import weighted_release as wr
from dp_infer.model.public_information import public_second_moment
from dp_infer.model.score_release import PUBLIC_SCHEDULE, noise_aware_step, score_function, score_release_event
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.routes.public_rows import whitening_metric

from tests.infer.test_model_intervals import DELTA, logreg
from tests.infer.test_model_public_curvature import logistic_mle
from tests.infer.test_model_intervals import _logit_data as logit_data


def _whitened_nll(s):
    def nll(phi, x, yy):
        z = x @ (s * phi)
        return jnp.logaddexp(0.0, z) - yy * z
    return nll


def gaussian_model(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Normal(X @ w, 1.0), obs=y)


def categorical_model(X=None, y=None):
    W = numpyro.sample("W", dist.Normal(0.0, 1.0).expand([X.shape[1], 3]).to_event(2))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Categorical(logits=X @ W), obs=y)


# ------------------------------------------------------------------------------- which models it applies to
def test_the_observation_support_is_read_from_the_model():
    """Bernoulli: {0, 1}; a 3-level categorical: {0, 1, 2}; a Gaussian observation: none (the release keeps the
    clipped scores with labels drawn from the model)."""
    X, y, _ = logit_data(0, 50)
    assert dp_infer.loss_from_model(logreg, X, y, clip_norm=4.0).observation_support() == (0.0, 1.0)
    yc = np.asarray(np.arange(50) % 3, dtype=np.float64)
    assert dp_infer.loss_from_model(categorical_model, X, yc, clip_norm=4.0).observation_support() == (0.0, 1.0, 2.0)
    assert dp_infer.loss_from_model(gaussian_model, X, X[:, 0], clip_norm=4.0).observation_support() is None


def test_release_labels_needs_probabilities_that_sum_to_one_on_the_public_rows():
    """The nll of a Bernoulli model is -log p: the labels' probabilities sum to 1 row by row and the weighted
    release applies. A per-example loss that is not -log p (twice the nll: a tempered likelihood) is refused
    to the clipped release, as is a model without a finite support."""
    X, y, _ = logit_data(0, 200)
    ml = dp_infer.loss_from_model(logreg, X, y, clip_norm=4.0)
    s = np.full(3, 2.0)
    assert wr.release_labels(ml, _whitened_nll(s), X, np.array([0.3, -0.2, 0.1])) == (0.0, 1.0)
    twice = _whitened_nll(s)
    assert wr.release_labels(ml, lambda p, x, yy: 2.0 * twice(p, x, yy), X, np.array([0.3, -0.2, 0.1])) is None
    mg = dp_infer.loss_from_model(gaussian_model, X, X[:, 0], clip_norm=4.0)
    assert wr.release_labels(mg, mg.loss.fn, X, np.zeros(3)) is None


# ------------------------------------------------------------------------------------------- the bound
def test_every_weighted_score_is_within_rho_for_every_label_and_the_weight_ignores_the_label():
    """The sensitivity: for each row and EACH label of the support, ||w M^T g(y)|| <= rho (the clip at rho never
    binds). The weight is a function of the features: the same row with its label flipped gets the same weight.
    Rows of high leverage (a large feature) get weights below 1."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(500, 3))
    X[:10] *= 8.0
    s, phi = np.full(3, 2.0), np.array([0.3, -0.5, 0.2])
    nll = _whitened_nll(s)
    G, P = wr.enumerated_scores(nll, X, phi, (0.0, 1.0))
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-6)
    p = 1.0 / (1.0 + np.exp(-X @ (s * phi)))
    np.testing.assert_allclose(G[0], (p[:, None] * X) * s, rtol=1e-5, atol=1e-7)  # y = 0: (p - 0) s x
    M = whitening_metric(wr.information(G, P), np.ones(3), 500, purpose="the weighted release")
    rho = 0.5 * math.sqrt(np.trace(M.T @ wr.information(G, P) @ M))
    w = np.minimum(1.0, rho / wr.row_bounds(G, M))
    for k in range(2):
        assert np.all(np.linalg.norm((G[k] @ M) * w[:, None], axis=1) <= rho * (1 + 1e-9))
    assert np.sum(w < 1) >= 10 and np.all(w[:10] < 1)
    Gflip, _ = wr.enumerated_scores(nll, X[::-1], phi, (1.0, 0.0))  # other row order and label order: same bound
    np.testing.assert_allclose(wr.row_bounds(Gflip, M)[::-1], wr.row_bounds(G, M), rtol=1e-12)


def test_the_weighted_plan_has_the_same_total_and_states_its_sensitivity():
    """interval_weighted=True: the release's parts are PUBLIC_SCHEDULE's mean scores with sensitivity 2 rho / n
    (rho picked from public inputs), at the same total mu as the unweighted public plan; weighted needs the
    public source."""
    X, y, _ = logit_data(0, 2000)
    ml = dp_infer.loss_from_model(logreg, X, y, clip_norm=4.0)
    kw = dict(eps=1.0, delta=DELTA, clip_norm=4.0, ess=50, interval_share=0.6, interval_curvature="public")
    plain, _, _ = plan_model_posterior(ml, 2000, **kw)
    weighted, _, _ = plan_model_posterior(ml, 2000, interval_weighted=True, **kw)
    rel = weighted.event.metadata["parts"][-1]
    parts = rel["metadata"]["parts"]
    assert rel["metadata"]["weighted"] is True and "weighted" in rel["label"]
    assert [p["sensitivity"] for p in parts] == ["2 rho / n"] * len(PUBLIC_SCHEDULE)
    mu_int = math.sqrt(0.6) * gdp_mu(1.0, DELTA)
    assert math.sqrt(sum(p["mu"] ** 2 for p in parts)) == pytest.approx(mu_int, rel=1e-12)
    assert weighted.event.mu == pytest.approx(plain.event.mu, rel=1e-12)
    with pytest.raises(ValueError, match="weighted"):
        score_release_event(0.5, n=100, clip_norm=1.0, curvature="private", weighted=True)


# ---------------------------------------------------------------------------------------- the statistics
def test_the_predicted_width_is_the_closed_form_where_every_weight_is_one():
    """Isotropic public information, a negligible prior and a radius so large that no row is down-weighted:
    H_w = J_w = I in the whitened metric, so the predicted width is sqrt(1 + n sd_g^2) with sd_g = 2 rho /
    (n mu) (the noise over the sampling error, the same in every direction)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 3))
    s, phi, n, mu = np.ones(3), np.zeros(3), 5000, 0.5
    G, P = wr.enumerated_scores(_whitened_nll(s), X, phi, (0.0, 1.0))
    M = whitening_metric(wr.information(G, P), np.full(3, 1e-9), n, purpose="the weighted release")
    rho = 1e3 * float(wr.row_bounds(G, M).max())
    sd_g = 2.0 * rho / (n * mu)
    assert wr.predicted_width_ratio(G, P, M, np.full(3, 1e-9), n, mu)(rho) == pytest.approx(
        math.sqrt(1.0 + n * sd_g ** 2), rel=1e-6)


def test_the_forecast_is_the_public_rows_laplace_sd_at_the_prior_centre_when_noise_free(monkeypatch):
    """Before the charge (forecast_intervals): at mu = 1e8 and weights 1 the forecast interval is the non-private
    posterior's at the point, from the public rows: for a logistic model at theta = 0 every row's information is
    x x^T / 4, so the sd is the root of diag((n X_pub^T X_pub / (4 m) + diag(prior_sd^-2))^-1) in theta units
    (computed here without the module's enumeration or metric), and the width ratio is 1."""
    monkeypatch.setattr(wr, "RHO_GRID", (1e3,))
    Xp, _, _ = logit_data(5, 20000)
    s, prior_sd, n = np.array([2.0, 1.0, 4.0]), np.array([10.0, 3.0, 5.0]), 5000
    fc = wr.forecast_intervals(_whitened_nll(s), Xp, (0.0, 1.0), np.zeros(3), s, prior_sd, n, 1e8)
    H = Xp.T @ Xp / (4.0 * Xp.shape[0])
    sd = np.sqrt(np.diag(np.linalg.inv(n * H + np.diag(prior_sd ** -2.0))))
    assert fc["typical_sd"] == pytest.approx(float(np.median(sd)), rel=1e-5)
    assert fc["width_ratio"] == pytest.approx(1.0, abs=1e-6)
    assert fc["point"] == [0.0, 0.0, 0.0] and fc["rho"] > 0


def test_the_forecast_at_zero_reads_numpyros_bernoulli_through_its_kink(monkeypatch):
    """The same oracle with the NumPyro model's own whitened loss: at phi = 0 every row's logit is exactly 0, where
    jax.grad of NumPyro's Bernoulli(logits) gives -1 for y = 1 (not -1/2) and 0 for y = 0. The forecast's scores
    (the symmetric mean at +-KINK_OFFSET) read the derivative there, so the sd is the Laplace sd from X^T X / 4;
    the kinked scores (-y x) would weigh each row's information as 1/2 instead of 1/4."""
    from dp_infer.infer.model_posterior_plan import whitened_loss

    monkeypatch.setattr(wr, "RHO_GRID", (1e3,))
    Xp, yp, _ = logit_data(5, 20000)
    s, prior_sd, n = np.array([2.0, 1.0, 4.0]), np.array([10.0, 3.0, 5.0]), 5000
    fn = whitened_loss(dp_infer.loss_from_model(logreg, Xp, yp, clip_norm=1e6), s, 1e6).fn
    fc = wr.forecast_intervals(fn, Xp, (0.0, 1.0), np.zeros(3), s, prior_sd, n, 1e8)
    H = Xp.T @ Xp / (4.0 * Xp.shape[0])
    sd = np.sqrt(np.diag(np.linalg.inv(n * H + np.diag(prior_sd ** -2.0))))
    assert fc["typical_sd"] == pytest.approx(float(np.median(sd)), rel=1e-4)
    assert fc["width_ratio"] == pytest.approx(1.0, abs=1e-4)


@pytest.mark.slow  # a whole release (its surrogate stages compile): 20 s
def test_the_forecast_predicts_what_the_release_at_the_same_point_predicts():
    """The forecast and the release share their arithmetic (release_metric): a weighted release made at the
    forecast's point, with the forecast's mu (the plan's last gradient's), records the same predicted width and
    radius. So the forecast differs from the release's own prediction only by where the draws' mean lands."""
    X, y, _ = logit_data(6, 3000)
    Xp, _, _ = logit_data(7, 5000)
    s, prior_sd, point, mu = np.full(3, 2.0), np.full(3, 2.5), np.array([0.1, -0.2, 0.05]), 0.2
    nll = _whitened_nll(s)
    parts = score_release_event(mu, n=3000, clip_norm=4.0, curvature="public", weighted=True).metadata["parts"]
    fc = wr.forecast_intervals(nll, Xp, (0.0, 1.0), point, s, prior_sd, 3000, parts[-1]["mu"])
    ml = dp_infer.loss_from_model(logreg, X, y, clip_norm=4.0)
    pj = public_second_moment(nll, ml.observation_sampler(), Xp, s, clip_norm=4.0)
    rel = wr.release_weighted_scores(nll, X, y, point=point, scales=s, clip_norm=4.0, mu=mu, key=jax.random.PRNGKey(0),
                                     trust_covariance=np.eye(3), prior_mean=np.zeros(3), prior_sd=prior_sd, public=pj,
                                     labels=(0.0, 1.0))
    # the forecast's scores are the symmetric mean at +-KINK_OFFSET (O(1e-6) relative), the release's the gradient
    assert rel["predicted_width_ratio"] == pytest.approx(fc["width_ratio"], rel=1e-5)
    assert rel["rho"] == pytest.approx(fc["rho"], rel=1e-5)
    assert fc["width_ratio"] > 1.05  # the noise at this mu is not negligible: a forecast that could be wrong


def _noise_free_release(seed: int, key: int):
    """``(X, y, s, release)``: a weighted release at mu = 1e8 on 4,000 logistic rows (seed), 20,000 public rows of
    the same design (seed + 1), prior scales 2, from (0.2, 0.1, -0.3) with a wide trust region and prior."""
    X, y, _ = logit_data(seed, 4000)
    Xp, _, _ = logit_data(seed + 1, 20000)
    s = np.full(3, 2.0)
    nll = _whitened_nll(s)
    ml = dp_infer.loss_from_model(logreg, X, y, clip_norm=100.0)
    pj = public_second_moment(nll, ml.observation_sampler(), Xp, s, clip_norm=100.0)
    rel = wr.release_weighted_scores(nll, X, y, point=np.array([0.2, 0.1, -0.3]), scales=s, clip_norm=100.0, mu=1e8,
                                     key=jax.random.PRNGKey(key), trust_covariance=np.eye(3), prior_mean=np.zeros(3),
                                     prior_sd=np.full(3, 1e4), public=pj, labels=(0.0, 1.0))
    return X, y, s, rel


def test_a_nearly_noise_free_weighted_release_lands_on_the_mle_with_the_laplace_sd(monkeypatch):
    """mu = 1e8 and a radius far above every row's score (weights 1: the estimand is the MLE): the data centre is
    the private rows' MLE within 0.1 of its Laplace sd, the data sd that Laplace sd within 5% (20,000 public rows
    of the same design). The release is weighted and exact (sds 0). (With the
    grid's radii the weights bind on the tail rows even here, and the centre sits 0.1-0.3 sds from the MLE: the
    weighted estimand, tested next.)"""
    monkeypatch.setattr(wr, "RHO_GRID", (1e3,))
    X, y, s, rel = _noise_free_release(11, 0)
    assert rel["release_metric"] == "weighted" and rel["score_sd"] == 0.0 and rel["curvature_sd"] == 0.0
    assert len(rel["path"]) == len(PUBLIC_SCHEDULE)
    # nothing computed from the rows leaves the release but its noisy gradient (no count of rows over the bound)
    assert not any("exceed" in k or "clipped" in k for k in rel)
    t, laplace_sd = logistic_mle(X, y)
    iv = model_released_interval(rel)
    assert np.all(np.abs(iv.data_centre - t) < 0.1 * laplace_sd), (iv.data_centre - t) / laplace_sd
    np.testing.assert_allclose(iv.data_sd, laplace_sd, rtol=0.05)
    assert "weighted" in iv.method and "weighted score" in iv.estimand
    # what a reviewer reads: the rows the curvature came from, the weights, and no clip assumption that does not apply
    assert any("20000 public feature rows" in nt and "min(1, rho" in nt for nt in iv.notes)
    assert any("X_public" in a for a in iv.assumptions)
    assert not any("rarely exceed clip_norm" in a for a in iv.assumptions)


def test_with_binding_weights_the_release_targets_the_weighted_mle_with_its_sandwich_sd(monkeypatch):
    """A radius of 0.3 of the rows' root mean score norm (most rows down-weighted), mu = 1e8: the data centre is
    the weighted MLE computed here (Newton's method on mean_i w_i (p_i - y_i) x_i = 0 with the release's weights
    at its last point) within 0.1 of its sd, and the data sd the weighted sandwich H_w^-1 J_w H_w^-1 (the model's
    expectations, computed here on the public rows) within 5%. A mutant that used the label in the weight, or
    dropped the weight from the curvature, fails one or the other."""
    monkeypatch.setattr(wr, "RHO_GRID", (0.3,))
    X, y, s, rel = _noise_free_release(21, 1)
    Xp, _, _ = logit_data(22, 20000)
    Mth = np.asarray(rel["chol"])  # theta = Mth psi
    M = Mth / s[:, None]
    rho = rel["rho"]
    last = np.asarray(rel["path"][-1])

    def weights(rows):
        p = 1.0 / (1.0 + np.exp(-rows @ last))
        return np.minimum(1.0, rho / (np.maximum(p, 1 - p) * np.linalg.norm((rows * s) @ M, axis=1))), p

    w, _ = weights(X)
    assert np.mean(w < 1) > 0.3
    t = last.copy()
    for _ in range(40):
        p = 1.0 / (1.0 + np.exp(-X @ t))
        H = (X * (w * p * (1 - p))[:, None]).T @ X
        t = t - np.linalg.solve(H, X.T @ (w * (p - y)))
    wp, pp = weights(Xp)
    Hw = (Xp * (wp * pp * (1 - pp))[:, None]).T @ Xp / len(Xp)
    Jw = (Xp * (wp ** 2 * pp * (1 - pp))[:, None]).T @ Xp / len(Xp)
    sandwich = np.sqrt(np.diag(np.linalg.solve(Hw, np.linalg.solve(Hw, Jw).T)) / len(X))
    iv = model_released_interval(rel)
    assert np.all(np.abs(iv.data_centre - t) < 0.1 * sandwich), (iv.data_centre - t) / sandwich
    np.testing.assert_allclose(iv.data_sd, sandwich, rtol=0.05)


def test_each_stage_lands_on_the_private_weighted_root_when_the_public_rows_are_the_private_ones():
    """The path's stages move to the public surrogate's minimiser (as the loss route's), not a linear step held in
    a trust region: with the private rows' features as the public rows and mu = 1e8 (noise ~1e-8 of an sd), the
    first stage's end is the root of the private weighted score with the weights at the start (Newton's method
    here on mean_i w_i (sigma(x_i . theta) - y_i) x_i = 0), to 1e-4 of a data sd, from a start 4 data sds away
    where one linear step is off by the curvature's change (the test tells them apart)."""
    X, y, _ = logit_data(41, 3000)
    s = np.full(3, 2.0)
    nll = _whitened_nll(s)
    ml = dp_infer.loss_from_model(logreg, X, y, clip_norm=100.0)
    t0, sd0 = logistic_mle(X, y)
    start = t0 + 4.0 * sd0 * np.array([1.0, -1.0, 1.0])
    pj = public_second_moment(nll, ml.observation_sampler(), X, s, clip_norm=100.0)
    rel = wr.release_weighted_scores(nll, X, y, point=start / s, scales=s, clip_norm=100.0, mu=1e8,
                                     key=jax.random.PRNGKey(3), trust_covariance=np.eye(3), prior_mean=np.zeros(3),
                                     prior_sd=np.full(3, 1e4), public=pj, labels=(0.0, 1.0))
    np.testing.assert_allclose(rel["path"][0], start, rtol=1e-12)
    M = np.asarray(rel["chol"]) / s[:, None]
    p0 = 1.0 / (1.0 + np.exp(-X @ start))
    w = np.minimum(1.0, rel["rho"] / (np.maximum(p0, 1 - p0) * np.linalg.norm((X * s) @ M, axis=1)))
    r = start.copy()
    for _ in range(40):
        p = 1.0 / (1.0 + np.exp(-X @ r))
        r = r - np.linalg.solve((X * (w * p * (1 - p))[:, None]).T @ X, X.T @ (w * (p - y)))
    H0 = (X * (w * p0 * (1 - p0))[:, None]).T @ X
    sd = np.sqrt(np.diag(np.linalg.inv(H0)))
    np.testing.assert_allclose(rel["path"][1], r, atol=1e-4 * float(sd.min()))
    linear = start - np.linalg.solve(H0, X.T @ (w * (p0 - y)))
    assert np.max(np.abs(linear - r) / sd) > 0.05


def test_the_noise_aware_step_takes_a_prior_precision_matrix():
    """A diagonal precision matrix gives the vector form's step; a full one is the Gaussian posterior mean."""
    rng = np.random.default_rng(2)
    A = rng.normal(size=(3, 3))
    J = A @ A.T + 0.1 * np.eye(3)
    g, phi, m = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
    lam = np.array([0.5, 2.0, 1.0])
    np.testing.assert_allclose(noise_aware_step(J, g, 0.3, phi, m, np.diag(lam)),
                               noise_aware_step(J, g, 0.3, phi, m, lam), rtol=1e-12)
    L = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 1.5]])
    omega = J @ J / 0.09  # the score's precision for the point: J (sd^2 I)^-1 J
    target = np.linalg.solve(omega + L, omega @ (phi - np.linalg.solve(J, g)) + L @ m)
    np.testing.assert_allclose(phi - noise_aware_step(J, g, 0.3, phi, m, L), target, rtol=1e-9, atol=1e-12)


def test_the_surrogate_centre_is_the_private_weighted_root_when_the_public_rows_are_the_private_ones():
    """For a logistic model the weighted score's change between two points reads no label, so with the private
    rows' own features as the public rows the surrogate's minimiser is the root of the private weighted score
    plus the released gradient's noise (Newton's method here on mean_i w_i (sigma(x_i . theta) - y_i) x_i + z = 0,
    z the noise), from a start 3 sds away where a linear step is off by its curvature's change. Agreement to
    1e-6 of an sd; a box of 0.5 draws' sds holds the centre on its edge."""
    X, y, _ = logit_data(31, 3000)
    s = np.full(3, 2.0)
    nll = _whitened_nll(s)
    scores, nllv = score_function(nll), jax.jit(jax.vmap(nll, in_axes=(None, 0, 0)))
    rng = np.random.default_rng(5)
    w = np.minimum(1.0, 2.0 / np.linalg.norm(X, axis=1))
    t = np.zeros(3)
    for _ in range(40):  # the weighted MLE (theta)
        p = 1.0 / (1.0 + np.exp(-X @ t))
        t = t - np.linalg.solve((X * (w * p * (1 - p))[:, None]).T @ X, X.T @ (w * (p - y)))
    H = (X * (w * p * (1 - p))[:, None]).T @ X / len(X)
    sd = np.sqrt(np.diag(np.linalg.inv(H) / len(X)))
    start = t + 3.0 * sd * np.array([1.0, -1.0, 1.0])
    phi0 = start / s
    p0 = 1.0 / (1.0 + np.exp(-X @ start))
    z = rng.normal(size=3) * 0.01  # the released gradient's noise (theta-coordinates)
    g_theta = X.T @ (w * (p0 - y)) / len(X) + z
    centre = wr.surrogate_centre(nllv, scores, X, (0.0, 1.0), phi0, s * g_theta, w, np.full(3, 10.0), 5.0) * s
    r = t.copy()
    for _ in range(40):
        p = 1.0 / (1.0 + np.exp(-X @ r))
        r = r - np.linalg.solve((X * (w * p * (1 - p))[:, None]).T @ X / len(X), X.T @ (w * (p - y)) / len(X) + z)
    np.testing.assert_allclose(centre, r, atol=1e-6 * float(sd.min()))
    linear = start - np.linalg.solve((X * (w * p0 * (1 - p0))[:, None]).T @ X / len(X), g_theta)
    assert np.max(np.abs(linear - r) / sd) > 0.05  # the linear step misses it: the test tells the two apart
    boxed = wr.surrogate_centre(nllv, scores, X, (0.0, 1.0), phi0, s * g_theta, w, np.full(3, 0.1), 0.5) * s
    assert np.max(np.abs(boxed - start)) == pytest.approx(0.5 * 0.1 * 2.0, rel=1e-9)
