"""The Rashomon measures against exact oracles.

* model reliance: the exact pairwise swap against an explicit double loop over (i, k != i) with
  the loss written out here, for logistic, squared and smoothed-hinge models, single columns
  and groups; the permutation estimate within its stated Monte-Carlo error of the exact value;
  MCR over sampler draws against the exact MCR over the 2-D set (boundary traced by bisection);
* Rashomon capacity: the closed form against a direct maximisation of the mutual information
  and against Blahut-Arimoto on the full channel of all draws;
* Rashomon ratio: the exact interval against scipy's binomtest and the ellipsoid's closed-form
  volume (2-D: inside the interval; 10-D: no hit, the upper bound holds);
* pattern ratio: Cover's count against an exhaustive sweep of 2-D classifiers;
* ambiguity, discrepancy, prediction ranges against loops; model classes and bad inputs.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize, special, stats

from dp_infer import rashomon as R
from dp_infer.domains import Box
from dp_infer.losses import LossConstants, PerExampleLoss


def _loss_np(kind, s, y, g=1.0):
    if kind == "logistic":
        return math.log1p(math.exp(-abs(s))) + max(s, 0.0) - y * s
    if kind == "squared":
        return 0.5 * (s - y) ** 2
    z = (2 * y - 1) * s
    return 0.0 if z >= 1 else (1 - z - g / 2 if z <= 1 - g else (1 - z) ** 2 / (2 * g))


def _mr_double_loop(kind, theta, X, y, cols, intercept=True):
    n = X.shape[0]
    Xd = np.column_stack([X, np.ones(n)]) if intercept else X
    e_orig = np.mean([_loss_np(kind, Xd[i] @ theta, y[i]) for i in range(n)])
    tot = 0.0
    for i in range(n):
        for k in range(n):
            if k != i:
                row = Xd[i].copy()
                row[cols] = Xd[k, cols]
                tot += _loss_np(kind, row @ theta, y[i])
    return tot / (n * (n - 1)) / e_orig


def _small(kind, n=25):
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.integers(0, 2, n) * 0.5, rng.choice([-0.3, 0.0, 0.2], n), rng.uniform(-0.4, 0.4, n)])
    y = rng.uniform(-1, 1, n).round(2) if kind == "squared" else (rng.uniform(size=n) < 0.5).astype(float)
    th = rng.normal(size=(4, 4))
    extra = dict(label_bound=2.0, domain=Box.cube(4, 5.0)) if kind == "squared" else {}
    return X, y, th, R.linear_model(kind, row_norm=1.0, l2=0.3, **extra)


@pytest.mark.parametrize("kind", R.KINDS)
def test_exact_swap_matches_the_double_loop(kind):
    X, y, th, model = _small(kind)
    out = R.model_reliance(th, X, y, model, features=[0, 1, 2, [0, 2]])
    assert out["reliance"].shape == (4, 4) and out["method"] == "exact pairwise swap"
    for d in range(th.shape[0]):
        for f, cols in enumerate([[0], [1], [2], [0, 2]]):
            assert out["reliance"][d, f] == pytest.approx(_mr_double_loop(kind, th[d], X, y, cols), rel=1e-11)
    # the penalty is not in the reliance loss: e_orig is the plain mean prediction loss
    e0 = np.mean([_loss_np(kind, np.r_[X[i], 1.0] @ th[0], y[i]) for i in range(len(y))])
    assert out["e_orig"][0] == pytest.approx(e0, rel=1e-12)
    diff = R.model_reliance(th, X, y, model, features=[1], kind="difference")["reliance"][:, 0]
    np.testing.assert_allclose(diff, (out["reliance"][:, 1] - 1) * out["e_orig"], rtol=1e-10, atol=1e-14)
    # the cloud is the reliance matrix; MCR are its column extremes
    cloud = R.variable_importance_cloud(th, X, y, model)
    mcr = R.model_class_reliance(th, X, y, model)
    np.testing.assert_array_equal(cloud, mcr["cloud"])
    np.testing.assert_array_equal(mcr["mcr_minus"], cloud.min(0))
    np.testing.assert_array_equal(mcr["mcr_plus"], cloud.max(0))


def test_permutation_estimate_within_its_monte_carlo_error():
    X, y, th, model = _small("logistic", n=60)
    exact = R.model_reliance(th, X, y, model)["reliance"]
    est = R.model_reliance(th, X, y, model, num_permutations=40, seed=1)
    assert np.all(est["se"] > 0)
    z = (est["reliance"] - exact) / est["se"]
    assert np.max(np.abs(z)) < 4.5, z  # 12 entries at 4.5 SE: false alarm ~1e-4
    assert "40 random permutations" in est["method"]


def _two_d_case():
    rng = np.random.default_rng(0)

    def draw(n):
        X = rng.normal(size=(n, 2)) * [0.6, 0.4]
        X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
        return X, (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ [2.0, -1.0]))).astype(float)

    (X, y), (Xe, ye) = draw(200), draw(80)
    return X, y, Xe, ye, R.linear_model("logistic", row_norm=1.0, l2=0.1, intercept=False)


def _boundary(model, X, y, centre, level, num=720):
    """Points of {L = level} on num rays from centre (bisection; L convex along rays)."""
    with jax.enable_x64(True):
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        phi = np.linspace(0, 2 * np.pi, num, endpoint=False)
        d = np.stack([np.cos(phi), np.sin(phi)], axis=1)
        Lr = jax.jit(jax.vmap(lambda r, dd: model.loss.mean(jnp.asarray(centre) + r * dd, Xj, yj)))
        lo, hi = np.zeros(num), np.full(num, 10.0)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            above = np.asarray(Lr(jnp.asarray(mid), jnp.asarray(d))) > level
            hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
    return centre + lo[:, None] * d


def test_mcr_of_sampler_draws_against_the_exact_set():
    X, y, Xe, ye, model = _two_d_case()
    psi, beta = 0.02, 1000.0
    mini = R.rashomon_minimum(model.loss, X, y)
    res = R.sample_rashomon(model, X, y, psi, mode="nonprivate", beta=beta, horizon=1.0, num_chains=32,
                            num_draws=100, seed=2)
    w = res.privacy["threshold_width"]
    m = res.measures(Xe, ye, public=True)
    got = m.reliance
    # exact MCR over G: MR is smooth, so its extremes over the closed 2-D set are on the boundary
    # or at interior critical points: a fine boundary (720 rays) plus an interior grid
    bd = _boundary(model, X, y, mini.theta, mini.value + psi)
    gx = np.linspace(bd[:, 0].min(), bd[:, 0].max(), 40)
    gy = np.linspace(bd[:, 1].min(), bd[:, 1].max(), 40)
    grid = np.stack(np.meshgrid(gx, gy), -1).reshape(-1, 2)
    with jax.enable_x64(True):
        Ls = np.asarray(jax.vmap(lambda t: model.loss.mean(t, jnp.asarray(X), jnp.asarray(y)))(jnp.asarray(grid)))
    inside = np.vstack([bd, grid[Ls <= mini.value + psi]])
    exact = R.model_reliance(inside, Xe, ye, model)["reliance"]
    ex_lo, ex_hi = exact.min(0), exact.max(0)
    # every draw lies in {L <= L* + psi + w/2 + 20/beta} but a fraction e^-20: MCR of the draws
    # lies within the exact MCR over that slightly larger set
    outer = R.model_reliance(_boundary(model, X, y, mini.theta, mini.value + psi + w / 2 + 20 / beta), Xe, ye,
                             model)["reliance"]
    big_lo, big_hi = np.minimum(ex_lo, outer.min(0)), np.maximum(ex_hi, outer.max(0))
    assert np.all(got["mcr_minus"] >= big_lo - 1e-12) and np.all(got["mcr_plus"] <= big_hi + 1e-12)
    # and reaches the set's extremes up to a small fraction of the reliance range
    span = ex_hi - ex_lo
    assert np.all(np.abs(got["mcr_plus"] - ex_hi) <= 0.1 * span), (got["mcr_plus"], ex_hi)
    assert np.all(np.abs(got["mcr_minus"] - ex_lo) <= 0.1 * span), (got["mcr_minus"], ex_lo)


# ------------------------------------------------------------------------------ capacity

def _mutual_info(q, a, b):
    H = lambda p: special.entr(p) + special.entr(1 - p)  # noqa: E731
    return H(q * b + (1 - q) * a) - q * H(b) - (1 - q) * H(a)


def _blahut_arimoto(P, iters=5000):
    """Capacity (nats) of the channel with rows P[m] = (1 - p_m, p_m): Blahut-Arimoto iterations,
    returned as the bracket [I(r), max_m D(W_m || r W)] that holds at every iteration."""
    W = np.stack([1 - P, P], axis=1)
    r = np.full(len(P), 1 / len(P))
    for _ in range(iters):
        D = np.sum(special.xlogy(W, W) - special.xlogy(W, (r @ W)[None, :]), axis=1)
        r = r * np.exp(D)
        r /= r.sum()
    D = np.sum(special.xlogy(W, W) - special.xlogy(W, (r @ W)[None, :]), axis=1)
    return float(r @ D), float(D.max())


def test_capacity_closed_form_against_direct_maximisation_and_blahut_arimoto():
    rng = np.random.default_rng(0)
    pairs = [(0.0, 1.0), (0.3, 0.3), (0.01, 0.02), (0.2, 0.9), (0.0, 0.5), (0.97, 1.0)]
    a, b = np.array(pairs).T
    C = R.binary_channel_capacity(a, b)
    assert C[0] == pytest.approx(math.log(2), abs=1e-12) and C[1] == 0.0
    for (lo, hi), c in zip(pairs, C):
        best = -optimize.minimize_scalar(lambda q: -_mutual_info(q, lo, hi), bounds=(0, 1), method="bounded",
                                         options={"xatol": 1e-12}).fun
        assert c == pytest.approx(best, abs=1e-9)
    # per row of a model set: the extremes carry the capacity (full channel, Blahut-Arimoto)
    draws = rng.normal(size=(40, 3))
    Xe = rng.uniform(-0.5, 0.5, (5, 2))
    model = R.linear_model("logistic", row_norm=1.0, intercept=True)
    cap = R.rashomon_capacity(draws, Xe, model=model)
    P = model.predictions(model.scores(draws, Xe))
    for i in range(5):
        lo, hi = _blahut_arimoto(P[i])
        assert hi - lo < 1e-4 and lo - 1e-12 <= math.log(cap["capacity"][i]) <= hi + 1e-12
    assert 1.0 <= cap["mean"] <= cap["max"] <= 2.0
    # hard labels (smoothed hinge): 2 where the draws disagree, 1 where they agree
    hinge = R.linear_model("smoothed_hinge", row_norm=1.0)
    lab = hinge.scores(draws, Xe) > 0
    hc = R.rashomon_capacity(draws, Xe, model=hinge)["capacity"]
    np.testing.assert_allclose(hc, np.where(lab.all(1) | (~lab).all(1), 1.0, 2.0), rtol=1e-12)


# ------------------------------------------------------------------------------ ratios

def test_clopper_pearson_matches_scipy():
    for k, n in ((0, 1000), (3, 50), (50, 50), (17, 200)):
        cp = R.clopper_pearson(k, n, 0.9)
        ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
        assert cp["ci"] == pytest.approx((ref.low, ref.high), abs=1e-12)
        one = stats.binomtest(k, n, alternative="less").proportion_ci(confidence_level=0.9, method="exact")
        assert cp["upper_bound"] == pytest.approx(one.high, abs=1e-12)


def _quad(dim):
    fn = lambda th, x, y: 0.5 * jnp.sum((th - x) ** 2)  # noqa: E731
    return PerExampleLoss("quad", fn, LossConstants(math.inf, 2.0, 1.0, 1.0), 1.0)


@pytest.mark.parametrize("dim,psi,num,hit", [(2, 0.02, 100_000, True), (10, 0.02, 20_000, False)])
def test_rashomon_ratio_interval_contains_the_exact_volume(dim, psi, num, hit):
    X = np.zeros((4, dim))
    box = Box.cube(dim, 1.0)
    # G = ball of radius sqrt(2 psi) around 0 (L* = 0): volume V_p r^p over (2)^p
    exact = math.pi ** (dim / 2) / math.gamma(dim / 2 + 1) * (2 * psi) ** (dim / 2) / 2 ** dim
    out = R.rashomon_ratio_estimate(_quad(dim), X, np.zeros(4), 0.0, psi, box, num_samples=num, seed=4,
                                    confidence=0.999)
    assert "NON-PRIVATE" in out["privacy"]
    assert out["ci"][0] <= exact <= out["ci"][1]
    assert exact <= out["upper_bound"]
    if not hit:  # 10-D: no uniform draw lands in G; the upper bound is the whole answer
        assert out["num_inside"] == 0 and out["ratio"] == 0.0
        assert out["upper_bound"] == pytest.approx(1 - 0.001 ** (1 / num), rel=1e-9)


def test_cover_count_against_an_exhaustive_2d_sweep():
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(9, 2))
    phi = np.linspace(0, 2 * np.pi, 100_000, endpoint=False)  # every homogeneous classifier in 2-D
    labels = (np.stack([np.cos(phi), np.sin(phi)], 1) @ pts.T) > 0
    gaps = np.diff(np.sort(np.mod(np.r_[np.arctan2(pts[:, 1], pts[:, 0]) + np.pi / 2,
                                        np.arctan2(pts[:, 1], pts[:, 0]) - np.pi / 2], 2 * np.pi)))
    assert gaps.min() > 10 * 2 * np.pi / len(phi)  # the sweep visits every cell
    assert np.unique(labels, axis=0).shape[0] == R.cover_count(9, 2) == 18
    assert R.cover_count(5, 7) == 2 ** 5 and R.cover_count(10, 1) == 2
    pr = R.pattern_rashomon_ratio(np.stack([np.cos(phi), np.sin(phi)], 1), pts)
    assert pr["num_patterns"] == 18 and pr["ratio"] == 1.0
    # a set of models: the distinct patterns, counted by brute force
    few = rng.normal(size=(30, 2))
    pr = R.pattern_rashomon_ratio(few, pts)
    assert pr["num_patterns"] == len({tuple(r) for r in (few @ pts.T > 0)})


def test_ambiguity_discrepancy_and_ranges_against_loops():
    rng = np.random.default_rng(5)
    draws = rng.normal(size=(30, 3)) * 0.5 + [1.0, -0.5, 0.2]
    Xe = rng.uniform(-0.6, 0.6, (40, 2))
    model = R.linear_model("logistic", row_norm=1.0, intercept=True)
    ref = np.array([1.0, -0.5, 0.2])
    Xd = np.column_stack([Xe, np.ones(40)])
    ref_lab = [Xd[i] @ ref > 0 for i in range(40)]
    flips = [any((Xd[i] @ d > 0) != ref_lab[i] for d in draws) for i in range(40)]
    disc = max(np.mean([(Xd[i] @ d > 0) != ref_lab[i] for i in range(40)]) for d in draws)
    a = R.ambiguity(draws, Xe, ref, model=model)
    assert a["flipped"].tolist() == flips and a["flip_rate"] == pytest.approx(np.mean(flips))
    assert R.discrepancy(draws, Xe, ref, model=model) == pytest.approx(disc)
    pr = R.prediction_ranges(draws, Xe, model=model)
    p = [[1 / (1 + math.exp(-(Xd[i] @ d))) for d in draws] for i in range(40)]
    np.testing.assert_allclose(pr["low"], np.min(p, 1), rtol=1e-12)
    np.testing.assert_allclose(pr["high"], np.max(p, 1), rtol=1e-12)
    m = R.evaluate(draws, model, Xe, rng.integers(0, 2, 40).astype(float), reference=ref)
    assert m.reference == "user-supplied reference coefficients" and m.ambiguity["flip_rate"] == a["flip_rate"]
    m0 = R.evaluate(draws, model, Xe)
    assert m0.reference.startswith("mean of the released draws") and m0.reliance is None


# ------------------------------------------------------------------------------ model classes

def test_model_classes_and_their_constants():
    lg = R.linear_model("logistic", row_norm=2.0, l2=0.1)
    assert lg.loss.row_norm == pytest.approx(math.sqrt(5)) and lg.loss.constants.smoothness == pytest.approx(5 / 4 + 0.1)
    assert lg.design(np.array([[1.0, 1.0]])).tolist() == [[1.0, 1.0, 1.0]]
    assert lg.feature_names(["a", "b"], 3) == ["a", "b", "intercept"]
    hg = R.linear_model("smoothed_hinge", row_norm=1.0, intercept=False, hinge_smoothing=0.5)
    c = hg.loss.constants
    assert (c.lipschitz, c.grad_diff, c.smoothness) == (1.0, 2.0, 2.0)
    # brute force: |phi'| <= 1 and phi'' <= 1/gamma along a fine grid of margins
    z = np.linspace(-3, 3, 60001)
    phi = np.array([_loss_np("hinge", s, 1.0, 0.5) for s in z])
    d1 = np.diff(phi) / np.diff(z)
    assert np.max(np.abs(d1)) <= 1 + 1e-9 and np.max(np.diff(d1) / np.diff(z)[1:]) <= 2 + 1e-6
    with jax.enable_x64(True):  # the sampler's loss equals the model's prediction loss (+ penalty)
        t, x = jnp.array([0.3, -1.2]), jnp.array([0.5, 0.4])
        for yy in (0.0, 1.0):
            got = float(hg.loss.example(t, x, jnp.float64(yy)))
            assert got == pytest.approx(float(hg.prediction_loss(np.array([float(t @ x)]), [yy])[0]), abs=1e-12)
    with pytest.raises(ValueError, match="kind must be one of"):
        R.linear_model("logstic")
    with pytest.raises(ValueError, match="label_bound is required"):
        R.linear_model("squared", domain=Box.cube(3, 1.0))
    with pytest.raises(ValueError, match="bounded Domain"):
        R.linear_model("squared", label_bound=1.0)


def test_bad_inputs_are_one_line_errors_before_any_work():
    rng = np.random.default_rng(0)
    model = R.linear_model("logistic", row_norm=1.0, l2=0.1)
    X = rng.uniform(-0.5, 0.5, (30, 2))
    y = rng.integers(0, 2, 30).astype(float)
    draws = rng.normal(size=(10, 3))
    cases = [
        (lambda: R.evaluate(draws, model, X[:, :1]), "X_eval must have 2 columns"),
        (lambda: R.evaluate(draws, model, X, y[:-1]), "y_eval must have one label per row (30)"),
        (lambda: R.evaluate(draws, model, X, np.r_[y[:-1], 2.0]), "only 0/1 labels"),
        (lambda: R.evaluate(draws, model, X * 3), "exceed the declared row_norm=1"),
        (lambda: R.evaluate(draws, model, X, reference=np.zeros(2)), "reference must be 3 finite"),
        (lambda: R.model_reliance(draws, X, y, model, features=[5]), "features must be column indices"),
        (lambda: R.model_reliance(draws, X, y, model, num_permutations=1), "num_permutations must be >= 2"),
        (lambda: R.model_reliance(draws, X, y, None), "needs the model class"),
        (lambda: R.prediction_ranges(draws, X, link="probit"), "link must be"),
        (lambda: R.prediction_ranges(draws, X, link="identity", model=model), "pass link only without model"),
        (lambda: R.sample_rashomon(model, X, np.r_[y[:-1], 2.0], 0.01, mode="nonprivate", beta=1.0),
         "only 0/1 labels"),
        (lambda: R.sample_rashomon(model, X, y, 0.01, mode="nonprivate", beta=1e9), "more than max_steps"),
        (lambda: R.sample_rashomon(model, X, y, 0.01, mode="nonprivate", beta=1.0, threshold_width=-1.0),
         "threshold_width must lie in (0, inf)"),
        (lambda: R.sample_rashomon(model, X, y, 0.01, mode="nonprivate", beta=1.0, smoothing=0.1,
                                   threshold_width=0.01), "exclude each other"),
        (lambda: R.sample_rashomon(model, X, y, 0.01, mode="nonprivate", beta=1.0, ledger="x.sqlite"),
         "ledger applies to private modes only"),
        (lambda: R.sample_rashomon("logistic", X, y, 0.01, mode="nonprivate", beta=1.0), "model must be"),
        (lambda: R.sample_rashomon(model, X, y, 0.01, mode="nonprivate", beta=1.0, feature_names=["a"]),
         "feature_names must have 2 entries"),
    ]
    for fn, needle in cases:
        with pytest.raises(ValueError) as e:
            fn()
        msg = str(e.value)
        assert needle in msg and "\n" not in msg, (needle, msg)


def test_set_fidelity_counts_members_and_flags_private_rows():
    X = np.zeros((4, 2))
    loss = _quad(2)  # L(theta) = ||theta||^2 / 2 on these rows, L* = 0
    draws = np.array([[0.1, 0.0], [0.0, 0.3], [0.25, 0.0], [1.0, 1.0]])  # L = 0.005, 0.045, 0.03125, 1
    f = R.set_fidelity(draws, loss, X, np.zeros(4), 0.0, 0.04)
    assert f["fidelity"] == pytest.approx(0.5) and "NON-PRIVATE" in f["privacy"]
    g = R.set_fidelity(draws, loss, X, np.zeros(4), 0.0, 0.05, data_is_private=False)
    assert g["fidelity"] == pytest.approx(0.75) and "public" in g["privacy"]
