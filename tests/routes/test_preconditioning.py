"""Oracle tests for dp_infer.routes.preconditioning: the private second moment's noise, measured.

Oracles: the Gaussian mechanism's definition (mu-GDP at noise sd = sensitivity / mu), with the
sensitivity its docstring states, ``sqrt(2) R^2 / n`` on the upper triangle, checked (a) as a valid
bound that a neighbouring pair attains (``x = R e_1`` replaced by ``x' = R e_2``: upper-triangle l2
change sqrt(2) R^2 / n; no pair found by random search or by a local optimiser exceeds it) and (b) as the noise actually added,
measured entry by entry on a dataset whose ``X'X/n`` is so well conditioned that the PSD projection
is the identity (so ``S_hat - X'X/n`` is the noise itself). Monte-Carlo tolerances are stated at each
check. Symmetry of the released matrix is checked exactly (bit for bit).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dp_infer.randomness import gaussian_noise
from dp_infer.routes.preconditioning import SecondMoment, gaussian_spectral_bound, precision_matrix, prior_second_moment, second_moment_row_bound
from dp_infer.releases.second_moment import private_second_moment, private_second_moment_of_gram, public_second_moment

D, M, R = 6, 800, 1.5   # X'X/n = R^2/D I = 0.375 I; n = D M = 4800


def _design(d=D, m=M, r=R):
    """m copies of r e_j for each j: every row at norm exactly r, X'X/n = r^2/d I."""
    return np.repeat(r * np.eye(d), m, axis=0)


def _noise(mu, reps, *, d=D, m=M, r=R, seed=0):
    X = _design(d, m, r)
    S = X.T @ X / X.shape[0]
    out = []
    for i in range(reps):
        sm = private_second_moment(X, max_sq_norm=r * r, mu=mu, key=jax.random.fold_in(jax.random.PRNGKey(seed), i))
        out.append(sm.matrix - S)
    return np.stack(out), sm, X.shape[0]


def _sd_ci_ok(samples, sd_expected, z=5.0):
    """Sample sd of N(0, sd^2) draws within z standard errors: se(log s) ~ 1 / sqrt(2 N)."""
    s = math.sqrt(float(np.mean(samples ** 2)))   # mean 0 is known
    se = 1.0 / math.sqrt(2.0 * samples.size)
    return abs(math.log(s / sd_expected)) <= z * se, s


@pytest.mark.parametrize("mu", [0.5, 2.0])
def test_private_second_moment_noise_per_entry_matches_sensitivity_over_mu(mu):
    """Per-entry sd of the released noise = (sqrt(2) R^2 / n) / mu, on the diagonal and off it separately
    (a diagonal drawn twice or an off-diagonal halved by symmetrisation would show 2x / 0.5x);
    the noise is centred and Gaussian; the reported ``noise_sd`` and the event's mu are those of the
    noise actually added."""
    E, sm, n = _noise(mu, reps=40)
    sd = math.sqrt(2.0) * R * R / n / mu
    iu = np.triu_indices(D, 1)
    diag = E[:, np.arange(D), np.arange(D)].ravel()      # 240 draws: 5 se = 23% on sd
    off = E[:, iu[0], iu[1]].ravel()                      # 600 draws: 5 se = 14%
    for name, x in (("diagonal", diag), ("off-diagonal", off)):
        ok, s = _sd_ci_ok(x, sd)
        assert ok, f"{name} noise sd {s:.4g}, expected {sd:.4g}"
        assert abs(float(np.mean(x))) <= 5 * sd / math.sqrt(x.size)
    # Gaussian: Kolmogorov-Smirnov of the standardised upper-triangle noise (fixed key; p > 1e-3)
    assert stats.kstest(np.concatenate([diag, off]) / sd, "norm").pvalue > 1e-3
    # the stated parameters are those of the noise above
    assert sm.noise_sd == pytest.approx(sd, rel=1e-12)
    assert sm.event.mu == mu
    assert sm.event.metadata["sensitivity"] == pytest.approx(math.sqrt(2.0) * R * R / n, rel=1e-12)
    assert sm.event.metadata["noise_sd"] == pytest.approx(sd, rel=1e-12)
    assert sm.event.metadata["n"] == n and sm.event.metadata["dim"] == D
    assert sm.source == "private"


