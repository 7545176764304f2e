"""Query answering's released noise, measured, against the sensitivity of the answers.

Oracles, none of them from the module under test:
* the sensitivity of the answers is realised by a neighbouring pair computed here: replacing one
  record of 0/1 values changes every count by at most 1 (every mean by 1 / n);
* the released noise ``value - true answers`` measured on many queries (fixed key): its sd (Gaussian)
  or mean absolute value (Laplace: E|x| = b), with the standard error stated at each check;
* the Gaussian release: the exact Gaussian profile (60-digit mpmath) at mu = l2 sensitivity / measured
  sd's expected value must meet the target, and the plan is tight;
* Laplace, pure: eps = l1 sensitivity / b (the Laplace mechanism);
* Laplace at (eps, delta): dp-accounting's Laplace PLD composed k times at the released b.
"""

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import stats

from dp_infer.mechanisms import queries as Q
from tests.support.mp_oracles import gdp_delta_mp


def _values(n, k, seed):
    return (np.random.default_rng(seed).random((n, k)) < 0.3).astype(float)


@pytest.mark.parametrize("normalize", [False, True])
def test_gaussian_answers_carry_the_noise_of_their_sensitivity(normalize):
    n, k, eps, delta = 50, 1500, 1.0, 1e-6
    V = _values(n, k, 1)
    truth = V.mean(axis=0) if normalize else V.sum(axis=0)
    # the l2 sensitivity realised by a neighbour: one record all 0 -> all 1 (every answer moves by s)
    V2 = V.copy()
    V2[0] = 1.0 - (V[0] > 0)
    s = 1.0 / n if normalize else 1.0
    moved = np.abs((V2.mean(axis=0) if normalize else V2.sum(axis=0)) - truth)
    assert np.max(moved) == pytest.approx(s, rel=1e-12)
    r = Q.answer_queries(V, eps=eps, delta=delta, mechanism="gaussian", normalize=normalize, seed=3)
    x = np.asarray(r.value) - truth
    sigma = r.params["noise_scale"]
    sd = math.sqrt(float(np.mean(x ** 2)))
    assert abs(math.log(sd / sigma)) < 5 / math.sqrt(2 * k)       # 5 se of log sd: 9%
    assert stats.kstest(x / sigma, "norm").pvalue > 1e-3
    # the noise meets (eps, delta) at the worst neighbour's l2 shift s sqrt(k) -- exact profile
    mu = s * math.sqrt(k) / sigma
    assert gdp_delta_mp(eps, mu) <= delta
    assert gdp_delta_mp(eps, mu * 1.001) > delta                   # and is not over-noised
    ev = r.events[0][0]
    assert ev.mu == pytest.approx(mu, rel=1e-12) and r.events[0][1] == 1
    assert r.params["sensitivity"] == s and r.params["rms_error"] == sigma


def test_pure_laplace_answers_carry_l1_sensitivity_over_eps():
    n, k, eps = 40, 2000, 2.0
    V = _values(n, k, 2)
    truth = V.sum(axis=0)
    r = Q.answer_queries(V, eps=eps, delta=None, mechanism="laplace", seed=4)
    b = r.params["noise_scale"]
    assert b == pytest.approx(k / eps, rel=1e-12)        # l1 sensitivity k (counts), Laplace mechanism
    x = np.asarray(r.value) - truth
    m = float(np.mean(np.abs(x)))
    assert abs(m / b - 1) < 5 / math.sqrt(k)             # E|x| = b, sd |x| = b: 5 se = 11%
    assert stats.kstest(x, stats.laplace(scale=b).cdf).pvalue > 1e-3
    ev = r.events[0][0]
    assert ev.epsilon == pytest.approx(eps, rel=1e-12) and r.is_pure and r.epsilon() == pytest.approx(eps)


def test_approximate_laplace_answers_meet_the_target_by_dp_accounting():
    n, k, eps, delta = 30, 60, 1.0, 1e-5
    V = _values(n, k, 5)
    truth = V.mean(axis=0)
    r = Q.answer_queries(V, eps=eps, delta=delta, mechanism="laplace", normalize=True, seed=6)
    b = r.params["noise_scale"]
    s = 1.0 / n
    # k Laplace(b) coordinates, each shifted by at most s: dp-accounting's Laplace PLD composed k times
    pld = pld_lib.from_laplace_mechanism(b, sensitivity=s, value_discretization_interval=1e-4).self_compose(k)
    assert pld.get_delta_for_epsilon(eps) <= delta * (1 + 1e-3)
    loose = pld_lib.from_laplace_mechanism(b * 0.99, sensitivity=s, value_discretization_interval=1e-4).self_compose(k)
    assert loose.get_delta_for_epsilon(eps) > delta      # and is tight to 1% of noise
    x = np.asarray(r.value) - truth
    assert float(np.max(np.abs(x))) > 0   # noise was added
    assert b < s * k / eps                 # better than the pure calibration (k-fold composition is tight)
