"""``dp-infer report`` and ``dp-infer budget``: read a saved run or a ledger."""

from __future__ import annotations

import click


@click.command()
@click.argument("run_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--plots", type=click.Path(file_okay=False), default=None,
              help="directory for PNG plots (default: next to RUN_FILE)")
def report(run_file, plots):
    """Print the summary, mixing checks and privacy report of a saved run; write plots."""
    from ..plots import report_from_file

    click.echo(report_from_file(run_file, plots))


@click.command()
@click.argument("ledger_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--dataset-id", default="default", show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="write a spent-vs-remaining PNG here")
def budget(ledger_file, dataset_id, plot):
    """Spent and remaining privacy budget of a dataset in a ledger (composed by the accountant)."""
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
        from ..plots import plot_budget

        prev, inc = 0.0, []
        for r in recs:  # increments of the accountant's composed total, so bars sum to it
            inc.append({"run": r["run"], "eps": max(r["eps_cumulative"] - prev, 0.0)})
            prev = r["eps_cumulative"]
        click.echo(f"wrote {plot_budget(inc, sp['eps_budget'], plot)}")

