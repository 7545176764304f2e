"""Oracle tests for losses.py: every declared constant bounds the true
quantity and is attained (or approached) where its docstring says, values against closed forms,
data checks at their edges, ``with_l2`` against a fresh construction.

The constants with an L2 term use ``r = ||init|| + diameter`` as sup ||theta||. On ``_CornerBox``
(a box with the origin as a corner, initialised at the origin) that bound IS sup ||theta|| (the far
corner), so each constant can be checked tight there; on other domains it is only an upper bound.
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.support.strict_tolerance import approx

from dp_infer import domains, losses


class _CornerBox(domains.Box):
    def default_init(self):
        return jnp.asarray(self.lower)


def _box(*upper):
    return _CornerBox(np.zeros(len(upper)), np.asarray(upper, dtype=float))


def _g(loss, th, x, y):
    return np.asarray(jax.grad(loss.example)(jnp.asarray(th, dtype=float), jnp.asarray(x, dtype=float),
                                             jnp.asarray(y, dtype=float)))


def _e(loss, th, x, y):
    return float(loss.example(jnp.asarray(th, dtype=float), jnp.asarray(x, dtype=float),
                              jnp.asarray(y, dtype=float)))


def _top_eig(loss, th, x, y):
    H = jax.hessian(loss.example)(jnp.asarray(th, dtype=float), jnp.asarray(x, dtype=float),
                                  jnp.asarray(y, dtype=float))
    return np.linalg.eigvalsh(np.asarray(H))


# ---------------------------------------------------------------------------------- closed forms
def test_link_values_against_closed_forms():
    with jax.enable_x64(True):
        th = np.array([2.0, -1.0])
        x = np.array([0.75, -0.5])  # <theta, x> = 2.0
        lg = losses.logistic(row_norm=1.0)
        assert _e(lg, th, x, 0.0) == approx(math.log1p(math.exp(2.0)), rel=1e-14)
        assert _e(lg, th, x, 1.0) == approx(math.log1p(math.exp(-2.0)), rel=1e-14)
        sq = losses.squared(label_bound=3.0, domain=domains.L2Ball(2, 5.0))
        assert _e(sq, th, x, -0.5) == approx(0.5 * 2.5 ** 2, rel=1e-15)
        hb = losses.huber(threshold=0.7)
        for y, want in [(1.5, 0.125), (1.3, 0.245), (2.7, 0.245), (0.0, 0.7 * (2.0 - 0.35)),
                        (4.0, 0.7 * (2.0 - 0.35))]:
            assert _e(hb, th, x, y) == approx(want, rel=1e-14)
        sh = losses.smoothed_hinge(smoothing=0.25)  # 0 above 1, 2 (1 - z)^2 down to 0.75, 0.875 - z below
        for s, y, want in [(1.2, 1.0, 0.0), (0.75, 1.0, 0.125), (0.8, 1.0, 0.08), (0.1, 1.0, 0.775),
                           (-0.8, 0.0, 0.08), (0.1, 0.0, 0.975), (-1.5, 0.0, 0.0), (-2.0, 1.0, 2.875)]:
            t = np.array([s / 0.75, 0.0])  # <t, x> = s, margin (2y - 1) s
            assert _e(sh, t, x, y) == approx(want, rel=1e-14, abs=1e-16), (s, y)
        mn = losses.multinomial_logistic(3)
        W = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]])  # d = 2, K = 3, theta = W.ravel()
        assert mn.num_params(2) == 6
        logits = x @ W
        for y in range(3):
            want = math.log(sum(math.exp(v) for v in logits)) - logits[y]
            assert _e(mn, W.ravel(), x, float(y)) == approx(want, rel=1e-14)


@pytest.mark.parametrize("make", [
    lambda: losses.logistic(row_norm=2.0, l2=0.3),
    lambda: losses.huber(threshold=0.5, row_norm=2.0, l2=0.3),
    lambda: losses.multinomial_logistic(3, row_norm=2.0, l2=0.3),
    lambda: losses.clipped_loss(lambda t, x, y: jnp.sum((t - x) ** 2) + y, 0.5),
])
def test_per_example_mean_and_sums_are_the_documented_sums(make):
    loss = make()
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        X = rng.normal(size=(7, 2)) * 0.5
        y = rng.integers(0, 2, size=7).astype(float)
        th = rng.normal(size=loss.num_params(2))
        base = np.array([float(loss.fn(th, X[i], y[i])) for i in range(7)])
        per = base + 0.5 * loss.l2 * np.sum(th ** 2)
        assert np.asarray(loss.per_example(th, X, y)) == approx(per, rel=1e-12)
        assert float(loss.mean(th, X, y)) == approx(per.mean(), rel=1e-12)
        assert float(loss.mean(th, X, y, block_rows=3)) == approx(per.mean(), rel=1e-12)
        w = np.array([1, 0, 1, 1, 0, 0, 1.0])
        assert float(loss.sum(th, X, y, w, block_rows=2)) == approx(float(per @ w), rel=1e-12)
        if loss.clip_norm is not None:  # the blocked gradient is the sum of clipped per-example gradients
            g = np.stack([_g(loss, th, X[i], y[i]) for i in range(7)])
            g *= np.minimum(1.0, loss.clip_norm / np.linalg.norm(g, axis=1, keepdims=True))
            np.testing.assert_allclose(jax.grad(lambda t: loss.sum(t, X, y, w, block_rows=2))(th), w @ g,
                                       rtol=1e-12)
            np.testing.assert_allclose(jax.grad(lambda t: loss.mean(t, X, y, block_rows=3))(th), g.mean(0),
                                       rtol=1e-12)
    if loss.index_fn is None:
        with pytest.raises(ValueError, match="generalised linear"):
            loss.index_losses(jnp.zeros(7), jnp.zeros(7), jnp.zeros(2))


def test_glm_losses_carry_their_link_as_index_fn():
    """A generalised linear loss's index_fn is phi itself: index_losses(X theta) = per-example losses."""
    rng = np.random.default_rng(1)
    dom = domains.L2Ball(2, 3.0)
    with jax.enable_x64(True):
        X = rng.normal(size=(5, 2)) * 0.4
        y = rng.integers(0, 2, size=5).astype(float)
        th = rng.normal(size=2)
        for loss in (losses.logistic(l2=0.2), losses.huber(0.3), losses.smoothed_hinge(0.4),
                     losses.squared(1.0, dom, l2=0.2)):
            per = [_e(loss, th, X[i], y[i]) for i in range(5)]
            assert np.asarray(loss.index_losses(X @ th, y, th)) == approx(per, rel=1e-13), loss.name
            assert np.asarray(loss.index_fn(X @ th, y)) == approx(
                [float(loss.fn(th, X[i], y[i])) for i in range(5)], rel=1e-13)


