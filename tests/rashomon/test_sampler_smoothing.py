"""The smoothed thresholded loss (seed-001 Thm 3.2 / D.7 with MAX): sensitivity and accuracy.

dp_infer.rashomon uses a sample-average version of E_xi max{L(theta + xi), L* + psi} with
offsets xi_j ~ N(0, lam^2) drawn once (data independent). Oracles (digest §6.5, §8 item 11):
* each summand is a thresholded gradient at a shifted point, so the gradient difference
  between neighbouring datasets never exceeds Delta_psi = G/n + sqrt(2 M psi);
* the exact smoothed loss (1-D quadrature) lies within psi + M lam^2 / 2 of the unsmoothed
  thresholded loss, and the sample average estimates it within its Monte Carlo error.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy import integrate

from dp_infer import losses
from dp_infer.losses import LossConstants
from dp_infer.potentials import thresholded_sensitivity
from dp_infer.rashomon.sampler import _smoothed_potential

# the perturbations are part of the function (data independent); a seed, not a key, at import: a JAX
# array built when the module is imported starts XLA's CPU backend in mutmut's forkserver, and
# every forked worker then deadlocks (docs/mutation-testing.md)
XI_SEED = 7919


def _xi_key():
    return jax.random.PRNGKey(XI_SEED)

N, PSI, LAM_S, K = 100, 0.01, 0.1, 64


def _loss():
    return losses.clipped_loss(lambda t, x, y: 0.5 * jnp.sum((t - x) ** 2), clip_norm=1e6, smoothness=1.0)


def _data(shift):
    d = np.zeros((N, 1))
    d[0, 0] = shift  # one record moved: means differ by 2/n when shift = 2 (worst case in [-1, 1])
    d[1:, 0] = np.linspace(-0.5, 0.5, N - 1)
    return d - d.mean() * 0.0


def test_smoothed_gradient_difference_never_exceeds_delta_psi():
    loss = _loss()
    XD, XD2 = _data(-1.0), _data(1.0)
    y = np.zeros(N)
    # thresholds: each dataset's own L* + psi (L* of the quadratic = its variance term)
    thr = [0.5 * float(np.mean((X[:, 0] - X[:, 0].mean()) ** 2)) + PSI for X in (XD, XD2)]
    U1 = _smoothed_potential(loss, XD, y, 1.0, thr[0], LAM_S, K, _xi_key(), 1)
    U2 = _smoothed_potential(loss, XD2, y, 1.0, thr[1], LAM_S, K, _xi_key(), 1)
    grid = jnp.linspace(-1.5, 1.5, 3001)[:, None]
    g1 = jax.vmap(jax.grad(U1))(grid)[:, 0]
    g2 = jax.vmap(jax.grad(U2))(grid)[:, 0]
    worst = float(jnp.max(jnp.abs(g1 - g2)))
    # data in [-1, 1]: per-example gradient difference G = 2, smoothness M = 1, strong convexity 1
    bound = thresholded_sensitivity(LossConstants(lipschitz=math.inf, grad_diff=2.0, smoothness=1.0,
                                                  strong_convexity=1.0), N, PSI)
    assert worst <= bound * (1 + 1e-4)
    assert worst >= 0.5 * (2.0 / N)  # the neighbours do move the gradient


def test_smoothed_loss_matches_quadrature_within_mc_error_and_the_bias_bound():
    loss = _loss()
    X = _data(0.3)
    y = np.zeros(N)
    m = X[:, 0].mean()
    c0 = 0.5 * float(np.mean((X[:, 0] - m) ** 2))
    thr = c0 + PSI
    U = _smoothed_potential(loss, X, y, 1.0, thr, LAM_S, K, _xi_key(), 1)
    for t in (m - 0.3, m - 0.1, m, m + 0.14, m + 0.5):
        f = lambda e: max(c0 + 0.5 * (t + e - m) ** 2, thr) * math.exp(-e * e / (2 * LAM_S**2)) / (
            LAM_S * math.sqrt(2 * math.pi))
        exact = integrate.quad(f, -10 * LAM_S, 10 * LAM_S, points=[m - t], limit=200)[0]
        var = integrate.quad(lambda e: (max(c0 + 0.5 * (t + e - m) ** 2, thr)) ** 2
                             * math.exp(-e * e / (2 * LAM_S**2)) / (LAM_S * math.sqrt(2 * math.pi)),
                             -10 * LAM_S, 10 * LAM_S, limit=200)[0] - exact**2
        got = float(U(jnp.array([t])))
        assert abs(got - exact) <= 4 * math.sqrt(max(var, 0.0) / K) + 1e-5  # 4 MC s.e. + float32
        unsmoothed = max(c0 + 0.5 * (t - m) ** 2, thr)
        assert abs(exact - unsmoothed) <= PSI + 1.0 * 1 * LAM_S**2 / 2 + 1e-12  # psi + M p lam^2 / 2


def test_sample_rashomon_with_gaussian_smoothing_matches_its_exact_target():
    """Through sample_rashomon: the draws follow exp(-beta mean_j max{L(theta + xi_j), L* + psi})
    with the run's own offsets xi_j (rebuilt from the seed as the sampler derives them), by exact
    1-D integration on a grid; 4 Monte-Carlo SE over independent chains."""
    from dp_infer import rashomon as R
    from dp_infer.randomness import secret_key

    rng = np.random.default_rng(2)
    X = rng.uniform(-0.5, 0.5, (N, 1))
    y = np.zeros(N)
    fn = lambda t, x, yy: 0.5 * jnp.sum((t - x) ** 2)  # noqa: E731
    loss = losses.PerExampleLoss("quad", fn, LossConstants(math.inf, 2.0, 1.0, 1.0), 1.0)
    psi, beta, lam, K, seed, chains = 0.05, 200.0, 0.05, 8, 11, 100
    res = R.sample_rashomon(loss, X, y, psi, mode="nonprivate", beta=beta, smoothing=lam, smoothing_samples=K,
                            horizon=2.0, num_chains=chains, num_draws=100, seed=seed)
    assert "Gaussian-smoothed threshold" in " ".join(res.privacy["assumptions"])
    key, _ = secret_key(seed)
    xi = np.asarray(lam * jax.random.normal(jax.random.split(key, 3)[1], (K, 1)))[:, 0]
    mu = X[:, 0].mean()
    thr = 0.5 * float(np.mean((X[:, 0] - mu) ** 2)) + psi  # L* + psi (the certified base equals L* here)
    grid = np.linspace(mu - 1.5, mu + 1.5, 30001)
    L = lambda t: 0.5 * np.mean((t[:, None] - X[None, :, 0]) ** 2, axis=1)  # noqa: E731
    U = beta * np.mean([np.maximum(L(grid + e), thr) for e in xi], axis=0)
    p = np.exp(-(U - U.min()))
    p /= p.sum()
    th = res.draws[:, res.burn_in:, 0]
    for f_grid, f_draw in ((grid, th), (np.abs(grid - mu) <= math.sqrt(2 * psi), np.abs(th - mu) <= math.sqrt(2 * psi))):
        exact = float(np.sum(p * f_grid))
        per_chain = f_draw.mean(axis=1)
        se = per_chain.std(ddof=1) / math.sqrt(chains)
        # ULA at h * beta * M_eff = 0.5: allowance 1% of the spread for the discretisation
        assert abs(per_chain.mean() - exact) <= 4 * se + 0.01 * math.sqrt(2 * psi), (per_chain.mean(), exact, se)
