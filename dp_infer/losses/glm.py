"""Generalised linear losses with their declared constants: logistic, multinomial logistic,
squared, Huber and smoothed hinge (constants and their meaning: :mod:`dp_infer.losses.base`).

Each is ``phi(<theta, x>, y)`` (+ an optional L2 term) built by :func:`~dp_infer.losses.base.glm_loss`;
the constants come from the declared row norm, label range and domain, never from the data.
Each also carries its behaviour (:mod:`dp_infer.losses.behaviour`): the logistic, Huber and
smoothed hinge losses their clipped links in the preconditioner's metric (how each bounds the
derivative: :mod:`dp_infer.losses.metric_clip`), the regression and logistic losses their
prediction rules, the command line's losses their ``--loss`` names.
"""

from __future__ import annotations

import math
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import expit, log_ndtr

from .._validation import check_nonnegative, check_positive, check_positive_int
from ..domains import Domain, Euclidean
from .base import LossConstants, PerExampleLoss, constants_with_l2, domain_radius, glm_loss
from .behaviour import LossBehaviour, linear_predictive

__all__ = ["logistic", "multinomial_logistic", "squared", "huber", "smoothed_hinge", "LOGISTIC", "MULTINOMIAL_LOGISTIC",
           "SQUARED", "HUBER", "SMOOTHED_HINGE", "BEHAVIOURS"]


# ----------------------------------------------------------------------------------------------
# clipped links f(z, y, a, params): the link with |f'| <= a for every label (metric_clip's doc)
# ----------------------------------------------------------------------------------------------

def _clipped_logistic(z, y, a, params):
    """The logistic link with the label-free weight ``min(1, a / max(s, 1 - s))`` (metric_clip's doc)."""
    m = (2.0 * y - 1.0) * z
    a1 = jnp.minimum(a, 1.0)  # a >= 1: nothing changes (|s - y| <= 1)
    big = a1 > 0.5
    a_s = jnp.where(big, a1, 0.75)  # a safe value where the knot is 0 (unused there)
    m_k = jnp.where(big, jnp.log(a_s) - jnp.log1p(-a_s), 0.0)  # sigmoid(m_k) = a for a > 1/2
    e_k = jnp.exp(-m_k)
    above = m >= m_k  # ties to the outer pieces: with a <= 1/2 the middle piece is empty (m_k = 0)
    below = (m < -m_k) & ~above
    c_hi = jax.nn.softplus(-m_k) - a1 * e_k  # continuity at m = m_k
    c_lo = jax.nn.softplus(m_k) - a1 * m_k  # continuity at m = -m_k
    m_mid = jnp.where(above | below, 0.0, m)  # a safe value outside the middle piece (no clip gradient)
    hi = a1 * jnp.exp(-jnp.where(above, m, m_k)) + c_hi
    lo = -a1 * jnp.where(below, m, -m_k) + c_lo
    return jnp.where(above, hi, jnp.where(below, lo, jax.nn.softplus(-m_mid)))


def _clipped_huber(z, y, a, params):
    t = jnp.minimum(params["threshold"], a)
    r = z - y
    ar = jnp.abs(r)
    return jnp.where(ar <= t, 0.5 * r * r, t * (ar - 0.5 * t))


def _clipped_smoothed_hinge(z, y, a, params):
    g = params["smoothing"]
    m = (2.0 * y - 1.0) * z
    a1 = jnp.minimum(a, 1.0)
    knee = 1.0 - a1 * g  # where the derivative reaches -a1 (inside the quadratic piece)
    quad = (1.0 - m) ** 2 / (2.0 * g)
    base = jnp.where(m >= 1.0, 0.0, jnp.where(m <= 1.0 - g, 1.0 - m - 0.5 * g, quad))
    lin = (1.0 - knee) ** 2 / (2.0 * g) - a1 * (m - knee)
    return jnp.where((a < 1.0) & (m < knee), lin, base)


