"""hfp4.experts (the transformers experts backend) on torch CPU tensors through the emulated library
(test_deep_gemm_emulated's fixture: hfp4_gemm -> hfp4_ref_gemm), against a reference that routes
token by token; and its argument checks. Its GPU test is in test_deep_gemm_gpu.py."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hfp4  # noqa: E402
import hfp4.deep_gemm as dg  # noqa: E402
import hfp4.experts as X  # noqa: E402
from test_deep_gemm_emulated import _weights, emu, fc  # noqa: E402,F401  (emu: the fixture)


class _Experts:
    """What experts_forward reads of transformers' FP8Experts (FP4 weights, gate|up stacked)."""

    def __init__(self, E, H, I, seed, wrap=fc, limit=10.0):
        w1, s1 = _weights(seed, E, 2 * I, H)
        w2, s2 = _weights(seed + 1, E, H, I)
        self.gate_up_proj, self.gate_up_proj_scale_inv = wrap(w1), wrap(s1)
        self.down_proj, self.down_proj_scale_inv = wrap(w2), wrap(s2)
        self.num_experts, self.has_gate, self.activation_scheme, self.limit = E, True, "dynamic", limit
        self.act_fn = torch.nn.functional.silu

    def _apply_gate(self, gate_up):
        gate, up = gate_up.chunk(2, dim=-1)
        gate = gate.clamp(max=self.limit)
        up = up.clamp(min=-self.limit, max=self.limit)
        return self.act_fn(gate) * up


class _FP8Experts(_Experts):
    """The same module with FP8 expert weights under 128 x 128 block scales (an FP8 checkpoint's
    FP8Experts: block_size (128, 128), scales [E, N / 128, K / 128] FP32)"""

    def __init__(self, E, H, I, seed, wrap=fc, limit=10.0):
        super().__init__(E, H, I, seed, wrap, limit)
        g = torch.Generator().manual_seed(seed)
        for name, n, kk in (("gate_up_proj", 2 * I, H), ("down_proj", H, I)):
            pairs = [dg.utils.per_block_cast_to_fp8(torch.randn(n, kk, generator=g) * 0.05, False) for _ in range(E)]
            setattr(self, name, wrap(torch.stack([q for q, _ in pairs])))
            setattr(self, name + "_scale_inv", wrap(torch.stack([s for _, s in pairs])))
        self.block_size = (128, 128)


def _dequant_fp4(w, sf):
    import dg_math_ref as R
    return torch.from_numpy(R.dequant_fp4(w.view(torch.uint8).numpy(), sf.view(torch.uint8).numpy()))


def _dequant_fp8(w, sf):
    """FP8 weights [N, K] under 128 x 128 block scales, decoded exactly (float64)"""
    n, kk = w.shape
    s = sf.double().repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :kk]
    return w.double() * s


def _qdq(x, gran_k):
    """x quantized as experts_forward does (per token, FP32 scales), then decoded, in float64"""
    q, sf = dg.per_token_cast_to_fp8(x, use_ue8m0=False, gran_k=gran_k)
    return (q.double().view(q.shape[0], -1, gran_k) * sf.double().unsqueeze(2)).view(q.shape)


def _reference(mod, x, idx, wts, gran_k):
    """token by token: sum over its experts e in [0, E) of w * down(gate(up(x))), BF16 GEMM outputs"""
    E = mod.num_experts
    deq = _dequant_fp8 if mod.gate_up_proj.dtype == torch.float8_e4m3fn else _dequant_fp4
    w1 = [deq(mod.gate_up_proj[e], mod.gate_up_proj_scale_inv[e]) for e in range(E)]
    w2 = [deq(mod.down_proj[e], mod.down_proj_scale_inv[e]) for e in range(E)]
    out = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(idx.shape[1]):
            e = int(idx[t, j])
            if not 0 <= e < E:
                continue
            h = (_qdq(x[t:t + 1], gran_k) @ w1[e].T).to(torch.bfloat16)
            h = mod._apply_gate(h)
            y = (_qdq(h, gran_k) @ w2[e].T).to(torch.bfloat16)
            out[t] += float(wts[t, j]) * y[0].double()
    return out


def _use_glue(monkeypatch, mod, glue):
    """glue "torch": HFP4_EXPERTS_GLUE=0; "library": the hfp4_moe_* calls with the module's own
    _apply_gate (HFP4_EXPERTS_FUSED_GATE=0); "fused": the same with the activation fused into the
    quantization (the probe finds this module's clamped SwiGLU)"""
    monkeypatch.setenv("HFP4_EXPERTS_GLUE", "0" if glue == "torch" else "1")
    monkeypatch.setenv("HFP4_EXPERTS_FUSED_GATE", "1" if glue == "fused" else "0")
    assert X._fused_swiglu_limit(mod) == (mod.limit if glue == "fused" else None)


