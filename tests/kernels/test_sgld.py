"""Oracle tests for ``dp_infer.kernels.sgld``.

One step of Poisson-subsampled clipped SGLD (module docstring)::

    B_i ~ Bernoulli(q),  g = (1 / (q n)) sum_i B_i clip_C(grad l_i(theta)),
    theta' = Proj(theta - h beta g + sqrt(2 h) xi),  xi ~ N(0, I) independent of the B_i.

With a linear per-example loss ``l_i(theta) = <theta, x_i>`` the clipped gradients ``c_i`` do not
depend on theta, so one step from a fixed point has closed-form moments:

    E theta'   = theta - h beta (1/n) sum_i c_i
    Cov theta' = 2 h I + (h beta)^2 (1 - q) / (q n^2) sum_i c_i c_i^T

The tests compare n one-step draws with them within 5 Monte Carlo standard errors (each standard
error estimated from the draws: sd of a mean sqrt(var / n), of a covariance entry
sd((X_j - m_j)(X_k - m_k)) / sqrt(n)); check the key discipline the docstring states (noise
``normal(step_key)``, mask ``bernoulli(fold_in(step_key, 1), q)``); and the validation and
divergence rules. Fixed keys throughout.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer.domains import Box
from dp_infer.kernels import sgld
from dp_infer.randomness import gaussian_noise  # the kernels' privacy noise (issue 40)
from tests.support.noise_checks import assert_fresh_and_independent

# rows of norm 0.5, 2, 3, 1 and 0: clipped at C = 1 to norm 0.5, 1, 1, 1 and 0 (no NaN)
X = np.array([[0.5, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0], [0.6, 0.8, 0.0], [0.0, 0.0, 0.0]], np.float32)
Y = np.zeros(5, np.float32)
CLIPPED = np.array([[0.5, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0], [0.0, 0.0, 0.0]])
C = 1.0
NROWS = 5
X0 = np.array([1.0, -0.5, 0.25], np.float32)
H, BETA, Q = 0.05, 20.0, 0.3
N = 20_000
Z = 5.0


def linear(theta, x, y):
    return jnp.dot(theta, x) + 0.0 * y


def exact_moments(q, n_norm=NROWS, h=H, beta=BETA):
    mean = X0 - h * beta * CLIPPED.sum(0) / n_norm
    cov = 2 * h * np.eye(3) + (h * beta) ** 2 * (1 - q) / (q * n_norm**2) * CLIPPED.T @ CLIPPED
    return mean, cov


def _check_moments(draws, mean, cov):
    x = np.asarray(draws, dtype=np.float64)
    n = x.shape[0]
    m = x.mean(0)
    np.testing.assert_array_less(np.abs(m - mean), Z * np.sqrt(np.diag(cov) / n))
    c = x - m
    prods = c[:, :, None] * c[:, None, :]
    se = prods.std(0) / math.sqrt(n)
    np.testing.assert_array_less(np.abs(prods.mean(0) - cov), Z * se + 1e-12)


def test_power_of_the_moment_check():
    # the subsampling term is many standard errors away from 0 (sd of a variance ~ var sqrt(2 / N))
    _, cov = exact_moments(Q)
    _, cov_full = exact_moments(1.0)
    assert np.all(np.diag(cov - cov_full) > 3 * Z * np.diag(cov) * math.sqrt(2.0 / N))


def test_clipped_per_example_gradients_and_the_estimator():
    G = np.asarray(sgld.clipped_per_example_grads(linear, jnp.asarray(X0), X, Y, C))
    np.testing.assert_allclose(G, CLIPPED, atol=1e-6)
    assert np.all(np.isfinite(G))
    # q = 1: the full-batch clipped mean, normalised by the rows or the public normaliser
    g1 = np.asarray(sgld.minibatch_gradient(jax.random.key(0), linear, X0, X, Y, 1.0, C))
    np.testing.assert_allclose(g1, CLIPPED.sum(0) / NROWS, rtol=1e-6)
    g2 = np.asarray(sgld.minibatch_gradient(jax.random.key(0), linear, X0, X, Y, 1.0, C, normaliser=50))
    np.testing.assert_allclose(g2, CLIPPED.sum(0) / 50, rtol=1e-6)


def test_one_step_moments_of_build_kernel():
    step = sgld.build_kernel(linear, X, Y, BETA, H, Q, C)
    st = sgld.init(X0)
    new, info = jax.vmap(lambda k: step(k, st))(jax.random.split(jax.random.key(1), N))
    _check_moments(new.z, *exact_moments(Q))
    assert np.all(np.asarray(new.i) == 1) and not np.any(np.asarray(info.diverging))


def test_one_step_moments_with_a_public_normaliser_and_of_the_top_level_api():
    algo = sgld.as_top_level_api(lambda th, x, y: -linear(th, x, y), X, Y, beta=BETA, step_size=H, q=0.5,
                                 clip_norm=C, normaliser=8)
    st = algo.init(X0)
    new, _ = jax.vmap(lambda k: algo.step(k, st))(jax.random.split(jax.random.key(2), N))
    _check_moments(new.z, *exact_moments(0.5, n_norm=8))


def test_one_step_moments_of_sample_chain_and_the_numpyro_kernel():
    keys = jax.random.split(jax.random.key(3), N)
    ch = jax.vmap(lambda k: sgld.sample_chain(k, linear, X, Y, BETA, H, 1, Q, C, X0))(keys)
    _check_moments(ch.z[:, 0], *exact_moments(Q))
    kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C)
    st = kern.init(keys, 0, init_params=np.broadcast_to(X0, (N, 3)))
    _check_moments(kern.sample(st, (), {}).z, *exact_moments(Q))
    assert kern.privacy_params == {"beta": BETA, "step_size": H, "q": Q, "clip_norm": C, "n": NROWS}
    # legacy uint32 keys are batched too
    st = kern.init(jax.random.split(jax.random.PRNGKey(3), 4), 0, init_params=np.broadcast_to(X0, (4, 3)))
    assert st.z.shape == (4, 3)


def test_key_discipline_of_the_docstring():
    key = jax.random.key(4)
    next_key, step_key = jax.random.split(key)
    mask = np.asarray(jax.random.bernoulli(jax.random.fold_in(step_key, 1), Q, (NROWS,)), np.float64)
    xi = np.asarray(gaussian_noise(step_key, (3,)), np.float64)
    expect = X0 - H * BETA * (mask @ CLIPPED) / (Q * NROWS) + math.sqrt(2 * H) * xi
    ch = sgld.sample_chain(key, linear, X, Y, BETA, H, 1, Q, C, X0)
    np.testing.assert_allclose(np.asarray(ch.z[0]), expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(jax.random.key_data(ch.last_state.rng_key), jax.random.key_data(next_key))
    # the NumPyro kernel: MCMC.run(k) with one chain consumes split(k)[0]
    kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C)
    outer = jax.random.key(5)
    st = kern.init(outer, 0, init_params=X0)
    np.testing.assert_array_equal(jax.random.key_data(st.rng_key), jax.random.key_data(jax.random.split(outer)[0]))
    ch = sgld.sample_chain(jax.random.split(outer)[0], linear, X, Y, BETA, H, 1, Q, C, X0)
    np.testing.assert_allclose(np.asarray(kern.sample(st, (), {}).z), np.asarray(ch.z[0]), rtol=1e-6)
    # the same key gives the same draws; the noise and the mask do not depend on the data
    X2 = X * 0.5
    a = sgld.build_kernel(linear, X, Y, BETA, H, Q, C)(step_key, sgld.init(X0))[0].z
    b = sgld.build_kernel(linear, X2, Y, BETA, H, Q, C)(step_key, sgld.init(X0))[0].z
    clipped2 = np.asarray(sgld.clipped_per_example_grads(linear, X0, X2, Y, C), np.float64)
    np.testing.assert_allclose(np.asarray(b), X0 - H * BETA * (mask @ clipped2) / (Q * NROWS) + math.sqrt(2 * H) * xi,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(a), expect, rtol=1e-5, atol=1e-6)


def test_noise_is_fresh_across_steps_and_chains():
    T = 3000
    zero = np.zeros((1, 2), np.float32)  # one row with zero gradient: pure noise
    keys = jax.random.split(jax.random.key(6), 2)
    ch = jax.vmap(lambda k: sgld.sample_chain(k, lambda t, x, y: jnp.dot(t, x), zero, np.zeros(1), 1.0, H, T, 0.5, C,
                                              np.zeros(2, np.float32)))(keys)
    path = np.concatenate([np.zeros((2, 1, 2)), np.asarray(ch.z, np.float64)], axis=1)
    xi = np.diff(path, axis=1) / math.sqrt(2 * H)
    _check_moments(xi.reshape(-1, 2), np.zeros(2), np.eye(2))
    assert_fresh_and_independent(xi, Z)


def test_projection_thinning_and_divergence():
    box = Box([-0.1] * 3, [0.1] * 3)
    ch = sgld.sample_chain(jax.random.key(7), linear, X, Y, BETA, H, 6, Q, C, np.zeros(3, np.float32), box, 2)
    assert ch.z.shape == (3, 3) and np.all(np.abs(np.asarray(ch.z)) <= 0.1) and int(ch.last_state.i) == 6
    full = sgld.sample_chain(jax.random.key(7), linear, X, Y, BETA, H, 6, Q, C, np.zeros(3, np.float32), box)
    np.testing.assert_array_equal(np.asarray(full.z[1::2]), np.asarray(ch.z))
    key = jax.random.key(8)
    far = np.array([2e6, 0.0, 0.0], np.float32)
    assert bool(sgld.sample_chain(key, linear, X, Y, BETA, H, 2, Q, C, far).diverging.all())
    big = Box.cube(3, 1e7)
    assert not bool(sgld.sample_chain(key, linear, X, Y, BETA, H, 2, Q, C, far, big).diverging.any())
    assert bool(sgld.sample_chain(key, linear, X, Y, BETA, H, 2, Q, C, X0, divergence_radius=0.01).diverging.all())
    algo = sgld.as_top_level_api(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C, divergence_radius=0.01)
    st = algo.init(X0, key)
    assert bool(st.diverging)
    np.testing.assert_array_equal(jax.random.key_data(st.rng_key), jax.random.key_data(key))
    new, info = algo.step(key, st)
    assert bool(new.diverging) and bool(info.diverging)
    # sticky: a state already flagged stays flagged after a step back inside the radius
    algo = sgld.as_top_level_api(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C, divergence_radius=100.0)
    st = algo.init(X0)._replace(diverging=jnp.array(True))
    new, info = algo.step(key, st)
    assert bool(new.diverging) and not bool(info.diverging)
    kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C, divergence_radius=0.01)
    assert bool(kern.init(key, 0, init_params=X0).diverging)
    kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C, domain=Box.cube(3, 2.0))
    st = kern.init(key, 0)
    np.testing.assert_array_equal(np.asarray(st.z), np.asarray(Box.cube(3, 2.0).default_init()))
    st = kern.init(jax.random.split(key, 3), 0)
    assert st.z.shape == (3, 3) and kern.sample(st, (), {}).z.shape == (3, 3)
    assert kern.init(key, 0, init_params=np.array([1, 0, 0])).z.dtype == jnp.result_type(float)
    assert kern.default_fields == ("z", "diverging")


def test_validation():
    st = sgld.init(np.array([1, 2]))
    assert st.z.dtype == jnp.result_type(float) and st.i.dtype == jnp.int32 and st.i.shape == ()
    assert not bool(st.diverging) and bool(sgld.init(np.array([np.inf, 0.0])).diverging)
    with pytest.raises(ValueError, match="1-D"):
        sgld.init(np.zeros((2, 2)))
    for q in (0.0, -0.1, 1.0 + 1e-9, float("nan"), "a", None):
        with pytest.raises(ValueError, match="q"):
            sgld.build_kernel(linear, X, Y, BETA, H, q, C)
    assert sgld.build_kernel(linear, X, Y, BETA, H, 1.0, C) is not None
    with pytest.raises(ValueError, match="X"):
        sgld.build_kernel(linear, np.zeros((0, 3)), np.zeros(0), BETA, H, Q, C)
    with pytest.raises(ValueError, match="X"):
        sgld.build_kernel(linear, np.float32(1.0), np.float32(1.0), BETA, H, Q, C)
    with pytest.raises(ValueError, match="y"):
        sgld.build_kernel(linear, X, Y[:3], BETA, H, Q, C)
    with pytest.raises(ValueError, match="normaliser"):
        sgld.build_kernel(linear, X, Y, BETA, H, Q, C, normaliser=0)
    for bad in ("beta", "step_size", "clip_norm"):
        kw = dict(beta=BETA, step_size=H, q=Q, clip_norm=C)
        kw[bad] = -1.0
        with pytest.raises(ValueError, match=bad):
            sgld.MinibatchSGLD(linear, X, Y, **kw)
        with pytest.raises(ValueError, match=bad):
            sgld.as_top_level_api(linear, X, Y, **kw)
    with pytest.raises(ValueError, match="loss"):
        sgld.MinibatchSGLD(3.0, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C)
    with pytest.raises(ValueError, match="loss"):
        sgld.sample_chain(jax.random.key(0), 3.0, X, Y, BETA, H, 1, Q, C, X0)
    with pytest.raises(ValueError, match="logdensity_fn"):
        sgld.as_top_level_api(3.0, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C)
    with pytest.raises(ValueError, match="num_warmup"):
        sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C).init(jax.random.key(0), 5)
    with pytest.raises(ValueError, match="init_params"):
        sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C).init(jax.random.key(0), 0)


def test_clipping_at_other_norms_and_one_dimensional_rows():
    norms = np.linalg.norm(X, axis=1)
    for c in (0.25, 0.7, 4.0):
        G = np.asarray(sgld.clipped_per_example_grads(linear, X0, X, Y, c), np.float64)
        np.testing.assert_allclose(np.linalg.norm(G, axis=1), np.minimum(norms, c), rtol=1e-6)
        np.testing.assert_allclose(G * np.maximum(norms, 1e-30)[:, None] / np.maximum(np.minimum(norms, c), 1e-30)[:, None],
                                   X, rtol=1e-6, atol=1e-7)  # same directions
    # rows of scalars (X of shape (n,)): allowed, "rows on axis 0"
    xs = np.array([0.5, -3.0, 1.0], np.float32)
    step = sgld.build_kernel(lambda t, x, y: t[0] * x, xs, np.zeros(3), 1.0, H, 1.0, 1.0)
    new, _ = step(jax.random.key(0), sgld.init(np.zeros(1, np.float32)))
    xi = float(gaussian_noise(jax.random.key(0), (1,))[0])
    assert float(new.z[0]) == pytest.approx(-H * (0.5 - 1.0 + 1.0) / 3 + math.sqrt(2 * H) * xi, rel=1e-5)


def test_traced_parameters_give_the_same_step():
    key = jax.random.key(9)
    st = sgld.init(X0)
    eager = sgld.build_kernel(linear, X, Y, BETA, H, Q, C)(key, st)[0].z
    traced = jax.jit(lambda b, h, q, c: sgld.build_kernel(linear, X, Y, b, h, q, c)(key, st)[0].z)(BETA, H, Q, C)
    np.testing.assert_allclose(np.asarray(traced), np.asarray(eager), rtol=1e-5)


def test_a_per_example_loss_is_the_loss_in_every_entry_point():
    from dp_infer import losses

    loss = losses.logistic()
    Xl = np.array([[1.0, 0.5], [-0.5, 2.0], [0.3, -1.0]], np.float32)
    yl = np.array([1.0, 0.0, 1.0], np.float32)
    key = jax.random.key(10)
    th = np.array([0.2, -0.1], np.float32)
    ref = sgld.build_kernel(loss.example, Xl, yl, 2.0, H, 1.0, 10.0)(key, sgld.init(th))[0].z
    algo = sgld.as_top_level_api(loss, Xl, yl, beta=2.0, step_size=H, q=1.0, clip_norm=10.0)
    np.testing.assert_allclose(np.asarray(algo.step(key, algo.init(th))[0].z), np.asarray(ref), rtol=1e-6)
    algo = sgld.as_top_level_api(lambda t, x, y: -loss.example(t, x, y), Xl, yl, beta=2.0, step_size=H, q=1.0,
                                 clip_norm=10.0)
    np.testing.assert_allclose(np.asarray(algo.step(key, algo.init(th))[0].z), np.asarray(ref), rtol=1e-6)
    ch = sgld.sample_chain(key, loss, Xl, yl, 2.0, H, 1, 1.0, 10.0, th)
    ch2 = sgld.sample_chain(key, loss.example, Xl, yl, 2.0, H, 1, 1.0, 10.0, th)
    np.testing.assert_array_equal(np.asarray(ch.z), np.asarray(ch2.z))
    kern = sgld.MinibatchSGLD(loss, Xl, yl, beta=2.0, step_size=H, q=1.0, clip_norm=10.0)
    st = kern.init(key, 0, init_params=th)
    ch3 = sgld.sample_chain(jax.random.split(key)[0], loss, Xl, yl, 2.0, H, 1, 1.0, 10.0, th)
    np.testing.assert_allclose(np.asarray(kern.sample(st, (), {}).z), np.asarray(ch3.z[0]), rtol=1e-6)


def test_the_top_level_api_projects_onto_its_domain_and_uses_its_radius():
    key = jax.random.key(11)
    algo = sgld.as_top_level_api(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C, domain=Box([-0.1] * 3, [0.1] * 3))
    new, _ = algo.step(key, algo.init(np.zeros(3, np.float32)))
    assert np.all(np.abs(np.asarray(new.z)) <= 0.1)
    far = np.array([2e6, 0.0, 0.0], np.float32)
    algo = sgld.as_top_level_api(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C, domain=Box.cube(3, 1e7))
    assert not bool(algo.init(far).diverging)  # a bounded domain: radius inf
    assert bool(sgld.as_top_level_api(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C).init(far).diverging)


def test_batched_chains_consume_the_documented_chain_keys():
    kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C)
    keys = jax.random.split(jax.random.key(12), 3)
    st = kern.init(keys, 0, init_params=np.broadcast_to(X0, (3, 3)))
    for i in range(3):
        np.testing.assert_array_equal(jax.random.key_data(st.rng_key[i]),
                                      jax.random.key_data(jax.random.split(keys[i])[0]))


def _step_from(step_key, q, n_norm, x0=X0, clipped=CLIPPED):
    # the documented step with the documented keys: mask from fold_in(step_key, 1), noise from step_key
    mask = np.asarray(jax.random.bernoulli(jax.random.fold_in(step_key, 1), q, (clipped.shape[0],)), np.float64)
    xi = np.asarray(gaussian_noise(step_key, (clipped.shape[1],)), np.float64)
    return mask, x0 - H * BETA * (mask @ clipped) / (q * n_norm) + math.sqrt(2 * H) * xi


def test_a_public_normaliser_reaches_every_entry_point():
    # add/remove: 1/(q n) with the fixed public n, not the row count, in sample_chain and the NumPyro kernel
    key = jax.random.key(13)
    mask, expect = _step_from(jax.random.split(key)[1], 0.5, 50)
    assert mask.sum() > 0
    ch = sgld.sample_chain(key, linear, X, Y, BETA, H, 1, 0.5, C, X0, normaliser=50)
    np.testing.assert_allclose(np.asarray(ch.z[0]), expect, rtol=1e-5, atol=1e-6)
    kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=0.5, clip_norm=C, normaliser=50)
    st = kern.init(jax.random.key(14), 0, init_params=X0)
    mask, expect = _step_from(jax.random.split(jax.random.split(jax.random.key(14))[0])[1], 0.5, 50)
    assert mask.sum() > 0
    np.testing.assert_allclose(np.asarray(kern.sample(st, (), {}).z), expect, rtol=1e-5, atol=1e-6)


def test_the_numpyro_kernel_projects_onto_its_domain_and_uses_its_radius():
    key = jax.random.key(15)
    box = Box([-0.1] * 3, [0.1] * 3)
    zero = np.zeros(3, np.float32)
    kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C, domain=box)
    z = np.asarray(kern.sample(kern.init(key, 0, init_params=zero), (), {}).z)
    free = np.asarray(sgld.sample_chain(jax.random.split(key)[0], linear, X, Y, BETA, H, 1, Q, C, zero).z[0])
    assert np.max(np.abs(free)) > 0.1  # the unprojected step leaves the box ...
    np.testing.assert_allclose(z, np.clip(free, -0.1, 0.1), rtol=1e-6)  # ... and the kernel's is projected
    far = np.array([2e6, 0.0, 0.0], np.float32)
    kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C, domain=Box.cube(3, 1e7))
    assert not bool(kern.init(key, 0, init_params=far).diverging)  # a bounded domain: radius inf
    kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C)
    assert bool(kern.init(key, 0, init_params=far).diverging)  # no domain: the default radius 1e6
    # the radius is checked at every step, not only at init
    kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C, divergence_radius=0.01)
    st = kern.init(key, 0, init_params=zero)
    assert not bool(st.diverging) and bool(kern.sample(st, (), {}).diverging)
    # a domain's default_init is used in the default float dtype (a float16 one would give float16 noise)
    kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C, domain=_HalfBox([-1.0] * 3, [1.0] * 3))
    assert kern.init(key, 0).z.dtype == jnp.result_type(float)
    assert kern.init(jax.random.split(key, 2), 0).z.dtype == jnp.result_type(float)


class _HalfBox(Box):
    def default_init(self):
        return jnp.zeros(self.dim, jnp.float16)


def test_the_starting_point_counts_for_the_divergence_flag():
    # x0 outside the radius, the projected step back inside it: the sticky flag is already set at init
    box = Box([-0.1] * 3, [0.1] * 3)
    x0 = np.array([1.0, 0.0, 0.0], np.float32)
    ch = sgld.sample_chain(jax.random.key(16), linear, X, Y, BETA, H, 2, Q, C, x0, box, divergence_radius=0.5)
    assert np.all(np.abs(np.asarray(ch.z)) <= 0.1) and bool(ch.diverging.all())
    ch = sgld.sample_chain(jax.random.key(16), linear, X, Y, BETA, H, 2, Q, C, 0.1 * x0, box, divergence_radius=0.5)
    assert not bool(ch.diverging.any())
    # and a chain started inside the radius is flagged by the step that leaves it
    ch = sgld.sample_chain(jax.random.key(16), linear, X, Y, BETA, H, 1, Q, C, np.zeros(3, np.float32),
                           divergence_radius=0.01)
    assert bool(ch.diverging[0])


def test_labels_may_be_vectors_and_a_step_keeps_the_state_key():
    # "one label per row": y of shape (n, k); loss <theta, y_i> has gradient y_i, clipped like X's rows above
    yv = X.copy()
    key, own = jax.random.key(17), jax.random.key(18)
    new, _ = sgld.build_kernel(lambda t, x, yy: jnp.dot(t, yy) + 0.0 * x[0], np.zeros((5, 1), np.float32), yv,
                               BETA, H, Q, C)(key, sgld.init(X0, own))
    np.testing.assert_allclose(np.asarray(new.z), _step_from(key, Q, NROWS)[1], rtol=1e-5, atol=1e-6)
    # build_kernel's step is BlackJAX-style: the caller supplies the key, the state's own key is kept
    np.testing.assert_array_equal(jax.random.key_data(new.rng_key), jax.random.key_data(own))


def test_dtypes_are_kept_under_x64():
    # a float32 chain stays float32 when x64 is on (the scan carry and the NumPyro kernel, which must
    # draw sample_chain's path); float64 data and parameters give float64 throughout
    key = jax.random.key(19)
    with jax.enable_x64(True):
        g = sgld.minibatch_gradient(key, linear, X0, X, Y, Q, C)
        assert g.dtype == jnp.float32
        new, _ = sgld.build_kernel(linear, X, Y, BETA, H, Q, C)(key, sgld.init(X0))
        assert new.z.dtype == jnp.float32
        ch = sgld.sample_chain(key, linear, X, Y, BETA, H, 2, Q, C, X0)
        assert ch.z.dtype == jnp.float32
        kern = sgld.MinibatchSGLD(linear, X, Y, beta=BETA, step_size=H, q=Q, clip_norm=C)
        st = kern.init(key, 0, init_params=X0)
        assert st.z.dtype == jnp.float32
        ch = sgld.sample_chain(jax.random.split(key)[0], linear, X, Y, BETA, H, 1, Q, C, X0)
        z = kern.sample(st, (), {}).z
        assert z.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(z), np.asarray(ch.z[0]), rtol=1e-6)
        x64 = X.astype(np.float64)
        new, _ = sgld.build_kernel(linear, x64, Y, BETA, H, Q, C)(key, sgld.init(X0.astype(np.float64)))
        assert new.z.dtype == jnp.float64
        assert sgld.init(np.array([1, 2])).z.dtype == jnp.float64
