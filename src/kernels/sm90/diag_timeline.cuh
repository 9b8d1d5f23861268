/*
 * diag_timeline.cuh - an opt-in timeline of a launch of the SM90 kernel: each CTA writes the global
 * timer at fixed points (entry, the set-up barrier, the producer's first copy, the consumers' first
 * item and first chunk, the last item, the exit), its SM and its item count; and the consumers'
 * cycles per item in each phase of an item, summed over all CTAs (HFP4_DIAG_PH_*). `hfp4 bench`
 * prints the last launch's spread per point and the phases of each case when HFP4_DIAG_TIMELINE is
 * set in the environment.
 *
 * Built only with `make DIAG=1` (-DHFP4_DIAG_TIMELINE): otherwise every macro below is empty and
 * the kernels' code is unchanged. A DIAG build is for measuring, never for shipping: the stores and
 * the consumers' extra wait on their first stage change the timing a little, and at the 128-token
 * tile the points are left out (its registers are all in use).
 * NOTE: why it exists: this timeline found decode's ~7 us start-up and the first/second CTA
 * imbalance on an SM (bench/RESULTS.md v9), where ncu's whole-kernel averages could not.
 */
#pragma once
#include <stdint.h>

enum {
    HFP4_DIAG_ENTRY,       /* thread 0 at the kernel's entry                                      */
    HFP4_DIAG_SETUP,       /* thread 0 after the set-up barrier (mbarriers, balanced-walk prefix)  */
    HFP4_DIAG_PROD_START,  /* the producer's first warp past its setmaxnreg, before its walk      */
    HFP4_DIAG_PROD_ITEM,   /* the producer's first item walked and resolved (its first warp)     */
    HFP4_DIAG_PROD_LOADS,  /* the first item's first stage loads issued (before its header reads) */
    HFP4_DIAG_PROD_COPY,   /* the first header posted and the first stage announced (expect_tx)  */
    HFP4_DIAG_CONS_ITEM,   /* consumer thread 0: first item resolved (or its header read)        */
    HFP4_DIAG_CONS_CHUNK0, /* consumer thread 0: the first stage's data arrived                  */
    HFP4_DIAG_LAST_ITEM,   /* consumer thread 0: its last item's sums done (before the epilogue) */
    HFP4_DIAG_EXIT,        /* consumer thread 0 at the end of the consumers' work                */
    HFP4_DIAG_POINTS,
    HFP4_DIAG_MAX_CTAS = 1024
};

/* Per-item phases (make DIAG=1, every tile): consumer thread 0 adds the SM clock (cycles) at each
 * hook below into a sum and a count over all CTAs, so the sum of a hook minus the sum of the one
 * before it is the cycles all items spent between them. WALK_START is added before each walk step
 * (the consumers' start and every item's end), WALK_END after it (every item's start and the
 * consumers' end), so WALK_END - WALK_START is the walks' cycles. */
enum {
    HFP4_DIAG_PH_ITEM,      /* an item handed out by the walk, or its header read       */
    HFP4_DIAG_PH_RESOLVED,  /* resolved, computing (the chunk loop follows)             */
    HFP4_DIAG_PH_MODES,     /* its path chosen from the header's flags                  */
    HFP4_DIAG_PH_FIRST,     /* the look-ahead loop's first chunk awaited and converted  */
    HFP4_DIAG_PH_LOOP,      /* the chunk loop done (all sums promoted)                  */
    HFP4_DIAG_PH_SUMS,      /* fin in absolute units, before the epilogue               */
    HFP4_DIAG_PH_STORED,    /* the epilogue done                                        */
    HFP4_DIAG_PH_WALK_START,
    HFP4_DIAG_PH_WALK_END,
    HFP4_DIAG_PHASES
};

#ifdef HFP4_DIAG_TIMELINE
/* [phase][0]: sum of clock64 at the hook, [phase][1]: how many times it was reached */
__device__ unsigned long long hfp4_diag_phase[HFP4_DIAG_PHASES][2];
static __device__ __forceinline__ void diag_phase(int k) {
    const unsigned long long t = clock64();
    atomicAdd(&hfp4_diag_phase[k][0], t);
    atomicAdd(&hfp4_diag_phase[k][1], 1ull);
}
#define HFP4_DIAG_PHASE(k) do { if (threadIdx.x == 0) diag_phase(k); } while (0)

