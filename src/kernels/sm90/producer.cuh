/*
 * producer.cuh - the producer warpgroup (WG2) of the SM90 FP8 x FP4 kernel: for every work item of
 * the CTA and every 128-K chunk, a producer warp waits for a free pipeline stage and fills it
 * (activation tile by TMA and weights and weight scales by bulk copies, stage_copies.cuh; activation
 * scales by cp.async, or loaded and converted for the UE8M0 forms).
 */
#pragma once
#include <cuda.h>
#include <stdint.h>

#include "diag_timeline.cuh"
#include "dynamic_walk.cuh"
#include "fp8_fp4_gemm_params.h"
#include "item_header.cuh"
#include "narrow_items.cuh"
#include "promote.cuh"
#include "ptx.cuh"
#include "scales.cuh"
#include "split_k.cuh"
#include "stage_copies.cuh"
#include "tile_config.cuh"
#include "work_items.cuh"

/* The stage of global chunk n, once the consumers have released it (its previous use): where the
 * warp that owns chunk n writes an item's header before the chunk loop, or the end mark after it */
template <int STAGES>
static __device__ __forceinline__ int wait_free_stage(uint64_t *empty_bars, int64_t n) {
    const int s = (int)(n % STAGES);
    mbar_wait_sleeping(&empty_bars[s], (uint32_t)(((n / STAGES) & 1) ^ 1));
    return s;
}

/* decode launches: the first round of stages D chunks at a time (masked and contiguous layouts),
 * and the header's reads before the copies (masked) (below); 0 turns both off */
#ifndef HFP4_SM90_LAND_WINDOW
#define HFP4_SM90_LAND_WINDOW 4
#endif
/* HFP4_SM90_LAND_WINDOW = D > 0: in the decode tiles of a masked or contiguous launch, chunk g of the
 * first round of stages (g < STAGES) goes out only once chunk g - D has landed.
 * NOTE: with every stage free at the start, each CTA asked for all of them at once (~28 MB over the
 * GPU at V4-Flash w2 T = 8), and a stage is complete only when the last of its copies lands, so a
 * CTA's first stage landed near the end of that burst: first loads p50 3.4 us after entry, first
 * chunk p50 10.0 (DIAG timeline), while the consumers, which set decode's pace, waited (ncu: 15 %
 * of their warps' samples). With 4 in flight: first chunk p50 8.0, last exit 62.7 -> 60.1 us.
 * H200, masked graph (bench/RESULTS.md v22), with the header reads first (run_producer), 3
 * routings x 4 rounds: w2 T = 8 +1...+2 %, T = 1 +1...+2 %, w13 T = 8 and T = 32 level. The
 * contiguous layout lost with the window then (w2 T = 8 -1...-3 % in 3 calls); since the first-chunk
 * prefetch (HFP4_SM90_FIRST_PREFETCH) it gains there too (HFP4_SM90_LAND_CONTIG below), and the
 * header's reads stay after the copies there (first made no difference, bench/RESULTS.md v29).
 * The exact wait below (v23, H200): 40/40 GPU tests, the TP8 shards' masked T = 32 rows that hung
 * the first cut run through, masked graph w2 T = 8 3.30 -> 3.43 TB/s (+4 %, routing seed 1, 2 rounds).
 * NOTE: the wait must not be a plain parity wait on stage x = (g - D) % STAGES's full barrier: its
 * phase 1 (chunk g - D + STAGES landed, issued by another warp once the consumers released chunk
 * g - D) can complete before this warp gets here, when it lags posting the headers of short items,
 * and a parity-0 wait then waits for phase 2, which needs chunk g: the first cut hung so (V4-Flash
 * TP8 w2, K = 256, masked T = 32 in the bench, H200). Instead two tests, while chunk g is not
 * issued: x's empty barrier cannot pass phase 1 (that needs chunk g - D + STAGES consumed, so chunk
 * g), so its parity-0 test is true exactly when chunk g - D was released, hence landed; x's full
 * barrier cannot reach phase 2 (its second use waits for that release), so its parity-0 test is
 * false only while chunk g - D is in flight or once phase 1 completed too, and then the empty test
 * is true. Either test passing means chunk g - D has landed, and one of them passes once it has.
 * (A short sleep between tests: the spinning producer warp shares its scheduler with consumers.) */
