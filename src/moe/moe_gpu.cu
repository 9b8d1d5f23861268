/*
 * moe_gpu.cu - the MoE glue's kernels (hfp4.h, "MoE glue"; checks and CPU forms in moe.c):
 *   hfp4_moe_route_kernel          one CTA: per-expert counts and ranks (shared-memory atomics), the
 *                                  aligned segment starts (one warp's scan), the layout
 *   hfp4_moe_route_cluster_kernel  the same by a cluster of 8 CTAs for many routed rows (prefill)
 *   hfp4_moe_quantize_rows_kernel  a CTA per (token's row, 1024 columns), read once for the token's
 *                                  top_k routed rows: amax, scale, FP8 codes stored to each of them
 *   hfp4_moe_swiglu_quantize_rows_kernel  the same per routed row, its values the clamped SwiGLU of
 *                                  the first GEMM's row (gate and up stacked or interleaved)
 *   hfp4_moe_combine_kernel        a CTA per token and 1024 columns, a thread 8 of them: the weighted
 *                                  sum of the token's rows
 * All four should be small next to the GEMMs they sit between, at decode (a few microseconds, most
 * of it launch) and at prefill (bytes at the copy rate: wide loads and stores, several loads in
 * flight a thread); what they save is the dozens of framework kernels (sort, scatter,
 * quantization, gather, index_add) that did the same in torch.
 * Rows whose row_pos lies outside [0, layout_rows) are skipped: device data cannot be checked from
 * the host, and a bad entry must never become an out-of-bounds write.
 */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdlib.h>

#include "../runtime/cuda_runtime.h"
#include "moe_internal.h"
#include "sm90/ptx.cuh"
#include "swiglu_math.h"

