"""Pieces shared by the CLI commands: options, ledger charging, run labels, the non-private banner,
the printed privacy report and mixing block."""

from __future__ import annotations


import click

from ..privacy.ledger import open_ledger

NONPRIVATE_BANNER = "NON-PRIVATE (computed on the private data, not covered by any guarantee)"


def open_cli_ledger(ledger, dataset_id, budget):
    """``--ledger`` opened (and ``--budget`` registered for ``--dataset-id``), or None without
    ``--ledger`` (the caller says, when it spends, that nothing is recorded: :func:`note_unrecorded`)."""
    if ledger is None:
        if budget is not None:
            raise ValueError("--budget needs --ledger (the file that keeps the spend)")
        return None
    return open_ledger(ledger, dataset_id=dataset_id, budget=budget)


def note_unrecorded(eps=None, delta=None, what: str = "this run") -> None:
    """One line on stderr: a spending command runs without ``--ledger``, so nothing records it."""
    spend = f" spends (eps, delta) = ({eps:.4g}, {delta:g}) and" if eps is not None else ""
    click.echo(f"note: no --ledger: {what}{spend} is not recorded anywhere (pass --ledger FILE to keep the "
               "spend and enforce a budget)", err=True)


def preflight(*, out=None, out_param: str = "--out", out_suffixes=None, seed=None, key_impl: str = "threefry2x32",
              dataset_id=None, ledger=None, budget=None) -> None:
    """Everything of a command that can be checked before the data are read and anything is
    charged: the output path (writable, supported suffix), ``--reproducible-seed`` against
    ``--key-impl``, ``--dataset-id`` (no surrounding whitespace), the ledger file (an empty file
    is refused) and ``--budget`` without ``--ledger``. One-line errors in CLI words."""
    from ..infer.preflight import RUN_FILE_SUFFIXES, check_output_path
    from ..privacy.ledger_records import check_dataset_id
    from ..randomness import check_seed

    check_output_path(out, param=out_param, suffixes=out_suffixes or RUN_FILE_SUFFIXES)
    check_seed(seed, key_impl, seed_name="--reproducible-seed", impl_name="--key-impl")
    if dataset_id is not None:
        try:
            check_dataset_id(dataset_id)
        except ValueError as e:
            raise ValueError("--" + str(e).replace("dataset_id", "dataset-id", 1)) from None
    if budget is not None and ledger is None:
        raise ValueError("--budget needs --ledger (the file that keeps the spend)")
    if ledger is not None:
        from pathlib import Path

        p = Path(ledger).expanduser()
        if p.exists() and p.is_file() and p.stat().st_size == 0:
            raise ValueError(f"--ledger: {str(p)!r} is an empty file, not a dp_infer ledger (a truncated ledger "
                             "would lose its recorded spend); restore it, or give a path that does not exist")


def echo_spent(led, ledger, dataset_id, what: str) -> None:
    sp = led.spent(dataset_id)
    click.echo(f"ledger {ledger}: {what}; dataset {dataset_id!r} has spent eps = {sp['eps']:.4g} of "
               f"{sp['eps_budget']:g} at delta = {sp['delta_budget']:g}")


def cli_ledger(ledger, dataset_id, budget):
    """The CLI's side of the one driver (:func:`dp_infer.infer.driver.execute`): ``(open, announce)``,
    a function that opens ``--ledger`` (or says that nothing records the spend) once the plan has
    passed its checks, and the hook that prints the spend once charged."""

    def open_():
        led = open_cli_ledger(ledger, dataset_id, budget)
        if led is None:
            note_unrecorded()
        return led

    def announce(led_, receipt):
        echo_spent(led_, ledger, dataset_id, f"charged {receipt.run_label!r} before sampling")

    return open_, announce


def echo_nonprivate_accuracy(loss, X, y, X_test, y_test) -> None:
    """The test accuracy of a non-private fit on the private rows, labelled NON-PRIVATE."""
    from ..infer import nonprivate as np_ref

    th_np, _, _ = np_ref.minimize_loss(loss, X, y)
    click.echo(f"test accuracy of a non-private fit, {NONPRIVATE_BANNER}: "
               f"{np_ref.accuracy(th_np, X_test, y_test):.4f}")


_REPORT_FILE_ONLY = ("routes_considered", "event", "potential", "purification", "notes")


