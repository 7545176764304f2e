"""Command line: ``dp-infer demo | sample | report``."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import click
import numpy as np


def _print_report(report: dict) -> None:
    from .diagnostics import format_report

    click.echo(format_report(report))


def _mixing_block(dt, report) -> None:
    from .diagnostics import check_mixing

    mix = check_mixing(dt, report)
    tab = mix.table()
    click.echo(f"{mix.num_chains} chain(s) x {mix.num_draws} draws: max R-hat {mix.max_rhat:.3f}, "
               f"min bulk ESS {mix.min_ess_bulk:.0f}, min tail ESS {mix.min_ess_tail:.0f}, "
               f"divergent draws {mix.num_divergences}")
    if len(tab) > 8:
        col = next((c for c in tab.columns if "hat" in c.lower()), tab.columns[0])
        click.echo(f"the 8 parameters with the largest R-hat (of {len(tab)}):")
        tab = tab.sort_values(col, ascending=False).head(8)
    click.echo(tab.to_string(float_format=lambda x: f"{x:.4g}"))
    for w in mix.warnings:
        click.echo(f"WARNING: {w}")


def _run_and_report(loss, X, y, *, eps, delta, horizon, chains, kernel, friction, lam, seed,
                    progress, X_test=None, y_test=None, out=None, nonprivate_ref=True):
    from . import nonprivate
    from .fit import fit

    t0 = time.time()
    run = fit(loss, X, y, eps=eps, delta=delta, horizon=horizon, num_chains=chains, kernel=kernel,
              friction=friction, lam=lam, seed=seed, progress_bar=progress)
    elapsed = time.time() - t0
    report = run.report()
    report["elapsed_seconds"] = elapsed
    _print_report(report)
    dt = run.to_datatree()
    click.echo("")
    click.echo("ArviZ diagnostics of the released draws (post-processing: free)")
    _mixing_block(dt, report)
    if X_test is not None and loss.name in ("logistic", "model_nll"):
        theta = run.posterior_mean()
        acc_priv = nonprivate.accuracy(theta, X_test, y_test)
        click.echo("")
        click.echo(f"test accuracy, private posterior mean ({report['eps_spent']:.3g}, "
                   f"{delta:g})-DP : {acc_priv:.4f}")
        if nonprivate_ref:
            th_np, _, _ = nonprivate.minimize_loss(loss, X, y)
            click.echo(f"test accuracy, non-private fit (reference, NOT private)  : "
                       f"{nonprivate.accuracy(th_np, X_test, y_test):.4f}")
    click.echo(f"sampling time: {elapsed:.1f} s")
    if out is not None:
        from .diagnostics import save

        path = save(dt, out)
        click.echo(f"wrote {path} (ArviZ DataTree: posterior draws, diverging, privacy report)")
    return run


@click.group()
@click.version_option(package_name="dp_infer")
def main() -> None:
    """Differentially private Gibbs sampling with Langevin kernels inside NumPyro."""


_common = [
    click.option("--eps", type=float, default=1.0, show_default=True, help="privacy epsilon (> 0)"),
    click.option("--delta", type=float, default=1e-5, show_default=True, help="privacy delta in (0, 1)"),
    click.option("--horizon", type=float, default=1.0, show_default=True,
                 help="integrated Langevin time per chain (privacy grows with it)"),
    click.option("--chains", type=int, default=2, show_default=True,
                 help="number of chains (K chains cost K times the RDP of one)"),
    click.option("--kernel", type=click.Choice(["langevin", "underdamped"]), default="langevin",
                 show_default=True),
    click.option("--friction", type=float, default=None, help="friction gamma (underdamped only)"),
    click.option("--lam", type=float, default=0.0, show_default=True,
                 help="L2 regulariser (lam/2)||theta||^2 added to the potential (data independent)"),
    click.option("--seed", type=int, default=0, show_default=True),
    click.option("--progress/--no-progress", default=True, show_default=True),
    click.option("--out", type=click.Path(dir_okay=False), default=None,
                 help="write the run (ArviZ DataTree) to this file"),
]


def _with_common(f):
    for opt in reversed(_common):
        f = opt(f)
    return f


@main.command()
@_with_common
def demo(eps, delta, horizon, chains, kernel, friction, lam, seed, progress, out):
    """Private Bayesian logistic regression on the embedded UCI Adult data."""
    from . import datasets, losses

    data = datasets.load_adult()
    click.echo(f"data: {data.attribution}")
    click.echo(f"  train {data.X_train.shape[0]} rows, test {data.X_test.shape[0]} rows, "
               f"{data.X_train.shape[1]} features; rows with missing values dropped: "
               f"{data.dropped_missing}; rows clipped to norm {data.clip_train.row_norm:g}: "
               f"train {data.clip_train.n_clipped}, test {data.clip_test.n_clipped}")
    click.echo("")
    _run_and_report(losses.logistic(row_norm=1.0), data.X_train, data.y_train, eps=eps,
                    delta=delta, horizon=horizon, chains=chains, kernel=kernel, friction=friction,
                    lam=lam, seed=seed, progress=progress, X_test=data.X_test, y_test=data.y_test,
                    out=out)


@main.command()
@click.argument("csv_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--target", required=True, help="name of the label column")
@click.option("--loss", "loss_name", type=click.Choice(["logistic", "huber"]), default="logistic",
              show_default=True)
@click.option("--row-norm", type=float, default=1.0, show_default=True,
              help="rows are clipped to this l2 norm (the count is reported)")
@click.option("--huber-threshold", type=float, default=1.0, show_default=True)
@click.option("--test-csv", type=click.Path(exists=True, dir_okay=False), default=None,
              help="held-out CSV (same columns) for accuracy")
@_with_common
def sample(csv_file, target, loss_name, row_norm, huber_threshold, test_csv, eps, delta, horizon,
           chains, kernel, friction, lam, seed, progress, out):
    """Private draws for a numeric CSV (features must already be on a public scale)."""
    from . import datasets, losses

    X, y, names = datasets.load_csv(csv_file, target)
    Xc, rep = datasets.clip_rows(X, row_norm)
    click.echo(f"{csv_file}: {X.shape[0]} rows, {X.shape[1]} features; rows clipped to norm "
               f"{row_norm:g}: {rep.n_clipped}")
    loss = (losses.logistic(row_norm=row_norm) if loss_name == "logistic"
            else losses.huber(threshold=huber_threshold, row_norm=row_norm))
    Xt = yt = None
    if test_csv:
        Xt, yt, _ = datasets.load_csv(test_csv, target)
        Xt, _ = datasets.clip_rows(Xt, row_norm)
    _run_and_report(loss, Xc, y, eps=eps, delta=delta, horizon=horizon, chains=chains,
                    kernel=kernel, friction=friction, lam=lam, seed=seed, progress=progress,
                    X_test=Xt, y_test=yt, out=out)


@main.command()
@click.argument("run_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--plots", type=click.Path(file_okay=False), default=None,
              help="directory for PNG plots (default: next to RUN_FILE)")
def report(run_file, plots):
    """Print the summary, mixing checks and privacy report of a saved run; write plots."""
    from .diagnostics import report_from_file

    click.echo(report_from_file(run_file, plots))


from .rashomon_cli import rashomon_command  # noqa: E402

main.add_command(rashomon_command)


def run() -> None:
    """Console entry point: a bad input prints one clear error line, not a traceback."""
    try:
        main(standalone_mode=True)
    except ValueError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
