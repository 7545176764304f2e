"""Oracle tests for dp_infer.routes.posterior.

Oracles from the module's documented formulas, computed here independently: k effective draws
over K chains of a direction of curvature c take sample time ``2 k gamma / (K c)`` (plus the
burn-in time); the path's GDP ``mu_path = beta Delta_P sqrt(K t / (2 gamma))`` with the
sensitivity in the preconditioner's metric ``Delta_P = 2 a sqrt(max_x x^T P x) / n`` (P =
(beta kappa_P S + Lambda)^-1, kappa_P = kappa / 2, kappa = (M - m) / R^2); beta the largest value
with ``mu_path^2 + mu_S^2 <= mu(eps, delta)^2`` where mu(eps, delta) is the exact Gaussian
profile's (60-digit mpmath) -- checked on the safe side without tolerance; the composition against
dp-accounting's PLD of two Gaussian mechanisms; the step from the largest eigenvalue of
``P (beta kappa (S + noise I) + Lambda)`` (a generalised eigenproblem, not the Cholesky path).
"""

import dataclasses
import math

import numpy as np
import pytest
from scipy import linalg, optimize

from dp_infer import losses
from dp_infer.losses import LossConstants, PerExampleLoss
from dp_infer.privacy import path as path_privacy
from dp_infer.routes.posterior import DEFAULT_ESS, DEFAULT_MIXING_RATE, plan_posterior, preconditioner_chol
from dp_infer.privacy.float32_margin import FLOAT32_GRADIENT_MARGIN
from dp_infer.routes.preconditioning import SecondMoment, prior_second_moment
from dp_infer.releases.second_moment import public_second_moment
from dp_infer.privacy.conversions import gdp_epsilon, gdp_mu
from dp_infer.privacy.events import GdpEvent
from dp_infer.schema.admissible import AdmissibleRows, ConstantBlock, IntervalBlock, OneOfBlock
from tests.support.mp_oracles import gdp_delta_mp, gdp_mu_for_delta_mp
from tests.support.strict_tolerance import approx

#: the planned sensitivity's float32 margin (dp_infer.privacy.float32_margin.FLOAT32_GRADIENT_MARGIN)
F32 = 1.0 + FLOAT32_GRADIENT_MARGIN


def _logistic(R=2.0):
    return losses.logistic(row_norm=R)


def _safe_and_tight(p, eps, delta, mu_star):
    """The plan's total mu meets (eps, delta) exactly (60-digit profile) and wastes < 1e-9."""
    assert gdp_delta_mp(eps, p.event.mu) <= delta
    assert p.event.mu >= mu_star * (1 - 1e-9)


