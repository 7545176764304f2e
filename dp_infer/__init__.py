"""dp_infer: differentially private Gibbs and Rashomon sampling with Langevin kernels in NumPyro."""

from . import datasets, domains, losses, potentials
from .domains import Box, Euclidean, L2Ball
from .fit import PrivateRun, fit, sample
from .kernels import Langevin, UnderdampedLangevin
from .losses import clipped_loss, huber, logistic, multinomial_logistic, squared
from .model_bridge import loss_from_model
from .plan import SamplingPlan, plan_trajectory
from .potentials import gibbs_model, gibbs_potential, rashomon_potential

__version__ = "0.1.0"

__all__ = [
    "Box", "Euclidean", "L2Ball", "Langevin", "UnderdampedLangevin", "PrivateRun", "SamplingPlan",
    "clipped_loss", "datasets", "domains", "fit", "gibbs_model", "gibbs_potential", "huber",
    "logistic", "loss_from_model", "losses", "multinomial_logistic", "plan_trajectory",
    "potentials", "rashomon_potential", "sample", "squared",
]
