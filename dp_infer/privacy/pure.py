"""Pure eps-DP exponential mechanism (seed-001 Theorem 2.1 with the explicit constant of digest §4.1).

Normalise each per-example loss to the range [0, L ||C||_2] on C (shifting a per-example loss by
a theta-independent constant leaves every Gibbs law unchanged; digest §2.2). With replace-one
adjacency the empirical mean loss (and the thresholded loss max{L, L* + psi}) then has
sup-sensitivity ``s = L ||C||_2 / n`` and an exact draw from exp(-beta L) on C has log density
ratio at most ``2 beta s`` (one factor from the exponent, one from the normaliser):

    beta_pure(eps) = eps n / (2 L ||C||_2),        eps(beta) = 2 beta L ||C||_2 / n.

Exact sampling is required: a sampler within TV tau of the target is only
(eps, (1 + e^eps) tau)-DP (declare it as ``tv_error``; the accountant adds the slack).
"""

from __future__ import annotations

from .._validation import check_epsilon, check_nonnegative, check_positive, check_positive_int
from .events import PureDpEvent

__all__ = ["pure_sensitivity", "pure_beta", "pure_epsilon", "pure_event", "exp_mech_epsilon"]

_ASSUMPTIONS = (
    "the released point is an EXACT draw from exp(-beta L(theta; D)) (or the psi-thresholded loss) on a "
    "bounded convex set C; any sampler error is declared as tv_error",
    "each per-example loss is L-Lipschitz on C (hence, after a theta-independent shift, takes values in "
    "[0, L diam(C)])",
    "replace-one adjacency with n records; loss = mean of per-example losses",
    "beta and C fixed independently of the data",
)


def pure_sensitivity(n: int, lipschitz: float, diameter: float) -> float:
    """sup_theta |L(theta; D) - L(theta; D')| <= L ||C||_2 / n (after normalising the losses)."""
    n = check_positive_int("n", n)
    lip = check_nonnegative("lipschitz", lipschitz)
    diam = check_positive("diameter", diameter)
    return lip * diam / n


def exp_mech_epsilon(beta: float, sup_sensitivity: float) -> float:
    """eps = 2 beta s of the exponential mechanism exp(-beta L) with sup-sensitivity s."""
    return 2.0 * check_nonnegative("beta", beta) * check_nonnegative("sup_sensitivity", sup_sensitivity)


def pure_beta(eps: float, n: int, lipschitz: float, diameter: float) -> float:
    """beta_pure = eps n / (2 L ||C||_2)."""
    eps = check_epsilon(eps)
    s = pure_sensitivity(n, lipschitz, diameter)
    if s == 0.0:
        raise ValueError("lipschitz must lie in (0, inf) to calibrate beta (a zero-sensitivity loss needs no noise)")
    return eps / (2.0 * s)


def pure_epsilon(beta: float, n: int, lipschitz: float, diameter: float) -> float:
    """eps = 2 beta L ||C||_2 / n."""
    return exp_mech_epsilon(beta, pure_sensitivity(n, lipschitz, diameter))


def pure_event(beta: float, n: int, lipschitz: float, diameter: float, *, tv_error: float = 0.0,
               label: str = "gibbs_pure_draw") -> PureDpEvent:
    """PureDpEvent of one exact draw (compose several draws with ``Accountant.compose(ev, count)``)."""
    eps = pure_epsilon(beta, n, lipschitz, diameter)
    return PureDpEvent(epsilon=eps, label=label, assumptions=_ASSUMPTIONS, tv_error=tv_error,
                       metadata={"route": "pure", "beta": float(beta), "n": int(n), "lipschitz": float(lipschitz),
                                 "diameter": float(diameter)})
