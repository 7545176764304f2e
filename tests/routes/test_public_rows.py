"""What the public feature rows say about the interval release (dp_infer.routes.public_rows), before anything is
charged: the public curvature and model-based J, the whitening metric, the weights' radius and the predicted width
against closed forms and numpy oracles; the intervals' width forecast against a closed form on a design where every
row has the same leverage, and as the figure the plan and forecast_posterior state."""

import math

import numpy as np
import pytest

from dp_infer import losses
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.routes.forecast import forecast_posterior
from dp_infer.routes.newton_release import (PUBLIC_INTERVAL_SHARE, RHO_GRID, interval_width_forecast,
                                           last_gradient_mu, newton_event)
from dp_infer.routes.posterior import plan_posterior
from dp_infer.routes.public_rows import (predicted_width_ratio, public_curvature, public_curvature_terms,
                                         public_interval_width_forecast, public_release_design, public_release_metric)

D = 4


def _balanced(m: int = 4000) -> np.ndarray:
    """Rows ``+-sqrt(d) e_j``, every level and sign equally often: second moment I, and every row the same
    ``||C^T x||`` in the public metric."""
    j = np.arange(m) % D
    sign = np.where((np.arange(m) // D) % 2 == 0, 1.0, -1.0)
    X = np.zeros((m, D))
    X[np.arange(m), j] = sign * math.sqrt(D)
    return X


def test_on_equal_leverage_the_forecast_is_one_plus_4d_over_n_mu_squared():
    # logistic at theta = 0 (the prior's centre): phi'' = 1/4 and the envelope r = max(s, 1 - s) = 1/2 on every
    # row. The metric whitens H = I / 4 (the prior's 1e-9 aside): C = 2 I, ||C^T x||^2 = 4 d for every row. A
    # radius rho <= r ||C^T x|| = sqrt(d) gives every row the weight w = rho / sqrt(d), so H_w = w I and
    # J_w = w^2 I in psi; the last gradient's noise sd_g = 2 rho / (n mu_g) makes the data's variance
    # (w^2 / n + sd_g^2) / w^2 against 1 / n: width^2 = 1 + 4 d / (n mu_g^2) for every such rho (larger radii are
    # wider), mu_g the last gradient's share of the release (PUBLIC_SCHEDULE)
    loss = losses.logistic(row_norm=math.sqrt(D))
    n, mu_int = 5000, 0.25
    mu_g = last_gradient_mu(mu_int, n=n)
    assert mu_g == pytest.approx(math.sqrt(0.75) * mu_int, rel=1e-12)  # PUBLIC_SCHEDULE's last share, 0.75
    assert mu_g == newton_event(mu_int, n=n, curvature="public").metadata["parts"][-1]["mu"]  # the charged part
    got = public_interval_width_forecast(loss, _balanced(), 1e-9, n, mu_int)
    assert got == pytest.approx(math.sqrt(1 + 4 * D / (n * mu_g ** 2)), rel=1e-6)
    # the closed form spreads the rows evenly at the planner's typical curvature kappa / 2 and no envelope: it
    # says sqrt(1 + 32 d / (n mu_g^2)) here, 8x the noise share
    spread = interval_width_forecast(n, D, mu_int, typical_curvature=0.125, share=1.0, curvature="public")
    assert spread == pytest.approx(math.sqrt(1 + 32 * D / (n * mu_g ** 2)), rel=1e-12)
    assert got < spread


def test_at_a_point_where_the_rows_are_confident_the_forecast_is_wider():
    # away from 0 a logistic row's curvature s(1 - s) falls faster than its envelope: less information per unit of
    # the weights' radius, so the same release is wider against the non-private posterior
    loss = losses.logistic(row_norm=math.sqrt(D))
    at0 = public_interval_width_forecast(loss, _balanced(), 0.01, 5000, 0.25)
    far = public_interval_width_forecast(loss, _balanced(), 0.01, 5000, 0.25, point=np.full(D, 1.5))
    assert far > 1.2 * at0


@pytest.mark.parametrize("bad", [None, 0.0, -1.0, float("nan"), np.ones(D + 1), "abc", [0.01, "x", 1.0, 1.0]])
def test_a_bad_prior_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="prior_precision must be a number or 4 numbers in"):
        public_interval_width_forecast(losses.logistic(row_norm=2.0), _balanced(40), bad, 5000, 0.25)


def test_forecast_posterior_reads_the_width_from_the_public_rows():
    loss = losses.logistic(row_norm=math.sqrt(D))
    n, Xp = 5000, _balanced()
    fc = forecast_posterior(loss, n, D, eps=1.0, delta=1e-5, prior_precision=0.01, X_public=Xp,
                            interval_curvature="public")
    mu_int = math.sqrt(PUBLIC_INTERVAL_SHARE) * gdp_mu(1.0, 1e-5)
    assert fc.interval_width == pytest.approx(public_interval_width_forecast(loss, Xp, 0.01, n, mu_int), rel=1e-9)
    assert f"{fc.interval_width:.2g}x" in fc.intervals and "read from them" in fc.intervals
    # a figure the caller already read is taken as given (the demo passes the one it printed)
    again = forecast_posterior(loss, n, D, eps=1.0, delta=1e-5, prior_precision=0.01, X_public=Xp,
                               interval_curvature="public", public_interval_width=1.37)
    assert again.interval_width == 1.37
    # without public rows the closed form for a typical coordinate
    private = forecast_posterior(loss, n, D, eps=1.0, delta=1e-5, prior_precision=0.01)
    assert "read from them" not in private.intervals


def test_the_plan_notes_the_width_it_is_given_or_the_closed_form_and_refuses_a_bad_one():
    loss = losses.logistic(row_norm=1.0)
    kw = dict(eps=1.0, delta=1e-5, prior_precision=0.01, interval_share=PUBLIC_INTERVAL_SHARE,
              interval_curvature="public")

    def note(plan):
        (line,) = [t for t in plan.notes if t.startswith("interval release with public curvature")]
        return line

    given = note(plan_posterior(loss, 5000, D, public_interval_width=1.234, **kw))
    assert "about 1.2x" in given and "read from the public rows" in given
    assert "spread evenly" in note(plan_posterior(loss, 5000, D, **kw))
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="public_interval_width"):
            plan_posterior(loss, 5000, D, public_interval_width=bad, **kw)