def test_distinct_upper_entries_are_independent_and_the_lower_triangle_mirrors_them():
    """Upper-triangle entries are independent draws (pairwise correlations ~ 0 within 5 / sqrt(N))."""
    E, _, _ = _noise(1.0, reps=60, seed=3)
    iu = np.triu_indices(D)
    U = E[:, iu[0], iu[1]]                                 # (60, 21)
    C = np.corrcoef(U.T)
    off = C[np.triu_indices(C.shape[0], 1)]
    assert np.max(np.abs(off)) < 5.0 / math.sqrt(U.shape[0]) + 0.15   # 60 reps: |r| rarely > 0.5


def test_released_matrix_is_exactly_symmetric_and_psd():
    X = np.random.default_rng(1).normal(size=(30, 5))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    for i in range(5):
        sm = private_second_moment(X, max_sq_norm=1.0, mu=0.05, key=jax.random.PRNGKey(i))   # noise >> signal
        S = sm.matrix
        assert np.array_equal(S, S.T)
        assert np.min(np.linalg.eigvalsh(S)) >= -1e-12 * np.max(np.abs(S))


def test_psd_projection_is_the_nearest_psd_matrix_of_the_noisy_release():
    """Where the noise makes X'X/n + E indefinite, the release is its Frobenius-nearest PSD matrix
    (the eigenvalue clip), recomputed here from the same key's noise with numpy."""
    X = np.random.default_rng(2).normal(size=(20, 4))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    n, d, mu = X.shape[0], X.shape[1], 0.07      # sd = sqrt(2) / (n mu) is not a float32 number
    key = jax.random.PRNGKey(7)
    sm = private_second_moment(X, max_sq_norm=1.0, mu=mu, key=key)
    with jax.enable_x64(True):  # the release's privacy noise (issue 40: float64 quantiles, not jax.random.normal)
        z = np.asarray(gaussian_noise(key, (d, d), jnp.float64), dtype=np.float64)
    E = np.triu(z) * (math.sqrt(2.0) / n / mu)
    E = E + np.triu(E, 1).T
    w, V = np.linalg.eigh(X.T @ X / n + E)
    assert w.min() < 0   # the projection does something here
    np.testing.assert_allclose(sm.matrix, (V * np.maximum(w, 0)) @ V.T, rtol=0, atol=1e-12)


def test_the_same_key_gives_the_same_release_with_and_without_x64():
    """A reproducible seed reproduces the release whatever JAX's precision setting (the noise is
    drawn in float64, under a local x64 switch, and scaled in float64 either way)."""
    X = _design(4, 5, 1.0)
    a = private_second_moment(X, max_sq_norm=1.0, mu=0.3, key=jax.random.PRNGKey(9)).matrix
    with jax.enable_x64(True):
        b = private_second_moment(X, max_sq_norm=1.0, mu=0.3, key=jax.random.PRNGKey(9)).matrix
    np.testing.assert_array_equal(a, b)


def test_the_event_states_its_assumptions_and_the_default_failure():
    X = _design(6, 2, 1.0)
    sm = private_second_moment(X, max_sq_norm=1.0, mu=0.5, key=jax.random.PRNGKey(0))
    assert sm.event.label == "private_second_moment"
    text = " ".join(sm.event.assumptions)
    assert "replace-one" in text and "n = 12 public" in text and "||x||^2 <= 1" in text
    assert "on the 21 upper-triangle entries" in text and "sqrt(2) R^2 / n" in text
    assert sm.noise_bound_failure == 1e-6     # the documented default
    assert sm.noise_norm_bound == pytest.approx(sm.noise_sd * (2 * math.sqrt(6) + math.sqrt(2 * math.log(2e6))),
                                                rel=1e-14)
    assert "0.5-GDP" in sm.notes[0]


