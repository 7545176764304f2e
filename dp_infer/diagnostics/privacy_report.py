"""The privacy report attached to an exported tree: attribute names, conversion of plans and
events to a plain dict, the private / non-private / unknown status, and the cost of chains."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from .._validation import check_delta, check_positive, check_positive_int
from ..privacy.conversions import gdp_epsilon, rdp_epsilon

# ---------------------------------------------------------------------------------------------
# attribute names (documented, stable: files written today must be readable tomorrow)
# ---------------------------------------------------------------------------------------------

#: root attribute: ``"true"`` for a release covered by an attached, matching privacy report,
#: ``"false"`` for a debug export, ``"unknown"`` when no matching report is attached.
PRIVATE_ATTR = "dp_infer_private"
#: root attribute (status ``"unknown"`` only): why the tree is not marked private.
UNKNOWN_REASON_ATTR = "dp_infer_privacy_unknown_reason"
#: root attribute: the whole privacy report / plan, one structured attribute (a mapping in memory,
#: JSON text inside netCDF files; files of format 1 stored JSON text in memory too).
REPORT_ATTR = "dp_infer_privacy_report"
#: root attribute: a one-line flat summary of the report, readable by any netCDF-3 tool.
SUMMARY_ATTR = "dp_infer_privacy_summary"
#: root attribute present on debug exports only.
WARNING_ATTR = "warning"
DEBUG_WARNING = "NON-PRIVATE DEBUG EXPORT: contains data-dependent statistics; do not release"
#: root attribute: JSON list of the fields that were present in the run but not exported.
DROPPED_ATTR = "dp_infer_dropped"
#: root attribute (debug only): JSON list of exported variables that are NOT covered.
NONPRIVATE_VARS_ATTR = "dp_infer_nonprivate_vars"
FORMAT_ATTR = "dp_infer_format"
FORMAT_VERSION = "1"
#: report keys copied as flat scalar root attributes ``dp_infer_<key>`` (when scalar).
FLAT_REPORT_KEYS = (
    "route",
    "eps",
    "delta",
    "mu",
    "rho",
    "beta",
    "step_size",
    "horizon",
    "num_steps",
    "num_chains",
    "sampling_error_tv",
    "relaxation_time",
)
FLAT_PREFIX = "dp_infer_"
JSON_ATTRS_KEY = "_dp_infer_json_attrs"  # zip/netCDF-3 format: attrs stored as JSON
DEFAULT_THETA_NAME = "theta"
#: root attribute: what the draws are ("posterior (tempered at beta = ...)" or "estimate path, not a posterior")
DRAWS_ATTR = "dp_infer_draws"
#: the words every estimate-mode output carries
ESTIMATE_STATEMENT = "estimate path, not a posterior"


def target_statement(report: Any) -> str | None:
    """What the released draws are, in words, from a report's ``target`` (None if not recorded).

    ``"posterior (tempered at beta = B, beta/n = R)"`` for the posterior mode; for the estimate
    mode ``"estimate path, not a posterior (...)"``: its plan optimises a point estimate, so its
    draws need not mix and their spread is not posterior uncertainty.
    """
    if not isinstance(report, Mapping):
        return None
    target = report.get("target")
    if target == "posterior":
        beta, n = report.get("beta"), report.get("n")
        if isinstance(beta, (int, float)) and isinstance(n, (int, float)) and n > 0:
            return f"posterior (tempered at beta = {beta:.4g}, beta/n = {beta / n:.3g})"
        return "posterior (tempered)"
    if target == "estimate":
        return (f"{ESTIMATE_STATEMENT} (target='estimate': the plan optimises a point estimate; the draws "
                "need not mix and their spread is not posterior uncertainty; use target='posterior')")
    return None


# ---------------------------------------------------------------------------------------------
# report handling
# ---------------------------------------------------------------------------------------------


def jsonable(obj: Any) -> Any:
    """Recursively convert a report to JSON-serialisable Python objects."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if hasattr(obj, "as_dict") and callable(obj.as_dict):
        return jsonable(obj.as_dict())
    if hasattr(obj, "to_dict") and callable(obj.to_dict) and not hasattr(obj, "__array__"):
        return jsonable(obj.to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "__array__"):
        arr = np.asarray(obj)
        return jsonable(arr.item() if arr.ndim == 0 else arr.tolist())
    return str(obj)


