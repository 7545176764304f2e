"""Per-example gradients clipped in the preconditioner's metric (dp_infer.losses.metric_clip).

Oracles: the clipped derivative ``clip(phi', -a, a)`` computed independently of the closed-form
Huberised links; DP-SGD's clip of ``C^T g`` written out by hand; quadrature of the clipped drift
against the Huberised potential (exact integration); the Girsanov divergence of the exact
Gaussian transitions against the accountant's mu for the worst neighbouring pair; an empirical
audit of the privacy-loss random variable on that pair.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

from dp_infer import losses
from dp_infer.losses.metric_clip import clip_levels, huberised_link, huberised_potential
from dp_infer.privacy import path as path_privacy



@pytest.fixture(autouse=True)
def _float64():
    """These oracles compare in float64; enabled per test (a module-level config update would switch
    every later test of the session to float64)."""
    with jax.enable_x64(True):
        yield


def _link_derivative(loss, z, y):
    return jax.vmap(jax.grad(lambda zz, yy: loss.index_fn(zz, yy)))(z, y)


@pytest.mark.parametrize("loss", [losses.logistic(row_norm=2.0), losses.huber(threshold=1.5, row_norm=2.0),
                                  losses.smoothed_hinge(smoothing=0.5, row_norm=2.0)], ids=lambda l: l.name)
def test_huberised_derivative_is_the_clipped_derivative(loss):
    f = huberised_link(loss)
    z = jnp.linspace(-12.0, 12.0, 481, dtype=jnp.float64)
    for y0 in (0.0, 1.0):
        y = jnp.full_like(z, y0)
        for a0 in (0.03, 0.3, 0.7, 1.0, 2.0, math.inf):
            a = jnp.full_like(z, a0)
            got = jax.vmap(jax.grad(f, argnums=0))(z, y, a)
            want = jnp.clip(_link_derivative(loss, z, y), -a0, a0)
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-9)
            # unchanged where nothing is clipped; convex (second differences >= 0, up to rounding)
            v = np.asarray(f(z, y, a))
            same = np.abs(np.asarray(_link_derivative(loss, z, y))) <= a0
            np.testing.assert_allclose(v[same], np.asarray(loss.index_fn(z, y))[same], atol=1e-12)
            assert np.all(np.diff(v, 2) >= -1e-10)
            assert np.all(np.isfinite(v))


def test_clipped_per_example_gradients_match_dp_sgd_clip_in_phi():
    """grad_phi of each row's Huberised term == C^T g * min(1, tau / ||C^T g||) (DP-SGD's clip)."""
    rng = np.random.default_rng(0)
    n, d = 40, 3
    X = rng.normal(size=(n, d)) * rng.uniform(0.2, 3.0, size=(n, 1))
    y = (rng.uniform(size=n) < 0.5).astype(float)
    A = rng.normal(size=(d, d))
    C = np.linalg.cholesky(A @ A.T + 0.5 * np.eye(d))
    tau = 0.4
    loss = losses.logistic(row_norm=10.0)
    f = huberised_link(loss)
    XC = jnp.asarray(X @ C)
    a = clip_levels(XC, tau)
    phi = jnp.asarray(rng.normal(size=d))
    per_row = jax.vmap(jax.grad(lambda p, xc, yy, aa: f(jnp.dot(xc, p), yy, aa)), in_axes=(None, 0, 0, 0))(
        phi, XC, jnp.asarray(y), a)
    theta = C @ np.asarray(phi)
    g = (1 / (1 + np.exp(-X @ theta)) - y)[:, None] * X  # unclipped per-example gradients in theta
    Cg = g @ C
    want = Cg * np.minimum(1.0, tau / np.linalg.norm(Cg, axis=1))[:, None]
    np.testing.assert_allclose(np.asarray(per_row), want, atol=1e-10)
    assert np.max(np.linalg.norm(np.asarray(per_row), axis=1)) <= tau * (1 + 1e-12)
    assert np.sum(np.linalg.norm(Cg, axis=1) > tau) >= 5  # the test exercises the clip


def test_clipped_drift_integrates_to_the_huberised_potential():
    """Exact integration (1-D): the clipped chain's drift, built by hand, is -U' of the Huberised
    Gibbs potential, so its stationary law is that potential's density (quadrature, no Monte Carlo)."""
    rng = np.random.default_rng(1)
    n = 25  # noqa: the drift quadrature has a kink per clipped row
    x = rng.normal(size=n) * 3.0
    y = (rng.uniform(size=n) < 0.4).astype(float)
    c, tau, beta, lam = 0.7, 0.3, 40.0, 0.5
    loss = losses.logistic(row_norm=20.0)
    U, V = huberised_potential(loss, x[:, None], y, beta=beta, C=np.array([[c]]), tau=tau, prior_precision=[lam])

    def clipped_drift(th):  # dU/dtheta from per-example gradients clipped to tau in phi = theta / c
        g = (1 / (1 + np.exp(-x * th)) - y) * x
        cg = c * g
        cg = cg * np.minimum(1.0, tau / np.abs(cg))
        return beta * np.mean(cg) / c + lam * th

    a = tau / np.abs(c * x)  # the kinks: theta where a row's |phi'| reaches its level
    kinks = [math.log((1 - ai) / ai) / ((2 * yi - 1) * xi) for ai, xi, yi in zip(a, x, y) if ai < 1]
    for th in (-3.0, -0.5, 0.8, 2.5):
        pts = [k for k in kinks if min(0.0, th) < k < max(0.0, th)] or None
        val, _ = integrate.quad(clipped_drift, 0.0, th, epsabs=1e-11, epsrel=1e-11, limit=400, points=pts)
        assert abs(val - (float(U(jnp.array([th]))) - float(U(jnp.array([0.0]))))) < 1e-8


