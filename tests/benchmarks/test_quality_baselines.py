"""The posterior-quality benchmark's own code (benchmarks/): baselines, metrics and the batched
posterior-mode runner, each against an oracle that could disagree with it."""

import dataclasses
import math

import jax
import numpy as np
import pytest

from benchmarks.baselines import (conjugate_linear_posterior, dp_gd_metric, gdp_split, newton_laplace_posterior,
                                  reachable_basis, ssp_linear_regression)
from benchmarks.posterior_batch import plan_private, run_logistic_plans
from benchmarks.posterior_metrics import expected_calibration_error, log_loss, posterior_summary
from benchmarks.quality_coverage import logistic_data, map_laplace, true_theta
from dp_infer import losses
from dp_infer.infer.posterior import sample_posterior
from dp_infer.privacy import path as path_privacy
from dp_infer.randomness import secret_key


def _logistic(n=1500, d=3, seed=0):
    return logistic_data(n, true_theta(d), seed)


# ------------------------------------------------------------------ DP-GD


def test_gdp_split_spends_exactly_the_budget():
    mus = gdp_split(0.7, [1.0, 3.0, 0.5])
    assert math.isclose(sum(m * m for m in mus), 0.49, rel_tol=1e-12)
    assert mus[1] / mus[0] == pytest.approx(math.sqrt(3.0))


def test_matched_dp_gd_spends_langevins_privacy_per_unit_of_learning_time():
    # K chains of Langevin time t at beta: mu_path = beta Delta sqrt(K t / 2) (dp_infer.privacy.path);
    # DP-GD over learning time K beta t with the same mu: T (Delta / sigma)^2 = mu^2 by construction,
    # and its noise per unit time sigma^2 eta must equal Langevin's 2 / beta
    X, y = _logistic()
    beta, delta_s, t, K = 12.0, 2 * math.sqrt(3) / X.shape[0], 50.0, 4
    mu = path_privacy.path_mu(beta, delta_s, t, None, K)
    _, info = dp_gd_metric(X, y, key=jax.random.PRNGKey(0), chol=np.eye(3), sensitivity=delta_s, mu=mu,
                           learning_time=K * beta * t, step=0.5, prior_precision=1.0, beta=beta)
    assert info["steps"] * (delta_s / info["sigma"]) ** 2 == pytest.approx(mu ** 2, rel=1e-12)
    assert info["noise_per_unit_time"] == pytest.approx(2.0 / beta, rel=1e-12)


def test_dp_gd_without_noise_reaches_the_tempered_map():
    X, y = _logistic()
    n = X.shape[0]
    beta, lam = 50.0, 1.0
    exact, _ = map_laplace(X, y, lam * n / beta)  # argmin beta L + lam/2 |theta|^2
    C = np.linalg.cholesky(np.diag([2.0, 0.5, 1.0]))  # any fixed metric: same minimiser
    th, _ = dp_gd_metric(X, y, key=jax.random.PRNGKey(1), chol=C, sensitivity=1e-12, mu=1e6,
                         learning_time=3000.0, step=1.0, prior_precision=lam, beta=beta, burn_in=0.9)
    np.testing.assert_allclose(th, exact, atol=2e-3)


# ------------------------------------------------------------------ noise-aware Laplace


def test_laplace_posterior_without_noise_is_the_laplace_approximation():
    X, y = _logistic(n=3000)
    m, C, _ = newton_laplace_posterior(X, y, key=jax.random.PRNGKey(2), mu=1e9, prior_precision=1.0,
                                       row_norm=math.sqrt(3), steps=6, imputations=20)
    m0, C0 = map_laplace(X, y, 1.0)
    np.testing.assert_allclose(m, m0, atol=1e-4)
    np.testing.assert_allclose(C, C0, rtol=1e-3)


