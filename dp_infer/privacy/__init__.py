"""Privacy accounting for dp_infer: events, an accountant on dp-accounting, and calibrators.

Pure, data-independent functions in float64 on the host. Routes to a guarantee:

* :mod:`.path`          whole Langevin trajectory (mu-GDP, seed-001 Lemma 2.2);
* :mod:`.last_iterate`  released iterate(s) of a contractive (strongly convex) ULA chain
                        (privacy amplification by iteration, linear RDP);
* :mod:`.stationary`    an exact Gibbs draw (Gopi-Lee-Liu GDP; corrected seed-001 Thm 2.7);
* :mod:`.pure`          pure eps exponential mechanism (seed-001 Thm 2.1);
* :mod:`.purification`  (eps, delta) on a bounded domain -> pure (eps + eps') (seed 003, Alg. 1).

Compose the resulting events with :class:`Accountant`; :mod:`.exact` holds numerical oracles.
"""

from .accountant import DEFAULT_ORDERS, Accountant, compose
from .conversions import (
    gdp_delta, gdp_epsilon, gdp_log_delta, gdp_mu, gdp_tradeoff, linear_rdp_epsilon, linear_rdp_log_delta,
    linear_rdp_rho, pure_dp_rdp, rdp_epsilon, rdp_log_delta, tv_delta_slack, zcdp_epsilon_mironov,
    zcdp_rho_for_epsilon_mironov,
)
from .events import (
    ApproxDpEvent, GdpEvent, PrivacyEvent, PureDpEvent, RdpCurveEvent, SubsampledGaussianEvent, ZcdpEvent,
    event_from_dict,
    gaussian_mechanism_event, laplace_mechanism_event,
)
from .last_iterate import (
    contractive_iteration_rho, last_iterate_beta_max, last_iterate_epsilon, last_iterate_event,
    last_iterate_rdp, last_iterate_rho, last_iterate_rho_limit, optimal_shift_allocation, shifted_rdp_ratio,
    ula_contraction,
)
from .path import (
    beta_max, beta_max_rdp, lemma_3_1_beta_unsafe, path_delta, path_epsilon, path_event, path_mu, path_rdp,
    path_rho, path_schedule_event, time_max,
)
from .pure import exp_mech_epsilon, pure_beta, pure_epsilon, pure_event, pure_sensitivity
from .purification import (
    PurificationParams, corollary4_log_delta, purification_parameters, purified_event, purify,
    required_log_delta,
)
from .stationary import (
    gibbs_gdp_mu, regularized_exp_mech_mu, stationary_beta_max, stationary_event, theorem_2_7_beta_max,
)

__all__ = [name for name in dir() if not name.startswith("_") and name not in {"accountant", "events", "exact",
                                                                                 "last_iterate", "path", "pure",
                                                                                 "purification", "stationary"}]
