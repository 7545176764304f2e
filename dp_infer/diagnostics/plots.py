"""Plots for private runs: ArviZ (arviz-plots, matplotlib backend) and privacy/utility charts.

All functions write a PNG and return its :class:`~pathlib.Path` (the figure closed after saving);
the ArviZ plots and :func:`plot_intervals` called without a path return the matplotlib figure
instead (to show in a notebook). Every figure of a run carries its privacy stamp (the eps, delta
spent, from the tree's report) and a legend where several chains or sources are drawn. Importing this module selects matplotlib's non-interactive ``Agg`` backend unless
``pyplot`` is already imported or ``MPLBACKEND`` is set (so notebooks keep theirs).

MCMC plots read only the ``posterior`` and ``sample_stats.diverging`` groups; a non-private
(debug) tree gets a red "NON-PRIVATE" banner in the figure so that a chart cannot be
mistaken for a releasable one.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")

import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

from .._validation import check_nonnegative, check_positive  # noqa: E402
from .mixing_report import quiet_nonfinite  # noqa: E402

__all__ = [
    "plot_trace",
    "plot_rank",
    "plot_autocorr",
    "plot_forest",
    "plot_intervals",
    "privacy_stamp",
    "plot_privacy_utility",
    "plot_budget",
    "write_report_plots",
    "write_report_plots_safe",
    "report_from_file",
]

#: at most this many scalar components per variable are drawn (first ones along each dim).
MAX_COMPONENTS = 6


def _as_tree(dt: Any) -> xr.DataTree:
    if isinstance(dt, xr.DataTree):
        if "posterior" not in dt.children:
            raise ValueError("dt must have a 'posterior' group")
        return dt
    from . import to_datatree

    return to_datatree(dt)


def _limit(dt: xr.DataTree, max_components: int) -> dict | None:
    """coords selecting at most ``max_components`` entries of each non-sample dimension."""
    post = dt["posterior"]
    sel = {}
    for dim, size in post.sizes.items():
        if dim in ("chain", "draw"):
            continue
        if size > max_components:
            sel[dim] = post[dim].values[:max_components] if dim in post.coords else np.arange(max_components)
    return sel or None


def _figure(pc):
    return pc.viz["figure"].item()


def privacy_stamp(report: Mapping | None) -> str:
    """One line for a figure: the (eps, delta) a run spent (its report's ``eps_spent``, else its target
    ``eps``, and ``delta``), or that the figure holds no private release's report."""
    eps = None if not report else report.get("eps_spent", report.get("eps"))
    if eps is None:
        return "no privacy report attached"
    delta = report.get("delta")
    return (f"private release: ε = {float(eps):.3g}"
            + ("" if delta is None else f", δ = {float(delta):.2g}") + " (dp_infer)")


def _stamp(fig, dt: xr.DataTree) -> None:
    """The run's privacy stamp (top left), and the red NON-PRIVATE banner of a debug tree."""
    from . import DEBUG_WARNING, PRIVATE_ATTR, get_report, is_private

    if PRIVATE_ATTR in dt.attrs and not is_private(dt):
        fig.text(0.005, 0.005, DEBUG_WARNING, color="red", ha="left", va="bottom", fontsize=8, weight="bold",
                 bbox={"facecolor": "white", "edgecolor": "red", "alpha": 0.9})
        return
    fig.text(0.005, 0.995, privacy_stamp(get_report(dt)), ha="left", va="top", fontsize=7, color="0.3")


def _finish(pc, dt: xr.DataTree, path: str | Path | None):
    """Stamp the figure; write it to ``path`` and close it (returns the path), or return the figure."""
    fig = _figure(pc)
    _stamp(fig, dt)
    return _figure_or_file(fig, path, pc.savefig)


def _figure_or_file(fig, path: str | Path | None, savefig=None):
    """``fig`` itself when ``path`` is None; else write it (``savefig``, default the figure's own) to
    ``path`` as a 100-dpi PNG, creating the folder, close it and return the path."""
    import matplotlib.pyplot as plt

    if path is None:
        return fig
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        (savefig or fig.savefig)(path, dpi=100)
    finally:
        plt.close(fig)
    return path


def _save(fig, path: str | Path) -> Path:
    """Lay out and write a matplotlib figure as PNG (creating the folder)."""
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def _arviz_plot(name: str, dt: Any, path: str | Path | None, var_names, max_components: int, coords=None,
                legend: bool = False, **kw):
    """Call ``az.<name>`` with the matplotlib backend on ``coords`` (ArviZ's selection, e.g.
    ``{"feature": ["age", "hours-per-week"]}``) or else the first ``max_components`` per variable;
    ``legend``: a legend of the chains (when there are several)."""
    import arviz as az

    dt = _as_tree(dt)
    with quiet_nonfinite():
        pc = getattr(az, name)(dt, var_names=var_names, coords=coords if coords is not None else
                               _limit(dt, max_components), backend="matplotlib", **kw)
    if legend and dt["posterior"].sizes.get("chain", 1) > 1:
        try:
            pc.add_legend("chain")
        except Exception:  # noqa: BLE001 - arviz-plots' legend API is experimental: the plot stands without it
            pass
    return _finish(pc, dt, path)


