"""Property tests (Hypothesis) of the accountant over its whole parameter space.

Oracles that could disagree with the code: each composed event kind has a realisable mechanism
with exactly its guarantee (GDP -> the Gaussian shift, zCDP -> the Gaussian with mu^2/2 = rho,
pure eps -> binary randomized response), whose exact eps at delta is a LOWER bound on any valid
report; dp-accounting gives independent UPPER references (analytic Gaussian, RDP accountant).
Monotonicity: more steps / chains / a larger parameter never lowers eps, a smaller delta never
lowers eps, a larger eps never raises delta.

Example counts are bounded (``max_examples``) and deadlines off, so the file stays a few seconds.
"""

import math

import dp_accounting
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rpa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import special

from dp_infer.privacy import conversions as C
from dp_infer.privacy import events as E
from dp_infer.privacy.accountant import Accountant

DP_ORDERS = np.asarray(rpa.DEFAULT_RDP_ORDERS, dtype=np.float64)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
FEW = settings(SETTINGS, max_examples=15)  # ledgers with pure events build PLDs: slower per example


def log_uniform(lo, hi):
    return st.floats(math.log(lo), math.log(hi)).map(math.exp)


MU = log_uniform(1e-4, 15.0)
RHO = log_uniform(1e-9, 30.0)
PURE = log_uniform(1e-3, 2.0)
DELTA = log_uniform(1e-14, 0.2)
COUNT = st.integers(1, 2000)


def rr_epsilon(eps, delta):
    """Exact eps at delta of binary randomized response with parameter eps (pure eps-DP, tight)."""
    v = math.exp(eps) - delta * (1.0 + math.exp(eps))
    return max(0.0, math.log(v)) if v > 0 else 0.0


@st.composite
def ledgers(draw, kinds=("gdp", "zcdp", "pure")):
    n = draw(st.integers(1, 3))
    items = []
    for _ in range(n):
        k = draw(st.sampled_from(kinds))
        c = draw(st.integers(1, 50))
        if k == "gdp":
            items.append((E.GdpEvent(draw(MU) / math.sqrt(c)), c))
        elif k == "zcdp":
            items.append((E.ZcdpEvent(draw(RHO) / c), c))
        else:
            items.append((E.PureDpEvent(draw(PURE) / c), c))
    return items


def lower_oracle(event, count, delta):
    """Exact eps of a realisable mechanism with the guarantee of ``count`` x ``event``."""
    if isinstance(event, E.GdpEvent):
        return C.gdp_epsilon(event.mu * math.sqrt(count), delta)
    if isinstance(event, E.ZcdpEvent):
        return C.gdp_epsilon(math.sqrt(2.0 * event.rho * count), delta)
    # one randomized response is a lower bound for k of them (post-processing: drop the rest)
    return rr_epsilon(event.epsilon, delta)


@SETTINGS
@given(ledgers(), DELTA)
def test_composition_is_never_below_a_realisable_part(items, delta):
    e = Accountant(items).get_epsilon(delta)
    for ev, c in items:
        assert e >= lower_oracle(ev, c, delta) - 1e-9 * max(1.0, e)


@FEW
@given(ledgers(), DELTA, st.integers(1, 5))
def test_more_repetitions_never_lower_eps(items, delta, extra):
    e = Accountant(items).get_epsilon(delta)
    ev, c = items[0]
    more = [(ev, c + extra)] + items[1:]
    assert Accountant(more).get_epsilon(delta) >= e * (1 - 1e-9) - 1e-12
    # adding any further event never lowers eps either
    assert Accountant(items + [(E.GdpEvent(0.01), 1)]).get_epsilon(delta) >= e * (1 - 1e-9) - 1e-12


@FEW
@given(ledgers(), DELTA, log_uniform(1.0 + 1e-6, 100.0))
def test_smaller_delta_never_lowers_eps_and_delta_is_decreasing_in_eps(items, delta, factor):
    acc = Accountant(items)
    e_hi = acc.get_epsilon(delta)
    e_lo = acc.get_epsilon(delta / factor)
    assert e_lo >= e_hi * (1 - 1e-9) - 1e-12
    if math.isfinite(e_hi):
        # at the reported eps the total delta meets the target, up to the PLD route's pessimism
        # on the delta side (safety margins and discretisation: < 1e-4 relative in delta)
        assert acc.get_log_delta(e_hi) <= math.log(delta) + 1e-4
        assert acc.get_log_delta(e_hi + 0.1) <= acc.get_log_delta(e_hi) + 1e-12


