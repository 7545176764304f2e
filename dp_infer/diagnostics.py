"""ArviZ diagnostics that respect privacy.

What a private run may release (``/work/shared/DESIGN.md`` invariants 2 and 3) is the
theta-trajectory and functions of it. This module turns a finished run into an ArviZ
:class:`xarray.DataTree` that holds exactly that, attaches the privacy report a reviewer needs,
and runs the usual convergence checks (R-hat, ESS, MCSE, divergences) through ArviZ.

Export (:func:`to_datatree`)
    * ``posterior``: the constrained draws of the latent sites, dims ``(chain, draw, ...)``.
    * ``sample_stats.diverging``: a function of theta alone (non-finite draw, or the
      theta-only flag of a dp_infer kernel; see :func:`to_datatree`).
    * root attributes: ``dp_infer_private = "true"``, the privacy report as JSON under
      :data:`REPORT_ATTR` (``"dp_infer_privacy_report"``) and flat copies of its main numbers
      (``dp_infer_eps``, ``dp_infer_delta``, ``dp_infer_mu``, ``dp_infer_beta``, ...; see
      :data:`FLAT_REPORT_KEYS`), plus the public run shape (kernel class, step size,
      thinning, number of transitions).
    * nothing else: potential energy, log-likelihood, gradients, acceptance statistics,
      deterministic sites and observed data are dropped (their names are listed in
      ``dp_infer_dropped``). ``debug=True`` keeps the per-draw statistics and marks the whole
      tree non-private (``dp_infer_private = "false"`` and a ``warning`` attribute).

Checks (:func:`check_mixing`, :func:`single_chain_rhat`, :func:`privacy_cost_of_chains`)
    R-hat, ESS and MCSE are ArviZ's (``az.rhat``, ``az.ess``, ``az.mcse``); this module only
    interprets them and translates them into plain-language warnings. Every extra chain is
    paid in privacy (K chains: ``mu_K = sqrt(K) mu_1`` in GDP, ``eps_K(a) = K eps_1(a)`` in
    RDP), so splitting one chain into pseudo-chains is the cheapest convergence check.

Files (:func:`save`, :func:`load`, :func:`report_from_file`)
    netCDF-4 (``.nc``; needs the ``h5netcdf`` or ``netCDF4`` package), zarr (``.zarr``; needs
    ``zarr``) or a dependency-free ``.zip`` of one netCDF-3 file per group (SciPy's writer).
    All attributes, including the JSON privacy report, survive the round trip.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ._validation import check_delta, check_positive, check_positive_int
from .privacy.events import gdp_epsilon, rdp_epsilon

__all__ = [
    "PRIVATE_ATTR",
    "REPORT_ATTR",
    "WARNING_ATTR",
    "DEBUG_WARNING",
    "FLAT_REPORT_KEYS",
    "report_to_dict",
    "to_datatree",
    "is_private",
    "privacy_status",
    "get_report",
    "save",
    "load",
    "MixingReport",
    "check_mixing",
    "single_chain_rhat",
    "privacy_cost_of_chains",
    "format_report",
    "summary",
    "report_from_file",
]

# ---------------------------------------------------------------------------------------------
# attribute names (documented, stable: files written today must be readable tomorrow)
# ---------------------------------------------------------------------------------------------

#: root attribute: ``"true"`` for a release covered by an attached, matching privacy report,
#: ``"false"`` for a debug export, ``"unknown"`` when no matching report is attached.
PRIVATE_ATTR = "dp_infer_private"
#: root attribute (status ``"unknown"`` only): why the tree is not marked private.
UNKNOWN_REASON_ATTR = "dp_infer_privacy_unknown_reason"
#: root attribute: the whole privacy report / plan as a JSON string.
REPORT_ATTR = "dp_infer_privacy_report"
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
_FLAT_PREFIX = "dp_infer_"
_JSON_ATTRS_KEY = "_dp_infer_json_attrs"  # zip/netCDF-3 format: attrs stored as JSON
_DEFAULT_THETA_NAME = "theta"


# ---------------------------------------------------------------------------------------------
# report handling
# ---------------------------------------------------------------------------------------------


def _jsonable(obj: Any) -> Any:
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
        return _jsonable(obj.as_dict())
    if hasattr(obj, "to_dict") and callable(obj.to_dict) and not hasattr(obj, "__array__"):
        return _jsonable(obj.to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _jsonable(dataclasses.asdict(obj))
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "__array__"):
        arr = np.asarray(obj)
        return _jsonable(arr.item() if arr.ndim == 0 else arr.tolist())
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
    out = _jsonable(report)
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


def _report_mismatch(report: Mapping[str, Any] | None, num_chains: int, num_draws: int) -> str | None:
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
# export
# ---------------------------------------------------------------------------------------------


def _is_mcmc(obj: Any) -> bool:
    return hasattr(obj, "get_samples") and hasattr(obj, "sampler") and hasattr(obj, "get_extra_fields")


def _is_dp_kernel(sampler: Any) -> bool:
    """True for dp_infer's Langevin kernels, whose ``diverging`` flag is a function of theta."""
    try:
        from .kernels._numpyro import LangevinKernelBase
    except Exception:  # noqa: BLE001 - kernels unavailable: treat as foreign
        return False
    return isinstance(sampler, LangevinKernelBase)


def _as_array(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == object:
        raise ValueError(f"draws[{name!r}] must be a numeric array (chain, draw, ...), got dtype object")
    return arr


def _check_draw_array(name: str, arr: np.ndarray) -> None:
    if arr.ndim < 2:
        raise ValueError(
            f"draws[{name!r}] must have shape (chain, draw, ...) with ndim >= 2, got shape {arr.shape}; "
            "wrap a single chain as arr[None]"
        )
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"draws[{name!r}] must have at least 1 chain and 1 draw, got shape {arr.shape}")


