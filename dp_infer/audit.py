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
``trajectory``        :func:`dp_infer.plan.plan_trajectory` (exact GDP calibration); statistic the
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

Minibatch SGLD (:func:`minibatch_audit`)
----------------------------------------
The actual kernel :func:`dp_infer.kernels.sgld.sample_chain` on a 1-D linear per-example loss
``l(theta; x) = -x theta`` (gradient ``-x``, clipped at C): n rows, the canary at ``x = C`` in D
and, in D', at ``x = -C`` (replace-one: the clipped gradients differ by 2C, the worst case) or
removed (add/remove); every other row at ``x = background * C``. beta is calibrated by
:func:`~dp_infer.privacy.minibatch.minibatch_beta_max` for the claimed (eps, delta); with one
step (the default) the final iterate is the whole release. ``normaliser="rows"`` runs the kernel
with the row count as normaliser under add/remove -- the setting that the event does NOT cover
(there a removal moves the mean gradient by up to 2C/(n-1) with ``background = -1``), kept so the
audit can show the gap.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax, random
from scipy import stats

from .kernels import langevin as ula
from .randomness import secret_key

__all__ = [
    "AuditResult",
    "clopper_pearson_upper",
    "eps_lower_bound",
    "audit_statistics",
    "quadratic_audit",
    "logistic_audit",
    "minibatch_audit",
    "ROUTES",
]

ROUTES = ("trajectory", "trajectory_unsafe", "last_iterate", "stationary", "pure", "purified",
          "rashomon_path", "rashomon_path_unsafe")


@dataclass
class AuditResult:
    """Outcome of one audit. ``eps_lower`` holds with probability >= ``confidence``."""

    family: str
    route: str
    statistic: str
    claimed_eps: float
    delta: float
    eps_lower: float
    confidence: float
    num_samples: int          # chains per side (both halves)
    threshold: float
    orientation: int
    fpr_upper: float
    fnr_upper: float
    eps_exact: float | None = None   # the true eps of the audited mechanism when known in closed form
    params: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return json_safe(asdict(self))


def json_safe(x):
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return x


def clopper_pearson_upper(k, n: int, alpha: float) -> np.ndarray:
    """One-sided (1 - alpha) Clopper-Pearson upper bound on a binomial rate, k successes in n."""
    k = np.asarray(k, dtype=np.float64)
    out = stats.beta.ppf(1.0 - alpha, k + 1.0, np.maximum(n - k, 1e-300))
    return np.where(k >= n, 1.0, out)


def eps_lower_bound(fp, fn, n: int, delta: float, alpha: float) -> np.ndarray:
    """``log((1 - delta - FNR_u) / FPR_u)`` with one-sided CP bounds at level alpha/2 each (0 if void)."""
    fpr_u = clopper_pearson_upper(fp, n, alpha / 2.0)
    fnr_u = clopper_pearson_upper(fn, n, alpha / 2.0)
    num = 1.0 - delta - fnr_u
    with np.errstate(divide="ignore", invalid="ignore"):
        lb = np.where(num > 0, np.log(np.maximum(num, 1e-300) / fpr_u), 0.0)
    return np.maximum(lb, 0.0)


def _counts(t_d: np.ndarray, t_dp: np.ndarray, taus: np.ndarray):
    """FP = #{T(D') > tau}, FN = #{T(D) <= tau} for every tau (sorted counting)."""
    sd = np.sort(t_d)
    sdp = np.sort(t_dp)
    fn = np.searchsorted(sd, taus, side="right")
    fp = sdp.size - np.searchsorted(sdp, taus, side="right")
    return fp, fn


