"""Model reliance, model class reliance (Fisher, Rudin and Dominici 2019) and the variable
importance cloud (Dong and Rudin 2020) of a set of linear models, on the prediction loss
WITHOUT the L2 penalty.

Model reliance of model f on a feature (or a group of columns) j, ratio form:

    MR_j(f) = e_switch(f) / e_orig(f),
    e_orig = (1/n) sum_i l(f; x_i, y_i),
    e_switch = 1/(n (n - 1)) sum_i sum_{k != i} l(f; (x_{k,j}, x_{i,-j}), y_i)

(the exact pairwise swap: every row's feature j replaced by every other row's). For a linear
score ``s_i = <theta, x_i>`` the swapped score is ``s_i + theta_j (x_{k,j} - x_{i,j})``, so the
double sum runs over the DISTINCT values of column j with their counts: exact in
``O(n * distinct values)`` per model. ``num_permutations=k`` instead averages k random
permutations (bias-corrected to the same U-statistic) and reports the Monte-Carlo error.

Model class reliance: ``MCR- = min`` and ``MCR+ = max`` of MR_j over the models of the set.
Computed from draws, they are ESTIMATES from models inside the set (and, for a thresholded
sampler, from a thin shell outside it): the set may hold more extreme models than any draw,
and shell draws may lie beyond it. The cloud is the matrix of MR over draws x features.
"""

from __future__ import annotations

import jax
import numpy as np

from .._validation import check_positive_int
from ..randomness import secret_key
from .multiplicity import draws_2d

#: Largest number of (row, distinct value, draw) loss evaluations held in memory at once.
CHUNK = 4_000_000


def _feature_groups(features, num_features: int) -> list[tuple[int, ...]]:
    if features is None:
        return [(j,) for j in range(num_features)]
    out = []
    for f in features:
        cols = tuple(int(c) for c in (f if isinstance(f, (list, tuple, np.ndarray)) else (f,)))
        if not cols or any(not 0 <= c < num_features for c in cols):
            raise ValueError(f"features must be column indices (or groups of them) in [0, {num_features - 1}], "
                             f"got {f!r}")
        out.append(cols)
    if not out:
        raise ValueError("features must not be empty (None: every column)")
    return out


def _setup(draws, X_eval, y_eval, model):
    if model is None:
        raise ValueError("model reliance needs the model class (dp_infer.rashomon.linear_model): its "
                         "prediction loss without the penalty")
    th = draws_2d(draws)
    X = model.check_rows(X_eval, "X_eval", dim=th.shape[1])
    if X.shape[0] < 2:
        raise ValueError("X_eval must have at least 2 rows for a swap")
    y = model.check_labels(y_eval, X.shape[0], "y_eval")
    S = model.design(X, "X_eval") @ th.T  # (rows, draws)
    return th, X, y, S


