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

Assumptions checked here (on public placeholder rows, never on the private data): every latent
site is continuous and global (outside the data plate); every observed site is batched by row
(inside a plate whose size follows the number of rows); the prior and the constraints are
evaluated without the private rows, so they cannot depend on them.
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
    # The model's structure, prior and constraints are read with PUBLIC placeholder rows (zeros
    # of the data's shape), never with private rows: a prior that looked at X or y would leak.
    def placeholder(k):
        return {x_name: jnp.zeros((k,) + X.shape[1:]), y_name: jnp.zeros((k,))}

    def trace(k):
        try:
            return handlers.trace(handlers.seed(model, 0)).get_trace(**placeholder(k))
        except Exception as e:  # noqa: BLE001 - a model that cannot run on placeholder rows
            raise ValueError(f"the model could not be traced with placeholder data {x_name}=zeros({k}, "
                             f"{X.shape[1]}), {y_name}=zeros({k}) (it must take the data as the keyword "
                             f"arguments {x_name!r} and {y_name!r}): {type(e).__name__}: {e}") from None

    kw1 = placeholder(1)
    tr = trace(1)
    latent = {k: s for k, s in tr.items() if s["type"] == "sample" and not s.get("is_observed")}
    observed = [k for k, s in tr.items() if s["type"] == "sample" and s.get("is_observed")]
    if not latent:
        raise ValueError("model has no latent sample site: nothing to sample")
    if not observed:
        raise ValueError("model has no observed site: pass the data through the keyword arguments "
                         f"{x_name!r}, {y_name!r} and observe y inside a numpyro.plate")
    for k, s in latent.items():
        if s["fn"].support.is_discrete:
            raise ValueError(f"latent site {k!r} is discrete: the Langevin kernels need continuous "
                             "latents (marginalise it out, e.g. with a mixture likelihood)")
    tr2, tr3 = trace(2), trace(3)
    for k in latent:
        if tr2[k]["value"].shape != tr3[k]["value"].shape:
            raise ValueError(f"latent site {k!r} lies inside the data plate: only global latents "
                             "are supported by the per-example bridge")
    for k in observed:
        sizes2 = {f.size for f in tr2[k].get("cond_indep_stack", ())}
        sizes3 = {f.size for f in tr3[k].get("cond_indep_stack", ())}
        if 2 not in sizes2 or 3 not in sizes3:
            raise ValueError(f"observed site {k!r} is not batched by row: observe it inside "
                             f"`with numpyro.plate('data', len({y_name}))` (a likelihood summed over "
                             "all rows, e.g. one numpyro.factor, has no per-example loss to clip)")
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
