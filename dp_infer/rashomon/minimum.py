"""L*: the certified minimum of the empirical loss (computed on PRIVATE data, never released)
and the threshold base the sampler uses, ``b - L*_glob <= tol`` on every dataset."""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from scipy import optimize

from .._validation import check_positive, check_positive_int
from ..domains import Box, Domain, Euclidean, L2Ball
from ..losses import PerExampleLoss
from .models import LinearModelClass


@dataclass(frozen=True)
class RashomonMinimum:
    """Minimum of L over the domain (computed on PRIVATE data: never release it unaccounted).

    ``tol``: certified upper bound on ``value - L*_glob`` (L*_glob = infimum of L over all of
    R^p, which the sqrt(2 M psi) argument needs); ``inf`` when no certificate exists.
    ``constrained_gap``: certified bound on ``value - min_C L`` (first-order / Frank-Wolfe gap
    for a bounded domain, ||g||^2/(2m) unconstrained). ``grad_norm``: |grad L| at ``theta``.
    """

    value: float
    theta: np.ndarray
    tol: float
    constrained_gap: float
    grad_norm: float
    method: str
    converged: bool


def _value_and_grad64(loss, X, y):
    Xj, yj = jnp.asarray(X, dtype=jnp.float64), jnp.asarray(y, dtype=jnp.float64)
    f = jax.jit(jax.value_and_grad(lambda t: loss.mean(t, Xj, yj)))

    def fun(t):
        v, g = f(jnp.asarray(t, dtype=jnp.float64))
        return float(v), np.asarray(g, dtype=np.float64)

    return fun


def _project_ball(x, domain: L2Ball):
    d = x - domain.center
    nrm = np.linalg.norm(d)
    return x if nrm <= domain.radius else domain.center + d * (domain.radius / nrm)


def rashomon_minimum(loss: PerExampleLoss, X, y, domain: Domain | None = None, *,
                     tol: float = 1e-10, maxiter: int = 20000) -> RashomonMinimum:
    """Exact (certified) minimum of the empirical loss over ``domain`` in float64.

    Euclidean / None: L-BFGS; Box: L-BFGS-B with bounds; L2Ball: accelerated projected gradient
    (FISTA with restart, step 1/M from the loss's declared smoothness) until the Frank-Wolfe gap
    is below ``tol``. ``domain=None`` uses ``loss.domain``. ``loss`` may be a
    :func:`~dp_infer.rashomon.linear_model` (rows then without the intercept column). Reads
    private data (NOT private):
    the result is meant for the sampler's threshold only.
    """
    if isinstance(loss, LinearModelClass):  # a model class: rows without the intercept column
        X = loss.design(X, "X")
        y = loss.check_labels(y, X.shape[0], "y")
        loss = loss.loss
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer.losses.PerExampleLoss or a linear_model, got {type(loss).__name__}")
    tol = check_positive("tol", tol)
    maxiter = check_positive_int("maxiter", maxiter)
    X, y = loss.check_data(X, y)
    domain = domain if domain is not None else loss.domain
    d = loss.num_params(X.shape[1])
    if domain is not None and domain.dim != d:
        raise ValueError(f"domain.dim = {domain.dim} does not match the parameter dimension {d}")
    m = float(loss.constants.strong_convexity)
    with jax.enable_x64(True):
        fun = _value_and_grad64(loss, X, y)
        opts = {"maxiter": maxiter, "gtol": min(tol, 1e-8), "ftol": 1e-15}
        if domain is None or isinstance(domain, Euclidean):
            res = optimize.minimize(fun, np.zeros(d), jac=True, method="L-BFGS-B", options=opts)
            theta, method, conv = res.x, "lbfgs", bool(res.success)
        elif isinstance(domain, Box):
            x0 = np.asarray(domain.default_init(), dtype=np.float64)
            res = optimize.minimize(fun, x0, jac=True, method="L-BFGS-B",
                                    bounds=list(zip(domain.lower, domain.upper)), options=opts)
            theta, method, conv = res.x, "lbfgsb_box", bool(res.success)
        elif isinstance(domain, L2Ball):
            M = loss.constants.smoothness
            if M is None:
                raise ValueError("the loss declares no smoothness M: the projected-gradient solver "
                                 "on an L2Ball needs a step 1/M")
            x = np.asarray(domain.center, dtype=np.float64).copy()
            z, tk, fx = x.copy(), 1.0, fun(x)[0]
            conv = False
            for _ in range(maxiter):
                _, gz = fun(z)
                x_new = _project_ball(z - gz / M, domain)
                f_new, g_new = fun(x_new)
                if f_new > fx:  # adaptive restart
                    z, tk = x.copy(), 1.0
                    continue
                t_new = 0.5 * (1 + math.sqrt(1 + 4 * tk * tk))
                z = x_new + ((tk - 1) / t_new) * (x_new - x)
                x, fx, tk = x_new, f_new, t_new
                fw = float(g_new @ (x - domain.center) + domain.radius * np.linalg.norm(g_new))
                if fw <= tol:
                    conv = True
                    break
            theta, method = x, "fista_ball"
        else:
            raise ValueError(f"domain must be None, Euclidean, Box or L2Ball, got {type(domain).__name__}")
        value, g = fun(theta)
    gn = float(np.linalg.norm(g))
    glob = gn * gn / (2 * m) if m > 0 else math.inf
    if domain is None or isinstance(domain, Euclidean):
        cgap = glob
    elif isinstance(domain, Box):
        cgap = float(np.sum(g * theta) - np.sum(np.minimum(g * domain.lower, g * domain.upper)))
    else:
        cgap = float(g @ (theta - domain.center) + domain.radius * gn)
    return RashomonMinimum(value=float(value), theta=np.asarray(theta), tol=float(glob),
                           constrained_gap=max(cgap, 0.0), grad_norm=gn, method=method, converged=conv)


def threshold_base(minimum: RashomonMinimum, strong_convexity: float, tol: float, *,
                   shift: bool = False) -> float:
    """The threshold base ``b`` with ``b - L*_glob <= tol`` (or ``<= 0`` with ``shift``) on every
    dataset, without a data-dependent branch: ``b = L_hat* - max(0, cert - tol)`` with
    ``cert = |grad L(theta_hat)|^2 / (2 m)`` (``b = L_hat* - max(cert, tol)`` with ``shift``).
    Computed on PRIVATE data: it enters only the sampler's threshold, never a report.
    Needs ``strong_convexity`` m > 0 (without it the sensitivity does not use the base)."""
    if strong_convexity <= 0:
        return minimum.value
    cert = minimum.grad_norm ** 2 / (2.0 * strong_convexity)
    return minimum.value - (max(cert, tol) if shift else max(0.0, cert - tol))
