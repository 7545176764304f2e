"""Draws that were paid for are never lost: the fallback file (issue 30, "What to build" item 5).

Once a run is charged, the ledger keeps the charge whatever happens next (privacy was spent). A
step AFTER sampling can still fail: writing ``--out``, building the report or the ArviZ DataTree,
the mixing diagnostics, predictions on ``--test-csv``, the demo's plots, a model run's private
clip count, the bookkeeping of ``run.extend``. :func:`keep_draws` wraps those steps: if one fails
once the draws exist, the draws (and the privacy report, as far as it can still be built) are
written to a fallback file and a :class:`DrawsKeptError` names it (the command line prints it as
one line on stderr, no traceback).

The file
--------
A NumPy ``.npz`` archive written with NumPy alone (no ArviZ, xarray or netCDF: it is written even
when those are what failed), never pickled (``numpy.load(path)`` reads it with the default
``allow_pickle=False``). Its arrays:

* ``dp_infer_fallback``: the format version (1);
* ``kind``: ``"private_run"``, ``"posterior_run"``, ``"proximal_run"`` or ``"rashomon"``;
* ``report_json``: the privacy report as JSON text (``json.loads(f["report_json"].item())``),
  and ``report_level``: ``"report"`` (the full report), ``"plan"`` (the plan and its event, when
  the report itself failed) or ``"event"`` (the charged event only);
* ``theta``: the released draws, shape (chains, draws, dim), burn-in included on the trajectory
  route (final-draw routes: the final draw of each chain; the pure route: ``purified`` instead);
* ``diverging`` (trajectory route), ``site:<name>`` (a NumPyro model run's constrained sites),
  ``model_json``, ``feature_names_json``, ``clipped_rows_json`` (a model run's charged private
  count), ``extension:<site>`` (the new segment of a failed ``extend``, in the kernel's own
  coordinates), ``failed_step`` and ``error_type`` (what failed; the message is not stored).

``dp_infer.PrivateRun.load(path)`` reads a fallback file back as a run (with the same
report-against-event check as a run file) when it holds the full report or the plan; otherwise,
and for the Rashomon sampler's and an extension's files, read it with ``numpy.load``.

Where
-----
Next to ``--out`` if its directory is writable, else in the ledger's directory, else in the
system's temporary directory; the name is ``<out stem or dp_infer_run>.draws-<UTC time>-<random
id>.npz``, created exclusively (an existing file is never overwritten; :func:`new_fallback_file`,
which a private ``schema draft`` also uses for its YAML when ``-o`` fails). The file holds the
release and public facts only (the same as a run file: no private row, no key, no count that was
not charged).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import numpy as np

__all__ = ["DrawsKeptError", "keep_draws", "write_fallback", "new_fallback_file", "fallback_directories",
           "is_fallback_file", "read_fallback", "FALLBACK_VERSION"]

FALLBACK_VERSION = 1
_MARKER = "dp_infer_fallback"


class DrawsKeptError(RuntimeError):
    """A step after sampling failed; the charged run's draws were written to :attr:`path`.

    ``path``: the fallback file; ``run``: the run object (in memory, as far as it was built);
    ``step``: what failed. The original error is ``__cause__``."""

    def __init__(self, message: str, *, path: Path, run: Any = None, step: str = "",
                 what: str = "the released draws (their privacy is spent) were", reader: str | None = None):
        super().__init__(message)
        self.path = Path(path)
        self.run = run
        self.step = step
        #: what was kept (the CLI's wording) and, if set, how a command-line user reads it
        self.what = what
        self.reader = reader


def _jsonable(obj):
    from ..diagnostics.privacy_report import jsonable

    return jsonable(obj)


def _report_of(run, extra_report: dict | None) -> tuple[dict | None, str]:
    """The fullest report that can still be built: the run's report, else its plan, else its event."""
    if extra_report is not None:
        with contextlib.suppress(Exception):
            rep = dict(extra_report)
            if "randomness" not in rep:
                with contextlib.suppress(Exception):
                    rep["randomness"] = _randomness(run)
            return json.loads(json.dumps(_jsonable(rep))), "plan"
    attempts = (("report", lambda: run.report()),
                ("report", lambda: run.privacy),  # a RashomonResult's report
                ("plan", lambda: {**run.plan.as_dict(), "randomness": _randomness(run)}),
                ("event", lambda: {"event": run.plan.event.to_dict()}))
    for level, build in attempts:
        try:
            rep = build()
        except Exception:  # noqa: BLE001 - the next, smaller report
            continue
        if isinstance(rep, dict):
            try:
                return json.loads(json.dumps(_jsonable(rep))), level
            except Exception:  # noqa: BLE001
                continue
    return None, "none"


