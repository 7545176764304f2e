r"""Proximal (alternating) sampler with a restricted Gaussian oracle, for non-smooth potentials.

Target on R^d (seed 002, Problem 5.1 / Algorithm 1; digest §4.1-4.4)::

    pi(x) ∝ exp(-fbar(x) - psi(x)),   fbar = (1/n) sum_j f_j,   psi(x) = (m/2) ||x - c||^2,

with every ``f_j`` convex and G_f-Lipschitz (no smoothness) and ``m > 0``. One step with step
size ``eta`` (LST21's alternating sampler)::

    y  = x + sqrt(eta) * xi,                                    xi ~ N(0, I)
    x' ~ exp(-fbar(x') - psi(x') - ||x' - y||^2 / (2 eta))       (restricted Gaussian oracle)

The Gaussian part of the oracle's target, ``G_y ∝ exp(-psi(x) - ||x - y||^2 / (2 eta))``, is
``N((y + eta m c) / (1 + eta m), eta / (1 + eta m) I)``. Two oracles sample the rest by
rejection from it:

* :func:`taylor_rgo` -- seed 002 Algorithm 2: draw x, z ~ G_y independently; ``rho = 1 +
  sum_{alpha=1}^{J} prod_{i=1}^{alpha} (f_{j_{i,alpha}}(z) - f_{j_{i,alpha}}(x))`` with fresh
  uniform indices for every term and ``P(J >= alpha) = 1 / alpha!``; accept x when
  ``u <= rho / 2``. ``E[rho | x, z] = exp(fbar(z) - fbar(x))``, so the output is exact except
  when rho leaves [0, 2]; :func:`dp_infer.privacy.proximal.taylor_rgo_tv_bound` bounds the
  resulting total-variation error explicitly. O(1) single-example evaluations per call.
* :func:`linearised_rgo` -- exact rejection sampling (no TV error): with ``w`` the mean of G_y
  and ``g`` a subgradient of fbar at w, convexity gives ``fbar(x) >= fbar(w) + <g, x - w>``, so
  proposing from ``G_y`` tilted by ``exp(-<g, x>)`` (again Gaussian, mean shifted by
  ``-eta g / (1 + eta m)``) and accepting with probability ``exp(-(fbar(x) - fbar(w) -
  <g, x - w>))`` samples the oracle's target exactly. Each proposal costs a pass over the n
  examples. For losses of one linear score (GLMs) the acceptance probability is at least
  ``exp(-2 a - 2 sqrt(2 a / pi))`` with ``a = G_f^2 eta`` (see
  :func:`dp_infer.privacy.proximal.linearised_acceptance_bound`).

Both oracles run their rejection loop in batches of ``batch`` proposals and keep the first
accepted one, which has the law of a sequential loop. The number of proposals is random and
depends on the data: it is returned in :class:`ProximalInfo`, which is NON-PRIVATE
instrumentation (never released), and the running time is a side channel the guarantee does
not cover (as in the seed).

Functional core, BlackJAX style: :class:`ProximalState`, :func:`init`, :func:`build_kernel`
(``step(rng_key, state) -> (state, info)``), :func:`sample_chain` (``lax.scan``). The kernel
never decides privacy: eta, the number of steps and the temperature inside ``f_j`` come from
:func:`dp_infer.privacy.proximal.plan_proximal`. Run it in float64 (``jax.enable_x64``): the
acceptance tests compare O(1) differences of potentials that can be large.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax, random

from .._validation import check_positive, check_positive_int
from ..randomness import gaussian_noise

__all__ = [
    "ProximalState",
    "ProximalInfo",
    "RGO",
    "gaussian_part",
    "exact_gaussian_rgo",
    "taylor_rgo",
    "linearised_rgo",
    "init",
    "build_kernel",
    "sample_chain",
    "MAX_TAYLOR_TERMS",
]

#: J <= 18 always: J >= b needs u <= 1/b!, and a float64 uniform in (0, 1] is >= 2^-53 > 1/19!.
MAX_TAYLOR_TERMS = 18


class ProximalState(NamedTuple):
    """State of one chain: step counter, flat position (float array) and the chain's key."""

    i: jax.Array
    x: jax.Array
    rng_key: Any


