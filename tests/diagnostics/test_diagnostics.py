"""Tests for dp_infer.diagnostics and dp_infer.diagnostics.plots (privacy-safe ArviZ export and checks).

All random inputs use fixed seeds. Statistical thresholds are stated next to each assertion.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections import namedtuple

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC
from numpyro.infer.mcmc import MCMCKernel

from dp_infer import diagnostics as D
from dp_infer.diagnostics import plots as P

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
Y = np.random.default_rng(123).normal(1.0, 2.0, size=25)  # the "private" data


def ar1(rng, num_chains, num_draws, rho, starts, event=()):
    """AR(1) chains x_{t+1} = rho x_t + sqrt(1 - rho^2) N(0,1): stationary law N(0, 1)."""
    x = np.empty((num_chains, num_draws) + event)
    cur = np.broadcast_to(np.asarray(starts, dtype=float).reshape((num_chains,) + (1,) * len(event)),
                          (num_chains,) + event).copy()
    s = math.sqrt(1 - rho**2)
    for t in range(num_draws):
        cur = rho * cur + s * rng.normal(size=cur.shape)
        x[:, t] = cur
    return x


@dataclasses.dataclass
class FakePlan:
    """Stands in for the privacy module's plan: only needs .as_dict()."""

    eps: float = 1.0
    delta: float = 1e-5

    def as_dict(self):
        return {
            "route": "trajectory",
            "eps": self.eps,
            "delta": self.delta,
            "event": {"kind": "gdp", "mu": 0.27},
            "num_draws": 200,
            "mu": 0.27,
            "beta": np.float64(12.5),
            "step_size": 1e-3,
            "horizon": 2.0,
            "num_steps": np.int64(2000),
            "num_chains": 2,
            "assumptions": ["loss L-Lipschitz with L=1", {"domain": "L2Ball", "radius": 3.0}],
            "sampling_error_tv": 1e-4,
            "rdp": {"orders": [2.0, 4.0, 8.0], "rdp": [0.1, 0.2, 0.4]},
            "relaxation_time": 50.0,
        }


# ----------------------------------------------------------------------------------------------
# a run of the real Langevin kernel with debug fields, on a model with a data-dependent site
# ----------------------------------------------------------------------------------------------


def _model(y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
    # a deterministic site that is a function of the data: must never be released
    numpyro.deterministic("loglik", dist.Normal(mu, sigma).log_prob(y).sum())
    numpyro.sample("obs", dist.Normal(mu, sigma), obs=y)


@pytest.fixture(scope="module")
def langevin_run():
    from dp_infer.kernels import Langevin

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the kernel warns that debug=True is non-private
        kernel = Langevin(_model, step_size=1e-3, debug=True)
    mcmc = MCMC(kernel, num_warmup=0, num_samples=200, num_chains=1, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), y=Y, extra_fields=("potential_energy", "grad_norm"))
    assert "potential_energy" in mcmc.get_extra_fields()  # the run did collect it
    return mcmc


def test_tree_is_private_only_with_a_matching_report(langevin_run):
    # a run made without a plan: privacy UNKNOWN, never "PRIVATE release"
    bare = D.to_datatree(langevin_run)
    assert bare.attrs[D.PRIVATE_ATTR] == "unknown" and not D.is_private(bare)
    text = D.format_report(bare)
    assert "privacy UNKNOWN" in text and "PRIVATE release" not in text
    assert "PRIVATE release" not in D.summary(bare)
    # a report for fewer chains or fewer draws than the tree holds does not cover it
    class OneChain(FakePlan):
        def as_dict(self):
            return {**super().as_dict(), "num_chains": 1, "num_draws": 50}
    small = D.to_datatree(langevin_run, OneChain())
    assert small.attrs[D.PRIVATE_ATTR] == "unknown"
    assert "200 draws per chain but the report covers 50" in D.privacy_status(small)
    # a report without an event cannot be recomputed
    class NoEvent(FakePlan):
        def as_dict(self):
            d = super().as_dict()
            d.pop("event")
            return d
    assert not D.is_private(D.to_datatree(langevin_run, NoEvent()))
    assert D.is_private(D.to_datatree(langevin_run, FakePlan()))


