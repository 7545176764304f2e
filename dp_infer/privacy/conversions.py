"""Conversions between privacy notions: pure functions of numbers, float64 on the host.

Gaussian DP <-> (eps, delta) through the exact Gaussian privacy profile
``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle & Wang 2018, eq. (6));
RDP curves -> (eps, delta) (Canonne, Kamath, Steinke 2020 conversion, with the KL shortcut when
the whole curve sits below delta); linear RDP (rho-zCDP); the pure-DP RDP envelope; the TV slack
``(1 + e^eps) tau`` of an approximate sampler. Calibrated parameters are nudged to the safe side
(never under-report privacy loss). The event types that use them are in
:mod:`dp_infer.privacy.events`; the :class:`~dp_infer.privacy.accountant.Accountant` composes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize, special

from .._validation import check_delta, check_epsilon, check_nonnegative

__all__ = [
    "gdp_log_delta", "gdp_delta", "gdp_epsilon", "gdp_mu", "gdp_tradeoff", "zcdp_epsilon_mironov",
    "zcdp_rho_for_epsilon_mironov", "rdp_epsilon", "rdp_log_delta", "linear_rdp_epsilon",
    "linear_rdp_log_delta", "linear_rdp_rho", "pure_dp_rdp", "tv_delta_slack", "resolve_log_delta",
]

LOG_TINY = math.log(1e-300)  # below this a delta is passed around as a log only


# ---------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------


def resolve_log_delta(delta: float | None = None, log_delta: float | None = None, *, name: str = "delta") -> float:
    """Return log(delta) from exactly one of ``delta`` in (0, 1) or ``log_delta`` in (-inf, 0)."""
    if (delta is None) == (log_delta is None):
        raise ValueError(f"give exactly one of {name} or log_{name}")
    if delta is not None:
        return math.log(check_delta(delta, name))
    try:
        v = float(log_delta)
    except (TypeError, ValueError):
        raise ValueError(f"log_{name} must be a number in (-inf, 0), got {log_delta!r}") from None
    if math.isnan(v) or v >= 0 or v == -math.inf:
        raise ValueError(f"log_{name} must lie in (-inf, 0), got {log_delta!r}")
    return v


def _log1mexp(x: float) -> float:
    """log(1 - exp(x)) for x <= 0, accurate near 0 and for very negative x."""
    if x > 0:
        raise ValueError("internal: _log1mexp needs x <= 0")
    if x == 0:
        return -math.inf
    return math.log(-math.expm1(x)) if x > -0.6931471805599453 else math.log1p(-math.exp(x))


def nudge(x: float, ok, *, up: bool) -> float:
    """Move a root-finder output by a few ulps-scale relative steps until ``ok(x)`` holds.

    Root finders return a point within tolerance of the root, possibly on the wrong side; a
    calibrated parameter must always be on the safe side (never under-report privacy loss).
    """
    step = 4e-16
    for _ in range(60):
        if ok(x):
            return x
        x = x * (1.0 + step) if up else x * (1.0 - step)
        step *= 2.0
    raise RuntimeError("internal: could not reach the safe side of a calibration root")


def check_orders(name: str, orders: Any) -> np.ndarray:
    a = np.asarray(orders, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of Renyi orders, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a <= 1.0):
        raise ValueError(f"{name} must be finite Renyi orders in (1, inf)")
    if np.any(np.diff(a) <= 0):
        raise ValueError(f"{name} must be strictly increasing")
    return a


def _check_curve_values(values: Any, orders: np.ndarray) -> np.ndarray:
    """RDP values at ``orders``: same shape, each >= 0 (+inf allowed: unknown at that order)."""
    try:
        r = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"values (RDP) must be numbers >= 0 (inf allowed), got {values!r}") from None
    if r.shape != orders.shape:
        raise ValueError(f"values must have the same shape as orders, got {r.shape} and {orders.shape}")
    if not np.all(r >= 0):  # also refuses NaN
        raise ValueError("values (RDP) must be >= 0 (inf allowed)")
    return r


def check_alpha(alpha: Any) -> np.ndarray:
    a = np.asarray(alpha, dtype=np.float64)
    if np.any(~np.isfinite(a)) or np.any(a <= 1.0):
        raise ValueError(f"alpha (Renyi order) must lie in (1, inf), got {alpha!r}")
    return a


# ---------------------------------------------------------------------------------------------
# Gaussian DP
# ---------------------------------------------------------------------------------------------


def gdp_log_delta(eps: float, mu: float) -> float:
    """log of the tight delta(eps) of a mu-GDP mechanism (log space, float64).

    ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle & Wang 2018, eq. (6);
    Dong, Roth, Su, Cor. 2.13), evaluated as
    ``log Phi(a) + log(1 - exp(eps + log Phi(b) - log Phi(a)))`` with ``log_ndtr``, raised by a
    bound on its rounding (assuming ``log_ndtr`` within a few ulps), or in extended precision
    (mpmath) where that bound exceeds 1e-10 relative (small mu, or eps ~ mu^2 / 2 beyond ~1e15).
    """
    eps = check_nonnegative("eps", eps)
    mu = check_nonnegative("mu", mu)
    if mu == 0.0:
        return -math.inf
    a = -eps / mu + mu / 2.0
    b = -eps / mu - mu / 2.0
    la = float(special.log_ndtr(a))
    if la == -math.inf:  # Phi(a) underflows (eps/mu beyond ~1e154): delta <= Phi(a) = 0
        return -math.inf
    lb = float(special.log_ndtr(b))
    if lb == -math.inf:  # e^eps Phi(b) / Phi(a) ~ |a| / |b| ~ 0 (b^2 - a^2 = 2 eps): delta = Phi(a)
        return la
    x = eps + lb - la
    # Rounding: la and lb are within a few ulps (relative), so x is off by <= _ULPS * magnitude and
    # log(1 - e^x) by that over 1 - e^x. The float result is raised by this bound (it never
    # under-reports); where the bound is not negligible -- x near 0 for small mu (mu = 1e-12,
    # eps = 1e-11 came out 13% low in delta, mu = 1e-17 gave delta = 0), or x the difference of huge
    # terms (eps ~ mu^2 / 2 ~ 1e300) -- the profile is evaluated in extended precision.
    magnitude = max(1.0, abs(la), abs(lb), eps)
    if x < 0.0 and (err := _ULPS * magnitude / -math.expm1(x)) <= 1e-10 * max(1.0, abs(ld := la + _log1mexp(x))):
        return min(ld + err, 0.0)
    if a < -1.0 and max(math.log(2.0 * eps) - 2.0 * math.log(mu), math.log(2.0)) <= 1e-12 * abs(la):
        # deep lower tail: 1 - e^x >~ mu^2 / (2 eps) (Mills ratio), so Phi(a), an upper bound on
        # delta, is within log(2 eps / mu^2) of it: below 1e-12 |log Phi(a)|, as good as float64 gets
        return la
    return _gdp_log_delta_extended(eps, mu, magnitude)


_ULPS = 16 * 2.220446049250313e-16  # rounding of x = eps + log_ndtr(b) - log_ndtr(a), relative to its terms


def _gdp_log_delta_extended(eps: float, mu: float, magnitude: float) -> float:
    """log delta_mu(eps) in mpmath (exact float inputs), with digits added until x keeps 20 of them."""
    import mpmath

    mag_digits = math.ceil(math.log10(magnitude))
    dps = 40 + mag_digits
    for _ in range(8):
        with mpmath.workdps(dps):
            e, m = mpmath.mpf(eps), mpmath.mpf(mu)
            la = mpmath.log(mpmath.ncdf(-e / m + m / 2))
            x = e + mpmath.log(mpmath.ncdf(-e / m - m / 2)) - la
            good = x < 0 and -x > mpmath.mpf(10) ** (mag_digits - dps + 20)
            if good:
                return float(la + mpmath.log(-mpmath.expm1(x)))
            dps = 2 * dps if x >= 0 else dps + int(math.ceil(float(-mpmath.log10(-x)))) + 30
    raise RuntimeError("internal: the Gaussian privacy profile did not resolve in extended precision")


def gdp_delta(eps: float, mu: float) -> float:
    """Tight delta(eps) of a mu-GDP mechanism (may underflow to 0; use :func:`gdp_log_delta`)."""
    return math.exp(gdp_log_delta(eps, mu))


def gdp_epsilon(mu: float, delta: float | None = None, *, log_delta: float | None = None) -> float:
    """Smallest eps >= 0 with delta_mu(eps) <= delta, by root finding on the log profile."""
    mu = check_nonnegative("mu", mu)
    ld = resolve_log_delta(delta, log_delta)
    if mu == 0.0 or gdp_log_delta(0.0, mu) <= ld:
        return 0.0
    lo, hi = 0.0, max(1.0, mu * mu)
    if math.isinf(hi):  # mu > ~1e154: eps ~ mu^2/2 is beyond float64 (inf is the safe side)
        return math.inf
    while gdp_log_delta(hi, mu) > ld:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return math.inf
    e = float(optimize.brentq(lambda e: gdp_log_delta(e, mu) - ld, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500))
    return nudge(e, lambda x: gdp_log_delta(x, mu) <= ld, up=True)


def gdp_mu(eps: float, delta: float | None = None, *, log_delta: float | None = None) -> float:
    """Largest mu such that mu-GDP implies (eps, delta)-DP (exact inverse of the Gaussian profile).

    delta_mu(eps) is increasing in mu, so this is a 1-D root find (in log mu, on log delta).
    """
    eps = check_nonnegative("eps", eps)
    ld = resolve_log_delta(delta, log_delta)
    f = lambda lm: gdp_log_delta(eps, math.exp(lm)) - ld  # noqa: E731
    lo, hi = -1.0, 1.0
    while f(lo) > 0:
        lo -= 2.0
        if lo < -700:
            return 0.0
    # delta_mu(eps) -> 1 > delta as mu -> inf, and mu* <= ~sqrt(2 eps) + 2 sqrt(log(1/delta)), so the
    # loop ends by hi ~ 356 for every finite eps (returning inf here would over-report mu)
    while f(hi) < 0:
        hi += 1.0
    mu = math.exp(float(optimize.brentq(f, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500)))
    return nudge(mu, lambda x: gdp_log_delta(eps, x) <= ld, up=False)


def gdp_tradeoff(alpha: Any, mu: float) -> np.ndarray:
    """Gaussian trade-off function G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu) (type-II error)."""
    mu = check_nonnegative("mu", mu)
    a = np.asarray(alpha, dtype=np.float64)
    if not np.all((a >= 0) & (a <= 1)):  # also refuses NaN
        raise ValueError("alpha (type-I error) must lie in [0, 1]")
    return special.ndtr(special.ndtri(1.0 - a) - mu)


# ---------------------------------------------------------------------------------------------
# RDP -> (eps, delta)
# ---------------------------------------------------------------------------------------------
#
# The conversion is the one dp-accounting uses in ``dp_accounting.rdp.compute_epsilon`` /
# ``compute_delta`` (Canonne, Kamath, Steinke 2020, arXiv 2004.00010 Prop. 12; Asoodeh et al.
# 2020, arXiv 2001.05990 eq. (20)), together with its KL shortcut delta <= sqrt(1 - e^{-R}).
# dp-accounting takes delta as a float, so deltas below ~1e-300 (purification uses
# log delta ~ -3000) cannot be passed to it; these functions evaluate the same expressions with
# log(delta) as input. tests/privacy/test_events.py checks them against dp-accounting wherever
# delta is representable, and the accountant also runs dp-accounting itself as one of its routes.


def rdp_epsilon(orders: Any, values: Any, delta: float | None = None, *, log_delta: float | None = None) -> tuple[float, float]:
    """(eps, optimal order) from an RDP curve, minimised over the given orders.

    Same bound as ``dp_accounting.rdp.compute_epsilon`` but with ``log_delta`` accepted.
    """
    a = check_orders("orders", orders)
    r = _check_curve_values(values, a)
    ld = resolve_log_delta(delta, log_delta)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # KL shortcut: delta^2 >= 1 - e^{-r}  =>  eps = 0
        kl_ok = 2.0 * ld >= np.where(r > 0, np.log(-np.expm1(-r)), -np.inf)
        eps = r + np.log1p(-1.0 / a) - (ld + np.log(a)) / (a - 1.0)
    eps = np.where(np.isfinite(r), eps, np.inf)
    eps = np.where(kl_ok, 0.0, eps)
    i = int(np.argmin(eps))
    return max(0.0, float(eps[i])), float(a[i])


def rdp_log_delta(orders: Any, values: Any, eps: float) -> tuple[float, float]:
    """(log delta, optimal order) from an RDP curve at ``eps``; as ``compute_delta`` but in log space."""
    a = check_orders("orders", orders)
    r = _check_curve_values(values, a)
    eps = check_nonnegative("eps", eps)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        kl = np.where(r > 0, 0.5 * np.log(-np.expm1(-r)), -np.inf)
        cks = (a - 1.0) * (r - eps + np.log1p(-1.0 / a)) - np.log(a)
    ld = np.minimum(kl, cks)
    ld = np.where(np.isfinite(r), ld, 0.0)
    ld = np.minimum(ld, 0.0)
    i = int(np.argmin(ld))
    return float(ld[i]), float(a[i])


# orders searched for a linear curve: alpha - 1 = e^u in [1e-12, e^700]. Below, alpha = 1 + e^u rounds to 1
# (log1p(-1/alpha) fails: linear_rdp_epsilon crashed for rho / log(1/delta) > ~1e25); above, e^u overflows
# (linear_rdp_log_delta crashed for eps / rho > ~e^703). Every order gives a valid bound.
_U_MIN, _U_MAX = math.log(1e-12), 700.0


def _cks_eps_linear(u: float, rho: float, ld: float) -> float:
    a = 1.0 + math.exp(u)
    return rho * a + math.log1p(-1.0 / a) - (ld + math.log(a)) / (a - 1.0)


def linear_rdp_epsilon(rho: float, delta: float | None = None, *, log_delta: float | None = None) -> tuple[float, float]:
    """(eps, optimal order) for the linear curve ``rho * alpha``, optimised over continuous alpha.

    Scalar search over u = log(alpha - 1) of the dp-accounting (CKS Prop. 12) expression, so no
    order grid loosens the bound (anchors-dp §1.4). Also applies the KL shortcut.
    """
    rho = check_nonnegative("rho", rho)
    ld = resolve_log_delta(delta, log_delta)
    if rho == 0.0:
        return 0.0, math.inf
    if 2.0 * ld >= _log1mexp(-rho):  # KL <= rho (alpha -> 1), delta >= sqrt(1 - e^-KL)
        return 0.0, 1.0
    # Mironov's optimum alpha* = 1 + sqrt(log(1/delta)/rho) is a good starting bracket.
    u0 = 0.5 * (math.log(-ld) - math.log(rho))
    grid = np.unique(np.clip(u0 + np.linspace(-8.0, 8.0, 321), _U_MIN, _U_MAX))
    vals = np.array([_cks_eps_linear(u, rho, ld) for u in grid])
    j = int(np.argmin(vals))
    lo, hi = grid[max(j - 1, 0)], grid[min(j + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(lambda u: _cks_eps_linear(u, rho, ld), bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-12})
    best_u, best = (float(res.x), float(res.fun)) if res.fun <= vals[j] else (float(grid[j]), float(vals[j]))
    return max(0.0, best), 1.0 + math.exp(best_u)


def linear_rdp_log_delta(rho: float, eps: float) -> tuple[float, float]:
    """(log delta, optimal order) for the linear curve ``rho * alpha`` at ``eps`` (continuous alpha)."""
    rho = check_nonnegative("rho", rho)
    eps = check_nonnegative("eps", eps)
    if rho == 0.0:
        return -math.inf, math.inf
    kl = 0.5 * _log1mexp(-rho)

    def f(u: float) -> float:
        a = 1.0 + math.exp(u)
        return (a - 1.0) * (rho * a - eps + math.log1p(-1.0 / a)) - math.log(a)

    # f is convex in alpha (f'(alpha) = rho (2 alpha - 1) - eps + log(1 - 1/alpha) increases), with its
    # minimum at alpha - 1 <= eps/(2 rho) + 1/sqrt(2 rho). Near alpha - 1 ~ eps/(2 rho) (the Mironov
    # form's optimum) a fine grid; near eps = 0 the optimum is at alpha ~ 1/sqrt(2 rho), so a wide grid
    # up to e^4/sqrt(rho) (at least 1e7; the old fixed end 1e7 missed it for rho < ~1e-14: delta 14%
    # loose at rho = 1e-16). alpha - 1 >= 1e-12 keeps alpha > 1 representable (at eps = 0 the old grid
    # reached alpha == 1.0: log1p(-1) failed).
    u0 = math.log(max(eps / (2.0 * rho), 1e-12))
    wide = np.linspace(_U_MIN, max(math.log(1e7), 4.0 - 0.5 * math.log(rho)), 241)
    grid = np.unique(np.clip(np.concatenate([u0 + np.linspace(-10.0, 6.0, 321), wide]), _U_MIN, _U_MAX))
    vals = np.array([f(u) for u in grid])
    j = int(np.argmin(vals))
    lo, hi = grid[max(j - 1, 0)], grid[min(j + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
    best_u, best = (float(res.x), float(res.fun)) if res.fun <= vals[j] else (float(grid[j]), float(vals[j]))
    if kl <= best:
        return min(kl, 0.0), 1.0
    return min(best, 0.0), 1.0 + math.exp(best_u)


def linear_rdp_rho(eps: float, delta: float | None = None, *, log_delta: float | None = None) -> float:
    """Largest rho such that the linear curve rho*alpha converts (continuous CKS) to (eps, delta)."""
    eps = check_epsilon(eps)
    ld = resolve_log_delta(delta, log_delta)
    f = lambda lr: linear_rdp_epsilon(math.exp(lr), log_delta=ld)[0] - eps  # noqa: E731
    # Mironov's closed form is a valid (smaller) answer: start the bracket there.
    r0 = zcdp_rho_for_epsilon_mironov(eps, log_delta=ld)
    lo, hi = math.log(r0), math.log(r0) + 1.0
    while f(hi) < 0:
        hi += 1.0
    if f(lo) > 0:  # cannot happen (CKS <= Mironov), guard anyway
        while f(lo) > 0:
            lo -= 1.0
    rho = math.exp(float(optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-15, maxiter=500)))
    return nudge(rho, lambda x: linear_rdp_epsilon(x, log_delta=ld)[0] <= eps, up=False)


def zcdp_epsilon_mironov(rho: float, delta: float | None = None, *, log_delta: float | None = None) -> float:
    """Mironov (2017, Prop. 3) closed form for a linear curve: ``rho + 2 sqrt(rho log(1/delta))``."""
    rho = check_nonnegative("rho", rho)
    ld = resolve_log_delta(delta, log_delta)
    return rho + 2.0 * math.sqrt(rho * (-ld))


def zcdp_rho_for_epsilon_mironov(eps: float, delta: float | None = None, *, log_delta: float | None = None) -> float:
    """Inverse of :func:`zcdp_epsilon_mironov`: ``(sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2``."""
    eps = check_epsilon(eps)
    b = -resolve_log_delta(delta, log_delta)
    # eps / (sqrt(b + eps) + sqrt(b)) avoids cancellation
    return (eps / (math.sqrt(b + eps) + math.sqrt(b))) ** 2


#: relative upward rounding of :func:`pure_dp_rdp` (its float error is a few 1e-16)
_SAFE_SIDE_REL = 4e-15


def pure_dp_rdp(eps: float, alpha: Any) -> np.ndarray:
    """Exact RDP envelope of a generic eps-DP mechanism.

    Any pair of eps-indistinguishable distributions is a post-processing of binary randomized
    response with parameter eps (Kairouz, Oh, Viswanath 2015, Thm 2.1 / its trade-off form in
    Dong-Roth-Su Prop. 2.5 + Blackwell), so by data processing
    ``D_alpha <= 1/(alpha-1) log((e^{alpha eps} + e^{(1-alpha) eps}) / (1 + e^eps))``,
    which equals Bun & Steinke (2016, Prop. 3.3)'s
    ``1/(alpha-1) log((sinh(alpha eps) - sinh((alpha-1) eps)) / sinh(eps))``.
    It is <= min(eps, alpha eps^2 / 2) (Bun-Steinke Prop. 3.3 / the trivial D_inf bound).
    """
    eps = check_nonnegative("eps", eps)
    a = check_alpha(alpha)
    if eps == 0.0:
        return np.zeros_like(a)
    # log((e^{a eps} + e^{(1-a) eps}) / (1 + e^eps)) = log(cosh(x) / cosh(y)) with x = (a - 1/2) eps,
    # y = eps / 2. Evaluated as a difference of two logaddexp's it cancels catastrophically for
    # small eps or a near 1 (eps = 1e-6, a = 1.001 came out 11% low; eps <= 1e-7 gave 0: an
    # under-report). cosh x - cosh y = 2 sinh((x+y)/2) sinh((x-y)/2) has no cancellation; for large
    # x, log cosh x = x + log1p(e^{-2x}) - log 2 on both sides.
    x, y = (a - 0.5) * eps, 0.5 * eps
    with np.errstate(over="ignore", invalid="ignore"):
        small = np.log1p(2.0 * np.sinh(0.5 * a * eps) * np.sinh(0.5 * (a - 1.0) * eps) / np.cosh(y))
        large = (a - 1.0) * eps + np.log1p(np.exp(-2.0 * x)) - np.log1p(np.exp(-2.0 * y))
    num = np.where(x <= 300.0, small, large)
    # float rounding leaves the quotient up to a few ulps BELOW the exact value (eps = 301,
    # alpha = 1.01: 2e-15 relative): round up by 4e-15 relative so the report is never below the
    # exact envelope (tests/privacy/test_conversions_pure_dp_rdp.py, mpmath at 80 digits, eps <= 1e4);
    # then cap by the valid envelopes eps (exact) and alpha eps^2 / 2 (itself rounded up)
    out = num / (a - 1.0) * (1.0 + _SAFE_SIDE_REL)
    return np.clip(np.minimum(out, np.minimum(eps, a * eps * eps / 2.0 * (1.0 + _SAFE_SIDE_REL))), 0.0, None)


def tv_delta_slack(eps: float, tv_error: float) -> float:
    """Extra delta ``(1 + e^eps) * tau`` paid by a sampler within TV ``tau`` of a private target."""
    eps = check_nonnegative("eps", eps)
    tv = check_nonnegative("tv_error", tv_error)
    if tv == 0.0:
        return 0.0
    return float(tv * (1.0 + math.exp(eps))) if eps < 700 else math.inf
