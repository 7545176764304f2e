"""Unadjusted Langevin kernels: pure functional cores and NumPyro ``MCMCKernel`` adapters.

* :mod:`dp_infer.kernels.langevin` -- (projected) unadjusted Langevin algorithm,
  :class:`Langevin`;
* :mod:`dp_infer.kernels.underdamped` -- kinetic Langevin, Euler kinetic scheme,
  :class:`UnderdampedLangevin`;
* :mod:`dp_infer.kernels.sgld` -- Poisson-subsampled SGLD with per-example clipping,
  :class:`MinibatchSGLD` (accounted by :mod:`dp_infer.privacy.minibatch`).

Each functional module exposes, BlackJAX style, ``init``, ``build_kernel`` (``-> step(rng_key,
state) -> (state, info)`` with ``info`` a NamedTuple of theta-only public fields),
``as_top_level_api(logdensity_fn, ..., plan=)`` (``init`` and ``step`` with the privacy plan's
step size), ``keyed_transition`` and ``sample_chain`` (a ``lax.scan`` driver). The kernels never decide
privacy: the potential already contains the inverse temperature, and the step size, friction
and number of steps come from a privacy plan chosen without looking at the data.
"""

from . import langevin, sgld, underdamped
from .langevin import Langevin, LangevinDebugState, LangevinState
from .sgld import MinibatchSGLD
from .underdamped import UnderdampedLangevin, UnderdampedLangevinDebugState, UnderdampedLangevinState

__all__ = [
    "langevin",
    "underdamped",
    "sgld",
    "MinibatchSGLD",
    "Langevin",
    "LangevinState",
    "LangevinDebugState",
    "UnderdampedLangevin",
    "UnderdampedLangevinState",
    "UnderdampedLangevinDebugState",
]
