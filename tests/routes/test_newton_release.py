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
    from dp_infer.routes.public_rows import row_weights
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
    with np.errstate(divide="raise", invalid="raise"):  # and the zero row is never divided by
        assert row_weights(X @ C, 0.7, 1)[5] == row_weights(X @ C, 0.7, 2)[5] == 1.0
    # the default power is the private release's square
    np.testing.assert_array_equal(row_weights(X @ C, 0.7), w2)
    with pytest.raises(ValueError, match="power must be 1 or 2"):
        row_weights(X @ C, 0.7, 3)


def test_the_envelope_weights_bound_every_label_and_keep_up_to_twice_an_uncertain_row():
    # the public release divides ||C^T x|| by the logistic link's largest |s - y| over the labels, max(s, 1 - s) at
    # the stage's point: the weighted gradient stays within G rho for BOTH labels of every adversarial row at every
    # point, and a row at s = 1/2 keeps twice the envelope-free weight. Huber declares no envelope (r = 1)
    from dp_infer.routes.public_rows import link_envelope, row_weights

    loss = losses.logistic(row_norm=1.0)
    z = np.array([-40.0, -2.0, 0.0, 0.7, 40.0])
    np.testing.assert_allclose(link_envelope(loss, z), np.maximum(1 / (1 + np.exp(-z)), 1 / (1 + np.exp(z))),
                               rtol=1e-12)
    assert link_envelope(losses.huber(1.0, row_norm=1.0), z) is None
    C, X, _ = _adversarial_rows(loss)
    XC = X @ C
    for rho in (0.01, 0.7, 5.0):
        for theta in (np.zeros(3), np.array([50.0, -50.0, 50.0]), np.array([0.03, 2.0, -9.0])):
            w = row_weights(XC, rho, 1, link_envelope(loss, X @ theta))
            s = 1 / (1 + np.exp(-X @ theta))
            for label in (0.0, 1.0):
                assert np.all(np.abs(w * (s - label)) * np.linalg.norm(XC, axis=1) <= rho * (1 + 1e-12))
    w_env = row_weights(XC, 0.7, 1, link_envelope(loss, np.zeros(6)))
    np.testing.assert_allclose(w_env[0], 2 * row_weights(XC, 0.7, 1)[0], rtol=1e-12)


def test_the_envelope_is_read_in_units_of_the_declared_bound_and_one_outside_it_is_refused():
    # r = envelope / G: a loss declaring G = 2 with the logistic envelope reads half of it; an envelope above G (it
    # would let a row's weighted gradient exceed G rho) or at 0 (a weight of infinity) is refused, not used
    import dataclasses

    from dp_infer.routes.public_rows import link_envelope

    loss = losses.logistic(row_norm=1.0)
    twice = dataclasses.replace(loss, constants=dataclasses.replace(loss.constants, link_derivative_bound=2.0))
    z = np.array([-3.0, 0.0, 0.4, 12.0])
    np.testing.assert_allclose(link_envelope(twice, z), 0.5 * link_envelope(loss, z), rtol=1e-12)
    seen = []

    def at_bound(z):  # rounding's allowance: r up to 1 + 1e-12 is read as 1; the envelope gets float64 scores
        seen.append(np.asarray(z).dtype)
        return np.full(np.shape(z), 1.0 + 1e-12)

    on_edge = dataclasses.replace(loss, behaviour=dataclasses.replace(loss.behaviour, link_derivative_envelope=at_bound))
    np.testing.assert_array_equal(link_envelope(on_edge, jax.numpy.asarray(z, dtype=jax.numpy.float32)), 1.0)
    assert seen == [np.float64]
    for bad in (lambda z: np.full(np.shape(z), 1.5), lambda z: np.zeros(np.shape(z))):
        broken = dataclasses.replace(loss, behaviour=dataclasses.replace(loss.behaviour, link_derivative_envelope=bad))
        with pytest.raises(ValueError, match=r"link_derivative_envelope must lie in \(0, G = 1\.0\]"):  # G, not kappa
            link_envelope(broken, z)


def test_neighbouring_rows_move_the_enveloped_public_gradient_by_at_most_its_sensitivity(monkeypatch):
    # one public stage (the schedule patched), the same key: the noise cancels, so the two releases' gradients differ
    # by the weighted mean's change alone, which replacing one row by an adversarial one (huge leverage, either
    # label) must keep within 2 G rho / n; the release records that its weights used the envelope
    import dp_infer.routes.newton_release as nr

    monkeypatch.setattr(nr, "PUBLIC_SCHEDULE", ((("gradient", 1.0),),))
    loss = losses.logistic(row_norm=1.0)
    X, y = _rows(n=400)
    C, Xa, ya = _adversarial_rows(loss)
    Xp = _rows(n=300, seed=1)[0]
    rho, point = 0.3, np.array([0.2, -0.1, 0.05])
    kw = dict(point=point, chol=C, rho=rho, mu=2.0, key=jax.random.key(5), trust_covariance=np.eye(3) * 1e-6,
              X_public=Xp)
    base = release_newton_statistics(loss, X, y, **kw)
    assert base.weight_envelope is True and base.to_dict()["weight_envelope"] is True
    gaps = []
    for i in range(len(ya)):
        for label in (0.0, 1.0):
            X2, y2 = X.copy(), y.copy()
            X2[7], y2[7] = Xa[i], label
            other = release_newton_statistics(loss, X2, y2, **kw)
            gaps.append(float(np.linalg.norm(np.asarray(other.gradient) - np.asarray(base.gradient))))
    assert max(gaps) <= 2 * rho / len(X) * (1 + 1e-6)
    assert max(gaps) > 0.5 * 2 * rho / len(X)  # the worst neighbour comes close: the bound is not loose by design


