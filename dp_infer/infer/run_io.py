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
from ..privacy.events import event_from_dict

__all__ = ["MODEL_ATTR", "plan_from_dict", "run_from_tree"]

#: root attribute of a model run: the model's public layout (sites, shapes, dims, data arguments)
MODEL_ATTR = "dp_infer_model"
_TUPLE_FIELDS = ("assumptions", "notes")


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
    own = list(kw.get("assumptions", ()))
    ev = list(event.assumptions)
    if ev and own[len(own) - len(ev):] == ev:
        own = own[: len(own) - len(ev)]
    kw["assumptions"] = tuple(own)
    return SamplingPlan(event=event, **kw)


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
    draws = _released(dt, "posterior")
    stats = _released(dt, "sample_stats")
    div = stats.get("diverging")
    description = dt.attrs.get("dp_infer_model")
    coords, dims = _coords_dims(dt)
    purified = theta = samples = None
    feature_names = None
    if plan.release == "purified_mean":
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
               report_extras={k: report[k] for k in ("routes_considered",) if k in report})
