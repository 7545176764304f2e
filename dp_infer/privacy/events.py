"""Privacy events: immutable records of one mechanism's guarantee, plus their conversions.

An event says *what kind* of guarantee a mechanism has; the :class:`~dp_infer.privacy.accountant.Accountant`
composes events and converts the result to (eps, delta). All arithmetic is float64 on the host,
in log space wherever delta can be tiny.

Event kinds
-----------
``GdpEvent(mu)``
    mu-Gaussian DP (Dong, Roth, Su 2019/2022): the trade-off curve dominates that of
    ``N(0,1)`` vs ``N(mu,1)``. Exact (eps, delta) via the Gaussian privacy profile
    ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle & Wang 2018, eq. (6)).
    Composition (adaptive): ``mu = sqrt(sum mu_i^2)``. RDP curve ``alpha mu^2 / 2``.
    dp-accounting counterpart: ``GaussianDpEvent(noise_multiplier=1/mu)``.
``ZcdpEvent(rho)``
    linear RDP curve ``alpha -> rho * alpha`` for all alpha > 1 (rho-zCDP, Bun & Steinke 2016).
    dp-accounting counterpart: ``ZCDpEvent(rho)`` (RDP accountant only: its PLD accountant
    rejects it).
``RdpCurveEvent(orders, values)``
    an arbitrary RDP curve known on a grid of orders. Renyi divergence is non-decreasing in the
    order (van Erven & Harremoes 2014, Thm 3), so between grid points the curve is bounded by the
    value at the next grid order up; above the largest grid order it is unknown (+inf).
``PureDpEvent(epsilon)``
    pure eps-DP. Never logged as ``LaplaceDpEvent`` (Laplace composes more tightly than a generic
    eps-DP mechanism; that would under-report). Composes by basic composition, by the generic
    pure-DP PLD ``from_privacy_parameters(DifferentialPrivacyParameters(eps, 0))``, or through its
    exact RDP envelope (randomized response, see :func:`pure_dp_rdp`).
``ApproxDpEvent(epsilon, delta)``
    an (eps, delta)-DP guarantee with no finer structure; composes through the generic
    (eps, delta) PLD or by basic composition.

Every event also carries ``tv_error``: the total-variation distance between the mechanism
actually run and the ideal mechanism the guarantee is about (e.g. a sampler that is only
tau-close to its Gibbs target). It is *not* folded into delta here; the accountant adds
``(1 + e^eps) * tau`` on top of the ideal privacy delta and reports both parts separately
(seed-002 digest §3.6; seed-001 digest §4.8: ``A(S) <= pi(S) + tau <= e^eps pi'(S) + delta + tau
<= e^eps A'(S) + delta + (1 + e^eps) tau``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
from scipy import optimize, special

from .._validation import (
    check_delta,
    check_epsilon,
    check_nonnegative,
    check_positive,
)

__all__ = [
    "PrivacyEvent",
    "GdpEvent",
    "ZcdpEvent",
    "RdpCurveEvent",
    "PureDpEvent",
    "ApproxDpEvent",
    "event_from_dict",
    "gaussian_mechanism_event",
    "laplace_mechanism_event",
    # conversions
    "gdp_log_delta",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gdp_tradeoff",
    "zcdp_epsilon_mironov",
    "zcdp_rho_for_epsilon_mironov",
    "rdp_epsilon",
    "rdp_log_delta",
    "linear_rdp_epsilon",
    "linear_rdp_log_delta",
    "linear_rdp_rho",
    "pure_dp_rdp",
    "tv_delta_slack",
    "resolve_log_delta",
]

_LOG_TINY = math.log(1e-300)  # below this a delta is passed around as a log only


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


def _nudge(x: float, ok, *, up: bool) -> float:
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


def _check_orders(name: str, orders: Any) -> np.ndarray:
    a = np.asarray(orders, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of Renyi orders, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a <= 1.0):
        raise ValueError(f"{name} must be finite Renyi orders in (1, inf)")
    if np.any(np.diff(a) <= 0):
        raise ValueError(f"{name} must be strictly increasing")
    return a


def _check_alpha(alpha: Any) -> np.ndarray:
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
    ``log Phi(a) + log(1 - exp(eps + log Phi(b) - log Phi(a)))`` with ``log_ndtr``.
    """
    eps = check_nonnegative("eps", eps)
    mu = check_nonnegative("mu", mu)
    if mu == 0.0:
        return -math.inf
    a = -eps / mu + mu / 2.0
    b = -eps / mu - mu / 2.0
    la = float(special.log_ndtr(a))
    lb = float(special.log_ndtr(b))
    x = eps + lb - la
    if x >= 0.0:  # only by rounding when delta is ~0 relative to Phi(a)
        return -math.inf
    return la + _log1mexp(x)


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
    while gdp_log_delta(hi, mu) > ld:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return math.inf
    e = float(optimize.brentq(lambda e: gdp_log_delta(e, mu) - ld, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500))
    return _nudge(e, lambda x: gdp_log_delta(x, mu) <= ld, up=True)


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
    while f(hi) < 0:
        hi += 1.0
        if hi > 50:
            return math.inf
    mu = math.exp(float(optimize.brentq(f, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500)))
    return _nudge(mu, lambda x: gdp_log_delta(eps, x) <= ld, up=False)


