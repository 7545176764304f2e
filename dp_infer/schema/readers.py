"""Read a table into a pandas DataFrame of raw cells: CSV (pandas' C parser), Parquet (pyarrow),
pandas / pyarrow / polars frames. Nothing is parsed or typed here beyond what the file format
itself stores: the feature map decides, by column *name*, how each cell is read.

CSV cells are kept as strings (no type guessing, no NA guessing: the schema's ``na_values``
decide what is missing). The header row is checked for duplicate or empty names before pandas
would silently rename them.

The delimiter, when none is given (``delimiter=None``), is sniffed by ONE rule shared by every
reader (``schema draft``, ``schema check``, ``sample --schema``, ``predict``):
:func:`sniff_delimiter`. A drafted schema records the delimiter it was drafted with under
``read.delimiter``, so later readers use the same one; an explicit ``--delimiter`` wins over both.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["read_table", "sniff_delimiter", "delimiter_hint", "PARQUET_SUFFIXES", "DELIMITERS"]

PARQUET_SUFFIXES = (".parquet", ".pq")
#: the delimiters :func:`sniff_delimiter` chooses among
DELIMITERS = (",", ";", "\t", "|")
_SNIFF_LINES = 50
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def _first_lines(path: Path, encoding: str, skiprows: int | None, comment: str | None) -> list[str]:
    opener = _OPENERS.get(path.suffix.lower())
    try:
        f = opener(path, "rt", encoding=encoding, newline="") if opener else open(path, encoding=encoding, newline="")
        with f:
            out: list[str] = []
            for i, line in enumerate(f):
                if skiprows and i < skiprows:
                    continue
                if not line.strip() or (comment and line.lstrip().startswith(comment)):
                    continue
                out.append(line)
                if len(out) >= _SNIFF_LINES:
                    break
            return out
    except (OSError, EOFError, UnicodeDecodeError, lzma.LZMAError):
        return []  # not plain or gzip/bz2/xz text: pandas will say what is wrong


def _fields_per_line(lines: list[str], delim: str, quotechar: str) -> list[int]:
    try:
        return [len(r) for r in csv.reader(io.StringIO("".join(lines)), delimiter=delim, quotechar=quotechar)
                if r]
    except csv.Error:
        return []


def sniff_delimiter(path, *, quotechar: str = '"', skiprows: int | None = None, comment: str | None = None,
                    encoding: str = "utf-8") -> str:
    """The field delimiter of a delimited text file, among ``, ; TAB |`` (:data:`DELIMITERS`).

    The rule: read the first 50 non-blank lines; a candidate is *consistent* when it splits every
    line (quotes respected) into the same number (> 1) of fields. One consistent candidate: it.
    Several: a one-line ``ValueError`` asking for ``--delimiter``. None (ragged lines, or one
    column): :class:`csv.Sniffer`'s guess when the header line holds it, else ``,``.
    """
    path = Path(path)
    lines = _first_lines(path, encoding, skiprows, comment)
    if not lines:
        return ","
    ok = []
    for d in DELIMITERS:
        counts = _fields_per_line(lines, d, quotechar)
        if counts and counts[0] > 1 and len(set(counts)) == 1:
            ok.append(d)
    if len(ok) == 1:
        return ok[0]
    if ok:
        shown = ", ".join(repr(d) for d in ok)
        raise _err(f"{path}: the delimiter is ambiguous ({shown} each split every line into equal fields); "
                   f"give it with --delimiter (one of {shown})")
    try:  # ragged lines: csv.Sniffer's guess, if the header holds it
        guess = csv.Sniffer().sniff("".join(lines), delimiters="".join(DELIMITERS)).delimiter
    except csv.Error:
        guess = None
    return guess if guess in DELIMITERS and guess in lines[0] else ","


def delimiter_hint(columns) -> str:
    """A hint for a table read with the wrong delimiter (one column whose name holds another), or ''."""
    cols = [str(c) for c in columns]
    if len(cols) == 1:
        seen = [d for d in DELIMITERS if d in cols[0]]
        if seen:
            return (f"; the header was read as ONE column: the file looks {seen[0]!r}-delimited, "
                    f"give --delimiter {seen[0]!r}")
    return ""


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


def read_table(source: Any, *, delimiter: str | None = None, header: bool = True, quotechar: str = '"',
               names=None, comment: str | None = None, skiprows: int | None = None,
               encoding: str = "utf-8") -> pd.DataFrame:
    """A DataFrame of raw cells from a file path or an in-memory table.

    ``source``: a path (``.parquet``/``.pq`` read by pyarrow; anything else as delimited text,
    gzip and other compressions by suffix), a pandas DataFrame, a pyarrow Table, or any frame
    with ``to_pandas()`` (polars, via pyarrow). Delimited text: ``delimiter`` (None: sniffed by
    :func:`sniff_delimiter`; the one used is in ``df.attrs["delimiter"]``), ``quotechar``,
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
    if delimiter is not None and (not isinstance(delimiter, str) or len(delimiter) != 1):
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
    if delimiter is None:
        delimiter = sniff_delimiter(path, quotechar=quotechar, skiprows=skiprows, comment=comment,
                                    encoding=encoding)
    df = _read_csv(path, delimiter=delimiter, header=header, quotechar=quotechar, names=names,
                   comment=comment, skiprows=skiprows, encoding=encoding)
    df.attrs["delimiter"] = delimiter
    return df
