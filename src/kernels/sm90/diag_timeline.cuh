/*
 * diag_timeline.cuh - an opt-in timeline of a launch of the SM90 kernel: each CTA writes the global
 * timer at fixed points (entry, the set-up barrier, the producer's first copy, the consumers' first
 * item and first chunk, the last item, the exit), its SM and its item count; and the consumers'
 * cycles per item in each phase of an item, summed over all CTAs (HFP4_DIAG_PH_*). `hfp4 bench`
 * prints the last launch's spread per point and the phases of each case when HFP4_DIAG_TIMELINE is
 * set in the environment.
 *
 * Built only with `make DIAG=1` (-DHFP4_DIAG_TIMELINE): otherwise every macro below is empty and
 * the kernels' code is unchanged. A DIAG build is for measuring, never for shipping: the stores,
 * the consumers' extra wait on their first stage and the producer's watch of it change the timing a
 * little, and at the 128-token tile the points are left out (its registers are all in use).
 * NOTE: the hooks must never wait on memory: stores and fire-and-forget reductions only, spread
 * over copies. Until v30 the item count was a read-modify-write of a global word and the phases
 * atomics on two words shared by every CTA; at a launch's start those round trips sat between the
 * consumers' first stage and their next stamps and made "first chunk arrived" ~2-3 us late (w13
 * T = 1: 8.2 us, truly ~5.7), and they added ~1-2 k cycles to every item's phases (bench/RESULTS.md
 * v30: the figures of v9-v29 that rest on those points are to be read with that in mind).
 * NOTE: why it exists: this timeline found decode's ~7 us start-up and the first/second CTA
 * imbalance on an SM (bench/RESULTS.md v9), where ncu's whole-kernel averages could not.
 */
#pragma once
#include <stdint.h>

enum {
    HFP4_DIAG_ENTRY,       /* thread 0 at the kernel's entry                                      */
    HFP4_DIAG_PDL,         /* thread 0 past the wait for the grids before (programmatic launch)   */
    HFP4_DIAG_PREFIX,      /* warp 1 lane 0: the balanced walk's prefix built (masked_m read)     */
    HFP4_DIAG_SETUP,       /* thread 0 after the set-up barrier (mbarriers, balanced-walk prefix)  */
    HFP4_DIAG_PROD_START,  /* the producer's first warp past its setmaxnreg, before its walk      */
    HFP4_DIAG_CONS_START,  /* consumer thread 0 past its setmaxnreg, before its first stage wait  */
    HFP4_DIAG_PROD_WALKED, /* the producer's first item walked (its first warp), not yet resolved */
    HFP4_DIAG_PROD_ITEM,   /* the producer's first item walked and resolved (its first warp)     */
    HFP4_DIAG_PROD_LOADS,  /* the first item's first stage loads issued (before its header reads) */
    HFP4_DIAG_PROD_COPY,   /* the first header posted and the first stage announced (expect_tx)  */
    HFP4_DIAG_PROD_STAGE0, /* the first stage complete, as its producer warp sees it (it waits)   */
    HFP4_DIAG_CONS_STAGE0, /* consumer thread 0: its wait for the first stage (its header) done   */
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
/* [copy][phase][0]: sum of clock64 at the hook, [copy][phase][1]: how many times it was reached; CTA c
 * adds into copy c % HFP4_DIAG_COPIES (the printer sums them) with fire-and-forget reductions.
 * NOTE: with one copy and atomicAdd (ATOMG, which holds its source registers until the atomic is
 * done), every CTA's thread 0 queued on the same two addresses at each hook: at a launch's start
 * that put ~2-4 us between the consumers' first stage landing and their first item's stamps
 * (RESULTS v30), and every phase of every item paid for it. */
#define HFP4_DIAG_COPIES 64
__device__ unsigned long long hfp4_diag_phase[HFP4_DIAG_COPIES][HFP4_DIAG_PHASES][2];
static __device__ __forceinline__ void diag_red_add(unsigned long long *a, unsigned long long v) {
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(a), "l"(v) : "memory");
}
static __device__ __forceinline__ void diag_phase(int k) {
    const unsigned long long t = clock64();
    unsigned long long *slot = hfp4_diag_phase[blockIdx.x % HFP4_DIAG_COPIES][k];
    diag_red_add(slot, t);
    diag_red_add(slot + 1, 1ull);
}
#define HFP4_DIAG_PHASE(k) do { if (threadIdx.x == 0) diag_phase(k); } while (0)

/* Item-boundary counters (v26): [0] items whose first chunk the consumers' carry loaded early (the
 * next stage had landed under the last wgmmas), [1] items it did not; [2] the producer's cycles from
 * the end of an item's chunk loop to the next item's first copies (the warp that issues them: its
 * walk, resolve, stage wait and header reads), summed, and [3] how many; [4] of those cycles, the
 * ones after its stage was free (header reads issued, the copies issued), and [5] how many. */
__device__ unsigned long long hfp4_diag_boundary[14];
/* (v27) [6] the producer's cycles from a stage free to its copies issued, chunks after an item's
 * first, and [7] how many; for an item's first chunk (the carry loop's items), consumer thread 0:
 * [8] the producer's issue of its copies minus the consumers' end of the previous item's chunk loop
 * (signed: < 0, issued before), [10] the issue to the consumers' wait for it done, [12] that
 * wait's own cycles, and [9], [11], [13] how many. The issue clocks go through a shared slot per
 * stage (diag_issue_slots: a global one, volatile; the same SM clock on both sides). */
