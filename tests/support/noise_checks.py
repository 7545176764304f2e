"""Shared statistical checks of a kernel's injected noise (used by the kernels' oracle tests)."""

from __future__ import annotations

import math

import numpy as np


def assert_fresh_and_independent(xi: np.ndarray, z: float = 5.0) -> None:
    """Standardised noise ``xi`` of shape (chains, steps, dim): no lag-1 correlation within a chain
    (fresh noise at every step) and none between the first two chains (independent chains).

    The tolerance is ``z`` standard deviations of a sample correlation of independent series,
    1 / sqrt(steps).
    """
    chains, steps, dim = xi.shape
    tol = z / math.sqrt(steps)
    for c in range(chains):
        for j in range(dim):
            s = xi[c, :, j]
            assert abs(np.corrcoef(s[:-1], s[1:])[0, 1]) < tol, ("lag-1 correlation", c, j)
    for j in range(dim):
        assert abs(np.corrcoef(xi[0, :, j], xi[1, :, j])[0, 1]) < tol, ("chains 0 and 1 correlated", j)


def assert_iid_gaussian(draws, mean, var: float, z: float = 5.0, n_eff: int | None = None) -> None:
    """Draws (n, d) against N(mean, var I) with independent coordinates: the mean, the variances and
    the covariances, each within ``z`` standard errors (``n_eff`` replaces n for correlated draws)."""
    x = np.asarray(draws, dtype=np.float64)
    n, d = x.shape
    n = n if n_eff is None else n_eff
    np.testing.assert_array_less(np.abs(x.mean(axis=0) - np.asarray(mean, dtype=np.float64)), z * math.sqrt(var / n))
    cov = np.cov(x, rowvar=False)
    np.testing.assert_array_less(np.abs(np.diag(cov) - var), z * var * math.sqrt(2.0 / (n - 1)))
    np.testing.assert_array_less(np.abs(cov[~np.eye(d, dtype=bool)]), z * var / math.sqrt(n))


def assert_sd_with_power(x, sd_stated: float, z: float = 5.0) -> None:
    """Zero-mean noise ``x`` (any shape, independent entries) has the root-mean-square ``sd_stated``:
    ``|log(rms / sd_stated)| < z / sqrt(2 m)`` (the log-sd's standard error for m Gaussian entries),
    and the same sample would fail at 0.75x and at 1.5x the stated sd (the check has power)."""
    x = np.asarray(x, dtype=np.float64)
    tol = z / math.sqrt(2 * x.size)
    sd = math.sqrt(float(np.mean(x ** 2)))
    assert abs(math.log(sd / sd_stated)) < tol, (sd, sd_stated, tol)
    for wrong in (0.75 * sd_stated, 1.5 * sd_stated):
        assert abs(math.log(sd / wrong)) > tol, wrong
