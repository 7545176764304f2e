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


def test_clip_rows_reports_count():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 2.0]])
    Xc, rep = datasets.clip_rows(X, row_norm=1.0)
    assert rep.n_clipped == 2 and rep.n_rows == 3
    np.testing.assert_allclose(np.linalg.norm(Xc, axis=1), [1.0, 0.5, 1.0])
    np.testing.assert_allclose(Xc[0], [0.6, 0.8])


def test_adult_is_embedded_and_bounded():
    a = datasets.load_adult()
    assert a.X_train.shape[0] == 30162 and a.X_test.shape[0] == 15060  # rows without '?'
    assert a.dropped_missing == {"train": 32561 - 30162, "test": 16281 - 15060}
    assert np.linalg.norm(a.X_train, axis=1).max() <= 1 + 1e-12
    assert a.X_train.shape[1] == len(a.feature_names)
    assert set(np.unique(a.y_train)) == {0.0, 1.0}
    assert "CC BY 4.0" in a.attribution


@pytest.mark.parametrize("dom", [domains.L2Ball(3, 2.0, np.array([1.0, 0, 0])),
                                 domains.Box(np.array([-1.0, 0.0, 2.0]), np.array([1.0, 3.0, 2.5]))])
def test_domain_projection_properties(dom):
    rng = np.random.default_rng(4)
    pts = jnp.asarray(rng.normal(size=(500, 3)) * 5)
    p = dom.project(pts)
    np.testing.assert_allclose(dom.project(p), p, atol=1e-5)             # idempotent
    assert bool(jnp.all(dom.contains(p, tol=1e-5)))
    a, b = p[:250], p[250:]
    assert bool(jnp.all(jnp.linalg.norm(a - b, axis=1)
                        <= jnp.linalg.norm(pts[:250] - pts[250:], axis=1) + 1e-5))  # non-expansive
    u = dom.sample_uniform(jax.random.PRNGKey(0), (2000,))
    assert bool(jnp.all(dom.contains(u, tol=1e-5)))
    # no two points farther apart than the diameter
    assert float(jnp.max(jnp.linalg.norm(u[:1000] - u[1000:], axis=1))) <= dom.diameter + 1e-6
    assert bool(dom.contains(dom.default_init()))


def test_l2ball_uniform_radial_law():
    """Uniform in a d-ball: P(||x|| <= r R) = r^d; check at r = 0.8 within 4 binomial s.e."""
    d, N = 3, 20000
    u = domains.L2Ball(d, 2.0).sample_uniform(jax.random.PRNGKey(1), (N,))
    frac = float(jnp.mean(jnp.linalg.norm(u, axis=1) <= 1.6))
    p = 0.8**d
    assert abs(frac - p) < 4 * math.sqrt(p * (1 - p) / N)


def test_domain_bad_inputs():
    with pytest.raises(ValueError, match="radius"):
        domains.L2Ball(2, -1.0)
    with pytest.raises(ValueError, match="upper"):
        domains.Box(np.array([1.0]), np.array([0.0]))
    with pytest.raises(ValueError, match="dim"):
        domains.Euclidean(0)
