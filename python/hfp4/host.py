"""hfp4 on numpy arrays (host memory): exact codecs, DeepGEMM's quantizers, the reference GEMMs,
the SM90 weight repack and the scale-factor layout toolkit's CPU calls.

Every function here calls libhfp4.so through ctypes; the library validates the semantics and its
errors name the argument (they surface as :class:`hfp4.InvalidArgument` etc.). Python checks only
what it needs to build pointers safely: array ranks, extents the library cannot see, and strides
that are not whole elements.

Array conventions (numpy has no FP8, FP4, UE8M0 or BF16 dtypes):

* FP8 e4m3 values are ``uint8`` bytes (``int8`` and ml_dtypes' ``float8_e4m3fn`` are accepted);
* packed FP4 is ``uint8`` ``[..., K/2]``, two codes a byte, the even K index in the low nibble
  (``int8`` as DeepGEMM stores it is accepted);
* BF16 values are ``uint16`` bit patterns (ml_dtypes' ``bfloat16`` is accepted on input);
* scales: ``float32`` (FP32), ``uint8`` (UE8M0 exponent bytes, e.g. DeepSeek-V4's
  ``float8_e8m0fnu`` checkpoints viewed as bytes) or ``int32`` (packed UE8M0, four K-groups a word,
  DeepGEMM's ``use_packed_ue8m0``).
"""
from __future__ import annotations

import ctypes
from ctypes import byref, c_int, c_int64, c_size_t, c_uint8

import numpy as np

from . import _lib as L
from ._common import SM90Weights, align, ceil_div, infer_gran_k, scale_grid

__all__ = [
    # codecs
    "fp4_decode", "fp4_encode", "fp4_pack", "fp4_unpack", "fp8_decode", "fp8_encode", "ue8m0_decode",
    "ceil_to_ue8m0", "ue8m0_from_float", "bf16_decode", "bf16_encode",
    # quantizers
    "per_token_cast_to_fp8", "per_block_cast_to_fp8", "per_token_cast_to_fp4",
    # reference GEMMs, repack, and the FP4 -> FP8 weight conversion
    "ref_gemm", "repack_sm90_host", "SM90Weights", "fp4_weights_to_fp8",
    # SF layout toolkit (CPU)
    "get_tma_aligned_size", "get_default_recipe", "check_sf_layout", "get_mn_major_tma_aligned_tensor",
    "get_mn_major_tma_aligned_packed_ue8m0_tensor", "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor",
    "transpose_sf_for_utccp", "transform_sf_into_required_layout",
    "ceil_div", "align",
]


def _c():
    return L.lib()


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


# ------------------------------------------------------------------------------------------------
# Codecs
# ------------------------------------------------------------------------------------------------

_luts = {}


def _lut(name: str, fn_name: str, count: int, dtype) -> np.ndarray:
    t = _luts.get(name)
    if t is None:
        fn = getattr(_c(), fn_name)
        t = np.array([fn(i) for i in range(count)], dtype=dtype)
        t.setflags(write=False)
        _luts[name] = t
    return t


def _codes(x, name: str, limit: int = 256) -> np.ndarray:
    """Integer codes in [0, limit), else InvalidArgument naming the first one outside (a code out of
    range is a caller's bug, not a pattern to mask)."""
    x = np.asarray(x)
    if x.dtype.itemsize == 1 and x.dtype.kind != "b":  # int8 (packed FP4 checkpoints), ml_dtypes float8 / e8m0: bytes
        x = x.view(np.uint8)
    if x.dtype.kind not in "ui":
        raise L.invalid_argument("%s: expected integer codes (uint8 bytes), got dtype %s" % (name, x.dtype))
    if x.size and (x.min() < 0 or x.max() >= limit):
        bad = np.flatnonzero((x.reshape(-1) < 0) | (x.reshape(-1) >= limit))[0]
        idx = list(map(int, np.unravel_index(bad, x.shape))) if x.ndim else []
        raise L.invalid_argument("%s: code%s = %d is outside 0..%d" % (name, idx, int(x.reshape(-1)[bad]), limit - 1))
    return x


def _map_float(fn_name: str, x, out_dtype) -> np.ndarray:
    """Apply a scalar C codec (float -> out) to every element, once per distinct bit pattern."""
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    bits = x.reshape(-1).view(np.uint32)
    uniq, inverse = np.unique(bits, return_inverse=True)
    fn = getattr(_c(), fn_name)
    vals = np.fromiter((fn(float(v)) for v in uniq.view(np.float32)), dtype=out_dtype, count=uniq.size)
    return vals[inverse.reshape(-1)].reshape(x.shape)


def fp4_decode(codes) -> np.ndarray:
    """FP4 e2m1 codes (low 4 bits of each element) -> float32, via hfp4_fp4_decode (0x8 -> +0)."""
    c = _codes(codes, "fp4_decode")
    return _lut("fp4", "hfp4_fp4_decode", 16, np.float32)[(c & 0xF).astype(np.intp)]


def fp4_encode(x) -> np.ndarray:
    """float -> FP4 e2m1 codes (uint8, 0..15) by hfp4_fp4_encode: nearest, ties to the smaller
    magnitude, |x| > 5 -> 6, NaN -> 0, never 0x8."""
    return _map_float("hfp4_fp4_encode", x, np.uint8)