template <int BT, int STAGES>
static __device__ __forceinline__ void wait_landing_window(uint64_t *full, uint64_t *empty, int64_t g, bool on) {
    constexpr int D = HFP4_SM90_LAND_WINDOW;
    /* chunk g - D then belongs to this warp (the four producer warps take chunks round-robin): with
     * another warp's chunk, warp 0 could wait here for a warp that waits for warp 0's next item
     * (dynamic_walk.cuh's ring) */
    static_assert(D % 4 == 0, "HFP4_SM90_LAND_WINDOW: a multiple of the 4 producer warps");
    if constexpr (D > 0 && BT <= 64) {
        if (on && g >= D && g < STAGES) {
            const int x = (int)((g - D) % STAGES);
            /* bounded: the window only paces the first round, so going on without it is always
             * correct (it is the switch-off behaviour); should the argument above ever fail, the
             * launch runs unpaced after ~0.1-0.3 ms instead of hanging */
            for (int spins = 0; spins < 4096; spins++) {
                if (mbar_test_wait_sa(smem_addr(&empty[x]), 0) || mbar_test_wait_sa(smem_addr(&full[x]), 0)) break;
                __nanosleep(32);
            }
        }
    }
}

#ifndef HFP4_SM90_LAND_CONTIG
#define HFP4_SM90_LAND_CONTIG 1 /* (0 builds without it, for A/Bs) */
#endif
/* HFP4_SM90_LAND_CONTIG: the landing window (above) in the contiguous layout's decode launches too.
 * NOTE: H200, graph replays, 3 interleaved rounds in each of two calls (bench/RESULTS.md v29), D's
 * padding left alone: w2 T = 8 3.588 -> 3.646 and 3.608 -> 3.670 TB/s, T = 1 +6 / +7 %, w13 T = 1
 * +3 / +5 %, T = 32 level, w13 T = 8 -4 / -2 % (4.10 -> 4.01); the layer at T = 1 +5 %. */

#ifndef HFP4_SM90_FIRST_PREFETCH
#define HFP4_SM90_FIRST_PREFETCH 1 /* (0 builds without it, for A/Bs) */
#endif
/* HFP4_SM90_FIRST_PREFETCH: at the 8-token tile, when the producer warp that owns an item's first
 * chunk has walked the item (every item after a CTA's first), it asks L2 for that chunk's weights,
 * weight scales and activation tile (bulk and tensor prefetches: no barrier, no wait) before it
 * waits for the chunk's stage, whose copies then find the bytes in L2 or on their way.
 * NOTE: why (DIAG counters, V4-Flash w2 masked T = 8, bench/RESULTS.md v28): an item's first copies
 * went out ~7 600 cycles before the consumers ended the previous item and landed ~4 700 cycles
 * after (load-to-use ~12 300 cycles in the memory system's queue), the consumers waiting ~950
 * cycles an item for them, while the walk comes ~2 000-4 000 cycles before the stage is free.
 * H200, masked graph, 3 interleaved rounds in each of two calls: w2 T = 8 3.545 -> 3.680 and
 * 3.537 -> 3.675 TB/s, w13 T = 8 3.984 -> 3.875 and 3.943 -> 3.877, T = 32 and 64 level
 * (-1.7...+1 %), T = 128 +3...+11 %, contiguous (D's padding left alone) w13 T = 8 +4...+5 %, w2
 * level, T = 1 level. */
template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ void prefetch_first_chunk(const hfp4_sm90_gemm_params &p, const CUtensorMap *a_map,
                                                            const sm90_tile &tile, int64_t kc, const uint8_t *w_src,
                                                            const uint8_t *ws_src) {
    typedef sm90_tile_config<BT, W_FP32, MINB> cfg;
    tma_prefetch_l2_3d(a_map, (int32_t)(kc * 128), tile.m0, tile.a_group);
#pragma unroll
    for (int wg = 0; wg < 2; wg++) {
        bulk_prefetch_l2(chunk_weights<BT, W_FP32, MINB>(p, w_src, wg, kc), cfg::W_WG_BYTES);
        bulk_prefetch_l2(chunk_weight_scales<BT, W_FP32, MINB>(p, ws_src, wg, kc), cfg::WS_WG_BYTES);
    }
}

