"""Non-private reference fits (for comparison only: they read the data without any privacy)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize

from ..losses import PerExampleLoss

__all__ = ["minimize_loss", "accuracy"]


def minimize_loss(loss: PerExampleLoss, X, y, *, l2: float = 1e-6, x0=None, tol: float = 1e-10):
    """argmin_theta L(theta; D) + (l2/2)||theta||^2 by L-BFGS in float64 (NOT private).

    Returns (theta, value of L at theta, scipy result). Used as the non-private reference and
    by the Rashomon module to compute L*.
    """
    X64 = np.asarray(X, dtype=np.float64)
    y64 = np.asarray(y, dtype=np.float64)
    d = loss.num_params(X64.shape[1])
    with jax.enable_x64(True):
        Xj, yj = jnp.asarray(X64), jnp.asarray(y64)
        f = jax.jit(jax.value_and_grad(lambda t: loss.mean(t, Xj, yj) + 0.5 * l2 * jnp.sum(t * t)))

        def fun(t):
            v, g = f(jnp.asarray(t))
            return float(v), np.asarray(g, dtype=np.float64)

        start = np.zeros(d) if x0 is None else np.asarray(x0, dtype=np.float64)
        res = minimize(fun, start, jac=True, method="L-BFGS-B",
                       options={"maxiter": 10000, "gtol": tol, "ftol": 1e-15})
        value = float(loss.mean(jnp.asarray(res.x), Xj, yj))
    return res.x, value, res


def accuracy(theta, X, y) -> float:
    """Share of rows where the linear score's sign matches the 0/1 label."""
    return float(np.mean(((np.asarray(X) @ np.asarray(theta)) > 0) == (np.asarray(y) > 0.5)))
