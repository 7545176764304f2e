"""The Generalized Gaussian mechanism's released noise, measured, against its stated sensitivity.

Oracles, none of them from the module under test:
* the released noise ``value - values`` measured: KS against scipy's ``gennorm(p, scale=sigma)``
  and its sd against the closed form ``sigma sqrt(Gamma(3/p) / Gamma(1/p))`` (standard error of
  the sample sd stated at each check);
* at p = 2, GGauss(2, sigma) = N(0, sigma^2 / 2): a shift of s in each of k coordinates is a Gaussian
  mechanism with mu = s sqrt(2 k) / sigma, whose exact delta (the Gaussian profile, closed form) must
  not exceed the target at the released sigma;
* at p = 4, k = 1: the hockey-stick divergence between GG(sigma) and GG(sigma) shifted by s, by adaptive
  quadrature of the two densities, must not exceed the target, and the PLD functions with a
  sensitivity s must agree with it (pessimistic, tight);
* the Renyi divergence of the shifted pair by quadrature, additive over coordinates.
"""

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from dp_infer.mechanisms import generalized_gaussian as gg
from dp_infer.privacy.conversions import gdp_delta


def _hockey(eps, p, sigma, shift):
    """int max(0, f(x) - e^eps f(x - shift)) dx, f the GG density p / (2 sigma Gamma(1/p)) exp(-|x/sigma|^p)
    (adaptive quadrature)."""
    c = p / (2 * sigma * math.gamma(1 / p))
    f = lambda x: c * math.exp(-abs(x / sigma) ** p)  # noqa: E731
    g = lambda x: max(0.0, f(x) - math.exp(eps) * f(x - shift))  # noqa: E731
    pts = np.linspace(-12 * sigma, 12 * sigma + shift, 41)
    return sum(integrate.quad(g, a, b, epsabs=1e-14, epsrel=1e-11, limit=400)[0] for a, b in zip(pts[:-1], pts[1:]))


def _sd_ok(x, sd, z=5.0):
    """sample sd (mean known 0) within z se of sd; se(log s) = sqrt(kurtosis excess + 2) / (2 sqrt(N))
    <= 1 / sqrt(N) for the light-tailed GG with p >= 2."""
    s = math.sqrt(float(np.mean(x ** 2)))
    return abs(math.log(s / sd)) <= z / math.sqrt(x.size), s


@pytest.mark.parametrize("s", [0.37, 4.0])
def test_p2_release_is_a_gaussian_mechanism_at_the_stated_sensitivity(s):
    k, eps, delta = 3000, 1.0, 1e-5
    r = gg.generalized_gaussian_mechanism(np.zeros(k), eps=eps, delta=delta, p=2.0, sensitivity=s, seed=4)
    sigma = r.params["sigma"]
    x = np.asarray(r.value)
    ok, sd = _sd_ok(x, sigma / math.sqrt(2.0))        # N(0, sigma^2 / 2); 5 se = 9% on sd
    assert ok, (sd, sigma / math.sqrt(2))
    assert stats.kstest(x, stats.norm(scale=sigma / math.sqrt(2)).cdf).pvalue > 1e-3
    mu = s * math.sqrt(2.0 * k) / sigma
    assert gdp_delta(eps, mu) <= delta                  # private at the stated sensitivity ...
    assert gdp_delta(eps, mu * 1.01) > delta            # ... and not over-noised by 1%
    assert r.params["sensitivity"] == s and r.params["k"] == k
    e, c = r.events[0]
    assert c == 1 and e.delta <= delta and e.epsilon <= eps and e.metadata["sensitivity"] == s


def test_p4_privacy_at_a_sensitivity_is_the_quadratures():
    """One coordinate at p = 4, sensitivity s = 2.5, sigma = 40: the PLD's delta at shift s is the
    hockey-stick divergence by quadrature (pessimistic, within 0.5%), and the (eps, delta) event the
    mechanism issues at this sensitivity holds by quadrature."""
    p, sigma, s = 4.0, 40.0, 2.5
    for e in (0.0, 0.5):
        q = _hockey(e, p, sigma, s)
        assert q - 1e-12 <= gg.gg_delta(e, p, sigma, 1, sensitivity=s) <= q * (1 + 5e-3) + 1e-10
    ev = gg.gg_approx_event(p, sigma, 1, delta=1e-4, sensitivity=s)
    assert ev.delta <= 1e-4 and _hockey(ev.epsilon, p, sigma, s) <= ev.delta
    assert _hockey(ev.epsilon * 0.99, p, sigma, s) > ev.delta      # and not loose by 1%
    assert ev.metadata["sensitivity"] == s


def test_rdp_with_a_sensitivity_is_the_renyi_divergence_by_quadrature():
    p, sigma, s = 4.0, 1.3, 0.7
    for alpha in (1.5, 2.0, 3.0):
        c = math.log(p / (2 * sigma)) - math.lgamma(1 / p)
        g = lambda x: math.exp(c - alpha * abs(x / sigma) ** p + (alpha - 1) * abs((x - s) / sigma) ** p)  # noqa: E731
        hump = 3 * (alpha - 1) * s      # where -|u|^p + (alpha - 1) |u - s'|^p peaks (p = 4)
        pts = np.linspace(-(8 * sigma + hump), 8 * sigma + hump, 61)
        val = sum(integrate.quad(g, a, b, epsabs=1e-15, epsrel=1e-12, limit=200)[0] for a, b in zip(pts[:-1], pts[1:]))
        exact = math.log(val) / (alpha - 1)
        got = float(gg.gg_rdp([alpha], p, sigma, 1, sensitivity=s)[0])
        assert exact * (1 - 1e-7) <= got <= exact * (1 + 1e-4) + 1e-12
        got3 = float(gg.gg_rdp([alpha], p, sigma, 3, sensitivity=s)[0])
        assert got3 == pytest.approx(3 * got, rel=1e-12)   # independent coordinates: RDP adds
