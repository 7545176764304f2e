"""``constants_with_l2`` (public) with no declared smoothness (issue 30, finding 10).

Its signature takes ``smooth: float | None``: a loss without a smoothness bound keeps none after an
L2 term is added (``smooth + l2`` only when ``smooth`` is a number). The equivalent.toml entry had
called ``None`` unreachable because the built-in losses always pass a number; the function is
exported for custom losses.
"""

import math

from dp_infer.domains import L2Ball
from dp_infer.losses import constants_with_l2


def test_no_smoothness_stays_none_and_a_number_gets_the_l2_term():
    dom = L2Ball(dim=2, radius=1.0)
    c = constants_with_l2(1.0, 2.0, None, 0.5, dom, lambda r: None)
    assert c.smoothness is None and c.strong_convexity == 0.5
    assert constants_with_l2(1.0, 2.0, 3.0, 0.5, dom, lambda r: None).smoothness == 3.5
    # the L2 term's gradient l2 * theta adds l2 * r with r = sup ||theta|| = ||init|| + diameter = 2 here
    assert math.isclose(c.lipschitz, 1.0 + 0.5 * 2.0, rel_tol=1e-15)
