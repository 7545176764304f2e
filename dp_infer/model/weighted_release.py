"""A NumPyro model's public-``J`` interval release in the metric that whitens its information, with label-free weights.

The model route's public-``J`` release (:mod:`dp_infer.model.score_release`, ``interval_curvature="public"``)
clips every per-example score to ``clip_norm`` in the prior-whitened coordinates ``phi = theta / s``. Two
things follow, both measured on the Adult model (d = 101, eps = 1, clip 8): the gradient's isotropic noise
has a different ratio to the sampling error in every direction (the data inform a numeric column thousands
of times more than a rare level), so the typical interval pays for the worst directions (median width 2.9x
the non-private sd, against 2.1x on the loss route, which releases in a metric fitted to the release); and
a clip that binds depends on the label, so the clipped estimating equation is biased (80-82 of 100
intervals contained the non-private MAP).

Where the model's single observation has a finite support (:meth:`dp_infer.model.bridge.ModelLoss.observation_support`:
Bernoulli, categorical; the per-example nll is then ``-log p(y | x, theta)`` and ``sum_y p = 1`` is checked
on the public rows before anything is charged, :func:`release_labels`), this module releases instead:

* **The metric.** ``phi = M psi`` with ``M M^T = (F + Lambda / n)^-1``: ``F`` the model's expected
  information at the draws' mean from the public rows, every label of the support weighted by its
  probability under the model (exact: no label draws), ``Lambda`` the prior stand-in's precision (keeps
  directions the public rows do not span finite). The gradient's noise is then the same multiple of the
  sampling error in every direction the data inform.
* **The weights.** Row ``i`` weighs ``w_i = min(1, rho / B_i)``, ``B_i = max_y ||M^T g_i(y)||`` over the
  support's labels at the stage's point: a function of the row's features and public quantities, never of
  its label. So every weighted score has norm ``<= rho`` whatever the label (the clip at ``rho``, kept as a
  backstop against rounding, never binds: replace-one L2 sensitivity ``2 rho / n``), and the weighted
  estimating equation ``mean_i w_i g_i(theta) = 0`` holds at the true parameter of a correctly specified
  model whatever the weights (a Fisher-consistent weighted likelihood; the loss route's public release,
  ``min(1, rho / (max(s, 1 - s) ||C^T x||))`` for the logistic loss, is the GLM form of the same weights).
  ``rho`` is the factor of :data:`~dp_infer.routes.newton_release.RHO_GRID` (times the public rows' root mean
  ``E ||M^T g||^2``) whose interval width, predicted from the public rows, is smallest
  (:func:`predicted_width_ratio`).
* **The path.** At each stage of :data:`~dp_infer.routes.newton_release.PUBLIC_SCHEDULE` the weighted
  mean score (noise sd ``2 rho / (n mu_k)``) and, from the public rows by enumeration, the weighted
  curvature ``H_w = mean_i w_i E_y[g g^T]`` (the information identity with a label-free weight) and the
  weighted scores' second moment ``J_w = mean_i w_i^2 E_y[g g^T]``; each stage but the last moves to the
  minimiser of the public surrogate anchored at its gradient (:func:`surrogate_centre`, each coordinate within
  :data:`~dp_infer.routes.newton_release.PUBLIC_STEP_BOX` draws' sds), as the loss route's path does. A
  noise-aware linear step held within 3 draws' sds (the first version) left the last point short of the
  estimate on Adult, where the curvature taken there, nearer the prior mean, understated the variance: the
  intervals contained their own estimand 64 times in 100 at seed 2 (90 with the surrogate path).
* **The centre.** After the last gradient, the minimiser of the weighted nll's public surrogate anchored at it
  (:func:`surrogate_centre`, post-processing), each coordinate within
  :data:`~dp_infer.routes.newton_release.PUBLIC_STEP_BOX` draws' sds: the intervals' data centre in place of a
  linear step. The intervals read the release as the loss route's
  (:func:`dp_infer.diagnostics.released_interval.released_interval`: the sandwich
  ``H_w^-1 (J_w / n + sd_g^2 I) H_w^-1`` around that centre, with the prior).

The estimand: the zero of the population's mean weighted score (the weights at the release's last point),
which is the true parameter of a correctly specified model; under misspecification a weighted
pseudo-true value, and the intervals are model-based (``H_w`` and ``J_w`` are the model's expectations on
the public rows, not the private rows' sandwich). Assumptions: replace-one neighbours with n public; the
points, the metric, ``rho`` and the weights are public (the released draws, the public rows, this
release's earlier stages); the public rows' features follow the private rows' distribution.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_positive
from ..randomness import gaussian_noise
from ..releases.newton import box_newton
from ..routes.public_rows import whitening_metric
from ..routes.newton_release import PUBLIC_STEP_BOX, RHO_GRID
from .score_release import (RELEASE_KIND, check_release_point, score_function, score_release_event,
                            symmetric_score_function)

__all__ = ["enumerated_nll", "label_probabilities", "enumerated_scores", "release_labels", "information", "row_bounds",
           "predicted_sds", "predicted_width_ratio", "choose_radius", "release_metric",
           "forecast_intervals", "release_weighted_scores", "surrogate_centre", "SUPPORT_TOLERANCE",
           "WEIGHTED_ESTIMAND", "WEIGHTED_ASSUMPTIONS"]

#: the public rows' label probabilities must sum to 1 within this (else the nll is not ``-log p(y | x)``)
SUPPORT_TOLERANCE = 1e-4

WEIGHTED_ESTIMAND = ("the zero of the population's mean weighted score (label-free weights min(1, rho / max_y "
                     "||M^T g(y)||) at the release's last point) in the model's unconstrained coordinates: the true "
                     "parameter of a correctly specified model")

#: what intervals from a weighted release assume besides the model route's public-J ones
WEIGHTED_ASSUMPTIONS = (
    "the model is correctly specified: H_w and J_w are the model's expected weighted information on the public rows "
    "(every label of the observation's support weighted by its probability), so the interval is model-based, not "
    "the private rows' sandwich",
    "the public feature rows (X_public, with their per-row model arguments) follow the private rows' distribution",
)


def _nll_function(example_fn):
    return jax.jit(jax.vmap(example_fn, in_axes=(None, 0, 0)))


def enumerated_nll(example_fn, X, phi, labels, *, scores=None, nll=None, block_rows: int = 8192):
    """``(G, L)``: per-example scores of ``example_fn(phi, x, y)`` at ``phi`` for every label of ``labels``,
    ``G[k, i] = grad_phi nll(phi; x_i, labels[k])`` (shape ``(K, m, d)``, float64; a non-finite row is 0),
    and the nll itself, ``L[i, k] = nll(phi; x_i, labels[k])`` (shape ``(m, K)``, float64, as computed: +inf
    where a label has probability 0). ``scores`` / ``nll``: the compiled per-example gradient and nll when the
    caller keeps them."""
    scores = score_function(example_fn) if scores is None else scores
    nll = _nll_function(example_fn) if nll is None else nll
    X = jnp.asarray(X, dtype=jnp.result_type(float))
    p = jnp.asarray(phi, dtype=jnp.result_type(float))
    m = int(X.shape[0])
    G = np.zeros((len(labels), m, p.shape[0]))
    L = np.zeros((m, len(labels)))
    for k, lab in enumerate(labels):
        for lo in range(0, m, block_rows):
            xb = X[lo:lo + block_rows]
            yb = jnp.full((xb.shape[0],), lab, dtype=jnp.result_type(float))
            g = np.asarray(scores(p, xb, yb), dtype=np.float64)
            G[k, lo:lo + xb.shape[0]] = np.where(np.all(np.isfinite(g), axis=1, keepdims=True), g, 0.0)
            L[lo:lo + xb.shape[0], k] = np.asarray(nll(p, xb, yb), dtype=np.float64)
    return G, L


def label_probabilities(L) -> np.ndarray:
    """``P = exp(-L)`` from :func:`enumerated_nll`'s ``L``, with a non-finite value read as probability 0."""
    with np.errstate(over="ignore", invalid="ignore"):
        P = np.exp(-np.asarray(L, dtype=np.float64))
    return np.where(np.isfinite(P), P, 0.0)


