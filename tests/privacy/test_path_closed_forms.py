"""Oracle tests for dp_infer.privacy.path.

Oracles that do not share path.py's code:
* the closed forms of the module docstring: mu = beta Delta sqrt(K t / (2 gamma)), the RDP curve
  alpha mu^2 / 2, the schedule's mu = Delta sqrt(K sum beta_k^2 h_k / (2 gamma)), Mironov's
  conversion eps = rho + 2 sqrt(rho log(1/delta)) and its inverse;
* the exact Gaussian profile in mpmath (tests/support/mp_oracles.py);
* dp-accounting's ``compute_epsilon`` / ``compute_delta`` on its default orders (the documented
  meaning of ``method="rdp_grid"``), and, where its float delta underflows, the same published
  bound (Canonne, Kamath, Steinke 2020, Prop. 12, with the KL bound) evaluated in mpmath.
"""

import math

import dp_accounting
import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rpa

from dp_infer.privacy import path as P
from tests.support.mp_oracles import gdp_delta_mp

ORDERS = np.asarray(rpa.DEFAULT_RDP_ORDERS, dtype=np.float64)


def _mu(beta, s, t, gamma=1.0, k=1):
    return beta * s * math.sqrt(k * t / (2.0 * gamma))


def _grid_log_delta_mp(rho, eps):
    """log delta of the linear curve rho * alpha on dp-accounting's orders: min over the orders of the
    KL bound 0.5 log(1 - e^-r) and, for alpha > 1.01, (alpha - 1)(r - eps + log(1 - 1/alpha)) - log alpha."""
    with mpmath.workdps(50):
        best = mpmath.mpf(0)
        for a in ORDERS:
            a_ = mpmath.mpf(float(a))
            r = mpmath.mpf(rho) * a_
            cands = [mpmath.log(1 - mpmath.exp(-r)) / 2]
            if a > 1.01:
                cands.append((a_ - 1) * (r - eps + mpmath.log(1 - 1 / a_)) - mpmath.log(a_))
            best = min([best] + cands)
        return best


def _grid_epsilon_mp(rho, log_delta):
    """eps of the linear curve on dp-accounting's orders (CKS Prop. 12), in mpmath."""
    with mpmath.workdps(50):
        ld = mpmath.mpf(log_delta)
        return min(mpmath.mpf(rho) * a + mpmath.log(1 - 1 / mpmath.mpf(a)) - (ld + mpmath.log(a)) / (a - 1)
                   for a in (mpmath.mpf(float(x)) for x in ORDERS if x > 1.01))


# --------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("gamma,k", [(None, 1), (4.0, 1), (0.25, 3)])
def test_rho_rdp_and_event_follow_the_closed_form_with_friction_and_chains(gamma, k):
    beta, s, t = 3.0, 0.2, 5.0
    g = 1.0 if gamma is None else gamma
    mu = _mu(beta, s, t, g, k)
    assert P.path_rho(beta, s, t, gamma, k) == pytest.approx(mu * mu / 2, rel=1e-14)
    assert P.path_rho(beta, s, t, gamma, k) == pytest.approx(k * beta**2 * s**2 * t / (4 * g), rel=1e-14)
    alphas = [1.5, 2, 64]
    got = P.path_rdp(alphas, beta, s, t, gamma, k)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.array(alphas) * mu * mu / 2, rtol=1e-14, atol=0)
    ev = P.path_event(beta, s, t, gamma, k)
    assert ev.mu == pytest.approx(mu, rel=1e-14)
    assert ev.metadata["mu_per_chain"] == pytest.approx(_mu(beta, s, t, g, 1), rel=1e-14)


def test_rdp_orders_just_above_one_and_beyond_int64_are_accepted():
    rho = P.path_rho(1.0, 1.0, 2.0)
    assert P.path_rdp(1 + 1e-9, 1.0, 1.0, 2.0) == pytest.approx((1 + 1e-9) * rho, rel=1e-15)
    assert P.path_rdp(1.5, 1.0, 1.0, 2.0) == pytest.approx(1.5 * rho, rel=1e-15)
    # 10**20 does not fit an int64: still the order 1e20
    assert P.path_rdp(10**20, 1.0, 1.0, 2.0) == pytest.approx(1e20 * rho, rel=1e-15)
    assert P.path_rdp(3, 1.0, 1.0, 2.0, num_chains=1) == P.path_rdp(3, 1.0, 1.0, 2.0)
    for bad in (1.0, 0.5, [2.0, 1.0], math.inf, math.nan):
        with pytest.raises(ValueError, match="alpha"):
            P.path_rdp(bad, 1.0, 1.0, 2.0)


