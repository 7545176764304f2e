"""``dp-infer rashomon``: private Rashomon-set sampling of a logistic model plus multiplicity
measures on a PUBLIC evaluation set. Registered by :mod:`dp_infer.cli`.

Every option is checked before the data are read; the run is charged to the ledger (if given)
before anything is computed on the private rows. Measures that read rows are computed only on
rows declared public (``--eval-csv``, or the public Adult test file with ``--adult``).
"""

from __future__ import annotations

import time

import click
import numpy as np

__all__ = ["rashomon_command"]


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, np.ndarray):
        return np.array2string(v, precision=3, max_line_width=110)
    return str(v)


def _check_options(psi, mode, beta, eps, delta, horizon, chains, draws, row_norm, l2):
    from .._validation import check_delta, check_nonnegative, check_positive, check_target_epsilon

    check_nonnegative("--psi", psi)
    check_positive("--horizon", horizon)
    check_positive("--row-norm", row_norm)
    check_nonnegative("--l2", l2)
    if chains < 1 or draws < 1:
        raise ValueError("--chains and --draws must be integers >= 1")
    if mode == "path":
        check_target_epsilon(eps, "--eps")
        check_delta(delta, "--delta")
        if beta is not None:
            raise ValueError("--beta applies to --mode nonprivate only (beta is calibrated in mode path)")
    elif beta is None:
        raise ValueError("--beta is required with --mode nonprivate (a value in (0, inf))")
    else:
        check_positive("--beta", beta)


