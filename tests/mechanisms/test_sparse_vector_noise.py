"""Sparse vector's noise scales measured against the theorem's, and its events against dp-accounting.

Oracles, none of them read from the module under test:
* Dwork & Roth Thm 3.23: one round of AboveThreshold is eps_r-DP with threshold noise
  Lap(2 s / eps_r) and query noise Lap(4 s / eps_r) -- the scales are written here from s and eps_r;
* the exact law of a block ``[A, f, f]`` of queries (A so far above the threshold that it is always
  "above", so each block starts with a fresh threshold): the flags of the two f's have probabilities
  P(1, 1) = p^2, P(1, 0) = p (1 - p) with p = P(q - t >= T - f), and P(0, 1), P(0, 0) integrals over the
  shared threshold noise t (1-D quadrature); the second pair depends on the threshold scale alone given
  the query scale, so both scales are identified. The sampler runs ``numeric_sparse`` itself (the
  scales it passes are those of the params), many blocks in one call, fixed key, chi-square test;
* the answers' noise sd measured (released - answer where above), and the GDP event's mu times that sd
  equal to the sensitivity (the Gaussian mechanism);
* the composition of c pure eps_r rounds and c Gaussian answers by dp-accounting's PLD, at least as
  large as nothing below the target (the calibration meets its target by an accountant it does not
  share).
"""

import math

import jax
import numpy as np
import pytest
from scipy import integrate, stats

from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from dp_infer.mechanisms import sparse_vector as SV


def _lap_cdf(z, b):
    return 0.5 * math.exp(z / b) if z < 0 else 1.0 - 0.5 * math.exp(-z / b)


def _pair_probs(x, bq, bt):
    """Exact P over (flag1, flag2) of two queries at ``T - x`` sharing one fresh threshold: given the
    threshold noise t, each is above iff its query noise q >= x + t, independently."""

    def over_t(h):
        g = lambda t: math.exp(-abs(t) / bt) / (2 * bt) * h(_lap_cdf(x + t, bq))
        pts = sorted({-60 * bt, 60 * bt, 0.0, -x})
        return sum(integrate.quad(g, a, b, epsabs=1e-14, epsrel=1e-12, limit=200)[0] for a, b in zip(pts[:-1], pts[1:]))

    p = over_t(lambda F: 1.0 - F)
    # after a first "above" the second query meets a fresh threshold: independent, probability p
    return {(1, 1): p * p, (1, 0): p * (1 - p), (0, 1): over_t(lambda F: F * (1 - F)), (0, 0): over_t(lambda F: F * F)}


S_, EPS_R, T_ = 2.5, 0.7, 1.3      # sensitivity, per-round eps, threshold: none of them 1
B_T, B_Q = 2 * S_ / EPS_R, 4 * S_ / EPS_R


def _blocks(offsets, reps, key, answers=False, sigma=None):
    A = T_ + 80 * (B_T + B_Q)                    # P(an A query is below) < e^-40
    f = np.tile(np.concatenate([[A, T_ - x, T_ - x] for x in offsets]), reps)
    params = SV.SparseVectorParams(threshold=T_, max_above=f.size, eps_round=EPS_R, sensitivity=S_,
                                   answer_sigma=sigma)
    g = np.zeros(f.size) if answers else None
    above, released = SV.numeric_sparse(key, f, g, params)
    return above.reshape(reps, len(offsets), 3), released.reshape(reps, len(offsets), 3), params


def test_threshold_and_query_noise_scales_are_the_theorems():
    offsets = (-B_Q, 0.0, 0.7 * B_Q)
    reps = 6000                                  # 6000 blocks per offset, one call
    above, _, _ = _blocks(offsets, reps, jax.random.PRNGKey(11))
    assert above[:, :, 0].all()                  # the A queries: always above
    chi2, dof = 0.0, 0
    for j, x in enumerate(offsets):
        exact = _pair_probs(x, B_Q, B_T)
        assert sum(exact.values()) == pytest.approx(1.0, abs=1e-9)
        codes = 2 * above[:, j, 1].astype(int) + above[:, j, 2].astype(int)
        counts = np.bincount(codes, minlength=4)
        e = np.array([exact[(0, 0)], exact[(0, 1)], exact[(1, 0)], exact[(1, 1)]]) * reps
        chi2 += float(np.sum((counts - e) ** 2 / e))
        dof += 3
    # fixed key: the statistic is a number; p > 1e-3 under the theorem's scales
    assert stats.chi2.sf(chi2, dof) > 1e-3, chi2


