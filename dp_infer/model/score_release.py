"""The interval release of a NumPyro model's posterior-mode run: scoring steps from the draws' mean.

``fit(model=..., target="posterior")`` reserves a share ``interval_share`` of the run's GDP
``mu^2`` for this release (its event is composed into the plan's, so the ledger charge covers it
before any row is read). After sampling, in the prior-whitened unconstrained coordinates
``phi = theta / s`` the chains ran in (``s``: the plan's prior scales), it releases
(:data:`SCHEDULE`):

* at the draws' mean, the mean clipped per-example score
  ``g = (1/n) sum_i clip_C(grad_phi nll_i(phi))`` (the gradient of the mean negative
  log-likelihood; replace-one L2 sensitivity ``2 C / n``) and the clipped scores' second moment
  ``J = (1/n) sum_i g_i g_i^T`` (upper-triangle sensitivity ``sqrt(2) C^2 / n``,
  :func:`~dp_infer.releases.second_moment.private_second_moment_of_gram`, projected onto the PSD
  cone); then a scoring step ``phi - J^-1 g`` (the BHHH / Fisher-scoring step: ``J`` stands in for
  the Hessian) held within :data:`TRUST_RADIUS` of the draws' sds;
* at the new point, the mean clipped score again (the largest share: its noise is what privacy
  adds to the intervals' width).

The interval (:func:`dp_infer.diagnostics.model_prior.model_released_interval`): one more
scoring step ``phi_c = phi_p - J^-1 g`` with variance
``J^-1 (J / n + sd_g^2 I + s_J^2 (|v|^2 I + v v^T)) J^-1`` (``v = J^-1 g``: the sampling error,
the gradient's noise and ``J``'s noise through the last step), combined with a
Gaussian stand-in of the model's prior (per-coordinate median and robust 16-84% scale of prior
draws taken with a fixed public key), through
:func:`dp_infer.diagnostics.released_interval.released_interval`. ``J`` is taken once, at the
draws' mean, and serves both steps (its noise grows like ``C^2``; split over stages it left
directions within the noise); the fixed point does not depend on it.

**Why ``J`` and not the Hessian.** A model's per-example Hessian has no declared bound (the
sensitivity of its release could not be stated), while every clipped score has norm ``<= C`` by
construction. For a correctly specified model the information identity ``E[g g^T] = E[-Hessian of
log p]`` holds at the true parameter, so ``J`` estimates the curvature and ``J^-1 / n`` the
sampling variance. The fixed point of the scoring steps is the zero of the mean clipped score
whatever ``J`` is (``J`` sets the path, not the end); the variance needs the identity.

**The estimand, honestly.** The zero of the population's mean CLIPPED score in the unconstrained
coordinates. Where the clip rarely binds at the estimate this is the model's maximum-likelihood
target: the true parameter of a correctly specified model (and ``J`` its Fisher information).
Where the clip binds often, the clipped estimating equation is biased (the clip factor can depend
on the label) and ``J`` underestimates the information: choose ``clip_norm`` large enough that the
scores at the estimate rarely exceed it (the variance then grows only like ``C / n`` per unit of
mu). Under misspecification ``J != H`` and the reported variance is the model-based one, not the
sandwich. The intervals are for the UNCONSTRAINED coordinates (``log tau`` for a positive scale,
``logit`` for a probability, ...): per-coordinate intervals map through a monotone elementwise
transform by mapping their ends, but no such map is applied here.

Assumptions: replace-one neighbours with ``n`` public; the points and the trust region are public
(functions of the released draws and of this release's earlier stages: adaptive composition); the
noise is :func:`dp_infer.randomness.gaussian_noise` in float64, as the package's other releases
(threat model); large n (the mean nll close to quadratic over the last step).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_finite_array, check_positive, check_positive_int
from ..privacy.events import GdpEvent
from ..randomness import gaussian_noise
from ..routes.newton_release import INTERVAL_CURVATURES, PUBLIC_INTERVAL_SHARE, PUBLIC_SCHEDULE, noise_floor
from ..routes.preconditioning import GRAM_SENSITIVITY_FACTOR

__all__ = ["SCHEDULE", "PUBLIC_SCHEDULE", "INTERVAL_CURVATURES", "schedule", "PUBLIC_INTERVAL_SHARE",
           "PUBLIC_TRUST_RADIUS", "DEFAULT_INTERVAL_SHARE", "MIN_SCORE_SNR", "TRUST_RADIUS", "RELEASE_KIND",
           "score_snr", "default_interval_share", "check_interval_share", "solve_floored", "noise_aware_step",
           "score_release_event", "clipped_scores", "score_function", "symmetric_score_function", "KINK_OFFSET",
           "release_score_statistics",
           "unconstrained_names", "prior_gaussian", "MODEL_ESTIMAND", "MODEL_INTERVAL_ASSUMPTIONS",
           "MODEL_PUBLIC_J_ASSUMPTIONS", "check_release_point"]

#: the release's kind, stored in the release dict (run_intervals dispatches on it)
RELEASE_KIND = "model_score"

#: stages of the release: the statistics taken at each point with their shares of its mu^2. ``J`` is
#: released once, at the draws' mean, and serves every stage (its noise scales like C^2 / n, so split
#: over stages it was within the noise in some direction at n = 5000, d = 3, eps = 1, C = 6: a J of
#: share 0.06 + 0.20 left one of three directions to the prior); the last gradient gets the next
#: largest share: its noise is the part of the intervals' width that privacy adds
SCHEDULE = ((("score", 0.45), ("gradient", 0.15)),
            (("gradient", 0.40),))

# With ``interval_curvature="public"`` (its sources: ``INTERVAL_CURVATURES``) ``J`` comes from public feature
# rows with labels drawn from the model (:mod:`dp_infer.model.public_information`; free), taken again at every
# point, so each stage releases its mean clipped score only: the loss route's ``PUBLIC_SCHEDULE`` (the last gets
# most of the share, its noise being the intervals' privacy part; the earlier ones walk the point from the
# draws' mean to the estimate) and its default share ``PUBLIC_INTERVAL_SHARE`` (no ``J`` to release, so no
# signal-to-noise rule), one definition for both routes (:mod:`dp_infer.routes.newton_release`).

#: the default share of the run's mu^2 for the release where it is informative (:func:`default_interval_share`)
DEFAULT_INTERVAL_SHARE = 0.7

#: below this forecast signal to noise of ``J`` (:func:`score_snr`) no release is reserved by default.
#: Lower than the loss route's 4 (a calibrated typical eigenvalue there, a clip-based guess here), and
#: coordinates whose direction is within the noise are flagged one by one anyway. Measured: logistic
#: n = 5000, d = 3, clip 4 (prior sd 2), eps = 1: forecast 4.5; J's eigenvalues 0.46, 0.71, 0.77 against
#: a noise floor of 0.147 (3.1 to 5.2)
MIN_SCORE_SNR = 2.0

#: a scoring step before the last is shortened to this Mahalanobis radius in the draws' covariance
TRUST_RADIUS = 1.0

#: the same with a public ``J`` (exact: only the gradient's noise, not ``J``'s, can throw a step)
PUBLIC_TRUST_RADIUS = 3.0

MODEL_ESTIMAND = ("the zero of the population's mean clipped score in the model's unconstrained coordinates: the "
                  "true parameter of a correctly specified model where the clip rarely binds at it")

#: what intervals from a public-J release (``interval_curvature="public"``) assume besides
#: :data:`MODEL_INTERVAL_ASSUMPTIONS`
MODEL_PUBLIC_J_ASSUMPTIONS = (
    "J is computed from feature rows declared public (X_public, with their per-row model arguments), assumed drawn "
    "from the private rows' distribution, with labels drawn from the model at each point (a fixed public key): the "
    "model's expected information, not the rows' own second moment",
)

MODEL_INTERVAL_ASSUMPTIONS = (
    "the model is correctly specified: the scores' second moment J stands in for the Hessian (information identity), "
    "so the variance J^-1 (J / n + noise) J^-1 is the model-based one, not a sandwich",
    "the per-example scores rarely exceed clip_norm at the estimate (else the clipped estimating equation is biased "
    "and J underestimates the information)",
    "large n: the mean negative log-likelihood is close to quadratic over the last scoring step",
    "the prior enters as a Gaussian stand-in (per-coordinate median and robust scale of prior draws, fixed public "
    "key): exact for independent Gaussian priors, an approximation for hierarchical or heavy-tailed ones",
    "intervals are for the unconstrained coordinates (log of a positive scale, ...), not the constrained sites",
    "the release's noise is the Gaussian the accountant assumes (dp_infer.randomness.gaussian_noise in float64; "
    "the threat model)",
)


def schedule(curvature: str = "private") -> tuple:
    """The release's stages for ``curvature`` (:data:`SCHEDULE` or :data:`PUBLIC_SCHEDULE`)."""
    if curvature not in INTERVAL_CURVATURES:
        raise ValueError(f"interval_curvature must be one of {INTERVAL_CURVATURES}, got {curvature!r}")
    return PUBLIC_SCHEDULE if curvature == "public" else SCHEDULE


