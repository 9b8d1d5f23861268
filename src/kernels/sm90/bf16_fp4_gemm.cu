/*
 * bf16_fp4_gemm.cu - the BF16 path of hfp4_gemm at prefill (128-token tiles) for FP8 activations with
 * 1x32 UE8M0 scales (what transformers passes): opt-in, HFP4_SM90_BF16=1.
 *
 * Why: with 1x32 activation scales the FP8 kernels promote after every k32 step (4 x 64 FFMA per
 * 128 K and thread at 128 tokens, on top of the conversion) and reach ~365 TFLOP/s where 1x128
 * scales reach ~665. A UE8M0-scaled FP8 activation is exact in BF16, and so is an FP4 weight times
 * its UE8M0 scale, so BF16 wgmmas (half the FP8 tensor rate) need no promotion and no FP32 running
 * sum: the accumulator runs over all of K (bench/micro/bf16_ceiling: 941 of 965 TFLOP/s with the
 * conversion under the wgmmas; bench/RESULTS.md v15).
 *
 * How: (1) a pass writes A' = a x scale as BF16 [groups][m][K_pad] into a stream-ordered temporary
 * (cudaMallocAsync), each 32-group's K permuted as the weight fragments need (fp4_to_bf16.cuh:
 * bf16_act_perm), zeros past K; (2) a persistent kernel, one CTA per SM: a producer warp walks the
 * 128 x 128 items as the FP8 kernels do (work_items.cuh) and loads per 128-K chunk the A' tile
 * (two 64-K TMA boxes, 128-byte swizzle) and both warpgroups' repacked weights and scale words;
 * two consumer warpgroups convert each chunk's FP4 words to BF16 fragments with every 32-group's
 * scale folded (the next chunk's under the current chunk's wgmmas) and issue 8 m64n128k16 wgmmas;
 * a full tile's D goes out by the FP8 kernels' TMA store (tma_store.cuh), staged in its last chunk's
 * activation tile, other tiles from registers.
 * Where it stands (H200, bench/RESULTS.md v15): 1x32 UE8M0 scales, dense 8192^3 419 -> 487-534 TFLOP/s,
 * V4-Flash w13 T = 16384 370 -> 411-420, w2 377 -> 394. Under ncu the tensor pipe is ~60 % busy;
 * not L2 (loading half the activation tile changed nothing), and neither a second wgmma group in
 * flight nor a third consumer warpgroup helped. Opt-in because the temporary holds all of A as BF16
 * (M x K x 2 bytes: 0.8 GB for V4-Flash w13 at T = 16384); past HFP4_SM90_BF16_MAX_TEMP, when it
 * cannot be allocated, or under stream capture, the FP8 path runs (bf16_fp4_gemm.h).
 * Exactness: a weight scale byte outside [2, 252] with non-zero codes (scales below 2^-125 or above
 * 2^125), or a scaled activation outside FP32's normal range, would not convert exactly: those
 * outputs are NaN (never silently wrong). The FP32 accumulation is the tensor cores' over all of K,
 * as in any BF16 GEMM.
 */
#include "../../runtime/cuda_runtime.h"
#include "../../plan/sm90_plan.h"
#include "bf16_fp4_gemm.h"
#include "epilogue.cuh"
#include "fp4_to_bf16.cuh"
#include "scales.cuh"
#include "stage_copies.cuh"
#include "wgmma_bf16_rs.cuh"

#include <cuda_fp8.h>
#include <stdlib.h>
#include <string.h>

/* ---- the activations' pass: FP8 x UE8M0 -> BF16, K permuted inside each 32-group ---- */

