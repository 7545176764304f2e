"""Numerical oracles for tests and audits (float64, log space).

These compute privacy *exactly up to quadrature error* for low-dimensional pairs of output
laws; they are references for the accountant's upper bounds, not accountants themselves
(a grid integral is not a certified bound).

* hockey-stick divergence ``delta(eps) = int max(0, p - e^eps q)`` of two 1-D densities on a grid,
  both directions, in log space; the smallest eps at a given delta; the max log density ratio;
* the exact Gaussian DP profile and trade-off (re-exported from :mod:`.events`);
* exact Renyi divergences of 1-D Gaussians, the exact Ornstein-Uhlenbeck last-iterate RDP
  (seed-001 digest §10.4), the exact law of ULA on a 1-D quadratic;
* the exact optimal composition of k generic eps-DP mechanisms (Kairouz, Oh, Viswanath 2015:
  k-fold randomized response is the worst case);
* log densities of the purified output in 1-D (seed-003 digest §6 oracle) and the closed-form
  two-Dirac purification loss.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from scipy import optimize, special

from .._validation import check_nonnegative, check_positive, check_positive_int
from .conversions import gdp_delta, gdp_epsilon, gdp_log_delta, gdp_mu, gdp_tradeoff

__all__ = [
    "gdp_delta",
    "gdp_epsilon",
    "gdp_log_delta",
    "gdp_mu",
    "gdp_tradeoff",
    "trapezoid_log_weights",
    "normalize_log_density",
    "hockey_stick_log_delta",
    "hockey_stick_delta",
    "hockey_stick_epsilon",
    "max_log_ratio",
    "gaussian_renyi",
    "ou_last_iterate_rdp",
    "ula_quadratic_law",
    "pure_composition_log_delta",
    "pure_composition_epsilon",
    "laplace_convolved_log_density",
    "truncated_gaussian_laplace_log_density",
    "two_dirac_purification_loss",
]


def _grid(x: Any) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size < 3 or np.any(np.diff(x) <= 0) or not np.all(np.isfinite(x)):
        raise ValueError("x must be a strictly increasing finite 1-D grid with at least 3 points")
    return x


def trapezoid_log_weights(x: Any) -> np.ndarray:
    """log of trapezoid-rule weights on the grid x."""
    x = _grid(x)
    dx = np.diff(x)
    w = np.zeros_like(x)
    w[:-1] += dx / 2.0
    w[1:] += dx / 2.0
    return np.log(w)


def normalize_log_density(x: Any, logp: Any) -> np.ndarray:
    """Normalise log density values on grid x (trapezoid rule)."""
    lw = trapezoid_log_weights(x)
    lp = np.asarray(logp, dtype=np.float64)
    if lp.shape != lw.shape:
        raise ValueError(f"logp must have the grid's shape {lw.shape}, got {lp.shape}")
    return lp - special.logsumexp(lw + lp)


def _one_sided_log_delta(lw, lp, lq, eps):
    t = eps + lq - lp  # log(e^eps q / p)
    mask = t < 0
    if not np.any(mask):
        return -math.inf
    with np.errstate(divide="ignore"):
        li = lp[mask] + np.where(t[mask] > -0.6931471805599453, np.log(-np.expm1(t[mask])), np.log1p(-np.exp(t[mask])))
    return float(special.logsumexp(lw[mask] + li))


def hockey_stick_log_delta(x: Any, logp: Any, logq: Any, eps: float, *, normalize: bool = True,
                           both: bool = True) -> float:
    """log delta(eps) = log int max(0, p - e^eps q) (max over both orders if ``both``)."""
    x = _grid(x)
    eps = check_nonnegative("eps", eps)
    lw = trapezoid_log_weights(x)
    lp = np.asarray(logp, dtype=np.float64)
    lq = np.asarray(logq, dtype=np.float64)
    if normalize:
        lp = normalize_log_density(x, lp)
        lq = normalize_log_density(x, lq)
    d = _one_sided_log_delta(lw, lp, lq, eps)
    if both:
        d = max(d, _one_sided_log_delta(lw, lq, lp, eps))
    return d


def hockey_stick_delta(x, logp, logq, eps, **kw) -> float:
    return math.exp(hockey_stick_log_delta(x, logp, logq, eps, **kw))


def hockey_stick_epsilon(x: Any, logp: Any, logq: Any, delta: float, *, both: bool = True) -> float:
    """Smallest eps >= 0 with hockey-stick delta(eps) <= delta (bisection on the log profile)."""
    x = _grid(x)
    ld = math.log(check_positive("delta", delta))
    lp = normalize_log_density(x, logp)
    lq = normalize_log_density(x, logq)
    f = lambda e: hockey_stick_log_delta(x, lp, lq, e, normalize=False, both=both) - ld  # noqa: E731
    if f(0.0) <= 0:
        return 0.0
    hi = max_log_ratio(x, lp, lq, normalize=False)
    if not math.isfinite(hi):
        hi = 1.0
        while f(hi) > 0:
            hi *= 2.0
    if f(hi) > 0:
        return hi
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-13))


def max_log_ratio(x: Any, logp: Any, logq: Any, *, normalize: bool = True) -> float:
    """sup over the grid of |log p - log q| after normalisation (pure-DP eps of the pair on the grid)."""
    x = _grid(x)
    lp = np.asarray(logp, dtype=np.float64)
    lq = np.asarray(logq, dtype=np.float64)
    if normalize:
        lp = normalize_log_density(x, lp)
        lq = normalize_log_density(x, lq)
    return float(np.max(np.abs(lp - lq)))


def gaussian_renyi(alpha: float, mean1: float, var1: float, mean2: float, var2: float) -> float:
    """Exact D_alpha(N(mean1, var1) || N(mean2, var2)) in 1-D (inf if the integral diverges)."""
    a = float(alpha)
    if not a > 1:
        raise ValueError(f"alpha (Renyi order) must lie in (1, inf), got {alpha!r}")
    v1 = check_positive("var1", var1)
    v2 = check_positive("var2", var2)
    va = a * v2 + (1.0 - a) * v1
    if va <= 0:
        return math.inf
    return (0.5 * math.log(v2 / v1) + (1.0 / (2.0 * (a - 1.0))) * math.log(v2 / va)
            + a * (mean1 - mean2) ** 2 / (2.0 * va))


def ou_last_iterate_rdp(alpha: float, beta: float, strong_convexity: float, mean_shift: float, time: float) -> float:
    """Exact RDP of the OU diffusion's time-t law for a quadratic loss (seed-001 digest §10.4).

    ``alpha (1 - e^{-beta m t})^2 ||Delta mu||^2 beta m / (2 (1 - e^{-2 beta m t}))``, where
    Delta mu is the difference of the minimisers and the initial law is common.
    """
    b = check_positive("beta", beta)
    m = check_positive("strong_convexity", strong_convexity)
    t = check_positive("time", time)
    u = b * m * t
    one_m = -math.expm1(-u)
    one_m2 = -math.expm1(-2.0 * u)
    return alpha * one_m * one_m * mean_shift**2 * b * m / (2.0 * one_m2)


def ula_quadratic_law(beta: float, strong_convexity: float, minimiser: float, step_size: float, num_steps: int,
                      init_mean: float = 0.0, init_var: float = 0.0) -> tuple[float, float]:
    """(mean, variance) of ULA x <- x - h beta m (x - minimiser) + N(0, 2h) after K steps (1-D)."""
    b = check_positive("beta", beta)
    m = check_positive("strong_convexity", strong_convexity)
    h = check_positive("step_size", step_size)
    k = check_positive_int("num_steps", num_steps)
    v0 = check_nonnegative("init_var", init_var)
    c = 1.0 - h * b * m
    ck = c**k
    mean = ck * init_mean + (1.0 - ck) * minimiser
    var = ck * ck * v0 + (2.0 * h * (1.0 - ck * ck) / (1.0 - c * c) if c * c != 1.0 else 2.0 * h * k)
    return mean, var


def pure_composition_log_delta(eps: float, k: int, eps_total: float) -> float:
    """Exact log delta(eps_total) of the optimal k-fold composition of eps-DP mechanisms.

    The worst case is k-fold binary randomized response (Kairouz, Oh, Viswanath 2015, Thm 3.3):
    privacy loss (k - 2i) eps with probability C(k, i) p^{k-i} (1-p)^i, p = e^eps/(1+e^eps), so
    delta = sum_i C(k,i) [p^{k-i} (1-p)^i - e^{eps_total} p^i (1-p)^{k-i}]_+.
    """
    e = check_nonnegative("eps", eps)
    k = check_positive_int("k", k)
    et = check_nonnegative("eps_total", eps_total)
    i = np.arange(k + 1, dtype=np.float64)
    lc = special.gammaln(k + 1) - special.gammaln(i + 1) - special.gammaln(k - i + 1)
    lp = -np.logaddexp(0.0, -e)  # log p
    lq = -np.logaddexp(0.0, e)   # log (1 - p)
    la = lc + (k - i) * lp + i * lq
    loss = (k - 2.0 * i) * e  # privacy loss of outcome i; lb - la = et - loss exactly
    mask = loss > et
    if not np.any(mask):
        return -math.inf
    terms = la[mask] + np.log(-np.expm1(et - loss[mask]))
    return float(special.logsumexp(terms))


def pure_composition_epsilon(eps: float, k: int, delta: float) -> float:
    """Smallest eps_total with the exact k-fold composition delta <= ``delta``."""
    ld = math.log(check_positive("delta", delta))
    e = check_nonnegative("eps", eps)
    f = lambda x: pure_composition_log_delta(e, k, x) - ld  # noqa: E731
    if f(0.0) <= 0:
        return 0.0
    hi = k * e
    if f(hi) > 0:
        return hi
    # delta(eps_total) is a convex, piecewise-smooth decreasing function: bisection is safe
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-13))


def laplace_convolved_log_density(y: Any, b: float, *, atoms: Sequence[float] = (), atom_weights: Sequence[float] = (),
                                  cont_x: Any = None, cont_logdens: Any = None, cont_weight: float = 0.0,
                                  uniform: tuple[float, float] | None = None, uniform_weight: float = 0.0) -> np.ndarray:
    """log density at y of (sum_i w_i delta_{a_i} + w_c f + w_u Unif[lo, hi]) * Laplace(b), 1-D.

    ``cont_logdens`` is a normalised log density on the grid ``cont_x`` (trapezoid rule).
    """
    y = np.asarray(y, dtype=np.float64)
    b = check_positive("b", b)
    parts = []
    lb = -math.log(2.0 * b)
    for a, w in zip(atoms, atom_weights):
        if w > 0:
            parts.append(math.log(w) + lb - np.abs(y - a) / b)
    if cont_x is not None and cont_weight > 0:
        cx = _grid(cont_x)
        lw = trapezoid_log_weights(cx) + np.asarray(cont_logdens, dtype=np.float64)
        parts.append(math.log(cont_weight) + lb
                     + special.logsumexp(lw[None, :] - np.abs(y[:, None] - cx[None, :]) / b, axis=1))
    if uniform is not None and uniform_weight > 0:
        lo, hi = uniform
        L = hi - lo
        # (1/L) [F(y - lo) - F(y - hi)], F the Laplace CDF, in log space by cases
        out = np.empty_like(y)
        left = y <= lo
        right = y >= hi
        mid = ~(left | right)
        out[left] = (y[left] - lo) / b + math.log(0.5) + math.log(-math.expm1(-L / b))
        out[right] = (hi - y[right]) / b + math.log(0.5) + math.log(-math.expm1(-L / b))
        ym = y[mid]
        out[mid] = np.log1p(-0.5 * np.exp(-(ym - lo) / b) - 0.5 * np.exp(-(hi - ym) / b))
        parts.append(math.log(uniform_weight) - math.log(L) + out)
    if not parts:
        raise ValueError("give at least one component with positive weight")
    return special.logsumexp(np.stack(parts), axis=0)


def _log_ndtr_diff(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """log(Phi(hi) - Phi(lo)) for hi > lo, accurate in both tails."""
    hi = np.asarray(hi, dtype=np.float64)
    lo = np.asarray(lo, dtype=np.float64)
    upper = lo > 0  # both in the upper tail: use Phi(-lo) - Phi(-hi)
    a = np.where(upper, -lo, hi)
    b = np.where(upper, -hi, lo)
    la = special.log_ndtr(a)
    lb = special.log_ndtr(b)
    with np.errstate(divide="ignore"):
        return la + np.log(-np.expm1(np.minimum(lb - la, 0.0)))


def truncated_gaussian_laplace_log_density(y: Any, b: float, mean: float, sd: float, lo: float, hi: float) -> np.ndarray:
    """log of int_lo^hi phi_sd(x - mean) Lap_b(y - x) dx, in closed form (exponentially modified Gaussian).

    This is the Laplace-smoothed density of the part of N(mean, sd^2) that lies in [lo, hi]
    (unnormalised: total mass Phi((hi-mean)/sd) - Phi((lo-mean)/sd)). Split at x = y:
    int phi_sd(x - m) e^{+-x/b} dx over [a, c] = e^{+-m/b + sd^2/(2 b^2)} [Phi((c-m)/sd -+ sd/b) - Phi((a-m)/sd -+ sd/b)].
    """
    y = np.asarray(y, dtype=np.float64)
    b = check_positive("b", b)
    sd = check_positive("sd", sd)
    k = sd / b
    base = -math.log(2.0 * b) + 0.5 * k * k
    parts = []
    # x in [lo, min(y, hi)]: kernel e^{-(y - x)/b}
    c = np.minimum(y, hi)
    ok = c > lo
    left = np.full(y.shape, -np.inf)
    if np.any(ok):
        left[ok] = (base - y[ok] / b + mean / b
                    + _log_ndtr_diff((c[ok] - mean) / sd - k, np.full(ok.sum(), (lo - mean) / sd - k)))
    parts.append(left)
    # x in [max(y, lo), hi]: kernel e^{-(x - y)/b}
    a = np.maximum(y, lo)
    ok = a < hi
    right = np.full(y.shape, -np.inf)
    if np.any(ok):
        right[ok] = (base + y[ok] / b - mean / b
                     + _log_ndtr_diff(np.full(ok.sum(), (hi - mean) / sd + k), (a[ok] - mean) / sd + k))
    parts.append(right)
    return np.logaddexp(parts[0], parts[1])


def two_dirac_purification_loss(delta: float, omega: float, eps_prime: float) -> float:
    """Closed-form sup log-ratio of the purified two-Dirac pair on [0, 1] (seed-003 digest §6).

    M(D) = (1-delta) Dirac_0.5 + delta Dirac_0, M(D') = (1-delta) Dirac_0.5 + delta Dirac_1 (a (0, delta)
    pair), purified with R = 1, d = 1, b = 2 delta/(omega eps'): the loss is ln(N / Dn) with
    A = (1-omega)(1-delta), s = 1 - e^{-1/b}, N = A e^{-0.5/b} + (1-omega) delta + omega b s,
    Dn = A e^{-0.5/b} + (1-omega) delta e^{-1/b} + omega b s.
    """
    b = 2.0 * delta / (omega * eps_prime)
    A = (1.0 - omega) * (1.0 - delta)
    s = -math.expm1(-1.0 / b)
    N = A * math.exp(-0.5 / b) + (1.0 - omega) * delta + omega * b * s
    Dn = A * math.exp(-0.5 / b) + (1.0 - omega) * delta * math.exp(-1.0 / b) + omega * b * s
    return math.log(N / Dn)
