r"""Purification of ANY (eps, delta) mechanism with bounded output into pure DP (seed 003).

:func:`purify` is the general tool: hand it one output of an (eps, delta)-DP mechanism whose every
possible output lies in a bounded convex ``domain`` (an :class:`~dp_infer.domains.L2Ball` or a
:class:`~dp_infer.domains.Box`), the (eps, delta) the mechanism is certified for, and an extra
budget eps'; it returns an (eps + eps', 0)-DP release (Algorithm 1: with probability omega replace
the output by a uniform draw from the domain, then add i.i.d. Laplace(2 Delta / eps') noise,
``Delta = 2 d^{1-1/q} R (delta / (2 omega))^{1/d}``; constants and corrections in
:mod:`dp_infer.privacy.purification`, which this module drives). Requirements, all checked or
stated in the event:

* the mechanism's output lies in the domain (``project_first=True`` projects it: post-processing);
* its (eps, delta) holds under the library's adjacency, with exactly this delta (a number, usually
  astronomically small: pass ``log_delta``);
* the purification randomness is independent of the mechanism's (a fresh secret key here).

Variants:

* ``tv_error=tau`` instead of delta: the output is within total variation tau of an eps-PURE
  mechanism's output (e.g. an approximate sampler of an exponential mechanism); then delta = 2 tau
  plays the role of delta in Algorithm 1 (seed-003 digest §3.14: mixing keeps the TV below tau < delta/2).
* :func:`purify_discrete` (Algorithm 2): a finite output encoded in D bits, embedded in [0, 1]^D
  (an l_inf ball, R = 1, q = inf: digest §3.2's corrected convention), purified with omega = 2^{-D}
  and eps' (default eps), rounded back. The 2^{-D} coin is drawn exactly as D fair bits all equal to 1.
* :func:`plan_purification`: split a pure budget eps into an upstream (eps - eps', delta_a) run and
  eps', with delta_a chosen so that the Laplace scale equals a requested value -- the recipe the
  library's pure route uses (``eps_prime_fraction = 0.1``, ``omega = 0.01``, scale 1e-3 diameter).

ASAP (perturbing an MCMC output with noise scaled to an infinity-Wasserstein bound to the exact
exponential mechanism) is NOT offered: it needs ``W_inf(law of the chain, exact target) <= Delta``
uniformly over datasets, and none of the library's kernels has such a bound from its declared
constants (their guarantees are path / Renyi / TV). The TV form above is what can be checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import (
    check_epsilon, check_nonnegative, check_positive, check_positive_int, check_target_epsilon,
)
from ..domains import Domain
from ..privacy import purification as _pur
from ..privacy.conversions import resolve_log_delta
from ..privacy.events import PureDpEvent
from ..randomness import secret_key
from ._release import Release

__all__ = ["PurificationPlan", "plan_purification", "default_omega", "purify", "purify_discrete",
           "binary_embedding_parameters", "binary_embedding_success_probability", "purify_bits_core",
           "int_to_bits", "bits_to_int"]


@dataclass(frozen=True)
class PurificationPlan:
    """How a pure budget is split: run the upstream mechanism at (eps_upstream, exp(log_delta)),
    then purify with eps_prime and omega (``params``); total pure eps = eps_upstream + eps_prime."""

    eps: float
    eps_upstream: float
    eps_prime: float
    omega: float
    log_delta: float
    params: _pur.PurificationParams


def plan_purification(domain: Domain, eps: float, *, eps_prime_fraction: float = 0.1, omega: float = 0.01,
                      laplace_scale: float | None = None, log_delta: float | None = None) -> PurificationPlan:
    """Split a pure target eps: eps' = fraction eps, upstream eps - eps', and the upstream log delta.

    By default the upstream delta is the one for which the purification's Laplace scale equals
    ``laplace_scale`` (default 1e-3 times the domain's l2 diameter); pass ``log_delta`` to use a
    seed recipe instead (e.g. :func:`~dp_infer.privacy.purification.corollary4_log_delta`).
    """
    eps = check_target_epsilon(eps)
    f = float(eps_prime_fraction)
    if not (0.0 < f < 1.0):
        raise ValueError(f"eps_prime_fraction must lie in (0, 1), got {eps_prime_fraction!r}")
    _check_bounded(domain)
    eps_prime = f * eps
    if log_delta is None:
        scale = 1e-3 * domain.diameter if laplace_scale is None else check_positive("laplace_scale", laplace_scale)
        ld = _pur.required_log_delta(domain, eps_prime, omega, scale)
    else:
        ld = resolve_log_delta(None, log_delta)
    params = _pur.purification_parameters(domain, eps_prime, omega, log_delta=ld)
    return PurificationPlan(eps=eps, eps_upstream=eps - eps_prime, eps_prime=eps_prime, omega=float(omega),
                            log_delta=ld, params=params)


def _check_bounded(domain) -> None:
    if not isinstance(domain, Domain) or not domain.bounded:
        raise ValueError("domain must be a bounded dp_infer Domain (L2Ball or Box) to purify")


def default_omega(domain: Domain, eps_prime: float, log_delta: float) -> float:
    """omega minimising the l1 error bound ``omega Diam_1 + d b(omega)`` (public constants only).

    b(omega) = 2 Delta(1) omega^{-1/d} / eps' (uncapped), so the minimiser is
    ``omega* = (2 Delta(1) / (eps' Diam_1))^{d / (d + 1)}``, clipped to [1e-300, 1].
    """
    eps_prime = check_epsilon(eps_prime, "eps_prime")
    _check_bounded(domain)
    p1 = _pur.purification_parameters(domain, eps_prime, 1.0, log_delta=log_delta, cap=False)
    d = p1.dim
    l1 = float(domain.lq_diameter(1.0))
    log_w = d / (d + 1.0) * (math.log(2.0) + p1.log_wasserstein_uncapped - math.log(eps_prime) - math.log(l1))
    return float(min(1.0, max(1e-300, math.exp(min(log_w, 0.0)))))


def purify(output: Any, domain: Domain, *, eps: float, eps_prime: float, delta: float | None = None,
           log_delta: float | None = None, tv_error: float | None = None, omega: float | None = None,
           project_first: bool = False, conservative: bool = False, seed: int | None = None) -> Release:
    """Purify one output of an (eps, delta)-DP mechanism with outputs in ``domain`` to (eps + eps', 0)-DP.

    Give exactly one of ``delta``, ``log_delta`` (for deltas below the float range) or ``tv_error``
    (the output is within TV tau of an eps-pure mechanism). ``omega=None`` picks the omega that
    minimises the l1 error bound (:func:`default_omega`). ``project_first`` projects the output onto
    the domain before purifying (post-processing; otherwise an output outside raises ValueError).
    The released value lies in R^d (not projected back).
    """
    eps = check_nonnegative("eps", eps)
    eps_prime = check_epsilon(eps_prime, "eps_prime")
    _check_bounded(domain)
    given = [x is not None for x in (delta, log_delta, tv_error)]
    if sum(given) != 1:
        raise ValueError("give exactly one of delta, log_delta or tv_error")
    if tv_error is not None:
        tv = check_positive("tv_error", tv_error)
        if tv >= 0.5:
            raise ValueError(f"tv_error must lie in (0, 0.5), got {tv_error!r}")
        ld = math.log(2.0 * tv)
    else:
        ld = resolve_log_delta(delta, log_delta)
    x = np.asarray(output, dtype=np.float64)
    if x.shape != (domain.dim,) or not np.all(np.isfinite(x)):
        raise ValueError(f"output must be a finite vector of shape ({domain.dim},), got shape {x.shape}")
    if project_first:
        import jax
        import jax.numpy as jnp

        with jax.enable_x64(True):
            x = np.asarray(domain.project(jnp.asarray(x)), dtype=np.float64)
    om = default_omega(domain, eps_prime, ld) if omega is None else float(omega)
    params = _pur.purification_parameters(domain, eps_prime, om, log_delta=ld, conservative=conservative)
    key, source = secret_key(seed)
    value = _pur.purify(key, x, params, domain)  # raises if x is outside the domain
    if tv_error is None:
        event = _pur.purified_event(eps, params)
    else:
        event = PureDpEvent(epsilon=eps + eps_prime, label="purified_release",
                            assumptions=(f"every output law is within total variation {tv_error:g} of an "
                                         f"{eps:g}-pure-DP mechanism's output law, for every dataset",
                                         "every output lies in the domain (projected first)",
                                         "the purification randomness is independent of the mechanism",
                                         "guarantee for the idealised real-valued mechanism (float64 sampling)"),
                            metadata={"route": "purification_tv", "upstream_epsilon": eps, "tv_error": float(tv_error),
                                      **params.to_dict()})
    return Release(value=value, events=((event, 1),),
                   params={**params.to_dict(), "upstream_epsilon": eps, "project_first": bool(project_first)},
                   randomness=source.describe())


# ---------------------------------------------------------------------------------------------
# Algorithm 2: finite outputs through a binary embedding
# ---------------------------------------------------------------------------------------------


def int_to_bits(value: int, num_bits: int) -> np.ndarray:
    """Binary expansion (most significant bit first) of an integer in [0, 2^num_bits)."""
    b = check_positive_int("num_bits", num_bits)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not (0 <= value < 2 ** b):
        raise ValueError(f"value must be an integer in [0, 2**{b}), got {value!r}")
    return np.array([(int(value) >> (b - 1 - i)) & 1 for i in range(b)], dtype=np.int8)


def bits_to_int(bits: Any) -> int:
    """Inverse of :func:`int_to_bits`."""
    b = np.asarray(bits)
    if b.ndim != 1 or not np.isin(b, (0, 1)).all():
        raise ValueError("bits must be a 1-D array of 0/1")
    out = 0
    for v in b:
        out = (out << 1) | int(v)
    return out


def binary_embedding_parameters(num_bits: int, eps_prime: float, *, delta: float | None = None,
                                log_delta: float | None = None) -> dict:
    """Delta and Laplace scale of Algorithm 2 on [0, 1]^D (l_inf ball, R = 1, omega = 2^{-D}).

    ``Delta = min(D, 2 D (delta / (2 omega))^{1/D}) = min(D, 4 D (delta / 2)^{1/D})``, b = 2 Delta / eps'.
    """
    D = check_positive_int("num_bits", num_bits)
    eps_prime = check_epsilon(eps_prime, "eps_prime")
    ld = resolve_log_delta(delta, log_delta)
    log_w = math.log(2.0 * D) + (ld - math.log(2.0) + D * math.log(2.0)) / D
    w = min(float(D), math.exp(min(log_w, 700.0)))
    return {"num_bits": D, "log_delta": ld, "log_omega": -D * math.log(2.0), "wasserstein_l1": w,
            "capped": w == float(D), "laplace_scale": 2.0 * w / eps_prime, "eps_prime": eps_prime}


def binary_embedding_success_probability(num_bits: int, laplace_scale: float) -> float:
    """Exact P[purified bits == input bits] (digest §3.2):
    ``(1 - 2^-D) (1 - exp(-1/(2b))/2)^D + 2^-2D``."""
    D = check_positive_int("num_bits", num_bits)
    b = check_positive("laplace_scale", laplace_scale)
    keep = D * math.log1p(-0.5 * math.exp(-0.5 / b))
    return float(-math.expm1(-D * math.log(2.0)) * math.exp(keep) + math.exp(-2.0 * D * math.log(2.0)))


def purify_bits_core(key, bits, laplace_scale: float):
    """Algorithm 2's randomised step on D bits (pure JAX; jit / vmap friendly): with probability
    exactly 2^-D (D fair coins all 1) replace them by a uniform point of [0, 1]^D, add
    Laplace(laplace_scale) per coordinate, round at 1/2. Returns int8 bits."""
    import jax
    import jax.numpy as jnp

    with jax.enable_x64(True):
        z = jnp.asarray(bits, dtype=jnp.float64)
        k_coin, k_unif, k_lap = jax.random.split(key, 3)
        coin = jnp.all(jax.random.bernoulli(k_coin, 0.5, z.shape))
        unif = jax.random.uniform(k_unif, z.shape, dtype=jnp.float64)
        lap = jax.random.laplace(k_lap, z.shape, dtype=jnp.float64)
        x = jnp.where(coin, unif, z)
        return (x + laplace_scale * lap >= 0.5).astype(jnp.int8)


def purify_discrete(bits: Any, *, eps: float, delta: float | None = None, log_delta: float | None = None,
                    eps_prime: float | None = None, seed: int | None = None) -> Release:
    """Algorithm 2: purify a finite output given as D bits (from an (eps, delta)-DP mechanism).

    Returns the purified bits (same length); the event is pure (eps + eps'), eps' = eps by default
    (Theorem 2's 2 eps). Utility (not privacy) needs delta < eps^D / (2D)^{3D}.
    """
    eps = check_epsilon(eps)
    ep = eps if eps_prime is None else check_epsilon(eps_prime, "eps_prime")
    z = np.asarray(bits)
    if z.ndim != 1 or z.size == 0 or not np.isin(z, (0, 1)).all():
        raise ValueError(f"bits must be a non-empty 1-D array of 0/1, got shape {z.shape}")
    D = int(z.size)
    par = binary_embedding_parameters(D, ep, delta=delta, log_delta=log_delta)

    key, source = secret_key(seed)
    out = np.asarray(purify_bits_core(key, z, par["laplace_scale"]))
    event = PureDpEvent(epsilon=eps + ep, label="purified_discrete_release",
                        assumptions=("the upstream mechanism is (eps, delta)-DP with exactly this delta",
                                     "the finite output is encoded by a fixed, data-independent map into D bits",
                                     "the purification randomness is independent of the upstream mechanism",
                                     "guarantee for the idealised real-valued mechanism (float64 sampling)"),
                        metadata={"route": "purification_binary_embedding", "upstream_epsilon": eps, **par})
    return Release(value=out, events=((event, 1),), params={**par, "upstream_epsilon": eps},
                   randomness=source.describe())