@pytest.mark.parametrize("glue", ["torch", "library", "fused", "fused-interleaved"])
@pytest.mark.parametrize("gran_k", [128, 32])
@pytest.mark.parametrize("tokens,k", [(1, 2), (9, 3)])
def test_matches_token_by_token(emu, monkeypatch, glue, gran_k, tokens, k):
    # (the library's glue here through its CPU forms; "fused-interleaved": a module whose gate|up
    # rows are interleaved, as newer transformers store them)
    E, H, I = 4, 256, 128
    mod = (_InterleavedExperts if glue.endswith("interleaved") else _Experts)(E, H, I, 40 + tokens)
    _use_glue(monkeypatch, mod, glue.split("-")[0])
    g = torch.Generator().manual_seed(7 + tokens)
    x = torch.randn(tokens, H, generator=g).to(torch.bfloat16)
    idx = torch.randint(0, E, (tokens, k), generator=g)
    idx[0, -1] = E  # an expert-parallel sentinel (another rank's expert)
    if tokens > 1:
        idx[1, 0] = -1
    wts = torch.rand(tokens, k, generator=g)
    got = X.experts_forward(mod, fc(x), fc(idx), fc(wts), gran_k=gran_k)
    assert got.dtype == torch.bfloat16 and tuple(got.shape) == (tokens, H)
    ref = _reference(mod, x, idx, wts, gran_k)
    got = got.double()
    assert torch.isfinite(got).all()
    assert torch.linalg.norm(got - ref) <= 1e-2 * torch.linalg.norm(ref)
    # the two GEMMs ran on the device path with the padding left alone and the rows-per-expert hint;
    # the fused SwiGLU runs the whole layer in one call (hfp4_moe_forward_gpu, whose CPU form composes
    # the same steps: tests/test_moe_forward.c)
    if glue.startswith("fused"):
        assert [c[0] for c in emu.calls if c[0] != "repack"] == ["forward"]
    else:
        assert emu.d_padding == hfp4._lib.D_PADDING_ANY and emu.expected_m >= 1


@pytest.mark.parametrize("glue", ["torch", "library", "fused"])
@pytest.mark.parametrize("tokens,k", [(1, 2), (9, 3)])
def test_fp8_weights_match_token_by_token(emu, monkeypatch, glue, tokens, k):
    # FP8 expert weights (an FP8 checkpoint's FP8Experts): the library's FP8 x FP8 grouped GEMMs (here
    # their CPU forms), nothing repacked
    E, H, I = 4, 256, 128
    mod = _FP8Experts(E, H, I, 60 + tokens)
    _use_glue(monkeypatch, mod, glue)
    g = torch.Generator().manual_seed(9 + tokens)
    x = torch.randn(tokens, H, generator=g).to(torch.bfloat16)
    idx = torch.randint(0, E, (tokens, k), generator=g)
    idx[0, -1] = E  # an expert-parallel sentinel
    wts = torch.rand(tokens, k, generator=g)
    got = X.experts_forward(mod, fc(x), fc(idx), fc(wts)).double()
    ref = _reference(mod, x, idx, wts, 128)
    assert torch.isfinite(got).all()
    assert torch.linalg.norm(got - ref) <= 1e-2 * torch.linalg.norm(ref)
    assert all(c[0] != "repack" for c in emu.calls)
    if glue != "torch":  # (the plan is kept: a second call builds nothing and gives the same result)
        again = X.experts_forward(mod, fc(x), fc(idx), fc(wts)).double()
        assert torch.equal(again, got)
    with pytest.raises(NotImplementedError, match="gran_k = 32"):  # (the FP8 kernels take 1 x 128 scales)
        X.experts_forward(mod, fc(x), fc(idx), fc(wts), gran_k=32)
    mod.block_size = (1, 128)
    with pytest.raises(NotImplementedError, match="block_size"):
        X.experts_forward(mod, fc(x), fc(idx), fc(wts))
    mod.block_size = 64
    with pytest.raises(NotImplementedError, match="block_size"):
        X.experts_forward(mod, fc(x), fc(idx), fc(wts))


def test_fp8_weights_refusals(emu, monkeypatch):
    # what an FP8 checkpoint's experts may hold that the FP8 x FP8 kernels do not take: Unsupported
    # (NotImplementedError, so transformers falls back), naming the tensor; wrong shapes: ValueError
    x, idx, w = fc(torch.randn(2, 256).to(torch.bfloat16)), fc(torch.zeros(2, 1, dtype=torch.int64)), fc(torch.ones(2, 1))
    mod = _FP8Experts(2, 256, 128, 5)
    mod.down_proj_scale_inv = fc(torch.ones(2, 1, 1))  # a scale an expert (no block size)
    with pytest.raises(NotImplementedError, match="down_proj_scale_inv"):
        X.experts_forward(mod, x, idx, w)
    mod = _FP8Experts(2, 256, 128, 5)
    mod.gate_up_proj_scale_inv = fc(torch.ones(2, 2, 3))  # a block grid of the wrong shape
    with pytest.raises(ValueError, match="gate_up_proj_scale_inv"):
        X.experts_forward(mod, x, idx, w)
    mod = _FP8Experts(2, 256, 96, 5)  # an intermediate size that is not a multiple of 128
    with pytest.raises(NotImplementedError, match="multiples of 128"):
        X.experts_forward(mod, x, idx, w)
    mod = _FP8Experts(2, 256, 128, 5)  # the plan is kept with the weight cache off too (it caches nothing)
    monkeypatch.setenv("HFP4_WEIGHT_CACHE", "0")
    X.experts_forward(mod, x, idx, w)
    plan = X._plans.get(mod)
    X.experts_forward(mod, x, idx, w)
    assert plan is not None and X._plans.get(mod) is plan


