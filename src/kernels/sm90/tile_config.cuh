/*
 * tile_config.cuh - compile-time shape of one SM90 FP8 x FP4 CTA: pipeline stages, shared memory and
 * the setmaxnreg register split, per token tile (BT), weight-scale storage and CTAs per SM; and the
 * carve-up of the shared memory (offsets, sm90_smem).
 */
#pragma once
#include <stdint.h>

#include "../../weights/sm90_layout.h"
#include "fp8_fp4_gemm_params.h"

/* hfp4_grouping values, repeated here for device code */
#define HFP4_K_DENSE 0
#define HFP4_K_CONTIGUOUS 1
#define HFP4_K_PSUM 2
#define HFP4_K_MASKED 3

#ifndef HFP4_SM90_G32_MAX_BT
#define HFP4_SM90_G32_MAX_BT 128 /* 1x32 activation scales' look-ahead loop up to this tile: all (consumer_pipelined.cuh) */
#endif
#ifndef HFP4_SM90_G32_HEADER_SLOT
#define HFP4_SM90_G32_HEADER_SLOT 1 /* G32 kernels trade a stage for item headers where they must (below) */
#endif
#define HFP4_SM90_DYN_RING 16 /* dynamic_walk.cuh's ring: more slots than items a producer warp can lag */

/* MINB = CTAs per SM the kernel is built for: 1, or 2 for the 8-token decode tile (larger tiles
 * spill in 96 registers), which trades registers for a second resident CTA: twice the warps to hide
 * the consumers' instruction latencies.
 *
 * One pipeline stage holds everything one 128-K chunk needs: the activation tile (TMA), both
 * warpgroups' weights (2 x 4 KB bulk copies), their weight scales (bulk copies) and the
 * activation scales. As many stages as shared memory allows
 * (up to 12): decode lives on bytes in flight, and 8 KB of weights per stage puts 40-96 KB per SM in
 * flight where Little's law asks for ~30 KB. */
