"""hfp4.deep_gemm's GEMM path on torch CPU tensors (needs torch, no GPU): the library's GPU entry
points are swapped for their CPU forms (hfp4_gemm -> hfp4_ref_gemm, hfp4_repack_sm90 ->
hfp4_ref_repack_sm90, *_gpu -> the CPU call) and the tensors claim to be CUDA tensors, so that
everything the Python layer builds (descriptors, strides, dtypes, recipes, the weight cache, the
trivial cases) is checked against the exact reference without a device."""
import contextlib
import gc

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hfp4  # noqa: E402
import hfp4._lib as L  # noqa: E402
import hfp4.deep_gemm as dg  # noqa: E402
import dg_math_ref as R  # noqa: E402


class _FakeCuda(torch.Tensor):
    @property
    def is_cuda(self):
        return True


def fc(t):
    return t.as_subclass(_FakeCuda)


class _Emulated:
    def __init__(self, real):
        self.real = real
        self.calls = []
        self.capturing = False

    def __getattr__(self, name):
        real = self.real
        if name == "hfp4_gemm":
            def gemm(pp, stream):
                self.calls.append(("gemm", stream))
                self.expected_m = pp._obj.expected_m
                self.d_padding = pp._obj.d_padding
                return real.hfp4_ref_gemm(pp, 0)
            return gemm
        if name == "hfp4_repack_sm90":
            def repack(w, g, sdt, dst, n, out, stream):
                self.calls.append(("repack", stream))
                return real.hfp4_ref_repack_sm90(w, g, sdt, dst, n, out)
            return repack
        if name == "hfp4_moe_forward_gpu":  # (the experts backend's one-call layer: its GEMMs run inside C)
            def forward(pp, stream):
                self.calls.append(("forward", stream))
                return real.hfp4_moe_forward(pp)
            return forward
        if name.endswith("_gpu"):
            cpu = getattr(real, name[:-4])
            return lambda *a: cpu(*a[:-1])
        return getattr(real, name)


@pytest.fixture
def emu(monkeypatch):
    e = _Emulated(L.lib())
    monkeypatch.setattr(L, "lib", lambda: e)
    monkeypatch.setattr(dg, "_stream", lambda device: 0x1234)
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: e.capturing)
    dg.clear_weight_cache()
    dg.release_graph_weights()
    yield e
    dg.clear_weight_cache()
    dg.release_graph_weights()


def _acts(seed, shape, gran_k=128, packed=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).reshape(-1, shape[-1])
    q, sf = dg.utils.per_token_cast_to_fp8(x, True, gran_k, packed)
    return q.reshape(shape), sf.reshape(tuple(shape[:-1]) + tuple(sf.shape[-1:]))


def _weights(seed, groups, n, k, kind="e8m0"):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(groups * n, k, generator=g) * 0.05
    q, sf = dg.utils.per_token_cast_to_fp4(w, kind != "fp32", 32, kind == "packed")
    if kind in ("e8m0", "u8"):
        sf = (sf.view(torch.int32) >> 23).to(torch.uint8)
        if kind == "e8m0":
            sf = sf.view(torch.float8_e8m0fnu)
    return q.reshape(groups, n, k // 2), sf.reshape(groups, n, sf.shape[-1])


def _np(t):
    t = t.detach()
    if t.element_size() == 1:
        t = t.view(torch.uint8)
    return t.contiguous().numpy()


def _deq_a(a, sfa, gran_k):
    return R.dequant_fp8(_np(a), _np(sfa), gran_k)


def _deq_b(b, sfb):
    return R.dequant_fp4(_np(b), _np(sfb))


def _check(got, ref, rows=None):
    got = got.detach().float().numpy().astype(np.float64)
    if rows is not None:
        got, ref = got[rows], ref[rows]
    assert np.linalg.norm(got - ref) <= 2e-3 * np.linalg.norm(ref) + 1e-30


@pytest.mark.parametrize("kind", ["fp32", "e8m0", "u8", "packed"])
@pytest.mark.parametrize("sfa_form", ["k-major", "mn-major", "packed32", "packed32-mn-major"])
def test_dense_scale_forms(emu, kind, sfa_form):
    m, n, k = 37, 64, 512
    gran = 32 if sfa_form.startswith("packed") else 128
    a, sfa = _acts(1, (m, k), gran, sfa_form.startswith("packed"))
    sfa_in = dg.get_mn_major_tma_aligned_tensor(sfa) if sfa_form.endswith("mn-major") else sfa
    if sfa_form.endswith("mn-major"):
        assert sfa_in.stride() == (1, R.align(m, 4))
    b, sfb = _weights(2, 1, n, k, kind)
    d = fc(torch.full((m, n), float("nan"), dtype=torch.bfloat16))
    dg.fp8_fp4_gemm_nt((fc(a), fc(sfa_in)), (fc(b[0]), fc(sfb[0])), d, recipe_a=(1, gran), recipe_b=(1, 32))
    _check(d, _deq_a(a, sfa, gran) @ _deq_b(b[0], sfb[0]).T)
    assert [c[0] for c in emu.calls] == ["repack", "gemm"] and all(c[1] == 0x1234 for c in emu.calls)


def test_transformers_coerced_weight_scales(emu):
    # transformers' _coerce_sf_for_kernel: e8m0 [N, K/32] viewed as int32 [N, K/128], MN-major TMA-aligned
    m, n, k = 20, 96, 768
    a, sfa = _acts(3, (m, k), 32, True)
    b, sfb = _weights(4, 1, n, k, "e8m0")
    words = sfb[0].view(torch.int32)
    mn = torch.empty_strided(tuple(words.shape), (1, R.align(n, 4)), dtype=torch.int32)
    mn.copy_(words)
    d = fc(torch.empty(m, n, dtype=torch.bfloat16))
    dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(b[0]), fc(mn)), d, recipe=(1, 1, 32))
    _check(d, _deq_a(a, sfa, 32) @ _deq_b(b[0], sfb[0]).T)


