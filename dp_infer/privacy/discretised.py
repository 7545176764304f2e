"""The "discretised Renyi" route (seed 004, Ganesh thesis Ch. 3): a reference calculator.

What this computes
------------------
Ganesh & Talwar (NeurIPS 2020; thesis Ch. 3) certify a released ULA sample by bounding the Renyi
divergence between the discrete chain P and the exact Gibbs target S = pi_D *in both directions*
(Theorem 42), then combining with the privacy of the exact mechanism. The thesis states only
O~-rates and an unspecified "sufficiently large constant c" (Lemma 50); digest §3.7 gives the most
explicit recipe the proofs support. :func:`discretised_renyi_requirements` evaluates that recipe
for a Gibbs posterior ``exp(-beta L(theta; D))`` and reports the step size and step count it
demands, flagged as impractical when the count exceeds ``max_steps``. It is a *reference*: no
sampler in dp_infer is meant to run at these step sizes (digest §8.5: T ~ 1e9 - 1e20 even for
k <= 100), and the certificate is only as good as the value supplied for c.

Setting and units (digest §3.1)
-------------------------------
``L(.; D)`` (mean loss + regulariser) is m-strongly convex and M-smooth on R^k; the potential is
``f = beta L`` (strong convexity beta m, smoothness beta M, condition number kappa = M / m: the
thesis's "M" after normalising m to 1). Replace-one adjacency; ``grad L(.; D) - grad L(.; D')`` is
bounded by ``Delta = G / n`` (G = Lipschitz constant of per-example loss *differences*, <= 2 x the
per-example Lipschitz constant). Normalised step eta_g maps to ``h = eta_g / (beta m)`` and
normalised time tau_g to ``tau_g / (beta m)``; the initial law is ``N(x*, I / (beta m))`` with x*
the *exact* mode of the private potential (Thm 42; digest §8.4: an approximate mode is not covered).

Privacy pipeline (digest §3.5-3.6, RDP-level chain)
---------------------------------------------------
With the weak triangle inequality (Fact 46, p = q = 2) applied twice,

    R_a(P_D || P_D') <= (a - 1/2)/(a - 1) * R_{2a}(P_D || pi_D)
                        + (2a - 3/2)/(2a - 2) * R_{4a-2}(pi_D || pi_D')
                        + R_{4a-3}(pi_D' || P_D').

The exact mechanism is (Delta sqrt(beta/m))-GDP (Gopi-Lee-Liu; :mod:`.stationary`), so
``R_g(pi_D || pi_D') <= g mu^2 / 2``. The discretisation is certified at the single order
``alpha_s = max(2a, 4a - 3, 2)`` in both directions (monotonicity in the order covers 2a and
4a - 3) with budget ``eps_s``. The RDP at order a is then converted to (eps, delta) with
:func:`~dp_infer.privacy.conversions.rdp_epsilon` (the CKS / dp-accounting conversion); the thesis's
own conversion ``R + log(1/delta)/(a - 1)`` (Theorem 14) is reported alongside.

Default choices (each overridable): ``alpha = 1 + 2 log(1/delta)/eps`` (thesis §2.4 recipe); the
RDP budget at that order is the largest the CKS conversion allows for (eps, delta); a fraction
``discretisation_share`` of it goes to the two discretisation terms and the rest to the exact
mechanism, which fixes beta (or beta is given and the discretisation gets what is left).

Step-size recipe (digest §3.7, normalised units, alpha_s >= 2, budget eps_s)
----------------------------------------------------------------------------
1. horizon ``tau >= max{2 a_s ln(3k ln kappa / eps_s), 1/2 ln((2 a_s - 1) kappa) + a_s ln(3k ln kappa / eps_s)}``
   (each logarithm clipped at 0: when ``3k ln kappa <= eps_s`` the start is already close enough);
2. order inflation (Thm 52 at a2 = 2 a_s, e2 = eps_s / 3): ``a' = 4 a2 - 2`` if ``a2 >= 4`` and
   ``e2 >= 3 ln a2 / (a2 - 1)``, otherwise ``a' = 12 a2 ln a2 ln(1/e2) / ((a2 - 1) e2) - 2``
   (Jensen branch; here e2 is capped at 1/e, a smaller budget, so that the Jensen exponent
   ``kappa_J = 3 ln a2 ln(1/e2) / ((a2 - 1) e2)`` exceeds 1 as the proof requires. The explicit Jensen
   bound with the digest's corrected ``ln 30`` is checked and kappa_J raised if ever needed);
3. the largest eta with ``eta <= 2/(kappa + 1)``, ``eta <= 1`` and
   ``(3/4) tau a'(a' - 1) kappa^4 c^2 (k + 2 ln(tau/eta)) eta < ln 2`` (bisection on ln eta), then
   ``T = ceil(tau / eta)`` and ``eta = tau / T``;
4. back to original units (above).

``c`` (``movement_constant``) is Lemma 50's unspecified "sufficiently large constant": the thesis
never gives it and the digest's rough, unverified trace suggests c ~ 10-30. It is a documented
parameter (default 30); the step count scales like c^2. Lemma 51's final factor (digest [!]) and the
ln 15 -> ln 30 correction do not enter the displayed condition; the condition is used as the digest
states it.

Underdamped kernel (Thm 65, digest §3.7.9): only the discrete-vs-continuous bound exists (no
continuous-time Renyi convergence is proved), so ``kernel="underdamped"`` reports the step size of
``(3/4) mu^2 tau^2 k a'(a' - 1) kappa^2 c^2 eta^2 < ln 2``, ``eta <= gamma/(mu kappa)`` at the same
horizon and order, and is always flagged ``practical=False`` ("no end-to-end certificate").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .._validation import check_delta, check_epsilon, check_positive, check_positive_int
from .conversions import gdp_epsilon, rdp_epsilon
from .discretised_recipe import (
    underdamped_step_size, recipe_horizon, recipe_inflated_order, recipe_step_condition, recipe_step_size,
    weak_triangle_rdp,
)
from .events import RdpCurveEvent

__all__ = [
    "DiscretisedRequirements",
    "discretised_renyi_requirements",
    "recipe_horizon",
    "recipe_inflated_order",
    "recipe_step_condition",
    "recipe_step_size",
    "weak_triangle_rdp",
]

KERNELS = ("ula", "underdamped")



# ---------------------------------------------------------------------------------------------
# result
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiscretisedRequirements:
    """What the discretised-Renyi route demands for one (eps, delta) target (all float64).

    Orders and budgets
      alpha                    Renyi order of the released sample's RDP (converted to (eps, delta))
      certified_order          alpha_s = max(2 alpha, 4 alpha - 3, 2): order at which both
                               directions R(P||pi), R(pi||P) are certified
      inflated_order           alpha' of Thm 52 (order at which the movement argument runs)
      inflation_branch         "direct" (a' = 4 a2 - 2) or "jensen"
      rdp_budget               total RDP at alpha the (eps, delta) target allows
    Exact (stationary) mechanism
      beta, beta_chosen        inverse temperature; True if chosen here from discretisation_share
      sensitivity              Delta = G / n
      exact_mu                 GDP of one exact draw, Delta sqrt(beta / m)
      exact_rdp                R_{4a-2}(pi_D||pi_D') <= (4a - 2) mu^2 / 2 (the order the chain needs)
      exact_rdp_term           its weighted contribution to the released RDP at alpha
      exact_epsilon            eps of the exact draw alone at delta (GDP, for reference)
    Discretisation
      discretisation_budget    eps_s: allowed R_{alpha_s} between the chain and the target, each direction
      discretisation_rdp_term  its weighted contribution ((a - 1/2)/(a - 1) + 1) eps_s
      movement_constant        Lemma 50's c used (unspecified by the thesis)
    Demanded schedule (original units of the potential beta L)
      kappa                    M / m
      step_size                h = eta / (beta m) after rounding eta = tau / T
      num_steps                T (a float: it may exceed any integer type)
      integrated_time          T h = tau / (beta m)
      normalised_step_size, normalised_time   eta, tau (m = 1 units)
      step_condition           left side of the Thm 52 condition at eta (< ln 2)
      init_variance            variance of the start N(x*, I / (beta m)) (x* the exact mode)
    Result
      rdp                      RDP of the released sample at alpha
      epsilon, delta           (eps, delta) via rdp_epsilon (CKS); ``epsilon_thesis`` with Theorem 14
      practical, reason        num_steps <= max_steps (and an end-to-end certificate exists)
      certified                always False: holds only if Lemma 50's constant is <= movement_constant
    """

    kernel: str
    alpha: float
    certified_order: float
    inflated_order: float
    inflation_branch: str
    rdp_budget: float
    beta: float
    beta_chosen: bool
    sensitivity: float
    exact_mu: float
    exact_rdp: float
    exact_rdp_term: float
    exact_epsilon: float
    discretisation_budget: float
    discretisation_rdp_term: float
    movement_constant: float
    kappa: float
    dim: int
    step_size: float
    num_steps: float
    integrated_time: float
    normalised_step_size: float
    normalised_time: float
    step_condition: float
    init_variance: float
    rdp: float
    epsilon: float
    epsilon_thesis: float
    delta: float
    max_steps: float
    practical: bool
    reason: str
    certified: bool = False

    def as_dict(self) -> dict:
        """Plain dict (floats, ints, bools, strings)."""
        return asdict(self)

    def to_event(self, *, label: str = "discretised_renyi_ula") -> RdpCurveEvent:
        """RdpCurveEvent with the released sample's RDP at ``alpha`` (one grid order).

        Only meaningful if the chain is run with exactly ``step_size`` and ``num_steps`` from
        ``N(x*, init_variance I)`` and c really is <= ``movement_constant``.
        """
        if self.kernel != "ula":
            raise ValueError("to_event: kernel 'underdamped' has no end-to-end certificate (Thm 65 is discretisation-only)")
        return RdpCurveEvent(orders=(self.alpha,), values=(self.rdp,), label=label,
                             assumptions=(
                                 "seed-004 Thm 42/52 route (digest §3.5-3.7): ULA with the reported step size and "
                                 "step count, started from N(x*, I/(beta m)) at the EXACT mode x* of the private potential",
                                 f"Lemma 50's unspecified constant c <= {self.movement_constant}",
                                 "L(.; D) m-strongly convex and M-smooth on R^d; grad L(.; D) - grad L(.; D') bounded by G/n",
                                 "only the final iterate of one chain is released",
                             ),
                             metadata={"route": "discretised_renyi", **{k: v for k, v in self.as_dict().items()
                                                                       if k not in ("reason",)}})


# ---------------------------------------------------------------------------------------------
# main entry point
# ---------------------------------------------------------------------------------------------


def _rdp_budget(eps: float, log_delta: float, alpha: float) -> float:
    """Largest R at order alpha that rdp_epsilon converts to <= eps (CKS, closed form)."""
    return eps - math.log1p(-1.0 / alpha) + (log_delta + math.log(alpha)) / (alpha - 1.0)


def discretised_renyi_requirements(
    eps: float,
    delta: float,
    *,
    n: int,
    dim: int,
    smoothness: float,
    strong_convexity: float,
    grad_diff: float | None = None,
    lipschitz: float | None = None,
    beta: float | None = None,
    alpha: float | None = None,
    discretisation_share: float = 0.5,
    movement_constant: float = 30.0,
    kernel: str = "ula",
    max_steps: float = 1e7,
    underdamped_mu: float = 1.0,
    underdamped_gamma: float = 2.0,
) -> DiscretisedRequirements:
    """Step size and step count the thesis's explicit conditions demand for (eps, delta) (digest §3.5-3.7).

    Parameters
    ----------
    eps, delta
        target (eps, delta)-DP of the released final ULA iterate.
    n, dim
        number of records (replace-one adjacency) and parameter dimension k.
    smoothness, strong_convexity
        M and m of ``L(.; D)`` (loss mean + regulariser), loss level (not multiplied by beta);
        need ``smoothness >= strong_convexity``.
    grad_diff, lipschitz
        exactly one: G, the Lipschitz constant of per-example loss differences, or the per-example
        Lipschitz constant (then G = 2 * lipschitz). Sensitivity of grad L is G / n.
    beta
        inverse temperature of ``exp(-beta L)``. If None it is chosen so that the exact-mechanism
        term of the RDP chain uses ``1 - discretisation_share`` of the RDP budget.
    alpha
        Renyi order of the conversion; default ``1 + 2 log(1/delta)/eps`` (thesis §2.4).
    discretisation_share
        in (0, 1): fraction of the RDP budget given to the discretisation (only when beta is None).
    movement_constant
        Lemma 50's constant c (the thesis leaves it unspecified; digest §3.7.5 suggests ~10-30).
    kernel
        ``"ula"`` (Thm 42 + 52, end-to-end) or ``"underdamped"`` (Thm 65, discretisation only).
    max_steps
        the step count above which the result is flagged impractical.
    underdamped_mu, underdamped_gamma
        mu > 0 and gamma >= 2 of the underdamped SDE (kernel "underdamped" only).
    """
    eps = check_epsilon(eps)
    delta = check_delta(delta)
    n = check_positive_int("n", n)
    k = check_positive_int("dim", dim)
    big_m = check_positive("smoothness", smoothness)
    m = check_positive("strong_convexity", strong_convexity)
    if big_m < m:
        raise ValueError(f"smoothness must lie in [strong_convexity, inf) = [{m!r}, inf), got {smoothness!r}")
    if (grad_diff is None) == (lipschitz is None):
        raise ValueError("give exactly one of grad_diff (G, Lipschitz constant of loss differences) or lipschitz")
    G = check_positive("grad_diff", grad_diff) if grad_diff is not None else 2.0 * check_positive("lipschitz", lipschitz)
    share = check_positive("discretisation_share", discretisation_share)
    if share >= 1.0:
        raise ValueError(f"discretisation_share must lie in (0, 1), got {discretisation_share!r}")
    c = check_positive("movement_constant", movement_constant)
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    max_steps = check_positive("max_steps", max_steps, allow_inf=True)
    ud_mu = check_positive("underdamped_mu", underdamped_mu)
    ud_gamma = check_positive("underdamped_gamma", underdamped_gamma)
    if ud_gamma < 2.0:
        raise ValueError(f"underdamped_gamma must lie in [2, inf) (Lemma 64), got {underdamped_gamma!r}")
    ld = math.log(delta)
    if alpha is None:
        a = 1.0 + 2.0 * (-ld) / eps
    else:
        a = check_positive("alpha", alpha)
        if a <= 1.0:
            raise ValueError(f"alpha (Renyi order) must lie in (1, inf), got {alpha!r}")
    budget = _rdp_budget(eps, ld, a)
    if budget <= 0.0:
        raise ValueError(f"alpha = {a!r} leaves no RDP budget for (eps, delta) = ({eps}, {delta}); "
                         "alpha must be larger")
    kappa = big_m / m
    sens = G / n
    w_fwd = (a - 0.5) / (a - 1.0)
    w_exact = (2.0 * a - 1.5) / (2.0 * a - 2.0)
    w_disc = w_fwd + 1.0
    exact_order = 4.0 * a - 2.0

    if beta is None:
        exact_term = (1.0 - share) * budget
        mu = math.sqrt(2.0 * exact_term / (w_exact * exact_order))
        b = m * (mu / sens) ** 2
        beta_chosen = True
    else:
        b = check_positive("beta", beta)
        beta_chosen = False
    mu = sens * math.sqrt(b / m)
    exact_rdp = exact_order * mu * mu / 2.0
    exact_term = w_exact * exact_rdp
    disc_term = budget - exact_term
    eps_s = disc_term / w_disc if disc_term > 0 else 0.0
    exact_eps = gdp_epsilon(mu, delta)

    alpha_s = max(2.0 * a, 4.0 * a - 3.0, 2.0)
    reasons = []
    if eps_s <= 0.0:
        alpha_p, branch = math.nan, "none"
        tau = math.inf
        eta = 0.0
        T = math.inf
        cond = math.nan
        reasons.append(
            f"the exact mechanism alone (beta = {b:.4g}) uses RDP {exact_term:.4g} >= the budget {budget:.4g} at "
            f"order {a:.4g}: no discretisation budget is left; lower beta")
    else:
        tau = recipe_horizon(alpha_s, eps_s, k, kappa)
        alpha_p, branch = recipe_inflated_order(alpha_s, eps_s)
        if tau == 0.0:
            eta, T, cond = 0.0, 0.0, 0.0
        else:
            if kernel == "ula":
                eta0 = recipe_step_size(tau, alpha_p, kappa, k, c)
            else:
                eta0 = underdamped_step_size(tau, alpha_p, kappa, k, c, ud_mu, ud_gamma)
            if eta0 <= 0.0:
                eta, T, cond = 0.0, math.inf, math.nan
            else:
                T = float(math.ceil(tau / eta0))
                eta = tau / T
                cond = (recipe_step_condition(eta, tau, alpha_p, kappa, k, c) if kernel == "ula"
                        else 0.75 * ud_mu**2 * tau**2 * k * alpha_p * (alpha_p - 1.0) * kappa**2 * c * c * eta * eta)

    rdp_total = w_fwd * eps_s + exact_term + eps_s if eps_s > 0 else exact_term
    if eps_s <= 0.0:
        # nothing certified: report the exact mechanism's own RDP as a lower bound on what is needed
        eps_out = math.inf
        eps_thesis = math.inf
    else:
        eps_out, _ = rdp_epsilon([a], [rdp_total], delta)
        eps_thesis = rdp_total + (-ld) / (a - 1.0)

    steps_ok = T <= max_steps
    if kernel == "underdamped":
        reasons.append("underdamped Langevin has only a discrete-vs-continuous bound (Thm 65); continuous-time "
                       "Renyi convergence is not proved, so there is no end-to-end certificate")
    if eps_s > 0 and not steps_ok:
        reasons.append(f"the explicit conditions demand T = {T:.3g} steps of size h = {eta / (b * m):.3g} "
                       f"(> max_steps = {max_steps:.3g}); driven by kappa^4 = {kappa**4:.3g}, the inflated order "
                       f"alpha' = {alpha_p:.4g} and c^2 = {c * c:.3g} (steps scale like c^2)")
    practical = bool(eps_s > 0 and steps_ok and kernel == "ula")
    if practical:
        reason = (f"T = {T:.3g} steps <= max_steps = {max_steps:.3g}; a certificate only if Lemma 50's "
                  f"unspecified constant c <= {c:g}")
        if tau == 0.0:
            reason += " (kappa = 1: the start N(x*, I/(beta m)) already has the divergence bound 0, no steps needed)"
    else:
        reason = "; ".join(reasons)

    bm = b * m
    return DiscretisedRequirements(
        kernel=kernel, alpha=a, certified_order=alpha_s, inflated_order=alpha_p, inflation_branch=branch,
        rdp_budget=budget, beta=b, beta_chosen=beta_chosen, sensitivity=sens, exact_mu=mu, exact_rdp=exact_rdp,
        exact_rdp_term=exact_term, exact_epsilon=exact_eps, discretisation_budget=eps_s,
        discretisation_rdp_term=w_disc * eps_s, movement_constant=c, kappa=kappa, dim=k,
        step_size=eta / bm, num_steps=T, integrated_time=tau / bm, normalised_step_size=eta,
        normalised_time=tau, step_condition=cond, init_variance=1.0 / bm, rdp=rdp_total, epsilon=eps_out,
        epsilon_thesis=eps_thesis, delta=delta, max_steps=max_steps, practical=practical, reason=reason,
    )
