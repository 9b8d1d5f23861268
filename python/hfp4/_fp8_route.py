"""fp8_fp4_gemm_nt's route for large M (docs/FP8_ROUTE.md): the FP4 weights converted into a
transient FP8 copy under 128 x 128 block scales (hfp4_fp4_weights_to_fp8_gpu, into torch's caching
allocator on the current stream, freed when the call returns), then the FP8 x FP8 GEMM, which at
large M is faster than the FP4 kernel (H200 8192^3: 0.98x cuBLASLt FP8 timed with the conversion,
against 0.71x; bench/RESULTS.md v41-v42).

Exact or not taken: weights whose scales leave a 128 x 128 block without an exact FP8 form keep
the FP4 kernel. Whether weights have one is learnt at their first call that meets the threshold
(one wait for the device, then never again) and kept with the liveness and version rules of the
repacked-weight cache (deep_gemm._cached_weights; HFP4_WEIGHT_CACHE=0: at every call); a CUDA-graph capture with weights not yet
learnt keeps the FP4 kernel, as does any call hfp4_gemm would refuse in FP8 (1x32 activation
scales, the FP8-weight path switched off: HFP4_SM90_FP8_WEIGHTS=0). A captured call converts the
caller's B and SFB at every replay (so they must stay alive, as any captured operand) without
reading the count again: weights rewritten in place with scales that have no exact FP8 form give NaN
in such replays (clear_weight_cache and recapture).

Where it pays: M >= 1024 and 2 M N K >= 10^11 FLOPs (applies()). Environment (read at every call):
HFP4_FP8_ROUTE=0 turns the route off; HFP4_FP8_ROUTE_MIN_M=m replaces the rule by M >= m."""
from __future__ import annotations

import os
import threading
from ctypes import byref

from . import _lib as L

# where the route pays (bench/python_fp8_route.py, H200, eager back-to-back calls; bench/RESULTS.md
# v42): M >= 1024 (the conversion amortized) and 2 M N K >= 10^11 FLOPs (below it the FP4 kernel's
# GPU time is shorter than the route's extra time: the conversion's launch and pass, 15-25 us at
# these shapes, and host time). Crossovers in three device calls: 8192 x 8192 at M ~ 700-950,
# 7168 x 2048 ~ 1300-3900, 4096 x 7168 ~ 1300-2048, 2048 x 4096 ~ 4000-6500 (2 M N K = 0.4-1.3 x
# 10^11, the spread the hosts' speed); at M = 8192-16384 the route is 1.5-1.7x the FP4 kernel. A rule
# in M alone (N K's conversion against M N K's saving) fitted no better than this one.
DEFAULT_MIN_M = 1024
DEFAULT_MIN_FLOP = 100e9

_lock = threading.Lock()
_known = {}  # deep_gemm._cache_key(B) -> (_weights_state(B, SFB), liveness tokens, exact, conversion's hfp4_matrix)
_dead = []  # (key, ref) of weights freed since: appended by weakref callbacks, purged under the lock
_learnt = {}  # key -> how often weights at key were learnt (each a wait for the GPU: the fourth warns once)


def applies(m, n, k) -> bool:
    """Whether an m x n x k call takes the route: never with HFP4_FP8_ROUTE=0; m >= HFP4_FP8_ROUTE_MIN_M
    where that is set; else m >= DEFAULT_MIN_M and 2 m n k >= DEFAULT_MIN_FLOP"""
    if os.environ.get("HFP4_FP8_ROUTE", "1").strip() == "0":
        return False
    env = os.environ.get("HFP4_FP8_ROUTE_MIN_M", "").strip()
    if not env:
        return m >= DEFAULT_MIN_M and 2 * m * n * k >= DEFAULT_MIN_FLOP
    try:
        return m >= max(int(env), 1)
    except ValueError:
        raise L.invalid_argument("HFP4_FP8_ROUTE_MIN_M = %r must be an integer" % env) from None


def clear():
    """Forget which weights have an exact FP8 form (deep_gemm.clear_weight_cache calls it)"""
    with _lock:
        _known.clear()
        _learnt.clear()
        del _dead[:]


def _purge_locked():
    while _dead:
        key, ref = _dead.pop()
        e = _known.get(key)
        if e is not None and any(tok is ref for tok in e[1]):
            del _known[key]


def _lookup(dg, B, SFB):
    """(exact, the conversion's hfp4_matrix of the weights) where weights (B, SFB) were learnt, else
    None (always with HFP4_WEIGHT_CACHE=0)"""
    if not dg.weight_cache_enabled():
        return None
    key, state = dg._cache_key(B), dg._weights_state(B, SFB)
    with _lock:
        _purge_locked()
        e = _known.get(key)
        if e is not None and e[0] == state and all(tok() is not None for tok in e[1]):
            return e[2], e[3]
    return None