@click.command("rashomon")
@click.argument("csv_file", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--adult", is_flag=True, help="use the embedded UCI Adult data (train = private, test = public evaluation)")
@click.option("--target", default=None, help="name of the 0/1 label column (CSV input)")
@click.option("--eval-csv", type=click.Path(exists=True, dir_okay=False), default=None,
              help="PUBLIC evaluation CSV (columns matched by name) for the row-wise measures")
@click.option("--row-norm", type=float, default=1.0, show_default=True,
              help="rows are clipped to this l2 norm")
@click.option("--l2", type=float, default=0.01, show_default=True,
              help="L2 regulariser in the loss (m > 0 certifies L*; needed for the sqrt(2 M psi) bound)")
@click.option("--psi", type=float, default=0.01, show_default=True, help="Rashomon threshold psi >= 0")
@click.option("--mode", type=click.Choice(["path", "nonprivate"]), default="path", show_default=True)
@click.option("--beta", type=float, default=None, help="inverse temperature (mode nonprivate only)")
@click.option("--eps", type=float, default=1.0, show_default=True)
@click.option("--delta", type=float, default=1e-5, show_default=True)
@click.option("--horizon", type=float, default=1.0, show_default=True)
@click.option("--chains", type=int, default=2, show_default=True)
@click.option("--draws", type=int, default=500, show_default=True)
@click.option("--ledger", type=click.Path(dir_okay=False), default=None,
              help="SQLite privacy ledger: the run is charged before sampling, refused if over budget")
@click.option("--dataset-id", default="default", show_default=True, help="dataset name in the ledger")
@click.option("--budget", type=(float, float), default=None,
              help="register the dataset's (eps, delta) budget in the ledger")
@click.option("--reproducible-seed", "seed", type=click.IntRange(min=0), default=None,
              help="make the noise reproducible from this integer (privacy then rests on keeping it secret)")
@click.option("--nonprivate-diagnostics", "nonprivate", is_flag=True, default=False,
              help="also print NON-PRIVATE counts computed on the private data (clipped rows)")
def rashomon_command(csv_file, adult, target, eval_csv, row_norm, l2, psi, mode, beta, eps, delta,
                     horizon, chains, draws, ledger, dataset_id, budget, seed, nonprivate):
    """Private draws from the Rashomon-thresholded Gibbs law and Rashomon measures."""
    from .. import datasets, losses
    from ..cli.common import NONPRIVATE_BANNER, charge_ledger, run_label
    from .sampler import sample_rashomon

    if adult == (csv_file is not None):
        raise ValueError("give exactly one of CSV_FILE or --adult")
    if csv_file is not None and target is None:
        raise ValueError("--target is required with CSV_FILE")
    _check_options(psi, mode, beta, eps, delta, horizon, chains, draws, row_norm, l2)
    if mode == "nonprivate" and ledger is not None:
        raise ValueError("--ledger applies to private runs only (mode nonprivate spends no budget and "
                         "gives no guarantee)")
    if adult:
        data = datasets.load_adult(row_norm=row_norm)
        X, y, Xe, ye = data.X_train, data.y_train, data.X_test, data.y_test
        click.echo(f"data: UCI Adult; train {X.shape[0]} rows (private), test {Xe.shape[0]} rows "
                   "(public evaluation)")
        n_clipped = data.clip_train.n_clipped
    else:
        X, y, names = datasets.load_csv(csv_file, target)
        Xe = ye = None
        if eval_csv:
            Xe, ye, _ = datasets.load_csv(eval_csv, target, columns=names)
            Xe, _ = datasets.clip_rows(Xe, row_norm)
        X, rep = datasets.clip_rows(X, row_norm)
        n_clipped = rep.n_clipped
        click.echo(f"{csv_file}: {X.shape[0]} training rows (private), {X.shape[1]} features; rows are "
                   f"clipped to norm {row_norm:g}")
    if nonprivate:
        click.echo(f"  {NONPRIVATE_BANNER}: private rows clipped: {n_clipped}")
    loss = losses.logistic(row_norm=row_norm, l2=l2)
    kw = dict(mode=mode, horizon=horizon, num_chains=chains, num_draws=draws, seed=seed)
    if mode == "path":
        kw.update(eps=eps, delta=delta)
        from .plan import plan_rashomon

        # the same data-independent plan sample_rashomon makes, charged before the data are used
        rp = plan_rashomon(loss, X.shape[0], loss.num_params(X.shape[1]), psi, eps=eps, delta=delta,
                           horizon=horizon, num_chains=chains, num_draws=draws)
        led, receipt = charge_ledger(ledger, dataset_id, budget, rp.event,
                                     run_label("rashomon", rp.sampling_plan.route))
    else:
        kw.update(beta=beta)
        led = receipt = None
    t0 = time.time()
    res = sample_rashomon(loss, X, y, psi, **kw)
    if receipt is not None:
        led.complete(receipt)
    click.echo("")
    click.echo("privacy report" if res.is_private else "report (NON-PRIVATE reference run)")
    rep = dict(res.report)
    for k in ("guarantee", "route", "eps", "delta", "eps_spent", "mu", "beta", "psi",
              "thresholded_sensitivity", "horizon", "step_size", "num_steps", "num_chains", "thinning"):
        if k in rep:
            click.echo(f"  {k:24s} {_fmt(rep[k])}")
    for a in rep.get("assumptions", []):
        click.echo(f"  assumption: {a}")
    for note in rep.get("notes", []):
        click.echo(f"  note: {note}")
    click.echo("")
    th = res.flat_draws()
    from .measures import coefficient_ranges, sign_stability

    click.echo(f"Rashomon measures of the released draws ({th.shape[0]} draws; post-processing)")
    click.echo(f"  sign-stable coefficients  {sign_stability(th)['num_stable']} of {th.shape[1]}")
    if Xe is not None:
        m = res.measures(Xe, ye, features=[])
        click.echo(f"on the public evaluation set ({Xe.shape[0]} rows; reference = mean of draws):")
        click.echo(f"  ambiguity (flip rate)     {m['ambiguity']['flip_rate']:.4f}")
        click.echo(f"  discrepancy               {m['discrepancy']:.4f}")
        click.echo(f"  mean prediction range     {float(m['prediction_ranges']['width'].mean()):.4f}")
    else:
        click.echo("  (row-wise measures need a public evaluation set: pass --eval-csv; rows of the "
                   "private file would be a further, uncharged release)")
    cr = coefficient_ranges(th)
    click.echo("  coefficient ranges (low, high):")
    for j in range(min(th.shape[1], 30)):
        click.echo(f"    [{j:3d}] {cr['low'][j]: .4f} {cr['high'][j]: .4f}")
    click.echo(f"sampling time: {time.time() - t0:.1f} s")
