"""BlackJAX-style functional API of every kernel: as_top_level_api(logdensity_fn, ..., plan=)
returns init and step(rng_key, state) -> (state, info), pure functions to jit, vmap and scan."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from dp_infer import losses
from dp_infer.kernels import langevin, sgld, underdamped
from dp_infer.losses import LossConstants
from dp_infer.randomness import gaussian_noise  # the kernels' privacy noise (issue 40)
from dp_infer.routes.plan import plan_trajectory


def _run(algo, key, x0, num_steps, num_chains):
    """num_chains chains of num_steps steps from x0 with vmap + scan; final positions."""

    def chain(k):
        state = algo.init(x0, k)

        def body(s, kk):
            s, info = algo.step(kk, s)
            return s, info.diverging

        last, divs = lax.scan(body, state, jax.random.split(k, num_steps))
        return last.z, divs

    return jax.jit(jax.vmap(chain))(jax.random.split(key, num_chains))


def test_langevin_top_level_hits_ulas_exact_stationary_variance():
    # Oracle: ULA on N(0, 1/m) has stationary variance 1 / (m (1 - h m / 2)) (not 1/m): with
    # h m = 0.4 that is 0.625 vs 0.5, far outside the sampling error checked below.
    m, h = 2.0, 0.2
    algo = langevin.as_top_level_api(lambda x: -0.5 * m * jnp.sum(x**2), step_size=h)
    z, divs = _run(algo, jax.random.key(0), jnp.zeros(2), 200, 4000)  # (1 - h m)^200 ~ 1e-44
    var = np.var(np.asarray(z), axis=0, ddof=1)
    exact = 1.0 / (m * (1.0 - h * m / 2.0))
    se = exact * math.sqrt(2.0 / (4000 - 1))  # sd of a Gaussian sample variance
    np.testing.assert_array_less(np.abs(var - exact), 5 * se)
    assert not bool(np.any(np.asarray(divs)))


def test_state_and_info_shapes_and_the_info_is_theta_only():
    algo = langevin.as_top_level_api(lambda x: -0.5 * jnp.sum(x**2), step_size=0.1, divergence_radius=1.0)
    state = algo.init(jnp.array([2.0, 0.0]), jax.random.key(1))
    new, info = algo.step(jax.random.key(2), state)
    assert isinstance(info, langevin.LangevinInfo) and info._fields == ("diverging",)
    assert int(new.i) == 1 and bool(info.diverging) == bool(np.linalg.norm(np.asarray(new.z)) > 1.0)
    ustate = underdamped.as_top_level_api(lambda x: -0.5 * jnp.sum(x**2), 0.1, 1.0).init(jnp.zeros(2), jax.random.key(3))
    new_u, info_u = underdamped.as_top_level_api(lambda x: -0.5 * jnp.sum(x**2), 0.1, 1.0).step(jax.random.key(4), ustate)
    assert info_u._fields == ("diverging",) and set(new_u._fields) == {"i", "z", "v", "diverging", "rng_key"}


def test_underdamped_step_formula_with_the_logdensity_sign():
    # one Euler kinetic step by hand: v' = v - h (gamma v + grad U(x)) + sqrt(2 gamma h) xi, x' = x + h v'
    m, h, g = 3.0, 0.05, 2.0
    algo = underdamped.as_top_level_api(lambda x: -0.5 * m * jnp.sum(x**2), h, g)
    x0, v0 = jnp.array([1.0, -2.0]), jnp.array([0.5, 0.25])
    state = algo.init(x0, velocity=v0)
    key = jax.random.key(5)
    new, _ = algo.step(key, state)
    xi = np.asarray(gaussian_noise(key, (2,)))
    v1 = np.asarray(v0) - h * (g * np.asarray(v0) + m * np.asarray(x0)) + math.sqrt(2 * g * h) * xi
    np.testing.assert_allclose(np.asarray(new.v), v1, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(new.z), np.asarray(x0) + h * v1, rtol=1e-5)


def test_plan_supplies_step_size_and_friction_and_mismatches_are_refused():
    consts = LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=0.25)
    plan = plan_trajectory(consts, 500, 2, eps=1.0, delta=1e-5, horizon=2.0)
    logp = lambda x: -0.5 * jnp.sum(x**2)  # noqa: E731
    algo = langevin.as_top_level_api(logp, plan=plan)
    key = jax.random.key(7)
    new, _ = algo.step(key, algo.init(jnp.ones(2)))
    h = plan.step_size
    expect = np.ones(2) - h * np.ones(2) + math.sqrt(2 * h) * np.asarray(gaussian_noise(key, (2,)))
    np.testing.assert_allclose(np.asarray(new.z), expect, rtol=1e-5)
    with pytest.raises(ValueError, match="differs from the plan"):
        langevin.as_top_level_api(logp, step_size=2 * h, plan=plan)
    with pytest.raises(ValueError, match="made for kernel 'langevin'"):
        underdamped.as_top_level_api(logp, plan=plan)
    uplan = plan_trajectory(consts, 500, 2, eps=1.0, delta=1e-5, kernel="underdamped", friction=3.0)
    ualgo = underdamped.as_top_level_api(logp, plan=uplan)
    st = ualgo.init(jnp.zeros(2), velocity=jnp.ones(2))
    new_u, _ = ualgo.step(key, st)
    xi = np.asarray(gaussian_noise(key, (2,)))
    hu = uplan.step_size
    v1 = np.ones(2) - hu * (3.0 * np.ones(2)) + math.sqrt(2 * 3.0 * hu) * xi
    np.testing.assert_allclose(np.asarray(new_u.v), v1, rtol=1e-5)
    with pytest.raises(ValueError, match="step_size is required"):
        langevin.as_top_level_api(logp)
    with pytest.raises(ValueError, match="friction is required"):
        underdamped.as_top_level_api(logp, 0.1)
    with pytest.raises(ValueError, match="plan must be a dp_infer SamplingPlan"):
        langevin.as_top_level_api(logp, plan=object())


def test_vmapped_step_equals_per_chain_steps_and_keyed_transition_matches_sample_chain():
    logp = lambda x: -0.5 * jnp.sum((x - 1.0) ** 2)  # noqa: E731
    algo = langevin.as_top_level_api(logp, step_size=0.1)
    keys = jax.random.split(jax.random.key(11), 3)
    states = jax.vmap(lambda k: algo.init(jnp.zeros(2), k))(keys)
    batched, _ = jax.vmap(algo.step)(keys, states)
    for c in range(3):
        one, _ = algo.step(keys[c], algo.init(jnp.zeros(2), keys[c]))
        np.testing.assert_allclose(np.asarray(batched.z[c]), np.asarray(one.z), rtol=1e-6)
    # driving the step with the state's own key reproduces the lax.scan driver exactly
    transition = langevin.keyed_transition(algo.step)
    s = algo.init(jnp.zeros(2), keys[0])
    for _ in range(5):
        s, _ = transition(s)
    ch = langevin.sample_chain(keys[0], lambda x: -logp(x), jnp.zeros(2), 0.1, 5)
    np.testing.assert_allclose(np.asarray(s.z), np.asarray(ch.z[-1]), rtol=1e-6)


def test_sgld_top_level_at_q_one_is_clipped_full_batch_langevin():
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(30, 3)))
    y = jnp.asarray(rng.choice([0.0, 1.0], size=30))
    beta, h, C = 5.0, 0.05, 0.3
    base = losses.logistic(row_norm=100.0)
    algo = sgld.as_top_level_api(lambda t, x, yy: -base.fn(t, x, yy), X, y, beta=beta, step_size=h, q=1.0,
                                 clip_norm=C)
    clipped = losses.clipped_loss(base.fn, C)
    ref = langevin.as_top_level_api(lambda t: -beta * clipped.mean(t, X, y), step_size=h)
    key = jax.random.key(3)
    a, info = algo.step(key, algo.init(jnp.ones(3)))
    b, _ = ref.step(key, ref.init(jnp.ones(3)))
    np.testing.assert_allclose(np.asarray(a.z), np.asarray(b.z), rtol=1e-5)
    assert info._fields == ("diverging",)  # the batch mask is never reported
    with pytest.raises(ValueError, match="logdensity_fn must be"):
        sgld.as_top_level_api(3.0, X, y, beta=beta, step_size=h, q=1.0, clip_norm=C)


def test_top_level_api_projects_onto_a_domain():
    from dp_infer.domains import L2Ball

    algo = langevin.as_top_level_api(lambda x: -0.5 * jnp.sum(x**2), step_size=1.0, domain=L2Ball(2, 0.1))
    s = algo.init(jnp.zeros(2), jax.random.key(0))
    for k in jax.random.split(jax.random.key(1), 20):
        s, info = algo.step(k, s)
        assert float(jnp.linalg.norm(s.z)) <= 0.1 + 1e-6 and not bool(info.diverging)


def test_preconditioned_top_level_api_is_the_same_step():
    from dp_infer.kernels import preconditioned as pk

    A = np.array([[2.0, 0.5], [0.5, 1.0]])
    pre = pk.Preconditioner.from_precision(A)
    algo = pk.as_top_level_api(lambda t: -0.5 * t @ jnp.asarray(A, jnp.float32) @ t, 0.1, pre)
    key = jax.random.key(4)
    a, info = algo.step(key, algo.init(jnp.ones(2)))
    b, _ = pk.build_kernel(lambda t: jnp.asarray(A, jnp.float32) @ t, 0.1, pre)(key, algo.init(jnp.ones(2)))
    np.testing.assert_allclose(np.asarray(a.theta), np.asarray(b.theta), rtol=1e-6)
    assert info._fields == ("diverging",)
    with pytest.raises(ValueError, match="preconditioner must be"):
        pk.as_top_level_api(lambda t: -jnp.sum(t**2), 0.1)
