"""MWEM's two noises, measured, against the sensitivity 1/n of its answers.

One round (T = 1) of MWEM on N = 4 cells and two 0/1 queries whose true answers ``a_j`` and uniform-start
errors ``s_j = |<q_j, u> - a_j|`` are known exactly. The round is two pure eps0-DP mechanisms at answer
sensitivity 1/n (replace-one, n public):

* the exponential mechanism picks query j with probability ``softmax(eps0 n s_j / 2)`` (score sensitivity
  1/n, the factor 2 of the exponential mechanism);
* the measurement is ``a_j + Lap(1 / (n eps0))``.

eps0 is the largest value whose two-fold composition is (eps, delta)-DP. Oracle, written here: the
optimal composition of two eps0-pure mechanisms (Kairouz, Oh, Viswanath 2015) is the privacy-loss law of
two randomized responses, ``delta(eps) = p^2 (1 - e^{eps - 2 eps0})_+`` with ``p = e^{eps0} / (1 +
e^{eps0})``, solved for eps0 by brentq. The library's eps0 must lie on the safe side of it and within
1e-5 of it.

The release is the updated distribution ``q ∝ exp(q_j (m - <q_j, u>) / 2)``, so the measurement m and
the chosen j are read back exactly from it: ``m = <q_j, u> + 2 log(q(x) / q(x'))`` for a cell x in q_j
and x' in neither query. Tolerances: 5 binomial standard errors for the selection frequency and a
power check that 0.75x / 1.5x eps0 would move it further; E|x| within 5 se of b and a KS test for
the Laplace noise, with the same sample failing at 0.75 b and 1.5 b. Fixed seeds.
"""

import functools
import math

import numpy as np
import pytest
from scipy import optimize, stats

from dp_infer.mechanisms import query_release as QR

H = np.array([25, 19, 5, 51])                     # n = 100
Q = np.array([[1.0, 0.0, 1.0, 0.0],               # a_1 = 0.30, <q_1, u> = 0.5, s_1 = 0.20
              [0.0, 1.0, 1.0, 0.0]])              # a_2 = 0.24, <q_2, u> = 0.5, s_2 = 0.26
EPS, DELTA = 1.0, 1e-6


def _eps0_optimal(eps, delta):
    def gap(e0):
        p = math.exp(e0) / (1 + math.exp(e0))
        return p * p * max(0.0, 1 - math.exp(eps - 2 * e0)) - delta
    return optimize.brentq(gap, eps / 2, eps, xtol=1e-15, rtol=1e-15)


@pytest.fixture(scope="module")
def rounds():
    # the library's eps0 bisection on the accountant is deterministic in (eps, delta, T): cache it so
    # that 3000 releases take seconds (the value is the library's own, only computed once)
    mp = pytest.MonkeyPatch()
    mp.setattr(QR, "mwem_round_epsilon", functools.lru_cache(QR.mwem_round_epsilon))
    out = []
    try:
        for s in range(3000):
            r = QR.mwem(H, Q, eps=EPS, delta=DELTA, rounds=1, seed=s)
            q = np.asarray(r.value)
            j = 0 if abs(math.log(q[0] / q[3])) > abs(math.log(q[1] / q[3])) else 1
            cell = 0 if j == 0 else 1
            m = 0.5 + 2 * math.log(q[cell] / q[3])
            out.append((j, m))
    finally:
        mp.undo()
    return r, out


def test_eps0_is_the_optimal_two_fold_composition():
    e0 = _eps0_optimal(EPS, DELTA)
    got = QR.mwem_round_epsilon(EPS, math.log(DELTA), 1)
    assert got <= e0 and got > e0 - 1e-5


def test_the_exponential_mechanism_selects_with_eps0_n_score_over_two(rounds):
    _, out = rounds
    n, e0 = H.sum(), _eps0_optimal(EPS, DELTA)
    s = np.abs(Q @ np.full(4, 0.25) - Q @ (H / n))
    assert s == pytest.approx([0.20, 0.26], abs=1e-12)

    def p_second(e):
        w = np.exp(e * n * s / 2)
        return w[1] / w.sum()

    N = len(out)
    freq = np.mean([j == 1 for j, _ in out])
    se = math.sqrt(p_second(e0) * (1 - p_second(e0)) / N)          # 0.0069 at p = 0.82
    assert abs(freq - p_second(e0)) < 5 * se
    for wrong in (0.75 * e0, 1.5 * e0):
        assert abs(p_second(wrong) - p_second(e0)) > 8 * se, wrong


def test_the_measurement_noise_is_laplace_one_over_n_eps0(rounds):
    r, out = rounds
    n, e0 = H.sum(), _eps0_optimal(EPS, DELTA)
    a = Q @ (H / n)
    x = np.array([m - a[j] for j, m in out])
    b = 1.0 / (n * e0)

    def checks(scale):
        return (abs(float(np.mean(np.abs(x))) / scale - 1) < 5 / math.sqrt(x.size),
                stats.kstest(x, stats.laplace(scale=scale).cdf).pvalue > 1e-3)

    assert checks(b) == (True, True)
    for wrong in (0.75 * b, 1.5 * b):
        assert checks(wrong) == (False, False), wrong
    ev, count = r.events[0]
    assert count == 2 and ev.epsilon == pytest.approx(e0, abs=1e-5)


def test_pure_mwem_purifies_the_bits_at_the_scale_of_theorem_2s_delta():
    # the bits' noise is far too small to flip a bit at these sizes (b ~ 1e-3: a flip has probability
    # e^-400), so the scale is checked as a number: Algorithm 2 on D = m d bits with eps' = eps, and delta
    # just below Theorem 2's utility threshold eps^D / (2 D)^{3 D}, all written here
    d, eps = 2, 1.5
    n = int(H.sum())
    m = max(1, int(round((n * eps / d) ** (2 / 3))))
    D = m * d
    log_delta = D * math.log(eps) - 3 * D * math.log(2 * D) - 1
    Delta = min(D, 2 * D * math.exp((log_delta - math.log(2) + D * math.log(2)) / D))   # omega = 2^-D
    r = QR.pure_mwem(H, Q, eps=eps, num_bits=d, seed=0)
    assert r.params["sample_size"] == m and r.params["num_bits_total"] == D
    assert r.params["laplace_scale"] == pytest.approx(2 * Delta / eps, rel=1e-9)
    assert r.is_pure and r.epsilon() == pytest.approx(2 * eps, rel=1e-15)
