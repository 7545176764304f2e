"""Poisson regression loss for bounded counts, with declared constants.

Per example ``ell(theta; x, y) = exp(z) - y z`` with ``z = <theta, x>`` (the Poisson negative
log-likelihood up to the data-only term ``log y!``), log link. Declared bounds: ``||x|| <= R``,
``y`` an integer count in ``0 .. Y`` (``max_count``) and a bounded parameter domain with ``sup ||theta|| = r``, so
``|z| <= r R``. Then, with ``c = max(e^(rR), Y - e^(-rR))`` the largest ``|d ell / dz| = |e^z - y|``:

* Lipschitz ``L = R c`` (``grad = (e^z - y) x``);
* gradient difference ``G = 2 L`` (replace-one; attained in the limit x' = -x);
* smoothness ``M = R^2 e^(rR)`` (Hessian ``e^z x x^T``);
* value range ``<= (e^(rR) + Y r R) - (e^(-rR) - Y r R)``.

On an unbounded domain the gradient has no bound: use ``dp_infer.losses.clipped_loss`` on
:func:`poisson_nll` instead (per-example gradient clipping).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from .._validation import check_nonnegative, check_positive
from ..domains import Box, Domain, L2Ball
from .base import LossConstants, PerExampleLoss, constants_with_l2, domain_radius, glm_loss
from .behaviour import LossBehaviour, linear_predictive

__all__ = ["poisson", "poisson_nll", "poisson_constants", "max_param_norm", "POISSON", "BEHAVIOURS"]

#: predictions: the mean count ``exp(<theta, x>)`` averaged over draws; no clip in the metric
POISSON = LossBehaviour(name="poisson", predictive=linear_predictive(np.exp, "count"), label_free_curvature=True)
#: this module's behaviours (:mod:`dp_infer.losses.registry` collects them)
BEHAVIOURS = (POISSON,)


def max_param_norm(domain: Domain) -> float:
    """sup ||theta||_2 over ``domain``: exact for L2Ball (||c|| + radius) and Box (farthest corner);
    ``losses.base.domain_radius`` (||default_init|| + diameter, a valid but looser bound) otherwise."""
    if isinstance(domain, L2Ball):
        return float(np.linalg.norm(domain.center) + domain.radius)
    if isinstance(domain, Box):
        return float(np.linalg.norm(np.maximum(np.abs(domain.lower), np.abs(domain.upper))))
    return domain_radius(domain)


def poisson_link(z, y):
    """exp(z) - y z of the linear index z = <theta, x> (elementwise)."""
    return jnp.exp(z) - y * z


def poisson_nll(theta, x, y):
    """exp(<theta, x>) - y <theta, x> for one example (log link)."""
    return poisson_link(jnp.dot(theta, x), y)


def poisson_constants(max_count: float, radius: float, row_norm: float) -> dict:
    """(lipschitz, grad_diff, smoothness, value_range) of :func:`poisson_nll` on |z| <= radius*row_norm."""
    Y, r, R = float(max_count), float(radius), float(row_norm)
    zmax = r * R
    c = max(math.exp(zmax), Y - math.exp(-zmax))
    lip = R * c
    return {"lipschitz": lip, "grad_diff": 2.0 * lip, "smoothness": R * R * math.exp(zmax),
            "value_range": (math.exp(zmax) + Y * zmax) - (math.exp(-zmax) - Y * zmax)}


def poisson(max_count: float, domain: Domain, row_norm: float = 1.0, l2: float = 0.0) -> PerExampleLoss:
    """Poisson regression loss (log link) with counts in [0, max_count] on a bounded ``domain``."""
    Y = check_positive("max_count", max_count)
    R = check_positive("row_norm", row_norm)
    l2 = check_nonnegative("l2", l2)
    if domain is None or not isinstance(domain, Domain) or not domain.bounded:
        raise ValueError("domain must be a bounded Domain (L2Ball or Box) for the Poisson loss: on an "
                         "unbounded domain exp(<theta, x>) has no bounded gradient; use clipped_loss(poisson_nll, ...)")
    r = max_param_norm(domain)
    k = poisson_constants(Y, r, R)

    top = int(math.floor(Y))

    def labels(y):
        # integers only: a count of 2.5 is no Poisson observation (refused, never rounded: issue 40)
        bad = int(np.sum((y < 0) | (y > Y) | (y != np.floor(y))))
        if bad:
            raise ValueError(f"y must be integer counts in {{0, 1, ..., {top}}} (max_count={Y:g}); a label is not")

    consts = constants_with_l2(k["lipschitz"], k["grad_diff"], k["smoothness"], 0.0, domain,
                      lambda rr: k["value_range"], convex=True)
    if l2:  # (l2/2)||theta||^2 adds l2 r to the gradient bound and l2 r^2 / 2 to the range
        consts = LossConstants(lipschitz=k["lipschitz"] + l2 * r, grad_diff=k["grad_diff"],
                               smoothness=k["smoothness"] + l2, strong_convexity=l2,
                               value_range=k["value_range"] + 0.5 * l2 * r * r, convex=True)
    return glm_loss("poisson", poisson_link, consts, R, labels, l2, domain, behaviour=POISSON)
