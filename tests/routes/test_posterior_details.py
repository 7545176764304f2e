"""The posterior plan's typed details (dp_infer.routes.posterior_details): named fields in memory,
the flat dict run files have always carried on disk, and nothing lost or invented between them."""

import dataclasses
import math

import pytest

import dp_infer
from dp_infer.infer.run_io import plan_from_dict
from dp_infer.routes.posterior import plan_posterior
from dp_infer.routes.posterior_details import (AdaptationSchedule, AdaptedPhase, ClipRule, ModelPrior,
                                               PosteriorDetails, StepRule)
from dp_infer.routes.preconditioning import pending_second_moment

LOSS = dp_infer.logistic(row_norm=1.0)

# the keys a posterior plan's dict carried before it was typed (run files written by 2026-11-29)
OLD_KEYS = {"ess_target", "predicted_ess", "mixing_rate_declared", "burn_in_time", "sample_time", "beta_over_n",
            "interval_inflation", "curvature", "preconditioner_curvature", "step_curvature", "mu_path",
            "mu_second_moment", "mu_interval", "interval_share", "eps_per_extra_effective_draw",
            "step_bound_M_phi", "second_moment", "sensitivity_bound", "clip_radius", "clip_tau", "adaptation",
            "beta_capped_at_n", "step_noise_margin", "step_row_norm_sq"}


def _plans():
    sm = pending_second_moment(5000, 5, max_sq_norm=1.0, mu=0.1)
    clipped = plan_posterior(LOSS, 5000, 5, eps=1.0, delta=1e-5, prior_precision=1.0, second_moment=sm,
                             clip_radius=2.0, adapt_metric=True, interval_share=0.5)
    plain = plan_posterior(LOSS, 2000, 3, eps=1.0, delta=1e-5, prior_precision=1.0)
    return clipped, plain


def test_the_planner_fills_named_groups_and_the_disk_form_keeps_the_old_keys():
    clipped, plain = _plans()
    post = clipped.posterior
    assert isinstance(post, PosteriorDetails) and isinstance(post.step, StepRule)
    assert isinstance(post.clip, ClipRule) and isinstance(post.adaptation, AdaptationSchedule)
    assert post.clip.tau == pytest.approx(post.clip.radius / math.sqrt(clipped.beta), rel=1e-15)
    assert post.step.step_curvature == 2.0 * post.step.curvature  # the clipped logistic link's bound
    assert plain.posterior.clip is None and plain.posterior.adaptation is None
    assert plain.posterior.clip_radius is None and plain.posterior.clip_tau is None
    for p in (clipped, plain):
        d = p.as_dict()["posterior"]
        assert set(d) == OLD_KEYS
        assert d["clip_radius"] == p.posterior.clip_radius and d["step_bound_M_phi"] == p.posterior.step.bound_M_phi
        assert PosteriorDetails.from_dict(d) == p.posterior


def test_a_plan_round_trips_through_its_report_and_a_run_phase_record_survives():
    clipped, _ = _plans()
    ad = clipped.posterior.adaptation.with_phases([{"time": 3.0, "step_size": 0.1, "num_steps": 30, "thinning": 1}])
    ran = dataclasses.replace(clipped, posterior=dataclasses.replace(clipped.posterior, adaptation=ad))
    back = plan_from_dict(ran.as_dict())
    assert back.posterior == ran.posterior
    assert back.posterior.adaptation.phases == (AdaptedPhase(time=3.0, step_size=0.1, num_steps=30, thinning=1),)
    assert back.as_dict() == ran.as_dict()


def test_a_model_plan_keeps_its_prior_handling():
    clipped, _ = _plans()
    model = ModelPrior(prior="the model's own prior", preconditioner_source="prior scales", prior_scales=(1.0, 2.0),
                       clip="clipped to 1", clip_norm=1.0, smoothness=1.0, smoothness_source="declared",
                       fisher_curvature=None, prior_curvature_whitened=1.0, prior_sd_ratio_floor=0.5,
                       close_to_prior=False, forecast_num_steps=None)
    post = dataclasses.replace(clipped.posterior, model=model)
    d = post.to_dict()
    assert d["prior_scales"] == [1.0, 2.0] and "interval_release" not in d and d["forecast_num_steps"] is None
    assert PosteriorDetails.from_dict(d) == post
    released = dataclasses.replace(post, model=dataclasses.replace(model, interval_release="scores"))
    assert PosteriorDetails.from_dict(released.to_dict()).model.interval_release == "scores"


def test_older_files_load_and_damaged_ones_are_refused():
    _, plain = _plans()
    d = plain.posterior.to_dict()
    del d["step_curvature"]  # plans saved before the clipped link's step bound
    assert PosteriorDetails.from_dict(d).step.step_curvature == plain.posterior.step.curvature
    with pytest.raises(ValueError, match=r"keys no posterior plan has: \['surprise'\]"):
        PosteriorDetails.from_dict({**plain.posterior.to_dict(), "surprise": 1})
    with pytest.raises(ValueError, match="plan.posterior must be a dict"):
        PosteriorDetails.from_dict([1, 2])
