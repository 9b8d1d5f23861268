/*
 * stage_copies.cuh - what the producer puts into one pipeline stage by TMA and bulk copies: the
 * activation tile and both warpgroups' weights and weight scales of one 128-K chunk.
 */
#pragma once
#include <cuda.h>
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"
#include "narrow_items.cuh"
#include "ptx.cuh"
#include "tile_config.cuh"
#include "work_items.cuh"

/* The weights and weight scales of the tile's first 64-row weight tile (2 n_tile; the second follows
 * at the offsets issue_stage_loads adds) */
static __device__ __forceinline__ const uint8_t *tile_weights(const hfp4_sm90_gemm_params &p, const sm90_tile &tile) {
    return p.w + (int64_t)tile.expert * p.w_group_bytes + (int64_t)tile.n_tile * 2 * p.w_pairs * HFP4_SM90_PAIR_BYTES;
}
template <bool W_FP32>
static __device__ __forceinline__ const uint8_t *tile_weight_scales(const hfp4_sm90_gemm_params &p, const sm90_tile &tile,
                                                                    int64_t chunks) {
    return (const uint8_t *)p.w_scales +
           ((int64_t)tile.expert * p.w_scale_group_elems + (int64_t)tile.n_tile * 2 * chunks * 64) * (W_FP32 ? 16 : 4);
}

/* Warpgroup wg's weights and weight scales of chunk kc in a tile's (tile_weights, tile_weight_scales) */
template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ const uint8_t *chunk_weights(const hfp4_sm90_gemm_params &p, const uint8_t *w_src,
                                                               int wg, int64_t kc) {
    return w_src + wg * p.w_pairs * HFP4_SM90_PAIR_BYTES + kc * sm90_tile_config<BT, W_FP32, MINB>::W_WG_BYTES;
}
template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ const uint8_t *chunk_weight_scales(const hfp4_sm90_gemm_params &p,
                                                                     const uint8_t *ws_src, int wg, int64_t kc) {
    return ws_src + (wg * p.w_chunks + kc) * sm90_tile_config<BT, W_FP32, MINB>::WS_WG_BYTES;
}

/* The activation tile of chunk kc of `tile` into stage s by TMA, completing on bar.
 * a_rows = 8 < BT (a narrow item, narrow_items.cuh: stage_a_rows): only the tile's first 8 activation
 * rows, by the map whose box is 8 rows (a_narrow_map), where the whole tile's box puts them (128B
 * swizzle: 8 rows of 128 bytes are one 1 KB swizzle atom), and the rest of the stage's fixed
 * expect_tx (issue_stage_copies) counted as arrived. */
template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ void issue_stage_activations(const CUtensorMap *a_map, const CUtensorMap *a_narrow_map,
                                                               int a_rows, const sm90_tile &tile, int64_t kc, int s,
                                                               uint8_t *a_tiles, uint64_t *bar) {
    typedef sm90_tile_config<BT, W_FP32, MINB> cfg;
    uint8_t *a_dst = a_tiles + s * cfg::A_TILE_BYTES;
    if (a_rows == BT) {
        tma_load_3d(a_dst, a_map, bar, (int32_t)(kc * 128), tile.m0, tile.a_group);
    } else {
        tma_load_3d(a_dst, a_narrow_map, bar, (int32_t)(kc * 128), tile.m0, tile.a_group);
        mbar_complete_tx(bar, (BT - 8) * 128); /* the rows not loaded */
    }
}

/* Both warpgroups' weights and weight scales of chunk kc (bulk copies, evict-first when each weight
 * tile is read once) into stage s, completing on bar */
template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ void issue_stage_weights(const hfp4_sm90_gemm_params &p, int64_t kc, int s,
                                                           uint8_t *w_stages, uint8_t *ws_stages, const uint8_t *w_src,
                                                           const uint8_t *ws_src, uint64_t *bar) {
    typedef sm90_tile_config<BT, W_FP32, MINB> cfg;
    uint8_t *w_dst = w_stages + s * cfg::W_STAGE_BYTES, *ws_dst = ws_stages + s * cfg::WS_STAGE_BYTES;
#pragma unroll
    for (int wg = 0; wg < 2; wg++) {
        const uint8_t *w_chunk = chunk_weights<BT, W_FP32, MINB>(p, w_src, wg, kc);
        const uint8_t *ws_chunk = chunk_weight_scales<BT, W_FP32, MINB>(p, ws_src, wg, kc);
        if (p.w_evict_first) {
            const uint64_t policy = l2_policy_evict_first();
            bulk_load_hint(w_dst + wg * cfg::W_WG_BYTES, w_chunk, cfg::W_WG_BYTES, bar, policy);
            bulk_load_hint(ws_dst + wg * cfg::WS_WG_BYTES, ws_chunk, cfg::WS_WG_BYTES, bar, policy);
        } else {
            bulk_load(w_dst + wg * cfg::W_WG_BYTES, w_chunk, cfg::W_WG_BYTES, bar);
            bulk_load(ws_dst + wg * cfg::WS_WG_BYTES, ws_chunk, cfg::WS_WG_BYTES, bar);
        }
    }
}

