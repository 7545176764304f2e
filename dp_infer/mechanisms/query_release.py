r"""MWEM query release (seed 003 Alg. 14-15) and pure query release by binary embedding (Alg. 16).

Data: n records in a finite domain of N = 2^d points (record = integer in [0, N), i.e. d binary
attributes), given as the histogram of counts (n is public). Workload: K linear queries
``Q[j, x]`` in [0, 1]; answers ``Q p`` with p = histogram / n. Under replace-one adjacency every
answer changes by at most 1/n.

MWEM (Hardt, Ligett, McSherry 2012; seed Alg. 14 with the digest's misprints fixed): start from the
uniform distribution; for T rounds pick the worst-answered query with the exponential mechanism
(score ``|<q, p_hat> - <q, p>|``, sensitivity 1/n, weights ``exp(eps0 n score / 2)``, Gumbel-max),
measure it with Laplace(1 / (n eps0)), and update ``p_hat(x) ∝ p_hat(x) exp(q(x) (m - <q, p_hat>) / 2)``;
output the average of the T iterates. Each round = two pure eps0 mechanisms: events
``2T x PureDpEvent(eps0)``, eps0 the largest value the accountant composes to (eps, delta)
(at least the seed's ``sqrt(rho / T)``, rho = eps^2 / (16 ln(1/delta)), Lemma 36).

Pure MWEM (Alg. 16): MWEM at (eps, delta) with ``delta < eps^D / (2D)^{3D}`` (Theorem 2's utility
condition, D = m d), then m records drawn from
its output (proportional sampling, Alg. 15), encoded in D = m d bits and purified by Algorithm 2
with eps' = eps: pure 2 eps. The seed's m = (n eps / d)^{2/3} and T are the defaults.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import check_positive_int, check_target_epsilon
from ..privacy.accountant import Accountant
from ..privacy.conversions import resolve_log_delta
from ..privacy.events import PureDpEvent
from ..randomness import secret_key
from ._release import Release
from .purifier import binary_embedding_parameters, purify_bits_core

__all__ = ["seed_round_epsilon", "mwem_round_epsilon", "mwem", "proportional_sample", "pure_mwem_log_delta",
           "pure_mwem", "query_error"]


def _check_inputs(histogram, queries) -> tuple[np.ndarray, np.ndarray, int]:
    h = np.asarray(histogram)
    if h.ndim != 1 or h.size < 2 or not np.issubdtype(h.dtype, np.number) or np.any(h < 0) \
            or np.any(h != np.round(h)):
        raise ValueError(f"histogram must be a 1-D array of non-negative integer counts, got shape {h.shape}")
    n = int(h.sum())
    if n < 1:
        raise ValueError("histogram must count at least one record")
    Q = np.asarray(queries, dtype=np.float64)
    if Q.ndim != 2 or Q.shape[1] != h.size or Q.shape[0] < 1:
        raise ValueError(f"queries must have shape (K, {h.size}), got {Q.shape}")
    if np.any(~np.isfinite(Q)) or np.any(Q < 0) or np.any(Q > 1):
        raise ValueError("queries must take values in [0, 1]")
    return h.astype(np.float64), Q, n


def seed_round_epsilon(eps: float, log_delta: float, rounds: int) -> float:
    """Lemma 36's per-mechanism eps0 = sqrt(rho / T) with rho = eps^2 / (16 ln(1/delta))."""
    eps = check_target_epsilon(eps)
    T = check_positive_int("rounds", rounds)
    ld = resolve_log_delta(None, log_delta)
    return math.sqrt(eps * eps / (16.0 * -ld) / T)


