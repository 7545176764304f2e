"""AdaSSP's three released statistics, their noise measured against the sensitivities it states.

AdaSSP (Wang 2018, Alg. 2) releases, each by a Gaussian mechanism with an equal share ``mu / sqrt(3)``
of the GDP budget ``mu`` (``mu`` from the exact Gaussian profile at the target, here by 60-digit mpmath
bisection, :func:`tests.support.mp_oracles.gdp_mu_for_delta_mp`), with replace-one l2 sensitivities
derived here for rows ``||x|| <= B`` and labels ``|y| <= B_y``:

* ``lambda_min(X^T X)``: ``B^2`` (Weyl: ``||x x^T - x' x'^T||_2 <= B^2``);
* the upper triangle of ``X^T X`` (diagonal included), mirrored: ``sqrt(2) B^2``
  (``||x x^T - x' x'^T||_F^2 = |x|^4 + |x'|^4 - 2 (x.x')^2 <= 2 B^4``);
* ``X^T y``: ``2 B B_y``.

The mechanism solves ``(XtX_noisy + lambda I) theta = Xty_noisy``; the test records the two arguments of
that solve (post-processing of the three releases, nothing else) and measures, on data whose ``X^T X =
k B^2 I`` and ``X^T y`` are known exactly:

* the off-diagonal of ``A - X^T X``: sd ``s2`` (and A exactly symmetric: one draw per pair, mirrored);
  the diagonal's spread around its mean within a release: sd ``s2`` too;
* ``rhs - X^T y``: sd ``s3``;
* ``lambda``, the mean of ``diag(A - X^T X)`` minus its noise: Wang's ridge ``s2 sqrt(d log(2 d^2 / rho))
  - (lambda_min + s1 z - s1 Phi^{-1}(1 - rho / 3))`` (both maxima are inactive here), whose spread
  over releases gives ``s1`` (``var = s1^2 + s2^2 / d``) and whose mean checks the ridge formula.

Tolerances: 5 standard errors of a sample sd (``1 / sqrt(2 m)`` in log), stated at each check; a
power check that 0.75x and 1.5x the stated scale lie outside them. Fixed seeds.
"""

import math

import numpy as np
import pytest
from scipy import special

from dp_infer.mechanisms import linear_regression as LR
from tests.support.mp_oracles import gdp_delta_mp, gdp_mu_for_delta_mp


def _sd_ok(sample_sd, m, sigma):
    """|log(sd / sigma)| within 5 se of a sample sd from m draws, and power at 0.75x / 1.5x."""
    tol = 5.0 / math.sqrt(2 * m)
    assert abs(math.log(sample_sd / sigma)) < tol, (sample_sd, sigma, tol)
    assert abs(math.log(0.75)) > tol + 1e-12 and abs(math.log(1.5)) > tol   # a mis-scaled sigma would fail
    for wrong in (0.75 * sigma, 1.5 * sigma):
        assert abs(math.log(sample_sd / wrong)) >= tol, wrong


def _data(d, k, B, By):
    X = np.repeat(B * np.eye(d), k, axis=0)            # X^T X = k B^2 I, rows of norm B
    y = np.full(d * k, 0.5 * By)                       # X^T y = k B By / 2 per coordinate
    return X, y


@pytest.fixture
def solves(monkeypatch):
    rec = []
    real = np.linalg.solve

    def spy(A, b):
        rec.append((np.array(A), np.array(b)))
        return real(A, b)

    monkeypatch.setattr(np.linalg, "solve", spy)
    return rec


