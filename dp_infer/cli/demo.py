"""``dp-infer demo`` (posterior mode): a quick plan by default, the full plan with ``--full``.

What a first-time user sees, in order:

1. the data (UCI Adult through the shipped schema);
2. BEFORE anything private is computed: the plan and its forecast from public inputs only -- beta,
   beta / n, how much wider than the untempered posterior's the credible intervals will be, the
   predicted bulk ESS, the number of steps and the expected wall time on an idle 2-core machine
   (:func:`expected_seconds`), with the machine's load when it is higher than its cores;
3. a progress bar with an ETA (NumPyro's);
4. a short coefficient table named by feature, with 90% credible intervals, and ArviZ's mixing
   checks named by feature;
5. plots written to a folder it names (rank, forest, privacy-utility forecast);
6. the one command that reproduces the full report.

The quick plan asks for fewer effective draws (:data:`QUICK_ESS` instead of :data:`FULL_ESS`) and
keeps fewer draws per chain: it costs the same (eps, delta), and at a fixed budget fewer draws buy
a larger beta (DESIGN, "Draws that are a posterior"), but ArviZ's R-hat <= 1.01 bar on all 100
coefficients needs about 1000 effective draws, which is what ``--full`` plans for.

The forecast's stand-in for the private second moment is the second moment of the PUBLIC test
rows (the demo declares them public: they are the evaluation set), with the noise scale the
private release will have; the run itself releases the private one (charged), so the as-run plan
differs slightly from the forecast and is printed after the run.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import click
import numpy as np

#: the demo's prior in posterior mode: N(0, 10^2) per coordinate on the schema's scaled features
#: (rows of norm <= 1; N(0, 1 / 0.17) on the natural-unit features, which are sqrt(17) times larger)
DEMO_PRIOR_PRECISION = 0.01
#: --full: ArviZ's bar is max R-hat <= 1.01 on every one of the 100 parameters, which needs about
#: 1000 effective draws (measured on this plan: 446 effective draws -> max R-hat 1.018, 1082 ->
#: 1.0096, 1312 -> 1.0049).
FULL_ESS = 1000
FULL_DRAWS = 1000
#: the quick default: ArviZ's usual floor, bulk ESS >= 400 over 4 chains (R-hat up to ~1.02 on a few of
#: the 100 coefficients), 400 kept draws per chain; about 1.7x fewer steps than --full (a larger beta
#: per step makes the step smaller, so halving the draws does not halve the steps)
QUICK_ESS = 400
QUICK_DRAWS = 400
#: eps values of the privacy-utility forecast plot
FORECAST_EPS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
#: rows in the printed coefficient table
TABLE_ROWS = 12
#: the time forecast is :func:`dp_infer.routes.forecast.sampling_seconds` plus its FIXED_SECONDS
#: (imports, data, compilation, ArviZ checks, plots), calibrated on this demo (README's results
#: table has the measurements). A step measured on the spot (a compiled loop on placeholder rows)
#: was tried and dropped: on a loaded machine it costs 20 s and is off by 3-5x either way; the
#: progress bar's ETA is the live figure.

DEFAULT_PLOTS = "dp_infer_demo"
#: the demo's interval release takes its curvature from the public test file's features: released from the
#: 30,162 private rows it would be noise at d = 100 and eps <= 8 (no release); from public features only the
#: gradients are released (docs/results.md, "Intervals with the curvature from public features")
DEFAULT_INTERVAL_CURVATURE = "public"


def _stand_in_second_moment(X_public, n: int, max_sq_norm: float, mu_sm: float):
    """The private release's stand-in for planning: the public rows' second moment, with the event
    and the noise figures of the private release (data independent: n, the row bound, mu;
    :func:`~dp_infer.routes.preconditioning.pending_second_moment`)."""
    import dataclasses

    from ..privacy.events import GdpEvent
    from ..routes.preconditioning import pending_second_moment

    Xp = np.asarray(X_public, dtype=np.float64)
    pending = pending_second_moment(n, Xp.shape[1], max_sq_norm=max_sq_norm, mu=mu_sm)
    return dataclasses.replace(pending, matrix=Xp.T @ Xp / Xp.shape[0],
                               source="public test rows standing in for the private release",
                               event=GdpEvent(mu=mu_sm, label="private_second_moment (forecast)"))


def forecast_plan(loss, n, dim, *, eps, delta, prior_precision, ess, chains, rows, precond_share, X_public,
                  num_draws, kernel="langevin", friction=None, clip_radius=None,
                  interval_curvature=DEFAULT_INTERVAL_CURVATURE):
    """The plan as the run will make it, from public inputs only (see the module docstring).
    ``interval_curvature``: the interval release's curvature source, as the run's (``"public"``: the test
    file's features, the release's share :data:`~dp_infer.routes.newton_release.PUBLIC_INTERVAL_SHARE`)."""
    from ..losses.metric_clip import resolve_clip_radius
    from ..routes.posterior import plan_posterior
    from ..routes.preconditioning import second_moment_row_bound
    from ..privacy.conversions import gdp_mu

    mu_sm = math.sqrt(precond_share) * gdp_mu(eps, delta)
    sm = _stand_in_second_moment(X_public, n, second_moment_row_bound(loss, rows), mu_sm)
    from ..routes.newton_release import default_interval_share

    return plan_posterior(loss, n, dim, eps=eps, delta=delta, prior_precision=prior_precision, ess=ess,
                          num_chains=chains, second_moment=sm, rows=rows, kernel=kernel, friction=friction,
                          num_draws=num_draws, clip_radius=resolve_clip_radius(clip_radius, loss, dim),
                          adapt_metric=clip_radius is not None, interval_curvature=interval_curvature,
                          interval_share=default_interval_share(loss, dim, n=n, mu=gdp_mu(eps, delta),
                                                                curvature=interval_curvature)[0])


def expected_seconds(plan) -> float:
    """Sampling seconds of ``plan`` on an idle 2-core machine (the forecast's cost model,
    :func:`dp_infer.routes.forecast.sampling_seconds`)."""
    from ..routes.forecast import sampling_seconds
    from ..routes.posterior import expected_steps

    return sampling_seconds(expected_steps(plan), plan.n, plan.dim, plan.num_chains)


def _print_forecast(plan, *, full: bool, eps: float, delta: float, interval_curvature: str = "private",
                    interval_width: float | None = None) -> float:
    import os

    from .. import losses

    from ..routes.forecast import FIXED_SECONDS
    from ..routes.posterior import expected_steps

    p = plan.posterior
    expected = expected_seconds(plan)
    click.echo(f"Plan ({'full' if full else 'quick'}: {plan.num_chains} chains planned for {p.ess_target} effective "
               f"draws; {'the quick default asks ' + str(QUICK_ESS) if full else '--full asks ' + str(FULL_ESS)})")
    click.echo("forecast from public inputs only (n, dimension, prior, the loss's declared constants, the schema's "
               "admissible rows; the public test rows stand in for the private second moment):")
    click.echo(f"  target       prior x exp(-beta L) at (eps, delta) = ({eps:g}, {delta:g}): beta = {plan.beta:.4g}, "
               f"beta / n = {p.beta_over_n:.3g}")
    click.echo(f"  intervals    about {p.interval_inflation:.3g}x as wide as the untempered posterior's "
               "(sqrt(n / beta))")
    if p.interval_share:
        public = interval_curvature == "public"
        click.echo(f"  theta        an interval release of {p.interval_share:.0%} of mu^2 after sampling: intervals for "
                   "theta (the draws get the rest)" + ("; gradients only, the curvature from the public test file's "
                                                       "features (declared public)" if public else ""))
        if interval_width is not None:
            click.echo(f"               their width forecast at about {interval_width:.2g}x the non-private "
                       "posterior's for the median coordinate" + (" (read from the public test file's features)"
                                                                   if public else ""))
    else:
        from ..privacy.conversions import gdp_mu
        from ..routes.newton_release import default_interval_share

        why = default_interval_share(losses.logistic(row_norm=1.0), plan.dim, n=plan.n, mu=gdp_mu(eps, delta))[1]
        click.echo(f"  theta        no interval release{': ' + why if why else ''}")
    steps = expected_steps(plan)
    adapted = p.adaptation is not None
    click.echo(f"  draws        predicted bulk ESS {p.predicted_ess:.0f} over {plan.num_chains} chains x "
               f"{'about ' if adapted else ''}{steps} steps ("
               + (f"metric adapted from the chains' own draws in {len(p.adaptation.windows)} windows, "
                  if adapted else f"step {plan.step_size:.3g}, ")
               + f"{plan.num_draws} draws kept per chain)")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cpus = os.cpu_count() or 1
    click.echo(f"  time         about {expected + FIXED_SECONDS:.0f} s on an idle 2-core machine: sampling ~{expected:.0f} s "
               f"({steps} steps of {plan.num_chains} chains) + ~{FIXED_SECONDS:.0f} s data, compilation, "
               f"checks and plots" + (f"; this machine's load is {load:.1f} on {cpus} cores, so expect it slower "
                                      "(the progress bar's ETA is the live figure)" if load > cpus else ""))
    return expected


def _forecast(loss, n, dim, **kw):
    """:func:`dp_infer.routes.forecast.forecast_posterior` (public inputs only; planned as the run is, the test
    file's features giving each coordinate's mean square and, with public curvature, the intervals' width), so
    the run's measurement can be printed beside it."""
    from ..routes.forecast import forecast_posterior

    return forecast_posterior(loss, n, dim, num_chains=kw.pop("chains"), **kw)


def _echo_prior_warning(fc) -> None:
    """Print the close-to-prior lines of a :class:`~dp_infer.routes.forecast.PosteriorForecast`."""
    for line in fc.explain().splitlines():
        if "WARNING" in line or "prior sd" in line or "within 10% of the prior" in line:
            click.echo(line)


def _coefficient_table(draws: np.ndarray, names, mix_table) -> "object":
    import pandas as pd

    flat = draws.reshape(-1, draws.shape[-1])
    mean, sd = flat.mean(axis=0), flat.std(axis=0, ddof=1)
    lo, hi = np.quantile(flat, [0.05, 0.95], axis=0)
    tab = pd.DataFrame({"mean": mean, "sd": sd, "5%": lo, "95%": hi}, index=list(names))
    labels = [f"theta[{nm}]" for nm in names]
    if mix_table is not None and all(lab in mix_table.index for lab in labels):
        tab["ess_bulk"] = mix_table.loc[labels, "ess_bulk"].to_numpy()
        tab["r_hat"] = mix_table.loc[labels, "r_hat"].to_numpy()
    return tab


def _write_plots(dt, tab, mix_table, forecasts, eps, outdir: Path) -> list[tuple[str, str]]:
    """rank (the 6 coefficients with the largest R-hat), forest (the table's coefficients) and the
    privacy-utility forecast; failures are reported by name, never raised (the run is paid for)."""
    from ..diagnostics import plots

    outdir.mkdir(parents=True, exist_ok=True)
    worst = mix_table.sort_values("r_hat", ascending=False).index[:6]
    worst_feats = [lab[len("theta["):-1] for lab in worst]
    jobs = [
        ("rank", lambda: plots.plot_rank(dt, outdir / "rank.png", var_names=["theta"],
                                         coords={"feature": worst_feats})),
        ("forest", lambda: plots.plot_forest(dt, outdir / "forest.png", var_names=["theta"],
                                             coords={"feature": list(tab.index)})),
        ("privacy-utility", lambda: plots.plot_privacy_utility(
            forecasts, outdir / "privacy_utility.png", y="interval_width_vs_untempered", group="method",
            title=f"forecast from public inputs (this run: eps = {eps:g})")),
    ]
    out = []
    for name, job in jobs:
        try:
            out.append((name, str(job())))
        except Exception as e:  # noqa: BLE001 - a plot that fails is named, the run stays
            out.append((name, f"failed: {type(e).__name__}: {e}"))
    return out


def run_demo_posterior(a, rows, *, full, eps, delta, chains, kernel, friction, ess, prior_precision, precond_share,
                       seed, key_impl, progress, ledger, dataset_id, budget, out, plots, nonprivate, clip_radius=None,
                       interval_curvature=DEFAULT_INTERVAL_CURVATURE):
    """The posterior-mode demo (see the module docstring); ``a`` is :func:`load_adult_raw`'s result.
    ``interval_curvature``: where the interval release's curvature comes from (``"public"``, the default: the
    public test file's features, so only gradients are released; ``"private"``: released from the rows, which
    at Adult's n and d is noise, so the run makes no interval release and says why)."""
    from threadpoolctl import threadpool_limits

    from .. import losses
    from ..infer.fallback import keep_draws
    from ..compilation import CompileClock
    from ..infer.posterior import fit_posterior
    from .common import note_unrecorded, open_cli_ledger

    t_start = time.perf_counter()
    loss = losses.logistic(row_norm=rows.max_norm())
    n, dim = a.X_train.shape
    ess = (FULL_ESS if full else QUICK_ESS) if ess is None else ess
    num_draws = FULL_DRAWS if full else QUICK_DRAWS
    prior_precision = DEMO_PRIOR_PRECISION if prior_precision is None else prior_precision
    precond_share = 0.1 if precond_share is None else precond_share
    plots_dir = Path(DEFAULT_PLOTS if plots is None else plots)
    # small dense algebra (100 x 100) is faster on one BLAS thread, and much faster on a loaded machine
    with threadpool_limits(1, user_api="blas"):
        plan = forecast_plan(loss, n, dim, eps=eps, delta=delta, prior_precision=prior_precision, ess=ess,
                             chains=chains, rows=rows, precond_share=precond_share, X_public=a.X_test,
                             num_draws=num_draws, kernel=kernel, friction=friction, clip_radius=clip_radius,
                             interval_curvature=interval_curvature)
        sd_forecast = _forecast(loss, n, dim, eps=eps, delta=delta, prior_precision=prior_precision, ess=ess,
                                chains=chains, rows=rows, precond_share=precond_share, kernel=kernel,
                                friction=friction, clip_radius=clip_radius, X_public=a.X_test,
                                interval_curvature=interval_curvature)
        _print_forecast(plan, full=full, eps=eps, delta=delta, interval_curvature=interval_curvature,
                        interval_width=sd_forecast.interval_width)
        _echo_prior_warning(sd_forecast)
        if plan.posterior.interval_inflation > 10:
            click.echo(f"  note         at this n and eps the tempered posterior is far wider than the data's own: "
                       f"its sd is about {plan.posterior.interval_inflation:.3g}x the untempered posterior's; "
                       "read the draws as a private posterior at that temperature")
        click.echo("")
        led = open_cli_ledger(ledger, dataset_id, budget)
        if led is None:
            note_unrecorded(eps, delta)
        t_plan = time.perf_counter()
        with CompileClock() as clock:  # compilation apart from sampling in the time line
            run = fit_posterior(loss, a.X_train, a.y_train, eps=eps, delta=delta, prior_precision=prior_precision,
                                ess=ess, num_chains=chains, kernel=kernel, friction=friction, rows=rows,
                                precond_share=precond_share, seed=seed, key_impl=key_impl, ledger=led,
                                dataset_id=dataset_id, progress_bar=progress, num_draws=num_draws, clip_radius=clip_radius,
                                interval_curvature=interval_curvature,
                                X_public=a.X_test if interval_curvature == "public" else None,
                                **({"public_interval_width": sd_forecast.interval_width}
                                   if interval_curvature == "public" and sd_forecast.interval_width else {}))
        t_sampled = time.perf_counter()
    with keep_draws(run, out=out, ledger=ledger, step="building the run file") as keeper:
        _report_demo_run(run, keeper, a=a, loss=loss, n=n, dim=dim, full=full, eps=eps, delta=delta, ess=ess,
                         chains=chains, kernel=kernel, friction=friction, rows=rows, prior_precision=prior_precision,
                         precond_share=precond_share, num_draws=num_draws, led=led, ledger=ledger,
                         dataset_id=dataset_id, out=out, plots_dir=plots_dir, nonprivate=nonprivate,
                         times=(t_start, t_plan, t_sampled, clock), clip_radius=clip_radius,
                         interval_curvature=interval_curvature, sd_forecast=sd_forecast)
    sys.stdout.flush()
    return run


def _report_demo_run(run, keeper, *, a, loss, n, dim, full, eps, delta, ess, chains, kernel, friction, rows,
                     prior_precision, precond_share, num_draws, led, ledger, dataset_id, out, plots_dir, nonprivate,
                     times, clip_radius=None, interval_curvature=DEFAULT_INTERVAL_CURVATURE, sd_forecast=None):
    """Everything the demo prints and writes after sampling (the run is paid for: ``keeper`` keeps
    its draws in a fallback file if any of it fails). ``sd_forecast``: the forecast made before the
    run (:class:`~dp_infer.routes.forecast.PosteriorForecast`), printed beside what the draws measure."""
    from threadpoolctl import threadpool_limits

    from ..diagnostics import check_mixing, get_report
    from ..infer.prediction import expected_calibration_error, log_loss, loss_predictive
    from .common import print_report, echo_nonprivate_accuracy, echo_spent

    t_start, t_plan, t_sampled, clock = times
    if led is not None:
        echo_spent(led, ledger, dataset_id, "the run was charged before any private computation")
    run.feature_names = list(a.feature_names)
    dt = run.to_datatree()
    report = get_report(dt)
    p = run.plan.posterior
    click.echo(f"as run (the private second moment replaced the stand-in): beta = {run.plan.beta:.4g} "
               f"(beta / n = {p.beta_over_n:.3g}, intervals {p.interval_inflation:.3g}x), "
               f"{run.plan.num_chains} chains x {run.plan.num_steps} steps; "
               f"spent (eps, delta) = ({report['eps_spent']:.3g}, {delta:g})")
    if out is not None:  # written first: the draws are paid for
        from ..diagnostics import save

        keeper.step = "writing --out"
        click.echo(f"wrote {save(dt, out)} (ArviZ DataTree: released draws, diverging, privacy report)")
    keeper.step = "the mixing diagnostics and the coefficient table"
    mix = check_mixing(dt, report)
    mtab = mix.table()
    tab = _coefficient_table(np.asarray(run.draws()), a.feature_names, mtab)
    click.echo("")
    if full:
        print_report({k: v for k, v in report.items()
                       if k not in ("preconditioner", "prior_precision", "posterior", "routes_considered", "event",
                                    "potential", "purification", "notes")})
        click.echo("")
    z = (tab["mean"].abs() / tab["sd"]).sort_values(ascending=False)
    shown = tab.loc[z.index[:TABLE_ROWS]]
    from ..diagnostics.intervals import run_intervals_text

    click.echo(run_intervals_text(
        run, f"coefficients (logistic, on the schema's scaled features): 90% intervals for theta, what the data say "
             f"(the run's interval release; the {TABLE_ROWS} of {dim} with the largest |centre| / sd):",
        names=a.feature_names, rows=TABLE_ROWS))
    if sd_forecast is not None and sd_forecast.interval_width is not None:
        click.echo(f"  forecast before the run (public inputs): median width {sd_forecast.interval_width:.2f}x the "
                   "non-private posterior's")
    click.echo("")
    click.echo(f"the tempered draws (a private posterior at beta / n = {p.beta_over_n:.3g}, "
               f"{p.interval_inflation:.3g}x wider than the data's own): the {len(shown)} of {dim} with the largest "
               "|mean| / sd; 90% credible intervals of the tempered posterior")
    fmt = {c: (lambda x: f"{x:.3g}") for c in ("mean", "sd", "5%", "95%")}
    fmt.update({"ess_bulk": lambda x: f"{x:.0f}", "r_hat": lambda x: f"{x:.3f}"})
    click.echo(shown.to_string(formatters={c: f for c, f in fmt.items() if c in shown.columns}))
    from ..diagnostics.prior_dominance import run_prior_dominance

    click.echo(run_prior_dominance(run).text(a.feature_names))
    if sd_forecast is not None:
        fc = sd_forecast
        click.echo(f"  forecast before the run (public inputs): median sd / prior sd {fc.sd_ratio_to_prior:.2f}, "
                   f"{fc.prior_dominated_count} of {dim} prior-dominated")
    worst_rhat = mtab["r_hat"].idxmax()
    click.echo("")
    click.echo(f"mixing (ArviZ, {mix.num_chains} chains x {mix.num_draws} draws after burn-in): max R-hat "
               f"{mix.max_rhat:.3f} ({worst_rhat}), min bulk ESS {mix.min_ess_bulk:.0f} (planned "
               f"{p.predicted_ess:.0f}), min tail ESS {mix.min_ess_tail:.0f}, divergent draws {mix.num_divergences}")
    if not full and mix.max_rhat > mix.rhat_max:
        click.echo(f"  quick plan: R-hat above {mix.rhat_max} on {int((mtab['r_hat'] > mix.rhat_max).sum())} of {dim} "
                   f"coefficients is expected at {ess} effective draws; --full plans {FULL_ESS}, which meets it")
    elif full:
        for w in mix.warnings:
            click.echo(f"WARNING: {w}")
    keeper.step = "the predictions on the test data"
    draws = np.asarray(run.draws()).reshape(-1, dim)
    prob = loss_predictive("logistic", draws, a.X_test)["probs"]
    yt = np.asarray(a.y_test, dtype=float) > 0.5
    if run.interval_centre_refusal() is None:  # as dp-infer sample: the centre through run.predict
        click.echo(f"public test data: accuracy of the intervals' centre "
                   f"{np.mean((run.predict(a.X_test, source='intervals') > 0.5) == yt):.4f}")
    click.echo(f"public test data: accuracy of the posterior mean {np.mean(((a.X_test @ draws.mean(axis=0)) > 0) == yt):.4f}; "
               f"posterior predictive accuracy {np.mean((prob > 0.5) == yt):.4f}, log loss {log_loss(prob, yt):.4f}, "
               f"calibration error (ECE) {expected_calibration_error(prob, yt):.4f}")
    if nonprivate:
        echo_nonprivate_accuracy(loss, a.X_train, a.y_train, a.X_test, a.y_test)
    t_checks = time.perf_counter()
    forecasts = []
    with threadpool_limits(1, user_api="blas"):
        for e in FORECAST_EPS:
            try:
                fp = forecast_plan(loss, n, dim, eps=e, delta=delta, prior_precision=prior_precision, ess=ess,
                                   chains=chains, rows=rows, precond_share=precond_share, X_public=a.X_test,
                                   num_draws=num_draws, kernel=kernel, friction=friction, clip_radius=clip_radius,
                                   interval_curvature=interval_curvature)
            except ValueError:  # no beta meets this eps at this ess: nothing to draw
                continue
            forecasts.append({"method": f"posterior mode, ESS {ess} (forecast)", "eps": e,
                              "interval_width_vs_untempered": fp.posterior.interval_inflation})
    keeper.step = "the plots"
    written = _write_plots(dt, shown, mtab, forecasts, eps, plots_dir)
    click.echo("")
    click.echo(f"plots in {plots_dir}/: " + ", ".join(f"{name} {Path(w).name}" if not w.startswith("failed")
                                                       else f"{name} {w}" for name, w in written))
    t_end = time.perf_counter()
    click.echo(f"time: {t_end - t_start:.0f} s (forecast {t_plan - t_start:.0f} s, second-moment release + "
               f"compilation + sampling {t_sampled - t_plan:.0f} s, checks {t_checks - t_sampled:.0f} s, plots "
               f"{t_end - t_checks:.0f} s)")
    click.echo(f"  compilation: {clock.seconds:.1f} s of the release and sampling ({clock.programs} programs: "
               f"{clock.compiled} compiled by XLA, {clock.cache_hits} loaded from the compilation cache, "
               f"{clock.parts['xla']:.1f} s; tracing and lowering {clock.parts['trace'] + clock.parts['lower']:.1f} s)")
    click.echo("")
    if full:
        click.echo("the run file holds the full privacy report and every draw: dp-infer report FILE prints it again "
                   "and writes trace, rank and autocorrelation plots" if out is not None else
                   "add --out FILE to keep the run (dp-infer report FILE prints the full report again)")
    else:
        click.echo("full report (plan for 1000 effective draws, every R-hat <= 1.01, privacy report, run file):")
        click.echo(f"  ./dev demo --full --out {plots_dir / 'adult_full.zip'} --plots {plots_dir / 'full'}")
