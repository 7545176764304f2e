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
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace


import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC
from scipy import optimize

from ._validation import (check_delta, check_finite_array, check_nonnegative, check_positive,
                          check_positive_int, check_target_epsilon)
from .domains import Box, Domain, Euclidean, L2Ball
from .kernels import Langevin
from .losses import LossConstants, PerExampleLoss
from .plan import plan_trajectory
from .potentials import rashomon_potential, thresholded_sensitivity
from .randomness import secret_key

__all__ = [
    "RashomonMinimum",
    "rashomon_minimum",
    "thresholded_sensitivity",
    "mixing_time",
    "RashomonResult",
    "RashomonPlan",
    "plan_rashomon",
    "threshold_base",
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
]

MODES = ("path", "pure", "nonprivate")

#: Default declared bound on |L_float32 - L_float64| near the threshold (absolute). Pairwise
#: float32 reductions of a mean loss of size ~1 err by ~1e-7 relative; 1e-5 is a margin, not a
#: certified rounding bound, and it is reported as an assumption. Losses much larger than 1 at
#: the threshold should declare a larger ``float_slack``.
FLOAT32_SLACK = 1e-5
#: Default declared bound on L_hat* - L*_glob (the solver's certificate is forced below it).
DEFAULT_TOL = 1e-6


# ---------------------------------------------------------------------------------------------
# L*
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RashomonMinimum:
    """Minimum of L over the domain (computed on PRIVATE data: never release it unaccounted).

    ``tol``: certified upper bound on ``value - L*_glob`` (L*_glob = infimum of L over all of
    R^p, which the sqrt(2 M psi) argument needs); ``inf`` when no certificate exists.
    ``constrained_gap``: certified bound on ``value - min_C L`` (first-order / Frank-Wolfe gap
    for a bounded domain, ||g||^2/(2m) unconstrained). ``grad_norm``: |grad L| at ``theta``.
    """

    value: float
    theta: np.ndarray
    tol: float
    constrained_gap: float
    grad_norm: float
    method: str
    converged: bool


def _value_and_grad64(loss, X, y):
    Xj, yj = jnp.asarray(X, dtype=jnp.float64), jnp.asarray(y, dtype=jnp.float64)
    f = jax.jit(jax.value_and_grad(lambda t: loss.mean(t, Xj, yj)))

    def fun(t):
        v, g = f(jnp.asarray(t, dtype=jnp.float64))
        return float(v), np.asarray(g, dtype=np.float64)

    return fun


def _project_ball(x, domain: L2Ball):
    d = x - domain.center
    nrm = np.linalg.norm(d)
    return x if nrm <= domain.radius else domain.center + d * (domain.radius / nrm)