/* One thread per (group, row, 32-group of K): 32 FP8 bytes in, 64 BF16 bytes out. */
__global__ void __launch_bounds__(256) hfp4_sm90_bf16_act_kernel(const uint8_t *a, int64_t lda, int64_t a_stride_group,
                                                                 __nv_bfloat16 *out, int64_t k_pad, int64_t rows_total,
                                                                 const hfp4_sm90_gemm_params p) {
    const int64_t kgroups = k_pad / 32;
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows_total * kgroups) return;
    const int64_t rg = idx / kgroups, kg = idx % kgroups;
    const int64_t g = rg / p.m, row = rg % p.m;
    /* (masked: rows past masked_m feed only token columns that are never stored) */
    if (p.grouping == HFP4_K_MASKED && row >= min((int64_t)p.layout[g], p.m)) return;
    const uint8_t *src = a + g * a_stride_group + row * lda + kg * 32;
    uint8_t v[32];
    const int64_t k0 = kg * 32;
    if (k0 + 32 <= p.k && ((uintptr_t)src & 15) == 0) {
        const uint4 lo = *(const uint4 *)src, hi = *(const uint4 *)(src + 16);
        memcpy(v, &lo, 16);
        memcpy(v + 16, &hi, 16);
    } else {
        for (int i = 0; i < 32; i++) v[i] = k0 + i < p.k ? src[i] : 0;
    }
    const float s = kg < p.a_k_groups ? load_a_scale(p, g, row, kg) : 0.0f;
    uint32_t w[16];
#pragma unroll
    for (int q = 0; q < 16; q++) {
        __nv_bfloat16 b2[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            __nv_fp8_e4m3 f;
            f.__x = v[bf16_act_perm(2 * q + e)];
            /* exact (4 significant bits times a power of two) unless the product leaves FP32's normal
             * range: then NaN, which reaches every sum of this token, never a silently wrong one */
            const float x = (float)f, v = x * s;
            const bool lost = x != 0.0f && (fabsf(v) < 0x1p-126f || fabsf(v) > 0x1p127f);
            b2[e] = __float2bfloat16_rn(lost ? __uint_as_float(0x7FC00000u) : v);
        }
        memcpy(&w[q], b2, 4);
    }
    uint4 *dst = (uint4 *)(out + rg * k_pad + k0);
#pragma unroll
    for (int q = 0; q < 4; q++) dst[q] = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
}

/* ---- the GEMM ---- */

namespace bf16cfg {
constexpr int BT = 128;
constexpr int A_ATOM_BYTES = BT * 128;              /* 128 tokens x 64 BF16: one TMA box */
constexpr int A_STAGE_BYTES = 2 * A_ATOM_BYTES;     /* 128 K */
constexpr int W_WG_BYTES = 2 * HFP4_SM90_PAIR_BYTES; /* 64 rows x 128 K of FP4 */
constexpr int W_STAGE_BYTES = 2 * W_WG_BYTES;
constexpr int WS_WG_BYTES = 64 * 4;
constexpr int WS_STAGE_BYTES = 2 * WS_WG_BYTES;
constexpr int STAGE_BYTES = A_STAGE_BYTES + W_STAGE_BYTES + WS_STAGE_BYTES;
/* NOTE: no transpose buffer: a full tile's TMA store stages in its last chunk's activation tile (a
 * warpgroup's 64 x 128 BF16 box is one 16 KB atom), released after the store has read it; other
 * tiles store from registers. With the FP8 kernels' transpose buffers (68 KB) 3 stages fit, and the
 * consumers waited for data (H200, dense 8192^3: 544 TFLOP/s under ncu, tensor pipe 56 % busy). */
constexpr int STAGES = (232448 - 1024 - 16 * 8) / STAGE_BYTES < 8 ? (232448 - 1024 - 16 * 8) / STAGE_BYTES : 8;
constexpr int A_OFF = 0, W_OFF = STAGES * A_STAGE_BYTES, WS_OFF = W_OFF + STAGES * W_STAGE_BYTES;
constexpr int BAR_OFF = WS_OFF + STAGES * WS_STAGE_BYTES;
constexpr int SMEM_BYTES = 1024 + BAR_OFF + 2 * STAGES * 8;
/* setmaxnreg: PRODUCER_REGS + 2 x CONSUMER_REGS <= 3 x 168, the registers a 384-thread CTA has */
constexpr int PRODUCER_REGS = 56, CONSUMER_REGS = 224;
static_assert(PRODUCER_REGS + 2 * CONSUMER_REGS <= 3 * 168, "setmaxnreg.inc would wait forever");
static_assert(STAGES >= 2 && SMEM_BYTES <= 232448, "the BF16 path's stages");
static_assert(BAR_OFF % 8 == 0 && A_ATOM_BYTES % 1024 == 0, "alignment");
} // namespace bf16cfg

