"""A forecast of a posterior-mode run from public inputs only, before any budget is spent.

:func:`forecast_posterior` plans exactly as :func:`dp_infer.infer.posterior.fit_posterior` does
before its second-moment release, and states what the run will give: beta / n, how much wider
than the untempered posterior's the intervals will be, the expected ESS, the expected number of
steps and wall time (a documented cost model), and a warning when the target will be close to the
prior. Nothing here reads data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np

from scipy.optimize import brentq

from .._validation import check_choice, check_delta, check_finite_array, check_positive, check_positive_int, \
    check_target_epsilon
from ..losses import PerExampleLoss
from ..privacy.conversions import gdp_mu
from ..privacy.events import GdpEvent
from .plan import step_schedule
from ..losses.metric_clip import resolve_clip_radius
from .newton_release import (curvature_snr, default_interval_share, interval_width_forecast, link_bounds,
                             residual_scores_mean_square)
from .public_rows import public_interval_width_forecast
from .posterior import DEFAULT_ESS, DEFAULT_POSTERIOR_KERNEL, expected_steps, plan_posterior
from .preconditioning import SecondMoment, pending_second_moment, prior_second_moment, second_moment_row_bound

__all__ = ["forecast_posterior", "PosteriorForecast", "TemperedRunForecast", "SECONDS_PER_ROW_STEP_PARAM",
           "FIXED_SECONDS", "sampling_seconds", "CLOSE_TO_PRIOR", "tempered_sd_ratios"]

#: wall-time cost model: seconds per (step x row x parameter x chain) of the full-batch gradient on
#: this project's 2-core machine, idle: 2.5 ms a step at Adult's 30162 rows x 100 x 4 chains
#: (issue 29's CPU time of the quick demo; the demo with the clipped, adapted plan, 2026-11-27:
#: forecast 58 s, measured 58.8 s wall). An ESTIMATE -- other machines, loads and dtypes differ by
#: large factors. Below :data:`MIN_SHAPE_SHARE` of that shape a step costs as at that share (the
#: per-step overhead of the loop)
CALIBRATION_SHAPE = 30162 * 100 * 4
SECONDS_PER_ROW_STEP_PARAM = 2.5e-3 / CALIBRATION_SHAPE
MIN_SHAPE_SHARE = 0.05
#: data, compilation (one per adaptation phase), the mixing checks, seconds (same caveat)
FIXED_SECONDS = 20.0
#: warn when the tempered posterior's sd of a typical coordinate is within this factor of the prior's
CLOSE_TO_PRIOR = 0.9


def sampling_seconds(steps: float, n: int, dim: int, num_chains: int) -> float:
    """The cost model's sampling seconds for ``steps`` steps of ``num_chains`` chains on n x dim rows
    (idle 2-core machine; see :data:`SECONDS_PER_ROW_STEP_PARAM`)."""
    shape = float(n) * dim * num_chains
    return float(steps) * SECONDS_PER_ROW_STEP_PARAM * max(shape, MIN_SHAPE_SHARE * CALIBRATION_SHAPE)


def tempered_sd_ratios(beta: float, prior_precision, feature_mean_square,
                       mean_curvature: Callable[[float], float] | float) -> tuple[np.ndarray, float, float]:
    """Per coordinate, the tempered posterior's sd over the prior's, from public inputs only.

    A mean-field Gaussian reading of ``prior x exp(-beta L)`` for a generalised linear loss whose
    data curvature depends on how far the target spreads: coordinate j has precision
    ``lambda_j + beta k(v) m2_j`` (``m2_j``: the feature's mean square, in squared feature units;
    ``lambda_j``: the prior's precision), and ``k(v)`` is the link's curvature averaged over the
    rows' scores ``z = <theta, x>``, whose variance under the target is ``v = sum_j m2_j s_j^2`` (the
    rows' mean of ``x^T diag(s^2) x``). So ``v`` solves ``v = sum_j m2_j / (lambda_j + beta k(v) m2_j)``;
    the smallest root is taken (the narrowest self-consistent spread: scanned on a grid from 0 to
    ``sum_j m2_j / lambda_j``, refined by Brent's method). A wide tempered target flattens a logistic
    link, and the clip in the draws' metric flattens it more, which the Gaussian arithmetic at a fixed
    curvature misses (Adult, eps = 1, 5,000 rows: that said 0.85 of the prior sd, the run measured 0.99).

    ``mean_curvature``: ``k(v)`` (the loss's :meth:`~dp_infer.losses.behaviour.LossBehaviour.bound_spread_curvature`
    with its clip level) or a constant (then ``s_j = (lambda_j + beta k m2_j)^-1/2``, the Gaussian
    arithmetic). Returns ``(ratios s_j sqrt(lambda_j), v, k(v))``.
    Assumptions: coordinates independent under the target (a diagonal reading), the scores centred at 0
    (where the data dominate, their own estimate puts the scores elsewhere and the curvature lower:
    the forecast then says a narrower target than the run's).
    """
    m2 = check_finite_array("feature_mean_square", feature_mean_square, ndim=1)
    if (m2 < 0).any():
        raise ValueError("feature_mean_square must be >= 0 in every coordinate")
    lam = np.broadcast_to(np.asarray(prior_precision, dtype=np.float64), m2.shape)
    if not (np.all(np.isfinite(lam)) and np.all(lam > 0)):
        raise ValueError("prior_precision must be finite and > 0 in every coordinate")
    beta = check_positive("beta", beta)
    k = mean_curvature if callable(mean_curvature) else (lambda v, c=float(mean_curvature): c)

    def spread(v):
        return float(np.sum(m2 / (lam + beta * k(v) * m2)))

    v_max = float(np.sum(m2 / lam))
    if v_max == 0.0:
        return np.ones_like(m2), 0.0, float(k(0.0))
    grid = np.concatenate([[0.0], np.geomspace(v_max * 1e-12, v_max, 240)])
    gap = np.array([spread(v) - v for v in grid])  # >= 0 at 0, <= 0 at v_max (k >= 0)
    if not (gap <= 0.0).any():  # only a curvature of 0 at v_max leaves no sign change: the prior alone
        return np.ones_like(m2), v_max, float(k(v_max))
    i = int(np.argmax(gap <= 0.0))
    v = float(grid[i]) if gap[i] == 0.0 else brentq(lambda u: spread(u) - u, grid[i - 1], grid[i], rtol=1e-12)
    kv = float(k(v))
    return np.sqrt(lam / (lam + beta * kv * m2)), v, kv


@dataclass(frozen=True, kw_only=True)
class TemperedRunForecast:
    """The figures every posterior-mode forecast gives (a built-in loss's, :class:`PosteriorForecast`, and your own
    NumPyro model's, :class:`~dp_infer.infer.model_forecast.ModelPosteriorForecast`), from public inputs only.

    ``n`` rows and ``dim`` parameters (unconstrained coordinates for a model); ``eps``, ``delta``: what the run
    would charge (its whole event); ``ess``: the effective draws asked for, ``predicted_ess`` the plan's bulk ESS
    over ``num_chains`` chains of ``num_steps`` steps, and ``eps_per_extra_effective_draw`` what one more would
    cost. ``beta``, ``beta_over_n`` and ``interval_inflation = sqrt(n / beta)``: the tempering, and how much wider
    than the untempered posterior's the tempered draws' credible intervals are in a direction the data dominate.
    ``close_to_prior``: the tempered draws will say little about the data (each subclass says by which
    measure). ``interval_width``: the interval release's forecast width over the non-private posterior's for a
    typical coordinate, None where the run makes no interval release or cannot forecast it. ``notes``: the plan's.
    """

    n: int
    dim: int
    eps: float
    delta: float
    ess: int
    num_chains: int
    beta: float
    beta_over_n: float
    interval_inflation: float
    predicted_ess: float
    num_steps: int
    eps_per_extra_effective_draw: float
    close_to_prior: bool
    interval_width: float | None = None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """The forecast's figures (every field a ``repr`` shows: a model forecast's ``plan`` object is left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.repr}


@dataclass(frozen=True, kw_only=True)
class PosteriorForecast(TemperedRunForecast):
    """What a built-in loss's posterior-mode run will give, from public inputs only (no data, no budget spent);
    the fields every forecast has are :class:`TemperedRunForecast`'s.

    ``interval_inflation`` is a floor for a clipped target, which the clip makes flatter than ``beta L`` (on
    Adult's 8 features the tempered draws' 90% widths measured 1.1x it at eps = 0.5 and 2.3x at eps = 4,
    notebook 07); ``inflation_typical`` the same for a typical coordinate. ``interval_width``: with
    ``interval_curvature="public"`` and ``X_public``, read from the public rows as the release reads them
    (:func:`~dp_infer.routes.public_rows.public_interval_width_forecast`, at the prior's centre); else
    :func:`~dp_infer.routes.newton_release.interval_width_forecast` (the rows spread evenly).
    ``sd_ratios``: each coordinate's tempered posterior sd over its prior sd (:func:`tempered_sd_ratios`:
    the link's curvature averaged over the target's own spread, clip included, where the loss declares
    it; else ``sqrt(lambda / (beta kappa_P m2 + lambda))``), from each coordinate's feature mean square
    ``m2`` (``feature_mean_square_source``: public rows', or the row norm spread evenly) -- a forecast,
    not a measurement; ``sd_ratio_to_prior``: their median (the typical coordinate), compared with the
    run's measured median by :mod:`dp_infer.diagnostics.prior_dominance`; ``close_to_prior`` when it
    exceeds :data:`CLOSE_TO_PRIOR`; ``prior_held_below``: the feature mean square below which a
    coordinate's sd is within that factor of the prior's. ``seconds``: the cost model
    ``steps x chains x n x dim x SECONDS_PER_ROW_STEP_PARAM + FIXED_SECONDS`` (an estimate).
    """

    inflation_typical: float
    sd_ratio_to_prior: float
    seconds: float
    beta_at_double_ess: float
    clip_radius: float | None
    second_moment: str
    prior_held_below: float
    sd_ratios: tuple[float, ...] = ()
    feature_mean_square_source: str = ""
    #: one line on the intervals for theta: the interval release's share and forecast width (the number in
    #: :attr:`interval_width`), or why none
    intervals: str = ""

    @property
    def prior_dominated_count(self) -> int:
        """How many coordinates' forecast sd is at least :data:`CLOSE_TO_PRIOR` of the prior's."""
        return int(sum(r >= CLOSE_TO_PRIOR for r in self.sd_ratios))

    def explain(self) -> str:
        """A few lines for a user deciding whether to pay for the run."""
        lines = [
            f"Forecast (public inputs only, nothing spent yet): n = {self.n}, {self.dim} parameters, "
            f"(eps, delta) = ({self.eps:g}, {self.delta:g}), {self.ess} effective draws over {self.num_chains} chains",
            f"  target: prior x exp(-beta L) with beta = {self.beta:.4g} (beta / n = {self.beta_over_n:.3g}); "
            f"credible intervals at least about {self.interval_inflation:.3g}x as wide as the untempered posterior's "
            f"in directions the data dominate ({self.inflation_typical:.3g}x for a typical coordinate; a clipped "
            "target is flatter still: 1.1-2.3x more, measured in notebook 07)",
            "  per-example gradients: " + (f"clipped in the preconditioner's metric at radius {self.clip_radius:.3g} "
                                            "(rows of high leverage count less; for the logistic loss the weight is label-free, so the target stays centred on the data's estimate)"
                                            if self.clip_radius is not None else "not clipped (the loss's own bound)"),
            f"  expected bulk ESS {self.predicted_ess:.0f}; doubling the draws would lower beta to "
            f"{self.beta_at_double_ess:.4g}; one more effective draw costs eps + {self.eps_per_extra_effective_draw:.2g}",
            f"  expected wall time about {self.seconds:.0f} s ({self.num_steps} steps per chain; cost model "
            f"{SECONDS_PER_ROW_STEP_PARAM:g} s per step x row x parameter x chain + {FIXED_SECONDS:g} s, an estimate)",
        ]
        if self.close_to_prior and self.interval_width is not None:  # by design: the release carries the data
            lines.append(f"  the tempered draws: a typical coordinate's posterior sd is forecast at "
                         f"{self.sd_ratio_to_prior:.2f} of the prior sd; they will say little about the data, the "
                         "intervals for theta (the interval release) carry it")
        elif self.close_to_prior:
            lines.append(f"  WARNING: at this n and eps, the posterior sd of a typical coordinate will be within "
                         f"{100 * (1 - self.sd_ratio_to_prior):.0f}% of the prior sd (ratio {self.sd_ratio_to_prior:.2f}): "
                         "the draws will say little about the data. More rows, a larger eps, fewer effective "
                         "draws or a tighter prior change this.")
        else:
            lines.append(f"  a typical coordinate's posterior sd is forecast at {self.sd_ratio_to_prior:.2f} of the prior sd")
        lines.append(f"  forecast prior-dominated (sd within 10% of the prior's): {self.prior_dominated_count} of "
                     f"{self.dim} coordinates (features' mean squares from {self.feature_mean_square_source})")
        lines.append(f"  coordinates whose feature has mean square below {self.prior_held_below:.3g} (e.g. a category level "
                     f"rarer than {self.prior_held_below:.2%} of rows) will have a posterior sd within 10% of the prior's")
        if self.intervals:
            lines.append("  " + self.intervals)
        lines.extend("  note: " + s for s in self.notes)
        return "\n".join(lines)


def forecast_posterior(loss: PerExampleLoss, n: int, dim: int, *, eps: float, delta: float, prior_precision,
                       ess: int = DEFAULT_ESS, num_chains: int = 4, rows: Any = None,
                       clip_radius: float | str | None = "auto", kernel: str = DEFAULT_POSTERIOR_KERNEL,
                       preconditioner: str = "private",
                       precond_share: float = 0.1, second_moment: SecondMoment | None = None,
                       feature_mean_square=None, X_public=None, residual_scale: float | None = None,
                       **plan_kwargs) -> PosteriorForecast:
    """Forecast a posterior-mode run from public inputs only (see :class:`PosteriorForecast`).

    Plans exactly as :func:`dp_infer.fit_posterior.fit_posterior` does before any release
    (``preconditioner="private"``: a stand-in second moment carrying its event; ``"public"``
    needs ``second_moment`` = the public one; ``"prior"``: none). beta is the run's when the clip
    sets the sensitivity (then it does not depend on the released second moment); the step count
    uses the public bound ``M_phi <= kappa / kappa_P + beta kappa e / min(lambda)`` with ``e`` the
    release's noise bound (the run's own plan, made after the release, has at most that many steps
    unless its noise exceeds the bound, probability <= 1e-6).

    The tempered sds (:func:`tempered_sd_ratios`) need each coordinate's feature mean square:
    ``X_public`` (feature rows declared public, e.g. a test file's: their per-column mean squares),
    else ``feature_mean_square`` (a number, or one per coordinate), else the row norm spread evenly,
    ``R^2 / dim``. With ``interval_curvature="public"``, ``X_public`` also gives the intervals' width
    (``public_interval_width=`` takes a figure already read from them instead).

    ``residual_scale`` (Huber or squared loss only): the residuals' sd you expect at the estimate, in the labels'
    units, a public assumption (domain knowledge, earlier public data). The intervals' width then uses the scores'
    mean square of Gaussian residuals of that sd
    (:func:`~dp_infer.routes.newton_release.residual_scores_mean_square`). Without it, the planner's typical
    curvature stands in, which is too narrow when the residuals are small next to the threshold (Huber, t5
    residuals of sd 0.39 against a threshold of 1: forecast 1.16x, measured 1.58x; docs/results.md).
    """
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss, got {type(loss).__name__}")
    n = check_positive_int("n", n)
    dim = check_positive_int("dim", dim)
    eps = check_target_epsilon(eps)
    delta = check_delta(delta)
    check_choice("preconditioner", preconditioner, ("private", "public", "prior"))
    j = None if residual_scale is None else residual_scores_mean_square(loss, residual_scale)
    if not 0 < precond_share < 1:
        raise ValueError(f"precond_share must lie in (0, 1), got {precond_share!r}")
    clip_radius = resolve_clip_radius(clip_radius, loss, dim)
    mu = gdp_mu(eps, delta)
    R2 = second_moment_row_bound(loss, rows)
    e = 0.0
    if preconditioner == "private":
        mu_sm = math.sqrt(precond_share) * mu
        if math.isfinite(R2):
            sm = pending_second_moment(n, dim, max_sq_norm=R2, mu=mu_sm)
            e = sm.noise_norm_bound
        else:
            sm = SecondMoment(None, "private (pending)", GdpEvent(mu=mu_sm, label="private_second_moment"))
    elif preconditioner == "public":
        if second_moment is None or second_moment.matrix is None:
            raise ValueError("preconditioner='public' needs second_moment= (dp_infer.preconditioning."
                             "public_second_moment of your public rows)")
        sm = second_moment
    else:
        sm = prior_second_moment()
    # as fit_posterior: the metric is adapted whenever the gradients are clipped, unless told otherwise
    if plan_kwargs.get("adapt_metric") is None:
        plan_kwargs["adapt_metric"] = clip_radius is not None
    why_none = None
    curvature = plan_kwargs.get("interval_curvature", "private")  # "public": from X_public, the gradients alone released
    if plan_kwargs.get("interval_share") is None:  # as fit_posterior on one device
        plan_kwargs["interval_share"], why_none = default_interval_share(loss, dim, n=n, mu=mu, curvature=curvature)
    kw = dict(prior_precision=prior_precision, ess=ess, num_chains=num_chains, rows=rows,
              clip_radius=clip_radius, kernel=kernel, **plan_kwargs)
    plan = plan_posterior(loss, n, dim, eps=eps, delta=delta, second_moment=sm, **kw)
    double = plan_posterior(loss, n, dim, eps=eps, delta=delta, second_moment=sm, **{**kw, "ess": 2 * ess})
    post = plan.posterior
    lam = np.asarray(plan.prior_precision)
    kappa, kappa_P = post.step.curvature, post.step.preconditioner_curvature
    steps = plan.num_steps
    notes = []
    if preconditioner != "prior":
        M_phi = kappa / kappa_P + plan.beta * kappa * e / float(lam.min())
        safety = plan_kwargs.get("step_safety", 0.25)
        if post.adaptation is None:
            _, steps, _ = step_schedule(M_phi, horizon=plan.horizon, num_draws=plan.num_draws,
                                        friction=plan.friction, safety=safety, min_steps=200)
        else:  # burn-in and window 1 at the plan's step, the rest in the adapted metric at its own safety
            steps = expected_steps(plan, M_phi, safety)
        if e > 0:
            notes.append(f"the private second moment's noise (spectral bound {e:.3g}) sets the step: "
                         "a larger precond_share or more rows shortens the run")
    m2, m2_source = _feature_mean_squares(dim, R2, feature_mean_square, X_public)
    score_curvature = _mean_curvature(loss, clip_radius, plan.beta, kappa_P)
    ratios, _, k_spread = tempered_sd_ratios(plan.beta, np.broadcast_to(lam, (dim,)), m2, score_curvature)
    lam_typ, m2_typ = float(np.median(lam)), float(np.median(m2))
    ratio = float(np.median(ratios))
    infl_typ = math.sqrt((n * kappa_P * m2_typ + lam_typ) / (plan.beta * kappa_P * m2_typ + lam_typ))
    seconds = FIXED_SECONDS + sampling_seconds(steps, n, dim, num_chains)
    if not post.sensitivity_bound.startswith("per-example"):
        notes.append("the sensitivity comes from the rows (not the clip): the run's beta depends on the released "
                     "second moment and may differ from this forecast")
    share = float(plan_kwargs.get("interval_share") or 0.0)
    if share > 0:
        width, source = _interval_width(loss, n, dim, mu, plan, share, curvature, X_public,
                                        plan_kwargs.get("public_interval_width"), j, residual_scale)
        intervals = (f"intervals for theta: an interval release of {share:.0%} of mu^2 ({source}); their width "
                     f"forecast at about {width:.2g}x the non-private posterior's for a typical coordinate")
    else:
        width, intervals = None, "intervals for theta: none, " + (why_none or "interval_share=0")
    return PosteriorForecast(intervals=intervals, interval_width=width,
        n=n, dim=dim, eps=eps, delta=delta, ess=ess, num_chains=num_chains, beta=plan.beta,
        beta_over_n=plan.beta / n, interval_inflation=math.sqrt(n / plan.beta), inflation_typical=infl_typ,
        sd_ratio_to_prior=ratio, close_to_prior=ratio > CLOSE_TO_PRIOR, sd_ratios=tuple(float(r) for r in ratios),
        feature_mean_square_source=m2_source, predicted_ess=post.predicted_ess,
        num_steps=int(steps), seconds=seconds, eps_per_extra_effective_draw=post.eps_per_extra_effective_draw,
        beta_at_double_ess=double.beta, clip_radius=clip_radius, second_moment=sm.source,
        prior_held_below=(1 / CLOSE_TO_PRIOR ** 2 - 1) * lam_typ / (plan.beta * k_spread), notes=tuple(notes))


def _interval_width(loss, n: int, dim: int, mu: float, plan, share: float, curvature: str, X_public,
                    given: float | None, scores_mean_square: float | None = None,
                    residual_scale: float | None = None) -> tuple[float, str]:
    """The interval release's forecast width over the non-private posterior's, and where it comes from: with
    public curvature and ``X_public``, read from the public rows as the release reads them
    (:func:`~dp_infer.routes.public_rows.public_interval_width_forecast`, or ``given``, the same figure computed
    by the caller); else the closed form for a typical coordinate
    (:func:`~dp_infer.routes.newton_release.interval_width_forecast`), with the scores' mean square of the
    declared ``residual_scale`` where one is given."""
    if curvature == "public" and (X_public is not None or given is not None):
        width = given if given is not None else public_interval_width_forecast(
            loss, X_public, plan.prior_precision, n, plan.posterior.mu_interval)
        return width, ("gradients only, the curvature from public feature rows; the width read from them at the "
                       "prior's centre")
    bounds = link_bounds(loss)
    width = interval_width_forecast(n, dim, mu, typical_curvature=plan.posterior.step.preconditioner_curvature,
                                    share=share, curvature=curvature, link_bound=1.0 if bounds is None else bounds[0],
                                    scores_mean_square=scores_mean_square)
    source = ("gradients only, the curvature from public feature rows" if curvature == "public" else
              f"curvature signal to noise {curvature_snr(n, dim, mu, share):.2g}")
    if scores_mean_square is not None:
        source += f"; the scores' spread from residual_scale = {residual_scale:.3g} (Gaussian residuals)"
    return width, source


def _feature_mean_squares(dim: int, R2: float, feature_mean_square, X_public) -> tuple[np.ndarray, str]:
    """Each coordinate's feature mean square for the forecast, and where it comes from (public inputs)."""
    if X_public is not None:
        if feature_mean_square is not None:
            raise ValueError("give X_public or feature_mean_square, not both")
        Xp = check_finite_array("X_public", X_public, ndim=2)
        if Xp.shape[1] != dim:
            raise ValueError(f"X_public must have {dim} columns (one per parameter), got {Xp.shape[1]}")
        return (Xp ** 2).mean(axis=0), f"the {Xp.shape[0]} public feature rows"
    if feature_mean_square is None:
        m2 = R2 / dim if math.isfinite(R2) else 1.0
        return np.full(dim, m2), f"the row norm spread evenly ({m2:.3g} a coordinate)"
    arr = np.asarray(feature_mean_square, dtype=np.float64)
    if arr.ndim == 0:
        return np.full(dim, check_positive("feature_mean_square", float(arr))), "feature_mean_square"
    m2 = check_finite_array("feature_mean_square", arr, ndim=1)
    if m2.shape[0] != dim or (m2 < 0).any():
        raise ValueError(f"feature_mean_square must be a number > 0 or {dim} numbers >= 0, got shape {m2.shape}")
    return m2, "feature_mean_square"


def _mean_curvature(loss: PerExampleLoss, clip_radius: float | None, beta: float, kappa_P: float):
    """``k(v)`` for :func:`tempered_sd_ratios`: the loss's declared spread curvature at the clip level
    ``a = tau / sqrt(v)`` (``tau = clip_radius / sqrt(beta)``; the clip's metric taken as the draws'
    covariance, which the chains adapt to, so ``||C^T x||^2`` is the score's variance ``v``), or the
    plan's constant stand-in ``kappa_P`` where the loss declares none."""
    spread = loss.behaviour.bound_spread_curvature()
    if spread is None:
        return kappa_P
    tau = math.inf if clip_radius is None else clip_radius / math.sqrt(beta)
    return lambda v: spread(v, tau / math.sqrt(v) if v > 0.0 else math.inf)
