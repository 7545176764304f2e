"""Tests of dp_infer.rashomon: sampler against closed forms, ridge ellipsoid, uniformity on G,
thresholded sensitivity, path privacy calibration, pure-route exact ratio, bad inputs. (The
smoothed threshold: tests/rashomon/test_threshold.py; the measures: tests/rashomon/test_measures.py.)

Statistical tolerances: chains are independent, so the Monte Carlo standard error (SE) of a
mean is the standard deviation of per-chain means / sqrt(chains); we allow 4 SE (two-sided
false-alarm probability ~6e-5 for a fixed key) plus a stated discretisation allowance.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats

from dp_infer import rashomon as R
from dp_infer.domains import Box, L2Ball
from dp_infer.losses import LossConstants, PerExampleLoss, squared
from dp_infer.potentials import rashomon_potential
from dp_infer.privacy import exact
from dp_infer.privacy.conversions import gdp_epsilon
from dp_infer.rashomon.sampler import _threshold_potential


def quad_loss(lipschitz=math.inf, row_norm=1.0, domain=None):
    """ell(theta; x) = ||theta - x||^2 / 2 (mean estimation): m = M = 1, G = 2 row_norm."""
    fn = lambda th, x, y: 0.5 * jnp.sum((th - x) ** 2)  # noqa: E731
    c = LossConstants(lipschitz=lipschitz, grad_diff=2 * row_norm, smoothness=1.0, strong_convexity=1.0)
    return PerExampleLoss("quad", fn, c, row_norm, domain=domain)


def closed_form(p, m, beta, psi):
    """Digest §10.1: P(G) and E[L - L*] for the isotropic quadratic thresholded Gibbs law."""
    x = beta * psi
    A = math.exp(-x) * x ** (p / 2) / math.gamma(p / 2 + 1)
    Q = special.gammaincc(p / 2, x)
    PG = A / (A + Q)
    E_in = psi * p / (p + 2)
    E_out = (1 / beta) * special.gammaincc(p / 2 + 1, x) * math.gamma(p / 2 + 1) / (
        special.gammaincc(p / 2, x) * math.gamma(p / 2))
    return PG, PG * E_in + (1 - PG) * E_out


@pytest.mark.parametrize("p,beta,psi,horizon", [(1, 10.0, 0.1, 10.0), (2, 50.0, 0.1, 4.0)])
def test_quadratic_closed_form_from_samples(p, beta, psi, horizon):
    rng = np.random.default_rng(1)
    X = rng.uniform(-0.3, 0.3, (20, p))
    mu = X.mean(0)
    chains = 100
    # step: h * beta * m = 0.02, so ULA's Gaussian-tail variance is inflated by 1/(1 - 0.01);
    # E[L | G^c] moves by <= ~1% of its value and P(G) by less: allowance 0.01 * E[L] + 0.005.
    res = R.sample_rashomon(quad_loss(), X, np.zeros(20), psi, mode="nonprivate", beta=beta,
                            horizon=horizon, num_chains=chains, num_draws=500, step_safety=0.02, seed=3)
    assert res.privacy["guarantee"].startswith("NON-PRIVATE")
    th = res.draws[:, res.burn_in:]
    Lc = 0.5 * np.sum((th - mu) ** 2, axis=-1)  # L - L*, per chain and draw
    inG = (Lc <= psi).mean(axis=1)
    EL = Lc.mean(axis=1)
    PG, E = closed_form(p, 1.0, beta, psi)
    se_pg = inG.std(ddof=1) / math.sqrt(chains)
    se_el = EL.std(ddof=1) / math.sqrt(chains)
    assert abs(inG.mean() - PG) <= 4 * se_pg + 0.005, (inG.mean(), PG, se_pg)
    assert abs(EL.mean() - E) <= 4 * se_el + 0.01 * E, (EL.mean(), E, se_el)
    # sanity: the comparison has power (SE well below the quantities compared)
    assert se_pg < 0.02 and se_el < 0.1 * E


# ------------------------------------------------------------------------------ ridge ellipsoid

PSI_R = 0.02
W_R = PSI_R / 5


@pytest.fixture(scope="module")
def ridge():
    rng = np.random.default_rng(0)
    n = 50
    Z = rng.normal(size=(n, 2)) @ np.array([[1.0, 0.6], [0.0, 0.5]])
    X = Z / np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1.0) * 0.9
    y = np.clip(X @ np.array([0.3, -0.2]) + 0.1 * rng.normal(size=n), -2, 2)
    l2 = 0.1
    loss = squared(label_bound=2.0, domain=Box.cube(2, 5.0), l2=l2)
    H = X.T @ X / n + l2 * np.eye(2)
    theta_star = np.linalg.solve(H, X.T @ y / n)
    beta = 3000.0  # beta psi = 60: outside-G mass ~ p / (2 beta psi) ~ 1.7%
    # a ramp of width psi/5 (curvature 13 M instead of 43 M at psi/20) keeps the fixture fast; the
    # target is exactly uniform on the ellipsoid whatever the width
    res = R.sample_rashomon(loss, X, y, PSI_R, mode="nonprivate", beta=beta, horizon=1.0,
                            num_chains=200, num_draws=60, step_safety=0.5, seed=11, threshold_width=W_R)
    return dict(loss=loss, X=X, y=y, H=H, theta_star=theta_star, beta=beta, res=res)


def test_rashomon_minimum_matches_ridge_closed_form(ridge):
    mini = R.rashomon_minimum(ridge["loss"], ridge["X"], ridge["y"])
    np.testing.assert_allclose(mini.theta, ridge["theta_star"], atol=1e-7)
    assert mini.tol < 1e-12


def test_ridge_coefficient_ranges(ridge):
    H, ts, beta = ridge["H"], ridge["theta_star"], ridge["beta"]
    Hinv_d = np.sqrt(np.diag(np.linalg.inv(H)))
    half = np.sqrt(2 * PSI_R) * Hinv_d
    cr = R.coefficient_ranges(ridge["res"].flat_draws())
    # outside G the density is exp(-beta h_w(L - L* - psi)) with h_w(u) >= u - w/2: excess above
    # w/2 + 20/beta has prob e^-20 per draw, so all draws lie in {L <= L* + psi + w/2 + 20/beta}:
    outer = np.sqrt(2 * (PSI_R + W_R / 2 + 20 / beta)) * Hinv_d
    assert np.all(cr["high"] <= ts + outer) and np.all(cr["low"] >= ts - outer)
    # extremes approach the ellipsoid's bounds: for uniform on a 2-D ellipsoid a coordinate exceeds
    # 90% of its half-range with probability ~0.6 * 0.1^1.5 ~ 0.02 per draw; with ~200 chains x 30
    # kept draws, missing it entirely is impossible for a mixing sampler.
    assert np.all(cr["high"] >= ts + 0.9 * half) and np.all(cr["low"] <= ts - 0.9 * half)


def test_ellipsoid_volume_matches_rashomon_ratio(ridge):
    H = ridge["H"]
    box = Box.cube(2, 1.5)
    mini = R.rashomon_minimum(ridge["loss"], ridge["X"], ridge["y"])
    vol = math.pi * (2 * PSI_R) / math.sqrt(np.linalg.det(H))  # V_2 (2 psi)^{p/2} / sqrt(det H)
    out = R.rashomon_ratio_estimate(ridge["loss"], ridge["X"], ridge["y"], mini.value, PSI_R, box,
                                    num_samples=200000, seed=5)
    assert "NON-PRIVATE" in out["privacy"]
    expected = vol / 9.0
    assert abs(out["ratio"] - expected) <= 4 * out["se"], (out, expected)


def test_uniform_on_ellipsoid(ridge):
    H, ts = ridge["H"], ridge["theta_star"]
    last = ridge["res"].draws[:, -1]  # one draw per independent chain: i.i.d.
    C = np.linalg.cholesky(H)  # H = C C^T
    z = (last - ts) @ C / math.sqrt(2 * PSI_R)  # ||z||^2 = (theta - theta*)^T H (theta - theta*) / (2 psi)
    r = np.linalg.norm(z, axis=1)
    z = z[r <= 1]
    r = r[r <= 1]
    N = len(r)
    assert N > 170  # P(G) ~ 0.98 of 200 chains
    # radial: P(r <= s) = s^2 -> r^2 ~ U(0, 1)
    assert stats.kstest(r ** 2, "uniform").pvalue > 1e-3
    # direction: E z = 0, E z_i^2 = 1/(p + 2) = 1/4 -> SE of the mean = sqrt(1/(4N))
    assert np.all(np.abs(z.mean(0)) <= 4 * math.sqrt(0.25 / N))
    # projected coordinate of the uniform disc: F(t) = 1/2 + (t sqrt(1 - t^2) + arcsin t) / pi
    F = lambda t: 0.5 + (t * np.sqrt(1 - t ** 2) + np.arcsin(t)) / math.pi  # noqa: E731
    for j in range(2):
        assert stats.kstest(z[:, j], F).pvalue > 1e-3


# ------------------------------------------------------------------------------ sensitivity

def _neighbours(n=100):
    x = np.full(n, 1.0 / (n - 1))
    x[0] = -1.0  # mean 0
    xp = x.copy()
    xp[0] = 1.0  # mean 2/n
    return x[:, None], xp[:, None]


@pytest.mark.parametrize("psi", [1e-4, 1e-3, 1e-2, 0.1])
def test_thresholded_sensitivity_brute_force(psi):
    n = 100
    loss = quad_loss()
    X, Xp = _neighbours(n)
    y = np.zeros(n)
    with jax.enable_x64(True):
        grads = []
        for D in (X, Xp):
            mini = R.rashomon_minimum(loss, D, y)
            U = rashomon_potential(loss, D, y, beta=1.0, psi=psi, L_star=mini.value)
            grid = jnp.linspace(-2.0, 2.0, 100001)  # spacing 4e-5; |grad| has slope 1
            grads.append(np.asarray(jax.jit(jax.vmap(jax.grad(lambda t: U(t[None]))))(grid)))
        diff = np.max(np.abs(grads[0] - grads[1]))
    bound = R.thresholded_sensitivity(loss.constants, n, psi, tol=0.0)
    assert bound == pytest.approx(2.0 / n + math.sqrt(2 * psi))
    assert diff <= bound * (1 + 1e-9)
    assert diff >= bound - 4e-5  # attained to grid precision (spacing x slope 1)


def test_thresholded_sensitivity_cases():
    c = LossConstants(lipschitz=3.0, grad_diff=2.0, smoothness=1.0, strong_convexity=1.0)
    assert R.thresholded_sensitivity(c, 100, 0.01, tol=0.005) == pytest.approx(0.02 + math.sqrt(2 * 0.015))
    assert R.thresholded_sensitivity(c, 100, 10.0) == pytest.approx(3.02)  # min(L, sqrt(2 M psi))
    # the formula is chosen from DECLARED constants only: m = 0 (no certificate) -> G/n + L
    c0 = LossConstants(lipschitz=3.0, grad_diff=2.0, smoothness=1.0, strong_convexity=0.0)
    assert R.thresholded_sensitivity(c0, 100, 0.01, tol=0.0) == pytest.approx(3.02)
    with pytest.raises(ValueError, match="tol"):
        R.thresholded_sensitivity(c, 100, 0.01, tol=math.inf)
    with pytest.raises(ValueError, match="no finite gradient sensitivity"):
        R.thresholded_sensitivity(LossConstants(math.inf, 2.0, 1.0), 100, 0.1)


def test_rashomon_minimum_constrained():
    loss = quad_loss()
    X = np.array([[0.9, 0.0], [0.9, 0.0]]) * np.array([[1.0], [1.0]])
    y = np.zeros(2)
    ball = L2Ball(2, 0.5)
    mini = R.rashomon_minimum(loss, X, y, ball)
    assert mini.value == pytest.approx(0.5 * 0.4 ** 2, abs=1e-9)
    assert mini.constrained_gap <= 1e-9
    # m > 0: global certificate ||g||^2/(2m) = 0.08 >= L_hat* - L*_glob = 0.08
    assert mini.tol == pytest.approx(0.08, rel=1e-6)
    box = Box.cube(2, 0.5)
    mb = R.rashomon_minimum(loss, X, y, box)
    np.testing.assert_allclose(mb.theta, [0.5, 0.0], atol=1e-9)
    assert mb.constrained_gap <= 1e-9
    # without strong convexity: no global certificate
    fn = lambda th, x, yy: 0.5 * jnp.sum((th - x) ** 2)  # noqa: E731
    loss0 = PerExampleLoss("quad0", fn, LossConstants(3.0, 2.0, 1.0, 0.0), 1.0)
    m0 = R.rashomon_minimum(loss0, X, y, ball)
    assert math.isinf(m0.tol)
    # the threshold base never exceeds L*_glob + tol, whatever the certificate says
    for tol in (0.0, 0.01, 0.5):
        assert R.threshold_base(mini, 1.0, tol) - 0.0 <= tol + 1e-12  # L*_glob = 0 here
        assert R.threshold_base(mini, 1.0, tol, shift=True) <= 1e-12


# ------------------------------------------------------------------------------ privacy

def test_path_mode_calibration_and_drift_bound():
    n, psi, eps, delta, horizon = 100, 0.01, 1.0, 1e-5, 1.0
    loss = quad_loss(lipschitz=3.0, domain=Box.cube(1, 2.0))
    X, Xp = _neighbours(n)
    y = np.zeros(n)
    res = R.sample_rashomon(loss, X, y, psi, mode="path", eps=eps, delta=delta, horizon=horizon,
                            num_chains=4, num_draws=200, seed=0)
    rep = res.privacy
    sens = rep["thresholded_sensitivity"]
    # declared tol + float slack only (nothing from the data), averaged over the ramp's thresholds
    # psi + tau, tau ~ U(0, w): quadrature of sqrt(2 M (psi + tol + slack + tau)), M = 1
    w = rep["threshold_width"]
    assert w == pytest.approx(psi * R.WIDTH_FRACTION)
    a = psi + R.DEFAULT_TOL + R.FLOAT32_SLACK
    avg = integrate.quad(lambda t: math.sqrt(2 * (a + t)), 0, w, epsabs=1e-14)[0] / w
    assert sens == pytest.approx(2 / n + avg, rel=1e-10)
    assert 2 / n + math.sqrt(2 * a) < sens <= 2 / n + math.sqrt(2 * (a + w / 2))  # Jensen
    mu = rep["beta"] * sens * 1.001 * math.sqrt(4 * horizon / 2)  # charged with the float32 margin at this n
    assert rep["mu"] == pytest.approx(mu, rel=1e-9)
    assert gdp_epsilon(mu, delta) == pytest.approx(eps, rel=1e-6)
    assert rep["eps_spent"] <= eps * (1 + 1e-6)
    # per-step Gaussian-mechanism sensitivity bounds the realised drift difference along the paths
    with jax.enable_x64(True):
        gd = []
        for D in (X, Xp):
            mini = R.rashomon_minimum(loss, D, y)
            U = _threshold_potential(loss, D, y, rep["beta"], mini.value + psi, w)  # what the sampler runs
            gd.append(np.asarray(jax.vmap(jax.grad(lambda t: U(t)))(jnp.asarray(res.draws.reshape(-1, 1),
                                                                                 dtype=jnp.float64))))
    realised = np.abs(gd[0] - gd[1]).max()
    assert realised <= rep["beta"] * sens * (1 + 1e-9)
    assert realised >= rep["beta"] * 2 / n * (1 - 1e-6)  # the paths do visit where D and D' differ


def test_pure_mode_is_the_certified_trajectory_plus_purification_route():
    n, psi, eps, K = 100, 0.05, 1.0, 4
    dom = Box.cube(1, 2.0)
    loss = quad_loss(lipschitz=3.0, domain=dom)
    X, Xp = _neighbours(n)
    y = np.zeros(n)
    res = R.sample_rashomon(loss, X, y, psi, mode="pure", eps=eps, horizon=1.0, num_chains=K,
                            domain=dom, seed=2)
    rep = res.privacy
    # each chain: a trajectory at (eps_c (1 - f), exp(ld)) purified to pure eps_c; K compose to eps
    assert rep["eps_spent"] == pytest.approx(eps) and rep["delta"] == 0.0
    assert rep["eps_per_chain"] == pytest.approx(eps / K)
    sens = rep["thresholded_sensitivity"]
    mu_up = rep["beta"] * sens * math.sqrt(rep["horizon"] / 2)
    eps_up = gdp_epsilon(mu_up, log_delta=rep["upstream_log_delta"])
    assert eps_up <= 0.9 * eps / K * (1 + 1e-9)  # upstream eps_a = (1 - eps_prime_fraction) eps_c
    assert res.draws.shape == (K, 1, 1) and np.all(np.abs(res.draws) <= 2.0)
    # no mixing / TV claim is involved
    assert "tv_error" not in rep and rep.get("sampling_error_tv") is None
    # the plan is data independent: the neighbour gets the identical plan
    assert R.plan_rashomon(loss, n, 1, psi, mode="pure", eps=eps, num_chains=K, domain=dom) == \
        R.plan_rashomon(loss, n, 1, psi, mode="pure", eps=eps, num_chains=K, domain=dom)


# ------------------------------------------------------------------------------ bad inputs

def test_bad_inputs_name_the_parameter():
    loss = quad_loss()
    X = np.zeros((5, 1))
    y = np.zeros(5)
    with pytest.raises(ValueError, match="psi"):
        R.sample_rashomon(loss, X, y, -0.1, mode="nonprivate", beta=1.0)
    with pytest.raises(ValueError, match="mode"):
        R.sample_rashomon(loss, X, y, 0.1, mode="magic")
    with pytest.raises(ValueError, match="beta"):
        R.sample_rashomon(loss, X, y, 0.1, mode="nonprivate")
    with pytest.raises(ValueError, match="beta"):
        R.sample_rashomon(loss, X, y, 0.1, mode="path", eps=1.0, delta=1e-5, beta=3.0)
    with pytest.raises(ValueError, match="eps"):
        R.sample_rashomon(loss, X, y, 0.1, mode="path", eps=-1.0, delta=1e-5)
    with pytest.raises(ValueError, match="delta"):
        R.sample_rashomon(loss, X, y, 0.1, mode="path", eps=1.0, delta=1.5)
    with pytest.raises(ValueError, match="horizon"):
        R.sample_rashomon(loss, X, y, 0.1, mode="path", eps=1.0, delta=1e-5, horizon=0)
    with pytest.raises(ValueError, match="num_chains"):
        R.sample_rashomon(loss, X, y, 0.1, mode="nonprivate", beta=1.0, num_chains=0)
    with pytest.raises(ValueError, match="bounded domain"):
        R.sample_rashomon(loss, X, y, 0.1, mode="pure", eps=1.0)
    with pytest.raises(ValueError, match="tol"):
        R.thresholded_sensitivity(loss.constants, 5, 0.1, tol=-1.0)
    with pytest.raises(ValueError, match="n must"):
        R.thresholded_sensitivity(loss.constants, 0, 0.1)
