"""The pieces of benchmarks.hierarchical_intervals (issue 37 parts 3 and 6): the truth in the order of
the run's unconstrained coordinates, and the summary's coverage and Monte-Carlo errors. No runs."""

from __future__ import annotations

import math

import numpy as np

from benchmarks import hierarchical_intervals as B
from dp_infer.model.bridge import loss_from_model
from dp_infer.model.score_release import unconstrained_names


def test_the_truth_is_a_prior_draw_in_the_runs_coordinate_order():
    X, y, g, truth = B.dataset(3, 500, 4)
    ml = loss_from_model(B.hier, X, y, clip_norm=2.0, model_kwargs={"group": g, "num_groups": 4},
                         index_ranges={"group": 4})
    assert unconstrained_names(ml) == ["a[0]", "a[1]", "a[2]", "a[3]", "mu", "tau (log)", "w"]
    rng = np.random.default_rng(3)  # the same draws, in dataset()'s order
    mu, tau, w = rng.normal(), abs(rng.normal()), rng.normal()
    np.testing.assert_allclose(truth, np.r_[mu + tau * rng.normal(size=4), mu, math.log(tau), w])
    assert B.classes(4) == ["group intercept"] * 4 + ["mu", "log tau", "slope"]
    assert set(np.unique(y)) <= {0.0, 1.0} and g.min() >= 0 and g.max() <= 3


def test_the_summary_pools_coverage_with_its_errors():
    d = 7
    rows = []
    for s, hits in enumerate(([1] * 7, [1, 1, 1, 0, 1, 0, 1])):
        m = {"cover": [bool(h) for h in hits], "sd": [0.1] * 4 + [0.5, 0.4, 0.05], "flagged": [False] * d}
        rows.append({"seed": s, "wall_s": 10.0 + s, "model_prior": m, "stand_in": m,
                     "truth": [0.1, -0.2, 0.3, 2.5 * s, 0.0, -1.0, 0.4],  # dataset 1 has a large effect
                     "tempered": {"cover": [True] * d, "sd": [1.0] * d},
                     "nuts": {"parametrisation": "centred", "max_rhat": 1.001, "min_ess": 900, "divergences": 0},
                     "beta_over_n": 0.003})
    rows.append({"seed": 2, "wall_s": 5.0, "skipped": "no release"})
    s = B.summarise(rows, 4)
    assert s["datasets"] == 2 and s["skipped"] == 1 and s["skip_reasons"] == ["no release"]
    a = s["model_prior"]["all"]
    assert a["coverage"] == 12 / 14 and a["N"] == 14
    assert math.isclose(a["se_pooled"], math.sqrt((12 / 14) * (2 / 14) / 14))
    assert math.isclose(a["se_datasets"], np.std([1.0, 5 / 7], ddof=1) / math.sqrt(2))
    assert s["model_prior"]["group intercept"]["coverage"] == 7 / 8 and s["model_prior"]["mu"]["coverage"] == 1.0
    assert s["model_prior"]["log tau"]["coverage"] == 0.5 and s["tempered"]["all"]["coverage"] == 1.0
    assert s["model_prior"]["slope"]["median_sd"] == 0.05 and s["nuts_parametrisation"]["centred"] == 2
    assert "| log tau | 0.500 +- 0.354" in B.to_markdown(s, "cmd")
    big, mod = s["by_effect_size"].values()
    assert (big["datasets"], big["coverage"], mod["datasets"], mod["coverage"]) == (1, 5 / 7, 1, 1.0)