def test_c_and_fp32_output(emu):
    m, n, k = 21, 64, 256
    a, sfa = _acts(5, (m, k))
    b, sfb = _weights(6, 1, n, k)
    ref = _deq_a(a, sfa, 128) @ _deq_b(b[0], sfb[0]).T
    c = torch.randn(m, n)
    for cc in (c, c.t().contiguous().t()):  # same strides as D, and other strides (copied into D first)
        d = fc(torch.empty(m, n))
        dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(b[0]), fc(sfb[0])), d, c=fc(cc))
        _check(d, ref + c.numpy())
    d = fc(c.clone())
    dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(b[0]), fc(sfb[0])), d, c=d)
    _check(d, ref + c.numpy())
    # a rejected call leaves D untouched (the C copy is deferred to the launch)
    d = fc(torch.zeros(m, n))
    with pytest.raises(hfp4.InvalidArgument):
        dg.fp8_fp4_gemm_nt((fc(a), fc(sfa[:, :1])), (fc(b[0]), fc(sfb[0])), d, c=fc(c.t().contiguous().t()))
    assert (d == 0).all()


def test_strided_operands(emu):
    m, n, k = 9, 64, 256
    a, sfa = _acts(7, (m, k + 64))
    a, sfa = a[:, :k], sfa[:, :k // 128]
    b, sfb = _weights(8, 1, n, k)
    d = fc(torch.full((m, n + 8), float("nan"), dtype=torch.bfloat16))
    dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(b[0]), fc(sfb[0])), d[:, :n])
    _check(d[:, :n], _deq_a(a, sfa, 128) @ _deq_b(b[0], sfb[0]).T)
    assert torch.isnan(d[:, n:].float()).all()


def test_contiguous_and_psum(emu):
    G, n, k = 4, 64, 256
    ids = []
    for e, cnt in [(0, 20), (2, 150), (3, 0), (1, 128)]:
        ids += [e] * cnt + [-1] * (R.align(cnt, 128) - cnt)
    ids = torch.tensor(ids, dtype=torch.int32)
    m = ids.numel()
    a, sfa = _acts(9, (m, k))
    a.view(torch.uint8)[ids < 0] = 0
    b, sfb = _weights(10, G, n, k, "packed")
    d = fc(torch.full((m, n), float("nan"), dtype=torch.bfloat16))
    dg.m_grouped_fp8_fp4_gemm_nt_contiguous((fc(a), fc(sfa)), (fc(b), fc(sfb)), d, fc(ids))
    ad, bd = _deq_a(a, sfa, 128), _deq_b(b, sfb)
    for e in range(G):
        _check(d, ad @ bd[e].T, rows=(ids == e).numpy())
    assert (d[ids < 0] == 0).all()

    ends = torch.tensor([100, 300, 390], dtype=torch.int32)
    b, sfb = _weights(11, 3, n, k)
    d = fc(torch.full((m, n), float("nan"), dtype=torch.bfloat16))
    dg.m_grouped_fp8_fp4_gemm_nt_contiguous((fc(a), fc(sfa)), (fc(b), fc(sfb)), d, fc(ends), use_psum_layout=True,
                                            expected_m_for_psum_layout=130)
    bd, start = _deq_b(b, sfb), 0
    for g, end in enumerate(ends.tolist()):
        rows = np.zeros(m, bool)
        rows[start:end] = True
        _check(d, ad @ bd[g].T, rows=rows)
        start = R.align(end, 128)


