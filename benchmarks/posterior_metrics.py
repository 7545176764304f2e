"""Held-out metrics of a posterior over logistic-regression coefficients (benchmark helpers).

* accuracy of the posterior mean (a point estimate);
* posterior-predictive probabilities ``p(y = 1 | x) = E_theta sigmoid(x' theta)`` averaged over
  the draws, their log loss and expected calibration error (ECE: ``sum_b (n_b / n) |mean(y)_b -
  mean(p)_b|`` over ``bins`` equal-width probability bins, the usual definition).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from dp_infer.infer.prediction import expected_calibration_error, log_loss  # noqa: F401 (re-exported)


def predictive_probabilities(draws, X, max_draws: int = 2000) -> np.ndarray:
    """``E sigmoid(x' theta)`` over (at most ``max_draws`` evenly spaced) draws, shape (n,)."""
    T = np.asarray(draws, dtype=np.float64).reshape(-1, np.shape(draws)[-1])
    if T.shape[0] > max_draws:
        T = T[np.linspace(0, T.shape[0] - 1, max_draws).astype(int)]
    X = np.asarray(X, dtype=np.float64)
    acc = np.zeros(X.shape[0])
    for i in range(0, T.shape[0], 250):  # chunks: n x 250 at a time
        acc += expit(X @ T[i:i + 250].T).sum(axis=1)
    return acc / T.shape[0]


def accuracy_of(theta, X, y) -> float:
    return float(np.mean((np.asarray(X) @ np.asarray(theta) > 0) == (np.asarray(y) > 0.5)))


def posterior_summary(draws, X_test, y_test) -> dict:
    """Accuracy of the posterior mean, predictive log loss and ECE on held-out rows."""
    flat = np.asarray(draws, dtype=np.float64).reshape(-1, np.shape(draws)[-1])
    p = predictive_probabilities(flat, X_test)
    return {"accuracy_posterior_mean": accuracy_of(flat.mean(axis=0), X_test, y_test),
            "predictive_log_loss": log_loss(p, y_test), "predictive_ece": expected_calibration_error(p, y_test),
            "predictive_accuracy": float(np.mean((p > 0.5) == (np.asarray(y_test) > 0.5)))}


def point_summary(theta, X_test, y_test) -> dict:
    """The same metrics for a point estimate (plug-in probabilities)."""
    p = expit(np.asarray(X_test, dtype=np.float64) @ np.asarray(theta, dtype=np.float64))
    return {"accuracy": accuracy_of(theta, X_test, y_test), "log_loss": log_loss(p, y_test),
            "ece": expected_calibration_error(p, y_test)}
