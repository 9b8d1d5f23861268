/*
 * epilogue.cuh - how a consumer warpgroup writes its 64 weight rows x BT tokens of D: zeros for an
 * all-padding tile, a TMA store at the 128-token tile (tma_store.cuh), otherwise a transpose
 * through shared memory (the accumulators hold D^T) and stores coalesced along N (16 bytes per
 * store when D's rows are aligned, else element by element), or at the 8-token tile BF16 pairs
 * straight from the registers (store_tile_direct8),
 * with C added and the padding rows of the contiguous layout zeroed; and, after the balanced walk of
 * the contiguous layout, the padding tiles' rows zeroed in one pass (zero_padding_tiles).
 */
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"
#include "promote.cuh"
#include "ptx.cuh"
#include "tile_config.cuh"
#include "item_header.cuh"
#include "tma_store.cuh"
#include "work_items.cuh"

#ifndef HFP4_SM90_DIRECT8
#define HFP4_SM90_DIRECT8 1 /* the 8-token tile's epilogue without the transpose (store_tile_direct8) */
#endif

/* The warpgroup's part of an all-padding tile: wtile its 64-row weight tile, dgroup the group of D.
 * p, tile by value: see the NOTE at the kernel (fp8_fp4_gemm.cuh). */
template <int BT>
static __device__ __forceinline__ void store_zero_tile(const hfp4_sm90_gemm_params p, const sm90_tile tile,
                                                       int64_t wtile, int64_t dgroup, int tid) {
    /* all-padding tile (most tiles of a decode batch in the contiguous layout): zeros straight
     * to D, without the transpose and its barriers; 16 bytes per store when rows are aligned;
     * nothing when the caller leaves D's padding rows unspecified (d_padding ANY) */
    if (!p.d_zero_padding) return;
    if (p.d_vec) {
        const int per16 = p.d_fp32 ? 4 : 8; /* outputs per 16-byte store */
        for (int idx = tid; idx < BT * 64 / per16; idx += 128) {
            const int64_t row = tile.m0 + idx / (64 / per16), n = wtile * 64 + (idx % (64 / per16)) * per16;
            if (n >= p.n || row >= tile.zero_end) continue;
            const int64_t off = dgroup * p.d_stride_group + row * p.ldd + n;
            if (n + per16 <= p.n) {
                if (p.d_fp32) *(float4 *)((float *)p.d + off) = make_float4(0.f, 0.f, 0.f, 0.f);
                else *(uint4 *)((__nv_bfloat16 *)p.d + off) = make_uint4(0u, 0u, 0u, 0u);
            } else {
                for (int e = 0; e < per16 && n + e < p.n; e++) {
                    if (p.d_fp32) ((float *)p.d)[off + e] = 0.0f;
                    else ((__nv_bfloat16 *)p.d)[off + e] = __float2bfloat16_rn(0.0f);
                }
            }
        }
        return;
    }
    for (int idx = tid; idx < BT * 64; idx += 128) {
        const int64_t row = tile.m0 + idx / 64, n = wtile * 64 + idx % 64;
        if (n >= p.n || row >= tile.zero_end) continue;
        const int64_t off = dgroup * p.d_stride_group + row * p.ldd + n;
        if (p.d_fp32) ((float *)p.d)[off] = 0.0f;
        else ((__nv_bfloat16 *)p.d)[off] = __float2bfloat16_rn(0.0f);
    }
}

/* One element of D at offset off: sum (C added when the row is real and the problem has C), or 0 for
 * a row that is not real; BF16 or FP32 as D is */
static __device__ __forceinline__ void store_d_value(const hfp4_sm90_gemm_params &p, int64_t off, float sum, bool real) {
    float v = real ? sum : 0.0f;
    if (p.d_fp32) {
        if (real && p.c) v += ((const float *)p.c)[off];
        ((float *)p.d)[off] = v;
    } else {
        if (real && p.c) v += __bfloat162float(((const __nv_bfloat16 *)p.c)[off]);
        ((__nv_bfloat16 *)p.d)[off] = __float2bfloat16_rn(v);
    }
}

