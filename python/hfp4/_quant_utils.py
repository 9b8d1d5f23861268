"""DeepGEMM's deep_gemm/utils/math.py in torch (hfp4.deep_gemm.utils): the casts to FP8 and FP4 with
their scaling factors, UE8M0 rounding and packing, and the packed-FP4 transpose. They run on any
device and do the same math as the library's C quantizers (src/quant/quantize.c), which the tests
compare them with."""
from __future__ import annotations

from . import _lib as L
from ._common import align, torch_module as _t


def ceil_to_ue8m0(x):
    """DeepGEMM's ceil_to_ue8m0: |x| rounded up to a power of two (as float32), clamped to [2^-126,
    2^127]; Inf and NaN stay Inf and NaN (UE8M0 byte 255, as DeepGEMM's and the C quantizers'), so a
    non-finite amax never becomes a finite scale that zeroes its group."""
    torch = _t()
    mag = x.abs().float()
    bits = mag.view(torch.int)
    field = (bits >> 23) & 0xFF
    exp = field + (bits & 0x7FFFFF).bool().int()
    return torch.where(field == 0xFF, mag, (exp.clamp(1, 254) << 23).view(torch.float))


def pack_ue8m0_to_int(x):
    """FP32 powers of two [..., n] -> int32 [..., ceil(n/4)], byte j of word p the exponent of
    element 4p+j; missing elements pad with 1.0 (byte 127) like DeepGEMM's Python helper."""
    torch = _t()
    assert x.dtype == torch.float
    pad = (-x.size(-1)) % 4
    if pad:
        x = torch.nn.functional.pad(x, (0, pad), value=1.0)
    x = x.contiguous()
    bits = x.view(torch.int)
    if not bool((((bits & ((1 << 23) - 1)) == 0) | (((bits >> 23) & 0xFF) == 0xFF)).all()):  # (NaN: byte 255)
        raise L.invalid_argument("pack_ue8m0_to_int: scales must be powers of two (use_ue8m0 = True)")
    return (bits >> 23).to(torch.uint8).view(torch.int)


