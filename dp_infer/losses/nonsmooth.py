"""Non-smooth Lipschitz per-example losses (no smoothness declared) and their smoothed twins.

Every loss here is a convex function of one linear score ``<theta, x>`` (a generalised linear
model), with rows ``||x||_2 <= row_norm = R`` enforced by
:meth:`~dp_infer.losses.PerExampleLoss.check_data`. Constants (replace-one adjacency, see
:mod:`dp_infer.losses`):

* ``lipschitz`` L: a subgradient of ``ell(.; d)`` has norm ``<= |phi'| R`` with ``phi`` the
  scalar link, so ``L = sup |phi'| R``;
* ``grad_diff`` G: the Lipschitz constant of the *difference* ``ell(.; d) - ell(.; d')`` of two
  per-example losses, ``<= 2 L`` (attained: two rows pointing the same way with opposite signs
  of ``phi'``). This is the G of the regularised exponential mechanism's privacy
  (seed-002 digest §2.3: the privacy G is the Lipschitz constant of differences);
* ``smoothness`` None: the gradient jumps at the kink, so Langevin's step-size theory does not
  apply; :func:`dp_infer.infer.fit.fit` sends such losses to the proximal sampler
  (:mod:`dp_infer.infer.proximal`).

``value_range`` is given when the domain is bounded (and, for the regression losses, the
labels are bounded by a declared ``label_bound``).

The ``smoothed_*`` twins replace the kink by a quadratic of width ``smoothing`` (a Huber-type
Moreau envelope of the scalar link), which makes the loss ``R^2 / smoothing``-smooth with the
same L and G; they are what the Langevin routes can run, at a bias of at most
``sup|phi'| smoothing / 2`` per example.
"""

from __future__ import annotations

import math
from dataclasses import replace

import jax.numpy as jnp
import numpy as np

from .._validation import check_nonnegative, check_positive
from ..domains import Domain
from .base import PerExampleLoss, constants_with_l2, domain_radius, glm_loss
from .behaviour import LossBehaviour
from .glm import SMOOTHED_HINGE

__all__ = ["hinge", "absolute", "quantile", "smoothed_hinge", "smoothed_quantile", "HINGE", "ABSOLUTE", "QUANTILE",
           "SMOOTHED_QUANTILE", "BEHAVIOURS"]

#: the proximal route's losses (no smoothness); point predictions from the released estimate: the
#: margin's sign (hinge), the linear predictor (absolute, quantile)
HINGE = LossBehaviour(name="hinge", point_prediction="label", cli_name="hinge", smooth=False,
                      from_cli=lambda o: hinge(row_norm=o["row_norm"]))
ABSOLUTE = LossBehaviour(name="absolute", point_prediction="value", smooth=False)
QUANTILE = LossBehaviour(name="quantile", point_prediction="value", cli_name="quantile", smooth=False,
                         from_cli=lambda o: quantile(o["quantile_level"], row_norm=o["row_norm"]))
SMOOTHED_QUANTILE = LossBehaviour(name="smoothed_quantile")
#: this module's behaviours (:mod:`dp_infer.losses.registry` collects them; the smoothed hinge is
#: :data:`dp_infer.losses.glm.SMOOTHED_HINGE`, the same function of the margin)
BEHAVIOURS = (HINGE, ABSOLUTE, QUANTILE, SMOOTHED_QUANTILE)


def _binary_labels(y: np.ndarray) -> None:
    bad = ~np.isin(y, (0.0, 1.0))
    if bad.any():
        raise ValueError("y must contain only 0/1 labels for the hinge loss; a label is not 0 or 1")


def _bounded_labels(bound: float | None):
    if bound is None:
        return None

    def check(y: np.ndarray) -> None:
        over = int(np.sum(np.abs(y) > bound))
        if over:
            raise ValueError(f"y: a label exceeds the declared label_bound={bound} (|y| <= label_bound)")

    return check


def _check_tau(tau) -> float:
    try:
        t = float(tau)
    except (TypeError, ValueError):
        raise ValueError(f"tau must be a number in (0, 1), got {tau!r}") from None
    if not 0.0 < t < 1.0:
        raise ValueError(f"tau (the quantile level) must lie in (0, 1), got {tau!r}")
    return t


def _regression_range(slope: float, R: float, label_bound: float | None):
    """sup - inf of slope * |<theta,x> - y| on a ball of radius r (needs a label bound)."""
    if label_bound is None:
        return lambda r: None
    return lambda r: slope * (r * R + label_bound)


def hinge(row_norm: float = 1.0, domain: Domain | None = None) -> PerExampleLoss:
    """SVM hinge loss ``max(0, 1 - s <theta, x>)`` with ``s = 2 y - 1`` for 0/1 labels ``y``.

    Subgradient ``-s x 1{s <theta,x> < 1}``: L = R, G = 2 R, no smoothness. On a bounded domain
    of radius r the loss lies in [0, 1 + r R].
    """
    R = check_positive("row_norm", row_norm)

    def link(z, y):
        return jnp.maximum(0.0, 1.0 - (2.0 * y - 1.0) * z)

    consts = constants_with_l2(R, 2.0 * R, None, 0.0, domain, lambda r: 1.0 + r * R, convex=True)
    return glm_loss("hinge", link, consts, R, _binary_labels, 0.0, domain, behaviour=HINGE)


