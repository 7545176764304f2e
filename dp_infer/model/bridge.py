"""From an ordinary NumPyro model to a private tempered posterior.

A Bayesian model ``model(X=None, y=None)`` whose observations sit in a ``numpyro.plate`` over
rows defines a per-example negative log-likelihood ``nll(theta; x_i, y_i)`` and a prior.
:func:`loss_from_model` turns it into

* a :class:`~dp_infer.losses.PerExampleLoss` on the flat *unconstrained* latent vector, with
  per-example gradient clipping (so its sensitivity holds whatever the likelihood is), and
* the prior's potential (data independent, so free of privacy cost),

so that the tempered posterior ``prior(theta) * prod_i p(y_i | theta, x_i)^(beta / n)`` is the
Gibbs potential ``U = beta * mean_i nll_i + prior potential``. ``beta = n`` is the ordinary
posterior; privacy needs a much smaller ``beta`` (chosen by the calibration, never by the data).

Assumptions checked here (on public placeholder rows, never on the private data): every latent
site is continuous and global (outside the data plate); every observed site is batched by row
(inside a plate whose size follows the number of rows); the prior and the constraints are
evaluated without the private rows, so they cannot depend on them -- and a prior that *would*
depend on the data arguments (it changes between two different placeholder tables) is refused.

:class:`ModelLoss` also carries the model's public layout (:meth:`ModelLoss.describe`): latent
sites with their constrained shapes and ArviZ dims taken from the plates they sit in, the
observed sites and the names of the data arguments.

Per-row covariates and group indices (``model_kwargs``) are passed the way NumPyro users pass
them, as keyword arguments of the model: an array whose leading dimension is n is a per-row
covariate (part of the row: a replace-one neighbour may change it, and the clipped per-example
gradient covers it); an integer array is an index (e.g. a group) and needs a declared range
(``index_ranges={"group": G}``: values in ``0 .. G-1``, checked, because JAX clamps an index out
of range silently); anything else that is not an array (a Python number, string, ``None``) is a
public constant of the model passed unchanged (e.g. ``num_groups=8``). Per-row arrays are carried
as extra columns after X inside the loss (:meth:`ModelLoss.pack_rows`); the model sees them under
their own names with their own shapes and dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions.transforms import biject_to
from numpyro.infer.util import constrain_fn, potential_energy
from numpyro.primitives import Messenger

from .._validation import check_finite_array, check_positive
from .row_args import RowArg, check_model_kwargs, pack_row_args
from ..losses import PerExampleLoss, clipped_loss
from ..losses.behaviour import LossBehaviour

__all__ = ["ModelLoss", "SiteLayout", "loss_from_model", "MODEL_NLL"]

#: the behaviour of :func:`loss_from_model`'s loss: the model's likelihood without its prior, which
#: ``fit(loss)`` refuses (it would drop the prior)
MODEL_NLL = LossBehaviour(name="model_nll", fit_refusal=(
    "loss comes from loss_from_model: fit(loss) would drop the model's prior (it lives in "
    "ModelLoss.prior_potential); call fit(model=..., X=..., y=...) instead"))


class _drop_observations(Messenger):
    """Replace the model's observed sites' distributions (``names``) by masked copies (log-prob 0).

    Only the sites named: NumPyro's ``potential_energy`` adds the log-Jacobian of every constrained
    latent as an *observed* ``numpyro.factor`` site (``_<site>_log_det``), which is part of the
    prior in the unconstrained space and must stay (masking it leaves, e.g., ``log tau`` of a
    ``HalfNormal`` scale with an improper flat-tailed prior: the scale collapses to 0).
    """

    def __init__(self, fn=None, names=()):
        self.names = frozenset(names)
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample" and msg.get("is_observed") and msg["name"] in self.names:
            msg["fn"] = msg["fn"].mask(False)


@dataclass(frozen=True)
class SiteLayout:
    """A latent site's public layout: constrained shape and ArviZ dim names (plates first)."""

    name: str
    shape: tuple[int, ...]
    dims: tuple[str, ...]
    distribution: str
    support: str

    def as_dict(self) -> dict:
        return {"shape": list(self.shape), "dims": list(self.dims), "distribution": self.distribution,
                "support": self.support}


