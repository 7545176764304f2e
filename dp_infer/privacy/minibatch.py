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

Neighbouring relation: replace-one (dp_infer's default), accounted conservatively
------------------------------------------------------------------------------
dp-accounting's RDP accountant supports ``PoissonSampledDpEvent`` only for ADD_OR_REMOVE_ONE
and REPLACE_SPECIAL (replace a record by a "zero" record that contributes nothing). Its PLD
accountant has a REPLACE_ONE mode, but it models the worst case as the 1-D antipodal pair
``(1-q) N(0) + q N(+C)`` vs ``(1-q) N(0) + q N(-C)``; we do not rely on that reduction being the
worst case for vector-valued gradients and use it only as a cross-check.

The primary curve is derived by group privacy through the zero record. For replace-one
neighbours ``D = (.., x, ..)`` and ``D' = (.., x', ..)`` let ``D0`` hold the special zero record
in that slot (its clipped gradient is 0; the estimator's normaliser ``n`` is public and fixed,
so ``D0`` is a valid input of the same mechanism). ``(D, D0)`` and ``(D0, D')`` are
REPLACE_SPECIAL neighbours, for which the whole ``K T``-fold adaptive composition is
``(alpha, R(alpha))``-RDP in both directions with ``R`` the curve of dp-accounting's
``RdpAccountant(neighboring_relation=REPLACE_SPECIAL)`` on
``SelfComposed(PoissonSampled(q, Gaussian(sigma)), K T)`` (Mironov, Talwar, Zhang 2019). The
weak triangle inequality of Renyi divergence (Mironov 2017, Prop. 11: for ``p > 1``,
``D_a(P||R) <= (a - 1/p)/(a - 1) D_{p a}(P||Q) + D_{(p a - 1)/(p - 1)}(Q||R)``) then gives, for
every ``p`` on a small grid,

    R_replace(alpha) <= (alpha - 1/p) / (alpha - 1) * R(p alpha) + R((p alpha - 1) / (p - 1)).

(Proof: ``int P^a R^(1-a) = E_Q[(P/Q)^a (Q/R)^(a-1)]``, then Hoelder with exponents ``p`` and
``p/(p-1)``.) This keeps the amplification by subsampling. Independently, without amplification, each step
is a Gaussian mechanism with replace-one sensitivity ``2C`` (both gradients clipped), i.e. the
linear curve ``2 K T alpha / sigma^2``; the event takes the pointwise minimum of the two valid
bounds. At ``q = 1`` there is no subsampling and the event is exactly the path accountant's
``GdpEvent`` with ``mu = beta * (2C/n) * sqrt(K T h / 2)`` (= ``path_mu(beta, 2C/n, T h, K)``;
``C/n`` under add/remove).

``neighboring="add_remove"`` is available for users whose unit of privacy is the presence of a
record: the event is then dp-accounting's ADD_OR_REMOVE_ONE curve itself (sensitivity ``C`` in
units of the clipped sum). Under add/remove the number of rows is private, so ``n`` must be a
fixed PUBLIC normaliser that the sampler divides by whatever the data: run
:class:`~dp_infer.kernels.sgld.MinibatchSGLD` / ``sample_chain`` with ``normaliser=n``. With
the row count as normaliser a removal changes the mean by up to ``2C / (n + 1)``, not ``C / n``
(at ``q = 1`` the claim would be about half the true eps); the event states this assumption.

