"""The typed part of a posterior-mode plan: what :func:`dp_infer.routes.posterior.plan_posterior`
decides besides beta, step and horizon, with named fields instead of a dict of string keys.

A :class:`PosteriorDetails` groups

* the forecast (effective draws asked and predicted, the declared mixing rate, the times),
* the budget split (the path's, the second moment's and the interval release's GDP ``mu``),
* the metric's source (the second moment's description),
* the step rule (:class:`StepRule`: the curvature bounds the step is planned from),
* the clip (:class:`ClipRule`, or None without one),
* the adaptation schedule (:class:`AdaptationSchedule`, or None for a fixed metric),
* and, for a NumPyro model's plan, the model's prior handling (:class:`ModelPrior`).

Every field is a function of public inputs (the planner's arguments and, after the second moment's
release, that release). On disk (``plan.as_dict()["posterior"]``, the run file's report) it is the
flat dict the run files have always carried: :meth:`PosteriorDetails.to_dict` and
:meth:`PosteriorDetails.from_dict` convert, so runs saved before load unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["AdaptationSchedule", "AdaptedPhase", "ClipRule", "ModelPrior", "PosteriorDetails", "StepRule"]


@dataclass(frozen=True)
class StepRule:
    """The curvature bounds a posterior plan's step is chosen from (public; units: per unit of the
    mean loss, rows in the declared norm).

    ``curvature``: kappa, the bound on the link's ``|phi''|`` (the loss's own); ``preconditioner_curvature``:
    the typical curvature the metric assumes (a tuning choice); ``step_curvature``: the bound the step
    uses (the clipped link's where the gradients are clipped); ``bound_M_phi``: the largest eigenvalue of
    the potential's Hessian bound in the planned metric; ``noise_margin``: the released second moment's
    noise norm bound (None for the prior metric); ``row_norm_sq``: the squared row norm the bound uses.
    """

    curvature: float
    preconditioner_curvature: float
    step_curvature: float
    bound_M_phi: float
    noise_margin: float | None
    row_norm_sq: float


@dataclass(frozen=True)
class ClipRule:
    """Per-example gradients clipped in the metric to ``||C^T g|| <= tau = radius / sqrt(beta)``."""

    radius: float
    tau: float


@dataclass(frozen=True)
class AdaptedPhase:
    """One phase an adapted run ran (a record written by the run, not by the planner)."""

    time: float
    step_size: float
    num_steps: int
    thinning: int


@dataclass(frozen=True)
class AdaptationSchedule:
    """The metric adapted from the chains' own draws: windows of Langevin time after the burn-in,
    then ``settle_time`` in the last metric before the sampling phase; ``step_safety`` is ``h M`` of
    the adapted phases. ``phases`` is empty in a plan and records what ran in a run's plan."""

    windows: tuple[float, ...]
    settle_time: float
    warmup_time: float
    step_safety: float
    windows_rule: str
    phases: tuple[AdaptedPhase, ...] = ()

    def with_phases(self, phases) -> AdaptationSchedule:
        return dataclasses.replace(self, phases=tuple(AdaptedPhase(**p) if isinstance(p, dict) else p
                                                      for p in phases))

    def to_dict(self) -> dict:
        d = {"windows": list(self.windows), "settle_time": self.settle_time, "warmup_time": self.warmup_time,
             "step_safety": self.step_safety, "windows_rule": self.windows_rule}
        if self.phases:
            d["phases"] = [dataclasses.asdict(p) for p in self.phases]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> AdaptationSchedule:
        d = dict(d)
        phases = d.pop("phases", ())
        return cls(windows=tuple(float(w) for w in d.pop("windows")), **d).with_phases(phases)


@dataclass(frozen=True)
class ModelPrior:
    """How a NumPyro model's plan handles the model's own prior (:mod:`dp_infer.infer.model_posterior`):
    the latents are whitened by the prior's scales, the gradients clipped to ``clip_norm`` there."""

    prior: str
    preconditioner_source: str
    prior_scales: tuple[float, ...]
    clip: str
    clip_norm: float
    smoothness: float
    smoothness_source: str
    fisher_curvature: float | None
    prior_curvature_whitened: float
    prior_sd_ratio_floor: float
    close_to_prior: bool
    forecast_num_steps: int | None = None
    interval_release: str | None = None


# the flat on-disk keys of the nested groups, in the order the run files have always carried them
_STEP_KEYS = {"curvature": "curvature", "preconditioner_curvature": "preconditioner_curvature",
              "step_curvature": "step_curvature", "step_bound_M_phi": "bound_M_phi",
              "step_noise_margin": "noise_margin", "step_row_norm_sq": "row_norm_sq"}
_MODEL_KEYS = tuple(f.name for f in dataclasses.fields(ModelPrior))


@dataclass(frozen=True)
class PosteriorDetails:
    """The posterior-mode plan's forecast, budget split, metric source, step rule, clip and adaptation
    schedule (module doc). ``second_moment`` is the metric's source as
    :meth:`~dp_infer.routes.preconditioning.SecondMoment.describe` gives it; ``sensitivity_bound`` names
    the bound the path's sensitivity came from."""

    ess_target: int
    predicted_ess: float
    mixing_rate_declared: float
    burn_in_time: float
    sample_time: float
    beta_over_n: float
    interval_inflation: float
    beta_capped_at_n: bool
    mu_path: float
    mu_second_moment: float
    mu_interval: float
    interval_share: float
    eps_per_extra_effective_draw: float
    second_moment: dict
    sensitivity_bound: str
    step: StepRule
    clip: ClipRule | None = None
    adaptation: AdaptationSchedule | None = None
    model: ModelPrior | None = None

    @property
    def clip_radius(self) -> float | None:
        return None if self.clip is None else self.clip.radius

    @property
    def clip_tau(self) -> float | None:
        return None if self.clip is None else self.clip.tau

    def to_dict(self) -> dict:
        """The flat dict a run file stores (the keys runs have always carried)."""
        s = self.step
        d = {"ess_target": self.ess_target, "predicted_ess": self.predicted_ess,
             "mixing_rate_declared": self.mixing_rate_declared, "burn_in_time": self.burn_in_time,
             "sample_time": self.sample_time, "beta_over_n": self.beta_over_n,
             "interval_inflation": self.interval_inflation, "curvature": s.curvature,
             "preconditioner_curvature": s.preconditioner_curvature, "step_curvature": s.step_curvature,
             "mu_path": self.mu_path, "mu_second_moment": self.mu_second_moment, "mu_interval": self.mu_interval,
             "interval_share": self.interval_share,
             "eps_per_extra_effective_draw": self.eps_per_extra_effective_draw,
             "step_bound_M_phi": s.bound_M_phi, "second_moment": self.second_moment,
             "sensitivity_bound": self.sensitivity_bound, "clip_radius": self.clip_radius,
             "clip_tau": self.clip_tau,
             "adaptation": None if self.adaptation is None else self.adaptation.to_dict(),
             "beta_capped_at_n": self.beta_capped_at_n, "step_noise_margin": s.noise_margin,
             "step_row_norm_sq": s.row_norm_sq}
        if self.model is not None:
            m = dataclasses.asdict(self.model)
            m["prior_scales"] = list(self.model.prior_scales)
            if m["interval_release"] is None:
                del m["interval_release"]
            d.update(m)
        return d

    @classmethod
    def from_dict(cls, d: Any) -> PosteriorDetails:
        """The inverse of :meth:`to_dict`; refuses a dict with keys no plan carries (a damaged file).
        Plans saved before the clipped step bound carry no ``step_curvature``: the loss's own is used."""
        if isinstance(d, PosteriorDetails):
            return d
        if not isinstance(d, dict):
            raise ValueError(f"plan.posterior must be a dict of the posterior plan's fields, got {type(d).__name__}")
        d = dict(d)
        d.setdefault("step_curvature", d.get("curvature"))
        step = StepRule(**{field: d.pop(key) for key, field in _STEP_KEYS.items()})
        radius, tau = d.pop("clip_radius", None), d.pop("clip_tau", None)
        clip = None if radius is None else ClipRule(radius=float(radius), tau=float(tau))
        ad = d.pop("adaptation", None)
        adaptation = None if ad is None else AdaptationSchedule.from_dict(ad)
        model = None
        if "prior_scales" in d:
            m = {k: d.pop(k) for k in _MODEL_KEYS if k in d}
            m["prior_scales"] = tuple(float(v) for v in m["prior_scales"])
            model = ModelPrior(**m)
        names = {f.name for f in dataclasses.fields(cls)} - {"step", "clip", "adaptation", "model"}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"plan.posterior carries keys no posterior plan has: {unknown} (a damaged run file?)")
        return cls(step=step, clip=clip, adaptation=adaptation, model=model, **d)
