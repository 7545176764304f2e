"""NUTS references: on a tempered model (the observation's log-likelihood scaled, the prior not), or
on a run's own potential."""

from __future__ import annotations

from numpyro.primitives import Messenger


class temper(Messenger):
    """Scale the log-likelihood of the observed site ``y`` by ``scale`` (the prior is untouched)."""

    def __init__(self, fn, scale):
        self.scale = scale
        super().__init__(fn)

    def process_message(self, msg):
        # the model's observation "y" only: NumPyro's potential_energy adds each constrained latent's
        # log-Jacobian as an observed factor site (_<site>_log_det), which belongs to the prior
        if msg["type"] == "sample" and msg.get("is_observed") and msg["name"] == "y":
            msg["scale"] = self.scale if msg.get("scale") is None else self.scale * msg["scale"]


def nuts_reference(potential, dim: int, *, seed: int = 0, num_warmup: int = 500, num_samples: int = 2000):
    """NON-PRIVATE reference draws, shape (num_samples, dim): one NUTS chain on ``potential(theta)``
    (a run's own target, e.g. ``run.potential``) from 0."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from numpyro.infer import MCMC, NUTS

    mcmc = MCMC(NUTS(potential_fn=lambda z: potential(z["th"])), num_warmup=num_warmup, num_samples=num_samples,
                num_chains=1, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), init_params={"th": jnp.zeros(dim)})
    return np.asarray(mcmc.get_samples()["th"])
