r"""Last-iterate privacy of contractive noisy iterations (privacy amplification by iteration).

Setting
-------
Noisy (projected) gradient iteration with identical data-independent initial law,

    x_{k+1} = Proj_C( phi_D(x_k) + N(0, sigma^2 I) ),   phi_D(x) = x - h grad U_D(x),  sigma^2 = 2h,

i.e. unadjusted Langevin (ULA) on the potential U_D = beta * L(.; D) at unit temperature.
Assume for every dataset D that U_D is m_U-strongly convex and M_U-smooth on the convex set C
(or R^d) and h <= 2/(m_U + M_U). Then phi_D is c-Lipschitz with
c = max(|1 - h m_U|, |1 - h M_U|) = 1 - h m_U, and for neighbours
sup_x ||phi_D(x) - phi_D'(x)|| <= s = h Delta_U with Delta_U = beta * Delta,
Delta = sup_x ||grad L(x; D) - grad L(x; D')||.

Derivation (Feldman, Mironov, Talwar, Thakurta 2018, "Privacy amplification by iteration";
Altschuler & Talwar 2022, "Privacy of noisy stochastic gradient descent")
------------------------------------------------------------------------------------------------
Shifted Renyi divergence: D^{(z)}_alpha(mu || nu) = inf { D_alpha(mu' || nu) : W_inf(mu, mu') <= z }.
It is non-increasing in the shift z and D^{(0)} = D_alpha. Two reductions:

* shift reduction (FMTT Lemma 20): for a >= 0,
  D^{(z)}(mu * N(0, s^2 I) || nu * N(0, s^2 I)) <= D^{(z+a)}(mu || nu) + alpha a^2 / (2 sigma^2);
* contraction reduction (Altschuler-Talwar): if phi is c-Lipschitz and sup ||phi - phi'|| <= s,
  D^{(c z + s)}(phi#mu || phi'#nu) <= D^{(z)}(mu || nu). (Take mu' within W_inf z of mu attaining
  D^{(z)}; then W_inf(phi#mu, phi'#mu') <= c z + s and data processing bounds D(phi'#mu'||phi'#nu).)
  The projection is 1-Lipschitz and the same for D and D', so it is free (c = 1, s = 0).

Let mu_k, nu_k be the laws of x_k under D, D' and z_0 = 0 (identical initial law). One step with
shifts z_{k-1} -> z_k and a_k = c z_{k-1} + s - z_k >= 0 gives
D^{(z_k)}(mu_k || nu_k) <= D^{(z_{k-1})}(mu_{k-1} || nu_{k-1}) + alpha a_k^2/(2 sigma^2). Ending at
z_K = 0 forces sum_k c^{K-k} a_k = s (1 - c^K)/(1 - c); minimising sum a_k^2 under this linear
constraint (Cauchy-Schwarz) gives a_k = A c^{K-k} with A = s (1 + c)/(1 + c^K), and

    RDP_K(alpha) = alpha s^2 / (2 sigma^2) * (1 + c)(1 - c^K) / ((1 - c)(1 + c^K))      (c < 1),
                 = alpha s^2 K / (2 sigma^2)                                            (c = 1).

The intermediate shifts of this allocation are
z_k = s (1 - c^k)(1 - c^{K-k}) / ((1 - c)(1 + c^K)) >= 0, so it is feasible (checked numerically
in tests/privacy/test_last_iterate.py via :func:`optimal_shift_allocation`).

Consequences (tests check all of them):
* ratio (1+c)(1-c^K)/((1-c)(1+c^K)) = (sum w)^2 / sum w^2 <= K with w_k = c^{K-k}, so the bound
  is never above the path bound alpha Delta_U^2 K h / 4, and equals it up to O((K h m_U)^2);
* K -> inf: alpha beta Delta^2 (2 - h beta m) / (4 m) <= alpha beta Delta^2 / (2 m), the stationary
  Gaussian-mechanism value (exactly the stationary law of ULA on a quadratic);
* for quadratic losses the bound is *attained*: ULA's last iterate is Gaussian with mean shift
  (1 - c^K) Delta / m and variance 2h (1 - c^{2K}) / (1 - c^2), whose exact RDP equals the bound.

Releasing several iterates K_1 < K_2 < ... of one chain composes adaptively: conditional on the
released x_{K_j}, the continuation is a fresh chain started at the same point under D and D', so
the cost is RDP_{K_1} + sum_j RDP_{K_{j+1} - K_j}. Releasing the whole trajectory is the path
accountant's business (:mod:`dp_infer.privacy.path`).

The guarantee is RDP (a linear curve), emitted as a :class:`ZcdpEvent`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import optimize

from .._validation import check_epsilon, check_nonnegative, check_positive, check_positive_int
from .conversions import nudge, linear_rdp_epsilon, linear_rdp_rho, resolve_log_delta
from .events import ZcdpEvent

__all__ = [
    "shifted_rdp_ratio",
    "optimal_shift_allocation",
    "contractive_iteration_rho",
    "ula_contraction",
    "last_iterate_rho",
    "last_iterate_rdp",
    "last_iterate_event",
    "last_iterate_epsilon",
    "last_iterate_beta_max",
    "last_iterate_rho_limit",
]


def _ratio_from_x(x: float, num_steps: float) -> float:
    """(1+c)(1-c^K)/((1-c)(1+c^K)) with c = 1 - x, stable for small x and K = inf."""
    if x == 0.0:
        return float(num_steps)
    if math.isinf(num_steps):
        return (2.0 - x) / x
    if x >= 1.0:  # c <= 0 only happens at c = 0 (x = 1) given our checks
        ck = 0.0 if x == 1.0 else (1.0 - x) ** num_steps
        return (2.0 - x) * (1.0 - ck) / (x * (1.0 + ck))
    lk = num_steps * math.log1p(-x)  # log c^K
    one_minus_ck = -math.expm1(lk)
    ck = math.exp(lk)
    return (2.0 - x) * one_minus_ck / (x * (1.0 + ck))


def shifted_rdp_ratio(contraction: float, num_steps: float) -> float:
    """``(1 + c)(1 - c^K) / ((1 - c)(1 + c^K))`` (``K`` for c = 1; ``(1+c)/(1-c)`` for K = inf)."""
    c = check_nonnegative("contraction", contraction)
    if c > 1.0:
        raise ValueError(f"contraction must lie in [0, 1], got {contraction!r}")
    k = math.inf if (isinstance(num_steps, float) and num_steps == math.inf) else check_positive_int("num_steps", num_steps)
    return _ratio_from_x(1.0 - c, k)


def optimal_shift_allocation(contraction: float, shift: float, num_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Optimal noise-shift allocation (a_1..a_K) and intermediate shifts (z_0..z_K) of the derivation.

    a_k = s (1+c) c^{K-k} / (1 + c^K);  z_k = c z_{k-1} + s - a_k, z_0 = 0 (so z_K = 0 up to rounding).
    """
    c = check_nonnegative("contraction", contraction)
    if c > 1.0:
        raise ValueError(f"contraction must lie in [0, 1], got {contraction!r}")
    s = check_nonnegative("shift", shift)
    k = check_positive_int("num_steps", num_steps)
    j = np.arange(1, k + 1, dtype=np.float64)
    if c == 1.0:
        a = np.full(k, s)
    else:
        a = s * (1.0 + c) * c ** (k - j) / (1.0 + c**k)
    z = np.zeros(k + 1)
    for i in range(1, k + 1):
        z[i] = c * z[i - 1] + s - a[i - 1]
    return a, z


