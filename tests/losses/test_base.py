"""Losses carry correct constants; clipping enforces sensitivity; domains project correctly."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer import datasets, domains, losses


def _unit_rows(rng, n, d, scale=1.0):
    X = rng.normal(size=(n, d))
    return scale * X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.mark.parametrize("make", [
    lambda: losses.logistic(row_norm=1.0),
    lambda: losses.huber(threshold=0.7, row_norm=1.0),
    lambda: losses.squared(label_bound=2.0, domain=domains.L2Ball(3, 1.5)),
])
def test_declared_constants_bound_per_example_gradients(make):
    """Random search over theta and pairs of examples never beats the declared L and G."""
    loss = make()
    rng = np.random.default_rng(0)
    d = 3
    X = _unit_rows(rng, 400, d)
    y = rng.choice([0.0, 1.0], size=400) if loss.name == "logistic" else rng.uniform(-2, 2, size=400)
    thetas = rng.normal(size=(200, d)) * 3
    if loss.domain is not None:
        thetas = np.asarray(loss.domain.project(jnp.asarray(thetas)))
    g = jax.vmap(lambda t: jax.vmap(jax.grad(loss.example), in_axes=(None, 0, 0))(t, X, y))(thetas)
    norms = np.linalg.norm(g, axis=-1)
    assert norms.max() <= loss.constants.lipschitz * (1 + 1e-5)
    diffs = np.linalg.norm(g[:, :, None, :] - g[:, None, :, :], axis=-1)
    assert diffs.max() <= loss.constants.grad_diff * (1 + 1e-5)


def test_logistic_grad_diff_is_attained():
    """G = 2R is approached by nearly parallel unit rows x, x' with labels 0 and 1 and a theta
    with <theta, x> -> +inf, <theta, x'> -> -inf: the difference tends to |x + x'| -> 2."""
    loss = losses.logistic(row_norm=1.0)
    phi = 0.01
    x = jnp.array([1.0, 0.0])
    x2 = jnp.array([math.cos(phi), math.sin(phi)])
    th = jnp.array([30.0, -6000.0])
    g1 = jax.grad(loss.example)(th, x, 0.0)
    g2 = jax.grad(loss.example)(th, x2, 1.0)
    assert float(jnp.linalg.norm(g1 - g2)) == pytest.approx(2 * math.cos(phi / 2), rel=1e-5)
    assert float(jnp.linalg.norm(g1 - g2)) <= loss.constants.grad_diff


def test_clipped_gradient_equals_mean_of_clipped_per_example_gradients():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(64, 4)) * 3
    y = rng.normal(size=64) * 5
    fn = lambda t, x, yy: jnp.cosh(jnp.dot(t, x) - yy)  # unbounded gradient
    loss = losses.clipped_loss(fn, clip_norm=0.8)
    th = jnp.asarray(rng.normal(size=4))
    per = np.asarray(jax.vmap(jax.grad(fn), in_axes=(None, 0, 0))(th, X, y))
    nrm = np.linalg.norm(per, axis=1, keepdims=True)
    expected = (per * np.minimum(1.0, 0.8 / nrm)).mean(axis=0)
    got = np.asarray(jax.grad(loss.mean)(th, jnp.asarray(X), jnp.asarray(y)))
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-7)
    # the value is the unclipped mean loss
    assert float(loss.mean(th, jnp.asarray(X), jnp.asarray(y))) == pytest.approx(
        float(np.mean(np.cosh(X @ np.asarray(th) - y))), rel=1e-5)
    assert 0 < losses.clipped_fraction(loss, th, jnp.asarray(X), jnp.asarray(y)) <= 1


def test_clipped_sensitivity_holds_on_adversarial_neighbours():
    """Replace one row by an extreme one: the mean-gradient change never exceeds G/n."""
    rng = np.random.default_rng(2)
    n, d = 50, 3
    fn = lambda t, x, yy: (jnp.dot(t, x) - yy) ** 4
    loss = losses.clipped_loss(fn, clip_norm=1.5)
    X = rng.normal(size=(n, d))
    y = rng.normal(size=n)
    worst = 0.0
    for trial in range(20):
        X2, y2 = X.copy(), y.copy()
        X2[trial] = rng.normal(size=d) * 100
        y2[trial] = -1e3 * np.sign(rng.normal())
        for th in rng.normal(size=(10, d)):
            g1 = jax.grad(loss.mean)(jnp.asarray(th), jnp.asarray(X), jnp.asarray(y))
            g2 = jax.grad(loss.mean)(jnp.asarray(th), jnp.asarray(X2), jnp.asarray(y2))
            worst = max(worst, float(jnp.linalg.norm(g1 - g2)))
    assert worst <= loss.gradient_sensitivity(n) * (1 + 1e-5)
    assert worst > 0.5 * loss.gradient_sensitivity(n)  # the adversary gets close to the bound


def test_multinomial_constants():
    loss = losses.multinomial_logistic(3, row_norm=1.0)
    rng = np.random.default_rng(3)
    X = _unit_rows(rng, 100, 4)
    y = rng.integers(0, 3, size=100).astype(float)
    th = jnp.asarray(rng.normal(size=12) * 4)
    g = jax.vmap(jax.grad(loss.example), in_axes=(None, 0, 0))(th, X, y)
    assert np.linalg.norm(g, axis=1).max() <= loss.constants.lipschitz + 1e-6
    # Hessian bound M = R^2/2
    H = jax.hessian(loss.example)(th, X[0], y[0])
    assert np.linalg.eigvalsh(np.asarray(H)).max() <= loss.constants.smoothness + 1e-6


def test_bad_inputs_name_the_parameter():
    with pytest.raises(ValueError, match="row_norm"):
        losses.logistic(row_norm=0)
    with pytest.raises(ValueError, match="l2"):
        losses.logistic(l2=-1)
    with pytest.raises(ValueError, match="domain"):
        losses.squared(label_bound=1.0, domain=domains.Euclidean(3))
    with pytest.raises(ValueError, match="clip_norm"):
        losses.clipped_loss(lambda t, x, y: 0.0, clip_norm=float("nan"))
    loss = losses.logistic()
    with pytest.raises(ValueError, match="row_norm"):
        loss.check_data(np.ones((3, 2)), np.zeros(3))  # norm sqrt(2) > 1
    with pytest.raises(ValueError, match="non-finite"):
        loss.check_data(np.array([[np.nan, 0.0]]), np.zeros(1))
    with pytest.raises(ValueError, match="0/1"):
        loss.check_data(np.array([[0.5, 0.0]]), np.array([2.0]))
    with pytest.raises(ValueError, match="2-D"):
        loss.check_data(np.zeros(3), np.zeros(3))