@dataclass(frozen=True)
class ModelLoss:
    """The per-example loss and prior potential extracted from a NumPyro model."""

    loss: PerExampleLoss
    prior_potential: Callable[[jax.Array], jax.Array]
    unravel: Callable[[jax.Array], dict]
    latent_sites: tuple[str, ...]
    dim: int
    _constrain: Callable[[dict], dict]
    model: Callable | None = None
    sites: tuple[SiteLayout, ...] = ()
    observed_sites: tuple[str, ...] = ()
    x_name: str = "X"
    y_name: str = "y"
    num_features: int = 0
    plate_sizes: dict = field(default_factory=dict)
    supports: dict = field(default_factory=dict)
    row_args: tuple[RowArg, ...] = ()
    static_kwargs: dict = field(default_factory=dict)

    def pack_rows(self, X, model_kwargs=None, index_ranges=None) -> np.ndarray:
        """The rows the loss reads: X with the per-row ``model_kwargs`` appended as columns
        (checked as :func:`check_model_kwargs`; they must match the layout read at construction)."""
        X = np.asarray(X, dtype=np.float64)
        row_args, values, static = check_model_kwargs(model_kwargs, index_ranges, X.shape[0],
                                                      x_name=self.x_name, y_name=self.y_name)
        if [(r.name, r.shape, r.index_range) for r in row_args] != [(r.name, r.shape, r.index_range)
                                                                     for r in self.row_args]:
            raise ValueError("model_kwargs: the per-row arguments differ from the ones the model was read with")
        return pack_row_args(X, row_args, values)

    def constrain(self, theta_flat) -> dict:
        """Map flat unconstrained draws (..., dim) to a dict of constrained site values."""
        theta_flat = jnp.asarray(theta_flat)
        batch = theta_flat.shape[:-1]
        flat = theta_flat.reshape((-1, self.dim))
        out = jax.vmap(lambda t: self._constrain(self.unravel(t)))(flat)
        return {k: v.reshape(batch + v.shape[1:]) for k, v in out.items() if k in self.latent_sites}

    def unconstrain(self, values: dict) -> jax.Array:
        """Inverse of :meth:`constrain` for one draw: constrained site values -> flat vector."""
        z = {k: biject_to(self.supports[k]).inv(jnp.asarray(values[k])) for k in self.latent_sites}
        return ravel_pytree(z)[0]

    def placeholder(self, k: int, value: float = 0.0) -> dict:
        """Public placeholder data arguments with ``k`` rows (never the private rows)."""
        out = {self.x_name: jnp.full((k, self.num_features), value), self.y_name: jnp.full((k,), value)}
        out.update({r.name: r.placeholder(k, value) for r in self.row_args})
        out.update(self.static_kwargs)
        return out

    def observation_sampler(self) -> Callable:
        """``(theta_flat, x, key) -> y``: one row's observation drawn from the model's likelihood at the flat
        unconstrained ``theta_flat``, for a packed row ``x`` (:meth:`pack_rows`), as float. The model runs
        with ``y=None``, so its observed site is sampled. Used on public rows only (a model-based second
        moment of the scores, :mod:`dp_infer.model.public_information`). Needs exactly one observed site."""
        if len(self.observed_sites) != 1 or self.model is None:
            raise ValueError(f"the model has observed sites {list(self.observed_sites)}: drawing labels for public "
                             "rows needs exactly one (the data argument "
                             f"{self.y_name!r})")
        obs, model, unravel = self.observed_sites[0], self.model, self.unravel
        args = (self.num_features, self.row_args, self.x_name, self.static_kwargs)

        def sample_one(theta_flat, x, key):
            kw = _row_kwargs(x, *args)
            params = constrain_fn(model, (), {**kw, self.y_name: jnp.zeros((1,))}, unravel(theta_flat))
            t = handlers.trace(handlers.substitute(handlers.seed(model, key), params)).get_trace(
                **{**kw, self.y_name: None})
            return jnp.reshape(t[obs]["value"], ()).astype(jnp.result_type(float))

        return sample_one

    def observation_support(self, max_size: int = 64) -> tuple[float, ...] | None:
        """The values the single observed site can take, where its distribution has a finite support that the
        model declares (``enumerate_support``: Bernoulli, categorical, a binomial of fixed count) and that is
        the same on placeholder rows of zeros and of ones (so it does not depend on a row); None otherwise
        (a continuous observation, several observed sites, a support over ``max_size`` values or one that
        varies by row). Read on public placeholder rows only."""
        if len(self.observed_sites) != 1 or self.model is None:
            return None
        obs, found = self.observed_sites[0], []
        for value in (0.0, 1.0):
            try:
                t = handlers.trace(handlers.seed(self.model, jax.random.key(1))).get_trace(**self.placeholder(1, value))
                fn = t[obs]["fn"]
                if not fn.has_enumerate_support:
                    return None
                vals = np.unique(np.asarray(fn.enumerate_support(expand=False), dtype=np.float64).ravel())
            except Exception:  # noqa: BLE001 - a support the distribution cannot enumerate here: not finite for us
                return None
            found.append(tuple(float(v) for v in vals))
        if found[0] != found[1] or not 2 <= len(found[0]) <= max_size:
            return None
        return found[0]

    def init_flat(self) -> jax.Array:
        """Data-independent initial point: 0 in unconstrained space (the centre NumPyro's
        ``init_to_uniform`` draws around)."""
        return jnp.zeros(self.dim)

    def dims(self) -> dict[str, list[str]]:
        """ArviZ ``dims`` of the latent sites (plate names where a plate is known)."""
        return {s.name: list(s.dims) for s in self.sites}

    def coords(self) -> dict[str, list[int]]:
        """ArviZ ``coords`` for the plate dims: ``0 .. size - 1`` (override with your labels)."""
        return {name: list(range(size)) for name, size in self.plate_sizes.items()}

    def describe(self) -> dict:
        """The model's public layout (JSON-serialisable; nothing computed from the data)."""
        return {"latent_sites": {s.name: s.as_dict() for s in self.sites},
                "observed_sites": list(self.observed_sites), "dim": self.dim,
                "data_arguments": [self.x_name, self.y_name], "num_features": self.num_features,
                "row_arguments": {r.name: r.describe() for r in self.row_args},
                "static_arguments": sorted(self.static_kwargs),
                "clip_norm": self.loss.clip_norm,
                "smoothness": self.loss.constants.smoothness}