namespace {

constexpr int kRouteThreads = 1024;
constexpr int kRouteBatch = 8; /* ids a thread loads before it waits on any: one CTA must keep many loads in flight */

__device__ __forceinline__ int64_t load_id(const void *ids, int ids_int64, int64_t i) {
    return ids_int64 ? ((const int64_t *)ids)[i] : ((const int32_t *)ids)[i];
}

/* The first row of each expert's aligned segment (exclusive scan of the counts rounded up to the
 * alignment), by one warp, each lane a run of experts; starts may be counts (in place) */
__device__ __forceinline__ void segment_starts(const int32_t *counts, int32_t *starts, int32_t num_experts,
                                               int32_t alignment) {
    const int lane = threadIdx.x % 32, per = (num_experts + 31) / 32, e0 = lane * per;
    const int e1 = e0 + per < num_experts ? e0 + per : num_experts;
    int32_t sum = 0;
    for (int e = e0; e < e1; e++) sum += (counts[e] + alignment - 1) / alignment * alignment;
    int32_t incl = sum;
    for (int o = 1; o < 32; o *= 2) {
        const int32_t v = __shfl_up_sync(0xFFFFFFFFu, incl, o);
        if (lane >= o) incl += v;
    }
    int32_t start = incl - sum;
    for (int e = e0; e < e1; e++) {
        const int32_t aligned = (counts[e] + alignment - 1) / alignment * alignment;
        starts[e] = start;
        start += aligned;
    }
}

/* Rows [r0, r1) of the ids, this CTA's threads a batch of kRouteBatch each: row_pos[i] = the row's
 * rank among this CTA's rows of its expert (shared-memory atomics on counts), -1 where the id is
 * outside [0, num_experts). Each pass over the ids loads a batch of kRouteBatch a thread before
 * using any: with one load in flight a thread, T = 4096 (24576 ids) took 24 dependent round trips a
 * pass (44 us, bench/RESULTS.md v25). */
__device__ __forceinline__ void rank_rows(const void *__restrict__ ids, int ids_int64, int64_t r0, int64_t r1,
                                          int32_t num_experts, int32_t *counts, int32_t *__restrict__ row_pos) {
    const int64_t step = (int64_t)blockDim.x * kRouteBatch;
    for (int64_t base = r0 + threadIdx.x; base < r1; base += step) {
        int64_t e[kRouteBatch];
#pragma unroll
        for (int u = 0; u < kRouteBatch; u++) {
            const int64_t i = base + (int64_t)u * blockDim.x;
            e[u] = i < r1 ? load_id(ids, ids_int64, i) : -1;
        }
#pragma unroll
        for (int u = 0; u < kRouteBatch; u++) {
            const int64_t i = base + (int64_t)u * blockDim.x;
            if (i < r1) row_pos[i] = e[u] >= 0 && e[u] < num_experts ? atomicAdd(&counts[e[u]], 1) : -1;
        }
    }
}

/* Rows [r0, r1) again (each thread reads back only the ranks it wrote): a ranked row's place is
 * first[its expert] + its rank, into row_pos and the layout */
__device__ __forceinline__ void place_rows(const void *__restrict__ ids, int ids_int64, int64_t r0, int64_t r1,
                                           const int32_t *first, int32_t *__restrict__ row_pos,
                                           int32_t *__restrict__ layout) {
    const int64_t step = (int64_t)blockDim.x * kRouteBatch;
    for (int64_t base = r0 + threadIdx.x; base < r1; base += step) {
        int32_t rank[kRouteBatch];
        int64_t e[kRouteBatch];
#pragma unroll
        for (int u = 0; u < kRouteBatch; u++) {
            const int64_t i = base + (int64_t)u * blockDim.x;
            rank[u] = i < r1 ? row_pos[i] : -1;
            e[u] = i < r1 ? load_id(ids, ids_int64, i) : -1;
        }
#pragma unroll
        for (int u = 0; u < kRouteBatch; u++) {
            if (rank[u] < 0) continue;
            const int64_t i = base + (int64_t)u * blockDim.x;
            const int32_t p = first[e[u]] + rank[u];
            row_pos[i] = p;
            layout[p] = (int32_t)e[u];
        }
    }
}

/* One CTA: counts[e] then the rank of each row inside its expert (row_pos holds the rank until the
 * starts are known), the starts of the aligned segments by a warp's scan, the layout. */
__global__ void __launch_bounds__(kRouteThreads) hfp4_moe_route_kernel(const void *__restrict__ ids, int ids_int64,
                                                                      int64_t routed_rows, int32_t num_experts,
                                                                      int32_t alignment, int32_t *__restrict__ row_pos,
                                                                      int32_t *__restrict__ layout,
                                                                      int64_t layout_rows) {
    extern __shared__ int32_t counts[]; /* [num_experts]: counts, then segment starts */
    for (int e = threadIdx.x; e < num_experts; e += blockDim.x) counts[e] = 0;
    __syncthreads();
    rank_rows(ids, ids_int64, 0, routed_rows, num_experts, counts, row_pos);
    __syncthreads();
    if (threadIdx.x < 32) segment_starts(counts, counts, num_experts, alignment);
    for (int64_t r = threadIdx.x; r < layout_rows; r += blockDim.x) layout[r] = -1;
    __syncthreads(); /* (orders the -1s before the ids below, and the starts before their reads) */
    place_rows(ids, ids_int64, 0, routed_rows, counts, row_pos, layout);
}

constexpr int kRouteClusterCtas = 8; /* (portable: every GPC of an H100/H200 holds 8 such CTAs) */

/* The route of many routed rows (prefill) by a cluster of kRouteClusterCtas CTAs, each a slice of
 * the rows: with one CTA the route is one SM's bandwidth (T = 16384, top-6: ~3 MB read and written
 * in 130 us, bench/RESULTS.md v35). Each CTA counts and ranks its rows in its own shared memory,
 * then takes its base inside each expert's segment with one add per expert to CTA 0's totals
 * (distributed shared memory); CTA 0 scans the totals into segment starts while every CTA writes
 * its slice of the layout's -1s; each row's place is start + this CTA's base + its rank. Ranks
 * inside a segment follow arrival order, as the one-CTA kernel's. */
__global__ void __launch_bounds__(kRouteThreads) hfp4_moe_route_cluster_kernel(
    const void *__restrict__ ids, int ids_int64, int64_t routed_rows, int32_t num_experts, int32_t alignment,
    int32_t *__restrict__ row_pos, int32_t *__restrict__ layout, int64_t layout_rows) {
    extern __shared__ int32_t sm[]; /* [3][num_experts]: this CTA's counts, then its bases, then its
                                       places' starts; in CTA 0 also the totals and the starts */
    int32_t *mine = sm, *totals = sm + num_experts, *starts = sm + 2 * num_experts;
    const uint32_t rank = cluster_cta_rank(), ctas = kRouteClusterCtas;
    for (int e = threadIdx.x; e < num_experts; e += blockDim.x) mine[e] = 0, totals[e] = 0;
    __syncthreads();
    cluster_arrive(); /* (CTA 0's totals are zero before any CTA adds to them) */
    const int64_t per = (routed_rows + ctas - 1) / ctas, r0 = rank * per;
    const int64_t r1 = r0 + per < routed_rows ? r0 + per : routed_rows;
    rank_rows(ids, ids_int64, r0, r1, num_experts, mine, row_pos);
    __syncthreads();
    cluster_wait();
    const uint32_t totals0 = cluster_map(smem_addr(totals), 0), starts0 = cluster_map(smem_addr(starts), 0);
    for (int e = threadIdx.x; e < num_experts; e += blockDim.x)
        mine[e] = mine[e] ? atomic_add_cluster_s32(totals0 + 4u * (uint32_t)e, mine[e]) : 0;
    cluster_arrive();
    cluster_wait(); /* (every CTA's adds are in CTA 0's totals) */
    if (rank == 0 && threadIdx.x < 32) segment_starts(totals, starts, num_experts, alignment);
    const int64_t lper = (layout_rows + ctas - 1) / ctas, l0 = rank * lper;
    const int64_t l1 = l0 + lper < layout_rows ? l0 + lper : layout_rows;
    for (int64_t r = l0 + threadIdx.x; r < l1; r += blockDim.x) layout[r] = -1;
    __threadfence(); /* (the -1s before any CTA's places below; the cluster barrier orders them too) */
    cluster_arrive();
    cluster_wait(); /* (CTA 0's starts are complete, every -1 is written) */
    for (int e = threadIdx.x; e < num_experts; e += blockDim.x)
        mine[e] += ld_cluster_s32(starts0 + 4u * (uint32_t)e);
    __syncthreads();
    place_rows(ids, ids_int64, r0, r1, mine, row_pos, layout);
    cluster_arrive(); /* (CTA 0's shared memory outlives every CTA's reads of it) */
    cluster_wait();
}

/* max that keeps NaN, as torch.amax (fmaxf would drop it) */
__device__ __forceinline__ float max_nan(float a, float b) { return (b > a || b != b) ? b : a; }

/* 8 consecutive elements of x from column c (columns past k read as 0); vec: c and k multiples of 8
 * and the row 16-byte aligned, so one (BF16) or two (FP32) 16-byte loads bring all eight */
__device__ __forceinline__ void load_x8(const void *__restrict__ x, int x_fp32, const int vec, int64_t row, int64_t c,
                                        int64_t k, float v[8]) {
    if (vec) {
        if (c >= k) {
#pragma unroll
            for (int j = 0; j < 8; j++) v[j] = 0.0f;
        } else if (x_fp32) {
            const float4 f0 = *(const float4 *)((const float *)x + row + c);
            const float4 f1 = *(const float4 *)((const float *)x + row + c + 4);
            v[0] = f0.x, v[1] = f0.y, v[2] = f0.z, v[3] = f0.w, v[4] = f1.x, v[5] = f1.y, v[6] = f1.z, v[7] = f1.w;
        } else { /* (a BF16 is the top half of its float: exact, as __bfloat162float) */
            const uint4 w = *(const uint4 *)((const __nv_bfloat16 *)x + row + c);
            const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int j = 0; j < 4; j++)
                v[2 * j] = __uint_as_float(u[j] << 16), v[2 * j + 1] = __uint_as_float(u[j] & 0xFFFF0000u);
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
        v[j] = c + j >= k ? 0.0f
               : x_fp32   ? ((const float *)x)[row + c + j]
                          : __bfloat162float(((const __nv_bfloat16 *)x)[row + c + j]);
}

/* A lane's 8 values quantized as hfp4_quantize_fp8_per_token quantizes them: the amax of their
 * group (span lanes: 16 for gran 128, 4 for gran 32; all 32 lanes call this), floored at 1e-4,
 * sc = amax / 448, codes = v x (1 / sc) rounded to nearest even (|v / sc| <= 448: saturation
 * never applies), 4 to a word. Returns sc. */
__device__ __forceinline__ float quantize8(const float v[8], int span, uint32_t codes[2]) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++) amax = max_nan(amax, fabsf(v[j]));
    for (int o = span / 2; o > 0; o /= 2) amax = max_nan(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    if (amax < 1e-4f) amax = 1e-4f; /* (NaN compares false and stays NaN, as torch.clamp) */
    const float sc = amax / 448.0f, inv = 1.0f / sc;
    codes[0] = codes[1] = 0;
#pragma unroll
    for (int j = 0; j < 8; j++)
        codes[j / 4] |= (uint32_t)__nv_cvt_float_to_fp8(v[j] * inv, __NV_SATFINITE, __NV_E4M3) << (8 * (j % 4));
    return sc;
}

/* The codes of columns c .. c + 7 (those below k) into a row of a, and the group's scale into its
 * row of sf by the group's first lane (leader); vec: one 8-byte store (c and k multiples of 8) */
__device__ __forceinline__ void store8(uint8_t *arow, float *sfrow, const int vec, int64_t c, int64_t k, int shift,
                                       bool leader, const uint32_t codes[2], float sc) {
    if (vec) {
        if (c < k) *(uint2 *)(arow + c) = make_uint2(codes[0], codes[1]);
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (c + j < k) arow[c + j] = (uint8_t)(codes[j / 4] >> (8 * (j % 4)));
    }
    if (leader && c < k) sfrow[c >> shift] = sc;
}

constexpr int kQuantThreads = 128;   /* 4 warps, a lane 8 columns: 1024 columns a CTA */
constexpr int kQuantMaxShare = 64;   /* routed rows one CTA stores a quantized row to, at most */

/* A CTA per (unit, 1024 columns), both grid-stride: a unit is `share` routed rows, share = row_div
 * (the launcher's choice up to kQuantMaxShare) or 1, which all come from row i0 / row_div of x, so
 * a token's row is read and quantized once and its codes and scales stored to each of its routed
 * rows' places (the same input gives the same bits; hfp4_moe_quantize_rows quantizes each routed
 * row alone). Lane l of warp w quantizes 8 columns; a group of gran_k columns is 16 (gran 128) or 4
 * (gran 32) lanes, reduced with shuffles. Short work a thread and many CTAs: at decode the launch's
 * rows spread over SMs, at prefill enough loads are in flight (the first form, a CTA per row with
 * every chunk of it, spent ~12 us a CTA: bench/RESULTS.md v25). The scale and the codes are
 * hfp4_quantize_fp8_per_token's: amax floored at 1e-4, sf = amax / 448, x * (1 / sf), rounded to
 * nearest even (|x / sf| <= 448: saturation never applies). vec: wide loads and 8-byte code stores
 * (a literal in each of the two kernels below, so each compiles to straight code of its own). */
__device__ __forceinline__ void quantize_rows(const void *__restrict__ x, int x_fp32, const int vec, int64_t k,
                                              int64_t ldx, int32_t row_div, int32_t share,
                                              const int32_t *__restrict__ row_pos, int64_t routed_rows,
                                              int32_t gran_k, uint8_t *__restrict__ a, int64_t lda,
                                              float *__restrict__ sf, int64_t layout_rows) {
    const int shift = gran_k == 128 ? 7 : 5, span = gran_k == 128 ? 16 : 4; /* lanes of one group */
    const int64_t sf_cols = (k + gran_k - 1) >> shift, units = (routed_rows + share - 1) / share;
    const int64_t col_blocks = (k + 8 * kQuantThreads - 1) / (8 * kQuantThreads);
    const int lane = threadIdx.x % 32;
    for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
        const int64_t i0 = unit * share, i1 = i0 + share < routed_rows ? i0 + share : routed_rows;
        const int64_t r = i0 / row_div; /* (x's row: every row of the unit has the same) */
        for (int64_t cb = blockIdx.y; cb < col_blocks; cb += gridDim.y) {
            const int64_t c = cb * 8 * kQuantThreads + 8 * (int64_t)threadIdx.x;
            float v[8];
            load_x8(x, x_fp32, vec, r * ldx, c, k, v); /* (issued before the row_pos reads below wait) */
            bool any = false; /* (a row no routed row takes, e.g. expert-parallel sentinels: nothing stored) */
            for (int64_t i = i0; i < i1; i++) any |= row_pos[i] >= 0 && row_pos[i] < layout_rows;
            if (!any) continue; /* (the same for every thread; lanes past k hold zeros and join the shuffles) */
            uint32_t codes[2];
            const float sc = quantize8(v, span, codes);
            for (int64_t i = i0; i < i1; i++) {
                const int32_t p = row_pos[i];
                if (p < 0 || p >= layout_rows) continue; /* (the same for every lane) */
                store8(a + (int64_t)p * lda, sf + (int64_t)p * sf_cols, vec, c, k, shift, lane % span == 0, codes, sc);
            }
        }
    }
}