@pytest.mark.parametrize("bt, bq", [(1.5 * B_T, B_Q), (B_T, 1.5 * B_Q), (B_Q, B_T), (B_T / 1.5, B_Q)])
def test_the_block_oracle_tells_wrong_scales_apart(bt, bq):
    """The test above has power: at 6000 blocks per offset, scales off by 1.5x (either one) or swapped
    move the expected chi-square far beyond the 1e-3 critical value (noncentrality from the exact laws)."""
    offsets, reps = (-B_Q, 0.0, 0.7 * B_Q), 6000
    lam = 0.0
    for x in offsets:
        right, wrong = _pair_probs(x, B_Q, B_T), _pair_probs(x, bq, bt)
        lam += reps * sum((wrong[k] - right[k]) ** 2 / right[k] for k in right)
    crit = stats.chi2.isf(1e-3, 3 * len(offsets))
    assert stats.ncx2.sf(crit, 3 * len(offsets), lam) > 0.999


def test_answer_noise_sd_is_sensitivity_over_the_events_mu():
    sigma = 3.7
    _, released, params = _blocks((0.0,), 4000, jax.random.PRNGKey(12), answers=True, sigma=sigma)
    z = released[:, 0, 0]                         # the A queries are always above: answer 0 + noise
    se = 1.0 / math.sqrt(2 * z.size)              # se of log(sd): 1.1%; 5 se
    sd = math.sqrt(float(np.mean(z ** 2)))
    assert abs(math.log(sd / sigma)) < 5 * se
    assert abs(float(np.mean(z))) < 5 * sigma / math.sqrt(z.size)
    assert stats.kstest(z / sigma, "norm").pvalue > 1e-3
    events = dict((e.label, (e, c)) for e, c in SV.sparse_vector_events(params))
    gdp, c = events["sparse_vector_answer"]
    assert gdp.mu * sigma == pytest.approx(S_, rel=1e-12) and c == params.max_above
    pure, c2 = events["above_threshold_round"]
    assert pure.epsilon == EPS_R and c2 == params.max_above
    # below-threshold positions release exactly 0
    _, rel2, _ = _blocks((5 * B_Q,), 50, jax.random.PRNGKey(13), answers=True, sigma=sigma)
    ab, _, _ = _blocks((5 * B_Q,), 50, jax.random.PRNGKey(13), answers=True, sigma=sigma)
    assert np.all(rel2[~ab] == 0.0)


def _pld_eps(eps_r, c, sigma_over_s, delta):
    interval = 1e-4
    pure = pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(eps_r, 0.0),
                                           value_discretization_interval=interval)
    total = pure.self_compose(c)
    if sigma_over_s is not None:
        g = pld_lib.from_gaussian_mechanism(sigma_over_s, value_discretization_interval=interval)
        total = total.compose(g.self_compose(c))
    return total.get_epsilon_for_delta(delta)


@pytest.mark.parametrize("c, s, answers", [(1, 1.0, False), (4, 2.5, True), (8, 0.3, True), (3, 1.0, False)])
def test_calibrated_sparse_vector_meets_its_target_by_dp_accounting(c, s, answers):
    """The calibrated rounds and answers, composed by dp-accounting's PLD (pessimistic, 1e-4 grid:
    never below the exact value, at most ~c 1e-4 above it), meet the target; and the calibration is
    not loose by more than the bisection's tolerance plus that grid."""
    eps, delta = 1.0, 1e-6
    p = SV.calibrate_sparse_vector(eps, delta, max_above=c, threshold=0.0, sensitivity=s, answers=answers)
    # the noise the mechanism adds: query/threshold scales of the theorem at p.eps_round, answers p.answer_sigma
    assert p.threshold_noise_scale == pytest.approx(2 * s / p.eps_round, rel=1e-12)
    assert p.query_noise_scale == pytest.approx(4 * s / p.eps_round, rel=1e-12)
    got = _pld_eps(p.eps_round, c, None if not answers else p.answer_sigma / s, delta)
    assert got <= eps + 2 * c * 1e-4
    # tight: 1% more eps_r (and 1% less answer noise) exceeds the target
    worse = _pld_eps(p.eps_round * 1.01, c, None if not answers else p.answer_sigma / s / 1.01, delta)
    assert worse > eps - 2 * c * 1e-4 or c == 1 and not answers and p.eps_round == pytest.approx(eps, rel=1e-3)
    if not answers:   # c pure rounds alone: eps_r close to the optimal composition's, at least eps / c
        assert p.eps_round >= eps / c * (1 - 1e-4)


