"""The model route's forecast door (dp_infer.forecast_model_posterior): your own NumPyro model's plan and forecast
read before anything is charged, from the same call a run takes.

Oracles: the run itself (the forecast must be the plan the run is given, its charge the ledger's record, its
interval forecast the run's ``report_extras``), the ledger (nothing recorded by a forecast), a neighbouring
dataset (the same forecast: public inputs only), and the run's own refusals.
"""

from __future__ import annotations

import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dp_infer
from dp_infer.infer.model_forecast import ModelPosteriorForecast
from dp_infer.infer.model_interval_release import check_forecast_point
from dp_infer.privacy.conversions import gdp_mu
from dp_infer.privacy.ledger import Ledger

from tests.infer.test_model_intervals import DELTA, hier, logreg
from tests.infer.test_model_intervals import _logit_data as logit_data


def _ledger(tmp_path, name="ledger.sqlite"):
    led = Ledger(tmp_path / name)
    led.register_dataset("d", 10.0, 1e-4)
    return led


OPTIONS = dict(eps=1.0, delta=DELTA, clip_norm=4.0, ess=8, num_draws=20, seed=1, progress_bar=False)


@pytest.mark.slow  # one run (about 20 s)
def test_the_forecast_is_the_plan_the_run_is_given_and_charges_nothing(tmp_path):
    """One options dict, two calls: the forecast records nothing in the ledger; the run then charges exactly the
    forecast's (eps, delta) and runs its beta, chains and steps; the weighted release's interval forecast is the
    run's report_extras['interval_forecast'] and its notes the run's plan's notes (n = 300, d = 2, public rows)."""
    X, y, _ = logit_data(2, 300, d=2)
    Xp, _, _ = logit_data(3, 500, d=2)
    led = _ledger(tmp_path)
    opts = dict(OPTIONS, ledger=led, dataset_id="d", interval_curvature="public", X_public=Xp,
                forecast_at={"w": np.array([1.0, -0.5])})
    fc = dp_infer.forecast_model_posterior(logreg, X, y, **opts)
    assert isinstance(fc, ModelPosteriorForecast)
    assert led.history("d") == []  # a forecast charges nothing
    run = dp_infer.fit(model=logreg, X=X, y=y, target="posterior", **opts)
    (rec,) = led.history("d")
    assert (fc.eps, fc.delta) == (run.plan.eps, run.plan.delta) == (1.0, DELTA)
    assert rec["event"] == fc.plan.event.to_dict()
    assert fc.plan.event.mu <= gdp_mu(1.0, DELTA) * (1 + 1e-12)
    assert (fc.beta, fc.num_chains, fc.num_steps, fc.n, fc.dim) == (run.plan.beta, run.plan.num_chains,
                                                                    run.plan.num_steps, 300, 2)
    assert fc.interval_share == run.plan.posterior.interval_share > 0
    assert fc.notes == tuple(run.plan.notes)
    assert fc.interval_width == run.report_extras["interval_forecast"]["width_ratio"] > 1.0
    assert fc.interval_typical_sd == run.report_extras["interval_forecast"]["typical_sd"]
    assert fc.coordinates == ("w[0]", "w[1]") and fc.interval_skipped is None
    text = fc.explain()
    assert "nothing charged" in text and f"{fc.interval_width:.2g}x" in text
    width_note = next(nt for nt in run.plan.notes if nt.startswith("forecast: intervals"))
    assert text.count(width_note) == 1 and text.count(f"{fc.interval_width:.2g}x the non-private") == 1
    assert "read from the public rows at forecast_at" in width_note
    assert run.report_extras["interval_forecast"]["at"] == fc.interval_forecast_at == "forecast_at"
    assert "at least about" not in text and any("at forecast_at" in nt for nt in run.plan.notes)


