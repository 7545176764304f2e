"""Per-example losses that carry the constants the privacy analysis needs.

* :mod:`~dp_infer.losses.base`: :class:`LossConstants`, :class:`PerExampleLoss`, generalised linear
  losses (:func:`glm_loss`), per-example gradient clipping for any loss (:func:`clipped_loss`)
  and :func:`with_l2`;
* :mod:`~dp_infer.losses.behaviour`: :class:`LossBehaviour`, what a loss does beyond its value and
  constants (clipped link, prediction rule, CLI name), carried by the loss; built-in ones by name:
  :mod:`~dp_infer.losses.registry`;
* :mod:`~dp_infer.losses.glm`: logistic, multinomial logistic, squared, Huber, smoothed hinge;
* :mod:`~dp_infer.losses.count`: Poisson regression on bounded counts;
* :mod:`~dp_infer.losses.nonsmooth`: hinge, absolute, quantile (the proximal route) and their
  Huber-smoothed versions.
"""

from .base import (
    ExampleLoss, LossConstants, PerExampleLoss, clipped_fraction, clipped_loss, constants_with_l2, domain_radius,
    glm_loss, with_l2,
)
from .behaviour import LossBehaviour
from .count import poisson
from .glm import huber, logistic, multinomial_logistic, smoothed_hinge, squared
from .nonsmooth import absolute, hinge, quantile, smoothed_quantile

__all__ = [
    "LossConstants", "PerExampleLoss", "ExampleLoss", "logistic", "multinomial_logistic", "squared", "huber",
    "smoothed_hinge", "clipped_loss", "clipped_fraction", "glm_loss", "with_l2", "constants_with_l2",
    "domain_radius", "poisson", "hinge", "absolute", "quantile", "smoothed_quantile", "LossBehaviour",
]
