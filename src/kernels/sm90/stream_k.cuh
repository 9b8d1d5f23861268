/*
 * stream_k.cuh - the two-CTA 8-token tile's stream-K split (compile-time opt-in:
 * HFP4_SM90_STREAMK=1, off in every normal build): when a launch has more live items than SMs but
 * fewer than its CTAs (V4-Flash T = 1: 192 items on 264 CTAs, two an SM), every CTA streams the
 * same number of chunks: CTA c takes the chunks [c U / G, (c + 1) U / G) of the launch's U = live x C
 * chunks laid end to end (items in walk order, each item's C chunks in K order), so an item falls
 * to two or three CTAs, which add their FP32 sums through global memory before one of them stores
 * the tile.
 *
 * NOTE: why (bench/RESULTS.md v31): the helper split (session 30, helper_split.cuh at f4fb6f4)
 * gave the items of CTAs 132..191 half to CTAs 192..251, assuming CTA r and CTA 132 + r share SM r.
 * The DIAG timeline's SM ids showed the hardware does not place them so: 8 SMs hold two CTAs below
 * 132 (CTA c and c + 84) and still stream two whole items, ending at 23-24 us, and the launch was
 * 1-5 % slower. With equal chunk counts per CTA, no placement leaves an SM more than two CTAs'
 * equal shares.
 *
 * Roles of a CTA's piece of item r (chunks [kb, kb + nck) of it): a piece that starts after chunk 0
 * (only a CTA's first piece can) posts its sums into the CTA's slot of the workspace; the piece
 * holding chunk 0 (only a CTA's last piece can be such a piece and not the whole item) waits for the
 * pieces of the CTAs after it that hold the rest of the item (the first pieces of those CTAs, done
 * early, or a CTA whose whole share lies inside the item, done when the waiting CTA is), adds them in
 * CTA order and stores the tile. Posting pieces never wait, so with every CTA resident the waits
 * end (bounded all the same: after ~1 s the wait traps, so a flaw shows as a launch error, never a
 * hang). The sum is FP32 and deterministic, not bit-identical to an unsplit launch.
 *
 * Protocol per consumer warpgroup (each thread its own four sums of wgmma's fragment, in absolute
 * units): the poster stores its sums, its warpgroup meets, thread 0 releases the flag (gpu scope);
 * the waiter's thread 0 acquires each flag, its warpgroup meets, every thread adds the sums (L2
 * reads), the warpgroup meets again and thread 0 clears the flag. Workspace: the launch's dyn slot
 * modulo HFP4_SM90_SK_SLOTS. NOTE: a build for measuring only: two launches that run at once on
 * slots equal modulo 16 would share a workspace; the bench runs one launch at a time. A product
 * version needs a workspace per dyn slot and a grid that cannot outnumber the SMs' free slots.
 */
#pragma once
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"
#include "ptx.cuh"
#include "work_items.cuh"

#ifndef HFP4_SM90_STREAMK
#define HFP4_SM90_STREAMK 0
#endif
#define HFP4_SM90_SK_SLOTS 16     /* workspaces: a launch takes dyn slot % 16 (see the NOTE above) */
#define HFP4_SM90_SK_MAX_CTAS 320 /* CTAs a launch (an H200's grid is 264)                      */

#if HFP4_SM90_STREAMK
/* [slot][CTA][warpgroup][thread]: a posting CTA's four sums a thread; and its flag */
__device__ float4 hfp4_sm90_sk_sums[HFP4_SM90_SK_SLOTS][HFP4_SM90_SK_MAX_CTAS][2][128];
__device__ unsigned hfp4_sm90_sk_flags[HFP4_SM90_SK_SLOTS][HFP4_SM90_SK_MAX_CTAS][2];
#endif

/* This CTA's share: global chunks [S, E) of U, items (walk ranks) r0..r1; on = 0: no split.
 * (32-bit: U = live x C < 320 x 2^20; the products below in 64 bits) */
typedef struct sm90_sk {
    int32_t on, r0, r1, S, E, U;
} sm90_sk;

enum { HFP4_SK_PLAIN = 0, HFP4_SK_POST = 1, HFP4_SK_WAIT = 2 };

/* A piece of an item: its chunks [kb, kb + nck), its role, and for a waiting piece the last CTA
 * that holds part of the item */
typedef struct sm90_sk_piece {
    int32_t kind, last, kb, nck;
} sm90_sk_piece;

/* The same in producer and consumers (from the launch's prefix, blockIdx and gridDim only; cheap
 * enough to recompute at each item, so no registers hold it across the chunk loops) */
