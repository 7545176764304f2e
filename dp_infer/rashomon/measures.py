"""Multiplicity and importance measures of Rashomon draws (names follow rashomon-py, Marx et al.,
Fisher et al.). Post-processing of the draws plus the rows you pass: free only on public rows."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import (
    check_finite_array,
    check_nonnegative,
    check_positive_int,
)
from ..domains import Domain
from ..losses import PerExampleLoss
from ..randomness import secret_key


def _draws2(draws) -> np.ndarray:
    th = np.asarray(draws, dtype=np.float64)
    if th.ndim == 3:
        th = th.reshape(-1, th.shape[-1])
    return check_finite_array("draws", th, ndim=2)


def coefficient_ranges(draws, quantiles=(0.025, 0.975)) -> dict:
    """Per-coefficient low/high (min/max over draws), quantiles and mean (VIC-style ranges)."""
    th = _draws2(draws)
    q = np.quantile(th, quantiles, axis=0)
    return {"low": th.min(axis=0), "high": th.max(axis=0), "quantiles": tuple(quantiles),
            "q_low": q[0], "q_high": q[-1], "mean": th.mean(axis=0)}


def sign_stability(draws) -> dict:
    """Share of draws with the majority sign per coefficient; ``stable`` if all draws agree."""
    th = _draws2(draws)
    pos = np.mean(th > 0, axis=0)
    share = np.maximum(pos, 1 - pos)
    return {"share": share, "stable": share == 1.0, "num_stable": int(np.sum(share == 1.0))}


def _labels(th, X):
    return (np.asarray(X) @ th.T) > 0  # (rows, draws)


def ambiguity(draws, X_eval, reference) -> dict:
    """Flip rate: share of evaluation rows whose label under SOME draw differs from the
    reference model's label (Marx et al. ambiguity)."""
    th = _draws2(draws)
    X_eval = check_finite_array("X_eval", X_eval, ndim=2)
    ref = (X_eval @ np.asarray(reference, dtype=np.float64)) > 0
    flipped = np.any(_labels(th, X_eval) != ref[:, None], axis=1)
    return {"flip_rate": float(flipped.mean()), "flipped": flipped, "num_flipped": int(flipped.sum())}


def discrepancy(draws, X_eval, reference) -> float:
    """Max over draws of the share of evaluation rows whose label differs from the reference."""
    th = _draws2(draws)
    X_eval = check_finite_array("X_eval", X_eval, ndim=2)
    ref = (X_eval @ np.asarray(reference, dtype=np.float64)) > 0
    return float(np.max(np.mean(_labels(th, X_eval) != ref[:, None], axis=0)))


def prediction_ranges(draws, X_eval, link: str = "logistic") -> dict:
    """Per-row low/high of the prediction over draws (probabilities for ``link='logistic'``)."""
    if link not in ("logistic", "identity"):
        raise ValueError(f"link must be 'logistic' or 'identity', got {link!r}")
    th = _draws2(draws)
    X_eval = check_finite_array("X_eval", X_eval, ndim=2)
    s = X_eval @ th.T
    p = 1 / (1 + np.exp(-s)) if link == "logistic" else s
    return {"low": p.min(axis=1), "high": p.max(axis=1), "width": p.max(axis=1) - p.min(axis=1)}


def model_class_reliance(draws, X_eval, y_eval, feature: int, loss: PerExampleLoss, *,
                         seed: int | None = None, num_permutations: int = 1) -> dict:
    """Per-draw model reliance: loss with column ``feature`` permuted / original loss, on the
    evaluation set; returns MCR- (min), MCR+ (max) and quantiles over draws (sampled inner
    approximation of Fisher et al.'s MCR)."""
    th = _draws2(draws)
    X_eval = check_finite_array("X_eval", X_eval, ndim=2)
    y_eval = check_finite_array("y_eval", y_eval, ndim=1)
    if not 0 <= int(feature) < X_eval.shape[1]:
        raise ValueError(f"feature must lie in [0, {X_eval.shape[1] - 1}], got {feature!r}")
    rng = np.random.default_rng(seed)
    with jax.enable_x64(True):
        f = jax.jit(jax.vmap(lambda t, Xe, ye: loss.mean(t, Xe, ye), in_axes=(0, None, None)))
        base = np.asarray(f(jnp.asarray(th), jnp.asarray(X_eval), jnp.asarray(y_eval)))
        perm = np.zeros_like(base)
        for _ in range(check_positive_int("num_permutations", num_permutations)):
            Xp = X_eval.copy()
            Xp[:, feature] = rng.permutation(Xp[:, feature])
            perm += np.asarray(f(jnp.asarray(th), jnp.asarray(Xp), jnp.asarray(y_eval)))
        perm /= num_permutations
    ratio = perm / np.maximum(base, 1e-300)
    return {"mcr_minus": float(ratio.min()), "mcr_plus": float(ratio.max()),
            "median": float(np.median(ratio)), "ratios": ratio}


def rashomon_ratio_estimate(loss: PerExampleLoss, X, y, L_star: float, psi: float, domain: Domain, *,
                            num_samples: int = 100000, seed: int | None = None,
                            data_is_private: bool = True) -> dict:
    """Share of uniform draws on the bounded ``domain`` inside {L <= L_star + psi}, with its
    binomial standard error (Semenova et al.'s Rashomon ratio). Computed on private data this
    is a NON-PRIVATE release (flagged); evaluate it on public data to make it free."""
    psi = check_nonnegative("psi", psi)
    num_samples = check_positive_int("num_samples", num_samples)
    if not isinstance(domain, Domain) or not domain.bounded:
        raise ValueError("domain must be a bounded Domain (L2Ball or Box)")
    X, y = loss.check_data(X, y)
    with jax.enable_x64(True):
        U = np.asarray(domain.sample_uniform(secret_key(seed)[0], (num_samples,)), dtype=np.float64)
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        Ls = np.asarray(jax.jit(jax.vmap(lambda t: loss.mean(t, Xj, yj)))(jnp.asarray(U)))
    inside = Ls <= float(L_star) + psi
    r = float(inside.mean())
    return {"ratio": r, "se": math.sqrt(max(r * (1 - r), 0.0) / num_samples), "num_samples": num_samples,
            "privacy": "NON-PRIVATE (computed on private data; not covered by any guarantee)"
            if data_is_private else "computed on public data"}


def set_fidelity(draws, loss: PerExampleLoss, X, y, L_star: float, psi: float, *,
                 data_is_private: bool = True) -> dict:
    """Share of draws with L(theta; X, y) <= L_star + psi.

    Default: the data are assumed PRIVATE and the result is flagged as a further release NOT
    covered by the sampler's guarantee (each draw's membership can change between neighbours,
    so the share has sensitivity 1). Pass held-out/public data (and its own L_star from
    :func:`rashomon_minimum`) with ``data_is_private=False`` for a free diagnostic.
    """
    psi = check_nonnegative("psi", psi)
    th = _draws2(draws)
    X, y = loss.check_data(X, y)
    with jax.enable_x64(True):
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        Ls = np.asarray(jax.jit(jax.vmap(lambda t: loss.mean(t, Xj, yj)))(jnp.asarray(th)))
    return {"fidelity": float(np.mean(Ls <= float(L_star) + psi)),
            "privacy": "NON-PRIVATE further release (private data): account for it or do not publish"
            if data_is_private else "evaluated on public/held-out data"}
