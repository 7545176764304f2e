"""Privacy of an exact (stationary) draw from a Gibbs posterior.

Gaussian DP of strongly log-concave Gibbs measures (seed 002, Gopi, Lee, Liu 2022, Thm 4.1 /
Thm 6.2; digest §3.1-3.3)
---------------------------------------------------------------------------------------------
If the potentials U_D, U_D' are both m_U-strongly convex on a convex K and U_D - U_D' is
L_U-Lipschitz on K, the pair exp(-U_D), exp(-U_D') is (L_U / sqrt(m_U))-GDP. For the regularised
exponential mechanism ``exp(-k (F(x; D) + mu/2 |x|^2))`` with F the *mean* of per-example losses,
replace-one adjacency (one user's record substituted, n fixed) and ``f(.; s) - f(.; s')``
G-Lipschitz for all records s, s' (G is the Lipschitz constant of the *difference* of two
per-example losses: G <= 2 L for L-Lipschitz losses), this gives

    s = G sqrt(k) / (n sqrt(mu))                       (digest §3.3)

and, more generally, ``s = Delta sqrt(beta / m)`` for ``exp(-beta L(.; D))`` where L(.; D) is
m-strongly convex (loss + regulariser) and ``Delta = sup ||grad L(.; D) - grad L(.; D')|| = G/n``.
Exact only for an exact draw; a sampler within TV tau of it is (eps, delta_s(eps) + (1+e^eps) tau)-DP
(digest §3.6: the paper's ``+ tau`` is wrong). GDP itself is not preserved under TV error, so the
accountant keeps the GDP curve of the ideal draw and the TV slack as two separate numbers.

Corrected seed-001 Theorem 2.7 (digest §4.6) for the thresholded (Rashomon) Gibbs measure
exp(-beta max{L, L* + psi}) on C: see :func:`theorem_2_7_beta_max`.
"""

from __future__ import annotations

import math
import sys

from scipy import special

from .._validation import check_epsilon, check_nonnegative, check_positive, check_positive_int
from .conversions import nudge, gdp_log_delta, gdp_mu, resolve_log_delta, tv_delta_slack
from .events import GdpEvent

__all__ = [
    "gibbs_gdp_mu",
    "regularized_exp_mech_mu",
    "stationary_event",
    "stationary_beta_max",
    "theorem_2_7_beta_max",
    "tv_delta_slack",
]

_ASSUMPTIONS = (
    "the released point is an EXACT draw from exp(-beta L(theta; D)) on a fixed convex set K (or R^d); "
    "any sampler error is declared as tv_error",
    "for every dataset D, L(.; D) (loss mean + regulariser) is m-strongly convex on K",
    "L(.; D) - L(.; D') is Delta-Lipschitz on K for neighbouring D, D' (Delta = G/n, G the Lipschitz "
    "constant of per-example loss differences, replace-one adjacency)",
    "beta, the regulariser and K fixed independently of the data",
)


def gibbs_gdp_mu(beta: float, sensitivity: float, strong_convexity: float) -> float:
    """GDP of one exact draw from exp(-beta L): ``beta Delta / sqrt(beta m) = Delta sqrt(beta / m)``."""
    beta = check_nonnegative("beta", beta)
    s = check_nonnegative("sensitivity", sensitivity)
    m = check_positive("strong_convexity", strong_convexity)
    return s * math.sqrt(beta / m)


def regularized_exp_mech_mu(k: float, G: float, n: int, mu: float, loss_strong_convexity: float = 0.0) -> float:
    """Gopi-Lee-Liu: ``G sqrt(k) / (n sqrt(mu + lambda))`` for exp(-k (F + mu/2 |x|^2)), F lambda-strongly convex."""
    k = check_nonnegative("k", k)
    G = check_nonnegative("G", G)
    n = check_positive_int("n", n)
    lam = check_nonnegative("loss_strong_convexity", loss_strong_convexity)
    mu = check_nonnegative("mu", mu)
    if mu + lam <= 0:
        raise ValueError("mu + loss_strong_convexity must lie in (0, inf): the potential must be strongly convex")
    return G * math.sqrt(k) / (n * math.sqrt(mu + lam))


