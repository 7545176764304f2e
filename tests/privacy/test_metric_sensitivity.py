"""Oracle tests for dp_infer.privacy.metric_sensitivity.

Oracles: closed forms (sup of x^T P x over a ball is max(lambda_max, 0) R^2; over the box
[-1, 1]^2 with P = [[1, r], [r, 1]] it is 2 + 2|r|), brute-force enumeration of every vertex row
(exact for block-diagonal P, a lower bound otherwise), and the gradient difference a x - b x'
of a GLM, whose norm in the metric is maximised exactly over a, b in {-a, a} and vertex rows x,
x' (bilinear in (a, b), convex in the rows): the documented bound must be at least that, and
equal to it when the block bound is exact and x' = -x is admissible.
"""

import itertools
import math

import numpy as np
import pytest

from dp_infer.privacy import metric_sensitivity as MS
from dp_infer.schema.admissible import AdmissibleRows, ConstantBlock, IntervalBlock, OneOfBlock
from tests.support.strict_tolerance import approx


def _rot(theta):
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s], [s, c]])


def _box_rows(*intervals):
    blocks = tuple(IntervalBlock(f"x{i}", i, lo, hi) for i, (lo, hi) in enumerate(intervals))
    return AdmissibleRows(len(intervals), blocks, tuple(b.name for b in blocks))


def _mixed_rows():
    """intercept, one numeric in [-2, 1], a 3-level categorical (reference level all zeros)."""
    blocks = (ConstantBlock("icpt", 0, 1.0), IntervalBlock("num", 1, -2.0, 1.0),
              OneOfBlock("cat", (2, 3, 4), (1.0, 1.0, 1.0)))
    return AdmissibleRows(5, blocks, ("icpt", "num", "cat"))


def _spd(d, seed):
    A = np.random.default_rng(seed).normal(size=(d, d))
    return A @ A.T / d + 0.1 * np.eye(d)


# --------------------------------------------------------------------------- ball bound


@pytest.mark.parametrize("eigs, expected_top", [((3.0, 1.0), 3.0), ((0.25, 4.0), 4.0), ((-1.0, 2.0), 2.0),
                                                ((-1.0, -0.5), 0.0), ((0.0, 0.0), 0.0)])
@pytest.mark.parametrize("R", [0.5, 1.0, 3.0])
def test_ball_bound_is_the_top_eigenvalue_times_r_squared(eigs, expected_top, R):
    Q = _rot(0.3)
    P = Q @ np.diag(eigs) @ Q.T
    got = MS.max_quadratic_form(P, row_norm=R)
    assert got == approx(expected_top * R * R, rel=1e-12, abs=1e-15)
    assert got >= 0.0
    # attained: x = R times the top eigenvector (nothing in the ball does better)
    v = Q[:, int(np.argmax(eigs))]
    if expected_top > 0:
        assert (R * v) @ P @ (R * v) == approx(got, rel=1e-12)


# --------------------------------------------------------------------------- block bound


@pytest.mark.parametrize("r", [0.5, -0.5, 0.0, 2.0, -3.0])
def test_block_bound_on_a_square_is_two_plus_two_abs_r(r):
    P = np.array([[1.0, r], [r, 1.0]])
    rows = _box_rows((-1.0, 1.0), (-1.0, 1.0))
    assert MS.max_quadratic_form(P, rows=rows) == approx(2.0 + 2.0 * abs(r), rel=1e-15)
    assert MS.brute_force_max_quadratic_form(P, rows) == approx(2.0 + 2.0 * abs(r), rel=1e-15)


def test_block_bound_on_one_sided_intervals_counts_each_pair_at_its_largest_magnitude():
    # x in [0, 1] x [0, 2], P = [[1, -0.5], [-0.5, 2]]: the true sup is 8 at (0, 2); the block bound
    # is the sum of the per-pair maxima of |u_b P_bb' u_b'|: 1 + 1 + 1 + 8 = 11 (>= 8)
    P = np.array([[1.0, -0.5], [-0.5, 2.0]])
    rows = _box_rows((0.0, 1.0), (0.0, 2.0))
    assert MS.brute_force_max_quadratic_form(P, rows) == approx(8.0, rel=1e-15)
    assert MS.max_quadratic_form(P, rows=rows) == approx(11.0, rel=1e-15)


