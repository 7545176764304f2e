"""``dp-infer sample --loss hinge|quantile``: the proximal route for losses without smoothness.

Same order of work as :mod:`.fit_commands`: check inputs -> plan (data independent) -> charge
the ledger -> sample -> write ``--out`` -> print.
"""

from __future__ import annotations

import click

from .common import NONPRIVATE_BANNER, cli_ledger, print_report

__all__ = ["run_and_report_proximal"]


def run_and_report_proximal(loss, X, y, *, command, eps, delta, pure, route, chains, lam_rel, radius, seed,
                            key_impl, ledger, dataset_id, budget, X_test=None, y_test=None, out=None,
                            nonprivate=False):
    """Plan, charge, sample and print the proximal route (seed 002 Algorithm 1)."""
    from ..infer import nonprivate as np_ref
    from .._validation import check_delta
    from ..infer.driver import Hooks, execute
    from ..infer.proximal import PROXIMAL_ROUTE, proximal_public

    if pure:
        raise ValueError("--pure is not available for losses without smoothness: the proximal route "
                         "gives (eps, delta)-DP")
    if route != "auto":
        raise ValueError(f"--route {route} needs a smooth loss; losses without smoothness use the proximal route")
    if radius is not None:
        raise ValueError("--radius is not available for the proximal route: it samples on R^d")
    check_delta(delta)
    X, y = loss.check_data(X, y)
    public = proximal_public(loss, X.shape[0], X.shape[1], eps=eps, delta=delta, num_chains=chains, lam_rel=lam_rel,
                             seed=seed, key_impl=key_impl)

    def planned(plan):
        click.echo(f"Route: proximal sampler for the non-smooth loss {loss.name!r} (plan from n, the dimension "
                   "and the loss's declared constants only)")
        click.echo(plan.explain())
        click.echo("")

    def finish(run, keeper, receipt):
        plan = run.plan
        if out is not None:  # written first: the draws are paid for
            from ..diagnostics import save

            keeper.step = "writing --out"
            click.echo(f"wrote {save(run.to_datatree(), out)} (ArviZ DataTree: released final positions, privacy report)")
        keeper.step = "the privacy report"
        report = run.report()
        print_report(report)
        click.echo(f"released: the final position of each of {plan.num_draws} chain(s) "
                   "(too few draws for R-hat/ESS; more chains cost privacy)")
        if X_test is not None and loss.behaviour.point_prediction == "label":
            keeper.step = "the predictions on the test data"
            acc = np_ref.accuracy(run.estimate(), X_test, y_test)
            click.echo(f"route: proximal; test accuracy of the released estimate on the public test data, "
                       f"({report['eps_spent']:.3g}, {plan.delta:g})-DP: {acc:.4f}")

    led, on_charge = cli_ledger(ledger, dataset_id, budget)
    run = execute(PROXIMAL_ROUTE, public, (X, y), ledger=led, dataset_id=dataset_id, prefix="--",
                  label=lambda plan: f"dp-infer {command} {plan.route}",
                  hooks=Hooks(planned=planned, on_charge=on_charge, finish=finish, out=out, step="writing --out"))
    if nonprivate:  # the rejection oracle's work, hence the time, depends on the data
        click.echo(f"{NONPRIVATE_BANNER}: sampling time {run.elapsed_seconds:.1f} s")
    return run
