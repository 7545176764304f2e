"""``--mode posterior`` of ``dp-infer demo`` / ``dp-infer sample``: draws planned for a number of
effective draws of ``prior x exp(-beta L)``.

Same order of work as :mod:`.fit_commands`: check every input -> plan (data independent; the
private second moment is a stand-in carrying its event) -> charge the ledger with the whole run
-> release the second moment, re-plan, sample (:func:`dp_infer.infer.posterior.fit_posterior`) ->
write ``--out`` -> print the plan, the privacy report, predicted vs achieved ESS and R-hat and
ArviZ's checks of the released draws.
"""

from __future__ import annotations

import math
import time

import click
import numpy as np

from ..infer.fallback import keep_draws
from .common import (echo_nonprivate_accuracy, echo_spent, mixing_block, note_unrecorded, open_cli_ledger,
                     print_report)

__all__ = ["run_and_report_posterior", "check_mode_options", "check_clip_radius"]


def check_clip_radius(mode, clip_radius):
    """``--clip-radius`` as the posterior mode's ``clip_radius``: None (not given), ``"auto"``,
    ``"none"`` (explicitly no clip; the caller maps it to None) or a number in (0, inf); refused in
    estimate mode. Checked before anything is read or charged."""
    if clip_radius is None:
        return None
    if mode != "posterior":
        raise ValueError("--clip-radius applies to --mode posterior only")
    text = str(clip_radius).strip()
    if text in ("auto", "none"):
        return text
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"--clip-radius must be 'auto', 'none' or a number in (0, inf), got {clip_radius!r}")
    return value

def check_mode_options(mode, *, eps, delta, pure, route, radius, horizon, chains, lam_rel, ess, prior_precision,
                       precond_share):
    """One-line errors for options that do not belong to ``mode`` (before anything is read or
    charged). Returns ``(horizon, chains)`` with the mode's defaults filled in."""
    if mode == "estimate":
        for name, v in (("--ess", ess), ("--prior-precision", prior_precision), ("--precond-share", precond_share)):
            if v is not None:
                raise ValueError(f"{name} applies to --mode posterior only")
        return (1.0 if horizon is None else horizon), (2 if chains is None else chains)
    from .._validation import check_delta, check_target_epsilon

    check_target_epsilon(eps)
    check_delta(delta)
    if pure:
        raise ValueError("--pure is not available in --mode posterior (it releases (eps, delta)-DP draws); "
                         "use --mode estimate --pure")
    if route not in ("auto", "trajectory"):
        raise ValueError(f"--route {route}: --mode posterior runs the trajectory route (use --mode estimate)")
    for name, v in (("--radius", radius), ("--horizon", horizon), ("--lam-rel", lam_rel)):
        if v is not None:
            raise ValueError(f"{name} applies to --mode estimate only (posterior mode: the horizon is planned "
                             "from --ess, the prior is --prior-precision, the draws live on R^d)")
    if ess is not None and ess < 4:
        raise ValueError(f"--ess must be an integer >= 4, got {ess}")
    if prior_precision is not None and not (math.isfinite(prior_precision) and prior_precision > 0):
        raise ValueError(f"--prior-precision must lie in (0, inf), got {prior_precision!r}")
    if precond_share is not None and not 0 < precond_share < 1:
        raise ValueError(f"--precond-share must lie in (0, 1), got {precond_share!r}")
    return None, (4 if chains is None else chains)


