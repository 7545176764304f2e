"""Propose-test-release for the median, with and without purification (seed 003 Alg. 9 and 10; issue 40
part 7): utility against eps on Adult's ``age`` column, in one run.

Data: the ``age`` column of Adult's training file (n = 30,162 complete rows, integers 17-90), declared
range [0, 100] (public), and a random subsample of n = 200 rows (fixed seed) where the median's local
sensitivity is larger. The proposed local-sensitivity bound ``beta`` is a public choice: 1 year, and 5
years (a looser proposal that passes the test more often, at 5x the noise).

Methods, each at total eps (delta = 1e-6 where there is one):

* **PTR** (:func:`dp_infer.mechanisms.ptr.ptr_median`) is ``(2 eps_ptr, delta)``-DP: run at
  ``eps_ptr = eps / 2``. "Refused" counts the releases where the test said "bottom" (no answer).
* **pure PTR** (:func:`dp_infer.mechanisms.ptr.pure_ptr_median`): pure eps-DP, "bottom" replaced by a
  uniform draw on the range, then purified (its default eps' share 0.1 and Laplace scale 1e-3 of the
  range).

Error: the mean absolute error of the released median over seeds (a refused PTR release is left out of
PTR's error and counted in "refused"). Command: ``python -m benchmarks.ptr``.
"""

from __future__ import annotations

import argparse
import gzip
import time
from importlib import resources

import numpy as np

EPS = (0.1, 0.25, 0.5, 1.0, 2.0)
DELTA = 1e-6
LOWER, UPPER = 0.0, 100.0
BETAS = (1.0, 5.0)


def adult_ages() -> np.ndarray:
    import pandas as pd

    from dp_infer.schema.adult import ADULT_COLUMNS

    src = resources.files("dp_infer.data.adult").joinpath("adult.data.gz")
    with resources.as_file(src) as p, gzip.open(p, "rt") as f:
        df = pd.read_csv(f, names=ADULT_COLUMNS, comment="|", skipinitialspace=True, na_values="?")
    return df.dropna()["age"].to_numpy(dtype=float)


def one(x: np.ndarray, eps: float, beta: float, seeds) -> dict:
    from dp_infer.mechanisms.ptr import ptr_median, pure_ptr_median

    truth = float(np.sort(x)[(x.size + 1) // 2 - 1])
    ptr, pure, refused = [], [], 0
    for s in seeds:
        r = ptr_median(x, eps=eps / 2.0, delta=DELTA, beta=beta, lower=LOWER, upper=UPPER, seed=s)
        assert r.epsilon(DELTA) <= eps * (1 + 1e-9)
        if r.value is None:
            refused += 1
        else:
            ptr.append(abs(r.value - truth))
        p = pure_ptr_median(x, eps=eps, beta=beta, lower=LOWER, upper=UPPER, seed=s)
        assert p.epsilon() <= eps * (1 + 1e-9)
        pure.append(abs(p.value - truth))
    return {"eps": eps, "beta": beta, "n": int(x.size), "truth": truth, "seeds": len(seeds), "refused": refused,
            "ptr_mae": float(np.mean(ptr)) if ptr else None,
            "ptr_se": float(np.std(ptr) / np.sqrt(len(ptr))) if len(ptr) > 1 else None,
            "pure_mae": float(np.mean(pure)), "pure_se": float(np.std(pure) / np.sqrt(len(pure)))}


def table(rows) -> str:
    out = ["| n | beta (years) | eps | PTR: refused | PTR: mean abs. error (years) | pure PTR (purified): mean abs. error |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        ptr = "—" if r["ptr_mae"] is None else f"{r['ptr_mae']:.3f}" + ("" if r["ptr_se"] is None else f" ± {r['ptr_se']:.3f}")
        out.append(f"| {r['n']} | {r['beta']:g} | {r['eps']:g} | {r['refused']} / {r['seeds']} | {ptr} | "
                   f"{r['pure_mae']:.3f} ± {r['pure_se']:.3f} |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=50)
    a = p.parse_args(argv)
    t0 = time.time()
    ages = adult_ages()
    small = np.random.default_rng(0).choice(ages, size=200, replace=False)
    rows = [one(x, eps, beta, range(a.seeds)) for x in (ages, small) for beta in BETAS for eps in EPS]
    print(f"# true medians: n = {ages.size}: {rows[0]['truth']:g}; n = {small.size}: {rows[-1]['truth']:g}; "
          f"range [{LOWER:g}, {UPPER:g}], delta = {DELTA:g}, {a.seeds} seeds")
    print(table(rows))
    print(f"\n# {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
