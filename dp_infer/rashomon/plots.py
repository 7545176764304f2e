"""Plots of Rashomon measures (matplotlib): viable prediction ranges, model class reliance
intervals, the variable importance cloud and coefficient ranges. Each takes a
:class:`~dp_infer.rashomon.measures.RashomonMeasures` and an optional ``ax``; returns the axes."""

from __future__ import annotations

import numpy as np


def _axes(ax, figsize):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=figsize)
    return ax


def _need(measures, attr, what):
    if getattr(measures, attr) is None:
        raise ValueError(f"these measures hold no {what}: compute them on public rows"
                         + (" with labels (y_eval)" if attr == "reliance" else ""))
    return getattr(measures, attr)


def plot_prediction_ranges(measures, ax=None, *, max_rows: int = 300, label=None, color="C0"):
    """Per-row viable prediction range (min to max over the draws), rows sorted by midpoint."""
    pr = _need(measures, "prediction_ranges", "prediction ranges")
    ax = _axes(ax, (8, 4))
    lo, hi = pr["low"], pr["high"]
    idx = np.argsort(0.5 * (lo + hi))
    if len(idx) > max_rows:
        idx = idx[np.linspace(0, len(idx) - 1, max_rows).astype(int)]
    x = np.arange(len(idx))
    ax.vlines(x, lo[idx], hi[idx], color=color, lw=1, label=label)
    ax.set_xlabel("evaluation rows (sorted by the middle of the range)")
    ax.set_ylabel("P(y = 1)" if measures.task == "classification" else "prediction")
    ax.set_title("viable prediction ranges over the draws")
    return ax


def plot_model_class_reliance(measures, ax=None, *, offset: float = 0.0, label=None, color="C0"):
    """MCR- to MCR+ per feature (thin line) with the 2.5-97.5% range over draws (thick)."""
    r = _need(measures, "reliance", "model class reliance")
    ax = _axes(ax, (7, 0.35 * len(r["feature_names"]) + 1.5))
    y = np.arange(len(r["feature_names"])) + offset
    ax.hlines(y, r["mcr_minus"], r["mcr_plus"], color=color, lw=1)
    ax.hlines(y, r["q"][0], r["q"][-1], color=color, lw=5, label=label)
    ax.axvline(1.0 if r["kind"] == "ratio" else 0.0, color="grey", lw=0.8)
    ax.set_yticks(np.arange(len(r["feature_names"])), r["feature_names"])
    ax.set_xlabel("model reliance (" + ("loss ratio" if r["kind"] == "ratio" else "loss difference")
                  + ", swap vs original, loss without penalty)")
    ax.set_title("model class reliance: [MCR-, MCR+] over the draws")
    return ax


def plot_importance_cloud(measures, ax=None, *, features=None, max_points: int = 2000, color="C0",
                          label=None, seed: int | None = None):
    """The variable importance cloud: with ``features=(i, j)`` the cloud projected on two
    features (scatter, as in Dong and Rudin); otherwise one jittered strip per feature.
    ``seed``: of the picture's jitter and thinning only (post-processing of released draws; None:
    fresh each call)."""
    r = _need(measures, "reliance", "importance cloud")
    cloud = r["cloud"]
    rng = np.random.default_rng(seed)  # jitter and thinning of the picture only
    if cloud.shape[0] > max_points:
        cloud = cloud[rng.choice(cloud.shape[0], max_points, replace=False)]
    names = r["feature_names"]
    if features is not None:
        i, j = (int(f) for f in features)
        ax = _axes(ax, (5, 5))
        ax.scatter(cloud[:, i], cloud[:, j], s=4, alpha=0.4, color=color, label=label)
        ax.set_xlabel(f"reliance on {names[i]}")
        ax.set_ylabel(f"reliance on {names[j]}")
    else:
        ax = _axes(ax, (7, 0.35 * len(names) + 1.5))
        for k in range(cloud.shape[1]):
            ax.scatter(cloud[:, k], k + 0.25 * (rng.random(cloud.shape[0]) - 0.5), s=3, alpha=0.3,
                       color=color, label=label if k == 0 else None)
        ax.set_yticks(np.arange(len(names)), names)
        ax.set_xlabel("model reliance of each draw")
    ax.set_title("variable importance cloud")
    return ax


def plot_coefficient_ranges(measures, ax=None, *, offset: float = 0.0, label=None, color="C0"):
    """Per coefficient: 2.5-97.5% range (thick), min-max (thin), mean (tick)."""
    cr = measures.coefficient_ranges
    names = measures.feature_names
    ax = _axes(ax, (7, 0.35 * len(names) + 1.5))
    y = np.arange(len(names)) + offset
    ax.hlines(y, cr["low"], cr["high"], color=color, lw=1)
    ax.hlines(y, cr["q_low"], cr["q_high"], color=color, lw=5, label=label)
    ax.plot(cr["mean"], y, "k|")
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(np.arange(len(names)), names)
    ax.set_xlabel("coefficient")
    ax.set_title("coefficient ranges over the draws")
    return ax
