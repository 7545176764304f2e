"""What your own NumPyro model's posterior run will give, read before anything is charged.

:func:`forecast_model_posterior` takes exactly the arguments of
:func:`dp_infer.infer.model_posterior.fit_model_posterior` (``fit(model=..., target="posterior")``), checks
them as the run does and makes the run's own plan (:func:`~dp_infer.infer.model_posterior.prepare_model_posterior`:
the same function the run calls, so the two cannot drift), then stops: no key is made, nothing is charged,
no row is read beyond its checks (shape, finiteness, the likelihood's support). What it returns,
:class:`ModelPosteriorForecast`, is a function of public inputs only (n, the model, its prior, the options and
the rows declared public), so neighbouring datasets get the same forecast.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from ..model.score_release import unconstrained_names
from ..routes.forecast import TemperedRunForecast
from .model_interval_release import forecast_note
from .model_posterior import ModelPosteriorPlan, fit_model_posterior, prepare_model_posterior

__all__ = ["forecast_model_posterior", "ModelPosteriorForecast"]


@dataclass(frozen=True, kw_only=True)
class ModelPosteriorForecast(TemperedRunForecast):
    """A model posterior run's plan and forecast, from public inputs only (no budget spent); the fields every
    forecast has are :class:`~dp_infer.routes.forecast.TemperedRunForecast`'s.

    ``eps``, ``delta``: the run's whole event (path, releases, clipped-row count); ``dim``: the model's
    unconstrained coordinates. ``prior_sd_ratio_floor``: every tempered posterior sd is at least this share of
    the prior's (from the declared per-example curvature bound); ``close_to_prior`` when it is at least
    :data:`~dp_infer.infer.model_posterior_plan.CLOSE_TO_PRIOR`. ``num_steps``: steps per chain (with
    ``preconditioner="fisher"`` the bound once the second moment is released, the run re-plans from it).
    ``interval_share``: the share of the run's mu^2 reserved for the interval release (0: none, the reason
    in ``interval_skipped``), ``interval_release`` what it releases; with the weighted release (a finite
    observation support and public feature rows) ``interval_width`` (the median coordinate's interval sd
    over the non-private posterior's) and ``interval_typical_sd`` (unconstrained units) are forecast at
    ``interval_forecast_at``: ``"prior centre"`` (floors, read as "at least about": the release is made at
    the draws' mean, where confident rows carry less information; docs/results.md) or ``"forecast_at"``
    (your public guess of the estimate: a forecast as good as the guess). ``notes``: the plan's own. ``plan``: the
    :class:`~dp_infer.infer.model_posterior.ModelPosteriorPlan` the run would be given.
    """

    prior_sd_ratio_floor: float
    interval_share: float
    interval_release: str | None
    interval_skipped: str | None
    interval_typical_sd: float | None
    interval_forecast_at: str | None
    coordinates: tuple[str, ...]
    plan: ModelPosteriorPlan | None = field(default=None, repr=False, compare=False)

    def explain(self) -> str:
        """The forecast in plain lines (what a run prints nowhere before it charges). The intervals' width is
        the plan's own note (:func:`~dp_infer.infer.model_interval_release.forecast_note`), printed once, in
        its place."""
        width_note = None if self.interval_width is None or self.interval_share <= 0 else forecast_note(
            {"width_ratio": self.interval_width, "typical_sd": self.interval_typical_sd,
             "at": self.interval_forecast_at})
        lines = [f"Forecast of a posterior run of your model (public inputs only; nothing charged): n = {self.n}, "
                 f"{self.dim} unconstrained coordinates, (eps, delta) = ({self.eps:g}, {self.delta:g}) charged by "
                 "the run",
                 f"  beta = {self.beta:.4g} (beta / n = {self.beta_over_n:.3g}): the tempered draws' credible "
                 f"intervals are {self.interval_inflation:.3g}x the untempered posterior's where the data dominate",
                 f"  chains: {self.num_chains} x {self.num_steps} steps; planned bulk ESS {self.predicted_ess:.0f} "
                 f"(asked {self.ess}); one more effective draw would cost eps + "
                 f"{self.eps_per_extra_effective_draw:.2g}"]
        if self.close_to_prior:
            lines.append(f"  WARNING: every posterior sd will be at least {self.prior_sd_ratio_floor:.3g} of the "
                         "prior's: the tempered draws will say little about the data")
        else:
            lines.append(f"  posterior sds can shrink to {self.prior_sd_ratio_floor:.3g} of the prior's at most")
        if self.interval_share > 0:
            lines.append(f"  intervals for theta: a release of {self.interval_share:.0%} of the run's mu^2 after the "
                         f"draws: {self.interval_release}")
            if width_note is not None:
                lines.append("  " + width_note)
        else:
            lines.append(f"  intervals for theta: none ({self.interval_skipped or 'interval_share=0'})")
        lines.extend("  note: " + s for s in self.notes if s != width_note)
        return "\n".join(lines)


def forecast_model_posterior(model: Callable, X, y, **options: Any) -> ModelPosteriorForecast:
    """The plan and forecast of ``fit_model_posterior(model, X, y, **options)``, made as that run makes them,
    before anything is charged (see the module docstring). ``options``: every keyword of
    :func:`~dp_infer.infer.model_posterior.fit_model_posterior`, so one dict serves both calls; the run-only
    ones (``seed``, ``key_impl``, ``ledger``, ``dataset_id``, ``progress_bar``, ``chain_method``) are checked
    where the run checks them before its charge and otherwise not used: a forecast charges nothing. Bad input
    is refused as the run refuses it (a one-line ``ValueError`` naming the parameter)."""
    try:
        bound = inspect.signature(fit_model_posterior).bind(model, X, y, **options)
    except TypeError as e:
        raise ValueError(f"forecast_model_posterior takes fit_model_posterior's arguments: {e}") from None
    bound.apply_defaults()
    setup = prepare_model_posterior(bound.arguments)
    mpp = setup.plan
    plan, post = mpp.plan, mpp.plan.posterior
    mp = post.model
    fc = mpp.interval_forecast or {}
    names = tuple(unconstrained_names(setup.ml, setup.coords, setup.dims))
    return ModelPosteriorForecast(
        n=int(setup.public["n"]), dim=int(setup.ml.dim), eps=float(plan.eps), delta=float(plan.delta),
        ess=int(post.ess_target), num_chains=int(plan.num_chains), beta=float(plan.beta),
        beta_over_n=float(post.beta_over_n), interval_inflation=float(post.interval_inflation),
        predicted_ess=float(post.predicted_ess),
        num_steps=int(mp.forecast_num_steps if mp.forecast_num_steps is not None else plan.num_steps),
        eps_per_extra_effective_draw=float(post.eps_per_extra_effective_draw),
        prior_sd_ratio_floor=float(mp.prior_sd_ratio_floor), close_to_prior=bool(mp.close_to_prior),
        interval_share=float(post.interval_share), interval_release=mp.interval_release,
        interval_skipped=setup.interval_skipped, interval_width=fc.get("width_ratio"),
        interval_typical_sd=fc.get("typical_sd"), interval_forecast_at=fc.get("at"), coordinates=names,
        notes=tuple(plan.notes), plan=mpp)