def enumerated_scores(example_fn, X, phi, labels, *, scores=None, nll=None, block_rows: int = 8192):
    """``(G, P)``: :func:`enumerated_nll`'s scores and the labels' probabilities ``P[i, k] = exp(-nll(phi; x_i,
    labels[k]))`` (shape ``(m, K)``; a non-finite value is 0)."""
    G, L = enumerated_nll(example_fn, X, phi, labels, scores=scores, nll=nll, block_rows=block_rows)
    return G, label_probabilities(L)


def release_labels(ml, example_fn, public_rows, point) -> tuple[float, ...] | None:
    """The observation's finite support where the weighted release applies (module doc), else None: the
    model declares a finite support (:meth:`~dp_infer.model.bridge.ModelLoss.observation_support`) and on the
    public rows ``sum_y exp(-nll(point; x, y))`` is 1 within :data:`SUPPORT_TOLERANCE` (the per-example nll
    is the observation's ``-log p``: no scaled likelihood or extra factor). Public inputs only: decided
    before anything is charged."""
    labels = ml.observation_support()
    if labels is None or public_rows is None:
        return None
    _, P = enumerated_scores(example_fn, public_rows, point, labels)
    return labels if np.all(np.abs(P.sum(axis=1) - 1.0) <= SUPPORT_TOLERANCE) else None