def _tree_norm(value: Any, lead: tuple[int, int]) -> np.ndarray | None:
    """l2 norm over everything but the (chain, draw) axes of a pytree of arrays (e.g. z_grad)."""
    import jax

    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(value)]
    if not leaves or any(x.shape[:2] != lead for x in leaves):
        return None
    sq = sum(np.sum(np.square(x.reshape(lead + (-1,)).astype(np.float64)), axis=-1) for x in leaves)
    return np.sqrt(sq)


def _extract_mcmc(mcmc: Any):
    """(posterior, candidate stats, non-private posterior sites, kernel diverging, run attrs)."""
    sampler = mcmc.sampler
    samples = mcmc.get_samples(group_by_chain=True)
    if not isinstance(samples, Mapping):
        samples = {_DEFAULT_THETA_NAME: samples}
        latent = set(samples)
    else:
        latent = None
        state = getattr(mcmc, "last_state", None)
        z = getattr(state, getattr(sampler, "sample_field", "z"), None) if state is not None else None
        if isinstance(z, Mapping):
            latent = set(z)
    samples = {k: np.asarray(v) for k, v in samples.items()}
    if latent is None:  # cannot tell latent from deterministic sites: keep all, say so
        latent = set(samples)
    post = {k: v for k, v in samples.items() if k in latent}
    nonlatent = {k: v for k, v in samples.items() if k not in latent}

    stats: dict[str, np.ndarray] = {}
    kernel_div = None
    extra = mcmc.get_extra_fields(group_by_chain=True) or {}
    first = next(iter(post.values()))
    lead = tuple(first.shape[:2])
    for name, value in extra.items():
        if isinstance(value, Mapping) or isinstance(value, (tuple, list)):
            if name == "z_grad":
                gn = _tree_norm(value, lead)
                if gn is not None:
                    stats.setdefault("grad_norm", gn)
            stats[name] = None  # not an array: recorded as dropped, never exported
            continue
        arr = np.asarray(value)
        if name == "diverging":
            kernel_div = arr.astype(bool)
            continue
        stats[name] = arr
    run_attrs: dict[str, Any] = {
        "kernel": type(sampler).__name__,
        "thinning": int(getattr(mcmc, "thinning", 1) or 1),
        "num_transitions": int(getattr(mcmc, "num_samples", 0) or 0),
        "num_warmup": int(getattr(mcmc, "num_warmup", 0) or 0),
    }
    step = getattr(sampler, "step_size", None)
    if isinstance(step, (int, float, np.floating)) and not isinstance(step, bool):
        run_attrs["kernel_step_size"] = float(step)
    radius = getattr(sampler, "divergence_radius", None)
    if isinstance(radius, (int, float, np.floating)) and not isinstance(radius, bool):
        run_attrs["kernel_divergence_radius"] = float(radius)
    theta_only_div = _is_dp_kernel(sampler)
    return post, stats, nonlatent, (kernel_div if theta_only_div else None), kernel_div, run_attrs


def _extract_tree(dt: xr.DataTree):
    post_group = dt.get("posterior") if "posterior" in dt.children else None
    if post_group is None:
        raise ValueError("run_or_draws is a DataTree without a 'posterior' group")
    nonpriv = set(json.loads(dt.attrs.get(NONPRIVATE_VARS_ATTR, "[]")))
    samples = {k: np.asarray(v.transpose("chain", "draw", ...).values) for k, v in post_group.data_vars.items()}
    post = {k: v for k, v in samples.items() if k not in nonpriv}
    nonlatent = {k: v for k, v in samples.items() if k in nonpriv}
    stats: dict[str, np.ndarray] = {}
    kernel_div = None
    if "sample_stats" in dt.children:
        for k, v in dt["sample_stats"].data_vars.items():
            if k == "diverging":
                kernel_div = np.asarray(v.transpose("chain", "draw", ...).values).astype(bool)
            elif k != "kernel_diverging":
                stats[k] = np.asarray(v.transpose("chain", "draw", ...).values)
    for group in dt.children:
        if group not in ("posterior", "sample_stats"):
            stats[f"{group}/*"] = None  # whole group dropped, recorded by name
    # a dp_infer-exported tree carries a theta-only diverging flag; anything else: recompute
    theta_div = kernel_div if FORMAT_ATTR in dt.attrs else None
    run_attrs = {
        k[len(_FLAT_PREFIX) :]: dt.attrs[k]
        for k in (
            "dp_infer_kernel",
            "dp_infer_thinning",
            "dp_infer_num_transitions",
            "dp_infer_num_warmup",
            "dp_infer_kernel_step_size",
            "dp_infer_kernel_divergence_radius",
        )
        if k in dt.attrs
    }
    return post, stats, nonlatent, theta_div, kernel_div, run_attrs


def _theta_divergence(post: Mapping[str, np.ndarray], threshold: float | None) -> np.ndarray:
    """Sticky per-(chain, draw) flag from theta alone: non-finite, or max|theta| > threshold."""
    flags = None
    for v in post.values():
        x = v.reshape(v.shape[:2] + (-1,)).astype(np.float64)
        bad = ~np.all(np.isfinite(x), axis=-1)
        if threshold is not None:
            with np.errstate(invalid="ignore"):
                bad |= np.nanmax(np.abs(np.where(np.isfinite(x), x, 0.0)), axis=-1, initial=0.0) > threshold
        flags = bad if flags is None else (flags | bad)
    return np.logical_or.accumulate(flags, axis=1)


