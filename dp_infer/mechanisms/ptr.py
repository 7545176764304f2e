r"""Propose-Test-Release (seed 003 Alg. 9) and its purified pure-DP version (Alg. 10), for a scalar.

PTR for a scalar query f with a proposed local-sensitivity bound beta:

    D = D_beta(X) = min{ d_H(X, X') : LS_f(X') > beta }      (global sensitivity 1)
    if D + Lap(1/eps) <= ln(1/delta) / eps:  output "bottom"   (None here)
    else:                                    output f(X) + Lap(beta / eps)

is (2 eps, delta)-DP (Lemma 34; Vadhan 2017, Prop. 7.3.2) -- event ``ApproxDpEvent(2 eps, delta)``.
The release is 1-D, so the l1 / l2 sensitivity issue of digest pitfall 13 does not arise.

Pure PTR (Alg. 10): replace "bottom" by a uniform draw from Theta = [lower, upper], clip
f(X) + Lap to Theta (Assumption 1; the paper omits this projection), then purify with eps'
(Algorithm 1). Total: pure ``2 eps + eps'``. In one dimension Delta = 2 R delta / (2 omega) is
linear in delta, so a moderate delta (e.g. 1e-7) already makes the purification noise negligible.

Worked example: the median (rank-m order statistic, m = ceil(n/2)) of values in [lower, upper].
Its local sensitivity at distance k (Nissim, Raskhodnikova, Smith 2007) is
``A_k(x) = max_{0 <= t <= k+1} (x_(m+t) - x_(m+t-k-1))`` with x_(i) = lower for i < 1 and upper
for i > n, so ``D_beta(x) = min{k : A_k(x) > beta}`` (tests check both by brute force).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import (
    check_delta, check_finite_array, check_nonnegative, check_positive, check_target_epsilon,
)
from ..domains import Box
from ..privacy import purification as _pur
from ..privacy.events import ApproxDpEvent
from ..randomness import secret_key
from ._release import Release
from .purifier import plan_purification

__all__ = ["median_sensitivity_at_distance", "median_distance_to_instability", "propose_test_release",
           "ptr_median", "pure_ptr_median"]


def _check_range(lower, upper) -> tuple[float, float]:
    lo = float(lower)
    hi = float(upper)
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        raise ValueError(f"upper must exceed lower (both finite), got lower={lower!r}, upper={upper!r}")
    return lo, hi


def _sorted_in_range(x, lo, hi) -> np.ndarray:
    x = check_finite_array("x", x, ndim=1)
    out = int(np.sum((x < lo) | (x > hi)))
    if out:
        raise ValueError(f"{out} value(s) of x lie outside the declared [lower, upper] = [{lo:g}, {hi:g}]")
    return np.sort(x)


def median_sensitivity_at_distance(x: Any, k: int, *, lower: float, upper: float) -> float:
    """A_k(x): the largest local sensitivity of the median over datasets within Hamming distance k."""
    lo, hi = _check_range(lower, upper)
    xs = _sorted_in_range(x, lo, hi)
    return _a_k(xs, int(k), lo, hi)


def _a_k(xs: np.ndarray, k: int, lo: float, hi: float) -> float:
    n = xs.size
    m = (n + 1) // 2                  # 1-based rank of the (lower) median
    t = np.arange(k + 2)
    up_idx = m + t                    # 1-based
    dn_idx = m + t - k - 1

    def val(i):
        return np.where(i < 1, lo, np.where(i > n, hi, xs[np.clip(i - 1, 0, n - 1)]))

    return float(np.max(val(up_idx) - val(dn_idx)))


def median_distance_to_instability(x: Any, beta: float, *, lower: float, upper: float) -> int:
    """D_beta(x) = min{k >= 0 : A_k(x) > beta} (n + 1 if no such k: then every dataset is stable)."""
    beta = check_nonnegative("beta", beta)
    lo, hi = _check_range(lower, upper)
    xs = _sorted_in_range(x, lo, hi)
    n = xs.size
    if _a_k(xs, n, lo, hi) <= beta:
        return n + 1
    a, b = 0, n                        # A_b > beta; find the smallest such k (A_k is non-decreasing)
    if _a_k(xs, 0, lo, hi) > beta:
        return 0
    while b - a > 1:
        mid = (a + b) // 2
        if _a_k(xs, mid, lo, hi) > beta:
            b = mid
        else:
            a = mid
    return b


def _ptr_core(key, value: float, distance: float, eps: float, delta: float, beta: float):
    import jax
    import jax.numpy as jnp

    with jax.enable_x64(True):
        k1, k2 = jax.random.split(key)
        z1 = float(jax.random.laplace(k1, (), dtype=jnp.float64))
        z2 = float(jax.random.laplace(k2, (), dtype=jnp.float64))
    if distance + z1 / eps <= math.log(1.0 / delta) / eps:
        return None
    return value + beta / eps * z2


def _ptr_event(eps: float, delta: float, beta: float) -> ApproxDpEvent:
    return ApproxDpEvent(epsilon=2.0 * eps, delta=delta, label="propose_test_release",
                         assumptions=("the distance to instability has global sensitivity 1",
                                      f"the query's local sensitivity is <= beta = {beta:g} on every dataset at "
                                      "distance >= 1 from instability (definition of D_beta)",
                                      "Lemma 34 / Vadhan Prop. 7.3.2: (2 eps, delta)-DP"),
                         metadata={"mechanism": "ptr", "eps": eps, "beta": beta})


def propose_test_release(value: float, distance: float, *, eps: float, delta: float, beta: float,
                         seed: int | None = None) -> Release:
    """PTR for a scalar: the caller supplies f(X) and D_beta(X) (its sensitivity-1 distance).

    Value: None for "bottom", else f(X) + Lap(beta / eps). Event ``ApproxDpEvent(2 eps, delta)``.
    """
    eps = check_target_epsilon(eps)
    delta = check_delta(delta)
    beta = check_positive("beta", beta)
    v = float(value)
    dist = check_nonnegative("distance", distance)
    if not math.isfinite(v):
        raise ValueError(f"value must be a finite number, got {value!r}")
    key, source = secret_key(seed)
    out = _ptr_core(key, v, dist, eps, delta, beta)
    return Release(value=out, events=((_ptr_event(eps, delta, beta), 1),),
                   params={"mechanism": "ptr", "eps": eps, "delta": delta, "beta": beta,
                           "test_threshold": math.log(1.0 / delta) / eps},
                   randomness=source.describe())


def ptr_median(x: Any, *, eps: float, delta: float, beta: float, lower: float, upper: float,
               seed: int | None = None) -> Release:
    """(2 eps, delta)-DP median by PTR (None when the test refuses)."""
    eps = check_target_epsilon(eps)
    delta = check_delta(delta)
    beta = check_positive("beta", beta)
    lo, hi = _check_range(lower, upper)
    xs = _sorted_in_range(x, lo, hi)
    dist = median_distance_to_instability(xs, beta, lower=lo, upper=hi)
    return propose_test_release(float(xs[(xs.size + 1) // 2 - 1]), dist, eps=eps, delta=delta, beta=beta, seed=seed)


def pure_ptr_median(x: Any, *, eps: float, beta: float, lower: float, upper: float,
                    eps_prime_fraction: float = 0.1, omega: float = 0.01, laplace_scale: float | None = None,
                    seed: int | None = None) -> Release:
    """Pure eps-DP median: PTR at eps_ptr = (eps - eps') / 2 (so 2 eps_ptr + eps' = eps), "bottom"
    replaced by a uniform draw on [lower, upper], clipped, purified (Alg. 10).

    delta of the PTR step: the one for which the purification's Laplace scale equals
    ``laplace_scale`` (default 1e-3 (upper - lower)); it must be < 1.
    """
    eps = check_target_epsilon(eps)
    beta = check_positive("beta", beta)
    lo, hi = _check_range(lower, upper)
    xs = _sorted_in_range(x, lo, hi)
    domain = Box(np.array([lo]), np.array([hi]))
    f = float(eps_prime_fraction)
    if not (0.0 < f < 1.0):
        raise ValueError(f"eps_prime_fraction must lie in (0, 1), got {eps_prime_fraction!r}")
    # the upstream mechanism is PTR, whose eps is 2 eps_ptr: plan with the upstream share eps - eps'
    plan = plan_purification(domain, eps, eps_prime_fraction=f, omega=omega, laplace_scale=laplace_scale)
    eps_ptr = plan.eps_upstream / 2.0
    delta = math.exp(plan.log_delta)
    if not (0.0 < delta < 1.0):
        raise ValueError("laplace_scale is too small for a representable PTR delta; increase it")
    dist = median_distance_to_instability(xs, beta, lower=lo, upper=hi)
    key, source = secret_key(seed)
    import jax

    k_ptr, k_unif, k_pur = jax.random.split(key, 3)
    out = _ptr_core(k_ptr, float(xs[(xs.size + 1) // 2 - 1]), dist, eps_ptr, delta, beta)
    if out is None:  # "bottom" -> a uniform draw on [lower, upper] (float64, inside exactly)
        with jax.enable_x64(True):
            u = float(jax.random.uniform(k_unif, (), dtype=jax.numpy.float64))
        out = lo + (hi - lo) * u
    point = min(max(out, lo), hi)
    value = _pur.purify(k_pur, np.array([point]), plan.params, domain)
    event = _pur.purified_event(2.0 * eps_ptr, plan.params, label="pure_ptr")
    return Release(value=float(value[0]), events=((event, 1),),
                   params={"mechanism": "pure_ptr", "eps_ptr": eps_ptr, "delta_ptr": delta, "beta": beta,
                           "lower": lo, "upper": hi, "purification": plan.params.to_dict(), "target_eps": eps},
                   randomness=source.describe())