@pytest.mark.parametrize("seed", range(4))
def test_block_bound_is_exact_for_block_diagonal_and_above_brute_force_otherwise(seed):
    rows = _mixed_rows()
    P = _spd(rows.dim, seed)
    exact = MS.brute_force_max_quadratic_form(P, rows)
    assert MS.max_quadratic_form(P, rows=rows) >= exact
    Pb = np.zeros_like(P)
    for b in rows.blocks:
        ix = np.ix_(list(b.indices), list(b.indices))
        Pb[ix] = P[ix]
    assert MS.max_quadratic_form(Pb, rows=rows) == approx(MS.brute_force_max_quadratic_form(Pb, rows),
                                                                 rel=1e-12)
    # brute force really is the max over the vertex rows
    V = rows.vertices()
    assert exact == approx(max(float(x @ P @ x) for x in V), rel=1e-13)  # einsum rounding


def test_with_rows_and_a_norm_the_smaller_bound_is_returned():
    rows = _box_rows((-1.0, 1.0), (-1.0, 1.0))
    R = math.sqrt(2.0)
    # P along (1, 1): the ball bound 2 * 2 = 4 equals the block bound 1 + 1 + 1 + 1 = 4
    P = np.array([[1.0, 1.0], [1.0, 1.0]])
    assert MS.max_quadratic_form(P, rows=rows, row_norm=R) == approx(4.0, rel=1e-14)
    # P = diag(1, 0): block bound 1 (exact), ball bound 2
    P = np.diag([1.0, 0.0])
    assert MS.max_quadratic_form(P, rows=rows) == approx(1.0, rel=1e-15)
    assert MS.max_quadratic_form(P, row_norm=R) == approx(2.0, rel=1e-14)
    assert MS.max_quadratic_form(P, rows=rows, row_norm=R) == approx(1.0, rel=1e-15)
    # a tiny norm makes the ball bound the smaller one
    assert MS.max_quadratic_form(P, rows=rows, row_norm=0.1) == approx(0.01, rel=1e-14)


def test_rows_of_the_wrong_dimension_and_no_bound_are_refused():
    rows = _box_rows((-1.0, 1.0), (-1.0, 1.0))
    with pytest.raises(ValueError, match="rows have dim 2 but P is 3 x 3"):
        MS.max_quadratic_form(np.eye(3), rows=rows)
    with pytest.raises(ValueError, match="give rows"):
        MS.max_quadratic_form(np.eye(2))
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="row_norm"):
            MS.max_quadratic_form(np.eye(2), row_norm=bad)


# --------------------------------------------------------------------------- P validation


def test_p_must_be_a_finite_symmetric_square_matrix():
    for bad, msg in [(np.ones((2, 3)), "square"), (np.ones(3), "square"), (np.ones((1, 2, 2)), "square"),
                     (np.array([[1.0, math.nan], [math.nan, 1.0]]), "finite"),
                     (np.array([[1.0, math.inf], [math.inf, 1.0]]), "finite"),
                     (np.array([[1.0, 0.5], [-0.5, 1.0]]), "symmetric"),
                     (np.array([[1.0, 0.5], [0.4, 1.0]]), "symmetric"),
                     (np.array([[1e-6, 1e-6], [0.0, 1e-6]]), "symmetric"),
                     (np.array([[1e6, 1.0], [0.0, 1e6]]), "symmetric")]:
        with pytest.raises(ValueError, match=msg):
            MS.max_quadratic_form(bad, row_norm=1.0)
        with pytest.raises(ValueError, match=msg):
            MS.metric_gradient_sensitivity(bad, 10, grad_diff=1.0)