def _randomness(run):
    from ..randomness import KeySource

    r = getattr(run, "randomness", None)
    return r.describe() if isinstance(r, KeySource) else r


def _kind(run) -> str:
    """The run's stored result type (:data:`dp_infer.infer.result.RESULT_KINDS`)."""
    return getattr(run, "result_kind", "private_run")


def _arrays_of(run) -> dict[str, np.ndarray]:
    """The released arrays of ``run`` (exactly what its run file would hold), each step guarded."""
    kind = _kind(run)
    out: dict[str, np.ndarray] = {}
    if kind == "proximal_run":
        out["theta"] = np.asarray(run.final)[:, None, :]
        if run.loss_name is not None:
            out["loss_name"] = np.asarray(str(run.loss_name))
    elif kind == "rashomon":
        out["theta"] = np.asarray(run.draws)
        out["burn_in"] = np.asarray(int(run.burn_in))
    else:
        if run.purified is not None:  # the pure route: its purified estimate is the whole release
            out["purified"] = np.asarray(run.purified)
        else:
            if run.theta is not None:
                out["theta"] = np.asarray(run.released_draws())
            if run.model_description is not None:  # the constrained sites, when they can be had
                with contextlib.suppress(Exception):
                    sites = run.site_draws(drop_burn_in=False)
                    if set(sites) == set(run.model_description.get("latent_sites") or ()):
                        out.update({f"site:{k}": np.asarray(v) for k, v in sites.items()})
            if run.diverging is not None and run.plan.release == "trajectory":
                out["diverging"] = np.asarray(run.diverging, dtype=bool)
        for name, value in (("model_json", run.model_description), ("feature_names_json", run.feature_names),
                            ("clipped_rows_json", run.clipped_rows), ("coords_json", run.coords),
                            ("dims_json", run.dims)):
            if value is not None:
                with contextlib.suppress(Exception):
                    out[name] = np.asarray(json.dumps(_jsonable(value)))
    if kind in ("proximal_run", "rashomon") and getattr(run, "feature_names", None) is not None:
        out["feature_names_json"] = np.asarray(json.dumps([str(v) for v in run.feature_names]))
    return out


def fallback_directories(out=None, ledger=None) -> list[Path]:
    """Where a fallback file may go, in order: ``out``'s directory (if writable), the ledger's
    directory (if writable), the system's temporary directory."""
    dirs = []
    if out is not None:
        p = Path(out).expanduser()
        dirs.append(p.parent if str(p.parent) else Path("."))
    if ledger is not None:
        lp = getattr(ledger, "path", ledger)
        with contextlib.suppress(TypeError):
            dirs.append(Path(lp).expanduser().parent)
    dirs.append(Path(tempfile.gettempdir()))
    seen, ok = set(), []
    for d in dirs:
        key = str(d.resolve()) if d.exists() else str(d)
        if key in seen:
            continue
        seen.add(key)
        if d.is_dir() and os.access(d, os.W_OK | os.X_OK):
            ok.append(d)
    return ok


def write_fallback(run, *, out=None, ledger=None, step: str = "", error: BaseException | None = None,
                   extra_arrays: dict | None = None, report: dict | None = None) -> Path:
    """Write ``run``'s released draws and report to a new fallback file; return its path.

    ``extra_arrays`` (a mapping, or a callable returning one) are added as they are; ``report`` replaces the run's own (e.g. the plan of an
    extension that covers the whole path). Raises ``OSError`` if no directory takes the file."""
    arrays = _arrays_of(run) if run is not None else {}
    if callable(extra_arrays):
        try:
            extra_arrays = extra_arrays()
        except Exception:  # noqa: BLE001 - keep what can be kept
            extra_arrays = None
    arrays.update({k: np.asarray(v) for k, v in (extra_arrays or {}).items()})
    rep, level = _report_of(run, report)
    arrays.update({_MARKER: np.asarray(FALLBACK_VERSION), "kind": np.asarray(_kind(run)),
                   "report_json": np.asarray(json.dumps(rep)), "report_level": np.asarray(level),
                   "failed_step": np.asarray(str(step)),
                   "error_type": np.asarray(type(error).__name__ if error is not None else "")})
    return new_fallback_file(lambda f: np.savez(f, **arrays), out=out, ledger=ledger, label="draws", suffix=".npz")


