"""Private mechanisms beyond the Langevin routes, each with its privacy as accountant events.

* :mod:`.generalized_gaussian` -- Generalized Gaussian noise (seed 004 ch. 2): sampler, exact
  privacy (dp-accounting PLD, quadrature RDP), calibration; the thesis's closed form for reference.
* :mod:`.queries` -- many counting / linear queries with GG, Gaussian or Laplace noise.
* :mod:`.sparse_vector` -- sparse vector (Theorem 36) and its composition with GG (Theorem 37).
* :mod:`.purifier` -- purification of ANY (eps, delta) mechanism with bounded output (seed 003
  Alg. 1, the TV variant, Alg. 2 for finite outputs).
* worked examples of purification: :mod:`.noisy_gd` (pure DP-GD and DP-SGD), :mod:`.linear_regression` (pure
  AdaSSP, Alg. 13), :mod:`.ptr` (pure Propose-Test-Release, Alg. 9-10), :mod:`.query_release` (pure query
  release: MWEM + binary embedding, Alg. 14-16).
* :mod:`.iterated_em` -- the iterated exponential mechanism (seed 001 Algorithm 2) and the single
  exponential mechanism, pure eps, exact draws by :mod:`.gibbs_rejection`.
* :mod:`.mirror_descent` -- public-data-assisted mirror descent (seed 004 ch. 4, PDA-DPMD) and its
  baseline, DP-GD warm-started on public data.

Every mechanism returns a :class:`Release` (value, events, data-independent params, randomness
description); every public entry takes ``seed=None`` (secret key from the operating system).
"""

from ._release import Release
from .linear_regression import adassp, pure_adassp
from .generalized_gaussian import (
    calibrate_gg_sigma, generalized_gaussian_mechanism, gg_approx_event, gg_delta, gg_epsilon,
    gg_log_density, gg_pld, gg_rdp, gg_rdp_event, sample_generalized_gaussian, thesis_sigma,
)
from .query_release import mwem, pure_mwem
from .noisy_gd import dp_gd, dp_sgd, pure_dp_gd, pure_dp_sgd
from .ptr import propose_test_release, ptr_median, pure_ptr_median
from .purifier import plan_purification, purify, purify_discrete
from .queries import answer_queries, conjunction_queries, expected_max_error, random_conjunctions
from .iterated_em import exponential_mechanism, iterated_exponential_mechanism
from .mirror_descent import dp_gd_warm_start, pda_dpmd
from .sparse_vector import (
    calibrate_sparse_vector, gg_sparse_vector_mechanism, numeric_sparse, sparse_vector_mechanism,
)

__all__ = [
    "Release",
    "adassp", "pure_adassp",
    "calibrate_gg_sigma", "generalized_gaussian_mechanism", "gg_approx_event", "gg_delta", "gg_epsilon",
    "gg_log_density", "gg_pld", "gg_rdp", "gg_rdp_event", "sample_generalized_gaussian", "thesis_sigma",
    "mwem", "pure_mwem",
    "dp_gd", "pure_dp_gd", "dp_sgd", "pure_dp_sgd",
    "propose_test_release", "ptr_median", "pure_ptr_median",
    "plan_purification", "purify", "purify_discrete",
    "answer_queries", "conjunction_queries", "expected_max_error", "random_conjunctions",
    "calibrate_sparse_vector", "gg_sparse_vector_mechanism", "numeric_sparse", "sparse_vector_mechanism",
    "exponential_mechanism", "iterated_exponential_mechanism",
    "dp_gd_warm_start", "pda_dpmd",
]