def test_neighbouring_datasets_get_the_same_forecast():
    """Replace one row (its features pushed out, its label flipped): every field and the printed forecast are the
    same. A forecast that read the rows would differ here."""
    X, y, _ = logit_data(2, 300, d=2)
    Xp, _, _ = logit_data(3, 500, d=2)
    X2, y2 = X.copy(), y.copy()
    X2[17], y2[17] = [3.0, -3.0], 1.0 - y2[17]
    opts = dict(OPTIONS, interval_curvature="public", X_public=Xp)
    a = dp_infer.forecast_model_posterior(logreg, X, y, **opts)
    b = dp_infer.forecast_model_posterior(logreg, X2, y2, **opts)
    assert a == b and a.explain() == b.explain()
    assert a.plan.event == b.plan.event


def test_a_models_forecast_and_a_losss_share_the_tempered_run_fields():
    """Both doors return a TemperedRunForecast: the shared fields hold the call's own inputs (n, dim, eps, delta,
    ess, chains) in both, and as_dict gives every figure but leaves out the model forecast's plan object."""
    from dataclasses import fields

    from dp_infer.routes.forecast import PosteriorForecast, TemperedRunForecast

    X, y, _ = logit_data(2, 300, d=2)
    fm = dp_infer.forecast_model_posterior(logreg, X, y, **OPTIONS)
    dim = X.shape[1]
    fl = dp_infer.forecast_posterior(dp_infer.losses.logistic(row_norm=4.0), 300, dim, eps=1.0, delta=DELTA,
                                     prior_precision=1.0, ess=8, num_chains=2)
    assert isinstance(fm, ModelPosteriorForecast) and isinstance(fl, PosteriorForecast)
    shared = [f.name for f in fields(TemperedRunForecast)]
    for fc, chains in ((fm, fm.num_chains), (fl, 2)):
        assert isinstance(fc, TemperedRunForecast)
        d = fc.as_dict()
        assert set(shared) <= set(d) and "plan" not in d
        assert (d["n"], d["dim"], d["eps"], d["delta"], d["ess"], d["num_chains"]) == (300, dim, 1.0, DELTA, 8, chains)
        assert d["beta_over_n"] == pytest.approx(d["beta"] / 300, rel=1e-12)
        assert d["interval_inflation"] == pytest.approx((300 / d["beta"]) ** 0.5, rel=1e-12)
    assert fm.plan is not None and fm.as_dict()["coordinates"] == fm.coordinates
    assert fl.as_dict()["intervals"] == fl.intervals and fl.as_dict()["sd_ratios"] == fl.sd_ratios


def test_without_public_rows_a_small_table_is_forecast_to_be_its_prior_and_the_forecast_says_so():
    """n = 40 at eps = 1: every posterior sd at least 0.9 of the prior's (a WARNING line), and no interval release
    (the released J would be noise at this n: the reason is printed, not a refusal)."""
    X, y, _ = logit_data(4, 40, d=2)
    fc = dp_infer.forecast_model_posterior(logreg, X, y, eps=1.0, delta=DELTA, clip_norm=1.0)
    assert fc.close_to_prior and fc.prior_sd_ratio_floor >= 0.9
    assert fc.interval_share == 0.0 and fc.interval_skipped and fc.interval_width is None
    text = fc.explain()
    assert "WARNING" in text and f"intervals for theta: none ({fc.interval_skipped})" in text
    big, yb, _ = logit_data(4, 20000, d=2)
    fb = dp_infer.forecast_model_posterior(logreg, big, yb, eps=1.0, delta=DELTA, clip_norm=1.0)
    assert not fb.close_to_prior and "WARNING" not in fb.explain()


def test_with_the_fisher_preconditioner_the_steps_are_the_bound_after_its_release():
    """preconditioner='fisher': the run re-plans from the released second moment; the forecast gives the step
    count that bound sets (the plan's forecast_num_steps), not the stand-in plan's isotropic one."""
    X, y, _ = logit_data(2, 3000, d=3)
    fc = dp_infer.forecast_model_posterior(logreg, X, y, eps=1.0, delta=DELTA, preconditioner="fisher")
    bound = fc.plan.plan.posterior.model.forecast_num_steps
    assert bound is not None and fc.num_steps == bound != fc.plan.plan.num_steps