def contractive_iteration_rho(contraction: float, shift: float, noise_std: float, num_steps: float) -> float:
    """RDP slope of the last iterate of a generic contractive noisy iteration.

    ``x_{k+1} = Proj(phi_D(x_k) + N(0, sigma^2 I))`` with phi_D c-Lipschitz and
    ``sup ||phi_D - phi_D'|| <= s``: RDP_K(alpha) = alpha * s^2/(2 sigma^2) * ratio(c, K).
    """
    s = check_nonnegative("shift", shift)
    sig = check_positive("noise_std", noise_std)
    return s * s / (2.0 * sig * sig) * shifted_rdp_ratio(contraction, num_steps)


def ula_contraction(step_size: float, strong_convexity_u: float, smoothness_u: float) -> float:
    """c = max(|1 - h m_U|, |1 - h M_U|) for the gradient map of an m_U-strongly convex, M_U-smooth U.

    Raises if m_U <= 0 (use the path accountant) or h > 2/(m_U + M_U) (then c can exceed 1 - h m_U).
    """
    h = check_positive("step_size", step_size)
    m = check_positive("strong_convexity_u (m_U = beta * m)", strong_convexity_u)
    big_m = check_positive("smoothness_u (M_U = beta * M)", smoothness_u)
    if big_m < m:
        raise ValueError(f"smoothness_u must be >= strong_convexity_u, got M_U={big_m!r} < m_U={m!r}")
    if h * (m + big_m) > 2.0 * (1.0 + 1e-12):
        raise ValueError(
            f"step_size must lie in (0, 2/(m_U + M_U)] = (0, {2.0 / (m + big_m):.6g}] for the last-iterate "
            f"bound, got {h!r} (m_U={m!r}, M_U={big_m!r})"
        )
    return max(abs(1.0 - h * m), abs(1.0 - h * big_m))