def rashomon_minimum(loss: PerExampleLoss, X, y, domain: Domain | None = None, *,
                     tol: float = 1e-10, maxiter: int = 20000) -> RashomonMinimum:
    """Exact (certified) minimum of the empirical loss over ``domain`` in float64.

    Euclidean / None: L-BFGS; Box: L-BFGS-B with bounds; L2Ball: accelerated projected gradient
    (FISTA with restart, step 1/M from the loss's declared smoothness) until the Frank-Wolfe gap
    is below ``tol``. ``domain=None`` uses ``loss.domain``. Reads private data (NOT private):
    the result is meant for the sampler's threshold only.
    """
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss, got {type(loss).__name__}")
    tol = check_positive("tol", tol)
    maxiter = check_positive_int("maxiter", maxiter)
    X, y = loss.check_data(X, y)
    domain = domain if domain is not None else loss.domain
    d = loss.num_params(X.shape[1])
    if domain is not None and domain.dim != d:
        raise ValueError(f"domain.dim = {domain.dim} does not match the parameter dimension {d}")
    m = float(loss.constants.strong_convexity)
    with jax.enable_x64(True):
        fun = _value_and_grad64(loss, X, y)
        opts = {"maxiter": maxiter, "gtol": min(tol, 1e-8), "ftol": 1e-15}
        if domain is None or isinstance(domain, Euclidean):
            res = optimize.minimize(fun, np.zeros(d), jac=True, method="L-BFGS-B", options=opts)
            theta, method, conv = res.x, "lbfgs", bool(res.success)
        elif isinstance(domain, Box):
            x0 = np.asarray(domain.default_init(), dtype=np.float64)
            res = optimize.minimize(fun, x0, jac=True, method="L-BFGS-B",
                                    bounds=list(zip(domain.lower, domain.upper)), options=opts)
            theta, method, conv = res.x, "lbfgsb_box", bool(res.success)
        elif isinstance(domain, L2Ball):
            M = loss.constants.smoothness
            if M is None:
                raise ValueError("the loss declares no smoothness M: the projected-gradient solver "
                                 "on an L2Ball needs a step 1/M")
            x = np.asarray(domain.center, dtype=np.float64).copy()
            z, tk, fx = x.copy(), 1.0, fun(x)[0]
            conv = False
            for _ in range(maxiter):
                _, gz = fun(z)
                x_new = _project_ball(z - gz / M, domain)
                f_new, g_new = fun(x_new)
                if f_new > fx:  # adaptive restart
                    z, tk = x.copy(), 1.0
                    continue
                t_new = 0.5 * (1 + math.sqrt(1 + 4 * tk * tk))
                z = x_new + ((tk - 1) / t_new) * (x_new - x)
                x, fx, tk = x_new, f_new, t_new
                fw = float(g_new @ (x - domain.center) + domain.radius * np.linalg.norm(g_new))
                if fw <= tol:
                    conv = True
                    break
            theta, method = x, "fista_ball"
        else:
            raise ValueError(f"domain must be None, Euclidean, Box or L2Ball, got {type(domain).__name__}")
        value, g = fun(theta)
    gn = float(np.linalg.norm(g))
    glob = gn * gn / (2 * m) if m > 0 else math.inf
    if domain is None or isinstance(domain, Euclidean):
        cgap = glob
    elif isinstance(domain, Box):
        cgap = float(np.sum(g * theta) - np.sum(np.minimum(g * domain.lower, g * domain.upper)))
    else:
        cgap = float(g @ (theta - domain.center) + domain.radius * gn)
    return RashomonMinimum(value=float(value), theta=np.asarray(theta), tol=float(glob),
                           constrained_gap=max(cgap, 0.0), grad_norm=gn, method=method, converged=conv)


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


# ---------------------------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------------------------

def _smoothed_potential(loss, X, y, beta, threshold, lam_s, num_samples, key, dim):
    """U(theta) = beta * mean_j max{L(theta + xi_j), threshold}, xi_j ~ N(0, lam_s^2 I) fixed.

    A sample-average version of the Gaussian smoothing of Theorem D.7 (MAX, not min): the xi_j
    are drawn once from ``key`` (data independent, common to D and D'), so the function is
    deterministic and its gradient difference is an average of thresholded gradient differences,
    hence bounded by the same Delta_psi.
    """
    xi = lam_s * jax.random.normal(key, (num_samples, dim))
    Xj, yj = jnp.asarray(X, dtype=jnp.float32), jnp.asarray(y, dtype=jnp.float32)

    def U(theta):
        Ls = jax.vmap(lambda e: loss.mean(theta + e, Xj, yj))(xi)
        return beta * jnp.mean(jnp.maximum(Ls, threshold))

    return U


def _run_chains(potential, dim, step_size, num_steps, thinning, num_chains, domain, key, init):
    def potential_fn(z):
        return potential(z["theta"])

    dom = None if (domain is None or isinstance(domain, Euclidean)) else domain
    kern = Langevin(potential_fn=potential_fn, step_size=step_size, domain=dom)
    mcmc = MCMC(kern, num_warmup=0, num_samples=num_steps, num_chains=num_chains,
                thinning=thinning, chain_method="vectorized", progress_bar=False)
    init = jnp.asarray(init, dtype=jnp.float32)
    init_params = {"theta": jnp.broadcast_to(init, (num_chains, dim)) if num_chains > 1 else init}
    mcmc.run(key, init_params=init_params)
    z = np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])
    return z.reshape(num_chains, -1, dim)


