"""Reading a :class:`~dp_infer.infer.run.PrivateRun` back from an ArviZ run file: the plan from its report,
the released draws from ``warmup_posterior`` + ``posterior``, the model description, coords, dims
and feature names. Nothing private was written, so nothing private is read."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..routes.plan import SamplingPlan
from ..routes.posterior_details import PosteriorDetails
from ..privacy.events import event_from_dict

__all__ = ["MODEL_ATTR", "CLIPPED_ROWS_ATTR", "plan_from_dict", "run_from_tree", "run_from_fallback",
           "check_report_against_event"]

#: root attribute of a model run: the model's public layout (sites, shapes, dims, data arguments)
MODEL_ATTR = "dp_infer_model"
#: root attribute of a model run that released a charged private count of the rows its clip touched
CLIPPED_ROWS_ATTR = "dp_infer_clipped_rows"
_TUPLE_FIELDS = ("assumptions", "notes")
#: keys a run's report adds to the plan's ``posterior`` section (measurements, not plan fields)
REPORT_ONLY_POSTERIOR_KEYS = ("achieved",)


def plan_from_dict(d: dict) -> SamplingPlan:
    """Rebuild a :class:`~dp_infer.routes.plan.SamplingPlan` from ``plan.as_dict()`` (or a run's report).

    The event is rebuilt with :func:`~dp_infer.privacy.events.event_from_dict`; the event's own
    assumptions, which ``as_dict`` appends to the plan's, are taken off again; the routes
    considered are not kept (they are part of the report text, not of the plan's privacy)."""
    if not isinstance(d, dict) or "event" not in d or "route" not in d:
        raise ValueError("the run's report carries no plan (route and privacy event): not a dp_infer run file")
    event = event_from_dict(d["event"])
    kw: dict[str, Any] = {}
    for f in fields(SamplingPlan):
        if f.name in ("event", "options") or f.name not in d:
            continue
        v = d[f.name]
        kw[f.name] = tuple(v) if f.name in _TUPLE_FIELDS and v is not None else v
    if kw.get("posterior") is not None:
        # a report adds what the run measured (``achieved``: ESS and R-hat) beside the plan's fields
        kw["posterior"] = PosteriorDetails.from_dict({k: v for k, v in kw["posterior"].items()
                                                      if k not in REPORT_ONLY_POSTERIOR_KEYS})
    own = list(kw.get("assumptions", ()))
    ev = list(event.assumptions)
    if ev and own[len(own) - len(ev):] == ev:
        own = own[: len(own) - len(ev)]
    kw["assumptions"] = tuple(own)
    plan = SamplingPlan(event=event, **kw)
    check_report_against_event(d, plan)
    return plan


def check_report_against_event(d: dict, plan) -> None:
    """Refuse a report whose numbers differ from what its stored event gives (an edited or damaged
    run file): eps_spent is recomputed by the plan's accountant, mu read off the event."""
    import math

    def differs(stored, recomputed):
        if stored is None:
            return False
        try:
            stored = float(stored)
        except (TypeError, ValueError):
            return True
        if recomputed is None or not math.isfinite(stored):
            return not (recomputed is None and stored is None)
        return not math.isclose(stored, float(recomputed), rel_tol=1e-9, abs_tol=1e-12)

    for key, recomputed in (("eps_spent", plan.spent()["eps"]), ("mu", getattr(plan.event, "mu", None))):
        if differs(d.get(key), recomputed):
            raise ValueError(f"run file: the report's {key} = {d.get(key)!r} does not match its stored privacy event "
                             f"({recomputed!r}): the file was edited or damaged; it is not taken as genuine")


def _arrays(dt, group: str) -> dict[str, np.ndarray]:
    if group not in dt.children:
        return {}
    return {k: np.asarray(v.transpose("chain", "draw", ...).values) for k, v in dt[group].data_vars.items()}


def _released(dt, group: str) -> dict[str, np.ndarray]:
    main, warm = _arrays(dt, group), _arrays(dt, f"warmup_{group}")
    return {k: np.concatenate([warm[k], v], axis=1) if k in warm else v for k, v in main.items()}


def _coords_dims(dt) -> tuple[dict, dict]:
    coords, dims = {}, {}
    post = dt["posterior"]
    for name, var in post.data_vars.items():
        extra = [d for d in var.dims if d not in ("chain", "draw")]
        dims[name] = extra
        for d in extra:
            if d in post.coords:
                vals = post.coords[d].values.tolist()
                if vals != list(range(len(vals))):
                    coords[d] = vals
    return coords, dims


def _flat_from_sites(model: Callable, description: dict, samples: dict) -> np.ndarray:
    """Flat unconstrained draws (chains, draws, dim) from constrained site draws, the bridge's order."""
    from jax.flatten_util import ravel_pytree
    from numpyro import handlers
    from numpyro.distributions.transforms import biject_to

    x_name, y_name = description.get("data_arguments", ["X", "y"])
    nf = int(description.get("num_features", 1))
    tr = handlers.trace(handlers.seed(model, jax.random.key(1))).get_trace(
        **{x_name: jnp.zeros((1, nf)), y_name: jnp.zeros((1,))})
    names = list(description["latent_sites"])
    missing = [k for k in names if k not in tr]
    if missing:
        raise ValueError(f"the model given does not have the run's latent site(s) {missing}: pass the model the "
                         "run was fitted with")
    supports = {k: tr[k]["fn"].support for k in names}
    lead = next(iter(samples.values())).shape[:2]

    def flat(values):
        return ravel_pytree({k: biject_to(supports[k]).inv(values[k]) for k in names})[0]

    merged = {k: jnp.asarray(samples[k]).reshape((-1,) + samples[k].shape[2:]) for k in names}
    out = np.asarray(jax.vmap(flat)(merged))
    return out.reshape(lead + (out.shape[-1],))


def run_from_tree(cls, dt, *, model: Callable | None = None):
    """A ``cls`` (PrivateRun) from a loaded run tree; see :meth:`dp_infer.infer.run.PrivateRun.load`."""
    from ..diagnostics import get_report

    report = get_report(dt)
    if report is None:
        raise ValueError("the run file carries no privacy report: not a dp_infer run (or a debug export)")
    plan = plan_from_dict(report)
    if "posterior" not in dt.children:
        raise ValueError("the run file has no 'posterior' group (its released draws): damaged or not a dp_infer run")
    draws = _released(dt, "posterior")
    stats = _released(dt, "sample_stats")
    div = stats.get("diverging")
    description = dt.attrs.get("dp_infer_model")
    coords, dims = _coords_dims(dt)
    purified = theta = samples = None
    feature_names = None
    if plan.release == "purified_mean":
        if "theta" not in draws:
            raise ValueError("the run file has no 'theta' estimate in its posterior group: damaged")
        purified = draws["theta"][0, 0]
        div = None
    elif description is not None:
        samples = draws
        if model is not None:
            theta = _flat_from_sites(model, description, samples)
        feature_names = description.get("feature_names")
    else:
        theta = draws.get("theta")
        if theta is None:
            raise ValueError(f"the run file has no 'theta' draws (variables {sorted(draws)}) and no model description")
    if description is None and dims.get("theta") and dims["theta"][0] in coords:
        feature_names = [str(c) for c in coords[dims["theta"][0]]]
    potential = report.get("potential") or {}
    return cls(plan, theta, None if div is None else div.astype(bool), report.get("randomness") or {},
               potential, purified=purified, samples=samples, model_description=description,
               coords=coords or None, dims=dims or None, feature_names=feature_names,
               extensions=list(report.get("extensions") or []), model=model,
               report_extras={k: report[k] for k in _KEPT_REPORT_KEYS if k in report},
               clipped_rows=_clipped_rows(dt.attrs.get(CLIPPED_ROWS_ATTR), report))


#: report items that are not part of the plan, kept by a loaded run so its report is the saved one
_KEPT_REPORT_KEYS = ("routes_considered", "clipped_rows", "clipped_rows_skipped", "interval_release",
                     "interval_release_skipped")


def _clipped_rows(value, report: dict) -> dict | None:
    """A model run's released (charged) clip count, checked against what its report says was charged."""
    if value is None:
        return None
    charged = report.get("clipped_rows")
    if not isinstance(value, dict) or not isinstance(charged, dict) or "noisy_count" not in value:
        raise ValueError("run file: it holds a clipped-row count but its report does not say the count was charged: "
                         "damaged or edited; it is not taken as genuine")
    if any(k in value and value[k] != charged[k] for k in charged):
        raise ValueError("run file: the stored clipped-row count does not match the charge its report describes: "
                         "damaged or edited; it is not taken as genuine")
    return dict(value)


def run_from_fallback(cls, data: dict, *, model: Callable | None = None):
    """A ``cls`` (PrivateRun) from a fallback file's arrays (:func:`dp_infer.infer.fallback.read_fallback`;
    a proximal run's: :meth:`dp_infer.infer.proximal.ProximalRun.from_fallback`). The report is
    checked against its stored event as for a run file."""
    kind = str(data["kind"].item())
    level = str(data["report_level"].item())
    report = data["report"]
    if kind == "rashomon" or any(k.startswith("extension:") for k in data) or level not in ("report", "plan") \
            or not isinstance(report, dict):
        raise ValueError("this fallback file holds draws that are not a complete run (a Rashomon run, the new segment "
                         "of an extension, or no plan): read it with numpy.load (docs: dp_infer.infer.fallback)")
    if kind == "proximal_run":
        raise ValueError("this fallback file holds a proximal run: read it with dp_infer.PrivateRun.load or "
                         "dp_infer.infer.proximal.ProximalRun.load")
    plan = plan_from_dict(report)
    samples = {k[len("site:"):]: np.asarray(v) for k, v in data.items() if k.startswith("site:")} or None
    description = data.get("model")
    theta = np.asarray(data["theta"]) if "theta" in data else None
    if theta is None and description is not None and samples is not None and model is not None:
        theta = _flat_from_sites(model, description, samples)
    if theta is None and "purified" not in data and samples is None:
        raise ValueError("the fallback file holds no draws ('theta', 'purified' or 'site:<name>'): damaged")
    div = data.get("diverging")
    return cls(plan, theta, None if div is None else np.asarray(div, dtype=bool), report.get("randomness") or {},
               report.get("potential") or {}, purified=np.asarray(data["purified"]) if "purified" in data else None,
               samples=samples, model_description=description, coords=data.get("coords"), dims=data.get("dims"),
               feature_names=data.get("feature_names"), extensions=list(report.get("extensions") or []),
               model=model, report_extras={k: report[k] for k in _KEPT_REPORT_KEYS if k in report},
               clipped_rows=_clipped_rows(data.get("clipped_rows"), report))