/* Stage s's chunk of this thread (its weight words at w_base, its rows' scale words at ws_base, the
 * chunk's mode byte) as BF16 fragments; false where a scale would not convert exactly */
static __device__ __forceinline__ bool load_convert_bf16(uint32_t (&frags)[8][4], int s, uint32_t w_base,
                                                         uint32_t ws_base, uint32_t mode) {
    using namespace bf16cfg;
    const uint32_t w = w_base + s * W_STAGE_BYTES, ws = ws_base + s * WS_STAGE_BYTES;
    const uint4 q0 = *(const uint4 *)smem_ptr(w), q1 = *(const uint4 *)smem_ptr(w + HFP4_SM90_PAIR_BYTES);
    const uint32_t eg = *(const uint32_t *)smem_ptr(ws), er = *(const uint32_t *)smem_ptr(ws + 32);
    return convert_chunk_bf16(frags, q0, q1, eg, er, (mode & HFP4_SM90_MODE_PER32) != 0);
}

/* One chunk of a consumer warpgroup: the wgmmas of cur (already converted), the next chunk's
 * conversion into nxt under them when HAS_NEXT, then the wait and the stage's release. */
template <bool HAS_NEXT, bool RELEASE = true>
static __device__ __forceinline__ void bf16_step(float *acc, uint32_t (&cur)[8][4], uint32_t (&nxt)[8][4],
                                                 uint32_t desc_lo0, uint32_t w_base, uint32_t ws_base,
                                                 uint64_t *full, uint64_t *empty, int &s, uint32_t &phase,
                                                 bool first, uint32_t mode_next, bool &exact) {
    using namespace bf16cfg;
    sm90_desc desc;
    desc.lo = desc_lo0 + (uint32_t)s * (A_STAGE_BYTES >> 4);
    desc.hi = SM90_DESC_HI_K128_SWIZZLE128;
    wgmma_bf16_chunk(acc, cur, desc, A_ATOM_BYTES >> 4, !first);
    const int s1 = s + 1 == STAGES ? 0 : s + 1;
    const uint32_t phase1 = s1 == 0 ? phase ^ 1 : phase;
    if constexpr (HAS_NEXT) {
        mbar_wait(&full[s1], phase1);
        exact &= load_convert_bf16(nxt, s1, w_base, ws_base, mode_next);
    }
    wgmma_wait<0>();
#pragma unroll
    for (int k = 0; k < 8; k++)
#pragma unroll
        for (int r = 0; r < 4; r++) reg_fence(cur[k][r]);
    if constexpr (RELEASE) mbar_arrive(&empty[s]);
    s = s1;
    phase = phase1;
}

/* A tile's D from the thread's sums, element by element (tiles the TMA store does not take: partial
 * token tiles, FP32 D, C); real_mask: the tile's real token columns */
static __device__ __forceinline__ void store_tile_direct(const hfp4_sm90_gemm_params &p, const sm90_tile &tile,
                                                         int64_t wtile, int64_t dgroup, const sm90_fin<128> &fin,
                                                         const uint32_t (&real_mask)[4], int tid, int lane) {
    const int r0 = (tid / 32) * 16 + lane / 4, t4 = lane % 4;
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int c = 8 * j + 2 * t4 + (e & 1);
            const int64_t row = tile.m0 + c, n = wtile * 64 + r0 + 8 * (e >> 1);
            if (row >= tile.zero_end || n >= p.n) continue;
            store_d_value(p, dgroup * p.d_stride_group + row * p.ldd + n, fin.v[4 * j + e], column_is_real(real_mask, c));
        }
}