def information(G, P, A=None, weights=None) -> np.ndarray:
    """``mean_i weights_i sum_k P[i, k] (A^T g_ik)(A^T g_ik)^T``: the expected (weighted) scores' second moment
    in the coordinates ``A`` maps from (``A`` None: the scores' own)."""
    K, m, d = G.shape
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
    out = np.zeros((d, d) if A is None else (A.shape[1], A.shape[1]))
    for k in range(K):
        Gk = G[k] if A is None else G[k] @ A
        out += (Gk * (w * P[:, k])[:, None]).T @ Gk
    out /= m
    return 0.5 * (out + out.T)


def row_bounds(G, A) -> np.ndarray:
    """``B_i = max_k ||A^T g_ik||``: each row's largest score norm over the support's labels (label-free)."""
    return np.max(np.stack([np.linalg.norm(G[k] @ A, axis=1) for k in range(G.shape[0])]), axis=0)


def predicted_sds(G, P, M, prior_precision, n: int, mu_last: float):
    """``rho -> (sd, ref)``: per coordinate (phi units), the intervals' sd predicted from the public rows'
    enumerated scores ``G``, ``P`` (phi) in the metric ``M`` with weights of radius ``rho``, and the
    non-private posterior's: the data's precision ``H_w (J_w / n + sd_g^2 I)^-1 H_w`` (``sd_g = 2 rho /
    (n mu_last)``) with the prior's, against ``n F + Lambda`` unweighted. Public: free."""
    d = M.shape[0]
    lam = np.broadcast_to(np.asarray(prior_precision, dtype=np.float64), (d,))
    lp = M.T @ (lam[:, None] * M)
    Gpsi = np.stack([G[k] @ M for k in range(G.shape[0])])
    ref = np.sqrt(np.diag(M @ np.linalg.inv(n * information(Gpsi, P) + lp) @ M.T))
    B = row_bounds(Gpsi, np.eye(d))

    def sds(rho: float) -> tuple[np.ndarray, np.ndarray]:
        w = np.minimum(1.0, rho / np.maximum(B, 1e-300))
        Hw, Jw = information(Gpsi, P, weights=w), information(Gpsi, P, weights=w * w)
        sd_g = 2.0 * rho / (n * mu_last)
        Q = Hw @ np.linalg.solve(Jw / n + sd_g * sd_g * np.eye(d), Hw) + lp
        return np.sqrt(np.diag(M @ np.linalg.inv(0.5 * (Q + Q.T)) @ M.T)), ref

    return sds


