"""Test tiers and the environment every test runs in.

Two tiers (README, "Tests"):

* ``./dev test`` (``pytest``): the everyday tier, at most 3 minutes on 2 cores -- the fast
  oracles, the privacy, accounting and planning tests, and one end-to-end run per route;
* ``./dev test --all`` (``pytest --all``, what ``.ci/run`` runs): everything, the slow tier
  included -- notebooks, NUTS comparisons, empirical audits and the slow statistical tests.

A test is in the slow tier when it is marked ``@pytest.mark.slow``, lives in a file or folder of
``SLOW`` below (whole files whose every test samples at length), or is listed in ``SLOW_TESTS``. Giving ``-m`` chooses by marker
instead (``pytest -m slow`` runs the slow tier alone).
"""

import os
from pathlib import Path

import pytest

# Keep JAX on the CPU and quiet; tests choose their own precision.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
# The tests stay hermetic -- never a compiled program in or from the user's cache -- but share one
# compilation cache of their own: by default a fresh directory per test session (made by the first
# process, inherited by pytest-xdist's workers, removed at the end), so the many runs of the same program
# (same plan, same shapes) compile once. Measured: the CLI fallback tests 68 s -> 48 s.
# DP_INFER_JAX_CACHE set by the caller (a directory, or "off") is kept: `./dev test` passes a directory
# of the tests' own in the user's cache, kept between runs; "fresh" asks for the per-session directory.
if os.environ.get("DP_INFER_JAX_CACHE", "fresh").strip().lower() == "fresh":
    import atexit
    import shutil
    import tempfile

    _session_cache = tempfile.mkdtemp(prefix="dp_infer_test_jax_cache_")
    os.environ["DP_INFER_JAX_CACHE"] = _session_cache
    atexit.register(shutil.rmtree, _session_cache, ignore_errors=True)  # this process made it: it removes it
from dp_infer.compilation import enable_persistent_cache, release_compiled_programs  # noqa: E402

if enable_persistent_cache() is not None:  # None: the caller's DP_INFER_JAX_CACHE turned it off
    import jax

    # a size limit turns on JAX's file lock around every read and write: two workers never read a
    # program the other is still writing
    # (and it evicts the least recently used programs above it: a kept test cache stays bounded)
    jax.config.update("jax_compilation_cache_max_size", 2 * 2**30)

HERE = Path(__file__).resolve().parent

# files and folders (relative to tests/) whose tests all belong to the slow tier
SLOW = (
    "test_notebooks.py",                      # executes every notebook
    "test_docs.py",                           # mkdocs build --strict
    "benchmarks/test_quality_nuts.py",        # NUTS references
    "benchmarks/test_quality_baselines.py",
    "infer/test_fit_model_vs_nuts.py",        # NUTS at the same temperature
    "infer/test_estimators_sklearn_checks.py",
    "infer/test_estimators.py",               # many private fits (grid search, pipelines)
    "infer/test_fit_model.py",                # NumPyro models end to end
    "cli/",                                   # the commands end to end on Adult (test_bad_inputs.py keeps one)
    "audit/",                                 # empirical audits: many chains per route
    "mechanisms/",                            # sampler laws by Monte Carlo
    "rashomon/test_sampler.py",
    "rashomon/test_sampler_smoothing.py",
    "rashomon/test_measures.py",
    "rashomon/test_threshold.py",
    "rashomon/test_report.py",
    "kernels/test_kernels.py",                # kernel laws by Monte Carlo
    "parallel/",                              # several devices and processes
    "schema/test_adult.py",
    "schema/test_draft.py",
    "privacy/test_minibatch_edges.py",        # empirical audits of the minibatch kernel
)