def _parts(mu: float, curvature: str) -> list:
    """``(statistic, mu_part, stage)`` for each statistic of :func:`schedule`'s stages: ``sqrt(share) mu``."""
    return [(kind, math.sqrt(share) * mu, stage) for stage, parts in enumerate(schedule(curvature))
            for kind, share in parts]


def check_interval_share(interval_share, precond_share: float | None = None) -> float:
    """``interval_share`` as a float in [0, 1) (and, with a Fisher preconditioner's ``precond_share``,
    their sum below 1), or a one-line ``ValueError`` naming it and the allowed range."""
    ok = not isinstance(interval_share, bool) and isinstance(interval_share, (int, float, np.floating, np.integer))
    if not ok or not (0.0 <= float(interval_share) < 1.0):
        raise ValueError(f"interval_share must be a number in [0, 1) (the share of the run's GDP mu^2 for the interval "
                         f"release; 0: none), got {interval_share!r}")
    if precond_share is not None and float(interval_share) + float(precond_share) >= 1.0:
        raise ValueError(f"interval_share must lie in [0, 1 - precond_share) = [0, {1.0 - precond_share:g}) with "
                         f"preconditioner='fisher' (precond_share = {precond_share:g}), got {interval_share!r}")
    return float(interval_share)


def score_snr(n: int, d: int, mu: float, share: float | None = None) -> float:
    """``J``'s forecast signal to noise, from public inputs: a typical eigenvalue ``C^2 / (8 d)``
    (the scores' mean square an eighth of the clip's square: a clip about 3x the typical score, so
    that it rarely binds) over its noise's spectral size ``2 sqrt(d) sqrt(2) C^2 / (n mu_J)``:
    ``n mu_J / (16 sqrt(2) d^1.5)``, ``mu_J`` the release's ``J`` share of ``share`` of ``mu^2``."""
    share = DEFAULT_INTERVAL_SHARE if share is None else share
    mu_j = math.sqrt(share * sum(v for st in SCHEDULE for k, v in st if k == "score")) * mu
    return n * mu_j / (8.0 * GRAM_SENSITIVITY_FACTOR * 2.0 * d ** 1.5)