def plot_trace(dt: Any, path: str | Path | None = None, *, var_names: Sequence[str] | None = None,
               max_components: int = MAX_COMPONENTS, coords: Mapping | None = None):
    """Trace + marginal density per component (``az.plot_trace_dist``, one row each, titled by its
    coordinate: ``theta[age]``), divergences as a rug, chains in the legend. Returns the PNG's path, or
    the figure when ``path`` is None."""
    return _arviz_plot("plot_trace_dist", dt, path, var_names, max_components, coords, legend=True, compact=False)


def plot_rank(dt: Any, path: str | Path | None = None, *, var_names: Sequence[str] | None = None,
              max_components: int = MAX_COMPONENTS, coords: Mapping | None = None):
    """Rank ECDF-difference plot per variable and chain (``az.plot_rank``), chains in the legend.
    Returns the PNG's path, or the figure when ``path`` is None."""
    return _arviz_plot("plot_rank", dt, path, var_names, max_components, coords, legend=True)


def plot_forest(dt: Any, path: str | Path | None = None, *, var_names: Sequence[str] | None = None,
                max_components: int = 30, coords: Mapping | None = None):
    """Mean and equal-tailed intervals of the draws per parameter, chains combined (``az.plot_forest``).
    Returns the PNG's path, or the figure when ``path`` is None."""
    return _arviz_plot("plot_forest", dt, path, var_names, max_components, coords, combined=True)


def plot_autocorr(dt: Any, path: str | Path | None = None, *, var_names: Sequence[str] | None = None,
                  max_components: int = MAX_COMPONENTS, max_lag: int | None = None):
    """Autocorrelation per variable and chain (``az.plot_autocorr``). Returns the PNG's path, or the
    figure when ``path`` is None."""
    return _arviz_plot("plot_autocorr", dt, path, var_names, max_components, max_lag=max_lag)


