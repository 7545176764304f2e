"""The accountant's report where no route gives a usable figure (issue 30, finding 10).

* A ledger with no route at all (an approximate event whose deltas sum to >= 1, so no basic
  route, with a zCDP event, so no PLD route, and no RDP route because of the approximate event):
  delta_privacy must be a probability (the trivial delta = 1), not e^1 = 2.718 (the equivalent.toml
  entry `best = 1.0` had been called unreachable).
* Where every route gives delta = 1 (a vacuous figure), the report names one of the routes that
  gives it, not "none".
* ``rdp_curve`` returns the orders as float64 whatever numbers they were given as.
"""

import math

import numpy as np

from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.events import ApproxDpEvent, PureDpEvent, ZcdpEvent


def test_a_ledger_with_no_route_reports_delta_at_most_one():
    acc = Accountant([(ApproxDpEvent(1.0, 0.6), 2), (ZcdpEvent(0.1), 1)])
    rep = acc.report(eps=1.0)
    assert rep["delta_privacy"] == 1.0 and rep["log_delta_privacy"] == 0.0  # the trivial bound
    assert rep["route"] == "none" and rep["routes_log_delta"] == {}
    assert math.isinf(acc.get_epsilon(1e-5))


def test_a_vacuous_delta_names_a_route():
    # eps = 0 for a 1000-DP event: every route answers delta = 1 (log delta = 0)
    rep = Accountant([PureDpEvent(1000.0)]).report(eps=0.0)
    assert rep["delta_privacy"] == 1.0
    assert rep["route"] in rep["routes_log_delta"], rep["route"]
    assert rep["routes_log_delta"][rep["route"]] == 0.0


def test_rdp_curve_echoes_float64_orders():
    acc = Accountant([ZcdpEvent(0.1)])
    orders, values = acc.rdp_curve([2, 3, 2**70])
    assert orders.dtype == np.float64 and orders.tolist() == [2.0, 3.0, 2.0**70]
    np.testing.assert_allclose(values, 0.1 * orders, rtol=1e-15)  # zCDP: rho * alpha
