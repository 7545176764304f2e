"""Tests of the unadjusted Langevin kernels (functional cores and NumPyro adapters).

Statistical tests use fixed keys; every tolerance is a stated multiple of a Monte-Carlo
standard error computed in the test (independent chains, last draw only, or draws spaced by
many relaxation times). Each statistical test also checks that it *could* fail: the exact
discrete-time answer is compared with the naive continuous-time one and must be
distinguishable at the sample size used.
"""

from __future__ import annotations

import math
import pickle
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
import scipy.linalg
from numpyro.infer import MCMC, init_to_value

from dp_infer.domains import Box, Euclidean, L2Ball
from dp_infer.randomness import gaussian_noise  # the kernels' privacy noise (issue 40)
from dp_infer.kernels import (
    Langevin,
    LangevinState,
    UnderdampedLangevin,
    UnderdampedLangevinState,
    langevin,
    underdamped,
)

MU = np.array([1.0, -2.0], dtype=np.float32)  # numpy: no JAX backend at import (forked mutmut workers)
M = 2.0  # curvature of the Gaussian test potential


def gauss_potential(theta):
    """U = m/2 |theta - mu|^2 (target N(mu, I/m))."""
    return 0.5 * M * jnp.sum((theta - MU) ** 2)


def dict_potential(z):
    """The same potential plus the N(0, 10^2) prior of ``gauss_model``, on a dict position."""
    th = z["theta"]
    return gauss_potential(th) + 0.5 * jnp.sum(th**2) / 100.0


def gauss_model():
    theta = numpyro.sample("theta", dist.Normal(0.0, 10.0).expand([2]).to_event(1))
    numpyro.factor("loss", -gauss_potential(theta))


def data_model(y):
    theta = numpyro.sample("theta", dist.Normal(0.0, 10.0))
    numpyro.factor("loss", -0.5 * jnp.sum((y - theta) ** 2))


def run(kernel, key, *, num_samples, num_chains=1, chain_method="sequential", thinning=1, **run_kw):
    mcmc = MCMC(
        kernel,
        num_warmup=0,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=chain_method,
        thinning=thinning,
        progress_bar=False,
    )
    mcmc.run(key, **run_kw)
    return mcmc


# ------------------------------------------------------------------------------------------
# statistical oracles
# ------------------------------------------------------------------------------------------


def test_ula_gaussian_stationary_variance_is_inflated():
    # ULA on N(mu, I/m): theta' = (1 - h m) theta + h m mu + sqrt(2h) xi has the exact stationary
    # law N(mu, v I) with v = 2h / (1 - (1 - h m)^2) = 1 / (m (1 - h m / 2)).
    h = 0.25  # h m = 0.5 -> v = (4/3) / m
    v_exact = 1.0 / (M * (1.0 - h * M / 2.0))
    assert v_exact == pytest.approx(2.0 * h / (1.0 - (1.0 - h * M) ** 2))
    n_chains, n_steps = 4000, 60  # contraction |1 - h m|^60 = 2^-60: the start is forgotten
    mcmc = run(
        Langevin(potential_fn=gauss_potential, step_size=h),
        jax.random.key(0),
        num_samples=n_steps,
        num_chains=n_chains,
        chain_method="vectorized",
        init_params=jnp.zeros((n_chains, 2)),
    )
    last = np.asarray(mcmc.get_samples(group_by_chain=True)[:, -1, :], dtype=np.float64)
    assert not np.any(np.asarray(mcmc.get_extra_fields()["diverging"]))
    # chains are independent and the two coordinates are independent: n = 8000 iid N(mu_j, v)
    n = last.size
    var_hat = np.mean(np.var(last, axis=0, ddof=1))
    se_var = v_exact * math.sqrt(2.0 / (n - 1))  # sd of a Gaussian sample variance
    assert abs(var_hat - v_exact) < 4.0 * se_var
    # power: the naive answer 1/m is many standard errors away
    assert abs(1.0 / M - v_exact) > 8.0 * se_var
    assert abs(var_hat - 1.0 / M) > 4.0 * se_var
    se_mean = math.sqrt(v_exact / n_chains)
    np.testing.assert_array_less(np.abs(last.mean(axis=0) - np.asarray(MU)), 4.0 * se_mean)