def predicted_width_ratio(G, P, M, prior_precision, n: int, mu_last: float):
    """``rho -> `` the median over coordinates of the intervals' sd over the non-private posterior's
    (:func:`predicted_sds`). Public: free."""
    predict = predicted_sds(G, P, M, prior_precision, n, mu_last)

    def ratio(rho: float) -> float:
        sd, ref = predict(rho)
        return float(np.median(sd / ref))

    return ratio


def choose_radius(G, P, M, prior_precision, n: int, mu_last: float) -> tuple[float, float]:
    """``(rho, predicted width ratio)``: the factor of ``RHO_GRID`` times the public rows' root mean
    ``E ||M^T g||^2`` whose :func:`predicted_width_ratio` is smallest."""
    rho0 = math.sqrt(max(float(np.trace(M.T @ information(G, P) @ M)), 1e-300))
    predict = predicted_width_ratio(G, P, M, prior_precision, n, mu_last)
    widths = [predict(f * rho0) for f in RHO_GRID]
    best = int(np.argmin(widths))
    return float(RHO_GRID[best]) * rho0, float(widths[best])


def release_metric(example_fn, X_public, phi, labels, prior_precision, n: int, mu_last: float, *, scores=None,
                   nll=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """``(G, P, M, rho, predicted width ratio)`` at ``phi`` (public): the public rows' enumerated scores and
    label probabilities, the metric that whitens their information with the prior's precision over ``n``, and
    the weights' radius :func:`choose_radius` picks for the last gradient's GDP ``mu_last``."""
    G, P = enumerated_scores(example_fn, X_public, phi, labels, scores=scores, nll=nll)
    M = whitening_metric(information(G, P), prior_precision, n, purpose="the weighted release")
    rho, predicted = choose_radius(G, P, M, prior_precision, n, mu_last)
    return G, P, M, rho, predicted


def forecast_intervals(example_fn, X_public, labels, point, scales, prior_sd, n: int, mu_last: float) -> dict:
    """The weighted release's intervals forecast before anything is charged: :func:`release_metric` and
    :func:`predicted_sds` at a public ``point`` (phi; the fit takes the prior stand-in's centre, since the draws'
    mean, where the release is made, is not known yet). Returns ``width_ratio`` (the median coordinate's
    interval sd over the non-private posterior's, as :func:`choose_radius` predicts it), ``typical_sd`` (the
    median coordinate's interval sd, unconstrained theta units), ``rho`` and ``point`` (theta). Assumes the
    release's point is near ``point`` and the model correctly specified: where the data move the estimate far
    from the prior's centre (a logistic model's information falls there), the forecast is of a narrower
    non-private posterior than the run's. The scores are :func:`symmetric_score_function`'s (exact at a point
    where a row's linear predictor is 0)."""
    s = np.asarray(scales, dtype=np.float64)
    lam = (s / np.asarray(prior_sd, dtype=np.float64)) ** 2
    G, P, M, rho, width = release_metric(example_fn, X_public, point, labels, lam, n, mu_last,
                                         scores=symmetric_score_function(example_fn, s.shape[0]))
    sd, _ = predicted_sds(G, P, M, lam, n, mu_last)(rho)
    return {"width_ratio": width, "typical_sd": float(np.median(s * sd)), "rho": rho,
            "point": [float(v) for v in s * np.asarray(point, dtype=np.float64)]}


def surrogate_centre(nll, scores, X_public, labels, point, gradient_phi, weights, draws_sd, half_width: float):
    """The intervals' data centre: the minimiser of the weighted mean nll's public surrogate anchored at the
    released gradient, each coordinate within ``half_width`` draws' sds (``draws_sd``, phi) of ``point``.

    With every public row's labels weighted by their probabilities at ``point`` (``P0``, fixed) and the release's
    weights there (``weights``, fixed), ``T(phi) = mean_j w_j sum_k P0_jk nll(phi; x_j, y_k)`` stands in for the
    private rows' weighted mean nll; ``F(phi) = T(phi) - phi . (grad T(point) - gradient_phi)`` has the released
    gradient at ``point`` and the public rows' curvature, and its minimiser is where the private weighted score
    would vanish if the public rows were the private ones. For a canonical GLM (logistic, Poisson) the gradient's
    change between two points reads no label, so this is the loss route's public surrogate
    (:func:`dp_infer.releases.newton.public_surrogate_step`); for another likelihood the labels at ``point``
    stand in for the private ones (close where ``point`` is near the estimate, the release's last point). A linear
    step from ``point`` trusts the quadratic model over the whole step, and its error is quadratic in the offset
    the earlier stages' noise leaves (on the loss route: data intervals covering their estimand 0.75 with the
    linear step, 0.95 with this centre). Solved by :func:`~dp_infer.releases.newton.box_newton` with the weighted
    expected information at each point as the Hessian (exact for a canonical GLM; the minimiser does not depend
    on it). Public rows, the released gradient and public constants: free."""
    p = np.asarray(point, dtype=np.float64)
    D = np.asarray(draws_sd, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    Xj = jnp.asarray(X_public, dtype=jnp.result_type(float))
    m = int(Xj.shape[0])
    G0, L0 = enumerated_nll(None, Xj, p, labels, scores=scores, nll=nll)
    coef = w[:, None] * label_probabilities(L0) / m  # (m, K): each row-label pair's weight in T
    last = {"v": None, "G": G0, "L": L0}  # box_newton asks for the Hessian where it last evaluated the objective

    def evaluate(v):
        if last["v"] is None or not np.array_equal(last["v"], v):
            last["G"], last["L"] = enumerated_nll(None, Xj, p + D * v, labels, scores=scores, nll=nll)
            last["v"] = np.array(v, copy=True)
        return last["G"], last["L"]

    def total(G, L):
        with np.errstate(invalid="ignore"):  # a probability-0 label carries weight 0 in coef
            val = float(np.sum(np.where(coef > 0, coef * L, 0.0)))
        return val, np.einsum("mk,kmd->d", coef, G)

    _, grad0 = total(G0, L0)
    shift = D * (grad0 - np.asarray(gradient_phi, dtype=np.float64))

    def objective(v):
        val, grd = total(*evaluate(v))
        return val - float(v @ shift), D * grd - shift

    def hessian(v):
        G, L = evaluate(v)
        return D[:, None] * information(G, label_probabilities(L), weights=w) * D[None, :]

    return p + D * box_newton(objective, hessian, p.size, half_width)


def release_weighted_scores(example_fn, X, y, *, point, scales, clip_norm: float, mu: float, key, trust_covariance,
                            prior_mean, prior_sd, public, labels, names=None) -> dict:
    """Release the module doc's statistics at GDP ``mu``; returns the release as a dict (public), read by
    :func:`dp_infer.diagnostics.model_prior.model_released_interval` like the clipped one.

    ``example_fn(phi, x, y)``: the per-example nll in the prior-whitened coordinates (``-log p``);
    ``X``, ``y``: the run's checked rows; ``point``: the draws' mean in phi; ``scales``: ``s`` (theta = s phi);
    ``trust_covariance``: the draws' covariance in phi; ``prior_mean`` / ``prior_sd``: the prior's Gaussian
    stand-in in theta; ``public``: the :class:`~dp_infer.model.public_information.PublicSecondMoment` (its
    packed rows); ``labels``: the observation's support (:func:`release_labels`); ``clip_norm``: the run's
    (recorded; the release's own bound is ``rho``); ``key``: a JAX key (secret unless seeded)."""
    n = int(np.asarray(X).shape[0])
    phi, s, S = check_release_point(point, scales, trust_covariance)
    d = phi.shape[0]
    C = check_positive("clip_norm", clip_norm)
    parts = score_release_event(mu, n=n, clip_norm=C, curvature="public", weighted=True).metadata["parts"]
    keys = jax.random.split(key, len(parts))
    lam = (s / np.asarray(prior_sd, dtype=np.float64)) ** 2
    scores, nll = score_function(example_fn), _nll_function(example_fn)
    Xp = public.rows_packed
    Gp, Pp, M, rho, predicted = release_metric(example_fn, Xp, phi, labels, lam, n, parts[-1]["mu"], scores=scores,
                                               nll=nll)
    Xj, yj = jnp.asarray(X), jnp.asarray(y)
    draws_sd = np.sqrt(np.maximum(np.diag(S), 1e-300))
    path, out = [phi], {}
    for k, (part, kk) in enumerate(zip(parts, keys)):
        if k > 0:
            Gp, Pp = enumerated_scores(example_fn, Xp, phi, labels, scores=scores, nll=nll)
        wp = np.minimum(1.0, rho / np.maximum(row_bounds(Gp, M), 1e-300))
        H, J = information(Gp, Pp, M, wp), information(Gp, Pp, M, wp * wp)
        # private: each row's weight from its features alone (every label's score), then its own score; only the
        # noisy mean leaves
        Gx, _ = enumerated_scores(example_fn, Xj, phi, labels, scores=scores, nll=nll)
        w = np.minimum(1.0, rho / np.maximum(row_bounds(Gx, M), 1e-300))
        del Gx
        own = np.asarray(scores(jnp.asarray(phi, dtype=jnp.result_type(float)), Xj, yj), dtype=np.float64)
        own = np.where(np.all(np.isfinite(own), axis=1, keepdims=True), own, 0.0) @ M * w[:, None]
        norm = np.linalg.norm(own, axis=1, keepdims=True)  # <= rho for a label in the support: a backstop only
        own = own * np.minimum(1.0, rho * (1.0 - 1e-12) / np.maximum(norm, 1e-300))
        sd = 2.0 * rho / (n * part["mu"])
        with jax.enable_x64(True):  # privacy noise: 53-bit quantiles, tail to 11.4 sds (dp_infer.randomness)
            z = np.asarray(gaussian_noise(kk, (d,), jnp.float64), dtype=np.float64)
        g = own.mean(axis=0) + z * sd
        # (how many rows the backstop clipped is a statistic of the rows: not kept, not released)
        out.update(gradient=g, gradient_sd=sd, curvature=H, score=J)
        if k < len(parts) - 1:  # the stage's end: the public surrogate's minimiser anchored at its gradient
            phi = surrogate_centre(nll, scores, Xp, labels, phi, np.linalg.solve(M.T, g), wp, draws_sd,
                                   PUBLIC_STEP_BOX)
            path.append(phi)

    # the intervals' data centre: the public surrogate's minimiser anchored at the last gradient (post-processing)
    centre = surrogate_centre(nll, scores, Xp, labels, phi, np.linalg.solve(M.T, out["gradient"]), wp, draws_sd,
                              PUBLIC_STEP_BOX)

    def tup(a):
        return [float(v) for v in a] if np.ndim(a) == 1 else [[float(v) for v in r] for r in a]

    return {"kind": RELEASE_KIND, "centre": tup(s * centre), "path": [tup(s * p) for p in path],
            "chol": tup(s[:, None] * M),
            "gradient": tup(out["gradient"]), "gradient_sd": float(out["gradient_sd"]),
            "curvature": tup(out["curvature"]), "curvature_sd": 0.0, "score": tup(out["score"]), "score_sd": 0.0,
            "clip_norm": C, "rho": rho, "mu": float(mu), "n": n, "loss": "model_nll",
            "prior_mean": tup(np.asarray(prior_mean, dtype=np.float64)),
            "prior_sd": tup(np.asarray(prior_sd, dtype=np.float64)), "names": None if names is None else list(names),
            "curvature_source": "public", "public_rows": int(public.rows), "public_rows_sha256": public.sha256,
            "label_draws": None, "labels": list(labels), "release_metric": "weighted",
            "predicted_width_ratio": predicted,
            "previous_gradient_sd": 2.0 * rho / (n * parts[-2]["mu"])}  # PUBLIC_SCHEDULE: 4 stages