def test_contiguous_ensure_zero_padding(emu):
    # DeepGEMM's ensure_zero_padding reaches the problem as d_padding (False: D's padding rows are left
    # unspecified, for callers that drop them); real rows are the same either way
    G, n, k = 2, 64, 256
    ids = torch.tensor([0] * 3 + [-1] * 125 + [1] * 2 + [-1] * 126, dtype=torch.int32)
    m = ids.numel()
    a, sfa = _acts(17, (m, k))
    b, sfb = _weights(18, G, n, k)
    ad, bd = _deq_a(a, sfa, 128), _deq_b(b, sfb)
    for flag, want in [(True, L.D_PADDING_ZERO), (False, L.D_PADDING_ANY)]:
        d = fc(torch.full((m, n), float("nan"), dtype=torch.bfloat16))
        dg.m_grouped_fp8_fp4_gemm_nt_contiguous((fc(a), fc(sfa)), (fc(b), fc(sfb)), d, fc(ids),
                                                ensure_zero_padding=flag)
        assert emu.d_padding == want
        for e in range(G):
            _check(d, ad @ bd[e].T, rows=(ids == e).numpy())
    # the masked layout has no padding rows: it never sets the field
    assert L.hfp4_gemm_problem().d_padding == L.D_PADDING_ZERO


def test_contiguous_expected_m_hint(emu):
    # hfp4's expected_m keyword reaches the problem (DeepGEMM's API has none: M / G decides then)
    G, n, k = 2, 64, 256
    ids = torch.tensor([0] * 3 + [-1] * 125 + [1] * 2 + [-1] * 126, dtype=torch.int32)
    m = ids.numel()
    a, sfa = _acts(15, (m, k))
    a.view(torch.uint8)[ids < 0] = 0
    b, sfb = _weights(16, G, n, k)
    for hint, want in [(None, 0), (2, 2)]:
        d = fc(torch.full((m, n), float("nan"), dtype=torch.bfloat16))
        dg.m_grouped_fp8_fp4_gemm_nt_contiguous((fc(a), fc(sfa)), (fc(b), fc(sfb)), d, fc(ids), expected_m=hint)
        assert emu.expected_m == want
        ad, bd = _deq_a(a, sfa, 128), _deq_b(b, sfb)
        for e in range(G):
            _check(d, ad @ bd[e].T, rows=(ids == e).numpy())
    d = fc(torch.zeros((m, n), dtype=torch.bfloat16))
    for hint in (np.int64(3), torch.tensor(4)):  # what ceil(tokens * top_k / experts) gives in numpy or torch
        dg.m_grouped_fp8_fp4_gemm_nt_contiguous((fc(a), fc(sfa)), (fc(b), fc(sfb)), d, fc(ids), expected_m=hint)
        assert emu.expected_m == int(hint)
    for bad in (-1, 1.5, True, "2", 1 << 31):
        with pytest.raises(hfp4.InvalidArgument, match="expected_m"):
            dg.m_grouped_fp8_fp4_gemm_nt_contiguous((fc(a), fc(sfa)), (fc(b), fc(sfb)), d, fc(ids), expected_m=bad)
    # with the psum layout: the same hint as expected_m_for_psum_layout, which must agree with it
    ends = fc(torch.tensor([3, 131], dtype=torch.int32))
    dg.m_grouped_fp8_fp4_gemm_nt_contiguous((fc(a), fc(sfa)), (fc(b), fc(sfb)), d, ends, use_psum_layout=True,
                                            expected_m=2)
    assert emu.expected_m == 2
    with pytest.raises(hfp4.InvalidArgument, match="disagree"):
        dg.m_grouped_fp8_fp4_gemm_nt_contiguous((fc(a), fc(sfa)), (fc(b), fc(sfb)), d, ends, use_psum_layout=True,
                                                expected_m=2, expected_m_for_psum_layout=5)


