/*
 * item_header.cuh - the item header: what the producer warp that publishes an item's first chunk
 * tells the consumers about the item, written into that chunk's stage before the stage is
 * published: the resolved tile, each consumer warpgroup's chunk-mode decision and the tile's
 * real-row masks; after the CTA's last item, a header that only says "end".
 *
 * NOTE: why: every consumer item began with the walk, the tile's resolution, a global read of the
 * chunk modes and their vote (and ended with a global read of the rows' expert ids for the
 * epilogue's masks): serial, latency-bound steps on the critical path of both consumer
 * warpgroups while the tensor cores idle (make DIAG=1, bench/RESULTS.md v10: ~1600 cycles an item
 * at the 128-token tile, ~2300 at the decode tiles, hooks included). The producer does the same
 * walk and resolution anyway and runs up to STAGES chunks ahead: it issues the item's first stage
 * loads, then its global reads for the header, so their latency hides behind the loads in flight.
 * The consumers then only read 48 bytes beside the stage they wait for anyway.
 *
 * Where: a slot per stage in a region of its own (tile_config.cuh: HEADER_SLOT) wherever that costs
 * no pipeline stage; where it would (the 8-token tile at two CTAs per SM, the 64-token tile with
 * FP32 weight scales), k-groups 1..3's activation-scale slots, which only 1x128 scales leave free:
 * there, under 1x32 scales, the consumers walk and resolve as the producer does (run_consumers).
 * An all-padding tile (the contiguous layout's padding past a segment, when the walk hands it out)
 * has no chunks: its header comes in a stage of its own, which the consumers release at once.
 */
#pragma once
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"
#include "tile_config.cuh"
#include "work_items.cuh"

#define HFP4_SM90_HDR_END 1u                                /* no more items: the consumers stop   */
#define HFP4_SM90_HDR_ZERO 0x100u                           /* an all-padding tile: zeros, no chunks */
#define HFP4_SM90_HDR_ONE_BASE(wg) (2u << (2 * (wg)))       /* warpgroup wg's tile: all one-base    */
#define HFP4_SM90_HDR_ALL_FOLDED(wg) (4u << (2 * (wg)))     /* warpgroup wg's tile: all folded      */

typedef struct __align__(16) sm90_item_header {
    int32_t n_tile, m0, valid_end, zero_end; /* sm90_tile's fields (compute: no HFP4_SM90_HDR_ZERO) */
    int32_t expert, a_group;
    uint32_t flags;                          /* HFP4_SM90_HDR_*                                  */
    uint32_t unused;
    uint32_t real_mask[4];                   /* token column c is a real row: bit c % 32 of word c / 32 */
} sm90_item_header;

/* Stage s's header: slot s of the header region after all stages' activation scales
 * (cfg::HEADER_SLOT), else after the stage's k-group 0 scales (16-byte aligned: a stage's scales
 * start 16-aligned, BT floats a k-group) */
template <int BT, bool W_FP32, int MINB, bool G32>
static __device__ __forceinline__ sm90_item_header *item_header_slot(float *a_scale_s, int s) {
    typedef sm90_tile_config<BT, W_FP32, MINB, G32> cfg;
    static_assert(cfg::HEADER_BYTES == (int)sizeof(sm90_item_header), "the header's slot");
    static_assert(cfg::HEADER_SLOT || 3 * BT * 4 >= (int)sizeof(sm90_item_header), "the header must fit k-groups 1..3's slots");
    if constexpr (cfg::HEADER_SLOT)
        return (sm90_item_header *)(a_scale_s + cfg::STAGES * (cfg::AS_STAGE_BYTES / 4)) + s;
    else return (sm90_item_header *)(a_scale_s + s * (cfg::AS_STAGE_BYTES / 4) + BT);
}

/* Whether the items of a launch come with headers: always where a stage has a header slot of its
 * own, else only with 1x128 activation scales (k-groups 1..3's slots free) */
template <int BT, bool W_FP32, int MINB, bool G32>
static __device__ __forceinline__ bool item_headers_on(bool gran32) {
    return sm90_tile_config<BT, W_FP32, MINB, G32>::HEADER_SLOT || !gran32;
}

/* The expert id (contiguous) or 0 of token column 32 q + lane of the tile, for q < MASKS, or -1
 * where the column is past valid_end or the tile: one load per lane and 32 columns. */
template <int BT, int MASKS>
static __device__ __forceinline__ void load_row_ids(const hfp4_sm90_gemm_params &p, const sm90_tile &tile, int lane,
                                                    int32_t (&row_id)[MASKS]) {
#pragma unroll
    for (int q = 0; q < MASKS; q++) {
        const int c = 32 * q + lane;
        const int64_t row = tile.m0 + c;
        row_id[q] = -1;
        if (c < BT && row < tile.valid_end) row_id[q] = p.grouping == HFP4_K_CONTIGUOUS ? p.layout[row] : 0;
    }
}

/* Which token columns of the tile are real rows, as bit masks (column c: bit c % 32 of mask c / 32),
 * from each lane's row ids (load_row_ids). */
template <int MASKS>
static __device__ __forceinline__ void real_row_masks(const hfp4_sm90_gemm_params &p, const int32_t (&row_id)[MASKS],
                                                      uint32_t (&real_mask)[MASKS]) {
#pragma unroll
    for (int q = 0; q < MASKS; q++) real_mask[q] = __ballot_sync(0xFFFFFFFFu, row_id[q] >= 0 && row_id[q] < p.num_groups);
}