def test_default_export_contains_only_theta(langevin_run):
    dt = D.to_datatree(langevin_run, FakePlan())
    assert set(dt.children) == {"posterior", "sample_stats"}
    assert set(dt["posterior"].data_vars) == {"mu", "sigma"}
    assert set(dt["sample_stats"].data_vars) == {"diverging"}
    assert dt["sample_stats"]["diverging"].dtype == bool
    assert dt.attrs[D.PRIVATE_ATTR] == "true"
    assert D.WARNING_ATTR not in dt.attrs
    assert set(json.loads(dt.attrs["dp_infer_dropped"])) >= {"potential_energy", "grad_norm", "loglik"}
    # no numeric value of the data, the energy or the data-dependent site anywhere in the tree
    pe = np.asarray(langevin_run.get_extra_fields()["potential_energy"])
    for node in dt.subtree:
        for var in node.data_vars.values():
            vals = np.asarray(var.values, dtype=float).ravel()
            assert not np.isin(np.float32(Y), vals.astype(np.float32)).any()
            assert not np.isin(pe[:5], vals.astype(pe.dtype)).any()
    # the posterior draws are exactly MCMC's constrained draws
    s = langevin_run.get_samples(group_by_chain=True)
    np.testing.assert_array_equal(dt["posterior"]["sigma"].values, np.asarray(s["sigma"]))
    assert dt.attrs["dp_infer_kernel"] == "Langevin"
    assert dt.attrs["dp_infer_kernel_step_size"] == pytest.approx(1e-3)


def test_debug_export_is_marked_non_private(langevin_run):
    dbg = D.to_datatree(langevin_run, FakePlan(), debug=True, debug_stats={"clipped_row_fraction": 0.04})
    assert dbg.attrs[D.PRIVATE_ATTR] == "false"
    assert dbg.attrs[D.WARNING_ATTR] == D.DEBUG_WARNING
    assert dbg["posterior"].attrs[D.WARNING_ATTR] == D.DEBUG_WARNING
    assert {"potential_energy", "grad_norm"} <= set(dbg["sample_stats"].data_vars)
    assert "loglik" in dbg["posterior"].data_vars
    assert dbg.attrs["dp_infer_debug_clipped_row_fraction"] == pytest.approx(0.04)
    assert not D.is_private(dbg)
    # re-exporting a debug tree privately strips everything non-private again
    clean = D.to_datatree(dbg)
    assert D.is_private(clean)
    assert set(clean["posterior"].data_vars) == {"mu", "sigma"}
    assert set(clean["sample_stats"].data_vars) == {"diverging"}
    assert D.get_report(clean) == D.report_to_dict(FakePlan())  # report carried over


class _EnergyDivergenceKernel(MCMCKernel):
    """A foreign random-walk MH kernel whose `diverging` flag is computed from the potential
    energy (like NUTS/SA): that flag depends on the data and must not be exported."""

    State = namedtuple("State", ["z", "potential_energy", "diverging", "rng_key"])

    def __init__(self, potential_fn):
        self.potential_fn = potential_fn
        self.model = None

    @property
    def sample_field(self):
        return "z"

    @property
    def default_fields(self):
        return ("z", "diverging")

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        pe = self.potential_fn(init_params)
        return self.State(init_params, pe, pe > 0.5, rng_key)

    def sample(self, state, model_args, model_kwargs):
        k1, k2, key = jax.random.split(state.rng_key, 3)
        prop = state.z + 0.5 * jax.random.normal(k1, state.z.shape)
        pe_p = self.potential_fn(prop)
        accept = jnp.log(jax.random.uniform(k2)) < state.potential_energy - pe_p
        z = jnp.where(accept, prop, state.z)
        pe = jnp.where(accept, pe_p, state.potential_energy)
        return self.State(z, pe, pe > 0.5, key)