def test_gg_sparse_vector_plan_composes_to_its_target():
    plan = SV.plan_gg_sparse_vector(200, eps=2.0, delta=1e-5, p=4.0, max_above=3, sensitivity=1.5)
    # the GG part at (gg_share eps, delta / 2) and the sparse vector at the rest: basic composition of
    # (eps_g, delta/2) with the SV part's own (eps_sv, delta/2) -- dp-accounting PLD for the SV part
    e_g = plan.gg_event.epsilon
    assert e_g <= 1.0 * (1 + 1e-9) and plan.gg_event.delta <= 0.5e-5 * (1 + 1e-12)
    sv = plan.sv
    assert sv.sensitivity == 1.5 and sv.max_above == 3
    got = _pld_eps(sv.eps_round, 3, sv.answer_sigma / 1.5, 0.5e-5)
    assert e_g + got <= 2.0 + 6e-4


def test_the_mechanism_releases_answers_with_the_noise_of_the_declared_sensitivity():
    """sparse_vector_mechanism at sensitivity s = 3 on queries far above the threshold: the first c
    queries are above and released as answer + N(0, sigma_a^2); the measured sd is sigma_a and the
    answers' GDP event has mu = s / sigma_a (the Gaussian mechanism at sensitivity s); the rounds'
    Laplace scales are the theorem's at s."""
    s, c, eps, delta = 3.0, 200, 4.0, 1e-6
    q = np.full(400, 1e6)
    answers = np.linspace(-5.0, 5.0, 400)
    r = SV.sparse_vector_mechanism(q, answers, eps=eps, delta=delta, threshold=0.0, max_above=c,
                                   sensitivity=s, seed=2)
    above, released = r.value
    assert above[:c].all() and not above[c:].any()
    sig = r.params["answer_sigma"]
    z = released[:c] - answers[:c]
    sd = math.sqrt(float(np.mean(z ** 2)))
    assert abs(math.log(sd / sig)) < 5 / math.sqrt(2 * c)            # 5 se of log sd: 25%
    assert np.all(released[c:] == 0.0)
    ev = {e.label: (e, k) for e, k in r.events}
    gdp, k_a = ev["sparse_vector_answer"]
    assert k_a == c and gdp.mu * sig == pytest.approx(s, rel=1e-12)
    pure, k_r = ev["above_threshold_round"]
    assert k_r == c and r.params["sensitivity"] == s
    assert r.params["eps_round"] == pure.epsilon
    # the composition of what was actually added, by dp-accounting, meets the target
    assert _pld_eps(pure.epsilon, c, sig / s, delta) <= eps + 2 * c * 1e-4


def test_the_mechanism_without_answers_releases_flags_only_at_the_default_sensitivity():
    q = np.array([0.0, 50.0, 0.0, 90.0])
    r = SV.sparse_vector_mechanism(q, eps=1.0, delta=1e-6, threshold=20.0, max_above=2, seed=3)
    above, released = r.value
    assert np.all(released == 0.0) and r.params["answer_sigma"] is None
    assert r.params["sensitivity"] == 1.0                              # the documented default
    assert [e.label for e, _ in r.events] == ["above_threshold_round"]
    assert r.events[0][0].epsilon == pytest.approx(1.0 / 2, rel=1e-3)  # c pure rounds share eps (basic at c = 2
    assert r.epsilon(1e-6) <= 1.0                                        # is within 1e-3 of the optimum here)


