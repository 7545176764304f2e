"""A suggested ``--prior-precision`` for a schema, with its reasoning (public: the schema alone).

The feature map encodes every feature into [-1, 1] (a numeric column's clipped, transformed
value mapped linearly from its bounds; a level's one-hot coordinate in {0, 1}), then multiplies
every row by ``scale = row_norm / raw_max_norm`` so that the largest admissible row has norm
``row_norm`` (1 by default). ``raw_max_norm`` is about sqrt(1 + number of columns): each column
contributes at most 1 to the squared norm, the intercept 1.

A coefficient ``theta_j`` of the normalised row therefore equals ``beta_j / scale`` where
``beta_j`` is the effect of one unit of the raw encoded feature (half of a numeric column's
range, or one level against the reference). A weakly informative prior on ``beta_j`` of sd
``s`` (2.5 logits for a binary target, Gelman et al. 2008; 1 on the log rate for a count target;
half the target's range for a numeric target) is a prior on ``theta_j`` of sd ``s / scale``,
i.e. precision ``(scale / s)^2``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .feature_map import FeatureMap
from .spec import Schema

__all__ = ["PriorAdvice", "suggest_prior_precision"]


@dataclass(frozen=True)
class PriorAdvice:
    precision: float
    sd: float          # prior sd per normalised coefficient
    sd_raw: float      # prior sd of the effect of one raw encoded unit
    scale: float       # the feature map's row scale
    raw_max_norm: float
    unit: str          # what sd_raw is measured in

    def text(self) -> str:
        return (f"suggested --prior-precision {self.precision:.3g} (prior sd {self.sd:.3g} per normalised "
                f"coefficient = {self.sd_raw:g} {self.unit} per raw encoded unit -- half a numeric column's "
                f"range, or one level vs the reference -- divided by the row scale {self.scale:.3g}: the "
                f"feature map divides each encoded row by {self.raw_max_norm:.3g} so the largest admissible "
                "row has norm 1)")


def suggest_prior_precision(schema: Schema, sd_raw: float | None = None) -> PriorAdvice:
    """The prior precision for ``dp-infer sample --mode posterior`` suggested by the schema's feature
    map (see the module docstring). ``sd_raw``: the prior sd of one raw encoded unit's effect
    (default: 2.5 logits for a binary target, 1 for a count target, half the numeric target's range)."""
    fmap = FeatureMap(schema)
    t = schema.target
    if sd_raw is None:
        if t is None or t.kind == "binary":
            sd_raw, unit = 2.5, "logits"
        elif t.kind == "count":
            sd_raw, unit = 1.0, "on the log rate"
        else:
            lo, hi = t.bounds
            sd_raw, unit = (hi - lo) / 2.0, "target units"
    else:
        sd_raw, unit = float(sd_raw), "units"
    if not sd_raw > 0:
        raise ValueError(f"sd_raw must be > 0, got {sd_raw!r}")
    sd = sd_raw / fmap.scale
    return PriorAdvice(precision=1.0 / sd ** 2, sd=sd, sd_raw=sd_raw, scale=fmap.scale,
                       raw_max_norm=fmap.raw_max_norm, unit=unit)
