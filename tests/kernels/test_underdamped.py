"""Oracle tests for ``dp_infer.kernels.underdamped``.

The module's docstring fixes the scheme the accountant charges for (a Gaussian mechanism on the
velocity with variance ``2 gamma h``)::

    v' = v - h (gamma v + grad U(x)) + sqrt(2 gamma h) xi,   xi ~ N(0, I)
    x' = Pi_C(x + h v')

so, from a fixed ``(x, v)``, one transition without projection has the exact Gaussian law
``v' ~ N(v - h (gamma v + grad U(x)), 2 gamma h I)`` and ``x' = x + h v'`` (``x'`` has variance
``2 gamma h^3`` and covariance ``2 gamma h^2`` with ``v'``). The tests compare n independent
one-step draws with that law within 5 Monte Carlo standard errors (sd of a mean ``sqrt(var / n)``,
of a sample variance ``var sqrt(2 / (n - 1))``, of a covariance of independent coordinates
``var / sqrt(n)``), for every entry point; ``v_0 ~ N(0, I)`` drawn from the key as documented;
on a flat potential the noise ``(v' - (1 - h gamma) v) / sqrt(2 gamma h)`` is i.i.d. N(0, 1)
across steps, coordinates and chains, and the same for two data sets. Fixed keys throughout.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer.domains import Box
from dp_infer.kernels import UnderdampedLangevin, underdamped
from dp_infer.kernels._common import make_divergence_fn
from dp_infer.randomness import gaussian_noise  # the kernels' privacy noise (issue 40)
from tests.support.noise_checks import assert_fresh_and_independent, assert_iid_gaussian

A = np.array([1.0, 2.0, 4.0], dtype=np.float32)
C = np.array([0.5, -1.0, 2.0], dtype=np.float32)
X0 = np.array([1.5, 0.5, -1.0], dtype=np.float32)
V0 = np.array([0.3, -0.8, 1.2], dtype=np.float32)
H = 0.1
G = 1.5  # friction
N = 20_000
Z = 5.0

V_MEAN = V0 - H * (G * V0 + A * (X0 - C))
V_VAR = 2.0 * G * H


def potential(x):
    return 0.5 * jnp.sum(A * (x - C) ** 2)


def grad_u(x):
    return A * (x - C)


def _check_gaussian(draws, mean, var, n_eff=None):
    assert_iid_gaussian(draws, mean, var, Z, n_eff)


def _check_one_step(z, v, x_from=X0, v_mean=V_MEAN):
    z = np.asarray(z, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    _check_gaussian(v, v_mean, V_VAR)
    # x' = x + h v' exactly (up to float32 rounding), hence var 2 gamma h^3, cov 2 gamma h^2
    np.testing.assert_allclose(z, np.asarray(x_from, dtype=np.float64) + H * v, atol=1e-5)
    cxv = np.mean((z - z.mean(0)) * (v - v.mean(0)), axis=0)
    np.testing.assert_array_less(np.abs(cxv - H * V_VAR), Z * H * V_VAR * math.sqrt(2.0 / z.shape[0]))


def test_one_step_law_of_build_kernel():
    step = underdamped.build_kernel(grad_u, H, G)
    st = underdamped.init(X0, velocity=V0)
    new, info = jax.vmap(lambda k: step(k, st))(jax.random.split(jax.random.key(1), N))
    _check_one_step(new.z, new.v)
    assert np.all(np.asarray(new.i) == 1) and not np.any(np.asarray(info.diverging))
    # power: the noise scale sqrt(2 gamma h) differs from sqrt(2h), sqrt(gamma h), sqrt(3 gamma h)
    for wrong in (2.0 * H, G * H, 3.0 * G * H):
        assert abs(wrong - V_VAR) > 3 * Z * V_VAR * math.sqrt(2.0 / N)


def test_one_step_law_of_the_top_level_api():
    algo = underdamped.as_top_level_api(lambda x: -potential(x), step_size=H, friction=G)
    st = algo.init(X0, velocity=V0)
    new, _ = jax.vmap(lambda k: algo.step(k, st))(jax.random.split(jax.random.key(2), N))
    _check_one_step(new.z, new.v)
    with pytest.raises(ValueError, match="friction"):
        underdamped.as_top_level_api(lambda x: -potential(x), step_size=H)


def test_one_step_law_of_sample_chain():
    keys = jax.random.split(jax.random.key(3), N)
    ch = jax.vmap(lambda k: underdamped.sample_chain(k, potential, X0, H, G, 1, v0=V0))(keys)
    _check_one_step(ch.z[:, 0], ch.v[:, 0])
    ch = jax.vmap(lambda k: underdamped.sample_chain(k, None, X0, H, G, 1, v0=V0, grad_fn=grad_u))(keys)
    _check_one_step(ch.z[:, 0], ch.v[:, 0])
    assert np.all(np.asarray(ch.last_state.i) == 1)


def _noise_given_v(v_before, v_after, x_before):
    """The standardised noise of one step: (v' - v + h (gamma v + grad U(x))) / sqrt(2 gamma h)."""
    vb = np.asarray(v_before, np.float64)
    return (np.asarray(v_after, np.float64) - vb + H * (G * vb + np.asarray(grad_u(x_before), np.float64))) / math.sqrt(V_VAR)


def test_one_step_law_of_the_numpyro_kernel_given_its_random_initial_velocity():
    kernel = UnderdampedLangevin(potential_fn=potential, step_size=H, friction=G)
    n = 8000
    st = kernel.init(jax.random.split(jax.random.key(4), n), 0, init_params=jnp.broadcast_to(X0, (n, 3)))
    _check_gaussian(st.v, np.zeros(3), 1.0)  # v_0 ~ N(0, I)
    new = kernel.sample(st, (), {})
    _check_gaussian(_noise_given_v(st.v, new.v, X0), np.zeros(3), 1.0)
    np.testing.assert_allclose(np.asarray(new.z), np.asarray(X0) + H * np.asarray(new.v), atol=1e-5)
    assert kernel.friction == G and kernel.integrated_time(10) == pytest.approx(10 * H)
    with pytest.raises(ValueError, match="friction"):
        UnderdampedLangevin(potential_fn=potential, step_size=H, friction=None)


def test_initial_velocity_is_standard_normal_from_the_documented_key():
    key = jax.random.key(5)
    state_key, kv = jax.random.split(key)
    st = underdamped.init(X0, key)
    np.testing.assert_array_equal(np.asarray(st.v), np.asarray(gaussian_noise(kv, (3,))))
    np.testing.assert_array_equal(jax.random.key_data(st.rng_key), jax.random.key_data(state_key))
    assert st.i.shape == () and st.i.dtype == jnp.int32 and int(st.i) == 0 and not bool(st.diverging)
    vs = jax.vmap(lambda k: underdamped.init(X0, k).v)(jax.random.split(key, N))
    _check_gaussian(vs, np.zeros(3), 1.0)
    # sample_chain without v0 draws the same v_0 as init and then steps from the stored key
    ch = underdamped.sample_chain(key, potential, X0, H, G, 1)
    next_key, noise_key = jax.random.split(state_key)
    direct, _ = underdamped.build_kernel(grad_u, H, G)(noise_key, st)
    np.testing.assert_allclose(np.asarray(ch.v[0]), np.asarray(direct.v), rtol=1e-6)
    np.testing.assert_array_equal(jax.random.key_data(ch.last_state.rng_key), jax.random.key_data(next_key))
    # an explicit velocity is used as given and keeps the key; the top-level init passes both on
    st = underdamped.init(X0, key, velocity=V0)
    np.testing.assert_array_equal(np.asarray(st.v), np.asarray(V0))
    np.testing.assert_array_equal(jax.random.key_data(st.rng_key), jax.random.key_data(key))
    algo = underdamped.as_top_level_api(lambda x: -potential(x), step_size=H, friction=G)
    st = algo.init(X0, key, velocity=V0)
    np.testing.assert_array_equal(np.asarray(st.v), np.asarray(V0))
    np.testing.assert_array_equal(jax.random.key_data(st.rng_key), jax.random.key_data(key))
    st = algo.init(X0, key)
    np.testing.assert_array_equal(np.asarray(st.v), np.asarray(gaussian_noise(kv, (3,))))
    assert not bool(underdamped.init(X0, velocity=V0).diverging)
    with pytest.raises(ValueError, match="rng_key"):
        underdamped.init(X0)
    with pytest.raises(ValueError, match="velocity"):
        underdamped.init(X0, velocity=jnp.zeros(2))
    assert underdamped.init(jnp.array([1, 2]), velocity=jnp.array([0, 1])).v.dtype == jnp.result_type(float)


def test_noise_is_iid_standard_normal_across_steps_coordinates_and_chains():
    T = 4000
    zero = lambda x: jnp.zeros_like(x)  # noqa: E731
    keys = jax.random.split(jax.random.key(6), 2)
    ch = jax.vmap(lambda k: underdamped.sample_chain(k, None, jnp.zeros(2), H, G, T, grad_fn=zero))(keys)
    v = np.asarray(ch.v, dtype=np.float64)
    v0 = np.asarray(jax.vmap(lambda k: underdamped.init(jnp.zeros(2), k).v)(keys), dtype=np.float64)
    path = np.concatenate([v0[:, None, :], v], axis=1)
    xi = (path[:, 1:] - (1.0 - H * G) * path[:, :-1]) / math.sqrt(V_VAR)  # (2, T, 2)
    _check_gaussian(xi.reshape(-1, 2), np.zeros(2), 1.0)
    assert_fresh_and_independent(xi, Z)
    # positions follow x' = x + h v'
    z = np.concatenate([np.zeros((2, 1, 2)), np.asarray(ch.z, np.float64)], axis=1)
    np.testing.assert_allclose(np.diff(z, axis=1), H * v, atol=1e-4)


def test_same_key_same_draws_and_the_noise_is_not_a_function_of_the_data():
    key = jax.random.key(7)
    a = underdamped.sample_chain(key, potential, X0, H, G, 5)
    b = underdamped.sample_chain(key, potential, X0, H, G, 5)
    np.testing.assert_array_equal(np.asarray(a.z), np.asarray(b.z))
    other = lambda x: 0.5 * jnp.sum((x + 3.0) ** 2)  # noqa: E731
    st = underdamped.init(X0, velocity=V0)
    s1, _ = underdamped.build_kernel(grad_u, H, G)(key, st)
    s2, _ = underdamped.build_kernel(jax.grad(other), H, G)(key, st)
    n1 = np.asarray(s1.v) - np.asarray(V0 - H * (G * V0 + grad_u(X0)))
    n2 = np.asarray(s2.v) - np.asarray(V0 - H * (G * V0 + jax.grad(other)(X0)))
    np.testing.assert_allclose(n1, n2, atol=1e-6)


def test_divergence_flags_and_default_radius():
    radius = make_divergence_fn(10.0)
    back = lambda x: x / H**2  # noqa: E731  # with v = 0: v' = -x / h + noise, so x' = h noise
    step = underdamped.build_kernel(back, H, G, divergence_fn=radius)
    st = underdamped.init(jnp.array([20.0, 0.0, 0.0]), velocity=jnp.zeros(3), divergence_fn=radius)
    assert bool(st.diverging)
    new, info = step(jax.random.key(8), st)
    assert float(jnp.linalg.norm(new.z)) < 10.0
    assert bool(new.diverging) and not bool(info.diverging)  # sticky; this step is fine
    st = underdamped.init(jnp.array([1.0, 0.0, 0.0]), velocity=jnp.array([500.0, 0.0, 0.0]), divergence_fn=radius)
    new, info = underdamped.build_kernel(lambda x: jnp.zeros_like(x), H, G, divergence_fn=radius)(jax.random.key(8), st)
    assert bool(new.diverging) and bool(info.diverging)
    # defaults: radius 1e6 without a domain, inf for a bounded one, or the given radius
    key = jax.random.key(9)
    flat = lambda x: -0.0 * jnp.sum(x)  # noqa: E731
    zero = lambda x: jnp.zeros_like(x)  # noqa: E731
    x_far = jnp.array([2e6, 0.0, 0.0])
    algo = underdamped.as_top_level_api(flat, step_size=H, friction=G)
    assert bool(algo.init(x_far, velocity=jnp.zeros(3)).diverging)
    algo = underdamped.as_top_level_api(flat, step_size=H, friction=G, divergence_radius=5.0)
    assert bool(algo.step(key, algo.init(jnp.array([6.0, 0.0, 0.0]), velocity=jnp.zeros(3)))[1].diverging)
    big = Box.cube(3, 1e7)
    algo = underdamped.as_top_level_api(flat, step_size=H, friction=G, domain=big)
    assert not bool(algo.step(key, algo.init(x_far, velocity=jnp.zeros(3)))[1].diverging)
    assert not bool(underdamped.sample_chain(key, None, x_far, H, G, 2, grad_fn=zero, project=big).diverging.any())
    assert bool(underdamped.sample_chain(key, None, x_far, H, G, 2, grad_fn=zero).diverging.all())
    assert bool(underdamped.sample_chain(key, None, X0, H, G, 2, grad_fn=zero, divergence_radius=0.1).diverging.all())
    kernel = UnderdampedLangevin(potential_fn=flat, step_size=H, friction=G, divergence_radius=5.0)
    assert bool(kernel.init(key, 0, init_params=jnp.array([6.0, 0.0, 0.0])).diverging)
    with pytest.raises(ValueError):
        underdamped.sample_chain(key, None, X0, H, G, 1)


def test_only_the_position_is_projected_after_the_move():
    # v large and positive, box [0, 1]^3: x' = clip(x + h v') while v' keeps its unclipped value
    box = Box([0.0] * 3, [1.0] * 3)
    zero = lambda x: jnp.zeros_like(x)  # noqa: E731
    st = underdamped.init(jnp.full(3, 0.5), velocity=jnp.array([100.0, -100.0, 0.0]))
    new, _ = jax.vmap(lambda k: underdamped.build_kernel(zero, H, G, project=box)(k, st))(
        jax.random.split(jax.random.key(10), N)
    )
    z, v = np.asarray(new.z), np.asarray(new.v)
    assert np.all(z[:, 0] == 1.0) and np.all(z[:, 1] == 0.0)
    _check_gaussian(v, np.array([100.0, -100.0, 0.0]) * (1.0 - H * G), V_VAR)
    np.testing.assert_allclose(z[:, 2], np.clip(0.5 + H * v[:, 2], 0.0, 1.0), atol=1e-6)


def test_sample_chain_flags_from_its_radius_at_init_and_at_every_step():
    key = jax.random.key(11)
    back = lambda x: x / H**2  # noqa: E731  # with v = 0: x' = h * noise
    ch = underdamped.sample_chain(key, None, np.array([20.0, 0.0, 0.0], np.float32), H, G, 1, v0=np.zeros(3, np.float32),
                                  grad_fn=back, divergence_radius=10.0)
    assert float(jnp.linalg.norm(ch.z[0])) < 10.0 and bool(ch.diverging[0])
    push = lambda x: jnp.full_like(x, -1000.0 / H**2)  # noqa: E731  # x' = x + 1000 + h^2 (...) noise
    ch = underdamped.sample_chain(key, None, np.zeros(3, np.float32), H, G, 1, v0=np.zeros(3, np.float32),
                                  grad_fn=push, divergence_radius=5.0)
    assert np.all(np.isfinite(np.asarray(ch.z))) and bool(ch.diverging[0])
    kernel = UnderdampedLangevin(potential_fn=lambda x: -1000.0 / H**2 * jnp.sum(x), step_size=H, friction=G,
                                 divergence_radius=5.0)
    st = kernel.init(key, 0, init_params=np.zeros(3, np.float32))
    assert not bool(st.diverging) and bool(kernel.sample(st, (), {}).diverging)


def test_thinning_and_a_traced_step_size_and_friction():
    key = jax.random.key(12)
    full = underdamped.sample_chain(key, potential, X0, H, G, 6)
    for thin in (2, 3):
        ch = underdamped.sample_chain(key, potential, X0, H, G, 6, thinning=thin)
        np.testing.assert_allclose(np.asarray(ch.z), np.asarray(full.z[thin - 1 :: thin]), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(ch.v), np.asarray(full.v[thin - 1 :: thin]), rtol=1e-6)
        assert int(ch.last_state.i) == 6
    st = underdamped.init(X0, velocity=V0)
    eager = underdamped.build_kernel(grad_u, H, G)(key, st)[0]
    traced = jax.jit(lambda h, g: underdamped.build_kernel(grad_u, h, g)(key, st)[0])(H, G)
    np.testing.assert_allclose(np.asarray(traced.v), np.asarray(eager.v), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(traced.z), np.asarray(eager.z), rtol=1e-6)


def test_dtypes_are_kept_under_x64():
    with jax.enable_x64(True):
        g64 = lambda x: jnp.asarray(grad_u(x), jnp.float64)  # noqa: E731
        ch = underdamped.sample_chain(jax.random.key(13), None, X0, H, G, 3, v0=V0, grad_fn=g64)
        assert ch.z.dtype == jnp.float32 and ch.v.dtype == jnp.float32
        st = underdamped.init(X0, jax.random.key(13))
        assert st.v.dtype == jnp.float32
        new, _ = underdamped.build_kernel(g64, H, G)(jax.random.key(13), st)
        assert new.z.dtype == jnp.float32 and new.v.dtype == jnp.float32
        st = underdamped.init(X0.astype(np.float64), jax.random.key(13))
        new, _ = underdamped.build_kernel(g64, H, G)(jax.random.key(13), st)
        assert st.v.dtype == jnp.float64 and new.z.dtype == jnp.float64


def test_every_entry_point_projects_the_position_only():
    box = Box([0.0] * 3, [1.0] * 3)
    flat = lambda x: 0.0 * jnp.sum(x)  # noqa: E731
    key = jax.random.key(14)
    vel = np.array([100.0, -100.0, 0.0], np.float32)
    algo = underdamped.as_top_level_api(flat, step_size=H, friction=G, domain=box)
    new, _ = algo.step(key, algo.init(np.full(3, 0.5, np.float32), velocity=vel))
    assert float(new.z[0]) == 1.0 and float(new.z[1]) == 0.0 and abs(float(new.v[0]) - 100.0 * (1 - H * G)) < 5.0
    ch = underdamped.sample_chain(key, flat, np.full(3, 0.5, np.float32), H, G, 1, v0=vel, project=box)
    assert float(ch.z[0, 0]) == 1.0 and float(ch.z[0, 1]) == 0.0 and float(ch.v[0, 0]) > 50.0


def test_the_init_strategy_and_debug_flag_are_passed_on():
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import init_to_value

    def model():
        numpyro.sample("theta", dist.Normal(0.0, 10.0).expand([2]).to_event(1))

    value = np.array([3.0, -2.0], np.float32)
    kern = UnderdampedLangevin(model, step_size=H, friction=G, init_strategy=init_to_value(values={"theta": value}))
    st = kern.init(jax.random.key(15), 0, None, (), {})
    np.testing.assert_allclose(np.asarray(st.z["theta"]), value)
    assert "potential_energy" not in st._fields
    with pytest.warns(UserWarning, match="NOT covered"):
        kern = UnderdampedLangevin(model, step_size=H, friction=G, debug=True)
    assert "potential_energy" in kern.init(jax.random.key(15), 0, None, (), {})._fields


def test_build_kernels_step_leaves_the_states_key_untouched():
    key = jax.random.key(16)
    st = underdamped.init(X0, key, velocity=V0)
    new, _ = underdamped.build_kernel(grad_u, H, G)(jax.random.key(17), st)
    np.testing.assert_array_equal(jax.random.key_data(new.rng_key), jax.random.key_data(key))
    new, _ = underdamped.keyed_transition(underdamped.build_kernel(grad_u, H, G))(st)
    np.testing.assert_array_equal(jax.random.key_data(new.rng_key), jax.random.key_data(jax.random.split(key)[0]))