def test_the_underdamped_event_names_its_scheme_and_carries_the_sampling_error():
    # the report must describe the scheme whose privacy was accounted: a reviewer checks it
    under = P.path_event(1.0, 0.1, 2.0, friction=2.0, tv_error=1e-9)
    over = P.path_event(1.0, 0.1, 2.0)
    assert under.label == "underdamped_langevin_path" and over.label == "langevin_path"
    assert "underdamped" in under.assumptions[0] and "overdamped" in over.assumptions[0]
    assert under.tv_error == 1e-9 and over.tv_error == 0.0
    sched_u = P.path_schedule_event([1.0], [0.1], 0.1, friction=2.0)
    sched_o = P.path_schedule_event([1.0], [0.1], 0.1)
    assert "underdamped" in sched_u.assumptions[0] and "overdamped" in sched_o.assumptions[0]


@pytest.mark.parametrize("gamma,k", [(None, 1), (4.0, 2)])
def test_schedule_mu_is_the_closed_form(gamma, k):
    betas, steps, s = [0.0, 1.0, 3.0], [0.1, 0.2, 0.05], 0.4
    g = 1.0 if gamma is None else gamma
    want = s * math.sqrt(k * sum(b * b * h for b, h in zip(betas, steps)) / (2 * g))
    assert P.path_schedule_event(betas, steps, s, gamma, k).mu == pytest.approx(want, rel=1e-14)
    # python ints beyond int64 are numbers like any other
    big = P.path_schedule_event([10**20], [10**20], 1e-30)
    assert big.mu == pytest.approx(1e-30 * math.sqrt(1e40 * 1e20 / 2), rel=1e-14)


@pytest.mark.parametrize("betas,steps,name", [
    ([-1.0], [0.1], "betas"), ([math.nan], [0.1], "betas"), ([1.0, -0.5], [0.1, 0.1], "betas"),
    ([1.0, 1.0], [0.1], "step_sizes"), ([1.0], [math.nan], "step_sizes"), ([1.0], [0.0], "step_sizes"),
])
def test_schedule_refuses_bad_sequences(betas, steps, name):
    with pytest.raises(ValueError, match=name):
        P.path_schedule_event(betas, steps, 0.1)


def test_schedule_and_closed_form_friction_is_checked_by_name():
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="friction"):
            P.path_schedule_event([1.0], [0.1], 0.1, friction=bad)
        with pytest.raises(ValueError, match="friction"):
            P.beta_max_rdp(1.0, 1e-5, sensitivity=0.1, time=1.0, friction=bad)


@pytest.mark.parametrize("gamma,k", [(None, 1), (9.0, 1), (0.5, 4)])
def test_beta_max_rdp_is_the_mironov_closed_form(gamma, k):
    eps, delta, s, t = 0.7, 1e-6, 0.05, 3.0
    g = 1.0 if gamma is None else gamma
    b = math.log(1 / delta)
    want = 2 * (math.sqrt(b + eps) - math.sqrt(b)) / (s * math.sqrt(k * t / g))
    got = P.beta_max_rdp(eps, delta, sensitivity=s, time=t, friction=gamma, num_chains=k)
    assert got == pytest.approx(want, rel=1e-12)
    assert P.beta_max_rdp(eps, log_delta=math.log(delta), sensitivity=s, time=t, friction=gamma,
                          num_chains=k) == pytest.approx(want, rel=1e-12)


def test_lemma_3_1_is_the_papers_formula():
    eps, delta, s, t = 0.3, 1e-4, 0.2, 2.0
    assert P.lemma_3_1_beta_unsafe(eps, delta, sensitivity=s, time=t) == \
        pytest.approx(2 * eps / (s * math.sqrt(t * math.log(1 / delta))), rel=1e-14)


# --------------------------------------------------------------------------- path_delta, every method


@pytest.mark.parametrize("eps", [0.0, 0.3, 2.0, 8.0])
def test_gdp_delta_is_the_exact_profile(eps):
    beta, s, t = 2.0, 0.3, 1.5
    d = P.path_delta(beta, s, t, eps)
    exact = gdp_delta_mp(eps, _mu(beta, s, t), dps=60)
    assert d == pytest.approx(float(exact), rel=1e-10)
    assert P.path_delta(beta, s, t, eps, log=True) == pytest.approx(float(mpmath.log(exact)), rel=1e-10)