/* the launcher's fast form: k, ldx and lda multiples of 8, x and a 16- and 8-byte aligned */
__global__ void __launch_bounds__(kQuantThreads)
    hfp4_moe_quantize_rows_kernel(const void *__restrict__ x, int x_fp32, int64_t k, int64_t ldx, int32_t row_div,
                                  int32_t share, const int32_t *__restrict__ row_pos, int64_t routed_rows,
                                  int32_t gran_k, uint8_t *__restrict__ a, int64_t lda, float *__restrict__ sf,
                                  int64_t layout_rows) {
    quantize_rows(x, x_fp32, 1, k, ldx, row_div, share, row_pos, routed_rows, gran_k, a, lda, sf, layout_rows);
}

/* any other shape or alignment: element by element */
__global__ void __launch_bounds__(kQuantThreads)
    hfp4_moe_quantize_rows_any_kernel(const void *__restrict__ x, int x_fp32, int64_t k, int64_t ldx, int32_t row_div,
                                      int32_t share, const int32_t *__restrict__ row_pos, int64_t routed_rows,
                                      int32_t gran_k, uint8_t *__restrict__ a, int64_t lda, float *__restrict__ sf,
                                      int64_t layout_rows) {
    quantize_rows(x, x_fp32, 0, k, ldx, row_div, share, row_pos, routed_rows, gran_k, a, lda, sf, layout_rows);
}