@SETTINGS
@given(MU, COUNT, DELTA)
def test_gdp_route_matches_dp_accounting_analytic_gaussian(mu, count, delta):
    acc = Accountant().compose(E.GdpEvent(mu), count=count)
    total = mu * math.sqrt(count)
    ref = dp_accounting.get_epsilon_gaussian(1.0 / total, delta)
    e = acc.get_epsilon(delta)
    assert math.isclose(e, ref, rel_tol=1e-7, abs_tol=1e-9)
    assert C.gdp_log_delta(e, acc.gdp_mu()) <= math.log(delta)  # exact safe side for the composed mu


@SETTINGS
@given(RHO, COUNT, DELTA)
def test_linear_curves_between_the_gaussian_and_dp_accounting_rdp(rho, count, delta):
    acc = Accountant().compose(E.ZcdpEvent(rho), count=count)
    e = acc.get_epsilon(delta)
    racc = dp_accounting.rdp.RdpAccountant(orders=DP_ORDERS)
    racc.compose(dp_accounting.ZCDpEvent(rho), count)
    assert e <= racc.get_epsilon(delta) + 1e-12       # denser grid + continuous order: never looser
    assert e >= C.gdp_epsilon(math.sqrt(2 * rho * count), delta) - 1e-12   # never below a realisable mechanism
    assert e <= C.zcdp_epsilon_mironov(rho * count, delta) + 1e-12


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["gdp", "zcdp"]), log_uniform(1e-4, 3.0)), min_size=1, max_size=4), DELTA)
def test_rdp_route_never_looser_than_dp_accounting_rdp_accountant(parts, delta):
    events, dpe = [], []
    for k, x in parts:
        if k == "gdp":
            events.append(E.GdpEvent(x))
            dpe.append(dp_accounting.GaussianDpEvent(1.0 / x))
        else:
            events.append(E.ZcdpEvent(x * x / 2))
            dpe.append(dp_accounting.ZCDpEvent(x * x / 2))
    acc = Accountant(events + [E.ZcdpEvent(1e-12)])  # force the RDP route (not GDP-only)
    racc = dp_accounting.rdp.RdpAccountant(orders=DP_ORDERS)
    for d in dpe:
        racc.compose(d)
    racc.compose(dp_accounting.ZCDpEvent(1e-12))
    e = acc.get_epsilon(delta)
    routes = acc.epsilon_by_route(delta)
    # the accountant's order grid contains dp-accounting's default one: never looser than it
    assert routes["rdp_dp_accounting"] <= racc.get_epsilon(delta) + 1e-12
    assert e <= routes["rdp_dp_accounting"] + 1e-12
    rho = sum(x * x / 2 for _, x in parts) + 1e-12
    assert e >= C.gdp_epsilon(math.sqrt(2 * rho), delta) - 1e-12


@SETTINGS
@given(PURE, st.integers(1, 40), DELTA)
def test_pure_composition_between_optimal_and_basic(eps, k, delta):
    from dp_infer.privacy import exact as X

    e = Accountant([(E.PureDpEvent(eps), k)]).get_epsilon(delta)
    assert e <= k * eps * (1 + 1e-12)
    assert e >= X.pure_composition_epsilon(eps, k, delta) - 1e-9  # Kairouz-Oh-Viswanath optimum


@SETTINGS
@given(MU, log_uniform(1e-9, 1e-3), DELTA)
def test_tv_error_costs_exactly_the_stated_slack(mu, tv, delta):
    acc = Accountant([E.GdpEvent(mu, tv_error=tv)])
    e = acc.get_epsilon(delta)
    if math.isfinite(e):
        total = C.gdp_delta(e, mu) + (1 + math.exp(e)) * tv
        assert total <= delta * (1 + 1e-9)
        assert e >= C.gdp_epsilon(mu, delta)   # sampling error never makes a run more private
    else:  # infeasible: the privacy delta plus the slack exceeds delta at every eps (checked on a grid)
        # (1 + e^eps) tv < delta bounds the feasible eps; the Gaussian profile vectorised in log_ndtr
        # (accurate to ~1e-12 relative at these arguments, far inside the 1e-6 margin)
        grid = np.linspace(0.0, math.log(max(delta / tv - 1.0, 1.0)), 6001)
        la, lb = special.log_ndtr(-grid / mu + mu / 2), special.log_ndtr(-grid / mu - mu / 2)
        priv = np.exp(la) * -np.expm1(np.minimum(grid + lb - la, 0.0))
        assert np.min(priv + (1 + np.exp(grid)) * tv) > delta * (1 - 1e-6)


@SETTINGS
@given(MU, DELTA, st.integers(1, 10**6))
def test_events_round_trip_through_json(mu, delta, count):
    acc = Accountant([(E.GdpEvent(mu), count), E.PureDpEvent(0.1), E.ZcdpEvent(1e-3)])
    back = Accountant.from_dict(acc.to_dict())
    assert back.ledger == acc.ledger