def audit_statistics(t_d, t_dp, *, delta: float, confidence: float = 0.95, num_thresholds: int = 2000,
                     min_events: int = 50):
    """Lower bound on eps from statistic samples on D (``t_d``) and D' (``t_dp``).

    Returns ``(eps_lb, tau, orientation, fpr_u, fnr_u)``. Orientation, direction and threshold are
    chosen on the first half of each sample, eps_lb is evaluated on the second half (see the
    module docstring for the derivation). Thresholds with fewer than ``min_events`` false or
    true positives in the selection half are not considered: their tail counts are too noisy to
    carry over to the evaluation half (a variance control only; validity does not depend on it).
    """
    t_d = np.asarray(t_d, dtype=np.float64).ravel()
    t_dp = np.asarray(t_dp, dtype=np.float64).ravel()
    if t_d.size != t_dp.size or t_d.size < 4:
        raise ValueError("t_d and t_dp must have the same size >= 4")
    if not (np.all(np.isfinite(t_d)) and np.all(np.isfinite(t_dp))):
        raise ValueError("statistics must be finite")
    alpha = 1.0 - confidence
    h = t_d.size // 2
    a_d, b_d, a_dp, b_dp = t_d[:h], t_d[h:2 * h], t_dp[:h], t_dp[h:2 * h]
    best = (-1.0, 0.0, 1, False)
    for s in (1.0, -1.0):
        for swap in (False, True):
            x, y = (s * a_dp, s * a_d) if swap else (s * a_d, s * a_dp)
            taus = np.quantile(y, 1.0 - np.geomspace(0.5, 1.0 / h, num_thresholds))
            fp, fn = _counts(x, y, taus)
            lb = eps_lower_bound(fp, fn, h, delta, alpha)
            lb = np.where((fp >= min_events) & (h - fn >= min_events), lb, -1.0)
            i = int(np.argmax(lb))
            if lb[i] > best[0]:
                best = (float(lb[i]), float(taus[i]), int(s), swap)
    _, tau, s, swap = best
    x, y = (s * b_dp, s * b_d) if swap else (s * b_d, s * b_dp)
    fp, fn = _counts(x, y, np.array([tau]))
    lb = float(eps_lower_bound(fp, fn, h, delta, alpha)[0])
    fpr_u = float(clopper_pearson_upper(fp, h, alpha / 2)[0])
    fnr_u = float(clopper_pearson_upper(fn, h, alpha / 2)[0])
    return lb, tau, (-s if swap else s), fpr_u, fnr_u


# --------------------------------------------------------------------------- chains


def _ula_batch(key, num_chains: int, grad_fn: Callable, x0, h: float, num_steps: int, *,
               project=None, chunk: int = 100_000, extremes: bool = False):
    """Vectorised ULA chains (functional core) returning (final x, sum_{k<K} x_k) per chain,
    plus (max_k x_k, min_k x_k) over the released path x_1..x_K with ``extremes``.

    The scan carries running statistics so no trajectory is kept in memory; chains are
    processed in chunks of ``chunk``.
    """
    x0 = jnp.asarray(x0, jnp.float32)
    transition = ula.keyed_transition(ula.build_kernel(grad_fn, h, project))

    @jax.jit
    def run(keys):
        def one(k):
            st = ula.init(x0, k)
            big = jnp.full_like(x0, jnp.inf)

            def body(carry, _):
                s, acc, hi, lo = carry
                nxt = transition(s)
                return (nxt, acc + s.z, jnp.maximum(hi, nxt.z), jnp.minimum(lo, nxt.z)), None

            (last, acc, hi, lo), _ = lax.scan(body, (st, jnp.zeros_like(x0), -big, big), None,
                                              length=num_steps)
            return last.z, acc, hi, lo

        return jax.vmap(one)(keys)

    keys = random.split(key, num_chains)
    outs = [[], [], [], []]
    for i in range(0, num_chains, chunk):
        for store, arr in zip(outs, run(keys[i:i + chunk])):
            store.append(np.asarray(arr, dtype=np.float64))
    res = tuple(np.concatenate(o) for o in outs)
    return res if extremes else res[:2]


def _ula_final_mu(beta: float, h: float, K: int, shift: float) -> float:
    """GDP mu of ULA's final iterate on beta (x - c)^2/2, c differing by ``shift``, from x_0 = 0.

    The final iterate is Gaussian with mean (1 - c^K) c_D (c = 1 - h beta) and variance
    2h (1 - c^{2K}) / (1 - c^2) for both datasets, so the pair is exactly mu-GDP.
    """
    cc = 1.0 - h * beta
    return (1 - cc ** K) * shift / math.sqrt(2 * h * (1 - cc ** (2 * K)) / (1 - cc * cc))


def _truncnorm_draws(key, n: int, mean: float, sd: float, lo: float, hi: float) -> np.ndarray:
    """Exact draws from N(mean, sd^2) truncated to [lo, hi] (float64 inverse CDF)."""
    u = np.asarray(random.uniform(key, (n,), dtype=jnp.float32), dtype=np.float64)
    a, b = (lo - mean) / sd, (hi - mean) / sd
    return stats.truncnorm.ppf(np.clip(u, 1e-12, 1 - 1e-12), a, b, loc=mean, scale=sd)


