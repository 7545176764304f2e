"""A persistent privacy-budget ledger per dataset (SQLite, standard library only).

Every run that touches a private dataset is *charged* before any draw is released::

    ledger = Ledger("~/.dp_infer/ledger.sqlite")         # or Ledger() -> default_ledger_path()
    ledger.register_dataset("adult", eps_budget=3.0, delta_budget=1e-6)
    with charged(ledger, "adult", plan.event, "gibbs-chain-4") as receipt:
        draws = run_sampler(...)                          # only after the charge is on disk

Rules
-----
* The ledger stores, per dataset, the (eps, delta) budget and one row per charged run holding the
  run's :class:`~dp_infer.privacy.events.PrivacyEvent` as JSON (``event.to_dict()``).
* The amount spent is never a running sum of per-run epsilons: it is recomputed by composing
  *every* recorded event of the dataset with :class:`~dp_infer.privacy.accountant.Accountant`
  and converting to eps at the dataset's ``delta_budget``.
* :meth:`Ledger.charge` composes the recorded events plus the new one inside a single
  ``BEGIN IMMEDIATE`` write transaction; if the composed eps exceeds ``eps_budget`` the run is
  refused (:class:`BudgetExceededError`) and nothing is written. Since the check and the insert
  happen under SQLite's write lock, concurrent processes are serialised and cannot jointly
  overspend. The row is committed (fsync'd by SQLite) before :meth:`charge` returns.
* A run is recorded with status ``"charged"``; :meth:`Ledger.complete` marks it ``"completed"``.
  Both statuses count. A run that crashed or was killed stays ``"charged"`` and is never refunded
  automatically (its draws may have been partially computed or released).

Default location
----------------
:func:`default_ledger_path` returns ``$DP_INFER_LEDGER`` if that environment variable is set
(``~`` expanded), else ``~/.dp_infer/ledger.sqlite``. The parent directory is created on first use.
Use a local file system: SQLite locking is unreliable on some network file systems (NFS).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import time
from pathlib import Path
from typing import Iterator

from .._validation import check_delta, check_positive, check_positive_int
from .accountant import Accountant
from .events import PrivacyEvent, event_from_dict
from .ledger_records import (
    LEDGER_ENV_VAR, BudgetExceededError, ChargeReceipt, UnknownDatasetError, check_dataset_id,
    check_run_label, iso, serialise_event, default_ledger_path,
)

__all__ = [
    "Ledger",
    "ChargeReceipt",
    "BudgetExceededError",
    "UnknownDatasetError",
    "default_ledger_path",
    "LEDGER_ENV_VAR",
]

_SCHEMA_VERSION = 1
_BUSY_TIMEOUT_S = 120.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS datasets (
    dataset_id   TEXT PRIMARY KEY,
    eps_budget   REAL NOT NULL,
    delta_budget REAL NOT NULL,
    created_at   REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset_id   TEXT NOT NULL REFERENCES datasets(dataset_id),
    run_label    TEXT NOT NULL,
    event_json   TEXT NOT NULL,
    count        INTEGER NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('charged', 'completed')),
    charged_at   REAL NOT NULL,
    completed_at REAL,
    eps_run      REAL NOT NULL,
    eps_after    REAL NOT NULL,
    pid          INTEGER
);
CREATE INDEX IF NOT EXISTS runs_by_dataset ON runs(dataset_id, run_id);
"""