def default_interval_share(n: int, d: int, mu: float, curvature: str = "private") -> tuple[float, str | None]:
    """``(share, reason)``: :data:`DEFAULT_INTERVAL_SHARE` where the forecast signal to noise of the
    released ``J`` (:func:`score_snr`) is at least :data:`MIN_SCORE_SNR`, else 0 and the reason in one
    line; with ``curvature="public"`` (``J`` from public rows, not released) :data:`PUBLIC_INTERVAL_SHARE`.
    Public inputs only."""
    if schedule(curvature) is PUBLIC_SCHEDULE:
        return PUBLIC_INTERVAL_SHARE, None
    snr = score_snr(n, d, mu)
    if snr < MIN_SCORE_SNR:
        return 0.0, (f"at n = {n}, d = {d} and this eps the released scores' second moment would be mostly noise "
                     f"(forecast signal to noise {snr:.2f} < {MIN_SCORE_SNR:g}; it grows like n mu / d^1.5), so the "
                     f"run reserves no budget for intervals; about {MIN_SCORE_SNR / snr:.1f}x the rows or the GDP mu "
                     "would do (or pass interval_share= explicitly, or X_public= with interval_curvature='public')")
    return DEFAULT_INTERVAL_SHARE, None


def score_release_event(mu: float, *, n: int, clip_norm: float, curvature: str = "private",
                        weighted: bool = False) -> GdpEvent:
    """The release's event, planned before any data is read (its noise scales follow from ``n``,
    ``clip_norm`` and ``mu``). ``curvature="public"``: mean clipped scores only (:data:`PUBLIC_SCHEDULE`;
    ``J`` comes from public rows, free). ``weighted`` (public only): the scores are weighted by label-free
    weights in the metric that whitens the public information (:mod:`dp_infer.model.weighted_release`),
    each weighted score of norm ``<= rho``, a radius the release picks from public inputs: sensitivity
    ``2 rho / n`` (the noise scales with it; GDP ``mu`` is what the plan fixes)."""
    mu = check_positive("mu", mu)
    n = check_positive_int("n", n)
    C = check_positive("clip_norm", clip_norm)
    public = curvature == "public"
    if weighted and not public:
        raise ValueError("weighted: the weighted score release needs interval_curvature='public'")
    parts = [{"statistic": k, "mu": v, "stage": st,
              "sensitivity": ("2 rho / n" if weighted else
                              2.0 * C / n if k == "gradient" else GRAM_SENSITIVITY_FACTOR * C * C / n)}
             for k, v, st in _parts(mu, curvature)]
    what = ("mean weighted scores near the estimate (label-free weights in the metric that whitens the public "
            "information), their curvature and second moment from public feature rows" if weighted else
            "mean clipped scores near the estimate, their second moment from public feature rows" if public else
            "mean clipped scores and their second moment near the estimate")
    sensitivity = ("every per-example score, in the metric M that whitens the public rows' information, weighted by "
                   "min(1, rho / max over the observation's support of ||M^T g||) (features and public quantities "
                   "only) and clipped to rho: the mean score has L2 sensitivity 2 rho / n, rho chosen from public "
                   "inputs at release time" if weighted else
                   "every per-example score (w.r.t. the prior-whitened latents) clipped to norm "
                   f"{C:g}: the mean score has L2 sensitivity 2 C / n"
                   + ("" if public else ", the scores' second moment (upper triangle) sensitivity sqrt(2) C^2 / n"))
    return GdpEvent(mu=mu, label=f"model_score_release ({what}, for the intervals)",
                    assumptions=(f"replace-one neighbours, n = {n} public; {sensitivity}",
                                 "the points are post-processing of released draws and of this release's earlier "
                                 "stages") + (("the scores' second moment is computed from feature rows declared "
                                               "public with labels drawn from the model at those points: no private "
                                               "row enters it",) if public else ()),
                    metadata={"parts": parts, "n": n, "clip_norm": C, "curvature": curvature,
                              **({"weighted": True} if weighted else {})})


