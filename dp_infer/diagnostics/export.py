"""Privacy-safe ArviZ export: a run or draws -> a DataTree holding only what the guarantee
covers (see the package docstring)."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from .._validation import check_positive
from .extract import as_array, check_draw_array, extract_mcmc, extract_tree, is_mcmc, theta_divergence
from .privacy_report import (
    DEFAULT_THETA_NAME, FLAT_PREFIX, DEBUG_WARNING, DRAWS_ATTR, DROPPED_ATTR, FLAT_REPORT_KEYS, FORMAT_ATTR,
    FORMAT_VERSION, NONPRIVATE_VARS_ATTR, PRIVATE_ATTR, REPORT_ATTR, SUMMARY_ATTR, UNKNOWN_REASON_ATTR,
    WARNING_ATTR, jsonable, report_mismatch, get_report, report_to_dict, target_statement,
)

# ---------------------------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------------------------


def _resolve_burn_in(burn_in, tree_burn_in: int, report: Mapping[str, Any] | None, num_draws: int) -> int:
    if burn_in is None:
        burn_in = tree_burn_in
        if not burn_in and report is not None and report.get("release") in (None, "trajectory"):
            b, d = report.get("burn_in"), report.get("num_draws")
            if isinstance(b, int) and not isinstance(b, bool) and d == num_draws:
                burn_in = b
    if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or not 0 <= burn_in < num_draws:
        raise ValueError(f"burn_in must be an integer in [0, {num_draws}) (draws per chain), got {burn_in!r}")
    return int(burn_in)


def privacy_summary(report: Mapping[str, Any]) -> str:
    """One line for a flat (netCDF-3) reader: the guarantee, the route and the run's shape."""
    eps, delta = report.get("eps_spent", report.get("eps")), report.get("delta")
    parts = []
    if isinstance(eps, (int, float)):
        parts.append(f"({eps:.6g}, {delta if delta is not None else 0:.6g})-DP" if delta else f"pure {eps:.6g}-DP")
    for key, label in (("route", "route"), ("mu", "mu"), ("beta", "beta"), ("num_chains", "chains"),
                       ("num_steps", "steps per chain"), ("burn_in", "burn-in draws")):
        v = report.get(key)
        if isinstance(v, (int, float, str)) and not isinstance(v, bool):
            parts.append(f"{label} {v:.6g}" if isinstance(v, float) else f"{label} {v}")
    rnd = report.get("randomness")
    if isinstance(rnd, Mapping) and rnd.get("reproducible_by_seed_holder"):
        parts.append("noise reproducible by the seed holder")
    return "; ".join(parts)