class ProximalInfo(NamedTuple):
    """NON-PRIVATE instrumentation of one step (functions of the data; never release them).

    ``proposals``: oracle proposals drawn (int32); ``evaluations``: single-example loss
    evaluations of the sequential algorithm (float, it can exceed 2^31 over a run);
    ``convexity_violations``: proposals whose Bregman gap was negative beyond rounding (the
    linearised oracle; > 0 means the loss is not convex as declared and the draws do not follow
    the target: :func:`dp_infer.fit_proximal.sample_proximal` refuses them).
    """

    proposals: jax.Array
    evaluations: jax.Array
    convexity_violations: Any = 0


class RGO(NamedTuple):
    """A restricted Gaussian oracle for a fixed step size: ``sample(key, y) -> (x, info)``."""

    step_size: float
    sample: Callable


def gaussian_part(y, step_size: float, strong_convexity: float, center=None):
    """Mean and variance of ``G_y ∝ exp(-(m/2)|x - c|^2 - |x - y|^2 / (2 eta))``."""
    eta, m = step_size, strong_convexity
    c = 0.0 if center is None else center
    mean = (y + eta * m * c) / (1.0 + eta * m)
    return mean, eta / (1.0 + eta * m)


def _check_common(step_size, strong_convexity, batch):
    eta = check_positive("step_size", step_size)
    m = check_positive("strong_convexity", strong_convexity)
    b = check_positive_int("batch", batch)
    return eta, m, b


def exact_gaussian_rgo(*, step_size: float, strong_convexity: float, center=None) -> RGO:
    """The oracle when fbar = 0: one exact draw from G_y (tests and the Gaussian oracle)."""
    eta, m, _ = _check_common(step_size, strong_convexity, 1)

    def sample(key, y):
        mean, var = gaussian_part(y, eta, m, center)
        x = mean + jnp.sqrt(var) * gaussian_noise(key, y.shape, y.dtype)
        return x, ProximalInfo(jnp.ones((), jnp.int32), jnp.zeros((), y.dtype), jnp.zeros((), jnp.int32))

    return RGO(eta, sample)


def _rejection_loop(key, propose_batch, dim, dtype):
    """Run batches until one proposal is accepted; return (x, proposals used, evaluations)."""

    def cond(carry):
        return jnp.logical_not(carry[1])

    def body(carry):
        key, _, x, props, evals, bad = carry
        key, sub = random.split(key)
        out = propose_batch(sub)  # (b, d), (b,), (b,)[, (b,) bool: a negative gap]
        cand, acc, ev = out[:3]
        any_acc = jnp.any(acc)
        first = jnp.argmax(acc)
        used = jnp.where(any_acc, first + 1, acc.shape[0]).astype(jnp.int32)
        live = jnp.arange(acc.shape[0]) < used
        # evaluations spent up to and including the first accepted proposal
        ev_used = jnp.sum(jnp.where(live, ev, 0.0))
        if len(out) > 3:
            bad = bad + jnp.sum(live & out[3]).astype(jnp.int32)
        x = jnp.where(any_acc, cand[first], x)
        return key, any_acc, x, props + used, evals + ev_used, bad

    init_carry = (key, jnp.zeros((), bool), jnp.zeros((dim,), dtype), jnp.zeros((), jnp.int32),
                  jnp.zeros((), dtype), jnp.zeros((), jnp.int32))
    _, _, x, props, evals, bad = lax.while_loop(cond, body, init_carry)
    return x, ProximalInfo(props, evals, bad)


def _taylor_layout(A: int):
    """Static layout of the Taylor terms: term alpha (1..A) uses alpha fresh indices."""
    total = A * (A + 1) // 2
    # padded (A, A) table of positions into the flat list of differences; -1 = padding (factor 1)
    table = [[-1] * A for _ in range(A)]
    pos = 0
    for a in range(1, A + 1):
        for i in range(a):
            table[a - 1][i] = pos
            pos += 1
    return total, jnp.asarray(table, jnp.int32)


def _num_rows(data) -> int:
    leaves = jax.tree_util.tree_leaves(data)
    if not leaves:
        raise ValueError("data must be a non-empty pytree of arrays with a leading example axis")
    n = {int(jnp.shape(a)[0]) for a in leaves}
    if len(n) != 1:
        raise ValueError(f"every leaf of data must have the same leading (example) length, got {sorted(n)}")
    return check_positive_int("number of examples", n.pop())