def test_routed_layout():
    # segments of 128 rows per hit expert, in expert order, unrouted ids (< 0, >= E) last and padding
    ids = torch.tensor([2, 0, 5, 2, -1, 0, 2])
    perm, sorted_ids, pos, layout, m_pad = X._routed_layout(ids, 3)
    assert sorted_ids.tolist() == [0, 0, 2, 2, 2, 3, 3]
    assert ids[perm].tolist()[:5] == [0, 0, 2, 2, 2]
    assert pos.tolist()[:5] == [0, 1, 128, 129, 130] and min(pos.tolist()[5:]) >= 256
    assert m_pad == 7 + 3 * 127 and max(pos.tolist()) < m_pad
    lay = layout.tolist()
    assert lay[:2] == [0, 0] and lay[128:131] == [2, 2, 2]
    assert all(v == -1 for i, v in enumerate(lay) if i not in (0, 1, 128, 129, 130))


def test_refusals(emu):
    mod = _Experts(2, 128, 64, 3)
    x, idx, w = fc(torch.randn(2, 128)), fc(torch.zeros(2, 1, dtype=torch.int64)), fc(torch.ones(2, 1))
    mod.activation_scheme = "static"
    with pytest.raises(NotImplementedError, match="static"):
        X.experts_forward(mod, x, idx, w)
    mod.activation_scheme = "dynamic"
    mod.down_proj = fc(torch.zeros(2, 128, 64, dtype=torch.float8_e4m3fn))
    with pytest.raises(NotImplementedError, match="down_proj.dtype"):
        X.experts_forward(mod, x, idx, w)
    mod = _Experts(2, 128, 64, 3)
    with pytest.raises(ValueError, match="top_k_weights"):
        X.experts_forward(mod, x, idx, fc(torch.ones(2, 2)))
    with pytest.raises(ValueError, match="top_k_index"):
        X.experts_forward(mod, x, fc(torch.zeros(2, 1)), w)
    with pytest.raises(ValueError, match="gran_k"):
        X.experts_forward(mod, x, idx, w, gran_k=64)
    # no tokens: zeros of the right shape, no GEMM
    empty = X.experts_forward(mod, fc(torch.randn(0, 128)), fc(torch.zeros(0, 1, dtype=torch.int64)),
                              fc(torch.ones(0, 1)))
    assert tuple(empty.shape) == (0, 128) and not emu.calls


def test_refuses_post_expert_norm_and_activation_formats(emu):
    # newer transformers' FineGrainedExperts: a per-expert output norm, an explicit activation_format;
    # what hfp4 does not compute is refused with NotImplementedError so transformers falls back
    x, idx, w = fc(torch.randn(2, 128)), fc(torch.zeros(2, 1, dtype=torch.int64)), fc(torch.ones(2, 1))
    mod = _Experts(2, 128, 64, 3)
    mod.has_post_expert_norm, mod.post_expert_norm = False, None  # (as transformers initializes them)
    assert X.experts_forward(mod, x, idx, w).shape == (2, 128)
    mod.post_expert_norm = torch.nn.LayerNorm(128)
    with pytest.raises(NotImplementedError, match="post_expert_norm"):
        X.experts_forward(mod, x, idx, w)
    mod.post_expert_norm = None
    mod.has_post_expert_norm = True
    with pytest.raises(NotImplementedError, match="post_expert_norm"):
        X.experts_forward(mod, x, idx, w)
    mod.has_post_expert_norm = False
    for fmt in ("bf16", "mxfp4", "nvfp4", "something"):
        mod.activation_format = fmt
        with pytest.raises(NotImplementedError, match="activation_format"):
            X.experts_forward(mod, x, idx, w)
    for fmt in (None, "fp8", "mxfp8"):
        mod.activation_format = fmt
        assert X.experts_forward(mod, x, idx, w).shape == (2, 128)
    # (the four accepted calls ran: this module's clamped SwiGLU takes the one-call layer)
    assert sum(c[0] == "forward" for c in emu.calls) == 4


def test_expert_count_must_match_weights(emu):
    x, idx, w = fc(torch.randn(2, 128)), fc(torch.zeros(2, 1, dtype=torch.int64)), fc(torch.ones(2, 1))
    mod = _Experts(2, 128, 64, 3)
    mod.num_experts = 3  # (ids up to 2 would be routed to an expert the weights do not hold)
    with pytest.raises(ValueError, match=r"num_experts = 3.*gate_up_proj has shape \(2, 128, 64\).*down_proj"):
        X.experts_forward(mod, x, idx, w)
    mod = _Experts(2, 128, 64, 3)
    mod.down_proj, mod.down_proj_scale_inv = mod.down_proj[:1], mod.down_proj_scale_inv[:1]
    with pytest.raises(ValueError, match="num_experts = 2"):
        X.experts_forward(mod, x, idx, w)
    assert not emu.calls


