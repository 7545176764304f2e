"""What a query release carries besides the noise law (dp_infer.mechanisms.queries.answer_queries):
reproducibility by seed, float64 noise, the event's stated facts, the GG shape read as a number.

Oracles: the same seed gives the same floats and a different seed different ones; a float64 normal
draw is a float32 number with probability ~2^-29 (so float32 noise shows as values on the float32
grid); the event's metadata against the numbers of the release itself (the noise scale, k and the
sensitivity a neighbouring pair realises, 1 for counts); a GG release at p = 2.5 meets its target
tightly (its calibration and its event at the same p).
"""

import math

import jax
import numpy as np
import pytest

from dp_infer.mechanisms import queries as Q


def _values(n=30, k=400, seed=0):
    return (np.random.default_rng(seed).random((n, k)) < 0.4).astype(float)


def test_a_seed_reproduces_the_release_and_another_seed_does_not():
    V = _values()
    a = Q.answer_queries(V, eps=1.0, delta=1e-6, mechanism="gaussian", seed=7)
    b = Q.answer_queries(V, eps=1.0, delta=1e-6, mechanism="gaussian", seed=7)
    c = Q.answer_queries(V, eps=1.0, delta=1e-6, mechanism="gaussian", seed=8)
    np.testing.assert_array_equal(a.value, b.value)
    assert not np.any(a.value == c.value)
    assert a.randomness["reproducible_by_seed_holder"]


def test_gaussian_noise_is_drawn_in_float64_not_on_the_float32_grid():
    assert not jax.config.jax_enable_x64
    V = _values(k=2000)
    r = Q.answer_queries(V, eps=1.0, delta=1e-6, mechanism="gaussian", seed=3)
    for x in ((np.asarray(r.value) - V.sum(axis=0)),                     # the noise added (exact: counts <= 30)
              (np.asarray(r.value) - V.sum(axis=0)) / r.params["noise_scale"]):   # the standard normal draws
        on_grid = x.astype(np.float32).astype(np.float64) == x
        assert on_grid.sum() <= 5


def test_the_gaussian_event_states_the_noise_and_the_sensitivity_of_this_release():
    V = _values()
    r = Q.answer_queries(V, eps=1.0, delta=1e-6, mechanism="gaussian", seed=1)
    ev = r.events[0][0]
    assert ev.metadata == {"mechanism": "gaussian", "sigma": r.params["noise_scale"], "k": 400, "sensitivity": 1.0}
    # the assumption a reviewer reads: the answers' l2 sensitivity, s sqrt(k) = 20 for 400 counts
    assert ev.assumptions[0].startswith("l2 sensitivity of the answers <= 20 (k = 400 queries in [0, 1]")
    assert ev.mu == pytest.approx(math.sqrt(400) / r.params["noise_scale"], rel=1e-12)


def test_a_gg_release_at_a_shape_other_than_the_default_is_calibrated_at_that_shape():
    V = _values(k=200)
    r = Q.answer_queries(V, eps=2.0, delta=1e-5, mechanism="generalized_gaussian", p=2.5, seed=2)
    assert r.params["p"] == 2.5
    e = r.epsilon(1e-5)
    assert e <= 2.0 * (1 + 1e-9) and e > 2.0 * 0.99          # calibrated and accounted at p = 2.5


def test_the_shape_is_read_as_a_number_and_checked_first():
    V = _values(k=50)
    r = Q.answer_queries(V, eps=2.0, delta=1e-5, mechanism="generalized_gaussian", p="3", seed=2)
    assert r.params["p"] == 3.0 and isinstance(r.params["p"], float)
    lap = Q.answer_queries(V, eps=2.0, delta=None, mechanism="laplace", seed=2)   # p is the GG shape only
    assert lap.params["p"] is None
    with pytest.raises(ValueError, match="p \\(Generalized Gaussian shape\\)"):
        Q.answer_queries(V, eps=2.0, delta=1e-5, mechanism="generalized_gaussian", p=0.5, seed=2)


@pytest.mark.parametrize("mech,delta,p", [("gaussian", 1e-6, None), ("laplace", None, None),
                                          ("generalized_gaussian", 1e-5, 3.0)])
def test_the_params_state_every_public_number_of_the_release(mech, delta, p):
    V = _values(k=40)
    kw = {} if p is None else {"p": p}
    r = Q.answer_queries(V, eps=1.5, delta=delta, mechanism=mech, normalize=True, seed=4, **kw)
    scale = Q.noise_scale(mech, 40, eps=1.5, delta=delta, sensitivity=1 / 30, p=p or 4.0)
    assert r.params == {"mechanism": mech, "p": p, "k": 40, "sensitivity": 1 / 30, "noise_scale": scale,
                        "target_eps": 1.5, "delta": delta,
                        "expected_max_error": Q.expected_max_error(mech, 40, scale, p=p or 4.0),
                        "rms_error": Q.rms_error(mech, scale, p=p or 4.0)}
    rep = r.report(delta) if delta is not None else r.report()
    assert rep["params"]["noise_scale"] == scale and rep["randomness"] == r.randomness