/* Whether token column c of the tile is a real row: bit c % 32 of real_mask[c / 32]. */
template <int MASKS>
static __device__ __forceinline__ bool column_is_real(const uint32_t (&real_mask)[MASKS], int c) {
    uint32_t mask = real_mask[0];
#pragma unroll
    for (int q = 1; q < MASKS; q++)
        if (c >= 32 * q) mask = real_mask[q];
    return (mask >> (c & 31)) & 1u;
}

/* Where a warpgroup's real-row mask words wait for its epilogue when the producer posted them in
 * the item's header (item_header.cuh): the padding of the transpose buffer's last row (columns
 * 64..67 of row BT - 1), which no store of the epilogue reads or writes. Threads tid < MASKS copy
 * them there at the item's start; the epilogue reads them after its first warpgroup barrier and
 * before its last, so the next item's copies cannot overtake a slow warp's reads. */
template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ uint32_t *posted_masks_slot(float *out_s, int warpgroup) {
    typedef sm90_tile_config<BT, W_FP32, MINB> cfg;
    static_assert(cfg::OUT_LD - 64 >= 4, "four mask words in the row padding");
    return (uint32_t *)(out_s + warpgroup * BT * cfg::OUT_LD + (BT - 1) * cfg::OUT_LD + 64);
}

/* The warpgroup's 64 rows x BT tokens of a computed tile: fin the thread's sums in absolute units,
 * out_s the CTA's transpose buffers (sm90_smem), d_map D's tensor map (p.d_tma), masks_posted:
 * the real-row masks wait in posted_masks_slot (item headers), else the rows' ids are read here;
 * the rest as for store_zero_tile. */
