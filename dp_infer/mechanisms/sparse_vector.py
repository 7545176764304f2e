r"""Sparse vector technique and its composition with the Generalized Gaussian mechanism.

Sparse vector (seed 004 Theorem 36: NumericSparse of Dwork & Roth, Alg. 3, modified to output 0
instead of "bottom" and for the queries left after halting). Queries ``f_i(D)`` with sensitivity
``s`` are compared, one at a time, to a noisy threshold; after each "above" the answer
``g_i(D)`` (sensitivity s) is released with noise and the threshold is re-drawn; it halts after
``max_above`` = c answers. One round (from a fresh threshold to the next "above") is
AboveThreshold with threshold noise Lap(2 s / eps_r) and query noise Lap(4 s / eps_r), which is
pure eps_r-DP (Dwork & Roth, Thm 3.23). The released answers carry N(0, sigma_a^2) noise, each
(s / sigma_a)-GDP. Events: ``c x PureDpEvent(eps_r)`` and ``c x GdpEvent(s / sigma_a)``: at most c
rounds and c answers happen, and the accountant composes them (PLD / RDP) -- this replaces Dwork &
Roth's advanced-composition constants. (Gaussian answer noise instead of NumericSparse's Laplace:
it composes tightly as GDP; the thesis's error bound only needs light tails.)

Composition with GG (Theorem 37): release ``y = phi(D) + x``, x ~ GGauss(p, sigma) at
(eps_g, delta_g); then run sparse vector on ``x(D) = y - phi(D)`` (for fixed y it moves by at most s
per coordinate between neighbours) with queries ``|x_i|`` and answers ``x_i``, and output
``y - x_hat``: coordinates whose noise is large get re-answered with much smaller noise. The
threshold defaults to the data-independent level T with ``P(|x_i| > T) = c / (2k)``. The total is
(eps_g + eps_SV, delta_g + delta_SV) by adaptive composition (the accountant's basic route). The
thesis's extra step "release phi(D) exactly when ||x||_p^p > 2 k sigma^p / p" is omitted: it only
serves its expected-error proof and would cost another delta.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import special

from .._validation import check_delta, check_epsilon, check_positive, check_positive_int, check_target_epsilon
from ..privacy.accountant import Accountant
from ..privacy.events import GdpEvent, PureDpEvent
from ..randomness import gaussian_noise, secret_key
from . import generalized_gaussian as gg
from ._release import Release

__all__ = ["SparseVectorParams", "numeric_sparse", "sparse_vector_flags", "sparse_vector_events",
           "calibrate_sparse_vector", "sparse_vector_mechanism", "thesis_max_above", "gg_threshold",
           "GGSparseVectorPlan", "plan_gg_sparse_vector", "run_gg_sparse_vector", "gg_sparse_vector_mechanism"]


@dataclass(frozen=True)
class SparseVectorParams:
    """Data-independent parameters of sparse vector (NumericSparse with Gaussian answers)."""

    threshold: float
    max_above: int
    eps_round: float
    answer_sigma: float | None = None   # None: flags only, no numeric answers
    sensitivity: float = 1.0

    def __post_init__(self):
        if not math.isfinite(float(self.threshold)):
            raise ValueError(f"threshold must be a finite number, got {self.threshold!r}")
        check_positive_int("max_above", self.max_above)
        check_epsilon(self.eps_round, "eps_round")
        check_positive("sensitivity", self.sensitivity)
        if self.answer_sigma is not None:
            check_positive("answer_sigma", self.answer_sigma)

    @property
    def threshold_noise_scale(self) -> float:
        """Laplace scale of the threshold noise, 2 s / eps_r."""
        return 2.0 * self.sensitivity / self.eps_round

    @property
    def query_noise_scale(self) -> float:
        """Laplace scale of the per-query noise, 4 s / eps_r."""
        return 4.0 * self.sensitivity / self.eps_round


def sparse_vector_events(params: SparseVectorParams) -> tuple:
    """((PureDpEvent(eps_r), c), (GdpEvent(s / sigma_a), c)) -- the second only with answers."""
    c = params.max_above
    rounds = PureDpEvent(epsilon=params.eps_round, label="above_threshold_round",
                         assumptions=(f"each query changes by at most {params.sensitivity:g} between neighbours",
                                      "threshold noise Lap(2s/eps_r), query noise Lap(4s/eps_r): "
                                      "Dwork & Roth Thm 3.23"),
                         metadata={"threshold": params.threshold, "eps_round": params.eps_round})
    out = [(rounds, c)]
    if params.answer_sigma is not None:
        out.append((GdpEvent(mu=params.sensitivity / params.answer_sigma, label="sparse_vector_answer",
                             assumptions=(f"each answer changes by at most {params.sensitivity:g} "
                                          "between neighbours",),
                             metadata={"sigma": params.answer_sigma}), c))
    return tuple(out)


def sparse_vector_flags(key, queries, threshold: float, max_above: int, threshold_noise_scale: float,
                        query_noise_scale: float):
    """JAX core of the flags (jit / vmap friendly): one threshold noise per round (c of them, drawn
    up front), one noise per query, a ``lax.scan`` over the queries in order; halts after c "above"."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    f = jnp.asarray(queries)
    c = int(max_above)
    k_thr, k_q = jax.random.split(key)
    rho = threshold + threshold_noise_scale * jax.random.laplace(k_thr, (c,), dtype=f.dtype)
    noisy = f + query_noise_scale * jax.random.laplace(k_q, f.shape, dtype=f.dtype)

    def step(count, z):
        above = (count < c) & (z >= rho[jnp.minimum(count, c - 1)])
        return count + above.astype(count.dtype), above

    _, above = lax.scan(step, jnp.asarray(0, dtype=jnp.int32), noisy)
    return above


