"""Size of a Rashomon set: the Rashomon ratio with an exact confidence interval, the pattern
Rashomon ratio (Semenova, Rudin and Parr 2022), and the membership share of draws.

The Rashomon ratio and the membership share evaluate the loss on the rows you pass and compare
with an ``L_star`` computed on them: on PRIVATE rows they are releases no guarantee covers (the
output says so unless ``data_is_private=False``). The pattern ratio reads only the draws and the
rows passed (post-processing; free on public rows).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from .._validation import check_nonnegative, check_positive_int
from ..domains import Domain
from ..losses import PerExampleLoss
from ..randomness import secret_key
from .models import LinearModelClass
from .multiplicity import draws_2d, scores

_NONPRIVATE = "NON-PRIVATE (computed on private data; not covered by any guarantee)"


def _loss_rows(model_or_loss, X, y):
    if isinstance(model_or_loss, LinearModelClass):
        Xd = model_or_loss.design(X, "X")
        y = model_or_loss.check_labels(y, Xd.shape[0], "y")
        return model_or_loss.loss, Xd, y
    if isinstance(model_or_loss, PerExampleLoss):
        X, y = model_or_loss.check_data(X, y)
        return model_or_loss, X, y
    raise ValueError(f"model must be a linear_model(...) or a PerExampleLoss, got {type(model_or_loss).__name__}")


def _losses(loss, X, y, thetas) -> np.ndarray:
    with jax.enable_x64(True):
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        f = jax.jit(jax.vmap(lambda t: loss.mean(t, Xj, yj)))
        return np.asarray(f(jnp.asarray(np.asarray(thetas, dtype=np.float64))))


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> dict:
    """Exact binomial interval for k successes in n trials: two-sided CI and one-sided upper bound."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    a = 1 - confidence
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    up = 1.0 if k == n else float(stats.beta.ppf(confidence, k + 1, n - k))
    return {"ci": (lo, hi), "upper_bound": up, "confidence": confidence}


def rashomon_ratio_estimate(model, X, y, L_star: float, psi: float, domain: Domain, *,
                            num_samples: int = 100000, seed: int | None = None,
                            data_is_private: bool = True, confidence: float = 0.95) -> dict:
    """Share of the bounded ``domain``'s volume inside {L <= L_star + psi} (Semenova et al.'s
    Rashomon ratio), from ``num_samples`` uniform draws: estimate, binomial standard error, an
    exact Clopper-Pearson interval and one-sided upper bound at ``confidence``. When no draw
    hits, the estimate is 0 and the upper bound ``1 - (1 - confidence)^(1/N)`` is the result."""
    psi = check_nonnegative("psi", psi)
    num_samples = check_positive_int("num_samples", num_samples)
    if not isinstance(domain, Domain) or not domain.bounded:
        raise ValueError("domain must be a bounded Domain (L2Ball or Box)")
    loss, X, y = _loss_rows(model, X, y)
    if domain.dim != loss.num_params(X.shape[1]):
        raise ValueError(f"domain.dim = {domain.dim} does not match the parameter dimension "
                         f"{loss.num_params(X.shape[1])}")
    with jax.enable_x64(True):
        U = np.asarray(domain.sample_uniform(secret_key(seed)[0], (num_samples,)), dtype=np.float64)
    inside = _losses(loss, X, y, U) <= float(L_star) + psi
    k = int(inside.sum())
    r = k / num_samples
    out = {"ratio": r, "se": math.sqrt(r * (1 - r) / num_samples), "num_inside": k,
           "num_samples": num_samples, **clopper_pearson(k, num_samples, confidence),
           "privacy": _NONPRIVATE if data_is_private else "computed on public data"}
    return out


def cover_count(num_points: int, dim: int) -> int:
    """Number of labelings of ``num_points`` points in general position in R^dim realised by
    homogeneous linear classifiers (Cover 1965): ``2 sum_{k < dim} C(num_points - 1, k)``."""
    N = check_positive_int("num_points", num_points)
    d = check_positive_int("dim", dim)
    return 2 * sum(math.comb(N - 1, k) for k in range(min(d, N)))


def pattern_rashomon_ratio(draws, X_eval, *, model=None) -> dict:
    """Distinct label patterns of the draws on the rows over the hypothesis space's count.

    ``num_patterns``: distinct labelings of the (distinct) rows among the draws, a lower bound on
    the set's pattern count. ``hypothesis_patterns``: Cover's count for the distinct design rows
    in R^dim, exact for rows in general position and an upper bound otherwise. The ratio is
    therefore an estimate from below. ``log10_ratio`` is returned as the ratio underflows."""
    if model is not None and model.task != "classification":
        raise ValueError(f"patterns need a classifier; the model class is {model.kind!r}")
    th = draws_2d(draws)
    S = scores(th, X_eval, model)
    Xd = model.design(X_eval, "X_eval", dim=th.shape[1]) if model is not None else np.asarray(X_eval)
    _, first = np.unique(Xd, axis=0, return_index=True)
    labels = S[np.sort(first)] > 0
    num = int(np.unique(labels.T, axis=0).shape[0])
    hyp = cover_count(len(first), th.shape[1])
    return {"num_patterns": num, "hypothesis_patterns": hyp, "ratio": num / hyp,
            "log10_ratio": math.log10(num) - math.log10(hyp), "num_rows": int(len(first)),
            "num_draws": int(th.shape[0]), "saturated": num == th.shape[0]}


def set_fidelity(draws, model, X, y, L_star: float, psi: float, *, data_is_private: bool = True) -> dict:
    """Share of draws with L(theta; X, y) <= L_star + psi.

    Default: the rows are assumed PRIVATE and the result is flagged as a further release NOT
    covered by the sampler's guarantee (each draw's membership can change between neighbours).
    Pass public rows (and their own L_star from :func:`rashomon_minimum`) with
    ``data_is_private=False`` for a free diagnostic.
    """
    psi = check_nonnegative("psi", psi)
    th = draws_2d(draws)
    loss, X, y = _loss_rows(model, X, y)
    Ls = _losses(loss, X, y, th)
    return {"fidelity": float(np.mean(Ls <= float(L_star) + psi)),
            "privacy": "NON-PRIVATE further release (private data): account for it or do not publish"
            if data_is_private else "evaluated on public/held-out data"}
