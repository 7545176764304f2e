"""One call for the posterior mode: (release a second moment) -> plan -> preconditioned chains.

Order of work: check every input (before anything touches the data) -> release the
preconditioner's second moment if it is private (a Gaussian mechanism, part of the same
(eps, delta) target) -> plan (data independent given that release) -> run the kernel on the
reparametrised potential ``V(phi) = U(C phi)`` -> map the draws back, ``theta = C phi``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_choice, check_delta, check_target_epsilon
from .preflight import check_sampling_options
from .run import PrivateRun
from .driver import Hooks, Route, execute, register_route
from .chains import plan_kernel, run_chains, site_potential
from ..losses import PerExampleLoss
from ..routes import metric_adaptation
from ..routes.plan import SamplingPlan
from ..routes.posterior import (DEFAULT_ESS, DEFAULT_MIXING_RATE, DEFAULT_POSTERIOR_KERNEL, plan_posterior,
                                preconditioner_chol)
from ..losses.metric_clip import clipped_potential, resolve_clip_radius
from ..potentials import GibbsPotential, gibbs_potential
from ..routes.preconditioning import SecondMoment, pending_second_moment, prior_second_moment, second_moment_row_bound
from ..releases.second_moment import private_second_moment, private_second_moment_of_gram, public_second_moment
from ..privacy.conversions import gdp_mu
from ..model.clipping import count_part_appended, split_budget
from .clip_count import clip_count_plan, release_loss_clip_count
from ..routes.newton_release import (check_interval_curvature, default_interval_share, last_gradient_mu,
                                     newton_releasable, weight_radius)
from ..releases.newton import release_newton_statistics
from ..routes.public_rows import public_interval_width_forecast, public_release_metric
from ..randomness import secret_key
from ..parallel.sharding import ShardedRows, check_placed_rows, same_key_on_all_processes, shard_rows
from ..parallel.sharded_posterior import ShardedMetricPotential, sharded_second_moment

__all__ = ["fit_posterior", "sample_posterior", "PosteriorRun", "PRECONDITIONERS", "released_draws", "warn_if_diverged"]

PRECONDITIONERS = ("private", "public", "prior")
#: a run whose max R-hat exceeds this did not mix (ArviZ's strict threshold is 1.01; this is the plain failure)
UNMIXED_RHAT = 1.1
#: a run whose min bulk ESS is below this share of the planned ESS did not mix
UNMIXED_ESS_SHARE = 0.2


def warn_if_unmixed(run) -> None:
    """Warn (one line) and keep in the report when a posterior run's chains did not mix."""
    msg = run.mixing_verdict()
    if msg is not None:
        # attributed to the caller's line, however deep the driver called the route
        warnings.warn(msg, UserWarning, skip_file_prefixes=(str(Path(__file__).parents[1]),))
        run.report_extras["mixing_warning"] = msg


def warn_if_diverged(theta, diverging) -> None:
    """Say so, loudly, when a chain diverged (a non-finite draw, or the kernel's theta-only flag): its draws
    are not a sample of the target and R-hat / ESS come out NaN. Reads the released draws only."""
    if theta is None:
        return
    bad = ~np.all(np.isfinite(np.asarray(theta, dtype=np.float64)), axis=-1)
    if diverging is not None and np.shape(diverging) == bad.shape:
        bad = bad | np.asarray(diverging, dtype=bool)
    chains = int(np.sum(np.any(bad, axis=-1)))
    if chains:
        warnings.warn(f"{chains} of {bad.shape[0]} chains diverged ({100 * bad.mean():.0f}% of the draws are flagged): "
                      "their draws are not a sample of the target and R-hat / ESS are NaN. The step was planned for a "
                      "curvature the target exceeds: declare a larger smoothness (a smaller step), or use "
                      "kernel='langevin' (a step of order 1 / M instead of 1 / sqrt(M))", RuntimeWarning, stacklevel=3)


def released_draws(mcmc, plan: SamplingPlan) -> tuple[np.ndarray, np.ndarray | None]:
    """``theta = C phi`` (post-processing; C includes a model run's prior scales) and the divergences."""
    phi = np.asarray(mcmc.get_samples(group_by_chain=True)["phi"], dtype=np.float64)
    div = (mcmc.get_extra_fields(group_by_chain=True) or {}).get("diverging")
    return phi @ preconditioner_chol(plan).T, None if div is None else np.asarray(div, dtype=bool)


