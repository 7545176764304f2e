"""Generalised linear losses evaluated through their linear index (``X @ theta``) and the
reparametrised potential ``V(phi) = U(C phi)`` with ``X C`` formed once: the same functions as the
per-example definitions, checked against them, against float64 closed forms, and on the chain the
posterior mode actually runs."""

import math
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer import losses
from dp_infer.losses import count as lc
from dp_infer.losses import nonsmooth as ln
from dp_infer.domains import L2Ball
from dp_infer.infer.posterior import fit_posterior
from dp_infer.kernels.preconditioned import Preconditioner, reparametrise
from dp_infer.potentials import gibbs_potential, rashomon_potential

N, D = 60, 4
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, D))
X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
Y_BIN = RNG.integers(0, 2, N).astype(float)
Y_REAL = np.clip(RNG.normal(size=N), -2.0, 2.0)
Y_COUNT = RNG.integers(0, 4, N).astype(float)
BALL = L2Ball(D, 3.0)
C = RNG.normal(size=(D, D)) * 0.3 + np.eye(D)
THETA = RNG.normal(size=D) * 0.5

GLMS = {
    "logistic": (lambda: losses.logistic(l2=0.3), Y_BIN),
    "squared": (lambda: losses.squared(3.0, BALL), Y_REAL),
    "huber": (lambda: losses.huber(0.5, l2=0.1), Y_REAL),
    "smoothed_hinge": (lambda: losses.smoothed_hinge(0.5), Y_BIN),
    "hinge": (lambda: ln.hinge(), Y_BIN),
    "absolute": (lambda: ln.absolute(), Y_REAL),
    "quantile": (lambda: ln.quantile(0.3), Y_REAL),
    "huberised_hinge": (lambda: ln.smoothed_hinge(0.4, l2=0.2), Y_BIN),
    "smoothed_quantile": (lambda: ln.smoothed_quantile(0.7, 0.3), Y_REAL),
    "poisson": (lambda: lc.poisson(5.0, BALL), Y_COUNT),
}

# float32 evaluation of sums of ~60 terms of size O(1): relative error ~ 60 * 6e-8 ~ 4e-6
RTOL = 2e-5


def _f32(a):
    return jnp.asarray(a, jnp.float32)


@pytest.mark.parametrize("name", sorted(GLMS))
def test_index_path_is_the_per_example_loss_and_its_gradient(name):
    make, y = GLMS[name]
    loss = make()
    assert loss.index_fn is not None
    Xj, yj, th = _f32(X), _f32(y), _f32(THETA)
    by_rows = jax.vmap(loss.example, in_axes=(None, 0, 0))
    np.testing.assert_allclose(loss.per_example(th, Xj, yj), by_rows(th, Xj, yj), rtol=RTOL, atol=1e-6)
    g_index = jax.grad(lambda t: loss.mean(t, Xj, yj))(th)
    g_rows = jax.grad(lambda t: jnp.mean(by_rows(t, Xj, yj)))(th)
    np.testing.assert_allclose(g_index, g_rows, rtol=RTOL, atol=1e-6)


def test_logistic_index_path_against_float64_closed_form():
    loss = losses.logistic(l2=0.3)
    z = X @ THETA
    want = np.logaddexp(0.0, z) - Y_BIN * z + 0.15 * THETA @ THETA
    grad = X.T @ (1.0 / (1.0 + np.exp(-z)) - Y_BIN) / N + 0.3 * THETA
    np.testing.assert_allclose(loss.per_example(_f32(THETA), _f32(X), _f32(Y_BIN)), want, rtol=1e-5)
    np.testing.assert_allclose(jax.grad(lambda t: loss.mean(t, _f32(X), _f32(Y_BIN)))(_f32(THETA)), grad,
                               rtol=1e-4, atol=1e-6)


def _potentials(loss, y):
    """Gibbs with L2 and theta0, with a prior term, and thresholded (both sides of the max)."""
    lam = jnp.asarray(np.linspace(0.5, 2.0, D), jnp.float32)
    plain = gibbs_potential(loss, X, y, 7.0, lam=0.2, theta0=np.ones(D))
    prior = replace(plain, prior_potential=lambda t: 0.5 * jnp.sum(lam * t * t))
    L0 = float(loss.mean(_f32(C @ THETA), _f32(X), _f32(y)))
    low = rashomon_potential(loss, X, y, 5.0, psi=0.1, L_star=L0 - 1.0)   # loss side of the max
    high = rashomon_potential(loss, X, y, 5.0, psi=0.1, L_star=L0 + 1.0)  # flat side
    return {"plain": plain, "prior": prior, "threshold_loss_side": low, "threshold_flat_side": high}


@pytest.mark.parametrize("name", sorted(GLMS))
def test_reparametrised_potential_is_u_of_c_phi(name):
    make, y = GLMS[name]
    loss = make()
    Cj, phi = _f32(C), _f32(THETA)
    for kind, U in _potentials(loss, y).items():
        V = U.reparametrised(C)
        want = U(Cj @ phi)
        np.testing.assert_allclose(V(phi), want, rtol=RTOL, atol=1e-5, err_msg=kind)
        np.testing.assert_allclose(jax.grad(V)(phi), jax.grad(lambda p: U(Cj @ p))(phi), rtol=1e-4, atol=2e-5,
                                   err_msg=kind)
    flat = _potentials(loss, y)["threshold_flat_side"]
    # on the flat side only the data-free terms remain: the gradient is exactly zero there
    assert float(jnp.max(jnp.abs(jax.grad(flat.reparametrised(C))(phi)))) == 0.0


