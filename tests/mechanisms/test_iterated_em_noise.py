"""The (iterated) exponential mechanism's spread, measured, against its stated sensitivity.

Loss ``ell(theta; x) = |theta - x|^2 / 2`` with rows ``|x| <= 1`` on C_0 = the unit ball of R^p: the
difference of two per-example losses has gradient ``x' - x``, so G = 2 (derived here), and the mean
loss is ``|theta - xbar|^2 / 2 + const``: the exponential mechanism ``exp(-beta L)`` on a set C is
``N(xbar, I / beta)`` restricted to C (m = 1). Seed 001 Alg. 2 (module docstring, digest A6):

* one round at eps_i on a set of diameter bound D_{i-1}: ``beta_i = eps_i n / (G D_{i-1})``;
* k rounds: ``eps_i = eps / 2^{k - i + 1}``; ``D_i = min(D_{i-1}, 2 r_i)`` with the explicit radius
  ``r_i = sqrt(p / (beta_i m)) + sqrt(2 ln(1 / gamma) / (beta_i m))``, gamma = 1 / n^3.

All of it is written here; the released theta's coordinates minus xbar (p = 100 per release) must have
sd ``1 / sqrt(beta_k)``: the sets are so much larger than the law's spread that the truncation is
negligible (checked: the draws lie well inside). Tolerance 5 standard errors of a sample sd
(``5 / sqrt(2 m)`` in log) with a power check at 0.75x and 1.5x the stated sd. Fixed seeds.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer.domains import L2Ball
from dp_infer.losses import LossConstants, PerExampleLoss
from dp_infer.mechanisms import iterated_em as IE
from tests.support.noise_checks import assert_sd_with_power

P_DIM, N, G = 100, 2000, 2.0


def _make_loss():
    fn = lambda t, x, y: 0.5 * jnp.sum((t - x) ** 2)  # noqa: E731
    return PerExampleLoss("mean_sq", fn, LossConstants(lipschitz=2.0, grad_diff=G, smoothness=1.0,
                                                       strong_convexity=1.0), 1.0)


LOSS = _make_loss()   # one object: the exact sampler compiles once per loss


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, P_DIM))
    X = 0.5 * X / np.linalg.norm(X, axis=1, keepdims=True)          # |x| = 0.5 <= 1
    return X, np.zeros(N)


def test_single_exponential_mechanism_has_beta_eps_n_over_g_diameter():
    X, y = _data()
    xbar = X.mean(axis=0)
    eps, dom = 10.0, L2Ball(P_DIM, 1.0)
    beta = eps * N / (G * 2.0)                                      # D_0 = 2 (unit ball)
    dev = []
    for s in range(8):
        r = IE.exponential_mechanism(LOSS, X, y, eps=eps, domain=dom, anchor=xbar, seed=s)
        dev.append(np.asarray(r.value) - xbar)
        assert np.linalg.norm(r.value) < 0.5                          # far inside C_0: no truncation
    assert_sd_with_power(np.concatenate(dev), 1.0 / math.sqrt(beta))           # 800 coordinates, 5 se: 12.5%
    assert r.is_pure and r.epsilon() == pytest.approx(eps, rel=1e-15)


def test_two_rounds_release_the_last_round_at_its_shrunken_diameter():
    X, y = _data()
    xbar = X.mean(axis=0)
    eps, dom = 8.0, L2Ball(P_DIM, 1.0)
    e1, e2 = eps / 4, eps / 2
    beta1 = e1 * N / (G * 2.0)
    gamma = 1.0 / N ** 3
    r1 = math.sqrt(P_DIM / beta1) + math.sqrt(2 * math.log(1 / gamma) / beta1)
    D1 = min(2.0, 2 * r1)
    assert D1 < 2.0                                                 # the diameter did shrink
    beta2 = e2 * N / (G * D1)
    dev = []
    for s in range(8):
        r = IE.iterated_exponential_mechanism(LOSS, X, y, eps=eps, domain=dom, rounds=2, anchor=xbar,
                                              seed=100 + s)
        dev.append(np.asarray(r.value) - xbar)
    x = np.concatenate(dev)
    # the ball B(theta_1, r1) does not truncate the last draw: theta_1 - xbar and theta - xbar are independent
    # Gaussian vectors, so |theta - theta_1| ~ sqrt(p / beta1 + p / beta2) (sd of the norm ~ sqrt((1 / beta1 +
    # 1 / beta2) / 2)), and 6 of those sds still fit inside r1
    spread = math.sqrt(P_DIM / beta1 + P_DIM / beta2) + 6 * math.sqrt((1 / beta1 + 1 / beta2) / 2)
    assert spread < r1
    assert_sd_with_power(x, 1.0 / math.sqrt(beta2))                            # 5 se: 12.5%
    assert [e.epsilon for e, _ in r.events] == pytest.approx([e1, e2], rel=1e-15)
