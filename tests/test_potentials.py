"""Potentials against closed forms (seed-001 digest §10.1) and the NumPyro model bridge."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import log_likelihood, potential_energy
from scipy import integrate, special

from dp_infer import losses, potentials
from dp_infer.model.bridge import loss_from_model


def _quadratic_loss(m):
    """ell(theta; d) = (m/2)||theta - x||^2 written through clipped_loss with an inactive clip."""
    return losses.clipped_loss(lambda t, x, y: 0.5 * m * jnp.sum((t - x) ** 2), clip_norm=1e6,
                               smoothness=m)


def _closed_forms(p, m, beta, psi):
    """P(G) and E[L] for the isotropic quadratic thresholded Gibbs law (digest §10.1), with
    L* = 0 (L measured from its minimum)."""
    A = math.exp(-beta * psi) * (beta * psi) ** (p / 2) / special.gamma(p / 2 + 1)
    Q = special.gammaincc(p / 2, beta * psi)
    PG = A / (A + Q)
    EL_in = psi * p / (p + 2)
    EL_out = (special.gammaincc(p / 2 + 1, beta * psi) * special.gamma(p / 2 + 1)) / (
        beta * special.gammaincc(p / 2, beta * psi) * special.gamma(p / 2))
    return PG, PG * EL_in + (1 - PG) * EL_out


@pytest.mark.parametrize("p,m,beta,psi", [(1, 1.0, 10.0, 0.1), (1, 1.0, 100.0, 0.05), (2, 1.0, 50.0, 0.1)])
def test_thresholded_gibbs_closed_forms_by_quadrature(p, m, beta, psi):
    """Integrate exp(-U) of our rashomon_potential numerically; compare with the closed forms."""
    rng = np.random.default_rng(0)
    data = rng.normal(size=(5, p)) * 0.1
    loss = _quadratic_loss(m)
    X = jnp.asarray(data)
    y = jnp.zeros(5)
    center = data.mean(axis=0)
    # L(theta) = (m/2)||theta - mean||^2 + c0 with c0 = mean of (m/2)||x_i - mean||^2
    c0 = float(0.5 * m * np.mean(np.sum((data - center) ** 2, axis=1)))
    U = potentials.rashomon_potential(loss, X, y, beta=beta, psi=psi, L_star=c0)
    Lfun = jax.jit(lambda th: loss.mean(th, X, y) - c0)
    Ufun = jax.jit(lambda th: U(th) - beta * (c0 + psi))  # shift for numerical range
    r_G = math.sqrt(2 * psi / m)
    lim = r_G + 12 / math.sqrt(beta * m)
    if p == 1:
        f = lambda t, g: float(g(jnp.array([center[0] + t])))
        w = lambda t: math.exp(-f(t, Ufun))
        pts = [-r_G, r_G]
        Z = integrate.quad(w, -lim, lim, points=pts, limit=200)[0]
        ZG = integrate.quad(w, -r_G, r_G, limit=200)[0]
        EL = integrate.quad(lambda t: w(t) * f(t, Lfun), -lim, lim, points=pts, limit=200)[0] / Z
    else:  # radial integral in 2-D: the potential depends on the radius only
        def at(r, g):
            return float(g(jnp.asarray(center + np.array([r, 0.0]))))
        w = lambda r: 2 * math.pi * r * math.exp(-at(r, Ufun))
        Z = integrate.quad(w, 0, lim, points=[r_G], limit=200)[0]
        ZG = integrate.quad(w, 0, r_G, limit=200)[0]
        EL = integrate.quad(lambda r: w(r) * at(r, Lfun), 0, lim, points=[r_G], limit=200)[0] / Z
    PG, EL_cf = _closed_forms(p, m, beta, psi)
    # float32 potentials: agreement to ~1e-4 relative
    assert ZG / Z == pytest.approx(PG, rel=2e-4)
    assert EL == pytest.approx(EL_cf, rel=2e-3)
    assert EL <= psi + p / beta  # Theorem 2.4's excess-risk bound
    if p == 2:
        assert PG == pytest.approx(beta * psi / (1 + beta * psi), rel=1e-12)


def test_gibbs_potential_and_model_agree_and_constants():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3))
    X /= 1.1 * np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.choice([0.0, 1.0], size=30)
    U = potentials.gibbs_potential(losses.logistic(), X, y, beta=40.0, lam=0.5, theta0=np.ones(3))
    th = jnp.array([0.3, -1.0, 2.0])
    model = potentials.gibbs_model(U)
    assert float(potential_energy(model, (), {}, {"theta": th})) == pytest.approx(float(U(th)), rel=1e-6)
    assert U.gradient_sensitivity() == pytest.approx(40.0 * 2 / 30)
    assert U.strong_convexity() == pytest.approx(0.5)
    assert U.smoothness() == pytest.approx(40.0 / 4 + 0.5)
    # a NumPyro prior replaces the quadratic term
    prior = dist.Normal(jnp.ones(3), 1 / math.sqrt(0.5)).to_event(1)
    model2 = potentials.gibbs_model(potentials.gibbs_potential(losses.logistic(), X, y, beta=40.0), prior=prior)
    th2 = jnp.array([0.1, 0.2, 0.3])
    diff = float(potential_energy(model2, (), {}, {"theta": th}) - potential_energy(model2, (), {}, {"theta": th2}))
    assert diff == pytest.approx(float(U(th) - U(th2)), rel=1e-5)


def test_thresholded_sensitivity_formula():
    X = jnp.zeros((100, 1))
    # no declared strong convexity: no certificate for L*, the bound is G/n + L for any threshold
    loss = _quadratic_loss(1.0)
    U = potentials.rashomon_potential(loss, X, jnp.zeros(100), beta=3.0, psi=0.01, L_star=0.0)
    assert U.loss_sensitivity() == pytest.approx(2e6 / 100 + 1e6)
    # declared m > 0 and M: G/n + sqrt(2 M (psi + tol)) with the declared tol
    fn = lambda t, x, y: 0.5 * jnp.sum((t - x) ** 2)  # noqa: E731
    sc = losses.PerExampleLoss("q", fn, losses.LossConstants(5.0, 2.0, 1.0, 1.0), 1.0)
    U = potentials.rashomon_potential(sc, X, jnp.zeros(100), beta=3.0, psi=0.01, L_star=0.0, L_star_tol=0.02)
    assert U.loss_sensitivity() == pytest.approx(2 / 100 + math.sqrt(2 * 0.03))


def test_potential_bad_inputs():
    X = np.zeros((4, 2))
    y = np.zeros(4)
    with pytest.raises(ValueError, match="beta"):
        potentials.gibbs_potential(losses.logistic(), X, y, beta=0.0)
    with pytest.raises(ValueError, match="beta"):
        potentials.gibbs_potential(losses.logistic(), X, y, beta=float("inf"))
    with pytest.raises(ValueError, match="psi"):
        potentials.rashomon_potential(losses.logistic(), X, y, beta=1.0, psi=-0.1, L_star=0.0)
    with pytest.raises(ValueError, match="theta0"):
        potentials.gibbs_potential(losses.logistic(), X, y, beta=1.0, theta0=np.zeros(3))
    with pytest.raises(ValueError, match="loss"):
        potentials.gibbs_potential(lambda t: t, X, y, beta=1.0)


def _logreg(X=None, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 2.0).expand([X.shape[1]]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 5.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w + b), obs=y)


def test_model_bridge_matches_numpyro_likelihood_and_prior():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(25, 3))
    y = rng.choice([0.0, 1.0], size=25)
    ml = loss_from_model(_logreg, X, y, clip_norm=1e6)  # clip inactive
    assert set(ml.latent_sites) == {"w", "b"}
    theta = jnp.asarray(rng.normal(size=ml.dim))
    params = ml.constrain(theta)
    ll = log_likelihood(_logreg, params, X=jnp.asarray(X), y=jnp.asarray(y), batch_ndims=0)["y"]
    per = ml.loss.per_example(theta, jnp.asarray(X), jnp.asarray(y))
    np.testing.assert_allclose(np.asarray(per), -np.asarray(ll), rtol=1e-5)
    lp = dist.Normal(0.0, 2.0).log_prob(params["w"]).sum() + dist.Normal(0.0, 5.0).log_prob(params["b"])
    assert float(ml.prior_potential(theta)) == pytest.approx(-float(lp), rel=1e-5)
    # the ordinary posterior is the tempered one at beta = n
    full = potential_energy(_logreg, (), {"X": jnp.asarray(X), "y": jnp.asarray(y)}, ml.unravel(theta))
    tempered = 25 * ml.loss.mean(theta, jnp.asarray(X), jnp.asarray(y)) + ml.prior_potential(theta)
    assert float(tempered) == pytest.approx(float(full), rel=1e-5)


def test_model_bridge_clips_per_example_gradients():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 3)) * 10
    y = rng.choice([0.0, 1.0], size=40)
    ml = loss_from_model(_logreg, X, y, clip_norm=0.5)
    assert ml.loss.constants.grad_diff == 1.0
    theta = jnp.asarray(rng.normal(size=ml.dim))
    g = jax.grad(ml.loss.mean)(theta, jnp.asarray(X), jnp.asarray(y))
    per = jax.vmap(jax.grad(ml.loss.fn), in_axes=(None, 0, 0))(theta, jnp.asarray(X), jnp.asarray(y))
    nrm = np.linalg.norm(per, axis=1, keepdims=True)
    np.testing.assert_allclose(np.asarray(g), (np.asarray(per) * np.minimum(1, 0.5 / np.maximum(nrm, 1e-30))).mean(0), rtol=1e-5)


def test_model_bridge_refuses_models_without_observations():
    def m(X=None, y=None):
        numpyro.sample("w", dist.Normal(0, 1))
    with pytest.raises(ValueError, match="observed"):
        loss_from_model(m, np.zeros((3, 1)), np.zeros(3), clip_norm=1.0)
