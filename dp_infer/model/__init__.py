"""A NumPyro model as a private sampling target.

* :mod:`~dp_infer.model.bridge`: the model's log-likelihood as a clipped per-example loss
  (:func:`loss_from_model`) and its data-independent prior;
* :mod:`~dp_infer.model.initial`: which NumPyro init strategies are allowed (none reads the data)
  and the prior's curvature;
* :mod:`~dp_infer.model.fisher`: the scores' second moment at a public point (the posterior mode's
  data preconditioner, released privately by the caller).
"""

from .bridge import ModelLoss, SiteLayout, loss_from_model
from .initial import ACCEPTED_INIT_STRATEGIES, check_init_strategy, initial_positions, prior_curvature

__all__ = ["ModelLoss", "SiteLayout", "loss_from_model", "ACCEPTED_INIT_STRATEGIES", "check_init_strategy",
           "initial_positions", "prior_curvature"]