#: Gauss-Legendre nodes and weights for the smooth middle piece of the spread curvature's integral
_LEGENDRE_NODES, _LEGENDRE_WEIGHTS = np.polynomial.legendre.leggauss(200)


def _logistic_spread_curvature(v, a, params):
    """The clipped logistic link's curvature (:func:`_clipped_logistic` at level ``a``; ``inf``: no clip)
    averaged over a score ``z ~ N(0, v)`` and the two labels equally (margins ``z`` and ``-z``).

    In the margin the clipped link's curvature is the logistic's ``s (1 - s)`` for ``|m| <= m_k``, ``a e^-m``
    above and 0 below (``m_k = log(a / (1 - a))`` for ``a > 1/2``, else 0; ``inf`` unclipped), so the label
    average is ``s (1 - s)`` for ``|z| <= m_k`` and ``a e^-|z| / 2`` beyond. The middle piece is integrated
    by Gauss-Legendre (smooth; truncated at 12 sd or ``|z| = 40``, where ``s (1 - s) < e^-40``), the tails in
    closed form, ``a e^(v / 2) Phi(-(m_k + v) / sqrt(v))``. At ``v = 0``: 1/4 for ``a > 1/2``, else ``a``
    (the outer piece's value at the knot). A wide spread flattens it: about ``1/4 / sqrt(1 + pi v / 8)``
    unclipped, ``a e^(v / 2) Phi(-sqrt(v))`` for ``a <= 1/2``."""
    v = max(float(v), 0.0)
    a1 = min(float(a), 1.0)
    m_k = math.inf if a1 >= 1.0 else (math.log(a1 / (1.0 - a1)) if a1 > 0.5 else 0.0)
    if v == 0.0:
        return 0.25 if m_k > 0.0 else a1
    sd = math.sqrt(v)
    half = min(m_k, 40.0, 12.0 * sd)
    middle = 0.0
    if half > 0.0:
        z = half * _LEGENDRE_NODES
        s = expit(z)
        middle = half * float(np.sum(_LEGENDRE_WEIGHTS * s * (1.0 - s) * np.exp(-0.5 * (z / sd) ** 2)))
        middle /= sd * math.sqrt(2.0 * math.pi)
    tails = a1 * math.exp(0.5 * v + float(log_ndtr(-(m_k + v) / sd))) if math.isfinite(m_k) else 0.0
    return middle + tails


def _categorical_predictive(X, theta):
    """Softmax probabilities of ``theta = vec(W)`` (S, d K) averaged over draws; mean: the expected class."""
    d = X.shape[1]
    W = theta.reshape(theta.shape[0], d, -1)
    logits = np.einsum("nd,sdk->snk", X, W)
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p = (p / p.sum(axis=-1, keepdims=True)).mean(axis=0)
    return {"mean": p @ np.arange(p.shape[1]), "probs": p, "kind": "categorical"}


def _logistic_envelope(z):
    """``max(s, 1 - s) = sigmoid(|z|)``: the largest ``|s - y|`` over the labels 0 and 1."""
    return expit(np.abs(np.asarray(z, dtype=np.float64)))


def _identity(s):
    return s


#: the logistic's weighted link has curvature up to 1/2 where the logistic's own is 1/4: factor 2
LOGISTIC = LossBehaviour(name="logistic", clipped_link=_clipped_logistic, clipped_curvature_factor=2.0,
                         predictive=linear_predictive(expit, "binary", probs=True), point_prediction="probability",
                         cli_name="logistic", from_cli=lambda o: logistic(row_norm=o["row_norm"]),
                         label_free_curvature=True, spread_curvature=_logistic_spread_curvature,
                         link_derivative_envelope=_logistic_envelope)
MULTINOMIAL_LOGISTIC = LossBehaviour(name="multinomial_logistic", predictive=_categorical_predictive,
                                     one_coefficient_per_feature=False)