def _flat_attrs(report: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key in FLAT_REPORT_KEYS:
        v = report.get(key)
        if isinstance(v, bool):
            out[_FLAT_PREFIX + key] = "true" if v else "false"
        elif isinstance(v, (int, float, str)):
            out[_FLAT_PREFIX + key] = v
    return out


def to_datatree(
    run_or_draws: Any,
    report: Any = None,
    *,
    debug: bool = False,
    coords: Mapping | None = None,
    dims: Mapping | None = None,
    public_sites: Sequence[str] = (),
    divergence_threshold: float | None = None,
    sample_stats: Mapping[str, Any] | None = None,
    debug_stats: Mapping[str, Any] | None = None,
) -> xr.DataTree:
    """Privacy-safe ArviZ export of a run.

    :param run_or_draws: a ``numpyro.infer.MCMC`` after ``run`` (draws from
        ``get_samples(group_by_chain=True)``, so constrained), a mapping ``name -> array`` of
        shape ``(chain, draw, ...)``, a single such array (named ``"theta"``), or a
        :class:`xarray.DataTree` (e.g. from ``az.from_numpyro``, or a debug export to be
        re-exported privately).
    :param report: the privacy report / plan: a JSON-serialisable mapping (route, eps, delta,
        mu or RDP curve, beta, step_size, horizon, num_steps, num_chains, assumptions,
        sampling_error_tv, relaxation_time, ...) or any object with ``.as_dict()``. Stored as
        JSON under ``attrs["dp_infer_privacy_report"]`` plus flat scalar attributes
        ``dp_infer_<key>`` for the keys in :data:`FLAT_REPORT_KEYS`. If ``None`` and the input
        is a DataTree carrying a report, that report is kept.
    :param debug: ``False`` (default): export only what the privacy guarantee covers. ``True``:
        also export the non-private fields present (see below) and mark the tree
        ``dp_infer_private = "false"`` with ``attrs["warning"] = DEBUG_WARNING``.
    :param coords, dims: passed to ``az.from_dict`` (e.g. ``dims={"theta": ["feature"]}``).
    :param public_sites: deterministic sites you assert are functions of theta only (so
        covered by post-processing); they are kept in the default export.
    :param divergence_threshold: public bound: a draw with ``max|theta| > threshold`` counts
        as diverged (default: only non-finite draws; dp_infer kernels add their own
        theta-only flag).
    :param sample_stats: per-draw statistics for raw-draw input (e.g. ``potential_energy``),
        treated like the MCMC's extra fields: dropped unless ``debug``.
    :param debug_stats: extra non-private diagnostics such as clipped-row fractions: arrays
        of shape ``(chain, draw, ...)`` go to ``sample_stats``, scalars to root attributes
        ``dp_infer_debug_<name>``. Ignored (and listed as dropped) unless ``debug``.

    **What the default export contains.** ``posterior``: the latent sites only (constrained
    draws); ``sample_stats.diverging``: computed from theta alone -- a draw is divergent
    once (sticky along the chain) it is non-finite or exceeds ``divergence_threshold``; for
    dp_infer's Langevin kernels their own flag (non-finite or outside the public
    ``divergence_radius``, also theta-only) is OR-ed in. The ``diverging`` flag of other
    kernels (NUTS/HMC/SA compute it from the energy, a function of the data) is never used.

    **What it drops, even if the MCMC collected it:** potential energy, log-likelihood,
    gradients (``z_grad``), ``grad_norm``, acceptance statistics, energy, step-size
    adaptation state, velocities, deterministic sites (they may be functions of the data)
    and every other group (``observed_data``/``constant_data`` are the data themselves; they
    are never exported, not even with ``debug``). The dropped names are listed in
    ``attrs["dp_infer_dropped"]``. With ``debug=True`` the per-draw statistics (renamed
    kernel flag ``kernel_diverging`` for foreign kernels), ``grad_norm`` (computed from
    ``z_grad`` if needed) and deterministic sites are exported, and their names are listed
    in ``attrs["dp_infer_nonprivate_vars"]``.
    """
    import arviz as az

    if not isinstance(debug, (bool, np.bool_)):
        raise ValueError(f"debug must be True or False, got {debug!r}")
    if divergence_threshold is not None:
        divergence_threshold = check_positive("divergence_threshold", divergence_threshold, allow_inf=True)
        if math.isinf(divergence_threshold):
            divergence_threshold = None
    report_dict = report_to_dict(report)

    if _is_mcmc(run_or_draws):
        post, stats, nonlatent, theta_div, kernel_div, run_attrs = _extract_mcmc(run_or_draws)
    elif isinstance(run_or_draws, xr.DataTree):
        post, stats, nonlatent, theta_div, kernel_div, run_attrs = _extract_tree(run_or_draws)
        if report_dict is None:
            report_dict = get_report(run_or_draws)
    elif isinstance(run_or_draws, Mapping):
        if not run_or_draws:
            raise ValueError("run_or_draws must contain at least one variable, got an empty mapping")
        post = {str(k): _as_array(str(k), v) for k, v in run_or_draws.items()}
        stats, nonlatent, theta_div, kernel_div, run_attrs = {}, {}, None, None, {}
    elif hasattr(run_or_draws, "__array__") or isinstance(run_or_draws, (list, tuple)):
        post = {_DEFAULT_THETA_NAME: _as_array(_DEFAULT_THETA_NAME, run_or_draws)}
        stats, nonlatent, theta_div, kernel_div, run_attrs = {}, {}, None, None, {}
    else:
        raise ValueError(
            "run_or_draws must be a numpyro MCMC after run(), a mapping name -> array (chain, draw, ...), "
            f"an array (chain, draw, ...) or an xarray.DataTree, got {type(run_or_draws).__name__}"
        )
    if not post:
        raise ValueError("run_or_draws has no latent (posterior) variables to export")
    for k, v in post.items():
        _check_draw_array(k, v)
    lead = next(iter(post.values())).shape[:2]
    for k, v in post.items():
        if v.shape[:2] != lead:
            raise ValueError(
                f"draws[{k!r}] has (chain, draw) = {v.shape[:2]} but other variables have {lead}"
            )
    if sample_stats is not None:
        if not isinstance(sample_stats, Mapping):
            raise ValueError("sample_stats must be a mapping name -> array (chain, draw, ...)")
        for k, v in sample_stats.items():
            if k == "diverging":
                kernel_div = np.asarray(v).astype(bool)
            else:
                stats[str(k)] = np.asarray(v)
    public_sites = tuple(public_sites)
    for name in public_sites:
        if name in nonlatent:
            post[name] = nonlatent.pop(name)

    # --- divergence from theta alone --------------------------------------------------------
    diverging = _theta_divergence(post, divergence_threshold)
    if theta_div is not None and theta_div.shape == diverging.shape:
        diverging = diverging | theta_div

    # --- assemble ----------------------------------------------------------------------------
    dropped: list[str] = []
    nonprivate: list[str] = []
    ss: dict[str, np.ndarray] = {"diverging": diverging}
    posterior = dict(post)
    debug_attrs: dict[str, Any] = {}
    if debug:
        for k, v in nonlatent.items():
            posterior[k] = v
            nonprivate.append(k)
        if kernel_div is not None and theta_div is None and kernel_div.shape == diverging.shape:
            ss["kernel_diverging"] = kernel_div
            nonprivate.append("kernel_diverging")
        for k, v in stats.items():
            try:
                arr = None if v is None else np.asarray(v)
            except ValueError:
                arr = None
            if arr is not None and arr.dtype != object and arr.ndim >= 2 and arr.shape[:2] == lead:
                ss[k] = arr
                nonprivate.append(k)
            else:
                dropped.append(k)
        for k, v in (debug_stats or {}).items():
            arr = np.asarray(v)
            if arr.ndim >= 2 and arr.shape[:2] == lead:
                ss[str(k)] = arr
                nonprivate.append(str(k))
            elif arr.ndim == 0 and np.issubdtype(arr.dtype, np.number):
                debug_attrs[f"{_FLAT_PREFIX}debug_{k}"] = arr.item()
                nonprivate.append(str(k))
            else:
                debug_attrs[f"{_FLAT_PREFIX}debug_{k}"] = json.dumps(_jsonable(v))
                nonprivate.append(str(k))
    else:
        dropped.extend(nonlatent)
        if kernel_div is not None and theta_div is None:
            dropped.append("kernel_diverging")
        dropped.extend(stats)
        dropped.extend(str(k) for k in (debug_stats or {}))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dt = az.from_dict({"posterior": posterior, "sample_stats": ss}, coords=coords, dims=dims)

    mismatch = None if debug else _report_mismatch(report_dict, int(lead[0]), int(lead[1]))
    attrs: dict[str, Any] = {
        FORMAT_ATTR: FORMAT_VERSION,
        PRIVATE_ATTR: "false" if debug else ("unknown" if mismatch else "true"),
        DROPPED_ATTR: json.dumps(sorted(set(dropped))),
    }
    if mismatch:
        attrs[UNKNOWN_REASON_ATTR] = mismatch
    for k, v in run_attrs.items():
        attrs[_FLAT_PREFIX + k] = v
    if report_dict is not None:
        attrs[REPORT_ATTR] = json.dumps(report_dict, sort_keys=True)
        attrs.update(_flat_attrs(report_dict))
    if debug:
        attrs[WARNING_ATTR] = DEBUG_WARNING
        attrs[NONPRIVATE_VARS_ATTR] = json.dumps(nonprivate)
        attrs.update(debug_attrs)
    dt.attrs.update(attrs)
    for group in ("posterior", "sample_stats"):
        dt[group].attrs[PRIVATE_ATTR] = attrs[PRIVATE_ATTR]
        if debug:
            dt[group].attrs[WARNING_ATTR] = DEBUG_WARNING
    return dt


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------


def _netcdf4_engine() -> str | None:
    import importlib.util

    for engine, module in (("h5netcdf", "h5netcdf"), ("netcdf4", "netCDF4")):
        if importlib.util.find_spec(module) is not None:
            return engine
    return None


def _encode_attrs_nc3(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """netCDF-3 attributes are scalars/strings/1-D numeric arrays: JSON-encode the rest."""
    out, encoded = {}, []
    for k, v in attrs.items():
        if isinstance(v, str) or (isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))):
            out[k] = v
        else:
            out[k] = json.dumps(_jsonable(v))
            encoded.append(k)
    if encoded:
        out[_JSON_ATTRS_KEY] = json.dumps(encoded)
    return out


