"""dp_infer: differentially private Gibbs and Rashomon sampling with Langevin kernels in NumPyro.

The names below are the public API (docs: API reference -> Public API). Everything else is
reached through its module: :mod:`dp_infer.privacy` (events, accountant, routes, ledger),
:mod:`dp_infer.diagnostics`, :mod:`dp_infer.rashomon`, :mod:`dp_infer.audit`,
:mod:`dp_infer.mechanisms` (Generalized Gaussian, sparse vector, queries, purification),
:mod:`dp_infer.diagnostics.plots`, :mod:`dp_infer.cli`.
"""

from . import datasets, domains, losses, potentials
from .routes.calibrate import calibrate
from .domains import Box, Euclidean, L2Ball
from .infer.fit import PrivateRun, fit, sample
from .kernels import Langevin, MinibatchSGLD, UnderdampedLangevin
from .losses import clipped_loss, huber, logistic, multinomial_logistic, squared
from .losses.nonsmooth import absolute, hinge, quantile
from .model.bridge import loss_from_model
from .routes.forecast import forecast_posterior
from .routes.plan import SamplingPlan, plan_trajectory
from .potentials import gibbs_model, gibbs_potential, rashomon_potential
from .randomness import secret_key

__version__ = "0.1.0"

__all__ = [
    "Box", "Euclidean", "L2Ball", "Langevin", "MinibatchSGLD", "UnderdampedLangevin", "PrivateRun",
    "SamplingPlan", "absolute", "calibrate", "clipped_loss", "datasets", "domains", "fit",
    "forecast_model_posterior", "forecast_posterior", "gibbs_model", "gibbs_potential", "hinge", "huber", "logistic",
    "loss_from_model", "losses", "multinomial_logistic", "plan_trajectory", "potentials", "quantile",
    "rashomon_potential", "sample", "secret_key", "squared",
]


def __getattr__(name: str):
    """PEP 562: ``forecast_model_posterior`` imports the NumPyro model route (about 1 s) only when asked for."""
    if name == "forecast_model_posterior":
        from .infer.model_forecast import forecast_model_posterior

        return forecast_model_posterior
    raise AttributeError(f"module 'dp_infer' has no attribute {name!r}")
