"""Privacy accounting of Poisson-subsampled SGLD (:mod:`dp_infer.kernels.sgld`).

The mechanism
-------------
One SGLD step on ``U = beta * L(theta; D)`` with Poisson sampling rate ``q``, per-example
clipping at ``C`` and a *public* normaliser ``n``::

    B_i ~ Bernoulli(q) independently,  g = (1 / (q n)) sum_i B_i clip_C(grad l_i(theta)),
    theta <- Proj(theta - h beta g + sqrt(2 h) xi).

Conditioned on the released history, a step is the Poisson-subsampled Gaussian mechanism on
the clipped sum ``S = sum_i B_i clip_C(grad l_i)``: the output is ``theta - (h beta / (q n)) S``
plus ``N(0, 2h I)`` followed by a data-independent projection (post-processing). Each clipped
term has norm ``<= C``, so in units of ``C`` the noise multiplier is

    sigma = sqrt(2 h) / (h beta C / (q n)) = q n sqrt(2 / h) / (beta C).

``T`` steps and ``K`` chains are ``K T`` adaptive compositions (seed-001 digest §9 item 14: the
sensitivity per step is that of the *minibatch* estimate, ~C / (q n) = C / b, not G / n).

Neighbouring relation: replace-one (dp_infer's default), by the antipodal pair
------------------------------------------------------------------------------
dp-accounting's RDP accountant supports ``PoissonSampledDpEvent`` only for ADD_OR_REMOVE_ONE and
REPLACE_SPECIAL. Its PLD accountant has a REPLACE_ONE mode, which models one step by the 1-D
antipodal pair ``P = (1-q) N(0, s^2) + q N(+1, s^2)`` vs ``Q = (1-q) N(0, s^2) + q N(-1, s^2)``
(``s = sigma``, in units of ``C``). That pair dominates a step of this kernel, whose clipped
gradients are vectors:

*Claim.* For ``a, b`` in ``R^d`` with ``|a|, |b| <= 1``, let ``P_a = (1-q) N(0, s^2 I) + q N(a, s^2 I)``.
Then ``H_g(P_a || P_b) <= H_g(P || Q)`` for every ``g > 0`` (``H_g(P||Q) = sup_S P(S) - g Q(S)``, the
hockey-stick divergence), so every f-divergence -- Renyi's included -- of ``(P_a, P_b)`` is at most
that of the antipodal pair (an f-divergence is ``int f''(g) H_g dg`` over ``g > 0``).

*Proof.* Take ``s = 1`` (rescale). With ``R = N(0, I)`` and ``l_a(y) = dN(a, I)/dR = exp(<a, y> - |a|^2/2)``,
``H_g(P_a || P_b) = q E_R[(l_a - g l_b - c)_+]`` with ``c = (g - 1)(1 - q)/q``. (i) Direction: ``l_a``'s law
under ``R`` depends on ``|a|`` only (``<a, Y>/|a| ~ N(0, 1)``), and ``(u, v) -> (u - g v - c)_+`` is
submodular (a convex function of ``u - g v``), so among all couplings of the two marginals the
countermonotone one maximises the expectation (Tchen 1980; Cambanis, Simons, Stout 1976). ``b = -|b| a/|a|``
makes ``l_a`` increasing and ``l_b`` decreasing in the same ``Z = <a, Y>/|a|``: countermonotone. So
``H_g(P_a || P_b) <= H_g`` of the 1-D pair with means ``r_a = |a|`` and ``-r_b = -|b|``. (ii) Radius: there
``H = q E_Z[(l_{r_a}(Z) - g l_{-r_b}(Z) - c)_+]``; the bracket is increasing in ``Z``, so it is positive on a
half-line ``Z > z*``, and ``dH/dr_a = q E_Z[1{Z > z*} (Z - r_a) l_{r_a}(Z)] = q phi(z* - r_a) > 0``,
``dH/dr_b = q g E_Z[1{Z > z*} (Z + r_b) l_{-r_b}(Z)] = q g phi(z* + r_b) > 0``: ``H`` grows with both
radii, up to 1. (iii) The other records: conditioned on the released history, a step's output is the
pair above shifted by the same random sum of the other records' clipped gradients (their Poisson masks
are the same in both worlds); hockey-stick divergences are jointly convex, so mixing the same shifts
with the same weights does not increase them. (iv) Adaptive composition of Renyi divergences adds. []
(``tests/privacy/test_minibatch.py`` checks the claim by 2-D quadrature over pairs ``(a, b)`` in the disc.)

The curve (:func:`replace_one_rdp`): ``D_alpha(P || Q) = log E_Q[(P/Q)^alpha] / (alpha - 1)`` of the
antipodal pair, by the trapezoid rule in float64 on a grid of :data:`QUADRATURE_POINTS_PER_SD` points a
noise sd over ``[-L, L]``, ``L = 2 alpha_max + 40 s + 5`` (the integrand peaks near ``y = alpha`` with width
``s``, so it is below ``e^-800`` of its peak at the ends), computed on the grid and on the grid halved;
the larger value plus their difference plus a bound on the sum's rounding is kept (a margin on the
safe side: the rule converges geometrically on this smooth integrand). Where the moment is close to 1
the sum is of ``Q expm1(alpha log(P/Q))``, so a tiny divergence keeps its digits. ``K T`` steps give
``K T`` times the curve. Before (this module up to 2026-11-29) the curve was a group-privacy bound
through a zero record (REPLACE_SPECIAL and the weak triangle inequality): 1.3-2.2x looser in eps at
practical settings, and up to 18x at small eps. The unamplified Gaussian curve with sensitivity ``2C``,
``2 K T alpha / sigma^2``, is still a valid bound, and the event keeps the pointwise minimum; below
``sigma`` = :data:`MIN_QUADRATURE_SIGMA` (an almost noiseless step, whose eps is in the hundreds at any
useful order) it is the curve alone. At ``q = 1`` there is no subsampling and the event is exactly the
path accountant's ``GdpEvent`` with ``mu = beta * (2C/n) * sqrt(K T h / 2)``
(= ``path_mu(beta, 2C/n, T h, K)``; ``C/n`` under add/remove).

The event (:class:`~dp_infer.privacy.events.SubsampledGaussianEvent`) carries this curve AND the
mechanism it describes (noise multiplier, q, ``K T`` steps, the relation). The accountant converts the
curve (RDP route, which composes with any event) and builds dp-accounting's pessimistic PLD of the
mechanism (PLD route, when the run's other events have PLDs too), and reports the tighter: for a
minibatch run alone, the PLD, which removes the 9-25% that the RDP-to-(eps, delta) conversion cost
(docs/results.md, "The replace-one minibatch accounting").

``neighboring="add_remove"`` is available for users whose unit of privacy is the presence of a
record: the event is then dp-accounting's ADD_OR_REMOVE_ONE curve itself (sensitivity ``C`` in
units of the clipped sum). Under add/remove the number of rows is private, so ``n`` must be a
fixed PUBLIC normaliser that the sampler divides by whatever the data: run
:class:`~dp_infer.kernels.sgld.MinibatchSGLD` / ``sample_chain`` with ``normaliser=n``. With
the row count as normaliser a removal changes the mean by up to ``2C / (n + 1)``, not ``C / n``
(at ``q = 1`` the claim would be about half the true eps); the event states this assumption.

The chain sums its clipped gradients in float32: the per-record sensitivity the event charges is ``C`` times
``1 + float32_gradient_margin(n)`` (:mod:`dp_infer.privacy.float32_margin`; a batch has at most n rows, and
the full batch's measured rounding is the larger), so the noise multiplier below is in units of that, not of C.

All accounting is on the host in float64. Calibration (:func:`minibatch_beta_max`) bisects on
the RDP curve first (no PLD is built over wide brackets, which can exhaust memory: anchors-dp §1.5),
then refines from there on the accountant itself, a coarse PLD grid bracketing and the accountant's
grid deciding. :func:`minibatch_epsilon` can add dp-accounting's PLD at its own grid as a cross-check.
"""