class Ledger:
    """Persistent per-dataset privacy ledger in an SQLite file.

    Parameters
    ----------
    path : str or Path, optional
        The SQLite file (created with its parent directory if missing). ``None`` uses
        :func:`default_ledger_path`. ``":memory:"`` is refused (a ledger must persist).

    Each method opens its own short-lived connection, so a ``Ledger`` can be shared across
    threads and passed to (or re-created in) other processes.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        if path is None:
            path = default_ledger_path()
        if not isinstance(path, (str, os.PathLike)) or str(path).strip() in ("", ":memory:"):
            raise ValueError(f"path must be a file path for the ledger database, got {path!r}")
        self.path = Path(path).expanduser()
        if self.path.exists() and self.path.is_dir():
            raise ValueError(f"path must be a file, not a directory: {str(self.path)!r}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._init_schema()
        except sqlite3.DatabaseError as e:  # a file that is not an SQLite database, or a corrupt one
            raise ValueError(f"{str(self.path)!r} is not a dp_infer ledger (SQLite database): {e}") from None

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(str(self.path), timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA foreign_keys = ON")
        con.execute("PRAGMA synchronous = FULL")
        return con

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: holds the database write lock from the first read."""
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            else:
                con.execute("COMMIT")
        finally:
            con.close()

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for multi-statement reads."""
        con = self._connect()
        try:
            con.execute("BEGIN")
            try:
                yield con
            finally:
                con.execute("ROLLBACK")
        finally:
            con.close()

    def _init_schema(self) -> None:
        with self._write() as con:
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    con.execute(stmt)
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                con.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (str(_SCHEMA_VERSION),))
            elif int(row["value"]) != _SCHEMA_VERSION:
                raise ValueError(f"ledger at {str(self.path)!r} has schema_version {row['value']}, "
                                 f"this dp_infer reads schema_version {_SCHEMA_VERSION}")

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _dataset_row(con: sqlite3.Connection, dataset_id: str) -> sqlite3.Row:
        row = con.execute("SELECT * FROM datasets WHERE dataset_id = ?", (dataset_id,)).fetchone()
        if row is None:
            known = [r[0] for r in con.execute("SELECT dataset_id FROM datasets ORDER BY dataset_id")]
            raise UnknownDatasetError(
                f"dataset_id {dataset_id!r} is not registered in this ledger (known: {known}); "
                "call register_dataset(dataset_id, eps_budget, delta_budget) first")
        return row

    @staticmethod
    def _events(con: sqlite3.Connection, dataset_id: str) -> list[tuple[PrivacyEvent, int]]:
        rows = con.execute("SELECT event_json, count FROM runs WHERE dataset_id = ? ORDER BY run_id",
                           (dataset_id,)).fetchall()
        return [(event_from_dict(json.loads(r["event_json"])), int(r["count"])) for r in rows]

    @staticmethod
    def _epsilon(items: list[tuple[PrivacyEvent, int]], delta: float) -> float:
        if not items:
            return 0.0
        eps = float(Accountant(items).get_epsilon(delta))
        return math.inf if math.isnan(eps) else eps

    # ------------------------------------------------------------------ datasets
    def register_dataset(self, dataset_id: str, eps_budget: float, delta_budget: float) -> dict:
        """Register ``dataset_id`` with a total budget (eps_budget in (0, inf), delta_budget in (0, 1)).

        Idempotent when re-registered with the same budget; a different budget raises
        ``ValueError`` (budgets are never changed silently). Returns the dataset's budget dict.
        """
        dataset_id = check_dataset_id(dataset_id)
        eps_budget = check_positive("eps_budget", eps_budget)
        delta_budget = check_delta(delta_budget, "delta_budget")
        with self._write() as con:
            row = con.execute("SELECT * FROM datasets WHERE dataset_id = ?", (dataset_id,)).fetchone()
            if row is None:
                con.execute("INSERT INTO datasets(dataset_id, eps_budget, delta_budget, created_at) "
                            "VALUES (?, ?, ?, ?)", (dataset_id, eps_budget, delta_budget, time.time()))
            elif row["eps_budget"] != eps_budget or row["delta_budget"] != delta_budget:
                raise ValueError(
                    f"dataset_id {dataset_id!r} is already registered with eps_budget {row['eps_budget']!r}, "
                    f"delta_budget {row['delta_budget']!r}; re-registering with eps_budget {eps_budget!r}, "
                    f"delta_budget {delta_budget!r} is refused (a budget cannot be changed)")
        return {"dataset_id": dataset_id, "eps_budget": eps_budget, "delta_budget": delta_budget}

    def datasets(self) -> list[dict]:
        """All registered datasets with their budgets."""
        with self._read() as con:
            rows = con.execute("SELECT dataset_id, eps_budget, delta_budget, created_at FROM datasets "
                               "ORDER BY dataset_id").fetchall()
        return [{"dataset_id": r["dataset_id"], "eps_budget": r["eps_budget"], "delta_budget": r["delta_budget"],
                 "created_at": iso(r["created_at"])} for r in rows]

    # ------------------------------------------------------------------ charging
    def charge(self, dataset_id: str, event: PrivacyEvent, run_label: str = "", *, count: int = 1) -> ChargeReceipt:
        """Charge ``count`` adaptive repetitions of ``event`` (e.g. K chains) to ``dataset_id``.

        Composes every recorded event of the dataset plus this one with the Accountant, at the
        dataset's ``delta_budget``. Raises :class:`BudgetExceededError` (recording nothing) if the
        composed eps exceeds ``eps_budget``; otherwise commits the run with status ``"charged"``
        and returns a :class:`ChargeReceipt`. Call this *before* releasing any draw.
        """
        dataset_id = check_dataset_id(dataset_id)
        run_label = check_run_label(run_label)
        count = check_positive_int("count", count)
        rebuilt, text = serialise_event(event)
        with self._write() as con:
            ds = self._dataset_row(con, dataset_id)
            eps_budget, delta = float(ds["eps_budget"]), float(ds["delta_budget"])
            items = self._events(con, dataset_id)
            eps_before = self._epsilon(items, delta)
            eps_after = self._epsilon(items + [(rebuilt, count)], delta)
            eps_run = self._epsilon([(rebuilt, count)], delta)
            # composition can only add privacy loss: guard against any numerical non-monotonicity
            eps_after = max(eps_after, eps_before, eps_run)
            if not (eps_after <= eps_budget):  # also refuses inf / nan
                raise BudgetExceededError(dataset_id, eps_budget, delta, eps_before, eps_after, eps_run, run_label)
            now = time.time()
            cur = con.execute(
                "INSERT INTO runs(dataset_id, run_label, event_json, count, status, charged_at, eps_run, "
                "eps_after, pid) VALUES (?, ?, ?, ?, 'charged', ?, ?, ?, ?)",
                (dataset_id, run_label, text, count, now, eps_run, eps_after, os.getpid()))
            run_id = int(cur.lastrowid)
        return ChargeReceipt(run_id=run_id, dataset_id=dataset_id, run_label=run_label, eps_run=eps_run,
                             eps_spent=eps_after, eps_remaining=eps_budget - eps_after, eps_budget=eps_budget,
                             delta=delta, charged_at=now, ledger_path=str(self.path))

    def complete(self, receipt: ChargeReceipt | int) -> None:
        """Mark a charged run ``"completed"`` (idempotent). The charge still counts."""
        run_id = receipt.run_id if isinstance(receipt, ChargeReceipt) else receipt
        if isinstance(run_id, bool) or not isinstance(run_id, int):
            raise ValueError(f"receipt must be a ChargeReceipt or an integer run_id, got {receipt!r}")
        with self._write() as con:
            row = con.execute("SELECT status, dataset_id FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise ValueError(f"receipt (run_id {run_id}) is not in the ledger at {str(self.path)!r}")
            if isinstance(receipt, ChargeReceipt) and row["dataset_id"] != receipt.dataset_id:
                raise ValueError(f"receipt run_id {run_id} belongs to dataset {row['dataset_id']!r}, "
                                 f"not {receipt.dataset_id!r}")
            if row["status"] == "charged":
                con.execute("UPDATE runs SET status = 'completed', completed_at = ? WHERE run_id = ?",
                            (time.time(), run_id))

    # ------------------------------------------------------------------ queries
    def spent(self, dataset_id: str) -> dict:
        """Composed spend of all recorded runs (charged and completed) at the dataset's delta_budget.

        Keys: eps, delta (= delta_budget, the delta at which eps is stated), n_runs, n_charged,
        n_completed, eps_budget, delta_budget, remaining_eps (= eps_budget - eps).
        """
        dataset_id = check_dataset_id(dataset_id)
        with self._read() as con:
            ds = self._dataset_row(con, dataset_id)
            items = self._events(con, dataset_id)
            counts = dict(con.execute("SELECT status, COUNT(*) FROM runs WHERE dataset_id = ? GROUP BY status",
                                      (dataset_id,)).fetchall())
        eps_budget, delta = float(ds["eps_budget"]), float(ds["delta_budget"])
        eps = self._epsilon(items, delta)
        return {"eps": eps, "delta": delta, "n_runs": len(items), "n_charged": int(counts.get("charged", 0)),
                "n_completed": int(counts.get("completed", 0)), "eps_budget": eps_budget,
                "delta_budget": delta, "remaining_eps": eps_budget - eps}

    def accountant(self, dataset_id: str) -> Accountant:
        """An Accountant holding every recorded event of ``dataset_id`` (for full reports)."""
        dataset_id = check_dataset_id(dataset_id)
        with self._read() as con:
            self._dataset_row(con, dataset_id)
            return Accountant(self._events(con, dataset_id))

    def history(self, dataset_id: str) -> list[dict]:
        """One record per run, oldest first.

        Keys: run_id, run_label, status ("charged" | "completed"), charged_at / completed_at (ISO
        8601 UTC), time (unix seconds of the charge), event (dict), count, eps_run (the run alone),
        eps_after (composed eps of the dataset right after this charge), delta, pid.
        """
        dataset_id = check_dataset_id(dataset_id)
        with self._read() as con:
            ds = self._dataset_row(con, dataset_id)
            rows = con.execute("SELECT * FROM runs WHERE dataset_id = ? ORDER BY run_id", (dataset_id,)).fetchall()
        return [{"run_id": r["run_id"], "run_label": r["run_label"], "status": r["status"],
                 "time": r["charged_at"], "charged_at": iso(r["charged_at"]),
                 "completed_at": iso(r["completed_at"]), "event": json.loads(r["event_json"]),
                 "count": r["count"], "eps_run": r["eps_run"], "eps_after": r["eps_after"],
                 "delta": float(ds["delta_budget"]), "pid": r["pid"]} for r in rows]

    def records_for_plot(self, dataset_id: str) -> list[dict]:
        """Rows for a spent-vs-remaining plot, oldest first.

        Keys: run (label, or ``"run <id>"`` if unlabelled), run_id, status, eps_run (the run alone
        at delta_budget), eps_cumulative (composed eps after the run), eps_remaining, eps_budget.
        ``eps_cumulative`` is the composition, not the sum of ``eps_run`` (composition is sublinear).
        """
        hist = self.history(dataset_id)
        with self._read() as con:
            budget = float(self._dataset_row(con, dataset_id)["eps_budget"])
        return [{"run": h["run_label"] or f"run {h['run_id']}", "run_id": h["run_id"], "status": h["status"],
                 "eps_run": h["eps_run"], "eps_cumulative": h["eps_after"],
                 "eps_remaining": budget - h["eps_after"], "eps_budget": budget} for h in hist]

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"


# ---------------------------------------------------------------------- the one charge protocol
def open_ledger(ledger, *, dataset_id: str | None = None, budget=None) -> Ledger | None:
    """``ledger`` as a :class:`Ledger`: a Ledger, a file path, or None (no ledger: returns None).

    ``budget`` = ``(eps_budget, delta_budget)`` registers (or re-confirms) the budget of
    ``dataset_id`` first; it needs a ledger. Checked before anything is charged or read.
    """
    if budget is not None and ledger is None:
        raise ValueError("budget needs a ledger (the file that keeps the spend)")
    if ledger is None:
        return None
    if isinstance(ledger, Ledger):
        led = ledger
    elif isinstance(ledger, (str, os.PathLike)):
        led = Ledger(ledger)
    else:
        raise ValueError(f"ledger must be a dp_infer.privacy.ledger.Ledger or a file path, got {type(ledger).__name__}")
    if budget is not None:
        eps_budget, delta_budget = budget
        led.register_dataset(check_dataset_id(dataset_id), eps_budget, delta_budget)
    return led


def unique_run_label(label: str) -> str:
    """A seed-free, unique ledger label: ``label``, the UTC time and a random id."""
    import uuid

    label = check_run_label(label)
    return f"{label} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def charged(ledger, dataset_id: str, event: PrivacyEvent, label: str, *, budget=None, count: int = 1,
            on_charge=None) -> Iterator[ChargeReceipt | None]:
    """THE charge protocol of every entry point (Python API, CLI, estimators, Rashomon, extend).

    Usage, after every input has been checked and the plan made (nothing private read yet)::

        with charged(ledger, dataset_id, plan.event, "dp_infer fit trajectory") as receipt:
            run = sample(...)          # the private computation and the release

    * ``ledger``: a :class:`Ledger`, its file, or None. None charges nothing and yields None
      (the caller says so to its user: the spend is then recorded nowhere).
    * On enter the event is composed with the dataset's recorded runs and charged (or refused with
      :class:`BudgetExceededError`, recording nothing) BEFORE the body runs: nothing is released
      before the charge is on disk. ``on_charge(led, receipt)`` is called right after (the CLI
      prints the spend).
    * On a clean exit the run is marked ``"completed"``. If the body raises (or the process dies),
      the row stays ``"charged"`` and keeps counting: the private data may have been read and part
      of the release computed, so the spend is never refunded.
    """
    led = open_ledger(ledger, dataset_id=dataset_id, budget=budget)
    if led is None:
        yield None
        return
    receipt = led.charge(dataset_id, event, unique_run_label(label), count=count)
    if on_charge is not None:
        on_charge(led, receipt)
    yield receipt
    led.complete(receipt)


__all__ += ["open_ledger", "unique_run_label", "charged"]