def taylor_rgo(example_fn: Callable, data, *, step_size: float, strong_convexity: float,
               center=None, batch: int = 2, fast_terms: int = 6) -> RGO:
    """Seed 002 Algorithm 2: rejection sampling with the randomised-Taylor estimator.

    :param example_fn: ``(x, row) -> f_row(x)`` for one example ``row`` of ``data``, already
        including the inverse temperature; convex and G_f-Lipschitz in x.
    :param data: pytree of arrays with a leading axis of length n (e.g. ``(X, y)``); indices
        are drawn uniformly from {0, ..., n-1}, fresh for every factor of every term, as the
        seed's analysis assumes.
    :param batch: proposals per vectorised round of the rejection loop (law unchanged).
    :param fast_terms: terms evaluated with fixed shapes; the rare terms beyond (probability
        ``1 / (fast_terms + 1)!`` per proposal) run in a loop, so nothing is truncated.

    The number of terms J is drawn by inverse CDF from ``u = 1 - U`` with U uniform on [0, 1):
    ``J = #{b >= 1 : u <= 1 / b!}``, i.e. ``P(J >= b) = 1 / b!`` (the loop "continue with
    probability 1 / (alpha + 1)" of the seed). ``ProximalInfo.evaluations`` counts the
    ``J (J + 1)`` single-example evaluations the sequential algorithm makes.
    """
    eta, m, b = _check_common(step_size, strong_convexity, batch)
    n = _num_rows(data)
    A = MAX_TAYLOR_TERMS
    F = check_positive_int("fast_terms", fast_terms)
    if F > A:
        raise ValueError(f"fast_terms must lie in [1, {A}], got {fast_terms!r}")
    total, table = _taylor_layout(F)
    log_inv_fact = jnp.asarray([-math.lgamma(k + 1.0) for k in range(1, A + 1)])
    f_rows = jax.vmap(example_fn, in_axes=(None, 0))

    def f_many(x, idx):
        return f_rows(x, jax.tree_util.tree_map(lambda a: a[idx], data))

    def slow_terms(key, x, z, J):
        """Terms alpha = F+1 .. J (each with alpha fresh indices), summed; zero loops if J <= F."""

        def cond(c):
            return c[0] <= J

        def body(c):
            alpha, acc, k = c
            k, sub = random.split(k)
            idx = random.randint(sub, (A,), 0, n, dtype=jnp.int32)
            d = jnp.where(jnp.arange(A) < alpha, f_many(z, idx) - f_many(x, idx), 1.0)
            return alpha + 1, acc + jnp.prod(d), k

        return lax.while_loop(cond, body, (jnp.asarray(F + 1, J.dtype), jnp.zeros((), x.dtype), key))[1]

    def one(key, mean, sd):
        kx, kz, kj, ku, ka, ks = random.split(key, 6)
        d = mean.shape[0]
        x = mean + sd * gaussian_noise(kx, (d,), mean.dtype)
        z = mean + sd * gaussian_noise(kz, (d,), mean.dtype)
        u = 1.0 - random.uniform(ku, (), mean.dtype)  # in (0, 1]
        J = jnp.sum(jnp.log(u) <= log_inv_fact)  # P(J >= b) = 1/b!, and J <= MAX_TAYLOR_TERMS
        idx = random.randint(kj, (total,), 0, n, dtype=jnp.int32)
        diffs = f_many(z, idx) - f_many(x, idx)  # (total,)
        padded = jnp.where(table >= 0, diffs[jnp.maximum(table, 0)], 1.0)  # (F, F)
        terms = jnp.prod(padded, axis=1)  # term alpha = product of its alpha differences
        rho = 1.0 + jnp.sum(jnp.where(jnp.arange(1, F + 1) <= J, terms, 0.0)) + slow_terms(ks, x, z, J)
        accept = random.uniform(ka, (), mean.dtype) <= rho / 2.0
        return x, accept, (J * (J + 1)).astype(mean.dtype)

    def sample(key, y):
        mean, var = gaussian_part(y, eta, m, center)
        sd = jnp.sqrt(var)

        def propose_batch(k):
            return jax.vmap(one, in_axes=(0, None, None))(random.split(k, b), mean, sd)

        return _rejection_loop(key, propose_batch, y.shape[0], y.dtype)

    return RGO(eta, sample)


