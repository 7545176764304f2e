"""Purification (seed-003 Algorithm 1, corrected constants): parameters, sampling, exact 1-D privacy.

Oracle tests for survivors of purification.py's mutation run (issue 19).
"""

import math
import jax
import numpy as np
import pytest
from scipy import stats
from dp_infer.domains import Box, Euclidean, L2Ball
from dp_infer.privacy import exact as X, purification as PF
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.conversions import gdp_delta
import json

UNIT = Box(np.zeros(1), np.ones(1))  # [0, 1]: an l_inf ball with l_inf diameter R = 1


# --------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("d", [1, 3, 10])
def test_cube_and_l2_ball_parameters_match_the_closed_forms(d):
    delta, omega, eps_p = 1e-12, 0.05, 0.5
    cube = Box.cube(d, 0.75)  # side 1.5
    p = PF.purification_parameters(cube, eps_p, omega, delta=delta, cap=False)
    w = 2 * d * 1.5 * (delta / (2 * omega)) ** (1 / d)  # 2 d^{1-1/q} R (delta/2omega)^{1/d}, q = inf
    assert p.formula == "lq_ball" and p.q == math.inf and p.lq_diameter == pytest.approx(1.5)
    assert p.wasserstein_l1 == pytest.approx(w, rel=1e-12)
    assert p.laplace_scale == pytest.approx(2 * w / eps_p, rel=1e-12)
    ball = L2Ball(d, 0.4)  # l2 diameter R = 0.8 (the DIAMETER, not the radius)
    p2 = PF.purification_parameters(ball, eps_p, omega, delta=delta, cap=False)
    w2 = 2 * math.sqrt(d) * 0.8 * (delta / (2 * omega)) ** (1 / d)
    assert p2.q == 2.0 and p2.lq_diameter == pytest.approx(0.8)
    assert p2.wasserstein_l1 == pytest.approx(w2, rel=1e-12)


@pytest.mark.parametrize("C,d,n", [(1.0, 10, 100), (1.0, 10, 10**4), (2.0, 50, 10**4), (1.0, 100, 10**5)])
def test_corollary_4_identity_in_log_space(C, d, n):
    log_delta, omega = PF.corollary4_log_delta(n, d, C)
    # delta = 2 omega / (16 C d n^2)^d, computed without ever forming delta
    assert log_delta == pytest.approx(math.log(2 / n**2) - d * math.log(16 * C * d * n * n), rel=1e-14)
    p = PF.purification_parameters(L2Ball(d, C / 2), 1.0, omega, log_delta=log_delta)
    assert p.wasserstein_l1 * 8 * math.sqrt(d) * n * n == pytest.approx(1.0, rel=1e-11)  # Delta = 1/(8 sqrt(d) n^2)
    assert p.laplace_scale == pytest.approx(2 * p.wasserstein_l1, rel=1e-12)
    assert not p.capped


def test_general_convex_box_formula_and_cube_consistency():
    # a non-cubic box uses (4R/r)(delta Vol / (2 omega V_q))^{1/d}; on a cube that formula is
    # exactly 2x the l_q-ball constant (digest §7 item 5): check through a near-cube
    d, delta, omega = 3, 1e-20, 0.1
    near = Box(np.zeros(d), np.array([1.0, 1.0, 1.0 + 1e-12]))
    cube = Box(np.zeros(d), np.ones(d))
    pn = PF.purification_parameters(near, 1.0, omega, delta=delta, cap=False)
    pc = PF.purification_parameters(cube, 1.0, omega, delta=delta, cap=False)
    assert pn.formula == "general_convex" and pc.formula == "lq_ball"
    assert pn.wasserstein_l1 == pytest.approx(2 * pc.wasserstein_l1, rel=1e-9)
    # a genuinely elongated box: explicit formula
    box = Box(np.zeros(2), np.array([1.0, 4.0]))
    pb = PF.purification_parameters(box, 1.0, omega, delta=delta, cap=False)
    w = 2 * (4 * 4.0 / 0.5) * (delta * 4.0 / (2 * omega * 4.0)) ** 0.5  # d^{1-1/q}=2, R=4, r=1/2, Vol=4, V_inf=4
    assert pb.wasserstein_l1 == pytest.approx(w, rel=1e-12)


def test_unit_ball_volumes():
    assert math.exp(PF.log_unit_ball_volume(2, 2.0)) == pytest.approx(math.pi)
    assert math.exp(PF.log_unit_ball_volume(3, 1.0)) == pytest.approx(4 / 3)
    assert math.exp(PF.log_unit_ball_volume(5, math.inf)) == pytest.approx(32.0)
    assert math.exp(PF.log_unit_ball_volume(3, 2.0)) == pytest.approx(4 * math.pi / 3)