from __future__ import annotations

import logging
import math
from typing import Sequence

import numpy as np

from .._validation import check_delta, check_epsilon, check_positive, check_positive_int
from .conversions import rdp_epsilon
from .events import SUBSAMPLED_NEIGHBORING, GdpEvent, SubsampledGaussianEvent
from .float32_margin import float32_margin_assumption, with_float32_margin
from .path import path_event

__all__ = [
    "NEIGHBORING",
    "minibatch_noise_multiplier",
    "minibatch_dp_accounting_event",
    "minibatch_base_rdp",
    "minibatch_event",
    "minibatch_epsilon",
    "minibatch_pld_epsilon",
    "minibatch_beta_max",
    "DEFAULT_ALPHAS",
    "replace_one_rdp",
    "QUADRATURE_POINTS_PER_SD",
    "MIN_QUADRATURE_SIGMA",
    "COARSE_PLD_DISCRETIZATION",
]

NEIGHBORING = ("replace_one", "add_remove")

#: orders of the replace-one curve (dense near 1, geometric up to 256)
DEFAULT_ALPHAS = np.unique(np.concatenate([np.linspace(1.05, 3.0, 40), np.geomspace(3.0, 256.0, 60)]))
#: grid points a noise sd of the replace-one curve's quadrature (the halved grid has twice as many)
QUADRATURE_POINTS_PER_SD = 16
#: below this noise multiplier the replace-one curve is the unamplified 2C Gaussian one alone
MIN_QUADRATURE_SIGMA = 0.1

