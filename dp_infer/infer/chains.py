"""The one place a plan's chains are built and run: the Langevin kernel the plan names on a potential
over one sample site, inside NumPyro's ``MCMC`` with no warmup (every step is part of the accounted
path; nothing is tuned on the private data).

Every route that samples calls these two functions: the estimate routes (:mod:`dp_infer.infer.fit`),
the posterior mode (:mod:`dp_infer.infer.posterior`, each adaptation phase included), a NumPyro model's
posterior mode (:mod:`dp_infer.infer.model_posterior`) and the Rashomon sampler
(:mod:`dp_infer.rashomon.sampler`). The kernels are :mod:`dp_infer.kernels`' NumPyro adapters over their
functional cores, the ones the audits run.
"""

from __future__ import annotations

from typing import Callable

from numpyro.infer import MCMC

from .._validation import check_choice
from ..domains import Domain, Euclidean
from ..kernels import Langevin, UnderdampedLangevin

__all__ = ["CHAIN_KERNELS", "site_potential", "plan_kernel", "run_chains"]

#: the kernels a plan can name
CHAIN_KERNELS = ("langevin", "underdamped")


def site_potential(potential: Callable, site: str) -> Callable:
    """``potential_fn(z, *args) = potential(z[site], *args)``: NumPyro's potential over one site (``args``:
    a sharded potential's run arguments, passed to the jitted loop, never closed over)."""
    def potential_fn(z, *args):
        return potential(z[site], *args)

    return potential_fn


def plan_kernel(kernel: str, potential_fn: Callable, *, step_size: float, friction: float | None = None,
                domain: Domain | None = None, debug: bool = False):
    """The NumPyro kernel ``kernel`` (``"langevin"`` or ``"underdamped"``, with ``friction``) at the plan's
    step on ``potential_fn``; a Euclidean ``domain`` is no projection. ``debug`` adds the non-private
    potential energy to the state (never for a private release)."""
    check_choice("kernel", kernel, CHAIN_KERNELS)
    dom = None if isinstance(domain, Euclidean) else domain
    if kernel == "langevin":
        return Langevin(potential_fn=potential_fn, step_size=step_size, domain=dom, debug=debug)
    return UnderdampedLangevin(potential_fn=potential_fn, step_size=step_size, friction=friction, domain=dom,
                               debug=debug)


def run_chains(kernel, site: str, init, *, num_steps: int, thinning: int, num_chains: int, key,
               chain_method: str = "vectorized", progress_bar: bool = False, args: tuple = (),
               extra_fields: tuple = (), place_chains: Callable | None = None) -> MCMC:
    """Run ``num_chains`` chains of ``num_steps`` steps (keeping every ``thinning``-th state) from ``init``
    (shape (chains, dim), chosen without the private data) and return the ``MCMC``.

    ``args``: a sharded potential's run arguments (then jitted as model arguments); ``place_chains``:
    its layout of the initial points."""
    mcmc = MCMC(kernel, num_warmup=0, num_samples=num_steps, num_chains=num_chains, thinning=thinning,
                chain_method=chain_method, progress_bar=progress_bar, jit_model_args=bool(args))
    start = init if num_chains > 1 else init[0]
    mcmc.run(key, *args, init_params={site: start if place_chains is None else place_chains(start)},
             extra_fields=tuple(extra_fields))
    return mcmc