@dataclasses.dataclass(eq=False)
class PosteriorRun(PrivateRun):
    """A posterior-mode run: the kernel ran on ``phi``; the released draws are ``theta = C phi`` (held in
    ``theta``). The report adds the achieved bulk ESS and R-hat beside the predicted ones."""

    result_kind = "posterior_run"

    def __post_init__(self):
        warn_if_diverged(self.theta, self.diverging)

    def achieved_mixing(self) -> dict:
        """ArviZ bulk ESS (min) and R-hat (max) of the released draws after burn-in (free)."""
        from ..diagnostics import check_mixing

        mix = check_mixing({"theta": self.draws()})
        return {"min_ess_bulk": float(mix.min_ess_bulk), "max_rhat": float(mix.max_rhat),
                "draws_per_chain": int(mix.num_draws)}

    def report(self) -> dict:
        d = super().report()
        d["posterior"]["achieved"] = self.achieved_mixing()
        return d

    def mixing_verdict(self) -> str | None:
        """One line when the chains did not mix (max R-hat above :data:`UNMIXED_RHAT` or min bulk ESS
        below :data:`UNMIXED_ESS_SHARE` of the planned ESS), saying what to change; None when they did.
        Post-processing of the released draws (free)."""
        if self.theta is None or not np.all(np.isfinite(self.theta)):
            return None  # a diverged run says so itself (warn_if_diverged)
        ach = self.achieved_mixing()
        planned = float(self.plan.posterior.ess_target if self.plan.posterior is not None else 0)
        if ach["max_rhat"] <= UNMIXED_RHAT and ach["min_ess_bulk"] >= UNMIXED_ESS_SHARE * planned:
            return None
        return (f"the chains did not mix: max R-hat {ach['max_rhat']:.3f}, min bulk ESS {ach['min_ess_bulk']:.0f} of "
                f"{planned:.0f} planned; the tempered draws (and their credible intervals) are not reliable: declare a "
                "smaller mixing_rate (the plan runs longer), reparametrise a hierarchy (non-centred), or use "
                "preconditioner='fisher' for a model")

    def released_segment(self, mcmc) -> tuple[np.ndarray, np.ndarray | None]:
        """The kernel ran on ``phi``: :func:`released_draws` of this run's plan."""
        return released_draws(mcmc, self.plan)


class ClippedPotential:
    """The clipped chain's target ``U(theta)`` (a callable; holds the private data, never saved)."""

    def __init__(self, U, description: dict, loss=None):
        self._U, self._description = U, description
        self.loss = loss  # the sampled loss (its behaviour: the run's prediction rule)

    def __call__(self, theta):
        return self._U(theta)

    def describe(self) -> dict:
        return dict(self._description)


def _prior_term(precision: np.ndarray):
    lam = jnp.asarray(precision, dtype=jnp.float32)

    def prior_potential(theta):
        return 0.5 * jnp.sum(lam * theta * theta)

    return prior_potential


def _run_chains(plan: SamplingPlan, V, *, step_size: float, num_steps: int, thinning: int, init_phi, key,
                progress_bar: bool, chain_method: str, data: tuple = (), place_chains=None):
    """K chains of ``num_steps`` steps on ``V(phi, *data)`` from ``init_phi`` (shape (K, d)); returns the
    MCMC and the kept ``phi`` states, shape (K, draws, d). ``data``: a sharded potential's run
    arguments (passed to NumPyro's jitted loop, never closed over); ``place_chains``: its layout of
    the initial points."""
    kernel = plan_kernel(plan.kernel, site_potential(V, "phi"), step_size=step_size, friction=plan.friction)
    mcmc = run_chains(kernel, "phi", jnp.asarray(init_phi, dtype=jnp.float32), num_steps=num_steps,
                      thinning=thinning, num_chains=plan.num_chains, key=key, chain_method=chain_method,
                      progress_bar=progress_bar, args=data, place_chains=place_chains)
    return mcmc, np.asarray(mcmc.get_samples(group_by_chain=True)["phi"], dtype=np.float64)


