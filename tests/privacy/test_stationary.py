"""Stationary (exact Gibbs draw) route: Gopi-Lee-Liu GDP, TV slack, corrected Theorem 2.7.

Oracle tests for dp_infer.privacy.stationary.

Oracles:
* closed forms of the Gopi-Lee-Liu constants (``Delta sqrt(beta / m)``, ``G sqrt(k) / (n sqrt(mu + lambda))``);
* the exact Gaussian privacy profile ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` in 60-digit
  mpmath (not the package's conversion): the calibrated beta meets its target exactly, with the TV
  slack ``(1 + e^eps) K tau``, and a beta 1e-9 larger does not;
* the corrected Theorem 2.7's three conditions, each solved in 50-digit mpmath (Lambert W), in
  regimes where each one binds.
"""

import math
import numpy as np
import pytest
from dp_infer.privacy import exact as X, stationary as S
from dp_infer.privacy.accountant import Accountant
import mpmath
from dp_infer.privacy.events import GdpEvent
from tests.support.mp_oracles import gdp_delta_mp
from tests.support.strict_tolerance import approx

N_REC = 100
DELTA = 2.0 / N_REC  # seed-001 §10.2 family: (theta - d)^2/2, d in [-1, 1], worst neighbours
GRID = np.linspace(-2.0, 2.0, 400001)  # C = [-2, 2]


def _gaussian_pair_delta(m1, m2, sd, eps):
    x = np.linspace(min(m1, m2) - 14 * sd, max(m1, m2) + 14 * sd, 200001)
    return X.hockey_stick_delta(x, -0.5 * ((x - m1) / sd) ** 2, -0.5 * ((x - m2) / sd) ** 2, eps)


def test_quadratic_loss_gives_exactly_the_gaussian_mechanism():
    # Gibbs of beta (theta - dbar)^2 m/2 is N(dbar, 1/(beta m)); neighbours shift dbar by Delta/m
    for beta, m in [(10.0, 1.0), (180.0, 1.0), (50.0, 3.0)]:
        mu = S.gibbs_gdp_mu(beta, DELTA * m, m)  # gradient difference of the loss is m * (mean shift)
        sd = 1.0 / math.sqrt(beta * m)
        for eps in [0.0, 0.5, 1.0, 2.0]:
            assert _gaussian_pair_delta(0.0, DELTA, sd, eps) == pytest.approx(X.gdp_delta(eps, mu), rel=1e-6, abs=1e-13)


def test_regularised_exponential_mechanism_constant_on_gaussian_special_cases():
    n, k, mu = 50, 400.0, 0.3
    # linear losses f(x; s) = s x, |s| <= 1: G = |s - s'| = 2; posterior N(-sbar/mu, 1/(k mu))
    G = 2.0
    sd = 1.0 / math.sqrt(k * mu)
    gdp = S.regularized_exp_mech_mu(k, G, n, mu)
    assert gdp == pytest.approx(G * math.sqrt(k) / (n * math.sqrt(mu)))
    for eps in [0.2, 1.0]:
        assert _gaussian_pair_delta(0.0, G / (n * mu), sd, eps) == pytest.approx(X.gdp_delta(eps, gdp), rel=1e-6)
    # quadratic losses (x - s)^2/2 plus the regulariser: strong convexity 1 + mu, shift Delta/(1 + mu)
    gdp2 = S.regularized_exp_mech_mu(k, G, n, mu, loss_strong_convexity=1.0)
    sd2 = 1.0 / math.sqrt(k * (1 + mu))
    assert _gaussian_pair_delta(0.0, G / n / (1 + mu), sd2, 1.0) == pytest.approx(X.gdp_delta(1.0, gdp2), rel=1e-6)


def test_non_gaussian_pair_is_dominated_by_the_gdp_curve():
    # P ~ exp(-m x^2/2 - a|x|), Q ~ exp(-m x^2/2 - a|x - 1|): U_Q - U_P is 2a-Lipschitz, s = 2a/sqrt(m)
    x = np.linspace(-15, 16, 310001)
    for m, a in [(1.0, 0.5), (1.0, 2.0), (4.0, 0.3)]:
        lp = -m * x**2 / 2 - a * np.abs(x)
        lq = -m * x**2 / 2 - a * np.abs(x - 1)
        s = 2 * a / math.sqrt(m)
        for eps in [0.0, 0.5, 1.0, 2.0]:
            exact = X.hockey_stick_delta(x, lp, lq, eps)
            assert exact <= X.gdp_delta(eps, s) + 1e-9
        assert X.hockey_stick_delta(x, lp, lq, 0.0) > 0.3 * X.gdp_delta(0.0, s)  # not a vacuous comparison