SQUARED = LossBehaviour(name="squared", predictive=linear_predictive(_identity, "continuous"),
                        point_prediction="value", cli_name="squared")
#: clip_params: the threshold (set per loss by :func:`huber`)
HUBER = LossBehaviour(name="huber", clipped_link=_clipped_huber, clipped_curvature_factor=1.0,
                      predictive=linear_predictive(_identity, "continuous"), point_prediction="value", cli_name="huber",
                      from_cli=lambda o: huber(threshold=o["huber_threshold"], row_norm=o["row_norm"]))
#: clip_params: the smoothing gamma (set per loss by :func:`smoothed_hinge` and
#: :func:`dp_infer.losses.nonsmooth.smoothed_hinge`, the same function of the margin)
SMOOTHED_HINGE = LossBehaviour(name="smoothed_hinge", clipped_link=_clipped_smoothed_hinge,
                               clipped_curvature_factor=1.0, point_prediction="label", cli_name="smoothed-hinge")
#: this module's behaviours (:mod:`dp_infer.losses.registry` collects them)
BEHAVIOURS = (LOGISTIC, MULTINOMIAL_LOGISTIC, SQUARED, HUBER, SMOOTHED_HINGE)


def _binary_labels(y: np.ndarray) -> None:
    bad = ~np.isin(y, (0.0, 1.0))
    if bad.any():
        raise ValueError("y must contain only 0/1 labels for the logistic loss; a label is not 0 or 1")


def logistic(row_norm: float = 1.0, l2: float = 0.0, domain: Domain | None = None) -> PerExampleLoss:
    """Binary logistic loss softplus(<theta,x>) - y <theta,x>, labels in {0, 1}, ||x|| <= row_norm.

    grad = (sigmoid(<theta,x>) - y) x, so L = R, G = 2R (attained as |<theta,x>| -> inf),
    M = R^2/4. With l2 > 0: m = l2 and L grows by l2 * sup||theta|| (finite on bounded domains).
    """
    R = check_positive("row_norm", row_norm)
    l2 = check_nonnegative("l2", l2)

    def link(z, y):
        return jax.nn.softplus(z) - y * z

    consts = constants_with_l2(R, 2 * R, R * R / 4, l2, domain, lambda r: r * R, link=1.0, convex=True)
    return glm_loss("logistic", link, consts, R, _binary_labels, l2, domain, behaviour=LOGISTIC)


def multinomial_logistic(num_classes: int, row_norm: float = 1.0, l2: float = 0.0,
                         domain: Domain | None = None) -> PerExampleLoss:
    """Softmax cross-entropy with theta = vec(W), W of shape (d, K), labels in {0..K-1}.

    grad_W = x (p - e_y)^T with ||p - e_y||_2 <= sqrt(2): L = sqrt(2) R, G = 2 sqrt(2) R,
    M = R^2 / 2 (largest eigenvalue of diag(p) - p p^T is <= 1/2).
    """
    K = check_positive_int("num_classes", num_classes)
    if K < 2:
        raise ValueError(f"num_classes must be >= 2, got {K}")
    R = check_positive("row_norm", row_norm)
    l2 = check_nonnegative("l2", l2)

    def fn(theta, x, y):
        W = theta.reshape(x.shape[-1], K)
        logits = x @ W
        return jax.nn.logsumexp(logits) - logits[y.astype(jnp.int32)]

    def labels(y):
        bad = ~np.isin(y, np.arange(K))
        if bad.any():
            raise ValueError(f"y must contain integer labels in [0, {K - 1}]; a label is not")

    consts = constants_with_l2(math.sqrt(2) * R, 2 * math.sqrt(2) * R, R * R / 2, l2, domain,
                      lambda r: 2 * r * R, convex=True)
    return PerExampleLoss("multinomial_logistic", fn, consts, R, labels, l2, domain,
                          num_params_fn=lambda d: d * K, behaviour=MULTINOMIAL_LOGISTIC)


