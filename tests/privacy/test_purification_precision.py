"""Purification's Laplace noise in float64 and its key from a Generator (issue 30, finding 10).

* The noise is drawn in float64 (inside ``jax.enable_x64(True)``): Laplace noise drawn in float32
  and added to float64 draws has float32 resolution (24 bits), the regime of floating-point attacks
  on the Laplace mechanism (Mironov 2012). The equivalent.toml entry for ``enable_x64(None)`` had
  claimed the dtype arguments keep float64; they do not (without x64, ``dtype=jnp.float64`` gives
  float32). Oracle: the noise (output - draw) / scale of the draws the coin kept, measured against
  its own float32 rounding: float64 noise differs from it by ~1e-8 relative in nearly every draw,
  float32 noise by the rounding of one addition (< 1e-12 relative) in every draw.
* A numpy Generator gives its next 64 raw bits as the key words (documented: "a Generator gets 64
  bits of key material directly"). Oracle: the Generator's bit generator's raw stream (PCG64:
  ``integers(0, 2**32, dtype=uint32)`` takes the low then the high half of one raw 64-bit draw),
  also for a PCG64 state crafted so that its next raw draw is 0 (the LCG step inverted: the
  output permutation XSL-RR of a state whose two halves are equal is 0). A draw from [1, 2**32)
  (the equivalent.toml entry had called it equivalent) agrees with the raw words except there.
"""

import jax
import numpy as np

from dp_infer.domains import L2Ball
from dp_infer.privacy import purification as purif


def test_the_laplace_noise_has_float64_resolution():
    dom = L2Ball(dim=3, radius=1.0)
    params = purif.purification_parameters(dom, 1.0, 0.01, delta=1e-30)
    x = np.zeros((400, 3))  # the centre: out = 0 + b L exactly, so (out - x) / b is L up to one division
    out = purif.purify(np.random.default_rng(7), x, params, dom)
    kept = ~np.any(np.abs(out - x) > 50 * params.laplace_scale, axis=1)  # coin -> uniform draws are rare
    assert np.mean(kept) > 0.95
    noise = ((out - x) / params.laplace_scale)[kept].ravel()
    assert noise.size > 1000
    rel = np.abs(noise - noise.astype(np.float32).astype(np.float64)) / np.abs(noise)
    # float64 noise: |z - f32(z)| / |z| is spread over [0, 6e-8] (< 1e-12 for ~2e-5 of the draws);
    # float32 noise: z is a float32 up to one division by b, |z - f32(z)| / |z| < 3e-16 for every draw
    assert np.mean(rel > 1e-12) > 0.99, np.mean(rel > 1e-12)


def test_a_generator_gives_its_next_64_raw_bits_as_the_key():
    for seed in (0, 1, 12345):
        raw = int(np.random.Generator(np.random.PCG64(seed)).bit_generator.random_raw())
        want = np.array([raw & 0xFFFFFFFF, raw >> 32], dtype=np.uint32)
        key = purif._as_jax_key(np.random.Generator(np.random.PCG64(seed)))
        np.testing.assert_array_equal(np.asarray(jax.random.key_data(key)), want)


PCG64_MULT = 0x2360ED051FC65DA44385DF649FCCF645  # PCG's default 128-bit LCG multiplier (numpy's PCG64)


def _pcg64_whose_next_raw_draw_is_zero(seed):
    bg = np.random.PCG64(seed)
    st = bg.state
    inc = st["state"]["inc"]
    target = (0x0123456789ABCDEF << 64) | 0x0123456789ABCDEF  # equal halves: XSL-RR output 0
    st["state"]["state"] = ((target - inc) * pow(PCG64_MULT, -1, 2**128)) % 2**128
    st["has_uint32"], st["uinteger"] = 0, 0
    bg.state = st
    return bg


def test_a_generator_whose_next_raw_draw_is_zero_gives_zero_key_words():
    check = _pcg64_whose_next_raw_draw_is_zero(3)
    assert check.random_raw() == 0  # the crafted state is what it should be (oracle for the oracle)
    key = purif._as_jax_key(np.random.Generator(_pcg64_whose_next_raw_draw_is_zero(3)))
    np.testing.assert_array_equal(np.asarray(jax.random.key_data(key)), np.zeros(2, np.uint32))


def test_draws_given_as_fractions_are_the_reals_they_denote():
    """x_apx is any array of real numbers: Fractions are the floats they denote (exactly
    representable here), so the same key gives the same purified output."""
    from fractions import Fraction

    dom = L2Ball(dim=2, radius=1.0)
    params = purif.purification_parameters(dom, 1.0, 0.5, delta=1e-10)
    want = purif.purify(5, np.array([[0.5, -0.25]]), params, dom)
    got = purif.purify(5, [[Fraction(1, 2), Fraction(-1, 4)]], params, dom)
    assert got.dtype == np.float64 and got.tolist() == want.tolist()
