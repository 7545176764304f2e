"""Query answering and the sparse vector technique (seed 004 §2.6, Theorems 36-37).

Oracles: exact pattern probabilities of sparse vector by 1-D quadrature over the threshold noise,
enumerated over every flag pattern and every neighbour of tiny query vectors (the privacy
inequality), the sampler's frequencies against them, closed-form expected errors, brute-force
conjunction counts, and the accountant's composition.
"""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats

from dp_infer.mechanisms import generalized_gaussian as gg
from dp_infer.mechanisms import queries as Q
from dp_infer.mechanisms import sparse_vector as SV
from dp_infer.privacy import Accountant


# --------------------------------------------------------------------------- exact oracle for the flags
def _lap_cdf(z, b):
    return 0.5 * math.exp(z / b) if z < 0 else 1.0 - 0.5 * math.exp(-z / b)


def _lap_pdf(z, b):
    return math.exp(-abs(z) / b) / (2 * b)


def pattern_probability(f, T, c, b_thr, b_q, pattern):
    """P(flags = pattern) for NumericSparse: rounds are independent given their threshold noise,
    each round integrated over its threshold noise by adaptive quadrature. Queries after the c-th
    'above' are never examined (flag 0)."""
    k, count, start, segs = len(f), 0, 0, []
    for i, a in enumerate(pattern):
        if count >= c:
            if a:
                return 0.0
            continue
        if a:
            segs.append((start, i, True))
            start, count = i + 1, count + 1
    if count < c and start < k:
        segs.append((start, k - 1, False))
    prob = 1.0
    for s, e, above in segs:
        def g(r, s=s, e=e, above=above):
            v = _lap_pdf(r, b_thr)
            for j in range(s, e if above else e + 1):
                v *= _lap_cdf(T + r - f[j], b_q)
            if above:
                v *= 1.0 - _lap_cdf(T + r - f[e], b_q)
            return v

        pts = [-60 * b_thr] + sorted({0.0} | {f[j] - T for j in range(s, e + 1)}) + [60 * b_thr]
        prob *= sum(integrate.quad(g, a, b, epsabs=1e-15, epsrel=1e-12, limit=200)[0]
                    for a, b in zip(pts[:-1], pts[1:]))
    return prob


def _max_log_ratio(f, T, c, b_thr, b_q, s=1.0):
    pats = list(itertools.product((0, 1), repeat=len(f)))
    P = {pt: pattern_probability(f, T, c, b_thr, b_q, pt) for pt in pats}
    worst = 0.0
    for sh in itertools.product((-1, 0, 1), repeat=len(f)):
        f2 = [fi + s * d for fi, d in zip(f, sh)]
        for pt in pats:
            if P[pt] > 0:
                worst = max(worst, abs(math.log(P[pt]) - math.log(pattern_probability(f2, T, c, b_thr, b_q, pt))))
    return worst, sum(P.values())


@pytest.mark.parametrize("f", [[0.0, 0.0, 0.0], [1.0, -1.0, 0.5], [-2.0, -2.0, 2.0]])
@pytest.mark.parametrize("c", [1, 2])
def test_flags_are_pure_c_eps_round_by_exhaustive_enumeration(f, c):
    """Every pattern, every neighbour in the l_inf unit ball's corners: |log ratio| <= c eps_r."""
    p = SV.SparseVectorParams(threshold=0.0, max_above=c, eps_round=1.0)
    worst, total = _max_log_ratio(f, p.threshold, c, p.threshold_noise_scale, p.query_noise_scale)
    assert total == pytest.approx(1.0, abs=1e-9)
    assert worst <= c * p.eps_round + 1e-9
    assert worst > 0.3 * p.eps_round  # the pattern distribution does move


def test_the_enumeration_catches_an_under_noised_variant():
    """With query noise Lap(2/eps) instead of Lap(4/eps), one round is no longer eps-DP."""
    worst, _ = _max_log_ratio([0.0, 0.0, 0.0], 0.0, 1, 2.0, 2.0)
    assert worst > 1.1