def _metric_potential(loss, data, plan: SamplingPlan, C, lam: np.ndarray, **described):
    """``(V, run arguments, potential)`` of the plan's target in the metric ``C``: the Gibbs potential
    reparametrised, or the clipped one when the plan clips (levels ``tau / ||C^T x||`` of THIS
    metric), on one device (``data = (X, y)``) or on the rows' mesh (``data`` a
    :class:`~dp_infer.parallel.sharding.ShardedRows`). ``potential`` (kept by the run, never saved)
    is ``U(theta, *arguments)`` and describes the target (plus ``described``)."""
    tau = None if plan.posterior is None else plan.posterior.clip_tau
    desc = {"kind": "gibbs" if tau is None else "gibbs, per-example gradients clipped in the preconditioner's "
                                                  "metric (clipped loss, dp_infer.losses.metric_clip)",
            "beta": plan.beta, "n": plan.n, "dim": plan.dim, "loss": loss.describe()}
    if tau is not None:
        desc.update(clip_tau=tau, clip_radius=plan.posterior.clip_radius,
                    gradient_sensitivity_phi=plan.beta * plan.sensitivity)
    desc.update(described)
    if isinstance(data, ShardedRows):
        if tau is None:  # the fields GibbsPotential.describe() gives on one device
            desc.update(lam=0.0, psi=None, gradient_sensitivity=plan.beta * loss.constants.grad_diff / plan.n)
        pot = ShardedMetricPotential(loss, data, plan.beta, np.asarray(C), lam, tau, description=desc)
        return pot.V, pot.args(), pot
    X, y = data
    if tau is None:
        potential = GibbsPotential(loss, X, y, plan.beta, prior_potential=_prior_term(lam))
        return potential.reparametrised(C), (), potential
    U, V = clipped_potential(loss, X, y, beta=plan.beta, C=C, tau=tau, prior_precision=lam)
    return V, (), ClippedPotential(U, desc, loss)


def _adapted_run(loss, data, plan: SamplingPlan, *, key, progress_bar: bool, chain_method: str):
    """The ``adapt_metric`` plan, driven by :mod:`dp_infer.routes.metric_adaptation` (``init / phase /
    update / final``): burn-in and window 1 in the planned metric, each next window in the metric
    adapted from the previous window's draws, then the sampling phase in the metric adapted from the
    last window's. This function only runs the chains each phase asks for.

    Every phase runs at the plan's beta with gradients clipped to ``||C^T g|| <= tau`` in its own
    metric ``C``, so each step's sensitivity is ``2 tau / n`` whatever ``C`` is, and the plan's event
    (the whole time, all phases) covers the run. Each metric is post-processing of released draws.
    Returns ``(mcmc, phi, plan', potential)``: ``plan'`` is the plan of the final phase (its metric,
    step and steps) with the phases' record in ``posterior.adaptation``; its event is the plan's.
    ``data``: ``(X, y)`` or the rows placed on a mesh (:func:`_metric_potential`).
    """
    lam = np.asarray(plan.prior_precision)
    keys = jax.random.split(key, metric_adaptation.num_phases(plan))
    state = metric_adaptation.init(plan)
    while True:
        spec = metric_adaptation.phase(plan, state)
        C = state.chol
        V, args, potential = _metric_potential(loss, data, plan, C, lam, metric="adapted from the chains' draws")
        init_phi = np.linalg.solve(C, state.theta_last.T).T
        mcmc, phi = _run_chains(plan, V, step_size=spec.step_size, num_steps=spec.num_steps, thinning=spec.thinning,
                                init_phi=init_phi, key=keys[spec.index], progress_bar=progress_bar,
                                chain_method=chain_method, data=args, place_chains=getattr(potential, "place_chains", None))
        state = metric_adaptation.update(plan, state, spec, phi @ C.T)
        if spec.final:
            return mcmc, phi, metric_adaptation.final(plan, state), potential