def test_cap_conservative_and_inverse():
    p = PF.purification_parameters(UNIT, 1.0, 0.01, delta=0.5)
    assert p.capped and p.wasserstein_l1 == pytest.approx(1.0)  # l1 diameter of [0, 1]
    pc = PF.purification_parameters(UNIT, 1.0, 0.01, delta=1e-6, conservative=True)
    pn = PF.purification_parameters(UNIT, 1.0, 0.01, delta=1e-6)
    assert pc.wasserstein_l1 == pytest.approx(2 * pn.wasserstein_l1)  # (delta/omega) vs (delta/(2 omega)), d = 1
    for dom in [UNIT, L2Ball(4, 1.0), Box(np.zeros(2), np.array([1.0, 3.0]))]:
        ld = PF.required_log_delta(dom, 0.5, 0.02, 1e-6)
        assert PF.purification_parameters(dom, 0.5, 0.02, log_delta=ld, cap=False).laplace_scale == pytest.approx(1e-6, rel=1e-10)


# --------------------------------------------------------------------------- sampling
def test_purify_mixing_frequency_noise_law_and_support():
    d, n = 2, 20000
    dom = L2Ball(d, 1.0)
    x = np.zeros((n, d))
    # tiny noise: replaced draws are recognisable; frequency ~ Binomial(n, omega)
    p = PF.purification_parameters(dom, 1.0, 0.2, log_delta=-400.0)
    out = PF.purify(jax.random.key(0), x, p, dom)
    assert out.dtype == np.float64 and out.shape == (n, d)
    replaced = np.linalg.norm(out, axis=1) > 1e-6
    frac = replaced.mean()
    assert abs(frac - 0.2) < 5 * math.sqrt(0.2 * 0.8 / n)
    # the intermediate (mixed) point lies in the domain: replaced draws are uniform on the ball
    r = np.linalg.norm(out[replaced], axis=1)
    assert r.max() <= 1.0 + 1e-6
    assert stats.kstest(r**d, "uniform").pvalue > 1e-3  # radial law of the uniform ball: P(|x| <= t) = t^d
    # noise: with (almost) no mixing, out - x is i.i.d. Laplace(b)
    p2 = PF.purification_parameters(dom, 1.0, 1e-12, delta=1e-3, cap=False)
    out2 = PF.purify(np.random.default_rng(1), x, p2, dom)
    noise = out2.ravel()
    assert stats.kstest(noise / p2.laplace_scale, "laplace").pvalue > 1e-3
    # the paper's algorithm does not project: some outputs leave the domain...
    assert np.any(np.linalg.norm(out2, axis=1) > 1.0)
    # ...and the optional projection (post-processing) keeps every output on the domain
    out3 = PF.purify(7, x, p2, dom, project=True)
    assert np.all(np.linalg.norm(out3, axis=1) <= 1.0 + 1e-12)


def test_purify_rejects_points_outside_the_domain():
    p = PF.purification_parameters(UNIT, 1.0, 0.1, delta=1e-6)
    with pytest.raises(ValueError, match="outside the domain"):
        PF.purify(0, np.array([[1.5]]), p, UNIT)
    with pytest.raises(ValueError, match="x_apx"):
        PF.purify(0, np.array([[0.5, 0.5]]), p, UNIT)


# --------------------------------------------------------------------------- exact 1-D privacy
def _purified_log_density(y, b, omega, atoms=(), weights=(), gauss=None):
    """log density of purify(M) for M = sum w_i delta_{a_i} (+ a Gaussian part on [0, 1])."""
    parts = [np.log1p(-omega) + X.laplace_convolved_log_density(y, b, atoms=atoms, atom_weights=weights)
             if atoms else np.full(y.shape, -np.inf)]
    if gauss is not None:
        m, sd = gauss
        parts.append(np.log1p(-omega) + X.truncated_gaussian_laplace_log_density(y, b, m, sd, 0.0, 1.0))
    parts.append(math.log(omega) + X.laplace_convolved_log_density(y, b, uniform=(0.0, 1.0), uniform_weight=1.0))
    return np.logaddexp.reduce(np.stack(parts), axis=0)


def _ygrid(b, extra=()):
    pts = [np.linspace(-0.5 - 40 * b, 1.5 + 40 * b, 20001)]
    for a in (0.0, 1.0, *extra):
        pts.append(a + b * np.linspace(-40, 40, 4001))
    return np.unique(np.concatenate(pts))


@pytest.mark.parametrize("delta,omega,eps_p", [(1e-8, 0.01, 1.0), (1e-8, 0.2, 1.0), (1e-8, 0.01, 2.0), (1e-3, 0.2, 0.1)])
def test_two_dirac_pair_exact_loss(delta, omega, eps_p):
    # (0, delta)-DP pair: (1-delta) Dirac_0.5 + delta Dirac_0 vs ... + delta Dirac_1, on [0, 1]
    p = PF.purification_parameters(UNIT, eps_p, omega, delta=delta)
    assert p.laplace_scale == pytest.approx(2 * delta / (omega * eps_p))  # R = 1, d = 1
    b = p.laplace_scale
    y = _ygrid(b, extra=(0.5,))
    lp = _purified_log_density(y, b, omega, atoms=(0.5, 0.0), weights=(1 - delta, delta))
    lq = _purified_log_density(y, b, omega, atoms=(0.5, 1.0), weights=(1 - delta, delta))
    loss = float(np.max(np.abs(lp - lq)))
    assert loss == pytest.approx(X.two_dirac_purification_loss(delta, omega, eps_p), rel=1e-6)
    assert loss <= 0.0 + eps_p  # upstream eps = 0
    # small-b limit of the digest: ln(1 + (1 - omega) eps'/2)
    if b < 1e-4:
        assert loss == pytest.approx(math.log1p((1 - omega) * eps_p / 2), rel=1e-3)


