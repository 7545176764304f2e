"""The conversion routes of the :class:`~dp_infer.privacy.accountant.Accountant`: each turns a
composition of events into an upper bound on (eps, delta); the accountant reports the tightest.

``gdp`` (exact Gaussian profile), ``rdp`` (summed RDP curves, CKS conversion in log space),
``rdp_dp_accounting`` (the same curve through dp-accounting), ``pld`` (dp-accounting privacy-loss
distributions; pure and approximate events as generic pessimistic PLDs, never Laplace; a
Poisson-subsampled Gaussian event as its own),
``pure_basic`` and ``basic`` (Dwork et al. 2006). See the accountant's docstring for when each
is valid.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import optimize

from .conversions import LOG_TINY, gdp_epsilon, gdp_log_delta, pure_dp_rdp, rdp_epsilon, rdp_log_delta
from .events import RdpCurveEvent, SubsampledGaussianEvent

__all__ = ["DEFAULT_ORDERS", "Route"]


def _default_orders() -> np.ndarray:
    import dp_accounting

    dense = 1.0 + np.geomspace(1e-4, 1e6, 1601)
    dp_default = np.asarray(dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS, dtype=np.float64)
    return np.unique(np.concatenate([dense, dp_default]))


DEFAULT_ORDERS = _default_orders()


def logaddexp(a: float, b: float) -> float:
    return float(np.logaddexp(a, b))


class Route:
    name = "route"
    primary = True  # False: computed for cross-checks / reports only (dominated by another route)

    def log_delta(self, eps: float) -> float:  # ideal privacy delta (no TV)
        raise NotImplementedError

    def epsilon(self, log_delta: float) -> tuple[float, dict]:
        raise NotImplementedError


class GdpRoute(Route):
    name = "gdp"

    def __init__(self, mu: float):
        self.mu = mu

    def log_delta(self, eps):
        return gdp_log_delta(eps, self.mu)

    def epsilon(self, log_delta):
        return gdp_epsilon(self.mu, log_delta=log_delta), {"mu": self.mu}


class RdpRoute(Route):
    """Summed RDP curve; continuous refinement over the order when the curve is smooth."""

    name = "rdp"

    def __init__(self, rho_lin: float, pure: list[tuple[float, int]], curves: list[tuple[RdpCurveEvent, int]],
                 orders: np.ndarray):
        self.rho_lin = rho_lin
        self.pure = pure
        self.curves = curves
        grid_pts = [np.asarray(c.orders) for c, _ in curves]
        self.orders = np.unique(np.concatenate([orders, *grid_pts])) if grid_pts else np.asarray(orders)
        self.smooth = not curves
        self.values = self.curve(self.orders)

    def curve(self, alpha: np.ndarray) -> np.ndarray:
        alpha = np.asarray(alpha, dtype=np.float64)
        out = self.rho_lin * alpha
        for eps, cnt in self.pure:
            out = out + cnt * pure_dp_rdp(eps, alpha)
        for ev, cnt in self.curves:
            out = out + cnt * ev.rdp(alpha)
        return out

    def _refine(self, f, i: int) -> tuple[float, float] | None:
        if not self.smooth or not np.isfinite(f(self.orders[i])):
            return None
        lo = self.orders[max(i - 1, 0)]
        hi = self.orders[min(i + 1, self.orders.size - 1)]
        if hi <= lo:
            return None
        g = lambda u: f(1.0 + math.exp(u))  # noqa: E731
        res = optimize.minimize_scalar(g, bounds=(math.log(lo - 1.0), math.log(hi - 1.0)), method="bounded",
                                       options={"xatol": 1e-10})
        return float(res.fun), 1.0 + math.exp(float(res.x))

    def log_delta(self, eps):
        ld, a_opt = rdp_log_delta(self.orders, self.values, eps)
        if ld == -math.inf:
            return ld
        i = int(np.searchsorted(self.orders, a_opt))

        def f(a):
            r = float(self.curve(np.array([a]))[0])
            return (a - 1.0) * (r - eps + math.log1p(-1.0 / a)) - math.log(a)

        ref = self._refine(f, min(i, self.orders.size - 1))
        if ref is not None and ref[0] < ld:
            ld = ref[0]
        return min(ld, 0.0)

    def epsilon(self, log_delta):
        eps, a_opt = rdp_epsilon(self.orders, self.values, log_delta=log_delta)
        info = {"optimal_order": a_opt}
        if eps == 0.0:
            return 0.0, info
        i = int(np.searchsorted(self.orders, a_opt))

        def f(a):
            r = float(self.curve(np.array([a]))[0])
            return r + math.log1p(-1.0 / a) - (log_delta + math.log(a)) / (a - 1.0)

        ref = self._refine(f, min(i, self.orders.size - 1))
        if ref is not None and ref[0] < eps:
            eps, info = max(ref[0], 0.0), {"optimal_order": ref[1]}
        return eps, info


class RdpDpAccountingRoute(Route):
    """The summed curve converted by dp-accounting itself (grid only, float delta only)."""

    name = "rdp_dp_accounting"

    def __init__(self, rdp_route: RdpRoute):
        self.r = rdp_route

    def log_delta(self, eps):
        from dp_accounting.rdp import rdp_privacy_accountant as rpa

        try:
            d, _ = rpa.compute_delta(self.r.orders, self.r.values, eps)
        except (ValueError, OverflowError):  # its KL shortcut takes log1p(-exp(-r)) of r ~ 0: no bound here
            return 0.0
        return math.log(d) if d > 0 else -math.inf

    def epsilon(self, log_delta):
        from dp_accounting import rdp

        if log_delta < LOG_TINY:
            return math.inf, {}
        try:
            e, a = rdp.compute_epsilon(self.r.orders, self.r.values, math.exp(log_delta))
        except (ValueError, OverflowError):  # a domain error inside dp-accounting: no bound from this route
            return math.inf, {}
        return float(e), {"optimal_order": float(a)}


def _subsampled_span(event: SubsampledGaussianEvent, count: int) -> float:
    """A bound on the privacy loss that ``count`` copies of ``event`` reach with non-negligible mass:
    their RDP curve's eps at delta = 1e-12 (sizes the PLD grid only; never a privacy figure)."""
    values = count * np.asarray(event.values, dtype=np.float64)
    return float(rdp_epsilon(event.orders, values, 1e-12)[0])


