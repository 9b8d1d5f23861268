"""hfp4.deep_gemm on a Hopper GPU (marked gpu: skipped without torch and CUDA). Every result is
checked element by element against the exact float64 product of the same quantized operands with
docs/TESTING.md's bound for FP8 tensor-core accumulation:
    |d - r| <= eps_out |r| + 2^-12 sum_k |a_k w_k| + 1e-6 rms(r)."""
import gc

import numpy as np
import pytest

import hfp4
import dg_math_ref as R
from hfp4 import host

pytestmark = pytest.mark.gpu

try:
    import torch
    import hfp4.deep_gemm as dg
except ImportError:  # collected but skipped by conftest
    torch = None


@pytest.fixture(autouse=True)
def _sm90_only():
    if not dg.is_available():
        pytest.skip("no GPU hfp4's SM90 kernels run on (or a library built without CUDA)")
    dg.clear_weight_cache()
    yield
    dg.clear_weight_cache()
    dg.release_graph_weights()


DEV = "cuda"
E8M0 = getattr(torch, "float8_e8m0fnu", None) if torch is not None else None


def _acts(seed, shape, gran_k=128, packed=False):
    g = torch.Generator(device=DEV).manual_seed(seed)
    x = torch.randn(shape, generator=g, device=DEV).reshape(-1, shape[-1])
    q, sf = dg.utils.per_token_cast_to_fp8(x, True, gran_k, packed)
    return q.reshape(shape), sf.reshape(tuple(shape[:-1]) + sf.shape[-1:])


def _weights(seed, groups, n, k, kind="ue8m0"):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((groups * n, k)) * 0.05).astype(np.float32)
    w *= np.exp2(rng.integers(-3, 3, size=(groups * n, 1))).astype(np.float32)
    q, sf = host.per_token_cast_to_fp4(w, kind != "fp32", 32, kind == "packed", ue8m0_bytes=kind == "ue8m0")
    q = torch.from_numpy(q.reshape(groups, n, k // 2)).view(torch.int8).to(DEV)
    sf = torch.from_numpy(np.ascontiguousarray(sf.reshape(groups, n, sf.shape[-1]))).to(DEV)
    if kind == "ue8m0" and E8M0 is not None:
        sf = sf.view(E8M0)
    return q, sf


def _np_bytes(t):
    t = t.detach()
    if t.element_size() == 1:  # fp8 / e8m0 / int8: bytes (viewed on the device, before any copy)
        t = t.view(torch.uint8)
    return t.cpu().contiguous().numpy()


def _deq_a(a, sfa, gran_k):
    return R.dequant_fp8(_np_bytes(a), _np_bytes(sfa), gran_k)


def _deq_b(b, sfb):
    return R.dequant_fp4(_np_bytes(b), _np_bytes(sfb))


def _check(got, ad, bd, rows=None, c=None):
    """got [M, N] torch; ad [M, K], bd [N, K] float64; rows: mask of rows to check."""
    eps = 4e-3 if got.dtype == torch.bfloat16 else 1e-5
    got = got.detach().float().cpu().numpy().astype(np.float64)
    ref = ad @ bd.T + (0 if c is None else c)
    l1 = np.abs(ad) @ np.abs(bd).T
    if rows is not None:
        got, ref, l1 = got[rows], ref[rows], l1[rows]
    rms = np.sqrt(np.mean(ref ** 2)) if ref.size else 0.0
    bad = np.abs(got - ref) > eps * np.abs(ref) + 2.0 ** -12 * l1 + 1e-6 * rms
    assert not bad.any(), "bad elements: %d, first %s" % (bad.sum(), np.argwhere(bad)[:1])
    if ref.size:
        assert np.linalg.norm(got - ref) <= 2e-3 * np.linalg.norm(ref) + 1e-30


@pytest.mark.parametrize("m,n,k", [(1, 128, 128), (37, 256, 512), (129, 200, 1024)])
def test_dense_bf16(m, n, k):
    a, sfa = _acts(m, (m, k))
    b, sfb = _weights(n, 1, n, k)
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d)
    torch.cuda.synchronize()
    _check(d, _deq_a(a, sfa, 128), _deq_b(b[0], sfb[0]))


def test_dense_transformers_fp4_recipe_with_c_fp32():
    # transformers' FP4 path: per_token_cast_to_fp8(use_ue8m0=True, gran_k=32, use_packed_ue8m0=True), recipe (1,1,32)
    m, n, k = 50, 256, 768
    a, sfa = _acts(5, (m, k), 32, packed=True)
    b, sfb = _weights(6, 1, n, k, "packed")
    c = torch.randn(m, n, device=DEV)
    d = torch.empty(m, n, device=DEV)
    dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d, c=c, recipe=(1, 1, 32))
    torch.cuda.synchronize()
    _check(d, _deq_a(a, sfa, 32), _deq_b(b[0], sfb[0]), c=c.cpu().numpy())
    # MN-major TMA-aligned activation scales (what DeepGEMM's transform produces) give the same result
    sfa_mn = dg.get_mn_major_tma_aligned_tensor(sfa)
    assert sfa_mn.stride() == (1, R.align(m, 4))
    d2 = torch.empty_like(d)
    dg.fp8_fp4_gemm_nt((a, sfa_mn), (b[0], sfb[0]), d2, c=c, recipe=(1, 1, 32))
    torch.cuda.synchronize()
    assert torch.equal(d, d2)