def test_calibrated_stationary_draw_meets_its_claim_on_C():
    eps, delta = 1.0, 1e-5
    b = S.stationary_beta_max(eps, delta, sensitivity=DELTA, strong_convexity=1.0)
    mu = S.gibbs_gdp_mu(b, DELTA, 1.0)
    assert X.gdp_delta(eps, mu) == pytest.approx(delta, rel=1e-9)
    for dbar in [0.0, 0.98]:  # truncation to C = [-2, 2] (also near the boundary)
        lp = -b * (GRID - dbar) ** 2 / 2
        lq = -b * (GRID - dbar + DELTA) ** 2 / 2
        d = X.hockey_stick_delta(GRID, lp, lq, eps)
        assert d <= delta * (1 + 1e-6)
        for e in [0.3, 2.0]:
            assert X.hockey_stick_delta(GRID, lp, lq, e) <= X.gdp_delta(e, mu) * (1 + 1e-6) + 1e-300
    # the exact beta_max of the (unconstrained) Gaussian mechanism is recovered: sigma = Delta/mu*
    assert b == pytest.approx((X.gdp_mu(eps, delta) / DELTA) ** 2, rel=1e-12)


def test_tv_slack_is_charged_with_the_corrected_factor_and_is_tight():
    # worst case: a sampler within TV tau of each target can move tau mass into the optimal
    # distinguishing set under D and tau out of it under D': delta grows by exactly (1 + e^eps) tau
    mu, eps, tau = 1.0, 1.0, 1e-3
    x = np.linspace(-12, 13, 500001)
    p = np.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)
    q = np.exp(-0.5 * (x - mu) ** 2) / math.sqrt(2 * math.pi)
    x0 = eps / mu + mu / 2  # optimal set for delta(Q || P): {x > x0}
    inside = x > x0
    u_in = ((x > x0) & (x < x0 + 1)).astype(float)  # uniform on [x0, x0 + 1]
    u_out = ((x < x0) & (x > x0 - 1)).astype(float)
    w = np.exp(X.trapezoid_log_weights(x))
    u_in /= np.sum(w * u_in)
    u_out /= np.sum(w * u_out)
    a_q = q + tau * (u_in - q * (~inside) / np.sum(w * q * (~inside)))  # TV(a_q, q) = tau
    a_p = p + tau * (u_out - p * inside / np.sum(w * p * inside))      # TV(a_p, p) = tau
    assert a_q.min() >= 0 and a_p.min() >= 0
    d = X.hockey_stick_delta(x, np.log(a_q), np.log(a_p), eps, both=False)
    claimed = X.gdp_delta(eps, mu) + (1 + math.exp(eps)) * tau
    assert d <= claimed * (1 + 1e-5)
    assert d == pytest.approx(claimed, rel=1e-4)  # attained
    assert d > X.gdp_delta(eps, mu) + tau  # the paper's "+ tau" under-reports
    # and the accountant / calibrator charge exactly this
    ev = S.stationary_event(1.0, 1.0, 1.0, tv_error=tau)
    assert ev.mu == pytest.approx(1.0)
    assert Accountant([ev]).get_delta(eps) == pytest.approx(claimed, rel=1e-9)
    b = S.stationary_beta_max(eps, 1e-5, sensitivity=0.02, strong_convexity=1.0, tv_error=1e-6)
    mu_b = S.gibbs_gdp_mu(b, 0.02, 1.0)
    assert X.gdp_delta(eps, mu_b) + (1 + math.e) * 1e-6 == pytest.approx(1e-5, rel=1e-8)
    assert b < S.stationary_beta_max(eps, 1e-5, sensitivity=0.02, strong_convexity=1.0)


def test_multiple_draws_compose():
    ev = S.stationary_event(100.0, 0.02, 1.0, num_draws=4, tv_error=1e-8)
    assert ev.mu == pytest.approx(2 * S.gibbs_gdp_mu(100.0, 0.02, 1.0))
    assert ev.tv_error == pytest.approx(4e-8)
    b4 = S.stationary_beta_max(1.0, 1e-5, sensitivity=0.02, strong_convexity=1.0, num_draws=4)
    assert b4 == pytest.approx(S.stationary_beta_max(1.0, 1e-5, sensitivity=0.02, strong_convexity=1.0) / 4)


