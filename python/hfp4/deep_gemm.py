"""DeepGEMM-named functions over torch tensors, backed by hfp4's SM90 FP8 x FP4 kernels.

    import hfp4.deep_gemm as deep_gemm
    deep_gemm.fp8_fp4_gemm_nt((a_fp8, sfa), (w_fp4_int8, sfw), d_bf16)
    deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (w, sfw), d, grouped_layout)
    deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked((a, sfa), (w, sfw), d, masked_m, expected_m)

This module imports without torch; torch is imported when a function that needs it is called (an
ImportError then says so). The GEMMs pass ``tensor.data_ptr()`` and
``torch.cuda.current_stream().cuda_stream`` to ``hfp4_gemm``: they are stream-ordered, allocate
nothing and never synchronize once the weights are repacked (below), so they can be captured in a
CUDA graph after one warm-up call.

Operands (what DeepGEMM's SM90 callers pass, plus FP4 weights):

* ``a = (A, SFA)``: A FP8 e4m3 ``[M, K]`` (``torch.float8_e4m3fn``, or ``uint8`` bytes), K-major;
  SFA per-token scales ``[M, ceil(K/g)]`` as float32, ``int32`` packed UE8M0 (4 K-groups a word) or
  one-byte UE8M0 (``float8_e8m0fnu``/``uint8``), any strides (K-major as the quantizers return
  them, or MN-major TMA-aligned). g (32 or 128) comes from the recipe, else from SFA's shape.
* ``b = (B, SFB)``: packed FP4 weights ``int8`` ``[N, K/2]`` (``[G, N, K/2]`` grouped; ``uint8`` and
  ``float4_e2m1fn_x2`` accepted), two codes a byte, even K index in the low nibble, with (1, 32)
  scales ``[.., N, ceil(K/32)]`` (float32, UE8M0 bytes, or int32 packed ``[.., N, ceil(K/128)]``).
  Or an :class:`hfp4.SM90Weights` from :func:`repack_weights`.
* ``d``: BF16 or FP32 ``[M, N]`` (masked: ``[G, M, N]``), row-major; ``c`` optional, same shape and
  dtype (D = C + A B^T; a C with other strides is copied into D first, as DeepGEMM does).

Weight cache: hfp4's kernels read FP4 weights in a repacked layout (docs/FORMATS.md, "SM90 repacked
weights"). The first call with a weight tensor repacks it on the GPU (``hfp4_repack_sm90``, on the
current stream) into a device buffer that is cached: the key is the weight's device, data_ptr,
shape, strides and dtype; the entry remembers the weight's version counter (``tensor._version``) and
its scale tensor's data_ptr, shape, strides, dtype and version, and is rebuilt when any of them
changes. An entry is dropped when the storage of the weight or of its scale tensor is freed (weak
references to both), so a new tensor allocated at a freed one's address is repacked, or by
:func:`clear_weight_cache`. Pass the same scale tensor at every call: scales made anew for each call
(a ``.float()`` or layout copy of the stored ones) are a new tensor each time, and their weights
are repacked at every call (correct, slow); convert them once, or repack once with
:func:`repack_weights`.
Weights updated in place after a GEMM has used them need :func:`clear_weight_cache`: writes that do
not bump the version counter are not noticed, and the GEMMs keep using the old repacked copy. Such
writes are ``param.data.copy_(...)`` (vLLM's and SGLang's weight loaders and weight reloads, RL
weight syncs), writes through DLPack, CUDA IPC or another library, and writes to inference tensors
(which have no version counter). Call ``hfp4.deep_gemm.clear_weight_cache()`` after the update and
before the next GEMM (re-capture CUDA graphs that use those weights). ``HFP4_WEIGHT_CACHE=0`` in the
environment (read at every call) turns the cache off: every GEMM repacks its weights first, which
is always correct and slower (an extra pass over the weights per call).
CUDA graphs: run each GEMM once before capturing it, so that its weights are repacked and cached
outside the capture. A cache miss during a capture repacks inside the graph (the repack then runs
at every replay) and is not cached, since a captured repack only fills its buffer at replay time.
Repacked weights used by a captured GEMM are kept alive (the graph holds their pointers) even
after :func:`clear_weight_cache` or an invalidation, until :func:`release_graph_weights`, which
must only be called once those graphs are destroyed.
A repacked buffer takes about the FP4 weights' size plus their scales. To avoid the cache, repack
yourself with :func:`repack_weights` and pass the result as ``b``.

DeepGEMM's other names: its layout and quantization helpers (also in ``hfp4.deep_gemm.utils``,
with ``ceil_to_ue8m0`` and ``pack_ue8m0_to_int`` at the top level as DeepGEMM exports them), its
configuration calls (``set_num_sms``/``get_num_sms``, ``set_pdl``/``get_pdl``,
``set_ignore_compile_dims``, the mk alignment: accepted; hfp4's kernels always use every SM) and its
alias names. DeepGEMM 2.8's ``alpha`` keyword is accepted as None (other values: ``Unsupported``).

With DeepGEMM installed (the ``deep_gemm`` package), what hfp4 does not provide comes from it: names
this module does not define (its attention and einsum kernels: ``fp8_fp4_mqa_logits``,
``fp8_einsum``, ...), the names below that hfp4 lacks (BF16 grouped GEMMs, Mega MoE) and the grouped
GEMMs with FP8 weights (hfp4 runs FP8 weights in the dense GEMM only), so hfp4.deep_gemm can stand
in for deep_gemm in a framework on Hopper. ``HFP4_DEEP_GEMM_FALLBACK=0`` turns that off.

Errors: ``InvalidArgument`` (a ValueError whose message contains "Assertion", as DeepGEMM's host
assertions) for contract violations; ``Unsupported`` (a NotImplementedError) for well-formed requests
hfp4 has no kernel for (FP4 activations, MN-major FP4, a non-SM90 device, FP8 weights beyond the
dense 128 x 128-block form or while the library's FP8-weight path is off...), so callers can fall back;
``NoDevice`` for a library built without the CUDA toolkit.
"""
from __future__ import annotations

import ctypes
import operator
import os
import sys
import threading
import types
import weakref
from ctypes import byref, c_int64, c_size_t

from . import _cublaslt as _cublaslt_impl
from . import _fp8_route
from . import _testing
from ._quant_utils import (ceil_to_ue8m0, pack_ue8m0_to_int, per_block_cast_to_fp8, per_channel_cast_to_fp8,
                           per_token_cast_to_fp4, per_token_cast_to_fp8, transpose_packed_fp4)
from . import _lib as L
from ._common import SM90Weights, align, ceil_div, infer_gran_k, resolve_recipes, scale_grid, torch_module

__all__ = [
    "fp8_fp4_gemm_nt", "m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nt_masked",
    "fp8_gemm_nt", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked",
    "fp8_m_grouped_gemm_nt_masked",
    "repack_weights", "fp4_weights_to_fp8", "clear_weight_cache", "release_graph_weights", "weight_cache_info", "weight_cache_enabled",
    "is_available",
    "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor", "get_mn_major_tma_aligned_packed_ue8m0_tensor",
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor", "transform_sf_into_required_layout",
    "get_mk_alignment_for_contiguous_layout", "set_mk_alignment_for_contiguous_layout",
    "get_m_alignment_for_contiguous_layout", "get_k_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout", "utils", "ceil_div", "align", "SM90Weights",
    "get_num_sms", "set_num_sms", "ceil_to_ue8m0", "pack_ue8m0_to_int",
    "fp8_fp4_gemm_nn", "fp8_fp4_gemm_tn", "fp8_fp4_gemm_tt", "m_grouped_fp8_fp4_gemm_nn_contiguous",
    "fp4_gemm_nt", "m_grouped_fp4_gemm_nt_contiguous", "m_grouped_fp4_gemm_nt_masked",
    "cublaslt_gemm_nt", "cublaslt_gemm_nn", "cublaslt_gemm_tn", "cublaslt_gemm_tt",
    "k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous", "testing",
]

# ------------------------------------------------------------------------------------------------
# torch, imported on first use
# ------------------------------------------------------------------------------------------------

_t = torch_module


def _dtype(name):
    return getattr(_t(), name, None)


def _stream(device):
    """device's current CUDA stream as a raw handle (torch's private raw-stream query where it has
    one: a decode step's eager host time counts every microsecond; the public route otherwise)"""
    torch = _t()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        index = device.index if isinstance(device, torch.device) else None
        return raw(torch.cuda.current_device() if index is None else index)
    return torch.cuda.current_stream(device).cuda_stream


# ------------------------------------------------------------------------------------------------
# mk alignment (DeepGEMM's global knob; hfp4's SM90 contiguous kernels accept any multiple of 8)
# ------------------------------------------------------------------------------------------------

_mk_alignment = L.DEFAULT_M_ALIGNMENT


def get_mk_alignment_for_contiguous_layout() -> int:
    """The M alignment of m-grouped contiguous segments (default 128)."""
    return _mk_alignment