/* Item-boundary counters (v26): [0] items whose first chunk the consumers' carry loaded early (the
 * next stage had landed under the last wgmmas), [1] items it did not; [2] the producer's cycles from
 * the end of an item's chunk loop to the next item's first copies (the warp that issues them: its
 * walk, resolve, stage wait and header reads), summed, and [3] how many; [4] of those cycles, the
 * ones after its stage was free (header reads issued, the copies issued), and [5] how many. */
__device__ unsigned long long hfp4_diag_boundary[6];
#define HFP4_DIAG_CARRIED(c) do { if (threadIdx.x == 0) atomicAdd(&hfp4_diag_boundary[(c) ? 0 : 1], 1ull); } while (0)
#define HFP4_DIAG_CLOCK() clock64()
#define HFP4_DIAG_FIRST_COPIES(t0, tfree)                                                           \
    do {                                                                                            \
        const long long now_ = clock64();                                                           \
        if ((t0) != 0) {                                                                            \
            atomicAdd(&hfp4_diag_boundary[2], (unsigned long long)(now_ - (long long)(t0)));       \
            atomicAdd(&hfp4_diag_boundary[3], 1ull);                                                \
        }                                                                                           \
        atomicAdd(&hfp4_diag_boundary[4], (unsigned long long)(now_ - (long long)(tfree)));        \
        atomicAdd(&hfp4_diag_boundary[5], 1ull);                                                    \
    } while (0)

/* [cta][point] global-timer ns; [cta][HFP4_DIAG_POINTS]: items (low 32 bits) and %smid (high) */
__device__ unsigned long long hfp4_diag_ts[HFP4_DIAG_MAX_CTAS][HFP4_DIAG_POINTS + 1];

static __device__ __forceinline__ unsigned long long diag_now(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
static __device__ __forceinline__ void diag_stamp_at(int point, unsigned long long t) {
    if (blockIdx.x < HFP4_DIAG_MAX_CTAS) hfp4_diag_ts[blockIdx.x][point] = t;
}
static __device__ __forceinline__ void diag_stamp(int point) { diag_stamp_at(point, diag_now()); }
static __device__ __forceinline__ unsigned long long diag_items(void) {
    return blockIdx.x < HFP4_DIAG_MAX_CTAS ? hfp4_diag_ts[blockIdx.x][HFP4_DIAG_POINTS] & 0xFFFFFFFFull : 1;
}
static __device__ __forceinline__ void diag_count(int reset) {
    if (blockIdx.x >= HFP4_DIAG_MAX_CTAS) return;
    unsigned long long &w = hfp4_diag_ts[blockIdx.x][HFP4_DIAG_POINTS];
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    w = ((reset ? 0 : (w & 0xFFFFFFFFull) + 1)) | ((unsigned long long)smid << 32);
}
/* (BT: the tile's token count, in scope where these are used) */
#define HFP4_DIAG(point) do { if (BT < 128) diag_stamp(point); } while (0)
/* the entry time is read at entry and stored after the wait for the previous grids: before it, the
 * slots may still belong to a running launch (programmatic dependent launch) */
#define HFP4_DIAG_NOW() diag_now()
#define HFP4_DIAG_AT(point, t) do { if (BT < 128) diag_stamp_at(point, t); } while (0)
#define HFP4_DIAG_COUNT(reset) do { if (BT < 128) diag_count(reset); } while (0)
#define HFP4_DIAG_FIRST_ITEM() (BT < 128 && diag_items() == 0)
#else
#define HFP4_DIAG_PHASE(k) do { } while (0)
#define HFP4_DIAG_CARRIED(c) do { (void)(c); } while (0)
#define HFP4_DIAG_CLOCK() 0ll
#define HFP4_DIAG_FIRST_COPIES(t0, tfree) do { (void)(t0); (void)(tfree); } while (0)
#define HFP4_DIAG(point) do { } while (0)
#define HFP4_DIAG_NOW() 0ull
#define HFP4_DIAG_AT(point, t) do { (void)(t); } while (0)
#define HFP4_DIAG_COUNT(reset) do { } while (0)
#define HFP4_DIAG_FIRST_ITEM() false
#endif
