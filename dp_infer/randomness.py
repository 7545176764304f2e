"""Secret randomness for private runs (DESIGN invariant 9).

The noise of a Langevin chain *is* the privacy mechanism: whoever can regenerate it can
subtract it from the released trajectory and read off the full-batch gradients. So no public
entry point has a fixed default seed. :func:`secret_key` returns a JAX key whose key material
comes from the operating system's entropy (:mod:`secrets`), at least 64 bits, unless the
caller passes a seed on purpose; the key material is never printed, exported, logged or
written to the ledger. What a report may say about the randomness is
:meth:`KeySource.describe` -- the source, the generator and the number of key bits, never the
key.

Key implementations (``impl``):

* ``"threefry2x32"`` (default): JAX's counter-based Threefry-2x32 generator; a 64-bit key.
* ``"rbg"``: JAX's ``RngBitGenerator``-based keys; 128 bits of key material (the
  "stronger-keyed" option).

Privacy noise (issue 40): every Gaussian draw that is part of a mechanism goes through
:func:`gaussian_noise`, not ``jax.random.normal``. JAX's float32 normal is
``sqrt(2) erfinv(u)`` of a uniform on a 2**-23 grid: it never exceeds 5.42 sds, and its top
values are 5.42, 5.17, 5.04, ... (a grid a quarter of an sd wide), so a neighbour's shifted
noise lands where the other run's sampler has no mass. :func:`gaussian_noise` inverts the
normal CDF at a uniform with full relative precision (a geometric binary exponent from 96
random bits and a full mantissa), so that

* the tail reaches :data:`NOISE_TAIL_SD` = 11.42 sds (the quantile at 2**-99), and the law
  differs from N(0, 1) by at most :data:`NOISE_TV_PER_DRAW` = 2**-97 in total variation per
  coordinate (the mass beyond the tail, moved into the last binade), apart from the grid;
* the grid is the working float's: relative spacing 2**-23 (float32) or 2**-52 (float64) of the
  uniform in every binade, so the noise sample is as fine as the float it is added to, in the
  centre as in the tail.

:func:`dp_infer.privacy.noise.noise_delta` turns the TV figure into the delta added to an
event. Remaining idealisations (stated in the threat-model page of the docs): neither
generator is a cryptographically secure PRNG (they are designed for statistical quality, not
against an adversary who sees outputs; the threat model argues why a secret OS-entropy key
suffices), and the chain's arithmetic is floating point, so the guarantee is for the
real-valued mechanism; floating-point attacks on the low bits of the sum are out of scope.
"""

from __future__ import annotations

import functools
import secrets
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import erfinv, ndtri

__all__ = ["KEY_IMPLS", "KeySource", "secret_key", "describe_seed", "check_seed", "gaussian_noise",
           "normal_from_bits", "NOISE_TAIL_SD", "NOISE_TV_PER_DRAW", "NOISE_EXPONENT_BITS", "JAX_FLOAT32_NORMAL_MAX"]

#: key implementation -> number of uint32 words of key material
KEY_IMPLS = {"threefry2x32": 2, "rbg": 4}

_REPRODUCIBLE_WARNING = (
    "the noise was generated from a seed given by the caller: it is reproducible by whoever "
    "holds that seed, and with it the released draws give back the gradients exactly. The "
    "guarantee holds only while the seed stays secret."
)


@dataclass(frozen=True)
class KeySource:
    """Where a run's key came from (safe to report: it never contains the key or the seed)."""

    source: str  # "os_entropy" or "user_seed"
    impl: str
    key_bits: int

    @property
    def reproducible(self) -> bool:
        """True when the caller chose the seed (anyone holding it can regenerate the noise)."""
        return self.source == "user_seed"

    def describe(self) -> dict:
        """The report entry for the run's randomness (no key material)."""
        d = {"source": ("operating-system entropy (secrets module)" if self.source == "os_entropy"
                        else "seed given by the caller"),
             "generator": self.impl, "key_bits": self.key_bits,
             "reproducible_by_seed_holder": self.reproducible}
        if self.reproducible:
            d["warning"] = _REPRODUCIBLE_WARNING
        return d


def _check_impl(impl: str) -> str:
    if impl not in KEY_IMPLS:
        raise ValueError(f"key_impl must be one of {tuple(KEY_IMPLS)}, got {impl!r}")
    return impl