@pytest.mark.parametrize("mn_major", [False, True])
def test_masked(emu, mn_major):
    G, m, n, k = 3, 64, 64, 256
    a, sfa = _acts(12, (G, m, k))
    b, sfb = _weights(13, G, n, k)
    sfa_in = dg.get_mn_major_tma_aligned_tensor(sfa) if mn_major else sfa
    masked_m = torch.tensor([64, 0, 17], dtype=torch.int32)
    d = fc(torch.full((G, m, n), float("nan"), dtype=torch.bfloat16))
    dg.m_grouped_fp8_fp4_gemm_nt_masked((fc(a), fc(sfa_in)), (fc(b), fc(sfb)), d, fc(masked_m), expected_m=32)
    for g, mm in enumerate(masked_m.tolist()):
        if mm:
            _check(d[g, :mm], _deq_a(a[g, :mm], sfa[g, :mm], 128) @ _deq_b(b[g], sfb[g]).T)
        assert torch.isnan(d[g, mm:].float()).all()


def test_trivial_cases(emu):
    n, k = 64, 256
    b, sfb = _weights(14, 2, n, k)
    a = fc(torch.empty(0, k, dtype=torch.float8_e4m3fn))
    sfa = fc(torch.empty(0, k // 128))
    dg.fp8_fp4_gemm_nt((a, sfa), (fc(b[0]), fc(sfb[0])), fc(torch.empty(0, n, dtype=torch.bfloat16)))
    dg.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (fc(b), fc(sfb)), fc(torch.empty(0, n, dtype=torch.bfloat16)),
                                            fc(torch.empty(0, dtype=torch.int32)))
    a0, s0 = fc(torch.empty(5, 0, dtype=torch.float8_e4m3fn)), fc(torch.empty(5, 0))
    b0, sb0 = fc(torch.empty(n, 0, dtype=torch.int8)), fc(torch.empty(n, 0))
    d = fc(torch.full((5, n), 3.0))
    dg.fp8_fp4_gemm_nt((a0, s0), (b0, sb0), d)
    assert (d == 0).all()
    c = fc(torch.randn(5, n))
    dg.fp8_fp4_gemm_nt((a0, s0), (b0, sb0), d, c=c)
    assert torch.equal(d, c)
    assert emu.calls == [] and dg.weight_cache_info()["entries"] == 0


def test_weight_cache(emu):
    m, n, k = 16, 64, 256
    a, sfa = _acts(15, (m, k))
    b, sfb = _weights(16, 1, n, k)
    d = fc(torch.empty(m, n, dtype=torch.bfloat16))

    def run():
        dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(b[0]), fc(sfb[0])), d)  # fresh views every call

    def repacks():
        return sum(c[0] == "repack" for c in emu.calls)

    for _ in range(3):
        run()
    assert repacks() == 1 and dg.weight_cache_info()["entries"] == 1
    b[0, 0, 0] ^= 0x11  # in-place write: bumps the version counter shared by the views
    run()
    assert repacks() == 2 and dg.weight_cache_info()["entries"] == 1
    _check(d, _deq_a(a, sfa, 128) @ _deq_b(b[0], sfb[0]).T)
    sfb.view(torch.uint8)[0, 0, 0] += 1  # scales written in place
    run()
    assert repacks() == 3
    _check(d, _deq_a(a, sfa, 128) @ _deq_b(b[0], sfb[0]).T)
    # captured GEMM: a cache hit is pinned; a miss is repacked inside the capture and not cached
    emu.capturing = True
    run()
    b2, sfb2 = _weights(17, 1, n, k)
    dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(b2[0]), fc(sfb2[0])), d)
    emu.capturing = False
    info = dg.weight_cache_info()
    assert repacks() == 4 and info["entries"] == 1 and info["graph_pinned"] == 2
    dg.clear_weight_cache()
    assert dg.weight_cache_info()["graph_pinned"] == 2
    dg.release_graph_weights("cuda:1")  # another device's graphs: these pins stay
    dg.release_graph_weights(1)
    assert dg.weight_cache_info()["graph_pinned"] == 2
    dg.release_graph_weights(fc(a).device)  # this device's
    assert dg.weight_cache_info()["graph_pinned"] == 0
    dg.release_graph_weights()
    run()
    assert dg.weight_cache_info()["entries"] == 1
    del b
    gc.collect()
    assert dg.weight_cache_info()["entries"] == 0  # freed weights drop their entry
    # inference tensors (no version counter)
    with torch.inference_mode():
        bi, si = _weights(18, 1, n, k)
        dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(bi[0]), fc(si[0])), d)
        dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(bi[0]), fc(si[0])), d)
    assert dg.weight_cache_info()["entries"] == 1
    _check(d, _deq_a(a, sfa, 128) @ _deq_b(bi[0], si[0]).T)