def sample_posterior(loss: PerExampleLoss, X, y, plan: SamplingPlan, *, key, source,
                     progress_bar: bool = True, chain_method: str = "vectorized") -> PrivateRun:
    """Run a posterior-mode ``plan``: chains start at the prior mean (0), data independent.

    ``X`` given as :class:`~dp_infer.parallel.sharding.ShardedRows` (with ``y=None``) runs the same
    plan on the rows' mesh (:mod:`dp_infer.parallel.sharded_posterior`)."""
    if not isinstance(plan, SamplingPlan) or plan.target != "posterior":
        raise ValueError("plan must be a posterior-mode SamplingPlan (dp_infer.routes.posterior.plan_posterior)")
    if isinstance(X, ShardedRows):
        if y is not None:
            raise ValueError("y must be None when X is ShardedRows (the labels were placed with the rows)")
        data, n, dim = X, X.n, loss.num_params(X.num_features)
    else:
        base = gibbs_potential(loss, X, y, beta=plan.beta)
        data, n, dim = (base.X, base.y), base.n, base.dim
    if n != plan.n or dim != plan.dim:
        raise ValueError(f"the plan was made for n = {plan.n}, dim = {plan.dim}; the data give "
                         f"n = {n}, dim = {dim}: re-plan")
    lam = np.asarray(plan.prior_precision)
    planned = plan
    if plan.posterior.adaptation is not None:
        # the clipped target is the final metric's (its clip levels): its potential is kept for extend()
        mcmc, phi, plan, potential = _adapted_run(loss, data, plan, key=key, progress_bar=progress_bar,
                                                  chain_method=chain_method)
    else:
        V, args, potential = _metric_potential(loss, data, plan, preconditioner_chol(plan), lam)
        zero = np.zeros((plan.num_chains, plan.dim))
        mcmc, phi = _run_chains(plan, V, step_size=plan.step_size, num_steps=plan.num_steps,
                                thinning=plan.thinning, init_phi=zero, key=key, progress_bar=progress_bar,
                                chain_method=chain_method, data=args,
                                place_chains=getattr(potential, "place_chains", None))
    div = (mcmc.get_extra_fields(group_by_chain=True) or {}).get("diverging")
    run = PosteriorRun(plan, phi @ preconditioner_chol(plan).T, None if div is None else np.asarray(div, dtype=bool),
                       source, potential.describe(), _mcmc=mcmc, _potential=potential)
    # the plan made before sampling (data independent); with adapt_metric, run.plan is the final phase's,
    # whose metric and steps are post-processing of released draws
    run.planned = planned
    return run