@pytest.mark.parametrize("bad", [np.ones(3), np.ones((2, 2, 2)), np.array([[1.0, np.nan]])])
def test_data_that_is_not_a_finite_matrix_is_refused(bad):
    with pytest.raises(ValueError, match="^X (must|contains)"):
        private_second_moment(bad, max_sq_norm=10.0, mu=1.0, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="^X_public (must|contains)"):
        public_second_moment(bad)


@pytest.mark.parametrize("bad,needle", [
    (dict(gram=np.ones(3)), "^gram must be a 2-D array"), (dict(gram=np.ones((2, 3))), "^gram must be square"),
    (dict(gram=np.array([[1.0, np.nan], [0.0, 1.0]])), "^gram contains"),
    (dict(max_sq_norm=0.0), "^max_sq_norm must lie in"), (dict(mu=-1.0), "^mu must lie in"),
    (dict(n=0), "^n must be"), (dict(failure=1.0), "^failure must")])
def test_a_release_from_a_gram_refuses_bad_inputs_by_name(bad, needle):
    kw = dict(gram=np.eye(2), n=10, max_sq_norm=1.0, mu=1.0, key=jax.random.PRNGKey(0)) | bad
    gram, n = kw.pop("gram"), kw.pop("n")
    with pytest.raises(ValueError, match=needle):
        private_second_moment_of_gram(gram, n, **kw)


class _Rows:
    """A stand-in for a schema's admissible rows: only ``max_norm`` is read."""

    def max_norm(self):
        return 3.0


def test_the_release_bound_is_the_admissible_rows_or_the_checked_row_norm():
    from dp_infer.losses import logistic
    from dp_infer.losses.base import ROW_NORM_SLACK

    assert second_moment_row_bound(logistic(row_norm=2.0), _Rows()) == 9.0  # the rows' bound, squared
    assert second_moment_row_bound(logistic(row_norm=2.0)) == (2.0 * (1 + ROW_NORM_SLACK)) ** 2


@pytest.mark.parametrize("failure", [0.0, 1.0, 2.5, -0.1])
def test_a_failure_probability_outside_0_1_is_refused(failure):
    with pytest.raises(ValueError, match="failure"):
        private_second_moment(_design(2, 2, 1.0), max_sq_norm=1.0, mu=1.0, key=jax.random.PRNGKey(0),
                              failure=failure)
    with pytest.raises(ValueError, match="^failure must"):
        gaussian_spectral_bound(3, 1.0, failure)


def test_stated_sensitivity_bounds_every_neighbouring_change():
    """Replace-one: the upper triangle of X'X/n moves by at most the stated sqrt(2) R^2 / n in l2, and the
    bound is tight: the pair R e_1 -> R e_2 attains it; random pairs of rows at norm <= R and a local
    optimiser started from 20 random pairs never exceed it (a stated sensitivity below sqrt(2) R^2 / n
    would under-charge; above it, e.g. the triangle inequality's 2 R^2 / n, would waste budget)."""
    n, d = 50, 4
    rng = np.random.default_rng(4)
    X = rng.normal(size=(n, d))
    X *= R / np.linalg.norm(X, axis=1, keepdims=True)
    sm = private_second_moment(X, max_sq_norm=R * R, mu=1.0, key=jax.random.PRNGKey(0))
    stated = sm.event.metadata["sensitivity"]
    iu = np.triu_indices(d)

    def change(x, x2):
        return float(np.linalg.norm((np.outer(x, x) - np.outer(x2, x2))[iu])) / n

    worst = change(R * np.eye(d)[0], R * np.eye(d)[1])
    assert worst == pytest.approx(math.sqrt(2) * R * R / n, rel=1e-12)
    assert stated == pytest.approx(worst, rel=1e-12)
    for _ in range(200):
        a, b = rng.normal(size=(2, d))
        a *= R * rng.uniform() ** 0.5 / np.linalg.norm(a)
        b *= R / np.linalg.norm(b)
        assert change(a, b) <= stated * (1 + 1e-12)
    # an adversary: maximise the change over pairs in the ball (rows mapped into it radially)
    from scipy.optimize import minimize

    def into_ball(v):
        return v * min(1.0, R / max(np.linalg.norm(v), 1e-300))

    best = 0.0
    for _ in range(20):
        res = minimize(lambda z: -change(into_ball(z[:d]), into_ball(z[d:])), rng.normal(size=2 * d),
                       method="Nelder-Mead", options={"maxiter": 4000, "xatol": 1e-10, "fatol": 1e-14})
        best = max(best, -res.fun)
    assert best <= stated * (1 + 1e-9)
    assert best >= 0.999 * stated   # the search finds the attained bound


