"""Oracle tests for potentials.py: each potential's declared gradient
sensitivity against the gradients of neighbouring datasets (bounded, and attained by a worst-case
pair), its curvature constants against its Hessian, its value and the NumPyro model's potential
energy against closed forms.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import potential_energy
from tests.support.strict_tolerance import approx

from dp_infer import losses, potentials


def _quadratic(M, B, *, m=None, lip=1e6):
    """ell(theta; x) = (M/2)(theta - x)^2 in 1-D, |x| <= B: G = 2 M B, curvature M."""
    fn = lambda t, x, y: 0.5 * M * jnp.sum((t - x) ** 2)  # noqa: E731
    c = losses.LossConstants(lipschitz=lip, grad_diff=2 * M * B, smoothness=M,
                             strong_convexity=M if m is None else m)
    return losses.PerExampleLoss("quadratic", fn, c, row_norm=B)


def _grad(U, th):
    return np.asarray(jax.grad(U)(jnp.asarray(th)))


@pytest.mark.parametrize("tol", [0.0, 0.03])
def test_thresholded_sensitivity_is_attained_by_a_worst_case_pair(tol):
    """D = (-B, 0, ..., 0), D' = (+B, 0, ..., 0): mu_D = -B/n, mu_D' = +B/n. At theta just inside
    D''s Rashomon set (base L*_D' + tol) on the far side from mu_D, D' is flat and D is active with
    gradient M (2B/n + sqrt(2 (psi + tol)/M)) = G/n + sqrt(2 M (psi + tol)): the declared value."""
    M, B, n, psi, beta = 2.0, 1.0, 10, 0.05, 3.0
    loss = _quadratic(M, B)
    with jax.enable_x64(True):
        X = np.zeros((n, 1))
        X1, X2 = X.copy(), X.copy()
        X1[0], X2[0] = -B, B
        y = np.zeros(n)
        Ls1 = float(0.5 * M * np.mean((X1[:, 0] + B / n) ** 2))  # min of L_D
        Ls2 = float(0.5 * M * np.mean((X2[:, 0] - B / n) ** 2))
        U1 = potentials.rashomon_potential(loss, X1, y, beta=beta, psi=psi, L_star=Ls1, L_star_tol=tol,
                                           lam=0.7, theta0=np.array([0.3]))
        U2 = potentials.rashomon_potential(loss, X2, y, beta=beta, psi=psi, L_star=Ls2 + tol,
                                           L_star_tol=tol, lam=0.7, theta0=np.array([0.3]))
        declared = U1.gradient_sensitivity()
        assert declared == U2.gradient_sensitivity()
        assert declared == approx(beta * (2 * M * B / n + math.sqrt(2 * M * (psi + tol))), rel=1e-15)
        edge = B / n + math.sqrt(2 * (psi + tol) / M)
        ths = jnp.asarray(np.concatenate([np.linspace(-2, 2, 401), [edge * (1 - 1e-9)]])[:, None])
        gap = jax.vmap(jax.grad(U1))(ths) - jax.vmap(jax.grad(U2))(ths)
        worst = float(jnp.abs(gap).max())
    assert worst <= declared
    assert worst == approx(declared, rel=1e-7)


def test_gibbs_sensitivity_is_attained_and_data_free_terms_cancel():
    """Huber with labels +-10 on the same row: per-example gradients t x and -t x, so the mean
    gradient moves by exactly 2 t R / n = G / n; lam, theta0 and a prior cancel."""
    t, R, n, beta = 0.5, 2.0, 7, 3.0
    loss = losses.huber(threshold=t, row_norm=R)
    X = np.tile([[R, 0.0]], (n, 1))
    y1, y2 = np.zeros(n), np.zeros(n)
    y1[3], y2[3] = 10.0, -10.0
    kw = dict(beta=beta, lam=0.4, theta0=np.array([1.0, -1.0]))
    U1 = potentials.gibbs_potential(loss, X, y1, **kw)
    U2 = potentials.gibbs_potential(loss, X, y2, **kw)
    th = np.array([0.1, 0.2], dtype=np.float32)
    diff = np.linalg.norm(_grad(U1, th) - _grad(U2, th))
    assert U1.n == n and U1.dim == 2
    assert U1.loss_sensitivity() == approx(2 * t * R / n, rel=1e-15)
    assert U1.gradient_sensitivity() == approx(beta * 2 * t * R / n, rel=1e-15)
    assert diff == approx(U1.gradient_sensitivity(), rel=1e-6)


def test_thresholded_sensitivity_formula_branches():
    c = losses.LossConstants(lipschitz=3.0, grad_diff=2.0, smoothness=4.0, strong_convexity=0.5)
    assert potentials.thresholded_sensitivity(c, 4, 0.02) == approx(0.5 + math.sqrt(8 * 0.02), rel=1e-15)
    assert potentials.thresholded_sensitivity(c, 4, 0.02, 0.03) == approx(0.5 + math.sqrt(8 * 0.05), rel=1e-15)
    assert potentials.thresholded_sensitivity(c, 4, 2.0) == 0.5 + 3.0  # sqrt(2 M psi) = 4 > L
    assert potentials.thresholded_sensitivity(c, 4, 0.0) == 0.5
    for no_cert in (dict(strong_convexity=0.0), dict(smoothness=None)):  # no certificate of L*
        c0 = losses.LossConstants(**{**c.as_dict(), **no_cert})
        assert potentials.thresholded_sensitivity(c0, 4, 0.02) == 0.5 + 3.0
    inf_lip = losses.LossConstants(lipschitz=math.inf, grad_diff=2.0)
    with pytest.raises(ValueError, match="no finite gradient sensitivity"):
        potentials.thresholded_sensitivity(inf_lip, 4, 0.02)
    with pytest.raises(ValueError, match="no finite gradient sensitivity"):
        potentials.thresholded_sensitivity(losses.LossConstants(1.0, math.inf, 1.0, 1.0), 4, 0.02)
    # the certified branch never needs L: finite even when L is not
    cert = losses.LossConstants(lipschitz=math.inf, grad_diff=2.0, smoothness=4.0, strong_convexity=1.0)
    assert potentials.thresholded_sensitivity(cert, 4, 0.02) == approx(0.5 + math.sqrt(0.16), rel=1e-15)
    with pytest.raises(ValueError, match="LossConstants"):
        potentials.thresholded_sensitivity(c.as_dict(), 4, 0.02)
    for bad in (dict(n=0), dict(psi=-1.0), dict(tol=-1.0)):
        kw = {"n": 4, "psi": 0.02, "tol": 0.0, **bad}
        with pytest.raises(ValueError, match=next(iter(bad))):
            potentials.thresholded_sensitivity(c, **kw)


def test_curvature_constants_against_the_hessian():
    """Rows +-R e1 at theta = 0 (z = 0): Hessian of U = diag(beta (R^2/4 + l2) + lam,
    beta l2 + lam) -- the declared M_U and m_U exactly."""
    R, l2, beta, lam = 2.0, 0.3, 5.0, 0.25
    loss = losses.logistic(row_norm=R, l2=l2)
    X = np.array([[R, 0.0], [-R, 0.0], [R, 0.0]])
    with jax.enable_x64(True):
        U = potentials.gibbs_potential(loss, X, np.array([0.0, 1.0, 1.0]), beta=beta, lam=lam)
        ev = np.linalg.eigvalsh(np.asarray(jax.hessian(U)(jnp.zeros(2))))
    assert U.smoothness() == approx(beta * (R * R / 4 + l2) + lam, rel=1e-15)
    assert U.strong_convexity() == approx(beta * l2 + lam, rel=1e-15)
    assert ev.max() == approx(U.smoothness(), rel=1e-13)
    assert ev.min() == approx(U.strong_convexity(), rel=1e-13)
    clipped = losses.clipped_loss(lambda t, x, y: jnp.sum(t * x), 1.0)
    assert potentials.gibbs_potential(clipped, X, np.zeros(3), beta=2.0).smoothness() is None


def _data(n=6, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= 1.2 * np.linalg.norm(X, axis=1, keepdims=True)
    return X, rng.choice([0.0, 1.0], size=n)


def test_potential_values_and_the_model_against_closed_forms():
    X, y = _data()
    loss = losses.logistic()
    th = np.array([0.4, -0.9])
    with jax.enable_x64(True):
        L = float(loss.mean(th, X, y))
        prior = dist.Normal(0.5, 2.0).expand([2]).to_event(1)
        cases = [  # (potential, its closed form)
            (potentials.gibbs_potential(loss, X, y, beta=3.0), 3.0 * L),
            (potentials.gibbs_potential(loss, X, y, beta=3.0, lam=0.8), 3.0 * L + 0.4 * th @ th),
            (potentials.gibbs_potential(loss, X, y, beta=3.0, lam=0.8, theta0=np.array([1.0, 2.0])),
             3.0 * L + 0.4 * ((th[0] - 1) ** 2 + (th[1] - 2) ** 2)),
            (potentials.rashomon_potential(loss, X, y, beta=3.0, psi=0.1, L_star=L - 0.3), 3.0 * L),
            (potentials.rashomon_potential(loss, X, y, beta=3.0, psi=0.1, L_star=L + 0.2, lam=0.8),
             3.0 * (L + 0.3) + 0.4 * th @ th),
        ]
        for U, want in cases:
            assert float(U(jnp.asarray(th))) == approx(want, rel=1e-13)
            for site in ("theta", "w"):
                pe = potential_energy(potentials.gibbs_model(U, site=site), (), {}, {site: jnp.asarray(th)})
                assert float(pe) == approx(want, rel=1e-13)
            # a prior replaces the quadratic term
            pe = potential_energy(potentials.gibbs_model(U, prior=prior), (), {}, {"theta": jnp.asarray(th)})
            assert float(pe) == approx(3.0 * float(U.data_loss(th)) - float(prior.log_prob(th)), rel=1e-13)
        Up = potentials.GibbsPotential(loss, jnp.asarray(X), jnp.asarray(y), 3.0, lam=0.8,
                                       prior_potential=lambda t: jnp.sum(t ** 4))
        assert float(Up(jnp.asarray(th))) == approx(3.0 * L + 0.4 * th @ th + np.sum(th ** 4), rel=1e-13)


@pytest.mark.parametrize("kind", ["glm", "glm_l2_threshold", "multinomial", "clipped"])
def test_reparametrised_is_u_of_c_phi(kind):
    X, y = _data(n=9, d=3, seed=1)
    loss = {"glm": losses.logistic(), "glm_l2_threshold": losses.logistic(l2=0.3),
            "multinomial": losses.multinomial_logistic(2),
            "clipped": losses.clipped_loss(lambda t, x, yy: jnp.sum((t - x) ** 2), 0.3)}[kind]
    with jax.enable_x64(True):
        d = loss.num_params(3)
        if kind == "glm_l2_threshold":
            U = potentials.rashomon_potential(loss, X, y, beta=4.0, psi=0.05, L_star=0.4, lam=0.5,
                                              theta0=np.arange(d, dtype=float))
        else:
            U = potentials.gibbs_potential(loss, X, y, beta=4.0, lam=0.5)
        rng = np.random.default_rng(2)
        C = rng.normal(size=(d, d))
        V = U.reparametrised(C)
        for _ in range(3):
            phi = jnp.asarray(rng.normal(size=d))
            assert float(V(phi)) == approx(float(U(jnp.asarray(C) @ phi)), rel=1e-12)
            np.testing.assert_allclose(np.asarray(jax.grad(V)(phi)),
                                       np.asarray(jnp.asarray(C).T @ jax.grad(U)(jnp.asarray(C) @ phi)),
                                       rtol=1e-10)
        with pytest.raises(ValueError, match="C must have shape"):
            U.reparametrised(np.eye(d + 1))
    # float32 data: C is never below float32, and never silently widened past the data's dtype
    U32 = potentials.gibbs_potential(losses.logistic(), X, y, beta=4.0)
    phi = jnp.ones(3, dtype=jnp.float32)
    assert U32.reparametrised(np.eye(3, dtype=np.float16))(phi).dtype == jnp.float32


def test_describe_and_refusals():
    X, y = _data()
    loss = losses.logistic()
    U = potentials.gibbs_potential(loss, X, y, beta=2.0, lam=0.5)
    d = U.describe()
    assert d == {"kind": "gibbs", "beta": 2.0, "lam": 0.5, "psi": None, "n": 6, "dim": 2,
                 "loss": loss.describe(), "gradient_sensitivity": 2.0 * 2.0 / 6}
    R = potentials.rashomon_potential(loss, X, y, beta=2.0, psi=0.1, L_star=0.3, L_star_tol=0.2)
    dr = R.describe()
    assert dr["kind"] == "rashomon" and dr["psi"] == 0.1 and R.L_star_tol == 0.2 and R.L_star == 0.3
    assert dr["gradient_sensitivity"] == approx(2.0 * (2.0 / 6 + 1.0), rel=1e-15)  # no certificate: G/n + L
    for bad, match in [(dict(L_star=math.inf), "L_star"), (dict(L_star=math.nan), "L_star"),
                       (dict(L_star_tol=-0.1), "L_star_tol"), (dict(lam=-1.0), "lam"),
                       (dict(theta0=np.zeros((2, 1))), "theta0")]:
        kw = {"beta": 1.0, "psi": 0.1, "L_star": 0.0, **bad}
        with pytest.raises(ValueError, match=match):
            potentials.rashomon_potential(loss, X, y, **kw)
    with pytest.raises(ValueError, match="row_norm"):
        potentials.gibbs_potential(loss, X * 2, y, beta=1.0)
    U0 = potentials.gibbs_potential(loss, X, y, beta=1.0, theta0=[1.0, 2.0])
    assert isinstance(U0.theta0, jax.Array) and np.asarray(U0.theta0).tolist() == [1.0, 2.0]


def test_rashomon_potential_defaults_and_theta0_against_the_closed_form():
    """U(theta) = beta max{L, L* + psi} + (lam/2)||theta - theta0||^2 with L = loss.mean (a separate
    code path), and, without L_star_tol, the sensitivity G/n + sqrt(2 M psi) (tol = 0)."""
    M, B, n, psi, beta, lam = 2.0, 1.0, 8, 0.05, 3.0, 0.7
    loss = _quadratic(M, B)
    X = np.linspace(-B, B, n)[:, None]
    with jax.enable_x64(True):
        R = potentials.rashomon_potential(loss, X, np.zeros(n), beta=beta, psi=psi, L_star=0.1, lam=lam,
                                          theta0=[0.4])
        assert R.L_star_tol == 0.0
        assert R.loss_sensitivity() == approx(2 * M * B / n + math.sqrt(2 * M * psi), rel=1e-15)
        for th in (-1.5, 0.0, 0.3, 2.0):
            L = float(loss.mean(jnp.asarray([th]), jnp.asarray(X), jnp.zeros(n)))
            want = beta * max(L, 0.1 + psi) + 0.5 * lam * (th - 0.4) ** 2
            assert float(R(jnp.asarray([th]))) == approx(want, rel=1e-14)


def test_the_model_names_its_factor_sites_for_log_likelihood():
    """gibbs_model's documented sites: ``gibbs_loss`` = -beta L(theta) and ``regulariser`` =
    -(lam/2)||theta - theta0||^2, as NumPyro's log_likelihood (and ArviZ's log_likelihood group)
    sees them."""
    from numpyro.infer.util import log_likelihood

    X, y = _data(n=7, d=2, seed=3)
    loss = losses.logistic()
    with jax.enable_x64(True):
        U = potentials.gibbs_potential(loss, X, y, beta=5.0, lam=0.6, theta0=[0.2, -0.1])
        draws = jnp.asarray(np.random.default_rng(4).normal(size=(3, 2)))
        ll = log_likelihood(potentials.gibbs_model(U), {"theta": draws})
        assert set(ll) == {"gibbs_loss", "regulariser"}
        for i, th in enumerate(np.asarray(draws)):
            L = float(loss.mean(jnp.asarray(th), jnp.asarray(X), jnp.asarray(y)))
            assert float(ll["gibbs_loss"][i]) == approx(-5.0 * L, rel=1e-13)
            reg = -0.3 * float(np.sum((th - np.array([0.2, -0.1])) ** 2))
            assert float(ll["regulariser"][i]) == approx(reg, rel=1e-13)


def test_reparametrised_clips_a_clipped_generalised_linear_loss():
    """A generalised linear loss with clipping (``clip_norm`` set) must keep its clipped gradient:
    grad V(phi) = C^T grad U(C phi) (chain rule), with U's per-example gradients clipped."""
    from dataclasses import replace

    X, y = _data(n=9, d=3, seed=5)
    loss = replace(losses.logistic(), clip_norm=0.05)  # clipping active: rows have norm ~1
    with jax.enable_x64(True):
        U = potentials.gibbs_potential(loss, X, y, beta=4.0)
        rng = np.random.default_rng(6)
        C = jnp.asarray(rng.normal(size=(3, 3)))
        V = U.reparametrised(C)
        for _ in range(3):
            phi = jnp.asarray(rng.normal(size=3))
            np.testing.assert_allclose(np.asarray(jax.grad(V)(phi)), np.asarray(C.T @ jax.grad(U)(C @ phi)),
                                       rtol=1e-10)


