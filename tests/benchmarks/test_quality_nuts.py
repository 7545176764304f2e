"""The posterior-quality benchmark's NUTS comparison (benchmarks/quality_compare.py, quality_nuts.py):
the agreement statistics and their noise floor on draws with known answers, and the fixed-mass
NUTS reference on a Gaussian target whose mean and covariance are known."""

import math
from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.quality_compare import compare, noise_floor
from benchmarks.quality_coverage import logistic_data, true_theta
from benchmarks.quality_nuts import _potential, laplace_reference, nuts_fixed_mass

D = 8


def _iid(rng, shift=0.0, scale=1.0, chains=4, draws=1000):
    mean = np.linspace(-1.0, 1.0, D)
    sd = np.linspace(0.5, 2.0, D)
    return mean + sd * (shift + scale * rng.normal(size=(chains, draws, D)))


# ------------------------------------------------------------------ noise floor


def test_noise_floor_closed_forms():
    # one coordinate: the two-sided 95% normal quantile; d equal se: se * Phi^-1((1 + 0.95^(1/d)) / 2)
    assert noise_floor([0.2]) == pytest.approx(0.2 * NormalDist().inv_cdf(0.975), rel=1e-8)
    for d in (2, 10, 108):
        z = NormalDist().inv_cdf((1 + 0.95 ** (1 / d)) / 2)
        assert noise_floor(np.full(d, 0.03)) == pytest.approx(0.03 * z, rel=1e-8)


def test_noise_floor_against_simulation():
    # unequal se: the fraction of simulated max_j |N(0, se_j^2)| below the floor must be 0.95 up to
    # its binomial MC error sqrt(0.95 0.05 / N) = 0.0007 at N = 100,000 (tolerance 4 of them)
    se = np.linspace(0.01, 0.05, 30)
    N = 100_000
    m = np.abs(np.random.default_rng(0).normal(size=(N, se.size)) * se).max(axis=1)
    assert np.mean(m <= noise_floor(se)) == pytest.approx(0.95, abs=4 * math.sqrt(0.95 * 0.05 / N))


def test_noise_floor_rejects_bad_se():
    for bad in ([], [0.0], [-1.0], [np.nan]):
        with pytest.raises(ValueError):
            noise_floor(bad)


# ------------------------------------------------------------------ compare on iid draws


def test_same_law_is_met_and_below_the_floor_most_of_the_time():
    # 40 replicate pairs of iid draws of the same law (fixed seed). The floor is the 95% quantile of
    # the max under MC noise alone: the expected fraction below it is 0.95 (ESS is estimated, which
    # adds a little spread), binomial sd sqrt(0.95 0.05 / 40) = 0.034; we ask >= 0.8 (4.4 sd). The
    # verdict widens the bar by 3 se on top of 0.1 sd, so it should essentially always be met.
    rng = np.random.default_rng(1)
    below, met = [], []
    for _ in range(40):
        c = compare(_iid(rng), _iid(rng))
        below.append(c["max_abs_mean_diff_over_sd"] <= c["noise_floor_max_abs_mean_diff"])
        met.append(c["met"])
        assert c["median_mc_se_over_sd"] == pytest.approx(math.sqrt(2 / 4000), rel=0.15)
    assert np.mean(below) >= 0.8
    assert all(met)


def test_a_shift_of_03_sd_is_not_met():
    # se = sqrt(2 / 4000) = 0.022 sd; bar 0.1 + 3 se = 0.167 < 0.3 by 6 se
    rng = np.random.default_rng(2)
    ref = _iid(rng)
    ours = _iid(rng)
    ours[..., 3] += 0.3 * np.linspace(0.5, 2.0, D)[3]
    c = compare(ours, ref)
    assert not c["mean_met"] and not c["met"]
    assert c["coords_mean_beyond_bar_plus_3se"] == 1
    assert c["argmax_mean_diff"] == 3
    assert c["max_abs_mean_diff_over_sd"] == pytest.approx(0.3, abs=5 * 0.022)
    assert c["sd_met"]


def test_doubled_sd_is_not_met():
    # ratio 2 against a band [0.9, 1.1] widened by 3 se_r, se_r = 2 sqrt(1/4000) = 0.03
    rng = np.random.default_rng(3)
    c = compare(_iid(rng, scale=2.0), _iid(rng))
    assert not c["sd_met"] and not c["met"]
    assert c["coords_sd_ratio_outside_band_3se"] == D
    assert c["sd_ratio_min"] == pytest.approx(2.0, abs=0.15)
    assert c["median_sd_ratio_mc_se"] == pytest.approx(2 * math.sqrt(1 / 4000), rel=0.2)


def test_compare_rejects_mismatched_shapes():
    with pytest.raises(ValueError):
        compare(np.zeros((2, 10, 3)), np.zeros((2, 10, 4)))


# ------------------------------------------------------------------ the NUTS reference


def test_nuts_with_fixed_mass_on_a_known_gaussian():
    # U = 1/2 (theta - m)' A (theta - m): the mass matrix is its exact covariance A^-1, chains from
    # m. Mean: 4 MC se (sd / sqrt(ESS)); variances: relative se sqrt(2 / ESS), 4 of them;
    # correlation 0.8: se (1 - rho^2) / sqrt(ESS), 4 of them.
    m = np.array([1.0, -2.0])
    cov = np.array([[4.0, 1.6 * 0.8], [1.6 * 0.8, 0.64]])  # sds 2 and 0.8, correlation 0.8
    A = jnp.asarray(np.linalg.inv(cov), jnp.float32)
    mj = jnp.asarray(m, jnp.float32)

    def U(th):
        r = th - mj
        return 0.5 * r @ A @ r

    th, secs, grads, step = nuts_fixed_mass(U, m, cov, warmup=200, draws=1000, chains=2, key=jax.random.PRNGKey(0))
    assert th.shape == (2, 1000, 2) and grads > 0 and step > 0
    flat = th.reshape(-1, 2)
    from benchmarks.quality_compare import ess

    e = ess(th).min()
    assert e > 500  # whitened target: NUTS draws are nearly independent
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(flat.mean(0) - m), 4 * sd / math.sqrt(e))
    np.testing.assert_allclose(flat.var(0), np.diag(cov), rtol=4 * math.sqrt(2 / e))
    rho = np.corrcoef(flat.T)[0, 1]
    assert rho == pytest.approx(0.8, abs=4 * (1 - 0.64) / math.sqrt(e))


def test_laplace_reference_is_the_map_and_inverse_hessian_of_the_tempered_potential():
    # oracle: JAX autodiff of the float32 potential the samplers use (gradient ~ 0 at the MAP,
    # Hessian^-1 = the returned covariance), at a tempered beta << n
    X, y = logistic_data(2000, true_theta(4), 0)
    beta, lam = 40.0, 0.5
    th, cov = laplace_reference(X, y, beta, lam)
    U = _potential(X, y, beta, lam)
    t = jnp.asarray(th, jnp.float32)
    g = np.asarray(jax.grad(U)(t))
    H = np.asarray(jax.hessian(U)(t), dtype=np.float64)
    assert np.max(np.abs(g)) < 1e-4 * np.max(np.abs(np.diag(H)))
    np.testing.assert_allclose(np.linalg.inv(H), cov, rtol=1e-3, atol=1e-6 * np.max(np.abs(cov)))
