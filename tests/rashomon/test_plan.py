"""Oracle tests for dp_infer.rashomon.plan.

Oracles from the documented closed forms (dp_infer/rashomon/threshold.py's module docstring and
plan_rashomon's): the smoothed sensitivity ``G/n + min(L, sqrt(2M) E sqrt(a + tau))`` with
``a = psi + tol + float_slack`` and ``E sqrt(a + tau) = (2 / (3w)) ((a + w)^{3/2} - a^{3/2})``,
the ramp's curvature ``M + min(L^2, 2M (psi + tol + w)) / w`` (w = psi / 20 by default), the
Gaussian smoothing's ``M + sqrt(2/pi) sqrt(2 M psi) / lambda``; beta from the exact Gaussian
profile in 60-digit mpmath; the step rule h beta M_eff <= safety; Lemma D.5's mixing horizon.
"""

import math

import pytest

from dp_infer.domains import Box, L2Ball
from dp_infer.losses import LossConstants
from dp_infer.rashomon.plan import plan_rashomon, mixing_time
from tests.support.mp_oracles import gdp_mu_for_delta_mp

C = LossConstants(lipschitz=3.0, grad_diff=2.0, smoothness=0.5, strong_convexity=0.2)
SLACK, TOL = 1e-5, 1e-6  # the documented defaults (float_slack, tol)


#: the float32 margin the trajectory charges at n <= 33,554 (dp_infer.privacy.float32_margin)
F32 = 1.0 + 1e-3


def _sens(c, n, psi, w, tol):
    a = psi + tol
    mean_sqrt = 2 / (3 * w) * ((a + w) ** 1.5 - a ** 1.5)
    return c.grad_diff / n + min(c.lipschitz, math.sqrt(2 * c.smoothness) * mean_sqrt)


def _curv(c, psi, w, tol):
    return c.smoothness + min(c.lipschitz ** 2, 2 * c.smoothness * (psi + tol + w)) / w


@pytest.mark.parametrize("psi,shift,k", [(0.1, False, 1), (0.1, True, 2), (2.0, False, 1)])
def test_path_plan_is_the_exact_calibration_at_the_smoothed_sensitivity(psi, shift, k):
    n, dim, eps, delta, t = 1000, 3, 1.0, 1e-5, 2.0
    p = plan_rashomon(C, n, dim, psi, eps=eps, delta=delta, horizon=t, num_chains=k, shift_threshold=shift,
                      num_draws=100)
    w = psi / 20
    tol_s = SLACK + (0.0 if shift else TOL)
    assert p.threshold_width == pytest.approx(w, rel=1e-15) and p.tol_sensitivity == pytest.approx(tol_s, rel=1e-15)
    assert p.sensitivity == pytest.approx(_sens(C, n, psi, w, tol_s), rel=1e-13)
    assert p.curvature == pytest.approx(_curv(C, psi, w, tol_s), rel=1e-13)
    # the chain is charged the sensitivity times the float32 margin at this n, 1.001 (dp_infer.privacy.float32_margin)
    assert p.beta == pytest.approx(gdp_mu_for_delta_mp(eps, delta) / (p.sensitivity * F32 * math.sqrt(k * t / 2)),
                                   rel=1e-10)
    assert p.step_size * p.beta * p.curvature <= 0.5 * (1 + 1e-15)
    assert p.num_steps * p.step_size == pytest.approx(t, rel=1e-15) and p.num_steps >= 200
    sp = p.sampling_plan
    assert sp.route == "rashomon_path" and sp.excess_risk_bound == pytest.approx(psi + dim / p.beta, rel=1e-15)
    assert sp.spent()["eps"] <= eps and p.charges() == [(sp.event, 1)] and p.event is sp.event
    assert (p.mode, p.psi, p.num_chains, p.n, p.dim, p.tol, p.shift_threshold) == ("path", psi, k, n, dim, TOL, shift)
    assert (p.thinning, p.burn_in) == (sp.thinning, sp.burn_in) and p.num_steps // p.thinning >= 100
    assert "thresholded gradient sensitivity" in p.assumptions[0] and p.assumptions == sp.assumptions
    assert "replace-one" in " ".join(p.assumptions) and "threshold smoothed" in p.assumptions[3]
    d = p.as_dict()
    assert d["thresholded_sensitivity"] == p.sensitivity and d["horizon"] == p.num_steps * p.step_size
    assert d["shell_factor_bound"] == pytest.approx(math.exp(p.beta * w / 2), rel=1e-14)
    assert d["eps"] == eps and d["mode"] == "path" and d["threshold_curvature"] == p.curvature


