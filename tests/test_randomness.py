"""Oracle tests for dp_infer.randomness.

Oracles: the key material of a caller's seed is the seed's own big-endian 32-bit words
(``int.to_bytes``, independent of the shifts and masks of the module) and, for Threefry seeds
below 2**32, JAX's own ``jax.random.PRNGKey``; the range of admissible seeds is checked at both
ends; the report entry of a run is the same whether it is built from the key (``secret_key``) or
from the seed alone (``describe_seed``, used by the estimators), and it says "reproducible" with
its warning exactly when the caller chose the seed.
"""

import jax
import numpy as np
import pytest

from dp_infer import randomness as R

SEEDS_64 = [0, 1, 12345, 2**32 - 1, 2**32, 2**32 + 7, 0x0123456789ABCDEF, 0xFEDCBA9876543210, 2**64 - 1]
SEEDS_128 = SEEDS_64 + [2**64, 0x0123456789ABCDEF_FEDCBA9876543210, 2**127 + 3, 2**128 - 1]


def _words(seed: int, n_words: int) -> np.ndarray:
    """The seed as n_words big-endian uint32 words (the documented key material)."""
    return np.frombuffer(seed.to_bytes(4 * n_words, "big"), dtype=">u4").astype(np.uint32)


@pytest.mark.parametrize("seed", SEEDS_64)
def test_threefry_key_material_is_the_seeds_big_endian_words(seed):
    key, src = R.secret_key(seed)
    data = np.asarray(jax.random.key_data(key))
    assert data.dtype == np.uint32
    np.testing.assert_array_equal(data, _words(seed, 2))
    assert (src.source, src.impl, src.key_bits, src.reproducible) == ("user_seed", "threefry2x32", 64, True)
    if seed < 2**32:  # the same key as JAX's own PRNGKey (64-bit seeds need x64 in JAX)
        np.testing.assert_array_equal(data, np.asarray(jax.random.key_data(jax.random.PRNGKey(seed))))
    # numpy integers are seeds too
    np.testing.assert_array_equal(np.asarray(jax.random.key_data(R.secret_key(np.uint64(seed))[0])), data)


@pytest.mark.parametrize("seed", SEEDS_128)
def test_rbg_key_material_is_the_seeds_big_endian_words(seed):
    key, src = R.secret_key(seed, impl="rbg")
    data = np.asarray(jax.random.key_data(key))
    assert data.dtype == np.uint32
    np.testing.assert_array_equal(data, _words(seed, 4))
    assert (src.source, src.impl, src.key_bits, src.reproducible) == ("user_seed", "rbg", 128, True)


def test_distinct_seeds_give_distinct_keys():
    for impl, seeds in (("threefry2x32", SEEDS_64), ("rbg", SEEDS_128)):
        datas = {tuple(np.asarray(jax.random.key_data(R.secret_key(s, impl=impl)[0])).tolist()) for s in seeds}
        assert len(datas) == len(seeds), impl


@pytest.mark.parametrize("impl, bits", [("threefry2x32", 64), ("rbg", 128)])
def test_seed_range_is_exactly_zero_to_two_to_the_key_bits(impl, bits):
    R.secret_key(2**bits - 1, impl=impl)  # the largest seed is accepted
    with pytest.raises(ValueError, match=rf"seed must lie in \[0, 2\*\*{bits}\) for key_impl='{impl}'"):
        R.secret_key(2**bits, impl=impl)
    with pytest.raises(ValueError, match=r"seed must lie in"):
        R.secret_key(2**(bits + 1) + 5, impl=impl)


@pytest.mark.parametrize("bad", [-1, -(2**40), True, False, 3.0, "3", 1.5])
def test_seeds_that_are_not_non_negative_integers_are_refused(bad):
    with pytest.raises(ValueError, match=r"seed must be None \(secret, from the operating system\) or an integer >= 0"):
        R.secret_key(bad)


def test_os_entropy_key_uses_32_bit_words_from_secrets(monkeypatch):
    for impl, n in (("threefry2x32", 2), ("rbg", 4)):
        planted = [0x5EC12E7A, 0x0BADCAFE, 0xDEADBEEF, 0x01234567][:n]
        calls = []

        def randbits(k, it=iter(planted)):
            calls.append(k)
            return next(it)

        monkeypatch.setattr(R.secrets, "randbits", randbits)
        key, src = R.secret_key(impl=impl)
        assert calls == [32] * n
        np.testing.assert_array_equal(np.asarray(jax.random.key_data(key)), np.asarray(planted, dtype=np.uint32))
        assert (src.source, src.impl, src.key_bits, src.reproducible) == ("os_entropy", impl, 32 * n, False)
        d = src.describe()
        assert d == {"source": "operating-system entropy (secrets module)", "generator": impl,
                     "key_bits": 32 * n, "reproducible_by_seed_holder": False}


def test_report_entry_says_reproducible_with_its_warning_exactly_for_a_callers_seed():
    secret = R.secret_key()[1].describe()
    assert set(secret) == {"source", "generator", "key_bits", "reproducible_by_seed_holder"}
    assert secret["reproducible_by_seed_holder"] is False and "warning" not in secret
    assert "operating-system entropy" in secret["source"]
    seeded = R.secret_key(7)[1].describe()
    assert set(seeded) == {"source", "generator", "key_bits", "reproducible_by_seed_holder", "warning"}
    assert seeded["reproducible_by_seed_holder"] is True
    assert seeded["source"] == "seed given by the caller"
    assert seeded["warning"] == R._REPRODUCIBLE_WARNING and "only while the seed stays secret" in seeded["warning"]
    for d in (secret, seeded):
        assert d["generator"] == "threefry2x32" and d["key_bits"] == 64


@pytest.mark.parametrize("seed", [None, 0, 7, 2**64 - 1])
@pytest.mark.parametrize("impl", [None, "threefry2x32", "rbg"])
def test_describe_seed_is_the_report_of_the_key_the_seed_makes(seed, impl):
    kw = {} if impl is None else {"impl": impl}
    expected = R.secret_key(seed, **kw)[1].describe()
    assert R.describe_seed(seed, **kw) == expected
    assert R.describe_seed(seed, **kw)["key_bits"] == (128 if impl == "rbg" else 64)
    assert R.describe_seed(seed, **kw)["reproducible_by_seed_holder"] is (seed is not None)


def test_describe_seed_refuses_an_unknown_generator():
    with pytest.raises(ValueError, match="key_impl must be one of"):
        R.describe_seed(None, impl="md5")
    with pytest.raises(ValueError, match="key_impl must be one of"):
        R.describe_seed(3, "philox")