def _decode_attrs_nc3(attrs: Mapping[str, Any]) -> dict[str, Any]:
    attrs = dict(attrs)
    encoded = json.loads(attrs.pop(_JSON_ATTRS_KEY, "[]"))
    for k in encoded:
        attrs[k] = json.loads(attrs[k])
    return attrs


def _save_zip(dt: xr.DataTree, path: Path) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for node in dt.subtree:
            ds = node.to_dataset(inherit=False)
            ds.attrs = _encode_attrs_nc3(ds.attrs)
            for var in ds.variables.values():
                var.attrs = _encode_attrs_nc3(var.attrs)
            name = "_root" if node.path == "/" else node.path.strip("/")
            zf.writestr(f"{name}.nc", ds.to_netcdf(engine="scipy"))


def _load_zip(path: Path) -> xr.DataTree:
    groups = {}
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if not name.endswith(".nc"):
                continue
            with xr.open_dataset(io.BytesIO(zf.read(name)), engine="scipy") as ds:
                ds = ds.load()
            ds.attrs = _decode_attrs_nc3(ds.attrs)
            for var in ds.variables.values():
                var.attrs = _decode_attrs_nc3(var.attrs)
            key = "/" if name == "_root.nc" else "/" + name[: -len(".nc")]
            groups[key] = ds
    if "/" not in groups:
        groups["/"] = xr.Dataset()
    return xr.DataTree.from_dict(groups)