def fit_posterior(loss: PerExampleLoss, X, y, *, eps: float, delta: float, prior_precision,
                  ess: int = DEFAULT_ESS, num_chains: int = 4, preconditioner: str | SecondMoment = "private",
                  precond_share: float = 0.1, X_public=None, rows: Any = None, kernel: str = DEFAULT_POSTERIOR_KERNEL,
                  friction: float | None = None, mixing_rate: float = DEFAULT_MIXING_RATE,
                  curvature: float | None = None, preconditioner_curvature: float | None = None,
                  seed: int | None = None, key_impl: str = "threefry2x32", ledger=None,
                  dataset_id: str = "default", progress_bar: bool = True, chain_method: str = "vectorized",
                  clip_radius: float | str | None = "auto", adapt_metric: bool | None = None, mesh=None,
                  interval_share: float | None = None, clip_count_share: float | None = None,
                  interval_curvature: str = "private",
                  **plan_kwargs) -> PrivateRun:
    """Private draws of ``N(0, diag(1/prior_precision)) x exp(-beta L)`` planned for ``ess``
    effective draws over ``num_chains`` chains at (eps, delta) in total.

    ``preconditioner``: ``"private"`` (X'X/n released with a ``precond_share`` of the GDP budget,
    ``mu_S^2 = share mu^2``), ``"public"`` (from ``X_public``, declared public), ``"prior"`` (no
    data), or a :class:`~dp_infer.routes.preconditioning.SecondMoment` you released yourself (its event is
    charged to this run). ``rows``: the schema's admissible rows (sensitivity over the rows that can
    occur; every row of X must be admissible). ``kernel``: ``"underdamped"`` by default
    (:data:`~dp_infer.routes.posterior.DEFAULT_POSTERIOR_KERNEL`), ``"langevin"`` for the overdamped one.
    ``seed=None``: secret noise. ``ledger`` (a Ledger or
    its file): the whole (eps, delta) of the run -- path and second-moment release composed -- is
    charged to ``dataset_id`` after planning and before anything touches the private data.
    ``clip_radius``: per-example gradients clipped in the preconditioner's metric
    (:func:`dp_infer.routes.posterior.plan_posterior`); ``"auto"`` is
    ``DEFAULT_CLIP_FACTOR * sqrt(dim)`` for the built-in GLM losses that have a clipped closed form
    (:data:`dp_infer.losses.metric_clip.CLIPPABLE_LOSSES`) and no clip for the others (the
    default: on Adult at eps = 1 it buys 14x in beta, intervals 2.8x the untempered posterior's
    instead of 27x, docs/results.md); ``None``: no clip (the draws target the loss's own Gibbs
    posterior, at a much smaller beta, in about a seventh of the wall time). ``adapt_metric``: adapt
    the metric from the chains' own draws (:func:`dp_infer.routes.posterior.plan_posterior`); default
    ``None`` = on whenever the gradients are clipped (it is what makes the clipped chain mix: on Adult
    at eps = 1, min bulk ESS 506 of 400 planned with the kinetic kernel, against 45 without).
    ``mesh`` (a :func:`dp_infer.parallel.sharding.data_mesh` or ``"auto"``: all devices), or ``X`` given
    as :class:`~dp_infer.parallel.sharding.ShardedRows` with ``y=None``: the same plan on row-sharded
    data (:mod:`dp_infer.parallel.sharded_posterior`; the private second moment is summed on the
    devices that hold the rows). The rows are checked and placed before anything is charged;
    ``rows=`` needs the raw rows (pass X as an array with ``mesh=``).
    ``interval_share``: the share of ``mu^2`` for the interval release made after sampling (Newton
    steps of a weighted data loss from the draws' mean, :mod:`dp_infer.routes.newton_release`),
    from which :meth:`~dp_infer.infer.run.PrivateRun.intervals` reads intervals for theta that say
    what the data say; ``None`` (default): :data:`~dp_infer.routes.newton_release.DEFAULT_INTERVAL_SHARE`
    for a generalised linear loss on one device where the released curvature would carry
    information (:func:`~dp_infer.routes.newton_release.default_interval_share`), else 0 (no
    release: the run reports its tempered draws only, and ``intervals()`` says why).
    ``interval_curvature``: ``"private"`` (default: the release's curvatures and scores' second moment are
    released from the rows) or ``"public"``: computed from ``X_public`` (feature rows you declare public,
    with X's columns, drawn from the private rows' distribution) at each stage's point, so only the
    gradients are released and the whole interval share goes to them; no curvature signal-to-noise
    rule applies (on Adult at eps = 1 the private curvature's rule leaves the run without intervals).
    Needs a loss whose curvature does not depend on the label (``loss.behaviour.label_free_curvature``:
    logistic, Poisson; not Huber); the intervals' scores' second moment is then model-based, so they
    assume a correctly specified model (:mod:`dp_infer.routes.newton_release`). Refused by name before
    anything is charged otherwise.
    ``clip_count_share``: for a loss with its own ``clip_norm`` (:func:`dp_infer.losses.clipped_loss`,
    whose clip the chains run), the share of ``mu^2`` spent on a private count of the rows that clip
    touches at the released posterior mean, as the estimate mode's
    (:func:`dp_infer.infer.clip_count.clip_count_plan`: default
    :data:`~dp_infer.model.clipping.DEFAULT_COUNT_SHARE`, 0 turns it off, none on row-sharded data):
    taken out of the target first (the second moment's and the interval release's shares are of the
    rest), composed into the plan's event, kept in ``run.clipped_rows`` or the reason there is none
    in ``run.report()["clipped_rows_skipped"]``.
    """
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss, got {type(loss).__name__}")
    check_sampling_options(seed=seed, key_impl=key_impl, chain_method=chain_method, num_chains=num_chains)
    eps = check_target_epsilon(eps)
    delta = check_delta(delta)
    # (a clipped loss only) the count's share, refused by name before anything is charged
    count_share, count_skipped = clip_count_plan(loss, delta, clip_count_share,
                                                 mesh is not None or isinstance(X, ShardedRows))
    if not isinstance(preconditioner, SecondMoment):
        check_choice("preconditioner", preconditioner, PRECONDITIONERS)
    if not 0 < precond_share < 1:
        raise ValueError(f"precond_share must lie in (0, 1), got {precond_share!r}")
    X, y, sharded = _checked_rows(loss, X, y, rows=rows, mesh=mesh, num_chains=num_chains,
                                  chain_method=chain_method)
    n, num_features = (X.n, X.num_features) if sharded else X.shape
    dim = loss.num_params(num_features)
    if preconditioner == "public" and X_public is None:
        raise ValueError("preconditioner='public' needs X_public (rows you declare public)")
    # the interval release's curvature from public feature rows: checked by name before anything is charged
    public_rows = check_interval_curvature(interval_curvature, loss, num_features, X_public, sharded=sharded)
    # the clipped-row count's share comes out of the target first: the run is planned at the rest
    eps_run, mu_count = split_budget(eps, delta, count_share) if count_share > 0 else (eps, 0.0)
    mu = gdp_mu(eps_run, delta)
    sm, R2 = _planned_second_moment(preconditioner, loss, X_public, rows, n=n, num_features=num_features,
                                    dim=dim, mu=math.sqrt(precond_share) * mu)
    plan_kw = dict(prior_precision=prior_precision, ess=ess, num_chains=num_chains, rows=rows, kernel=kernel,
                   friction=friction, mixing_rate=mixing_rate, curvature=curvature,
                   preconditioner_curvature=preconditioner_curvature,
                   clip_radius=resolve_clip_radius(clip_radius, loss, dim), **plan_kwargs)
    plan_kw["adapt_metric"] = (plan_kw["clip_radius"] is not None) if adapt_metric is None else adapt_metric
    interval_share, skipped = _interval_share(loss, interval_share, num_features, sharded=sharded, n=n, mu=mu,
                                              curvature=interval_curvature)
    plan_kw["interval_share"] = interval_share
    plan_kw["interval_curvature"] = interval_curvature
    if public_rows is not None and interval_share and plan_kw.get("public_interval_width") is None:
        # the plan's note: the intervals' width read from the public rows (free), once for both plans
        plan_kw["public_interval_width"] = public_interval_width_forecast(loss, public_rows, prior_precision, n,
                                                                          math.sqrt(interval_share) * mu)
    public = {"loss": loss, "n": n, "dim": dim, "eps": eps_run, "delta": delta, "second_moment": sm, "plan": plan_kw,
              "private_second_moment": preconditioner == "private", "row_bound": R2, "sharded": sharded,
              "seed": seed, "key_impl": key_impl, "progress_bar": progress_bar, "chain_method": chain_method,
              "interval_release_skipped": skipped, "interval_public_rows": public_rows}
    if mu_count > 0:  # composed into the plan's event (charged with the run), released after the draws
        public["clip_count"] = {"eps": eps, "mu": mu_count, "share": count_share, "seed": seed, "key_impl": key_impl}

    def count(run, keeper, receipt):
        if count_skipped is not None:
            run.report_extras["clipped_rows_skipped"] = count_skipped
        if mu_count > 0:
            if not np.all(np.isfinite(run.posterior_mean())):
                run.report_extras["clipped_rows_skipped"] = (
                    "no private count of the clipped rows was made: the chains diverged (non-finite draws); the "
                    "reserved count was not spent")
                return
            release_loss_clip_count(run, loss, X, y, public["clip_count"])

    return execute(POSTERIOR_ROUTE, public, (X, y), ledger=ledger, dataset_id=dataset_id,
                   hooks=Hooks(finish=count, step="fit(target='posterior'): the private clip count"))


