"""Tests for the discretised-Renyi reference calculator (seed-004 digest §3.5-3.7, §6.4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_infer.privacy.discretised import (
    DiscretisedRequirements,
    discretised_renyi_requirements,
    recipe_horizon,
    recipe_inflated_order,
    recipe_step_condition,
    recipe_step_size,
    weak_triangle_rdp,
)
from dp_infer.privacy.events import RdpCurveEvent
from dp_infer.privacy.conversions import gdp_epsilon, rdp_epsilon
from dp_infer.privacy.exact import gaussian_renyi

LN2 = math.log(2.0)
BASE = dict(n=1000, dim=5, grad_diff=2.0, smoothness=2.0, strong_convexity=0.5)


# ------------------------------------------------------------------ the §3.7 recipe, recomputed


def _alpha_prime(a_s, e_s):
    """Independent transcription of digest §3.7 step 2 (Jensen branch as printed)."""
    a2, e2 = 2 * a_s, e_s / 3
    if a2 >= 4 and e2 >= 3 * np.log(a2) / (a2 - 1):
        return 4 * a2 - 2
    return 12 * a2 * np.log(a2) * np.log(1 / e2) / ((a2 - 1) * e2) - 2


@pytest.mark.parametrize("k,kappa,a_s,e_s,c,eta_ref,T_ref", [
    (10, 4.0, 1 + 2 * math.log(1e5), 0.5, 30.0, 8.1e-16, 2.6e17),
    (10, 4.0, 1 + 2 * math.log(1e5), 0.5, 1.0, 8.6e-13, 2.5e14),
    (2, 2.0, 2.0, 0.5, 1.0, 2.7e-9, 3.2e9),
    (100, 10.0, 1 + 2 * math.log(1e5), 0.5, 30.0, 6.0e-18, 5.8e19),
])
def test_recipe_matches_digest_worked_numbers(k, kappa, a_s, e_s, c, eta_ref, T_ref):
    # horizon and order recomputed from the displayed formulas
    lg = np.log(3 * k * np.log(kappa) / e_s)
    tau_ref = max(2 * a_s * lg, 0.5 * np.log((2 * a_s - 1) * kappa) + a_s * lg)
    tau = recipe_horizon(a_s, e_s, k, kappa)
    ap, _ = recipe_inflated_order(a_s, e_s)
    assert tau == pytest.approx(tau_ref, rel=1e-12)
    assert ap == pytest.approx(_alpha_prime(a_s, e_s), rel=1e-12)
    eta = recipe_step_size(tau, ap, kappa, k, c)
    # digest §3.7.6 table (2 significant figures)
    assert eta == pytest.approx(eta_ref, rel=0.02)
    assert math.ceil(tau / eta) == pytest.approx(T_ref, rel=0.03)


@pytest.mark.parametrize("k,kappa,a_s,e_s,c", [(10, 4.0, 24.0, 0.5, 30.0), (3, 1.5, 5.0, 2.0, 1.0), (50, 100.0, 93.0, 0.05, 10.0)])
def test_step_size_is_tight(k, kappa, a_s, e_s, c):
    tau = recipe_horizon(a_s, e_s, k, kappa)
    ap, _ = recipe_inflated_order(a_s, e_s)
    eta = recipe_step_size(tau, ap, kappa, k, c)
    assert eta <= min(1.0, 2.0 / (kappa + 1.0))
    assert recipe_step_condition(eta, tau, ap, kappa, k, c) < LN2
    assert recipe_step_condition(1.01 * eta, tau, ap, kappa, k, c) > LN2


def test_recipe_monotone_in_k_kappa_alpha_eps():
    def eta(k=10, kappa=4.0, a_s=24.0, e_s=0.5, c=30.0):
        tau = recipe_horizon(a_s, e_s, k, kappa)
        ap, _ = recipe_inflated_order(a_s, e_s)
        return recipe_step_size(tau, ap, kappa, k, c)

    e0 = eta()
    assert eta(k=20) < e0 and eta(kappa=8.0) < e0 and eta(a_s=48.0) < e0 and eta(e_s=0.25) < e0
    assert eta(c=60.0) == pytest.approx(e0 / 4, rel=0.05)  # eta ~ 1/c^2 up to the log term


# ------------------------------------------------------------------ the full calculator


def test_privacy_pipeline_and_conversion_agree_with_events():
    r = discretised_renyi_requirements(1.0, 1e-5, **BASE)
    a = r.alpha
    assert a == pytest.approx(1 + 2 * math.log(1e5))
    assert r.certified_order == pytest.approx(4 * a - 3)
    # exact mechanism: GDP mu = Delta sqrt(beta/m), RDP at 4a-2
    mu = BASE["grad_diff"] / BASE["n"] * math.sqrt(r.beta / BASE["strong_convexity"])
    assert r.exact_mu == pytest.approx(mu, rel=1e-12)
    assert r.exact_rdp == pytest.approx((4 * a - 2) * mu**2 / 2, rel=1e-12)
    assert r.exact_epsilon == pytest.approx(gdp_epsilon(mu, 1e-5), rel=1e-12)
    # weak-triangle chain of digest §3.6 with the discretisation budget in both directions
    chain = weak_triangle_rdp(a, r.discretisation_budget, r.exact_rdp, r.discretisation_budget)
    assert r.rdp == pytest.approx(chain, rel=1e-12)
    # default share 1/2 of the budget
    assert r.discretisation_rdp_term == pytest.approx(r.exact_rdp_term, rel=1e-9)
    # conversion is exactly rdp_epsilon, and the budget was chosen to hit eps
    e, order = rdp_epsilon([a], [r.rdp], 1e-5)
    assert r.epsilon == e and order == a
    assert r.epsilon == pytest.approx(1.0, abs=1e-9)
    assert r.epsilon_thesis == pytest.approx(r.rdp + math.log(1e5) / (a - 1))
    assert r.epsilon_thesis > r.epsilon
    # event form
    ev = r.to_event()
    assert isinstance(ev, RdpCurveEvent)
    assert float(ev.rdp(a)) == pytest.approx(r.rdp)
    d = r.as_dict()
    assert d["num_steps"] == r.num_steps and d["practical"] == r.practical and isinstance(d["reason"], str)


def test_given_beta_and_alpha():
    r0 = discretised_renyi_requirements(1.0, 1e-5, **BASE)
    r = discretised_renyi_requirements(1.0, 1e-5, beta=r0.beta / 4, alpha=30.0, **BASE)
    assert not r.beta_chosen and r.beta == pytest.approx(r0.beta / 4)
    assert r.alpha == 30.0 and r.epsilon <= 1.0 + 1e-12
    assert r.discretisation_budget > 0
    # a beta whose exact mechanism alone exceeds the budget is reported, not silently accepted
    big = discretised_renyi_requirements(1.0, 1e-5, beta=r0.beta * 100, **BASE)
    assert not big.practical and big.discretisation_budget == 0.0 and math.isinf(big.num_steps)
    assert "no discretisation budget" in big.reason and "beta" in big.reason


def test_monotone_smaller_eps_smaller_step_more_steps():
    beta = discretised_renyi_requirements(0.25, 1e-5, **BASE).beta / 4  # fits every eps below
    rs = [discretised_renyi_requirements(e, 1e-5, beta=beta, **BASE) for e in (2.0, 1.0, 0.5, 0.25)]
    h = [r.step_size for r in rs]
    T = [r.num_steps for r in rs]
    assert all(x > y for x, y in zip(h, h[1:])), h
    assert all(x < y for x, y in zip(T, T[1:])), T
    # with beta chosen per eps, the normalised step still shrinks
    rc = [discretised_renyi_requirements(e, 1e-5, **BASE) for e in (2.0, 1.0, 0.5)]
    eta = [r.normalised_step_size for r in rc]
    assert all(x > y for x, y in zip(eta, eta[1:])), eta
    # and a larger movement constant demands more steps
    assert (discretised_renyi_requirements(1.0, 1e-5, movement_constant=60.0, **BASE).num_steps
            > discretised_renyi_requirements(1.0, 1e-5, movement_constant=30.0, **BASE).num_steps)


def _ula_gaussian_law(p, h, T, v0):
    """Exact variance of ULA x <- x - h p x + N(0, 2h) after T steps from N(0, v0) (mode-centred)."""
    vinf = 1.0 / (p * (1.0 - h * p / 2.0))
    decay = math.exp(2.0 * T * math.log1p(-h * p))
    return vinf + decay * (v0 - vinf)


@pytest.mark.parametrize("kw", [
    dict(eps=1.0, delta=1e-5, n=1000, dim=3, grad_diff=2.0, smoothness=2.0, strong_convexity=0.5),
    dict(eps=8.0, delta=1e-2, n=50, dim=1, grad_diff=1.0, smoothness=1.2, strong_convexity=1.0,
         movement_constant=1.0, max_steps=1e12),
    dict(eps=3.0, delta=1e-3, n=200, dim=2, grad_diff=1.0, smoothness=10.0, strong_convexity=1.0, movement_constant=1.0),
])
def test_gaussian_oracle_discrete_chain_within_budget(kw):
    """Quadratic L with Hessian eigenvalues spread over [m, M]: ULA's exact law is Gaussian (digest §7 C8).

    Its exact Renyi divergence to the Gibbs target at the certified order, both directions, summed
    over coordinates, must not exceed the budget the calculator claims for its (h, T).
    """
    r = discretised_renyi_requirements(**kw)
    m, M, k = kw["strong_convexity"], kw["smoothness"], kw["dim"]
    lam = np.geomspace(m, M, k) if k > 1 else np.array([M])
    v0 = r.init_variance
    h, T, a = r.step_size, r.num_steps, r.certified_order
    fwd = rev = 0.0
    for p in r.beta * lam:
        v = _ula_gaussian_law(p, h, T, v0)
        fwd += gaussian_renyi(a, 0.0, v, 0.0, 1.0 / p)
        rev += gaussian_renyi(a, 0.0, 1.0 / p, 0.0, v)
    assert max(fwd, rev) <= r.discretisation_budget, (fwd, rev, r.discretisation_budget)
    # the oracle is a valid Gaussian law (h below the ULA stability threshold 2/(beta M))
    assert h * r.beta * M < 2.0


def test_gaussian_oracle_closed_form_sanity():
    """The helper reproduces the digest §6.4 stationary variance 1/(m(1 - h m/2)) (m=2, h=0.3: 0.7143)."""
    v = _ula_gaussian_law(2.0, 0.3, 10**6, 1.0)
    assert v == pytest.approx(1.0 / (2.0 * (1.0 - 0.3)), rel=1e-12)
    # and the stationary Renyi bias recomputed from the closed form of digest §7 C8
    a, h = 10.0, 0.1
    closed = 0.5 * math.log(1 - h / 2) + math.log((1 - h / 2) / (1 - a * h / 2)) / (2 * (a - 1))
    assert gaussian_renyi(a, 0.0, _ula_gaussian_law(1.0, h, 10**6, 1.0), 0.0, 1.0) == pytest.approx(closed, rel=1e-9)


def test_kappa_one_needs_no_steps():
    r = discretised_renyi_requirements(1.0, 1e-5, n=100, dim=3, grad_diff=1.0, smoothness=1.0, strong_convexity=1.0)
    assert r.num_steps == 0.0 and r.normalised_time == 0.0 and r.practical


def test_underdamped_is_never_practical():
    r = discretised_renyi_requirements(1.0, 1e-5, kernel="underdamped", max_steps=math.inf, **BASE)
    assert not r.practical and "no end-to-end certificate" in r.reason
    assert r.normalised_step_size <= 2.0 / (1.0 * BASE["smoothness"] / BASE["strong_convexity"])
    assert r.step_condition < LN2
    with pytest.raises(ValueError, match="underdamped"):
        r.to_event()


@pytest.mark.parametrize("override,param", [
    (dict(eps=0.0), "eps"), (dict(eps=-1.0), "eps"), (dict(delta=1.0), "delta"), (dict(delta=0.0), "delta"),
    (dict(n=0), "n"), (dict(n=2.5), "n"), (dict(dim=0), "dim"),
    (dict(smoothness=0.1), "smoothness"), (dict(strong_convexity=-1.0), "strong_convexity"),
    (dict(grad_diff=-1.0), "grad_diff"), (dict(lipschitz=1.0), "grad_diff"),
    (dict(beta=0.0), "beta"), (dict(alpha=1.0), "alpha"), (dict(alpha=1.01), "alpha"),
    (dict(discretisation_share=1.0), "discretisation_share"), (dict(discretisation_share=0.0), "discretisation_share"),
    (dict(movement_constant=0.0), "movement_constant"), (dict(kernel="mala"), "kernel"),
    (dict(max_steps=0), "max_steps"), (dict(underdamped_gamma=1.0), "underdamped_gamma"),
])
def test_bad_inputs_name_the_parameter(override, param):
    kw = dict(eps=1.0, delta=1e-5, **BASE)
    kw.update(override)
    with pytest.raises(ValueError, match=param):
        discretised_renyi_requirements(**kw)


def test_lipschitz_means_grad_diff_twice():
    kw = {k: v for k, v in BASE.items() if k != "grad_diff"}
    a = discretised_renyi_requirements(1.0, 1e-5, lipschitz=1.0, **kw)
    b = discretised_renyi_requirements(1.0, 1e-5, grad_diff=2.0, **kw)
    assert a.sensitivity == b.sensitivity == pytest.approx(2.0 / BASE["n"])
    assert a == b


def test_adult_sized_example_is_flagged():
    r = discretised_renyi_requirements(1.0, 1e-5, n=30162, dim=108, grad_diff=2.0, smoothness=0.25,
                                       strong_convexity=1e-3, max_steps=1e7)
    msg = (f"Adult-sized: alpha={r.alpha:.4g}, alpha_s={r.certified_order:.4g}, alpha'={r.inflated_order:.4g}, "
           f"beta={r.beta:.4g}, exact mu={r.exact_mu:.4g} (eps alone {r.exact_epsilon:.3g}), "
           f"eps_s={r.discretisation_budget:.4g}, kappa={r.kappa:.4g}, tau={r.integrated_time:.4g}, "
           f"h={r.step_size:.3g}, T={r.num_steps:.3g}, eps={r.epsilon:.4g}; {r.reason}")
    print(msg)
    assert isinstance(r, DiscretisedRequirements)
    assert r.practical == (r.num_steps <= 1e7), msg
    assert not r.practical, msg
    assert r.epsilon <= 1.0 + 1e-9, msg
    assert "max_steps" in r.reason, msg