def test_contiguous_with_padding_rows():
    G, n, k, al = 4, 256, 512, 128
    counts = [(0, 20), (2, 150), (3, 0), (1, 128)]
    ids = []
    for e, cnt in counts:
        ids += [e] * cnt + [-1] * (R.align(cnt, al) - cnt)
    ids = np.array(ids, np.int32)
    m = ids.size
    a, sfa = _acts(7, (m, k))
    a.view(torch.uint8)[torch.from_numpy(ids < 0).to(DEV)] = 0
    b, sfb = _weights(8, G, n, k, "fp32")
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    dg.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, torch.from_numpy(ids).to(DEV))
    torch.cuda.synchronize()
    ad, bd = _deq_a(a, sfa, 128), _deq_b(b, sfb)
    for e in range(G):
        _check(d, ad, bd[e], rows=ids == e)
    assert (d[torch.from_numpy(ids < 0).to(DEV)] == 0).all()


@pytest.mark.parametrize("hint", [None, 1, 2])
def test_contiguous_decode_hint(hint):
    # decode-like segments (1-3 real rows in 128) with 1x32 UE8M0 scales, as transformers calls it, with
    # hfp4's expected_m hint (the 8-token tiles) and without (m / G picks a taller tile): same result
    G, n, k = 8, 256, 1024
    ids = []
    for e, cnt in [(0, 1), (3, 2), (5, 3), (6, 1)]:
        ids += [e] * cnt + [-1] * (128 - cnt)
    ids = np.array(ids, np.int32)
    m = ids.size
    a, sfa = _acts(21, (m, k), 32, packed=True)
    a.view(torch.uint8)[torch.from_numpy(ids < 0).to(DEV)] = 0
    b, sfb = _weights(22, G, n, k, "packed")
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    dg.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, torch.from_numpy(ids).to(DEV), recipe=(1, 1, 32),
                                            expected_m=hint)
    torch.cuda.synchronize()
    ad, bd = _deq_a(a, sfa, 32), _deq_b(b, sfb)
    for e in range(G):
        if (ids == e).any():
            _check(d, ad, bd[e], rows=ids == e)
    assert (d[torch.from_numpy(ids < 0).to(DEV)] == 0).all()


def test_contiguous_padding_left_alone():
    # ensure_zero_padding=False: real rows as always; D's padding rows keep the poison or are zeros
    G, n, k = 8, 256, 1024
    ids = []
    for e, cnt in [(0, 1), (3, 2), (5, 3), (6, 1)]:
        ids += [e] * cnt + [-1] * (128 - cnt)
    ids = np.array(ids + [-1] * 256, np.int32)
    m = ids.size
    a, sfa = _acts(23, (m, k), 32, packed=True)
    b, sfb = _weights(24, G, n, k, "packed")
    ad, bd = _deq_a(a, sfa, 32), _deq_b(b, sfb)
    for hint in (None, 1):
        d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
        dg.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, torch.from_numpy(ids).to(DEV),
                                                recipe=(1, 1, 32), expected_m=hint, ensure_zero_padding=False)
        torch.cuda.synchronize()
        for e in range(G):
            if (ids == e).any():
                _check(d, ad, bd[e], rows=ids == e)
        pad = d[torch.from_numpy(ids < 0).to(DEV)].float()
        assert (torch.isnan(pad) | (pad == 0)).all()


def test_contiguous_psum():
    G, n, k, m = 3, 128, 256, 512
    ends = np.array([100, 300, 390], np.int32)
    a, sfa = _acts(9, (m, k))
    b, sfb = _weights(10, G, n, k)
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    dg.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, torch.from_numpy(ends).to(DEV),
                                            use_psum_layout=True, expected_m_for_psum_layout=130)
    torch.cuda.synchronize()
    ad, bd = _deq_a(a, sfa, 128), _deq_b(b, sfb)
    start = 0
    for g, end in enumerate(ends):
        rows = np.zeros(m, bool)
        rows[start:end] = True
        _check(d, ad, bd[g], rows=rows)
        assert (d[end:R.align(end, 128)] == 0).all()
        start = R.align(end, 128)
    assert torch.isnan(d[start:].float()).all()


