/*
 * fw_dynamic_tiles.cuh - the FP8 x FP8 kernel's contiguous form with its tiles handed out in the
 * order the CTAs ask for them (an A/B build: -DHFP4_FW_DYNAMIC_TILES=1, off by default), instead of
 * tile c, c + grid, c + 2 grid, ... for CTA c.
 *
 * NOTE: why (ncu, H200, V4-Flash w13 T = 16384, one launch each, bench/RESULTS.md v48): the SKIP
 * kernels, whose tiles with an idle warpgroup take about half a tile's time, moved 14.8 GB from DRAM
 * against the plain kernel's 7.1 GB (the weights, activations and D are ~5.7 GB): DRAM 75 % busy
 * against 43 %, L2 94 % against 75 %, 4.10 against 3.41 ms. With a fixed stride the CTAs whose
 * tiles are shorter run ahead of the others, so tiles that share a weight panel (an expert's token
 * tiles, side by side in the raster order) no longer run at the same time, and the panel is read
 * from DRAM again. Handed out in order, the tiles in flight stay ~grid consecutive ones whatever
 * their lengths. Prediction: the SKIP kernels' DRAM traffic back near the plain kernel's, and
 * their half tiles then a gain (V4-Flash w13 T = 16384 ~3.2 ms against 3.41).
 *
 * How (as dynamic_walk.cuh for the FP4 decode tiles): a CTA's tile 0 is blockIdx.x; its tile j + 1
 * is gridDim.x + atomicAdd(counter, 1), fetched by the producer thread as it starts tile j and
 * posted, once tile j's first stage is out, in a ring of FW_DYN_RING words in shared memory (word
 * j % FW_DYN_RING holds (j + 1) << 32 | tile, zeroed at the start), from which the factor warps and
 * the consumers read it (the consumers read tile j + 1 as they start tile j: posted after the first
 * stage, whose wait for a free stage needs only their earlier tiles, it cannot wait for them). Every
 * tile of the sequence takes at least one stage (a padding tile one empty stage: fw_empty_stage),
 * so the consumers lag the producer by at most STAGES + 1 tiles and the factor warps, which take
 * turns at the stages, by at most STAGES + FW_SCALE_WARPS (a review's count): the ring is never
 * overwritten unread. The sequence ends at its first tile >= tiles; the producer thread that
 * fetches it counts its CTA done, and the last CTA zeroes the counter for the launch after it
 * (which reads it only after this grid completes: one slot a stream, or a captured launch's own,
 * dyn_slots.h; HFP4_SM90_DYNAMIC=0, or a launch with no more tiles than CTAs, takes none). No slot:
 * the fixed stride, with the padding tiles' empty stages as above.
 * Under racecheck the ring's polls may show as hazards on its words: they are the protocol.
 */
#pragma once
#include <stdint.h>

#include "dyn_counter.cuh"
#include "fp8_fp4_gemm_params.h" /* HFP4_SM90_DYN_SLOTS */
#include "ptx.cuh"

#ifndef HFP4_FW_DYNAMIC_TILES
#define HFP4_FW_DYNAMIC_TILES 0
#endif
#define FW_DYN_RING 16 /* > STAGES + FW_SCALE_WARPS (the roles' lag, above) */

#if HFP4_FW_DYNAMIC_TILES
/* per slot: dyn_counter.cuh's two words */
__device__ uint32_t hfp4_fw_dyn_counters[HFP4_SM90_DYN_SLOTS][2];
#endif

/* A CTA's tile sequence */
typedef struct fw_seq {
    unsigned long long *ring; /* shared: FW_DYN_RING words ((j + 1) << 32 | tile j) */
    int32_t slot;             /* the launch's counter; -1: the fixed stride */
} fw_seq;

/* Tile j of the CTA's sequence (tile j - 1 < tiles: nothing is posted after the end) */
static __device__ __forceinline__ int64_t fw_seq_tile(const fw_seq &q, int64_t j) {
    if (q.slot < 0 || j == 0) return (int64_t)blockIdx.x + j * (int64_t)gridDim.x;
    const uint32_t w = smem_addr(q.ring + j % FW_DYN_RING);
    for (;;) {
        unsigned long long v;
        asm volatile("ld.volatile.shared.u64 %0, [%1];" : "=l"(v) : "r"(w) : "memory");
        if ((v >> 32) == (unsigned long long)(j + 1)) return (int64_t)(uint32_t)v;
        __nanosleep(64); /* (the producer is usually stages ahead: rarely taken) */
    }
}

/* The producer thread, starting tile j (t < tiles): tile j + 1 (the fetch; fw_seq_post posts it) */
static __device__ __forceinline__ int64_t fw_seq_fetch(const fw_seq &q, int64_t t) {
#if HFP4_FW_DYNAMIC_TILES
    if (q.slot >= 0) return (int64_t)dyn_counter_take(hfp4_fw_dyn_counters[q.slot]);
#endif
    return t + (int64_t)gridDim.x;
}

/* The producer thread, once tile j's first stage is out: tile j + 1 (tn, fw_seq_fetch's) posted for
 * the other roles; after the CTA's last fetch (tn >= tiles) its count (dyn_counter_done) */
static __device__ __forceinline__ void fw_seq_post(const fw_seq &q, int64_t j, int64_t tn, int64_t tiles) {
#if HFP4_FW_DYNAMIC_TILES
    if (q.slot < 0) return;
    const unsigned long long v = ((unsigned long long)(uint32_t)(j + 2) << 32) | (uint32_t)tn;
    asm volatile("st.volatile.shared.u64 [%0], %1;" ::"r"(smem_addr(q.ring + (j + 1) % FW_DYN_RING)), "l"(v)
                 : "memory");
    if (tn >= tiles) dyn_counter_done(hfp4_fw_dyn_counters[q.slot]);
#else
    (void)q, (void)j, (void)tn, (void)tiles;
#endif
}