@pytest.mark.parametrize("glue", ["torch", "library", "fused"])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32])
def test_narrow_expert_ids(emu, monkeypatch, glue, dtype):
    # routers may hand narrow integer ids; every glue takes them, sentinels included
    E, H, I = 4, 256, 128
    mod = _Experts(E, H, I, 5)
    _use_glue(monkeypatch, mod, glue)
    g = torch.Generator().manual_seed(3)
    T, k = 5, 3
    x = torch.randn(T, H, generator=g).to(torch.bfloat16)
    idx = torch.randint(0, E, (T, k), generator=g)
    idx[0, 0], idx[1, 1] = E, 100  # expert-parallel sentinels
    if dtype != torch.uint8:
        idx[2, 2] = -1
    wts = torch.rand(T, k, generator=g)
    ref = _reference(mod, x, idx, wts, 128)
    got = X.experts_forward(mod, fc(x), fc(idx.to(dtype)), fc(wts)).double()
    assert torch.isfinite(got).all()
    assert torch.linalg.norm(got - ref) <= 1e-2 * torch.linalg.norm(ref)


def _forward_matches(mod, T, k, seed, gran_k=128):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, mod.gate_up_proj.shape[-1] * 2, generator=g).to(torch.bfloat16)
    idx = torch.randint(0, mod.num_experts, (T, k), generator=g)
    wts = torch.rand(T, k, generator=g)
    got = X.experts_forward(mod, fc(x), fc(idx), fc(wts), gran_k=gran_k).double()
    ref = _reference(mod, x, idx, wts, gran_k)
    assert torch.isfinite(got).all()
    assert torch.linalg.norm(got - ref) <= 1e-2 * torch.linalg.norm(ref)


def _repacks(emu):
    return sum(c[0] == "repack" for c in emu.calls)


@pytest.mark.parametrize("glue", ["library", "fused"])
def test_plan_is_kept_and_renewed(emu, monkeypatch, glue):
    # the library-glue forward keeps the module's repacked weights and GEMM descriptors between calls
    # (eager decode's host cost) and renews them whenever the weight cache would: weights updated in
    # place, a parameter replaced, clear_weight_cache(); shapes (tokens, gran_k) change the descriptors
    E, H, I = 4, 256, 128
    mod = _Experts(E, H, I, 11)
    _use_glue(monkeypatch, mod, glue)
    _forward_matches(mod, 3, 2, 1)
    assert _repacks(emu) == 2 and X._plans.get(mod) is not None
    plan = X._plans[mod]
    _forward_matches(mod, 3, 2, 2)
    _forward_matches(mod, 5, 3, 3)  # (another shape: new descriptors, same weights)
    _forward_matches(mod, 1, 1, 4, gran_k=32)
    assert _repacks(emu) == 2 and X._plans[mod] is plan
    with torch.no_grad():  # in place, through the version counter
        mod.down_proj.copy_(_Experts(E, H, I, 12).down_proj)
    _forward_matches(mod, 3, 2, 5)
    assert _repacks(emu) == 3
    other = _Experts(E, H, I, 13)  # a parameter replaced by another tensor
    mod.gate_up_proj, mod.gate_up_proj_scale_inv = other.gate_up_proj, other.gate_up_proj_scale_inv
    _forward_matches(mod, 3, 2, 6)
    assert _repacks(emu) == 4
    mod.down_proj_scale_inv = fc(mod.down_proj_scale_inv.clone())  # new scales only
    _forward_matches(mod, 2, 2, 7)
    assert _repacks(emu) == 5
    plan = X._plans[mod]  # (the same weights on another device: not this plan)
    args = (mod.gate_up_proj, mod.gate_up_proj_scale_inv, mod.down_proj, mod.down_proj_scale_inv)
    assert plan.weights(E, True, plan.device, *args) is not None
    assert plan.weights(E, True, torch.device("meta"), *args) is None
    monkeypatch.setenv("HFP4_WEIGHT_CACHE", "0")  # (set after the plan was kept: a repack per call again)
    n = _repacks(emu)
    _forward_matches(mod, 2, 2, 9)
    assert _repacks(emu) == n + 2
    monkeypatch.setenv("HFP4_WEIGHT_CACHE", "1")
    dg.clear_weight_cache()
    assert X._plans.get(mod) is None
    _forward_matches(mod, 2, 2, 8)
    assert _repacks(emu) == 9
    # a module whose weights no longer fit its plan is checked again
    mod.num_experts = 3
    with pytest.raises(ValueError, match="num_experts = 3"):
        X.experts_forward(mod, fc(torch.randn(1, H)), fc(torch.zeros(1, 1, dtype=torch.int64)), fc(torch.ones(1, 1)))


def test_plan_keeps_no_weights_the_cache_let_go(emu, monkeypatch):
    # the plan holds the repacked buffers weakly: once the cache drops them (their weights freed),
    # a module that does not run again keeps nothing alive
    import gc
    E, H, I = 4, 256, 128
    mod = _Experts(E, H, I, 41)
    _use_glue(monkeypatch, mod, "fused")
    _forward_matches(mod, 2, 2, 1)
    plan = X._plans[mod]
    assert all(r() is not None for r in plan.w_refs)
    other = _Experts(E, H, I, 42)  # (weights reloaded as new tensors; the old ones freed)
    mod.gate_up_proj, mod.gate_up_proj_scale_inv = other.gate_up_proj, other.gate_up_proj_scale_inv
    mod.down_proj, mod.down_proj_scale_inv = other.down_proj, other.down_proj_scale_inv
    del other
    gc.collect()
    dg.weight_cache_info()  # (any cache operation drops the entries of freed weights)
    assert all(r() is None for r in plan.w_refs)
    _forward_matches(mod, 2, 2, 2)