def test_underdamped_euler_gaussian_matches_discrete_lyapunov():
    # U = m/2 |x - mu|^2; per coordinate s = (x - mu, v) follows s' = A s + b xi with
    #   v' = (1 - h g) v - h m x + sqrt(2 g h) xi,   x' = x + h v'
    # so the exact stationary covariance solves Sigma = A Sigma A^T + b b^T.
    m, g, h = 1.0, 1.0, 0.5
    A = np.array([[1.0 - h * h * m, h * (1.0 - h * g)], [-h * m, 1.0 - h * g]])
    b = math.sqrt(2.0 * g * h) * np.array([h, 1.0])
    sigma = scipy.linalg.solve_discrete_lyapunov(A, np.outer(b, b))
    rho = max(abs(np.linalg.eigvals(A)))
    n_steps = 120
    assert rho**n_steps < 1e-15  # initial condition forgotten

    mu = jnp.array([0.5, -1.0])
    pot = lambda x: 0.5 * m * jnp.sum((x - mu) ** 2)  # noqa: E731
    n_chains = 4000
    keys = jax.random.split(jax.random.key(1), n_chains)
    chain = jax.jit(
        jax.vmap(lambda k: underdamped.sample_chain(k, pot, jnp.zeros(2), h, g, n_steps, thinning=n_steps))
    )(keys)
    x = np.asarray(chain.z[:, -1, :], dtype=np.float64) - np.asarray(mu)
    v = np.asarray(chain.v[:, -1, :], dtype=np.float64)
    # pool the two iid coordinates: n = 8000 independent draws of (x, v)
    xs, vs = x.ravel(), v.ravel()
    n = xs.size
    emp = np.cov(np.stack([xs, vs]))
    # asymptotic sds of Gaussian sample (co)variances
    se = np.array(
        [
            [sigma[0, 0] * math.sqrt(2 / n), math.sqrt((sigma[0, 0] * sigma[1, 1] + sigma[0, 1] ** 2) / n)],
            [math.sqrt((sigma[0, 0] * sigma[1, 1] + sigma[0, 1] ** 2) / n), sigma[1, 1] * math.sqrt(2 / n)],
        ]
    )
    np.testing.assert_array_less(np.abs(emp - sigma), 4.0 * se)
    np.testing.assert_array_less(np.abs(xs.mean()), 4.0 * math.sqrt(sigma[0, 0] / n))
    np.testing.assert_array_less(np.abs(vs.mean()), 4.0 * math.sqrt(sigma[1, 1] / n))
    # power: the continuous-time answer diag(1/m, 1) is far away in the v-variance and covariance
    cont = np.diag([1.0 / m, 1.0])
    assert abs(sigma[0, 1] - cont[0, 1]) > 10 * se[0, 1]
    assert abs(sigma[1, 1] - cont[1, 1]) > 10 * se[1, 1]


def _numeric_cdf(potential, a, b, grid=20001):
    t = np.linspace(a, b, grid)
    dens = np.exp(-potential(t))
    cum = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(t))])
    return lambda x: np.interp(x, t, cum / cum[-1])


def _ks_distance(draws, cdf):
    x = np.sort(draws)
    n = x.size
    f = cdf(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(0, n) / n))