@pytest.mark.parametrize("beta,eps", [(0.5, 0.01), (1.0, 0.5), (2.0, 0.5), (3.0, 4.0), (6.0, 0.2)])
def test_mironov_delta_is_the_inverse_of_its_epsilon(beta, eps):
    s, t = 0.5, 2.0
    rho = _mu(beta, s, t) ** 2 / 2
    ld = P.path_delta(beta, s, t, eps, method="mironov", log=True)
    if eps <= rho:
        assert ld == 0.0 and P.path_delta(beta, s, t, eps, method="mironov") == 1.0
    else:
        assert ld == pytest.approx(-((eps - rho) / 2) ** 2 / rho, rel=1e-13)
        # eps = rho + 2 sqrt(rho log(1/delta)) at that delta
        assert rho + 2 * math.sqrt(rho * -ld) == pytest.approx(eps, rel=1e-12)
        assert P.path_delta(beta, s, t, eps, method="mironov") == pytest.approx(math.exp(ld), rel=1e-13)


@pytest.mark.parametrize("method", ["gdp", "rdp", "mironov", "rdp_grid"])
def test_a_silent_run_has_zero_delta_and_every_delta_is_in_range(method):
    # beta = 0: the path does not depend on the data
    assert P.path_delta(0.0, 0.5, 2.0, 0.3, method=method) == 0.0
    assert P.path_delta(0.0, 0.5, 2.0, 0.3, method=method, log=True) == -math.inf
    for eps in (0.0, 0.1, 3.0):
        d = P.path_delta(1.0, 0.5, 2.0, eps, method=method)
        assert 0.0 < d <= 1.0


@pytest.mark.parametrize("beta,eps", [(1.0, 0.5), (3.0, 1.0), (10.0, 5.0), (0.2, 0.05)])
def test_rdp_delta_is_valid_and_beats_the_grid_and_mironov(beta, eps):
    s, t = 0.5, 2.0
    mu = _mu(beta, s, t)
    rho = mu * mu / 2
    ld_rdp = P.path_delta(beta, s, t, eps, method="rdp", log=True)
    ld_grid = P.path_delta(beta, s, t, eps, method="rdp_grid", log=True)
    # every RDP conversion of the Gaussian is at least its exact profile
    assert ld_rdp >= float(mpmath.log(gdp_delta_mp(eps, mu, dps=60))) - 1e-12
    # the continuous order search is strictly better than dp-accounting's grid, and than Mironov
    assert ld_rdp < ld_grid <= 0.0
    assert ld_rdp < P.path_delta(beta, s, t, eps, method="mironov", log=True) or eps <= rho
    # and it inverts the rdp epsilon
    assert P.path_epsilon(beta, s, t, log_delta=ld_rdp, method="rdp") == pytest.approx(eps, rel=1e-8)
    assert P.path_delta(beta, s, t, eps, method="rdp") == pytest.approx(math.exp(ld_rdp), rel=1e-14)


@pytest.mark.parametrize("beta,eps", [(1.0, 0.5), (3.0, 1.0), (10.0, 5.0), (0.2, 0.05), (30.0, 2.0)])
def test_rdp_grid_delta_is_dp_accountings(beta, eps):
    s, t = 0.5, 2.0
    rho = _mu(beta, s, t) ** 2 / 2
    want = rpa.compute_delta(ORDERS, rho * ORDERS, eps)[0]
    assert P.path_delta(beta, s, t, eps, method="rdp_grid") == pytest.approx(want, rel=1e-13)
    assert P.path_delta(beta, s, t, eps, method="rdp_grid", log=True) == \
        pytest.approx(float(_grid_log_delta_mp(rho, eps)), rel=1e-12)


def test_rdp_grid_delta_below_float_is_the_same_bound_in_log_space():
    # dp-accounting's float delta underflows to 0 here; the bound itself is e^-5900 or so
    beta, s, t, eps = 1.0, 0.5, 2.0, 60.0
    rho = _mu(beta, s, t) ** 2 / 2
    assert rpa.compute_delta(ORDERS, rho * ORDERS, eps)[0] == 0.0
    ld = P.path_delta(beta, s, t, eps, method="rdp_grid", log=True)
    assert ld < -745 and ld == pytest.approx(float(_grid_log_delta_mp(rho, eps)), rel=1e-12)
    assert P.path_delta(beta, s, t, eps, method="rdp_grid") == 0.0


# --------------------------------------------------------------------------- path_epsilon, rdp_grid


