"""Read a table into a pandas DataFrame of raw cells: CSV (pandas' C parser), Parquet (pyarrow),
pandas / pyarrow / polars frames. Nothing is parsed or typed here beyond what the file format
itself stores: the feature map decides, by column *name*, how each cell is read.

CSV cells are kept as strings (no type guessing, no NA guessing: the schema's ``na_values``
decide what is missing). The header row is checked for duplicate or empty names before pandas
would silently rename them.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["read_table", "PARQUET_SUFFIXES"]

PARQUET_SUFFIXES = (".parquet", ".pq")


def _err(msg: str) -> ValueError:
    return ValueError(f"data: {msg}")


def _check_header(names: list[str], where: str) -> None:
    empty = [i for i, n in enumerate(names) if not str(n).strip()]
    if empty:
        raise _err(f"{where}: column {empty[0] + 1} of the header has no name")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _err(f"{where}: duplicate column name(s) {dup} in the header")


def _read_csv(path: Path, *, delimiter: str, header: bool, quotechar: str, names, comment,
              skiprows, encoding: str) -> pd.DataFrame:
    if path.stat().st_size == 0:
        raise _err(f"{path} is empty")
    try:
        raw = pd.read_csv(path, sep=delimiter, header=None, dtype=str, keep_default_na=False,
                          na_filter=False, quotechar=quotechar, quoting=csv.QUOTE_MINIMAL,
                          skipinitialspace=True, comment=comment, skiprows=skiprows,
                          skip_blank_lines=True, encoding=encoding, engine="c")
    except pd.errors.EmptyDataError:
        raise _err(f"{path} is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _err(f"{path} is not a table (delimiter {delimiter!r}): {first}") from None
    if header:
        if raw.shape[0] == 0:
            raise _err(f"{path} is empty")
        cols = [str(c).strip() for c in raw.iloc[0].tolist()]
        _check_header(cols, str(path))
        raw = raw.iloc[1:].reset_index(drop=True)
        raw.columns = cols
    else:
        if names is None:
            raise _err(f"{path}: header=False needs the column names (names=[...])")
        names = [str(n) for n in names]
        _check_header(names, "names")
        if raw.shape[1] != len(names):
            raise _err(f"{path} has {raw.shape[1]} fields per line but {len(names)} names were given")
        raw.columns = names
    if raw.shape[0] == 0:
        raise _err(f"{path} has a header but no rows")
    if names is not None and header:
        raise _err("names and header=True are exclusive (the header names the columns)")
    return raw


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - the data extra installs it
        raise _err("reading Parquet needs pyarrow (pip install 'dp_infer[data]')") from None
    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError on a file that is not Parquet
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _err(f"{path} is not a Parquet table: {first}") from None
    return _from_frame(table.to_pandas(), str(path))


def _from_frame(df: pd.DataFrame, where: str) -> pd.DataFrame:
    cols = [str(c) for c in df.columns]
    _check_header(cols, where)
    if df.shape[1] == 0:
        raise _err(f"{where} has no columns")
    if df.shape[0] == 0:
        raise _err(f"{where} has no rows")
    out = df.copy()
    out.columns = cols
    return out.reset_index(drop=True)


def read_table(source: Any, *, delimiter: str = ",", header: bool = True, quotechar: str = '"',
               names=None, comment: str | None = None, skiprows: int | None = None,
               encoding: str = "utf-8") -> pd.DataFrame:
    """A DataFrame of raw cells from a file path or an in-memory table.

    ``source``: a path (``.parquet``/``.pq`` read by pyarrow; anything else as delimited text,
    gzip and other compressions by suffix), a pandas DataFrame, a pyarrow Table, or any frame
    with ``to_pandas()`` (polars, via pyarrow). Delimited text: ``delimiter``, ``quotechar``,
    ``header`` (False: give ``names``), ``comment`` (lines starting with it are skipped),
    ``skiprows`` (leading lines to skip). Raises a one-line ``ValueError`` for an empty file,
    a file that is not a table, or duplicate / empty column names.
    """
    if isinstance(source, pd.DataFrame):
        return _from_frame(source, "DataFrame")
    if not isinstance(source, (str, Path)):
        if hasattr(source, "to_pandas") and callable(source.to_pandas):
            return _from_frame(source.to_pandas(), type(source).__name__)
        raise _err(f"source must be a file path, a pandas DataFrame, a pyarrow Table or a frame with "
                   f"to_pandas(), got {type(source).__name__}")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ValueError(f"delimiter must be a single character, got {delimiter!r}")
    if not isinstance(quotechar, str) or len(quotechar) != 1:
        raise ValueError(f"quotechar must be a single character, got {quotechar!r}")
    path = Path(source)
    if not path.exists():
        raise _err(f"{path} does not exist")
    if path.is_dir():
        raise _err(f"{path} is a directory, not a table")
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return _read_parquet(path)
    return _read_csv(path, delimiter=delimiter, header=header, quotechar=quotechar, names=names,
                     comment=comment, skiprows=skiprows, encoding=encoding)