def test_adassp_releases_each_statistic_with_the_noise_of_its_sensitivity(solves):
    d, B, By, eps, delta, rho = 20, 2.0, 3.0, 3.0, 1e-6, 0.05
    mu = gdp_mu_for_delta_mp(eps, delta)
    mu_i = mu / math.sqrt(3.0)
    s1, s2, s3 = B * B / mu_i, math.sqrt(2.0) * B * B / mu_i, 2.0 * B * By / mu_i
    # lambda_min = k B^2 >= 10 s1: lambda_lo = lambda_min + s1 (z - 2.13) > 0 unless z < -7.8, and the ridge
    # s2 sqrt(d log(2 d^2 / rho)) = 19.7 s1 exceeds lambda_lo unless z > 11.8: neither maximum is active
    k = int(math.ceil(10 * s1 / (B * B)))
    X, y = _data(d, k, B, By)
    xtx, xty = X.T @ X, X.T @ y
    R = 400
    lams, offd, rhs_noise, diag_dev = [], [], [], []
    for s in range(R):
        r = LR.adassp(X, y, eps=eps, delta=delta, row_norm=B, label_bound=By, rho=rho, seed=s)
        A, rhs = solves[-1]
        E = A - xtx
        assert np.array_equal(A, A.T)                  # mirrored: one draw per pair, bit for bit
        iu = np.triu_indices(d, 1)
        offd.append(E[iu])
        rhs_noise.append(rhs - xty)
        lams.append(float(np.mean(np.diag(E))))
        diag_dev.append(np.diag(E) - lams[-1])         # the diagonal's own noise (lambda is common to it)
    assert len(solves) == R
    offd, rhs_noise, lams = np.concatenate(offd), np.concatenate(rhs_noise), np.array(lams)
    _sd_ok(math.sqrt(float(np.mean(offd ** 2))), offd.size, s2)            # 5 se: 1.1%
    _sd_ok(math.sqrt(float(np.mean(rhs_noise ** 2))), rhs_noise.size, s3)  # 5 se: 4.0%
    # the diagonal is drawn once too (sd s2, not 2 s2): pooled within-release sd, R (d - 1) degrees of freedom
    dd = np.concatenate(diag_dev)
    _sd_ok(math.sqrt(float(np.sum(dd ** 2)) / (R * (d - 1))), R * (d - 1), s2)   # 5 se: 4.1%
    # lambda per release = ridge - (lambda_min + s1 z - s1 c) + s2 * (mean of d diagonal draws)
    s1_hat = math.sqrt(float(np.var(lams, ddof=1)) - s2 * s2 / d)
    _sd_ok(s1_hat, R, s1)                                                   # 5 se: 18%
    K = math.sqrt(d * math.log(2.0 * d * d / rho))
    c = float(special.ndtri(1.0 - rho / 3.0))
    mean_lam = s2 * K - (k * B * B - s1 * c)
    assert abs(float(np.mean(lams)) - mean_lam) < 5 * math.sqrt(s1 * s1 + s2 * s2 / d) / math.sqrt(R)
    # the three Gaussian mechanisms compose to mu-GDP, which meets (eps, delta) (exact profile) tightly
    mus = [e.mu for e, _ in r.events]
    assert mus == pytest.approx([B * B / s1, math.sqrt(2) * B * B / s2, 2 * B * By / s3], rel=1e-9)
    tot = math.sqrt(sum(m * m for m in mus))
    assert gdp_delta_mp(eps, tot) <= delta * (1 + 1e-9) and gdp_delta_mp(eps, tot * 1.001) > delta


def test_pure_adassp_runs_the_upstream_at_its_share_of_the_budget(solves):
    d, B, By, eps, f = 40, 1.0, 1.0, 2.0, 0.1
    X, y = _data(d, 10, B, By)
    xtx = X.T @ X
    m = []
    for s in range(5):
        r = LR.pure_adassp(X, y, eps=eps, radius=5.0, row_norm=B, label_bound=By, eps_prime_fraction=f, seed=s)
        E = solves[-1][0] - xtx
        m.append(E[np.triu_indices(d, 1)])
    x = np.concatenate(m)
    delta_a = math.exp(r.params["upstream"]["log_delta"])
    mu = gdp_mu_for_delta_mp((1 - f) * eps, delta_a, dps=80)
    _sd_ok(math.sqrt(float(np.mean(x ** 2))), x.size, math.sqrt(2.0) * B * B * math.sqrt(3.0) / mu)  # 5 se: 5.7%
    assert r.is_pure and r.epsilon() == pytest.approx(eps, rel=1e-12)