def _print_plan(plan) -> None:
    p = plan.posterior
    click.echo("Posterior mode (data independent plan: n, dimension, prior, the loss's declared constants, "
               "the schema's admissible rows and the second moment's release)")
    click.echo(f"target: prior x exp(-beta L), beta = {plan.beta:.4g} (beta / n = {p.beta_over_n:.3g}; "
               f"credible intervals {p.interval_inflation:.3g} x as wide as the untempered posterior's)")
    click.echo(f"chains: {plan.num_chains} x {plan.num_steps} steps of size {plan.step_size:.3g} "
               f"(horizon {plan.horizon:.4g}, burn-in {plan.burn_in} of {plan.num_draws} draws per chain), "
               f"kernel {plan.kernel}, preconditioner from the {p.second_moment['source']} second moment")
    click.echo(f"planned bulk ESS: {p.predicted_ess:.0f} (asked {p.ess_target}); one more effective draw "
               f"would cost eps + {p.eps_per_extra_effective_draw:.2g}")
    click.echo(f"sensitivity in the preconditioner's metric: {plan.sensitivity:.4g} ({p.sensitivity_bound})")
    if p.clip_radius is not None:
        click.echo(f"per-example gradients clipped in the preconditioner's metric at radius {p.clip_radius:.3g} "
                   "(the draws target the Gibbs posterior of the clipped loss; how many rows the clip touched is "
                   "not reported: it is a function of the private data)")