def score_function(example_fn):
    """The jitted per-example gradient ``(phi, X, y) -> (n, d)`` of ``example_fn(phi, x, y)``.

    Build it once per release and pass it to :func:`clipped_scores` for every point. There is no global
    cache: a cache keyed on ``example_fn`` whose value (this jitted function) holds ``example_fn`` never
    lets go of either, and each fit's compiled programs stayed in memory until the process hit the
    kernel's memory-map limit (``LLVM compilation error: Cannot allocate memory`` after about 60 fits)."""
    return jax.jit(jax.vmap(jax.grad(example_fn), in_axes=(None, 0, 0)))


#: :func:`symmetric_score_function` takes the mean of the gradients at ``phi +- KINK_OFFSET u`` (``u`` a fixed
#: public unit direction, whitened units). At a point where a row's linear predictor is exactly 0 (the
#: unconstrained origin of a zero-mean prior, where the Fisher preconditioner is taken; a user's guess of 0 for an
#: effect) NumPyro's ``Bernoulli(logits=...)`` has a kink in its automatic derivative (``jax.grad`` gives -1 for
#: y = 1 instead of -1/2); the symmetric mean reads the derivative's value there (exact for the logistic model:
#: ``sigma(e) + sigma(-e) = 1``) and differs from the gradient by O(KINK_OFFSET^2) relative elsewhere
KINK_OFFSET = 1e-3


