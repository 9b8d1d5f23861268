/*
 * stage_copies.cuh - what the producer puts into one pipeline stage by TMA and bulk copies: the
 * activation tile and both warpgroups' weights and weight scales of one 128-K chunk.
 */
#pragma once
#include <cuda.h>
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"
#include "ptx.cuh"
#include "tile_config.cuh"
#include "work_items.cuh"

/* Lane 0 of the producer warp that owns chunk kc of `tile`: announces the stage's TMA bytes (one
 * arrival) and issues the activation tile (TMA) and both warpgroups' weights and weight scales
 * (bulk copies, evict-first when each weight tile is read once). extra_tx: bytes of further bulk
 * copies the caller issues on the same barrier (the activation scales, when they are one block). */
template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ void issue_stage_copies(const hfp4_sm90_gemm_params &p, const CUtensorMap *a_map,
                                                          const sm90_tile &tile, int64_t kc, int s, uint8_t *a_tiles,
                                                          uint8_t *w_stages, uint8_t *ws_stages, const uint8_t *w_src,
                                                          const uint8_t *ws_src, uint64_t *bar,
                                                          uint32_t extra_tx = 0) {
    typedef sm90_tile_config<BT, W_FP32, MINB> cfg;
    mbar_arrive_expect_tx(bar, cfg::A_TILE_BYTES + cfg::W_STAGE_BYTES + cfg::WS_STAGE_BYTES + extra_tx);
    tma_load_3d(a_tiles + s * cfg::A_TILE_BYTES, a_map, bar, (int32_t)(kc * 128), tile.m0, tile.a_group);
    uint8_t *w_dst = w_stages + s * cfg::W_STAGE_BYTES, *ws_dst = ws_stages + s * cfg::WS_STAGE_BYTES;
#pragma unroll
    for (int wg = 0; wg < 2; wg++) {
        const uint8_t *w_chunk = w_src + wg * p.w_pairs * HFP4_SM90_PAIR_BYTES + kc * cfg::W_WG_BYTES;
        const uint8_t *ws_chunk = ws_src + (wg * p.w_chunks + kc) * cfg::WS_WG_BYTES;
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