def test_sampler_frequencies_match_the_exact_pattern_probabilities():
    f, T, c = np.array([0.5, -1.0, 1.0]), 0.2, 2
    p = SV.SparseVectorParams(threshold=T, max_above=c, eps_round=1.5)
    n = 100_000
    keys = jax.random.split(jax.random.key(5), n)
    with jax.enable_x64(True):
        flags = jax.vmap(lambda k: SV.sparse_vector_flags(k, jnp.asarray(f), T, c, p.threshold_noise_scale,
                                                          p.query_noise_scale))(keys)
    flags = np.asarray(flags, dtype=int)
    pats = list(itertools.product((0, 1), repeat=3))
    exact = np.array([pattern_probability(list(f), T, c, p.threshold_noise_scale, p.query_noise_scale, pt)
                      for pt in pats])
    codes = flags @ np.array([4, 2, 1])
    counts = np.bincount(codes, minlength=8)[[4 * a + 2 * b + cc for a, b, cc in pats]]
    ok = exact > 0
    assert counts[~ok].sum() == 0  # impossible patterns (a 1 after the c-th 1) never occur
    chi2 = float(np.sum((counts[ok] - n * exact[ok]) ** 2 / (n * exact[ok])))
    assert stats.chi2.sf(chi2, df=int(ok.sum()) - 1) > 1e-3


# --------------------------------------------------------------------------- calibration and Theorem 37
def test_calibrated_sparse_vector_composes_to_the_target_and_is_tight():
    eps, delta, c = 1.0, 1e-6, 8
    p = SV.calibrate_sparse_vector(eps, delta, max_above=c, threshold=3.0)
    acc = Accountant(list(SV.sparse_vector_events(p)))
    assert acc.get_epsilon(delta) <= eps
    bigger = SV.SparseVectorParams(threshold=3.0, max_above=c, eps_round=p.eps_round * 1.001,
                                   answer_sigma=p.answer_sigma / 1.001)
    assert Accountant(list(SV.sparse_vector_events(bigger))).get_epsilon(delta) > eps
    # for many rounds the accountant's composition beats a basic split (eps/2 over c rounds) by ~sqrt(c)
    many = SV.calibrate_sparse_vector(eps, delta, max_above=256, threshold=3.0)
    assert many.eps_round > 4 * eps / (2 * 256)


def test_sparse_vector_mechanism_release():
    q = np.array([0.0, 5.0, 0.0, 9.0, 0.0, 7.0])
    r = SV.sparse_vector_mechanism(q, q, eps=2.0, delta=1e-6, threshold=4.0, max_above=2, seed=1)
    above, released = r.value
    assert above.sum() <= 2 and np.all(released[~above] == 0.0)
    assert r.epsilon(1e-6) <= 2.0
    with pytest.raises(ValueError, match="max_above"):
        SV.sparse_vector_mechanism(q, eps=1.0, delta=1e-6, threshold=1.0, max_above=0)


def test_gg_threshold_has_the_requested_exceedance_probability():
    p, sigma, k, c = 4.0, 30.0, 500, 10
    T = SV.gg_threshold(p, sigma, k, c)
    assert 2 * 0.5 * special.gammaincc(1 / p, (T / sigma) ** p) == pytest.approx(c / (2 * k), rel=1e-10)
    assert SV.thesis_max_above(1000) == 1 and SV.thesis_max_above(10**8) > 1


def test_gg_sparse_vector_composes_to_the_target_and_corrects_large_noise():
    k, eps, delta, c = 300, 1.0, 1e-6, 30
    v = np.zeros(k)
    r = SV.gg_sparse_vector_mechanism(v, eps=eps, delta=delta, p=4, max_above=c, seed=4)
    assert r.epsilon(delta) <= eps
    kinds = [e.kind for e, _ in r.events]
    assert kinds == ["approx", "pure", "gdp"]
    plan = SV.plan_gg_sparse_vector(k, eps=eps, delta=delta, p=4, max_above=c)
    assert plan.sigma == r.params["sigma"] and plan.sv.answer_sigma == r.params["answer_sigma"]
    out, above = SV.run_gg_sparse_vector(jax.random.key(4), v, plan)
    assert 0 < above.sum() <= c
    # re-answered coordinates carry N(0, sigma_a^2) noise, much smaller than the GG noise, and they are
    # the coordinates whose GG noise was large (above the threshold, up to sparse vector's noise)
    assert plan.sv.answer_sigma < 0.5 * plan.sigma
    assert np.mean(np.abs(out[above])) < np.mean(np.abs(out[~above]))


