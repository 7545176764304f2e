"""PDA-DPMD's gradient noise, measured, against the clipped mean gradient's sensitivity 2 C / n.

Oracle: each step releases the clipped mean gradient (replace-one sensitivity 2 C / n: one clipped
gradient of norm <= C replaced by another) plus N(0, sigma^2 I); T steps compose to
``mu = sqrt(T) (2 C / n) / sigma``-GDP, so the sigma that meets (eps, delta) is
``sigma = 2 C sqrt(T) / (n mu*)`` with mu* the largest mu whose exact Gaussian profile meets delta
at eps (60-digit mpmath bisection here, not the module's ``gdp_mu``).

To see the noise alone, the PRIVATE loss has gradient 0 everywhere (``0 * <theta, x>``), while the
mirror map comes from a public squared loss. Then, from the public minimiser theta_0:

* identity mirror, last iterate: ``(theta_0 - theta_T) / eta = sum_t b_t``, sd ``sqrt(T) sigma``;
* identity mirror, average output: ``(theta_0 - avg) / eta = sum_s (T - s + 1) / T b_s``, sd
  ``sigma sqrt(sum_k k^2) / T``;
* quadratic mirror, one step: ``H (theta_0 - theta_1) / eta = b_1`` with H the public Hessian
  ``X_p^T X_p / n_p + l2 I`` normalised by its smallest eigenvalue (computed here in NumPy).

Tolerance: 5 standard errors of a sample sd from m coordinates (``5 / sqrt(2 m)`` in log), with a
power check that 0.75x and 1.5x sigma lie outside it. Fixed seeds.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest

import dp_infer
from dp_infer.domains import L2Ball
from dp_infer.losses import LossConstants, PerExampleLoss
from dp_infer.mechanisms import mirror_descent as MD
from tests.support.mp_oracles import gdp_delta_mp, gdp_mu_for_delta_mp
from tests.support.noise_checks import assert_sd_with_power


def _zero_gradient_loss():
    return PerExampleLoss("zero", lambda t, x, y: 0.0 * jnp.dot(t, x),
                          LossConstants(lipschitz=1.0, grad_diff=2.0, smoothness=0.0), 1.0)


def _setup(d, n, n_pub, seed=0):
    rng = np.random.default_rng(seed)
    Xp = rng.normal(size=(n_pub, d))
    Xp /= np.linalg.norm(Xp, axis=1, keepdims=True)
    yp = np.clip(Xp @ np.full(d, 0.1), -1, 1)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    pub = dp_infer.squared(label_bound=1.0, domain=L2Ball(d, 10.0))
    return X, np.zeros(n), Xp, yp, pub


def _sigma(eps, delta, C, T, n):
    mu = gdp_mu_for_delta_mp(eps, delta)
    return 2.0 * C * math.sqrt(T) / (n * mu)


@pytest.mark.parametrize("output", ["last", "average"])
def test_identity_mirror_adds_the_gaussian_mechanism_noise_at_2c_over_n(output):
    d, n, T, C, eta, eps, delta = 400, 300, 3, 0.7, 0.05, 1.0, 1e-6
    X, y, Xp, yp, pub = _setup(d, n, 600)
    r = MD.pda_dpmd(_zero_gradient_loss(), X, y, Xp, yp, eps=eps, delta=delta, num_steps=T, step_size=eta,
                    clip_norm=C, public_loss=pub, mirror="identity", output=output, seed=4)
    theta0 = np.asarray(r.params["theta_public"])
    x = (theta0 - np.asarray(r.value)) / eta
    sigma = _sigma(eps, delta, C, T, n)
    factor = math.sqrt(T) if output == "last" else math.sqrt(sum(k * k for k in range(1, T + 1))) / T
    assert_sd_with_power(x, sigma * factor)                       # 5 se: 18% (d = 400)
    # the T events compose to the mu that meets the target exactly
    ev, count = r.events[0]
    assert count == T and ev.mu == pytest.approx(2 * C / (n * sigma), rel=1e-9)
    mu = math.sqrt(T) * ev.mu
    assert gdp_delta_mp(eps, mu) <= delta * (1 + 1e-9) and gdp_delta_mp(eps, mu * 1.001) > delta


def test_quadratic_mirror_preconditions_the_noise_by_the_public_hessian():
    d, n, n_pub, C, eta, eps, delta, l2 = 300, 200, 1000, 1.3, 0.02, 2.0, 1e-5, 1e-3
    X, y, Xp, yp, pub = _setup(d, n, n_pub, seed=1)
    r = MD.pda_dpmd(_zero_gradient_loss(), X, y, Xp, yp, eps=eps, delta=delta, num_steps=1, step_size=eta,
                    clip_norm=C, public_loss=pub, public_l2=l2, mirror="quadratic", output="last", seed=5)
    H = Xp.T @ Xp / n_pub + l2 * np.eye(d)             # Hessian of the public mean squared loss + ridge
    H /= np.linalg.eigvalsh(H)[0]                      # normalise=True: smallest eigenvalue 1
    b = H @ (np.asarray(r.params["theta_public"]) - np.asarray(r.value)) / eta
    assert_sd_with_power(b, _sigma(eps, delta, C, 1, n))         # 5 se: 20% (d = 300)
    # the noise is isotropic before preconditioning: its two halves in H's eigenbasis agree
    w, V = np.linalg.eigh(H)
    z = V.T @ b
    lo, hi = z[: d // 2], z[d // 2:]
    assert abs(math.log(np.sqrt(np.mean(lo ** 2)) / np.sqrt(np.mean(hi ** 2)))) < 5 * math.sqrt(2.0 / d)
