"""Sampling the Rashomon-thresholded Gibbs law: the data enter only here (L* inside the
threshold), through a plan made without them."""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from ..domains import Domain
from ..losses import PerExampleLoss
from ..infer.chains import plan_kernel, run_chains, site_potential
from ..infer.driver import Route, execute, register_route
from ..randomness import secret_key
from .minimum import rashomon_minimum, threshold_base
from .models import LinearModelClass
from .plan import DEFAULT_MAX_STEPS, DEFAULT_TOL, FLOAT32_SLACK, plan_rashomon
from .result import RashomonResult
from .threshold import smoothed_threshold


def _smoothed_potential(loss, X, y, beta, threshold, lam_s, num_samples, key, dim):
    """U(theta) = beta * mean_j max{L(theta + xi_j), threshold}, xi_j ~ N(0, lam_s^2 I) fixed.

    A sample-average version of the Gaussian smoothing of Theorem D.7 (MAX, not min): the xi_j
    are drawn once from ``key`` (data independent, common to D and D'), so the function is
    deterministic and its gradient difference is an average of thresholded gradient differences,
    hence bounded by the same Delta_psi.
    """
    xi = lam_s * jax.random.normal(key, (num_samples, dim))
    Xj, yj = jnp.asarray(X, dtype=jnp.float32), jnp.asarray(y, dtype=jnp.float32)

    def U(theta):
        Ls = jax.vmap(lambda e: loss.mean(theta + e, Xj, yj))(xi)
        return beta * jnp.mean(jnp.maximum(Ls, threshold))

    return U


def _run_chains(potential, dim, step_size, num_steps, thinning, num_chains, domain, key, init):
    kern = plan_kernel("langevin", site_potential(potential, "theta"), step_size=step_size, domain=domain)
    init = jnp.broadcast_to(jnp.asarray(init, dtype=jnp.float32), (num_chains, dim))
    mcmc = run_chains(kern, "theta", init, num_steps=num_steps, thinning=thinning, num_chains=num_chains, key=key)
    z = np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])
    return z.reshape(num_chains, -1, dim)


def _threshold_potential(loss, X, y, beta, threshold, width):
    """U(theta) = beta * f_w(L(theta)) with the smoothed threshold of :mod:`.threshold`."""
    Xj, yj = jnp.asarray(X, dtype=jnp.float32), jnp.asarray(y, dtype=jnp.float32)

    def U(theta):
        return beta * smoothed_threshold(loss.mean(theta, Xj, yj), threshold, width)

    return U


def _resolve(model_or_loss, X, y):
    """(loss, design rows, labels, model or None): the intercept column is added here."""
    if isinstance(model_or_loss, LinearModelClass):
        Xd = model_or_loss.design(X, "X")
        y = model_or_loss.check_labels(y, Xd.shape[0], "y")
        loss = model_or_loss.loss
        Xd, y = loss.check_data(Xd, y)
        return loss, Xd, y, model_or_loss
    if isinstance(model_or_loss, PerExampleLoss):
        Xd, y = model_or_loss.check_data(X, y)
        return model_or_loss, Xd, y, None
    raise ValueError("model must be a dp_infer.rashomon.linear_model(...) or a dp_infer.losses.PerExampleLoss, "
                     f"got {type(model_or_loss).__name__}")


def _sample_on_data(loss, X, y, rp, domain, dim, key_run, key_smooth):
    """The only place the data are read: L* inside the threshold, then the chains."""
    mini = rashomon_minimum(loss, X, y, domain)
    base = threshold_base(mini, loss.constants.strong_convexity, rp.tol, shift=rp.shift_threshold)
    del mini  # private: never stored, returned or reported
    init = jnp.zeros(dim) if domain is None else jnp.asarray(domain.default_init())
    if rp.smoothing is None:
        pot = _threshold_potential(loss, X, y, rp.beta, base + rp.psi, rp.threshold_width)
    else:
        pot = _smoothed_potential(loss, X, y, rp.beta, base + rp.psi, rp.smoothing,
                                  rp.smoothing_samples, key_smooth, dim)
    del base
    draws = _run_chains(pot, dim, rp.step_size, rp.num_steps, rp.thinning, rp.num_chains, domain,
                        key_run, init)
    return draws


