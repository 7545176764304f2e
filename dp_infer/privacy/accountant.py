"""Accountant: composes heterogeneous privacy events and converts them to (eps, delta).

Composition is adaptive throughout (each theorem used below holds for adaptively chosen
mechanisms). The accountant evaluates every *valid* conversion route available for the events
it holds and reports the tightest; each route is an upper bound on the true privacy loss, so
the minimum is one too.

Routes
------
``gdp``       only GDP events: mu = sqrt(sum count * mu_i^2), exact Gaussian profile.
``rdp``       no (eps, delta) events: sum of RDP curves (GDP -> alpha mu^2/2, zCDP -> rho alpha,
              pure eps -> randomized-response envelope, grid curves -> step envelope) on a dense
              order grid, with a continuous scalar search over the order when the curve is
              smooth; conversion = CKS Prop. 12 (the dp-accounting formula), in log space.
``rdp_dp_accounting``  the same summed curve handed to ``dp_accounting.rdp.compute_epsilon`` /
              ``compute_delta`` on the grid (only when delta is representable as a float).
``pld``       no zCDP / grid-RDP events: dp-accounting privacy-loss distributions, with GDP as
              one Gaussian PLD (``from_gaussian_mechanism``), every pure / approximate event as
              the generic pessimistic PLD ``from_privacy_parameters`` (never Laplace), and a
              Poisson-subsampled Gaussian event (its RDP curve is for the rdp route) as that
              mechanism's own pessimistic PLD (``from_gaussian_mechanism(sampling_prob=q)``).
``pure_basic`` only pure events: eps = sum count * eps_i at every delta >= 0.
``basic``     (eps, delta) events present: the rest (best route) plus basic composition
              (eps_1 + eps_2, delta_1 + delta_2), Dwork et al. 2006.

Sampling error
--------------
If event i is run by a sampler within TV ``tau_i`` of its ideal mechanism, the composed run is
within TV ``tau = sum count_i tau_i`` of the ideal composition (hybrid argument over the
adaptive steps), hence (eps, delta_priv(eps) + (1 + e^eps) tau)-DP. Both parts are reported.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from scipy import optimize

from .._validation import check_nonnegative, check_positive_int
from .composition_routes import (
    DEFAULT_ORDERS, Route, BasicRoute, GdpRoute, logaddexp, PldRoute, PureBasicRoute,
    RdpDpAccountingRoute, RdpRoute,
)
from .conversions import resolve_log_delta
from .events import (
    ApproxDpEvent, GdpEvent, PrivacyEvent, PureDpEvent, RdpCurveEvent, SubsampledGaussianEvent, ZcdpEvent, jsonable,
    event_from_dict,
)


class Accountant:
    """Composes :class:`~dp_infer.privacy.events.PrivacyEvent` objects (with counts).

    >>> acc = Accountant().compose(GdpEvent(0.3), count=4)   # 4 chains of a 0.3-GDP sampler
    >>> round(acc.gdp_mu(), 6)
    0.6
    """

    def __init__(self, events: Iterable[PrivacyEvent | tuple[PrivacyEvent, int]] = (), *,
                 orders: Sequence[float] | None = None, pld_discretization: float = 1e-4):
        self._ledger: list[tuple[PrivacyEvent, int]] = []
        self._orders = DEFAULT_ORDERS if orders is None else np.unique(np.asarray(orders, dtype=np.float64))
        if np.any(self._orders <= 1.0) or not np.all(np.isfinite(self._orders)):
            raise ValueError("orders must be finite Renyi orders in (1, inf)")
        self._pld_discretization = check_nonnegative("pld_discretization", pld_discretization)
        if self._pld_discretization == 0:
            raise ValueError("pld_discretization must lie in (0, inf)")
        self._routes_cache: list[Route] | None = None
        for item in events:
            if isinstance(item, tuple):
                self.compose(item[0], item[1])
            else:
                self.compose(item)

    # ------------------------------------------------------------------ composition
    def compose(self, event: PrivacyEvent, count: int = 1) -> "Accountant":
        """Add ``count`` adaptive repetitions of ``event`` (K chains = ``count=K``). Returns self."""
        if not isinstance(event, (GdpEvent, ZcdpEvent, RdpCurveEvent, PureDpEvent, ApproxDpEvent)):
            # an unknown kind would silently drop out of every route: refuse it
            raise ValueError("event must be a GdpEvent, ZcdpEvent, RdpCurveEvent, PureDpEvent or ApproxDpEvent, "
                             f"got {type(event).__name__}")
        count = check_positive_int("count", count)
        self._ledger.append((event, count))
        self._routes_cache = None
        return self

    @property
    def ledger(self) -> tuple[tuple[PrivacyEvent, int], ...]:
        return tuple(self._ledger)

    def copy(self) -> "Accountant":
        return Accountant(self._ledger, orders=self._orders, pld_discretization=self._pld_discretization)

    @property
    def tv_error(self) -> float:
        """Total TV distance of the run from the ideal composed mechanism (sum count * tau)."""
        return float(sum(c * e.tv_error for e, c in self._ledger))

    def kinds(self) -> set[str]:
        return {e.kind for e, _ in self._ledger}

    def gdp_mu(self) -> float | None:
        """Composed GDP parameter if every event is GDP, else None."""
        if any(not isinstance(e, GdpEvent) for e, _ in self._ledger):
            return None
        return math.sqrt(sum(c * e.mu**2 for e, c in self._ledger))

    def rdp_curve(self, orders: Sequence[float] | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """(orders, composed RDP values) or None if an (eps, delta) event has no RDP curve."""
        r = self._rdp_route()
        if r is None:
            return None
        if orders is None:
            return r.orders.copy(), r.values.copy()
        a = np.asarray(orders, dtype=np.float64)
        return a, r.curve(a)

    def linear_rho(self) -> float | None:
        """rho if the composed curve is exactly linear (only GDP / zCDP events), else None."""
        if any(not isinstance(e, (GdpEvent, ZcdpEvent)) for e, _ in self._ledger):
            return None
        return float(sum(c * (e.mu**2 / 2 if isinstance(e, GdpEvent) else e.rho) for e, c in self._ledger))

    # ------------------------------------------------------------------ routes
    def _rdp_route(self) -> RdpRoute | None:
        if any(isinstance(e, ApproxDpEvent) for e, _ in self._ledger):
            return None
        rho = 0.0
        pure: list[tuple[float, int]] = []
        curves: list[tuple[RdpCurveEvent, int]] = []
        for e, c in self._ledger:
            if isinstance(e, GdpEvent):
                rho += c * e.mu**2 / 2.0
            elif isinstance(e, ZcdpEvent):
                rho += c * e.rho
            elif isinstance(e, PureDpEvent):
                pure.append((e.epsilon, c))
            elif isinstance(e, RdpCurveEvent):
                curves.append((e, c))
        return RdpRoute(rho, pure, curves, self._orders)

    def _routes(self) -> list[Route]:
        if self._routes_cache is not None:
            return self._routes_cache
        routes: list[Route] = []
        ev = [e for e, _ in self._ledger]
        has_approx = any(isinstance(e, ApproxDpEvent) for e in ev)
        # zCDP and grid curves have no PLD; a subsampled Gaussian carries its mechanism, so it has one
        has_rdp_only = any(isinstance(e, (ZcdpEvent, RdpCurveEvent)) and not isinstance(e, SubsampledGaussianEvent)
                           for e in ev)
        if not ev:
            routes.append(PureBasicRoute(0.0))
        elif all(isinstance(e, GdpEvent) for e in ev):
            routes.append(GdpRoute(self.gdp_mu()))
        if ev and all(isinstance(e, PureDpEvent) for e in ev):
            routes.append(PureBasicRoute(float(sum(c * e.epsilon for e, c in self._ledger))))
        if ev and not has_approx:
            r = self._rdp_route()
            # for GDP-only ledgers the exact Gaussian profile dominates any RDP conversion
            r.primary = not all(isinstance(e, GdpEvent) for e in ev)
            routes.append(r)
            d = RdpDpAccountingRoute(r)
            d.primary = False  # same curve on a coarser search than the rdp route: cross-check only
            routes.append(d)
        if ev and not has_rdp_only and not all(isinstance(e, GdpEvent) for e in ev):
            mu = math.sqrt(sum(c * e.mu**2 for e, c in self._ledger if isinstance(e, GdpEvent)))
            pure = [(e.epsilon, c) for e, c in self._ledger if isinstance(e, PureDpEvent)]
            approx = [(e.epsilon, e.delta, c) for e, c in self._ledger if isinstance(e, ApproxDpEvent)]
            subsampled = [(e, c) for e, c in self._ledger if isinstance(e, SubsampledGaussianEvent)]
            routes.append(PldRoute(mu, pure, approx, self._pld_discretization, subsampled))
        if has_approx:
            rest = [(e, c) for e, c in self._ledger if not isinstance(e, ApproxDpEvent)]
            eps_a = float(sum(c * e.epsilon for e, c in self._ledger if isinstance(e, ApproxDpEvent)))
            dl_a = float(sum(c * e.delta for e, c in self._ledger if isinstance(e, ApproxDpEvent)))
            rest_acc = Accountant(rest, orders=self._orders, pld_discretization=self._pld_discretization) if rest else None
            if dl_a < 1.0:
                routes.append(BasicRoute(rest_acc, eps_a, dl_a))
        self._routes_cache = routes
        return routes

    def _ideal_log_delta(self, eps: float, *, all_routes: bool = False) -> tuple[float, str, dict]:
        best, name = 0.0, "none"
        all_ = {}
        for r in self._routes():
            if not (r.primary or all_routes):
                continue
            ld = r.log_delta(eps)
            all_[r.name] = ld
            if ld < best or name == "none":
                best, name = ld, r.name
        return best, name, all_

    def _ideal_epsilon(self, log_delta: float, *, all_routes: bool = False) -> tuple[float, str, dict, dict]:
        best, name, info_best = math.inf, "none", {}
        all_ = {}
        for r in self._routes():
            if not (r.primary or all_routes):
                continue
            e, info = r.epsilon(log_delta)
            all_[r.name] = e
            if e < best:
                best, name, info_best = e, r.name, info
        return best, name, info_best, all_

    # ------------------------------------------------------------------ queries
    def get_log_delta(self, eps: float) -> float:
        """log of the total delta at ``eps``: log(delta_privacy + (1 + e^eps) tau)."""
        eps = check_nonnegative("eps", eps)
        ld, _, _ = self._ideal_log_delta(eps)
        tau = self.tv_error
        if tau > 0:
            ld = logaddexp(ld, math.log(tau) + float(np.logaddexp(0.0, eps)))
        return min(ld, 0.0)

    def get_delta(self, eps: float) -> float:
        """Total delta at ``eps`` (privacy delta + TV slack); may underflow, see get_log_delta."""
        return math.exp(self.get_log_delta(eps))

    def get_epsilon(self, delta: float | None = None, *, log_delta: float | None = None) -> float:
        """Smallest eps (over all valid routes) such that total delta(eps) <= ``delta``."""
        return self._epsilon_full(resolve_log_delta(delta, log_delta))[0]

    def _epsilon_full(self, ld: float) -> tuple[float, str, dict, dict]:
        tau = self.tv_error
        if tau == 0.0:
            return self._ideal_epsilon(ld)
        # total(eps) = delta_priv(eps) + (1 + e^eps) tau must be <= delta. The TV part grows with
        # eps, so feasible eps lie below eps_hi where (1 + e^eps) tau = delta.
        log_tau = math.log(tau)
        if log_tau >= ld - math.log(2.0):  # (1 + e^0) tau >= delta: infeasible at every eps >= 0
            return math.inf, "none", {}, {}
        x = ld - log_tau  # > log 2; may exceed 709 for a subnormal tau (expm1 would overflow)
        eps_hi = x + math.log1p(-math.exp(-x))  # log(e^x - 1): (1 + e^eps_hi) tau = delta

        def total(e):
            return logaddexp(self._ideal_log_delta(e)[0], log_tau + float(np.logaddexp(0.0, e)))

        grid = np.linspace(0.0, eps_hi, 129)[:-1]
        vals = np.array([total(e) for e in grid])
        ok = np.nonzero(vals <= ld)[0]
        if ok.size == 0:
            # refine near the best grid point before giving up
            # (the grid stops one cell short of eps_hi: a feasible set in that last cell is searched too)
            j = int(np.argmin(vals))
            lo, hi = grid[max(j - 1, 0)], (grid[j + 1] if j + 1 < grid.size else eps_hi)
            res = optimize.minimize_scalar(total, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
            if res.fun > ld:
                return math.inf, "none", {}, {}
            hi_e = float(res.x)
            lo_e = lo
        else:
            k = int(ok[0])
            if k == 0:
                return 0.0, self._ideal_log_delta(0.0)[1], {}, {}
            lo_e, hi_e = float(grid[k - 1]), float(grid[k])
        # lo_e is infeasible (a grid point before the first feasible one, or beside the refined
        # minimum), hi_e feasible: the smallest feasible eps lies between them
        e = float(optimize.brentq(lambda x: total(x) - ld, lo_e, hi_e, xtol=1e-13, rtol=1e-15))
        step = 1e-12 * max(1.0, e)
        while total(e) > ld and e < hi_e:  # landed on the infeasible side: never under-report
            e = min(e + step, hi_e)
            step *= 4.0
        return e, self._ideal_log_delta(e)[1], {}, {}

    def _sampling_delta(self, eps: float) -> float:
        """(1 + e^eps) tv_error, in log space: +inf (not an OverflowError) where it exceeds float range."""
        if self.tv_error == 0.0:
            return 0.0
        x = math.log(self.tv_error) + float(np.logaddexp(0.0, eps))
        return math.exp(x) if x < 709.0 else math.inf

    def epsilon_by_route(self, delta: float | None = None, *, log_delta: float | None = None) -> dict[str, float]:
        """eps at ``delta`` per available route (ignoring TV error): for audits and tests."""
        ld = resolve_log_delta(delta, log_delta)
        return dict(self._ideal_epsilon(ld, all_routes=True)[3])

    # ------------------------------------------------------------------ report / serialisation
    def report(self, delta: float | None = None, *, log_delta: float | None = None,
               eps: float | None = None) -> dict:
        """JSON-serialisable privacy report.

        Give a target ``delta`` (or ``log_delta``) to get eps, or ``eps`` to get delta.
        Keys: kind, mu (GDP) / rho (linear RDP), rdp {orders, values} (on dp-accounting's default
        orders), epsilon, delta (total), delta_privacy, delta_sampling (= (1+e^eps) tv_error),
        tv_error, route, routes (eps or log delta per route), components.
        """
        if eps is not None and (delta is not None or log_delta is not None):
            raise ValueError("give either a target delta/log_delta or a target eps, not both")
        kinds = sorted(self.kinds())
        out: dict[str, Any] = {
            "kind": kinds[0] if len(kinds) == 1 else ("none" if not kinds else "mixed"),
            "mu": self.gdp_mu() if self._ledger else None,
            "rho": self.linear_rho() if self._ledger else None,
            "tv_error": self.tv_error,
            "components": [{"event": e.to_dict(), "count": c} for e, c in self._ledger],
        }
        import dp_accounting

        rep_orders = np.asarray(dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS, dtype=np.float64)
        curve = self.rdp_curve(rep_orders) if self._ledger else None
        out["rdp"] = None if curve is None else {"orders": curve[0].tolist(), "values": curve[1].tolist()}
        if eps is not None:
            e = check_nonnegative("eps", eps)
            ld_priv, route, all_ = self._ideal_log_delta(e, all_routes=True)
            slack = self._sampling_delta(e)
            out.update({"epsilon": e, "delta": math.exp(ld_priv) + slack, "log_delta": self.get_log_delta(e),
                        "delta_privacy": math.exp(ld_priv), "log_delta_privacy": ld_priv,
                        "delta_sampling": slack, "route": route, "routes_log_delta": all_})
        elif delta is not None or log_delta is not None:
            ld = resolve_log_delta(delta, log_delta)
            e, route, info, all_ = self._epsilon_full(ld)
            if math.isfinite(e):
                ld_priv = self._ideal_log_delta(e)[0]
                slack = self._sampling_delta(e)
            else:
                ld_priv, slack = 0.0, None
            out.update({"epsilon": e, "delta": math.exp(ld), "log_delta": ld,
                        "delta_privacy": math.exp(ld_priv), "log_delta_privacy": ld_priv,
                        "delta_sampling": slack, "route": route, "route_info": info,
                        "routes_ideal": self.epsilon_by_route(log_delta=ld)})
        return jsonable(out)

    def to_dict(self) -> dict:
        return {"events": [{"event": e.to_dict(), "count": c} for e, c in self._ledger],
                "pld_discretization": self._pld_discretization}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Accountant":
        items = [(event_from_dict(x["event"]), int(x["count"])) for x in d.get("events", [])]
        return cls(items, pld_discretization=float(d.get("pld_discretization", 1e-4)))

    def __repr__(self) -> str:
        parts = ", ".join(f"{e.kind}:{e.label or '-'}x{c}" for e, c in self._ledger)
        return f"Accountant([{parts}])"


def compose(*events: PrivacyEvent, counts: Sequence[int] | None = None) -> Accountant:
    """Shorthand: an accountant holding ``events`` (each with its count, default 1)."""
    counts = [1] * len(events) if counts is None else list(counts)
    if len(counts) != len(events):
        raise ValueError("counts must have one entry per event")
    return Accountant(list(zip(events, counts)))