__global__ void __launch_bounds__(384, 1)
    hfp4_sm90_bf16_fp4_gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap d_map,
                                   const __grid_constant__ hfp4_sm90_gemm_params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using namespace bf16cfg;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    uint8_t *a_tiles = smem + A_OFF, *w_stages = smem + W_OFF, *ws_stages = smem + WS_OFF;
    uint64_t *full = (uint64_t *)(smem + BAR_OFF), *empty = full + STAGES;
    const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 256);
        }
        mbar_fence_init();
    }
    __syncthreads();
    const int64_t chunks = p.w_chunks;
    if (warpgroup == 2) {
        warpgroup_reg_dealloc<PRODUCER_REGS>();
        if (threadIdx.x / 32 != 8) return;
        if (lane == 0) tma_prefetch_descriptor(&a_map);
        int64_t it = 0;
        sm90_walk walk = {(int32_t)blockIdx.x, 0, 0, 0u, 0, 0, 0};
        while (walk_next<BT>(p, nullptr, walk)) {
            sm90_tile tile;
            if (!resolve_tile<BT>(p, walk.item, walk.lay, tile) || !tile.compute) continue;
            const uint8_t *w_src = tile_weights(p, tile), *ws_src = tile_weight_scales<false>(p, tile, chunks);
            for (int64_t kc = 0; kc < chunks; kc++, it++) {
                const int s = (int)(it % STAGES);
                const uint32_t phase = (uint32_t)((it / STAGES) & 1);
                if (lane == 0) {
                    mbar_wait(&empty[s], phase ^ 1);
                    uint64_t *bar = &full[s];
                    mbar_arrive_expect_tx(bar, STAGE_BYTES);
                    uint8_t *a_dst = a_tiles + s * A_STAGE_BYTES;
                    tma_load_3d(a_dst, &a_map, bar, (int32_t)(kc * 128), tile.m0, tile.a_group);
                    tma_load_3d(a_dst + A_ATOM_BYTES, &a_map, bar, (int32_t)(kc * 128 + 64), tile.m0, tile.a_group);
                    uint8_t *w_dst = w_stages + s * W_STAGE_BYTES, *ws_dst = ws_stages + s * WS_STAGE_BYTES;
#pragma unroll
                    for (int wg = 0; wg < 2; wg++) {
                        bulk_load(w_dst + wg * W_WG_BYTES, w_src + wg * p.w_pairs * HFP4_SM90_PAIR_BYTES + kc * W_WG_BYTES,
                                  W_WG_BYTES, bar);
                        bulk_load(ws_dst + wg * WS_WG_BYTES, ws_src + (wg * p.w_chunks + kc) * WS_WG_BYTES, WS_WG_BYTES,
                                  bar);
                    }
                }
                __syncwarp();
            }
        }
        return;
    }
    warpgroup_reg_alloc<CONSUMER_REGS>();
    const int warp_in_wg = tid / 32, g8 = lane / 4;
    const int r0 = warp_in_wg * 16 + g8;
    const uint32_t desc_lo0 = smem_desc_lo_k128(smem_addr(a_tiles));
    const uint32_t w_base = smem_addr(w_stages) + warpgroup * W_WG_BYTES + tid * 16;
    const uint32_t ws_base = smem_addr(ws_stages) + warpgroup * WS_WG_BYTES + r0 * 4;
    int s = 0;
    uint32_t phase = 0;
    sm90_walk walk = {(int32_t)blockIdx.x, 0, 0, 0u, 0, 0, 0};
    while (walk_next<BT>(p, nullptr, walk)) {
        sm90_tile tile;
        if (!resolve_tile<BT>(p, walk.item, walk.lay, tile)) continue;
        const int64_t wtile = tile.n_tile * 2 + warpgroup;
        const int64_t dgroup = p.grouping == HFP4_K_MASKED ? tile.a_group : 0;
        if (!tile.compute) {
            store_zero_tile<BT>(p, tile, wtile, dgroup, tid);
            continue;
        }
        /* the tile's chunk modes, a byte a lane (32 chunks at a time) */
        const uint8_t *modes = p.w_modes + ((int64_t)tile.expert * p.w_tiles + wtile) * chunks;
        uint32_t mreg = lane < chunks ? __ldg(modes + lane) : 0u;
        sm90_fin<BT> fin;
        uint32_t fa[8][4], fb[8][4];
        bool exact = true;
        mbar_wait(&full[s], phase);
        exact &= load_convert_bf16(fa, s, w_base, ws_base, __shfl_sync(0xFFFFFFFFu, mreg, 0));
        /* the mode of chunk c, from the lanes' bytes (reloaded every 32 chunks) */
        auto mode_of = [&](int64_t c) -> uint32_t {
            if (c % 32 == 0) mreg = c + lane < chunks ? __ldg(modes + c + lane) : 0u;
            return __shfl_sync(0xFFFFFFFFu, mreg, (int)(c % 32));
        };
        int64_t kc = 0;
        for (; kc + 2 < chunks; kc += 2) {
            bf16_step<true>(fin.v, fa, fb, desc_lo0, w_base, ws_base, full, empty, s, phase, kc == 0, mode_of(kc + 1), exact);
            bf16_step<true>(fin.v, fb, fa, desc_lo0, w_base, ws_base, full, empty, s, phase, false, mode_of(kc + 2), exact);
        }
        int s_last;
        if (kc + 2 == chunks) {
            bf16_step<true>(fin.v, fa, fb, desc_lo0, w_base, ws_base, full, empty, s, phase, kc == 0, mode_of(kc + 1), exact);
            s_last = s;
            bf16_step<false, false>(fin.v, fb, fa, desc_lo0, w_base, ws_base, full, empty, s, phase, false, 0u, exact);
        } else {
            s_last = s;
            bf16_step<false, false>(fin.v, fa, fb, desc_lo0, w_base, ws_base, full, empty, s, phase, kc == 0, 0u, exact);
        }
        /* a scale that BF16 cannot carry exactly: the quad's rows (r0, r0 + 8) are NaN, not wrong */
        uint32_t bad = exact ? 0u : 1u;
        bad |= __shfl_xor_sync(0xFFFFFFFFu, bad, 1);
        bad |= __shfl_xor_sync(0xFFFFFFFFu, bad, 2);
        if (bad)
#pragma unroll
            for (int i = 0; i < BT / 2; i++) fin.v[i] = __uint_as_float(0x7FC00000u);
        int32_t row_id[4];
        uint32_t real_mask[4];
        load_row_ids<BT, 4>(p, tile, lane, row_id);
        real_row_masks<4>(p, row_id, real_mask);
        if (p.d_tma && tile.zero_end == min(tile.m0 + (int64_t)BT, p.m)) {
            /* staged in the last chunk's activation tile, which the stage's release hands back only
             * once the store has read it; both warpgroups' wgmmas read all of it, so neither writes
             * before the other's last wgmmas are done (p.d_tma is the same for both) */
            named_barrier_sync<3, 256>();
            const uint32_t staging = smem_addr(a_tiles + s_last * A_STAGE_BYTES + warpgroup * A_ATOM_BYTES);
            store_tile_tma<1>(&d_map, tile, wtile, dgroup, fin, staging, real_mask, warpgroup, tid, lane);
            if (tid == 0) bulk_wait_read();
        } else {
            store_tile_direct(p, tile, wtile, dgroup, fin, real_mask, tid, lane);
        }
        mbar_arrive(&empty[s_last]);
    }
    if (p.d_tma && tid == 0) bulk_wait_all(); /* the last TMA store has written D before the CTA ends */