def test_losses_without_an_index_keep_the_composed_function():
    multi = losses.multinomial_logistic(3)
    assert multi.index_fn is None
    yk = RNG.integers(0, 3, N).astype(float)
    U = gibbs_potential(multi, X, yk, 3.0, lam=0.5)
    Ck = np.eye(3 * D) + 0.1 * np.tri(3 * D)
    phi = _f32(RNG.normal(size=3 * D))
    assert float(U.reparametrised(Ck)(phi)) == float(U(_f32(Ck) @ phi))
    # a clipped GLM: the clipped gradient must be the one differentiated, not the index shortcut's
    clipped = replace(losses.logistic(), clip_norm=0.05)
    Uc = gibbs_potential(clipped, X, Y_BIN, 9.0)
    g = jax.grad(Uc.reparametrised(C))(_f32(THETA))
    g_want = jax.grad(lambda p: Uc(_f32(C) @ p))(_f32(THETA))
    np.testing.assert_array_equal(np.asarray(g), np.asarray(g_want))
    g_unclipped = jax.grad(lambda p: gibbs_potential(losses.logistic(), X, Y_BIN, 9.0)(_f32(C) @ p))(_f32(THETA))
    assert float(jnp.max(jnp.abs(g - g_unclipped))) > 1e-3


def test_reparametrised_refuses_a_matrix_of_the_wrong_shape():
    U = gibbs_potential(losses.logistic(), X, Y_BIN, 2.0)
    with pytest.raises(ValueError, match=r"C must have shape \(4, 4\), got \(3, 3\)"):
        U.reparametrised(np.eye(3))


def test_index_losses_needs_a_declared_index():
    with pytest.raises(ValueError, match="not declared generalised linear"):
        losses.multinomial_logistic(3).index_losses(jnp.zeros(3), jnp.zeros(3), jnp.zeros(12))


def test_kernel_adapter_uses_the_potentials_own_reparametrisation():
    U = gibbs_potential(losses.logistic(l2=0.1), X, Y_BIN, 4.0)
    pre = Preconditioner.from_matrix(C @ C.T)
    V, to_theta, _ = reparametrise(U, pre)
    phi = _f32(THETA)
    np.testing.assert_allclose(V(phi), U(to_theta(phi)), rtol=RTOL)
    np.testing.assert_allclose(jax.grad(V)(phi), jax.grad(lambda p: U(to_theta(p)))(phi), rtol=1e-4, atol=1e-6)


def test_posterior_mode_runs_the_same_chain_with_and_without_the_index():
    """The fast path changes only float rounding: the same seed gives the same released draws
    (to rounding amplified over the run; a wrong potential would move them by O(posterior sd))."""
    rng = np.random.default_rng(4)
    Xd = np.concatenate([np.ones((300, 1)), rng.uniform(-1, 1, size=(300, 2))], axis=1)
    yd = (Xd @ np.array([0.3, 1.5, -1.0]) + 0.5 * rng.normal(size=300) > 0).astype(float)
    loss = losses.logistic(row_norm=math.sqrt(3))
    # the unclipped target: the clip needs the index function (a loss without one is not clipped)
    kw = dict(eps=1.0, delta=1e-5, prior_precision=0.5, ess=50, preconditioner="prior", seed=8, progress_bar=False,
              clip_radius=None)
    fast = fit_posterior(loss, Xd, yd, **kw)
    slow = fit_posterior(replace(loss, index_fn=None), Xd, yd, **kw)
    assert fast.plan.as_dict() == slow.plan.as_dict()
    a, b = np.asarray(fast.draws()), np.asarray(slow.draws())
    sd = a.reshape(-1, a.shape[-1]).std(axis=0)
    assert np.max(np.abs(a - b)) <= 1e-3 * np.max(sd)


def test_reparametrised_keeps_the_matrix_in_float32_for_bfloat16_rows():
    """Rows stored in bfloat16 (a memory layout) must not round C to bfloat16 (~3 digits)."""
    loss = losses.logistic()
    Xb = jnp.asarray(X, jnp.bfloat16)
    U = replace(gibbs_potential(loss, X, Y_BIN, 3.0), X=Xb)
    Cn = C + 1e-3  # entries that bfloat16 would round by ~1e-2 relative
    V = U.reparametrised(Cn)
    phi = _f32(THETA)
    # the oracle: the same bfloat16 rows times the float32 C, then the float32 loss
    z = (jnp.asarray(Xb, jnp.float32) @ _f32(Cn)) @ phi
    want = 3.0 * jnp.mean(jax.nn.softplus(z) - _f32(Y_BIN) * z)
    assert V(phi).dtype == jnp.float32
    np.testing.assert_allclose(V(phi), want, rtol=1e-5)