def per_token_cast_to_fp8(x, use_ue8m0, gran_k=128, use_packed_ue8m0=False):
    """x [m, n] -> (float8_e4m3fn [m, n], sf float32 [m, ceil(n/gran_k)] or packed int32)."""
    torch = _t()
    if x.dim() != 2:
        raise L.invalid_argument("per_token_cast_to_fp8: x must be 2D, got shape %s" % (tuple(x.shape),))
    if use_packed_ue8m0 and not use_ue8m0:
        raise L.invalid_argument("per_token_cast_to_fp8: use_packed_ue8m0 needs use_ue8m0")
    m, n = x.shape
    padded_n = align(n, gran_k)
    if padded_n == n:  # (no zero padding to add: two kernels fewer, the same values)
        x_view = x.reshape(m, n // gran_k, gran_k)
    else:
        x_padded = torch.zeros((m, padded_n), dtype=x.dtype, device=x.device)
        x_padded[:, :n] = x
        x_view = x_padded.view(m, padded_n // gran_k, gran_k)
    x_amax = x_view.abs().float().amax(dim=2).view(m, padded_n // gran_k).clamp(1e-4)
    sf = x_amax / 448.0
    sf = ceil_to_ue8m0(sf) if use_ue8m0 else sf
    x_fp8 = (x_view * (1.0 / sf.unsqueeze(2))).to(torch.float8_e4m3fn).view(m, padded_n)[:, :n].contiguous()
    return x_fp8, (pack_ue8m0_to_int(sf) if use_packed_ue8m0 else sf)


def per_channel_cast_to_fp8(x, use_ue8m0, gran_k=128):
    """x [m, n] (m % gran_k == 0) -> (float8_e4m3fn [m, n], sf float32 [m/gran_k, n])."""
    torch = _t()
    if x.dim() != 2 or x.size(0) % gran_k:
        raise L.invalid_argument("per_channel_cast_to_fp8: x must be 2D with rows a multiple of %d" % gran_k)
    m, n = x.shape
    x_view = x.view(-1, gran_k, n)
    x_amax = x_view.abs().float().amax(dim=1).view(-1, n).clamp(1e-4)
    sf = x_amax / 448.0
    sf = ceil_to_ue8m0(sf) if use_ue8m0 else sf
    return (x_view * (1.0 / sf.unsqueeze(1))).to(torch.float8_e4m3fn).view(m, n), sf


def per_block_cast_to_fp8(x, use_ue8m0, gran_k=128):
    """x [m, n] -> (float8_e4m3fn [m, n], sf float32 [ceil(m/gran_k), ceil(n/gran_k)])."""
    torch = _t()
    if x.dim() != 2:
        raise L.invalid_argument("per_block_cast_to_fp8: x must be 2D, got shape %s" % (tuple(x.shape),))
    m, n = x.shape
    x_padded = torch.zeros((align(m, gran_k), align(n, gran_k)), dtype=x.dtype, device=x.device)
    x_padded[:m, :n] = x
    x_view = x_padded.view(-1, gran_k, x_padded.size(1) // gran_k, gran_k)
    x_amax = x_view.abs().float().amax(dim=(1, 3), keepdim=True).clamp(1e-4)
    sf = x_amax / 448.0
    sf = ceil_to_ue8m0(sf) if use_ue8m0 else sf
    x_scaled = (x_view * (1.0 / sf)).to(torch.float8_e4m3fn)
    return x_scaled.view_as(x_padded)[:m, :n].contiguous(), sf.view(x_view.size(0), x_view.size(2))


def _quantize_to_fp4_e2m1(x):
    torch = _t()
    ax = x.abs().clamp_max(6.0)
    boundaries = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], device=x.device, dtype=ax.dtype)
    idx = torch.bucketize(ax, boundaries)
    idx = torch.where(torch.isnan(x), torch.zeros_like(idx), idx)  # NaN -> 0, as hfp4_fp4_encode
    code = idx.to(torch.uint8)
    sign = (x < 0) & (idx != 0)
    return (code | (sign.to(torch.uint8) << 3)).view(torch.int8)


def per_token_cast_to_fp4(x, use_ue8m0, gran_k=128, use_packed_ue8m0=False):
    """x [m, n] (n even) -> (packed int8 [m, n/2], even column in the low nibble, sf float32
    [m, ceil(n/gran_k)] or packed int32). hfp4's GEMMs take gran_k = 32 weights."""
    torch = _t()
    if x.dim() != 2 or x.size(1) % 2:
        raise L.invalid_argument("per_token_cast_to_fp4: x must be 2D with an even number of columns, got %s"
                                 % (tuple(x.shape),))
    if use_packed_ue8m0 and not use_ue8m0:
        raise L.invalid_argument("per_token_cast_to_fp4: use_packed_ue8m0 needs use_ue8m0")
    m, n = x.shape
    padded_n = align(n, gran_k)
    x_padded = torch.zeros((m, padded_n), dtype=x.dtype, device=x.device)
    x_padded[:, :n] = x
    x_view = x_padded.view(m, -1, gran_k)
    x_amax = x_view.abs().float().amax(dim=2).clamp_min(1e-4)
    sf = x_amax / 6.0
    sf = ceil_to_ue8m0(sf) if use_ue8m0 else sf
    x_scaled = x_view * (1.0 / sf.unsqueeze(2))
    codes = _quantize_to_fp4_e2m1(x_scaled).view(m, padded_n)
    codes2 = codes.view(m, padded_n // 2, 2)
    packed = (codes2[:, :, 0] & 0x0F) | ((codes2[:, :, 1] & 0x0F) << 4)
    return packed[:, :n // 2].contiguous(), (pack_ue8m0_to_int(sf) if use_packed_ue8m0 else sf)


def transpose_packed_fp4(a):
    """int8 [m, n/2] packed FP4 -> int8 [n, m/2] (the transpose, re-packed along m)."""
    torch = _t()
    if a.dtype != torch.int8 or a.dim() != 2 or a.size(0) % 2:
        raise L.invalid_argument("transpose_packed_fp4: a must be int8 [m, n/2] with m even")
    m, n2 = a.shape
    n = n2 * 2
    codes = torch.empty((m, n), device=a.device, dtype=torch.int8)
    codes[:, 0::2], codes[:, 1::2] = a & 0x0F, (a >> 4) & 0x0F
    codes2 = codes.transpose(0, 1).contiguous().view(n, m // 2, 2)
    return ((codes2[:, :, 0] & 0x0F) | ((codes2[:, :, 1] & 0x0F) << 4)).contiguous()