def test_nonprivate_plan_follows_the_step_rule_and_charges_nothing():
    beta, t, psi = 40.0, 1.5, 0.3
    p = plan_rashomon(C, 500, 2, psi, mode="nonprivate", beta=beta, horizon=t, num_draws=30, step_safety=0.8,
                      burn_in_fraction=0.25, min_steps=10)
    w = psi / 20
    h0 = min(0.8 / (beta * _curv(C, psi, w, SLACK + TOL)), t / 10)
    steps0 = math.ceil(t / h0)
    thin = max(1, steps0 // 30)
    steps = thin * math.ceil(steps0 / thin)
    assert (p.num_steps, p.thinning) == (steps, thin) and p.step_size == pytest.approx(t / steps, rel=1e-15)
    assert p.burn_in == int(0.25 * (steps // thin)) and p.beta == beta
    assert p.sampling_plan is None and p.event is None and p.charges() == []
    assert p.assumptions[0] == "NON-PRIVATE reference run" and "eps" not in p.as_dict()
    # few steps: min_steps binds
    q = plan_rashomon(C, 500, 2, psi, mode="nonprivate", beta=1e-3, horizon=t, min_steps=300, num_draws=1000)
    assert (q.num_steps, q.thinning, q.burn_in) == (300, 1, 150)


def test_pure_plan_splits_eps_over_chains_and_charges_each():
    dom = L2Ball(2, 3.0)
    p = plan_rashomon(C, 2000, 2, 0.2, mode="pure", eps=2.0, domain=dom, num_chains=4, num_draws=5)
    assert p.sampling_plan.route == "rashomon_pure" and p.charges() == [(p.sampling_plan.event, 4)]
    assert p.sampling_plan.eps == pytest.approx(0.5, rel=1e-15) and p.sampling_plan.spent()["eps"] <= 0.5
    assert p.thinning == p.num_steps and p.burn_in == 0
    box = plan_rashomon(C, 2000, 2, 0.2, mode="pure", eps=2.0, domain=Box([-1, -1], [1, 1]), delta=0)
    assert box.charges()[0][1] == 1
    for bad in (None, L2Ball(3, 1.0)):
        with pytest.raises(ValueError, match="domain"):
            plan_rashomon(C, 2000, 2, 0.2, mode="pure", eps=2.0, domain=bad)
    with pytest.raises(ValueError, match="delta=None"):
        plan_rashomon(C, 2000, 2, 0.2, mode="pure", eps=2.0, domain=dom, delta=1e-5)


def test_gaussian_smoothing_uses_its_own_curvature_and_the_plain_thresholded_sensitivity():
    psi, lam, n = 0.5, 0.2, 1000
    p = plan_rashomon(C, n, 2, psi, eps=1.0, delta=1e-5, smoothing=lam, smoothing_samples=7)
    M = C.smoothness
    assert p.curvature == pytest.approx(M + math.sqrt(2 / math.pi) * math.sqrt(2 * M * psi) / lam, rel=1e-14)
    want = C.grad_diff / n + min(C.lipschitz, math.sqrt(2 * M * (psi + SLACK + TOL)))
    assert p.sensitivity == pytest.approx(want, rel=1e-14)
    assert (p.threshold_width, p.smoothing, p.smoothing_samples) == (0.0, lam, 7)
    assert "NOT flat" in p.assumptions[3] and "7 fixed" in p.assumptions[3]
    with pytest.raises(ValueError, match="threshold_width and smoothing"):
        plan_rashomon(C, n, 2, psi, eps=1.0, delta=1e-5, smoothing=lam, threshold_width=0.1)


def test_psi_zero_is_the_unsmoothed_threshold_and_widths_are_checked():
    p = plan_rashomon(C, 1000, 2, 0.0, eps=1.0, delta=1e-5)
    assert p.threshold_width == 0.0 and p.curvature == C.smoothness and "unsmoothed" in p.assumptions[3]
    assert plan_rashomon(C, 1000, 2, 0.0, eps=1.0, delta=1e-5, threshold_width=0.0).threshold_width == 0.0
    q = plan_rashomon(C, 1000, 2, 0.4, eps=1.0, delta=1e-5, threshold_width=0.1)
    assert q.threshold_width == 0.1 and q.curvature == pytest.approx(_curv(C, 0.4, 0.1, SLACK + TOL), rel=1e-13)
    with pytest.raises(ValueError, match="threshold_width"):
        plan_rashomon(C, 1000, 2, 0.4, eps=1.0, delta=1e-5, threshold_width=0.0)


@pytest.mark.parametrize("kwargs,name", [
    (dict(mode="mcmc"), "mode"), (dict(horizon=0.0), "horizon"), (dict(num_chains=0), "num_chains"),
    (dict(num_draws=0), "num_draws"), (dict(max_steps=0), "max_steps"), (dict(tol=-1.0), "tol"),
    (dict(float_slack=-1.0), "float_slack"), (dict(burn_in_fraction=1.0), "burn_in_fraction"),
    (dict(step_safety=2.0), "step_safety"), (dict(step_safety=0.0), "step_safety"), (dict(min_steps=0), "min_steps"),
    (dict(smoothing=0.0), "smoothing"), (dict(smoothing=0.1, smoothing_samples=0), "smoothing_samples"),
    (dict(beta=3.0), "beta"), (dict(eps=None), "eps"), (dict(delta=None), "delta"),
    (dict(mode="nonprivate", beta=3.0), "eps/delta"), (dict(mode="nonprivate", eps=None, delta=None), "beta is required"),
    (dict(mode="nonprivate", eps=None, delta=None, beta=-1.0), "beta"), (dict(domain=Box([0.0], [1.0])), "domain.dim"),
    (dict(max_steps=100), "max_steps = 100"),
])
def test_bad_inputs_are_refused_by_name(kwargs, name):
    args = dict(eps=1.0, delta=1e-5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        plan_rashomon(C, 1000, 2, 0.3, **args)


def test_bad_loss_n_dim_psi_and_smoothness_are_refused():
    with pytest.raises(ValueError, match="PerExampleLoss or LossConstants"):
        plan_rashomon({"G": 1}, 1000, 2, 0.3, eps=1.0, delta=1e-5)
    for args, name in (((C, 0, 2, 0.3), "n"), ((C, 10, 0, 0.3), "dim"), ((C, 10, 2, -0.1), "psi")):
        with pytest.raises(ValueError, match=name):
            plan_rashomon(*args, eps=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="smoothness"):
        plan_rashomon(LossConstants(lipschitz=1.0, grad_diff=1.0, strong_convexity=0.1), 10, 2, 0.3,
                      eps=1.0, delta=1e-5, smoothing=0.1)
    # the largest allowed step count is accepted
    p = plan_rashomon(C, 1000, 2, 0.3, eps=1.0, delta=1e-5)
    assert plan_rashomon(C, 1000, 2, 0.3, eps=1.0, delta=1e-5, max_steps=p.num_steps).num_steps == p.num_steps
    with pytest.raises(ValueError, match="max_steps"):
        plan_rashomon(C, 1000, 2, 0.3, eps=1.0, delta=1e-5, max_steps=p.num_steps - 1)
    q = plan_rashomon(C, 1000, 2, 0.3, mode="nonprivate", beta=50.0)
    with pytest.raises(ValueError, match="max_steps"):
        plan_rashomon(C, 1000, 2, 0.3, mode="nonprivate", beta=50.0, max_steps=q.num_steps - 1)
    # beta * curvature beyond float: refused by name, not a ZeroDivisionError
    with pytest.raises(ValueError, match="needs inf Langevin steps"):
        plan_rashomon(C, 1000, 2, 0.3, mode="nonprivate", beta=1e308)


@pytest.mark.parametrize("beta,psi", [(2.0, 0.1), (2.0, 0.5), (3.0, 0.5), (30.0, 0.5), (1.0, 0.0)])
def test_mixing_time_is_lemma_d5(beta, psi):
    m, lip, diam, tv = 0.3, 2.0, 4.0, 0.01
    c = beta * m * math.exp(-beta * psi) if beta * psi <= 1 else m / (math.e * psi)
    want = math.log(beta * lip * diam / (2 * tv * tv)) / (2 * c)
    assert mixing_time(beta, m, psi, lip, diam, tv) == pytest.approx(want, rel=1e-14)
    assert mixing_time(1e-6, m, psi, 1e-3, 1e-3, 0.5) == 0.0  # already within tv: no time needed
    for bad in (dict(beta=0.0), dict(strong_convexity=0.0), dict(psi=-1.0), dict(lipschitz=0.0),
                dict(diameter=0.0), dict(tv=0.0)):
        args = dict(beta=beta, strong_convexity=m, psi=psi, lipschitz=lip, diameter=diam, tv=tv)
        args.update(bad)
        with pytest.raises(ValueError, match=next(iter(bad))):
            mixing_time(**args)


def test_path_plan_sensitivity_by_quadrature_and_jensen():
    # the plan-only checks of tests/rashomon/test_sampler.py's path-mode sampling test, without sampling:
    # Delta_psi = G/n + (1/w) int_0^w sqrt(2 M (a + t)) dt (scipy quadrature, not the closed form),
    # strictly between its value at the ramp's start and at its mean (Jensen)
    from scipy import integrate

    from dp_infer.privacy.conversions import gdp_epsilon

    c = LossConstants(lipschitz=3.0, grad_diff=2.0, smoothness=1.0, strong_convexity=1.0)
    n, psi, eps, delta, t, k = 100, 0.01, 1.0, 1e-5, 1.0, 4
    p = plan_rashomon(c, n, 1, psi, eps=eps, delta=delta, horizon=t, num_chains=k, num_draws=200)
    w = p.threshold_width
    a = psi + TOL + SLACK
    avg = integrate.quad(lambda s: math.sqrt(2 * (a + s)), 0, w, epsabs=1e-14)[0] / w
    assert p.sensitivity == pytest.approx(2 / n + avg, rel=1e-10)
    assert 2 / n + math.sqrt(2 * a) < p.sensitivity <= 2 / n + math.sqrt(2 * (a + w / 2))
    mu = p.beta * p.sensitivity * F32 * math.sqrt(k * t / 2)
    assert p.as_dict()["mu"] == pytest.approx(mu, rel=1e-9)
    assert gdp_epsilon(mu, delta) == pytest.approx(eps, rel=1e-6) and p.sampling_plan.spent()["eps"] <= eps


def test_pure_plan_upstream_trajectory_fits_the_per_chain_budget():
    # each chain: a trajectory at ((1 - eps_prime_fraction) eps / K, exp(log_delta)) purified to eps / K
    from dp_infer.privacy.conversions import gdp_epsilon

    c = LossConstants(lipschitz=3.0, grad_diff=2.0, smoothness=1.0, strong_convexity=1.0)
    n, psi, eps, k = 100, 0.05, 1.0, 4
    p = plan_rashomon(c, n, 1, psi, mode="pure", eps=eps, num_chains=k, domain=Box.cube(1, 2.0))
    d = p.as_dict()
    assert d["eps"] == pytest.approx(eps / k, rel=1e-15) and d["delta"] == 0.0
    mu_up = p.beta * p.sensitivity * F32 * math.sqrt(d["horizon"] / 2)
    assert gdp_epsilon(mu_up, log_delta=d["upstream_log_delta"]) <= 0.9 * eps / k * (1 + 1e-9)
    assert "tv_error" not in d and d.get("sampling_error_tv") is None


@pytest.mark.parametrize("mode", ["path", "pure"])
def test_accounted_sensitivity_is_never_below_delta_psi(mode):
    # the plan's event is calibrated from the sensitivity it is given (G / n with G = Delta_psi n):
    # G / n must not round below Delta_psi, or the event's mu is below the sampler's real one
    # (n = 100, psi = 0.1: 0.34016545525820147 < 0.3401654552582015 before the fix)
    from dp_infer.privacy.path import path_mu

    kw = dict(eps=1.0, delta=1e-5) if mode == "path" else dict(eps=1.0, domain=L2Ball(2, 3.0))
    for n in (100, 110, 123, 250, 333, 1000, 4097):
        p = plan_rashomon(C, n, 2, 0.1, mode=mode, num_draws=10, **kw)
        assert p.sampling_plan.sensitivity >= p.sensitivity
        if mode == "path":  # the event's mu at least the path accountant's at the reported Delta_psi
            assert p.event.mu >= path_mu(p.beta, p.sensitivity, 1.0)


def test_documented_defaults():
    # every default of plan_rashomon as documented: horizon 1, one chain, 1000 draws, h beta M_eff = 0.5,
    # >= 200 steps, half the draws burn-in, w = psi / 20, tol 1e-6, float slack 1e-5, 16 smoothing
    # offsets; the pure route's eps' fraction 0.1 and omega 0.01
    explicit = dict(horizon=1.0, num_chains=1, num_draws=1000, step_safety=0.5, min_steps=200, burn_in_fraction=0.5,
                    tol=1e-6, float_slack=1e-5, shift_threshold=False, max_steps=10_000_000)
    for mode, kw in (("path", dict(eps=1.0, delta=1e-5)), ("nonprivate", dict(beta=300.0)),
                     ("pure", dict(eps=1.0, domain=L2Ball(2, 3.0)))):
        extra = dict(eps_prime_fraction=0.1, omega=0.01) if mode == "pure" else {}
        a = plan_rashomon(C, 1000, 2, 0.4, mode=mode, **kw)
        b = plan_rashomon(C, 1000, 2, 0.4, mode=mode, threshold_width=a.threshold_width, **explicit, **extra, **kw)
        assert a.as_dict() == b.as_dict() and a.threshold_width == pytest.approx(0.02, rel=1e-15)
    s = plan_rashomon(C, 1000, 2, 0.4, eps=1.0, delta=1e-5, smoothing=0.1)
    assert s.smoothing_samples == 16 and s.mode == "path"
    assert s.as_dict() == plan_rashomon(C, 1000, 2, 0.4, eps=1.0, delta=1e-5, smoothing=0.1, smoothing_samples=16,
                                        **explicit).as_dict()


def test_default_max_steps_is_ten_million():
    # thinning 1 (num_draws above the step count): the count is ceil(horizon / h), h = 0.5 / (beta M_eff)
    beta = 1.0
    h = 0.5 / (beta * plan_rashomon(C, 1000, 2, 0.4, mode="nonprivate", beta=beta).curvature)
    ok = plan_rashomon(C, 1000, 2, 0.4, mode="nonprivate", beta=beta, horizon=(1e7 - 0.5) * h, num_draws=10 ** 8)
    assert ok.num_steps == 10_000_000 and ok.thinning == 1
    with pytest.raises(ValueError, match="more than max_steps = 1e"):
        plan_rashomon(C, 1000, 2, 0.4, mode="nonprivate", beta=beta, horizon=(1e7 + 0.5) * h, num_draws=10 ** 8)


@pytest.mark.parametrize("mode", ["path", "nonprivate", "pure"])
def test_as_dict_reports_every_plan_field(mode):
    kw = {"path": dict(eps=1.0, delta=1e-5), "nonprivate": dict(beta=30.0),
          "pure": dict(eps=1.0, domain=L2Ball(2, 3.0))}[mode]
    p = plan_rashomon(C, 1000, 2, 0.4, mode=mode, num_chains=2, horizon=1.5, num_draws=50, **kw)
    d = p.as_dict()
    want = {"mode": mode, "psi": 0.4, "beta": p.beta, "step_size": p.step_size, "num_steps": p.num_steps,
            "thinning": p.thinning, "num_chains": 2, "n": 1000, "dim": 2, "thresholded_sensitivity": p.sensitivity,
            "declared_tol": TOL, "smoothing": None, "threshold_width": p.threshold_width,
            "threshold_curvature": p.curvature, "shell_factor_bound": math.exp(p.beta * p.threshold_width / 2),
            "horizon": p.num_steps * p.step_size, "assumptions": p.assumptions}
    for k, v in want.items():
        assert d[k] == pytest.approx(v, rel=1e-15) if isinstance(v, float) else d[k] == v, k
    assert d["horizon"] == pytest.approx(1.5, rel=1e-14) and p.shell_factor_bound == d["shell_factor_bound"]
    if p.sampling_plan is not None:  # the accounted plan's own fields are kept
        sd = p.sampling_plan.as_dict()
        assert all(d[k] == sd[k] for k in ("route", "eps", "delta", "event", "eps_spent") if k in sd)


def test_the_loss_domain_is_used_when_no_domain_is_passed():
    from dp_infer import losses

    loss = losses.logistic(row_norm=1.0, domain=L2Ball(2, 3.0))
    a = plan_rashomon(loss, 1000, 2, 0.3, mode="pure", eps=1.0)
    b = plan_rashomon(loss.constants, 1000, 2, 0.3, mode="pure", eps=1.0, domain=L2Ball(2, 3.0))
    assert a.as_dict() == b.as_dict()
    with pytest.raises(ValueError, match="domain.dim = 2 does not match the parameter dimension 3"):
        plan_rashomon(loss, 1000, 3, 0.3, eps=1.0, delta=1e-5)


def _trajectory_oracle(p, n, dim, eps, delta, t, k, **run):
    # the documented contract: the path mode is plan_trajectory's plan at the thresholded sensitivity
    # Delta_psi and the threshold's curvature M_eff, with the caller's run choices
    from dp_infer.routes.plan import plan_trajectory

    c = LossConstants(lipschitz=C.lipschitz, grad_diff=p.sensitivity * n, smoothness=p.curvature,
                      strong_convexity=C.strong_convexity)
    return plan_trajectory(c, n, dim, eps=eps, delta=delta, horizon=t, num_chains=k, **run)


def test_path_plan_with_a_binding_step_uses_the_threshold_curvature_and_the_run_choices():
    n, dim, eps, delta, t, k, psi = 10 ** 6, 2, 5.0, 1e-5, 3.0, 2, 0.1
    run = dict(num_draws=37, step_safety=0.3, min_steps=50, burn_in_fraction=0.2)
    p = plan_rashomon(C, n, dim, psi, eps=eps, delta=delta, horizon=t, num_chains=k, **run)
    h0 = 0.3 / (p.beta * _curv(C, psi, psi / 20, SLACK + TOL))
    assert h0 < t / 50  # the stability step binds, not min_steps
    steps0 = math.ceil(t / h0)
    assert p.num_steps >= steps0 and p.step_size <= h0 and p.step_size * p.beta * p.curvature <= 0.3
    assert p.num_steps // p.thinning >= 37 and p.burn_in == int(0.2 * (p.num_steps // p.thinning))
    q = _trajectory_oracle(p, n, dim, eps, delta, t, k, **run)
    assert (p.num_steps, p.thinning, p.burn_in, p.step_size) == (q.num_steps, q.thinning, q.burn_in, q.step_size)
    assert p.beta == pytest.approx(q.beta, rel=1e-12)


def test_pure_plan_is_one_purified_chain_per_share_with_the_caller_s_choices():
    from dp_infer.privacy.conversions import gdp_epsilon

    dom, k, eps, t = L2Ball(2, 3.0), 3, 1.5, 2.0
    p = plan_rashomon(C, 5000, 2, 0.2, mode="pure", eps=eps, domain=dom, num_chains=k, horizon=t, num_draws=7,
                      eps_prime_fraction=0.3, omega=0.05)
    d = p.as_dict()
    assert d["num_chains"] == k and p.sampling_plan.num_chains == 1
    assert d["purification"]["omega"] == 0.05 and d["purification"]["eps_prime"] == pytest.approx(0.3 * eps / k)
    # one chain (not k) at the upstream share (1 - 0.3) eps / k, tight
    mu_up = p.beta * p.sensitivity * F32 * math.sqrt(t / 2)
    assert gdp_epsilon(mu_up, log_delta=d["upstream_log_delta"]) == pytest.approx(0.7 * eps / k, rel=1e-6)
    assert any("forced by the caller" in s for s in p.sampling_plan.notes)
    assert p.assumptions == p.sampling_plan.assumptions and p.assumptions[0].startswith("thresholded gradient")
    # the thresholded assumptions replace the calibrated plan's first (its plain gradient sensitivity)
    from dp_infer.routes.calibrate import calibrate

    c = LossConstants(lipschitz=C.lipschitz, grad_diff=p.sensitivity * 5000, smoothness=p.curvature,
                      strong_convexity=C.strong_convexity)
    cal = calibrate(c, 5000, 2, eps=eps / k, route="pure", domain=dom, horizon=t, num_draws=7,
                    eps_prime_fraction=0.3, omega=0.05)
    assert p.assumptions[4:] == cal.assumptions[1:] and len(p.assumptions) == 4 + len(cal.assumptions) - 1
    assert (d["num_draws"], p.num_steps, p.beta) == (cal.as_dict()["num_draws"], cal.num_steps, cal.beta)
    assert cal.as_dict()["num_draws"] != calibrate(c, 5000, 2, eps=eps / k, route="pure", domain=dom, horizon=t,
                                                   eps_prime_fraction=0.3, omega=0.05).as_dict()["num_draws"]



def test_pure_mode_needs_an_l2ball_or_a_box_and_nonprivate_takes_no_eps_or_delta():
    from dp_infer.domains import Domain, Euclidean

    class Segment(Domain):
        dim = 2
        diameter = 1.0

    for dom in (None, Euclidean(2), Segment()):
        with pytest.raises(ValueError, match=r"mode='pure' needs a bounded domain \(L2Ball or Box\): pass domain="):
            plan_rashomon(C, 1000, 2, 0.3, mode="pure", eps=1.0, domain=dom)
    for kw in (dict(eps=1.0), dict(delta=1e-5), dict(eps=1.0, delta=1e-5)):
        with pytest.raises(ValueError, match="eps/delta do not apply"):
            plan_rashomon(C, 1000, 2, 0.3, mode="nonprivate", beta=2.0, **kw)
    with pytest.raises(ValueError, match="got dict"):
        plan_rashomon({"G": 1}, 1000, 2, 0.3, eps=1.0, delta=1e-5)


@pytest.mark.parametrize("mode,kw", [("nonprivate", dict(beta=30.0)), ("path", dict(eps=1.0, delta=1e-5))])
def test_run_choice_ranges_in_every_mode(mode, kw):
    for bad in (dict(step_safety=0.0), dict(step_safety=2.0), dict(burn_in_fraction=1.0),
                dict(burn_in_fraction=-0.1)):
        with pytest.raises(ValueError, match=next(iter(bad)) + " must lie in"):
            plan_rashomon(C, 1000, 2, 0.3, mode=mode, **bad, **kw)
    p = plan_rashomon(C, 1000, 2, 0.3, mode=mode, burn_in_fraction=0.0, step_safety=1.99, **kw)
    assert p.burn_in == 0 and p.step_size * p.beta * p.curvature <= 1.99


def test_refusal_messages_name_the_beta():
    with pytest.raises(ValueError, match=r"beta = 1e\+308 needs inf Langevin steps"):
        plan_rashomon(C, 1000, 2, 0.3, mode="nonprivate", beta=1e308)
    with pytest.raises(ValueError, match="beta = 50 needs"):
        plan_rashomon(C, 1000, 2, 0.3, mode="nonprivate", beta=50.0, max_steps=10)
    with pytest.raises(ValueError, match="the calibrated beta = .* needs 200 Langevin steps"):
        plan_rashomon(C, 1000, 2, 0.3, eps=1.0, delta=1e-5, max_steps=199)
    with pytest.raises(ValueError, match="the calibrated beta = .* needs"):
        plan_rashomon(C, 1000, 2, 0.3, mode="pure", eps=1.0, domain=L2Ball(2, 3.0), max_steps=199)


def test_assumptions_as_a_reviewer_reads_them():
    p = plan_rashomon(C, 1000, 2, 0.0, eps=1.0, delta=1e-5)
    assert p.assumptions[1] == ("L* is computed on the private data and enters only the sampler's threshold (base "
                                "lowered by any excess of its certificate over tol); it is neither released nor "
                                "used in the plan")
    assert p.assumptions[3] == "unsmoothed threshold max{L, L* + psi} (psi = 0)"


def test_default_num_draws_decides_the_thinning():
    # 2000.5 -> 2001 steps: thinning 2001 // 1000 = 2 with the documented 1000 draws
    m = plan_rashomon(C, 1000, 2, 0.4, mode="nonprivate", beta=1.0).curvature
    p = plan_rashomon(C, 1000, 2, 0.4, mode="nonprivate", beta=1000.25 / m)
    assert p.thinning == 2 and p.num_steps == 2002


def test_path_plan_takes_the_caller_s_min_steps():
    # a small beta: the stability step is far above horizon / min_steps, so min_steps sets the count
    p = plan_rashomon(C, 1000, 2, 0.3, eps=1.0, delta=1e-5, min_steps=333, horizon=2.0)
    assert p.num_steps == 333 and p.thinning == 1 and p.step_size == pytest.approx(2.0 / 333, rel=1e-15)