@pytest.mark.parametrize("sd,eps,eps_p", [(0.04, 1.0, 0.25), (0.04, 0.5, 1.0), (0.02, 1.0, 1.0)])
def test_projected_gaussian_purified_loss_within_budget(sd, eps, eps_p):
    # projected Gaussian mechanism on [0, 1]: means 0.5 vs 0.51, exactly (0.01/sd)-GDP
    omega = 0.05
    m0, m1 = 0.5, 0.51
    delta = gdp_delta(eps, 0.01 / sd)
    p = PF.purification_parameters(UNIT, eps_p, omega, delta=delta)
    b = p.laplace_scale

    def law(m):
        atoms = (0.0, 1.0)
        w = (stats.norm.cdf(-m / sd), stats.norm.sf((1 - m) / sd))  # projected tails become atoms
        return atoms, w, (m, sd)

    y = _ygrid(b, extra=(m0, m1))
    a0, w0, g0 = law(m0)
    a1, w1, g1 = law(m1)
    lp = _purified_log_density(y, b, omega, atoms=a0, weights=w0, gauss=g0)
    lq = _purified_log_density(y, b, omega, atoms=a1, weights=w1, gauss=g1)
    loss = float(np.max(np.abs(lp - lq)))
    assert loss <= eps + eps_p
    # without purification the pair has a much larger pure-DP loss on [0, 1] (density ratio at the ends)
    pre = max(abs(stats.norm.logpdf(x, m0, sd) - stats.norm.logpdf(x, m1, sd)) for x in (0.0, 1.0))
    assert pre > eps + eps_p


def test_example_17_needs_the_laplace_step():
    # M(D) = delta Dirac_0.2 + (1 - delta) Unif[0,1] vs Dirac_0.8: (0, delta)-DP but never pure
    delta, omega, eps_p = 1e-6, 0.1, 0.5
    p = PF.purification_parameters(UNIT, eps_p, omega, delta=delta)
    b = p.laplace_scale
    y = _ygrid(b, extra=(0.2, 0.8))

    def dens(a):
        return np.logaddexp(
            np.log1p(-omega) + X.laplace_convolved_log_density(y, b, atoms=(a,), atom_weights=(delta,), uniform=(0.0, 1.0),
                                                               uniform_weight=1 - delta),
            math.log(omega) + X.laplace_convolved_log_density(y, b, uniform=(0.0, 1.0), uniform_weight=1.0))

    loss = float(np.max(np.abs(dens(0.2) - dens(0.8))))
    assert loss <= eps_p
    assert loss > 1e-3  # the atoms are still visible, but within budget


def test_purified_event_is_pure_eps_plus_eps_prime():
    p = PF.purification_parameters(UNIT, 0.5, 0.01, delta=1e-9)
    ev = PF.purified_event(1.0, p)
    assert ev.epsilon == pytest.approx(1.5)
    assert Accountant([ev]).get_delta(1.5) == 0.0
    assert p.total_epsilon(1.0) == pytest.approx(1.5)
    assert p.expected_l1_error_bound() == pytest.approx(0.01 * 1.0 + p.laplace_scale)


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: PF.purification_parameters(UNIT, 1.0, 0.0, delta=1e-6), "omega"),
        (lambda: PF.purification_parameters(UNIT, 1.0, 1.5, delta=1e-6), "omega"),
        (lambda: PF.purification_parameters(UNIT, 0.0, 0.1, delta=1e-6), "eps_prime"),
        (lambda: PF.purification_parameters(UNIT, 1.0, 0.1, delta=1e-6, log_delta=-5.0), "delta"),
        (lambda: PF.purification_parameters(UNIT, 1.0, 0.1, log_delta=1.0), "log_delta"),
        (lambda: PF.purification_parameters(Euclidean(2), 1.0, 0.1, delta=1e-6), "domain"),
        (lambda: PF.required_log_delta(UNIT, 1.0, 0.1, -1.0), "laplace_scale"),
        (lambda: PF.corollary4_log_delta(0, 2, 1.0), "n"),
        (lambda: PF.purify(0, np.array([[0.5]]), "params", UNIT), "params"),
        (lambda: PF.purify("key", np.array([[0.5]]), PF.purification_parameters(UNIT, 1.0, 0.1, delta=1e-6), UNIT), "key"),
    ],
)
def test_bad_inputs_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


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
    dom = L2Ball(3, 1.0)
    p = PF.purification_parameters(dom, 1.0, 0.5, delta=1e-8)
    rng = np.random.default_rng(3)
    edge = rng.normal(size=(50, 3))
    edge /= np.linalg.norm(edge, axis=1, keepdims=True)  # on the sphere, up to rounding
    out = PF.purify(4, edge, p, dom)
    assert out.shape == (50, 3)


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
