"""Privacy events: immutable records of one mechanism's guarantee.

An event says *what kind* of guarantee a mechanism has; the :class:`~dp_infer.privacy.accountant.Accountant`
composes events and converts the result to (eps, delta). All arithmetic is float64 on the host,
in log space wherever delta can be tiny.

Event kinds
-----------
``GdpEvent(mu)``
    mu-Gaussian DP (Dong, Roth, Su 2019/2022): the trade-off curve dominates that of
    ``N(0,1)`` vs ``N(mu,1)``. Exact (eps, delta) via the Gaussian privacy profile
    ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle & Wang 2018, eq. (6)).
    Composition (adaptive): ``mu = sqrt(sum mu_i^2)``. RDP curve ``alpha mu^2 / 2``.
    dp-accounting counterpart: ``GaussianDpEvent(noise_multiplier=1/mu)``.
``ZcdpEvent(rho)``
    linear RDP curve ``alpha -> rho * alpha`` for all alpha > 1 (rho-zCDP, Bun & Steinke 2016).
    dp-accounting counterpart: ``ZCDpEvent(rho)`` (RDP accountant only: its PLD accountant
    rejects it).
``RdpCurveEvent(orders, values)``
    an arbitrary RDP curve known on a grid of orders. Renyi divergence is non-decreasing in the
    order (van Erven & Harremoes 2014, Thm 3), so between grid points the curve is bounded by the
    value at the next grid order up; above the largest grid order it is unknown (+inf).
``SubsampledGaussianEvent(orders, values, noise_multiplier, sampling_prob, compositions, neighboring)``
    steps of the Poisson-subsampled Gaussian mechanism: an RDP curve (an upper bound the caller
    computed) for the RDP route, and the mechanism itself, whose privacy-loss distribution
    dp-accounting builds, for the PLD route. dp-accounting counterpart:
    ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), compositions)``.
``PureDpEvent(epsilon)``
    pure eps-DP. Never logged as ``LaplaceDpEvent`` (Laplace composes more tightly than a generic
    eps-DP mechanism; that would under-report). Composes by basic composition, by the generic
    pure-DP PLD ``from_privacy_parameters(DifferentialPrivacyParameters(eps, 0))``, or through its
    exact RDP envelope (randomized response, see :func:`pure_dp_rdp`).
``ApproxDpEvent(epsilon, delta)``
    an (eps, delta)-DP guarantee with no finer structure; composes through the generic
    (eps, delta) PLD or by basic composition.

Every event also carries ``tv_error``: the total-variation distance between the mechanism
actually run and the ideal mechanism the guarantee is about (e.g. a sampler that is only
tau-close to its Gibbs target). It is *not* folded into delta here; the accountant adds
``(1 + e^eps) * tau`` on top of the ideal privacy delta and reports both parts separately
(seed-002 digest §3.6; seed-001 digest §4.8: ``A(S) <= pi(S) + tau <= e^eps pi'(S) + delta + tau
<= e^eps A'(S) + delta + (1 + e^eps) tau``).

The numeric conversions these events use live in :mod:`dp_infer.privacy.conversions`; the
:class:`~dp_infer.privacy.accountant.Accountant` (which imports this module, never the
reverse) composes events and reports (eps, delta).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from .._validation import check_delta, check_nonnegative, check_positive
from . import conversions as _conversions
from .conversions import check_alpha, check_orders, pure_dp_rdp

__all__ = [
    "PrivacyEvent",
    "GdpEvent",
    "ZcdpEvent",
    "RdpCurveEvent",
    "SubsampledGaussianEvent",
    "SUBSAMPLED_NEIGHBORING",
    "PureDpEvent",
    "ApproxDpEvent",
    "event_from_dict",
    "gaussian_mechanism_event",
    "laplace_mechanism_event",
]


def __getattr__(name):
    """The conversions moved to dp_infer.privacy.conversions in 0.2; the old path keeps working
    for one release, with a DeprecationWarning."""
    if name in _conversions.__all__:
        warnings.warn(f"dp_infer.privacy.events.{name} moved to dp_infer.privacy.conversions.{name}; "
                      "the old path will be removed in the next release", DeprecationWarning, stacklevel=2)
        return getattr(_conversions, name)
    raise AttributeError(f"module 'dp_infer.privacy.events' has no attribute {name!r}")


# ---------------------------------------------------------------------------------------------
# events
# ---------------------------------------------------------------------------------------------


def _freeze_meta(meta: Mapping | None) -> Mapping:
    return MappingProxyType(dict(meta or {}))


def _json_float(x: float) -> float | str:
    x = float(x)
    if math.isnan(x):
        raise ValueError("NaN cannot be serialised in a privacy event")
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _from_json_float(x: Any) -> float:
    return float(x)  # numbers, and the strings "inf" / "-inf" written by _json_float


@dataclass(frozen=True)
class PrivacyEvent:
    """Base class of an immutable privacy event.

    Attributes common to all kinds:
      label        short human-readable name (e.g. ``"langevin_path"``);
      assumptions  the exact conditions under which the guarantee holds (strings);
      tv_error     TV distance of the mechanism actually run from the ideal one (>= 0);
      metadata     plain JSON-able parameters (beta, time, sensitivity, ...), read-only.
    """

    kind: ClassVar[str] = "base"
    label: str = field(default="", kw_only=True)
    assumptions: tuple[str, ...] = field(default=(), kw_only=True)
    tv_error: float = field(default=0.0, kw_only=True)
    metadata: Mapping = field(default_factory=dict, kw_only=True, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "tv_error", check_nonnegative("tv_error", self.tv_error))
        if self.tv_error >= 1.0:
            raise ValueError(f"tv_error must lie in [0, 1), got {self.tv_error!r}")
        if not isinstance(self.label, str):
            raise ValueError(f"label must be a string, got {self.label!r}")
        object.__setattr__(self, "assumptions", tuple(str(a) for a in self.assumptions))
        object.__setattr__(self, "metadata", _freeze_meta(self.metadata))

    # -- pickling: the read-only metadata view is stored as a plain dict and frozen again --
    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["metadata"] = dict(self.metadata)
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        state["metadata"] = _freeze_meta(state.get("metadata"))
        self.__dict__.update(state)

    # -- RDP representation (None if the kind has none) --
    def rdp(self, alpha: Any) -> np.ndarray | None:
        return None

    def to_dp_accounting(self):
        """The dp-accounting DpEvent with the same guarantee, or None if it has none."""
        return None

    def _payload(self) -> dict:
        return {}

    def to_dict(self) -> dict:
        """Plain JSON-serialisable dict (``event_from_dict`` inverts it)."""
        d = {"kind": self.kind, **self._payload(), "label": self.label,
             "assumptions": list(self.assumptions), "tv_error": _json_float(self.tv_error),
             "metadata": jsonable(dict(self.metadata))}
        return d


@dataclass(frozen=True)
class GdpEvent(PrivacyEvent):
    """mu-Gaussian differential privacy."""

    kind: ClassVar[str] = "gdp"
    mu: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "mu", check_nonnegative("mu", self.mu))

    def rdp(self, alpha):
        return check_alpha(alpha) * (self.mu**2 / 2.0)

    def to_dp_accounting(self):
        import dp_accounting

        if self.mu == 0.0:
            return dp_accounting.NoOpDpEvent()
        return dp_accounting.GaussianDpEvent(noise_multiplier=1.0 / self.mu)

    def _payload(self):
        return {"mu": _json_float(self.mu)}


@dataclass(frozen=True)
class ZcdpEvent(PrivacyEvent):
    """Linear RDP curve alpha -> rho * alpha (rho-zCDP)."""

    kind: ClassVar[str] = "zcdp"
    rho: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "rho", check_nonnegative("rho", self.rho))

    def rdp(self, alpha):
        return check_alpha(alpha) * self.rho

    def to_dp_accounting(self):
        import dp_accounting

        return dp_accounting.ZCDpEvent(rho=self.rho)

    def _payload(self):
        return {"rho": _json_float(self.rho)}


@dataclass(frozen=True)
class RdpCurveEvent(PrivacyEvent):
    """RDP curve known on a grid of orders (non-decreasing step envelope between grid points)."""

    kind: ClassVar[str] = "rdp"
    orders: tuple[float, ...] = ()
    values: tuple[float, ...] = ()

    def __post_init__(self):
        super().__post_init__()
        a = check_orders("orders", self.orders)
        v = np.asarray(self.values, dtype=np.float64)
        if v.shape != a.shape:
            raise ValueError(f"values must have the same length as orders, got {v.shape} and {a.shape}")
        if np.any(np.isnan(v)) or np.any(v < 0):
            raise ValueError("values (RDP) must be >= 0 (inf allowed)")
        # enforce monotonicity (a valid curve is non-decreasing; take the running max so that the
        # step envelope is an upper bound even if a caller passed a slightly non-monotone curve)
        v = np.maximum.accumulate(v)
        object.__setattr__(self, "orders", tuple(float(x) for x in a))
        object.__setattr__(self, "values", tuple(float(x) for x in v))

    def rdp(self, alpha):
        al = check_alpha(alpha)
        a = np.asarray(self.orders)
        v = np.asarray(self.values)
        idx = np.searchsorted(a, al, side="left")  # first grid order >= alpha
        out = np.full(al.shape, np.inf)
        ok = idx < a.size
        out[ok] = v[idx[ok]]
        return out

    def to_dp_accounting(self):
        return None  # dp-accounting has no custom-curve event; use rdp.compute_epsilon

    def _payload(self):
        return {"orders": [_json_float(x) for x in self.orders], "values": [_json_float(x) for x in self.values]}


#: neighbouring relations of :class:`SubsampledGaussianEvent` (and dp-accounting's names for them)
SUBSAMPLED_NEIGHBORING = {"replace_one": "REPLACE_ONE", "add_remove": "ADD_OR_REMOVE_ONE"}


@dataclass(frozen=True)
class SubsampledGaussianEvent(RdpCurveEvent):
    """``compositions`` adaptive steps of the Poisson-subsampled Gaussian mechanism: each record is
    in a step's batch with probability ``sampling_prob`` (fresh at every step), and the batch's sum
    (per-record sensitivity 1 after scaling) gets Gaussian noise of sd ``noise_multiplier``.

    ``neighboring``: ``"replace_one"`` (dp_infer's default; dp-accounting's REPLACE_ONE pair
    ``(1-q) N(0) + q N(+-1)``, which dominates vector-valued sums of records of norm <= 1:
    :mod:`dp_infer.privacy.minibatch`) or ``"add_remove"`` (ADD_OR_REMOVE_ONE).

    The event carries two descriptions of one guarantee, and the accountant uses each where it can:
    ``orders`` / ``values``, an RDP curve the caller computed as an upper bound on this event's
    (the RDP route, and composition with zCDP or grid-curve events); and the mechanism itself, whose
    privacy-loss distribution dp-accounting builds (:meth:`pld`, pessimistic), for the PLD route."""

    kind: ClassVar[str] = "subsampled_gaussian"
    noise_multiplier: float = 1.0
    sampling_prob: float = 0.5
    compositions: int = 1
    neighboring: str = "replace_one"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        q = float(self.sampling_prob)
        if not 0.0 < q < 1.0:  # q = 1 is the plain Gaussian mechanism: a GdpEvent
            raise ValueError(f"sampling_prob must lie in (0, 1), got {self.sampling_prob!r}")
        object.__setattr__(self, "sampling_prob", q)
        c = self.compositions
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1:
            raise ValueError(f"compositions must be an integer >= 1, got {c!r}")
        object.__setattr__(self, "compositions", int(c))
        if self.neighboring not in SUBSAMPLED_NEIGHBORING:
            raise ValueError(f"neighboring must be one of {sorted(SUBSAMPLED_NEIGHBORING)}, got {self.neighboring!r}")

    def to_dp_accounting(self):
        import dp_accounting as dpa

        step = dpa.PoissonSampledDpEvent(self.sampling_prob, dpa.GaussianDpEvent(self.noise_multiplier))
        return dpa.SelfComposedDpEvent(step, self.compositions)

    def neighboring_relation(self):
        """dp-accounting's ``NeighboringRelation`` for :attr:`neighboring`."""
        import dp_accounting as dpa

        return getattr(dpa.NeighboringRelation, SUBSAMPLED_NEIGHBORING[self.neighboring])

    def pld(self, value_discretization_interval: float, count: int = 1):
        """dp-accounting's pessimistic privacy-loss distribution of ``count`` copies of the event
        (``count * compositions`` steps)."""
        from dp_accounting.pld import privacy_loss_distribution as pldlib

        step = pldlib.from_gaussian_mechanism(
            standard_deviation=self.noise_multiplier, sensitivity=1.0, sampling_prob=self.sampling_prob,
            neighboring_relation=self.neighboring_relation(), pessimistic_estimate=True,
            value_discretization_interval=float(value_discretization_interval))
        steps = self.compositions * int(count)
        return step.self_compose(steps) if steps > 1 else step

    def _payload(self):
        return {**super()._payload(), "noise_multiplier": _json_float(self.noise_multiplier),
                "sampling_prob": _json_float(self.sampling_prob), "compositions": self.compositions,
                "neighboring": self.neighboring}


