"""Per-loss behaviour lives on the loss (issue 38 part 4): the built-in losses keep the values the
name-keyed tables had, and a loss defined in this file alone clips, plans and predicts."""

from __future__ import annotations

import math
import pickle
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import expit

import dp_infer
from dp_infer import losses
from dp_infer.domains import L2Ball
from dp_infer.infer.prediction import loss_predictive
from dp_infer.losses import glm, nonsmooth
from dp_infer.losses.base import constants_with_l2, glm_loss
from dp_infer.losses.behaviour import CUSTOM, LossBehaviour, linear_predictive
from dp_infer.losses.count import poisson
from dp_infer.losses.metric_clip import clippable, clipped_link
from dp_infer.losses.registry import BUILTIN_BEHAVIOURS, loss_behaviour
from dp_infer.routes.posterior import plan_posterior


def _builtins():
    ball = L2Ball(2, 1.0)
    return [losses.logistic(), losses.logistic(row_norm=1.3, l2=0.1), losses.multinomial_logistic(3),
            losses.squared(1.0, ball), losses.huber(1.5), losses.huber(0.7, row_norm=2.0, l2=0.2),
            glm.smoothed_hinge(0.7), glm.smoothed_hinge(0.3, row_norm=1.3, l2=0.1), poisson(5.0, ball),
            nonsmooth.hinge(), nonsmooth.absolute(), nonsmooth.quantile(0.3), nonsmooth.smoothed_hinge(0.4),
            nonsmooth.smoothed_quantile(0.3)]


# ---------------------------------------------------------------------------------------------
# the built-in losses: the old tables' values (literal oracle)
# ---------------------------------------------------------------------------------------------

#: metric_clip.CLIPPED_CURVATURE_FACTOR before the move: the clippable losses and their factors
OLD_FACTOR = {"logistic": 2.0, "huber": 1.0, "smoothed_hinge": 1.0}


@pytest.mark.parametrize("loss", _builtins(), ids=lambda loss: loss.name)
def test_builtin_behaviour_keeps_the_old_tables(loss):
    b = loss.behaviour
    assert clippable(loss) == (loss.name in OLD_FACTOR)
    if loss.name in OLD_FACTOR:
        assert b.clipped_curvature_factor == OLD_FACTOR[loss.name]
    # the old metric_clip._params: the threshold from the declared link bound, gamma from M = R^2/gamma + l2
    params = dict(b.clip_params)
    if loss.name == "huber":
        assert params == {"threshold": float(loss.constants.link_derivative_bound)}
    elif loss.name == "smoothed_hinge":
        old = loss.row_norm ** 2 / (loss.constants.smoothness - loss.l2)
        assert params.keys() == {"smoothing"} and params["smoothing"] == pytest.approx(old, rel=1e-14)
    else:
        assert params == {}
    assert b.smooth == (loss.constants.smoothness is not None)
    assert loss_behaviour(loss.name) is not None and loss_behaviour(loss.name).name == b.name
    assert b.one_coefficient_per_feature == (loss.num_params(4) == 4)


def test_builtin_predictions_are_the_old_rules():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(7, 3))
    theta = rng.normal(size=(5, 3))
    old = {"logistic": expit(X @ theta.T).mean(axis=1), "poisson": np.exp(X @ theta.T).mean(axis=1),
           "huber": (X @ theta.T).mean(axis=1), "squared": (X @ theta.T).mean(axis=1)}
    kinds = {"logistic": "binary", "poisson": "count", "huber": "continuous", "squared": "continuous"}
    for name, mean in old.items():
        got = loss_predictive(name, theta, X)
        assert np.array_equal(got["mean"], mean) and got["kind"] == kinds[name]
        assert ("probs" in got) == (name == "logistic")
    W = rng.normal(size=(5, 3 * 4))
    logits = np.einsum("nd,sdk->snk", X, W.reshape(5, 3, 4))
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p = (p / p.sum(axis=-1, keepdims=True)).mean(axis=0)
    got = loss_predictive("multinomial_logistic", W, X)
    assert np.array_equal(got["probs"], p) and np.array_equal(got["mean"], p @ np.arange(4))
    for name in ("hinge", "absolute", "quantile(0.5)", "smoothed_hinge", "model_nll", "clipped"):
        with pytest.raises(ValueError, match="no prediction rule"):
            loss_predictive(name, theta, X)