def test_foreign_kernel_energy_flag_not_exported():
    pot = lambda z: 0.5 * jnp.sum(z**2)  # noqa: E731
    mcmc = MCMC(_EnergyDivergenceKernel(pot), num_warmup=0, num_samples=100, num_chains=2,
                progress_bar=False, chain_method="sequential")
    mcmc.run(jax.random.PRNGKey(3), init_params=jnp.zeros((2, 2)), extra_fields=("potential_energy",))
    assert np.asarray(mcmc.get_extra_fields()["diverging"]).any()  # the energy-based flag fired
    dt = D.to_datatree(mcmc)
    assert set(dt["posterior"].data_vars) == {"theta"}
    assert dt["posterior"]["theta"].shape == (2, 100, 2)
    assert not dt["sample_stats"]["diverging"].values.any()  # theta is finite everywhere
    assert set(dt["sample_stats"].data_vars) == {"diverging"}
    dbg = D.to_datatree(mcmc, debug=True)
    np.testing.assert_array_equal(dbg["sample_stats"]["kernel_diverging"].values,
                                  np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"]))


def test_divergence_is_computed_from_theta_and_sticky():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 50, 2))
    x[1, 20, 0] = np.nan  # chain 1 blows up at draw 20 ...
    x[1, 30:, :] = 0.0  # ... and later draws look fine, but are garbage: still flagged
    x[0, 40, 1] = 7.0
    dt = D.to_datatree({"w": x}, sample_stats={"diverging": np.zeros((2, 50), bool)})
    div = dt["sample_stats"]["diverging"].values
    assert div[1, :20].sum() == 0 and div[1, 20:].all()
    assert not div[0].any()
    dt2 = D.to_datatree({"w": x}, divergence_threshold=5.0)
    assert dt2["sample_stats"]["diverging"].values[0, 40:].all()
    assert not dt2["sample_stats"]["diverging"].values[0, :40].any()
    mr = D.check_mixing(dt)
    assert mr.num_divergences == 30 and mr.divergences_per_chain == [0, 30]
    assert any("step size too large for the potential's smoothness" in w for w in mr.warnings)


# ----------------------------------------------------------------------------------------------
# files
# ----------------------------------------------------------------------------------------------


def _roundtrip(tmp_path, suffix):
    rng = np.random.default_rng(2)
    draws = {"theta": rng.normal(size=(2, 40, 3))}
    dt = D.to_datatree(draws, FakePlan(), dims={"theta": ["feature"]}, coords={"feature": ["a", "b", "c"]})
    path = D.save(dt, tmp_path / f"run{suffix}")
    back = D.load(path)
    assert back.attrs[D.PRIVATE_ATTR] == "true"
    assert D.get_report(back) == D.report_to_dict(FakePlan())
    assert D.get_report(back)["assumptions"][1] == {"domain": "L2Ball", "radius": 3.0}
    for key in ("eps", "delta", "mu", "beta", "step_size", "horizon", "num_steps", "num_chains",
                "sampling_error_tv", "relaxation_time"):
        assert back.attrs[f"dp_infer_{key}"] == pytest.approx(D.report_to_dict(FakePlan())[key])
    assert back.attrs["dp_infer_route"] == "trajectory"
    np.testing.assert_array_equal(back["posterior"]["theta"].values, draws["theta"])
    assert list(back["posterior"]["feature"].values) == ["a", "b", "c"]
    assert back["sample_stats"]["diverging"].dtype == bool
    assert back["posterior"].attrs["sample_dims"] == ["chain", "draw"]
    # debug trees keep their warning through a file, and saving one warns
    dbg = D.to_datatree(draws, FakePlan(), debug=True)
    with pytest.warns(UserWarning, match="NON-PRIVATE"):
        p2 = D.save(dbg, tmp_path / f"dbg{suffix}")
    back2 = D.load(p2)
    assert back2.attrs[D.WARNING_ATTR] == D.DEBUG_WARNING and not D.is_private(back2)


def test_attrs_roundtrip_zip(tmp_path):
    _roundtrip(tmp_path, ".zip")


def test_attrs_roundtrip_netcdf(tmp_path):
    pytest.importorskip("h5netcdf")
    _roundtrip(tmp_path, ".nc")


# ----------------------------------------------------------------------------------------------
# mixing checks
# ----------------------------------------------------------------------------------------------


