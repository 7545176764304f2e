"""A NumPyro model's scores' second moment ``J`` from public feature rows, with labels drawn from the model.

The interval release of a model run (:mod:`dp_infer.model.score_release`) needs ``J``, the clipped scores'
second moment, at each point of its path: it stands in for the curvature (the information identity) and
sets the sampling variance ``J^-1 / n``. Released from the private rows it costs a ``d x d`` Gaussian
release whose noise grows like ``C^2 d^1.5 / n`` (on the Adult model, ``d = 100``, its signal to noise is
0.17 at eps = 1: no release). With feature rows declared public (``X_public``: drawn from the private
rows' population, their labels unknown or unused), ``J`` has a free, model-based stand-in at any public
point ``phi`` (theta = ``s`` phi):

    J_pub(phi) = (1 / (m R)) sum_j sum_r c(g(phi; x_j, y_jr)) c(g(phi; x_j, y_jr))^T,
    y_jr ~ p(y | x_j, theta = s phi)     (the model's own likelihood, R = label_draws per row)

with ``g`` the per-example score in the whitened coordinates and ``c`` the run's clip. For a correctly
specified model and a clip that rarely binds, the expectation over ``y`` is the Fisher information at
``phi`` per row, averaged over the public rows' features: what ``J`` estimates from the private rows at
the truth. The labels are drawn with a fixed public key (:data:`LABEL_KEY`), so the same point and rows
give the same matrix: post-processing of public inputs only, no privacy cost.

Assumptions (stated with the intervals): the public rows' features (and per-row model arguments) follow
the private rows' distribution; the model is correctly specified (``J_pub`` is the model's expected
information, not the rows' empirical second moment: under misspecification the interval is the
model-based one, not a sandwich); the Monte-Carlo error of ``R m`` label draws is small against the
release's noise (``m R`` in the tens of thousands: relative error about ``1 / sqrt(m R)`` per entry).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_positive
from ..routes.newton_release import check_public_rows
from .score_release import clipped_scores, schedule, score_function

__all__ = ["PublicSecondMoment", "public_second_moment", "LABEL_KEY", "MIN_LABEL_DRAWS", "TARGET_DRAWS",
           "check_public_model_rows"]

#: the fixed public key the labels are drawn with (a public constant: the matrix is reproducible)
LABEL_KEY = 20261201

#: at least this many labels per public row
MIN_LABEL_DRAWS = 4

#: labels per row are raised until the public rows times the draws reach this many scores
TARGET_DRAWS = 32768


@dataclass(frozen=True)
class PublicSecondMoment:
    """``J_pub(phi)`` (module doc) at any whitened point ``phi``: call it. ``rows``: the public rows'
    count; ``sha256``: their digest (the report names the rows used); ``label_draws``: labels per row."""

    example_fn: Callable
    sampler: Callable
    rows_packed: np.ndarray
    scales: np.ndarray
    clip_norm: float
    label_draws: int
    sha256: str

    @property
    def rows(self) -> int:
        return int(self.rows_packed.shape[0])

    @cached_property
    def _programs(self):
        """The label draw and the per-example scores, compiled once per instance (a release calls it at each
        point of its path)."""
        return jax.jit(jax.vmap(self.sampler, in_axes=(None, 0, 0))), score_function(self.example_fn)

    def __call__(self, phi) -> np.ndarray:
        phi = np.asarray(phi, dtype=np.float64)
        theta = jnp.asarray(self.scales * phi, dtype=jnp.result_type(float))
        X = jnp.asarray(self.rows_packed, dtype=jnp.result_type(float))
        draw, scores = self._programs
        d = phi.shape[0]
        total = np.zeros((d, d))
        for r in range(self.label_draws):
            keys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(LABEL_KEY), r), self.rows)
            y = draw(theta, X, keys)
            g = clipped_scores(self.example_fn, X, y, phi, clip_norm=self.clip_norm, scores=scores)
            total += g.T @ g
        J = total / (self.rows * self.label_draws)
        return 0.5 * (J + J.T)


def public_second_moment(example_fn, sampler, rows_packed, scales, *, clip_norm: float) -> PublicSecondMoment:
    """The module doc's ``J_pub`` for the whitened per-example nll ``example_fn(phi, x, y)``, the model's
    label sampler ``sampler(theta, x, key)`` (:meth:`dp_infer.model.bridge.ModelLoss.observation_sampler`),
    the public rows packed as the private ones (:meth:`~dp_infer.model.bridge.ModelLoss.pack_rows`) and the
    prior scales ``s``. Labels per row: enough for :data:`TARGET_DRAWS` scores, at least
    :data:`MIN_LABEL_DRAWS`."""
    C = check_positive("clip_norm", clip_norm)
    Xp = np.ascontiguousarray(np.asarray(rows_packed, dtype=np.float64))
    draws = max(MIN_LABEL_DRAWS, math.ceil(TARGET_DRAWS / Xp.shape[0]))
    return PublicSecondMoment(example_fn, sampler, Xp, np.asarray(scales, dtype=np.float64), C, draws,
                              hashlib.sha256(Xp.tobytes()).hexdigest())


def check_public_model_rows(ml, interval_curvature: str, X_public, public_model_kwargs,
                            index_ranges) -> np.ndarray | None:
    """The public rows packed as the model ``ml`` (a :class:`~dp_infer.model.bridge.ModelLoss`) reads them
    (``None`` with ``interval_curvature="private"``), or a one-line ``ValueError`` naming the parameter
    (before anything is charged): the source by name, ``X_public``
    (:func:`~dp_infer.routes.newton_release.check_public_rows`), the public rows' per-row model arguments
    (the model's, for each public row) and a model with one observed site."""
    schedule(interval_curvature)
    if interval_curvature == "private":
        if X_public is not None or public_model_kwargs is not None:
            raise ValueError("X_public and public_model_kwargs are read only with interval_curvature='public'")
        return None
    Xp = check_public_rows(X_public, ml.num_features)
    ml.observation_sampler()  # refuses a model without exactly one observed site
    if ml.row_args and public_model_kwargs is None:
        raise ValueError(f"public_model_kwargs: the model has per-row arguments {[r.name for r in ml.row_args]}; give "
                         "them for the public rows too (interval_curvature='public')")
    try:
        return ml.pack_rows(Xp, public_model_kwargs, index_ranges)
    except ValueError as e:
        raise ValueError(f"public_model_kwargs: {e}") from None