def fp4_pack(codes) -> np.ndarray:
    """Pack FP4 codes [..., K] (K even) two a byte along the last axis, even index in the low
    nibble -> uint8 [..., K/2]."""
    c = _codes(codes, "fp4_pack").astype(np.uint8)
    if c.shape[-1] % 2:
        raise L.invalid_argument("fp4_pack: the last axis (%d) must be even" % c.shape[-1])
    return ((c[..., 0::2] & 0xF) | ((c[..., 1::2] & 0xF) << 4)).astype(np.uint8)


def fp4_unpack(packed) -> np.ndarray:
    """Inverse of fp4_pack: uint8 [..., K/2] -> codes uint8 [..., K]."""
    p = _codes(packed, "fp4_unpack")
    p = p.view(np.uint8) if p.dtype.itemsize == 1 else p.astype(np.uint8)
    out = np.empty(p.shape[:-1] + (2 * p.shape[-1],), dtype=np.uint8)
    out[..., 0::2] = p & 0xF
    out[..., 1::2] = p >> 4
    return out


def fp8_decode(b) -> np.ndarray:
    """FP8 e4m3fn bytes -> float32 (exact; 0x7F/0xFF -> NaN), via hfp4_fp8_decode."""
    c = _codes(b, "fp8_decode")
    return _lut("fp8", "hfp4_fp8_decode", 256, np.float32)[(c & 0xFF).astype(np.intp)]


def fp8_encode(x) -> np.ndarray:
    """float -> FP8 e4m3fn bytes (uint8) by hfp4_fp8_encode: round to nearest even, saturating at
    +-448, NaN -> 0x7F."""
    return _map_float("hfp4_fp8_encode", x, np.uint8)


def ue8m0_decode(e) -> np.ndarray:
    """UE8M0 exponent bytes -> float32 2^(e-127) (e = 0 is the subnormal 2^-127; 255 is NaN)."""
    c = _codes(e, "ue8m0_decode")
    return _lut("ue8m0", "hfp4_ue8m0_decode", 256, np.float32)[(c & 0xFF).astype(np.intp)]


def ceil_to_ue8m0(x) -> np.ndarray:
    """DeepGEMM's ceil_to_ue8m0 (float32): 2^ceil(log2|x|) clamped to [2^-126, 2^127]; NaN for NaN or Inf."""
    return _map_float("hfp4_ceil_to_ue8m0", x, np.float32)


def ue8m0_from_float(x) -> np.ndarray:
    """Exact power-of-two floats -> UE8M0 bytes (uint8). Raises InvalidArgument naming the first
    element that is not a positive power of two in [2^-127, 2^127]."""
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    flat = x.reshape(-1)
    uniq, inverse = np.unique(flat.view(np.uint32), return_inverse=True)
    fn = _c().hfp4_ue8m0_from_float
    out = np.empty(uniq.size, dtype=np.uint8)
    e = c_uint8()
    bad = None
    for i, v in enumerate(uniq.view(np.float32)):
        if fn(float(v), byref(e)) != 0:
            bad = i
            break
        out[i] = e.value
    if bad is not None:
        where = int(np.flatnonzero(inverse.reshape(-1) == bad)[0])
        idx = np.unravel_index(where, x.shape) if x.ndim else ()
        raise L.invalid_argument("ue8m0_from_float: x%s = %r (bits 0x%08x) is not a positive power of two in "
                                 "[2^-127, 2^127]" % (list(map(int, idx)), float(flat[where]),
                                                      int(flat.view(np.uint32)[where])))
    return out[inverse.reshape(-1)].reshape(x.shape)


def bf16_decode(bits) -> np.ndarray:
    """BF16 bit patterns (uint16) -> float32 (exact), via hfp4_bf16_decode. NaN patterns keep their
    sign and payload but come back quiet: the values cross a Python float on their way out of C."""
    b = np.asarray(bits)
    if b.dtype.itemsize == 2 and b.dtype.kind != "u":  # ml_dtypes bfloat16, or int16 bit patterns (torch views)
        b = b.view(np.uint16)
    if b.dtype.kind not in "ui":
        raise L.invalid_argument("bf16_decode: expected uint16 bit patterns, got dtype %s" % b.dtype)
    b = _codes(b, "bf16_decode", 65536)
    return _lut("bf16", "hfp4_bf16_decode", 65536, np.float32)[(b & 0xFFFF).astype(np.intp)]


def bf16_encode(x) -> np.ndarray:
    """float -> BF16 bit patterns (uint16), round to nearest even (NaN stays a quiet NaN)."""
    return _map_float("hfp4_bf16_encode", x, np.uint16)


# ------------------------------------------------------------------------------------------------
# Quantizers (deep_gemm/utils/math.py semantics, computed by the C library)
# ------------------------------------------------------------------------------------------------


def _quant_input(x, fn: str):
    x = np.asarray(x)
    if x.ndim != 2:
        raise L.invalid_argument("%s: x must be 2D [m, k], got shape %s" % (fn, x.shape))
    if x.dtype == np.uint16 or (x.dtype.itemsize == 2 and x.dtype.name == "bfloat16"):
        x, code = x.view(np.uint16), L.DTYPE_BF16
    elif x.dtype == np.float32:
        code = L.DTYPE_FP32
    elif x.dtype.kind == "f":
        x, code = x.astype(np.float32), L.DTYPE_FP32
    else:
        raise L.invalid_argument("%s: x.dtype = %s must be float32 (float16/float64 are converted) or BF16 "
                                 "(uint16 bit patterns)" % (fn, x.dtype))
    m, k = x.shape
    isz = x.itemsize
    s0, s1 = x.strides
    if not (s1 == isz and s0 >= 0 and s0 % isz == 0 and (m <= 1 or s0 >= k * isz)):
        x = np.ascontiguousarray(x)
        s0 = x.strides[0]
    ldx = k if m <= 1 else s0 // isz
    return x, code, m, k, ldx


