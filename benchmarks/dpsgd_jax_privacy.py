"""DP-SGD on logistic regression with jax-privacy (the ``bench`` extra), replace-one adjacency.

jax-privacy 2.0's pieces: :func:`jax_privacy.clipped_grad` (sum of per-example gradients clipped
to ``clip``), :func:`jax_privacy.noise_addition.gaussian_privatizer` (isotropic Gaussian noise of
sd ``noise_multiplier * clip`` on that sum), :class:`jax_privacy.batch_selection.FixedBatchSampling`
(uniform batches of a fixed size) and :class:`jax_privacy.accounting.DpsgdTrainingAccountant` with
``SamplingMethod.FIXED_BATCH_SIZE``, the sampling scheme its analysis states for replace-one
neighbours (n public) -- the adjacency of dp_infer's guarantees, so eps is comparable. The noise
multiplier is the smallest meeting (eps, delta) on its PLD accountant (bisection to 1%, rounded
up). Hyper-parameters (batch, steps, learning rate, clip, L2) are fixed a priori in the caller.
The estimate is the average of the iterates over the last half of the steps (post-processing).
"""

from __future__ import annotations

import math

import numpy as np


def available() -> str | None:
    """None if jax-privacy imports, else the reason it does not."""
    try:
        import jax_privacy  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure is reported as is
        return f"jax-privacy not importable: {type(e).__name__}: {e}"
    return None


def noise_multiplier(eps: float, delta: float, *, n: int, batch: int, steps: int, rtol: float = 0.01) -> float:
    from jax_privacy import accounting as acc

    accountant = acc.DpsgdTrainingAccountant(dp_accountant_config=acc.PldAccountantConfig())

    def eps_of(z: float) -> float:
        p = acc.DpParams(noise_multipliers=z, num_samples=n, delta=delta, batch_size=batch,
                         sampling_method=acc.SamplingMethod.FIXED_BATCH_SIZE)
        return accountant.compute_epsilon(steps, p)

    lo, hi = 0.1, 1.0
    while eps_of(hi) > eps:
        lo, hi = hi, 2 * hi
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if eps_of(mid) <= eps else (mid, hi)
    return hi


def dp_sgd_logistic(X, y, *, eps: float, delta: float, key, batch_seed: int, batch: int = 1024, steps: int = 1000,
                    learning_rate: float = 0.5, clip: float = 1.0, l2: float = 0.0) -> tuple[np.ndarray, dict]:
    """DP-SGD on ``mean logistic loss + l2 / 2 ||theta||^2`` (plain SGD steps of ``learning_rate``
    on the noisy mean clipped gradient); returns (average of the last half of the iterates, info)."""
    import jax
    import jax.numpy as jnp
    import jax_privacy
    from jax_privacy import batch_selection, noise_addition

    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y, dtype=np.float32)
    n, d = X.shape
    z = noise_multiplier(eps, delta, n=n, batch=batch, steps=steps)

    def example_loss(theta, xb, yb):
        s = xb @ theta
        return jnp.sum(jax.nn.softplus(s) - yb * s)

    grad_sum = jax_privacy.clipped_grad(example_loss, l2_clip_norm=clip, batch_argnums=(1, 2))
    privatizer = noise_addition.gaussian_privatizer(stddev=z * clip, prng_key=key)
    sampler = batch_selection.FixedBatchSampling(batch_size=batch, iterations=steps)
    idx = np.stack(list(sampler.batch_iterator(n, rng=batch_seed))).astype(np.int32)
    Xj, yj = jnp.asarray(X), jnp.asarray(y)
    half = steps // 2

    @jax.jit
    def run(idx):
        theta0 = jnp.zeros(d, jnp.float32)

        def body(carry, inp):
            theta, ns, acc = carry
            i, b = inp
            g = grad_sum(theta, Xj[b], yj[b])
            noisy, ns = privatizer.update(sum_of_clipped_grads=g, noise_state=ns)
            theta = theta - learning_rate * (noisy / batch + l2 * theta)
            acc = acc + jnp.where(i >= half, theta, 0.0)
            return (theta, ns, acc), None

        (theta, _, acc), _ = jax.lax.scan(body, (theta0, privatizer.init(theta0), jnp.zeros(d)),
                                          (jnp.arange(steps), jnp.asarray(idx)))
        return acc / (steps - half)

    theta = np.asarray(run(idx), dtype=np.float64)
    return theta, {"noise_multiplier": z, "batch": batch, "steps": steps, "learning_rate": learning_rate,
                   "clip": clip, "l2": l2, "epochs": steps * batch / n,
                   "accountant": "jax-privacy DpsgdTrainingAccountant (PLD), FIXED_BATCH_SIZE (replace-one)"}