def test_a_loss_whose_declared_envelope_understates_its_link_is_still_held_to_its_sensitivity(monkeypatch):
    # the envelope is the loss's declaration; a wrong one (here 0.05 for every row, where |s - y| reaches 1) would let
    # a row weigh 20x too much. The backstop clips each weighted gradient row to G rho, so replacing one row still
    # moves the released gradient by at most 2 G rho / n, and the worst neighbour reaches more than half of it
    import dataclasses

    import dp_infer.routes.newton_release as nr

    monkeypatch.setattr(nr, "PUBLIC_SCHEDULE", ((("gradient", 1.0),),))
    honest = losses.logistic(row_norm=1.0)
    loss = dataclasses.replace(honest, behaviour=dataclasses.replace(
        honest.behaviour, link_derivative_envelope=lambda z: np.full(np.shape(z), 0.05)))
    X, y = _rows(n=400)
    C, Xa, ya = _adversarial_rows(loss)
    Xp = _rows(n=300, seed=1)[0]
    rho = 0.3
    kw = dict(point=np.array([0.2, -0.1, 0.05]), chol=C, rho=rho, mu=2.0, key=jax.random.key(5),
              trust_covariance=np.eye(3) * 1e-6, X_public=Xp)
    base = release_newton_statistics(loss, X, y, **kw)
    gaps = []
    for i in range(len(ya)):
        for label in (0.0, 1.0):
            X2, y2 = X.copy(), y.copy()
            X2[7], y2[7] = Xa[i], label
            gaps.append(float(np.linalg.norm(np.asarray(release_newton_statistics(loss, X2, y2, **kw).gradient)
                                             - np.asarray(base.gradient))))
    assert 0.5 * 2 * rho / len(X) < max(gaps) <= 2 * rho / len(X) * (1 + 1e-6)


def test_the_private_release_keeps_its_squared_weights_free_of_the_envelope():
    # the private release's curvature rows are bounded through w ||C^T x||^2 <= rho^2: its weights must not divide by
    # the envelope (that would let a row's curvature exceed kappa rho^2). Same key, same rows: the release of a
    # logistic loss equals the one of the same loss declaring no envelope, and records weight_envelope False
    import dataclasses

    loss = losses.logistic(row_norm=1.0)
    plain = dataclasses.replace(loss, behaviour=dataclasses.replace(loss.behaviour, link_derivative_envelope=None))
    X, y = _rows(n=400)
    C, _, _ = _adversarial_rows(loss)
    kw = dict(point=np.array([0.4, -0.3, 0.2]), chol=C, rho=0.3, mu=2.0, key=jax.random.key(4),
              trust_covariance=np.eye(3))
    a, b = release_newton_statistics(loss, X, y, **kw), release_newton_statistics(plain, X, y, **kw)
    assert a.weight_envelope is False
    np.testing.assert_array_equal(a.gradient, b.gradient)
    np.testing.assert_array_equal(a.curvature, b.curvature)
    np.testing.assert_array_equal(a.path[-1], b.path[-1])


def test_each_public_stage_weighs_the_rows_by_the_envelope_at_that_stage_point():
    # the default public schedule (several stages), noise sd ~1e-9 (mu 1e6): the last released gradient
    # is the mean of w (s - y) C^T x at the path's last point, the weights min(1, rho / (max(s, 1 - s) ||C^T x||))
    # with s at that point too, not at the start; the two oracles differ here by far more than the noise
    from dp_infer.routes.newton_release import PUBLIC_SCHEDULE

    loss = losses.logistic(row_norm=1.0)
    X, y = _rows(n=2000, seed=3)
    C = np.diag([3.0, 3.0, 3.0])
    rel = release_newton_statistics(loss, X, y, point=np.array([-3.0, 3.0, -3.0]), chol=C, rho=0.5, mu=1e6,
                                    key=jax.random.key(2), trust_covariance=np.eye(3) * 4.0, X_public=X)
    assert len(PUBLIC_SCHEDULE) > 1 and len(rel.path) == len(PUBLIC_SCHEDULE)
    XC = X @ C

    def mean_gradient(at):
        s_at = 1 / (1 + np.exp(-X @ at))
        w = np.minimum(1.0, 0.5 / (np.maximum(s_at, 1 - s_at) * np.linalg.norm(XC, axis=1)))
        s_last = 1 / (1 + np.exp(-X @ np.asarray(rel.path[-1])))
        return (XC * (w * (s_last - y))[:, None]).mean(axis=0)

    want, stale = mean_gradient(np.asarray(rel.path[-1])), mean_gradient(np.asarray(rel.path[0]))
    np.testing.assert_allclose(rel.gradient, want, atol=1e-6)
    assert np.max(np.abs(want - stale)) > 1e-4  # 100x the tolerance above


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