def numeric_sparse(key, queries: Any, answers: Any, params: SparseVectorParams) -> tuple[np.ndarray, np.ndarray]:
    """NumericSparse: (above flags, released answers; 0 where not above), float64.

    A pure function of (key, queries, answers): the flags come from :func:`sparse_vector_flags` on
    one sub-key, the Gaussian answer noise from another. ``answers`` may be None when
    ``params.answer_sigma`` is None.
    """
    import jax
    import jax.numpy as jnp

    f = np.asarray(queries, dtype=np.float64)
    if f.ndim != 1 or f.size == 0 or not np.all(np.isfinite(f)):
        raise ValueError(f"queries must be a non-empty 1-D array of finite numbers, got shape {f.shape}")
    if params.answer_sigma is not None:
        g = np.asarray(answers, dtype=np.float64)
        if g.shape != f.shape or not np.all(np.isfinite(g)):
            raise ValueError(f"answers must be finite with the shape of queries {f.shape}, got {g.shape}")
    with jax.enable_x64(True):
        k_flags, k_a = jax.random.split(key)
        above = np.asarray(sparse_vector_flags(k_flags, jnp.asarray(f), params.threshold, params.max_above,
                                               params.threshold_noise_scale, params.query_noise_scale), dtype=bool)
        if params.answer_sigma is None:
            return above, np.zeros(f.size)
        z = np.asarray(gaussian_noise(k_a, f.shape, jnp.float64)) * params.answer_sigma
    return above, np.where(above, g + z, 0.0)


def calibrate_sparse_vector(eps: float, delta: float, *, max_above: int, threshold: float,
                            sensitivity: float = 1.0, answers: bool = True, answer_weight: float = 1.0,
                            rel_tol: float = 1e-4) -> SparseVectorParams:
    """Largest eps_r (and sigma_a = s / (answer_weight eps_r)) whose events compose to (eps, delta).

    Bisection on eps_r with the accountant (PLD / RDP routes); the answers' GDP parameter is tied to
    eps_r by ``mu_a = answer_weight * eps_r``. Returns parameters on the safe side.
    """
    eps = check_target_epsilon(eps)
    delta = check_delta(delta)
    c = check_positive_int("max_above", max_above)
    s = check_positive("sensitivity", sensitivity)
    w = check_positive("answer_weight", answer_weight)

    def make(t: float) -> SparseVectorParams:
        return SparseVectorParams(threshold=float(threshold), max_above=c, eps_round=t,
                                  answer_sigma=(s / (w * t)) if answers else None, sensitivity=s)

    def ok(t: float) -> bool:
        return Accountant(list(sparse_vector_events(make(t)))).get_epsilon(delta) <= eps

    lo = hi = eps / c
    while not ok(lo):
        lo /= 2.0
        if lo < 1e-12:
            raise ValueError("eps/delta too small to calibrate sparse vector")
    while ok(hi):
        hi *= 2.0
    while hi / lo > 1.0 + rel_tol:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return make(lo)


def sparse_vector_mechanism(queries: Any, answers: Any = None, *, eps: float, delta: float, threshold: float,
                            max_above: int, sensitivity: float = 1.0, seed: int | None = None) -> Release:
    """Sparse vector on a data-dependent query vector, calibrated to (eps, delta).

    Value: ``(above, released)``; ``released`` is 0 where not above (and all 0 without answers).
    """
    params = calibrate_sparse_vector(eps, delta, max_above=max_above, threshold=threshold,
                                     sensitivity=sensitivity, answers=answers is not None)
    key, source = secret_key(seed)
    above, released = numeric_sparse(key, queries, answers, params)
    return Release(value=(above, released), events=sparse_vector_events(params),
                   params={"mechanism": "sparse_vector", **asdict(params), "target_eps": eps, "delta": delta},
                   randomness=source.describe())


