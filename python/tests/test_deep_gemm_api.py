"""hfp4.deep_gemm without torch: the module imports, the pure-Python parts work, torch-backed
calls raise a clear ImportError only when called."""
import os
import subprocess
import sys

import pytest

import hfp4
import hfp4.deep_gemm as dg
from hfp4._common import resolve_recipes, infer_gran_k


def test_names_exist():
    for name in ["fp8_fp4_gemm_nt", "m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nt_masked",
                 "fp8_gemm_nt", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked",
                 "fp8_m_grouped_gemm_nt_masked", "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor",
                 "get_mn_major_tma_aligned_packed_ue8m0_tensor", "transform_sf_into_required_layout",
                 "get_mk_alignment_for_contiguous_layout", "set_mk_alignment_for_contiguous_layout",
                 "clear_weight_cache", "repack_weights"]:
        assert callable(getattr(dg, name)), name
    from hfp4.deep_gemm.utils import (align, ceil_div, per_block_cast_to_fp8, per_token_cast_to_fp4,
                                      per_token_cast_to_fp8)
    assert all(map(callable, (align, ceil_div, per_block_cast_to_fp8, per_token_cast_to_fp4, per_token_cast_to_fp8)))
    assert dg.utils.ceil_div(5, 4) == 2 and dg.utils.align(5, 4) == 8
    assert dg.fp8_gemm_nt is dg.fp8_fp4_gemm_nt


def test_module_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import hfp4.deep_gemm as dg\n"
            "from hfp4.deep_gemm.utils import per_token_cast_to_fp8\n"
            "try:\n    per_token_cast_to_fp8(None, True)\nexcept ImportError as e:\n    print('ImportError', e)\n"
            "try:\n    dg.fp8_fp4_gemm_nt(None, None, None)\nexcept ImportError as e:\n    print('ImportError', e)\n"
            "print(dg.is_available(), dg.get_tma_aligned_size(5, 4))\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("ImportError") and "PyTorch" in lines[0]
    assert lines[1].startswith("ImportError")
    assert lines[2] == "False 8"


def test_mk_alignment():
    assert dg.get_mk_alignment_for_contiguous_layout() == 128
    assert dg.get_theoretical_mk_alignment_for_contiguous_layout() == 128
    try:
        dg.set_mk_alignment_for_contiguous_layout(64)
        assert dg.get_mk_alignment_for_contiguous_layout() == 64
        assert dg.utils.get_mk_alignment_for_contiguous_layout() == 64
        with pytest.raises(hfp4.InvalidArgument):
            dg.set_mk_alignment_for_contiguous_layout(12)
    finally:
        dg.set_mk_alignment_for_contiguous_layout(128)


def test_recipe_rules():
    assert resolve_recipes(None, None, None) == (None, None)
    assert resolve_recipes((1, 1, 32), None, None) == (32, (1, 32))
    assert resolve_recipes(None, (1, 128), (1, 32)) == (128, (1, 32))
    with pytest.raises(hfp4.InvalidArgument) as ei:
        resolve_recipes(None, (1, 128), None)
    assert "together" in str(ei.value) and "Assertion" in str(ei.value)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        resolve_recipes((1, 1, 32), (1, 128), (1, 32))
    assert "not both" in str(ei.value)
    with pytest.raises(hfp4.InvalidArgument):
        resolve_recipes((0, 1, 32), None, None)
    with pytest.raises(hfp4.Unsupported):
        resolve_recipes((128, 1, 32), None, None)


def test_gran_inference():
    assert infer_gran_k("sfa", 4, 512, False) == 128
    assert infer_gran_k("sfa", 16, 512, False) == 32
    assert infer_gran_k("sfa", 4, 512, True) == 32      # packed: 16 groups of 32 in 4 words
    assert infer_gran_k("sfa", 1, 512, True) == 128     # packed: 4 groups of 128 in 1 word
    assert infer_gran_k("sfa", 1, 128, True) == 32      # ambiguous: the FP4 flows' 32
    assert infer_gran_k("sfa", 1, 32, False) == 128     # ambiguous, same meaning
    with pytest.raises(hfp4.InvalidArgument) as ei:
        infer_gran_k("sfa", 3, 512, False)
    assert "sfa has 3 scale columns" in str(ei.value)


def test_transformers_required_names_exist_and_fall_back():
    # transformers' loader refuses a deep_gemm module that lacks any of these names
    from hfp4 import deep_gemm as dg
    for name in ("fp8_fp4_gemm_nt", "m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_bf16_gemm_nt_contiguous",
                 "m_grouped_bf16_gemm_nn_contiguous", "get_mn_major_tma_aligned_packed_ue8m0_tensor",
                 "transform_weights_for_mega_moe", "get_symm_buffer_for_mega_moe", "fp8_fp4_mega_moe", "SymmBuffer"):
        assert hasattr(dg, name), name
    assert hasattr(dg.utils, "per_token_cast_to_fp8")
    import pytest
    for fn in (dg.m_grouped_bf16_gemm_nt_contiguous, dg.fp8_fp4_mega_moe, dg.SymmBuffer):
        with pytest.raises(NotImplementedError):
            fn(None, None)