def test_symmetry_tolerance_is_rounding_at_the_scale_of_p():
    # |P - P^T| <= 1e-12 max(1, max|P|) + 1e-10 |P^T| elementwise; anything larger is refused
    for bad in (np.array([[1.0, 0.5], [0.5 + 1e-7, 1.0]]),          # 2e-7 relative: not rounding
                np.array([[1e-6, 1e-6], [1e-6 + 1e-9, 1e-6]]),      # 1e-3 relative in a small-scale P
                np.array([[1.0, 0.0], [1.5e-12, 1.0]])):            # above 1e-12 at unit scale
        with pytest.raises(ValueError, match="symmetric"):
            MS._check_P(bad)
    # rounding-level asymmetry at the scale of the matrix is accepted and symmetrised
    for ok in (np.array([[1e6, 1.0], [1.0 + 1e-7, 1e6]]),           # 1e-13 of max|P|
               np.array([[1.0, 0.0], [0.5e-12, 1.0]])):
        Q = MS._check_P(ok)
        np.testing.assert_array_equal(Q, Q.T)
        assert Q[0, 1] == 0.5 * (ok[0, 1] + ok[1, 0])


def test_p_within_rounding_of_symmetric_is_symmetrised():
    # an asymmetry of one part in 1e14 (rounding of a product) is accepted; the symmetric part is used
    P = np.array([[2.0, 1.0], [1.0 + 1e-14, 2.0]])
    assert MS.max_quadratic_form(P, row_norm=1.0) == approx(3.0 + 0.5e-14, rel=1e-15)
    np.testing.assert_array_equal(MS._check_P(P), MS._check_P(P).T)
    np.testing.assert_array_equal(MS._check_P([[1, 2], [2, 5]]), np.array([[1.0, 2.0], [2.0, 5.0]]))
    assert MS._check_P([[1, 2], [2, 5]]).dtype == np.float64


# --------------------------------------------------------------------------- sensitivity


def _exact_glm_sensitivity(P, rows, a, n):
    """sup over vertex rows x, x' and link values in {-a, a} of ||P^(1/2) (s x - t x')|| / n."""
    C = np.linalg.cholesky(P)
    V = rows.vertices()
    return max(np.linalg.norm(C.T @ (s * x - t * xp)) for x, xp in itertools.product(V, V)
               for s in (-a, a) for t in (-a, a)) / n


