"""Codecs: exhaustive over the FP4 and FP8 codes against the hand formulas of docs/FORMATS.md."""
import numpy as np
import pytest

import hfp4
import dg_math_ref as R


def test_fp4_decode_all_codes():
    codes = np.arange(16, dtype=np.uint8)
    got = hfp4.fp4_decode(codes)
    assert got.dtype == np.float32
    assert got.tolist() == [R.fp4_value(c) for c in range(16)]
    assert got.tolist() == [0, .5, 1, 1.5, 2, 3, 4, 6, 0, -.5, -1, -1.5, -2, -3, -4, -6]
    assert not np.signbit(got[8])  # 0x8 (-0) decodes to +0
    assert (hfp4.fp4_decode(codes | 0xF0) == got).all()  # only the low nibble counts


def test_fp4_encode_roundtrip_and_ties():
    codes = np.arange(16, dtype=np.uint8)
    back = hfp4.fp4_encode(hfp4.fp4_decode(codes))
    assert back.tolist() == [c if c != 8 else 0 for c in range(16)]
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32)
    assert hfp4.fp4_encode(ties).tolist() == [0, 1, 2, 3, 4, 5, 6]      # ties go to the smaller magnitude
    above = np.nextafter(ties, np.float32(np.inf))
    assert hfp4.fp4_encode(above).tolist() == [1, 2, 3, 4, 5, 6, 7]     # just above rounds up
    assert hfp4.fp4_encode(-ties).tolist() == [0, 9, 10, 11, 12, 13, 14]
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e30, -0.0, -1e-30, -0.25], np.float32)
    assert hfp4.fp4_encode(special).tolist() == [0, 0, 7, 15, 7, 0, 0, 0]


def test_fp4_encode_matches_reference_on_a_dense_grid():
    x = np.linspace(-7, 7, 20001, dtype=np.float32)
    x = np.concatenate([x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))])
    assert (hfp4.fp4_encode(x) == R.fp4_encode(x)).all()


def test_fp4_pack_unpack():
    codes = np.random.default_rng(0).integers(0, 16, size=(3, 10), dtype=np.uint8)
    packed = hfp4.fp4_pack(codes)
    assert packed.shape == (3, 5)
    assert (packed == (codes[:, 0::2] | (codes[:, 1::2] << 4))).all()  # even index in the low nibble
    assert (hfp4.fp4_unpack(packed) == codes).all()
    assert (hfp4.fp4_unpack(packed.view(np.int8)) == codes).all()
    with pytest.raises(hfp4.InvalidArgument):
        hfp4.fp4_pack(codes[:, :3])


def test_fp8_decode_all_bytes():
    b = np.arange(256, dtype=np.uint8)
    got = hfp4.fp8_decode(b).astype(np.float64)
    want = np.array([R.fp8_value(i) for i in range(256)])
    nan = np.isnan(want)
    assert nan.nonzero()[0].tolist() == [0x7F, 0xFF]
    assert np.isnan(got[nan]).all()
    assert (got[~nan] == want[~nan]).all()
    assert np.signbit(got[0x80]) and got[0x80] == 0
    assert got[0x01] == 2.0 ** -9 and got[0x08] == 2.0 ** -6 and got[0x38] == 1 and got[0x7E] == 448


def test_fp8_encode_all_values_and_midpoints():
    b = np.array([i for i in range(256) if i not in (0x7F, 0xFF)], dtype=np.uint8)
    vals = hfp4.fp8_decode(b)
    assert (hfp4.fp8_encode(vals) == b).all()  # every non-NaN byte round-trips (0x80 included)
    pos = np.array([R.fp8_value(i) for i in range(127)])
    mid = ((pos[:-1] + pos[1:]) / 2).astype(np.float32)  # exact in float32
    assert (mid.astype(np.float64) == (pos[:-1] + pos[1:]) / 2).all()
    want = np.array([i if i % 2 == 0 else i + 1 for i in range(126)], dtype=np.uint8)  # ties to even
    assert (hfp4.fp8_encode(mid) == want).all()
    assert (hfp4.fp8_encode(-mid) == (want | 0x80)).all()
    up, down = np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))
    assert (hfp4.fp8_encode(up) == np.arange(1, 127)).all()
    assert (hfp4.fp8_encode(down) == np.arange(0, 126)).all()
    special = np.array([np.nan, np.inf, -np.inf, 464, 480, 1e9, -1e9, -0.0, -2.0 ** -10, 2.0 ** -10], np.float32)
    assert hfp4.fp8_encode(special).tolist() == [0x7F, 0x7E, 0xFE, 0x7E, 0x7E, 0x7E, 0xFE, 0x80, 0x80, 0x00]


