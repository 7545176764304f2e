"""Oracle tests for dp_infer.privacy.minibatch.

Oracles:
* the integer-order RDP of the Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019:
  ``A_a = sum_k C(a, k) (1-q)^(a-k) q^k exp(k (k-1) / (2 sigma^2))``, RDP = log A_a / (a - 1))
  evaluated in 50-digit mpmath, independent of dp-accounting's code;
* closed forms at q = 1 (the Gaussian path: mu = beta (2C/n) sqrt(K T h / 2) under replace-one,
  half that under add/remove) and of the noise multiplier;
* the replace-one curve (the antipodal pair's Renyi divergence) against an independent 40-digit
  mpmath quadrature of the same integral (never below it, within 1e-7 relative); the claim that the
  antipodal pair dominates every pair of clipped gradients, by 2-D quadrature of hockey-stick
  divergences over pairs in the disc; the sandwich every valid replace-one curve must satisfy: at
  least the REPLACE_SPECIAL curve (a zero-record pair is one of the pairs), at most the unamplified
  2C Gaussian curve and the old group-privacy bound (the weak triangle inequality, recomputed here
  order by order); eps never below dp-accounting's REPLACE_ONE PLD of the same pair, and within 10%
  of it where the old bound was 1.3x;
* calibration at q = 1 against the closed-form inverse (gdp_mu), exact on the safe side.

* an almost noiseless step (sigma**2 underflows to 0) releases the clipped sum essentially
  without noise: the only valid float bound is inf, at every order, and it is a plain answer,
  not a numerical accident (no RuntimeWarning).
"""

import math
import dp_accounting as dpa
import mpmath
import numpy as np
import pytest
from dp_accounting import pld
from dp_infer.privacy import minibatch as mb
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.conversions import gdp_epsilon, gdp_mu, rdp_epsilon
from dp_infer.privacy.events import GdpEvent, RdpCurveEvent
from dp_infer.privacy.float32_margin import float32_gradient_margin
from tests.support.strict_tolerance import approx
import warnings


BETA, H, T, C, N = 100.0, 0.01, 40, 1.0, 1000
DELTA = 1e-5


def _f32(n):
    """The planned per-record sensitivity is C times this (the float32 margin, dp_infer.privacy.float32_margin)."""
    return 1.0 + float32_gradient_margin(n)


def _sigma(q, beta=BETA, h=H, c=C, n=N):
    return q * n * math.sqrt(2.0 / h) / (beta * c * _f32(n))


def _mp_poisson_gaussian_rdp(alpha: int, q: float, sigma: float) -> float:
    """Integer-order RDP of one Poisson-subsampled Gaussian step (MTZ 2019), 50 digits."""
    with mpmath.workdps(50):
        q, s2 = mpmath.mpf(q), mpmath.mpf(sigma) ** 2
        a = mpmath.fsum(mpmath.binomial(alpha, k) * (1 - q) ** (alpha - k) * q**k * mpmath.exp(k * (k - 1) / (2 * s2))
                        for k in range(alpha + 1))
        return float(mpmath.log(a) / (alpha - 1))


# --------------------------------------------------------------------------- the mechanism


def test_noise_multiplier_is_noise_std_over_the_drift_of_one_clipped_gradient():
    for beta, h, q, c, n in ((100.0, 0.01, 0.01, 1.0, 1000), (3.0, 0.5, 1.0, 0.2, 7), (1e4, 1e-6, 0.3, 5.0, 10**6)):
        drift = h * beta * c * _f32(n) / (q * n)  # one record's planned drift: C with the float32 margin
        assert mb.minibatch_noise_multiplier(beta, h, q, c, n) == approx(math.sqrt(2 * h) / drift, rel=1e-14)
    for name, args in (("beta", (0.0, H, 0.1, C, N)), ("step_size", (BETA, -1.0, 0.1, C, N)),
                       ("q", (BETA, H, 0.0, C, N)), ("q", (BETA, H, math.nan, C, N)), ("q", (BETA, H, None, C, N)),
                       ("clip_norm", (BETA, H, 0.1, 0.0, N)), ("n", (BETA, H, 0.1, C, 0))):
        with pytest.raises(ValueError, match=name):
            mb.minibatch_noise_multiplier(*args)


def test_q_must_lie_in_zero_one_with_one_included():
    assert mb._check_q(1.0) == 1.0 and mb._check_q(1) == 1.0 and mb._check_q("0.5") == 0.5
    assert mb._check_q(1e-300) == 1e-300
    for bad in (0.0, -0.1, 1.0 + 1e-15, math.nan, math.inf, "x", None, [0.5]):
        with pytest.raises(ValueError, match=r"q \(sampling probability\) must lie in \(0, 1\]"):
            mb._check_q(bad)
    assert mb._check_neighboring("replace_one") == "replace_one"
    assert mb._check_neighboring("add_remove") == "add_remove"
    with pytest.raises(ValueError, match="neighboring must be one of"):
        mb._check_neighboring("replace_special")


def test_dp_accounting_event_is_k_t_self_composed_subsampled_gaussians():
    ev = mb.minibatch_dp_accounting_event(BETA, H, T, 0.02, C, N, num_chains=3)
    assert isinstance(ev, dpa.SelfComposedDpEvent) and ev.count == 3 * T
    assert isinstance(ev.event, dpa.PoissonSampledDpEvent) and ev.event.sampling_probability == 0.02
    assert isinstance(ev.event.event, dpa.GaussianDpEvent)
    assert ev.event.event.noise_multiplier == approx(_sigma(0.02), rel=1e-15)
    assert mb.minibatch_dp_accounting_event(BETA, H, T, 0.02, C, N).count == T


