"""Choosing the per-example gradient clip of a NumPyro model, and counting how often it bites.

``fit(model=...)`` clips each per-example gradient of the negative log-likelihood at ``clip_norm``
(the sensitivity is ``2 clip_norm / n``). A clip far below the gradients the data produce biases
the target: a Poisson regression clipped at 1 on counts in the tens fits an intercept several
times too small (docs/how-to/clipping.md). Two tools:

* :func:`default_clip_norm` -- a default from the likelihood and the DECLARED bounds of the data
  (``bounds={"x_norm": R, "y_max": Y}``, public knowledge, never read from the data). For a
  linear predictor ``eta = a + <x, b>`` (plus one-hot group effects), the gradient of
  ``-log p(y | eta)`` is ``s(y, eta) * d eta / d theta`` with ``||d eta / d theta|| <= sqrt(1 + R^2)``
  for an intercept and slopes; ``|s|`` is at most 1 for Bernoulli, the total count for Binomial,
  ``sqrt 2`` for Categorical (``||e_y - p||``) and ``max(Y, rate)`` for Poisson. So
  ``clip_norm = s_max sqrt(1 + R^2)`` (R = 1 unless declared). Poisson without ``y_max`` is
  refused with the reason, before any budget is charged (the documented trap); other likelihoods
  with an unbounded score (Normal, StudentT, ...) keep clip_norm = 1 with a loud warning.
* :func:`private_clip_count` -- how many rows the clip touches at the released posterior mean,
  released with Gaussian noise (a count has replace-one sensitivity 1) and charged as part of the
  run's own (eps, delta): :func:`split_budget` takes a small share of mu^2 for it before planning.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers

from .._validation import check_positive
from ..privacy.conversions import gdp_epsilon, gdp_mu
from ..privacy.events import GdpEvent
from ..randomness import gaussian_noise

__all__ = ["default_clip_norm", "split_budget", "private_clip_count", "private_example_clip_count",
           "check_count_share", "count_part_appended", "DEFAULT_COUNT_SHARE", "BOUND_KEYS"]

#: share of the run's mu^2 (GDP) spent on the clipped-row count: the run keeps sqrt(0.95) of its mu
#: (beta about 2.5% smaller); at eps = 1, delta = 1e-5 the count's noise sd is about 16 rows
DEFAULT_COUNT_SHARE = 0.05
BOUND_KEYS = ("x_norm", "y_max")

_BOUNDED = {"Bernoulli": 1.0, "Categorical": math.sqrt(2.0)}


def _base(fn):
    while hasattr(fn, "base_dist"):
        fn = fn.base_dist
    return fn


def _family(name: str) -> str:
    for fam in ("Bernoulli", "Binomial", "Categorical", "Poisson"):
        if name.startswith(fam):
            return fam
    return name


def check_bounds(bounds) -> dict:
    if bounds is None:
        return {}
    if not isinstance(bounds, dict):
        raise ValueError(f"bounds must be a dict with keys among {BOUND_KEYS}, got {type(bounds).__name__}")
    unknown = [k for k in bounds if k not in BOUND_KEYS]
    if unknown:
        raise ValueError(f"bounds: unknown key(s) {unknown}; allowed: {BOUND_KEYS}")
    return {k: check_positive(f"bounds[{k!r}]", v) for k, v in bounds.items()}


def likelihoods(model, num_features: int, x_name: str = "X", y_name: str = "y") -> dict[str, Any]:
    """The observed sites' distributions of ``model``, read on one public placeholder row (never
    on the data)."""
    kw = {x_name: jnp.zeros((1, num_features)), y_name: jnp.zeros((1,))}
    try:
        tr = handlers.trace(handlers.seed(model, jax.random.key(1))).get_trace(**kw)
    except Exception as e:  # noqa: BLE001 - loss_from_model gives the full message
        raise ValueError(f"the model could not be traced with placeholder data to read its likelihood: "
                         f"{type(e).__name__}: {e}") from None
    return {k: _base(s["fn"]) for k, s in tr.items() if s["type"] == "sample" and s.get("is_observed")}


def default_clip_norm(model, num_features: int, bounds=None, *, x_name: str = "X",
                      y_name: str = "y") -> tuple[float, str]:
    """``(clip_norm, reason)`` from the likelihood family and the declared ``bounds`` (see the
    module docstring); a ValueError naming the site and the remedy for an unbounded score."""
    b = check_bounds(bounds)
    R = b.get("x_norm", 1.0)
    s_max = 0.0
    parts = []
    for site, fn in likelihoods(model, num_features, x_name, y_name).items():
        name = type(fn).__name__
        fam = _family(name)
        if fam in _BOUNDED:
            s = _BOUNDED[fam]
        elif fam == "Binomial":
            s = float(np.max(np.asarray(fn.total_count)))
        elif fam == "Poisson":
            if "y_max" not in b:
                raise ValueError(f"clip_norm: the likelihood of site {site!r} is Poisson, whose per-example gradient "
                                 "(y - rate) x grows with the count, so no clip is safe by default: declare a public "
                                 "bound on the counts, bounds={'y_max': Y} (clip_norm = Y sqrt(1 + x_norm^2)), or "
                                 "pass clip_norm= yourself (docs/how-to/clipping.md)")
            s = b["y_max"]
        else:  # Normal, StudentT, ...: no bound on the score; warn loudly and keep the old default
            warnings.warn(f"clip_norm: the likelihood of site {site!r} is {name}, whose per-example gradient has no "
                          "bound: the default clip_norm = 1 is a guess, and a clip far below the gradients biases the "
                          "target. Pass clip_norm= from public knowledge of the residual scale (the run reports a "
                          "private count of the rows it clips; docs/how-to/clipping.md)", UserWarning, stacklevel=4)
            return 1.0, f"no default for {name} (score unbounded): clip_norm = 1 used, with a warning"
        s_max = max(s_max, s)
        parts.append(f"{site}: {fam} (|score| <= {s:g})")
    C = s_max * math.sqrt(1.0 + R * R)
    reason = (f"default from the likelihood ({'; '.join(parts)}) and rows of norm <= {R:g}"
              f"{' (declared)' if 'x_norm' in b else ' (assumed: declare bounds={x_norm: R})'}: "
              f"clip_norm = {s_max:g} x sqrt(1 + {R:g}^2) = {C:.4g}")
    return C, reason


def split_budget(eps: float, delta: float, share: float) -> tuple[float, float]:
    """``(eps_run, mu_count)``: the run is planned at ``eps_run`` so that the run (GDP ``mu_run``)
    and the count (``mu_count``) compose to the user's (eps, delta): ``mu_run^2 + mu_count^2 = mu^2``."""
    if not 0 <= share < 1:
        raise ValueError(f"clip_count_share must lie in [0, 1), got {share!r}")
    mu = gdp_mu(eps, delta)
    if share == 0:
        return eps, 0.0
    return gdp_epsilon(math.sqrt(1.0 - share) * mu, delta), math.sqrt(share) * mu


