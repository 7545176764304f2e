"""Purification as a general tool (seed 003): Algorithm 1 entry point, the TV variant, Algorithm 2.

Oracles: the exact output laws of purified worst-case (0, delta) / (eps, delta) pairs -- Laplace
convolutions in 1-D, the 2^D rounding-cell probabilities for the binary embedding -- against the
claimed pure eps; the exact success probability of Algorithm 2 against Monte Carlo; the error
bound minimised by the default omega; the arithmetic of the budget split.
"""

import itertools
import math

import jax
import numpy as np
import pytest
from scipy import stats

from dp_infer.domains import Box, L2Ball
from dp_infer.mechanisms import purifier as P
from dp_infer.privacy import exact as X
from dp_infer.privacy import purification as PF

UNIT = Box(np.zeros(1), np.ones(1))


# --------------------------------------------------------------------------- Algorithm 1, general entry
def test_purify_event_is_eps_plus_eps_prime_and_validation():
    r = P.purify(np.array([0.3, -0.2]), L2Ball(2, 1.0), eps=0.7, eps_prime=0.4, log_delta=-80.0, seed=1)
    assert r.is_pure and r.epsilon() == pytest.approx(1.1)
    assert r.report()["epsilon"] == pytest.approx(1.1) and r.randomness["reproducible_by_seed_holder"]
    with pytest.raises(ValueError, match="exactly one"):
        P.purify(np.zeros(2), L2Ball(2, 1.0), eps=1.0, eps_prime=1.0, delta=1e-9, tv_error=1e-9)
    with pytest.raises(ValueError, match="outside the domain"):
        P.purify(np.array([2.0, 0.0]), L2Ball(2, 1.0), eps=1.0, eps_prime=1.0, delta=1e-9, omega=0.1)
    # projecting first is post-processing, allowed on request
    out = P.purify(np.array([2.0, 0.0]), L2Ball(2, 1.0), eps=1.0, eps_prime=1.0, log_delta=-200.0,
                   project_first=True, seed=2)
    assert np.linalg.norm(out.value - np.array([1.0, 0.0])) < 1e-3
    with pytest.raises(ValueError, match="bounded"):
        from dp_infer.domains import Euclidean
        P.purify(np.zeros(2), Euclidean(2), eps=1.0, eps_prime=1.0, delta=1e-9)


def test_default_omega_minimises_the_l1_error_bound():
    dom, ep, ld = L2Ball(5, 2.0), 0.5, -120.0
    w = P.default_omega(dom, ep, ld)

    def bound(om):
        return PF.purification_parameters(dom, ep, om, log_delta=ld, cap=False).expected_l1_error_bound()

    assert bound(w) <= bound(w * 1.2) and bound(w) <= bound(w / 1.2)


def test_plan_purification_split_and_scale():
    dom = L2Ball(4, 3.0)
    plan = P.plan_purification(dom, 2.0)
    assert plan.eps_upstream + plan.eps_prime == pytest.approx(2.0) and plan.eps_prime == pytest.approx(0.2)
    assert plan.params.laplace_scale == pytest.approx(1e-3 * dom.diameter, rel=1e-9)


@pytest.mark.parametrize("tau,omega,eps_p", [(1e-3, 0.05, 1.0), (1e-2, 0.2, 0.5), (1e-6, 0.01, 2.0)])
def test_tv_variant_is_eps_prime_pure_on_the_worst_case_pair(tau, omega, eps_p):
    """The exact target is Unif[0, 1] for both datasets (0-DP); the samplers are within TV tau of it
    with their defect at opposite ends. Purified with tv_error = tau (delta := 2 tau), the exact
    output densities differ by at most eps' in log ratio."""
    par = PF.purification_parameters(UNIT, eps_p, omega, delta=2 * tau)
    b = par.laplace_scale
    y = np.linspace(-40 * b - 1, 40 * b + 2, 20001)
    common = dict(uniform=(0.0, 1.0), uniform_weight=(1 - omega) * (1 - tau) + omega)
    l0 = X.laplace_convolved_log_density(y, b, atoms=[0.0], atom_weights=[(1 - omega) * tau], **common)
    l1 = X.laplace_convolved_log_density(y, b, atoms=[1.0], atom_weights=[(1 - omega) * tau], **common)
    loss = float(np.max(np.abs(l0 - l1)))
    assert loss <= eps_p
    r = P.purify(np.array([0.5]), UNIT, eps=0.0, eps_prime=eps_p, tv_error=tau, omega=omega, seed=3)
    assert r.params["laplace_scale"] == pytest.approx(b) and "total variation" in r.events[0][0].assumptions[0]


# --------------------------------------------------------------------------- Algorithm 2
def _bit_pmf(z_dist, b, D):
    """Exact output pmf of Algorithm 2 for an input law over bit vectors (dict z -> prob)."""
    F = stats.laplace(scale=b).cdf
    outs = list(itertools.product((0, 1), repeat=D))
    pmf = np.zeros(len(outs))
    for z, w in z_dist.items():
        p1 = 1.0 - F(0.5 - np.array(z, dtype=float))  # P(bit i -> 1) on the kept branch
        for j, o in enumerate(outs):
            o = np.array(o)
            kept = np.prod(np.where(o == 1, p1, 1 - p1))
            pmf[j] += w * ((1 - 2.0**-D) * kept + 2.0**-D * 2.0**-D)
    return pmf


