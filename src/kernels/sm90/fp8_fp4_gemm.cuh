/*
 * fp8_fp4_gemm.cuh - the SM90 FP8 x FP4 GEMM kernel (dense, m-grouped contiguous / psum, masked).
 *
 * Computes D[m, n] = sum_k (a[m,k] sa[m,k/ga]) (w[n,k] sw[n,k/32]) as D^T = W * A^T: the weights are
 * the register operand of wgmma (64 rows per warpgroup), the tokens are wgmma's N dimension (BT =
 * 8..128), so decode-sized batches waste nothing on padding and the FP4 -> FP8 conversion happens
 * in registers from 16-byte shared-memory loads of the repacked layout (sm90_layout.h), which the
 * producer bulk-copies into the pipeline stages.
 *
 * CTA = 3 warpgroups: WG0 and WG1 each own 64 weight rows of a 128-row tile; WG2's first warp is
 * the producer, which TMA-loads the activation tile (BT x 128 bytes per 128-K chunk, 128B swizzle),
 * bulk-copies both warpgroups' weights and weight scales (8 KB + scales per chunk) and copies the
 * activation scales into shared memory (cp.async, or converted by the producer for UE8M0 forms),
 * one pipeline stage per chunk.
 *
 * Exactness: a prmt table turns each FP4 value into e4m3 exactly. In a folded chunk (UE8M0 scales
 * within 11 binades of the row's largest, decided by the repack per 64-row tile and 128-K chunk)
 * the table carries the relative exponent, so the chunk's 4 k32 steps chain into one accumulator
 * that is promoted once with 2^(e_max-133) x the activation scale. Otherwise (FP32 scales, a wide
 * exponent spread, or 1x32 activation scales) every k32 step is promoted with its own scales:
 * slower, exact for any scale.
 *
 * Where the parts live: this file holds only the kernel (shared memory carve-up and barriers, the
 * split into producer and consumers). producer.cuh: the producer warpgroup's loop (stage_copies.cuh:
 * its TMA and bulk copies). consumer.cuh: the consumers' item loop with both chunk loops and the
 * general chunk path (folded or per-32 chunks, NACC accumulators); consumer_pipelined.cuh: the
 * steps of the look-ahead loop of an all-folded item; promote.cuh: promotion of accumulators into
 * the FP32 sums (fin) and fin's units; epilogue.cuh: storing a tile of D (transpose, vector and
 * element stores, all-padding tiles; tma_store.cuh: the 128-token tile's TMA store);
 * fp4_to_fp8.cuh: the conversion; wgmma_fp8_rs.cuh: the wgmmas; scales.cuh: scale values;
 * tile_config.cuh: shapes, budgets, shared-memory offsets and sm90_smem; work_items.cuh: how a
 * persistent CTA walks its items; item_header.cuh: the
 * items' headers, which the producer posts and the consumers read.
 *
 * NOTE: the parts are inline functions, and the generated code is the one of the single kernel
 * body they were split from (cuobjdump -sass compared per instantiation; what still differs is
 * instruction order and register choice, see the commit that split them). What that took:
 * - p goes by value into run_producer and run_consumers: their copy of the __grid_constant__
 *   parameter tells the compiler no store or asm in their loops changes it (by reference, its
 *   loads stayed in the loops and the loops were unrolled differently). Functions called from
 *   run_consumers copy from the kernel parameter itself (*pk): a copy of the copy kept the item
 *   loop's loads in the loop.
 * - what the kernel body computed once for all warpgroups (chunks, gran32, warpgroup, tid, lane)
 *   is computed here and passed down, not recomputed in each role.
 * - the shared memory is carved here from tile_config.cuh's offsets: carved in a function, the
 *   alignment offset folded into the region offsets differently (a few address instructions).
 * - the chunk loops stay in run_consumers (see there).
 */
#pragma once
#include <cuda.h>
#include <stdint.h>

#include "consumer.cuh"
#include "diag_timeline.cuh"
#include "fp8_fp4_gemm_params.h"
#include "producer.cuh"
#include "ptx.cuh"
#include "split_k.cuh"
#include "tile_config.cuh"