def check_count_share(share) -> float:
    """``clip_count_share`` checked (a number in [0, 1)), one line naming it, before anything is charged."""
    if isinstance(share, bool) or not isinstance(share, (int, float, np.integer, np.floating)) \
            or not 0 <= share < 1:
        raise ValueError(f"clip_count_share must lie in [0, 1), got {share!r}")
    return float(share)


def count_event(mu_count: float) -> GdpEvent:
    return GdpEvent(mu=mu_count, label="clipped_row_count",
                    assumptions=("count of rows whose per-example gradient norm exceeds clip_norm at the released "
                                 "posterior mean, Gaussian noise sd 1 / mu (replace-one sensitivity 1)",))


def composed_event(run_event, mu_count: float):
    """The run's GDP event composed with the count's (GDP composes: mu^2 adds); the run's ``tv_error`` (its
    mechanism's distance from the ideal one) is kept: the count's Gaussian adds none."""
    if mu_count == 0:
        return run_event
    if not isinstance(run_event, GdpEvent):
        raise ValueError("the clipped-row count composes with a Gaussian-DP run event only (the trajectory route); "
                         "pass clip_count_share=0 for this route")
    parts = [run_event, count_event(mu_count)]
    return GdpEvent(mu=math.sqrt(float(run_event.mu) ** 2 + mu_count ** 2), label=f"{run_event.label} + clipped_row_count",
                    assumptions=tuple(a for e in parts for a in e.assumptions), tv_error=run_event.tv_error,
                    metadata={"parts": [e.to_dict() for e in parts]})