def _checked_rows(loss: PerExampleLoss, X, y, *, rows, mesh, num_chains: int, chain_method: str):
    """``(X, y, sharded)``: the private rows checked against the loss (and, given ``rows``, the schema's
    admissible set) and, on a mesh, placed on its devices (``y`` then None: the labels travel with the rows),
    all before anything is charged. Refuses by name: labels beside :class:`ShardedRows`, ``rows=`` without the
    raw rows, rows placed for another loss, a mismatched or inadmissible row, 'parallel' chains on a mesh."""
    sharded = mesh is not None or isinstance(X, ShardedRows)
    raw = X  # the rows as given (the admissible-rows check reads them)
    if isinstance(X, ShardedRows):
        if y is not None:
            raise ValueError("y must be None when X is ShardedRows (the labels were placed with the rows)")
        if rows is not None:
            raise ValueError("rows: the admissible-rows check needs the raw rows; pass X as an array with mesh= "
                             "(the rows are checked, then placed)")
        check_placed_rows(loss, X)  # rows placed for another loss (row norm, labels): refused before the charge
    elif sharded:  # checked chunk by chunk while placed (shard_rows), before anything is charged
        X, y = shard_rows(loss, X, y, None if mesh == "auto" else mesh), None
    else:
        X, y = loss.check_data(X, y)
        raw = X
    num_features = X.num_features if sharded else X.shape[1]
    if sharded:
        X.chain_method(num_chains, chain_method)  # refuses 'parallel' on a mesh
    if rows is not None:
        if int(rows.dim) != num_features:
            raise ValueError(f"rows have dim {rows.dim} but X has {num_features} columns")
        if not bool(np.all(rows.contains(np.asarray(raw, dtype=np.float64)))):
            raise ValueError("X: some rows are not admissible rows of the schema (read the data through the "
                             "schema's reader, which maps every row into the admissible set)")
    return X, y, sharded