def thesis_max_above(k: int, t: float = 1.0) -> int:
    """Theorem 37's c_SV = 4 k / log^{2 + 2t} k, at least 1."""
    k = check_positive_int("k", k)
    if k < 3:
        return 1
    return max(1, int(4.0 * k / math.log(k) ** (2.0 + 2.0 * t)))


def gg_threshold(p: float, sigma: float, k: int, max_above: int) -> float:
    """Data-independent threshold T with P(|x_i| > T) = c / (2k) for x_i ~ GGauss(p, sigma)."""
    p = gg.check_shape(p)
    sigma = check_positive("sigma", sigma)
    k = check_positive_int("k", k)
    c = check_positive_int("max_above", max_above)
    q = min(1.0, c / (2.0 * k))
    return sigma * float(special.gammainccinv(1.0 / p, q)) ** (1.0 / p)


@dataclass(frozen=True)
class GGSparseVectorPlan:
    """Data-independent parameters of Theorem 37's mechanism (GG release + sparse vector)."""

    k: int
    p: float
    sigma: float
    sensitivity: float
    gg_event: Any
    sv: SparseVectorParams

    def events(self) -> tuple:
        return ((self.gg_event, 1), *sparse_vector_events(self.sv))


def plan_gg_sparse_vector(k: int, *, eps: float, delta: float, p: float = 4.0, max_above: int | None = None,
                          gg_share: float = 0.5, sensitivity: float = 1.0,
                          threshold: float | None = None) -> GGSparseVectorPlan:
    """GG at (gg_share eps, delta/2) (PLD), sparse vector at the remaining (eps, delta/2) (accountant).

    ``max_above`` defaults to Theorem 37's ``4k / log^4 k`` (at least 1); the threshold to
    :func:`gg_threshold` (about c/2 of the k noise coordinates exceed it).
    """
    k = check_positive_int("k", k)
    eps = check_target_epsilon(eps)
    delta = check_delta(delta)
    p = gg.check_shape(p)
    s = check_positive("sensitivity", sensitivity)
    share = float(gg_share)
    if not (0.0 < share < 1.0):
        raise ValueError(f"gg_share must lie in (0, 1), got {gg_share!r}")
    c = thesis_max_above(k) if max_above is None else check_positive_int("max_above", max_above)
    sigma = gg.calibrate_gg_sigma(share * eps, delta / 2.0, p, k, sensitivity=s)
    gg_event = gg.gg_approx_event(p, sigma, k, delta=delta / 2.0, sensitivity=s)
    T = gg_threshold(p, sigma, k, c) if threshold is None else float(threshold)
    sv = calibrate_sparse_vector(eps - gg_event.epsilon, delta / 2.0, max_above=c, threshold=T, sensitivity=s)
    return GGSparseVectorPlan(k=k, p=p, sigma=sigma, sensitivity=s, gg_event=gg_event, sv=sv)


def run_gg_sparse_vector(key, values: Any, plan: GGSparseVectorPlan) -> tuple[np.ndarray, np.ndarray]:
    """The mechanism's functional core: (released answers, corrected flags)."""
    import jax

    v = np.asarray(values, dtype=np.float64)
    if v.shape != (plan.k,) or not np.all(np.isfinite(v)):
        raise ValueError(f"values must be {plan.k} finite numbers, got shape {v.shape}")
    k_gg, k_sv = jax.random.split(key)
    y = v + gg.sample_generalized_gaussian(k_gg, plan.p, plan.sigma, (plan.k,))
    # sparse vector sees x(D) = y - phi(D): queries |x_i|, answers x_i
    above, x_hat = numeric_sparse(k_sv, np.abs(y - v), y - v, plan.sv)
    return y - x_hat, above


def gg_sparse_vector_mechanism(values: Any, *, eps: float, delta: float, p: float = 4.0,
                               max_above: int | None = None, gg_share: float = 0.5, sensitivity: float = 1.0,
                               threshold: float | None = None, seed: int | None = None) -> Release:
    """Theorem 37: GG release at (gg_share eps, delta/2), then sparse vector on its noise at the rest.

    Value: the corrected answers (the flags stay internal; :func:`run_gg_sparse_vector` returns them).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"values must be a non-empty 1-D array of finite numbers, got shape {v.shape}")
    plan = plan_gg_sparse_vector(int(v.size), eps=eps, delta=delta, p=p, max_above=max_above, gg_share=gg_share,
                                 sensitivity=sensitivity, threshold=threshold)
    key, source = secret_key(seed)
    out, _ = run_gg_sparse_vector(key, v, plan)
    sv = plan.sv
    return Release(value=out, events=plan.events(),
                   params={"mechanism": "gg_sparse_vector", "p": plan.p, "sigma": plan.sigma, "k": plan.k,
                           "sensitivity": plan.sensitivity, "max_above": sv.max_above, "threshold": sv.threshold,
                           "eps_round": sv.eps_round, "answer_sigma": sv.answer_sigma,
                           "target_eps": eps, "delta": delta},
                   randomness=source.describe())
