/*
 * consumer.cuh - the two consumer warpgroups (WG0, WG1) of the SM90 FP8 x FP4 kernel: for every work
 * item, each warpgroup converts its 64 weight rows of every 128-K chunk from FP4 to FP8 in registers
 * (fp4_to_fp8.cuh), runs the wgmmas against the stage's activation tile, promotes the FP32 sums with
 * the scales (promote.cuh), then stores its part of D (epilogue.cuh). An item whose chunks are all
 * folded (UE8M0 weight scales, 1x128 activation scales) takes the look-ahead path
 * (consumer_pipelined.cuh), in the rows' one base when the repack's mode bit 1 says so, else with
 * row scales; so does a one-base item under 1x32 activation scales in the G32 kernels, with a
 * promotion per k32 step; any other goes one chunk at a time, each chunk folded or per-32.
 */
#pragma once
#include <stdint.h>

#include "consumer_pipelined.cuh"
#include "diag_timeline.cuh"
#include "epilogue.cuh"
#include "fp4_to_fp8.cuh"
#include "fp8_fp4_gemm_params.h"
#include "item_header.cuh"
#include "narrow_items.cuh"
#include "promote.cuh"
#include "ptx.cuh"
#include "scales.cuh"
#include "split_k.cuh"
#include "tile_config.cuh"
#include "wgmma_fp8_rs.cuh"
#include "work_items.cuh"

/* Timing-only builds (results wrong on purpose): -DHFP4_DIAG_NO_EPILOGUE skips the stores of D behind
 * a condition the compiler cannot decide (m is never negative), so the sums are still computed */
#ifdef HFP4_DIAG_NO_EPILOGUE
#define HFP4_DIAG_SKIP_STORE(p) ((p).m >= 0)
#else
#define HFP4_DIAG_SKIP_STORE(p) false
#endif

/* the tables and weight scales of k32 step st of a per-32 chunk (mode: the chunk's mode byte; e0,
 * e1 or f0, f1: the rows' weight-scale words) */
template <bool W_FP32>
static __device__ __forceinline__ void step_scales(int st, uint32_t mode, uint32_t e0, uint32_t e1, float4 f0,
                                                   float4 f1, uint32_t (&lo)[2], uint32_t (&hi)[2], float (&sw)[2]) {
    if constexpr (W_FP32) {
        fp8_table(6, lo[0], hi[0]);
        lo[1] = lo[0];
        hi[1] = hi[0];
        sw[0] = st == 0 ? f0.x : st == 1 ? f0.y : st == 2 ? f0.z : f0.w;
        sw[1] = st == 0 ? f1.x : st == 1 ? f1.y : st == 2 ? f1.z : f1.w;
    } else if ((mode & HFP4_SM90_MODE_PER32) == 0) { /* folded words, per-32 activation scales */
        fp8_table((e0 >> (4 * st)) & 15, lo[0], hi[0]);
        fp8_table((e1 >> (4 * st)) & 15, lo[1], hi[1]);
        sw[0] = row_scale_from_emax((e0 >> 16) & 255);
        sw[1] = row_scale_from_emax((e1 >> 16) & 255);
    } else {
        fp8_table(6, lo[0], hi[0]);
        lo[1] = lo[0];
        hi[1] = hi[0];
        sw[0] = ue8m0_to_float((e0 >> (8 * st)) & 0xFF);
        sw[1] = ue8m0_to_float((e1 >> (8 * st)) & 0xFF);
    }
}

/* ---- consumers: warpgroup `warpgroup` owns weight rows [64 * wtile, 64 * wtile + 64) ----
 * p by value and pk, a pointer to the same kernel parameter, and chunks, gran32, warpgroup, tid,
 * lane as the kernel computed them: see the NOTE at the kernel (fp8_fp4_gemm.cuh). */
