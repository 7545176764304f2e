"""One driver: every entry point that spends privacy plans, preflights, charges, runs and returns
through :func:`execute` (issue 38).

A route is two functions and a name (:class:`Route`):

* ``plan(public) -> plan``: pure. ``public`` holds everything but the private rows -- n, the
  dimension, the loss's declared constants, the privacy target, the options -- and the plan it
  returns carries the event a run of it spends (``plan.event``; a plan whose release is several
  charges gives them as ``plan.charges() -> [(event, count)]``).
* ``run(plan, data, public) -> result``: the private computation and the release, given the plan.

:func:`execute` is the one sequence that used to be written by hand at every entry point::

    plan = route.plan(public)              # no data, no budget
    preflight(plan)                        # steps, memory: refused before anything is charged
    hooks.planned(plan)                    # e.g. the CLI prints the routes it considered
    with keep_draws(...):                  # once charged, a later failure keeps the draws
        with charged(ledger, plan.event):  # on disk BEFORE the data are read
            result = route.run(plan, data, public)
        hooks.finish(result)               # labelling, files, reports (after the charge)

Inputs are checked by the entry point before it calls :func:`execute` (what is checked depends on
the door: a DataFrame, a schema's rows, a CLI option), so a refused input never reaches the charge.
What the ledger is charged is the plan's own event, never one built beside it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from ..privacy.ledger import charged
from .fallback import keep_draws
from .preflight import check_plan_resources

__all__ = ["Route", "Hooks", "execute", "plan_charges", "ROUTES", "register_route", "route_for"]


@dataclasses.dataclass(frozen=True)
class Route:
    """A registered way to spend: ``plan(public) -> plan`` (pure) and ``run(plan, data, public) ->
    result``. ``label`` names the ledger row (``"dp_infer fit trajectory"``) from the plan;
    ``preflight(plan, prefix=)`` refuses a plan this machine cannot run (default: steps and memory)."""

    name: str
    plan: Callable[[Mapping[str, Any]], Any]
    run: Callable[[Any, Any, Mapping[str, Any]], Any]
    label: Callable[[Any], str] | None = None
    preflight: Callable[..., None] | None = check_plan_resources

    def ledger_label(self, plan) -> str:
        if self.label is not None:
            return self.label(plan)
        return f"dp_infer {self.name} {getattr(plan, 'route', '')}".rstrip()


@dataclasses.dataclass
class Hooks:
    """What a caller needs around the charge, none of it private:

    * ``planned(plan)``: before the charge (the CLI prints the plan; a note that an option was
      replaced is said here, never after the spend);
    * ``on_charge(ledger, receipt)``: right after the charge is on disk (the CLI prints the spend);
    * ``finish(result, keeper, receipt)``: after the run, inside the draws' keeper (labelling,
      writing files, printing reports): a failure there keeps the paid-for draws in a fallback
      file. May return a replacement result.
    * ``out``: where kept draws go (the CLI's ``--out``); ``step``: what a failure was doing.
    """

    planned: Callable[[Any], None] | None = None
    on_charge: Callable[[Any, Any], None] | None = None
    finish: Callable[[Any, Any, Any], Any] | None = None
    out: Any = None
    step: str = "a step after sampling"


def plan_charges(plan) -> list:
    """``[(event, count)]`` the ledger is charged for ``plan``: its own ``charges()`` where a release
    is several charges (Rashomon's pure route: one purified event per chain), else ``plan.event`` once."""
    if hasattr(plan, "charges"):
        return list(plan.charges())
    event = getattr(plan, "event", None)
    if event is None:
        raise ValueError(f"a {type(plan).__name__} without an event cannot be charged")
    return [(event, 1)]


def run_route(route: Route, plan, data, public: Mapping[str, Any]):
    """The route's private computation (one function, so a test can watch every run start: the
    charge must already be on disk by then)."""
    return route.run(plan, data, public)


def execute(route: Route, public: Mapping[str, Any], data=None, *, ledger=None, dataset_id: str = "default",
            budget=None, hooks: Hooks | None = None, plan=None, label: Callable[[Any], str] | None = None,
            prefix: str = ""):
    """Plan once, preflight, charge the plan's event, run, return the route's result.

    ``ledger``: a :class:`~dp_infer.privacy.ledger.Ledger`, its file, or None (nothing is recorded;
    the caller says so); or a function of no arguments returning one, called once the plan passed its
    preflight (the CLI opens ``--ledger`` there, so a refused plan never says what the ledger would record). ``budget``: registered for ``dataset_id`` when the ledger is opened here.
    ``plan``: a plan the caller already made with ``route.plan(public)`` (to print or check it
    first); it is never re-made. ``label(plan)``: the ledger row's name, when the door names it
    (the CLI: ``"dp-infer sample trajectory"``). ``prefix``: put before parameter names in a
    preflight refusal (the CLI: ``--``). Returns what ``route.run`` returns (or ``hooks.finish``'s
    replacement)."""
    import contextlib

    from ..compilation import release_compiled_programs

    release_compiled_programs()  # a long process of many runs: JAX's kept programs below the kernel's map limit
    hooks = hooks or Hooks()
    plan = route.plan(public) if plan is None else plan
    if route.preflight is not None:
        route.preflight(plan, prefix=prefix)
    if hooks.planned is not None:
        hooks.planned(plan)
    charges = plan_charges(plan)
    if callable(ledger):
        ledger = ledger()
    label = route.ledger_label(plan) if label is None else label(plan)
    with keep_draws(out=hooks.out, ledger=ledger, step=hooks.step) as keeper:
        with contextlib.ExitStack() as stack:  # every charge on disk before the data are read
            receipts = [stack.enter_context(charged(ledger, dataset_id, event, label, budget=budget, count=count,
                                                    on_charge=hooks.on_charge))
                        for event, count in charges]
            result = keeper.keep(run_route(route, plan, data, public))
        receipt = receipts[0] if len(receipts) == 1 else receipts
        if hooks.finish is not None:
            finished = hooks.finish(result, keeper, receipt)
            result = result if finished is None else finished
    return result


#: the registered routes, by name (what :func:`route_for` dispatches on)
ROUTES: dict[str, Route] = {}


def register_route(route: Route) -> Route:
    """Register ``route`` under its name (a second registration of a name is refused)."""
    if route.name in ROUTES and ROUTES[route.name] is not route:
        raise ValueError(f"route {route.name!r} is registered already")
    ROUTES[route.name] = route
    return route


def route_for(name: str) -> Route:
    """The registered route ``name``, or a one-line refusal naming the ones there are."""
    if name not in ROUTES:
        raise ValueError(f"no route {name!r} is registered; registered: {sorted(ROUTES)}")
    return ROUTES[name]
