"""Oracle tests for dp_infer.privacy.stationary (mutation testing, issue 19).

Oracles:
* closed forms of the Gopi-Lee-Liu constants (``Delta sqrt(beta / m)``, ``G sqrt(k) / (n sqrt(mu + lambda))``);
* the exact Gaussian privacy profile ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` in 60-digit
  mpmath (not the package's conversion): the calibrated beta meets its target exactly, with the TV
  slack ``(1 + e^eps) K tau``, and a beta 1e-9 larger does not;
* the corrected Theorem 2.7's three conditions, each solved in 50-digit mpmath (Lambert W), in
  regimes where each one binds.
"""

import math

import mpmath
import pytest

from dp_infer.privacy import stationary as S
from dp_infer.privacy.events import GdpEvent
from mp_oracles import gdp_delta_mp
from strict_tolerance import approx


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