@pytest.mark.parametrize("kw, needle", [
    (dict(eps=0.0), "eps"),
    (dict(eps=1.0, delta=2.0), "delta"),
    (dict(eps=1.0, interval_share=1.5), "interval_share"),
    (dict(eps=1.0, kernel="hmc"), "kernel"),
    (dict(eps=1.0, seed=-3), "seed"),
    (dict(eps=1.0, interval_curvature="public"), "needs X_public"),
    (dict(delta=DELTA), "eps"),
])
def test_bad_input_is_refused_by_name_as_the_run_refuses_it(tmp_path, kw, needle):
    X, y, _ = logit_data(3, 200, d=2)
    led = _ledger(tmp_path)
    kw = {"delta": DELTA, **kw}
    with pytest.raises(ValueError) as e:
        dp_infer.forecast_model_posterior(logreg, X, y, ledger=led, dataset_id="d", **kw)
    msg = str(e.value)
    assert needle in msg and len(msg.splitlines()) == 1, msg
    assert led.history("d") == []


def test_bad_rows_are_refused_before_anything_is_planned():
    X, y, _ = logit_data(3, 200, d=2)
    y_nan = y.copy()
    y_nan[5] = np.nan
    for args, needle in [((X, y_nan), "y"), ((X, y[:50]), "same number of rows"), ((X, y + 2.0), "y")]:
        with pytest.raises(ValueError, match=needle):
            dp_infer.forecast_model_posterior(logreg, *args, eps=1.0, delta=DELTA)


def scaled_logreg(X=None, y=None):
    """A logistic model with a positive scale site (its support: (0, inf), log-transformed)."""
    s = numpyro.sample("s", dist.HalfNormal(1.0))
    w = numpyro.sample("w", dist.Normal(0.0, 2.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=s * (X @ w)), obs=y)


def test_forecast_at_reads_the_forecast_at_a_public_guess_of_the_estimate():
    """forecast_at moves the weighted release's forecast to a given point (it changes nothing else in the plan):
    at w = 0 it is the prior-centre forecast up to the prior stand-in's Monte-Carlo centre (4,000 draws: its
    centre within 0.1 of 0 for a N(0, 2^2) site), worded as a forecast, not a floor; at w = (3, -3), where most
    rows are confidently classified and carry less information (p (1 - p) << 1/4), the forecast intervals are
    wider in both senses, as the Adult runs measured."""
    X, y, _ = logit_data(2, 3000, d=2)
    Xp, _, _ = logit_data(3, 4000, d=2)
    opts = dict(eps=1.0, delta=DELTA, clip_norm=4.0, interval_curvature="public", X_public=Xp)
    centre = dp_infer.forecast_model_posterior(logreg, X, y, **opts)
    at0 = dp_infer.forecast_model_posterior(logreg, X, y, forecast_at={"w": np.zeros(2)}, **opts)
    far = dp_infer.forecast_model_posterior(logreg, X, y, forecast_at={"w": np.array([3.0, -3.0])}, **opts)
    assert centre.interval_forecast_at == "prior centre" and at0.interval_forecast_at == "forecast_at"
    assert at0.interval_width == pytest.approx(centre.interval_width, rel=0.02)
    assert at0.interval_typical_sd == pytest.approx(centre.interval_typical_sd, rel=0.02)
    assert far.interval_width > 1.1 * centre.interval_width
    assert far.interval_typical_sd > 1.5 * centre.interval_typical_sd
    assert (far.beta, far.num_steps, far.plan.event) == (centre.beta, centre.num_steps, centre.plan.event)
    assert "at least about" in centre.explain() and "at least about" not in far.explain()


