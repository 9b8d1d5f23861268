/*
 * warp_decode_stage.cuh - the warp path's (warp_decode.cu) per-unit shared state: the live units'
 * prefix over the groups, the unit's activations, their scales and the tile's weight scales staged
 * in shared memory (cp.async), and the K-split's reduction across a cluster.
 */
#pragma once
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"
#include "ptx.cuh"
#include "warp_decode_config.cuh"

/* Rows of group g the kernel computes: masked_m clamped to [0, m], or m (dense). */
static __device__ __forceinline__ int64_t wd_group_rows(const hfp4_sm90_gemm_params &p, int g) {
    int64_t rows = p.grouping == 3 /* masked */ ? (int64_t)p.layout[g] : p.m;
    return rows < 0 ? 0 : (rows > p.m ? p.m : rows);
}

/* prefix[0..groups]: the live units (tiles x token blocks of 8) before each group. All threads. */
static __device__ void wd_build_prefix(const hfp4_sm90_gemm_params &p, const wd_operands &o, int32_t *prefix) {
    __shared__ int32_t warp_sums[WD_THREADS / 32];
    const int per = (o.groups + WD_THREADS - 1) / WD_THREADS;
    const int g0 = threadIdx.x * per;
    int32_t mine = 0;
    for (int i = 0; i < per && g0 + i < o.groups; i++)
        mine += (int32_t)((wd_group_rows(p, g0 + i) + WD_TOKENS - 1) / WD_TOKENS) * o.tiles;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int32_t incl = warp_inclusive_sum(mine, lane);
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    int32_t before = incl - mine;
    for (int w = 0; w < warp; w++) before += warp_sums[w];
    for (int i = 0; i < per && g0 + i < o.groups; i++) {
        prefix[g0 + i] = before;
        before += (int32_t)((wd_group_rows(p, g0 + i) + WD_TOKENS - 1) / WD_TOKENS) * o.tiles;
    }
    if (threadIdx.x == WD_THREADS - 1) prefix[o.groups] = before;
    __syncthreads();
}

/* The unit's operands into shared memory: the activations as the tensor core reads them (per chunk
 * an 8-token x 128-byte tile, 128-byte swizzled: 16-byte block j of token r at (j ^ r) x 16, zeros
 * past K), their scales as floats ([kgroup][8 tokens], 1.0 past the activations' k-groups), the
 * tile's weight scales and chunk modes. Tokens past the unit's rows are not written: their columns
 * of D are never stored, and a column's sums use only its own token. restage_acts: the activations
 * and their scales too (not when the previous unit had the same group and tokens).
 * Split in two so that the weight ring's loads go out between them: wd_stage_issue starts the
 * copies (cp.async, asynchronous) and returns this thread's activation scales and chunk-mode bytes
 * as loaded values; wd_stage_finish stores those and waits for the copies. A first form (a load and
 * a store per word, behind the weight loads) took ~9 us at T = 1, a second (loads issued together,
 * one phase after another) ~5 us. All threads; the caller synchronizes. */
#define WD_STAGE_SCALARS 4 /* activation scales and mode bytes a thread holds between the halves */

/* The activation-scale k-groups of chunks [cb, ce) (one a chunk with 1x128 scales, four with 1x32):
 * the first and how many; staged value i is token i / n of k-group first + i % n */
typedef struct wd_kgroups {
    int first, n;
} wd_kgroups;
static __device__ __forceinline__ wd_kgroups wd_part_kgroups(const wd_operands &o, int chunks, int cb, int ce) {
    const int per_chunk = o.kgroups / chunks;
    const wd_kgroups k = {cb * per_chunk, (ce - cb) * per_chunk};
    return k;
}

typedef struct wd_stage_regs {
    float as[WD_STAGE_SCALARS];
    uint32_t mode[WD_STAGE_SCALARS];
} wd_stage_regs;

