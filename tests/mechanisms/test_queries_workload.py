"""The query workload builders of dp_infer.mechanisms.queries: conjunction values and random conjunctions.

Oracles: conjunction values of a small 0/1 matrix written out by hand; the number of conjunctions of
``width`` distinct columns among ``m``, C(m, w) (math.comb), and an exhaustive enumeration when every
one of them is asked for; the refusals name the parameter and give the allowed range.
"""

import itertools
import math

import numpy as np
import pytest

from dp_infer.mechanisms import queries as Q

B = np.array([[1, 1, 0],
              [1, 0, 1],
              [1, 1, 1],
              [0, 1, 1]])


def test_conjunction_values_by_hand():
    got = Q.conjunction_queries(B, [(0, 1), (2,), (0, 1, 2)])
    want = np.array([[1, 0, 0],
                     [0, 1, 0],
                     [1, 1, 1],
                     [0, 1, 0]], dtype=float)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float64
    one = Q.conjunction_queries(B, [[1]])          # a single query is a valid workload
    np.testing.assert_array_equal(one[:, 0], [1, 0, 1, 1])


@pytest.mark.parametrize("sets", [[(-1,)], [(0, -1)], [(3,)], [(1, 3)], [()]])
def test_a_column_outside_the_matrix_or_an_empty_set_is_refused_by_name(sets):
    with pytest.raises(ValueError, match=r"index_sets\[0\] must be non-empty column indices in \[0, 2\]"):
        Q.conjunction_queries(B, sets)


def test_an_empty_workload_and_a_non_binary_matrix_are_refused():
    with pytest.raises(ValueError, match="index_sets must contain at least one query"):
        Q.conjunction_queries(B, [])
    with pytest.raises(ValueError, match="binary must be a 2-D array of 0/1"):
        Q.conjunction_queries(B * 2, [(0,)])


def test_random_conjunctions_are_k_distinct_sets_of_width_distinct_columns():
    rng = np.random.default_rng(0)
    got = Q.random_conjunctions(6, 10, 3, rng)
    assert len(got) == 10 and len(set(got)) == 10
    assert all(len(c) == 3 and len(set(c)) == 3 and list(c) == sorted(c) and 0 <= c[0] and c[-1] < 6 for c in got)
    # all C(m, w) of them when k = C(m, w), and the full set when w = m
    every = Q.random_conjunctions(5, math.comb(5, 2), 2, np.random.default_rng(1))
    assert every == sorted(itertools.combinations(range(5), 2))
    assert Q.random_conjunctions(4, 1, 4, np.random.default_rng(2)) == [(0, 1, 2, 3)]


def test_more_conjunctions_than_exist_are_refused():
    with pytest.raises(ValueError, match=r"k must be at most C\(num_columns, width\) = 6, got 7"):
        Q.random_conjunctions(4, 7, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"k must be at most C\(num_columns, width\) = 0, got 1"):
        Q.random_conjunctions(3, 1, 4, np.random.default_rng(0))


def test_query_answers_are_float64_sums_by_default_and_means_on_request():
    V = np.array([[0.1, 1.0], [0.7, 0.0], [0.3, 1.0]], dtype=np.float32)   # float32 in, float64 out
    sums, s = Q.query_answers(V)
    assert s == 1.0 and sums.dtype == np.float64
    np.testing.assert_array_equal(sums, V.astype(np.float64).sum(axis=0))   # not the float32 sum
    means, s = Q.query_answers(V, normalize=True)
    assert s == 1.0 / 3 and np.array_equal(means, V.astype(np.float64).mean(axis=0))
    one, s = Q.query_answers([[0.25]])                                       # one record, one query
    assert one.tolist() == [0.25] and s == 1.0


@pytest.mark.parametrize("bad", [np.zeros((0, 3)), np.zeros(3), [[-0.5, 0.2]], [[np.nan, 0.2]], [[0.2, 1.5]],
                                 [[np.inf, 0.0]]])
def test_values_outside_0_1_or_not_a_non_empty_matrix_are_refused(bad):
    with pytest.raises(ValueError, match="values must"):
        Q.query_answers(bad)


def test_noise_scale_refuses_an_unknown_mechanism_by_name():
    with pytest.raises(ValueError, match=r"mechanism must be one of \('generalized_gaussian', 'gaussian', 'laplace'\)"):
        Q.noise_scale("cauchy", 3, eps=1.0, delta=1e-6)


def test_the_count_message_gives_c_m_m_when_the_width_is_all_columns():
    with pytest.raises(ValueError, match=r"= 1, got 2"):
        Q.random_conjunctions(3, 2, 3, np.random.default_rng(0))
