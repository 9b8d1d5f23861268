"""An independent numpy re-implementation of DeepGEMM's deep_gemm/utils/math.py (and of the formats
by their hand formulas), the yardstick of the quantizer and GEMM tests. It never calls hfp4."""
import numpy as np


def ceil_div(a, b):
    return (a + b - 1) // b


def align(a, b):
    return ceil_div(a, b) * b


# --- formats by hand formulas -----------------------------------------------------------------

def fp4_value(code):
    """e2m1 code (0..15) -> float: bit 3 sign, bits 2..1 exponent (bias 1), bit 0 mantissa; -0 -> +0."""
    code = int(code) & 0xF
    s, e, m = code >> 3, (code >> 1) & 3, code & 1
    mag = m * 0.5 if e == 0 else (1 + m / 2) * 2.0 ** (e - 1)
    return -mag if (s and mag != 0) else mag


def fp8_value(byte):
    """e4m3fn byte -> float (NaN for 0x7F/0xFF; -0 for 0x80)."""
    byte = int(byte) & 0xFF
    s, e, m = byte >> 7, (byte >> 3) & 0xF, byte & 7
    if e == 15 and m == 7:
        return float("nan")
    mag = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -mag if s else mag


FP4_TABLE = np.array([fp4_value(c) for c in range(16)], dtype=np.float64)
FP8_TABLE = np.array([fp8_value(b) for b in range(256)], dtype=np.float64)
_FP8_POS = FP8_TABLE[:127]  # codes 0..126, strictly increasing