def quadratic_audit(route: str = "trajectory", *, eps: float = 3.0, delta: float = 1e-5, n: int = 100,
                    horizon: float = 1.0, num_samples: int = 200_000, confidence: float = 0.95,
                    statistic: str | None = None, seed: int | None = None, eps_prime: float = 0.5,
                    omega: float = 0.05, mixing_times: float = 8.0, psi: float = 0.01) -> AuditResult:
    """Audit one route on the 1-D quadratic family with a canary at +1 (D) / -1 (D').

    ``num_samples`` independent chains (draws) per side. ``statistic``: ``"llr"`` (path LLR
    statistic; trajectory routes only, default there), ``"final"`` (last iterate), or for the
    Rashomon routes ``"range"`` (default) / ``"mean"`` / ``"final"``. ``psi``: Rashomon threshold.
    """
    from . import plan as plan_mod
    from .losses import LossConstants
    from .privacy import last_iterate, path, pure, stationary
    from .privacy.events import gdp_epsilon, linear_rdp_epsilon

    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    consts = LossConstants(lipschitz=2.0, grad_diff=2.0, smoothness=1.0, strong_convexity=1.0)
    sens = consts.grad_diff / n
    c_d, c_dp = 1.0 / n, -1.0 / n          # mean(d) with the canary at +1 / -1, others 0
    k_d, k_dp, k_p = random.split(secret_key(seed)[0], 3)
    params: dict = {"n": n, "sensitivity": sens}
    claimed, claimed_delta, eps_exact = eps, delta, None
    stat = statistic or ("llr" if route.startswith("trajectory") else
                         "range" if route.startswith("rashomon") else "final")
    if stat == "llr" and not route.startswith("trajectory"):
        raise ValueError("the llr statistic is for the trajectory routes (the released path)")
    if stat in ("range", "mean") and not route.startswith("rashomon"):
        raise ValueError(f"the {stat!r} statistic is for the Rashomon routes")

    def chains(beta, h, K, project=None):
        out = []
        for key, c in ((k_d, c_d), (k_dp, c_dp)):
            g = lambda z, c=c: beta * (z - c)  # noqa: E731  grad of beta * (z - mean d)^2 / 2
            fin, acc = _ula_batch(key, num_samples, g, jnp.zeros(()), h, K, project=project)
            out.append(fin - 0.0 + h * beta * acc if stat == "llr" else fin)
        return out

    if route in ("trajectory", "trajectory_unsafe"):
        pl = plan_mod.plan_trajectory(consts, n, 1, eps=eps, delta=delta, horizon=horizon)
        h, K = pl.step_size, pl.num_steps
        beta = pl.beta
        if route == "trajectory_unsafe":
            beta = path.lemma_3_1_beta_unsafe(eps, delta, sensitivity=sens, time=horizon)
            h = horizon / K  # same grid; beta M h stays < 2 (checked below)
        if beta * h >= 2:
            raise ValueError("unstable step for the audit")
        mu = path.path_mu(beta, sens, K * h)
        eps_exact = gdp_epsilon(mu, delta)
        params.update(beta=beta, step_size=h, num_steps=K, mu=mu)
        t_d, t_dp = chains(beta, h, K)
    elif route == "last_iterate":
        beta = last_iterate.last_iterate_beta_max(eps, delta, sensitivity=sens, strong_convexity=1.0)
        h = 0.5 / beta
        K = int(math.ceil(mixing_times / (h * beta)))
        rho = last_iterate.last_iterate_rho(beta, sens, h, K, 1.0, 1.0)
        claimed = linear_rdp_epsilon(rho, delta)[0]   # the accountant's eps for the run (<= eps)
        eps_exact = gdp_epsilon(_ula_final_mu(beta, h, K, sens), delta)
        params.update(beta=beta, step_size=h, num_steps=K, rho=rho, target_eps=eps)
        t_d, t_dp = chains(beta, h, K)
    elif route == "stationary":
        beta = stationary.stationary_beta_max(eps, delta, sensitivity=sens, strong_convexity=1.0)
        h = 0.5 / beta
        K = int(math.ceil(mixing_times / (h * beta)))
        eps_exact = gdp_epsilon(_ula_final_mu(beta, h, K, sens), delta)
        params.update(beta=beta, step_size=h, num_steps=K)
        t_d, t_dp = chains(beta, h, K)
    elif route == "pure":
        beta = pure.pure_beta(eps, n, lipschitz=consts.lipschitz, diameter=2.0)
        claimed_delta = 0.0
        sd = 1.0 / math.sqrt(beta)
        t_d = _truncnorm_draws(k_d, num_samples, c_d, sd, -1.0, 1.0)
        t_dp = _truncnorm_draws(k_dp, num_samples, c_dp, sd, -1.0, 1.0)
        from .privacy.exact import max_log_ratio

        grid = np.linspace(-1.0, 1.0, 200_001)
        eps_exact = max_log_ratio(grid, -beta * (grid - c_d) ** 2 / 2, -beta * (grid - c_dp) ** 2 / 2)
        params.update(beta=beta)
    elif route.startswith("rashomon"):
        from .rashomon import plan_rashomon

        rp = plan_rashomon(consts, n, 1, psi, mode="path", eps=eps, delta=delta, horizon=horizon)
        beta, h, K = rp.beta, rp.step_size, rp.num_steps
        if route == "rashomon_path_unsafe":  # the beta a G/n-only analysis would give, same grid
            beta = path.beta_max(eps, delta=delta, sensitivity=sens, time=K * h)
            if beta * h >= 2:
                raise ValueError("unstable step for the audit")
        params.update(beta=beta, step_size=h, num_steps=K, psi=psi, thresholded_sensitivity=rp.sensitivity)
        out = []
        for key, c in ((k_d, c_d), (k_dp, c_dp)):
            # gradient of beta max{(z - c)^2/2 + k, k + psi}: exact L* = k, flat on |z - c| <= sqrt(2 psi)
            g = lambda z, c=c: beta * jnp.where((z - c) ** 2 > 2 * psi, z - c, 0.0)  # noqa: E731
            fin, acc, hi, lo = _ula_batch(key, num_samples, g, jnp.zeros(()), h, K, extremes=True)
            out.append({"final": fin, "mean": acc / K, "range": 0.5 * (hi + lo)}[stat])
        t_d, t_dp = out
    else:  # purified
        from .domains import L2Ball
        from .privacy import purification

        dom = L2Ball(dim=1, radius=1.0)
        pl = plan_mod.plan_trajectory(consts, n, 1, eps=eps, delta=delta, horizon=horizon)
        pp = purification.purification_parameters(dom, eps_prime, omega, delta=delta)
        claimed = eps + eps_prime
        claimed_delta = 0.0
        proj = lambda x: jnp.clip(x, -1.0, 1.0)  # noqa: E731  projection onto C = [-1, 1]
        fin_d, fin_dp = chains(pl.beta, pl.step_size, pl.num_steps, project=proj)
        kp1, kp2 = random.split(k_p)
        t_d = purification.purify(kp1, fin_d[:, None], pp, dom)[:, 0]
        t_dp = purification.purify(kp2, fin_dp[:, None], pp, dom)[:, 0]
        params.update(beta=pl.beta, step_size=pl.step_size, num_steps=pl.num_steps, eps_upstream=eps,
                      eps_prime=eps_prime, omega=omega, laplace_scale=pp.laplace_scale)
    lb, tau, s, fpr_u, fnr_u = audit_statistics(t_d, t_dp, delta=claimed_delta, confidence=confidence)
    return AuditResult("quadratic", route, stat, float(claimed), float(claimed_delta), lb, confidence,
                       num_samples, tau, s, fpr_u, fnr_u, eps_exact, params)