# --------------------------------------------------------------------------- query answering
def test_conjunction_queries_by_brute_force():
    rng = np.random.default_rng(0)
    B = (rng.random((50, 6)) < 0.5).astype(int)
    sets = Q.random_conjunctions(6, 10, 2, rng)
    V = Q.conjunction_queries(B, sets)
    for j, (a, b) in enumerate(sets):
        assert V[:, j].sum() == sum(1 for row in B if row[a] == 1 and row[b] == 1)
    with pytest.raises(ValueError, match="binary"):
        Q.conjunction_queries(B * 2, sets)


@pytest.mark.parametrize("mech", ["gaussian", "laplace", "generalized_gaussian"])
def test_expected_max_error_is_exact(mech):
    scale, p = 3.0, 4.0
    # k = 1 closed forms: E|N(0, s^2)| = s sqrt(2/pi), E|Lap(b)| = b, E|GG| = s Gamma(2/p) / Gamma(1/p)
    one = {"gaussian": scale * math.sqrt(2 / math.pi), "laplace": scale,
           "generalized_gaussian": scale * special.gamma(2 / p) / special.gamma(1 / p)}[mech]
    assert Q.expected_max_error(mech, 1, scale, p=p) == pytest.approx(one, rel=1e-8)
    # k = 50 against Monte Carlo (4 standard errors)
    n, k = 4000, 50
    key = jax.random.key(3)
    if mech == "gaussian":
        x = np.asarray(jax.random.normal(key, (n, k))) * scale
    else:
        x = gg.sample_generalized_gaussian(key, 1.0 if mech == "laplace" else p, scale, (n, k))
    m = np.abs(x).max(axis=1)
    assert abs(m.mean() - Q.expected_max_error(mech, k, scale, p=p)) < 4 * m.std() / math.sqrt(n)


def test_answer_queries_each_mechanism_meets_its_target():
    rng = np.random.default_rng(1)
    values = (rng.random((400, 40)) < 0.3).astype(float)
    truth = values.sum(axis=0)
    eps, delta = 1.0, 1e-6
    for mech in Q.MECHANISMS:
        r = Q.answer_queries(values, eps=eps, delta=delta, mechanism=mech, seed=2)
        assert r.epsilon(delta) <= eps + 1e-12
        assert r.value.shape == truth.shape and not np.allclose(r.value, truth)
        assert r.params["noise_scale"] == pytest.approx(Q.noise_scale(mech, 40, eps=eps, delta=delta))
    pure = Q.answer_queries(values, eps=eps, delta=None, mechanism="laplace", seed=2)
    assert pure.is_pure and pure.epsilon() == pytest.approx(eps) and pure.params["noise_scale"] == 40.0
    mean = Q.answer_queries(values, eps=eps, delta=delta, mechanism="gaussian", normalize=True, seed=2)
    assert mean.params["sensitivity"] == pytest.approx(1 / 400)


def test_answer_queries_validation_happens_first():
    good = np.zeros((5, 3))
    with pytest.raises(ValueError, match="values"):
        Q.answer_queries(good + 2.0, eps=1.0, delta=1e-6)
    with pytest.raises(ValueError, match="mechanism"):
        Q.answer_queries(good, eps=1.0, delta=1e-6, mechanism="cauchy")
    with pytest.raises(ValueError, match="delta"):
        Q.answer_queries(good, eps=1.0, delta=None, mechanism="gaussian")
    with pytest.raises(ValueError, match="eps"):
        Q.answer_queries(good, eps=0.0, delta=1e-6)
    with pytest.raises(ValueError, match="eps"):  # targets above 100 give no meaningful privacy
        Q.answer_queries(good, eps=1e3, delta=1e-6)
