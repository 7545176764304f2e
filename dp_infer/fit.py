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
from .calibrate import calibrate
from .plan import SamplingPlan
from .potentials import GibbsPotential, gibbs_potential
from .randomness import KeySource, secret_key
from .sharding import ShardedPotential, ShardedRows, same_key_on_all_processes, shard_rows

__all__ = ["PrivateRun", "sample", "fit"]


@dataclass
class PrivateRun:
    """A finished private run: the MCMC object, the plan it followed and the potential.

    Only theta draws (and ``diverging``, a function of theta) are covered by the guarantee.
    """

    mcmc: MCMC
    plan: SamplingPlan
    potential: GibbsPotential | ShardedPotential
    randomness: KeySource
    purified: np.ndarray | None = None

    def draws(self, *, drop_burn_in: bool = True) -> np.ndarray:
        """Draws, shape (chains, draws, dim); burn-in dropped by default (post-processing).

        Route ``trajectory``: the whole accounted path. ``last_iterate``: one draw per chain (the
        only accounted release). ``pure``: the raw draws are only covered by the upstream
        (eps_a, delta_a) guarantee; release :meth:`estimate` (purified) instead.
        """
        z = np.asarray(self.mcmc.get_samples(group_by_chain=True)["theta"])
        return z[:, self.plan.burn_in:] if drop_burn_in else z

    def posterior_mean(self) -> np.ndarray:
        """Mean of the post-burn-in draws over all chains (post-processing of released draws)."""
        return self.draws().reshape(-1, self.plan.dim).mean(axis=0)

    def estimate(self) -> np.ndarray:
        """The released point estimate: the purified mean (route ``pure``) or the posterior mean."""
        return self.purified if self.purified is not None else self.posterior_mean()

    def num_divergent(self) -> int:
        div = self.mcmc.get_extra_fields(group_by_chain=True).get("diverging")
        return 0 if div is None else int(np.asarray(div).sum())

    def report(self) -> dict:
        """The privacy report: the plan, the spent (eps, delta) recomputed by the accountant, and
        where the noise came from (never the key itself)."""
        d = self.plan.as_dict()
        d["potential"] = self.potential.describe()
        d["randomness"] = self.randomness.describe()
        return d

    def released_draws(self) -> np.ndarray:
        """Exactly what the route's guarantee covers, shape (chains, draws, dim).

        ``trajectory``: every draw of every chain (burn-in included). ``last_iterate`` and
        ``stationary``: the final draw of each chain. ``pure``: the purified estimate only.
        """
        if self.purified is not None:
            return self.purified[None, None, :]
        z = self.draws(drop_burn_in=False)
        return z if self.plan.release == "trajectory" else z[:, -1:]

    def to_datatree(self, *, debug: bool = False):
        """Privacy-safe ArviZ DataTree (posterior + diverging + report in attributes).

        Routes that release only final draws (or a purified estimate) export exactly those,
        with a divergence flag computed from them alone: the kernel's sticky flag summarises
        the unreleased iterates and is not exported.
        """
        from .diagnostics import to_datatree

        if debug:
            return to_datatree(self.mcmc, self.report(), debug=True)
        if self.plan.release != "trajectory":
            return to_datatree({"theta": self.released_draws()}, self.report())
        return to_datatree(self.mcmc, self.report())


def _kernel(plan: SamplingPlan, potential_fn, domain: Domain | None):
    dom = None if isinstance(domain, Euclidean) else domain
    if plan.kernel == "langevin":
        return Langevin(potential_fn=potential_fn, step_size=plan.step_size, domain=dom)
    return UnderdampedLangevin(potential_fn=potential_fn, step_size=plan.step_size,
                               friction=plan.friction, domain=dom)


