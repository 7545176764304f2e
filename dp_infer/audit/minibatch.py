"""Minibatch SGLD audit.

Minibatch SGLD (:func:`minibatch_audit`)
----------------------------------------
The actual kernel :func:`dp_infer.kernels.sgld.sample_chain` on a 1-D linear per-example loss
``l(theta; x) = -x theta`` (gradient ``-x``, clipped at C): n rows, the canary at ``x = C`` in D
and, in D', at ``x = -C`` (replace-one: the clipped gradients differ by 2C, the worst case) or
removed (add/remove); every other row at ``x = background * C``. beta is calibrated by
:func:`~dp_infer.privacy.minibatch.minibatch_beta_max` for the claimed (eps, delta); with one
step (the default) the final iterate is the whole release. ``normaliser="rows"`` runs the kernel
with the row count as normaliser under add/remove -- the setting that the event does NOT cover
(there a removal moves the mean gradient by up to 2C/(n-1) with ``background = -1``), kept so the
audit can show the gap.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import random

from ..randomness import secret_key
from .statistics import AuditResult, audit_statistics


def minibatch_audit(*, q: float = 0.5, eps: float = 2.0, delta: float = 1e-5, n: int = 10, clip_norm: float = 1.0,
                    step_size: float = 0.01, num_steps: int = 1, neighboring: str = "replace_one",
                    normaliser: int | str | None = None, background: float = 0.0, num_samples: int = 100_000,
                    confidence: float = 0.95, seed: int | None = None, beta: float | None = None) -> AuditResult:
    """Audit Poisson-subsampled SGLD (the real kernel) on a worst-case neighbouring pair (module doc).

    ``beta`` skips the calibration for ``eps``: the claim is then the event's eps at that beta.

    ``normaliser``: the kernel's public n (default ``n``, the row count of D); under add/remove the
    accountant is charged with ``n = normaliser`` (``"rows"``: kernel divides by each dataset's own
    row count while the claim uses n, the uncovered setting).
    """
    from ..kernels import sgld
    from ..privacy import minibatch

    if neighboring not in minibatch.NEIGHBORING:
        raise ValueError(f"neighboring must be one of {minibatch.NEIGHBORING}, got {neighboring!r}")
    if not -1.0 <= background <= 1.0:
        raise ValueError(f"background must lie in [-1, 1], got {background!r}")
    rows_mode = normaliser == "rows"
    if rows_mode and neighboring != "add_remove":
        raise ValueError("normaliser='rows' is the add/remove gap; use it with neighboring='add_remove'")
    n_pub = n if (normaliser is None or rows_mode) else int(normaliser)
    if beta is None:
        beta = minibatch.minibatch_beta_max(eps, delta, step_size, num_steps, q, clip_norm, n_pub,
                                            neighboring=neighboring, rtol=1e-3)
    claimed = minibatch.minibatch_epsilon(beta, step_size, num_steps, q, clip_norm, n_pub, delta,
                                          neighboring=neighboring, pld_check=False)["epsilon"]
    key, source = secret_key(seed)
    k_d, k_dp = random.split(key)
    xs_d = np.full(n, background * clip_norm)
    xs_d[0] = clip_norm
    xs_dp = xs_d.copy()
    if neighboring == "replace_one":
        xs_dp[0] = -clip_norm
    else:
        xs_dp = xs_d[1:]

    def example(th, x, y):
        return -x[0] * th[0]

    out = []
    for k, xs in ((k_d, xs_d), (k_dp, xs_dp)):
        X = jnp.asarray(xs[:, None], jnp.float32)
        y = jnp.zeros(xs.shape[0], jnp.float32)
        norm = None if rows_mode else n_pub

        def final(kk, X=X, y=y, norm=norm):
            return sgld.sample_chain(kk, example, X, y, beta, step_size, num_steps, q, clip_norm, jnp.zeros(1),
                                     normaliser=norm).last_state.z[0]

        run = jax.jit(jax.vmap(final))
        keys = random.split(k, num_samples)
        out.append(np.concatenate([np.asarray(run(keys[i:i + 50_000]), np.float64)
                                   for i in range(0, num_samples, 50_000)]))
    lb, tau, s, fpr_u, fnr_u = audit_statistics(out[0], out[1], delta=delta, confidence=confidence)
    params = {"n": n, "q": q, "beta": beta, "step_size": step_size, "num_steps": num_steps, "clip_norm": clip_norm,
              "neighboring": neighboring, "normaliser": "rows" if rows_mode else n_pub, "background": background,
              "target_eps": eps, "key_source": source.describe()}
    return AuditResult("linear", f"minibatch_{neighboring}", "final", float(claimed), float(delta), lb, confidence,
                       num_samples, tau, s, fpr_u, fnr_u, None, params)
