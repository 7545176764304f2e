"""``dp-infer rashomon``: private Rashomon-set sampling of a linear model plus the Rashomon
measures on a PUBLIC evaluation set; a text report and, with ``--json``, a JSON file.
Registered by :mod:`dp_infer.cli`.

Every option is checked before the data are read; the run is charged to the ledger (if given)
before anything is computed on the private rows. Measures that read rows are computed only on
rows declared public (``--eval-csv``, or the public Adult test file with ``--adult``); nothing
computed from the private rows other than the released draws is printed or written (clipped-row
counts only with ``--nonprivate-diagnostics``, labelled).
"""

from __future__ import annotations

import json
import os
import time

import click
import numpy as np

from ..losses.registry import cli_losses
from ..rashomon.models import KINDS

__all__ = ["rashomon_command"]

#: ``--loss NAME``: the Rashomon model classes (:data:`dp_infer.rashomon.models.KINDS`) by their losses'
#: command-line names (the behaviours' ``cli_name``, :mod:`dp_infer.losses.behaviour`)
LOSSES = {name: b for name, b in cli_losses().items() if b.name in KINDS}
#: Above this many loss evaluations the exact pairwise swap gives way to random permutations.
EXACT_SWAP_BUDGET = 300_000_000


def _check_options(psi, mode, beta, eps, delta, horizon, chains, draws, row_norm, l2, threshold_width,
                   mcr_permutations, json_path):
    from .._validation import check_delta, check_nonnegative, check_positive, check_target_epsilon

    check_nonnegative("--psi", psi)
    check_positive("--horizon", horizon)
    check_positive("--row-norm", row_norm)
    check_nonnegative("--l2", l2)
    if threshold_width is not None:
        check_positive("--threshold-width", threshold_width)
    if chains < 1 or draws < 1:
        raise ValueError("--chains and --draws must be integers >= 1")
    if mcr_permutations is not None and mcr_permutations < 2:
        raise ValueError("--mcr-permutations must be an integer >= 2 (omit it for the exact swap when affordable)")
    if mode == "path":
        check_target_epsilon(eps, "--eps")
        check_delta(delta, "--delta")
        if beta is not None:
            raise ValueError("--beta applies to --mode nonprivate only (beta is calibrated in mode path)")
    elif beta is None:
        raise ValueError("--beta is required with --mode nonprivate (a value in (0, inf))")
    else:
        check_positive("--beta", beta)
    if json_path is not None:
        parent = os.path.dirname(os.path.abspath(json_path))
        if not os.path.isdir(parent):
            raise ValueError(f"--json: directory {parent} does not exist")


def _groups(names, intercept_in_schema):
    """Reliance groups: one per numeric column, one per categorical variable ('var=level' columns
    swapped jointly); a constant intercept column is never swapped."""
    groups, seen = [], {}
    for j, nm in enumerate(names):
        if intercept_in_schema and nm == "intercept":
            continue
        base = nm.split("=", 1)[0] if "=" in nm else None
        if base is None:
            groups.append([j])
        elif base in seen:
            groups[seen[base]].append(j)
        else:
            seen[base] = len(groups)
            groups.append([j])
    return groups


def _swap_cost(X, groups, num_draws):
    return sum(X.shape[0] * np.unique(X[:, g], axis=0).shape[0] for g in groups) * num_draws