def test_point_predictions_cli_names_and_registry():
    from dp_infer.cli.fit_commands import SAMPLE_LOSSES
    from dp_infer.cli.rashomon import LOSSES
    from dp_infer.model.bridge import MODEL_NLL

    # the CLIs' old conditions: test metrics for logistic, the hinge's sign, absolute/quantile's value
    assert {b.name: b.point_prediction for b in BUILTIN_BEHAVIOURS if b.point_prediction == "probability"} == {
        "logistic": "probability"}
    assert loss_behaviour("hinge").point_prediction == "label"
    assert loss_behaviour("absolute").point_prediction == loss_behaviour("quantile(0.9)").point_prediction == "value"
    from dp_infer.infer.proximal import ProximalRun

    X, final = np.array([[1.0, -2.0], [0.5, 0.5]]), np.array([[1.0, 0.5], [0.0, 0.5]])
    z = X @ final.mean(axis=0)
    assert np.array_equal(ProximalRun(None, final, {}, loss_name="hinge").predict(X), (z > 0).astype(int))
    for name in ("absolute", "quantile(0.3)"):  # the stored name of a quantile loss carries its level
        assert np.array_equal(ProximalRun(None, final, {}, loss_name=name).predict(X), z)
    with pytest.raises(ValueError, match="no prediction rule"):
        ProximalRun(None, final, {}, loss_name="logistic").predict(X)
    # the CLIs' old --loss tables
    assert list(SAMPLE_LOSSES) == ["logistic", "huber", "hinge", "quantile"]
    opts = {"row_norm": 2.0, "huber_threshold": 0.5, "quantile_level": 0.25}
    for name, want in [("logistic", losses.logistic(row_norm=2.0)), ("huber", losses.huber(0.5, row_norm=2.0)),
                       ("hinge", nonsmooth.hinge(row_norm=2.0)), ("quantile", nonsmooth.quantile(0.25, row_norm=2.0))]:
        got = SAMPLE_LOSSES[name].from_cli(opts)
        assert got.name == want.name and got.constants == want.constants and got.behaviour == want.behaviour
    assert {k: b.name for k, b in LOSSES.items()} == {"logistic": "logistic", "smoothed-hinge": "smoothed_hinge",
                                                     "squared": "squared"}
    assert [k for k, b in SAMPLE_LOSSES.items() if not b.smooth] == ["hinge", "quantile"]
    # registry: a stored name with its parameter maps to the family; an unknown name to nothing
    assert loss_behaviour("quantile(0.9)") is nonsmooth.QUANTILE and loss_behaviour("no-such-loss") is None
    assert losses.clipped_loss(lambda t, x, y: jnp.sum(t), 1.0).behaviour is CUSTOM
    assert MODEL_NLL.fit_refusal is not None and "would drop the model's prior" in MODEL_NLL.fit_refusal
    with pytest.raises(ValueError, match="point_prediction"):
        LossBehaviour(point_prediction="sign")


# ---------------------------------------------------------------------------------------------
# a new loss in this file alone: log-cosh regression with its clipped link and prediction rule
# ---------------------------------------------------------------------------------------------

def _logcosh(r):
    a = jnp.abs(r)
    return a + jnp.log1p(jnp.exp(-2.0 * a)) - math.log(2.0)


def _clipped_logcosh(z, y, a, params):
    """log cosh of the residual with its derivative tanh(r) clipped at a (a >= 1: unchanged)."""
    r = z - y
    big = a >= 1.0
    a_s = jnp.where(big, 0.5, a)  # a safe level where nothing is clipped
    r_k = jnp.arctanh(a_s)  # tanh(r_k) = a
    ar = jnp.abs(r)
    inside = big | (ar <= r_k)
    lin = _logcosh(r_k) + a_s * (jnp.where(inside, r_k, ar) - r_k)
    return jnp.where(inside, _logcosh(jnp.where(inside, r, 0.0)), lin)


#: |phi'| = |tanh r| <= 1, phi'' = sech^2 r <= 1; the clipped link's curvature is at most the loss's own
LOGCOSH = LossBehaviour(name="logcosh", clipped_link=_clipped_logcosh, clipped_curvature_factor=1.0,
                        predictive=linear_predictive(lambda s: s, "continuous"), point_prediction="value")


def logcosh(row_norm: float = 1.0) -> losses.PerExampleLoss:
    R = float(row_norm)
    consts = constants_with_l2(R, 2.0 * R, R * R, 0.0, None, lambda r: None, link=1.0, convex=True)
    return glm_loss("logcosh", lambda z, y: _logcosh(z - y), consts, R, None, 0.0, None, behaviour=LOGCOSH)


def test_a_new_loss_clips_plans_and_predicts_from_one_file():
    loss = logcosh()
    assert clippable(loss)
    # the clipped link: the loss's own inside the level, derivative bounded by a everywhere
    f = clipped_link(loss)
    z = jnp.linspace(-6.0, 6.0, 41)
    y = jnp.zeros_like(z)
    for a in (0.3, 0.8, 2.0):
        aa = jnp.full_like(z, a)
        d = jax.vmap(jax.grad(f))(z, y, aa)
        assert float(jnp.max(jnp.abs(d))) <= a + 1e-6
    assert np.allclose(np.asarray(f(z, y, jnp.full_like(z, jnp.inf))), np.asarray(_logcosh(z)))
    # the planner reads the behaviour's curvature factor: a larger one plans a smaller step
    kw = dict(eps=1.0, delta=1e-5, prior_precision=1.0, ess=50, clip_radius=math.sqrt(3))
    p1 = plan_posterior(loss, 400, 3, **kw)
    p2 = plan_posterior(replace(loss, behaviour=replace(LOGCOSH, clipped_curvature_factor=2.0)), 400, 3, **kw)
    assert p2.step_size < p1.step_size and p2.event == p1.event

    rng = np.random.default_rng(1)
    n = 400
    X = rng.normal(size=(n, 3))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = X @ np.array([0.8, -0.5, 0.3]) + 0.3 * rng.normal(size=n)
    run = dp_infer.fit(loss, X, y, eps=2.0, delta=1e-5, target="posterior", prior_precision=1.0, ess=20,
                       num_chains=2, seed=5, progress_bar=False, adapt_metric=False, interval_share=0.0)
    assert run.potential_description.get("clip_tau") is not None  # the default clip ("auto") is on
    assert run.potential_description["loss"]["name"] == "logcosh"
    Xt = X[:9]
    pred = run.predict(Xt, max_draws=None)
    draws = run.draws().reshape(-1, run.plan.dim)
    assert np.array_equal(pred, loss_predictive(loss, draws, Xt, max_draws=None)["mean"])
    assert np.allclose(pred, (Xt @ draws.T).mean(axis=1))
    # a copy without the sampled loss knows only its name, which no built-in loss has
    with pytest.raises(ValueError, match="no prediction rule for the loss 'logcosh'"):
        pickle.loads(pickle.dumps(run)).predict(Xt)