/* The producer warp that publishes a computing item's first chunk, all lanes, in two parts: the
 * global reads the header needs (read_item_header_data: the rows' ids and each warpgroup's first 32
 * chunk modes), issued after the stage's loads, then (finish_item_header) the flags
 * (each warpgroup's chunk-mode decision: one-base when every mode byte, one per chunk, is one-base
 * and not per-32, all folded when none is per-32; consumer_pipelined.cuh) and the real-row masks. */
template <int BT>
struct sm90_header_reads {
    int32_t row_id[(BT + 31) / 32];
    uint32_t mode0, mode1; /* chunk `lane`'s mode bytes of the two warpgroups' tiles, or neutral */
};

/* the two warpgroups' tiles' mode bytes, consecutive: tile 2 n_tile's chunks, then 2 n_tile + 1's */
static __device__ __forceinline__ const uint8_t *tile_pair_modes(const hfp4_sm90_gemm_params &p, const sm90_tile &tile,
                                                                 int64_t chunks) {
    return p.w_modes + ((int64_t)tile.expert * p.w_tiles + tile.n_tile * 2) * chunks;
}

template <int BT, bool W_FP32, bool G32 = false>
static __device__ __forceinline__ void read_item_header_data(const hfp4_sm90_gemm_params &p, const sm90_tile &tile,
                                                             int64_t chunks, bool gran32, int lane,
                                                             sm90_header_reads<BT> &r) {
    load_row_ids<BT, (BT + 31) / 32>(p, tile, lane, r.row_id);
    r.mode0 = r.mode1 = HFP4_SM90_MODE_ONE_BASE; /* neutral in the votes: folded and one-base */
    if (!W_FP32 && (!gran32 || G32)) {
        const uint8_t *modes = tile_pair_modes(p, tile, chunks);
        if (lane < chunks) {
            r.mode0 = __ldg(modes + lane);
            r.mode1 = __ldg(modes + chunks + lane);
        }
    }
}

template <int BT, bool W_FP32, bool G32 = false>
static __device__ __forceinline__ void finish_item_header(const hfp4_sm90_gemm_params &p, const sm90_tile &tile,
                                                          int64_t chunks, bool gran32, int lane,
                                                          const sm90_header_reads<BT> &r, uint32_t &flags,
                                                          uint32_t (&real_mask)[(BT + 31) / 32]) {
    flags = 0; /* (FP32 weight scales: every chunk goes the general path; 1x32 activation scales: the
                * general path, but in G32 kernels, whose consumers use one-base: consumer.cuh) */
    if (!W_FP32 && (!gran32 || G32)) {
        const uint8_t *modes = tile_pair_modes(p, tile, chunks);
        uint32_t any0 = r.mode0, all0 = r.mode0, any1 = r.mode1, all1 = r.mode1;
#pragma unroll 1 /* (K > 4096 only; unrolled, the 48-register producer of the 8-token tile spilled) */
        for (int32_t c = lane + 32; c < (int32_t)chunks; c += 32) {
            const uint32_t m0 = __ldg(modes + c), m1 = __ldg(modes + chunks + c);
            any0 |= m0;
            all0 &= m0;
            any1 |= m1;
            all1 &= m1;
        }
        const bool folded0 = !__any_sync(0xFFFFFFFFu, (any0 & HFP4_SM90_MODE_PER32) != 0);
        const bool folded1 = !__any_sync(0xFFFFFFFFu, (any1 & HFP4_SM90_MODE_PER32) != 0);
        const bool base0 = folded0 && __all_sync(0xFFFFFFFFu, (all0 & HFP4_SM90_MODE_ONE_BASE) != 0);
        const bool base1 = folded1 && __all_sync(0xFFFFFFFFu, (all1 & HFP4_SM90_MODE_ONE_BASE) != 0);
        flags = (folded0 ? HFP4_SM90_HDR_ALL_FOLDED(0) : 0u) | (base0 ? HFP4_SM90_HDR_ONE_BASE(0) : 0u) |
                (folded1 ? HFP4_SM90_HDR_ALL_FOLDED(1) : 0u) | (base1 ? HFP4_SM90_HDR_ONE_BASE(1) : 0u);
    }
    real_row_masks<(BT + 31) / 32>(p, r.row_id, real_mask);
}

/* One lane writes the header of a computing item (before its arrival on the stage's full barrier,
 * which orders the writes before the consumers' reads) */
template <int MASKS>
static __device__ __forceinline__ void post_item_header(sm90_item_header *h, const sm90_tile &t, uint32_t flags,
                                                        const uint32_t (&real_mask)[MASKS]) {
    *(int4 *)h = make_int4(t.n_tile, t.m0, t.valid_end, t.zero_end);
    *(int4 *)&h->expert = make_int4(t.expert, t.a_group, (int32_t)flags, 0);
    uint32_t m[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int q = 0; q < MASKS; q++) m[q] = real_mask[q];
    *(uint4 *)h->real_mask = make_uint4(m[0], m[1], m[2], m[3]);
}

/* A consumer thread reads the header of the stage it waited for: the tile, and the flags returned */
static __device__ __forceinline__ uint32_t read_item_header(const sm90_item_header *h, sm90_tile &t) {
    const int4 a = *(const int4 *)h;
    const int4 b = *(const int4 *)&h->expert;
    t.n_tile = a.x;
    t.m0 = a.y;
    t.valid_end = a.z;
    t.zero_end = a.w;
    t.expert = b.x;
    t.a_group = b.y;
    t.compute = (b.z & HFP4_SM90_HDR_ZERO) == 0;
    return (uint32_t)b.z;
}
