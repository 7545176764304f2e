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
