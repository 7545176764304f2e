"""Posterior quality (issue 12): ``python -m benchmarks quality`` (or ``--only quality``).

Sections of one run, every competitor in the same run:

1. Adult at (1, 1e-5)-DP, posterior mode, 4 chains: max R-hat, min bulk ESS, test accuracy of the
   posterior mean, posterior-predictive ECE and log loss, seconds; an eps grid (0.5, 1, 2, 4);
   the competitors at eps = 1 (:mod:`benchmarks.quality_adult`).
2. The same tempered target without privacy: NUTS (same beta, same prior; dense mass matrix fixed
   at the Laplace covariance, NON-PRIVATE) against the 4 released chains and against a 16-chain
   re-run of the same plan (a NON-PRIVATE diagnostic that lowers the MC error), per coordinate
   with noise floors and verdicts (:func:`benchmarks.quality_nuts.tempered_vs_nuts`).
3. The untempered posterior (beta = n, N(0, 1) prior): preconditioned ULA at h = 0.1 and 0.05,
   min ESS/s and bias vs NUTS's (:func:`benchmarks.quality_nuts.nonprivate_ess_per_second`).
4. Coverage in simulation, with the noise-aware competitors (:mod:`benchmarks.quality_coverage`).

``--quick``: a 5,000-row Adult subsample, eps = 1 only, shorter NUTS runs, 20 replicates.
"""

from __future__ import annotations

from . import quality_adult, quality_coverage, quality_nuts


def run(quick: bool, log=print) -> dict:
    adult = quality_adult.run(quick, log=log)
    draws, main = adult.pop("_main_draws"), adult.pop("_main_run")
    beta = main.plan.beta
    data = quality_adult.load_adult_natural()
    X, y = quality_adult._subsample(data, 5000 if quick else None)
    out = {"adult": adult}
    rerun = quality_adult.rerun_plan(data, X, y, main, num_chains=16)
    potential = main.potential  # the run's own target (Huberised when the clip is on, the default)
    del main
    out["tempered_vs_nuts"] = quality_nuts.tempered_vs_nuts(X, y, draws, beta=beta, lam=quality_adult.PRIOR_PRECISION,
                                                            quick=quick, rerun=rerun,
                                                            test=(data.X_test, data.y_test), log=log,
                                                            potential=potential)
    out["nonprivate"] = quality_nuts.nonprivate_ess_per_second(X, y, quick=quick, log=log)
    out["coverage"] = quality_coverage.run(quick, log=log)
    return out
