"""Shared NumPyro ``MCMCKernel`` adapter for the unadjusted Langevin kernels.

The adapter is thin: the algorithm lives in the functional core of each kernel module
(:mod:`dp_infer.kernels.langevin`, :mod:`dp_infer.kernels.underdamped`); this module turns
``model`` / ``potential_fn`` into a potential, picks a data-independent initial point, checks
inputs, vectorises over chains, and exposes what NumPyro and ArviZ expect.

Privacy-relevant behaviour (``/work/shared/DESIGN.md`` invariants 1 and 2):

* **No warmup.** ``num_warmup > 0`` raises: NumPyro's step-size / mass-matrix adaptation looks
  at the private data. Use ``MCMC(kernel, num_warmup=0, num_samples=N)``.
* **Data-independent initial point.** For ``model`` kernels the initial point is the
  unconstrained image of ``init_strategy`` (default ``init_to_median``: the median of prior
  draws), drawn from the chain's own key, then projected onto ``domain`` if one is given.
  NumPyro's ``initialize_model`` re-draws the initial point until the potential is finite --
  a data-dependent selection. We never use its ``param_info``, and we never evaluate the
  potential at the initial point either (refusing to run when it is not finite would release
  one bit about the data): only the shapes (``jax.eval_shape``) and the finiteness of the
  position itself are checked. A chain whose gradient is not finite runs, and its draws are
  flagged ``diverging``. ``init_strategy`` must itself be data independent (no
  ``init_to_value`` at a MAP estimate, no prior whose parameters are computed from data).
  ``init_params`` given by the user must lie in ``domain`` (``ValueError`` otherwise; under
  ``pmap``/``jax.vmap`` the chain is filled with NaN and flagged ``diverging`` instead).
* **Only theta is released by default.** The state holds the position (and, for the kinetic
  kernel, the velocity), a divergence flag computed from theta alone, a step counter and the
  key; no potential energy and no gradient. ``debug=True`` adds the non-private
  ``potential_energy`` and ``grad_norm`` fields (evaluated at the new position: one extra
  potential + gradient evaluation per step; the draws are unchanged).
* ``arviz.from_numpyro(mcmc)`` works (``.model`` is exposed) but copies observed sites
  (``obs=data``) into its ``observed_data`` group: strip that group before releasing.
* ``diverging`` is True once the flat position is non-finite or its l2 norm exceeds
  ``divergence_radius``; it is sticky (stays True) and the chain keeps running (it is not
  frozen), so draws after a divergence are garbage and flagged as such.

Chains: ``chain_method="sequential"``, ``"parallel"`` (falls back to sequential on one
device), ``"vectorized"`` (``init`` receives a batch of keys and vmaps itself; ``sample``
vmaps the transition when the state is batched, detected from ``state.i.ndim``) and callable
methods such as ``jax.vmap`` all give the same draws for the same keys: each chain key is split
into ``(chain_key, init_key)`` exactly as NumPyro's HMC does, and the noise only depends on
the chain key.
"""

from __future__ import annotations

import copy
import warnings
from functools import partial
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import random, vmap
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions import biject_to
from numpyro.infer.initialization import init_to_median
from numpyro.infer.mcmc import MCMCKernel
from numpyro.infer.util import initialize_model, transform_fn
from numpyro.util import identity, is_prng_key

from .._validation import check_nonnegative, check_positive
from ..domains import Domain
from ._common import (
    DEFAULT_DIVERGENCE_RADIUS, flatten_positions, is_traced, as_float_tree, default_divergence_radius,
    make_divergence_fn, resolve_projection,
)

__all__ = ["LangevinKernelBase"]


# --------------------------------------------------------------------------------------------
# the adapter
# --------------------------------------------------------------------------------------------