def test_public_curvature_is_the_weighted_model_curvature_and_model_based_score_moment():
    # an independent closed form for the logistic link: H = mean w s(1-s) C'x x'C (+ l2), J = mean w^2 s(1-s) C'x x'C
    rng = np.random.default_rng(0)
    Xp = rng.normal(size=(400, 3)) * np.array([1.0, 0.3, 2.0])
    C = np.array([[1.5, 0, 0], [0.2, 0.7, 0], [0.1, -0.3, 0.4]])
    theta = np.array([0.5, -1.0, 0.2])
    rho = 0.8
    loss = losses.logistic(row_norm=10.0)
    H, J = public_curvature(loss, Xp, theta, C, rho)
    XC = Xp @ C
    s = 1 / (1 + np.exp(-Xp @ theta))
    # the public release's first power (PUBLIC_WEIGHT_POWER), each norm times the logistic link's largest
    # |s - y| over the labels, max(s, 1 - s)
    w = np.minimum(1.0, rho / (np.maximum(s, 1 - s) * np.linalg.norm(XC, axis=1)))
    v = s * (1 - s)
    np.testing.assert_allclose(H, (XC * (w * v)[:, None]).T @ XC / 400, rtol=2e-5)
    np.testing.assert_allclose(J, (XC * (w * w * v)[:, None]).T @ XC / 400, rtol=2e-5)
    assert np.any(w < 1)  # the weights bind on some rows, so the test tells w from w^2 and from the square's weights
    # ... and the envelope moves some binding weights (the test tells them from min(1, rho / ||C^T x||))
    assert np.max(w / np.minimum(1.0, rho / np.linalg.norm(XC, axis=1))) > 1.2