def test_reparametrised_computes_in_at_least_float32():
    """C is taken in at least float32 (the docstring's rounding promise): with half-precision C
    and phi the value agrees with the float64 closed form to float32 accuracy (half precision
    would err by ~1e-3 in the regulariser)."""
    X, y = _data(n=6, d=2, seed=7)
    U = potentials.gibbs_potential(losses.logistic(), X, y, beta=2.0, lam=3.0, theta0=[0.1, 0.2])
    C16 = np.array([[1.1, 0.3], [-0.2, 0.9]], dtype=np.float16)
    phi16 = jnp.asarray([0.7, -1.3], dtype=jnp.float16)
    theta = C16.astype(np.float64) @ np.asarray(phi16, dtype=np.float64)
    with jax.enable_x64(True):
        U64 = potentials.gibbs_potential(losses.logistic(), X, y, beta=2.0, lam=3.0, theta0=[0.1, 0.2])
        want = float(U64(jnp.asarray(theta)))
    got = U.reparametrised(C16)(phi16)
    assert got.dtype == jnp.float32 and float(got) == pytest.approx(want, rel=2e-6)


@pytest.mark.parametrize("call", [lambda: potentials.gibbs_potential("logistic", np.zeros((2, 1)), np.zeros(2), 1.0),
                                  lambda: potentials.thresholded_sensitivity({"G": 1.0}, 10, 0.1)])
