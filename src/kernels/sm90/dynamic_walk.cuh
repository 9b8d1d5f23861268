/*
 * dynamic_walk.cuh - the dynamic walk of the decode tiles and of the 128-token tile's contiguous
 * items: each CTA's items after its first come from a counter of the launch's own, so a CTA that
 * runs faster takes more of them (the balanced walks' ranks, work_items.cuh, or the items in raster
 * order, handed out in the order the CTAs ask for them).
 *
 * NOTE: why (make DIAG=1 timelines, H200, bench/RESULTS.md v13): of the two CTAs that share an SM, the
 * one dispatched first (older warps) runs ~1.6x faster than the other while both compute (the warp
 * schedulers favour older warps), on all 132 SMs: V4-Flash masked T = 8, 5 items each, the older
 * CTAs exit at 78.6 us on average, the younger at 98.2 (w13); 46.3 vs 55.9 (w2). The younger CTA
 * then runs its last items alone. Which CTA is the older one cannot be known from blockIdx (a few
 * SMs get their first CTA after others' second), so the static ranks cannot weigh it; a counter lets
 * the faster CTA simply take the next item. Measured with one counter per device (masked graph, 3
 * rounds): w13 T = 8 3.46 -> 3.90 TB/s, T = 32 4.01 -> 4.19, T = 128 3.86 -> 3.99; w2 +3...+4 %;
 * the contiguous layout +3...+8 %; T = 1 level; the TP8 shards, about 2 items per CTA or 2-chunk
 * items, -5...-11 %: hence only from 3 items per CTA and 8 chunks per item (dyn_wanted).
 * (Tried and dropped: the two CTAs of an SM as two virtual CTAs of one 768-thread CTA sharing a
 * counter in shared memory: slower than the plain two CTAs almost everywhere; RESULTS v13.)
 *
 * How: item 0 of CTA c is rank c (static, so the start-up waits on no global atomic); each later
 * item's rank is gridDim.x + atomicAdd(counter, 1), fetched by producer warp 0's lane 0 when its walk
 * needs the next item (the producer runs up to STAGES chunks ahead of the consumers, which hides the
 * atomic's round trip) and handed to the other producer warps through a ring of 16 slots in shared
 * memory (slot = item index mod 16; each slot holds (item index + 1, rank) in one 8-byte word, zeroed
 * at the start, so 0 is never a posted item: warp 0 fetches item J only after its wait for a free
 * stage for its last chunk before it, and a warp that has not read slot j publishes its next chunk
 * within 4 of item j's first, so warp 0 leads it by fewer than STAGES + 7 chunks (a review's count,
 * checked in a model of the 4 warps); the decode tiles' dynamic items have at least 8 chunks, so fewer
 * than 16 items). The consumers need no walk: the producer posts every item's header (dynamic
 * needs item headers). The counter resets itself: every CTA counts itself done after its last fetch,
 * and the last one zeroes both words before the grid completes (a next launch reads them only after
 * its grid-dependency wait).
 * Whose counter: slot p.dyn_slot of a module array (one per device and context, zero at load), which
 * the launcher gives each launch so that no two launches that may run at once share one (dyn_slots.h:
 * a slot per stream outside a capture, a slot of its own for each captured launch, reused only after
 * its graph and every instance of it are gone).
 * No slot left: the static walk.
 *
 * The 128-token tile's items of the contiguous and psum layouts (without the narrow-block split) come
 * from the counter too, item by item in item_tiles' raster order (dyn_walk_next), where the plan asks
 * for it and the launcher gives the launch a slot (more items than CTAs).
 * NOTE: why (bench/RESULTS.md v48-v49): under a fixed stride the CTAs drift apart when their items
 * differ in length (narrow items: an expert's last tile computes 8-96 columns), and an expert's
 * token tiles, side by side in the raster order, then read its weight panels from DRAM again.
 * H200, V4-Flash w13 T = 16384, one launch (ncu): DRAM reads 7.04 -> 2.77 GB, 4.38 -> 4.09 ms;
 * interleaved rows: w13 / w2 T = 8192 -11 / -10 %, T = 16384 -6 / -4 %, T = 4096 level to -2 %.
 * Every such item takes a stage (a computing item its chunks, an all-padding tile its header's, and so
 * does an item with nothing to write, resolve_tile false: the psum layout's rows past its groups,
 * which the static walk skips), so items of one stage lag by fewer than STAGES + 7 (5 stages at this
 * tile: 12 <= 16, asserted in producer.cuh). Each all-padding tile is one atomic round trip (layouts
 * padded for the worst case pay it in the contiguous layout, whose padding tiles are written as
 * zeros; the psum layout's walk ends before its rows past the groups: psum_walk_items). Taking the
 * next item's rank an item ahead (the atomic under the item's chunks) measured level (v49): the
 * 5-stage pipeline already hides the round trip.
 */