@click.command("rashomon")
@click.argument("csv_file", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--adult", is_flag=True, help="use the embedded UCI Adult data (train = private, test = public evaluation)")
@click.option("--target", default=None, help="name of the label column (CSV input)")
@click.option("--eval-csv", type=click.Path(exists=True, dir_okay=False), default=None,
              help="PUBLIC evaluation CSV (columns matched by name) for the row-wise measures")
@click.option("--loss", "loss_name", type=click.Choice(sorted(LOSSES)), default="logistic", show_default=True,
              help="model class: logistic or smoothed-hinge (0/1 labels), squared (needs --label-bound, --radius)")
@click.option("--intercept/--no-intercept", default=None,
              help="append an intercept column (default: yes for a CSV; the Adult feature map has one)")
@click.option("--label-bound", type=float, default=None, help="bound on |y| (--loss squared)")
@click.option("--radius", type=float, default=None,
              help="L2-ball domain radius for theta (needed by --loss squared)")
@click.option("--hinge-smoothing", type=float, default=1.0, show_default=True, help="smoothed hinge width")
@click.option("--row-norm", type=float, default=1.0, show_default=True,
              help="rows are clipped to this l2 norm (before the intercept column)")
@click.option("--l2", type=float, default=0.01, show_default=True,
              help="L2 regulariser in the loss (m > 0 certifies L*; needed for the sqrt(2 M psi) bound)")
@click.option("--psi", type=float, default=0.01, show_default=True, help="Rashomon threshold psi >= 0")
@click.option("--threshold-width", type=float, default=None,
              help="declared loss width of the smoothed threshold (default psi/20)")
@click.option("--mode", type=click.Choice(["path", "nonprivate"]), default="path", show_default=True)
@click.option("--beta", type=float, default=None, help="inverse temperature (mode nonprivate only)")
@click.option("--eps", type=float, default=1.0, show_default=True)
@click.option("--delta", type=float, default=1e-5, show_default=True)
@click.option("--horizon", type=float, default=1.0, show_default=True)
@click.option("--chains", type=int, default=2, show_default=True)
@click.option("--draws", type=int, default=500, show_default=True)
@click.option("--mcr-permutations", type=int, default=None,
              help="random permutations for model class reliance (default: the exact pairwise swap, or 10 "
                   "permutations when the exact swap is too costly)")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="write the report (privacy, measures, per-row ranges on the public rows) as JSON")
@click.option("--ledger", type=click.Path(dir_okay=False), default=None,
              help="SQLite privacy ledger: the run is charged before sampling, refused if over budget")
@click.option("--dataset-id", default="default", show_default=True, help="dataset name in the ledger")
@click.option("--budget", type=(float, float), default=None,
              help="register the dataset's (eps, delta) budget in the ledger")
@click.option("--reproducible-seed", "seed", type=click.IntRange(min=0), default=None,
              help="make the noise reproducible from this integer (privacy then rests on keeping it secret)")
@click.option("--nonprivate-diagnostics", "nonprivate", is_flag=True, default=False,
              help="also print NON-PRIVATE counts computed on the private data (clipped rows)")
