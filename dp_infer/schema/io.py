"""Schema files: YAML (``.yaml``/``.yml``) or JSON (``.json``), read and written as plain data.

A file is validated by :meth:`dp_infer.schema.spec.Schema.from_dict` on load; a file that is not
a mapping, has unknown keys or invalid values raises a one-line ``ValueError``. Drafts are
written with a comment header (YAML) or a ``"_comment"``-free JSON plus the header on screen.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from .spec import Schema

__all__ = ["load_schema", "save_schema", "schema_to_yaml", "schema_from_text"]


def schema_from_text(text: str, *, fmt: str = "yaml", where: str = "schema") -> Schema:
    """Parse YAML (a superset of JSON) or JSON text into a validated :class:`Schema`."""
    try:
        data = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{where}: not valid {fmt.upper()}: {first}") from None
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


def schema_to_yaml(schema: Schema, header: str = "") -> str:
    """YAML text of ``schema``; ``header`` lines are written as ``#`` comments on top."""
    body = yaml.dump(schema.to_dict(), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    head = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines()) if header else ""
    return head + body


def save_schema(schema: Schema, path, header: str = "") -> Path:
    """Write ``schema`` as YAML (or JSON for a ``.json`` path; the header is then a ``comment`` entry
    of the returned text on screen only, since JSON has no comments). Returns the path."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        p.write_text(json.dumps(schema.to_dict(), indent=2) + "\n")
    else:
        p.write_text(schema_to_yaml(schema, header))
    return p
