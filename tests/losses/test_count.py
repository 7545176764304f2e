"""Poisson loss constants against brute force over the declared domain.

Oracle: dense grids over z = <theta, x> in [-rR, rR] and y in [0, Y] of the per-example
gradient coefficient |e^z - y| (so ||grad|| = |e^z - y| ||x||), the curvature e^z and the loss
value; jax.grad of the implemented loss against the closed-form gradient.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer.domains import Box, L2Ball
from dp_infer.losses.count import max_param_norm, poisson, poisson_nll


@pytest.mark.parametrize("Y,r,R", [(20.0, 2.0, 1.0), (3.0, 1.5, 0.5), (1.0, 3.0, 1.0)])
def test_constants_match_brute_force(Y, r, R):
    loss = poisson(Y, L2Ball(4, r), row_norm=R)
    c = loss.constants
    z = np.linspace(-r * R, r * R, 4001)[:, None]
    y = np.linspace(0.0, Y, 401)[None, :]
    coef = np.abs(np.exp(z) - y)
    assert c.lipschitz == pytest.approx(R * coef.max(), rel=1e-9)  # attained at a grid corner
    assert c.grad_diff == pytest.approx(2 * c.lipschitz)
    assert c.smoothness == pytest.approx(R * R * np.exp(z).max(), rel=1e-9)
    val = np.exp(z) - y * z
    assert c.value_range >= val.max() - val.min() - 1e-9


def test_gradient_is_the_closed_form_and_bounded_on_the_ball():
    loss = poisson(10.0, L2Ball(3, 2.0))
    rng = np.random.default_rng(0)
    for _ in range(20):
        th = rng.normal(size=3)
        th *= 2.0 * rng.uniform() / np.linalg.norm(th)
        x = rng.normal(size=3)
        x /= max(1.0, np.linalg.norm(x))
        y = rng.uniform(0, 10)
        g = np.asarray(jax.grad(poisson_nll)(jnp.asarray(th), jnp.asarray(x), y))
        np.testing.assert_allclose(g, (math.exp(th @ x) - y) * x, rtol=1e-5)
        assert np.linalg.norm(g) <= loss.constants.lipschitz * (1 + 1e-6)


def test_l2_and_domain_radius():
    assert max_param_norm(L2Ball(2, 1.5, center=np.array([3.0, 4.0]))) == pytest.approx(6.5)
    assert max_param_norm(Box(np.array([-1.0, -3.0]), np.array([2.0, 1.0]))) == pytest.approx(math.sqrt(13))
    base, reg = poisson(5.0, L2Ball(2, 1.0)), poisson(5.0, L2Ball(2, 1.0), l2=0.3)
    assert reg.constants.strong_convexity == 0.3
    assert reg.constants.lipschitz == pytest.approx(base.constants.lipschitz + 0.3)
    assert reg.constants.grad_diff == base.constants.grad_diff  # the regulariser is the same for all rows


def test_bad_inputs():
    with pytest.raises(ValueError, match="bounded Domain"):
        poisson(5.0, None)
    with pytest.raises(ValueError, match="max_count"):
        poisson(-1.0, L2Ball(2, 1.0))
    loss = poisson(5.0, L2Ball(2, 1.0))
    with pytest.raises(ValueError, match=r"y must be integer counts in \{0, 1, \.\.\., 5\} \(max_count=5\)"):
        loss.check_data(np.zeros((2, 2)), np.array([1.0, 6.0]))