template <int BT, bool W_FP32, int MINB, bool SPLIT = false, bool G32 = false>
static __device__ __forceinline__ void run_consumers(const hfp4_sm90_gemm_params p, const hfp4_sm90_gemm_params *pk,
                                                     const CUtensorMap *d_map, const sm90_smem sm, int64_t chunks,
                                                     bool gran32, int warpgroup, int tid, int lane,
                                                     bool split_on = false, uint32_t rank = 0) {
    typedef sm90_tile_config<BT, W_FP32, MINB, G32> cfg;
    constexpr int STAGES = cfg::STAGES;
    uint8_t *a_tiles = sm.a_tiles, *w_stages = sm.w_stages, *ws_stages = sm.ws_stages;
    float *a_scale_s = sm.a_scale_s, *out_s = sm.out_s;
    uint64_t *full = sm.full, *empty = sm.empty;
    warpgroup_reg_alloc<cfg::CONSUMER_REGS>();
    if (threadIdx.x == 0) HFP4_DIAG(HFP4_DIAG_CONS_START);
    unsigned diag_n = 0; /* (make DIAG=1 only: consumer thread 0's items so far, HFP4_DIAG_COUNT) */
    (void)diag_n;
    const int warp_in_wg = tid / 32, g8 = lane / 4, t4 = lane % 4;
    /* chunks consumed so far, as (stage, phase) = (n % STAGES, (n / STAGES) & 1): the producer counts
     * the same chunks; stepping them here avoids a 64-bit modulo per chunk */
    int s = 0;
    uint32_t phase = 0;
    /* NOTE: with item headers (item_header.cuh: item_headers_on) the producer hands out the items:
     * each computing item's header waits beside its first stage, and a header marked "end" follows
     * the last; the consumers neither walk nor resolve (an all-padding tile's header comes alone).
     * Without (1x32 scales where a stage has no header slot: non-G32 kernels, or
     * HFP4_SM90_G32_HEADER_SLOT=0) they walk and resolve as the producer does. */
    const bool headers = item_headers_on<BT, W_FP32, MINB, G32>(gran32);
    constexpr int MASKS = (BT + 31) / 32;
    uint32_t *posted_masks = posted_masks_slot<BT, W_FP32, MINB>(out_s, warpgroup);
    sm90_walk walk = {(int32_t)blockIdx.x, 0, 0, 0u, 0, 0, 0};
    uint32_t mask8 = 0; /* (the 8-token tile with headers: the item's real-row mask, store_tile_direct8) */
    /* the K-split (split_k.cuh; SPLIT kernels come with headers, so the consumers never walk): this
     * CTA's part of each item's chunks, and the reduction's phase and first cluster wait */
    const bool split = SPLIT && split_on;
    const int64_t kb = split_first_chunk(split, rank, chunks), nck = split_chunk_count(split, rank, chunks);
    uint32_t red_phase = 0;
    bool cluster_waited = false;

    HFP4_DIAG_PHASE(HFP4_DIAG_PH_WALK_START);
    for (;;) {
    sm90_tile tile;
    uint32_t hflags = 0;
    if (headers) {
        mbar_wait(&full[s], phase); /* the item's first stage: its chunk loop waits on it anyway */
        if (threadIdx.x == 0 && HFP4_DIAG_FIRST_ITEM(diag_n)) HFP4_DIAG(HFP4_DIAG_CONS_STAGE0);
        const sm90_item_header *h = item_header_slot<BT, W_FP32, MINB, G32>(a_scale_s, s);
        hflags = read_item_header(h, tile);
        if constexpr (BT == 8) mask8 = h->real_mask[0]; /* (store_tile_direct8) */
        if (hflags & HFP4_SM90_HDR_END) break;
        if (!tile.compute) { /* a stage with only the header of an all-padding tile: released now */
            mbar_arrive(&empty[s]);
            if (++s == STAGES) {
                s = 0;
                phase ^= 1;
            }
        } else if (tid < MASKS) {
            posted_masks[tid] = h->real_mask[tid]; /* for the epilogue (posted_masks_slot) */
        }
        HFP4_DIAG_PHASE(HFP4_DIAG_PH_WALK_END);
        HFP4_DIAG_PHASE(HFP4_DIAG_PH_ITEM);
    } else {
        if (!walk_next<BT>(p, sm.live_prefix, walk)) break;
        HFP4_DIAG_PHASE(HFP4_DIAG_PH_WALK_END);
        HFP4_DIAG_PHASE(HFP4_DIAG_PH_ITEM);
        if (!resolve_tile<BT>(p, walk.item, walk.lay, tile)) {
            HFP4_DIAG_PHASE(HFP4_DIAG_PH_WALK_START);
            continue;
        }
    }
    const int64_t wtile = tile.n_tile * 2 + warpgroup;
    sm90_fin<BT> fin;
#pragma unroll
    for (int i = 0; i < BT / 2; i++) fin.v[i] = 0.0f;

    if (tile.compute) {
        HFP4_DIAG_PHASE(HFP4_DIAG_PH_RESOLVED);
        const int r0 = warp_in_wg * 16 + g8; /* row within the 64-row tile; r1 = r0 + 8 */
        /* chunk modes (bit 0 clear: folded, set: per-32; sm90_layout.h) from the repacked buffer, one byte per chunk of the
         * tile, read a chunk ahead so the load is off the critical path */
        const uint8_t *modes = p.w_modes + ((int64_t)tile.expert * p.w_tiles + wtile) * chunks + kb;
        uint32_t mode_next = W_FP32 || BT == 128 ? 1u : __ldg(modes);
        /* NOTE: fin is kept in units of the weight rows' scale 2^(e_max - 133) of the tile's first
         * chunk (rb0, rb1), so a folded chunk with the same e_max (every chunk of a row whose
         * 32-group scales fit in 11 binades: the repack gives such a row one base for the whole K)
         * promotes with one FFMA per accumulator instead of FMUL + FFMA. The first chunk that
         * differs, in any lane of the warp, converts fin to absolute units (a power-of-two
         * multiply) and the item continues on the general promotion (promote.cuh).
         * eb = 0x100: fin is in absolute units. */
        float rb0 = 1.0f, rb1 = 1.0f;
        uint32_t eb0 = 0x100, eb1 = 0x100;
        /* the look-ahead path for an all-folded item (consumer_pipelined.cuh; the decision is the
         * header's, item_header.cuh).
         * NOTE: the general chunk loop stays in this function: moved into a function of its own
         * (with or without the look-ahead loop), it was optimized before being inlined and the SASS
         * of the tiles changed by up to ~170 instructions. The look-ahead loop as a function
         * (pipelined_item) changes the instruction count of each tile by < 1 %. */
        bool one_base = (hflags & HFP4_SM90_HDR_ONE_BASE(warpgroup)) != 0;
        bool all_folded = (hflags & HFP4_SM90_HDR_ALL_FOLDED(warpgroup)) != 0;
        /* G32 kernels (1x32 activation scales, consumer_pipelined.cuh): one-base items take the
         * look-ahead loop with a promotion per k32 step; every other item the general path. Without
         * headers (HFP4_SM90_G32_HEADER_SLOT=0: the two-CTA 8-token tile keeps its eleventh stage and
         * no header slot) each warp reads the modes itself: up to 32 chunks one load a lane, one
         * round trip as mode_next's above (a loop beyond, K > 4096). */
        if constexpr (G32) {
            all_folded = false;
            if (!headers) one_base = chunks_one_base(modes, nck, lane);
        }
        HFP4_DIAG_PHASE(HFP4_DIAG_PH_MODES);
        if (threadIdx.x == 0 && HFP4_DIAG_FIRST_ITEM(diag_n)) { /* (make DIAG=1 only) */
            HFP4_DIAG(HFP4_DIAG_CONS_ITEM);
            mbar_wait(&full[s], phase); /* the item's first stage: the loop below waits on it anyway */
            HFP4_DIAG(HFP4_DIAG_CONS_CHUNK0);
        }
        if constexpr (!W_FP32) { /* (FP32 weight scales: never all folded) */
            /* (consumer_pipelined.cuh: CARRY) a run of one-base items in a loop of its own, so the
             * carried words hold registers only here; the decode tiles (HFP4_SM90_CARRY_MAX_BT).
             * NOTE: not in the G32 kernel of the two-CTA 8-token tile (96 registers, its steps in
             * halves): with the carry, H200 V4-Flash masked graph 1x32 w13 T = 8 / 32 3.66 / 3.95
             * TB/s, without 3.71 / 3.99, w2 T = 32 3.57 -> 3.66 (bench/RESULTS.md v15) */
            if constexpr (BT <= HFP4_SM90_CARRY_MAX_BT) {
                if (one_base && !split &&
                    (!G32 || (headers && MINB == 1))) { /* (G32 without headers: voted, no carry) */
                    sm90_carried_chunk carry;
                    bool carried = false;
                    int64_t wt = wtile;
                    for (;;) {
                        carried = pipelined_item<BT, W_FP32, MINB, false, true, G32>(
                            sm, nck, warpgroup * cfg::W_WG_BYTES + tid * 16, warpgroup, r0, t4, fin.v, rb0, rb1, eb0,
                            eb1, s, phase, &carry, carried);
                        HFP4_DIAG_CARRIED(carried); /* (make DIAG=1 only: whether the next item's words came early) */
                        const long long diag_loop_end = HFP4_DIAG_CLOCK(); /* (make DIAG=1 only) */
                        (void)diag_loop_end;
                        HFP4_DIAG_PHASE(HFP4_DIAG_PH_LOOP);
                        to_absolute_units<BT>(fin.v, rb0, rb1, eb0, eb1);
                        if (threadIdx.x == 0) { /* (make DIAG=1 only: the stamps of the item loop below) */
                            HFP4_DIAG(HFP4_DIAG_LAST_ITEM);
                            HFP4_DIAG_COUNT(++diag_n);
                        }
                        HFP4_DIAG_PHASE(HFP4_DIAG_PH_SUMS);
                        if (HFP4_DIAG_SKIP_STORE(p)) { /* (timing-only builds: HFP4_DIAG_NO_EPILOGUE) */
                        } else if (direct8_store_ok<BT>(p, wt))
                            store_tile_direct8<BT>(p, tile, wt, p.grouping == HFP4_K_MASKED ? tile.a_group : 0, fin,
                                                   mask8, tid, lane);
                        else
                            store_tile<BT, W_FP32, MINB>(*pk, d_map, tile, wt,
                                                         p.grouping == HFP4_K_MASKED ? tile.a_group : 0, fin, out_s,
                                                         headers, warpgroup, tid, lane);
                        HFP4_DIAG_PHASE(HFP4_DIAG_PH_STORED);
                        HFP4_DIAG_PHASE(HFP4_DIAG_PH_WALK_START);
                        /* the next stage holds the next item's header (or the end mark): the whole
                         * warpgroup waits for it and decides from it whether the run goes on */
                        const long long diag_w0 = HFP4_DIAG_CLOCK(); /* (make DIAG=1 only) */
                        (void)diag_w0;
                        mbar_wait(&full[s], phase);
                        HFP4_DIAG_FIRST_READY(s, diag_loop_end, diag_w0);
                        const sm90_item_header *h = item_header_slot<BT, W_FP32, MINB, G32>(a_scale_s, s);
                        const uint32_t nflags = h->flags;
                        if ((nflags & (HFP4_SM90_HDR_END | HFP4_SM90_HDR_ZERO)) != 0 ||
                            (nflags & HFP4_SM90_HDR_ONE_BASE(warpgroup)) == 0)
                            break; /* (the outer loop reads this header again) */
                        (void)read_item_header(h, tile);
                        if (tid < MASKS) posted_masks[tid] = h->real_mask[tid];
                        if constexpr (BT == 8) mask8 = h->real_mask[0];
                        HFP4_DIAG_PHASE(HFP4_DIAG_PH_WALK_END);
                        HFP4_DIAG_PHASE(HFP4_DIAG_PH_ITEM);
                        HFP4_DIAG_PHASE(HFP4_DIAG_PH_RESOLVED);
                        HFP4_DIAG_PHASE(HFP4_DIAG_PH_MODES);
                        wt = tile.n_tile * 2 + warpgroup;
#pragma unroll
                        for (int i = 0; i < BT / 2; i++) fin.v[i] = 0.0f;
                    }
                    continue;
                }
            }
            /* narrow items (narrow_items.cuh): a one-base item whose computed rows end within 8, 32, 64
             * or 96 token columns computes only those. The producer's narrowed tile (contiguous) or any
             * tile whose rows end there (psum, masked, a dense tail): the rows past valid_end are
             * written as zeros or not at all, and the activation rows below it are loaded. */
            const int nw = BT == HFP4_SM90_NARROW_BT ? narrow_width<BT>(tile.valid_end - tile.m0) : BT;
            if (one_base && nw == BT)
                pipelined_item<BT, W_FP32, MINB, false, false, G32>(sm, nck, warpgroup * cfg::W_WG_BYTES + tid * 16,
                                                                    warpgroup, r0, t4, fin.v, rb0, rb1, eb0, eb1, s,
                                                                    phase);
            else if (one_base) {
                if constexpr (BT == HFP4_SM90_NARROW_BT) { /* (nw < BT only here) */
                    if (nw == 8)
                        pipelined_item<BT, W_FP32, MINB, false, false, G32, 8>(
                            sm, nck, warpgroup * cfg::W_WG_BYTES + tid * 16, warpgroup, r0, t4, fin.v, rb0, rb1, eb0,
                            eb1, s, phase);
                    else if (nw == 32)
                        pipelined_item<BT, W_FP32, MINB, false, false, G32, 32>(
                            sm, nck, warpgroup * cfg::W_WG_BYTES + tid * 16, warpgroup, r0, t4, fin.v, rb0, rb1, eb0,
                            eb1, s, phase);
                    else if (nw == 64)
                        pipelined_item<BT, W_FP32, MINB, false, false, G32, 64>(
                            sm, nck, warpgroup * cfg::W_WG_BYTES + tid * 16, warpgroup, r0, t4, fin.v, rb0, rb1, eb0,
                            eb1, s, phase);
                    else
                        pipelined_item<BT, W_FP32, MINB, false, false, G32, 96>(
                            sm, nck, warpgroup * cfg::W_WG_BYTES + tid * 16, warpgroup, r0, t4, fin.v, rb0, rb1, eb0,
                            eb1, s, phase);
                }
            } else if constexpr (!G32) { /* (G32 clears all_folded; its configuration is not this call's) */
                if (all_folded)
                    pipelined_item<BT, W_FP32, MINB, true>(sm, nck, warpgroup * cfg::W_WG_BYTES + tid * 16, warpgroup,
                                                           r0, t4, fin.v, rb0, rb1, eb0, eb1, s, phase);
            }
        }
        /* (a one-base item is all folded, but 1x32 scales clear all_folded) */
        const bool pipelined = all_folded || (G32 && one_base);
        for (int32_t kc = 0; kc < (int32_t)nck && !pipelined; kc++) {
            mbar_wait(&full[s], phase);
            const uint8_t *w_st = w_stages + s * cfg::W_STAGE_BYTES + warpgroup * cfg::W_WG_BYTES + tid * 16;
            const uint4 q0 = *(const uint4 *)w_st;
            const uint4 q1 = *(const uint4 *)(w_st + HFP4_SM90_PAIR_BYTES);
            const uint8_t *ws_st = ws_stages + s * cfg::WS_STAGE_BYTES + warpgroup * cfg::WS_WG_BYTES;
            float4 f0, f1;
            uint32_t e0 = 0, e1 = 0;
            if constexpr (W_FP32) {
                f0 = ((const float4 *)ws_st)[r0];
                f1 = ((const float4 *)ws_st)[r0 + 8];
            } else {
                e0 = ((const uint32_t *)ws_st)[r0];
                e1 = ((const uint32_t *)ws_st)[r0 + 8];
            }
            uint32_t mode = mode_next;
            if constexpr (BT == 128) {
                mode = W_FP32 ? 1u : __ldg(modes + kc); /* no register to spare: read now (L1 hit after the first) */
            } else if (!W_FP32 && kc + 1 < (int32_t)nck) {
                mode_next = __ldg(modes + kc + 1); /* a chunk ahead */
            }
            const sm90_desc desc = smem_desc_k128_swizzle128(a_tiles + s * cfg::A_TILE_BYTES);
            const float *sa = a_scale_s + s * 4 * BT;
            /* words of step st: (k 4t..4t+3, k 16+4t..16+4t+3) for rows (g, g+8) */
            const uint32_t wlo[4] = {q0.x, q0.z, q1.x, q1.z};
            const uint32_t whi[4] = {q0.y, q0.w, q1.y, q1.w};
            if ((mode & HFP4_SM90_MODE_PER32) == 0 && !gran32) {
                /* folded chunk: the per-32 scales are inside the FP8 values, so the 4 k32 steps
                 * chain into one accumulator and one promotion per 128 K (DeepGEMM's cost) */
                uint32_t a[4][4];
                convert_folded_chunk(a, q0, q1, e0, e1);
                float acc[BT / 2];
                wgmma_fp8_rs_chunk<BT>(acc, a, desc);
                wgmma_wait<0>();
                wgmma_chunk_waited<BT>(acc, a); /* a is read by the wgmmas until here */
                promote_folded<BT>(fin.v, rb0, rb1, eb0, eb1, acc, (e0 >> 16) & 255, (e1 >> 16) & 255, sa, kc, t4);
            } else {
                if (eb0 != 0x100) to_absolute_units<BT>(fin.v, rb0, rb1, eb0, eb1);
                /* per-32 chunk: one accumulator and one promotion per k32 step (exact for any
                 * scale). NOTE: the steps' wgmmas go out NACC at a time into NACC accumulators
                 * with one wait (the 1x32 activation scales transformers passes make every chunk
                 * take this path; one wait per step serialized it): 4 up to the 32-token tile
                 * (the two-CTA 8-token one included), 2 at 64 tokens (4 spill there next to the
                 * look-ahead path's registers), 1 at 128 tokens (no registers to spare). */
                constexpr int NACC = BT > 64 ? 1 : BT == 64 ? 2 : 4;
#pragma unroll
                for (int st0 = 0; st0 < 4; st0 += NACC) {
                    float sw[NACC][2];
                    uint32_t a[NACC][4];
#pragma unroll
                    for (int i = 0; i < NACC; i++) { /* a step's tables die with its conversion */
                        const int st = st0 + i;
                        uint32_t lo[2], hi[2];
                        step_scales<W_FP32>(st, mode, e0, e1, f0, f1, lo, hi, sw[i]);
                        fp4x8_rows_to_fp8(wlo[st], lo[0], hi[0], lo[1], hi[1], a[i][0], a[i][1]);
                        fp4x8_rows_to_fp8(whi[st], lo[0], hi[0], lo[1], hi[1], a[i][2], a[i][3]);
                    }
                    float acc[NACC][BT / 2];
#pragma unroll
                    for (int i = 0; i < NACC; i++)
#pragma unroll
                        for (int r = 0; r < 4; r++) reg_fence(a[i][r]);
                    wgmma_fence();
#pragma unroll
                    for (int i = 0; i < NACC; i++) wgmma_fp8_rs<BT>(acc[i], a[i], desc_advance_k32(desc, st0 + i), 0);
                    wgmma_commit();
                    wgmma_wait<0>();
#pragma unroll
                    for (int i = 0; i < NACC; i++) {
#pragma unroll
                        for (int r = 0; r < 4; r++) reg_fence(a[i][r]); /* read by the wgmma until here */
#pragma unroll
                        for (int r = 0; r < BT / 2; r++) reg_fence(acc[i][r]);
                        promote<BT, true>(fin.v, acc[i], sw[i][0], sw[i][1], sa + (gran32 ? (st0 + i) * BT : 0), t4);
                    }
                }
            }
            mbar_arrive(&empty[s]); /* after the last read of the stage: wgmma waited, scales used */
            if (++s == STAGES) {
                s = 0;
                phase ^= 1;
            }
        }
        HFP4_DIAG_PHASE(HFP4_DIAG_PH_LOOP);
        to_absolute_units<BT>(fin.v, rb0, rb1, eb0, eb1);
    }

    const int64_t dgroup = p.grouping == HFP4_K_MASKED ? tile.a_group : 0;
    if (!tile.compute) {
        store_zero_tile<BT>(*pk, tile, wtile, dgroup, tid);
        HFP4_DIAG_PHASE(HFP4_DIAG_PH_WALK_START);
        continue;
    }
    if (threadIdx.x == 0) {
        HFP4_DIAG(HFP4_DIAG_LAST_ITEM);
        HFP4_DIAG_COUNT(++diag_n);
    }
    HFP4_DIAG_PHASE(HFP4_DIAG_PH_SUMS);
    if (split) {
        if (!cluster_waited) { /* the partner's barriers are initialized (split_k.cuh) */
            __syncwarp(); /* (.aligned: the whole warp, converged after the loops' waits) */
            cluster_wait();
            cluster_waited = true;
        }
        if (rank != 0) { /* the partner: its sums to the leader, which stores the tile */
            split_post_partial<BT, cfg::OUT_LD>(sm.split_bars, out_s + warpgroup * BT * cfg::OUT_LD, fin, warpgroup,
                                                warp_in_wg * 16 + g8, t4, red_phase);
            red_phase ^= 1;
            HFP4_DIAG_PHASE(HFP4_DIAG_PH_WALK_START);
            continue;
        }
        split_wait_partial(sm.split_bars, warpgroup, red_phase);
        store_tile<BT, W_FP32, MINB>(*pk, d_map, tile, wtile, dgroup, fin, out_s, headers, warpgroup, tid, lane, true);
        split_release_buffer(sm.split_bars, warpgroup);
        red_phase ^= 1;
    } else if (!HFP4_DIAG_SKIP_STORE(p)) { /* (timing-only builds: HFP4_DIAG_NO_EPILOGUE) */
        store_tile<BT, W_FP32, MINB>(*pk, d_map, tile, wtile, dgroup, fin, out_s, headers, warpgroup, tid, lane);
    }
    HFP4_DIAG_PHASE(HFP4_DIAG_PH_STORED);
    HFP4_DIAG_PHASE(HFP4_DIAG_PH_WALK_START);
    }
    HFP4_DIAG_PHASE(HFP4_DIAG_PH_WALK_END);
    if constexpr (cfg::BALANCE)
        if (p.balanced == 2 && p.d_zero_padding) zero_padding_tiles<BT>(*pk, sm.live_prefix, warpgroup * 128 + tid);
    if (BT == 128 && p.d_tma && tid == 0) bulk_wait_all(); /* the last TMA stores, before the CTA's end */
    if constexpr (SPLIT) { /* no CTA of the cluster exits while its partner may still write to it */
        __syncwarp();
        if (!cluster_waited) cluster_wait();
        cluster_arrive();
        cluster_wait();
    }
    if (threadIdx.x == 0) HFP4_DIAG(HFP4_DIAG_EXIT);
}