def print_report(report: dict) -> None:
    """The privacy report, less the long items kept in the run file (routes, event, potential)."""
    from ..diagnostics import format_report

    click.echo(format_report({k: v for k, v in report.items() if k not in _REPORT_FILE_ONLY}))


def mixing_block(dt, report) -> None:
    from ..diagnostics import check_mixing

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



SEED_HELP = ("make the noise reproducible from this integer. Whoever holds it can regenerate the "
             "noise and, from the released draws, the gradients: privacy then rests on keeping it "
             "secret. Default: a fresh secret key from the operating system.")
NONPRIVATE_HELP = ("also print NON-PRIVATE diagnostics computed on the private data (clipped and "
                   "dropped row counts, a non-private reference fit), labelled as such")

CLIP_RADIUS_HELP = ("posterior mode: clip every per-example gradient in the preconditioner's metric at this radius, "
                    "a number in (0, inf), or 'auto' (sqrt of the dimension, the default for the logistic, Huber and "
                    "smoothed-hinge losses), and adapt the metric from the chains' own draws. The sensitivity is then "
                    "set by the radius, not by the rarest admissible row, which buys a larger beta (14x on Adult at "
                    "eps = 1: intervals 2.8x the untempered posterior's instead of 27x), and the draws target the Gibbs "
                    "posterior of the clipped loss (high-leverage rows count less; docs/how-to/posterior.md). "
                    "'none': no clip (the loss's own Gibbs posterior at a smaller beta, in about a seventh of the time)")

_seed_options = [
    click.option("--reproducible-seed", "seed", type=click.IntRange(min=0), default=None, help=SEED_HELP),
    click.option("--key-impl", type=click.Choice(["threefry2x32", "rbg"]), default="threefry2x32",
                 show_default=True, help="JAX key implementation (rbg: 128-bit keys)"),
]
COMMON_OPTIONS = [
    click.option("--eps", type=float, default=1.0, show_default=True, help="privacy epsilon in (0, 100]"),
    click.option("--delta", type=float, default=1e-5, show_default=True, help="privacy delta in (0, 1)"),
    click.option("--pure", is_flag=True, default=False,
                 help="pure eps-DP (route 'pure': needs --radius; purifies the estimate)"),
    click.option("--route", type=click.Choice(["auto", "trajectory", "last_iterate", "stationary", "pure"]),
                 default="auto", show_default=True, help="force a privacy route"),
    click.option("--radius", type=float, default=None,
                 help="L2-ball domain radius for theta (required by --pure)"),
    click.option("--horizon", type=float, default=None,
                 help="estimate mode: integrated Langevin time per chain, > 0 (default 1; trajectory route: "
                      "privacy grows with it). Posterior mode plans it from --ess"),
    click.option("--chains", type=click.IntRange(min=1), default=None,
                 help="number of chains (default 2 in estimate mode, 4 in posterior mode; K chains cost K "
                      "times the RDP of one)"),
    click.option("--kernel", type=click.Choice(["langevin", "underdamped"]), default=None,
                 help="default: underdamped in the posterior mode (the same privacy per effective draw in about "
                      "6x fewer steps on Adult), langevin in the estimate mode"),
    click.option("--friction", type=float, default=None, help="friction gamma (underdamped only)"),
    click.option("--lam-rel", type=float, default=None,
                 help="loss-level L2 regulariser (lam_rel/2)||theta||^2 (default: none for the "
                      "trajectory route, a data-independent choice for routes needing strong convexity)"),
    click.option("--ess", type=int, default=None,
                 help="posterior mode: bulk effective draws to plan for over all chains (default 400)"),
    click.option("--prior-precision", type=float, default=None,
                 help="posterior mode: precision of the Gaussian prior N(0, I / precision) on theta, > 0"),
    click.option("--precond-share", type=float, default=None,
                 help="posterior mode: share of mu^2 spent on the private second moment X'X/n that sets the "
                      "preconditioner, in (0, 1) (default 0.1)"),
    click.option("--clip-radius", default=None, metavar="auto|RADIUS", help=CLIP_RADIUS_HELP),
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



MODE_HELP = ("'posterior': draws of prior x exp(-beta L) planned for --ess effective draws (ArviZ's checks "
             "are the target); 'estimate': the accuracy-first plan, whose draws are a path to a private "
             "estimate, not a posterior")


def mode_option(default: str):
    return click.option("--mode", type=click.Choice(["posterior", "estimate"]), default=default,
                        show_default=True, help=MODE_HELP)
