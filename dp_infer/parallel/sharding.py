"""Data-parallel potentials on JAX's sharding engine: rows over devices (and hosts), chains beside.

Layout. A :class:`jax.sharding.Mesh` with axes ``("chains", "rows")`` (:func:`data_mesh`). X, y
are split into equal row shards along ``"rows"`` (the last shard padded with zero rows of weight 0,
a public mask that depends on n and the mesh only) and replicated along ``"chains"``; chains are
split along ``"chains"`` (the chains' initial points are placed so, NumPyro vectorises them and
the compiler propagates the layout; the row reduction is manual over ``"rows"`` only).

Computation. ``U(theta) = beta * (1/n) sum_i ell_i(theta) + (lam/2)||theta - theta0||^2`` with the
sum computed as local sums in row blocks on every device (:mod:`dp_infer.losses.row_blocks`) and one
``psum`` over ``"rows"`` (``jax.shard_map``); its gradient is the ``psum`` of the local
(clipped, if the loss clips) gradient sums, returned by a ``custom_vjp`` so that reverse mode
never goes through the collective. This is the function :class:`~dp_infer.potentials.GibbsPotential`
computes (the additions are only reordered), so the plan, its event and the report do not
change with the mesh, and for the same key the draws agree to float tolerance.

Data enter the sampler as arguments of NumPyro's jitted loop (``jit_model_args``), never as
closed-over constants (which jit would embed in the program, i.e. copy, on every device).

Placement (:func:`shard_rows`) reads the rows in chunks: each chunk is checked against the
loss's declared bounds (finite, labels, row norms recomputed on the stored dtype: see
:mod:`dp_infer.parallel.precision`), cast, and written into a preallocated device buffer in place, so
peak memory is X (as stored) plus O(chunk x d). Multi-host: every process passes only the rows
of its own devices (:func:`dp_infer.parallel.distributed.process_row_range`) with ``row_offset`` and the
global ``n``; a failed check on any host stops all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .._validation import check_nonnegative, check_positive, check_positive_int
from ..losses import PerExampleLoss
from .precision import DATA_DTYPES, ROUNDINGS, cast_rows, check_cast_rows, storage_dtype
from ..losses.row_blocks import CPU_BLOCK_ROWS, blocked_loss_sum_and_grad, row_block_rule

__all__ = ["ROWS", "CHAINS", "DEFAULT_BLOCK_ROWS", "data_mesh", "row_shard_range", "ShardedRows",
           "shard_rows", "check_placed_rows", "ShardedPotential", "row_mean", "same_key_on_all_processes"]

ROWS, CHAINS = "rows", "chains"
#: rows per block of the per-device evaluation on a CPU (memory O(block x d)); on a GPU or TPU the
#: default is all of a shard's rows when they fit (:func:`dp_infer.losses.row_blocks.default_row_block`)
DEFAULT_BLOCK_ROWS = CPU_BLOCK_ROWS
#: rows per host chunk while placing the data
INGEST_ROWS = 65536


def data_mesh(devices=None, *, chain_shards: int = 1) -> Mesh:
    """Mesh ``("chains", "rows")`` over ``devices`` (default ``jax.devices()``, every host's):
    ``chain_shards`` groups of devices, each holding all rows split ``len(devices) /
    chain_shards`` ways. On several hosts keep ``chain_shards=1`` unless each group of devices
    can hold the whole data."""
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("devices must be a non-empty list of jax devices")
    c = check_positive_int("chain_shards", chain_shards)
    if len(devices) % c:
        raise ValueError(f"chain_shards must divide the number of devices ({len(devices)}), got {c}")
    return Mesh(np.array(devices, dtype=object).reshape(c, len(devices) // c), (CHAINS, ROWS))


def axis_size(mesh: Mesh, name: str) -> int:
    return int(dict(zip(mesh.axis_names, mesh.devices.shape)).get(name, 1))


def check_mesh(mesh) -> Mesh:
    if not isinstance(mesh, Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh (see dp_infer.parallel.sharding.data_mesh), got {mesh!r}")
    if ROWS not in mesh.axis_names or not set(mesh.axis_names) <= {ROWS, CHAINS}:
        raise ValueError(f"mesh axes must be ('{CHAINS}', '{ROWS}') or ('{ROWS}',), got {mesh.axis_names}")
    return mesh


def row_shard_range(n: int, mesh: Mesh, shard: int) -> tuple[int, int]:
    """Global rows ``[start, stop)`` held by row shard ``shard`` (stop <= n; the rest is padding)."""
    m = -(-check_positive_int("n", n) // axis_size(mesh, ROWS))
    return min(shard * m, n), min((shard + 1) * m, n)


@dataclass(frozen=True)
class _RowChecks:
    """What :func:`shard_rows` checked the placed rows against (made there only): the loss's name,
    declared row norm and label check."""

    loss_name: str
    row_norm: float
    label_check: object


#: the one-line refusal of rows that did not go through shard_rows' checks (issue 40)
_UNCHECKED = ("ShardedRows: make it with dp_infer.parallel.sharding.shard_rows, which checks every row's label and "
              "norm against the loss before placing it; a hand-built one is refused")


@dataclass(frozen=True)
class ShardedRows:
    """Rows placed on a mesh: global arrays ``X`` (n_pad, d), ``y`` (n_pad,), ``weight`` (n_pad,)
    row-sharded along ``"rows"``; ``n`` real rows (the rest is weight-0 padding). Data
    independent description: :meth:`describe`."""

    X: jax.Array
    y: jax.Array
    weight: jax.Array
    n: int
    mesh: Mesh
    block_rows: int
    dtype: str
    rounding: str
    block_rule: str = "given by the caller"
    checked: _RowChecks | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        # the privacy plan rests on the loss's declared label and row bounds: only shard_rows, which checks
        # them, makes a ShardedRows (a hand-built one with labels {1, 5} ran the logistic loss at 4.5x its bound)
        if not isinstance(self.checked, _RowChecks):
            raise ValueError(_UNCHECKED)

    @property
    def num_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def row_shards(self) -> int:
        return axis_size(self.mesh, ROWS)

    @property
    def chain_shards(self) -> int:
        return axis_size(self.mesh, CHAINS)

    def args(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        return self.X, self.y, self.weight

    def chain_method(self, num_chains: int, requested: str = "vectorized") -> str:
        """NumPyro chain method on this mesh: ``"vectorized"`` (chains batched; split along the mesh's
        ``"chains"`` axis when it has one, see :meth:`place_chains`) or ``"sequential"``."""
        if requested not in ("vectorized", "sequential"):
            raise ValueError("chain_method must be 'vectorized' or 'sequential' with a mesh "
                             f"('parallel' would pmap over the devices that hold the rows), got {requested!r}")
        c = self.chain_shards
        if requested == "vectorized" and c > 1 and num_chains % c:
            raise ValueError(f"num_chains must be a multiple of the mesh's chain shards ({c}), got {num_chains}")
        return requested

    def place_chains(self, init):
        """Initial points (chains, dim) split along the mesh's ``"chains"`` axis (replicated over
        ``"rows"``); the compiler propagates that layout to the chains' states."""
        if self.chain_shards == 1 or jnp.ndim(init) < 2:
            return init
        return jax.device_put(init, NamedSharding(self.mesh, P(CHAINS, None)))

    def describe(self) -> dict:
        return {"devices": int(self.mesh.devices.size), "processes": int(jax.process_count()),
                "row_shards": self.row_shards, "chain_shards": self.chain_shards,
                "rows_per_shard": int(self.X.shape[0]) // self.row_shards, "padding_rows": int(self.X.shape[0]) - self.n,
                "block_rows": self.block_rows, "block_rows_rule": self.block_rule, "data_dtype": self.dtype,
                "rounding": self.rounding if self.dtype != "float32" else None, "accumulation": "float32"}


