"""Draft a schema from a data file, for a human to review: non-private, or private with OpenDP.

Non-private draft (:func:`draft_nonprivate`)
    Reads the data: bounds are the observed min / max, levels the observed values (most frequent
    first, the most frequent is the reference). Fine for data you may inspect (public data, or
    your own data before it is shared); using it to fit a private model on the *same* private
    data would leak through the bounds and levels. The file header says so.

    * a categorical column gets the extra level ``other`` (``unknown: other``) only when its level
      set was truncated to ``max_levels`` (some values are mapped to ``other``) or when asked
      (``other_level=True``): otherwise ``other`` is a coefficient no training row can move;
    * a clearly right-skewed numeric column (sample skewness > 2 and an upper tail more than 3x
      the lower one, see :func:`skew_proposal`) is proposed on a log scale with robust bounds:
      ``log`` (values > 0) or ``log1p`` (counts, or values >= 0 with zeros) between the 0.5% and
      99.5% quantiles (lower bound: the smallest value for ``log1p``), or, with negative values,
      linear between those quantiles.
      The reason is written as a YAML comment above the column (:attr:`DraftResult.comments`).

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
      frequent first; always ``unknown: other``: levels below the threshold may exist and the
      release cannot tell (an undeclared level would otherwise stop the private fit);
    * binary target: the two most frequent released labels (the less frequent one is declared
      positive: review it).

    What it can resolve is stated BEFORE the charge (:func:`private_draft_plan`: the noise of the
    kind test, the rows a histogram bin and a level need to pass the threshold, at this n and eps).
    After the release, an entry the noise made meaningless is NOT written as if it were data:
    no bin passed the threshold, the bins that passed hold less than half of the n rows, a bound
    rests on an isolated bin whose count is within the noise of the threshold, the kind test's
    margin is within twice its noise sd, or no level was released. Such columns are
    listed in :attr:`DraftResult.unresolved` with the reason, written commented out (with the
    reason) and listed under ``ignore`` so the file still loads; ``dp-infer schema draft``
    then exits with status 4 after writing the file.

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
from .readers import delimiter_hint, read_table
from .spec import DEFAULT_NA_VALUES, OTHER_LEVEL, Column, Schema, Target

__all__ = ["draft_nonprivate", "draft_private", "default_candidates", "NONPRIVATE_HEADER", "DraftResult",
           "skew_proposal", "private_draft_plan"]

NONPRIVATE_HEADER = (
    "NON-PRIVATE DRAFT: bounds and levels below were READ FROM THE DATA ({source}).\n"
    "Review every entry. Use it only for data you are allowed to inspect: fitting a private model\n"
    "on the same private data with this schema leaks through the bounds and levels.")
PRIVATE_HEADER = (
    "PRIVATE DRAFT (OpenDP): bounds are DP quantiles and levels DP histograms of {source},\n"
    "released at (eps = {eps:g}, delta = {delta:g}) under replace-one adjacency{charged}.\n"
    "Review every entry (kinds, reference levels, the positive label, bounds) before use.")


class DraftResult:
    """A drafted :class:`Schema` plus its file header and, for a private draft, the privacy spent.

    ``comments``: ``{column name: [lines]}`` written as YAML comments above the column's entry.
    ``unresolved``: ``{column name: reason}`` (private draft) for entries the noise made
    meaningless; ``commented_out``: their would-be entries, written commented out.
    ``plan``: the pre-charge statement of what a private draft can resolve.
    ``advice``: the suggested ``--prior-precision`` (:class:`~dp_infer.schema.advice.PriorAdvice`).
    """

    def __init__(self, schema: Schema, header: str, spent: dict | None = None, receipt=None, *,
                 comments: dict | None = None, unresolved: dict | None = None,
                 commented_out: list | None = None, plan: str = ""):
        self.schema, self.header, self.spent, self.receipt = schema, header, spent, receipt
        self.comments = dict(comments or {})
        self.unresolved = dict(unresolved or {})
        self.commented_out = list(commented_out or [])
        self.plan = plan
        from .advice import suggest_prior_precision

        self.advice = suggest_prior_precision(schema) if schema.target is not None else None

    def yaml(self) -> str:
        """The schema file's text: header, the prior-precision advice, per-column comments, the
        unresolved entries commented out."""
        from .io import schema_to_yaml

        head = self.header + (f"\n{self.advice.text()}" if self.advice is not None else "")
        return schema_to_yaml(self.schema, head, comments=self.comments, commented_out=self.commented_out)


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


def _dialect(data: Any, read_kwargs: dict, df: pd.DataFrame | None = None) -> dict | None:
    """The CSV options used to read a file (the sniffed delimiter included), kept in the draft so
    every later reader of the file (check, sample, predict) reads it the same way."""
    if not (isinstance(data, (str, bytes)) or hasattr(data, "__fspath__")):
        return None
    d = {k: (list(v) if k == "names" else v) for k, v in read_kwargs.items() if v is not None}
    if "delimiter" not in d and df is not None and df.attrs.get("delimiter"):
        d["delimiter"] = df.attrs["delimiter"]
    if d.get("delimiter") == ",":
        d.pop("delimiter")
    if d.get("header") is True:
        d.pop("header")
    return d or None


def _check_target(df: pd.DataFrame, target: str | None) -> None:
    if target is not None and target not in df.columns:
        raise ValueError(f"target: column {target!r} is not in the data (columns: {list(df.columns)})"
                         + delimiter_hint(df.columns))


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

def _sig_ceil(x: float, digits: int = 3) -> float:
    """``x`` rounded UP to ``digits`` significant digits (a bound that still covers ``x``)."""
    if x == 0 or not math.isfinite(x):
        return float(x)
    e = math.floor(math.log10(abs(x))) - digits + 1
    return float(f"{math.ceil(x / 10.0 ** e)}e{e}")


def _sig_floor(x: float, digits: int = 3) -> float:
    return -_sig_ceil(-x, digits)


def skew_proposal(vals: np.ndarray, *, q: tuple[float, float] = (0.005, 0.995)) -> dict | None:
    """A log-scale proposal for a clearly right-skewed numeric column, or None.

    Skewed means: sample skewness > 2 (an exponential has 2, a normal 0) and an upper tail
    ``q99 - median`` more than 3x the lower one ``median - q1``. The proposal: ``log`` when every
    value is > 0, ``log1p`` for counts and values >= 0 with zeros (lower bound: the smallest
    value), else linear; bounds at the ``q`` quantiles (rounded outwards to 3 significant digits). Returns ``{transform, bounds,
    reason}``. NON-PRIVATE: reads the values.
    """
    v = np.asarray(vals, dtype=float)
    if v.size < 20 or np.unique(v).size < 10:
        return None
    sd = v.std()
    if sd <= 0:
        return None
    skew = float(np.mean(((v - v.mean()) / sd) ** 3))
    q1, med, q99 = np.quantile(v, [0.01, 0.5, 0.99])
    if not (skew > 2 and (q99 - med) > 3 * (med - q1)):
        return None
    lo_q, hi_q = (float(x) for x in np.quantile(v, q))
    vmin = float(v.min())
    integral = bool(np.all(v == np.floor(v)))
    if vmin >= 0 and (integral or vmin == 0):
        tf, lo = "log1p", vmin  # counts (and amounts with zeros): log1p from the smallest value
    elif vmin > 0:
        tf, lo = "log", _sig_floor(lo_q)
        lo = lo if lo > 0 else lo_q
    else:
        tf, lo = "none", _sig_floor(lo_q)
    hi = _sig_ceil(hi_q)
    if not hi > lo:
        return None
    n_out = int(((v < lo) | (v > hi)).sum())
    how = {"log": "log scale (all values > 0)", "log1p": "log1p scale (integer values >= 0, or values >= 0 with zeros)",
           "none": "linear (negative values: no log transform applies)"}[tf]
    reason = (f"skewed (skewness {skew:.1f}; observed range [{vmin:g}, {float(v.max()):g}], median {med:g}): "
              f"proposed {how}, bounds = the {q[0]:g}/{q[1]:g} quantiles; {n_out} of {v.size} rows are "
              "clipped to them. Review; for the full range, set bounds to the observed min/max")
    return {"transform": tf, "bounds": (lo, hi), "reason": reason}


def draft_nonprivate(data: Any, target: str | None = None, *, na_values: Sequence[str] = DEFAULT_NA_VALUES,
                     max_levels: int = 50, other_level: bool = False, log_skewed: bool = True,
                     **read_kwargs) -> DraftResult:
    """A schema drafted by READING the data (see the module docstring). Not private.

    ``other_level``: give every categorical column the extra level ``other`` (``unknown: other``);
    by default only columns with more than ``max_levels`` levels get it (the rarer ones map to it).
    ``log_skewed``: propose a log scale with quantile bounds for clearly skewed numeric columns
    (:func:`skew_proposal`); False: every numeric column linear over its observed range.
    """
    df = read_table(data, **read_kwargs)
    _check_target(df, target)
    na = tuple(str(v) for v in na_values)
    cols, tgt, comments = [], None, {}
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
            prop = skew_proposal(v[isnum]) if log_skewed else None
            if prop is not None:
                comments[name] = [prop["reason"]]
                cols.append(Column(name, "numeric", bounds=prop["bounds"], transform=prop["transform"],
                                   note="; ".join(x for x in ("skewed: see the comment above", miss_note) if x)))
                continue
            cols.append(Column(name, "numeric", bounds=(lo, hi),
                               note="; ".join(x for x in ("bounds = observed min/max", miss_note) if x)))
        elif len(levels) == 2:
            cols.append(Column(name, "binary", levels=tuple(sorted(levels)), note=miss_note))
        elif len(levels) >= 2:
            truncated = len(levels) > max_levels
            keep = levels[:max_levels]
            # 'other' only where a row can reach it (a truncated level set) or where asked
            if truncated or (other_level and OTHER_LEVEL not in keep):
                unk = OTHER_LEVEL
            else:
                unk = "error"
            keep = [lv for lv in keep if not (unk == OTHER_LEVEL and lv == OTHER_LEVEL)]
            note = f"{len(levels)} levels seen, most frequent first" + (
                f"; only the {max_levels} most frequent kept, the others map to 'other'" if truncated else "")
            if len(keep) + (unk == OTHER_LEVEL) < 2:
                continue
            cols.append(Column(name, "categorical", levels=tuple(keep), unknown=unk,
                               note="; ".join(x for x in (note, miss_note) if x)))
    if not cols:
        raise ValueError("data: no column could be drafted (every column is empty or constant)"
                         + delimiter_hint(df.columns))
    src = str(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") else type(data).__name__
    schema = Schema(columns=tuple(cols), target=tgt, na_values=na, read=_dialect(data, read_kwargs, df))
    return DraftResult(schema, NONPRIVATE_HEADER.format(source=src), comments=comments)


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
    m = counts >> dp.m.then_laplace_threshold(scale=scale, threshold=thr)
    m.dp_infer_threshold, m.dp_infer_scale = thr, scale  # public facts for the pre-charge statement
    return m


def _as_eps_delta(v) -> tuple[float, float]:
    return (float(v[0]), float(v[1])) if isinstance(v, tuple) else (float(v), 0.0)


def _threshold(eps: float, n_bins: int) -> float:
    """Noisy bin counts below this are zeroed (:func:`_bounds_from_noisy_histogram`)."""
    return (2.0 / eps) * math.log(20.0 * n_bins)


def private_draft_plan(n: int, names: Sequence[str], kinds: Mapping[str, str], *, eps: float, delta: float,
                       n_bins: int, level_threshold: float | None = None) -> tuple[str, dict]:
    """What a private draft can resolve at ``n`` rows (public) and ``(eps, delta)``, before any charge.

    Returns ``(text, facts)``: the kind test's noise sd on its margin (numbers minus text cells:
    two Laplace counts of scale 2/eps_kind, sd 4/eps_kind; reliable when n > 3 sd), the rows a
    histogram bin must hold to pass the threshold, and the rows a level needs to be released.
    ``facts['hopeless']``: no column can be resolved (each has an unreliable kind test, or
    thresholds at or above n); :func:`draft_private` then refuses before charging.
    """
    k = len(names)
    eps_col = eps / k
    undeclared = [c for c in names if c not in kinds]
    e_kind = 0.1 * eps_col
    kind_sd = 4.0 / e_kind
    kind_ok = n > 3 * kind_sd
    t_num_u, t_num_d = _threshold(eps_col - e_kind, n_bins), _threshold(eps_col, n_bins)
    t_lvl = level_threshold
    lines = [f"private draft plan (before any charge): n = {n} rows (public), {k} column(s), "
             f"eps = {eps_col:.3g} and delta = {delta / k:.2g} per column"]
    if undeclared:
        verdict = "reliable" if kind_ok else ("UNRELIABLE at this n: declare kinds with --kind NAME=numeric|"
                                              "categorical")
        lines.append(f"  kind test (numbers vs text) of {len(undeclared)} undeclared column(s): noise sd "
                     f"{kind_sd:.3g} rows on its margin -> {verdict}")
    t_num = t_num_u if undeclared else t_num_d
    frac = t_num / n
    num_v = ("bounds resolve only for a column whose rows fill bins of that size (half of the rows must "
             "lie in such bins)" if frac < 0.5 else "expect UNRESOLVED bounds (too few rows per bin)")
    lines.append(f"  numeric bounds: a bin of the fixed grid must hold >= {t_num:.0f} noisy rows "
                 f"({100 * frac:.0f}% of n) to count -> {num_v}")
    if t_lvl is not None:
        lines.append(f"  categorical levels: a level needs about >= {t_lvl:.0f} rows to be released"
                     + (" -> expect NO level released" if t_lvl >= n else ""))
    resolvable = []
    for c in names:
        tn = t_num_d if c in kinds else t_num_u
        if (c in kinds or kind_ok) and min(tn, t_lvl if t_lvl is not None else math.inf) < n:
            resolvable.append(c)
    hopeless = not resolvable
    if hopeless:
        lines.append("  -> NOTHING can be resolved at this n and eps: refused before the charge")
    return "\n".join(lines), {"kind_sd": kind_sd if undeclared else 0.0, "bin_threshold": t_num,
                              "level_threshold": t_lvl, "resolvable": resolvable, "hopeless": hopeless}


def draft_private(data: Any, target: str | None = None, *, eps: float, delta: float,
                  ledger=None, dataset_id: str | None = None, kinds: Mapping[str, str] | None = None,
                  quantiles: tuple[float, float] = (0.02, 0.98), candidates: Any = None,
                  na_values: Sequence[str] = DEFAULT_NA_VALUES, max_levels: int = 50,
                  on_plan=None, **read_kwargs) -> DraftResult:
    """A schema drafted with differential privacy (OpenDP); see the module docstring.

    ``kinds``: optional ``{column: "numeric" | "categorical"}`` declared by the user (skips the
    private kind test for those columns). ``ledger`` (a path or a Ledger) + ``dataset_id``:
    ``(eps, delta)`` is charged before any statistic is computed (refused if over budget).
    ``on_plan``: called with the pre-charge statement of what the draft can resolve
    (:func:`private_draft_plan`) before the charge; it is also in :attr:`DraftResult.plan`.
    Entries the noise made meaningless are in :attr:`DraftResult.unresolved` (not in the schema).
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
    n = int(df.shape[0])  # public (replace-one adjacency)
    eps_col, delta_col = eps / k, delta / k
    # build every measurement first (data independent) and check the total before charging
    plan, total_eps, total_delta = {}, 0.0, 0.0
    lvl_thr = None
    for name in names:
        declared = kinds.get(name)
        e_kind = 0.0 if declared else 0.1 * eps_col
        e_rest = eps_col - e_kind
        m_kind = _kind_measure(dp, e_kind) if e_kind else None
        m_num = _binned_measure(dp, cand.size - 1, e_rest)
        m_cat = _histogram_measure(dp, e_rest, delta_col)
        lvl_thr = max(lvl_thr or 0, m_cat.dp_infer_threshold)
        ek = _as_eps_delta(m_kind.map(_D_IN))[0] if m_kind else 0.0
        en = _as_eps_delta(m_num.map(_D_IN))[0]
        ec, dc = _as_eps_delta(m_cat.map(_D_IN))
        total_eps += ek + max(en, ec)
        total_delta += dc
        plan[name] = (declared, m_kind, m_num, m_cat, e_kind, e_rest)
    if total_eps > eps * (1 + 1e-9) or total_delta > delta * (1 + 1e-9):
        raise RuntimeError(f"internal: the draft's composed privacy ({total_eps}, {total_delta}) exceeds "
                           f"the target ({eps}, {delta})")  # pragma: no cover
    plan_text, _facts = private_draft_plan(n, names, kinds, eps=eps, delta=delta, n_bins=cand.size - 1,
                                           level_threshold=lvl_thr)
    if on_plan is not None:
        on_plan(plan_text)
    if _facts["hopeless"]:
        hint = (" declare the kinds with --kind NAME=numeric|categorical (kinds=...)," if len(kinds) < k else "")
        raise ValueError(f"eps: a private draft at n = {n} rows and eps = {eps:g} over {k} column(s) can resolve "
                         f"nothing (see the plan above); nothing was charged:{hint} raise eps, draft fewer "
                         "columns, or declare the schema by hand")
    event = ApproxDpEvent(epsilon=eps, delta=delta, label="schema_draft",
                          assumptions=("replace-one adjacency on rows (OpenDP symmetric distance 2)",
                                       "row count and column names public",
                                       "basic composition of OpenDP measurements over columns"),
                          metadata={"columns": k, "eps_per_column": eps_col, "delta_per_column": delta_col})
    with charged(ledger, dataset_id, event, "dp-infer schema draft --private") as receipt:
        cols, tgt, skipped = [], None, []
        unresolved, commented = {}, []
        for name in names:
            declared, m_kind, m_num, m_cat, e_kind, e_rest = plan[name]
            s = df[name]
            v, isnum = _numbers(s, na)
            present = ~missing_mask(s, na)
            kind_doubt = ""
            if declared:
                kind = declared
            else:
                tags = np.where(isnum, "number", "text")[present].tolist()
                noisy = m_kind(tags)
                kind = "numeric" if noisy[0] > noisy[1] else "categorical"
                margin, sd = abs(float(noisy[0]) - float(noisy[1])), 4.0 / e_kind
                if margin < 2 * sd:
                    kind_doubt = (f"kind {kind!r} decided within the noise (margin {margin:.0f} rows, noise sd "
                                  f"{sd:.0f}): declare it with --kind {name}=numeric|categorical")
            how = "declared" if declared else "DP count of numeric cells"
            if kind == "numeric":
                x = np.clip(v[isnum], cand[0], cand[-1])  # row-wise: the bin of each number
                bins = np.clip(np.searchsorted(cand, x, side="right") - 1, 0, cand.size - 2)
                noisy = np.asarray(m_num([str(b) for b in bins]), dtype=float)
                lo, hi = _bounds_from_noisy_histogram(noisy, cand, q_lo, q_hi, e_rest)
                why = _bounds_meaningless(noisy, e_rest, n, q_lo, q_hi)
                note = f"kind: {how}; bounds: {q_lo:g}/{q_hi:g} quantiles of a DP histogram on fixed bins (OpenDP)"
                entry = (Target(name, "numeric", bounds=(lo, hi), note=note) if name == target
                         else Column(name, "numeric", bounds=(lo, hi), note=note))
                why = "; ".join(x for x in (kind_doubt, why) if x)
                if why:
                    unresolved[name] = why
                    commented.append((entry.to_dict(), why + (" (the TARGET: declare it under target:)"
                                                              if name == target else ""), name == target))
                elif name == target:
                    tgt = entry
                else:
                    cols.append(entry)
            else:
                lv = as_level_strings(s[present]).tolist()
                hist = m_cat(lv)
                levels = [str(a) for a, _ in sorted(hist.items(), key=lambda kv: -kv[1])][:max_levels]
                note = (f"kind: {how}; levels: DP thresholded histogram (OpenDP), noisy-most frequent first; "
                        "unknown: other (levels below the threshold may exist)")
                if name == target:
                    try:
                        entry = _target_from_levels(name, levels, note)
                    except ValueError:
                        unresolved[name] = "; ".join(x for x in (kind_doubt, f"fewer than 2 labels released "
                                                                             f"(a label needs about {m_cat.dp_infer_threshold} rows)") if x)
                        continue
                    if kind_doubt:
                        unresolved[name] = kind_doubt
                        commented.append((entry.to_dict(), kind_doubt + " (the TARGET: declare it under target:)", True))
                    else:
                        tgt = entry
                    continue
                levels = [x for x in levels if x != OTHER_LEVEL]
                if not levels:
                    skipped.append(name)  # nothing released: cannot be declared from the data privately
                    unresolved[name] = "; ".join(x for x in (
                        f"no level passed the DP threshold (a level needs about {m_cat.dp_infer_threshold} rows "
                        f"at this eps; n = {n})", kind_doubt or (
                            "" if declared else f"if it is numeric, declare --kind {name}=numeric")) if x)
                    continue
                entry = Column(name, "categorical", levels=tuple(levels), unknown=OTHER_LEVEL, note=note)
                if kind_doubt:
                    unresolved[name] = kind_doubt
                    commented.append((entry.to_dict(), kind_doubt, False))
                else:
                    cols.append(entry)
        ignore = tuple(c for c in names if c in unresolved)  # the file still loads; the data's columns are known
        if not cols:
            detail = "; ".join(f"{c}: {w}" for c, w in unresolved.items())
            raise ValueError("data: no feature column could be drafted privately at "
                             f"n = {n}, eps = {eps:g}, and the privacy is spent ({detail}); declare the schema "
                             "by hand or raise eps")
        src = str(data) if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__") else type(data).__name__
        charged_note = f"; charged to ledger {receipt.ledger_path} as dataset {dataset_id!r}" if receipt else ""
        header = PRIVATE_HEADER.format(source=src, eps=eps, delta=delta, charged=charged_note)
        if skipped:
            header += (f"\nIGNORED (no level passed the DP threshold; declare them by hand): {', '.join(skipped)}")
        if unresolved:
            header += (f"\nUNRESOLVED at n = {n}, eps = {eps:g} (the noise made them meaningless; commented out "
                       f"below, listed under ignore; declare them by hand): {', '.join(unresolved)}")
        schema = Schema(columns=tuple(cols), target=tgt, na_values=na, read=_dialect(data, read_kwargs, df),
                        ignore=ignore)
    return DraftResult(schema, header, {"eps": eps, "delta": delta, "eps_composed": total_eps,
                                        "delta_composed": total_delta}, receipt,
                       unresolved=unresolved, commented_out=[(d, w) for d, w, _t in commented], plan=plan_text)