def test_deepgemm_28_names_and_signatures():
    # DeepGEMM 2.8 (deep_gemm/__init__.py, csrc/apis/*.hpp): the SM-count calls, the math helpers at
    # the top level, alpha on the dense GEMMs, num_groups on the theoretical alignment, FP4 aliases
    import inspect
    for name in ("get_num_sms", "set_num_sms", "ceil_to_ue8m0", "pack_ue8m0_to_int", "fp4_gemm_nt",
                 "m_grouped_fp4_gemm_nt_contiguous", "m_grouped_fp4_gemm_nt_masked"):
        assert callable(getattr(dg, name)), name
        assert name in dg.__all__, name
    assert dg.ceil_to_ue8m0 is dg.utils.ceil_to_ue8m0 and dg.pack_ue8m0_to_int is dg.utils.pack_ue8m0_to_int
    assert dg.fp4_gemm_nt is dg.fp8_fp4_gemm_nt
    for fn in (dg.fp8_fp4_gemm_nt, dg.fp8_fp4_gemm_nn, dg.fp8_fp4_gemm_tn, dg.fp8_fp4_gemm_tt, dg.fp8_gemm_nt):
        params = list(inspect.signature(fn).parameters)
        assert params[:10] == ["a", "b", "d", "c", "recipe", "recipe_a", "recipe_b", "compiled_dims",
                               "disable_ue8m0_cast", "alpha"], (fn.__name__, params)
        assert inspect.signature(fn).parameters["alpha"].default is None
    assert dg.get_theoretical_mk_alignment_for_contiguous_layout(64, 8) == 128
    assert dg.get_theoretical_mk_alignment_for_contiguous_layout(expected_m=64, num_groups=8) == 128