def test_masked():
    G, m, n, k = 3, 64, 256, 512
    masked_m = torch.tensor([64, 0, 17], dtype=torch.int32, device=DEV)
    a, sfa = _acts(11, (G, m, k))
    b, sfb = _weights(12, G, n, k)
    d = torch.full((G, m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    dg.m_grouped_fp8_fp4_gemm_nt_masked((a, sfa), (b, sfb), d, masked_m, expected_m=32)
    torch.cuda.synchronize()
    for g, mm in enumerate(masked_m.tolist()):
        _check(d[g, :mm], _deq_a(a[g, :mm], sfa[g, :mm], 128), _deq_b(b[g], sfb[g]))
        assert torch.isnan(d[g, mm:].float()).all()


def test_weight_cache():
    m, n, k = 16, 256, 512
    a, sfa = _acts(13, (m, k))
    b, sfb = _weights(14, 1, n, k)
    w, s = b[0], sfb[0]
    d = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
    dg.fp8_fp4_gemm_nt((a, sfa), (w, s), d)
    info = dg.weight_cache_info()
    assert info["entries"] == 1 and info["bytes"] > 0
    dg.fp8_fp4_gemm_nt((a, sfa), (w, s), d)
    assert dg.weight_cache_info()["entries"] == 1
    first = dg._cache[next(iter(dg._cache))].weights
    dg.fp8_fp4_gemm_nt((a, sfa), (w, s), d)
    assert dg._cache[next(iter(dg._cache))].weights is first          # hit: no repack
    w[0, 0] ^= 0x11                                                     # in-place write bumps _version
    dg.fp8_fp4_gemm_nt((a, sfa), (w, s), d)
    torch.cuda.synchronize()
    assert dg._cache[next(iter(dg._cache))].weights is not first       # repacked
    assert dg.weight_cache_info()["entries"] == 1
    _check(d, _deq_a(a, sfa, 128), _deq_b(w, s))
    dg.clear_weight_cache()
    assert dg.weight_cache_info()["entries"] == 0
    dg.fp8_fp4_gemm_nt((a, sfa), (w, s), d)
    assert dg.weight_cache_info()["entries"] == 1
    del w, b
    gc.collect()
    assert dg.weight_cache_info()["entries"] == 0                      # freed weights drop their entry
    # explicit repack, no cache
    b2, s2 = _weights(15, 1, n, k)
    pre = dg.repack_weights((b2[0], s2[0]))
    dg.fp8_fp4_gemm_nt((a, sfa), pre, d)
    torch.cuda.synchronize()
    assert dg.weight_cache_info()["entries"] == 0
    _check(d, _deq_a(a, sfa, 128), _deq_b(b2[0], s2[0]))


def test_gpu_repack_matches_cpu_repack():
    b, sfb = _weights(16, 2, 200, 320)
    gpu = dg.repack_weights((b, sfb))
    cpu = host.repack_sm90_host((_np_bytes(b), _np_bytes(sfb)))
    assert gpu.nbytes == cpu.nbytes
    assert (gpu.buffer.cpu().numpy() == cpu.buffer).all()


def test_m_zero_and_trivial_cases():
    n, k = 256, 512
    b, sfb = _weights(17, 2, n, k)
    a = torch.empty(0, k, dtype=torch.float8_e4m3fn, device=DEV)
    sfa = torch.empty(0, k // 128, device=DEV)
    d = torch.empty(0, n, dtype=torch.bfloat16, device=DEV)
    dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d)
    dg.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, torch.empty(0, dtype=torch.int32, device=DEV))
    a3 = torch.empty(2, 0, k, dtype=torch.float8_e4m3fn, device=DEV)
    dg.m_grouped_fp8_fp4_gemm_nt_masked((a3, torch.empty(2, 0, k // 128, device=DEV)),
                                        (b, sfb), torch.empty(2, 0, n, dtype=torch.bfloat16, device=DEV),
                                        torch.zeros(2, dtype=torch.int32, device=DEV), 1)
    assert dg.weight_cache_info()["entries"] == 0     # nothing launched, nothing repacked


def test_fp8_weights_dense():
    # DeepGEMM's fp8_gemm_nt on SM90 (FP8 weights, 128 x 128 block scales): the library's FP8-weight
    # path (on by default), Unsupported naming its switch where HFP4_SM90_FP8_WEIGHTS=0 turns it off
    m, n, k = 37, 384, 512
    a, sfa = _acts(31, (m, k))
    g = torch.Generator(device=DEV).manual_seed(32)
    b, sfb = dg.utils.per_block_cast_to_fp8(torch.randn(n, k, generator=g, device=DEV) * 0.05, True)
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    try:
        dg.fp8_gemm_nt((a, sfa), (b, sfb), d)
    except NotImplementedError as e:
        assert "HFP4_SM90_FP8_WEIGHTS" in str(e)
        return
    sf = sfb.cpu().numpy()
    bd = R.FP8_TABLE[_np_bytes(b)] * np.repeat(np.repeat(sf, 128, axis=0)[:n], 128, axis=1)[:, :k]
    ad = _deq_a(a, sfa, 128)
    got = d.float().cpu().numpy().astype(np.float64)
    ref, l1 = ad @ bd.T, np.abs(ad) @ np.abs(bd).T
    # (2^-10: 4 chained k32 steps a 128-K block, docs/TESTING.md)
    bad = np.abs(got - ref) > 4e-3 * np.abs(ref) + 2.0 ** -10 * l1 + 1e-6 * np.sqrt(np.mean(ref ** 2))
    assert not bad.any(), "bad elements: %d, first %s" % (bad.sum(), np.argwhere(bad)[:1])


def test_fp8_weights_contiguous():
    # DeepGEMM's m_grouped_fp8_gemm_nt_contiguous on SM90 (FP8 weights [G, N, K], 128 x 128 block
    # scales): the library's FP8 x FP8 grouped form; padding rows of D come back +0
    G, n, k = 3, 384, 512
    ids = []
    for e, cnt in [(0, 20), (2, 150), (1, 128)]:
        ids += [e] * cnt + [-1] * (R.align(cnt, 128) - cnt)
    ids_cpu = torch.tensor(ids, dtype=torch.int32)
    m = ids_cpu.numel()
    a, sfa = _acts(35, (m, k))
    g = torch.Generator(device=DEV).manual_seed(36)
    pairs = [dg.utils.per_block_cast_to_fp8(torch.randn(n, k, generator=g, device=DEV) * 0.05, True)
             for _ in range(G)]
    b, sfb = torch.stack([q for q, _ in pairs]), torch.stack([s for _, s in pairs])
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    dg.m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, ids_cpu.to(DEV))
    ad = _deq_a(a, sfa, 128)
    got = d.float().cpu().numpy().astype(np.float64)
    for e in range(G):
        sf = sfb[e].cpu().numpy()
        bd = R.FP8_TABLE[_np_bytes(b[e])] * np.repeat(np.repeat(sf, 128, axis=0)[:n], 128, axis=1)[:, :k]
        rows = (ids_cpu == e).numpy()
        ref, l1 = ad[rows] @ bd.T, np.abs(ad[rows]) @ np.abs(bd).T
        bad = np.abs(got[rows] - ref) > 4e-3 * np.abs(ref) + 2.0 ** -10 * l1 + 1e-6 * np.sqrt(np.mean(ref ** 2))
        assert not bad.any(), "expert %d: bad elements: %d" % (e, bad.sum())
    assert (got[(ids_cpu < 0).numpy()] == 0).all()


def test_fp8_weights_masked():
    # DeepGEMM's m_grouped_fp8_gemm_nt_masked on SM90 (FP8 weights [G, N, K], 128 x 128 block scales):
    # the library's FP8 x FP8 masked form; rows from masked_m on keep what D held
    G, M, n, k = 4, 256, 384, 512
    masked_m = torch.tensor([200, 0, 64, 1], dtype=torch.int32, device=DEV)
    a, sfa = _acts(39, (G, M, k))
    g = torch.Generator(device=DEV).manual_seed(40)
    pairs = [dg.utils.per_block_cast_to_fp8(torch.randn(n, k, generator=g, device=DEV) * 0.05, True)
             for _ in range(G)]
    b, sfb = torch.stack([q for q, _ in pairs]), torch.stack([s for _, s in pairs])
    d = torch.full((G, M, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    dg.m_grouped_fp8_gemm_nt_masked((a, sfa), (b, sfb), d, masked_m, 64)
    got = d.float().cpu().numpy().astype(np.float64)
    for e, mm in enumerate(masked_m.tolist()):
        sf = sfb[e].cpu().numpy()
        bd = R.FP8_TABLE[_np_bytes(b[e])] * np.repeat(np.repeat(sf, 128, axis=0)[:n], 128, axis=1)[:, :k]
        ad = _deq_a(a[e, :mm], sfa[e, :mm], 128)
        ref, l1 = ad @ bd.T, np.abs(ad) @ np.abs(bd).T
        bad = np.abs(got[e, :mm] - ref) > 4e-3 * np.abs(ref) + 2.0 ** -10 * l1 + 1e-6 * np.sqrt(np.mean(ref ** 2) if mm else 0)
        assert not bad.any(), "group %d: bad elements: %d" % (e, bad.sum())
        assert np.isnan(got[e, mm:]).all(), "group %d: rows from masked_m on were written" % e


@pytest.mark.parametrize("kind,sf_bytes", [("ue8m0", False), ("packed", True), ("fp32", False)])
def test_fp4_weights_to_fp8_gpu_equals_host(kind, sf_bytes):
    # the GPU conversion byte for byte against the host form (hfp4.fp4_weights_to_fp8, the reference),
    # then its pair through fp8_gemm_nt against the exact product on the FP4 weights
    m, n, k = 70, 320, 640
    b, sfb = _weights(41, 1, n, k, "ue8m0" if kind == "fp32" else kind)
    if kind == "fp32":  # FP32 scales with an FP8 form are powers of two (amax / 6 ones are refused)
        sfb = torch.from_numpy(np.asarray(hfp4.ue8m0_decode(_np_bytes(sfb)), dtype=np.float32)).to(DEV)
    q, sf = dg.fp4_weights_to_fp8((b[0], sfb[0]), ue8m0_bytes=sf_bytes)
    assert q.dtype == torch.float8_e4m3fn and q.shape == (n, k)
    assert sf.shape == (3, 5) and sf.dtype == (torch.uint8 if sf_bytes else torch.float32)
    hq, hsf = hfp4.fp4_weights_to_fp8((_np_bytes(b[0]), _np_bytes(sfb[0])), ue8m0_bytes=sf_bytes)
    assert (_np_bytes(q) == hq).all()
    assert (_np_bytes(sf) == (hsf.view(np.uint8) if sf_bytes else hsf)).all()
    a, sfa = _acts(42, (m, k))
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    try:
        sfb8 = sf if not sf_bytes else torch.from_numpy(np.asarray(hfp4.ue8m0_decode(hsf), dtype=np.float32)).to(DEV)
        dg.fp8_gemm_nt((a, sfa), (q, sfb8), d)
    except NotImplementedError as e:  # (the FP8-weight path switched off: HFP4_SM90_FP8_WEIGHTS=0)
        assert "HFP4_SM90_FP8_WEIGHTS" in str(e)
        return
    torch.cuda.synchronize()
    ad, bd = _deq_a(a, sfa, 128), _deq_b(b[0], sfb[0])
    got = d.float().cpu().numpy().astype(np.float64)
    ref, l1 = ad @ bd.T, np.abs(ad) @ np.abs(bd).T
    bad = np.abs(got - ref) > 4e-3 * np.abs(ref) + 2.0 ** -10 * l1 + 1e-6 * np.sqrt(np.mean(ref ** 2))
    assert not bad.any(), "bad elements: %d, first %s" % (bad.sum(), np.argwhere(bad)[:1])


def test_fp4_weights_to_fp8_gpu_refuses_wide_blocks():
    n, k = 256, 256
    b, sfb = _weights(43, 1, n, k, "ue8m0")
    sf = _np_bytes(sfb[0]).copy()
    sf[:, :] = 120
    sf[130, 5] = 120 - 15  # 15 binades below its block's top: block (1, 1) refused
    sfb_wide = torch.from_numpy(sf).to(DEV)
    if E8M0 is not None:
        sfb_wide = sfb_wide.view(E8M0)
    with pytest.raises(hfp4.Unsupported) as ei:
        dg.fp4_weights_to_fp8((b[0], sfb_wide))
    assert "1 block(s)" in str(ei.value)
    count = torch.full((1,), -1, dtype=torch.int32, device=DEV)
    q, _ = dg.fp4_weights_to_fp8((b[0], sfb_wide), inexact=count)  # no wait, no raise: the count and NaN
    assert int(count.item()) == 1
    qb = _np_bytes(q)
    assert (qb[128:256, 128:256] == 0x7F).all() and not (qb[:128, :128] == 0x7F).all()
    with pytest.raises(hfp4.InvalidArgument):
        dg.fp4_weights_to_fp8((b[0], sfb[0]), inexact=torch.zeros(1, dtype=torch.int64, device=DEV))


def test_errors():
    m, n, k = 16, 256, 512
    a, sfa = _acts(18, (m, k))
    b, sfb = _weights(19, 1, n, k)
    d = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
    wfp8_kn = torch.zeros(1, k, n, dtype=torch.float8_e4m3fn, device=DEV)  # [G, K, N]: not K-major
    with pytest.raises(NotImplementedError):  # FP8 weights in the NN form: no hfp4 kernel
        dg.m_grouped_fp8_fp4_gemm_nn_contiguous((a, sfa), (wfp8_kn, torch.ones(1, 4, 2, device=DEV)), d,
                                                torch.zeros(m, dtype=torch.int32, device=DEV))
    with pytest.raises(NotImplementedError):
        dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d, recipe=(1, 128, 128))
    with pytest.raises(hfp4.InvalidArgument) as ei:
        dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d, recipe_a=(1, 128))
    assert "Assertion" in str(ei.value)
    with pytest.raises(ValueError) as ei:
        dg.fp8_fp4_gemm_nt((a, sfa[:, :3]), (b[0], sfb[0]), d)
    assert "sfa" in str(ei.value)
    with pytest.raises(ValueError) as ei:
        dg.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, torch.zeros(m, dtype=torch.int64, device=DEV))
    assert "grouped_layout" in str(ei.value)
    bad_ld = torch.empty(m, k + 8, dtype=torch.float8_e4m3fn, device=DEV)[:, :k]  # row stride not a multiple of 16
    bad_ld.copy_(a)
    with pytest.raises(NotImplementedError) as ei:
        dg.fp8_fp4_gemm_nt((bad_ld, sfa), (b[0], sfb[0]), d)
    assert "a.ld" in str(ei.value)


def test_cuda_graph_capture():
    m, n, k = 32, 256, 512
    a, sfa = _acts(20, (m, k))
    b, sfb = _weights(21, 1, n, k)
    d = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
    dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d)       # warm-up: repacks outside the capture
    torch.cuda.synchronize()
    want = d.clone()
    d.zero_()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(d, want)
    info = dg.weight_cache_info()
    assert info["entries"] == 1 and info["graph_pinned"] == 1
    dg.clear_weight_cache()                               # the graph's weights stay alive
    d.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(d, want)
    # cold cache during capture: the repack is captured too (runs at each replay) and not cached
    b2, sfb2 = _weights(22, 1, n, k)
    d2 = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        dg.fp8_fp4_gemm_nt((a, sfa), (b2[0], sfb2[0]), d2)
    assert dg.weight_cache_info()["entries"] == 0
    g2.replay()
    torch.cuda.synchronize()
    _check(d2, _deq_a(a, sfa, 128), _deq_b(b2[0], sfb2[0]))
    del g, g2


