"""A clipped loss's run releases the private count of the rows its clip touches (issue 41), as a model
run does: the count is composed into the plan's event (charged with the run, the total at the target),
``run.clipped_rows`` holds it, it survives a save and load, and where no count is made the report says
why instead of a bare None."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dp_infer
from dp_infer import losses
from dp_infer.model.clipping import DEFAULT_COUNT_SHARE, split_budget
from dp_infer.privacy.ledger import Ledger
from dp_infer.routes.calibrate import calibrate


def _example(theta, x, y):
    z = jnp.dot(theta, x)
    return jnp.logaddexp(0.0, z) - y * z


def _data(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ np.array([2.0, -1.0, 0.5])))).astype(float)
    return X, y


def test_a_clipped_loss_run_releases_a_charged_clip_count(tmp_path):
    X, y = _data()
    loss = losses.clipped_loss(_example, 0.5, smoothness=1.0)
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.register_dataset("d", eps_budget=5.0, delta_budget=1e-4)
    with pytest.warns(UserWarning, match="the clip .* is active on about"):
        run = dp_infer.fit(loss, X, y, eps=1.0, delta=1e-5, seed=1, progress_bar=False, num_draws=50,
                           ledger=ledger, dataset_id="d")
    c = run.clipped_rows
    assert c is not None and c["n"] == len(y) and c["clip_norm"] == 0.5
    eps_run, mu_count = split_budget(1.0, 1e-5, DEFAULT_COUNT_SHARE)
    assert c["mu"] == pytest.approx(mu_count) and c["noise_sd"] == pytest.approx(1 / mu_count)
    # the run is planned at eps_run, its event composed with the count's: the total is the target
    alone = calibrate(loss.constants, len(y), 3, eps=eps_run, delta=1e-5, num_draws=50)
    assert run.plan.beta == pytest.approx(alone.beta)
    assert run.plan.event.mu == pytest.approx(np.hypot(alone.event.mu, mu_count))
    assert run.report()["eps_spent"] == pytest.approx(1.0, rel=1e-6)
    (charge,) = ledger.history("d")  # one charge: the run and the count together
    assert charge["event"]["mu"] == pytest.approx(run.plan.event.mu)
    # the exact count at the released mean is within a few noise sds of the released one
    theta = jnp.asarray(run.posterior_mean(), dtype=jnp.float32)
    g = np.asarray(jnp.linalg.norm(jax.vmap(jax.grad(_example), in_axes=(None, 0, 0))(theta, X, y), axis=1))
    assert abs(c["noisy_count"] - int(np.sum(g > 0.5))) < 6 * c["noise_sd"]
    assert "released (charged, Gaussian-DP mu" in run.summary()
    back = dp_infer.PrivateRun.load(run.save(tmp_path / "r.zip"))
    assert back.clipped_rows["noisy_count"] == c["noisy_count"]


def test_no_count_says_why_and_costs_nothing():
    X, y = _data(n=400)
    loss = losses.clipped_loss(_example, 2.0, smoothness=1.0)
    off = dp_infer.fit(loss, X, y, eps=1.0, delta=1e-5, seed=1, progress_bar=False, num_draws=20, clip_count_share=0)
    assert off.clipped_rows is None
    assert "clip_count_share=0" in off.report()["clipped_rows_skipped"]
    assert off.plan.beta == calibrate(loss.constants, 400, 3, eps=1.0, delta=1e-5, num_draws=20).beta
    # an unclipped loss: nothing to count, nothing said, the plan unchanged
    plain = dp_infer.fit(losses.logistic(row_norm=10.0), X, y, eps=1.0, delta=1e-5, seed=1, progress_bar=False,
                         num_draws=20)
    assert plain.clipped_rows is None and "clipped_rows_skipped" not in plain.report()
    with pytest.raises(ValueError, match="no clip_norm"):
        dp_infer.fit(losses.logistic(row_norm=10.0), X, y, eps=1.0, delta=1e-5, clip_count_share=0.1)
    with pytest.raises(ValueError, match="clip_count_share must lie in"):
        dp_infer.fit(loss, X, y, eps=1.0, delta=1e-5, clip_count_share=1.5)
    with pytest.raises(ValueError, match="proximal route"):
        dp_infer.fit(losses.clipped_loss(_example, 2.0), X, y, eps=1.0, delta=1e-5, clip_count_share=0.1)


def test_a_seeded_runs_count_is_reproducible_and_its_warning_points_at_the_callers_line():
    # the count's key comes from the run's seed (infer.clip_count.count_key): the same seed gives the same noisy
    # count, another seed another one; the warning is attributed to this file's line, not to the package's frames
    X, y = _data(n=400)
    loss = losses.clipped_loss(_example, 0.5, smoothness=1.0)

    def count(seed):
        with pytest.warns(UserWarning, match="the clip .* is active on about") as rec:
            run = dp_infer.fit(loss, X, y, eps=1.0, delta=1e-5, seed=seed, progress_bar=False, num_draws=20)
        assert [r.filename for r in rec if "is active on about" in str(r.message)] == [__file__]
        return run.clipped_rows["noisy_count"]

    a = count(4)
    assert count(4) == a
    assert count(5) != a