def _sf_storage(m_rows: int, sk: int, use_packed_ue8m0: bool, ue8m0_bytes: bool):
    if use_packed_ue8m0:
        sf = np.empty((m_rows, ceil_div(sk, 4)), dtype=np.int32)
        return sf, L.DTYPE_UE8M0_PACKED
    if ue8m0_bytes:
        return np.empty((m_rows, sk), dtype=np.uint8), L.DTYPE_UE8M0
    return np.empty((m_rows, sk), dtype=np.float32), L.DTYPE_FP32


def _check_gran(fn: str, gran_k) -> int:
    g = int(gran_k)
    if g <= 0:
        raise L.invalid_argument("%s: gran_k = %d must be > 0" % (fn, g))
    return g


def per_token_cast_to_fp8(x, use_ue8m0: bool, gran_k: int = 128, use_packed_ue8m0: bool = False, *,
                          ue8m0_bytes: bool = False):
    """DeepGEMM's per_token_cast_to_fp8 on the CPU: x [m, k] -> (q uint8 [m, k] FP8 e4m3 bytes,
    sf). sf is float32 [m, ceil(k/gran_k)], or with use_packed_ue8m0 (needs use_ue8m0) int32
    [m, ceil(ceil(k/gran_k)/4)] K-major with byte 127 (1.0) in unused bytes, or with ue8m0_bytes
    (needs use_ue8m0) uint8 exponent bytes [m, ceil(k/gran_k)]. gran_k is 32 or 128."""
    fn = "per_token_cast_to_fp8"
    x, code, m, k, ldx = _quant_input(x, fn)
    g = _check_gran(fn, gran_k)
    q = np.empty((m, k), dtype=np.uint8)
    sf, sdt = _sf_storage(m, ceil_div(k, g), use_packed_ue8m0, ue8m0_bytes)
    s = L.hfp4_scales(_ptr(sf), sdt, 1, g, sf.shape[1], 1, 0)
    L.check(_c().hfp4_quantize_fp8_per_token(_ptr(x), code, m, k, ldx, int(bool(use_ue8m0)), _ptr(q), k, byref(s)))
    return q, sf


def per_block_cast_to_fp8(x, use_ue8m0: bool, gran_k: int = 128, *, ue8m0_bytes: bool = False):
    """DeepGEMM's per_block_cast_to_fp8 on the CPU: 128 x 128 blocks (the library's only block
    size; another gran_k is rejected). Returns (q uint8 [m, k], sf float32 [ceil(m/128),
    ceil(k/128)], or uint8 exponent bytes with ue8m0_bytes)."""
    fn = "per_block_cast_to_fp8"
    x, code, m, k, ldx = _quant_input(x, fn)
    g = _check_gran(fn, gran_k)
    q = np.empty((m, k), dtype=np.uint8)
    sf, sdt = _sf_storage(ceil_div(m, g), ceil_div(k, g), False, ue8m0_bytes)
    s = L.hfp4_scales(_ptr(sf), sdt, g, g, sf.shape[1], 1, 0)
    L.check(_c().hfp4_quantize_fp8_per_block(_ptr(x), code, m, k, ldx, int(bool(use_ue8m0)), _ptr(q), k, byref(s)))
    return q, sf


