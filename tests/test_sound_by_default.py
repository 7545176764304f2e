"""Attacks on the defaults (issue "sound by default"): the noise is secret unless a seed is given,
neighbouring datasets give identical plans and reports on every route, the key never leaves."""

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dp_infer
from dp_infer import losses, randomness
from dp_infer.routes.calibrate import calibrate
from dp_infer.domains import Box, L2Ball
from dp_infer.model.bridge import loss_from_model
from dp_infer.rashomon import plan_rashomon, sample_rashomon

N, D = 200, 3


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = (X @ np.array([2.0, -1.0, 0.5]) + 0.3 * rng.normal(size=N) > 0).astype(float)
    return X, y


def _neighbour(X, y):
    """Replace-one neighbour: the first record moved to the opposite corner with its label flipped."""
    Xp, yp = X.copy(), y.copy()
    Xp[0] = -X[0] / np.linalg.norm(X[0])
    yp[0] = 1.0 - y[0]
    return Xp, yp


def _plan(horizon=0.05, num_draws=10_000):
    # thinning 1 (num_draws >= num_steps): every step is released, as the attack needs
    return calibrate(losses.logistic(), N, D, eps=1.0, delta=1e-5, route="trajectory",
                     horizon=horizon, num_chains=1, num_draws=num_draws)


def _regenerate_noise(key, num_steps):
    """The Gaussian noise a one-chain dp_infer.fit run draws from ``key`` (the published key
    schedule: split(key, 3)[0] -> NumPyro's chain key -> (chain_key, init_key) -> per step
    (next_key, noise_key) -> :func:`dp_infer.randomness.gaussian_noise`)."""
    key_run = jax.random.split(key, 3)[0]
    chain_key = jax.random.split(key_run)[0]
    out = []
    for _ in range(num_steps):
        chain_key, noise_key = jax.random.split(chain_key)
        out.append(np.asarray(randomness.gaussian_noise(noise_key, (D,))))
    return np.stack(out)


def _gradient_recovery_error(run, guessed_key):
    """Relative error of the full-batch gradients recovered from the released path with the
    noise regenerated from ``guessed_key`` (the attack of the issue)."""
    plan = run.plan
    path = run.draws(drop_burn_in=False)[0].astype(np.float64)
    start = np.zeros((1, D))
    theta = np.concatenate([start, path])
    xi = _regenerate_noise(guessed_key, plan.num_steps)
    h = plan.step_size
    recovered = (theta[:-1] - theta[1:] + math.sqrt(2 * h) * xi) / h
    true = np.asarray(jax.vmap(jax.grad(run.potential))(jnp.asarray(theta[:-1], dtype=jnp.float32)))
    return float(np.median(np.linalg.norm(recovered - true, axis=1) / np.linalg.norm(true, axis=1)))


def test_known_seed_recovers_the_gradients_and_the_default_does_not():
    X, y = _data()
    plan = _plan()
    # a user-chosen seed: whoever holds it regenerates the noise and reads off the gradients
    known = dp_infer.sample(losses.logistic(), X, y, plan, seed=12345, progress_bar=False)
    assert known.report()["randomness"]["reproducible_by_seed_holder"] is True
    err_known = _gradient_recovery_error(known, randomness.secret_key(12345)[0])
    assert err_known < 1e-3  # float32 path: ~1e-5 relative
    # the default: fresh OS entropy. The attacker's best guesses (the old default seed 0, the
    # user's seed from another run) leave errors at the noise level, sqrt(2h)|xi| / (h |grad U|)
    secret = dp_infer.sample(losses.logistic(), X, y, plan, progress_bar=False)
    assert secret.report()["randomness"]["reproducible_by_seed_holder"] is False
    noise_level = math.sqrt(2 / plan.step_size) * math.sqrt(D) / float(
        np.linalg.norm(jax.grad(secret.potential)(jnp.zeros(D))))
    for guess in (0, 12345):
        err = _gradient_recovery_error(secret, randomness.secret_key(guess)[0])
        assert err > 0.1 * noise_level and err > 1.0


def test_default_runs_draw_fresh_noise_and_never_write_the_key(tmp_path, monkeypatch):
    X, y = _data()
    plan = _plan(num_draws=50)
    a = dp_infer.sample(losses.logistic(), X, y, plan, progress_bar=False)
    b = dp_infer.sample(losses.logistic(), X, y, plan, progress_bar=False)
    assert not np.array_equal(a.draws(), b.draws())
    # plant recognisable key material and look for it in everything the run writes
    words = iter([0x5EC12E7A, 0x0BADCAFE])
    monkeypatch.setattr(randomness.secrets, "randbits", lambda k: next(words))
    run = dp_infer.sample(losses.logistic(), X, y, plan, progress_bar=False)
    from dp_infer.diagnostics import save
    from dp_infer.privacy.ledger import Ledger

    path = save(run.to_datatree(), tmp_path / "run.zip")
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", 2.0, 1e-5)
    led.charge("d", plan.event, run_label="dp-infer test")
    blobs = [json.dumps(run.report()), path.read_bytes().decode("latin-1"),
             (tmp_path / "l.sqlite").read_bytes().decode("latin-1")]
    for word in (0x5EC12E7A, 0x0BADCAFE):
        for text in (str(word), hex(word)[2:], hex(word)[2:].upper()):
            assert all(text not in blob for blob in blobs)