def check_seed(seed, impl: str = "threefry2x32", *, seed_name: str = "seed", impl_name: str = "key_impl") -> None:
    """Refuse (one-line ``ValueError``) a ``key_impl`` that is not one of :data:`KEY_IMPLS`, or a
    ``seed`` that is not None or an integer in ``[0, 2**(32 words))``; makes no key (callers check
    before charging a ledger). ``seed_name`` / ``impl_name``: the parameters' names in the message
    (the CLI's ``--reproducible-seed`` / ``--key-impl``)."""
    if not isinstance(impl, str) or impl not in KEY_IMPLS:
        raise ValueError(f"{impl_name} must be one of {tuple(KEY_IMPLS)}, got {impl!r}")
    if seed is None:
        return
    bits = 32 * KEY_IMPLS[impl]
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{seed_name} must be None (secret, from the operating system) or an integer >= 0, "
                         f"got {seed!r}")
    if int(seed) >= 2 ** bits:
        raise ValueError(f"{seed_name} must lie in [0, 2**{bits}) for {impl_name}={impl!r}, got {seed!r}")


def secret_key(seed: int | None = None, *, impl: str = "threefry2x32") -> tuple[jax.Array, KeySource]:
    """A JAX key for a private run and a description of its source.

    ``seed=None`` (the default everywhere): fresh key material from :func:`secrets.randbits`,
    ``32 * words`` bits (64 for Threefry, 128 for ``"rbg"``). An integer ``seed`` >= 0 makes
    the run reproducible (tests, worked examples); the returned :class:`KeySource` says so and
    every report carries the warning. The key is a typed JAX key (``jax.random.key`` family).
    """
    impl = _check_impl(impl)
    words = KEY_IMPLS[impl]
    if seed is None:
        data = np.array([secrets.randbits(32) for _ in range(words)], dtype=np.uint32)
        return jax.random.wrap_key_data(data, impl=impl), KeySource("os_entropy", impl, 32 * words)
    check_seed(seed, impl)
    seed = int(seed)
    if impl == "threefry2x32":
        # the same key material as jax.random.PRNGKey(seed) for 64-bit seeds
        data = np.array([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], dtype=np.uint32)
    else:
        data = np.array([(seed >> (32 * (words - 1 - i))) & 0xFFFFFFFF for i in range(words)],
                        dtype=np.uint32)
    return jax.random.wrap_key_data(data, impl=impl), KeySource("user_seed", impl, 32 * words)


def describe_seed(seed: int | None, impl: str = "threefry2x32") -> dict:
    """The report entry for a run keyed by ``seed`` (None: secret), without making a key."""
    impl = _check_impl(impl)
    return KeySource("os_entropy" if seed is None else "user_seed", impl, 32 * KEY_IMPLS[impl]).describe()


# --------------------------------------------------------------------------------------------
# privacy noise
# --------------------------------------------------------------------------------------------

#: random bits behind the binary exponent of the uniform: P(all zero) = 2**-96
NOISE_EXPONENT_BITS = 96
#: the largest |z| :func:`gaussian_noise` can return: -Phi^{-1}(2**-99) (the smallest uniform
#: 2**-98, halved for the tail's two sides), about 11.4245 sds
NOISE_TAIL_SD = 11.424478
#: total variation between the law of one coordinate of :func:`gaussian_noise` (without its grid)
#: and N(0, 1): the mass of the uniform below 2**-98 (2**-98 on each branch) is moved into the
#: last binade
NOISE_TV_PER_DRAW = 2.0 ** -97
#: the largest |z| of ``jax.random.normal`` in float32 (sqrt(2) erfinv(1 - 2**-23)), for the
#: record: the draw this module replaces
JAX_FLOAT32_NORMAL_MAX = 5.419983


def _noise_dtype(dtype) -> tuple[np.dtype, np.dtype]:
    """(the dtype computed in, the dtype returned): float64 only where JAX has x64 enabled."""
    out = jax.dtypes.canonicalize_dtype(jnp.float32 if dtype is None else dtype)
    if not jnp.issubdtype(out, jnp.floating):
        raise ValueError(f"gaussian_noise needs a floating dtype, got {dtype!r}")
    work = np.dtype(np.float64) if out == np.float64 else np.dtype(np.float32)
    return work, np.dtype(out)


