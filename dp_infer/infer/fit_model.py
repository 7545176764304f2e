"""``dp_infer.fit(model=..., X=..., y=..., eps=..., delta=...)``: a NumPyro model, one call.

The model path of :func:`dp_infer.fit` (which dispatches here and hands over its own ``sample``):

1. every option is checked (init strategy, clip norm, smoothness, coords, dims) -- before any
   budget is charged;
2. :func:`~dp_infer.model.bridge.loss_from_model` reads the model on public placeholder rows:
   latent sites (continuous and global only), observed sites (batched by row), the prior (kept,
   refused if it reads the data arguments), dims from the plates; the per-example negative
   log-likelihood gets per-example gradient clipping at ``clip_norm``, so G = 2 clip_norm holds
   for the function actually run;
3. the plan comes from :func:`~dp_infer.routes.calibrate.calibrate` on n, the dimension and the clipped
   loss's constants; the prior's curvature at fixed public points (:func:`~dp_infer.model.initial.
   prior_curvature`) is added to the step-size condition (beta M + c_prior), which on the
   trajectory route changes the step size only, never beta or the privacy;
4. the chains start from the init strategy evaluated on placeholder rows (never re-drawn);
5. the ledger (if any) is charged, the chains run, and the :class:`~dp_infer.infer.run.PrivateRun`
   carries constrained draws of every latent site with the model's dims and coords.

The tempered target is ``prior(theta) * prod_i p(y_i | x_i, theta)^(beta / n)`` (exactly, where no
clip is active); ``numpyro.infer.Predictive(model, run.get_samples())`` gives posterior
predictions (post-processing of the release).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any, Callable

import numpy as np

from .._validation import check_nonnegative, check_positive
from ..routes.calibrate import calibrate
from ..kernels._common import check_extra_fields
from ..model.bridge import loss_from_model
from ..model.initial import check_init_strategy, describe_strategy, initial_positions, prior_curvature
from .preflight import check_sampling_options, refuse_unused_horizon
from .run import PrivateRun
from .clip_count import count_key, keep_clip_count
from .driver import Hooks, Route, execute, register_route
from ..model.clipping import (DEFAULT_COUNT_SHARE, check_bounds, composed_event, default_clip_norm,
                              private_clip_count, split_budget)

__all__ = ["fit_model", "sample_model", "plan_model", "prepare_model", "check_feature_names", "model_coords_dims"]


def _check_mapping(name: str, value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a mapping (ArviZ {name}), got {type(value).__name__}")
    return dict(value)


def prepare_model(model, X, y, clip_norm, smoothness, init_strategy, coords, dims, x_name, y_name,
                  model_kwargs=None, index_ranges=None, bounds=None):
    """Every model option checked, then the model read on placeholder rows (nothing charged yet).
    Returns ``(ModelLoss, coords, dims, rows)``: ``rows`` is X with the per-row ``model_kwargs``
    appended as columns (what the loss reads). ``clip_norm=None``: the likelihood's default from
    the declared ``bounds`` (:func:`dp_infer.model.clipping.default_clip_norm`), or a one-line refusal."""
    if clip_norm is None:
        clip_norm, _ = default_clip_norm(model, int(np.shape(ml_X(X))[1]), bounds, x_name=x_name, y_name=y_name)
    elif bounds is not None:
        check_bounds(bounds)
    C = check_positive("clip_norm", clip_norm)
    if smoothness is not None:
        smoothness = check_positive("smoothness", smoothness)
    check_init_strategy(init_strategy)
    coords, dims = _check_mapping("coords", coords), _check_mapping("dims", dims)
    ml = loss_from_model(model, ml_X(X), y, clip_norm=C, x_name=x_name, y_name=y_name,
                         smoothness=C if smoothness is None else smoothness, model_kwargs=model_kwargs,
                         index_ranges=index_ranges)
    unknown = [k for k in dims if k not in ml.latent_sites]
    if unknown:
        raise ValueError(f"dims names site(s) {unknown} that are not latent sites of the model {list(ml.latent_sites)}")
    return ml, coords, dims, ml.pack_rows(ml_X(X), model_kwargs, index_ranges)


def plan_model(ml, n: int, *, prior_curvature_bound: float | None = None, **calibrate_kwargs):
    """The data-independent plan for a model: :func:`~dp_infer.routes.calibrate.calibrate` on the clipped
    loss's constants, with the prior's curvature added to the step-size condition (beta M + c)."""
    if prior_curvature_bound is not None:
        prior_curvature_bound = check_nonnegative("prior_curvature_bound", prior_curvature_bound)
    c_prior = prior_curvature(ml) if prior_curvature_bound is None else float(prior_curvature_bound)
    consts = ml.loss.constants
    plan = calibrate(consts, n, ml.dim, **calibrate_kwargs)
    if c_prior > 0:
        stiffer = dataclasses.replace(consts, smoothness=consts.smoothness + c_prior / plan.beta)
        plan2 = calibrate(stiffer, n, ml.dim, **calibrate_kwargs)
        if plan2.beta == plan.beta:  # the trajectory routes: beta does not depend on M
            plan = plan2
    return plan, c_prior


def sample_model(model: Callable, X, y, plan, *, sample: Callable, clip_norm: float = 1.0,
                 smoothness: float | None = None, init_strategy=None, coords: dict | None = None,
                 dims: dict | None = None, x_name: str = "X", y_name: str = "y", domain=None,
                 prior_curvature: float | None = None, model_kwargs: dict | None = None,
                 index_ranges: dict | None = None, feature_names=None, _prepared=None,
                 **sample_kwargs) -> PrivateRun:
    """Run ``plan`` on a NumPyro model's tempered posterior (``dp_infer.sample(model=..., plan=...)``).

    The plan must have been made for the model's dimension (``loss_from_model(...).dim``) and n
    rows; ``sample_kwargs`` are :func:`dp_infer.sample`'s (seed, chain_method, extra_fields, ...).
    ``feature_names``: as :func:`fit_model`.
    """
    if _prepared is None:
        ml, coords, dims, rows = prepare_model(model, X, y, clip_norm, smoothness, init_strategy, coords, dims, x_name,
                                          y_name, model_kwargs, index_ranges)
    else:
        ml, coords, dims, rows = _prepared
    if plan.init_law != "point" and init_strategy is not None:
        raise ValueError(f"route {plan.route!r} fixes the start law {plan.init_law!r}: init_strategy is refused")
    use_strategy = plan.init_law == "point" and (domain is None or init_strategy is not None)
    init_params = partial(initial_positions, ml, init_strategy, num_chains=plan.num_chains) if use_strategy else None
    names = check_feature_names(feature_names, X)
    run = sample(ml.loss, rows, y, plan, domain=domain, prior_potential=ml.prior_potential,
                 init_params=init_params, **sample_kwargs)
    desc = ml.describe()
    desc.update(init_strategy=describe_strategy(init_strategy),
                smoothness_source="declared" if smoothness is not None else "default: clip_norm",
                feature_names=names)
    if prior_curvature is not None:
        desc["prior_curvature"] = prior_curvature
    run.model = model
    run.model_description = desc
    run._constrain = ml.constrain
    run.feature_names = names
    run.coords, run.dims = model_coords_dims(ml, names, coords, dims)
    return run


def check_feature_names(feature_names, X) -> list[str] | None:
    """The features' names of a run (public, checked before anything is charged): ``feature_names``
    (one per column of X; X may be the number of columns), else a DataFrame's column names, else None.
    Names given with a DataFrame must be its columns (predictions match new rows' columns by name)."""
    cols = [str(c) for c in X.columns] if hasattr(X, "columns") else None
    if feature_names is None:
        return cols
    if isinstance(feature_names, str) or not hasattr(feature_names, "__len__"):
        raise ValueError(f"feature_names must be a list of names (one per column of X), got {feature_names!r}")
    names = [str(v) for v in feature_names]
    if isinstance(X, int):  # the number of columns (row-sharded data)
        num = X
    else:
        num = int(np.shape(ml_X(X))[1]) if np.ndim(ml_X(X)) == 2 else None
    if num is not None and len(names) != num:
        raise ValueError(f"feature_names must have {num} entries (one per column of X), got {len(names)}")
    if len(set(names)) != len(names):
        raise ValueError(f"feature_names must be distinct, got {names}")
    if cols is not None and names != cols:
        raise ValueError(f"feature_names {names} differ from the DataFrame's columns {cols}: give one or the other")
    return names


def model_coords_dims(ml, names, coords: dict | None = None, dims: dict | None = None) -> tuple[dict | None, dict]:
    """ArviZ ``(coords, dims)`` of a model run: the model's own (plate ranges, ``<site>_dim_<i>``), every
    vector latent site with one entry per feature (and no dims of its own) on the dimension ``feature``
    labelled by ``names``, then the user's ``coords`` / ``dims`` over them."""
    coords, dims = dict(coords or {}), dict(dims or {})
    model_dims = ml.dims()
    auto = {}
    if names:  # the features' names label a coefficient vector with one entry per column
        for site in ml.sites:
            if site.name not in dims and len(site.shape) == 1 and site.shape[0] == len(names) \
                    and site.dims[0] == f"{site.name}_dim_0" and f"{site.name}_dim_0" not in coords:
                model_dims[site.name] = ["feature"]
                auto["feature"] = list(names)
    return {**ml.coords(), **auto, **coords} or None, {**model_dims, **dims}


def fit_model(model: Callable, X, y, *, sample: Callable, eps: float, delta: float | None,
              clip_norm: float | None = None, bounds: dict | None = None,
              clip_count_share: float = DEFAULT_COUNT_SHARE, smoothness: float | None = None,
              prior_curvature_bound: float | None = None, init_strategy=None,
              coords: dict | None = None, dims: dict | None = None, x_name: str = "X", y_name: str = "y",
              route: str = "auto", horizon: float | None = None, num_chains: int = 1, kernel: str = "langevin",
              friction: float | None = None, lam_rel: float | None = None, num_draws: int = 1000,
              domain=None, ledger=None, dataset_id: str = "default", seed: int | None = None,
              key_impl: str = "threefry2x32", progress_bar: bool = True, chain_method: str = "vectorized",
              extra_fields: tuple = (), debug: bool = False, model_kwargs: dict | None = None,
              index_ranges: dict | None = None, feature_names=None, **calibrate_kwargs: Any) -> PrivateRun:
    """Private draws from a NumPyro model's tempered posterior (see the module docstring).

    :param model: ``model(X=None, y=None)`` observing ``y`` inside a ``numpyro.plate`` over rows
        (the data argument names are ``x_name`` / ``y_name``).
    :param clip_norm: per-example gradient bound C (> 0) in the unconstrained latent space; the
        sensitivity is G / n = 2 C / n. Choose it a priori (never from the data). Default (None):
        from the likelihood and ``bounds`` (:func:`dp_infer.model.clipping.default_clip_norm`;
        Bernoulli 1 x sqrt(1 + x_norm^2), Poisson needs ``bounds={"y_max": Y}``, a likelihood
        with an unbounded score is refused).
    :param bounds: public bounds on the data, ``{"x_norm": R, "y_max": Y}`` (declared, never read).
    :param clip_count_share: share of the run's mu^2 (Gaussian DP) spent on a private count of the
        rows whose gradient the clip touches at the released posterior mean (reported as
        ``clipped_rows``, with a warning above 10%); 0 turns the count off. The run and the count
        compose to the (eps, delta) asked for.
    :param smoothness: your claim of the per-example curvature M (unconstrained space), used for
        the step size only; default ``clip_norm`` (stated in the report as a default).
    :param prior_curvature_bound: the prior's curvature for the step size (default: computed at
        fixed public points by :func:`dp_infer.model.initial.prior_curvature`).
    :param init_strategy: a NumPyro init strategy evaluated on placeholder rows: ``init_to_uniform``
        (default), ``init_to_feasible``, ``init_to_sample`` or ``init_to_value`` (public values);
        ``init_to_median`` / ``init_to_mean`` and custom callables are refused with the reason.
    :param coords: ArviZ coords for the latent sites' dims, over the model's own (plate ranges).
    :param dims: ArviZ dims per latent site, over the model's own (plate names, ``<site>_dim_<i>``).
    :param model_kwargs: further keyword arguments of the model, as NumPyro users pass them:
        per-row covariates and group indices (arrays with leading dimension n) and public
        constants (Python numbers); see :mod:`dp_infer.model.bridge`.
    :param index_ranges: the declared number of levels of every integer per-row argument
        (``{"group": 8}``: indices in ``0 .. 7``, checked before anything is charged).
    :param feature_names: the names of X's columns (public; default: a DataFrame's column names). They
        label every vector latent site with one entry per column (ArviZ dim ``feature``: the summary,
        the exported coords, the intervals) and match new rows' columns by name in predictions.
    Everything else is :func:`dp_infer.fit`'s.
    """
    check_sampling_options(seed=seed, key_impl=key_impl, chain_method=chain_method, num_chains=num_chains)
    check_feature_names(feature_names, X)
    prepared = prepare_model(model, X, y, clip_norm, smoothness, init_strategy, coords, dims, x_name, y_name,
                             model_kwargs, index_ranges, bounds)
    ml = prepared[0]
    extra_fields = tuple(extra_fields)
    share = 0.0 if delta is None else clip_count_share
    eps_run, mu_count = split_budget(eps, delta, share) if delta is not None else (eps, 0.0)
    if prior_curvature_bound is not None:
        prior_curvature_bound = check_nonnegative("prior_curvature_bound", prior_curvature_bound)
    # the prior's curvature at public points (no data): the plan's step condition and the run's description
    c_prior = prior_curvature(ml) if prior_curvature_bound is None else float(prior_curvature_bound)
    public = {"ml": ml, "n": int(len(y)), "eps": eps, "mu_count": mu_count, "prior_curvature": c_prior,
              "plan": dict(prior_curvature_bound=c_prior, eps=eps_run, delta=delta, route=route,
                           domain=domain, horizon=1.0 if horizon is None else horizon, num_chains=num_chains, kernel=kernel, friction=friction,
                           lam_rel=lam_rel, num_draws=num_draws, **calibrate_kwargs),
              "sample": dict(model=model, sample=sample, smoothness=smoothness, init_strategy=init_strategy,
                             domain=domain, seed=seed, key_impl=key_impl,
                             progress_bar=progress_bar, chain_method=chain_method, extra_fields=extra_fields,
                             debug=debug, feature_names=feature_names)}
    # the rows (packed with the model's per-row arguments by prepare_model) are the route's data
    return execute(MODEL_ROUTE, public, (X, y, prepared), ledger=ledger, dataset_id=dataset_id,
                   hooks=Hooks(planned=lambda plan: (check_extra_fields(extra_fields, plan.kernel, bool(debug)),
                                                     refuse_unused_horizon(horizon, plan)),
                               finish=lambda run, keeper, receipt: release_clip_count(run, public, y, prepared),
                               step="fit(model=...): the private clip count"))


def _plan_model_route(public):
    """The model's estimate plan (:func:`plan_model`), with the private clip count composed into its
    event when one is asked for (charged with the run)."""
    plan, _ = plan_model(public["ml"], public["n"], **public["plan"])
    if public["mu_count"] > 0:
        plan = dataclasses.replace(plan, eps=public["eps"], event=composed_event(plan.event, public["mu_count"]),
                                   options=())
    return plan


def _run_model_route(plan, data, public):
    X, y, prepared = data
    c_prior = public["prior_curvature"]
    ml, opts = public["ml"], dict(public["sample"])
    model, sample = opts.pop("model"), opts.pop("sample")
    return sample_model(model, X, y, plan, sample=sample, clip_norm=ml.loss.clip_norm,
                        prior_curvature=c_prior, _prepared=prepared, **opts)


def release_clip_count(run, public, y, prepared):
    """The private count of the rows the clip touches at the released posterior mean (charged with the
    run, part of the plan's event); made after the draws are kept, so a failure here keeps them."""
    ml = public["ml"]
    seed, key_impl = public["sample"]["seed"], public["sample"]["key_impl"]
    mu_count = public["mu_count"]
    if mu_count > 0:
        keep_clip_count(run, private_clip_count(ml, run.posterior_mean(), prepared[3], y, ml.loss.clip_norm,
                                                mu_count, count_key(seed, key_impl)))


def ml_X(X):
    """The feature table as an array (a DataFrame's values, in its column order)."""
    return X.to_numpy(dtype=float) if hasattr(X, "to_numpy") else X


#: a NumPyro model's estimate mode: :func:`plan_model` plans (with the private clip count composed
#: into the event), :func:`sample_model` runs, then the count is released
MODEL_ROUTE = register_route(Route("model", _plan_model_route, _run_model_route,
                                   label=lambda plan: f"dp_infer fit model {plan.route}"))