def test_rbg_keys_carry_128_bits():
    key, src = randomness.secret_key(impl="rbg")
    assert src.key_bits == 128 and jax.random.key_data(key).shape == (4,)
    X, y = _data()
    run = dp_infer.sample(losses.logistic(), X, y, _plan(num_draws=50), key_impl="rbg", progress_bar=False)
    assert run.report()["randomness"]["generator"] == "rbg"
    with pytest.raises(ValueError, match="key_impl must be one of"):
        randomness.secret_key(impl="md5")


# ------------------------------------------------------------------ neighbouring datasets


def _strip(report):
    return json.dumps(report, sort_keys=True)


@pytest.mark.parametrize("route,kw", [
    ("trajectory", dict(delta=1e-5, horizon=0.2, num_chains=2)),
    ("last_iterate", dict(delta=1e-5, num_chains=2)),
    ("pure", dict(delta=None, domain=L2Ball(D, 5.0), horizon=0.2)),
])
def test_neighbours_get_bit_identical_plans_and_reports(route, kw):
    X, y = _data()
    Xp, yp = _neighbour(X, y)
    loss = losses.logistic(l2=0.01) if route == "last_iterate" else losses.logistic()
    runs = [dp_infer.fit(loss, A, b, eps=1.0, route=route, seed=7, progress_bar=False, **kw)
            for A, b in ((X, y), (Xp, yp))]
    assert runs[0].plan == runs[1].plan
    assert _strip(runs[0].report()) == _strip(runs[1].report())
    # and the chains do differ (the data are used, only not by the plan)
    if route != "pure":  # a pure run keeps only its purified estimate, which with one key may
        # legitimately coincide on neighbours (the purifier's coin picked its uniform draw)
        assert not np.array_equal(runs[0].released_draws(), runs[1].released_draws())


def test_stationary_plan_is_a_function_of_declared_constants_only():
    loss = losses.logistic(l2=0.5)
    kw = dict(eps=1.0, delta=0.1, route="stationary", tv_target=0.01, max_steps=1e15, lam_rel=0.0)
    a = calibrate(loss, 50, 2, **kw)
    b = calibrate(dataclasses.replace(loss), 50, 2, **kw)
    assert a == b and a.init_law == "gaussian" and a.init_scale == pytest.approx(
        1 / math.sqrt(a.beta * (loss.constants.smoothness)))


@pytest.mark.parametrize("mode,kw", [
    ("path", dict(eps=1.0, delta=1e-5)),
    ("pure", dict(eps=1.0, domain=Box.cube(D, 3.0))),
])
def test_rashomon_neighbours_get_identical_plans_and_reports(mode, kw):
    X, y = _data()
    Xp, yp = _neighbour(X, y)
    loss = losses.logistic(l2=0.05)
    res = [sample_rashomon(loss, A, b, 0.02, mode=mode, horizon=0.2, num_chains=2, num_draws=50,
                           seed=3, **kw) for A, b in ((X, y), (Xp, yp))]
    assert _strip(res[0].privacy) == _strip(res[1].privacy)
    # the minimisers and L* of the two datasets differ, and nothing of them is in the result
    from dp_infer.rashomon import rashomon_minimum

    m0, m1 = rashomon_minimum(loss, X, y), rashomon_minimum(loss, Xp, yp)
    assert m0.value != m1.value
    text = _strip(res[0].privacy) + repr(dataclasses.asdict(res[0]))
    assert repr(m0.value)[:10] not in text and "L_star" not in text
    assert plan_rashomon(loss, N, D, 0.02, mode=mode, horizon=0.2, num_chains=2, num_draws=50, **kw) == \
        plan_rashomon(loss, N, D, 0.02, mode=mode, horizon=0.2, num_chains=2, num_draws=50, **kw)


# ------------------------------------------------------------------ certified routes only


def test_clipped_losses_are_refused_by_the_contraction_routes():
    loss = losses.clipped_loss(lambda t, x, y: jnp.log1p(jnp.exp(-(2 * y - 1) * jnp.dot(t, x))) + 0.05 * t @ t,
                               clip_norm=1.0, smoothness=0.35)
    for route in ("last_iterate", "stationary"):
        with pytest.raises(ValueError, match="contraction|drift is the loss gradient"):
            calibrate(loss, N, D, eps=1.0, delta=1e-5, route=route, lam_rel=0.1)
    plan = calibrate(loss, N, D, eps=1.0, delta=1e-5, lam_rel=0.1)
    assert plan.route == "trajectory"
    reasons = {o.route: o.reason for o in plan.options}
    assert "clips per-example gradients" in reasons["last_iterate"]