_ASSUMPTIONS = (
    "Poisson-subsampled SGLD theta <- Proj_C(theta - h beta (1/(q n)) sum_i B_i clip_C(grad l_i(theta)) "
    "+ N(0, 2h I)), B_i ~ Bernoulli(q) i.i.d. fresh at every step, n public and fixed",
    "per-example gradients clipped to l2 norm <= clip_norm in the function actually run",
    "projection onto a fixed data-independent set or none; initial point data independent",
    "q, beta, step size, number of steps and chains fixed independently of the data",
    "released: the theta-trajectory only (not the batch masks, losses or gradients)",
)


_ADD_REMOVE_NORMALISER = ("add/remove adjacency: the sampler divides by the fixed public normaliser n = %d "
                          "(MinibatchSGLD(..., normaliser=n)), never by the private number of rows")


def _check_q(q) -> float:
    try:
        v = float(q)
    except (TypeError, ValueError):
        raise ValueError(f"q (sampling probability) must lie in (0, 1], got {q!r}") from None
    if math.isnan(v) or v <= 0.0 or v > 1.0:
        raise ValueError(f"q (sampling probability) must lie in (0, 1], got {q!r}")
    return v


def _check_neighboring(neighboring: str) -> str:
    if neighboring not in NEIGHBORING:
        raise ValueError(f"neighboring must be one of {NEIGHBORING}, got {neighboring!r}")
    return neighboring


def _common(beta, step_size, num_steps, q, clip_norm, n, num_chains):
    beta = check_positive("beta", beta)
    h = check_positive("step_size", step_size)
    t = check_positive_int("num_steps", num_steps)
    q = _check_q(q)
    c = check_positive("clip_norm", clip_norm)
    n = check_positive_int("n", n)
    k = check_positive_int("num_chains", num_chains)
    return beta, h, t, q, c, n, k


def minibatch_noise_multiplier(beta: float, step_size: float, q: float, clip_norm: float, n: int) -> float:
    """Noise std over the planned per-record sensitivity ``C' = C (1 + float32_gradient_margin(n))``:
    ``sigma = q n sqrt(2/h) / (beta C')``.

    The drift moves by ``h beta / (q n)`` times the clipped sum; the noise std is ``sqrt(2h)``; ``C'`` is the
    clip norm with the float32 margin (module doc).
    """
    beta, h, _, q, c, n, _ = _common(beta, step_size, 1, q, clip_norm, n, 1)
    return q * n * math.sqrt(2.0 / h) / (beta * with_float32_margin(c, n))


def minibatch_dp_accounting_event(beta, step_size, num_steps, q, clip_norm, n, num_chains=1):
    """dp-accounting ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), K T)``.

    Per-record sensitivity is ``C`` (the noise multiplier is in units of ``C``); choose the
    neighbouring relation on the accountant (see the module docstring).
    """
    import dp_accounting as dpa

    beta, h, t, q, c, n, k = _common(beta, step_size, num_steps, q, clip_norm, n, num_chains)
    sigma = minibatch_noise_multiplier(beta, h, q, c, n)
    return dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), t * k)