/* Columns c .. c + 7 of gate and up from a row of the first GEMM's D (past n: zeros); stacked:
 * gate [0, n), up [n, 2n); interleaved: gate 2c, up 2c + 1. vec: n a multiple of 8, the row
 * 16-byte aligned: one 16-byte load of each (stacked) or two of the pairs (interleaved) */
__device__ __forceinline__ void load_gate_up8(const __nv_bfloat16 *__restrict__ row, int64_t n, int64_t c,
                                              const int vec, int interleaved, float g[8], float u[8]) {
    if (!interleaved) {
        load_x8(row, 0, vec, 0, c, n, g);
        load_x8(row + n, 0, vec, 0, c, n, u);
        return;
    }
    if (vec) {
        float v[16];
        load_x8(row, 0, 1, 0, 2 * c, 2 * n, v);
        load_x8(row, 0, 1, 0, 2 * c + 8, 2 * n, v + 8);
#pragma unroll
        for (int j = 0; j < 8; j++) g[j] = v[2 * j], u[j] = v[2 * j + 1];
        return;
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        g[j] = c + j < n ? __bfloat162float(row[2 * (c + j)]) : 0.0f;
        u[j] = c + j < n ? __bfloat162float(row[2 * (c + j) + 1]) : 0.0f;
    }
}