def same_key_on_all_processes(key):
    """The key of process 0 on every process (``multihost_utils.broadcast_one_to_all``), so that one
    SPMD program draws one noise sequence; unchanged with a single process. With ``seed=None``
    each process drew its own key from its own entropy: without this the processes would run
    with different noise on what JAX treats as replicated values. The key material travels only
    over the job's own collectives, like the data."""
    if jax.process_count() == 1:
        return key
    from jax.experimental import multihost_utils

    impl = jax.random.key_impl(key)
    data = multihost_utils.broadcast_one_to_all(np.asarray(jax.random.key_data(key)))
    return jax.random.wrap_key_data(jnp.asarray(data), impl=impl)


@partial(jax.jit, donate_argnums=0)
def _write_rows(buf, block, start):
    return lax.dynamic_update_slice_in_dim(buf, block, start, 0)


def _check_chunk(loss: PerExampleLoss, Xc, yc, dtype: str, rounding: str, where: str):
    """Validate one chunk against the loss's declared bounds; return it cast for storage."""
    Xc = np.asarray(Xc)
    yc = np.asarray(yc)
    if Xc.ndim != 2 or yc.ndim != 1 or Xc.shape[0] != yc.shape[0]:
        raise ValueError(f"X must be 2-D and y 1-D with as many rows, got {Xc.shape} and {yc.shape}")
    x64 = Xc.astype(np.float64)
    if not np.all(np.isfinite(x64)) or not np.all(np.isfinite(yc.astype(np.float64))):
        raise ValueError(f"X or y contains non-finite value(s) (NaN or inf) {where}; clean them before fitting")
    if loss.label_check is not None:
        loss.label_check(yc.astype(np.float64))
    Xs = cast_rows(Xc, dtype, rounding=rounding)
    check_cast_rows(Xs, loss.row_norm, name=f"X {where}")
    return Xs, yc.astype(np.float32)


