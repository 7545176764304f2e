r"""Generalized Gaussian mechanism (seed 004, ch. 2; digest §2.7, §4.3-4.5).

Noise ``GGauss(p, sigma)`` on R^k has density ``prod_i p / (2 sigma Gamma(1/p)) exp(-|x_i / sigma|^p)``:
independent coordinates, ``p = 1`` is Laplace(sigma), ``p = 2`` is N(0, sigma^2 / 2) (NOT sigma^2;
digest pitfall 2). Sampler (digest §2.7): ``G ~ Gamma(1/p)``, a random sign ``s``,
``x = s sigma G^{1/p}`` (if X has density ∝ exp(-x^p) on (0, inf), X^p ~ Gamma(1/p)).

Privacy, computed exactly rather than by the thesis's constant
--------------------------------------------------------------
The mechanism releases ``phi(D) + x`` for a statistic with l_inf sensitivity ``s``
(``|phi_i(D) - phi_i(D')| <= s`` for every coordinate and neighbouring D, D').

* **Worst case.** For p >= 1 the noise is log-concave, so the shifted pair (mu, mu(. - a)) has a
  monotone likelihood ratio and its trade-off function ``F(F^{-1}(1 - alpha) - |a|)`` decreases in
  |a|; the k-dimensional trade-off is the tensor product of the coordinates', and the tensor
  product is monotone in each factor (Dong, Roth, Su 2022, Prop. D.1). Hence every privacy
  notion (hockey stick, Renyi) is worst at the shift ``(s, ..., s)``, and the mechanism's privacy
  is exactly the k-fold composition of the 1-D mechanism with shift s. (tests/mechanisms/test_generalized_gaussian.py
  checks this in 2-D by numerical integration over other shifts.)
* **(eps, delta).** A dp-accounting privacy-loss distribution of the 1-D pair (our
  :class:`GeneralizedGaussianPrivacyLoss`, a ``MonotonePrivacyLoss``: ``l(x) = (|x|^p - |x + s|^p) /
  sigma^p`` is non-increasing for p >= 1), discretised pessimistically (connect-the-dots) and
  self-composed k times. p = 1 reproduces dp-accounting's Laplace PLD and p = 2 the exact Gaussian
  profile (tests).
* **RDP.** ``k * D_alpha(GG || GG(. - s))`` by 1-D quadrature (exact up to quadrature error,
  inflated by a 1e-9 relative margin); an :class:`~dp_infer.privacy.events.RdpCurveEvent` that
  composes with every other event of the library. For p > 2 the curve grows like alpha^{p-1}
  (digest §4.5), so it is looser than the PLD at a single (eps, delta) (about 13% more noise at
  k = 1000, p = 4, eps = 1, delta = 1e-3).

The thesis's own calibration ``sigma = 185 sqrt(k p ln(1/delta)) / eps`` (Lemma 30) is available as
:func:`thesis_sigma` for reference only: its conditions include constants hidden in O(.) that
cannot be checked, and one explicit condition of its proof (``e^{-0.001 k/p} < delta/2``) fails for
every k below about 10^4 at the usual deltas. Calibration here uses the PLD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special

from .._validation import check_delta, check_epsilon, check_positive, check_positive_int, check_target_epsilon
from ..randomness import secret_key
from ._release import Release
from .generalized_gaussian_privacy import (
    DEFAULT_RDP_ORDERS_GG, EVENT_DELTA_SLACK, GeneralizedGaussianPrivacyLoss, check_shape, gg_approx_event,
    gg_delta, gg_epsilon, gg_pld, gg_rdp, gg_rdp_event,
)

__all__ = [
    "check_shape",
    "gg_log_density",
    "sample_generalized_gaussian",
    "GeneralizedGaussianPrivacyLoss",
    "gg_pld",
    "gg_delta",
    "gg_epsilon",
    "gg_rdp",
    "gg_rdp_event",
    "gg_approx_event",
    "calibrate_gg_sigma",
    "ThesisCalibration",
    "thesis_sigma",
    "generalized_gaussian_mechanism",
    "DEFAULT_RDP_ORDERS_GG",
]


def gg_log_density(x: Any, p: float, sigma: float) -> np.ndarray:
    """log density of GGauss(p, sigma) at x, summed over the last axis (float64)."""
    p = check_shape(p)
    sigma = check_positive("sigma", sigma)
    a = np.asarray(x, dtype=np.float64)
    per = math.log(p / (2.0 * sigma)) - special.gammaln(1.0 / p) - np.abs(a / sigma) ** p
    return per.sum(axis=-1) if a.ndim else per


def sample_generalized_gaussian(key, p: float, sigma: float, shape: tuple[int, ...] = ()) -> np.ndarray:
    """Draws of GGauss(p, sigma), shape ``shape`` (i.i.d. coordinates), float64 numpy.

    ``x = s sigma G^{1/p}`` with ``G ~ Gamma(1/p)`` and an independent uniform sign ``s``, drawn with
    JAX from ``key`` (a key from :func:`dp_infer.randomness.secret_key`) in float64.
    """
    import jax
    import jax.numpy as jnp

    p = check_shape(p)
    sigma = check_positive("sigma", sigma)
    shape = tuple(int(s) for s in shape)
    with jax.enable_x64(True):
        kg, ks = jax.random.split(key)
        g = jax.random.gamma(kg, 1.0 / p, shape, dtype=jnp.float64)
        sign = jax.random.rademacher(ks, shape, dtype=jnp.float64)
        out = sign * sigma * g ** (1.0 / p)
        return np.asarray(out, dtype=np.float64)


def calibrate_gg_sigma(eps: float, delta: float, p: float, k: int, *, sensitivity: float = 1.0,
                       rel_tol: float = 1e-3) -> float:
    """Smallest sigma (to ``rel_tol``, rounded up) with GG(p, sigma) on k coordinates (eps, delta)-DP.

    Bisection in log sigma on the pessimistic PLD; the result is checked on the safe side.
    """
    eps = check_target_epsilon(eps)
    delta = check_delta(delta)
    p = check_shape(p)
    k = check_positive_int("k", k)
    s = check_positive("sensitivity", sensitivity)
    rel_tol = check_positive("rel_tol", rel_tol)
    from ..privacy.conversions import gdp_mu

    # Gaussian-equivalent start: GG(2, sigma) = N(0, sigma^2/2), l2 sensitivity s sqrt(k)
    s0 = math.sqrt(2.0 * k) * s / gdp_mu(eps, delta)

    target = delta * (1.0 - EVENT_DELTA_SLACK)  # the event is issued at this delta

    def ok(sig: float) -> bool:
        return gg_delta(eps, p, sig, k, sensitivity=s) <= target

    lo, hi = s0, s0
    while ok(lo):
        lo /= 2.0
        if lo < 1e-12 * s0:
            return lo
    while not ok(hi):
        hi *= 2.0
        if hi > 1e12 * s0:
            raise ValueError("eps/delta too small to calibrate sigma")
    while hi / lo > 1.0 + rel_tol:
        mid = math.sqrt(lo * hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class ThesisCalibration:
    """Lemma 30's sigma = 185 sqrt(k p ln(1/delta)) / eps and the status of its conditions.

    ``checks``: explicit conditions of the statement and its proof, evaluated; ``unverifiable``:
    conditions with constants hidden in O(.), which no code can check. The library never uses this
    sigma as a guarantee.
    """

    sigma: float
    checks: dict = field(default_factory=dict)
    unverifiable: tuple[str, ...] = ()

    @property
    def conditions_hold(self) -> bool:
        return all(self.checks.values()) and not self.unverifiable


def thesis_sigma(eps: float, delta: float, p: float, k: int) -> ThesisCalibration:
    """The thesis's closed-form calibration (Lemma 30) with its checkable conditions evaluated."""
    eps = check_epsilon(eps)
    delta = check_delta(delta)
    p = check_shape(p)
    k = check_positive_int("k", k)
    L = math.log(1.0 / delta)
    sigma = 185.0 * math.sqrt(k * p * L) / eps
    first = 128.0 * p ** (1.0 / p) * math.sqrt(k * p * L) / sigma
    second = 4.0 * p * p * k ** (p / 2.0) / sigma ** p
    checks = {
        "p is an even integer": float(p).is_integer() and int(p) % 2 == 0,
        "4 <= p <= ln k": 4.0 <= p <= math.log(k),
        "p <= sqrt(k)/2 (Fact 28)": p <= math.sqrt(k) / 2.0,
        "delta <= 1/k": delta <= 1.0 / k,
        "Gamma tail exp(-0.001 k/p) < delta/2 (proof of Lemma 30)": math.exp(-0.001 * k / p) < delta / 2.0,
        "loss bound 128 p^(1/p) sqrt(kp ln(1/delta))/sigma + 4 p^2 k^(p/2)/sigma^p <= eps": first + second <= eps,
    }
    unverifiable = ("eps <= O(1) (constant not given)", "delta >= 2^(-O(k/p)) (constant not given; Lemma 27 "
                    "also needs log(6/delta) = O(sqrt(k log(1/delta)/p)))")
    return ThesisCalibration(sigma=sigma, checks=checks, unverifiable=unverifiable)