def test_stationary_route_refuses_a_projected_chain():
    with pytest.raises(ValueError, match="unprojected chain"):
        calibrate(losses.logistic(l2=0.5), 50, 2, eps=1.0, delta=0.1, route="stationary",
                  domain=L2Ball(2, 3.0), tv_target=0.01, max_steps=1e15, lam_rel=0.0)


# ------------------------------------------------------------------ NumPyro models


def _model(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 0.1).expand([X.shape[1]]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w + b), obs=y)


def test_model_prior_and_constraints_do_not_read_the_private_rows():
    X, y = _data()
    Xp, yp = _neighbour(X, y)
    a = loss_from_model(_model, X, y, clip_norm=1.0)
    b = loss_from_model(_model, Xp, yp, clip_norm=1.0)
    thetas = jax.random.normal(jax.random.PRNGKey(0), (5, a.dim))
    for t in thetas:
        assert float(a.prior_potential(t)) == float(b.prior_potential(t))
        assert float(jax.grad(a.prior_potential)(t)[0]) == float(jax.grad(b.prior_potential)(t)[0])
    # the prior's gradient is the N(0, 0.1) one whatever the data (no -3 / +3 from the first row)
    g = a.unravel(jax.grad(a.prior_potential)(jnp.ones(a.dim)))
    np.testing.assert_allclose(np.asarray(g["w"]), 1.0 / 0.1**2, rtol=1e-5)
    np.testing.assert_allclose(float(g["b"]), 1.0, rtol=1e-5)


def test_model_likelihood_summed_over_rows_is_refused():
    def summed(X=None, y=None):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        numpyro.factor("ll", jnp.sum(dist.Bernoulli(logits=X @ w).log_prob(y)))

    X, y = _data()
    with pytest.raises(ValueError, match="not batched by row"):
        loss_from_model(summed, X, y, clip_norm=1.0)


def test_model_with_a_discrete_latent_is_refused_with_its_name():
    def mixture(X=None, y=None):
        z = numpyro.sample("z", dist.Bernoulli(0.5))
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ w + z), obs=y)

    X, y = _data()
    with pytest.raises(ValueError, match="latent site 'z' is discrete"):
        loss_from_model(mixture, X, y, clip_norm=1.0)


def test_clipping_zeroes_non_finite_example_gradients():
    loss = losses.clipped_loss(lambda t, x, y: jnp.sqrt(jnp.dot(t, x)), clip_norm=1.0)
    X = np.array([[1.0, 0.0], [-1.0, 0.0]])
    g = np.asarray(jax.grad(lambda t: loss.mean(t, X, np.zeros(2)))(jnp.array([0.5, 0.0])))
    assert np.all(np.isfinite(g)) and np.linalg.norm(g) <= 0.5 * 1.0 + 1e-7


def test_final_draw_routes_export_only_their_draws():
    X, y = _data()
    run = dp_infer.fit(losses.logistic(l2=0.01), X, y, eps=1.0, delta=1e-5, route="last_iterate",
                       num_chains=3, seed=1, progress_bar=False)
    dt = run.to_datatree()
    post = dt["posterior"]["theta"].values
    assert post.shape == (3, 1, D)
    np.testing.assert_array_equal(post, run.draws(drop_burn_in=False)[:, -1:])
    # the divergence flag is a function of the released draws alone (not the kernel's sticky
    # flag over the unreleased iterates)
    np.testing.assert_array_equal(dt["sample_stats"]["diverging"].values, ~np.isfinite(post).all(axis=-1))
    from dp_infer.diagnostics import is_private

    assert is_private(dt)


def test_cli_matches_test_columns_by_name(tmp_path):
    from click.testing import CliRunner

    from dp_infer.cli import main

    X, y = _data()
    header = ["a", "b", "c", "label"]
    rows = [header] + [[*map(str, x), str(int(t))] for x, t in zip(X, y)]
    (tmp_path / "train.csv").write_text("\n".join(",".join(r) for r in rows) + "\n")
    perm = [2, 0, 1, 3]  # the test file's columns in another order
    (tmp_path / "test.csv").write_text("\n".join(",".join(r[i] for i in perm) for r in rows) + "\n")
    (tmp_path / "same.csv").write_text((tmp_path / "train.csv").read_text())
    accs = []
    for test in ("test.csv", "same.csv"):
        res = CliRunner().invoke(main, ["sample", str(tmp_path / "train.csv"), "--target", "label",
                                        "--test-csv", str(tmp_path / test), "--horizon", "0.3",
                                        "--no-progress", "--reproducible-seed", "4"])
        assert res.exit_code == 0, res.output
        accs.append(res.output.split("public test data")[1].split(":")[1].split()[0])
    assert accs[0] == accs[1]
