"""Generalised linear losses with their declared constants: logistic, multinomial logistic,
squared, Huber and smoothed hinge (constants and their meaning: :mod:`dp_infer.losses.base`).

Each is ``phi(<theta, x>, y)`` (+ an optional L2 term) built by :func:`~dp_infer.losses.base.glm_loss`;
the constants come from the declared row norm, label range and domain, never from the data.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_nonnegative, check_positive, check_positive_int
from ..domains import Domain, Euclidean
from .base import LossConstants, PerExampleLoss, constants_with_l2, domain_radius, glm_loss

__all__ = ["logistic", "multinomial_logistic", "squared", "huber", "smoothed_hinge"]


def _binary_labels(y: np.ndarray) -> None:
    bad = ~np.isin(y, (0.0, 1.0))
    if bad.any():
        raise ValueError(f"y must contain only 0/1 labels for the logistic loss; {int(bad.sum())} row(s) do not")


def logistic(row_norm: float = 1.0, l2: float = 0.0, domain: Domain | None = None) -> PerExampleLoss:
    """Binary logistic loss softplus(<theta,x>) - y <theta,x>, labels in {0, 1}, ||x|| <= row_norm.

    grad = (sigmoid(<theta,x>) - y) x, so L = R, G = 2R (attained as |<theta,x>| -> inf),
    M = R^2/4. With l2 > 0: m = l2 and L grows by l2 * sup||theta|| (finite on bounded domains).
    """
    R = check_positive("row_norm", row_norm)
    l2 = check_nonnegative("l2", l2)

    def link(z, y):
        return jax.nn.softplus(z) - y * z

    consts = constants_with_l2(R, 2 * R, R * R / 4, l2, domain, lambda r: r * R, link=1.0)
    return glm_loss("logistic", link, consts, R, _binary_labels, l2, domain)


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
            raise ValueError(f"y must contain integer labels in [0, {K - 1}]; {int(bad.sum())} row(s) do not")

    consts = constants_with_l2(math.sqrt(2) * R, 2 * math.sqrt(2) * R, R * R / 2, l2, domain,
                      lambda r: 2 * r * R)
    return PerExampleLoss("multinomial_logistic", fn, consts, R, labels, l2, domain,
                          num_params_fn=lambda d: d * K)


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
            raise ValueError(f"{over} label(s) exceed the declared label_bound={B}")

    consts = constants_with_l2(lip, 2 * lip, R * R, l2, domain, lambda rr: 0.5 * (rr * R + B) ** 2, link=r * R + B)
    return glm_loss("squared", link, consts, R, labels, l2, domain)


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

    consts = constants_with_l2(t * R, 2 * t * R, R * R, l2, domain, lambda r: None, link=t)
    return glm_loss("huber", link, consts, R, None, l2, domain)


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

    consts = constants_with_l2(R, 2 * R, R * R / g, l2, domain, lambda r: r * R + 1.0, link=1.0)
    return glm_loss("smoothed_hinge", link, consts, R, _binary_labels, l2, domain)