def generalized_gaussian_mechanism(values: Any, *, eps: float, delta: float, p: float = 4.0,
                                   sensitivity: float = 1.0, seed: int | None = None) -> Release:
    """Release ``values + GGauss(p, sigma)`` with sigma calibrated (PLD) to (eps, delta).

    ``values`` is a statistic of the data (1-D array of k answers) whose coordinates each change by
    at most ``sensitivity`` between neighbouring datasets. sigma depends only on (eps, delta, p, k,
    sensitivity). The event is the PLD's (eps(delta), delta) at this delta.
    """
    eps = check_target_epsilon(eps)
    delta = check_delta(delta)
    p = check_shape(p)
    s = check_positive("sensitivity", sensitivity)
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"values must be a non-empty 1-D array of finite numbers, got shape {v.shape}")
    k = int(v.size)
    sigma = calibrate_gg_sigma(eps, delta, p, k, sensitivity=s)
    event = gg_approx_event(p, sigma, k, delta=delta, sensitivity=s)
    key, source = secret_key(seed)
    noisy = v + sample_generalized_gaussian(key, p, sigma, (k,))
    return Release(value=noisy, events=((event, 1),),
                   params={"mechanism": "generalized_gaussian", "p": p, "sigma": sigma, "k": k,
                           "sensitivity": s, "target_eps": eps, "delta": delta},
                   randomness=source.describe())