def set_mk_alignment_for_contiguous_layout(value: int) -> None:
    """Set the M alignment used by the contiguous GEMMs and psum layouts (a positive multiple of 8
    for hfp4's kernels). Global state, as in DeepGEMM."""
    global _mk_alignment
    v = int(value)
    if v <= 0 or v % 8:
        raise L.invalid_argument("set_mk_alignment_for_contiguous_layout: %d must be a positive multiple of 8" % v)
    _mk_alignment = v


get_m_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout
get_k_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout


# ------------------------------------------------------------------------------------------------
# SM count (DeepGEMM's set_num_sms / get_num_sms)
# ------------------------------------------------------------------------------------------------

_num_sms = None


def set_num_sms(new_num_sms) -> None:
    """DeepGEMM's set_num_sms: the number of SMs its kernels may occupy (to leave SMs to kernels that
    overlap them, e.g. communication). Accepted and recorded for compatibility (:func:`get_num_sms`
    returns it), but hfp4's kernels always use every SM of the device: the value does not limit
    them. A positive integer, at most the current device's SM count where torch sees a GPU (as
    DeepGEMM asserts). Global state, as in DeepGEMM."""
    global _num_sms
    try:
        n = None if isinstance(new_num_sms, bool) else operator.index(new_num_sms)
    except TypeError:
        n = None
    if n is None or n <= 0:
        raise L.invalid_argument("set_num_sms: %r must be a positive integer" % (new_num_sms,))
    device_sms = _device_num_sms()
    if device_sms is not None and n > device_sms:
        raise L.invalid_argument("set_num_sms: %d exceeds the device's %d SMs" % (n, device_sms))
    _num_sms = n


def _device_num_sms():
    """The current CUDA device's SM count through torch, or None without torch or a GPU."""
    try:
        torch = _t()
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count)


def get_num_sms() -> int:
    """DeepGEMM's get_num_sms: the value given to :func:`set_num_sms`, else the current CUDA device's
    SM count (through torch). hfp4's kernels use every SM either way. Raises NoDevice where neither
    exists (no set_num_sms call, and torch sees no GPU)."""
    if _num_sms is not None:
        return _num_sms
    n = _device_num_sms()
    if n is None:
        raise L.make_error(L.ERR_NO_DEVICE, "get_num_sms: torch sees no CUDA device (and set_num_sms was not called)")
    return n


def get_theoretical_mk_alignment_for_contiguous_layout(expected_m=None, num_groups=None) -> int:
    """DeepGEMM's value on every architecture but SM100: 128 (expected_m and num_groups, DeepGEMM's
    hints for SM100, are accepted and do not change it)."""
    return L.DEFAULT_M_ALIGNMENT


# ------------------------------------------------------------------------------------------------
# The installed DeepGEMM, for what hfp4 does not provide
# ------------------------------------------------------------------------------------------------

_HFP4_SHIM = True  # (so that a DeepGEMM lookup never takes this module for the real one)
_real = [None, False]  # [the installed DeepGEMM module or None, looked up yet]


def _real_deep_gemm():
    """The installed DeepGEMM package (top-level ``deep_gemm``), or None: not installed or not
    importable, turned off (``HFP4_DEEP_GEMM_FALLBACK=0``, read at every call), or this module itself
    (a caller that installed hfp4.deep_gemm as ``deep_gemm``). Looked up once."""
    if os.environ.get("HFP4_DEEP_GEMM_FALLBACK", "1").strip() == "0":
        return None
    if not _real[1]:
        mod = None
        try:
            import importlib
            m = importlib.import_module("deep_gemm")
            if m is not sys.modules.get(__name__) and not getattr(m, "_HFP4_SHIM", False):
                mod = m
        except Exception:  # (not installed, or its import fails: e.g. a CUDA it was not built for)
            mod = None
        _real[0], _real[1] = mod, True
    return _real[0]


def __getattr__(name):
    """Names hfp4 does not define (DeepGEMM's attention and einsum kernels, names newer than this
    module) come from the installed DeepGEMM where there is one (PEP 562), so hfp4.deep_gemm can
    stand in for deep_gemm in a framework that also calls those."""
    if not (name.startswith("__") and name.endswith("__")):
        real = _real_deep_gemm()
        if real is not None and hasattr(real, name):
            return getattr(real, name)
    raise AttributeError("module %r has no attribute %r (not provided by hfp4, and no installed DeepGEMM has it)"
                         % (__name__, name))


def _call_real(fn_names, args, kwargs):
    """The installed DeepGEMM's function under the first of fn_names it has, called with args and
    kwargs; None where there is no such function (the caller then raises as before)."""
    real = _real_deep_gemm()
    for n in fn_names if real is not None else ():
        f = getattr(real, n, None)
        if f is not None:
            return (f(*args, **kwargs),)
    return None


def _given(**kwargs):
    """The keyword arguments whose value is not their default (value, default pairs): what to pass on
    to the installed DeepGEMM, whose older versions lack some keywords."""
    return {k: v for k, (v, default) in kwargs.items() if v is not default and v != default}


# ------------------------------------------------------------------------------------------------
# Tensor -> descriptor helpers
# ------------------------------------------------------------------------------------------------


def _pair(name, x):
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise L.invalid_argument("%s must be a (tensor, scales) pair" % name)
    return x[0], x[1]


def _same_device(name, t, device):
    if t.device != device:
        raise L.invalid_argument("%s is on %s, expected %s (all operands on one CUDA device)" % (name, t.device, device))


def _scale_code(name, sf):
    torch = _t()
    if sf.dtype == torch.float32:
        return L.DTYPE_FP32
    if sf.dtype == torch.int32:
        return L.DTYPE_UE8M0_PACKED
    if sf.dtype == torch.uint8 or (_dtype("float8_e8m0fnu") is not None and sf.dtype == _dtype("float8_e8m0fnu")):
        return L.DTYPE_UE8M0
    raise L.invalid_argument("%s.dtype = %s must be float32, int32 (packed UE8M0) or float8_e8m0fnu/uint8 (UE8M0)"
                             % (name, sf.dtype))


def _scales(name, sf, groups, rows, k, gran_mn, gran_k):
    code = _scale_code(name, sf)
    srows, scols = scale_grid(rows, k, gran_mn, gran_k, code == L.DTYPE_UE8M0_PACKED)
    want = ((groups,) if groups else ()) + (srows, scols)
    if tuple(sf.shape) != want:
        raise L.invalid_argument("%s has shape %s; expected %s for %s, k = %d and gran (%d, %d)%s"
                                 % (name, tuple(sf.shape), want,
                                    ("%d groups of %d rows" % (groups, rows)) if groups else "%d rows" % rows, k,
                                    gran_mn, gran_k, " (packed: 4 scales a word)"
                                    if code == L.DTYPE_UE8M0_PACKED else ""))
    st = sf.stride()
    return L.hfp4_scales(sf.data_ptr(), code, gran_mn, gran_k, st[-2], st[-1], st[0] if groups else 0)


def _activations(A, SFA, ndim, gran_k_a, groups):
    """hfp4_matrix of FP8 activations [M, K] (masked: [G, M, K]) with per-token scales."""
    torch = _t()
    if A.dtype == torch.int8 or (_dtype("float4_e2m1fn_x2") is not None and A.dtype == _dtype("float4_e2m1fn_x2")):
        raise L.unsupported("a: packed FP4 activations have no SM90 kernel (DeepGEMM runs them on SM100 only)")
    if A.dtype not in (torch.float8_e4m3fn, torch.uint8):
        raise L.invalid_argument("a.dtype = %s must be torch.float8_e4m3fn" % A.dtype)
    if A.dim() != ndim:
        raise L.invalid_argument("a must be %dD, got shape %s" % (ndim, tuple(A.shape)))
    if A.size(-1) > 1 and A.stride(-1) != 1:
        raise L.unsupported("a must be K-major (stride 1 along K) on SM90, got strides %s" % (A.stride(),))
    m, k = A.size(-2), A.size(-1)
    packed = _scale_code("sfa", SFA) == L.DTYPE_UE8M0_PACKED
    g = int(gran_k_a) if gran_k_a else infer_gran_k("sfa", SFA.size(-1), k, packed)
    scales = _scales("sfa", SFA, groups if ndim == 3 else 0, m, k, 1, g)
    ld = A.stride(-2) if m > 1 else k
    return L.hfp4_matrix(A.data_ptr(), L.DTYPE_FP8_E4M3, m, k, ld, A.stride(0) if ndim == 3 else 0, scales)


