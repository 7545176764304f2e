"""Finding 2 of issue 30: a mechanism uses a loss's constants only on (a subset of) the domain
they were declared on.

Oracle: the exact one-shot privacy loss of the exponential mechanism exp(-beta L(theta; D)) on
C0 = [-10, 10], computed by integrating the two neighbouring densities on a fine grid (float64,
trapezoid; the grid error is below 1e-6, far below the gaps tested). With G declared on a ball
of radius 0.01 the privacy loss exceeds the claimed eps = 1; with G declared on C0 it does not;
the mechanisms refuse the first and accept the second.
"""

import math

import numpy as np
import pytest

from dp_infer import losses
from dp_infer.domains import Box, L2Ball, covers
from dp_infer.mechanisms.iterated_em import exponential_mechanism, iterated_exponential_mechanism
from dp_infer.mechanisms.noisy_gd import dp_gd, pure_dp_gd

N = 10
X = np.ones((N, 1))
Y = np.zeros(N)


def _exact_privacy_loss(beta, radius):
    """sup_theta |log p_D(theta) - log p_D'(theta)| for p ~ exp(-beta mean squared loss) on
    [-radius, radius]; D = 9 rows (1, 0) + (1, -1), D' = 9 rows (1, 0) + (0, 0)."""
    t = np.linspace(-radius, radius, 400001)
    common = 9 * (t - 0.0) ** 2 / 2
    la = -beta * (common + (t + 1.0) ** 2 / 2) / N
    lb = -beta * (common + 0.0) / N
    def logz(l):
        m = l.max()
        return m + math.log(np.trapezoid(np.exp(l - m), t))
    return float(np.max(np.abs((la - logz(la)) - (lb - logz(lb)))))


@pytest.mark.parametrize("c0_radius", [10.0, 20.0])
def test_constants_declared_on_a_smaller_ball_are_refused(c0_radius):
    eps, c0 = 1.0, L2Ball(1, c0_radius)
    small = losses.squared(1.0, L2Ball(1, 0.01))
    right = losses.squared(1.0, c0)
    # the oracle: what the old code would have run, and what the right constants give
    beta_small = eps * N / (small.constants.grad_diff * c0.diameter)
    beta_right = eps * N / (right.constants.grad_diff * c0.diameter)
    assert _exact_privacy_loss(beta_small, c0_radius) > 1.3 * eps
    assert _exact_privacy_loss(beta_right, c0_radius) <= eps
    for call in (lambda: exponential_mechanism(small, X, Y, eps=eps, domain=c0, strong_convexity=1.0, seed=1),
                 lambda: iterated_exponential_mechanism(small, X, Y, eps=eps, domain=c0, strong_convexity=1.0,
                                                        rounds=2, seed=1),
                 lambda: dp_gd(small, X, Y, eps=eps, delta=1e-5, domain=c0, steps=5, seed=1),
                 lambda: pure_dp_gd(small, X, Y, eps=eps, domain=c0, steps=5, seed=1)):
        with pytest.raises(ValueError, match="^domain: .*declared on L2Ball .*does not contain it") as ei:
            call()
        assert "\n" not in str(ei.value)


def test_constants_declared_on_the_run_domain_are_accepted():
    c0 = L2Ball(1, 10.0)
    right = losses.squared(1.0, c0)
    rel = dp_gd(right, X, Y, eps=1.0, delta=1e-5, domain=c0, steps=5, seed=1)
    assert np.all(np.abs(rel.value) <= 10.0 + 1e-6)
    rel = exponential_mechanism(right, X, Y, eps=1.0, domain=c0, strong_convexity=1.0, seed=1)
    assert rel.params["G"] == right.constants.grad_diff


def test_covers_is_exact_for_balls_and_boxes():
    assert covers(None, L2Ball(2, 5.0))
    assert covers(L2Ball(2, 1.0), L2Ball(2, 0.5, np.array([0.5, 0.0])))
    assert not covers(L2Ball(2, 1.0), L2Ball(2, 0.5, np.array([0.51, 0.0])))
    assert covers(Box.cube(2, 1.0), L2Ball(2, 1.0)) and not covers(Box.cube(2, 0.99), L2Ball(2, 1.0))
    assert covers(L2Ball(2, math.sqrt(2)), Box.cube(2, 1.0)) and not covers(L2Ball(2, 1.41), Box.cube(2, 1.0))
    assert not covers(L2Ball(3, 9.0), L2Ball(2, 1.0))
