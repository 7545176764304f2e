r"""Public-data-assisted DP mirror descent (PDA-DPMD; seed 004 ch. 4, Algorithm 1; digest §5.3)
and its baseline, DP gradient descent warm-started at the public minimiser.

Given public rows ``(X_public, y_public)`` (no privacy requirement, same distribution) and
private rows ``(X, y)``:

* mirror map ``Psi(theta) = mean public loss + (public_l2 / 2) |theta|^2`` (strictly convex);
* warm start ``theta_0 = argmin Psi`` (public data only: free);
* step t: ``g_t = mean_i clip(grad ell(theta_t; x_i, y_i), C)`` on the private rows, noise
  ``b_t ~ N(0, sigma^2 I)``, mirror step ``grad Psi(theta_{t+1}) = grad Psi(theta_t) - eta (g_t + b_t)``
  (unconstrained, so no Bregman projection);
* output the average of theta_1..theta_T (the thesis's output) or the last iterate.

Mirror maps (``mirror``): ``"quadratic"`` uses the public Hessian ``H = grad^2 Psi(theta_0)``, so the
step is ``theta - eta H^{-1} (g + b)``: DP-GD preconditioned by the public Hessian (exactly
PDA-DPMD when Psi is quadratic, e.g. the squared loss); ``"exact"`` solves the mirror step for
the full Psi by Newton's method (public computation); ``"identity"`` (Psi = |theta|^2 / 2) is
plain DP-GD, warm-started at theta_0 -- the thesis's baseline (:func:`dp_gd_warm_start`). With
``normalise=True`` Psi is divided by the smallest eigenvalue of H, so ``H^{-1}`` has largest
eigenvalue 1 (as in the thesis's experiment): the preconditioner never enlarges a step, and
PDA-DPMD equals DP-GD when H is a multiple of I.

Privacy (replace-one adjacency on the private rows; the public rows are not protected): the
clipped mean gradient moves by at most ``2 C / n`` in l2, so each step is a Gaussian mechanism,
``(2 C / (n sigma))``-GDP; everything else (the mirror step, the average) is post-processing and
the T steps compose adaptively to ``mu = sqrt(T) 2 C / (n sigma)``-GDP, logged as T
:class:`~dp_infer.privacy.events.GdpEvent` s. sigma is calibrated by the exact GDP inverse
(the thesis's ``sigma^2 = 8 L^2 T log(1/delta) / (eps n)^2`` is slightly above eps under
replace-one adjacency; digest §5.3).
"""

from __future__ import annotations

import math
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._validation import check_delta, check_epsilon, check_nonnegative, check_positive, check_positive_int
from ..losses import PerExampleLoss
from ..privacy.conversions import gdp_mu
from ..privacy.events import GdpEvent
from ..randomness import gaussian_noise, secret_key
from ._release import Release

__all__ = ["noise_for_target", "pda_dpmd", "dp_gd_warm_start"]

MIRRORS = ("quadratic", "exact", "identity")


def noise_for_target(eps: float, delta: float, *, n: int, num_steps: int, clip_norm: float) -> float:
    """sigma such that T steps of the clipped mean gradient (sensitivity 2C/n) are (eps, delta)-DP."""
    mu = gdp_mu(check_epsilon(eps), check_delta(delta))
    T = check_positive_int("num_steps", num_steps)
    C = check_positive("clip_norm", clip_norm)
    return 2.0 * C * math.sqrt(T) / (check_positive_int("n", n) * mu)


def _public_geometry(loss, Xp, yp, l2, normalise):
    """theta_0 = argmin Psi, Psi and its Hessian at theta_0, and the normalising scale."""
    from ..infer.nonprivate import minimize_loss

    theta0 = minimize_loss(loss, Xp, yp, l2=l2)[0]
    Xpj, ypj = jnp.asarray(Xp, jnp.float64), jnp.asarray(yp, jnp.float64)

    def psi(t):
        return loss.mean(t, Xpj, ypj) + 0.5 * l2 * jnp.dot(t, t)

    H = np.asarray(jax.hessian(psi)(jnp.asarray(theta0)))
    H = 0.5 * (H + H.T)
    lam = np.linalg.eigvalsh(H)
    scale = 1.0 / lam[0] if normalise else 1.0
    return theta0, psi, H * scale, scale, lam * scale


