"""The smoothed Rashomon threshold: flat on the set exactly, a quadratic ramp of declared loss
width ``w`` just outside it, the loss itself beyond.

The target ``exp(-beta max{L, t})`` (``t = b + psi``, ``b`` the threshold base) is not smooth:
at the boundary of ``G = {L <= t}`` the gradient of the potential jumps from 0 to
``beta |grad L|``, up to ``beta sqrt(2 M (psi + tol))``. An unadjusted Langevin step planned
from ``beta M`` alone overshoots that jump and crowds the draws towards the centre of G. The
sampler therefore runs on

    f_w(L) = t + h_w(L - t),   h_w(u) = 0 (u <= 0),  u^2 / (2 w) (0 < u <= w),  u - w/2 (u > w)

and plans its step from the curvature of the ramp. What the smoothing does, exactly:

1. **On G nothing changes**: ``f_w = max{L, t} = t`` there, so the target is exactly uniform on G
   and maximal there (the two properties of a Rashomon sampler).
2. **Outside G the density rises by a bounded factor**: ``0 <= max{L, t} - f_w <= w / 2``, so the
   density outside G is multiplied by a factor in ``[1, exp(beta w / 2)]`` (pointwise, before
   normalisation) and the share of the target in G lies in
   ``[P(G) / (P(G) + exp(beta w / 2) (1 - P(G))), P(G)]`` (:func:`in_set_share_bounds`).
3. **Privacy**: ``h_w(u) = E_{tau ~ U(0, w)} max{u, tau} - w/2``, so ``f_w`` is an average of
   thresholded losses with thresholds ``psi + tau``, tau in ``[0, w]`` (data independent), and
   its gradient difference between neighbours is at most the average of theirs:
   ``G/n + min(L, sqrt(2 M) E sqrt(a + tau))`` with ``a = psi + tol`` and
   ``E sqrt(a + tau) = (2 / (3 w)) ((a + w)^{3/2} - a^{3/2})`` (:func:`smoothed_sensitivity`).
4. **Curvature**: ``grad^2 f_w(L) = h_w' grad^2 L + h_w'' grad L grad L^T``, with ``h_w' <= 1``
   and ``h_w'' = 1/w`` on the ramp only, where ``L - L*_glob <= psi + tol + w`` and so
   ``|grad L|^2 <= 2 M (psi + tol + w)`` (descent lemma; needs the certified base, m > 0).
   The step is planned from ``beta (M + min(L^2, 2 M (psi + tol + w)) / w)``
   (:func:`smoothed_curvature`): the jump ``beta |grad L|`` spread over loss width ``w``.

``w = 0`` is the unsmoothed ``max`` (used only when psi = 0, where the jump is at most
``beta sqrt(2 M tol)``).
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from .._validation import check_nonnegative, check_positive, check_positive_int
from ..losses import LossConstants

#: Default threshold width as a fraction of psi (``w = psi / 20``): the curvature of the ramp
#: is then about 42 M, and the sensitivity grows by about 1.2% over the unsmoothed threshold.
WIDTH_FRACTION = 0.05


def default_width(psi: float) -> float:
    """The declared ramp width used when none is given: ``WIDTH_FRACTION * psi`` (0 for psi = 0)."""
    return WIDTH_FRACTION * check_nonnegative("psi", psi)


def ramp(u, width: float):
    """``h_w(u)``: 0 for u <= 0, u^2/(2w) on (0, w], u - w/2 beyond (``width = 0``: max(u, 0))."""
    if width == 0:
        return jnp.maximum(u, 0.0)
    return jnp.where(u <= 0, 0.0, jnp.where(u <= width, u * u / (2.0 * width), u - 0.5 * width))


def smoothed_threshold(L, threshold, width: float):
    """``f_w(L) = t + h_w(L - t)``: equal to ``max{L, t}`` on G and beyond ``t + w``."""
    return threshold + ramp(L - threshold, width)


def _certified(c: LossConstants) -> bool:
    return c.smoothness is not None and c.strong_convexity > 0


def _mean_sqrt(a: float, width: float) -> float:
    """E sqrt(a + tau), tau ~ U(0, w) (sqrt(a) for w = 0)."""
    if width == 0:
        return math.sqrt(a)
    return (2.0 / (3.0 * width)) * ((a + width) ** 1.5 - a ** 1.5)


def smoothed_sensitivity(constants: LossConstants, n: int, psi: float, width: float,
                         tol: float = 0.0) -> float:
    """sup_theta ||grad f_w(L_D) - grad f_w(L_D')|| from declared constants (fact 3 above).

    ``tol`` is the declared bound on ``b - L*_glob`` (plus float slack). With m > 0 and M
    declared: ``G/n + min(L, sqrt(2 M) E sqrt(psi + tol + tau))``, tau ~ U(0, w); otherwise
    ``G/n + L``. ``width = 0`` gives :func:`dp_infer.potentials.thresholded_sensitivity`.
    """
    if not isinstance(constants, LossConstants):
        raise ValueError(f"constants must be a dp_infer.losses.LossConstants, got {type(constants).__name__}")
    n = check_positive_int("n", n)
    psi = check_nonnegative("psi", psi)
    width = check_nonnegative("threshold_width", width)
    tol = check_nonnegative("tol", tol)
    base = constants.grad_diff / n
    lip = constants.lipschitz
    inner = lip
    if _certified(constants):
        inner = min(lip, math.sqrt(2.0 * constants.smoothness) * _mean_sqrt(psi + tol, width))
    if not math.isfinite(base + inner):
        raise ValueError(
            "the thresholded loss has no finite gradient sensitivity: without strong convexity "
            "(m > 0, which certifies L*) and a declared smoothness M, the bound is G/n + L and the "
            "loss declares L = inf; use a bounded domain or an L2 regulariser (l2 > 0)")
    return base + inner


def threshold_gradient_bound(constants: LossConstants, psi: float, width: float, tol: float = 0.0) -> float:
    """Largest |grad L| on the ramp ``t <= L <= t + w``: ``min(L, sqrt(2 M (psi + tol + w)))``."""
    lip = constants.lipschitz
    if _certified(constants):
        return min(lip, math.sqrt(2.0 * constants.smoothness * (psi + tol + width)))
    return lip


def smoothed_curvature(constants: LossConstants, psi: float, width: float, tol: float = 0.0) -> float:
    """An upper bound on the Hessian of ``f_w(L)`` (fact 4): ``M + g^2 / w`` with ``g`` from
    :func:`threshold_gradient_bound` (``M`` for ``width = 0``)."""
    if constants.smoothness is None:
        raise ValueError("the loss declares no smoothness M: the step size cannot be chosen")
    M = constants.smoothness
    if width == 0:
        return M
    width = check_positive("threshold_width", width)
    g = threshold_gradient_bound(constants, psi, width, tol)
    if not math.isfinite(g):
        raise ValueError("the threshold ramp has no finite curvature bound: the loss declares "
                         "L = inf and no strong convexity (m > 0) certifies L*; use l2 > 0")
    return M + g * g / width


def shell_factor(beta: float, width: float) -> float:
    """``exp(beta w / 2)``: the largest factor by which the smoothing raises the density outside G."""
    return math.exp(min(0.5 * beta * width, 700.0))


def in_set_share_bounds(p_exact: float, beta: float, width: float) -> tuple[float, float]:
    """Share of the smoothed target in G given the exact target's share ``p_exact`` (fact 2)."""
    f = shell_factor(beta, width)
    return p_exact / (p_exact + f * (1.0 - p_exact)), p_exact