# single tests of the everyday folders that take 10 s or more (node ids, all parameters unless one is
# named); measured with --durations on the whole suite (issue 28). Each route keeps one run in the
# everyday tier: test_sound_by_default.py (trajectory, last-iterate, pure, stationary, Rashomon path),
# infer/test_posterior.py (posterior), losses/test_nonsmooth.py (proximal), privacy/test_minibatch_sgld.py.
SLOW_TESTS = (
    "benchmarks/test_float32_gradient.py::test_at_a_million_rows_the_excess_passes_the_floor_and_stays_inside_the_margin_that_grows_with_n",  # 1e6 rows, ~8 s
    "diagnostics/test_released_interval_public.py::test_a_run_with_public_curvature_covers_the_truth",  # 8 runs, ~45 s
    "diagnostics/test_released_interval_public.py::test_release_level_coverage_of_the_truth_with_public_curvature",
    "diagnostics/test_released_interval_public.py::test_the_release_inputs_are_the_runs_own",  # two fits
    "diagnostics/test_prior_dominance.py::test_a_rare_level_is_the_priors_and_the_run_says_so",  # two fits, ~15 s
    "privacy/test_minibatch.py::test_beta_max_gives_zero_when_no_beta_above_1e_300_meets_the_target",
    "privacy/test_minibatch.py::test_beta_max_bisects_without_overflow_at_the_ends_of_its_range",
    "privacy/test_minibatch.py::test_beta_max_subsampled_meets_the_target_and_is_tight_to_rtol",
    "privacy/test_minibatch_sgld.py::test_beta_max_calibration",
    "privacy/test_proximal.py::test_one_oracle_call_samples_its_target",
    "privacy/test_proximal.py::test_taylor_oracle_costs_2e_evaluations_per_proposal_and_accepts_about_half",
    "privacy/test_proximal.py::test_linearised_acceptance_bound_holds_at_the_worst_case",
    "infer/test_run.py::test_a_count_model_predicts_its_mean_and_refuses_probabilities",
    "infer/test_run.py::test_save_and_load_a_model_run_with_and_without_the_model",
    "infer/test_run.py::test_continuation_outside_extend_is_flagged_and_final_draw_routes_refuse",
    "infer/test_run.py::test_predictions_are_the_mean_over_released_draws",
    "infer/test_posterior.py::test_preconditioned_route_audit_below_claim_and_catches_a_euclidean_accountant",
    "losses/test_nonsmooth.py::test_neighbouring_datasets_give_identical_plans",
    "losses/test_nonsmooth.py::test_cli_sample_with_hinge_and_quantile_losses",
    "losses/test_base.py::test_clipped_sensitivity_holds_on_adversarial_neighbours",
    "losses/test_base.py::test_multinomial_constants",
    "losses/test_glm.py::test_random_search_never_beats_the_declared_constants",
    "losses/test_glm_index.py::test_posterior_mode_runs_the_same_chain_with_and_without_the_index",
    "kernels/test_sgld.py::test_projection_thinning_and_divergence",
    "test_potentials.py::test_model_bridge_matches_numpyro_likelihood_and_prior",
    "test_sound_by_default.py::test_rashomon_neighbours_get_identical_plans_and_reports[pure-kw1]",
    # moved to the slow tier when the third privacy pass's oracle tests pushed ./dev test past 3 minutes
    "privacy/test_ledger_spend.py::test_a_charge_waits_for_another_writer_instead_of_failing",
    "losses/test_glm.py::test_per_example_mean_and_sums_are_the_documented_sums",
    "losses/test_glm.py::test_multinomial_constants_attained",
    "routes/test_posterior_levers.py::test_forecast_matches_the_run_and_warns_near_the_prior",
    "routes/test_calibrate.py::test_fit_runs_the_last_iterate_and_pure_routes_end_to_end",
    "privacy/test_purification.py::test_purify_takes_a_single_draw_or_any_batch_shape_and_counts_draws_outside",
    "losses/test_nonsmooth.py::test_fit_sends_nonsmooth_losses_to_the_proximal_route",
    "kernels/test_sgld.py::test_dtypes_are_kept_under_x64",
    "losses/test_base.py::test_declared_constants_bound_per_example_gradients",
    "losses/test_nonsmooth.py::test_declared_constants_hold_by_brute_force",
    "privacy/test_ledger.py::test_concurrent_processes_cannot_jointly_overspend",
    "kernels/test_sgld.py::test_a_per_example_loss_is_the_loss_in_every_entry_point",
    # moved when issues 37, 39, 40 and 41's tests pushed ./dev test to 214 s on 2 cores (2026-11-28)
    "routes/test_newton_release.py::test_the_release_noise_has_the_stated_sd_and_the_event_the_planned_mu",
    "diagnostics/test_released_interval.py::test_a_default_posterior_run_reports_intervals_near_the_non_private_posterior",
    "losses/test_row_block_default.py::test_results_do_not_depend_on_the_block",
    "test_compilation.py::test_second_process_hits_the_cache",
    "test_privacy_regressions.py::test_extend_a_model_run_keeps_the_clipped_row_count_in_its_report",
    "diagnostics/test_released_interval.py::test_the_arviz_export_carries_the_intervals_and_a_saved_run_gives_them_back",
    # the one driver's walks (issue 38): every entry point end to end; the driver's own tests stay everyday
    "infer/test_driver.py::test_every_entry_point_charges_exactly_its_plans_event_before_reading_the_data",
    "infer/test_driver.py::test_the_cli_runs_through_the_driver",
    # a model run's interval release (issue 37): the end-to-end runs; the plan's checks stay everyday
    "infer/test_model_intervals.py::test_the_ledger_is_charged_the_event_with_the_release_and_the_release_is_made",
    "infer/test_model_intervals.py::test_the_release_noise_is_accounted_in_the_reported_sd",
    "infer/test_model_intervals.py::test_interval_share_0_makes_no_release_and_the_default_says_why_it_skipped",
    # moved when ./dev test measured 201 s on 2 cores with a warm bytecode cache (2026-11-29, --durations=0);
    # the posterior route keeps its everyday runs (test_posterior.py, routes/test_posterior_levers.py's
    # neighbours), names keep their posterior run (test_model_feature_names.py's DataFrame test)
    "infer/test_posterior.py::test_plan_is_a_function_of_public_inputs_only",
    "infer/test_posterior.py::test_a_run_whose_chains_did_not_mix_says_so_in_one_line",
    "infer/test_model_feature_names.py::test_a_loss_run_takes_feature_names_too_and_a_posterior_run_keeps_a_dataframes_columns",
    "diagnostics/test_released_interval.py::test_a_run_without_the_release_says_why_it_has_no_intervals",
    "infer/test_posterior_adaptation.py::test_adapted_run_charges_its_plan_and_extends_over_the_whole_path",
    "infer/test_one_door.py::test_extend_a_posterior_run_composes_every_release",
    # every docs page's python blocks, run (issue 41): Adult fits among them; the parser's tests stay everyday
    "test_docs_snippets.py::test_the_page_runs",
    # moved when ./dev test measured 250 s on 2 idle cores (2026-11-30, --durations=25): the two longest; the
    # replace-one curve and beta_max keep their everyday oracle tests in privacy/test_minibatch.py
    "benchmarks/test_tightness_and_ptr_benchmarks.py::test_minibatch_tightness_rows_order_the_three_accountings",
    "privacy/test_minibatch.py::test_beta_max_refinement_falls_back_when_the_fine_grid_disagrees",
    # moved when ./dev test measured 176-190 s on 2 idle cores in a fresh clone (2026-12-03, --durations=25): the
    # clipped count keeps its everyday posterior-mode test (test_a_clipped_loss_in_the_posterior_mode_gets_the_count_
    # too), NUTS under the model's prior its closed-form one (test_with_a_gaussian_prior_nuts_reproduces_...)
    "infer/test_model_posterior_clip_count.py::test_save_load_and_extend_keep_the_count",
    "diagnostics/test_model_prior.py::test_a_centre_far_out_along_a_barely_informed_direction_leaves_nuts_unharmed",
)