def mwem_round_epsilon(eps: float, log_delta: float, rounds: int, *, rel_tol: float = 1e-6) -> float:
    """Largest eps0 such that 2T pure eps0 events compose (accountant) to (eps, delta)."""
    eps = check_target_epsilon(eps)
    T = check_positive_int("rounds", rounds)
    ld = resolve_log_delta(None, log_delta)

    def ok(e0: float) -> bool:
        return Accountant([(PureDpEvent(epsilon=e0), 2 * T)]).get_epsilon(log_delta=ld) <= eps

    lo = seed_round_epsilon(eps, ld, T)
    if not ok(lo):  # cannot happen if the accountant is at least as tight as Lemma 22; guard anyway
        while not ok(lo):
            lo /= 2.0
    hi = max(lo * 2.0, eps / (2 * T))
    while ok(hi):
        hi *= 2.0
    while hi / lo > 1.0 + rel_tol:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _normalise(logq: np.ndarray) -> np.ndarray:
    q = np.exp(logq - logq.max())
    return q / q.sum()


def _mwem_core(key, p: np.ndarray, Q: np.ndarray, n: int, eps0: float, T: int, passes: int = 1) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    K, N = Q.shape
    with jax.enable_x64(True):
        kg, kl = jax.random.split(key)
        gumbel = np.asarray(jax.random.gumbel(kg, (T, K), dtype=jnp.float64))
        lap = np.asarray(jax.random.laplace(kl, (T,), dtype=jnp.float64))
    truth = Q @ p
    logq = np.full(N, -math.log(N))
    avg = np.zeros(N)
    measured: list[tuple[int, float]] = []
    for t in range(T):
        q = _normalise(logq)
        score = np.abs(Q @ q - truth)
        j = int(np.argmax(eps0 * n * score / 2.0 + gumbel[t]))
        measured.append((j, truth[j] + lap[t] / (n * eps0)))
        # multiplicative weights on the new measurement (passes = 1, the seed's Alg. 14), or on every
        # measurement so far, ``passes`` times (HLM12's re-use of measurements: post-processing)
        for _ in range(passes):
            for jj, m in (measured if passes > 1 else measured[-1:]):
                logq = logq + Q[jj] * (m - Q[jj] @ _normalise(logq)) / 2.0
        avg += _normalise(logq)
    return avg / T


def mwem(histogram: Any, queries: Any, *, eps: float, rounds: int, delta: float | None = None,
         log_delta: float | None = None, update_passes: int = 1, seed: int | None = None) -> Release:
    """(eps, delta)-DP MWEM: value = a synthetic distribution over the N domain points.

    ``update_passes > 1`` re-applies the multiplicative-weights update for every measurement taken
    so far after each round (Hardt, Ligett, McSherry's practical variant; post-processing of the
    measurements, so the privacy is unchanged); 1 is the seed's Algorithm 14.
    """
    eps = check_target_epsilon(eps)
    ld = resolve_log_delta(delta, log_delta)
    T = check_positive_int("rounds", rounds)
    passes = check_positive_int("update_passes", update_passes)
    h, Q, n = _check_inputs(histogram, queries)
    eps0 = mwem_round_epsilon(eps, ld, T)
    key, source = secret_key(seed)
    dist = _mwem_core(key, h / n, Q, n, eps0, T, passes)
    return Release(value=dist, events=((_round_event(eps0, n), 2 * T),),
                   params={"mechanism": "mwem", "rounds": T, "eps0": eps0, "n": n, "log_delta": ld,
                           "update_passes": passes,
                           "target_eps": eps},
                   randomness=source.describe())


def _round_event(eps0: float, n: int) -> PureDpEvent:
    return PureDpEvent(epsilon=eps0, label="mwem_step",
                       assumptions=(f"queries take values in [0, 1]; n = {n} public (replace-one): every answer "
                                    "has sensitivity 1/n",
                                    "exponential mechanism weights exp(eps0 n score / 2); Laplace(1/(n eps0))"),
                       metadata={"eps0": eps0})


def proportional_sample(key, distribution: Any, m: int) -> np.ndarray:
    """Alg. 15: m i.i.d. draws (domain indices) from a distribution over the domain."""
    import jax
    import jax.numpy as jnp

    m = check_positive_int("m", m)
    p = np.asarray(distribution, dtype=np.float64)
    if p.ndim != 1 or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError("distribution must be a 1-D probability vector")
    with jax.enable_x64(True):
        return np.asarray(jax.random.choice(key, p.size, (m,), replace=True, p=jnp.asarray(p / p.sum())))