template <int BT, bool W_FP32, int MINB = 1, bool G32 = false>
struct sm90_tile_config {
    static_assert(MINB == 1 || (MINB == 2 && BT <= 8), "two CTAs per SM only for the 8-token tile");
    static constexpr int A_TILE_BYTES = BT * 128;
    static constexpr int W_WG_BYTES = 2 * HFP4_SM90_PAIR_BYTES;         /* 64 rows x 128 K of FP4 = 4 KB */
    static constexpr int W_STAGE_BYTES = 2 * W_WG_BYTES;
    static constexpr int WS_WG_BYTES = W_FP32 ? 64 * 16 : 64 * 4;        /* a warpgroup's scales per chunk */
    static constexpr int WS_STAGE_BYTES = 2 * WS_WG_BYTES;
    static constexpr int AS_STAGE_BYTES = 4 * BT * 4;                    /* up to 4 k-groups x BT floats  */
    static constexpr int DATA_STAGE_BYTES = A_TILE_BYTES + W_STAGE_BYTES + WS_STAGE_BYTES + AS_STAGE_BYTES;
    static constexpr int HEADER_BYTES = 48;                              /* an item header (item_header.cuh) */
    static constexpr int OUT_LD = 68;                                    /* 64 rows + 4 pad: conflict-free */
    static constexpr int OUT_BYTES = 2 * BT * OUT_LD * 4;
    static constexpr int MAX_STAGES = 12;
    static constexpr int SMEM_LIMIT = MINB == 1 ? 232448 : 113 * 1024;   /* opt-in per block on SM90      */
    /* the balanced walk's shared space (work_items.cuh), for the decode tiles: the masked layout's
     * live-item prefix [groups + 1], or the contiguous layout's tile bitmask and word prefix [2W + 1] */
    static constexpr bool BALANCE = BT <= 64;
    /* (the 128-token tile: one word, the narrow-block split's row when the launch picks it) */
    static constexpr int PREFIX_BYTES = BALANCE ? (4 * (HFP4_SM90_BALANCE_MAX_GROUPS + 1) + 15) / 16 * 16 : 16;
    static_assert(2 * (HFP4_SM90_BALANCE_MAX_TILES / 32) + 1 <= HFP4_SM90_BALANCE_MAX_GROUPS + 1,
                  "the contiguous layout's tile bitmask and word prefix share the masked prefix's space");
    static constexpr int SPLIT_WORDS = (HFP4_SM90_SPLIT_MAX_TILES + 31) / 32; /* the split's bitmask words */
    static_assert(!BALANCE || 2 * SPLIT_WORDS + 1 + (SPLIT_WORDS + 15) / 16 <= PREFIX_BYTES / 4,
                  "the narrow-block flags (narrow_items.cuh) follow the bitmask and word prefix");
    /* the K-split's four barriers (split_k.cuh), in every configuration: 32 bytes that cost none a
     * stage (checked when they were added: STAGES and HEADER_SLOT unchanged in all 12) */
    static constexpr int SPLIT_BAR_BYTES = 32;
    /* the dynamic walk's ring (dynamic_walk.cuh), likewise in every configuration (checked: STAGES and
     * HEADER_SLOT unchanged in all 12) */
    static constexpr int DYN_RING_BYTES = 8 * HFP4_SM90_DYN_RING;
    static constexpr int BUDGET = SMEM_LIMIT - 1024 - OUT_BYTES - PREFIX_BYTES - 2 * MAX_STAGES * 8 - SPLIT_BAR_BYTES - DYN_RING_BYTES;
    static constexpr int FIT_BARE = BUDGET / DATA_STAGE_BYTES, FIT_HDR = BUDGET / (DATA_STAGE_BYTES + HEADER_BYTES);
    /* item headers get a slot per stage in a region of their own where that costs no stage (every
     * configuration but the 8-token tile at two CTAs per SM with UE8M0 weight scales, which would
     * lose its eleventh stage, and the 64-token tile with FP32 weight scales); else they use
     * k-groups 1..3's activation-scale slots, free with 1x128 scales only. (A slot after each
     * stage's scales made their stage stride 2096 bytes at 128 tokens, and the look-ahead loop
     * spilled.) */
    static constexpr bool HEADER_SLOT_FREE = (FIT_HDR < MAX_STAGES ? FIT_HDR : MAX_STAGES) == (FIT_BARE < MAX_STAGES ? FIT_BARE : MAX_STAGES);
    /* HFP4_SM90_G32_HEADER_SLOT: G32 kernels (1x32 activation scales fill k-groups 1..3) take a
     * header slot even where it costs a stage (the two-CTA 8-token tile: 10 stages, not 11), since
     * without headers the items get no dynamic walk: H200, V4-Flash masked graph, 1x32 scales, w13
     * T = 8 / 32 3.26 / 3.73 -> 3.71 / 3.99 TB/s, w2 2.92 / 3.40 -> 3.06 / 3.66, T = 1 w13 1.73 ->
     * 1.68, w2 1.27 -> 1.17: at T = 1 the stream of a CTA follows its stages (bench/RESULTS.md v15).
     * (Only STAGES and the carve-up depend on G32: a stage's strides are the same, so the helpers
     * that only step stages, stage_copies.cuh and epilogue.cuh, take the plain configuration.) */
    static constexpr bool HEADER_SLOT = HEADER_SLOT_FREE || (G32 && HFP4_SM90_G32_HEADER_SLOT);
    static constexpr int HDR_STAGE_BYTES = HEADER_SLOT ? HEADER_BYTES : 0;
    static constexpr int STAGE_BYTES = DATA_STAGE_BYTES + HDR_STAGE_BYTES;
    static constexpr int FIT = BUDGET / STAGE_BYTES;
    static constexpr int STAGES = FIT < MAX_STAGES ? FIT : MAX_STAGES;
    static_assert(STAGES >= 4, "the producer warps' parity waits need at least 4 stages");
    /* setmaxnreg split; PRODUCER + 2 x CONSUMER must stay <= 3 x the registers per thread the CTA is
     * launched with (168 for one CTA per SM, 80 for two), or setmaxnreg.inc waits forever */
    static constexpr int LAUNCH_REGS = (65536 / (384 * MINB)) & ~7; /* 168 or 80 */
    static constexpr int PRODUCER_REGS = MINB == 2 ? 48 : BT == 128 ? 88 : 72;
    static constexpr int CONSUMER_REGS = MINB == 2 ? 96 : BT == 128 ? 208 : 216;
    /* activation scales a producer lane holds at once (the 128-token tile has 16 per lane per chunk;
     * 2 at a time keep its producer within 88 registers) */
    static constexpr int SCALE_BATCH = BT == 128 ? 2 : 4;
    static_assert(PRODUCER_REGS + 2 * CONSUMER_REGS <= 3 * LAUNCH_REGS, "setmaxnreg.inc would wait forever");
    static constexpr int SMEM_BYTES = 1024 /* alignment slack */ + STAGES * STAGE_BYTES + OUT_BYTES + PREFIX_BYTES + 2 * STAGES * 8 + SPLIT_BAR_BYTES + DYN_RING_BYTES;
    /* the carve-up of the shared memory (sm90_smem, carved in the kernel): byte offsets from the
     * 1024-aligned base, in this order */
    static constexpr int A_TILES_OFF = 0;                                      /* 1024-aligned (128B swizzle)  */
    static constexpr int W_STAGES_OFF = A_TILES_OFF + STAGES * A_TILE_BYTES;   /* 1024-aligned                  */
    static constexpr int WS_STAGES_OFF = W_STAGES_OFF + STAGES * W_STAGE_BYTES;
    static constexpr int A_SCALES_OFF = WS_STAGES_OFF + STAGES * WS_STAGE_BYTES;
    static constexpr int HEADERS_OFF = A_SCALES_OFF + STAGES * AS_STAGE_BYTES; /* (HEADER_SLOT) */
    static constexpr int OUT_OFF = HEADERS_OFF + STAGES * HDR_STAGE_BYTES;
    static_assert(HEADERS_OFF % 16 == 0 && OUT_OFF % 16 == 0, "headers and the transpose buffers: 16-byte loads");
    static constexpr int PREFIX_OFF = OUT_OFF + OUT_BYTES;
    static constexpr int FULL_OFF = PREFIX_OFF + PREFIX_BYTES;
    static constexpr int EMPTY_OFF = FULL_OFF + STAGES * 8;
    static constexpr int SPLIT_BARS_OFF = EMPTY_OFF + STAGES * 8;
    static constexpr int DYN_RING_OFF = SPLIT_BARS_OFF + SPLIT_BAR_BYTES;
    static_assert(1024 + DYN_RING_OFF + DYN_RING_BYTES == SMEM_BYTES, "the carve-up must fill SMEM_BYTES");
    /* the look-ahead loop's descriptors take the shared-window address unmasked (smem_desc_lo_k128):
     * the window's 1 KB reserve, static shared memory and the carve-up must stay below 2^18 */
    static_assert(SMEM_BYTES + 2048 <= (1 << 18), "shared addresses beyond the descriptor's 18 bits");
    /* the 128-token tile's TMA-store staging (epilogue.cuh): 16 KB from a 1024-aligned start
     * inside each warpgroup's transpose buffer */
    static_assert(BT != 128 || 1023 + 128 * 128 <= BT * OUT_LD * 4, "the TMA-store staging overflows");
};

/* The CTA's shared memory as the kernel carves it (offsets above): activation tiles, weights,
 * weight scales and activation scales of every stage, the epilogue's transpose buffers (one per
 * consumer warpgroup), the full and empty barrier of every stage. */
typedef struct sm90_smem {
    uint8_t *a_tiles, *w_stages, *ws_stages;
    float *a_scale_s, *out_s;
    int32_t *live_prefix; /* the balanced walk's prefix (masked) or bitmask + prefix (contiguous) */
    uint64_t *full, *empty;
    uint64_t *split_bars; /* the K-split's: partial sums posted [2 warpgroups], transpose buffer free [2] */
    unsigned long long *dyn_ring; /* the dynamic walk's ring (dynamic_walk.cuh) */
} sm90_smem;