/* The activation tile and, unless weights_issued (an early start's first round: producer.cuh), both
 * warpgroups' weights and weight scales of chunk kc of `tile` into stage s, completing on bar */
template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ void issue_stage_loads(const hfp4_sm90_gemm_params &p, const CUtensorMap *a_map,
                                                         const CUtensorMap *a_narrow_map, int a_rows,
                                                         const sm90_tile &tile, int64_t kc, int s, uint8_t *a_tiles,
                                                         uint8_t *w_stages, uint8_t *ws_stages, const uint8_t *w_src,
                                                         const uint8_t *ws_src, uint64_t *bar, bool weights_issued = false) {
#ifdef HFP4_DIAG_FEW_LOADS
    /* (timing-only builds, results wrong on purpose: an item's chunks past the first STAGES reuse
     * the stage as the earlier chunk left it, real data without the memory traffic) */
    typedef sm90_tile_config<BT, W_FP32, MINB> cfg;
    if (kc >= cfg::STAGES) {
#if HFP4_DIAG_FEW_LOADS == 2 /* (=2: the activation tiles only; the weights still copied) */
        mbar_complete_tx(bar, cfg::A_TILE_BYTES);
        if (!weights_issued) issue_stage_weights<BT, W_FP32, MINB>(p, kc, s, w_stages, ws_stages, w_src, ws_src, bar);
#else
        mbar_complete_tx(bar, cfg::A_TILE_BYTES + (weights_issued ? 0 : cfg::W_STAGE_BYTES + cfg::WS_STAGE_BYTES));
#endif
        return;
    }
#endif
    issue_stage_activations<BT, W_FP32, MINB>(a_map, a_narrow_map, a_rows, tile, kc, s, a_tiles, bar);
    if (!weights_issued) issue_stage_weights<BT, W_FP32, MINB>(p, kc, s, w_stages, ws_stages, w_src, ws_src, bar);
}

/* One elected lane (elect_one_sync) of the producer warp that owns chunk kc of `tile`: announces
 * the stage's TMA bytes (one arrival) and issues the stage's loads (issue_stage_loads), unless
 * loads_issued: an item's first chunk whose loads went out before its header (producer.cuh), and
 * without the weights when weights_issued (an early start's first round, producer.cuh).
 * extra_tx: bytes of further bulk copies the caller issues on the same barrier (the activation
 * scales, when they are one block).
 * NOTE: copies that complete before the expect_tx arrival are fine: the barrier's tx-count may go
 * below zero, and the phase cannot complete before this lane's arrival. */
template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ void issue_stage_copies(const hfp4_sm90_gemm_params &p, const CUtensorMap *a_map,
                                                          const CUtensorMap *a_narrow_map,
                                                          const sm90_tile &tile, int64_t kc, int s, uint8_t *a_tiles,
                                                          uint8_t *w_stages, uint8_t *ws_stages, const uint8_t *w_src,
                                                          const uint8_t *ws_src, uint64_t *bar, bool loads_issued,
                                                          uint32_t extra_tx = 0, bool weights_issued = false) {
    typedef sm90_tile_config<BT, W_FP32, MINB> cfg;
    mbar_arrive_expect_tx(bar, cfg::A_TILE_BYTES + cfg::W_STAGE_BYTES + cfg::WS_STAGE_BYTES + extra_tx);
    if (!loads_issued)
        issue_stage_loads<BT, W_FP32, MINB>(p, a_map, a_narrow_map, stage_a_rows<BT>(tile), tile, kc, s, a_tiles, w_stages, ws_stages,
                                            w_src, ws_src, bar, weights_issued);
}