def symmetric_score_function(example_fn, dim: int):
    """``(phi, X, y) -> (m, d)``: :func:`score_function`'s per-example gradients averaged at
    ``phi +- KINK_OFFSET u`` (:data:`KINK_OFFSET`), with ``u`` a fixed public unit direction (``numpy`` seed 0):
    a random direction, so no row of a generic design (one-hot levels, contrasts, an intercept) is orthogonal to
    it and sits on the kink at either point, as rows summing to 0 did along the all-ones diagonal."""
    grad = score_function(example_fn)
    u = np.random.default_rng(0).normal(size=check_positive_int("dim", dim))
    h = jnp.asarray(KINK_OFFSET * u / np.linalg.norm(u), dtype=jnp.result_type(float))

    def scores(phi, X, y):
        return 0.5 * (grad(phi + h, X, y) + grad(phi - h, X, y))

    return scores


def clipped_scores(example_fn, X, y, point, *, clip_norm: float, block_rows: int = 8192,
                   scores=None) -> np.ndarray:
    """Per-example gradients of ``example_fn(phi, x, y)`` at ``point``, each clipped to ``clip_norm``
    in float64 a hair inside the radius (a non-finite gradient is 0), shape ``(n, d)``. ``scores``:
    ``score_function(example_fn)`` when the caller already built it (one compilation per release)."""
    C = check_positive("clip_norm", clip_norm)
    X, y = jnp.asarray(X), jnp.asarray(y)
    p = jnp.asarray(point, dtype=jnp.result_type(float))
    grad = score_function(example_fn) if scores is None else scores
    out = []
    for lo in range(0, int(X.shape[0]), block_rows):
        g = np.asarray(grad(p, X[lo:lo + block_rows], y[lo:lo + block_rows]), dtype=np.float64)
        g = np.where(np.all(np.isfinite(g), axis=1, keepdims=True), g, 0.0)
        norm = np.linalg.norm(g, axis=1, keepdims=True)
        out.append(g * np.minimum(1.0, C * (1.0 - 1e-12) / np.maximum(norm, 1e-300)))
    return np.concatenate(out, axis=0)


def solve_floored(J: np.ndarray, g: np.ndarray, floor: float) -> np.ndarray:
    """``J^-1 g`` with J's eigenvalues floored at ``floor`` (and 1e-6 of its largest)."""
    w, U = np.linalg.eigh(0.5 * (J + J.T))
    w = np.maximum(w, max(floor, 1e-6 * max(float(w[-1]), 1e-300)))
    return U @ ((U.T @ g) / w)


def noise_aware_step(J: np.ndarray, g: np.ndarray, sd_g: float, phi: np.ndarray, prior_mean: np.ndarray,
                     prior_precision: np.ndarray) -> np.ndarray:
    """The step from ``phi`` to the mean of the Gaussian posterior given one noisy mean score ``g`` (noise sd
    ``sd_g`` per coordinate) with an exact ``J``, under the prior ``N(prior_mean, diag(1 / prior_precision))``
    (all in the whitened coordinates; a 2-D ``prior_precision`` is the prior's precision matrix). In J's eigen-
    direction ``u`` (eigenvalue ``w``) the score says the estimate lies ``u^T g / w`` away, with precision ``w^2 /
    sd_g^2``; the prior adds its own. Where ``w`` is large against ``sd_g`` this is the scoring step ``J^-1 g``;
    where the noise swamps ``w`` the step goes to the prior instead of ``sd_g / w`` (thousands of prior sds for a
    rare one-hot level on Adult). Used for the path of a public-J release; the last point's interval reads the
    release as before.
    """
    w, U = np.linalg.eigh(0.5 * (J + J.T))
    w = np.maximum(w, 0.0)
    omega = w ** 2 / max(sd_g, 1e-300) ** 2
    ratio = np.divide(w, sd_g ** 2, out=np.zeros_like(w), where=w > 0)  # omega / w
    lam = np.asarray(prior_precision, dtype=np.float64)
    lam = lam if lam.ndim == 2 else np.diag(np.broadcast_to(lam, phi.shape))
    Q = (U * omega) @ U.T + lam
    rhs = U @ (ratio * (U.T @ g)) + lam @ (phi - np.asarray(prior_mean, dtype=np.float64))
    return np.linalg.solve(0.5 * (Q + Q.T), rhs)