#pragma once
#include <stdint.h>

#include "dyn_counter.cuh"

#include "fp8_fp4_gemm_params.h"
#include "ptx.cuh"
#include "tile_config.cuh" /* HFP4_SM90_DYN_RING */
#include "work_items.cuh"

/* per slot: dyn_counter.cuh's two words ([0] ranks handed out beyond gridDim.x, [1] CTAs done) */
__device__ uint32_t hfp4_sm90_dyn_slots[HFP4_SM90_DYN_SLOTS][2];

typedef struct sm90_dyn {
    unsigned long long *ring; /* shared: HFP4_SM90_DYN_RING words ((item index + 1) << 32 | rank) */
    bool on;
    int slot, pwarp, lane;
    int32_t items; /* the 128-token tile's walk ends here (p.tiles_total; psum: psum_walk_items) */
} sm90_dyn;

/* Whether a launch walks dynamically: a slot, item headers, the balanced walk (ranks), no K-split, and
 * enough items for it to pay (live: the balanced walk's items; the same in every CTA) */
static __device__ __forceinline__ bool dyn_wanted(const hfp4_sm90_gemm_params &p, bool headers, bool split,
                                                  int64_t live, int64_t chunks) {
    return p.dyn_slot >= 0 && headers && !split && p.balanced != 0 && live >= 3 * (int64_t)gridDim.x && chunks >= 8;
}

static __device__ __forceinline__ unsigned long long dyn_ring_load(const unsigned long long *slot) {
    unsigned long long v;
    asm volatile("ld.volatile.shared.u64 %0, [%1];" : "=l"(v) : "r"(smem_addr(slot)) : "memory");
    return v;
}

/* Before each step of the walk: w.next := the rank of item w.taken (items from 1 on: the counter's) */
static __device__ __forceinline__ void dyn_take(const sm90_dyn &d, sm90_walk &w) {
    if (!d.on) return;
    if (w.taken > 0) {
        unsigned long long *slot = d.ring + (w.taken % HFP4_SM90_DYN_RING);
        if (d.pwarp == 0) {
            if (d.lane == 0) {
                const uint32_t r = dyn_counter_take(hfp4_sm90_dyn_slots[d.slot]);
                *(volatile unsigned long long *)slot = ((unsigned long long)(uint32_t)(w.taken + 1) << 32) | r;
            }
            __syncwarp();
        }
        /* the other producer warps lag warp 0 by a chunk or two: a sleeping poll */
        unsigned long long v;
        while (((v = dyn_ring_load(slot)) >> 32) != (unsigned long long)(uint32_t)(w.taken + 1)) __nanosleep(128);
        w.next = (int32_t)(uint32_t)v;
    }
    w.taken++;
}

/* After the walk (producer warp 0's lane 0): count this CTA done; the last one resets the counter */
static __device__ __forceinline__ void dyn_finish(const sm90_dyn &d) {
    if (!d.on || d.pwarp != 0 || d.lane != 0) return;
    dyn_counter_done(hfp4_sm90_dyn_slots[d.slot]);
}

/* One step of the walk: the next item, false at the end. When d.on, the 128-token tile's items are
 * simply the counter's, every item in raster order (item_tiles); the decode tiles' counter gives
 * ranks, which walk_next_by turns into items */
template <int BT>
static __device__ __forceinline__ bool dyn_walk_next(const sm90_dyn &d, const hfp4_sm90_gemm_params &p,
                                                     const int32_t *prefix, sm90_walk &w, const int32_t G) {
    dyn_take(d, w);
    if (BT == 128 && d.on) {
        if (w.next >= d.items) return false;
        w.item = w.next;
        w.lay = probe_layout<BT>(p, w.item);
        return true;
    }
    return walk_next_by<BT>(p, prefix, w, G);
}

/* The items of walker `start` of G (a CTA: blockIdx.x of gridDim.x; the K-split's clusters walk as one:
 * split_k.cuh) through walk_next_by (work_items.cuh), the later ones from the counter when dyn.on */
#define FOR_EACH_ITEM(BT, p, prefix, item, lay, start, G, dyn)                                                      \
    for (sm90_walk item##_w = {(int32_t)(start), 0, 0, 0u, 0, 0, 0};                                                 \
         dyn_walk_next<BT>((dyn), (p), (prefix), item##_w, (G));)                                                    \
        if (const int32_t item = item##_w.item, lay = item##_w.lay; true)