def test_plan_not_kept_across_a_clear(emu, monkeypatch):
    # a clear_weight_cache() (from another thread) while a plan is being built: that plan is used for
    # its own call but not kept, and the next call repacks
    E, H, I = 4, 256, 128
    mod = _Experts(E, H, I, 51)
    _use_glue(monkeypatch, mod, "fused")
    real, cleared = dg._weights, []

    def weights_then_clear(*args):
        w = real(*args)
        if not cleared:
            cleared.append(1)
            dg.clear_weight_cache()
        return w
    monkeypatch.setattr(dg, "_weights", weights_then_clear)
    _forward_matches(mod, 2, 2, 1)
    assert X._plans.get(mod) is None
    monkeypatch.setattr(dg, "_weights", real)
    n = _repacks(emu)
    _forward_matches(mod, 2, 2, 2)
    assert _repacks(emu) == n + 1 and X._plans.get(mod) is not None  # (down_proj's repack was cleared)


def test_plan_shared_by_threads(emu, monkeypatch):
    # threads running one module at different token counts: each call copies the plan's descriptors
    import threading
    E, H, I = 4, 256, 128
    mod = _Experts(E, H, I, 31)
    _use_glue(monkeypatch, mod, "fused")
    errors = []

    def run(seed):
        try:
            for j in range(3):
                _forward_matches(mod, 1 + (seed + j) % 4, 2, 100 * seed + j)
        except Exception as e:  # (reported below, with the thread's seed)
            errors.append((seed, e))
    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    # each weight tensor repacked once, however the threads' first calls met (the others wait for it)
    assert sum(c[0] == "repack" for c in emu.calls) == 2


def test_plan_off_without_cache_or_while_capturing(emu, monkeypatch):
    E, H, I = 4, 256, 128
    mod = _Experts(E, H, I, 21)
    _use_glue(monkeypatch, mod, "fused")
    monkeypatch.setenv("HFP4_WEIGHT_CACHE", "0")
    _forward_matches(mod, 2, 2, 1)
    _forward_matches(mod, 2, 2, 2)
    assert _repacks(emu) == 4 and X._plans.get(mod) is None
    monkeypatch.setenv("HFP4_WEIGHT_CACHE", "1")
    emu.capturing = True  # (a captured forward pins its buffers for the graph; it keeps no plan)
    x, idx, w = fc(torch.randn(2, H).to(torch.bfloat16)), fc(torch.zeros(2, 1, dtype=torch.int64)), fc(torch.ones(2, 1))
    X.experts_forward(mod, x, idx, w)
    assert X._plans.get(mod) is None and dg.weight_cache_info()["graph_pinned"] == 2
    emu.capturing = False


@pytest.mark.parametrize("glue", ["library", "fused"])
def test_hidden_size_must_match_weights(emu, monkeypatch, glue):
    mod = _Experts(2, 256, 128, 3)
    _use_glue(monkeypatch, mod, glue)
    x, idx, w = fc(torch.randn(2, 256)), fc(torch.zeros(2, 1, dtype=torch.int64)), fc(torch.ones(2, 1))
    with pytest.raises(ValueError, match="hidden_states has 128 columns; gate_up_proj takes K = 256"):
        X.experts_forward(mod, fc(torch.randn(2, 128)), idx, w)
    # down_proj's rows (the second GEMM's N) must be the hidden size, or its D would not fit
    wide = _Experts(2, 384, 128, 4)
    mod.down_proj, mod.down_proj_scale_inv = wide.down_proj, wide.down_proj_scale_inv
    with pytest.raises(ValueError, match="down_proj has 384 rows an expert; it must equal the hidden size 256"):
        X.experts_forward(mod, x, idx, w)
    assert not any(c[0] in ("gemm", "forward") for c in emu.calls)


def test_routed_layout_narrow_ids():
    ids = torch.tensor([2, 0, 5, 2, 255, 0, 2], dtype=torch.uint8)
    perm, sorted_ids, pos, layout, m_pad = X._routed_layout(ids, 3)
    assert sorted_ids.tolist() == [0, 0, 2, 2, 2, 3, 3]
    assert pos.tolist()[:5] == [0, 1, 128, 129, 130]
    # more experts than uint8 holds: the sentinel E must not wrap
    perm, sorted_ids, pos, layout, m_pad = X._routed_layout(torch.tensor([3, 255, 1], dtype=torch.uint8), 300)
    assert sorted_ids.tolist() == [1, 3, 255]


def test_register():
    fg = pytest.importorskip("transformers.integrations.finegrained_fp8")
    assert X.register("hfp4_test") == "hfp4_test"
    assert fg.ALL_FP8_EXPERTS_FUNCTIONS["hfp4_test"] is X.experts_forward
    np.testing.assert_equal(True, "hfp4_test" in fg.ALL_FP8_EXPERTS_FUNCTIONS.valid_keys())