def purify_estimate(plan: SamplingPlan, domain: Domain | None, estimate, key) -> np.ndarray:
    """Project ``estimate`` onto the plan's bounded domain (float64) and purify it with the
    plan's purification parameters (seed 003 Algorithm 1): the pure route's only release."""
    from .privacy.purification import PurificationParams, purify

    if domain is None or not domain.bounded:
        raise ValueError("route 'pure' needs the bounded domain its plan was made for")
    pdict = dict(plan.purification)
    pdict["q"] = float(pdict["q"])  # "inf" is stored as a string for JSON
    with jax.enable_x64(True):  # project in float64 so the point lies in the domain exactly
        point = np.asarray(domain.project(jnp.asarray(estimate, dtype=jnp.float64)))
    return np.asarray(purify(key, point, PurificationParams(**pdict), domain))


def _initial_points(plan: SamplingPlan, domain: Domain | None, key) -> jax.Array:
    """Data-independent start of every chain, shape (chains, dim): the domain's default point
    (0 without a domain), or independent N(0, init_scale^2 I) draws when the plan asks for the
    start law its certificate assumes."""
    if plan.init_law == "gaussian":
        return plan.init_scale * jax.random.normal(key, (plan.num_chains, plan.dim))
    if plan.init_law != "point":
        raise ValueError(f"plan.init_law must be 'point' or 'gaussian', got {plan.init_law!r}")
    x0 = jnp.zeros(plan.dim) if domain is None else jnp.asarray(domain.default_init(), dtype=jnp.float32)
    return jnp.broadcast_to(x0, (plan.num_chains, plan.dim))


def sample(loss: PerExampleLoss, X, y, plan: SamplingPlan, *, domain: Domain | None = None,
           seed: int | None = None, key_impl: str = "threefry2x32", progress_bar: bool = True,
           chain_method: str = "vectorized", theta0=None, mesh=None) -> PrivateRun:
    """Run ``plan`` on the data: Gibbs potential at the plan's beta, our kernel, NumPyro MCMC.

    The initial point follows ``plan.init_law`` (data independent). ``seed=None`` (default)
    draws the key from the operating system's entropy; an integer seed makes the noise
    reproducible by whoever holds it, and the report says so (:mod:`dp_infer.randomness`).
    ``mesh`` (a :func:`dp_infer.sharding.data_mesh`), or ``X`` given as
    :class:`~dp_infer.sharding.ShardedRows` (then ``y=None``), runs the same potential on
    row-sharded data in row blocks (:mod:`dp_infer.sharding`): same plan, same draws to float
    tolerance for the same key.
    """
    if not isinstance(plan, SamplingPlan):
        raise ValueError(f"plan must be a dp_infer.plan.SamplingPlan, got {type(plan).__name__}")
    if chain_method not in ("vectorized", "sequential", "parallel"):
        raise ValueError(f"chain_method must be one of ('vectorized', 'sequential', 'parallel'), "
                         f"got {chain_method!r}")
    key, source = secret_key(seed, impl=key_impl)
    sharded = mesh is not None or isinstance(X, ShardedRows)
    if not sharded:
        X = check_finite_array("X", X, ndim=2)
    n = X.n if isinstance(X, ShardedRows) else len(X)
    if n != plan.n:
        raise ValueError(f"the plan was made for n = {plan.n} rows but X has {n}: re-plan")
    if sharded:
        key = same_key_on_all_processes(key)  # one noise sequence for the one SPMD program
        X = X if isinstance(X, ShardedRows) else shard_rows(loss, X, y, None if mesh == "auto" else mesh)
        potential = ShardedPotential(loss, X, plan.beta, plan.lam, None if theta0 is None else jnp.asarray(theta0))
    else:
        potential = gibbs_potential(loss, X, y, beta=plan.beta, lam=plan.lam, theta0=theta0)
    if potential.dim != plan.dim:
        raise ValueError(f"the plan was made for dim = {plan.dim} but the loss has {potential.dim} parameters")
    domain = domain if domain is not None else loss.domain
    if domain is not None and domain.dim != plan.dim:
        raise ValueError(f"domain.dim = {domain.dim} does not match the parameter dimension {plan.dim}")
    key_run, key_init, key_purify = jax.random.split(key, 3)
    init = _initial_points(plan, domain, key_init)

    def potential_fn(z, *data):
        return potential(z["theta"], *data)

    # sharded: the data are arguments of the jitted loop, chains split along the mesh's "chains"
    chains = potential.chain_method(plan.num_chains, chain_method) if sharded else chain_method
    mcmc = MCMC(_kernel(plan, potential_fn, domain), num_warmup=0, num_samples=plan.num_steps,
                num_chains=plan.num_chains, thinning=plan.thinning, chain_method=chains,
                progress_bar=progress_bar, jit_model_args=sharded)
    init_params = {"theta": init if plan.num_chains > 1 else init[0]}
    if sharded:
        init_params = {"theta": potential.place_chains(init_params["theta"])}
    mcmc.run(key_run, *(potential.args() if sharded else ()), init_params=init_params)
    run = PrivateRun(mcmc, plan, potential, source)
    if plan.release == "purified_mean":
        run.purified = purify_estimate(plan, domain, run.posterior_mean(), key_purify)
    return run