def test_fp8_encode_matches_reference_on_random_floats():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(20000) * np.exp2(rng.integers(-14, 10, 20000))).astype(np.float32)
    assert (hfp4.fp8_encode(x) == R.fp8_encode(x)).all()


def test_ue8m0():
    e = np.arange(256, dtype=np.uint8)
    got = hfp4.ue8m0_decode(e)
    assert np.isnan(got[255])
    assert (got[:255].astype(np.float64) == np.ldexp(1.0, np.arange(255) - 127)).all()
    assert got[0] > 0  # 2^-127, a float subnormal, not zero
    assert (hfp4.ue8m0_from_float(got[:255]) == e[:255]).all()
    with pytest.raises(hfp4.InvalidArgument) as ei:
        hfp4.ue8m0_from_float(np.array([1.0, 0.5, 3.0], np.float32))
    assert "x[2]" in str(ei.value) and "power of two" in str(ei.value)


def test_ceil_to_ue8m0():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(5000) * np.exp2(rng.integers(-130, 126, 5000))).astype(np.float32)
    x = np.concatenate([x, np.float32([0, -0.0, 1, 0.3, 3, 2.0 ** 127, np.inf, np.nan, 1e-45])])
    got = hfp4.ceil_to_ue8m0(x)
    assert (got.view(np.int32) == R.ceil_to_ue8m0(x).view(np.int32)).all()
    assert hfp4.ceil_to_ue8m0(np.float32([0.3, 3.0, 4.0])).tolist() == [0.5, 4.0, 4.0]


def test_bf16():
    rng = np.random.default_rng(3)
    u = rng.integers(0, 2 ** 32, 50000, dtype=np.uint64).astype(np.uint32)
    x = u.view(np.float32)
    got = hfp4.bf16_encode(x)
    finite_or_inf = ~np.isnan(x)
    want = ((u.astype(np.uint64) + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    assert (got[finite_or_inf] == want[finite_or_inf]).all()
    nan_out = got[~finite_or_inf]
    assert ((nan_out & 0x7F80) == 0x7F80).all() and ((nan_out & 0x0040) != 0).all()  # quiet NaN
    assert (((nan_out >> 15) & 1) == ((u[~finite_or_inf] >> 31) & 1)).all()            # sign kept
    bits = np.arange(65536, dtype=np.uint16)
    dec = hfp4.bf16_decode(bits)
    non_nan = ~np.isnan(dec)
    assert non_nan.sum() == 65536 - 2 * 127
    assert (dec.view(np.uint32)[non_nan] == bits.astype(np.uint32)[non_nan] << 16).all()
    # NaNs keep sign and payload; signaling ones come back quiet (they cross a Python float)
    assert (dec.view(np.uint32)[~non_nan] == (bits.astype(np.uint32)[~non_nan] << 16) | 0x00400000).all()
    assert (hfp4.bf16_encode(dec[non_nan]) == bits[non_nan]).all()


def test_decoders_reject_codes_out_of_range():
    # a code outside its width is a caller's bug: named, not masked (a fuzzing review)
    for fn, bad, text in [(hfp4.fp4_decode, [3, 300], "code[1] = 300"), (hfp4.fp8_decode, [256], "code[0] = 256"),
                          (hfp4.ue8m0_decode, [[1, -1]], "code[0, 1] = -1"),
                          (hfp4.bf16_decode, np.array([70000]), "code[0] = 70000")]:
        with pytest.raises(hfp4.InvalidArgument) as ei:
            fn(bad)
        assert text in str(ei.value)
    assert hfp4.fp8_decode(np.array([255], dtype=np.uint8))[0] != hfp4.fp8_decode(np.array([255], dtype=np.uint8))[0]
    # 1- and 2-byte signed views of the same bits are bytes / bit patterns, not negative codes
    assert (hfp4.fp4_unpack(np.array([-1], dtype=np.int8)) == [15, 15]).all()
    assert hfp4.bf16_decode(np.array([-16512], dtype=np.int16))[0] == -1.0  # 0xBF80
