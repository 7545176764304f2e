"""``dp-infer demo`` and ``dp-infer sample``: plan, charge, sample, write, report.

Order of work: check every input (options, files, test columns by name) -> plan (data
independent) -> charge the ledger -> sample -> write ``--out`` -> print. A bad input is an
error before anything is charged; once the run is charged its draws are written whatever
happens afterwards.
"""

from __future__ import annotations

import time

import click
import numpy as np

from ..routes.posterior import DEFAULT_POSTERIOR_KERNEL
from .common import (
    NONPRIVATE_BANNER, COMMON_OPTIONS, mixing_block, print_report, cli_ledger, echo_nonprivate_accuracy,
    mode_option, preflight, with_options,
)
from .posterior import check_clip_radius, check_mode_options, run_and_report_posterior

from .demo import DEFAULT_INTERVAL_CURVATURE, DEFAULT_PLOTS, DEMO_PRIOR_PRECISION, FULL_ESS, QUICK_ESS, run_demo_posterior  # noqa: F401


from ..infer.preflight import HORIZON_ROUTES  # the estimate routes that run the --horizon asked for
from ..losses.registry import cli_losses

#: ``dp-infer sample --loss NAME``: the built-in losses that build themselves from the command's options
#: (their behaviours' ``cli_name`` and ``from_cli``, :mod:`dp_infer.losses.behaviour`)
SAMPLE_LOSSES = {name: b for name, b in cli_losses().items() if b.from_cli is not None}


def check_horizon_request(horizon_asked, route, loss) -> None:
    """An explicit --horizon that no route would run is refused before anything is charged (issue 40:
    it was replaced silently); with --route auto the replacement is said in one line after planning."""
    if horizon_asked is None:
        return
    if loss.constants.smoothness is None:
        raise ValueError(f"--horizon: the {loss.name} loss has no smoothness and runs the proximal sampler, which "
                         "plans its own steps; --horizon applies to the Langevin routes")
    if route not in ("auto",) + HORIZON_ROUTES:
        raise ValueError(f"--horizon: route {route!r} sets its own horizon from its target; --horizon applies to "
                         f"--route auto, {' or '.join(HORIZON_ROUTES)}")


def _run_and_report(loss, X, y, *, command, eps, delta, pure, route, horizon, chains, kernel,
                    friction, lam_rel, radius, seed, key_impl, progress, ledger, dataset_id, budget,
                    X_test=None, y_test=None, out=None, nonprivate=False, feature_names=None,
                    extra_attrs=None, horizon_asked=None):
    from .._validation import check_delta
    from ..domains import L2Ball
    from ..infer.driver import Hooks, execute
    from ..infer.fit import ESTIMATE_ROUTE, estimate_public

    check_horizon_request(horizon_asked, route, loss)
    if loss.constants.smoothness is None:  # hinge / quantile: the proximal route (seed 002)
        from .proximal import run_and_report_proximal

        return run_and_report_proximal(loss, X, y, command=command, eps=eps, delta=delta, pure=pure, route=route,
                                       chains=chains, lam_rel=lam_rel, radius=radius, seed=seed, key_impl=key_impl,
                                       ledger=ledger, dataset_id=dataset_id, budget=budget, X_test=X_test,
                                       y_test=y_test, out=out, nonprivate=nonprivate)
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
    public = estimate_public(loss, X.shape[0], dim, eps=eps, delta=None if pure else delta, route=route,
                             domain=domain, horizon=horizon, num_chains=chains, kernel=kernel, friction=friction,
                             lam_rel=lam_rel, sample_options=dict(seed=seed, key_impl=key_impl, progress_bar=progress))
    clock = {}

    def planned(plan):
        click.echo("Routes considered (data independent: n, dimension and the loss's declared constants)")
        click.echo(plan.explain())
        if horizon_asked is not None and plan.route not in HORIZON_ROUTES:  # said before the charge
            click.echo(f"note: --horizon {horizon_asked:g} was not used: route 'auto' chose {plan.route}, which sets "
                       f"its own horizon ({plan.horizon:.4g}); --route trajectory runs the horizon asked for")
        click.echo("")
        clock["t0"] = time.time()

    def finish(run, keeper, receipt):
        clock["elapsed"] = time.time() - clock["t0"]
        keeper.step = "building the run file"
        report_estimate_run(run, loss, X, y, X_test=X_test, y_test=y_test, out=out, nonprivate=nonprivate,
                            feature_names=feature_names, extra_attrs=extra_attrs, keeper=keeper)

    led, on_charge = cli_ledger(ledger, dataset_id, budget)
    run = execute(ESTIMATE_ROUTE, public, (loss, X, y), ledger=led, dataset_id=dataset_id, prefix="--",
                  label=lambda plan: f"dp-infer {command} {plan.route}", hooks=Hooks(planned=planned, on_charge=on_charge, finish=finish, out=out,
                              step="building the run file"))
    click.echo(f"sampling time: {clock['elapsed']:.1f} s")
    return run