def test_the_public_release_metric_whitens_the_public_curvature_and_sets_rho_from_public_rows():
    # closed form: C C^T = (mean s(1-s) x x^T + Lambda / n)^-1 at the point, rho = root of the public rows' mean
    # ||C^T x||^2 (RHO_FACTOR 1): so the weighted curvature in psi is about I where few rows are down-weighted
    rng = np.random.default_rng(4)
    Xp = rng.normal(size=(3000, 4)) * np.array([1.0, 0.2, 0.5, 2.0])
    point = np.array([0.3, -1.0, 0.5, 0.1])
    lam = np.array([0.01, 0.02, 0.01, 0.5])
    loss = losses.logistic(row_norm=10.0)
    C, rho = public_release_metric(loss, Xp, point, lam, 1000)
    s = 1 / (1 + np.exp(-Xp @ point))
    A = (Xp * (s * (1 - s))[:, None]).T @ Xp / 3000 + np.diag(lam) / 1000
    np.testing.assert_allclose(C @ C.T, np.linalg.inv(A), rtol=1e-4)
    XC = Xp @ C
    assert rho == pytest.approx(math.sqrt(np.mean(np.sum(XC * XC, axis=1))), rel=1e-12)
    with pytest.raises(ValueError, match="prior_precision must be positive for a public-curvature release "
                                         r"\(the metric needs it\)"):
        public_release_metric(loss, np.zeros((10, 4)), point, 0.0, 1000)


def test_the_losss_l2_term_enters_the_public_curvature_and_the_metric_but_not_j():
    # H = mean w s(1-s) C'x x'C + l2 C'C, J without the L2 term (its gradient has no sampling spread); the metric
    # whitens the unweighted H + l2 I + Lambda / n
    rng = np.random.default_rng(3)
    Xp = rng.normal(size=(500, 3)) * np.array([1.0, 0.5, 2.0])
    C = np.array([[1.2, 0, 0], [0.3, 0.8, 0], [-0.2, 0.1, 0.5]])
    theta, rho, l2 = np.array([0.4, -0.7, 0.3]), 0.6, 0.8
    H, J = public_curvature(losses.logistic(row_norm=10.0, l2=l2), Xp, theta, C, rho)
    H0, J0 = public_curvature(losses.logistic(row_norm=10.0), Xp, theta, C, rho)
    np.testing.assert_allclose(H, H0 + l2 * C.T @ C, rtol=1e-10)
    np.testing.assert_allclose(J, J0, rtol=1e-12)
    lam = np.array([0.01, 0.02, 0.05])
    design = public_release_design(losses.logistic(row_norm=10.0, l2=l2), Xp, theta, lam, 1000)
    s = 1 / (1 + np.exp(-Xp @ theta))
    A = (Xp * (s * (1 - s))[:, None]).T @ Xp / 500 + l2 * np.eye(3) + np.diag(lam) / 1000
    np.testing.assert_allclose(design.chol @ design.chol.T, np.linalg.inv(A), rtol=1e-8)


def test_the_curvature_terms_are_computed_in_float64():
    # phi''(z) = s (1 - s) to double precision, whatever JAX's default precision (float32 rounding errs ~1e-7)
    z = np.array([1e-4, 0.1, 1.7, -3.3, 7.1])  # (past ~10 JAX's own derivative cancels in float64 too)
    e = np.exp(-np.abs(z))  # s (1 - s) = e / (1 + e)^2 without the cancellation of 1 - s at large z
    got = public_curvature_terms(losses.logistic(row_norm=1.0), z)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, e / (1 + e) ** 2, rtol=1e-12)