def test_alpha(emu):
    # DeepGEMM 2.8's alpha: None (keyword or positional) runs; a value is refused before anything
    # is read or written, so callers fall back
    m, n, k = 8, 64, 256
    a, sfa = _acts(25, (m, k))
    b, sfb = _weights(26, 1, n, k)
    ref = _deq_a(a, sfa, 128) @ _deq_b(b[0], sfb[0]).T
    d = fc(torch.empty(m, n, dtype=torch.bfloat16))
    dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(b[0]), fc(sfb[0])), d, alpha=None)
    _check(d, ref)
    d = fc(torch.empty(m, n, dtype=torch.bfloat16))
    dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(b[0]), fc(sfb[0])), d, None, None, None, None, "nk", False, None)
    _check(d, ref)
    calls = len(emu.calls)
    d = fc(torch.zeros(m, n, dtype=torch.bfloat16))
    for fn, aa, bb in ((dg.fp8_fp4_gemm_nt, (a, sfa), (b[0], sfb[0])),
                       (dg.fp8_gemm_nt, (a, sfa), (b[0], sfb[0])),
                       (dg.fp8_fp4_gemm_nn, (a, sfa), (b[0].t(), sfb[0].t())),
                       (dg.fp8_fp4_gemm_tn, (a.t(), sfa.t()), (b[0].t(), sfb[0].t())),
                       (dg.fp8_fp4_gemm_tt, (a.t(), sfa.t()), (b[0], sfb[0]))):
        with pytest.raises(NotImplementedError, match="alpha"):
            fn(tuple(map(fc, aa)), tuple(map(fc, bb)), d, alpha=2.0)
    assert len(emu.calls) == calls and (d == 0).all()


def test_weight_cache_scales_replaced_at_same_address(emu):
    # a scale tensor freed and replaced by another at the same address (same pointer, shape, dtype
    # and version: only the storage differs) must not hit the entry repacked with the old scales
    m, n, k = 8, 64, 256
    a, sfa = _acts(20, (m, k))
    b, sfb = _weights(21, 1, n, k, "u8")
    b = fc(b[0].clone())
    d = fc(torch.empty(m, n, dtype=torch.bfloat16))
    mem = sfb[0].numpy().copy()  # memory that outlives the tensors viewing it
    s1 = torch.from_numpy(mem)
    ptr, ver = s1.data_ptr(), s1._version
    dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (b, fc(s1)), d)
    del s1
    gc.collect()
    mem += 2  # new scales (x4) written where the old ones were, by a write torch does not see
    s2 = torch.from_numpy(mem)
    assert s2.data_ptr() == ptr and s2._version == ver
    dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (b, fc(s2)), d)
    assert sum(c[0] == "repack" for c in emu.calls) == 2
    _check(d, _deq_a(a, sfa, 128) @ _deq_b(b, s2).T)
    assert dg.weight_cache_info()["entries"] == 1
    del s2
    gc.collect()
    assert dg.weight_cache_info()["entries"] == 0  # freed scales drop their entry too


def test_weight_cache_clear_during_a_repack(emu, monkeypatch):
    # clear_weight_cache() on another thread while a call repacks: the repack serves that call but is
    # not cached (the clear may be meant for exactly these weights); the next call repacks anew
    m, n, k = 8, 64, 256
    a, sfa = _acts(25, (m, k))
    w, s = _weights(26, 1, n, k)
    d = fc(torch.empty(m, n, dtype=torch.bfloat16))
    real_repack = dg.repack_weights

    def repack_then_clear(b, scale_dtype=None):
        out = real_repack(b, scale_dtype)
        dg.clear_weight_cache()
        return out

    monkeypatch.setattr(dg, "repack_weights", repack_then_clear)
    dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(w[0]), fc(s[0])), d)
    _check(d, _deq_a(a, sfa, 128) @ _deq_b(w[0], s[0]).T)
    assert dg.weight_cache_info()["entries"] == 0
    monkeypatch.setattr(dg, "repack_weights", real_repack)
    dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(w[0]), fc(s[0])), d)
    assert dg.weight_cache_info()["entries"] == 1
    assert sum(c[0] == "repack" for c in emu.calls) == 2


