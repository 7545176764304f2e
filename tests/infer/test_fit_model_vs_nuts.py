"""Your own NumPyro model through dp_infer.sample(model=...) against NumPyro's NUTS on the SAME tempered
target: prior(theta) * prod_i p(y_i | x_i, theta)^(beta / n), beta fixed, same prior (a non-private
reference; the plan here is built at a chosen beta, so it is not a privacy calibration).

Oracle: NUTS (NumPyro) on the model with its observed sites scaled by beta / n.
Tolerances (stated per comparison): a mean agrees within 4 combined Monte-Carlo standard errors
(ArviZ's mcse of both runs) plus ULA's discretisation bias; a standard deviation within 4 combined
MCSEs of the sd plus that bias. ULA's step is h = 0.1 / M_U with M_U the largest Hessian eigenvalue
of the tempered potential over the NUTS draws (measured, test side), so h M_U <= 0.1: for a
Gaussian target the stationary variance is inflated by at most 1 / (1 - h M_U / 2) = 1.053, i.e.
sd by <= 2.6%; we allow 3% of the sd on both means and sds. The clip is inactive on every draw
(checked), so ULA targets exactly the tempered posterior.
"""

from __future__ import annotations

import dataclasses
import math

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from jax.scipy.stats import norm
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import potential_energy

import dp_infer
from tests.support.tempering import temper
from dp_infer.model.bridge import loss_from_model

BIAS = 0.03  # of the sd: ULA at h M_U = 0.1 (see the module docstring)




# ------------------------------------------------------------------ the five models


def logistic(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 2.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w + b), obs=y)


def probit(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(probs=norm.cdf(X @ w + b)), obs=y)


def poisson(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 0.5).expand([X.shape[1]]).to_event(1))
    b = numpyro.sample("b", dist.Normal(1.0, 0.5))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Poisson(jnp.exp(X @ w + b)), obs=y)


def robust(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.StudentT(4.0, X @ w + b, sigma), obs=y)


def hierarchical(X=None, y=None):
    """Group intercepts (non-centred), global latents only: column 0 of X is the group index."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    with numpyro.plate("groups", 3):
        z = numpyro.sample("z", dist.Normal(0.0, 1.0))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    g = X[:, 0].astype(jnp.int32)
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Normal(mu + tau * z[g] + w * X[:, 1], 1.0), obs=y)


def _data(name, n=40):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(n, 2)) / 1.5
    if name in ("logistic", "probit"):
        return X, (X @ np.array([1.5, -1.0]) + 0.3 + rng.logistic(size=n) > 0).astype(float)
    if name == "poisson":
        return X, rng.poisson(np.exp(X @ np.array([0.5, -0.3]) + 1.0)).astype(float)
    if name == "robust":
        return X, X @ np.array([1.0, -0.5]) + 0.2 + 0.5 * rng.standard_t(3, size=n)
    groups = rng.integers(0, 3, size=n)
    Xh = np.c_[groups, X[:, 0]]
    return Xh, np.array([-1.0, 0.0, 1.0])[groups] + 0.7 * X[:, 0] + rng.normal(size=n)


# name, model, clip norm (above every per-example gradient on the draws: checked), beta
CASES = [
    ("logistic", logistic, 5.0, 20.0),
    ("probit", probit, 10.0, 15.0),
    ("poisson", poisson, 30.0, 15.0),
    ("robust", robust, 20.0, 20.0),
    ("hierarchical", hierarchical, 20.0, 15.0),
]


def _largest_curvature(model, X, y, beta, samples, ml):
    """max over 40 NUTS draws of the tempered potential's top Hessian eigenvalue (unconstrained)."""
    kw = {"X": jnp.asarray(X), "y": jnp.asarray(y)}
    tempered = temper(model, beta / X.shape[0])
    S = next(iter(samples.values())).shape[0]
    idx = np.linspace(0, S - 1, 40).astype(int)
    flat = jax.vmap(ml.unconstrain)({k: jnp.asarray(v[idx]) for k, v in samples.items()})
    hess = jax.jit(jax.vmap(jax.hessian(lambda t: potential_energy(tempered, (), kw, ml.unravel(t)))))
    H = np.asarray(hess(flat), dtype=np.float64)
    return float(np.max(np.linalg.eigvalsh(0.5 * (H + np.swapaxes(H, 1, 2)))[:, -1]))


@pytest.mark.parametrize("name,model,clip,beta", CASES, ids=[c[0] for c in CASES])
def test_private_sampler_targets_the_nuts_tempered_posterior(name, model, clip, beta):
    X, y = _data(name)
    n = X.shape[0]
    mc = MCMC(NUTS(temper(model, beta / n)), num_warmup=250, num_samples=1000, progress_bar=False)
    mc.run(jax.random.key(1), X=jnp.asarray(X), y=jnp.asarray(y))
    ref = {k: np.asarray(v) for k, v in mc.get_samples().items()}

    ml = loss_from_model(model, X, y, clip_norm=clip, smoothness=1.0)
    M_U = _largest_curvature(model, X, y, beta, ref, ml)
    h = 0.1 / M_U
    steps = 4 * int(math.ceil(25.0 / h / 4))  # 25 units of Langevin time per chain, thinning 4
    base = dp_infer.plan_trajectory(ml.loss.constants, n, ml.dim, eps=1.0, delta=1e-5, num_chains=8)
    plan = dataclasses.replace(base, beta=beta, step_size=h, num_steps=steps, thinning=4,
                               burn_in=steps // 4 // 5)
    run = dp_infer.sample(model=model, X=X, y=y, plan=plan, clip_norm=clip, smoothness=1.0, seed=3,
                          progress_bar=False)
    got = run.get_samples()
    assert set(got) == set(ref), "every latent site is released, constrained, under its own name"

    # the clip never bites on the draws: ULA's drift is the tempered posterior's gradient
    flat = np.asarray(run.draws()).reshape(-1, ml.dim)[:: max(1, run.draws().size // ml.dim // 200)]
    per = jax.vmap(lambda t: jax.vmap(jax.grad(ml.loss.fn), in_axes=(None, 0, 0))(t, jnp.asarray(X), jnp.asarray(y)))(
        jnp.asarray(flat))
    assert float(jnp.max(jnp.linalg.norm(per, axis=-1))) < clip

    a = az.from_dict({"posterior": run.get_samples(group_by_chain=True)})["posterior"].to_dataset()
    b = az.from_dict({"posterior": {k: v[None] for k, v in ref.items()}})["posterior"].to_dataset()
    mcse = {(g, m): az.mcse(ds, method=m) for g, ds in (("a", a), ("b", b)) for m in ("mean", "sd")}
    for k in ref:
        ma, mb = np.asarray(a[k].mean(("chain", "draw"))), np.asarray(b[k].mean(("chain", "draw")))
        sa, sb = np.asarray(a[k].std(("chain", "draw"))), np.asarray(b[k].std(("chain", "draw")))
        se_m = np.hypot(np.asarray(mcse["a", "mean"][k]), np.asarray(mcse["b", "mean"][k]))
        se_s = np.hypot(np.asarray(mcse["a", "sd"][k]), np.asarray(mcse["b", "sd"][k]))
        assert np.all(np.abs(ma - mb) <= 4 * se_m + BIAS * sb), (name, k, ma, mb, se_m)
        assert np.all(np.abs(sa - sb) <= 4 * se_s + BIAS * sb), (name, k, sa, sb, se_s)