def _output(d, c, shape):
    """(hfp4_output of d, c or None): the c to copy into d right before the launch (DeepGEMM's
    d.copy_(c) for a C whose strides differ from D's), deferred so that a rejected call leaves D
    untouched."""
    torch = _t()
    if d.dtype not in (torch.bfloat16, torch.float32):
        raise L.invalid_argument("d.dtype = %s must be torch.bfloat16 or torch.float32" % d.dtype)
    if tuple(d.shape) != tuple(shape):
        raise L.invalid_argument("d has shape %s, expected %s" % (tuple(d.shape), tuple(shape)))
    if d.size(-1) > 1 and d.stride(-1) != 1:
        raise L.invalid_argument("d must be row-major (stride 1 along N), got strides %s" % (d.stride(),))
    c_ptr, copy_c = None, None
    if c is not None:
        if c.dtype != d.dtype or tuple(c.shape) != tuple(d.shape):
            raise L.invalid_argument("c (%s %s) must have d's dtype and shape (%s %s)"
                                     % (c.dtype, tuple(c.shape), d.dtype, tuple(d.shape)))
        _same_device("c", c, d.device)
        if c.stride() == d.stride():
            c_ptr = c.data_ptr()
        else:
            copy_c = c
            c_ptr = d.data_ptr()
    code = L.DTYPE_BF16 if d.dtype == torch.bfloat16 else L.DTYPE_FP32
    ld = d.stride(-2) if d.size(-2) > 1 else d.size(-1)
    return L.hfp4_output(d.data_ptr(), code, ld, d.stride(0) if d.dim() == 3 else 0, c_ptr), copy_c


def _check_b_gran(gran_b):
    if gran_b is not None and tuple(gran_b) != (1, 32):
        raise L.unsupported("recipe gives the weights scale granularity %s; hfp4's FP4 weights take (1, 32)"
                            % (tuple(gran_b),))


# ------------------------------------------------------------------------------------------------
# Weights: repack and cache
# ------------------------------------------------------------------------------------------------


def _fp8_weights(name, B, SFB, k, gran_b, ndim=2, sf_name="sfb", device=None):
    """hfp4_matrix of FP8 weights B [N, K] (ndim 2) or [G, N, K] (ndim 3), K-major, under block scales
    SFB (named sf_name in errors; DeepGEMM's fp8_gemm_nt / m_grouped_fp8_gemm_nt_contiguous / _masked
    on SM90: recipe (1, 128, 128), its default), both on `device` when it is given. hfp4_gemm runs
    them where the library's FP8-weight path is on (include/hfp4.h) and answers Unsupported
    otherwise, so the caller falls back."""
    if device is not None:
        _same_device(name, B, device)
        _same_device(sf_name, SFB, device)
    gran = (128, 128) if gran_b is None else tuple(gran_b)
    if B.dim() != ndim:
        raise L.invalid_argument("%s must be %s (FP8 weights), got shape %s"
                                 % (name, "2D [N, K]" if ndim == 2 else "3D [G, N, K]", tuple(B.shape)))
    if B.size(-1) != k:
        raise L.invalid_argument("%s holds K = %d but a has K = %d" % (name, B.size(-1), k))
    if B.size(-1) > 1 and B.stride(-1) != 1:
        raise L.unsupported("%s must be K-major on SM90, got strides %s" % (name, B.stride()))
    if not B.is_cuda:
        raise L.invalid_argument("%s must be a CUDA tensor" % name)
    n, groups = B.size(-2), (B.size(0) if ndim == 3 else 0)
    scales = _scales(sf_name, SFB, groups, n, k, gran[0], gran[1])
    ld = B.stride(-2) if n > 1 else k
    return L.hfp4_matrix(B.data_ptr(), L.DTYPE_FP8_E4M3, n, k, ld, B.stride(0) if groups > 1 else 0, scales)


def _grouped_weights(b, fp8_b, k, gran_b, device):
    """(w, its hfp4_matrix) of a grouped GEMM's weights [G, N, K(/2)]: FP8 ones as they are (w None:
    the library's FP8 x FP8 grouped forms, or Unsupported), FP4 ones repacked (w: the cache's
    SM90Weights, which the caller keeps alive over the launch)"""
    if fp8_b:
        B, SFB = _pair("b", b)
        return None, _fp8_weights("b", B, SFB, k, gran_b, 3, device=device)
    w = _weights("b", b, 3, k, device)
    return w, w.matrix


def _is_fp8_weights(b):
    if isinstance(b, SM90Weights):
        return False
    return _pair("b", b)[0].dtype == _t().float8_e4m3fn


def _fp4_weights(name, B, ndim):
    torch = _t()
    if B.dtype == torch.float8_e4m3fn:
        raise L.unsupported("%s: FP8 weights: hfp4 runs them in fp8_gemm_nt and the m-grouped NT contiguous and "
                            "masked GEMMs, not in this one; it goes to an installed DeepGEMM, and none is installed "
                            "(or HFP4_DEEP_GEMM_FALLBACK=0)" % name)
    fp4x2 = _dtype("float4_e2m1fn_x2")
    if B.dtype not in (torch.int8, torch.uint8) and (fp4x2 is None or B.dtype != fp4x2):
        raise L.invalid_argument("%s.dtype = %s must be torch.int8 (packed FP4)" % (name, B.dtype))
    if B.dim() != ndim:
        raise L.invalid_argument("%s must be %dD (%s), got shape %s"
                                 % (name, ndim, "[N, K/2]" if ndim == 2 else "[G, N, K/2]", tuple(B.shape)))
    if B.size(-1) > 1 and B.stride(-1) != 1:
        raise L.unsupported("%s must be K-major on SM90 (MN-major FP4 is an SM100 form), got strides %s"
                            % (name, B.stride()))
    if not B.is_cuda:
        raise L.invalid_argument("%s must be a CUDA tensor (hfp4.host.repack_sm90_host repacks on the CPU)" % name)


def repack_weights(b, scale_dtype=None) -> SM90Weights:
    """Repack FP4 weights b = (B int8 [N, K/2] or [G, N, K/2], SFB (1, 32) scales) on B's GPU, on
    the current stream, into a new device buffer (no cache). scale_dtype: None (UE8M0 for UE8M0 or
    packed scales, FP32 for float32 scales, which the GPU cannot prove to be powers of two), or
    "ue8m0"/"fp32"."""
    torch = _t()
    B, SFB = _pair("b", b)
    _fp4_weights("b", B, B.dim() if B.dim() in (2, 3) else 2)
    _same_device("sfb", SFB, B.device)
    groups = B.size(0) if B.dim() == 3 else 0
    n, k = B.size(-2), 2 * B.size(-1)
    scales = _scales("sfb", SFB, groups, n, k, 1, 32)
    w = L.hfp4_matrix(B.data_ptr(), L.DTYPE_FP4_E2M1, n, k, B.stride(-2) if n > 1 else k // 2,
                      B.stride(0) if groups else 0, scales)
    if scale_dtype is None:
        sdt = L.DTYPE_FP32 if scales.dtype == L.DTYPE_FP32 else L.DTYPE_UE8M0
    else:
        sdt = {"ue8m0": L.DTYPE_UE8M0, "fp32": L.DTYPE_FP32, L.DTYPE_UE8M0: L.DTYPE_UE8M0,
               L.DTYPE_FP32: L.DTYPE_FP32}.get(scale_dtype)
        if sdt is None:
            raise L.invalid_argument("repack_weights: scale_dtype = %r must be None, 'ue8m0' or 'fp32'" % (scale_dtype,))
    g = max(groups, 1)
    lib = L.lib()
    nbytes = c_size_t()
    L.check(lib.hfp4_sm90_weights_size(g, n, k, sdt, byref(nbytes)))
    buf = torch.empty(nbytes.value, dtype=torch.uint8, device=B.device)
    out = L.hfp4_matrix()
    with torch.cuda.device(B.device):
        L.check(lib.hfp4_repack_sm90(byref(w), g, sdt, buf.data_ptr(), nbytes.value, byref(out), _stream(B.device)))
    return SM90Weights(buf, out, g, n, k, sdt, nbytes.value)


