"""Predictive multiplicity of a set of models (draws): coefficient ranges, sign stability,
ambiguity and discrepancy against a stated reference (Marx, Calmon and Ustun 2020), viable
prediction ranges (Watson-Daniels et al.) and the Rashomon capacity (Hsu and Calmon 2022).

Every function is post-processing of the draws plus the rows passed in: free only when those
rows are public. ``model`` is a :class:`~dp_infer.rashomon.models.LinearModelClass` (rows
without the intercept column; its link and labels are used); ``model=None`` treats ``X`` as the
design matrix itself, scores ``X @ theta`` and labels ``score > 0``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import entr

from .._validation import check_finite_array


def draws_2d(draws) -> np.ndarray:
    """Draws as a finite float64 (N, dim) array ((chains, draws, dim) is pooled)."""
    th = np.asarray(draws, dtype=np.float64)
    if th.ndim == 3:
        th = th.reshape(-1, th.shape[-1])
    return check_finite_array("draws", th, ndim=2)


def scores(draws, X, model=None, name: str = "X_eval") -> np.ndarray:
    """Scores of every row under every draw, shape (rows, draws); width checked first."""
    th = draws_2d(draws)
    if model is not None:
        return model.scores(th, X, name=name)
    X = check_finite_array(name, X, ndim=2)
    if X.shape[1] != th.shape[1]:
        raise ValueError(f"{name} must have {th.shape[1]} columns (one per coefficient), got {X.shape[1]}")
    return X @ th.T


def _classification(model):
    if model is not None and model.task != "classification":
        raise ValueError(f"this measure needs a classifier; the model class is {model.kind!r} (regression)")


def coefficient_ranges(draws, quantiles=(0.025, 0.975)) -> dict:
    """Per-coefficient min/max over the draws, the given quantiles and the mean."""
    th = draws_2d(draws)
    q = np.quantile(th, quantiles, axis=0)
    return {"low": th.min(axis=0), "high": th.max(axis=0), "quantiles": tuple(quantiles),
            "q_low": q[0], "q_high": q[-1], "mean": th.mean(axis=0)}


def sign_stability(draws) -> dict:
    """Share of draws with the majority sign per coefficient; ``stable`` if all draws agree."""
    th = draws_2d(draws)
    pos = np.mean(th > 0, axis=0)
    share = np.maximum(pos, 1 - pos)
    return {"share": share, "stable": share == 1.0, "num_stable": int(np.sum(share == 1.0))}


def _reference_labels(X_eval, reference, model, dim):
    ref = check_finite_array("reference", reference, ndim=1)
    if ref.shape[0] != dim:
        raise ValueError(f"reference must have {dim} coefficients (like the draws), got {ref.shape[0]}")
    return scores(ref[None, :], X_eval, model)[:, 0] > 0


def ambiguity(draws, X_eval, reference, *, model=None) -> dict:
    """Share of rows whose label under SOME draw differs from the reference model's label.

    ``flipped`` per row; for draws inside the set this is an inner estimate of the set's
    ambiguity (the set may hold flips no draw reached)."""
    _classification(model)
    th = draws_2d(draws)
    S = scores(th, X_eval, model)
    ref = _reference_labels(X_eval, reference, model, th.shape[1])
    flipped = np.any((S > 0) != ref[:, None], axis=1)
    return {"flip_rate": float(flipped.mean()), "flipped": flipped, "num_flipped": int(flipped.sum())}


def discrepancy(draws, X_eval, reference, *, model=None) -> float:
    """Max over draws of the share of rows whose label differs from the reference model's."""
    _classification(model)
    th = draws_2d(draws)
    S = scores(th, X_eval, model)
    ref = _reference_labels(X_eval, reference, model, th.shape[1])
    return float(np.max(np.mean((S > 0) != ref[:, None], axis=0)))


def prediction_ranges(draws, X_eval, link: str | None = None, *, model=None) -> dict:
    """Viable prediction ranges: per-row min/max of the prediction over the draws.

    With ``model``: its predictions (probabilities for logistic). Without: ``link`` in
    ``{"logistic", "identity"}`` applied to ``X @ theta`` (default logistic)."""
    if model is not None and link is not None:
        raise ValueError("pass link only without model (the model class fixes the link)")
    link = "logistic" if link is None else link
    if link not in ("logistic", "identity"):
        raise ValueError(f"link must be 'logistic' or 'identity', got {link!r}")
    S = scores(draws, X_eval, model)
    if model is not None:
        P = model.predictions(S)
    else:
        P = 0.5 * (1 + np.tanh(0.5 * S)) if link == "logistic" else S
    lo, hi = P.min(axis=1), P.max(axis=1)
    return {"low": lo, "high": hi, "width": hi - lo}


def binary_channel_capacity(p_low, p_high) -> np.ndarray:
    """Capacity in nats of the channel {a, b} -> {0, 1} with P(1 | a) = p_low, P(1 | b) = p_high.

    Closed form: the mutual information I(q) = H(r) - q H(p_high) - (1 - q) H(p_low), with
    r = q p_high + (1 - q) p_low, is concave in q; its maximiser has
    log((1 - r)/r) = (H(p_high) - H(p_low)) / (p_high - p_low). Vectorised; 0 when equal.
    """
    a = np.asarray(p_low, dtype=np.float64)
    b = np.asarray(p_high, dtype=np.float64)
    if np.any(a > b) or np.any(a < 0) or np.any(b > 1):
        raise ValueError("need 0 <= p_low <= p_high <= 1")
    gap = b - a
    ok = gap > 1e-12
    Ha, Hb = entr(a) + entr(1 - a), entr(b) + entr(1 - b)
    k = np.where(ok, (Hb - Ha) / np.where(ok, gap, 1.0), 0.0)
    r = 0.5 * (1 - np.tanh(0.5 * k))  # 1 / (1 + e^k)
    q = np.clip(np.where(ok, (r - a) / np.where(ok, gap, 1.0), 0.0), 0.0, 1.0)
    r = q * b + (1 - q) * a
    C = entr(r) + entr(1 - r) - q * Hb - (1 - q) * Ha
    return np.where(ok, np.maximum(C, 0.0), 0.0)


def rashomon_capacity(draws, X_eval, *, model=None) -> dict:
    """Rashomon capacity per row, ``2^{C(x)}`` with C(x) in bits the capacity of the channel from
    the models (draws) to the predicted class (Hsu and Calmon 2022); in [1, 2] for two classes.

    For two classes the capacity-achieving input law sits on the two extreme probabilities, so
    ``C(x)`` is :func:`binary_channel_capacity` of the per-row min and max of P(y = 1). Models
    without probabilities (smoothed hinge) use their 0/1 labels. Without ``model``: logistic
    probabilities of ``X @ theta``.
    """
    _classification(model)
    S = scores(draws, X_eval, model)
    P = model.predictions(S) if model is not None else 0.5 * (1 + np.tanh(0.5 * S))
    cap = np.exp(binary_channel_capacity(P.min(axis=1), P.max(axis=1)))
    return {"capacity": cap, "mean": float(cap.mean()), "median": float(np.median(cap)),
            "q90": float(np.quantile(cap, 0.9)), "max": float(cap.max())}