@dataclass
class RashomonResult:
    """Draws of a Rashomon sampler, its privacy report, and the measures on evaluation data.

    ``draws`` has shape (chains, draws, dim) and holds every released draw (burn-in included,
    it is part of the accounted path; ``burn_in`` draws per chain are dropped by
    :meth:`flat_draws`). Nothing computed from the private data other than the released draws
    (no L*, threshold, minimiser, loss or membership) is stored here.
    """

    draws: np.ndarray
    mode: str
    psi: float
    report: dict
    loss: PerExampleLoss
    burn_in: int = 0

    @property
    def is_private(self) -> bool:
        return self.mode != "nonprivate"

    def flat_draws(self) -> np.ndarray:
        """Post-burn-in draws pooled over chains, shape (N, dim)."""
        return self.draws[:, self.burn_in:].reshape(-1, self.draws.shape[-1])

    def measures(self, X_eval, y_eval=None, *, reference=None, features=None,
                 task: str = "classification", seed: int | None = None) -> dict:
        """Rashomon measures of the released draws on a USER-SUPPLIED evaluation set.

        The evaluation set must be public or held out: measures are post-processing of the
        draws plus that set and cost no privacy only then. ``reference`` defaults to the mean
        of the draws (itself post-processing). ``features``: indices for model class reliance
        (needs ``y_eval``; default: all).
        """
        th = self.flat_draws()
        X_eval = check_finite_array("X_eval", X_eval, ndim=2)
        ref = th.mean(axis=0) if reference is None else check_finite_array("reference", reference, ndim=1)
        out = {
            "mode": self.mode,
            "privacy": "NON-PRIVATE reference run" if not self.is_private else
                       f"released draws are {self.report.get('guarantee', 'private')}",
            "evaluated_on": "user-supplied evaluation set (must be public or held out to be free)",
            "num_draws": int(th.shape[0]),
            "coefficient_ranges": coefficient_ranges(th),
            "sign_stability": sign_stability(th),
            "prediction_ranges": prediction_ranges(th, X_eval, link="logistic" if task == "classification" else "identity"),
        }
        if task == "classification":
            out["ambiguity"] = ambiguity(th, X_eval, ref)
            out["discrepancy"] = discrepancy(th, X_eval, ref)
        if y_eval is not None:
            y_eval = check_finite_array("y_eval", y_eval, ndim=1)
            feats = range(X_eval.shape[1]) if features is None else features
            out["model_class_reliance"] = {
                int(j): model_class_reliance(th, X_eval, y_eval, int(j), self.loss, seed=seed) for j in feats}
        return out


def _check_mode(mode):
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def threshold_base(minimum: RashomonMinimum, strong_convexity: float, tol: float, *,
                   shift: bool = False) -> float:
    """The threshold base ``b`` with ``b - L*_glob <= tol`` (or ``<= 0`` with ``shift``) on every
    dataset, without a data-dependent branch: ``b = L_hat* - max(0, cert - tol)`` with
    ``cert = |grad L(theta_hat)|^2 / (2 m)`` (``b = L_hat* - max(cert, tol)`` with ``shift``).
    Computed on PRIVATE data: it enters only the sampler's threshold, never a report.
    Needs ``strong_convexity`` m > 0 (without it the sensitivity does not use the base)."""
    if strong_convexity <= 0:
        return minimum.value
    cert = minimum.grad_norm ** 2 / (2.0 * strong_convexity)
    return minimum.value - (max(cert, tol) if shift else max(0.0, cert - tol))