def test_laplace_posterior_is_noise_aware():
    # at fixed data the private mean scatters around the exact MAP by the privacy noise; the
    # reported covariance minus the sampling part must describe that scatter. 100 keys: the
    # variance estimate has relative sd sqrt(2/100) = 0.14; the bounds allow 3.5 of them (the
    # method is first order in the Newton error)
    X, y = _logistic(n=4000)
    m0, C0 = map_laplace(X, y, 1.0)
    means, priv = [], []
    for s in range(100):
        m, C, _ = newton_laplace_posterior(X, y, key=jax.random.PRNGKey(100 + s), mu=0.5, prior_precision=1.0,
                                           row_norm=math.sqrt(3), imputations=100)
        means.append(m)
        priv.append(np.diag(C - C0))
    emp = np.var(np.asarray(means) - m0, axis=0)
    claimed = np.mean(priv, axis=0)
    assert np.all(emp > 0.5 * claimed) and np.all(emp < 1.5 * claimed), (emp, claimed)


def test_reachable_basis_puts_unreachable_directions_at_the_prior():
    # intercept + a complete one-hot pair: (1, -1, -1) is orthogonal to every admissible row
    rows = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    Q = reachable_basis(rows)
    assert Q.shape == (3, 2)
    rng = np.random.default_rng(0)
    X = rows[rng.integers(0, 2, 2000)]
    y = (rng.uniform(size=2000) < np.where(X[:, 1] > 0, 0.7, 0.3)).astype(float)
    m, C, _ = newton_laplace_posterior(X, y, key=jax.random.PRNGKey(3), mu=1e9, prior_precision=0.5,
                                       row_norm=math.sqrt(2), basis=Q, imputations=10)
    v = np.array([1.0, -1.0, -1.0]) / math.sqrt(3)
    assert abs(v @ m) < 1e-8 and v @ C @ v == pytest.approx(1 / 0.5, rel=1e-6)


# ------------------------------------------------------------------ noisy sufficient statistics