def test_weight_cache_in_place_updates(emu, monkeypatch):
    # param.data.copy_() (vLLM/SGLang weight loaders, RL weight syncs) does not bump the version
    # counter: clear_weight_cache() is the documented way to drop the stale repack, and
    # HFP4_WEIGHT_CACHE=0 repacks at every call
    m, n, k = 8, 64, 256
    a, sfa = _acts(22, (m, k))
    w1, s1 = _weights(23, 1, n, k)
    w2, s2 = _weights(24, 1, n, k)
    W = torch.nn.Parameter(w1[0].clone(), requires_grad=False)
    S = torch.nn.Parameter(s1[0].clone(), requires_grad=False)
    d = fc(torch.empty(m, n, dtype=torch.bfloat16))

    def run():
        dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(W.detach()), fc(S.detach())), d)

    def repacks():
        return sum(c[0] == "repack" for c in emu.calls)

    run()
    _check(d, _deq_a(a, sfa, 128) @ _deq_b(w1[0], s1[0]).T)
    W.data.copy_(w2[0])
    S.data.copy_(s2[0])
    dg.clear_weight_cache()
    run()
    assert repacks() == 2
    _check(d, _deq_a(a, sfa, 128) @ _deq_b(w2[0], s2[0]).T)

    monkeypatch.setenv("HFP4_WEIGHT_CACHE", "0")
    assert not dg.weight_cache_enabled()
    dg.clear_weight_cache()
    run()
    W.data.copy_(w1[0])
    S.data.copy_(s1[0])
    run()  # no clear_weight_cache(): repacked anyway
    assert repacks() == 4 and dg.weight_cache_info()["entries"] == 0
    _check(d, _deq_a(a, sfa, 128) @ _deq_b(w1[0], s1[0]).T)
    monkeypatch.setenv("HFP4_WEIGHT_CACHE", "1")
    run()
    run()
    assert repacks() == 5 and dg.weight_cache_info()["entries"] == 1


@pytest.mark.parametrize("sf_kind", ["fp32", "e8m0"])
def test_fp8_weights_dense(emu, sf_kind):
    # DeepGEMM's fp8_gemm_nt on SM90: FP8 weights under 128 x 128 block scales, passed through as they
    # are (no repack); the library runs them where its FP8-weight path is on, the emulation here on
    # the reference
    m, n, k = 19, 200, 384
    a, sfa = _acts(21, (m, k))
    g = torch.Generator().manual_seed(22)
    b, sfb = dg.utils.per_block_cast_to_fp8(torch.randn(n, k, generator=g) * 0.05, sf_kind != "fp32")
    sfb_in = sfb if sf_kind == "fp32" else (sfb.view(torch.int32) >> 23).to(torch.uint8).view(torch.float8_e8m0fnu)
    d = fc(torch.full((m, n), float("nan"), dtype=torch.bfloat16))
    dg.fp8_gemm_nt((fc(a), fc(sfa)), (fc(b), fc(sfb_in)), d)
    wb = R.FP8_TABLE[_np(b)] * np.repeat(np.repeat(sfb.numpy(), 128, axis=0)[:n], 128, axis=1)[:, :k]
    _check(d, _deq_a(a, sfa, 128) @ wb.T)
    assert [c[0] for c in emu.calls] == ["gemm"]  # nothing repacked, nothing cached
    assert dg.weight_cache_info()["entries"] == 0
    with pytest.raises(ValueError, match="sfb"):  # scales of another granularity than the recipe's
        dg.fp8_gemm_nt((fc(a), fc(sfa)), (fc(b), fc(sfb_in)), d, recipe=(1, 1, 128))


def test_fp8_weights_contiguous(emu):
    # DeepGEMM's m_grouped_fp8_gemm_nt_contiguous on SM90: FP8 weights [G, N, K] under 128 x 128 block
    # scales, passed through as they are (no repack, nothing cached); the library runs them in its FP8
    # x FP8 grouped form (opt-in there while untested), the emulation here on the reference
    G, n, k = 3, 200, 384
    ids = []
    for e, cnt in [(0, 20), (2, 150), (1, 128)]:
        ids += [e] * cnt + [-1] * (R.align(cnt, 128) - cnt)
    ids = torch.tensor(ids, dtype=torch.int32)
    m = ids.numel()
    a, sfa = _acts(33, (m, k))
    g = torch.Generator().manual_seed(34)
    pairs = [dg.utils.per_block_cast_to_fp8(torch.randn(n, k, generator=g) * 0.05, False) for _ in range(G)]
    b, sfb = torch.stack([q for q, _ in pairs]), torch.stack([s for _, s in pairs])
    d = fc(torch.full((m, n), float("nan"), dtype=torch.bfloat16))
    dg.m_grouped_fp8_gemm_nt_contiguous((fc(a), fc(sfa)), (fc(b), fc(sfb)), d, fc(ids))
    ad = _deq_a(a, sfa, 128)
    for e in range(G):
        wb = R.FP8_TABLE[_np(b[e])] * np.repeat(np.repeat(sfb[e].numpy(), 128, axis=0)[:n], 128, axis=1)[:, :k]
        _check(d, ad @ wb.T, rows=(ids == e).numpy())
    assert (d[ids < 0] == 0).all()
    assert [c[0] for c in emu.calls] == ["gemm"]  # nothing repacked
    assert dg.weight_cache_info()["entries"] == 0
    with pytest.raises(hfp4.InvalidArgument, match="3D"):  # one expert's [N, K] is not a grouped B
        dg.m_grouped_fp8_gemm_nt_contiguous((fc(a), fc(sfa)), (fc(b[0]), fc(sfb[0])), d, fc(ids))