def _learn(dg, B, SFB, exact, w, generation):
    """Keeps what was learnt of weights (B, SFB), unless clear_weight_cache() ran since `generation`
    (deep_gemm._cache_generation read before the weights were looked up): a clear on another thread
    during the learning may be meant for exactly these weights, so what was learnt serves this call
    only. (clear_weight_cache bumps the generation before it clears what was learnt, and this test
    and the insertion hold the same lock as that clearing.)"""
    if not dg.weight_cache_enabled():
        return  # (HFP4_WEIGHT_CACHE=0: learnt anew at every call)
    key = dg._cache_key(B)
    tokens = (dg._liveness_token(B, key, _dead), dg._liveness_token(SFB, key, _dead))
    with _lock:
        if dg._cache_generation != generation:
            return
        _known[key] = (dg._weights_state(B, SFB), tokens, exact, w)
        dg._note_repeat(_learnt, key, "checked for an exact FP8 form (a wait for the GPU each)", 4)


def try_gemm(dg, a, b, m, n, k, out, d, copy_c, device) -> bool:
    """D = A B^T through the FP8 route where it applies (returns True), else nothing done (False).
    dg: hfp4.deep_gemm; a: the activations' hfp4_matrix; b: fp8_fp4_gemm_nt's b; out, d, copy_c:
    as fp8_fp4_gemm_nt's launch takes them.
    NOTE: why one allocation and the descriptors kept: below ~100 us a call is host-bound, and the
    first form (three tensors, the weights' checks and hfp4_gemm_supported at every call) took
    45-70 us more host time a call than the FP4 kernel's path (bench/RESULTS.md v42)"""
    if k % 128 or isinstance(b, dg.SM90Weights) or not applies(m, n, k):
        return False
    if a.scales.gran_k != 128 or os.environ.get("HFP4_SM90_FP8_WEIGHTS", "1").strip() == "0":
        return False  # (no FP8 x FP8 kernel for these: not worth a conversion)
    B, SFB = dg._pair("b", b)
    torch = dg._t()
    if (not isinstance(B, torch.Tensor) or not isinstance(SFB, torch.Tensor) or B.dim() != 2 or
            2 * B.size(-1) != k or B.device != device or SFB.device != device):
        return False  # (the FP4 path names what is wrong: another K, another device, ...)
    if B.stride(-1) != 1 or (n > 1 and B.stride(0) % 16) or B.data_ptr() % 16:
        return False  # (the GPU conversion's alignment)
    generation = dg._cache_generation  # (before the lookup: _learn keeps nothing across a clear)
    known = _lookup(dg, B, SFB)
    if known is not None and not known[0]:
        return False
    if known is None and dg._capturing(device):
        return False
    w = known[1] if known is not None else dg._fp4_to_fp8_matrix(B, SFB)
    # one transient buffer: the FP8 weights [n, k], their FP32 block scales, the refused blocks' count
    sf_cols = k // 128
    sf_at = n * k  # (k % 128 == 0: 16-byte aligned)
    count_at = sf_at + (n + 127) // 128 * sf_cols * 4
    try:
        buf = torch.empty(count_at + 4, dtype=torch.uint8, device=device)
    except torch.cuda.OutOfMemoryError:
        return False  # (no room for the transient copy: the FP4 kernel needs none)
    base = buf.data_ptr()
    s = L.hfp4_scales(base + sf_at, L.DTYPE_FP32, 128, 128, sf_cols, 1, 0)
    p = L.hfp4_gemm_problem()
    p.a = a
    p.b = L.hfp4_matrix(base, L.DTYPE_FP8_E4M3, n, k, k, 0, s)
    p.grouping = L.GROUPING_NONE
    p.m, p.n, p.k, p.num_groups = m, n, k, 1
    p.d = out
    lib = L.lib()
    with torch.cuda.device(device):
        stream = dg._stream(device)
        if known is None and lib.hfp4_gemm_supported(byref(p)) != L.OK:
            return False  # (learnt with the first call: no conversion spent on a problem hfp4_gemm refuses)
        status = lib.hfp4_fp4_weights_to_fp8_gpu(byref(w), base, k, byref(s), base + count_at, stream)
        if status == L.ERR_UNSUPPORTED:
            return False  # (weights the GPU conversion does not take, e.g. beyond its grid: nothing written)
        L.check(status)
        if known is None:
            exact = int(buf[count_at:].view(torch.int32).item()) == 0  # (the one wait: the weights' first call)
            _learn(dg, B, SFB, exact, w, generation)
            if not exact:
                return False
        if copy_c is not None:
            d.copy_(copy_c)
        status = lib.hfp4_gemm(byref(p), stream)
    if status == L.ERR_UNSUPPORTED:
        return False  # (a problem hfp4_gemm refuses after all, e.g. A's rows misaligned: the FP4 kernel's)
    L.check(status)
    return True