@dataclass(frozen=True)
class RashomonPlan:
    """Everything the Rashomon sampler needs, from declared constants only (no data).

    ``sampling_plan`` is the accounted :class:`~dp_infer.plan.SamplingPlan` (None in mode
    ``"nonprivate"``); ``sensitivity`` is Delta_psi; ``tol_sensitivity`` the total declared
    slack inside it (tol + float slack, or float slack alone with ``shift_threshold``).
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
                  "declared_tol": self.tol, "smoothing": self.smoothing})
        return d


def plan_rashomon(loss: PerExampleLoss | LossConstants, n: int, dim: int, psi: float, *,
                  mode: str = "path", eps: float | None = None, delta: float | None = None,
                  beta: float | None = None, horizon: float = 1.0, num_chains: int = 1,
                  num_draws: int = 1000, domain: Domain | None = None, step_safety: float = 0.5,
                  min_steps: int = 200, burn_in_fraction: float = 0.5,
                  smoothing: float | None = None, smoothing_samples: int = 16,
                  shift_threshold: bool = False, tol: float = DEFAULT_TOL,
                  float_slack: float = FLOAT32_SLACK, eps_prime_fraction: float = 0.1,
                  omega: float = 0.01) -> RashomonPlan:
    """The Rashomon sampler's plan from n, the dimension, psi and the loss's DECLARED constants.

    Data independent by construction (it never sees X or y): neighbouring datasets get the
    same plan. See :func:`sample_rashomon` for the modes and parameters.
    """
    from .calibrate import calibrate

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
    M_eff = M if smoothing is None else M + math.sqrt(2 / math.pi) * math.sqrt(2 * M * psi) / smoothing
    tol_sens = float_slack + (0.0 if shift_threshold else tol)
    sens = thresholded_sensitivity(c, n, psi, tol_sens)
    consts = replace(c, grad_diff=sens * n, smoothness=M_eff)
    assumptions = (
        f"thresholded gradient sensitivity Delta_psi = {sens:.6g} from declared constants "
        f"(G = {c.grad_diff:g}, n = {n}, M = {M:g}, m = {c.strong_convexity:g}, psi = {psi:g}, "
        f"declared tol = {tol:g}, declared float slack = {float_slack:g}); digest seed-001 §4.3",
        "L* is computed on the private data and enters only the sampler's threshold (base lowered "
        "by any excess of its certificate over tol); it is neither released nor used in the plan",
        f"float32 evaluation error of L near the threshold <= float_slack = {float_slack:g} "
        "(an idealisation, like float32 Gaussian noise)",
    )
    common = dict(mode=mode, psi=psi, num_chains=num_chains, n=n, dim=dim, sensitivity=sens, tol=tol,
                  tol_sensitivity=tol_sens, shift_threshold=bool(shift_threshold), smoothing=smoothing,
                  smoothing_samples=smoothing_samples)
    if mode == "path":
        plan = plan_trajectory(consts, n, dim, eps=eps, delta=delta, horizon=horizon,
                               num_chains=num_chains, num_draws=num_draws, step_safety=step_safety,
                               min_steps=min_steps, burn_in_fraction=burn_in_fraction)
        plan = replace(plan, route="rashomon_path", assumptions=assumptions + plan.assumptions[1:],
                       excess_risk_bound=psi + dim / plan.beta)
        return RashomonPlan(beta=plan.beta, step_size=plan.step_size, num_steps=plan.num_steps,
                            thinning=plan.thinning, burn_in=plan.burn_in, sampling_plan=plan,
                            assumptions=plan.assumptions, **common)
    if mode == "pure":
        plan = calibrate(consts, n, dim, eps=eps / num_chains, delta=None, route="pure", domain=domain,
                         horizon=horizon, num_chains=1, num_draws=num_draws,
                         eps_prime_fraction=eps_prime_fraction, omega=omega)
        plan = replace(plan, route="rashomon_pure", assumptions=assumptions + plan.assumptions[1:])
        return RashomonPlan(beta=plan.beta, step_size=plan.step_size, num_steps=plan.num_steps,
                            thinning=plan.num_steps, burn_in=0, sampling_plan=plan,
                            assumptions=plan.assumptions, **common)
    M_U = beta * M_eff
    h = min(step_safety / M_U, horizon / min_steps)
    num_steps = int(math.ceil(horizon / h))
    thinning = max(1, num_steps // num_draws)
    num_steps = thinning * int(math.ceil(num_steps / thinning))  # round up: h stays <= the stable step
    return RashomonPlan(beta=beta, step_size=horizon / num_steps, num_steps=num_steps,
                        thinning=thinning, burn_in=int(burn_in_fraction * (num_steps // thinning)),
                        assumptions=("NON-PRIVATE reference run",), **common)


def sample_rashomon(loss: PerExampleLoss, X, y, psi: float, *, eps: float | None = None,
                    delta: float | None = None, mode: str = "path", horizon: float = 1.0,
                    num_chains: int = 1, num_draws: int = 1000, domain: Domain | None = None,
                    seed: int | None = None, key_impl: str = "threefry2x32",
                    beta: float | None = None, step_safety: float = 0.5,
                    min_steps: int = 200, burn_in_fraction: float = 0.5,
                    smoothing: float | None = None, smoothing_samples: int = 16,
                    shift_threshold: bool = False, tol: float = DEFAULT_TOL,
                    float_slack: float = FLOAT32_SLACK, eps_prime_fraction: float = 0.1,
                    omega: float = 0.01) -> RashomonResult:
    """Draws from the Rashomon-thresholded Gibbs law exp(-beta max{L, L* + psi}) on ``domain``.

    Modes:

    * ``"path"``: (eps, delta)-DP for the whole released trajectory of ``num_chains`` chains of
      Langevin time ``horizon`` each (mu-GDP, seed-001 Lemma 2.2 with the ``Delta_psi`` of
      :func:`thresholded_sensitivity` from DECLARED constants, ``tol`` and ``float_slack``);
      beta is calibrated, not chosen, and nothing computed from the data enters it.
    * ``"pure"``: pure eps on a bounded domain (L2Ball / Box) through the certified pure route
      of :func:`dp_infer.calibrate.calibrate`: each chain is a trajectory at
      ``(eps_c (1 - f), delta_a)`` with a tiny ``delta_a``, and its final draw (inside the
      domain) is purified (seed 003) to pure ``eps_c = eps / num_chains``; the chains compose
      to pure ``eps``. Nothing relies on a mixing or TV claim.
    * ``"nonprivate"``: user ``beta`` (large beta -> nearly uniform on G); NOT private.

    The plan is :func:`plan_rashomon` (data independent). ``seed=None`` (default): secret noise
    from the operating system. ``smoothing=lambda`` uses the sample-average Gaussian smoothing
    of the thresholded loss (Theorem D.7 with max); ``shift_threshold=True`` lowers the base by
    ``max(cert, tol)`` so the sensitivity uses ``sqrt(2 M (psi + float_slack))``. Draws are
    never filtered by membership in G.
    """
    from .privacy import purification as purif
    from .privacy.accountant import Accountant

    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss, got {type(loss).__name__}")
    X, y = loss.check_data(X, y)
    n, dim = X.shape[0], loss.num_params(X.shape[1])
    domain = domain if domain is not None else loss.domain
    rp = plan_rashomon(loss, n, dim, psi, mode=mode, eps=eps, delta=delta, beta=beta, horizon=horizon,
                       num_chains=num_chains, num_draws=num_draws, domain=domain,
                       step_safety=step_safety, min_steps=min_steps, burn_in_fraction=burn_in_fraction,
                       smoothing=smoothing, smoothing_samples=smoothing_samples,
                       shift_threshold=shift_threshold, tol=tol, float_slack=float_slack,
                       eps_prime_fraction=eps_prime_fraction, omega=omega)
    key, source = secret_key(seed, impl=key_impl)
    key_run, key_smooth, key_purify = jax.random.split(key, 3)

    # ---- the data: L* only inside the threshold ---------------------------------------------
    mini = rashomon_minimum(loss, X, y, domain)
    base = threshold_base(mini, loss.constants.strong_convexity, rp.tol, shift=rp.shift_threshold)
    del mini  # private: never stored, returned or reported
    init = jnp.zeros(dim) if domain is None else jnp.asarray(domain.default_init())
    if rp.smoothing is None:
        pot = rashomon_potential(loss, X, y, beta=rp.beta, psi=rp.psi, L_star=base,
                                 L_star_tol=rp.tol_sensitivity)
    else:
        pot = _smoothed_potential(loss, X, y, rp.beta, base + rp.psi, rp.smoothing,
                                  rp.smoothing_samples, key_smooth, dim)
    draws = _run_chains(pot, dim, rp.step_size, rp.num_steps, rp.thinning, rp.num_chains, domain,
                        key_run, init)
    report = rp.as_dict()
    report["randomness"] = source.describe()
    if rp.mode == "path":
        report["guarantee"] = (f"({report['eps_spent']:.4g}, {report['delta']:g})-DP for the whole "
                               f"trajectory of {rp.num_chains} chain(s)")
        return RashomonResult(draws, rp.mode, rp.psi, report, loss, rp.burn_in)
    if rp.mode == "nonprivate":
        report["guarantee"] = "NON-PRIVATE (reference run; no privacy guarantee)"
        return RashomonResult(draws, rp.mode, rp.psi, report, loss, rp.burn_in)

    # ---- pure: purify each chain's final draw (inside the domain: the chain is projected) -----
    plan = rp.sampling_plan
    pdict = dict(plan.purification)
    pdict["q"] = float(pdict["q"])
    params = purif.PurificationParams(**pdict)
    with jax.enable_x64(True):
        last = np.asarray(domain.project(jnp.asarray(draws[:, -1], dtype=jnp.float64)))
    out = purif.purify(key_purify, last, params, domain)
    acc = Accountant([(plan.event, rp.num_chains)])
    eps_total = float(plan.event.epsilon) * rp.num_chains
    report.update({"eps": eps_total, "delta": 0.0, "eps_per_chain": float(plan.event.epsilon),
                   "eps_spent": eps_total, "accountant": acc.to_dict(),
                   "guarantee": f"pure {eps_total:.4g}-DP over {rp.num_chains} purified final draw(s) "
                                "(each chain a certified trajectory + purification; basic composition)"})
    return RashomonResult(out[:, None, :], rp.mode, rp.psi, report, loss, 0)


# ---------------------------------------------------------------------------------------------
# measures (names follow rashomon-py / Marx et al. / Fisher et al.)
# ---------------------------------------------------------------------------------------------

def _draws2(draws) -> np.ndarray:
    th = np.asarray(draws, dtype=np.float64)
    if th.ndim == 3:
        th = th.reshape(-1, th.shape[-1])
    return check_finite_array("draws", th, ndim=2)


def coefficient_ranges(draws, quantiles=(0.025, 0.975)) -> dict:
    """Per-coefficient low/high (min/max over draws), quantiles and mean (VIC-style ranges)."""
    th = _draws2(draws)
    q = np.quantile(th, quantiles, axis=0)
    return {"low": th.min(axis=0), "high": th.max(axis=0), "quantiles": tuple(quantiles),
            "q_low": q[0], "q_high": q[-1], "mean": th.mean(axis=0)}


def sign_stability(draws) -> dict:
    """Share of draws with the majority sign per coefficient; ``stable`` if all draws agree."""
    th = _draws2(draws)
    pos = np.mean(th > 0, axis=0)
    share = np.maximum(pos, 1 - pos)
    return {"share": share, "stable": share == 1.0, "num_stable": int(np.sum(share == 1.0))}


def _labels(th, X):
    return (np.asarray(X) @ th.T) > 0  # (rows, draws)


def ambiguity(draws, X_eval, reference) -> dict:
    """Flip rate: share of evaluation rows whose label under SOME draw differs from the
    reference model's label (Marx et al. ambiguity)."""
    th = _draws2(draws)
    X_eval = check_finite_array("X_eval", X_eval, ndim=2)
    ref = (X_eval @ np.asarray(reference, dtype=np.float64)) > 0
    flipped = np.any(_labels(th, X_eval) != ref[:, None], axis=1)
    return {"flip_rate": float(flipped.mean()), "flipped": flipped, "num_flipped": int(flipped.sum())}


