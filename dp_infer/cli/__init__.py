"""Command line: ``dp-infer demo | sample | report | predict | budget | rashomon | schema``.

One module per group of commands (:mod:`.fit_commands`, :mod:`.files`, :mod:`.schema_commands`, and the Rashomon command
in :mod:`dp_infer.cli.rashomon`); :mod:`.common` holds the options and helpers they share.
:func:`run` is the console entry point: any error is one line, never a traceback. It turns on
JAX's persistent compilation cache first (:func:`dp_infer.compilation.enable_persistent_cache`;
``DP_INFER_JAX_CACHE=off`` turns it off): a program an earlier run compiled (same shapes and
constants) is loaded, not compiled again.
"""

from __future__ import annotations

import os
import sqlite3
import sys

import click

from .rashomon import rashomon_command
from .files import budget, report
from .fit_commands import demo, sample
from .predict import predict_command
from .schema_commands import schema_group

__all__ = ["main", "run"]


@click.group()
@click.version_option(package_name="dp_infer")
def main() -> None:
    """Differentially private Gibbs sampling with Langevin kernels inside NumPyro."""


for _command in (demo, sample, report, predict_command, budget, rashomon_command, schema_group):
    main.add_command(_command)


def run() -> None:
    """Console entry point: any error prints one line, never a traceback (set
    ``DP_INFER_DEBUG=1`` to see the traceback of an unexpected error)."""
    from ..compilation import enable_persistent_cache
    from ..infer.fallback import DrawsKeptError
    from ..privacy.ledger import BudgetExceededError

    enable_persistent_cache()  # before anything compiles; a directory it cannot create only warns
    try:
        main(standalone_mode=False)
    except DrawsKeptError as e:  # the run is paid for and its draws are safe: say where, in one line
        if os.environ.get("DP_INFER_DEBUG"):
            raise
        cause, code = _cause(e.__cause__)
        how = e.reader or ("a NumPy .npz archive of the draws and the privacy report" if e.run is None or
                           type(e.run).__name__ == "RashomonResult" else f"dp-infer report {e.path} reads it")
        click.echo(f"error: {e.step} failed ({cause}); {e.what} kept in {e.path} ({how})", err=True)
        sys.exit(code)
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
    except OSError as e:  # a file the command could not read or write: name it, in CLI words
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        click.echo(f"error: {where}{e.strerror or str(e).splitlines()[0]}", err=True)
        sys.exit(2)
    except sqlite3.Error as e:  # a ledger the database layer refused (read-only, damaged page, ...)
        click.echo(f"error: --ledger: the ledger database refused the operation ({str(e).splitlines()[0]}); "
                   "check the file's permissions and integrity", err=True)
        sys.exit(2)
    except Exception as e:  # noqa: BLE001 - no traceback reaches a CLI user
        if os.environ.get("DP_INFER_DEBUG"):
            raise
        click.echo(f"error: unexpected {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
                   "(set DP_INFER_DEBUG=1 for the traceback)", err=True)
        sys.exit(3)


def _cause(e) -> tuple[str, int]:
    """One line and the exit code for the error behind a kept run (as :func:`run` prints errors)."""
    from ..privacy.ledger import BudgetExceededError

    if isinstance(e, KeyboardInterrupt):
        return "interrupted", 1
    text = str(e).splitlines()[0] if e is not None and str(e) else type(e).__name__
    if isinstance(e, click.ClickException):
        return e.format_message(), e.exit_code
    if isinstance(e, (ValueError, BudgetExceededError)):
        return text, 2
    if isinstance(e, OSError):
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        return f"{where}{e.strerror or text}", 2
    return f"unexpected {type(e).__name__}: {text}", 3