def test_documented_defaults():
    """Signature defaults: row_norm 1, l2 0, huber threshold 1, smoothed-hinge gamma 1."""
    box = _box(3.0, 4.0)
    got = {
        "logistic": losses.logistic(domain=box),
        "multinomial": losses.multinomial_logistic(2, domain=box),
        "squared": losses.squared(2.0, box),
        "huber": losses.huber(domain=box),
        "smoothed_hinge": losses.smoothed_hinge(domain=box),
    }
    want = {
        "logistic": losses.logistic(1.0, 0.0, box),
        "multinomial": losses.multinomial_logistic(2, 1.0, 0.0, box),
        "squared": losses.squared(2.0, box, 1.0, 0.0),
        "huber": losses.huber(1.0, 1.0, 0.0, box),
        "smoothed_hinge": losses.smoothed_hinge(1.0, 1.0, 0.0, box),
    }
    for k in got:
        assert got[k].l2 == 0.0 and got[k].row_norm == 1.0 and got[k].constants == want[k].constants, k
    assert (got["huber"].constants.lipschitz, got["smoothed_hinge"].constants.smoothness) == (1.0, 1.0)
    assert losses.logistic().domain is None and losses.logistic().clip_norm is None


# ----------------------------------------------------------------------- constants bound and tight
def test_logistic_constants_attained():
    R, l2 = 2.0, 0.25
    dom = _box(12.0, 16.0)  # sup ||theta|| = 20: r R = 40, sigmoid(40) = 1 in float64
    with jax.enable_x64(True):
        loss = losses.logistic(row_norm=R, l2=l2, domain=dom)
        c = loss.constants
        th = np.array([12.0, 16.0])
        x = R * th / 20.0
        assert np.linalg.norm(_g(loss, th, x, 0.0)) == approx(c.lipschitz, rel=1e-14)
        assert c.lipschitz == approx(R + l2 * 20.0, rel=1e-15)
        assert c.grad_diff == 2 * R and c.link_derivative_bound == 1.0
        assert _top_eig(loss, np.zeros(2), x, 0.0).max() == approx(c.smoothness, rel=1e-14)  # z = 0
        assert _top_eig(loss, th, x, 1.0).min() == approx(c.strong_convexity, rel=1e-12)
        assert c.strong_convexity == l2
        v = [_e(loss, t, xx, yy) for t in (np.zeros(2), th) for xx in (x, -x) for yy in (0.0, 1.0)]
        assert max(v) - min(v) <= c.value_range
        bare = losses.logistic(row_norm=R, domain=dom)
        vb = [_e(bare, th, xx, 0.0) for xx in (x, -x)]
        assert max(vb) - min(vb) == approx(bare.constants.value_range, rel=1e-14)  # = r R
        assert bare.constants.lipschitz == R and bare.constants.smoothness == R * R / 4
    assert not c.clipped and not c.smoothness_is_declared


