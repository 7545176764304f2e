"""Command line: ``dp-infer demo | sample | report | budget | rashomon``.

Order of work in every command that spends budget: check every input (options, files, test
columns by name) -> plan (data independent) -> charge the ledger -> sample -> write ``--out``
-> print. A bad input is an error before anything is charged; once the run is charged its draws
are written whatever happens afterwards.
"""

from __future__ import annotations

import os
import sys
import time

import click
import numpy as np

from ._cli_common import NONPRIVATE_BANNER, charge_ledger, run_label


_REPORT_FILE_ONLY = ("routes_considered", "event", "potential", "purification", "notes")


def _print_report(report: dict) -> None:
    """The privacy report, less the long items kept in the run file (routes, event, potential)."""
    from .diagnostics import format_report

    click.echo(format_report({k: v for k, v in report.items() if k not in _REPORT_FILE_ONLY}))


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


def _run_and_report(loss, X, y, *, command, eps, delta, pure, route, horizon, chains, kernel,
                    friction, lam_rel, radius, seed, key_impl, progress, ledger, dataset_id, budget,
                    X_test=None, y_test=None, out=None, nonprivate=False):
    from . import nonprivate as np_ref
    from ._validation import check_delta
    from .calibrate import calibrate
    from .domains import L2Ball
    from .fit import sample

    if not pure:
        check_delta(delta)  # delta = 0 means pure eps in Python; on the command line that is --pure
    X, y = loss.check_data(X, y)
    dim = loss.num_params(X.shape[1])
    if X_test is not None:
        X_test = np.asarray(X_test, dtype=float)
        if X_test.shape[1] != X.shape[1]:
            raise ValueError(f"the test data have {X_test.shape[1]} feature columns, the training data {X.shape[1]}")
    if radius is not None and radius <= 0:
        raise ValueError(f"--radius must lie in (0, inf), got {radius!r}")
    domain = L2Ball(dim, radius) if radius is not None else None
    plan = calibrate(loss.constants, X.shape[0], dim, eps=eps, delta=None if pure else delta,
                     route=route, domain=domain, horizon=horizon, num_chains=chains, kernel=kernel,
                     friction=friction, lam_rel=lam_rel)
    click.echo("Routes considered (data independent: n, dimension and the loss's declared constants)")
    click.echo(plan.explain())
    click.echo("")
    led, receipt = charge_ledger(ledger, dataset_id, budget, plan.event, run_label(command, plan.route))
    t0 = time.time()
    run = sample(loss, X, y, plan, domain=domain, seed=seed, key_impl=key_impl, progress_bar=progress)
    elapsed = time.time() - t0
    if receipt is not None:
        led.complete(receipt)
    dt = run.to_datatree()
    if out is not None:  # written first: the draws are paid for
        from .diagnostics import save

        path = save(dt, out)
        click.echo(f"wrote {path} (ArviZ DataTree: released draws, diverging, privacy report)")
    report = run.report()
    _print_report(report)
    if plan.release == "trajectory":
        click.echo("")
        click.echo(f"ArviZ diagnostics of the released draws after the first {plan.burn_in} per chain "
                   "(post-processing: free)")
        from .diagnostics import to_datatree

        _mixing_block(to_datatree({"theta": run.draws()}, report), report)
    else:
        click.echo(f"released: {plan.release} (too few draws for R-hat/ESS; more chains cost privacy)")
    if X_test is not None and loss.name in ("logistic", "model_nll"):
        acc_priv = np_ref.accuracy(run.estimate(), X_test, y_test)
        click.echo("")
        guarantee = (f"({report['eps_spent']:.3g}, {plan.delta:g})-DP" if plan.delta > 0
                     else f"pure {report['eps_spent']:.3g}-DP")
        click.echo(f"route: {plan.route}; test accuracy of the released estimate on the public test "
                   f"data, {guarantee}: {acc_priv:.4f}")
        if nonprivate:
            th_np, _, _ = np_ref.minimize_loss(loss, X, y)
            click.echo(f"test accuracy of a non-private fit, {NONPRIVATE_BANNER}: "
                       f"{np_ref.accuracy(th_np, X_test, y_test):.4f}")
    click.echo(f"sampling time: {elapsed:.1f} s")
    return run


@click.group()
@click.version_option(package_name="dp_infer")
def main() -> None:
    """Differentially private Gibbs sampling with Langevin kernels inside NumPyro."""