#endif
}

/* ---- the launcher ---- */

static int bf16_switch = -1; /* HFP4_SM90_BF16, read once (-1: not yet) */

void hfp4__sm90_bf16_set(int on) { __atomic_store_n(&bf16_switch, on ? 1 : 0, __ATOMIC_RELAXED); }

int hfp4__sm90_bf16_wanted(const hfp4_sm90_plan *plan) {
    const int on = hfp4__env_switch("HFP4_SM90_BF16", 0, &bf16_switch);
    const hfp4_sm90_gemm_params *p = &plan->params;
    return on && plan->block_tokens == 128 && !plan->w_fp32 && p->a_gran_k == 32 &&
           (p->a_scale_dtype == HFP4_DTYPE_UE8M0 || p->a_scale_dtype == HFP4_DTYPE_UE8M0_PACKED);
}

/* A launch of `kernel` on `stream` (cudaLaunchKernelEx reports this launch's own error, never one
 * the caller left pending) */
template <typename... Args>
static cudaError_t launch_on(void (*kernel)(Args...), unsigned grid, unsigned block, size_t smem, cudaStream_t stream,
                             Args... args) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(grid, 1, 1);
    config.blockDim = dim3(block, 1, 1);
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    return cudaLaunchKernelEx(&config, kernel, args...);
}