def absolute(row_norm: float = 1.0, label_bound: float | None = None,
             domain: Domain | None = None) -> PerExampleLoss:
    """Least absolute deviation ``|<theta, x> - y|`` (median regression).

    L = R, G = 2 R, no smoothness; labels need no bound for privacy (the loss is Lipschitz in
    theta whatever y is). ``label_bound`` (optional, enforced) gives a value range on bounded
    domains.
    """
    R = check_positive("row_norm", row_norm)
    B = None if label_bound is None else check_positive("label_bound", label_bound)

    def link(z, y):
        return jnp.abs(z - y)

    consts = constants_with_l2(R, 2.0 * R, None, 0.0, domain, _regression_range(1.0, R, B), convex=True)
    return glm_loss("absolute", link, consts, R, _bounded_labels(B), 0.0, domain, behaviour=ABSOLUTE)


def quantile(tau: float = 0.5, row_norm: float = 1.0, label_bound: float | None = None,
             domain: Domain | None = None) -> PerExampleLoss:
    """Pinball (check) loss of the residual ``r = y - <theta, x>`` at quantile level ``tau``.

    ``rho_tau(r) = r (tau - 1{r < 0}) = max(tau r, (tau - 1) r)``; its slope in r is tau or
    tau - 1, so L = max(tau, 1 - tau) R and G = 2 L; no smoothness. tau = 1/2 is half the
    absolute loss.
    """
    t = _check_tau(tau)
    R = check_positive("row_norm", row_norm)
    B = None if label_bound is None else check_positive("label_bound", label_bound)
    slope = max(t, 1.0 - t)

    def link(z, y):
        r = y - z
        return jnp.maximum(t * r, (t - 1.0) * r)

    consts = constants_with_l2(slope * R, 2.0 * slope * R, None, 0.0, domain, _regression_range(slope, R, B), convex=True)
    return glm_loss(f"quantile({t:g})", link, consts, R, _bounded_labels(B), 0.0, domain, behaviour=QUANTILE)


# ----------------------------------------------------------------------------------------------
# smoothed twins (for the Langevin routes)
# ----------------------------------------------------------------------------------------------

def _huber_scalar(u, width):
    """Huber function of a scalar: u^2 / (2 width) for |u| <= width, |u| - width / 2 beyond."""
    a = jnp.abs(u)
    return jnp.where(a <= width, 0.5 * u * u / width, a - 0.5 * width)


def smoothed_hinge(smoothing: float = 0.5, row_norm: float = 1.0, l2: float = 0.0,
                   domain: Domain | None = None) -> PerExampleLoss:
    """Huberised hinge: the kink of ``max(0, z)`` replaced by a quadratic of width ``smoothing``.

    With ``z = 1 - s <theta, x>`` and width w = ``smoothing``: 0 for z <= 0, z^2 / (2 w) for
    0 < z <= w, z - w / 2 beyond. Slope in [0, 1], so L = R, G = 2 R, M = R^2 / w; it is below
    the hinge by at most w / 2 everywhere.
    """
    w = check_positive("smoothing", smoothing)
    R = check_positive("row_norm", row_norm)
    l2 = check_nonnegative("l2", l2)

    def link(t, y):
        z = 1.0 - (2.0 * y - 1.0) * t
        return jnp.where(z <= 0.0, 0.0, jnp.where(z <= w, 0.5 * z * z / w, z - 0.5 * w))

    consts = constants_with_l2(R, 2.0 * R, R * R / w, l2, domain, lambda r: 1.0 + r * R, convex=True)
    return glm_loss("smoothed_hinge", link, consts, R, _binary_labels, l2, domain,
                    behaviour=replace(SMOOTHED_HINGE, clip_params=(("smoothing", w),)))


def smoothed_quantile(tau: float = 0.5, smoothing: float = 0.5, row_norm: float = 1.0,
                      l2: float = 0.0, label_bound: float | None = None,
                      domain: Domain | None = None) -> PerExampleLoss:
    """Pinball loss with its kink replaced by a quadratic of width ``smoothing``.

    ``rho_tau(r) ~ (2 tau - 1) r / 2 + H_w(r) / 2`` with H_w the Huber function
    (:func:`_huber_scalar`): slope in [tau - 1, tau], so L = max(tau, 1 - tau) R, G = 2 L and
    M = R^2 / (2 w); it differs from the pinball loss by at most w / 4.
    """
    t = _check_tau(tau)
    w = check_positive("smoothing", smoothing)
    R = check_positive("row_norm", row_norm)
    l2 = check_nonnegative("l2", l2)
    B = None if label_bound is None else check_positive("label_bound", label_bound)
    slope = max(t, 1.0 - t)

    def link(z, y):
        r = y - z
        return (t - 0.5) * r + 0.5 * _huber_scalar(r, w)

    consts = constants_with_l2(slope * R, 2.0 * slope * R, R * R / (2.0 * w), l2, domain,
                      _regression_range(slope, R, B), convex=True)
    return glm_loss(f"smoothed_quantile({t:g})", link, consts, R, _bounded_labels(B), l2, domain,
                    behaviour=SMOOTHED_QUANTILE)


def base_lipschitz(loss: PerExampleLoss) -> float:
    """Per-example Lipschitz constant of ``loss.fn`` alone (without the loss's own L2 term).

    The proximal sampler puts every quadratic term into its Gaussian part, so it needs the
    Lipschitz constant of the non-quadratic part: ``constants.lipschitz`` when ``l2 = 0``, or
    ``lipschitz - l2 * sup||theta||`` on a bounded domain.
    """
    c = loss.constants
    if not loss.l2:
        return float(c.lipschitz)
    r = domain_radius(loss.domain)
    if not math.isfinite(r):
        raise ValueError("the loss carries an L2 term on an unbounded domain, so the Lipschitz constant "
                         "of its non-quadratic part is not recorded: build it with l2 = 0 and pass the "
                         "regulariser to the proximal route instead")
    return float(c.lipschitz - loss.l2 * r)
