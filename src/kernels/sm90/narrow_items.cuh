/*
 * narrow_items.cuh - the 128-token tile's narrow items: a tile whose computed rows end within its
 * first 8, 32, 64 or 96 token columns computes only those (and loads only 8 activation rows where
 * they end within 8); and the narrow-block split that sends such blocks of the contiguous layout to
 * the 8-token tile instead (p.narrow).
 *
 * Why: DeepGEMM's contiguous API has no expected_m, so the plan sizes the token tile from m / groups,
 * padding rows counted; at decode (transformers' allocation: each routed expert's few rows padded
 * to 128) that is the 128-token tile, which loaded and multiplied all 128 rows of every segment:
 * V4-Flash w13 T = 32 / 128 ran at 1.74 / 1.47 TB/s against 3.64 / 3.69 with the hint's 8-token
 * tile (H200, bench/RESULTS.md v17-v18). The host cannot tell decode from prefill by m alone (a
 * prefill that pads each expert exactly to 128 rows has the same m / groups), so each item decides
 * on the device, from its own rows: where they end (narrow_tile below), the producer loads 8
 * activation rows a chunk (a TMA map whose box is 8 rows) instead of 128, and the consumers issue
 * m64n8, m64n32, m64n64 or m64n96 wgmmas into the first columns of the tile's accumulators; the
 * rest stay zero, and the epilogue writes those rows as the padding they are.
 * The consumers pick the width from any item's valid_end (a masked group's or psum tile's end, a
 * dense tail), where the producer has loaded at least those rows: so HFP4_SM90_NARROW=0 turns off
 * the producer's narrowing, the 8-row loads and the split, not the narrow wgmmas of short tiles.
 * The split (p.narrow 2 and 3) hands a block whose split row (8, 16 or 32) is padding to the
 * 8-token tile, whose tiles follow DeepGEMM's contract: a tile whose first row is padding is all
 * padding (each segment's real rows first, then its padding). A layout with a real row after a
 * padding row 8k of such a block (outside that contract) has those rows written as zeros, as with
 * the 8-token tile a hint picks; the 128-token tile alone (no split, m > 8 x
 * HFP4_SM90_SPLIT_MAX_TILES) computes them.
 * NOTE: the split row is the plan's (sm90_plan.c: hfp4__sm90_split_row): 32 (blocks of up to 32
 * rows as up to four 8-token items) for experts of at most 2 MB of weights, else 16 or 8 as the
 * launches find the blocks (work_items.cuh: split_row_auto). With row 8 the
 * one expert in ~256 with 9+ rows at T = 128 leaves the 128-token launch an item of 32 chunks to
 * stream alone after the 8-token launch (ncu, TP8 w13 T = 128: 107 + 24 us against ~100 hinted),
 * and row 32 fixed that (TP8 w13 T = 128 / 512: 2.06 / 1.58 -> 2.46 / 1.73 TB/s); but a two-tile
 * block streams its weights twice from the 8-token tile, which costs large experts more than it
 * saves (V4-Flash w13 T = 512: 2.33 -> 2.06 TB/s, and the same with the weights kept in L2,
 * HFP4_SM90_SPLIT_EVICT_FIRST=0; T = 8..128 within +-3 %) (H200, bench/RESULTS.md v18, v19).
 */
#pragma once
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"
#include "tile_config.cuh"
#include "work_items.cuh"

#ifndef HFP4_SM90_NARROW_BT
#define HFP4_SM90_NARROW_BT 128 /* the tile with narrow items (0 builds none, for A/Bs) */
#endif

/* Token columns an item computes when its computed rows are [m0, m0 + rows): 8, 32, 64, 96 or the
 * whole 128-token tile (64 and 96: a group's last tile in prefill, e.g. V4-Flash at T = 4096 with
 * ~96 rows an expert, one tile each; H200, bench/RESULTS.md v19: w13 T = 4096 +6...+9 %, no hint
 * T = 2048 +26 %; the G32 kernels promote a 96-column item one k32 step at a time, as 128). */
template <int BT>
static __device__ __forceinline__ int narrow_width(int32_t rows) {
    if constexpr (BT == 128) return rows <= 8 ? 8 : rows <= 32 ? 32 : rows <= 64 ? 64 : rows <= 96 ? 96 : BT;
    else return rows <= 8 ? 8 : rows <= 32 ? 32 : BT;
}

/* Activation rows a chunk of such an item loads: 8, or the whole tile (the consumers may still
 * compute 32 columns of a whole tile). NOTE: a 32-row class for the loads too (four 8-row boxes)
 * made the consumers of the 128-token tile spill (~116 bytes: ptxas, not the producer's registers),
 * as did the row count held apart from tile.compute (narrow_tile). */
template <int BT>
static __device__ __forceinline__ int narrow_load_rows(int32_t rows) {
    return rows <= 8 ? 8 : BT;
}

/* Whether this kernel's items may be narrow: the tile, the launch (p.narrow: contiguous or psum,
 * plan) and item headers (the consumers take the narrowed tile from the producer's header) */
template <int BT>
static __device__ __forceinline__ bool narrow_items_on(const hfp4_sm90_gemm_params &p, bool headers) {
    return BT == HFP4_SM90_NARROW_BT && p.narrow != 0 && headers;
}

/* The producer's view of a resolved tile at the narrow tile: a computing contiguous tile's rows
 * past its last real row (expert id in [0, groups), as the epilogue's real-row masks say) are
 * padding, so valid_end moves down to just past that row: the loads, the wgmmas and the epilogue's
 * computed rows stop there and the rest is written as zeros (as before: those rows were not real).
 * psum tiles already end at their group's end (resolve_tile). One load per lane and 32 rows, by
 * the whole warp; every producer warp computes the same tile. Then tile.compute (0 or 1) becomes
 * the activation rows each chunk loads (stage_a_rows): 0, or 8 or BT.
 * NOTE: the row count rides in tile.compute because the 128-token tile's producer has no register
 * to spare (88): the count held in a variable of its own, or recomputed from the tile at each
 * chunk, spilled 116-124 bytes. */
template <int BT>
static __device__ __forceinline__ void narrow_tile(const hfp4_sm90_gemm_params &p, sm90_tile &t, bool narrow, int lane) {
    if constexpr (BT == HFP4_SM90_NARROW_BT) {
        if (narrow && p.grouping == HFP4_K_CONTIGUOUS && t.compute) {
            int32_t id[BT / 32];
#pragma unroll
            for (int q = 0; q < BT / 32; q++) {
                const int64_t row = t.m0 + 32 * q + lane;
                id[q] = row < t.valid_end ? p.layout[row] : -1;
            }
            int32_t end = t.m0;
#pragma unroll
            for (int q = 0; q < BT / 32; q++) {
                const uint32_t real = __ballot_sync(0xFFFFFFFFu, id[q] >= 0 && id[q] < p.num_groups);
                if (real) end = t.m0 + 32 * q + 32 - __clz((int)real);
            }
            t.valid_end = end; /* >= m0 + 1: a computing tile's first row is real */
        }
        t.compute = !t.compute ? 0 : narrow ? narrow_load_rows<BT>(t.valid_end - t.m0) : BT;
    }
}

/* The activation rows a stage of the producer's tile loads (narrow_tile): the whole tile but at the
 * narrow tile, where tile.compute holds them */
template <int BT>
static __device__ __forceinline__ int stage_a_rows(const sm90_tile &tile) {
    if constexpr (BT == HFP4_SM90_NARROW_BT) return tile.compute;
    else return BT;
}
