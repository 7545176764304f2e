"""Intervals for the parameter from a posterior-mode run's charged interval release.

The tempered draws' own credible intervals are ``sqrt(n / beta)`` wider than the data's posterior
(16x on Adult at eps = 1) and shrunk toward the prior mean: they said almost nothing about theta.
A posterior run on one device with a generalised linear loss also releases, after sampling and
inside the same charge, the statistics of Newton steps of a weighted data loss taken from the
draws' mean (:mod:`dp_infer.routes.newton_release`). This module turns the last stage's
statistics into intervals, as post-processing (free), in the run's metric ``theta = C psi``:

1. **Centre: one more Newton step** from the last point ``p``: ``psi_c = psi_p - H^-1 g`` with the
   released curvature ``H`` and gradient ``g`` at ``p`` (both of the weighted loss, whose weights
   depend on the rows only), in ``H``'s informative eigen-directions. Eigen-directions whose
   eigenvalue is within its noise's spectral size (``2 sqrt(d)`` sds) carry no information about
   theta: the data say nothing there (the prior decides them, item 3). With public curvature the centre is
   the release's own ``centre``, the public surrogate's minimiser (below), in the same directions.
2. **Variance: the sandwich plus the release's noise**, ``Var(psi_c) = H^-1 (J / n + sd_g^2 I) H^-1``
   with the released scores' second moment ``J`` (PSD, its eigenvalues floored at its noise) and the gradient's
   noise sd ``sd_g``: the data's sampling error and the privacy noise, both accounted.
3. **The prior, combined.** ``psi_c`` with that variance is a Gaussian likelihood for theta;
   with the prior ``N(0, Lambda^-1)`` it gives the reported interval, a noise-aware Laplace
   posterior given the release. Where the data determine a coordinate the interval is the data's;
   where they do not it falls back to the prior's, and the coordinate is flagged ("prior"), one
   by one -- a run is never refused for them. A last step longer than 3 of its sds is flagged too
   ("long step": the point may not have converged), and so is a coordinate resting on a direction without
   information along which the last released gradient is more than 3 of its sds from 0 ("unresolved": the data
   put the estimate elsewhere along it, how far the release cannot say, since its curvature there is noise; on
   the hierarchical benchmark's dataset 6 two such directions carried four of the five coordinates the intervals
   missed, none of them flagged before).

The estimand: the minimiser of the population's weighted loss. The weights ``min(1, rho^2 /
||C^T x||^2)`` (a public-curvature release: ``min(1, rho / (r ||C^T x||))``, its ``weight_power``, with ``r`` the
link's largest derivative over the labels at the release's last point, ``max(s, 1 - s)`` for the logistic loss, or 1)
depend on the rows' features only, so for a correctly specified GLM (logistic, Poisson) it is
the true parameter (a Fisher-consistent weighted likelihood), and for Huber regression the true
coefficients when the errors are symmetric about 0. It is NOT the tempered draws' target (the
chain's clipped link), and not the estimand of a misspecified model's likelihood.

Measured (``python -m benchmarks.intervals``, docs/results.md): coverage of the truth at nominal
0.90 on simulated logistic and Huber designs, and widths against the non-private posterior's.

Assumptions: large n (the weighted loss close to quadratic over the last step; the release's
noise small beside the curvature in the directions it reports); the points, weights and metric
public (they are: released draws and earlier stages).

**Public curvature** (a release made with ``interval_curvature="public"``, its ``curvature_source``
``"public"``): ``H`` and ``J`` were computed from feature rows declared public (exact: no noise floor,
only a relative one of 1e-9 of the largest eigenvalue for directions the public rows do not span), ``J``
the model-based ``mean w^2 phi'' C^T x x^T C``; the variance is ``H^-1 (J / n + sd_g^2 I) H^-1`` as
above. This adds two assumptions, stated in the intervals' ``method``, ``estimand`` and ``assumptions``:
the public rows' features follow the private rows' distribution, and the model is correctly specified
(``E[phi'^2 | x] = phi''``; otherwise the sandwich's ``J`` differs and the intervals' width is off by
it). The long-step flag reads the last step's expected length from the noise of the stage before
(``previous_gradient_sd``): with exact curvature the last point is off the minimiser by that noise. The data
centre is then not a linear step but the release's ``centre``: the public surrogate's minimiser anchored at the
last gradient (:func:`dp_infer.releases.newton.public_surrogate_step`), which follows the link's curvature over
the whole last step, so the offset the earlier stages' noise leaves does not enter the centre through the
loss's nonlinearity (a linear step's error is quadratic in that offset: on Adult at eps = 1 its centres spread
1.3x their stated sd at the median over 20 noise keys, most on the large coefficients). A release without
``centre`` (made before it was added) is read with the linear step. The release's metric ``C`` is then the
public curvature's whitening and its path the public surrogate's minimisers (:mod:`dp_infer.routes.newton_release`);
this module reads both from the release as it does the run's metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from .._validation import check_positive
from ..routes.newton_release import noise_floor

__all__ = ["release_likelihood", "PUBLIC_CURVATURE_ASSUMPTIONS", "ParameterIntervals", "released_interval",
           "format_intervals", "ESTIMANDS", "INTERVAL_ASSUMPTIONS", "PRIOR_DOMINATED_SHARE", "LONG_NEWTON_STEP",
           "UNRESOLVED_SCORE", "UNRESOLVED_LOADING", "FLAG_MEANINGS"]

#: a coordinate whose posterior variance is above this share of the prior's is flagged: the prior decides it
PRIOR_DOMINATED_SHARE = 0.5

#: a Newton step longer than this many of the coordinate's data sds is flagged (one step may not have converged)
LONG_NEWTON_STEP = 3.0

#: a curvature direction within the release's noise (no information: the prior decides it) whose last released
#: gradient lies more than this many of its sds from 0 is "unresolved": the data put the estimate elsewhere along
#: it, and the release cannot say how far (the curvature there is unknown). The sd is the one the gradient along it
#: has where the last step lands on the estimate (:func:`_unresolved`: the gradient's noise, its sampling error with
#: the floored J, the curvature's noise turning the last step), so a converged point passes about 99.7% of the time
#: per direction. Measured (benchmarks.hierarchical_intervals, dataset 6): directions at 9.1 and 4.3 sds carried
#: four of the five coordinates the intervals missed, none flagged before (docs/results.md)
UNRESOLVED_SCORE = 3.0

#: a coordinate rests on an unresolved direction when its loading on it, ``|(C u)_j| / ||C_j||`` (the cosine
#: between the direction and the coordinate's axis in the release's metric ``C``), is at least this
UNRESOLVED_LOADING = 0.3

#: what each flag but "prior" (spelled out in the table's own summary line) means, one line each
FLAG_MEANINGS = {
    "long step": "the last Newton step was over 3 of its sds, so the point may not have converged",
    "unresolved": "the coordinate rests on a direction the release could not resolve while its last gradient "
                  "there is far from 0, so the interval may miss",
    "mixing": "the draws under the model's own prior did not mix, so the interval is not reliable",
}

INTERVAL_ASSUMPTIONS = (
    "large n: the weighted loss is close to quadratic over the last Newton step",
    "the estimand is the weighted loss's population minimiser: the true parameter of a correctly specified GLM "
    "(weights that depend on the rows only), the true coefficients of a Huber regression with symmetric errors",
    "the release's noise is the Gaussian the accountant assumes (float32 draws; the threat model)",
)

#: what intervals from a public-curvature release assume besides :data:`INTERVAL_ASSUMPTIONS`
PUBLIC_CURVATURE_ASSUMPTIONS = (
    "the curvature H and the scores' second moment J are computed from feature rows declared public (X_public), "
    "assumed drawn from the private rows' feature distribution",
    "J is model-based (mean w^2 phi''): the model is correctly specified (E[phi'^2 | x] = phi''); under "
    "misspecification the sandwich's J differs and so do the intervals' widths",
)

ESTIMANDS = {
    "logistic": "the true parameter of a correctly specified logistic model (the minimiser of the population's "
                "weighted logistic loss; the weights depend on the rows only, so it is Fisher consistent)",
    "poisson": "the true parameter of a correctly specified Poisson model (weighted likelihood, Fisher consistent)",
    "huber": "the minimiser of the population's weighted Huber risk: the true coefficients when the errors are "
             "symmetric about 0",
    "default": "the minimiser of the population's weighted loss (weights that depend on the rows only)",
}


@dataclass(frozen=True)
class ParameterIntervals:
    """Per-coordinate ``prob`` intervals for theta (unpacks as ``lower, upper = ...``).

    ``centre`` / ``sd``: the noise-aware posterior's mean and sd (item 4 of the module doc);
    ``data_centre`` / ``data_sd``: the data centre (a Newton step, or the release's surrogate minimiser) and its
    sd before the prior is combined
    (``inf`` where the data carry no information); ``untempered_sd``: the estimated sd of the
    non-private posterior ``(n H + Lambda)^-1`` (``width_ratio = sd / untempered_sd`` is the
    price of privacy); ``prior_sd``; ``data_share``: ``1 - sd^2 / prior_sd^2``, the share of the
    coordinate's precision that the data give; ``newton_step``: the step's length in data sds;
    ``flags``: one reason per coordinate (``""`` where none); ``determined``: the interval
    excludes 0 and the coordinate is not flagged; ``unresolved_score``: per coordinate, how far from 0, in
    its sds, the last released gradient lies along the directions without information the coordinate rests
    on (the largest; 0 where none: module doc, item 3)."""

    lower: np.ndarray
    upper: np.ndarray
    centre: np.ndarray
    sd: np.ndarray
    data_centre: np.ndarray
    data_sd: np.ndarray
    untempered_sd: np.ndarray
    prior_sd: np.ndarray
    data_share: np.ndarray
    newton_step: np.ndarray
    flags: tuple
    prob: float
    estimand: str
    method: str = "noise-aware Newton interval (dp_infer.diagnostics.released_interval)"
    assumptions: tuple = INTERVAL_ASSUMPTIONS
    notes: tuple = field(default_factory=tuple)
    unresolved_score: np.ndarray | None = None

    def __iter__(self):
        return iter((self.lower, self.upper))

    @property
    def width_ratio(self) -> np.ndarray:
        """The interval's sd over the estimated non-private posterior's."""
        return self.sd / self.untempered_sd

    @property
    def determined(self) -> np.ndarray:
        """The interval excludes 0 and the coordinate is not flagged (neither the prior's nor a long last step,
        whose centre may not have converged)."""
        flagged = np.array([bool(f) for f in self.flags])
        return ((self.lower > 0) | (self.upper < 0)) & ~flagged

    def to_dict(self) -> dict:
        out = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        out.update(flags=list(self.flags), assumptions=list(self.assumptions), notes=list(self.notes),
                   width_ratio=self.width_ratio.tolist(), determined=self.determined.tolist())
        return out

    def summary(self) -> dict:
        """A short record for the privacy report (counts and medians; the per-coordinate values: to_dict)."""
        flagged = sum(1 for f in self.flags if f)
        return {"method": self.method, "prob": self.prob, "estimand": self.estimand,
                "determined": int(np.sum(self.determined)), "dim": int(self.sd.size),
                "flagged": flagged, "prior_dominated": int(sum(1 for f in self.flags if f.startswith("prior"))),
                "median_width_ratio": float(np.median(self.width_ratio)),
                "assumptions": list(self.assumptions), "notes": list(self.notes)}


@dataclass(frozen=True)
class _DataPart:
    """The release's Gaussian likelihood for psi (theta = C psi) in ``H``'s informative eigen-directions
    ``UI``: ``centre_I`` (one more Newton step from the last point) with precision ``omega_I``, and
    ``omega0_I``, the same without the release's noise (``n H J^-1 H``)."""

    C: np.ndarray
    U: np.ndarray
    informative: np.ndarray
    hs: np.ndarray
    I: np.ndarray
    UI: np.ndarray
    Jf: np.ndarray
    VI: np.ndarray
    omega_I: np.ndarray
    omega0_I: np.ndarray
    centre_I: np.ndarray
    last: np.ndarray
    stepI: np.ndarray
    public: bool


def _data_part(rel: dict, n: float, extra_variance) -> _DataPart:
    C = np.asarray(rel["chol"], dtype=np.float64)
    d = C.shape[0]
    H = np.asarray(rel["curvature"], dtype=np.float64)
    J = np.asarray(rel["score"], dtype=np.float64)
    g = np.asarray(rel["gradient"], dtype=np.float64)
    sd_g = float(rel["gradient_sd"])
    # eigenvalues within the noise's spectral size (about 2 sqrt(d) sd) carry no information there
    public = rel.get("curvature_source", "private") == "public"
    h_floor = noise_floor(d, float(rel["curvature_sd"]))
    j_floor = noise_floor(d, float(rel["score_sd"]))
    h, U = np.linalg.eigh(0.5 * (H + H.T))
    if public:  # exact matrices: only directions the public rows do not span carry no information
        h_floor = max(h_floor, 1e-9 * max(float(h[-1]), 1e-300))
        j_floor = max(j_floor, 1e-9 * max(float(np.linalg.eigvalsh(0.5 * (J + J.T))[-1]), 1e-300))
    informative = h > h_floor  # below: no information about theta in that direction, the prior decides it
    hs = np.where(informative, h, 1.0)
    I = np.flatnonzero(informative)
    UI = U[:, I]
    wj, Vj = np.linalg.eigh(0.5 * (J + J.T))
    Jf = (Vj * np.maximum(wj, j_floor)) @ Vj.T
    # in the informative eigen-directions of H: the centre's variance H^-1 (J / n + sd_g^2 I) H^-1
    mid = Jf / n + sd_g ** 2 * np.eye(d)
    if extra_variance is not None:
        mid = mid + np.asarray(extra_variance, dtype=np.float64)
    WI = UI.T @ mid @ UI
    HIi = np.diag(1.0 / hs[I])
    VI = HIi @ WI @ HIi
    last = np.linalg.solve(C, np.asarray(rel["path"][-1], dtype=np.float64))
    if rel.get("centre") is not None:  # public curvature: the surrogate's minimiser, the step's whole nonlinearity
        stepI = UI.T @ (last - np.linalg.solve(C, np.asarray(rel["centre"], dtype=np.float64)))
    else:
        stepI = (UI.T @ g) / hs[I]  # one more linear Newton step
    omega_I = np.linalg.inv(0.5 * (VI + VI.T)) if I.size else np.zeros((0, 0))
    centre_I = UI.T @ last - stepI  # the data centre in the informative directions
    omega0_I = n * np.diag(hs[I]) @ np.linalg.inv(UI.T @ Jf @ UI) @ np.diag(hs[I]) if I.size else np.zeros((0, 0))
    return _DataPart(C, U, informative, hs, I, UI, Jf, VI, omega_I, omega0_I, centre_I, last, stepI, public)


def _unresolved(part: _DataPart, g: np.ndarray, sd_g: float, n: float, sd_h: float) -> np.ndarray:
    """Per coordinate of theta: how far from 0, in its sds, the release's last gradient ``g`` lies along the
    curvature directions the release could not resolve (eigenvalues within the noise: left to the prior), the
    largest over those the coordinate rests on (loading at least :data:`UNRESOLVED_LOADING`); 0 where it rests on
    none. Along such a direction ``u`` the gradient ``u^T g`` has, at a point whose last step lands on the
    estimate, sd ``sqrt(sd_g^2 + u^T Jf u / n + sd_h^2 |v|^2)``: the gradient's noise, its sampling error
    (``Jf``: the released J, its eigenvalues floored at its noise: at least the direction's own) and the
    curvature's noise turning the last step ``v = H_I^-1 g`` (informative directions) into ``u`` (a symmetric
    noise of entry sd ``sd_h`` gives ``u^T E v`` the variance ``sd_h^2 |v|^2`` for ``u`` orthogonal to ``v``).
    Above :data:`UNRESOLVED_SCORE` the point is not at the estimate along ``u``: the data say it is elsewhere,
    how far the release cannot say (the curvature there is unknown)."""
    V = part.U[:, ~part.informative]
    if V.shape[1] == 0:
        return np.zeros(part.C.shape[0])
    # |v|^2: the last step in H's informative eigen-directions (orthonormal), as _data_part took it (sd_h is 0 where
    # the curvature is public and the step is the surrogate's)
    sd = np.sqrt(sd_g ** 2 + np.einsum("ik,ij,jk->k", V, part.Jf, V) / n + sd_h ** 2 * float(part.stepI @ part.stepI))
    z = np.abs(V.T @ g) / sd
    CV = part.C @ V
    loading = np.abs(CV) / np.maximum(np.linalg.norm(part.C, axis=1), 1e-300)[:, None]
    return np.max(np.where(loading >= UNRESOLVED_LOADING, z[None, :], 0.0), axis=1)


def release_likelihood(release: dict, *, n: float, extra_variance=None,
                       noise_free: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(theta_D, P)``: the release's Gaussian likelihood for theta, ``exp(-(theta - theta_D)^T P
    (theta - theta_D) / 2)``, before any prior (the data's part of :func:`released_interval`). ``P`` is
    singular where the release carries no information (its null space: the curvature directions within
    the noise); ``theta_D`` is the one-step Newton centre there and the last point elsewhere.
    ``noise_free``: ``P`` without the release's noise, ``n H J^-1 H`` (the non-private posterior's
    data precision as the release estimates it: :func:`released_interval`'s ``untempered_sd``). Pure
    post-processing of the release."""
    rel = release if isinstance(release, dict) else release.to_dict()
    n = check_positive("n", n)
    part = _data_part(rel, n, extra_variance)
    Ci = np.linalg.inv(part.C)
    A = part.UI.T @ Ci  # psi's informative coordinates as a function of theta
    P = A.T @ (part.omega0_I if noise_free else part.omega_I) @ A
    psi_D = part.UI @ part.centre_I + part.last - part.UI @ (part.UI.T @ part.last)
    return part.C @ psi_D, 0.5 * (P + P.T)


def released_interval(release: dict, *, n: int, prior_precision, prob: float = 0.9,
                      extra_variance=None) -> ParameterIntervals:
    """``prob`` intervals for theta from a posterior run's interval release (module doc).

    ``release``: a :class:`~dp_infer.routes.newton_release.NewtonRelease` or its ``to_dict()``;
    ``n``: rows; ``prior_precision``: one value per coordinate (prior mean 0). Pure
    post-processing of the release: free. ``extra_variance``: an optional d x d matrix (psi
    coordinates) added to the gradient's variance ``J / n + sd_g^2 I`` (a caller's further noise, e.g.
    the curvature's noise times the last step: :mod:`dp_infer.model.score_release`); None: none."""
    rel = release if isinstance(release, dict) else release.to_dict()
    if not 0 < prob < 1:
        raise ValueError(f"prob must lie in (0, 1), got {prob!r}")
    n = check_positive("n", n)
    part = _data_part(rel, n, extra_variance)
    C, U, informative, hs, I, UI = part.C, part.U, part.informative, part.hs, part.I, part.UI
    VI, omega_I, centre_I, last, stepI, public = (part.VI, part.omega_I, part.centre_I, part.last, part.stepI,
                                                  part.public)
    d = C.shape[0]
    lam = np.broadcast_to(np.asarray(prior_precision, dtype=np.float64), (d,)).copy()
    lam_psi = C.T @ (lam[:, None] * C)
    sd_g = float(rel["gradient_sd"])
    Q = UI @ omega_I @ UI.T + lam_psi
    Qi = np.linalg.inv(0.5 * (Q + Q.T))
    mean_theta = C @ (Qi @ (UI @ (omega_I @ centre_I)))
    sd = np.sqrt(np.diag(C @ Qi @ C.T))
    CUI = C @ UI
    quad = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", CUI, VI, CUI), 1e-300))
    touches_void = np.any(np.abs(C @ U[:, ~informative]) > 1e-9 * np.abs(C).max(), axis=1)
    data_sd = np.where(touches_void, np.inf, quad)
    step = CUI @ stepI
    data_centre = C @ (last - UI @ stepI)
    step_sd = quad
    if public and rel.get("previous_gradient_sd"):
        # with exact curvature the last point is off the minimiser by the previous stage's gradient noise
        prev = float(rel["previous_gradient_sd"]) ** 2 * np.einsum("ij,j,ij->i", CUI, 1.0 / hs[I] ** 2, CUI)
        step_sd = np.sqrt(quad ** 2 + prev)
    newton_steps = np.abs(step) / step_sd
    Q0 = UI @ part.omega0_I @ UI.T + lam_psi  # the noise-free data precision
    untempered_sd = np.sqrt(np.diag(C @ np.linalg.inv(0.5 * (Q0 + Q0.T)) @ C.T))
    floored = ~informative
    sd_h = 0.0 if public else float(rel["curvature_sd"])  # public curvature: exact
    unresolved = _unresolved(part, np.asarray(rel["gradient"], dtype=np.float64), sd_g, n, sd_h)
    prior_sd = 1.0 / np.sqrt(lam)
    share = 1.0 - (sd / prior_sd) ** 2
    flags = []
    for j in range(d):
        if share[j] < 1.0 - PRIOR_DOMINATED_SHARE:
            flags.append(f"prior: the data give {max(share[j], 0.0):.0%} of this coefficient's precision; its interval "
                         "is mostly the prior's")
        elif newton_steps[j] > LONG_NEWTON_STEP:
            flags.append(f"long step: the last Newton step is {newton_steps[j]:.1f} sds; it may not have converged "
                         "(a larger eps or n brings the draws' mean closer)")
        elif unresolved[j] > UNRESOLVED_SCORE:
            flags.append(f"unresolved: it rests on a direction whose curvature the release could not resolve, and the "
                         f"last gradient along it is {unresolved[j]:.1f} sds from 0: the estimate lies elsewhere along "
                         "it, how far the release cannot say; the interval may miss (a larger eps or n resolves it)")
        else:
            flags.append("")
    z = float(norm.ppf(0.5 * (1.0 + prob)))
    notes = (f"{int(np.sum(floored))} of {d} curvature directions within the release's noise (2 sqrt(d) sds): no "
             "information beyond the prior there",
             f"last gradient released with noise sd {sd_g:.3g} per coordinate in the run's metric; rows weighted by "
             + ("min(1, rho^2 / ||C^T x||^2)" if int(rel.get("weight_power") or 2) == 2
                else "min(1, rho / (r ||C^T x||)), r the link's largest derivative over the labels at the last point "
                     "(logistic: max(s, 1 - s)), never the label" if rel.get("weight_envelope")
                else "min(1, rho / ||C^T x||)")
             + f", rho = {float(rel['rho']):.4g}")
    estimand = ESTIMANDS.get(rel.get("loss"), ESTIMANDS["default"])
    extra = {}
    if public:
        m = rel.get("public_rows")
        notes = (f"{int(np.sum(floored))} of {d} curvature directions not spanned by the public rows: no information "
                 "beyond the prior there",
                 notes[1],
                 f"curvature and scores' second moment computed from {m} public feature rows (X_public, sha256 "
                 f"{str(rel.get('public_rows_sha256'))[:12]}...), not released: the gradients alone were charged")
        estimand = estimand + ", assuming the model is correctly specified (model-based J from public features)"
        extra = dict(method=f"noise-aware Newton interval with curvature and model-based J from {m} public feature "
                            "rows (dp_infer.diagnostics.released_interval; assumes the public rows follow the private "
                            "rows' feature distribution and a correctly specified model)",
                     assumptions=INTERVAL_ASSUMPTIONS + PUBLIC_CURVATURE_ASSUMPTIONS)
    return ParameterIntervals(lower=mean_theta - z * sd, upper=mean_theta + z * sd, centre=mean_theta, sd=sd,
                              data_centre=data_centre, data_sd=data_sd, untempered_sd=untempered_sd,
                              prior_sd=prior_sd, data_share=share, newton_step=newton_steps, flags=tuple(flags),
                              prob=float(prob), estimand=estimand, notes=notes, unresolved_score=unresolved, **extra)


def format_intervals(iv: ParameterIntervals, names=None, *, rows: int | None = None) -> str:
    """A text table of ``iv`` (one row per coordinate, the ``rows`` with the largest |centre| / sd first
    when given), with the flags spelled out under it."""
    d = iv.sd.size
    names = [f"theta[{j}]" for j in range(d)] if names is None else [str(v) for v in names]
    order = np.argsort(-np.abs(iv.centre) / iv.sd) if rows is not None else np.arange(d)
    order = order[: rows if rows is not None else d]
    pct = f"{100 * iv.prob:g}%"
    w = max(9, max(len(names[j]) for j in order))
    head = f"{'':{w}}  {'centre':>9} {'sd':>8} {pct + ' interval':>21} {'x non-private':>13}  flag"
    lines = [head]
    for j in order:
        flag = iv.flags[j].split(":")[0] if iv.flags[j] else ("determined" if iv.determined[j] else "")
        lines.append(f"{names[j]:{w}}  {iv.centre[j]:9.3f} {iv.sd[j]:8.3f} ({iv.lower[j]:9.3f}, {iv.upper[j]:8.3f}) "
                     f"{iv.width_ratio[j]:13.2f}  {flag}")
    s = iv.summary()
    lines.append(f"{s['determined']} of {d} coefficients determined (interval excludes 0); "
                 f"{s['prior_dominated']} mostly the prior's; median width {s['median_width_ratio']:.2f}x the "
                 "non-private posterior's (estimated)")
    kinds = sorted({f.split(":")[0] for f in iv.flags if f} - {"prior"})
    if kinds:
        lines.append("flags: " + "; ".join(f"{k}: {FLAG_MEANINGS.get(k, 'see the intervals flags')}" for k in kinds))
    lines.append(f"estimand: {iv.estimand}")
    return "\n".join(lines)