def test_projected_langevin_interval_matches_truncated_density():
    # U(theta) = theta^4/4 + theta on C = [-2, 1]: non-quadratic, exp(-U) is non-negligible at
    # both ends (normalised density ~0.04 at -2 and ~0.08 at 1), so the projection is active.
    a, b, h = -2.0, 1.0, 1e-3
    pot_np = lambda t: 0.25 * t**4 + t  # noqa: E731
    kernel = Langevin(potential_fn=lambda th: jnp.sum(0.25 * th**4 + th), step_size=h, domain=Box([a], [b]))
    # Relaxation time of the chain ~ 500 steps (second eigenvalue of a fine-grid transition
    # matrix, computed offline); keep one draw every 3000 steps (correlation ~ e^-6) and drop the
    # first two (burn-in from the default init, the box midpoint).
    n_chains, spacing, n_keep = 2000, 3000, 10
    mcmc = run(
        kernel,
        jax.random.key(2),
        num_samples=spacing * n_keep,
        num_chains=n_chains,
        chain_method="vectorized",
        thinning=spacing,
    )
    draws = np.asarray(mcmc.get_samples(group_by_chain=True), dtype=np.float64)
    assert draws.shape == (n_chains, n_keep, 1)
    draws = draws[:, 2:, 0].ravel()
    n = draws.size
    assert np.all((draws >= a) & (draws <= b))
    # atoms on the boundary: the projected discrete chain puts mass O(sqrt(h)) exactly on
    # {a, b} (~1e-3 and ~2.6e-3 at this h); they exist and are small.
    atoms = np.mean((draws == a) | (draws == b))
    assert 0.0 < atoms < 0.01
    cdf = _numeric_cdf(pot_np, a, b)
    d = _ks_distance(draws, cdf)
    # Kolmogorov: P(sqrt(n) D > 1.95) ~ 1e-3 for iid draws. The projected Euler scheme has an
    # O(sqrt(h)) weak error near the boundary: ~2e-3 in the CDF at h = 1e-3 for this potential
    # (fine-grid transition matrix, offline); we allow 5e-3 for it.
    tol = 1.95 / math.sqrt(n) + 5e-3
    assert d < tol
    # power: the wrong temperature (exp(-2U), e.g. noise sqrt(h) instead of sqrt(2h)) is rejected
    assert _ks_distance(draws, _numeric_cdf(lambda t: 2.0 * pot_np(t), a, b)) > 3.0 * tol


# ------------------------------------------------------------------------------------------
# chain methods, model form, functional core
# ------------------------------------------------------------------------------------------

CHAIN_METHODS = ["sequential", "parallel", "vectorized", jax.vmap]


def _kernel(kind, form):
    kw = {"friction": 1.5} if kind == "underdamped" else {}
    cls = UnderdampedLangevin if kind == "underdamped" else Langevin
    if form == "model":
        return cls(gauss_model, step_size=0.1, **kw)
    return cls(potential_fn=gauss_potential, step_size=0.1, domain=L2Ball(2, 10.0), **kw)


@pytest.mark.parametrize("kind", ["langevin", "underdamped"])
@pytest.mark.parametrize("form", ["potential", "model"])
def test_chain_methods_give_identical_draws(kind, form):
    n_chains = 2
    init = {} if form == "model" else {"init_params": jnp.array([[0.0, 0.0], [-1.0, 2.0]])}
    draws = []
    for cm in CHAIN_METHODS:
        with warnings.catch_warnings():
            # "parallel" falls back to "sequential" (with a warning) on fewer than 2 devices
            warnings.filterwarnings("ignore", message="There are not enough devices")
            mcmc = run(_kernel(kind, form), jax.random.key(3), num_samples=25, num_chains=n_chains, chain_method=cm, **init)
        s = mcmc.get_samples(group_by_chain=True)
        s = s["theta"] if form == "model" else s
        assert s.shape == (n_chains, 25, 2)
        draws.append(np.asarray(s))
    for other in draws[1:]:
        # the same computation on the same keys: identical up to XLA's float reassociation
        np.testing.assert_allclose(other, draws[0], rtol=0, atol=1e-5)
    # chains differ from each other (distinct keys / inits)
    assert np.abs(draws[0][0] - draws[0][1]).max() > 1e-2


@pytest.mark.parametrize("kind", ["langevin", "underdamped"])
def test_model_form_equals_potential_form_and_arviz(kind):
    import arviz as az

    kw = {"friction": 1.5} if kind == "underdamped" else {}
    cls = UnderdampedLangevin if kind == "underdamped" else Langevin
    x0 = {"theta": jnp.array([0.3, -0.7])}
    key = jax.random.key(4)
    m_model = run(cls(gauss_model, step_size=0.05, **kw), key, num_samples=40, init_params=x0)
    m_pot = run(cls(potential_fn=dict_potential, step_size=0.05, **kw), key, num_samples=40, init_params=x0)
    np.testing.assert_allclose(
        np.asarray(m_model.get_samples()["theta"]), np.asarray(m_pot.get_samples()["theta"]), atol=1e-5
    )
    idata = az.from_numpyro(m_model)
    assert "posterior" in idata.children and "sample_stats" in idata.children
    assert idata["posterior"]["theta"].shape == (1, 40, 2)
    assert idata["sample_stats"]["diverging"].dtype == bool
    assert not bool(idata["sample_stats"]["diverging"].any())
    # nothing data-dependent in the default export
    assert set(m_model.get_extra_fields()) == {"diverging"}
    assert "lp" not in idata["sample_stats"]


