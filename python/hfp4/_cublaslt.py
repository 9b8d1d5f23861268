"""DeepGEMM's plain cuBLASLt GEMMs, ``cublaslt_gemm_nt`` / ``_nn`` / ``_tn`` / ``_tt``: D = A B^T (+ C)
with FP8 e4m3 or BF16 A and B and no scaling factors. DeepGEMM's tests time its kernels against
them (by the kernel names 'nvjet' and 'reduce') and a drop-in must provide them
(deepgemm-compat.md §8), so hfp4.deep_gemm exposes them under those names.

The installed DeepGEMM's run where there is one (deep_gemm._call_real). Otherwise torch's
cuBLASLt calls: FP8 through torch._scaled_mm with unit scales, BF16 through torch.mm into FP32;
both accumulate in FP32, C is added to the FP32 product, and the sum is rounded into D, as
cuBLASLt's FP32 epilogue does. Without C, an FP8 product goes straight into a contiguous D (one
cuBLASLt kernel and nothing else, as DeepGEMM's baseline: its tests time the call by its kernels'
names; FP32 sums rounded once into D, the same values). Where torch's GEMM does not take the call (FP8 with K or N not a
multiple of 16, a torch without the call, CPU tensors) the product is an FP64 matmul of the
operands' exact values, rounded to FP32: slower, never less precise (not TF32, whatever torch's
float32 matmul precision is set to). Other failures of torch's call (out of memory, a CUDA error)
are raised, not retried. As DeepGEMM's, C must have D's dtype and both must be N-major (unit
stride along N).

The layouts follow DeepGEMM's fp8_fp4_gemm_* (deep_gemm.py): nn takes B as [K, N], tn A as [K, M]
and B as [K, N], tt A as [K, M]; each calls the NT form with transposed views."""
from __future__ import annotations

from . import _lib as L
from ._common import torch_module as _torch


def _check(name, a, b, d, c):
    torch = _torch()
    for nm, t in (("a", a), ("b", b), ("d", d)) + ((("c", c),) if c is not None else ()):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            raise L.invalid_argument("%s: %s must be a 2-D torch tensor (got %s)"
                                     % (name, nm, getattr(t, "shape", type(t).__name__)))
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if a.dtype != b.dtype or a.dtype not in (fp8, torch.bfloat16):
        raise L.invalid_argument("%s: a.dtype = %s and b.dtype = %s must both be float8_e4m3fn or both bfloat16"
                                 % (name, a.dtype, b.dtype))
    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k:
        raise L.invalid_argument("%s: b.shape = %s must be [N, K] with a's K = %d" % (name, tuple(b.shape), k))
    if tuple(d.shape) != (m, n) or d.dtype not in (torch.bfloat16, torch.float32):
        raise L.invalid_argument("%s: d (shape %s, %s) must be [M, N] = [%d, %d], bfloat16 or float32"
                                 % (name, tuple(d.shape), d.dtype, m, n))
    if c is not None and (tuple(c.shape) != (m, n) or c.dtype != d.dtype):
        raise L.invalid_argument("%s: c (shape %s, %s) must be [M, N] = [%d, %d] with d's dtype %s"
                                 % (name, tuple(c.shape), c.dtype, m, n, d.dtype))
    for nm, t in (("d", d),) + ((("c", c),) if c is not None else ()):
        if n > 1 and t.stride(1) != 1:
            raise L.invalid_argument("%s: %s.stride() = %s must be N-major (unit stride along N)"
                                     % (name, nm, tuple(t.stride())))
    for nm, t in (("b", b), ("d", d)) + ((("c", c),) if c is not None else ()):
        if t.device != a.device:
            raise L.invalid_argument("%s: %s is on %s, a on %s (all operands on one device)" % (name, nm, t.device, a.device))


_UNIT_SCALES = {}  # device -> torch._scaled_mm's unit scale (made once: none made a call, or in a graph capture)


def _unit_scale(device):
    one = _UNIT_SCALES.get(device)
    if one is None:
        one = _UNIT_SCALES[device] = _torch().ones((), device=device, dtype=_torch().float32)
    return one


def _fp8_scaled_mm_ok(a, b):
    """torch's cuBLASLt FP8 GEMM takes a @ b.T: CUDA operands, K and N multiples of 16"""
    torch = _torch()
    return a.is_cuda and a.dtype != torch.bfloat16 and a.shape[1] % 16 == 0 and b.shape[0] % 16 == 0 \
        and hasattr(torch, "_scaled_mm")


def _fp8_into_d(a, b, d):
    """a @ b.T with FP32 sums rounded once into D by the GEMM itself; False where torch's call cannot
    write D (not contiguous, empty, a torch without out_dtype / out): the caller's path then"""
    torch = _torch()
    if not (_fp8_scaled_mm_ok(a, b) and d.is_contiguous() and d.numel() > 0 and a.shape[1] > 0):
        return False
    one = _unit_scale(a.device)
    try:
        torch._scaled_mm(a.contiguous(), b.contiguous().t(), scale_a=one, scale_b=one, out_dtype=d.dtype, out=d)
    except TypeError:
        return False
    return True


def _product_fp32(a, b):
    """a @ b.T accumulated in FP32 (or exactly, in FP64), as an FP32 tensor"""
    torch = _torch()
    if a.shape[1] == 0 or a.shape[0] == 0 or b.shape[0] == 0:  # (K = 0: D = C, or zeros)
        return torch.zeros(a.shape[0], b.shape[0], dtype=torch.float32, device=a.device)
    if a.is_cuda:
        try:
            if a.dtype == torch.bfloat16:
                return torch.mm(a, b.t(), out_dtype=torch.float32)
            if _fp8_scaled_mm_ok(a, b):
                one = _unit_scale(a.device)
                return torch._scaled_mm(a.contiguous(), b.contiguous().t(), scale_a=one, scale_b=one,
                                        out_dtype=torch.float32)
        except TypeError:  # (a torch whose call lacks out_dtype: the exact path below)
            pass
    return torch.mm(a.double(), b.double().t()).float()


def gemm_nt(name, a, b, d, c=None):
    _check(name, a, b, d, c)
    if c is None and _fp8_into_d(a, b, d):
        return
    out = _product_fp32(a, b)
    if c is not None:
        out = out + c.float()
    d.copy_(out)