def _check_li(beta, sensitivity, step_size, strong_convexity, smoothness):
    beta = check_positive("beta", beta)
    s = check_nonnegative("sensitivity", sensitivity)
    h = check_positive("step_size", step_size)
    m = check_positive("strong_convexity", strong_convexity)
    big_m = check_positive("smoothness", smoothness)
    c = ula_contraction(h, beta * m, beta * big_m)
    x = h * beta * m  # 1 - c in the admissible regime (computed without cancellation)
    # h beta m > 1 only inside ula_contraction's rounding tolerance (h beta (m + M) <= 2 (1 + 1e-12));
    # there c = |1 - h beta M| >= h beta m - 1 > 0, and the ratio needs that c, not 1 - h beta m < 0
    if x > 1.0 or abs((1.0 - c) - x) > 1e-9 * max(1.0, x):
        x = 1.0 - c
    return beta, s, h, m, big_m, x


def _release_gaps(num_steps, release_steps) -> list[int]:
    if release_steps is None:
        return [check_positive_int("num_steps", num_steps)]
    steps = [check_positive_int("release_steps[i]", k) for k in release_steps]
    if not steps or any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError(f"release_steps must be a non-empty strictly increasing sequence of integers >= 1, got {release_steps!r}")
    if num_steps is not None and steps[-1] > check_positive_int("num_steps", num_steps):
        raise ValueError(f"release_steps must not exceed num_steps={num_steps}, got {steps[-1]}")
    return [steps[0]] + [b - a for a, b in zip(steps, steps[1:])]


def last_iterate_rho(beta: float, sensitivity: float, step_size: float, num_steps: int | None,
                     strong_convexity: float, smoothness: float, *, num_chains: int = 1,
                     release_steps: Sequence[int] | None = None) -> float:
    """RDP slope of the released iterate(s) of ULA on U = beta * L (loss constants m, M; U has beta m, beta M).

    ``rho = (h beta^2 Delta^2 / 4) * ratio(1 - h beta m, K)`` per release gap, summed over gaps and
    multiplied by ``num_chains``.
    """
    beta, s, h, m, big_m, x = _check_li(beta, sensitivity, step_size, strong_convexity, smoothness)
    k = check_positive_int("num_chains", num_chains)
    gaps = _release_gaps(num_steps, release_steps)
    per = h * beta * beta * s * s / 4.0
    return k * per * sum(_ratio_from_x(x, g) for g in gaps)


def last_iterate_rdp(alpha, beta, sensitivity, step_size, num_steps, strong_convexity, smoothness, **kw) -> np.ndarray:
    """RDP at order(s) alpha: ``alpha * last_iterate_rho(...)``."""
    a = np.asarray(alpha, dtype=np.float64)
    if np.any(~np.isfinite(a)) or np.any(a <= 1):
        raise ValueError(f"alpha (Renyi order) must lie in (1, inf), got {alpha!r}")
    return a * last_iterate_rho(beta, sensitivity, step_size, num_steps, strong_convexity, smoothness, **kw)


def last_iterate_rho_limit(beta: float, sensitivity: float, strong_convexity: float, step_size: float = 0.0) -> float:
    """sup over K of the per-chain slope: ``beta Delta^2 (2 - h beta m) / (4 m)`` (<= beta Delta^2/(2m))."""
    beta = check_positive("beta", beta)
    s = check_nonnegative("sensitivity", sensitivity)
    m = check_positive("strong_convexity", strong_convexity)
    h = check_nonnegative("step_size", step_size)
    return beta * s * s * (2.0 - h * beta * m) / (4.0 * m)