/* A CTA per (routed row, 1024 of the n columns), both grid-stride: the row's place p in the layout,
 * its gate and up values in y's row p (8 columns a lane), h = the clamped SwiGLU (swiglu_math.h,
 * the CPU form's operations), quantized as quantize_rows quantizes (quantize8) into row p. vec: y,
 * a and their strides allow 16-byte loads and 8-byte stores, n a multiple of 8. */
__device__ __forceinline__ void swiglu_quantize_rows(const __nv_bfloat16 *__restrict__ y, int64_t ldy, int64_t n,
                                                     int interleaved, float limit, const int vec,
                                                     const int32_t *__restrict__ row_pos, int64_t routed_rows,
                                                     int32_t gran_k, uint8_t *__restrict__ a, int64_t lda,
                                                     float *__restrict__ sf, int64_t layout_rows) {
    const int shift = gran_k == 128 ? 7 : 5, span = gran_k == 128 ? 16 : 4;
    const int64_t sf_cols = (n + gran_k - 1) >> shift;
    const int64_t col_blocks = (n + 8 * kQuantThreads - 1) / (8 * kQuantThreads);
    const int lane = threadIdx.x % 32;
    for (int64_t i = blockIdx.x; i < routed_rows; i += gridDim.x) {
        const int32_t p = row_pos[i];
        if (p < 0 || p >= layout_rows) continue; /* (the same for the whole CTA) */
        const __nv_bfloat16 *row = y + (int64_t)p * ldy;
        for (int64_t cb = blockIdx.y; cb < col_blocks; cb += gridDim.y) {
            const int64_t c = cb * 8 * kQuantThreads + 8 * (int64_t)threadIdx.x;
            float g[8], u[8], h[8];
            load_gate_up8(row, n, c, vec, interleaved, g, u);
#pragma unroll
            for (int j = 0; j < 8; j++) h[j] = hfp4__swiglu_bf16(g[j], u[j], limit); /* (past n: g = u = 0, so +0) */
            uint32_t codes[2];
            const float sc = quantize8(h, span, codes);
            store8(a + (int64_t)p * lda, sf + (int64_t)p * sf_cols, vec, c, n, shift, lane % span == 0, codes, sc);
        }
    }
}