def fp4_weights_to_fp8(b, *, ue8m0_bytes=False, inexact=None):
    """hfp4_fp4_weights_to_fp8_gpu: FP4 weights b = (B int8 [N, K/2], SFB (1, 32) power-of-two scales;
    K a multiple of 128, B's rows 16-byte aligned) as FP8 under 128 x 128 block scales, exactly, on
    B's GPU and the current stream (docs/FP8_ROUTE.md). Returns (q torch.float8_e4m3fn [N, K], sf
    float32 [ceil(N/128), K/128], or its UE8M0 exponent bytes as torch.uint8 with ue8m0_bytes): the
    (weights, scales) pair fp8_gemm_nt takes, which runs large dense GEMMs faster than the FP4
    weights do (RESULTS v41: 0.99x cuBLASLt FP8 timed at 8192^3 with the conversion, against 0.71x).
    A 128 x 128 block whose scales span more than 14 binades has no exact FP8 form: without inexact
    the call waits for the GPU and raises hfp4.Unsupported with their count (keep the FP4 weights:
    fp8_fp4_gemm_nt is exact for any scales); with inexact (a CUDA torch.int32 tensor on B's device)
    it does not wait: the count goes to inexact[0], and those blocks hold NaN."""
    torch = _t()
    B, SFB = _pair("b", b)
    w = _fp4_to_fp8_matrix(B, SFB)  # (checked before anything is allocated)
    if inexact is not None:
        if not isinstance(inexact, torch.Tensor) or inexact.dtype != torch.int32 or inexact.numel() < 1:
            raise L.invalid_argument("fp4_weights_to_fp8: inexact must be a torch.int32 tensor of at least one "
                                     "element, got %r" % (inexact,))
        _same_device("inexact", inexact, B.device)
        count = inexact
    else:
        count = torch.empty(1, dtype=torch.int32, device=B.device)
    q, sf = _fp8_buffers(B, ue8m0_bytes)
    s = L.hfp4_scales(sf.data_ptr(), L.DTYPE_UE8M0 if ue8m0_bytes else L.DTYPE_FP32, 128, 128, sf.size(1), 1, 0)
    with torch.cuda.device(B.device):
        L.check(L.lib().hfp4_fp4_weights_to_fp8_gpu(byref(w), q.data_ptr(), w.cols, byref(s), count.data_ptr(),
                                                      _stream(B.device)))
    if inexact is None:
        refused = int(count.item())
        if refused:
            raise L.unsupported("fp4_weights_to_fp8: %d block(s) of 128 x 128 weights have scales spanning more "
                                "than 14 binades: no exact FP8 form; keep the FP4 weights (fp8_fp4_gemm_nt is "
                                "exact for any scales)" % refused)
    return q, sf