@pytest.mark.parametrize("D,delta,eps_p", [(3, 1e-3, 1.0), (4, 1e-6, 0.5), (2, 0.05, 1.0)])
def test_binary_embedding_is_pure_on_worst_case_zero_delta_pairs(D, delta, eps_p):
    b = P.binary_embedding_parameters(D, eps_p, delta=delta)["laplace_scale"]
    z0, z1, z2 = (0, 1) * (D // 2) + (0,) * (D % 2), (0,) * D, (1,) * D
    pd = _bit_pmf({z0: 1 - delta, z1: delta}, b, D)
    pq = _bit_pmf({z0: 1 - delta, z2: delta}, b, D)
    assert pd.sum() == pytest.approx(1.0) and pq.sum() == pytest.approx(1.0)
    assert np.max(np.abs(np.log(pd) - np.log(pq))) <= eps_p


def test_binary_embedding_on_an_eps_delta_randomized_response_pair():
    D, eps, delta, eps_p = 3, 0.8, 1e-4, 0.8
    N = 2**D
    codes = list(itertools.product((0, 1), repeat=D))

    def rr(u):  # randomized response over N values, then delta mass on a far corner
        w = np.full(N, 1.0 / (math.exp(eps) + N - 1))
        w[u] = math.exp(eps) / (math.exp(eps) + N - 1)
        return w

    pa = {codes[i]: (1 - delta) * rr(1)[i] for i in range(N)}
    pa[codes[0]] += delta
    pb = {codes[i]: (1 - delta) * rr(6)[i] for i in range(N)}
    pb[codes[-1]] += delta
    b = P.binary_embedding_parameters(D, eps_p, delta=delta)["laplace_scale"]
    loss = np.max(np.abs(np.log(_bit_pmf(pa, b, D)) - np.log(_bit_pmf(pb, b, D))))
    assert loss <= eps + eps_p


def test_binary_embedding_sampler_matches_the_exact_pmf_and_success_probability():
    D, b, n = 3, 0.3, 60_000
    z = np.array([1, 0, 1], dtype=np.int8)
    keys = jax.random.split(jax.random.key(9), n)
    out = np.asarray(jax.vmap(lambda k: P.purify_bits_core(k, z, b))(keys))
    codes = out @ np.array([4, 2, 1])
    exact = _bit_pmf({tuple(z): 1.0}, b, D)
    counts = np.bincount(codes, minlength=8)
    chi2 = float(np.sum((counts - n * exact) ** 2 / (n * exact)))
    assert stats.chi2.sf(chi2, df=7) > 1e-3
    ps = P.binary_embedding_success_probability(D, b)
    assert ps == pytest.approx(exact[5], rel=1e-12)
    hit = np.mean(np.all(out == z, axis=1))
    assert abs(hit - ps) < 4 * math.sqrt(ps * (1 - ps) / n)


@pytest.mark.parametrize("D", [2, 4, 8])
def test_theorem_2_utility_bound_below_the_delta_threshold(D):
    eps = 1.0
    ld = D * math.log(eps) - 3 * D * math.log(2 * D) - 1e-9   # delta just below eps^D / (2D)^{3D}
    par = P.binary_embedding_parameters(D, eps, log_delta=ld)
    assert par["wasserstein_l1"] <= eps / (4 * D)              # the corrected (l_inf) Delta still meets it
    ps = P.binary_embedding_success_probability(D, par["laplace_scale"])
    assert ps > 1 - 2.0**-D - D / 2 * math.exp(-D)


def test_purify_discrete_release_and_bit_helpers():
    assert P.bits_to_int(P.int_to_bits(11, 5)) == 11
    r = P.purify_discrete(P.int_to_bits(5, 4), eps=1.0, log_delta=-500.0, seed=4)
    assert r.epsilon() == pytest.approx(2.0) and P.bits_to_int(r.value) == 5  # noise ~1e-54: exact w.h.p.
    with pytest.raises(ValueError, match="bits"):
        P.purify_discrete(np.array([0, 2]), eps=1.0, delta=1e-9)


def test_empirical_audit_on_the_two_dirac_worst_case():
    """(0, delta) pair M(D) = (1-d) Dirac_0.5 + d Dirac_0, M(D') = ... Dirac_1 on [0, 1], purified with
    eps' = 4 (Delta capped at the diameter): Clopper-Pearson lower bound <= exact loss <= eps'."""
    from dp_infer.audit import audit_statistics

    delta, omega, ep, n = 0.3, 0.01, 4.0, 400_000
    par = PF.purification_parameters(UNIT, ep, omega, delta=delta)
    b = par.laplace_scale
    y = np.linspace(-40 * b, 1 + 40 * b, 40001)
    kw = dict(uniform=(0.0, 1.0), uniform_weight=omega)
    w = [(1 - omega) * (1 - delta), (1 - omega) * delta]
    exact = float(np.max(np.abs(X.laplace_convolved_log_density(y, b, atoms=[0.5, 0.0], atom_weights=w, **kw)
                                - X.laplace_convolved_log_density(y, b, atoms=[0.5, 1.0], atom_weights=w, **kw))))
    rng = np.random.default_rng(0)
    a = np.where(rng.random(n) < delta, 0.0, 0.5)[:, None]
    c = np.where(rng.random(n) < delta, 1.0, 0.5)[:, None]
    ya = PF.purify(jax.random.key(1), a, par, UNIT)[:, 0]
    yc = PF.purify(jax.random.key(2), c, par, UNIT)[:, 0]
    lb = audit_statistics(ya, yc, delta=0.0)[0]
    assert lb <= exact <= ep
    assert lb > 0.5 * exact