@dataclass(frozen=True)
class PureDpEvent(PrivacyEvent):
    """Pure eps-DP (a generic eps-DP mechanism; never treated as Laplace)."""

    kind: ClassVar[str] = "pure"
    epsilon: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "epsilon", check_nonnegative("epsilon", self.epsilon))

    def rdp(self, alpha):
        return pure_dp_rdp(self.epsilon, alpha)

    def to_dp_accounting(self):
        return None  # deliberately NOT LaplaceDpEvent (would under-report); see accountant PLD route

    def _payload(self):
        return {"epsilon": _json_float(self.epsilon)}


@dataclass(frozen=True)
class ApproxDpEvent(PrivacyEvent):
    """A generic (eps, delta)-DP guarantee."""

    kind: ClassVar[str] = "approx"
    epsilon: float = 0.0
    delta: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "epsilon", check_nonnegative("epsilon", self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta, "delta", allow_zero=True))

    def _payload(self):
        return {"epsilon": _json_float(self.epsilon), "delta": _json_float(self.delta)}


_KINDS = {cls.kind: cls for cls in (GdpEvent, ZcdpEvent, RdpCurveEvent, SubsampledGaussianEvent, PureDpEvent,
                                    ApproxDpEvent)}


def jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return [jsonable(v) for v in x.tolist()]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return _json_float(float(x))
    if x is None or isinstance(x, str):
        return x
    return str(x)