def query_error(queries: Any, histogram: Any, distribution: Any) -> float:
    """max_j |<q_j, p> - <q_j, p_hat>| with p = histogram / n (post-processing; for evaluation)."""
    Q = np.asarray(queries, dtype=np.float64)
    h = np.asarray(histogram, dtype=np.float64)
    d = np.asarray(distribution, dtype=np.float64)
    return float(np.max(np.abs(Q @ (h / h.sum()) - Q @ (d / d.sum()))))


def pure_mwem_log_delta(eps: float, num_bits_total: int) -> float:
    """ln delta just below Theorem 2's threshold eps^D / (2D)^{3D} (D = total bits)."""
    eps = check_target_epsilon(eps)
    D = check_positive_int("num_bits_total", num_bits_total)
    return D * math.log(eps) - 3.0 * D * math.log(2.0 * D) - 1.0


def pure_mwem(histogram: Any, queries: Any, *, eps: float, num_bits: int, sample_size: int | None = None,
              rounds: int | None = None, update_passes: int = 1, seed: int | None = None) -> Release:
    """Pure 2 eps-DP query release (Alg. 16). Value: the purified synthetic records (indices).

    ``num_bits`` = d with N = 2^d domain points. Defaults from the seed: m = (n eps / d)^{2/3}
    records and T = sqrt(d) n eps / (sqrt(ln(1/delta)) ln(K n)) rounds (beta = 1/(2Tn) ~ 1/n), at
    least 1 each.
    """
    eps = check_target_epsilon(eps)
    d = check_positive_int("num_bits", num_bits)
    passes = check_positive_int("update_passes", update_passes)
    h, Q, n = _check_inputs(histogram, queries)
    if h.size != 2 ** d:
        raise ValueError(f"histogram must have 2**num_bits = {2 ** d} cells, got {h.size}")
    m = max(1, int(round((n * eps / d) ** (2.0 / 3.0)))) if sample_size is None \
        else check_positive_int("sample_size", sample_size)
    D = m * d
    ld = pure_mwem_log_delta(eps, D)
    K = Q.shape[0]
    T = max(1, int(math.sqrt(d) * n * eps / (math.sqrt(-ld) * math.log(K * n + 1.0)))) if rounds is None \
        else check_positive_int("rounds", rounds)
    eps0 = mwem_round_epsilon(eps, ld, T)
    key, source = secret_key(seed)
    import jax

    k_mw, k_s, k_pur = jax.random.split(key, 3)
    dist = _mwem_core(k_mw, h / n, Q, n, eps0, T, passes)
    records = proportional_sample(k_s, dist, m)
    bits = np.concatenate([[(int(r) >> (d - 1 - i)) & 1 for i in range(d)] for r in records]).astype(np.int8)
    par = binary_embedding_parameters(D, eps, log_delta=ld)
    out_bits = np.asarray(purify_bits_core(k_pur, bits, par["laplace_scale"])).reshape(m, d)
    out = (out_bits.astype(np.int64) * (1 << np.arange(d - 1, -1, -1))).sum(axis=1)
    event = PureDpEvent(epsilon=2.0 * eps, label="pure_mwem",
                        assumptions=("MWEM is (eps, delta)-DP by the accountant (2T pure eps0 events)",
                                     "proportional sampling is post-processing; Algorithm 2 with eps' = eps "
                                     "on the m d bits of the sampled records",
                                     "the purification randomness is independent of MWEM's",
                                     "guarantee for the idealised real-valued mechanism (float64 sampling)"),
                        metadata={"route": "pure_mwem", "eps": eps, "log_delta": ld, "rounds": T, "eps0": eps0,
                                  "sample_size": m, "num_bits_total": D})
    return Release(value=out, events=((event, 1),),
                   params={"mechanism": "pure_mwem", "rounds": T, "eps0": eps0, "sample_size": m,
                           "num_bits_total": D, "log_delta": ld, "laplace_scale": par["laplace_scale"],
                           "target_eps": 2.0 * eps},
                   randomness=source.describe())
