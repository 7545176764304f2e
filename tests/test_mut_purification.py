"""Oracle tests for survivors of purification.py's mutation run (issue 19)."""

import json
import math

import numpy as np
import pytest

from dp_infer.domains import L2Ball
from dp_infer.privacy import purification as PF


def test_cap_is_the_l1_diameter_of_an_l2_ball():
    # the cap bounds the l1 Wasserstein distance by the domain's l1 diameter, 2 r sqrt(d) for an l2
    # ball of radius r (attained at +-(r / sqrt(d)) (1, ..., 1)); capping at a smaller diameter (the l2
    # one, 2 r) would give less Laplace noise than Lemma 6 requires
    for dim, radius in [(4, 1.0), (9, 0.5), (100, 3.0)]:
        p = PF.purification_parameters(L2Ball(dim, radius), 1.0, 0.01, delta=0.5)
        assert p.capped and p.wasserstein_l1 == 2.0 * radius * math.sqrt(dim)
        assert p.laplace_scale == 2.0 * p.wasserstein_l1 / 1.0


def test_expected_error_bound_is_theorem_1_with_the_closed_form_diameter():
    # E||x_pure - x_apx||_1 <= omega Diam_1 + d b, with Diam_1 of an l2 ball of radius r = 2 r sqrt(d)
    for dim, radius, delta in [(4, 1.0, 1e-6), (9, 0.5, 1e-4), (2, 3.0, 1e-3)]:
        p = PF.purification_parameters(L2Ball(dim, radius), 1.0, 0.5, delta=delta)
        want = p.omega * (2.0 * radius * math.sqrt(dim)) + dim * p.laplace_scale
        assert math.isclose(p.expected_l1_error_bound(), want, rel_tol=1e-12)
        assert p.expected_l1_error_bound() >= dim * p.laplace_scale  # the Laplace part alone


def test_the_purified_event_states_its_assumptions_and_adds_eps_prime():
    p = PF.purification_parameters(L2Ball(3, 1.0), 1.0, 0.5, delta=1e-5)
    ev = PF.purified_event(0.8, p)
    assert ev.epsilon == 0.8 + p.eps_prime and ev.kind == "pure"
    text = " ".join(ev.assumptions)
    assert len(ev.assumptions) == 4
    assert "(eps, delta)-DP" in text and "lies in the domain" in text and "independent" in text
    assert ev.metadata["route"] == "purification" and ev.metadata["upstream_epsilon"] == 0.8


def _box(d, lo, hi):
    from dp_infer.domains import Box

    return Box([lo] * d, [hi] * d)


def test_required_log_delta_inverts_the_laplace_scale_for_both_variants():
    # required_log_delta(b) is the upstream delta at which Algorithm 1's (uncapped) scale is b; the
    # conservative variant (TV <= delta) needs half the delta: exactly log 2 less
    for dom in (L2Ball(3, 1.0), _box(2, 1.0, 3.0)):
        for omega in (1.0, 0.25):
            for cons in (False, True):
                ld = PF.required_log_delta(dom, 1.0, omega, 1e-3, conservative=cons)
                p = PF.purification_parameters(dom, 1.0, omega, log_delta=ld, cap=False, conservative=cons)
                assert math.isclose(p.laplace_scale, 1e-3, rel_tol=1e-9)
                assert p.log_delta == ld and p.conservative is cons and p.omega == omega
                assert math.isclose(p.log_wasserstein_uncapped, math.log(p.wasserstein_l1), rel_tol=1e-12)
            ld_c = PF.required_log_delta(dom, 1.0, omega, 1e-3, conservative=True)
            ld_n = PF.required_log_delta(dom, 1.0, omega, 1e-3)
            assert math.isclose(ld_n - ld_c, math.log(2.0), rel_tol=1e-12)
    for bad in (1.5, 2.5):
        with pytest.raises(ValueError, match=r"omega must lie in \(0, 1\]"):
            PF.required_log_delta(L2Ball(3, 1.0), 1.0, bad, 1e-3)
        with pytest.raises(ValueError, match=r"omega must lie in \(0, 1\]"):
            PF.purification_parameters(L2Ball(3, 1.0), 1.0, bad, delta=1e-6)