def test_fp8_weights_masked(emu):
    # DeepGEMM's m_grouped_fp8_gemm_nt_masked on SM90: FP8 weights [G, N, K] under 128 x 128 block
    # scales, passed through as they are; rows from masked_m on are not written
    G, M, n, k = 3, 160, 200, 384
    masked_m = torch.tensor([20, 0, 150], dtype=torch.int32)
    a, sfa = _acts(37, (G, M, k))
    g = torch.Generator().manual_seed(38)
    pairs = [dg.utils.per_block_cast_to_fp8(torch.randn(n, k, generator=g) * 0.05, False) for _ in range(G)]
    b, sfb = torch.stack([q for q, _ in pairs]), torch.stack([s for _, s in pairs])
    d = fc(torch.full((G, M, n), float("nan"), dtype=torch.bfloat16))
    dg.m_grouped_fp8_gemm_nt_masked((fc(a), fc(sfa)), (fc(b), fc(sfb)), d, fc(masked_m), expected_m=64)
    for e, mm in enumerate(masked_m.tolist()):
        wb = R.FP8_TABLE[_np(b[e])] * np.repeat(np.repeat(sfb[e].numpy(), 128, axis=0)[:n], 128, axis=1)[:, :k]
        if mm:
            _check(d[e, :mm], _deq_a(a[e, :mm], sfa[e, :mm], 128) @ wb.T)
        assert torch.isnan(d[e, mm:].float()).all()
    assert [c[0] for c in emu.calls] == ["gemm"]  # nothing repacked
    with pytest.raises(hfp4.InvalidArgument, match="3 groups but b has 1"):  # one expert's [N, K]
        dg.m_grouped_fp8_gemm_nt_masked((fc(a), fc(sfa)), (fc(b[0]), fc(sfb[0])), d, fc(masked_m), 64)


def test_repeat_warning_as_error_leaves_no_waiter(emu):
    # the fourth repack of weights at one address warns; where warnings are errors it raises, and a
    # later call on the same tensors must then repack (or hit) rather than wait for a repack that never
    # finishes
    import threading
    import warnings
    m, n, k = 16, 64, 256
    a, sfa = _acts(23, (m, k))
    b, sfb = _weights(24, 1, n, k)
    d = fc(torch.empty(m, n, dtype=torch.bfloat16))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for _ in range(3):  # (a new scale tensor each call: a repack each)
            dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(b[0]), fc(sfb[0].clone())), d)
        last = fc(sfb[0].clone())
        with pytest.raises(RuntimeWarning, match="repacked 4 times"):
            dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(b[0]), last), d)
    done = []
    t = threading.Thread(target=lambda: done.append(dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (fc(b[0]), last), d)))
    t.daemon = True
    t.start()
    t.join(20)
    assert done, "the call after the raised warning waited for a repack that never ends"