def squared(label_bound: float, domain: Domain, row_norm: float = 1.0, l2: float = 0.0) -> PerExampleLoss:
    """Squared loss (<theta,x> - y)^2 / 2 with |y| <= label_bound on a bounded domain.

    |<theta,x> - y| <= r R + B with r = sup||theta||, so L = R (r R + B), G = 2 L, M = R^2.
    An unbounded domain has no finite Lipschitz constant: use huber() or clipped_loss() instead.
    """
    B = check_positive("label_bound", label_bound)
    R = check_positive("row_norm", row_norm)
    l2 = check_nonnegative("l2", l2)
    if domain is None or not isinstance(domain, Domain) or not domain.bounded:
        raise ValueError(
            "domain must be a bounded Domain (L2Ball or Box) for the squared loss: on an unbounded "
            "domain its gradient has no bound; use huber() or clipped_loss()"
        )
    r = domain_radius(domain)
    lip = R * (r * R + B)

    def link(z, y):
        return 0.5 * (z - y) ** 2

    def labels(y):
        over = int(np.sum(np.abs(y) > B))
        if over:
            raise ValueError(f"y: a label exceeds the declared label_bound={B} (|y| <= label_bound)")

    consts = constants_with_l2(lip, 2 * lip, R * R, l2, domain, lambda rr: 0.5 * (rr * R + B) ** 2,
                               link=r * R + B, convex=True)
    return glm_loss("squared", link, consts, R, labels, l2, domain, behaviour=SQUARED)


def huber(threshold: float = 1.0, row_norm: float = 1.0, l2: float = 0.0,
          domain: Domain | None = None) -> PerExampleLoss:
    """Huber loss of the residual <theta,x> - y with the given threshold; labels unbounded.

    |psi'| <= threshold, so L = threshold R, G = 2 threshold R, M = R^2.
    """
    t = check_positive("threshold", threshold)
    R = check_positive("row_norm", row_norm)
    l2 = check_nonnegative("l2", l2)

    def link(z, y):
        r = z - y
        a = jnp.abs(r)
        return jnp.where(a <= t, 0.5 * r * r, t * (a - 0.5 * t))

    consts = constants_with_l2(t * R, 2 * t * R, R * R, l2, domain, lambda r: None, link=t, convex=True)
    return glm_loss("huber", link, consts, R, None, l2, domain,
                    behaviour=replace(HUBER, clip_params=(("threshold", t),)))


def smoothed_hinge(smoothing: float = 1.0, row_norm: float = 1.0, l2: float = 0.0,
                   domain: Domain | None = None) -> PerExampleLoss:
    """Quadratically smoothed hinge loss of the margin z = (2y - 1) <theta,x>, labels in {0, 1}.

    phi(z) = 0 for z >= 1, (1 - z)^2 / (2 gamma) for 1 - gamma < z < 1, 1 - z - gamma/2 below
    (gamma = ``smoothing`` > 0; Shalev-Shwartz and Zhang's smoothed hinge). |phi'| <= 1 and
    phi'' <= 1/gamma, so L = R, G = 2R, M = R^2 / gamma.
    """
    g = check_positive("smoothing", smoothing)
    R = check_positive("row_norm", row_norm)
    l2 = check_nonnegative("l2", l2)

    def link(t, y):
        z = (2.0 * y - 1.0) * t
        return jnp.where(z >= 1.0, 0.0, jnp.where(z <= 1.0 - g, 1.0 - z - 0.5 * g, (1.0 - z) ** 2 / (2.0 * g)))

    consts = constants_with_l2(R, 2 * R, R * R / g, l2, domain, lambda r: r * R + 1.0, link=1.0, convex=True)
    return glm_loss("smoothed_hinge", link, consts, R, _binary_labels, l2, domain,
                    behaviour=replace(SMOOTHED_HINGE, clip_params=(("smoothing", g),)))


