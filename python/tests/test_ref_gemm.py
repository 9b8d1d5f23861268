"""hfp4_ref_gemm through the numpy layer against a float64 product of the dequantized operands, for
every grouping; the SM90 repack round trip; error mapping."""
import numpy as np
import pytest

import hfp4
import dg_math_ref as R

BF16_POISON = 0xFFFF  # a NaN pattern: rows the GEMM must not touch keep it


def _acts(rng, shape, gran_k, use_ue8m0=True, packed=False):
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1, shape[-1])
    q, sf = hfp4.per_token_cast_to_fp8(flat, use_ue8m0, gran_k, packed)
    return q.reshape(shape), sf.reshape(shape[:-1] + sf.shape[-1:])


def _weights(rng, groups, n, k, use_ue8m0=True, packed=False, ue8m0_bytes=False):
    w = (rng.standard_normal((groups * n, k)) * 0.05).astype(np.float32)
    w *= np.exp2(rng.integers(-3, 3, size=(groups * n, 1))).astype(np.float32)
    q, sf = hfp4.per_token_cast_to_fp4(w, use_ue8m0, 32, packed, ue8m0_bytes=ue8m0_bytes)
    return q.reshape(groups, n, k // 2), sf.reshape(groups, n, sf.shape[-1])


def _exact_bf16(ref64):
    return R.round_significand(ref64, 8)


def _check_exact(out, ref64, rows):
    """out rows `rows` equal ref64 rounded once (exact sums: power-of-two scales)."""
    if out.dtype == np.float32:
        assert (out[rows] == ref64[rows].astype(np.float32)).all()
    else:
        assert (R.bf16_bits_to_float(out[rows]).astype(np.float64) == _exact_bf16(ref64[rows])).all()


@pytest.mark.parametrize("gran_k", [32, 128])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("out_dtype", ["bf16", "fp32"])
def test_dense_exact(gran_k, packed, out_dtype):
    rng = np.random.default_rng(gran_k + packed)
    m, n, k = 37, 96, 256
    a, sfa = _acts(rng, (m, k), gran_k, True, packed)
    b, sfb = _weights(rng, 1, n, k, True, packed)
    b, sfb = b[0], sfb[0]
    out = hfp4.ref_gemm((a, sfa), (b, sfb), out_dtype=out_dtype, a_gran_k=gran_k)
    ref = R.dequant_fp8(a, sfa, gran_k) @ R.dequant_fp4(b, sfb).T
    assert out.shape == (m, n)
    _check_exact(out, ref, slice(None))


def test_dense_fp32_scales_and_accumulate():
    rng = np.random.default_rng(7)
    m, n, k = 20, 40, 192
    a, sfa = _acts(rng, (m, k), 128, use_ue8m0=False)
    b, sfb = _weights(rng, 1, n, k, use_ue8m0=False)
    b, sfb = b[0], sfb[0]
    c = rng.standard_normal((m, n)).astype(np.float32)
    out = hfp4.ref_gemm((a, sfa), (b, sfb), c=c, out_dtype="fp32")
    terms = R.dequant_fp8(a, sfa, 128)[:, None, :] * R.dequant_fp4(b, sfb)[None, :, :]
    ref = terms.sum(-1) + c
    bound = 2.0 ** -24 * np.abs(ref) + 1e-12 * (np.abs(terms).sum(-1) + np.abs(c))
    assert (np.abs(out - ref) <= bound).all()
    # c given with a different layout than D: copied into D first
    c_t = np.asfortranarray(c)
    out2 = hfp4.ref_gemm((a, sfa), (b, sfb), c=c_t, out_dtype="fp32")
    assert (out2 == out).all()


def test_bf16_activations_and_fp8_weights():
    rng = np.random.default_rng(8)
    m, n, k = 9, 256, 256
    a = hfp4.bf16_encode(rng.standard_normal((m, k)).astype(np.float32))
    w = rng.standard_normal((n, k)).astype(np.float32)
    for gran_mn in (128, 1):
        if gran_mn == 128:
            bq, bsf = hfp4.per_block_cast_to_fp8(w, True)
            wd = R.dequant_fp8(bq, np.repeat(bsf, 128, axis=0)[:n], 128)
        else:
            bq, bsf = hfp4.per_token_cast_to_fp8(w, True, 128)
            wd = R.dequant_fp8(bq, bsf, 128)
        out = hfp4.ref_gemm(a, (bq, bsf), out_dtype="fp32")
        ref = R.bf16_bits_to_float(a).astype(np.float64) @ wd.T
        bound = 2.0 ** -24 * np.abs(ref) + 1e-12 * (np.abs(R.bf16_bits_to_float(a)) @ np.abs(wd).T)
        assert (np.abs(out - ref) <= bound).all()


def _contiguous_layout(counts, align_to):
    ids, starts = [], []
    for e, cnt in counts:
        starts.append(len(ids))
        ids += [e] * cnt + [-1] * (R.align(cnt, align_to) - cnt)
    return np.array(ids, np.int32), starts


@pytest.mark.parametrize("scale_kind", ["ue8m0_bytes", "packed", "fp32"])
def test_contiguous(scale_kind):
    rng = np.random.default_rng(11)
    G, n, k, al = 4, 64, 256, 32
    ids, _ = _contiguous_layout([(0, 20), (2, 33), (3, 0), (1, 32), (2, 5)], al)
    m = ids.size
    a, sfa = _acts(rng, (m, k), 32, True, scale_kind == "packed")
    a[ids < 0] = 0
    b, sfb = _weights(rng, G, n, k, True, scale_kind == "packed", scale_kind == "ue8m0_bytes")
    out = np.full((m, n), BF16_POISON, np.uint16)
    hfp4.ref_gemm((a, sfa), (b, sfb), layout=ids, out=out, m_alignment=al)
    ad = R.dequant_fp8(a, sfa, 32)
    bd = R.dequant_fp4(b, sfb)
    ref = np.zeros((m, n))
    for r in range(m):
        if ids[r] >= 0:
            ref[r] = bd[ids[r]] @ ad[r]
    _check_exact(out, ref, ids >= 0)
    assert (out[ids < 0] == 0).all()  # padding rows are written as +0


def test_contiguous_psum():
    rng = np.random.default_rng(12)
    G, n, k, al, m = 3, 48, 128, 32, 160
    ends = np.array([20, 70, 110], np.int32)
    a, sfa = _acts(rng, (m, k), 128)
    b, sfb = _weights(rng, G, n, k)
    out = np.full((m, n), BF16_POISON, np.uint16)
    hfp4.ref_gemm((a, sfa), (b, sfb), layout=ends, grouping="psum", out=out, m_alignment=al)
    ad, bd = R.dequant_fp8(a, sfa, 128), R.dequant_fp4(b, sfb)
    start = 0
    for g, end in enumerate(ends):
        _check_exact(out, ad @ bd[g].T, slice(start, end))
        assert (out[end:R.align(end, al)] == 0).all()        # alignment gap: +0
        start = R.align(end, al)
    assert (out[start:] == BF16_POISON).all()                # after all groups: untouched


def test_masked():
    rng = np.random.default_rng(13)
    G, m, n, k = 3, 40, 32, 256
    masked_m = np.array([40, 0, 17], np.int32)
    a, sfa = _acts(rng, (G, m, k), 128)
    b, sfb = _weights(rng, G, n, k)
    out = np.full((G, m, n), BF16_POISON, np.uint16)
    hfp4.ref_gemm((a, sfa), (b, sfb), layout=masked_m, out=out, expected_m=20)
    for g in range(G):
        ref = R.dequant_fp8(a[g], sfa[g], 128) @ R.dequant_fp4(b[g], sfb[g]).T
        _check_exact(out[g], ref, slice(0, masked_m[g]))
        assert (out[g, masked_m[g]:] == BF16_POISON).all()


@pytest.mark.parametrize("scale_kind,want", [("ue8m0_bytes", "ue8m0"), ("packed", "ue8m0"), ("pow2_fp32", "ue8m0"),
                                             ("fp32", "fp32")])
def test_repack_round_trip(scale_kind, want):
    rng = np.random.default_rng(21)
    G, n, k, m = 2, 100, 320, 24   # n and k not multiples of the 64/128 tiles: padding is exercised
    b, sfb = _weights(rng, G, n, k, scale_kind != "fp32", scale_kind == "packed", scale_kind == "ue8m0_bytes")
    w = hfp4.repack_sm90_host((b, sfb))
    assert isinstance(w, hfp4.SM90Weights) and (w.num_groups, w.n, w.k) == (G, n, k)
    assert hfp4.dtype_name(w.scale_dtype) == want
    a, sfa = _acts(rng, (G, m, k), 32)
    masked_m = np.array([m, 13], np.int32)
    plain = hfp4.ref_gemm((a, sfa), (b, sfb), layout=masked_m, out_dtype="fp32")
    repacked = hfp4.ref_gemm((a, sfa), w, layout=masked_m, out_dtype="fp32")
    assert (plain.view(np.uint32) == repacked.view(np.uint32)).all()
    if scale_kind != "fp32":
        w32 = hfp4.repack_sm90_host((b, sfb), scale_dtype="fp32")
        again = hfp4.ref_gemm((a, sfa), w32, layout=masked_m, out_dtype="fp32")
        assert (again.view(np.uint32) == plain.view(np.uint32)).all()


def test_repack_refuses_ue8m0_storage_of_non_powers_of_two():
    rng = np.random.default_rng(22)
    b, sfb = _weights(rng, 1, 64, 128, use_ue8m0=False)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        hfp4.repack_sm90_host((b[0], sfb[0]), scale_dtype="ue8m0")
    assert "power of two" in str(ei.value)


def test_errors_name_the_argument():
    rng = np.random.default_rng(23)
    m, n, k = 8, 32, 100
    a = np.zeros((m, k), np.uint8)
    sfa = np.ones((m, 1), np.float32)
    b = np.zeros((n, k // 2), np.uint8)
    sfb = np.ones((n, R.ceil_div(k, 32)), np.float32)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        hfp4.ref_gemm((a, sfa), (b, sfb))
    msg = str(ei.value)
    assert "k = 100" in msg and "multiple of 32" in msg and "Assertion" in msg
    assert isinstance(ei.value, ValueError) and ei.value.status == 1
    a, sfa = _acts(rng, (64, 128), 128)
    bb, bsf = _weights(rng, 2, 32, 128)
    ids = np.zeros(64, np.int32)
    ids[5] = 7
    with pytest.raises(hfp4.InvalidArgument) as ei:
        hfp4.ref_gemm((a, sfa), (bb, bsf), layout=ids, m_alignment=32)
    assert "layout[5] = 7" in str(ei.value)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        hfp4.ref_gemm((a, sfa), (bb, bsf), layout=np.zeros(64, np.int32), m_alignment=12)
    assert "m_alignment = 12" in str(ei.value)
    with pytest.raises(hfp4.InvalidArgument) as ei:                     # caught in Python: extent
        hfp4.ref_gemm((a, sfa[:10]), (bb[0], bsf[0]))
    assert "a scales" in str(ei.value) and "Assertion" in str(ei.value)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        hfp4.ref_gemm((a, sfa), (bb, bsf), layout=np.zeros(3, np.int32), grouping="psum")
    assert "layout" in str(ei.value)


@pytest.mark.parametrize("scale_kind", ["fp32", "ue8m0_bytes", "packed"])
@pytest.mark.parametrize("sf_bytes", [False, True])
def test_fp4_weights_to_fp8(scale_kind, sf_bytes):
    """hfp4_fp4_weights_to_fp8: every value kept under the 128 x 128 block scales, and the FP8 pair
    gives the FP4 pair's GEMM (the same real products)."""
    rng = np.random.default_rng(24)
    n, k, m = 200, 384, 16
    b, sfb = _weights(rng, 1, n, k, True, scale_kind == "packed", scale_kind == "ue8m0_bytes")
    if scale_kind == "fp32":                      # powers of two stored as FP32
        sfb = hfp4.ue8m0_decode(sfb.astype(np.uint8)) if sfb.dtype == np.uint8 else sfb
    q, sf = hfp4.fp4_weights_to_fp8((b[0], sfb[0]), ue8m0_bytes=sf_bytes)
    assert q.shape == (n, k) and sf.shape == (2, 3) and sf.dtype == (np.uint8 if sf_bytes else np.float32)
    block = hfp4.ue8m0_decode(sf) if sf_bytes else sf
    got = hfp4.fp8_decode(q).astype(np.float64) * np.repeat(np.repeat(block, 128, 0)[:n], 128, 1)
    codes = hfp4.fp4_unpack(b[0])
    if scale_kind == "packed":
        w_sf = np.frombuffer(sfb[0].astype(np.int32).tobytes(), np.uint8).reshape(n, -1)[:, :k // 32]
        w_sf = hfp4.ue8m0_decode(w_sf)
    elif scale_kind == "ue8m0_bytes":
        w_sf = hfp4.ue8m0_decode(sfb[0])
    else:
        w_sf = sfb[0]
    want = hfp4.fp4_decode(codes).astype(np.float64) * np.repeat(w_sf.astype(np.float64), 32, 1)
    assert (got == want).all()
    a, sfa = _acts(rng, (m, k), 128)
    d4 = hfp4.ref_gemm((a, sfa), (b[0], sfb[0]), out_dtype="fp32")
    d8 = hfp4.ref_gemm((a, sfa), (q, sf if not sf_bytes else hfp4.ue8m0_decode(sf)), out_dtype="fp32")
    assert np.allclose(d4, d8, rtol=1e-6, atol=1e-6 * np.abs(d4).max())


def test_fp4_weights_to_fp8_refuses_wide_blocks():
    rng = np.random.default_rng(25)
    b, sfb = _weights(rng, 1, 128, 128, True, False, True)
    sfb = sfb[0].copy()
    sfb[:, :] = 120
    sfb[5, 2] = 120 - 15                         # 15 binades below the block's top
    with pytest.raises(hfp4.Unsupported) as ei:
        hfp4.fp4_weights_to_fp8((b[0], sfb))
    assert "block (0, 0)" in str(ei.value) and "14 binades" in str(ei.value)
    sfb[5, 2] = 120 - 14                         # 14: exact
    q, sf = hfp4.fp4_weights_to_fp8((b[0], sfb))
    assert sf[0, 0] == 2.0 ** (120 - 127 - 6)