SEED_HELP = ("make the noise reproducible from this integer. Whoever holds it can regenerate the "
             "noise and, from the released draws, the gradients: privacy then rests on keeping it "
             "secret. Default: a fresh secret key from the operating system.")
NONPRIVATE_HELP = ("also print NON-PRIVATE diagnostics computed on the private data (clipped and "
                   "dropped row counts, a non-private reference fit), labelled as such")

_seed_options = [
    click.option("--reproducible-seed", "seed", type=click.IntRange(min=0), default=None, help=SEED_HELP),
    click.option("--key-impl", type=click.Choice(["threefry2x32", "rbg"]), default="threefry2x32",
                 show_default=True, help="JAX key implementation (rbg: 128-bit keys)"),
]
_common = [
    click.option("--eps", type=float, default=1.0, show_default=True, help="privacy epsilon in (0, 100]"),
    click.option("--delta", type=float, default=1e-5, show_default=True, help="privacy delta in (0, 1)"),
    click.option("--pure", is_flag=True, default=False,
                 help="pure eps-DP (route 'pure': needs --radius; purifies the estimate)"),
    click.option("--route", type=click.Choice(["auto", "trajectory", "last_iterate", "stationary", "pure"]),
                 default="auto", show_default=True, help="force a privacy route"),
    click.option("--radius", type=float, default=None,
                 help="L2-ball domain radius for theta (required by --pure)"),
    click.option("--horizon", type=float, default=1.0, show_default=True,
                 help="integrated Langevin time per chain, > 0 (trajectory route: privacy grows with it)"),
    click.option("--chains", type=click.IntRange(min=1), default=2, show_default=True,
                 help="number of chains (K chains cost K times the RDP of one)"),
    click.option("--kernel", type=click.Choice(["langevin", "underdamped"]), default="langevin",
                 show_default=True),
    click.option("--friction", type=float, default=None, help="friction gamma (underdamped only)"),
    click.option("--lam-rel", type=float, default=None,
                 help="loss-level L2 regulariser (lam_rel/2)||theta||^2 (default: none for the "
                      "trajectory route, a data-independent choice for routes needing strong convexity)"),
    click.option("--ledger", type=click.Path(dir_okay=False), default=None,
                 help="SQLite privacy ledger: the run is charged before sampling, refused if over budget"),
    click.option("--dataset-id", default="default", show_default=True, help="dataset name in the ledger"),
    click.option("--budget", type=(float, float), default=None,
                 help="register the dataset's (eps, delta) budget in the ledger"),
    *_seed_options,
    click.option("--progress/--no-progress", default=True, show_default=True),
    click.option("--out", type=click.Path(dir_okay=False), default=None,
                 help="write the run (ArviZ DataTree) to this file"),
    click.option("--nonprivate-diagnostics", "nonprivate", is_flag=True, default=False, help=NONPRIVATE_HELP),
]


def with_options(options):
    def deco(f):
        for opt in reversed(options):
            f = opt(f)
        return f
    return deco


@main.command()
@with_options(_common)
def demo(eps, delta, pure, route, radius, horizon, chains, kernel, friction, lam_rel, ledger,
         dataset_id, budget, seed, key_impl, progress, out, nonprivate):
    """Private Bayesian logistic regression on the embedded UCI Adult data."""
    from . import datasets, losses

    data = datasets.load_adult()
    click.echo(f"data: {data.attribution}")
    click.echo(f"  train {data.X_train.shape[0]} rows (private), test {data.X_test.shape[0]} rows "
               f"(public evaluation), {data.X_train.shape[1]} features")
    if nonprivate:
        click.echo(f"  {NONPRIVATE_BANNER}: rows with missing values dropped: {data.dropped_missing}; "
                   f"rows clipped to norm {data.clip_train.row_norm:g}: train {data.clip_train.n_clipped}, "
                   f"test {data.clip_test.n_clipped}")
    click.echo("")
    _run_and_report(losses.logistic(row_norm=1.0), data.X_train, data.y_train, command="demo", eps=eps,
                    delta=delta, pure=pure, route=route, horizon=horizon, chains=chains,
                    kernel=kernel, friction=friction, lam_rel=lam_rel, radius=radius, seed=seed,
                    key_impl=key_impl, progress=progress, ledger=ledger, dataset_id=dataset_id,
                    budget=budget, X_test=data.X_test, y_test=data.y_test, out=out, nonprivate=nonprivate)