All accounting is on the host in float64. Calibration (:func:`minibatch_beta_max`) bisects on
the RDP route only (PLD calibration with wide brackets can exhaust memory, anchors-dp §1.5);
:func:`minibatch_epsilon` reports the PLD eps as a cross-check.
"""

from __future__ import annotations

import logging
import math
from typing import Sequence

import numpy as np

from .._validation import check_delta, check_epsilon, check_positive, check_positive_int
from .conversions import rdp_epsilon
from .events import GdpEvent, RdpCurveEvent
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
    "TRIANGLE_PS",
]

NEIGHBORING = ("replace_one", "add_remove")

#: orders of the replace-one curve (dense near 1, geometric up to 256)
DEFAULT_ALPHAS = np.unique(np.concatenate([np.linspace(1.05, 3.0, 40), np.geomspace(3.0, 256.0, 60)]))
#: exponents p of the weak triangle inequality tried at each order
TRIANGLE_PS = (1.25, 1.5, 2.0, 3.0, 4.0)

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
    """Noise std over per-record sensitivity ``C``: ``sigma = q n sqrt(2/h) / (beta C)``.

    The drift moves by ``h beta / (q n)`` times the clipped sum; the noise std is ``sqrt(2h)``.
    """
    beta, h, _, q, c, n, _ = _common(beta, step_size, 1, q, clip_norm, n, 1)
    return q * n * math.sqrt(2.0 / h) / (beta * c)


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


def _replace_one_curve(alphas, beta, h, t, q, c, n, k, ps=TRIANGLE_PS):
    """Replace-one RDP at ``alphas``: min over p of the weak-triangle bound, and the 2C Gaussian bound."""
    al = np.asarray(alphas, dtype=np.float64)
    ps = np.asarray(ps, dtype=np.float64)
    o1 = np.outer(ps, al)                                   # p * alpha
    o2 = (o1 - 1.0) / (ps[:, None] - 1.0)                   # (p alpha - 1)/(p - 1)
    need = np.unique(np.concatenate([o1.ravel(), o2.ravel()]))
    base = minibatch_base_rdp(need, beta, h, t, q, c, n, k)
    lookup = dict(zip(need.tolist(), base.tolist()))
    r1 = np.vectorize(lookup.__getitem__)(o1)
    r2 = np.vectorize(lookup.__getitem__)(o2)
    coef = (al[None, :] - 1.0 / ps[:, None]) / (al[None, :] - 1.0)
    with np.errstate(invalid="ignore"):
        tri = np.min(coef * r1 + r2, axis=0)
    sigma = minibatch_noise_multiplier(beta, h, q, c, n)
    with np.errstate(divide="ignore"):  # sigma**2 underflows to 0 for an almost noiseless step: inf
        gauss = 2.0 * k * t * al / sigma**2                  # sensitivity 2C, no amplification
    return np.minimum(tri, gauss)


def minibatch_event(beta: float, step_size: float, num_steps: int, q: float, clip_norm: float, n: int,
                    num_chains: int = 1, *, neighboring: str = "replace_one",
                    alphas: Sequence[float] | None = None, label: str = "minibatch_sgld"):
    """Privacy event of ``num_chains`` Poisson-subsampled SGLD runs of ``num_steps`` steps.

    Returns an :class:`~dp_infer.privacy.events.RdpCurveEvent` (on ``alphas``, default
    :data:`DEFAULT_ALPHAS`) that :class:`~dp_infer.privacy.accountant.Accountant` composes; at
    ``q = 1`` under replace-one, the exact :class:`GdpEvent` of the path accountant with
    sensitivity ``2 C / n``. ``num_chains`` is folded in (compose the event once).
    """
    beta, h, t, q, c, n, k = _common(beta, step_size, num_steps, q, clip_norm, n, num_chains)
    neighboring = _check_neighboring(neighboring)
    sigma = minibatch_noise_multiplier(beta, h, q, c, n)
    meta = {"route": "minibatch_sgld", "beta": beta, "step_size": h, "num_steps": t, "q": q,
            "clip_norm": c, "n": n, "num_chains": k, "noise_multiplier": sigma, "neighboring": neighboring}
    if q == 1.0:  # no subsampling: the exact Gaussian path accountant
        mult = 2.0 if neighboring == "replace_one" else 1.0
        extra = (f"q = 1: full batch, clipped gradients, {neighboring} sensitivity "
                 f"{'2C' if mult == 2.0 else 'C'}/n",)
        if neighboring == "add_remove":
            extra += (_ADD_REMOVE_NORMALISER % n,)
        ev = path_event(beta, mult * c / n, t * h, None, k, label=label, extra_assumptions=extra)
        return GdpEvent(mu=ev.mu, label=label, assumptions=ev.assumptions, metadata={**meta, "mu": ev.mu})
    al = DEFAULT_ALPHAS if alphas is None else np.unique(np.asarray(alphas, dtype=np.float64))
    if neighboring == "replace_one":
        vals = _replace_one_curve(al, beta, h, t, q, c, n, k)
        extra = ("replace-one neighbours, via group privacy through a zero record (REPLACE_SPECIAL RDP of "
                 "dp-accounting + Mironov 2017 Prop. 11), min with the unamplified 2C Gaussian curve",)
    else:
        vals = minibatch_base_rdp(al, beta, h, t, q, c, n, k)
        extra = ("add/remove-one neighbours (per-record sensitivity C); dp-accounting RDP of the "
                 "Poisson-subsampled Gaussian", _ADD_REMOVE_NORMALISER % n)
    return RdpCurveEvent(orders=tuple(al), values=tuple(vals), label=label,
                         assumptions=_ASSUMPTIONS + extra, metadata=meta)


def minibatch_pld_epsilon(beta, step_size, num_steps, q, clip_norm, n, delta, num_chains=1, *,
                          neighboring: str = "replace_one", discretization: float = 1e-3) -> float:
    """eps from dp-accounting's ``PLDAccountant`` (cross-check only).

    Under ``replace_one`` this is dp-accounting's REPLACE_ONE model (the 1-D antipodal pair);
    the primary, conservative answer is :func:`minibatch_epsilon`.
    """
    import dp_accounting as dpa
    from dp_accounting import pld

    delta = check_delta(delta)
    neighboring = _check_neighboring(neighboring)
    rel = (dpa.NeighboringRelation.REPLACE_ONE if neighboring == "replace_one"
           else dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
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


def minibatch_beta_max(eps: float, delta: float, step_size: float, num_steps: int, q: float, clip_norm: float,
                       n: int, num_chains: int = 1, *, neighboring: str = "replace_one",
                       rtol: float = 1e-4) -> float:
    """Largest beta (up to ``rtol``, always on the safe side) whose event is (eps, delta)-DP.

    Bisection in log beta on the RDP route (eps is non-decreasing in beta); no PLD is built, so
    wide brackets cannot exhaust memory. The returned beta satisfies the target exactly as
    certified by the event; the accountant's eps for it is <= eps.
    """
    eps = check_epsilon(eps)
    delta = check_delta(delta)
    check_positive("rtol", rtol)
    _common(1.0, step_size, num_steps, q, clip_norm, n, num_chains)
    _check_neighboring(neighboring)

    def e(b):
        return _event_epsilon(minibatch_event(b, step_size, num_steps, q, clip_norm, n, num_chains,
                                              neighboring=neighboring), delta)

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
    while hi / lo - 1.0 > rtol:
        mid = math.sqrt(lo) * math.sqrt(hi)  # lo * hi would underflow below ~1e-154 (overflow above 1e154)
        if e(mid) <= eps:
            lo = mid
        else:
            hi = mid
    return lo