def report_to_dict(report: Any) -> dict | None:
    """A privacy report/plan as a plain JSON-serialisable ``dict`` (``None`` stays ``None``).

    Accepts a mapping, any object with ``.as_dict()`` or ``.to_dict()`` (e.g. a
    :mod:`dp_infer.privacy` event), a dataclass, a JSON string, or a :class:`xarray.DataTree`
    written by :func:`to_datatree` (its stored report is returned). NumPy/JAX scalars and
    arrays become floats/lists; unknown objects become ``str(obj)``.

    Event-shaped dicts are flattened: the entries of a ``metadata`` mapping (route, beta,
    num_chains, mu_per_chain, ...) are lifted to the top level (top-level keys win), and
    ``tv_error`` is also exposed as ``sampling_error_tv``.
    """
    if report is None:
        return None
    if isinstance(report, xr.DataTree):
        return get_report(report)
    if isinstance(report, str):
        try:
            report = json.loads(report)
        except json.JSONDecodeError:
            raise ValueError("report must be a mapping, an object with .as_dict() or a JSON string") from None
    if not (
        isinstance(report, Mapping)
        or (hasattr(report, "as_dict") and callable(report.as_dict))
        or (hasattr(report, "to_dict") and callable(report.to_dict))
        or (dataclasses.is_dataclass(report) and not isinstance(report, type))
    ):
        raise ValueError(
            "report must be a mapping, an object with .as_dict() or .to_dict(), a dataclass or None, "
            f"got {type(report).__name__}"
        )
    out = jsonable(report)
    if not isinstance(out, dict):
        raise ValueError(f"report.as_dict() must return a mapping, got {type(out).__name__}")
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out = {**meta, **{k: v for k, v in out.items() if k != "metadata"}}
    if out.get("tv_error") is not None and "sampling_error_tv" not in out:
        out["sampling_error_tv"] = out["tv_error"]
    return out


def get_report(dt: xr.DataTree) -> dict | None:
    """The privacy report stored by :func:`to_datatree` in ``dt`` (``None`` if absent)."""
    raw = dt.attrs.get(REPORT_ATTR)
    if raw is None:
        return None
    if isinstance(raw, Mapping):
        return json.loads(json.dumps(jsonable(raw)))  # a copy the caller may change
    return json.loads(raw)


def is_private(dt: xr.DataTree) -> bool:
    """True iff ``dt`` was exported by :func:`to_datatree` without ``debug`` AND with a privacy
    report that matches its draws (see :func:`privacy_status`).

    A tree not produced by :func:`to_datatree` (no ``dp_infer_private`` attribute) is
    treated as non-private.
    """
    return str(dt.attrs.get(PRIVATE_ATTR, "false")).lower() == "true"


def privacy_status(dt: xr.DataTree) -> str:
    """One line for humans: ``PRIVATE release ...``, ``NON-PRIVATE ...`` or ``privacy UNKNOWN ...``."""
    flag = str(dt.attrs.get(PRIVATE_ATTR, "missing")).lower()
    if flag == "true":
        return "PRIVATE release (theta draws only, covered by the attached privacy report)"
    if flag == "false":
        return f"NON-PRIVATE — {DEBUG_WARNING}"
    if flag == "unknown":
        return f"privacy UNKNOWN — {dt.attrs.get(UNKNOWN_REASON_ATTR, 'no matching privacy report')}"
    return "privacy UNKNOWN — this tree was not exported by dp_infer.diagnostics.to_datatree"


def report_mismatch(report: Mapping[str, Any] | None, num_chains: int, num_draws: int) -> str | None:
    """Why ``report`` does not cover draws of shape (num_chains, num_draws); None if it does.

    A report covers a tree when it carries a privacy event and (eps, delta), and the tree holds
    no more chains and no more draws per chain than the plan released (a subset of released
    draws is post-processing)."""
    if report is None:
        return "no privacy report is attached (a run made without a dp_infer plan)"
    if report.get("event") is None and report.get("accountant") is None and report.get("kind") is None:
        return "the attached report carries no privacy event to recompute the guarantee from"
    k = report.get("num_chains")
    if isinstance(k, (int, float)) and num_chains > k:
        return f"the tree holds {num_chains} chains but the report covers {int(k)}"
    d = report.get("num_draws")
    if report.get("release") in (None, "trajectory") and isinstance(d, (int, float)) and num_draws > d:
        return f"the tree holds {num_draws} draws per chain but the report covers {int(d)}"
    if report.get("release") in ("last_iterate", "purified_mean") and num_draws > 1:
        return f"route releases one draw per chain but the tree holds {num_draws}"
    return None