def test_functional_core_reproduces_numpyro_chain_and_thinning():
    key = jax.random.key(5)
    x0 = jnp.array([0.5, 0.5])
    # MCMC.run(key) with one chain: init splits key into (chain_key, init_key)
    chain_key = jax.random.split(key)[0]
    mcmc = run(Langevin(potential_fn=gauss_potential, step_size=0.1), key, num_samples=30, thinning=5, init_params=x0)
    ch = langevin.sample_chain(chain_key, gauss_potential, x0, 0.1, 30, thinning=5)
    np.testing.assert_array_equal(np.asarray(ch.z), np.asarray(mcmc.get_samples()))
    full = langevin.sample_chain(chain_key, gauss_potential, x0, 0.1, 30)
    np.testing.assert_array_equal(np.asarray(full.z[4::5]), np.asarray(ch.z))
    assert int(ch.last_state.i) == 30

    mcmc_u = run(
        UnderdampedLangevin(potential_fn=gauss_potential, step_size=0.1, friction=2.0),
        key,
        num_samples=30,
        init_params=x0,
        extra_fields=("v",),
    )
    chu = underdamped.sample_chain(chain_key, None, x0, 0.1, 2.0, 30, grad_fn=jax.grad(gauss_potential))
    np.testing.assert_array_equal(np.asarray(chu.z), np.asarray(mcmc_u.get_samples()))
    np.testing.assert_array_equal(np.asarray(chu.v), np.asarray(mcmc_u.get_extra_fields()["v"]))


def test_functional_step_formulas():
    # one step by hand, pytree position, projection after the noise
    grad_fn = lambda z: {"a": 2.0 * z["a"], "b": jnp.ones_like(z["b"])}  # noqa: E731
    z = {"a": jnp.array([0.5, -0.5]), "b": jnp.array(3.0)}
    key = jax.random.key(6)
    h = 0.1
    xi = gaussian_noise(key, (3,))  # ravel_pytree order: a (2), b (1)
    box = Box([-1.0, -1.0, -1.0], [1.0, 1.0, 1.0])
    new, info = langevin.build_kernel(grad_fn, h, project=box)(key, langevin.init(z))
    assert isinstance(info, langevin.LangevinInfo) and info._fields == ("diverging",)
    expect = np.clip(np.array([0.5 - h * 1.0, -0.5 + h * 1.0, 3.0 - h]) + math.sqrt(2 * h) * np.asarray(xi), -1, 1)
    np.testing.assert_allclose(np.concatenate([new.z["a"], new.z["b"][None]]), expect, rtol=1e-6)
    assert int(new.i) == 1 and not bool(new.diverging)
    # integer positions are promoted to float
    assert langevin.init(jnp.array([1, 2])).z.dtype == jnp.result_type(float)

    g = 0.7
    st = underdamped.init(z, velocity={"a": jnp.array([1.0, 0.0]), "b": jnp.array(-1.0)})
    new, info = underdamped.build_kernel(grad_fn, h, g)(key, st)
    assert isinstance(info, underdamped.UnderdampedLangevinInfo) and not bool(info.diverging)
    v_exp = np.array([1.0, 0.0, -1.0]) - h * (g * np.array([1.0, 0.0, -1.0]) + np.array([1.0, -1.0, 1.0]))
    v_exp = v_exp + math.sqrt(2 * g * h) * np.asarray(xi)
    x_exp = np.array([0.5, -0.5, 3.0]) + h * v_exp
    np.testing.assert_allclose(np.concatenate([new.v["a"], new.v["b"][None]]), v_exp, rtol=1e-5)
    np.testing.assert_allclose(np.concatenate([new.z["a"], new.z["b"][None]]), x_exp, rtol=1e-5)