def save(dt: xr.DataTree, path: str | Path) -> Path:
    """Write ``dt`` (with all attributes, incl. the privacy report) to ``path``; return it.

    The format follows the suffix: ``.zarr`` -> zarr store (needs ``zarr``); ``.zip`` -> one
    netCDF-3 file per group inside a zip archive (SciPy only; non-scalar attributes are kept
    as JSON); anything else (``.nc``, ``.nc4``, ``.h5``) -> netCDF-4 with groups (needs the
    ``h5netcdf`` or ``netCDF4`` package). A debug (non-private) tree is written too, with its
    warning attribute, and a :class:`UserWarning` is emitted.
    """
    if not isinstance(dt, xr.DataTree):
        raise ValueError(f"dt must be an xarray.DataTree (from to_datatree), got {type(dt).__name__}")
    path = Path(path)
    if not is_private(dt):
        warnings.warn(f"saving a tree that is not a covered private release to {path}: "
                      f"{privacy_status(dt)}", UserWarning, stacklevel=2)
    suffix = path.suffix.lower()
    if suffix == ".zip":
        _save_zip(dt, path)
    elif suffix == ".zarr":
        dt.to_zarr(path, mode="w")
    else:
        engine = _netcdf4_engine()
        if engine is None:
            raise ImportError(
                f"writing {path.name} as netCDF-4 needs the 'h5netcdf' (or 'netCDF4') package, which is "
                "not installed; install it or save to a '.zip' path (dependency-free format)"
            )
        dt.to_netcdf(path, engine=engine)
    return path