def gdp_tradeoff(alpha: Any, mu: float) -> np.ndarray:
    """Gaussian trade-off function G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu) (type-II error)."""
    mu = check_nonnegative("mu", mu)
    a = np.asarray(alpha, dtype=np.float64)
    if np.any((a < 0) | (a > 1)):
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
# log(delta) as input. tests/test_privacy_events.py checks them against dp-accounting wherever
# delta is representable, and the accountant also runs dp-accounting itself as one of its routes.


def rdp_epsilon(orders: Any, values: Any, delta: float | None = None, *, log_delta: float | None = None) -> tuple[float, float]:
    """(eps, optimal order) from an RDP curve, minimised over the given orders.

    Same bound as ``dp_accounting.rdp.compute_epsilon`` but with ``log_delta`` accepted.
    """
    a = _check_orders("orders", orders)
    r = np.asarray(values, dtype=np.float64)
    if r.shape != a.shape:
        raise ValueError(f"values must have the same shape as orders, got {r.shape} and {a.shape}")
    if np.any(np.isnan(r)) or np.any(r < 0):
        raise ValueError("values (RDP) must be >= 0 (inf allowed)")
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
    a = _check_orders("orders", orders)
    r = np.asarray(values, dtype=np.float64)
    if r.shape != a.shape:
        raise ValueError(f"values must have the same shape as orders, got {r.shape} and {a.shape}")
    if np.any(np.isnan(r)) or np.any(r < 0):
        raise ValueError("values (RDP) must be >= 0 (inf allowed)")
    eps = check_nonnegative("eps", eps)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        kl = np.where(r > 0, 0.5 * np.log(-np.expm1(-r)), -np.inf)
        cks = (a - 1.0) * (r - eps + np.log1p(-1.0 / a)) - np.log(a)
    ld = np.minimum(kl, cks)
    ld = np.where(np.isfinite(r), ld, 0.0)
    ld = np.minimum(ld, 0.0)
    i = int(np.argmin(ld))
    return float(ld[i]), float(a[i])


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
    grid = u0 + np.linspace(-8.0, 8.0, 321)
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

    # unconstrained optimum of the Mironov form: alpha - 1 ~ eps/(2 rho); near eps = 0 the CKS
    # optimum is elsewhere (alpha ~ 1/sqrt(rho)), so a wide grid is searched too. alpha - 1 >= 1e-12
    # keeps alpha > 1 representable (at eps = 0 the old grid reached alpha == 1.0: log1p(-1) failed).
    u0 = math.log(max(eps / (2.0 * rho), 1e-12))
    wide = np.linspace(math.log(1e-12), math.log(1e7), 241)
    grid = np.unique(np.maximum(np.concatenate([u0 + np.linspace(-10.0, 6.0, 321), wide]), math.log(1e-12)))
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
    return _nudge(rho, lambda x: linear_rdp_epsilon(x, log_delta=ld)[0] <= eps, up=False)


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
    a = _check_alpha(alpha)
    if eps == 0.0:
        return np.zeros_like(a)
    num = np.logaddexp(a * eps, (1.0 - a) * eps) - np.logaddexp(0.0, eps)
    out = num / (a - 1.0)
    # guard rounding near alpha -> 1: never exceed the valid envelopes
    return np.clip(np.minimum(out, np.minimum(eps, a * eps * eps / 2.0)), 0.0, None)


def tv_delta_slack(eps: float, tv_error: float) -> float:
    """Extra delta ``(1 + e^eps) * tau`` paid by a sampler within TV ``tau`` of a private target."""
    eps = check_nonnegative("eps", eps)
    tv = check_nonnegative("tv_error", tv_error)
    if tv == 0.0:
        return 0.0
    return float(tv * (1.0 + math.exp(eps))) if eps < 700 else math.inf


# ---------------------------------------------------------------------------------------------
# events
# ---------------------------------------------------------------------------------------------


def _freeze_meta(meta: Mapping | None) -> Mapping:
    return MappingProxyType(dict(meta or {}))


def _json_float(x: float) -> float | str:
    x = float(x)
    if math.isnan(x):
        raise ValueError("NaN cannot be serialised in a privacy event")
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _from_json_float(x: Any) -> float:
    if isinstance(x, str):
        return float(x)
    return float(x)