# ---------------------------------------------------------------------------------------------
# privacy cost of chains
# ---------------------------------------------------------------------------------------------


def rdp_curve(value: Any) -> tuple[list[float], list[float]] | None:
    if isinstance(value, Mapping):
        orders = value.get("orders", value.get("alphas"))
        vals = value.get("rdp", value.get("values", value.get("eps")))
        if orders is not None and vals is not None:
            return [float(x) for x in orders], [float(x) for x in vals]
        return None
    if isinstance(value, (list, tuple)) and value and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        return [float(p[0]) for p in value], [float(p[1]) for p in value]
    return None


def privacy_cost_of_chains(report: Any, num_chains: int) -> dict:
    """Privacy of ``num_chains`` independent chains on the same data, from a report.

    K chains on the same data compose (DESIGN invariant 3): for Gaussian DP
    ``mu_K = sqrt(K) * mu_1``; for Renyi DP ``eps_K(a) = K * eps_1(a)`` at every order ``a``
    (and ``rho_K = K rho_1`` for zCDP-style ``rdp(a) = rho a``). Running more chains to get a
    multi-chain R-hat therefore costs privacy; :func:`single_chain_rhat` does not.

    Per-chain values are read from ``mu_per_chain`` / ``rho_per_chain`` / ``rdp_per_chain``
    (curve: ``{"orders": [...], "rdp": [...]}`` or a list of ``[order, value]`` pairs); if only
    totals ``mu`` / ``rho`` / ``rdp`` are given they are taken to cover the report's
    ``num_chains`` chains (default 1) and divided accordingly. If the report has ``delta``
    the resulting eps is included (GDP: exact conversion; RDP: :func:`dp_infer.privacy.conversions.rdp_epsilon`).

    :returns: dict with ``num_chains`` and whichever of ``mu``, ``mu_per_chain``, ``rho``,
        ``rho_per_chain``, ``rdp`` (curve), ``eps``, ``delta`` apply.
    """
    rep = report_to_dict(report)
    if rep is None:
        raise ValueError("report must be a privacy report (mapping or .as_dict()), got None")
    k = check_positive_int("num_chains", num_chains)
    k0 = rep.get("num_chains", 1)
    k0 = check_positive_int("report['num_chains']", k0) if k0 is not None else 1
    out: dict[str, Any] = {"num_chains": k}
    delta = rep.get("delta")
    found = False

    mu1 = rep.get("mu_per_chain")
    if mu1 is None and isinstance(rep.get("mu"), (int, float)):
        mu1 = float(rep["mu"]) / math.sqrt(k0)
    if isinstance(mu1, (int, float)):
        mu1 = check_positive("mu_per_chain", mu1)
        out["mu_per_chain"] = mu1
        out["mu"] = math.sqrt(k) * mu1
        found = True

    rho1 = rep.get("rho_per_chain")
    if rho1 is None and isinstance(rep.get("rho"), (int, float)):
        rho1 = float(rep["rho"]) / k0
    if isinstance(rho1, (int, float)):
        rho1 = check_positive("rho_per_chain", rho1)
        out["rho_per_chain"] = rho1
        out["rho"] = k * rho1
        found = True

    curve = rdp_curve(rep.get("rdp_per_chain")) if rep.get("rdp_per_chain") is not None else None
    scale = k
    if curve is None and rep.get("rdp") is not None:
        curve = rdp_curve(rep.get("rdp"))
        scale = k / k0
    if curve is not None:
        orders, vals = curve
        out["rdp"] = {"orders": orders, "rdp": [scale * v for v in vals]}
        found = True

    if not found:
        raise ValueError(
            "report carries no per-chain privacy parameter (mu_per_chain, rho_per_chain, rdp_per_chain, "
            "or totals mu, rho, rdp with num_chains): cannot scale the privacy cost with the number of chains"
        )
    if delta is not None:
        delta = check_delta(delta, "report['delta']")
        out["delta"] = delta
        cands = []
        if "mu" in out:
            cands.append(gdp_epsilon(out["mu"], delta))  # exact (privacy.events)
        if "rdp" in out:
            cands.append(rdp_epsilon(out["rdp"]["orders"], out["rdp"]["rdp"], delta)[0])
        if "rho" in out:  # rdp(a) = rho a: eps = rho + 2 sqrt(rho log(1/delta))
            cands.append(out["rho"] + 2 * math.sqrt(out["rho"] * math.log(1 / delta)))
        out["eps"] = min(cands)
    return out
