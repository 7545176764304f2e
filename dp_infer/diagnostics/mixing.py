"""Mixing checks of released draws through ArviZ (R-hat, ESS, MCSE, divergences), interpreted
into plain-language warnings, and the single-chain split R-hat."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from .._validation import check_positive, check_positive_int
from .export import to_datatree
from .extract import is_mcmc, theta_divergence
from .mixing_report import DIVERGENCE_ADVICE, RHAT_ADVICE, MixingReport, quiet_nonfinite
from .privacy_report import (
    DEBUG_WARNING, NONPRIVATE_VARS_ATTR, PRIVATE_ATTR, get_report, is_private, privacy_status,
    report_to_dict,
)

# ---------------------------------------------------------------------------------------------
# mixing checks
# ---------------------------------------------------------------------------------------------




def _posterior_arrays(obj: Any) -> tuple[dict[str, np.ndarray], xr.DataTree | None]:
    if isinstance(obj, xr.DataTree):
        if "posterior" not in obj.children:
            raise ValueError("the DataTree has no 'posterior' group")
        post = obj["posterior"]
        return {k: np.asarray(v.transpose("chain", "draw", ...).values) for k, v in post.data_vars.items()}, obj
    if is_mcmc(obj) or isinstance(obj, Mapping) or hasattr(obj, "__array__"):
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
    with quiet_nonfinite():
        stats = _arviz_stats(az, post, arrays, num_chains, segments, notes)
    rhat, rhat_method, ess_bulk, ess_tail, mcse = stats
    with np.errstate(divide="ignore", invalid="ignore"):
        iat = {k: num_chains * num_draws / ess_bulk[k] for k in arrays}

    # divergences
    if dt is not None and "sample_stats" in dt.children and "diverging" in dt["sample_stats"].data_vars:
        div = np.asarray(dt["sample_stats"]["diverging"].transpose("chain", "draw").values).astype(bool)
    else:
        div = theta_divergence(arrays, None)
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
