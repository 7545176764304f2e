"""Everything a run needs, checked before anything is charged (issue 30, findings 5-7).

The charge protocol is validate -> plan -> CHECK -> charge -> run: a run that is charged and then
fails on an argument, an output path or a resource limit spends budget for nothing (and, on the
command line, loses the draws). These checks read no private data; each raises a one-line
``ValueError`` naming the parameter and what it allows.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["check_sampling_options", "check_output_path", "check_plan_resources", "max_draw_bytes",
           "refuse_unused_horizon", "HORIZON_ROUTES",
           "CHAIN_METHODS", "RUN_FILE_SUFFIXES"]

#: NumPyro's chain methods
CHAIN_METHODS = ("vectorized", "sequential", "parallel")
#: suffixes :func:`dp_infer.diagnostics.save` writes (``.zarr`` needs zarr, netCDF-4 needs h5netcdf/netCDF4)
RUN_FILE_SUFFIXES = (".zip", ".zarr", ".nc", ".nc4", ".h5")
#: a run may hold at most this share of the machine's physical memory in draws
_MEMORY_SHARE = 0.5
#: NumPyro counts steps in int32
_MAX_STEPS = 2**31 - 1


def check_sampling_options(*, seed=None, key_impl: str = "threefry2x32", chain_method: str | None = "vectorized",
                           num_chains=None, prefix: str = "") -> None:
    """``seed`` (None or an integer in the key's range), ``key_impl``, ``chain_method`` and
    ``num_chains`` (an integer >= 1), as :func:`dp_infer.randomness.secret_key` and NumPyro would
    check them -- but before the charge. ``prefix`` is put before the parameter name (CLI: ``--``)."""
    from ..randomness import check_seed

    check_seed(seed, key_impl, seed_name=f"{prefix}seed", impl_name=f"{prefix}key_impl")
    if chain_method is not None and chain_method not in CHAIN_METHODS:
        raise ValueError(f"{prefix}chain_method must be one of {CHAIN_METHODS}, got {chain_method!r}")
    if num_chains is not None and (isinstance(num_chains, bool) or not isinstance(num_chains, int)
                                   or num_chains < 1):
        raise ValueError(f"{prefix}num_chains must be an integer >= 1, got {num_chains!r}")


def check_output_path(path, *, param: str = "--out", suffixes=RUN_FILE_SUFFIXES) -> Path | None:
    """A file path that can be written, with a supported suffix (None passes).

    Checked: the suffix; the parent is an existing, writable directory; the path is not a
    directory and, if it exists, is writable; ``.zarr`` needs zarr and netCDF-4 suffixes need
    h5netcdf or netCDF4 installed."""
    if path is None:
        return None
    p = Path(path).expanduser()
    suffix = p.suffix.lower()
    if suffix not in suffixes:
        raise ValueError(f"{param}: {str(p)!r} must end with one of {', '.join(suffixes)}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{param}: the directory {str(parent)!r} of {str(p)!r} does not exist (or is not a directory)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{param}: the directory {str(parent)!r} is not writable")
    if p.is_dir() and suffix != ".zarr":
        raise ValueError(f"{param}: {str(p)!r} is a directory; give a file path")
    if p.exists() and not os.access(p, os.W_OK):
        raise ValueError(f"{param}: {str(p)!r} exists and is not writable")
    if suffix == ".zarr" and importlib.util.find_spec("zarr") is None:
        raise ValueError(f"{param}: writing {p.name} needs the 'zarr' package, which is not installed; use a .zip path")
    if suffix in (".nc", ".nc4", ".h5") and not any(importlib.util.find_spec(m) for m in ("h5netcdf", "netCDF4")):
        raise ValueError(f"{param}: writing {p.name} needs the 'h5netcdf' (or 'netCDF4') package, which is not "
                         "installed; use a .zip path")
    return p


def max_draw_bytes() -> float:
    """Memory a run's draws may take: half the physical memory (inf where it cannot be read)."""
    try:
        return _MEMORY_SHARE * os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return float("inf")


def check_plan_resources(plan, *, prefix: str = "") -> None:
    """Refuse a plan whose steps overflow NumPyro's int32 counter or whose stored draws (chains x
    kept draws x dim, float32 draws plus float64 copies) exceed :func:`max_draw_bytes`."""
    chains = int(getattr(plan, "num_chains", 1))
    steps = int(getattr(plan, "num_steps", 0))
    dim = int(getattr(plan, "dim", 1))
    thinning = max(1, int(getattr(plan, "thinning", 1) or 1))
    if steps > _MAX_STEPS:
        raise ValueError(f"{prefix}horizon/ess: the plan needs {steps:.3g} steps per chain, more than a run can count "
                         f"({_MAX_STEPS}); ask for a shorter horizon or fewer effective draws")
    need = 12.0 * chains * (steps // thinning + 1) * dim  # float32 draws + a float64 copy
    limit = max_draw_bytes()
    if need > limit:
        raise ValueError(f"{prefix}chains/ess: {chains} chain(s) x {steps // thinning} draws x {dim} parameters need "
                         f"about {need / 2**30:.3g} GiB, more than the {limit / 2**30:.3g} GiB a run may use; ask "
                         "for fewer chains or fewer effective draws")


#: the estimate routes that run the horizon asked for (the others set their own from their target)
HORIZON_ROUTES = ("trajectory", "pure")


def refuse_unused_horizon(horizon_asked, plan, prefix: str = "") -> None:
    """A horizon the caller asked for that the chosen route does not run is refused before the charge
    (issue 40: ``route='auto'`` replaced it silently). ``horizon_asked`` None: nothing was asked."""
    if horizon_asked is not None and plan.route not in HORIZON_ROUTES:
        raise ValueError(f"{prefix}horizon: the route chosen, {plan.route!r}, sets its own horizon ({plan.horizon:.4g}), "
                         f"so horizon={horizon_asked:g} would not run; pass route='trajectory' to run it, or leave "
                         "horizon unset")