# --------------------------------------------------------------------------- base curve


@pytest.mark.parametrize("q", [0.01, 0.2, 0.9])
@pytest.mark.parametrize("k", [1, 2])
def test_base_curve_equals_the_integer_order_closed_form(q, k):
    orders = np.array([2.0, 3.0, 5.0, 8.0, 16.0])
    got = mb.minibatch_base_rdp(orders, BETA, H, T, q, C, N, num_chains=k)
    want = np.array([k * T * _mp_poisson_gaussian_rdp(int(a), q, _sigma(q)) for a in orders])
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_base_curve_at_q1_is_the_gaussian_path():
    orders = np.array([1.5, 2.0, 7.5, 64.0])
    got = mb.minibatch_base_rdp(orders, BETA, H, T, 1.0, C, N, num_chains=2)
    np.testing.assert_allclose(got, 2 * T * orders / (2 * _sigma(1.0) ** 2), rtol=1e-9)


def test_base_curve_keeps_the_callers_order_and_is_non_decreasing():
    sorted_orders = np.concatenate([np.linspace(1.01, 3.0, 12), np.geomspace(3.5, 1e4, 12)])
    base = mb.minibatch_base_rdp(sorted_orders, BETA, H, T, 0.05, C, N)
    assert np.all(np.diff(base) >= 0)
    assert np.all(base > 0)
    perm = np.random.default_rng(0).permutation(len(sorted_orders))
    shuffled = mb.minibatch_base_rdp(sorted_orders[perm], BETA, H, T, 0.05, C, N)
    np.testing.assert_array_equal(shuffled, base[perm])
    # never above dp-accounting's own value at the same order (the envelope only lowers it)
    acc = dpa.rdp.RdpAccountant(orders=list(sorted_orders), neighboring_relation=dpa.NeighboringRelation.REPLACE_SPECIAL)
    acc.compose(mb.minibatch_dp_accounting_event(BETA, H, T, 0.05, C, N))
    raw = np.where(np.isnan(acc._rdp), np.inf, acc._rdp)
    assert np.all(base <= raw)
    # the envelope is min over larger orders of the raw values, computed independently
    env = np.array([raw[i:].min() for i in range(len(raw))])
    np.testing.assert_array_equal(base, env)


# --------------------------------------------------------------------------- replace-one curve

#: the exponents p of the weak triangle inequality the old group-privacy bound tried at each order
_OLD_TRIANGLE_PS = (1.25, 1.5, 2.0, 3.0, 4.0)


def _triangle_by_hand(alphas, q, k=1, *, beta=BETA, h=H, t=T, c=C, n=N):
    """The old replace-one bound (group privacy through a zero record): min over p of the weak-triangle
    bound on dp-accounting's REPLACE_SPECIAL curve at each alpha, written out order by order. A valid
    bound, so the antipodal pair's exact curve is never above it."""
    pairs = [(p * a, (p * a - 1.0) / (p - 1.0)) for a in alphas for p in _OLD_TRIANGLE_PS]
    need = sorted({o for pair in pairs for o in pair})
    R = dict(zip(need, mb.minibatch_base_rdp(need, beta, h, t, q, c, n, num_chains=k)))
    out = []
    for a in alphas:
        out.append(min((a - 1.0 / p) / (a - 1.0) * R[p * a] + R[(p * a - 1.0) / (p - 1.0)] for p in _OLD_TRIANGLE_PS))
    return np.array(out)


def _mp_antipodal_rdp(alpha: float, sigma: float, q: float) -> float:
    """D_alpha((1-q) N(0, s^2) + q N(1, s^2) || (1-q) N(0, s^2) + q N(-1, s^2)) by mpmath's quadrature at 30
    digits, on breakpoints every L / 10 over [-L, L] -- another rule, precision and code than the module's."""
    with mpmath.workdps(30):
        a, s, q = mpmath.mpf(alpha), mpmath.mpf(sigma), mpmath.mpf(q)
        c = 1 / mpmath.sqrt(2 * mpmath.pi * s * s)

        def f(y):
            p = (1 - q) * mpmath.exp(-y * y / (2 * s * s)) + q * mpmath.exp(-(y - 1) ** 2 / (2 * s * s))
            r = (1 - q) * mpmath.exp(-y * y / (2 * s * s)) + q * mpmath.exp(-(y + 1) ** 2 / (2 * s * s))
            return c * r * ((p / r) ** a - 1)  # E_Q[(P/Q)^a] - 1, so a tiny divergence keeps its digits

        L = 40 * s + 2 * a
        points = sorted(set(list(mpmath.linspace(-L, L, 21)) + [mpmath.mpf(-1), mpmath.mpf(0), mpmath.mpf(1), a]))
        return float(mpmath.log1p(mpmath.quad(f, points)) / (a - 1))


@pytest.mark.parametrize("sigma,q", [(0.8, 0.01), (5.0, 0.05), (2.5638568534336796, 0.01)])
def test_replace_one_rdp_is_the_antipodal_pairs_divergence_never_below_it(sigma, q):
    # orders from near 1 to the grid's top, across the subsampled curve's phase change (56.7 at the last sigma)
    alphas = np.array([1.05, 8.0, 56.70527399373865, 256.0])
    got = mb.replace_one_rdp(alphas, sigma, q)
    want = np.array([_mp_antipodal_rdp(a, sigma, q) for a in alphas])
    assert np.all(got >= want)                       # the margin is on the safe side
    np.testing.assert_allclose(got, want, rtol=1e-7)  # and small (measured <= 3.2e-9)


