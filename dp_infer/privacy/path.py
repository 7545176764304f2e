"""Trajectory (path) privacy of unadjusted Langevin dynamics.

Overdamped
----------
Projected/unprojected unadjusted Langevin on the potential ``U_D = beta * L(.; D)``,
``theta_{k+1} = Proj_C(theta_k - h grad U_D(theta_k) + N(0, 2h I))``, run for the integrated
time ``t = num_steps * h``, with gradient sensitivity
``Delta = sup_theta ||grad L(theta; D) - grad L(theta; D')||`` (= G/n for per-example
gradient-difference bound G and replace-one neighbours).

Each step, conditioned on the released history, is a Gaussian mechanism with l2 sensitivity
``h beta Delta`` and noise std ``sqrt(2h)`` (then a data-independent projection:
post-processing), i.e. ``beta Delta sqrt(h/2)``-GDP. Adaptive composition of GDP (Dong, Roth,
Su 2022, Thm 3.2 / Cor. 3.3) over the steps gives

    the whole released trajectory is  mu-GDP,   mu = beta * Delta * sqrt(t / 2),

and therefore (alpha, alpha beta^2 Delta^2 t / 4)-RDP for all alpha > 1 (seed-001 Lemma 2.2;
digest §4.2; the RDP curve of mu-GDP is alpha mu^2/2). For quadratic losses the gradient
difference is constant, every step is exactly that Gaussian shift, and the bound is attained:
the privacy-loss random variable of the path is exactly N(mu^2/2, mu^2). Privacy depends only on
the integrated time, not on h. No convexity is needed.

Underdamped (Euler kinetic scheme, seed-001 digest §4.10)
--------------------------------------------------------
``v_{k+1} = v_k - h (gamma v_k + grad U_D(x_k)) + sqrt(2 gamma h) xi_k;  x_{k+1} = x_k + h v_{k+1}``
(unit mass and temperature). The noise enters only v: each step is a Gaussian mechanism with
sensitivity ``h beta Delta`` and std ``sqrt(2 gamma h)``, and x_{k+1} is post-processing of
(x_k, v_{k+1}); the released (x, v) path is ``beta Delta sqrt(t / (2 gamma))``-GDP. Splitting
schemes that end with an un-noised kick (BAOAB) are NOT covered.

K chains (independent runs on the same data) compose: mu_K = sqrt(K) mu.

The paper's Lemma 3.1 calibration ``beta <= 2 eps / (Delta sqrt(t log(1/delta)))`` is wrong by
about 2x (seed-001 digest §4.4, §10.3); it is exposed only as :func:`lemma_3_1_beta_unsafe`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import optimize

from .._validation import check_epsilon, check_nonnegative, check_positive, check_positive_int
from .conversions import (
    nudge, gdp_epsilon, gdp_log_delta, gdp_mu, linear_rdp_epsilon, linear_rdp_log_delta, linear_rdp_rho,
    rdp_epsilon, rdp_log_delta, resolve_log_delta, zcdp_epsilon_mironov, zcdp_rho_for_epsilon_mironov,
)
from .events import GdpEvent

__all__ = [
    "path_mu",
    "path_rho",
    "path_rdp",
    "path_event",
    "path_schedule_event",
    "path_epsilon",
    "path_delta",
    "beta_max",
    "time_max",
    "beta_max_rdp",
    "lemma_3_1_beta_unsafe",
    "PATH_METHODS",
]

PATH_METHODS = ("gdp", "rdp", "mironov", "rdp_grid")

_OVERDAMPED_ASSUMPTIONS = (
    "unadjusted overdamped Langevin theta <- Proj_C(theta - h * beta * grad L(theta; D) + N(0, 2h I)) "
    "(no Metropolis correction); projection onto a fixed data-independent convex C or none",
    "full-batch gradients with sup_theta ||grad L(theta; D) - grad L(theta; D')||_2 <= sensitivity for "
    "neighbouring D, D' (enforced by clipping in the function actually run)",
    "initial point drawn from the same data-independent law for D and D'",
    "beta, step sizes, horizon and number of chains fixed independently of the data",
    "released: the theta-trajectory (any post-processing of it); nothing else computed from D",
)

_UNDERDAMPED_ASSUMPTIONS = (
    "unadjusted underdamped Langevin, Euler kinetic scheme v <- v - h (gamma v + beta grad L(x; D)) + "
    "sqrt(2 gamma h) xi, x <- x + h v (unit mass and temperature); no un-noised final kick (not BAOAB)",
    "full-batch gradients with sup_x ||grad L(x; D) - grad L(x; D')||_2 <= sensitivity for neighbouring D, D'",
    "initial (x, v) drawn from the same data-independent law for D and D'",
    "beta, friction, step sizes, horizon and number of chains fixed independently of the data",
    "released: the (x, v)-trajectory or any post-processing of it; nothing else computed from D",
)


def _check_common(beta, sensitivity, time, friction, num_chains):
    beta = check_nonnegative("beta", beta)
    sensitivity = check_nonnegative("sensitivity", sensitivity)
    time = check_nonnegative("time", time)
    gamma = 1.0 if friction is None else check_positive("friction", friction)
    k = check_positive_int("num_chains", num_chains)
    return beta, sensitivity, time, gamma, k


def path_mu(beta: float, sensitivity: float, time: float, friction: float | None = None,
            num_chains: int = 1) -> float:
    """GDP parameter ``beta * Delta * sqrt(K t / (2 gamma))`` (gamma = 1 for overdamped)."""
    beta, s, t, gamma, k = _check_common(beta, sensitivity, time, friction, num_chains)
    return beta * s * math.sqrt(k * t / (2.0 * gamma))


def path_rho(beta: float, sensitivity: float, time: float, friction: float | None = None,
             num_chains: int = 1) -> float:
    """RDP slope: the path is (alpha, rho * alpha)-RDP with rho = K beta^2 Delta^2 t / (4 gamma)."""
    return path_mu(beta, sensitivity, time, friction, num_chains) ** 2 / 2.0


def path_rdp(alpha, beta: float, sensitivity: float, time: float, friction: float | None = None,
             num_chains: int = 1) -> np.ndarray:
    """RDP of the path at order(s) ``alpha``: ``alpha * K beta^2 Delta^2 t / (4 gamma)`` (Lemma 2.2)."""
    a = np.asarray(alpha, dtype=np.float64)
    if np.any(~np.isfinite(a)) or np.any(a <= 1):
        raise ValueError(f"alpha (Renyi order) must lie in (1, inf), got {alpha!r}")
    return a * path_rho(beta, sensitivity, time, friction, num_chains)


def path_event(beta: float, sensitivity: float, time: float, friction: float | None = None,
               num_chains: int = 1, *, tv_error: float = 0.0, label: str | None = None,
               extra_assumptions: Sequence[str] = ()) -> GdpEvent:
    """GdpEvent for ``num_chains`` Langevin trajectories of integrated time ``time``.

    ``tv_error`` is normally 0: the path guarantee is about the chain actually run (no
    stationarity needed). ``friction`` selects the underdamped (Euler kinetic) scheme.
    """
    mu = path_mu(beta, sensitivity, time, friction, num_chains)
    under = friction is not None
    return GdpEvent(
        mu=mu,
        label=label or ("underdamped_langevin_path" if under else "langevin_path"),
        assumptions=(_UNDERDAMPED_ASSUMPTIONS if under else _OVERDAMPED_ASSUMPTIONS) + tuple(extra_assumptions),
        tv_error=tv_error,
        metadata={"route": "path", "beta": float(beta), "sensitivity": float(sensitivity), "time": float(time),
                  "friction": None if friction is None else float(friction), "num_chains": int(num_chains),
                  "mu_per_chain": path_mu(beta, sensitivity, time, friction, 1)},
    )


def path_schedule_event(betas: Sequence[float], step_sizes: Sequence[float], sensitivity: float,
                        friction: float | None = None, num_chains: int = 1, *, label: str | None = None) -> GdpEvent:
    """Time-varying beta_k and h_k: ``mu = Delta sqrt(K sum_k beta_k^2 h_k / (2 gamma))`` (digest §4.2)."""
    b = np.asarray(betas, dtype=np.float64)
    h = np.asarray(step_sizes, dtype=np.float64)
    if b.ndim != 1 or b.size == 0 or np.any(~np.isfinite(b)) or np.any(b < 0):
        raise ValueError("betas must be a non-empty 1-D sequence of finite values >= 0")
    if h.shape != b.shape or np.any(~np.isfinite(h)) or np.any(h <= 0):
        raise ValueError("step_sizes must have the same length as betas and be finite and > 0")
    s = check_nonnegative("sensitivity", sensitivity)
    gamma = 1.0 if friction is None else check_positive("friction", friction)
    k = check_positive_int("num_chains", num_chains)
    mu = s * math.sqrt(k * float(np.sum(b * b * h)) / (2.0 * gamma))
    under = friction is not None
    return GdpEvent(mu=mu, label=label or "langevin_path_schedule",
                    assumptions=_UNDERDAMPED_ASSUMPTIONS if under else _OVERDAMPED_ASSUMPTIONS,
                    metadata={"route": "path", "sensitivity": s, "time": float(h.sum()), "num_steps": int(h.size),
                              "friction": None if friction is None else float(friction), "num_chains": k})


def _check_method(method: str) -> str:
    if method not in PATH_METHODS:
        raise ValueError(f"method must be one of {PATH_METHODS}, got {method!r}")
    return method


def path_epsilon(beta: float, sensitivity: float, time: float, delta: float | None = None, *,
                 log_delta: float | None = None, friction: float | None = None, num_chains: int = 1,
                 method: str = "gdp") -> float:
    """eps at ``delta`` for the path.

    method ``"gdp"`` (exact, default), ``"rdp"`` (CKS conversion of the linear curve with a
    continuous order search), ``"mironov"`` (``a + 2 sqrt(a log(1/delta))``, a = rho; seed-001
    digest §4.4), ``"rdp_grid"`` (``dp_accounting.rdp.compute_epsilon`` on dp-accounting's default
    orders). All are valid upper bounds; gdp <= rdp <= rdp_grid and rdp <= mironov.
    """
    _check_method(method)
    ld = resolve_log_delta(delta, log_delta)
    mu = path_mu(beta, sensitivity, time, friction, num_chains)
    rho = mu * mu / 2.0
    if method == "gdp":
        return gdp_epsilon(mu, log_delta=ld)
    if method == "rdp":
        return linear_rdp_epsilon(rho, log_delta=ld)[0]
    if method == "mironov":
        return zcdp_epsilon_mironov(rho, log_delta=ld)
    import dp_accounting

    orders = np.asarray(dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS, dtype=np.float64)
    if ld < math.log(1e-300):
        return rdp_epsilon(orders, rho * orders, log_delta=ld)[0]
    # the caller's delta itself when given (exp(log(delta)) can be an ulp above it: eps an ulp low)
    d = delta if delta is not None else math.exp(ld)
    return float(dp_accounting.rdp.compute_epsilon(orders, rho * orders, d)[0])


def path_delta(beta: float, sensitivity: float, time: float, eps: float, *, friction: float | None = None,
               num_chains: int = 1, method: str = "gdp", log: bool = False) -> float:
    """delta at ``eps`` for the path (``log=True`` returns log delta)."""
    _check_method(method)
    eps = check_nonnegative("eps", eps)
    mu = path_mu(beta, sensitivity, time, friction, num_chains)
    rho = mu * mu / 2.0
    if method == "gdp":
        ld = gdp_log_delta(eps, mu)
    elif method == "rdp":
        ld = linear_rdp_log_delta(rho, eps)[0]
    elif method == "mironov":
        # invert eps = rho + 2 sqrt(rho b): b = ((eps - rho)/2)^2 / rho for eps > rho
        ld = 0.0 if (rho == 0 or eps <= rho) else -((eps - rho) / 2.0) ** 2 / rho
        ld = -math.inf if rho == 0 else ld
    else:
        from dp_accounting.rdp import rdp_privacy_accountant as rpa

        orders = np.asarray(rpa.DEFAULT_RDP_ORDERS, dtype=np.float64)
        d = rpa.compute_delta(orders, rho * orders, eps)[0]
        # below ~1e-308 dp-accounting's float delta underflows to 0: the same grid conversion in log space
        ld = math.log(d) if d > 0 else rdp_log_delta(orders, rho * orders, eps)[0]
    return ld if log else math.exp(ld)


def _mu_target(eps: float, ld: float, method: str) -> float:
    """Largest mu (or sqrt(2 rho)) meeting (eps, delta) under ``method``."""
    if method == "gdp":
        return gdp_mu(eps, log_delta=ld)
    if method == "rdp":
        return math.sqrt(2.0 * linear_rdp_rho(eps, log_delta=ld))
    if method == "mironov":
        return math.sqrt(2.0 * zcdp_rho_for_epsilon_mironov(eps, log_delta=ld))
    # rdp_grid: bisection on rho with dp-accounting's grid conversion
    f = lambda lr: path_epsilon(1.0, 1.0, 4.0 * math.exp(lr), log_delta=ld, method="rdp_grid") - eps  # noqa: E731
    # with beta = Delta = 1, t = 4 rho: mu^2/2 = t/4 = rho
    lo = math.log(zcdp_rho_for_epsilon_mironov(eps, log_delta=ld)) - 1.0
    hi = lo + 2.0
    while f(lo) > 0:
        lo -= 1.0
    while f(hi) < 0:
        hi += 1.0
    rho = nudge(math.exp(optimize.brentq(f, lo, hi, xtol=1e-14)), lambda r: f(math.log(r)) <= 0, up=False)
    return math.sqrt(2.0 * rho)


def beta_max(eps: float, delta: float | None = None, *, sensitivity: float, time: float,
             log_delta: float | None = None, friction: float | None = None, num_chains: int = 1,
             method: str = "gdp") -> float:
    """Largest beta whose path (time ``time``) meets (eps, delta).

    ``gdp`` inverts the exact Gaussian profile: beta = mu*(eps, delta) / (Delta sqrt(K t / (2 gamma))).
    """
    _check_method(method)
    eps = check_epsilon(eps)
    ld = resolve_log_delta(delta, log_delta)
    s = check_positive("sensitivity", sensitivity)
    t = check_positive("time", time)
    gamma = 1.0 if friction is None else check_positive("friction", friction)
    k = check_positive_int("num_chains", num_chains)
    b = _mu_target(eps, ld, method) / (s * math.sqrt(k * t / (2.0 * gamma)))
    # guard the last ulp of the division: the returned beta must meet (eps, delta)
    # (the caller's delta or log_delta as given: the grid method converts at that delta exactly)
    return nudge(b, lambda x: path_epsilon(x, s, t, delta, log_delta=log_delta, friction=friction, num_chains=k,
                                            method=method) <= eps, up=False)


def time_max(eps: float, delta: float | None = None, *, sensitivity: float, beta: float,
             log_delta: float | None = None, friction: float | None = None, num_chains: int = 1,
             method: str = "gdp") -> float:
    """Longest integrated time t whose path at inverse temperature ``beta`` meets (eps, delta)."""
    _check_method(method)
    eps = check_epsilon(eps)
    ld = resolve_log_delta(delta, log_delta)
    s = check_positive("sensitivity", sensitivity)
    b = check_positive("beta", beta)
    gamma = 1.0 if friction is None else check_positive("friction", friction)
    k = check_positive_int("num_chains", num_chains)
    mu = _mu_target(eps, ld, method)
    tm = 2.0 * gamma * (mu / (b * s)) ** 2 / k
    return nudge(tm, lambda x: path_epsilon(b, s, x, delta, log_delta=log_delta, friction=friction, num_chains=k,
                                             method=method) <= eps, up=False)


def beta_max_rdp(eps: float, delta: float | None = None, *, sensitivity: float, time: float,
                 log_delta: float | None = None, friction: float | None = None, num_chains: int = 1) -> float:
    """Closed form of seed-001 digest §4.4 (Mironov conversion), for reference.

    ``beta_max = 2 (sqrt(log(1/delta) + eps) - sqrt(log(1/delta))) / (Delta sqrt(K t / gamma))``.
    Valid but more conservative than :func:`beta_max` with ``method="gdp"``.
    """
    eps = check_epsilon(eps)
    b = -resolve_log_delta(delta, log_delta)
    s = check_positive("sensitivity", sensitivity)
    t = check_positive("time", time)
    gamma = 1.0 if friction is None else check_positive("friction", friction)
    k = check_positive_int("num_chains", num_chains)
    return 2.0 * (eps / (math.sqrt(b + eps) + math.sqrt(b))) / (s * math.sqrt(k * t / gamma))


def lemma_3_1_beta_unsafe(eps: float, delta: float, *, sensitivity: float, time: float) -> float:
    """UNSAFE: the paper's Lemma 3.1 calibration ``2 eps / (Delta sqrt(t log(1/delta)))``.

    It does NOT give (eps, delta)-DP: plugged into the RDP conversion it yields about
    ``2 eps + eps^2 / log(1/delta)`` (seed-001 digest §4.4, §9 item 1, §10.3). Exposed only so
    that tests and audits can show the accountant rejecting it. Never use it to calibrate.
    """
    eps = check_epsilon(eps)
    dl = -resolve_log_delta(delta, None)
    s = check_positive("sensitivity", sensitivity)
    t = check_positive("time", time)
    return 2.0 * eps / (s * math.sqrt(t * dl))