/* An early start (the EARLY kernels: the NOTE at the kernel's grid-dependency wait), before that
 * wait: the weights and weight scales of this warp's chunk (kc = pwarp) of the CTA's first item's
 * first chunks, as the item loop would walk and place them (iter = 0: chunk kc in stage kc). They
 * complete on the stage's full barrier, whose expect_tx arrival comes after the wait with the
 * activation tile (issue_stage_copies: a tx-count may go below zero until then). Returns the chunks
 * of the first item so loaded (the same in every producer warp), 0 when none: the first item walked
 * computes nothing or does not resolve (the loop then walks on, through the launch's counter, which
 * must wait). Reads the layout (the walk) and the weights only. */
template <int BT, bool W_FP32, int MINB, int STAGES>
static __device__ __forceinline__ int64_t load_first_weights_early(const hfp4_sm90_gemm_params &p, const sm90_smem &sm,
                                                                   int32_t walker, int32_t walkers, int64_t chunks,
                                                                   int64_t kb, int64_t nck, int pwarp) {
    sm90_walk w = {walker, 0, 0, 0u, 0, 0, 0};
    sm90_tile tile;
    if (!walk_next_by<BT>(p, sm.live_prefix, w, walkers) || !resolve_tile<BT>(p, w.item, w.lay, tile)) return 0;
    uniform_tile(tile);
    if (!tile.compute) return 0;
    /* NOTE: the landing window's first chunks only (one a producer warp); the rest of the round goes
     * out after the wait, paced by the window as in every decode launch. H200, V4-Flash, graphs of
     * two layers with every GEMM under the flag, 2 rounds (bench/RESULTS.md v33): T = 1 masked 2.27
     * -> 2.36 TB/s, contiguous with D's padding left alone 2.29 -> 2.39, against the whole round
     * (11 stages) early; T = 8 level (-0.5 %). The whole round asked for ~23 MB at once when the
     * kernel before was already done, and the first stage landed behind all of it (the window's
     * reason, wait_landing_window). */
    constexpr int64_t ROUND = HFP4_SM90_LAND_WINDOW > 0 && HFP4_SM90_LAND_WINDOW < STAGES ? HFP4_SM90_LAND_WINDOW : STAGES;
    const int64_t n = nck < ROUND ? nck : ROUND;
    const uint8_t *w_src = tile_weights(p, tile), *ws_src = tile_weight_scales<W_FP32>(p, tile, chunks);
    for (int64_t kc = pwarp; kc < n; kc += 4)
        if (elect_one_sync())
            issue_stage_weights<BT, W_FP32, MINB>(p, kb + kc, (int)kc, sm.w_stages, sm.ws_stages, w_src, ws_src, &sm.full[kc]);
    return n;
}

/* The arrivals that publish a stage which carries only a header (an all-padding tile's, or the end
 * mark): the 33 a chunk makes, 32 lanes and lane 0 once more in place of the expect_tx arrival */
static __device__ __forceinline__ void finish_header_stage(uint64_t *full, int lane) {
    mbar_arrive(full);
    if (lane == 0) mbar_arrive(full);
}

/* ---- producer: activation tiles by TMA, weights and their scales by bulk copies,
 * activation scales and chunk modes by plain loads ----
 * p by value, and chunks, gran32, lane as the kernel computed them: see the NOTE at the kernel
 * (fp8_fp4_gemm.cuh). */
