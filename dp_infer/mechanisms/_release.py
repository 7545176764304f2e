"""The result of one private release: the value, its privacy events and a reviewer's report.

Every mechanism in :mod:`dp_infer.mechanisms` returns a :class:`Release`. The guarantee is the
composition of ``events`` (each with its count) by :class:`~dp_infer.privacy.accountant.Accountant`;
``report`` recomputes it there, so the numbers a reviewer reads never come from the mechanism's
own arithmetic. ``randomness`` is :meth:`~dp_infer.randomness.KeySource.describe` (never the key).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..privacy.accountant import Accountant
from ..privacy.events import PrivacyEvent, PureDpEvent, jsonable

__all__ = ["Release"]


@dataclass(frozen=True)
class Release:
    """A released value with the privacy events that cover it.

    ``value``       what is released (array, index, ``None`` for a refusal, ...);
    ``events``      ``((event, count), ...)``: compose them (and nothing else) for this release;
    ``params``      the data-independent parameters of the run (noise scales, thresholds, ...): never
                    a function of the private data, so neighbouring datasets give identical params;
    ``randomness``  where the key came from (``KeySource.describe()``).
    """

    value: Any
    events: tuple[tuple[PrivacyEvent, int], ...]
    params: Mapping = field(default_factory=dict)
    randomness: Mapping = field(default_factory=dict)

    def accountant(self) -> Accountant:
        """A fresh accountant holding this release's events."""
        return Accountant(list(self.events))

    @property
    def is_pure(self) -> bool:
        """True when every event is pure eps-DP (the release is (eps, 0)-DP)."""
        return all(isinstance(e, PureDpEvent) and e.tv_error == 0.0 for e, _ in self.events)

    def epsilon(self, delta: float | None = None, *, log_delta: float | None = None) -> float:
        """eps of the release at ``delta`` (any delta for a pure release), by the accountant."""
        if self.is_pure and delta is None and log_delta is None:
            return float(sum(c * e.epsilon for e, c in self.events))
        return self.accountant().get_epsilon(delta, log_delta=log_delta)

    def report(self, delta: float | None = None, *, log_delta: float | None = None) -> dict:
        """Accountant report at ``delta`` (omit it for a pure release) + parameters + randomness."""
        if self.is_pure and delta is None and log_delta is None:
            rep = {"epsilon": self.epsilon(), "delta": 0.0, "route": "pure_basic",
                   "components": [{"event": e.to_dict(), "count": c} for e, c in self.events]}
        else:
            rep = self.accountant().report(delta, log_delta=log_delta)
        rep["params"] = jsonable(dict(self.params))
        rep["randomness"] = dict(self.randomness)
        return rep