def per_token_cast_to_fp4(x, use_ue8m0: bool, gran_k: int = 32, use_packed_ue8m0: bool = False, *,
                          ue8m0_bytes: bool = False):
    """DeepGEMM's per_token_cast_to_fp4 on the CPU: x [m, k] (k even) -> (packed uint8 [m, k/2],
    even K index in the low nibble, sf). The library's FP4 granularity is 32 (DeepSeek-V4's; DeepGEMM's
    default of 128 is rejected by the library), hence the default here. sf as in
    per_token_cast_to_fp8 (float32, packed int32, or UE8M0 bytes)."""
    fn = "per_token_cast_to_fp4"
    x, code, m, k, ldx = _quant_input(x, fn)
    g = _check_gran(fn, gran_k)
    q = np.empty((m, k // 2), dtype=np.uint8)
    sf, sdt = _sf_storage(m, ceil_div(k, g), use_packed_ue8m0, ue8m0_bytes)
    s = L.hfp4_scales(_ptr(sf), sdt, 1, g, sf.shape[1], 1, 0)
    L.check(_c().hfp4_quantize_fp4_per_token(_ptr(x), code, m, k, ldx, int(bool(use_ue8m0)), _ptr(q), k // 2,
                                             byref(s)))
    return q, sf


# ------------------------------------------------------------------------------------------------
# Operand descriptions for the reference GEMM and the repack
# ------------------------------------------------------------------------------------------------


def _elem_strides(name: str, a: np.ndarray):
    out = []
    for d, (n, s) in enumerate(zip(a.shape, a.strides)):
        if n > 1 and s % a.itemsize:
            raise L.invalid_argument("%s: stride %d of axis %d is not a whole number of %d-byte elements"
                                     % (name, s, d, a.itemsize))
        out.append(s // a.itemsize if n > 1 else 0)
    return out


def _scale_code(name: str, sf: np.ndarray) -> int:
    if sf.dtype == np.float32:
        return L.DTYPE_FP32
    if sf.dtype in (np.int32, np.uint32):
        return L.DTYPE_UE8M0_PACKED
    if sf.dtype.itemsize == 1:  # uint8, int8, ml_dtypes float8_e8m0fnu
        return L.DTYPE_UE8M0
    raise L.invalid_argument("%s.dtype = %s must be float32 (FP32), uint8 (UE8M0 bytes) or int32 (packed UE8M0)"
                             % (name, sf.dtype))


def _scales(name: str, sf, groups: int, rows: int, k: int, gran_mn: int, gran_k: int) -> L.hfp4_scales:
    """hfp4_scales for sf [rows', cols'] or [G, rows', cols'] after checking its extent."""
    sf = np.asarray(sf)
    code = _scale_code(name, sf)
    srows, scols = scale_grid(rows, k, gran_mn, gran_k, code == L.DTYPE_UE8M0_PACKED)
    want = ((groups,) if groups else ()) + (srows, scols)
    if sf.shape != want:
        raise L.invalid_argument("%s has shape %s; expected %s for %s, k = %d, gran (%d, %d)%s"
                                 % (name, tuple(sf.shape), want, ("%d groups of %d rows" % (groups, rows))
                                    if groups else "%d rows" % rows, k, gran_mn, gran_k,
                                    " (packed: 4 scales a word)" if code == L.DTYPE_UE8M0_PACKED else ""))
    st = _elem_strides(name, sf)
    return L.hfp4_scales(_ptr(sf), code, gran_mn, gran_k, st[-2], st[-1], st[0] if groups else 0)


def _is_fp8(a: np.ndarray) -> bool:
    return a.dtype.itemsize == 1 and (a.dtype.kind in "ui" or "float8_e4m3" in a.dtype.name)


def _is_bf16(a: np.ndarray) -> bool:
    return a.dtype == np.uint16 or (a.dtype.itemsize == 2 and a.dtype.name == "bfloat16")


def _row_major(name: str, a: np.ndarray, ndim: int):
    """(ld, stride_group) in elements of a K-innermost [rows, cols] / [G, rows, cols] array."""
    if a.ndim != ndim:
        raise L.invalid_argument("%s must be %dD, got shape %s" % (name, ndim, a.shape))
    if a.shape[-1] > 1 and a.strides[-1] != a.itemsize:
        raise L.invalid_argument("%s must be K-major (stride 1 along the last axis), got strides %s (bytes)"
                                 % (name, a.strides))
    st = _elem_strides(name, a)
    ld = st[-2] if a.shape[-2] > 1 else a.shape[-1]
    return ld, (st[0] if ndim == 3 else 0)


def _b_matrix(b, k: int):
    """(hfp4_matrix, num_groups, n, keepalive) of the weights operand b."""
    if isinstance(b, SM90Weights):
        if isinstance(b.buffer, np.ndarray) is False:
            raise L.invalid_argument("b: these SM90Weights live in device memory; the reference needs host weights "
                                     "(repack_sm90_host)")
        return b.matrix, b.num_groups, b.n, (b,)
    if not isinstance(b, (tuple, list)) or len(b) != 2:
        raise L.invalid_argument("b must be a (weights, scales) pair or SM90Weights")
    data, sf = np.asarray(b[0]), np.asarray(b[1])
    if data.ndim not in (2, 3):
        raise L.invalid_argument("b: weights must be [N, K/2] (FP4), [N, K] (FP8) or [G, ...], got shape %s"
                                 % (data.shape,))
    groups = data.shape[0] if data.ndim == 3 else 0
    n = data.shape[-2]
    if data.dtype.itemsize != 1:
        raise L.invalid_argument("b: weights dtype %s must be a byte type (packed FP4 or FP8)" % data.dtype)
    if "float8_e4m3" not in data.dtype.name and data.shape[-1] * 2 == k:
        code, gran = L.DTYPE_FP4_E2M1, (1, 32)
    elif data.shape[-1] == k:
        code = L.DTYPE_FP8_E4M3
        sfa = np.asarray(sf)
        gran = (1, 128) if sfa.ndim >= 2 and sfa.shape[-2] == n and n > 1 else (128, 128)
    else:
        raise L.invalid_argument("b: weights of shape %s fit neither FP4 [.., N, K/2] nor FP8 [.., N, K] for k = %d"
                                 % (data.shape, k))
    ld, sg = _row_major("b weights", data, data.ndim)
    scales = _scales("b scales", sf, groups, n, k, gran[0], gran[1])
    m = L.hfp4_matrix(_ptr(data), code, n, k, ld, sg, scales)
    return m, max(groups, 1), n, (data, sf)


def repack_sm90_host(b, scale_dtype=None) -> SM90Weights:
    """hfp4_ref_repack_sm90: FP4 weights b = (packed uint8 [N, K/2] or [G, N, K/2], (1, 32) scales)
    -> SM90Weights (host buffer) in the layout the SM90 kernels load. scale_dtype: None (UE8M0 when
    every scale is a power of two, else FP32: hfp4_sm90_weights_scale_dtype), "ue8m0" or "fp32"."""
    if not isinstance(b, (tuple, list)) or len(b) != 2:
        raise L.invalid_argument("repack_sm90_host: b must be a (weights, scales) pair")
    data = np.asarray(b[0])
    if data.ndim not in (2, 3):
        raise L.invalid_argument("repack_sm90_host: weights must be [N, K/2] or [G, N, K/2], got shape %s"
                                 % (data.shape,))
    k = data.shape[-1] * 2
    m, groups, n, keep = _b_matrix((data, b[1]), k)
    if m.dtype != L.DTYPE_FP4_E2M1:
        raise L.invalid_argument("repack_sm90_host: weights must be packed FP4")
    lib = _c()
    if scale_dtype is None:
        sd = c_int()
        L.check(lib.hfp4_sm90_weights_scale_dtype(byref(m), groups, byref(sd)))
        sdt = sd.value
    else:
        sdt = {"ue8m0": L.DTYPE_UE8M0, "fp32": L.DTYPE_FP32}.get(scale_dtype, scale_dtype)
        if not isinstance(sdt, int) or isinstance(sdt, bool):
            raise L.invalid_argument("repack_sm90_host: scale_dtype = %r must be 'ue8m0', 'fp32' or None" % (scale_dtype,))
    nbytes = c_size_t()
    L.check(lib.hfp4_sm90_weights_size(groups, n, k, sdt, byref(nbytes)))
    raw = np.zeros(nbytes.value + 256, dtype=np.uint8)
    off = (-_ptr(raw)) % 256
    buf = raw[off:off + nbytes.value]
    out = L.hfp4_matrix()
    L.check(lib.hfp4_ref_repack_sm90(byref(m), groups, sdt, _ptr(buf), nbytes.value, byref(out)))
    return SM90Weights(buf, out, groups, n, k, sdt, nbytes.value)


def fp4_weights_to_fp8(b, *, ue8m0_bytes: bool = False):
    """hfp4_fp4_weights_to_fp8 on the CPU: FP4 weights b = (packed uint8 [N, K/2], (1, 32) power-of-two
    scales; K a multiple of 128) as FP8 under 128 x 128 block scales, exactly (docs/FP8_ROUTE.md).
    Returns (q uint8 [N, K] e4m3 bits, sf float32 [ceil(N/128), K/128], or its UE8M0 exponent bytes
    with ue8m0_bytes): the (weights, scales) pair DeepGEMM's fp8_gemm_nt and ref_gemm take. A 128 x
    128 block whose scales span more than 14 binades raises hfp4.Unsupported naming it (keep the FP4
    weights: their GEMM is exact for any scales)."""
    if not isinstance(b, (tuple, list)) or len(b) != 2:
        raise L.invalid_argument("fp4_weights_to_fp8: b must be a (weights, scales) pair")
    data = np.asarray(b[0])
    if data.ndim != 2:
        raise L.invalid_argument("fp4_weights_to_fp8: weights must be [N, K/2] (one matrix), got shape %s"
                                 % (data.shape,))
    n, k = data.shape[0], data.shape[1] * 2
    m, _, _, keep = _b_matrix((data, b[1]), k)
    if m.dtype != L.DTYPE_FP4_E2M1:
        raise L.invalid_argument("fp4_weights_to_fp8: weights must be packed FP4")
    q = np.empty((n, k), dtype=np.uint8)
    sf = np.empty((ceil_div(n, 128), max(k // 128, 1)), dtype=np.uint8 if ue8m0_bytes else np.float32)
    s = L.hfp4_scales(_ptr(sf), L.DTYPE_UE8M0 if ue8m0_bytes else L.DTYPE_FP32, 128, 128, sf.shape[1], 1, 0)
    L.check(_c().hfp4_fp4_weights_to_fp8(byref(m), _ptr(q), k, byref(s)))
    return q, sf


_GROUPINGS = {"dense": L.GROUPING_NONE, "contiguous": L.GROUPING_CONTIGUOUS,
              "psum": L.GROUPING_CONTIGUOUS_PSUM, "masked": L.GROUPING_MASKED}


def ref_gemm(a, b, *, layout=None, grouping=None, c=None, out=None, out_dtype="bf16", a_gran_k=None,
             m_alignment=0, expected_m=0, num_threads=0):
    """hfp4_ref_gemm, the exact CPU reference: D = C + A @ B^T with every operand decoded exactly,
    accumulated in double and rounded once to D's dtype.

    a: (fp8 uint8 [M, K], scales [M, ceil(K/g)]) with per-token scales (float32, uint8 UE8M0 or
       int32 packed; g = a_gran_k, or inferred from the scale columns), or BF16 uint16 [M, K] alone;
       masked: [G, M, K] and scales [G, M, ...].
    b: (packed FP4 uint8 [N, K/2] or [G, N, K/2], (1, 32) scales [.., N, ceil(K/32)] (packed: words)),
       (FP8 [.., N, K], (128, 128) or (1, 128) scales), or SM90Weights from repack_sm90_host.
    grouping: "dense", "contiguous" (layout int32 [M]: expert of each row, -1 padding), "psum"
       (layout int32 [G]: cumulative end rows) or "masked" (layout int32 [G]: masked_m). Default:
       "masked" for a 3D A, "contiguous" when layout is given, else "dense".
    c: optional accumulator with D's shape (copied into D first, as DeepGEMM does, unless it already
       has D's layout). out: optional D to write (float32, or uint16 BF16 bits); else a zeroed array
       of out_dtype ("bf16" -> uint16 bits, "fp32" -> float32) is allocated: rows the layout leaves
       untouched stay as they were. Returns D.
    """
    a_data, a_sf = (a if isinstance(a, (tuple, list)) else (a, None))
    a_data = np.asarray(a_data)
    if grouping is None:
        grouping = "masked" if a_data.ndim == 3 else ("contiguous" if layout is not None else "dense")
    if grouping not in _GROUPINGS:
        raise L.invalid_argument("ref_gemm: grouping = %r must be one of %s" % (grouping, sorted(_GROUPINGS)))
    masked = grouping == "masked"
    ld_a, sg_a = _row_major("a", a_data, 3 if masked else 2)
    m, k = a_data.shape[-2], a_data.shape[-1]

    bm, groups, n, keep_b = _b_matrix(b, k)
    if masked and a_data.shape[0] != groups:
        raise L.invalid_argument("ref_gemm: a has %d groups but b has %d" % (a_data.shape[0], groups))

    if _is_bf16(a_data):
        if a_sf is not None:
            raise L.invalid_argument("ref_gemm: BF16 activations take no scales")
        am = L.hfp4_matrix(_ptr(a_data), L.DTYPE_BF16, m, k, ld_a, sg_a, L.hfp4_scales())
    elif _is_fp8(a_data):
        if a_sf is None:
            raise L.invalid_argument("ref_gemm: FP8 activations need scales: pass a = (data, scales)")
        a_sf = np.asarray(a_sf)
        packed = _scale_code("a scales", a_sf) == L.DTYPE_UE8M0_PACKED
        g = int(a_gran_k) if a_gran_k else infer_gran_k("a scales", a_sf.shape[-1], k, packed)
        am = L.hfp4_matrix(_ptr(a_data), L.DTYPE_FP8_E4M3, m, k, ld_a, sg_a,
                           _scales("a scales", a_sf, groups if masked else 0, m, k, 1, g))
    else:
        raise L.invalid_argument("ref_gemm: a.dtype = %s must be FP8 bytes (uint8) or BF16 bits (uint16)"
                                 % a_data.dtype)

    d_shape = (groups, m, n) if masked else (m, n)
    if out is None:
        dt = {"bf16": np.uint16, "fp32": np.float32}.get(out_dtype)
        if dt is None:
            raise L.invalid_argument("ref_gemm: out_dtype = %r must be 'bf16' or 'fp32'" % (out_dtype,))
        out = np.zeros(d_shape, dtype=dt)
    if not isinstance(out, np.ndarray) or out.shape != d_shape:
        raise L.invalid_argument("ref_gemm: out must be a numpy array of shape %s" % (d_shape,))
    if not out.flags.writeable:
        raise L.invalid_argument("ref_gemm: out is read-only")
    d_code = L.DTYPE_FP32 if out.dtype == np.float32 else L.DTYPE_BF16 if _is_bf16(out) else None
    if d_code is None:
        raise L.invalid_argument("ref_gemm: out.dtype = %s must be float32 or uint16 (BF16 bits)" % out.dtype)
    ld_d, sg_d = _row_major("out", out, 3 if masked else 2)
    c_ptr = None
    if c is not None:
        c = np.asarray(c)
        if c.shape != d_shape:
            raise L.invalid_argument("ref_gemm: c has shape %s, D is %s" % (c.shape, d_shape))
        if c.dtype == out.dtype and c.strides == out.strides:
            c_ptr = _ptr(c)
        else:
            np.copyto(out, c.astype(out.dtype) if c.dtype != out.dtype else c)
            c_ptr = _ptr(out)

    lay = None
    if grouping != "dense":
        if layout is None:
            raise L.invalid_argument("ref_gemm: grouping %r needs layout" % grouping)
        lay = np.ascontiguousarray(np.asarray(layout), dtype=np.int32)
        want = m if grouping == "contiguous" else groups
        if lay.shape != (want,):
            raise L.invalid_argument("ref_gemm: layout has shape %s; %s needs int32 [%d]"
                                     % (lay.shape, grouping, want))

    p = L.hfp4_gemm_problem()
    p.grouping = _GROUPINGS[grouping]
    p.m, p.n, p.k = m, n, k
    p.num_groups = groups
    p.layout = None if lay is None else _ptr(lay)
    p.m_alignment = int(m_alignment)
    p.expected_m = int(expected_m)
    p.a = am
    p.b = bm
    p.d = L.hfp4_output(_ptr(out), d_code, ld_d, sg_d, c_ptr)
    L.check(_c().hfp4_ref_gemm(byref(p), int(num_threads)))
    del keep_b  # the operands the problem points into lived until here
    return out


# ------------------------------------------------------------------------------------------------
# Scale-factor layout toolkit (CPU calls of hfp4_sf_layout.h)
# ------------------------------------------------------------------------------------------------

_SF_DTYPES = {L.DTYPE_FP32: np.float32, L.DTYPE_INT32: np.int32}


def get_tma_aligned_size(x: int, element_size: int) -> int:
    """align(x, 16 / element_size): DeepGEMM's get_tma_aligned_size."""
    out = c_int64()
    L.check(_c().hfp4_sf_get_tma_aligned_size(int(x), int(element_size), byref(out)))
    return out.value


def _sf_code(name: str, sf: np.ndarray) -> int:
    if sf.dtype == np.float32:
        return L.DTYPE_FP32
    if sf.dtype in (np.int32, np.uint32):
        return L.DTYPE_INT32
    raise L.invalid_argument("%s.dtype = %s must be float32 or int32 (packed UE8M0)" % (name, sf.dtype))


def _sf_tensor(name: str, sf) -> L.hfp4_sf_tensor:
    sf = np.asarray(sf)
    if sf.ndim not in (2, 3):
        raise L.invalid_argument("%s must be 2D [mn, sf_k] or 3D [G, mn, sf_k], got shape %s" % (name, sf.shape))
    code = _sf_code(name, sf)
    st = [s // 4 if s % 4 == 0 else None for s in sf.strides]
    if None in st:
        raise L.invalid_argument("%s strides %s (bytes) are not whole 4-byte elements" % (name, sf.strides))
    t = L.hfp4_sf_tensor()
    t.data = _ptr(sf) if sf.size else None
    t.dtype = code
    t.num_groups = sf.shape[0] if sf.ndim == 3 else 0
    t.mn, t.sf_k = sf.shape[-2], sf.shape[-1]
    t.stride_group = st[0] if sf.ndim == 3 else 0
    t.stride_mn, t.stride_k = st[-2], st[-1]
    return t


def _options(round_up: bool, num_threads: int) -> L.hfp4_sf_options:
    return L.hfp4_sf_options(L.SF_ROUND_UP if round_up else 0, int(num_threads), None)


def _psum(psum_layout, alignment: int):
    if psum_layout is None:
        return None, None
    ends = np.ascontiguousarray(np.asarray(psum_layout), dtype=np.int32)
    if ends.ndim != 1:
        raise L.invalid_argument("psum_layout must be 1D int32 [G], got shape %s" % (ends.shape,))
    return L.hfp4_sf_psum(_ptr(ends), ends.size, int(alignment)), ends


def _alloc(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    off = (-_ptr(raw)) % 64
    return raw[off:off + nbytes]


def _view(out: L.hfp4_sf_tensor, buf: np.ndarray) -> np.ndarray:
    dt = _SF_DTYPES[out.dtype]
    shape = ((out.num_groups,) if out.num_groups else ()) + (out.mn, out.sf_k)
    strides = ((out.stride_group * 4,) if out.num_groups else ()) + (out.stride_mn * 4, out.stride_k * 4)
    if 0 in shape or buf.size == 0:
        return np.zeros(shape, dtype=dt)
    assert out.data == _ptr(buf), "hfp4: output descriptor does not point at the buffer"
    return np.lib.stride_tricks.as_strided(buf.view(dt), shape=shape, strides=strides)


def _produce(sf_in, query, call):
    """Query, allocate, call; pass-through (bytes 0, out.data == input) returns the input itself."""
    out = L.hfp4_sf_tensor()
    nbytes = c_size_t()
    L.check(query(byref(out), byref(nbytes)))
    if nbytes.value == 0 and sf_in is not None and out.data is not None and out.data == _ptr(sf_in):
        return sf_in
    buf = _alloc(nbytes.value)
    out = L.hfp4_sf_tensor()
    L.check(call(_ptr(buf) if nbytes.value else None, nbytes.value, byref(out)))
    return _view(out, buf)


def get_default_recipe(sfa_dtype, sfb_dtype, arch: int = 90):
    """DeepGEMM's get_default_recipe for `arch` (90, 100, 120...); dtypes are numpy dtypes
    (float32 / int32) or arrays. Returns a tuple."""
    def code(d):
        d = d.dtype if isinstance(d, np.ndarray) else np.dtype(d)
        return L.DTYPE_FP32 if d == np.float32 else L.DTYPE_INT32 if d in (np.int32, np.uint32) else L.DTYPE_NONE
    r = L.hfp4_sf_recipe()
    L.check(_c().hfp4_sf_get_default_recipe(code(sfa_dtype), code(sfb_dtype), int(arch), byref(r)))
    return tuple(r.gran[i] for i in range(r.size))


def check_sf_layout(sf, mn: int, k: int, gran_mn: int, gran_k: int, num_groups=None, tma_stride_check=False,
                    sm90_sfb_check=False, type_check=None):
    """DeepGEMM's check_sf_layout: raises InvalidArgument naming the first failed check; returns sf."""
    t = _sf_tensor("sf", sf)
    checks = (L.SF_CHECK_TMA_STRIDE if tma_stride_check else 0) | (L.SF_CHECK_SM90_SFB if sm90_sfb_check else 0)
    tc = L.DTYPE_NONE if type_check is None else _sf_code("type_check", np.empty(0, dtype=type_check))
    L.check(_c().hfp4_sf_check_layout(byref(t), int(mn), int(k), int(gran_mn), int(gran_k),
                                      0 if num_groups is None else int(num_groups), checks, tc))
    return sf


def get_mn_major_tma_aligned_tensor(sf, *, num_threads: int = 0):
    """DeepGEMM's get_mn_major_tma_aligned_tensor: float32 (or int32) [(G,) mn, sf_k] -> the same
    values with strides (T*sf_k, 1, T) in elements, T = align(mn, 4); padding rows are zero.
    Returns sf itself when it already has that layout."""
    sf = np.asarray(sf)
    t = _sf_tensor("sf", sf)
    lib = _c()
    opts = _options(False, num_threads)
    return _produce(sf, lambda o, b: lib.hfp4_sf_get_mn_major_tma_aligned_tensor_query(byref(t), o, b),
                    lambda d, n, o: lib.hfp4_sf_get_mn_major_tma_aligned_tensor(byref(t), byref(opts), d, n, o))


def get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout=None, *, mn=None, gran_mn: int = 1,
                                                 alignment: int = 0, round_up: bool = False, num_threads: int = 0):
    """DeepGEMM's get_mn_major_tma_aligned_packed_ue8m0_tensor: float32 power-of-two scales
    [(G,) ceil(mn/gran_mn), sf_k] -> int32 [(G,) mn, ceil(sf_k/4)] MN-major TMA-aligned, rows
    broadcast by gran_mn; psum_layout (int32 [G] cumulative ends, groups aligned to `alignment`,
    0 = 128) zeroes rows outside every group. A scale that is not a power of two raises
    InvalidArgument unless round_up (DeepGEMM's ceil_to_ue8m0)."""
    sf = np.asarray(sf)
    t = _sf_tensor("sf", sf)
    if mn is None:
        if gran_mn != 1:
            raise L.invalid_argument("get_mn_major_tma_aligned_packed_ue8m0_tensor: pass mn with gran_mn = %d"
                                     % gran_mn)
        mn = sf.shape[-2]
    ps, keep = _psum(psum_layout, alignment)
    pp = byref(ps) if ps is not None else None
    lib = _c()
    opts = _options(round_up, num_threads)
    return _produce(None,
                    lambda o, b: lib.hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(
                        byref(t), int(mn), int(gran_mn), pp, o, b),
                    lambda d, n, o: lib.hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(
                        byref(t), int(mn), int(gran_mn), pp, byref(opts), d, n, o))


def get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, grouped_layout, ks_cpu, gran_k: int,
                                                           k_alignment: int, use_psum_layout: bool = False, *,
                                                           round_up: bool = False, num_threads: int = 0):
    """DeepGEMM's function of that name: sf float32 [sf_k, mn] (K-groups of all groups stacked) ->
    int32 [packed, mn], each group packed on its own. ks_cpu: list of group K sizes, or None/[]
    with use_psum_layout."""
    sf = np.asarray(sf)
    if sf.ndim != 2:
        raise L.invalid_argument("sf must be 2D [sf_k, mn], got shape %s" % (sf.shape,))
    t = _sf_tensor("sf", sf.T)  # axes named: mn = columns, sf_k = rows
    lay = np.ascontiguousarray(np.asarray(grouped_layout), dtype=np.int32).reshape(-1)
    ks = None if ks_cpu is None or len(ks_cpu) == 0 else np.ascontiguousarray(np.asarray(ks_cpu, dtype=np.int32))
    g = L.hfp4_sf_k_groups(_ptr(lay) if lay.size else None, lay.size, None if ks is None else _ptr(ks),
                           int(gran_k), int(k_alignment), int(bool(use_psum_layout)))
    lib = _c()
    opts = _options(round_up, num_threads)
    res = _produce(None,
                   lambda o, b: lib.hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(
                       byref(t), byref(g), o, b),
                   lambda d, n, o: lib.hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
                       byref(t), byref(g), byref(opts), d, n, o))
    return res.T  # [packed, mn], contiguous


def transpose_sf_for_utccp(sf, *, num_threads: int = 0):
    """The SM100 UTCCP row permutation (deep_gemm.mega's _transpose_sf_for_utccp) of int32
    [(G,) mn, P] scales, mn % 128 == 0."""
    sf = np.asarray(sf)
    t = _sf_tensor("sf", sf)
    lib = _c()
    opts = _options(False, num_threads)
    return _produce(None, lambda o, b: lib.hfp4_sf_transpose_for_utccp_query(byref(t), o, b),
                    lambda d, n, o: lib.hfp4_sf_transpose_for_utccp(byref(t), byref(opts), d, n, o))


def transform_sf_into_required_layout(sf, mn: int, k: int, recipe=None, num_groups=None, is_sfa=None,
                                      disable_ue8m0_cast: bool = False, psum_layout=None, *, arch: int = 90,
                                      alignment: int = 0, round_up: bool = False, num_threads: int = 0):
    """DeepGEMM's transform_sf_into_required_layout for an explicit target `arch` (90, 100, 120...;
    default 90, hfp4's). recipe: a 3-tuple with is_sfa True/False, or a 2-tuple with is_sfa None.
    Returns the scales in the layout a GEMM on `arch` consumes (sf itself when it already has it);
    see docs/SF_LAYOUT.md for the branches. Unsupported (NotImplementedError) when no layout exists."""
    sf = np.asarray(sf)
    t = _sf_tensor("sf", sf)
    ps, keep = _psum(psum_layout, alignment)
    req = L.sf_transform_request(t, mn, k, recipe, num_groups, is_sfa, disable_ue8m0_cast, ps, arch)
    lib = _c()
    opts = _options(round_up, num_threads)
    return _produce(sf, lambda o, b: lib.hfp4_sf_transform_into_required_layout_query(byref(req), o, b),
                    lambda d, n, o: lib.hfp4_sf_transform_into_required_layout(byref(req), byref(opts), d, n, o))
