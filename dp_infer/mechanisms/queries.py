r"""Answering many counting / linear queries at a fixed privacy target (seed 004 ch. 2, §4.1).

A workload of k linear queries is given per record: ``values[i, j] = q_j(record_i)`` in [0, 1]
(a counting query is a 0/1 predicate). The answers are the sums over records (counts) or, with
``normalize=True``, the means. Under the library's replace-one adjacency (n public) each answer
changes by at most ``s = 1`` (counts) or ``1/n`` (means): the l_inf sensitivity is s, the l2
sensitivity ``s sqrt(k)`` and the l1 sensitivity ``s k``.

Mechanisms, each calibrated exactly for its own accounting and logged as events:

* ``"gaussian"``: N(0, sigma^2 I), sigma = s sqrt(k) / mu with mu from the exact Gaussian profile
  (``gdp_mu``); event ``GdpEvent(mu)``.
* ``"laplace"``: i.i.d. Laplace(b). At (eps, delta) the k-fold composition is calibrated on the
  exact Laplace privacy-loss distribution (GG with p = 1); for ``delta=None`` the pure calibration
  b = s k / eps (event ``PureDpEvent(eps)``).
* ``"generalized_gaussian"``: GGauss(p, sigma), calibrated on the PLD
  (:mod:`~dp_infer.mechanisms.generalized_gaussian`).

The error is additive noise, independent of the data: :func:`expected_max_error` gives the exact
expected l_inf error ``E max_j |noise_j| = int_0^inf 1 - (1 - 2 P(noise > t))^k dt`` by quadrature,
and :func:`rms_error` the per-coordinate root mean square.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from scipy import integrate, special

from .._validation import check_delta, check_positive, check_positive_int, check_target_epsilon
from ..privacy.conversions import gdp_mu
from ..privacy.events import GdpEvent, laplace_mechanism_event
from ..randomness import gaussian_noise, secret_key
from . import generalized_gaussian as gg
from ._release import Release

__all__ = ["MECHANISMS", "query_answers", "conjunction_queries", "random_conjunctions", "answer_queries",
           "noise_scale", "expected_max_error", "rms_error"]

MECHANISMS = ("generalized_gaussian", "gaussian", "laplace")


def _check_values(values: Any) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.size == 0:
        raise ValueError(f"values must be a non-empty 2-D array (records x queries), got shape {v.shape}")
    bad = ~np.isfinite(v) | (v < 0.0) | (v > 1.0)
    if bad.any():
        raise ValueError("values must lie in [0, 1] (q_j(record_i)); an entry does not")
    return v


def query_answers(values: Any, *, normalize: bool = False) -> tuple[np.ndarray, float]:
    """(answers, l_inf sensitivity): column sums of ``values`` (or means), sensitivity 1 (or 1/n)."""
    v = _check_values(values)
    n = v.shape[0]
    return (v.mean(axis=0), 1.0 / n) if normalize else (v.sum(axis=0), 1.0)


def conjunction_queries(binary: Any, index_sets: Sequence[Sequence[int]]) -> np.ndarray:
    """Per-record values of conjunction (AND) queries over columns of a 0/1 matrix, shape (n, k)."""
    b = np.asarray(binary)
    if b.ndim != 2 or not np.isin(b, (0, 1)).all():
        raise ValueError(f"binary must be a 2-D array of 0/1 entries, got shape {b.shape}")
    if len(index_sets) == 0:
        raise ValueError("index_sets must contain at least one query")
    out = np.empty((b.shape[0], len(index_sets)), dtype=np.float64)
    for j, idx in enumerate(index_sets):
        idx = list(idx)
        if not idx or min(idx) < 0 or max(idx) >= b.shape[1]:
            raise ValueError(f"index_sets[{j}] must be non-empty column indices in [0, {b.shape[1] - 1}]")
        out[:, j] = np.all(b[:, idx] == 1, axis=1)
    return out


def random_conjunctions(num_columns: int, k: int, width: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """k distinct conjunctions of ``width`` columns chosen with a PUBLIC generator (data independent)."""
    m = check_positive_int("num_columns", num_columns)
    k = check_positive_int("k", k)
    w = check_positive_int("width", width)
    if w > m or math.comb(m, w) < k:
        raise ValueError(f"k must be at most C(num_columns, width) = {math.comb(m, w) if w <= m else 0}, got {k}")
    seen: set[tuple[int, ...]] = set()
    while len(seen) < k:
        seen.add(tuple(sorted(int(i) for i in rng.choice(m, size=w, replace=False))))
    return sorted(seen)


def noise_scale(mechanism: str, k: int, *, eps: float, delta: float | None, sensitivity: float = 1.0,
                p: float = 4.0) -> float:
    """Data-independent noise parameter: sigma (gaussian: std; GG: scale) or b (laplace)."""
    k = check_positive_int("k", k)
    eps = check_target_epsilon(eps)
    s = check_positive("sensitivity", sensitivity)
    if mechanism == "gaussian":
        return s * math.sqrt(k) / gdp_mu(eps, check_delta(delta))
    if mechanism == "laplace":
        if delta is None:
            return s * k / eps
        return gg.calibrate_gg_sigma(eps, check_delta(delta), 1.0, k, sensitivity=s)
    if mechanism == "generalized_gaussian":
        return gg.calibrate_gg_sigma(eps, check_delta(delta), gg.check_shape(p), k, sensitivity=s)
    raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")


def _tail(mechanism: str, scale: float, p: float):
    """t -> P(noise > t) for one coordinate."""
    if mechanism == "gaussian":
        return lambda t: float(special.ndtr(-t / scale))
    shape = 1.0 if mechanism == "laplace" else p
    return lambda t: 0.5 * float(special.gammaincc(1.0 / shape, (t / scale) ** shape))


def expected_max_error(mechanism: str, k: int, scale: float, *, p: float = 4.0) -> float:
    """Exact E max_j |noise_j| over k i.i.d. coordinates (quadrature of the survival function)."""
    k = check_positive_int("k", k)
    scale = check_positive("scale", scale)
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    tail = _tail(mechanism, scale, gg.check_shape(p))

    def surv(t):  # P(max |x| > t) = 1 - (1 - 2 P(x > t))^k, computed stably
        q = 2.0 * tail(t)
        return -math.expm1(k * math.log1p(-q)) if q < 1.0 else 1.0

    hi = scale
    while surv(hi) > 1e-17:
        hi *= 2.0
    val, _ = integrate.quad(surv, 0.0, hi, limit=500, epsabs=1e-12 * scale, epsrel=1e-10)
    return float(val)


def rms_error(mechanism: str, scale: float, *, p: float = 4.0) -> float:
    """Root mean square of one noise coordinate."""
    scale = check_positive("scale", scale)
    if mechanism == "gaussian":
        return scale
    if mechanism == "laplace":
        return math.sqrt(2.0) * scale
    if mechanism == "generalized_gaussian":
        p = gg.check_shape(p)
        return scale * math.sqrt(math.exp(special.gammaln(3.0 / p) - special.gammaln(1.0 / p)))
    raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")


def answer_queries(values: Any, *, eps: float, delta: float | None, mechanism: str = "generalized_gaussian",
                   p: float = 4.0, normalize: bool = False, seed: int | None = None) -> Release:
    """Private answers to the k queries of ``values`` (records x queries, entries in [0, 1]).

    ``delta=None`` is allowed for ``"laplace"`` only (pure eps). The noise parameter depends only on
    (eps, delta, k, n when normalised, p); ``params`` carries it with the exact expected l_inf error
    and the RMS error of the noise.
    """
    eps = check_target_epsilon(eps)
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if delta is None and mechanism != "laplace":
        raise ValueError(f"delta must lie in (0, 1) for mechanism {mechanism!r} (only 'laplace' is pure)")
    if delta is not None:
        delta = check_delta(delta)
    if mechanism == "generalized_gaussian":
        p = gg.check_shape(p)
    answers, s = query_answers(values, normalize=normalize)
    k = answers.size
    scale = noise_scale(mechanism, k, eps=eps, delta=delta, sensitivity=s, p=p)
    key, source = secret_key(seed)
    if mechanism == "gaussian":
        import jax
        import jax.numpy as jnp

        with jax.enable_x64(True):
            noise = np.asarray(gaussian_noise(key, (k,), jnp.float64)) * scale
        mu = s * math.sqrt(k) / scale
        event = GdpEvent(mu=mu, label="gaussian_queries",
                         assumptions=(f"l2 sensitivity of the answers <= {s * math.sqrt(k):g} (k = {k} queries "
                                      f"in [0, 1], replace-one adjacency)",),
                         metadata={"mechanism": "gaussian", "sigma": scale, "k": k, "sensitivity": s})
    else:
        shape = 1.0 if mechanism == "laplace" else p
        noise = gg.sample_generalized_gaussian(key, shape, scale, (k,))
        if mechanism == "laplace" and delta is None:
            event = laplace_mechanism_event(s * k, scale, label="laplace_queries")
        else:
            event = gg.gg_approx_event(shape, scale, k, delta=delta, sensitivity=s,
                                       label=f"{mechanism}_queries")
    return Release(value=answers + noise, events=((event, 1),),
                   params={"mechanism": mechanism, "p": p if mechanism == "generalized_gaussian" else None,
                           "k": k, "sensitivity": s, "noise_scale": scale, "target_eps": eps, "delta": delta,
                           "expected_max_error": expected_max_error(mechanism, k, scale, p=p),
                           "rms_error": rms_error(mechanism, scale, p=p)},
                   randomness=source.describe())