@pytest.mark.parametrize("alpha", [1.05, 1.2])
def test_replace_one_rdp_at_the_noise_floor_and_a_low_order_alone(alpha):
    # sigma = MIN_QUADRATURE_SIGMA: the components at 0 and +-1 are 10 sds apart, and with one low order the
    # grid's half-width 2 alpha + 40 sigma + 5 is at its smallest (~7): the +-1 components' mass must be inside
    sigma = mb.MIN_QUADRATURE_SIGMA
    got = mb.replace_one_rdp([alpha], sigma, 0.3)[0]
    want = _mp_antipodal_rdp(alpha, sigma, 0.3)
    assert want <= got <= want * (1 + 1e-7)


def test_replace_one_rdp_keeps_the_two_grids_larger_value_plus_their_difference(monkeypatch):
    # The quadrature's margin (module doc): the larger of the log moments on the grid h and on h / 2, plus
    # their difference, plus both rounding bounds. With 0.5 points a noise sd (h = 2 sigma) the coarse grid
    # is visibly off, so the margin is what keeps the curve above the truth.
    sigma, q, al = 1.0, 0.3, np.array([1.5, 4.0])
    m1, e1 = mb._antipodal_log_moments(al, sigma, q, sigma / 16)
    m2, e2 = mb._antipodal_log_moments(al, sigma, q, sigma / 32)
    want = (np.maximum(m1, m2) + np.abs(m1 - m2) + e1 + e2) / (al - 1.0)
    np.testing.assert_array_equal(mb.replace_one_rdp(al, sigma, q), want)
    monkeypatch.setattr(mb, "QUADRATURE_POINTS_PER_SD", 0.5)
    c1, _ = mb._antipodal_log_moments(al, sigma, q, 2.0 * sigma)
    c2, _ = mb._antipodal_log_moments(al, sigma, q, sigma)
    truth = np.array([_mp_antipodal_rdp(a, sigma, q) for a in al]) * (al - 1.0)
    assert np.all(np.abs(c1 - c2) > 1e-6 * truth)  # the coarse grids disagree
    assert np.all(mb.replace_one_rdp(al, sigma, q) * (al - 1.0) >= truth)


def test_replace_one_rdp_refuses_what_it_cannot_answer_and_is_inf_for_an_almost_noiseless_step():
    with pytest.raises(ValueError, match=r"^alphas must be orders > 1, got \[1.0, 2.0\]$"):
        mb.replace_one_rdp([1.0, 2.0], 1.0, 0.1)
    with pytest.raises(ValueError, match=r"^q must lie in \(0, 1\) for replace_one_rdp \(q = 1 is the Gaussian mechanism, "
                                         r"2 alpha / sigma\^2\)$"):
        mb.replace_one_rdp([2.0], 1.0, 1.0)
    with pytest.raises(ValueError, match=r"^sigma must lie in \(0, inf\), got 0.0$"):
        mb.replace_one_rdp([2.0], 0.0, 0.1)
    assert np.all(np.isinf(mb.replace_one_rdp([2.0, 3.0], 0.99 * mb.MIN_QUADRATURE_SIGMA, 0.1)))
    assert np.all(np.isfinite(mb.replace_one_rdp([2.0, 3.0], mb.MIN_QUADRATURE_SIGMA, 0.1)))


def _hockey_stick_2d(a, b, q, gamma, sigma, half=9.0, m=721):
    """H_gamma((1-q) N(0, s^2 I) + q N(a, s^2 I) || the same with b), by the midpoint rule on a 2-D grid."""
    x = (np.arange(m) + 0.5) * (2 * half / m) - half
    X, Y = np.meshgrid(x * sigma, x * sigma, indexing="ij")
    dA = (2 * half * sigma / m) ** 2

    def dens(c):
        return np.exp(-((X - c[0]) ** 2 + (Y - c[1]) ** 2) / (2 * sigma**2)) / (2 * np.pi * sigma**2)

    p0 = dens((0.0, 0.0))
    return float(np.maximum((1 - q) * p0 + q * dens(a) - gamma * ((1 - q) * p0 + q * dens(b)), 0.0).sum() * dA)


@pytest.mark.parametrize("sigma,q,log_gammas", [(1.0, 0.05, (0.0, 0.25, 0.5)), (0.7, 0.5, (0.0, 0.5, 2.0))])
def test_the_antipodal_pair_dominates_every_pair_of_clipped_gradients(sigma, q, log_gammas):
    # The module doc's claim, by quadrature: for a, b in the unit disc (a step's two clipped gradients, in
    # units of C; the plane through 0, a and b carries the whole divergence), every hockey-stick divergence
    # H_gamma of (P_a, P_b) is at most the antipodal pair's. gamma >= 1 on both orders of each pair covers
    # gamma < 1 too (H_gamma(P||Q) = 1 - gamma + gamma H_{1/gamma}(Q||P)), which the Renyi curve needs.
    # Tolerance: 10x the grid's own error, measured as the change of the antipodal value under a rotation
    # of the pair by 1 radian (exactly 0 for the integral); gammas chosen so that H is well above it.
    rng = np.random.default_rng(7)
    pairs = [((1.0, 0.0), (np.cos(t), np.sin(t))) for t in (0.0, 0.5, 1.5, 2.5, 3.0)]   # unit radii, every angle
    pairs += [((r1, 0.0), (r2 * np.cos(t), r2 * np.sin(t)))                              # and inside the disc
              for r1, r2, t in zip(rng.uniform(0, 1, 6), rng.uniform(0, 1, 6), rng.uniform(0, np.pi, 6))]
    pairs += [((1.0, 0.0), (0.0, 0.0))]                                                  # the zero record
    pairs += [(b, a) for a, b in pairs]
    for gamma in np.exp(log_gammas):
        anti = _hockey_stick_2d((1.0, 0.0), (-1.0, 0.0), q, gamma, sigma)
        rotated = _hockey_stick_2d((math.cos(1.0), math.sin(1.0)), (-math.cos(1.0), -math.sin(1.0)), q, gamma, sigma)
        tol = 10.0 * abs(rotated - anti) + 1e-12
        assert anti > 1e-4 and tol < 1e-3 * anti  # a divergence the grid resolves
        for a, b in pairs:
            assert _hockey_stick_2d(a, b, q, gamma, sigma) <= anti + tol, (a, b, gamma)
        # and the antipodal pair at a smaller radius is strictly inside (the radius step of the proof)
        assert _hockey_stick_2d((0.8, 0.0), (-0.8, 0.0), q, gamma, sigma) < anti - tol