def discrepancy(draws, X_eval, reference) -> float:
    """Max over draws of the share of evaluation rows whose label differs from the reference."""
    th = _draws2(draws)
    X_eval = check_finite_array("X_eval", X_eval, ndim=2)
    ref = (X_eval @ np.asarray(reference, dtype=np.float64)) > 0
    return float(np.max(np.mean(_labels(th, X_eval) != ref[:, None], axis=0)))


def prediction_ranges(draws, X_eval, link: str = "logistic") -> dict:
    """Per-row low/high of the prediction over draws (probabilities for ``link='logistic'``)."""
    if link not in ("logistic", "identity"):
        raise ValueError(f"link must be 'logistic' or 'identity', got {link!r}")
    th = _draws2(draws)
    X_eval = check_finite_array("X_eval", X_eval, ndim=2)
    s = X_eval @ th.T
    p = 1 / (1 + np.exp(-s)) if link == "logistic" else s
    return {"low": p.min(axis=1), "high": p.max(axis=1), "width": p.max(axis=1) - p.min(axis=1)}


def model_class_reliance(draws, X_eval, y_eval, feature: int, loss: PerExampleLoss, *,
                         seed: int | None = None, num_permutations: int = 1) -> dict:
    """Per-draw model reliance: loss with column ``feature`` permuted / original loss, on the
    evaluation set; returns MCR- (min), MCR+ (max) and quantiles over draws (sampled inner
    approximation of Fisher et al.'s MCR)."""
    th = _draws2(draws)
    X_eval = check_finite_array("X_eval", X_eval, ndim=2)
    y_eval = check_finite_array("y_eval", y_eval, ndim=1)
    if not 0 <= int(feature) < X_eval.shape[1]:
        raise ValueError(f"feature must lie in [0, {X_eval.shape[1] - 1}], got {feature!r}")
    rng = np.random.default_rng(seed)
    with jax.enable_x64(True):
        f = jax.jit(jax.vmap(lambda t, Xe, ye: loss.mean(t, Xe, ye), in_axes=(0, None, None)))
        base = np.asarray(f(jnp.asarray(th), jnp.asarray(X_eval), jnp.asarray(y_eval)))
        perm = np.zeros_like(base)
        for _ in range(check_positive_int("num_permutations", num_permutations)):
            Xp = X_eval.copy()
            Xp[:, feature] = rng.permutation(Xp[:, feature])
            perm += np.asarray(f(jnp.asarray(th), jnp.asarray(Xp), jnp.asarray(y_eval)))
        perm /= num_permutations
    ratio = perm / np.maximum(base, 1e-300)
    return {"mcr_minus": float(ratio.min()), "mcr_plus": float(ratio.max()),
            "median": float(np.median(ratio)), "ratios": ratio}