def test_multinomial_constants_attained():
    K, R = 3, 1.5
    loss = losses.multinomial_logistic(K, row_norm=R)
    c = loss.constants
    with jax.enable_x64(True):
        x = np.array([R, 0.0])
        W = np.zeros((2, K))
        W[:, 1] = [40.0, 0.0]
        assert np.linalg.norm(_g(loss, W.ravel(), x, 0.0)) == approx(c.lipschitz, rel=1e-14)
        # G: nearly parallel rows, one pushed to class 1 and one to class 0 (labels 0 and 1)
        phi = 0.01
        x1, x2 = np.array([1.0, 0.0]) * R, np.array([math.cos(phi), math.sin(phi)]) * R
        w = np.array([30.0, -6000.0])
        W = np.stack([-w / 2, w / 2, [-1e4, 0.0]], axis=1)
        diff = np.linalg.norm(_g(loss, W.ravel(), x1, 0.0) - _g(loss, W.ravel(), x2, 1.0))
        assert diff <= c.grad_diff
        assert diff == approx(c.grad_diff * math.cos(phi / 2), rel=1e-9)
        two = losses.multinomial_logistic(2, row_norm=R)
        assert _top_eig(two, np.zeros(4), x, 0.0).max() == approx(two.constants.smoothness, rel=1e-14)
    assert c.smoothness == R * R / 2 and c.lipschitz == math.sqrt(2) * R


@pytest.mark.parametrize("K", [2, 3, 400])
def test_multinomial_value_range_bounds_and_is_approached(K):
    """ell = lse(l) - l_y with l = x W: its range over ||W|| <= r, ||x|| <= R is about
    2 r R sqrt(1 - 1/K) for small r R (theta along +-(mean - e_y)), never above 2 r R."""
    R, r = 2.0, 5e-4
    loss = losses.multinomial_logistic(K, row_norm=R, domain=_box(*([r / math.sqrt(2)] * 2)))
    assert loss.constants.value_range == approx(2 * r * R, rel=1e-15)
    with jax.enable_x64(True):
        v = np.full(K, 1.0 / K)
        v[0] -= 1.0
        v *= r / np.linalg.norm(v)
        x = np.array([R, 0.0])
        W = np.zeros((2, K))
        W[0] = v
        hi = _e(loss, W.ravel(), x, 0.0)
        lo = _e(loss, -W.ravel(), x, 0.0)
    assert hi - lo <= loss.constants.value_range
    assert hi - lo >= 2 * r * R * math.sqrt(1 - 1 / K) * (1 - 2e-3)