def _fp8_buffers(B, ue8m0_bytes=False):
    """The (q, sf) pair fp4_weights_to_fp8 fills for FP4 weights B [N, K/2] (checked), unwritten"""
    torch = _t()
    n, k = B.size(0), 2 * B.size(-1)
    q = torch.empty((n, k), dtype=torch.float8_e4m3fn, device=B.device)
    sf = torch.empty((ceil_div(n, 128), max(k // 128, 1)), dtype=torch.uint8 if ue8m0_bytes else torch.float32,
                     device=B.device)
    return q, sf


def _fp4_to_fp8_matrix(B, SFB):
    """The hfp4_matrix of FP4 weights (B, SFB) as hfp4_fp4_weights_to_fp8_gpu takes them (checked)"""
    _fp4_weights("b", B, 2)
    _same_device("sfb", SFB, B.device)
    n, k = B.size(0), 2 * B.size(1)
    scales = _scales("sfb", SFB, 0, n, k, 1, 32)
    return L.hfp4_matrix(B.data_ptr(), L.DTYPE_FP4_E2M1, n, k, B.stride(0) if n > 1 else k // 2, 0, scales)


class _Entry:
    __slots__ = ("state", "weights", "tokens")


_cache_lock = threading.Lock()
_cache = {}
_dead = []  # keys whose weights were freed; appended by weakref callbacks, purged under the lock
_graph_pins = {}  # (device, id) -> SM90Weights used by a GEMM captured in a CUDA graph (the graph holds its pointers)


def _version(t):
    """t's version counter; inference tensors have none (reading it raises), so they count as -1."""
    return -1 if t.is_inference() else t._version


def _capturing(device) -> bool:
    """Whether device's current stream is capturing a CUDA graph."""
    torch = _t()
    with torch.cuda.device(device):
        return bool(torch.cuda.is_current_stream_capturing())


def _liveness_token(t, key, sink=None):
    """A weak reference to t's storage (to t itself where torch does not keep one Python object per
    storage) whose callback marks the cache entry dead when that storage is freed. The callback
    only appends to a list (_dead, or sink for another cache: it may run inside a garbage
    collection, even one triggered while the lock is held); the entry is dropped at the next cache
    operation."""
    dead_list = _dead if sink is None else sink

    def dead(ref, key=key):
        dead_list.append((key, ref))
    storage = t.untyped_storage()
    target = storage if storage is t.untyped_storage() else t
    try:
        return weakref.ref(target, dead)
    except TypeError:
        return weakref.ref(t, dead)


def _purge_locked():
    while _dead:
        key, ref = _dead.pop()
        e = _cache.get(key)
        if e is not None and any(tok is ref for tok in e.tokens):
            del _cache[key]


def weight_cache_enabled() -> bool:
    """False when the environment sets HFP4_WEIGHT_CACHE=0 (read at every call): the GEMMs then
    repack their weights at every call instead of caching them."""
    return os.environ.get("HFP4_WEIGHT_CACHE", "1").strip() != "0"


_repacks = {}  # key -> the cache's repacks of the weights at that key (a repack per call: warn once)
_REPEAT_WARN_AT = 4


def _note_repeat(counts, key, what, stacklevel) -> int:
    """Count one more `what` ("repacked", ...) of the weights at `key` in counts (under its cache's
    lock); the fourth warns once: a caller that passes a new scale tensor, or new weights at one
    address, at every call redoes that work at every call (correct, but an extra pass over the
    weights or a wait per GEMM). Returns the count."""
    n = counts.get(key, 0) + 1
    counts[key] = n
    if n == _REPEAT_WARN_AT:
        import warnings
        warnings.warn("hfp4.deep_gemm: the FP4 weights at 0x%x were %s %d times: pass the same weight "
                      "and scale tensors at every call (scales converted anew for each call are a new tensor "
                      "each time)%s" % (key[1], what, n, ", or repack once with repack_weights() and pass the "
                                        "result" if what == "repacked" else ""),
                      RuntimeWarning, stacklevel=stacklevel + 1)
    return n


def _note_repack_locked(key) -> None:
    """Count a repack of the weights at `key` (_note_repeat)."""
    _note_repeat(_repacks, key, "repacked", 4)


def _cache_key(B):
    """The cache's key of weights B: where they are and how they are laid out (their contents and
    their scales are compared through _weights_state)"""
    return (str(B.device), B.data_ptr(), tuple(B.shape), tuple(B.stride()), B.dtype)


_inflight = {}  # key -> (state, threading.Event): a repack in progress, which other threads' misses wait for


def _cached_weights(B, SFB, capturing=False) -> SM90Weights:
    if not weight_cache_enabled():
        return repack_weights((B, SFB))
    key = _cache_key(B)
    state = _weights_state(B, SFB)
    done = None  # (this thread repacks for the cache: the event the others wait on)
    while True:
        with _cache_lock:
            _purge_locked()
            e = _cache.get(key)
            # (both tokens alive: neither the weights' storage nor the scales' was freed since the
            # repack, so equal pointers mean the same tensors, not new ones at a freed address)
            if e is not None and e.state == state and all(tok() is not None for tok in e.tokens):
                return e.weights
            flight = _inflight.get(key)
            # NOTE: why wait: threads whose first calls meet the same new weights would each repack
            # them (a pass over the weights each, and the repeat warning for a caller that did nothing
            # wrong); one repacks, the others take its result from the cache
            if capturing or flight is None or flight[0] != state:
                _note_repack_locked(key)  # (first: under -W error its warning raises, with nothing registered)
                if not capturing:
                    done = threading.Event()
                    _inflight[key] = (state, done)
                generation = _cache_generation
                break
        flight[1].wait()  # (then look again: the repack may have failed, or a clear dropped it)
    try:
        weights = repack_weights((B, SFB))
        if capturing:
            # captured: the repack runs only when the graph is replayed, so its buffer holds nothing
            # yet; caching it would hand unwritten weights to later eager calls
            return weights
        # NOTE: why the wait: the repack runs on this thread's stream, and the cache hands its buffer to
        # other threads' streams (the waiters above at once) with nothing ordering their GEMMs after
        # it; once a weight, before it is published (GEMM calls themselves never wait)
        if B.device.type == "cuda":
            _t().cuda.current_stream(B.device).synchronize()
        e = _Entry()
        e.state, e.weights = state, weights
        e.tokens = (_liveness_token(B, key), _liveness_token(SFB, key))
        with _cache_lock:
            # (a clear_weight_cache() on another thread during the repack: these weights may be the old
            # ones that the clear was meant to drop, so they serve this call only)
            if _cache_generation == generation:
                _cache[key] = e
        return weights
    finally:
        if done is not None:
            with _cache_lock:
                if _inflight.get(key, (None, None))[1] is done:
                    del _inflight[key]
            done.set()


_clear_hooks = [_fp8_route.clear]  # callables run by clear_weight_cache (hfp4.experts drops its per-module plans
# there, the FP8 route what it learnt of weights)
_cache_generation = 0  # bumped by clear_weight_cache: what was fetched before a clear is not kept after it


def _weights_state(B, SFB):
    """What the cache compares to decide that weights (B, SFB) are the ones it repacked: pointers,
    shapes, strides, dtypes, version counters (callers that keep repacked weights across calls, such
    as hfp4.experts' plans, compare the same tuple)."""
    return (B.data_ptr(), tuple(B.shape), tuple(B.stride()), B.dtype, _version(B),
            SFB.data_ptr(), tuple(SFB.shape), tuple(SFB.stride()), SFB.dtype, _version(SFB))


def _cache_tokens(B, w):
    """The liveness tokens of the cache entry that holds w, the repack of weights B (None where the
    cache holds something else for B or is off): their referents die when the weights' or scales'
    storage is freed. A caller that keeps w across calls (hfp4.experts' plans) reuses it only while
    both tokens live and _weights_state is unchanged, as the cache itself does."""
    with _cache_lock:
        e = _cache.get(_cache_key(B))
        return e.tokens if e is not None and e.weights is w else None


def clear_weight_cache() -> None:
    """Drop every cached repacked weight buffer (their device memory returns to torch's allocator,
    except for buffers a captured CUDA graph uses: see :func:`release_graph_weights`).

    Call it after updating weights in place that a GEMM has already used, when the update does not
    bump the tensors' version counters: ``param.data.copy_(new)`` (vLLM/SGLang weight loading and
    reloads, RL weight syncs), DLPack/IPC writes, inference tensors. Otherwise the next GEMMs keep
    using the repacked copy of the old weights, and large-M calls (fp8_fp4_gemm_nt's FP8 route) what
    was learnt of the old scales: new scales without an exact FP8 form would give NaN there.
    (``HFP4_WEIGHT_CACHE=0`` avoids both caches, at the cost of a repack per call, and at large M a
    wait for the device per call.)"""
    global _cache_generation
    with _cache_lock:
        _cache.clear()
        _repacks.clear()
        del _dead[:]
        _cache_generation += 1
    for hook in _clear_hooks:
        hook()


def release_graph_weights(device=None) -> None:
    """Release the repacked weights kept alive for captured CUDA graphs: every device's, or with
    ``device`` (a torch.device, "cuda:1", or an index) only that device's, for a process whose GPUs'
    graphs are destroyed at different times. Call it only after every graph on those devices that
    captured an hfp4 GEMM has been destroyed (a replay would read freed memory). (A large-M
    fp8_fp4_gemm_nt captured through the FP8 route pins nothing: each replay converts the caller's
    B and SFB anew, so those must stay alive while the graph lives.)"""
    with _cache_lock:
        if device is None:
            _graph_pins.clear()
            return
        dev = str(_t().device("cuda", device) if isinstance(device, int) else _t().device(device))
        for key in [k for k in _graph_pins if k[0] == dev]:
            del _graph_pins[key]


def weight_cache_info() -> dict:
    """{"entries": number of cached repacked weights, "bytes": their device bytes,
    "graph_pinned": repacked weights kept alive for captured CUDA graphs}."""
    with _cache_lock:
        _purge_locked()
        return {"entries": len(_cache), "bytes": sum(e.weights.nbytes for e in _cache.values()),
                "graph_pinned": len(_graph_pins)}


def _weights(name, b, ndim, k, device) -> SM90Weights:
    capturing = _capturing(device)
    if isinstance(b, SM90Weights):
        buf = b.buffer
        if not hasattr(buf, "is_cuda") or not buf.is_cuda:
            raise L.invalid_argument("%s: these SM90Weights are a host repack; use repack_weights for the GPU" % name)
        _same_device(name, buf, device)
        w = b
    else:
        B, SFB = _pair(name, b)
        _fp4_weights(name, B, ndim)
        _same_device(name, B, device)
        _same_device("sfb", SFB, device)
        if B.size(-1) * 2 != k:
            raise L.invalid_argument("%s holds K = %d (packed FP4: 2 * its last dim) but a has K = %d"
                                     % (name, B.size(-1) * 2, k))
        w = _cached_weights(B, SFB, capturing)
    if w.k != k:
        raise L.invalid_argument("%s holds K = %d (packed FP4: 2 * its last dim) but a has K = %d" % (name, w.k, k))
    if capturing:
        with _cache_lock:
            _graph_pins[(str(device), id(w))] = w
    return w


# ------------------------------------------------------------------------------------------------
# GEMMs
# ------------------------------------------------------------------------------------------------


def _launch(p, device, d=None, copy_c=None):
    torch = _t()
    with torch.cuda.device(device):
        if copy_c is not None:
            d.copy_(copy_c)
        L.check(L.lib().hfp4_gemm(byref(p), _stream(device)))


def _check_alpha(alpha):
    """DeepGEMM 2.8's alpha (D = alpha * A B^T + C; SM100 only there, an assertion on SM90)"""
    if alpha is not None:
        raise L.unsupported("alpha = %r: hfp4's SM90 GEMMs have no output scale (DeepGEMM's alpha is SM100-only); "
                            "pass alpha=None" % (alpha,))


def _weights_n(b):
    if isinstance(b, SM90Weights):
        return b.n, b.num_groups
    B = _pair("b", b)[0]
    return B.size(-2), (B.size(0) if B.dim() == 3 else 1)


def fp8_fp4_gemm_nt(a, b, d, c=None, recipe=None, recipe_a=None, recipe_b=None, compiled_dims="nk",
                    disable_ue8m0_cast=False, alpha=None):
    """D[M, N] = C + A[M, K] @ B[N, K]^T with FP8 A and FP4 B (DeepGEMM's fp8_fp4_gemm_nt), or FP8 B [N, K]
    under 128 x 128 block scales (its fp8_gemm_nt on SM90), which hfp4_gemm runs where the library's
    FP8-weight path is on (Unsupported otherwise). FP4 weights at large M (M >= 1024 and 2 M N K >=
    10^11, 1x128 activation scales) go through their exact FP8 form, converted for the call into a
    transient buffer, and the FP8 x FP8 GEMM: 1.5-1.7x the FP4 kernel there (hfp4/_fp8_route.py).
    compiled_dims and disable_ue8m0_cast are accepted for compatibility and have no effect. alpha
    (DeepGEMM's output scale, an SM100 feature there) must be None: any other value raises
    Unsupported (NotImplementedError), so callers fall back."""
    _t()
    _check_alpha(alpha)
    A, SFA = _pair("a", a)
    gran_k_a, gran_b = resolve_recipes(recipe, recipe_a, recipe_b)
    fp8_b = _is_fp8_weights(b)  # DeepGEMM's fp8_gemm_nt (the legacy name is this function)
    if not fp8_b:
        _check_b_gran(gran_b)
    if A.dim() != 2:
        raise L.invalid_argument("a must be 2D [M, K], got shape %s" % (tuple(A.shape),))
    M, K = A.shape
    N, _ = _weights_n(b)
    out, copy_c = _output(d, c, (M, N))
    if M == 0 or N == 0:
        return
    if K == 0:
        if c is None:
            d.zero_()
        elif c.data_ptr() != d.data_ptr():
            d.copy_(c)
        return
    if not A.is_cuda:
        raise L.invalid_argument("a must be a CUDA tensor")
    for nm, t in (("sfa", SFA), ("d", d)):
        _same_device(nm, t, A.device)
    p = L.hfp4_gemm_problem()
    p.a = _activations(A, SFA, 2, gran_k_a, 1)  # checked before the weights are repacked
    w = None  # (the repacked weights, held until the launch: uncached ones own their buffer)
    if fp8_b:
        B, SFB = _pair("b", b)
        p.b = _fp8_weights("b", B, SFB, K, gran_b, device=A.device)
    elif _fp8_route.try_gemm(sys.modules[__name__], p.a, b, M, N, K, out, d, copy_c, A.device):
        return  # (large M: the weights converted to FP8 for this call, then the FP8 x FP8 GEMM)
    else:
        w = _weights("b", b, 2, K, A.device)
        p.b = w.matrix
    p.grouping = L.GROUPING_NONE
    p.m, p.n, p.k, p.num_groups = M, N, K, 1
    p.d = out
    _launch(p, A.device, d, copy_c)
    del w


def m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, d, grouped_layout, recipe=None, recipe_a=None, recipe_b=None,
                                         compiled_dims="nk", disable_ue8m0_cast=False, use_psum_layout=False,
                                         ensure_zero_padding=True, expected_m_for_psum_layout=None,
                                         expected_m=None):
    """m-grouped contiguous GEMM (DeepGEMM's m_grouped_fp8_fp4_gemm_nt_contiguous): A [M, K] rows
    sorted by expert, B [G, N, K/2], D [M, N]. grouped_layout int32: [M] expert of each row (-1 for
    padding rows, whose D rows are written as zeros), or with use_psum_layout [G] cumulative end rows.
    B may also be FP8 [G, N, K] under 128 x 128 block scales (DeepGEMM's m_grouped_fp8_gemm_nt_contiguous):
    the installed DeepGEMM's kernel where there is one, else the library's FP8 x FP8 grouped form
    (expert-id layout, segments aligned to a multiple of 128; where the library cannot run it:
    Unsupported, NotImplementedError, so callers fall back).
    Segments start at multiples of get_mk_alignment_for_contiguous_layout(). ensure_zero_padding=False
    (DeepGEMM's keyword; DeepGEMM's SM90 kernel ignores it) leaves D's padding rows unspecified (as they
    were, or zeros): for callers that drop them after the GEMM, it saves the kernel writing them (at
    decode most of D: ~128 rows per routed expert). compiled_dims and disable_ue8m0_cast have no
    effect.

    expected_m (hfp4's, not DeepGEMM's): real rows per routed expert, a scheduling hint for either
    layout (the same as expected_m_for_psum_layout there): ceil(tokens * top_k / experts). Without it
    the library finds the decode-sized segments of the expert-id layout on the GPU (128-row blocks of
    at most 8 real rows) and runs them on its decode tile, within a few percent of the hinted speed
    (bench/RESULTS.md v18); the hint picks the tile directly and saves a second launch."""
    torch = _t()
    fp8_b = _is_fp8_weights(b)
    if fp8_b:  # (the installed DeepGEMM's FP8 kernel first, where there is one; else the library's)
        r = _call_real(("m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nt_contiguous"),
                       (a, b, d, grouped_layout),
                       _given(recipe=(recipe, None), recipe_a=(recipe_a, None), recipe_b=(recipe_b, None),
                              compiled_dims=(compiled_dims, "nk"), disable_ue8m0_cast=(disable_ue8m0_cast, False),
                              use_psum_layout=(use_psum_layout, False),
                              expected_m_for_psum_layout=(expected_m_for_psum_layout, None)))
        if r is not None:
            return r[0]
    A, SFA = _pair("a", a)
    gran_k_a, gran_b = resolve_recipes(recipe, recipe_a, recipe_b)
    if not fp8_b:
        _check_b_gran(gran_b)
    if expected_m_for_psum_layout is not None and not use_psum_layout:
        raise L.invalid_argument("expected_m_for_psum_layout = %r needs use_psum_layout = True"
                                 % (expected_m_for_psum_layout,))
    if expected_m is not None:
        try:  # an int, numpy integer or 0-d integer tensor (what ceil(tokens * top_k / experts) gives)
            hint = None if isinstance(expected_m, bool) else operator.index(expected_m)
        except TypeError:
            hint = None
        if hint is None or hint < 0 or hint >= 1 << 31:
            raise L.invalid_argument("expected_m must be an integer in [0, 2^31) (rows per routed expert), got %r"
                                     % (expected_m,))
        if expected_m_for_psum_layout and hint and expected_m_for_psum_layout != hint:
            raise L.invalid_argument("expected_m = %r and expected_m_for_psum_layout = %r disagree"
                                     % (expected_m, expected_m_for_psum_layout))
        expected_m = hint
    if A.dim() != 2:
        raise L.invalid_argument("a must be 2D [M, K], got shape %s" % (tuple(A.shape),))
    M, K = A.shape
    N, G = _weights_n(b)
    out, _ = _output(d, None, (M, N))
    if M == 0:
        return
    if not A.is_cuda:
        raise L.invalid_argument("a must be a CUDA tensor")
    want = G if use_psum_layout else M
    if grouped_layout.dtype != torch.int32 or tuple(grouped_layout.shape) != (want,) or \
            (want > 1 and grouped_layout.stride(0) != 1):
        raise L.invalid_argument("grouped_layout must be a contiguous int32 [%d] tensor (%s), got %s %s"
                                 % (want, "psum: cumulative ends per group" if use_psum_layout else
                                    "expert of each row", grouped_layout.dtype, tuple(grouped_layout.shape)))
    for nm, t in (("sfa", SFA), ("d", d), ("grouped_layout", grouped_layout)):
        _same_device(nm, t, A.device)
    p = L.hfp4_gemm_problem()
    p.a = _activations(A, SFA, 2, gran_k_a, 1)  # checked before the weights are repacked
    w, bm = _grouped_weights(b, fp8_b, K, gran_b, A.device)
    p.grouping = L.GROUPING_CONTIGUOUS_PSUM if use_psum_layout else L.GROUPING_CONTIGUOUS
    p.m, p.n, p.k, p.num_groups = M, N, K, G
    p.layout = grouped_layout.data_ptr()
    p.m_alignment = get_mk_alignment_for_contiguous_layout()
    p.expected_m = int(expected_m or expected_m_for_psum_layout or 0)
    p.d_padding = L.D_PADDING_ZERO if ensure_zero_padding else L.D_PADDING_ANY
    p.b = bm
    p.d = out
    _launch(p, A.device)
    del w


def m_grouped_fp8_fp4_gemm_nt_masked(a, b, d, masked_m, expected_m, recipe=None, recipe_a=None, recipe_b=None,
                                     compiled_dims="nk", disable_ue8m0_cast=False):
    """Masked grouped GEMM (DeepGEMM's m_grouped_fp8_fp4_gemm_nt_masked): A [G, M, K], B [G, N, K/2],
    D [G, M, N]; only rows r < masked_m[g] (int32 [G], on the device) of group g are computed and
    written. expected_m is a scheduling hint. B may also be FP8 [G, N, K] under 128 x 128 block
    scales (DeepGEMM's m_grouped_fp8_gemm_nt_masked): the installed DeepGEMM's kernel where there is
    one, else the library's FP8 x FP8 masked form (Unsupported, NotImplementedError, where it cannot
    run it)."""
    torch = _t()
    fp8_b = _is_fp8_weights(b)
    if fp8_b:  # (as the contiguous form: the installed DeepGEMM's FP8 kernel first)
        r = _call_real(("m_grouped_fp8_gemm_nt_masked", "m_grouped_fp8_fp4_gemm_nt_masked"),
                       (a, b, d, masked_m, expected_m),
                       _given(recipe=(recipe, None), recipe_a=(recipe_a, None), recipe_b=(recipe_b, None),
                              compiled_dims=(compiled_dims, "nk"), disable_ue8m0_cast=(disable_ue8m0_cast, False)))
        if r is not None:
            return r[0]
    A, SFA = _pair("a", a)
    gran_k_a, gran_b = resolve_recipes(recipe, recipe_a, recipe_b)
    if not fp8_b:
        _check_b_gran(gran_b)
    if A.dim() != 3:
        raise L.invalid_argument("a must be 3D [G, M, K], got shape %s" % (tuple(A.shape),))
    G, M, K = A.shape
    N, Gb = _weights_n(b)
    out, _ = _output(d, None, (G, M, N))
    if M == 0:
        return
    if not A.is_cuda:
        raise L.invalid_argument("a must be a CUDA tensor")
    if masked_m.dtype != torch.int32 or tuple(masked_m.shape) != (G,) or (G > 1 and masked_m.stride(0) != 1):
        raise L.invalid_argument("masked_m must be a contiguous int32 [%d] tensor, got %s %s"
                                 % (G, masked_m.dtype, tuple(masked_m.shape)))
    for nm, t in (("sfa", SFA), ("d", d), ("masked_m", masked_m)):
        _same_device(nm, t, A.device)
    if Gb != G:
        raise L.invalid_argument("a has %d groups but b has %d" % (G, Gb))
    p = L.hfp4_gemm_problem()
    p.a = _activations(A, SFA, 3, gran_k_a, G)  # checked before the weights are repacked
    w, bm = _grouped_weights(b, fp8_b, K, gran_b, A.device)
    if w is not None and w.num_groups != G:
        raise L.invalid_argument("a has %d groups but b has %d" % (G, w.num_groups))
    p.grouping = L.GROUPING_MASKED
    p.m, p.n, p.k, p.num_groups = M, N, K, G
    p.layout = masked_m.data_ptr()
    p.expected_m = int(expected_m)
    p.b = bm
    p.d = out
    _launch(p, A.device)


def _transposed(name, pair, dims=(-2, -1)):
    """(X, SF) with both transposed over dims: DeepGEMM's other layouts pass the operand that way, and
    its NT form then sees the views (SM90 accepts them where they are K-major, as DeepGEMM's does)"""
    X, SF = _pair(name, pair)
    return X.transpose(*dims), SF.transpose(*dims)


# DeepGEMM's other layouts of the same GEMM: B given as [K, N] (nn), A as [K, M] (tn: B too; tt: A
# only), each with its scales transposed the same way. They call the NT form with the transposed
# views, as DeepGEMM does; on SM90 both operands must then be K-major (DeepGEMM's SM90 kernels
# assert the same), so these serve callers whose [K, N] / [K, M] tensors are transposed views of
# K-major ones. Unsupported otherwise, naming the operand.
def fp8_fp4_gemm_nn(a, b, d, c=None, recipe=None, recipe_a=None, recipe_b=None, compiled_dims="nk",
                    disable_ue8m0_cast=False, alpha=None):
    """fp8_fp4_gemm_nt with B passed as [K, N] (and its scales transposed alike)"""
    _check_alpha(alpha)
    return fp8_fp4_gemm_nt(a, _transposed("b", b), d, c, recipe, recipe_a, recipe_b, compiled_dims,
                           disable_ue8m0_cast)


def fp8_fp4_gemm_tn(a, b, d, c=None, recipe=None, recipe_a=None, recipe_b=None, compiled_dims="mn",
                    disable_ue8m0_cast=False, alpha=None):
    """fp8_fp4_gemm_nt with A passed as [K, M] and B as [K, N] (scales transposed alike)"""
    _check_alpha(alpha)
    return fp8_fp4_gemm_nt(_transposed("a", a), _transposed("b", b), d, c, recipe, recipe_a, recipe_b,
                           compiled_dims, disable_ue8m0_cast)


def fp8_fp4_gemm_tt(a, b, d, c=None, recipe=None, recipe_a=None, recipe_b=None, compiled_dims="mn",
                    disable_ue8m0_cast=False, alpha=None):
    """fp8_fp4_gemm_nt with A passed as [K, M] (its scales transposed alike)"""
    _check_alpha(alpha)
    return fp8_fp4_gemm_nt(_transposed("a", a), b, d, c, recipe, recipe_a, recipe_b, compiled_dims,
                           disable_ue8m0_cast)


def m_grouped_fp8_fp4_gemm_nn_contiguous(a, b, d, grouped_layout, recipe=None, recipe_a=None, recipe_b=None,
                                         compiled_dims="nk", disable_ue8m0_cast=False, use_psum_layout=False,
                                         ensure_zero_padding=True, expected_m=None):
    """m_grouped_fp8_fp4_gemm_nt_contiguous with B passed as [G, K, N] (its scales transposed alike)"""
    return m_grouped_fp8_fp4_gemm_nt_contiguous(a, _transposed("b", b, (1, 2)), d, grouped_layout, recipe, recipe_a,
                                                recipe_b, compiled_dims, disable_ue8m0_cast, use_psum_layout,
                                                ensure_zero_padding, expected_m=expected_m)


_pdl = [False]


def set_pdl(enable):
    """DeepGEMM's switch for launching with programmatic dependent launch (default off there).
    Accepted for compatibility: hfp4's kernels always allow it, and wait for the kernels before
    them before reading anything, so it is safe either way."""
    _pdl[0] = bool(enable)


def get_pdl():
    """The value last given to set_pdl (no effect on hfp4's launches)"""
    return _pdl[0]


def set_ignore_compile_dims(ignore):
    """DeepGEMM's switch that stops compiled_dims from fixing dimensions at JIT time. hfp4 compiles
    nothing at run time: accepted, no effect."""


# DeepGEMM's legacy and FP4 alias names are the same functions (the FP4 names take FP4 activations
# in DeepGEMM, which hfp4 refuses with Unsupported: it has FP8-activation kernels only).
fp4_gemm_nt = fp8_fp4_gemm_nt
m_grouped_fp4_gemm_nt_contiguous = m_grouped_fp8_fp4_gemm_nt_contiguous
m_grouped_fp4_gemm_nt_masked = m_grouped_fp8_fp4_gemm_nt_masked
fp8_gemm_nt = fp8_fp4_gemm_nt
fp8_gemm_nn = fp8_fp4_gemm_nn
fp8_gemm_tn = fp8_fp4_gemm_tn
fp8_gemm_tt = fp8_fp4_gemm_tt
m_grouped_fp8_gemm_nn_contiguous = m_grouped_fp8_fp4_gemm_nn_contiguous
m_grouped_fp8_gemm_nt_contiguous = m_grouped_fp8_fp4_gemm_nt_contiguous
m_grouped_fp8_gemm_nt_masked = m_grouped_fp8_fp4_gemm_nt_masked
fp8_m_grouped_gemm_nt_masked = m_grouped_fp8_fp4_gemm_nt_masked


# Names transformers' DeepGEMM loader requires to exist (deepseek-v4.md §1.1: a missing symbol makes
# it refuse the whole module), and DeepGEMM's tests import (deepgemm-compat.md §5.1). hfp4 has no BF16
# grouped GEMM, no K-grouped (wgrad) FP8 GEMM and no Mega MoE: they exist so the module loads, run the
# installed DeepGEMM's where there is one, and else raise NotImplementedError so the caller falls back.
def _not_in_hfp4(name):
    def call(*args, **kwargs):
        r = _call_real((name,), args, kwargs)
        if r is not None:
            return r[0]
        raise L.unsupported("%s: not provided by hfp4 (FP8 x FP4 GEMMs only) and no DeepGEMM is installed; use "
                            "another backend" % name)
    call.__name__ = name
    call.__doc__ = ("Not provided by hfp4: the installed DeepGEMM's, where there is one; else raises "
                    "NotImplementedError (hfp4.Unsupported) so callers fall back.")
    return call


m_grouped_bf16_gemm_nt_contiguous = _not_in_hfp4("m_grouped_bf16_gemm_nt_contiguous")
m_grouped_bf16_gemm_nn_contiguous = _not_in_hfp4("m_grouped_bf16_gemm_nn_contiguous")
transform_weights_for_mega_moe = _not_in_hfp4("transform_weights_for_mega_moe")
get_symm_buffer_for_mega_moe = _not_in_hfp4("get_symm_buffer_for_mega_moe")
fp8_fp4_mega_moe = _not_in_hfp4("fp8_fp4_mega_moe")
k_grouped_fp8_gemm_nt_contiguous = _not_in_hfp4("k_grouped_fp8_gemm_nt_contiguous")
k_grouped_fp8_gemm_tn_contiguous = _not_in_hfp4("k_grouped_fp8_gemm_tn_contiguous")


def _cublaslt(name, transpose_a, transpose_b):
    """DeepGEMM's cuBLASLt baseline `name` (_cublaslt.py): the installed DeepGEMM's where there is
    one, else torch's cuBLASLt calls; A and/or B passed transposed as the suffix says"""
    def flip(x, on):
        return x.t() if on and getattr(x, "dim", lambda: 0)() == 2 else x

    def call(a, b, d, c=None):
        r = _call_real((name,), (a, b, d), {"c": c} if c is not None else {})
        if r is not None:
            return r[0]
        _t()
        _cublaslt_impl.gemm_nt(name, flip(a, transpose_a), flip(b, transpose_b), d, c)

    call.__name__ = name
    call.__doc__ = ("DeepGEMM's plain cuBLASLt GEMM, D = A B^T (+ C) with FP8 e4m3 or BF16 operands and no "
                    "scales (its tests' baseline; hfp4/_cublaslt.py)")
    return call


cublaslt_gemm_nt = _cublaslt("cublaslt_gemm_nt", False, False)
cublaslt_gemm_nn = _cublaslt("cublaslt_gemm_nn", False, True)
cublaslt_gemm_tn = _cublaslt("cublaslt_gemm_tn", True, True)
cublaslt_gemm_tt = _cublaslt("cublaslt_gemm_tt", True, False)


class SymmBuffer:
    """Not provided by hfp4 (Mega MoE's symmetric buffer): constructing one raises NotImplementedError."""

    def __init__(self, *args, **kwargs):
        raise L.unsupported("SymmBuffer: Mega MoE is not provided by hfp4")


_available = {}


def is_available(device=None) -> bool:
    """True when torch sees a CUDA device that hfp4's SM90 kernels can run on (cached per device)."""
    try:
        torch = _t()
    except ImportError:
        return False
    if not torch.cuda.is_available():
        return False
    dev = None if device is None else torch.device(device)
    idx = torch.cuda.current_device() if dev is None or dev.index is None else dev.index
    if idx not in _available:
        info = L.hfp4_device_info()
        try:
            st = L.lib().hfp4_device_query(idx, byref(info))
        except ImportError:
            st = L.ERR_NO_DEVICE
        _available[idx] = st == L.OK and bool(info.has_sm90_kernels)
    return _available[idx]


# ------------------------------------------------------------------------------------------------
# Layout helpers on torch tensors (CPU tensors: the CPU calls; CUDA tensors: the GPU calls)
# ------------------------------------------------------------------------------------------------


def get_tma_aligned_size(x: int, element_size: int) -> int:
    """align(x, 16 / element_size) (DeepGEMM's get_tma_aligned_size)."""
    out = c_int64()
    L.check(L.lib().hfp4_sf_get_tma_aligned_size(int(x), int(element_size), byref(out)))
    return out.value


def _sf_tensor(name, sf):
    torch = _t()
    if sf.dtype == torch.float32:
        code = L.DTYPE_FP32
    elif sf.dtype == torch.int32:
        code = L.DTYPE_INT32
    else:
        raise L.invalid_argument("%s.dtype = %s must be torch.float32 or torch.int32 (packed UE8M0)" % (name, sf.dtype))
    if sf.dim() not in (2, 3):
        raise L.invalid_argument("%s must be 2D [mn, sf_k] or 3D [G, mn, sf_k], got shape %s"
                                 % (name, tuple(sf.shape)))
    t = L.hfp4_sf_tensor()
    t.data = sf.data_ptr() if sf.numel() else None
    t.dtype = code
    t.num_groups = sf.size(0) if sf.dim() == 3 else 0
    t.mn, t.sf_k = sf.size(-2), sf.size(-1)
    st = sf.stride()
    t.stride_group = st[0] if sf.dim() == 3 else 0
    t.stride_mn, t.stride_k = st[-2], st[-1]
    return t


def _produce(sf_in, device, query, call_cpu, call_gpu):
    """Query, allocate (torch's allocator), call; pass-through returns the input tensor."""
    torch = _t()
    out = L.hfp4_sf_tensor()
    nbytes = c_size_t()
    L.check(query(byref(out), byref(nbytes)))
    if nbytes.value == 0 and sf_in is not None and out.data is not None and out.data == sf_in.data_ptr():
        return sf_in
    buf = torch.empty(nbytes.value, dtype=torch.uint8, device=device)
    out = L.hfp4_sf_tensor()
    dst = buf.data_ptr() if nbytes.value else None
    if device.type == "cuda":
        with torch.cuda.device(device):
            L.check(call_gpu(dst, nbytes.value, byref(out), _stream(device)))
    else:
        L.check(call_cpu(dst, nbytes.value, byref(out)))
    dt = torch.float32 if out.dtype == L.DTYPE_FP32 else torch.int32
    shape = ((out.num_groups,) if out.num_groups else ()) + (out.mn, out.sf_k)
    strides = ((out.stride_group,) if out.num_groups else ()) + (out.stride_mn, out.stride_k)
    if nbytes.value == 0 or 0 in shape:
        return torch.zeros(shape, dtype=dt, device=device)
    return torch.as_strided(buf.view(dt), shape, strides)


def _opts(round_up=False):
    return L.hfp4_sf_options(L.SF_ROUND_UP if round_up else 0, 0, None)


def _psum(psum_layout, device, alignment=None):
    if psum_layout is None:
        return None, None
    torch = _t()
    ends = psum_layout.to(device=device, dtype=torch.int32).contiguous().view(-1)
    al = get_mk_alignment_for_contiguous_layout() if alignment is None else int(alignment)
    return L.hfp4_sf_psum(ends.data_ptr(), ends.numel(), al), ends


def _arch(device):
    torch = _t()
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return major * 10 + minor
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return major * 10 + minor
    return 90


def get_mn_major_tma_aligned_tensor(sf):
    """DeepGEMM's get_mn_major_tma_aligned_tensor: float32 [(G,) mn, sf_k] -> strides
    (T*sf_k, 1, T), T = align(mn, 4) (padding rows zero); sf itself if it already has them."""
    t = _sf_tensor("sf", sf)
    lib = L.lib()
    o = _opts()
    return _produce(sf, sf.device, lambda out, b: lib.hfp4_sf_get_mn_major_tma_aligned_tensor_query(byref(t), out, b),
                    lambda d, n, out: lib.hfp4_sf_get_mn_major_tma_aligned_tensor(byref(t), byref(o), d, n, out),
                    lambda d, n, out, s: lib.hfp4_sf_get_mn_major_tma_aligned_tensor_gpu(byref(t), byref(o), d, n,
                                                                                          out, s))


def get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout=None, *, round_up=False):
    """DeepGEMM's get_mn_major_tma_aligned_packed_ue8m0_tensor: float32 power-of-two scales
    [(G,) mn, sf_k] -> int32 [(G,) mn, ceil(sf_k/4)] MN-major TMA-aligned; psum_layout zeroes rows
    outside every group. On the CPU a non-power-of-two scale raises InvalidArgument unless round_up;
    on the GPU it is written rounded up (see hfp4_sf_layout.h)."""
    t = _sf_tensor("sf", sf)
    ps, keep = _psum(psum_layout, sf.device)
    pp = byref(ps) if ps is not None else None
    mn = sf.size(-2)
    lib = L.lib()
    o = _opts(round_up)
    return _produce(None, sf.device,
                    lambda out, b: lib.hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(
                        byref(t), mn, 1, pp, out, b),
                    lambda d, n, out: lib.hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(
                        byref(t), mn, 1, pp, byref(o), d, n, out),
                    lambda d, n, out, s: lib.hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_gpu(
                        byref(t), mn, 1, pp, byref(o), d, n, out, s))


def get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, grouped_layout, ks_cpu, gran_k, k_alignment,
                                                           use_psum_layout=False, *, round_up=False):
    """DeepGEMM's function of that name: sf float32 [sf_k, mn] -> int32 [packed, mn], each K-group
    packed on its own (MoE weight gradients)."""
    torch = _t()
    if sf.dim() != 2:
        raise L.invalid_argument("sf must be 2D [sf_k, mn], got shape %s" % (tuple(sf.shape),))
    t = _sf_tensor("sf", sf.t())
    lay = grouped_layout.to(device=sf.device, dtype=torch.int32).contiguous().view(-1)
    ks_t = None
    if ks_cpu is not None and len(ks_cpu) > 0:
        ks_t = (ctypes.c_int32 * len(ks_cpu))(*[int(v) for v in ks_cpu])
    g = L.hfp4_sf_k_groups(lay.data_ptr() if lay.numel() else None, lay.numel(),
                           ctypes.cast(ks_t, ctypes.c_void_p) if ks_t is not None else None,
                           int(gran_k), int(k_alignment), int(bool(use_psum_layout)))
    lib = L.lib()
    o = _opts(round_up)
    res = _produce(None, sf.device,
                   lambda out, b: lib.hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(
                       byref(t), byref(g), out, b),
                   lambda d, n, out: lib.hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
                       byref(t), byref(g), byref(o), d, n, out),
                   lambda d, n, out, s: lib.hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_gpu(
                       byref(t), byref(g), byref(o), d, n, out, s))
    return res.t()


