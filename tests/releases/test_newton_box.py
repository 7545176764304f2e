"""``dp_infer.releases.newton.box_newton``: the box-constrained Newton solver of the public surrogate steps.

Oracles: the closed form of a quadratic's minimiser inside the box; scipy's L-BFGS-B (another algorithm) on the
box's faces and on a smooth convex objective; the float64 minimiser for an objective read in float32, where the
solver must stop once the model can no longer be told from rounding (it had run all 100 iterations, ~16 line-search
evaluations each: 2,800 evaluations of a 3-coordinate surrogate, 7 s of a model run's 14).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from dp_infer.releases.newton import box_newton

Q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))
A = Q @ np.diag([1e-3, 1.0, 10.0]) @ Q.T  # symmetric positive definite, condition number 1e4, rotated
A = 0.5 * (A + A.T)


def counted(objective):
    calls = {"n": 0}

    def f(v):
        calls["n"] += 1
        return objective(v)

    return f, calls


def quadratic(c):
    return lambda v: (0.5 * float((v - c) @ A @ (v - c)), A @ (v - c))


def test_a_quadratic_minimiser_inside_the_box_is_found_in_one_step():
    c = np.array([0.3, -0.8, 1.1])
    f, calls = counted(quadratic(c))
    v = box_newton(f, lambda v: A, 3, 5.0)
    assert v == pytest.approx(c, abs=1e-9)
    assert calls["n"] <= 3  # the start, the full step, at most one step that moves nothing


def lbfgsb(objective, dim, half_width):
    res = minimize(lambda v: objective(v)[0], np.zeros(dim), jac=lambda v: objective(v)[1], method="L-BFGS-B",
                   bounds=[(-half_width, half_width)] * dim, options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000})
    return res.x


def test_a_minimiser_outside_the_box_lands_on_the_faces_l_bfgs_b_finds():
    c = np.array([3.0, -4.0, 9.0])  # outside |v| <= 1 in every coordinate
    v = box_newton(quadratic(c), lambda v: A, 3, 1.0)
    assert np.all(np.abs(v) <= 1.0)
    assert v == pytest.approx(lbfgsb(quadratic(c), 3, 1.0), abs=1e-6)


def logistic_objective(dtype):
    """A logistic regression's mean nll plus a linear anchor (the surrogate's shape), evaluated in ``dtype``."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 3)) * np.array([1.0, 0.5, 0.2])
    y = (rng.random(2000) < 1.0 / (1.0 + np.exp(-X @ np.array([1.0, -2.0, 3.0])))).astype(float)
    shift = np.array([0.01, -0.02, 0.005])
    Xd, yd = X.astype(dtype), y.astype(dtype)

    def objective(v):
        z = Xd @ v.astype(dtype)
        val = np.mean(np.logaddexp(dtype(0), z) - yd * z)
        grad = Xd.T @ (1.0 / (1.0 + np.exp(-z)) - yd) / dtype(len(yd))
        return float(val) - float(v @ shift), grad.astype(np.float64) - shift

    def hessian(v):
        p = 1.0 / (1.0 + np.exp(-X @ v))
        return (X * (p * (1 - p))[:, None]).T @ X / len(y)

    return objective, hessian


def test_a_smooth_convex_objective_matches_l_bfgs_b():
    objective, hessian = logistic_objective(np.float64)
    f, calls = counted(objective)
    v = box_newton(f, hessian, 3, 5.0)
    assert v == pytest.approx(lbfgsb(objective, 3, 5.0), abs=1e-5)
    assert calls["n"] <= 20


def test_an_objective_read_in_float32_stops_at_its_resolution_near_the_float64_minimiser():
    """The float32 gradient's floor (about 1e-7 of its size) keeps a Newton step above 1e-9 for ever; the solver
    stops when the model's predicted decrease is below the rounding or the gradient no longer changes, within a few
    evaluations, at the float64 minimiser up to float32's resolution."""
    exact = box_newton(*logistic_objective(np.float64), 3, 5.0)
    objective, hessian = logistic_objective(np.float32)
    f, calls = counted(objective)
    v = box_newton(f, hessian, 3, 5.0)
    assert v == pytest.approx(exact, abs=1e-4)
    assert calls["n"] <= 30, calls