def test_rhat_ess_mcse_match_arviz():
    rng = np.random.default_rng(4)
    x = ar1(rng, 4, 300, 0.7, rng.normal(size=4), event=(2,))
    s = ar1(rng, 4, 300, 0.2, np.zeros(4))
    dt = D.to_datatree({"x": x, "s": s})
    mr = D.check_mixing(dt)
    for name, arr in (("x", x), ("s", s)):
        np.testing.assert_allclose(mr.rhat[name], az.rhat(arr, method="rank"), rtol=1e-12)
        np.testing.assert_allclose(mr.ess_bulk[name], az.ess(arr, method="bulk"), rtol=1e-12)
        # tail ESS: ArviZ's array interface needs an explicit prob; compare on the tree below
        np.testing.assert_allclose(mr.mcse_mean[name], az.mcse(arr, method="mean"), rtol=1e-12)
        np.testing.assert_allclose(mr.iat[name], 4 * 300 / az.ess(arr, method="bulk"), rtol=1e-12)
    # and against ArviZ run on the DataTree itself
    np.testing.assert_allclose(mr.rhat["x"], az.rhat(dt)["x"].values, rtol=1e-12)
    for name in ("x", "s"):
        np.testing.assert_allclose(mr.ess_tail[name], az.ess(dt, method="tail")[name].values, rtol=1e-12)
        # ... which is also what az.summary prints
    table = az.summary(dt, round_to="none")
    np.testing.assert_allclose(table.loc["s", "ess_tail"], mr.ess_tail["s"], rtol=1e-12)
    np.testing.assert_allclose(table.loc["x[1]", "r_hat"], mr.rhat["x"][1], rtol=1e-12)
    # the AR(1) IAT (1 + rho)/(1 - rho) = 5.67 for rho = 0.7 is recovered roughly (ESS is noisy)
    assert 3.5 < mr.iat["x"].mean() < 9.0


def test_non_mixed_run_is_flagged():
    rng = np.random.default_rng(5)
    # two chains started far apart, strongly autocorrelated, short horizon
    x = ar1(rng, 2, 200, 0.99, [-10.0, 10.0])
    mr = D.check_mixing({"theta": x})
    assert mr.max_rhat > 1.5
    assert not mr.ok
    assert any(D.RHAT_ADVICE in w for w in mr.warnings)
    assert any("ESS" in w for w in mr.warnings)
    assert D.RHAT_ADVICE in str(mr)


def test_iid_sample_is_not_flagged():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(4, 1000, 2))
    mr = D.check_mixing({"theta": x}, {"relaxation_time": 1.0})
    # iid: R-hat ~ 1 +- O(1/sqrt(4000)); ESS ~ 4000 >> 400; IAT ~ 1 <= 1.5 * (2*1 - 1)
    assert mr.ok, mr.warnings
    assert mr.max_rhat < 1.01 and mr.min_ess_bulk > 2000


def test_slower_than_predicted_mixing_is_flagged():
    rng = np.random.default_rng(7)
    x = ar1(rng, 4, 1000, 0.9, rng.normal(size=4))  # IAT (1 + 0.9)/(1 - 0.9) = 19
    slow = D.check_mixing({"theta": x}, {"relaxation_time": 2.0})  # bound 3 steps
    assert any("mixing slower than predicted" in w for w in slow.warnings)
    ok = D.check_mixing({"theta": x}, {"relaxation_time": 20.0})  # bound 39 steps: consistent
    assert not any("mixing slower than predicted" in w for w in ok.warnings)
    # with thinning the IAT in steps is IAT in draws times steps per draw
    thin = D.check_mixing({"theta": x}, {"relaxation_time": 20.0, "steps_per_draw": 10})
    assert any("mixing slower than predicted" in w for w in thin.warnings)


def test_run_exceeding_plan_is_flagged():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(3, 400))
    mr = D.check_mixing({"theta": x}, {"num_chains": 1, "num_steps": 100})
    assert any("accounts for 1" in w and "chains" in w for w in mr.warnings)
    assert any("ran 400 steps" in w for w in mr.warnings)