def logistic_audit(*, eps: float = 2.0, delta: float = 1e-5, n: int = 50, dim: int = 3, horizon: float = 1.0,
                   num_samples: int = 20_000, confidence: float = 0.95, seed: int | None = None,
                   unsafe: bool = False) -> AuditResult:
    """Trajectory route on logistic regression with a label-flipped canary row (see module doc)."""
    from . import plan as plan_mod
    from .losses import logistic
    from .privacy import path

    loss = logistic(row_norm=1.0)
    kx, ky, k_d, k_dp = random.split(secret_key(seed)[0], 4)
    X = np.asarray(random.normal(kx, (n, dim)), dtype=np.float64)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = np.asarray(random.bernoulli(ky, 0.5, (n,)), dtype=np.float64)
    xc = np.zeros(dim)
    xc[0] = 1.0
    X[0] = xc
    pl = plan_mod.plan_trajectory(loss.constants, n, dim, eps=eps, delta=delta, horizon=horizon)
    beta = pl.beta
    if unsafe:
        beta = path.lemma_3_1_beta_unsafe(eps, delta, sensitivity=loss.constants.grad_diff / n, time=horizon)
    Xj = jnp.asarray(X, jnp.float32)
    out = []
    for key, yc in ((k_d, 1.0), (k_dp, 0.0)):
        yy = jnp.asarray(np.concatenate([[yc], y[1:]]), jnp.float32)

        def grad_fn(th, yy=yy):
            z = Xj @ th
            return beta * (Xj.T @ (jax.nn.sigmoid(z) - yy)) / n

        fin, _ = _ula_batch(key, num_samples, grad_fn, jnp.zeros(dim), pl.step_size, pl.num_steps, chunk=20_000)
        out.append(fin @ xc)
    lb, tau, s, fpr_u, fnr_u = audit_statistics(out[0], out[1], delta=delta, confidence=confidence)
    return AuditResult("logistic", "trajectory_unsafe" if unsafe else "trajectory", "final_projection",
                       float(eps), float(delta), lb, confidence, num_samples, tau, s, fpr_u, fnr_u, None,
                       {"n": n, "dim": dim, "beta": beta, "step_size": pl.step_size, "num_steps": pl.num_steps})


