"""``dp-infer rashomon``: private Rashomon-set sampling of a logistic model plus multiplicity
measures on an evaluation set. Register with ``main.add_command(rashomon_command)`` in cli.py.
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


@click.command("rashomon")
@click.argument("csv_file", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--adult", is_flag=True, help="use the embedded UCI Adult data (train = private, test = evaluation)")
@click.option("--target", default=None, help="name of the 0/1 label column (CSV input)")
@click.option("--test-csv", type=click.Path(exists=True, dir_okay=False), default=None,
              help="evaluation CSV (public or held out); default: hold out 30% of CSV_FILE")
@click.option("--row-norm", type=float, default=1.0, show_default=True,
              help="rows are clipped to this l2 norm (the count is reported)")
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
@click.option("--seed", type=int, default=0, show_default=True)
def rashomon_command(csv_file, adult, target, test_csv, row_norm, l2, psi, mode, beta, eps, delta,
                     horizon, chains, draws, seed):
    """Private draws from the Rashomon-thresholded Gibbs law and Rashomon measures."""
    from . import datasets, losses
    from .rashomon import sample_rashomon

    if adult == (csv_file is not None):
        raise ValueError("give exactly one of CSV_FILE or --adult")
    if adult:
        data = datasets.load_adult(row_norm=row_norm)
        X, y, Xe, ye = data.X_train, data.y_train, data.X_test, data.y_test
        click.echo(f"data: UCI Adult; train {X.shape[0]} rows (private), test {Xe.shape[0]} rows "
                   f"(evaluation); clipped rows: train {data.clip_train.n_clipped}")
    else:
        if target is None:
            raise ValueError("--target is required with CSV_FILE")
        X, y, _ = datasets.load_csv(csv_file, target)
        X, rep = datasets.clip_rows(X, row_norm)
        if test_csv:
            Xe, ye, _ = datasets.load_csv(test_csv, target)
            Xe, _ = datasets.clip_rows(Xe, row_norm)
        else:
            idx = np.random.default_rng(seed).permutation(X.shape[0])
            k = int(0.7 * X.shape[0])
            X, y, Xe, ye = X[idx[:k]], y[idx[:k]], X[idx[k:]], y[idx[k:]]
            click.echo("evaluation set: 30% held out from CSV_FILE (not used for sampling)")
        click.echo(f"{csv_file}: {X.shape[0]} training rows, {X.shape[1]} features; rows clipped to "
                   f"norm {row_norm:g}: {rep.n_clipped}")
    loss = losses.logistic(row_norm=row_norm, l2=l2)
    t0 = time.time()
    kw = dict(mode=mode, horizon=horizon, num_chains=chains, num_draws=draws, seed=seed)
    if mode == "path":
        kw.update(eps=eps, delta=delta)
    else:
        kw.update(beta=beta)
    res = sample_rashomon(loss, X, y, psi, **kw)
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
    m = res.measures(Xe, ye, features=[])
    click.echo("")
    click.echo(f"Rashomon measures on the evaluation set ({Xe.shape[0]} rows; reference = mean of draws)")
    click.echo(f"  draws used                {m['num_draws']}")
    click.echo(f"  ambiguity (flip rate)     {m['ambiguity']['flip_rate']:.4f}")
    click.echo(f"  discrepancy               {m['discrepancy']:.4f}")
    click.echo(f"  sign-stable coefficients  {m['sign_stability']['num_stable']} of {X.shape[1]}")
    click.echo(f"  mean prediction range     {float(m['prediction_ranges']['width'].mean()):.4f}")
    cr = m["coefficient_ranges"]
    click.echo("  coefficient ranges (low, high):")
    for j in range(min(X.shape[1], 30)):
        click.echo(f"    [{j:3d}] {cr['low'][j]: .4f} {cr['high'][j]: .4f}")
    click.echo(f"sampling time: {time.time() - t0:.1f} s")