class PldRoute(Route):
    """dp-accounting PLDs: Gaussian for the GDP part, generic pessimistic PLDs for pure/approx, and each
    Poisson-subsampled Gaussian event's own pessimistic PLD (:meth:`SubsampledGaussianEvent.pld`)."""

    name = "pld"

    def __init__(self, mu: float, pure: list[tuple[float, int]], approx: list[tuple[float, float, int]],
                 discretization: float, subsampled: Sequence[tuple[SubsampledGaussianEvent, int]] = ()):
        from dp_accounting.pld import common
        from dp_accounting.pld import privacy_loss_distribution as pldlib

        # keep the PLD support bounded (~2e5 points): a coarser pessimistic grid is still an
        # upper bound (anchors-dp §1.5: wide PLDs can exhaust memory). A subsampled Gaussian's
        # composed loss is bounded in practice by its own RDP eps at a tiny delta (the PLD's
        # truncated tails go to its infinite-loss mass, pessimistically).
        span = mu * mu / 2.0 + 12.0 * mu + sum(c * e for e, c in pure) + sum(c * e for e, _, c in approx)
        span += sum(_subsampled_span(e, c) for e, c in subsampled)
        if not math.isfinite(span):  # a vacuous subsampled event: no PLD bound (the RDP route answers)
            self.interval, self.pld = math.inf, None
            return
        interval = max(discretization, span / 2e5)
        self.interval = interval
        # dp-accounting computes e^eps of each pure/approx event and of the Gaussian's largest loss
        # (~mu^2 / 2 + 12 mu): past float range (an event with eps > ~709.8, mu > ~3e4) it raises
        # OverflowError. Such a ledger is vacuous at any useful eps; the route then gives no bound
        # (delta 1, eps inf) and the other routes answer.
        self.pld = None
        try:
            pld = pldlib.identity(value_discretization_interval=interval)
            if mu > 0:
                pld = pld.compose(pldlib.from_gaussian_mechanism(standard_deviation=1.0 / mu,
                                                                 value_discretization_interval=interval))
            for eps, cnt in pure:
                p = pldlib.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, 0.0),
                                                   value_discretization_interval=interval)
                pld = pld.compose(p.self_compose(cnt) if cnt > 1 else p)
            for eps, dl, cnt in approx:
                p = pldlib.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, dl),
                                                   value_discretization_interval=interval)
                pld = pld.compose(p.self_compose(cnt) if cnt > 1 else p)
            for e, cnt in subsampled:
                pld = pld.compose(e.pld(interval, cnt))
        except OverflowError:
            return
        self.pld = pld

    # dp-accounting's PLD arithmetic is pessimistic up to floating-point error: ~1e-12 relative
    # where delta ~ 1 (seen against the exact Gaussian profile), and ~1e-15 ABSOLUTE in the tail,
    # where its FFT self-composition leaves noise of either sign in tiny probabilities (seen: delta
    # 3e-6 relative below the exact optimal composition of 100 x 1-DP at delta 1.4e-10, and a
    # negative delta -- reported as 0 -- for 1000 x 1-DP at eps = 900, exact delta e^-169.5).
    # A relative and an absolute safety margin (each ~100x the largest error seen) keep the route
    # an upper bound.
    _MARGIN = 1e-6
    _ABS_MARGIN = 1e-13

    def log_delta(self, eps):
        if self.pld is None:  # not representable (see __init__): no bound
            return 0.0
        d = float(self.pld.get_delta_for_epsilon(eps))
        if d == 0.0:  # an empty sum: no finite loss above eps and no infinite loss, delta = 0
            return -math.inf
        return math.log(min(max(d, 0.0) * (1.0 + self._MARGIN) + self._ABS_MARGIN, 1.0))

    def epsilon(self, log_delta):
        d = math.exp(log_delta) * (1.0 - self._MARGIN) - self._ABS_MARGIN
        if d <= 0.0 or self.pld is None:  # below the route's numerical resolution, or not representable
            return math.inf, {}
        return float(self.pld.get_epsilon_for_delta(d)), {"discretization": self.interval}


