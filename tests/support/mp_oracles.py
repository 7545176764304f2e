"""High-precision (mpmath) oracles shared by the privacy tests.

They evaluate the closed forms directly, independently of the library's floating-point paths
(log_ndtr, log-space subtraction, root finding), so a test can compare without tolerance on the
safe side.
"""

from __future__ import annotations

import mpmath


def gdp_delta_mp(eps, mu, dps: int = 60):
    """Exact delta(eps) of mu-GDP (the Gaussian privacy profile), as an mpf in ``dps`` digits.

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2); 0 for mu = 0.
    """
    with mpmath.workdps(dps):
        e, m = mpmath.mpf(eps), mpmath.mpf(mu)
        if m == 0:
            return mpmath.mpf(0)
        return mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)


def gdp_log_delta_mp(eps, mu, dps: int = 200):
    """log of :func:`gdp_delta_mp` (200 digits by default: deltas far below float's range)."""
    with mpmath.workdps(dps):
        return mpmath.log(gdp_delta_mp(eps, mu, dps))


def gdp_total_delta_mp(eps, mu, tau, dps: int = 200):
    """delta_mu(eps) + (1 + e^eps) tau: mu-GDP with a sampler whose law is within TV tau of the target."""
    with mpmath.workdps(dps):
        return gdp_delta_mp(eps, mu, dps) + (1 + mpmath.exp(mpmath.mpf(eps))) * mpmath.mpf(tau)


def gdp_mu_for_delta_mp(eps, delta, lo="0.01", hi=20, dps: int = 60) -> float:
    """The largest mu whose Gaussian profile meets ``delta`` at ``eps``: bisection in ``dps`` digits
    on [lo, hi] (delta(eps) grows with mu), returned as the float at the safe end of the bracket."""
    with mpmath.workdps(dps):
        a, b = mpmath.mpf(lo), mpmath.mpf(hi)
        for _ in range(4 * dps):
            mid = (a + b) / 2
            a, b = (mid, b) if gdp_delta_mp(eps, mid, dps) <= delta else (a, mid)
        return float(a)