def transform_sf_into_required_layout(sf, mn, k, recipe=None, num_groups=None, is_sfa=None,
                                      disable_ue8m0_cast=False, psum_layout=None, *, arch=None, round_up=False):
    """DeepGEMM's transform_sf_into_required_layout. arch defaults to sf's device's SM version (the
    current device's for CPU tensors, else 90); hfp4 adds SM90 branches for (1, 32) FP32 scales and
    packed int32 scales (docs/SF_LAYOUT.md). Unsupported (NotImplementedError) where no layout
    exists ("Unknown SF transformation" in DeepGEMM)."""
    t = _sf_tensor("sf", sf)
    ps, keep = _psum(psum_layout, sf.device)
    req = L.sf_transform_request(t, mn, k, recipe, num_groups, is_sfa, disable_ue8m0_cast, ps,
                                 _arch(sf.device) if arch is None else arch)
    lib = L.lib()
    o = _opts(round_up)
    return _produce(sf, sf.device,
                    lambda out, b: lib.hfp4_sf_transform_into_required_layout_query(byref(req), out, b),
                    lambda d, n, out: lib.hfp4_sf_transform_into_required_layout(byref(req), byref(o), d, n, out),
                    lambda d, n, out, s: lib.hfp4_sf_transform_into_required_layout_gpu(byref(req), byref(o), d, n,
                                                                                         out, s))