def test_single_chain_rhat():
    rng = np.random.default_rng(9)
    iid = rng.normal(size=2000)
    r = D.single_chain_rhat(iid, segments=2)
    assert r == pytest.approx(float(az.rhat(iid.reshape(2, 1000), method="rank")), rel=1e-12)
    assert r < 1.01  # iid: split R-hat - 1 is O(1/sqrt(n)) ~ 0.002
    drift = np.linspace(0, 5, 2000) + 0.3 * rng.normal(size=2000)  # a chain still moving
    assert D.single_chain_rhat(drift, segments=4) > 1.5
    # dict input with (chain, draw, ...) arrays uses the selected chain
    both = {"a": np.stack([iid, drift])}
    assert D.single_chain_rhat(both, chain=1)["a"] > 1.5
    # check_mixing falls back to it with one chain
    mr = D.check_mixing({"theta": drift[None]})
    assert mr.rhat_method.startswith("single-chain")
    assert mr.rhat["theta"] == pytest.approx(D.single_chain_rhat(drift), rel=1e-12)
    assert any(D.RHAT_ADVICE in w for w in mr.warnings)
    with pytest.raises(ValueError, match="segments"):
        D.single_chain_rhat(iid, segments=1)


def test_privacy_cost_of_chains_matches_accountants():
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting import rdp
    from dp_accounting.pld import pld_privacy_accountant

    mu1, k, delta = 0.4, 4, 1e-6
    out = D.privacy_cost_of_chains({"mu_per_chain": mu1, "delta": delta}, k)
    assert out["mu"] == pytest.approx(math.sqrt(k) * mu1)
    # K chains = K Gaussian mechanisms with noise multiplier 1/mu1, composed by the PLD accountant
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    acc.compose(dp_accounting.GaussianDpEvent(1 / mu1), k)
    assert out["eps"] == pytest.approx(acc.get_epsilon(delta), rel=1e-4)
    # totals with num_chains are divided back to one chain
    tot = D.privacy_cost_of_chains({"mu": 0.8, "num_chains": 4}, 1)
    assert tot["mu"] == pytest.approx(0.4)
    # RDP curve of a Gaussian mechanism (sigma = 2): rdp(a) = a / (2 sigma^2), scaled by K
    orders = [1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    curve = {"orders": orders, "rdp": [a / 8.0 for a in orders]}
    out = D.privacy_cost_of_chains({"rdp_per_chain": curve, "delta": 1e-5}, 3)
    np.testing.assert_allclose(out["rdp"]["rdp"], [3 * a / 8.0 for a in orders])
    racc = rdp.RdpAccountant(orders=orders)
    racc.compose(dp_accounting.GaussianDpEvent(2.0), 3)
    assert out["eps"] == pytest.approx(racc.get_epsilon(1e-5), rel=1e-6)
    with pytest.raises(ValueError, match="num_chains"):
        D.privacy_cost_of_chains({"mu": 1.0}, 0)
    with pytest.raises(ValueError, match="no per-chain privacy parameter"):
        D.privacy_cost_of_chains({"eps": 1.0}, 2)


def test_privacy_module_event_is_accepted_as_report(tmp_path):
    path_mod = pytest.importorskip("dp_infer.privacy.path")
    event = path_mod.path_event(beta=10.0, sensitivity=0.1, time=1.0, num_chains=2)
    rep = D.report_to_dict(event)
    assert rep["mu"] == pytest.approx(event.mu)
    cost = D.privacy_cost_of_chains(event, 8)  # 8 chains instead of the plan's 2: mu x 2
    assert cost["mu"] == pytest.approx(2.0 * event.mu)
    assert cost["mu_per_chain"] == pytest.approx(event.mu / math.sqrt(2))
    dt = D.to_datatree({"theta": np.zeros((2, 20))}, event)
    back = D.load(D.save(dt, tmp_path / "ev.zip"))
    assert D.get_report(back) == rep and back.attrs["dp_infer_mu"] == pytest.approx(event.mu)
    assert "Gaussian DP" in D.format_report(back)


# ----------------------------------------------------------------------------------------------
# text output
# ----------------------------------------------------------------------------------------------


def test_format_report_and_summary():
    plan = FakePlan()
    text = D.format_report(plan)
    rep = D.report_to_dict(plan)
    total = rep["delta"] + (1 + math.exp(rep["eps"])) * rep["sampling_error_tv"]
    assert "(1, 1e-05)-DP" in text
    assert "tau = 0.0001" in text  # the sampling error is shown on its own ...
    assert f"{total:.6g}" in text  # ... and combined with delta (invariant 6)
    assert "L2Ball" in text and "trajectory" in text
    assert "UNKNOWN" in D.format_report(None)
    rng = np.random.default_rng(10)
    dt = D.to_datatree({"theta": rng.normal(size=(2, 100, 2))}, plan)
    s = D.summary(dt)
    assert "PRIVATE release" in s and "Privacy report" in s
    assert "theta[0]" in s and "r_hat" in s and "ess_bulk" in s
    assert "NON-PRIVATE" in D.summary(D.to_datatree(dt, debug=True))


def test_input_validation_names_parameter():
    with pytest.raises(ValueError, match="ndim >= 2"):
        D.to_datatree({"theta": np.zeros(10)})
    with pytest.raises(ValueError, match=r"rhat_max must lie in \(1, inf\)"):
        D.check_mixing({"theta": np.zeros((2, 10))}, rhat_max=1.0)
    with pytest.raises(ValueError, match="ess_min"):
        D.check_mixing({"theta": np.zeros((2, 10))}, ess_min=-1)
    with pytest.raises(ValueError, match="report must be"):
        D.to_datatree({"theta": np.zeros((2, 10))}, report=3.0)
    with pytest.raises(ValueError, match="total_budget"):
        P.plot_budget([], 0.0, "unused.png")


# ----------------------------------------------------------------------------------------------
# plots and the report command
# ----------------------------------------------------------------------------------------------


def _is_png(path):
    data = path.read_bytes()
    return len(data) > 1000 and data[:8] == PNG_MAGIC


def test_plots_write_png(tmp_path):
    rng = np.random.default_rng(11)
    dt = D.to_datatree({"theta": rng.normal(size=(2, 100, 10))}, FakePlan())  # 10 components: capped
    paths = P.write_report_plots(dt, tmp_path / "plots")
    assert [p.name for p in paths] == ["trace.png", "rank.png", "autocorr.png"]
    assert all(_is_png(p) for p in paths)
    table = [{"method": m, "eps": e, "accuracy": 0.6 + 0.05 * math.log10(e) + d, "stderr": 0.01}
             for m, d in (("langevin", 0.0), ("output perturbation", -0.05)) for e in (0.1, 1.0, 10.0)]
    assert _is_png(P.plot_privacy_utility(table, tmp_path / "pu.png"))
    loss = [{"method": "ula", "eps": 1.0, "excess_loss": 0.3, "se": 0.02}]
    assert _is_png(P.plot_privacy_utility(loss, tmp_path / "loss.png"))
    spent = [{"run": "fit 1", "eps": 0.5}, {"run": "fit 2", "eps": 0.3}]
    assert _is_png(P.plot_budget(spent, 1.0, tmp_path / "budget.png"))
    assert _is_png(P.plot_budget(spent + [{"run": "fit 3", "eps": 0.4}], 1.0, tmp_path / "over.png"))


def test_plots_without_a_path_return_stamped_figures_named_by_feature_with_legends(tmp_path):
    """Issue 41: the notebooks show figures, not PNG files; every figure says what it releases."""
    import types

    import matplotlib.pyplot as plt

    rng = np.random.default_rng(13)
    dt = D.to_datatree({"theta": rng.normal(size=(2, 60, 3))}, FakePlan(), dims={"theta": ["feature"]},
                       coords={"feature": ["age", "hours", "score"]})
    stamp = P.privacy_stamp(D.get_report(dt))
    assert stamp.startswith("private release: ε = 1") and "δ = 1e-05" in stamp
    assert P.privacy_stamp(None) == "no privacy report attached"
    for fn in (P.plot_trace, P.plot_rank, P.plot_forest):
        fig = fn(dt, coords={"feature": ["age", "score"]})
        try:
            assert isinstance(fig, plt.Figure) and stamp in [t.get_text() for t in fig.texts]
            if fn is not P.plot_forest:  # two chains: a legend tells them apart
                assert fig.legends
        finally:
            plt.close(fig)
    trace = P.plot_trace(dt, coords={"feature": ["age", "score"]})
    try:  # one row per component, titled by its feature
        labels = " ".join(a.get_ylabel() + a.get_xlabel() + a.get_title() for a in trace.axes)
        assert "age" in labels and "score" in labels
    finally:
        plt.close(trace)
    assert _is_png(P.plot_trace(dt, tmp_path / "t.png"))  # with a path: the PNG, as before
    iv = types.SimpleNamespace(centre=np.array([0.5, -1.0]), lower=np.array([0.0, -2.0]),
                               upper=np.array([1.0, 0.0]), prob=0.9)
    ref = {"centre": np.array([0.4, -0.9]), "lower": np.array([0.2, -1.2]), "upper": np.array([0.6, -0.6])}
    fig = P.plot_intervals(iv, ["age", "hours"], reference=ref, report=D.get_report(dt))
    try:
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert legend == ["private run: released 90% intervals", "NON-PRIVATE posterior"]
        assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["age", "hours"]
        assert stamp in [t.get_text() for t in fig.texts]
    finally:
        plt.close(fig)
    assert _is_png(P.plot_intervals(iv, ["age", "hours"], path=tmp_path / "iv.png"))
    with pytest.raises(ValueError, match="2 entries"):
        P.plot_intervals(iv, ["age"])


def test_report_from_file(tmp_path):
    rng = np.random.default_rng(12)
    x = ar1(rng, 2, 200, 0.99, [-10.0, 10.0])
    path = D.save(D.to_datatree({"theta": x}, FakePlan()), tmp_path / "run.zip")
    text = P.report_from_file(path, tmp_path / "out")
    assert "Privacy report" in text and "(1, 1e-05)-DP" in text
    # FakePlan's report records no target: the summary does not call the draws a posterior
    assert "Summary of the released draws" in text and "Posterior summary" not in text and "Mixing checks" in text
    assert D.RHAT_ADVICE in text
    for name in ("trace.png", "rank.png", "autocorr.png"):
        assert _is_png(tmp_path / "out" / name)
        assert str(tmp_path / "out" / name) in text


def test_langevin_chains_started_far_apart_with_a_tiny_horizon_are_flagged():
    """Two of our Langevin chains from +-10 on N(0, I), total time 0.2 (relaxation time 1):
    they cannot meet, and check_mixing must say so. Run for time 800 at h = 0.1 (burn-in of 200
    dropped; autocorrelation time ~ 2/(h m) = 20 steps, so about 600 effective draws) the same
    chains agree: R-hat within 1.03 (its sampling sd at this ESS is below 0.01)."""
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC

    from dp_infer.kernels import Langevin

    def run(num_steps, h):
        k = Langevin(potential_fn=lambda z: 0.5 * jnp.sum(z["t"] ** 2), step_size=h)
        m = MCMC(k, num_warmup=0, num_samples=num_steps, num_chains=2, chain_method="vectorized",
                 progress_bar=False)
        m.run(jax.random.PRNGKey(0), init_params={"t": jnp.array([[10.0, 10.0], [-10.0, -10.0]])})
        return np.asarray(m.get_samples(group_by_chain=True)["t"])

    short = D.check_mixing({"t": run(20, 0.01)})
    assert not short.ok and any("R-hat" in w for w in short.warnings)
    assert short.max_rhat > 2.0
    long = D.check_mixing({"t": run(8000, 0.1)[:, 2000:]})
    assert long.max_rhat < 1.03


def test_moved_names_keep_working_with_a_deprecation_warning(tmp_path):
    with pytest.warns(DeprecationWarning, match="moved to dp_infer.diagnostics.plots.report_from_file"):
        fn = D.report_from_file
    assert fn is P.report_from_file
    from dp_infer.privacy import conversions, events

    with pytest.warns(DeprecationWarning, match="dp_infer.privacy.conversions.gdp_mu"):
        assert events.gdp_mu is conversions.gdp_mu
    with pytest.raises(AttributeError):
        events.no_such_name  # noqa: B018