def _thresholded_logdens(beta, dbar, psi):
    return -beta * np.maximum((GRID - dbar) ** 2 / 2, psi)


@pytest.mark.parametrize("psi", [0.0, 1e-4, 1e-3, 1e-2])
def test_corrected_theorem_2_7_meets_its_claim(psi):
    eps, delta = 1.0, 1e-5
    b = S.theorem_2_7_beta_max(eps, delta, sensitivity=DELTA, strong_convexity=1.0, smoothness=1.0, psi=psi)
    # the digest's printed (c) uses e^{beta psi} <= e; the exact LSI constant is never worse
    d_psi = DELTA + math.sqrt(2 * psi)
    digest = min(1 / psi if psi > 0 else math.inf,
                 eps / (2 * d_psi * (4 * math.sqrt(2 * psi) + DELTA)),
                 eps**2 / (8 * math.e * d_psi**2 * math.log(1 / delta)))
    assert b >= digest
    if psi > 0:
        assert b * psi <= 1.0 + 1e-12
    # exact privacy of the thresholded Gibbs pair on C = [-2, 2] (worst-case neighbours)
    for dbar in [0.0, 0.9]:
        d = X.hockey_stick_delta(GRID, _thresholded_logdens(b, dbar, psi), _thresholded_logdens(b, dbar + DELTA, psi), eps)
        assert d <= delta


def test_theorem_2_7_monotone_in_psi_and_eps():
    kw = dict(sensitivity=DELTA, strong_convexity=1.0, smoothness=1.0)
    bs = [S.theorem_2_7_beta_max(1.0, 1e-5, psi=p, **kw) for p in [0.0, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]]
    assert all(b2 < b1 for b1, b2 in zip(bs, bs[1:]))
    assert S.theorem_2_7_beta_max(2.0, 1e-5, psi=1e-3, **kw) > S.theorem_2_7_beta_max(1.0, 1e-5, psi=1e-3, **kw)
    # at psi = 0 it never exceeds the exact GDP calibration of the same Gaussian mechanism
    assert bs[0] <= S.stationary_beta_max(1.0, 1e-5, sensitivity=DELTA, strong_convexity=1.0)


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: S.gibbs_gdp_mu(1.0, 0.1, 0.0), "strong_convexity"),
        (lambda: S.gibbs_gdp_mu(-1.0, 0.1, 1.0), "beta"),
        (lambda: S.regularized_exp_mech_mu(1.0, 1.0, 0, 1.0), "n"),
        (lambda: S.regularized_exp_mech_mu(1.0, 1.0, 10, 0.0), "mu"),
        (lambda: S.stationary_beta_max(1.0, 1e-5, sensitivity=0.1, strong_convexity=1.0, tv_error=1e-5), "tv_error"),
        (lambda: S.stationary_event(1.0, 0.1, 1.0, num_draws=0), "num_draws"),
        (lambda: S.theorem_2_7_beta_max(1.0, 1e-5, sensitivity=0.1, strong_convexity=1.0, smoothness=1.0, psi=-1.0), "psi"),
        (lambda: S.theorem_2_7_beta_max(1.0, 2.0, sensitivity=0.1, strong_convexity=1.0, smoothness=1.0, psi=0.1), "delta"),
    ],
)
def test_bad_inputs_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# --------------------------------------------------------------------------- the constants


def test_gibbs_gdp_mu_is_delta_sqrt_beta_over_m():
    for beta, s, m in ((1.0, 1.0, 1.0), (100.0, 0.02, 0.5), (1e6, 3e-4, 7.0), (2.5, 4.0, 1e-3)):
        with mpmath.workdps(40):
            want = float(mpmath.mpf(s) * mpmath.sqrt(mpmath.mpf(beta) / mpmath.mpf(m)))
        assert S.gibbs_gdp_mu(beta, s, m) == approx(want, rel=1e-15)
    assert S.gibbs_gdp_mu(0.0, 1.0, 1.0) == 0.0 and S.gibbs_gdp_mu(3.0, 0.0, 2.0) == 0.0
    for args, name in (((-1.0, 1.0, 1.0), "beta"), ((math.inf, 1.0, 1.0), "beta"), ((1.0, -0.1, 1.0), "sensitivity"),
                       ((1.0, math.nan, 1.0), "sensitivity"), ((1.0, 1.0, 0.0), "strong_convexity"),
                       ((1.0, 1.0, math.inf), "strong_convexity")):
        with pytest.raises(ValueError, match=f"^{name} must"):
            S.gibbs_gdp_mu(*args)