def _linear(n=5000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = np.concatenate([np.ones((n, 1)), rng.uniform(-1, 1, (n, d - 1))], axis=1)
    theta = np.array([0.5, -1.0, 2.0])[:d]
    return X, X @ theta + rng.normal(size=n), theta


def test_ssp_without_noise_is_the_conjugate_posterior():
    X, y, _ = _linear()
    r = ssp_linear_regression(X, y, key=jax.random.PRNGKey(4), mu=1e12, row_norm=math.sqrt(3), label_bound=10.0,
                              prior_precision=1.0, noise_var=1.0, imputations=5)
    m0, C0 = conjugate_linear_posterior(X, y, prior_precision=1.0, noise_var=1.0)
    for m, C in ((r["mean"], r["cov"]), (r["naive_mean"], r["naive_cov"])):
        np.testing.assert_allclose(m, m0, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(C, C0, rtol=1e-5)


def test_ssp_noise_aware_covariance_describes_the_release_noise_and_naive_does_not():
    X, y, _ = _linear()
    m0, C0 = conjugate_linear_posterior(X, y, prior_precision=1.0, noise_var=1.0)
    means, naive, claimed = [], [], []
    for s in range(100):
        r = ssp_linear_regression(X, y, key=jax.random.PRNGKey(200 + s), mu=0.5, row_norm=math.sqrt(3),
                                  label_bound=10.0, prior_precision=1.0, noise_var=1.0, imputations=30)
        means.append(r["mean"])
        naive.append(r["naive_mean"])
        claimed.append(np.diag(r["cov"] - C0))
    emp = np.var(np.asarray(means) - m0, axis=0)
    claimed = np.mean(claimed, axis=0)
    assert np.all(emp > 0.5 * claimed) and np.all(emp < 1.5 * claimed), (emp, claimed)
    # the plug-in posterior claims the sampling variance only; its release noise alone is larger
    assert np.all(np.var(np.asarray(naive) - m0, axis=0) > 2 * np.diag(C0))


def test_ssp_rejects_rows_outside_the_declared_bounds():
    X, y, _ = _linear(n=50)
    with pytest.raises(ValueError, match="label_bound"):
        ssp_linear_regression(X, 100 * y, key=jax.random.PRNGKey(0), mu=1.0, row_norm=math.sqrt(3), label_bound=1.0,
                              prior_precision=1.0, noise_var=1.0)


# ------------------------------------------------------------------ metrics


def test_ece_and_log_loss_against_closed_forms():
    rng = np.random.default_rng(5)
    p = rng.uniform(size=200_000)
    y = (rng.uniform(size=p.size) < p).astype(float)
    # calibrated: ECE is the MC error only (per bin sd ~ sqrt(0.25 / 20,000) = 0.0035)
    assert expected_calibration_error(p, y) < 0.01
    # every probability pushed 0.1 toward 1 (inside the unit interval): ECE = 0.1 up to the same error
    q = np.clip(p + 0.1, 0, 1)
    assert expected_calibration_error(q[p < 0.9], y[p < 0.9]) == pytest.approx(0.1, abs=0.01)
    # constant 0.5: log loss log 2 exactly
    assert log_loss(np.full(10, 0.5), np.arange(10) % 2) == pytest.approx(math.log(2), rel=1e-12)


def test_posterior_summary_of_a_point_mass_is_the_plug_in():
    X, y = _logistic(n=500)
    th = np.array([0.3, -1.0, 0.5])
    s = posterior_summary(np.tile(th, (4, 10, 1)), X, y)
    assert s["accuracy_posterior_mean"] == pytest.approx(np.mean((X @ th > 0) == (y > 0.5)))
    p = 1 / (1 + np.exp(-X @ th))
    assert s["predictive_log_loss"] == pytest.approx(log_loss(p, y), rel=1e-9)


# ------------------------------------------------------------------ batched posterior runs


@pytest.mark.slow
def test_batched_runs_have_the_law_of_fit_posterior_and_stop_at_their_own_plan():
    X, y = _logistic(n=800, d=2, seed=3)
    loss = losses.logistic(row_norm=math.sqrt(2))
    kw = dict(eps=2.0, delta=1e-5, prior_precision=1.0, max_sq_norm=2.0)
    plan = plan_private(loss, X, key=jax.random.PRNGKey(6), ess=100, **kw)
    longer = plan_private(loss, X, key=jax.random.PRNGKey(6), ess=300, **kw)
    assert longer.num_steps > plan.num_steps
    a = run_logistic_plans([plan, plan], [(X, y), (X, y)], key=jax.random.PRNGKey(7))
    b = run_logistic_plans([plan, longer], [(X, y), (X, y)], key=jax.random.PRNGKey(7))
    np.testing.assert_array_equal(a[0], b[0])  # a longer neighbour in the batch changes nothing
    assert a[0].shape == (plan.num_chains, plan.num_steps // plan.thinning - plan.burn_in, 2)
    # same law as the library's own runner: last draws of 240 independent chains each (iid);
    # two-sample z on means and sds with sd(mean diff) = sd sqrt(2/240), sd(sd ratio) ~ sqrt(1/240)
    K = 240
    ours = run_logistic_plans([plan] * (K // plan.num_chains), [(X, y)] * (K // plan.num_chains),
                              key=jax.random.PRNGKey(8))
    ours = np.concatenate([r[:, -1] for r in ours])
    key, src = secret_key(9)
    lib = sample_posterior(loss, X, y, dataclasses.replace(plan, num_chains=K), key=key, source=src,
                           progress_bar=False).draws()[:, -1]
    sd = lib.std(axis=0)
    assert np.all(np.abs(ours.mean(0) - lib.mean(0)) <= 4 * sd * math.sqrt(2 / K))
    assert np.all(np.abs(ours.std(0) / sd - 1) <= 4 * math.sqrt(1 / K))
