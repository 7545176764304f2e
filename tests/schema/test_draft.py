"""Schema drafts: the non-private one says what it read; the private one (OpenDP) spends no more
than its target, is charged before any statistic is computed, and is useful at moderate eps.

OpenDP draws its noise from its own CSPRNG (no seed), so the utility assertions are written
with margins whose failure probability is stated next to them (all below 1e-6).
"""

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("opendp")

from dp_infer.privacy.ledger import BudgetExceededError, Ledger  # noqa: E402
from dp_infer.schema import FeatureMap, load_schema, save_schema  # noqa: E402
from dp_infer.schema import draft as D  # noqa: E402


def _data(n=20000, seed=0):
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], size=n, p=[0.6, 0.3, 0.1]).astype(object)
    colour[:3] = "rare"  # 3 rows: far below any threshold
    return pd.DataFrame({"age": rng.integers(18, 90, n).astype(str), "colour": colour,
                         "income": np.round(rng.lognormal(10, 0.5, n), 2).astype(str),
                         "y": rng.choice(["no", "yes"], size=n, p=[0.7, 0.3])})


def test_nonprivate_draft_reads_the_data_and_says_so(tmp_path):
    df = _data(500)
    res = D.draft_nonprivate(df, "y")
    assert res.header.startswith("NON-PRIVATE DRAFT") and "READ FROM THE DATA" in res.header
    age = res.schema.column("age")
    assert age.kind == "numeric" and age.bounds == (float(df.age.astype(int).min()), float(df.age.astype(int).max()))
    assert res.schema.column("colour").levels[0] == "red"  # most frequent first (= reference)
    assert res.schema.target.kind == "binary" and res.schema.target.positive == ("yes",)
    path = save_schema(res.schema, tmp_path / "s.yaml", header=res.header)
    assert path.read_text().startswith("# NON-PRIVATE DRAFT")
    enc = FeatureMap(load_schema(path)).transform(df)  # the draft encodes its own data
    assert enc.report.n_rows_clipped == 0


def test_private_draft_composition_within_target_and_useful():
    df = _data()
    res = D.draft_private(df, "y", eps=4.0, delta=1e-6)
    assert res.spent["eps_composed"] <= 4.0 * (1 + 1e-12)
    assert res.spent["delta_composed"] <= 1e-6
    sch = res.schema
    assert sch.column("age").kind == "numeric" and sch.column("colour").kind == "categorical"
    ages = df.age.astype(float)
    lo, hi = sch.column("age").bounds
    # bins with ~270 rows each have Laplace(~1.7) noise: the 2%/98% quantile bins cannot move past the
    # 5%/95% quantiles, and the bounds are edges of the grid around the data (P(fail) < 1e-9)
    assert lo <= ages.quantile(0.05) and hi >= ages.quantile(0.95)
    assert lo >= 15 and hi <= 100
    inc = df.income.astype(float)
    ilo, ihi = sch.column("income").bounds
    assert ilo <= inc.quantile(0.05) and ihi >= inc.quantile(0.95) and ilo >= 0
    # red/green/blue have >= 2000 rows, "rare" 3 rows vs a threshold > 20 (P(released) < 1e-6)
    assert set(sch.column("colour").levels) == {"red", "green", "blue"}
    assert sch.column("colour").unknown == "other"
    assert sch.target.positive == ("yes",) and sch.target.negative == ("no",)


def test_private_draft_is_charged_before_any_statistic(tmp_path, monkeypatch):
    led = Ledger(tmp_path / "l.sqlite")
    led.register_dataset("d", 1.5, 1e-5)
    order = []
    real_numbers, real_charge = D._numbers, Ledger.charge
    monkeypatch.setattr(D, "_numbers", lambda *a, **k: (order.append("stat"), real_numbers(*a, **k))[1])
    monkeypatch.setattr(Ledger, "charge", lambda self, *a, **k: (order.append("charge"), real_charge(self, *a, **k))[1])
    res = D.draft_private(_data(2000), "y", eps=1.0, delta=1e-6, ledger=led, dataset_id="d")
    assert order[0] == "charge" and order.count("charge") == 1 and "stat" in order
    hist = led.history("d")
    assert len(hist) == 1 and hist[0]["status"] == "completed" and 0.99 < res.receipt.eps_run <= 1.0
    # a second draft would overspend: refused, nothing recorded, no statistic computed
    order.clear()
    with pytest.raises(BudgetExceededError):
        D.draft_private(_data(2000), "y", eps=1.0, delta=1e-6, ledger=led, dataset_id="d")
    assert order == ["charge"] and len(led.history("d")) == 1


def test_declared_kinds_skip_the_kind_test_and_bad_inputs():
    res = D.draft_private(_data(20000), None, eps=2.0, delta=1e-6, kinds={"age": "categorical"})
    assert res.schema.column("age").kind == "categorical" and "declared" in res.schema.column("age").note
    # 72 ages x ~14 rows at eps 0.5 per column (threshold > 50): no level passes the threshold -> ignored, and said so
    small = D.draft_private(_data(1000), None, eps=2.0, delta=1e-6, kinds={"age": "categorical"})
    assert "age" in small.schema.ignore and "IGNORED" in small.header
    # at n = 1000 the lognormal income's bounds can rest on a bin whose count is within the noise: the secret
    # noise decides, and the draft then flags it and leaves it out too (issue 41: never written silently)
    assert set(small.schema.ignore) <= {"age", "income"}
    with pytest.raises(ValueError, match="kinds: column"):
        D.draft_private(_data(100), None, eps=1.0, delta=1e-6, kinds={"nope": "numeric"})
    with pytest.raises(ValueError, match="eps"):
        D.draft_private(_data(100), None, eps=-1.0, delta=1e-6)
    with pytest.raises(ValueError, match="quantiles"):
        D.draft_private(_data(100), None, eps=1.0, delta=1e-6, quantiles=(0.9, 0.1))
    with pytest.raises(ValueError, match="target: column 'z'"):
        D.draft_nonprivate(_data(100), "z")
