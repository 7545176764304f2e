"""One call from data and a privacy target to private draws inside NumPyro's MCMC.

Data flows one way: data + loss + domain -> potential -> kernel -> draws; privacy flows beside
it: loss constants + target -> plan -> report. The plan never touches the data; the kernel never
decides privacy.
"""

from __future__ import annotations

from typing import Any

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_choice, check_delta, check_finite_array, check_target_epsilon
from ..domains import Domain
from ..kernels._common import check_extra_fields
from ..losses import PerExampleLoss
from ..routes.calibrate import calibrate
from ..routes.plan import SamplingPlan
from ..routes.posterior import DEFAULT_POSTERIOR_KERNEL
from ..potentials import gibbs_potential
from ..randomness import secret_key
from .preflight import check_sampling_options, refuse_unused_horizon
from .chains import plan_kernel, run_chains, site_potential
from .fit_model import check_feature_names
from .run import PrivateRun
from .driver import Hooks, Route, execute, register_route
from ..model.clipping import composed_event, split_budget
from .clip_count import clip_count_plan, release_loss_clip_count
from ..parallel.sharding import (ShardedPotential, ShardedRows, check_placed_rows, same_key_on_all_processes,
                                 shard_rows)

__all__ = ["PrivateRun", "sample", "fit", "TARGETS"]

#: what a run is planned for: an accurate private estimate, or draws of a tempered posterior
TARGETS = ("estimate", "posterior")