def pda_dpmd(loss: PerExampleLoss, X, y, X_public, y_public, *, eps: float, delta: float,
             num_steps: int = 100, step_size: float = 1.0, clip_norm: float = 1.0,
             public_loss: PerExampleLoss | None = None, public_l2: float = 1e-3, mirror: str = "quadratic",
             normalise: bool = True, output: str = "average", newton_steps: int = 8,
             seed: int | None = None) -> Release:
    """PDA-DPMD (module docstring). Every input is checked before any private computation.

    Returns a :class:`~dp_infer.mechanisms.Release`: ``value`` the average (or last) iterate,
    ``events`` one GDP event per step (T of them), ``params`` the noise scale, step size, clip
    norm and the public geometry (public minimiser, preconditioner spectrum: public data only).

    :param loss: the private per-example loss (its gradients are clipped to ``clip_norm``).
    :param public_loss: the loss defining the mirror map (default: ``loss``).
    :param public_l2: ridge added to Psi so that it is strictly convex (public choice).
    """
    eps, delta = check_epsilon(eps), check_delta(delta)
    T = check_positive_int("num_steps", num_steps)
    eta = check_positive("step_size", step_size)
    C = check_positive("clip_norm", clip_norm)
    l2 = check_nonnegative("public_l2", public_l2)
    if mirror not in MIRRORS:
        raise ValueError(f"mirror must be one of {MIRRORS}, got {mirror!r}")
    if output not in ("average", "last"):
        raise ValueError(f"output must be 'average' or 'last', got {output!r}")
    newton_steps = check_positive_int("newton_steps", newton_steps)
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer PerExampleLoss, got {type(loss).__name__}")
    public_loss = loss if public_loss is None else public_loss
    X, y = loss.check_data(X, y)
    Xp, yp = public_loss.check_data(X_public, y_public)
    if Xp.shape[1] != X.shape[1]:
        raise ValueError(f"X_public has {Xp.shape[1]} columns, X has {X.shape[1]}")
    if mirror != "identity" and l2 == 0 and Xp.shape[0] < loss.num_params(X.shape[1]):
        raise ValueError("public_l2 must be > 0 when there are fewer public rows than parameters "
                         "(the mirror map must be strictly convex)")
    n = X.shape[0]
    sigma = noise_for_target(eps, delta, n=n, num_steps=T, clip_norm=C)
    event = GdpEvent(mu=2.0 * C / (n * sigma), label="pda_dpmd_step" if mirror != "identity" else "dp_gd_step",
                     assumptions=("per-example gradients clipped to clip_norm (enforced), replace-one adjacency "
                                  "on the private rows with n fixed (public)",
                                  "the public rows are not protected; step size, steps, clip norm and noise "
                                  "are fixed independently of the private rows"),
                     metadata={"sigma": sigma, "clip_norm": C, "n": n})
    key, source = secret_key(seed)
    with jax.enable_x64(True):
        theta0, psi, Hn, scale, lam = _public_geometry(public_loss, Xp, yp, l2, normalise)
        Xj, yj = jnp.asarray(X, jnp.float64), jnp.asarray(y, jnp.float64)
        per_grad = jax.vmap(jax.grad(loss.example), in_axes=(None, 0, 0))
        Hinv = jnp.asarray(np.linalg.inv(Hn))
        grad_psi = jax.grad(lambda t: scale * psi(t))
        hess_psi = jax.hessian(lambda t: scale * psi(t))

        def clipped_mean(theta):
            g = per_grad(theta, Xj, yj)
            norms = jnp.linalg.norm(g, axis=1, keepdims=True)
            return jnp.mean(g * jnp.minimum(1.0, C / jnp.maximum(norms, 1e-300)), axis=0)

        def mirror_step(theta, v):  # v = g + b
            if mirror == "identity":
                return theta - eta * v
            if mirror == "quadratic":
                return theta - eta * (Hinv @ v)
            target = grad_psi(theta) - eta * v  # solve grad Psi(t) = target by Newton from the quadratic guess
            t0 = theta - eta * (Hinv @ v)
            return lax.fori_loop(0, newton_steps,
                                 lambda _, t: t - jnp.linalg.solve(hess_psi(t), grad_psi(t) - target), t0)

        def body(carry, k):
            theta, acc = carry
            b = sigma * gaussian_noise(k, theta.shape, jnp.float64)
            theta = mirror_step(theta, clipped_mean(theta) + b)
            return (theta, acc + theta), None

        run = jax.jit(lambda key: lax.scan(body, (jnp.asarray(theta0), jnp.zeros_like(jnp.asarray(theta0))),
                                           jax.random.split(key, T))[0])
        last, total = run(key)
        last, avg = np.asarray(last), np.asarray(total) / T
    params = {"mechanism": "pda_dpmd" if mirror != "identity" else "dp_gd_warm_start", "mirror": mirror,
              "num_steps": T, "sigma": sigma, "step_size": eta, "clip_norm": C, "output": output,
              "n_private": n, "n_public": int(Xp.shape[0]), "public_l2": l2, "normalise": normalise,
              "theta_public": np.asarray(theta0).tolist(),
              "preconditioner_eigenvalues": None if mirror == "identity" else np.asarray(lam).tolist()}
    return Release(value=avg if output == "average" else last, events=((event, T),), params=params,
                   randomness=source.describe())


def dp_gd_warm_start(loss: PerExampleLoss, X, y, X_public, y_public, **kwargs) -> Release:
    """The thesis's baseline: DP-GD (identity mirror map) started at the public minimiser."""
    if "mirror" in kwargs:
        raise ValueError("dp_gd_warm_start fixes mirror='identity'; call pda_dpmd for other mirror maps")
    return pda_dpmd(loss, X, y, X_public, y_public, mirror="identity", **kwargs)