def test_regularized_exp_mech_mu_closed_form_and_its_domain():
    for k, G, n, mu, lam in ((400.0, 2.0, 50, 0.3, 0.0), (9.0, 1.5, 7, 0.25, 1.75), (1e4, 0.1, 1000, 0.0, 2.0),
                             (0.0, 1.0, 3, 1.0, 0.0), (5.0, 0.0, 3, 1.0, 0.0)):
        with mpmath.workdps(40):
            want = float(mpmath.mpf(G) * mpmath.sqrt(k) / (n * mpmath.sqrt(mpmath.mpf(mu) + mpmath.mpf(lam))))
        assert S.regularized_exp_mech_mu(k, G, n, mu, loss_strong_convexity=lam) == approx(want, rel=1e-15)
    # the Gibbs form: exp(-k (F + mu/2 |x|^2)) has beta = k, m = mu + lambda, Delta = G / n
    assert S.regularized_exp_mech_mu(9.0, 1.5, 7, 0.25, 1.75) == approx(S.gibbs_gdp_mu(9.0, 1.5 / 7, 2.0), rel=1e-15)
    with pytest.raises(ValueError, match=r"mu \+ loss_strong_convexity must lie in \(0, inf\)"):
        S.regularized_exp_mech_mu(1.0, 1.0, 10, 0.0)
    with pytest.raises(ValueError, match=r"mu \+ loss_strong_convexity"):
        S.regularized_exp_mech_mu(1.0, 1.0, 10, 0.0, loss_strong_convexity=0.0)
    for args, kw, name in (((-1.0, 1.0, 10, 1.0), {}, "k"), ((1.0, -1.0, 10, 1.0), {}, "G"),
                           ((1.0, 1.0, 0, 1.0), {}, "n"), ((1.0, 1.0, 2.5, 1.0), {}, "n"),
                           ((1.0, 1.0, 10, -1.0), {"loss_strong_convexity": 2.0}, "mu"),
                           ((1.0, 1.0, 10, 1.0), {"loss_strong_convexity": -0.5}, "loss_strong_convexity")):
        with pytest.raises(ValueError, match=f"^{name} must"):
            S.regularized_exp_mech_mu(*args, **kw)


def test_stationary_event_composes_draws_and_charges_tv_per_draw():
    for nd, tv in ((1, 0.0), (4, 1e-8), (9, 2.5e-7)):
        ev = S.stationary_event(100.0, 0.02, 0.5, tv_error=tv, num_draws=nd)
        assert isinstance(ev, GdpEvent)
        assert ev.mu == approx(0.02 * math.sqrt(100.0 / 0.5) * math.sqrt(nd), rel=1e-15)
        assert ev.tv_error == approx(tv * nd, rel=1e-15)
        assert ev.assumptions == S._ASSUMPTIONS
    for kw, name in (({"num_draws": 0}, "num_draws"), ({"num_draws": 1.0}, "num_draws"),
                     ({"tv_error": -1e-9}, "tv_error"), ({"tv_error": math.inf}, "tv_error")):
        with pytest.raises(ValueError, match=f"^{name} must"):
            S.stationary_event(1.0, 0.1, 1.0, **kw)


# --------------------------------------------------------------------------- calibration


CASES = [  # eps, delta, s, m, num_draws, tv
    (1.0, 1e-5, 0.02, 1.0, 1, 0.0),
    (0.1, 1e-6, 0.5, 3.0, 4, 0.0),
    (5.0, 1e-9, 1e-3, 0.2, 1, 1e-13),
    (0.5, 1e-3, 0.3, 1.0, 3, 2e-5),
    (8.0, 0.2, 2.0, 0.7, 2, 1e-6),
    # here m (mu*/s)^2 of the float mu* rounds to a beta whose delta exceeds the target: the
    # calibrator has to step down
    (1.0, 1e-3, 0.1, 3.0, 2, 0.0),
    (4.0, 1e-6, 0.01, 1.0, 3, 0.0),
]


