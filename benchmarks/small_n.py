"""Small n (issue 37 part 5): at n = 5,000 rows of Adult (through its shipped schema, d = 100) and eps = 1, the
posterior mode's point prediction against the estimate mode's, and the forecast's "close to the prior" call made
before anything is charged against the sds the run then measures.

Each seed draws 5,000 training rows at random; both modes run on the same rows at (1, 1e-5) with their defaults
(the posterior mode at prior precision 0.01, sd 10); accuracy on Adult's public test file. Command:
``python -m benchmarks.small_n --seeds 0 1``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def one(seed: int, n: int = 5000, prior: float = 0.01) -> dict:
    import dp_infer
    from dp_infer import losses
    from dp_infer.infer import nonprivate
    from dp_infer.schema.adult import load_adult_raw

    d = load_adult_raw()
    idx = np.random.default_rng(seed).choice(d.X_train.shape[0], n, replace=False)
    X, y = d.X_train[idx], d.y_train[idx]
    loss = losses.logistic(row_norm=d.feature_map.row_norm)
    forecast = dp_infer.forecast_posterior(loss, n, X.shape[1], eps=1.0, delta=1e-5, prior_precision=prior)
    t0 = time.time()
    post = dp_infer.fit(loss, X, y, eps=1.0, delta=1e-5, target="posterior", prior_precision=prior, seed=seed,
                        progress_bar=False)
    seconds = time.time() - t0
    est = dp_infer.fit(loss, X, y, eps=1.0, delta=1e-5, seed=seed, progress_bar=False)
    sd = post.draws().reshape(-1, X.shape[1]).std(axis=0)
    return {"seed": seed, "posterior": nonprivate.accuracy(post.estimate(), d.X_test, d.y_test),
            "estimate": nonprivate.accuracy(est.estimate(), d.X_test, d.y_test),
            "majority": float(max(d.y_test.mean(), 1 - d.y_test.mean())),
            "forecast_sd_ratio": forecast.sd_ratio_to_prior, "close_to_prior": forecast.close_to_prior,
            "measured_sd_ratio": float(np.median(sd) * np.sqrt(prior)), "seconds": seconds}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    a = p.parse_args(argv)
    print("| seed | posterior mean: accuracy | estimate mode: accuracy | majority class | forecast sd / prior sd "
          "(close to the prior?) | measured median sd / prior sd |\n|---|---|---|---|---|---|")
    for s in a.seeds:
        r = one(s)
        print(f"| {r['seed']} | {r['posterior']:.3f} | {r['estimate']:.3f} | {r['majority']:.3f} | "
              f"{r['forecast_sd_ratio']:.2f} ({'yes' if r['close_to_prior'] else 'no'}) | {r['measured_sd_ratio']:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
