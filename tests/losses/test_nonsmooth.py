"""Non-smooth losses: declared constants by brute force, smoothed twins' bias and curvature,
and the proximal route end to end through fit() and the CLI."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from click.testing import CliRunner

import dp_infer
from dp_infer.losses import nonsmooth as LN
from dp_infer.cli import main as cli_main
from dp_infer.domains import L2Ball
from dp_infer.infer.proximal import ProximalRun, proximal_plan_for
from dp_infer.losses import clipped_loss


def _rows(rng, n, d, R=1.0):
    X = rng.normal(size=(n, d))
    return R * X / np.linalg.norm(X, axis=1, keepdims=True) * rng.uniform(0.3, 1.0, size=(n, 1))


def _labels(loss, rng, n):
    return rng.choice([0.0, 1.0], size=n) if "hinge" in loss.name else rng.uniform(-3, 3, size=n)


LOSSES = [lambda: LN.hinge(), lambda: LN.absolute(), lambda: LN.quantile(0.8), lambda: LN.quantile(0.1, row_norm=2.0),
          lambda: LN.smoothed_hinge(0.3), lambda: LN.smoothed_quantile(0.7, 0.4)]


@pytest.mark.parametrize("make", LOSSES)
def test_declared_constants_hold_by_brute_force(make):
    """Random theta pairs and example pairs never beat L (values) and G (gradient differences)."""
    loss = make()
    rng = np.random.default_rng(0)
    d, R = 3, loss.row_norm
    X = _rows(rng, 300, d, R)
    y = _labels(loss, rng, 300)
    th = rng.normal(size=(150, d)) * 3
    th2 = th + rng.normal(size=(150, d)) * rng.uniform(1e-3, 2, size=(150, 1))
    v = jax.vmap(lambda t: loss.per_example(t, X, y))
    lip = np.abs(np.asarray(v(th) - v(th2))) / np.linalg.norm(th - th2, axis=1)[:, None]
    assert lip.max() <= loss.constants.lipschitz * (1 + 1e-5)
    g = np.asarray(jax.vmap(lambda t: jax.vmap(jax.grad(loss.example), in_axes=(None, 0, 0))(t, X, y))(th))
    assert np.linalg.norm(g, axis=-1).max() <= loss.constants.lipschitz * (1 + 1e-5)
    diffs = np.linalg.norm(g[:, :, None, :] - g[:, None, :, :], axis=-1)
    assert diffs.max() <= loss.constants.grad_diff * (1 + 1e-5)
    if loss.constants.smoothness is None:
        assert "smoothed" not in loss.name


def test_grad_diff_is_attained():
    # hinge: one row x, labels 1 and 0, theta with |<theta, x>| < 1: gradients -x and +x, |diff| = 2R
    h = LN.hinge(row_norm=1.5)
    x = jnp.array([1.5, 0.0])
    th = jnp.array([0.1, 0.3])
    g = jax.grad(h.example)(th, x, 1.0) - jax.grad(h.example)(th, x, 0.0)
    assert float(jnp.linalg.norm(g)) == pytest.approx(h.constants.grad_diff)
    # pinball at tau: residual positive for one label, negative for the other: (tau + 1 - tau) R <= 2 max(tau, 1-tau) R
    q = LN.quantile(0.5)
    g = jax.grad(q.example)(jnp.zeros(2), jnp.array([1.0, 0.0]), 5.0) - jax.grad(q.example)(jnp.zeros(2), jnp.array([1.0, 0.0]), -5.0)
    assert float(jnp.linalg.norm(g)) == pytest.approx(q.constants.grad_diff)


def test_smoothed_twins_are_close_and_smooth():
    # on a fine grid of <theta, x> (x = e_1, R = 1), float64: the gap to the kinked loss is in
    # [0, w/2] (hinge) or [0, w/4] (pinball) with the maximum attained; the gradient's
    # difference quotients never exceed the declared smoothness M
    z = np.linspace(-4, 4, 20001)
    with jax.enable_x64(True):
        x = jnp.array([1.0])
        th = jnp.asarray(z)[:, None]
        for w in [0.1, 0.5]:
            pairs = [(LN.smoothed_hinge(w), LN.hinge(), 1.0, w / 2)]
            pairs += [(LN.smoothed_quantile(t, w), LN.quantile(t), 0.0, w / 4) for t in (0.2, 0.5, 0.9)]
            for smooth, kinked, label, gap in pairs:
                a = np.asarray(jax.vmap(lambda t: smooth.fn(t, x, label))(th))
                b = np.asarray(jax.vmap(lambda t: kinked.fn(t, x, label))(th))
                assert np.all(b - a >= -1e-12) and np.max(b - a) == pytest.approx(gap, rel=1e-3)
                g = np.asarray(jax.vmap(jax.grad(lambda t: smooth.fn(t, x, label)))(th))[:, 0]
                assert np.max(np.abs(np.diff(g)) / np.diff(z)) <= smooth.constants.smoothness * (1 + 1e-9)


def test_bad_inputs_are_refused_with_the_parameter_name():
    with pytest.raises(ValueError, match="tau"):
        LN.quantile(1.0)
    with pytest.raises(ValueError, match="row_norm"):
        LN.hinge(row_norm=-1)
    with pytest.raises(ValueError, match="0/1 labels"):
        LN.hinge().check_data(np.ones((3, 2)) * 0.1, np.array([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="label_bound"):
        LN.absolute(label_bound=1.0).check_data(np.ones((2, 2)) * 0.1, np.array([0.5, 3.0]))


# ---------------------------------------------------------------------------- the proximal route


def _toy(n=120, d=3, seed=0, flip=None):
    rng = np.random.default_rng(seed)
    X = _rows(rng, n, d)
    y = (X @ np.array([2.0, -1.0, 0.5]) + 0.2 * rng.normal(size=n) > 0).astype(float)
    if flip is not None:
        y = y.copy()
        y[flip] = 1.0 - y[flip]
    return X, y


def test_fit_sends_nonsmooth_losses_to_the_proximal_route():
    X, y = _toy()
    run = dp_infer.fit(LN.hinge(), X, y, eps=1.0, delta=1e-5, num_chains=2, seed=3, max_steps=1e6)
    assert isinstance(run, ProximalRun)
    rep = run.report()
    assert rep["route"] == "proximal" and rep["eps_spent"] <= 1.0 + 1e-9
    assert rep["randomness"]["source"] == "seed given by the caller"
    assert run.draws().shape == (2, 1, 3) and np.all(np.isfinite(run.estimate()))
    # the report carries the two delta parts separately
    assert rep["delta_privacy"] + rep["delta_sampling"] == pytest.approx(1e-5)
    dt = run.to_datatree()
    assert dt is not None


def test_neighbouring_datasets_give_identical_plans():
    X, y = _toy()
    _, y2 = _toy(flip=5)
    a = proximal_plan_for(LN.quantile(0.3), *X.shape, eps=2.0, delta=1e-6).as_dict()
    b = proximal_plan_for(LN.quantile(0.3), *X.shape, eps=2.0, delta=1e-6).as_dict()
    assert a == b  # plans take (n, d, constants) only; y2 is never passed
    run1 = dp_infer.fit(LN.hinge(), X, y, eps=1.0, delta=1e-5, seed=4, max_steps=1e6)
    run2 = dp_infer.fit(LN.hinge(), X, y2, eps=1.0, delta=1e-5, seed=4, max_steps=1e6)
    assert run1.plan.as_dict() == run2.plan.as_dict()


@pytest.mark.slow
def test_seed_taylor_oracle_runs_end_to_end_with_its_tv_bound():
    # seed 002 Algorithm 2 as the oracle: the plan's TV per draw includes T x the oracle's explicit bound
    # (n = 6 and eps = 0.3 keep kappa, hence the ~3e4 kappa steps of this oracle, small)
    X = _rows(np.random.default_rng(3), 6, 2)
    run = dp_infer.fit(LN.absolute(), X, X @ np.array([1.0, -1.0]), eps=0.3, delta=1e-5, rgo="taylor", seed=2)
    p = run.plan
    assert p.rgo == "taylor" and p.tv_oracle_per_call > 0
    assert p.tv_per_draw == pytest.approx(p.tv_outer + p.num_steps * p.tv_oracle_per_call)
    assert (1 + math.exp(0.3)) * p.tv_per_draw <= p.delta_sampling * (1 + 1e-9)
    # about 2 proposals per oracle call and 2e single-example evaluations per proposal (NON-PRIVATE info)
    assert 1.5 < run.debug_info["proposals_per_step"] < 2.5
    assert run.debug_info["evaluations_per_step"] / run.debug_info["proposals_per_step"] == pytest.approx(2 * math.e, rel=0.1)


def test_proximal_route_refuses_what_it_cannot_certify():
    X, y = _toy()
    with pytest.raises(ValueError, match="R\\^d"):
        dp_infer.fit(LN.hinge(domain=L2Ball(3, 5.0)), X, y, eps=1.0, delta=1e-5, seed=0)
    with pytest.raises(ValueError, match="Lipschitz"):
        dp_infer.fit(clipped_loss(lambda t, x, yy: jnp.abs(jnp.dot(t, x) - yy), 1.0), X, y, eps=1.0,
                     delta=1e-5, seed=0)
    with pytest.raises(ValueError, match="delta"):
        dp_infer.fit(LN.hinge(), X, y, eps=1.0, delta=None, seed=0)
    with pytest.raises(ValueError, match="max_steps"):
        dp_infer.fit(LN.hinge(), X, y, eps=1.0, delta=1e-5, seed=0, rgo_scale=0.5, max_steps=10)
    with pytest.raises(ValueError, match="Langevin routes"):
        dp_infer.fit(LN.hinge(), X, y, eps=1.0, delta=1e-5, seed=0, horizon=3.0)


def test_cli_sample_with_hinge_and_quantile_losses(tmp_path):
    rng = np.random.default_rng(2)
    n = 150
    X = rng.uniform(-0.5, 0.5, size=(n, 2))
    yb = (X[:, 0] - X[:, 1] > 0).astype(int)
    yq = X[:, 0] + 0.1 * rng.normal(size=n)
    for name, yy, extra in [("hinge", yb, []), ("quantile", yq, ["--quantile", "0.9"])]:
        path = tmp_path / f"{name}.csv"
        path.write_text("\n".join(["a,b,t"] + [f"{X[i, 0]:.5f},{X[i, 1]:.5f},{yy[i]}" for i in range(n)]) + "\n")
        res = CliRunner().invoke(cli_main, ["sample", str(path), "--target", "t", "--loss", name, *extra,
                                                     "--eps", "1", "--chains", "1", "--no-progress", "--reproducible-seed", "1"])
        assert res.exit_code == 0, res.output
        assert "proximal" in res.output and "eps" in res.output