@pytest.mark.parametrize("q", [0.01, 0.3, 0.9, 0.999])
def test_replace_one_curve_is_the_antipodal_curve_inside_the_valid_sandwich(q):
    alphas = np.array([1.05, 1.5, 2.0, 4.0, 12.0, 100.0])
    ev = mb.minibatch_event(BETA, H, T, q, C, N, alphas=alphas)
    assert isinstance(ev, RdpCurveEvent)
    vals = np.array(ev.values)
    gauss = 2.0 * T * alphas / _sigma(q) ** 2  # sensitivity 2C, no amplification
    special = mb.minibatch_base_rdp(alphas, BETA, H, T, q, C, N)
    assert np.all(vals <= gauss)
    assert np.all(vals >= special)  # a zero-record pair is one of the pairs the antipodal one dominates
    assert np.all(vals <= _triangle_by_hand(alphas, q) * (1 + 1e-9))  # never looser than the old bound
    # RdpCurveEvent keeps the running maximum
    np.testing.assert_allclose(vals, np.maximum.accumulate(np.minimum(
        T * mb.replace_one_rdp(alphas, _sigma(q), q), gauss)), rtol=1e-12)


@pytest.mark.parametrize("clip", [1.0, 0.5, 3.0])
def test_replace_one_curve_nears_the_2c_gaussian_where_amplification_is_lost(clip):
    # q close to 1: the antipodal pair is nearly N(+C) vs N(-C), whose curve is the 2C Gaussian 2 K T a / sigma^2
    q, beta = 0.9999, 2000.0
    alphas = np.array([4.0, 8.0])
    ev = mb.minibatch_event(beta, H, T, q, clip, N, alphas=alphas, num_chains=2)
    gauss = 2.0 * 2 * T * alphas / _sigma(q, beta=beta, c=clip) ** 2
    assert np.all(np.array(ev.values) <= gauss)
    np.testing.assert_allclose(ev.values, gauss, rtol=1e-3)


def test_an_almost_noiseless_subsampled_step_is_the_2c_gaussian_curve():
    beta = 1.01 * _sigma(0.05) * BETA / mb.MIN_QUADRATURE_SIGMA  # sigma just below the quadrature's floor
    s = _sigma(0.05, beta=beta)
    assert s < mb.MIN_QUADRATURE_SIGMA
    ev = mb.minibatch_event(beta, H, T, 0.05, C, N, alphas=[2.0, 4.0])
    np.testing.assert_allclose(ev.values, 2.0 * T * np.array([2.0, 4.0]) / s**2, rtol=1e-15)


@pytest.mark.parametrize("q", [0.05, 0.9])
def test_replace_one_is_at_least_the_replace_one_pld(q):
    # dp-accounting's REPLACE_ONE PLD is the exact eps of a realisable pair: a lower bound
    eps = mb.minibatch_epsilon(BETA, H, T, q, C, N, DELTA)
    assert eps["epsilon"] >= eps["epsilon_pld"] * (1 - 1e-3)
    acc = pld.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE, value_discretization_interval=1e-3)
    acc.compose(mb.minibatch_dp_accounting_event(BETA, H, T, q, C, N))
    assert eps["epsilon_pld"] == acc.get_epsilon(DELTA)


def test_replace_one_eps_is_within_ten_percent_of_dp_accountings_pld():
    # sigma = 1.5, q = 0.01, 1000 steps, delta = 1e-5: the old bound gave 1.30x the PLD's eps (docs/results.md);
    # the antipodal curve 1.089x -- what is left is the RDP -> (eps, delta) conversion
    n, h, q, t = 100000, 1e-3, 0.01, 1000
    beta = q * n * math.sqrt(2.0 / h) / 1.5
    e = mb.minibatch_epsilon(beta, h, t, q, 1.0, n, DELTA, pld_check=False)["epsilon"]
    e_pld = mb.minibatch_pld_epsilon(beta, h, t, q, 1.0, n, DELTA, discretization=1e-4)
    assert e_pld * (1 - 1e-3) <= e <= 1.10 * e_pld
    al = mb.DEFAULT_ALPHAS
    old = rdp_epsilon(al, np.minimum(_triangle_by_hand(al, q, beta=beta, h=h, t=t, c=1.0, n=n), 2.0 * t * al / 1.5**2), DELTA)[0]
    assert old >= 1.25 * e_pld  # the old bound, recomputed here: the gap this closes


