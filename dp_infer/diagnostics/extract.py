"""Where the draws of an export come from: a NumPyro MCMC, a DataTree (warmup groups read back),
raw arrays; and the divergence flag computed from theta alone."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from .privacy_report import DEFAULT_THETA_NAME, FLAT_PREFIX, FORMAT_ATTR, NONPRIVATE_VARS_ATTR


def is_mcmc(obj: Any) -> bool:
    return hasattr(obj, "get_samples") and hasattr(obj, "sampler") and hasattr(obj, "get_extra_fields")


def _is_dp_kernel(sampler: Any) -> bool:
    """True for dp_infer's Langevin kernels, whose ``diverging`` flag is a function of theta."""
    try:
        from ..kernels._numpyro import LangevinKernelBase
    except Exception:  # noqa: BLE001 - kernels unavailable: treat as foreign
        return False
    return isinstance(sampler, LangevinKernelBase)


def as_array(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == object:
        raise ValueError(f"draws[{name!r}] must be a numeric array (chain, draw, ...), got dtype object")
    return arr


def check_draw_array(name: str, arr: np.ndarray) -> None:
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


def extract_mcmc(mcmc: Any):
    """(posterior, candidate stats, non-private posterior sites, kernel diverging, run attrs)."""
    sampler = mcmc.sampler
    samples = mcmc.get_samples(group_by_chain=True)
    if not isinstance(samples, Mapping):
        samples = {DEFAULT_THETA_NAME: samples}
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


def _group_arrays(dt: xr.DataTree, group: str) -> dict[str, np.ndarray]:
    if group not in dt.children:
        return {}
    return {k: np.asarray(v.transpose("chain", "draw", ...).values) for k, v in dt[group].data_vars.items()}


def _with_warmup(dt: xr.DataTree, group: str) -> tuple[dict[str, np.ndarray], int]:
    """``group``'s arrays with ``warmup_<group>`` prepended along the draw axis, and the warmup length."""
    main, warm = _group_arrays(dt, group), _group_arrays(dt, f"warmup_{group}")
    if not warm:
        return main, 0
    n_warm = next(iter(warm.values())).shape[1]
    return {k: np.concatenate([warm[k], v], axis=1) if k in warm else v for k, v in main.items()}, n_warm


def extract_tree(dt: xr.DataTree):
    if "posterior" not in dt.children:
        raise ValueError("run_or_draws is a DataTree without a 'posterior' group")
    nonpriv = set(json.loads(dt.attrs.get(NONPRIVATE_VARS_ATTR, "[]")))
    samples, burn_in = _with_warmup(dt, "posterior")
    post = {k: v for k, v in samples.items() if k not in nonpriv}
    nonlatent = {k: v for k, v in samples.items() if k in nonpriv}
    stats: dict[str, np.ndarray] = {}
    kernel_div = None
    for k, v in _with_warmup(dt, "sample_stats")[0].items():
        if k == "diverging":
            kernel_div = v.astype(bool)
        elif k != "kernel_diverging":
            stats[k] = v
    for group in dt.children:
        if group not in ("posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats"):
            stats[f"{group}/*"] = None  # whole group dropped, recorded by name
    # a dp_infer-exported tree carries a theta-only diverging flag; anything else: recompute
    theta_div = kernel_div if FORMAT_ATTR in dt.attrs else None
    run_attrs = {
        k[len(FLAT_PREFIX) :]: dt.attrs[k]
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
    run_attrs["burn_in"] = burn_in
    return post, stats, nonlatent, theta_div, kernel_div, run_attrs


def theta_divergence(post: Mapping[str, np.ndarray], threshold: float | None) -> np.ndarray:
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
