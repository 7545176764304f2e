"""Write the synthetic marketing table shipped as ``dp_infer/data/examples/marketing.csv.gz``.

A made-up table shaped like a bank's telemarketing records (NOT real data, NOT Adult), for the
how-to "From a raw CSV" (docs/how-to/raw-csv.md): ``;``-delimited with quoted text cells, a
few missing cells (``NA``), and skewed numeric columns (a call's duration in seconds, an
account balance with some negative values, a count of contacts). The label ``y`` (did the
client subscribe) follows a logistic model in log duration, contacts, housing loan and job.

Run ``python -m dp_infer.data.examples.make_marketing [OUT]`` (default: the shipped file) to
regenerate it; the seed is fixed, so the table is the same on every run with the same NumPy.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np

SEED = 20261128
N_ROWS = 2000
JOBS = ["admin.", "blue-collar", "technician", "services", "management", "retired", "student", "unemployed"]
JOB_P = [0.24, 0.22, 0.17, 0.10, 0.14, 0.06, 0.04, 0.03]
JOB_EFFECT = dict(zip(JOBS, [0.0, -0.4, 0.0, -0.2, 0.2, 0.7, 0.9, 0.3]))


def make(n: int = N_ROWS, seed: int = SEED) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    job = rng.choice(JOBS, size=n, p=JOB_P)
    age = np.clip(np.round(rng.normal(41, 11, n)), 18, 95).astype(int)
    age[job == "retired"] = np.clip(age[job == "retired"] + 20, 18, 95)
    age[job == "student"] = rng.integers(18, 30, int((job == "student").sum()))
    marital = rng.choice(["married", "single", "divorced"], size=n, p=[0.6, 0.28, 0.12])
    housing = rng.choice(["yes", "no"], size=n, p=[0.55, 0.45])
    balance = np.round(rng.lognormal(6.5, 1.4, n) - 300).astype(int)  # skewed, some negative
    duration = np.maximum(np.round(rng.lognormal(5.3, 0.85, n)), 1).astype(int)  # seconds
    campaign = 1 + rng.negative_binomial(0.6, 0.22, n)  # contacts in this campaign, >= 1 (overdispersed)
    logit = (-2.2 + 1.6 * (np.log(duration) - 5.3) - 0.25 * (campaign - 1) - 0.6 * (housing == "yes")
             + np.array([JOB_EFFECT[j] for j in job]) + 0.15 * (balance > 1500))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    rows = [["age", "job", "marital", "balance", "housing", "duration", "campaign", "y"]]
    miss = rng.random(n) < 0.01  # about 1% of the balances were not recorded
    for i in range(n):
        rows.append([str(age[i]), job[i], marital[i], "NA" if miss[i] else str(balance[i]), housing[i],
                     str(duration[i]), str(campaign[i]), y[i]])
    return rows


def write(path: Path, n: int = N_ROWS, seed: int = SEED) -> Path:
    """Write the table (``;``-delimited, text cells quoted; gzip when the name ends in .gz)."""
    def cell(v: str, header: bool) -> str:
        return f'"{v}"' if header or not v.lstrip("-").isdigit() and v != "NA" else v

    rows = make(n, seed)
    text = "\n".join(";".join(cell(v, i == 0) for v in r) for i, r in enumerate(rows)) + "\n"
    path = Path(path)
    if path.suffix == ".gz":
        with gzip.GzipFile(path, "wb", mtime=0) as f:  # mtime 0: the same bytes on every run
            f.write(text.encode())
    else:
        path.write_text(text)
    return path


if __name__ == "__main__":  # pragma: no cover - the shipped file is checked by tests/schema/test_raw_csv.py
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("marketing.csv.gz")
    print(f"wrote {write(out)}")