@pytest.mark.gpu
@pytest.mark.parametrize("glue", ["torch", "library", "fused", "fused-interleaved", "fused-fp8", "torch-fp8"])
@pytest.mark.parametrize("tokens,k", [(1, 6), (8, 6), (200, 2)])
def test_gpu_matches_token_by_token(monkeypatch, glue, tokens, k):
    # the library's kernels (8-token tile at decode, the 128-token tile at 200 x 2 rows over 8
    # experts; "-fp8": FP8 expert weights, the FP8 x FP8 grouped kernel), then a CUDA-graph replay of
    # the same call: no host synchronization inside
    if not dg.is_available():
        pytest.skip("no GPU hfp4's SM90 kernels run on")
    E, H, I = 8, 512, 256
    cls = (_InterleavedExperts if glue.endswith("interleaved") else _FP8Experts if glue.endswith("fp8")
           else _Experts)
    cpu = cls(E, H, I, 60 + tokens, wrap=lambda t: t)
    mod = cls(E, H, I, 60 + tokens, wrap=lambda t: t.cuda())
    _use_glue(monkeypatch, mod, glue.split("-")[0])
    g = torch.Generator().manual_seed(70 + tokens)
    x = torch.randn(tokens, H, generator=g).to(torch.bfloat16)
    idx = torch.stack([torch.randperm(E + 1, generator=g)[:k] for _ in range(tokens)])  # E: a sentinel
    wts = torch.rand(tokens, k, generator=g)
    ref = _reference(cpu, x, idx, wts, 128)
    xd, idxd, wd = x.cuda(), idx.cuda(), wts.cuda()
    got = X.experts_forward(mod, xd, idxd, wd)
    torch.cuda.synchronize()
    got = got.double().cpu()
    assert torch.isfinite(got).all()
    # The tensor cores' sums differ from the exact ones within docs/TESTING.md's bound (~2^-10 of the
    # L1 sum); that can move a BF16 gate output across an FP8 rounding step, or change a 128-group's
    # amax and so its scale, before the second GEMM: a few rows then differ by a few percent (seen:
    # 1.2 % overall at 200 x 2 on the 128-token tile; the exact emulated GEMMs give 0.17 %). A wrong
    # expert, weight or row would be off by ~100 %: every row within 15 %, most within 1 %.
    rows = torch.linalg.norm(got - ref, dim=1) / torch.linalg.norm(ref, dim=1).clamp_min(1e-30)
    assert torch.linalg.norm(got - ref) <= 3e-2 * torch.linalg.norm(ref)
    assert float(rows.max()) <= 0.15 and float(rows.median()) <= 1e-2
    with pytest.raises(ValueError, match="top_k_index is on cpu"):
        X.experts_forward(mod, xd, idx, wd)
    if tokens <= 8:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = X.experts_forward(mod, xd, idxd, wd)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out.double().cpu(), got)
    dg.clear_weight_cache()
    dg.release_graph_weights()


def _v4_fp4_experts_module(E=8, H=256, I=128):
    """transformers' own FP8Experts for a tiny DeepSeek-V4 config with FP4 experts, behind its
    experts-interface dispatch (what a loaded model holds), filled with FP4 weights"""
    fg = pytest.importorskip("transformers.integrations.finegrained_fp8")
    moe = pytest.importorskip("transformers.integrations.moe")
    from transformers import DeepseekV4Config
    cfg = DeepseekV4Config(vocab_size=64, hidden_size=H, intermediate_size=256, moe_intermediate_size=I,
                           num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=E,
                           num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=0,
                           max_position_embeddings=32, expert_dtype="fp4")
    cls = moe.use_experts_implementation(experts_class=fg.FP8Experts, experts_interface=fg.ALL_FP8_EXPERTS_FUNCTIONS,
                                         has_bias=False, has_gate=True)
    mod = cls(config=cfg, block_size=(128, 128), activation_scheme="dynamic", scale_fmt="ue8m0", has_bias=False,
              has_gate=True)
    E, H, I = mod.num_experts, mod.hidden_dim, mod.intermediate_dim  # (what the config resolved to)
    w1, s1 = _weights(90, E, 2 * I, H)
    w2, s2 = _weights(91, E, H, I)
    with torch.no_grad():
        for p, v in ((mod.gate_up_proj, w1), (mod.gate_up_proj_scale_inv, s1), (mod.down_proj, w2),
                     (mod.down_proj_scale_inv, s2)):
            assert p.dtype == v.dtype and tuple(p.shape) == tuple(v.shape), (p.dtype, p.shape, v.dtype, v.shape)
            p.copy_(v)
    X.register("hfp4")
    cfg._experts_implementation = "hfp4"
    return mod


def test_transformers_dispatch_reaches_hfp4():
    # a real FP8Experts (FP4 weights, transformers' attribute names and shapes), its forward routed by
    # the experts interface to hfp4: on CPU tensors hfp4 refuses them, which shows the dispatch
    mod = _v4_fp4_experts_module()
    x = torch.randn(3, mod.hidden_dim).to(torch.bfloat16)
    idx = torch.tensor([[0, 5], [7, 2], [3, 1]])
    with pytest.raises(hfp4.InvalidArgument, match="CUDA"):
        mod(x, idx, torch.rand(3, 2))


def test_fused_gate_detection(monkeypatch):
    # transformers' FP8Experts with V4's clamped SwiGLU is fused by itself; anything else is not
    mod = _v4_fp4_experts_module()
    assert X._fused_swiglu_limit(mod) == float(mod.limit) == 10.0
    mod.limit = None
    assert X._fused_swiglu_limit(mod) == float("inf")
    mod.limit = 10.0
    monkeypatch.setenv("HFP4_EXPERTS_FUSED_GATE", "0")
    assert X._fused_swiglu_limit(mod) is None
    monkeypatch.delenv("HFP4_EXPERTS_FUSED_GATE")
    mod.swiglu_alpha = 1.702  # gpt-oss's gate: not this SwiGLU
    assert X._fused_swiglu_limit(mod) is None
    mod.swiglu_alpha = None
    mod.act_fn = torch.nn.GELU()
    assert X._fused_swiglu_limit(mod) is None


