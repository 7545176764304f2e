"""Poisson-subsampled SGLD: kernel (dp_infer.kernels.sgld) and accounting (dp_infer.privacy.minibatch)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dp_accounting as dpa
from dp_accounting import pld, rdp

from dp_infer import losses
from dp_infer.kernels import langevin, sgld
from dp_infer.privacy import minibatch as mb
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import GdpEvent, RdpCurveEvent
from dp_infer.privacy.conversions import gdp_epsilon, rdp_epsilon
from dp_infer.privacy.float32_margin import float32_gradient_margin
from dp_infer.privacy.path import path_mu, path_rdp


def _data(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # rows in the unit ball
    y = (rng.uniform(size=n) < 0.5).astype(np.float64)
    return jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32)


# --------------------------------------------------------------------------- kernel


def test_gradient_estimator_unbiased_for_clipped_mean():
    X, y = _data()
    loss = losses.logistic(row_norm=1.0)
    theta = jnp.array([2.0, -1.0, 0.5], jnp.float32)
    C, q, M = 0.3, 0.2, 4000
    G = sgld.clipped_per_example_grads(loss.example, theta, X, y, C)
    assert float(jnp.max(jnp.linalg.norm(G, axis=1))) <= C * (1 + 1e-5)
    raw = jax.vmap(jax.grad(loss.example), in_axes=(None, 0, 0))(theta, X, y)
    assert int(jnp.sum(jnp.linalg.norm(raw, axis=1) > C)) > 5  # the clip is active
    target = np.asarray(jnp.mean(G, axis=0), np.float64)
    keys = jax.random.split(jax.random.PRNGKey(1), M)
    est = np.asarray(jax.vmap(lambda k: sgld.minibatch_gradient(k, loss.example, theta, X, y, q, C))(keys),
                     np.float64)
    se = est.std(axis=0, ddof=1) / math.sqrt(M)  # Monte-Carlo standard error per coordinate
    assert np.all(se > 0)
    # 5 SE per coordinate: P(false failure) < 3 * 6e-7 for an unbiased estimator
    assert np.all(np.abs(est.mean(axis=0) - target) < 5 * se)
    # ... and it would fail for the unclipped mean (the test can fail)
    unclipped = np.asarray(jnp.mean(raw, axis=0), np.float64)
    assert np.any(np.abs(est.mean(axis=0) - unclipped) > 10 * se)


def test_q1_chain_equals_full_batch_clipped_langevin():
    X, y = _data()
    base = losses.logistic(row_norm=1.0)
    C, beta, h, T = 0.3, 20.0, 0.01, 60
    x0 = jnp.zeros(3, jnp.float32)
    key = jax.random.PRNGKey(3)
    ch = sgld.sample_chain(key, base, X, y, beta, h, T, 1.0, C, x0)
    full = losses.clipped_loss(base.fn, C)  # independent clipping implementation (custom_vjp)
    ref = langevin.sample_chain(key, None, x0, h, T, grad_fn=lambda th: beta * jax.grad(full.mean)(th, X, y))
    assert ch.z.shape == (T, 3)
    np.testing.assert_allclose(np.asarray(ch.z), np.asarray(ref.z), rtol=1e-4, atol=1e-5)
    # q < 1 with the same key gives a different chain (the mask matters)
    ch2 = sgld.sample_chain(key, base, X, y, beta, h, T, 0.5, C, x0)
    assert not np.allclose(np.asarray(ch2.z), np.asarray(ref.z), atol=1e-3)


def test_projection_and_thinning():
    X, y = _data()
    from dp_infer.domains import L2Ball

    ball = L2Ball(dim=3, radius=0.5)
    ch = sgld.sample_chain(jax.random.PRNGKey(0), losses.logistic(), X, y, 5.0, 0.1, 40, 0.3, 1.0,
                           jnp.zeros(3), project=ball, thinning=4)
    assert ch.z.shape == (10, 3)
    assert float(jnp.max(jnp.linalg.norm(ch.z, axis=1))) <= 0.5 + 1e-6
    assert int(ch.last_state.i) == 40


def test_gaussian_target_ula_stationary_variance_q1():
    # ell_i(theta) = m/2 (theta - x_i)^2 with mean(x) = 0: U = beta L = m/2 theta^2 + const (beta = 1).
    m, h = 1.0, 0.5
    xs = np.linspace(-1.0, 1.0, 11)
    X = jnp.asarray((xs - xs.mean())[:, None], jnp.float32)
    y = jnp.zeros(11, jnp.float32)
    ex = lambda th, x, yy: 0.5 * m * jnp.sum((th - x) ** 2)  # noqa: E731
    N, T = 4000, 60  # contraction |1 - h m| = 0.5 per step: 2^-60 of the start remains
    keys = jax.random.split(jax.random.PRNGKey(7), N)
    run = jax.vmap(lambda k: sgld.sample_chain(k, ex, X, y, 1.0, h, T, 1.0, 1e6, jnp.zeros(1)).last_state.z[0])
    v = float(np.var(np.asarray(run(keys), np.float64), ddof=1))
    oracle = 1.0 / (m * (1.0 - h * m / 2.0))  # ULA stationary variance, 4/3
    se = oracle * math.sqrt(2.0 / (N - 1))  # SE of a Gaussian sample variance
    assert abs(v - oracle) < 4.5 * se
    assert abs(v - 1.0 / m) > 4.5 * se  # distinguishable from the exact-target variance 1


def test_kernel_bad_inputs():
    X, y = _data()
    lo = losses.logistic()
    ok = dict(beta=1.0, step_size=0.1, num_steps=5, q=0.5, clip_norm=1.0, x0=jnp.zeros(3))
    for name, bad in [("q", 0.0), ("q", 1.5), ("q", float("nan")), ("clip_norm", 0.0), ("clip_norm", -1.0),
                      ("beta", 0.0), ("step_size", -0.1), ("num_steps", 0), ("num_steps", 2.5)]:
        with pytest.raises(ValueError, match=name):
            sgld.sample_chain(jax.random.PRNGKey(0), lo, X, y, **{**ok, name: bad})
    with pytest.raises(ValueError, match="thinning"):
        sgld.sample_chain(jax.random.PRNGKey(0), lo, X, y, **ok, thinning=2)
    with pytest.raises(ValueError, match="y"):
        sgld.sample_chain(jax.random.PRNGKey(0), lo, X, y[:5], **ok)


# --------------------------------------------------------------------------- accounting

P = dict(beta=50.0, step_size=1e-3, num_steps=1000, clip_norm=1.0, n=1000)
DELTA = 1e-5


F32 = 1.0 + float32_gradient_margin(P["n"])  # the planned per-record sensitivity is C times this (float32)


def _sigma(q):
    return q * P["n"] * math.sqrt(2.0 / P["step_size"]) / (P["beta"] * P["clip_norm"] * F32)


def test_noise_multiplier_derivation():
    # drift shift of one clipped gradient = h beta C / (q n); noise std sqrt(2h)
    h, beta, C, q, n = P["step_size"], P["beta"], P["clip_norm"], 0.05, P["n"]
    shift = h * beta * C * F32 / (q * n)  # with the float32 margin on C
    assert mb.minibatch_noise_multiplier(beta, h, q, C, n) == pytest.approx(math.sqrt(2 * h) / shift, rel=1e-12)


def test_q1_reduces_to_path_accountant():
    T, h = P["num_steps"], P["step_size"]
    for K in (1, 3):
        ev = mb.minibatch_event(q=1.0, num_chains=K, **P)
        assert isinstance(ev, GdpEvent)
        # replace-one: both gradients clipped, Delta = 2C/n
        assert ev.mu == pytest.approx(path_mu(P["beta"], 2 * P["clip_norm"] * F32 / P["n"], T * h, num_chains=K),
                                      rel=1e-12)
        assert ev.mu == pytest.approx(2.0 * math.sqrt(K * T) / _sigma(1.0), rel=1e-12)
    # add/remove at q = 1: Delta = C/n, and dp-accounting's curve is the path RDP
    ev = mb.minibatch_event(q=1.0, neighboring="add_remove", **P)
    assert ev.mu == pytest.approx(path_mu(P["beta"], P["clip_norm"] * F32 / P["n"], T * h), rel=1e-12)
    a = np.array([1.5, 2.0, 8.0, 32.0])
    np.testing.assert_allclose(mb.minibatch_base_rdp(a, q=1.0, **P),
                               path_rdp(a, P["beta"], P["clip_norm"] * F32 / P["n"], T * h), rtol=1e-6)


def test_add_remove_event_matches_dp_accounting():
    q = 0.05
    ev = mb.minibatch_event(q=q, neighboring="add_remove", **P)
    assert isinstance(ev, RdpCurveEvent)
    ours = Accountant().compose(ev).get_epsilon(DELTA)
    dpe = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(_sigma(q))), P["num_steps"])
    racc = rdp.RdpAccountant()  # default orders, ADD_OR_REMOVE_ONE
    racc.compose(dpe)
    e_rdp = racc.get_epsilon(DELTA)
    pacc = pld.PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-3)
    pacc.compose(dpe)
    e_pld = pacc.get_epsilon(DELTA)
    # the accountant reports the PLD of this very event (a finer grid than the 1e-3 cross-check, so at
    # most it, and within its discretisation), below dp-accounting's RDP; the event's own curve matches
    # dp-accounting's RDP on a different order grid: within 3%
    fine = pld.PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4)
    fine.compose(dpe)
    assert ours <= e_pld and ours == pytest.approx(fine.get_epsilon(DELTA), rel=1e-4) and ours < e_rdp
    assert rdp_epsilon(ev.orders, ev.values, DELTA)[0] == pytest.approx(e_rdp, rel=0.03)
    assert e_pld == pytest.approx(mb.minibatch_pld_epsilon(q=q, delta=DELTA, neighboring="add_remove", **P),
                                  rel=1e-9)
    # chains fold in: K chains = K times the RDP
    ev2 = mb.minibatch_event(q=q, neighboring="add_remove", num_chains=2, **P)
    np.testing.assert_allclose(np.array(ev2.values), 2 * np.array(ev.values), rtol=1e-9)


def test_replace_one_is_conservative_and_composes():
    q = 0.05
    r = mb.minibatch_epsilon(q=q, delta=DELTA, **P)
    ar = mb.minibatch_epsilon(q=q, delta=DELTA, neighboring="add_remove", pld_check=False, **P)["epsilon"]
    assert r["route"] == "pld"
    # dp-accounting's REPLACE_ONE PLD of the antipodal pair (at the accountant's finer grid: within the
    # 1e-3 cross-check's discretisation, never above it), and never below add/remove
    fine = mb.minibatch_pld_epsilon(q=q, delta=DELTA, discretization=1e-4, **P)
    assert r["epsilon"] <= r["epsilon_pld"] and r["epsilon"] == pytest.approx(fine, rel=1e-4)
    assert r["epsilon"] >= ar
    # the event is what the Accountant composes; its RDP curve alone converts to more (the looser route)
    ev = r["event"]
    assert Accountant().compose(ev).get_epsilon(DELTA) == r["epsilon"]
    assert rdp_epsilon(ev.orders, ev.values, DELTA)[0] > r["epsilon"]


def test_amplification_beats_unamplified_composition():
    T = P["num_steps"]
    for q in (0.01, 0.1):
        s = _sigma(q)  # same per-step noise multiplier, without subsampling
        e_rep = mb.minibatch_epsilon(q=q, delta=DELTA, pld_check=False, **P)["epsilon"]
        e_ar = mb.minibatch_epsilon(q=q, delta=DELTA, neighboring="add_remove", pld_check=False, **P)["epsilon"]
        assert e_rep < gdp_epsilon(2.0 * math.sqrt(T) / s, DELTA)  # sensitivity 2C, exact Gaussian eps
        assert e_ar < gdp_epsilon(math.sqrt(T) / s, DELTA)  # sensitivity C


def test_beta_max_calibration():
    kw = dict(step_size=P["step_size"], num_steps=P["num_steps"], q=0.05, clip_norm=1.0, n=P["n"])
    b = mb.minibatch_beta_max(1.0, DELTA, rtol=1e-2, **kw)
    assert 0 < b < math.inf
    e = mb.minibatch_epsilon(b, delta=DELTA, pld_check=False, **kw)["epsilon"]
    e_up = mb.minibatch_epsilon(b * 1.02, delta=DELTA, pld_check=False, **kw)["epsilon"]
    assert e <= 1.0 < e_up


def test_accounting_bad_inputs():
    base = dict(beta=1.0, step_size=0.1, num_steps=10, q=0.5, clip_norm=1.0, n=100)
    for name, bad in [("q", 0.0), ("q", 1.01), ("q", "x"), ("clip_norm", 0.0), ("beta", -1.0),
                      ("step_size", 0.0), ("num_steps", 0), ("n", 0), ("n", 10.5), ("num_chains", 0)]:
        with pytest.raises(ValueError, match=name):
            mb.minibatch_event(**{**base, name: bad})
    with pytest.raises(ValueError, match="neighboring"):
        mb.minibatch_event(**base, neighboring="swap")
    with pytest.raises(ValueError, match="eps"):
        mb.minibatch_beta_max(0.0, DELTA, 0.1, 10, 0.5, 1.0, 100)
    with pytest.raises(ValueError, match="delta"):
        mb.minibatch_beta_max(1.0, 1.5, 0.1, 10, 0.5, 1.0, 100)


def test_numpyro_kernel_matches_functional_core():
    from numpyro.infer import MCMC

    X, y = _data()
    lo = losses.logistic()
    kern = sgld.MinibatchSGLD(lo, X, y, beta=10.0, step_size=0.05, q=0.3, clip_norm=0.5)
    assert kern.privacy_params == {"beta": 10.0, "step_size": 0.05, "q": 0.3, "clip_norm": 0.5, "n": 40}
    key = jax.random.PRNGKey(5)
    mc = MCMC(kern, num_warmup=0, num_samples=20, progress_bar=False)
    mc.run(key, init_params=jnp.zeros(3))
    ch = sgld.sample_chain(jax.random.split(key)[0], lo, X, y, 10.0, 0.05, 20, 0.3, 0.5, jnp.zeros(3))
    np.testing.assert_allclose(np.asarray(mc.get_samples()), np.asarray(ch.z), rtol=1e-6, atol=1e-6)
    mc = MCMC(kern, num_warmup=0, num_samples=5, num_chains=2, chain_method="vectorized", progress_bar=False)
    mc.run(key, init_params=jnp.zeros((2, 3)))
    assert mc.get_samples(group_by_chain=True).shape == (2, 5, 3)
    with pytest.raises(ValueError, match="num_warmup"):
        MCMC(kern, num_warmup=5, num_samples=5, progress_bar=False).run(key, init_params=jnp.zeros(3))
    with pytest.raises(ValueError, match="q"):
        sgld.MinibatchSGLD(lo, X, y, beta=1.0, step_size=0.1, q=0.0, clip_norm=1.0)