def _site_layout(name: str, site: dict) -> tuple[SiteLayout, dict]:
    value = jnp.shape(site["value"])
    event_dim = int(site["fn"].event_dim)
    batch_len = len(value) - event_dim
    frames = {f.dim: f for f in site.get("cond_indep_stack", ())}
    dims, plates = [], {}
    for i in range(len(value)):
        f = frames.get(i - batch_len) if i < batch_len else None
        if f is not None and f.size == value[i]:
            dims.append(f.name)
            plates[f.name] = int(f.size)
        else:
            dims.append(f"{name}_dim_{i}")
    support = site["fn"].support
    return (SiteLayout(name, tuple(int(s) for s in value), tuple(dims), type(site["fn"]).__name__,
                       type(support).__name__.lstrip("_")), plates)


def loss_from_model(model: Callable, X, y, *, clip_norm: float, x_name: str = "X",
                    y_name: str = "y", smoothness: float | None = None, model_kwargs: dict | None = None,
                    index_ranges: dict | None = None) -> ModelLoss:
    """Extract a clipped per-example loss and a prior potential from ``model(X=..., y=...)``.

    ``clip_norm`` (> 0) bounds each per-example gradient with respect to the unconstrained
    latent vector, so the loss has L = clip_norm and G = 2 clip_norm by construction.
    ``smoothness`` (optional, > 0) is your claim of the per-example loss's curvature in the
    unconstrained space; it is used for the step size only, and reported as declared.
    ``model_kwargs``: further keyword arguments of the model -- per-row covariates and indices
    (leading dimension n; integer indices need ``index_ranges``) and public constants (see the
    module docstring). The returned loss reads X with the per-row arguments appended as columns
    (:meth:`ModelLoss.pack_rows`).
    """
    check_positive("clip_norm", clip_norm)
    X = check_finite_array("X", X, ndim=2)
    y = check_finite_array("y", y, ndim=1)
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X and y must have the same number of rows, got {X.shape[0]} and {y.shape[0]}")
    if not callable(model):
        raise ValueError(f"model must be a callable NumPyro model model({x_name}=..., {y_name}=...), got {model!r}")
    row_args, _, static = check_model_kwargs(model_kwargs, index_ranges, X.shape[0], x_name=x_name, y_name=y_name)
    d = int(X.shape[1])
    # The model's structure, prior and constraints are read with PUBLIC placeholder rows (zeros
    # of the data's shape), never with private rows: a prior that looked at X or y would leak.
    def placeholder(k, value=0.0):
        out = {x_name: jnp.full((k,) + X.shape[1:], value), y_name: jnp.full((k,), value)}
        out.update({r.name: r.placeholder(k, value) for r in row_args})
        out.update(static)
        return out

    def trace(k, value=0.0):
        try:
            return handlers.trace(handlers.seed(model, jax.random.key(1))).get_trace(**placeholder(k, value))
        except Exception as e:  # noqa: BLE001 - a model that cannot run on placeholder rows
            raise ValueError(f"the model could not be traced with placeholder data {x_name}=zeros({k}, "
                             f"{X.shape[1]}), {y_name}=zeros({k}) (it must take the data as the keyword "
                             f"arguments {x_name!r} and {y_name!r}"
                             + (f", and {sorted(k_ for k_ in placeholder(1) if k_ not in (x_name, y_name))}"
                                if row_args or static else "")
                             + f"): {type(e).__name__}: {e}") from None

    kw1 = placeholder(1)
    tr = trace(1)
    latent = {k: s for k, s in tr.items() if s["type"] == "sample" and not s.get("is_observed")}
    observed = [k for k, s in tr.items() if s["type"] == "sample" and s.get("is_observed")]
    if not latent:
        raise ValueError("model has no latent sample site: nothing to sample")
    if not observed:
        raise ValueError("model has no observed site: pass the data through the keyword arguments "
                         f"{x_name!r}, {y_name!r} and observe y inside a numpyro.plate")
    for k, s in latent.items():
        if s["fn"].support.is_discrete:
            raise ValueError(f"latent site {k!r} is discrete: the Langevin kernels need continuous "
                             "latents (marginalise it out, e.g. with a mixture likelihood)")
    try:
        tr2, tr3 = _structure(model, placeholder(2)), _structure(model, placeholder(3))
    except Exception as e:  # noqa: BLE001 - as for trace(): one line naming the data arguments
        raise ValueError(f"the model could not be traced with placeholder data of 2 and 3 rows ({x_name}, "
                         f"{y_name}): {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    for k in latent:
        if k not in tr2 or tr2[k][0] != tr3[k][0]:
            raise ValueError(f"latent site {k!r} lies inside the data plate: only global latents "
                             "are supported by the per-example bridge (local latents would be private)")
    for k in observed:
        sizes2, sizes3 = set(tr2[k][1]), set(tr3[k][1])
        if 2 not in sizes2 or 3 not in sizes3:
            raise ValueError(f"observed site {k!r} is not batched by row: observe it inside "
                             f"`with numpyro.plate('data', len({y_name}))` (a likelihood summed over "
                             "all rows, e.g. one numpyro.factor, has no per-example loss to clip)")
    _check_observations(tr, observed, y, y_name)
    # unconstrained parametrisation of the latents
    unc = {k: s["fn"].support for k, s in latent.items()}
    z0 = {k: biject_to(unc[k]).inv(s["value"]) for k, s in latent.items()}
    flat0, unravel = ravel_pytree(z0)
    dim = int(flat0.shape[0])

    def _constrain(z):
        return constrain_fn(model, (), kw1, z)

    def nll_one(theta_flat, x, yy):
        z = unravel(theta_flat)
        kw = _row_kwargs(x, d, row_args, x_name, static)
        kw[y_name] = jnp.reshape(yy, (1,))
        params = constrain_fn(model, (), kw, z)
        t = handlers.trace(handlers.substitute(handlers.seed(model, jax.random.key(1)), params)).get_trace(**kw)
        total = 0.0
        for name in observed:
            s = t[name]
            total = total + jnp.sum(s["fn"].log_prob(s["value"]))
        return -total

    prior_model = _drop_observations(model, names=observed)

    def prior_potential(theta_flat):
        return potential_energy(prior_model, (), kw1, unravel(theta_flat))

    _check_prior_ignores_data(prior_model, unravel, dim, kw1, placeholder(1, 1.0))
    layouts, plates = [], {}
    for k, s in latent.items():
        lay, p = _site_layout(k, s)
        layouts.append(lay)
        plates.update(p)
    loss = clipped_loss(nll_one, clip_norm, name="model_nll", smoothness=smoothness)
    loss = replace(loss, num_params_fn=_FixedDim(dim), behaviour=MODEL_NLL)
    return ModelLoss(loss, prior_potential, unravel, tuple(latent), dim, _constrain, model,
                     tuple(layouts), tuple(observed), x_name, y_name, int(X.shape[1]), plates, unc,
                     row_args, dict(static))


def _row_kwargs(x, num_features: int, row_args, x_name: str, static: dict) -> dict:
    """The model's keyword arguments for one packed row ``x`` (X's columns, then the per-row arguments'
    columns, :meth:`ModelLoss.pack_rows`), without the observation."""
    offsets = np.cumsum([num_features] + [r.width for r in row_args])
    kw = {x_name: x[None, :num_features]}
    kw.update({r.name: r.unpack(x[int(lo):int(hi)]) for r, lo, hi in zip(row_args, offsets[:-1], offsets[1:])})
    kw.update(static)
    return kw


def _check_observations(tr, observed, y, y_name: str) -> None:
    """Every observation must lie in its site's support (read on the placeholder trace): NumPyro
    evaluates ``log_prob`` outside the support without a word (a Bernoulli site would take y = 2).
    The message names the data argument and the support, never a value."""
    from numpyro.distributions import constraints

    for k in observed:
        support = tr[k]["fn"].support
        if isinstance(support, type(constraints.dependent)):  # parameter-dependent: not checkable here
            continue
        ok = np.asarray(support(jnp.asarray(y)))
        if not bool(np.all(ok)):
            raise ValueError(f"{y_name}: an observation lies outside the support of the observed site {k!r} "
                             f"({type(support).__name__.lstrip('_')}); check the labels' coding")


@dataclass(frozen=True)
class _FixedDim:
    """``num_params`` of a model loss: the model's dimension, whatever the number of columns."""

    dim: int

    def __call__(self, num_features: int) -> int:
        return self.dim


def _structure(model, kwargs: dict) -> dict:
    """Site shapes and plate sizes of ``model(**kwargs)`` from an abstract trace (no computation)."""
    out = {}

    def f():
        tr = handlers.trace(handlers.seed(model, jax.random.key(1))).get_trace(**kwargs)
        out.update({k: (tuple(jnp.shape(s["value"])), tuple(fr.size for fr in s.get("cond_indep_stack", ())))
                    for k, s in tr.items() if s["type"] == "sample"})
        return jnp.zeros(())

    jax.make_jaxpr(f)()
    return out


def _check_prior_ignores_data(prior_model, unravel, dim: int, kw_a: dict, kw_b: dict) -> None:
    """Refuse a prior that changes with the data arguments (checked on two public placeholder
    tables, zeros and ones, at three fixed points): the bridge reads the prior without the private
    rows, so such a prior would otherwise be silently replaced by its placeholder version."""
    points = jnp.stack([jnp.zeros(dim), jnp.full((dim,), 0.5), jnp.linspace(-1.0, 1.0, dim)])
    def energy(kw):  # the arguments are closed over: public constants (a plate size) stay static
        return jax.jit(jax.vmap(lambda z: potential_energy(prior_model, (), kw, unravel(z))))(points)

    try:
        ua, ub = np.asarray(energy(kw_a)), np.asarray(energy(kw_b))
    except Exception:  # noqa: BLE001 - a placeholder of ones the model cannot take: no check
        return
    for a, b in zip(ua, ub):
        if not np.isclose(a, b, rtol=1e-6, atol=1e-9, equal_nan=True):
            raise ValueError("the prior of the model depends on the data arguments (e.g. a location computed "
                             "from y, or a scale from X): dp_infer reads the prior without the private rows, "
                             "so declare it from public constants")


@dataclass(frozen=True)
class NoncentredPrior:
    """The model's prior with every latent loc-scale site of real support decentred (NumPyro's
    ``LocScaleReparam(centered=0)``: ``a = loc + scale * a_decentered``), over its own flat unconstrained
    vector ``u`` of ``dim`` entries: ``potential(u)`` is minus its log density (Jacobians included) and
    ``to_theta(u)`` the original model's flat unconstrained vector (:meth:`ModelLoss.unconstrain` of the
    constrained sites). A hierarchy ``a_g ~ N(mu, tau)`` whose ``a_g`` the data barely inform has a funnel
    in ``(a, log tau)`` and none in ``(a_decentered, log tau)``. Read on public placeholder rows."""

    potential: Callable[[jax.Array], jax.Array]
    to_theta: Callable[[jax.Array], jax.Array]
    dim: int
    decentred: tuple[str, ...]


def noncentred_prior(ml: ModelLoss) -> NoncentredPrior | None:
    """:class:`NoncentredPrior` of ``ml``'s model, or None when no latent site is a loc-scale family of
    real support (Normal, Cauchy, Laplace, StudentT): nothing to decentre."""
    import numpyro.distributions as dist
    from numpyro.infer.reparam import LocScaleReparam

    if ml.model is None:
        return None
    kw1 = ml.placeholder(1)
    prior_model = _drop_observations(ml.model, names=ml.observed_sites)

    def base(fn):
        while isinstance(fn, (dist.Independent, dist.ExpandedDistribution)):
            fn = fn.base_dist
        return fn

    def reparam_of(fn):
        b = base(fn)
        if type(b) in (dist.Normal, dist.Cauchy, dist.Laplace):
            return LocScaleReparam(0)
        return LocScaleReparam(0, shape_params=("df",)) if type(b) is dist.StudentT else None

    tr0 = handlers.trace(handlers.seed(prior_model, jax.random.key(1))).get_trace(**kw1)
    decentred = tuple(k for k in ml.latent_sites if reparam_of(tr0[k]["fn"]) is not None)

    def config(msg):
        return reparam_of(msg["fn"]) if msg["type"] == "sample" and msg["name"] in decentred else None

    reparam_model = handlers.reparam(prior_model, config=config)
    tr = handlers.trace(handlers.seed(reparam_model, jax.random.key(1))).get_trace(**kw1)
    if not decentred:
        return None
    latent = {k: s for k, s in tr.items() if s["type"] == "sample" and not s.get("is_observed")}
    z0 = {k: biject_to(s["fn"].support).inv(s["value"]) for k, s in latent.items()}
    flat0, unravel = ravel_pytree(z0)

    def potential(u):
        return potential_energy(reparam_model, (), kw1, unravel(u))

    def to_theta(u):
        values = constrain_fn(reparam_model, (), kw1, unravel(u), return_deterministic=True)
        z = {k: biject_to(ml.supports[k]).inv(jnp.asarray(values[k])) for k in ml.latent_sites}
        return ravel_pytree(z)[0]

    return NoncentredPrior(potential, to_theta, int(flat0.shape[0]), decentred)