def minibatch_base_rdp(orders, beta, step_size, num_steps, q, clip_norm, n, num_chains=1) -> np.ndarray:
    """RDP of the ``K T``-fold composition under ADD_OR_REMOVE_ONE / REPLACE_SPECIAL (dp-accounting).

    Each value is replaced by the smallest computed value at an order >= it (valid because
    Renyi divergence is non-decreasing in the order; van Erven & Harremoes 2014, Thm 3); orders
    where dp-accounting's series does not converge and no larger order helps are ``inf``.
    """
    import dp_accounting as dpa
    from dp_accounting import rdp

    a = np.asarray(orders, dtype=np.float64)
    if minibatch_noise_multiplier(beta, step_size, q, clip_norm, n) ** 2 == 0.0:
        # sigma < ~1.5e-162: dp-accounting divides by sigma**2 (ZeroDivisionError). Such a step
        # releases the clipped sum essentially without noise: report the trivial bound inf.
        return np.full(a.shape, np.inf)
    acc = rdp.RdpAccountant(orders=[float(x) for x in a],
                            neighboring_relation=dpa.NeighboringRelation.REPLACE_SPECIAL)
    absl_logger = logging.getLogger("absl")
    old = absl_logger.level
    absl_logger.setLevel(logging.ERROR)  # non-converged orders are excluded (inf): expected at huge orders
    try:
        acc.compose(minibatch_dp_accounting_event(beta, step_size, num_steps, q, clip_norm, n, num_chains))
    finally:
        absl_logger.setLevel(old)
    r = np.asarray(acc.rdp, dtype=np.float64)
    r = np.where(np.isnan(r), np.inf, r)
    # dp-accounting's fractional-order series can overshoot (or fail: inf) at orders near 1 for
    # large noise multipliers. Each value is still an upper bound, and the true curve is
    # non-decreasing in the order, so R(a) <= min_{o >= a} R_computed(o): a valid, tighter bound.
    idx = np.argsort(a)
    r_sorted = np.minimum.accumulate(r[idx][::-1])[::-1]
    out = np.empty_like(r)
    out[idx] = r_sorted
    return out


def _antipodal_log_moments(alphas: np.ndarray, sigma: float, q: float, h: float) -> tuple[np.ndarray, np.ndarray]:
    """``log E_Q[(P/Q)^alpha]`` of the module doc's antipodal pair on a grid of step ``h``, and a bound on each
    value's float rounding (absolute, in the log)."""
    from scipy.special import logsumexp

    s2 = sigma * sigma
    L = 2.0 * float(np.max(alphas)) + 40.0 * sigma + 5.0
    y = np.arange(-L, L + 0.5 * h, h)
    lq0, lqq = math.log1p(-q), math.log(q)
    log_p = np.logaddexp(lq0, lqq + (2.0 * y - 1.0) / (2.0 * s2))   # log dP/dN(0, s^2)
    log_q = np.logaddexp(lq0, lqq + (-2.0 * y - 1.0) / (2.0 * s2))  # log dQ/dN(0, s^2)
    lr = log_p - log_q                                              # log P/Q
    log_dq = log_q - y * y / (2.0 * s2) - 0.5 * math.log(2.0 * math.pi * s2) + math.log(h)
    out, err = np.empty(alphas.shape), np.empty(alphas.shape)
    for i, a in enumerate(alphas):
        keep = slice(*np.searchsorted(y, [-(2.0 * a + 40.0 * sigma + 5.0), 2.0 * a + 40.0 * sigma + 5.0]))
        ld, la = log_dq[keep], a * lr[keep]  # this order's peak is near y = a: its own [-L, L]
        lm = float(logsumexp(ld + la))
        if lm > 1e-3:
            out[i], err[i] = lm, 1e-12 * max(1.0, abs(lm))
            continue
        # E_Q[(P/Q)^a] - 1 without cancelling against 1 (and without inf * 0 where a log(P/Q) is large:
        # there exp(ld + la) <= e^1e-3, as the whole sum is)
        terms = np.where(la > 1.0, np.exp(ld + la) - np.exp(ld), np.exp(ld) * np.expm1(np.minimum(la, 1.0)))
        m = float(np.sum(terms))
        out[i], err[i] = math.log1p(max(m, 0.0)), 1e-12 * float(np.sum(np.abs(terms)))
    return out, err