def event_from_dict(d: Mapping) -> PrivacyEvent:
    """Rebuild an event from :meth:`PrivacyEvent.to_dict` output."""
    if not isinstance(d, Mapping) or "kind" not in d:
        raise ValueError("event dict must be a mapping with a 'kind' key")
    kind = d["kind"]
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {sorted(_KINDS)}, got {kind!r}")
    common = {
        "label": d.get("label", ""),
        "assumptions": tuple(d.get("assumptions", ())),
        "tv_error": _from_json_float(d.get("tv_error", 0.0)),
        "metadata": dict(d.get("metadata", {})),
    }
    if kind == "gdp":
        return GdpEvent(mu=_from_json_float(d["mu"]), **common)
    if kind == "zcdp":
        return ZcdpEvent(rho=_from_json_float(d["rho"]), **common)
    if kind == "rdp":
        return RdpCurveEvent(orders=tuple(_from_json_float(x) for x in d["orders"]),
                             values=tuple(_from_json_float(x) for x in d["values"]), **common)
    if kind == "subsampled_gaussian":
        return SubsampledGaussianEvent(orders=tuple(_from_json_float(x) for x in d["orders"]),
                                       values=tuple(_from_json_float(x) for x in d["values"]),
                                       noise_multiplier=_from_json_float(d["noise_multiplier"]),
                                       sampling_prob=_from_json_float(d["sampling_prob"]),
                                       compositions=int(d["compositions"]), neighboring=str(d["neighboring"]),
                                       **common)
    if kind == "pure":
        return PureDpEvent(epsilon=_from_json_float(d["epsilon"]), **common)
    return ApproxDpEvent(epsilon=_from_json_float(d["epsilon"]), delta=_from_json_float(d["delta"]), **common)