def test_domain_geometry_reads_the_domain_itself():
    # l2 ball: q = 2, R = its l2 diameter 2 r; a cube [1, 3]^d: q = inf, R = its width 2 (not 1 + 3)
    p = PF.purification_parameters(L2Ball(4, 1.5), 1.0, 0.5, delta=1e-8)
    assert (p.q, p.lq_diameter, p.dim) == (2.0, 3.0, 4)
    p = PF.purification_parameters(_box(3, 1.0, 3.0), 1.0, 0.5, delta=1e-8)
    assert (p.q, p.lq_diameter, p.l1_diameter) == (math.inf, 2.0, 6.0)
    d = p.to_dict()
    assert d["q"] == "inf" and json.loads(json.dumps(d, allow_nan=False))["q"] == "inf"
    assert PF.purification_parameters(L2Ball(4, 1.5), 1.0, 0.5, delta=1e-8).to_dict()["q"] == 2.0
    from dp_infer.domains import Euclidean

    with pytest.raises(ValueError, match=r"domain must be bounded \(L2Ball or Box\) to purify"):
        PF.purification_parameters(Euclidean(3), 1.0, 0.5, delta=1e-8)


def test_purify_takes_a_single_draw_or_any_batch_shape_and_counts_draws_outside():
    dom = L2Ball(3, 1.0)
    p = PF.purification_parameters(dom, 1.0, 0.5, delta=1e-8)
    one = PF.purify(0, np.zeros(3), p, dom)
    assert one.shape == (3,) and one.dtype == np.float64
    many = PF.purify(1, np.zeros((2, 4, 3)), p, dom)
    assert many.shape == (2, 4, 3)
    x = np.zeros((5, 3))
    x[[1, 3], 0] = 2.0  # two draws outside the unit ball
    with pytest.raises(ValueError, match=r"x_apx has 2 draw\(s\) outside the domain"):
        PF.purify(2, x, p, dom)


def test_keys_of_every_accepted_form_and_refusals():
    import jax

    k = jax.random.key(7)
    raw = np.asarray(jax.random.key_data(k), dtype=np.uint32)  # a raw uint32[2] key
    assert raw.shape == (2,)
    assert np.array_equal(jax.random.key_data(PF._as_jax_key(raw)), raw)
    assert np.array_equal(jax.random.key_data(PF._as_jax_key(7)), raw)
    assert PF._as_jax_key(k) is k
    for bad in (np.asarray([7, 1], dtype=np.int64), np.zeros(3, dtype=np.uint32), "seed", 1.5, True):
        with pytest.raises(ValueError, match="key must be a JAX PRNG key, a raw uint32"):
            PF._as_jax_key(bad)
    # 64 bits of key material, never fewer: a numpy Generator fills both key words (the high word of 20
    # draws is 0 with probability 20 x 2^-32), and an int seed beyond 2^32 keeps its high bits (JAX's
    # jax.random.key(int) without x64 keeps only the low 32: seeds 5 and 2^40 + 5 gave the same noise)
    highs = [int(jax.random.key_data(PF._as_jax_key(np.random.default_rng(i)))[0]) for i in range(20)]
    assert all(h > 0 for h in highs) and len(set(highs)) == 20
    assert jax.random.key_data(PF._as_jax_key(2**40 + 5)).tolist() == [2**8, 5]
    dom = L2Ball(2, 1.0)
    p = PF.purification_parameters(dom, 1.0, 0.5, delta=1e-8)
    assert not np.array_equal(PF.purify(5, np.zeros((4, 2)), p, dom), PF.purify(2**40 + 5, np.zeros((4, 2)), p, dom))