def test_the_predicted_width_is_the_closed_form_where_every_row_keeps_weight_one():
    # logistic at theta = 0: phi'' = 1/4 on every row, so in the metric whitening the public curvature H_psi = I
    # (up to the prior's 1e-9 share); with rho at the largest row norm every weight is 1 and J_psi = H_psi: the
    # data's precision per direction is 1 / (1/n + sd_g^2) against n, so the ratio is sqrt(1 + n sd_g^2),
    # sd_g = 2 G rho / (n mu) with G = 1
    rng = np.random.default_rng(8)
    Xp = rng.normal(size=(4000, 4))
    loss = losses.logistic(row_norm=10.0)
    n, mu = 5000, 0.3
    lam = np.full(4, 1e-9)
    C, _ = public_release_metric(loss, Xp, np.zeros(4), lam, n)
    rho = float(np.max(np.linalg.norm(Xp @ C, axis=1))) * 1.0001
    sd_g = 2 * rho / (n * mu)
    assert predicted_width_ratio(loss, Xp, np.zeros(4), C, rho, lam, n, mu) == pytest.approx(
        math.sqrt(1 + n * sd_g ** 2), rel=1e-6)


def test_the_predicted_width_counts_the_losss_l2_term_in_the_curvature_not_in_the_scores():
    # logistic with l2 at theta = 0, every weight 1: the estimate's curvature and the non-private reference's are
    # H = C^T (S / 4 + l2 I) C (S = the public rows' mean x x^T), the scores' second moment J = C^T (S / 4) C (the
    # L2 term's gradient has no sampling variance); the ratio is the median of
    # sqrt(diag(C Q^-1 C^T)) / sqrt(diag(C (n H + L)^-1 C^T)), Q = H (J / n + sd_g^2 I)^-1 H + L, L = C^T Lambda C
    rng = np.random.default_rng(12)
    Xp = rng.normal(size=(3000, 4)) * np.array([1.0, 0.5, 0.2, 0.05])
    loss = losses.logistic(row_norm=10.0, l2=0.5)
    n, mu, l2 = 4000, 0.3, 0.5
    lam = np.full(4, 1e-3)
    C = np.diag([2.0, 1.0, 0.7, 0.3])
    rho = float(np.max(np.linalg.norm(Xp @ C, axis=1))) * 1.0001
    S = Xp.T @ Xp / Xp.shape[0]
    H = C.T @ (S / 4 + l2 * np.eye(4)) @ C
    J = C.T @ (S / 4) @ C
    L = C.T @ np.diag(lam) @ C
    sd_g = 2 * rho / (n * mu)
    Q = H @ np.linalg.solve(J / n + sd_g ** 2 * np.eye(4), H) + L
    ref = np.sqrt(np.diag(C @ np.linalg.inv(n * H + L) @ C.T))
    want = np.median(np.sqrt(np.diag(C @ np.linalg.inv(Q) @ C.T)) / ref)
    got = predicted_width_ratio(loss, Xp, np.zeros(4), C, rho, lam, n, mu)
    assert got == pytest.approx(want, rel=1e-9)
    assert abs(want / predicted_width_ratio(losses.logistic(row_norm=10.0), Xp, np.zeros(4), C, rho, lam, n, mu)
               - 1) > 0.05  # the L2 term moves it here