def prior_gaussian(ml, num_draws: int = 4000, *, draws=None) -> tuple[np.ndarray, np.ndarray]:
    """``(median, robust sd)`` per unconstrained coordinate of the model's prior (draws on placeholder
    rows with the fixed public key ``PRNGKey(0)``; the sd is half the 16-84% range, 1 where degenerate).
    ``draws``: those prior draws when the caller already has them (``initial.prior_draws``)."""
    from .initial import prior_draws

    if draws is None:
        draws = prior_draws(ml, jax.random.PRNGKey(0), num_draws)
    lo, med, hi = np.quantile(draws, [0.15865525393145707, 0.5, 0.8413447460685429], axis=0)
    sd = 0.5 * (hi - lo)
    return np.where(np.isfinite(med), med, 0.0), np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)


def unconstrained_names(ml, coords: dict | None = None, dims: dict | None = None) -> list[str]:
    """A name per unconstrained coordinate (the flat vector's order): ``site`` for a scalar site,
    ``site[i]`` / ``site[i,j]`` for an array one, with the support's transform noted (e.g.
    ``tau (log)`` for a positive site). With ArviZ ``coords`` / ``dims`` (a run's), an axis whose dim
    has labels of its length is named by them (``w[age]``). Public: the model's layout only."""
    coords, dims = coords or {}, dims or {}
    idx = ml.unravel(jnp.arange(ml.dim, dtype=jnp.result_type(float)))
    names = [""] * ml.dim
    for site, v in idx.items():
        v = np.asarray(v)
        support = str(ml.supports.get(site, ""))
        tag = "" if "Real" in support and "Positive" not in support else (
            " (log)" if "Positive" in support or "GreaterThan" in support else " (unconstrained)")
        if v.ndim == 0:
            names[int(v)] = site + tag
        else:
            axes = list(dims.get(site) or []) + [None] * v.ndim
            labels = [list(coords[a]) if a in coords and len(coords[a]) == size else None
                      for a, size in zip(axes, v.shape)]
            for ix in np.ndindex(v.shape):
                parts = (str(i) if lab is None else str(lab[i]) for i, lab in zip(ix, labels))
                names[int(v[ix])] = f"{site}[{','.join(parts)}]{tag}"
    return names


