"""One call from data and a privacy target to private draws inside NumPyro's MCMC.

Data flows one way: data + loss + domain -> potential -> kernel -> draws; privacy flows beside
it: loss constants + target -> plan -> report. The plan never touches the data; the kernel never
decides privacy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC

from ._validation import check_finite_array
from .domains import Domain, Euclidean
from .kernels import Langevin, UnderdampedLangevin
from .losses import PerExampleLoss
from .plan import SamplingPlan, plan_trajectory
from .potentials import GibbsPotential, gibbs_potential

__all__ = ["PrivateRun", "sample", "fit"]


@dataclass
class PrivateRun:
    """A finished private run: the MCMC object, the plan it followed and the potential.

    Only theta draws (and ``diverging``, a function of theta) are covered by the guarantee.
    """

    mcmc: MCMC
    plan: SamplingPlan
    potential: GibbsPotential

    def draws(self, *, drop_burn_in: bool = True) -> np.ndarray:
        """Released draws, shape (chains, draws, dim); burn-in dropped by default (post-processing)."""
        z = np.asarray(self.mcmc.get_samples(group_by_chain=True)["theta"])
        return z[:, self.plan.burn_in:] if drop_burn_in else z

    def posterior_mean(self) -> np.ndarray:
        """Mean of the post-burn-in draws over all chains (post-processing of released draws)."""
        return self.draws().reshape(-1, self.plan.dim).mean(axis=0)

    def num_divergent(self) -> int:
        div = self.mcmc.get_extra_fields(group_by_chain=True).get("diverging")
        return 0 if div is None else int(np.asarray(div).sum())

    def report(self) -> dict:
        """The privacy report: the plan, the spent (eps, delta) recomputed by the accountant."""
        d = self.plan.as_dict()
        d["potential"] = self.potential.describe()
        return d

    def to_datatree(self, *, debug: bool = False):
        """Privacy-safe ArviZ DataTree (posterior + diverging + report in attributes)."""
        from .diagnostics import to_datatree

        return to_datatree(self.mcmc, self.report(), debug=debug)


def _kernel(plan: SamplingPlan, potential_fn, domain: Domain | None):
    dom = None if isinstance(domain, Euclidean) else domain
    if plan.kernel == "langevin":
        return Langevin(potential_fn=potential_fn, step_size=plan.step_size, domain=dom)
    return UnderdampedLangevin(potential_fn=potential_fn, step_size=plan.step_size,
                               friction=plan.friction, domain=dom)


def sample(loss: PerExampleLoss, X, y, plan: SamplingPlan, *, domain: Domain | None = None,
           seed: int = 0, progress_bar: bool = True, chain_method: str = "vectorized",
           theta0=None) -> PrivateRun:
    """Run ``plan`` on the data: Gibbs potential at the plan's beta, our kernel, NumPyro MCMC.

    The initial point is ``domain.default_init()`` (0 without a domain): data independent.
    """
    if not isinstance(plan, SamplingPlan):
        raise ValueError(f"plan must be a dp_infer.plan.SamplingPlan, got {type(plan).__name__}")
    X = check_finite_array("X", X, ndim=2)
    if X.shape[0] != plan.n:
        raise ValueError(f"the plan was made for n = {plan.n} rows but X has {X.shape[0]}: re-plan")
    potential = gibbs_potential(loss, X, y, beta=plan.beta, lam=plan.lam, theta0=theta0)
    if potential.dim != plan.dim:
        raise ValueError(f"the plan was made for dim = {plan.dim} but the loss has {potential.dim} parameters")
    domain = domain if domain is not None else loss.domain
    if domain is not None and domain.dim != plan.dim:
        raise ValueError(f"domain.dim = {domain.dim} does not match the parameter dimension {plan.dim}")
    init = jnp.zeros(plan.dim) if domain is None else jnp.asarray(domain.default_init(), dtype=jnp.float32)

    def potential_fn(z):
        return potential(z["theta"])

    mcmc = MCMC(_kernel(plan, potential_fn, domain), num_warmup=0, num_samples=plan.num_steps,
                num_chains=plan.num_chains, thinning=plan.thinning, chain_method=chain_method,
                progress_bar=progress_bar)
    init_params = {"theta": jnp.broadcast_to(init, (plan.num_chains, plan.dim))
                   if plan.num_chains > 1 else init}
    mcmc.run(jax.random.PRNGKey(seed), init_params=init_params)
    return PrivateRun(mcmc, plan, potential)


def fit(loss: PerExampleLoss, X, y, *, eps: float, delta: float, horizon: float = 1.0,
        num_chains: int = 1, kernel: str = "langevin", friction: float | None = None,
        lam: float = 0.0, num_draws: int = 1000, domain: Domain | None = None, seed: int = 0,
        progress_bar: bool = True, **plan_kwargs: Any) -> PrivateRun:
    """Plan the trajectory route from (eps, delta) and the loss constants, then sample.

    ``X, y`` are checked against the loss's declared bounds before anything runs.
    """
    X, y = loss.check_data(X, y)
    plan = plan_trajectory(loss.constants, X.shape[0], loss.num_params(X.shape[1]), eps=eps,
                           delta=delta, horizon=horizon, num_chains=num_chains, kernel=kernel,
                           friction=friction, lam=lam, num_draws=num_draws, **plan_kwargs)
    return sample(loss, X, y, plan, domain=domain, seed=seed, progress_bar=progress_bar)