def run_and_report_posterior(loss, X, y, *, command, eps, delta, chains, kernel, friction, ess, prior_precision,
                             precond_share, rows, seed, key_impl, progress, ledger, dataset_id, budget,
                             X_test=None, y_test=None, out=None, feature_names=None, extra_attrs=None,
                             nonprivate=False, clip_radius="auto", test_is_public=False, interval_curvature=None,
                             residual_scale=None):
    """Plan, charge, sample and print a posterior-mode run (``loss`` a smooth GLM loss).
    ``interval_curvature``: ``"public"`` takes the interval release's curvature from ``X_test``'s features
    (``test_is_public`` must say that they come from a separate public file); None: public where the test
    features are public and the loss's curvature reads no label, else ``"private"`` (said in one line).
    ``residual_scale``: the residuals' sd the user declares (Huber), read by the forecast's interval width only."""
    from .._validation import check_delta
    from ..infer.posterior import fit_posterior
    from ..infer.prediction import expected_calibration_error, log_loss, loss_predictive
    from ..routes.posterior import DEFAULT_ESS

    if loss.constants.smoothness is None:
        raise ValueError("--mode posterior needs a smooth loss (hinge / quantile run the proximal route: "
                         "use --mode estimate)")
    if prior_precision is None:
        raise ValueError("--prior-precision: --mode posterior needs a Gaussian prior N(0, I / precision) with "
                         "precision in (0, inf) (a flat prior is improper here)")
    check_delta(delta)
    if X_test is not None:
        X_test = np.asarray(X_test, dtype=float)
        if X_test.shape[1] != np.shape(X)[1]:
            raise ValueError(f"the test data have {X_test.shape[1]} feature columns, the training data "
                             f"{np.shape(X)[1]}")
    from ..routes.newton_release import public_curvature_refusal

    why_not = (public_curvature_refusal(loss) if test_is_public and X_test is not None
               else "no --test-csv: no feature rows declared public")
    if interval_curvature == "public" and why_not is not None:
        raise ValueError(f"--interval-curvature public: {why_not}")
    if interval_curvature is None:
        interval_curvature = "public" if why_not is None else "private"
        if why_not is None:
            click.echo(f"intervals for theta: their curvature comes from the --test-csv file's {X_test.shape[0]} "
                       "feature rows (declared public), so only gradients are released (--interval-curvature "
                       "private to release it from the rows)")
    X_public = X_test if interval_curvature == "public" else None
    led = open_cli_ledger(ledger, dataset_id, budget)
    # the forecast: public inputs only (n, dimension, eps, delta, prior, rows), printed before anything is spent
    from ..routes.forecast import forecast_posterior

    fc = forecast_posterior(loss, int(np.shape(X)[0]), loss.num_params(int(np.shape(X)[1])), eps=eps, delta=delta,
                            prior_precision=prior_precision, ess=DEFAULT_ESS if ess is None else ess,
                            num_chains=chains, rows=rows, precond_share=0.1 if precond_share is None else precond_share,
                            kernel=kernel, friction=friction, clip_radius=clip_radius,
                            interval_curvature=interval_curvature, X_public=X_public, residual_scale=residual_scale)
    click.echo(fc.explain())
    click.echo("")
    t0 = time.time()
    with keep_draws(out=out, ledger=ledger) as keeper:  # once charged, the draws are kept whatever fails
        run = keeper.keep(fit_posterior(
            loss, X, y, eps=eps, delta=delta, prior_precision=prior_precision, ess=DEFAULT_ESS if ess is None else ess,
            num_chains=chains, kernel=kernel, friction=friction, rows=rows,
            precond_share=0.1 if precond_share is None else precond_share, seed=seed, key_impl=key_impl, ledger=led,
            dataset_id=dataset_id, progress_bar=progress, clip_radius=clip_radius,
            interval_curvature=interval_curvature, X_public=X_public), "building the run file")
        elapsed = time.time() - t0
        _print_plan(run.plan)
        click.echo("")
        if led is not None:
            echo_spent(led, ledger, dataset_id, "the run was charged before any private computation")
        else:
            note_unrecorded()
        if feature_names is not None:
            run.feature_names = list(feature_names)
        dt = run.to_datatree()
        dt.attrs.update(extra_attrs or {})
        if out is not None:  # written first: the draws are paid for
            from ..diagnostics import save

            keeper.step = "writing --out"
            click.echo(f"wrote {save(dt, out)} (ArviZ DataTree: released draws, diverging, privacy report)")
        keeper.step = "the privacy report and the mixing diagnostics"
        report = run.report()
        # the preconditioner (dim x dim), the prior vector and the posterior block are in the run file;
        # their summary is printed above and below
        print_report({k: v for k, v in report.items() if k not in ("preconditioner", "prior_precision", "posterior")})
        ach = report["posterior"]["achieved"]
        click.echo("")
        click.echo(f"bulk ESS: planned {report['posterior']['predicted_ess']:.0f}, achieved {ach['min_ess_bulk']:.0f} "
                   f"(min over parameters); max R-hat {ach['max_rhat']:.4f}")
        click.echo(f"ArviZ diagnostics of the released draws after the first {run.plan.burn_in} per chain "
                   "(post-processing: free; the same draws and checks as dp-infer report on --out)")
        mixing_block(dt, report)
        keeper.step = "the intervals"
        click.echo("")
        from ..diagnostics.intervals import run_intervals_text

        click.echo(run_intervals_text(
            run, "coefficients: 90% intervals for theta, what the data say (the run's interval release; the tempered "
                 f"draws above are {run.plan.posterior.interval_inflation:.3g}x wider than the data's own posterior):"))
        from ..diagnostics.prior_dominance import run_prior_dominance

        dominance = run_prior_dominance(run)
        if dominance is not None:
            click.echo(dominance.text(run.feature_names))
        if X_test is not None and loss.behaviour.point_prediction == "probability":
            keeper.step = "the predictions on the test data"
            draws = np.asarray(run.draws()).reshape(-1, run.plan.dim)
            prob = loss_predictive(loss, draws, X_test)["probs"]
            yt = np.asarray(y_test, dtype=float) > 0.5
            click.echo("")
            if "interval_release" in run.report_extras:  # as the demo: the intervals' centre carries the data
                click.echo(f"on the public test data: accuracy of the intervals' centre "
                           f"{np.mean((run.predict(X_test, source='intervals') > 0.5) == yt):.4f} "
                           "(dp-infer predict --from intervals)")
            click.echo(f"on the public test data ((eps, delta) = ({report['eps_spent']:.3g}, {delta:g})): accuracy of "
                       f"the posterior mean {np.mean(((X_test @ draws.mean(axis=0)) > 0) == yt):.4f}; posterior "
                       f"predictive: accuracy {np.mean((prob > 0.5) == yt):.4f}, log loss {log_loss(prob, yt):.4f}, "
                       f"calibration error (ECE, 10 bins) {expected_calibration_error(prob, yt):.4f}")
            if nonprivate:
                echo_nonprivate_accuracy(loss, X, y, X_test, y_test)
    click.echo(f"time: {elapsed:.1f} s (second-moment release, planning, compilation and sampling)")
    return run