def replace_one_rdp(alphas, sigma: float, q: float) -> np.ndarray:
    """RDP of ONE Poisson-subsampled Gaussian step under replace-one, at ``alphas`` (> 1): the antipodal
    pair's Renyi divergence (module doc: the claim, its proof, the quadrature and its margin).

    ``sigma``: the noise multiplier (noise sd over the clipping norm); ``q`` in (0, 1). Returns
    ``inf`` at every order for ``sigma`` below :data:`MIN_QUADRATURE_SIGMA` (the caller's Gaussian curve
    answers there)."""
    al = np.asarray(alphas, dtype=np.float64)
    sigma = check_positive("sigma", sigma)
    q = _check_q(q)
    if q == 1.0:
        raise ValueError("q must lie in (0, 1) for replace_one_rdp (q = 1 is the Gaussian mechanism, 2 alpha / sigma^2)")
    if al.size == 0 or not np.all(al > 1.0):
        raise ValueError(f"alphas must be orders > 1, got {alphas!r}")
    if sigma < MIN_QUADRATURE_SIGMA:
        return np.full(al.shape, np.inf)
    h = sigma / QUADRATURE_POINTS_PER_SD
    m1, e1 = _antipodal_log_moments(al, sigma, q, h)
    m2, e2 = _antipodal_log_moments(al, sigma, q, 0.5 * h)
    log_moment = np.maximum(m1, m2) + np.abs(m1 - m2) + e1 + e2
    return np.maximum(log_moment, 0.0) / (al - 1.0)


def _replace_one_curve(alphas, beta, h, t, q, c, n, k):
    """Replace-one RDP of the ``K T`` steps at ``alphas``: the antipodal pair's curve, capped by the 2C Gaussian."""
    al = np.asarray(alphas, dtype=np.float64)
    sigma = minibatch_noise_multiplier(beta, h, q, c, n)
    # an almost noiseless step: sigma**2 underflows to 0 (divide) or the quotient passes the largest
    # float (overflow); either way the curve is inf, the right answer, and says so without a warning
    with np.errstate(divide="ignore", over="ignore"):
        gauss = 2.0 * k * t * al / sigma**2                  # sensitivity 2C, no amplification
    if sigma < MIN_QUADRATURE_SIGMA:
        return gauss
    return np.minimum(k * t * replace_one_rdp(al, sigma, q), gauss)


def minibatch_event(beta: float, step_size: float, num_steps: int, q: float, clip_norm: float, n: int,
                    num_chains: int = 1, *, neighboring: str = "replace_one",
                    alphas: Sequence[float] | None = None, label: str = "minibatch_sgld"):
    """Privacy event of ``num_chains`` Poisson-subsampled SGLD runs of ``num_steps`` steps.

    Returns a :class:`~dp_infer.privacy.events.SubsampledGaussianEvent` of ``K T`` steps that
    :class:`~dp_infer.privacy.accountant.Accountant` composes: its RDP curve (on ``alphas``, default
    :data:`DEFAULT_ALPHAS`) for the RDP route, and the mechanism, whose dp-accounting PLD (REPLACE_ONE:
    the antipodal pair; ADD_OR_REMOVE_ONE) the PLD route composes; the accountant reports the tighter.
    At ``q = 1`` it is the exact :class:`GdpEvent` of the path accountant with sensitivity ``2 C / n``
    (``C / n`` under add/remove). ``num_chains`` is folded in (compose the event once).
    """
    beta, h, t, q, c, n, k = _common(beta, step_size, num_steps, q, clip_norm, n, num_chains)
    neighboring = _check_neighboring(neighboring)
    sigma = minibatch_noise_multiplier(beta, h, q, c, n)
    meta = {"route": "minibatch_sgld", "beta": beta, "step_size": h, "num_steps": t, "q": q,
            "clip_norm": c, "n": n, "num_chains": k, "noise_multiplier": sigma, "neighboring": neighboring}
    if q == 1.0:  # no subsampling: the exact Gaussian path accountant
        mult, per_row = (2.0, "2C/n") if neighboring == "replace_one" else (1.0, "C/n")
        extra = (f"q = 1: full batch, clipped gradients, {neighboring} sensitivity {per_row}",)
        if neighboring == "add_remove":
            extra += (_ADD_REMOVE_NORMALISER % n,)
        ev = path_event(beta, mult * with_float32_margin(c, n) / n, t * h, None, k, label=label,
                        extra_assumptions=extra + (float32_margin_assumption(n, per_row),))
        return GdpEvent(mu=ev.mu, label=label, assumptions=ev.assumptions, metadata={**meta, "mu": ev.mu})
    al = DEFAULT_ALPHAS if alphas is None else np.unique(np.asarray(alphas, dtype=np.float64))
    if neighboring == "replace_one":
        vals = _replace_one_curve(al, beta, h, t, q, c, n, k)
        extra = ("replace-one neighbours: the 1-D antipodal pair (1-q) N(0) + q N(+-C), which dominates "
                 "vector-valued clipped gradients (module doc); RDP curve by quadrature with a safe-side margin, min "
                 "with the unamplified 2C Gaussian curve; PLD: dp-accounting's REPLACE_ONE, pessimistic",)
    else:
        vals = minibatch_base_rdp(al, beta, h, t, q, c, n, k)
        extra = ("add/remove-one neighbours (per-record sensitivity C); dp-accounting RDP of the "
                 "Poisson-subsampled Gaussian", _ADD_REMOVE_NORMALISER % n)
    extra += (float32_margin_assumption(n, "C (per record, in units of the clipped sum)"),)
    return SubsampledGaussianEvent(orders=tuple(al), values=tuple(vals), noise_multiplier=sigma, sampling_prob=q,
                                   compositions=k * t, neighboring=neighboring, label=label,
                                   assumptions=_ASSUMPTIONS + extra, metadata=meta)


