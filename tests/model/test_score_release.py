"""``dp_infer.model.score_release``'s privacy parts, one at a time: the clipped per-example scores, the release's
event, and the noise of each released statistic.

Oracles: the logistic model's per-example gradient in closed form (``s x (sigmoid(z) - y)``), clipped by hand; the
event's parts against the schedule's shares and the sensitivities' closed forms (``2 C / n``, ``sqrt(2) C^2 / n``);
the noise re-drawn from the same key (``dp_infer.randomness.gaussian_noise`` on the key's split, the only way to
recover it), so each released gradient minus the private mean is exactly that noise times ``2 C / (n mu_part)``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer.model.score_release import (PUBLIC_SCHEDULE, PUBLIC_TRUST_RADIUS, SCHEDULE, TRUST_RADIUS,
                                          clipped_scores, release_score_statistics, schedule, score_release_event)
from dp_infer.randomness import gaussian_noise
from dp_infer.routes.preconditioning import GRAM_SENSITIVITY_FACTOR

S = np.array([2.0, 0.5, 1.0])  # the prior scales: theta = S phi


def nll(phi, x, y):
    z = x @ (S * phi)
    return jnp.logaddexp(0.0, z) - y * z


def data(n=500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * np.array([1.0, 3.0, 0.2])
    y = (rng.random(n) < 0.4).astype(float)
    return X, y


def closed_form_scores(X, y, phi):
    z = X @ (S * phi)
    return (S * X) * (1.0 / (1.0 + np.exp(-z)) - y)[:, None]


# ------------------------------------------------------------------------------------------ the clipped scores
def test_the_clipped_scores_are_the_closed_form_scores_clipped_to_the_radius_in_any_block_size():
    X, y = data()
    phi = np.array([0.3, -0.2, 1.0])
    exact = closed_form_scores(X, y, phi)
    norms = np.linalg.norm(exact, axis=1)
    C = float(np.median(norms))  # about half the rows are clipped
    expected = exact * np.minimum(1.0, C / norms)[:, None]
    for block in (8192, 64, 7):
        got = clipped_scores(nll, X, y, phi, clip_norm=C, block_rows=block)
        assert got.shape == (500, 3) and got.dtype == np.float64
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
        # every row within the radius, strictly (a hair inside: float32 rounding cannot lift a row over it)
        assert np.max(np.linalg.norm(got, axis=1)) < C
        clipped = norms > C
        np.testing.assert_allclose(np.linalg.norm(got[clipped], axis=1), C, rtol=1e-9)
        # rows inside the radius are untouched (up to the float32 gradient)
        np.testing.assert_allclose(got[~clipped], exact[~clipped], rtol=1e-5, atol=1e-7)


def test_a_non_finite_score_counts_as_zero_and_a_zero_score_stays_zero():
    X, y = data(20)
    X[3, 0] = np.inf  # its gradient is not finite
    phi = np.zeros(3)
    y[5] = 0.5
    X[5] = 0.0  # a zero row: its score is exactly 0 (no 0 / 0 in the clip)
    got = clipped_scores(nll, X, y, phi, clip_norm=1.0)
    assert np.all(np.isfinite(got))
    assert np.array_equal(got[3], np.zeros(3)) and np.array_equal(got[5], np.zeros(3))
    ok = np.ones(20, dtype=bool)
    ok[3] = False
    exact = closed_form_scores(X[ok], y[ok], phi)
    np.testing.assert_allclose(got[ok], exact * np.minimum(1.0, 1.0 / np.maximum(
        np.linalg.norm(exact, axis=1), 1e-300))[:, None], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_bad_clip_norm_is_named(bad):
    X, y = data(10)
    with pytest.raises(ValueError, match="clip_norm"):
        clipped_scores(nll, X, y, np.zeros(3), clip_norm=bad)


# ------------------------------------------------------------------------------------------------- the event
@pytest.mark.parametrize("curvature", ["private", "public"])
def test_the_event_splits_mu_by_the_schedule_with_the_closed_form_sensitivities(curvature):
    mu, n, C = 0.8, 4000, 3.0
    ev = score_release_event(mu, n=n, clip_norm=C, curvature=curvature)
    sched = SCHEDULE if curvature == "private" else PUBLIC_SCHEDULE
    assert schedule(curvature) is sched and schedule() is SCHEDULE
    expected = [(k, math.sqrt(share) * mu, stage) for stage, st in enumerate(sched) for k, share in st]
    parts = ev.metadata["parts"]
    assert [(p["statistic"], p["stage"]) for p in parts] == [(k, st) for k, _, st in expected]
    for p, (k, m, _) in zip(parts, expected):
        assert p["mu"] == pytest.approx(m, rel=1e-15)
        closed_form = 2.0 * C / n if k == "gradient" else GRAM_SENSITIVITY_FACTOR * C * C / n
        assert p["sensitivity"] == pytest.approx(closed_form, rel=1e-15)
    # the shares sum to 1: the parts compose (GDP: mu^2 adds) to exactly the event's mu
    assert math.sqrt(sum(p["mu"] ** 2 for p in parts)) == pytest.approx(mu, rel=1e-12)
    assert ev.mu == mu
    assert ev.metadata["n"] == n and ev.metadata["clip_norm"] == C and ev.metadata["curvature"] == curvature
    assert ev.label == ("model_score_release (mean clipped scores and their second moment near the estimate, for the "
                        "intervals)" if curvature == "private" else "model_score_release (mean clipped scores near the "
                        "estimate, their second moment from public feature rows, for the intervals)")
    assert ev.assumptions[0] == ("replace-one neighbours, n = 4000 public; every per-example score (w.r.t. the "
                                 "prior-whitened latents) clipped to norm 3: the mean score has L2 sensitivity 2 C / n"
                                 + (", the scores' second moment (upper triangle) sensitivity sqrt(2) C^2 / n"
                                    if curvature == "private" else ""))
    assert any("no private row enters it" in a for a in ev.assumptions) == (curvature == "public")
    assert "weighted" not in ev.metadata


def test_the_weighted_event_states_the_radius_sensitivity_and_needs_public_curvature():
    ev = score_release_event(0.5, n=1000, clip_norm=2.0, curvature="public", weighted=True)
    assert ev.metadata["weighted"] is True
    assert all(p["sensitivity"] == "2 rho / n" for p in ev.metadata["parts"])
    assert ev.label == ("model_score_release (mean weighted scores near the estimate (label-free weights in the metric "
                        "that whitens the public information), their curvature and second moment from public feature "
                        "rows, for the intervals)")
    assert ev.assumptions[0] == (
        "replace-one neighbours, n = 1000 public; every per-example score, in the metric M that whitens the public "
        "rows' information, weighted by min(1, rho / max over the observation's support of ||M^T g||) (features and "
        "public quantities only) and clipped to rho: the mean score has L2 sensitivity 2 rho / n, rho chosen from "
        "public inputs at release time")
    with pytest.raises(ValueError, match="interval_curvature='public'"):
        score_release_event(0.5, n=1000, clip_norm=2.0, curvature="private", weighted=True)


@pytest.mark.parametrize("kw, name", [(dict(mu=0.0), "mu"), (dict(mu=-1.0), "mu"), (dict(n=0), "n"), (dict(n=2.5), "n"),
                                      (dict(clip_norm=0.0), "clip_norm"),
                                      (dict(curvature="exact"), "interval_curvature")])
def test_bad_event_arguments_are_named(kw, name):
    args = {"mu": 0.5, "n": 100, "clip_norm": 1.0, **kw}
    mu = args.pop("mu")
    with pytest.raises(ValueError, match=name):
        score_release_event(mu, **args)


# --------------------------------------------------------------------------------------------- the release
PRIOR_MEAN, PRIOR_SD = np.array([0.5, -1.0, 0.2]), np.array([1.0, 0.8, 2.0])  # theta units


TRUST = np.diag([0.04, 0.09, 0.01])  # the draws' covariance in phi


def release(X, y, *, mu, key, public=None, point=None, names=None, trust=TRUST):
    point = np.array([0.2, -0.1, 0.5]) if point is None else point
    return release_score_statistics(nll, X, y, point=point, scales=S, clip_norm=2.0, mu=mu, key=key,
                                    trust_covariance=trust, prior_mean=PRIOR_MEAN,
                                    prior_sd=PRIOR_SD, public_second_moment=public, names=names)


def test_the_release_records_its_public_inputs_for_the_intervals():
    X, y = data(300, seed=5)
    rel = release(X, y, mu=0.5, key=jax.random.PRNGKey(0), names=["a", "b", "c"])
    assert rel["chol"] == [[2.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 1.0]]  # theta = diag(s) phi
    assert rel["rho"] == rel["clip_norm"] == 2.0 and rel["loss"] == "model_nll" and rel["names"] == ["a", "b", "c"]
    assert rel["prior_mean"] == PRIOR_MEAN.tolist() and rel["prior_sd"] == PRIOR_SD.tolist()
    assert release(X, y, mu=0.5, key=jax.random.PRNGKey(0))["names"] is None
    assert "curvature_source" not in rel and "previous_gradient_sd" not in rel


def redrawn_noise(key, count, d=3):
    with jax.enable_x64(True):
        return [np.asarray(gaussian_noise(k, (d,), jnp.float64), dtype=np.float64)
                for k in jax.random.split(key, count)]


def test_the_released_gradient_is_the_clipped_mean_plus_the_keys_noise_at_2c_over_n_mu():
    """The last stage's gradient, at the path's last point: the clipped scores' mean there plus the noise the
    key's split gives that part, times ``2 C / (n mu_part)``; the reported sd is that scale. The path's first
    step is the scoring step ``J^-1 g`` held within the trust radius (recomputed from the released ``J`` and the
    first gradient, whose noise is recovered the same way)."""
    X, y = data(800, seed=1)
    n, mu, C = 800, 0.9, 2.0
    key = jax.random.PRNGKey(7)
    rel = release(X, y, mu=mu, key=key)
    parts = score_release_event(mu, n=n, clip_norm=C).metadata["parts"]
    noise = redrawn_noise(key, len(parts))
    last = np.asarray(rel["path"][-1]) / S
    sd_last = 2.0 * C / (n * parts[-1]["mu"])
    assert rel["gradient_sd"] == pytest.approx(sd_last, rel=1e-15)
    mean_last = clipped_scores(nll, X, y, last, clip_norm=C).mean(axis=0)
    np.testing.assert_allclose(np.asarray(rel["gradient"]), mean_last + noise[-1] * sd_last, rtol=0, atol=1e-9)
    # the first stage: its gradient (index 1: after J) from the draws' mean, and the step it made
    first = np.array([0.2, -0.1, 0.5])
    assert np.asarray(rel["path"][0]) == pytest.approx(S * first, rel=1e-15)
    g1 = clipped_scores(nll, X, y, first, clip_norm=C).mean(axis=0) + noise[1] * 2.0 * C / (n * parts[1]["mu"])
    from dp_infer.model.score_release import solve_floored
    from dp_infer.routes.newton_release import noise_floor

    step = solve_floored(np.asarray(rel["score"]), g1, noise_floor(3, rel["score_sd"]))
    Si = np.linalg.inv(np.diag([0.04, 0.09, 0.01]))
    r = float(np.sqrt(step @ Si @ step))
    np.testing.assert_allclose(last, first - step * min(1.0, TRUST_RADIUS / r), rtol=0, atol=1e-9)
    assert rel["mu"] == mu and rel["n"] == n and rel["clip_norm"] == C and rel["kind"] == "model_score"


def test_the_released_second_moment_is_the_clipped_gram_plus_its_noise():
    """``J`` (the first part, at the draws' mean): ``private_second_moment_of_gram`` of the clipped scores with the
    part's mu and key; its noise sd ``sqrt(2) C^2 / (n mu_J)`` is reported."""
    from dp_infer.releases.second_moment import private_second_moment_of_gram

    X, y = data(600, seed=2)
    n, mu, C = 600, 1.1, 2.0
    key = jax.random.PRNGKey(3)
    rel = release(X, y, mu=mu, key=key)
    parts = score_release_event(mu, n=n, clip_norm=C).metadata["parts"]
    assert parts[0]["statistic"] == "score"
    grads = clipped_scores(nll, X, y, np.array([0.2, -0.1, 0.5]), clip_norm=C)
    ref = private_second_moment_of_gram(grads.T @ grads, n, max_sq_norm=C * C, mu=parts[0]["mu"],
                                        key=jax.random.split(key, len(parts))[0])
    np.testing.assert_allclose(np.asarray(rel["score"]), ref.matrix, rtol=0, atol=1e-9)
    assert rel["score_sd"] == pytest.approx(GRAM_SENSITIVITY_FACTOR * C * C / (n * parts[0]["mu"]), rel=1e-12)
    assert rel["curvature"] == rel["score"] and rel["curvature_sd"] == rel["score_sd"]


def test_without_the_key_the_noise_is_not_recovered_and_a_known_key_repeats_the_release():
    X, y = data(400, seed=3)
    a = release(X, y, mu=0.7, key=jax.random.PRNGKey(11))
    b = release(X, y, mu=0.7, key=jax.random.PRNGKey(11))
    c = release(X, y, mu=0.7, key=jax.random.PRNGKey(12))
    assert a["gradient"] == b["gradient"] and a["score"] == b["score"] and a["path"] == b["path"]
    assert not np.allclose(a["gradient"], c["gradient"], atol=1e-6)


@pytest.mark.parametrize("point, trust, binds", [(np.array([1.0, -1.0, 2.0]), TRUST, True),
                                                 (np.array([0.2, -0.1, 0.5]), 100.0 * TRUST, False)])
def test_with_public_j_every_stage_releases_a_gradient_and_the_steps_use_the_public_radius(point, trust, binds):
    """``PUBLIC_SCHEDULE``: only mean clipped scores leave, one per stage, each with the noise of its own part; ``J``
    comes from the public callable at each point (exact: ``score_sd`` 0); each step is the noise-aware step from the
    stage's gradient under the prior (in phi units), held within ``PUBLIC_TRUST_RADIUS`` draws' sds (far from the
    estimate in a tight trust region the first step binds; in a wide one none does); the previous gradient's sd is
    reported for the long-step flag."""
    X, y = data(700, seed=4)
    n, mu, C = 700, 1.0, 2.0
    calls = []

    class Public:
        rows, sha256, label_draws = 123, "abc", 4

        def __call__(self, phi):
            calls.append(np.array(phi))
            g = clipped_scores(nll, X, y, phi, clip_norm=C)
            return g.T @ g / n

    key = jax.random.PRNGKey(5)
    rel = release(X, y, mu=mu, key=key, public=Public(), point=point, trust=trust)
    parts = score_release_event(mu, n=n, clip_norm=C, curvature="public").metadata["parts"]
    assert [p["statistic"] for p in parts] == ["gradient"] * len(PUBLIC_SCHEDULE)
    assert len(rel["path"]) == len(PUBLIC_SCHEDULE) and len(calls) == len(PUBLIC_SCHEDULE)
    assert rel["score_sd"] == 0.0 and rel["curvature_source"] == "public" and rel["public_rows"] == 123
    assert rel["public_rows_sha256"] == "abc" and rel["label_draws"] == 4
    assert rel["previous_gradient_sd"] == pytest.approx(2.0 * C / (n * parts[-2]["mu"]), rel=1e-15)
    noise = redrawn_noise(key, len(parts))
    path = [np.asarray(p) / S for p in rel["path"]]
    sd = 2.0 * C / (n * parts[-1]["mu"])
    mean_last = clipped_scores(nll, X, y, path[-1], clip_norm=C).mean(axis=0)
    np.testing.assert_allclose(np.asarray(rel["gradient"]), mean_last + noise[-1] * sd, rtol=0, atol=1e-9)
    Si = np.linalg.inv(trust)
    radii = [float(np.sqrt(st @ Si @ st)) for st in np.diff(np.asarray(path), axis=0)]
    assert max(radii) <= PUBLIC_TRUST_RADIUS * (1 + 1e-9)
    if binds:
        assert radii[0] == pytest.approx(PUBLIC_TRUST_RADIUS, rel=1e-9)
    else:
        assert max(radii) < 0.5 * PUBLIC_TRUST_RADIUS
    # each step, recomputed: the noise-aware step from the stage's released gradient with the public J there and
    # the prior in phi units (mean / s, precision (s / sd)^2), held within the radius
    from dp_infer.model.score_release import noise_aware_step

    for k in range(len(path) - 1):
        sd_k = 2.0 * C / (n * parts[k]["mu"])
        g = clipped_scores(nll, X, y, path[k], clip_norm=C).mean(axis=0) + noise[k] * sd_k
        step = noise_aware_step(Public()(path[k]), g, sd_k, path[k], PRIOR_MEAN / S, (S / PRIOR_SD) ** 2)
        r = float(np.sqrt(step @ Si @ step))
        np.testing.assert_allclose(path[k + 1], path[k] - step * min(1.0, PUBLIC_TRUST_RADIUS / r), rtol=0, atol=1e-8)


# ------------------------------------------------------------------------------------------- the share
@pytest.mark.parametrize("share", [0, 0.0, 0.5, 0.999, np.float32(0.25), np.int64(0)])
def test_an_interval_share_in_0_1_is_returned_as_a_float(share):
    from dp_infer.model.score_release import check_interval_share

    got = check_interval_share(share)
    assert type(got) is float and got == float(share)


@pytest.mark.parametrize("share", [-1e-9, 1.0, 1.5, float("nan"), float("inf"), True, False, "0.5", None, [0.5]])
def test_an_interval_share_outside_0_1_is_refused_naming_it_and_its_range(share):
    from dp_infer.model.score_release import check_interval_share

    with pytest.raises(ValueError, match=r"^interval_share must be a number in \[0, 1\) \(the share of the run's GDP "
                                         r"mu\^2 for the interval release; 0: none\), got "):
        check_interval_share(share)


def test_with_the_fisher_preconditioner_the_two_shares_must_sum_below_1():
    from dp_infer.model.score_release import check_interval_share

    assert check_interval_share(0.5, precond_share=0.4) == 0.5
    assert check_interval_share(0.0, precond_share=0.99) == 0.0
    for share, pre in ((0.6, 0.4), (0.7, 0.4), (0.5, 0.5)):
        with pytest.raises(ValueError, match=r"^interval_share must lie in \[0, 1 - precond_share\) = \[0, "
                                             rf"{1 - pre:g}\) with preconditioner='fisher' "
                                             rf"\(precond_share = {pre:g}\), got {share!r}$"):
            check_interval_share(share, precond_share=pre)
