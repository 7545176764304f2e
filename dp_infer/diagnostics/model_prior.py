"""Intervals of a NumPyro model's run under the model's own prior (hierarchical included).

A model run's score release (:mod:`dp_infer.model.score_release`) gives a Gaussian likelihood for the
unconstrained latent vector theta in the directions the data inform:
``exp(-(theta - theta_D)^T P (theta - theta_D) / 2)``
(:func:`dp_infer.diagnostics.released_interval.release_likelihood`: the one-step scoring centre, the
sampling error and the release's noise; ``P`` singular where the release carries no information).
:func:`model_released_interval` (below) combines it with a Gaussian stand-in of the prior, per
coordinate, where no posterior under the model's prior is stored. That is exact for independent Gaussian priors and loses what a
hierarchy says: in ``a_g ~ N(mu, tau)``, the likelihood has no score for ``mu`` or ``tau``, so the
stand-in leaves both at their prior although the released ``a_g`` inform them.

Here the likelihood is combined with the model's EXACT prior density in the unconstrained
coordinates (Jacobians included: NumPyro's ``potential_energy`` of the model with its observations
dropped, read on public placeholder rows), and the product is sampled by NUTS:

    p(theta | release) ∝ p_prior(theta) exp(-(theta - theta_D)^T P (theta - theta_D) / 2).

This is a noise-aware posterior given the release: the privacy noise and the sampling error are in
``P``; the hierarchy's pooling, a scale's skewed prior and the prior's dependencies are exact.
**Post-processing of the release and of public inputs only** (the prior is read on placeholder
rows; the NUTS key is a fixed public one): it costs no privacy, and a seeded rerun gives the same
numbers.

Stored on the release (``release["model_prior_posterior"]``, saved with the run) as per-coordinate
quantiles on :data:`QUANTILE_LEVELS`, means, sds and NUTS's own diagnostics (split R-hat, bulk ESS,
divergences), so a loaded run reads the same intervals without the model:
:func:`model_released_interval` reads them (a model run's intervals; its flags: the stand-in's "prior"
recomputed from the prior's mass, "long step" and "unresolved" kept and inherited by what only the prior's
structure informs, "mixing" where NUTS did not mix).

Assumptions: those of the score release's likelihood (large n: the mean negative log-likelihood close
to quadratic over the last scoring step; a correctly specified model, ``J`` for the information), and
NUTS's convergence, which the stored diagnostics report.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import norm

from ..model.weighted_release import WEIGHTED_ASSUMPTIONS, WEIGHTED_ESTIMAND
from ..model.score_release import (MODEL_ESTIMAND, MODEL_INTERVAL_ASSUMPTIONS, MODEL_PUBLIC_J_ASSUMPTIONS,
                                   solve_floored)
from ..routes.newton_release import noise_floor
from .released_interval import PRIOR_DOMINATED_SHARE, ParameterIntervals, release_likelihood, released_interval

__all__ = ["run_order", "QUANTILE_LEVELS", "MODEL_PRIOR_METHOD", "NUTS_SETTINGS", "REFERENCE_SAMPLES", "model_prior_posterior",
           "model_release_parts", "model_released_interval"]

#: the quantile levels stored per coordinate (0.5% steps): intervals of any prob up to 0.99 interpolate them
QUANTILE_LEVELS = tuple(round(0.005 * k, 3) for k in range(1, 200))

#: draws per chain of the non-private reference run (its sds only: width_ratio's denominator)
REFERENCE_SAMPLES = 500

#: NUTS's settings (fixed: the draws are post-processing, their number only sets the Monte-Carlo error)
NUTS_SETTINGS = {"num_warmup": 500, "num_samples": 1000, "num_chains": 4, "seed": 0, "target_accept_prob": 0.9}

#: the acceptance target of the rerun where the kept run still diverged (smaller steps through the curved region)
RETRY_ACCEPT_PROB = 0.99

MODEL_PRIOR_METHOD = ("noise-aware posterior under the model's own prior: the score release's Gaussian likelihood "
                      "times the exact prior density (unconstrained coordinates), sampled by NUTS "
                      "(dp_infer.diagnostics.model_prior; post-processing, free)")


def model_prior_posterior(release: dict, prior_potential: Callable[[jax.Array], jax.Array], *,
                          noncentred=None, prior_draws=None, settings: dict | None = None) -> dict:
    """NUTS draws of the release's likelihood times the model's prior (module doc), summarised.

    ``release``: a model run's score release (``kind == "model_score"``); ``prior_potential(theta)``:
    minus the log prior density of the flat unconstrained latent vector theta (NumPyro's
    ``potential_energy`` of the model without its observations: ``ModelLoss.prior_potential``).
    ``noncentred``: the prior with its loc-scale sites decentred
    (:func:`dp_infer.model.bridge.noncentred_prior`), or None. NUTS runs in theta first (centred: best
    where the data inform the group-level coordinates); where that run diverges or its split R-hat
    exceeds 1.05 and ``noncentred`` is given, it runs again decentred (a hierarchy's funnel, where the
    data barely inform them) and the better run by :func:`run_order` is kept; both
    runs' diagnostics are stored. Where the kept run still diverged, it runs once more in the kept
    parametrisation with ``target_accept_prob`` RETRY_ACCEPT_PROB (smaller steps; kept if better by
    :func:`run_order`; ``settings`` are the kept run's). A second, shorter run of the noise-free likelihood (``n H J^-1 H``)
    under the same prior gives ``reference_sd``, the non-private posterior's sd as the release
    estimates it (the intervals' ``width_ratio`` denominator). Returns a JSON-serialisable dict:
    ``levels`` and ``quantiles`` (levels x d), ``mean``, ``sd``, ``max_rhat``, ``min_ess``,
    ``divergences``, ``num_draws``, ``parametrisation``, ``tried``, ``settings``, ``method``,
    ``reference_sd``, ``reference``; with ``prior_draws`` (flat unconstrained draws of the prior, public:
    ``dp_infer.model.initial.prior_draws``), also ``prior_quantiles`` on the same levels, from which an
    interval's prior mass is read (the "prior" flag of a skewed coordinate)."""
    cfg = {**NUTS_SETTINGS, **(settings or {})}
    rel, extra, m = model_release_parts(release)
    theta_d, P = release_likelihood(rel, n=rel["n"], extra_variance=extra)
    theta_d = theta_d + m
    psd = np.asarray(release["prior_sd"], dtype=np.float64)
    d = theta_d.size
    # theta_D can lie thousands of prior sds out along a direction the release barely informs (a public J's rare
    # one-hot level on Adult: 2e5), with a tiny precision there. Written around theta_D, the quadratic's gradient
    # P (theta - theta_D) cancels terms of 1e8 in NUMPyro's float32 (NUTS never moved: R-hat inf). Around the
    # likelihood combined with the prior's Gaussian stand-in (c, inside the posterior's bulk) it is
    # 0.5 (theta - c)^T P (theta - c) - (theta - c)^T P (theta_D - c) + const, the vector taken once in float64.
    standin = released_interval(rel, n=rel["n"], prior_precision=1.0 / psd ** 2, extra_variance=extra)
    c = standin.centre + m
    centre = jnp.asarray(c)

    def quadratic(precision):
        prec = np.asarray(precision, dtype=np.float64)
        pull = jnp.asarray(prec @ (theta_d - c))
        prec = jnp.asarray(prec)
        return lambda theta: 0.5 * (theta - centre) @ (prec @ (theta - centre)) - (theta - centre) @ pull

    k_init, k_run = jax.random.split(jax.random.PRNGKey(int(cfg["seed"])))
    # the chains start there too
    init = c + 0.1 * np.minimum(standin.sd, psd) * np.asarray(jax.random.normal(k_init, (cfg["num_chains"], d)))
    init_u = None if noncentred is None else 0.1 * np.asarray(jax.random.normal(k_init, (cfg["num_chains"],
                                                                                        noncentred.dim)))

    def sample(centred: bool, likelihood, run_cfg: dict) -> dict:
        if centred:
            out = _nuts(lambda t: prior_potential(t) + likelihood(t), init, None, k_run, run_cfg)
            out["parametrisation"] = "centred"
        else:
            out = _nuts(lambda u: noncentred.potential(u) + likelihood(noncentred.to_theta(u)), init_u,
                        noncentred.to_theta, k_run, run_cfg)
            out["parametrisation"] = "non-centred (" + ", ".join(noncentred.decentred) + " decentred)"
        return out

    likelihood = quadratic(P)
    best = sample(True, likelihood, cfg)
    tried = [_diagnostics(best)]
    if (best["divergences"] > 0 or best["max_rhat"] > 1.05) and noncentred is not None:
        other = sample(False, likelihood, cfg)
        tried.append(_diagnostics(other))
        if run_order(other) < run_order(best):
            best = other
    kept_cfg = cfg
    if best["divergences"] > 0 and cfg["target_accept_prob"] < RETRY_ACCEPT_PROB:
        smaller_steps = {**cfg, "target_accept_prob": RETRY_ACCEPT_PROB}
        retry = sample(best["parametrisation"] == "centred", likelihood, smaller_steps)
        tried.append({**_diagnostics(retry), "target_accept_prob": RETRY_ACCEPT_PROB})
        if run_order(retry) < run_order(best):
            best, kept_cfg = retry, smaller_steps
    flat = best.pop("draws").reshape(-1, d)
    if not np.all(np.isfinite(flat)):
        raise FloatingPointError("the NUTS draws of the release's likelihood times the model's prior are not finite")
    q = np.quantile(flat, QUANTILE_LEVELS, axis=0)
    # the non-private reference (width_ratio's denominator): the noise-free likelihood under the same prior,
    # sampled in the parametrisation kept above (the data precision is larger: no funnel where there was none)
    _, P0 = release_likelihood(rel, n=rel["n"], extra_variance=extra, noise_free=True)
    ref = sample(best["parametrisation"] == "centred", quadratic(P0), {**kept_cfg, "num_samples": REFERENCE_SAMPLES})
    ref_sd = ref["draws"].reshape(-1, d).std(axis=0, ddof=1)
    return {"method": MODEL_PRIOR_METHOD, "levels": list(QUANTILE_LEVELS),
            "quantiles": [[float(v) for v in row] for row in q],
            "mean": [float(v) for v in flat.mean(axis=0)], "sd": [float(v) for v in flat.std(axis=0, ddof=1)],
            **_diagnostics(best), "num_draws": int(flat.shape[0]), "tried": tried, "settings": kept_cfg,
            "reference_sd": [float(v) for v in ref_sd],
            **({} if prior_draws is None else {"prior_quantiles": [[float(v) for v in row] for row in np.quantile(
                np.asarray(prior_draws, dtype=np.float64), QUANTILE_LEVELS, axis=0)]}),
            "reference": {"what": "the non-private posterior's sd as the release estimates it: the noise-free "
                                  "likelihood n H J^-1 H under the same prior", **_diagnostics(ref)}}


def run_order(run: dict) -> tuple:
    """The sort key of a NUTS run's diagnostics, best first: a split R-hat within 1.05 first (a run that
    did not mix is not rescued by having no divergence), then fewer divergences, then the lower R-hat."""
    return (not run["max_rhat"] <= 1.05, run["divergences"], run["max_rhat"])


def _diagnostics(run: dict) -> dict:
    return {k: run[k] for k in ("parametrisation", "max_rhat", "min_ess", "divergences") if k in run}


def _nuts(potential, init, to_theta, key, cfg: dict) -> dict:
    """One NUTS run (dense mass, vectorised chains): its draws mapped to theta ``(chains, samples, d)``, the
    split R-hat and bulk ESS of theta's coordinates, and the count of divergent transitions."""
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
    from numpyro.infer import MCMC, NUTS

    mcmc = MCMC(NUTS(potential_fn=potential, dense_mass=True, target_accept_prob=cfg["target_accept_prob"]),
                num_warmup=cfg["num_warmup"], num_samples=cfg["num_samples"], num_chains=cfg["num_chains"],
                chain_method="vectorized", progress_bar=False)
    mcmc.run(key, init_params=jnp.asarray(init), extra_fields=("diverging",))
    u = mcmc.get_samples(group_by_chain=True)
    draws = np.asarray(u if to_theta is None else jax.vmap(jax.vmap(to_theta))(u), dtype=np.float64)
    finite = np.all(np.isfinite(draws))
    rhat = np.atleast_1d(split_gelman_rubin(draws)) if cfg["num_chains"] > 1 and finite else np.array([np.inf])
    ess = np.atleast_1d(effective_sample_size(draws)) if finite else np.array([0.0])
    return {"draws": draws, "max_rhat": float(np.max(rhat)), "min_ess": float(np.min(ess)),
            "divergences": int(np.sum(np.asarray(mcmc.get_extra_fields()["diverging"])))}


def model_release_parts(release: dict) -> tuple[dict, np.ndarray, np.ndarray]:
    """``(rel, extra_variance, prior_mean)``: a model run's score release read as a loss release for
    :func:`released_interval` / :func:`release_likelihood`: theta shifted by the prior stand-in's centre
    ``prior_mean`` (their prior has mean 0; the gradient is unchanged), the released ``J`` as the
    curvature, and ``J``'s noise through the last step as an extra gradient variance (delta method: for
    a symmetric noise ``E`` of entry sd ``s_J`` and ``v = J^-1 g``, ``E[(E v)(E v)^T] = s_J^2 (|v|^2 I +
    v v^T)``)."""
    rel = dict(release)
    m = np.asarray(rel["prior_mean"], dtype=np.float64)
    rel["path"] = [list(np.asarray(p, dtype=np.float64) - m) for p in rel["path"]]
    if rel.get("centre") is not None:  # the weighted release's surrogate centre (theta), shifted with the path
        rel["centre"] = list(np.asarray(rel["centre"], dtype=np.float64) - m)
    if rel.get("release_metric") != "weighted":  # the clipped release's J is its curvature's stand-in
        rel["curvature"], rel["curvature_sd"] = rel["score"], rel["score_sd"]
    J = np.asarray(rel["curvature"], dtype=np.float64)
    d = J.shape[0]
    v = solve_floored(J, np.asarray(rel["gradient"], dtype=np.float64), noise_floor(d, float(rel["score_sd"])))
    extra = float(rel["score_sd"]) ** 2 * (float(v @ v) * np.eye(d) + np.outer(v, v))
    return rel, extra, m


def model_released_interval(release: dict, *, prob: float = 0.9):
    """``prob`` intervals for the unconstrained theta of a NumPyro model's run from its score release
    (:mod:`dp_infer.model.score_release`): the released ``J`` stands in for the curvature, its noise
    through the last step is added to the variance (delta method, :func:`model_release_parts`). Where
    the run stored the noise-aware posterior under the model's own prior
    (``release["model_prior_posterior"]``, :mod:`dp_infer.diagnostics.model_prior`), the intervals are its
    quantiles; else the prior's Gaussian stand-in (``prior_mean``, ``prior_sd``) is combined as
    :func:`released_interval` does for a loss's Gaussian prior. Coordinates the data do not determine
    are flagged ``"prior"`` one by one. Pure post-processing: free."""
    rel, extra, m = model_release_parts(release)
    names = rel.get("names")
    psd = np.asarray(rel["prior_sd"], dtype=np.float64)
    iv = released_interval(rel, n=rel["n"], prior_precision=1.0 / psd ** 2, prob=prob, extra_variance=extra)
    public = rel.get("curvature_source") == "public"
    weighted = rel.get("release_metric") == "weighted"
    notes = ((iv.notes[0].replace("curvature directions", "directions of the weighted curvature"),
              f"last mean weighted score released with noise sd {float(rel['gradient_sd']):.3g} per coordinate of the "
              f"metric that whitens the public information; rows weighted by min(1, rho / max over the labels "
              f"{rel.get('labels')} of the score's norm there), rho = {float(rel['rho']):.4g} (label-free: no clip "
              "binds, the estimating equation is unbiased for a correctly specified model); the curvature and the "
              f"scores' second moment from {rel.get('public_rows')} public feature rows (X_public, sha256 "
              f"{str(rel.get('public_rows_sha256'))[:12]}...), every label enumerated, not released")
             if weighted else
             (iv.notes[0].replace("curvature directions", "directions of J (the curvature's stand-in)"),
              f"last mean score released with noise sd {float(rel['gradient_sd']):.3g} per whitened coordinate; scores "
              f"clipped to {float(rel['clip_norm']):g} (where the clip binds on more than a few percent of the rows "
              "at the estimate, the estimate is biased: choose clip_norm a few times the typical score)")) + (
        "intervals for the unconstrained coordinates" + (f" ({', '.join(str(v) for v in names)})" if names else ""),)
    if public and not weighted:
        notes += (f"J computed from {rel.get('public_rows')} public feature rows (X_public, sha256 "
                  f"{str(rel.get('public_rows_sha256'))[:12]}...) with {rel.get('label_draws')} labels a row drawn from "
                  "the model at each point, not released: the mean scores alone were charged",)
    iv = dataclasses.replace(iv, lower=iv.lower + m, upper=iv.upper + m, centre=iv.centre + m,
                             data_centre=iv.data_centre + m,
                             estimand=WEIGHTED_ESTIMAND if weighted else MODEL_ESTIMAND,
                             method=("noise-aware weighted-score interval of a model run in the metric that whitens "
                                     "the public information, the prior's Gaussian stand-in "
                                     "(dp_infer.model.weighted_release)" if weighted else
                                     "noise-aware scoring-step interval of a model run, the prior's Gaussian "
                                     "stand-in (dp_infer.model.score_release"
                                     + (", J from public rows: dp_infer.model.public_information)" if public else ")")),
                             assumptions=(MODEL_INTERVAL_ASSUMPTIONS[2:] + WEIGHTED_ASSUMPTIONS if weighted else
                                          MODEL_INTERVAL_ASSUMPTIONS
                                          + (MODEL_PUBLIC_J_ASSUMPTIONS if public else ())),
                             notes=notes)
    post = release.get("model_prior_posterior")
    if post is None and release.get("model_prior_posterior_skipped"):
        iv = dataclasses.replace(iv, notes=iv.notes + (
            f"the model's own prior could not be combined ({release['model_prior_posterior_skipped']})",))
    return iv if post is None else _under_model_prior(iv, post, prob)


def _prior_mass(post: dict, lower: np.ndarray, upper: np.ndarray) -> np.ndarray | None:
    """The prior's mass inside each interval, from the stored prior quantiles (None where none are stored;
    clamped to the stored levels' range, 0.005-0.995, so a mass is read to within 1%)."""
    if post.get("prior_quantiles") is None:
        return None
    levels = np.asarray(post["levels"], dtype=np.float64)
    pq = np.asarray(post["prior_quantiles"], dtype=np.float64)
    cdf = [np.interp([lo, hi], pq[:, j], levels, left=0.0, right=1.0) for j, (lo, hi) in enumerate(zip(lower, upper))]
    return np.array([c[1] - c[0] for c in cdf])


def _under_model_prior(iv: ParameterIntervals, post: dict, prob: float) -> ParameterIntervals:
    """``iv`` with its centre, sd and ends from the stored NUTS draws under the model's own prior, the
    data share and the "prior" flags recomputed from them, and the non-private reference sd
    (``untempered_sd``, the denominator of ``width_ratio``) from the noise-free likelihood under the same
    prior where stored (the long-step flags are the release's, unchanged)."""
    levels = np.asarray(post["levels"], dtype=np.float64)
    q = np.asarray(post["quantiles"], dtype=np.float64)
    lo_p, hi_p = 0.5 * (1.0 - prob), 0.5 * (1.0 + prob)
    if lo_p < levels[0] - 1e-12:
        raise ValueError(f"prob must lie in (0, {1.0 - 2.0 * levels[0]:g}] for a model run's intervals (its stored "
                         f"quantiles of the noise-aware posterior run from {levels[0]:g} to {levels[-1]:g}), got {prob!r}")
    lower = np.array([np.interp(lo_p, levels, q[:, j]) for j in range(q.shape[1])])
    upper = np.array([np.interp(hi_p, levels, q[:, j]) for j in range(q.shape[1])])
    sd = np.asarray(post["sd"], dtype=np.float64)
    share = 1.0 - (sd / iv.prior_sd) ** 2
    mass = _prior_mass(post, lower, upper)
    # a Gaussian coordinate at the sd rule's boundary (data share PRIOR_DOMINATED_SHARE) holds this prior mass
    z = float(norm.ppf(hi_p))
    mass_limit = 2.0 * float(norm.cdf(z * np.sqrt(PRIOR_DOMINATED_SHARE))) - 1.0  # 0.755 at prob 0.9
    # a coordinate the likelihood does not inform (the stand-in's "prior") is informed here through the prior's
    # structure, i.e. through the others: where one of those has a long last step or is unresolved, it inherits the
    # doubt
    long = [j for j, f in enumerate(iv.flags) if f.startswith("long step")]
    unresolved = [j for j, f in enumerate(iv.flags) if f.startswith("unresolved")]
    flags = []
    for j, f in enumerate(iv.flags):
        if mass is not None and mass[j] > mass_limit:
            flags.append(f"prior: the interval holds {mass[j]:.0%} of the prior's mass; it is mostly the prior's")
        elif mass is None and share[j] < 1.0 - PRIOR_DOMINATED_SHARE:
            flags.append(f"prior: the data give {max(share[j], 0.0):.0%} of this coordinate's precision; its interval "
                         "is mostly the prior's")
        elif f.startswith("prior") and long:
            flags.append("long step: informed through the prior's structure by coordinates whose last step was long "
                         f"({', '.join(str(k) for k in long)}); it may not have converged")
        elif f.startswith("prior") and unresolved:
            flags.append("unresolved: informed through the prior's structure by coordinates that rest on a direction "
                         f"the release could not resolve ({', '.join(str(k) for k in unresolved)}); the interval may "
                         "miss")
        else:
            flags.append("" if f.startswith("prior") else f)
    mixing = (f"the model's prior combined exactly: NUTS ({post.get('parametrisation', 'centred')}) over the "
              f"release's likelihood times the prior, {post['num_draws']} draws, max split R-hat "
              f"{post['max_rhat']:.3f}, min bulk ESS {post['min_ess']:.0f}, {post['divergences']} divergences")
    unreliable = not post["max_rhat"] <= 1.05 or post["divergences"] > 0.01 * post["num_draws"]
    if unreliable:
        mixing += " (NOT reliable: R-hat above 1.05 or over 1% divergent; the interval ends carry that error)"
        # every coordinate's interval comes from these draws: each says so (none counts as determined)
        flags = [f or (f"mixing: the NUTS draws under the model's prior did not mix (max R-hat {post['max_rhat']:.3g}, "
                       f"{post['divergences']} divergences); this interval is not reliable") for f in flags]
    elif post["divergences"] > 0:
        mixing += " (a few divergences: the far tails may be slightly off)"
    ref = post.get("reference_sd")  # the non-private posterior's sd under the same exact prior, as estimated
    return dataclasses.replace(iv, lower=lower, upper=upper, centre=np.asarray(post["mean"], dtype=np.float64), sd=sd,
                               untempered_sd=iv.untempered_sd if ref is None else np.asarray(ref, dtype=np.float64),
                               data_share=share, flags=tuple(flags), method=str(post["method"]),
                               notes=iv.notes + (mixing,))
