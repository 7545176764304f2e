"""The one result protocol every route's result implements (issue 38, part 3), and the stored type
a run file is loaded by.

A result of :func:`dp_infer.infer.driver.execute` holds the released draws and the privacy report,
and answers the same questions whatever route made it: :class:`PrivateResult`. A run file records
its result type (:data:`RESULT_TYPE_ATTR`, the same tags a fallback file's ``kind`` holds), and
:meth:`dp_infer.infer.run.PrivateRun.load` dispatches on it, not on the route's name.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["PrivateResult", "RESULT_TYPE_ATTR", "RESULT_KINDS", "stored_result_kind"]

#: the run file's attribute naming its result type
RESULT_TYPE_ATTR = "dp_infer_result_type"
#: the result types a run file or a fallback file can hold (``result_kind`` of each class)
RESULT_KINDS = ("private_run", "posterior_run", "proximal_run", "rashomon")


@runtime_checkable
class PrivateResult(Protocol):
    """What every run gives back (:class:`~dp_infer.infer.run.PrivateRun`, its posterior-mode subclass
    and :class:`~dp_infer.infer.proximal.ProximalRun`; a Rashomon result releases a set of draws and
    its own measures, :class:`~dp_infer.rashomon.result.RashomonResult`, and shares ``report`` only).

    * ``draws(drop_burn_in=True)``: the released draws, shape (chains, draws, dim);
    * ``estimate()``: the released point estimate (shape (dim,));
    * ``report()``: the privacy report (a dict: plan, event, spend, randomness);
    * ``intervals(prob)``: intervals for theta that say what the data say, or a one-line
      ``ValueError`` saying why this run has none;
    * ``to_datatree()``, ``save(path)``, ``print_summary()``, ``predict(X)``, ``extend(...)`` (a
      charged continuation, or a refusal before anything is charged).
    """

    result_kind: str

    def draws(self, *, drop_burn_in: bool = True) -> np.ndarray: ...

    def estimate(self) -> np.ndarray: ...

    def report(self) -> dict: ...

    def intervals(self, prob: float = 0.9) -> Any: ...

    def to_datatree(self) -> Any: ...

    def save(self, path) -> Any: ...

    def print_summary(self) -> None: ...

    def predict(self, X) -> np.ndarray: ...

    def extend(self, *args, **kwargs) -> Any: ...


def stored_result_kind(dt) -> str | None:
    """The result type a loaded run tree records (None for a file written before it was stored)."""
    kind = dt.attrs.get(RESULT_TYPE_ATTR)
    if kind is None:
        return None
    if kind not in RESULT_KINDS:
        raise ValueError(f"the run file names an unknown result type {kind!r} (known: {', '.join(RESULT_KINDS)}): "
                         "damaged, or written by a newer dp_infer")
    return str(kind)