def gaussian_noise(key, shape=(), dtype=None) -> jax.Array:
    """Standard normal privacy noise of ``shape`` and ``dtype`` (default float32) from ``key``.

    The same key gives the same noise (a pure function of the key, jit- and vmap-able); distinct
    keys give independent noise. Each coordinate is ``Z = s |Z|`` with a random sign ``s`` and
    ``|Z| = F^{-1}(V)`` for ``V`` uniform on (0, 1), ``F`` the CDF of ``|Z|``:

    * ``V = U`` (the centre, ``|Z| < 0.674``): ``|Z| = sqrt(2) erfinv(U)``;
    * ``V = 1 - U`` (the tail): ``|Z| = -ndtri(U / 2)``;

    with ``U`` uniform on (0, 1/2) drawn with full relative precision: its binary exponent is the
    number of leading zeros of 96 random bits (a geometric law, capped at 96), its mantissa the
    working float's (23 bits in float32, 52 in float64). Near 0 and far in the tail the uniform
    is as fine, relative to its size, as anywhere else, which is what ``jax.random.normal`` (a
    uniform on an absolute 2**-23 grid) is not. The tail reaches :data:`NOISE_TAIL_SD`; the law
    differs from N(0, 1) by at most :data:`NOISE_TV_PER_DRAW` in total variation per coordinate,
    besides the grid. float32: 4 uint32 words per coordinate (``jax.random.normal``: 1); float64
    (under ``jax_enable_x64``): 3 uint64 words. float16 / bfloat16 are computed in float32 and
    rounded.
    """
    work, out = _noise_dtype(dtype)
    shape = tuple(int(s) for s in np.atleast_1d(np.asarray(shape, dtype=np.int64)).tolist()) \
        if not isinstance(shape, tuple) else tuple(int(s) for s in shape)
    return _gaussian_noise_compiled(key, shape, work, out)


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _gaussian_noise_compiled(key, shape: tuple, work: np.dtype, out: np.dtype) -> jax.Array:
    """:func:`gaussian_noise`'s draw as one compiled program per (shape, dtype): called eagerly (a
    release, an audit's loop) it ran op by op, ~20 ms a draw on a CPU; inside a traced kernel it is
    inlined as before."""
    if work == np.float64:
        bits = jax.random.bits(key, (3,) + shape, jnp.uint64)
    else:
        bits = jax.random.bits(key, (4,) + shape, jnp.uint32)
    return normal_from_bits(bits).astype(out)


def normal_from_bits(bits) -> jax.Array:
    """The transform behind :func:`gaussian_noise`, exposed so that its extremes can be checked.

    ``bits``: uint32 of shape ``(4, ...)`` (float32: words 0-2 the exponent's 96 bits, word 3 the
    sign in bit 0, the branch in bit 1 (1: the centre), the 23-bit mantissa in bits 9-31) or uint64
    of shape ``(3, ...)`` (float64: word 0 and the top 32 bits of word 1 the exponent's 96 bits,
    word 2 the sign in bit 0, the branch in bit 1, the 52-bit mantissa in bits 2-53)."""
    bits = jnp.asarray(bits)
    if bits.dtype == jnp.uint64:
        work = np.dtype(np.float64)
        w0, w1 = bits[0], bits[1]
        lead = jnp.where(w0 != 0, lax.clz(w0).astype(jnp.int32),
                         64 + jnp.minimum(lax.clz(w1).astype(jnp.int32), 32))  # 0..96
        word, mant_bits = bits[2], 52
        mant = (word >> 2) & ((1 << mant_bits) - 1)
    elif bits.dtype == jnp.uint32:
        work = np.dtype(np.float32)
        w0, w1, w2, word = bits[0], bits[1], bits[2], bits[3]
        lead = jnp.where(w0 != 0, lax.clz(w0).astype(jnp.int32),
                         jnp.where(w1 != 0, 32 + lax.clz(w1).astype(jnp.int32),
                                   64 + lax.clz(w2).astype(jnp.int32)))  # 0..96
        mant_bits = 23
        mant = word >> 9
    else:
        raise ValueError(f"normal_from_bits takes uint32 (float32) or uint64 (float64) words, got {bits.dtype}")
    sign = (word & 1).astype(bool)
    centre = ((word >> 1) & 1).astype(bool)
    # U in [2**-(lead+2), 2**-(lead+1)): uniform on (0, 1/2) at the mantissa's relative grid
    frac = 1.0 + mant.astype(work) * work.type(2.0 ** -mant_bits)
    u = jnp.ldexp(frac, -(lead + 2))
    absz = jnp.where(centre, work.type(np.sqrt(2.0)) * erfinv(u), -ndtri(0.5 * u))
    return jnp.where(sign, -absz, absz)
