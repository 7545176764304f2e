"""How far float32 rounding carries two neighbouring datasets' computed gradients past the planned
sensitivity (issue 40, part 2): the measurement behind
:func:`dp_infer.privacy.float32_margin.float32_gradient_margin`.

The posterior chain computes ``grad V(phi) = beta mean_i clip(g_i(phi)) + C^T Lambda C phi`` in float32
(:func:`dp_infer.losses.metric_clip.clipped_potential`, whose ``V`` is ``clipped_potential_of_rows`` with the
dataset's rows bound; this module calls the same function with each neighbour's rows). For a replace-one pair
the exact difference is at most ``beta 2 tau / n``; the computed one also carries each side's rounding. This
module computes, at given states and pairs, ``|grad V(D) - grad V(D')| / (beta 2 tau / n)`` in float32 and in
float64 (the same function, x64) and reports the float32 excess over the float64 figure, in units of the
sensitivity.

``python -m benchmarks.float32_gradient``: the demo's Adult run (eps = 1, seed 0), 10 states from its draws
(two of them scaled 5x, further out than the chains go), 20 random pairs (row i replaced by row j with the
label flipped) at each. ``--synthetic N [--dim D] [--scale S]``: the same on N synthetic logistic rows, how the
excess grows with n (``excess_per_row_ulp``: the excess over ``n 2^-24``). ``--synthetic N --sgld Q``:
Poisson-subsampled SGLD's gradient estimate at sampling probability Q, in units of its sensitivity ``2 C / (q n)``.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from dp_infer.losses.metric_clip import clip_levels, clipped_potential_of_rows
from ._common import report_result


def neighbour_excess(loss, X, y, *, beta: float, chol, tau: float, prior_precision, states, pairs) -> dict:
    """For each state ``phi`` (rows of ``states``) and replace-one pair ``(i, j)`` (row i becomes row j with
    its label flipped), the computed ``|grad V(D') - grad V(D)|`` over the sensitivity ``beta 2 tau / n``, in
    float32 and float64; returns both ratios' maxima, the largest float32-minus-float64 excess (units of the
    sensitivity) and the largest ``|grad V|`` met (the chain's potential, loss L2 term included). Reads the
    rows: a measurement, never a release."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    C = np.asarray(chol, dtype=np.float64)
    lam = np.broadcast_to(np.asarray(prior_precision, dtype=np.float64), (d,))
    sens = beta * 2.0 * tau / n
    ratios, grad_norm = {}, 0.0
    for name, dt in (("float32", jnp.float32), ("float64", jnp.float64)):
        with jax.enable_x64(dt == jnp.float64):
            V = clipped_potential_of_rows(loss, beta=beta, C=jnp.asarray(C, dt), prior_precision=jnp.asarray(lam, dt))
            grad = jax.jit(jax.grad(V))
            XC = jnp.asarray(X, dt) @ jnp.asarray(C, dt)  # as clipped_potential forms it
            yy = jnp.asarray(y, dt)
            aa = clip_levels(XC, tau).astype(dt)
            out = []
            for phi in np.asarray(states, dtype=np.float64):
                ph = jnp.asarray(phi, dt)
                g0 = np.asarray(grad(ph, XC, yy, aa), dtype=np.float64)
                grad_norm = max(grad_norm, float(np.linalg.norm(g0)))
                for i, j in pairs:
                    g1 = grad(ph, XC.at[i].set(XC[j]), yy.at[i].set(1 - yy[j]), aa.at[i].set(aa[j]))
                    out.append(float(np.linalg.norm(np.asarray(g1, dtype=np.float64) - g0)) / sens)
            ratios[name] = np.array(out)
    excess = ratios["float32"] - ratios["float64"]
    return {"sensitivity": sens, "pairs": int(excess.size), "max_ratio_float32": float(ratios["float32"].max()),
            "max_ratio_float64": float(ratios["float64"].max()), "max_excess_float32": float(np.abs(excess).max()),
            "max_grad_norm": grad_norm}


def adult_float32_excess(seed: int = 0, states: int = 8, pairs: int = 20) -> dict:
    """:func:`neighbour_excess` on the demo's Adult posterior run (eps = 1), in its final clipped metric."""
    from benchmarks.public_curvature import adult_demo_run, demo_loss
    from dp_infer.privacy.float32_margin import float32_gradient_margin

    a, X, y, _, run, _ = adult_demo_run(1.0, seed, "public")
    plan = run.plan
    C = np.linalg.cholesky(np.asarray(plan.preconditioner, dtype=np.float64))
    draws = np.asarray(run.draws()).reshape(-1, plan.dim)
    rng = np.random.default_rng(seed)
    phis = np.linalg.solve(C, draws[rng.choice(len(draws), states, replace=False)].T).T
    phis = np.concatenate([phis, 5.0 * phis[:2]])  # two states further out: a larger prior gradient
    ij = [(int(rng.integers(plan.n)), int(rng.integers(plan.n))) for _ in range(pairs)]
    r = neighbour_excess(demo_loss(a), X, y, beta=plan.beta, chol=C, tau=plan.posterior.clip_tau,
                         prior_precision=plan.prior_precision, states=phis, pairs=ij)
    return dict(r, seed=seed, states=len(phis), n=plan.n, dim=plan.dim,
                margin=float32_gradient_margin(plan.n))


def _synthetic_logistic_rows(rng, n: int, dim: int):
    """``n`` logistic rows in the unit ball, labels drawn from a standard normal theta (draws from ``rng``)."""
    X = rng.normal(size=(n, dim))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-X @ rng.normal(size=dim)))).astype(float)
    return X, y