def test_event_orders_are_the_sorted_unique_alphas_and_chains_fold_in():
    ev = mb.minibatch_event(BETA, H, T, 0.05, C, N, alphas=[4.0, 2.0, 2.0, 1.5])
    assert ev.orders == (1.5, 2.0, 4.0)
    ev2 = mb.minibatch_event(BETA, H, T, 0.05, C, N, num_chains=3, alphas=[4.0, 2.0, 1.5])
    al = np.array(ev2.orders)
    np.testing.assert_allclose(ev2.values, np.maximum.accumulate(np.minimum(
        3 * T * mb.replace_one_rdp(al, _sigma(0.05), 0.05), 2.0 * 3 * T * al / _sigma(0.05) ** 2)), rtol=1e-12)
    assert mb.minibatch_event(BETA, H, T, 0.05, C, N).orders == tuple(mb.DEFAULT_ALPHAS)
    # the label a privacy report lists the event under, by default and as given
    assert mb.minibatch_event(BETA, H, T, 0.05, C, N).label == "minibatch_sgld"
    assert mb.minibatch_event(BETA, H, T, 1.0, C, N).label == "minibatch_sgld"
    assert mb.minibatch_event(BETA, H, T, 0.05, C, N, label="dp_sgd").label == "dp_sgd"
    ar = mb.minibatch_event(BETA, H, T, 0.05, C, N, neighboring="add_remove", alphas=[1.5, 2.0, 4.0])
    np.testing.assert_array_equal(ar.values, mb.minibatch_base_rdp([1.5, 2.0, 4.0], BETA, H, T, 0.05, C, N))


@pytest.mark.parametrize("q", [0.05, 1.0])
def test_events_state_their_neighbouring_relation_and_the_public_normaliser(q):
    rep = mb.minibatch_event(BETA, H, T, q, C, N)
    ar = mb.minibatch_event(BETA, H, T, q, C, N, neighboring="add_remove")
    norm = mb._ADD_REMOVE_NORMALISER % N
    assert norm in ar.assumptions and norm not in rep.assumptions
    if q < 1:
        assert rep.assumptions[:len(mb._ASSUMPTIONS)] == mb._ASSUMPTIONS
        assert ar.assumptions[:len(mb._ASSUMPTIONS)] == mb._ASSUMPTIONS
        assert any("replace-one" in a for a in rep.assumptions)
        assert any("add/remove-one" in a for a in ar.assumptions)
    else:
        assert any("2C/n" in a for a in rep.assumptions) and any("sensitivity C/n" in a for a in ar.assumptions)
    # and both charge the clip with the float32 margin of their n, and say so (dp_infer.privacy.float32_margin)
    margin = "times 1 + 0.001 for the chain's float32 rounding (dp_infer.privacy.float32_margin)"
    assert any(a.endswith(margin) for a in rep.assumptions) and any(a.endswith(margin) for a in ar.assumptions)
    big = mb.minibatch_event(BETA, H, T, q, C, 10 ** 6)
    assert big.metadata["noise_multiplier"] == approx(_sigma(q, n=10 ** 6), rel=1e-15)
    assert _f32(10 ** 6) == 1 + 10 ** 6 / 2 ** 25 and any(a.endswith(margin.replace("0.001", "0.0298"))
                                                          for a in big.assumptions)


# --------------------------------------------------------------------------- q = 1


@pytest.mark.parametrize("k", [1, 4])
def test_q1_is_the_closed_form_gaussian_path(k):
    rep = mb.minibatch_event(BETA, H, T, 1.0, C, N, num_chains=k)
    ar = mb.minibatch_event(BETA, H, T, 1.0, C, N, num_chains=k, neighboring="add_remove")
    assert isinstance(rep, GdpEvent) and isinstance(ar, GdpEvent)
    mu = BETA * (2 * C * _f32(N) / N) * math.sqrt(k * T * H / 2)
    assert rep.mu == approx(mu, rel=1e-14)
    assert ar.mu == approx(mu / 2, rel=1e-14)
    assert rep.metadata["mu"] == rep.mu
    # and the limit q -> 1 of the subsampled curves approaches it from the same side
    near = mb.minibatch_event(BETA, H, T, 1 - 1e-9, C, N, num_chains=k, neighboring="add_remove",
                              alphas=[2.0, 8.0])
    np.testing.assert_allclose(near.values, np.array([2.0, 8.0]) * (mu / 2) ** 2 / 2, rtol=1e-6)


# --------------------------------------------------------------------------- eps and calibration


@pytest.mark.parametrize("neighboring", mb.NEIGHBORING)
def test_epsilon_is_the_accountants_eps_of_the_event(neighboring):
    out = mb.minibatch_epsilon(BETA, H, T, 0.05, C, N, DELTA, num_chains=2, neighboring=neighboring, pld_check=False)
    ev = mb.minibatch_event(BETA, H, T, 0.05, C, N, 2, neighboring=neighboring)
    rep = Accountant().compose(ev).report(delta=DELTA)
    assert out["epsilon"] == rep["epsilon"] and out["route"] == rep["route"]
    assert out["event"] == ev and out["epsilon_pld"] is None
    # the accountant reports the tighter of the event's two descriptions: its RDP curve, and the PLD of the
    # subsampled Gaussian it names (here the PLD: the RDP-to-(eps, delta) conversion is the looser)
    by_route = Accountant().compose(ev).epsilon_by_route(DELTA)
    assert by_route["rdp"] == approx(rdp_epsilon(ev.orders, ev.values, DELTA)[0], rel=1e-9)
    assert out["route"] == "pld" and out["epsilon"] == by_route["pld"] < by_route["rdp"]
    # the PLD route is dp-accounting's own pessimistic PLD of this mechanism, at the accountant's grid
    # (plus its relative margin on delta), and never below dp-accounting's optimistic PLD: a lower bound
    assert out["epsilon"] == approx(_pld_eps(ev, DELTA, pessimistic=True), rel=1e-4)
    assert out["epsilon"] >= _pld_eps(ev, DELTA, pessimistic=False)
    with_pld = mb.minibatch_epsilon(BETA, H, T, 0.05, C, N, DELTA, num_chains=2, neighboring=neighboring)
    assert with_pld["epsilon_pld"] == mb.minibatch_pld_epsilon(BETA, H, T, 0.05, C, N, DELTA, 2,
                                                                neighboring=neighboring)