def sample_rashomon(model: LinearModelClass | PerExampleLoss, X, y, psi: float, *,
                    eps: float | None = None, delta: float | None = None, mode: str = "path",
                    horizon: float = 1.0, num_chains: int = 1, num_draws: int = 1000,
                    domain: Domain | None = None, seed: int | None = None,
                    key_impl: str = "threefry2x32", beta: float | None = None,
                    step_safety: float = 0.5, min_steps: int = 200,
                    max_steps: int = DEFAULT_MAX_STEPS, burn_in_fraction: float = 0.5,
                    threshold_width: float | None = None, smoothing: float | None = None,
                    smoothing_samples: int = 16, shift_threshold: bool = False,
                    tol: float = DEFAULT_TOL, float_slack: float = FLOAT32_SLACK,
                    eps_prime_fraction: float = 0.1, omega: float = 0.01, ledger=None,
                    dataset_id: str = "default", feature_names=None, hooks=None,
                    run_label: str | None = None) -> RashomonResult:
    """Draws from the Rashomon-thresholded Gibbs law exp(-beta max{L, L* + psi}) on ``domain``.

    ``model``: a :func:`linear_model` (the intercept column is appended here; measures know the
    link and the prediction loss) or any :class:`~dp_infer.losses.PerExampleLoss` (rows used as
    given). Modes:

    * ``"path"``: (eps, delta)-DP for the whole released trajectory of ``num_chains`` chains of
      Langevin time ``horizon`` each (mu-GDP, seed-001 Lemma 2.2 with the sensitivity of the
      smoothed threshold from DECLARED constants, ``tol`` and ``float_slack``); beta is
      calibrated, not chosen, and nothing computed from the data enters it.
    * ``"pure"``: pure eps on a bounded domain (L2Ball / Box) through the certified pure route
      of :func:`dp_infer.routes.calibrate.calibrate`: each chain is a trajectory at
      ``(eps_c (1 - f), delta_a)`` with a tiny ``delta_a``, and its final draw (inside the
      domain) is purified (seed 003) to pure ``eps_c = eps / num_chains``; the chains compose
      to pure ``eps``. Nothing relies on a mixing or TV claim.
    * ``"nonprivate"``: user ``beta`` (large beta -> nearly uniform on G); NOT private.

    The threshold is smoothed over a declared loss width ``threshold_width`` (default psi/20;
    :mod:`dp_infer.rashomon.threshold`): the target stays exactly uniform on G, the density
    outside G rises by at most ``exp(beta w / 2)``, and the step is planned from the ramp's
    curvature, i.e. from the gradient's jump at the threshold. ``smoothing=lambda`` instead uses
    the sample-average Gaussian smoothing of Theorem D.7 (not flat on G). ``shift_threshold``
    lowers the base by ``max(cert, tol)`` so the sensitivity drops ``tol``. The plan is
    :func:`plan_rashomon` (data independent); more than ``max_steps`` steps is refused.
    ``ledger`` (a :class:`~dp_infer.privacy.ledger.Ledger` or a path): the run is charged
    under ``dataset_id`` before the data are used and refused if over budget. ``seed=None``
    (default): secret noise from the operating system. Draws are never filtered by membership.
    ``hooks``: :class:`dp_infer.infer.driver.Hooks` around the charge (the CLI prints the spend and
    writes its files there, so a failure after the charge keeps the draws); ``run_label``: the ledger
    row's name (default ``"dp_infer.rashomon <route>"``).
    """
    from ..randomness import check_seed

    check_seed(seed, key_impl)  # the key is made after the charge: its seed is checked before
    loss, X, y, lm = _resolve(model, X, y)
    n, dim = X.shape[0], loss.num_params(X.shape[1])
    names = lm.feature_names(feature_names, dim) if lm is not None else (
        None if feature_names is None else [str(v) for v in feature_names])
    if names is not None and len(names) != dim:
        raise ValueError(f"feature_names must have {dim} entries, got {len(names)}")
    domain = domain if domain is not None else loss.domain
    public = {"loss": loss, "n": n, "dim": dim, "psi": psi, "domain": domain, "seed": seed, "key_impl": key_impl,
              "result": dict(model=lm, feature_names=names),
              "plan": dict(mode=mode, eps=eps, delta=delta, beta=beta, horizon=horizon, num_chains=num_chains,
                           num_draws=num_draws, step_safety=step_safety, min_steps=min_steps, max_steps=max_steps,
                           burn_in_fraction=burn_in_fraction, threshold_width=threshold_width, smoothing=smoothing,
                           smoothing_samples=smoothing_samples, shift_threshold=shift_threshold, tol=tol,
                           float_slack=float_slack, eps_prime_fraction=eps_prime_fraction, omega=omega)}
    rp = RASHOMON_ROUTE.plan(public)
    if rp.mode == "nonprivate" and ledger is not None:
        raise ValueError("ledger applies to private modes only (mode='nonprivate' spends no budget and "
                         "gives no guarantee)")
    # Everything the result holds besides the draws is data independent, so it is built BEFORE the
    # charge: a failure there spends nothing, and no step that could fail sits between the charged
    # sampling and the return (path mode) or the purification (pure mode). Issue 30, item 5.
    public["report"] = rashomon_report(rp, seed, key_impl, ledger_given=ledger is not None and not callable(ledger),
                                       dataset_id=dataset_id)
    return execute(RASHOMON_ROUTE, public, (X, y), ledger=ledger, dataset_id=dataset_id, plan=rp, hooks=hooks,
                   prefix="--" if hooks is not None else "",
                   label=None if run_label is None else (lambda rp: f"{run_label} {_route_name(rp)}"))


