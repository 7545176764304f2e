"""Propose-Test-Release's two noises, measured, against the sensitivities PTR is stated for.

PTR (Vadhan 2017, Prop. 7.3.2; seed 003 Lemma 34) at (eps, delta) with a proposed local sensitivity
beta draws two independent Laplace variables:

* the TEST noise on the distance to instability (global sensitivity 1): ``Lap(1 / eps)``; "bottom"
  iff ``D + Lap(1/eps) <= ln(1/delta) / eps``. Oracle: at ``D = (ln(1/delta) - t) / eps`` the
  refusal probability is ``P(Lap(1) <= t) = 1 - exp(-t) / 2`` (written here from the Laplace CDF);
  t = 1 is where it is most sensitive to the scale;
* the VALUE noise on f(X) (local sensitivity beta): ``Lap(beta / eps)``. Oracle: on a distance so
  large that the test never refuses, ``value - f(X)`` has E|x| = b = beta / eps and the Laplace(b) law.

The pure version (Alg. 10) runs PTR at ``eps_ptr = (eps - eps') / 2``, eps' = f eps (so
``2 eps_ptr + eps' = eps``): its released value is, with probability 1 - omega, ``median + Lap(beta /
eps_ptr)`` (+ the purification's Laplace, made negligible here by ``laplace_scale=1e-6``) and with
probability omega a uniform draw on [lower, upper]; the exact mixture CDF is the oracle.

Every check states its tolerance (5 standard errors, or a KS p-value above 1e-3) and a power check:
the same sample fails the same criterion at 0.75x and 1.5x the stated scale. Fixed seeds.
"""

import math

import numpy as np
import pytest
from scipy import stats

from dp_infer.mechanisms import ptr as P


def _scale_checks(x, b):
    """(E|x| within 5 se of b, KS against Laplace(b)): both must hold at b."""
    n = x.size
    mean_ok = abs(float(np.mean(np.abs(x))) / b - 1.0) < 5.0 / math.sqrt(n)   # sd |x| = b under Laplace(b)
    ks_ok = stats.kstest(x, stats.laplace(scale=b).cdf).pvalue > 1e-3
    return mean_ok, ks_ok


def _assert_laplace_scale_with_power(x, b):
    assert _scale_checks(x, b) == (True, True)
    for wrong in (0.75 * b, 1.5 * b):   # power: the mis-scaled law is rejected by the same sample
        assert _scale_checks(x, wrong) == (False, False), wrong


def test_value_noise_is_laplace_beta_over_eps():
    eps, delta, beta, v0 = 0.8, 1e-6, 0.37, 2.5
    N = 3000
    rel = [P.propose_test_release(v0, 1e9, eps=eps, delta=delta, beta=beta, seed=s) for s in range(N)]
    assert all(r.value is not None for r in rel)      # D = 1e9: the test never refuses
    x = np.array([r.value for r in rel]) - v0
    _assert_laplace_scale_with_power(x, beta / eps)
    ev = rel[0].events[0][0]
    # two eps-DP Laplace mechanisms (test at sensitivity 1, value at beta): (2 eps, delta) by Lemma 34
    assert ev.epsilon == pytest.approx(2 * eps, rel=1e-15) and ev.delta == delta and rel[0].events[0][1] == 1


def test_test_noise_is_laplace_one_over_eps():
    eps, delta, beta, t = 0.6, 1e-5, 1.0, 1.0
    dist = (math.log(1 / delta) - t) / eps
    N = 4000
    refused = np.array([P.propose_test_release(0.0, dist, eps=eps, delta=delta, beta=beta, seed=10_000 + s).value
                        is None for s in range(N)])

    def p_refuse(scale):      # P(Lap(scale) <= t): the test noise in units of 1/eps
        return 1.0 - 0.5 * math.exp(-t / scale)

    se = math.sqrt(p_refuse(1.0) * (1 - p_refuse(1.0)) / N)   # 0.0061
    assert abs(refused.mean() - p_refuse(1.0)) < 5 * se
    # power: a 1.5x or 0.75x test noise moves the refusal rate by 0.073 / 0.052 > 5 se = 0.031
    assert abs(p_refuse(1.5) - p_refuse(1.0)) > 10 * se and abs(p_refuse(0.75) - p_refuse(1.0)) > 8 * se