def test_rows_at_the_bound_are_accepted_and_rows_above_are_refused():
    X = _design(3, 2, 2.0)                 # squared norms exactly 4
    private_second_moment(X, max_sq_norm=4.0, mu=1.0, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="max_sq_norm"):
        private_second_moment(X, max_sq_norm=4.0 * (1 - 1e-6), mu=1.0, key=jax.random.PRNGKey(0))
    for kw, name in ((dict(max_sq_norm=0.0, mu=1.0), "max_sq_norm"), (dict(max_sq_norm=4.0, mu=0.0), "mu"),
                     (dict(max_sq_norm=4.0, mu=-1.0), "mu")):
        with pytest.raises(ValueError, match=name):
            private_second_moment(X, key=jax.random.PRNGKey(0), **kw)


def test_gaussian_spectral_bound_closed_form_and_empirical_coverage():
    # t = sqrt(2 log(2 / failure)) = 2 at failure = 2 e^-2; 2 sqrt(d) = 4 at d = 4
    assert gaussian_spectral_bound(4, 1.0, 2 * math.exp(-2)) == pytest.approx(6.0, rel=1e-14)
    assert gaussian_spectral_bound(9, 0.5, 2 * math.exp(-4.5)) == pytest.approx(0.5 * (6 + 3), rel=1e-14)
    # coverage: ||E||_2 of symmetric Gaussian matrices with N(0, 1) upper entries stays below the
    # bound at failure 0.05 in all 400 draws (the bound is conservative; expected exceedances << 20)
    rng = np.random.default_rng(5)
    d = 6
    b = gaussian_spectral_bound(d, 1.0, 0.05)
    norms = []
    for _ in range(400):
        U = np.triu(rng.normal(size=(d, d)))
        norms.append(np.max(np.abs(np.linalg.eigvalsh(U + np.triu(U, 1).T))))
    assert max(norms) <= b
    # and it is not vacuous: the typical norm is within a factor 2 of 2 sqrt(d)
    assert np.median(norms) > 0.5 * 2 * math.sqrt(d)


def test_private_second_moment_carries_its_spectral_bound():
    X = _design(3, 4, 1.0)
    sm = private_second_moment(X, max_sq_norm=1.0, mu=0.5, key=jax.random.PRNGKey(0), failure=1e-3)
    assert sm.noise_bound_failure == 1e-3
    assert sm.noise_norm_bound == pytest.approx(gaussian_spectral_bound(3, sm.noise_sd, 1e-3), rel=1e-14)
    d = sm.describe()
    assert d["noise_sd"] == sm.noise_sd and d["noise_norm_bound"] == sm.noise_norm_bound
    assert d["event"] == sm.event.to_dict() and d["source"] == "private"


def test_public_second_moment_and_precision_matrix_closed_forms():
    Xp = np.array([[1.0, 2.0], [3.0, -1.0], [0.0, 2.0]])
    pub = public_second_moment(Xp)
    np.testing.assert_allclose(pub.matrix, np.array([[10.0, -1.0], [-1.0, 9.0]]) / 3, rtol=1e-15)
    assert pub.event is None and pub.noise_sd == 0.0
    A = precision_matrix(pub, 2.0, 0.25, [1.0, 3.0], noise_margin=0.5)
    np.testing.assert_allclose(A, np.diag([1.0, 3.0]) + 0.5 * (np.array([[10.0, -1.0], [-1.0, 9.0]]) / 3 + 0.5 * np.eye(2)),
                               rtol=1e-14)
    prior = precision_matrix(SecondMoment(None, "prior"), 2.0, 0.25, [1.0, 3.0])
    np.testing.assert_array_equal(prior, np.diag([1.0, 3.0]))
    with pytest.raises(ValueError, match="prior has 3 coordinates"):
        precision_matrix(pub, 1.0, 1.0, [1.0, 1.0, 1.0])


