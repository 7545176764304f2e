"""``last_iterate_rdp`` takes any real Renyi order, as the float64 it denotes (issue 30, finding 10).

An order given as a Fraction or a Python int beyond int64 is the real number it denotes. Oracle: the
same call on the float64 values (exactly representable), and a float64 result. This killed the
equivalent.toml entries that called ``np.asarray(alpha)`` without ``dtype=float64`` equivalent (an
object array then reaches ``np.isfinite``: TypeError).
"""

from fractions import Fraction

import numpy as np

from dp_infer.privacy import last_iterate as LI


def test_last_iterate_rdp_takes_any_real_order():
    args = (20.0, 0.05, 0.01, 10, 1.0, 2.0)
    want = LI.last_iterate_rdp(np.array([1.5, 2.0**70]), *args)
    got = LI.last_iterate_rdp([Fraction(3, 2), 2**70], *args)
    assert got.dtype == np.float64 and got.tolist() == want.tolist()