def _bounds_meaningless(noisy: np.ndarray, eps: float, n: int, q_lo: float = 0.02, q_hi: float = 0.98) -> str:
    """Why bounds from this noisy histogram say nothing about the data ('' when they do).
    Post-processing of the release and the public n:

    * no bin passed the threshold ``T`` (the bounds would be one bin picked by noise);
    * the bins that passed hold less than half of the n rows (noise, or a minority of the rows);
    * a bound rests on an isolated bin (both neighbours zeroed) whose count is within 3 Laplace
      scales of ``T``: an empty bin passes ``T`` with probability <= 5% over the grid, and such a
      bin can stretch the interval by orders of magnitude (the noise larger than the range).
    """
    T = _threshold(eps, noisy.size)
    b = 2.0 / eps  # Laplace scale of a count (L1 sensitivity 2 under replace-one)
    c = np.where(noisy >= T, noisy, 0.0)
    if not c.any():
        return (f"no bin of the DP histogram passed the noise threshold ({T:.0f} rows per bin at this eps; "
                f"n = {n}): the bounds would be pure noise")
    if c.sum() < 0.5 * n:
        return (f"the bins that passed the noise threshold hold {c.sum():.0f} of the n = {n} rows: "
                "the bounds would describe noise or a minority of the rows")
    cdf = np.cumsum(c) / c.sum()
    k = c.size
    for side, q in (("lower", q_lo), ("upper", q_hi)):
        j = min(int(np.searchsorted(cdf, q, side="left")), k - 1)
        isolated = (j == 0 or c[j - 1] == 0) and (j == k - 1 or c[j + 1] == 0) and (c > 0).sum() > 1
        if isolated and c[j] < T + 3 * b:
            return (f"the {side} bound rests on one isolated bin of {c[j]:.0f} noisy rows, within the noise of "
                    f"the threshold ({T:.0f} + 3 x {b:.1f}): it may be a noise bin far from the data")
    return ""