def test_inference_mode_tensors():
    # inference tensors have no version counter; the weight cache must not read it
    m, n, k = 16, 256, 512
    with torch.inference_mode():
        a, sfa = _acts(23, (m, k))
        b, sfb = _weights(24, 1, n, k)
        d = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
        dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d)
        dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d)
    torch.cuda.synchronize()
    assert dg.weight_cache_info()["entries"] == 1
    _check(d, _deq_a(a, sfa, 128), _deq_b(b[0], sfb[0]))


def test_layout_helpers_gpu_equal_cpu():
    sf = torch.rand(3, 10, 5, device=DEV)
    out = dg.get_mn_major_tma_aligned_tensor(sf)
    assert out.is_cuda and out.stride() == (60, 1, 12) and torch.equal(out, sf)
    assert dg.get_mn_major_tma_aligned_tensor(out) is out
    p = torch.exp2(torch.randint(-10, 10, (300, 7), device=DEV).float())
    ends = torch.tensor([100, 250], dtype=torch.int32)
    packed = dg.get_mn_major_tma_aligned_packed_ue8m0_tensor(p, ends)
    want = host.get_mn_major_tma_aligned_packed_ue8m0_tensor(p.cpu().numpy(), ends.numpy(), alignment=128)
    assert packed.stride() == (1, 300) and (packed.cpu().numpy() == want).all()
    sfw = torch.exp2(torch.randint(-10, 10, (4, 256, 16), device=DEV).float())
    for arch in (90, 100):
        got = dg.transform_sf_into_required_layout(sfw, 256, 512, (1, 32), num_groups=4, arch=arch)
        ref = host.transform_sf_into_required_layout(sfw.cpu().numpy(), 256, 512, (1, 32), num_groups=4, arch=arch)
        assert got.stride() == tuple(s // 4 for s in ref.strides) and (got.cpu().numpy() == ref).all()


def test_utils_on_gpu_match_c():
    x = torch.randn(64, 1024, device=DEV)
    for gran_k, packed in ((128, False), (32, True)):
        q, sf = dg.utils.per_token_cast_to_fp8(x, True, gran_k, packed)
        hq, hsf = host.per_token_cast_to_fp8(x.cpu().numpy(), True, gran_k, packed)
        assert (_np_bytes(q) == hq).all() and (_np_bytes(sf).view(np.uint32) == hsf.view(np.uint32)).all()
    q4, sf4 = dg.utils.per_token_cast_to_fp4(x, True, 32)
    hq4, hsf4 = host.per_token_cast_to_fp4(x.cpu().numpy(), True, 32)
    assert (_np_bytes(q4) == hq4).all() and (_np_bytes(sf4) == hsf4).all()


# ------------------------------------------------------------------------------------------------
# fp8_fp4_gemm_nt's FP8 route at large M (hfp4/_fp8_route.py): the threshold lowered to 256 here
# ------------------------------------------------------------------------------------------------


def _route_key(b):
    return dg._cache_key(b)


@pytest.mark.parametrize("kind,out_fp32", [("ue8m0", False), ("packed", True)])
def test_fp8_route_large_m(monkeypatch, kind, out_fp32):
    # M >= the threshold: the weights converted to FP8 for the call (nothing repacked), every element
    # within the bound; learnt exact at the first call, known at the second (no wait); below the
    # threshold the FP4 kernel (a repack cached)
    monkeypatch.setenv("HFP4_FP8_ROUTE_MIN_M", "256")
    m, n, k = 300, 384, 640
    a, sfa = _acts(51, (m, k))
    b, sfb = _weights(52, 1, n, k, kind)
    ad, bd = _deq_a(a, sfa, 128), _deq_b(b[0], sfb[0])
    dt = torch.float32 if out_fp32 else torch.bfloat16
    # (FP32: C with D's strides at the first call, then a transposed C: the copy into D first)
    c = torch.randn(m, n, device=DEV).to(dt) if out_fp32 else None
    entry = None
    for call in range(2):
        cc = c if call == 0 or c is None else c.t().contiguous().t()
        d = torch.full((m, n), float("nan"), dtype=dt, device=DEV)
        dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d, c=cc)
        torch.cuda.synchronize()
        _check(d, ad, bd, c=None if c is None else c.double().cpu().numpy())
        assert dg.weight_cache_info()["entries"] == 0
        assert dg._fp8_route._known[_route_key(b[0])][2] is True
        if call == 1:  # known at the second call: not learnt again (no wait)
            assert dg._fp8_route._known[_route_key(b[0])] is entry
        entry = dg._fp8_route._known[_route_key(b[0])]
    # scales rewritten in place (their version counter moves): learnt again
    sfb[0].copy_(sfb[0].clone())
    d = torch.full((m, n), float("nan"), dtype=dt, device=DEV)
    dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d)
    torch.cuda.synchronize()
    _check(d, ad, bd)
    assert dg._fp8_route._known[_route_key(b[0])] is not entry
    d = torch.full((255, n), float("nan"), dtype=dt, device=DEV)
    dg.fp8_fp4_gemm_nt((a[:255], sfa[:255]), (b[0], sfb[0]), d, c=None if c is None else c[:255])
    torch.cuda.synchronize()
    _check(d, ad[:255], bd, c=None if c is None else c[:255].double().cpu().numpy())
    assert dg.weight_cache_info()["entries"] == 1
    dg.clear_weight_cache()
    assert not dg._fp8_route._known