template <bool W_FP32>
static __device__ __forceinline__ void wd_stage_issue(const hfp4_sm90_gemm_params &p, const wd_operands &o, uint8_t *act,
                                                      void *wsc, int64_t group, int64_t tile, int64_t tok_base, int ntok,
                                                      bool restage_acts, int cb, int ce, wd_stage_regs &r) {
    /* (this CTA's chunks [cb, ce) of the unit, at their places of the whole unit's carve-up) */
    const int chunks = (int)p.w_chunks, blocks = (ce - cb) * 8; /* 16-byte blocks of a token (K <= WD_MAX_K) */
    if (restage_acts) {
        const uint8_t *rows = o.a + group * o.a_stride_group + tok_base * o.a_ld;
        for (int i = threadIdx.x; i < ntok * blocks; i += WD_THREADS) {
            const int t = i / blocks, b = cb * 8 + (i - t * blocks), c = b >> 3, j = b & 7;
            const bool in = (int64_t)b * 16 < p.k;
            cp_async_16_zfill(act + c * 1024 + t * 128 + ((j ^ t) * 16), in ? rows + t * o.a_ld + b * 16 : rows, in);
        }
    }
    /* the tile's weight scales (contiguous: [chunks][64 rows] words or float4s) */
    constexpr int PER_CHUNK = W_FP32 ? 64 : 16; /* 16-byte copies a chunk */
    const uint4 *src = W_FP32 ? (const uint4 *)((const float4 *)p.w_scales + group * p.w_scale_group_elems + tile * chunks * 64)
                              : (const uint4 *)((const uint32_t *)p.w_scales + group * p.w_scale_group_elems + tile * chunks * 64);
    for (int i = cb * PER_CHUNK + threadIdx.x; i < ce * PER_CHUNK; i += WD_THREADS) cp_async_16_zfill((uint4 *)wsc + i, src + i, true);
    const wd_kgroups kg = wd_part_kgroups(o, chunks, cb, ce);
    const int nas = restage_acts ? ntok * kg.n : 0;
#pragma unroll
    for (int q = 0; q < WD_STAGE_SCALARS; q++) {
        const int i = threadIdx.x + q * WD_THREADS;
        if (i < nas) {
            const int t = i / kg.n, g = kg.first + (i - t * kg.n);
            r.as[q] = g < p.a_k_groups ? load_a_scale(p, group, tok_base + t, g) : 1.0f;
        }
        if (i < ce - cb) r.mode[q] = p.w_modes[(group * p.w_tiles + tile) * chunks + cb + i];
    }
}

static __device__ __forceinline__ void wd_stage_finish(const hfp4_sm90_gemm_params &p, const wd_operands &o, float *as,
                                                       uint8_t *modes, int64_t group, int64_t tok_base, int ntok,
                                                       bool restage_acts, int cb, int ce, const wd_stage_regs &r) {
    const wd_kgroups kg = wd_part_kgroups(o, (int)p.w_chunks, cb, ce);
    const int nas = restage_acts ? ntok * kg.n : 0;
#pragma unroll
    for (int q = 0; q < WD_STAGE_SCALARS; q++) {
        const int i = threadIdx.x + q * WD_THREADS;
        if (i < nas) {
            const int t = i / kg.n, g = kg.first + (i - t * kg.n);
            as[g * 8 + t] = r.as[q];
        }
        if (i < ce - cb) modes[cb + i] = (uint8_t)r.mode[q];
    }
    /* the rest, when a unit has more than the registers hold (long K, 1x32 scales, many tokens) */
    for (int i = threadIdx.x + WD_STAGE_SCALARS * WD_THREADS; i < nas; i += WD_THREADS) {
        const int t = i / kg.n, g = kg.first + (i - t * kg.n);
        as[g * 8 + t] = g < p.a_k_groups ? load_a_scale(p, group, tok_base + t, g) : 1.0f;
    }
    static_assert(WD_MAX_K / 128 <= WD_STAGE_SCALARS * WD_THREADS, "the chunk modes fit the registers");
    cp_async_wait_all();
}


/* The K-split's reduction of one unit (the kernel says when it splits): a partner (sub > 0) waits
 * until its slot at the leader is free (FREE: the leader's threads have read the previous unit's),
 * writes its sums there, each thread the 4 of its own fragment (st.shared::cluster), and arrives on
 * the leader's POSTED (release, cluster scope); it stores nothing (returns false). The leader waits
 * for POSTED (acquire), adds the slots in the partners' order (FP32, deterministic; not bit-identical
 * to an unsplit launch, whose chunks add in another order), frees them, and stores (returns true).
 * Both sides count the same units, so one phase bit a thread serves both barriers. No global
 * workspace and no atomics. */
static __device__ __forceinline__ bool wd_reduce(float (&fin)[4], float4 *red, uint64_t *red_bars, int sub,
                                                 uint32_t leader, int parts, uint32_t &red_phase) {
    const uint32_t phase = red_phase;
    red_phase ^= 1;
    if (sub != 0) {
        mbar_wait_cluster(&red_bars[1], phase ^ 1);
        st_cluster_v4_f32(cluster_map(smem_addr(&red[(sub - 1) * WD_THREADS + threadIdx.x]), leader), fin[0], fin[1], fin[2],
                          fin[3]);
        mbar_arrive_cluster(cluster_map(smem_addr(&red_bars[0]), leader));
        return false;
    }
    mbar_wait_cluster(&red_bars[0], phase);
    for (int j = 1; j < parts; j++) {
        const float4 v = red[(j - 1) * WD_THREADS + threadIdx.x];
        fin[0] += v.x;
        fin[1] += v.y;
        fin[2] += v.z;
        fin[3] += v.w;
    }
    for (int j = 1; j < parts; j++) mbar_arrive_cluster(cluster_map(smem_addr(&red_bars[1]), leader + (uint32_t)j));
    return true;
}
