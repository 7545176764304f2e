"""Exact privacy of the Generalized Gaussian mechanism: dp-accounting PLD and quadrature RDP.

See :mod:`dp_infer.mechanisms.generalized_gaussian` for the mechanism, the worst-case argument
(all coordinates shifted by the sensitivity) and the calibration that uses these functions.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as _pldlib
from dp_accounting.pld import privacy_loss_mechanism as _plm
from scipy import integrate, special

from .._validation import check_delta, check_positive, check_positive_int
from ..privacy.events import ApproxDpEvent, RdpCurveEvent

__all__ = [
    "check_shape",
    "GeneralizedGaussianPrivacyLoss",
    "gg_pld",
    "gg_delta",
    "gg_epsilon",
    "gg_rdp",
    "gg_rdp_event",
    "gg_approx_event",
    "DEFAULT_RDP_ORDERS_GG",
    "EVENT_DELTA_SLACK",
]

#: orders used for the GG RDP curve (the event's step envelope is conservative between them)
DEFAULT_RDP_ORDERS_GG = tuple(float(a) for a in np.unique(np.concatenate(
    [1.0 + np.geomspace(1e-3, 1.0, 25), np.geomspace(2.05, 1e3, 70)])))

_P_MAX = 32.0
_PLD_MARGIN = 1e-6   # relative safety margin on PLD deltas (floating-point summation; as the accountant)
_RDP_MARGIN = 1e-9   # relative margin on quadrature RDP values
#: an (eps, delta) event is issued at delta (1 - EVENT_DELTA_SLACK), see gg_approx_event
EVENT_DELTA_SLACK = 1e-9


def check_shape(p: Any) -> float:
    """The GG shape p: a number in [1, 32] (log-concave noise; |x|^p stays in float64 range)."""
    try:
        v = float(p)
    except (TypeError, ValueError):
        raise ValueError(f"p (Generalized Gaussian shape) must be a number in [1, {_P_MAX:g}], got {p!r}") from None
    if not (1.0 <= v <= _P_MAX):
        raise ValueError(f"p (Generalized Gaussian shape) must lie in [1, {_P_MAX:g}], got {p!r}")
    return v


# ---------------------------------------------------------------------------------------------
# privacy loss distribution (dp-accounting)
# ---------------------------------------------------------------------------------------------


def _log_gammaincc(a: float, t) -> np.ndarray:
    """log Q(a, t) (regularised upper incomplete gamma), accurate where Q underflows.

    scipy's ``gammaincc`` for t < 100; beyond, the asymptotic series
    ``Gamma(a, t) = t^{a-1} e^{-t} sum_j (a-1)...(a-j) / t^j`` (16 terms; for 0 < a <= 1 the terms
    alternate and shrink by a factor < j / t, so the truncation error is below 1e-20 relative).
    """
    t = np.asarray(t, dtype=np.float64)
    out = np.empty_like(t)
    small = t < 100.0
    with np.errstate(divide="ignore"):
        out[small] = np.log(special.gammaincc(a, t[small]))
    tb = t[~small]
    if tb.size:
        term = np.ones_like(tb)
        series = np.ones_like(tb)
        for j in range(1, 17):
            term = term * (a - j) / tb
            series = series + term
        out[~small] = (a - 1.0) * np.log(tb) - tb - special.gammaln(a) + np.log(series)
    return out


class GeneralizedGaussianPrivacyLoss(_plm.AdditiveNoisePrivacyLoss):
    """dp-accounting privacy loss of the 1-D GG mechanism with shift ``sensitivity``.

    REMOVE convention of dp-accounting: mu_upper = GG(.+s), mu_lower = GG; the loss
    ``(|x|^p - |x + s|^p) / sigma^p`` is non-increasing in x (p >= 1). By the symmetry of the noise
    the pair in the other direction has the same privacy loss distribution. Tails beyond noise mass
    ``exp(log_mass_truncation_bound)`` are sent to +inf loss (pessimistic), as dp-accounting does
    for the Gaussian.
    """

    def __init__(self, p: float, sigma: float, sensitivity: float = 1.0, log_mass_truncation_bound: float = -50.0):
        self.p = check_shape(p)
        self.sigma = check_positive("sigma", sigma)
        if not (log_mass_truncation_bound <= 0):
            raise ValueError(f"log_mass_truncation_bound must lie in (-inf, 0], got {log_mass_truncation_bound!r}")
        self._lmtb = float(log_mass_truncation_bound)
        super().__init__(check_positive("sensitivity", sensitivity), False, 1.0, _plm.AdjacencyType.REMOVE)

    @classmethod
    def from_privacy_guarantee(cls, *args, **kwargs):  # noqa: D401 - not used (calibration is ours)
        raise NotImplementedError("use dp_infer.mechanisms.calibrate_gg_sigma")

    # -- noise law
    def _tail(self, x):
        """P(noise <= -|x|) = 0.5 * Q(1/p, |x/sigma|^p)."""
        return 0.5 * special.gammaincc(1.0 / self.p, np.abs(np.asarray(x, dtype=np.float64) / self.sigma) ** self.p)

    def noise_cdf(self, x):
        x = np.asarray(x, dtype=np.float64)
        t = self._tail(x)
        out = np.where(x < 0, t, 1.0 - t)
        return float(out) if out.ndim == 0 else out

    def noise_log_cdf(self, x):
        x = np.asarray(x, dtype=np.float64)
        t = np.abs(x / self.sigma) ** self.p
        log_tail = math.log(0.5) + _log_gammaincc(1.0 / self.p, t)   # log P(noise <= -|x|), no underflow
        out = np.where(x < 0, log_tail, np.log1p(-np.exp(log_tail)))
        return float(out) if out.ndim == 0 else out

    def _lower_quantile(self, mass: float) -> float:
        """x < 0 with P(noise <= x) = mass (mass < 1/2)."""
        t = special.gammainccinv(1.0 / self.p, 2.0 * mass)
        return -self.sigma * t ** (1.0 / self.p)

    # -- privacy loss
    def _loss_vec(self, x):
        x = np.asarray(x, dtype=np.float64)
        return (np.abs(x) ** self.p - np.abs(x + self.sensitivity) ** self.p) / self.sigma ** self.p

    def _privacy_loss_without_subsampling_remove(self, x: float) -> float:
        return float(self._loss_vec(x))

    def _inverse_vec(self, losses) -> np.ndarray:
        """Largest x with loss(x) >= l, for an array of l (vectorised bracketing + bisection)."""
        ls = np.atleast_1d(np.asarray(losses, dtype=np.float64))
        s = self.sensitivity
        if self.p == 1.0:
            thr = ls * self.sigma
            return np.where(thr > s, -np.inf, np.where(thr <= -s, np.inf, 0.5 * (-s - thr)))
        c = -0.5 * s  # loss(c) = 0; the loss is strictly decreasing for p > 1
        lo = np.full(ls.shape, c - 1.0)
        hi = np.full(ls.shape, c + 1.0)
        w = 1.0
        for _ in range(200):
            need_lo = self._loss_vec(lo) < ls
            need_hi = self._loss_vec(hi) >= ls
            if not (need_lo.any() or need_hi.any()):
                break
            w *= 2.0
            lo = np.where(need_lo, c - w, lo)
            hi = np.where(need_hi, c + w, hi)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if np.all((mid == lo) | (mid == hi)):
                break
            ok = self._loss_vec(mid) >= ls
            lo = np.where(ok, mid, lo)
            hi = np.where(ok, hi, mid)
        return lo  # loss(lo) >= l: the largest such point found (safe side)

    def _inverse_privacy_loss_without_subsampling_remove(self, privacy_loss: float) -> float:
        return float(self._inverse_vec(privacy_loss)[0])

    def get_delta_for_epsilon(self, epsilon):
        """Hockey stick divergence at ``epsilon`` (vectorised version of dp-accounting's formula)."""
        scalar = np.ndim(epsilon) == 0
        eps = np.atleast_1d(np.asarray(epsilon, dtype=np.float64))
        x = self._inverse_vec(eps)
        with np.errstate(over="ignore", invalid="ignore"):
            d = self.mu_upper_cdf(x) - np.exp(eps + self.mu_lower_log_cdf(x))
        d = np.where(np.isposinf(x), 1.0 - np.exp(np.minimum(eps, 0.0)), d)
        d = np.where(np.isneginf(x), 0.0, d)
        d = np.clip(d, 0.0, 1.0)
        # delta(eps) is non-increasing: a running max from the right removes rounding wiggles and can
        # only raise a value (pessimistic)
        order = np.argsort(eps)
        d[order] = np.maximum.accumulate(d[order][::-1])[::-1]
        return float(d[0]) if scalar else d

    def privacy_loss_tail(self) -> _plm.TailPrivacyLossDistribution:
        lower = self._lower_quantile(0.5 * math.exp(self._lmtb))
        upper = -lower
        lower -= self.sensitivity
        return _plm.TailPrivacyLossDistribution(lower, upper, {
            math.inf: float(self.mu_upper_cdf(lower)),
            self.privacy_loss(upper): float(1.0 - self.mu_upper_cdf(upper)),
        })

    def connect_dots_bounds(self) -> _plm.ConnectDotsBounds:
        t = self.privacy_loss_tail()
        return _plm.ConnectDotsBounds(epsilon_upper=self.privacy_loss(t.lower_x_truncation),
                                      epsilon_lower=self.privacy_loss(t.upper_x_truncation))


def gg_pld(p: float, sigma: float, k: int = 1, *, sensitivity: float = 1.0,
           discretization: float = 1e-4):
    """Pessimistic dp-accounting PLD of GGauss(p, sigma) noise on k coordinates, each shifted by
    ``sensitivity`` (the worst case, see the module doc)."""
    k = check_positive_int("k", k)
    disc = check_positive("discretization", discretization)
    loss = GeneralizedGaussianPrivacyLoss(p, sigma, sensitivity)
    b = loss.connect_dots_bounds()
    disc = max(disc, (b.epsilon_upper - b.epsilon_lower) / 2e5)  # bound the support size
    pmf = _pldlib._create_pld_pmf_from_monotone_privacy_loss(
        loss, pessimistic_estimate=True, value_discretization_interval=disc, use_connect_dots=True)
    pld = _pldlib.PrivacyLossDistribution(pmf)
    return pld.self_compose(k) if k > 1 else pld


def gg_delta(eps: float, p: float, sigma: float, k: int = 1, *, sensitivity: float = 1.0) -> float:
    """delta(eps) of the k-dimensional GG mechanism (pessimistic PLD, with a 1e-6 relative margin)."""
    if not (math.isfinite(float(eps)) and float(eps) >= 0):
        raise ValueError(f"eps must lie in [0, inf), got {eps!r}")
    d = float(gg_pld(p, sigma, k, sensitivity=sensitivity).get_delta_for_epsilon(float(eps)))
    return min(1.0, d * (1.0 + _PLD_MARGIN) + 1e-300) if d > 0 else 0.0


def gg_epsilon(delta: float, p: float, sigma: float, k: int = 1, *, sensitivity: float = 1.0) -> float:
    """eps(delta) of the k-dimensional GG mechanism (pessimistic PLD); inf below the PLD's floor."""
    delta = check_delta(delta)
    e = float(gg_pld(p, sigma, k, sensitivity=sensitivity).get_epsilon_for_delta(delta * (1.0 - _PLD_MARGIN)))
    return max(e, 0.0)


# ---------------------------------------------------------------------------------------------
# Renyi divergence by quadrature
# ---------------------------------------------------------------------------------------------


def _rdp_1d(alpha: float, p: float, b: float) -> float:
    """D_alpha(GG(p,1) || GG(p,1)(. - b)) by quadrature in u = x / sigma, b = s / sigma."""

    def h(u):
        return -alpha * np.abs(u) ** p + (alpha - 1.0) * np.abs(u - b) ** p

    w = 8.0 + 2.0 * b
    grid = np.linspace(-w, w, 4001)
    for _ in range(60):
        v = h(grid)
        m = v.max()
        if h(-w) < m - 120.0 and h(w) < m - 120.0:
            break
        w *= 2.0
        grid = np.linspace(-w, w, 4001)
    grid = np.linspace(-w, w, 40001)
    v = h(grid)
    m = float(v.max())
    u0 = float(grid[int(np.argmax(v))])
    keep = grid[v - m > -90.0]
    du = grid[1] - grid[0]
    lo, hi = float(keep.min() - du), float(keep.max() + du)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        val, err = integrate.quad(lambda u: math.exp(float(h(u)) - m), lo, hi, points=[u0], limit=1000,
                                  epsabs=0.0, epsrel=1e-12)
    log_norm = math.log(p / 2.0) - float(special.gammaln(1.0 / p))
    # alpha > 1: a larger integral is a larger divergence, so add the quadrature's error estimate
    return max(0.0, (m + math.log(val + abs(err)) + log_norm) / (alpha - 1.0))


def gg_rdp(orders: Any, p: float, sigma: float, k: int = 1, *, sensitivity: float = 1.0) -> np.ndarray:
    """RDP of the k-dimensional GG mechanism at the given orders: ``k D_alpha`` of the 1-D pair.

    Quadrature (scipy ``quad``, relative tolerance 1e-12) of ``int p^alpha q^{1-alpha}`` around the
    maximiser of the integrand, values inflated by a 1e-9 relative margin.
    """
    p = check_shape(p)
    sigma = check_positive("sigma", sigma)
    k = check_positive_int("k", k)
    s = check_positive("sensitivity", sensitivity)
    a = np.atleast_1d(np.asarray(orders, dtype=np.float64))
    if np.any(~np.isfinite(a)) or np.any(a <= 1.0):
        raise ValueError("orders must be finite Renyi orders in (1, inf)")
    vals = np.array([_rdp_1d(float(al), p, s / sigma) for al in a])
    return k * vals * (1.0 + _RDP_MARGIN)


def gg_rdp_event(p: float, sigma: float, k: int = 1, *, sensitivity: float = 1.0,
                 orders: Any = DEFAULT_RDP_ORDERS_GG, label: str = "generalized_gaussian") -> RdpCurveEvent:
    """The GG mechanism as an RDP curve (composes with every event of the library)."""
    vals = gg_rdp(orders, p, sigma, k, sensitivity=sensitivity)
    return RdpCurveEvent(orders=tuple(float(x) for x in np.atleast_1d(orders)), values=tuple(vals),
                         label=label, assumptions=_assumptions(sensitivity),
                         metadata={"mechanism": "generalized_gaussian", "p": float(p), "sigma": float(sigma),
                                   "k": int(k), "sensitivity": float(sensitivity), "accounting": "rdp_quadrature"})


def gg_approx_event(p: float, sigma: float, k: int, *, delta: float, sensitivity: float = 1.0,
                    label: str = "generalized_gaussian") -> ApproxDpEvent:
    """The GG mechanism as (eps(delta'), delta') from the pessimistic PLD, delta' = delta (1 - 1e-9).

    delta' sits a hair below ``delta`` because the accountant composes (eps, delta) events by basic
    composition, which needs a strictly larger total delta: the release then reports eps(delta') at
    ``delta`` itself.
    """
    delta = check_delta(delta) * (1.0 - EVENT_DELTA_SLACK)
    e = gg_epsilon(delta, p, sigma, k, sensitivity=sensitivity)
    if not math.isfinite(e):
        raise ValueError(f"delta must exceed the PLD's tail-truncation floor for this sigma, got {delta!r}")
    return ApproxDpEvent(epsilon=e, delta=delta, label=label, assumptions=_assumptions(sensitivity),
                         metadata={"mechanism": "generalized_gaussian", "p": float(p), "sigma": float(sigma),
                                   "k": int(k), "sensitivity": float(sensitivity),
                                   "accounting": "dp-accounting PLD, connect-the-dots, pessimistic"})


def _assumptions(sensitivity: float) -> tuple[str, ...]:
    return (f"every coordinate of the statistic changes by at most {float(sensitivity):g} between neighbouring "
            "datasets (l_inf sensitivity) under the library's adjacency",
            "worst case over shifts in [-s, s]^k is the all-s shift (log-concave noise; module doc)",
            "guarantee for the idealised real-valued noise (float64 sampling in practice)")
