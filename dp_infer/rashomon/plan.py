"""The Rashomon sampler's plan from declared constants only (no data): beta, step, horizon,
chains and the thresholded sensitivity; and the continuous-time mixing horizon (reference)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .._validation import (
    check_delta, check_nonnegative, check_positive, check_positive_int, check_target_epsilon,
)
from ..domains import Box, Domain, L2Ball
from ..losses import LossConstants, PerExampleLoss
from ..routes.plan import plan_trajectory, step_schedule
from ..potentials import thresholded_sensitivity
from .threshold import default_width, shell_factor, smoothed_curvature, smoothed_sensitivity

MODES = ("path", "pure", "nonprivate")


#: Default declared bound on |L_float32 - L_float64| near the threshold (absolute). Pairwise
#: float32 reductions of a mean loss of size ~1 err by ~1e-7 relative; 1e-5 is a margin, not a
#: certified rounding bound, and it is reported as an assumption. Losses much larger than 1 at
#: the threshold should declare a larger ``float_slack``.
FLOAT32_SLACK = 1e-5


#: Default declared bound on L_hat* - L*_glob (the solver's certificate is forced below it).
DEFAULT_TOL = 1e-6

#: Default largest number of Langevin steps per chain a plan may ask for.
DEFAULT_MAX_STEPS = 10_000_000


def _check_mode(mode):
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


@dataclass(frozen=True)
class RashomonPlan:
    """Everything the Rashomon sampler needs, from declared constants only (no data).

    ``sampling_plan`` is the accounted :class:`~dp_infer.routes.plan.SamplingPlan` (None in mode
    ``"nonprivate"``); ``sensitivity`` is Delta_psi; ``tol_sensitivity`` the total declared
    slack inside it (tol + float slack, or float slack alone with ``shift_threshold``);
    ``threshold_width`` the ramp width w of the smoothed threshold (0: unsmoothed) and
    ``curvature`` the bound on the Hessian of the thresholded loss the step is planned from.
    """

    mode: str
    psi: float
    beta: float
    step_size: float
    num_steps: int
    thinning: int
    burn_in: int
    num_chains: int
    n: int
    dim: int
    sensitivity: float
    tol: float
    tol_sensitivity: float
    shift_threshold: bool
    smoothing: float | None
    smoothing_samples: int
    threshold_width: float = 0.0
    curvature: float = 0.0
    sampling_plan: object | None = None
    assumptions: tuple[str, ...] = ()

    @property
    def event(self):
        return None if self.sampling_plan is None else self.sampling_plan.event

    def as_dict(self) -> dict:
        d = {} if self.sampling_plan is None else self.sampling_plan.as_dict()
        d.update({"mode": self.mode, "psi": self.psi, "beta": self.beta, "step_size": self.step_size,
                  "num_steps": self.num_steps, "thinning": self.thinning, "num_chains": self.num_chains,
                  "n": self.n, "dim": self.dim, "thresholded_sensitivity": self.sensitivity,
                  "declared_tol": self.tol, "smoothing": self.smoothing,
                  "threshold_width": self.threshold_width, "threshold_curvature": self.curvature,
                  "shell_factor_bound": self.shell_factor_bound,
                  "horizon": self.num_steps * self.step_size, "assumptions": tuple(self.assumptions)})
        return d

    @property
    def shell_factor_bound(self) -> float:
        """exp(beta w / 2): the smoothing raises the density outside the set by at most this."""
        return shell_factor(self.beta, self.threshold_width)

    def charges(self) -> list:
        """``[(event, count)]`` a ledger charges for this plan (empty in mode nonprivate): the
        path event covers every chain; the pure route charges one purified event per chain."""
        if self.sampling_plan is None:
            return []
        return [(self.sampling_plan.event, self.num_chains if self.mode == "pure" else 1)]


def plan_rashomon(loss: PerExampleLoss | LossConstants, n: int, dim: int, psi: float, *,
                  mode: str = "path", eps: float | None = None, delta: float | None = None,
                  beta: float | None = None, horizon: float = 1.0, num_chains: int = 1,
                  num_draws: int = 1000, domain: Domain | None = None, step_safety: float = 0.5,
                  min_steps: int = 200, max_steps: int = DEFAULT_MAX_STEPS,
                  burn_in_fraction: float = 0.5, threshold_width: float | None = None,
                  smoothing: float | None = None, smoothing_samples: int = 16,
                  shift_threshold: bool = False, tol: float = DEFAULT_TOL,
                  float_slack: float = FLOAT32_SLACK, eps_prime_fraction: float = 0.1,
                  omega: float = 0.01) -> RashomonPlan:
    """The Rashomon sampler's plan from n, the dimension, psi and the loss's DECLARED constants.

    Data independent by construction (it never sees X or y): neighbouring datasets get the
    same plan. The potential is ``beta f_w(L)`` with the smoothed threshold of
    :mod:`dp_infer.rashomon.threshold` (ramp width ``threshold_width``, default ``psi / 20``):
    the step is planned from its curvature ``beta (M + g^2 / w)`` -- the jump ``beta g`` of
    the gradient at the threshold spread over the ramp -- not from ``beta M`` alone. A plan
    needing more than ``max_steps`` steps per chain is refused. See :func:`sample_rashomon`
    for the modes and the other parameters.
    """
    from ..routes.calibrate import calibrate

    mode = _check_mode(mode)
    c = loss.constants if isinstance(loss, PerExampleLoss) else loss
    if not isinstance(c, LossConstants):
        raise ValueError(f"loss must be a PerExampleLoss or LossConstants, got {type(loss).__name__}")
    if domain is None and isinstance(loss, PerExampleLoss):
        domain = loss.domain
    n = check_positive_int("n", n)
    dim = check_positive_int("dim", dim)
    psi = check_nonnegative("psi", psi)
    horizon = check_positive("horizon", horizon)
    num_chains = check_positive_int("num_chains", num_chains)
    num_draws = check_positive_int("num_draws", num_draws)
    max_steps = check_positive_int("max_steps", max_steps)
    tol = check_nonnegative("tol", tol)
    float_slack = check_nonnegative("float_slack", float_slack)
    if not 0 <= burn_in_fraction < 1:
        raise ValueError(f"burn_in_fraction must lie in [0, 1), got {burn_in_fraction!r}")
    if not 0 < step_safety < 2:
        raise ValueError(f"step_safety must lie in (0, 2) (h * M_U; ULA diverges at 2), got {step_safety!r}")
    min_steps = check_positive_int("min_steps", min_steps)
    if smoothing is not None:
        smoothing = check_positive("smoothing", smoothing)
        smoothing_samples = check_positive_int("smoothing_samples", smoothing_samples)
        if threshold_width is not None:
            raise ValueError("threshold_width and smoothing exclude each other (the Gaussian smoothing "
                             "already smooths the threshold): pass one of them")
        width = 0.0
    elif threshold_width is None:
        width = default_width(psi)
    elif psi == 0:
        width = check_nonnegative("threshold_width", threshold_width)
    else:
        width = check_positive("threshold_width", threshold_width)
    if mode == "nonprivate":
        if beta is None:
            raise ValueError("beta is required for mode='nonprivate' (a value in (0, inf))")
        beta = check_positive("beta", beta)
        if eps is not None or delta is not None:
            raise ValueError("eps/delta do not apply to mode='nonprivate' (it is NOT private)")
    else:
        if beta is not None:
            raise ValueError(f"beta is calibrated from (eps, delta) in mode={mode!r}; pass beta only "
                             "with mode='nonprivate'")
        eps = check_target_epsilon(eps)
        if mode == "path":
            delta = check_delta(delta)
        elif delta not in (None, 0):
            raise ValueError("mode='pure' releases pure eps-DP: pass delta=None")
    if domain is not None and domain.dim != dim:
        raise ValueError(f"domain.dim = {domain.dim} does not match the parameter dimension {dim}")
    if mode == "pure" and (domain is None or not domain.bounded or not isinstance(domain, (L2Ball, Box))):
        raise ValueError("mode='pure' needs a bounded domain (L2Ball or Box): pass domain=")
    if c.smoothness is None:
        raise ValueError("the loss declares no smoothness M: the step size cannot be chosen")
    M = c.smoothness
    tol_sens = float_slack + (0.0 if shift_threshold else tol)
    if smoothing is None:
        M_eff = smoothed_curvature(c, psi, width, tol_sens)
        sens = smoothed_sensitivity(c, n, psi, width, tol_sens)
    else:
        M_eff = M + math.sqrt(2 / math.pi) * math.sqrt(2 * M * psi) / smoothing
        sens = thresholded_sensitivity(c, n, psi, tol_sens)
    # the accounted plan sees G / n: round G up so that G / n is never below Delta_psi (sens * n / n
    # can round down by one ulp, and the event's mu would then be below the sampler's real one)
    G_eff = sens * n
    if G_eff / n < sens:
        G_eff = math.nextafter(G_eff, math.inf)
    consts = replace(c, grad_diff=G_eff, smoothness=M_eff)
    if smoothing is None and width > 0:
        shape = (f"threshold smoothed over a declared loss width w = {width:.4g}: the target is exactly "
                 "uniform on the Rashomon set; outside it the density is raised by at most a factor "
                 "exp(beta w / 2)")
    elif smoothing is None:
        shape = "unsmoothed threshold max{L, L* + psi} (psi = 0)"
    else:
        shape = (f"Gaussian-smoothed threshold (lambda = {smoothing:g}, {smoothing_samples} fixed "
                 "offsets): NOT flat on the Rashomon set")
    assumptions = (
        f"thresholded gradient sensitivity Delta_psi = {sens:.6g} from declared constants "
        f"(G = {c.grad_diff:g}, n = {n}, M = {M:g}, m = {c.strong_convexity:g}, psi = {psi:g}, "
        f"declared tol = {tol:g}, declared float slack = {float_slack:g}, threshold width = {width:g}); "
        "digest seed-001 §4.3 averaged over the ramp's thresholds",
        "L* is computed on the private data and enters only the sampler's threshold (base lowered "
        "by any excess of its certificate over tol); it is neither released nor used in the plan",
        f"float32 evaluation error of L near the threshold <= float_slack = {float_slack:g} "
        "(an idealisation, like float32 Gaussian noise)",
        shape,
    )
    common = dict(mode=mode, psi=psi, num_chains=num_chains, n=n, dim=dim, sensitivity=sens, tol=tol,
                  tol_sensitivity=tol_sens, shift_threshold=bool(shift_threshold), smoothing=smoothing,
                  smoothing_samples=smoothing_samples, threshold_width=width, curvature=M_eff)

    def _check_steps(num_steps, what):
        if num_steps > max_steps:
            raise ValueError(
                f"{what} needs {num_steps:.3g} Langevin steps per chain for horizon {horizon:g} (step "
                f"from the threshold's curvature beta * {M_eff:.4g}), more than max_steps = {max_steps:g}: "
                "lower beta, shorten the horizon, widen threshold_width or raise max_steps")
        return num_steps

    if mode == "path":
        plan = plan_trajectory(consts, n, dim, eps=eps, delta=delta, horizon=horizon,
                               num_chains=num_chains, num_draws=num_draws, step_safety=step_safety,
                               min_steps=min_steps, burn_in_fraction=burn_in_fraction)
        _check_steps(plan.num_steps, f"the calibrated beta = {plan.beta:.4g}")
        plan = replace(plan, route="rashomon_path", assumptions=assumptions + plan.assumptions[1:],
                       excess_risk_bound=psi + dim / plan.beta)
        return RashomonPlan(beta=plan.beta, step_size=plan.step_size, num_steps=plan.num_steps,
                            thinning=plan.thinning, burn_in=plan.burn_in, sampling_plan=plan,
                            assumptions=plan.assumptions, **common)
    if mode == "pure":
        plan = calibrate(consts, n, dim, eps=eps / num_chains, delta=None, route="pure", domain=domain,
                         horizon=horizon, num_chains=1, num_draws=num_draws,
                         eps_prime_fraction=eps_prime_fraction, omega=omega)
        _check_steps(plan.num_steps, f"the calibrated beta = {plan.beta:.4g}")
        plan = replace(plan, route="rashomon_pure", assumptions=assumptions + plan.assumptions[1:])
        return RashomonPlan(beta=plan.beta, step_size=plan.step_size, num_steps=plan.num_steps,
                            thinning=plan.num_steps, burn_in=0, sampling_plan=plan,
                            assumptions=plan.assumptions, **common)
    # the schedule is rounded up to whole thinnings before the refusal: the plan run is the rounded one
    h, num_steps, thinning = step_schedule(beta * M_eff, horizon=horizon, num_draws=num_draws,
                                           safety=step_safety, min_steps=min_steps)
    _check_steps(num_steps, f"beta = {beta:.4g}")
    return RashomonPlan(beta=beta, step_size=h, num_steps=num_steps,
                        thinning=thinning, burn_in=int(burn_in_fraction * (num_steps // thinning)),
                        assumptions=("NON-PRIVATE reference run", shape), **common)


def mixing_time(beta: float, strong_convexity: float, psi: float, lipschitz: float,
                diameter: float, tv: float) -> float:
    """Continuous-time LD horizon with TV <= tv to the thresholded Gibbs law (digest §6.4).

    ``t = log(beta L diam / (2 tv^2)) / (2c)`` with LSI constant ``c = beta m e^{-beta psi}``
    if beta psi <= 1 and ``c = m / (e psi)`` otherwise (Lemma D.5's two cases), from a uniform
    start on C. Needs m > 0. Discretisation error is NOT included.
    """
    beta = check_positive("beta", beta)
    m = check_positive("strong_convexity", strong_convexity)
    psi = check_nonnegative("psi", psi)
    lip = check_positive("lipschitz", lipschitz)
    diam = check_positive("diameter", diameter)
    tv = check_positive("tv", tv)
    c = beta * m * math.exp(-beta * psi) if beta * psi <= 1 else m / (math.e * psi)
    return max(math.log(beta * lip * diam / (2 * tv * tv)), 0.0) / (2 * c)
