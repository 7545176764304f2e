"""Oracle tests for dp_infer.privacy.minibatch, second file (mutation testing, issue 19).

``tests/test_mut_minibatch.py`` holds the closed forms of the curves and the calibration; this
file holds what the full mutation run of ``minibatch_event`` and its helpers showed untested.

Oracles:
* an almost noiseless step (sigma**2 underflows to 0) releases the clipped sum essentially
  without noise: the only valid float bound is inf, at every order, and it is a plain answer,
  not a numerical accident (no RuntimeWarning).
"""

import math
import warnings

import numpy as np
import pytest

from dp_infer.privacy import minibatch as mb


BETA, H, T, C, N = 100.0, 0.01, 40, 1.0, 1000
DELTA = 1e-5


# --------------------------------------------------------------------------- almost no noise


@pytest.mark.parametrize("beta", [1e165, 1e300])
@pytest.mark.parametrize("neighboring", mb.NEIGHBORING)
def test_noiseless_step_is_inf_without_a_runtime_warning(beta, neighboring):
    # h = 2, q = 0.5, C = n = 1: sigma = 0.5 / beta, sigma**2 == 0.0 in float64
    assert mb.minibatch_noise_multiplier(beta, 2.0, 0.5, 1.0, 1) ** 2 == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a divide-by-zero RuntimeWarning would be an error here
        ev = mb.minibatch_event(beta, 2.0, 1, 0.5, 1.0, 1, neighboring=neighboring, alphas=[1.05, 2.0, 10.0, 256.0])
    assert ev.values == (math.inf,) * 4
    assert mb._event_epsilon(ev, DELTA) == math.inf
