"""The quantizers against a numpy re-implementation of DeepGEMM's deep_gemm/utils/math.py."""
import numpy as np
import pytest

import hfp4
import dg_math_ref as R


def _inputs(seed, m, k):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32)
    x *= np.exp2(rng.integers(-8, 8, size=(m, 1))).astype(np.float32)  # rows of different magnitude
    x[0, : min(k, 40)] = 0  # an all-zero tile (amax clamps to 1e-4)
    return x


SHAPES = [(1, 32), (5, 200), (7, 256), (3, 130), (130, 300)]


@pytest.mark.parametrize("m,k", SHAPES)
@pytest.mark.parametrize("gran_k", [32, 128])
@pytest.mark.parametrize("use_ue8m0,packed", [(False, False), (True, False), (True, True)])
def test_per_token_cast_to_fp8(m, k, gran_k, use_ue8m0, packed):
    x = _inputs(m * 1000 + k, m, k)
    q, sf = hfp4.per_token_cast_to_fp8(x, use_ue8m0, gran_k, packed)
    rq, rsf = R.per_token_cast_to_fp8(x, use_ue8m0, gran_k, packed)
    assert q.dtype == np.uint8 and q.shape == (m, k)
    assert sf.dtype == (np.int32 if packed else np.float32) and sf.shape == rsf.shape
    assert (q == rq).all()
    assert (sf.view(np.uint32) == rsf.view(np.uint32)).all()


@pytest.mark.parametrize("m,k", SHAPES)
@pytest.mark.parametrize("use_ue8m0,packed", [(False, False), (True, False), (True, True)])
def test_per_token_cast_to_fp4(m, k, use_ue8m0, packed):
    x = _inputs(m * 7 + k, m, k)
    q, sf = hfp4.per_token_cast_to_fp4(x, use_ue8m0, 32, packed)
    rq, rsf = R.per_token_cast_to_fp4(x, use_ue8m0, 32, packed)
    assert q.dtype == np.uint8 and q.shape == (m, k // 2)
    assert (q == rq).all()
    assert (sf.view(np.uint32) == rsf.view(np.uint32)).all()


@pytest.mark.parametrize("m,k", [(1, 1), (100, 200), (129, 257), (256, 128)])
@pytest.mark.parametrize("use_ue8m0", [False, True])
def test_per_block_cast_to_fp8(m, k, use_ue8m0):
    x = _inputs(m + k, m, k)
    q, sf = hfp4.per_block_cast_to_fp8(x, use_ue8m0)
    rq, rsf = R.per_block_cast_to_fp8(x, use_ue8m0)
    assert q.shape == (m, k) and sf.shape == (R.ceil_div(m, 128), R.ceil_div(k, 128))
    assert (q == rq).all()
    assert (sf.view(np.uint32) == rsf.view(np.uint32)).all()


def test_bf16_input_and_ue8m0_bytes():
    x = _inputs(5, 6, 160)
    xb = hfp4.bf16_encode(x)                  # uint16 bit patterns
    xf = R.bf16_bits_to_float(xb)             # their exact float32 values
    q, sf = hfp4.per_token_cast_to_fp8(xb, True, 32, ue8m0_bytes=True)
    rq, rsf = R.per_token_cast_to_fp8(xf, True, 32)
    assert (q == rq).all() and sf.dtype == np.uint8 and (sf == R.ue8m0_bytes(rsf)).all()
    q4, sf4 = hfp4.per_token_cast_to_fp4(xb, True, ue8m0_bytes=True)
    rq4, rsf4 = R.per_token_cast_to_fp4(xf, True)
    assert (q4 == rq4).all() and (sf4 == R.ue8m0_bytes(rsf4)).all()


def test_strided_and_float64_inputs():
    x = _inputs(9, 8, 512)
    q1, s1 = hfp4.per_token_cast_to_fp8(x[:, 128:384], False)          # row stride 512 elements
    q2, s2 = hfp4.per_token_cast_to_fp8(np.ascontiguousarray(x[:, 128:384]), False)
    assert (q1 == q2).all() and (s1 == s2).all()
    q3, s3 = hfp4.per_token_cast_to_fp8(x[::2, ::2], False)            # non-unit inner stride: copied
    q4, s4 = hfp4.per_token_cast_to_fp8(np.ascontiguousarray(x[::2, ::2]), False)
    assert (q3 == q4).all() and (s3 == s4).all()
    q5, _ = hfp4.per_token_cast_to_fp8(x.astype(np.float64), False)     # converted to float32
    q6, _ = hfp4.per_token_cast_to_fp8(x, False)
    assert (q5 == q6).all()


def test_quantizer_errors_name_the_argument():
    with pytest.raises(hfp4.InvalidArgument) as ei:
        hfp4.per_token_cast_to_fp4(np.zeros((2, 33), np.float32), True)
    assert "k = 33" in str(ei.value) and "Assertion" in str(ei.value)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        hfp4.per_token_cast_to_fp8(np.zeros((2, 64), np.float32), True, gran_k=64)
    assert "gran_k = 64" in str(ei.value)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        hfp4.per_token_cast_to_fp8(np.zeros((2, 64), np.float32), False, use_packed_ue8m0=True)
    assert "use_ue8m0" in str(ei.value)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        hfp4.per_block_cast_to_fp8(np.zeros((2, 64), np.float32), True, gran_k=64)
    assert "gran_mn = 64" in str(ei.value)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        hfp4.per_token_cast_to_fp4(np.zeros((2, 64), np.float32), True, gran_k=128)
    assert "gran_k = 128" in str(ei.value)
    with pytest.raises(hfp4.InvalidArgument):
        hfp4.per_token_cast_to_fp8(np.zeros(64, np.float32), True)
