"""Turning two samples of a distinguishing statistic into a Clopper-Pearson LOWER bound on eps
(derivation in the package docstring), and the result record of an audit."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats


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
