"""Command line for your own data: ``dp-infer schema draft|check``, plus the
helper ``dp-infer sample --schema`` uses to read a table through a schema.

Everything printed under "NON-PRIVATE" is computed from the rows and is shown locally only; it is
never written into a run file or the ledger. The run file stores the schema (public) so that
``dp-infer predict`` encodes new rows the same way (:func:`encode_with_stored_schema`).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

import click
import numpy as np

__all__ = ["schema_group", "SchemaSampleData", "schema_sample_data", "SCHEMA_ATTR", "encode_with_stored_schema"]

SCHEMA_ATTR = "dp_infer_schema"
FEATURES_ATTR = "dp_infer_feature_names"

_read_options = [
    click.option("--delimiter", default=None,
                 help="field delimiter of a CSV (default: the schema's read.delimiter, else sniffed among "
                      "',' ';' TAB '|'; an ambiguous file asks for it)"),
    click.option("--no-header", is_flag=True, default=False,
                 help="the CSV has no header row (give --names)"),
    click.option("--names", default=None, help="comma-separated column names for --no-header"),
]


def with_read_options(f):
    for opt in reversed(_read_options):
        f = opt(f)
    return f


def _read_kwargs(delimiter: str, no_header: bool, names: str | None) -> dict:
    kw: dict = {} if delimiter is None else {"delimiter": delimiter}
    if no_header:
        if not names:
            raise ValueError("names: --no-header needs --names a,b,c (columns are matched by name)")
        kw.update(header=False, names=[n.strip() for n in names.split(",")])
    elif names:
        raise ValueError("names: --names is only for --no-header (the header names the columns)")
    return kw


# ---------------------------------------------------------------------------------------------
# dp-infer sample --schema
# ---------------------------------------------------------------------------------------------

@dataclass
class SchemaSampleData:
    """What ``dp-infer sample --schema`` needs: encoded train/test rows and the public facts."""

    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray | None
    y_test: np.ndarray | None
    feature_names: list[str]
    row_norm: float
    target_kind: str
    label_bound: float
    attrs: dict  # public: stored in the run file
    rows: object = None  # the schema's admissible rows (public; the posterior mode's sensitivity)

    def make_loss(self, loss_name: str, huber_threshold: float, radius: float | None):
        """The loss for the schema's target: logistic (binary), Huber (numeric) or Poisson (count)."""
        from .. import losses

        if self.target_kind == "binary":
            if loss_name != "logistic":
                raise ValueError(f"loss: a binary target needs --loss logistic, got {loss_name!r}")
            return losses.logistic(row_norm=self.row_norm)
        if self.target_kind == "count":
            from ..domains import L2Ball
            from ..losses.count import poisson

            if radius is None:
                raise ValueError("radius: a count target (Poisson loss) needs a bounded domain: give --radius")
            return poisson(self.label_bound, L2Ball(self.X.shape[1], radius), row_norm=self.row_norm)
        return losses.huber(threshold=huber_threshold, row_norm=self.row_norm)


def schema_sample_data(csv_file, schema_file, *, target: str | None = None, test_csv=None,
                       split: float | None = None, split_seed: int | None = None,
                       nonprivate: bool = False, echo=click.echo, **read_kwargs) -> SchemaSampleData:
    """Read ``csv_file`` (and the public ``test_csv``) through the schema, or split off a test share.

    ``target`` (optional) must equal the schema's target. The split is a uniformly random
    permutation of the rows (``split_seed``: None = OS entropy). Held-out rows of the private file
    are private: their accuracy, like the local data report, is NON-PRIVATE and is returned
    (``X_test``) and printed only when ``nonprivate`` is set.
    """
    from ..schema import FeatureMap, load_schema

    schema = load_schema(schema_file)
    if schema.target is None:
        raise ValueError(f"schema: {schema_file} declares no target; add a 'target' entry")
    schema.require_public_n(f"schema {schema_file}")  # on the schema alone: the plan's n is public
    if target is not None and target != schema.target.name:
        raise ValueError(f"target: --target {target!r} differs from the schema's target {schema.target.name!r}")
    if split is not None and not (0.0 < float(split) < 1.0):
        raise ValueError(f"split must lie in (0, 1), got {split!r}")
    if split is not None and test_csv is not None:
        raise ValueError("split: give either --split or --test-csv, not both")
    if split_seed is not None and (isinstance(split_seed, bool) or split_seed < 0):
        raise ValueError(f"split_seed must be an integer >= 0, got {split_seed!r}")
    fmap = FeatureMap(schema)
    enc = fmap.transform(csv_file, nonprivate_warnings=nonprivate, **read_kwargs)
    echo(f"{csv_file}: {enc.X.shape[0]} rows encoded by schema {schema_file}: {fmap.dim} features, "
         f"row-norm bound {fmap.row_norm:g}")
    if nonprivate:
        echo(enc.report.format())
    X, y, Xt, yt = enc.X, enc.y, None, None
    if test_csv is not None:  # public evaluation data
        et = fmap.transform(test_csv, **read_kwargs)
        echo(et.report.format().replace("NON-PRIVATE local data report", "data report of the public test file"))
        Xt, yt = et.X, et.y
    elif split is not None:
        rng = np.random.default_rng(secrets.randbits(64) if split_seed is None else split_seed)
        perm = rng.permutation(X.shape[0])
        n_test = int(round(float(split) * X.shape[0]))
        if not 0 < n_test < X.shape[0]:
            raise ValueError(f"split: {split} of {X.shape[0]} rows leaves an empty train or test set")
        te, tr = perm[:n_test], perm[n_test:]
        X, y = enc.X[tr], enc.y[tr]
        echo(f"split: {len(tr)} train rows, {len(te)} held-out rows (split seed "
             f"{'from OS entropy' if split_seed is None else 'given'}); the held-out rows are private")
        if nonprivate:
            from .common import NONPRIVATE_BANNER

            Xt, yt = enc.X[te], enc.y[te]
            echo(f"{NONPRIVATE_BANNER}: the test accuracy below is computed on the held-out private rows")
        else:
            echo("their test accuracy is computed on private rows: shown with --nonprivate-diagnostics")
    attrs = {SCHEMA_ATTR: json.dumps(schema.to_dict()), FEATURES_ATTR: json.dumps(fmap.feature_names)}
    return SchemaSampleData(X, y, Xt, yt, fmap.feature_names, fmap.row_norm, schema.target.kind,
                            schema.target.label_bound, attrs, fmap.admissible_rows())


