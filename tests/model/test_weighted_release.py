"""``dp_infer.model.weighted_release.release_weighted_scores``'s privacy parts at a finite mu: each released
gradient is the weighted scores' mean plus the key's noise at ``2 rho / (n mu_part)``, every row's weighted score
within ``rho`` for its own label, the weights computed from the features alone.

Oracles: the logistic model's per-example score in closed form (``s x (sigmoid(z) - y)``); the weight recomputed
by hand from both labels' scores in the release's recorded metric (``chol``) and radius (``rho``); the noise
re-drawn from the same key's split (``dp_infer.randomness.gaussian_noise``), the only way to recover it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dp_infer
from dp_infer.model import weighted_release as wr
from dp_infer.model.public_information import public_second_moment
from dp_infer.model.score_release import PUBLIC_SCHEDULE, score_release_event

from tests.infer.test_model_intervals import logreg
from tests.model.test_score_release import redrawn_noise

S = np.array([2.0, 1.0, 0.5])


def nll(phi, x, y):
    z = x @ (S * phi)
    return jnp.logaddexp(0.0, z) - y * z


def rows(seed, n):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * np.array([1.0, 2.0, 0.5])
    X[:5] *= 6.0  # high-leverage rows: their weights bind
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ np.array([0.5, -0.3, 1.0])))).astype(float)
    return X, y


def release(mu, key, n=1500, names=None, labels_in_release=None):
    """``(X, y, release)``; ``labels_in_release``: ``y -> y'``, the labels the release reads instead (the rows'
    checks are bypassed: the backstops' tests)."""
    X, y = rows(0, n)
    Xp, _ = rows(1, 3000)
    ml = dp_infer.loss_from_model(logreg, X, y, clip_norm=10.0)
    pj = public_second_moment(nll, ml.observation_sampler(), Xp, S, clip_norm=10.0)
    y_rel = y if labels_in_release is None else labels_in_release(y.copy())
    rel = wr.release_weighted_scores(nll, X, y_rel, point=np.array([0.1, -0.1, 0.4]), scales=S, clip_norm=10.0,
                                     mu=mu, key=key, trust_covariance=np.diag([0.01, 0.02, 0.05]),
                                     prior_mean=np.zeros(3), prior_sd=S, public=pj, labels=(0.0, 1.0), names=names)
    return X, y, rel


def weighted_parts(mu, n):
    """The weighted release's parts (statistic, mu, stage) as its event plans them."""
    return score_release_event(mu, n=n, clip_norm=10.0, curvature="public", weighted=True).metadata["parts"]


def last_noise(key, mu, n):
    """The last stage's noise vector, re-drawn from the key's split, and that stage's sd over rho."""
    parts = weighted_parts(mu, n)
    return redrawn_noise(key, len(parts))[-1], 2.0 / (n * parts[-1]["mu"])


def weighted_rows(X, y, phi, M, rho):
    """Each row's weighted score in the metric, by hand: both labels' closed-form scores give the row's bound."""
    p = 1.0 / (1.0 + np.exp(-X @ (S * phi)))
    bound = np.maximum(np.linalg.norm(((S * X) * p[:, None]) @ M, axis=1),
                       np.linalg.norm(((S * X) * (p - 1.0)[:, None]) @ M, axis=1))
    w = np.minimum(1.0, rho / bound)
    own = ((S * X) * (p - y)[:, None]) @ M
    return own * w[:, None], w


def test_the_released_gradients_are_the_weighted_means_plus_the_keys_noise_at_2_rho_over_n_mu():
    n, mu = 1500, 0.6
    key = jax.random.PRNGKey(9)
    X, y, rel = release(mu, key, n)
    parts = weighted_parts(mu, n)
    assert len(parts) == len(PUBLIC_SCHEDULE) == len(rel["path"])
    rho = rel["rho"]
    M = np.asarray(rel["chol"]) / S[:, None]  # chol = s M
    z = redrawn_noise(key, len(parts))
    last = np.asarray(rel["path"][-1]) / S
    scored, w = weighted_rows(X, y, last, M, rho)
    assert np.mean(w < 1.0) > 0.0  # some weights bind at this radius
    sd = 2.0 * rho / (n * parts[-1]["mu"])
    assert rel["gradient_sd"] == pytest.approx(sd, rel=1e-12)
    assert rel["previous_gradient_sd"] == pytest.approx(2.0 * rho / (n * parts[-2]["mu"]), rel=1e-12)
    np.testing.assert_allclose(np.asarray(rel["gradient"]), scored.mean(axis=0) + z[-1] * sd, rtol=0, atol=2e-6 * rho)
    # every row's weighted score within rho for its own label, and for the other one
    assert np.all(np.linalg.norm(scored, axis=1) <= rho * (1 + 1e-9))
    flipped, w_flipped = weighted_rows(X, 1.0 - y, last, M, rho)
    np.testing.assert_array_equal(w_flipped, w)
    assert np.all(np.linalg.norm(flipped, axis=1) <= rho * (1 + 1e-9))
    assert rel["mu"] == mu and rel["n"] == n and rel["release_metric"] == "weighted"
    assert rel["curvature_sd"] == 0.0 and rel["score_sd"] == 0.0