@pytest.mark.slow
def test_clipped_chain_draws_the_huberised_density():
    """The clipped chain's draws (ULA, small step) against the Huberised Gibbs density's first two
    moments by quadrature (1-D)."""
    rng = np.random.default_rng(1)
    n = 25
    x = rng.normal(size=n) * 3.0
    y = (rng.uniform(size=n) < 0.4).astype(float)
    c, tau, beta, lam = 0.7, 0.3, 40.0, 0.5
    loss = losses.logistic(row_norm=20.0)
    U, V = huberised_potential(loss, x[:, None], y, beta=beta, C=np.array([[c]]), tau=tau, prior_precision=[lam])
    Z, _ = integrate.quad(lambda t: math.exp(-float(U(jnp.array([t])))), -20, 20, limit=400)
    m1, _ = integrate.quad(lambda t: t * math.exp(-float(U(jnp.array([t])))) / Z, -20, 20, limit=400)
    m2, _ = integrate.quad(lambda t: t * t * math.exp(-float(U(jnp.array([t])))) / Z, -20, 20, limit=400)
    sd = math.sqrt(m2 - m1 * m1)
    grad_V = jax.jit(jax.vmap(jax.grad(lambda p: V(p))))
    h = 0.01 * sd * sd / c / c  # small step in phi: ULA's bias O(h) is far below the MC error
    key = jax.random.PRNGKey(3)
    phi = jnp.zeros((2000, 1))
    for k in range(1500):  # 15 relaxation times (h x curvature ~ 0.01)
        key, sub = jax.random.split(key)
        phi = phi - h * grad_V(phi) + jnp.sqrt(2 * h) * jax.random.normal(sub, phi.shape)
    th = c * np.asarray(phi[:, 0])
    se = sd / math.sqrt(th.size)  # independent chains: MC se of the mean
    assert abs(th.mean() - m1) < 4 * se + 0.02 * sd
    assert abs(th.std() / sd - 1) < 4 / math.sqrt(2 * th.size) + 0.03


def test_worst_pair_attains_the_accountant_mu_and_audit():
    """Neighbours differing in the rarest admissible row (huge leverage, opposite gradient signs):
    every step's mean shift is exactly 2 tau beta h / n in phi, so the path's Girsanov divergence
    equals the accountant's mu = beta (2 tau / n) sqrt(t / 2); the privacy-loss random variable of
    simulated paths is N(mu^2 / 2, mu^2) (empirical audit, MC tolerance)."""
    rng = np.random.default_rng(2)
    n = 30
    x = rng.uniform(-0.5, 0.5, size=n)
    y = (rng.uniform(size=n) < 0.5).astype(float)
    R = 50.0  # the rarest admissible row: far outside the others, clipped at every reachable theta
    xD, xD2 = np.append(x, R), np.append(x, -R)
    yD = np.append(y, 1.0)
    n += 1
    c, tau, beta, lam, h, steps = 0.02, 0.001, 200.0, 2000.0, 0.01, 100  # theta sd ~ 0.02; clip window |theta| < 0.14
    loss = losses.logistic(row_norm=100.0)
    _, VD = huberised_potential(loss, xD[:, None], yD, beta=beta, C=np.array([[c]]), tau=tau, prior_precision=[lam])
    _, VD2 = huberised_potential(loss, xD2[:, None], yD, beta=beta, C=np.array([[c]]), tau=tau, prior_precision=[lam])
    gD, gD2 = jax.jit(jax.vmap(jax.grad(VD))), jax.jit(jax.vmap(jax.grad(VD2)))
    mu_plan = path_privacy.path_mu(beta, 2 * tau / n, steps * h)
    key = jax.random.PRNGKey(4)
    B = 4000
    phi = jnp.zeros((B, 1))
    L = np.zeros(B)  # log p_D(path) - log p_D'(path), exact Gaussian transitions
    shifts = []
    for k in range(steps):
        key, sub = jax.random.split(key)
        mD, mD2 = phi - h * gD(phi), phi - h * gD2(phi)
        new = mD + jnp.sqrt(2 * h) * jax.random.normal(sub, phi.shape)
        L += np.asarray((jnp.sum((new - mD2) ** 2, 1) - jnp.sum((new - mD) ** 2, 1)) / (4 * h))
        shifts.append(np.asarray(jnp.abs(mD - mD2)[:, 0]))
        phi = new
    shifts = np.array(shifts)
    np.testing.assert_allclose(shifts, 2 * tau * beta * h / n, rtol=1e-9)  # attained at every step
    mu_real = math.sqrt(np.sum(shifts[:, 0] ** 2) / (2 * h))
    assert abs(mu_real - mu_plan) < 1e-9 * mu_plan
    # audit: mean mu^2/2, sd mu (MC se of the mean mu / sqrt(B), of the sd mu / sqrt(2B))
    assert abs(L.mean() - mu_plan ** 2 / 2) < 4 * mu_plan / math.sqrt(B)
    assert abs(L.std() / mu_plan - 1) < 4 / math.sqrt(2 * B)
