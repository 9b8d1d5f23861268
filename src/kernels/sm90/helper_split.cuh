/*
 * helper_split.cuh - the two-CTA 8-token tile's helper split (compile-time opt-in:
 * HFP4_SM90_HELPERS=1, off in every normal build): when a launch has more live items than SMs but
 * fewer than its CTAs (V4-Flash T = 1: 192 items on 264 CTAs, two an SM), the items of the CTAs
 * that share an SM with another busy CTA give the second half of their K to a CTA that would have
 * had no item, and take its FP32 sums back through global memory before storing the tile.
 *
 * NOTE: why (bench/RESULTS.md v30, the corrected DIAG timeline, w13 masked T = 1): CTA r < 132 is
 * alone on its SM with one item and done ~14-16 us after entry; CTA 132 + r shares SM r with CTA r
 * and the 60 such SMs stream 64 chunks, done at ~21.6 us (exit 22.7); the 72 CTAs from 192 on have
 * nothing. The K-split over clusters of two (split_k.cuh) balances the SMs the same way but its
 * cluster starts ~0.7 us later and its CTAs with two halves still end last (no gain, v12 and v30).
 * Here no cluster: item r of an owner CTA (132 <= r < L, L live items) keeps chunks [0, C/2), and
 * helper CTA L + j (j = r - 132) streams chunks [C/2, C) of it. So SM r (< 60) streams 32 + 16 chunks
 * and SM 60 + j streams 32 + 16 (the helper shares a solo SM): 48 at most, not 64. Prediction: w13
 * T = 1 kernel ~22.7 -> ~19.5 us.
 *
 * Protocol, per consumer warpgroup (each thread its own four sums of wgmma's fragment, the same
 * positions in owner and helper, in absolute units): the helper stores its sums into its slot
 * (hfp4_sm90_helper_sums), its warpgroup meets at a barrier, and its thread 0 releases the slot's
 * flag (gpu scope); the owner's thread 0 acquires the flag, its warpgroup meets, every thread adds
 * the slot's sums (L2 reads) to its own, the warpgroup meets again and thread 0 clears the flag.
 * The sum is FP32 and deterministic (owner's half + helper's half; not bit-identical to an unsplit
 * launch, whose sum runs in one chain). The owner only waits on a helper, never the reverse, and
 * every CTA of the persistent grid is assumed resident, so the wait ends (bounded all the same: after
 * ~1 s the owner traps, so a flaw shows as a launch error, never as a hang). Workspace: that of the
 * launch's dyn slot modulo HFP4_SM90_HELPER_SLOTS (38 MB of static device memory in such a build).
 * NOTE: a build for measuring only: dyn_slots.h keeps launches that may run at once on different
 * slots, but two of them whose slots are equal modulo 128 would share a workspace (wrong sums, or
 * the trap); the bench runs one launch at a time. A product version needs a workspace per slot,
 * handed out with it, and grids that cannot outnumber the free SM slots (green contexts, MPS).
 */
#pragma once
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"
#include "ptx.cuh"
#include "work_items.cuh"

#ifndef HFP4_SM90_HELPERS
#define HFP4_SM90_HELPERS 0
#endif
#define HFP4_SM90_HELPER_SLOTS 128 /* workspaces: a launch takes dyn slot % 128 (see the NOTE below) */
#define HFP4_SM90_HELPER_MAX 72    /* helpers a launch (D <= G / 4 = 66 on an H200, as L + D <= G)  */

#if HFP4_SM90_HELPERS
/* [slot][helper][warpgroup][thread]: a helper warpgroup's four sums a thread; and its flag */
__device__ float4 hfp4_sm90_helper_sums[HFP4_SM90_HELPER_SLOTS][HFP4_SM90_HELPER_MAX][2][128];
__device__ unsigned hfp4_sm90_helper_flags[HFP4_SM90_HELPER_SLOTS][HFP4_SM90_HELPER_MAX][2];
#endif

enum { HFP4_HS_NONE = 0, HFP4_HS_OWNER = 1, HFP4_HS_HELPER = 2 };

/* This CTA's part: its walk's start (a helper walks from its owner's rank), its chunks [kb, kb + nck)
 * of each item, and for an owner or helper the index j of the pair */
typedef struct sm90_hs {
    int kind;
    int32_t walker, j;
    int64_t kb, nck;
} sm90_hs;