@main.command()
@click.argument("csv_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--target", required=True, help="name of the label column")
@click.option("--loss", "loss_name", type=click.Choice(["logistic", "huber"]), default="logistic",
              show_default=True)
@click.option("--row-norm", type=float, default=1.0, show_default=True,
              help="rows are clipped to this l2 norm (> 0)")
@click.option("--huber-threshold", type=float, default=1.0, show_default=True)
@click.option("--test-csv", type=click.Path(exists=True, dir_okay=False), default=None,
              help="held-out public CSV; its columns are matched to the training file by name")
@with_options(_common)
def sample(csv_file, target, loss_name, row_norm, huber_threshold, test_csv, eps, delta, pure,
           route, radius, horizon, chains, kernel, friction, lam_rel, ledger, dataset_id, budget,
           seed, key_impl, progress, out, nonprivate):
    """Private draws for a numeric CSV (features must already be on a public scale)."""
    from . import datasets, losses

    loss = (losses.logistic(row_norm=row_norm) if loss_name == "logistic"
            else losses.huber(threshold=huber_threshold, row_norm=row_norm))
    X, y, names = datasets.load_csv(csv_file, target)
    Xt = yt = None
    if test_csv:  # read and matched by name before anything is charged
        Xt, yt, _ = datasets.load_csv(test_csv, target, columns=names)
        Xt, _ = datasets.clip_rows(Xt, row_norm)
    Xc, rep = datasets.clip_rows(X, row_norm)
    click.echo(f"{csv_file}: {X.shape[0]} rows, {X.shape[1]} features; rows are clipped to norm {row_norm:g}")
    if nonprivate:
        click.echo(f"  {NONPRIVATE_BANNER}: rows clipped: {rep.n_clipped}")
    _run_and_report(loss, Xc, y, command="sample", eps=eps, delta=delta, pure=pure, route=route,
                    horizon=horizon, chains=chains, kernel=kernel, friction=friction, lam_rel=lam_rel,
                    radius=radius, seed=seed, key_impl=key_impl, progress=progress, ledger=ledger,
                    dataset_id=dataset_id, budget=budget, X_test=Xt, y_test=yt, out=out,
                    nonprivate=nonprivate)


@main.command()
@click.argument("run_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--plots", type=click.Path(file_okay=False), default=None,
              help="directory for PNG plots (default: next to RUN_FILE)")
def report(run_file, plots):
    """Print the summary, mixing checks and privacy report of a saved run; write plots."""
    from .diagnostics import report_from_file

    click.echo(report_from_file(run_file, plots))


@main.command()
@click.argument("ledger_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--dataset-id", default="default", show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="write a spent-vs-remaining PNG here")
def budget(ledger_file, dataset_id, plot):
    """Spent and remaining privacy budget of a dataset in a ledger (composed by the accountant)."""
    from .privacy.ledger import Ledger

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
        from .plots import plot_budget

        prev, inc = 0.0, []
        for r in recs:  # increments of the accountant's composed total, so bars sum to it
            inc.append({"run": r["run"], "eps": max(r["eps_cumulative"] - prev, 0.0)})
            prev = r["eps_cumulative"]
        click.echo(f"wrote {plot_budget(inc, sp['eps_budget'], plot)}")


from .rashomon_cli import rashomon_command  # noqa: E402

main.add_command(rashomon_command)


def run() -> None:
    """Console entry point: any error prints one line, never a traceback (set
    ``DP_INFER_DEBUG=1`` to see the traceback of an unexpected error)."""
    from .privacy.ledger import BudgetExceededError

    try:
        main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except getattr(click.exceptions, "NoArgsIsHelpError", ()) as e:  # bare `dp-infer`: the help
        click.echo(e.format_message())
        sys.exit(e.exit_code)
    except click.UsageError as e:  # one line: the message and where to look
        hint = f" (see {e.ctx.command_path} --help)" if e.ctx is not None else ""
        click.echo(f"error: {e.format_message()}{hint}", err=True)
        sys.exit(e.exit_code)
    except click.ClickException as e:
        click.echo(f"error: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    except (ValueError, BudgetExceededError) as e:
        click.echo(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", err=True)
        sys.exit(2)
    except Exception as e:  # noqa: BLE001 - no traceback reaches a CLI user
        if os.environ.get("DP_INFER_DEBUG"):
            raise
        click.echo(f"error: unexpected {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
                   "(set DP_INFER_DEBUG=1 for the traceback)", err=True)
        sys.exit(3)


if __name__ == "__main__":  # pragma: no cover
    run()