def synthetic_float32_excess(n: int, dim: int = 10, seed: int = 7, states: int = 3, pairs: int = 15,
                             scale: float = 1.0) -> dict:
    """:func:`neighbour_excess` on synthetic logistic rows (unit ball, labels from a standard normal theta),
    beta = 0.004 n, the default clip radius sqrt(dim) (tau = sqrt(dim / beta)), a fixed metric, unit prior;
    ``states`` states of sd ``scale``: how the excess grows with n (in units of ``n 2^-24``)."""
    from dp_infer import losses
    from dp_infer.privacy.float32_margin import float32_gradient_margin

    rng = np.random.default_rng(seed)
    X, y = _synthetic_logistic_rows(rng, n, dim)
    C = np.linalg.cholesky(np.eye(dim) * 0.5 + 0.1)
    phis = rng.normal(0.0, scale, (states, dim))
    ij = [(int(rng.integers(n)), int(rng.integers(n))) for _ in range(pairs)]
    beta = 0.004 * n
    r = neighbour_excess(losses.logistic(row_norm=1.0), X, y, beta=beta, chol=C, tau=float(np.sqrt(dim / beta)),
                         prior_precision=np.ones(dim), states=phis, pairs=ij)
    return dict(r, n=n, dim=dim, seed=seed, scale=scale, excess_per_row_ulp=r["max_excess_float32"] / (n * 2.0 ** -24),
                margin=float32_gradient_margin(n))


def sgld_float32_excess(n: int, q: float, dim: int = 10, seed: int = 7, states: int = 3, pairs: int = 8,
                        scale: float = 1.0, clip_norm: float = 1.0) -> dict:
    """The same measurement for Poisson-subsampled SGLD's gradient estimate ``(1/(q n)) sum_i B_i clip_C(g_i)``
    (:func:`dp_infer.kernels.sgld.minibatch_gradient`, the kernel's own function) on synthetic logistic rows:
    for each state and pair (a row in the batch replaced by another row with its label flipped; the same mask
    on both sides), ``|g(D) - g(D')|`` over the replace-one sensitivity ``2 C / (q n)`` in float32 and float64,
    and the excess (``excess_per_batch_ulp``: over ``q n 2^-24``, the batch's share of the full-batch scale)."""
    from dp_infer import losses
    from dp_infer.kernels import sgld
    from dp_infer.privacy.float32_margin import float32_gradient_margin

    rng = np.random.default_rng(seed)
    X, y = _synthetic_logistic_rows(rng, n, dim)
    example = losses.logistic(row_norm=1.0).example
    sens = 2.0 * clip_norm / (q * n)
    ratios = {"float32": [], "float64": []}
    for s in range(states):
        theta = rng.normal(0.0, scale, dim)
        for p in range(pairs):
            key = jax.random.PRNGKey(1000 * s + p)
            # the kernel's mask differs between float32 and x64 mode (its uniforms' width): row i is in both
            # (the other rows cancel in the exact difference, so only the rounding sees the batch)
            masks = []
            for x64 in (False, True):
                with jax.enable_x64(x64):
                    masks.append(np.asarray(jax.random.bernoulli(key, q, (n,))))
            i, j = int(np.flatnonzero(masks[0] & masks[1])[0]), int(rng.integers(n))
            X2, y2 = X.copy(), y.copy()
            X2[i], y2[i] = X[j], 1.0 - y[j]
            for name, dt in (("float32", jnp.float32), ("float64", jnp.float64)):
                with jax.enable_x64(dt == jnp.float64):
                    g1, g2 = (np.asarray(sgld.minibatch_gradient(key, example, jnp.asarray(theta, dt),
                                                                 jnp.asarray(A, dt), jnp.asarray(b, dt), q, clip_norm),
                                         dtype=np.float64) for A, b in ((X, y), (X2, y2)))
                ratios[name].append(float(np.linalg.norm(g1 - g2)) / sens)
    r32, r64 = np.array(ratios["float32"]), np.array(ratios["float64"])
    excess = float(np.abs(r32 - r64).max())
    return {"n": n, "q": q, "dim": dim, "seed": seed, "scale": scale, "sensitivity": sens, "pairs": int(r32.size),
            "max_ratio_float32": float(r32.max()), "max_ratio_float64": float(r64.max()),
            "max_excess_float32": excess, "excess_per_batch_ulp": excess / (q * n * 2.0 ** -24),
            "margin": float32_gradient_margin(n)}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.float32_gradient")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--synthetic", type=int, default=None, metavar="N",
                   help="synthetic logistic rows (N of them) instead of the demo's Adult run")
    p.add_argument("--dim", type=int, default=10, help="with --synthetic: the dimension")
    p.add_argument("--scale", type=float, default=1.0, help="with --synthetic: the states' sd")
    p.add_argument("--sgld", type=float, default=None, metavar="Q",
                   help="with --synthetic: Poisson-subsampled SGLD's gradient at sampling probability Q")
    a = p.parse_args(argv)
    if a.sgld is not None:
        if a.synthetic is None:
            p.error("--sgld needs --synthetic N")
        r = sgld_float32_excess(a.synthetic, a.sgld, a.dim, seed=a.seed, scale=a.scale)
    elif a.synthetic is not None:
        r = synthetic_float32_excess(a.synthetic, a.dim, seed=a.seed, pairs=a.pairs, scale=a.scale)
    else:
        r = adult_float32_excess(a.seed, pairs=a.pairs)
    report_result("float32_gradient", argv, r)


if __name__ == "__main__":
    main()