class _InterleavedExperts(_Experts):
    """newer transformers: gate|up rows interleaved, split 0::2 / 1::2"""

    def _apply_gate(self, gate_up):
        gate, up = gate_up[..., 0::2], gate_up[..., 1::2]
        return self.act_fn(gate.clamp(max=self.limit)) * up.clamp(min=-self.limit, max=self.limit)


def test_gate_probe():
    # the fusion follows what _apply_gate computes on a probe row, whatever the class: the clamped
    # SwiGLU with the module's limit, gate|up stacked or interleaved, is fused; other limits or
    # another activation are not
    mod = _Experts(2, 128, 64, 3)
    assert X._fused_swiglu_limit(mod) == 10.0
    mod.limit = None  # (this _apply_gate then cannot clamp: not fused)
    assert X._fused_swiglu_limit(mod) is None
    mod = _Experts(2, 128, 64, 3, limit=7.0)
    assert X._fused_swiglu_limit(mod) == 7.0
    mod.act_fn = torch.nn.functional.gelu
    assert X._fused_swiglu_limit(mod) is None
    assert X._fused_gate(_InterleavedExperts(2, 128, 64, 3)) == (10.0, hfp4._lib.GATE_UP_INTERLEAVED)
    assert X._fused_gate(_Experts(2, 128, 64, 3)) == (10.0, hfp4._lib.GATE_UP_STACKED)
    mod = _Experts(2, 128, 64, 3)
    mod.has_gate = False
    assert X._fused_swiglu_limit(mod) is None


def test_declared_swiglu_limit():
    # a declared limit: a number > 0 or inf that the gate matches; anything else is refused by name
    mod = _Experts(2, 128, 64, 3)
    mod.hfp4_swiglu_limit = 10.0
    assert X._fused_swiglu_limit(mod) == 10.0
    for bad in (0.0, -1.0, float("nan"), "ten", 7.0, float("inf")):  # (7, inf: not what this gate clamps at)
        mod.hfp4_swiglu_limit = bad
        with pytest.raises(ValueError, match="hfp4_swiglu_limit"):
            X._fused_swiglu_limit(mod)
    inter = _InterleavedExperts(2, 128, 64, 3)
    inter.hfp4_swiglu_limit = 10.0
    assert X._fused_gate(inter) == (10.0, hfp4._lib.GATE_UP_INTERLEAVED)
    inter.hfp4_swiglu_limit = 5.0
    with pytest.raises(ValueError, match="does not compute"):
        X._fused_swiglu_limit(inter)


class _FineGrainedStyleExperts(_Experts):
    """newer transformers' FineGrainedExperts: no `limit`, the clamp in `swiglu_limit`, gate|up rows
    interleaved, the post-expert norm and activation_format attributes at their defaults"""

    def __init__(self, E, H, I, seed, swiglu_limit=7.0):
        super().__init__(E, H, I, seed)
        del self.limit
        self.swiglu_limit, self.swiglu_alpha = swiglu_limit, None
        self.has_post_expert_norm, self.post_expert_norm, self.activation_format = False, None, None

    def _apply_gate(self, gate_up):
        gate, up = gate_up[..., 0::2], gate_up[..., 1::2]
        if self.swiglu_limit is not None:
            gate = gate.clamp(max=self.swiglu_limit)
            up = up.clamp(min=-self.swiglu_limit, max=self.swiglu_limit)
        return self.act_fn(gate) * up


def test_fused_gate_reads_swiglu_limit(emu, monkeypatch):
    mod = _FineGrainedStyleExperts(4, 256, 128, 8)
    assert not hasattr(mod, "limit")
    assert X._fused_gate(mod) == (7.0, hfp4._lib.GATE_UP_INTERLEAVED)
    mod.swiglu_limit = None  # (no clamp: the plain SwiGLU)
    assert X._fused_gate(mod) == (float("inf"), hfp4._lib.GATE_UP_INTERLEAVED)
    # (gpt-oss's gate reads swiglu_alpha; this _apply_gate ignores it, and the probe follows the gate)
    mod.swiglu_limit, mod.swiglu_alpha = 7.0, 1.702
    assert X._fused_gate(mod) == (7.0, hfp4._lib.GATE_UP_INTERLEAVED)
    mod = _FineGrainedStyleExperts(4, 256, 128, 8)
    mod.limit = 5.0  # `limit` wins where both exist (transformers' FP8Experts sets both to the same value)
    assert X._fused_gate(mod) is None  # (this gate clamps at swiglu_limit = 7: not fused at 5)
    # the forward with the fused gate matches the module's own gate, token by token
    mod = _FineGrainedStyleExperts(4, 256, 128, 8)
    monkeypatch.setenv("HFP4_EXPERTS_GLUE", "1")
    monkeypatch.setenv("HFP4_EXPERTS_FUSED_GATE", "1")
    g = torch.Generator().manual_seed(9)
    x = torch.randn(6, 256, generator=g).to(torch.bfloat16)
    idx = torch.randint(0, 4, (6, 2), generator=g)
    wts = torch.rand(6, 2, generator=g)
    got = X.experts_forward(mod, fc(x), fc(idx), fc(wts)).double()
    ref = _reference(mod, x, idx, wts, 128)
    assert torch.linalg.norm(got - ref) <= 1e-2 * torch.linalg.norm(ref)


