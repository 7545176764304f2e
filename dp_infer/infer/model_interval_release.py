"""A NumPyro model's posterior run, its interval release: the forecast before the charge and the release after
the draws (the model route, :mod:`dp_infer.infer.model_posterior`, plans and runs; this module holds what that
route reserves for the intervals).

* :func:`weighted_interval_forecast`: with the weighted release (:mod:`dp_infer.model.weighted_release`, a
  finite observation support and public feature rows), the intervals' width over the non-private posterior's
  and their typical sd, predicted from the public rows at the prior stand-in's centre (a floor) or at a public
  guess of the estimate (``forecast_at``, checked by :func:`check_forecast_point`), before anything is charged
  (:func:`forecast_note` words it for the plan's notes).
* :func:`release_for_intervals`: the release the plan reserved, at the draws' mean, after the draws are kept.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..losses import PerExampleLoss
from ..model import score_release as _sr
from ..model.weighted_release import forecast_intervals, release_weighted_scores
from ..routes.plan import SamplingPlan
from .posterior import PosteriorRun

__all__ = ["weighted_interval_forecast", "forecast_note", "check_forecast_point", "release_for_intervals"]


def check_forecast_point(ml, forecast_at) -> np.ndarray | None:
    """``forecast_at`` (a public guess of the estimate: every latent site's constrained value, e.g. a fit to
    public labelled rows or a published model) as the flat unconstrained vector, or None. Refused by name in one
    line (not a dict, a site missing or unknown, a wrong shape, a value not finite or outside its support)."""
    if forecast_at is None:
        return None
    if not isinstance(forecast_at, Mapping):
        raise ValueError("forecast_at must be a dict of every latent site's value (constrained, e.g. "
                         f"{{'w': array}}), got {type(forecast_at).__name__}")
    sites = list(ml.latent_sites)
    missing, unknown = [k for k in sites if k not in forecast_at], [k for k in forecast_at if k not in sites]
    if missing or unknown:
        raise ValueError(f"forecast_at must give every latent site of the model {sites} and no other: "
                         + (f"missing {missing}" if missing else f"unknown {unknown}"))
    shapes = {k: np.shape(v) for k, v in ml.constrain(np.zeros(ml.dim)).items()}
    values = {}
    for k in sites:
        v = np.asarray(forecast_at[k], dtype=np.float64)
        if v.shape != shapes[k] or not np.all(np.isfinite(v)):
            raise ValueError(f"forecast_at[{k!r}] must be finite with the site's shape {shapes[k]}, got shape "
                             f"{v.shape}" + ("" if v.shape != shapes[k] else " with non-finite values"))
        values[k] = v
    flat = np.asarray(ml.unconstrain(values), dtype=np.float64)
    unconstrained = ml.unravel(flat)
    for k in sites:  # outside a support the inverse transform is not finite (a negative scale's log)
        if not np.all(np.isfinite(np.asarray(unconstrained[k], dtype=np.float64))):
            raise ValueError(f"forecast_at[{k!r}] lies outside the site's support")
    return flat


def weighted_interval_forecast(plan: SamplingPlan, scales, loss: PerExampleLoss, public) -> dict | None:
    """Before the charge: the weighted release's intervals forecast from the public rows
    (:func:`~dp_infer.model.weighted_release.forecast_intervals`, the last gradient's mu from the plan's release
    share) at ``public["forecast_point"]`` (flat unconstrained theta from ``forecast_at``: ``"at"`` is
    ``"forecast_at"``) or else at the prior stand-in's centre (``"at"``: ``"prior centre"``, a floor); None
    without a weighted release in the plan. Public inputs only."""
    mu_interval = 0.0 if plan.posterior is None else plan.posterior.mu_interval
    if public["release_labels"] is None or public.get("prior_gauss") is None or mu_interval <= 0:
        return None
    parts = _sr.score_release_event(mu_interval, n=public["n"], clip_norm=public["clip_norm"], curvature="public",
                                    weighted=True).metadata["parts"]
    s = np.asarray(scales, dtype=np.float64)
    given = public.get("forecast_point")
    mean, sd = public["prior_gauss"][0], public["prior_gauss"][1]
    point = np.asarray(mean if given is None else given, dtype=np.float64)
    out = forecast_intervals(loss.fn, public["public_rows"], public["release_labels"], point / s, s, sd,
                             public["n"], parts[-1]["mu"])
    out["at"] = "prior centre" if given is None else "forecast_at"
    return out


def forecast_note(forecast: dict) -> str:
    """The plan's note for :func:`weighted_interval_forecast`'s dict. At the prior's centre it is a floor, not a
    point forecast: there a Bernoulli-logit model's every row has ``p = 1/2``, where its information is largest
    and its score bound ``max(p, 1 - p)`` smallest against it; at the draws' mean (where the release is made)
    confident rows carry less information for the same bound, so the interval is wider and so is its width over
    the non-private one (Adult, eps 1: forecast 1.29x and sd 1.35, measured 1.88-2.07x and 3.6-4.5). At a public
    guess of the estimate (``forecast_at``; Adult at the public test file's MAP: 2.01x and sd 3.07) it is a
    forecast of the run's width, as good as the guess (docs/results.md)."""
    figures = (f"{forecast['width_ratio']:.2g}x the non-private posterior's sd for the median coordinate (typical "
               f"sd {'' if forecast.get('at') == 'forecast_at' else 'at least '}about {forecast['typical_sd']:.3g}, "
               "unconstrained units)")
    if forecast.get("at") == "forecast_at":
        return (f"forecast: intervals about {figures}, read from the public rows at forecast_at (your public guess "
                "of the estimate; as close to the run as the guess is to the draws' mean: Adult at the public test "
                "file's MAP 2.0x forecast, 1.9-2.1x measured)")
    return (f"forecast: intervals at least about {figures}, read from the public rows at the prior's centre, where "
            "the model has no confident rows; the release, made at the draws' mean, is wider where the model "
            "separates the rows well (Adult: 1.3x forecast, 1.9x measured; forecast_at, a public guess of the "
            "estimate, reads them there instead)")


def release_for_intervals(run: PosteriorRun, loss: PerExampleLoss, rows, y, scales, clip_norm: float,
                           prior_gauss, key, public_j=None, labels=None) -> str | None:
    """The score release the plan reserved (``posterior.mu_interval``, charged with the run), at the
    draws' mean in the whitened coordinates, kept in ``run.report_extras["interval_release"]``. Skipped
    (spending less than charged; the reason returned) when the draws are not finite. ``public_j``: ``J``
    from public rows (:mod:`dp_infer.model.public_information`) for a public-curvature release; ``labels``: with
    it, the observation's finite support: the weighted release (:mod:`dp_infer.model.weighted_release`)."""
    mu = 0.0 if run.plan.posterior is None else run.plan.posterior.mu_interval
    theta = run.draws().reshape(-1, run.plan.dim)
    if mu <= 0:
        return None
    if not np.all(np.isfinite(theta)):
        return "the chains diverged (non-finite draws): the reserved interval release was not made"
    s = np.asarray(scales, dtype=np.float64)
    phi = theta / s
    cov = np.atleast_2d(np.cov(phi.T)) + 1e-12 * np.eye(run.plan.dim)
    kw = dict(point=phi.mean(axis=0), scales=s, clip_norm=clip_norm, mu=mu, key=key, trust_covariance=cov,
              prior_mean=prior_gauss[0], prior_sd=prior_gauss[1], names=prior_gauss[2])
    run.report_extras["interval_release"] = (
        release_weighted_scores(loss.fn, rows, y, public=public_j, labels=labels, **kw) if labels is not None else
        _sr.release_score_statistics(loss.fn, rows, y, public_second_moment=public_j, **kw))
    return None