def _planned_second_moment(preconditioner, loss: PerExampleLoss, X_public, rows, *, n: int, num_features: int,
                           dim: int, mu: float):
    """``(second_moment, row_bound)`` the plan is made with: the user's :class:`SecondMoment`, the prior's,
    the public rows', or (``"private"``) a stand-in that carries the release's event at GDP ``mu`` and no matrix
    (the release is made after the charge), with the rows' squared-norm bound ``row_bound`` (None otherwise)."""
    if isinstance(preconditioner, SecondMoment):
        return preconditioner, None
    if preconditioner == "prior":
        return prior_second_moment(), None
    if preconditioner == "public":
        return public_second_moment(X_public), None
    R2 = second_moment_row_bound(loss, rows)
    if not math.isfinite(R2):
        raise ValueError("preconditioner='private' needs a finite row bound (rows= or a loss row_norm)")
    if dim != num_features:  # refused here: the stand-in has no matrix, so the plan cannot see it
        raise ValueError(f"preconditioner='private' releases the {num_features} x {num_features} second moment "
                         f"of the rows, but the model has {dim} parameters: use preconditioner='prior'")
    # plan with a stand-in that carries the release's event (no data), so the whole run is validated and its
    # composed event charged before any private computation
    return pending_second_moment(n, num_features, max_sq_norm=R2, mu=mu), R2


def _interval_share(loss: PerExampleLoss, interval_share, num_features: int, *, sharded: bool, n: int, mu: float,
                    curvature: str):
    """``(share, reason_skipped)`` of the run's ``mu^2`` for the interval release: the default
    (:func:`~dp_infer.routes.newton_release.default_interval_share`, with its reason where it is 0) when
    ``interval_share`` is None, else the share given, refused by name where the release cannot run."""
    if interval_share is None:
        return default_interval_share(loss, num_features, sharded=sharded, n=n, mu=mu, curvature=curvature)
    if interval_share and (sharded or not newton_releasable(loss, num_features)):
        raise ValueError("interval_share: the interval release needs a generalised linear loss with one parameter "
                         "per feature, on one device; pass interval_share=0")
    return interval_share, None


def _with_clip_count(plan: SamplingPlan, public) -> SamplingPlan:
    """``plan`` (made at the run's share of the target) with a clipped loss's private clipped-row count
    appended to its event as one more Gaussian part: the event and ``eps`` are the whole target's."""
    count = public.get("clip_count")
    if not count:
        return plan
    note = (f"clipped-row count: {count['share']:g} of the target's mu^2 (mu = {count['mu']:.4g}) taken out first, "
            f"the run planned at eps = {plan.eps:.6g}; the number of rows whose per-example gradient exceeds the "
            "loss's clip_norm at the released posterior mean, Gaussian noise sd 1 / mu")
    return dataclasses.replace(plan, eps=count["eps"], event=count_part_appended(plan.event, count["mu"]),
                               assumptions=tuple(plan.assumptions) + (note,))


def _plan_posterior_route(public) -> SamplingPlan:
    """The posterior mode's plan made with the second moment's stand-in (no data, no budget): it
    validates the whole run, and its event -- the second-moment release, the path and the interval
    release composed -- is what the ledger is charged. The plan made once the second moment is
    released keeps the path within this plan's path mu (``path_budget``), so it never spends more."""
    return _with_clip_count(plan_posterior(public["loss"], public["n"], public["dim"], eps=public["eps"],
                                           delta=public["delta"], second_moment=public["second_moment"],
                                           **public["plan"]), public)


def _run_posterior_route(charged_plan: SamplingPlan, data, public) -> PrivateRun:
    """Release the second moment (if private), plan with it, run the chains, make the interval release."""
    X, y = data
    loss, n, dim, sharded = public["loss"], public["n"], public["dim"], public["sharded"]
    key, source = secret_key(public["seed"], impl=public["key_impl"])
    if sharded:
        key = same_key_on_all_processes(key)  # one noise sequence for the one SPMD program
    key_sm, key_run = jax.random.split(key)
    sm = public["second_moment"]
    if public["private_second_moment"]:
        R2, mu_sm = public["row_bound"], sm.event.mu
        if sharded:
            G, max_sq = sharded_second_moment(X)
            if max_sq > R2 * (1 + 1e-6):  # pragma: no cover - placement checked every row against the loss's bound
                raise AssertionError("a placed row exceeds the second moment's declared bound")
            sm = private_second_moment_of_gram(G, n, max_sq_norm=R2, mu=mu_sm, key=key_sm)
        else:
            sm = private_second_moment(X, max_sq_norm=R2, mu=mu_sm, key=key_sm)
    plan = _with_clip_count(plan_posterior(loss, n, dim, eps=public["eps"], delta=public["delta"], second_moment=sm,
                                           path_budget=charged_plan.posterior.mu_path, **public["plan"]), public)
    if plan.event.mu > charged_plan.event.mu * (1 + 1e-12):
        raise AssertionError("posterior run would spend more than it charged")  # pragma: no cover
    run = sample_posterior(loss, X, y, plan, key=key_run, source=source, progress_bar=public["progress_bar"],
                           chain_method=public["chain_method"])
    release_for_intervals(run, loss, X, y, jax.random.fold_in(key, 2), X_public=public.get("interval_public_rows"))
    warn_if_unmixed(run)
    if public["interval_release_skipped"] is not None:
        run.report_extras["interval_release_skipped"] = public["interval_release_skipped"]
    return run