def load(path: str | Path) -> xr.DataTree:
    """Read a file written by :func:`save` (format detected from the content) into memory.

    A missing, truncated or foreign file raises a one-line ``ValueError``."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"run file {path} does not exist")
    try:
        dt = _load_any(path)
    except ImportError:
        raise
    except Exception as e:  # noqa: BLE001 - corrupt or foreign files: one clear line
        raise ValueError(f"{path} is not a readable dp_infer run file (.zip, .nc or .zarr written by "
                         f"dp_infer.diagnostics.save): {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                         ) from None
    if FORMAT_ATTR not in dt.attrs:
        raise ValueError(f"{path} is a data file but not a dp_infer run (no {FORMAT_ATTR!r} attribute)")
    return dt


def _load_any(path: Path) -> xr.DataTree:
    if path.is_dir():
        return xr.open_datatree(path, engine="zarr").load()
    with open(path, "rb") as f:
        magic = f.read(8)
    if magic.startswith(b"PK"):
        return _load_zip(path)
    if magic.startswith(b"CDF"):
        with xr.open_dataset(path, engine="scipy") as ds:
            ds = ds.load()
        ds.attrs = _decode_attrs_nc3(ds.attrs)
        return xr.DataTree(ds)
    engine = _netcdf4_engine()
    if engine is None:
        raise ImportError(f"reading {path.name} (netCDF-4/HDF5) needs the 'h5netcdf' (or 'netCDF4') package")
    return xr.load_datatree(path, engine=engine)


# ---------------------------------------------------------------------------------------------
# privacy cost of chains
# ---------------------------------------------------------------------------------------------


def _rdp_curve(value: Any) -> tuple[list[float], list[float]] | None:
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
    the resulting eps is included (GDP: exact conversion; RDP: :func:`dp_infer.privacy.events.rdp_epsilon`).

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

    curve = _rdp_curve(rep.get("rdp_per_chain")) if rep.get("rdp_per_chain") is not None else None
    scale = k
    if curve is None and rep.get("rdp") is not None:
        curve = _rdp_curve(rep.get("rdp"))
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


# ---------------------------------------------------------------------------------------------
# mixing checks
# ---------------------------------------------------------------------------------------------


class _quiet_nonfinite:
    """Silence NumPy's RuntimeWarnings while ArviZ digests diverged (non-finite) draws; the
    divergence is reported by :func:`check_mixing` in plain language instead."""

    def __enter__(self):
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)
        self._e = np.errstate(all="ignore")
        self._e.__enter__()
        return self

    def __exit__(self, *exc):
        self._e.__exit__(*exc)
        self._w.__exit__(*exc)
        return False


RHAT_ADVICE = "chains have not mixed: run longer — note longer runs cost privacy on the trajectory route"
DIVERGENCE_ADVICE = "step size too large for the potential's smoothness"


@dataclasses.dataclass
class MixingReport:
    """Result of :func:`check_mixing`. Per-variable arrays have the variable's event shape.

    ``iat`` is the empirical integrated autocorrelation time in draws,
    ``chains * draws / ess_bulk``; ``iat_steps`` multiplies it by the steps per draw.
    ``rhat_method`` is ``"multi-chain"`` or ``"single-chain split (k segments)"``.
    """

    num_chains: int
    num_draws: int
    rhat: dict[str, np.ndarray]
    ess_bulk: dict[str, np.ndarray]
    ess_tail: dict[str, np.ndarray]
    mcse_mean: dict[str, np.ndarray]
    iat: dict[str, np.ndarray]
    num_divergences: int
    divergences_per_chain: list[int]
    rhat_method: str
    rhat_max: float
    ess_min: float
    steps_per_draw: int = 1
    predicted_relaxation_time: float | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    # ------------------------------------------------------------------ aggregates
    @staticmethod
    def _extreme(d: Mapping[str, np.ndarray], fn) -> float:
        vals = [np.asarray(v, dtype=np.float64).ravel() for v in d.values()]
        vals = np.concatenate(vals) if vals else np.array([])
        vals = vals[np.isfinite(vals)]
        return float(fn(vals)) if vals.size else math.nan

    @property
    def max_rhat(self) -> float:
        return self._extreme(self.rhat, np.max)

    @property
    def min_ess_bulk(self) -> float:
        return self._extreme(self.ess_bulk, np.min)

    @property
    def min_ess_tail(self) -> float:
        return self._extreme(self.ess_tail, np.min)

    @property
    def max_iat(self) -> float:
        return self._extreme(self.iat, np.max)

    @property
    def ok(self) -> bool:
        """True when no warning was raised."""
        return not self.warnings

    def table(self):
        """A pandas DataFrame, one row per scalar component (``theta[0]``, ...)."""
        import pandas as pd

        rows = {}
        for name in self.rhat:
            shape = np.shape(self.rhat[name])
            for idx in np.ndindex(*shape) if shape else [()]:
                label = name + (f"[{','.join(map(str, idx))}]" if idx else "")
                rows[label] = {
                    "r_hat": float(np.asarray(self.rhat[name])[idx]),
                    "ess_bulk": float(np.asarray(self.ess_bulk[name])[idx]),
                    "ess_tail": float(np.asarray(self.ess_tail[name])[idx]),
                    "mcse_mean": float(np.asarray(self.mcse_mean[name])[idx]),
                    "iat": float(np.asarray(self.iat[name])[idx]),
                }
        return pd.DataFrame.from_dict(rows, orient="index")

    def as_dict(self) -> dict:
        d = {
            "num_chains": self.num_chains,
            "num_draws": self.num_draws,
            "rhat_method": self.rhat_method,
            "max_rhat": self.max_rhat,
            "min_ess_bulk": self.min_ess_bulk,
            "min_ess_tail": self.min_ess_tail,
            "max_iat": self.max_iat,
            "steps_per_draw": self.steps_per_draw,
            "predicted_relaxation_time": self.predicted_relaxation_time,
            "num_divergences": self.num_divergences,
            "divergences_per_chain": list(self.divergences_per_chain),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "ok": self.ok,
        }
        for key in ("rhat", "ess_bulk", "ess_tail", "mcse_mean", "iat"):
            d[key] = {k: _jsonable(v) for k, v in getattr(self, key).items()}
        return d

    def __str__(self) -> str:
        import pandas as pd

        lines = [
            f"Mixing checks ({self.num_chains} chain(s) x {self.num_draws} draws; R-hat: {self.rhat_method})",
        ]
        with pd.option_context("display.max_rows", 200, "display.width", 120):
            lines.append(self.table().to_string(float_format=lambda x: f"{x:.4g}"))
        lines.append(
            f"divergent draws: {self.num_divergences} (per chain: {self.divergences_per_chain})"
        )
        if self.predicted_relaxation_time is not None:
            lines.append(
                f"integrated autocorrelation time: {self.max_iat * self.steps_per_draw:.4g} steps (empirical, max)"
                f" vs predicted relaxation time {self.predicted_relaxation_time:.4g} steps"
            )
        for n in self.notes:
            lines.append(f"note: {n}")
        if self.warnings:
            lines.append("WARNINGS:")
            lines.extend(f"  - {w}" for w in self.warnings)
        else:
            lines.append(f"OK: R-hat <= {self.rhat_max} and ESS >= {self.ess_min:g} everywhere, no divergences.")
        return "\n".join(lines)


def _posterior_arrays(obj: Any) -> tuple[dict[str, np.ndarray], xr.DataTree | None]:
    if isinstance(obj, xr.DataTree):
        if "posterior" not in obj.children:
            raise ValueError("the DataTree has no 'posterior' group")
        post = obj["posterior"]
        return {k: np.asarray(v.transpose("chain", "draw", ...).values) for k, v in post.data_vars.items()}, obj
    if _is_mcmc(obj) or isinstance(obj, Mapping) or hasattr(obj, "__array__"):
        dt = to_datatree(obj)
        return _posterior_arrays(dt)[0], dt
    raise ValueError(
        "dt_or_draws must be a DataTree, a numpyro MCMC, a mapping name -> (chain, draw, ...) array or an array, "
        f"got {type(obj).__name__}"
    )


def _segments(x: np.ndarray, segments: int) -> np.ndarray:
    """One chain (draw, ...) -> (segments, draw // segments, ...) contiguous pseudo-chains."""
    n = (x.shape[0] // segments) * segments
    return x[:n].reshape((segments, n // segments) + x.shape[1:])


def single_chain_rhat(draws: Any, *, segments: int = 2, chain: int = 0):
    """Rank-normalised split R-hat of ONE chain, the cheapest convergence check.

    The chain is cut into ``segments`` contiguous pseudo-chains (2 = halves, 4 = quarters) and
    passed to ``az.rhat(method="rank")``, which splits each pseudo-chain in half again, so
    ``2 * segments`` pieces of the trajectory are compared. This detects a chain that is
    still drifting or has not explored; it cannot detect a mode the chain never visited.

    Privacy: K chains on the same data cost K times the privacy of one (GDP
    ``mu_K = sqrt(K) mu_1``, RDP ``eps_K(a) = K eps_1(a)``; see
    :func:`privacy_cost_of_chains`), whereas splitting one released chain is
    post-processing and costs nothing.

    :param draws: a 1-D array ``(draw,)``; an array ``(chain, draw, ...)`` (chain ``chain``
        is used); a mapping name -> ``(chain, draw, ...)``; or a DataTree (posterior group).
    :returns: a float for a 1-D array, an array of the event shape for an array, and a dict
        name -> value for a mapping/DataTree.
    """
    import arviz as az

    if isinstance(segments, bool) or not isinstance(segments, (int, np.integer)) or segments < 2:
        raise ValueError(f"segments must be an integer >= 2, got {segments!r}")
    if isinstance(chain, bool) or not isinstance(chain, (int, np.integer)) or chain < 0:
        raise ValueError(f"chain must be an integer >= 0, got {chain!r}")

    def one(name: str, x: np.ndarray):
        x = np.asarray(x, dtype=np.float64)
        if x.shape[0] < 2 * segments * 2:
            raise ValueError(
                f"{name} has {x.shape[0]} draws; single_chain_rhat with segments={segments} needs at least "
                f"{4 * segments} (ArviZ needs >= 4 draws per pseudo-chain half)"
            )
        r = az.rhat(_segments(x, segments), method="rank")
        return float(r) if np.ndim(r) == 0 else np.asarray(r)

    def pick(name: str, arr: np.ndarray) -> np.ndarray:
        if arr.ndim < 2:
            raise ValueError(f"{name} must have shape (chain, draw, ...), got {arr.shape}")
        if chain >= arr.shape[0]:
            raise ValueError(f"chain must lie in [0, {arr.shape[0] - 1}] for {name}, got {chain}")
        return arr[chain]

    if isinstance(draws, (xr.DataTree, Mapping)):
        arrays, _ = _posterior_arrays(draws) if isinstance(draws, xr.DataTree) else (
            {str(k): np.asarray(v) for k, v in draws.items()},
            None,
        )
        return {k: one(k, pick(k, v)) for k, v in arrays.items()}
    arr = np.asarray(draws)
    if arr.ndim == 1:
        return one("draws", arr)
    return one("draws", pick("draws", arr))


def _arviz_stats(az, post, arrays, num_chains, segments, notes):
    """R-hat (multi-chain or single-chain split), bulk/tail ESS and MCSE, all from ArviZ."""
    if num_chains >= 2:
        rhat_ds = az.rhat(post, method="rank")
        rhat = {k: np.asarray(rhat_ds[k].values) for k in arrays}
        rhat_method = "multi-chain"
    else:
        rhat = {}
        for k, v in arrays.items():
            try:
                rhat[k] = np.asarray(single_chain_rhat(v, segments=segments))
            except ValueError:
                rhat[k] = np.full(v.shape[2:], np.nan)
        rhat_method = f"single-chain split ({segments} segments)"
        notes.append(
            f"one chain: R-hat compares {2 * segments} pieces of the single trajectory "
            "(free: post-processing); K independent chains would cost K times the privacy of one"
        )
    ess_bulk_ds = az.ess(post, method="bulk")
    ess_tail_ds = az.ess(post, method="tail")
    mcse_ds = az.mcse(post, method="mean")
    ess_bulk = {k: np.asarray(ess_bulk_ds[k].values) for k in arrays}
    ess_tail = {k: np.asarray(ess_tail_ds[k].values) for k in arrays}
    mcse = {k: np.asarray(mcse_ds[k].values) for k in arrays}
    return rhat, rhat_method, ess_bulk, ess_tail, mcse


def check_mixing(
    dt_or_draws: Any,
    report: Any = None,
    *,
    rhat_max: float = 1.01,
    ess_min: float = 400,
    iat_slack: float = 1.5,
    segments: int = 2,
) -> MixingReport:
    """Convergence and divergence checks with plain-language warnings.

    R-hat (rank-normalised split R-hat, ``az.rhat(method="rank")``), bulk/tail ESS
    (``az.ess``) and MCSE of the mean (``az.mcse``) are ArviZ's. With a single chain ArviZ
    cannot compute R-hat, so :func:`single_chain_rhat` (``segments`` pseudo-chains) is used.
    The empirical integrated autocorrelation time is ``chains * draws / ess_bulk`` (in draws;
    times ``steps_per_draw`` in kernel steps).

    Warnings (in ``MixingReport.warnings``): R-hat > ``rhat_max``; bulk or tail ESS <
    ``ess_min``; any divergent draw; empirical autocorrelation time above ``iat_slack`` times
    the plan's bound ``2 * relaxation_time - 1`` (for a reversible chain with relaxation time
    ``t`` every linear statistic has integrated autocorrelation time at most ``2 t - 1``);
    the run uses more chains, more steps or another step size than the privacy report
    accounts for.

    :param report: the privacy report (default: the one stored in the DataTree). Uses
        ``relaxation_time`` (predicted, in steps), ``steps_per_draw`` (else the run's
        thinning, else 1), ``num_chains``, ``num_steps`` and ``step_size``.
    """
    import arviz as az

    rhat_max = check_positive("rhat_max", rhat_max)
    if rhat_max <= 1:
        raise ValueError(f"rhat_max must lie in (1, inf), got {rhat_max!r}")
    ess_min = check_positive("ess_min", ess_min)
    iat_slack = check_positive("iat_slack", iat_slack)
    arrays, dt = _posterior_arrays(dt_or_draws)
    rep = report_to_dict(report) if report is not None else (get_report(dt) if dt is not None else None)
    private = is_private(dt) if dt is not None else True
    nonpriv = set(json.loads(dt.attrs.get(NONPRIVATE_VARS_ATTR, "[]"))) if dt is not None else set()
    arrays = {k: v for k, v in arrays.items() if k not in nonpriv} or arrays

    first = next(iter(arrays.values()))
    num_chains, num_draws = int(first.shape[0]), int(first.shape[1])
    post = xr.Dataset(
        {k: (("chain", "draw") + tuple(f"{k}_dim_{i}" for i in range(v.ndim - 2)), v) for k, v in arrays.items()}
    )
    notes: list[str] = []
    with _quiet_nonfinite():
        stats = _arviz_stats(az, post, arrays, num_chains, segments, notes)
    rhat, rhat_method, ess_bulk, ess_tail, mcse = stats
    with np.errstate(divide="ignore", invalid="ignore"):
        iat = {k: num_chains * num_draws / ess_bulk[k] for k in arrays}

    # divergences
    if dt is not None and "sample_stats" in dt.children and "diverging" in dt["sample_stats"].data_vars:
        div = np.asarray(dt["sample_stats"]["diverging"].transpose("chain", "draw").values).astype(bool)
    else:
        div = _theta_divergence(arrays, None)
    per_chain = [int(x) for x in div.sum(axis=1)]
    n_div = int(sum(per_chain))

    steps_per_draw = 1
    if rep and rep.get("steps_per_draw") is not None:
        steps_per_draw = check_positive_int("report['steps_per_draw']", rep["steps_per_draw"])
    elif dt is not None and dt.attrs.get("dp_infer_thinning") is not None:
        steps_per_draw = int(dt.attrs["dp_infer_thinning"])
    t_rel = None
    if rep and rep.get("relaxation_time") is not None:
        t_rel = check_positive("report['relaxation_time']", rep["relaxation_time"])

    result = MixingReport(
        num_chains=num_chains,
        num_draws=num_draws,
        rhat=rhat,
        ess_bulk=ess_bulk,
        ess_tail=ess_tail,
        mcse_mean=mcse,
        iat=iat,
        num_divergences=n_div,
        divergences_per_chain=per_chain,
        rhat_method=rhat_method,
        rhat_max=rhat_max,
        ess_min=ess_min,
        steps_per_draw=steps_per_draw,
        predicted_relaxation_time=t_rel,
        notes=notes,
    )
    table = result.table()
    w = result.warnings

    def worst(col: str, largest: bool) -> tuple[str, float]:
        s = table[col].replace([np.inf, -np.inf], np.nan).dropna()
        if s.empty:
            return "?", math.nan
        lab = s.idxmax() if largest else s.idxmin()
        return str(lab), float(s[lab])

    if dt is not None and str(dt.attrs.get(PRIVATE_ATTR, "")).lower() == "false":
        w.append(f"this is a NON-PRIVATE debug export: {DEBUG_WARNING}")
    elif isinstance(dt_or_draws, xr.DataTree) and not private:
        w.append(privacy_status(dt))
    n_bad_stat = int((~np.isfinite(table["r_hat"].to_numpy())).sum())
    if n_bad_stat:
        w.append(
            f"R-hat could not be computed for {n_bad_stat} of {len(table)} parameters (non-finite draws or too "
            "few draws): treat the run as not converged"
        )
    bad = table["r_hat"] > rhat_max
    if bad.any():
        lab, val = worst("r_hat", True)
        w.append(
            f"R-hat up to {val:.3f} ({lab}) exceeds {rhat_max} for {int(bad.sum())} of {len(table)} parameters: "
            f"{RHAT_ADVICE}"
        )
    for col, kind in (("ess_bulk", "bulk"), ("ess_tail", "tail")):
        low = table[col] < ess_min
        if low.any():
            lab, val = worst(col, False)
            w.append(
                f"{kind} ESS as low as {val:.0f} ({lab}) is below {ess_min:g} for {int(low.sum())} of {len(table)} "
                f"parameters: {'means' if kind == 'bulk' else 'tail quantiles and intervals'} are noisy; run longer "
                "(more steps or chains cost privacy)"
            )
    if n_div:
        w.append(
            f"{n_div} divergent draw(s) in {sum(c > 0 for c in per_chain)} of {num_chains} chain(s) (theta non-finite "
            f"or out of bounds): {DIVERGENCE_ADVICE}; lower the step size (it must be well below 2/M for an "
            "M-smooth potential) or bound the domain"
        )
    if t_rel is not None:
        bound = max(2.0 * t_rel - 1.0, 1.0)
        emp = result.max_iat * steps_per_draw
        if math.isfinite(emp) and emp > iat_slack * bound:
            lab, _ = worst("iat", True)
            w.append(
                f"mixing slower than predicted: empirical integrated autocorrelation time {emp:.3g} steps ({lab}) "
                f"exceeds the plan's bound 2*t_rel-1 = {bound:.3g} steps (predicted relaxation time {t_rel:.3g} steps): "
                "the plan's horizon and sampling-error bound are likely optimistic"
            )
    if rep:
        _check_plan_matches_run(rep, dt, num_chains, num_draws, steps_per_draw, w)
    return result


def _check_plan_matches_run(rep, dt, num_chains, num_draws, steps_per_draw, w):
    k_plan = rep.get("num_chains")
    if isinstance(k_plan, int) and num_chains > k_plan:
        w.append(
            f"the run has {num_chains} chains but the privacy report accounts for {k_plan}: the privacy cost is "
            "understated (K chains cost K times the RDP of one)"
        )
    n_plan = rep.get("num_steps")
    n_run = None
    if dt is not None and dt.attrs.get("dp_infer_num_transitions"):
        n_run = int(dt.attrs["dp_infer_num_transitions"]) + int(dt.attrs.get("dp_infer_num_warmup", 0) or 0)
    elif steps_per_draw:
        n_run = num_draws * steps_per_draw
    if isinstance(n_plan, (int, float)) and n_run is not None and n_run > n_plan:
        w.append(
            f"each chain ran {n_run} steps but the privacy report accounts for {n_plan:g}: on the trajectory route "
            "the privacy cost is understated"
        )
    h_plan = rep.get("step_size")
    h_run = dt.attrs.get("dp_infer_kernel_step_size") if dt is not None else None
    if isinstance(h_plan, (int, float)) and h_run is not None and not math.isclose(float(h_run), h_plan, rel_tol=1e-6):
        w.append(
            f"the kernel's step size {float(h_run):.6g} differs from the report's {h_plan:.6g}: the privacy report "
            "does not describe this run"
        )


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
        curve = _rdp_curve(rep["rdp"])
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
    with _quiet_nonfinite():
        table = az.summary(dt, var_names=list(var_names) if var_names else None)
    with pd.option_context("display.max_rows", 200, "display.width", 140):
        text = str(table)
    return f"{block}\n\nPosterior summary (ArviZ)\n{text}"


def report_from_file(path: str | Path, outdir: str | Path | None = None) -> str:
    """Load a run saved with :func:`save`; return summary + mixing checks + privacy report text
    and write trace/rank/autocorrelation plots as PNG into ``outdir``
    (default ``<file stem>_report/`` next to the file). Used by ``dp-infer report RUN_FILE``.
    """
    from .plots import write_report_plots_safe

    path = Path(path)
    dt = load(path)
    outdir = Path(outdir) if outdir is not None else path.with_name(path.stem + "_report")
    parts = [f"Run file: {path}", summary(dt), "", str(check_mixing(dt))]
    paths, failures = write_report_plots_safe(dt, outdir)
    if paths:
        parts.append("\nPlots written:")
        parts.extend(f"  {p}" for p in paths)
    for name, err in failures:
        parts.append(f"plot {name} failed: {err}")
    return "\n".join(parts)
