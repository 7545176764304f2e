"""Run files: save and load DataTrees (netCDF-4, zarr, or a dependency-free zip of netCDF-3
files) with every attribute, including the JSON privacy report."""

from __future__ import annotations

import io
import json
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from .privacy_report import JSON_ATTRS_KEY, FORMAT_ATTR, jsonable, is_private, privacy_status

# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------


def _netcdf4_engine() -> str | None:
    import importlib.util

    for engine, module in (("h5netcdf", "h5netcdf"), ("netcdf4", "netCDF4")):
        if importlib.util.find_spec(module) is not None:
            return engine
    return None


def _encode_attrs_nc3(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """netCDF-3 attributes are scalars/strings/1-D numeric arrays: JSON-encode the rest."""
    out, encoded = {}, []
    for k, v in attrs.items():
        if isinstance(v, str) or (isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))):
            out[k] = v
        else:
            out[k] = json.dumps(jsonable(v))
            encoded.append(k)
    if encoded:
        out[JSON_ATTRS_KEY] = json.dumps(encoded)
    return out


def _decode_attrs_nc3(attrs: Mapping[str, Any]) -> dict[str, Any]:
    attrs = dict(attrs)
    encoded = json.loads(attrs.pop(JSON_ATTRS_KEY, "[]"))
    for k in encoded:
        attrs[k] = json.loads(attrs[k])
    return attrs


def _encoded_tree(dt: xr.DataTree) -> xr.DataTree:
    """A copy whose attributes are all netCDF-storable (structured ones as JSON text)."""
    groups = {}
    for node in dt.subtree:
        ds = node.to_dataset(inherit=False).copy()
        ds.attrs = _encode_attrs_nc3(ds.attrs)
        for var in ds.variables.values():
            var.attrs = _encode_attrs_nc3(var.attrs)
        groups[node.path] = ds
    return xr.DataTree.from_dict(groups)


def _decode_tree(dt: xr.DataTree) -> xr.DataTree:
    for node in dt.subtree:
        node.attrs = _decode_attrs_nc3(node.attrs)
        for name in node.data_vars:
            node[name].attrs = _decode_attrs_nc3(node[name].attrs)
    return dt


def _save_zip(dt: xr.DataTree, path: Path) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for node in dt.subtree:
            ds = node.to_dataset(inherit=False)
            ds.attrs = _encode_attrs_nc3(ds.attrs)
            for var in ds.variables.values():
                var.attrs = _encode_attrs_nc3(var.attrs)
            name = "_root" if node.path == "/" else node.path.strip("/")
            zf.writestr(f"{name}.nc", ds.to_netcdf(engine="scipy"))


def _load_zip(path: Path) -> xr.DataTree:
    groups = {}
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if not name.endswith(".nc"):
                continue
            with xr.open_dataset(io.BytesIO(zf.read(name)), engine="scipy") as ds:
                ds = ds.load()
            ds.attrs = _decode_attrs_nc3(ds.attrs)
            for var in ds.variables.values():
                var.attrs = _decode_attrs_nc3(var.attrs)
            key = "/" if name == "_root.nc" else "/" + name[: -len(".nc")]
            groups[key] = ds
    if "/" not in groups:
        groups["/"] = xr.Dataset()
    return xr.DataTree.from_dict(groups)


def save(dt: xr.DataTree, path: str | Path) -> Path:
    """Write ``dt`` (with all attributes, incl. the privacy report) to ``path``; return it.

    The format follows the suffix: ``.zarr`` -> zarr store (needs ``zarr``); ``.zip`` -> one
    netCDF-3 file per group inside a zip archive (SciPy only); anything else (``.nc``, ``.nc4``,
    ``.h5``) -> netCDF-4 with groups (needs the ``h5netcdf`` or ``netCDF4`` package). Structured
    attributes (the privacy report, a mapping) are stored as JSON text in every format and
    decoded by :func:`load`; the flat ``dp_infer_privacy_summary`` line and the scalar
    ``dp_infer_<key>`` attributes stay readable by any netCDF tool. A debug (non-private) tree is
    written too, with its warning attribute, and a :class:`UserWarning` is emitted.
    """
    if not isinstance(dt, xr.DataTree):
        raise ValueError(f"dt must be an xarray.DataTree (from to_datatree), got {type(dt).__name__}")
    path = Path(path)
    if not is_private(dt):
        warnings.warn(f"saving a tree that is not a covered private release to {path}: "
                      f"{privacy_status(dt)}", UserWarning, stacklevel=2)
    suffix = path.suffix.lower()
    if suffix == ".zip":
        _save_zip(dt, path)
    elif suffix == ".zarr":
        _encoded_tree(dt).to_zarr(path, mode="w")
    else:
        engine = _netcdf4_engine()
        if engine is None:
            raise ImportError(
                f"writing {path.name} as netCDF-4 needs the 'h5netcdf' (or 'netCDF4') package, which is "
                "not installed; install it or save to a '.zip' path (dependency-free format)"
            )
        _encoded_tree(dt).to_netcdf(path, engine=engine)
    return path


def load(path: str | Path) -> xr.DataTree:
    """Read a file written by :func:`save` (format detected from the content) into memory.

    A missing, truncated or foreign file raises a one-line ``ValueError``."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"run file {path} does not exist")
    try:
        dt = _load_any(path)
    except ImportError:
        raise
    except Exception as e:  # noqa: BLE001 - corrupt or foreign files: one clear line
        raise ValueError(f"{path} is not a readable dp_infer run file (.zip, .nc or .zarr written by "
                         f"dp_infer.diagnostics.save): {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                         ) from None
    if FORMAT_ATTR not in dt.attrs:
        raise ValueError(f"{path} is a data file but not a dp_infer run (no {FORMAT_ATTR!r} attribute)")
    return dt


def _load_any(path: Path) -> xr.DataTree:
    if path.is_dir():
        return _decode_tree(xr.open_datatree(path, engine="zarr").load())
    with open(path, "rb") as f:
        magic = f.read(8)
    if magic.startswith(b"PK"):
        return _load_zip(path)
    if magic.startswith(b"CDF"):
        with xr.open_dataset(path, engine="scipy") as ds:
            ds = ds.load()
        ds.attrs = _decode_attrs_nc3(ds.attrs)
        return xr.DataTree(ds)
    engine = _netcdf4_engine()
    if engine is None:
        raise ImportError(f"reading {path.name} (netCDF-4/HDF5) needs the 'h5netcdf' (or 'netCDF4') package")
    return _decode_tree(xr.load_datatree(path, engine=engine))
