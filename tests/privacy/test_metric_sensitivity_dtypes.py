"""``max_quadratic_form`` reads P as the real matrix it denotes (issue 30, finding 10).

A boolean or integer P (e.g. ``np.eye(2, dtype=bool)``, the identity) is the matrix of its 0/1 or
integer entries. Oracle: sup over ||x|| <= R of x^T P x = lambda_max(P) R^2 in closed form. With
``np.asarray(P)`` left boolean, ``0.5 * (P + P.T)`` is 0.5 on the diagonal (True + True is True):
half the sensitivity bound -- the equivalent.toml entry had called that input unreachable.
"""

import numpy as np
import pytest

from dp_infer.privacy.metric_sensitivity import max_quadratic_form


@pytest.mark.parametrize("P,lam_max", [
    (np.eye(2, dtype=bool), 1.0),
    (np.array([[2, 1], [1, 2]]), 3.0),
    (np.array([[True, False], [False, False]]), 1.0),
])
def test_an_integer_or_boolean_P_is_read_as_the_real_matrix_it_denotes(P, lam_max):
    assert max_quadratic_form(P, row_norm=2.0) == pytest.approx(lam_max * 4.0, rel=1e-14)
