"""Part 3 of issue 27: a hierarchical model's private posterior-mode draws against NumPyro's NUTS on the
SAME tempered target, prior(theta) x prod_i p(y_i | x_i, g_i, theta)^(beta / n) at the plan's beta (the
prior -- group-level scale included -- untempered), with the group index passed as model_kwargs.

Tolerance per mean and sd: 4 combined ArviZ MCSEs (both runs, fixed keys) plus ULA's discretisation
bias. The bias: for a Gaussian target ULA inflates the variance by 1 / (1 - h M / 2) (M the largest
curvature of the whitened tempered potential, measured over 40 NUTS draws, test side); with the
plan's step h M is checked <= 0.25, so sd is inflated by at most 6.9%: we allow 7% of the
reference sd. The clip (40, with eps = 32 so that beta > 1: this checks the sampler at the plan's beta, not a
privacy level) is checked inactive on the draws, so ULA's drift is the tempered posterior's gradient.
"""

from __future__ import annotations

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import potential_energy

import dp_infer
from tests.support.tempering import temper

BIAS = 0.07




def hierarchical(X=None, y=None, group=None, num_groups=3):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    with numpyro.plate("groups", num_groups):
        z = numpyro.sample("z", dist.Normal(0.0, 1.0))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Normal(mu + tau * z[group] + w * X[:, 0], 1.0), obs=y)


@pytest.mark.slow
def test_hierarchical_posterior_mode_matches_nuts_on_the_same_tempered_target():
    rng = np.random.default_rng(7)
    n = 500
    g = rng.integers(0, 3, n)
    X = rng.normal(size=(n, 1))
    y = np.array([-1.0, 0.0, 1.0])[g] + 0.7 * X[:, 0] + rng.normal(size=n)
    kw = {"group": g, "num_groups": 3}
    run = dp_infer.fit(model=hierarchical, X=X, y=y, model_kwargs=kw, index_ranges={"group": 3}, target="posterior",
                       eps=32.0, delta=1e-5, clip_norm=40.0, smoothness=5.0, mixing_rate=1.0, ess=400,
                       kernel="langevin", interval_share=0,  # the whole budget to the path (beta > 1)
                       seed=5, progress_bar=False)
    beta = run.plan.beta
    assert beta > 1.0, "the tempered likelihood must matter beside the prior for this comparison"
    mc = MCMC(NUTS(temper(hierarchical, beta / n), target_accept_prob=0.9), num_warmup=1000, num_samples=2000,
              num_chains=2, chain_method="sequential", progress_bar=False)
    data = dict(X=jnp.asarray(X), y=jnp.asarray(y), group=jnp.asarray(g), num_groups=3)
    mc.run(jax.random.PRNGKey(1), **data)
    ref = {k: np.asarray(v) for k, v in mc.get_samples(group_by_chain=True).items()}

    # the clip never bites on the private draws (per-example gradients in the whitened metric)
    pot = run.potential
    scales = np.asarray(run.plan.posterior.model.prior_scales)
    phi = (np.asarray(run.draws()).reshape(-1, run.plan.dim) / scales)[::50]
    per = jax.vmap(lambda p: jax.vmap(jax.grad(pot.loss.fn), in_axes=(None, 0, 0))(p, pot.X, pot.y))(jnp.asarray(phi))
    assert float(jnp.max(jnp.linalg.norm(per, axis=-1))) < run.plan.posterior.model.clip_norm

    # ULA's step against the measured curvature of the whitened tempered potential
    ml = dp_infer.loss_from_model(hierarchical, X, y, clip_norm=40.0, model_kwargs=kw, index_ranges={"group": 3})
    ref_flat = jax.vmap(ml.unconstrain)({k: jnp.asarray(v.reshape((-1,) + v.shape[2:])[::100])
                                                 for k, v in ref.items()})
    s = jnp.asarray(scales)
    hess = jax.jit(jax.vmap(jax.hessian(
        lambda ph: potential_energy(temper(hierarchical, beta / n), (), data, ml.unravel(s * ph)))))
    H = np.asarray(hess(ref_flat / s), dtype=np.float64)
    M = float(np.max(np.linalg.eigvalsh(0.5 * (H + np.swapaxes(H, 1, 2)))[:, -1]))
    assert run.plan.step_size * M <= 0.25, (run.plan.step_size, M)

    got = run.get_samples(group_by_chain=True)
    a = az.from_dict({"posterior": got})["posterior"].to_dataset()
    b = az.from_dict({"posterior": ref})["posterior"].to_dataset()
    mcse = {(k, m): az.mcse(ds, method=m) for k, ds in (("a", a), ("b", b)) for m in ("mean", "sd")}
    for k in ref:
        ma, mb = np.asarray(a[k].mean(("chain", "draw"))), np.asarray(b[k].mean(("chain", "draw")))
        sa, sb = np.asarray(a[k].std(("chain", "draw"))), np.asarray(b[k].std(("chain", "draw")))
        se_m = np.hypot(np.asarray(mcse["a", "mean"][k]), np.asarray(mcse["b", "mean"][k]))
        se_s = np.hypot(np.asarray(mcse["a", "sd"][k]), np.asarray(mcse["b", "sd"][k]))
        assert np.all(np.abs(ma - mb) <= 4 * se_m + BIAS * sb), (k, ma, mb, se_m)
        assert np.all(np.abs(sa - sb) <= 4 * se_s + BIAS * sb), (k, sa, sb, se_s)
    # mixing_rate = 1 is declared; the hierarchy's slowest whitened direction relaxes a little slower
    # (measured: bulk ESS 349 for 400 planned with jax.random.normal's noise, 272 with the same seed
    # after the kernels moved to randomness.gaussian_noise, issue 40: one realisation each, an ESS
    # estimate of a few hundred draws moves by ~20%): the achieved numbers are reported, and the
    # comparison above uses the draws' own MCSEs. A chain that has not mixed sits far below half the plan.
    ach = run.report()["posterior"]["achieved"]
    # R-hat of ~400-700 effective draws over 4 chains spreads by ~0.01 around 1 (same seed, other
    # thread counts move it); a chain that has not mixed sits far above 1.02
    assert ach["max_rhat"] < 1.02 and ach["min_ess_bulk"] >= 200
