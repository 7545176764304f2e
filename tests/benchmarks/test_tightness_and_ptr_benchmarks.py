"""The benchmarks behind results.md's tightness and PTR tables (issue 40, parts 3 and 7)."""

import math

import numpy as np
import pytest

from benchmarks import ptr, tightness
from dp_infer.routes import newton_release, preconditioning


def test_tightness_compares_the_two_constants_and_restores_the_exact_one():
    rows = tightness.rows(eps_list=(1.0,))
    old, new = rows
    assert old["constant"].startswith("2") and new["constant"].startswith("sqrt(2)")
    assert abs(new["noise_sd"] / old["noise_sd"] - math.sqrt(0.5)) < 1e-12
    assert abs(new["snr"] / old["snr"] - math.sqrt(2)) < 1e-12
    assert new["beta_over_n"] == old["beta_over_n"] and new["steps"] <= old["steps"]
    # the benchmark swaps the constant to compare and puts the exact one back
    assert preconditioning.GRAM_SENSITIVITY_FACTOR == math.sqrt(2) == newton_release.GRAM_SENSITIVITY_FACTOR


def test_ptr_rows_spend_at_most_eps_and_count_refusals():
    x = np.random.default_rng(0).integers(20, 60, size=5000).astype(float)
    r = ptr.one(x, 1.0, 1.0, range(5))
    assert r["refused"] == 0 and r["ptr_mae"] is not None and r["pure_mae"] >= 0
    small = ptr.one(x[:30], 0.1, 1.0, range(3))   # 30 rows: the test refuses at this eps
    assert small["refused"] == 3 and small["ptr_mae"] is None
    text = ptr.table([r, small])
    assert text.count("\n") == 3 and "| 30 | 1 | 0.1 | 3 / 3 | — |" in text


def test_minibatch_tightness_rows_order_the_three_accountings():
    (r,) = tightness.minibatch_rows(settings=((1.5, 0.01, 100),))
    # the old bound and the antipodal curve are both valid upper bounds on the pair's exact eps, which the
    # PLD approaches from above; the curve is the tighter of the two; the accountant now reports the PLD of
    # the event itself (dp-accounting's, at the same grid: equal up to the route's 1e-6 margin on delta)
    assert r["eps_pld"] * (1 - 1e-3) <= r["eps_curve"] < r["eps_old"]
    assert r["eps_curve"] / r["eps_pld"] < 1.25 < r["eps_old"] / r["eps_pld"]  # measured 1.223 and 2.180
    assert r["route"] == "pld" and r["eps_new"] == pytest.approx(r["eps_pld"], rel=1e-4)
    assert r["beta_gain"] > 1.3  # measured 1.45 (the curve alone: 1.347)