def minibatch_audit(*, q: float = 0.5, eps: float = 2.0, delta: float = 1e-5, n: int = 10, clip_norm: float = 1.0,
                    step_size: float = 0.01, num_steps: int = 1, neighboring: str = "replace_one",
                    normaliser: int | str | None = None, background: float = 0.0, num_samples: int = 100_000,
                    confidence: float = 0.95, seed: int | None = None, beta: float | None = None) -> AuditResult:
    """Audit Poisson-subsampled SGLD (the real kernel) on a worst-case neighbouring pair (module doc).

    ``beta`` skips the calibration for ``eps``: the claim is then the event's eps at that beta.

    ``normaliser``: the kernel's public n (default ``n``, the row count of D); under add/remove the
    accountant is charged with ``n = normaliser`` (``"rows"``: kernel divides by each dataset's own
    row count while the claim uses n, the uncovered setting).
    """
    from .kernels import sgld
    from .privacy import minibatch

    if neighboring not in minibatch.NEIGHBORING:
        raise ValueError(f"neighboring must be one of {minibatch.NEIGHBORING}, got {neighboring!r}")
    if not -1.0 <= background <= 1.0:
        raise ValueError(f"background must lie in [-1, 1], got {background!r}")
    rows_mode = normaliser == "rows"
    if rows_mode and neighboring != "add_remove":
        raise ValueError("normaliser='rows' is the add/remove gap; use it with neighboring='add_remove'")
    n_pub = n if (normaliser is None or rows_mode) else int(normaliser)
    if beta is None:
        beta = minibatch.minibatch_beta_max(eps, delta, step_size, num_steps, q, clip_norm, n_pub,
                                            neighboring=neighboring, rtol=1e-3)
    claimed = minibatch.minibatch_epsilon(beta, step_size, num_steps, q, clip_norm, n_pub, delta,
                                          neighboring=neighboring, pld_check=False)["epsilon"]
    key, source = secret_key(seed)
    k_d, k_dp = random.split(key)
    xs_d = np.full(n, background * clip_norm)
    xs_d[0] = clip_norm
    xs_dp = xs_d.copy()
    if neighboring == "replace_one":
        xs_dp[0] = -clip_norm
    else:
        xs_dp = xs_d[1:]

    def example(th, x, y):
        return -x[0] * th[0]

    out = []
    for k, xs in ((k_d, xs_d), (k_dp, xs_dp)):
        X = jnp.asarray(xs[:, None], jnp.float32)
        y = jnp.zeros(xs.shape[0], jnp.float32)
        norm = None if rows_mode else n_pub

        def final(kk, X=X, y=y, norm=norm):
            return sgld.sample_chain(kk, example, X, y, beta, step_size, num_steps, q, clip_norm, jnp.zeros(1),
                                     normaliser=norm).last_state.z[0]

        run = jax.jit(jax.vmap(final))
        keys = random.split(k, num_samples)
        out.append(np.concatenate([np.asarray(run(keys[i:i + 50_000]), np.float64)
                                   for i in range(0, num_samples, 50_000)]))
    lb, tau, s, fpr_u, fnr_u = audit_statistics(out[0], out[1], delta=delta, confidence=confidence)
    params = {"n": n, "q": q, "beta": beta, "step_size": step_size, "num_steps": num_steps, "clip_norm": clip_norm,
              "neighboring": neighboring, "normaliser": "rows" if rows_mode else n_pub, "background": background,
              "target_eps": eps, "key_source": source.describe()}
    return AuditResult("linear", f"minibatch_{neighboring}", "final", float(claimed), float(delta), lb, confidence,
                       num_samples, tau, s, fpr_u, fnr_u, None, params)