def test_forecast_at_is_checked_against_the_model_before_anything_is_charged(tmp_path):
    X, y, _ = logit_data(2, 300, d=2)
    Xp, _, _ = logit_data(3, 500, d=2)
    led = _ledger(tmp_path)
    pub = dict(interval_curvature="public", X_public=Xp)
    for model, extra, fa, needle in [
        (logreg, {}, {"w": np.zeros(2)}, "only the weighted interval release"),  # no public rows: no forecast
        (logreg, pub, [0.0, 0.0], "must be a dict"),
        (logreg, pub, {"w": np.zeros(3)}, "shape (2,)"),
        (logreg, pub, {"w": np.array([0.0, np.nan])}, "non-finite"),
        (logreg, pub, {"w": np.zeros(2), "v": 1.0}, "unknown ['v']"),
        (scaled_logreg, pub, {"w": np.zeros(2)}, "missing ['s']"),
        (scaled_logreg, pub, {"s": -1.0, "w": np.zeros(2)}, "forecast_at['s'] lies outside the site's support"),
    ]:
        with pytest.raises(ValueError) as e:
            dp_infer.forecast_model_posterior(model, X, y, eps=1.0, delta=DELTA, clip_norm=4.0, forecast_at=fa,
                                              ledger=led, dataset_id="d", **extra)
        assert needle in str(e.value) and len(str(e.value).splitlines()) == 1, str(e.value)
        with pytest.raises(ValueError, match="forecast_at"):
            dp_infer.fit(model=model, X=X, y=y, target="posterior", eps=1.0, delta=DELTA, clip_norm=4.0,
                         forecast_at=fa, ledger=led, dataset_id="d", progress_bar=False, **extra)
    assert led.history("d") == []


def test_a_forecast_point_round_trips_through_the_models_transforms():
    """check_forecast_point's flat vector is the model's own unconstrained point: ml.constrain gives the values
    back (the scale site through its log transform)."""
    X, y, _ = logit_data(2, 300, d=2)
    ml = dp_infer.loss_from_model(scaled_logreg, X, y, clip_norm=4.0)
    given = {"s": 0.7, "w": np.array([1.5, -0.25])}
    flat = check_forecast_point(ml, given)
    back = ml.constrain(flat)
    assert float(back["s"]) == pytest.approx(0.7, rel=1e-6)
    assert np.asarray(back["w"]) == pytest.approx(given["w"], rel=1e-6)
    assert check_forecast_point(ml, None) is None


def test_a_hierarchical_model_with_per_row_groups_is_forecast_with_its_names_and_a_forecast_at_its_scale():
    """A centred hierarchy with a per-row group index (model_kwargs, index_ranges, and the public rows' own groups):
    the forecast names every unconstrained coordinate as the run's intervals do (the scale on its log), and
    forecast_at takes the scale on its own (positive) scale."""
    rng = np.random.default_rng(5)
    n, G = 4000, 3
    X, g = rng.normal(size=(n, 1)), rng.integers(0, G, size=n)
    y = (rng.random(n) < 0.5).astype(float)
    Xp, gp = rng.normal(size=(2000, 1)), rng.integers(0, G, size=2000)
    opts = dict(eps=2.0, delta=DELTA, clip_norm=3.0, model_kwargs={"group": g, "num_groups": G},
                index_ranges={"group": G}, interval_curvature="public", X_public=Xp,
                public_model_kwargs={"group": gp, "num_groups": G})
    fc = dp_infer.forecast_model_posterior(hier, X, y, **opts)
    assert fc.coordinates == ("a[0]", "a[1]", "a[2]", "mu", "tau (log)", "w")  # the flat vector's order
    assert fc.dim == 6 and fc.interval_width is not None and fc.interval_forecast_at == "prior centre"
    at = dp_infer.forecast_model_posterior(hier, X, y, forecast_at={"mu": 0.0, "tau": 0.5,
                                                                    "a": np.array([-0.8, 0.0, 0.7]), "w": 0.5}, **opts)
    assert at.interval_forecast_at == "forecast_at" and np.isfinite(at.interval_typical_sd)
