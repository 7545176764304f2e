"""A finished run's intervals for theta, whichever interval release it made: the door every entry point uses.

A loss run's release (:mod:`dp_infer.routes.newton_release`) is read by
:func:`dp_infer.diagnostics.released_interval.released_interval`; a NumPyro model's score release
(:mod:`dp_infer.model.score_release`) by :func:`dp_infer.diagnostics.model_prior.model_released_interval`
(its likelihood under the model's own prior). :func:`run_intervals` dispatches on the release's kind;
:func:`run_intervals_text` is the block the summary, ``dp-infer sample`` / ``report`` and the demo print.
Post-processing of what the run released: free.
"""

from __future__ import annotations

from .model_prior import model_released_interval
from .released_interval import ParameterIntervals, format_intervals, released_interval

__all__ = ["run_intervals", "run_intervals_text", "interval_names"]


def run_intervals(run, prob: float = 0.9) -> ParameterIntervals:
    """:func:`released_interval` for a finished posterior-mode run (live or loaded): its draws after
    burn-in, its plan's public beta, n, prior and kernel step, and its charged interval release.
    Raises ``ValueError`` with the reason for a run that has none (an estimate-mode run, a run on a
    mesh, a loss that is not generalised linear, or a run made with ``interval_share=0``). A NumPyro
    model's run carries its own release (:mod:`dp_infer.model.score_release`: intervals for the
    unconstrained coordinates)."""
    plan = run.plan
    if getattr(plan, "target", "estimate") != "posterior":
        raise ValueError(f"intervals need a posterior-mode run (target='posterior'); this run's target is "
                         f"{plan.target!r}: its draws are an estimate path, not a posterior")
    release = (run.report_extras or {}).get("interval_release")
    if release is None:
        why = (run.report_extras or {}).get("interval_release_skipped")
        raise ValueError("this run has no interval release" + (f": {why}" if why else " (made by fit(target='posterior') "
                         "on one device for a generalised linear loss, with interval_share > 0)")
                         + "; its tempered draws are all it released")
    if release.get("kind") == "model_score":  # a NumPyro model's run: its own release (dp_infer.model.score_release)
        return model_released_interval(release, prob=prob)
    return released_interval(release, n=plan.n, prior_precision=plan.prior_precision, prob=prob)


def interval_names(run) -> list[str] | None:
    """The names of a run's interval coordinates: a model run's release names its unconstrained
    coordinates (``w[age]``, ``tau (log)``); a loss run's are its feature names when they name every
    coordinate; else None."""
    rel = (getattr(run, "report_extras", None) or {}).get("interval_release") or {}
    fn = rel.get("names") if rel.get("kind") == "model_score" else None
    fn = fn or getattr(run, "feature_names", None)
    return [str(v) for v in fn] if fn and len(fn) == run.plan.dim else None


def run_intervals_text(run, heading: str, *, prob: float = 0.9, names=None, rows: int | None = None) -> str:
    """The intervals block every door prints (the summary, ``dp-infer sample`` and ``report``, the
    demo): ``heading`` then :func:`format_intervals` of :func:`run_intervals`, or one line saying why
    the run has none. ``names``: the coordinates' names (default: the run's feature names when they
    name every coordinate)."""
    try:
        iv = run_intervals(run, prob)
    except ValueError as e:
        return f"intervals for theta: not available ({e})"
    if names is None:
        names = interval_names(run)
    return heading + "\n" + format_intervals(iv, names, rows=rows)
