"""Preconditioned unadjusted Langevin: ``theta <- theta - h P grad U + sqrt(2h) P^(1/2) xi``.

``P`` is fixed before sampling (:mod:`dp_infer.routes.preconditioning`), positive definite, with a
Cholesky factor ``C`` (``P = C C^T``). The chain is exactly plain Langevin on the
reparametrised potential ``V(phi) = U(C phi)`` with ``theta = C phi``:
``phi - h grad V(phi) + sqrt(2h) xi = C^-1 (theta - h C C^T grad U(theta)) + sqrt(2h) xi``,
so every kernel of :mod:`dp_infer.kernels` (overdamped or underdamped) becomes preconditioned by
running it on ``V`` (:func:`reparametrise`) and mapping its draws back (post-processing). There is
one step here, not two: :func:`build_kernel` runs the Langevin kernel's own step
(:func:`dp_infer.kernels.langevin.build_kernel`, the one NumPyro's ``Langevin`` runs in the posterior
mode) on ``V`` and carries ``theta = C phi`` beside ``phi``, so the audit of this kernel
(:mod:`dp_infer.audit.preconditioned`) checks the chain the product runs.
Privacy: the step is a Gaussian mechanism with covariance ``2 h P``, whose sensitivity is measured
in the P metric (:mod:`dp_infer.privacy.metric_sensitivity`); the path accountant then applies
unchanged with ``Delta = Delta_P``.

Oracle (tests): on a Gaussian target ``U = theta^T A theta / 2`` the stationary covariance is
``C (B (I - h B / 2))^-1 C^T`` with ``B = C^T A C``.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_finite_array, check_positive
from . import langevin
from ._common import SamplingAlgorithm, logdensity_to_grad, plan_parameters

__all__ = ["Preconditioner", "PreconditionedState", "reparametrise", "init", "build_kernel", "as_top_level_api",
           "stationary_covariance"]


class Preconditioner(NamedTuple):
    """``P`` and its lower Cholesky factor ``chol`` (``P = chol chol^T``), float64 host arrays."""

    matrix: np.ndarray
    chol: np.ndarray

    @classmethod
    def from_matrix(cls, P) -> "Preconditioner":
        P = check_finite_array("P", P, ndim=2)
        if P.shape[0] != P.shape[1]:
            raise ValueError(f"P must be square, got shape {P.shape}")
        P = 0.5 * (P + P.T)
        try:
            C = np.linalg.cholesky(P)
        except np.linalg.LinAlgError:
            raise ValueError("P must be positive definite") from None
        return cls(P, C)

    @classmethod
    def from_precision(cls, A) -> "Preconditioner":
        """``P = A^-1`` for a symmetric positive definite precision-like matrix ``A``."""
        A = check_finite_array("A", A, ndim=2)
        A = 0.5 * (A + A.T)
        try:
            L = np.linalg.cholesky(A)
        except np.linalg.LinAlgError:
            raise ValueError("the precision matrix must be positive definite") from None
        Linv = np.linalg.solve(L, np.eye(A.shape[0]))  # A^-1 = L^-T L^-1
        return cls.from_matrix(Linv.T @ Linv)

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[0])


def reparametrise(potential_fn: Callable, pre: Preconditioner):
    """``(V, to_theta, to_phi)`` with ``V(phi) = U(C phi)`` on flat vectors."""
    C = jnp.asarray(pre.chol, dtype=jnp.float32)
    Cinv = jnp.asarray(np.linalg.inv(pre.chol), dtype=jnp.float32)

    if callable(getattr(potential_fn, "reparametrised", None)):
        V = potential_fn.reparametrised(pre.chol)  # a GibbsPotential: X C formed once
    else:
        def V(phi):
            return potential_fn(C @ phi)

    def to_theta(phi):
        return jnp.einsum("ij,...j->...i", C, phi)

    def to_phi(theta):
        return jnp.einsum("ij,...j->...i", Cinv, theta)

    return V, to_theta, to_phi


class PreconditionedState(NamedTuple):
    """The chain's own position ``phi`` (the Langevin step's) and the released ``theta = C phi``."""

    i: jax.Array
    theta: jax.Array
    phi: jax.Array


class PreconditionedInfo(NamedTuple):
    """Theta-only public fields of a transition."""

    diverging: jax.Array


def init(position, pre: Preconditioner) -> PreconditionedState:
    """The state at ``theta = position`` (chosen without looking at private data), ``phi = C^-1 theta``."""
    theta = jnp.asarray(position)
    theta = theta if jnp.issubdtype(theta.dtype, jnp.floating) else theta.astype(jnp.result_type(float))
    Cinv = jnp.asarray(np.linalg.inv(pre.chol), dtype=theta.dtype)
    return PreconditionedState(jnp.zeros((), jnp.int32), theta, Cinv @ theta)


def build_kernel(grad_fn: Callable, step_size: float, pre: Preconditioner) -> Callable:
    """``step(rng_key, state) -> (state, info)`` for preconditioned ULA, ``theta <- theta - h P grad U
    + sqrt(2h) C xi``.

    The step is the Langevin kernel's (:func:`dp_infer.kernels.langevin.build_kernel`) on the
    reparametrised potential's gradient ``grad V(phi) = C^T grad U(C phi)``; ``theta = C phi`` is carried
    beside ``phi`` (start from :func:`init`).
    """
    h = check_positive("step_size", step_size)
    C = jnp.asarray(pre.chol, dtype=jnp.float32)
    core = langevin.build_kernel(lambda phi: C.T @ grad_fn(C @ phi), h)

    def step(rng_key, state: PreconditionedState):
        inner, _ = core(rng_key, langevin.LangevinState(state.i, state.phi, jnp.zeros((), bool), None))
        theta = C @ inner.z
        return PreconditionedState(inner.i, theta, inner.z), PreconditionedInfo(~jnp.all(jnp.isfinite(theta)))

    return step


def as_top_level_api(logdensity_fn: Callable, step_size: float | None = None,
                     preconditioner: Preconditioner | None = None, *, plan=None) -> SamplingAlgorithm:
    """BlackJAX-style preconditioned ULA: ``algo.init(position, rng_key=None)`` and
    ``algo.step(rng_key, state) -> (state, info)`` (``logdensity_fn`` is ``-U``). ``plan`` (for
    ``kernel="langevin"``) supplies the step size; the :class:`Preconditioner` is required (for a
    posterior-mode plan: ``Preconditioner`` built from ``posterior_plan.preconditioner_chol(plan)``)."""
    if not isinstance(preconditioner, Preconditioner):
        raise ValueError(f"preconditioner must be a dp_infer Preconditioner, got {type(preconditioner).__name__}")
    h, _ = plan_parameters(plan, "langevin", step_size)
    step = build_kernel(logdensity_to_grad(logdensity_fn), h, preconditioner)

    def init_fn(position, rng_key=None) -> PreconditionedState:
        return init(position, preconditioner)

    return SamplingAlgorithm(init_fn, step)


def stationary_covariance(A, pre: Preconditioner, step_size: float) -> np.ndarray:
    """Exact stationary covariance of preconditioned ULA on ``U = theta^T A theta / 2``."""
    A = check_finite_array("A", A, ndim=2)
    h = check_positive("step_size", step_size)
    C = pre.chol
    B = C.T @ A @ C
    cov_phi = np.linalg.inv(B @ (np.eye(B.shape[0]) - 0.5 * h * B))
    return C @ cov_phi @ C.T