def test_the_same_key_repeats_the_release_and_another_key_changes_its_noise():
    a = release(0.6, jax.random.PRNGKey(4))[2]
    b = release(0.6, jax.random.PRNGKey(4))[2]
    c = release(0.6, jax.random.PRNGKey(5))[2]
    assert a["gradient"] == b["gradient"] and a["path"] == b["path"] and a["centre"] == b["centre"]
    assert a["rho"] == c["rho"] and a["chol"] == c["chol"]  # public: the metric and the radius take no noise
    assert not np.allclose(a["gradient"], c["gradient"], rtol=0, atol=1e-3 * a["gradient_sd"])


def test_the_row_bound_is_the_largest_score_norm_over_the_labels():
    rng = np.random.default_rng(2)
    G = rng.normal(size=(3, 40, 4))
    A = rng.normal(size=(4, 4))
    expected = np.max(np.linalg.norm(G @ A, axis=2), axis=0)
    np.testing.assert_allclose(wr.row_bounds(G, A), expected, rtol=1e-14)


@pytest.mark.parametrize("grid", [None, (0.3,)])
def test_each_stage_and_the_centre_are_the_surrogate_steps_from_that_stages_release(monkeypatch, grid):
    """The wiring of the path, recomputed stage by stage from the recorded metric and radius and the key's noise:
    at each point the public rows' weights and enumerated scores are taken there, the stage's noisy weighted mean
    is the anchor of the public surrogate (``surrogate_centre``) whose minimiser, within ``PUBLIC_STEP_BOX`` draws'
    sds of the point, is the next point; the centre is the same from the last point and the last gradient; the
    reported curvature and scores' second moment are the weighted public information at the last point. With a
    tight trust region (draws' sds 0.1-0.22) some step is held at the box. With the radius grid's smallest factor
    the radius is below 1 and below some public rows' bounds' floor of 1 (a floor that only keeps 0 / 0 out)."""
    if grid is not None:
        monkeypatch.setattr(wr, "RHO_GRID", grid)
    from dp_infer.model.score_release import score_function
    from dp_infer.routes.newton_release import PUBLIC_STEP_BOX

    n, mu = 1500, 0.6
    key = jax.random.PRNGKey(9)
    X, y, rel = release(mu, key, n)
    Xp, _ = rows(1, 3000)
    labels = (0.0, 1.0)
    parts = weighted_parts(mu, n)
    rho, M = rel["rho"], np.asarray(rel["chol"]) / S[:, None]
    z = redrawn_noise(key, len(parts))
    draws_sd = np.sqrt(np.array([0.01, 0.02, 0.05]))
    scores = score_function(nll)
    path = [np.asarray(p) / S for p in rel["path"]]
    assert path[0] == pytest.approx([0.1, -0.1, 0.4], rel=1e-15)
    held = 0
    for k in range(len(parts)):
        Gp, Pp = wr.enumerated_scores(nll, Xp, path[k], labels)
        wp = np.minimum(1.0, rho / np.maximum(wr.row_bounds(Gp, M), 1e-300))
        scored, _ = weighted_rows(X, y, path[k], M, rho)
        g = scored.mean(axis=0) + z[k] * 2.0 * rho / (n * parts[k]["mu"])
        nxt = wr.surrogate_centre(nll, scores, Xp, labels, path[k], np.linalg.solve(M.T, g), wp, draws_sd,
                                  PUBLIC_STEP_BOX)
        expected = path[k + 1] if k + 1 < len(parts) else np.asarray(rel["centre"]) / S
        np.testing.assert_allclose(expected, nxt, rtol=1e-5, atol=1e-6)  # the scores are float32
        step = np.abs(nxt - path[k]) / draws_sd
        assert np.all(step <= PUBLIC_STEP_BOX * (1 + 1e-9))
        held += int(np.any(step >= PUBLIC_STEP_BOX * (1 - 1e-9)))
    assert held >= 1
    if grid is not None:
        assert rho < 1.0 and np.any(wr.row_bounds(Gp, M) < rho)
    np.testing.assert_allclose(np.asarray(rel["curvature"]), wr.information(Gp, Pp, M, wp), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(np.asarray(rel["score"]), wr.information(Gp, Pp, M, wp * wp), rtol=1e-5, atol=1e-9)


def test_the_release_records_its_public_inputs():
    X, y, rel = release(0.6, jax.random.PRNGKey(1), names=("w[0]", "w[1]", "w[2]"))
    assert rel["names"] == ["w[0]", "w[1]", "w[2]"]
    assert rel["kind"] == "model_score" and rel["loss"] == "model_nll" and rel["clip_norm"] == 10.0
    assert rel["curvature_source"] == "public" and rel["public_rows"] == 3000 and rel["label_draws"] is None
    assert isinstance(rel["public_rows_sha256"], str) and len(rel["public_rows_sha256"]) == 64
    assert rel["labels"] == [0.0, 1.0] and rel["release_metric"] == "weighted"
    assert rel["prior_mean"] == [0.0, 0.0, 0.0] and rel["prior_sd"] == S.tolist()
    assert 0.0 < rel["predicted_width_ratio"] and np.isfinite(rel["predicted_width_ratio"])


def test_a_row_whose_own_score_is_not_finite_enters_as_zero_and_leaves_the_others():
    """A label the model cannot score (NaN: the run's checks refuse it before a release, so this is the backstop)
    makes that row's own score non-finite while its weight, from the support's labels, is finite: the row enters
    the mean as 0, and every other row as before."""
    n, mu, key = 1500, 0.6, jax.random.PRNGKey(9)

    def nan_label(y):
        y[7] = np.nan
        return y

    X, y, rel = release(mu, key, n, labels_in_release=nan_label)
    rho, M = rel["rho"], np.asarray(rel["chol"]) / S[:, None]
    z, sd_per_rho = last_noise(key, mu, n)
    scored, w = weighted_rows(X, y, np.asarray(rel["path"][-1]) / S, M, rho)
    assert w[7] > 0.0
    scored[7] = 0.0
    assert np.all(np.isfinite(rel["gradient"]))
    np.testing.assert_allclose(np.asarray(rel["gradient"]), scored.mean(axis=0) + z * sd_per_rho * rho, rtol=0,
                               atol=2e-6 * rho)


def test_a_label_outside_the_support_is_held_within_rho_by_the_backstop():
    """The weight bounds a row's score over the support's labels; a private label outside it (2 for a Bernoulli
    model, whose NumPyro log-density does not refuse it) has a larger score, ``(p - 2) s x``. The backstop clips
    that row's weighted score to ``rho`` (a hair inside), so the sensitivity ``2 rho / n`` holds whatever the
    label: the released gradient is the mean with that row clipped, plus the key's noise."""
    n, mu, key = 1500, 0.6, jax.random.PRNGKey(9)

    def label_two(y):
        y[:3] = 2.0  # rows 0-2 are high-leverage rows: their weights bind, so their scores reach the bound
        return y

    X, y, rel = release(mu, key, n, labels_in_release=label_two)
    rho, M = rel["rho"], np.asarray(rel["chol"]) / S[:, None]
    z, sd_per_rho = last_noise(key, mu, n)
    scored, _ = weighted_rows(X, label_two(y.copy()), np.asarray(rel["path"][-1]) / S, M, rho)
    norms = np.linalg.norm(scored, axis=1)
    assert np.all(norms[:3] > 1.05 * rho)  # unclipped, these rows would exceed the bound
    scored[:3] *= (rho / norms[:3])[:, None]
    np.testing.assert_allclose(np.asarray(rel["gradient"]), scored.mean(axis=0) + z * sd_per_rho * rho, rtol=0,
                               atol=2e-6 * rho)