def fp8_encode(y):
    """float32 array -> e4m3fn bytes: nearest, ties to even, saturating at 448, NaN -> 0x7F."""
    y = np.asarray(y, dtype=np.float32)
    a = np.abs(y.astype(np.float64))
    hi = np.clip(np.searchsorted(_FP8_POS, a, side="left"), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    dlo, dhi = a - _FP8_POS[lo], _FP8_POS[hi] - a
    code = np.where(dhi < dlo, hi, np.where(dlo < dhi, lo, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(_FP8_POS[hi] == a, hi, code)
    code = np.where(a >= 448.0, 126, code)
    code = code.astype(np.uint8) | np.where(np.signbit(y), 0x80, 0).astype(np.uint8)
    return np.where(np.isnan(y), np.uint8(0x7F), code).astype(np.uint8)


def fp4_encode(y):
    """DeepGEMM's _quantize_to_fp4_e2m1: count of thresholds strictly below |y| (clamped to 6),
    sign only on nonzero codes; NaN -> 0 (hfp4's documented choice)."""
    y = np.asarray(y, dtype=np.float32)
    ax = np.minimum(np.abs(y), np.float32(6.0))
    bounds = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=np.float32)
    idx = np.searchsorted(bounds, ax, side="left").astype(np.uint8)
    idx = np.where(np.isnan(y), 0, idx).astype(np.uint8)
    sign = (y < 0) & (idx != 0)
    return (idx | (sign.astype(np.uint8) << 3)).astype(np.uint8)


def ceil_to_ue8m0(x):
    bits = np.abs(np.asarray(x, dtype=np.float32)).view(np.int32)
    e = ((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0)
    out = np.clip(e, 1, 254).astype(np.int32) << 23
    # NaN and Inf: the UE8M0 NaN (hfp4_ceil_to_ue8m0; byte 255)
    return np.where(((bits >> 23) & 0xFF) == 255, np.int32(0x7FC00000), out).astype(np.int32).view(np.float32)


def pack_ue8m0_to_int(sf):
    """float32 powers of two [m, n] -> int32 [m, ceil(n/4)]; missing groups padded with 1.0."""
    sf = np.asarray(sf, dtype=np.float32)
    pad = (-sf.shape[-1]) % 4
    if pad:
        sf = np.concatenate([sf, np.ones(sf.shape[:-1] + (pad,), np.float32)], axis=-1)
    assert ((sf.view(np.int32) & 0x7FFFFF) == 0).all()
    return np.ascontiguousarray((sf.view(np.int32) >> 23).astype(np.uint8)).view("<i4")


def ue8m0_bytes(sf):
    return (np.asarray(sf, dtype=np.float32).view(np.int32) >> 23).astype(np.uint8)


# --- math.py ---------------------------------------------------------------------------------

def _scale(amax, div, use_ue8m0):
    amax = np.maximum(amax, np.float32(1e-4))  # torch clamp(1e-4): NaN propagates
    sf = (amax / np.float32(div)).astype(np.float32)
    return ceil_to_ue8m0(sf) if use_ue8m0 else sf


def per_token_cast_to_fp8(x, use_ue8m0, gran_k=128, use_packed_ue8m0=False):
    x = np.asarray(x, dtype=np.float32)
    m, n = x.shape
    pn = align(n, gran_k)
    xp = np.zeros((m, pn), np.float32)
    xp[:, :n] = x
    xv = xp.reshape(m, pn // gran_k, gran_k)
    sf = _scale(np.abs(xv).max(axis=2), 448.0, use_ue8m0)
    inv = (np.float32(1.0) / sf).astype(np.float32)
    q = fp8_encode(xv * inv[:, :, None]).reshape(m, pn)[:, :n]
    return np.ascontiguousarray(q), (pack_ue8m0_to_int(sf) if use_packed_ue8m0 else sf)


def per_block_cast_to_fp8(x, use_ue8m0, gran_k=128):
    x = np.asarray(x, dtype=np.float32)
    m, n = x.shape
    xp = np.zeros((align(m, gran_k), align(n, gran_k)), np.float32)
    xp[:m, :n] = x
    xv = xp.reshape(-1, gran_k, xp.shape[1] // gran_k, gran_k)
    sf = _scale(np.abs(xv).max(axis=(1, 3), keepdims=True), 448.0, use_ue8m0)
    inv = (np.float32(1.0) / sf).astype(np.float32)
    q = fp8_encode(xv * inv).reshape(xp.shape)[:m, :n]
    return np.ascontiguousarray(q), sf.reshape(xv.shape[0], xv.shape[2])


def per_token_cast_to_fp4(x, use_ue8m0, gran_k=32, use_packed_ue8m0=False):
    x = np.asarray(x, dtype=np.float32)
    m, n = x.shape
    pn = align(n, gran_k)
    xp = np.zeros((m, pn), np.float32)
    xp[:, :n] = x
    xv = xp.reshape(m, -1, gran_k)
    sf = _scale(np.abs(xv).max(axis=2), 6.0, use_ue8m0)
    inv = (np.float32(1.0) / sf).astype(np.float32)
    codes = fp4_encode(xv * inv[:, :, None]).reshape(m, pn)
    packed = (codes[:, 0::2] & 0xF) | ((codes[:, 1::2] & 0xF) << 4)
    return np.ascontiguousarray(packed[:, :n // 2]).astype(np.uint8), \
        (pack_ue8m0_to_int(sf) if use_packed_ue8m0 else sf)


# --- dequantization (for the GEMM references) ------------------------------------------------

def scales_to_float(sf, cols):
    """Scales as float64 [..., cols] from float32, UE8M0 bytes or packed int32."""
    sf = np.asarray(sf)
    if sf.dtype == np.float32:
        out = sf.astype(np.float64)
    elif sf.dtype.itemsize == 1:
        out = np.ldexp(1.0, sf.astype(np.int64) - 127)
    else:
        b = np.ascontiguousarray(sf.astype("<i4")).view(np.uint8).reshape(sf.shape[:-1] + (sf.shape[-1] * 4,))
        out = np.ldexp(1.0, b.astype(np.int64) - 127)
    return out[..., :cols]


def dequant_fp8(q, sf, gran_k):
    q = np.asarray(q).view(np.uint8)
    k = q.shape[-1]
    s = scales_to_float(sf, ceil_div(k, gran_k))
    return FP8_TABLE[q] * np.repeat(s, gran_k, axis=-1)[..., :k]


def dequant_fp4(packed, sf, gran_k=32):
    p = np.asarray(packed).view(np.uint8)
    codes = np.empty(p.shape[:-1] + (2 * p.shape[-1],), np.uint8)
    codes[..., 0::2], codes[..., 1::2] = p & 0xF, p >> 4
    k = codes.shape[-1]
    s = scales_to_float(sf, ceil_div(k, gran_k))
    return FP4_TABLE[codes] * np.repeat(s, gran_k, axis=-1)[..., :k]


def round_significand(x, bits):
    """Round float64 to `bits` significant bits, nearest-even (normal range)."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))
    return np.ldexp(np.round(m * 2.0 ** bits), e - bits)


def bf16_bits_to_float(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
