r"""Purification: turn an (eps, delta)-DP output on a bounded domain into pure (eps + eps')-DP.

Algorithm 1 of Lin, Wang, Ma, Wang (2025), "Purifying approximate differential privacy with
randomized post-processing", with the corrected constants of the seed-003 digest (§3.1, §8):

    1. with probability omega replace x_apx by a uniform draw from the domain Theta (independent coin);
    2. add i.i.d. Laplace(b) noise to every coordinate, b = 2 Delta / eps',

where Delta bounds the l1 infinity-Wasserstein distance after mixing (Lemma 6 + l_q -> l_1):

    Theta an l_q ball with l_q DIAMETER R (not radius; digest §8 item 4):
        Delta = 2 d^{1 - 1/q} R (delta / (2 omega))^{1/d}
    Theta a general convex body with l_q diameter R containing an l_q ball of radius r:
        Delta = d^{1 - 1/q} (4 R / r) (delta Vol(Theta) / (2 omega V_q))^{1/d},
        V_q = (2 Gamma(1 + 1/q))^d / Gamma(1 + d/q)   (volume of the unit l_q ball)

computed in log space (delta is typically far below the float range, e.g. log delta ~ -3000).
Since both mixed laws live on Theta, Delta may be capped at the l1 diameter of Theta (digest §3.1,
"optional cap"). The output x_pure lies in R^d: the digest's Algorithm 1 does NOT project after the
Laplace step. Projecting onto Theta afterwards is post-processing (free, and non-expansive towards
x_apx in Theta); it is available as ``project=True``.

Guarantee: if M is (eps, delta)-DP under the library's adjacency and every output of M lies in
Theta (project/clip it first, which is free), purify(M) is (eps + eps', 0)-DP for the idealised
real-valued mechanism. Floating-point Laplace sampling does not carry pure DP exactly (Mironov
2012); all draws here are float64.

Domains: :class:`~dp_infer.domains.L2Ball` (l2 ball, q = 2, R = 2 radius) and
:class:`~dp_infer.domains.Box` (a cube is an l_inf ball, q = inf, R = side; a non-cubic box uses
the general convex formula with q = inf, R = max side, r = min side / 2).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import special

from .._validation import check_epsilon, check_nonnegative, check_positive, check_positive_int
from .conversions import resolve_log_delta
from .events import PureDpEvent

__all__ = [
    "PurificationParams",
    "purification_parameters",
    "purify",
    "purified_event",
    "required_log_delta",
    "corollary4_log_delta",
    "log_unit_ball_volume",
]


def log_unit_ball_volume(dim: int, q: float) -> float:
    """log Vol(B_q^d(1)) = d log(2 Gamma(1 + 1/q)) - log Gamma(1 + d/q) (digest §2.1, corrected formula)."""
    d = check_positive_int("dim", dim)
    q = check_positive("q", q, allow_inf=True)
    if math.isinf(q):
        return d * math.log(2.0)
    return d * (math.log(2.0) + special.gammaln(1.0 + 1.0 / q)) - special.gammaln(1.0 + d / q)


@dataclass(frozen=True)
class PurificationParams:
    """Parameters of Algorithm 1 (all derived quantities in float64, logs where they can underflow)."""

    dim: int
    q: float
    lq_diameter: float          # R
    log_delta: float            # upstream delta (log)
    omega: float                # mixing probability
    eps_prime: float            # extra pure budget
    formula: str                # "lq_ball" or "general_convex"
    log_wasserstein_uncapped: float  # log Delta before the cap
    wasserstein_l1: float       # Delta actually used (after the cap)
    capped: bool
    laplace_scale: float        # b = 2 Delta / eps'
    l1_diameter: float
    conservative: bool

    @property
    def log_laplace_scale(self) -> float:
        return math.log(2.0) + math.log(self.wasserstein_l1) - math.log(self.eps_prime) if self.wasserstein_l1 > 0 else -math.inf

    def total_epsilon(self, upstream_epsilon: float) -> float:
        """eps + eps' (the pure guarantee of the purified output)."""
        return check_nonnegative("upstream_epsilon", upstream_epsilon) + self.eps_prime

    def expected_l1_error_bound(self) -> float:
        """E||x_pure - x_apx||_1 <= omega Diam_1(Theta) + d b (Theorem 1, l1 form; digest §5, §8 item 5)."""
        return self.omega * self.l1_diameter + self.dim * self.laplace_scale

    def to_dict(self) -> dict:
        d = asdict(self)
        d["q"] = "inf" if math.isinf(self.q) else self.q
        return d