def test_fp8_route_refused_and_off(monkeypatch):
    # weights with a 128 x 128 block of scales spanning 15 binades have no exact FP8 form: the FP4
    # kernel runs (no NaN) and the refusal is remembered; 1x32 activation scales (no FP8 x FP8
    # kernel) and HFP4_FP8_ROUTE=0 keep the FP4 kernel too
    monkeypatch.setenv("HFP4_FP8_ROUTE_MIN_M", "256")
    m, n, k = 260, 256, 256
    a, sfa = _acts(53, (m, k))
    b, sfb = _weights(54, 1, n, k, "ue8m0")
    sf = _np_bytes(sfb[0]).copy()
    sf[:, :] = 124
    sf[130, 5] = 124 - 15
    sfb_wide = torch.from_numpy(sf).to(DEV)
    if E8M0 is not None:
        sfb_wide = sfb_wide.view(E8M0)
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb_wide), d)
    torch.cuda.synchronize()
    _check(d, _deq_a(a, sfa, 128), _deq_b(b[0], sfb_wide))
    assert dg._fp8_route._known[_route_key(b[0])][2] is False
    assert dg.weight_cache_info()["entries"] == 1
    a32, sfa32 = _acts(55, (m, k), 32, packed=True)
    b2, sfb2 = _weights(56, 1, n, k, "packed")
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    dg.fp8_fp4_gemm_nt((a32, sfa32), (b2[0], sfb2[0]), d)
    torch.cuda.synchronize()
    _check(d, _deq_a(a32, sfa32, 32), _deq_b(b2[0], sfb2[0]))
    assert _route_key(b2[0]) not in dg._fp8_route._known
    with pytest.raises(hfp4.InvalidArgument):  # (weights off A's device: the FP4 path's error, no conversion)
        dg.fp8_fp4_gemm_nt((a, sfa), (b2[0].cpu(), sfb2[0].cpu()), d)
    b4, sfb4 = _weights(61, 1, n, 2 * k)
    with pytest.raises(hfp4.InvalidArgument):  # (weights of another K: the FP4 path's error, not a conversion)
        dg.fp8_fp4_gemm_nt((a, sfa), (b4[0], sfb4[0]), d)
    assert _route_key(b4[0]) not in dg._fp8_route._known
    monkeypatch.setenv("HFP4_WEIGHT_CACHE", "0")  # (the route still runs, learning at every call)
    b5, sfb5 = _weights(62, 1, n, k)
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    dg.fp8_fp4_gemm_nt((a, sfa), (b5[0], sfb5[0]), d)
    torch.cuda.synchronize()
    _check(d, _deq_a(a, sfa, 128), _deq_b(b5[0], sfb5[0]))
    assert _route_key(b5[0]) not in dg._fp8_route._known
    monkeypatch.delenv("HFP4_WEIGHT_CACHE")
    monkeypatch.setenv("HFP4_FP8_ROUTE", "0")
    b3, sfb3 = _weights(57, 1, n, k)
    dg.fp8_fp4_gemm_nt((a, sfa), (b3[0], sfb3[0]), d)
    torch.cuda.synchronize()
    _check(d, _deq_a(a, sfa, 128), _deq_b(b3[0], sfb3[0]))
    assert _route_key(b3[0]) not in dg._fp8_route._known