def _flat_attrs(report: Mapping[str, Any]) -> dict[str, Any]:
    out = {SUMMARY_ATTR: privacy_summary(report)}
    statement = target_statement(report)
    if statement is not None:
        out[DRAWS_ATTR] = statement
        out[FLAT_PREFIX + "target"] = str(report.get("target"))
    for key in FLAT_REPORT_KEYS:
        v = report.get(key)
        if isinstance(v, bool):
            out[FLAT_PREFIX + key] = "true" if v else "false"
        elif isinstance(v, (int, float, str)):
            out[FLAT_PREFIX + key] = v
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
    burn_in: int | None = None,
    run_attrs: Mapping[str, Any] | None = None,
    theta_diverging: Any = None,
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
        as ONE structured attribute, the mapping ``attrs["dp_infer_privacy_report"]`` (JSON-encoded
        only inside netCDF files, decoded again by :func:`~dp_infer.diagnostics.load`), plus a
        flat summary for netCDF-3 readers: the one-line ``dp_infer_privacy_summary`` and scalar
        attributes ``dp_infer_<key>`` for the keys in :data:`FLAT_REPORT_KEYS`. If ``None`` and
        the input is a DataTree carrying a report, that report is kept.
    :param debug: ``False`` (default): export only what the privacy guarantee covers. ``True``:
        also export the non-private fields present (see below) and mark the tree
        ``dp_infer_private = "false"`` with ``attrs["warning"] = DEBUG_WARNING``.
    :param coords, dims: passed to ``az.from_dict`` (e.g. ``dims={"theta": ["feature"]}``).
    :param burn_in: the first ``burn_in`` draws of every chain go to the ``warmup_posterior``
        (and ``warmup_sample_stats``) groups: released (they are part of the accounted path) but
        outside every ArviZ summary, which reads ``posterior`` only. Default: the report's
        ``burn_in`` when its draws cover the whole trajectory, else 0 (a DataTree keeps its split).
    :param run_attrs: public facts about the run for raw-draw input (``kernel``, ``thinning``,
        ``num_transitions``, ``kernel_step_size``, ...), stored as ``dp_infer_<key>``.
    :param theta_diverging: a ``(chain, draw)`` divergence flag the caller states is a function of
        theta alone (a dp_infer kernel's own flag, e.g. from a :class:`~dp_infer.infer.run.PrivateRun`);
        OR-ed into the exported flag.
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

    if is_mcmc(run_or_draws):
        post, stats, nonlatent, theta_div, kernel_div, extracted = extract_mcmc(run_or_draws)
    elif isinstance(run_or_draws, xr.DataTree):
        post, stats, nonlatent, theta_div, kernel_div, extracted = extract_tree(run_or_draws)
        if report_dict is None:
            report_dict = get_report(run_or_draws)
    elif isinstance(run_or_draws, Mapping):
        if not run_or_draws:
            raise ValueError("run_or_draws must contain at least one variable, got an empty mapping")
        post = {str(k): as_array(str(k), v) for k, v in run_or_draws.items()}
        stats, nonlatent, theta_div, kernel_div, extracted = {}, {}, None, None, {}
    elif hasattr(run_or_draws, "__array__") or isinstance(run_or_draws, (list, tuple)):
        post = {DEFAULT_THETA_NAME: as_array(DEFAULT_THETA_NAME, run_or_draws)}
        stats, nonlatent, theta_div, kernel_div, extracted = {}, {}, None, None, {}
    else:
        raise ValueError(
            "run_or_draws must be a numpyro MCMC after run(), a mapping name -> array (chain, draw, ...), "
            f"an array (chain, draw, ...) or an xarray.DataTree, got {type(run_or_draws).__name__}"
        )
    if not post:
        raise ValueError("run_or_draws has no latent (posterior) variables to export")
    for k, v in post.items():
        check_draw_array(k, v)
    lead = next(iter(post.values())).shape[:2]
    for k, v in post.items():
        if v.shape[:2] != lead:
            raise ValueError(
                f"draws[{k!r}] has (chain, draw) = {v.shape[:2]} but other variables have {lead}"
            )
    extracted = dict(extracted)
    tree_burn_in = int(extracted.pop("burn_in", 0) or 0)
    run_attrs = {**extracted, **dict(run_attrs or {})}
    burn_in = _resolve_burn_in(burn_in, tree_burn_in, report_dict, int(lead[1]))
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
    if theta_diverging is not None:
        theta_div = np.asarray(theta_diverging).astype(bool)
    diverging = theta_divergence(post, divergence_threshold)
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
                debug_attrs[f"{FLAT_PREFIX}debug_{k}"] = arr.item()
                nonprivate.append(str(k))
            else:
                debug_attrs[f"{FLAT_PREFIX}debug_{k}"] = json.dumps(jsonable(v))
                nonprivate.append(str(k))
    else:
        dropped.extend(nonlatent)
        if kernel_div is not None and theta_div is None:
            dropped.append("kernel_diverging")
        dropped.extend(stats)
        dropped.extend(str(k) for k in (debug_stats or {}))

    groups = {"posterior": posterior, "sample_stats": ss}
    if burn_in:
        groups = {"posterior": {k: v[:, burn_in:] for k, v in posterior.items()},
                  "sample_stats": {k: v[:, burn_in:] for k, v in ss.items()},
                  "warmup_posterior": {k: v[:, :burn_in] for k, v in posterior.items()},
                  "warmup_sample_stats": {k: v[:, :burn_in] for k, v in ss.items()}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dt = az.from_dict(groups, coords=coords, dims=dims, save_warmup=True)

    mismatch = None if debug else report_mismatch(report_dict, int(lead[0]), int(lead[1]))
    attrs: dict[str, Any] = {
        FORMAT_ATTR: FORMAT_VERSION,
        PRIVATE_ATTR: "false" if debug else ("unknown" if mismatch else "true"),
        DROPPED_ATTR: json.dumps(sorted(set(dropped))),
    }
    if mismatch:
        attrs[UNKNOWN_REASON_ATTR] = mismatch
    for k, v in run_attrs.items():
        attrs[FLAT_PREFIX + k] = v
    if report_dict is not None:
        attrs[REPORT_ATTR] = report_dict
        attrs.update(_flat_attrs(report_dict))
    if debug:
        attrs[WARNING_ATTR] = DEBUG_WARNING
        attrs[NONPRIVATE_VARS_ATTR] = json.dumps(nonprivate)
        attrs.update(debug_attrs)
    dt.attrs.update(attrs)
    for group in groups:
        dt[group].attrs[PRIVATE_ATTR] = attrs[PRIVATE_ATTR]
        if debug:
            dt[group].attrs[WARNING_ATTR] = DEBUG_WARNING
    return dt
