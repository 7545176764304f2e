"""The thesis's explicit recipe (seed 004, discretised-Renyi analysis of Langevin): horizon,
inflated Renyi order, step-size conditions and the weak triangle inequality, as pure functions
of the declared constants. Used by :mod:`dp_infer.privacy.discretised`."""

from __future__ import annotations

import math

from .conversions import nudge

# ---------------------------------------------------------------------------------------------
# the §3.7 recipe, normalised units (m = 1, kappa = M/m)
# ---------------------------------------------------------------------------------------------
_LN2 = math.log(2.0)


def recipe_horizon(alpha_s: float, eps_s: float, dim: int, kappa: float) -> float:
    """Normalised horizon tau of digest §3.7 step 1 (both directions of Thm 42, eps_s/3 split)."""
    if kappa == 1.0:
        return 0.0  # k ln kappa = 0: the N(0, I) start has zero divergence bound (Lemma 59)
    lg = max(0.0, math.log(3.0 * dim * math.log(kappa) / eps_s))
    t1 = 2.0 * alpha_s * lg
    t2 = 0.5 * math.log((2.0 * alpha_s - 1.0) * kappa) + alpha_s * lg
    return max(t1, t2)


def _jensen_bound(a2: float, kappa_j: float) -> float:
    """R_{a2}(P||Q) after the Jensen step with the digest's corrected ln 30 (Thm 52 proof step 4)."""
    return (math.log(30.0) + 0.5 * math.log(a2) + 0.5 * math.log(kappa_j)) / ((a2 - 1.0) * kappa_j)


def recipe_inflated_order(alpha_s: float, eps_s: float) -> tuple[float, str]:
    """(alpha', branch) of digest §3.7 step 2: Thm 52 applied at a2 = 2 alpha_s with budget eps_s / 3."""
    a2 = 2.0 * alpha_s
    e2 = eps_s / 3.0
    if a2 >= 4.0 and e2 >= 3.0 * math.log(a2) / (a2 - 1.0):
        return 4.0 * a2 - 2.0, "direct"
    e = min(e2, math.exp(-1.0))
    kj = 3.0 * math.log(a2) * math.log(1.0 / e) / ((a2 - 1.0) * e)
    # the O~ statement hides the check; make it explicit (never binding in the cases we tried)
    if _jensen_bound(a2, kj) > e:
        lo, hi = kj, 2.0 * kj
        while _jensen_bound(a2, hi) > e:
            lo, hi = hi, 2.0 * hi
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if _jensen_bound(a2, mid) > e else (lo, mid)
        kj = hi
    # alpha' / 4 + 1/2 = a2 kappa_J  <=>  alpha' = 4 a2 kappa_J - 2 = 12 a2 ln a2 ln(1/e) / ((a2-1) e) - 2
    return 4.0 * a2 * kj - 2.0, "jensen"


def recipe_step_condition(eta: float, tau: float, alpha_p: float, kappa: float, dim: int, c: float) -> float:
    """Left side of Thm 52's condition ``(3/4) tau a'(a'-1) kappa^4 c^2 (k + 2 ln(tau/eta)) eta`` (< ln 2 needed)."""
    return 0.75 * tau * alpha_p * (alpha_p - 1.0) * kappa**4 * c * c * (dim + 2.0 * math.log(tau / eta)) * eta


def recipe_step_size(tau: float, alpha_p: float, kappa: float, dim: int, c: float) -> float:
    """Largest eta (before rounding to tau/T) with eta <= 2/(kappa+1), eta <= 1 and the Thm 52 condition."""
    cap = min(1.0, 2.0 / (kappa + 1.0))
    if tau <= 0.0:
        return cap
    ok = lambda x: recipe_step_condition(x, tau, alpha_p, kappa, dim, c) < _LN2  # noqa: E731
    if ok(cap):
        return cap
    # eta (k + 2 ln(tau/eta)) is increasing in eta wherever the condition binds, so bisect on ln eta
    hi = math.log(cap)
    lo = hi - 10.0
    while not ok(math.exp(lo)):
        hi, lo = lo, lo - 10.0
        if lo < -2000.0:
            return 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if ok(math.exp(mid)):
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return nudge(math.exp(lo), ok, up=False)


def underdamped_step_size(tau: float, alpha_p: float, kappa: float, dim: int, c: float,
                           mu: float, gamma: float) -> float:
    """Thm 65 (digest-corrected mu^2): (3/4) mu^2 tau^2 k a'(a'-1) kappa^2 c^2 eta^2 < ln 2, eta <= gamma/(mu kappa)."""
    cap = gamma / (mu * kappa)
    if tau <= 0.0:
        return cap
    bound = math.sqrt(_LN2 / (0.75 * mu * mu * tau * tau * dim * alpha_p * (alpha_p - 1.0) * kappa**2 * c * c))
    return min(cap, bound * (1.0 - 1e-12))


def weak_triangle_rdp(alpha: float, forward: float, exact: float, reverse: float) -> float:
    """RDP at order alpha of the released sample, digest §3.6 (Fact 46 twice, p = q = 2).

    ``forward`` bounds R_{2a}(P_D||pi_D), ``exact`` bounds R_{4a-2}(pi_D||pi_D'), ``reverse``
    bounds R_{4a-3}(pi_D'||P_D').
    """
    a = float(alpha)
    if not a > 1.0:
        raise ValueError(f"alpha (Renyi order) must lie in (1, inf), got {alpha!r}")
    return (a - 0.5) / (a - 1.0) * forward + (2.0 * a - 1.5) / (2.0 * a - 2.0) * exact + reverse
