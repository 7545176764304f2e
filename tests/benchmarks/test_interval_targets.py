"""benchmarks.interval_targets: the targets table reads each part's figures and judges them by the issue's bars
(hand-made part results; the parts themselves are the benchmarks that own them)."""

import json

import pytest

from benchmarks import interval_targets as it


def _adult_run(seed, share, signs, width, made=True):
    return {"seed": seed, "release_made": made, "determined_share_of_np": share, "determined_signs_right": signs,
            "median_width_ratio_np_determined": width, "predicted_median_width_ratio": 1.3}


def _met(rows, case_part, target_part):
    (row,) = [r for r in rows if case_part in r["case"] and target_part in r["target"]]
    return row["met"], row["measured"]


def test_a_case_meets_a_bar_only_where_every_seed_does():
    rows = it.target_rows({"adult": [_adult_run(0, 0.61, 0.96, 1.5), _adult_run(1, 0.59, 0.95, 2.0)]})
    assert _met(rows, "Adult, eps 1", "60%") == (False, "0.610 / 0.590")
    assert _met(rows, "Adult, eps 1", "signs")[0]  # 0.95 is on the bar
    met, shown = _met(rows, "Adult, eps 1", "median width")
    assert met and shown.startswith("1.50 / 2.00") and "own estimate of the width: 1.30 / 1.30" in shown
    rows = it.target_rows({"adult": [_adult_run(0, 0.61, 0.96, 1.5), _adult_run(1, 0.7, 0.99, 2.01)]})
    assert _met(rows, "Adult, eps 1", "60%")[0] and not _met(rows, "Adult, eps 1", "median width")[0]


def test_a_run_without_intervals_fails_every_bar_and_no_runs_meets_none():
    rows = it.target_rows({"adult_model": [_adult_run(0, 0.9, 1.0, 1.1), _adult_run(2, None, None, None, made=False)]})
    for target in ("60%", "signs", "median width"):
        met, shown = _met(rows, "NumPyro", target)
        assert not met and shown.split(" / ")[1].startswith("--")
    rows = it.target_rows({"adult": []})
    assert not any(r["met"] for r in rows) and len(rows) == 3


def test_the_new_table_reads_its_own_keys_and_a_run_that_determines_nothing_has_no_signs():
    runs = [{"seed": 0, "share_determined": 0.8, "signs_right": None, "median_width_over_np_sd": 1.4}]
    rows = it.target_rows({"new_table": {"logistic, loss route": {"runs": runs}}})
    assert _met(rows, "never seen, logistic, loss route", "60%") == (True, "0.800")
    assert _met(rows, "never seen", "signs") == (False, "--")


def _coverage_summary(p, forced=False):
    e = {"coverage": p, "clustered_se": 0.01, "median_ratio": 1.4}
    return {"forced": forced, "datasets": 50, "by_kind": {"all": {"run": e}}}


@pytest.mark.parametrize("p, met", [(0.849, False), (0.85, True), (0.95, True), (0.951, False), (1.0, False)])
def test_coverage_is_judged_by_the_band(p, met):
    public = {"all": {"coverage": p}, "coverage_se_over_datasets": None, "median_width_ratio": 1.4, "datasets": 3}
    hier = {"datasets": 10, "skipped": 0,
            "model_prior": {"all": {"coverage": p, "se_datasets": 0.02, "unflagged": {"coverage": 0.9}}}}
    rows = it.target_rows({"coverage": {"huber_small": _coverage_summary(p, forced=True)},
                           "coverage_public": {"adult_shaped": public}, "coverage_model": {"logistic_d20": public},
                           "coverage_hierarchical": hier})
    assert [r["met"] for r in rows] == [met] * 4
    assert "release forced" in rows[0]["case"] and "se --" in rows[1]["measured"]


def test_the_forecasts_are_judged_within_25_percent_and_a_run_without_a_release_has_no_width_row():
    fc = [{"case": "a", "public": None, "even": 0.5, "measured": 0.4, "width": 1.6, "width_forecast": 1.16},
          {"case": "b", "public": 0.75, "even": 0.1, "measured": 1.0, "width": None, "width_forecast": None}]
    rows = it.target_rows({"forecast": fc})
    assert [(r["case"], r["met"]) for r in rows] == [("a", True), ("a", False), ("b", True)]
    assert rows[0]["measured"].endswith("1.25x") and rows[1]["measured"].endswith("0.72x")  # 0.5 / 0.4; 1.16 / 1.6


def test_small_n_is_met_by_either_branch():
    r = {"seed": 0, "posterior": 0.70, "estimate": 0.75, "forecast_sd_ratio": 0.96, "measured_sd_ratio": 0.99}
    got = [it.target_rows({"small_n": [dict(r, close_to_prior=c, posterior=acc)]})[0]["met"]
           for c, acc in ((True, 0.70), (False, 0.70), (False, 0.75))]
    assert got == [True, False, True]


def test_a_logged_part_is_read_back_not_run_again(tmp_path, monkeypatch, capsys):
    calls = []

    def fake(size):
        calls.append(size["datasets"])
        return [{"seed": 0, "posterior": 0.8, "estimate": 0.7, "close_to_prior": False, "forecast_sd_ratio": 0.5,
                 "measured_sd_ratio": 0.5}]

    monkeypatch.setitem(it.PARTS, "small_n", fake)
    log, md = tmp_path / "log.jsonl", tmp_path / "t.md"
    it.main(["--quick", "--parts", "small_n", "--log", str(log), "--md", str(md)])
    it.main(["--quick", "--parts", "small_n", "--log", str(log)])
    assert calls == [10]  # the quick size, run once
    assert len(log.read_text().splitlines()) == 1 and json.loads(log.read_text())["scale"] == "quick"
    it.main(["--parts", "small_n", "--log", str(log)])  # the full size is another run
    assert calls == [10, 50]
    assert "| small n:" in md.read_text() and "| yes |" in md.read_text()
    assert "accuracy 0.800 against 0.700" in capsys.readouterr().out


def test_a_hierarchical_part_without_any_release_is_a_row_that_fails_not_a_missing_row():
    rows = it.target_rows({"coverage_hierarchical": {"datasets": 0, "skipped": 3, "skip_reasons": ["diverged"]}})
    assert [(r["met"], r["measured"]) for r in rows] == [(False, "--")]
    assert "3 datasets, none with a release" in rows[0]["case"] and rows[0]["note"] == "diverged"
    assert "| -- (diverged) | **no** |" in it.to_markdown(rows, "cmd", {}, {})
