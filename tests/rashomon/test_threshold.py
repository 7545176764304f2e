"""The smoothed threshold and the sampler at the threshold, against exact oracles.

* the ramp is an average of hard thresholds (quadrature), never above the hard threshold and
  at most w/2 below it, equal to it on the set;
* its gradient sensitivity (brute force on a grid of neighbouring 1-D quadratics) and its
  curvature (Hessians of a 2-D logistic loss on the ramp) stay below the declared bounds;
* sampler draws against exact laws: a 2-D isotropic quadratic, where uniform on the disc means
  L - L* ~ U(0, psi) and the smoothed target's law of L - L* is a 1-D closed form, and a 2-D
  logistic loss against a 641 x 641 grid of the smoothed target (and of the exact target:
  identical on the set, in-set share within the declared bound);
* power: the unsmoothed threshold run at the step planned from beta * M alone (the old plan)
  crowds the centre of the set and fails the same check.

Monte-Carlo error: chains are independent, so the standard error (SE) of a mean is the spread
of per-chain means / sqrt(chains); each check allows 4 SE (two-sided false alarm ~6e-5 for a
fixed key).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, optimize, stats

from dp_infer import rashomon as R
from dp_infer.kernels.langevin import sample_chain
from dp_infer.losses import LossConstants, PerExampleLoss
from dp_infer.rashomon import threshold as T


def np_ramp(u, w):
    """Independent float64 implementation of h_w (the oracle)."""
    u = np.asarray(u, dtype=np.float64)
    return np.where(u <= 0, 0.0, np.where(u <= w, u * u / (2 * w), u - w / 2))


def quad_loss(dim_lip=math.inf):
    fn = lambda th, x, y: 0.5 * jnp.sum((th - x) ** 2)  # noqa: E731
    return PerExampleLoss("quad", fn, LossConstants(lipschitz=dim_lip, grad_diff=2.0, smoothness=1.0,
                                                    strong_convexity=1.0), 1.0)


# ------------------------------------------------------------------------------ the ramp

@pytest.mark.parametrize("w", [0.01, 0.3])
def test_ramp_is_the_average_of_hard_thresholds(w):
    with jax.enable_x64(True):
        for u in np.linspace(-0.5, 1.0, 31):
            mix = integrate.quad(lambda t: max(u, t), 0.0, w, points=[min(max(u, 0), w)])[0] / w - w / 2
            got = float(T.ramp(jnp.float64(u), w))
            assert got == pytest.approx(mix, abs=1e-12)
            gap = max(u, 0.0) - got
            assert -1e-15 <= gap <= w / 2 + 1e-15
            if u <= 0:
                assert gap == 0.0  # nothing changes on the set
    assert float(T.ramp(jnp.float32(0.7), 0.0)) == pytest.approx(0.7)  # w = 0: the hard threshold


@pytest.mark.parametrize("psi,wfrac", [(1e-3, 0.05), (1e-2, 0.05), (0.1, 0.05), (0.1, 1.0)])
def test_smoothed_sensitivity_brute_force(psi, wfrac):
    n, w = 100, wfrac * psi
    x = np.full(n, 1.0 / (n - 1))
    x[0] = -1.0  # mean 0
    xp = x.copy()
    xp[0] = 1.0  # mean 2/n: the worst replace-one pair for rows in [-1, 1]
    loss = quad_loss()
    with jax.enable_x64(True):
        grads = []
        for D in (x, xp):
            Xj = jnp.asarray(D[:, None])
            Lstar = 0.5 * float(np.mean((D - D.mean()) ** 2))
            f = lambda t, Xj=Xj, Ls=Lstar: T.smoothed_threshold(  # noqa: E731
                loss.mean(t[None], Xj, jnp.zeros(n)), Ls + psi, w)
            grid = jnp.linspace(-2.0, 2.0, 200001)  # spacing 2e-5; the gradient has slope <= 1 + 2 psi/w
            grads.append(np.asarray(jax.jit(jax.vmap(jax.grad(f)))(grid)))
        diff = float(np.max(np.abs(grads[0] - grads[1])))
    bound = T.smoothed_sensitivity(loss.constants, n, psi, w, tol=0.0)
    avg = integrate.quad(lambda t: math.sqrt(2 * (psi + t)), 0, w)[0] / w  # E sqrt(2 M (psi + tau))
    assert bound == pytest.approx(2 / n + avg, rel=1e-12)
    assert diff <= bound * (1 + 1e-9)
    if wfrac <= R.WIDTH_FRACTION:
        # at the default width the hard threshold's worst case, 2/n + sqrt(2 psi), is nearly
        # attained: the bound is not loose (a wide ramp softens the jump and the bound is loose)
        assert diff >= 0.97 * (2 / n + math.sqrt(2 * psi))


def test_curvature_bound_on_the_ramp_of_a_logistic_loss():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2)) * [0.6, 0.4]
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = (rng.uniform(size=200) < 1 / (1 + np.exp(-X @ [2.0, -1.0]))).astype(float)
    model = R.linear_model("logistic", row_norm=1.0, l2=0.01, intercept=False)
    loss, psi = model.loss, 0.02
    w = T.default_width(psi)
    mini = R.rashomon_minimum(loss, X, y)
    with jax.enable_x64(True):
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        L = lambda t: loss.mean(t, Xj, yj)  # noqa: E731
        t0 = mini.value + psi
        # points inside the ramp in every direction: bisection on the radius (L is convex along rays)
        phi = np.repeat(np.linspace(0, 2 * np.pi, 48, endpoint=False), 3)
        d = np.stack([np.cos(phi), np.sin(phi)], axis=1)
        level = t0 + np.tile([0.02, 0.5, 0.98], 48) * w
        Lr = jax.jit(jax.vmap(lambda r, dd: L(jnp.asarray(mini.theta) + r * dd)))
        lo, hi = np.zeros(len(phi)), np.full(len(phi), 10.0)
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            above = np.asarray(Lr(jnp.asarray(mid), jnp.asarray(d))) > level
            hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
        pts = mini.theta + 0.5 * (lo + hi)[:, None] * d
        assert np.all(np.abs(np.asarray(Lr(jnp.asarray(0.5 * (lo + hi)), jnp.asarray(d))) - level) < 1e-12)
        H = jax.jit(jax.vmap(jax.hessian(lambda t: T.smoothed_threshold(L(t), t0, w))))(jnp.asarray(pts))
        top = float(np.max(np.linalg.eigvalsh(np.asarray(H))))
    bound = T.smoothed_curvature(loss.constants, psi, w, tol=1e-9)
    M = loss.constants.smoothness
    assert top <= bound
    assert top > 5 * M  # the jump dominates: a step planned from beta * M alone would be ~10x too long
    assert bound == pytest.approx(M + 2 * M * (psi + 1e-9 + w) / w)


# ------------------------------------------------------------------------------ 2-D quadratic

PSI, BETA, CHAINS = 0.1, 400.0, 200


@pytest.fixture(scope="module")
def disc():
    rng = np.random.default_rng(1)
    X = rng.uniform(-0.3, 0.3, (20, 2))
    res = R.sample_rashomon(quad_loss(), X, np.zeros(20), PSI, mode="nonprivate", beta=BETA, horizon=0.5,
                            num_chains=CHAINS, num_draws=100, seed=3)
    th = res.draws[:, res.burn_in:]
    mu = X.mean(0)
    return dict(res=res, th=th, mu=mu, s=0.5 * np.sum((th - mu) ** 2, axis=-1))  # s = L - L*


def _share_above(s, inG, level):
    return np.array([(si[gi] > level).mean() for si, gi in zip(s, inG)])


def _mean_se(v):
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v)))


def test_disc_in_set_law_is_uniform(disc):
    s, w = disc["s"], disc["res"].privacy["threshold_width"]
    assert w == pytest.approx(PSI * R.WIDTH_FRACTION)
    inG = s <= PSI
    # share of the smoothed target in G: in 2-D isotropic, dV/ds is constant, so the law of
    # s = L - L* has density prop. to 1 on [0, psi] and exp(-beta h_w(s - psi)) beyond
    z_out = integrate.quad(lambda u: math.exp(-BETA * float(np_ramp(u, w))), 0, np.inf)[0]
    pg_w = PSI / (PSI + z_out)
    lo, hi = T.in_set_share_bounds(PSI / (PSI + 1 / BETA), BETA, w)  # exact target: z_out = 1/beta
    assert lo <= pg_w <= hi
    m, se = _mean_se(inG.mean(axis=1))
    assert abs(m - pg_w) <= 4 * se, (m, pg_w, se)
    # uniform on the disc: s ~ U(0, psi) given s <= psi. Share above 0.9 psi is 0.1:
    m, se = _mean_se(_share_above(s, inG, 0.9 * PSI))
    assert abs(m - 0.1) <= 4 * se and se < 0.006, (m, se)
    for q in (0.25, 0.5, 0.75):
        m, se = _mean_se(_share_above(s, inG, q * PSI))
        assert abs(m - (1 - q)) <= 4 * se, (q, m, se)
    last = s[:, -1][s[:, -1] <= PSI] / PSI  # one draw per independent chain: i.i.d.
    assert len(last) > 170 and stats.kstest(last, "uniform").pvalue > 1e-3


def test_disc_coefficient_quantiles(disc):
    th, mu, w = disc["th"], disc["mu"], disc["res"].privacy["threshold_width"]
    # exact marginal of x = theta_0 - mu_0 = sqrt(2 s) cos(phi), phi uniform, s with the law above
    z_out = integrate.quad(lambda u: math.exp(-BETA * float(np_ramp(u, w))), 0, np.inf)[0]
    Z = PSI + z_out

    def cdf(x):
        g = lambda s: 1 - math.acos(min(1.0, max(-1.0, x / math.sqrt(2 * s)))) / math.pi if s > 0 else float(x >= 0)  # noqa: E731
        inside = integrate.quad(g, 0, PSI, limit=200)[0]
        outside = integrate.quad(lambda u: g(PSI + u) * math.exp(-BETA * float(np_ramp(u, w))), 0, 40 / BETA + w,
                                 limit=200)[0]
        return (inside + outside) / Z

    for q in (0.025, 0.5, 0.975):
        xq = optimize.brentq(lambda x: cdf(x) - q, -1.0, 1.0, xtol=1e-10)
        m, se = _mean_se(np.mean(th[..., 0] - mu[0] <= xq, axis=1))
        assert abs(m - q) <= 4 * se, (q, m, se)


def test_old_plan_crowds_the_centre():
    """Power: the hard threshold at the step 0.5 / (beta M) fails the in-set check badly."""
    rng = np.random.default_rng(1)
    X = jnp.asarray(rng.uniform(-0.3, 0.3, (20, 2)), dtype=jnp.float32)
    mu = np.asarray(X).mean(0)
    c = 0.5 * float(np.mean(np.sum((np.asarray(X) - mu) ** 2, axis=1)))
    U = lambda t: BETA * jnp.maximum(jnp.mean(0.5 * jnp.sum((t - X) ** 2, axis=1)), c + PSI)  # noqa: E731
    h = 0.5 / BETA
    K = int(0.5 / h)
    keys = jax.random.split(jax.random.PRNGKey(0), CHAINS)
    z = np.asarray(jax.jit(jax.vmap(lambda k: sample_chain(k, U, jnp.zeros(2), h, K).z))(keys))[:, K // 2:]
    s = 0.5 * np.sum((z - mu) ** 2, axis=-1)
    m, se = _mean_se(_share_above(s, s <= PSI, 0.9 * PSI))
    assert m + 8 * se < 0.1, (m, se)  # about 0.02 instead of 0.1


# ------------------------------------------------------------------------------ 2-D logistic

def test_logistic_2d_against_the_exact_grid():
    rng = np.random.default_rng(0)
    n, psi, beta, chains = 200, 0.02, 1000.0, 48
    X = rng.normal(size=(n, 2)) * [0.6, 0.4]
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ [2.0, -1.0]))).astype(float)
    model = R.linear_model("logistic", row_norm=1.0, l2=0.1, intercept=False)
    mini = R.rashomon_minimum(model.loss, X, y)
    res = R.sample_rashomon(model, X, y, psi, mode="nonprivate", beta=beta, horizon=1.0, num_chains=chains,
                            num_draws=200, seed=5)
    w = res.privacy["threshold_width"]

    def excess(P):  # L - (L* + psi), float64
        with jax.enable_x64(True):
            Xj, yj = jnp.asarray(X), jnp.asarray(y)
            return np.asarray(jax.jit(jax.vmap(lambda t: model.loss.mean(t, Xj, yj)))(jnp.asarray(P))) - mini.value - psi

    g = [np.linspace(c - 1.6, c + 1.6, 641) for c in mini.theta]
    G0, G1 = np.meshgrid(*g, indexing="ij")
    u = excess(np.stack([G0.ravel(), G1.ravel()], 1))
    assert min(u.reshape(G0.shape)[[0, -1]].min(), u.reshape(G0.shape)[:, [0, -1]].min()) > 30 / beta  # box holds the law
    inG = u <= 0
    wt = np.exp(-beta * np_ramp(u, w))
    wt /= wt.sum()
    wex = np.exp(-beta * np.maximum(u, 0.0))
    wex /= wex.sum()
    # smoothed vs exact target: identical on the set, in-set share within the declared bound
    share_w = float(wt[inG & (u > -0.1 * psi)].sum() / wt[inG].sum())
    share_ex = float(wex[inG & (u > -0.1 * psi)].sum() / wex[inG].sum())
    assert share_w == pytest.approx(share_ex, rel=1e-9)
    lo, hi = T.in_set_share_bounds(float(wex[inG].sum()), beta, w)
    assert lo <= wt[inG].sum() <= hi
    # sampler vs the smoothed target it runs on
    z = res.draws[:, res.burn_in:]
    uz = excess(z.reshape(-1, 2)).reshape(z.shape[:2])
    m, se = _mean_se((uz <= 0).mean(axis=1))
    assert abs(m - wt[inG].sum()) <= 4 * se, (m, wt[inG].sum(), se)
    m, se = _mean_se(_share_above(uz, uz <= 0, -0.1 * psi))
    assert abs(m - share_w) <= 4 * se and se < 0.01, (m, share_w, se)
    col = wt.reshape(G0.shape).sum(axis=1)  # weight of each grid column theta_0 = g[0][i]
    cum = np.cumsum(col)
    for q in (0.025, 0.5, 0.975):
        i = int(np.searchsorted(cum, q))
        # a grid point stands for its cell: F(g_i) = weight below the column + half the column,
        # known to within half the column
        F, tol = cum[i] - 0.5 * col[i], 0.5 * col[i]
        m, se = _mean_se(np.mean(z[..., 0] <= g[0][i], axis=1))
        assert abs(m - F) <= 4 * se + tol, (q, m, F, se)


# ------------------------------------------------------------------------------ the plan

@pytest.mark.parametrize("mode,kw", [("nonprivate", dict(beta=3000.0)), ("path", dict(eps=1.0, delta=1e-5))])
def test_plan_step_never_exceeds_the_stable_step_of_the_ramp(mode, kw):
    loss = R.linear_model("logistic", row_norm=2.0, l2=0.05).loss
    for psi, horizon, draws in ((0.02, 0.37, 1000), (0.1, 1.0, 7), (0.0, 0.5, 100)):
        rp = R.plan_rashomon(loss, 500, 4, psi, mode=mode, horizon=horizon, num_draws=draws, **kw)
        c = loss.constants
        w = psi * R.WIDTH_FRACTION
        g2 = 2 * c.smoothness * (psi + R.DEFAULT_TOL + R.FLOAT32_SLACK + w)
        curv = c.smoothness + (g2 / w if w > 0 else 0.0)  # M + g^2 / w, the jump over the ramp
        assert rp.curvature == pytest.approx(curv, rel=1e-12)
        assert rp.step_size * rp.beta * curv <= 0.5 * (1 + 1e-12)  # rounded up, never down
        assert rp.num_steps * rp.step_size == pytest.approx(horizon, rel=1e-12)
        assert rp.num_steps % rp.thinning == 0


def test_shift_threshold_drops_tol_from_the_sensitivity():
    loss = R.linear_model("logistic", row_norm=1.0, l2=0.05).loss
    a = R.plan_rashomon(loss, 300, 3, 0.02, eps=1.0, delta=1e-5, tol=1e-3)
    b = R.plan_rashomon(loss, 300, 3, 0.02, eps=1.0, delta=1e-5, tol=1e-3, shift_threshold=True)
    w = 0.02 * R.WIDTH_FRACTION
    assert a.sensitivity == pytest.approx(T.smoothed_sensitivity(loss.constants, 300, 0.02, w, 1e-3 + R.FLOAT32_SLACK))
    assert b.sensitivity == pytest.approx(T.smoothed_sensitivity(loss.constants, 300, 0.02, w, R.FLOAT32_SLACK))
    assert b.sensitivity < a.sensitivity and b.beta > a.beta
    # through the sampler: the shifted base lies below L*_glob, and the run reports the smaller bound
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, (300, 2))
    y = (rng.uniform(size=300) < 0.5).astype(float)
    model = R.linear_model("logistic", row_norm=1.0, l2=0.05)
    res = R.sample_rashomon(model, X, y, 0.02, eps=1.0, delta=1e-5, tol=1e-3, shift_threshold=True,
                            horizon=0.1, num_draws=10, seed=0)
    assert res.privacy["thresholded_sensitivity"] == pytest.approx(b.sensitivity)
    mini = R.rashomon_minimum(model, X, y)
    assert R.threshold_base(mini, 0.05, 1e-3, shift=True) <= mini.value - 1e-3