def rashomon_report(rp, seed, key_impl: str, *, ledger_given: bool, dataset_id: str) -> dict:
    """The run's report before any data are read: the plan, where the noise comes from, the ledger,
    and the guarantee of the mode (data independent)."""
    from ..privacy.accountant import Accountant
    from ..randomness import describe_seed

    report = rp.as_dict()
    report["randomness"] = describe_seed(seed, impl=key_impl)
    if ledger_given:
        report["ledger"] = {"dataset_id": dataset_id, "charged_before_sampling": True}
    if rp.mode == "path":
        report["guarantee"] = (f"({report['eps_spent']:.4g}, {report['delta']:g})-DP for the whole "
                               f"trajectory of {rp.num_chains} chain(s)")
    elif rp.mode == "nonprivate":
        report["guarantee"] = "NON-PRIVATE (reference run; no privacy guarantee)"
    else:
        plan = rp.sampling_plan
        acc = Accountant([(plan.event, rp.num_chains)])
        eps_total = float(plan.event.epsilon) * rp.num_chains
        report.update({"eps": eps_total, "delta": 0.0, "eps_per_chain": float(plan.event.epsilon),
                       "eps_spent": eps_total, "accountant": acc.to_dict(),
                       "guarantee": f"pure {eps_total:.4g}-DP over {rp.num_chains} purified final draw(s) "
                                    "(each chain a certified trajectory + purification; basic composition)"})
    return report


def _route_name(rp) -> str:
    """The ledger label's route: the sampling plan's (the private modes), else the mode ('nonprivate',
    which charges nothing)."""
    return rp.sampling_plan.route if rp.sampling_plan is not None else rp.mode


def _plan_rashomon_route(public):
    return plan_rashomon(public["loss"], public["n"], public["dim"], public["psi"], domain=public["domain"],
                         **public["plan"])


def _run_rashomon_route(rp, data, public) -> RashomonResult:
    """The chains on the thresholded law (the data enter here only), then, in the pure mode, each
    chain's final draw purified. If the purification fails (a non-finite final draw), nothing is
    kept on purpose: the raw trajectory is only (eps_c (1 - f), delta_a)-DP, not the pure eps the
    charge and the report state, so it must not be released (finding 4); the charge stays."""
    from ..privacy import purification as purif

    X, y = data
    loss, dim, domain, report = public["loss"], public["dim"], public["domain"], public["report"]
    key, _ = secret_key(public["seed"], impl=public["key_impl"])
    key_run, key_smooth, key_purify = jax.random.split(key, 3)
    draws = _sample_on_data(loss, X, y, rp, domain, dim, key_run, key_smooth)
    if rp.mode != "pure":
        return RashomonResult(draws, rp.mode, rp.psi, report, loss, rp.burn_in, **public["result"])
    pdict = dict(rp.sampling_plan.purification)
    pdict["q"] = float(pdict["q"])
    with jax.enable_x64(True):
        last = np.asarray(domain.project(jnp.asarray(draws[:, -1], dtype=jnp.float64)))
    del draws
    out = purif.purify(key_purify, last, purif.PurificationParams(**pdict), domain)
    return RashomonResult(out[:, None, :], rp.mode, rp.psi, report, loss, 0, **public["result"])


#: the Rashomon-thresholded Gibbs law: :func:`plan_rashomon` plans (its ``charges()``: the path, or
#: one purified event per chain), :func:`_sample_on_data` runs
RASHOMON_ROUTE = register_route(Route("rashomon", _plan_rashomon_route, _run_rashomon_route,
                                      label=lambda rp: f"dp_infer.rashomon {_route_name(rp)}",
                                      preflight=None))
