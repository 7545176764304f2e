"""Text and HTML renderings of a Rashomon run (privacy block, coefficients, measures) and the
JSON-ready conversion. Pure formatting: nothing here reads data."""

from __future__ import annotations

import html
import math

import numpy as np

#: Keys of the privacy block, in print order (those present are shown).
PRIVACY_KEYS = ("guarantee", "route", "eps", "delta", "eps_spent", "mu", "beta", "psi",
                "thresholded_sensitivity", "threshold_width", "threshold_curvature",
                "shell_factor_bound", "horizon", "step_size", "num_steps", "num_chains", "thinning",
                "randomness")
MAX_ROWS = 30


def jsonable(x):
    """Numpy arrays and scalars to lists / Python numbers; non-finite floats to None."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if math.isfinite(v) else None
    return x if x is None or isinstance(x, str) else str(x)


def _fmt(v) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{k} {v2}" for k, v2 in v.items())
    return str(v)


def privacy_rows(report: dict) -> list[tuple[str, str]]:
    return [(k, _fmt(report[k])) for k in PRIVACY_KEYS if k in report and report[k] is not None]


def coefficient_rows(m) -> list[list[str]]:
    cr, ss = m.coefficient_ranges, m.sign_stability
    return [[str(name), f"{cr['mean'][j]:.3f}", f"{cr['q_low'][j]:.3f}", f"{cr['q_high'][j]:.3f}",
             f"{cr['low'][j]:.3f}", f"{cr['high'][j]:.3f}", f"{ss['share'][j]:.3f}"]
            for j, name in enumerate(m.feature_names)][:MAX_ROWS]


COEF_HEAD = ["coefficient", "mean", "2.5%", "97.5%", "min", "max", "sign share"]
MCR_HEAD = ["feature", "MCR-", "2.5%", "median", "97.5%", "MCR+"]


def summary_rows(m) -> list[tuple[str, str]]:
    rows = []
    if m.prediction_ranges is not None:
        w = m.prediction_ranges["width"]
        rows.append(("viable prediction ranges", f"mean width {w.mean():.4f}, max {w.max():.4f}"))
    if m.ambiguity is not None:
        a = m.ambiguity
        rows.append(("ambiguity (flip rate)", f"{a['flip_rate']:.4f} ({a['num_flipped']} of {m.num_rows} rows)"))
    if m.discrepancy is not None:
        rows.append(("discrepancy", f"{m.discrepancy:.4f}"))
    if m.capacity is not None:
        c = m.capacity
        rows.append(("Rashomon capacity", f"mean {c['mean']:.4f}, median {c['median']:.4f}, "
                                          f"90% {c['q90']:.4f}, max {c['max']:.4f} (1 = no multiplicity, 2 = max)"))
    if m.patterns is not None:
        p = m.patterns
        rows.append(("pattern Rashomon ratio", f"{p['num_patterns']} distinct labelings of {p['num_rows']} rows "
                                               f"among {p['num_draws']} draws; log10 ratio {p['log10_ratio']:.2f}"
                                               + (" (every draw distinct: more draws would find more)"
                                                  if p["saturated"] else "")))
    return rows


def mcr_rows(m) -> list[list[str]]:
    r = m.reliance
    return [[name, f"{r['mcr_minus'][j]:.4f}", f"{r['q'][0][j]:.4f}", f"{r['q'][1][j]:.4f}",
             f"{r['q'][-1][j]:.4f}", f"{r['mcr_plus'][j]:.4f}"]
            for j, name in enumerate(r["feature_names"])][:MAX_ROWS]


def _table_text(head, rows) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows)]
    line = lambda cells: "  " + "  ".join(str(c).rjust(w) if i else str(c).ljust(w)  # noqa: E731
                                          for i, (c, w) in enumerate(zip(cells, widths)))
    return [line(head)] + [line(r) for r in rows]


def measures_text(m) -> str:
    out = [f"coefficients over {m.num_draws} draws (post-processing of the released draws):"]
    out += _table_text(COEF_HEAD, coefficient_rows(m))
    if len(m.feature_names) > MAX_ROWS:
        out.append(f"  ... ({len(m.feature_names) - MAX_ROWS} more coefficients in the JSON / to_dict())")
    if m.num_rows is None:
        out.append("(row-wise measures need public evaluation rows)")
    else:
        out.append(f"measures on {m.num_rows} public evaluation rows; reference model: {m.reference}")
        out += [f"  {k:26s} {v}" for k, v in summary_rows(m)]
    if m.reliance is not None:
        out.append(f"model class reliance ({m.reliance['kind']}, {m.reliance['method']}, loss without the "
                   "penalty; an estimate from the draws):")
        out += _table_text(MCR_HEAD, mcr_rows(m))
        if len(m.reliance["feature_names"]) > MAX_ROWS:
            out.append(f"  ... ({len(m.reliance['feature_names']) - MAX_ROWS} more features in the JSON / to_dict())")
        if m.reliance.get("max_se"):
            out.append(f"  (largest Monte-Carlo standard error of a draw's reliance: {m.reliance['max_se']:.2g})")
    out += [f"note: {n}" for n in m.notes]
    return "\n".join(out)


def _table_html(head, rows) -> str:
    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in head)
    b = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>"


def measures_html(m) -> str:
    parts = [f"<p>Coefficients over {m.num_draws} draws</p>", _table_html(COEF_HEAD, coefficient_rows(m))]
    if m.num_rows is not None:
        parts.append(f"<p>Measures on {m.num_rows} public evaluation rows; reference: "
                     f"{html.escape(m.reference)}</p>")
        parts.append(_table_html(["measure", "value"], summary_rows(m)))
    if m.reliance is not None:
        parts.append(f"<p>Model class reliance ({html.escape(m.reliance['method'])}; loss without the "
                     "penalty; an estimate from the draws)</p>")
        parts.append(_table_html(MCR_HEAD, mcr_rows(m)))
    return "\n".join(parts)


def run_header(result) -> str:
    model = result.model
    what = (f"{model.kind} model{' with intercept' if model.intercept else ''}" if model is not None
            else f"loss {result.loss.name}")
    return f"Rashomon set of a {what}, psi = {result.psi:g}, mode {result.mode}"


def run_text(result, measures=None) -> str:
    rep = result.privacy
    out = [run_header(result), "privacy report" if result.is_private else
           "report (NON-PRIVATE reference run: no guarantee)"]
    out += [f"  {k:26s} {v}" for k, v in privacy_rows(rep)]
    out += [f"  assumption: {a}" for a in rep.get("assumptions", [])]
    out += [f"  note: {n}" for n in rep.get("notes", [])]
    ch, nd = result.draws.shape[:2]
    out.append(f"draws: {ch} chain(s) x {nd} released draws; {result.burn_in} per chain dropped as burn-in "
               "from the measures (they are released too)")
    if measures is not None:
        out.append(measures.text())
    return "\n".join(out)


def run_html(result, measures=None) -> str:
    rep = result.privacy
    parts = [f"<h4>{html.escape(run_header(result))}</h4>",
             _table_html(["privacy", ""], privacy_rows(rep))]
    items = [f"<li>assumption: {html.escape(a)}</li>" for a in rep.get("assumptions", [])]
    items += [f"<li>note: {html.escape(n)}</li>" for n in rep.get("notes", [])]
    if items:
        parts.append("<ul>" + "".join(items) + "</ul>")
    if measures is not None:
        parts.append(measures_html(measures))
    return "\n".join(parts)


class RashomonReport:
    """What :meth:`RashomonResult.report` returns: ``str()`` is the text, notebooks show HTML."""

    def __init__(self, result, measures=None):
        self.result, self.measures = result, measures

    def __str__(self) -> str:
        return run_text(self.result, self.measures)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return run_html(self.result, self.measures)

    def to_dict(self) -> dict:
        return self.result.to_dict(self.measures)