/* The same in producer and consumers (from the launch's prefix, blockIdx and gridDim only).
 * walker, kb, nck: what the CTA does without helpers. */
template <int BT, int MINB, bool SPLIT>
static __device__ __forceinline__ sm90_hs helper_role(const hfp4_sm90_gemm_params &p, const int32_t *prefix,
                                                      bool headers, int64_t chunks, int32_t walker, int64_t kb,
                                                      int64_t nck) {
    sm90_hs h = {HFP4_HS_NONE, walker, 0, kb, nck};
#if HFP4_SM90_HELPERS
    if constexpr (BT == 8 && MINB == 2 && !SPLIT) {
        if (!headers || p.dyn_slot < 0 || chunks < 8 || p.balanced == 0) return h;
        const int64_t live = balanced_items(p, prefix); /* (work_items.cuh) */
        const int32_t G = (int32_t)gridDim.x, half = G / 2;
        if (p.tiles_total <= (int64_t)G) return h; /* (a grid capped at the items: CTA half + j need not share an SM) */
        const int64_t D = live - half; /* the items of CTAs that share an SM with a busy one */
        if ((G & 1) != 0 || D < 1 || D > HFP4_SM90_HELPER_MAX || live + D > G) return h;
        const int32_t r = (int32_t)blockIdx.x, L = (int32_t)live;
        const int64_t c0 = chunks / 2;
        if (r >= half && r < L) {
            h.kind = HFP4_HS_OWNER;
            h.j = r - half;
            h.nck = c0;
        } else if (r >= L && r < L + (int32_t)D) {
            h.kind = HFP4_HS_HELPER;
            h.j = r - L;
            h.walker = half + h.j;
            h.kb = c0;
            h.nck = chunks - c0;
        }
    }
#endif
    return h;
}

/* Helper warpgroup wg: its sums (absolute units) into its slot, then the slot's flag released */
template <int BT>
static __device__ __forceinline__ void helper_post(const hfp4_sm90_gemm_params &p, const sm90_hs &h, const float *fin,
                                                   int wg, int tid) {
#if HFP4_SM90_HELPERS
    if constexpr (BT == 8) { /* (helper_role gives no other tile a part: four sums a thread) */
    __stcg(&hfp4_sm90_helper_sums[p.dyn_slot % HFP4_SM90_HELPER_SLOTS][h.j][wg][tid], make_float4(fin[0], fin[1], fin[2], fin[3]));
    warpgroup_barrier<true>(wg);
    if (tid == 0)
        asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(&hfp4_sm90_helper_flags[p.dyn_slot % HFP4_SM90_HELPER_SLOTS][h.j][wg]), "r"(1u)
                     : "memory");
    }
#else
    (void)p, (void)h, (void)fin, (void)wg, (void)tid;
#endif
}

/* Owner warpgroup wg: waits for its helper's sums and adds them to its own, then clears the flag */
template <int BT>
static __device__ __forceinline__ void helper_take(const hfp4_sm90_gemm_params &p, const sm90_hs &h, float *fin,
                                                   int wg, int tid) {
#if HFP4_SM90_HELPERS
    if constexpr (BT == 8) { /* (helper_role gives no other tile a part: four sums a thread) */
    unsigned *flag = &hfp4_sm90_helper_flags[p.dyn_slot % HFP4_SM90_HELPER_SLOTS][h.j][wg];
    if (tid == 0) {
        unsigned v, ns = 32;
        for (uint32_t spins = 0;; spins++) {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
            if (v != 0) break;
            if (spins == (1u << 22)) __trap(); /* (~1 s: see the NOTE above) */
            __nanosleep(ns);
            if (ns < 256) ns *= 2;
        }
    }
    warpgroup_barrier<true>(wg);
    const float4 v = __ldcg(&hfp4_sm90_helper_sums[p.dyn_slot % HFP4_SM90_HELPER_SLOTS][h.j][wg][tid]);
    fin[0] += v.x;
    fin[1] += v.y;
    fin[2] += v.z;
    fin[3] += v.w;
    warpgroup_barrier<true>(wg); /* every thread has read the slot */
    if (tid == 0) asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(0u) : "memory");
    }
#else
    (void)p, (void)h, (void)fin, (void)wg, (void)tid;
#endif
}
