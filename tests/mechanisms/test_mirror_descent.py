"""PDA-DPMD (seed 004 ch. 4): reduces exactly to preconditioned DP-GD (quadratic mirror map) and to
DP-GD (identity map, or a public Hessian proportional to I); accounting against dp-accounting;
the local noise geometry of Theorem 81."""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer.losses import huber, logistic
from dp_infer.mechanisms import mirror_descent as MD
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.randomness import gaussian_noise


def _regression(n, d, seed=0, iso=False):
    rng = np.random.default_rng(seed)
    if iso:  # rows e_j repeated: X^T X / n = I / d exactly
        X = np.tile(np.eye(d), (n // d, 1)) * 0.9
    else:
        X = rng.normal(size=(n, d)) * np.linspace(0.2, 1.0, d)
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    theta = rng.normal(size=d)
    return X, X @ theta + 0.1 * rng.normal(size=X.shape[0])


def test_exact_mirror_step_equals_the_quadratic_one_for_a_quadratic_mirror_map():
    # huber with a huge threshold is the squared loss on these data: Psi is quadratic, so the Newton
    # solve of grad Psi(t) = grad Psi(theta) - eta v lands on theta - eta H^{-1} v
    X, y = _regression(400, 4)
    Xp, yp = _regression(60, 4, seed=1)
    loss = huber(threshold=1e3)
    kw = dict(eps=1.0, delta=1e-5, num_steps=30, step_size=0.5, clip_norm=1.0, public_l2=1e-2, seed=7)
    for output in ("average", "last"):
        a = MD.pda_dpmd(loss, X, y, Xp, yp, mirror="quadratic", output=output, **kw)
        b = MD.pda_dpmd(loss, X, y, Xp, yp, mirror="exact", output=output, **kw)
        np.testing.assert_allclose(a.value, b.value, rtol=1e-9, atol=1e-10)


def test_identity_mirror_is_dp_gd_warm_started_with_the_same_noise():
    X, y = _regression(300, 3)
    Xp, yp = _regression(50, 3, seed=2)
    loss = huber(threshold=0.5)
    T, eta, C = 20, 0.7, 0.5
    r = MD.dp_gd_warm_start(loss, X, y, Xp, yp, eps=2.0, delta=1e-6, num_steps=T, step_size=eta, clip_norm=C,
                            seed=11, output="last")
    # hand-written DP-GD from the public minimiser with the same key schedule
    from dp_infer.randomness import secret_key

    key, _ = secret_key(11)
    with jax.enable_x64(True):
        keys = jax.random.split(key, T)
        th = np.array(r.params["theta_public"])
        for t in range(T):
            g = np.asarray(jax.vmap(jax.grad(loss.example), in_axes=(None, 0, 0))(jnp.asarray(th), jnp.asarray(X), jnp.asarray(y)))
            g = g * np.minimum(1.0, C / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-300))
            b = r.params["sigma"] * np.asarray(gaussian_noise(keys[t], th.shape, jnp.float64))
            th = th - eta * (g.mean(axis=0) + b)
    np.testing.assert_allclose(r.value, th, rtol=1e-9, atol=1e-12)


def test_pda_dpmd_equals_dp_gd_when_the_public_hessian_is_isotropic():
    # normalised so that H^{-1} has largest eigenvalue 1: H ∝ I gives exactly the DP-GD update
    d = 4
    X, y = _regression(400, d, iso=True)
    Xp, yp = _regression(40, d, seed=3, iso=True)
    loss = huber(threshold=1e3)
    kw = dict(eps=1.0, delta=1e-5, num_steps=15, step_size=0.9, clip_norm=1.0, public_l2=1e-3, seed=5)
    a = MD.pda_dpmd(loss, X, y, Xp, yp, mirror="quadratic", **kw)
    b = MD.dp_gd_warm_start(loss, X, y, Xp, yp, **kw)
    np.testing.assert_allclose(a.params["preconditioner_eigenvalues"], 1.0, rtol=1e-9)
    np.testing.assert_allclose(a.value, b.value, rtol=1e-8, atol=1e-10)


def test_accounting_matches_the_target_and_dp_accounting():
    for eps, delta, T, n in [(1.0, 1e-5, 100, 5000), (0.5, 1e-6, 400, 20000), (4.0, 1e-5, 10, 300)]:
        sigma = MD.noise_for_target(eps, delta, n=n, num_steps=T, clip_norm=1.0)
        # per step: sensitivity 2C/n of the clipped mean (replace-one), noise sigma
        mu_step = 2.0 / (n * sigma)
        assert mu_step * math.sqrt(T) == pytest.approx(gdp_mu(eps, delta), rel=1e-12)
        from dp_infer.privacy.accountant import Accountant
        from dp_infer.privacy.events import GdpEvent

        ours = Accountant([(GdpEvent(mu=mu_step), T)]).get_epsilon(delta)
        assert ours <= eps * (1 + 1e-9) and ours == pytest.approx(eps, rel=1e-6)
        # dp-accounting: T Gaussian mechanisms with noise multiplier sigma / sensitivity
        ev = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(noise_multiplier=1.0 / mu_step), T)
        pld = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4).compose(ev)
        rdp = dp_accounting.rdp.RdpAccountant().compose(ev)
        assert pld.get_epsilon(delta) == pytest.approx(eps, abs=0.02)
        assert rdp.get_epsilon(delta) >= ours  # RDP conversion is looser than the exact GDP profile


