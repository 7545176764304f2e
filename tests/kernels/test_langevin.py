"""Oracle tests for ``dp_infer.kernels.langevin``.

The privacy guarantee of ULA assumes exactly the transition documented in the module:
``theta' = Pi_C(theta - h grad U(theta) + sqrt(2 h) xi)``, ``xi ~ N(0, I)`` drawn from a key that is
fresh for every chain and every step and never a function of the data. These tests check that law
from the outside, on closed forms:

* one transition from a fixed point on a quadratic potential ``U = 1/2 sum_j a_j (x_j - c_j)^2`` is
  exactly ``N(x - h a (x - c), 2 h I)``: the sample mean and covariance of n independent one-step
  draws must match within 5 Monte Carlo standard errors (sd of a mean ``sqrt(2h / n)``, of a sample
  variance ``2h sqrt(2 / (n - 1))``, of a sample covariance of independent coordinates
  ``2h / sqrt(n)``), for every entry point (``build_kernel``, ``as_top_level_api``,
  ``sample_chain``, the NumPyro ``Langevin`` kernel);
* on a flat potential the increments are the noise itself: i.i.d. N(0, 1) after division by
  ``sqrt(2h)``, uncorrelated across steps, coordinates and chains, and equal for two data sets;
* the key discipline stated in the module docstring (``state.rng_key`` split into
  ``(next_key, noise_key)``) and the sticky / per-step divergence flags.

All keys are fixed, so every test is deterministic; 5 standard errors leave a chance below 1e-6
per compared statistic of a false failure for a correct kernel.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer.domains import Box
from dp_infer.kernels import Langevin, langevin
from tests.support.noise_checks import assert_fresh_and_independent, assert_iid_gaussian

A = np.array([1.0, 2.0, 4.0], dtype=np.float32)  # curvatures of the quadratic test potential
C = np.array([0.5, -1.0, 2.0], dtype=np.float32)  # its minimiser
X0 = np.array([1.5, 0.5, -1.0], dtype=np.float32)  # the fixed starting point
H = 0.05
N = 20_000  # one-step draws per law check
Z = 5.0  # standard errors allowed per statistic


def potential(x):
    return 0.5 * jnp.sum(A * (x - C) ** 2)


def grad_u(x):
    return A * (x - C)


def _check_gaussian(draws, mean, var, n_eff=None):
    assert_iid_gaussian(draws, mean, var, Z, n_eff)


ULA_MEAN = X0 - H * A * (X0 - C)  # the exact one-step mean
ULA_VAR = 2.0 * H  # the exact one-step variance of each coordinate


def test_power_of_the_law_check():
    # the check rejects a noise scale off by the smallest factor a one-character change makes
    # (sqrt(2h) vs sqrt(3h) or sqrt(h)) and a gradient step of the wrong sign
    xi = np.asarray(jax.random.normal(jax.random.key(99), (N, 3)))
    good = np.asarray(ULA_MEAN) + math.sqrt(2 * H) * xi
    _check_gaussian(good, ULA_MEAN, ULA_VAR)
    for bad in (np.asarray(ULA_MEAN) + math.sqrt(3 * H) * xi, np.asarray(ULA_MEAN) + math.sqrt(H) * xi,
                np.asarray(X0 + H * A * (X0 - C)) + math.sqrt(2 * H) * xi):
        with pytest.raises(AssertionError):
            _check_gaussian(bad, ULA_MEAN, ULA_VAR)


def test_one_step_law_of_build_kernel_on_a_quadratic():
    step = langevin.build_kernel(grad_u, H)
    state = langevin.init(X0)
    keys = jax.random.split(jax.random.key(1), N)
    new, info = jax.vmap(lambda k: step(k, state))(keys)
    _check_gaussian(new.z, ULA_MEAN, ULA_VAR)
    assert np.all(np.asarray(new.i) == 1) and not np.any(np.asarray(new.diverging))
    assert not np.any(np.asarray(info.diverging))


def test_one_step_law_of_the_top_level_api_uses_minus_the_log_density():
    algo = langevin.as_top_level_api(lambda x: -potential(x), step_size=H)
    state = algo.init(X0)
    keys = jax.random.split(jax.random.key(2), N)
    new, _ = jax.vmap(lambda k: algo.step(k, state))(keys)
    _check_gaussian(new.z, ULA_MEAN, ULA_VAR)


def test_one_step_law_of_sample_chain_and_of_its_keyed_transition():
    keys = jax.random.split(jax.random.key(3), N)
    ch = jax.vmap(lambda k: langevin.sample_chain(k, potential, X0, H, 1))(keys)
    _check_gaussian(ch.z[:, 0, :], ULA_MEAN, ULA_VAR)
    ch = jax.vmap(lambda k: langevin.sample_chain(k, None, X0, H, 1, grad_fn=grad_u))(keys)
    _check_gaussian(ch.z[:, 0, :], ULA_MEAN, ULA_VAR)


def test_one_step_law_of_the_numpyro_kernel():
    kernel = Langevin(potential_fn=potential, step_size=H)
    n = 8000
    state = kernel.init(jax.random.split(jax.random.key(4), n), 0, init_params=jnp.broadcast_to(X0, (n, 3)))
    new = kernel.sample(state, (), {})
    _check_gaussian(new.z, ULA_MEAN, ULA_VAR)
    assert np.all(np.asarray(new.i) == 1)


def test_two_steps_have_the_exact_gaussian_law():
    # two steps: x2 = (1 - h a)^2 (x0 - c) + c + sqrt(2h) ((1 - h a) xi_1 + xi_2), so the
    # variance is 2h (1 + (1 - h a)^2): the second step's noise must be fresh (a reused key gives
    # (2 - h a)^2 2h instead)
    keys = jax.random.split(jax.random.key(5), N)
    ch = jax.vmap(lambda k: langevin.sample_chain(k, potential, X0, H, 2))(keys)
    c = np.asarray(1.0 - H * A, dtype=np.float64)
    mean = c**2 * np.asarray(X0 - C) + np.asarray(C)
    var = 2.0 * H * (1.0 + c**2)
    x = (np.asarray(ch.z[:, 1, :], dtype=np.float64) - mean) / np.sqrt(var)
    _check_gaussian(x, np.zeros(3), 1.0)
    assert np.all(np.asarray(ch.last_state.i) == 2)


def _noise_of_flat_chains(key, num_chains, num_steps):
    """Noise increments of num_chains chains on a flat potential: (chains, steps, d) / sqrt(2h)."""
    keys = jax.random.split(key, num_chains)
    zero = lambda x: jnp.zeros_like(x)  # noqa: E731
    ch = jax.vmap(lambda k: langevin.sample_chain(k, None, jnp.zeros(2), H, num_steps, grad_fn=zero))(keys)
    path = np.concatenate([np.zeros((num_chains, 1, 2)), np.asarray(ch.z, dtype=np.float64)], axis=1)
    return np.diff(path, axis=1) / math.sqrt(2 * H)


def test_noise_is_iid_standard_normal_across_steps_coordinates_and_chains():
    T = 4000
    xi = _noise_of_flat_chains(jax.random.key(6), 2, T)  # (2, T, 2)
    flat = xi.reshape(-1, 2)
    _check_gaussian(flat, np.zeros(2), 1.0)
    assert_fresh_and_independent(xi, Z)  # fresh noise at every step, chains independent
    assert not np.array_equal(xi[0], xi[1])


def test_same_key_same_draws_and_the_noise_is_not_a_function_of_the_data():
    key = jax.random.key(7)
    a = langevin.sample_chain(key, potential, X0, H, 5)
    b = langevin.sample_chain(key, potential, X0, H, 5)
    np.testing.assert_array_equal(np.asarray(a.z), np.asarray(b.z))
    # two "data sets": two potentials; one step from the same point with the same key uses the
    # same noise, x' - (x - h grad U(x))
    other = lambda x: 0.5 * jnp.sum((x + 3.0) ** 2)  # noqa: E731
    s1, _ = langevin.build_kernel(grad_u, H)(key, langevin.init(X0))
    s2, _ = langevin.build_kernel(jax.grad(other), H)(key, langevin.init(X0))
    n1 = np.asarray(s1.z - (X0 - H * grad_u(X0)))
    n2 = np.asarray(s2.z - (X0 - H * jax.grad(other)(X0)))
    np.testing.assert_allclose(n1, n2, atol=1e-6)


def test_key_discipline_of_the_docstring():
    # a transition splits state.rng_key into (next_key, noise_key), draws from noise_key and
    # stores next_key
    key = jax.random.key(8)
    next_key, noise_key = jax.random.split(key)
    ch = langevin.sample_chain(key, potential, X0, H, 1)
    direct, _ = langevin.build_kernel(grad_u, H)(noise_key, langevin.init(X0))
    np.testing.assert_allclose(np.asarray(ch.z[0]), np.asarray(direct.z), rtol=1e-6)
    np.testing.assert_array_equal(jax.random.key_data(ch.last_state.rng_key), jax.random.key_data(next_key))
    # build_kernel's step leaves the state's key untouched; keyed_transition replaces it
    st = langevin.init(X0, key)
    new, _ = langevin.build_kernel(grad_u, H)(noise_key, st)
    np.testing.assert_array_equal(jax.random.key_data(new.rng_key), jax.random.key_data(key))
    new, _ = langevin.keyed_transition(langevin.build_kernel(grad_u, H))(st)
    np.testing.assert_array_equal(jax.random.key_data(new.rng_key), jax.random.key_data(next_key))
    np.testing.assert_allclose(np.asarray(new.z), np.asarray(direct.z), rtol=1e-6)
    # the top-level init keeps the key it is given
    algo = langevin.as_top_level_api(lambda x: -potential(x), step_size=H)
    np.testing.assert_array_equal(jax.random.key_data(algo.init(X0, key).rng_key), jax.random.key_data(key))


def test_initial_state():
    st = langevin.init(X0)
    assert st.i.shape == () and st.i.dtype == jnp.int32 and int(st.i) == 0
    assert not bool(st.diverging) and st.rng_key is None
    assert bool(langevin.init(jnp.array([0.0, jnp.inf])).diverging)
    far = langevin.as_top_level_api(lambda x: -potential(x), step_size=H).init(jnp.array([2e6, 0.0, 0.0]))
    assert bool(far.diverging)  # the default radius 1e6 applies at init


def test_divergence_flag_is_sticky_and_info_is_per_step():
    radius = langevin.make_divergence_fn(10.0)
    back_to_zero = lambda x: x / H  # noqa: E731  # x - h grad = 0: the next position is the noise
    step = langevin.build_kernel(back_to_zero, H, divergence_fn=radius)
    st = langevin.init(jnp.array([20.0, 0.0, 0.0]), divergence_fn=radius)
    assert bool(st.diverging)
    new, info = step(jax.random.key(9), st)
    assert float(jnp.linalg.norm(new.z)) < 10.0
    assert bool(new.diverging) and not bool(info.diverging)  # sticky; this step is fine
    away = langevin.build_kernel(lambda x: -x / H * 30.0, H, divergence_fn=radius)  # x -> 31 x
    st = langevin.init(jnp.array([1.0, 0.0, 0.0]), divergence_fn=radius)
    new, info = away(jax.random.key(9), st)
    assert bool(new.diverging) and bool(info.diverging)


def test_default_divergence_radius_of_the_top_level_api_and_sample_chain():
    key = jax.random.key(10)
    flat = lambda x: -0.0 * jnp.sum(x)  # noqa: E731
    x_far = jnp.array([2e6, 0.0, 0.0])
    # no domain: radius 1e6; an explicit radius; a bounded domain: inf (projected chains stay bounded)
    assert bool(langevin.as_top_level_api(flat, step_size=H).step(key, langevin.init(x_far))[1].diverging)
    algo = langevin.as_top_level_api(flat, step_size=H, divergence_radius=5.0)
    assert bool(algo.step(key, algo.init(jnp.array([6.0, 0.0, 0.0])))[1].diverging)
    assert not bool(algo.step(key, algo.init(jnp.array([1.0, 0.0, 0.0])))[1].diverging)
    big = Box.cube(3, 1e7)
    algo = langevin.as_top_level_api(flat, step_size=H, domain=big)
    assert not bool(algo.init(x_far).diverging)
    assert not bool(algo.step(key, algo.init(x_far))[1].diverging)
    zero = lambda x: jnp.zeros_like(x)  # noqa: E731
    assert not bool(langevin.sample_chain(key, None, x_far, H, 2, grad_fn=zero, project=big).diverging.any())
    assert bool(langevin.sample_chain(key, None, x_far, H, 2, grad_fn=zero).diverging.all())
    assert bool(langevin.sample_chain(key, None, X0, H, 2, grad_fn=zero, divergence_radius=0.1).diverging.all())
    # the NumPyro kernel's initial state uses its radius too
    kernel = Langevin(potential_fn=flat, step_size=H, divergence_radius=5.0)
    assert bool(kernel.init(key, 0, init_params=jnp.array([6.0, 0.0, 0.0])).diverging)


def test_projection_after_the_noise():
    # on [0, 10]^3 from the corner with U flat, each coordinate is max(0, sqrt(2h) xi) (the upper
    # side is 22 sd away): an atom of mass 1/2 at 0 -- the noise is added before the projection
    box = Box([0.0, 0.0, 0.0], [10.0, 10.0, 10.0])
    zero = lambda x: jnp.zeros_like(x)  # noqa: E731
    step = langevin.build_kernel(zero, H, project=box)
    keys = jax.random.split(jax.random.key(11), N)
    new, _ = jax.vmap(lambda k: step(k, langevin.init(jnp.zeros(3))))(keys)
    z = np.asarray(new.z)
    assert z.min() == 0.0
    frac = np.mean(z == 0.0)
    assert abs(frac - 0.5) < Z * math.sqrt(0.25 / z.size)
    # the positive part is the half-normal of scale sqrt(2h): E[x'] = sqrt(2h) / sqrt(2 pi)
    assert abs(z.mean() - math.sqrt(2 * H / (2 * math.pi))) < Z * math.sqrt(2 * H / z.size)


def test_sample_chain_needs_a_potential_or_a_gradient():
    with pytest.raises(ValueError):
        langevin.sample_chain(jax.random.key(0), None, X0, H, 1)


def test_sample_chain_flags_from_its_radius_at_init_and_at_every_step():
    key = jax.random.key(12)
    # starts outside the radius (10), steps back inside: the sticky flag keeps the initial state's
    back = lambda x: x / H  # noqa: E731  # x - h grad = 0: the next position is the noise alone
    ch = langevin.sample_chain(key, None, np.array([20.0, 0.0, 0.0], np.float32), H, 1, grad_fn=back,
                               divergence_radius=10.0)
    assert float(jnp.linalg.norm(ch.z[0])) < 10.0 and bool(ch.diverging[0])
    # starts inside, a finite step leaves the radius: flagged by the step's own check
    push = lambda x: jnp.full_like(x, -100.0 / H)  # noqa: E731  # x -> x + 100 + noise
    ch = langevin.sample_chain(key, None, np.zeros(3, np.float32), H, 1, grad_fn=push, divergence_radius=5.0)
    assert np.all(np.isfinite(np.asarray(ch.z))) and bool(ch.diverging[0])
    # the same for the NumPyro kernel's steps
    kernel = Langevin(potential_fn=lambda x: -100.0 / H * jnp.sum(x), step_size=H, divergence_radius=5.0)
    st = kernel.init(key, 0, init_params=np.zeros(3, np.float32))
    assert not bool(st.diverging) and bool(kernel.sample(st, (), {}).diverging)


def test_thinning_keeps_every_thinning_th_state_of_the_same_chain():
    key = jax.random.key(13)
    full = langevin.sample_chain(key, potential, X0, H, 6)
    for thin in (1, 2, 3, 6):
        ch = langevin.sample_chain(key, potential, X0, H, 6, thinning=thin)
        np.testing.assert_allclose(np.asarray(ch.z), np.asarray(full.z[thin - 1 :: thin]), rtol=1e-6)
        assert int(ch.last_state.i) == 6 and ch.z.shape == (6 // thin, 3)
    with pytest.raises(ValueError, match="multiple"):
        langevin.sample_chain(key, potential, X0, H, 6, thinning=4)


def test_a_traced_step_size_gives_the_same_step():
    key = jax.random.key(14)
    st = langevin.init(X0)
    eager = langevin.build_kernel(grad_u, H)(key, st)[0].z
    traced = jax.jit(lambda h: langevin.build_kernel(grad_u, h)(key, st)[0].z)(H)
    np.testing.assert_allclose(np.asarray(traced), np.asarray(eager), rtol=1e-6)


def test_dtypes_are_kept_under_x64():
    # a float32 chain stays float32 when x64 is on and the gradient comes back in float64 (the
    # scan carry must keep its dtype); a float64 chain draws float64 noise
    with jax.enable_x64(True):
        g64 = lambda x: jnp.asarray(grad_u(x), jnp.float64)  # noqa: E731
        ch = langevin.sample_chain(jax.random.key(15), None, X0, H, 3, grad_fn=g64)
        assert ch.z.dtype == jnp.float32
        new, _ = langevin.build_kernel(g64, H)(jax.random.key(15), langevin.init(X0))
        assert new.z.dtype == jnp.float32
        new, _ = langevin.build_kernel(g64, H)(jax.random.key(15), langevin.init(X0.astype(np.float64)))
        assert new.z.dtype == jnp.float64
