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

Files (:func:`save`, :func:`load`; :func:`dp_infer.diagnostics.plots.report_from_file` adds plots)
    netCDF-4 (``.nc``; needs the ``h5netcdf`` or ``netCDF4`` package), zarr (``.zarr``; needs
    ``zarr``) or a dependency-free ``.zip`` of one netCDF-3 file per group (SciPy's writer).
    All attributes, including the JSON privacy report, survive the round trip.

Modules: :mod:`.privacy_report` (attribute names, the report and the private/unknown status),
:mod:`.export` (:func:`to_datatree`), :mod:`.io` (:func:`save`, :func:`load`), :mod:`.mixing`
and :mod:`.mixing_report` (checks), :mod:`.report` (text). Plots live one floor up, in
:mod:`dp_infer.diagnostics.plots`, which depends on this package and never the reverse.
"""

from __future__ import annotations

import importlib
import warnings

from .export import to_datatree
from .io import load, save
from .mixing import check_mixing, single_chain_rhat
from .mixing_report import DIVERGENCE_ADVICE, RHAT_ADVICE, MixingReport
from .privacy_report import (
    DEBUG_WARNING, DRAWS_ATTR, ESTIMATE_STATEMENT, FLAT_REPORT_KEYS, PRIVATE_ATTR, REPORT_ATTR,
    UNKNOWN_REASON_ATTR, WARNING_ATTR, get_report, is_private, privacy_cost_of_chains, privacy_status,
    report_to_dict, target_statement,
)
from .report import format_report, summary

__all__ = [
    "PRIVATE_ATTR",
    "REPORT_ATTR",
    "WARNING_ATTR",
    "UNKNOWN_REASON_ATTR",
    "DEBUG_WARNING",
    "FLAT_REPORT_KEYS",
    "DRAWS_ATTR",
    "ESTIMATE_STATEMENT",
    "target_statement",
    "report_to_dict",
    "to_datatree",
    "is_private",
    "privacy_status",
    "get_report",
    "save",
    "load",
    "MixingReport",
    "RHAT_ADVICE",
    "DIVERGENCE_ADVICE",
    "check_mixing",
    "single_chain_rhat",
    "privacy_cost_of_chains",
    "format_report",
    "summary",
]

_MOVED = {"report_from_file": "dp_infer.diagnostics.plots"}


def __getattr__(name):
    """Names that moved in 0.2 keep working for one release, with a DeprecationWarning."""
    if name in _MOVED:
        warnings.warn(f"dp_infer.diagnostics.{name} moved to {_MOVED[name]}.{name}; the old path "
                      "will be removed in the next release", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'dp_infer.diagnostics' has no attribute {name!r}")
