"""``dp-infer predict RUN_FILE DATA_FILE``: predictions from a saved run (post-processing, free).

Columns of DATA_FILE are matched to the run's training features BY NAME (extra columns, e.g. the
label, are ignored; a missing one is an error). A run of ``dp-infer sample --schema`` stores its
schema: the new rows are then encoded by it (raw columns, categorical levels, declared bounds;
``--delimiter`` / ``--no-header --names`` read them). A run of plain ``dp-infer sample`` clipped
its training rows to a public norm: the same clipping is applied to the rows to predict. A run
fitted from a NumPyro model needs the model: ``--model path/to/file.py:function``.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import click
import numpy as np

from ..infer.prediction import PREDICTION_SOURCES
from .schema_commands import with_read_options, encode_with_stored_schema


def load_model_function(spec: str):
    """``path/to/file.py:function`` (or ``package.module:function``) -> the function."""
    if ":" not in spec:
        raise ValueError(f"--model must be FILE.py:FUNCTION or MODULE:FUNCTION, got {spec!r}")
    where, name = spec.rsplit(":", 1)
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise ValueError(f"--model file {where} does not exist")
            mod_spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(mod_spec)
            mod_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's file: one line
        raise ValueError(f"--model {spec}: could not import {where}: {type(e).__name__}: {e}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"--model {spec}: {where} has no function {name!r}")
    return fn


def read_rows(data_file, run) -> tuple[object, list[str]]:
    """The rows to predict as a DataFrame with the run's feature columns (matched by name); the CSV's
    field delimiter is sniffed (:func:`dp_infer.datasets.sniff_delimiter`)."""
    import pandas as pd

    from ..datasets import sniff_delimiter

    try:
        with open(data_file, newline="") as fh:  # ',', ';', tab or '|', as sample and the schema reader read it
            sep = sniff_delimiter(fh)
        df = pd.read_csv(data_file, sep=sep)
    except Exception as e:  # noqa: BLE001 - a malformed file: one line
        raise ValueError(f"{data_file} is not a readable CSV file: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    df.columns = [str(c).strip() for c in df.columns]
    names = run.feature_names
    if not names:
        raise ValueError("the run file stores no feature names, so its columns cannot be matched by name: "
                         "it was not written by dp-infer sample or fit(...) on a DataFrame")
    missing = [c for c in names if c not in df.columns]
    if missing:
        raise ValueError(f"{data_file} lacks the feature column(s) {missing} of the run (columns are matched by "
                         f"name; the file has {list(df.columns)})")
    bad = [c for c in names if not np.issubdtype(df[c].dtype, np.number)]
    if bad:
        raise ValueError(f"{data_file}: column(s) {bad} are not numeric")
    return df[list(names)], names


@click.command("predict")
@click.argument("run_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("data_file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False), default=None,
              help="write the predictions as CSV (default: print the first rows)")
@click.option("--model", "model_spec", default=None,
              help="FILE.py:FUNCTION -- the NumPyro model of a run fitted with fit(model=...)")
@click.option("--from", "source", type=click.Choice(list(PREDICTION_SOURCES)), default="draws", show_default=True,
              help="predict from the released draws (averaged), or from the centre of the run's intervals for theta "
                   "(a plug-in; posterior-mode runs of a built-in loss with an interval release)")
@with_read_options
def predict_command(run_file, data_file, out, model_spec, source, delimiter, no_header, names):
    """Predict DATA_FILE (columns matched by name) from the released draws of RUN_FILE, or from the centre of its
    intervals for theta (--from intervals)."""
    import pandas as pd

    from ..datasets import clip_rows
    from ..infer.run import PrivateRun

    from ..infer.preflight import check_output_path

    check_output_path(out, param="-o/--out", suffixes=(".csv",))
    model = load_model_function(model_spec) if model_spec else None
    run = PrivateRun.load(run_file, model=model)
    if model is None and run.model_description is not None:
        raise ValueError(f"--model: {run_file} was fitted from a NumPyro model: give --model FILE.py:FUNCTION")
    if model is not None and run.model_description is None:
        raise ValueError(f"--model: {run_file} was not fitted from a NumPyro model (fit(model=...)); drop --model")
    encoded = encode_with_stored_schema(run_file, data_file, delimiter, no_header, names)
    labels = target = None
    if encoded is not None:  # a schema run: encode the raw columns exactly as in training
        X, names, labels, kind, target = encoded
        if not run.feature_names:
            run.feature_names = names
        click.echo(f"rows encoded by the schema stored in {run_file}")
    else:
        if delimiter is not None or no_header or names:
            raise ValueError("--delimiter / --no-header / --names apply to runs made with sample --schema")
        df, names = read_rows(data_file, run)
        X = df.to_numpy(dtype=float)
        row_norm = ((run.potential_description.get("loss") or {}).get("row_norm"))
        if run.model_description is None and isinstance(row_norm, (int, float)) and math.isfinite(row_norm):
            X, rep = clip_rows(X, float(row_norm))
            click.echo(f"rows clipped to the run's public row norm {row_norm:g}, as in training")
    why = run.interval_centre_refusal() if source == "intervals" else None
    if why is not None:
        raise ValueError(f"--from intervals: {why}; predict from the draws (--from draws)")
    pred = run.predictive(pd.DataFrame(X, columns=names), source=source)
    table = {}
    if "probs" in pred and np.ndim(pred["probs"]) == 1:
        table["probability"] = np.asarray(pred["probs"])
    elif "probs" in pred:
        for k in range(np.shape(pred["probs"])[1]):
            table[f"probability_{k}"] = np.asarray(pred["probs"])[:, k]
    from ..infer.prediction import labels_from

    codes = np.asarray(labels_from(pred))
    table["prediction"] = codes
    if target is not None and target.kind == "binary" and target.positive and target.negative:
        # back in the schema's own values: 1 -> its first positive label, 0 -> its first negative one
        table["prediction"] = np.where(codes > 0.5, target.positive[0], target.negative[0])
    frame = pd.DataFrame(table)
    src = ("centre of the intervals for theta (plug-in)" if source == "intervals" else
           "purified estimate" if run.purified is not None else "released draws after burn-in")
    click.echo(f"{data_file}: {len(frame)} rows predicted from the {src} of {run_file} (post-processing)")
    if source == "draws" and run.model_description is None and "interval_release" in run.report_extras:
        click.echo("this run also released intervals for theta: --from intervals predicts from their centre, which "
                   "carries what the data say where the tempered draws are close to the prior")
    if labels is not None and "probability" in table:
        acc = float(np.mean((codes > 0.5) == (np.asarray(labels) > 0.5)))
        click.echo(f"accuracy on these rows: {acc:.4f} (computed from their labels: NON-PRIVATE if they are private)")
    if out:
        frame.to_csv(out, index=False)
        click.echo(f"wrote {out}")
    else:
        click.echo(frame.head(10).to_string(index=False))
