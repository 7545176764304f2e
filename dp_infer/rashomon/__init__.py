"""Rashomon-set sampling (seed-001 §2.3-2.4, §4.1, §4.3, §6.4-6.5) and multiplicity measures.

Target: ``pi(theta) ∝ exp(-beta max{L(theta; D), L* + psi}) 1(theta in C)``, flat (uniform) on
the Rashomon set ``G = {theta in C : L(theta; D) <= L* + psi}``.

Privacy of the threshold
------------------------
``L*`` is computed on the private data (float64 convex solver, :func:`rashomon_minimum`). It is
never released and nothing derived from it steers the plan: beta, the step size, the horizon
and the reported sensitivity come from declared constants only. It enters only through the
threshold base ``b`` inside the sampler, whose sensitivity analysis covers it (digest §4.3):
with a DECLARED tolerance ``tol`` the base is ``b = L_hat* - max(0, cert - tol)``, where
``cert = |grad L(theta_hat)|^2 / (2 m)`` certifies ``L_hat* - L*_glob <= cert`` (strong
convexity m > 0), so ``b - L*_glob <= tol`` on EVERY dataset without a data-dependent branch
(a failed certificate lowers the threshold, it does not change the formula or abort). Then

    Delta_psi = G/n + min(L, sqrt(2 M (psi + tol + float_slack)))   (m > 0 and M declared)
    Delta_psi = G/n + L                                             (otherwise; any threshold)

(not the paper's eq. (9) prose value ``sqrt(M psi / 2)``); ``float_slack`` is a declared bound
on the float32 evaluation error of L near the threshold (an idealisation, stated as such).
Any separately reported ``L*``, membership rate or loss on the private rows is a further
release (:func:`set_fidelity` flags it). Rejection to ``G`` on private data is never done
(digest §9 item 17): every draw the chain releases is returned.

Modules: :mod:`.plan` (the data-independent plan), :mod:`.minimum` (L* and the threshold base),
:mod:`.sampler` (:func:`sample_rashomon`), :mod:`.result`, :mod:`.measures`, :mod:`.cli`
(``dp-infer rashomon``) and :mod:`.demo`.
"""

from __future__ import annotations

from ..potentials import thresholded_sensitivity
from .demo import compare_breast_cancer
from .measures import (
    ambiguity,
    coefficient_ranges,
    discrepancy,
    model_class_reliance,
    prediction_ranges,
    rashomon_ratio_estimate,
    set_fidelity,
    sign_stability,
)
from .minimum import RashomonMinimum, rashomon_minimum, threshold_base
from .plan import DEFAULT_TOL, FLOAT32_SLACK, MODES, RashomonPlan, mixing_time, plan_rashomon
from .result import RashomonResult
from .sampler import sample_rashomon

__all__ = [
    "RashomonMinimum",
    "rashomon_minimum",
    "threshold_base",
    "thresholded_sensitivity",
    "mixing_time",
    "RashomonPlan",
    "plan_rashomon",
    "RashomonResult",
    "sample_rashomon",
    "coefficient_ranges",
    "sign_stability",
    "ambiguity",
    "discrepancy",
    "prediction_ranges",
    "model_class_reliance",
    "rashomon_ratio_estimate",
    "set_fidelity",
    "compare_breast_cancer",
    "MODES",
    "DEFAULT_TOL",
    "FLOAT32_SLACK",
]
