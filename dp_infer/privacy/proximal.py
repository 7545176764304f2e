r"""Privacy and step counts of the proximal sampler for the regularised exponential mechanism.

Mechanism (seed 002, Thm 6.2; digest §3.3): release draws of

    pi_D(x) ∝ exp(-k (F(x; D) + (m/2) ||x||^2)),   F = mean of per-example losses,

where every loss is convex and the *difference* of two per-example losses is G-Lipschitz
(replace-one adjacency). An exact draw is s-GDP with ``s = G sqrt(k) / (n sqrt(m))``
(:func:`dp_infer.privacy.stationary.regularized_exp_mech_mu`); ``m`` is the regulariser plus
any strong convexity the loss itself declares. The draws come from the proximal sampler
(:mod:`dp_infer.kernels.proximal`) at total-variation distance ``tau`` from pi_D, so a run is
``(eps, delta_s(eps) + (1 + e^eps) tau)``-DP (DESIGN invariant 6; digest §3.6); the report
keeps the GDP of the ideal draw and the TV slack apart.

Explicit step counts (no hidden constants)
------------------------------------------
In the sampler's units, ``f_j = k ell_j`` is ``G_f = k L``-Lipschitz (L the per-example
Lipschitz constant of the loss, not G) and the Gaussian part has strong convexity
``m_f = k m``; write ``kappa = G_f^2 / m_f = k L^2 / m``.

* Start: x0 ~ N(0, I / m_f), the law of the Gaussian part alone (data independent). Then
  ``KL(x0 || pi) = E fbar + log E exp(-fbar) <= G_f^2 / (2 m_f) = kappa / 2``: fbar is
  G_f-Lipschitz and the Gaussian N(0, I/m_f) makes it sub-Gaussian with variance proxy
  G_f^2 / m_f (Tsirelson-Ibragimov-Sudakov). Tight for linear fbar.
* Outer chain with an exact oracle (Chen, Chewi, Salim, Wibisono, COLT 2022, Thm 3, for a
  target satisfying a log-Sobolev inequality with constant m_f, which m_f-strong
  log-concavity implies): ``KL_T <= KL_0 / (1 + eta m_f)^{2 T}``, and Pinsker gives
  ``TV_T <= sqrt(KL_T / 2)`` (:func:`outer_tv_bound`, :func:`outer_steps`). This external
  result replaces the seed's Theta(.) statement of LST21 Thm 1; tests check it on Gaussian
  targets in closed form.
* Oracle error of Algorithm 2 (:func:`taylor_rgo_tv_bound`), derived here: with
  ``a = G_f^2 v``, ``v = eta / (1 + eta m_f)`` the proposal variance, each difference
  ``D = f_j(z) - f_j(x)`` is a ``G_f sqrt(2 v)``-Lipschitz function of a standard Gaussian in
  R^{2d} with mean 0, so ``P(|D| > t) <= 2 exp(-t^2 / (4 a))``. Write ``rho = 1 + S``. The
  output law of the rejection loop is ``g(x) r(x) / int g r`` with ``r = E[clip(rho, 0, 2) | x]``
  and the oracle's target is ``g(x) X(x) / int g X`` with ``X = E[rho | x]`` and
  ``int g X = E e^{-fbar} E e^{fbar} >= 1`` (Jensen); hence
  ``TV <= E |rho - clip(rho, 0, 2)| = E (|S| - 1)_+``. If every difference used is <= 1/2 in
  absolute value then ``|S| < 1``; otherwise ``(|S| - 1)_+ <= |S|``. Cauchy-Schwarz, a union
  bound over the ``E[J (J+1)/2] = e`` differences, and Minkowski + Hoelder with
  ``E|D|^{2 alpha} <= 2 (4 a)^alpha alpha!`` (so term alpha contributes at most
  ``sqrt(2) (2 sqrt(a))^alpha``) give, for ``a < 1/4``,

      TV_oracle <= 2 sqrt(e) q / (1 - q) exp(-1 / (32 a)),      q = 2 sqrt(a).

  It is conservative (the simulated error is far smaller; see the tests). T oracle calls add
  ``T * TV_oracle`` (coupling).
* The exact oracle (:func:`dp_infer.kernels.proximal.linearised_rgo`) has no TV error; for
  losses of one linear score its acceptance probability is at least
  :func:`linearised_acceptance_bound`, which fixes the expected work, not the law.

:func:`plan_proximal` turns (eps, delta), n, the dimension and the declared constants (never
the data) into k, m, eta, T and the event.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields

from .._validation import check_delta, check_epsilon, check_nonnegative, check_positive, check_positive_int
from .conversions import gdp_log_delta, gdp_mu
from .events import GdpEvent
from .stationary import regularized_exp_mech_mu

__all__ = [
    "RGOS",
    "ProximalPlan",
    "start_kl_bound",
    "outer_tv_bound",
    "outer_steps",
    "taylor_rgo_tv_bound",
    "linearised_acceptance_bound",
    "proximal_event",
    "erm_regulariser",
    "plan_proximal",
]

RGOS = ("linearised", "taylor")


def start_kl_bound(lipschitz_f: float, strong_convexity_f: float) -> float:
    """``G_f^2 / (2 m_f)``: KL from the start N(c, I/m_f) to exp(-fbar - (m_f/2)|x - c|^2)."""
    g = check_nonnegative("lipschitz_f", lipschitz_f)
    m = check_positive("strong_convexity_f", strong_convexity_f)
    return g * g / (2.0 * m)


def outer_tv_bound(kl0: float, step_size: float, strong_convexity_f: float, num_steps: int) -> float:
    """TV after ``num_steps`` exact-oracle steps: ``sqrt(kl0 / 2) (1 + eta m_f)^{-T}`` (capped at 1)."""
    kl0 = check_nonnegative("kl0", kl0)
    eta = check_positive("step_size", step_size)
    m = check_positive("strong_convexity_f", strong_convexity_f)
    T = check_nonnegative("num_steps", num_steps)
    if kl0 == 0:
        return 0.0
    log_tv = 0.5 * math.log(kl0 / 2.0) - T * math.log1p(eta * m)
    return min(1.0, math.exp(log_tv))


def outer_steps(kl0: float, step_size: float, strong_convexity_f: float, tv: float) -> int:
    """Smallest T with :func:`outer_tv_bound` <= ``tv``."""
    kl0 = check_nonnegative("kl0", kl0)
    eta = check_positive("step_size", step_size)
    m = check_positive("strong_convexity_f", strong_convexity_f)
    tv = check_positive("tv", tv)
    if kl0 == 0 or kl0 / 2.0 <= tv * tv:
        return 1
    T = int(math.ceil((0.5 * math.log(kl0 / 2.0) - math.log(tv)) / math.log1p(eta * m)))
    while outer_tv_bound(kl0, eta, m, T) > tv:  # guard the rounding of the closed form
        T += 1
    return max(T, 1)


def taylor_rgo_tv_bound(a: float) -> float:
    """Explicit TV error of one call of seed 002's Algorithm 2 with ``a = G_f^2 v`` (module doc).

    ``2 sqrt(e) q / (1 - q) exp(-1 / (32 a))`` with ``q = 2 sqrt(a)``; 1 (no bound) for a >= 1/4.
    """
    a = check_positive("a", a)
    if a >= 0.25:
        return 1.0
    q = 2.0 * math.sqrt(a)
    return min(1.0, 2.0 * math.sqrt(math.e) * q / (1.0 - q) * math.exp(-1.0 / (32.0 * a)))


def linearised_acceptance_bound(a: float) -> float:
    """Lower bound on the exact oracle's acceptance probability for GLM losses, ``a = G_f^2 eta``.

    The Bregman gap of fbar at the proposal is at most ``2 G_f |<x - w, u>|`` averaged over unit
    directions u; ``x - w`` has mean ``-v gbar`` (norm <= v G_f) and sd ``sqrt(v)`` along u, so
    by Jensen the acceptance is >= ``exp(-2 a - 2 sqrt(2 a / pi))`` (v <= eta).
    """
    a = check_positive("a", a)
    return math.exp(-2.0 * a - 2.0 * math.sqrt(2.0 * a / math.pi))


_ASSUMPTIONS = (
    "each per-example loss is convex in theta on R^d (declared by the loss)",
    "per-example losses are L-Lipschitz and their differences G-Lipschitz for all admissible records "
    "(declared data bounds, enforced by check_data)",
    "replace-one neighbouring datasets with n fixed (public)",
    "k, the regulariser, the step size, the number of steps and the start law N(0, I/(k m)) are data independent",
    "the sampler's TV bound uses Chen-Chewi-Salim-Wibisono (2022) Thm 3 for the outer chain (an external result)",
    "only the final position of each chain is released; intermediate states and the oracle's "
    "proposal counts / running time are not covered",
)


def proximal_event(k: float, G: float, n: int, strong_convexity: float, *, tv_error: float = 0.0,
                   num_draws: int = 1, metadata: dict | None = None) -> GdpEvent:
    """GdpEvent of ``num_draws`` draws, each ``s = G sqrt(k) / (n sqrt(m))``-GDP and TV ``tv_error``."""
    nd = check_positive_int("num_draws", num_draws)
    s = regularized_exp_mech_mu(k, G, n, strong_convexity)
    tv = check_nonnegative("tv_error", tv_error)
    return GdpEvent(mu=s * math.sqrt(nd), label="proximal_sampler", assumptions=_ASSUMPTIONS,
                    tv_error=tv * nd,
                    metadata={"route": "proximal", "k": float(k), "G": float(G), "n": int(n),
                              "strong_convexity": float(strong_convexity), "num_draws": nd,
                              "tv_error_per_draw": tv, **(metadata or {})})


def erm_regulariser(dim: int, G: float, n: int, gdp: float, theta_scale: float) -> float:
    """Seed-002 digest §3.5(c): ``m* = sqrt(2 d) G / (n R s)`` minimises ``d/k + m R^2 / 2`` at
    fixed ``s``; R = ``theta_scale`` is an a-priori bound on ||theta*|| (not from the data)."""
    return math.sqrt(2.0 * dim) * G / (n * theta_scale * gdp)


@dataclass(frozen=True)
class ProximalPlan:
    """Everything the proximal route runs, and the privacy it spends (data independent).

    ``k`` multiplies the MEAN loss; ``regulariser`` is m in ``k (F + (m/2)|x|^2)`` on top of the
    loss's own ``loss_strong_convexity``; ``step_size`` (eta) and ``num_steps`` (T) are in the
    sampler's units (potential ``k F + (k m_total / 2)|x|^2``).
    """

    eps: float
    delta: float
    n: int
    dim: int
    k: float
    regulariser: float
    loss_strong_convexity: float
    gdp_per_draw: float
    num_draws: int
    rgo: str
    step_size: float
    num_steps: int
    rgo_scale: float
    kappa: float
    kl_start: float
    tv_outer: float
    tv_oracle_per_call: float
    tv_per_draw: float
    delta_privacy: float
    delta_sampling: float
    excess_risk_bound: float
    event: GdpEvent
    lipschitz: float
    grad_diff: float
    theta_scale: float
    assumptions: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    route: str = "proximal"
    release: str = "last_iterate"

    @property
    def strong_convexity(self) -> float:
        return self.regulariser + self.loss_strong_convexity

    @property
    def lam(self) -> float:
        """Absolute L2 coefficient of the potential ``k F + (lam/2)|x|^2`` (lam = k m)."""
        return self.k * self.regulariser

    def spent(self) -> dict:
        """(eps, delta) recomputed by the accountant from the event (TV slack included)."""
        from .accountant import Accountant

        return {"eps": Accountant([self.event]).get_epsilon(self.delta), "delta": self.delta}

    def explain(self) -> str:
        return "\n".join([
            f"route proximal: exact draw of exp(-k (F + m/2 |x|^2)) is {self.gdp_per_draw:.4g}-GDP per draw "
            f"(k = {self.k:.4g}, m = {self.strong_convexity:.4g}, {self.num_draws} draw(s))",
            f"sampler: {self.rgo} oracle, eta = {self.step_size:.3g} (a = G_f^2 eta = {self.rgo_scale:.3g}), "
            f"T = {self.num_steps} steps, kappa = {self.kappa:.4g}",
            f"TV per draw <= {self.tv_per_draw:.3g} (outer {self.tv_outer:.3g} + T x oracle "
            f"{self.tv_oracle_per_call:.3g}); delta = {self.delta_privacy:.3g} (privacy) + "
            f"{self.delta_sampling:.3g} (sampling)",
            *[f"note: {x}" for x in self.notes],
        ])

    def as_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "event"}
        d["event"] = self.event.to_dict()
        d["mu"] = self.event.mu
        d["strong_convexity"] = self.strong_convexity
        d["eps_spent"] = self.spent()["eps"]
        d["assumptions"] = list(self.assumptions) + list(self.event.assumptions)
        d["notes"] = list(self.notes)
        return json.loads(json.dumps(d, default=float))


def _taylor_scale(kappa: float, kl0: float, m_f: float, G_f: float, tv_outer: float, tv_oracle: float) -> tuple[float, int, float]:
    """Largest a (bisection in log a) with T(a) * TV_oracle(a) <= tv_oracle; returns (a, T, per-call)."""

    def steps(a):
        eta = a / (G_f * G_f)
        return outer_steps(kl0, eta, m_f, tv_outer)

    def per_call(a):
        eta = a / (G_f * G_f)
        v = eta / (1.0 + eta * m_f)
        return taylor_rgo_tv_bound(G_f * G_f * v)

    def ok(a):
        return steps(a) * per_call(a) <= tv_oracle

    lo, hi = 1e-6, 0.24
    if not ok(lo):
        raise ValueError("the Taylor oracle cannot reach the sampling TV target (tv_fraction too small)")
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo, steps(lo), per_call(lo)


def plan_proximal(*, eps: float, delta: float, n: int, dim: int, lipschitz: float, grad_diff: float,
                  loss_strong_convexity: float = 0.0, regulariser: float | None = None,
                  theta_scale: float = 10.0, num_draws: int = 1, rgo: str = "linearised",
                  rgo_scale: float | str = "auto", tv_fraction: float = 0.01,
                  max_steps: float = 2e5) -> ProximalPlan:
    """Plan the proximal route from the target and the declared constants only.

    :param lipschitz: L, per-example Lipschitz constant of the non-quadratic part (sampler).
    :param grad_diff: G, Lipschitz constant of differences of per-example losses (privacy).
    :param regulariser: m >= 0 added on top of ``loss_strong_convexity``; default
        :func:`erm_regulariser` (seed-002 §3.5(c)) at the per-draw GDP.
    :param theta_scale: a-priori bound R on ||theta*|| for the default regulariser and the
        excess-risk bound ``d / k + m R^2 / 2`` (Thm 6.2; exact draw, convex loss).
    :param rgo: ``"linearised"`` (exact oracle, a pass over the data per proposal) or
        ``"taylor"`` (seed 002 Algorithm 2, O(1) evaluations per call, explicit TV error).
    :param rgo_scale: ``a = G_f^2 eta`` for the exact oracle (the Taylor oracle's a is solved
        for from its TV budget). The output law is exact for every a and T ~ 40 kappa / a; only
        the running time depends on a (and on the data): the acceptance probability is at least
        :func:`linearised_acceptance_bound` (a) for single-score losses -- 0.17 at a = 0.5 --
        and in practice stays O(1) up to a ~ k / 2 for many examples, because the Bregman gap
        of an average of n kinks scales like a / k rather than sqrt(a). ``"auto"`` (default)
        takes ``a = max(0.5, k / 4)``: a data-independent heuristic that fixes the work, not
        the guarantee.
    :param tv_fraction: share of delta reserved for the sampling slack ``(1 + e^eps) tau``.
    :param max_steps: refuse plans that need more outer steps (the cost is ~ kappa log).
    """
    eps = check_epsilon(eps)
    delta = check_delta(delta)
    n = check_positive_int("n", n)
    dim = check_positive_int("dim", dim)
    L = check_positive("lipschitz", lipschitz)
    G = check_positive("grad_diff", grad_diff)
    lam = check_nonnegative("loss_strong_convexity", loss_strong_convexity)
    R = check_positive("theta_scale", theta_scale)
    K = check_positive_int("num_draws", num_draws)
    if rgo not in RGOS:
        raise ValueError(f"rgo must be one of {RGOS}, got {rgo!r}")
    if not (isinstance(rgo_scale, str) and rgo_scale == "auto"):
        rgo_scale = check_positive("rgo_scale", rgo_scale)
    if not 0.0 < tv_fraction < 1.0:
        raise ValueError(f"tv_fraction must lie in (0, 1), got {tv_fraction!r}")
    max_steps = check_positive("max_steps", max_steps)

    delta_sampling = tv_fraction * delta
    delta_privacy = delta - delta_sampling
    tau_total = delta_sampling / (1.0 + math.exp(eps)) if eps < 700 else 0.0
    if tau_total <= 0:
        raise ValueError(f"eps must lie in (0, 700) for the TV slack to be representable, got {eps!r}")
    s_total = gdp_mu(eps, delta_privacy)
    s = s_total / math.sqrt(K)
    m_reg = erm_regulariser(dim, G, n, s, R) if regulariser is None else check_nonnegative("regulariser", regulariser)
    m_total = m_reg + lam
    if m_total <= 0:
        raise ValueError("regulariser + loss_strong_convexity must lie in (0, inf): the target must be "
                         "strongly log-concave")
    k = (s * n / G) ** 2 * m_total
    G_f, m_f = k * L, k * m_total
    kappa = G_f * G_f / m_f
    kl0 = start_kl_bound(G_f, m_f)
    tau = tau_total / K  # per draw
    if rgo == "linearised":
        a = max(0.5, k / 4.0) if rgo_scale == "auto" else rgo_scale
        eta = a / (G_f * G_f)
        tv_out_target, per_call = tau, 0.0
        T = outer_steps(kl0, eta, m_f, tv_out_target)
    else:
        tv_out_target = tau / 2.0
        a, T, per_call = _taylor_scale(kappa, kl0, m_f, G_f, tv_out_target, tau / 2.0)
        eta = a / (G_f * G_f)
    if T > max_steps:
        raise ValueError(
            f"the proximal route needs T = {T:.3g} sampler steps (> max_steps = {max_steps:.3g}): the cost "
            f"grows like kappa = k L^2 / m = (n s L / G)^2 = {kappa:.3g} (seed 002 Cor 7.7 lower bound); use "
            "fewer examples, a smaller eps, a larger rgo_scale (linearised oracle: exact law, more "
            "proposals per step), or a smoothed loss on the Langevin routes")
    tv_out = outer_tv_bound(kl0, eta, m_f, T)
    tv_draw = tv_out + T * per_call
    event = proximal_event(k, G, n, m_total, tv_error=tv_draw, num_draws=K,
                           metadata={"rgo": rgo, "step_size": eta, "num_steps": T})
    # the accountant must confirm the target (never under-report)
    ld_priv = gdp_log_delta(eps, event.mu)
    if ld_priv > math.log(delta_privacy) + 1e-9 or (1.0 + math.exp(eps)) * event.tv_error > delta_sampling * (1 + 1e-9):
        raise AssertionError("internal: the proximal plan overspends its target")
    notes = [f"{rgo} oracle: " + ("exact rejection sampling, one pass over the data per proposal; acceptance "
                                   f">= {linearised_acceptance_bound(a):.3g} for single-score (GLM) losses"
                                   if rgo == "linearised" else
                                   f"seed 002 Algorithm 2, TV per call <= {per_call:.3g}"),
             f"start: N(0, I / (k m)) (data independent); only the final position of each of {K} chain(s) is released"]
    return ProximalPlan(
        eps=eps, delta=delta, n=n, dim=dim, k=k, regulariser=m_reg, loss_strong_convexity=lam,
        gdp_per_draw=s, num_draws=K, rgo=rgo, step_size=eta, num_steps=T, rgo_scale=a, kappa=kappa,
        kl_start=kl0, tv_outer=tv_out, tv_oracle_per_call=per_call, tv_per_draw=tv_draw,
        delta_privacy=delta_privacy, delta_sampling=delta_sampling,
        excess_risk_bound=dim / k + 0.5 * m_reg * R * R, event=event, lipschitz=L, grad_diff=G,
        theta_scale=R,
        assumptions=(f"||theta*|| <= theta_scale = {R:g} for the excess-risk bound only (not for privacy)",),
        notes=tuple(notes))