utils = types.ModuleType(__name__ + ".utils", "DeepGEMM's deep_gemm.utils names over torch tensors (hfp4).")
for _name, _obj in {
    "ceil_div": ceil_div, "align": align, "ceil_to_ue8m0": ceil_to_ue8m0, "pack_ue8m0_to_int": pack_ue8m0_to_int,
    "per_token_cast_to_fp8": per_token_cast_to_fp8, "per_channel_cast_to_fp8": per_channel_cast_to_fp8,
    "per_block_cast_to_fp8": per_block_cast_to_fp8, "per_token_cast_to_fp4": per_token_cast_to_fp4,
    "transpose_packed_fp4": transpose_packed_fp4,
    "get_tma_aligned_size": get_tma_aligned_size, "get_mn_major_tma_aligned_tensor": get_mn_major_tma_aligned_tensor,
    "get_mn_major_tma_aligned_packed_ue8m0_tensor": get_mn_major_tma_aligned_packed_ue8m0_tensor,
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor": get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor,
    "get_mk_alignment_for_contiguous_layout": get_mk_alignment_for_contiguous_layout,
    "set_mk_alignment_for_contiguous_layout": set_mk_alignment_for_contiguous_layout,
}.items():
    setattr(utils, _name, _obj)
utils.__all__ = sorted(n for n in vars(utils) if not n.startswith("_"))
sys.modules[utils.__name__] = utils
del _name, _obj

testing = types.ModuleType(__name__ + ".testing", "DeepGEMM's deep_gemm.testing names (hfp4/_testing.py).")
for _name in ("bench_kineto", "calc_diff", "count_bytes", "ignore_env", "get_arch_major", "test_filter"):
    setattr(testing, _name, getattr(_testing, _name))
testing.__all__ = sorted(n for n in vars(testing) if not n.startswith("_"))
sys.modules[testing.__name__] = testing
del _name
