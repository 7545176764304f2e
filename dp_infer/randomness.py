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

Remaining idealisations (stated in the threat-model page of the docs): neither generator is a
cryptographically secure PRNG (they are designed for statistical quality, not against an
adversary who sees outputs), and the Gaussian noise is float32, so the guarantee is for ideal
real-valued Gaussian noise; floating-point attacks on the noise's low bits are out of scope.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import jax
import numpy as np

__all__ = ["KEY_IMPLS", "KeySource", "secret_key", "describe_seed", "check_seed"]

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
