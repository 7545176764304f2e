"""The error figures a query release reports (``params``): RMS error per coordinate and the exact
expected l_inf error, for the noise the release actually uses.

Oracles: the second moment of each noise law by quadrature of its density, written here
(Gaussian N(0, s^2); Laplace(b) ~ exp(-|x| / b); GGauss(p, s) ~ exp(-|x / s|^p)); the released noise's
measured RMS (2000 Laplace / 500 GG coordinates, 5 standard errors of a sample RMS); ``expected_max_error`` against
its own closed forms is in tests/mechanisms/test_sparse_vector.py, here only that the release reports
it at its own scale.
"""

import math

import numpy as np
import pytest
from scipy import integrate

from dp_infer.mechanisms import queries as Q


def _moment(logdens, power):
    z = integrate.quad(lambda x: math.exp(logdens(x)), -np.inf, np.inf, epsabs=0, epsrel=1e-12)[0]
    m = integrate.quad(lambda x: x ** power * math.exp(logdens(x)), -np.inf, np.inf, epsabs=0, epsrel=1e-12)[0]
    return m / z


def _rms_by_quadrature(logdens):
    return math.sqrt(_moment(logdens, 2))


@pytest.mark.parametrize("mech,p", [("gaussian", None), ("laplace", None), ("generalized_gaussian", 4.0),
                                    ("generalized_gaussian", 1.5)])
def test_rms_error_is_the_noise_laws_second_moment(mech, p):
    s = 2.7
    logdens = {"gaussian": lambda x: -0.5 * (x / s) ** 2, "laplace": lambda x: -abs(x) / s,
               "generalized_gaussian": lambda x: -abs(x / s) ** p}[mech]
    assert Q.rms_error(mech, s, p=p if p else 4.0) == pytest.approx(_rms_by_quadrature(logdens), rel=1e-9)


@pytest.mark.parametrize("mech,delta,k,normalize", [("laplace", None, 2000, False), ("generalized_gaussian", 1e-5, 500, True)])
def test_a_release_reports_the_error_figures_of_its_own_noise(mech, delta, k, normalize):
    # (the GG calibration on the PLD grows with k: 500 coordinates keep it a few seconds)
    V = (np.random.default_rng(0).random((20, k)) < 0.5).astype(float)
    r = Q.answer_queries(V, eps=2.0, delta=delta, mechanism=mech, normalize=normalize, seed=1)
    scale = r.params["noise_scale"]
    p = 1.0 if mech == "laplace" else 4.0
    assert r.params["rms_error"] == pytest.approx(_rms_by_quadrature(lambda x: -abs(x / scale) ** p), rel=1e-9)
    assert r.params["expected_max_error"] == pytest.approx(Q.expected_max_error(mech, k, scale, p=4.0), rel=1e-12)
    noise = np.asarray(r.value) - (V.mean(axis=0) if normalize else V.sum(axis=0))
    rms = math.sqrt(float(np.mean(noise ** 2)))
    # se of a sample rms: sqrt(Var(x^2) / k) / (2 rms); Var(x^2) = E x^4 - (E x^2)^2, by quadrature
    m4 = _moment(lambda x: -abs(x / scale) ** p, 4)
    se = math.sqrt(m4 - r.params["rms_error"] ** 4) / math.sqrt(k) / (2 * r.params["rms_error"])
    assert abs(rms - r.params["rms_error"]) < 5 * se
    assert abs(max(np.abs(noise)) / r.params["expected_max_error"] - 1) < 0.5   # one draw of the max: loose
    # the event is of this noise at the answers' sensitivity: it meets the target and is tight (a smaller
    # sensitivity or scale in the event would report less than the calibration spent)
    e = r.epsilon(delta) if delta is not None else r.epsilon()
    assert e <= 2.0 * (1 + 1e-9) and e > 2.0 * 0.99