@pytest.mark.parametrize("a, n", [(1.0, 1), (0.25, 10), (3.0, 1000)])
def test_glm_sensitivity_is_attained_when_the_block_bound_is_exact(a, n):
    # block-diagonal P on a symmetric box: the bound 2 a sqrt(max x^T P x) / n is the exact sup
    rows = _box_rows((-1.0, 1.0), (-2.0, 2.0), (-0.5, 0.5))
    P = np.diag([2.0, 0.5, 3.0])
    got = MS.metric_gradient_sensitivity(P, n, link_derivative_bound=a, rows=rows)
    assert got == approx(2.0 * a * math.sqrt(2.0 + 2.0 + 0.75) / n, rel=1e-14)
    assert got == approx(_exact_glm_sensitivity(P, rows, a, n), rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_glm_sensitivity_bounds_the_exact_supremum(seed):
    rows = _mixed_rows()
    P = _spd(rows.dim, seed)
    for a, n in ((1.0, 7), (0.5, 100)):
        exact = _exact_glm_sensitivity(P, rows, a, n)
        got = MS.metric_gradient_sensitivity(P, n, link_derivative_bound=a, rows=rows)
        assert got >= exact
        assert got == approx(2.0 * a * math.sqrt(MS.max_quadratic_form(P, rows=rows)) / n, rel=1e-15)
        # with the norm of the rows as well: the smaller of the two
        R = rows.max_norm()
        both = MS.metric_gradient_sensitivity(P, n, link_derivative_bound=a, rows=rows, row_norm=R)
        assert both == approx(2.0 * a * math.sqrt(MS.max_quadratic_form(P, rows=rows, row_norm=R)) / n,
                                     rel=1e-15)
        assert exact <= both <= got


def test_grad_diff_sensitivity_is_sqrt_top_eigenvalue_times_g_over_n():
    Q = _rot(1.1)
    P = Q @ np.diag([4.0, 0.25]) @ Q.T
    assert MS.metric_gradient_sensitivity(P, 8, grad_diff=3.0) == approx(2.0 * 3.0 / 8, rel=1e-13)
    # attained: two gradients G/2 apart along the top eigenvector, in opposite directions
    v = Q[:, 0]
    assert np.linalg.norm(np.linalg.cholesky(P).T @ (3.0 * v)) / 8 == approx(0.75, rel=1e-13)
    # the top of the spectrum, whatever the dimension and the order of the diagonal
    for diag in ([0.5, 4.0, 1.0], [4.0, 0.5, 1.0, 0.25], [1.0, 0.5, 0.25, 0.1, 4.0]):
        assert MS.metric_gradient_sensitivity(np.diag(diag), 8, grad_diff=3.0) == approx(0.75, rel=1e-15)
        assert MS.max_quadratic_form(np.diag(diag), row_norm=2.0) == approx(16.0, rel=1e-15)
    # a non-positive-definite P (no preconditioner, but a valid input): negative curvature counts 0
    assert MS.metric_gradient_sensitivity(-np.eye(2), 4, grad_diff=1.0) == 0.0


def test_the_smaller_valid_bound_wins_and_an_infinite_grad_diff_is_ignored():
    rows = _box_rows((-1.0, 1.0), (-1.0, 1.0))
    P = np.eye(2)
    glm = 2.0 * 1.0 * math.sqrt(2.0) / 5  # 2 a sqrt(2) / n
    assert MS.metric_gradient_sensitivity(P, 5, link_derivative_bound=1.0, rows=rows) == approx(glm, rel=1e-15)
    assert MS.metric_gradient_sensitivity(P, 5, grad_diff=1.0) == approx(0.2, rel=1e-15)
    assert MS.metric_gradient_sensitivity(P, 5, link_derivative_bound=1.0, rows=rows,
                                          grad_diff=1.0) == approx(0.2, rel=1e-15)
    assert MS.metric_gradient_sensitivity(P, 5, link_derivative_bound=1.0, rows=rows,
                                          grad_diff=10.0) == approx(glm, rel=1e-15)
    assert MS.metric_gradient_sensitivity(P, 5, link_derivative_bound=1.0, rows=rows,
                                          grad_diff=math.inf) == approx(glm, rel=1e-15)
    with pytest.raises(ValueError, match="need a link_derivative_bound"):
        MS.metric_gradient_sensitivity(P, 5, grad_diff=math.inf)
    with pytest.raises(ValueError, match="need a link_derivative_bound"):
        MS.metric_gradient_sensitivity(P, 5)


def test_sensitivity_inputs_are_validated_by_name():
    P = np.eye(2)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n"):
            MS.metric_gradient_sensitivity(P, bad, grad_diff=1.0)
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="link_derivative_bound"):
            MS.metric_gradient_sensitivity(P, 3, link_derivative_bound=bad, row_norm=1.0)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="grad_diff"):
            MS.metric_gradient_sensitivity(P, 3, grad_diff=bad)
    with pytest.raises(ValueError, match="give rows"):
        MS.metric_gradient_sensitivity(P, 3, link_derivative_bound=1.0)


class _CountedRows:
    """A stand-in schema with ``count`` vertex rows that refuses to enumerate above ``limit``,
    as :meth:`AdmissibleRows.vertices` does (only its refusal is exercised here)."""

    def __init__(self, count):
        self.count, self.dim = count, 1

    def vertices(self, limit=100_000):
        if self.count > limit:
            raise ValueError(f"limit: the admissible set has {self.count} vertices (> {limit})")
        return np.array([[1.0], [-2.0]])


def test_brute_force_enumerates_up_to_200k_vertex_rows_and_no_more():
    assert MS.brute_force_max_quadratic_form(np.eye(1), _CountedRows(200_000)) == 4.0
    with pytest.raises(ValueError, match="limit"):
        MS.brute_force_max_quadratic_form(np.eye(1), _CountedRows(200_001))
    assert MS.brute_force_max_quadratic_form(np.eye(1), _CountedRows(200_001), limit=200_001) == 4.0