@dataclass(frozen=True)
class PrivacyEvent:
    """Base class of an immutable privacy event.

    Attributes common to all kinds:
      label        short human-readable name (e.g. ``"langevin_path"``);
      assumptions  the exact conditions under which the guarantee holds (strings);
      tv_error     TV distance of the mechanism actually run from the ideal one (>= 0);
      metadata     plain JSON-able parameters (beta, time, sensitivity, ...), read-only.
    """

    kind: ClassVar[str] = "base"
    label: str = field(default="", kw_only=True)
    assumptions: tuple[str, ...] = field(default=(), kw_only=True)
    tv_error: float = field(default=0.0, kw_only=True)
    metadata: Mapping = field(default_factory=dict, kw_only=True, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "tv_error", check_nonnegative("tv_error", self.tv_error))
        if self.tv_error >= 1.0:
            raise ValueError(f"tv_error must lie in [0, 1), got {self.tv_error!r}")
        if not isinstance(self.label, str):
            raise ValueError(f"label must be a string, got {self.label!r}")
        object.__setattr__(self, "assumptions", tuple(str(a) for a in self.assumptions))
        object.__setattr__(self, "metadata", _freeze_meta(self.metadata))

    # -- RDP representation (None if the kind has none) --
    def rdp(self, alpha: Any) -> np.ndarray | None:
        return None

    def to_dp_accounting(self):
        """The dp-accounting DpEvent with the same guarantee, or None if it has none."""
        return None

    def _payload(self) -> dict:
        return {}

    def to_dict(self) -> dict:
        """Plain JSON-serialisable dict (``event_from_dict`` inverts it)."""
        d = {"kind": self.kind, **self._payload(), "label": self.label,
             "assumptions": list(self.assumptions), "tv_error": _json_float(self.tv_error),
             "metadata": _jsonable(dict(self.metadata))}
        return d

    def _common_kwargs(self) -> dict:
        return {"label": self.label, "assumptions": self.assumptions, "tv_error": self.tv_error,
                "metadata": dict(self.metadata)}

    def epsilon_at(self, delta: float | None = None, *, log_delta: float | None = None) -> float:
        """eps at ``delta`` for this event alone (TV slack included)."""
        from .accountant import Accountant

        return Accountant([self]).get_epsilon(delta, log_delta=log_delta)

    def delta_at(self, eps: float) -> float:
        """delta at ``eps`` for this event alone (privacy delta + TV slack)."""
        from .accountant import Accountant

        return Accountant([self]).get_delta(eps)


@dataclass(frozen=True)
class GdpEvent(PrivacyEvent):
    """mu-Gaussian differential privacy."""

    kind: ClassVar[str] = "gdp"
    mu: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "mu", check_nonnegative("mu", self.mu))

    def rdp(self, alpha):
        return _check_alpha(alpha) * (self.mu**2 / 2.0)

    def to_dp_accounting(self):
        import dp_accounting

        if self.mu == 0.0:
            return dp_accounting.NoOpDpEvent()
        return dp_accounting.GaussianDpEvent(noise_multiplier=1.0 / self.mu)

    def _payload(self):
        return {"mu": _json_float(self.mu)}


@dataclass(frozen=True)
class ZcdpEvent(PrivacyEvent):
    """Linear RDP curve alpha -> rho * alpha (rho-zCDP)."""

    kind: ClassVar[str] = "zcdp"
    rho: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "rho", check_nonnegative("rho", self.rho))

    def rdp(self, alpha):
        return _check_alpha(alpha) * self.rho

    def to_dp_accounting(self):
        import dp_accounting

        return dp_accounting.ZCDpEvent(rho=self.rho)

    def _payload(self):
        return {"rho": _json_float(self.rho)}


@dataclass(frozen=True)
class RdpCurveEvent(PrivacyEvent):
    """RDP curve known on a grid of orders (non-decreasing step envelope between grid points)."""

    kind: ClassVar[str] = "rdp"
    orders: tuple[float, ...] = ()
    values: tuple[float, ...] = ()

    def __post_init__(self):
        super().__post_init__()
        a = _check_orders("orders", self.orders)
        v = np.asarray(self.values, dtype=np.float64)
        if v.shape != a.shape:
            raise ValueError(f"values must have the same length as orders, got {v.shape} and {a.shape}")
        if np.any(np.isnan(v)) or np.any(v < 0):
            raise ValueError("values (RDP) must be >= 0 (inf allowed)")
        # enforce monotonicity (a valid curve is non-decreasing; take the running max so that the
        # step envelope is an upper bound even if a caller passed a slightly non-monotone curve)
        v = np.maximum.accumulate(v)
        object.__setattr__(self, "orders", tuple(float(x) for x in a))
        object.__setattr__(self, "values", tuple(float(x) for x in v))

    def rdp(self, alpha):
        al = _check_alpha(alpha)
        a = np.asarray(self.orders)
        v = np.asarray(self.values)
        idx = np.searchsorted(a, al, side="left")  # first grid order >= alpha
        out = np.full(al.shape, np.inf)
        ok = idx < a.size
        out[ok] = v[idx[ok]]
        return out

    def to_dp_accounting(self):
        return None  # dp-accounting has no custom-curve event; use rdp.compute_epsilon

    def _payload(self):
        return {"orders": [_json_float(x) for x in self.orders], "values": [_json_float(x) for x in self.values]}