/* SPLIT: the K-split kernel (split_k.cuh), launched in clusters of two CTAs. G32: the kernel for 1x32
 * activation scales (consumer_pipelined.cuh), a copy of its own so that the
 * 1x128 kernels' code stays as it was (with both paths in one kernel, 1x128 decode lost 2-9 %,
 * H200). EARLY: the early start (the NOTE at grid_dependency_wait below), a copy of its own for
 * the same reason (its code in the other kernels cost their launches 1-3 %, bench/RESULTS.md v33) */
template <int BT, bool W_FP32, int MINB = 1, bool SPLIT = false, bool G32 = false, bool EARLY = false>
__global__ void __launch_bounds__(384, MINB)
    hfp4_sm90_fp8_fp4_gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap d_map,
                                  const __grid_constant__ CUtensorMap a_narrow_map,
                                  const __grid_constant__ hfp4_sm90_gemm_params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    /* (the 128-token tile's TMA-store epilogue has no add_partial: split_k.cuh serves the 8-token tile) */
    static_assert(!SPLIT || (BT == 8 && MINB == 2), "the K-split is built for the two-CTA 8-token tile only");
    static_assert(!G32 || (!SPLIT && !W_FP32 && BT <= HFP4_SM90_G32_MAX_BT), "G32: UE8M0 weight scales, no K-split");
    static_assert(!EARLY || !SPLIT, "the early start is built without the K-split");
    typedef sm90_tile_config<BT, W_FP32, MINB, G32> cfg;
    constexpr int STAGES = cfg::STAGES;
    extern __shared__ uint8_t smem_raw[];
    /* aligned by pointer arithmetic on smem_raw (not through an integer cast), so the compiler
     * still knows every access below is to shared memory and emits LDS/STS, not generic loads */
    uint8_t *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    sm90_smem sm;
    sm.a_tiles = smem + cfg::A_TILES_OFF;
    sm.w_stages = smem + cfg::W_STAGES_OFF;
    sm.ws_stages = smem + cfg::WS_STAGES_OFF;
    sm.a_scale_s = (float *)(smem + cfg::A_SCALES_OFF);
    sm.out_s = (float *)(smem + cfg::OUT_OFF);
    sm.live_prefix = (int32_t *)(smem + cfg::PREFIX_OFF);
    sm.full = (uint64_t *)(smem + cfg::FULL_OFF);
    sm.empty = (uint64_t *)(smem + cfg::EMPTY_OFF);
    sm.split_bars = (uint64_t *)(smem + cfg::SPLIT_BARS_OFF);
    sm.dyn_ring = (unsigned long long *)(smem + cfg::DYN_RING_OFF);

    const int warpgroup = threadIdx.x / 128;
    const int tid = threadIdx.x % 128;
    const int lane = threadIdx.x % 32;
    const unsigned long long diag_entry = HFP4_DIAG_NOW(); /* (make DIAG=1 only) */
    if (threadIdx.x == 0) {
        /* NOTE: every thread that touches a stage's shared memory arrives itself (32 producer lanes,
         * 256 consumer threads) rather than one lane after __syncwarp: same cost in practice, and
         * the ordering is then per thread, which compute-sanitizer's racecheck can follow. */
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&sm.full[s], 33); /* 32 producer lanes + the elected lane's expect_tx arrival */
            mbar_init(&sm.empty[s], 256);
        }
        if constexpr (SPLIT) split_init_barriers(sm.split_bars);
        if (p.dyn_slot >= 0) /* (dynamic_walk.cuh: 0 is no posted item) */
            for (int i = 0; i < HFP4_SM90_DYN_RING; i++) sm.dyn_ring[i] = 0;
        mbar_fence_init();
    }
    /* NOTE: programmatic dependent launch (fp8_fp4_gemm.cu launches with programmatic stream
     * serialization): this grid may be scheduled while the kernel before it runs, and reads nothing
     * in global memory (layout data, activations, scales, weights: a preceding kernel may write any
     * of them) before the grids before it have completed, except in the EARLY kernels (the
     * caller's promise that the layout and the weights are not written by them: hfp4.h,
     * HFP4_GEMM_OVERLAP_PREVIOUS), where the live prefix is built and the producer walks to its
     * first item and sends that item's first 4 chunks of weights before that wait
     * (load_first_weights_early), and the consumers wait for it before their first stage. Either way a thread lets the next kernel in only after its own
     * wait, so that when an hfp4 kernel starts, everything enqueued before the kernel just before it
     * has completed: the guarantee an early-starting GEMM after an hfp4 GEMM relies on. What
     * overlaps: a launch's fixed cost (~3 us on the H200) and the set-up above (with EARLY also
     * the start-up chain and the first weights) with the previous kernel's tail. */
    if constexpr (!EARLY) {
        grid_wait_then_let_next_in();
    }
    if (threadIdx.x == 0) {
        HFP4_DIAG_AT(HFP4_DIAG_ENTRY, diag_entry);
        HFP4_DIAG(HFP4_DIAG_PDL);
        HFP4_DIAG_COUNT(0u);
    }
    if constexpr (cfg::BALANCE) {
        if (p.balanced == 2) { /* the contiguous layout's computing tiles: all threads, then one warp */
            if (BT == 8 && p.narrow == 3) { /* the narrow-block flags (work_items.cuh), zeroed first */
                const int32_t W = ((int32_t)p.tiles_m + 31) / 32;
                for (int32_t i = (int32_t)threadIdx.x; i < (W + 15) / 16; i += 384) sm.live_prefix[2 * W + 1 + i] = 0;
                __syncthreads();
            }
            build_compute_mask<BT>(p, sm.live_prefix, (int)threadIdx.x, 384);
            __syncthreads();
            if (threadIdx.x / 32 == 1) build_mask_prefix(p, sm.live_prefix, lane);
        } else if (p.balanced == 1 && threadIdx.x / 32 == 1) {
            build_live_prefix<BT>(p, sm.live_prefix, lane);
            if (lane == 0) HFP4_DIAG(HFP4_DIAG_PREFIX);
        }
    }
    if constexpr (BT == 128) {
        /* the narrow-block split with the row left to the launch (work_items.cuh: split_row_auto):
         * the blocks with more than 8 rows, counted as the 8-token launch counts them */
        if (p.narrow == 2 && p.split_row == 0) { /* (the same in every thread: the barrier is safe) */
            static_assert((HFP4_SM90_SPLIT_MAX_TILES + 15) / 16 <= 384, "a block per thread of the CTA");
            const int32_t over8 = __syncthreads_count((int64_t)threadIdx.x < p.tiles_m &&
                                                      contiguous_row_real(p, (int64_t)threadIdx.x * BT + 8));
            if (threadIdx.x == 0) sm.live_prefix[0] = split_row_auto(over8);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) HFP4_DIAG(HFP4_DIAG_SETUP);
    /* the K-split (split_k.cuh): this CTA's barriers are initialized (the partner waits for that
     * before its first remote access); whether this launch splits, and this CTA's part */
    bool split_on = false;
    uint32_t rank = 0;
    if constexpr (SPLIT) {
        cluster_arrive();
        split_on = split_active<BT>(p, sm.live_prefix) && item_headers_on<BT, W_FP32, MINB, G32>(p.a_gran_k == 32);
        rank = cluster_cta_rank();
    }

    const int64_t chunks = p.w_chunks;
    const bool gran32 = G32 || p.a_gran_k == 32; /* (the launcher picks G32 kernels for 1x32 scales only) */

    if (warpgroup == 2) {
        run_producer<BT, W_FP32, MINB, SPLIT, G32, EARLY>(p, &a_map, &a_narrow_map, sm, chunks, gran32, lane, split_on, rank);
        if constexpr (SPLIT) { /* (split_k.cuh) the start's cluster barrier, then the one at the end */
            cluster_wait();
            cluster_arrive();
            cluster_wait();
        }
        return;
    }
    if constexpr (EARLY) { /* (see the NOTE at the wait above) */
        grid_wait_then_let_next_in();
    }
    run_consumers<BT, W_FP32, MINB, SPLIT, G32>(p, &p, &d_map, sm, chunks, gran32, warpgroup, tid, lane, split_on, rank);
#else
    /* Built for another architecture: never launched there (the host checks the device). */
    __trap();
#endif
}