# ---------------------------------------------------------------------------------------------
# dp-infer schema draft | check
# ---------------------------------------------------------------------------------------------

@click.group("schema")
def schema_group() -> None:
    """Write (draft) or check a public schema for your own data."""


@schema_group.command("draft")
@click.argument("data_file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False), required=True,
              help="schema file to write (.yaml or .json)")
@click.option("--target", default=None, help="name of the label column")
@click.option("--private", is_flag=True, default=False,
              help="draft with differential privacy (OpenDP): bounds from DP quantiles, levels from DP histograms")
@click.option("--eps", type=float, default=None, help="privacy epsilon of a --private draft")
@click.option("--delta", type=float, default=1e-6, show_default=True, help="privacy delta of a --private draft")
@click.option("--kind", "kinds", multiple=True, help="declare a column's kind: NAME=numeric|categorical (repeatable)")
@click.option("--ledger", type=click.Path(dir_okay=False), default=None,
              help="SQLite privacy ledger: a --private draft is charged before any statistic is computed")
@click.option("--dataset-id", default="default", show_default=True, help="dataset name in the ledger")
@click.option("--budget", type=(float, float), default=None, help="register the dataset's (eps, delta) budget")
@click.option("--other-level", is_flag=True, default=False,
              help="give every categorical column the extra level 'other' (unknown: other) for values not "
                   "seen; by default only a column truncated to its 50 most frequent levels gets it (a "
                   "--private draft always does: levels below its threshold may exist)")
@click.option("--linear", is_flag=True, default=False,
              help="non-private draft: keep every numeric column linear over its observed range (default: "
                   "a clearly skewed column is proposed on a log scale with quantile bounds, the reason in a comment)")
@with_read_options
def draft(data_file, out, target, private, eps, delta, kinds, ledger, dataset_id, budget, other_level, linear,
          delimiter, no_header, names):
    """Draft a schema from DATA_FILE for review (non-private unless --private).

    A --private draft states what it can resolve at this n and eps before the charge; entries the
    noise made meaningless are written commented out (with the reason), listed under ignore, and
    the command exits with status 4 after writing the file."""
    from ..schema import save_schema
    from ..schema.draft import draft_nonprivate, draft_private

    from .common import preflight

    preflight(out=out, out_param="-o/--out", out_suffixes=(".yaml", ".yml", ".json"), dataset_id=dataset_id,
              ledger=ledger, budget=budget)
    kw = _read_kwargs(delimiter, no_header, names)
    kind_map = {}
    for item in kinds:
        if "=" not in item:
            raise ValueError(f"kind must be NAME=numeric|categorical, got {item!r}")
        k, v = item.split("=", 1)
        kind_map[k.strip()] = v.strip()
    if budget is not None and ledger is None:
        raise ValueError("--budget needs --ledger (the file that keeps the spend)")
    if private:
        if eps is None:
            raise ValueError("eps: a --private draft needs --eps (its privacy budget)")
        if linear:
            raise ValueError("linear: --linear applies to a non-private draft only (a --private draft's "
                             "numeric columns are linear)")
        from .common import open_cli_ledger

        led = open_cli_ledger(ledger, dataset_id, budget)
        res = draft_private(data_file, target, eps=eps, delta=delta, ledger=led,
                            dataset_id=dataset_id if led is not None else None, kinds=kind_map,
                            on_plan=click.echo, **kw)
        if res.receipt is not None:
            click.echo(f"ledger {ledger}: charged (eps = {eps:g}, delta = {delta:g}) before drafting; dataset "
                       f"{dataset_id!r} has spent eps = {res.receipt.eps_spent:.4g} of {res.receipt.eps_budget:g}")
        else:
            from .common import note_unrecorded

            click.echo(f"private draft at (eps = {eps:g}, delta = {delta:g})")
            note_unrecorded(eps, delta, "this private draft")
    else:
        if eps is not None or kind_map or ledger is not None:
            raise ValueError("eps: --eps, --kind and --ledger apply to a --private draft only (a non-private "
                             "draft has no finite privacy cost to charge)")
        res = draft_nonprivate(data_file, target, other_level=other_level, log_skewed=not linear, **kw)
        click.echo(f"NON-PRIVATE DRAFT: bounds and levels were read from {data_file}. Review them; do not "
                   "use this schema for a private fit of the same private data.")
    try:
        path = save_schema(res, out)
    except (Exception, KeyboardInterrupt) as e:
        if not private:
            raise
        _keep_private_draft(res, out, ledger, e)
    read = (res.schema.read or {}).get("delimiter")
    click.echo(f"wrote {path}: {len(res.schema.columns)} feature column(s), target "
               f"{res.schema.target.name + ' (' + res.schema.target.kind + ')' if res.schema.target else 'none'}"
               + (f"; delimiter {read!r} recorded under read:" if read else ""))
    for name, lines in res.comments.items():
        click.echo(f"  {name}: {lines[0] if isinstance(lines, (list, tuple)) else lines}")
    if res.advice is not None:
        click.echo(res.advice.text())
    if res.unresolved:
        raise UnresolvedDraft(
            f"private draft: {len(res.unresolved)} entr{'y' if len(res.unresolved) == 1 else 'ies'} unresolved at "
            f"this n and eps ({'; '.join(f'{c}: {w}' for c, w in res.unresolved.items())}); {path} was written "
            "with them commented out and listed under ignore: declare them by hand, or raise --eps")