def release_for_intervals(run: PrivateRun, loss: PerExampleLoss, X, y, key, X_public=None) -> None:
    """The interval release the run's plan reserved (``posterior.mu_interval``, charged with the
    run): Newton statistics of a weighted data loss from the draws' mean, in the final metric, kept in
    the run's report (:mod:`dp_infer.routes.newton_release`). Skipped (spending less than charged)
    when the draws are not finite: a diverged run, which says so."""
    mu = 0.0 if run.plan.posterior is None else run.plan.posterior.mu_interval
    draws = run.draws().reshape(-1, run.plan.dim)
    if mu <= 0 or not np.all(np.isfinite(draws)):
        return
    release = release_newton_statistics(loss, X, y, mu=mu, key=key, X_public=X_public,
                                        **interval_release_inputs(run, loss, X_public))
    run.report_extras["interval_release"] = release.to_dict()


def interval_release_inputs(run: PrivateRun, loss: PerExampleLoss, X_public=None) -> dict:
    """The public inputs of a posterior run's interval release, all computed from its plan and draws
    (post-processing): ``point`` (the draws' mean), ``chol`` (the release's metric C), ``rho`` (the
    weights' radius) and ``trust_covariance`` (the draws' covariance in C's coordinates), as keywords of
    :func:`~dp_infer.releases.newton.release_newton_statistics`."""
    mu = run.plan.posterior.mu_interval
    draws = run.draws().reshape(-1, run.plan.dim)
    if X_public is None:  # the run's metric and the weights' radius its second moment implies
        C = preconditioner_chol(run.plan)
        rho = weight_radius(C, rows_second_moment(run.planned, loss))
    else:  # the public curvature's whitening (public_release_metric's doc says why)
        C, rho = public_release_metric(loss, X_public, draws.mean(axis=0), run.plan.prior_precision, run.plan.n,
                                       mu_last=last_gradient_mu(mu, n=run.plan.n))  # sets the radius
    psi = draws @ np.linalg.inv(C).T
    cov = np.atleast_2d(np.cov(psi.T)) + 1e-12 * np.eye(run.plan.dim)
    return {"point": draws.mean(axis=0), "chol": C, "rho": rho, "trust_covariance": cov}


def rows_second_moment(plan: SamplingPlan, loss: PerExampleLoss) -> np.ndarray:
    """The rows' second moment ``S`` a posterior plan was made with, recovered from its metric
    (``P^-1 = beta kappa_P S + Lambda``; public), or ``(R^2 / d) I`` for a plan made from the prior
    alone (no second moment)."""
    P = np.asarray(plan.preconditioner, dtype=np.float64)
    lam = np.diag(np.asarray(plan.prior_precision, dtype=np.float64))
    S = (np.linalg.inv(0.5 * (P + P.T)) - lam) / (plan.beta * plan.posterior.step.preconditioner_curvature)
    w, V = np.linalg.eigh(0.5 * (S + S.T))
    S = (V * np.maximum(w, 0.0)) @ V.T
    if np.trace(S) <= 1e-9 * loss.row_norm ** 2:
        return np.eye(plan.dim) * loss.row_norm ** 2 / plan.dim
    return S


#: the posterior mode of a per-example loss: :func:`dp_infer.routes.posterior.plan_posterior` plans
#: (charged: the run's target), the run releases the second moment, re-plans with it, samples and
#: makes the interval release
POSTERIOR_ROUTE = register_route(Route("posterior", _plan_posterior_route, _run_posterior_route,
                                       label=lambda plan: "dp_infer fit posterior"))