def _switch_loss_exact(model, S, y, X, cols, th):
    """e_switch per draw by the exact pairwise swap over the distinct rows of X[:, cols]."""
    n = X.shape[0]
    vals, counts = np.unique(X[:, cols], axis=0, return_counts=True)  # (V, |cols|)
    tj = th[:, cols]  # (draws, |cols|)
    base = X[:, cols] @ tj.T  # (rows, draws): contribution of the swapped columns
    total = np.zeros(th.shape[0])
    V = vals.shape[0]
    step = max(1, CHUNK // max(1, n * V))
    for a in range(0, th.shape[0], step):
        b = min(a + step, th.shape[0])
        sv = vals @ tj[a:b].T  # (V, chunk)
        Ssw = S[:, None, a:b] - base[:, None, a:b] + sv[None, :, :]  # (rows, V, chunk)
        lv = model.prediction_loss(Ssw.reshape(n, -1), y).reshape(n, V, b - a)
        total[a:b] = np.einsum("ivd,v->d", lv, counts.astype(np.float64))
    own = model.prediction_loss(S, y).sum(axis=0)  # the k = i terms
    return (total - own) / (n * (n - 1))


def _switch_loss_permutations(model, S, y, X, cols, th, k, key):
    """Mean over k random permutations, corrected to the U-statistic; with its MC error."""
    n = X.shape[0]
    base = X[:, cols] @ th[:, cols].T
    e_orig = model.prediction_loss(S, y).mean(axis=0)
    est = []
    for kk in jax.random.split(key, k):
        perm = np.asarray(jax.random.permutation(kk, n))
        Sp = S - base + X[perm][:, cols] @ th[:, cols].T
        e_perm = model.prediction_loss(Sp, y).mean(axis=0)
        # E over uniform permutations of row i's partner: (1/n) own + ((n-1)/n) e_switch
        est.append((n * e_perm - e_orig) / (n - 1))
    est = np.array(est)
    se = est.std(axis=0, ddof=1) / np.sqrt(k) if k > 1 else np.full(th.shape[0], np.nan)
    return est.mean(axis=0), se


def model_reliance(draws, X_eval, y_eval, model, *, features=None, kind: str = "ratio",
                   num_permutations: int | None = None, seed: int | None = None) -> dict:
    """MR of every draw for every feature (group), shape (draws, features): the importance cloud.

    :param features: column indices or groups of indices (a group is swapped jointly, e.g. the
        one-hot columns of one variable); default every column (the intercept is never swapped).
    :param kind: ``"ratio"`` (e_switch / e_orig) or ``"difference"`` (e_switch - e_orig).
    :param num_permutations: None (default) for the exact pairwise swap; k >= 2 for k random
        permutations, with ``se`` their Monte-Carlo standard error per entry.
    """
    if kind not in ("ratio", "difference"):
        raise ValueError(f"kind must be 'ratio' or 'difference', got {kind!r}")
    th, X, y, S = _setup(draws, X_eval, y_eval, model)
    groups = _feature_groups(features, X.shape[1])
    e_orig = model.prediction_loss(S, y).mean(axis=0)
    sw, ses = [], []
    if num_permutations is not None:
        k = check_positive_int("num_permutations", num_permutations)
        if k < 2:
            raise ValueError("num_permutations must be >= 2 (the Monte-Carlo error needs two), or None for exact")
        keys = jax.random.split(secret_key(seed)[0], len(groups))
    for g, cols in enumerate(groups):
        if num_permutations is None:
            sw.append(_switch_loss_exact(model, S, y, X, list(cols), th))
            ses.append(np.zeros(th.shape[0]))
        else:
            m, se = _switch_loss_permutations(model, S, y, X, list(cols), th, k, keys[g])
            sw.append(m)
            ses.append(se)
    sw, ses = np.stack(sw, axis=1), np.stack(ses, axis=1)
    if kind == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            mr = sw / e_orig[:, None]
            se = ses / e_orig[:, None]
    else:
        mr, se = sw - e_orig[:, None], ses
    return {"reliance": mr, "se": se, "e_orig": e_orig, "e_switch": sw, "features": groups, "kind": kind,
            "method": "exact pairwise swap" if num_permutations is None else
            f"{num_permutations} random permutations (Monte-Carlo error in 'se')"}


def model_class_reliance(draws, X_eval, y_eval, model, *, features=None, kind: str = "ratio",
                         num_permutations: int | None = None, seed: int | None = None,
                         quantiles=(0.025, 0.5, 0.975)) -> dict:
    """MCR- and MCR+ per feature over the draws, with quantiles and the cloud they come from.

    An estimate from the draws (see the module docstring), not a certified interval.
    """
    mr = model_reliance(draws, X_eval, y_eval, model, features=features, kind=kind,
                        num_permutations=num_permutations, seed=seed)
    R = mr["reliance"]
    q = np.quantile(R, quantiles, axis=0)
    return {"mcr_minus": R.min(axis=0), "mcr_plus": R.max(axis=0), "quantiles": tuple(quantiles),
            "q": q, "cloud": R, "se": mr["se"], "features": mr["features"], "kind": kind,
            "method": mr["method"]}


def variable_importance_cloud(draws, X_eval, y_eval, model, *, features=None, kind: str = "ratio") -> np.ndarray:
    """The variable importance cloud (Dong and Rudin 2020): one importance vector (MR per
    feature, exact swap) per draw, shape (draws, features)."""
    return model_reliance(draws, X_eval, y_eval, model, features=features, kind=kind)["reliance"]