class UnresolvedDraft(click.ClickException):
    """A private draft was written, but some entries were unresolved (exit status 4)."""

    exit_code = 4


def _keep_private_draft(res, out, ledger, error):
    """A --private draft is charged: if writing -o/--out fails, the draft is written to a fallback
    file (:func:`dp_infer.infer.fallback.new_fallback_file`: next to -o, else the ledger's directory,
    else the temp dir, never overwriting) and the error names it."""
    from pathlib import Path

    from ..infer.fallback import DrawsKeptError, new_fallback_file
    suffix = ".json" if Path(out).suffix.lower() == ".json" else ".yaml"
    text = (json.dumps(res.schema.to_dict(), indent=2) + "\n") if suffix == ".json" else res.yaml()
    try:
        kept = new_fallback_file(lambda f: f.write(text.encode()), out=out, ledger=ledger, label="draft", suffix=suffix)
    except Exception as e2:  # noqa: BLE001 - the original error matters more
        error.add_note(f"dp_infer: the draft was charged and could not be kept either ({e2})")
        raise error
    raise DrawsKeptError(f"writing -o/--out failed after the private draft was made; it was kept in {kept}",
                         path=kept, step="writing -o/--out", what="the private draft (its privacy is spent) was",
                         reader="a schema file: review it, then pass it as --schema") from error


@schema_group.command("check")
@click.argument("data_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--schema", "schema_file", type=click.Path(exists=True, dir_okay=False), required=True)
@with_read_options
def check(data_file, schema_file, delimiter, no_header, names):
    """Encode DATA_FILE with a schema and print the feature map and the NON-PRIVATE data report."""
    from ..schema import FeatureMap, load_schema

    fmap = FeatureMap(load_schema(schema_file))
    enc = fmap.transform(data_file, target="optional", **_read_kwargs(delimiter, no_header, names))
    adm = fmap.admissible_rows()
    click.echo(f"schema {schema_file}: {fmap.dim} features ({', '.join(fmap.feature_names[:8])}"
               f"{', ...' if fmap.dim > 8 else ''}); row-norm bound {adm.max_norm():g} "
               f"({'exact' if adm.exact else 'an upper bound: some features share a data column'})")
    click.echo(enc.report.format())
    if fmap.schema.target is not None:
        from ..schema.advice import suggest_prior_precision

        click.echo(suggest_prior_precision(fmap.schema).text())


def encode_with_stored_schema(run_file, data_file, delimiter=None, no_header=False, names=None):
    """The rows of DATA_FILE encoded by the schema stored in RUN_FILE (``sample --schema`` runs):
    ``(X, feature_names, y_or_None, target_kind, target)``, or None when the run stores no schema
    (``target``: the schema's :class:`~dp_infer.schema.target.Target` or None)."""
    from ..diagnostics import load
    from ..schema import FeatureMap, Schema

    raw = load(run_file).attrs.get(SCHEMA_ATTR)
    if raw is None:
        return None
    schema = Schema.from_dict(json.loads(raw) if isinstance(raw, str) else raw)
    fmap = FeatureMap(schema)
    enc = fmap.transform(data_file, target="optional", **_read_kwargs(delimiter, no_header, names))
    return enc.X, list(fmap.feature_names), enc.y, (schema.target.kind if schema.target else "numeric"), schema.target