template <int BT, bool W_FP32, int MINB, bool SPLIT = false, bool G32 = false, bool EARLY = false>
static __device__ __forceinline__ void run_producer(const hfp4_sm90_gemm_params p, const CUtensorMap *a_map,
                                                    const CUtensorMap *a_narrow_map, const sm90_smem sm, int64_t chunks,
                                                    bool gran32, int lane, bool split_on = false, uint32_t rank = 0) {
    typedef sm90_tile_config<BT, W_FP32, MINB, G32> cfg;
    constexpr int STAGES = cfg::STAGES;
    uint8_t *a_tiles = sm.a_tiles, *w_stages = sm.w_stages, *ws_stages = sm.ws_stages;
    float *a_scale_s = sm.a_scale_s;
    uint64_t *full = sm.full, *empty = sm.empty;
    /* NOTE: the producer needs few registers and hands the rest to the consumers. The split must
     * sum to at most 3 x 168 = 504, the registers the CTA is launched with: with 80 + 2 x 216
     * the consumers' setmaxnreg.inc waited forever (a hang seen on the H200). The 128-token
     * tile needs 88 in the producer (its 16 scale values per lane; ptxas spills at 80) and fits
     * its consumers in 208. */
    warpgroup_reg_dealloc<cfg::PRODUCER_REGS>();
    /* NOTE: the four producer warps take chunks round-robin. Each chunk costs the producer one
     * global-load round trip for the activation scales before its stage can be published; one
     * warp alone made that latency the pace of the whole CTA (~1300 cycles per chunk). */
    const int pwarp = warp_uniform(threadIdx.x / 32 - 8); /* (uniform: the copies' stage indices, elect_one_sync) */
    if (pwarp == 0 && lane == 0) {
        tma_prefetch_descriptor(a_map);
        HFP4_DIAG(HFP4_DIAG_PROD_START);
    }
    const int nj = gran32 ? 4 : 1;
    const int lane_slot = a_scale_slot<BT>(lane & 15); /* where this lane's activation scales go */
    int64_t iter = 0; /* chunks published so far: stage = iter % STAGES, as the consumers count */
    /* item headers (item_header.cuh: item_headers_on): the warp that publishes an item's first
     * chunk posts its header (an all-padding tile's in a stage of its own); the others count the
     * stage */
    const bool headers = item_headers_on<BT, W_FP32, MINB, G32>(gran32);
    constexpr int MASKS = (BT + 31) / 32;
    /* narrow items (narrow_items.cuh): every warp narrows each computing tile to its real rows */
    const bool narrow = narrow_items_on<BT>(p, headers);
    /* the K-split (split_k.cuh): the two CTAs of a cluster walk as one walker and take a part of
     * each item's chunks */
    const bool split = SPLIT && split_on;
    const int32_t walker = split ? (int32_t)blockIdx.x / 2 : (int32_t)blockIdx.x;
    const int32_t walkers = split ? (int32_t)gridDim.x / 2 : (int32_t)gridDim.x;
    const int64_t kb = split_first_chunk(split, rank, chunks), nck = split_chunk_count(split, rank, chunks);
    /* (wait_landing_window; HFP4_SM90_LAND_CONTIG) */
    const bool land_window = p.grouping == HFP4_K_MASKED || (HFP4_SM90_LAND_CONTIG && p.grouping == HFP4_K_CONTIGUOUS);
    /* (dynamic_walk.cuh: the walk's later items from the launch's counter; the 128-token tile's ring
     * bound. Only with item headers: without them the consumers walk too, statically) */
    static_assert(BT != 128 || STAGES + 7 <= HFP4_SM90_DYN_RING,
                  "a producer warp's lag behind warp 0, in items of one stage (dynamic_walk.cuh)");
    const bool dyn_prefill = BT == 128 && headers && p.dyn_slot >= 0; /* (the launcher's choice) */
    const sm90_dyn dyn = {sm.dyn_ring,
                          (cfg::BALANCE && dyn_wanted(p, headers, split, balanced_items(p, sm.live_prefix), nck)) ||
                              dyn_prefill,
                          p.dyn_slot, pwarp, lane,
                          dyn_prefill && p.grouping == HFP4_K_PSUM ? psum_walk_items(p, BT) : (int32_t)p.tiles_total};
    long long diag_item_end = 0; /* (make DIAG=1 only: when the previous item's chunk loop ended) */
    (void)diag_item_end;
    unsigned long long diag_sum = 0, diag_n = 0; /* (make DIAG=1 only: HFP4_DIAG_ISSUED) */
    (void)diag_sum;
    (void)diag_n;
    /* an early start: the first item's first chunks of weights, then the wait (the kernel's NOTE) */
    int64_t pre_n = 0; /* chunks of the first item (iter 0) whose weights are in flight already */
    if constexpr (EARLY) {
        static_assert(STAGES >= 4, "producer warp w owns the first item's chunk w (its stage w)");
        pre_n = load_first_weights_early<BT, W_FP32, MINB, STAGES>(p, sm, walker, walkers, chunks, kb, nck, pwarp);
        grid_wait_then_let_next_in();
    }
    FOR_EACH_ITEM(BT, p, sm.live_prefix, item, lay, walker, walkers, dyn) {
    sm90_tile tile;
    if (lane == 0 && pwarp == 0 && iter == 0) HFP4_DIAG(HFP4_DIAG_PROD_WALKED);
    if (!resolve_tile<BT>(p, item, lay, tile)) {
        /* An item with nothing to write (the psum layout's rows past its groups) is skipped, but
         * not by the 128-token tile's walk in order: there every item takes a stage, or a run of
         * such items would let warp 0 overwrite ring words the other warps have not read
         * (dynamic_walk.cuh). It goes out as an all-padding tile's header alone, with no rows to
         * zero (zero_end = m0: store_zero_tile writes nothing). */
        if (!(BT == 128 && dyn.on)) continue;
        tile.compute = 0;
        tile.valid_end = tile.zero_end = tile.m0;
    }
    narrow_tile<BT>(p, tile, narrow, lane);
    uniform_tile(tile);
    /* The warp that owns the item's first chunk (global chunk index iter) posts the header into
     * that chunk's stage before the chunk loop (which then finds the stage free). The stage's loads
     * go out as soon as the stage is free (early: the loop then only announces their bytes), and
     * the header's global reads while they are in flight, so those reads do not delay the item's
     * first chunk (with the reads done first, decode T = 1 lost 3-7 %). With the landing window
     * (masked decode launches, HFP4_SM90_LAND_WINDOW) the reads are issued just before the copies
     * and used after them: issued after, they queue behind the first round's copies (first header
     * posted p50 1.9 us after the first loads, DIAG timeline; bench/RESULTS.md v22). (Posted
     * inside the loop, the header's words stayed live across it, and with the reads' registers
     * live across the stage wait, the 128-token tile spilled.) An all-padding tile has no chunks:
     * its header goes in a stage of its own, with the 33 arrivals a chunk makes and no bytes
     * (finish_header_stage). */
    const bool early = headers && pwarp == (int)(iter % 4) && tile.compute;
    /* the item's first chunk asked of L2 as soon as the item is walked (HFP4_SM90_FIRST_PREFETCH) */
    if (HFP4_SM90_FIRST_PREFETCH && BT == 8 && early && iter > 0 && nck > 0 && elect_one_sync())
        prefetch_first_chunk<BT, W_FP32, MINB>(p, a_map, tile, kb, tile_weights(p, tile),
                                               tile_weight_scales<W_FP32>(p, tile, chunks));
    if (lane == 0 && pwarp == 0 && iter == 0) HFP4_DIAG(HFP4_DIAG_PROD_ITEM);
    if (headers && pwarp == (int)(iter % 4)) {
        const int s = wait_free_stage<STAGES>(empty, iter);
        const long long diag_free = HFP4_DIAG_CLOCK(); /* (make DIAG=1 only) */
        (void)diag_free;
        /* (no window for chunks whose weights went out early: their small activation copies
         * alone are left to issue) */
        const bool pre0 = iter == 0 && pre_n > 0;
        wait_landing_window<BT, STAGES>(full, empty, iter, land_window && !pre0);
        /* (reads first: see above; not in the K-split kernel, whose producer spills with it) */
        const bool reads_first = HFP4_SM90_LAND_WINDOW > 0 && BT <= 64 && !SPLIT && p.grouping == HFP4_K_MASKED;
        sm90_header_reads<BT> reads;
        if (reads_first && tile.compute) read_item_header_data<BT, W_FP32, G32>(p, tile, chunks, gran32, lane, reads);
        if (early && elect_one_sync()) {
            issue_stage_loads<BT, W_FP32, MINB>(p, a_map, a_narrow_map, stage_a_rows<BT>(tile), tile, kb, s, a_tiles,
                                                w_stages, ws_stages, tile_weights(p, tile),
                                                tile_weight_scales<W_FP32>(p, tile, chunks), &full[s], pre0);
            if (iter == 0) HFP4_DIAG(HFP4_DIAG_PROD_LOADS);
            if (BT < 128) HFP4_DIAG_FIRST_COPIES(diag_item_end, diag_free);
            if (BT < 128) HFP4_DIAG_ISSUED(s, diag_free, false, diag_sum, diag_n);
        }
        uint32_t hflags = HFP4_SM90_HDR_ZERO, hmask[MASKS] = {};
        if (tile.compute) {
            if (!reads_first) read_item_header_data<BT, W_FP32, G32>(p, tile, chunks, gran32, lane, reads);
            finish_item_header<BT, W_FP32, G32>(p, tile, chunks, gran32, lane, reads, hflags, hmask);
        }
        if (lane == 0) post_item_header<MASKS>(item_header_slot<BT, W_FP32, MINB, G32>(a_scale_s, s), tile, hflags, hmask);
        if (!tile.compute) finish_header_stage(&full[s], lane);
    }
    if (!tile.compute) {
        if (headers) iter += 1;
        continue;
    }
    const uint8_t *w_src = tile_weights(p, tile), *ws_src = tile_weight_scales<W_FP32>(p, tile, chunks);
    /* The 8-token tile's FP32 activation scales: one value a lane a chunk (8 x 1 or 8 x 4 k-groups),
     * so the lane's source row, k-group offset and slot are the item's, and a chunk only adds its K
     * step. NOTE: why: the general loop below recomputed the 64-bit index per chunk (~35
     * instructions on the producer's path, on schedulers the consumers keep busy); see
     * bench/RESULTS.md v27 for what the producer's instructions cost decode. */
    const int one_i = lane % BT, one_j = lane / BT;
    const bool one_lane = lane < BT * nj && tile.m0 + one_i < tile.valid_end;
    const float *one_src = (const float *)p.a_scales;
    if (BT == 8 && one_lane) one_src += a_scale_index(p, tile.a_group, tile.m0 + one_i, one_j);
    const int one_slot = one_j * BT + a_scale_slot_of_lane<BT>(one_i, lane_slot);
    /* Producer warp w publishes the chunks whose *global* index (iter + kc) is w mod 4, so
     * each warp steps by exactly 4 chunks, across work items too. With STAGES >= 4 the chunk
     * two rounds back on the stage it waits for is then always released, which is what makes
     * the parity wait unambiguous (a per-item split let a warp jump 7 chunks and pass a wait
     * two phases early when chunks % 4 != 0, e.g. K = 896 with the 64-token tile). */
    for (int64_t kc = ((pwarp - iter % 4) % 4 + 4) % 4; kc < nck; kc += 4) {
        const int64_t ka = kb + kc; /* the chunk's index in K (kc: within this CTA's part) */
        const int s = (int)((iter + kc) % STAGES);
        const uint32_t phase = (uint32_t)(((iter + kc) / STAGES) & 1);
        uint64_t *bar = &full[s];
        const bool pre = iter == 0 && kc < pre_n; /* (its weights went out before the grid-dependency wait) */
        float *sa = a_scale_s + s * 4 * BT;
        constexpr int PER_LANE = (BT * 4 + 31) / 32;
        /* only the lanes' rounds that hold scales: BT values per k-group (looping to PER_LANE
         * made 4x too many rounds for 1x128 scales) */
        const int rounds = (BT * nj + 31) / 32;
        if (p.a_scale_dtype == 1 /* FP32 */) {
            /* NOTE: FP32 activation scales go by cp.async 4-byte copies that complete on the
             * stage's barrier (arrive.noinc), so no producer lane ever waits for a load: with
             * plain loads each producer warp had one chunk in flight, and four chunks of 8 KB
             * per ~2 us load latency held decode to ~15 GB/s per SM. */
            /* NOTE: a sleeping wait: the producer warps spun ~120 times per chunk on this barrier
             * (ncu, w13 T = 16384: 360 of the producer's 909 instructions per chunk), issue
             * slots the consumers on the same scheduler need */
            mbar_wait_sleeping(&empty[s], phase ^ 1);
            const long long diag_t = HFP4_DIAG_CLOCK(); /* (make DIAG=1 only) */
            (void)diag_t;
            /* NOTE: when the tile's scales of each k-group are one aligned block (MN-major scales,
             * DeepGEMM's layout; every row of the tile computed; stored in token order, which
             * the 128-token tile uses), they go as one bulk copy per k-group: per-lane
             * 4-byte copies cost the producer ~180 instructions of 64-bit index arithmetic per
             * 128-token chunk (ncu, w13 T = 16384) on the schedulers the consumers share. */
            const float *sa_src = (const float *)p.a_scales + a_scale_index(p, tile.a_group, tile.m0, gran32 ? ka * 4 : ka);
            const bool one_block = BT == 128 && p.a_scale_stride_mn == 1 &&
                                   tile.m0 + BT <= tile.valid_end && (gran32 ? ka * 4 + 3 : ka) < p.a_k_groups &&
                                   ((uintptr_t)sa_src & 15) == 0 && (!gran32 || (p.a_scale_stride_k & 3) == 0);
            wait_landing_window<BT, STAGES>(full, empty, iter + kc, land_window && !pre);
            if (one_block) {
                if (elect_one_sync()) {
                    issue_stage_copies<BT, W_FP32, MINB>(p, a_map, a_narrow_map, tile, ka, s, a_tiles, w_stages,
                                                         ws_stages, w_src, ws_src, bar, early && kc == 0, nj * BT * 4, pre);
                    for (int j = 0; j < nj; j++) bulk_load(sa + j * BT, sa_src + j * p.a_scale_stride_k, BT * 4, bar);
                }
                mbar_arrive(bar);
                continue;
            }
            if (elect_one_sync())
                issue_stage_copies<BT, W_FP32, MINB>(p, a_map, a_narrow_map, tile, ka, s, a_tiles, w_stages, ws_stages,
                                                     w_src, ws_src, bar, early && kc == 0, 0, pre);
            if (lane == 0 && iter + kc == 0) HFP4_DIAG(HFP4_DIAG_PROD_COPY);
            if (BT < 128 && lane == 0 && !(early && kc == 0)) HFP4_DIAG_ISSUED(s, diag_t, true, diag_sum, diag_n);
            if constexpr (BT == 128) {
                /* the 128-token tile: a lane's rows are m0 + lane + 32u (u < 4) in every
                 * k-group j: its addresses step by constants from one base (the general index
                 * below costs three 64-bit multiplies per value; at 64 tokens and below the
                 * base and step cost the producer registers it does not have) */
                constexpr int U = BT / 32;
                const float *lane_src = (const float *)p.a_scales + a_scale_index(p, tile.a_group, tile.m0 + lane, 0);
                const int64_t step_u = 32 * p.a_scale_stride_mn;
#pragma unroll 1
                for (int j = 0; j < nj; j++) {
                    const int64_t kg = gran32 ? ka * 4 + j : ka;
                    const float *src_j = lane_src + kg * p.a_scale_stride_k;
                    const bool kin = kg < p.a_k_groups;
#pragma unroll
                    for (int u = 0; u < U; u++) {
                        const bool in = kin && tile.m0 + lane + 32 * u < tile.valid_end;
                        cp_async_4_zfill(sa + j * BT + a_scale_slot_of_lane<BT>(lane + 32 * u, lane_slot), in ? src_j + u * step_u : (const float *)p.a_scales, in);
                    }
                }
            } else if constexpr (BT == 8) { /* (one round: rounds == 1, see one_src above) */
                const int64_t kstep = gran32 ? ka * 4 : ka, koff = kstep * p.a_scale_stride_k; /* (uniform) */
                const bool in = one_lane && kstep + one_j < p.a_k_groups;
                /* NOTE: only the lanes that hold a value write: with 1x128 scales k-groups 1..3's
                 * slots hold the item header (item_header.cuh), which a zero fill from lanes 8..31
                 * overwrote (decode 20 % slower and a hung test, call 10) */
                if (lane < BT * nj) cp_async_4_zfill(sa + one_slot, one_src + (in ? koff : 0), in);
            } else {
#pragma unroll 2
                for (int t = 0; t < rounds; t++) {
                    const int idx = lane + 32 * t;
                    if (idx < BT * nj) {
                        const int i = idx % BT, j = idx / BT;
                        const int64_t row = tile.m0 + i;
                        const int64_t kg = gran32 ? ka * 4 + j : ka;
                        const bool in = row < tile.valid_end && kg < p.a_k_groups;
                        const float *src = (const float *)p.a_scales;
                        if (in) src += a_scale_index(p, tile.a_group, row, kg);
                        cp_async_4_zfill(sa + j * BT + a_scale_slot_of_lane<BT>(i, lane_slot), src, in);
                    }
                }
            }
            cp_async_mbar_arrive_noinc(bar);
#ifdef HFP4_DIAG_TIMELINE
            if (BT < 128 && iter + kc == 0) { /* (DIAG only: this warp watches the first stage complete,
                                               * which delays its next chunks a little) */
                mbar_wait(bar, phase);
                if (lane == 0) HFP4_DIAG(HFP4_DIAG_PROD_STAGE0);
            }
#endif
        } else {
            /* UE8M0 forms need converting: load first (independent of the stage), then wait for
             * the stage, convert and store; a few values per lane at a time keep the producer
             * within its register budget */
            constexpr int BATCH = PER_LANE < cfg::SCALE_BATCH ? PER_LANE : cfg::SCALE_BATCH;
            long long diag_t = 0; /* (make DIAG=1 only) */
            (void)diag_t;
#pragma unroll
            for (int b0 = 0; b0 < PER_LANE; b0 += BATCH) {
                if (b0 > 0 && b0 >= rounds) break;
                float v[BATCH];
#pragma unroll
                for (int t = 0; t < BATCH; t++) {
                    const int idx = lane + 32 * (b0 + t);
                    v[t] = 0.0f;
                    if (idx < BT * nj) {
                        const int i = idx % BT, j = idx / BT;
                        const int64_t row = tile.m0 + i;
                        const int64_t kg = gran32 ? ka * 4 + j : ka;
                        if (row < tile.valid_end && kg < p.a_k_groups) v[t] = load_a_scale(p, tile.a_group, row, kg);
                    }
                }
                if (b0 == 0) {
                    mbar_wait_sleeping(&empty[s], phase ^ 1);
                    diag_t = HFP4_DIAG_CLOCK();
                    wait_landing_window<BT, STAGES>(full, empty, iter + kc, land_window && !pre);
                }
#pragma unroll
                for (int t = 0; t < BATCH; t++) {
                    const int idx = lane + 32 * (b0 + t);
                    if (idx < BT * nj) sa[(idx / BT) * BT + a_scale_slot_of_lane<BT>(idx % BT, lane_slot)] = v[t];
                }
            }
            if (elect_one_sync())
                issue_stage_copies<BT, W_FP32, MINB>(p, a_map, a_narrow_map, tile, ka, s, a_tiles, w_stages, ws_stages,
                                                     w_src, ws_src, bar, early && kc == 0, 0, pre);
            if (lane == 0 && iter + kc == 0) HFP4_DIAG(HFP4_DIAG_PROD_COPY);
            if (BT < 128 && lane == 0 && !(early && kc == 0)) HFP4_DIAG_ISSUED(s, diag_t, true, diag_sum, diag_n);
            mbar_arrive(bar);
        }
    }
    iter += nck;
    if (BT < 128) diag_item_end = HFP4_DIAG_CLOCK();
    }
    /* the end mark, in the stage of the chunk that would come next; the consumers never release it */
    if (headers && pwarp == (int)(iter % 4)) {
        const int s = wait_free_stage<STAGES>(empty, iter);
        if (lane == 0) item_header_slot<BT, W_FP32, MINB, G32>(a_scale_s, s)->flags = HFP4_SM90_HDR_END;
        finish_header_stage(&full[s], lane);
    }
    if (BT < 128 && lane == 0) HFP4_DIAG_ISSUED_FLUSH(diag_sum, diag_n);
    dyn_finish(dyn);
}
