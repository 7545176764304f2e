"""The purifier's released Laplace noise, measured, against Algorithm 1's stated Delta (seed 003).

Oracle, written here from the seed-003 digest (corrected constants, §3.1 and §8), not read from
:mod:`dp_infer.privacy.purification`: for an l_q ball of l_q DIAMETER R in d dimensions and an
upstream (eps, delta) mechanism mixed with the uniform law with probability omega,

    Delta = 2 d^{1 - 1/q} R (delta / (2 omega))^{1/d}      (capped at the l1 diameter of the domain)
    b     = 2 Delta / eps'                                  (Laplace scale per coordinate)

with delta / omega instead of delta / (2 omega) in the conservative variant, delta = 2 tau for an
upstream within TV tau of a pure mechanism, and for D bits (Algorithm 2: [0, 1]^D, an l_inf ball of
diameter 1, omega = 2^-D) ``Delta = min(D, 2 D (delta / (2 omega))^{1/D})``.

Measured: ``value - input`` over many coordinates (omega = 1e-6 so that no coin fires at these fixed
seeds; the uniform replacement is tested in tests/privacy/test_purification.py), E|x| within 5
standard errors of b (sd |x| = b for Laplace(b)) and a KS test against Laplace(b) (p > 1e-3); power:
the same sample fails (E|x| or KS) at 0.75 b and at 1.5 b. For bits, the flip rate of a bit is exactly
``exp(-1 / (2 b)) / 2`` (the Laplace tail beyond 1/2), within 5 binomial standard errors.
"""

import math

import numpy as np
import pytest
from scipy import stats

from dp_infer.domains import Box, L2Ball
from dp_infer.mechanisms import purifier as P


def _checks(x, b):
    n = x.size
    return (abs(float(np.mean(np.abs(x))) / b - 1.0) < 5.0 / math.sqrt(n),
            stats.kstest(x, stats.laplace(scale=b).cdf).pvalue > 1e-3)


def _assert_scale(x, b):
    assert _checks(x, b) == (True, True)
    for wrong in (0.75 * b, 1.5 * b):   # power: the same sample fails the check at a mis-scaled b
        assert not all(_checks(x, wrong)), wrong


def _noise(domain, x0, calls, seed0, **kw):
    out = [np.asarray(P.purify(x0, domain, seed=seed0 + s, **kw).value) - x0 for s in range(calls)]
    return np.concatenate(out)


def _log_delta_over(log_delta, omega, conservative=False):
    return log_delta - math.log(omega) - (0.0 if conservative else math.log(2.0))


@pytest.mark.parametrize("conservative", [False, True])
def test_l2_ball_noise_is_two_delta_over_eps_prime(conservative):
    d, radius, ld, omega, eps_p = 200, 1.0, -700.0, 1e-6, 0.5
    dom = L2Ball(d, radius)
    R = 2 * radius                                                   # l2 DIAMETER (digest §8 item 4)
    Delta = 2 * math.sqrt(d) * R * math.exp(_log_delta_over(ld, omega, conservative) / d)
    assert Delta < 2 * radius * math.sqrt(d)                          # below the l1-diameter cap
    b = 2 * Delta / eps_p
    x0 = np.zeros(d)
    x0[0] = 0.3
    x = _noise(dom, x0, 10, 100, eps=1.0, eps_prime=eps_p, log_delta=ld, omega=omega, conservative=conservative)
    _assert_scale(x, b)


def test_cube_noise_uses_d_times_the_side():
    d, side, delta, omega, eps_p = 50, 1.0, 1e-30, 1e-6, 2.0
    dom = Box(np.zeros(d), np.full(d, side))                          # an l_inf ball of l_inf diameter `side`
    Delta = 2 * d * side * math.exp(_log_delta_over(math.log(delta), omega) / d)
    assert Delta < d * side                                           # l1 diameter: not capped
    b = 2 * Delta / eps_p
    x = _noise(dom, np.full(d, 0.5), 40, 200, eps=0.5, eps_prime=eps_p, delta=delta, omega=omega)
    _assert_scale(x, b)


def test_tv_variant_uses_delta_equal_two_tau():
    # d = 1, where Delta is linear in delta (a factor 2 in delta is a factor 2 in the scale)
    radius, tau, omega, eps_p = 1.0, 1e-8, 1e-6, 0.1
    dom = L2Ball(1, radius)
    Delta = 2 * 1 * (2 * radius) * (2 * tau) / (2 * omega)
    assert Delta < 2 * radius
    x = _noise(dom, np.zeros(1), 1000, 300, eps=1.0, eps_prime=eps_p, tv_error=tau, omega=omega)
    _assert_scale(x, 2 * Delta / eps_p)


def test_a_large_delta_is_capped_at_the_l1_diameter():
    d, radius, delta, omega, eps_p = 4, 1.0, 0.5, 1e-6, 1.0
    dom = L2Ball(d, radius)
    uncapped = 2 * math.sqrt(d) * (2 * radius) * math.exp(_log_delta_over(math.log(delta), omega) / d)
    cap = 2 * radius * math.sqrt(d)                                  # l1 diameter of the l2 ball
    assert uncapped > 10 * cap
    x = _noise(dom, np.zeros(d), 500, 400, eps=1.0, eps_prime=eps_p, delta=delta, omega=omega)
    _assert_scale(x, 2 * cap / eps_p)


def test_binary_embedding_flips_each_bit_at_the_laplace_tail_beyond_one_half():
    # D = 4 bits and eps' so that b ~ 1/2, where the flip rate is most sensitive to the scale
    D, delta, eps_p = 4, 1e-10, 0.2
    omega = 2.0 ** -D
    # [0, 1]^D: l_inf diameter 1, d^{1 - 1/q} = D
    Delta = min(D, 2 * D * (delta / (2 * omega)) ** (1 / D))
    b = 2 * Delta / eps_p
    rng = np.random.default_rng(0)
    N = 1000
    flips = []
    for s in range(N):
        bits = rng.integers(0, 2, D).astype(np.int8)
        out = np.asarray(P.purify_discrete(bits, eps=1.0, delta=delta, eps_prime=eps_p, seed=500 + s).value)
        flips.append(out != bits)
    rate = float(np.mean(flips))

    def p_flip(scale):
        # w.p. 1 - omega the bit itself + Lap(scale) crosses 1/2; w.p. omega a uniform point of [0, 1] + a
        # symmetric noise is above 1/2 w.p. 1/2 whatever the input bit
        return (1 - omega) * 0.5 * math.exp(-0.5 / scale) + omega * 0.5

    se = math.sqrt(p_flip(b) * (1 - p_flip(b)) / (N * D))        # 0.0060 (rate 0.176)
    assert abs(rate - p_flip(b)) < 5 * se
    for wrong in (0.75 * b, 1.5 * b):                              # 7.8 and 11.5 se away
        assert abs(p_flip(wrong) - p_flip(b)) > 7 * se, wrong