# the slow tier's longest tests, run first (longest first): with `./dev test`'s `--maxschedchunk 1` the
# two workers take one test at a time, so the long ones overlap each other and the short ones fill in
# behind them instead of one long test running alone at the end (measured with `-v` timestamps on the
# slow tier, 2026-11-29: these took 30-320 s each on a loaded machine; the tier's tail had a worker
# idle for ~7 minutes)
LONG_FIRST = (
    "diagnostics/test_released_interval.py::test_coverage_of_the_truth_on_simulated_logistic_data",
    "cli/test_posterior.py::test_demo_full_is_a_posterior_that_passes_its_own_checks",
    "test_docs.py::test_mkdocs_build_strict",
    "test_docs_snippets.py::test_the_page_runs",   # all its pages, in page order (getting-started's is the longest)
    "diagnostics/test_noise_aware.py::test_coverage_of_the_posterior_mode_in_simulation",
    "infer/test_model_intervals.py::test_coverage_of_the_truth_on_a_logistic_model",
    "infer/test_model_public_curvature.py::test_coverage_of_the_truth_with_public_rows",
    "infer/test_model_posterior.py::test_the_kinetic_kernel_on_a_centred_hierarchy_diverges_and_says_so",
    "privacy/test_proximal.py::test_audit_proximal_route_on_linear_worst_case",
    "diagnostics/test_released_interval.py::test_a_default_posterior_run_reports_intervals_near_the_non_private_posterior",
    "infer/test_model_intervals.py::test_a_hierarchical_model_reports_intervals_and_its_prior_informs_mu_and_tau",
    "cli/test_cli.py::test_nonprivate_diagnostics_only_behind_their_flag_and_labelled",
    "benchmarks/test_quality_baselines.py::test_laplace_posterior_is_noise_aware",
    "mechanisms/test_linear_regression_noise.py::test_adassp_releases_each_statistic_with_the_noise_of_its_sensitivity",
    "benchmarks/test_quality_baselines.py::test_batched_runs_have_the_law_of_fit_posterior_and_stop_at_their_own_plan",
    "benchmarks/test_quality_nuts.py::test_nuts_with_fixed_mass_on_a_known_gaussian",
    "audit/test_audit.py::test_eps_lower_bound_matches_direct_formula",
    "cli/test_cli.py::test_demo_prints_report_accuracy_and_diagnostics",
    "audit/test_audit.py::test_trajectory_lower_bound_below_claim",
    "audit/test_audit.py::test_rashomon_path_route_below_claim",
)


