"""The built-in losses' behaviours by name, collected from the loss modules (no table of its own).

A run file stores its loss's name (``quantile(0.9)``: the family's name and its parameter);
:func:`loss_behaviour` maps it back to the built-in family's :class:`~dp_infer.losses.behaviour.LossBehaviour`
(predictions after :meth:`dp_infer.PrivateRun.load`). A loss object carries its own behaviour,
built in or not. :func:`cli_losses`: the losses the command line's ``--loss`` offers.
"""

from __future__ import annotations

from . import count, glm, nonsmooth
from .base import PerExampleLoss
from .behaviour import LossBehaviour

__all__ = ["BUILTIN_BEHAVIOURS", "loss_behaviour", "cli_losses"]

#: every built-in loss family's behaviour, in the modules' order (glm, count, nonsmooth)
BUILTIN_BEHAVIOURS: tuple[LossBehaviour, ...] = (*glm.BEHAVIOURS, *count.BEHAVIOURS, *nonsmooth.BEHAVIOURS)

_BY_NAME = {b.name: b for b in BUILTIN_BEHAVIOURS}
if len(_BY_NAME) != len(BUILTIN_BEHAVIOURS):  # pragma: no cover - a module declared a family twice
    raise AssertionError("two built-in loss behaviours share a name")


def loss_behaviour(loss) -> LossBehaviour | None:
    """The behaviour of ``loss``: a :class:`~dp_infer.losses.base.PerExampleLoss`'s own, a
    behaviour as is, or a stored loss name's built-in family (``"quantile(0.9)"`` -> quantile);
    None for a name no built-in loss has."""
    if isinstance(loss, LossBehaviour):
        return loss
    if isinstance(loss, PerExampleLoss):
        return loss.behaviour
    if not isinstance(loss, str):
        return None
    return _BY_NAME.get(loss) or _BY_NAME.get(loss.split("(", 1)[0])


def cli_losses() -> dict[str, LossBehaviour]:
    """``cli_name -> behaviour`` of the built-in losses that have a command-line name, in the
    registry's order (``from_cli``: those ``dp-infer sample --loss`` builds from its options)."""
    return {b.cli_name: b for b in BUILTIN_BEHAVIOURS if b.cli_name is not None}