def test_errors(emu):
    m, n, k = 16, 64, 256
    a, sfa = _acts(19, (m, k))
    b, sfb = _weights(20, 1, n, k)
    d = fc(torch.empty(m, n, dtype=torch.bfloat16))
    A, S, B, SB = fc(a), fc(sfa), fc(b[0]), fc(sfb[0])
    with pytest.raises(NotImplementedError):  # FP8 weights in the NN form: no hfp4 kernel
        dg.m_grouped_fp8_fp4_gemm_nn_contiguous((A, S), (fc(torch.zeros(1, k, n, dtype=torch.float8_e4m3fn)),
                                                         fc(torch.ones(1, 2, 1))),
                                                d, fc(torch.zeros(m, dtype=torch.int32)))
    for recipe in ((1, 128, 128), (1, 1, 128)):
        with pytest.raises(NotImplementedError):
            dg.fp8_fp4_gemm_nt((A, S), (B, SB), d, recipe=recipe)
    with pytest.raises(NotImplementedError):
        dg.fp8_fp4_gemm_nt((fc(torch.empty(k, m, dtype=torch.float8_e4m3fn)).t(), S), (B, SB), d)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        dg.fp8_fp4_gemm_nt((A, S), (B, SB), d, recipe_a=(1, 128))
    assert "Assertion" in str(ei.value)
    with pytest.raises(ValueError, match="sfa"):
        dg.fp8_fp4_gemm_nt((A, S[:, :1]), (B, SB), d)
    with pytest.raises(ValueError, match="K = 128"):
        dg.fp8_fp4_gemm_nt((A, S), (fc(b[0, :, :64]), fc(sfb[0, :, :4])), d)
    with pytest.raises(ValueError, match="grouped_layout"):
        dg.m_grouped_fp8_fp4_gemm_nt_contiguous((A, S), (fc(b), fc(sfb)), d, fc(torch.zeros(m, dtype=torch.int64)))
    with pytest.raises(ValueError, match="scale_dtype"):
        dg.repack_weights((B, SB), scale_dtype="bf16")
    assert dg.weight_cache_info()["entries"] == 0


def test_transposed_layouts(emu):
    # DeepGEMM's nn / tn / tt forms and m_grouped nn: the operands passed transposed, with their
    # scales; on SM90 the views they reach the NT form as must be K-major (here: transposed views)
    m, n, k = 24, 64, 256
    a, sfa = _acts(21, (m, k))
    b, sfb = _weights(22, 2, n, k)
    ref = _deq_a(a, sfa, 128) @ _deq_b(b[0], sfb[0]).T
    for name, aa, bb in (("nn", (a, sfa), (b[0].T, sfb[0].T)), ("tn", (a.T, sfa.T), (b[0].T, sfb[0].T)),
                         ("tt", (a.T, sfa.T), (b[0], sfb[0]))):
        d = fc(torch.full((m, n), float("nan"), dtype=torch.bfloat16))
        getattr(dg, "fp8_fp4_gemm_" + name)((fc(aa[0]), fc(aa[1])), (fc(bb[0]), fc(bb[1])), d)
        _check(d, ref)
        assert getattr(dg, "fp8_gemm_" + name) is getattr(dg, "fp8_fp4_gemm_" + name)
    ids = torch.tensor([0] * 20 + [-1] * 108 + [1] * 7 + [-1] * 121, dtype=torch.int32)
    ag, sfag = _acts(23, (ids.numel(), k))
    d = fc(torch.full((ids.numel(), n), float("nan"), dtype=torch.bfloat16))
    dg.m_grouped_fp8_fp4_gemm_nn_contiguous((fc(ag), fc(sfag)), (fc(b.transpose(1, 2)), fc(sfb.transpose(1, 2))),
                                            d, fc(ids))
    for e in range(2):
        _check(d, _deq_a(ag, sfag, 128) @ _deq_b(b[e], sfb[e]).T, rows=(ids == e).numpy())
    # an MN-major FP4 B ([K/2, N] laid out as such) is an SM100 form: refused, naming b
    with pytest.raises(NotImplementedError, match="b must be K-major"):
        dg.fp8_fp4_gemm_nn((fc(a), fc(sfa)), (fc(b[0].T.contiguous()), fc(sfb[0].T.contiguous())),
                           fc(torch.empty(m, n, dtype=torch.bfloat16)))
    # DeepGEMM's run-time switches: accepted, no effect on hfp4's launches
    dg.set_pdl(True)
    assert dg.get_pdl() is True
    dg.set_pdl(False)
    dg.set_ignore_compile_dims(True)


def test_weight_cache_warns_when_it_repacks_at_every_call(emu):
    # a new scale tensor at every call (a per-call conversion of the stored scales) repacks at every
    # call: correct, and the fourth repack of the same weights warns once, naming the way out
    import warnings
    m, n, k = 8, 64, 256
    a, sfa = _acts(22, (m, k))
    b, sfb = _weights(23, 1, n, k, "u8")
    b = fc(b[0].clone())
    d = fc(torch.empty(m, n, dtype=torch.bfloat16))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(6):
            dg.fp8_fp4_gemm_nt((fc(a), fc(sfa)), (b, fc(sfb[0].clone())), d)
            gc.collect()
    assert sum(c[0] == "repack" for c in emu.calls) == 6
    msgs = [str(c.message) for c in caught if "repacked" in str(c.message)]
    assert len(msgs) == 1 and "repack_weights" in msgs[0]
    _check(d, _deq_a(a, sfa, 128) @ _deq_b(b, sfb[0]).T)