def test_jit_model_args_rebuilds_potential_from_args():
    y1, y2 = jnp.array([1.0, 2.0, 3.0]), jnp.array([-4.0, -5.0, -6.0])
    key = jax.random.key(7)

    def draws(jit_args, y):
        mcmc = MCMC(Langevin(data_model, step_size=0.05), num_warmup=0, num_samples=200, progress_bar=False, jit_model_args=jit_args)
        mcmc.run(key, y)
        return np.asarray(mcmc.get_samples()["theta"]), mcmc

    a1, mcmc = draws(True, y1)
    b1, _ = draws(False, y1)
    np.testing.assert_allclose(a1, b1, atol=1e-5)
    mcmc.run(key, y2)  # same MCMC object, new data: must use the new potential
    a2 = np.asarray(mcmc.get_samples()["theta"])
    b2, _ = draws(False, y2)
    np.testing.assert_allclose(a2, b2, atol=1e-5)
    assert a2[-50:].mean() < -3.0 < 1.0 < a1[-50:].mean()


def test_model_postprocess_constrains_and_init_is_data_independent():
    def model(y):
        s = numpyro.sample("s", dist.LogNormal(0.0, 1.0))
        numpyro.factor("loss", -0.5 * jnp.sum(y**2) / s**2 - y.shape[0] * jnp.log(s))

    kern = Langevin(model, step_size=1e-3)
    key = jax.random.key(8)
    s1 = kern.init(key, 0, None, (jnp.ones(5),), {})
    s2 = kern.init(key, 0, None, (100.0 * jnp.ones(50),), {})
    # the initial point depends on the key and the prior only, not on the data
    np.testing.assert_array_equal(np.asarray(s1.z["s"]), np.asarray(s2.z["s"]))
    mcmc = run(kern, key, num_samples=20, y=jnp.ones(5))
    assert np.all(np.asarray(mcmc.get_samples()["s"]) > 0)  # constrained values
    assert kern.postprocess_fn((), {"y": jnp.ones(5)})({"s": jnp.array(0.0)})["s"] == pytest.approx(1.0)
    kp = Langevin(potential_fn=gauss_potential, step_size=0.1)
    assert kp.model is None
    z = {"theta": jnp.ones(2)}
    assert kp.postprocess_fn((), {})(z) is z


def test_init_to_value_and_domain_projection_of_strategy_init():
    kern = Langevin(gauss_model, step_size=0.01, domain=Box([-1.0, -1.0], [1.0, 1.0]), init_strategy=init_to_value(values={"theta": jnp.array([5.0, 0.5])}))
    st = kern.init(jax.random.key(9), 0, None, (), {})
    # the strategy's point is projected onto the domain (a data-independent map)
    np.testing.assert_allclose(np.asarray(st.z["theta"]), [1.0, 0.5])
    mcmc = run(kern, jax.random.key(9), num_samples=50)
    th = np.asarray(mcmc.get_samples()["theta"])
    assert th.min() >= -1.0 and th.max() <= 1.0


# ------------------------------------------------------------------------------------------
# divergence, debug, pickling, properties
# ------------------------------------------------------------------------------------------


def test_unstable_step_flags_diverging():
    # h m = 2.5 > 2: |1 - h m| = 1.5 > 1, the chain explodes geometrically
    h = 2.5 / M
    x0 = jnp.array([1.5, -1.5])
    mcmc = run(Langevin(potential_fn=gauss_potential, step_size=h), jax.random.key(10), num_samples=300, init_params=x0)
    div = np.asarray(mcmc.get_extra_fields()["diverging"])
    th = np.asarray(mcmc.get_samples())
    assert not div[0] and div[-1]
    first = int(np.argmax(div))
    assert np.all(div[first:])  # sticky
    # flagged by the default radius 1e6 long before float32 overflow
    assert np.all(np.isfinite(th[first])) and np.linalg.norm(th[first]) > 1e6 >= np.linalg.norm(th[first - 1])
    # with an infinite radius only non-finite positions count
    mcmc = run(
        Langevin(potential_fn=gauss_potential, step_size=h, divergence_radius=math.inf),
        jax.random.key(10),
        num_samples=300,
        init_params=x0,
    )
    div = np.asarray(mcmc.get_extra_fields()["diverging"])
    th = np.asarray(mcmc.get_samples())
    first = int(np.argmax(div))
    assert div[-1] and not np.all(np.isfinite(th[first])) and np.all(np.isfinite(th[first - 1]))
    # the same unstable step projected on a bounded domain never diverges
    mcmc = run(
        UnderdampedLangevin(potential_fn=gauss_potential, step_size=h, friction=1.0, domain=Box.cube(2, 3.0)),
        jax.random.key(10),
        num_samples=100,
        init_params=x0,
    )
    assert not np.any(np.asarray(mcmc.get_extra_fields()["diverging"]))


