"""Checks that a mechanism runs inside the assumptions its constants were declared under.

A loss's constants (Lipschitz L, gradient difference G, value range, smoothness) are computed on
the loss's declared domain (:attr:`~dp_infer.losses.PerExampleLoss.domain`). A mechanism that
runs on another set C0 may use them only when the declared domain contains C0: outside it the
gradient (and so the sensitivity) can be far larger (issue 30, finding 2: a squared loss declared
on a ball of radius 0.01 and run on radius 10 has an exact one-shot privacy loss 1.48 where
eps = 1 is claimed).
"""

from __future__ import annotations

from ..domains import Domain, covers

__all__ = ["require_constants_cover"]


def require_constants_cover(loss, domain: Domain, where: str) -> None:
    """Raise a one-line ``ValueError`` unless ``loss.domain`` (None / unbounded: all of R^p)
    contains ``domain``, the set the mechanism ``where`` runs on."""
    declared = getattr(loss, "domain", None)
    if not covers(declared, domain):
        raise ValueError(
            f"domain: {where} runs on {type(domain).__name__} (diameter {domain.diameter:g}) but the loss's "
            f"constants were declared on {type(declared).__name__} (diameter {declared.diameter:g}), which does "
            "not contain it; declare the loss on the domain you run on (or on a superset)")