def test_type_errors_name_the_type_passed(call):
    with pytest.raises(ValueError, match="got (str|dict)$"):
        call()


def test_a_sensitivity_that_overflows_float_is_refused():
    """G/n and L each finite but their sum beyond float: no finite bound, so refused (never inf)."""
    c = losses.LossConstants(lipschitz=1e308, grad_diff=1e308)
    with pytest.raises(ValueError, match="no finite gradient sensitivity"):
        potentials.thresholded_sensitivity(c, 1, 0.1)
    assert potentials.thresholded_sensitivity(c, 2, 0.1) == 1.5e308  # still a float


def test_reparametrised_keeps_float32_data_in_float32_under_x64():
    """C takes the data's dtype (at least float32): float32 data with a float64 C under x64 stay
    float32 (X C is formed once: an n x d copy, never silently widened to float64)."""
    X, y = _data(n=6, d=2, seed=8)
    with jax.enable_x64(True):
        U = potentials.GibbsPotential(losses.logistic(), jnp.asarray(X, dtype=jnp.float32),
                                      jnp.asarray(y, dtype=jnp.float32), 2.0, lam=0.5)
        C = np.array([[1.1, 0.3], [-0.2, 0.9]])  # float64
        phi = jnp.asarray([0.7, -1.3], dtype=jnp.float32)
        got = U.reparametrised(C)(phi)
        want = float(U(jnp.asarray(C, dtype=jnp.float32) @ phi))
        assert got.dtype == jnp.float32 and float(got) == pytest.approx(want, rel=1e-6)
