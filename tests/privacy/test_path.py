"""Trajectory (path) accountant: exact GDP on quadratic losses, conversions, calibration, errata."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rpa

from dp_infer.privacy import exact as X
from dp_infer.privacy import path as P
from dp_infer.privacy.accountant import Accountant

DP_ORDERS = np.asarray(rpa.DEFAULT_RDP_ORDERS, dtype=np.float64)


def _overdamped_llr(grad_D, grad_Dp, beta, h, K, n_paths, seed, theta0=0.0):
    """Sample ULA paths under D and return the exact path log-likelihood ratio log p_D / p_D'.

    Transitions are Gaussian N(theta - h beta grad(theta), 2h), so the path LLR is the sum of the
    per-step Gaussian log-density differences (the initial law is common and cancels).
    """
    rng = np.random.default_rng(seed)
    th = np.full(n_paths, theta0)
    llr = np.zeros(n_paths)
    var = 2.0 * h
    for _ in range(K):
        mD = th - h * beta * grad_D(th)
        mDp = th - h * beta * grad_Dp(th)
        new = mD + math.sqrt(var) * rng.standard_normal(n_paths)
        llr += ((new - mDp) ** 2 - (new - mD) ** 2) / (2.0 * var)
        th = new
    return llr


def test_quadratic_path_llr_is_exactly_gaussian_with_mu_squared():
    # loss mean (theta - dbar)^2 / 2 (m = 1): gradient difference Delta = |dbar - dbar'| = 2/n
    n, beta, h, K = 100, 50.0, 0.01, 200
    delta_grad = 2.0 / n
    mu = P.path_mu(beta, delta_grad, K * h)
    assert mu == pytest.approx(beta * delta_grad * math.sqrt(K * h / 2))
    N = 20000
    llr = _overdamped_llr(lambda t: t - 0.0, lambda t: t - delta_grad, beta, h, K, N, seed=1)
    se_mean = mu / math.sqrt(N)
    se_var = mu**2 * math.sqrt(2.0 / (N - 1))
    assert abs(llr.mean() - mu**2 / 2) < 5 * se_mean
    assert abs(llr.var(ddof=1) - mu**2) < 5 * se_var
    # the RDP slope alpha mu^2/2 = alpha beta^2 Delta^2 t / 4 (Lemma 2.2) is what the mean pins down
    assert P.path_rho(beta, delta_grad, K * h) == pytest.approx(beta**2 * delta_grad**2 * K * h / 4)


def test_non_quadratic_path_llr_is_dominated():
    # logistic per-example loss log(1 + e^{-x theta}) + theta^2/2; D' replaces a record x = 1 by
    # x = 0: the gradient difference sigma(-theta)/n varies with theta and is bounded by 1/n.
    n, beta, h, K = 50, 30.0, 0.01, 200
    sig = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    gD = lambda t: t - sig(-t) / n  # noqa: E731
    gDp = lambda t: t + 0.0 * t  # noqa: E731
    delta_grad = 1.0 / n
    mu = P.path_mu(beta, delta_grad, K * h)
    N = 20000
    llr = _overdamped_llr(gD, gDp, beta, h, K, N, seed=2, theta0=0.0)
    # KL = E[llr] <= mu^2/2 (RDP at alpha -> 1), and it is not vacuous here
    assert llr.mean() <= mu**2 / 2 + 5 * llr.std() / math.sqrt(N)
    assert llr.mean() > 0.1 * mu**2 / 2
    # Monte-Carlo hockey-stick delta(eps) = E_P[(1 - e^{eps - llr})_+] stays below the GDP profile
    for eps in [0.0, 0.3, 0.8]:
        vals = np.clip(1.0 - np.exp(eps - llr), 0.0, None)
        assert vals.mean() <= X.gdp_delta(eps, mu) + 5 * vals.std() / math.sqrt(N)


def test_underdamped_euler_path_llr_matches_friction_formula():
    beta, h, K, gamma = 40.0, 0.02, 150, 2.5
    delta_grad = 0.03
    mu = P.path_mu(beta, delta_grad, K * h, friction=gamma)
    assert mu == pytest.approx(beta * delta_grad * math.sqrt(K * h / (2 * gamma)))
    rng = np.random.default_rng(3)
    N = 20000
    x = np.zeros(N)
    v = np.zeros(N)
    llr = np.zeros(N)
    var = 2.0 * gamma * h
    for _ in range(K):
        mD = v - h * (gamma * v + beta * (x - 0.0))
        mDp = v - h * (gamma * v + beta * (x - delta_grad))
        vn = mD + math.sqrt(var) * rng.standard_normal(N)
        llr += ((vn - mDp) ** 2 - (vn - mD) ** 2) / (2.0 * var)
        v = vn
        x = x + h * v
    assert abs(llr.mean() - mu**2 / 2) < 5 * mu / math.sqrt(N)
    assert abs(llr.var(ddof=1) - mu**2) < 5 * mu**2 * math.sqrt(2.0 / (N - 1))


def test_rdp_conversion_agrees_with_dp_accounting_compute_epsilon():
    beta, s, t = 20.0, 0.01, 2.0
    rho = P.path_rho(beta, s, t)
    ref, _ = dp_accounting.rdp.compute_epsilon(DP_ORDERS, rho * DP_ORDERS, 1e-5)
    assert P.path_epsilon(beta, s, t, 1e-5, method="rdp_grid") == pytest.approx(ref, rel=1e-12)
    e_rdp = P.path_epsilon(beta, s, t, 1e-5, method="rdp")
    assert e_rdp <= ref + 1e-12 and e_rdp >= ref - 1e-3
    # through the accountant (GDP-only ledger: exact GDP is reported, RDP routes as cross-checks)
    acc = Accountant([P.path_event(beta, s, t)])
    routes = acc.epsilon_by_route(1e-5)
    from dp_infer.privacy.accountant import DEFAULT_ORDERS

    dense_ref, _ = dp_accounting.rdp.compute_epsilon(DEFAULT_ORDERS, rho * DEFAULT_ORDERS, 1e-5)
    assert routes["rdp_dp_accounting"] == pytest.approx(dense_ref, rel=1e-12)  # dp-accounting, dense grid
    assert routes["rdp"] <= routes["rdp_dp_accounting"] + 1e-12 and routes["rdp_dp_accounting"] <= ref
    assert acc.get_epsilon(1e-5) == pytest.approx(P.path_epsilon(beta, s, t, 1e-5), rel=1e-12)
    # ordering of the valid bounds: gdp <= rdp <= mironov
    assert P.path_epsilon(beta, s, t, 1e-5) < e_rdp < P.path_epsilon(beta, s, t, 1e-5, method="mironov")


def test_grid_over_alpha_never_beats_the_closed_form():
    beta, s, t, delta = 20.0, 0.01, 2.0, 1e-5
    a = beta**2 * s**2 * t / 4
    closed = a + 2 * math.sqrt(a * math.log(1 / delta))
    alphas = 1.0 + np.geomspace(1e-3, 1e5, 100001)
    grid = np.min(alphas * a + math.log(1 / delta) / (alphas - 1))  # Fact C.4 at each order
    assert grid >= closed - 1e-12
    assert grid <= closed + 1e-6
    assert P.path_epsilon(beta, s, t, delta, method="mironov") == pytest.approx(closed, rel=1e-14)


@pytest.mark.parametrize("method", P.PATH_METHODS)
@pytest.mark.parametrize("eps,delta,t,gamma,k", [(1.0, 1e-5, 2.0, None, 1), (0.5, 1e-6, 7.0, 3.0, 4)])
def test_inverse_calibration_round_trips(method, eps, delta, t, gamma, k):
    s = 2.0 / 30162
    b = P.beta_max(eps, delta, sensitivity=s, time=t, friction=gamma, num_chains=k, method=method)
    assert P.path_epsilon(b, s, t, delta, friction=gamma, num_chains=k, method=method) == pytest.approx(eps, abs=1e-10)
    tm = P.time_max(eps, delta, sensitivity=s, beta=b, friction=gamma, num_chains=k, method=method)
    assert tm == pytest.approx(t, rel=1e-9)
    if method == "gdp":
        assert P.path_delta(b, s, t, eps, friction=gamma, num_chains=k) == pytest.approx(delta, rel=1e-8)


def test_beta_max_rdp_closed_form_is_the_mironov_inverse_and_conservative():
    s, t = 0.01, 2.0
    b_rdp = P.beta_max_rdp(1.0, 1e-5, sensitivity=s, time=t)
    assert b_rdp == pytest.approx(P.beta_max(1.0, 1e-5, sensitivity=s, time=t, method="mironov"), rel=1e-12)
    assert P.path_epsilon(b_rdp, s, t, 1e-5, method="mironov") == pytest.approx(1.0, abs=1e-10)
    assert b_rdp < P.beta_max(1.0, 1e-5, sensitivity=s, time=t, method="rdp") < P.beta_max(1.0, 1e-5, sensitivity=s, time=t)


def test_lemma_3_1_calibration_is_caught():
    eps, delta, s, t = 1.0, 1e-5, 0.01, 2.0
    b = P.lemma_3_1_beta_unsafe(eps, delta, sensitivity=s, time=t)
    assert b == pytest.approx(2 * eps / (s * math.sqrt(t * math.log(1 / delta))))
    a = b**2 * s**2 * t / 4
    # Mironov conversion: a = eps^2 / log(1/delta), eps* = 2 eps + eps^2/log(1/delta)
    assert a == pytest.approx(eps**2 / math.log(1 / delta), rel=1e-12)
    e_rdp = P.path_epsilon(b, s, t, delta, method="mironov")
    assert e_rdp == pytest.approx(2 * eps + eps**2 / math.log(1 / delta), rel=1e-12)
    e_gdp = P.path_epsilon(b, s, t, delta)
    assert e_rdp > 2.0 and e_gdp > 1.5  # the accountant says eps > 1 by every route
    # the exact privacy (quadratic loss: exactly mu-GDP) violates (1, 1e-5): delta(1) >> 1e-5
    mu = P.path_mu(b, s, t)
    x = np.linspace(-12, 12 + mu, 400001)
    d_exact = X.hockey_stick_delta(x, -0.5 * x**2, -0.5 * (x - mu) ** 2, 1.0)
    assert d_exact > 100 * delta
    assert d_exact == pytest.approx(P.path_delta(b, s, t, 1.0), rel=1e-6)
    # the corrected calibration meets it
    b_ok = P.beta_max(eps, delta, sensitivity=s, time=t)
    assert b_ok < b / 1.5


def test_calibrated_path_meets_its_claim_on_the_quadratic_family():
    # seed-001 §10.2 family: loss (theta - d)^2/2, d in [-1, 1], n = 100 -> Delta = 2/n. For the
    # quadratic loss the path pair is equivalent to N(0,1) vs N(mu,1) (exact), so the exact curve
    # is the hockey-stick of these two densities, integrated numerically.
    n, t = 100, 5.0
    s = 2.0 / n
    for eps, delta in [(1.0, 1e-5), (0.3, 1e-3)]:
        b = P.beta_max(eps, delta, sensitivity=s, time=t)
        mu = P.path_mu(b, s, t)
        x = np.linspace(-12, 12 + mu, 400001)
        d = X.hockey_stick_delta(x, -0.5 * x**2, -0.5 * (x - mu) ** 2, eps)
        assert d <= delta * (1 + 1e-6)
        assert d >= delta * (1 - 1e-4)  # and the calibration is tight


def test_schedule_event_reduces_to_constant_schedule():
    ev = P.path_schedule_event([3.0] * 10, [0.1] * 10, 0.02)
    assert ev.mu == pytest.approx(P.path_mu(3.0, 0.02, 1.0))
    ev2 = P.path_schedule_event([1.0, 2.0], [0.5, 0.25], 0.1, num_chains=2)
    assert ev2.mu == pytest.approx(0.1 * math.sqrt(2 * (0.5 + 4 * 0.25) / 2))


def test_chains_compose():
    ev = P.path_event(10.0, 0.01, 3.0, num_chains=4)
    assert ev.mu == pytest.approx(2 * P.path_mu(10.0, 0.01, 3.0))
    acc = Accountant([(P.path_event(10.0, 0.01, 3.0), 4)])
    assert acc.get_epsilon(1e-5) == pytest.approx(Accountant([ev]).get_epsilon(1e-5), rel=1e-12)
    assert "initial point" in " ".join(ev.assumptions)


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: P.path_mu(-1.0, 0.1, 1.0), "beta"),
        (lambda: P.path_mu(1.0, -0.1, 1.0), "sensitivity"),
        (lambda: P.path_mu(1.0, 0.1, float("inf")), "time"),
        (lambda: P.path_mu(1.0, 0.1, 1.0, friction=0.0), "friction"),
        (lambda: P.path_mu(1.0, 0.1, 1.0, num_chains=0), "num_chains"),
        (lambda: P.path_epsilon(1.0, 0.1, 1.0, 1e-5, method="laplace"), "method"),
        (lambda: P.path_epsilon(1.0, 0.1, 1.0, 1.0), "delta"),
        (lambda: P.beta_max(0.0, 1e-5, sensitivity=0.1, time=1.0), "eps"),
        (lambda: P.beta_max(1.0, 1e-5, sensitivity=0.0, time=1.0), "sensitivity"),
        (lambda: P.time_max(1.0, 1e-5, sensitivity=0.1, beta=0.0), "beta"),
        (lambda: P.path_rdp([0.5], 1.0, 0.1, 1.0), "alpha"),
        (lambda: P.path_schedule_event([1.0], [0.0], 0.1), "step_sizes"),
        (lambda: P.path_schedule_event([], [], 0.1), "betas"),
    ],
)
def test_bad_inputs_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
