"""Test tiers and the environment every test runs in.

Two tiers (README, "Tests"):

* ``./dev test`` (``pytest``): the everyday tier, at most 3 minutes on 2 cores -- the fast
  oracles, the privacy, accounting and planning tests, and one end-to-end run per route;
* ``./dev test --all`` (``pytest --all``, what ``.ci/run`` runs): everything, the slow tier
  included -- notebooks, NUTS comparisons, empirical audits and the slow statistical tests.

A test is in the slow tier when it is marked ``@pytest.mark.slow`` or lives in a file or folder of
``SLOW`` below (whole files whose every test samples at length). Giving ``-m`` chooses by marker
instead (``pytest -m slow`` runs the slow tier alone).
"""

import os
from pathlib import Path

import pytest

# Keep JAX on the CPU and quiet; tests choose their own precision.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

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


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _in_slow_paths(Path(str(item.fspath))):
            item.add_marker(pytest.mark.slow)
    if config.getoption("--all") or config.getoption("-m"):
        return
    keep, slow = [], []
    for item in items:
        (slow if item.get_closest_marker("slow") else keep).append(item)
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = keep