def fit(loss: PerExampleLoss, X, y, *, eps: float, delta: float | None, target: str = "estimate",
        route: str = "auto",
        horizon: float = 1.0, num_chains: int | None = None, kernel: str = "langevin",
        friction: float | None = None, lam_rel: float | None = None, num_draws: int = 1000,
        domain: Domain | None = None, seed: int | None = None, key_impl: str = "threefry2x32",
        progress_bar: bool = True, mesh=None, **calibrate_kwargs: Any) -> PrivateRun:
    """Calibrate a plan for (eps, delta) — pure eps when ``delta`` is None — and sample it.

    The plan comes from :func:`dp_infer.calibrate.calibrate` (data independent: n, the
    dimension and the loss's declared constants only). ``X, y`` are checked against the loss's
    declared bounds before anything runs. ``seed=None`` (default): secret noise from the
    operating system; an integer seed makes the run reproducible by whoever holds it.

    ``num_chains`` defaults to 1 for the estimate and 4 for the posterior.
    ``target="posterior"`` plans for a number of effective draws of ``prior x exp(-beta L)``
    instead (:func:`dp_infer.fit_posterior.fit_posterior`: pass ``prior_precision`` and
    optionally ``ess``, ``preconditioner``, ``rows``, ...); ``"estimate"`` (default) optimises the
    excess-risk bound of the route's target.

    ``mesh`` (a :func:`dp_infer.sharding.data_mesh` or ``"auto"``: all devices), or ``X`` given
    as :class:`~dp_infer.sharding.ShardedRows` with ``y=None``, samples the same plan on
    row-sharded data (:mod:`dp_infer.sharding`; estimate target only).
    """
    sharded = mesh is not None or isinstance(X, ShardedRows)
    if target == "posterior":
        from .fit_posterior import fit_posterior

        if sharded:
            raise ValueError("mesh must be None for target='posterior' (sharded data run the estimate target)")

        if route not in ("auto", "trajectory"):
            raise ValueError(f"target='posterior' runs the trajectory route, got route={route!r}")
        return fit_posterior(loss, X, y, eps=eps, delta=delta, num_chains=4 if num_chains is None else num_chains,
                             kernel=kernel, friction=friction, seed=seed, key_impl=key_impl,
                             progress_bar=progress_bar, **calibrate_kwargs)
    if target != "estimate":
        raise ValueError(f"target must be one of ('estimate', 'posterior'), got {target!r}")
    num_chains = 1 if num_chains is None else num_chains
    if sharded:  # checked chunk by chunk while placed; n and d are all the plan sees
        X = X if isinstance(X, ShardedRows) else shard_rows(loss, X, y, None if mesh == "auto" else mesh)
        n, d = X.n, X.num_features
    else:
        X, y = loss.check_data(X, y)
        n, d = X.shape
    domain = domain if domain is not None else loss.domain
    plan = calibrate(loss.constants, n, loss.num_params(d), eps=eps,
                     delta=delta, route=route, domain=domain, horizon=horizon,
                     num_chains=num_chains, kernel=kernel, friction=friction, lam_rel=lam_rel,
                     num_draws=num_draws, **calibrate_kwargs)
    return sample(loss, X, y, plan, domain=domain, seed=seed, key_impl=key_impl,
                  progress_bar=progress_bar, mesh=mesh)