def test_debug_mode_adds_nonprivate_fields_only_on_request():
    assert LangevinState._fields == ("i", "z", "diverging", "rng_key")
    assert UnderdampedLangevinState._fields == ("i", "z", "v", "diverging", "rng_key")
    with pytest.warns(UserWarning, match="NOT covered"):
        kern = UnderdampedLangevin(potential_fn=gauss_potential, step_size=0.1, friction=1.0, debug=True)
    mcmc = run(kern, jax.random.key(11), num_samples=10, num_chains=2, chain_method="vectorized",
               init_params=jnp.zeros((2, 2)), extra_fields=("potential_energy", "grad_norm"))
    z = np.asarray(mcmc.get_samples())
    pe = np.asarray(mcmc.get_extra_fields()["potential_energy"])
    gn = np.asarray(mcmc.get_extra_fields()["grad_norm"])
    np.testing.assert_allclose(pe, 0.5 * M * np.sum((z - np.asarray(MU)) ** 2, axis=-1), rtol=1e-5)
    np.testing.assert_allclose(gn, M * np.linalg.norm(z - np.asarray(MU), axis=-1), rtol=1e-5)
    # same draws as the non-debug kernel
    plain = run(UnderdampedLangevin(potential_fn=gauss_potential, step_size=0.1, friction=1.0), jax.random.key(11),
                num_samples=10, num_chains=2, chain_method="vectorized", init_params=jnp.zeros((2, 2)))
    np.testing.assert_array_equal(z, np.asarray(plain.get_samples()))


def test_pickle_and_properties():
    kern = UnderdampedLangevin(gauss_model, step_size=0.02, friction=4.0)
    run(kern, jax.random.key(12), num_samples=5)
    k2 = pickle.loads(pickle.dumps(kern))
    assert k2.step_size == 0.02 and k2.friction == 4.0 and k2.model is gauss_model
    assert k2.integrated_time(1000) == pytest.approx(20.0)
    mcmc = run(k2, jax.random.key(12), num_samples=5)  # re-initialises after unpickling
    assert mcmc.get_samples()["theta"].shape == (5, 2)
    with pytest.raises(AttributeError):
        kern.step_size = 1.0
    assert Langevin(potential_fn=gauss_potential, step_size=0.5).integrated_time(10) == 5.0
    assert "step size" in kern.get_diagnostics_str(mcmc.last_state)
    # wrap_model (NumPyro 0.22 composite-kernel hook): a copy bound to the wrapped model
    wrapped = kern.wrap_model(lambda m: numpyro.handlers.scale(m, scale=1.0))
    assert wrapped.model is not gauss_model and kern.model is gauss_model
    a = run(wrapped, jax.random.key(13), num_samples=5).get_samples()["theta"]
    b = run(kern, jax.random.key(13), num_samples=5).get_samples()["theta"]
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)
    st = mcmc.last_state
    assert kern.refresh(st, (), {}) is st  # nothing data-dependent cached in the state


# ------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------


def test_num_warmup_rejected():
    for kern in (
        Langevin(potential_fn=gauss_potential, step_size=0.1),
        UnderdampedLangevin(gauss_model, step_size=0.1, friction=1.0),
    ):
        mcmc = MCMC(kern, num_warmup=10, num_samples=10, progress_bar=False)
        with pytest.raises(ValueError, match="num_warmup must be 0.*private data"):
            mcmc.run(jax.random.key(0), init_params={"theta": jnp.zeros(2)} if kern.model else jnp.zeros(2))


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, None, "a"])
def test_bad_step_size_and_friction(bad):
    with pytest.raises(ValueError, match="step_size"):
        Langevin(potential_fn=gauss_potential, step_size=bad)
    with pytest.raises(ValueError, match="step_size"):
        UnderdampedLangevin(potential_fn=gauss_potential, step_size=bad, friction=1.0)
    with pytest.raises(ValueError, match="friction"):
        UnderdampedLangevin(potential_fn=gauss_potential, step_size=0.1, friction=bad)
    if bad is not None:
        with pytest.raises(ValueError, match="step_size"):
            langevin.build_kernel(jax.grad(gauss_potential), bad)
        with pytest.raises(ValueError, match="friction"):
            underdamped.build_kernel(jax.grad(gauss_potential), 0.1, bad)


