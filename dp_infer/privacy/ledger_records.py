"""What the ledger records and raises: the receipt of a charge, the budget errors, the default
ledger location, and the JSON round trip an event must survive to be recorded."""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .events import PrivacyEvent, event_from_dict


LEDGER_ENV_VAR = "DP_INFER_LEDGER"


def default_ledger_path() -> Path:
    """``$DP_INFER_LEDGER`` if set (``~`` expanded), else ``~/.dp_infer/ledger.sqlite``."""
    env = os.environ.get(LEDGER_ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".dp_infer" / "ledger.sqlite"


class BudgetExceededError(RuntimeError):
    """A charge was refused because the composed eps would exceed the dataset's eps budget.

    Attributes: ``dataset_id``, ``eps_budget``, ``delta_budget``, ``eps_spent`` (before the refused
    run), ``eps_remaining`` (= budget - spent), ``eps_requested_total`` (composed eps had the run
    been accepted), ``eps_run`` (the run's own eps at ``delta_budget``).
    """

    def __init__(self, dataset_id: str, eps_budget: float, delta_budget: float, eps_spent: float,
                 eps_requested_total: float, eps_run: float, run_label: str = ""):
        self.dataset_id = dataset_id
        self.eps_budget = eps_budget
        self.delta_budget = delta_budget
        self.eps_spent = eps_spent
        self.eps_remaining = eps_budget - eps_spent
        self.eps_requested_total = eps_requested_total
        self.eps_run = eps_run
        self.run_label = run_label
        super().__init__(
            f"privacy budget of dataset {dataset_id!r} would be exceeded by run {run_label!r}: "
            f"eps spent {eps_spent:.6g} of eps_budget {eps_budget:.6g} at delta_budget {delta_budget:.3g} "
            f"(remaining {self.eps_remaining:.6g}); this run alone costs eps {eps_run:.6g} and the "
            f"composition would reach eps {eps_requested_total:.6g} > {eps_budget:.6g}. "
            "The run was refused and nothing was recorded."
        )


class UnknownDatasetError(ValueError):
    """``dataset_id`` is not registered in the ledger."""


@dataclass(frozen=True)
class ChargeReceipt:
    """Proof that a run was charged (returned by :meth:`Ledger.charge`).

    ``eps_run``: the run's own eps at ``delta``; ``eps_spent``: composed eps of the dataset after
    this charge; ``eps_remaining`` = ``eps_budget - eps_spent``; ``delta`` = the dataset's
    ``delta_budget`` at which all epsilons are stated.
    """

    run_id: int
    dataset_id: str
    run_label: str
    eps_run: float
    eps_spent: float
    eps_remaining: float
    eps_budget: float
    delta: float
    charged_at: float
    ledger_path: str

    def to_dict(self) -> dict:
        return asdict(self)


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).isoformat()


def check_dataset_id(dataset_id: Any) -> str:
    if not isinstance(dataset_id, str) or not dataset_id.strip():
        raise ValueError(f"dataset_id must be a non-empty string, got {dataset_id!r}")
    return dataset_id


def check_run_label(run_label: Any) -> str:
    if run_label is None:
        return ""
    if not isinstance(run_label, str):
        raise ValueError(f"run_label must be a string, got {run_label!r}")
    return run_label


def serialise_event(event: Any) -> tuple[PrivacyEvent, str]:
    """JSON of ``event`` and the event rebuilt from that JSON (what later composition will see).

    Refuses events whose JSON form does not round-trip exactly, so that the accounting done at
    charge time is exactly the accounting any later reader of the ledger will redo.
    """
    if not isinstance(event, PrivacyEvent):
        raise ValueError(f"event must be a PrivacyEvent (GdpEvent, ZcdpEvent, RdpCurveEvent, PureDpEvent, "
                         f"ApproxDpEvent), got {type(event).__name__}")
    d = event.to_dict()
    text = json.dumps(d, sort_keys=True)
    rebuilt = event_from_dict(json.loads(text))
    if json.dumps(rebuilt.to_dict(), sort_keys=True) != text:
        raise ValueError(f"event of kind {event.kind!r} does not survive a JSON round trip; cannot be recorded")
    return rebuilt, text
