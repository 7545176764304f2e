"""Finding 10 of issue 30: ``pure_dp_rdp`` on the safe side of its exact value, up to eps = 1e4.

Oracle: the closed form D_alpha = 1/(alpha - 1) log((e^{alpha eps} + e^{(1 - alpha) eps}) /
(1 + e^eps)) evaluated in mpmath at 80 digits (no cancellation, no overflow). The library's value
must never be below it (a report below the exact envelope under-reports privacy loss) and never
above the trivial envelopes min(eps, alpha eps^2 / 2). The accountant must turn a pure event of
eps up to 1e4 into a finite (eps, delta) without raising. The equivalent.toml entries the audit
found not equivalent (``x = (a + 0.5) eps``: about 1e-14 below the exact value; ``x = (a - 1.5)
eps``: NaN at eps = 1500) are killed here.
"""

import math

import mpmath
import numpy as np
import pytest

from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.conversions import pure_dp_rdp
from dp_infer.privacy.events import PureDpEvent

EPS = [1e-8, 1e-4, 0.01, 0.3, 1.0, 3.0, 10.0, 100.0, 299.0, 301.0, 1000.0, 1500.0, 5000.0, 1e4]
ALPHAS = [1.0001, 1.01, 1.25, 1.5, 2.0, 3.0, 8.0, 32.0, 256.0, 1e4]


def exact_mp(eps, a):
    with mpmath.workdps(80):
        e, a = mpmath.mpf(eps), mpmath.mpf(a)
        num = mpmath.log((mpmath.exp(a * e) + mpmath.exp((1 - a) * e)) / (1 + mpmath.exp(e)))
        return num / (a - 1)


@pytest.mark.parametrize("eps", EPS)
def test_pure_dp_rdp_is_never_below_the_exact_envelope(eps):
    got = pure_dp_rdp(eps, np.asarray(ALPHAS))
    assert np.all(np.isfinite(got))
    for a, g in zip(ALPHAS, got):
        ex = exact_mp(eps, a)
        assert mpmath.mpf(float(g)) >= ex, (eps, a, float(g), float(ex))  # no tolerance: the safe side
        assert g <= min(eps, a * eps * eps / 2) * (1 + 2e-14)  # the trivial envelopes, up to the rounding-up
        # and not needlessly loose: within float rounding of the exact value (relative 1e-12)
        assert float(g) <= float(ex) * (1 + 1e-12) + 1e-300


@pytest.mark.parametrize("eps", [1000.0, 1500.0, 1e4])
def test_the_accountant_handles_large_pure_events(eps):
    got = Accountant([PureDpEvent(epsilon=eps)]).get_epsilon(1e-5)
    assert math.isfinite(got) and 0 < got <= eps * (1 + 1e-12)


# where the two branches meet, x = (alpha - 1/2) eps = 300: both forms are evaluated just below
# and just above the switch (a mis-placed switch moves a value a few 1e-15 below the exact one)
SWITCH = [(eps, 300.0 / eps + 0.5 + d) for eps in (0.1, 0.5, 1.0, 2.0, 10.0, 100.0)
          for d in (-0.9 / eps, -0.4 / eps, -1e-9, 1e-9, 0.4 / eps) if 300.0 / eps + 0.5 + d > 1.0]


@pytest.mark.parametrize("eps,a", SWITCH)
def test_pure_dp_rdp_is_safe_side_at_the_branch_switch(eps, a):
    g = float(pure_dp_rdp(eps, np.asarray([a]))[0])
    assert mpmath.mpf(g) >= exact_mp(eps, a), (eps, a)
    assert g <= float(exact_mp(eps, a)) * (1 + 1e-12)