template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ void store_tile(const hfp4_sm90_gemm_params p, const CUtensorMap *d_map,
                                                  const sm90_tile tile, int64_t wtile, int64_t dgroup,
                                                  const sm90_fin<BT> fin, float *out_s, bool masks_posted,
                                                  int warpgroup, int tid, int lane, bool add_partial = false) {
    typedef sm90_tile_config<BT, W_FP32, MINB> cfg;
    const int warp_in_wg = tid / 32, g8 = lane / 4, t4 = lane % 4;
    /* ---- epilogue: transpose through shared memory, then coalesced stores along N ---- */
    /* Which rows are real: below valid_end and, in the contiguous layout, with an expert id. One
     * load per lane and 32 rows, issued before the transpose so the latency overlaps it; a ballot
     * turns them into bit masks. (Reading the id per stored element made 32 dependent loads per
     * thread and tile: ~8 % of the consumers' stall samples at T = 4096.) */
    constexpr int MASKS = (BT + 31) / 32;
    int32_t row_id[MASKS];
    if (!masks_posted) load_row_ids<BT, MASKS>(p, tile, lane, row_id);
    const uint32_t *posted = posted_masks_slot<BT, W_FP32, MINB>(out_s, warpgroup);
    float *os = out_s + warpgroup * BT * cfg::OUT_LD;
    if constexpr (BT == 128) {
        /* NOTE: a tile whose rows are all to be written (every row below min(m0 + 128, m); D's map
         * clips at m and n) goes out by TMA store from a BF16 staging buffer in the warpgroup's
         * transpose buffer: the consumers' loop of 16-byte stores, their index arithmetic and
         * masks were ~8 % of prefill (H200, V4-Flash w13 T = 16384: 574 -> 629 TFLOP/s without
         * any epilogue). Partial tiles (masked_m or a psum end inside the tile) and FP32 output or
         * C keep the stores below. */
        if (p.d_tma) {
            if (tid == 0) bulk_wait_read(); /* the previous TMA store has read the staging buffer */
            if (tile.zero_end == min(tile.m0 + (int64_t)BT, p.m)) {
                uint32_t real_mask[MASKS];
                if (!masks_posted) real_row_masks(p, row_id, real_mask);
                warpgroup_barrier<MINB == 2>(warpgroup); /* the buffer is free (thread 0 waited) */
                if (masks_posted) {
                    const uint4 m = *(const uint4 *)posted;
                    real_mask[0] = m.x, real_mask[1] = m.y, real_mask[2] = m.z, real_mask[3] = m.w;
                }
                store_tile_tma<MINB>(d_map, tile, wtile, dgroup, fin, (smem_addr(os) + 1023u) & ~1023u, real_mask,
                                     warpgroup, tid, lane);
                return;
            }
        }
    }
    warpgroup_barrier<MINB == 2>(warpgroup); /* the previous tile's stores have read os */
    {
        const int r0 = warp_in_wg * 16 + g8;
        if (add_partial) { /* the K-split's leader: the partner's sums wait at these positions (split_k.cuh) */
#pragma unroll
            for (int j = 0; j < BT / 8; j++) {
                const int c = 8 * j + 2 * t4;
                os[c * cfg::OUT_LD + r0] += fin.v[4 * j + 0];
                os[(c + 1) * cfg::OUT_LD + r0] += fin.v[4 * j + 1];
                os[c * cfg::OUT_LD + r0 + 8] += fin.v[4 * j + 2];
                os[(c + 1) * cfg::OUT_LD + r0 + 8] += fin.v[4 * j + 3];
            }
        } else
#pragma unroll
        for (int j = 0; j < BT / 8; j++) {
            const int c = 8 * j + 2 * t4;
            os[c * cfg::OUT_LD + r0] = fin.v[4 * j + 0];
            os[(c + 1) * cfg::OUT_LD + r0] = fin.v[4 * j + 1];
            os[c * cfg::OUT_LD + r0 + 8] = fin.v[4 * j + 2];
            os[(c + 1) * cfg::OUT_LD + r0 + 8] = fin.v[4 * j + 3];
        }
    }
    uint32_t real_mask[MASKS];
    if (masks_posted) {
#pragma unroll
        for (int q = 0; q < MASKS; q++) real_mask[q] = posted[q];
    } else {
        real_row_masks(p, row_id, real_mask);
    }
    warpgroup_barrier<MINB == 2>(warpgroup);
    if (p.d_vec) {
        /* 8 consecutive n per thread and pass (16-byte BF16 stores, 2 x 16 bytes for FP32): a
         * warpgroup's 64 rows x BT tokens take BT / 16 passes instead of BT / 2 element stores.
         * The host sets d_vec only when D (and C) rows and groups are 16-byte aligned. */
        for (int idx = tid; idx < BT * 8; idx += 128) {
            const int c = idx / 8, r8 = (idx % 8) * 8;
            const int64_t row = tile.m0 + c;
            const int64_t n = wtile * 64 + r8;
            if (n >= p.n || row >= tile.zero_end) continue;
            const bool real = column_is_real(real_mask, c);
            const int64_t off = dgroup * p.d_stride_group + row * p.ldd + n;
            if (n + 8 > p.n) { /* the N tail: element by element */
                for (int e = 0; e < 8 && n + e < p.n; e++) store_d_value(p, off + e, os[c * cfg::OUT_LD + r8 + e], real);
                continue;
            }
            float v[8];
            const float4 lo = *(const float4 *)(os + c * cfg::OUT_LD + r8), hi = *(const float4 *)(os + c * cfg::OUT_LD + r8 + 4);
            v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = real ? v[e] : 0.0f;
            if (p.d_fp32) {
                if (real && p.c) {
                    const float4 c0 = *(const float4 *)((const float *)p.c + off), c1 = *(const float4 *)((const float *)p.c + off + 4);
                    v[0] += c0.x, v[1] += c0.y, v[2] += c0.z, v[3] += c0.w, v[4] += c1.x, v[5] += c1.y, v[6] += c1.z, v[7] += c1.w;
                }
                *(float4 *)((float *)p.d + off) = make_float4(v[0], v[1], v[2], v[3]);
                *(float4 *)((float *)p.d + off + 4) = make_float4(v[4], v[5], v[6], v[7]);
            } else {
                if (real && p.c) {
                    const uint4 cw = *(const uint4 *)((const __nv_bfloat16 *)p.c + off);
                    const uint32_t w[4] = {cw.x, cw.y, cw.z, cw.w};
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const float2 f = __bfloat1622float2(*(const __nv_bfloat162 *)&w[e]);
                        v[2 * e] += f.x;
                        v[2 * e + 1] += f.y;
                    }
                }
                uint32_t w[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * e], v[2 * e + 1]);
                    w[e] = *(const uint32_t *)&b;
                }
                *(uint4 *)((__nv_bfloat16 *)p.d + off) = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
        return;
    }
    for (int idx = tid; idx < BT * 64; idx += 128) {
        const int c = idx / 64, rr = idx % 64;
        const int64_t row = tile.m0 + c;
        const int64_t n = wtile * 64 + rr;
        if (n >= p.n || row >= tile.zero_end) continue;
        const bool real = column_is_real(real_mask, c);
        const int64_t off = dgroup * p.d_stride_group + row * p.ldd + n;
        store_d_value(p, off, os[c * cfg::OUT_LD + rr], real);
    }
}