def _domain_geometry(domain) -> dict:
    """(q, R, formula, extra) for supported domains."""
    from ..domains import Box, L2Ball

    if isinstance(domain, L2Ball):
        return {"q": 2.0, "R": float(domain.lq_diameter(2.0)), "formula": "lq_ball", "dim": domain.dim}
    if isinstance(domain, Box):
        w = np.asarray(domain.upper, dtype=np.float64) - np.asarray(domain.lower, dtype=np.float64)
        if np.allclose(w, w[0], rtol=0.0, atol=0.0):
            return {"q": math.inf, "R": float(domain.lq_diameter(math.inf)), "formula": "lq_ball", "dim": domain.dim}
        return {"q": math.inf, "R": float(w.max()), "r": float(w.min()) / 2.0,
                "log_vol": float(np.sum(np.log(w))), "formula": "general_convex", "dim": domain.dim}
    if not getattr(domain, "bounded", False):
        raise ValueError("domain must be bounded (L2Ball or Box) to purify: an unbounded domain has no uniform law")
    raise ValueError(f"domain must be an L2Ball or a Box for purification, got {type(domain).__name__}")


def purification_parameters(domain, eps_prime: float, omega: float, *, delta: float | None = None,
                            log_delta: float | None = None, cap: bool = True,
                            conservative: bool = False) -> PurificationParams:
    """Algorithm 1's Delta and Laplace scale for ``domain`` and an upstream (eps, delta) mechanism.

    ``conservative=True`` uses TV <= delta instead of delta/(e^eps + 1) in Lemma 14 (digest §8
    item 9), i.e. replaces delta/(2 omega) by delta/omega. ``omega`` must lie in (0, 1].
    """
    eps_prime = check_epsilon(eps_prime, "eps_prime")
    omega = check_positive("omega", omega)
    if omega > 1.0:
        raise ValueError(f"omega must lie in (0, 1], got {omega!r}")
    ld = resolve_log_delta(delta, log_delta)
    g = _domain_geometry(domain)
    d, q, R = g["dim"], g["q"], g["R"]
    l1_factor_log = math.log(d) if math.isinf(q) else (1.0 - 1.0 / q) * math.log(d)  # log d^{1-1/q}
    # log(delta / (2 omega)), or log(delta / omega) in the conservative variant
    lr = ld - math.log(omega) - (0.0 if conservative else math.log(2.0))
    if g["formula"] == "lq_ball":
        log_dq = math.log(2.0) + math.log(R) + lr / d
    else:
        log_vq = log_unit_ball_volume(d, q)
        log_dq = math.log(4.0) + math.log(R) - math.log(g["r"]) + (lr + g["log_vol"] - log_vq) / d
    log_w = l1_factor_log + log_dq
    l1_diam = float(domain.lq_diameter(1.0))
    w = math.exp(log_w) if log_w < 700 else math.inf
    capped = False
    if cap and w > l1_diam:
        w, capped = l1_diam, True
    return PurificationParams(dim=d, q=q, lq_diameter=R, log_delta=ld, omega=omega, eps_prime=eps_prime,
                              formula=g["formula"], log_wasserstein_uncapped=log_w, wasserstein_l1=w,
                              capped=capped, laplace_scale=2.0 * w / eps_prime, l1_diameter=l1_diam,
                              conservative=conservative)


def required_log_delta(domain, eps_prime: float, omega: float, laplace_scale: float, *,
                       conservative: bool = False) -> float:
    """Upstream log delta for which Algorithm 1's Laplace scale equals ``laplace_scale`` (uncapped).

    Inverts b = 2 Delta / eps': run the upstream mechanism at (at most) this delta.
    """
    eps_prime = check_epsilon(eps_prime, "eps_prime")
    omega = check_positive("omega", omega)
    if omega > 1.0:
        raise ValueError(f"omega must lie in (0, 1], got {omega!r}")
    b = check_positive("laplace_scale", laplace_scale)
    g = _domain_geometry(domain)
    d, q, R = g["dim"], g["q"], g["R"]
    l1_factor_log = math.log(d) if math.isinf(q) else (1.0 - 1.0 / q) * math.log(d)
    log_w = math.log(b * eps_prime / 2.0)
    log_dq = log_w - l1_factor_log
    if g["formula"] == "lq_ball":
        lr = d * (log_dq - math.log(2.0) - math.log(R))
    else:
        lr = d * (log_dq - math.log(4.0) - math.log(R) + math.log(g["r"])) - g["log_vol"] + log_unit_ball_volume(d, q)
    ld = lr + math.log(omega) + (0.0 if conservative else math.log(2.0))
    if ld >= 0:
        raise ValueError("laplace_scale is so large that any delta < 1 suffices; choose a smaller scale")
    return ld


