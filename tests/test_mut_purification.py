"""Oracle tests for survivors of purification.py's mutation run (issue 19)."""

import math

from dp_infer.domains import L2Ball
from dp_infer.privacy import purification as PF


def test_cap_is_the_l1_diameter_of_an_l2_ball():
    # the cap bounds the l1 Wasserstein distance by the domain's l1 diameter, 2 r sqrt(d) for an l2
    # ball of radius r (attained at +-(r / sqrt(d)) (1, ..., 1)); capping at a smaller diameter (the l2
    # one, 2 r) would give less Laplace noise than Lemma 6 requires
    for dim, radius in [(4, 1.0), (9, 0.5), (100, 3.0)]:
        p = PF.purification_parameters(L2Ball(dim, radius), 1.0, 0.01, delta=0.5)
        assert p.capped and p.wasserstein_l1 == 2.0 * radius * math.sqrt(dim)
        assert p.laplace_scale == 2.0 * p.wasserstein_l1 / 1.0


def test_expected_error_bound_is_theorem_1_with_the_closed_form_diameter():
    # E||x_pure - x_apx||_1 <= omega Diam_1 + d b, with Diam_1 of an l2 ball of radius r = 2 r sqrt(d)
    for dim, radius, delta in [(4, 1.0, 1e-6), (9, 0.5, 1e-4), (2, 3.0, 1e-3)]:
        p = PF.purification_parameters(L2Ball(dim, radius), 1.0, 0.5, delta=delta)
        want = p.omega * (2.0 * radius * math.sqrt(dim)) + dim * p.laplace_scale
        assert math.isclose(p.expected_l1_error_bound(), want, rel_tol=1e-12)
        assert p.expected_l1_error_bound() >= dim * p.laplace_scale  # the Laplace part alone


def test_the_purified_event_states_its_assumptions_and_adds_eps_prime():
    p = PF.purification_parameters(L2Ball(3, 1.0), 1.0, 0.5, delta=1e-5)
    ev = PF.purified_event(0.8, p)
    assert ev.epsilon == 0.8 + p.eps_prime and ev.kind == "pure"
    text = " ".join(ev.assumptions)
    assert len(ev.assumptions) == 4
    assert "(eps, delta)-DP" in text and "lies in the domain" in text and "independent" in text
    assert ev.metadata["route"] == "purification" and ev.metadata["upstream_epsilon"] == 0.8