class PureBasicRoute(Route):
    name = "pure_basic"

    def __init__(self, eps_total: float):
        self.eps_total = eps_total

    def log_delta(self, eps):
        return -math.inf if eps >= self.eps_total else 0.0

    def epsilon(self, log_delta):
        return self.eps_total, {}


class BasicRoute(Route):
    """Rest of the events (their best route) + basic composition with the (eps, delta) events."""

    name = "basic"

    def __init__(self, rest, eps_a: float, delta_a: float):
        """``rest``: an Accountant of the other events (or None), duck-typed to avoid a cycle."""
        self.rest = rest
        self.eps_a = eps_a
        self.delta_a = delta_a
        self.log_delta_a = math.log(delta_a) if delta_a > 0 else -math.inf

    def _rest_log_delta(self, eps):
        if self.rest is None:
            return -math.inf
        return self.rest._ideal_log_delta(eps)[0]

    def log_delta(self, eps):
        if eps < self.eps_a:
            return 0.0
        return min(0.0, logaddexp(self._rest_log_delta(eps - self.eps_a), self.log_delta_a))

    def epsilon(self, log_delta):
        if self.rest is None:  # the (eps, delta) events alone: eps_a holds at delta_a itself
            return (math.inf if log_delta < self.log_delta_a else self.eps_a), {}
        if log_delta <= self.log_delta_a:
            return math.inf, {}
        # delta left for the rest: delta - delta_a (in log space)
        ld_rest = log_delta + math.log(-math.expm1(self.log_delta_a - log_delta)) if self.delta_a > 0 else log_delta
        e = self.rest._ideal_epsilon(ld_rest)[0]
        return e + self.eps_a, {}