@pytest.mark.parametrize("eps, delta, s, m, nd, tv", CASES)
def test_beta_max_meets_its_target_exactly_and_is_tight(eps, delta, s, m, nd, tv):
    b = S.stationary_beta_max(eps, delta, sensitivity=s, strong_convexity=m, num_draws=nd, tv_error=tv)
    slack = mpmath.mpf(nd) * mpmath.mpf(tv) * (1 + mpmath.exp(eps))

    def total(beta):
        with mpmath.workdps(60):
            mu = mpmath.mpf(s) * mpmath.sqrt(mpmath.mpf(beta) / m) * mpmath.sqrt(nd)
            return gdp_delta_mp(eps, mu) + slack

    assert 0 < b < math.inf
    assert total(b) <= delta  # exact: no tolerance
    assert total(b * (1 + 1e-9)) > delta  # and the largest such beta to 1e-9
    # the same through log_delta
    assert S.stationary_beta_max(eps, log_delta=math.log(delta), sensitivity=s, strong_convexity=m,
                                 num_draws=nd, tv_error=tv) == approx(b, rel=1e-12)


def test_beta_max_with_a_tiny_log_delta_and_no_sampling_error():
    # delta = e^-800 underflows as a float: the calibration must work in log delta throughout
    eps, ld, s, m = 2.0, -800.0, 0.01, 1.0
    b = S.stationary_beta_max(eps, log_delta=ld, sensitivity=s, strong_convexity=m)
    assert 0 < b < math.inf
    with mpmath.workdps(60):
        mu = lambda beta: mpmath.mpf(s) * mpmath.sqrt(mpmath.mpf(beta) / m)  # noqa: E731
        assert mpmath.log(gdp_delta_mp(eps, mu(b))) <= ld
        assert mpmath.log(gdp_delta_mp(eps, mu(b * (1 + 1e-9)))) > ld


@pytest.mark.parametrize("m", [1.0, 1.5, 1e100, 0.5, 1e-3])
def test_beta_max_where_every_float_beta_meets_the_target(m):
    # sensitivity 1e-160: the exact beta* = m (mu*/s)^2 ~ 1e321 m lies beyond float64 (an
    # OverflowError before); the answer is a float beta that provably meets the target
    eps, delta, s = 1.0, 1e-5, 1e-160
    b = S.stationary_beta_max(eps, delta, sensitivity=s, strong_convexity=m)
    assert 1e300 < b < math.inf
    with mpmath.workdps(60):
        assert gdp_delta_mp(eps, mpmath.mpf(s) * mpmath.sqrt(mpmath.mpf(b) / m)) <= delta


def test_beta_max_refuses_a_sampling_slack_that_uses_up_delta():
    # eps = 1e-300: e^eps == 1.0 exactly, so the slack (1 + e^eps) tau = 2 tau equals delta exactly
    assert 1.0 + math.exp(1e-300) == 2.0
    for tv in (5e-6, 6e-6):
        with pytest.raises(ValueError, match="tv_error too large"):
            S.stationary_beta_max(1e-300, 1e-5, sensitivity=0.1, strong_convexity=1.0, tv_error=tv)
    with pytest.raises(ValueError, match="tv_error too large"):
        S.stationary_beta_max(1.0, 1e-5, sensitivity=0.1, strong_convexity=1.0, tv_error=3e-6, num_draws=2)
    # equality with a delta given in log form: d = exp(ld) and tv = d / 2 make the slack 2 tv == d
    # exactly; the refusal must be the clear one, not log(0)'s "math domain error"
    ld = -11.5
    d = math.exp(ld)
    assert 2.0 * (d / 2.0) == d
    with pytest.raises(ValueError, match="tv_error too large"):
        S.stationary_beta_max(1e-300, sensitivity=0.1, strong_convexity=1.0, tv_error=d / 2.0, log_delta=ld)
    # just below: a (small) positive beta
    b = S.stationary_beta_max(1e-300, 1e-5, sensitivity=0.1, strong_convexity=1.0, tv_error=4.9e-6)
    assert 0 < b < S.stationary_beta_max(1e-300, 1e-5, sensitivity=0.1, strong_convexity=1.0)