def _agree(ok: bool, message: str) -> None:
    """Raise on every process if the check failed on any (one host alone must not go ahead)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        oks = np.asarray(multihost_utils.process_allgather(np.array([ok], dtype=np.int32)))
        if not oks.all():
            raise ValueError(message or "the rows of another process failed the checks; see its error")
    elif not ok:
        raise ValueError(message)


def check_placed_rows(loss: PerExampleLoss, data: ShardedRows) -> None:
    """Refuse (one line, on every process) placed rows that ``loss``'s declared bounds do not cover: rows
    not made by :func:`shard_rows`, rows placed for a larger row norm, or labels ``loss`` refuses (the
    placed labels are re-read when the rows were checked with another label check). Reads the labels
    only, never releases them; called before anything is charged."""
    c = data.checked if isinstance(data, ShardedRows) else None
    if not isinstance(c, _RowChecks):
        raise ValueError(_UNCHECKED)
    if float(loss.row_norm) < c.row_norm:
        raise ValueError(f"X: the rows were placed for row_norm={c.row_norm:g} ({c.loss_name}); the loss declares "
                         f"row_norm={float(loss.row_norm):g}: place them with shard_rows for this loss")
    if loss.label_check is None or loss.label_check is c.label_check:
        return
    message = ""
    try:
        for ys, ws in zip(data.y.addressable_shards, data.weight.addressable_shards):
            y = np.asarray(ys.data, dtype=np.float64)
            loss.label_check(y[np.asarray(ws.data) > 0])  # the real rows only (padding has weight 0)
    except ValueError as e:
        message = str(e)
    _agree(not message, message)


def shard_rows(loss: PerExampleLoss, X, y, mesh: Mesh | None = None, *, dtype: str = "float32",
               rounding: str = "toward_zero", block_rows: int | None = None, n: int | None = None,
               row_offset: int = 0) -> ShardedRows:
    """Check ``X, y`` against ``loss``'s declared bounds and place them row-sharded on ``mesh``.

    :param mesh: a mesh from :func:`data_mesh` (default: all devices, rows only).
    :param dtype: storage dtype of X, ``"float32"`` or ``"bfloat16"`` (rows rechecked after the
        cast: :mod:`dp_infer.parallel.precision`); the loss is accumulated in float32 either way.
    :param block_rows: rows per block of the per-device evaluation; default
        :func:`~dp_infer.losses.row_blocks.default_row_block` of a shard's rows on the mesh's devices
        (CPU: 4096; GPU/TPU: all of a shard's rows when they fit in half the device's memory). The
        block used and why: ``describe()["block_rows"]``, ``["block_rows_rule"]``.
    :param n: global number of rows (default ``len(X)``). With several processes each passes
        only its rows ``X = rows[row_offset : row_offset + len(X)]``, which must cover the row
        shards of its devices (:func:`dp_infer.parallel.distributed.process_row_range`).
    Nothing is clipped: a bad row raises ``ValueError`` (on every process) before anything runs.
    """
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss, got {type(loss).__name__}")
    mesh = check_mesh(data_mesh() if mesh is None else mesh)
    if dtype not in DATA_DTYPES:
        raise ValueError(f"dtype must be one of {DATA_DTYPES}, got {dtype!r}")
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    if block_rows is not None:
        block_rows = check_positive_int("block_rows", block_rows)
    if y is None:
        raise ValueError("y must be given (a 1-D array of labels, one per row of X)")
    local_rows = len(X)
    n = local_rows if n is None else check_positive_int("n", n)
    row_offset = int(check_nonnegative("row_offset", row_offset))
    if len(y) != local_rows:
        raise ValueError(f"X and y must have the same number of rows, got {local_rows} and {len(y)}")
    if np.ndim(X) != 2:
        raise ValueError(f"X must be a 2-D array, got shape {np.shape(X)}")
    if row_offset + local_rows > n or local_rows == 0:
        raise ValueError(f"rows [row_offset, row_offset + len(X)) = [{row_offset}, {row_offset + local_rows}) "
                         f"must be non-empty and lie in [0, n = {n})")
    d = int(np.shape(X)[1])
    R = axis_size(mesh, ROWS)
    m = -(-n // R)
    sharding = NamedSharding(mesh, P(ROWS, None))
    store = storage_dtype(dtype)
    if block_rows is None:
        rule = row_block_rule(m, d, store, mesh.devices.flat[0])
        block_rows, block_rule = int(rule["block_rows"]), "default: " + rule["rule"]
    else:
        block_rule = "given by the caller"

    placed: dict[int, tuple] = {}
    message = ""
    try:
        for device, index in sharding.addressable_devices_indices_map((m * R, d)).items():
            shard = (index[0].start or 0) // m
            start, stop = row_shard_range(n, mesh, shard)
            if shard not in placed:
                if start < row_offset or stop > row_offset + local_rows:
                    raise ValueError(
                        f"this process holds rows [{row_offset}, {row_offset + local_rows}) but its device "
                        f"{device} needs rows [{start}, {stop}); see dp_infer.parallel.distributed.process_row_range")
                bx = jnp.zeros((m, d), store, device=device)
                by = jnp.zeros((m,), jnp.float32, device=device)
                for s in range(start, stop, INGEST_ROWS):
                    e = min(s + INGEST_ROWS, stop)
                    Xs, ys = _check_chunk(loss, X[s - row_offset:e - row_offset], y[s - row_offset:e - row_offset],
                                          dtype, rounding, f"rows [{s}, {e})")
                    bx = _write_rows(bx, jax.device_put(Xs, device), s - start)
                    by = _write_rows(by, jax.device_put(ys, device), s - start)
                bw = ((jnp.arange(m, device=device) + shard * m) < n).astype(jnp.float32)
                placed[shard] = (bx, by, bw)
    except ValueError as e:
        message = str(e)
    _agree(not message, message)

    bufs = {"X": [], "y": [], "w": []}
    for device, index in sharding.addressable_devices_indices_map((m * R, d)).items():
        bx, by, bw = placed[(index[0].start or 0) // m]
        bufs["X"].append(jax.device_put(bx, device))
        bufs["y"].append(jax.device_put(by, device))
        bufs["w"].append(jax.device_put(bw, device))
    rows_sharding = NamedSharding(mesh, P(ROWS))
    Xg = jax.make_array_from_single_device_arrays((m * R, d), sharding, bufs["X"])
    yg = jax.make_array_from_single_device_arrays((m * R,), rows_sharding, bufs["y"])
    wg = jax.make_array_from_single_device_arrays((m * R,), rows_sharding, bufs["w"])
    return ShardedRows(Xg, yg, wg, n, mesh, block_rows, dtype, rounding, block_rule,
                       checked=_RowChecks(str(loss.name), float(loss.row_norm), loss.label_check))


def row_mean(data: ShardedRows, local_sum_and_grad, num_args: int):
    """``mean(theta, *args)``: ``(1/n) sum_i`` over the placed rows, from ``local_sum_and_grad(theta,
    *args) -> (value, gradient)`` summed over one device's rows (``args``: ``num_args`` arrays
    row-sharded like the data). One ``psum`` over ``"rows"`` per evaluation (none on a mesh that
    splits chains only: every device holds all the rows, and XLA's partitioner refuses a manual psum
    over an axis of size 1 under chain-sharded vmap); the gradient comes from the same pass through a
    ``custom_vjp``, so reverse mode never goes through the collective."""
    n = data.n
    if data.row_shards == 1:
        summed = local_sum_and_grad
    else:
        def local(theta, *args):
            # theta as a per-device value: the gradient is this device's sum only (taken of a
            # replicated theta, autodiff would already psum it across "rows")
            v, g = local_sum_and_grad(lax.pcast(theta, (ROWS,), to="varying"), *args)
            return lax.psum(v, ROWS), lax.psum(g, ROWS)

        summed = jax.shard_map(local, mesh=data.mesh, in_specs=(P(),) + (P(ROWS),) * num_args,
                               out_specs=(P(), P()), axis_names={ROWS})

    @jax.custom_vjp
    def mean(theta, *args):
        return summed(theta, *args)[0] / n

    def fwd(theta, *args):
        v, g = summed(theta, *args)
        return v / n, g / n

    def bwd(g, ct):
        return (ct * g,) + (None,) * num_args

    mean.defvjp(fwd, bwd)
    return mean


@dataclass(frozen=True)
class ShardedPotential:
    """``U(theta, X, y, w)`` on row-sharded data (see the module docstring); the data are
    arguments (pass ``*data.args()``), the constants are those of
    :class:`~dp_infer.potentials.GibbsPotential` for the same loss, n, beta, lam."""

    loss: PerExampleLoss
    data: ShardedRows
    beta: float
    lam: float = 0.0
    theta0: jax.Array | None = None

    def __post_init__(self):
        if not isinstance(self.data, ShardedRows):
            raise ValueError(f"data must be a dp_infer.parallel.sharding.ShardedRows, got {type(self.data).__name__}")
        check_placed_rows(self.loss, self.data)
        check_positive("beta", self.beta)
        check_nonnegative("lam", self.lam)
        loss, B = self.loss, self.data.block_rows

        def local_sum_and_grad(theta, X, y, w):
            return blocked_loss_sum_and_grad(loss.example, theta, X, y, w, block_rows=B, clip_norm=loss.clip_norm)

        mean_loss = row_mean(self.data, local_sum_and_grad, 3)
        object.__setattr__(self, "_mean_loss", mean_loss)

    @property
    def n(self) -> int:
        return self.data.n

    @property
    def dim(self) -> int:
        return self.loss.num_params(self.data.num_features)

    def args(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The data arguments ``(X, y, weight)`` to pass after theta."""
        return self.data.args()

    def data_loss(self, theta, X, y, w):
        """L(theta; D), the mean (possibly clipped-gradient) loss over the n real rows."""
        return self._mean_loss(theta, X, y, w)

    def __call__(self, theta, X, y, w):
        u = self.beta * self.data_loss(theta, X, y, w)
        if self.lam:
            t0 = 0.0 if self.theta0 is None else self.theta0
            u = u + 0.5 * self.lam * jnp.sum((theta - t0) ** 2)
        return u

    def loss_sensitivity(self) -> float:
        return self.loss.constants.grad_diff / self.n

    def gradient_sensitivity(self) -> float:
        return self.beta * self.loss_sensitivity()

    def chain_method(self, num_chains: int, requested: str = "vectorized") -> str:
        """:meth:`ShardedRows.chain_method` of the data."""
        return self.data.chain_method(num_chains, requested)

    def place_chains(self, init):
        """:meth:`ShardedRows.place_chains` of the data."""
        return self.data.place_chains(init)

    def describe(self) -> dict:
        return {"kind": "gibbs", "beta": self.beta, "lam": self.lam, "psi": None, "n": self.n, "dim": self.dim,
                "loss": self.loss.describe(), "gradient_sensitivity": self.gradient_sensitivity(),
                "placement": self.data.describe()}