def _user_initial_points(init_params, plan: SamplingPlan, key) -> jax.Array:
    """Starts given by the caller: a callable ``key -> (chains, dim)`` or an array (dim,) /
    (chains, dim), which the caller declares data independent."""
    x = init_params(key) if callable(init_params) else init_params
    x = np.asarray(x, dtype=float)
    if x.shape == (plan.dim,):
        x = np.broadcast_to(x, (plan.num_chains, plan.dim))
    if x.shape != (plan.num_chains, plan.dim):
        raise ValueError(f"init_params must have shape ({plan.dim},) or ({plan.num_chains}, {plan.dim}) "
                         f"(chains, dim), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("init_params must be finite")
    if plan.init_law != "point":
        raise ValueError(f"the plan's route {plan.route!r} fixes the start law {plan.init_law!r} (its certificate "
                         "assumes it): init_params are refused")
    return jnp.asarray(x, dtype=jnp.result_type(float))


def purify_estimate(plan: SamplingPlan, domain: Domain | None, estimate, key) -> np.ndarray:
    """Project ``estimate`` onto the plan's bounded domain (float64) and purify it with the
    plan's purification parameters (seed 003 Algorithm 1): the pure route's only release."""
    from ..privacy.purification import PurificationParams, purify

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


def check_estimate_plan(plan) -> None:
    """Refuse (one line, before anything runs) a plan :func:`sample` cannot run: a posterior-mode plan
    (``plan.target == "posterior"``) needs its metric, clip and prior, which only
    :func:`dp_infer.infer.posterior.sample_posterior` / ``fit(..., target="posterior")`` apply; run here
    it would spend far more than its event says (issue 40)."""
    target = getattr(plan, "target", "estimate")
    if isinstance(plan, SamplingPlan) and target != "estimate":
        raise ValueError(f"plan: a target={target!r} plan is run by fit(..., target='posterior') or "
                         "dp_infer.infer.posterior.sample_posterior (a model's by fit(model=..., target='posterior')); "
                         "dp_infer.sample runs target='estimate' plans only")


def sample(loss: PerExampleLoss | None = None, X=None, y=None, plan: SamplingPlan | None = None, *,
           model=None, domain: Domain | None = None, seed: int | None = None, key_impl: str = "threefry2x32",
           progress_bar: bool = True, chain_method: str = "vectorized", theta0=None, prior_potential=None,
           init_params=None, extra_fields: tuple = (), debug: bool = False, mesh=None, **model_options) -> PrivateRun:
    """Run ``plan`` on the data: Gibbs potential at the plan's beta, our kernel, NumPyro MCMC.

    The initial point follows ``plan.init_law`` (data independent), unless ``init_params`` (an
    array ``(dim,)`` / ``(chains, dim)`` or a callable ``key -> (chains, dim)``, which you declare
    data independent) is given. ``prior_potential`` (data independent) is added to the potential.
    ``chain_method`` is NumPyro's (``"vectorized"``, ``"sequential"``, ``"parallel"``);
    ``extra_fields`` are collected as in NumPyro but limited to the state fields the guarantee
    covers (``potential_energy`` and ``grad_norm`` only with ``debug=True``, a non-private run).
    ``seed=None`` (default) draws the key from the operating system's entropy; an integer seed
    makes the noise reproducible by whoever holds it, and the report says so. ``model=`` (a NumPyro
    model instead of ``loss``) runs :func:`dp_infer.infer.fit_model.sample_model` with ``model_options``
    (``clip_norm``, ``init_strategy``, ``coords``, ``dims``, ...).
    ``mesh`` (a :func:`dp_infer.parallel.sharding.data_mesh` or ``"auto"``), or ``X`` given as
    :class:`~dp_infer.parallel.sharding.ShardedRows` (then ``y=None``), runs the same potential on
    row-sharded data in row blocks (:mod:`dp_infer.parallel.sharding`): same plan, same draws to float
    tolerance for the same key.
    """
    check_sampling_options(seed=seed, key_impl=key_impl, chain_method=chain_method)
    check_estimate_plan(plan)
    sharded = mesh is not None or isinstance(X, ShardedRows)
    if sharded and (model is not None or prior_potential is not None):
        raise ValueError("mesh must be None with model=... or prior_potential (sharded data run a per-example loss)")
    if model is not None:
        if loss is not None:
            raise ValueError("give either a loss or model=..., not both")
        from .fit_model import sample_model

        return sample_model(model, X, y, plan, sample=sample, domain=domain, seed=seed, key_impl=key_impl,
                            progress_bar=progress_bar, chain_method=chain_method, extra_fields=extra_fields,
                            debug=debug, **model_options)
    if model_options:
        raise ValueError(f"unexpected option(s) {sorted(model_options)}: they apply to model=... runs only")
    if not isinstance(plan, SamplingPlan):
        raise ValueError(f"plan must be a dp_infer.routes.plan.SamplingPlan, got {type(plan).__name__}")
    if chain_method not in ("vectorized", "sequential", "parallel"):
        raise ValueError(f"chain_method must be one of ('vectorized', 'sequential', 'parallel'), "
                         f"got {chain_method!r}")
    extra_fields = check_extra_fields(extra_fields, plan.kernel, bool(debug))
    key, source = secret_key(seed, impl=key_impl)
    feature_names = [str(c) for c in X.columns] if hasattr(X, "columns") else None
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
    if prior_potential is not None:
        potential = dataclasses.replace(potential, prior_potential=prior_potential)
    if potential.dim != plan.dim:
        raise ValueError(f"the plan was made for dim = {plan.dim} but the loss has {potential.dim} parameters")
    domain = domain if domain is not None else loss.domain
    if domain is not None and domain.dim != plan.dim:
        raise ValueError(f"domain.dim = {domain.dim} does not match the parameter dimension {plan.dim}")
    key_run, key_init, key_purify = jax.random.split(key, 3)
    if init_params is None:
        init = _initial_points(plan, domain, key_init)
    else:
        init = _user_initial_points(init_params, plan, key_init)

    kernel = plan_kernel(plan.kernel, site_potential(potential, "theta"), step_size=plan.step_size,
                         friction=plan.friction, domain=domain, debug=bool(debug))
    # sharded: the data are arguments of the jitted loop, chains split along the mesh's "chains"
    mcmc = run_chains(kernel, "theta", init, num_steps=plan.num_steps, thinning=plan.thinning,
                      num_chains=plan.num_chains, key=key_run,
                      chain_method=potential.chain_method(plan.num_chains, chain_method) if sharded else chain_method,
                      progress_bar=progress_bar, args=potential.args() if sharded else (),
                      extra_fields=tuple(f for f in extra_fields if f not in ("z", "diverging")),
                      place_chains=potential.place_chains if sharded else None)
    run = PrivateRun.from_mcmc(mcmc, plan, potential, source, feature_names=feature_names)
    if plan.release == "purified_mean":
        run.purified = purify_estimate(plan, domain, run.posterior_mean(), key_purify)
        # the upstream chain is covered only by (eps_a, delta_a): the run keeps the release alone
        run.theta = run.diverging = run.samples = run._mcmc = None
    return run


def refuse_estimate_options(route, horizon, lam_rel, domain, extra_fields, debug, why: str) -> None:
    """target='posterior' plans its own horizon and prior: the estimate mode's options are refused
    by name (``why`` says what replaces them), before anything is charged."""
    if route not in ("auto", "trajectory"):
        raise ValueError(f"target='posterior' runs the trajectory route, got route={route!r}")
    unused = [name for name, v, default in (("horizon", horizon, None), ("lam_rel", lam_rel, None),
                                            ("domain", domain, None), ("extra_fields", extra_fields, ()),
                                            ("debug", debug, False)) if v != default]
    if unused:
        raise ValueError(f"{unused[0]}: not used by target='posterior' (the horizon is planned from ess, {why})")


def _fit_model_posterior(model, X, y, *, route, horizon, lam_rel, domain, extra_fields, debug, num_chains,
                         **kwargs) -> PrivateRun:
    """``fit(model=..., target="posterior")``: the options the posterior mode does not use are refused,
    then :func:`dp_infer.infer.model_posterior.fit_model_posterior` runs."""
    from .model_posterior import fit_model_posterior

    refuse_estimate_options(route, horizon, lam_rel, domain, extra_fields, debug,
                            "the prior is the model's, the draws live on the model's unconstrained space")
    return fit_model_posterior(model, X, y, num_chains=4 if num_chains is None else num_chains, **kwargs)


def fit(loss: PerExampleLoss | None = None, X=None, y=None, *, eps: float, delta: float | None,
        model=None, target: str = "estimate", route: str = "auto", horizon: float | None = None,
        num_chains: int | None = None, kernel: str | None = None, friction: float | None = None,
        lam_rel: float | None = None, num_draws: int = 1000, domain: Domain | None = None,
        seed: int | None = None, key_impl: str = "threefry2x32", progress_bar: bool = True,
        chain_method: str = "vectorized", extra_fields: tuple = (), debug: bool = False,
        ledger=None, dataset_id: str = "default", mesh=None, feature_names=None,
        **calibrate_kwargs: Any) -> PrivateRun:
    """Calibrate a plan for (eps, delta) — pure eps when ``delta`` is None — and sample it.

    Give a per-example ``loss``, or a NumPyro ``model=`` (see :func:`dp_infer.infer.fit_model.fit_model`
    for its options: ``clip_norm``, ``smoothness``, ``init_strategy``, ``coords``, ``dims``,
    ``feature_names``, ...).
    The plan comes from :func:`dp_infer.routes.calibrate.calibrate` (data independent: n, the
    dimension and the loss's declared constants only). ``X, y`` are checked against the loss's
    declared bounds before anything runs. With ``ledger`` (a Ledger or its file) the plan's event
    is charged to ``dataset_id`` after planning and before sampling. ``seed=None`` (default):
    secret noise from the operating system; an integer seed makes the run reproducible by whoever
    holds it. ``chain_method``, ``extra_fields``, ``debug``: as :func:`sample`.

    A loss with ``clip_norm`` (:func:`dp_infer.losses.clipped_loss`) gets a private count of the rows its
    clip touches at the released posterior mean, as a model run does (``clip_count_share`` of the run's
    mu^2, default 0.05, composed into the plan's event and charged with it; 0 turns it off): it is in
    ``run.clipped_rows``, or the reason there is none in ``run.report()["clipped_rows_skipped"]``.

    ``horizon`` (Langevin time; default None: 1.0 where a route runs it) is run by the trajectory and
    pure routes; asked for explicitly and not run by the route chosen, it is refused before the charge.
    ``num_chains`` defaults to 1 for the estimate and 4 for the posterior; ``kernel`` to
    ``"langevin"``, except for a loss's posterior mode (``"underdamped"``,
    :data:`dp_infer.routes.posterior.DEFAULT_POSTERIOR_KERNEL`; a model's keeps ``"langevin"``, whose
    smaller step survives curvature the model's declared bounds miss, e.g. a centred hierarchy's funnel).
    ``target="posterior"`` plans for a number of effective draws of ``prior x exp(-beta L)``
    instead (:func:`dp_infer.infer.posterior.fit_posterior`: pass ``prior_precision`` and
    optionally ``ess``, ``preconditioner``, ``rows``, ...; with ``model=...``,
    :func:`dp_infer.infer.model_posterior.fit_model_posterior`: the model's own prior, ``ess``,
    ``clip_norm``, ``model_kwargs``, ``preconditioner="fisher"`` for the scores' private second
    moment as the metric, ...); ``"estimate"`` (default) optimises the excess-risk
    bound of the route's target (its draws are an estimate path, not a posterior).

    ``feature_names``: the names of X's columns (public; default: a DataFrame's column names), for a loss
    or a model: they name the coefficients in the summary, the ArviZ export and the intervals, and match
    new rows' columns by name in predictions (refused before anything is charged when they do not fit X).

    ``mesh`` (a :func:`dp_infer.parallel.sharding.data_mesh` or ``"auto"``: all devices), or ``X`` given
    as :class:`~dp_infer.parallel.sharding.ShardedRows` with ``y=None``, samples the same plan on
    row-sharded data (:mod:`dp_infer.parallel.sharding`; a per-example loss on the Langevin routes or
    ``target="posterior"``, :mod:`dp_infer.parallel.sharded_posterior`).
    """
    check_sampling_options(seed=seed, key_impl=key_impl, chain_method=chain_method, num_chains=num_chains)
    # checks every route shares, once, before any route is chosen or anything is charged
    eps = check_target_epsilon(eps)
    if delta is not None and delta != 0:  # None or 0: a pure-eps target
        delta = check_delta(delta)
    check_choice("target", target, TARGETS)
    if kernel is None:
        kernel = DEFAULT_POSTERIOR_KERNEL if (target == "posterior" and model is None) else "langevin"
    sharded = mesh is not None or isinstance(X, ShardedRows)
    if sharded and model is not None:
        raise ValueError("mesh must be None for model=... (sharded data run a per-example loss)")
    if model is not None:
        if loss is not None:
            raise ValueError("give either a loss or model=..., not both")
        if target == "posterior":
            return _fit_model_posterior(model, X, y, eps=eps, delta=delta, route=route, horizon=horizon,
                                        num_chains=num_chains, kernel=kernel, friction=friction, lam_rel=lam_rel,
                                        num_draws=num_draws, domain=domain, seed=seed, key_impl=key_impl,
                                        progress_bar=progress_bar, chain_method=chain_method,
                                        extra_fields=extra_fields, debug=debug, ledger=ledger,
                                        dataset_id=dataset_id, feature_names=feature_names, **calibrate_kwargs)
        if target != "estimate":
            raise ValueError(f"target must be one of ('estimate', 'posterior'), got {target!r}")
        from .fit_model import fit_model

        return fit_model(model, X, y, sample=sample, eps=eps, delta=delta, route=route, horizon=horizon,
                         num_chains=1 if num_chains is None else num_chains, kernel=kernel, friction=friction,
                         lam_rel=lam_rel, num_draws=num_draws, domain=domain, seed=seed, key_impl=key_impl,
                         progress_bar=progress_bar, chain_method=chain_method, extra_fields=extra_fields,
                         debug=debug, ledger=ledger, dataset_id=dataset_id, feature_names=feature_names,
                         **calibrate_kwargs)
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer PerExampleLoss (or pass model=...), got {type(loss).__name__}")
    if loss.behaviour.fit_refusal is not None:  # e.g. loss_from_model's likelihood without its prior
        raise ValueError(loss.behaviour.fit_refusal)
    count_share = calibrate_kwargs.pop("clip_count_share", None) if target == "estimate" else None
    names = check_feature_names(feature_names, X.num_features if isinstance(X, ShardedRows) else X)
    if target == "posterior":
        from .posterior import fit_posterior

        refuse_estimate_options(route, horizon, lam_rel, domain, extra_fields, debug,
                                "the prior is prior_precision, the draws live on R^d")
        run = fit_posterior(loss, X, y, eps=eps, delta=delta, num_chains=4 if num_chains is None else num_chains,
                            kernel=kernel, friction=friction, seed=seed, key_impl=key_impl, ledger=ledger,
                            dataset_id=dataset_id, progress_bar=progress_bar, chain_method=chain_method,
                            num_draws=num_draws, mesh=mesh, **calibrate_kwargs)
        if names is not None and not run.feature_names:  # labelling only (public names)
            run.feature_names = names
        return run
    if target != "estimate":
        raise ValueError(f"target must be one of ('estimate', 'posterior'), got {target!r}")
    num_chains = 1 if num_chains is None else num_chains
    if loss.constants.smoothness is None and route in ("auto", "proximal"):
        # no smoothness: Langevin's step-size theory does not apply -> the proximal sampler
        from .proximal import fit_proximal

        if sharded:
            raise ValueError("mesh must be None for a loss without smoothness (the proximal route runs on one device)")

        if (horizon, kernel, friction, num_draws) != (None, "langevin", None, 1000):
            raise ValueError("horizon, kernel, friction and num_draws apply to the Langevin routes, not to the "
                             "proximal route that runs losses without smoothness")
        if count_share:
            raise ValueError("clip_count_share: the proximal route (a loss without smoothness) releases no clipped-row "
                             "count; declare the clipped loss's smoothness for the Langevin routes, or drop it")
        run = fit_proximal(loss, X, y, eps=eps, delta=delta, num_chains=num_chains, lam_rel=lam_rel,
                           domain=domain, seed=seed, key_impl=key_impl, ledger=ledger, dataset_id=dataset_id,
                           **calibrate_kwargs)
        if names is not None and not run.feature_names:  # labelling only (public names)
            run.feature_names = names
        return run
    if sharded:  # checked chunk by chunk while placed; n and d are all the plan sees
        if isinstance(X, ShardedRows):
            check_placed_rows(loss, X)  # placed by shard_rows, for this loss's labels and row norm
        else:
            X = shard_rows(loss, X, y, None if mesh == "auto" else mesh)
        n, d = X.n, X.num_features
    else:
        X, y = loss.check_data(X, y)
        n, d = X.shape
    count_share, count_skipped = clip_count_plan(loss, delta, count_share, sharded)
    eps_run, mu_count = split_budget(eps, delta, count_share) if count_share > 0 else (eps, 0.0)
    public = estimate_public(loss, n, loss.num_params(d), eps=eps_run, delta=delta, route=route,
                             domain=domain if domain is not None else loss.domain,
                             horizon=1.0 if horizon is None else horizon,
                             num_chains=num_chains, kernel=kernel, friction=friction, lam_rel=lam_rel,
                             num_draws=num_draws, calibrate_kwargs=calibrate_kwargs,
                             sample_options=dict(seed=seed, key_impl=key_impl, progress_bar=progress_bar,
                                                 chain_method=chain_method, extra_fields=extra_fields, debug=debug,
                                                 mesh=mesh))
    if mu_count > 0:  # composed into the plan's event (charged with the run), released after the draws
        public["clip_count"] = {"eps": eps, "mu": mu_count, "seed": seed, "key_impl": key_impl}

    def label(run, keeper, receipt):
        if names is not None:
            run.feature_names = list(names)
        if count_skipped is not None:
            run.report_extras["clipped_rows_skipped"] = count_skipped
        if mu_count > 0:
            release_loss_clip_count(run, loss, X, y, public["clip_count"])

    return execute(ESTIMATE_ROUTE, public, (loss, X, y), ledger=ledger, dataset_id=dataset_id,
                   hooks=Hooks(planned=lambda plan: (check_extra_fields(extra_fields, plan.kernel, bool(debug)),
                                                     refuse_unused_horizon(horizon, plan)),
                               finish=label, step="fit: labelling the draws"))



def estimate_public(loss: PerExampleLoss, n: int, dim: int, *, eps, delta, route="auto", domain=None,
                    horizon=1.0, num_chains=1, kernel="langevin", friction=None, lam_rel=None, num_draws=1000,
                    calibrate_kwargs: dict | None = None, sample_options: dict | None = None) -> dict:
    """The public inputs of the estimate route (:data:`ESTIMATE_ROUTE`): n, the dimension, the
    loss's declared constants, the target and the options -- nothing read from the rows.
    ``domain`` defaults to the loss's own."""
    domain = domain if domain is not None else loss.domain
    return {"constants": loss.constants, "n": int(n), "dim": int(dim),
            "calibrate": dict(eps=eps, delta=delta, route=route, domain=domain, horizon=horizon,
                              num_chains=num_chains, kernel=kernel, friction=friction, lam_rel=lam_rel,
                              num_draws=num_draws, **(calibrate_kwargs or {})),
            "sample": dict(sample_options or {}, domain=domain)}


def _plan_estimate(public) -> SamplingPlan:
    plan = calibrate(public["constants"], public["n"], public["dim"], **public["calibrate"])
    count = public.get("clip_count")
    if count:  # a clipped loss's private clipped-row count, charged with the run (as a model run's)
        plan = dataclasses.replace(plan, eps=count["eps"], event=composed_event(plan.event, count["mu"]), options=())
    return plan


def _run_estimate(plan: SamplingPlan, data, public) -> PrivateRun:
    loss, X, y = data
    return sample(loss, X, y, plan, **public["sample"])


#: the estimate mode's route (trajectory, stationary, last iterate, pure): :func:`dp_infer.routes.calibrate.calibrate`
#: plans, :func:`sample` runs
ESTIMATE_ROUTE = register_route(Route("estimate", _plan_estimate, _run_estimate,
                                      label=lambda plan: f"dp_infer fit {plan.route}"))