hfp4_status hfp4__sm90_bf16_gemm(const char *fn, const hfp4_gemm_problem *problem, const hfp4_sm90_plan *plan,
                                 const hfp4_current_device *dev, const CUtensorMap *d_map, cudaStream_t stream,
                                 int *taken) {
    using namespace bf16cfg;
    *taken = 0;
    const hfp4_sm90_gemm_params &p = plan->params;
    const int64_t groups = problem->grouping == HFP4_GROUPING_MASKED ? problem->num_groups : 1;
    const int64_t k_pad = p.w_chunks * 128, rows_total = groups * p.m;
    const size_t bytes = (size_t)rows_total * (size_t)k_pad * 2;
    /* NOTE: the FP8 path instead (as exact, slower) when the temporary would exceed
     * HFP4_SM90_BF16_MAX_TEMP, when the stream is being captured (a graph with memory nodes cannot
     * be cloned, instantiated twice at once or added as a child graph), or when it cannot be had */
    if (bytes > (size_t)HFP4_SM90_BF16_MAX_TEMP) return HFP4_OK;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
        (void)cudaGetLastError(); /* (this query's own error) */
        return HFP4_OK;
    }
    if (capture != cudaStreamCaptureStatusNone) return HFP4_OK;
    HFP4_REQUIRE(SMEM_BYTES <= dev->max_smem_optin, "%s: the BF16 path needs %d bytes of shared memory, device has %d",
                 fn, SMEM_BYTES, dev->max_smem_optin);
    static int built_regs = 0; /* (hfp4__require_kernel_regs says why) */
    HFP4_TRY(hfp4__require_kernel_regs(fn, "the BF16 kernel", (const void *)hfp4_sm90_bf16_fp4_gemm_kernel, &built_regs,
                                       3, PRODUCER_REGS + 2 * CONSUMER_REGS));
    void *ap = NULL;
    if (cudaMallocAsync(&ap, bytes, stream) != cudaSuccess) {
        (void)cudaGetLastError(); /* (the allocation's own error: the FP8 path runs) */
        return HFP4_OK;
    }
    *taken = 1;
    const int64_t threads = rows_total * (k_pad / 32);
    cudaError_t err = launch_on(hfp4_sm90_bf16_act_kernel, (unsigned)((threads + 255) / 256), 256, 0, stream,
                                (const uint8_t *)problem->a.data, (int64_t)problem->a.ld,
                                (int64_t)(groups > 1 ? problem->a.stride_group : 0), (__nv_bfloat16 *)ap, k_pad,
                                rows_total, p);
    hfp4_status st = HFP4_OK;
    if (err == cudaSuccess) {
        CUtensorMap a_map;
        const int64_t dims[3] = {k_pad, p.m, groups};
        const int64_t strides[2] = {k_pad * 2, p.m * k_pad * 2};
        const uint32_t box[3] = {64, (uint32_t)BT, 1};
        st = hfp4__make_tensor_map_bf16_3d(fn, "the BF16 copy of A", &a_map, ap, dims, strides, box);
        if (st == HFP4_OK) {
            err = cudaFuncSetAttribute(hfp4_sm90_bf16_fp4_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       SMEM_BYTES);
            if (err == cudaSuccess) {
                const int64_t items = p.tiles_total;
                const int ctas = (int)(items < dev->num_sms ? items : dev->num_sms);
                err = launch_on(hfp4_sm90_bf16_fp4_gemm_kernel, (unsigned)ctas, 384, (size_t)SMEM_BYTES, stream, a_map,
                                *d_map, p);
            }
        }
    }
    const cudaError_t ferr = cudaFreeAsync(ap, stream);
    if (st != HFP4_OK) return st;
    if (err == cudaSuccess) err = ferr;
    HFP4_CUDA_TRY(fn, err);
    return HFP4_OK;
}