def test_bad_construction_arguments():
    with pytest.raises(ValueError, match="exactly one"):
        Langevin(step_size=0.1)
    with pytest.raises(ValueError, match="exactly one"):
        Langevin(gauss_model, potential_fn=gauss_potential, step_size=0.1)
    with pytest.raises(ValueError, match="domain must be"):
        Langevin(potential_fn=gauss_potential, step_size=0.1, domain=(0.0, 1.0))
    with pytest.raises(ValueError, match="divergence_radius"):
        Langevin(potential_fn=gauss_potential, step_size=0.1, divergence_radius=-1.0)
    with pytest.raises(ValueError, match="num_steps"):
        Langevin(potential_fn=gauss_potential, step_size=0.1).integrated_time(-3)


def test_bad_initial_points():
    box = Box([-1.0, -1.0], [1.0, 1.0])
    kern = Langevin(potential_fn=gauss_potential, step_size=0.1, domain=box)
    with pytest.raises(ValueError, match="init_params must lie in the domain"):
        run(kern, jax.random.key(0), num_samples=5, init_params=jnp.array([2.0, 0.0]))
    with pytest.raises(ValueError, match=r"init_params must lie in the domain.*\[1\]"):
        run(kern, jax.random.key(0), num_samples=5, num_chains=2, chain_method="vectorized",
            init_params=jnp.array([[0.0, 0.0], [0.0, 3.0]]))
    with pytest.raises(ValueError, match="dim=2"):
        run(kern, jax.random.key(0), num_samples=5, init_params=jnp.zeros(3))
    # potential_fn without init_params: the domain's default init is used, else an error
    mcmc = run(kern, jax.random.key(0), num_samples=5)
    assert mcmc.get_samples().shape == (5, 2)
    with pytest.raises(ValueError, match="init_params must be passed"):
        run(Langevin(potential_fn=gauss_potential, step_size=0.1), jax.random.key(0), num_samples=5)
    # the potential is never evaluated at the init (it reads the private data: refusing to run
    # would release a bit); a non-finite gradient makes the chain diverge, flagged from theta
    sqrt_pot = lambda th: -jnp.sum(jnp.sqrt(th))  # noqa: E731 - NaN gradient at th < 0
    mcmc = run(Langevin(potential_fn=sqrt_pot, step_size=0.1), jax.random.key(0), num_samples=5,
               init_params=jnp.array([1.0, -1.0]))
    assert np.all(np.asarray(mcmc.get_extra_fields()["diverging"]))
    # a non-finite or wrong-shaped START is a clear error (shapes and the start are public)
    with pytest.raises(ValueError, match="initial position given by init_params must be finite"):
        run(Langevin(potential_fn=gauss_potential, step_size=0.1), jax.random.key(0), num_samples=5,
            init_params=jnp.array([jnp.nan, 0.0]))
    mat = jnp.ones((3, 2))
    with pytest.raises(ValueError, match="do not fit the potential"):
        run(Langevin(potential_fn=lambda th: jnp.sum((mat @ th) ** 2), step_size=0.1), jax.random.key(0),
            num_samples=5, init_params=jnp.zeros(5))


def test_euclidean_domain_and_sample_chain_project_argument():
    kern = Langevin(potential_fn=gauss_potential, step_size=0.1, domain=Euclidean(2))
    assert kern.divergence_radius == 1e6
    assert Langevin(potential_fn=gauss_potential, step_size=0.1, domain=Box.cube(2, 1.0)).divergence_radius == math.inf
    ch = langevin.sample_chain(jax.random.key(0), gauss_potential, jnp.zeros(2), 0.3, 50, project=L2Ball(2, 0.5))
    assert np.all(np.linalg.norm(np.asarray(ch.z), axis=-1) <= 0.5 + 1e-6)
    with pytest.raises(ValueError, match="multiple of thinning"):
        langevin.sample_chain(jax.random.key(0), gauss_potential, jnp.zeros(2), 0.3, 10, thinning=3)