def test_edges_of_the_parameters_uncapped_capped_and_beyond_float_range():
    dom = L2Ball(3, 1.0)
    p = PF.purification_parameters(dom, 1.0, 0.5, delta=1e-12)
    assert p.capped is False and p.wasserstein_l1 < p.l1_diameter
    # a cube of width 1e308 in 2 dimensions: log W ~ 709.9 > log(max float); uncapped W is inf, not an error
    from dp_infer.domains import Box

    huge = Box([0.0, 0.0], [1e308, 1e308])
    with np.errstate(over="ignore"):  # its l1 diameter, 2e308, is inf in float64 (numpy warns)
        p = PF.purification_parameters(huge, 1.0, 1.0, delta=0.5, cap=False)
    assert p.log_wasserstein_uncapped > 709.8 and p.wasserstein_l1 == math.inf and p.capped is False
    # required_log_delta refuses a scale that any delta < 1 already gives: for L2Ball(1, 1), omega = 1,
    # eps' = 1 the inverse is log delta = log(b / 4), so b = 6.6 asks for delta = 1.65 > 1
    with pytest.raises(ValueError, match="laplace_scale is so large"):
        PF.required_log_delta(L2Ball(1, 1.0), 1.0, 1.0, 6.6)
    assert math.isclose(PF.required_log_delta(L2Ball(1, 1.0), 1.0, 1.0, 2.0), math.log(0.5), rel_tol=1e-12)


def test_draws_projected_onto_the_boundary_are_inside():
    # issue 30 (finding 13): this test checked only the shape. Oracles now: draws on the sphere
    # (norm 1 up to rounding, inside the 1e-9 tolerance) are accepted and one 1e-6 outside is
    # refused; with project=True every output is inside the ball, and equals the closed-form
    # projection y min(1, 1/|y|) of the unprojected output for the same key.
    dom = L2Ball(3, 1.0)
    p = PF.purification_parameters(dom, 1.0, 0.5, delta=1e-8)
    rng = np.random.default_rng(3)
    edge = rng.normal(size=(50, 3))
    edge /= np.linalg.norm(edge, axis=1, keepdims=True)  # on the sphere, up to rounding
    raw = PF.purify(4, edge, p, dom)
    proj = PF.purify(4, edge, p, dom, project=True)
    assert raw.shape == proj.shape == (50, 3)
    norms = np.linalg.norm(raw, axis=1)
    assert np.any(norms > 1.0)  # the Laplace noise leaves the ball: the projection has work to do
    np.testing.assert_allclose(proj, raw * np.minimum(1.0, 1.0 / norms)[:, None], rtol=1e-12, atol=1e-15)
    assert np.all(np.linalg.norm(proj, axis=1) <= 1.0 + 1e-12)
    with pytest.raises(ValueError, match="outside the domain"):
        PF.purify(4, edge * (1 + 1e-6), p, dom)


def test_a_box_that_is_not_a_cube_uses_its_widths_and_purify_checks_the_dimension():
    from dp_infer.domains import Box

    box = Box([0.0, 1.0], [2.0, 2.0])  # widths 2 and 1: the general convex formula, R = 2, r = 1/2
    p = PF.purification_parameters(box, 1.0, 0.5, delta=1e-8)
    assert (p.formula, p.lq_diameter, p.q) == ("general_convex", 2.0, math.inf)
    p3 = PF.purification_parameters(L2Ball(3, 1.0), 1.0, 0.5, delta=1e-8)
    with pytest.raises(ValueError, match=r"^domain dim 2 does not match params.dim 3$"):
        PF.purify(0, np.zeros((1, 3)), p3, L2Ball(2, 1.0))


def test_purify_draws_in_float64_without_any_warning():
    import warnings

    dom = L2Ball(3, 1.0)
    p = PF.purification_parameters(dom, 1.0, 0.5, delta=1e-8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. JAX truncating a float64 request to float32
        out = PF.purify(11, np.zeros((64, 3)), p, dom)
    assert out.dtype == np.float64
    # float64 noise: the released values are not all float32-representable
    assert np.mean(out.astype(np.float32).astype(np.float64) != out) > 0.5