def report_estimate_run(run, loss, X, y, *, X_test, y_test, out, nonprivate, feature_names, extra_attrs, keeper):
    """After the charge: label the draws, write ``--out`` first (the draws are paid for), print the
    privacy report, the mixing diagnostics and the test accuracy."""
    from ..infer import nonprivate as np_ref

    plan = run.plan
    if feature_names is not None:
        run.feature_names = list(feature_names)
    dt = run.to_datatree()
    dt.attrs.update(extra_attrs or {})  # public facts stored in the run (e.g. the schema)
    if out is not None:  # written first: the draws are paid for
        from ..diagnostics import save

        keeper.step = "writing --out"
        path = save(dt, out)
        click.echo(f"wrote {path} (ArviZ DataTree: released draws, diverging, privacy report)")
    keeper.step = "the privacy report"
    report = run.report()
    print_report(report)
    if plan.release == "trajectory":
        keeper.step = "the mixing diagnostics"
        click.echo("")
        click.echo(f"ArviZ diagnostics of the released draws after the first {plan.burn_in} per chain "
                   "(post-processing: free; the same draws and checks as dp-infer report on --out)")
        mixing_block(dt, report)
    else:
        click.echo(f"released: {plan.release} (too few draws for R-hat/ESS; more chains cost privacy)")
    if X_test is not None and loss.behaviour.point_prediction == "probability":
        keeper.step = "the predictions on the test data"
        acc_priv = np_ref.accuracy(run.estimate(), X_test, y_test)
        click.echo("")
        guarantee = (f"({report['eps_spent']:.3g}, {plan.delta:g})-DP" if plan.delta > 0
                     else f"pure {report['eps_spent']:.3g}-DP")
        click.echo(f"route: {plan.route}; test accuracy of the released estimate on the public test "
                   f"data, {guarantee}: {acc_priv:.4f}")
        if nonprivate:
            echo_nonprivate_accuracy(loss, X, y, X_test, y_test)



@click.command()
@mode_option("posterior")
@click.option("--full", is_flag=True, default=False,
              help=f"posterior mode: plan for {FULL_ESS} effective draws (every R-hat <= 1.01) and print the full "
                   f"privacy report; default: a quick plan for {QUICK_ESS} (about a minute on 2 cores)")
@click.option("--plots", type=click.Path(file_okay=False), default=None,
              help=f"posterior mode: folder for the rank, forest and privacy-utility plots (default ./{DEFAULT_PLOTS}/)")
@click.option("--interval-curvature", type=click.Choice(["public", "private"]), default=None,
              help="posterior mode: where the intervals for theta take their curvature: 'public' (default) from the "
                   "public test file's features, releasing only gradients; 'private' released from the rows (noise "
                   "at Adult's n and d: no intervals, the reason said)")
@with_options(COMMON_OPTIONS)
def demo(mode, full, plots, interval_curvature, eps, delta, pure, route, radius, horizon, chains, kernel, friction,
         lam_rel, ess, prior_precision, precond_share, clip_radius, ledger, dataset_id, budget, seed, key_impl,
         progress, out, nonprivate):
    """Private Bayesian logistic regression on the embedded UCI Adult data.

    Default (--mode posterior): 4 chains of preconditioned Langevin on N(0, 10^2 I) x exp(-beta L)
    on the Adult files read through the shipped schema (identifiable coding, sensitivity over the
    rows the schema admits), planned for 400 effective draws (quick) or 1000 with --full; prints the
    plan and its forecast before sampling, a coefficient table named by feature, and writes plots.
    --mode estimate: the accuracy-first plan on the embedded pipeline's features."""
    from .. import datasets, losses

    if mode == "estimate" and (full or plots is not None):
        raise ValueError("--full and --plots apply to --mode posterior only")
    if mode == "estimate" and interval_curvature is not None:
        raise ValueError("--interval-curvature applies to --mode posterior only")

    preflight(out=out, seed=seed, key_impl=key_impl, dataset_id=dataset_id, ledger=ledger, budget=budget)
    horizon_asked = horizon
    horizon, chains = check_mode_options(mode, eps=eps, delta=delta, pure=pure, route=route, radius=radius,
                                         horizon=horizon, chains=chains, lam_rel=lam_rel, ess=ess, prior_precision=prior_precision,
                                         precond_share=precond_share)
    clip_radius = check_clip_radius(mode, clip_radius)
    if mode == "posterior":
        from ..schema.adult import load_adult_raw

        # the posterior mode's defaults: gradients clipped in an adapted metric, kinetic kernel
        clip_radius = "auto" if clip_radius is None else (None if clip_radius == "none" else clip_radius)
        kernel = DEFAULT_POSTERIOR_KERNEL if kernel is None else kernel

        a = load_adult_raw()
        rows = a.feature_map.admissible_rows()
        click.echo("data: UCI Adult (Becker & Kohavi 1996, https://doi.org/10.24432/C5XW20, CC BY 4.0), raw files "
                   "read through the shipped schema dp_infer/data/adult/schema.yaml")
        interval_curvature = interval_curvature or DEFAULT_INTERVAL_CURVATURE
        test_use = ("public evaluation; their features, declared public, also give the intervals' curvature"
                    if interval_curvature == "public" else "public evaluation")
        click.echo(f"  train {a.X_train.shape[0]} rows (private), test {a.X_test.shape[0]} rows ({test_use}), "
                   f"{a.X_train.shape[1]} features (intercept, 8 numerics on declared ranges, categorical groups "
                   f"coded against a reference level); every row lies in the schema's admissible set, norm <= "
                   f"{rows.max_norm():g}")
        click.echo("")
        run_demo_posterior(a, rows, full=full, eps=eps, delta=delta, chains=chains, kernel=kernel, friction=friction,
                           ess=ess, prior_precision=prior_precision, precond_share=precond_share, seed=seed,
                           key_impl=key_impl, progress=progress, ledger=ledger, dataset_id=dataset_id,
                           budget=budget, out=out, plots=plots, nonprivate=nonprivate, clip_radius=clip_radius,
                           interval_curvature=interval_curvature)
        return
    kernel = "langevin" if kernel is None else kernel
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
                    budget=budget, X_test=data.X_test, y_test=data.y_test, out=out, nonprivate=nonprivate,
                    horizon_asked=horizon_asked)


