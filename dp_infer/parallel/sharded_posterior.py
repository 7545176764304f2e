"""The posterior mode's potential on row-sharded data: ``V(phi) = U(C phi)`` over a mesh.

The posterior mode (:mod:`dp_infer.infer.posterior`) runs its kernel on ``phi`` with ``theta = C phi``
(``P = C C^T``, the planned or an adapted metric). On a mesh (:mod:`dp_infer.parallel.sharding`) the
rows stay where :func:`~dp_infer.parallel.sharding.shard_rows` placed them and every device sums its
own rows; one ``psum`` over ``"rows"`` per evaluation, the gradient returned by a ``custom_vjp``
(reverse mode never goes through the collective): :func:`~dp_infer.parallel.sharding.row_mean`, as
:class:`ShardedPotential` uses it.

* **No clip**: ``V(phi) = beta mean_i l(C phi; x_i, y_i) + (C phi)' Lambda (C phi) / 2``, the
  :class:`~dp_infer.parallel.sharding.ShardedPotential` of the loss at ``theta = C phi``.
* **Gradients clipped in the metric** (:mod:`dp_infer.losses.metric_clip`): the rows in
  phi-coordinates ``X C`` and their levels ``a_i = tau / ||C^T x_i||`` are formed ONCE per metric,
  on the devices that hold the rows (row-sharded like X, replicated over ``"chains"``); then
  ``V(phi) = beta mean_i f(<x_i C, phi>, y_i, a_i) + prior``. Per evaluation the only temporaries
  are vectors of the local rows (no (rows x d) matrix of per-example gradients: the gradient is
  ``(X C)' (w * f')``).

Both are the functions :func:`dp_infer.losses.metric_clip.clipped_potential` and
:meth:`dp_infer.potentials.GibbsPotential.reparametrised` compute on one device (padding rows have
weight 0 and contribute exactly 0; only the order of the float additions changes), so the plan,
its event and the sensitivity ``2 tau / n`` do not depend on the mesh. The data are arguments of
the jitted sampling loop (:meth:`ShardedMetricPotential.args`), never closed-over constants.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .._validation import check_finite_array, check_positive
from ..losses import PerExampleLoss
from ..losses.metric_clip import clip_levels, clipped_link
from .sharding import ROWS, ShardedPotential, ShardedRows, check_placed_rows, row_mean

__all__ = ["ShardedMetricPotential", "sharded_second_moment"]


def sharded_second_moment(data: ShardedRows) -> tuple[np.ndarray, float]:
    """``(X'X, max_i ||x_i||^2)`` of the placed rows, summed where they live (float32 on the
    devices, returned as float64; padding rows are zero). NOT private: the input of
    :func:`dp_infer.releases.second_moment.private_second_moment_of_gram`, which adds the noise."""
    if not isinstance(data, ShardedRows):
        raise ValueError(f"data must be a dp_infer.parallel.sharding.ShardedRows, got {type(data).__name__}")

    @jax.jit
    def gram(X, w):
        Xf = X.astype(jnp.float32) * w[:, None]
        return Xf.T @ Xf, jnp.max(jnp.sum(Xf * Xf, axis=1))

    G, m = gram(data.X, data.weight)
    return np.asarray(G, dtype=np.float64), float(m)


def _rows_in_metric(data: ShardedRows, C: jax.Array, tau: float):
    """``(X C, a)`` placed like the rows (row-sharded, replicated over ``"chains"``)."""
    rows2 = NamedSharding(data.mesh, P(ROWS, None))
    rows1 = NamedSharding(data.mesh, P(ROWS))

    def form(X, C):
        XC = X.astype(jnp.float32) @ C
        return XC, clip_levels(XC, tau)

    XC, a = jax.jit(form, out_shardings=(rows2, rows1))(data.X, C)
    return XC, a


@dataclass(frozen=True)
class ShardedMetricPotential:
    """``V(phi, *args)`` of the posterior mode on row-sharded data (module docstring).

    ``C``: the metric's factor (d, d); ``tau``: the clip on ``||C^T g||`` (None: no clip);
    ``prior_precision``: Lambda (one per coordinate); ``description``: what the caller reports
    about the target (:meth:`describe` adds the placement). Call :meth:`args` for the data
    arguments to pass after ``phi`` (or ``theta`` for ``__call__``)."""

    loss: PerExampleLoss
    data: ShardedRows
    beta: float
    C: np.ndarray
    prior_precision: np.ndarray
    tau: float | None = None
    description: dict | None = None

    def __post_init__(self):
        if not isinstance(self.data, ShardedRows):
            raise ValueError(f"data must be a dp_infer.parallel.sharding.ShardedRows, got {type(self.data).__name__}")
        check_placed_rows(self.loss, self.data)  # placed by shard_rows, for this loss's labels and row norm
        check_positive("beta", self.beta)
        d = self.loss.num_params(self.data.num_features)
        C = check_finite_array("C", self.C, ndim=2)
        if C.shape != (d, d):
            raise ValueError(f"C must be ({d}, {d}) (the metric's factor), got {C.shape}")
        Cj = jnp.asarray(C, dtype=jnp.float32)
        lam = jnp.asarray(self.prior_precision, dtype=jnp.float32)
        b, loss = float(self.beta), self.loss

        def prior(theta):
            return 0.5 * jnp.sum(lam * theta * theta)

        if self.tau is None:
            base = ShardedPotential(loss, self.data, b)  # beta * mean loss (l2 included by the loss itself)
            args = self.data.args()

            def V(phi, X, y, w):
                theta = Cj @ phi
                return base(theta, X, y, w) + prior(theta)
        else:
            tau = check_positive("tau", self.tau)
            f = clipped_link(loss)
            XC, a = _rows_in_metric(self.data, Cj, tau)
            args = (XC, self.data.y, self.data.weight, a)

            def local_sum(phi, XC, y, w, a):
                v = f(XC @ phi, y, a)
                return jnp.sum(jnp.where(w > 0, v, jnp.zeros_like(v)))

            mean_link = row_mean(self.data, jax.value_and_grad(local_sum), 4)

            def V(phi, XC, y, w, a):
                theta = Cj @ phi
                u = b * mean_link(phi, XC, y, w, a) + prior(theta)
                # the loss's L2 term, unclipped (the same for every row), as clipped_potential adds it
                return u + 0.5 * loss.l2 * b * jnp.sum(theta * theta) if loss.l2 else u

        object.__setattr__(self, "_V", V)
        object.__setattr__(self, "_args", args)
        object.__setattr__(self, "_C", Cj)

    def args(self) -> tuple:
        """The data arguments to pass after ``phi``: the placed rows (and, with the clip, ``X C``
        and the levels), all row-sharded."""
        return self._args

    def V(self, phi, *args):
        """The potential in phi-coordinates (what the kernel runs on)."""
        return self._V(phi, *args)

    def __call__(self, theta, *args):
        """``U(theta) = V(C^-1 theta)``."""
        return self._V(jax.scipy.linalg.solve_triangular(self._C, theta, lower=True), *args)

    @property
    def n(self) -> int:
        return self.data.n

    def chain_method(self, num_chains: int, requested: str) -> str:
        """:meth:`ShardedRows.chain_method` of the data ('parallel' would pmap over the rows' devices)."""
        return self.data.chain_method(num_chains, requested)

    def place_chains(self, init):
        """:meth:`ShardedRows.place_chains` of the data."""
        return self.data.place_chains(init)

    def describe(self) -> dict:
        """``description`` (what the target is, from the caller) and the data's placement."""
        return {**(self.description or {}), "placement": self.data.describe()}
