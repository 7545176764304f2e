"""Worked examples of purification (seed 003): pure DP-GD, pure AdaSSP (Alg. 13), pure PTR
(Alg. 9-10), pure query release (MWEM + binary embedding, Alg. 14-16).

Oracles: brute-force sensitivities and distances to instability on tiny inputs, the exact arithmetic
of the seed's privacy statements (Lemma 22, 34, 36, Theorems 2, 3, 7, 8), the accountant, closed
forms for the PTR refusal rate, and utility sanity checks against non-private fits.
"""

import itertools
import math

import numpy as np
import pytest

import dp_infer
from dp_infer.domains import L2Ball
from dp_infer.mechanisms import linear_regression as LR
from dp_infer.mechanisms import noisy_gd as GD
from dp_infer.mechanisms import ptr as PTR
from dp_infer.mechanisms import query_release as QR
from dp_infer.privacy import Accountant
from dp_infer.privacy import purification as PF
from dp_infer.privacy.conversions import gdp_mu, zcdp_epsilon_mironov


def _regression(n, d, seed, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    theta = rng.normal(size=d)
    theta /= np.linalg.norm(theta)
    y = np.clip(X @ theta + noise * rng.normal(size=n), -1.0, 1.0)
    return X, y, theta


# --------------------------------------------------------------------------- AdaSSP
def test_adassp_sensitivities_by_brute_force_and_attained():
    sens = LR.adassp_sensitivities(1.0, 1.0)
    rng = np.random.default_rng(0)
    worst = {"lambda_min": 0.0, "xtx_upper": 0.0, "xty": 0.0}
    base = rng.normal(size=(6, 3))
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    cands = [np.eye(3)[i] * s for i in range(3) for s in (1, -1)] + list(base)
    for x, xp in itertools.product(cands, repeat=2):
        for yv, yp in ((1.0, -1.0), (1.0, 1.0), (-0.5, 1.0)):
            X1, X2 = np.vstack([base, x]), np.vstack([base, xp])
            worst["lambda_min"] = max(worst["lambda_min"], abs(np.linalg.eigvalsh(X1.T @ X1)[0]
                                                               - np.linalg.eigvalsh(X2.T @ X2)[0]))
            worst["xtx_upper"] = max(worst["xtx_upper"], np.linalg.norm(np.triu(np.outer(x, x) - np.outer(xp, xp))))
            worst["xty"] = max(worst["xty"], np.linalg.norm(x * yv - xp * yp))
    for k in worst:
        assert worst[k] <= sens[k] + 1e-12
    assert worst["xtx_upper"] == pytest.approx(sens["xtx_upper"]) and worst["xty"] == pytest.approx(sens["xty"])


def test_adassp_events_compose_exactly_to_the_target_and_it_is_accurate():
    X, y, theta = _regression(20000, 5, 1)
    eps, delta = 1.0, 1e-6
    r = LR.adassp(X, y, eps=eps, delta=delta, row_norm=1.0, label_bound=1.0, seed=2)
    acc = r.accountant()
    assert acc.gdp_mu() == pytest.approx(gdp_mu(eps, delta), rel=1e-12)  # three GDP shares of mu
    assert r.epsilon(delta) == pytest.approx(eps, abs=1e-9)
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    assert np.linalg.norm(r.value - ols) < 0.1 * np.linalg.norm(ols)


def test_pure_adassp_is_pure_eps_and_accurate():
    X, y, theta = _regression(20000, 5, 3)
    r = LR.pure_adassp(X, y, eps=1.0, radius=2.0, row_norm=1.0, label_bound=1.0, seed=4)
    assert r.is_pure and r.epsilon() == pytest.approx(1.0)        # (eps - eps') + eps' (Thm 7 with Thm 1)
    up = r.params["upstream"]
    assert up["target_eps"] == pytest.approx(0.9) and up["log_delta"] < -30
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    assert np.linalg.norm(r.value - ols) < 0.2 * np.linalg.norm(ols)


def test_adassp_refuses_undeclared_rows_before_any_work():
    X, y, _ = _regression(100, 3, 5)
    with pytest.raises(ValueError, match="row_norm"):
        LR.adassp(2 * X + 1, y, eps=1.0, delta=1e-6, row_norm=1.0, label_bound=1.0)
    with pytest.raises(ValueError, match="label_bound"):
        LR.pure_adassp(X, 3 * y + 2, eps=1.0, radius=1.0, row_norm=1.0, label_bound=1.0)
    with pytest.raises(ValueError, match="rho"):
        LR.adassp(X, y, eps=1.0, delta=1e-6, row_norm=1.0, label_bound=1.0, rho=1.5)


# --------------------------------------------------------------------------- PTR
def _median(v):
    s = np.sort(v)
    return s[(len(s) + 1) // 2 - 1]


def _local_sensitivity(v, grid):
    m = _median(v)
    return max(abs(_median(np.r_[v[:i], g, v[i + 1:]]) - m) for i in range(len(v)) for g in grid)


@pytest.mark.parametrize("x", [[0.2, 0.25, 0.5, 0.5, 0.75], [0.0, 0.5, 0.5, 0.5, 1.0], [0.1, 0.3, 0.4, 0.9]])
def test_median_sensitivity_at_distance_and_distance_to_instability_by_brute_force(x):
    x = np.array(x)
    grid = sorted(set(np.r_[0.0, 1.0, x]))
    for k in range(0, 3):
        brute = 0.0
        for idx in itertools.combinations(range(len(x)), k):
            for vals in itertools.product(grid, repeat=k):
                y = x.copy()
                y[list(idx)] = vals
                brute = max(brute, _local_sensitivity(y, grid))
        assert PTR.median_sensitivity_at_distance(x, k, lower=0, upper=1) == pytest.approx(brute)
    for beta in (0.05, 0.2, 0.45):
        d = PTR.median_distance_to_instability(x, beta, lower=0, upper=1)
        ks = [k for k in range(len(x) + 1) if PTR.median_sensitivity_at_distance(x, k, lower=0, upper=1) > beta]
        assert d == (ks[0] if ks else len(x) + 1)


def test_distance_to_instability_has_sensitivity_one():
    rng = np.random.default_rng(6)
    for _ in range(200):
        x = np.clip(rng.normal(0.5, rng.uniform(0.01, 0.3), size=31), 0, 1)
        xp = x.copy()
        xp[rng.integers(31)] = rng.uniform()
        d1 = PTR.median_distance_to_instability(x, 0.02, lower=0, upper=1)
        d2 = PTR.median_distance_to_instability(xp, 0.02, lower=0, upper=1)
        assert abs(d1 - d2) <= 1


def test_ptr_refusal_rate_on_an_unstable_dataset_is_exact():
    """D_beta = 0: the test passes iff Lap(1/eps) > ln(1/delta)/eps, probability delta / 2."""
    eps, delta, n = 1.0, 0.3, 1500
    passes = sum(PTR.propose_test_release(0.5, 0, eps=eps, delta=delta, beta=0.1, seed=i).value is not None
                 for i in range(n))
    p = delta / 2
    assert abs(passes / n - p) < 4 * math.sqrt(p * (1 - p) / n)
    r = PTR.propose_test_release(0.5, 50, eps=eps, delta=delta, beta=0.1, seed=1)
    assert r.value is not None and r.events[0][0].epsilon == 2 * eps and r.events[0][0].delta == delta  # Lemma 34


def test_pure_ptr_median_budget_arithmetic_and_utility():
    rng = np.random.default_rng(7)
    x = np.clip(rng.normal(0.4, 0.05, size=4001), 0, 1)
    outs = [PTR.pure_ptr_median(x, eps=1.0, beta=0.01, lower=0, upper=1, seed=s) for s in range(40)]
    r = outs[0]
    assert r.is_pure and r.epsilon() == pytest.approx(1.0)
    assert 2 * r.params["eps_ptr"] + r.params["purification"]["eps_prime"] == pytest.approx(1.0)  # Lemma 34
    errs = np.array([abs(o.value - _median(x)) for o in outs])
    assert np.mean(errs < 0.1) > 0.9  # stable data: PTR answers; noise beta/eps_ptr ~ 0.02


# --------------------------------------------------------------------------- MWEM and pure query release
def _binary_workload(d):
    N = 2**d
    bits = (np.arange(N)[:, None] >> np.arange(d - 1, -1, -1)) & 1
    Q = [bits[:, i] for i in range(d)] + [bits[:, i] * bits[:, j] for i in range(d) for j in range(i + 1, d)]
    return np.array(Q, dtype=float)


@pytest.mark.parametrize("eps,log_delta,T", [(1.0, math.log(1e-6), 10), (0.5, -500.0, 30), (2.0, -40.0, 5)])
def test_mwem_round_epsilon_meets_lemma_36_and_is_at_least_the_seeds(eps, log_delta, T):
    seed_e0 = QR.seed_round_epsilon(eps, log_delta, T)
    rho = eps**2 / (16 * -log_delta)
    assert T * seed_e0**2 == pytest.approx(rho)                                   # 2T mechanisms, eps0^2/2 each
    assert zcdp_epsilon_mironov(rho, log_delta=log_delta) <= eps                  # Lemma 22
    assert Accountant([(dp_infer.privacy.PureDpEvent(epsilon=seed_e0), 2 * T)]).get_epsilon(
        log_delta=log_delta) <= eps                                               # the accountant agrees
    ours = QR.mwem_round_epsilon(eps, log_delta, T)
    assert ours >= seed_e0
    assert Accountant([(dp_infer.privacy.PureDpEvent(epsilon=ours), 2 * T)]).get_epsilon(
        log_delta=log_delta) <= eps


def test_mwem_beats_the_uniform_distribution():
    rng = np.random.default_rng(8)
    d = 4
    Q = _binary_workload(d)
    recs = np.where(rng.random(5000) < 0.6, 3, rng.integers(0, 2**d, 5000))
    hist = np.bincount(recs, minlength=2**d)
    uniform = np.full(2**d, 1.0 / 2**d)
    base = QR.query_error(Q, hist, uniform)
    seed_alg = QR.mwem(hist, Q, eps=5.0, delta=1e-6, rounds=20, seed=9)          # Alg. 14 as stated
    assert seed_alg.epsilon(1e-6) <= 5.0
    assert QR.query_error(Q, hist, seed_alg.value) < 0.7 * base
    reuse = QR.mwem(hist, Q, eps=5.0, delta=1e-6, rounds=20, update_passes=10, seed=9)  # same privacy
    assert reuse.events == seed_alg.events
    assert QR.query_error(Q, hist, reuse.value) < 0.2 * base


def test_pure_mwem_is_two_eps_pure_and_useful():
    rng = np.random.default_rng(10)
    d = 3
    Q = _binary_workload(d)
    recs = np.where(rng.random(20000) < 0.5, 6, rng.integers(0, 2**d, 20000))
    hist = np.bincount(recs, minlength=2**d)
    r = QR.pure_mwem(hist, Q, eps=2.0, num_bits=d, update_passes=10, seed=11)
    assert r.is_pure and r.epsilon() == pytest.approx(4.0)                      # Theorem 8: 2 eps
    D = r.params["num_bits_total"]
    assert r.params["log_delta"] < D * math.log(2.0) - 3 * D * math.log(2 * D)   # Theorem 2's delta condition
    assert r.value.min() >= 0 and r.value.max() < 2**d
    synth = np.bincount(r.value, minlength=2**d)
    uniform = np.full(2**d, 1.0 / 2**d)
    assert QR.query_error(Q, hist, synth) < 0.25 * QR.query_error(Q, hist, uniform)


# --------------------------------------------------------------------------- DP-GD
def test_dp_gd_and_its_purification():
    X, y, theta = _regression(5000, 4, 12)
    dom = L2Ball(4, 2.0)
    loss = dp_infer.squared(label_bound=1.0, domain=dom)
    r = GD.dp_gd(loss, X, y, eps=1.0, delta=1e-6, domain=dom, steps=300, seed=13)
    c = loss.constants
    # the sensitivity G / n with the float32 margin (dp_infer.privacy.float32_margin): 1e-3 at n = 5000
    assert r.params["mu"] == pytest.approx(math.sqrt(300) * c.grad_diff / 5000 * 1.001 / r.params["sigma"], rel=1e-12)
    assert r.epsilon(1e-6) == pytest.approx(1.0, abs=1e-9)

    def risk(t):
        return 0.5 * np.mean((X @ t - y) ** 2)

    assert risk(r.value) < 0.5 * risk(np.zeros(4))
    p = GD.pure_dp_gd(loss, X, y, eps=1.0, domain=dom, steps=300, seed=13)
    assert p.is_pure and p.epsilon() == pytest.approx(1.0)
    assert risk(p.value) < 0.6 * risk(np.zeros(4))


def test_pure_dp_gd_with_the_seeds_corollary_4_recipe():
    """omega = 1/n^2, delta = 2 omega / (16 C d n^2)^d, eps' = eps (fraction 1/2 of a 2 eps total):
    Delta = 1 / (8 sqrt(d) n^2) exactly (Corollary 4)."""
    X, y, _ = _regression(400, 3, 14)
    dom = L2Ball(3, 0.5)  # C = diameter 1
    n, d, C = 400, 3, dom.diameter
    ld, omega = PF.corollary4_log_delta(n, d, C)
    loss = dp_infer.squared(label_bound=1.0, domain=dom)
    r = GD.pure_dp_gd(loss, X, y, eps=2.0, domain=dom, steps=50, eps_prime_fraction=0.5, omega=omega,
                      log_delta=ld, seed=15)
    w = r.params["purification"]["wasserstein_l1"]
    assert w * 8 * math.sqrt(d) * n * n == pytest.approx(1.0, rel=1e-10)
    assert r.epsilon() == pytest.approx(2.0)                                        # Theorem 3: 2 eps


def test_dp_sgd_noise_multiplier_at_full_batch_is_the_gaussian_closed_form():
    """q = 1: T Gaussian steps with replace-one sensitivity 2C on the clipped sum: mu = 2 sqrt(T) / z, with C
    times 1 + 1e-3 for the float32 sum (dp_infer.privacy.float32_margin at n = 1000)."""
    T, eps, delta = 100, 1.0, 1e-6
    z = GD.dp_sgd_noise_multiplier(eps, steps=T, q=1.0, clip_norm=1.0, n=1000, delta=delta, rtol=1e-4)
    assert z == pytest.approx(2 * 1.001 * math.sqrt(T) / gdp_mu(eps, delta), rel=2e-4)
    assert z >= 2 * 1.001 * math.sqrt(T) / gdp_mu(eps, delta)


def test_pure_dp_sgd_is_pure_and_useful():
    X, y, _ = _regression(3000, 4, 16)
    dom = L2Ball(4, 2.0)
    loss = dp_infer.squared(label_bound=1.0, domain=dom)
    r = GD.pure_dp_sgd(loss, X, y, eps=1.0, domain=dom, steps=200, q=0.05, seed=17)
    assert r.is_pure and r.epsilon() == pytest.approx(1.0)
    up = r.params["upstream"]
    ev = GD._sgd_event(up["noise_multiplier"], 200, 0.05, 1.0, 3000)
    assert Accountant([ev]).get_epsilon(log_delta=up["log_delta"]) <= 0.9       # upstream at eps - eps'

    def risk(t):
        return 0.5 * np.mean((X @ t - y) ** 2)

    assert risk(r.value) < 0.5 * risk(np.zeros(4))


def test_neighbouring_datasets_give_identical_params_and_events():
    """DESIGN invariant 10: nothing computed from the private data steers a mechanism's parameters."""
    from dp_infer.mechanisms import queries as Q
    from dp_infer.mechanisms import sparse_vector as SV

    X, y, _ = _regression(600, 3, 18)
    X2, y2 = X.copy(), y.copy()
    X2[0], y2[0] = -X[1], -y[1]                       # replace one record
    dom = L2Ball(3, 2.0)
    loss = dp_infer.squared(label_bound=1.0, domain=dom)
    xm = np.clip(np.random.default_rng(19).normal(0.5, 0.1, 301), 0, 1)
    xm2 = xm.copy()
    xm2[0] = 1.0
    d = 3
    Qw = _binary_workload(d)
    h = np.bincount(np.random.default_rng(20).integers(0, 8, 500), minlength=8)
    h2 = h.copy()
    h2[0] -= 1
    h2[7] += 1
    vals = (np.random.default_rng(21).random((200, 12)) < 0.4).astype(float)
    vals2 = vals.copy()
    vals2[0] = 1.0 - vals2[0]
    pairs = [
        lambda a: Q.answer_queries(a, eps=1.0, delta=1e-6, mechanism="generalized_gaussian", seed=1),
        lambda a: SV.gg_sparse_vector_mechanism(a.sum(axis=0), eps=1.0, delta=1e-6, max_above=3, seed=1),
    ]
    for f in pairs:
        a, b = f(vals), f(vals2)
        assert a.params == b.params and [e.to_dict() for e, _ in a.events] == [e.to_dict() for e, _ in b.events]
    runs = [
        (lambda X_, y_: LR.adassp(X_, y_, eps=1.0, delta=1e-6, row_norm=1.0, label_bound=1.0, seed=1)),
        (lambda X_, y_: LR.pure_adassp(X_, y_, eps=1.0, radius=2.0, row_norm=1.0, label_bound=1.0, seed=1)),
        (lambda X_, y_: GD.dp_gd(loss, X_, y_, eps=1.0, delta=1e-6, domain=dom, steps=20, seed=1)),
        (lambda X_, y_: GD.pure_dp_gd(loss, X_, y_, eps=1.0, domain=dom, steps=20, seed=1)),
    ]
    for f in runs:
        a, b = f(X, y), f(X2, y2)
        assert a.params == b.params and [e.to_dict() for e, _ in a.events] == [e.to_dict() for e, _ in b.events]
    for f in (lambda v: PTR.ptr_median(v, eps=1.0, delta=1e-6, beta=0.05, lower=0, upper=1, seed=1),
              lambda v: PTR.pure_ptr_median(v, eps=1.0, beta=0.05, lower=0, upper=1, seed=1)):
        assert f(xm).params == f(xm2).params
    for f in (lambda hh: QR.mwem(hh, Qw, eps=1.0, delta=1e-6, rounds=5, seed=1),
              lambda hh: QR.pure_mwem(hh, Qw, eps=1.0, num_bits=d, seed=1)):
        assert f(h).params == f(h2).params
