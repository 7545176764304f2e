"""Schema files: YAML (``.yaml``/``.yml``) or JSON (``.json``), read and written as plain data.

A file is validated by :meth:`dp_infer.schema.spec.Schema.from_dict` on load; a file that is not
a mapping, has unknown keys or invalid values raises a one-line ``ValueError``. Drafts are
written with a comment header (YAML) or a ``"_comment"``-free JSON plus the header on screen.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import yaml

from .spec import Schema

__all__ = ["load_schema", "save_schema", "schema_to_yaml", "schema_from_text"]


def _yaml_error(e: yaml.YAMLError, where: str) -> ValueError:
    """One line: the file, line and column (1-based) and yaml's problem, plus a hint for the usual cause."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    place = f"{where}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else where
    problem = getattr(e, "problem", None) or (str(e).strip().splitlines() or [type(e).__name__])[0]
    ctx = getattr(e, "context", None)
    msg = f"{place}: not valid YAML: {problem}" + (f" ({ctx})" if ctx else "")
    if "mapping values are not allowed" in str(problem) or "but got ':'" in str(problem):
        msg += "; a text value holding ': ' (a note, a level) must be quoted: note: \"a: b\""
    return ValueError(msg)


def schema_from_text(text: str, *, fmt: str = "yaml", where: str = "schema") -> Schema:
    """Parse YAML (a superset of JSON) or JSON text into a validated :class:`Schema`.

    A syntax error raises a one-line ``ValueError`` naming ``where``, the line and the column."""
    try:
        data = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}, line {e.lineno}, column {e.colno}: not valid JSON: {e.msg}") from None
    except yaml.YAMLError as e:
        raise _yaml_error(e, where) from None
    if data is None:
        raise ValueError(f"{where}: the schema file is empty")
    return Schema.from_dict(data)


def load_schema(path) -> Schema:
    """Read and validate a schema file (YAML or JSON by suffix; YAML otherwise)."""
    if isinstance(path, Schema):
        return path
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"schema: {p} is not a file")
    fmt = "json" if p.suffix.lower() == ".json" else "yaml"
    return schema_from_text(p.read_text(), fmt=fmt, where=f"schema {p}")


class _Dumper(yaml.SafeDumper):
    """Short lists of scalars (bounds, levels) in flow style: ``[15.0, 95.0]``."""


def _represent_list(dumper, data):
    flow = all(isinstance(v, (str, int, float, bool)) or v is None for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def _dump(obj) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def _comment(lines, wrap: bool = True, width: int = 98) -> str:
    out = []
    for ln in lines:
        out += (textwrap.wrap(ln, width, break_long_words=False, break_on_hyphens=False) or [""]) if wrap else [ln]
    return "".join(f"# {ln}\n" if ln else "#\n" for ln in out)


def schema_to_yaml(schema: Schema, header: str = "", *, comments=None, commented_out=()) -> str:
    """YAML text of ``schema``; ``header`` lines are written as ``#`` comments on top.

    ``comments``: ``{column name: [lines]}`` written as comments above that column's entry.
    ``commented_out``: ``(entry dict, reason)`` pairs written at the end of ``columns`` as
    commented-out entries, each under its reason (a private draft's unresolved entries)."""
    d = schema.to_dict()
    cols = d.pop("columns")
    body = _dump(d) + "columns:\n"
    comments = dict(comments or {})
    for c in cols:
        note = comments.get(c["name"])
        if note:
            body += _comment(note if isinstance(note, (list, tuple)) else [note])
        body += _dump([c])
    for entry, reason in commented_out:
        body += _comment([f"UNRESOLVED: {reason}"]) + _comment(_dump([entry]).splitlines(), wrap=False)
    head = _comment(header.splitlines()) if header else ""
    return head + body


def save_schema(schema, path, header: str = "", **yaml_kw) -> Path:
    """Write ``schema`` as YAML (or JSON for a ``.json`` path; the header is then a ``comment`` entry
    of the returned text on screen only, since JSON has no comments). ``schema`` may be a
    :class:`~dp_infer.schema.draft.DraftResult` (its header, column comments, prior advice and
    commented-out entries go into the YAML). ``yaml_kw``: see :func:`schema_to_yaml`. Returns the path."""
    p = Path(path)
    if not isinstance(schema, Schema) and hasattr(schema, "yaml"):
        text = schema.yaml()
        schema = schema.schema
    else:
        text = schema_to_yaml(schema, header, **yaml_kw)
    if p.suffix.lower() == ".json":
        p.write_text(json.dumps(schema.to_dict(), indent=2) + "\n")
    else:
        p.write_text(text)
    return p