__global__ void __launch_bounds__(kQuantThreads)
    hfp4_moe_swiglu_quantize_rows_kernel(const __nv_bfloat16 *__restrict__ y, int64_t ldy, int64_t n, int interleaved,
                                         float limit, const int32_t *__restrict__ row_pos, int64_t routed_rows,
                                         int32_t gran_k, uint8_t *__restrict__ a, int64_t lda, float *__restrict__ sf,
                                         int64_t layout_rows) {
    swiglu_quantize_rows(y, ldy, n, interleaved, limit, 1, row_pos, routed_rows, gran_k, a, lda, sf, layout_rows);
}

__global__ void __launch_bounds__(kQuantThreads)
    hfp4_moe_swiglu_quantize_rows_any_kernel(const __nv_bfloat16 *__restrict__ y, int64_t ldy, int64_t n,
                                             int interleaved, float limit, const int32_t *__restrict__ row_pos,
                                             int64_t routed_rows, int32_t gran_k, uint8_t *__restrict__ a, int64_t lda,
                                             float *__restrict__ sf, int64_t layout_rows) {
    swiglu_quantize_rows(y, ldy, n, interleaved, limit, 0, row_pos, routed_rows, gran_k, a, lda, sf, layout_rows);
}

constexpr int kCombineThreads = 128; /* a thread 8 columns: 1024 columns a CTA */
constexpr int kCombineBatch = 4;     /* rows of a token loaded before the first FMA */

/* A CTA per (token, 1024 columns), a thread 8 of them: FMAs over the token's rows in order of j, as
 * the CPU form; kCombineBatch rows' loads in flight before their FMAs. vec (the launcher's): 16-byte
 * loads of y and 16-byte stores of out. */
__global__ void __launch_bounds__(kCombineThreads)
    hfp4_moe_combine_kernel(const __nv_bfloat16 *__restrict__ y, int64_t ldy, int64_t layout_rows, int64_t n,
                            const int32_t *__restrict__ row_pos, const void *__restrict__ weights, int w_fp32,
                            int64_t tokens, int32_t top_k, void *__restrict__ out, int out_fp32, int64_t ldo, int vec,
                            int32_t col_blocks) {
    const int64_t t = blockIdx.x / col_blocks;
    const int64_t c0 = ((int64_t)(blockIdx.x % col_blocks) * kCombineThreads + threadIdx.x) * 8;
    if (t >= tokens || c0 >= n) return;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int32_t j0 = 0; j0 < top_k; j0 += kCombineBatch) {
        float v[kCombineBatch][8], w[kCombineBatch];
        bool live[kCombineBatch];
#pragma unroll
        for (int u = 0; u < kCombineBatch; u++) {
            const int64_t r = t * top_k + j0 + u;
            const int32_t p = j0 + u < top_k ? row_pos[r] : -1;
            live[u] = p >= 0 && p < layout_rows;
            if (!live[u]) continue;
            w[u] = w_fp32 ? ((const float *)weights)[r] : __bfloat162float(((const __nv_bfloat16 *)weights)[r]);
            load_x8(y + (int64_t)p * ldy, 0, vec, 0, c0, n, v[u]); /* (BF16; vec: as load_x8 needs) */
        }
#pragma unroll
        for (int u = 0; u < kCombineBatch; u++) {
            if (!live[u]) continue;
#pragma unroll
            for (int e = 0; e < 8; e++) acc[e] = __fmaf_rn(w[u], v[u][e], acc[e]);
        }
    }
    if (vec) {
        if (out_fp32) {
            float4 *o = (float4 *)((float *)out + t * ldo + c0);
            o[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
            o[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
        } else {
            uint32_t h[4];
#pragma unroll
            for (int e = 0; e < 4; e++)
                h[e] = (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(acc[2 * e])) |
                       (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(acc[2 * e + 1])) << 16;
            *(uint4 *)((__nv_bfloat16 *)out + t * ldo + c0) = make_uint4(h[0], h[1], h[2], h[3]);
        }
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; e++) {
        if (c0 + e >= n) break;
        if (out_fp32) ((float *)out)[t * ldo + c0 + e] = acc[e];
        else ((__nv_bfloat16 *)out)[t * ldo + c0 + e] = __float2bfloat16_rn(acc[e]);
    }
}

} // namespace

