"""What a loss does beyond its value and its constants, carried by the loss (``loss.behaviour``).

A :class:`~dp_infer.losses.base.PerExampleLoss` holds a :class:`LossBehaviour`; each built-in
loss's constructor sets its own, in the loss's file (:mod:`~dp_infer.losses.glm`,
:mod:`~dp_infer.losses.count`, :mod:`~dp_infer.losses.nonsmooth`). The rest of the package reads
the behaviour, never the loss's name:

* the posterior mode's clip in the preconditioner's metric (:mod:`dp_infer.losses.metric_clip`):
  ``clipped_link(z, y, a, params)``, the loss's link with its derivative bounded by ``a`` for every
  label, with ``clip_params``; None = the loss is not clipped in the metric;
* the planner's step size of a clipped plan: ``clipped_curvature_factor``, the clipped link's
  curvature bound over the loss's own (:func:`dp_infer.routes.posterior.plan_posterior`);
* predictions from released draws: ``predictive(X, theta) -> {"mean", ["probs"], "kind"}``
  (:func:`dp_infer.infer.prediction.loss_predictive`; None = no prediction rule) and
  ``point_prediction``, what the command line and the proximal route's ``predict`` report;
* the command line: ``cli_name`` (what ``--loss`` takes) and ``from_cli`` (the loss from the
  command's options);
* ``fit_refusal``: why ``fit(loss)`` refuses the loss (None: accepted);
* ``label_free_curvature``: the link's curvature ``phi''(z, y)`` does not depend on the label, and under
  a correctly specified model the score's variance equals it (``E[phi'^2 | x] = phi''``: a canonical
  GLM with unit dispersion, logistic and Poisson), so the posterior mode's interval release can take
  its curvature and model-based scores' second moment from public feature rows
  (:mod:`dp_infer.routes.newton_release`, ``interval_curvature="public"``);
* the forecast of how far the tempered posterior spreads (:func:`dp_infer.routes.forecast.tempered_sd_ratios`):
  ``spread_curvature(v, a, params)``, the clipped link's curvature (clip level ``a``; ``inf``: no clip)
  averaged over a score spread as ``N(0, v)``; None = no such declaration (the forecast then uses the
  plan's constant curvature stand-in, ``kappa / 2``).

A run file stores the loss's name only; :func:`dp_infer.losses.registry.loss_behaviour` maps a
built-in loss's stored name back to its behaviour. A loss of your own carries its behaviour in
the process that built it (a run sampled there predicts with it).

Public declarations only: nothing here reads data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

__all__ = ["LossBehaviour", "CUSTOM", "POINT_PREDICTIONS", "linear_predictive"]

#: what a point prediction from the linear score ``z = <theta, x>`` is: ``"probability"`` (of label
#: 1; the command line reports accuracy, log loss and calibration), ``"label"`` (0/1 by the sign
#: of ``z``), ``"value"`` (``z`` itself)
POINT_PREDICTIONS = ("probability", "label", "value")


@dataclass(frozen=True)
class LossBehaviour:
    """Per-loss behaviour (module doc). Every field is public and data independent.

    ``name``: the loss family's name (a loss's own ``name`` may add its parameter, e.g.
    ``quantile(0.9)``); ``smooth``: the family declares a smoothness constant (False: the proximal
    route's losses); ``one_coefficient_per_feature``: theta has one entry per feature column
    (False for the multinomial logistic loss: one per feature and class).
    """

    name: str | None = None
    clipped_link: Callable | None = None
    clip_params: tuple[tuple[str, float], ...] = ()
    clipped_curvature_factor: float = 1.0
    predictive: Callable[[np.ndarray, np.ndarray], dict] | None = None
    point_prediction: str | None = None
    cli_name: str | None = None
    from_cli: Callable[[Mapping], object] | None = None
    smooth: bool = True
    one_coefficient_per_feature: bool = True
    fit_refusal: str | None = None
    label_free_curvature: bool = False
    spread_curvature: Callable[[float, float, Mapping], float] | None = None
    #: ``z -> sup_y |phi'(z, y)|`` over the loss's labels (numpy, float64, per row): the largest link derivative
    #: a row with score ``z`` can have whatever its label, at most the declared ``link_derivative_bound``
    #: (logistic: ``max(s, 1 - s)``, ``s = sigmoid(z)``); None: that bound for every ``z``
    link_derivative_envelope: Callable[[np.ndarray], np.ndarray] | None = None

    def __post_init__(self):
        if self.point_prediction is not None and self.point_prediction not in POINT_PREDICTIONS:
            raise ValueError(f"point_prediction must be one of {POINT_PREDICTIONS} or None, got {self.point_prediction!r}")
        if not self.clipped_curvature_factor >= 1.0:
            raise ValueError("clipped_curvature_factor must be >= 1 (the clipped link's curvature bound over the "
                             f"loss's own), got {self.clipped_curvature_factor!r}")

    @property
    def clippable(self) -> bool:
        """Whether the behaviour has a clipped link (the loss must also be generalised linear)."""
        return self.clipped_link is not None

    def bound_clipped_link(self) -> Callable:
        """``f(z, y, a)``: the clipped link with this behaviour's parameters bound."""
        if self.clipped_link is None:
            raise ValueError(f"the {self.name or 'custom'} loss has no clipped link")
        f, params = self.clipped_link, dict(self.clip_params)
        return lambda z, y, a: f(z, y, a, params)

    def bound_spread_curvature(self) -> Callable[[float, float], float] | None:
        """``f(v, a)``: the declared spread curvature with this behaviour's parameters bound, or None."""
        if self.spread_curvature is None:
            return None
        f, params = self.spread_curvature, dict(self.clip_params)
        return lambda v, a: f(v, a, params)


#: the behaviour of a loss that declares none (``clipped_loss``, a hand-built ``PerExampleLoss``):
#: no clip in the metric, no prediction rule, not on the command line
CUSTOM = LossBehaviour()


def linear_predictive(inverse_link: Callable[[np.ndarray], np.ndarray], kind: str, *,
                      probs: bool = False) -> Callable[[np.ndarray, np.ndarray], dict]:
    """The prediction rule of a generalised linear loss: ``inverse_link(X @ theta.T)`` averaged over
    the draws (``theta`` of shape (S, d)); ``probs``: the mean is also the class-1 probability."""

    def predictive(X, theta):
        m = inverse_link(X @ theta.T).mean(axis=1)
        return {"mean": m, "probs": m, "kind": kind} if probs else {"mean": m, "kind": kind}

    return predictive
