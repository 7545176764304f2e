"""Pieces shared by the CLI commands: ledger charging, run labels, the non-private banner."""

from __future__ import annotations

import time
import uuid

import click

NONPRIVATE_BANNER = "NON-PRIVATE (computed on the private data, not covered by any guarantee)"


def run_label(command: str, route: str) -> str:
    """A unique, seed-free label for a ledger entry: command, route, UTC time, random id."""
    return f"dp-infer {command} {route} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {uuid.uuid4().hex[:8]}"


def charge_ledger(ledger, dataset_id, budget, event, label):
    """Register the budget (if given) and charge ``event`` BEFORE any private computation.

    Returns ``(ledger, receipt)`` (both None without a ledger file)."""
    if ledger is None:
        if budget is not None:
            raise ValueError("--budget needs --ledger (the file that keeps the spend)")
        return None, None
    from .privacy.ledger import Ledger

    led = Ledger(ledger)
    if budget is not None:
        led.register_dataset(dataset_id, budget[0], budget[1])
    receipt = led.charge(dataset_id, event, run_label=label)
    sp = led.spent(dataset_id)
    click.echo(f"ledger {ledger}: charged {label!r} before sampling; dataset {dataset_id!r} has spent "
               f"eps = {sp['eps']:.4g} of {sp['eps_budget']:g} at delta = {sp['delta_budget']:g}")
    return led, receipt