def linearised_rgo(example_fn: Callable, data, *, step_size: float,
                   strong_convexity: float, center=None, batch: int = 2) -> RGO:
    """Exact rejection oracle from the convex minorant of fbar at the Gaussian part's mean.

    :param example_fn: ``(x, row) -> f_row(x)`` (convex, including the inverse temperature);
        jax.grad of it must return a subgradient (true for max/abs/where-built losses).
    :param data: pytree of arrays with a leading axis of length n.

    Per proposal the acceptance log-probability is ``-mean_j [f_j(x) - f_j(w) - <g_j, x - w>]``
    where each bracket is >= 0 by convexity. Brackets within float64 rounding of 0 (relative
    1e-9 of the terms) are clipped at 0; a more negative one means the loss is not convex:
    it is counted in ``ProximalInfo.convexity_violations`` (never clipped silently).
    ``ProximalInfo.evaluations`` counts n evaluations per proposal plus 2 n for fbar(w) and
    its subgradient.
    """
    eta, m, b = _check_common(step_size, strong_convexity, batch)
    n = _num_rows(data)
    values = jax.vmap(example_fn, in_axes=(None, 0))
    grads = jax.vmap(jax.grad(example_fn), in_axes=(None, 0))

    def sample(key, y):
        w, var = gaussian_part(y, eta, m, center)
        sd = jnp.sqrt(var)
        fw = values(w, data)  # (n,)
        gw = grads(w, data)  # (n, d)
        gbar = jnp.mean(gw, axis=0)
        shift = w - var * gbar  # proposal mean: G_y tilted by exp(-<gbar, x>)

        def one(k):
            k1, k2 = random.split(k)
            x = shift + sd * gaussian_noise(k1, y.shape, y.dtype)
            fx, lin = values(x, data), gw @ (x - w)
            raw = fx - fw - lin
            tol = 1e-9 * (1.0 + jnp.abs(fx) + jnp.abs(fw) + jnp.abs(lin))
            gap = jnp.mean(jnp.maximum(raw, 0.0))
            accept = jnp.log(random.uniform(k2, (), y.dtype)) <= -gap
            return x, accept, jnp.asarray(n, y.dtype), jnp.any(raw < -tol)

        def propose_batch(k):
            return jax.vmap(one)(random.split(k, b))

        x, info = _rejection_loop(key, propose_batch, y.shape[0], y.dtype)
        return x, info._replace(evaluations=info.evaluations + 2 * n)

    return RGO(eta, sample)


def init(position, rng_key=None) -> ProximalState:
    """Initial state at a flat ``position`` chosen without looking at private data."""
    x = jnp.asarray(position)
    if x.ndim != 1:
        raise ValueError(f"position must be a flat 1-D array, got shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return ProximalState(jnp.zeros((), jnp.int32), x, rng_key)


def build_kernel(rgo: RGO) -> Callable:
    """``step(rng_key, state) -> (state, info)``: forward Gaussian step, then the oracle."""
    if not isinstance(rgo, RGO):
        raise ValueError(f"rgo must be a dp_infer.kernels.proximal.RGO, got {type(rgo).__name__}")
    sqrt_eta = math.sqrt(rgo.step_size)

    def step(rng_key, state: ProximalState):
        k_fwd, k_rgo = random.split(rng_key)
        y = state.x + sqrt_eta * gaussian_noise(k_fwd, state.x.shape, state.x.dtype)
        x, info = rgo.sample(k_rgo, y)
        return ProximalState(state.i + 1, x, state.rng_key), info

    return step


def sample_chain(rng_key, rgo: RGO, x0, num_steps: int, *, keep: str = "last"):
    """Run ``num_steps`` proximal steps from ``x0`` with ``lax.scan``.

    ``keep="last"`` returns ``(last_state, info_totals)`` -- the only release the privacy
    analysis covers is the final position; ``keep="all"`` also returns the stacked positions
    (for tests of the chain's law; intermediate states are not covered by any guarantee).
    ``info_totals`` sums the NON-PRIVATE instrumentation over the steps.
    """
    num_steps = check_positive_int("num_steps", num_steps)
    if keep not in ("last", "all"):
        raise ValueError(f"keep must be 'last' or 'all', got {keep!r}")
    step = build_kernel(rgo)
    state = init(x0, rng_key)

    def body(carry, _):
        s, tot = carry
        next_key, k = random.split(s.rng_key)
        s, info = step(k, s._replace(rng_key=next_key))
        tot = ProximalInfo(tot.proposals + info.proposals, tot.evaluations + info.evaluations,
                           tot.convexity_violations + jnp.asarray(info.convexity_violations, jnp.int32))
        return (s, tot), (s.x if keep == "all" else None)

    zero = ProximalInfo(jnp.zeros((), jnp.int32), jnp.zeros((), state.x.dtype), jnp.zeros((), jnp.int32))
    (last, tot), xs = lax.scan(body, (state, zero), None, length=num_steps)
    if keep == "all":
        return last, tot, xs
    return last, tot