def test_each_source_describes_itself_in_the_report():
    """The run report's preconditioner block (``describe``) names its source, its noise and the
    event, with the keys the report documents; the notes say where the matrix came from."""
    keys = {"source", "noise_sd", "noise_norm_bound", "noise_bound_failure", "event", "notes"}
    prior = prior_second_moment()
    assert set(prior.describe()) == keys
    assert prior.describe()["source"] == "prior" and prior.matrix is None and prior.event is None
    assert prior.describe()["notes"] == ["preconditioner from the prior precision only (no data)"]
    pub = public_second_moment(np.ones((3, 2)))
    assert pub.describe()["source"] == "public" and pub.describe()["event"] is None
    assert pub.describe()["notes"] == ["second moment of 3 public rows (declared public by the caller)"]
    sm = private_second_moment(_design(2, 2, 1.0), max_sq_norm=1.0, mu=0.5, key=jax.random.PRNGKey(0), failure=0.01)
    d = sm.describe()
    assert set(d) == keys and d["source"] == "private" and d["noise_bound_failure"] == 0.01
    assert d["notes"] == list(sm.notes) and len(sm.notes) == 1


def test_precision_matrix_is_computed_in_float64_whatever_the_inputs():
    """A float32 second moment and an integer prior: beta kappa (S + margin I) + Lambda, in float64,
    symmetric; a shape mismatch names both shapes."""
    S32 = np.array([[0.3, 0.1], [0.1, 0.7]], dtype=np.float32)
    A = precision_matrix(SecondMoment(S32, "public"), 1.7, 0.25, [1, 3], noise_margin=0.1)
    S = S32.astype(np.float64)
    np.testing.assert_allclose(A, np.diag([1.0, 3.0]) + 1.7 * 0.25 * (S + 0.1 * np.eye(2)), rtol=1e-15, atol=0)
    assert A.dtype == np.float64 and np.array_equal(A, A.T)
    with pytest.raises(ValueError, match="the second moment is 3 x 2 but the prior has 3 coordinates"):
        precision_matrix(SecondMoment(np.ones((3, 2)), "public"), 1.0, 1.0, [1.0, 1.0, 1.0])


@pytest.mark.parametrize("n, d, R2, mu, failure", [(1000, 3, 1.0, 0.5, 1e-6), (30162, 100, 0.25, 0.2, 1e-3),
                                                  (50, 7, 4.0, 2.0, 0.1)])
def test_the_pending_stand_in_carries_the_releases_own_noise_figures(n, d, R2, mu, failure):
    # oracle: the release itself, made on real rows with the same bound, mu and failure, and the closed form
    # sqrt(2) R^2 / (n mu) (exact replace-one sensitivity of the upper triangle); a plan made with the stand-in
    # before the release must have the same noise figures as the one made after it
    from dp_infer.routes.preconditioning import pending_second_moment

    X = np.random.default_rng(0).normal(size=(n, d))
    X *= math.sqrt(R2) / np.linalg.norm(X, axis=1, keepdims=True)
    released = private_second_moment(X, max_sq_norm=R2, mu=mu, key=jax.random.PRNGKey(1), failure=failure)
    pend = pending_second_moment(n, d, max_sq_norm=R2, mu=mu, failure=failure)
    assert pend.matrix is None and pend.source == "private (pending)"
    assert pend.noise_sd == released.noise_sd == pytest.approx(math.sqrt(2) * R2 / (n * mu), rel=1e-12)
    assert pend.noise_norm_bound == released.noise_norm_bound == gaussian_spectral_bound(d, pend.noise_sd, failure)
    assert pend.noise_bound_failure == released.noise_bound_failure == failure
    assert pend.event.mu == released.event.mu == mu and pend.event.label == released.event.label
    with pytest.raises(ValueError, match=r"^failure must lie in \(0, 1\)"):
        pending_second_moment(n, d, max_sq_norm=R2, mu=mu, failure=1.5)