def test_the_predicted_width_weighs_the_rows_by_the_envelope_at_the_point():
    # logistic at a point where s varies and rho binds: the release's weights min(1, rho / (max(s, 1 - s) ||C^T x||))
    # enter the prediction; H_w = C^T mean(w s (1 - s) x x^T) C, J_w with w^2, Q = H_w (J_w / n + sd_g^2 I)^-1 H_w + L
    # against (n H_1 + L); without the envelope (r = 1) the prediction moves by more than 5% here
    rng = np.random.default_rng(13)
    Xp = np.concatenate([np.ones((3000, 1)), rng.normal(size=(3000, 3))], axis=1)
    loss = losses.logistic(row_norm=10.0)
    point, n, mu = np.array([0.3, 2.0, -1.5, 0.5]), 4000, 0.3
    lam = np.full(4, 1e-3)
    C = np.diag([1.0, 0.5, 0.5, 0.8])
    XC = Xp @ C
    rho = 0.5 * float(np.median(np.linalg.norm(XC, axis=1)))
    s = 1 / (1 + np.exp(-Xp @ point))
    k = s * (1 - s)

    def oracle(r):
        w = np.minimum(1.0, rho / (r * np.linalg.norm(XC, axis=1)))
        Hw, Jw = (XC * (w * k)[:, None]).T @ XC / len(XC), (XC * (w * w * k)[:, None]).T @ XC / len(XC)
        H1 = (XC * k[:, None]).T @ XC / len(XC)
        L = C.T @ np.diag(lam) @ C
        sd_g = 2 * rho / (n * mu)
        Q = Hw @ np.linalg.solve(Jw / n + sd_g ** 2 * np.eye(4), Hw) + L
        ref = np.sqrt(np.diag(C @ np.linalg.inv(n * H1 + L) @ C.T))
        return float(np.median(np.sqrt(np.diag(C @ np.linalg.inv(Q) @ C.T)) / ref))

    got = predicted_width_ratio(loss, Xp, point, C, rho, lam, n, mu)
    assert got == pytest.approx(oracle(np.maximum(s, 1 - s)), rel=1e-6)
    assert abs(oracle(np.ones_like(s)) / got - 1) > 0.05


def test_the_predicted_width_reads_the_declared_link_bound_in_the_noise_and_the_envelope():
    # a logistic loss declaring G = 2 (a valid, loose bound on |phi'|): the last gradient's noise sd_g = 2 G rho /
    # (n mu) doubles and the envelope r = max(s, 1 - s) / G halves, so the weights min(1, rho / (r ||C^T x||)) bind
    # less; the prediction is the oracle's at both, and differs from the unit bound's
    import dataclasses

    rng = np.random.default_rng(14)
    Xp = np.concatenate([np.ones((2000, 1)), rng.normal(size=(2000, 2))], axis=1)
    loss = losses.logistic(row_norm=10.0)
    twice = dataclasses.replace(loss, constants=dataclasses.replace(loss.constants, link_derivative_bound=2.0))
    point, n, mu, lam = np.array([0.2, 1.5, -1.0]), 3000, 0.3, np.full(3, 1e-3)
    C = np.diag([1.0, 0.6, 0.7])
    XC = Xp @ C
    rho = 0.4 * float(np.median(np.linalg.norm(XC, axis=1)))
    s = 1 / (1 + np.exp(-Xp @ point))
    k = s * (1 - s)

    def oracle(G, G_noise=None):
        G_noise = G if G_noise is None else G_noise
        w = np.minimum(1.0, rho / (np.maximum(s, 1 - s) / G * np.linalg.norm(XC, axis=1)))
        Hw, Jw = (XC * (w * k)[:, None]).T @ XC / len(XC), (XC * (w * w * k)[:, None]).T @ XC / len(XC)
        H1 = (XC * k[:, None]).T @ XC / len(XC)
        L = C.T @ np.diag(lam) @ C
        sd_g = 2 * G_noise * rho / (n * mu)
        Q = Hw @ np.linalg.solve(Jw / n + sd_g ** 2 * np.eye(3), Hw) + L
        ref = np.sqrt(np.diag(C @ np.linalg.inv(n * H1 + L) @ C.T))
        return float(np.median(np.sqrt(np.diag(C @ np.linalg.inv(Q) @ C.T)) / ref))

    got = predicted_width_ratio(twice, Xp, point, C, rho, lam, n, mu)
    assert got == pytest.approx(oracle(2.0), rel=1e-6)
    assert predicted_width_ratio(loss, Xp, point, C, rho, lam, n, mu) == pytest.approx(oracle(1.0), rel=1e-6)
    # each half of the bound's reading matters here: the noise's G alone (or the envelope's alone) moves it by > 5%
    assert abs(got / oracle(2.0, G_noise=1.0) - 1) > 0.05 and abs(got / oracle(1.0, G_noise=2.0) - 1) > 0.05


