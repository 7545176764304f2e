"""Gibbs and Rashomon-thresholded potentials, as JAX functions and as NumPyro models.

A potential is U(theta) = -log density (up to a constant), a plain JAX function of a flat
parameter vector, usable as NumPyro's ``potential_fn``:

* Gibbs: ``U(theta) = beta * L(theta; D) + (lam / 2) ||theta - theta0||^2``.
* Rashomon-thresholded: ``U(theta) = beta * max{L(theta; D), L* + psi}`` (+ the same optional
  quadratic term), flat on the Rashomon set {L <= L* + psi}.

Privacy-relevant quantities of a potential (data independent): the gradient sensitivity of
U is ``beta * G / n`` for Gibbs and ``beta * (G / n + sqrt(2 M psi))`` for the thresholded loss
(seed-001 digest §4.3: the paper's eq. (9) constant is wrong as written). The regulariser
``lam`` and ``theta0`` are data independent and add nothing to the sensitivity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from ._validation import check_finite_array, check_nonnegative, check_positive, check_positive_int
from .losses import LossConstants, PerExampleLoss

__all__ = ["GibbsPotential", "gibbs_potential", "rashomon_potential", "gibbs_model",
           "thresholded_sensitivity"]


def thresholded_sensitivity(constants: LossConstants, n: int, psi: float, tol: float = 0.0) -> float:
    """sup_theta ||grad max{L_D, b_D + psi} - grad max{L_D', b_D' + psi}|| from declared constants.

    ``b_D`` is the threshold base the sampler uses; ``tol`` is a DECLARED bound on
    ``b_D - L*_glob(D)`` (global unconstrained infimum; digest §9 item 18) that the caller
    enforces for every dataset (:func:`dp_infer.rashomon.sample_rashomon` lowers the base by
    any excess of its certificate over ``tol``, so no data-dependent branch is needed).
    With a declared smoothness M and strong convexity m > 0 (the certificate needs it):
    ``G/n + min(L, sqrt(2 M (psi + tol)))`` (digest §4.3: at a point active for D only,
    ``|grad L_D| <= G/n + |grad L_D'| <= G/n + sqrt(2 M (psi + tol))``). Otherwise ``G/n + L``,
    valid for any threshold. ``L`` is the loss's Lipschitz constant on the sampler's domain.
    """
    if not isinstance(constants, LossConstants):
        raise ValueError(f"constants must be a dp_infer.losses.LossConstants, got {type(constants).__name__}")
    n = check_positive_int("n", n)
    psi = check_nonnegative("psi", psi)
    tol = check_nonnegative("tol", tol)
    base = constants.grad_diff / n
    lip = constants.lipschitz
    if constants.smoothness is None or constants.strong_convexity <= 0:
        inner = lip
    else:
        inner = min(lip, math.sqrt(2.0 * constants.smoothness * (psi + tol)))
    if not math.isfinite(base + inner):
        raise ValueError(
            f"the thresholded loss has no finite gradient sensitivity (G/n = {base:g} plus {inner:g} is "
            "not a finite float): without strong convexity "
            "(m > 0, which certifies L*) and a declared smoothness M, the bound is G/n + L and the "
            "loss declares L = inf; use a bounded domain or an L2 regulariser (l2 > 0)")
    return base + inner


@dataclass(frozen=True)
class GibbsPotential:
    """U(theta) = beta * loss'(theta; D) + (lam/2)||theta - theta0||^2 with its constants.

    ``psi is None`` gives the plain Gibbs potential; otherwise the thresholded loss
    ``max{L, L_star + psi}`` is used. Call it like a function: ``U(theta)``.
    """

    loss: PerExampleLoss
    X: jax.Array
    y: jax.Array
    beta: float
    lam: float = 0.0
    theta0: jax.Array | None = None
    psi: float | None = None
    L_star: float | None = None
    prior_potential: Callable[[jax.Array], jax.Array] | None = None
    L_star_tol: float = 0.0

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def dim(self) -> int:
        return self.loss.num_params(int(self.X.shape[1]))

    def data_loss(self, theta):
        """The (possibly thresholded) empirical loss, without beta."""
        return self._thresholded(self.loss.mean(theta, self.X, self.y))

    def _thresholded(self, L):
        return L if self.psi is None else jnp.maximum(L, self.L_star + self.psi)

    def __call__(self, theta):
        return self._with_data_free_terms(self.beta * self.data_loss(theta), theta)

    def _with_data_free_terms(self, u, theta):
        if self.lam:
            t0 = 0.0 if self.theta0 is None else self.theta0
            u = u + 0.5 * self.lam * jnp.sum((theta - t0) ** 2)
        if self.prior_potential is not None:
            u = u + self.prior_potential(theta)
        return u

    def reparametrised(self, C) -> Callable[[jax.Array], jax.Array]:
        """``V(phi) = U(C phi)`` for a fixed (public) matrix ``C`` of shape (dim, dim).

        The same function as ``lambda phi: U(C @ phi)``. For a generalised linear loss
        (``loss.index_fn``, unclipped) ``X C`` is formed once here, so a step costs one product
        with the data instead of re-forming ``X C`` (which XLA may do when it reassociates
        ``X @ (C @ phi)``); the thresholded form, the L2 terms and the prior are kept as in ``U``.
        Only the float rounding differs.
        """
        C = jnp.asarray(C, dtype=jnp.promote_types(self.X.dtype, jnp.float32))  # never below float32
        if C.shape != (self.dim, self.dim):
            raise ValueError(f"C must have shape ({self.dim}, {self.dim}), got {tuple(C.shape)}")
        loss = self.loss
        if loss.index_fn is None or loss.clip_norm is not None:
            return lambda phi: self(C @ phi)
        XC = self.X @ C

        def V(phi):
            theta = C @ phi
            L = self._thresholded(jnp.mean(loss.index_losses(XC @ phi, self.y, theta)))
            return self._with_data_free_terms(self.beta * L, theta)

        return V

    # --- data-independent constants ---------------------------------------------------------
    def loss_sensitivity(self) -> float:
        """sup_theta ||grad loss'(theta; D) - grad loss'(theta; D')|| (without beta)."""
        c = self.loss.constants
        if self.psi is None:
            return c.grad_diff / self.n
        return thresholded_sensitivity(c, self.n, self.psi, self.L_star_tol)

    def gradient_sensitivity(self) -> float:
        """Delta_U = sup_theta ||grad U_D - grad U_D'|| = beta * loss_sensitivity(), in real arithmetic; a plan
        for a float32 chain charges it times ``1 + float32_gradient_margin(n)`` (dp_infer.privacy.float32_margin)."""
        return self.beta * self.loss_sensitivity()

    def strong_convexity(self) -> float:
        """A lower bound m_U on the Hessian of U (from the loss's declared m and lam)."""
        return self.beta * self.loss.constants.strong_convexity + self.lam

    def smoothness(self) -> float | None:
        """An upper bound M_U on the Hessian of U (None if the loss has no declared M)."""
        M = self.loss.constants.smoothness
        return None if M is None else self.beta * M + self.lam

    def describe(self) -> dict:
        return {
            "kind": "gibbs" if self.psi is None else "rashomon",
            "beta": self.beta,
            "lam": self.lam,
            "psi": self.psi,
            "n": self.n,
            "dim": self.dim,
            "loss": self.loss.describe(),
            "gradient_sensitivity": self.gradient_sensitivity(),
        }


def _prepare(loss: PerExampleLoss, X, y, beta, lam, theta0):
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss, got {type(loss).__name__}")
    X, y = loss.check_data(X, y)
    beta = check_positive("beta", beta)
    lam = check_nonnegative("lam", lam)
    d = loss.num_params(X.shape[1])
    if theta0 is not None:
        theta0 = check_finite_array("theta0", theta0, ndim=1)
        if theta0.shape != (d,):
            raise ValueError(f"theta0 must have shape ({d},), got {theta0.shape}")
        theta0 = jnp.asarray(theta0)
    return jnp.asarray(X), jnp.asarray(y), beta, lam, theta0


def gibbs_potential(loss: PerExampleLoss, X, y, beta: float, lam: float = 0.0,
                    theta0=None) -> GibbsPotential:
    """Gibbs potential U(theta) = beta * L(theta; D) + (lam/2)||theta - theta0||^2.

    ``beta`` is the inverse temperature (> 0); L is the *mean* loss, so beta = n gives the
    ordinary (untempered) posterior of a likelihood-based loss. Data are checked against the
    loss's declared bounds (bad rows raise; nothing is clipped here).
    """
    X, y, beta, lam, theta0 = _prepare(loss, X, y, beta, lam, theta0)
    return GibbsPotential(loss, X, y, beta, lam, theta0)


def rashomon_potential(loss: PerExampleLoss, X, y, beta: float, psi: float, L_star: float,
                       lam: float = 0.0, theta0=None, *, L_star_tol: float = 0.0) -> GibbsPotential:
    """Thresholded potential U(theta) = beta * max{L(theta; D), L_star + psi}.

    ``L_star`` is the threshold base (computed on the private data by
    :func:`dp_infer.rashomon.sample_rashomon`: never release it); ``L_star_tol`` is the declared
    bound on ``L_star - L*_glob`` that enters the gradient sensitivity
    (:func:`thresholded_sensitivity`). psi >= 0.
    """
    X, y, beta, lam, theta0 = _prepare(loss, X, y, beta, lam, theta0)
    psi = check_nonnegative("psi", psi)
    L_star = float(L_star)
    if not math.isfinite(L_star):
        raise ValueError(f"L_star must be a finite number, got {L_star!r}")
    return GibbsPotential(loss, X, y, beta, lam, theta0, psi=psi, L_star=L_star,
                          L_star_tol=check_nonnegative("L_star_tol", L_star_tol))


def gibbs_model(potential: GibbsPotential, prior: dist.Distribution | None = None,
                site: str = "theta") -> Callable[[], None]:
    """The potential as a NumPyro model: ``theta ~ prior``; ``factor(-beta * loss'(theta))``.

    With ``prior=None`` theta gets an improper flat prior and the (lam/2)||theta - theta0||^2
    term of the potential (if any) is kept as a factor, so the model's potential equals U.
    A user prior (a NumPyro distribution on R^dim) replaces that quadratic term: its gradient is
    data independent, so it adds nothing to the sensitivity.

    Sites: ``site`` (theta), the factor ``"gibbs_loss"`` (= -beta * loss'(theta)) and, with the
    flat prior and lam > 0, the factor ``"regulariser"`` (= -(lam/2)||theta - theta0||^2);
    NumPyro's ``log_likelihood`` (and ArviZ's log_likelihood group) reports both factors by name.
    """
    d = potential.dim

    def model():
        if prior is None:
            theta = numpyro.sample(site, dist.ImproperUniform(constraints.real_vector, (), (d,)))
            if potential.lam:
                t0 = 0.0 if potential.theta0 is None else potential.theta0
                numpyro.factor("regulariser", -0.5 * potential.lam * jnp.sum((theta - t0) ** 2))
        else:
            theta = numpyro.sample(site, prior)
        numpyro.factor("gibbs_loss", -potential.beta * potential.data_loss(theta))

    return model