def test_beta_max_inputs():
    kw = dict(sensitivity=0.1, strong_convexity=1.0)
    with pytest.raises(ValueError, match="exactly one of delta or log_delta"):
        S.stationary_beta_max(1.0, 1e-5, log_delta=-5.0, **kw)
    with pytest.raises(ValueError, match="exactly one of delta or log_delta"):
        S.stationary_beta_max(1.0, **kw)
    for bad, name in (({"eps": 0.0}, "eps"), ({"eps": math.inf}, "eps"), ({"sensitivity": 0.0}, "sensitivity"),
                      ({"strong_convexity": -1.0}, "strong_convexity"), ({"num_draws": 0}, "num_draws"),
                      ({"tv_error": -1.0}, "tv_error")):
        args = {"eps": 1.0, **kw, **bad}
        with pytest.raises(ValueError, match=f"^{name} must"):
            S.stationary_beta_max(args.pop("eps"), 1e-5, **args)


# --------------------------------------------------------------------------- corrected Theorem 2.7


def _mp_theorem_2_7(eps, delta, s, m, big_m, psi):
    """min of the three conditions' largest beta, 50 digits (c solved with Lambert W)."""
    with mpmath.workdps(50):
        eps, s, m, big_m, psi = (mpmath.mpf(x) for x in (eps, s, m, big_m, psi))
        d_psi = s + mpmath.sqrt(2 * big_m * psi)
        b_b = eps / (2 * d_psi * (4 * mpmath.sqrt(2 * psi / m) + s / m))
        rhs = eps**2 * m / (8 * d_psi**2 * mpmath.log(1 / mpmath.mpf(delta)))
        if psi == 0:
            return float(min(b_b, rhs)), ("b" if b_b < rhs else "c")
        b_c = mpmath.lambertw(psi * rhs).real / psi
        assert abs(b_c * mpmath.exp(b_c * psi) / rhs - 1) < mpmath.mpf(10) ** -40  # it solves (c)
        cands = {"a": 1 / psi, "b": b_b, "c": b_c}
        which = min(cands, key=cands.get)
        return float(cands[which]), which


@pytest.mark.parametrize("eps, delta, s, m, big_m, psi, binds", [
    (50.0, 0.5, 1e-3, 1.0, 1.0, 1.0, "a"),      # beta psi <= 1 binds
    (20.0, 0.1, 0.02, 1.0, 1.0, 1e-3, "b"),    # the sensitivity condition binds (eps >> log(1/delta))
    (20.0, 0.5, 0.02, 1.0, 1.0, 0.0, "b"),
    (1.0, 1e-5, 0.02, 1.0, 1.0, 1e-3, "c"),
    (0.1, 1e-12, 0.5, 2.0, 3.0, 0.05, "c"),     # Herbst / LSI binds
    (0.2, 1e-9, 1.0, 1.0, 1.0, 0.0, "c"),
    (3.0, 1e-6, 0.1, 0.5, 4.0, 0.2, None),
    (20.0, 0.1, 0.02, 4.0, 1.0, 1e-4, "b"),    # (b) with m != 1: psi / m and Delta / m, not * m
    (20.0, 0.1, 0.02, 0.25, 1.0, 1e-3, "b"),
])
def test_theorem_2_7_is_the_smallest_of_its_three_conditions(eps, delta, s, m, big_m, psi, binds):
    want, which = _mp_theorem_2_7(eps, delta, s, m, big_m, psi)
    if binds is not None:
        assert which == binds
    got = S.theorem_2_7_beta_max(eps, delta, sensitivity=s, strong_convexity=m, smoothness=big_m, psi=psi)
    assert got == approx(want, rel=1e-13)


def test_theorem_2_7_inputs():
    kw = dict(sensitivity=0.1, strong_convexity=1.0, smoothness=1.0, psi=0.01)
    for bad, name in (({"smoothness": 0.0}, "smoothness"), ({"sensitivity": -1.0}, "sensitivity"),
                      ({"strong_convexity": 0.0}, "strong_convexity"), ({"psi": math.inf}, "psi")):
        with pytest.raises(ValueError, match=f"^{name} must"):
            S.theorem_2_7_beta_max(1.0, 1e-5, **{**kw, **bad})
    with pytest.raises(ValueError, match="^eps must"):
        S.theorem_2_7_beta_max(0.0, 1e-5, **kw)
    with pytest.raises(ValueError, match="^delta must"):
        S.theorem_2_7_beta_max(1.0, 0.0, **kw)