def test_ptr_median_adds_beta_over_eps_to_the_median():
    # 101 values, 81 of them at 0.3: the median is 0.3 and D_beta = 37,
    # so the test refuses w.p. exp(-(37 eps - ln(1/delta))) / 2 = e^-30 / 2: never, at these seeds
    x = np.concatenate([np.full(81, 0.3), np.linspace(0.0, 1.0, 20)])
    eps, delta, beta = 1.2, 1e-6, 0.05
    assert 37 * eps - math.log(1 / delta) > 30 and P.median_distance_to_instability(x, beta, lower=0.0, upper=1.0) == 37
    N = 2000
    vals = np.array([P.ptr_median(x, eps=eps, delta=delta, beta=beta, lower=0.0, upper=1.0, seed=20_000 + s).value
                     for s in range(N)])
    _assert_laplace_scale_with_power(vals - 0.3, beta / eps)


def _mixture_cdf(lo, hi, omega, b, centre):
    unif = stats.uniform(loc=lo, scale=hi - lo)
    lap = stats.laplace(loc=centre, scale=b)

    def cdf(v):
        # clip(centre + Lap) to [lo, hi]: an atom at each end, none reached here (hi - centre = 50 / b > 80)
        return (1 - omega) * lap.cdf(v) + omega * unif.cdf(v)
    return cdf


def test_pure_ptr_median_runs_ptr_at_half_the_upstream_budget():
    lo, hi = -50.0, 50.0
    x = np.concatenate([np.full(91, 1.0), np.linspace(-3.0, 3.0, 10)])
    eps, f, omega, beta = 2.0, 0.1, 0.01, 0.5
    eps_ptr = (1 - f) * eps / 2                      # 2 eps_ptr + f eps = eps
    b = beta / eps_ptr
    N = 1500
    rel = [P.pure_ptr_median(x, eps=eps, beta=beta, lower=lo, upper=hi, eps_prime_fraction=f, omega=omega,
                             laplace_scale=1e-6, seed=30_000 + s) for s in range(N)]
    v = np.array([r.value for r in rel])
    assert rel[0].params["eps_ptr"] == pytest.approx(eps_ptr, rel=1e-14)
    assert rel[0].epsilon() == pytest.approx(eps, rel=1e-14) and rel[0].is_pure
    # the PTR test refuses w.p. exp(-(D eps_ptr - ln(1/delta_ptr))) / 2 < e^-12 (delta_ptr ~ 1e-11 here)
    D = P.median_distance_to_instability(x, beta, lower=lo, upper=hi)
    assert D * eps_ptr > -math.log(rel[0].params["delta_ptr"]) + 12
    assert stats.kstest(v, _mixture_cdf(lo, hi, omega, b, 1.0)).pvalue > 1e-3
    for wrong in (0.75 * b, 1.5 * b):                # power: the same sample rejects a mis-scaled PTR noise
        assert stats.kstest(v, _mixture_cdf(lo, hi, omega, wrong, 1.0)).pvalue < 1e-3, wrong


def test_pure_ptr_replaces_bottom_by_a_uniform_draw_on_the_range():
    # every value different: D_beta = 0 for a tiny beta, so the test refuses w.p. 1 - exp(-ln(1/delta))/2 ~ 1
    x = np.linspace(0.0, 1.0, 21)
    lo, hi = -2.0, 3.0
    v = np.array([P.pure_ptr_median(x, eps=1.0, beta=1e-6, lower=lo, upper=hi, laplace_scale=1e-6,
                                    seed=40_000 + s).value for s in range(500)])
    assert stats.kstest(v, stats.uniform(loc=lo, scale=hi - lo).cdf).pvalue > 1e-3
    assert stats.kstest(v, stats.uniform(loc=0.0, scale=1.0).cdf).pvalue < 1e-3   # not the data's range
