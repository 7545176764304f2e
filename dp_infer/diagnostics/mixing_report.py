"""The result of a mixing check: per-parameter R-hat, ESS, MCSE and autocorrelation times,
with plain-language warnings (see :func:`dp_infer.diagnostics.check_mixing`)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping

import numpy as np

from .privacy_report import jsonable


class quiet_nonfinite:
    """Silence NumPy's RuntimeWarnings while ArviZ digests diverged (non-finite) draws; the
    divergence is reported by :func:`check_mixing` in plain language instead."""

    def __enter__(self):
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)
        self._e = np.errstate(all="ignore")
        self._e.__enter__()
        return self

    def __exit__(self, *exc):
        self._e.__exit__(*exc)
        self._w.__exit__(*exc)
        return False


RHAT_ADVICE = "chains have not mixed: run longer — note longer runs cost privacy on the trajectory route"
DIVERGENCE_ADVICE = "step size too large for the potential's smoothness"


@dataclasses.dataclass
class MixingReport:
    """Result of :func:`check_mixing`. Per-variable arrays have the variable's event shape.

    ``iat`` is the empirical integrated autocorrelation time in draws,
    ``chains * draws / ess_bulk``; ``iat_steps`` multiplies it by the steps per draw.
    ``rhat_method`` is ``"multi-chain"`` or ``"single-chain split (k segments)"``.
    """

    num_chains: int
    num_draws: int
    rhat: dict[str, np.ndarray]
    ess_bulk: dict[str, np.ndarray]
    ess_tail: dict[str, np.ndarray]
    mcse_mean: dict[str, np.ndarray]
    iat: dict[str, np.ndarray]
    num_divergences: int
    divergences_per_chain: list[int]
    rhat_method: str
    rhat_max: float
    ess_min: float
    steps_per_draw: int = 1
    predicted_relaxation_time: float | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    # ------------------------------------------------------------------ aggregates
    @staticmethod
    def _extreme(d: Mapping[str, np.ndarray], fn) -> float:
        vals = [np.asarray(v, dtype=np.float64).ravel() for v in d.values()]
        vals = np.concatenate(vals) if vals else np.array([])
        vals = vals[np.isfinite(vals)]
        return float(fn(vals)) if vals.size else math.nan

    @property
    def max_rhat(self) -> float:
        return self._extreme(self.rhat, np.max)

    @property
    def min_ess_bulk(self) -> float:
        return self._extreme(self.ess_bulk, np.min)

    @property
    def min_ess_tail(self) -> float:
        return self._extreme(self.ess_tail, np.min)

    @property
    def max_iat(self) -> float:
        return self._extreme(self.iat, np.max)

    @property
    def ok(self) -> bool:
        """True when no warning was raised."""
        return not self.warnings

    def table(self):
        """A pandas DataFrame, one row per scalar component (``theta[0]``, ...)."""
        import pandas as pd

        rows = {}
        for name in self.rhat:
            shape = np.shape(self.rhat[name])
            for idx in np.ndindex(*shape) if shape else [()]:
                label = name + (f"[{','.join(map(str, idx))}]" if idx else "")
                rows[label] = {
                    "r_hat": float(np.asarray(self.rhat[name])[idx]),
                    "ess_bulk": float(np.asarray(self.ess_bulk[name])[idx]),
                    "ess_tail": float(np.asarray(self.ess_tail[name])[idx]),
                    "mcse_mean": float(np.asarray(self.mcse_mean[name])[idx]),
                    "iat": float(np.asarray(self.iat[name])[idx]),
                }
        return pd.DataFrame.from_dict(rows, orient="index")

    def as_dict(self) -> dict:
        d = {
            "num_chains": self.num_chains,
            "num_draws": self.num_draws,
            "rhat_method": self.rhat_method,
            "max_rhat": self.max_rhat,
            "min_ess_bulk": self.min_ess_bulk,
            "min_ess_tail": self.min_ess_tail,
            "max_iat": self.max_iat,
            "steps_per_draw": self.steps_per_draw,
            "predicted_relaxation_time": self.predicted_relaxation_time,
            "num_divergences": self.num_divergences,
            "divergences_per_chain": list(self.divergences_per_chain),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "ok": self.ok,
        }
        for key in ("rhat", "ess_bulk", "ess_tail", "mcse_mean", "iat"):
            d[key] = {k: jsonable(v) for k, v in getattr(self, key).items()}
        return d

    def __str__(self) -> str:
        import pandas as pd

        lines = [
            f"Mixing checks ({self.num_chains} chain(s) x {self.num_draws} draws; R-hat: {self.rhat_method})",
        ]
        with pd.option_context("display.max_rows", 200, "display.width", 120):
            lines.append(self.table().to_string(float_format=lambda x: f"{x:.4g}"))
        lines.append(
            f"divergent draws: {self.num_divergences} (per chain: {self.divergences_per_chain})"
        )
        if self.predicted_relaxation_time is not None:
            lines.append(
                f"integrated autocorrelation time: {self.max_iat * self.steps_per_draw:.4g} steps (empirical, max)"
                f" vs predicted relaxation time {self.predicted_relaxation_time:.4g} steps"
            )
        for n in self.notes:
            lines.append(f"note: {n}")
        if self.warnings:
            lines.append("WARNINGS:")
            lines.extend(f"  - {w}" for w in self.warnings)
        else:
            lines.append(f"OK: R-hat <= {self.rhat_max} and ESS >= {self.ess_min:g} everywhere, no divergences.")
        return "\n".join(lines)
