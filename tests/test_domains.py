"""Domains: projections onto the set, the L2 ball's uniform law, one-line errors for bad input."""

import math
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dp_infer import datasets, domains, losses


@pytest.mark.parametrize("dom", [domains.L2Ball(3, 2.0, np.array([1.0, 0, 0])),
                                 domains.Box(np.array([-1.0, 0.0, 2.0]), np.array([1.0, 3.0, 2.5]))])
def test_domain_projection_properties(dom):
    rng = np.random.default_rng(4)
    pts = jnp.asarray(rng.normal(size=(500, 3)) * 5)
    p = dom.project(pts)
    np.testing.assert_allclose(dom.project(p), p, atol=1e-5)             # idempotent
    assert bool(jnp.all(dom.contains(p, tol=1e-5)))
    a, b = p[:250], p[250:]
    assert bool(jnp.all(jnp.linalg.norm(a - b, axis=1)
                        <= jnp.linalg.norm(pts[:250] - pts[250:], axis=1) + 1e-5))  # non-expansive
    u = dom.sample_uniform(jax.random.PRNGKey(0), (2000,))
    assert bool(jnp.all(dom.contains(u, tol=1e-5)))
    # no two points farther apart than the diameter
    assert float(jnp.max(jnp.linalg.norm(u[:1000] - u[1000:], axis=1))) <= dom.diameter + 1e-6
    assert bool(dom.contains(dom.default_init()))


def test_l2ball_uniform_radial_law():
    """Uniform in a d-ball: P(||x|| <= r R) = r^d; check at r = 0.8 within 4 binomial s.e."""
    d, N = 3, 20000
    u = domains.L2Ball(d, 2.0).sample_uniform(jax.random.PRNGKey(1), (N,))
    frac = float(jnp.mean(jnp.linalg.norm(u, axis=1) <= 1.6))
    p = 0.8**d
    assert abs(frac - p) < 4 * math.sqrt(p * (1 - p) / N)


def test_domain_bad_inputs():
    with pytest.raises(ValueError, match="radius"):
        domains.L2Ball(2, -1.0)
    with pytest.raises(ValueError, match="upper"):
        domains.Box(np.array([1.0]), np.array([0.0]))
    with pytest.raises(ValueError, match="dim"):
        domains.Euclidean(0)
