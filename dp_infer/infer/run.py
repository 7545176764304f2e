"""A finished private run as an artefact: released draws, plan, report and model description.

:class:`PrivateRun` holds exactly what was released -- the theta draws (burn-in included: they are
part of the accounted path), the theta-only divergence flag, the plan, where the noise came from
(never the key), and the public description of the model or loss -- so it pickles, saves to an
ArviZ run file (:meth:`PrivateRun.save`) and loads back (:meth:`PrivateRun.load`) with nothing
private inside. The MCMC object, the potential (which holds the private data) and the chains'
last state (which holds key material) live only in the process that sampled: they are dropped
by pickling and never written.

NumPyro conventions: :meth:`get_samples` gives constrained draws of every latent site after
burn-in (so ``numpyro.infer.Predictive(model, run.get_samples())`` works directly);
:meth:`print_summary` summarises the released draws after burn-in only; :meth:`extend` is
NumPyro's ``post_warmup_state`` continuation, charged as a longer horizon.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from ..losses.base import PerExampleLoss
from ..losses.registry import loss_behaviour
from ..routes.plan import SamplingPlan
from .prediction import PREDICTION_SOURCES, align_features, labels_from, loss_predictive, model_predictive
from .extension import EXTEND_ROUTE, extended_plan
from .driver import Hooks, execute
from .result import RESULT_TYPE_ATTR, stored_result_kind
from ..randomness import KeySource
from .run_io import CLIPPED_ROWS_ATTR, MODEL_ATTR, plan_from_dict, run_from_fallback, run_from_tree

__all__ = ["PrivateRun", "MODEL_ATTR"]

_TRANSIENT = ("_mcmc", "_potential", "_constrain")
_LONG_REPORT_KEYS = ("routes_considered", "event", "potential", "purification", "notes", "model", "assumptions",
                     "interval_release", "intervals", "interval_release_skipped")


@dataclass(eq=False)
class PrivateRun:
    """A finished private run (see the module docstring). Build it with :func:`dp_infer.fit`,
    :func:`dp_infer.sample` or :meth:`load`; the fields below are all public.

    ``theta``: flat draws ``(chains, draws, dim)`` (unconstrained for a model), burn-in included;
    ``samples``: constrained draws per latent site (model runs), burn-in included;
    ``diverging``: the kernel's sticky theta-only flag ``(chains, draws)``.
    """

    #: the stored result type (:mod:`dp_infer.infer.result`)
    result_kind: ClassVar[str] = "private_run"

    plan: SamplingPlan
    theta: np.ndarray | None
    diverging: np.ndarray | None
    randomness: KeySource | dict
    potential_description: dict
    purified: np.ndarray | None = None
    samples: dict | None = None
    model_description: dict | None = None
    coords: dict | None = None
    dims: dict | None = None
    feature_names: list | None = None
    extensions: list = field(default_factory=list)
    model: Callable | None = None
    report_extras: dict = field(default_factory=dict)
    #: a model run's charged, noisy count of the rows its gradient clip touches (dp_infer.model.clipping)
    clipped_rows: dict | None = None
    _mcmc: Any = field(default=None, repr=False)
    _potential: Any = field(default=None, repr=False)
    _constrain: Callable | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_mcmc(cls, mcmc, plan: SamplingPlan, potential, randomness: KeySource, **kw) -> PrivateRun:
        """Collect a finished NumPyro ``MCMC`` run of ``plan`` (theta draws and the theta-only flag)."""
        theta = np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])
        extra = mcmc.get_extra_fields(group_by_chain=True) or {}
        div = extra.get("diverging")
        return cls(plan, theta, None if div is None else np.asarray(div, dtype=bool), randomness,
                   potential.describe(), _mcmc=mcmc, _potential=potential, **kw)

    def released_segment(self, mcmc) -> tuple[np.ndarray, np.ndarray | None]:
        """The released theta draws (chains, draws, dim) and the theta-only divergence flag of the
        last segment ``mcmc`` ran (the kernel's site is ``theta`` here; subclasses map theirs)."""
        theta = np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])
        div = (mcmc.get_extra_fields(group_by_chain=True) or {}).get("diverging")
        return theta, None if div is None else np.asarray(div, dtype=bool)

    def __getstate__(self):
        state = self.__dict__.copy()
        for k in _TRANSIENT:
            state[k] = None
        if state.get("purified") is not None:  # pure route: the purified estimate is the release
            state["theta"] = state["diverging"] = state["samples"] = None
        if state.get("model") is not None:
            try:
                pickle.dumps(state["model"])
            except Exception:  # noqa: BLE001 - a local model function: give it back on load
                state["model"] = None
        return state

    # ------------------------------------------------------------------ transient objects
    @property
    def mcmc(self):
        """The NumPyro ``MCMC`` object (only in the process that sampled)."""
        if self._mcmc is None:
            raise ValueError("this run has no MCMC object (it was loaded or unpickled; the chains' state and "
                             "key are never saved)")
        return self._mcmc

    @property
    def potential(self):
        """The potential (holds the private data; only in the process that sampled, never saved)."""
        if self._potential is None:
            raise ValueError("this run has no potential (it was loaded or unpickled: the private data are never saved)")
        return self._potential

    def run_arguments(self) -> tuple:
        """The arguments the chains' jitted loop takes besides its state: the row-sharded data of a
        sharded run (they live on the devices), none on one device."""
        pot = self._potential
        return pot.args() if hasattr(pot, "args") else ()

    # ------------------------------------------------------------------ draws
    def draws(self, *, drop_burn_in: bool = True) -> np.ndarray:
        """Flat draws, shape (chains, draws, dim); burn-in dropped by default (post-processing).

        Route ``trajectory``: the whole accounted path. ``last_iterate``: one draw per chain (the
        only accounted release). ``pure``: the raw draws are only covered by the upstream
        (eps_a, delta_a) guarantee; release :meth:`estimate` (purified) instead.
        """
        if self.purified is not None:
            raise ValueError("theta: a pure-route run releases only its purified estimate (run.estimate()); "
                             "the upstream draws, covered only by (eps_a, delta_a), are not kept")
        if self.theta is None:
            raise ValueError("this run holds constrained site draws only: use get_samples(), or load it with "
                             "the model (PrivateRun.load(path, model=...)) to get the flat draws")
        return self.theta[:, self.plan.burn_in:] if drop_burn_in else self.theta

    def posterior_mean(self) -> np.ndarray:
        """Mean of the post-burn-in flat draws over all chains (post-processing of released draws)."""
        return self.draws().reshape(-1, self.plan.dim).mean(axis=0)

    def estimate(self) -> np.ndarray:
        """The released point estimate: the purified mean (route ``pure``) or the posterior mean."""
        return self.purified if self.purified is not None else self.posterior_mean()

    def noise_aware_interval(self, prob: float = 0.9, **kw):
        """A ``prob`` interval for the parameter that accounts for the sampling error and the privacy
        (Monte-Carlo) noise: post-processing of a posterior-mode run's draws (free). Refuses
        estimate-mode runs. Method and assumptions: :mod:`dp_infer.diagnostics.noise_aware`."""
        from ..diagnostics.noise_aware import run_noise_aware_interval

        return run_noise_aware_interval(self, prob, **kw)

    def intervals(self, prob: float = 0.9):
        """``prob`` intervals for theta that say what the data say: the draws' information read out
        with the run's charged interval release (a Newton step of the data's loss from the draws'
        mean, its sandwich variance and the release's noise, combined with the prior; coordinates
        the data do not determine are flagged one by one). Post-processing: free. Method,
        estimand and assumptions: :mod:`dp_infer.diagnostics.released_interval`."""
        from ..diagnostics.intervals import run_intervals

        return run_intervals(self, prob)

    def num_divergent(self) -> int:
        return 0 if self.diverging is None else int(np.asarray(self.diverging).sum())

    def released_draws(self) -> np.ndarray:
        """Exactly what the route's guarantee covers, shape (chains, draws, dim).

        ``trajectory``: every draw of every chain (burn-in included). ``last_iterate`` and
        ``stationary``: the final draw of each chain. ``pure``: the purified estimate only.
        """
        if self.purified is not None:
            return self.purified[None, None, :]
        z = self.draws(drop_burn_in=False)
        return z if self.plan.release == "trajectory" else z[:, -1:]

    def site_draws(self, *, drop_burn_in: bool = True) -> dict[str, np.ndarray]:
        """Released draws per named site, (chains, draws, ...): the constrained latent sites of a
        model run, ``{"theta": ...}`` for a loss run. Final-draw routes give their final draws."""
        if self.purified is not None:
            return {"theta": self.purified[None, None, :]}
        if self.samples is None and self._constrain is not None and self.theta is not None:
            self.samples = {k: np.asarray(v) for k, v in self._constrain(self.theta).items()}
        out = dict(self.samples) if self.samples is not None else {"theta": self.theta}
        if self.plan.release != "trajectory":
            return {k: v[:, -1:] for k, v in out.items()}
        return {k: v[:, self.plan.burn_in:] for k, v in out.items()} if drop_burn_in else out

    def get_samples(self, group_by_chain: bool = False) -> dict[str, np.ndarray]:
        """NumPyro's ``get_samples``: constrained released draws after burn-in, per site, chains
        merged unless ``group_by_chain``. Feed them to ``numpyro.infer.Predictive``."""
        out = self.site_draws()
        if group_by_chain:
            return out
        return {k: v.reshape((-1,) + v.shape[2:]) for k, v in out.items()}

    # ------------------------------------------------------------------ report and ArviZ
    def report(self) -> dict:
        """The privacy report: the plan, the spent (eps, delta) recomputed by the accountant,
        where the noise came from (never the key), the model's public layout and any extension."""
        d = self.plan.as_dict()
        d["potential"] = self.potential_description
        d["randomness"] = self.randomness.describe() if isinstance(self.randomness, KeySource) else self.randomness
        if self.model_description is not None:
            d["model"] = self.model_description
        if self.extensions:
            d["extensions"] = list(self.extensions)
        for k, v in self.report_extras.items():  # e.g. the routes considered, kept by a run file
            d.setdefault(k, v)
        if "interval_release" in self.report_extras and self.theta is not None:
            try:
                d["intervals"] = self.intervals().summary()
            except ValueError as e:  # draws that cannot carry intervals (too few, non-finite): say why
                d["intervals"] = {"error": str(e)}
        if self._mcmc is not None and self.plan.release == "trajectory":
            ran = int(np.max(np.asarray(self._mcmc.last_state.i)))
            if ran > self.plan.num_steps:
                d["warning"] = (f"the MCMC object ran {ran} steps per chain but this report covers "
                                f"{self.plan.num_steps}: continue with PrivateRun.extend, which charges it")
        return d

    def _coords_dims(self, coords, dims):
        c = dict(self.coords or {})
        dm = dict(self.dims or {})
        if self.feature_names and self.model_description is None and len(self.feature_names) == self.plan.dim:
            c.setdefault("feature", list(self.feature_names))
            dm.setdefault("theta", ["feature"])
        c.update(coords or {})
        dm.update(dims or {})
        return c or None, dm or None

    def to_datatree(self, *, debug: bool = False, coords: dict | None = None, dims: dict | None = None):
        """ArviZ DataTree of the release: ``posterior`` (constrained named sites after burn-in),
        ``warmup_posterior`` (the burn-in: released, outside summaries), ``sample_stats.diverging``
        (theta only), the report as one structured attribute, coords and dims from the model, the
        run and ``coords`` / ``dims``. Final-draw routes export only their released draws."""
        from ..diagnostics import to_datatree

        c, dm = self._coords_dims(coords, dims)
        if debug:
            return to_datatree(self.mcmc, self.report(), debug=True)
        report = self.report()
        draws = self.site_draws(drop_burn_in=False)
        div = None
        burn = 0
        if self.plan.release == "trajectory" and self.purified is None:
            burn = self.plan.burn_in
            div = self.diverging
        attrs = {"kernel": type(self._mcmc.sampler).__name__ if self._mcmc is not None else self.plan.kernel,
                 "thinning": int(self.plan.thinning), "num_transitions": int(self.plan.num_steps),
                 "num_warmup": 0, "kernel_step_size": float(self.plan.step_size)}
        dt = to_datatree(draws, report, coords=c, dims=dm, theta_diverging=div, burn_in=burn, run_attrs=attrs)
        dt.attrs[RESULT_TYPE_ATTR] = "private_run"  # loaded back as a PrivateRun (a posterior run's report included)
        if self.model_description is not None:
            dt.attrs[MODEL_ATTR] = self.model_description
        if self.clipped_rows is not None:  # released: a charged, noisy count (report["clipped_rows"])
            dt.attrs[CLIPPED_ROWS_ATTR] = dict(self.clipped_rows)
        if "interval_release" in self.report_extras and self.theta is not None:
            self._add_intervals_group(dt, c, dm)
        return dt

    def _add_intervals_group(self, dt, coords, dims) -> None:
        """The 90% intervals for theta (:meth:`intervals`) as the tree's ``intervals`` group, on theta's
        dimension: ``centre``, ``sd``, ``lower``, ``upper``, ``data_share``, ``width_ratio``, ``flag``."""
        import xarray as xr

        from ..diagnostics.intervals import interval_names

        try:
            iv = self.intervals(0.9)
        except ValueError:
            return
        dim = (dims or {}).get("theta", ["theta_dim_0"])[0]
        named = interval_names(self) if self.model_description is not None else None  # w[age], tau (log)
        coord = {dim: named or list((coords or {}).get(dim, range(self.plan.dim)))}
        ds = xr.Dataset({k: (dim, np.asarray(getattr(iv, k), dtype=np.float64))
                         for k in ("centre", "sd", "lower", "upper", "data_share", "width_ratio")}, coords=coord)
        ds["flag"] = (dim, np.asarray([f.split(":")[0] for f in iv.flags], dtype=str))
        ds.attrs.update(prob=iv.prob, estimand=iv.estimand, method=iv.method)
        dt["intervals"] = xr.DataTree(ds)

    def summary(self) -> str:
        """ArviZ summary of the released draws after burn-in, beside the main numbers of the
        privacy report (the full report: :meth:`report`)."""
        from ..diagnostics import summary

        short = {k: v for k, v in self.report().items() if k not in _LONG_REPORT_KEYS + ("clipped_rows",)}
        text = summary(self.to_datatree(), short)
        if getattr(self.plan, "target", "estimate") == "posterior" and self.theta is not None:
            from ..diagnostics.intervals import run_intervals_text

            text += "\n\n" + run_intervals_text(
                self, "Intervals for theta (what the data say; the table above is the tempered draws', "
                      f"sqrt(n / beta) = {(self.plan.n / self.plan.beta) ** 0.5:.3g}x wider):")
            from ..diagnostics.prior_dominance import run_prior_dominance

            dominance = run_prior_dominance(self)
            if dominance is not None:
                text += "\n" + dominance.text(self.feature_names)
        c = self.clipped_rows
        if c is not None:  # a released figure: charged with the run (report["clipped_rows"])
            text += (f"\nreleased (charged, Gaussian-DP mu = {c['mu']:.3g}): about {c['noisy_count']:.1f} of {c['n']} rows "
                     f"have a per-example gradient beyond clip_norm = {c['clip_norm']:.4g} at the {c['at']} "
                     f"(noise sd {c['noise_sd']:.3g})")
        return text

    def print_summary(self) -> None:
        """NumPyro's ``print_summary``, over the released draws after burn-in only."""
        print(self.summary())

    # ------------------------------------------------------------------ files
    def save(self, path) -> Any:
        """Write the release (draws, plan + report, model description) to an ArviZ run file
        (``.zip``, ``.nc`` or ``.zarr``; :func:`dp_infer.diagnostics.save`). Returns the path."""
        from ..diagnostics import save

        return save(self.to_datatree(), path)

    @classmethod
    def load(cls, path, *, model: Callable | None = None):
        """Read a run file written by :meth:`save` (or ``dp-infer ... --out``), or a fallback file
        (:mod:`dp_infer.infer.fallback`: the draws of a charged run whose later step failed). Give
        ``model`` (the NumPyro model the run was fitted with) to predict from a model run or get its
        flat draws. Returns the run type the file holds: a :class:`PrivateRun`, or a
        :class:`~dp_infer.infer.proximal.ProximalRun` for the proximal route. The report is checked
        against its stored privacy event (an edited or damaged file is refused)."""
        from ..diagnostics import get_report, load
        from .fallback import is_fallback_file, read_fallback

        from .proximal import ProximalRun

        data = read_fallback(path) if is_fallback_file(path) else None
        dt = load(path) if data is None else None
        if data is not None:
            kind = str(data["kind"].item())
        else:  # the stored type; a file written before it was stored: the proximal route's report
            kind = stored_result_kind(dt) or (
                "proximal_run" if (get_report(dt) or {}).get("route") == "proximal" else "private_run")
        if kind == "proximal_run":
            if model is not None:
                raise ValueError("model: a proximal run is a loss run, it takes no NumPyro model")
            return ProximalRun.from_tree(dt) if dt is not None else ProximalRun.from_fallback(data)
        return run_from_tree(cls, dt, model=model) if dt is not None else run_from_fallback(cls, data, model=model)

    # ------------------------------------------------------------------ predictions
    def predictive(self, X, *, site: str | None = None, max_draws: int | None = 1000, source: str = "draws") -> dict:
        """The predictive distribution's summary for the rows ``X`` (post-processing of the release), what
        :meth:`predict` and :meth:`predict_proba` read: a dict with ``mean`` (the predictive mean per row),
        ``kind`` (the outcome's kind, e.g. ``"binary"`` or ``"continuous"``) and, for a binary or categorical
        likelihood, ``probs`` (P(y = 1) per row, or a row of class probabilities). ``site``, ``max_draws`` and
        ``source`` as :meth:`predict`."""
        if source not in PREDICTION_SOURCES:
            raise ValueError(f"source must be one of {PREDICTION_SOURCES}, got {source!r}")
        Xa = align_features(X, self.feature_names, self._num_features())
        if source == "intervals":
            return loss_predictive(self._loss(), self._interval_centre()[None, :], Xa, max_draws=max_draws)
        if self.model_description is not None:
            if self.model is None:
                raise ValueError("this is a model run: predictions need the NumPyro model "
                                 "(PrivateRun.load(path, model=...) or run.model = model)")
            names = self.model_description.get("data_arguments", ["X", "y"])
            return model_predictive(self.model, self.get_samples(), Xa, x_name=names[0], y_name=names[1],
                                    site=site, max_draws=max_draws)
        loss = self._loss()
        theta = self.estimate()[None, :] if self.purified is not None else self.draws().reshape(-1, self.plan.dim)
        if not np.all(np.isfinite(theta)):  # a diverged chain or a damaged file: no silent class 0
            raise ValueError("theta: the released draws hold a non-finite value (NaN or inf: a diverged chain or a "
                             "damaged run file); predictions from them would be meaningless")
        return loss_predictive(loss, theta, Xa, max_draws=max_draws)

    def interval_centre_refusal(self) -> str | None:
        """Why this run cannot predict from its intervals' centre (``source="intervals"``), in words without the
        option's name (each entry point names its own), or None where it can: a model run (its centre is in the
        model's unconstrained coordinates) or a run without an interval release cannot."""
        if self.model_description is not None:
            return "a model run's interval centre is in its unconstrained coordinates"
        if "interval_release" not in self.report_extras:
            why = self.report_extras.get("interval_release_skipped") or "interval_share=0"
            return f"this run has no interval release ({why})"
        return None

    def _interval_centre(self) -> np.ndarray:
        """The interval release's centre (``intervals().centre``: the noise-aware posterior's mean, where the
        tempered draws may sit near the prior), for a loss run's predictions; refused with
        :meth:`interval_centre_refusal`'s reason."""
        why = self.interval_centre_refusal()
        if why is not None:
            raise ValueError(f"source='intervals': {why}; predict from the draws (source='draws')")
        return np.asarray(self.intervals(0.9).centre, dtype=np.float64)

    def _num_features(self) -> int | None:
        if self.model_description is not None:
            return self.model_description.get("num_features")
        if self.feature_names:
            return len(self.feature_names)
        rule = loss_behaviour(self._loss())
        return self.plan.dim if rule is not None and rule.predictive is not None and rule.one_coefficient_per_feature \
            else None

    def _loss(self):
        """The sampled loss in the process that sampled (its behaviour holds the prediction rule), else
        its stored name (a built-in loss's behaviour: :func:`dp_infer.losses.registry.loss_behaviour`)."""
        own = getattr(self._potential, "loss", None)
        return own if isinstance(own, PerExampleLoss) else (self.potential_description.get("loss") or {}).get("name")

    def predict(self, X, *, site: str | None = None, max_draws: int | None = 1000,
                source: str = "draws") -> np.ndarray:
        """Point predictions for the rows ``X`` (post-processing of the release): class labels
        for a binary or categorical likelihood, the predictive mean otherwise. ``source="draws"`` (default):
        averaged over the released draws after burn-in (at most ``max_draws``, evenly spaced); the pure route
        uses its purified estimate. ``source="intervals"``: at the interval release's centre (a plug-in, a loss
        run with an interval release only): where the tempered draws are close to the prior (``run.report()``'s
        prior dominance), the centre is what carries the data. A DataFrame's columns are matched to the training
        ones by name."""
        return labels_from(self.predictive(X, site=site, max_draws=max_draws, source=source))

    def predict_proba(self, X, *, site: str | None = None, max_draws: int | None = 1000,
                      source: str = "draws") -> np.ndarray:
        """Class probabilities (binary: P(y = 1), shape (n,); categorical: (n, K)), averaged over the
        released draws after burn-in, or at the interval release's centre (``source="intervals"``, as
        :meth:`predict`). Only for Bernoulli / categorical likelihoods."""
        pred = self.predictive(X, site=site, max_draws=max_draws, source=source)
        if "probs" not in pred:
            raise ValueError(f"predict_proba needs a binary or categorical likelihood; this run predicts a "
                             f"{pred['kind']} outcome: use predict")
        return np.asarray(pred["probs"])

    # ------------------------------------------------------------------ continuation
    def extend(self, num_steps: int | None = None, *, horizon: float | None = None, ledger=None,
               dataset_id: str = "default", progress_bar: bool = False) -> PrivateRun:
        """Continue every chain from its last state (NumPyro's ``post_warmup_state``) for
        ``num_steps`` more steps (or ``horizon`` more Langevin time), charged as a longer horizon.

        The new plan covers the whole path, ``t = (N + num_steps) h``; its event is the exact GDP
        of that path (mu grows as sqrt(t)), which is also the composition of the first run with
        the increment. With ``ledger`` (a :class:`~dp_infer.privacy.ledger.Ledger`) the increment
        is charged to ``dataset_id`` BEFORE sampling. Only the trajectory route can be continued.
        Returns this run, updated in place (draws appended).
        """
        plan = self.plan
        if self._mcmc is None:
            raise ValueError("only a run sampled in this process can be extended (the chains' state and key "
                             "are never saved)")
        if plan.release != "trajectory" or self.purified is not None:
            raise ValueError(f"route {plan.route!r} releases final draws only: its guarantee does not cover a "
                             "continuation; only the trajectory route can be extended")
        mcmc = self._mcmc
        public = {"plan": plan, "num_steps": num_steps, "horizon": horizon}
        cplan = EXTEND_ROUTE.plan(public)  # refused (one line) before anything is charged
        done = {}

        def finish(run, keeper, receipt):
            # from here on a failure keeps the draws so far and the new segment (the kernel's own sites)
            keeper.report = cplan.plan.as_dict()  # the whole path, as charged
            keeper.extra_arrays = lambda: {f"extension:{k}": np.asarray(v)
                                           for k, v in mcmc.get_samples(group_by_chain=True).items()}
            theta, diverging = self.released_segment(mcmc)
            done["theta"] = np.concatenate([self.theta, theta], axis=1)
            new_div = self.diverging
            if self.diverging is not None and diverging is not None:
                new_div = np.concatenate([self.diverging, diverging | self.diverging[:, -1:]], axis=1)
            done["diverging"] = new_div
            done["extension"] = {"steps": cplan.steps, "horizon_added": cplan.steps * plan.step_size,
                                 "mu_increment": float(cplan.event.mu), "mu_total": float(cplan.plan.event.mu)}

        execute(EXTEND_ROUTE, public, self, ledger=ledger, dataset_id=dataset_id, plan=cplan,
                hooks=Hooks(finish=finish, step="extend: appending the new draws"))
        new_theta, new_div, extension, new_plan = done["theta"], done["diverging"], done["extension"], cplan.plan
        # nothing below can fail: the run is updated all at once
        self.theta, self.diverging = new_theta, new_div
        self.samples = None if self._constrain is not None else self.samples
        self.extensions.append(extension)
        self.plan = new_plan
        return self


__all__ += ["extended_plan", "plan_from_dict"]