def rashomon_ratio_estimate(loss: PerExampleLoss, X, y, L_star: float, psi: float, domain: Domain, *,
                            num_samples: int = 100000, seed: int | None = None,
                            data_is_private: bool = True) -> dict:
    """Share of uniform draws on the bounded ``domain`` inside {L <= L_star + psi}, with its
    binomial standard error (Semenova et al.'s Rashomon ratio). Computed on private data this
    is a NON-PRIVATE release (flagged); evaluate it on public data to make it free."""
    psi = check_nonnegative("psi", psi)
    num_samples = check_positive_int("num_samples", num_samples)
    if not isinstance(domain, Domain) or not domain.bounded:
        raise ValueError("domain must be a bounded Domain (L2Ball or Box)")
    X, y = loss.check_data(X, y)
    with jax.enable_x64(True):
        U = np.asarray(domain.sample_uniform(secret_key(seed)[0], (num_samples,)), dtype=np.float64)
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        Ls = np.asarray(jax.jit(jax.vmap(lambda t: loss.mean(t, Xj, yj)))(jnp.asarray(U)))
    inside = Ls <= float(L_star) + psi
    r = float(inside.mean())
    return {"ratio": r, "se": math.sqrt(max(r * (1 - r), 0.0) / num_samples), "num_samples": num_samples,
            "privacy": "NON-PRIVATE (computed on private data; not covered by any guarantee)"
            if data_is_private else "computed on public data"}