def minibatch_pld_epsilon(beta, step_size, num_steps, q, clip_norm, n, delta, num_chains=1, *,
                          neighboring: str = "replace_one", discretization: float = 1e-3) -> float:
    """eps from dp-accounting's ``PLDAccountant`` (cross-check only).

    Under ``replace_one`` this is dp-accounting's REPLACE_ONE model (the 1-D antipodal pair, which the
    module doc shows dominates this kernel); the primary answer is :func:`minibatch_epsilon`'s RDP
    curve of the same pair, which the accountant composes with the run's other events.
    """
    import dp_accounting as dpa
    from dp_accounting import pld

    delta = check_delta(delta)
    neighboring = _check_neighboring(neighboring)
    rel = getattr(dpa.NeighboringRelation, SUBSAMPLED_NEIGHBORING[neighboring])
    acc = pld.PLDAccountant(rel, value_discretization_interval=check_positive("discretization", discretization))
    acc.compose(minibatch_dp_accounting_event(beta, step_size, num_steps, q, clip_norm, n, num_chains))
    return float(acc.get_epsilon(delta))


def minibatch_epsilon(beta, step_size, num_steps, q, clip_norm, n, delta, num_chains=1, *,
                      neighboring: str = "replace_one", pld_check: bool = True) -> dict:
    """eps at ``delta`` of the event (via the dp_infer Accountant) plus the PLD cross-check.

    Returns ``{"epsilon", "route", "epsilon_pld", "event"}``; ``epsilon`` is the certified value.
    """
    from .accountant import Accountant

    delta = check_delta(delta)
    ev = minibatch_event(beta, step_size, num_steps, q, clip_norm, n, num_chains, neighboring=neighboring)
    acc = Accountant().compose(ev)
    rep = acc.report(delta=delta)
    out = {"epsilon": float(rep["epsilon"]), "route": rep["route"], "event": ev}
    out["epsilon_pld"] = (minibatch_pld_epsilon(beta, step_size, num_steps, q, clip_norm, n, delta, num_chains,
                                                neighboring=neighboring) if pld_check else None)
    return out


def _event_epsilon(ev, delta) -> float:
    if isinstance(ev, GdpEvent):
        from .conversions import gdp_epsilon

        return gdp_epsilon(ev.mu, delta)
    return rdp_epsilon(ev.orders, ev.values, delta)[0]


#: the PLD grid of beta_max's coarse search stage (the accountant's own, 1e-4, refines it)
COARSE_PLD_DISCRETIZATION = 1e-3