/* Whether the 8-token tile's warpgroup can store its slice without the transpose
 * (store_tile_direct8): BF16 D with 16-byte aligned rows (so every pair of rows is 4-byte aligned),
 * no C, and the warpgroup's 64 rows all inside N. */
template <int BT>
static __device__ __forceinline__ bool direct8_store_ok(const hfp4_sm90_gemm_params &p, int64_t wtile) {
    return HFP4_SM90_DIRECT8 && BT == 8 && p.d_vec && !p.d_fp32 && !p.c && (wtile + 1) * 64 <= p.n;
}

/* The 8-token tile's part of D straight from the registers (direct8_store_ok): a thread holds
 * tokens 2 t4 and 2 t4 + 1 of rows r0 and r0 + 8 (r0 = 16 warp + g8); lanes g8 and g8 ^ 1 swap
 * half their sums (one shuffle pair), so the even lane stores rows (r0, r0 + 1) and the odd one
 * rows (r0 + 7, r0 + 8) of both tokens as BF16 pairs: 2 stores a thread, no shared memory, no
 * barrier. real_mask: the item's real-row mask (bit c: token column c); rows at or past
 * zero_end are not written, the others that are not real get zeros.
 * NOTE: why (H200, V4-Flash masked graph, bench/RESULTS.md v21): a timing-only build without any
 * epilogue ran the decode launches 3-4 % faster (w2 T = 8 3.19 -> 3.31 TB/s); these stores in place
 * of the transpose's two warpgroup barriers and shared-memory round trip: w2 T = 32 3.73 -> 3.86,
 * the layer at T = 32 +3 %, T = 1 and 8 level. Only the carry loop's items (one-base, the decode
 * tiles' common case) take it; the others keep store_tile. */
template <int BT>
static __device__ __forceinline__ void store_tile_direct8(const hfp4_sm90_gemm_params &p, const sm90_tile &tile,
                                                          int64_t wtile, int64_t dgroup, const sm90_fin<BT> &fin,
                                                          uint32_t real_mask, int tid, int lane) {
    if constexpr (BT == 8) { /* (direct8_store_ok is false for every other tile) */
    const int g8 = lane / 4, t4 = lane % 4;
    const bool odd = (g8 & 1) != 0;
    const float rx = __shfl_xor_sync(0xFFFFFFFFu, odd ? fin.v[0] : fin.v[2], 4);
    const float ry = __shfl_xor_sync(0xFFFFFFFFu, odd ? fin.v[1] : fin.v[3], 4);
    const float pair[2][2] = {{odd ? rx : fin.v[0], odd ? fin.v[2] : rx}, {odd ? ry : fin.v[1], odd ? fin.v[3] : ry}};
    const int64_t n = wtile * 64 + (tid / 32) * 16 + g8 + (odd ? 7 : 0);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int c = 2 * t4 + h;
        const int64_t row = tile.m0 + c;
        if (row >= tile.zero_end) continue;
        const bool real = ((real_mask >> c) & 1u) != 0;
        const __nv_bfloat162 b = __floats2bfloat162_rn(real ? pair[h][0] : 0.0f, real ? pair[h][1] : 0.0f);
        *(__nv_bfloat162 *)((__nv_bfloat16 *)p.d + dgroup * p.d_stride_group + row * p.ldd + n) = b;
    }
    }
}