def _steps(t, h0, draws):
    s0 = math.ceil(t / h0)
    thin = max(1, s0 // draws)
    return thin * math.ceil(s0 / thin), thin


@pytest.mark.parametrize("kw", [
    dict(),  # the documented defaults: ess 400, 4 chains, c = 0.4, burn-in time 10, h M_phi = 0.25
    dict(ess=50, num_chains=2, mixing_rate=0.9, burn_in_time=3.0, step_safety=1.5, num_draws=40),
    dict(kernel="underdamped"),  # default friction 2
    dict(kernel="underdamped", friction=0.7, ess=120, num_chains=3, num_draws=25, step_safety=0.3),
    dict(kernel="underdamped", friction=5.0, ess=30, num_chains=1, step_safety=1.9),
    dict(ess=1, burn_in_time=0.1, step_safety=1.9),  # short horizon: t / 200 binds, thinning 1
    dict(kernel="underdamped", friction=0.5, ess=1, burn_in_time=0.05, step_safety=1.9, num_draws=150),
])
@pytest.mark.parametrize("lam", [1.0, (0.5, 2.0, 4.0)])
def test_prior_preconditioner_plan_is_the_closed_form(kw, lam):
    n, dim, R, eps, delta = 500, 3, 2.0, 1.0, 1e-5
    p = plan_posterior(_logistic(R), n, dim, eps=eps, delta=delta, prior_precision=lam, **kw)
    lam_v = np.broadcast_to(np.asarray(lam, dtype=float), (dim,))
    ess, K = kw.get("ess", 400), kw.get("num_chains", 4)
    c, burn = kw.get("mixing_rate", 0.4), kw.get("burn_in_time", 10.0)
    safety, draws = kw.get("step_safety", 0.25), kw.get("num_draws", 1000)
    under = kw.get("kernel") == "underdamped"
    gamma = kw.get("friction", 2.0) if under else 1.0
    t_s = 2 * ess * gamma / (K * c)
    t = t_s + burn
    Delta = 2 * R / math.sqrt(lam_v.min()) / n * F32    # link bound 1, P = Lambda^-1, ||x|| <= R; float32 margin
    mu_star = gdp_mu_for_delta_mp(eps, delta)
    beta_star = mu_star / (Delta * math.sqrt(K * t / (2 * gamma)))
    assert beta_star * (1 - 1e-9) <= p.beta <= beta_star * (1 + 1e-14)
    _safe_and_tight(p, eps, delta, mu_star)
    assert p.sensitivity == approx(Delta, rel=1e-14)
    assert p.event.mu == approx(p.beta * p.sensitivity * math.sqrt(K * t / (2 * gamma)), rel=1e-14)
    kappa = 0.25                                        # (M - m) / R^2 = 1/4 for logistic
    M_phi = 1 + p.beta * kappa * R * R / lam_v.min()    # C^T (Lambda + beta kappa R^2 I) C
    h0 = safety / M_phi if not under else min(safety / math.sqrt(M_phi), safety / gamma)
    steps, thin = _steps(t, min(h0, t / 200), draws)
    assert (p.num_steps, p.thinning) == (steps, thin) and p.step_size == approx(t / steps, rel=1e-15)
    assert p.step_size <= min(h0, t / 200) * (1 + 1e-15) and p.num_steps >= 200
    assert p.burn_in == math.ceil((steps // thin) * burn / t)
    assert p.relaxation_time == approx(1 / (c * p.step_size), rel=1e-15)
    assert (p.route, p.target, p.lam, p.kernel, p.n, p.dim, p.num_chains) == \
        ("trajectory", "posterior", 0.0, kw.get("kernel", "langevin"), n, dim, K)
    assert p.friction == (gamma if under else None) and p.excess_risk_bound is None
    assert (p.eps, p.delta) == (eps, delta) and p.prior_precision == tuple(lam_v)
    assert np.array_equal(np.asarray(p.preconditioner), np.diag(1 / lam_v))
    post = p.posterior
    assert post.ess_target == ess and post.predicted_ess == approx(ess, rel=1e-14)
    assert (post.mixing_rate_declared, post.burn_in_time) == (c, burn)
    assert post.sample_time == approx(t_s, rel=1e-15) and post.beta_over_n == approx(p.beta / n, rel=1e-15)
    assert post.interval_inflation == approx(math.sqrt(n / p.beta), rel=1e-15)
    assert (post.step.curvature, post.step.preconditioner_curvature) == (kappa, kappa / 2)
    assert post.mu_path == p.event.mu and post.mu_second_moment == 0.0
    assert post.step.bound_M_phi == approx(M_phi, rel=1e-13)
    mu_next = p.beta * Delta * math.sqrt(K * (t + t_s / ess) / (2 * gamma))
    extra = gdp_epsilon(mu_next, delta) - gdp_epsilon(p.event.mu, delta)
    assert extra > 0 and post.eps_per_extra_effective_draw == approx(extra, rel=1e-9)
    assert post.second_moment == prior_second_moment().describe()
    assert post.sensitivity_bound == "row-norm ball"
    parts = p.event.metadata["parts"]
    assert len(parts) == 1 and parts[0]["mu"] == p.event.mu and parts[0]["kind"] == "gdp"
    assert any("preconditioner's metric" in a for a in p.event.assumptions)
    assert f"n = {n}" in " ".join(p.assumptions) and "<= 1.0" in p.assumptions[1]
    assert f"{R:g}" in p.assumptions[2] and f"{ess}" in p.notes[0]
    assert p.assumptions[0] == "Gaussian prior N(0, diag(1 / prior_precision)), data independent"
    assert p.assumptions[4] == ("initial point (the prior mean), beta, preconditioner, step, horizon and chains are "
                                "fixed before sampling from public inputs and accounted releases only")
    assert f"interval inflation sqrt(n / beta) = {math.sqrt(n / p.beta):.3g} " in p.notes[1]
    C = preconditioner_chol(p)
    assert np.allclose(C @ C.T, np.diag(1 / lam_v), rtol=1e-15, atol=0) and np.allclose(C, np.tril(C))


def _precond_sensitivity(S, beta, kappa_P, lam, R, n):
    P = np.linalg.inv(beta * kappa_P * S + np.diag(lam))
    return 2 * R * math.sqrt(np.linalg.eigvalsh(0.5 * (P + P.T))[-1]) / n


def test_public_second_moment_beta_is_the_root_of_the_beta_dependent_sensitivity():
    rng = np.random.default_rng(3)
    n, dim, R, eps, delta, K, ess = 300, 3, math.sqrt(3), 2.0, 1e-6, 4, 200
    Xpub = rng.uniform(-1, 1, size=(50, dim))
    S = Xpub.T @ Xpub / 50
    lam = np.array([0.3, 1.0, 2.0])
    p = plan_posterior(_logistic(R), n, dim, eps=eps, delta=delta, prior_precision=lam, ess=ess,
                       second_moment=public_second_moment(Xpub))
    t = 2 * ess / (K * 0.4) + 10.0
    mu_star = gdp_mu_for_delta_mp(eps, delta)
    f = lambda b: b * _precond_sensitivity(S, b, 0.125, lam, R, n) * F32 * math.sqrt(K * t / 2) - mu_star  # noqa: E731
    beta_star = optimize.brentq(f, 1e-8, 1e8, xtol=1e-300, rtol=1e-15)
    assert beta_star * (1 - 1e-9) <= p.beta <= beta_star * (1 + 1e-12)
    _safe_and_tight(p, eps, delta, mu_star)
    assert p.sensitivity == approx(_precond_sensitivity(S, p.beta, 0.125, lam, R, n) * F32, rel=1e-12)
    A = p.beta * 0.125 * S + np.diag(lam)
    assert np.allclose(np.asarray(p.preconditioner), np.linalg.inv(A), rtol=1e-12, atol=0)
    assert np.array_equal(np.asarray(p.preconditioner), np.asarray(p.preconditioner).T)
    # step from the full curvature kappa = 1/4 (not kappa_P): lambda_max(P A_step), A_step = beta kappa S + Lambda
    M_phi = linalg.eigh(p.beta * 0.25 * S + np.diag(lam), A, eigvals_only=True)[-1]
    assert p.posterior.step.bound_M_phi == approx(M_phi, rel=1e-12)
    steps, thin = _steps(t, min(0.25 / M_phi, t / 200), 1000)
    assert (p.num_steps, p.thinning) == (steps, thin)
    # a caller's preconditioner_curvature replaces kappa / 2 in P only
    q = plan_posterior(_logistic(R), n, dim, eps=eps, delta=delta, prior_precision=lam, ess=ess,
                       second_moment=public_second_moment(Xpub), preconditioner_curvature=2.0)
    assert q.posterior.step.preconditioner_curvature == 2.0 and q.posterior.step.curvature == 0.25
    assert np.allclose(np.asarray(q.preconditioner), np.linalg.inv(q.beta * 2.0 * S + np.diag(lam)), rtol=1e-12)


def _private_sm(S, mu, noise_bound):
    ev = GdpEvent(mu=mu, label="private_second_moment", assumptions=("second moment released",))
    return SecondMoment(np.asarray(S), "private", event=ev, noise_sd=0.01, noise_norm_bound=noise_bound)


@pytest.mark.parametrize("mu_sm", [0.1, 0.25, 1e-6])
def test_private_second_moment_composes_in_gdp_and_matches_dp_accounting(mu_sm):
    import dp_accounting as dpa
    from dp_accounting.pld import pld_privacy_accountant as pld

    n, dim, R, eps, delta = 400, 2, 1.5, 1.0, 1e-5
    S = np.array([[0.8, 0.3], [0.3, 0.5]])
    sm = _private_sm(S, mu_sm, 0.2)
    p = plan_posterior(_logistic(R), n, dim, eps=eps, delta=delta, prior_precision=(1.0, 0.5), ess=100,
                       num_chains=2, second_moment=sm)
    mu_star = gdp_mu_for_delta_mp(eps, delta)
    _safe_and_tight(p, eps, delta, mu_star)
    mu_path = p.posterior.mu_path
    assert p.posterior.mu_second_moment == mu_sm
    assert math.hypot(mu_path, mu_sm) == approx(p.event.mu, rel=1e-14)
    t = 2 * 100 / (2 * 0.4) + 10.0
    assert mu_path == approx(p.beta * p.sensitivity * math.sqrt(2 * t / 2), rel=1e-14)
    parts = p.event.metadata["parts"]
    assert [q["label"] for q in parts] == ["langevin_path", "private_second_moment"]
    assert [q["mu"] for q in parts] == [mu_path, mu_sm]
    assert "second moment released" in p.event.assumptions
    assert p.posterior.second_moment == sm.describe()
    # two Gaussian mechanisms (sensitivity 1, noise 1 / mu: mu-GDP) composed by dp-accounting's PLD:
    # the plan's eps, up to the PLD's pessimistic discretisation
    acc = pld.PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4)
    acc.compose(dpa.ComposedDpEvent([dpa.GaussianDpEvent(1 / mu_path), dpa.GaussianDpEvent(1 / mu_sm)]))
    assert eps * (1 - 1e-9) <= acc.get_epsilon(delta) <= eps * (1 + 2e-3)
    # the step uses S plus the noise's norm bound in every direction
    A = p.beta * 0.125 * S + np.diag([1.0, 0.5])
    M_phi = linalg.eigh(p.beta * 0.25 * (S + 0.2 * np.eye(2)) + np.diag([1.0, 0.5]), A, eigvals_only=True)[-1]
    assert p.posterior.step.bound_M_phi == approx(M_phi, rel=1e-12)
    # the extra draw's price includes the second moment's part
    mu_next = math.hypot(p.beta * p.sensitivity * math.sqrt(2 * (t + (t - 10.0) / 100) / 2), mu_sm)
    want = gdp_epsilon(mu_next, delta) - gdp_epsilon(p.event.mu, delta)
    assert p.posterior.eps_per_extra_effective_draw == approx(want, rel=1e-9)


def test_a_second_moment_spending_the_whole_budget_is_refused():
    mu = gdp_mu_for_delta_mp(1.0, 1e-5)
    S = np.eye(2)
    for m in (gdp_mu(1.0, 1e-5), mu * (1 + 1e-9), 10.0):  # the library's own target mu: nothing left
        with pytest.raises(ValueError, match="already spends"):
            plan_posterior(_logistic(), 400, 2, eps=1.0, delta=1e-5, prior_precision=1.0, second_moment=_private_sm(S, m, 0.0))
    # just below: a (tiny) path budget remains and is used
    p = plan_posterior(_logistic(), 400, 2, eps=1.0, delta=1e-5, prior_precision=1.0, ess=1,
                       second_moment=_private_sm(S, mu * (1 - 1e-3), 0.0))
    assert 0 < p.posterior.mu_path <= math.sqrt(mu ** 2 - (mu * (1 - 1e-3)) ** 2) * (1 + 1e-12)


def _rows():
    blocks = (ConstantBlock("icpt", 0, 1.0), IntervalBlock("num", 1, -2.0, 1.0),
              OneOfBlock("cat", (2, 3, 4), (1.0, 1.0, 1.0)))
    return AdmissibleRows(5, blocks, ("icpt", "num", "cat"))


def test_the_path_cost_names_the_bound_that_gives_its_sensitivity_and_charges_it_with_the_margin():
    # closed form, prior-only metric P = Lambda^-1: the row-norm ball gives 2 R / (sqrt(lam_min) n); the clip
    # 2 radius / (sqrt(beta) n). The label is decided on the real-arithmetic bounds (a clip within the float32
    # margin of the ball's bound, but above it, is not the bound), the charge is the bound times 1 + margin;
    # with an adapted metric only the clip holds, whatever the rows' bound
    from dp_infer.routes.posterior_path import PathCost, SensitivityBound

    lam = np.array([4.0, 1.0, 9.0])
    n, R, beta = 500, 2.0, 30.0
    ball = 2 * R / (math.sqrt(lam.min()) * n)
    tie = ball * math.sqrt(beta) * n / 2  # the clip radius whose bound equals the ball's

    def cost(radius, adapt=False):
        return PathCost(_logistic(R).constants, n, prior_second_moment(), 0.1, lam, None, R, radius, adapt, (1.0,),
                        10.0, 1.0, 1.0, None, 4)

    b = cost(None).sensitivity_bound(beta)
    assert (b.real, b.source) == (approx(ball, rel=1e-14), SensitivityBound.BALL)
    assert cost(None).sensitivity(beta) == b.planned == b.real * F32
    above = cost(tie * (1 + FLOAT32_GRADIENT_MARGIN / 2)).sensitivity_bound(beta)
    assert (above.real, above.source) == (b.real, SensitivityBound.BALL)
    below = cost(tie * (1 - 1e-6)).sensitivity_bound(beta)
    assert below.source == SensitivityBound.CLIP and below.real == approx(ball * (1 - 1e-6), rel=1e-12)
    adapted = cost(3 * tie, adapt=True).sensitivity_bound(beta)
    assert adapted.source == SensitivityBound.CLIP and adapted.real == approx(3 * ball, rel=1e-12)
    # the margin grows with n past n = 2^25 1e-3 = 33,554 (the float32 excess grows linearly in n)
    from dp_infer.privacy.float32_margin import float32_gradient_margin

    assert float32_gradient_margin(n) == FLOAT32_GRADIENT_MARGIN == 1e-3
    assert float32_gradient_margin(33_554) == 1e-3 < float32_gradient_margin(33_555)
    big = dataclasses.replace(cost(None), n=10 ** 6).sensitivity_bound(beta)
    assert big.margin == 10 ** 6 / 2 ** 25 and big.planned == big.real * (1 + 10 ** 6 / 2 ** 25)
    assert big.real == approx(ball * n / 10 ** 6, rel=1e-14)
    # the plan reads its label from the same bound, and charges the margin of its n
    p = plan_posterior(_logistic(R), n, 3, eps=1.0, delta=1e-5, prior_precision=lam, ess=40, clip_radius=None)
    assert p.posterior.sensitivity_bound == SensitivityBound.BALL
    p = plan_posterior(_logistic(R), 10 ** 6, 3, eps=1.0, delta=1e-5, prior_precision=lam, ess=40, clip_radius=None)
    assert p.sensitivity == approx(2 * R / (math.sqrt(lam.min()) * 10 ** 6) * (1 + 10 ** 6 / 2 ** 25), rel=1e-14)
    # and states the margin of its n, and the bound that gives its sensitivity, in the path event's assumptions
    said = p.event.assumptions
    assert "sensitivity in the metric times 1 + 0.0298 for the chain's float32 rounding " \
           "(dp_infer.privacy.float32_margin)" in said
    assert f"sensitivity in the preconditioner's metric: {SensitivityBound.BALL} " \
           "(dp_infer.privacy.metric_sensitivity)" in said


def test_admissible_rows_bound_the_sensitivity_by_brute_force():
    lam = np.array([1.0, 0.5, 2.0, 4.0, 0.25])
    n, R = 200, 3.0
    p = plan_posterior(_logistic(R), n, 5, eps=1.0, delta=1e-5, prior_precision=lam, ess=40, rows=_rows())
    # P = Lambda^-1 diagonal: the block bound is exact; brute force over the 2 x 4 vertex rows
    verts = [np.array([1.0, v, *e]) for v in (-2.0, 1.0) for e in ([0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1])]
    q = max(float(x @ (x / lam)) for x in verts)
    want = min(2 * math.sqrt(q), 2 * R / math.sqrt(lam.min())) / n * F32
    assert 2 * math.sqrt(q) < 2 * R / math.sqrt(lam.min())  # the rows' bound is the smaller one here
    assert p.sensitivity == approx(want, rel=1e-14)
    assert p.posterior.sensitivity_bound == "admissible rows (block bound)"
    assert p.assumptions[2] == "rows in the admissible set of the schema"
    with pytest.raises(ValueError, match="rows have dim 5 but the model has 4"):
        plan_posterior(_logistic(R), n, 4, eps=1.0, delta=1e-5, prior_precision=1.0, rows=_rows())


def _custom(link=None, G=2.0, M=1.0, m=0.0, R=1.0):
    c = LossConstants(lipschitz=1.0, grad_diff=G, smoothness=M, strong_convexity=m, link_derivative_bound=link)
    return PerExampleLoss("custom", lambda th, x, y: 0.0, c, R)


def test_sensitivity_is_the_smaller_of_the_glm_and_the_gradient_difference_bounds():
    n, lam = 100, 2.0
    # G bound sqrt(1/lam) G / n below the GLM bound 2 a R sqrt(1/lam) / n
    p = plan_posterior(_custom(link=5.0, G=1.0), n, 2, eps=1.0, delta=1e-5, prior_precision=lam, ess=10)
    assert p.sensitivity == approx(1.0 / math.sqrt(lam) / n * F32, rel=1e-14)
    assert "|phi'| <= 5.0" in p.assumptions[1]
    # no GLM link: G alone; an infinite G too: refused by name
    p = plan_posterior(_custom(G=3.0), n, 2, eps=1.0, delta=1e-5, prior_precision=lam, ess=10)
    assert p.sensitivity == approx(3.0 / math.sqrt(lam) / n * F32, rel=1e-14) and "G = 3" in p.assumptions[1]
    q = plan_posterior(_custom(link=0.5, G=math.inf), n, 2, eps=1.0, delta=1e-5, prior_precision=lam, ess=10)
    assert q.sensitivity == approx(2 * 0.5 / math.sqrt(lam) / n * F32, rel=1e-14)
    with pytest.raises(ValueError, match="neither a GLM link bound nor a finite gradient-difference bound"):
        plan_posterior(_custom(G=math.inf), n, 2, eps=1.0, delta=1e-5, prior_precision=lam)


def test_curvature_from_the_loss_or_the_caller():
    # kappa = (M - m) / R^2 from the loss; the step's M_phi = 1 + beta kappa R^2 / lam
    p = plan_posterior(_custom(link=1.0, M=3.0, m=1.0, R=2.0), 100, 2, eps=1.0, delta=1e-5, prior_precision=0.5,
                       ess=10)
    assert p.posterior.step.curvature == 0.5 and p.posterior.step.preconditioner_curvature == 0.25
    assert p.posterior.step.bound_M_phi == approx(1 + p.beta * 0.5 * 4.0 / 0.5, rel=1e-13)
    q = plan_posterior(_custom(link=1.0, M=3.0, m=1.0, R=2.0), 100, 2, eps=1.0, delta=1e-5, prior_precision=0.5,
                       ess=10, curvature=7.0)
    assert q.posterior.step.curvature == 7.0 and q.posterior.step.bound_M_phi == approx(1 + q.beta * 7.0 * 4.0 / 0.5,
                                                                                         rel=1e-13)
    for loss in (_custom(link=1.0, M=None), _custom(link=1.0, R=math.inf)):
        with pytest.raises(ValueError, match="pass curvature="):
            plan_posterior(loss, 100, 2, eps=1.0, delta=1e-5, prior_precision=0.5)
    # an unbounded row norm with a caller's curvature: the step takes kappa * 1^2 per direction
    r = plan_posterior(_custom(G=2.0, R=math.inf), 100, 2, eps=1.0, delta=1e-5, prior_precision=0.5,
                       ess=10, curvature=3.0)
    assert r.posterior.step.bound_M_phi == approx(1 + r.beta * 3.0 / 0.5, rel=1e-13)
    assert r.sensitivity == approx(2.0 / math.sqrt(0.5) / 100 * F32, rel=1e-14)


def test_the_inverse_temperature_search_range():
    # beta* just above the search's lower end 1e-8 is found; below it the plan is refused by name
    n, R, K, eps, delta = 10, 1.0, 1, 0.5, 1e-5
    mu_star = gdp_mu_for_delta_mp(eps, delta)
    Delta = 2 * R / n * F32
    for ess, ok in ((2.0e15, True), (5.0e15, False)):
        t = 2 * ess / (K * 0.4) + 10.0
        beta_star = mu_star / (Delta * math.sqrt(K * t / 2))
        assert (beta_star > 1e-8) == ok
        if ok:
            p = plan_posterior(_logistic(R), n, 1, eps=eps, delta=delta, prior_precision=1.0, ess=int(ess),
                               num_chains=K, mixing_rate=0.4)
            assert beta_star * (1 - 1e-9) <= p.beta <= beta_star
        else:
            with pytest.raises(ValueError, match="no inverse temperature meets the target"):
                plan_posterior(_logistic(R), n, 1, eps=eps, delta=delta, prior_precision=1.0, ess=int(ess),
                               num_chains=K)
    # beta* far above 1e8: the search stops at its upper end, on the safe side (at n = 1e9 the float32 margin,
    # n 2^-25, holds the sensitivity near 2 R 2^-25 whatever n: eps 100 puts beta* above 1e8 again)
    p = plan_posterior(_logistic(R), 10 ** 9, 1, eps=100.0, delta=1e-5, prior_precision=1.0, ess=1, burn_in_time=1e-6)
    assert 1e8 * (1 - 1e-9) <= p.beta <= 1e8 and gdp_delta_mp(100.0, p.event.mu) <= 1e-5


@pytest.mark.parametrize("kw,needle", [
    (dict(eps=0.0), "eps must lie in"), (dict(delta=1.0), "delta must lie in (0, 1)"), (dict(n=0), "n must"),
    (dict(dim=0), "dim must"), (dict(ess=0), "ess must"), (dict(num_chains=0), "num_chains must"),
    (dict(num_draws=0), "num_draws must"), (dict(mixing_rate=0.0), "mixing_rate must"),
    (dict(burn_in_time=0.0), "burn_in_time must"), (dict(step_safety=0.0), "step_safety must lie in (0, 2)"),
    (dict(step_safety=2.0), "step_safety must lie in (0, 2)"), (dict(kernel="mala"), "kernel must be one of"),
    (dict(friction=1.0), "friction applies to kernel='underdamped' only"),
    (dict(kernel="underdamped", friction=0.0), "friction must"),
    (dict(prior_precision=None), "needs a proper prior"), (dict(prior_precision=-1.0), "must lie in (0, inf)"),
    (dict(prior_precision=0.0), "must lie in (0, inf)"),
    (dict(prior_precision=(1.0, math.inf)), "must lie in (0, inf)"), (dict(prior_precision=(1.0, 1.0, 1.0)), "shape (2,)"),
    (dict(prior_precision=(1.0, 1e308)), "prior_precision must be at most 1e+100"),  # was a LinAlgError
    (dict(prior_precision=1.0000000000000002e100), "got max 1e+100"),
    (dict(second_moment=np.eye(2)), "second_moment must be a dp_infer.routes.preconditioning.SecondMoment, got ndarray"),
    (dict(curvature=0.0), "curvature must"), (dict(preconditioner_curvature=-1.0), "preconditioner_curvature must"),
])
def test_bad_inputs_are_refused_by_name(kw, needle):
    args = dict(n=100, dim=2, eps=1.0, delta=1e-5, prior_precision=1.0)
    args.update(kw)
    with pytest.raises(ValueError) as e:
        plan_posterior(_logistic(), **args)
    assert needle in str(e.value)


def test_non_loss_and_estimate_plans_are_refused():
    with pytest.raises(ValueError, match="loss must be a dp_infer.losses.PerExampleLoss, got LossConstants"):
        plan_posterior(_logistic().constants, 100, 2, eps=1.0, delta=1e-5, prior_precision=1.0)
    from dp_infer.routes.plan import plan_trajectory
    est = plan_trajectory(_logistic().constants, 100, 2, eps=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="no preconditioner"):
        preconditioner_chol(est)
    assert (DEFAULT_ESS, DEFAULT_MIXING_RATE) == (400, 0.4)  # ArviZ's bar; the module doc's default


def test_fit_posterior_refuses_a_private_second_moment_of_the_wrong_shape_before_charging(tmp_path):
    # multinomial logistic: 3 classes x 2 features = 6 parameters, but X'X / n is 2 x 2. The plan is
    # validated with a stand-in second moment without a matrix, so this was refused only after the
    # ledger was charged and the second moment released
    from dp_infer.infer.posterior import fit_posterior
    from dp_infer.privacy.ledger import Ledger

    rng = np.random.default_rng(0)
    X, y = rng.uniform(-0.5, 0.5, size=(50, 2)), rng.integers(0, 3, size=50).astype(float)
    led = Ledger(tmp_path / "ledger.json")
    led.register_dataset("default", 10.0, 1e-3)
    with pytest.raises(ValueError, match="the model has 6 parameters: use preconditioner='prior'"):
        fit_posterior(losses.multinomial_logistic(3, row_norm=1.0), X, y, eps=1.0, delta=1e-5, prior_precision=1.0,
                      ess=10, seed=1, progress_bar=False, ledger=led, preconditioner="private")
    assert led.spent("default")["n_charged"] == 0


def test_preconditioner_chol_refuses_a_malformed_preconditioner_by_name():
    from dataclasses import replace

    p = plan_posterior(_logistic(), 100, 2, eps=1.0, delta=1e-5, prior_precision=1.0, ess=10)
    with pytest.raises(ValueError, match=r"plan.preconditioner must be a 2-D array, got shape \(2,\)"):
        preconditioner_chol(replace(p, preconditioner=(1.0, 2.0)))
    with pytest.raises(ValueError, match="plan.preconditioner contains a non-finite value"):
        preconditioner_chol(replace(p, preconditioner=((1.0, math.nan), (0.0, 1.0))))
    # the symmetric part is factored: an asymmetric rounding of P does not change C
    P = np.array([[2.0, 0.5], [0.5 + 1e-13, 1.0]])
    C = preconditioner_chol(replace(p, preconditioner=tuple(map(tuple, P))))
    assert np.allclose(C @ C.T, 0.5 * (P + P.T), rtol=1e-15, atol=0)


def test_a_curvature_whose_step_count_overflows_is_refused_by_name():
    # beta * curvature * R^2 overflows: the preconditioned curvature is not finite (it raised nothing
    # useful before step_schedule: a plan must never carry inf or NaN steps)
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="curvature = 1e\\+308, .*lower curvature"):
        plan_posterior(_logistic(), 100, 2, eps=1.0, delta=1e-5, prior_precision=1.0, curvature=1e308)


def test_the_largest_prior_precision_is_accepted():
    p = plan_posterior(_logistic(), 100, 2, eps=1.0, delta=1e-5, prior_precision=(1.0, 1e100))
    assert math.isfinite(p.beta) and p.num_steps >= 200 and math.isfinite(p.step_size)


def test_beta_is_capped_at_n_and_the_rest_widens_the_clip():
    """At n = 1e6, d = 10, eps = 1 the default radius would allow beta / n ~ 1.6 (colder than the
    untempered posterior): the plan takes beta = n and spends the rest on a larger radius, so its mu
    meets the target (closed form: mu = beta (2 r / (sqrt(beta) n)) sqrt(K t / 2) at beta = n)."""
    n, d = 1_000_000, 10
    loss = losses.logistic(row_norm=math.sqrt(d))
    plan = plan_posterior(loss, n, d, eps=1.0, delta=1e-5, prior_precision=1.0, clip_radius=math.sqrt(d))
    post = plan.posterior
    assert plan.beta == n and post.beta_capped_at_n
    r = post.clip_radius
    assert r > math.sqrt(d)
    t = post.burn_in_time + post.sample_time
    mu = path_privacy.path_mu(n, 2 * r / (math.sqrt(n) * n) * (1 + n / 2 ** 25), t, None, 4)  # n's float32 margin
    assert mu == pytest.approx(plan.event.mu, rel=1e-9)
    assert plan.event.mu <= gdp_mu(1.0, 1e-5) * (1 + 1e-12)
    assert plan.event.mu >= gdp_mu(1.0, 1e-5) * (1 - 1e-8)  # the slack is spent, not lost
    assert any("capped at n" in note for note in plan.notes)
    # without the clip the cap leaves budget unspent (never over n either)
    small = plan_posterior(loss, 100, d, eps=50.0, delta=1e-5, prior_precision=1.0)
    assert small.beta <= 100
