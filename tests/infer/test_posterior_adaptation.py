"""The posterior mode with its metric adapted from the chains' own draws (``adapt_metric=True``).

Oracles: the path accountant's closed form over the WHOLE time (burn-in, windows, settling,
sampling) and its composition with the second moment; the realised per-step shifts of the worst
neighbouring pair under a metric that each simulated path adapts from its own draws, against the
accountant's mu (exact), and the privacy-loss random variable of those paths against
N(mu^2 / 2, mu^2) (empirical audit, MC tolerance); NUTS on the run's own final target (slow tier).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer import losses
from dp_infer.infer.posterior import fit_posterior
from dp_infer.losses.metric_clip import clipped_potential
from dp_infer.privacy import path as path_privacy
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.privacy.ledger import Ledger
from dp_infer.routes.posterior import plan_posterior, step_bound_matrix
from dp_infer.privacy.float32_margin import FLOAT32_GRADIENT_MARGIN
from dp_infer.routes.preconditioning import adapted_metric, precision_matrix
from dp_infer.releases.second_moment import private_second_moment


def _data(n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = np.concatenate([np.ones((n, 1)), rng.uniform(-1, 1, size=(n, d - 1))], axis=1)
    y = (X @ np.array([0.3, 1.5, -1.0])[:d] + 0.5 * rng.normal(size=n) > 0).astype(float)
    return X, y


LOSS = losses.logistic(row_norm=math.sqrt(3))


# ------------------------------------------------------------------ the plan


def test_plan_accounts_every_phase_with_the_clip_bound():
    X, _ = _data()
    sm = private_second_moment(X, max_sq_norm=3.0, mu=0.1, key=jax.random.PRNGKey(0))
    plan = plan_posterior(LOSS, 400, 3, eps=1.0, delta=1e-5, prior_precision=1.0, ess=200, second_moment=sm,
                          clip_radius=1.5, adapt_metric=True, adaptation_windows=(7.0, 11.0))
    post = plan.posterior
    ad = post.adaptation
    t = post.burn_in_time + 7.0 + 11.0 + ad.settle_time + post.sample_time
    assert ad.warmup_time == post.burn_in_time + 18.0
    kinetic = plan_posterior(LOSS, 400, 3, eps=1.0, delta=1e-5, prior_precision=1.0, ess=200, second_moment=sm,
                             clip_radius=1.5, adapt_metric=True, adaptation_windows=(7.0, 11.0),
                             kernel="underdamped", friction=3.0)
    assert kinetic.posterior.adaptation.windows == (21.0, 33.0)  # scaled by the friction
    # the sensitivity is the clip's 2 tau / n (not the admissible-rows bound in the planned metric)
    assert plan.sensitivity == pytest.approx(2 * 1.5 / (math.sqrt(plan.beta) * 400) * (1 + FLOAT32_GRADIENT_MARGIN),
                                             rel=1e-12)  # with the float32 margin
    mu_path = path_privacy.path_mu(plan.beta, plan.sensitivity, t, None, 4)
    assert plan.event.mu == pytest.approx(math.hypot(mu_path, 0.1), rel=1e-12)
    assert plan.event.mu <= gdp_mu(1.0, 1e-5) * (1 + 1e-12)
    # the step bound recovered from the plan is the planner's own matrix, at the clipped logistic
    # link's curvature bound 1/2 (the loss's own is 1/4; tests/losses/test_metric_clip.py)
    assert post.step.curvature == 0.25 and post.step.step_curvature == 0.5
    A = precision_matrix(sm, plan.beta, 0.5, np.ones(3), noise_margin=sm.noise_norm_bound)
    np.testing.assert_allclose(step_bound_matrix(plan), A, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kw, needle", [
    (dict(clip_radius=None), "adapt_metric=True needs clip_radius"),
    (dict(adaptation_windows=()), "adaptation_windows must be 'auto' or one or more"),
    (dict(adaptation_windows=(1.0, -2.0)), "adaptation_windows must be 'auto' or one or more"),
    (dict(adaptation_windows=(1.0, float("inf"))), "adaptation_windows must be 'auto' or one or more"),
    (dict(adaptation_windows="ab"), "adaptation_windows must be 'auto' or one or more"),
    (dict(adapt_metric="yes"), "adapt_metric must be True or False"),
])
def test_plan_bad_inputs(kw, needle):
    args = dict(prior_precision=1.0, clip_radius=1.5, adapt_metric=True)
    args.update(kw)
    with pytest.raises(ValueError, match=needle):
        plan_posterior(LOSS, 400, 3, eps=1.0, delta=1e-5, **args)


# ------------------------------------------------------------------ privacy of the adaptive path


@pytest.mark.slow
def test_worst_pair_under_a_metric_each_path_adapts_from_itself():
    """Two phases; the second's metric is adapted from each simulated path's own first-phase draws
    (so it differs from path to path and depends on the data). The rarest admissible row is clipped at
    every step in whatever metric the path uses, so every step's mean shift is 2 tau beta h / n in
    that step's coordinates: the realised Girsanov divergence equals the accountant's mu over the
    whole time, and the privacy-loss random variable is N(mu^2 / 2, mu^2) (exact Gaussian
    transitions; MC tolerance: se of the mean mu / sqrt(B), of the sd mu / sqrt(2 B))."""
    with jax.enable_x64(True):
        rng = np.random.default_rng(2)
        n = 30
        x = rng.uniform(-0.5, 0.5, size=n)
        y = rng.normal(size=n)
        R = 50.0  # the rarest row, with a residual beyond its level at every reachable theta
        xD, xD2 = np.append(x, R)[:, None], np.append(x, -R)[:, None]
        yD = np.append(y, 1000.0)
        n += 1
        c0, tau, beta, lam = 0.005, 0.001, 200.0, 2000.0  # c0 narrow: the draws spread wider
        loss = losses.huber(threshold=1.0, row_norm=100.0)  # the derivative clipped: the bound is attained

        def grads(xrows):
            def g(phi, c):
                _, V = clipped_potential(loss, xrows, yD, beta=beta, C=jnp.reshape(c, (1, 1)), tau=tau,
                                           prior_precision=[lam])
                return jax.grad(V)(phi)
            return jax.jit(jax.vmap(g))

        gD, gD2 = grads(xD), grads(xD2)
        B = 4000
        key = jax.random.PRNGKey(4)
        phases = ((0.05, 200), (0.02, 60))  # (step, steps): the second phase takes its own step
        c = jnp.full(B, c0)
        theta = jnp.zeros((B, 1))
        L = np.zeros(B)
        sq = np.zeros(B)  # sum of shift^2 / (2 h): the realised mu^2 of each path
        for k, (h, steps) in enumerate(phases):
            phi = theta / c[:, None]
            states = []
            for _ in range(steps):
                key, sub = jax.random.split(key)
                mD, mD2 = phi - h * gD(phi, c), phi - h * gD2(phi, c)
                new = mD + jnp.sqrt(2 * h) * jax.random.normal(sub, phi.shape)
                L += np.asarray((jnp.sum((new - mD2) ** 2, 1) - jnp.sum((new - mD) ** 2, 1)) / (4 * h))
                shift = np.asarray(jnp.abs(mD - mD2)[:, 0])
                np.testing.assert_allclose(shift, 2 * tau * beta * h / n, rtol=1e-9)
                sq += shift ** 2 / (2 * h)
                phi = new
                states.append(np.asarray(phi[:, 0] * c))
            theta = phi * c[:, None]
            if k == 0:  # each path adapts its own metric from its own draws (released, post-processing)
                S = np.array(states).T  # (B, steps)
                c = jnp.asarray([math.sqrt(adapted_metric(S[b, 100:, None], current_chol=[[c0]],
                                                          prior_precision=[lam])[0, 0]) for b in range(B)])
                assert float(jnp.min(c)) >= c0 and float(jnp.max(c)) > 1.05 * c0  # adapted, and per path
        mu_plan = path_privacy.path_mu(beta, 2 * tau / n, sum(h * s for h, s in phases))
        np.testing.assert_allclose(np.sqrt(sq), mu_plan, rtol=1e-9)
        assert abs(L.mean() - mu_plan ** 2 / 2) < 4 * mu_plan / math.sqrt(B)
        assert abs(L.std() / mu_plan - 1) < 4 / math.sqrt(2 * B)


# ------------------------------------------------------------------ runs


def test_adapted_run_charges_its_plan_and_extends_over_the_whole_path(tmp_path):
    X, y = _data()
    ledger = Ledger(tmp_path / "ledger.db")
    ledger.register_dataset("default", eps_budget=10.0, delta_budget=1e-4)
    # the overdamped kernel (friction None in the closed forms below; the default kinetic one is
    # checked over its whole path in tests/infer/test_one_door.py)
    run = fit_posterior(LOSS, X, y, eps=1.0, delta=1e-5, prior_precision=1.0, ess=100, seed=5,
                        progress_bar=False, clip_radius="auto", adapt_metric=True, ledger=ledger, kernel="langevin")
    plan = run.plan
    ad = plan.posterior.adaptation
    assert [p.time for p in ad.phases] == pytest.approx(
        [plan.posterior.burn_in_time + ad.windows[0], *ad.windows[1:],
         ad.settle_time + plan.posterior.sample_time])
    assert plan.horizon == pytest.approx(ad.phases[-1].time)  # the plan describes the final phase
    theta = run.draws()
    assert theta.shape[0] == 4 and np.all(np.isfinite(theta))
    # the final metric is never narrower than the planned one (expand-only), up to the prior cap
    # the releases charged with the chains (second moment, interval release), composed with the path
    mu_sm = math.sqrt(sum(p["mu"] ** 2 for p in plan.event.metadata["parts"][1:]))
    t_total = ad.warmup_time + plan.horizon
    mu = math.hypot(path_privacy.path_mu(plan.beta, plan.sensitivity, t_total, None, 4), mu_sm)
    assert plan.event.mu == pytest.approx(mu, rel=1e-9)
    steps = plan.thinning * 20
    run.extend(num_steps=steps, ledger=ledger)
    t_ext = ad.warmup_time + (plan.num_steps + steps) * plan.step_size
    mu_ext = math.hypot(path_privacy.path_mu(plan.beta, plan.sensitivity, t_ext, None, 4), mu_sm)
    assert run.plan.event.mu == pytest.approx(mu_ext, rel=1e-9)
    assert run.draws().shape[1] > theta.shape[1]
    spent = ledger.spent("default")
    assert spent["n_runs"] == 2
    from dp_infer.privacy.accountant import Accountant
    assert spent["eps"] >= Accountant([run.plan.event]).get_epsilon(1e-4) * (1 - 1e-9)  # never under-reported


@pytest.mark.slow
def test_adapted_run_matches_nuts_on_its_own_target():
    """The draws against NUTS on the run's final target (the clipped loss's Gibbs posterior clipped in the
    adapted metric, ``run.potential``), same temperature. Tolerances from the MC error: difference of
    means within 4 sd sqrt(1 / ESS_ours + 1 / ESS_nuts) with ESS >= 300 / ~800."""
    from tests.support.tempering import nuts_reference

    X, y = _data(n=2000, d=3, seed=1)
    run = fit_posterior(LOSS, X, y, eps=2.0, delta=1e-5, prior_precision=1.0, ess=400, seed=11,
                        progress_bar=False, clip_radius="auto", adapt_metric=True)
    ach = run.report()["posterior"]["achieved"]
    assert ach["max_rhat"] < 1.02 and ach["min_ess_bulk"] > 300
    ours = run.draws().reshape(-1, 3)
    U = run.potential
    ref = nuts_reference(U, 3)  # NON-PRIVATE reference, same target
    sd = ref.std(axis=0)
    assert np.all(np.abs(ours.mean(0) - ref.mean(0)) <= 4 * sd * math.sqrt(1 / 300 + 1 / 800))
    ratio = ours.std(0) / sd
    assert np.all((ratio > 0.85) & (ratio < 1.15))  # ULA at h M = 1 in the adapted metric: O(h) <= 2%


@pytest.mark.slow
def test_the_plan_before_sampling_is_identical_on_neighbouring_datasets():
    """Invariant 10 with the adapted metric: neighbours differing in the rarest admissible row (a
    flipped label too) get the same pre-sampling plan (``run.planned``); the final phase's metric is a
    release (post-processing of the draws), like the draws themselves."""
    rng = np.random.default_rng(0)
    n = 60
    X = np.column_stack([np.ones(n), rng.uniform(-1, 1, n)]) / math.sqrt(2)
    y = (rng.uniform(size=n) < 0.5).astype(float)
    X2, y2 = X.copy(), y.copy()
    X2[-1], y2[-1] = np.array([1.0, -1.0]) / math.sqrt(2), 1.0 - y[-1]
    X[-1] = np.array([1.0, 1.0]) / math.sqrt(2)
    loss = losses.logistic(row_norm=1.0)
    kw = dict(eps=1.0, delta=1e-5, prior_precision=1.0, ess=20, num_chains=2, preconditioner="prior", seed=5,
              progress_bar=False, clip_radius="auto")
    a1, a2 = fit_posterior(loss, X, y, **kw), fit_posterior(loss, X2, y2, **kw)
    assert a1.planned.posterior.adaptation is not None
    assert a1.planned == a2.planned
