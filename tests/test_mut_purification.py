"""Oracle tests for survivors of purification.py's mutation run (issue 19)."""

import math

from dp_infer.domains import L2Ball
from dp_infer.privacy import purification as PF


def test_cap_is_the_l1_diameter_of_an_l2_ball():
    # the cap bounds the l1 Wasserstein distance by the domain's l1 diameter, 2 r sqrt(d) for an l2
    # ball of radius r (attained at +-(r / sqrt(d)) (1, ..., 1)); capping at a smaller diameter (the l2
    # one, 2 r) would give less Laplace noise than Lemma 6 requires
    for dim, radius in [(4, 1.0), (9, 0.5), (100, 3.0)]:
        p = PF.purification_parameters(L2Ball(dim, radius), 1.0, 0.01, delta=0.5)
        assert p.capped and p.wasserstein_l1 == 2.0 * radius * math.sqrt(dim)
        assert p.laplace_scale == 2.0 * p.wasserstein_l1 / 1.0
