"""Proximal sampler (seed 002 Algorithm 1 + 2), its explicit step counts, the proximal route.

Oracles: closed-form Gaussian chains (the exact-oracle step is an AR(1); its KL to the target
in closed form against the contraction bound), exact 1-D integration of the oracle's target
and of the full target, the regularised exponential mechanism's GDP on the Gaussian special
case, the accountant, and an empirical audit on the worst case (linear losses).
Monte-Carlo tolerances are stated next to each assertion (fixed keys).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

from dp_infer import audit
from dp_infer.kernels import proximal as P
from dp_infer.privacy import proximal as PP
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.conversions import gdp_log_delta
from dp_infer.privacy.stationary import regularized_exp_mech_mu

A_POINTS = np.array([-2.0, -0.5, 0.3, 1.0, 3.0])  # seed-002 digest §7.3 example


def _abs_fn(x, a):
    return jnp.abs(x[0] - a)


def _target_moments(scale=1.0, m=1.0, y=None, eta=None):
    """Mean, variance and CDF of exp(-scale * mean|x - a_j| - m x^2/2 [- (x-y)^2/(2 eta)]) by quadrature."""

    def logd(t):
        v = -scale * np.mean(np.abs(t - A_POINTS)) - 0.5 * m * t * t
        if y is not None:
            v -= (t - y) ** 2 / (2 * eta)
        return v

    pts = list(A_POINTS)
    dens = lambda t: math.exp(logd(t))  # noqa: E731
    Z = integrate.quad(dens, -40, 40, points=pts, limit=200)[0]
    m1 = integrate.quad(lambda t: t * dens(t), -40, 40, points=pts, limit=200)[0] / Z
    m2 = integrate.quad(lambda t: t * t * dens(t), -40, 40, points=pts, limit=200)[0] / Z
    cdf = lambda q: integrate.quad(dens, -40, q, points=[p for p in pts if p < q], limit=200)[0] / Z  # noqa: E731
    return m1, m2 - m1 * m1, cdf


# ---------------------------------------------------------------------------------- Gaussian oracles


def _gaussian_kl(a, v, b, w):
    return 0.5 * (v / w + (a - b) ** 2 / w - 1.0 + math.log(w / v))


@pytest.mark.parametrize("eta,m,g", [(0.1, 1.0, 2.0), (1.0, 0.5, 3.0), (5.0, 2.0, 0.7)])
def test_exact_oracle_chain_kl_obeys_the_contraction_bound(eta, m, g):
    # fbar(x) = g x (linear) and psi = m x^2/2: target N(-g/m, 1/m). The exact oracle gives
    # x' | y ~ N((y - eta g)/(1 + eta m), eta/(1 + eta m)), so the law stays Gaussian with
    # mean' = (mean - eta g)/(1 + eta m), var' = (var + eta)/(1 + eta m)^2 + eta/(1 + eta m).
    mean, var = 0.0, 1.0 / m  # the start law N(0, 1/m_f)
    kl0 = _gaussian_kl(mean, var, -g / m, 1.0 / m)
    assert kl0 == pytest.approx(PP.start_kl_bound(g, m))  # tight for a linear fbar
    for T in range(1, 60):
        mean = (mean - eta * g) / (1 + eta * m)
        var = (var + eta) / (1 + eta * m) ** 2 + eta / (1 + eta * m)
        kl = _gaussian_kl(mean, var, -g / m, 1.0 / m)
        assert kl <= kl0 / (1 + eta * m) ** (2 * T) * (1 + 1e-9) + 1e-15  # + float rounding of KL
        if T == 5:
            # the exponent is the right one: the mean error decays exactly as (1 + eta m)^-T, so
            # KL decays as (1 + eta m)^-2T; the start has the target variance, so the bound is tight
            assert kl * (1 + eta * m) ** (2 * T) / kl0 == pytest.approx(1.0, rel=1e-4)


def test_step_with_exact_gaussian_oracle_is_the_ar1():
    # psi only (fbar = 0): one step maps x to (x + sqrt(eta) xi)/(1 + eta m) + N(0, eta/(1 + eta m));
    # from x0 = 3 the mean after T steps is 3 (1+eta m)^-T and the variance tends to 1/m.
    eta, m, T, N = 0.4, 2.0, 40, 40_000
    rgo = P.exact_gaussian_rgo(step_size=eta, strong_convexity=m)
    with jax.enable_x64(True):
        run = jax.jit(jax.vmap(lambda k: P.sample_chain(k, rgo, jnp.array([3.0]), T, keep="all")))
        last, tot, xs = run(jax.random.split(jax.random.PRNGKey(0), N))
    x1 = np.asarray(xs[:, 0, 0])
    # after one step: mean 3/(1+eta m), variance eta/(1+eta m)^2 + eta/(1+eta m); 5 MC se
    v1 = eta / (1 + eta * m) ** 2 + eta / (1 + eta * m)
    assert abs(x1.mean() - 3 / (1 + eta * m)) < 5 * math.sqrt(v1 / N)
    assert abs(x1.var() / v1 - 1) < 5 * math.sqrt(2 / N)
    xT = np.asarray(last.x[:, 0])
    assert abs(xT.mean()) < 5 * math.sqrt(1 / (m * N)) + 3 * (1 + eta * m) ** -T
    assert abs(xT.var() * m - 1) < 5 * math.sqrt(2 / N)
    assert int(tot.proposals[0]) == T


# ---------------------------------------------------------------------------------- oracles on 1-D targets


@pytest.mark.parametrize("make,eta", [(P.linearised_rgo, 0.5), (P.linearised_rgo, 3.0), (P.taylor_rgo, 0.01)])
def test_one_oracle_call_samples_its_target(make, eta):
    # target of one call at y: exp(-mean|x - a_j| - x^2/2 - (x - y)^2/(2 eta)), by quadrature.
    # 20k calls; the empirical CDF at 5 points within 5 binomial se, mean within 5 se.
    y, N = 1.3, 20_000
    m1, var, cdf = _target_moments(y=y, eta=eta)
    rgo = make(_abs_fn, jnp.asarray(A_POINTS), step_size=eta, strong_convexity=1.0)
    with jax.enable_x64(True):
        xs, info = jax.jit(jax.vmap(lambda k: rgo.sample(k, jnp.array([y]))))(jax.random.split(jax.random.PRNGKey(1), N))
    x = np.asarray(xs[:, 0])
    assert abs(x.mean() - m1) < 5 * math.sqrt(var / N)
    for q in np.quantile(x, [0.1, 0.3, 0.5, 0.7, 0.9]):
        p = cdf(q)
        assert abs(np.mean(x <= q) - p) < 5 * math.sqrt(p * (1 - p) / N)


def test_taylor_oracle_costs_2e_evaluations_per_proposal_and_accepts_about_half():
    # E[J (J + 1)] = 2 sum_alpha alpha / alpha! = 2 e; acceptance >= (1 - TV bound)/2 ~ 1/2 for small a.
    eta, N = 0.01, 20_000
    rgo = P.taylor_rgo(_abs_fn, jnp.asarray(A_POINTS), step_size=eta, strong_convexity=1.0)
    with jax.enable_x64(True):
        _, info = jax.jit(jax.vmap(lambda k: rgo.sample(k, jnp.array([0.2]))))(jax.random.split(jax.random.PRNGKey(2), N))
    props = np.asarray(info.proposals, dtype=float)
    evals = np.asarray(info.evaluations, dtype=float)
    per_prop = evals.sum() / props.sum()
    # sd of J(J+1) is ~5.6, so the se over ~40k proposals is ~0.03
    assert abs(per_prop - 2 * math.e) < 0.15
    acc = N / props.sum()
    assert 0.45 < acc < 0.55  # se ~0.003; the exact value is E[clip(rho)]/2 in [0.5 - TV, 0.5 + ...]


def test_taylor_tv_bound_is_explicit_and_monotone():
    a = np.geomspace(1e-4, 0.03, 40)  # the bound reaches its cap 1 near a = 0.04
    b = np.array([PP.taylor_rgo_tv_bound(x) for x in a])
    assert np.all(np.diff(b) > 0)
    # closed form at a = 0.01: q = 0.2, 2 sqrt(e) * 0.25 * exp(-3.125)
    assert PP.taylor_rgo_tv_bound(0.01) == pytest.approx(2 * math.sqrt(math.e) * 0.25 * math.exp(-3.125))
    assert PP.taylor_rgo_tv_bound(0.25) == 1.0
    # the simulated clipping error E(|S| - 1)_+ is below the bound: at a = 0.02 over 200k draws of
    # S with D = G sqrt(2 v) * N(0, 1) (linear f, the sub-Gaussian worst case) the mean excess is
    # far smaller than the bound 0.27
    rng = np.random.default_rng(3)
    aa, N = 0.02, 200_000
    J = np.sum(np.log(1 - rng.random(N))[:, None] <= -np.array([math.lgamma(k + 1) for k in range(1, 19)]), axis=1)
    S = np.zeros(N)
    for alpha in range(1, 19):
        D = math.sqrt(2 * aa) * rng.standard_normal((N, alpha))
        S += np.where(J >= alpha, D.prod(axis=1), 0.0)
    assert np.mean(np.maximum(np.abs(S) - 1, 0)) < PP.taylor_rgo_tv_bound(aa)


@pytest.mark.slow
def test_chain_reaches_the_nonsmooth_target():
    # seed-002 digest §7.3: exp(-mean|x - a_j| - x^2/2), exact mean 0.0850315, variance 0.6916722.
    # linearised oracle at eta = 1, T from the explicit bound (TV <= 1e-3), start N(0, 1).
    m1, var, _ = _target_moments()
    assert m1 == pytest.approx(0.0850315, abs=1e-6) and var == pytest.approx(0.6916722, abs=1e-6)
    eta, N = 1.0, 20_000
    T = PP.outer_steps(PP.start_kl_bound(1.0, 1.0), eta, 1.0, 1e-3)
    rgo = P.linearised_rgo(_abs_fn, jnp.asarray(A_POINTS), step_size=eta, strong_convexity=1.0)
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.PRNGKey(4), N)
        x0 = jax.random.normal(jax.random.PRNGKey(5), (N, 1), jnp.float64)
        last, _ = jax.jit(jax.vmap(lambda k, x: P.sample_chain(k, rgo, x, T)))(keys, x0)
    x = np.asarray(last.x[:, 0])
    # 5 MC se, plus the TV bound times the range that matters (|x| < 6 holds a.s. in practice)
    assert abs(x.mean() - m1) < 5 * math.sqrt(var / N) + 6e-3
    assert abs(x.var() / var - 1) < 5 * math.sqrt(2 / N) + 1e-2


# ---------------------------------------------------------------------------------- step counts


def test_outer_steps_is_the_smallest_sufficient_count():
    for kl0, eta, m, tv in [(0.5, 1.0, 1.0, 1e-3), (1e6, 1e-4, 3.0, 1e-9), (10.0, 0.1, 0.2, 1e-6)]:
        T = PP.outer_steps(kl0, eta, m, tv)
        assert PP.outer_tv_bound(kl0, eta, m, T) <= tv
        assert T == 1 or PP.outer_tv_bound(kl0, eta, m, T - 1) > tv
        # T scales like log(1/tv) / (2 eta m) ... up to rounding
        assert T == pytest.approx((0.5 * math.log(kl0 / 2) - math.log(tv)) / math.log1p(eta * m), abs=1.0)


def test_linearised_acceptance_bound_holds_at_the_worst_case():
    # worst case for a kink: n copies of |x| with the Gaussian part centred at the kink; the
    # measured acceptance must exceed exp(-2a - 2 sqrt(2a/pi)).
    for a in [0.1, 0.5, 2.0]:
        eta = a  # G_f = 1
        rgo = P.linearised_rgo(lambda x, c: jnp.abs(x[0] - c), jnp.zeros(3), step_size=eta, strong_convexity=1e-6)
        with jax.enable_x64(True):
            _, info = jax.jit(jax.vmap(lambda k: rgo.sample(k, jnp.array([0.0]))))(jax.random.split(jax.random.PRNGKey(6), 4000))
        acc = 4000 / float(np.sum(np.asarray(info.proposals)))
        assert acc > PP.linearised_acceptance_bound(a)


# ---------------------------------------------------------------------------------- privacy of the plan


def test_plan_privacy_is_the_regularised_exponential_mechanism():
    for eps, n, K, rgo in [(1.0, 500, 1, "linearised"), (0.5, 200, 3, "linearised"), (2.0, 50, 1, "taylor")]:
        plan = PP.plan_proximal(eps=eps, delta=1e-5, n=n, dim=4, lipschitz=1.0, grad_diff=2.0, num_draws=K,
                                rgo=rgo, max_steps=1e12)
        # per-draw GDP from the closed form (Gopi-Lee-Liu) and the Gaussian special case:
        # linear losses <s, x> with |s - s'| = G give N(-sbar/m, I/(k m)), mean shift G/(n m)
        s = regularized_exp_mech_mu(plan.k, 2.0, n, plan.strong_convexity)
        shift_over_sd = (2.0 / (n * plan.strong_convexity)) * math.sqrt(plan.k * plan.strong_convexity)
        assert s == pytest.approx(shift_over_sd) == pytest.approx(plan.gdp_per_draw)
        assert plan.event.mu == pytest.approx(s * math.sqrt(K))
        # the accountant recomputes the target: ideal delta + (1 + e^eps) * TV <= delta
        acc = Accountant([plan.event])
        assert acc.get_delta(eps) <= 1e-5 * (1 + 1e-9)
        assert math.exp(gdp_log_delta(eps, plan.event.mu)) <= plan.delta_privacy * (1 + 1e-9)
        assert (1 + math.exp(eps)) * plan.event.tv_error <= plan.delta_sampling * (1 + 1e-9)
        assert plan.spent()["eps"] <= eps * (1 + 1e-9)
        assert plan.tv_per_draw == pytest.approx(plan.tv_outer + plan.num_steps * plan.tv_oracle_per_call)


def test_plan_is_data_independent_and_refuses_bad_input():
    kw = dict(eps=1.0, delta=1e-5, n=300, dim=5, lipschitz=1.0, grad_diff=2.0)
    assert PP.plan_proximal(**kw).as_dict() == PP.plan_proximal(**kw).as_dict()
    with pytest.raises(ValueError, match="rgo"):
        PP.plan_proximal(**kw, rgo="mala")
    with pytest.raises(ValueError, match="tv_fraction"):
        PP.plan_proximal(**kw, tv_fraction=1.5)
    with pytest.raises(ValueError, match="max_steps"):
        PP.plan_proximal(**{**kw, "n": 30_000}, rgo_scale=0.5)
    with pytest.raises(ValueError, match="delta"):
        PP.plan_proximal(**{**kw, "delta": 0.0})


# ---------------------------------------------------------------------------------- empirical audit


@pytest.mark.slow
def test_audit_proximal_route_on_linear_worst_case():
    # Worst case of the regularised exponential mechanism: 1-D linear losses f(x; s) = s x with
    # s in {-1, +1} (L = 1, G = 2), n = 10, the canary +1 in D and -1 in D' (others 0). The
    # exact draw is Gaussian, so the GDP claim is exactly tight. The whole route runs: plan ->
    # linearised oracle (exact for linear f) -> final positions. 40k chains per side; the 95%
    # lower bound must stay below the claimed eps = 3 (the GDP of the plan is exact, so the
    # bound sits ~1 below it at this sample size).
    eps, delta, n, N = 3.0, 1e-5, 10, 40_000
    plan = PP.plan_proximal(eps=eps, delta=delta, n=n, dim=1, lipschitz=1.0, grad_diff=2.0, max_steps=1e7)
    s_d = jnp.zeros(n).at[0].set(1.0)
    s_dp = jnp.zeros(n).at[0].set(-1.0)
    k, m_f = plan.k, plan.k * plan.strong_convexity

    def finals(s, key):
        rgo = P.linearised_rgo(lambda x, si: k * si * x[0], s, step_size=plan.step_size, strong_convexity=m_f)
        with jax.enable_x64(True):
            kx, kr = jax.random.split(key)
            x0 = jax.random.normal(kx, (N, 1), jnp.float64) / math.sqrt(m_f)
            last, _ = jax.jit(jax.vmap(lambda kk, x: P.sample_chain(kk, rgo, x, plan.num_steps)))(
                jax.random.split(kr, N), x0)
        return np.asarray(last.x[:, 0])

    t_d, t_dp = finals(s_d, jax.random.PRNGKey(7)), finals(s_dp, jax.random.PRNGKey(8))
    lb, *_ = audit.audit_statistics(t_d, t_dp, delta=delta)
    assert lb < eps
    # and the audit is not vacuous: the sampler's law is the exact Gaussian, so the bound is high
    assert lb > 0.4 * eps
