"""Finding 3 of issue 30: the proximal route needs a convex loss, declared and enforced.

The issue's non-convex loss ``min(|z - y|, 0.5)`` (a capped absolute loss of the score z) is
refused before any key is drawn when it does not declare convexity; declared convex falsely, the
linearised oracle sees a negative Bregman gap (a capped loss lies below its tangent) and the run
is refused instead of silently clipping the gap. Oracle for the gap itself: for f = min(|z|, 0.5)
at w = 0.4 (subgradient 1), f(2) - f(0.4) - 1 * 1.6 = 0.5 - 0.4 - 1.6 < 0.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer import fit, losses
from dp_infer.infer.proximal import fit_proximal, proximal_plan_for
from dp_infer.kernels import proximal as prox
from dp_infer.losses import LossConstants, glm_loss


def _capped(convex):
    R = 1.0
    consts = LossConstants(lipschitz=R, grad_diff=2 * R, smoothness=None, convex=convex)
    return glm_loss("capped_absolute", lambda z, y: jnp.minimum(jnp.abs(z - y), 0.5), consts, R)


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    return X, rng.uniform(-1, 1, 60)


def test_a_loss_without_declared_convexity_is_refused_before_sampling():
    X, y = _data()
    loss = _capped(False)
    for call in (lambda: fit_proximal(loss, X, y, eps=1.0, delta=1e-5, seed=1),
                 lambda: fit(loss, X, y, eps=1.0, delta=1e-5, route="proximal", seed=1),
                 lambda: proximal_plan_for(loss, 60, 2, eps=1.0, delta=1e-5)):
        with pytest.raises(ValueError, match="^loss: the proximal route needs a convex loss") as ei:
            call()
        assert "\n" not in str(ei.value)


def test_builtin_nonsmooth_losses_declare_convexity():
    from dp_infer.losses import nonsmooth as ns

    for loss in (ns.hinge(), ns.absolute(label_bound=1.0), ns.quantile(0.3, label_bound=1.0), losses.logistic(),
                 losses.huber()):
        assert loss.constants.convex, loss.name
    assert not losses.clipped_loss(lambda t, x, y: jnp.sum(t), 1.0).constants.convex


@pytest.mark.slow
def test_a_negative_gap_is_counted_not_clipped():
    def f(x, row):
        return jnp.minimum(jnp.abs(x[0] - row), 0.5)

    data = jnp.asarray([0.0])
    with jax.enable_x64(True):
        rgo = prox.linearised_rgo(lambda x, row: f(x, row), data, step_size=1.0, strong_convexity=1.0)
        # Gaussian part centred near 0.4 with sd ~ 0.7: many proposals land past the cap
        keys = jax.random.split(jax.random.PRNGKey(0), 20)
        run = jax.jit(jax.vmap(rgo.sample, in_axes=(0, None)))
        _, info = run(keys, jnp.asarray([0.8]))
    assert int(np.sum(info.convexity_violations)) > 0
    with jax.enable_x64(True):
        ok = prox.linearised_rgo(lambda x, row: jnp.abs(x[0] - row), data, step_size=1.0, strong_convexity=1.0)
        _, info = jax.jit(jax.vmap(ok.sample, in_axes=(0, None)))(keys, jnp.asarray([0.8]))
    assert int(np.sum(info.convexity_violations)) == 0


@pytest.mark.slow
def test_a_falsely_declared_convex_loss_is_refused_after_its_gap_goes_negative():
    X, y = _data()
    with pytest.raises(ValueError, match="^loss: 'capped_absolute' is declared convex but a Bregman gap"):
        fit_proximal(_capped(True), X, y, eps=0.3, delta=1e-5, seed=1)
