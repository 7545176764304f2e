"""Many independent posterior-mode runs in one compiled call (compute batching only).

For replicated datasets (the coverage simulation) every dataset gets its own private second
moment and its own plan (:func:`dp_infer.routes.posterior.plan_posterior`), exactly as
:func:`dp_infer.infer.posterior.fit_posterior` would make them; the chains of all datasets then run
side by side in one ``lax.scan`` whose length is the longest plan's number of steps, and a chain
whose own plan has ended stops moving (its later states are discarded). Each dataset's released
draws are therefore its plan's thinned trajectory, run for exactly its plan's number of steps: the
same law as a separate ``fit_posterior`` call (with other keys), at the same privacy.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from dp_infer.routes.posterior import plan_posterior, preconditioner_chol
from dp_infer.releases.second_moment import private_second_moment
from dp_infer.privacy.conversions import gdp_mu


def plan_private(loss, X, *, key, eps: float, delta: float, prior_precision, ess: int, num_chains: int = 4,
                 precond_share: float = 0.1, max_sq_norm: float, **kw):
    """The second-moment release and the plan that ``fit_posterior(preconditioner='private')`` makes."""
    mu = gdp_mu(eps, delta)
    sm = private_second_moment(X, max_sq_norm=max_sq_norm, mu=math.sqrt(precond_share) * mu, key=key)
    return plan_posterior(loss, X.shape[0], X.shape[1], eps=eps, delta=delta, prior_precision=prior_precision,
                          ess=ess, num_chains=num_chains, second_moment=sm, **kw)


def run_logistic_plans(plans, datasets, *, key) -> list[np.ndarray]:
    """Run overdamped posterior-mode ``plans`` (one per ``(X, y)`` in ``datasets``, logistic loss,
    equal shapes and chain counts) together; returns each run's draws after burn-in,
    shape (chains, draws, dim)."""
    if any(p.kernel != "langevin" for p in plans):
        raise ValueError("the batch runner covers the overdamped kernel only")
    B = len(plans)
    K = plans[0].num_chains
    d = plans[0].dim
    steps = np.array([p.num_steps for p in plans])
    T = int(steps.max())
    Xs = jnp.asarray(np.stack([np.asarray(X) for X, _ in datasets]), jnp.float32)
    ys = jnp.asarray(np.stack([np.asarray(y) for _, y in datasets]), jnp.float32)
    Cs = jnp.asarray(np.stack([preconditioner_chol(p) for p in plans]), jnp.float32)
    betas = jnp.asarray([p.beta for p in plans], jnp.float32)
    hs = jnp.asarray([p.step_size for p in plans], jnp.float32)
    lams = jnp.asarray(np.stack([np.asarray(p.prior_precision) for p in plans]), jnp.float32)
    n = Xs.shape[1]

    def grad_V(phi, XC, y, C, beta, lam):
        # grad of U(C phi): C' (beta X' r / n + lam C phi) with r = sigmoid(X C phi) - y; X C formed once
        r = jax.nn.sigmoid(XC @ phi) - y
        return beta * (XC.T @ r) / n + C.T @ (lam * (C @ phi))

    def one_dataset(k, X, y, C, beta, h, lam, last):
        XC = X @ C

        def body(phi, inp):
            i, kk = inp
            noise = jax.random.normal(kk, phi.shape)
            g = jax.vmap(grad_V, in_axes=(0, None, None, None, None, None))(phi, XC, y, C, beta, lam)
            new = phi - h * g + jnp.sqrt(2.0 * h) * noise
            phi = jnp.where(i < last, new, phi)
            return phi, phi

        _, path = jax.lax.scan(body, jnp.zeros((K, d)), (jnp.arange(T), jax.random.split(k, T)))
        return jnp.einsum("ij,tkj->tki", C, path)  # theta = C phi (post-processing)

    fn = jax.jit(jax.vmap(one_dataset))
    paths = np.asarray(fn(jax.random.split(key, B), Xs, ys, Cs, betas, hs, lams, jnp.asarray(steps)))
    out = []
    for b, p in enumerate(plans):
        idx = np.arange(p.thinning - 1, p.num_steps, p.thinning)  # every thinning-th state of its own run
        draws = np.transpose(paths[b, idx], (1, 0, 2))  # (chains, draws, d)
        out.append(draws[:, p.burn_in:])
    return out
