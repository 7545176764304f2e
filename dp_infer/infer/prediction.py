"""Predictions from released draws (post-processing: no privacy cost).

Two sources of a predictive distribution:

* a loss whose behaviour has a prediction rule (built in: ``logistic``, ``multinomial_logistic``,
  ``squared``, ``huber``, ``poisson``): the linear score ``X @ theta`` through the loss's link,
  averaged over the released draws (:mod:`dp_infer.losses.behaviour`);
* a NumPyro model: the conditional mean of its observed site (``fn.mean``, and ``fn.probs`` for a
  Bernoulli or categorical likelihood) with every released draw substituted for the latent sites,
  averaged over draws -- the mean of NumPyro's ``Predictive`` without the sampling noise.

A loss run with an interval release can also predict at the release's centre (``source="intervals"``), one
"draw" through the same rule.

Feature columns are matched by name when the run knows the training names and ``X`` is a
pandas DataFrame (extra columns are ignored, a missing one is an error); an array must have the
training number of columns in the training order.
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers

from ..losses.registry import BUILTIN_BEHAVIOURS, loss_behaviour

__all__ = ["align_features", "loss_predictive", "model_predictive", "log_loss", "expected_calibration_error",
           "LINEAR_LOSSES", "PREDICTION_SOURCES"]

#: what a run's predictions are made from: its released draws (averaged), or its interval release's centre (a
#: plug-in; :meth:`dp_infer.infer.run.PrivateRun.predict`)
PREDICTION_SOURCES = ("draws", "intervals")

#: built-in losses with a prediction rule (a link of the linear score ``X @ theta``): their behaviours'
LINEAR_LOSSES = tuple(b.name for b in BUILTIN_BEHAVIOURS if b.predictive is not None)


def align_features(X, feature_names: Sequence[str] | None, num_features: int | None) -> np.ndarray:
    """``X`` as a float array whose columns are the training features, in the training order."""
    if hasattr(X, "columns"):
        cols = [str(c) for c in X.columns]
        if feature_names:
            missing = [c for c in feature_names if c not in cols]
            if missing:
                raise ValueError(f"X lacks the feature column(s) {missing} the run was fitted on "
                                 f"(columns are matched by name; got {cols})")
            X = X[list(feature_names)]
        X = X.to_numpy(dtype=float)
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[None, :]
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D table of rows, got shape {X.shape}")
    if num_features is not None and X.shape[1] != num_features:
        raise ValueError(f"X must have {num_features} feature columns (the training features), got {X.shape[1]}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X must be finite (no NaN or inf)")
    return X


def _thin(n: int, max_draws: int | None) -> np.ndarray:
    if max_draws is None or n <= max_draws:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, max_draws).round().astype(int))


def loss_predictive(loss, theta: np.ndarray, X: np.ndarray, *, max_draws: int | None = 1000) -> dict:
    """Mean prediction (and class probabilities) over draws ``theta`` (S, d) by the loss's prediction
    rule (``behaviour.predictive``, :mod:`dp_infer.losses.behaviour`). ``loss``: a
    :class:`~dp_infer.losses.base.PerExampleLoss` (its own behaviour), a behaviour, or a stored loss
    name (a built-in loss's, :func:`dp_infer.losses.registry.loss_behaviour`)."""
    behaviour = loss_behaviour(loss)
    if behaviour is None or behaviour.predictive is None:
        name = loss if isinstance(loss, str) else getattr(loss, "name", type(loss).__name__)
        raise ValueError(f"no prediction rule for the loss {name!r}: predictions need a loss whose behaviour has "
                         f"one (built in: {LINEAR_LOSSES}) or the NumPyro model (PrivateRun.load(path, model=...))")
    theta = np.asarray(theta, dtype=np.float64)
    theta = theta[_thin(theta.shape[0], max_draws)]
    return behaviour.predictive(X, theta)


def log_loss(p, y, eps: float = 1e-12) -> float:
    """Mean negative log-likelihood of 0/1 labels ``y`` under probabilities ``p`` (clipped to
    ``[eps, 1 - eps]``)."""
    p = np.clip(np.asarray(p, dtype=np.float64), eps, 1 - eps)
    y = np.asarray(y, dtype=np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def expected_calibration_error(p, y, bins: int = 10) -> float:
    """ECE: ``sum_b (n_b / n) |mean(y)_b - mean(p)_b|`` over ``bins`` equal-width bins of ``p``."""
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    which = np.minimum((p * bins).astype(int), bins - 1)
    ece = 0.0
    for b in range(bins):
        m = which == b
        if m.any():
            ece += m.mean() * abs(y[m].mean() - p[m].mean())
    return float(ece)


def _observed_site(model, x_name: str, y_name: str, X, site: str | None, params: dict) -> str:
    tr = handlers.trace(handlers.substitute(handlers.seed(model, jax.random.key(1)), data=params)).get_trace(
        **{x_name: jnp.asarray(X[:1]), y_name: None})
    names = [k for k, s in tr.items() if s["type"] == "sample" and k not in params]
    if site is not None:
        if site not in names:
            raise ValueError(f"site {site!r} is not an observed site of the model; choose one of {names}")
        return site
    if len(names) != 1:
        raise ValueError(f"the model has observed sites {names}: choose one with site=...")
    return names[0]


def model_predictive(model: Callable, samples: dict, X: np.ndarray, *, x_name: str = "X", y_name: str = "y",
                     site: str | None = None, max_draws: int | None = 1000) -> dict:
    """Conditional mean of the model's observed site given each draw, averaged over draws.

    ``samples``: constrained latent draws ``name -> (S, ...)`` (e.g. ``run.get_samples()``).
    Returns ``{"mean": (n,), "probs": (n,) or (n, K) for Bernoulli / categorical sites, "kind"}``.
    """
    if not callable(model):
        raise ValueError("predictions from a model run need the NumPyro model: PrivateRun.load(path, model=...)")
    S = next(iter(samples.values())).shape[0]
    idx = _thin(S, max_draws)
    samples = {k: jnp.asarray(np.asarray(v)[idx]) for k, v in samples.items()}
    first = {k: v[0] for k, v in samples.items()}
    name = _observed_site(model, x_name, y_name, X, site, first)
    fn_name = _distribution_name(model, x_name, y_name, X, name, first)
    want_probs = fn_name.startswith(("Bernoulli", "Categorical"))
    Xj = jnp.asarray(X)

    def one(params):
        seeded = handlers.seed(model, jax.random.key(1))
        tr = handlers.trace(handlers.substitute(seeded, data=params)).get_trace(**{x_name: Xj, y_name: None})
        fn = tr[name]["fn"]
        return fn.probs if want_probs else fn.mean

    values = np.asarray(jax.vmap(one)(samples).mean(axis=0))
    out = {"site": name, "distribution": fn_name}
    if fn_name.startswith("Bernoulli"):
        out.update(mean=values, probs=values, kind="binary")
    elif fn_name.startswith("Categorical"):
        out.update(mean=values @ np.arange(values.shape[-1]), probs=values, kind="categorical")
    else:
        out.update(mean=values, kind="count" if fn_name in ("Poisson", "NegativeBinomial2", "Binomial")
                   else "continuous")
    return out


def _distribution_name(model, x_name, y_name, X, site, params) -> str:
    tr = handlers.trace(handlers.substitute(handlers.seed(model, jax.random.key(1)), data=params)).get_trace(
        **{x_name: jnp.asarray(X[:1]), y_name: None})
    fn = tr[site]["fn"]
    while hasattr(fn, "base_dist") and type(fn).__name__ in ("ExpandedDistribution", "Independent", "MaskedDistribution"):
        fn = fn.base_dist
    return type(fn).__name__


def labels_from(pred: dict) -> np.ndarray:
    """Point predictions: class labels for binary / categorical, the mean otherwise."""
    if pred["kind"] == "binary":
        return (np.asarray(pred["probs"]) > 0.5).astype(int)
    if pred["kind"] == "categorical":
        return np.argmax(np.asarray(pred["probs"]), axis=-1)
    return np.asarray(pred["mean"])
