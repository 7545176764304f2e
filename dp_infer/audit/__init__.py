r"""Empirical privacy audits: Monte-Carlo LOWER bounds on eps from worst-case neighbours.

An audit runs the mechanism many times on each of two neighbouring datasets D (canary "in" /
at one extreme) and D' (canary at the opposite extreme), computes a scalar distinguishing
statistic T of the released output, and turns the error rates of a threshold test into a
lower bound on the eps that the mechanism can honestly claim at the stated delta.

Derivation of the bound
-----------------------
If M is (eps, delta)-DP then for every measurable set S of outputs
``P[M(D) in S] <= e^eps P[M(D') in S] + delta``, and symmetrically with D, D' swapped. Take the
threshold test "reject H0: the data were D'" when ``s * T > tau`` (orientation s = +-1), with

    FPR = P[s T(M(D')) > tau]   (false positive: D' declared D),
    FNR = P[s T(M(D)) <= tau]   (false negative: D declared D'),

so ``1 - FNR <= e^eps FPR + delta``, i.e. every valid eps satisfies

    eps >= log( (1 - delta - FNR) / FPR ).                                          (*)

The right side decreases in both FNR and FPR. With one-sided Clopper-Pearson upper bounds
``FPR_u``, ``FNR_u`` at level ``alpha/2`` each (union bound: both hold with probability
>= 1 - alpha), ``eps_lb = log((1 - delta - FNR_u) / FPR_u)`` is below the right side of (*) and
hence below the smallest valid eps, with probability >= 1 - alpha. (The other direction of
DP, D and D' swapped, is the same formula with the roles of the samples exchanged: it is
covered by letting the orientation s be -1 and swapping which sample plays D.) If
``1 - delta - FNR_u <= 0`` the test certifies nothing and eps_lb = 0.

Selection without multiplicity: the samples of each side are split in two halves. The
orientation, the direction (which dataset plays D) and the threshold tau are chosen on the
first half by maximising the same Clopper-Pearson bound over a grid of empirical quantiles;
eps_lb is then evaluated ONCE on the independent second half, so the confidence statement
above holds exactly (no correction needed).

Families
--------
* ``quadratic``: 1-D, per-example loss ``(theta - d_i)^2 / 2`` with d_i in [-1, 1], n points,
  the canary at d = +1 in D and d = -1 in D' (others fixed at 0). The mean-loss gradient is
  ``theta - mean(d)``, the per-example gradient difference is |d - d'| <= 2 (G = 2), the
  sensitivity 2/n is attained for every theta: this is the worst case of the path and
  Gaussian analyses, whose guarantees are then exactly tight. The chains use the closed form
  of the mean gradient (exact, so no per-chain pass over the n points).
* ``logistic``: logistic regression, n small (default 50) rows of norm <= 1 drawn with a fixed
  key, dimension d (default 3), the canary row x_c (unit norm) with label 1 in D and 0 in D'.
  Statistic: projection of the final theta on x_c. The declared G = 2 is not attained by a
  label flip (the gradient difference is exactly x_c, norm 1), so this audit is far from
  tight; it checks that nothing leaks beyond the claim on a non-quadratic model.

Routes (all on the quadratic family unless stated)
--------------------------------------------------
``trajectory``        :func:`dp_infer.routes.plan.plan_trajectory` (exact GDP calibration); statistic the
                      path's log-likelihood-ratio sufficient statistic (optimal, Neyman-Pearson)
                      ``S = x_K - x_0 + h beta sum_{k<K} x_k``; also ``final`` (last iterate).
``trajectory_unsafe`` the paper's Lemma 3.1 beta (:func:`~dp_infer.privacy.path.lemma_3_1_beta_unsafe`,
                      ~2x too large); claimed eps is the eps the user asked for.
``last_iterate``      :func:`~dp_infer.privacy.last_iterate.last_iterate_beta_max`; released and
                      tested: the final iterate.
``stationary``        :func:`~dp_infer.privacy.stationary.stationary_beta_max`; ULA run for
                      ``mixing_times`` relaxation times, final iterate (ULA on a quadratic has
                      the exact mean and a LARGER variance than the Gibbs law, so the audited
                      law is at least as private as the exact draw the accountant covers).
``pure``              :func:`~dp_infer.privacy.pure.pure_beta` on C = [-1, 1]; an exact draw from
                      the truncated Gibbs law (inverse-CDF sampling, float64), delta = 0.
``purified``          projected trajectory route's final iterate (eps1, delta1) on C = [-1, 1],
                      then :func:`~dp_infer.privacy.purification.purify` with eps'; claimed
                      pure eps1 + eps', delta = 0.
``rashomon_path``     :func:`dp_infer.rashomon.plan_rashomon` (mode path) on the thresholded loss
                      ``max{(theta - mean d)^2 / 2 + k_D, k_D + psi}`` with its exact L*
                      (the canary moves the flat region by 2/n, where the gradient jumps);
                      statistic ``"range"`` (default: the midpoint of the path's max and min,
                      which locates the flat region) or ``"mean"`` / ``"final"``.
``rashomon_path_unsafe`` the same chains at the beta an analysis ignoring the threshold's jump
                      would give (sensitivity G/n instead of Delta_psi): the audit's power check.

Minibatch SGLD: :func:`minibatch_audit` (module :mod:`dp_infer.audit.minibatch`) audits the
real Poisson-subsampled SGLD kernel on a worst-case neighbouring pair.
"""

from .logistic import logistic_audit
from .preconditioned import preconditioned_audit
from .minibatch import minibatch_audit
from .quadratic import ROUTES, quadratic_audit
from .statistics import AuditResult, audit_statistics, clopper_pearson_upper, eps_lower_bound, json_safe

__all__ = [
    "AuditResult",
    "clopper_pearson_upper",
    "eps_lower_bound",
    "audit_statistics",
    "quadratic_audit",
    "logistic_audit",
    "preconditioned_audit",
    "minibatch_audit",
    "json_safe",
    "ROUTES",
]