@pytest.mark.parametrize("k, t", [(1, 1.0), (2, 1.0), (3, 1.0), (4, 1.0), (10, 0.5), (1000, 1.0), (10**6, 0.25)])
def test_thesis_max_above_is_theorem_37s_formula(k, t):
    """c_SV = 4 k / log^{2 + 2t} k (Theorem 37), at least 1, and 1 for k < 3 (log k <= 1)."""
    want = 1 if k < 3 else max(1, int(4.0 * k / math.log(k) ** (2.0 + 2.0 * t)))
    assert SV.thesis_max_above(k, t) == want
    if k == 3:
        assert want == 8


def test_integer_and_float32_queries_get_the_float64_noise():
    """Counts are natural queries: integer (and float32) queries and answers are released exactly as
    their float64 values would be (same key: the same noise, drawn in float64)."""
    p = SV.SparseVectorParams(threshold=3.0, max_above=3, eps_round=0.8, answer_sigma=1.3, sensitivity=1.0)
    q = np.array([0, 5, 1, 9, 2, 7, 4])
    key = jax.random.PRNGKey(21)
    ref = SV.numeric_sparse(key, q.astype(np.float64), q.astype(np.float64), p)
    for dt in (np.int64, np.int32, np.float32):
        got = SV.numeric_sparse(key, q.astype(dt), q.astype(dt), p)
        np.testing.assert_array_equal(got[0], ref[0])
        np.testing.assert_array_equal(got[1], ref[1])
        assert got[1].dtype == np.float64


@pytest.mark.parametrize("q, a", [(np.array([1.0, np.nan]), None), (np.array([1.0, np.inf]), None),
                                  (np.zeros(0), None), (np.zeros((2, 2)), None), (np.zeros(3), np.zeros(2)),
                                  (np.zeros(3), np.array([0.0, np.nan, 0.0]))])
def test_queries_and_answers_that_are_not_finite_vectors_are_refused(q, a):
    p = SV.SparseVectorParams(threshold=0.0, max_above=1, eps_round=1.0,
                              answer_sigma=None if a is None else 1.0)
    with pytest.raises(ValueError, match="queries must|answers must"):
        SV.numeric_sparse(jax.random.PRNGKey(0), q, a, p)


@pytest.mark.parametrize("kw, name", [(dict(threshold=math.nan), "threshold"), (dict(threshold=math.inf), "threshold"),
                                      (dict(max_above=0), "max_above"), (dict(eps_round=0.0), "eps_round"),
                                      (dict(eps_round=-1.0), "eps_round"), (dict(sensitivity=0.0), "sensitivity"),
                                      (dict(answer_sigma=0.0), "answer_sigma"), (dict(answer_sigma=-2.0), "answer_sigma")])
def test_parameters_outside_their_range_are_refused_by_name(kw, name):
    base = dict(threshold=1.0, max_above=2, eps_round=0.5, answer_sigma=None, sensitivity=1.0)
    with pytest.raises(ValueError, match=name):
        SV.SparseVectorParams(**{**base, **kw})
    SV.SparseVectorParams(**base)   # the base is valid


def test_a_single_query_is_a_valid_input():
    p = SV.SparseVectorParams(threshold=0.0, max_above=1, eps_round=1.0, answer_sigma=2.0)
    above, released = SV.numeric_sparse(jax.random.PRNGKey(1), np.array([1e9]), np.array([4.0]), p)
    assert above.tolist() == [True] and released.shape == (1,) and released[0] != 4.0


def test_answer_noise_is_drawn_in_float64_not_on_the_float32_grid():
    """The answers' Gaussian noise is drawn in float64 (JAX's x64 enabled for the draw): float32
    noise would sit on a grid 2^29 times coarser, the setting of floating-point attacks on additive
    noise (Mironov 2012). Outside any x64 context, almost no released value is a float32 number."""
    assert not jax.config.jax_enable_x64
    p = SV.SparseVectorParams(threshold=0.0, max_above=500, eps_round=1.0, answer_sigma=1.7)
    _, released = SV.numeric_sparse(jax.random.PRNGKey(4), np.full(500, 1e9), np.zeros(500), p)
    on_f32_grid = released.astype(np.float32).astype(np.float64) == released
    assert on_f32_grid.sum() <= 5      # a float64 normal is a float32 number with probability ~2^-29