def test_squared_constants_attained():
    R, B = 0.5, 2.0
    dom = _box(3.0, 4.0)  # sup ||theta|| = 5
    with jax.enable_x64(True):
        loss = losses.squared(label_bound=B, domain=dom, row_norm=R)
        c = loss.constants
        th = np.array([3.0, 4.0])
        x = R * th / 5.0
        assert np.linalg.norm(_g(loss, th, x, -B)) == approx(c.lipschitz, rel=1e-14)
        assert c.lipschitz == approx(R * (5 * R + B), rel=1e-15) and c.grad_diff == 2 * c.lipschitz
        assert c.link_derivative_bound == 5 * R + B
        assert _top_eig(loss, th, x, 0.0).max() == approx(c.smoothness, rel=1e-14)
        assert _e(loss, th, x, -B) - _e(loss, np.zeros(2), x, 0.0) == approx(
            c.value_range, rel=1e-14)
        ball = losses.squared(label_bound=B, domain=domains.L2Ball(2, 5.0), row_norm=R)
        assert ball.constants.lipschitz >= c.lipschitz  # a bound on the ball (not tight there)
    with pytest.raises(ValueError, match="1 label"):
        loss.check_data(np.zeros((2, 2)), np.array([B, -B * (1 + 1e-12)]))
    loss.check_data(np.zeros((2, 2)), np.array([B, -B]))


def test_huber_constants_attained():
    t, R = 0.7, 2.0
    loss = losses.huber(threshold=t, row_norm=R)
    c = loss.constants
    with jax.enable_x64(True):
        th, x = np.array([1.0, 0.0]), np.array([R, 0.0])
        g1, g2 = _g(loss, th, x, -10.0), _g(loss, th, x, 10.0)
        assert np.linalg.norm(g1) == approx(c.lipschitz, rel=1e-15)
        assert np.linalg.norm(g1 - g2) == approx(c.grad_diff, rel=1e-15)
        assert _top_eig(loss, th, x, 2.0).max() == approx(c.smoothness, rel=1e-14)
    assert c.value_range is None and c.link_derivative_bound == t
    assert (c.lipschitz, c.grad_diff, c.smoothness) == (t * R, 2 * t * R, R * R)


def test_smoothed_hinge_constants_attained():
    g, R = 0.25, 2.0
    dom = _box(3.0, 4.0)
    loss = losses.smoothed_hinge(smoothing=g, row_norm=R, domain=dom)
    c = loss.constants
    with jax.enable_x64(True):
        x = np.array([R, 0.0])
        g1, g0 = _g(loss, np.zeros(2), x, 1.0), _g(loss, np.zeros(2), x, 0.0)  # margin 0 <= 1 - g
        assert np.linalg.norm(g1) == approx(c.lipschitz, rel=1e-15)
        assert np.linalg.norm(g1 - g0) == approx(c.grad_diff, rel=1e-15)
        th = np.array([0.875 / R, 0.0])  # margin 0.875, in the quadratic piece
        assert _top_eig(loss, th, x, 1.0).max() == approx(c.smoothness, rel=1e-14)
        th = np.array([3.0, 4.0])
        xx = R * th / 5.0
        top = _e(loss, th, xx, 0.0)  # margin -r R: the largest value
        low = _e(loss, th, xx, 1.0)  # margin r R >= 1: 0
    assert low == 0.0 and top == approx(1 + 5 * R - g / 2, rel=1e-14)
    assert top - low <= c.value_range <= top - low + g / 2 * (1 + 1e-12)
    assert c.link_derivative_bound == 1.0 and c.smoothness == R * R / g


def test_clipped_loss_constants_and_clipped_fraction():
    loss = losses.clipped_loss(lambda t, x, y: 0.5 * jnp.sum((t - x) ** 2), clip_norm=1.0,
                               smoothness=1.0)
    c = loss.constants
    assert (c.lipschitz, c.grad_diff, c.smoothness, c.strong_convexity) == (1.0, 2.0, 1.0, 0.0)
    assert c.clipped and c.smoothness_is_declared and c.value_range is None
    assert loss.clip_norm == 1.0 and loss.l2 == 0.0 and loss.row_norm == math.inf
    bare = losses.clipped_loss(lambda t, x, y: jnp.sum(t * x), clip_norm=2.0)
    assert bare.constants.smoothness is None and not bare.constants.smoothness_is_declared
    X = jnp.array([[0.5, 0.0], [0.0, 2.0], [3.0, 0.0], [0.0, -0.25]])  # gradient norms at 0: .5 2 3 .25
    loss.check_data(X * 1e6, jnp.zeros(4))  # rows are not norm-checked
    assert losses.clipped_fraction(loss, jnp.zeros(2), X, jnp.zeros(4)) == 0.5
    assert losses.clipped_fraction(losses.logistic(), jnp.zeros(2), X, jnp.zeros(4)) == 0.0


