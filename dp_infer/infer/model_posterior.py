"""The posterior mode for your own NumPyro model: ``fit(model=..., target="posterior")``.

Target: the model's tempered posterior ``prior(theta) x prod_i p(y_i | x_i, theta)^(beta / n)``,
i.e. ``prior x exp(-beta L)`` with L the mean per-example negative log-likelihood. Only the
likelihood is tempered; the model's prior (every latent site's distribution, group-level scales
included) is kept as written. beta comes from the privacy target and a requested number of
effective draws (:func:`dp_infer.routes.posterior.plan_posterior`: the path accountant, the ESS
model, the forecast fields in ``plan.posterior``), never from the data.

The plan itself, made from public inputs only, is :mod:`dp_infer.infer.model_posterior_plan`'s
(:func:`~dp_infer.infer.model_posterior_plan.plan_model_posterior`); this module checks the call, runs the route
and describes the run; :mod:`dp_infer.infer.model_forecast` reads the same plan before anything is charged.

Order of work (nothing touches the private rows before the charge):

1. every option is checked, the model read on public placeholder rows
   (:func:`dp_infer.model.bridge.loss_from_model`, per-row ``model_kwargs`` included);
2. **the preconditioner comes from the prior** (public): a robust scale ``s_j`` per unconstrained
   coordinate from prior draws with a fixed key (:func:`dp_infer.model.initial.prior_scales`), so
   ``P = diag(s^2) = C C^T`` and the chain runs in the prior-whitened coordinates
   ``phi = theta / s``;
3. **per-example gradients are clipped in the preconditioner's metric**: the loss the kernel
   differentiates is ``l(phi; row) = nll(s * phi; row)``, whose per-example gradient
   ``C^T grad_theta nll`` is clipped to ``clip_norm`` in Euclidean norm, i.e. the theta-gradient
   is clipped to ``||g||_P <= clip_norm``. So the sensitivity of the function actually run is
   ``Delta_P = 2 clip_norm / n`` in the metric, and the path accountant's
   ``mu = beta Delta_P sqrt(K t / 2)`` holds for the released phi-path (theta = s * phi is
   post-processing). :func:`plan_posterior` sees this as a loss with gradient-difference bound
   ``G = 2 clip_norm`` under the identity preconditioner (the prior in phi coordinates has
   precision about 1);
   With ``preconditioner="fisher"`` the metric also takes the data's curvature: the scores' second
   moment ``F`` at the unconstrained origin (:mod:`dp_infer.model.fisher`; per-example scores
   clipped to ``clip_norm``, so the release's sensitivity is ``2 clip_norm^2 / n``) is released
   with a ``precond_share`` of ``mu^2`` AFTER the charge, and the chain runs in
   ``psi = C_phi^-1 phi`` with ``C_phi C_phi^T = (beta kappa_P F + c I)^-1``. The clip stays in
   phi, so ``||C_phi^T (g - g')|| <= ||C_phi|| 2 clip_norm / n <= 2 clip_norm / n`` (the plan
   uses ``sqrt(lambda_max(P)) G / n``); the step comes from the release (per-example curvature at
   most ``fisher_curvature x g_i g_i^T``), not the isotropic ``smoothness``;
4. the plan is charged (the path event; with the release, the whole (eps, delta) target, the plan
   re-made from the release spending at most that), the chains start from the init strategy evaluated on
   placeholder rows (data independent), run unadjusted Langevin on phi by default
   (``kernel="underdamped"``: the kinetic one, whose step grows like ``1 / sqrt(M)`` instead of
   ``1 / M``; it is not the default here because a model's curvature is only declared: on a
   centred 8-group hierarchy, where the funnel's neck is far stiffer than the declared bound, the
   kinetic chains blew up to non-finite draws and the overdamped ones did not), and the run holds
   constrained draws of every latent site, named as a model run's, with R-hat and ESS achieved
   beside the predicted ones (:class:`~dp_infer.infer.posterior.PosteriorRun`);
5. with ``interval_share > 0`` (by default where the release is forecast to be informative), the
   release reserved in the plan's event and charged with it is made from the draws' mean: mean
   clipped scores and their second moment in a scoring step (:mod:`dp_infer.model.score_release`),
   kept in ``run.report_extras["interval_release"]``; ``run.intervals()`` reads intervals for the
   unconstrained coordinates from it (sampling error and privacy noise accounted, coordinates the
   likelihood does not inform flagged "prior");
6. with ``clip_count_share > 0`` (default :data:`~dp_infer.model.clipping.DEFAULT_COUNT_SHARE`), a
   private count of the rows whose whitened gradient the clip touches at the released posterior
   mean, as the estimate mode's: its share of ``mu^2`` is taken out of the target before anything
   else is planned and its Gaussian part is the last of the plan's event (``run.clipped_rows``).

Forecast (public inputs only, printed before sampling by the CLI / in ``plan.posterior``): with a
per-example curvature bound kappa in the whitened coordinates (``smoothness``; default
``clip_norm``) the tempered posterior's precision in any whitened direction is at most about
``1 + beta kappa`` (Gaussian prior), so every posterior sd is at least
``prior_sd_ratio_floor = 1 / sqrt(1 + beta kappa)`` of the prior's; when that floor is >= 0.9 the
plan says plainly that the draws will be within 10% of the prior.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_choice, check_delta, check_finite_array, check_positive, check_target_epsilon
from ..model.clipping import (DEFAULT_COUNT_SHARE, check_count_share, private_example_clip_count, split_budget)
from ..model.fisher import score_gram
from ..model import score_release as _sr
from ..model.public_information import check_public_model_rows, public_second_moment
from ..model.weighted_release import release_labels
from ..privacy.conversions import gdp_mu
from ..routes.preconditioning import pending_second_moment
from ..releases.second_moment import private_second_moment_of_gram
from .clip_count import count_key, keep_clip_count
from .model_interval_release import (check_forecast_point, forecast_note, release_for_intervals,
                                     weighted_interval_forecast)
from .fit_model import check_feature_names, model_coords_dims, prepare_model
from .preflight import check_plan_resources, check_sampling_options
from .posterior import PosteriorRun, released_draws, warn_if_unmixed
from ..losses import PerExampleLoss
from ..model.bridge import ModelLoss, noncentred_prior
from ..model.initial import describe_strategy, initial_positions, prior_draws
from ..routes.plan import KERNELS, SamplingPlan
from ..routes.posterior import DEFAULT_ESS, DEFAULT_MIXING_RATE, preconditioner_chol
from ..potentials import GibbsPotential
from ..randomness import secret_key
from .driver import Hooks, Route, execute, register_route
from ..diagnostics.model_prior import model_prior_posterior
from .chains import plan_kernel, run_chains, site_potential
from .model_posterior_plan import MODEL_PRECONDITIONERS, plan_model_posterior

__all__ = ["fit_model_posterior", "prepare_model_posterior", "ModelPosteriorSetup", "ModelPosteriorPlan"]


def fit_model_posterior(model: Callable, X, y, *, eps: float, delta: float, clip_norm: float = 1.0,
                        smoothness: float | None = None, prior_scales: Any = None, ess: int = DEFAULT_ESS,
                        num_chains: int = 4, kernel: str = "langevin", friction: float | None = None,
                        mixing_rate: float = DEFAULT_MIXING_RATE, num_draws: int = 1000,
                        preconditioner: str = "prior", precond_share: float = 0.1, fisher_curvature: float = 1.0,
                        init_strategy=None, coords: dict | None = None, dims: dict | None = None,
                        x_name: str = "X", y_name: str = "y", model_kwargs: dict | None = None,
                        index_ranges: dict | None = None, seed: int | None = None,
                        key_impl: str = "threefry2x32", ledger=None, dataset_id: str = "default",
                        progress_bar: bool = True, chain_method: str = "vectorized",
                        interval_share: float | None = None, feature_names=None,
                        clip_count_share: float = DEFAULT_COUNT_SHARE, interval_curvature: str = "private",
                        X_public=None, public_model_kwargs: dict | None = None, forecast_at: dict | None = None,
                        **plan_kwargs: Any) -> PosteriorRun:
    """Private draws of a NumPyro model's tempered posterior, planned for ``ess`` effective draws
    over ``num_chains`` chains at (eps, delta) (see the module docstring).

    :param clip_norm: bound C on each per-example gradient in the prior-whitened coordinates
        (the preconditioner's metric); the sensitivity is ``2 C / n``. Choose it a priori.
    :param smoothness: a bound on the per-example curvature in whitened coordinates (step size and
        forecast only); default ``clip_norm`` (reported as a default).
    :param prior_scales: declared scales per unconstrained coordinate (default: from prior draws).
    :param preconditioner: ``"prior"`` (the prior's scales only: no data, the default) or
        ``"fisher"``: also the scores' second moment at the unconstrained origin
        (:mod:`dp_infer.model.fisher`), released with a ``precond_share`` of the run's GDP budget
        (``mu_F^2 = share mu^2``); the chains then run in the metric ``(beta kappa_P F + I)^-1`` and
        the step is set by ``fisher_curvature`` (per-example curvature <= that x ``g_i g_i^T``: 1 is
        exact for a logistic model with a zero-mean prior) instead of the isotropic ``smoothness``.
        On the Adult model (108 coefficients) that is 8,080 steps instead of 227,908 at eps = 1
        (docs/results.md).

    ``ess``, ``mixing_rate``, ``num_draws``, ``kernel``, ``friction``: as
    :func:`~dp_infer.routes.posterior.plan_posterior` (``mixing_rate`` is the declared curvature of
    the slowest direction in the metric the chains run in: 1 for a log-concave likelihood under a
    Gaussian prior in the whitened coordinates; lower for funnels, and 0.4, the default, in the
    Fisher metric). ``init_strategy``, ``coords``, ``dims``, ``x_name``, ``y_name``,
    ``model_kwargs``, ``index_ranges``: as :func:`dp_infer.infer.fit_model.fit_model`.
    ``ledger``: the plan's event is charged to ``dataset_id`` before the chains touch the data.

    ``interval_share``: the share of ``mu^2`` reserved (in the plan's event, charged before any row
    is read) for the interval release made after sampling: mean clipped scores and their second
    moment ``J`` in scoring steps from the draws' mean (:mod:`dp_infer.model.score_release`), from
    which :meth:`~dp_infer.infer.run.PrivateRun.intervals` reads intervals for the unconstrained
    coordinates that account for the sampling error and the release's noise (``J`` stands in for
    the Hessian: a correctly specified model, scores that rarely reach ``clip_norm``). ``None``
    (default): :data:`~dp_infer.model.score_release.DEFAULT_INTERVAL_SHARE` where the released ``J``
    is forecast to be informative (:func:`~dp_infer.model.score_release.default_interval_share`),
    else 0 with the reason in ``report_extras["interval_release_skipped"]``; 0: no release (the run
    and its budget exactly as without the option). Allowed: [0, 1), and below ``1 - precond_share``
    with ``preconditioner="fisher"``.

    ``feature_names``: as :func:`~dp_infer.infer.fit_model.fit_model` (they also name the intervals).

    ``clip_count_share``: the share of ``mu^2`` (default
    :data:`~dp_infer.model.clipping.DEFAULT_COUNT_SHARE`) spent on a private count of the rows whose
    prior-whitened gradient the clip touches at the released posterior mean, as the estimate mode's
    (``run.clipped_rows``, the charged figures in ``run.report()["clipped_rows"]``, a warning above
    10%). It is taken out of the target first (``precond_share`` and ``interval_share`` are then
    shares of the rest) and composed into the plan's event, so the charge and the report stay the
    (eps, delta) asked for; 0 turns it off (the reason in ``report()["clipped_rows_skipped"]``).
    Allowed: [0, 1), refused before anything is charged.

    ``interval_curvature``: ``"private"`` (default: the release's ``J`` released from the rows) or
    ``"public"``: ``J`` computed from ``X_public``, feature rows you declare public (drawn from X's population;
    their labels are not needed), with labels drawn from the model at each point of the release's path
    (:mod:`dp_infer.model.public_information`; free), so the release is its mean clipped scores only and
    needs no signal-to-noise rule (default share then
    :data:`~dp_infer.model.score_release.PUBLIC_INTERVAL_SHARE`). Where the observation has a finite support
    (Bernoulli, categorical: checked on the public rows before the charge) the release is the weighted one
    instead (:mod:`dp_infer.model.weighted_release`: label-free weights in the metric that whitens the public
    information, the labels enumerated, no clip). ``public_model_kwargs``: the public rows'
    per-row model arguments (the same names and ranges as ``model_kwargs``'), needed when the model has any.
    The model must have one observed site (the labels it draws).

    ``forecast_at``: with the weighted release, a public guess of the estimate (every latent site's constrained
    value: a fit to public labelled rows, a published model) at which the plan forecasts the intervals' width and
    typical sd (``run.report_extras["interval_forecast"]``, the plan's notes; read before the charge by
    :func:`dp_infer.infer.model_forecast.forecast_model_posterior`). Default None: at the prior's centre, a floor.
    It changes the forecast only, never the release; it is public (it enters the plan). Refused before the charge
    where there is no weighted release to forecast, or where it does not fit the model's sites.
    """
    setup = prepare_model_posterior(dict(locals()))  # first: the call's options, nothing else defined yet
    ml, mpp, public = setup.ml, setup.plan, setup.public

    def describe(run, keeper, receipt):
        desc = ml.describe()
        desc.update(init_strategy=describe_strategy(public["init_strategy"]), feature_names=setup.feature_names,
                    smoothness_source="declared" if setup.smoothness is not None else "default: clip_norm",
                    clip_metric="prior-whitened (the preconditioner's metric)")
        run.model = model
        run.model_description = desc
        run._constrain = ml.constrain
        run.feature_names = setup.feature_names
        run.coords, run.dims = setup.coords, setup.dims
        why = run.report_extras.get("interval_release_skipped") or setup.interval_skipped
        if why is not None:
            run.report_extras["interval_release_skipped"] = why
        release_posterior_clip_count(run, mpp, setup.rows, setup.y, public)
        rel = run.report_extras.get("interval_release")
        if rel is not None and rel.get("kind") == _sr.RELEASE_KIND:
            # post-processing of the release (public key, placeholder rows): the model's exact prior
            try:
                rel["model_prior_posterior"] = model_prior_posterior(
                    rel, ml.prior_potential, noncentred=noncentred_prior(ml),
                    prior_draws=setup.prior_sample)
            except Exception as e:  # noqa: BLE001 - post-processing after the charge: the run keeps its release
                rel["model_prior_posterior_skipped"] = (f"{type(e).__name__}: {e}: the intervals use the prior's "
                                                        "Gaussian stand-in")

    return execute(MODEL_POSTERIOR_ROUTE, public, (setup.rows, setup.y), ledger=ledger, dataset_id=dataset_id,
                   plan=mpp, hooks=Hooks(finish=describe,
                                         step="fit(model=..., target='posterior'): describing the run"))


@dataclasses.dataclass(frozen=True)
class ModelPosteriorSetup:
    """What :func:`fit_model_posterior` fixes before the charge (:func:`prepare_model_posterior`): the route's
    public inputs, its plan (made once), the checked rows and labels (not read beyond their checks until
    the charge), the model read on placeholder rows, the coordinates' names, why the interval release was
    not reserved (or None), the prior's draws (fixed public key; None without an interval release) and the
    declared smoothness (None: the default)."""

    public: dict
    plan: ModelPosteriorPlan
    rows: Any
    y: Any
    ml: ModelLoss
    feature_names: Any
    coords: dict
    dims: dict
    interval_skipped: str | None
    prior_sample: Any
    smoothness: float | None


def prepare_model_posterior(options: Mapping[str, Any]) -> ModelPosteriorSetup:
    """Every option of :func:`fit_model_posterior` checked, the model read on placeholder rows and the run
    planned, before anything is charged or any row read beyond its checks. ``options``: the call's arguments
    by name (every parameter of :func:`fit_model_posterior`, ``plan_kwargs`` as one dict), as
    :func:`fit_model_posterior` and :func:`dp_infer.infer.model_forecast.forecast_model_posterior` bind them.
    Each refusal is a one-line ``ValueError`` naming the parameter."""
    o = dict(options)
    model, X, y, eps, delta = o["model"], o["X"], o["y"], o["eps"], o["delta"]
    kernel, chain_method, preconditioner, precond_share = o["kernel"], o["chain_method"], o["preconditioner"], o[
        "precond_share"]
    fisher_curvature, seed, key_impl, num_chains = o["fisher_curvature"], o["seed"], o["key_impl"], o["num_chains"]
    clip_count_share, interval_share, feature_names = o["clip_count_share"], o["interval_share"], o["feature_names"]
    clip_norm, smoothness, init_strategy, index_ranges = o["clip_norm"], o["smoothness"], o["init_strategy"], o[
        "index_ranges"]
    interval_curvature, X_public, public_model_kwargs = o["interval_curvature"], o["X_public"], o["public_model_kwargs"]
    prior_scales, ess, friction, mixing_rate, num_draws = (o["prior_scales"], o["ess"], o["friction"],
                                                           o["mixing_rate"], o["num_draws"])
    plan_kwargs, progress_bar = o["plan_kwargs"], o["progress_bar"]
    eps = check_target_epsilon(eps)
    delta = check_delta(delta)
    check_choice("kernel", kernel, KERNELS)
    check_choice("chain_method", chain_method, ("vectorized", "sequential", "parallel"))
    check_choice("preconditioner", preconditioner, MODEL_PRECONDITIONERS)
    if not 0 < precond_share < 1:
        raise ValueError(f"precond_share must lie in (0, 1), got {precond_share!r}")
    fisher_curvature = check_positive("fisher_curvature", fisher_curvature)
    check_sampling_options(seed=seed, key_impl=key_impl, num_chains=num_chains)  # the key is made after the charge
    count_share = check_count_share(clip_count_share)  # refused by name before anything is read or charged
    if interval_share is not None:  # refused by name before anything is read or charged
        interval_share = _sr.check_interval_share(interval_share, precond_share if preconditioner == "fisher" else None)
    names = check_feature_names(feature_names, X)
    ml, coords, dims, rows = prepare_model(model, X, y, clip_norm, smoothness, init_strategy, o["coords"], o["dims"],
                                           o["x_name"], o["y_name"], o["model_kwargs"], index_ranges)
    public_rows = check_public_model_rows(ml, interval_curvature, X_public, public_model_kwargs, index_ranges)
    # public, before the charge: a finite observation support makes the release weighted (weighted_release)
    labels = None if public_rows is None else release_labels(ml, ml.loss.fn, public_rows, np.zeros(ml.dim))
    y = check_finite_array("y", y, ndim=1)
    n = int(rows.shape[0])
    plan_kw = dict(eps=eps, delta=delta, clip_norm=clip_norm, smoothness=smoothness, prior_scales_=prior_scales,
                   ess=ess, num_chains=num_chains, kernel=kernel, friction=friction, mixing_rate=mixing_rate,
                   num_draws=num_draws, fisher_curvature=fisher_curvature, clip_count_share=count_share,
                   **plan_kwargs)
    fisher = preconditioner == "fisher"
    # the clipped-row count's share comes out of the target first: the run (path, second moment,
    # interval release) is planned at the rest, as plan_model_posterior does
    eps_run, mu_count = split_budget(eps, delta, count_share) if count_share > 0 else (eps, 0.0)
    mu = gdp_mu(eps_run, delta)
    skipped = None
    if interval_share is None:
        interval_share, skipped = _sr.default_interval_share(n, ml.dim, mu, interval_curvature)
    plan_kw.update(interval_share=interval_share, interval_curvature=interval_curvature,
                   interval_weighted=labels is not None)
    mu_sm = math.sqrt(precond_share) * mu
    forecast_point = check_forecast_point(ml, o["forecast_at"])
    if forecast_point is not None and (labels is None or interval_share <= 0):
        raise ValueError("forecast_at: only the weighted interval release forecasts its intervals (a finite "
                         "observation support, interval_curvature='public' with X_public, interval_share > 0); "
                         "drop forecast_at")
    # the release is not made yet: plan with a stand-in that carries its event (no data), so the whole
    # run is validated and its composed event charged before any private computation
    public = {"ml": ml, "n": n, "mu": mu, "plan": plan_kw, "fisher": fisher, "clip_norm": clip_norm,
              "second_moment": pending_second_moment(n, ml.dim, max_sq_norm=clip_norm ** 2, mu=mu_sm) if fisher else None,
              "seed": seed, "key_impl": key_impl, "chain_method": chain_method, "progress_bar": progress_bar,
              "init_strategy": init_strategy, "interval_share": interval_share, "mu_count": mu_count,
              "public_rows": public_rows, "release_labels": labels, "forecast_point": forecast_point}
    # public, before the charge: the prior's Gaussian stand-in and the coordinates' names
    run_coords, run_dims = model_coords_dims(ml, names, coords, dims)
    # the prior's draws (fixed public key): its Gaussian stand-in now (the plan's interval forecast, the release),
    # the model-prior intervals' prior mass later
    prior_sample = prior_draws(ml, jax.random.PRNGKey(0), 4000) if interval_share > 0 else None
    public["prior_gauss"] = ((*_sr.prior_gaussian(ml, draws=prior_sample), _sr.unconstrained_names(ml, run_coords,
                                                                                                   run_dims))
                             if interval_share > 0 else None)
    mpp = MODEL_POSTERIOR_ROUTE.plan(public)  # planned once, here: the rows are checked with its loss
    rows, y = mpp.loss.check_data(rows, y)
    return ModelPosteriorSetup(public=public, plan=mpp, rows=rows, y=y, ml=ml, feature_names=names,
                               coords=run_coords, dims=run_dims, interval_skipped=skipped, prior_sample=prior_sample,
                               smoothness=smoothness)



@dataclasses.dataclass(frozen=True)
class ModelPosteriorPlan:
    """A model posterior run's plan, made before any row is read: the sampling plan (with the Fisher
    release's stand-in when ``preconditioner="fisher"``), the prior's scales, the whitened loss, and
    the event the ledger is charged: the plan's own (with the Fisher release, the plan made with its
    stand-in; the plan made after the release keeps its path within this plan's path mu)."""

    plan: SamplingPlan
    scales: np.ndarray
    loss: PerExampleLoss
    event: Any
    #: the weighted release's intervals forecast from the public rows (:func:`weighted_interval_forecast`), or None
    interval_forecast: dict | None = None

    @property
    def route(self) -> str:
        return self.plan.route


def _plan_model_posterior_route(public) -> ModelPosteriorPlan:
    plan, scales, loss = plan_model_posterior(public["ml"], public["n"], second_moment=public["second_moment"],
                                              **public["plan"])
    forecast = weighted_interval_forecast(plan, scales, loss, public)
    if forecast is not None:
        plan = dataclasses.replace(plan, notes=tuple(plan.notes) + (forecast_note(forecast),))
    return ModelPosteriorPlan(plan, scales, loss, plan.event, forecast)


def _run_model_posterior_route(mpp: ModelPosteriorPlan, data, public) -> PosteriorRun:
    """The Fisher release and the re-plan with it (if asked for), the chains on the whitened model,
    and the interval release the plan reserved."""
    rows, y = data
    ml, n, clip_norm, fisher = public["ml"], public["n"], public["clip_norm"], public["fisher"]
    plan, scales, loss = mpp.plan, mpp.scales, mpp.loss
    key, source = secret_key(public["seed"], impl=public["key_impl"])
    key_run, key_init, *key_sm = jax.random.split(key, 3 if fisher else 2)
    if fisher:
        gram, _ = score_gram(loss.fn, rows, y, dim=ml.dim, clip_norm=clip_norm)
        released = private_second_moment_of_gram(gram, n, max_sq_norm=clip_norm ** 2,
                                                 mu=public["second_moment"].event.mu, key=key_sm[0])
        plan, scales, loss = plan_model_posterior(ml, n, second_moment=released,
                                                  path_budget=mpp.plan.posterior.mu_path, **public["plan"])
        if plan.event.mu > mpp.event.mu * (1 + 1e-12):
            raise AssertionError("model posterior run would spend more than it charged")  # pragma: no cover
    s = jnp.asarray(scales, dtype=jnp.result_type(float))
    potential = GibbsPotential(loss, jnp.asarray(rows), jnp.asarray(y), plan.beta,
                               prior_potential=lambda phi: ml.prior_potential(s * phi))
    # theta = C_theta psi with C_theta = diag(s) C_phi: the kernel runs on psi ("phi" in the chain's state)
    C_theta = preconditioner_chol(plan)
    C_phi = C_theta / np.asarray(scales)[:, None]
    V = potential.reparametrised(C_phi) if fisher else potential

    kern = plan_kernel(plan.kernel, site_potential(V, "phi"), step_size=plan.step_size, friction=plan.friction)
    phi0 = np.asarray(initial_positions(ml, public["init_strategy"], key_init, plan.num_chains) / s, dtype=np.float64)
    psi0 = np.linalg.solve(C_phi, phi0.T).T if fisher else phi0
    mcmc = run_chains(kern, "phi", jnp.asarray(psi0, dtype=jnp.result_type(float)), num_steps=plan.num_steps,
                      thinning=plan.thinning, num_chains=plan.num_chains, key=key_run,
                      chain_method=public["chain_method"], progress_bar=public["progress_bar"])
    run = PosteriorRun(plan, *released_draws(mcmc, plan), source, potential.describe(), _mcmc=mcmc,
                       _potential=potential)
    if public["interval_share"] > 0:
        public_j = None if public["public_rows"] is None else public_second_moment(
            loss.fn, ml.observation_sampler(), public["public_rows"], scales, clip_norm=clip_norm)
        why = release_for_intervals(run, loss, rows, y, scales, clip_norm, public["prior_gauss"],
                                     jax.random.fold_in(key, 2), public_j, public["release_labels"])
        if why is not None:
            run.report_extras["interval_release_skipped"] = why
        if mpp.interval_forecast is not None:
            run.report_extras["interval_forecast"] = mpp.interval_forecast
    warn_if_unmixed(run)
    return run


def release_posterior_clip_count(run: PosteriorRun, mpp: ModelPosteriorPlan, rows, y, public) -> None:
    """The private count of the rows whose per-example gradient (w.r.t. the prior-whitened latents,
    where the run clips) exceeds ``clip_norm`` at the released posterior mean, charged with the run
    (the last part of the plan's event) and kept in ``run.clipped_rows`` (the charged figures in
    ``run.report_extras["clipped_rows"]``); a warning when it says the clip is active on more than a
    tenth of the rows. Made after the draws are kept (post-processing of them and a Gaussian count),
    with its own key stream (never the run's noise). Not made (spending less than charged, the reason
    in ``report_extras["clipped_rows_skipped"]``) without a share or when the draws are not finite."""
    mu_count = public["mu_count"]
    if mu_count <= 0:
        run.report_extras["clipped_rows_skipped"] = "no private count of the clipped rows was made: clip_count_share=0"
        return
    theta = np.asarray(run.posterior_mean(), dtype=np.float64)
    if not np.all(np.isfinite(theta)):
        run.report_extras["clipped_rows_skipped"] = ("no private count of the clipped rows was made: the chains "
                                                     "diverged (non-finite draws); the reserved count was not spent")
        return
    phi = theta / np.asarray(mpp.scales, dtype=np.float64)  # the clip acts on the whitened coordinates
    keep_clip_count(run, private_example_clip_count(mpp.loss.example, phi, rows, y, mpp.loss.clip_norm, mu_count,
                                                    count_key(public["seed"], public["key_impl"])))


def _preflight_model_posterior(mpp: ModelPosteriorPlan, prefix: str = "") -> None:
    check_plan_resources(mpp.plan, prefix=prefix)  # steps and memory (issue 40: ess=1e11 overflowed after the charge)


#: a NumPyro model's posterior mode: :func:`plan_model_posterior` plans (with the Fisher release's
#: stand-in), the run releases, re-plans, samples and makes the interval release
MODEL_POSTERIOR_ROUTE = register_route(Route("model_posterior", _plan_model_posterior_route,
                                             _run_model_posterior_route,
                                             label=lambda mpp: "dp_infer fit model posterior",
                                             preflight=_preflight_model_posterior))