_ASSUMPTIONS = (
    "unadjusted Langevin x <- Proj_C(x - h beta grad L(x; D) + N(0, 2h I)) (no Metropolis correction); "
    "C a fixed data-independent closed convex set (or R^d)",
    "for every dataset D, L(.; D) (including any regulariser) is m-strongly convex and M-smooth on C, "
    "so U = beta L is (beta m)-strongly convex and (beta M)-smooth",
    "step size h <= 2 / (beta (m + M)) (checked), so the gradient map is (1 - h beta m)-Lipschitz",
    "full-batch gradients with sup_x ||grad L(x; D) - grad L(x; D')||_2 <= sensitivity for neighbouring D, D'",
    "initial point drawn from the same data-independent law for D and D'",
    "beta, h, number of steps, release steps and number of chains fixed independently of the data",
    "released: only the listed iterates of each chain (not the trajectory)",
)


def last_iterate_event(beta: float, sensitivity: float, step_size: float, num_steps: int | None,
                       strong_convexity: float, smoothness: float, *, num_chains: int = 1,
                       release_steps: Sequence[int] | None = None, label: str = "langevin_last_iterate") -> ZcdpEvent:
    """ZcdpEvent (linear RDP curve) for the released iterate(s) of ``num_chains`` ULA chains."""
    rho = last_iterate_rho(beta, sensitivity, step_size, num_steps, strong_convexity, smoothness,
                           num_chains=num_chains, release_steps=release_steps)
    steps = [num_steps] if release_steps is None else list(release_steps)
    return ZcdpEvent(rho=rho, label=label, assumptions=_ASSUMPTIONS,
                     metadata={"route": "last_iterate", "beta": float(beta), "sensitivity": float(sensitivity),
                               "step_size": float(step_size), "release_steps": [int(k) for k in steps],
                               "strong_convexity": float(strong_convexity), "smoothness": float(smoothness),
                               "num_chains": int(num_chains)})


def last_iterate_epsilon(beta, sensitivity, step_size, num_steps, strong_convexity, smoothness,
                         delta: float | None = None, *, log_delta: float | None = None, **kw) -> float:
    """eps at delta of the last iterate (continuous-order CKS conversion of the linear curve)."""
    rho = last_iterate_rho(beta, sensitivity, step_size, num_steps, strong_convexity, smoothness, **kw)
    return linear_rdp_epsilon(rho, delta, log_delta=log_delta)[0]


def last_iterate_beta_max(eps: float, delta: float | None = None, *, sensitivity: float, strong_convexity: float,
                          smoothness: float | None = None, step_size: float | None = None,
                          num_steps: int | None = None, num_chains: int = 1,
                          log_delta: float | None = None) -> float:
    """Largest beta for which the last iterate meets (eps, delta) (RDP route).

    * ``step_size`` and ``num_steps`` both None: the bound uniform over every admissible h and K,
      rho <= K_chains * beta Delta^2 / (2 m), so beta = 2 m rho*(eps, delta) / (K_chains Delta^2).
    * ``step_size`` given (needs ``smoothness``): beta is also capped by h <= 2/(beta (m + M));
      ``num_steps=None`` means the K -> inf bound at that h.
    """
    eps = check_epsilon(eps)
    ld = resolve_log_delta(delta, log_delta)
    s = check_positive("sensitivity", sensitivity)
    m = check_positive("strong_convexity", strong_convexity)
    k = check_positive_int("num_chains", num_chains)
    rho_max = linear_rdp_rho(eps, log_delta=ld)
    if step_size is None:
        if num_steps is not None:
            raise ValueError("num_steps needs step_size (give both, or neither for the uniform bound)")
        b = 2.0 * m * rho_max / (k * s * s)
        return nudge(b, lambda x: k * x * s * s / (2.0 * m) <= rho_max, up=False)
    h = check_positive("step_size", step_size)
    if smoothness is None:
        raise ValueError("smoothness is required when step_size is given")
    big_m = check_positive("smoothness", smoothness)
    b_cap = 2.0 / (h * (m + big_m))

    def rho_of(b):
        if num_steps is None:
            return k * last_iterate_rho_limit(b, s, m, h)
        return last_iterate_rho(b, s, h, num_steps, m, big_m, num_chains=k)

    if rho_of(b_cap) <= rho_max:
        return b_cap
    # rho is increasing in beta on (0, b_cap] (more signal, faster contraction only up to (2-x)/x)
    f = lambda lb: math.log(rho_of(math.exp(lb))) - math.log(rho_max)  # noqa: E731
    lo = math.log(b_cap) - 1.0
    while f(lo) > 0:
        lo -= 1.0
    b = math.exp(float(optimize.brentq(f, lo, math.log(b_cap), xtol=1e-14)))
    return nudge(b, lambda x: rho_of(x) <= rho_max, up=False)
