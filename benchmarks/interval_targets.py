"""Issue 37's targets, every one measured by one command: ``python -m benchmarks.interval_targets``.

``python -m benchmarks.interval_targets [--quick] [--log PATH] [--md PATH] [--parts NAME ...]``

Each *part* below is one measurement the targets table needs, made by the benchmark that owns it (this module
adds no method of its own: it calls them with the settings docs/results.md gives, and reads their figures into
one table). A part's result is appended to ``--log`` (one JSON object a line) as it finishes, so a run stopped
part-way is resumed by the same command: the parts already logged at the same size are read back, not run again.
The table (markdown) is printed at the end and, with ``--md``, written there.

Parts (the full size; ``--quick`` in brackets, for a first look: its coverage figures carry 2-3x the
Monte-Carlo error):

* ``adult``: the demo's setting, Adult at eps = 1 with the public test file's features
  (:func:`benchmarks.public_curvature.adult_public_curvature`), seeds 0, 1, 2 [0];
* ``adult_model``: the Adult model written in NumPyro, the same public rows
  (:func:`benchmarks.model_public_curvature.adult_model`), seeds 0, 2 [0];
* ``new_table``: a table this project has never seen, through a user's pipeline, logistic and misspecified
  labels, the loss route and the NumPyro model route (:func:`benchmarks.new_table.new_table`), seeds 0, 1, 2 [0];
* ``coverage``: coverage of a known truth by the default run's intervals on ``logistic_small`` and ``huber_small``
  (:func:`benchmarks.intervals.one`), 50 datasets each [10];
* ``coverage_public``: the same with public feature rows on the issue's small design ``logistic_d20`` (50 [10]) and
  the Adult-shaped one (16 [3]) (:func:`benchmarks.public_curvature.adult_shaped_coverage`);
* ``coverage_model``: your own NumPyro logistic model with public rows, ``logistic_small`` and ``logistic_d20``
  (:func:`benchmarks.model_public_curvature.model_coverage`), 50 datasets each [10];
* ``coverage_hierarchical``: a hierarchical NumPyro model (4 groups, n 4,000, eps 2;
  :func:`benchmarks.hierarchical_intervals.one`), 50 datasets [10];
* ``forecast``: the forecast of the typical sd and of the interval width against the run
  (:mod:`benchmarks.sd_forecast`): ``logistic_small``, ``logistic_2k``, ``huber_small``, Adult in full with public
  curvature, Adult on 5,000 rows (seed 0);
* ``small_n``: Adult on 5,000 rows, the posterior mean's accuracy against the estimate mode's
  (:func:`benchmarks.small_n.one`), seeds 0, 1 [0].

On a 2-core machine ``--quick`` took 18 minutes and the full size takes about 80 (from the parts' times);
docs/results.md has the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

#: the issue's bars
SHARE_MIN, SIGNS_MIN, WIDTH_MAX = 0.60, 0.95, 2.0
COVERAGE_BAND = (0.85, 0.95)
FORECAST_BAND = (0.75, 1.25)

#: per part, its size at full scale and with --quick
SIZES = {"full": {"seeds": (0, 1, 2), "model_seeds": (0, 2), "datasets": 50, "adult_shaped": 16,
                  "small_n_seeds": (0, 1)},
         "quick": {"seeds": (0,), "model_seeds": (0,), "datasets": 10, "adult_shaped": 3, "small_n_seeds": (0,)}}


def _adult(size):
    from .public_curvature import adult_public_curvature

    return [adult_public_curvature(1.0, s) for s in size["seeds"]]


def _adult_model(size):
    from .model_public_curvature import adult_model

    return [adult_model(1.0, s) for s in size["model_seeds"]]


def _new_table(size):
    from .new_table import new_table

    return {f"{'misspecified' if mis else 'logistic'}, {'model' if model else 'loss'} route":
            new_table(size["seeds"], misspecified=mis, model=model)
            for model in (False, True) for mis in (False, True)}


def _coverage(size):
    from .intervals import one, summarise

    rows = [one((design, s)) for design in ("logistic_small", "huber_small") for s in range(size["datasets"])]
    return summarise(rows)


def _coverage_public(size):
    from .public_curvature import adult_shaped_coverage

    return {"logistic_d20": adult_shaped_coverage(range(size["datasets"]), "logistic_d20"),
            "adult_shaped": adult_shaped_coverage(range(size["adult_shaped"]), "adult_shaped")}


def _coverage_model(size):
    from .model_public_curvature import model_coverage

    return {d: model_coverage(range(size["datasets"]), d, log=lambda s: None)
            for d in ("logistic_small", "logistic_d20")}


def _coverage_hierarchical(size):
    from .hierarchical_intervals import one, summarise

    return summarise([one(s, n=4000, groups=4, eps=2.0) for s in range(size["datasets"])], 4)


def _forecast(size):
    from .sd_forecast import adult, simulated

    rows = [simulated(d) for d in ("logistic_small", "logistic_2k", "huber_small")]
    return rows + [adult(None, 7, "public"), adult(5000, 0)]


def _small_n(size):
    from .small_n import one

    return [one(s) for s in size["small_n_seeds"]]


PARTS = {"adult": _adult, "adult_model": _adult_model, "new_table": _new_table, "coverage": _coverage,
         "coverage_public": _coverage_public, "coverage_model": _coverage_model,
         "coverage_hierarchical": _coverage_hierarchical, "forecast": _forecast, "small_n": _small_n}


def _fmt(values, digits=3) -> str:
    return " / ".join("--" if v is None else f"{v:.{digits}f}" for v in values)


def _within(v, band) -> bool:
    return v is not None and band[0] <= v <= band[1]


def _row(target: str, case: str, values, met: bool, note: str = "") -> dict:
    return {"target": target, "case": case, "measured": values, "met": met, "note": note}


def _determined_rows(case: str, runs: list, keys=("share", "signs", "width"), predicted: str | None = None) -> list:
    """The three Adult-style rows for one case from its runs (one dict a seed; ``keys``: the names of its share
    determined, signs right and median width): per-seed figures, met where every seed meets the bar. A run without
    intervals (``release_made`` false) shows as ``--`` and fails every bar."""
    share, signs, width = ([r.get(k) if r.get("release_made", True) else None for r in runs] for k in keys)
    pred = (f"; the run's own estimate of the width: {_fmt([r.get(predicted) for r in runs], 2)}"
            if predicted else "")
    return [_row(f">= {SHARE_MIN:.0%} of the non-private posterior's determined coefficients determined", case,
                 _fmt(share), bool(runs) and all(v is not None and v >= SHARE_MIN for v in share)),
            _row(f">= {SIGNS_MIN:.0%} of the determined coefficients' signs right", case, _fmt(signs),
                 bool(runs) and all(v is not None and v >= SIGNS_MIN for v in signs)),
            _row(f"median width <= {WIDTH_MAX:g}x the non-private posterior's on those coefficients", case,
                 _fmt(width, 2) + pred, bool(runs) and all(v is not None and v <= WIDTH_MAX for v in width))]


#: the keys of the three figures in each part's runs
ADULT_KEYS = ("determined_share_of_np", "determined_signs_right", "median_width_ratio_np_determined")
NEW_TABLE_KEYS = ("share_determined", "signs_right", "median_width_over_np_sd")


def target_rows(results: dict) -> list:
    """The targets table's rows from the parts' results (any subset of :data:`PARTS`): each a dict with the
    target, the case, the measured figures (per seed or per design, ``a / b / c``), whether it is met (every seed
    within the bar) and a note."""
    rows = []
    if "adult" in results:
        rows += _determined_rows(f"Adult, eps 1, the demo's setting (seeds {_seeds(results['adult'])})",
                                 results["adult"], ADULT_KEYS, predicted="predicted_median_width_ratio")
    if "adult_model" in results:
        rows += _determined_rows(f"Adult model written in NumPyro (seeds {_seeds(results['adult_model'])})",
                                 results["adult_model"], ADULT_KEYS)
    for name, r in results.get("new_table", {}).items():
        rows += _determined_rows(f"a table never seen, {name} (seeds {_seeds(r['runs'])})", r["runs"], NEW_TABLE_KEYS)
    rows += _coverage_rows(results)
    rows += _forecast_rows(results)
    for r in results.get("small_n", []):
        ok = r["posterior"] >= r["estimate"] or r["close_to_prior"]
        rows.append(_row("small n: the posterior mean predicts no worse than the estimate mode, or the forecast "
                         "says beforehand that the run will be the prior", f"Adult, 5,000 rows (seed {r['seed']})",
                         f"accuracy {r['posterior']:.3f} against {r['estimate']:.3f}; forecast sd / prior sd "
                         f"{r['forecast_sd_ratio']:.2f} ({'' if r['close_to_prior'] else 'not '}close to the prior), "
                         f"measured {r['measured_sd_ratio']:.2f}", ok))
    return rows


def _seeds(rs) -> str:
    return ", ".join(str(r["seed"]) for r in rs)


def _coverage_rows(results: dict) -> list:
    target = f"coverage {COVERAGE_BAND[0]:.2f}-{COVERAGE_BAND[1]:.2f} at nominal 0.90"
    rows = []
    for design, s in results.get("coverage", {}).items():
        e = s["by_kind"]["all"]["run"]
        forced = " (release forced: the default makes none)" if s["forced"] else ""
        rows.append(_row(target, f"{design}, default run{forced}, {s['datasets']} datasets",
                         f"{e['coverage']:.3f} (se {e['clustered_se']:.3f}), width "
                         f"{e['median_ratio']:.2f}x",
                         _within(e["coverage"], COVERAGE_BAND)))
    for part, case in (("coverage_public", "{}, public feature rows"),
                       ("coverage_model", "your own NumPyro model, {}, public rows")):
        for design, s in results.get(part, {}).items():
            rows.append(_row(target, f"{case.format(design)}, {s['datasets']} datasets",
                             f"{s['all']['coverage']:.3f} (se {_se(s)}), width {s['median_width_ratio']:.2f}x",
                             _within(s["all"]["coverage"], COVERAGE_BAND)))
    h = results.get("coverage_hierarchical")
    if h is not None and not h.get("datasets"):  # every dataset without a release: no coverage, and said
        rows.append(_row(target, f"hierarchical NumPyro model, {h.get('skipped', 0)} datasets, none with a release",
                         "--", False, "; ".join(h.get("skip_reasons", []))))
    elif h is not None:
        a = h["model_prior"]["all"]
        rows.append(_row(target, f"hierarchical NumPyro model, {h['datasets']} datasets ({h['skipped']} without a "
                                 "release)", f"{a['coverage']:.3f} (se {a['se_datasets']:.3f}); unflagged "
                                 f"{a['unflagged']['coverage']:.3f}", _within(a["coverage"], COVERAGE_BAND)))
    return rows


def _se(s) -> str:
    v = s.get("coverage_se_over_datasets")
    return "--" if v is None else f"{v:.3f}"


def _forecast_rows(results: dict) -> list:
    rows = []
    for r in results.get("forecast", []):
        fc = r["public"] if r["public"] is not None else r["even"]
        q = fc / r["measured"]
        rows.append(_row("the typical sd forecast within 25%", r["case"],
                         f"forecast {fc:.3f}, measured {r['measured']:.3f} (of the prior sd): {q:.2f}x",
                         _within(q, FORECAST_BAND)))
        if r["width"] is not None and r["width_forecast"] is not None:
            q = r["width_forecast"] / r["width"]
            rows.append(_row("the interval width forecast within 25%", r["case"],
                             f"forecast {r['width_forecast']:.2f}x, measured {r['width']:.2f}x: {q:.2f}x",
                             _within(q, FORECAST_BAND)))
    return rows


def to_markdown(rows: list, command: str, sizes: dict, wall: dict) -> str:
    out = [f"Command: `{command}`; parts and their wall time: "
           + ", ".join(f"{k} {wall[k] / 60:.1f} min" for k in wall) + f"; sizes {json.dumps(sizes)}.", "",
           "| target | case | measured | met? |", "|---|---|---|---|"]
    for r in rows:
        measured = f"{r['measured']} ({r['note']})" if r["note"] else r["measured"]
        out.append(f"| {r['target']} | {r['case']} | {measured} | {'yes' if r['met'] else '**no**'} |")
    return "\n".join(out)


def _plain(v):
    """numpy scalars and arrays as Python numbers and lists (for JSON)."""
    import numpy as np

    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"not JSON: {type(v).__name__}")


def _read_log(path, scale) -> dict:
    done = {}
    if path and os.path.exists(path):
        for line in open(path):
            if line.strip():
                r = json.loads(line)
                if r["scale"] == scale:
                    done[r["part"]] = r
    return done


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.interval_targets", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer seeds and datasets (module doc)")
    p.add_argument("--parts", nargs="+", choices=list(PARTS), default=list(PARTS))
    p.add_argument("--log", help="append each part's result there as it finishes; parts already there are read back")
    p.add_argument("--md", help="write the table there too")
    a = p.parse_args(argv)
    scale = "quick" if a.quick else "full"
    done = _read_log(a.log, scale)
    results, wall = {}, {}
    for name in a.parts:
        if name in done:
            results[name], wall[name] = done[name]["result"], done[name]["seconds"]
            continue
        t0 = time.time()
        # through JSON either way, so a fresh result and one read back from the log are the same objects
        results[name] = json.loads(json.dumps(PARTS[name](SIZES[scale]), default=_plain))
        wall[name] = time.time() - t0
        print(f"{name}: {wall[name] / 60:.1f} min", file=sys.stderr, flush=True)
        if a.log:
            with open(a.log, "a") as f:
                f.write(json.dumps({"part": name, "scale": scale, "seconds": wall[name], "result": results[name]})
                        + "\n")
    command = "python -m benchmarks.interval_targets " + " ".join(sys.argv[1:] if argv is None else argv)
    md = to_markdown(target_rows(results), command, SIZES[scale], wall)
    print(md)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md + "\n")


if __name__ == "__main__":
    main()