def test_random_search_never_beats_the_declared_constants():
    """Sampled theta on the domain, rows at norm R and extreme labels: ||grad|| <= L, pairwise
    differences <= G, top Hessian eigenvalue <= M, value spread <= value_range."""
    rng = np.random.default_rng(5)
    dom = domains.L2Ball(2, 1.5)
    cases = [(losses.logistic(row_norm=1.5, l2=0.2, domain=dom), [0.0, 1.0]),
             (losses.smoothed_hinge(0.3, row_norm=1.5, l2=0.2, domain=dom), [0.0, 1.0]),
             (losses.squared(2.0, dom, row_norm=1.5, l2=0.2), [-2.0, 2.0, 0.0]),
             (losses.huber(0.4, row_norm=1.5, l2=0.2, domain=dom), [-1.0, 0.0, 1.0])]
    with jax.enable_x64(True):
        th = np.asarray(dom.project(jnp.asarray(rng.normal(size=(40, 2)) * 3)))
        ang = rng.uniform(0, 2 * np.pi, size=12)
        X = 1.5 * np.stack([np.cos(ang), np.sin(ang)], axis=1)
        for loss, labels in cases:
            c = loss.constants
            for yv in labels:
                yy = np.full(12, yv)
                G = jax.vmap(lambda t: jax.vmap(jax.grad(loss.example), in_axes=(None, 0, 0))(t, X, yy))(th)
                assert np.linalg.norm(G, axis=-1).max() <= c.lipschitz
                V = jax.vmap(lambda t: loss.per_example(t, X, yy))(th)
                if c.value_range is not None:
                    assert float(V.max() - V.min()) <= c.value_range
            assert _top_eig(loss, th[0], X[0], labels[0]).max() <= c.smoothness * (1 + 1e-12)


# ------------------------------------------------------------------------------------- with_l2
@pytest.mark.parametrize("make", [
    lambda l2, dom: losses.logistic(row_norm=1.5, l2=l2, domain=dom),
    lambda l2, dom: losses.multinomial_logistic(3, row_norm=1.5, l2=l2, domain=dom),
    lambda l2, dom: losses.huber(0.5, row_norm=1.5, l2=l2, domain=dom),
    lambda l2, dom: losses.smoothed_hinge(0.5, row_norm=1.5, l2=l2, domain=dom),
    lambda l2, dom: losses.squared(2.0, dom, row_norm=1.5, l2=l2),
])
@pytest.mark.parametrize("dom", [_box(3.0, 4.0), domains.L2Ball(2, 2.0, np.array([1.0, 0.0]))])
@pytest.mark.parametrize("old,new", [(0.0, 0.7), (0.4, 0.0), (0.4, 1.3)])
def test_with_l2_equals_a_fresh_loss(make, dom, old, new):
    got = losses.with_l2(make(old, dom), new)
    want = make(new, dom)
    assert got.l2 == new and got.domain is dom
    for k, v in dataclasses.asdict(want.constants).items():
        g = getattr(got.constants, k)
        assert g == (v if v is None or isinstance(v, bool) else approx(v, rel=1e-14)), k


def test_with_l2_on_an_unbounded_domain():
    got = losses.with_l2(losses.logistic(row_norm=2.0), 0.5)
    c = got.constants
    assert c.lipschitz == math.inf and c.strong_convexity == 0.5 and c.smoothness == 1.0 + 0.5
    assert c.grad_diff == 4.0 and c.value_range is None
    with pytest.raises(ValueError, match="l2"):
        losses.with_l2(got, -1.0)
    # an unbounded L from the old L2 term stays inf (never NaN); no L2 term keeps the bare L
    assert losses.with_l2(losses.logistic(row_norm=2.0, l2=0.5), 0.2).constants.lipschitz == math.inf
    assert losses.with_l2(losses.logistic(row_norm=2.0), 0.0).constants.lipschitz == 2.0
    # a loss without a declared M keeps none
    clipped = losses.with_l2(losses.clipped_loss(lambda t, x, y: jnp.sum(t * x), 1.0), 0.3)
    assert clipped.constants.smoothness is None and clipped.constants.strong_convexity == 0.3
    assert losses.logistic(l2=0.5, domain=domains.Euclidean(2)).constants.lipschitz == math.inf


