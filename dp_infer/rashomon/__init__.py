"""Rashomon-set sampling (seed-001 §2.3-2.4, §4.1, §4.3, §6.4-6.5) and the measures of the
Rashomon literature.

Target: ``pi(theta) ∝ exp(-beta max{L(theta; D), L* + psi}) 1(theta in C)``, flat (uniform) on
the Rashomon set ``G = {theta in C : L(theta; D) <= L* + psi}``.

Faithful at the threshold
-------------------------
The target is not smooth at the boundary of G: the gradient of the potential jumps from 0 to
``beta |grad L|``. The sampler runs on a threshold smoothed over a declared loss width ``w``
(default psi/20, :mod:`.threshold`): unchanged on G (the target stays exactly uniform there),
the density outside G raised by at most ``exp(beta w / 2)``, and the step planned from the
ramp's curvature ``beta (M + g^2 / w)`` -- the jump, not ``beta M`` alone.

Privacy of the threshold
------------------------
``L*`` is computed on the private data (float64 convex solver, :func:`rashomon_minimum`). It is
never released and nothing derived from it steers the plan: beta, the step size, the horizon
and the reported sensitivity come from declared constants only. It enters only through the
threshold base ``b`` inside the sampler, whose sensitivity analysis covers it (digest §4.3):
with a DECLARED tolerance ``tol`` the base is ``b = L_hat* - max(0, cert - tol)``, where
``cert = |grad L(theta_hat)|^2 / (2 m)`` certifies ``L_hat* - L*_glob <= cert`` (strong
convexity m > 0), so ``b - L*_glob <= tol`` on EVERY dataset without a data-dependent branch.
The smoothed threshold averages thresholds ``psi + tau``, tau ~ U(0, w), so

    Delta_psi = G/n + min(L, sqrt(2 M) E sqrt(psi + tol + float_slack + tau))   (m > 0, M declared)
    Delta_psi = G/n + L                                                          (otherwise)

``float_slack`` is a declared bound on the float32 evaluation error of L near the threshold
(an idealisation, stated as such). Any separately reported ``L*``, membership rate or loss on
the private rows is a further release (:func:`set_fidelity` flags it). Rejection to ``G`` on
private data is never done (digest §9 item 17): every draw the chain releases is returned.

Measures (post-processing of the draws plus rows the caller declares public): coefficient
ranges, sign stability, viable prediction ranges, ambiguity and discrepancy against a stated
reference, Rashomon capacity, the pattern Rashomon ratio, model class reliance with the exact
pairwise swap and the variable importance cloud; the Rashomon ratio with an exact interval.

Modules: :mod:`.models` (linear model classes, intercept), :mod:`.threshold`, :mod:`.plan`,
:mod:`.minimum`, :mod:`.sampler`, :mod:`.result`, :mod:`.multiplicity`, :mod:`.reliance`,
:mod:`.ratio`, :mod:`.measures`, :mod:`.report` and :mod:`.plots`; the command ``dp-infer rashomon``
is :mod:`dp_infer.cli.rashomon`.
"""

from __future__ import annotations

from ..potentials import thresholded_sensitivity
from .measures import RashomonMeasures, evaluate
from .minimum import RashomonMinimum, rashomon_minimum, threshold_base
from .models import KINDS, LinearModelClass, linear_model
from .multiplicity import (
    ambiguity, binary_channel_capacity, coefficient_ranges, discrepancy, prediction_ranges,
    rashomon_capacity, sign_stability,
)
from .plan import (
    DEFAULT_MAX_STEPS, DEFAULT_TOL, FLOAT32_SLACK, MODES, RashomonPlan, mixing_time, plan_rashomon,
)
from .ratio import clopper_pearson, cover_count, pattern_rashomon_ratio, rashomon_ratio_estimate, set_fidelity
from .reliance import model_class_reliance, model_reliance, variable_importance_cloud
from .result import RashomonResult
from .sampler import sample_rashomon
from .threshold import WIDTH_FRACTION, smoothed_sensitivity

__all__ = [
    "LinearModelClass",
    "linear_model",
    "KINDS",
    "RashomonMinimum",
    "rashomon_minimum",
    "threshold_base",
    "thresholded_sensitivity",
    "smoothed_sensitivity",
    "mixing_time",
    "RashomonPlan",
    "plan_rashomon",
    "RashomonResult",
    "sample_rashomon",
    "RashomonMeasures",
    "evaluate",
    "coefficient_ranges",
    "sign_stability",
    "ambiguity",
    "discrepancy",
    "prediction_ranges",
    "rashomon_capacity",
    "binary_channel_capacity",
    "model_reliance",
    "model_class_reliance",
    "variable_importance_cloud",
    "rashomon_ratio_estimate",
    "clopper_pearson",
    "pattern_rashomon_ratio",
    "cover_count",
    "set_fidelity",
    "MODES",
    "DEFAULT_TOL",
    "DEFAULT_MAX_STEPS",
    "FLOAT32_SLACK",
    "WIDTH_FRACTION",
]

