"""The float32 margin on a chain's gradient sensitivity (dp_infer.privacy.float32_margin), by closed form.

Oracle: the module's rule written out, ``max(1e-3, n 2^-25)``, whose two pieces meet between n = 33,554 and
33,555 (``1e-3 2^25 = 33,554.432``); the measurements behind the constants are tested in
tests/benchmarks/test_float32_gradient.py. Every plan that composes gradient differences multiplies its
real-arithmetic sensitivity by ``1 + margin`` and states the factor; those plans' own tests check that they do.
"""

import math

import pytest

from dp_infer.privacy import float32_margin as fm


@pytest.mark.parametrize("n, margin", [(1, 1e-3), (30_162, 1e-3), (33_554, 1e-3), (33_555, 33_555 / 2 ** 25),
                                       (10 ** 6, 10 ** 6 / 2 ** 25), (3 * 10 ** 7, 3 * 10 ** 7 / 2 ** 25)])
def test_the_margin_is_the_floor_up_to_33554_rows_then_n_times_2_to_the_minus_25(n, margin):
    assert fm.float32_gradient_margin(n) == margin
    assert fm.FLOAT32_GRADIENT_MARGIN == 1e-3 and fm.FLOAT32_MARGIN_PER_ROW == 2.0 ** -25
    assert isinstance(fm.float32_gradient_margin(n), float)


def test_the_margin_never_falls_as_n_grows():
    ns = [1, 10, 33_554, 33_555, 40_000, 10 ** 5, 10 ** 6, 10 ** 8]
    ms = [fm.float32_gradient_margin(n) for n in ns]
    assert ms == sorted(ms) and ms[3] > ms[2]
    # past the floor the planned sensitivity G / n (1 + margin) tends to G 2^-25 instead of 0
    big = fm.with_float32_margin(2.0 / 10 ** 9, 10 ** 9)
    assert big == pytest.approx(2.0 / 10 ** 9 + 2.0 * 2 ** -25, rel=1e-12)


@pytest.mark.parametrize("s, n", [(0.25, 100), (3e-5, 33_555), (1e-9, 10 ** 6)])
def test_the_planned_sensitivity_is_the_real_bound_times_one_plus_the_margin(s, n):
    assert fm.with_float32_margin(s, n) == s * (1.0 + fm.float32_gradient_margin(n))
    assert fm.with_float32_margin(s, n) > s


def test_the_assumption_names_the_bound_the_factor_and_the_module():
    assert fm.float32_margin_assumption(30_162, "G / n") == (
        "sensitivity G / n times 1 + 0.001 for the chain's float32 rounding (dp_infer.privacy.float32_margin)")
    said = fm.float32_margin_assumption(10 ** 6, "2C/n")
    assert said.startswith("sensitivity 2C/n times 1 + 0.0298 ")
    assert float(said.split("times 1 + ")[1].split()[0]) == pytest.approx(10 ** 6 / 2 ** 25, rel=2e-3)
    assert math.isclose(fm.float32_gradient_margin(10 ** 6), 0.0298, rel_tol=2e-3)