def test_fp8_route_cuda_graph(monkeypatch):
    # learnt eagerly, then captured: the conversion and the FP8 GEMM replay (the transient FP8 copy
    # in the graph's pool); weights not yet learnt at capture keep the FP4 kernel
    monkeypatch.setenv("HFP4_FP8_ROUTE_MIN_M", "256")
    m, n, k = 256, 256, 512
    a, sfa = _acts(58, (m, k))
    b, sfb = _weights(59, 1, n, k)
    d = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
    dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d)
    torch.cuda.synchronize()
    want = d.clone()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dg.fp8_fp4_gemm_nt((a, sfa), (b[0], sfb[0]), d)
    info = dg.weight_cache_info()
    assert info["entries"] == 0 and info["graph_pinned"] == 0  # (the route: nothing repacked or pinned)
    d.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(d, want)
    b2, sfb2 = _weights(60, 1, n, k)
    d2 = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        dg.fp8_fp4_gemm_nt((a, sfa), (b2[0], sfb2[0]), d2)
    g2.replay()
    torch.cuda.synchronize()
    _check(d2, _deq_a(a, sfa, 128), _deq_b(b2[0], sfb2[0]))
    assert _route_key(b2[0]) not in dg._fp8_route._known
    del g, g2


@pytest.mark.parametrize("m,n,k,fp8_weights", [(4, 4096, 4096, False), (256, 1024, 1024, False),
                                               (4096, 4096, 8192, False), (1, 7168, 2048, True),
                                               (512, 2048, 2048, True)])
def test_one_gemm_kernel_a_call_for_deep_gemm_bench(m, n, k, fp8_weights):
    # DeepGEMM's test scripts time a call by the kernels whose names contain "gemm_", and require
    # exactly one such kernel (deepgemm-compat.md §8): the warp path (m = 4), the tile kernel, the
    # route through FP8 at large M (conversion + FP8 GEMM: one "gemm_") and both FP8-weight kernels
    from hfp4.deep_gemm.testing import bench_kineto
    a, sfa = _acts(m + n, (m, k))
    if fp8_weights:
        w = torch.randn(n, k, device=DEV) * 0.05
        b, sfb = dg.utils.per_block_cast_to_fp8(w, True)
    else:
        b, sfb = _weights(n, 1, n, k)
        b, sfb = b[0], sfb[0]
    d = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
    t = bench_kineto(lambda: dg.fp8_fp4_gemm_nt((a, sfa), (b, sfb), d), "gemm_", num_tests=3, flush_l2=False,
                     suppress_kineto_output=True)
    assert 0 < t < 0.1, t
