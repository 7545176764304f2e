"""Human-readable text: the privacy report block and an ArviZ summary beside it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import xarray as xr

from .export import to_datatree
from .mixing_report import quiet_nonfinite
from .privacy_report import rdp_curve, get_report, is_private, privacy_status, report_to_dict, target_statement

# ---------------------------------------------------------------------------------------------
# human-readable output
# ---------------------------------------------------------------------------------------------


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)) and len(v) > 8:
        return "[" + ", ".join(_fmt(x) for x in v[:4]) + f", ... ({len(v)} values)]"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items()) + "}"
    return str(v)


_REPORT_LABELS = (
    ("route", "route"),
    ("mechanism", "mechanism"),
    ("beta", "inverse temperature beta"),
    ("step_size", "step size h"),
    ("horizon", "horizon (Langevin time)"),
    ("num_steps", "steps per chain"),
    ("num_chains", "chains"),
    ("friction", "friction"),
    ("relaxation_time", "relaxation time (steps)"),
)


def format_report(report: Any) -> str:
    """A privacy report/plan as a text block for humans (also used by ``dp-infer report``).

    Shows the guarantee ((eps, delta), mu-GDP or RDP), the sampling accuracy ``tau`` and
    the resulting overall ``(eps, delta + (1 + e^eps) tau)`` (DESIGN invariant 6) as two
    separate parameters, the sampler parameters, the chain cost and the assumptions.
    ``report`` may be a mapping, an object with ``.as_dict()`` or a DataTree from
    :func:`to_datatree` (its private/non-private status is shown too).
    """
    status = None
    if isinstance(report, xr.DataTree):
        status = privacy_status(report)
        rep = get_report(report)
    else:
        rep = report_to_dict(report)
    lines = ["Privacy report (dp_infer)"]
    bar = "-" * 60
    lines.append(bar)
    if status:
        lines.append(f"  release                 : {status}")
    statement = target_statement(rep)
    if statement is not None:
        lines.append(f"  draws                   : {statement}")
    if rep is None:
        lines.append("  (no privacy report attached: the privacy of this run is UNKNOWN)")
        lines.append(bar)
        return "\n".join(lines)
    used = set()
    eps, delta = rep.get("eps"), rep.get("delta")
    if eps is not None:
        g = f"({_fmt(eps)}, {_fmt(delta) if delta is not None else 0})-DP"
        lines.append(f"  guarantee               : {g}")
        used |= {"eps", "delta"}
    if rep.get("mu") is not None:
        lines.append(f"  Gaussian DP             : mu = {_fmt(rep['mu'])}")
        used.add("mu")
    if rep.get("rho") is not None:
        lines.append(f"  zCDP                    : rho = {_fmt(rep['rho'])}")
        used.add("rho")
    if rep.get("rdp") is not None:
        curve = rdp_curve(rep["rdp"])
        if curve:
            pairs = ", ".join(f"a={a:g}: {r:.4g}" for a, r in list(zip(*curve))[:6])
            lines.append(f"  RDP curve               : {pairs}{' ...' if len(curve[0]) > 6 else ''}")
        else:
            lines.append(f"  RDP                     : {_fmt(rep['rdp'])}")
        used.add("rdp")
    tau = rep.get("sampling_error_tv")
    if tau is not None:
        used.add("sampling_error_tv")
        lines.append(f"  sampling error (TV)     : tau = {_fmt(tau)}")
        if eps is not None and isinstance(tau, (int, float)):
            try:
                extra = (1.0 + math.exp(float(eps))) * float(tau)
            except OverflowError:
                extra = math.inf
            total = (float(delta) if delta is not None else 0.0) + extra
            lines.append(
                f"  overall, with tau       : ({_fmt(eps)}, {total:.6g})-DP  [delta + (1 + e^eps) tau]"
            )
    for key, label in _REPORT_LABELS:
        if rep.get(key) is not None:
            lines.append(f"  {label:<24}: {_fmt(rep[key])}")
            used.add(key)
    k = rep.get("num_chains")
    if isinstance(k, int) and k > 1:
        lines.append(f"  chain cost              : {k} chains compose (mu x sqrt(K), RDP x K)")
    assumptions = rep.get("assumptions")
    used.add("assumptions")
    others = {k: v for k, v in rep.items() if k not in used}
    if others:
        lines.append("  other:")
        for k, v in others.items():
            lines.append(f"    {k:<22}: {_fmt(v)}")
    if assumptions:
        lines.append("  assumptions:")
        items = assumptions if isinstance(assumptions, list) else [assumptions]
        for a in items:
            lines.append(f"    - {_fmt(a)}")
    lines.append(bar)
    return "\n".join(lines)


def summary(dt: Any, report: Any = None, *, var_names: Sequence[str] | None = None) -> str:
    """``az.summary`` of the posterior with the privacy report beside it, as text.

    ``dt`` may be a DataTree or anything :func:`to_datatree` accepts; ``report`` defaults to
    the one stored in ``dt``. A debug (non-private) tree is flagged in the banner.
    """
    import arviz as az
    import pandas as pd

    if not isinstance(dt, xr.DataTree):
        dt = to_datatree(dt, report)
    rep = report_to_dict(report) if report is not None else get_report(dt)
    block = format_report(rep)
    status = privacy_status(dt)
    block = (f"{status}\n" if is_private(dt) else f"!!! {status} !!!\n") + block
    with quiet_nonfinite():
        table = az.summary(dt, var_names=list(var_names) if var_names else None)
    with pd.option_context("display.max_rows", 200, "display.width", 140):
        text = str(table)
    statement = target_statement(rep)
    if statement is None:
        title = "Summary of the released draws (ArviZ; the report does not say whether they are a posterior)"
    elif rep.get("target") == "posterior":
        title = f"Posterior summary (ArviZ): {statement}"
    else:
        title = f"Estimate-path summary (ArviZ): {statement}"
    warn = _mixing_warnings(dt, rep)
    if warn:
        title += "\n" + "\n".join(f"WARNING: {w}" for w in warn)
    return f"{block}\n\n{title}\n{text}"


def _mixing_warnings(dt, rep) -> list[str]:
    """check_mixing's warnings on the released draws (post-processing); [] if it cannot run."""
    from .mixing import check_mixing

    try:
        with quiet_nonfinite():
            return list(check_mixing(dt, rep).warnings)
    except Exception:  # noqa: BLE001 - a tree without draws to check: the summary stands alone
        return []