class LangevinKernelBase(MCMCKernel):
    """Base class of :class:`~dp_infer.kernels.Langevin` and
    :class:`~dp_infer.kernels.UnderdampedLangevin` (see the module docstring).

    Subclasses set ``_state_cls`` / ``_debug_state_cls`` (the debug state is the plain state
    followed by ``potential_energy`` and ``grad_norm``) and implement ``_core_init(z, key)`` and
    ``_core_transition(grad_fn) -> (state -> state)``.
    """

    DEFAULT_DIVERGENCE_RADIUS = DEFAULT_DIVERGENCE_RADIUS
    _state_cls: Any = None
    _debug_state_cls: Any = None

    def __init__(
        self,
        model=None,
        potential_fn=None,
        *,
        step_size,
        domain: Domain | None = None,
        divergence_radius: float | None = None,
        init_strategy: Callable = init_to_median,
        debug: bool = False,
    ):
        if (model is None) == (potential_fn is None):
            raise ValueError("exactly one of `model` or `potential_fn` must be specified")
        if model is not None and not callable(model):
            raise ValueError(f"model must be a callable NumPyro model, got {model!r}")
        if potential_fn is not None and not callable(potential_fn):
            raise ValueError(f"potential_fn must be a callable z -> U(z), got {potential_fn!r}")
        if step_size is None:
            raise ValueError("step_size is required and must lie in (0, inf)")
        self._step_size = check_positive("step_size", step_size)
        if domain is not None and not isinstance(domain, Domain):
            raise ValueError(
                f"domain must be a dp_infer.domains.Domain (Euclidean, L2Ball, Box) or None, got {domain!r}"
            )
        if not callable(init_strategy):
            raise ValueError(f"init_strategy must be a NumPyro init strategy (callable), got {init_strategy!r}")
        self._model = model
        self._potential_fn = potential_fn
        self._domain = domain
        self._divergence_radius = default_divergence_radius(domain, divergence_radius)
        self._divergence_fn = make_divergence_fn(self._divergence_radius)
        self._projection = resolve_projection(domain)
        self._init_strategy = init_strategy
        self._debug = bool(debug)
        if self._debug:
            warnings.warn(
                f"{type(self).__name__}(debug=True) stores potential_energy and grad_norm in the "
                "state: they are functions of the private data, NOT covered by any privacy "
                "guarantee; never release them.",
                UserWarning,
                stacklevel=2 if type(self).__init__ is LangevinKernelBase.__init__ else 3,
            )
        # set by init (model kernels); dropped by __getstate__
        self._potential_fn_gen = None
        self._postprocess_fn_gen = None
        self._sample_fn = None  # NumPyro's MCMC checks this to decide whether init must run

    # ---------------------------------------------------------------- read-only parameters
    @property
    def model(self):
        """The NumPyro model (``None`` for ``potential_fn`` kernels); read by ArviZ."""
        return self._model

    @property
    def potential_fn(self):
        return self._potential_fn

    @property
    def step_size(self) -> float:
        """Step size h (data independent; used by the privacy accountant)."""
        return self._step_size

    @property
    def domain(self) -> Domain | None:
        return self._domain

    @property
    def divergence_radius(self) -> float:
        return self._divergence_radius

    @property
    def init_strategy(self):
        return self._init_strategy

    @property
    def debug(self) -> bool:
        return self._debug

    def integrated_time(self, num_steps: int) -> float:
        """Langevin time ``num_steps * step_size`` covered by ``num_steps`` transitions.

        With ``MCMC(..., num_warmup=0, num_samples=N, thinning=k)`` the kernel takes ``N``
        transitions per chain whatever ``k`` is: charge ``integrated_time(N)`` per chain.
        """
        if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)):
            raise ValueError(f"num_steps must be an integer >= 0, got {num_steps!r}")
        check_nonnegative("num_steps", num_steps)
        return float(int(num_steps) * self._step_size)

    # ---------------------------------------------------------------- MCMCKernel interface
    @property
    def sample_field(self):
        return "z"

    @property
    def default_fields(self):
        return ("z", "diverging")

    def get_diagnostics_str(self, state):
        # theta-only: the step size is public and `diverging` is a function of theta.
        msg = f"step size {self._step_size:.2e}"
        if bool(np.any(np.asarray(state.diverging))):
            msg += ", DIVERGED"
        return msg

    def postprocess_fn(self, model_args, model_kwargs):
        if self._postprocess_fn_gen is None:
            return identity
        model_kwargs = {} if model_kwargs is None else model_kwargs
        return self._postprocess_fn_gen(*model_args, **model_kwargs)

    def get_potential_fn(self, model_args=(), model_kwargs=None):
        """``z -> U(z)`` for the given model arguments (requires ``init`` for model kernels).

        A ``potential_fn`` kernel run with arguments (``MCMC(..., jit_model_args=True).run(key, *args)``)
        gets ``U(z) = potential_fn(z, *args, **kwargs)``: large data enter the jitted loop as
        arguments, not as constants embedded in the program (:mod:`dp_infer.parallel.sharding`).
        """
        if self._model is None:
            if model_args or model_kwargs:
                fn, kw = self._potential_fn, dict(model_kwargs or {})
                return lambda z: fn(z, *model_args, **kw)
            return self._potential_fn
        if self._potential_fn_gen is None:
            raise RuntimeError(f"{type(self).__name__}.init must run before the potential is available")
        model_kwargs = {} if model_kwargs is None else model_kwargs
        return self._potential_fn_gen(*model_args, **model_kwargs)

    def refresh(self, state, model_args, model_kwargs):
        """Nothing data-dependent is cached in the state, so only debug fields need recomputing."""
        if not self._debug:
            return state
        pe_fn = self.get_potential_fn(model_args, model_kwargs)
        n = len(self._state_cls._fields)
        to_debug = lambda s: self._with_debug(self._state_cls(*s[:n]), pe_fn)  # noqa: E731
        return to_debug(state) if jnp.ndim(state.i) == 0 else vmap(to_debug)(state)

    def wrap_model(self, wrapper):
        if self._model is None:
            raise ValueError("wrap_model is not supported for kernels built from a potential_fn")
        kernel = copy.copy(self)
        kernel._model = wrapper(self._model)
        kernel._potential_fn_gen = None
        kernel._postprocess_fn_gen = None
        kernel._sample_fn = None
        return kernel

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_potential_fn_gen"] = None
        state["_postprocess_fn_gen"] = None
        state["_sample_fn"] = None
        return state

    # ---------------------------------------------------------------- init
    def init(self, rng_key, num_warmup, init_params=None, model_args=(), model_kwargs=None):
        if num_warmup:
            raise ValueError(
                f"num_warmup must be 0 for {type(self).__name__}, got {num_warmup!r}: warmup "
                "adaptation of the step size or mass matrix looks at the private data and is not "
                "covered by the privacy guarantee. Choose step_size a priori and use "
                "MCMC(kernel, num_warmup=0, num_samples=N)."
            )
        model_args = () if model_args is None else tuple(model_args)
        model_kwargs = {} if model_kwargs is None else dict(model_kwargs)
        batched = not is_prng_key(rng_key)
        if batched:
            chain_key, init_key = jnp.swapaxes(vmap(random.split)(rng_key), 0, 1)
            num_chains = chain_key.shape[0]
        else:
            chain_key, init_key = random.split(rng_key)
            num_chains = None

        user_init = init_params is not None
        if self._model is not None:
            self._setup_model(init_key[0] if batched else init_key, model_args, model_kwargs)
            if not user_init:
                draw = partial(self._draw_model_init, model_args=model_args, model_kwargs=model_kwargs)
                init_params = vmap(draw)(init_key) if batched else draw(init_key)
        elif not user_init:
            if self._domain is None:
                raise ValueError(
                    "init_params must be passed to MCMC.run(..., init_params=...) for a potential_fn "
                    "kernel (or give a domain, whose data-independent default_init() is then used)"
                )
            x0 = jnp.asarray(self._domain.default_init(), dtype=jnp.result_type(float))
            init_params = jnp.broadcast_to(x0, (num_chains,) + x0.shape) if batched else x0

        pe_fn = self.get_potential_fn(model_args, model_kwargs)
        init_params = self._check_init(init_params, pe_fn, batched, user_init)

        make_state = partial(self._init_state, pe_fn=pe_fn)
        state = vmap(make_state)(init_params, chain_key) if batched else make_state(init_params, chain_key)
        self._sample_fn = self.sample
        return state

    def _setup_model(self, rng_key, model_args, model_kwargs):
        # We only keep the potential / postprocess generators; the initial point returned by
        # initialize_model (param_info) went through NumPyro's re-draw-until-finite loop, a
        # data-dependent selection, and is discarded.
        info = initialize_model(
            rng_key,
            self._model,
            init_strategy=self._init_strategy,
            dynamic_args=True,
            model_args=model_args,
            model_kwargs=model_kwargs,
            validate_grad=False,
        )
        self._potential_fn_gen = info.potential_fn
        self._postprocess_fn_gen = info.postprocess_fn

    def _draw_model_init(self, rng_key, model_args, model_kwargs):
        """Unconstrained image of the init strategy's values, one draw, no re-draws."""
        seeded = handlers.substitute(handlers.seed(self._model, rng_key), substitute_fn=self._init_strategy)
        tr = handlers.trace(seeded).get_trace(*model_args, **model_kwargs)
        values, transforms = {}, {}
        for name, site in tr.items():
            if site["type"] == "sample" and not site["is_observed"] and not site["fn"].support.is_discrete:
                values[name] = site["value"]
                transforms[name] = biject_to(site["fn"].support)
        z = transform_fn(transforms, values, invert=True)
        if self._projection is not None:
            flat, unravel = ravel_pytree(z)
            self._check_dim(flat.shape[-1], "the model's unconstrained parameters")
            z = unravel(self._projection(flat))
        return z

    def _check_dim(self, size, what):
        if self._domain is not None and size != self._domain.dim:
            raise ValueError(
                f"domain has dim={self._domain.dim} but {what} flatten to {size} coordinates"
            )

    def _check_init(self, z0, pe_fn, batched, user_init):
        try:
            z0 = as_float_tree(z0)
            flat, unravel = flatten_positions(z0, batched)
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"init_params must be a pytree of float arrays, got {z0!r}") from e
        if flat.ndim != (2 if batched else 1):
            raise ValueError(f"init_params has an unexpected shape {jnp.shape(flat)} for batched={batched}")
        self._check_dim(flat.shape[-1], "init_params")

        if user_init and self._domain is not None:
            scale = 1.0 + jnp.max(jnp.abs(jnp.where(jnp.isfinite(flat), flat, 0.0)))
            inside = self._domain.contains(flat, tol=1e-5 * scale)
            if is_traced(inside):
                # cannot raise under pmap / a callable chain_method: poison the chain instead
                flat = jnp.where(jnp.expand_dims(inside, -1), flat, jnp.nan)
                z0 = unravel(flat)
            elif not bool(jnp.all(inside)):
                bad = np.flatnonzero(~np.atleast_1d(np.asarray(inside)))
                raise ValueError(
                    f"init_params must lie in the domain {self._domain.describe()}; "
                    f"chain(s) {bad.tolist()} start outside it"
                )

        # Shapes only (data independent): does the position fit the potential?
        try:
            jax.eval_shape(vmap(jax.grad(pe_fn)) if batched else jax.grad(pe_fn), z0)
        except Exception as e:  # noqa: BLE001 - any tracing failure means a wrong-shaped start
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ValueError(
                f"init_params (flat size {flat.shape[-1]} per chain) do not fit the potential: {first}"
            ) from None
        if not is_traced(flat) and not bool(np.all(np.isfinite(np.asarray(flat)))):
            src = "init_params" if user_init else f"the init_strategy ({self._init_strategy!r})"
            raise ValueError(f"the initial position given by {src} must be finite")
        # The potential itself is NOT evaluated here: it is a function of the private data, and
        # refusing to run when it is not finite would release one bit about them. A chain whose
        # gradient is not finite diverges and is flagged by the theta-only `diverging` field.
        return z0

    def _init_state(self, z, rng_key, pe_fn):
        state = self._core_init(z, rng_key)
        return self._with_debug(state, pe_fn) if self._debug else state

    def _with_debug(self, state, pe_fn):
        pe, grad = jax.value_and_grad(pe_fn)(state.z)
        gnorm = jnp.linalg.norm(ravel_pytree(grad)[0])
        return self._debug_state_cls(*state, pe, gnorm)

    # ---------------------------------------------------------------- sample
    def sample(self, state, model_args, model_kwargs):
        pe_fn = self.get_potential_fn(model_args, model_kwargs)
        core = self._core_transition(jax.grad(pe_fn))
        if self._debug:
            n = len(self._state_cls._fields)

            def transition(s):
                return self._with_debug(core(self._state_cls(*s[:n])), pe_fn)

        else:
            transition = core
        if jnp.ndim(state.i) == 0:
            return transition(state)
        return vmap(transition)(state)

    # ---------------------------------------------------------------- hooks
    def _core_init(self, z, rng_key):  # pragma: no cover - abstract
        raise NotImplementedError

    def _core_transition(self, grad_fn):  # pragma: no cover - abstract
        raise NotImplementedError