def stationary_event(beta: float, sensitivity: float, strong_convexity: float, *, tv_error: float = 0.0,
                     num_draws: int = 1, label: str = "gibbs_stationary_draw") -> GdpEvent:
    """GdpEvent for ``num_draws`` independent exact draws (mu * sqrt(num_draws)), TV tau each."""
    nd = check_positive_int("num_draws", num_draws)
    mu1 = gibbs_gdp_mu(beta, sensitivity, strong_convexity)
    tv = check_nonnegative("tv_error", tv_error)
    return GdpEvent(mu=mu1 * math.sqrt(nd), label=label, assumptions=_ASSUMPTIONS, tv_error=tv * nd,
                    metadata={"route": "stationary", "beta": float(beta), "sensitivity": float(sensitivity),
                              "strong_convexity": float(strong_convexity), "num_draws": nd,
                              "tv_error_per_draw": tv})


def stationary_beta_max(eps: float, delta: float | None = None, *, sensitivity: float, strong_convexity: float,
                        tv_error: float = 0.0, num_draws: int = 1, log_delta: float | None = None) -> float:
    """Largest beta with delta_mu(eps) + (1 + e^eps) * num_draws * tv_error <= delta (exact GDP inverse)."""
    eps = check_epsilon(eps)
    ld = resolve_log_delta(delta, log_delta)
    s = check_positive("sensitivity", sensitivity)
    m = check_positive("strong_convexity", strong_convexity)
    nd = check_positive_int("num_draws", num_draws)
    slack = tv_delta_slack(eps, nd * check_nonnegative("tv_error", tv_error))
    if slack > 0:
        d = math.exp(ld)
        if slack >= d:
            raise ValueError(
                f"tv_error too large: the sampling slack (1 + e^eps) * tv = {slack:.3g} already exceeds delta = {d:.3g}"
            )
        ld = math.log(d - slack)
    mu = gdp_mu(eps, log_delta=ld) / math.sqrt(nd)
    # (mu / s) ** 2 raised OverflowError for mu / s > ~1e154; where m (mu / s)^2 lies beyond float64,
    # the largest beta with a finite beta / m (every such beta meets the target) is the answer
    r = mu / s
    b = min(m * r * r, sys.float_info.max * min(m, 1.0) * (1.0 - 2.0**-50))
    return nudge(b, lambda x: gdp_log_delta(eps, gibbs_gdp_mu(x, s, m) * math.sqrt(nd)) <= ld, up=False)


def theorem_2_7_beta_max(eps: float, delta: float, *, sensitivity: float, strong_convexity: float,
                         smoothness: float, psi: float) -> float:
    """Largest beta admitted by the corrected seed-001 Theorem 2.7 (digest §4.6) for psi >= 0.

    Exact sampling from exp(-beta max{L(.; D), L*_D + psi}) on a convex C is (eps, delta)-DP if
      (a) beta psi <= 1,
      (b) beta Delta_psi (4 sqrt(2 psi / m) + Delta / m) <= eps / 2,
      (c) beta e^{beta psi} <= eps^2 m / (8 Delta_psi^2 log(1/delta)),
    with Delta_psi = Delta + sqrt(2 M psi) (digest §4.3). (c) is Herbst's argument with the exact
    Holley-Stroock LSI constant beta m e^{-beta psi} of Lemma D.4; the digest's printed
    (c) ``beta <= eps^2 m / (8 e Delta_psi^2 log(1/delta))`` is the special case that uses
    e^{beta psi} <= e from (a), so this is never smaller. Needs convexity, M-smoothness, L* the
    exact global minimum, and exact sampling.
    """
    eps = check_epsilon(eps)
    ld = resolve_log_delta(delta, None)
    s = check_positive("sensitivity", sensitivity)
    m = check_positive("strong_convexity", strong_convexity)
    big_m = check_positive("smoothness", smoothness)
    psi = check_nonnegative("psi", psi)
    d_psi = s + math.sqrt(2.0 * big_m * psi)
    b_b = eps / (2.0 * d_psi * (4.0 * math.sqrt(2.0 * psi / m) + s / m))
    rhs = eps * eps * m / (8.0 * d_psi * d_psi * (-ld))
    if psi == 0.0:
        b_c = rhs
        b_a = math.inf
    else:
        # beta e^{beta psi} = rhs  <=>  (beta psi) e^{beta psi} = psi rhs  <=>  beta = W(psi rhs) / psi
        b_c = float(special.lambertw(psi * rhs).real) / psi
        b_a = 1.0 / psi
    return min(b_a, b_b, b_c)