@click.command()
@click.argument("csv_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--target", default=None, help="name of the label column (with --schema: the schema's target)")
@click.option("--loss", "loss_name", type=click.Choice(list(SAMPLE_LOSSES)),
              default="logistic", show_default=True,
              help="hinge / quantile have no smoothness: they run the proximal sampler")
@click.option("--quantile", "quantile_level", type=float, default=0.5, show_default=True,
              help="quantile level tau in (0, 1) for --loss quantile")
@click.option("--row-norm", type=float, default=1.0, show_default=True,
              help="rows are clipped to this l2 norm (> 0)")
@click.option("--huber-threshold", type=float, default=1.0, show_default=True)
@click.option("--test-csv", type=click.Path(exists=True, dir_okay=False), default=None,
              help="held-out public CSV; its columns are matched to the training file by name")
@click.option("--schema", "schema_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="public schema (YAML/JSON): columns by name, data-independent feature map, stored in the run")
@click.option("--split", type=float, default=None, help="with --schema: hold out this share of the rows")
@click.option("--split-seed", type=click.IntRange(min=0), default=None,
              help="seed of the --split permutation (default: OS entropy)")
@click.option("--interval-curvature", type=click.Choice(["public", "private"]), default=None,
              help="--mode posterior: where the intervals for theta take their curvature: 'public' from the "
                   "--test-csv file's features (declared public; logistic and Poisson), releasing only gradients; "
                   "'private' released from the rows. Default: public when --test-csv is given and the loss allows "
                   "it, else private")
@click.option("--residual-scale", type=float, default=None,
              help="--mode posterior, --loss huber: the residuals' sd you expect (labels' units; a public "
                   "assumption, never read from the rows), so the forecast's interval width counts the scores' "
                   "spread; without it the forecast can be narrow when the residuals are small next to the threshold")
@mode_option("estimate")
@with_options(COMMON_OPTIONS)
def sample(csv_file, target, loss_name, quantile_level, row_norm, huber_threshold, test_csv, schema_file,
           split, split_seed, interval_curvature, residual_scale, mode, eps, delta, pure, route, radius, horizon,
           chains, kernel, friction, lam_rel, ess, prior_precision, precond_share, clip_radius, ledger, dataset_id,
           budget, seed, key_impl, progress, out, nonprivate):
    """Private draws for a CSV: any mixed table with --schema, else numeric features on a public scale.

    --mode posterior plans for --ess effective draws of N(0, I / --prior-precision) x exp(-beta L)
    (with --schema, the sensitivity is taken over the rows the schema admits)."""
    from .. import datasets

    preflight(out=out, seed=seed, key_impl=key_impl, dataset_id=dataset_id, ledger=ledger, budget=budget)
    if interval_curvature is not None and mode != "posterior":
        raise ValueError("--interval-curvature applies to --mode posterior only")
    if residual_scale is not None and (mode != "posterior" or loss_name != "huber"):
        raise ValueError("--residual-scale applies to --mode posterior with --loss huber (the intervals' width "
                         "forecast of a regression loss)")
    if residual_scale is not None and not (np.isfinite(residual_scale) and residual_scale > 0):
        raise ValueError(f"--residual-scale must be a number in (0, inf) (the residuals' sd), got {residual_scale}")
    if interval_curvature == "public" and test_csv is None:
        raise ValueError("--interval-curvature public needs --test-csv (a separate public file whose features give "
                         "the curvature; held-out rows of the private file, --split, are not public)")
    horizon_asked = horizon
    horizon, chains = check_mode_options(mode, eps=eps, delta=delta, pure=pure, route=route, radius=radius,
                                         horizon=horizon, chains=chains, lam_rel=lam_rel, ess=ess, prior_precision=prior_precision,
                                         precond_share=precond_share)
    clip_radius = check_clip_radius(mode, clip_radius)
    clip_radius = "auto" if clip_radius is None else (None if clip_radius == "none" else clip_radius)
    kernel_default = DEFAULT_POSTERIOR_KERNEL if mode == "posterior" else "langevin"
    kernel = kernel_default if kernel is None else kernel
    post = dict(command="sample", eps=eps, delta=delta, chains=chains, kernel=kernel, friction=friction, ess=ess,
                prior_precision=prior_precision, precond_share=precond_share, seed=seed, key_impl=key_impl,
                progress=progress, ledger=ledger, dataset_id=dataset_id, budget=budget, out=out,
                nonprivate=nonprivate, clip_radius=clip_radius, residual_scale=residual_scale)

    if schema_file is not None:  # read, encoded and checked before anything is charged
        from .schema_commands import schema_sample_data

        if not SAMPLE_LOSSES[loss_name].smooth:
            raise ValueError(f"loss: --loss {'/'.join(k for k, b in SAMPLE_LOSSES.items() if not b.smooth)} are not "
                             "available with --schema yet (use a numeric CSV)")
        d = schema_sample_data(csv_file, schema_file, target=target, test_csv=test_csv, split=split,
                               split_seed=split_seed, nonprivate=nonprivate)
        if mode == "posterior":
            run_and_report_posterior(d.make_loss(loss_name, huber_threshold, radius), d.X, d.y, rows=d.rows,
                                     X_test=d.X_test, y_test=d.y_test, feature_names=d.feature_names,
                                     extra_attrs=d.attrs, test_is_public=test_csv is not None,
                                     interval_curvature=interval_curvature, **post)
            return
        _run_and_report(d.make_loss(loss_name, huber_threshold, radius), d.X, d.y, command="sample",
                        eps=eps, delta=delta, pure=pure, route=route, horizon=horizon, chains=chains,
                        kernel=kernel, friction=friction, lam_rel=lam_rel, radius=radius, seed=seed,
                        key_impl=key_impl, progress=progress, ledger=ledger, dataset_id=dataset_id,
                        budget=budget, X_test=d.X_test, y_test=d.y_test, out=out, nonprivate=nonprivate,
                        extra_attrs=d.attrs, feature_names=d.feature_names, horizon_asked=horizon_asked)
        return
    if target is None or split is not None:
        raise ValueError("target: --target is required without --schema (and --split needs --schema)")
    loss = SAMPLE_LOSSES[loss_name].from_cli({"row_norm": row_norm, "huber_threshold": huber_threshold,
                                              "quantile_level": quantile_level})
    X, y, names = datasets.load_csv(csv_file, target)
    Xt = yt = None
    if test_csv:  # read, matched by name and checked (labels too) before anything is charged
        Xt, yt, _ = datasets.load_csv(test_csv, target, columns=names)
        Xt, _ = datasets.clip_rows(Xt, row_norm, names)
        try:
            loss.check_data(Xt, yt)
        except ValueError as e:
            raise ValueError(f"--test-csv: {e}") from None
    Xc, rep = datasets.clip_rows(X, row_norm, names)
    click.echo(f"{csv_file}: {X.shape[0]} rows, {X.shape[1]} features; rows are clipped to norm {row_norm:g}")
    if nonprivate:
        click.echo(f"  {NONPRIVATE_BANNER}: rows clipped: {rep.n_clipped}")
    if mode == "posterior":
        run_and_report_posterior(loss, Xc, y, rows=None, X_test=Xt, y_test=yt, feature_names=names,
                                 test_is_public=test_csv is not None, interval_curvature=interval_curvature, **post)
        return
    _run_and_report(loss, Xc, y, command="sample", eps=eps, delta=delta, pure=pure, route=route,
                    horizon=horizon, chains=chains, kernel=kernel, friction=friction, lam_rel=lam_rel,
                    radius=radius, seed=seed, key_impl=key_impl, progress=progress, ledger=ledger,
                    dataset_id=dataset_id, budget=budget, X_test=Xt, y_test=yt, out=out,
                    nonprivate=nonprivate, feature_names=names, horizon_asked=horizon_asked)

