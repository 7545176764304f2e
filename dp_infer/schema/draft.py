"""Draft a schema from a data file, for a human to review: non-private, or private with OpenDP.

Non-private draft (:func:`draft_nonprivate`)
    Reads the data: bounds are the observed min / max, levels the observed values (most frequent
    first, the most frequent is the reference). Fine for data you may inspect (public data, or
    your own data before it is shared); using it to fit a private model on the *same* private
    data would leak through the bounds and levels. The file header says so.

Private draft (:func:`draft_private`, OpenDP)
    Each column receives an equal share ``eps / k`` of the budget (k = number of columns drafted)
    and ``delta / k``:

    * kind (skipped when declared in ``kinds``): a Laplace-noised count of cells that parse as
      numbers vs cells that do not (10% of the column's share); numeric if the noisy count of
      numbers is larger;
    * numeric: a Laplace histogram over fixed, data-independent bins (edges: the "nice number"
      grid of :func:`default_candidates`; OpenDP ``make_count_by_categories`` + ``make_laplace``);
      bins whose noisy count is below ``(2/eps_bins) log(20 k)`` are zeroed, and the bounds are
      the ``quantiles`` (default 2% and 98%) of what remains, widened to bin edges -- DP quantiles
      by post-processing a DP histogram (an exponential-mechanism quantile over such a wide grid
      was tried: the many empty candidates outside the data's range nearly tie with the best);
    * categorical: levels from a thresholded Laplace histogram over an unknown domain (OpenDP
      ``make_count_by`` + ``make_laplace_threshold``; this is where ``delta`` is spent), most
      frequent first; ``unknown: other`` so unseen levels are handled;
    * binary target: the two most frequent released labels (the less frequent one is declared
      positive: review it).

    Neighbouring datasets differ in one row replaced (the library's adjacency), i.e. OpenDP's
    symmetric distance 2; every OpenDP privacy map is evaluated at ``d_in = 2`` and the per-column
    losses are added (basic composition, adaptive). The sum is checked against ``(eps, delta)``
    before anything runs, and ``(eps, delta)`` is charged to the ledger BEFORE any statistic is
    computed. Row counts, the header (column names) and the file format are treated as public.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .._validation import check_delta, check_epsilon
from ..privacy.events import ApproxDpEvent
from ..privacy.ledger import charged
from .feature_map import as_level_strings, missing_mask
from .readers import read_table
from .spec import DEFAULT_NA_VALUES, Column, Schema, Target

__all__ = ["draft_nonprivate", "draft_private", "default_candidates", "NONPRIVATE_HEADER", "DraftResult"]

NONPRIVATE_HEADER = (
    "NON-PRIVATE DRAFT: bounds and levels below were READ FROM THE DATA ({source}).\n"
    "Review every entry. Use it only for data you are allowed to inspect: fitting a private model\n"
    "on the same private data with this schema leaks through the bounds and levels.")
PRIVATE_HEADER = (
    "PRIVATE DRAFT (OpenDP): bounds are DP quantiles and levels DP histograms of {source},\n"
    "released at (eps = {eps:g}, delta = {delta:g}) under replace-one adjacency{charged}.\n"
    "Review every entry (kinds, reference levels, the positive label, bounds) before use.")


class DraftResult:
    """A drafted :class:`Schema` plus its file header and, for a private draft, the privacy spent."""

    def __init__(self, schema: Schema, header: str, spent: dict | None = None, receipt=None):
        self.schema, self.header, self.spent, self.receipt = schema, header, spent, receipt


def default_candidates() -> np.ndarray:
    """Data-independent bin edges for numeric bounds: 0 and +-{1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9} x 10^k,
    k = -3..9 (a "nice number" grid from 1e-3 to 9e9)."""
    mant = np.array([1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9])
    pos = np.concatenate([mant * 10.0 ** k for k in range(-3, 10)])
    return np.unique(np.concatenate([-pos, [0.0], pos]))


def _numbers(s: pd.Series, na: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(parsed floats, is-number mask) for the non-missing cells."""
    miss = missing_mask(s, na)
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        v = s.to_numpy(dtype=float, na_value=np.nan)
    else:
        v = pd.to_numeric(s.map(lambda x: x.strip() if isinstance(x, str) else x),
                          errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return v, ~miss & np.isfinite(v)


def _nice_floor(x: float) -> float:
    return float(x) if float(x).is_integer() else math.floor(x * 1000) / 1000


def _dialect(data: Any, read_kwargs: dict) -> dict | None:
    """The CSV options used to read a file, kept in the draft so the schema reads it the same way."""
    if not (isinstance(data, (str, bytes)) or hasattr(data, "__fspath__")):
        return None
    d = {k: (list(v) if k == "names" else v) for k, v in read_kwargs.items() if v is not None}
    if d.get("delimiter") == ",":
        d.pop("delimiter")
    if d.get("header") is True:
        d.pop("header")
    return d or None


def _check_target(df: pd.DataFrame, target: str | None) -> None:
    if target is not None and target not in df.columns:
        raise ValueError(f"target: column {target!r} is not in the data (columns: {list(df.columns)})")


def _target_from_levels(name: str, levels: Sequence[str], note: str) -> Target:
    if len(levels) < 2:
        raise ValueError(f"target {name!r}: fewer than 2 labels could be drafted ({list(levels)}); "
                         "declare the target by hand")
    # levels are sorted most frequent first: the rarer of the top two is the positive label
    return Target(name, "binary", positive=(levels[1],), negative=(levels[0],),
                  note=note + "; positive = the less frequent label: review")


# ---------------------------------------------------------------------------------------------
# non-private
# ---------------------------------------------------------------------------------------------

def draft_nonprivate(data: Any, target: str | None = None, *, na_values: Sequence[str] = DEFAULT_NA_VALUES,
                     max_levels: int = 50, **read_kwargs) -> DraftResult:
    """A schema drafted by READING the data (see the module docstring). Not private."""
    df = read_table(data, **read_kwargs)
    _check_target(df, target)
    na = tuple(str(v) for v in na_values)
    cols, tgt = [], None
    for name in df.columns:
        s = df[name]
        v, isnum = _numbers(s, na)
        present = ~missing_mask(s, na)
        if not present.any():
            continue  # an all-missing column carries nothing to declare
        counts = as_level_strings(s[present]).value_counts()
        levels = [str(x) for x in counts.index]
        numeric_col = isnum[present].all() and len(levels) > 2
        miss_note = f"{int((~present).sum())} missing cell(s) seen" if (~present).any() else ""
        if name == target:
            if numeric_col:
                vals = v[isnum]
                if np.all(vals >= 0) and np.all(vals == np.floor(vals)):
                    tgt = Target(name, "count", max_count=max(int(vals.max()), 1), note="max read from the data")
                else:
                    tgt = Target(name, "numeric", bounds=(float(vals.min()), float(vals.max())),
                                 note="bounds read from the data")
            else:
                tgt = _target_from_levels(name, levels, "labels read from the data")
            continue
        if numeric_col:
            lo, hi = float(v[isnum].min()), float(v[isnum].max())
            if lo == hi:
                hi = lo + 1.0
            cols.append(Column(name, "numeric", bounds=(lo, hi),
                               note="; ".join(x for x in ("bounds = observed min/max", miss_note) if x)))
        elif len(levels) == 2:
            cols.append(Column(name, "binary", levels=tuple(sorted(levels)), note=miss_note))
        elif len(levels) >= 2:
            keep = levels[:max_levels]
            unk = "other" if len(levels) > max_levels or "other" not in keep else "error"
            keep = [lv for lv in keep if not (unk == "other" and lv == "other")]
            note = f"{len(levels)} levels seen, most frequent first" + (
                f"; only the {max_levels} most frequent kept" if len(levels) > max_levels else "")
            cols.append(Column(name, "categorical", levels=tuple(keep), unknown=unk,
                               note="; ".join(x for x in (note, miss_note) if x)))
    if not cols:
        raise ValueError("data: no column could be drafted (every column is empty or constant)")
    src = str(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") else type(data).__name__
    schema = Schema(columns=tuple(cols), target=tgt, na_values=na, read=_dialect(data, read_kwargs))
    return DraftResult(schema, NONPRIVATE_HEADER.format(source=src))


# ---------------------------------------------------------------------------------------------
# private (OpenDP)
# ---------------------------------------------------------------------------------------------

_D_IN = 2  # replace-one adjacency = symmetric distance 2


def _dp():
    try:
        import opendp.prelude as dp
    except ImportError:  # pragma: no cover - the data extra installs it
        raise ValueError("a private draft needs OpenDP: pip install 'dp_infer[data]'") from None
    dp.enable_features("contrib")
    return dp


def _kind_measure(dp, eps: float):
    space = dp.vector_domain(dp.atom_domain(T=str)), dp.symmetric_distance()
    counts = space >> dp.t.then_count_by_categories(categories=["number", "text"], MO=dp.L1Distance[int])
    m = dp.binary_search_chain(lambda s: counts >> dp.m.then_laplace(scale=s), d_in=_D_IN, d_out=eps)
    return m


def _binned_measure(dp, n_bins: int, eps: float):
    """Laplace histogram over ``n_bins`` fixed public bins (labels "0".."n_bins-1"); pure eps."""
    space = dp.vector_domain(dp.atom_domain(T=str)), dp.symmetric_distance()
    cats = [str(i) for i in range(n_bins)]
    counts = space >> dp.t.then_count_by_categories(categories=cats, null_category=False,
                                                    MO=dp.L1Distance[int])
    return dp.binary_search_chain(lambda s: counts >> dp.m.then_laplace(scale=s), d_in=_D_IN, d_out=eps)


def _bounds_from_noisy_histogram(noisy: np.ndarray, edges: np.ndarray, q_lo: float, q_hi: float,
                                 eps: float) -> tuple[float, float]:
    """Post-processing of the noisy bin counts: counts below ``T = (2/eps) log(20 bins)`` are
    zeroed (an empty bin passes with probability <= 5% over all bins), then the ``q_lo`` and
    ``q_hi`` quantiles of the remaining mass give the bounds (outer edges of their bins)."""
    k = noisy.size
    T = (2.0 / eps) * math.log(20.0 * k)
    c = np.where(noisy >= T, noisy, 0.0).astype(float)
    if c.sum() <= 0:
        j = int(np.argmax(noisy))  # nothing significant: the single most populated bin
        return float(edges[j]), float(edges[j + 1])
    cdf = np.cumsum(c) / c.sum()
    j_lo = int(np.searchsorted(cdf, q_lo, side="left"))
    j_hi = int(np.searchsorted(cdf, q_hi, side="left"))
    return float(edges[j_lo]), float(edges[min(j_hi, k - 1) + 1])


def _histogram_measure(dp, eps: float, delta: float):
    space = dp.vector_domain(dp.atom_domain(T=str)), dp.symmetric_distance()
    counts = space >> dp.t.then_count_by(TV=int)
    def mapped(scale, thr):
        return _as_eps_delta((counts >> dp.m.then_laplace_threshold(scale=scale, threshold=thr)).map(_D_IN))

    # eps is proportional to 1/scale (the threshold only moves delta): solve, then nudge up
    scale = mapped(1.0, 2**30)[0] / eps
    while mapped(scale, 2**30)[0] > eps:
        scale *= 1 + 1e-9
    lo, hi = 1, 2**30  # smallest integer threshold whose delta is <= delta (delta decreases in it)
    if mapped(scale, hi)[1] > delta:
        raise ValueError(f"delta = {delta:g} is too small for a thresholded histogram at eps = {eps:g}")
    while lo < hi:
        mid = (lo + hi) // 2
        if mapped(scale, mid)[1] <= delta:
            hi = mid
        else:
            lo = mid + 1
    thr = lo
    return counts >> dp.m.then_laplace_threshold(scale=scale, threshold=thr)


def _as_eps_delta(v) -> tuple[float, float]:
    return (float(v[0]), float(v[1])) if isinstance(v, tuple) else (float(v), 0.0)


def draft_private(data: Any, target: str | None = None, *, eps: float, delta: float,
                  ledger=None, dataset_id: str | None = None, kinds: Mapping[str, str] | None = None,
                  quantiles: tuple[float, float] = (0.02, 0.98), candidates: Any = None,
                  na_values: Sequence[str] = DEFAULT_NA_VALUES, max_levels: int = 50,
                  **read_kwargs) -> DraftResult:
    """A schema drafted with differential privacy (OpenDP); see the module docstring.

    ``kinds``: optional ``{column: "numeric" | "categorical"}`` declared by the user (skips the
    private kind test for those columns). ``ledger`` (a path or a Ledger) + ``dataset_id``:
    ``(eps, delta)`` is charged before any statistic is computed (refused if over budget).
    """
    eps = check_epsilon(eps)
    delta = check_delta(delta)
    q_lo, q_hi = (float(q) for q in quantiles)
    if not 0 < q_lo < q_hi < 1:
        raise ValueError(f"quantiles must satisfy 0 < lower < upper < 1, got {quantiles!r}")
    cand = default_candidates() if candidates is None else np.unique(np.asarray(candidates, dtype=float))
    if cand.size < 2 or not np.all(np.isfinite(cand)):
        raise ValueError("candidates must hold at least 2 finite numbers")
    kinds = dict(kinds or {})
    bad = {k: v for k, v in kinds.items() if v not in ("numeric", "categorical")}
    if bad:
        raise ValueError(f"kinds must map columns to 'numeric' or 'categorical', got {bad}")
    if ledger is not None and not (isinstance(dataset_id, str) and dataset_id):
        raise ValueError("dataset_id must be a non-empty string when a ledger is given")
    df = read_table(data, **read_kwargs)  # reading the header and the cells: no statistic yet
    _check_target(df, target)
    unknown = sorted(set(kinds) - set(df.columns))
    if unknown:
        raise ValueError(f"kinds: column(s) {unknown} are not in the data (columns: {list(df.columns)})")
    na = tuple(str(v) for v in na_values)
    dp = _dp()
    names = list(df.columns)
    k = len(names)
    eps_col, delta_col = eps / k, delta / k
    # build every measurement first (data independent) and check the total before charging
    plan, total_eps, total_delta = {}, 0.0, 0.0
    for name in names:
        declared = kinds.get(name)
        e_kind = 0.0 if declared else 0.1 * eps_col
        e_rest = eps_col - e_kind
        m_kind = _kind_measure(dp, e_kind) if e_kind else None
        m_num = _binned_measure(dp, cand.size - 1, e_rest)
        m_cat = _histogram_measure(dp, e_rest, delta_col)
        ek = _as_eps_delta(m_kind.map(_D_IN))[0] if m_kind else 0.0
        en = _as_eps_delta(m_num.map(_D_IN))[0]
        ec, dc = _as_eps_delta(m_cat.map(_D_IN))
        total_eps += ek + max(en, ec)
        total_delta += dc
        plan[name] = (declared, m_kind, m_num, m_cat)
    if total_eps > eps * (1 + 1e-9) or total_delta > delta * (1 + 1e-9):
        raise RuntimeError(f"internal: the draft's composed privacy ({total_eps}, {total_delta}) exceeds "
                           f"the target ({eps}, {delta})")  # pragma: no cover
    event = ApproxDpEvent(epsilon=eps, delta=delta, label="schema_draft",
                          assumptions=("replace-one adjacency on rows (OpenDP symmetric distance 2)",
                                       "row count and column names public",
                                       "basic composition of OpenDP measurements over columns"),
                          metadata={"columns": k, "eps_per_column": eps_col, "delta_per_column": delta_col})
    with charged(ledger, dataset_id, event, "dp-infer schema draft --private") as receipt:
        cols, tgt, skipped = [], None, []
        for name in names:
            declared, m_kind, m_num, m_cat = plan[name]
            s = df[name]
            v, isnum = _numbers(s, na)
            present = ~missing_mask(s, na)
            if declared:
                kind = declared
            else:
                tags = np.where(isnum, "number", "text")[present].tolist()
                noisy = m_kind(tags)
                kind = "numeric" if noisy[0] > noisy[1] else "categorical"
            how = "declared" if declared else "DP count of numeric cells"
            if kind == "numeric":
                x = np.clip(v[isnum], cand[0], cand[-1])  # row-wise: the bin of each number
                bins = np.clip(np.searchsorted(cand, x, side="right") - 1, 0, cand.size - 2)
                noisy = np.asarray(m_num([str(b) for b in bins]), dtype=float)
                lo, hi = _bounds_from_noisy_histogram(noisy, cand, q_lo, q_hi, e_rest)
                note = f"kind: {how}; bounds: {q_lo:g}/{q_hi:g} quantiles of a DP histogram on fixed bins (OpenDP)"
                if name == target:
                    tgt = Target(name, "numeric", bounds=(lo, hi), note=note)
                else:
                    cols.append(Column(name, "numeric", bounds=(lo, hi), note=note))
            else:
                lv = as_level_strings(s[present]).tolist()
                hist = m_cat(lv)
                levels = [str(a) for a, _ in sorted(hist.items(), key=lambda kv: -kv[1])][:max_levels]
                note = f"kind: {how}; levels: DP thresholded histogram (OpenDP), noisy-most frequent first"
                if name == target:
                    tgt = _target_from_levels(name, levels, note)
                    continue
                levels = [x for x in levels if x != "other"]
                if not levels:
                    skipped.append(name)  # nothing released: cannot be declared from the data privately
                    continue
                cols.append(Column(name, "categorical", levels=tuple(levels), unknown="other", note=note))
        if not cols:
            raise ValueError("data: no feature column could be drafted privately (nothing released); "
                             "declare the schema by hand or raise eps")
        src = str(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") else type(data).__name__
        charged_note = f"; charged to ledger {receipt.ledger_path} as dataset {dataset_id!r}" if receipt else ""
        header = PRIVATE_HEADER.format(source=src, eps=eps, delta=delta, charged=charged_note)
        if skipped:
            header += (f"\nIGNORED (no level passed the DP threshold; declare them by hand): {', '.join(skipped)}")
        schema = Schema(columns=tuple(cols), target=tgt, na_values=na, read=_dialect(data, read_kwargs),
                        ignore=tuple(skipped))
    return DraftResult(schema, header, {"eps": eps, "delta": delta, "eps_composed": total_eps,
                                        "delta_composed": total_delta}, receipt)
