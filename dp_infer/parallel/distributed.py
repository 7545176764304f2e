"""Several hosts: which rows each process reads, and reading only those (CSV ranges, Parquet row groups).

The multi-host recipe (docs page "Scaling out"):

1. every process calls :func:`initialize` (``jax.distributed.initialize``; on CPU with the gloo
   collectives) with the same coordinator address and its own ``process_id``;
2. every process builds the same mesh over all global devices
   (:func:`dp_infer.parallel.sharding.data_mesh`, ``chain_shards=1``) and asks
   :func:`process_row_range` which rows its devices hold;
3. it reads only those rows (:func:`read_rows`: a CSV line range, or the Parquet row groups
   that overlap the range) and passes them to :func:`dp_infer.parallel.sharding.shard_rows` with
   ``n`` (the global row count, public like every n the plan uses) and ``row_offset``;
4. every process calls ``dp_infer.fit`` / ``dp_infer.sample`` with the same arguments and
   the same seed policy. The run is one SPMD program; the released draws are replicated on every
   process (each may write them; they are the same numbers).

``n`` must be known to every process before any row is read (it enters the plan); pass it, or
count rows with :func:`count_rows` (file metadata for Parquet, a line count for CSV) -- the count
is the public n of the replace-one neighbouring relation, not a private statistic.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from .._validation import check_choice, check_positive_int
from .sharding import ROWS, axis_size, check_mesh, row_shard_range

__all__ = ["initialize", "process_row_range", "count_rows", "read_rows"]


def initialize(coordinator_address: str, num_processes: int, process_id: int, *,
               cpu_collectives: str | None = "gloo", **kwargs) -> None:
    """``jax.distributed.initialize`` for this process; on CPU-only hosts the cross-process
    collectives need an implementation (``"gloo"``, shipped with jaxlib; ``None`` keeps JAX's
    setting, e.g. for GPUs, whose collectives are NCCL). Must run before any other JAX call."""
    num_processes = check_positive_int("num_processes", num_processes)
    if isinstance(process_id, bool) or not isinstance(process_id, int) or not 0 <= process_id < num_processes:
        raise ValueError(f"process_id must be an integer in [0, {num_processes}), got {process_id!r}")
    if cpu_collectives is not None:
        check_choice("cpu_collectives", cpu_collectives, ("gloo", "mpi"))
        jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id, **kwargs)


def process_row_range(n: int, mesh) -> tuple[int, int]:
    """Global rows ``[start, stop)`` this process must read: the union of the row shards of its
    devices on ``mesh``. Raises if they are not contiguous (order the mesh's devices by process,
    as :func:`~dp_infer.parallel.sharding.data_mesh` over ``jax.devices()`` does)."""
    mesh = check_mesh(mesh)
    n = check_positive_int("n", n)
    R = axis_size(mesh, ROWS)
    row_axis = list(mesh.axis_names).index(ROWS)
    mine = set()
    for idx in np.ndindex(mesh.devices.shape):
        if mesh.devices[idx].process_index == jax.process_index():
            mine.add(idx[row_axis])
    if not mine:
        raise ValueError("mesh has no device of this process; build it over jax.devices() on every process")
    shards = sorted(mine)
    if shards != list(range(shards[0], shards[-1] + 1)):
        raise ValueError(f"this process's devices hold row shards {shards} of {R}, which are not contiguous; "
                         "order the mesh's devices by process")
    start, _ = row_shard_range(n, mesh, shards[0])
    _, stop = row_shard_range(n, mesh, shards[-1])
    return start, stop


def _kind(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".csv":
        return "csv"
    raise ValueError(f"path must end in .csv, .parquet or .pq, got {path.name!r}")


def count_rows(path) -> int:
    """Number of data rows of a CSV (lines after the header) or a Parquet file (metadata only)."""
    path = Path(path)
    if _kind(path) == "parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    with path.open("rb") as fh:
        lines = sum(1 for line in fh if line.strip())
    return max(lines - 1, 0)


def _split(frame, target: str, columns, path: Path):
    names = list(frame.columns)
    if target not in names:
        raise ValueError(f"target column {target!r} not in {path} (columns: {names})")
    features = [c for c in names if c != target] if columns is None else list(columns)
    missing = [c for c in features if c not in names]
    if missing:
        raise ValueError(f"{path} lacks the feature column(s) {missing} (columns are matched by name)")
    try:
        X = frame[features].to_numpy(dtype=np.float32)
        y = frame[target].to_numpy(dtype=np.float32)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: every feature and the target must be numeric") from None
    return X, y


def read_rows(path, start: int, stop: int, *, target: str, columns: list[str] | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``[start, stop)`` of a numeric CSV (with a header) or Parquet file as float32
    ``(X, y)``, reading no other rows' values: CSV lines outside the range are skipped unparsed,
    Parquet row groups outside it are not read. ``columns`` fixes the feature order by name."""
    path = Path(path)
    kind = _kind(path)
    if isinstance(start, bool) or isinstance(stop, bool) or not 0 <= int(start) < int(stop):
        raise ValueError(f"start, stop must satisfy 0 <= start < stop, got {start!r}, {stop!r}")
    start, stop = int(start), int(stop)
    if kind == "csv":
        import pandas as pd

        frame = pd.read_csv(path, skiprows=range(1, start + 1), nrows=stop - start)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        groups, first, offset = [], None, 0
        for g in range(pf.metadata.num_row_groups):
            rows = pf.metadata.row_group(g).num_rows
            if offset < stop and offset + rows > start:
                groups.append(g)
                first = offset if first is None else first
            offset += rows
        if not groups:
            raise ValueError(f"rows [{start}, {stop}) lie beyond the {offset} rows of {path}")
        table = pf.read_row_groups(groups)
        frame = pa.Table.slice(table, start - first, stop - start).to_pandas()
    if len(frame) != stop - start:
        raise ValueError(f"{path} has fewer rows than stop = {stop}")
    return _split(frame, target, columns, path)