# ---------------------------------------------------------------------------------------------
# convenience constructors for statistics released on private data
# ---------------------------------------------------------------------------------------------


def gaussian_mechanism_event(sensitivity: float, sigma: float, *, label: str = "gaussian_statistic",
                             assumptions: Sequence[str] = ()) -> GdpEvent:
    """A statistic with l2-sensitivity ``sensitivity`` plus N(0, sigma^2 I) noise: (sensitivity/sigma)-GDP."""
    s = check_nonnegative("sensitivity", sensitivity)
    sig = check_positive("sigma", sigma)
    return GdpEvent(mu=s / sig, label=label,
                    assumptions=("l2 sensitivity of the statistic <= %g under the library's adjacency" % s, *assumptions),
                    metadata={"sensitivity": s, "sigma": sig})


def laplace_mechanism_event(l1_sensitivity: float, scale: float, *, label: str = "laplace_statistic",
                            assumptions: Sequence[str] = ()) -> PureDpEvent:
    """A statistic with l1-sensitivity ``l1_sensitivity`` plus Laplace(scale) noise: eps = l1/scale.

    Logged as a *generic* pure-eps event (composes no better than any eps-DP mechanism), which is
    conservative for Laplace.
    """
    s = check_nonnegative("l1_sensitivity", l1_sensitivity)
    b = check_positive("scale", scale)
    return PureDpEvent(epsilon=s / b, label=label,
                       assumptions=("l1 sensitivity of the statistic <= %g under the library's adjacency" % s, *assumptions),
                       metadata={"l1_sensitivity": s, "scale": b})
