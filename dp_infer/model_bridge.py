"""From an ordinary NumPyro model to a private tempered posterior.

A Bayesian model ``model(X=None, y=None)`` whose observations sit in a ``numpyro.plate`` over
rows defines a per-example negative log-likelihood ``nll(theta; x_i, y_i)`` and a prior.
:func:`loss_from_model` turns it into

* a :class:`~dp_infer.losses.PerExampleLoss` on the flat *unconstrained* latent vector, with
  per-example gradient clipping (so its sensitivity holds whatever the likelihood is), and
* the prior's potential (data independent, so free of privacy cost),

so that the tempered posterior ``prior(theta) * prod_i p(y_i | theta, x_i)^(beta / n)`` is the
Gibbs potential ``U = beta * mean_i nll_i + prior potential``. ``beta = n`` is the ordinary
posterior; privacy needs a much smaller ``beta`` (chosen by the calibration, never by the data).

Assumptions checked here: every latent site is global (outside the data plate); observed sites
are batched over rows; the prior does not read X or y.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.infer.util import constrain_fn, potential_energy
from numpyro.primitives import Messenger

from ._validation import check_finite_array, check_positive
from .losses import PerExampleLoss, clipped_loss

__all__ = ["ModelLoss", "loss_from_model"]


class _drop_observations(Messenger):
    """Replace every observed site's distribution by a masked copy (log-prob 0)."""

    def process_message(self, msg):
        if msg["type"] == "sample" and msg.get("is_observed"):
            msg["fn"] = msg["fn"].mask(False)


@dataclass(frozen=True)
class ModelLoss:
    """The per-example loss and prior potential extracted from a NumPyro model."""

    loss: PerExampleLoss
    prior_potential: Callable[[jax.Array], jax.Array]
    unravel: Callable[[jax.Array], dict]
    latent_sites: tuple[str, ...]
    dim: int
    _constrain: Callable[[dict], dict]

    def constrain(self, theta_flat) -> dict:
        """Map flat unconstrained draws (..., dim) to a dict of constrained site values."""
        theta_flat = jnp.asarray(theta_flat)
        batch = theta_flat.shape[:-1]
        flat = theta_flat.reshape((-1, self.dim))
        out = jax.vmap(lambda t: self._constrain(self.unravel(t)))(flat)
        return {k: v.reshape(batch + v.shape[1:]) for k, v in out.items()}

    def init_flat(self) -> jax.Array:
        """Data-independent initial point: 0 in unconstrained space (the centre NumPyro's
        ``init_to_uniform`` draws around)."""
        return jnp.zeros(self.dim)


def loss_from_model(model: Callable, X, y, *, clip_norm: float, x_name: str = "X",
                    y_name: str = "y") -> ModelLoss:
    """Extract a clipped per-example loss and a prior potential from ``model(X=..., y=...)``.

    ``clip_norm`` (> 0) bounds each per-example gradient with respect to the unconstrained
    latent vector, so the loss has L = clip_norm and G = 2 clip_norm by construction.
    """
    check_positive("clip_norm", clip_norm)
    X = check_finite_array("X", X, ndim=2)
    y = check_finite_array("y", y, ndim=1)
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X and y must have the same number of rows, got {X.shape[0]} and {y.shape[0]}")
    x1, y1 = jnp.asarray(X[:1]), jnp.asarray(y[:1])
    kw1 = {x_name: x1, y_name: y1}
    tr = handlers.trace(handlers.seed(model, 0)).get_trace(**kw1)
    latent = {k: s for k, s in tr.items() if s["type"] == "sample" and not s.get("is_observed")}
    observed = [k for k, s in tr.items() if s["type"] == "sample" and s.get("is_observed")]
    if not latent:
        raise ValueError("model has no latent sample site: nothing to sample")
    if not observed:
        raise ValueError("model has no observed site: pass the data through the keyword arguments "
                         f"{x_name!r}, {y_name!r} and observe y inside a numpyro.plate")
    # local latents (inside a plate over rows) would make the loss not per-example
    for k, s in latent.items():
        if any(f.size == 1 and f.name for f in s.get("cond_indep_stack", ())):
            tr2 = handlers.trace(handlers.seed(model, 0)).get_trace(
                **{x_name: jnp.asarray(X[:2]), y_name: jnp.asarray(y[:2])})
            if tr2[k]["value"].shape != s["value"].shape:
                raise ValueError(f"latent site {k!r} lies inside the data plate: only global latents "
                                 "are supported by the per-example bridge")
    # unconstrained parametrisation of the latents
    unc = {k: s["fn"].support for k, s in latent.items()}
    from numpyro.distributions.transforms import biject_to

    z0 = {k: biject_to(unc[k]).inv(s["value"]) for k, s in latent.items()}
    flat0, unravel = ravel_pytree(z0)
    dim = int(flat0.shape[0])

    def _constrain(z):
        return constrain_fn(model, (), kw1, z)

    def nll_one(theta_flat, x, yy):
        z = unravel(theta_flat)
        kw = {x_name: x[None], y_name: jnp.reshape(yy, (1,))}
        params = constrain_fn(model, (), kw, z)
        t = handlers.trace(handlers.substitute(handlers.seed(model, 0), params)).get_trace(**kw)
        total = 0.0
        for name in observed:
            s = t[name]
            total = total + jnp.sum(s["fn"].log_prob(s["value"]))
        return -total

    prior_model = _drop_observations(model)

    def prior_potential(theta_flat):
        return potential_energy(prior_model, (), kw1, unravel(theta_flat))

    loss = clipped_loss(nll_one, clip_norm, name="model_nll")
    return ModelLoss(loss, prior_potential, unravel, tuple(latent), dim, _constrain)