template <int BT, int MINB, bool SPLIT>
static __device__ __forceinline__ sm90_sk stream_k_share(const hfp4_sm90_gemm_params &p, const int32_t *prefix,
                                                         bool headers, int64_t chunks) {
    sm90_sk k = {0, 0, 0, 0, 0, 0};
#if HFP4_SM90_STREAMK
    if constexpr (BT == 8 && MINB == 2 && !SPLIT) {
        if (!headers || p.dyn_slot < 0 || chunks < 8 || chunks > (1 << 20) || p.balanced == 0) return k;
        const int64_t live = balanced_items(p, prefix); /* (work_items.cuh) */
        const int64_t G = gridDim.x;
        if (G > HFP4_SM90_SK_MAX_CTAS || 2 * live <= G || live >= G) return k;
        const int64_t U = live * chunks, S = (int64_t)blockIdx.x * U / G, E = ((int64_t)blockIdx.x + 1) * U / G;
        k.on = 1; /* (U / G > C / 2 >= 4: a share is never empty) */
        k.U = (int32_t)U;
        k.S = (int32_t)S;
        k.E = (int32_t)E;
        k.r0 = (int32_t)(S / chunks);
        k.r1 = (int32_t)((E - 1) / chunks);
    }
#else
    (void)p, (void)prefix, (void)headers, (void)chunks;
#endif
    return k;
}

/* The CTA whose share holds global chunk pos: the largest c with floor(c U / G) <= pos */
static __device__ __forceinline__ int32_t stream_k_cta_of(const sm90_sk &k, int64_t pos) {
    return (int32_t)(((pos + 1) * (int64_t)gridDim.x - 1) / k.U);
}

static __device__ __forceinline__ sm90_sk_piece stream_k_piece(const sm90_sk &k, int32_t rank, int64_t chunks) {
    const int32_t base = rank * (int32_t)chunks, C = (int32_t)chunks;
    const int32_t kb = k.S > base ? k.S - base : 0, ke = k.E - base < C ? k.E - base : C;
    sm90_sk_piece q = {HFP4_SK_PLAIN, 0, kb, ke - kb};
    if (kb > 0) {
        q.kind = HFP4_SK_POST;
    } else {
        q.last = stream_k_cta_of(k, (int64_t)base + C - 1);
        if (q.last > (int32_t)blockIdx.x) q.kind = HFP4_SK_WAIT;
    }
    return q;
}

/* Posting warpgroup wg: its sums (absolute units) into this CTA's slot, then the slot's flag released */
template <int BT>
static __device__ __forceinline__ void stream_k_post(const hfp4_sm90_gemm_params &p, const float *fin, int wg, int tid) {
#if HFP4_SM90_STREAMK
    if constexpr (BT == 8) { /* (stream_k_share splits no other tile: four sums a thread) */
        const int slot = p.dyn_slot % HFP4_SM90_SK_SLOTS;
        __stcg(&hfp4_sm90_sk_sums[slot][blockIdx.x][wg][tid], make_float4(fin[0], fin[1], fin[2], fin[3]));
        warpgroup_barrier<true>(wg);
        if (tid == 0)
            asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(&hfp4_sm90_sk_flags[slot][blockIdx.x][wg]), "r"(1u)
                         : "memory");
    }
#else
    (void)p, (void)fin, (void)wg, (void)tid;
#endif
}

/* Waiting warpgroup wg: adds the sums of CTAs blockIdx.x + 1 .. last in order, clearing their flags */
template <int BT>
static __device__ __forceinline__ void stream_k_take(const hfp4_sm90_gemm_params &p, int32_t last, float *fin, int wg,
                                                     int tid) {
#if HFP4_SM90_STREAMK
    if constexpr (BT == 8) {
        const int slot = p.dyn_slot % HFP4_SM90_SK_SLOTS;
        for (int32_t c = (int32_t)blockIdx.x + 1; c <= last; c++) {
            unsigned *flag = &hfp4_sm90_sk_flags[slot][c][wg];
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
            const float4 v = __ldcg(&hfp4_sm90_sk_sums[slot][c][wg][tid]);
            fin[0] += v.x;
            fin[1] += v.y;
            fin[2] += v.z;
            fin[3] += v.w;
            warpgroup_barrier<true>(wg); /* every thread has read the slot */
            if (tid == 0) asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(0u) : "memory");
        }
    }
#else
    (void)p, (void)last, (void)fin, (void)wg, (void)tid;
#endif
}