def test_the_radius_is_the_grids_best_predicted_width():
    # a rare level (0.5% of rows) beside dense columns: the picked radius is the grid's argmin of the predicted
    # width, which varies over the grid by more than 10% here
    rng = np.random.default_rng(9)
    m = 6000
    Xp = np.concatenate([np.ones((m, 1)), rng.normal(0, 0.5, (m, 3)), (rng.uniform(size=(m, 1)) < 0.005)], axis=1)
    loss = losses.logistic(row_norm=10.0)
    point, lam, n, mu = np.array([-1.0, 0.5, 0.0, -0.5, 1.0]), np.full(5, 0.01), 20000, 0.2
    C, rho = public_release_metric(loss, Xp, point, lam, n, mu_last=mu)
    C1, rho0 = public_release_metric(loss, Xp, point, lam, n)
    np.testing.assert_allclose(C, C1)
    widths = [predicted_width_ratio(loss, Xp, point, C, f * rho0, lam, n, mu) for f in RHO_GRID]
    assert rho == pytest.approx(RHO_GRID[int(np.argmin(widths))] * rho0, rel=1e-12)
    assert max(widths) > 1.1 * min(widths) and rho != rho0  # the choice matters here, and moved off factor 1
    design = public_release_design(loss, Xp, point, lam, n, mu_last=mu)  # keeps the chosen radius's width
    assert design.rho == rho and design.predicted_width == pytest.approx(min(widths), rel=1e-12)
    np.testing.assert_allclose(design.chol, C)
    assert public_release_design(loss, Xp, point, lam, n).predicted_width is None  # no last mu: no width


def test_float32_inputs_give_the_float64_figures():
    # public rows, metric, point and prior handed over in float32 (JAX's default) are read as float64: the same
    # figures as the float64 copies of the same numbers, to double precision
    rng = np.random.default_rng(21)
    X64 = rng.normal(size=(800, 3)).astype(np.float32).astype(np.float64)
    C64 = np.array([[1.3, 0, 0], [0.2, 0.9, 0], [-0.1, 0.3, 0.6]], dtype=np.float32).astype(np.float64)
    p64 = np.array([0.3, -0.8, 0.45], dtype=np.float32).astype(np.float64)
    lam64 = np.array([0.01, 0.03, 0.2], dtype=np.float32).astype(np.float64)
    f32 = [a.astype(np.float32) for a in (X64, C64, p64, lam64)]
    loss = losses.logistic(row_norm=10.0, l2=0.1)
    for a, b in zip(public_curvature(loss, f32[0], f32[2], f32[1], 0.7), public_curvature(loss, X64, p64, C64, 0.7)):
        assert a.dtype == np.float64
        np.testing.assert_allclose(a, b, rtol=1e-13)
    assert predicted_width_ratio(loss, f32[0], f32[2], f32[1], 0.7, f32[3], 2000, 0.3) == pytest.approx(
        predicted_width_ratio(loss, X64, p64, C64, 0.7, lam64, 2000, 0.3), rel=1e-13)
    got, want = (public_release_design(loss, X, p, lam, 2000, mu_last=0.3) for X, p, lam in
                 ((f32[0], f32[2], f32[3]), (X64, p64, lam64)))
    np.testing.assert_allclose(got.chol, want.chol, rtol=1e-13)
    assert got.rho == pytest.approx(want.rho, rel=1e-13)
    assert got.predicted_width == pytest.approx(want.predicted_width, rel=1e-13)