def set_fidelity(draws, loss: PerExampleLoss, X, y, L_star: float, psi: float, *,
                 data_is_private: bool = True) -> dict:
    """Share of draws with L(theta; X, y) <= L_star + psi.

    Default: the data are assumed PRIVATE and the result is flagged as a further release NOT
    covered by the sampler's guarantee (each draw's membership can change between neighbours,
    so the share has sensitivity 1). Pass held-out/public data (and its own L_star from
    :func:`rashomon_minimum`) with ``data_is_private=False`` for a free diagnostic.
    """
    psi = check_nonnegative("psi", psi)
    th = _draws2(draws)
    X, y = loss.check_data(X, y)
    with jax.enable_x64(True):
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        Ls = np.asarray(jax.jit(jax.vmap(lambda t: loss.mean(t, Xj, yj)))(jnp.asarray(th)))
    return {"fidelity": float(np.mean(Ls <= float(L_star) + psi)),
            "privacy": "NON-PRIVATE further release (private data): account for it or do not publish"
            if data_is_private else "evaluated on public/held-out data"}


# ---------------------------------------------------------------------------------------------
# demo
# ---------------------------------------------------------------------------------------------

def compare_breast_cancer(seed: int | None = None, *, psi: float = 0.02, eps: float = 1.0, delta: float = 1e-5,
                          l2: float = 0.05, row_norm: float = 4.0, nonprivate_beta: float = 3000.0,
                          horizon: float = 2.0, num_chains: int = 4, num_draws: int = 500) -> dict:
    """Breast cancer (10 "mean" features; standardisation statistics DECLARED PUBLIC for the
    demo), logistic loss with l2: non-private Rashomon sampling vs private path mode at ``eps``
    side by side, measures on a held-out 30% split (not on the training rows)."""
    from sklearn.datasets import load_breast_cancer

    from .datasets import clip_rows
    from .losses import logistic

    Xall, yall = load_breast_cancer(return_X_y=True)
    Xall = Xall[:, :10]
    Z = (Xall - Xall.mean(0)) / Xall.std(0)  # declared public for the demo
    Z, clip = clip_rows(Z, row_norm)
    rng = np.random.default_rng(seed)
    idx = rng.permutation(Z.shape[0])
    ntr = int(0.7 * Z.shape[0])
    tr, ev = idx[:ntr], idx[ntr:]
    loss = logistic(row_norm=row_norm, l2=l2)
    Xtr, ytr, Xev, yev = Z[tr], yall[tr].astype(float), Z[ev], yall[ev].astype(float)
    mini = rashomon_minimum(loss, Xtr, ytr)
    res_np = sample_rashomon(loss, Xtr, ytr, psi, mode="nonprivate", beta=nonprivate_beta, horizon=horizon,
                             num_chains=num_chains, num_draws=num_draws, seed=seed)
    res_p = sample_rashomon(loss, Xtr, ytr, psi, mode="path", eps=eps, delta=delta, horizon=horizon,
                            num_chains=num_chains, num_draws=num_draws, seed=seed)
    out = {"clipped_rows": clip.n_clipped, "n_train": ntr, "n_eval": len(ev), "psi": psi}
    for name, res in (("nonprivate", res_np), ("private", res_p)):
        m = res.measures(Xev, yev, reference=mini.theta, features=[])
        # reference = non-private optimum: fine for the demo comparison, but it is itself a
        # non-private release; a private analysis would use the draws' mean.
        eval_min = rashomon_minimum(loss, Xev, yev)
        fid = set_fidelity(res.flat_draws(), loss, Xev, yev, eval_min.value, psi, data_is_private=False)
        out[name] = {
            "beta": res.report["beta"],
            "guarantee": res.report["guarantee"],
            "eps_spent": res.report.get("eps_spent"),
            "flip_rate": m["ambiguity"]["flip_rate"],
            "discrepancy": m["discrepancy"],
            "num_sign_stable": m["sign_stability"]["num_stable"],
            "coef_low": m["coefficient_ranges"]["low"],
            "coef_high": m["coefficient_ranges"]["high"],
            "mean_prediction_width": float(m["prediction_ranges"]["width"].mean()),
            "set_fidelity_eval": fid["fidelity"],
        }
    return out
