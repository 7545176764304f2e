"""The proximal route of :func:`dp_infer.infer.fit.fit`: non-smooth Lipschitz losses (hinge, absolute,
quantile) sampled by the proximal sampler, privacy of the regularised exponential mechanism.

``fit`` sends a loss here when it declares no smoothness (Langevin's step-size theory needs
one). Data flow: the plan (:func:`dp_infer.privacy.proximal.plan_proximal`) comes from (eps,
delta), n, the dimension and the loss's declared constants only; the data enter only the
oracle's per-example losses ``f_j = k ell(.; x_j, y_j)``. The released output is the final
position of each chain (one exact-mechanism draw each, up to the planned TV error).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from ..domains import Domain, Euclidean
from ..kernels import proximal as prox
from ..losses import PerExampleLoss
from ..losses.nonsmooth import base_lipschitz
from .driver import Hooks, Route, execute, register_route
from .result import RESULT_TYPE_ATTR
from ..privacy.proximal import ProximalPlan, plan_proximal
from ..randomness import secret_key

__all__ = ["ProximalRun", "fit_proximal", "sample_proximal", "proximal_plan_for", "proximal_plan_from_dict",
           "PROXIMAL_ATTR"]

#: root attribute of a proximal run file: the public facts predictions need (loss name, feature names)
PROXIMAL_ATTR = "dp_infer_proximal"


@dataclass
class ProximalRun:
    """A finished proximal-route run: the plan and the released final positions.

    ``debug_info`` (proposals and loss evaluations of the oracle, and the wall-clock time, which
    depends on the data through the rejection sampler) is computed from the private data and is
    NOT covered by the guarantee: it stays out of :meth:`report`, the run file and a pickle.
    """

    #: the stored result type (:mod:`dp_infer.infer.result`)
    result_kind: ClassVar[str] = "proximal_run"

    plan: ProximalPlan
    final: np.ndarray  # (chains, dim): the only release
    randomness: dict
    debug_info: dict = field(default_factory=dict, repr=False)
    loss_name: str | None = None
    feature_names: list | None = None

    @property
    def elapsed_seconds(self) -> float | None:
        """NON-PRIVATE wall-clock time of the sampling (the rejection oracle's work depends on the data)."""
        return self.debug_info.get("elapsed_seconds")

    def __getstate__(self):
        return {**self.__dict__, "debug_info": {}}  # the release only

    def draws(self, *, drop_burn_in: bool = True) -> np.ndarray:
        """Released draws as (chains, 1, dim): one final position per chain."""
        return self.final[:, None, :]

    def posterior_mean(self) -> np.ndarray:
        return self.final.mean(axis=0)

    def estimate(self) -> np.ndarray:
        """Mean of the released final positions (post-processing)."""
        return self.posterior_mean()

    def report(self) -> dict:
        d = self.plan.as_dict()
        d["randomness"] = self.randomness
        return d

    def to_datatree(self):
        from ..diagnostics import to_datatree

        dt = to_datatree({"theta": self.draws()}, self.report())
        dt.attrs[RESULT_TYPE_ATTR] = self.result_kind
        dt.attrs[PROXIMAL_ATTR] = {"loss_name": self.loss_name,
                                   "feature_names": None if self.feature_names is None
                                   else [str(v) for v in self.feature_names]}
        return dt

    # -- the result protocol every route shares (report, print_summary, to_datatree, estimate,
    #    predict, save, extend); the proximal route's release is one final position per chain
    def summary(self) -> str:
        """The released final positions (one per chain) and the privacy guarantee. No R-hat or ESS:
        each chain releases one exact-mechanism draw, not a path."""
        rep = self.report()
        names = self.feature_names or [f"theta[{i}]" for i in range(self.final.shape[1])]
        width = max(12, max(len(n) for n in names))
        lines = [f"proximal route: final positions of {self.final.shape[0]} chain(s) (one draw each; not a "
                 "sample path, so no R-hat / ESS)",
                 f"privacy: (eps, delta) = ({rep['eps_spent']:.4g}, {rep['delta']:g})-DP" if "eps_spent" in rep else "",
                 f"{'':<{width}} {'mean':>10} {'sd':>10}"]
        sd = self.final.std(axis=0, ddof=1) if self.final.shape[0] > 1 else np.full(self.final.shape[1], np.nan)
        for name, m, s in zip(names, self.final.mean(axis=0), sd):
            lines.append(f"{name:<{width}} {m:>10.4f} {s:>10.4f}")
        return "\n".join(line for line in lines if line)

    def print_summary(self) -> None:
        print(self.summary())

    def predict(self, X) -> np.ndarray:
        """Point predictions from the released estimate (post-processing), by the loss's behaviour
        (``point_prediction``, :mod:`dp_infer.losses.behaviour`): class labels 0/1 for the hinge loss
        (the sign of the margin), the linear predictor for absolute / quantile losses."""
        from ..losses.registry import loss_behaviour
        from .prediction import align_features

        Xa = align_features(X, self.feature_names, self.final.shape[1])
        z = Xa @ self.estimate()
        point = getattr(loss_behaviour(self.loss_name), "point_prediction", None)
        if point == "label":
            return (z > 0).astype(int)
        if point == "value":
            return z
        raise ValueError(f"no prediction rule for the loss {self.loss_name!r} on the proximal route")

    def save(self, path):
        """Write the release (final positions, plan + report) to an ArviZ run file (``.zip``, ``.nc``
        or ``.zarr``; :func:`dp_infer.diagnostics.save`). Returns the path."""
        from ..diagnostics import save

        return save(self.to_datatree(), path)

    @classmethod
    def load(cls, path) -> "ProximalRun":
        """Read a proximal run file written by :meth:`save` (``dp_infer.PrivateRun.load`` dispatches
        here too), or a proximal run's fallback file (:mod:`dp_infer.infer.fallback`). The report
        is checked against its stored event: an edited or damaged file is refused."""
        from ..diagnostics import load
        from .fallback import is_fallback_file, read_fallback

        if is_fallback_file(path):
            return cls.from_fallback(read_fallback(path))
        return cls.from_tree(load(path))

    @classmethod
    def from_fallback(cls, data: dict) -> "ProximalRun":
        """A proximal run from a fallback file's arrays (:func:`dp_infer.infer.fallback.read_fallback`)."""
        if str(data["kind"].item()) != "proximal_run" or str(data["report_level"].item()) not in ("report", "plan"):
            raise ValueError("the fallback file does not hold a complete proximal run: use dp_infer.PrivateRun.load, "
                             "or numpy.load")
        report = data["report"]
        plan = proximal_plan_from_dict(report)
        return cls(plan, np.asarray(data["theta"])[:, 0, :], report.get("randomness") or {},
                   loss_name=str(data["loss_name"].item()) if "loss_name" in data else None,
                   feature_names=data.get("feature_names"))

    @classmethod
    def from_tree(cls, dt) -> "ProximalRun":
        """A proximal run from a loaded run tree (:func:`dp_infer.diagnostics.load`)."""
        from ..diagnostics import get_report

        report = get_report(dt)
        if (report or {}).get("route") != "proximal":
            raise ValueError("the run file does not hold a proximal run: use dp_infer.PrivateRun.load")
        plan = proximal_plan_from_dict(report)
        if "posterior" not in dt.children or "theta" not in dt["posterior"].data_vars:
            raise ValueError("the run file has no 'theta' draws in its posterior group: damaged or not a dp_infer run")
        final = np.asarray(dt["posterior"]["theta"].transpose("chain", "draw", ...).values)[:, -1, :]
        if final.shape != (plan.num_draws, plan.dim):
            raise ValueError(f"the run file holds final positions of shape {final.shape}, its plan says "
                             f"({plan.num_draws}, {plan.dim}): damaged or edited")
        extra = dt.attrs.get(PROXIMAL_ATTR) or {}
        return cls(plan, final, report.get("randomness") or {}, loss_name=extra.get("loss_name"),
                   feature_names=extra.get("feature_names"))

    def intervals(self, prob: float = 0.9):
        """Refused with the reason: the proximal route releases one final position per chain (an exact
        draw of its tempered target, for an estimate), with no interval release; the chains' spread is
        the tempered law's, not the data's uncertainty."""
        raise ValueError("intervals: the proximal route releases one final position per chain (an estimate), with "
                         "no interval release; its spread is the tempered law's, not the data's uncertainty")

    def extend(self, *args, **kwargs):
        """Refused, before anything is charged: the proximal route releases the final position of each
        chain, and its guarantee (one exact-mechanism draw per chain) does not cover a continuation."""
        raise ValueError("extend: route 'proximal' releases the final position of each chain; its guarantee "
                         "does not cover a continuation (run fit again with more chains instead)")


def _require_convex(loss: PerExampleLoss) -> None:
    if not loss.constants.convex:
        raise ValueError(f"loss: the proximal route needs a convex loss and {loss.name!r} does not declare "
                         "convexity (LossConstants(convex=True), only for a loss you know is convex in theta)")


def proximal_plan_from_dict(d: dict) -> ProximalPlan:
    """Rebuild a :class:`~dp_infer.privacy.proximal.ProximalPlan` from its ``as_dict()`` (a proximal
    run's report), then check the report against the stored event (as a run file's)."""
    from dataclasses import fields

    from ..privacy.events import event_from_dict
    from .run_io import check_report_against_event

    if not isinstance(d, dict) or d.get("route") != "proximal" or "event" not in d:
        raise ValueError("the run's report is not a proximal plan (route 'proximal' and a privacy event)")
    event = event_from_dict(d["event"])
    kw = {}
    for f in fields(ProximalPlan):
        if f.name == "event" or f.name not in d:
            continue
        v = d[f.name]
        kw[f.name] = tuple(v) if f.name in ("assumptions", "notes") and v is not None else v
    own, ev = list(kw.get("assumptions", ())), list(event.assumptions)
    if ev and own[len(own) - len(ev):] == ev:
        own = own[: len(own) - len(ev)]
    kw["assumptions"] = tuple(own)
    try:
        plan = ProximalPlan(event=event, **kw)
    except TypeError as e:
        raise ValueError(f"the run's report lacks a field of the proximal plan ({e}): damaged") from None
    check_report_against_event(d, plan)
    return plan


def proximal_plan_for(loss: PerExampleLoss, n: int, num_features: int, *, eps: float, delta: float,
                      num_chains: int = 1, lam_rel: float | None = None, theta_scale: float = 10.0,
                      rgo: str = "linearised", rgo_scale: float | str = "auto", tv_fraction: float = 0.01,
                      max_steps: float = 2e5) -> ProximalPlan:
    """The proximal plan for ``loss`` (its declared constants; no data)."""
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer PerExampleLoss, got {type(loss).__name__}")
    if loss.clip_norm is not None:
        raise ValueError("the proximal route needs loss VALUES to be Lipschitz; gradient clipping "
                         "(clipped_loss) bounds only gradients: use a built-in Lipschitz loss")
    if not math.isfinite(loss.constants.grad_diff):
        raise ValueError("the loss has no finite gradient-difference bound G: declare data bounds")
    _require_convex(loss)
    if delta is None or delta == 0:
        raise ValueError("the proximal route gives (eps, delta)-DP: pass delta in (0, 1)")
    return plan_proximal(eps=eps, delta=delta, n=n, dim=loss.num_params(num_features),
                         lipschitz=base_lipschitz(loss), grad_diff=loss.constants.grad_diff,
                         loss_strong_convexity=loss.l2, regulariser=lam_rel, theta_scale=theta_scale,
                         num_draws=num_chains, rgo=rgo, rgo_scale=rgo_scale, tv_fraction=tv_fraction,
                         max_steps=max_steps)


def _build_rgo(plan: ProximalPlan, loss: PerExampleLoss, X, y):
    k = plan.k
    Xj, yj = jnp.asarray(X, jnp.float64), jnp.asarray(y, jnp.float64)

    def example_fn(theta, row):
        return k * loss.fn(theta, row[0], row[1])

    m_f = k * plan.strong_convexity
    make = prox.linearised_rgo if plan.rgo == "linearised" else prox.taylor_rgo
    return make(example_fn, (Xj, yj), step_size=plan.step_size, strong_convexity=m_f)


def sample_proximal(loss: PerExampleLoss, X, y, plan: ProximalPlan, *, seed: int | None = None,
                    key_impl: str = "threefry2x32") -> ProximalRun:
    """Run ``plan`` on the data: K chains from N(0, I/(k m)), T proximal steps each, in float64."""
    if not isinstance(plan, ProximalPlan):
        raise ValueError(f"plan must be a ProximalPlan, got {type(plan).__name__}")
    X, y = loss.check_data(X, y)
    if X.shape[0] != plan.n:
        raise ValueError(f"the plan was made for n = {plan.n} rows but X has {X.shape[0]}: re-plan")
    if loss.num_params(X.shape[1]) != plan.dim:
        raise ValueError(f"the plan was made for dim = {plan.dim} but the loss has "
                         f"{loss.num_params(X.shape[1])} parameters")
    _require_convex(loss)
    key, source = secret_key(seed, impl=key_impl)
    t0 = time.perf_counter()
    with jax.enable_x64(True):
        rgo = _build_rgo(plan, loss, X, y)
        m_f = plan.k * plan.strong_convexity
        k_init, k_run = jax.random.split(key)
        x0 = jax.random.normal(k_init, (plan.num_draws, plan.dim), jnp.float64) / math.sqrt(m_f)
        run = jax.jit(jax.vmap(lambda k, x: prox.sample_chain(k, rgo, x, plan.num_steps)))
        last, tot = run(jax.random.split(k_run, plan.num_draws), x0)
        final = np.asarray(last.x, dtype=np.float64)
        if int(np.sum(np.asarray(tot.convexity_violations))) > 0:  # draws off the target: never returned
            raise ValueError(f"loss: {loss.name!r} is declared convex but a Bregman gap of the proximal "
                             "sampler was negative beyond rounding: it is not convex in theta; the draws "
                             "were discarded")
        info = {"proposals_per_step": float(np.mean(np.asarray(tot.proposals))) / plan.num_steps,
                "evaluations_per_step": float(np.mean(np.asarray(tot.evaluations))) / plan.num_steps}
    return ProximalRun(plan, final, source.describe(), {**info, "elapsed_seconds": time.perf_counter() - t0},
                       loss_name=loss.name)


def fit_proximal(loss: PerExampleLoss, X, y, *, eps: float, delta: float, num_chains: int = 1,
                 lam_rel: float | None = None, domain: Domain | None = None, theta_scale: float = 10.0,
                 rgo: str = "linearised", rgo_scale: float | str = "auto", tv_fraction: float = 0.01,
                 max_steps: float = 2e5, seed: int | None = None, key_impl: str = "threefry2x32",
                 ledger=None, dataset_id: str = "default") -> ProximalRun:
    """Plan from the declared constants, charge, then sample: the proximal route end to end.

    ``lam_rel`` is the regulariser m of ``exp(-k (F + (m/2)|theta|^2))`` (default: the
    seed-002 ERM choice from ``theta_scale``). ``rgo``, ``rgo_scale``, ``tv_fraction`` and
    ``max_steps``: see :func:`dp_infer.privacy.proximal.plan_proximal`. With ``ledger`` (a Ledger
    or its file) the plan's event is charged to ``dataset_id`` before the data are read.
    """
    X_in = X
    X, y = loss.check_data(X, y)
    domain = domain if domain is not None else loss.domain
    if domain is not None and not isinstance(domain, Euclidean):
        raise ValueError("the proximal route samples on R^d: a bounded domain needs a truncated-Gaussian "
                         "oracle, which is not implemented; pass domain=None")
    public = proximal_public(loss, X.shape[0], X.shape[1], eps=eps, delta=delta, num_chains=num_chains,
                             lam_rel=lam_rel, theta_scale=theta_scale, rgo=rgo, rgo_scale=rgo_scale,
                             tv_fraction=tv_fraction, max_steps=max_steps, seed=seed, key_impl=key_impl)
    names = [str(c) for c in X_in.columns] if hasattr(X_in, "columns") else None

    def label(run, keeper, receipt):
        run.feature_names = names

    return execute(PROXIMAL_ROUTE, public, (X, y), ledger=ledger, dataset_id=dataset_id,
                   hooks=Hooks(finish=label, step="fit (proximal route): labelling the draws"))


def proximal_public(loss: PerExampleLoss, n: int, num_features: int, *, seed=None, key_impl="threefry2x32",
                    **plan_options) -> dict:
    """The public inputs of :data:`PROXIMAL_ROUTE`: the loss (its declared constants and function),
    n, the number of features, the target and the options of :func:`proximal_plan_for`."""
    return {"loss": loss, "n": int(n), "num_features": int(num_features), "plan": plan_options,
            "sample": dict(seed=seed, key_impl=key_impl)}


def _plan_proximal_route(public) -> ProximalPlan:
    return proximal_plan_for(public["loss"], public["n"], public["num_features"], **public["plan"])


def _run_proximal_route(plan: ProximalPlan, data, public) -> ProximalRun:
    X, y = data
    return sample_proximal(public["loss"], X, y, plan, **public["sample"])


#: the proximal sampler of losses without smoothness (seed 002): :func:`proximal_plan_for` plans,
#: :func:`sample_proximal` runs
PROXIMAL_ROUTE = register_route(Route("proximal", _plan_proximal_route, _run_proximal_route,
                                      label=lambda plan: "dp_infer fit proximal"))