def test_report_recomputes_the_spent_budget():
    X, y = _regression(500, 3)
    Xp, yp = _regression(30, 3, seed=4)
    r = MD.pda_dpmd(huber(), X, y, Xp, yp, eps=1.0, delta=1e-5, num_steps=50, seed=1)
    rep = r.report(1e-5)
    assert rep["epsilon"] == pytest.approx(1.0, rel=1e-6) and rep["epsilon"] <= 1.0 + 1e-9
    assert rep["mu"] == pytest.approx(gdp_mu(1.0, 1e-5), rel=1e-9)
    assert rep["randomness"]["source"] == "seed given by the caller"
    assert rep["params"]["num_steps"] == 50 and r.events[0][1] == 50


def test_theorem_81_noise_displacement():
    # one step's noise displacement -eta H^{-1} b along a unit v: E|<.,v>| = eta sigma sqrt(2/pi) |H^{-1} v|
    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 4))
    H = A @ A.T + 0.5 * np.eye(4)
    lam, V = np.linalg.eigh(H)
    v = rng.normal(size=4)
    v /= np.linalg.norm(v)
    a = V.T @ v
    eta, sigma, N = 0.3, 2.0, 400_000
    b = sigma * rng.normal(size=(N, 4))
    disp = -eta * np.linalg.solve(H, b.T).T @ v
    want = eta * sigma * math.sqrt(2 / math.pi) * math.sqrt(np.sum((a / lam) ** 2))
    assert np.mean(np.abs(disp)) == pytest.approx(want, rel=5 * math.sqrt((math.pi / 2 - 1) / N))


def test_bad_inputs_are_refused_before_any_private_work():
    X, y = _regression(100, 3)
    Xp, yp = _regression(20, 3, seed=1)
    with pytest.raises(ValueError, match="mirror"):
        MD.pda_dpmd(huber(), X, y, Xp, yp, eps=1.0, delta=1e-5, mirror="entropy")
    with pytest.raises(ValueError, match="columns"):
        MD.pda_dpmd(huber(), X, y, Xp[:, :2], yp, eps=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="step_size"):
        MD.pda_dpmd(huber(), X, y, Xp, yp, eps=1.0, delta=1e-5, step_size=0.0)
    with pytest.raises(ValueError, match="public_l2"):
        MD.pda_dpmd(logistic(), X, (y > 0).astype(float), Xp[:2], (yp[:2] > 0).astype(float), eps=1.0,
                    delta=1e-5, public_l2=0.0)
    with pytest.raises(ValueError, match="mirror"):
        MD.dp_gd_warm_start(huber(), X, y, Xp, yp, eps=1.0, delta=1e-5, mirror="quadratic")
