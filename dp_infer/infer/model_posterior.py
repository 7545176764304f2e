"""The posterior mode for your own NumPyro model: ``fit(model=..., target="posterior")``.

Target: the model's tempered posterior ``prior(theta) x prod_i p(y_i | x_i, theta)^(beta / n)``,
i.e. ``prior x exp(-beta L)`` with L the mean per-example negative log-likelihood. Only the
likelihood is tempered; the model's prior (every latent site's distribution, group-level scales
included) is kept as written. beta comes from the privacy target and a requested number of
effective draws (:func:`dp_infer.routes.posterior.plan_posterior`: the path accountant, the ESS
model, the forecast fields in ``plan.posterior``), never from the data.

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
4. the plan is charged (the path event), the chains start from the init strategy evaluated on
   placeholder rows (data independent), run unadjusted Langevin on phi, and the run holds
   constrained draws of every latent site, named as a model run's, with R-hat and ESS achieved
   beside the predicted ones (:class:`~dp_infer.infer.posterior.PosteriorRun`).

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
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC

from .._validation import check_choice, check_delta, check_finite_array, check_positive, check_target_epsilon
from .fit_model import prepare_model
from .posterior import PosteriorRun
from ..kernels import Langevin, UnderdampedLangevin
from ..losses import PerExampleLoss, clipped_loss
from ..model.bridge import ModelLoss
from ..model.initial import describe_strategy, initial_positions, prior_curvature
from ..model.initial import prior_scales as model_prior_scales
from ..routes.plan import KERNELS, SamplingPlan
from ..routes.posterior import DEFAULT_ESS, DEFAULT_MIXING_RATE, plan_posterior
from ..potentials import GibbsPotential
from ..randomness import secret_key
from ..privacy.ledger import charged
from .fallback import keep_draws

__all__ = ["fit_model_posterior", "plan_model_posterior", "whitened_loss", "CLOSE_TO_PRIOR"]

#: the forecast warns when every posterior sd will be at least this share of the prior's
CLOSE_TO_PRIOR = 0.9


def whitened_loss(ml: ModelLoss, scales, clip_norm: float, smoothness: float | None = None) -> PerExampleLoss:
    """The model's per-example nll in prior-whitened coordinates, ``l(phi) = nll(scales * phi)``,
    with per-example gradients (w.r.t. phi) clipped to ``clip_norm``: the clip in the metric
    ``P = diag(scales^2)``. Its constants: L = clip_norm, G = 2 clip_norm (for the function run)."""
    s = jnp.asarray(check_finite_array("prior_scales", scales, ndim=1))
    raw = ml.loss.fn

    def nll_phi(phi, x, y):
        return raw(s * phi, x, y)

    loss = clipped_loss(nll_phi, clip_norm, name="model_nll_whitened", smoothness=smoothness)
    return dataclasses.replace(loss, num_params_fn=ml.loss.num_params_fn)


def _check_scales(scales, dim: int) -> np.ndarray:
    s = np.asarray(scales, dtype=np.float64)
    if s.ndim == 0:
        s = np.full(dim, float(s))
    if s.shape != (dim,) or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"prior_scales must be a number or {dim} numbers in (0, inf) (one per unconstrained "
                         f"coordinate), got shape {s.shape}")
    return s


def plan_model_posterior(ml: ModelLoss, n: int, *, eps: float, delta: float, clip_norm: float,
                         smoothness: float | None = None, prior_scales_: Any = None, ess: int = DEFAULT_ESS,
                         num_chains: int = 4, kernel: str = "langevin", friction: float | None = None,
                         mixing_rate: float = DEFAULT_MIXING_RATE, num_draws: int = 1000,
                         **plan_kwargs) -> tuple[SamplingPlan, np.ndarray, PerExampleLoss]:
    """The data-independent posterior-mode plan for a model: ``(plan, scales, whitened loss)``.

    :func:`~dp_infer.routes.posterior.plan_posterior` on the whitened, metric-clipped loss with the
    identity preconditioner (prior precision 1 per whitened coordinate); the model prior's extra
    curvature (measured at fixed public points) enters the step only. The plan's
    ``preconditioner`` is ``diag(scales^2)`` in theta coordinates (so ``theta = C phi`` with
    ``C = diag(scales)``), its assumptions name the model's prior, and ``plan.posterior`` gains
    the clip, the scales' source and the prior-closeness forecast.
    """
    C = check_positive("clip_norm", clip_norm)
    kappa = C if smoothness is None else check_positive("smoothness", smoothness)
    if prior_scales_ is None:
        scales, source = model_prior_scales(ml), "prior draws (fixed public key), robust 16-84% scale"
    else:
        scales, source = _check_scales(prior_scales_, ml.dim), "declared by the user"
    loss = whitened_loss(ml, scales, C, kappa)
    s = jnp.asarray(scales)
    white = dataclasses.replace(ml, prior_potential=lambda phi: ml.prior_potential(s * phi))
    c_prior = prior_curvature(white)
    kw = dict(eps=eps, delta=delta, prior_precision=1.0, ess=ess, num_chains=num_chains, kernel=kernel,
              friction=friction, mixing_rate=mixing_rate, num_draws=num_draws, **plan_kwargs)
    plan = plan_posterior(loss, n, ml.dim, curvature=kappa, **kw)
    if c_prior > 1.0:  # the prior is stiffer than its Gaussian stand-in somewhere: a smaller step
        plan2 = plan_posterior(loss, n, ml.dim, curvature=kappa + (c_prior - 1.0) / plan.beta, **kw)
        if plan2.beta != plan.beta:  # pragma: no cover - beta does not depend on the curvature here
            raise AssertionError("the step-size curvature changed beta")
        plan = plan2
    floor = 1.0 / math.sqrt(1.0 + plan.beta * kappa)
    close = floor >= CLOSE_TO_PRIOR
    post = dict(plan.posterior)
    post.update({
        "prior": "the model's own prior, untempered (only the likelihood is tempered)",
        "preconditioner_source": f"prior scales per unconstrained coordinate: {source}",
        "prior_scales": [float(v) for v in scales],
        "clip": f"per-example gradients clipped to {C:g} in the preconditioner's metric (||C^T g|| <= {C:g})",
        "clip_norm": C, "smoothness": kappa,
        "smoothness_source": "declared" if smoothness is not None else "default: clip_norm",
        "prior_curvature_whitened": c_prior,
        "prior_sd_ratio_floor": floor,
        "close_to_prior": close,
    })
    assumptions = (
        "the model's prior (data independent: read on placeholder rows, checked not to change with them)",
        f"per-example gradients (w.r.t. the prior-whitened latents) clipped to norm {C:g}: "
        f"Delta_P = 2 * {C:g} / n for the function run",
        f"replace-one neighbouring datasets with n = {n} (public); per-row covariates are part of the row",
        "initial points (the init strategy on placeholder rows), beta, preconditioner (prior scales), step, "
        "horizon and chains are fixed before sampling from public inputs only",
    )
    notes = tuple(plan.notes) + (
        (f"forecast: every posterior sd will be at least {floor:.3g} x the prior's (curvature <= {kappa:g} "
         f"per example in whitened coordinates{'' if smoothness is not None else ', a default'}): at this n and "
         f"eps the draws will be within {100 * (1 - CLOSE_TO_PRIOR):.0f}% of the prior" if close else
         f"forecast: posterior sds can shrink to {floor:.3g} x the prior's at most (curvature <= {kappa:g})"),)
    P = np.diag(scales ** 2)
    plan = dataclasses.replace(plan, assumptions=assumptions, notes=notes, posterior=post,
                               prior_precision=None,
                               preconditioner=tuple(tuple(float(v) for v in row) for row in P))
    return plan, scales, loss


def fit_model_posterior(model: Callable, X, y, *, eps: float, delta: float, clip_norm: float = 1.0,
                        smoothness: float | None = None, prior_scales: Any = None, ess: int = DEFAULT_ESS,
                        num_chains: int = 4, kernel: str = "langevin", friction: float | None = None,
                        mixing_rate: float = DEFAULT_MIXING_RATE, num_draws: int = 1000,
                        init_strategy=None, coords: dict | None = None, dims: dict | None = None,
                        x_name: str = "X", y_name: str = "y", model_kwargs: dict | None = None,
                        index_ranges: dict | None = None, seed: int | None = None,
                        key_impl: str = "threefry2x32", ledger=None, dataset_id: str = "default",
                        progress_bar: bool = True, chain_method: str = "vectorized",
                        **plan_kwargs: Any) -> PosteriorRun:
    """Private draws of a NumPyro model's tempered posterior, planned for ``ess`` effective draws
    over ``num_chains`` chains at (eps, delta) (see the module docstring).

    :param clip_norm: bound C on each per-example gradient in the prior-whitened coordinates
        (the preconditioner's metric); the sensitivity is ``2 C / n``. Choose it a priori.
    :param smoothness: a bound on the per-example curvature in whitened coordinates (step size and
        forecast only); default ``clip_norm`` (reported as a default).
    :param prior_scales: declared scales per unconstrained coordinate (default: from prior draws).
    :param ess, mixing_rate, num_draws, kernel, friction: as :func:`~dp_infer.routes.posterior.plan_posterior`
        (``mixing_rate`` is the declared curvature of the slowest whitened direction: 1 for a
        log-concave likelihood under a Gaussian prior; lower for funnels).
    :param init_strategy, coords, dims, x_name, y_name, model_kwargs, index_ranges: as
        :func:`dp_infer.infer.fit_model.fit_model`.
    ``ledger``: the plan's event is charged to ``dataset_id`` before the chains touch the data.
    """
    eps = check_target_epsilon(eps)
    delta = check_delta(delta)
    check_choice("kernel", kernel, KERNELS)
    check_choice("chain_method", chain_method, ("vectorized", "sequential", "parallel"))
    ml, coords, dims, rows = prepare_model(model, X, y, clip_norm, smoothness, init_strategy, coords, dims,
                                           x_name, y_name, model_kwargs, index_ranges)
    y = check_finite_array("y", y, ndim=1)
    plan, scales, loss = plan_model_posterior(ml, int(rows.shape[0]), eps=eps, delta=delta, clip_norm=clip_norm,
                                              smoothness=smoothness, prior_scales_=prior_scales, ess=ess,
                                              num_chains=num_chains, kernel=kernel, friction=friction,
                                              mixing_rate=mixing_rate, num_draws=num_draws, **plan_kwargs)
    rows, y = loss.check_data(rows, y)
    key, source = secret_key(seed, impl=key_impl)
    key_run, key_init = jax.random.split(key)
    with keep_draws(ledger=ledger, step="fit(model=..., target='posterior'): describing the run") as keeper:
        with charged(ledger, dataset_id, plan.event, "dp_infer fit model posterior"):
            s = jnp.asarray(scales, dtype=jnp.result_type(float))
            potential = GibbsPotential(loss, jnp.asarray(rows), jnp.asarray(y), plan.beta,
                                       prior_potential=lambda phi: ml.prior_potential(s * phi))

            def potential_fn(z):
                return potential(z["phi"])

            kern = (Langevin(potential_fn=potential_fn, step_size=plan.step_size) if plan.kernel == "langevin"
                    else UnderdampedLangevin(potential_fn=potential_fn, step_size=plan.step_size, friction=plan.friction))
            phi0 = initial_positions(ml, init_strategy, key_init, plan.num_chains) / s
            mcmc = MCMC(kern, num_warmup=0, num_samples=plan.num_steps, num_chains=plan.num_chains,
                        thinning=plan.thinning, chain_method=chain_method, progress_bar=progress_bar)
            mcmc.run(key_run, init_params={"phi": phi0 if plan.num_chains > 1 else phi0[0]})
            phi = np.asarray(mcmc.get_samples(group_by_chain=True)["phi"], dtype=np.float64)
            div = (mcmc.get_extra_fields(group_by_chain=True) or {}).get("diverging")
            run = keeper.keep(PosteriorRun(plan, phi * np.asarray(scales), None if div is None else np.asarray(div, dtype=bool),
                                           source, potential.describe(), _mcmc=mcmc, _potential=potential))
        run.phi_scale = np.asarray(scales, dtype=np.float64)  # theta = phi * scale (extend maps new draws so)
        names = [str(c) for c in X.columns] if hasattr(X, "columns") else None
        desc = ml.describe()
        desc.update(init_strategy=describe_strategy(init_strategy), feature_names=names,
                    smoothness_source="declared" if smoothness is not None else "default: clip_norm",
                    clip_metric="prior-whitened (the preconditioner's metric)")
        run.model = model
        run.model_description = desc
        run._constrain = ml.constrain
        run.feature_names = names
        run.coords = {**ml.coords(), **coords} or None
        run.dims = {**ml.dims(), **dims}
    return run
