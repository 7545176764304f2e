"""``dp_infer.releases.newton.box_newton``: the box-constrained Newton solver of the public surrogate steps.

Oracles: the closed form of a quadratic's minimiser inside the box; scipy's L-BFGS-B (another algorithm) on the
box's faces and on a smooth convex objective; the float64 minimiser for an objective read in float32, where the
solver must stop once the model can no longer be told from rounding (it had run all 100 iterations, ~16 line-search
evaluations each: 2,800 evaluations of a 3-coordinate surrogate, 7 s of a model run's 14).
"""

from __future__ import annotations

import warnings

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


def test_a_minimiser_on_some_faces_in_20_dimensions_matches_l_bfgs_b():
    """Some coordinates on a face, the rest inside, curvatures from 1e-3 to 10: the bounded subproblem must be solved
    to its tolerance (BVLS stopped early returns a step off the model's minimiser, and the run ends elsewhere)."""
    rng = np.random.default_rng(5)
    Qr, _ = np.linalg.qr(rng.normal(size=(20, 20)))
    Ar = Qr @ np.diag(np.geomspace(1e-3, 10.0, 20)) @ Qr.T
    Ar = 0.5 * (Ar + Ar.T)
    c = rng.normal(size=20) * 1.5

    def objective(v):
        return 0.5 * float((v - c) @ Ar @ (v - c)), Ar @ (v - c)

    v = box_newton(objective, lambda v: Ar, 20, 1.0)
    on_face = np.abs(v) == 1.0
    assert 0 < on_face.sum() < 20
    assert v == pytest.approx(lbfgsb(objective, 20, 1.0), abs=1e-5)


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


def test_every_point_evaluated_or_returned_is_in_the_box():
    """``v + step`` with the step bounded by ``half_width - v`` can round one ulp past a face (88 of 2,000 random
    problems did): the solver clips the trial point before it evaluates it, so no evaluation or answer leaves the
    box, on either face."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        Qr, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        Ar = Qr @ np.diag(rng.uniform(0.01, 10.0, 3)) @ Qr.T
        Ar = 0.5 * (Ar + Ar.T)
        half_width, c = float(rng.uniform(0.01, 3.0)), rng.normal(size=3) * 10.0
        seen = []

        def objective(v, Ar=Ar, c=c, seen=seen):
            seen.append(v.copy())
            return 0.5 * float((v - c) @ Ar @ (v - c)), Ar @ (v - c)

        v = box_newton(objective, lambda v, Ar=Ar: Ar, 3, half_width)
        assert np.all(np.abs(np.array(seen + [v])) <= half_width)


def test_the_objective_scale_does_not_change_the_path():
    """Newton's steps are invariant to scaling the objective by a constant; so is the eigenvalue floor (relative to the
    largest curvature or to the gradient over the box), so an objective 1e-20 times smaller takes the same steps to the
    same minimiser (an absolute floor, or one relative to the curvature's inverse, would stall it)."""
    objective, hessian = logistic_objective(np.float64)
    s = 1e-20

    def small(v):
        f, g = objective(v)
        return s * f, s * g

    f1, calls1 = counted(objective)
    fs, calls_s = counted(small)
    v1 = box_newton(f1, hessian, 3, 5.0)
    vs = box_newton(fs, lambda v: s * hessian(v), 3, 5.0)
    assert vs == pytest.approx(v1, abs=1e-9)
    assert calls_s["n"] == calls1["n"]


def test_a_linear_objective_goes_to_the_corner_in_one_step():
    """No curvature at all: the floor (1e-12 of the gradient's size over the box's width) makes the model's step about
    1e12 box widths, so the box's corner is reached in one step, for a box 1e7 wide too, and without an overflow or a
    warning for a gradient of any size (1e-100 to 1e150: a floor without the gradient's size puts ``g / sqrt(1e-312)``
    past the float range)."""
    for scale, half_width in ((1.0, 1.0), (1.0, 1e7), (1e-100, 1.0), (1e150, 1.0)):
        g = scale * np.array([1.0, -2.0, 0.5])
        f, calls = counted(lambda v, g=g: (float(g @ v), g.copy()))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            v = box_newton(f, lambda v: np.zeros((3, 3)), 3, half_width)
        assert np.array_equal(v, -half_width * np.sign(g))
        assert calls["n"] <= 3


def test_a_flat_start_at_the_minimiser_is_returned():
    """Zero gradient and zero curvature at the start (``sum v^4``): the floor stays positive (1e-312), so the model's
    step is 0, not 0 / 0, and the start is returned after one evaluation."""
    f, calls = counted(lambda v: (float(np.sum(v ** 4)), 4.0 * v ** 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a zero floor would divide 0 by 0
        v = box_newton(f, lambda v: np.diag(12.0 * v ** 2), 3, 1.0)
    assert np.array_equal(v, np.zeros(3))
    assert calls["n"] == 1


def test_a_step_of_at_most_1e_9_is_not_taken():
    """The documented stop: a model step that moves no coordinate more than 1e-9 ends the run at the current point,
    without a line search (identity curvature, so the step is minus the gradient, exactly)."""
    for size in (1e-9, 0.5e-9):
        grad = np.array([size, 0.0, 0.0])
        f, calls = counted(lambda v, grad=grad: (float(grad @ v), grad.copy()))
        v = box_newton(f, lambda v: np.eye(3), 3, 1.0)
        assert np.array_equal(v, np.zeros(3))
        assert calls["n"] == 1


def test_an_understated_curvature_is_corrected_by_the_line_search():
    """A model curvature half the objective's (the surrogate's Hessian is a model, not the objective's own): the full
    step lands at twice the minimiser, where the quadratic is back at its starting value; Armijo's sufficient decrease
    rejects it and the first halving lands on the minimiser (a search that accepted no decrease would oscillate between
    0 and 2m)."""
    m = np.array([0.4, -0.3, 0.2])
    f, calls = counted(quadratic(m))
    v = box_newton(f, lambda v: 0.5 * A, 3, 5.0)
    assert v == pytest.approx(m, abs=1e-9)
    assert calls["n"] <= 5


def test_max_iter_bounds_the_iterations_at_100_by_default():
    """An objective that always decreases and whose gradient never repeats (nor vanishes) meets no stopping test: the
    solver takes ``max_iter`` accepted steps, one evaluation each, and returns the last point (in the box)."""
    state = {"f": 0.0, "k": 0}

    def objective(v):
        state["f"] -= 1.0
        state["k"] += 1
        return state["f"], np.array([1.0 + 1e-6 * state["k"], 0.0, 0.0])

    f, calls = counted(objective)
    v = box_newton(f, lambda v: np.eye(3), 3, 1e9)
    assert calls["n"] == 101  # the start and 100 steps
    assert -1e9 <= v[0] < -100.0
    f, calls = counted(objective)
    box_newton(f, lambda v: np.eye(3), 3, 1e9, max_iter=7)
    assert calls["n"] == 8