@pytest.mark.parametrize("beta,delta", [(30.0, 1e-5), (50.0, 1e-300), (1.0, 1e-5)])
def test_rdp_grid_epsilon_is_dp_accountings_compute_epsilon_exactly(beta, delta):
    # where dp-accounting's float computation is valid (delta >= 1e-300) the answer IS its answer
    s, t = 0.1, 2.0
    rho = P.path_rho(beta, s, t)
    want = dp_accounting.rdp.compute_epsilon(ORDERS, rho * ORDERS, delta)[0]
    assert P.path_epsilon(beta, s, t, delta, method="rdp_grid") == want


@pytest.mark.parametrize("log_delta", [-1000.0, -5e4])
def test_rdp_grid_epsilon_beyond_float_delta_is_the_published_bound(log_delta):
    beta, s, t = 50.0, 0.1, 2.0
    rho = _mu(beta, s, t) ** 2 / 2
    got = P.path_epsilon(beta, s, t, log_delta=log_delta, method="rdp_grid")
    assert got == pytest.approx(float(_grid_epsilon_mp(rho, log_delta)), rel=1e-12)
    # continuous in delta across the switch to log space at 1e-300
    lo = P.path_epsilon(beta, s, t, log_delta=math.log(1e-300) - 1e-9, method="rdp_grid")
    hi = P.path_epsilon(beta, s, t, 1e-300, method="rdp_grid")
    assert lo == pytest.approx(hi, rel=1e-9)


# --------------------------------------------------------------------------- calibration on the grid


# (eps, delta): the regimes where the bracketing search has to widen its bracket downwards
# (tiny eps, small delta: the grid's largest order is too small) or upwards (delta near 1)
_GRID_TARGETS = [(1e-3, 1e-5), (0.01, 1e-12), (0.01, 0.01), (0.1, 0.9), (2.0, 0.9), (1.0, 1e-5), (5.0, 1e-10)]


@pytest.mark.parametrize("eps,delta", _GRID_TARGETS)
def test_rdp_grid_beta_max_is_safe_and_tight_for_dp_accounting(eps, delta):
    s, t = 0.02, 3.0

    def grid_eps(beta):
        rho = (beta * s) ** 2 * t / 4
        return dp_accounting.rdp.compute_epsilon(ORDERS, rho * ORDERS, delta)[0]

    b = P.beta_max(eps, delta, sensitivity=s, time=t, method="rdp_grid")
    assert P.path_epsilon(b, s, t, delta, method="rdp_grid") <= eps  # the documented contract, exactly
    # dp-accounting at the plan's rho and the caller's delta: within eps exactly (not at exp(log(delta)))
    rho_plan = P.path_rho(b, s, t)
    assert dp_accounting.rdp.compute_epsilon(ORDERS, rho_plan * ORDERS, delta)[0] <= eps
    assert grid_eps(b) <= eps * (1 + 1e-12) and grid_eps(b * (1 + 1e-9)) > eps
    tm = P.time_max(eps, delta, sensitivity=s, beta=b / 2)
    assert tm > 0
    tg = P.time_max(eps, log_delta=math.log(delta), sensitivity=s, beta=b / 2, method="rdp_grid")
    assert tg == pytest.approx(4 * t, rel=1e-8)  # halving beta quadruples the time at the same rho


@pytest.mark.parametrize("method", ["gdp", "rdp", "mironov"])
def test_time_max_defaults_to_one_chain_and_accepts_log_delta(method):
    eps, delta, s, beta = 0.8, 1e-6, 0.1, 2.0
    one = P.time_max(eps, delta, sensitivity=s, beta=beta, method=method)
    assert one == pytest.approx(P.time_max(eps, delta, sensitivity=s, beta=beta, num_chains=1, method=method), rel=0)
    assert P.time_max(eps, log_delta=math.log(delta), sensitivity=s, beta=beta, method=method) == one
    assert P.time_max(eps, delta, sensitivity=s, beta=beta, num_chains=2, method=method) == \
        pytest.approx(one / 2, rel=1e-12)
    if method == "gdp":
        mu = float(mpmath.findroot(lambda m: gdp_delta_mp(eps, m, dps=60) - delta, 1.0))
        assert one == pytest.approx(2 * (mu / (beta * s)) ** 2, rel=1e-10)
    assert P.beta_max(eps, log_delta=math.log(delta), sensitivity=s, time=one, method=method) == \
        pytest.approx(beta, rel=1e-10)