/* The cluster kernel's launch: kRouteClusterCtas CTAs in one cluster (attr: its one attribute) */
static cudaLaunchConfig_t route_cluster_config(int32_t num_experts, cudaStream_t stream, cudaLaunchAttribute *attr) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(kRouteClusterCtas, 1, 1);
    config.blockDim = dim3(kRouteThreads, 1, 1);
    config.dynamicSmemBytes = 3 * (size_t)num_experts * sizeof(int32_t); /* (<= 48 KB: E <= 4096) */
    config.stream = stream;
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = kRouteClusterCtas;
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    config.attrs = attr;
    config.numAttrs = 1;
    return config;
}

/* Whether the device can run a cluster of kRouteClusterCtas route CTAs at the largest shared memory
 * (E = 4096), asked once per device (cudaOccupancyMaxActiveClusters; a failed query says no) */
static int route_cluster_fits(int device) {
    enum { MAX_DEVICES = 64 };
    static int answer[MAX_DEVICES]; /* 0: not asked, 1: fits, 2: does not */
    if (device < 0 || device >= MAX_DEVICES) return 0;
    int a = __atomic_load_n(&answer[device], __ATOMIC_RELAXED);
    if (a == 0) {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t config = route_cluster_config(HFP4_MOE_GPU_MAX_EXPERTS, 0, &attr);
        int clusters = 0;
        if (cudaOccupancyMaxActiveClusters(&clusters, hfp4_moe_route_cluster_kernel, &config) != cudaSuccess) {
            (void)cudaGetLastError(); /* (the query's own error, not the caller's) */
            clusters = 0;
        }
        a = clusters >= 1 ? 1 : 2;
        __atomic_store_n(&answer[device], a, __ATOMIC_RELAXED);
    }
    return a == 1;
}

extern "C" hfp4_status hfp4__moe_route_launch(const char *fn, const void *ids, int ids_int64, int64_t routed_rows,
                                              int32_t num_experts, int32_t alignment, int32_t *row_pos,
                                              int32_t *layout, int64_t layout_rows, hfp4_stream stream) {
    hfp4_current_device dev;
    HFP4_TRY(hfp4__require_sm90(fn, &dev));
    /* NOTE: many rows take the cluster kernel (T = 16384, top-6: 130 -> 23 us; T = 4096 37 -> 12;
     * bench/RESULTS.md v35); few keep one CTA, whose launch is the cheaper, as does a device that
     * cannot hold a cluster of 8 such CTAs (a small MIG slice). HFP4_MOE_ROUTE_CLUSTER_ROWS, a
     * number, overrides the bound (0: always the cluster; for the tests and comparison). */
    int64_t cluster_rows = 4096;
    const char *env = getenv("HFP4_MOE_ROUTE_CLUSTER_ROWS");
    if (env && *env) {
        char *end = NULL;
        const long long v = strtoll(env, &end, 10);
        if (end && *end == '\0' && v >= 0) cluster_rows = v;
    }
    if (routed_rows >= cluster_rows && route_cluster_fits(dev.device)) {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t config =
            route_cluster_config(num_experts, reinterpret_cast<cudaStream_t>(stream), &attr);
        HFP4_CUDA_TRY(fn, cudaLaunchKernelEx(&config, hfp4_moe_route_cluster_kernel, ids, ids_int64, routed_rows,
                                             num_experts, alignment, row_pos, layout, layout_rows));
        return HFP4_OK;
    }
    hfp4_moe_route_kernel<<<1, kRouteThreads, (size_t)num_experts * sizeof(int32_t),
                            reinterpret_cast<cudaStream_t>(stream)>>>(ids, ids_int64, routed_rows, num_experts,
                                                                      alignment, row_pos, layout, layout_rows);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}