def test_pld_cross_check_at_q_1_is_the_gaussian_mechanisms_exact_eps():
    # issue 30 (finding 13): the old test rebuilt the function's body and compared with ==.
    # Oracle from first principles instead: at q = 1 (add/remove) every step is the Gaussian
    # mechanism. A step moves theta by h beta / n times the clipped sum (one record: <= C) and
    # adds N(0, 2h) noise, so K T steps compose to mu-GDP with mu = sqrt(K T) h beta C / (n sqrt(2h)).
    # The PLD answer must be on the safe side of the exact Gaussian profile (mpmath, 60 digits) and
    # within its discretisation of it.
    from tests.support.mp_oracles import gdp_delta_mp

    for k, disc in ((1, 1e-3), (2, 1e-2)):
        mu = math.sqrt(k * T) * H * BETA * C * _f32(N) / (N * math.sqrt(2 * H))  # C with the float32 margin
        e = mb.minibatch_pld_epsilon(BETA, H, T, 1.0, C, N, DELTA, k, neighboring="add_remove", discretization=disc)
        assert gdp_delta_mp(e, mu) <= DELTA  # safe side, no tolerance
        assert gdp_delta_mp(e - 20 * disc, mu) > DELTA  # and not loose beyond the discretisation
    # the interval given is the one used: PLD is pessimistic, so a coarser grid reports more
    fine, coarse = (mb.minibatch_pld_epsilon(BETA, H, T, 1.0, C, N, DELTA, neighboring="add_remove", discretization=d)
                    for d in (1e-4, 5e-2))
    assert coarse > fine


def test_pld_cross_check_validates_its_arguments():
    for bad, name in ((0.0, "delta"), (1.0, "delta")):
        with pytest.raises(ValueError, match=name):
            mb.minibatch_pld_epsilon(BETA, H, T, 0.1, C, N, bad)
    with pytest.raises(ValueError, match="discretization"):
        mb.minibatch_pld_epsilon(BETA, H, T, 0.1, C, N, DELTA, discretization=0.0)
    with pytest.raises(ValueError, match="neighboring"):
        mb.minibatch_pld_epsilon(BETA, H, T, 0.1, C, N, DELTA, neighboring="swap")


def test_event_epsilon_converts_each_kind():
    g = mb.minibatch_event(BETA, H, T, 1.0, C, N)
    assert mb._event_epsilon(g, DELTA) == gdp_epsilon(g.mu, DELTA)
    r = mb.minibatch_event(BETA, H, T, 0.1, C, N)
    assert mb._event_epsilon(r, DELTA) == rdp_epsilon(r.orders, r.values, DELTA)[0]


@pytest.mark.parametrize("eps", [1e-3, 0.3, 1.0, 30.0])
@pytest.mark.parametrize("neighboring, mult", [("replace_one", 2.0), ("add_remove", 1.0)])
@pytest.mark.parametrize("k", [1, 3])
def test_beta_max_at_q1_is_the_closed_form_inverse_from_below(eps, neighboring, mult, k):
    rtol = 1e-6
    b = mb.minibatch_beta_max(eps, DELTA, H, T, 1.0, C, N, k, neighboring=neighboring, rtol=rtol)
    exact = gdp_mu(eps, DELTA) / ((mult * C * _f32(N) / N) * math.sqrt(k * T * H / 2))
    assert b <= exact * (1 + 1e-12)
    assert b >= exact / (1 + rtol) * (1 - 1e-12)
    # exact on the safe side: the event of the returned beta is within the target
    assert mb._event_epsilon(mb.minibatch_event(b, H, T, 1.0, C, N, k, neighboring=neighboring), DELTA) <= eps


@pytest.mark.parametrize("neighboring", mb.NEIGHBORING)
@pytest.mark.parametrize("eps", [0.2, 5.0])
def test_beta_max_subsampled_meets_the_target_and_is_tight_to_rtol(eps, neighboring):
    """beta_max is tight on what a run reports (the accountant's tightest route, the PLD here), and
    above what the RDP curve alone would allow (the refinement stage is not idle)."""
    rtol = 1e-3
    kw = dict(step_size=H, num_steps=T, q=0.05, clip_norm=C, n=N, neighboring=neighboring)
    b = mb.minibatch_beta_max(eps, DELTA, rtol=rtol, **kw)

    def e(bb):
        return mb.minibatch_epsilon(bb, delta=DELTA, pld_check=False, **kw)["epsilon"]

    assert e(b) <= eps < e(b * (1 + rtol))

    def e_rdp(bb):
        return mb._event_epsilon(mb.minibatch_event(bb, H, T, 0.05, C, N, neighboring=neighboring), DELTA)

    assert e_rdp(b) > eps  # the RDP curve alone would refuse this beta: the PLD stage found more
    # and the beta is honest against dp-accounting's optimistic PLD (a lower bound on the true eps)
    assert _pld_eps(mb.minibatch_event(b, H, T, 0.05, C, N, neighboring=neighboring), DELTA,
                    pessimistic=False) <= eps


