"""``dp-infer report`` and ``dp-infer budget [show] | register | history``: read a saved run, keep a
ledger."""

from __future__ import annotations

import click


@click.command()
@click.argument("run_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--plots", type=click.Path(file_okay=False), default=None,
              help="directory for PNG plots (default: next to RUN_FILE)")
def report(run_file, plots):
    """Print the summary, mixing checks and privacy report of a saved run; write plots.

    RUN_FILE is a run file (--out) or the fallback file a run whose later step failed kept its
    draws in (.npz)."""
    from pathlib import Path

    from ..diagnostics.plots import report_from_file
    from ..diagnostics.intervals import run_intervals_text
    from ..infer.fallback import is_fallback_file
    from ..infer.run import PrivateRun

    where = Path(plots) if plots is not None else Path(run_file).with_name(Path(run_file).stem + "_report")
    click.echo(f"plots will be written to {where}/ (--plots DIR to choose)")
    tree = None
    if is_fallback_file(run_file):
        tree = PrivateRun.load(run_file).to_datatree()
    click.echo(report_from_file(run_file, plots, tree=tree))
    try:  # a posterior run's intervals for theta (other files: the summary above is the whole report)
        run = PrivateRun.load(run_file)
    except Exception:  # noqa: BLE001 - not a run this type loads (a Rashomon result): nothing to add
        run = None
    if run is not None and getattr(run.plan, "target", "estimate") == "posterior":
        click.echo("\n" + run_intervals_text(run, "Intervals for theta (what the data say; the summary above is the "
                                                  "tempered draws'):"))


def _ledger_options(exists: bool):
    """``--ledger FILE`` (the name every spending command uses) and, kept as an alias, the older
    positional ``LEDGER_FILE``; exactly one of the two."""
    kind = click.Path(exists=exists, dir_okay=False)

    def deco(f):
        f = click.option("--ledger", "ledger_opt", type=kind, default=None,
                         help="the SQLite privacy ledger (the same --ledger FILE as demo, sample, rashomon, schema draft)")(f)
        return click.argument("ledger_file", type=kind, required=False, metavar="[LEDGER_FILE]")(f)
    return deco


def _one_ledger(ledger_file, ledger_opt) -> str:
    if ledger_file is not None and ledger_opt is not None and ledger_file != ledger_opt:
        raise click.UsageError("give the ledger once: --ledger FILE (or the positional LEDGER_FILE, an alias)")
    led = ledger_opt if ledger_opt is not None else ledger_file
    if led is None:
        raise click.UsageError("--ledger FILE is required (the SQLite privacy ledger)")
    return led


class _ShowByDefault(click.Group):
    """``dp-infer budget --ledger FILE ...`` (no sub-command) means ``dp-infer budget show --ledger FILE ...``
    (and the older ``dp-infer budget LEDGER ...`` still works)."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_ShowByDefault)
def budget():
    """The privacy ledger: show a dataset's spend (default), register a budget, list the history."""


@budget.command("show")
@_ledger_options(exists=True)
@click.option("--dataset-id", default="default", show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="write a spent-vs-remaining PNG here")
def show(ledger_file, ledger_opt, dataset_id, plot):
    """Spent and remaining privacy budget of a dataset in a ledger (composed by the accountant)."""
    ledger_file = _one_ledger(ledger_file, ledger_opt)
    from ..privacy.ledger import Ledger

    led = Ledger(ledger_file)
    sp = led.spent(dataset_id)
    click.echo(f"dataset {dataset_id!r}: spent eps = {sp['eps']:.4g} of {sp['eps_budget']:g} at "
               f"delta = {sp['delta_budget']:g} over {sp['n_runs']} run(s) "
               f"({sp['n_charged']} charged but not completed); remaining {sp['remaining_eps']:.4g}")
    recs = led.records_for_plot(dataset_id)
    for r in recs:
        click.echo(f"  {r['run']}: status {r['status']}, eps of this run alone {r['eps_run']:.4g}, "
                   f"composed total {r['eps_cumulative']:.4g}")
    if plot:
        from ..diagnostics.plots import plot_budget

        prev, inc = 0.0, []
        for r in recs:  # increments of the accountant's composed total, so bars sum to it
            inc.append({"run": r["run"], "eps": max(r["eps_cumulative"] - prev, 0.0)})
            prev = r["eps_cumulative"]
        click.echo(f"wrote {plot_budget(inc, sp['eps_budget'], plot)}")



@budget.command("register")
@_ledger_options(exists=False)
@click.option("--dataset-id", default="default", show_default=True, help="dataset name in the ledger")
@click.option("--eps", "eps_budget", type=float, required=True, help="total epsilon budget, in (0, inf)")
@click.option("--delta", "delta_budget", type=float, required=True, help="delta at which eps is stated, in (0, 1)")
def register(ledger_file, ledger_opt, dataset_id, eps_budget, delta_budget):
    """Register a dataset's (eps, delta) budget (creates the ledger file if needed; a budget is never
    changed: re-registering with other values is refused)."""
    ledger_file = _one_ledger(ledger_file, ledger_opt)
    from ..privacy.ledger import Ledger

    led = Ledger(ledger_file)
    b = led.register_dataset(dataset_id, eps_budget, delta_budget)
    sp = led.spent(dataset_id)
    click.echo(f"ledger {ledger_file}: dataset {b['dataset_id']!r} has budget eps = {b['eps_budget']:g} at delta = "
               f"{b['delta_budget']:g}; spent so far eps = {sp['eps']:.4g} over {sp['n_runs']} run(s)")


@budget.command("history")
@_ledger_options(exists=True)
@click.option("--dataset-id", default=None, help="one dataset (default: every registered dataset)")
def history(ledger_file, ledger_opt, dataset_id):
    """Every charged run, oldest first: time, label, status, the run's own eps and the composed total."""
    ledger_file = _one_ledger(ledger_file, ledger_opt)
    from ..privacy.ledger import Ledger

    led = Ledger(ledger_file)
    ids = [dataset_id] if dataset_id is not None else [d["dataset_id"] for d in led.datasets()]
    if not ids:
        click.echo(f"ledger {ledger_file}: no dataset registered (dp-infer budget register --ledger FILE --eps E --delta D)")
    for ds in ids:
        sp = led.spent(ds)
        click.echo(f"dataset {ds!r}: budget eps = {sp['eps_budget']:g} at delta = {sp['delta_budget']:g}; "
                   f"spent {sp['eps']:.4g} over {sp['n_runs']} run(s); remaining {sp['remaining_eps']:.4g}")
        rows = led.history(ds)
        if not rows:
            click.echo("  (no run charged yet)")
            continue
        click.echo(f"  {'id':>4}  {'charged (UTC)':<20}  {'status':<9}  {'eps run':>9}  {'eps total':>9}  label")
        for r in rows:
            click.echo(f"  {r['run_id']:>4}  {str(r['charged_at'])[:19]:<20}  {r['status']:<9}  {r['eps_run']:>9.4g}  "
                       f"{r['eps_after']:>9.4g}  {r['run_label'] or '-'}")