def plot_intervals(intervals: Any, names: Sequence[str] | None = None, *, reference: Mapping | None = None,
                   reference_label: str = "NON-PRIVATE posterior", report: Mapping | None = None,
                   select: Sequence[str] | None = None, path: str | Path | None = None, title: str | None = None):
    """A run's released intervals (:meth:`~dp_infer.infer.run.PrivateRun.intervals`: centre and
    ``[lower, upper]`` per coordinate) beside a reference's (``{"centre": ..., "lower": ..., "upper": ...}``,
    e.g. a non-private posterior's, drawn in grey and labelled ``reference_label``), one row per
    coordinate named by ``names`` (``select``: only those), with a legend and the run's privacy stamp
    (``report``: the run's report). Returns the PNG's path, or the figure when ``path`` is None."""
    import matplotlib.pyplot as plt

    centre = np.asarray(intervals.centre, dtype=np.float64)
    d = centre.size
    names = [f"theta[{j}]" for j in range(d)] if names is None else [str(v) for v in names]
    if len(names) != d:
        raise ValueError(f"names must have {d} entries (one per coordinate), got {len(names)}")
    rows = list(range(d)) if select is None else [names.index(str(v)) for v in select]
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(rows) + 1.6))
    ypos = np.arange(len(rows))[::-1].astype(float)
    lo, hi = np.asarray(intervals.lower)[rows], np.asarray(intervals.upper)[rows]
    prob = getattr(intervals, "prob", None)
    lab = f"private run: released {100 * prob:g}% intervals" if prob else "private run: released intervals"
    ax.hlines(ypos + 0.15, lo, hi, color="C0", lw=2.5, label=lab)
    ax.plot(centre[rows], ypos + 0.15, "o", color="C0")
    if reference is not None:
        rc = np.asarray(reference["centre"], dtype=np.float64)[rows]
        rl, ru = np.asarray(reference["lower"])[rows], np.asarray(reference["upper"])[rows]
        ax.hlines(ypos - 0.15, rl, ru, color="0.45", lw=2.5, label=reference_label)
        ax.plot(rc, ypos - 0.15, "s", color="0.45")
    ax.axvline(0.0, color="k", lw=0.6, ls=":")
    ax.set_yticks(ypos, [names[j] for j in rows])
    ax.set_xlabel("coefficient")
    ax.set_title(title or "released intervals" + (" vs the non-private posterior" if reference is not None else ""))
    ax.legend(loc="best", fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    fig.text(0.995, 0.995, privacy_stamp(report), ha="right", va="top", fontsize=7, color="0.3")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return _figure_or_file(fig, path)


_REPORT_PLOTS = (("trace", plot_trace), ("rank", plot_rank), ("autocorr", plot_autocorr))


def write_report_plots_safe(dt: Any, outdir: str | Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Like :func:`write_report_plots` but collect failures ``(name, message)`` instead of raising."""
    dt = _as_tree(dt)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths, failures = [], []
    for name, fn in _REPORT_PLOTS:
        try:
            paths.append(fn(dt, outdir / f"{name}.png"))
        except Exception as e:  # noqa: BLE001 - reported to the caller by name
            failures.append((name, f"{type(e).__name__}: {e}"))
    return paths, failures


def write_report_plots(dt: Any, outdir: str | Path) -> list[Path]:
    """Write ``trace.png``, ``rank.png`` and ``autocorr.png`` into ``outdir``; return the paths."""
    paths, failures = write_report_plots_safe(dt, outdir)
    if failures:
        raise RuntimeError("; ".join(f"{n}: {m}" for n, m in failures))
    return paths


# ---------------------------------------------------------------------------------------------
# privacy / utility charts (plain matplotlib)
# ---------------------------------------------------------------------------------------------

_Y_KEYS = ("accuracy", "excess_loss", "excess_risk", "value", "metric", "loss", "error")
_ERR_KEYS = ("stderr", "se", "err", "error_bar", "std", "sd")


def _records(table: Any, name: str) -> list[dict]:
    if hasattr(table, "to_dict") and hasattr(table, "columns"):  # pandas DataFrame
        table = table.to_dict(orient="records")
    if isinstance(table, Mapping):
        raise ValueError(f"{name} must be a list of records (dicts), got a single mapping")
    try:
        recs = [dict(r) for r in table]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a list of records (dicts) or a DataFrame") from None
    if not recs:
        raise ValueError(f"{name} must contain at least one record")
    return recs


def plot_privacy_utility(
    table: Any,
    path: str | Path,
    *,
    x: str = "eps",
    y: str | None = None,
    yerr: str | None = None,
    group: str = "method",
    logx: bool | None = None,
    title: str | None = None,
) -> Path:
    """Utility (accuracy or excess loss) against privacy for several methods, with error bars.

    :param table: records (list of dicts or a DataFrame) such as
        ``{"method": "langevin", "eps": 1.0, "accuracy": 0.81, "stderr": 0.01}``.
    :param x: column with the privacy level (default ``"eps"``).
    :param y: utility column (default: the first of accuracy, excess_loss, excess_risk,
        value, metric, loss, error present).
    :param yerr: error-bar column (default: the first of stderr, se, err, error_bar, std,
        sd present; none -> no bars).
    :param group: column naming the method (one line per value; default ``"method"``).
    :param logx: log-scale x axis (default: when x spans more than a factor of 10).
    """
    import matplotlib.pyplot as plt

    recs = _records(table, "table")
    keys = set().union(*recs)
    if x not in keys:
        raise ValueError(f"x column {x!r} not found in table (columns: {sorted(keys)})")
    if y is None:
        y = next((k for k in _Y_KEYS if k in keys), None)
        if y is None:
            raise ValueError(f"table has no utility column; pass y= one of {sorted(keys)}")
    elif y not in keys:
        raise ValueError(f"y column {y!r} not found in table (columns: {sorted(keys)})")
    if yerr is None:
        yerr = next((k for k in _ERR_KEYS if k in keys), None)
    elif yerr not in keys:
        raise ValueError(f"yerr column {yerr!r} not found in table (columns: {sorted(keys)})")

    groups: dict[str, list[dict]] = {}
    for r in recs:
        groups.setdefault(str(r.get(group, "all")), []).append(r)
    xs_all = np.array([float(r[x]) for r in recs if r.get(x) is not None], dtype=np.float64)
    if logx is None:
        pos = xs_all[xs_all > 0]
        logx = pos.size > 0 and pos.max() / pos.min() > 10
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    try:
        for name, rows in groups.items():
            rows = sorted((r for r in rows if r.get(x) is not None and r.get(y) is not None), key=lambda r: float(r[x]))
            if not rows:
                continue
            xv = np.array([float(r[x]) for r in rows])
            yv = np.array([float(r[y]) for r in rows])
            ev = None
            if yerr is not None:
                ev = np.array([float(r[yerr]) if r.get(yerr) is not None else np.nan for r in rows])
                ev = np.where(np.isfinite(ev), ev, 0.0)
            ax.errorbar(xv, yv, yerr=ev, marker="o", capsize=3, label=name)
        if logx:
            from matplotlib.ticker import NullFormatter, ScalarFormatter

            ax.set_xscale("log")
            ax.set_xticks(sorted(set(xs_all[xs_all > 0].tolist())))
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("privacy budget " + ("ε" if x == "eps" else x))
        ax.set_ylabel(y.replace("_", " "))
        ax.set_title(title or f"{y.replace('_', ' ')} vs privacy")
        ax.grid(True, alpha=0.3)
        if len(groups) > 1 or group in keys:
            ax.legend()
        return _save(fig, path)
    finally:
        plt.close(fig)


def plot_budget(spent_records: Any, total_budget: float, path: str | Path, *, key: str = "eps",
                title: str | None = None) -> Path:
    """Spent vs remaining privacy budget.

    Left: eps charged per run (bars) and the cumulative spend (line) against the total budget
    (dashed). Right: one stacked bar, spent vs remaining; an overspent budget is drawn in red.
    Basic composition (sums of eps) is what is drawn: pass the accountant's own cumulative
    values as ``key`` if it composes more tightly.

    :param spent_records: records ``{"run": name, "eps": value}`` in the order spent.
    :param total_budget: the total eps budget (> 0).
    """
    import matplotlib.pyplot as plt

    total = check_positive("total_budget", total_budget)
    recs = [] if spent_records is None else list(spent_records)
    recs = _records(recs, "spent_records") if recs else []
    names, spent = [], []
    for i, r in enumerate(recs):
        if key not in r:
            raise ValueError(f"spent_records[{i}] has no {key!r} entry: {r!r}")
        spent.append(check_nonnegative(f"spent_records[{i}][{key!r}]", r[key]))
        names.append(str(r.get("run", f"run {i + 1}")))
    cum = np.cumsum(spent) if spent else np.array([])
    used = float(cum[-1]) if spent else 0.0
    remaining = max(total - used, 0.0)
    over = used > total * (1 + 1e-12)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8.4, 4.0), gridspec_kw={"width_ratios": [3, 1]})
    try:
        idx = np.arange(len(spent))
        if spent:
            ax1.bar(idx, spent, color="tab:blue", alpha=0.7, label=f"{key} per run")
            ax1.plot(idx, cum, color="tab:red" if over else "tab:orange", marker="o", label="cumulative")
            ax1.set_xticks(idx)
            ax1.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
        else:
            ax1.text(0.5, 0.5, "no runs yet", ha="center", va="center", transform=ax1.transAxes)
        ax1.axhline(total, color="k", linestyle="--", label=f"total budget {total:g}")
        ax1.set_ylabel(key)
        ax1.set_ylim(0, max(total, used) * 1.15)
        ax1.legend(fontsize=8)
        ax1.grid(True, axis="y", alpha=0.3)
        ax2.bar([0], [min(used, total)], color="tab:red" if over else "tab:blue", label=f"spent {used:.3g}")
        ax2.bar([0], [remaining], bottom=[min(used, total)], color="tab:green", alpha=0.6,
                label=f"remaining {remaining:.3g}")
        if over:
            ax2.bar([0], [used - total], bottom=[total], color="darkred", hatch="//", label=f"over by {used - total:.3g}")
        ax2.set_xticks([])
        ax2.set_ylim(0, max(total, used) * 1.15)
        ax2.legend(fontsize=7, loc="upper center")
        frac = used / total if total > 0 else math.inf
        fig.suptitle(title or f"privacy budget: {used:.3g} of {total:g} spent ({100 * frac:.0f}%)"
                     + (" — OVERSPENT" if over else ""), color="red" if over else "black")
        return _save(fig, path)
    finally:
        plt.close(fig)


def report_from_file(path: str | Path, outdir: str | Path | None = None, *, tree=None) -> str:
    """Load a run saved with :func:`dp_infer.diagnostics.save`; return summary + mixing checks +
    privacy report text and write trace/rank/autocorrelation plots as PNG into ``outdir``
    (default ``<file stem>_report/`` next to the file). Used by ``dp-infer report RUN_FILE``.
    ``tree``: the run's DataTree when the caller has read ``path`` itself (a fallback file).
    """
    from . import check_mixing, load, summary

    path = Path(path)
    dt = load(path) if tree is None else tree
    outdir = Path(outdir) if outdir is not None else path.with_name(path.stem + "_report")
    parts = [f"Run file: {path}", summary(dt), "", str(check_mixing(dt))]
    paths, failures = write_report_plots_safe(dt, outdir)
    if paths:
        parts.append("\nPlots written:")
        parts.extend(f"  {p}" for p in paths)
    for name, err in failures:
        parts.append(f"plot {name} failed: {err}")
    return "\n".join(parts)
