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
from .privacy_report import (
    _DEFAULT_THETA_NAME,
    _FLAT_PREFIX,
    DEBUG_WARNING,
    DROPPED_ATTR,
    FLAT_REPORT_KEYS,
    FORMAT_ATTR,
    FORMAT_VERSION,
    NONPRIVATE_VARS_ATTR,
    PRIVATE_ATTR,
    REPORT_ATTR,
    UNKNOWN_REASON_ATTR,
    WARNING_ATTR,
    _jsonable,
    _report_mismatch,
    get_report,
    report_to_dict,
)

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