def rashomon_command(csv_file, adult, target, eval_csv, loss_name, intercept, label_bound, radius,
                     hinge_smoothing, row_norm, l2, psi, threshold_width, mode, beta, eps, delta, horizon,
                     chains, draws, mcr_permutations, json_path, ledger, dataset_id, budget, seed, nonprivate):
    """Private draws from the Rashomon-thresholded Gibbs law and the Rashomon measures."""
    from .. import datasets

    from .common import NONPRIVATE_BANNER, cli_ledger, preflight
    from ..domains import L2Ball
    from ..rashomon.models import linear_model
    from ..infer.driver import Hooks
    from ..rashomon.sampler import sample_rashomon

    preflight(out=json_path, out_param="--json", out_suffixes=(".json",), seed=seed, dataset_id=dataset_id,
              ledger=ledger, budget=budget)
    if adult == (csv_file is not None):
        raise ValueError("give exactly one of CSV_FILE or --adult")
    if csv_file is not None and target is None:
        raise ValueError("--target is required with CSV_FILE")
    if adult and intercept:
        raise ValueError("--intercept: the Adult feature map already holds an intercept column")
    intercept = (not adult) if intercept is None else intercept
    _check_options(psi, mode, beta, eps, delta, horizon, chains, draws, row_norm, l2, threshold_width,
                   mcr_permutations, json_path)
    if mode == "nonprivate" and ledger is not None:
        raise ValueError("--ledger applies to private runs only (mode nonprivate spends no budget and "
                         "gives no guarantee)")
    if radius is not None and radius <= 0:
        raise ValueError(f"--radius must lie in (0, inf), got {radius!r}")
    kind = LOSSES[loss_name].name
    regression = LOSSES[loss_name].point_prediction == "value"  # squared: bounded only on a bounded domain
    if regression and (radius is None or label_bound is None):
        raise ValueError(f"--loss {loss_name} needs --label-bound and --radius (its gradient is bounded only "
                         "on a bounded domain)")
    if adult and regression:
        raise ValueError(f"--loss {loss_name} is for regression; the Adult labels are 0/1")
    # the model class without its domain (dimension unknown yet) validates every model option now
    linear_model(kind, row_norm=row_norm, l2=l2, intercept=intercept, label_bound=label_bound,
                 hinge_smoothing=hinge_smoothing,
                 domain=L2Ball(1, radius) if regression else None)

    if adult:
        data = datasets.load_adult(row_norm=row_norm)
        X, y, Xe, ye, names = data.X_train, data.y_train, data.X_test, data.y_test, data.feature_names
        click.echo(f"data: UCI Adult; train {X.shape[0]} rows (private), test {Xe.shape[0]} rows "
                   "(public evaluation); the feature map holds the intercept")
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
                   f"clipped to norm {row_norm:g}" + ("; an intercept column is appended" if intercept else ""))
    if nonprivate:
        click.echo(f"  {NONPRIVATE_BANNER}: private rows clipped: {n_clipped}")
    dim = X.shape[1] + int(intercept)
    domain = None if radius is None else L2Ball(dim, radius)
    model = linear_model(kind, row_norm=row_norm, l2=l2, intercept=intercept,
                         label_bound=label_bound, hinge_smoothing=hinge_smoothing, domain=domain)
    kw = dict(mode=mode, horizon=horizon, num_chains=chains, num_draws=draws, seed=seed,
              threshold_width=threshold_width, feature_names=names)
    clock = {}

    def finish(res, keeper, receipt):
        if mode != "path":  # not a private release: nothing to keep
            keeper.run = None
        else:
            keeper.step = "the Rashomon measures"
        clock["sample"] = time.time() - clock["t0"]
        measures = res.measures()
        if Xe is not None:
            groups = _groups(res.feature_names[:X.shape[1]], intercept_in_schema=adult)
            perms = mcr_permutations
            if perms is None and _swap_cost(Xe, groups, res.flat_draws().shape[0]) > EXACT_SWAP_BUDGET:
                perms = 10
            measures = res.measures(Xe, ye, public=True, features=groups, num_permutations=perms)
        if json_path is not None:  # written first: the draws are paid for
            keeper.step = "writing --json"
            with open(json_path, "w") as f:
                json.dump(res.to_dict(measures), f, indent=1)
        click.echo("")
        click.echo(str(res.report(measures)))
        if Xe is None:
            click.echo("(row-wise measures need a public evaluation set: pass --eval-csv; rows of the "
                       "private file would be a further, uncharged release)")
        if json_path is not None:
            click.echo(f"wrote {json_path}")

    if mode == "path":
        kw.update(eps=eps, delta=delta)
        model.check_labels(y, X.shape[0], "y")  # the labels too, before the charge (as the Python API)
        # the data-independent plan sample_rashomon makes is charged there, before the data are used
        led, on_charge = cli_ledger(ledger, dataset_id, budget)
        kw.update(ledger=led, dataset_id=dataset_id, run_label="dp-infer rashomon")
    else:
        kw.update(beta=beta)
        on_charge = None
    clock["t0"] = time.time()
    sample_rashomon(model, X, y, psi, hooks=Hooks(on_charge=on_charge, finish=finish, out=json_path,
                                                  step="the Rashomon measures"), **kw)
    t_sample = clock["sample"]
    click.echo(f"sampling time: {t_sample:.1f} s")