# ---------------------------------------------------------------------- constants object, checks
def test_loss_constants_object():
    c = losses.LossConstants(lipschitz=1.0, grad_diff=2.0)
    assert (c.smoothness, c.strong_convexity, c.value_range, c.clipped, c.smoothness_is_declared,
            c.link_derivative_bound) == (None, 0.0, None, False, False, None)
    full = losses.LossConstants(1.0, 2.0, 3.0, 0.5, 7.0, True, True, 0.25)
    assert full.as_dict() == dataclasses.asdict(full)
    assert full.gradient_sensitivity(8) == 0.25
    with pytest.raises(ValueError, match="n"):
        full.gradient_sensitivity(0)
    full.require_finite_grad_diff()
    losses.LossConstants(1.0, 1e-300).require_finite_grad_diff()
    for G in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="grad_diff"):
            losses.LossConstants(1.0, G).require_finite_grad_diff()
    loss = losses.logistic(row_norm=2.0, l2=0.5, domain=domains.L2Ball(3, 1.0))
    assert loss.gradient_sensitivity(10) == 0.4
    d = loss.describe()
    assert d["name"] == "logistic" and d["row_norm"] == 2.0 and d["l2"] == 0.5 and d["clip_norm"] is None
    assert d["domain"] == loss.domain.describe() and d["lipschitz"] == loss.constants.lipschitz
    assert losses.logistic().describe()["domain"] is None


def test_check_data_edges():
    loss = losses.logistic(row_norm=2.0)
    X, y = loss.check_data([[2.0, 0.0], [0.0, -2.0], [1.2, 1.6]], [0.0, 1.0, 1.0])
    assert X.shape == (3, 2) and y.shape == (3,)
    with pytest.raises(ValueError, match="1 row"):
        loss.check_data([[2.0, 0.0], [3.0, 0.0]], [0.0, 1.0])
    with pytest.raises(ValueError, match="same number of rows, got 3 and 2"):
        loss.check_data(np.zeros((3, 4)), np.zeros(2))
    with pytest.raises(ValueError, match="y"):
        loss.check_data(np.zeros((3, 2)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="0/1"):
        loss.check_data(np.zeros((2, 2)), np.array([1.0, 0.5]))
    with pytest.raises(ValueError, match="0/1"):
        losses.smoothed_hinge().check_data(np.zeros((2, 2)), np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="bounded"):
        losses.squared(1.0, "L2Ball(2, 1.0)")
    mn = losses.multinomial_logistic(2)
    mn.check_data(np.zeros((2, 2)), np.array([0.0, 1.0]))
    for bad in (2.0, -1.0, 0.5):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            mn.check_data(np.zeros((1, 2)), np.array([bad]))
    with pytest.raises(ValueError, match="num_classes"):
        losses.multinomial_logistic(1)
    for make in (lambda: losses.squared(1.0, domains.Euclidean(2)), lambda: losses.squared(1.0, None)):
        with pytest.raises(ValueError, match="bounded"):
            make()


def test_names_and_plain_glm_loss():
    box = _box(1.0, 1.0)
    made = [losses.logistic(), losses.multinomial_logistic(2), losses.squared(1.0, box), losses.huber(),
            losses.smoothed_hinge(), losses.clipped_loss(lambda t, x, y: 0.0, 1.0)]
    assert [m.name for m in made] == ["logistic", "multinomial_logistic", "squared", "huber",
                                      "smoothed_hinge", "clipped"]
    mine = losses.clipped_loss(lambda t, x, y: 0.0, 1.0, name="mine", domain=box)
    assert mine.name == "mine" and mine.describe()["name"] == "mine" and mine.domain is box
    c = losses.LossConstants(1.0, 2.0)
    g = losses.glm_loss("g", lambda z, y: (z - y) ** 2, c, 1.0)
    assert g.l2 == 0.0 and g.domain is None and g.label_check is None and g.constants is c
    assert float(g.example(jnp.array([1.0, 2.0]), jnp.array([0.5, 0.25]), jnp.array(0.0))) == 1.0