def test_num_sms(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(dg, "_num_sms", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(hfp4.NoDevice):
        dg.get_num_sms()
    dg.set_num_sms(100)  # (no device to check against)
    assert dg.get_num_sms() == 100

    class _Props:
        multi_processor_count = 132
    monkeypatch.setattr(dg, "_num_sms", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: _Props())
    assert dg.get_num_sms() == 132
    dg.set_num_sms(78)
    assert dg.get_num_sms() == 78
    for bad in (0, -1, 133, 1.5, True, "8", None):
        with pytest.raises(hfp4.InvalidArgument, match="set_num_sms"):
            dg.set_num_sms(bad)
    assert dg.get_num_sms() == 78
    dg.set_num_sms(132)
    assert dg.get_num_sms() == 132


def test_top_level_ue8m0_helpers():
    torch = pytest.importorskip("torch")
    x = torch.tensor([[0.3, 1.0, 1e-30, 5.0e30, -2.5, 0.0, 448.0, 3e-3]])
    got = dg.ceil_to_ue8m0(x)
    # DeepGEMM's formula: the exponent rounded up where the mantissa is non-zero, clamped to [1, 254]
    bits = x.abs().float().view(torch.int)
    exp = ((bits >> 23) & 0xFF) + (bits & 0x7FFFFF).bool().int()
    assert torch.equal(got, (exp.clamp(1, 254) << 23).view(torch.float))
    packed = dg.pack_ue8m0_to_int(got)
    assert packed.dtype == torch.int32 and tuple(packed.shape) == (1, 2)
    assert torch.equal(packed.view(torch.uint8).view(1, 8).int(), exp.clamp(1, 254))


def test_ue8m0_helpers_keep_non_finite_scales():
    # a non-finite amax must not become a finite scale that zeroes its group: Inf and NaN stay
    # themselves and pack to UE8M0 byte 255, as DeepGEMM's helpers and the C quantizers give
    torch = pytest.importorskip("torch")
    got = dg.ceil_to_ue8m0(torch.tensor([float("inf"), float("nan"), -float("inf"), 3.0]))
    assert got[0].item() == float("inf") and got[1].isnan().item() and got[2].item() == float("inf")
    assert got[3].item() == 4.0
    packed = dg.pack_ue8m0_to_int(torch.tensor([float("inf"), float("nan"), 4.0, 0.5]))
    assert packed.view(torch.uint8).tolist() == [0xFF, 0xFF, 0x81, 0x7E]


def _fake_deep_gemm(monkeypatch, calls):
    """An installed 'deep_gemm' stand-in that records its calls; dg looks it up afresh."""
    import types
    fake = types.ModuleType("deep_gemm")

    def rec(name):
        def f(*args, **kwargs):
            calls.append((name, args, kwargs))
            return name
        return f
    for n in ("fp8_einsum", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked",
              "m_grouped_bf16_gemm_nt_contiguous"):
        setattr(fake, n, rec(n))
    monkeypatch.setitem(sys.modules, "deep_gemm", fake)
    monkeypatch.setattr(dg, "_real", [None, False])
    return fake


def test_installed_deep_gemm_serves_what_hfp4_lacks(monkeypatch):
    torch = pytest.importorskip("torch")
    calls = []
    _fake_deep_gemm(monkeypatch, calls)
    monkeypatch.delenv("HFP4_DEEP_GEMM_FALLBACK", raising=False)
    # a name hfp4 does not define
    assert dg.fp8_einsum("bhr,hdr->bhd", 1, 2) == "fp8_einsum" and calls[-1][0] == "fp8_einsum"
    # a name hfp4 lacks
    assert dg.m_grouped_bf16_gemm_nt_contiguous(1, 2, 3, 4) == "m_grouped_bf16_gemm_nt_contiguous"
    # grouped GEMMs with FP8 weights: DeepGEMM's keywords passed on (only those given), hfp4's dropped
    a = (torch.zeros(8, 128, dtype=torch.float8_e4m3fn), torch.ones(8, 1))
    b = (torch.zeros(2, 128, 128, dtype=torch.float8_e4m3fn), torch.ones(2, 1, 1))
    d = torch.empty(8, 128, dtype=torch.bfloat16)
    layout = torch.zeros(8, dtype=torch.int32)
    assert dg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, expected_m=4, ensure_zero_padding=False,
                                               compiled_dims="nk") == "m_grouped_fp8_gemm_nt_contiguous"
    name, args, kwargs = calls[-1]
    assert args[3] is layout and kwargs == {}
    masked = torch.zeros(2, dtype=torch.int32)
    assert dg.m_grouped_fp8_gemm_nt_masked((a[0].view(2, 4, 128), a[1].view(2, 4, 1)), b, d.view(2, 4, 128),
                                           masked, 4, recipe=(1, 128, 128)) == "m_grouped_fp8_gemm_nt_masked"
    assert calls[-1][2] == {"recipe": (1, 128, 128)}
    # FP4 weights stay hfp4's (nothing forwarded); an unknown name without it is an AttributeError
    n = len(calls)
    with pytest.raises(AttributeError):
        dg.no_such_name_anywhere
    assert len(calls) == n


def test_installed_deep_gemm_off_or_aliased(monkeypatch):
    pytest.importorskip("torch")
    calls = []
    _fake_deep_gemm(monkeypatch, calls)
    monkeypatch.setenv("HFP4_DEEP_GEMM_FALLBACK", "0")
    with pytest.raises(AttributeError):
        dg.fp8_einsum
    with pytest.raises(NotImplementedError):
        dg.m_grouped_bf16_gemm_nt_contiguous(1, 2, 3, 4)
    monkeypatch.delenv("HFP4_DEEP_GEMM_FALLBACK")
    # hfp4.deep_gemm installed as deep_gemm itself: never taken for the real one (no recursion)
    monkeypatch.setitem(sys.modules, "deep_gemm", dg)
    monkeypatch.setattr(dg, "_real", [None, False])
    with pytest.raises(AttributeError):
        dg.fp8_einsum
    assert calls == []


def test_fp8_route_rule(monkeypatch):
    # fp8_fp4_gemm_nt's FP8 route (hfp4/_fp8_route.py): where it pays by default, the override, the switch
    from hfp4 import _fp8_route as route
    monkeypatch.delenv("HFP4_FP8_ROUTE", raising=False)
    monkeypatch.delenv("HFP4_FP8_ROUTE_MIN_M", raising=False)
    assert route.applies(1024, 8192, 8192) and not route.applies(512, 8192, 8192)
    assert route.applies(4096, 7168, 2048) and not route.applies(2048, 7168, 2048)
    assert route.applies(8192, 2048, 4096) and not route.applies(4096, 2048, 4096)
    assert not route.applies(1023, 1 << 20, 1 << 20)  # (M below 1024: never by default)
    monkeypatch.setenv("HFP4_FP8_ROUTE_MIN_M", "256")
    assert route.applies(256, 128, 128) and not route.applies(255, 8192, 8192)
    monkeypatch.setenv("HFP4_FP8_ROUTE_MIN_M", "many")
    with pytest.raises(hfp4.InvalidArgument, match="HFP4_FP8_ROUTE_MIN_M"):
        route.applies(4096, 4096, 4096)
    monkeypatch.setenv("HFP4_FP8_ROUTE", "0")
    assert not route.applies(16384, 8192, 8192)


def test_fp8_route_learning_across_a_clear(monkeypatch):
    # what the FP8 route learnt of weights is kept only if no clear_weight_cache() ran since the
    # call looked them up (a clear on another thread during the learning may be meant for them)
    torch = pytest.importorskip("torch")
    from hfp4 import _fp8_route as route
    monkeypatch.delenv("HFP4_WEIGHT_CACHE", raising=False)
    B = torch.zeros(128, 64, dtype=torch.int8)
    SFB = torch.full((128, 4), 127, dtype=torch.uint8)
    dg.clear_weight_cache()
    before = dg._cache_generation
    dg.clear_weight_cache()  # (as if another thread cleared while this call learnt)
    route._learn(dg, B, SFB, True, None, before)
    assert route._lookup(dg, B, SFB) is None
    route._learn(dg, B, SFB, True, None, dg._cache_generation)
    assert route._lookup(dg, B, SFB) == (True, None)
    dg.clear_weight_cache()
    assert route._lookup(dg, B, SFB) is None
