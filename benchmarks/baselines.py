"""Competitors of the posterior mode at equal (eps, delta), for the posterior-quality benchmark.

Every baseline spends a stated GDP budget ``mu`` (replace-one neighbours, n public) composed in
GDP (``mu^2 = sum mu_i^2``); nothing that steers it reads the private data except through an
accounted release. Keys are passed in (tests and benchmarks use fixed keys).

* :func:`dp_gd_metric` -- full-batch DP gradient descent in a fixed metric ``P = C C^T`` (P = I:
  plain DP-GD), released as the average of the iterates after burn-in. With learning time
  ``tau = eta T`` and path budget ``mu`` its gradient noise is ``sigma^2 eta = tau Delta^2 / mu^2``
  per unit of learning time: with ``tau`` equal to our chains' total time ``K beta t`` it spends
  exactly our privacy per unit of learning time (that is what "learning time matched" means here).
* :func:`newton_laplace_posterior` -- the noise-aware Gaussian (Laplace) posterior of logistic
  regression: private Newton steps (each releases the mean gradient and the mean Hessian with
  Gaussian noise), then a final release at the reached point whose known noise laws are
  integrated by imputation: a Gaussian with the sampling variance plus the privacy noise's.
  Any number of draws from it is post-processing.
* :func:`ssp_linear_regression` -- noisy sufficient statistics (X'X, X'y) for linear regression
  with a noise-aware conjugate posterior (the noise of X'y enters the likelihood exactly; the
  noise of X'X is integrated by imputation), Bernstein-Sheldon style; the noise-unaware posterior
  that plugs in the noisy statistics is returned beside it.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np


def gdp_split(mu: float, weights) -> list[float]:
    """Split a GDP budget: ``mu_i = mu sqrt(w_i / sum w)`` so that ``sum mu_i^2 = mu^2``."""
    w = np.asarray(weights, dtype=np.float64)
    if mu <= 0 or np.any(w <= 0):
        raise ValueError("mu and every weight must be > 0")
    return [float(mu * math.sqrt(v / w.sum())) for v in w]


# ------------------------------------------------------------------ DP-GD in a fixed metric


def dp_gd_metric(X, y, *, key, chol, sensitivity: float, mu: float, learning_time: float, step: float,
                 prior_precision, beta: float, burn_in: float = 0.5):
    """DP-GD on ``F(theta) = L(theta) + theta' Lambda theta / (2 beta)`` (the MAP objective of the
    tempered target) in the metric ``P = chol chol'``, i.e. plain GD on ``phi = chol^-1 theta``:
    ``phi <- phi - eta (chol' grad F(chol phi) + sigma xi)``.

    ``sensitivity``: ``sup ||chol' (grad l(z) - grad l(z'))|| / n`` (the P-metric Delta_P, or
    ``2 R / n`` with ``chol = I``); ``mu``: the GDP budget of the whole run;
    ``learning_time``: ``tau = eta T`` in units of the mean loss; ``step``: the largest ``eta``
    (T = ceil(tau / step)). Returns (average theta after ``burn_in`` of the steps, info dict).
    Privacy: T Gaussian mechanisms of sensitivity ``sensitivity`` and sd ``sigma``: ``mu``-GDP.
    """
    X = jnp.asarray(X, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    n, d = X.shape
    T = int(math.ceil(learning_time / step))
    eta = learning_time / T
    sigma = math.sqrt(T) * sensitivity / mu
    C = jnp.asarray(chol, jnp.float32)
    lam = jnp.asarray(np.broadcast_to(prior_precision, (d,)), jnp.float32)
    b = int(T * burn_in)

    def grad_F(theta):
        r = jax.nn.sigmoid(X @ theta) - y
        return X.T @ r / n + lam * theta / beta

    @jax.jit
    def run(k):
        def body(carry, kk):
            phi, acc = carry
            i, kk = kk
            g = C.T @ grad_F(C @ phi) + sigma * jax.random.normal(kk, (d,))
            phi = phi - eta * g
            acc = acc + jnp.where(i >= b, phi, 0.0)
            return (phi, acc), None

        (phi, acc), _ = jax.lax.scan(body, (jnp.zeros(d), jnp.zeros(d)),
                                     (jnp.arange(T), jax.random.split(k, T)))
        return C @ (acc / (T - b))

    theta = np.asarray(run(key), dtype=np.float64)
    return theta, {"steps": T, "step_size": eta, "sigma": sigma, "learning_time": learning_time, "mu": mu,
                   "noise_per_unit_time": sigma ** 2 * eta}


# ------------------------------------------------------------------ noise-aware Laplace posterior


def _sym_noise(key, d: int, sd: float) -> np.ndarray:
    E = np.triu(np.asarray(jax.random.normal(key, (d, d)), dtype=np.float64) * sd)
    return E + np.triu(E, 1).T


def _psd(S):
    w, V = np.linalg.eigh(0.5 * (S + S.T))
    return (V * np.maximum(w, 0.0)) @ V.T


def _grad_hess(Xn, yn, theta):
    from scipy.special import expit

    p = expit(Xn @ theta)
    n = Xn.shape[0]
    return Xn.T @ (p - yn) / n, (Xn * (p * (1 - p))[:, None]).T @ Xn / n


def newton_laplace_posterior(X, y, *, key, mu: float, prior_precision, row_norm: float, steps: int = 4,
                             final_share: float = 0.5, hessian_weight: float = 1.0, imputations: int = 200,
                             damp_final: bool = False, basis=None):
    """Noise-aware Gaussian posterior of Bayesian logistic regression at ``mu``-GDP (total).

    Releases (Gaussian mechanisms, replace-one, n public; rows of norm <= R checked): the mean
    gradient (sensitivity ``2 R / n``: ``|sigmoid - y| <= 1``) and the mean Hessian
    ``sum s(1-s) x x' / n`` on its upper triangle (Frobenius sensitivity ``2 (R^2 / 4) / n``).
    ``steps`` private Newton steps from ``theta = 0`` (data independent) share ``1 - final_share``
    of ``mu^2`` and reach ``theta_0``; a final release of ``(g_hat, H_hat)`` at ``theta_0`` with
    ``final_share`` of ``mu^2`` gives the one-step estimate ``theta_0 - A^-1 (g_hat + Lambda theta_0 / n)``,
    ``A = H_hat + Lambda / n`` (the earlier steps add the Hessian noise's expected spectral norm
    ``2 sqrt(d) sd_H`` to A, a data-independent damping). Gradient and Hessian budgets: ``mu_g^2 : mu_H^2 = 1 : hessian_weight``.

    Noise-awareness (post-processing of the releases): the true ``(g, H)`` at ``theta_0`` are
    ``(g_hat - e, H_hat - E)`` with ``(e, E)`` from the known noise laws; ``imputations`` draws
    of them, each followed by its Newton step and the Laplace covariance ``(n (H + Lambda / n))^-1``,
    give a Gaussian mixture whose mean and covariance are returned (moment matched). First order
    in ``theta_0 - theta_MAP`` (the earlier steps bring it close). ``damp_final``: add the same
    damping to every imputed curvature (not noise-aware in directions of curvature below the
    noise's scale: a regularised variant for high dimension).

    ``basis``: an orthonormal (d, r) basis of the span of the admissible rows (public). Gradients
    and Hessians have no component outside it, so the releases are made in its coordinates and
    the directions outside are the prior's exactly (an isotropic prior is required then).
    """
    if basis is not None:
        Q = np.asarray(basis, dtype=np.float64)
        lam0 = np.unique(np.asarray(prior_precision, dtype=np.float64))
        if lam0.size != 1:
            raise ValueError("basis= needs an isotropic prior (one prior_precision)")
        m, C, info = newton_laplace_posterior(np.asarray(X, dtype=np.float64) @ Q, y, key=key, mu=mu,
                                              prior_precision=float(lam0[0]), row_norm=row_norm, steps=steps,
                                              final_share=final_share, hessian_weight=hessian_weight,
                                              imputations=imputations, damp_final=damp_final)
        outside = (np.eye(Q.shape[0]) - Q @ Q.T) / float(lam0[0])
        return Q @ m, Q @ C @ Q.T + outside, {**info, "subspace_dim": int(Q.shape[1])}
    Xn = np.asarray(X, dtype=np.float64)
    yn = np.asarray(y, dtype=np.float64)
    n, d = Xn.shape
    lam = np.broadcast_to(np.asarray(prior_precision, dtype=np.float64), (d,))
    R = float(row_norm)
    if float(np.max(np.linalg.norm(Xn, axis=1))) > R * (1 + 1e-9):
        raise ValueError(f"a row has norm above row_norm = {R:g}")
    if not 0 < final_share <= 1 or (steps > 0 and final_share == 1):
        raise ValueError("final_share must lie in (0, 1) (or be 1 with steps = 0)")
    mu_pre = mu * math.sqrt(1 - final_share)
    mu_fin = mu * math.sqrt(final_share)
    pre = gdp_split(mu_pre, [1.0, hessian_weight] * steps) if steps else []
    fin = gdp_split(mu_fin, [1.0, hessian_weight])
    keys = jax.random.split(key, 2 * steps + 3)
    Lam_n = np.diag(lam) / n

    def release(theta, mu_g, mu_H, kg, kH):
        g, H = _grad_hess(Xn, yn, theta)
        sd_g = 2.0 * R / n / mu_g
        sd_H = 2.0 * (R * R / 4.0) / n / mu_H
        g_hat = g + sd_g * np.asarray(jax.random.normal(kg, (d,)), dtype=np.float64)
        return g_hat, H + _sym_noise(kH, d, sd_H), sd_g, sd_H

    theta = np.zeros(d)
    for s in range(steps):
        g_hat, H_hat, _, sd_pre = release(theta, pre[2 * s], pre[2 * s + 1], keys[2 * s], keys[2 * s + 1])
        A = _psd(H_hat) + 2.0 * math.sqrt(d) * sd_pre * np.eye(d) + Lam_n  # damped by the noise's scale
        theta = theta - np.linalg.solve(A, g_hat + lam * theta / n)
    g_hat, H_hat, sd_g, sd_H = release(theta, fin[0], fin[1], keys[-3], keys[-2])
    means, covs = [], []
    for kk in jax.random.split(keys[-1], imputations):
        ke, kE = jax.random.split(kk)
        g = g_hat - sd_g * np.asarray(jax.random.normal(ke, (d,)), dtype=np.float64)
        A = _psd(H_hat - _sym_noise(kE, d, sd_H)) + Lam_n
        if damp_final:
            A = A + 2.0 * math.sqrt(d) * sd_H * np.eye(d)
        Ainv = np.linalg.inv(A)
        means.append(theta - Ainv @ (g + lam * theta / n))
        covs.append(Ainv / n)
    means = np.asarray(means)
    cov = np.mean(covs, axis=0) + np.cov(means.T, bias=True)
    return means.mean(axis=0), 0.5 * (cov + cov.T), {
        "steps": steps, "final_share": final_share, "mu_pre": pre, "mu_final": fin, "sd_gradient": sd_g,
        "sd_hessian": sd_H, "imputations": imputations, "damp_final": damp_final}


def reachable_basis(vertex_rows, tol: float = 1e-9) -> np.ndarray:
    """An orthonormal basis of the span of some admissible rows (e.g. vertices; public)."""
    V = np.asarray(vertex_rows, dtype=np.float64)
    _, s, Wt = np.linalg.svd(V, full_matrices=False)
    return Wt[s > tol * s[0]].T


# ------------------------------------------------------------------ noisy sufficient statistics


def ssp_linear_regression(X, y, *, key, mu: float, row_norm: float, label_bound: float, prior_precision: float,
                          noise_var: float, imputations: int = 50, xy_weight: float = 1.0):
    """Linear regression ``y = x' theta + N(0, noise_var)`` from noisy sufficient statistics at ``mu``-GDP.

    Releases ``X'X`` (upper triangle, replace-one Frobenius sensitivity ``2 R^2``) and ``X'y``
    (sensitivity ``2 R B``; rows of norm <= R, |y| <= B, both checked) with Gaussian noise,
    budgets ``mu_XX^2 : mu_Xy^2 = 1 : xy_weight``. ``noise_var`` is declared (known).

    Posteriors (prior N(0, I / prior_precision)):
    * noise-aware: given ``XX`` the released ``b = X'y + e`` is ``N(XX theta, noise_var XX +
      s^2 I)`` exactly, so ``theta | b, XX`` is Gaussian; ``XX`` is unknown, integrated by
      ``imputations`` draws ``XX_j = PSD(XX_hat - E_j)`` with ``E_j`` the release's noise law
      (an approximation of Bernstein and Sheldon's Gibbs step). Returns the mixture's mean and
      covariance (moment matched) and per-imputation draws;
    * naive: the conjugate posterior with the noisy statistics plugged in as if exact.
    """
    Xn = np.asarray(X, dtype=np.float64)
    yn = np.asarray(y, dtype=np.float64)
    n, d = Xn.shape
    R, B = float(row_norm), float(label_bound)
    if float(np.max(np.linalg.norm(Xn, axis=1))) > R * (1 + 1e-9) or float(np.max(np.abs(yn))) > B * (1 + 1e-9):
        raise ValueError("rows must have norm <= row_norm and |y| <= label_bound")
    mu_xx, mu_xy = gdp_split(mu, [1.0, xy_weight])
    s_xx = 2.0 * R * R / mu_xx
    s_xy = 2.0 * R * B / mu_xy
    k1, k2, k3 = jax.random.split(key, 3)
    XX_hat = Xn.T @ Xn + _sym_noise(k1, d, s_xx)
    b = Xn.T @ yn + s_xy * np.asarray(jax.random.normal(k2, (d,)), dtype=np.float64)
    Lam = prior_precision * np.eye(d)

    def conditional(XX):
        # b | theta ~ N(XX theta, V), V = noise_var XX + s_xy^2 I; prior N(0, Lam^-1)
        V = noise_var * XX + s_xy ** 2 * np.eye(d)
        Vi_XX = np.linalg.solve(V, XX)
        prec = XX @ Vi_XX + Lam
        cov = np.linalg.inv(prec)
        return cov @ (Vi_XX.T @ b), 0.5 * (cov + cov.T)

    means, covs = [], []
    for kk in jax.random.split(k3, imputations):
        XX_j = _psd(XX_hat - _sym_noise(kk, d, s_xx))
        m, c = conditional(XX_j)
        means.append(m)
        covs.append(c)
    means = np.asarray(means)
    mean = means.mean(axis=0)
    cov = np.mean(covs, axis=0) + np.cov(means.T, bias=True)
    XXp = _psd(XX_hat)
    naive_prec = XXp / noise_var + Lam
    naive_cov = np.linalg.inv(naive_prec)
    naive_mean = naive_cov @ b / noise_var
    return {"mean": mean, "cov": cov, "naive_mean": naive_mean, "naive_cov": naive_cov,
            "sd_xx": s_xx, "sd_xy": s_xy, "mu_xx": mu_xx, "mu_xy": mu_xy}


def conjugate_linear_posterior(X, y, *, prior_precision: float, noise_var: float):
    """The exact non-private posterior of Bayesian linear regression (known noise variance)."""
    Xn = np.asarray(X, dtype=np.float64)
    prec = Xn.T @ Xn / noise_var + prior_precision * np.eye(Xn.shape[1])
    cov = np.linalg.inv(prec)
    return cov @ Xn.T @ np.asarray(y, dtype=np.float64) / noise_var, cov