class _FakeInterface:
    """transformers' GeneralInterface as far as register() uses it: a class-wide mapping that the
    classmethod register() updates, read through an instance"""
    _global_mapping = {}

    def __init__(self):
        self._local_mapping = {}

    def __getitem__(self, key):
        return self._local_mapping[key] if key in self._local_mapping else self._global_mapping[key]

    @classmethod
    def register(cls, key, value):
        cls._global_mapping.update({key: value})


def _fake_transformers(monkeypatch, new=None, old=True):
    """sys.modules entries for the two import paths: new None (absent), "module" (finegrained.py with
    the class and its instance) or "package" (finegrained/__init__.py exporting only the instance);
    old: finegrained_fp8 with FP8ExpertsInterface, or absent. Returns (new interface, old interface)."""
    import sys
    import types
    new_if = old_if = None
    if new is None:
        monkeypatch.setitem(sys.modules, "transformers.integrations.finegrained", None)
    else:
        new_if = type("FineGrainedExpertsInterface", (_FakeInterface,), {"_global_mapping": {"deepgemm": len}})
        mod = types.ModuleType("transformers.integrations.finegrained")
        mod.ALL_FINEGRAINED_EXPERTS_FUNCTIONS = new_if()
        if new == "module":
            mod.FineGrainedExpertsInterface = new_if
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
    if not old:
        monkeypatch.setitem(sys.modules, "transformers.integrations.finegrained_fp8", None)
    else:
        old_if = type("FP8ExpertsInterface", (_FakeInterface,), {"_global_mapping": {"deepgemm": len}})
        mod = types.ModuleType("transformers.integrations.finegrained_fp8")
        mod.FP8ExpertsInterface, mod.ALL_FP8_EXPERTS_FUNCTIONS = old_if, old_if()
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return new_if, old_if


@pytest.mark.parametrize("new", [None, "module", "package"])
@pytest.mark.parametrize("old", [True, False])
def test_register_import_paths(monkeypatch, new, old):
    new_if, old_if = _fake_transformers(monkeypatch, new, old)
    if new is None and not old:
        with pytest.raises(NotImplementedError, match="finegrained"):
            X.register("hfp4_paths")
        return
    assert X.register("hfp4_paths") == "hfp4_paths"
    for iface in (new_if, old_if):
        if iface is not None:  # (registered class-wide: every instance, new or old, dispatches to it)
            assert iface()["hfp4_paths"] is X.experts_forward and iface()["deepgemm"] is len


def test_register_same_interface_once(monkeypatch):
    # a transformers whose finegrained_fp8 re-exports the new interface: registered once
    import sys
    new_if, _ = _fake_transformers(monkeypatch, "module", old=False)
    calls = []
    monkeypatch.setattr(new_if, "register", classmethod(lambda cls, k, v: calls.append(k)))
    shim = type(sys)("transformers.integrations.finegrained_fp8")
    shim.FP8ExpertsInterface, shim.ALL_FP8_EXPERTS_FUNCTIONS = new_if, new_if()
    monkeypatch.setitem(sys.modules, shim.__name__, shim)
    X.register("hfp4_once")
    assert calls == ["hfp4_once"]


@pytest.mark.gpu
@pytest.mark.parametrize("glue", ["torch", "library", "fused"])
def test_gpu_transformers_module(monkeypatch, glue):
    # the same module on the GPU: its output against the token-by-token reference ("fused": the
    # module as transformers builds it; "library": its own _apply_gate between the GEMMs)
    if not dg.is_available():
        pytest.skip("no GPU hfp4's SM90 kernels run on")
    monkeypatch.setenv("HFP4_EXPERTS_GLUE", "0" if glue == "torch" else "1")
    monkeypatch.setenv("HFP4_EXPERTS_FUSED_GATE", "0" if glue == "library" else "1")
    mod = _v4_fp4_experts_module()
    if glue != "torch":  # (the torch glue never asks)
        assert (X._fused_swiglu_limit(mod) is not None) == (glue == "fused")

    class _Cpu:  # the reference reads the weights on the host
        pass
    ref_mod = _Cpu()
    for name in ("gate_up_proj", "gate_up_proj_scale_inv", "down_proj", "down_proj_scale_inv"):
        setattr(ref_mod, name, getattr(mod, name).detach().clone())
    ref_mod.num_experts, ref_mod._apply_gate = mod.num_experts, mod._apply_gate
    mod = mod.cuda()
    g = torch.Generator().manual_seed(92)
    x = torch.randn(8, mod.hidden_dim, generator=g).to(torch.bfloat16)
    idx = torch.stack([torch.randperm(mod.num_experts, generator=g)[:2] for _ in range(8)])
    wts = torch.rand(8, 2, generator=g)
    got = mod(x.cuda(), idx.cuda(), wts.cuda())
    torch.cuda.synchronize()
    ref = _reference(ref_mod, x, idx, wts, 128)
    got = got.double().cpu()
    assert torch.linalg.norm(got - ref) <= 3e-2 * torch.linalg.norm(ref)
    dg.clear_weight_cache()