def corollary4_log_delta(n: int, dim: int, diameter: float) -> tuple[float, float]:
    """(log delta, omega) of the paper's Corollary 4 recipe: omega = 1/n^2, delta = 2 omega / (16 C d n^2)^d."""
    n = check_positive_int("n", n)
    d = check_positive_int("dim", dim)
    c = check_positive("diameter", diameter)
    omega = 1.0 / (n * n)
    return math.log(2.0 * omega) - d * math.log(16.0 * c * d * n * n), omega


def _as_jax_key(key: Any):
    import jax

    from ..randomness import secret_key

    # jax.random.key(int) keeps only the low 32 bits of a seed (without jax_enable_x64): a Generator gets
    # 64 bits of key material directly, and an int seed the same key words as secret_key (hi, lo)
    if isinstance(key, np.random.Generator):
        return jax.random.wrap_key_data(key.integers(0, 2**32, size=2, dtype=np.uint32))
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return secret_key(int(key))[0]
    try:
        if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
            return key
    except AttributeError:
        pass
    arr = np.asarray(key)
    if arr.dtype == np.uint32 and arr.shape == (2,):
        return jax.random.wrap_key_data(arr)
    raise ValueError("key must be a JAX PRNG key, a raw uint32[2] key, an int seed or a numpy Generator")


def purify(key: Any, x_apx: Any, params: PurificationParams, domain, *, project: bool = False) -> np.ndarray:
    """Apply Algorithm 1 to draw(s) ``x_apx`` of shape (..., d); returns float64 numpy.

    Each draw gets an independent coin, uniform draw and Laplace vector (key split internally;
    the key must be independent of the upstream mechanism's randomness). ``x_apx`` must lie in
    the domain (project it first: post-processing). ``project=True`` projects the purified output
    back onto the domain (post-processing; not part of the paper's algorithm).
    """
    import jax
    import jax.numpy as jnp

    if not isinstance(params, PurificationParams):
        raise ValueError("params must be a PurificationParams from purification_parameters(...)")
    g = _domain_geometry(domain)
    if g["dim"] != params.dim:
        raise ValueError(f"domain dim {g['dim']} does not match params.dim {params.dim}")
    x = np.asarray(x_apx, dtype=np.float64)
    if x.ndim == 0 or x.shape[-1] != params.dim:
        raise ValueError(f"x_apx must have a trailing axis of size dim={params.dim}, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x_apx contains non-finite values")
    with jax.enable_x64(True):
        inside = np.asarray(domain.contains(jnp.asarray(x), tol=1e-9))
        if not np.all(inside):
            raise ValueError(
                f"x_apx has {int(np.size(inside) - np.sum(inside))} draw(s) outside the domain: project the upstream "
                "output onto the domain first (post-processing) so that Assumption 1 holds"
            )
        k = _as_jax_key(key)
        k_coin, k_unif, k_lap = jax.random.split(k, 3)
        batch = x.shape[:-1]
        coin = np.asarray(jax.random.bernoulli(k_coin, params.omega, batch))
        unif = np.asarray(domain.sample_uniform(k_unif, batch), dtype=np.float64)
        lap = np.asarray(jax.random.laplace(k_lap, batch + (params.dim,), dtype=jnp.float64), dtype=np.float64)
    mixed = np.where(coin[..., None], unif, x)
    out = mixed + params.laplace_scale * lap
    if project:
        with jax.enable_x64(True):
            out = np.asarray(domain.project(jnp.asarray(out)), dtype=np.float64)
    return out


def purified_event(upstream_epsilon: float, params: PurificationParams, *, label: str = "purified_release") -> PureDpEvent:
    """PureDpEvent(eps + eps') for the purified output of an (eps, delta) mechanism.

    The upstream mechanism's own events must NOT also be composed for the same release: the
    purified output replaces it (purification is post-processing of that single output).
    """
    eps = check_nonnegative("upstream_epsilon", upstream_epsilon)
    return PureDpEvent(
        epsilon=eps + params.eps_prime, label=label,
        assumptions=(
            "the upstream mechanism is (eps, delta)-DP with exactly the delta used for the purification parameters",
            "every upstream output lies in the domain (projected/clipped first)",
            "the purification randomness (coin, uniform draw, Laplace noise) is independent of the upstream mechanism",
            "guarantee for the idealised real-valued mechanism (float64 sampling in practice)",
        ),
        metadata={"route": "purification", "upstream_epsilon": eps, **params.to_dict()},
    )