extern "C" hfp4_status hfp4__moe_quantize_rows_launch(const char *fn, const void *x, hfp4_dtype x_dtype, int64_t k,
                                                      int64_t ldx, int32_t row_div, int64_t x_rows,
                                                      const int32_t *row_pos, int64_t routed_rows, int32_t gran_k,
                                                      uint8_t *a, int64_t lda, float *sf, int64_t layout_rows,
                                                      hfp4_stream stream) {
    (void)x_rows;
    hfp4_current_device dev;
    HFP4_TRY(hfp4__require_sm90(fn, &dev));
    /* a token's row is read and quantized once for its row_div routed rows, unless row_div is so large
     * that one CTA's share would run long: then a CTA per routed row */
    const int32_t share = row_div <= kQuantMaxShare ? row_div : 1;
    const int64_t units = (routed_rows + share - 1) / share;
    const int64_t col_blocks = (k + 8 * kQuantThreads - 1) / (8 * kQuantThreads);
    const dim3 grid((unsigned)(units < ((int64_t)1 << 30) ? units : ((int64_t)1 << 30)), /* (both grid-stride) */
                    (unsigned)(col_blocks < 65535 ? col_blocks : 65535));
    const int vec = k % 8 == 0 && ldx % 8 == 0 && (uintptr_t)x % 16 == 0 && lda % 8 == 0 && (uintptr_t)a % 8 == 0;
    (vec ? hfp4_moe_quantize_rows_kernel : hfp4_moe_quantize_rows_any_kernel)<<<
        grid, kQuantThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        x, x_dtype == HFP4_DTYPE_FP32, k, ldx, row_div, share, row_pos, routed_rows, gran_k, a, lda, sf, layout_rows);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}

extern "C" hfp4_status hfp4__moe_swiglu_quantize_rows_launch(const char *fn, const void *y, int64_t ldy, int64_t n,
                                                             hfp4_gate_up gate_up, float limit, const int32_t *row_pos,
                                                             int64_t routed_rows, int32_t gran_k, uint8_t *a,
                                                             int64_t lda, float *sf, int64_t layout_rows,
                                                             hfp4_stream stream) {
    hfp4_current_device dev;
    HFP4_TRY(hfp4__require_sm90(fn, &dev));
    const int64_t col_blocks = (n + 8 * kQuantThreads - 1) / (8 * kQuantThreads);
    const dim3 grid((unsigned)(routed_rows < ((int64_t)1 << 30) ? routed_rows : ((int64_t)1 << 30)), /* (grid-stride) */
                    (unsigned)(col_blocks < 65535 ? col_blocks : 65535));
    const int vec = n % 8 == 0 && ldy % 8 == 0 && (uintptr_t)y % 16 == 0 && lda % 8 == 0 && (uintptr_t)a % 8 == 0;
    (vec ? hfp4_moe_swiglu_quantize_rows_kernel : hfp4_moe_swiglu_quantize_rows_any_kernel)<<<
        grid, kQuantThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        (const __nv_bfloat16 *)y, ldy, n, (int)(gate_up == HFP4_GATE_UP_INTERLEAVED), limit, row_pos, routed_rows,
        gran_k, a, lda, sf, layout_rows);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}

extern "C" hfp4_status hfp4__moe_combine_launch(const char *fn, const void *y, int64_t ldy, int64_t layout_rows,
                                                int64_t n, const int32_t *row_pos, const void *weights,
                                                hfp4_dtype weights_dtype, int64_t tokens, int32_t top_k, void *out,
                                                hfp4_dtype out_dtype, int64_t ldo, hfp4_stream stream) {
    hfp4_current_device dev;
    HFP4_TRY(hfp4__require_sm90(fn, &dev));
    const int64_t col_blocks = (n + 8 * kCombineThreads - 1) / (8 * kCombineThreads), blocks = tokens * col_blocks;
    HFP4_REQUIRE(blocks < ((int64_t)1 << 31), "%s: %lld tokens x %lld columns need more than 2^31 blocks", fn,
                 (long long)tokens, (long long)n);
    const int vec = n % 8 == 0 && ldy % 8 == 0 && (uintptr_t)y % 16 == 0 && ldo % 8 == 0 && (uintptr_t)out % 16 == 0;
    hfp4_moe_combine_kernel<<<(unsigned)blocks, kCombineThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        (const __nv_bfloat16 *)y, ldy, layout_rows, n, row_pos, weights, weights_dtype == HFP4_DTYPE_FP32, tokens,
        top_k, out, out_dtype == HFP4_DTYPE_FP32, ldo, vec, (int32_t)col_blocks);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}