def _node(item) -> str | None:
    try:
        return Path(str(item.fspath)).resolve().relative_to(HERE).as_posix() + "::" + item.name.split("[")[0]
    except ValueError:
        return None


def pytest_addoption(parser):
    parser.addoption("--all", action="store_true", default=False,
                     help="run every test: the slow tier (notebooks, NUTS comparisons, audits, slow "
                          "statistical tests) as well as the everyday tier")


def _in_slow_paths(path: Path) -> bool:
    try:
        rel = path.resolve().relative_to(HERE).as_posix()
    except ValueError:
        return False
    return any(rel == s or (s.endswith("/") and rel.startswith(s)) for s in SLOW)


def _is_slow_test(item) -> bool:
    try:
        rel = Path(str(item.fspath)).resolve().relative_to(HERE).as_posix()
    except ValueError:
        return False
    node = rel + "::" + item.name
    return any(node == t or (node.startswith(t + "[") and "[" not in t) for t in SLOW_TESTS)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _in_slow_paths(Path(str(item.fspath))) or _is_slow_test(item):
            item.add_marker(pytest.mark.slow)
    rank = {t: i for i, t in enumerate(LONG_FIRST)}
    items.sort(key=lambda it: rank.get(_node(it), len(rank)))  # stable: everything else keeps its order
    if config.getoption("--all") or config.getoption("-m"):
        return
    keep, slow = [], []
    for item in items:
        (slow if item.get_closest_marker("slow") else keep).append(item)
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = keep


# A worker that dies in native code takes its test with it. In three fresh-clone runs of the whole
# suite (2026-11-29) a worker segfaulted inside libgcc_s's stack unwinder, each time in a different test
# that passes alone and on rerun (tests/parallel/test_sharding.py, tests/routes/test_posterior_levers.py,
# tests/test_sound_by_default.py). The one Python stack caught (faulthandler, third run) was in JAX's
# persistent compilation cache write, `executable.serialize()` (jax/_src/compilation_cache.py,
# put_executable_and_time), under numpyro's fori_collect: an XLA CPU crash, not an answer of the test.
# pytest-xdist hands such a test back with its own hook; it runs once more, on a fresh worker. A test that
# crashes its worker twice fails. The rerun is reported (letter R, "crashed" in the summary) and never
# hides an assertion: only a dead worker's test is rescheduled.
CRASH_RERUNS = 1
_crashes: dict[str, int] = {}


# A worker runs some 1,500 tests, and JAX keeps compiled programs in memory past their last use, each a
# handful of memory maps on the CPU. The CI run of 2026-11-30 failed nine tests on one worker with
# "LLVM compilation error: Cannot allocate memory" (a MemoryError on 1e6 floats): a probe of the same
# tiers counted 33,000 maps in a worker 55 tests in, against the kernel's limit of 65,530
# (vm.max_map_count). The driver releases them before every run (dp_infer.compilation); tests that
# sample outside it are released here, after each test, by the same rule. The first fresh-clone run of the
# whole suite with this rule (2026-11-30) peaked at 32,748 maps a worker, released twice in each worker, and
# had no crashed worker (3081 passed, 36.5 min), where every earlier one had had one: the segfaults above, in
# code that maps memory, may have had the same cause. The rerun hook stays.
def pytest_runtest_teardown(item, nextitem):
    release_compiled_programs()


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    _crashes[crashitem] = _crashes.get(crashitem, 0) + 1
    if _crashes[crashitem] <= CRASH_RERUNS:
        sched.mark_test_pending(crashitem)
        report.outcome = "crashed"


def pytest_report_teststatus(report, config):
    if report.outcome == "crashed":
        return "crashed", "R", ("CRASHED (worker died; rescheduled once)", {"yellow": True})