def test_beta_max_refinement_falls_back_when_the_fine_grid_disagrees(monkeypatch):
    """Where the accountant's grid refuses the coarse grid's guess, the answer comes from the fine grid
    alone, bisected down from the guess: still verified, still within rtol of the fine grid's limit."""
    calls = []
    real = mb._accountant_epsilon

    def coarse_too_kind(ev, delta, **opts):  # the coarse stage sees a third of the eps there is: its bracket
        calls.append(bool(opts))              # and its guess land far past the accountant's limit
        e = real(ev, delta, **opts)
        return e / 3.0 if opts else e

    monkeypatch.setattr(mb, "_accountant_epsilon", coarse_too_kind)
    kw = dict(step_size=H, num_steps=T, q=0.05, clip_norm=C, n=N)
    b = mb.minibatch_beta_max(1.0, DELTA, rtol=1e-3, **kw)
    monkeypatch.setattr(mb, "_accountant_epsilon", real)
    e = mb.minibatch_epsilon(b, delta=DELTA, pld_check=False, **kw)["epsilon"]
    e_up = mb.minibatch_epsilon(b * 1.001, delta=DELTA, pld_check=False, **kw)["epsilon"]
    assert e <= 1.0 < e_up and any(calls) and not all(calls)
    # a coarse grid that allows every beta (its bracket runs off to 1e300): the accountant's grid still decides
    monkeypatch.setattr(mb, "_accountant_epsilon", lambda ev, delta, **opts: 0.0 if opts else real(ev, delta))
    b2 = mb.minibatch_beta_max(1.0, DELTA, rtol=1e-3, **kw)
    monkeypatch.setattr(mb, "_accountant_epsilon", real)
    assert math.isfinite(b2) and b2 == pytest.approx(b, rel=2e-3)
    assert mb.minibatch_epsilon(b2, delta=DELTA, pld_check=False, **kw)["epsilon"] <= 1.0


def _pld_eps(ev, delta, *, pessimistic):
    """dp-accounting's PLD eps of a SubsampledGaussianEvent, built here from its parameters alone."""
    import dp_accounting as dpa
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    rel = {"replace_one": dpa.NeighboringRelation.REPLACE_ONE,
           "add_remove": dpa.NeighboringRelation.ADD_OR_REMOVE_ONE}[ev.neighboring]
    p = pldlib.from_gaussian_mechanism(standard_deviation=ev.noise_multiplier, sampling_prob=ev.sampling_prob,
                                       neighboring_relation=rel, pessimistic_estimate=pessimistic,
                                       value_discretization_interval=1e-4)
    return float(p.self_compose(ev.compositions).get_epsilon_for_delta(delta))


def test_beta_max_inputs():
    args = (1.0, DELTA, H, T, 0.1, C, N)
    for i, name in ((2, "step_size"), (3, "num_steps"), (4, "q"), (5, "clip_norm"), (6, "n")):
        bad = list(args)
        bad[i] = 0
        with pytest.raises(ValueError, match=name):
            mb.minibatch_beta_max(*bad)
    with pytest.raises(ValueError, match="num_chains"):
        mb.minibatch_beta_max(*args, num_chains=0)
    with pytest.raises(ValueError, match="neighboring"):
        mb.minibatch_beta_max(*args, neighboring="swap")
    with pytest.raises(ValueError, match="rtol"):
        mb.minibatch_beta_max(*args, rtol=0.0)


@pytest.mark.parametrize("eps", [0.05, 2.0, 40.0])
def test_beta_max_default_tolerance_is_1e4_relative(eps):
    # the documented default rtol = 1e-4: within that of the closed-form inverse at q = 1, from below
    b = mb.minibatch_beta_max(eps, DELTA, H, T, 1.0, C, N)
    exact = gdp_mu(eps, DELTA) / ((2 * C * _f32(N) / N) * math.sqrt(T * H / 2))
    assert exact / (1 + 1e-4) * (1 - 1e-12) <= b <= exact * (1 + 1e-12)


def test_beta_max_gives_zero_when_no_beta_above_1e_300_meets_the_target():
    # q = 1, C = 1e300, n = 1, T h / 2 = 1: mu = beta * 2e300, so the target eps = 0.1 needs
    # beta = gdp_mu(0.1) / 2e300 ~ 1.5e-302 < 1e-300: the search gives up on the safe side
    h, t = 0.5, 4
    assert gdp_mu(0.1, DELTA) / 2e300 < 1e-300
    assert mb.minibatch_beta_max(0.1, DELTA, h, t, 1.0, 1e300, 1) == 0.0
    # and a target that beta ~ 1e-299 meets is found, from below
    b = mb.minibatch_beta_max(100.0, DELTA, h, t, 1.0, 1e300, 1, rtol=1e-6)
    exact = gdp_mu(100.0, DELTA) / (2e300 * _f32(1))
    assert exact / (1 + 1e-6) * (1 - 1e-12) <= b <= exact * (1 + 1e-12)


def test_beta_max_bisects_without_overflow_at_the_ends_of_its_range():
    # answers near 1e-299 and 1e+299 (the search covers [1e-300, 1e300]): the geometric midpoint
    # sqrt(lo * hi) underflowed to 0 (and overflowed to inf) there and crashed the search
    h, t = 0.5, 4
    for clip, n in ((1e300, 1), (1e-290, 1)):
        b = mb.minibatch_beta_max(50.0, DELTA, h, t, 1.0, clip, n, rtol=1e-6)
        exact = gdp_mu(50.0, DELTA) / (2 * clip * _f32(n) / n)
        assert exact / (1 + 1e-6) * (1 - 1e-12) <= b <= exact * (1 + 1e-12)