@dataclass(frozen=True)
class PureDpEvent(PrivacyEvent):
    """Pure eps-DP (a generic eps-DP mechanism; never treated as Laplace)."""

    kind: ClassVar[str] = "pure"
    epsilon: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "epsilon", check_nonnegative("epsilon", self.epsilon))

    def rdp(self, alpha):
        return pure_dp_rdp(self.epsilon, alpha)

    def to_dp_accounting(self):
        return None  # deliberately NOT LaplaceDpEvent (would under-report); see accountant PLD route

    def _payload(self):
        return {"epsilon": _json_float(self.epsilon)}


@dataclass(frozen=True)
class ApproxDpEvent(PrivacyEvent):
    """A generic (eps, delta)-DP guarantee."""

    kind: ClassVar[str] = "approx"
    epsilon: float = 0.0
    delta: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "epsilon", check_nonnegative("epsilon", self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta, "delta", allow_zero=True))

    def _payload(self):
        return {"epsilon": _json_float(self.epsilon), "delta": _json_float(self.delta)}


_KINDS = {cls.kind: cls for cls in (GdpEvent, ZcdpEvent, RdpCurveEvent, PureDpEvent, ApproxDpEvent)}


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_jsonable(v) for v in x.tolist()]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return _json_float(float(x))
    if x is None or isinstance(x, str):
        return x
    return str(x)


def event_from_dict(d: Mapping) -> PrivacyEvent:
    """Rebuild an event from :meth:`PrivacyEvent.to_dict` output."""
    if not isinstance(d, Mapping) or "kind" not in d:
        raise ValueError("event dict must be a mapping with a 'kind' key")
    kind = d["kind"]
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {sorted(_KINDS)}, got {kind!r}")
    common = {
        "label": d.get("label", ""),
        "assumptions": tuple(d.get("assumptions", ())),
        "tv_error": _from_json_float(d.get("tv_error", 0.0)),
        "metadata": dict(d.get("metadata", {})),
    }
    if kind == "gdp":
        return GdpEvent(mu=_from_json_float(d["mu"]), **common)
    if kind == "zcdp":
        return ZcdpEvent(rho=_from_json_float(d["rho"]), **common)
    if kind == "rdp":
        return RdpCurveEvent(orders=tuple(_from_json_float(x) for x in d["orders"]),
                             values=tuple(_from_json_float(x) for x in d["values"]), **common)
    if kind == "pure":
        return PureDpEvent(epsilon=_from_json_float(d["epsilon"]), **common)
    return ApproxDpEvent(epsilon=_from_json_float(d["epsilon"]), delta=_from_json_float(d["delta"]), **common)


# ---------------------------------------------------------------------------------------------
# convenience constructors for statistics released on private data
# ---------------------------------------------------------------------------------------------


def gaussian_mechanism_event(sensitivity: float, sigma: float, *, label: str = "gaussian_statistic",
                             assumptions: Sequence[str] = ()) -> GdpEvent:
    """A statistic with l2-sensitivity ``sensitivity`` plus N(0, sigma^2 I) noise: (sensitivity/sigma)-GDP."""
    s = check_nonnegative("sensitivity", sensitivity)
    sig = check_positive("sigma", sigma)
    return GdpEvent(mu=s / sig, label=label,
                    assumptions=("l2 sensitivity of the statistic <= %g under the library's adjacency" % s, *assumptions),
                    metadata={"sensitivity": s, "sigma": sig})


def laplace_mechanism_event(l1_sensitivity: float, scale: float, *, label: str = "laplace_statistic",
                            assumptions: Sequence[str] = ()) -> PureDpEvent:
    """A statistic with l1-sensitivity ``l1_sensitivity`` plus Laplace(scale) noise: eps = l1/scale.

    Logged as a *generic* pure-eps event (composes no better than any eps-DP mechanism), which is
    conservative for Laplace.
    """
    s = check_nonnegative("l1_sensitivity", l1_sensitivity)
    b = check_positive("scale", scale)
    return PureDpEvent(epsilon=s / b, label=label,
                       assumptions=("l1 sensitivity of the statistic <= %g under the library's adjacency" % s, *assumptions),
                       metadata={"l1_sensitivity": s, "scale": b})