__device__ long long hfp4_diag_issue[1024][16];
/* (global, not shared: 128 bytes of static shared memory left room for one CTA an SM, not two) */
static __device__ __forceinline__ volatile long long *diag_issue_slots(void) {
    return hfp4_diag_issue[blockIdx.x & 1023];
}
/* (the later chunks' cycles summed in the producer lane's registers, sum and n, and added once at
 * its end, HFP4_DIAG_ISSUED_FLUSH: two atomics a chunk on one address from every CTA doubled the
 * items' time) */
#define HFP4_DIAG_ISSUED(s, tfree, counted, sum, n)                                                 \
    do {                                                                                            \
        const long long now_ = clock64();                                                           \
        diag_issue_slots()[(s)] = now_;                                                             \
        if (counted) {                                                                              \
            (sum) += (unsigned long long)(now_ - (long long)(tfree));                               \
            (n) += 1ull;                                                                            \
        }                                                                                           \
    } while (0)
#define HFP4_DIAG_ISSUED_FLUSH(sum, n)                                                              \
    do {                                                                                            \
        if ((n) > 0) {                                                                              \
            diag_red_add(&hfp4_diag_boundary[6], (sum));                                               \
            diag_red_add(&hfp4_diag_boundary[7], (n));                                                 \
        }                                                                                           \
    } while (0)
#define HFP4_DIAG_FIRST_READY(s, t_loop_end, t_wait0)                                               \
    do {                                                                                            \
        if (threadIdx.x == 0) {                                                                     \
            const long long now_ = clock64(), ti_ = diag_issue_slots()[(s)];                        \
            diag_red_add(&hfp4_diag_boundary[8], (unsigned long long)(ti_ - (long long)(t_loop_end))); \
            diag_red_add(&hfp4_diag_boundary[9], 1ull);                                                \
            diag_red_add(&hfp4_diag_boundary[10], (unsigned long long)(now_ - ti_));                   \
            diag_red_add(&hfp4_diag_boundary[11], 1ull);                                               \
            diag_red_add(&hfp4_diag_boundary[12], (unsigned long long)(now_ - (long long)(t_wait0)));  \
            diag_red_add(&hfp4_diag_boundary[13], 1ull);                                               \
        }                                                                                           \
    } while (0)
#define HFP4_DIAG_CARRIED(c) do { if (threadIdx.x == 0) diag_red_add(&hfp4_diag_boundary[(c) ? 0 : 1], 1ull); } while (0)
#define HFP4_DIAG_CLOCK() clock64()
#define HFP4_DIAG_FIRST_COPIES(t0, tfree)                                                           \
    do {                                                                                            \
        const long long now_ = clock64();                                                           \
        if ((t0) != 0) {                                                                            \
            diag_red_add(&hfp4_diag_boundary[2], (unsigned long long)(now_ - (long long)(t0)));       \
            diag_red_add(&hfp4_diag_boundary[3], 1ull);                                                \
        }                                                                                           \
        diag_red_add(&hfp4_diag_boundary[4], (unsigned long long)(now_ - (long long)(tfree)));        \
        diag_red_add(&hfp4_diag_boundary[5], 1ull);                                                    \
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
/* The CTA's item count so far (n, which consumer thread 0 keeps in a register) and its SM: a plain
 * store. NOTE: it was a read-modify-write of the global slot (and the first-item test a read of it):
 * a global round trip on consumer thread 0's path at every item, which made the timeline's "first
 * item resolved" ~2 us late at a launch's start and added to every item's phases (RESULTS v30). */
static __device__ __forceinline__ void diag_count_set(unsigned n) {
    if (blockIdx.x >= HFP4_DIAG_MAX_CTAS) return;
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    hfp4_diag_ts[blockIdx.x][HFP4_DIAG_POINTS] = (unsigned long long)n | ((unsigned long long)smid << 32);
}
/* (BT: the tile's token count, in scope where these are used) */
#define HFP4_DIAG(point) do { if (BT < 128) diag_stamp(point); } while (0)
/* the entry time is read at entry and stored after the wait for the previous grids: before it, the
 * slots may still belong to a running launch (programmatic dependent launch) */
#define HFP4_DIAG_NOW() diag_now()
#define HFP4_DIAG_AT(point, t) do { if (BT < 128) diag_stamp_at(point, t); } while (0)
#define HFP4_DIAG_COUNT(n) do { if (BT < 128) diag_count_set(n); } while (0)
#define HFP4_DIAG_FIRST_ITEM(n) (BT < 128 && (n) == 0)
#else
#define HFP4_DIAG_PHASE(k) do { } while (0)
#define HFP4_DIAG_CARRIED(c) do { (void)(c); } while (0)
#define HFP4_DIAG_CLOCK() 0ll
#define HFP4_DIAG_FIRST_COPIES(t0, tfree) do { (void)(t0); (void)(tfree); } while (0)
#define HFP4_DIAG_ISSUED(s, tfree, counted, sum, n) do { (void)(s); (void)(tfree); (void)(counted); } while (0)
#define HFP4_DIAG_ISSUED_FLUSH(sum, n) do { (void)(sum); (void)(n); } while (0)
#define HFP4_DIAG_FIRST_READY(s, t_loop_end, t_wait0) do { (void)(s); (void)(t_loop_end); (void)(t_wait0); } while (0)
#define HFP4_DIAG(point) do { } while (0)
#define HFP4_DIAG_NOW() 0ull
#define HFP4_DIAG_AT(point, t) do { (void)(t); } while (0)
#define HFP4_DIAG_COUNT(n) do { (void)(n); } while (0)
#define HFP4_DIAG_FIRST_ITEM(n) ((void)(n), false)
#endif