@pytest.mark.parametrize("q", [0.05, 1.0])
def test_event_reports_the_noise_multiplier_it_was_accounted_with(q):
    ev = mb.minibatch_event(BETA, H, T, q, 0.5, N)
    assert ev.metadata["noise_multiplier"] == approx(mb.minibatch_noise_multiplier(BETA, H, q, 0.5, N), rel=1e-15)
    assert ev.metadata["noise_multiplier"] == approx(_sigma(q, c=0.5), rel=1e-15)


# --------------------------------------------------------------------------- almost no noise


def _mp_rdp_lower_bound(alpha: float, q: float, sigma: float) -> float:
    """Integer order a: RDP >= log(q^a exp(a (a-1) / (2 s^2))) / (a-1), the k = a term of A_a (MTZ 2019)."""
    with mpmath.workdps(50):
        a, q, s = mpmath.mpf(alpha), mpmath.mpf(q), mpmath.mpf(sigma)
        return (a * mpmath.log(q) + a * (a - 1) / (2 * s**2)) / (a - 1)


@pytest.mark.parametrize("beta", [1e150, 1e155, 1e160, 1e165, 1e300])
def test_base_curve_of_an_almost_noiseless_step_is_never_below_the_closed_form(beta):
    # h = 2, q = 0.5, C = n = 1: sigma = 0.5 / beta. The true RDP at every integer order a >= 2
    # is at least (a log q + a (a - 1) / (2 sigma^2)) / (a - 1) (one term of A_a); from beta ~ 1e155
    # on that exceeds every float, so the only valid float value is inf (never NaN, never a crash,
    # which dp-accounting gives there: NaN from inf - inf, and a division by sigma**2 == 0).
    orders = np.array([1.5, 2.0, 3.0, 4.0, 10.0, 100.0])
    sigma = mb.minibatch_noise_multiplier(beta, 2.0, 0.5, 1.0, 1)
    for k in (1, 2):
        base = mb.minibatch_base_rdp(orders, beta, 2.0, 1, 0.5, 1.0, 1, num_chains=k)
        assert not np.any(np.isnan(base))
        for a, v in zip(orders[1:], base[1:]):
            # dp-accounting's float sum (not the bound) may be an ulp low: rel 1e-12
            assert v >= k * _mp_rdp_lower_bound(a, 0.5, sigma) * (1 - 1e-12)  # inf >= any mpf
        assert np.all(base[1:] >= base[:-1])
        for nb in mb.NEIGHBORING:
            ev = mb.minibatch_event(beta, 2.0, 1, 0.5, 1.0, 1, num_chains=k, neighboring=nb, alphas=orders)
            assert not np.any(np.isnan(ev.values))
            assert np.all(np.array(ev.values) >= base)
            assert mb._event_epsilon(ev, DELTA) >= 1e299


def test_base_curve_at_noise_multiplier_one_is_the_closed_form():
    # sigma = q n sqrt(2/h) / (beta C (1 + margin)) = 0.5 * 2 * 1 / 1 = 1 (to an ulp) at C = 1 / (1 + margin)
    c = 1.0 / _f32(2)
    assert mb.minibatch_noise_multiplier(1.0, 2.0, 0.5, c, 2) == approx(1.0, rel=1e-15)
    orders = np.array([2.0, 3.0, 6.0])
    got = mb.minibatch_base_rdp(orders, 1.0, 2.0, 3, 0.5, c, 2)
    want = np.array([3 * _mp_poisson_gaussian_rdp(int(a), 0.5, 1.0) for a in orders])
    np.testing.assert_allclose(got, want, rtol=1e-9)


# --------------------------------------------------------------------------- almost no noise


@pytest.mark.parametrize("beta", [1e165, 1e300])
@pytest.mark.parametrize("neighboring", mb.NEIGHBORING)
def test_noiseless_step_is_inf_without_a_runtime_warning(beta, neighboring):
    # h = 2, q = 0.5, C = n = 1: sigma = 0.5 / beta, sigma**2 == 0.0 in float64
    assert mb.minibatch_noise_multiplier(beta, 2.0, 0.5, 1.0, 1) ** 2 == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a divide-by-zero RuntimeWarning would be an error here
        ev = mb.minibatch_event(beta, 2.0, 1, 0.5, 1.0, 1, neighboring=neighboring, alphas=[1.05, 2.0, 10.0, 256.0])
    assert ev.values == (math.inf,) * 4
    assert mb._event_epsilon(ev, DELTA) == math.inf


def test_a_replace_one_step_whose_gaussian_curve_overflows_is_inf_without_a_runtime_warning():
    # sigma = 0.5 / beta ~ 5e-159: sigma**2 is a tiny nonzero float, and 2 alpha / sigma**2 passes the largest
    # float (an overflow, not a divide by zero: the case the fresh-clone run of 2026-11-30 warned about).
    # Replace-one only: add-remove's curve is dp-accounting's, whose own RDP code warns there (third party)
    sigma = mb.minibatch_noise_multiplier(1e158, 2.0, 0.5, 1.0, 1)
    with np.errstate(over="ignore"):
        assert 0.0 < sigma ** 2 and 2.0 * 256.0 / sigma ** 2 == math.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev = mb.minibatch_event(1e158, 2.0, 1, 0.5, 1.0, 1, alphas=[1.05, 2.0, 10.0, 256.0])
    assert ev.values[-1] == math.inf and all(v > 1e300 for v in ev.values)
    assert mb._event_epsilon(ev, DELTA) == math.inf