def count_part_appended(run_event, mu_count: float) -> GdpEvent:
    """The run's composed GDP event (``metadata["parts"]``, the path first: the posterior mode's) with
    the count appended as one more part (mu^2 adds). The parts stay flat, so a continuation
    (:func:`dp_infer.infer.extension.extended_plan`, which re-makes the first part, the path) keeps
    the count; an event without parts is composed by :func:`composed_event`."""
    if mu_count == 0:
        return run_event
    parts = list(getattr(run_event, "metadata", {}).get("parts") or ())
    if not parts:
        return composed_event(run_event, mu_count)
    if not isinstance(run_event, GdpEvent):  # pragma: no cover - the posterior mode's events are GDP
        raise ValueError("the clipped-row count composes with a Gaussian-DP run event only")
    count = count_event(mu_count)
    return GdpEvent(mu=math.sqrt(float(run_event.mu) ** 2 + mu_count ** 2),
                    label=f"{run_event.label} + clipped_row_count",
                    assumptions=tuple(run_event.assumptions) + count.assumptions, tv_error=run_event.tv_error,
                    metadata={**dict(run_event.metadata), "parts": parts + [count.to_dict()]})


def private_clip_count(ml, theta_flat, X, y, clip_norm: float, mu_count: float, key) -> dict:
    """The noisy number of rows whose per-example gradient norm exceeds ``clip_norm`` at
    ``theta_flat`` (a released quantity: the posterior mean), with noise ``N(0, 1 / mu_count^2)``.
    The caller has charged ``count_event(mu_count)`` with the run."""
    return private_example_clip_count(ml.loss.example, theta_flat, X, y, clip_norm, mu_count, key)


def private_example_clip_count(example_fn, theta_flat, X, y, clip_norm: float, mu_count: float, key) -> dict:
    """:func:`private_clip_count` for any per-example loss ``example_fn(theta, x, y)`` (a clipped
    :class:`~dp_infer.losses.PerExampleLoss`'s ``example``: its unclipped per-example loss). The caller
    has charged ``count_event(mu_count)`` with the run."""
    theta = jnp.asarray(theta_flat, dtype=jnp.float32)
    grad_one = jax.grad(example_fn)

    @jax.jit
    def norms(Xb, yb):
        g = jax.vmap(grad_one, in_axes=(None, 0, 0))(theta, Xb, yb)
        return jnp.sqrt(jnp.sum(g * g, axis=-1))

    Xj, yj = jnp.asarray(X, dtype=jnp.float32), jnp.asarray(y, dtype=jnp.float32)
    exact = int(jnp.sum(norms(Xj, yj) > clip_norm))
    sd = 1.0 / mu_count
    with jax.enable_x64(True):  # privacy noise: float64 quantiles, tail to 11.4 sds (dp_infer.randomness)
        noisy = exact + sd * float(gaussian_noise(key, (), jnp.float64))
    n = int(np.shape(X)[0])
    share = min(max(noisy / n, 0.0), 1.0)
    return {"noisy_count": round(noisy, 1), "noise_sd": sd, "n": n, "share": share, "at": "released posterior mean",
            "clip_norm": float(clip_norm), "mu": mu_count}


def clip_warning(c: dict) -> str | None:
    """A loud message when the noisy count says the clip touches more than a tenth of the rows."""
    if c["share"] - 2 * c["noise_sd"] / c["n"] > 0.1:
        return (f"the clip (clip_norm = {c['clip_norm']:.4g}) is active on about {100 * c['share']:.0f}% of the rows at "
                f"the released estimate (private count {c['noisy_count']:.0f} +- {c['noise_sd']:.0f} of {c['n']}): "
                "the target is biased towards small gradients; raise clip_norm (docs/how-to/clipping.md)")
    return None
