"""Posterior mode (issue 12): preconditioned kernels against closed forms, the sensitivity in the
preconditioner's metric against brute force, the plan's accounting, the audit, and a run against
NUTS at the same temperature."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dp_infer import losses
from dp_infer.audit import preconditioned_audit
from dp_infer.infer.posterior import fit_posterior
from dp_infer.kernels import langevin
from dp_infer.kernels.preconditioned import (Preconditioner, build_kernel, init,
                                             reparametrise, stationary_covariance)
from dp_infer.routes.posterior import plan_posterior
from dp_infer.releases.second_moment import private_second_moment, public_second_moment
from dp_infer.privacy import path as path_privacy
from dp_infer.privacy.accountant import Accountant
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.privacy.metric_sensitivity import (brute_force_max_quadratic_form, max_quadratic_form,
                                                 metric_gradient_sensitivity)


class Block:
    def __init__(self, indices, verts):
        self.indices = tuple(indices)
        self._verts = [tuple(v) for v in verts]

    def vertices(self):
        return iter(self._verts)


class Rows:
    """Minimal admissible rows: intercept, numeric coordinates in [-1, 1], one-hot groups."""

    def __init__(self, num_numeric, groups, reference=True):
        blocks, j = [Block([0], [(1.0,)])], 1
        for _ in range(num_numeric):
            blocks.append(Block([j], [(-1.0,), (1.0,)]))
            j += 1
        for k in groups:
            eye = [tuple(r) for r in np.eye(k)]
            blocks.append(Block(range(j, j + k), ([(0.0,) * k] if reference else []) + eye))
            j += k
        self.blocks, self.dim = blocks, j

    def vertices(self, limit=200_000):
        rows = []
        for combo in itertools.product(*[list(b.vertices()) for b in self.blocks]):
            x = np.zeros(self.dim)
            for b, v in zip(self.blocks, combo):
                x[list(b.indices)] = v
            rows.append(x)
        return np.asarray(rows)

    def contains(self, X):
        return np.array([any(np.allclose(x, v) for v in self.vertices()) for x in np.atleast_2d(X)])

    def max_norm(self):
        return float(np.max(np.linalg.norm(self.vertices(), axis=1)))


def _random_spd(d, rng, scale=1.0):
    A = rng.normal(size=(d, d))
    return scale * (A @ A.T / d + 0.1 * np.eye(d))


# ------------------------------------------------------------------ kernels


def test_preconditioned_ula_matches_its_exact_stationary_covariance():
    rng = np.random.default_rng(0)
    A = np.array([[4.0, 1.2], [1.2, 0.5]])          # ill-conditioned Gaussian target
    pre = Preconditioner.from_precision(A + np.diag([0.2, 0.05]))  # an imperfect preconditioner
    h = 0.3
    step = build_kernel(lambda th: jnp.asarray(A, jnp.float32) @ th, h, pre)
    n_chains, n_steps, burn = 4000, 400, 100

    def chain(k):
        def body(st, kk):
            st, _ = step(kk, st)
            return st, st.theta
        _, th = jax.lax.scan(body, init(jnp.zeros(2), pre),
                             jax.random.split(k, n_steps))
        return th[burn:]

    draws = np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(jax.random.PRNGKey(1), n_chains)),
                       dtype=np.float64)
    last = draws[:, -1]                             # independent across chains: iid draws
    exact = stationary_covariance(A, pre, h)
    emp = np.cov(last.T)
    # MC error of a covariance entry from N iid draws: sqrt((S_ii S_jj + S_ij^2) / N); 5 sigma
    se = np.sqrt((np.outer(np.diag(exact), np.diag(exact)) + exact**2) / n_chains)
    assert np.all(np.abs(emp - exact) <= 5 * se)
    # and it is not the exact target's covariance at this step (the O(h) bias is real)
    assert abs(exact[0, 0] / np.linalg.inv(A)[0, 0] - 1) > 0.05 or abs(exact[1, 1] / np.linalg.inv(A)[1, 1] - 1) > 0.05


def test_reparametrised_plain_ula_draws_the_same_chain():
    rng = np.random.default_rng(1)
    A = _random_spd(3, rng)
    pre = Preconditioner.from_precision(_random_spd(3, rng))
    U = lambda th: 0.5 * th @ jnp.asarray(A, jnp.float32) @ th  # noqa: E731
    V, to_theta, to_phi = reparametrise(U, pre)
    key = jax.random.PRNGKey(5)
    plain = langevin.sample_chain(key, V, jnp.zeros(3), 0.1, 50)
    step = build_kernel(jax.grad(U), 0.1, pre)
    st, k = init(jnp.zeros(3), pre), key
    thetas, phis = [], []
    for _ in range(50):  # the same key discipline as sample_chain: split (next, noise)
        k, noise_key = jax.random.split(k)
        st, _ = step(noise_key, st)
        thetas.append(st.theta)
        phis.append(st.phi)
    # one step, not two: the preconditioned kernel is the Langevin step on V, so the chains agree to the
    # float32 rounding of grad V (autodiff of U(C phi) here, C^T grad U(C phi) in the kernel): ~1e-6 after 50 steps
    np.testing.assert_allclose(np.asarray(plain.z), np.asarray(phis), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(to_theta(plain.z)), np.asarray(thetas), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(to_phi(to_theta(plain.z))), np.asarray(plain.z), rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ sensitivity


@pytest.mark.parametrize("seed", range(6))
def test_block_bound_is_an_upper_bound_and_exact_when_blocks_do_not_interact(seed):
    rng = np.random.default_rng(seed)
    rows = Rows(2, [3, 2], reference=bool(seed % 2))
    P = _random_spd(rows.dim, rng)
    exact = brute_force_max_quadratic_form(P, rows)
    bound = max_quadratic_form(P, rows=rows)
    assert exact <= bound * (1 + 1e-12)
    assert bound <= max_quadratic_form(P, row_norm=rows.max_norm()) * (1 + 1e-12) or bound == pytest.approx(
        max_quadratic_form(P, row_norm=rows.max_norm()))
    # block-diagonal P: every cross term is 0 and the bound is attained
    Pb = np.zeros_like(P)
    for b in rows.blocks:
        ix = np.ix_(list(b.indices), list(b.indices))
        Pb[ix] = P[ix]
    assert max_quadratic_form(Pb, rows=rows) == pytest.approx(brute_force_max_quadratic_form(Pb, rows), rel=1e-12)


def test_directions_no_admissible_row_reaches_carry_no_sensitivity():
    # complete one-hot coding with an intercept: v = intercept - sum of the group is orthogonal to
    # every admissible row, so inflating P along v changes nothing
    rows = Rows(1, [3], reference=False)
    v = np.zeros(rows.dim)
    v[0], v[2:5] = 1.0, -1.0
    assert np.allclose(rows.vertices() @ v, 0.0)
    P = np.eye(rows.dim)
    P_big = P + 1e6 * np.outer(v, v) / (v @ v)
    assert brute_force_max_quadratic_form(P_big, rows) == pytest.approx(brute_force_max_quadratic_form(P, rows))
    # the ball bound would charge the whole 1e6
    assert max_quadratic_form(P_big, row_norm=rows.max_norm()) > 1e5


def test_metric_sensitivity_bounds_the_realised_step_shift():
    # logistic loss: the realised Mahalanobis shift of one preconditioned step between any two
    # neighbouring datasets never exceeds sqrt(h/2) beta Delta_P, and the worst pair comes close
    rng = np.random.default_rng(3)
    rows = Rows(1, [2], reference=True)
    P = _random_spd(rows.dim, rng)
    n, beta, h = 10, 7.0, 0.05
    dP = metric_gradient_sensitivity(P, n, link_derivative_bound=1.0, rows=rows)
    V = rows.vertices()
    Pinv_half = np.linalg.inv(np.linalg.cholesky(P))
    worst = 0.0
    for theta in rng.normal(scale=20.0, size=(200, rows.dim)):
        s = 1 / (1 + np.exp(-(V @ theta)))
        g = np.concatenate([(s - 0.0)[:, None] * V, (s - 1.0)[:, None] * V])  # every (row, label)
        for a, b in itertools.combinations(range(len(g)), 2):
            shift = h * beta * P @ (g[a] - g[b]) / n
            maha = np.linalg.norm(Pinv_half @ shift) / math.sqrt(2 * h)
            worst = max(worst, maha)
    assert worst <= math.sqrt(h / 2) * beta * dP * (1 + 1e-9)
    # exact supremum over rows and the extreme link values a, b in {-1, 1} (the gradient
    # difference a x - b x' is bilinear in (a, b), so a convex norm peaks at a corner)
    C = np.linalg.cholesky(P)
    exact = max(np.linalg.norm(C.T @ (a * x - b * xp)) for x in V for xp in V for a in (-1, 1) for b in (-1, 1)) / n
    assert exact <= dP * (1 + 1e-12)
    assert worst >= 0.8 * math.sqrt(h / 2) * beta * exact  # 200 random large thetas nearly saturate the link


# ------------------------------------------------------------------ plan and accounting


def _data(n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = np.concatenate([np.ones((n, 1)), rng.uniform(-1, 1, size=(n, d - 1))], axis=1)
    y = (X @ np.array([0.3, 1.5, -1.0])[:d] + 0.5 * rng.normal(size=n) > 0).astype(float)
    return X, y


def test_plan_spends_the_target_and_composes_the_second_moment():
    X, y = _data()
    loss = losses.logistic(row_norm=math.sqrt(3))
    sm = private_second_moment(X, max_sq_norm=3.0, mu=0.1, key=jax.random.PRNGKey(0))
    plan = plan_posterior(loss, 400, 3, eps=1.0, delta=1e-5, prior_precision=1.0, ess=200, second_moment=sm)
    mu = gdp_mu(1.0, 1e-5)
    assert plan.event.mu == pytest.approx(mu, rel=1e-8) and plan.event.mu <= mu * (1 + 1e-12)
    parts = plan.event.metadata["parts"]
    assert {p["label"] for p in parts} == {"langevin_path", "private_second_moment"}
    # the chain's own part is the path accountant at the P-metric sensitivity
    t = plan.horizon
    assert parts[0]["mu"] == pytest.approx(path_privacy.path_mu(plan.beta, plan.sensitivity, t, None, 4), rel=1e-12)
    assert Accountant([plan.event]).get_epsilon(1e-5) <= 1.0 * (1 + 1e-9)
    # the second moment's own GDP: Frobenius sensitivity 2 R^2 / n over the noise sd
    assert sm.event.mu == pytest.approx(sm.event.metadata["sensitivity"] / sm.noise_sd)
    # more effective draws cost a flatter target
    plan2 = plan_posterior(loss, 400, 3, eps=1.0, delta=1e-5, prior_precision=1.0, ess=800, second_moment=sm)
    assert plan2.beta < plan.beta and plan.posterior.eps_per_extra_effective_draw > 0


def test_plan_is_a_function_of_public_inputs_only():
    X, y = _data()
    Xp = X.copy()
    Xp[0] = [1.0, -1.0, 1.0]
    loss = losses.logistic(row_norm=math.sqrt(3))
    pub = public_second_moment(_data(seed=9)[0])
    a = plan_posterior(loss, 400, 3, eps=1.0, delta=1e-5, prior_precision=0.5, second_moment=pub)
    b = plan_posterior(loss, 400, 3, eps=1.0, delta=1e-5, prior_precision=0.5, second_moment=pub)
    assert a.as_dict() == b.as_dict()
    runs = [fit_posterior(loss, A, y, eps=1.0, delta=1e-5, prior_precision=0.5, ess=100, preconditioner="prior",
                          seed=3, progress_bar=False) for A in (X, Xp)]
    # the plan made before sampling (the default run then adapts its metric from its own released
    # draws: run.plan is that final phase's, post-processing)
    assert runs[0].planned.as_dict() == runs[1].planned.as_dict()
    assert runs[0].plan.event == runs[1].plan.event and runs[0].planned.posterior.clip_radius is not None


@pytest.mark.parametrize("kw,needle", [
    (dict(prior_precision=None), "proper prior"),
    (dict(prior_precision=0.0), "prior_precision must lie in (0, inf)"),
    (dict(prior_precision=[1.0, 1.0]), "shape (3,)"),
    (dict(prior_precision=1.0, ess=0), "ess must be an integer >= 1"),
    (dict(prior_precision=1.0, mixing_rate=-1.0), "mixing_rate"),
    (dict(prior_precision=1.0, kernel="nuts"), "kernel must be one of"),
    (dict(prior_precision=1.0, eps=200.0), "eps must lie in (0, 100]"),
])
def test_posterior_plan_bad_inputs(kw, needle):
    args = dict(eps=1.0, delta=1e-5)
    args.update(kw)
    with pytest.raises(ValueError) as e:
        plan_posterior(losses.logistic(row_norm=math.sqrt(3)), 400, 3, **args)
    assert needle in str(e.value)


def test_preconditioned_route_audit_below_claim_and_catches_a_euclidean_accountant():
    P = ((4.0, 1.9), (1.9, 1.0))
    ok = preconditioned_audit(P, eps=2.0, num_samples=100_000, seed=4)
    assert ok.eps_lower <= ok.claimed_eps and ok.eps_exact == pytest.approx(2.0, rel=1e-6)
    # calibrating with the Euclidean sensitivity under-reports: the same audit sees eps > 2
    bad = preconditioned_audit(P, eps=2.0, num_samples=100_000, seed=4, unsafe=True)
    assert bad.eps_exact > 4.0 and bad.eps_lower > bad.claimed_eps


# ------------------------------------------------------------------ end to end vs NUTS


@pytest.mark.slow
def test_posterior_run_matches_nuts_at_the_same_temperature():
    from tests.support.tempering import nuts_reference

    X, y = _data(n=2000, d=3, seed=1)
    loss = losses.logistic(row_norm=math.sqrt(3))
    run = fit_posterior(loss, X, y, eps=2.0, delta=1e-5, prior_precision=1.0, ess=400, seed=11,
                        progress_bar=False, preconditioner="private", clip_radius="auto")
    rep = run.report()
    ach = rep["posterior"]["achieved"]
    assert ach["max_rhat"] < 1.02 and ach["min_ess_bulk"] > 200
    ours = run.draws().reshape(-1, 3)
    assert run.plan.posterior.clip_radius is not None  # "auto": gradients clipped in the metric
    U = run.potential  # the clipped chain's own target: the clipped loss's Gibbs posterior (value, not only gradient)

    ref = nuts_reference(U, 3)  # NON-PRIVATE reference, same target
    sd = ref.std(axis=0)
    # MC error of the difference of means: sd sqrt(1/ESS_ours + 1/ESS_nuts) with ESS >= 200 / ~1000
    assert np.all(np.abs(ours.mean(0) - ref.mean(0)) <= 4 * sd * math.sqrt(1 / 200 + 1 / 800))
    ratio = ours.std(0) / sd
    assert np.all((ratio > 0.85) & (ratio < 1.2))  # ULA's O(h) inflation at h M_phi = 0.25 is <= 7%


def test_a_run_whose_chains_did_not_mix_says_so_in_one_line():
    # issue 37 part 6: a run that does not mix says so. A declared mixing rate 125x too optimistic
    # plans ~1/125 of the time the chains need: R-hat ~3 and ESS ~5 of 100 planned (measured, seed 3)
    import warnings

    import dp_infer

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    X /= np.maximum(1, np.linalg.norm(X, axis=1))[:, None]
    y = (rng.uniform(size=2000) < 1 / (1 + np.exp(-X @ np.array([1.0, -1.0, 0.5])))).astype(float)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        run = dp_infer.fit(dp_infer.logistic(row_norm=1.0), X, y, eps=1.0, delta=1e-5, target="posterior",
                           prior_precision=1.0, ess=100, mixing_rate=50.0, seed=3, progress_bar=False)
    said = [str(x.message) for x in w if str(x.message).startswith("the chains did not mix")]
    assert len(said) == 1 and "\n" not in said[0] and "mixing_rate" in said[0]
    assert run.report()["mixing_warning"] == said[0]
    ach = run.achieved_mixing()
    assert ach["max_rhat"] > 1.1 or ach["min_ess_bulk"] < 20