def check_release_point(point, scales, trust_covariance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(point, scales, trust_covariance)`` as finite float arrays of shapes ``(d,)``, ``(d,)``, ``(d, d)``, or a
    one-line ``ValueError`` naming the one that is not (a release's public inputs)."""
    phi = check_finite_array("point", point, ndim=1)
    d = phi.shape[0]
    s = check_finite_array("scales", scales, ndim=1)
    S = check_finite_array("trust_covariance", trust_covariance, ndim=2)
    if s.shape != (d,) or S.shape != (d, d):
        raise ValueError(f"scales must have {d} entries and trust_covariance be {d} x {d}")
    return phi, s, S


def release_score_statistics(example_fn, X, y, *, point, scales, clip_norm: float, mu: float, key,
                             trust_covariance, prior_mean, prior_sd, names=None, public_second_moment=None) -> dict:
    """Release the module doc's statistics at GDP ``mu``; returns the release as a dict (public).

    ``example_fn(phi, x, y)``: the per-example nll in the whitened coordinates; ``X``, ``y``: the run's
    checked rows; ``point``: the draws' mean in phi (public); ``scales``: ``s`` (theta = s phi);
    ``trust_covariance``: the draws' covariance in phi (public); ``prior_mean`` / ``prior_sd``: the
    prior's Gaussian stand-in in theta (public); ``key``: a JAX key (secret unless seeded).
    ``public_second_moment``: a :class:`~dp_infer.model.public_information.PublicSecondMoment` (``J`` at
    any point from public feature rows, free): the release is then :data:`PUBLIC_SCHEDULE`'s mean scores
    only, ``J`` taken again at each point, the steps held within :data:`PUBLIC_TRUST_RADIUS`, and the
    release's ``J`` is the one at its last point (exact: ``score_sd`` 0, ``curvature_source`` "public")."""
    from ..releases.second_moment import private_second_moment_of_gram

    C = check_positive("clip_norm", clip_norm)
    n = int(np.asarray(X).shape[0])
    phi, s, S = check_release_point(point, scales, trust_covariance)
    d = phi.shape[0]
    public = public_second_moment is not None
    parts = score_release_event(mu, n=n, clip_norm=C, curvature="public" if public else "private").metadata["parts"]
    keys = jax.random.split(key, len(parts))
    Si = np.linalg.inv(0.5 * (S + S.T))
    path, out = [phi], {}
    grads, scores = None, score_function(example_fn)
    for k, (part, kk) in enumerate(zip(parts, keys)):
        if grads is None:
            # private: only their noisy means leave
            grads = clipped_scores(example_fn, X, y, phi, clip_norm=C, scores=scores)
            if public:  # J at this point from the public rows (exact up to a relative floor)
                out.update(score=public_second_moment(phi), score_sd=0.0)
        if part["statistic"] == "score":
            rel = private_second_moment_of_gram(grads.T @ grads, n, max_sq_norm=C * C, mu=part["mu"], key=kk)
            out.update(score=rel.matrix, score_sd=float(rel.event.metadata["noise_sd"]))
        else:
            sd = 2.0 * C / (n * part["mu"])
            with jax.enable_x64(True):  # privacy noise: 53-bit quantiles, tail to 11.4 sds (dp_infer.randomness)
                z = np.asarray(gaussian_noise(kk, (d,), jnp.float64), dtype=np.float64)
            g = grads.mean(axis=0) + z * sd
            out.update(gradient=g, gradient_sd=sd)
            if k < len(parts) - 1:  # the stage's end: a scoring step held inside the draws' bulk
                J = np.asarray(out["score"], dtype=np.float64)
                step = (noise_aware_step(J, g, sd, phi, np.asarray(prior_mean) / s, (s / np.asarray(prior_sd)) ** 2)
                        if public else solve_floored(J, g, noise_floor(d, out["score_sd"])))
                r = float(np.sqrt(step @ Si @ step))
                radius = PUBLIC_TRUST_RADIUS if public else TRUST_RADIUS
                phi = phi - step * (1.0 if r <= radius else radius / r)  # held within the radius
                path.append(phi)
                grads = None

    def tup(a):
        return [float(v) for v in a] if np.ndim(a) == 1 else [[float(v) for v in r] for r in a]

    extra = {} if not public else {
        "curvature_source": "public", "public_rows": int(public_second_moment.rows),
        "public_rows_sha256": public_second_moment.sha256, "label_draws": int(public_second_moment.label_draws),
        "previous_gradient_sd": 2.0 * C / (n * parts[-2]["mu"])}  # PUBLIC_SCHEDULE: 4 stages
    return {"kind": RELEASE_KIND, "path": [tup(s * p) for p in path], "chol": tup(np.diag(s)),
            "gradient": tup(out["gradient"]), "gradient_sd": float(out["gradient_sd"]),
            "curvature": tup(out["score"]), "curvature_sd": float(out["score_sd"]),
            "score": tup(out["score"]), "score_sd": float(out["score_sd"]), "clip_norm": C, "rho": C,
            "mu": float(mu), "n": n, "loss": "model_nll",
            "prior_mean": tup(np.asarray(prior_mean, dtype=np.float64)),
            "prior_sd": tup(np.asarray(prior_sd, dtype=np.float64)), "names": None if names is None else list(names),
            **extra}