def new_fallback_file(write, *, out=None, ledger=None, label: str = "draws", suffix: str = ".npz") -> Path:
    """Create ``<out stem>.<label>-<UTC time>-<random id><suffix>`` in the first of
    :func:`fallback_directories` that takes it, exclusively (never overwriting), and call
    ``write(f)`` on it (a binary file); return its absolute path. Raises ``OSError`` if no
    directory takes it."""
    stem = Path(out).stem if out is not None else "dp_infer_run"
    last: OSError | None = None
    for d in fallback_directories(out, ledger):
        for _ in range(5):
            name = f"{stem}.{label}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:8]}{suffix}"
            path = d.resolve() / name
            try:
                with open(path, "xb") as f:  # exclusive: never overwrites
                    try:
                        write(f)
                        f.flush()
                        os.fsync(f.fileno())
                    except BaseException:
                        f.close()
                        path.unlink(missing_ok=True)
                        raise
                return path
            except FileExistsError:
                continue
            except OSError as e:
                last = e
                break
    raise OSError(f"no directory took the fallback file ({last})" if last else "no writable directory for the "
                  "fallback file")


class _Keeper:
    def __init__(self, run=None):
        self.run = run
        self.extra_arrays: dict | None = None
        self.report: dict | None = None
        self.step = "a step after sampling"

    def keep(self, run, step: str | None = None):
        """From now on a failure keeps ``run``'s draws."""
        self.run = run
        if step is not None:
            self.step = step
        return run


def _one_line(e: BaseException) -> str:
    if isinstance(e, KeyboardInterrupt):
        return "interrupted"
    if isinstance(e, OSError) and getattr(e, "strerror", None):
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        return f"{where}{e.strerror}"
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


@contextlib.contextmanager
def keep_draws(run=None, *, out=None, ledger=None, step: str = "a step after sampling") -> Iterator[_Keeper]:
    """Keep the charged draws if anything in the block fails after they exist.

    Usage (the run may also be handed over inside the block with ``keeper.keep(run)``)::

        with keep_draws(out=out, ledger=ledger) as keeper:
            with charged(...):
                run = sample(...)
            keeper.keep(run, "writing --out")
            save(run, out)

    On an exception (``Exception`` or ``KeyboardInterrupt``) with a run kept, the fallback file is written and
    :class:`DrawsKeptError` is raised from the original error, its message naming the file. If the
    file cannot be written either, the original error propagates with a note saying so. Without a
    run (the failure came before any draw existed) the original error propagates unchanged.
    """
    keeper = _Keeper(run)
    keeper.step = step
    try:
        yield keeper
    except DrawsKeptError:
        raise
    except (Exception, KeyboardInterrupt) as e:  # Ctrl-C during the report must not lose the draws either
        if keeper.run is None and not keeper.extra_arrays:
            raise
        try:
            path = write_fallback(keeper.run, out=out, ledger=ledger, step=keeper.step, error=e,
                                  extra_arrays=keeper.extra_arrays, report=keeper.report)
        except Exception as e2:  # noqa: BLE001 - the original error matters more
            e.add_note(f"dp_infer: the run was charged and its draws could not be kept either ({e2})")
            raise e
        raise DrawsKeptError(
            f"{keeper.step} failed after sampling ({_one_line(e)}); the released draws (their privacy is spent) were "
            f"kept in {path} (read it with dp_infer.PrivateRun.load or numpy.load)", path=path, run=keeper.run,
            step=keeper.step) from e


def is_fallback_file(path) -> bool:
    """Whether ``path`` is a fallback file written by :func:`write_fallback`."""
    p = Path(path)
    if not p.is_file():
        return False
    try:
        import zipfile

        with zipfile.ZipFile(p) as zf:
            return f"{_MARKER}.npy" in zf.namelist()
    except Exception:  # noqa: BLE001 - not a zip: not a fallback file
        return False


def read_fallback(path) -> dict:
    """The arrays of a fallback file (``numpy.load``, no pickle) with ``report`` decoded. A file
    that unpacks to more than :data:`dp_infer.diagnostics.io.MAX_ZIP_READ_BYTES` is refused before
    it is read (as a run zip)."""
    import zipfile

    from ..diagnostics.io import MAX_ZIP_READ_BYTES

    with zipfile.ZipFile(Path(path)) as zf:
        size = sum(i.file_size for i in zf.infolist())
    if size > MAX_ZIP_READ_BYTES:
        raise ValueError(f"{path} unpacks to {size} bytes, more than the {MAX_ZIP_READ_BYTES} bytes a run file may "
                         "hold (MAX_ZIP_READ_BYTES)")
    try:
        with np.load(Path(path), allow_pickle=False) as f:
            data = {k: f[k] for k in f.files}
    except ValueError as e:  # e.g. an object array: never unpickled
        raise ValueError(f"{path} is not a readable dp_infer fallback file: {str(e).splitlines()[0]}") from None
    if _MARKER not in data:
        raise ValueError(f"{path} is not a dp_infer fallback file (no {_MARKER!r} array)")
    data["report"] = json.loads(data["report_json"].item())
    for k in [k for k in data if k.endswith("_json") and k != "report_json"]:
        data[k[: -len("_json")]] = json.loads(data[k].item())
    return data
