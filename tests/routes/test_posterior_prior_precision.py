"""The posterior mode's prior precision as any real numbers (issue 30, finding 10).

A per-coordinate prior precision given as Fractions or Python ints is the float64 vector it
denotes. Oracle: the same call with floats (exactly representable values).
"""

from fractions import Fraction

import numpy as np

from dp_infer.routes.posterior import _prior_precision


def test_prior_precision_of_any_real_numbers():
    got = _prior_precision([Fraction(1, 2), 3, 2**70 // 2**60], 3)
    assert got.dtype == np.float64 and got.tolist() == [0.5, 3.0, 1024.0]
    assert _prior_precision(Fraction(1, 4), 2).tolist() == [0.25, 0.25]
