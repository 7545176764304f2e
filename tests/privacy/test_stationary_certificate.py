"""The stationary calibrator's beta is certified by the accountant at the target (issue 30, item 5).

``stationary_beta_max`` computes beta = m (mu* / s)^2 from the Gaussian inverse mu* and then nudges
it down until ``gdp_log_delta`` -- the rounding-bounded upper bound that the accountant and the
ledger use -- meets the target. A re-run of stationary.py's mutants found that nothing tested the
nudge with several draws: with ``/ sqrt(num_draws)`` for ``* sqrt(num_draws)`` in its check, the
nudge accepts the raw beta, whose delta the accountant then puts above the target (the exact
value, 60-digit mpmath, stays ~3e-12 below it: the accountant's bound is that much conservative).
The cases are the grid points (of 432: eps in {0.3, 1, 2, 4}, delta in {1e-3, 1e-5, 1e-7}, s in
{0.01, 0.1, 0.3}, m in {0.5, 1, 3}, draws in {2, 3, 5, 7}) where the raw float beta is above the
largest certified one. Oracles: the accountant's delta of the event the calibrated beta gives (what
the ledger charges) at the target eps, and the exact Gaussian profile in mpmath (safe, and tight to
1e-9).
"""

import math

import mpmath
import pytest

from dp_infer.privacy import stationary as S
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.conversions import gdp_mu
from tests.support.mp_oracles import gdp_delta_mp

CASES = [(0.3, 1e-7, 0.3, 1.0, 3), (0.3, 1e-7, 0.1, 0.5, 7), (0.3, 1e-7, 0.1, 3.0, 3),
         (0.3, 1e-7, 0.3, 3.0, 3)]


@pytest.mark.parametrize("eps, delta, s, m, nd", CASES)
def test_the_accountant_certifies_the_calibrated_beta_with_several_draws(eps, delta, s, m, nd):
    b = S.stationary_beta_max(eps, delta, sensitivity=s, strong_convexity=m, num_draws=nd)
    raw = m * (gdp_mu(eps, delta) / math.sqrt(nd) / s) ** 2
    assert b < raw  # a case where the nudge has work to do
    ev = S.stationary_event(b, s, m, num_draws=nd)
    assert Accountant([ev]).get_log_delta(eps) <= math.log(delta)  # the ledger's figure meets the target
    with mpmath.workdps(60):
        def exact(beta):
            return gdp_delta_mp(eps, mpmath.mpf(s) * mpmath.sqrt(mpmath.mpf(beta) / m) * mpmath.sqrt(nd))
        assert exact(b) <= delta and exact(b * (1 + 1e-9)) > delta
