/*
 * split_k.cuh - the decode tile's K-split (opt-in: HFP4_SM90_SPLIT=1, sm90_plan.c says why it is
 * off): when a launch has few live items (at most half the CTAs:
 * the tensor-parallel shards at T = 1, e.g. V4-Flash TP8 w13, 24 items), the two CTAs of a cluster
 * take the two halves of the same items' K, and the partner (rank 1) hands its FP32 sums to the
 * leader (rank 0) through distributed shared memory; the leader adds them and stores the tile.
 *
 * NOTE: measured (H200, bench/RESULTS.md v12): TP8 w13 masked graph T = 1 0.37 -> 0.42 TB/s. At
 * V4-Flash T = 1 (192 items on 264 CTAs) it balances the SMs as designed (the busiest streams 3
 * halves, 48 chunks, instead of 2 whole items, 64: the cluster's CTAs land on different SMs, CTA c
 * and c + 132 on one), and the streaming ends ~1.9 us earlier, but the reduction, the cluster's exit
 * and the busy CTAs (no free SM slots for the next kernel's start under PDL) take it back: w13 +-0,
 * w2 -3 %, the layer -6 %; so the bound is half the CTAs.
 * The reduction is FP32 and deterministic: the leader adds the partner's sums of its own 64 x BT
 * block, in a fixed order, into the transpose buffer its epilogue writes anyway (not bit-identical
 * to an unsplit launch, whose sum runs in another order; whether a launch splits depends on its
 * live items). No global
 * workspace (hfp4_gemm allocates nothing) and no atomics.
 *
 * Protocol, per consumer warpgroup (128 threads on each side, each thread its own fragment):
 * - partner: wait until the leader's transpose buffer is free (FREE, arrived by the leader's threads
 *   after their last read of it), write the sums into it at the positions the leader's thread of
 *   the same index writes its own (st.shared::cluster), arrive on the leader's POSTED barrier
 *   (release, cluster scope); then go on to its next item without an epilogue.
 * - leader: wait for POSTED (acquire, cluster scope), store fin + the partner's sums (store_tile's
 *   add_partial), arrive on the partner's FREE.
 * Both sides count the same items, so one phase bit per thread (red_phase) serves both barriers.
 * The barriers are initialized before the cluster's first arrival (cluster_arrive at the start,
 * cluster_wait before the first remote access), and no CTA exits while its partner may still
 * write to it (a cluster barrier at the end).
 */
#pragma once
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"
#include "promote.cuh"
#include "ptx.cuh"
#include "tile_config.cuh"

#define HFP4_SPLIT_POSTED(wg) (wg)     /* leader's: the partner's sums are in the transpose buffer */
#define HFP4_SPLIT_FREE(wg) (2 + (wg)) /* partner's: the leader's transpose buffer may be written   */

/* Whether this launch splits: the kernel was launched in pairs (p.split == 2) and the live items
 * (balanced walks only: masked prefix, or computing token tiles x weight tiles) are few enough.
 * Every CTA computes it from the same prefix, so the two CTAs of a cluster agree. */
template <int BT>
static __device__ __forceinline__ bool split_active(const hfp4_sm90_gemm_params &p, const int32_t *prefix) {
    if (p.split != 2 || p.w_chunks < 2) return false; /* (a part of no chunks would hang: the plan asks for 8) */
    int64_t live;
    if (p.balanced == 1) live = prefix[p.num_groups];
    else if (p.balanced == 2) live = (int64_t)prefix[2 * (((int32_t)p.tiles_m + 31) / 32)] * p.tiles_n;
    else return false;
    return live <= p.split_max_items;
}

/* The chunks of an item this CTA computes: the leader the first floor(chunks / 2) (it also stores
 * the tile), the partner the rest; all of them without a split */
static __device__ __forceinline__ int64_t split_first_chunk(bool on, uint32_t rank, int64_t chunks) {
    return on && rank ? chunks / 2 : 0;
}
static __device__ __forceinline__ int64_t split_chunk_count(bool on, uint32_t rank, int64_t chunks) {
    return on ? (rank ? chunks - chunks / 2 : chunks / 2) : chunks;
}

/* The barriers (thread 0, before the kernel's __syncthreads and cluster_arrive) */
static __device__ __forceinline__ void split_init_barriers(uint64_t *bars) {
    for (int i = 0; i < 4; i++) mbar_init(&bars[i], 128);
}

/* Partner: its warpgroup's sums (absolute units) into the leader's transpose buffer os (this CTA's
 * own address of the same buffer; cfg::OUT_LD floats a token column), positions as store_tile's */
template <int BT, int OUT_LD>
static __device__ __forceinline__ void split_post_partial(uint64_t *bars, const float *os, const sm90_fin<BT> &fin,
                                                          int warpgroup, int r0, int t4, uint32_t red_phase) {
    mbar_wait_cluster(&bars[HFP4_SPLIT_FREE(warpgroup)], red_phase ^ 1);
    const uint32_t base = cluster_map(smem_addr(os), 0);
#pragma unroll
    for (int j = 0; j < BT / 8; j++) {
        const int c = 8 * j + 2 * t4;
        st_cluster_f32(base + (c * OUT_LD + r0) * 4, fin.v[4 * j + 0]);
        st_cluster_f32(base + ((c + 1) * OUT_LD + r0) * 4, fin.v[4 * j + 1]);
        st_cluster_f32(base + (c * OUT_LD + r0 + 8) * 4, fin.v[4 * j + 2]);
        st_cluster_f32(base + ((c + 1) * OUT_LD + r0 + 8) * 4, fin.v[4 * j + 3]);
    }
    mbar_arrive_cluster(cluster_map(smem_addr(&bars[HFP4_SPLIT_POSTED(warpgroup)]), 0));
}

/* Leader: the partner's sums are in the transpose buffer (before store_tile with add_partial) */
static __device__ __forceinline__ void split_wait_partial(uint64_t *bars, int warpgroup, uint32_t red_phase) {
    mbar_wait_cluster(&bars[HFP4_SPLIT_POSTED(warpgroup)], red_phase);
}

/* Leader: this thread has read the transpose buffer for the last time in this item (after store_tile) */
static __device__ __forceinline__ void split_release_buffer(uint64_t *bars, int warpgroup) {
    mbar_arrive_cluster(cluster_map(smem_addr(&bars[HFP4_SPLIT_FREE(warpgroup)]), 1));
}