def _accountant_epsilon(ev, delta, **accountant_options) -> float:
    from .accountant import Accountant

    return float(Accountant(**accountant_options).compose(ev).get_epsilon(delta))


def _bisect_beta(e, eps: float, lo: float, hi: float, rtol: float) -> float:
    """Largest verified beta in ``[lo, hi)`` with ``e(beta) <= eps`` (``e(lo) <= eps < e(hi)``), to ``rtol``."""
    while hi / lo - 1.0 > rtol:
        mid = math.sqrt(lo) * math.sqrt(hi)  # lo * hi would underflow below ~1e-154 (overflow above 1e154)
        if e(mid) <= eps:
            lo = mid
        else:
            hi = mid
    return lo


def minibatch_beta_max(eps: float, delta: float, step_size: float, num_steps: int, q: float, clip_norm: float,
                       n: int, num_chains: int = 1, *, neighboring: str = "replace_one",
                       rtol: float = 1e-4) -> float:
    """Largest beta (up to ``rtol``, always on the safe side) whose event is (eps, delta)-DP.

    Two stages, each a bisection in log beta (eps is non-decreasing in beta): first on the event's
    RDP curve alone (no PLD is built, so wide brackets cannot exhaust memory: anchors-dp §1.5), then,
    from that beta up, on the accountant's tightest route, the PLD of the subsampled Gaussian
    (dp-accounting, pessimistic), which is what a run's report uses. Only a beta whose eps was
    computed at most ``eps`` is ever returned, so the accountant's eps for it is <= eps.
    """
    eps = check_epsilon(eps)
    delta = check_delta(delta)
    check_positive("rtol", rtol)
    _common(1.0, step_size, num_steps, q, clip_norm, n, num_chains)
    _check_neighboring(neighboring)

    def event(b):
        return minibatch_event(b, step_size, num_steps, q, clip_norm, n, num_chains, neighboring=neighboring)

    def e(b):
        return _event_epsilon(event(b), delta)

    lo, hi = 1.0, 1.0
    while e(lo) > eps:
        lo /= 4.0
        if lo < 1e-300:
            return 0.0
    hi = lo * 4.0
    while e(hi) <= eps:
        lo, hi = hi, hi * 4.0
        if hi > 1e300:
            return math.inf
    lo = _bisect_beta(e, eps, lo, hi, rtol)
    if isinstance(event(lo), GdpEvent):  # q = 1: the exact Gaussian profile, nothing tighter to find
        return lo
    return _refine_on_accountant(event, eps, delta, lo, rtol)


def _refine_on_accountant(event, eps: float, delta: float, lo: float, rtol: float) -> float:
    """From ``lo`` (verified on the RDP curve, so the accountant's eps there is <= eps too) up to the
    largest beta the accountant verifies, to ``rtol``: a coarse PLD grid (cheap; pessimistic, so a
    beta it accepts has a true eps <= eps) brackets it, and the accountant's own grid decides."""

    def e_coarse(b):
        return _accountant_epsilon(event(b), delta, pld_discretization=COARSE_PLD_DISCRETIZATION)

    def e_acc(b):
        return _accountant_epsilon(event(b), delta)

    verified = lo  # the accountant's eps there is at most the RDP curve's, which is at most eps
    hi = lo * 2.0
    while e_coarse(hi) <= eps:  # the PLD eps is at most the RDP one: beta only grows
        lo, hi = hi, hi * 2.0
        if hi > 1e300:  # the coarse grid allows any beta: only the accountant's own may say so
            return math.inf if e_acc(lo) <= eps else _bisect_beta(e_acc, eps, verified, lo, rtol)
    guess = _bisect_beta(e_coarse, eps, lo, hi, max(rtol, 1e-3))
    if e_acc(guess) > eps:  # the finer grid disagrees (rare): decide on it alone, from the RDP-verified beta
        return _bisect_beta(e_acc, eps, verified, guess, rtol)
    step = max(8.0 * rtol, 1e-3)  # the finer grid is typically a little tighter: look just above the guess
    hi = guess * (1.0 + step)
    while e_acc(hi) <= eps:
        guess, hi = hi, hi * (1.0 + step)
        if hi > 1e300:
            return math.inf
    return _bisect_beta(e_acc, eps, guess, hi, rtol)
