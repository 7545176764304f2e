"""Output that reads like ArviZ's: mixing tables named by the run's coords (feature names), and
privacy reports without empty fields."""

from __future__ import annotations

import numpy as np

from dp_infer.diagnostics import check_mixing, format_report, to_datatree


def test_mixing_table_names_parameters_by_their_coords():
    d = np.random.default_rng(0).normal(size=(4, 200, 3))
    named = check_mixing(to_datatree({"theta": d}, coords={"feature": ["intercept", "age", "sex=Male"]},
                                     dims={"theta": ["feature"]}))
    assert list(named.table().index) == ["theta[intercept]", "theta[age]", "theta[sex=Male]"]
    plain = check_mixing(to_datatree({"theta": d}))
    assert list(plain.table().index) == ["theta[0]", "theta[1]", "theta[2]"]
    # same statistics either way: only the labels differ
    np.testing.assert_array_equal(named.table().to_numpy(), plain.table().to_numpy())
    # the worst parameter is named in the warning text too
    bad = d.copy()
    bad[0, :, 1] += 5.0
    mix = check_mixing(to_datatree({"theta": bad}, coords={"feature": ["intercept", "age", "sex=Male"]},
                                   dims={"theta": ["feature"]}))
    assert any("theta[age]" in w for w in mix.warnings)


def test_report_text_has_no_empty_fields():
    text = format_report({"eps": 1.0, "delta": 1e-5, "route": "trajectory", "upstream_log_delta": None,
                          "init_scale": None, "notes": [], "kernel_extra": {}, "seed_note": "", "kept": 3})
    assert "None" not in text and "upstream_log_delta" not in text and "init_scale" not in text
    assert "notes" not in text and "kernel_extra" not in text and "seed_note" not in text
    assert "kept" in text and "(1, 1e-05)-DP" in text