/* The contiguous layout's padding tiles when p.balanced == 2 (work_items.cuh: build_compute_mask):
 * the walk hands out only computing items, so the consumers (ctid: 0..255 over both warpgroups)
 * zero the padding tiles' rows of D here, a warp per row and 16-byte stores where D's rows allow
 * (p.d_vec), instead of an item, a walk step and an epilogue per padding tile. */
template <int BT>
static __device__ __forceinline__ void zero_padding_tiles(const hfp4_sm90_gemm_params &p, const int32_t *space,
                                                          int ctid) {
    const int32_t tiles_m = (int32_t)p.tiles_m, W = (tiles_m + 31) / 32;
    const int64_t rows = (int64_t)(tiles_m - space[2 * W]) * BT;
    const int warp = ctid / 32, lane = ctid % 32;
    for (int64_t rr = (int64_t)blockIdx.x * 8 + warp; rr < rows; rr += (int64_t)gridDim.x * 8) {
        const int32_t z = (int32_t)(rr / BT), r = (int32_t)(rr % BT);
        /* the z-th padding tile: words before wi hold 32 wi - prefix[wi] of them */
        int32_t lo = 0, hi = W - 1;
        while (lo < hi) {
            const int32_t mid = (lo + hi + 1) / 2;
            if (32 * mid - space[W + mid] <= z) lo = mid;
            else hi = mid - 1;
        }
        const int32_t in_word = tiles_m - 32 * lo;
        const uint32_t valid = in_word >= 32 ? 0xFFFFFFFFu : (1u << in_word) - 1u;
        const int32_t t = 32 * lo + nth_set_bit(~(uint32_t)space[lo] & valid, z - (32 * lo - space[W + lo]));
        const int64_t row = (int64_t)t * BT + r;
        if (row >= p.m) continue;
        if (BT == 8 && p.narrow == 3 && ((space[2 * W + 1 + t / 512] >> ((t / 16) % 32)) & 1) == 0)
            continue; /* a wide block's: the 128-token launch writes it (narrow_items.cuh) */
        const int64_t off = row * p.ldd;
        if (p.d_vec) {
            const int per16 = p.d_fp32 ? 4 : 8;
            for (int64_t c = (int64_t)lane * per16; c < p.n; c += 32 * per16) {
                if (c + per16 <= p.n) {
                    if (p.d_fp32) *(float4 *)((float *)p.d + off + c) = make_float4(0.f, 0.f, 0.f, 0.f);
                    else *(uint4 *)((__nv_bfloat16 *)p.d + off + c) = make_uint4(0u, 0u, 0u, 0u);
                } else {
                    for (int64_t e = c; e < p.n; e++) {
                        if (p.d_fp32) ((float *)p.d)[off + e] = 0.0f;
                        else ((__nv_bfloat16 *)p.d)[off + e] = __float2bfloat16_rn(0.0f);
                    }
                }
            }
        } else {
            for (int64_t c = lane; c < p.n; c += 32) {
                if (p.d_fp32) ((float *)p.d)[off + c] = 0.0f;
                else ((__nv_bfloat16 *)p.d)[off + c] = __float2bfloat16_rn(0.0f);
            }
        }
    }
}

