/*
 * work_items.cuh - how a persistent CTA walks its work items: item -> (128-row weight tile, token
 * tile, group) for the dense, contiguous, psum and masked layouts, probing the device-side layout
 * data 32 items per load; at the decode tiles, the balanced walks by rank over a prefix of the live
 * (masked) or computing (contiguous) items built in shared memory.
 */
#pragma once
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"
#include "ptx.cuh"
#include "tile_config.cuh"

/* x / tiles_n and x / tiles_m (0 <= x < 2^30) as a multiply-high, an add and a shift with the
 * divisors' constants from the plan (hfp4_sm90_divisor) */
static __device__ __forceinline__ int32_t div_tiles_n(const hfp4_sm90_gemm_params &p, int32_t x) {
    return (int32_t)((__umulhi((uint32_t)x, p.tiles_n_mul) + (uint32_t)x) >> p.tiles_n_shift);
}
static __device__ __forceinline__ int32_t div_tiles_m(const hfp4_sm90_gemm_params &p, int32_t x) {
    return (int32_t)((__umulhi((uint32_t)x, p.tiles_m_mul) + (uint32_t)x) >> p.tiles_m_shift);
}
/* x / m_alignment (0 <= x < 2^30; psum only, where the plan has checked m_alignment > 0) */
static __device__ __forceinline__ int32_t div_m_alignment(const hfp4_sm90_gemm_params &p, int32_t x) {
    return (int32_t)((__umulhi((uint32_t)x, p.m_align_mul) + (uint32_t)x) >> p.m_align_shift);
}

/* Work item -> (token tile within its group, weight tile, group z), for the 128-token tile (the other
 * tiles keep their own form: item_m_tile). Items run n-tile fastest, then token tile, then group;
 * or, where the launcher sets p.raster_m (layouts whose items carry no group index: all but masked),
 * in groups of raster_m token tiles (the last group may have fewer), token tile fastest within a
 * weight tile, so that the CTAs resident at one time share ~raster_m activation tiles and a few
 * weight tiles in L2 (n-tile fastest, a dense 8192^3 wave covered 2 token tiles and all 64 weight
 * tiles: 32 MB of FP4 streamed through L2 every wave, 72 % L2 hits; 92 % with groups of 16,
 * bench/RESULTS.md v37). */
static __device__ __forceinline__ void item_tiles(const hfp4_sm90_gemm_params &p, int32_t item, int32_t &m_tile,
                                                  int32_t &n_tile, int32_t &z) {
    const int32_t tiles_n = (int32_t)p.tiles_n, tiles_m = (int32_t)p.tiles_m; /* items < 2^30 (the plan checks) */
    if (p.raster_m > 0) {
        hfp4_sm90_raster_tiles(item, tiles_m, tiles_n, p.raster_m, p.raster_shift, p.raster_per_mul, p.raster_per_shift,
                               &m_tile, &n_tile);
        z = 0;
        return;
    }
    const int32_t rest = div_tiles_n(p, item);
    n_tile = item - rest * tiles_n;
    z = div_tiles_m(p, rest);
    m_tile = rest - z * tiles_m;
}

/* align(e) for the psum layout's group end e, 0 < e <= 2^30, exactly: (floor((e - 1) / A) + 1) x A
 * < e + A < 2^32 (A = m_alignment) */
static __device__ __forceinline__ int64_t psum_aligned_end(const hfp4_sm90_gemm_params &p, int32_t e) {
    return (int64_t)(uint32_t)((div_m_alignment(p, e - 1) + 1) * (uint32_t)p.m_alignment);
}

/* The in-order walk's end in the psum layout (dynamic_walk.cuh): the items before the first raster
 * group (unrastered: token tile) that starts at or past the groups' rows, min(align(psum[G - 1]), m).
 * Every item after it has nothing to write, so a buffer sized for the worst case costs its rows past
 * the groups no stage and no counter round trip; those before it in that raster group take a stage
 * each (producer.cuh). (Device data cannot be checked: with psum ends out of order this only leaves
 * unwritten items whose rows had no defined group.) */
static __device__ __forceinline__ int32_t psum_walk_items(const hfp4_sm90_gemm_params &p, int bt) {
    const int32_t last = p.layout[p.num_groups - 1];
    const int32_t e = (int32_t)min((int64_t)last, p.m); /* (m <= 2^30: the plan checks) */
    const int64_t rows = e <= 0 ? 0 : min(psum_aligned_end(p, e), p.m);
    int64_t tiles = (rows + bt - 1) / bt;
    if (p.raster_m > 0) tiles = (tiles + p.raster_m - 1) / p.raster_m * p.raster_m;
    return (int32_t)min(tiles * p.tiles_n, (int64_t)p.tiles_total);
}

/* The token-tile index (within its group) of work item `item` (item_tiles; the other tiles keep their
 * code's own form: the decode kernels' SASS moved with a shared one) */
template <int BT>
static __device__ __forceinline__ int32_t item_m_tile(const hfp4_sm90_gemm_params &p, int32_t item) {
    if constexpr (BT == 128) {
        int32_t m_tile, n_tile, z;
        item_tiles(p, item, m_tile, n_tile, z);
        return m_tile;
    } else {
        const int32_t rest = div_tiles_n(p, item);
        return rest - div_tiles_m(p, rest) * (int32_t)p.tiles_m;
    }
}

/* Which rows a CTA's token tile covers. rows [m0, valid_end) are computed, [valid_end, zero_end)
 * are written as zeros, `expert` selects the weights, `a_group` the TMA/scale group of A. */
struct sm90_tile {
    int32_t n_tile; /* 128-row weight tile pair */
    int32_t m0, valid_end, zero_end; /* rows: m <= 2^30 (the plan checks) */
    int32_t expert, a_group;
    int32_t compute; /* 0: all rows are padding, no tensor-core work */
};

/* The tile's fields as warp-uniform values (warp_uniform, ptx.cuh): every lane resolved the same
 * item, and the producer's copies then take their addresses on the uniform datapath
 * (elect_one_sync) */
static __device__ __forceinline__ void uniform_tile(sm90_tile &t) {
    t.n_tile = warp_uniform(t.n_tile);
    t.m0 = warp_uniform(t.m0);
    t.valid_end = warp_uniform(t.valid_end);
    t.zero_end = warp_uniform(t.zero_end);
    t.expert = warp_uniform(t.expert);
    t.a_group = warp_uniform(t.a_group);
    t.compute = warp_uniform(t.compute);
}

/* The one device-memory value an item's resolution depends on: masked_m[g] (masked) or the expert
 * id of the tile's first row (contiguous); psum and dense need none here. */
template <int BT>
static __device__ __forceinline__ int32_t probe_layout(const hfp4_sm90_gemm_params &p, int32_t item) {
    if (p.grouping == HFP4_K_MASKED) return p.layout[div_tiles_m(p, div_tiles_n(p, item))];
    if (p.grouping == HFP4_K_CONTIGUOUS) {
        const int64_t m0 = (int64_t)item_m_tile<BT>(p, item) * BT;
        return m0 < p.m ? p.layout[m0] : -1;
    }
    return 0;
}

/* The contiguous layout's narrow blocks (narrow_items.cuh: the split of p.narrow 2 and 3): a 128-row
 * block whose split row (8, 16 or 32: the plan's p.split_row, or with 0 the launch's own choice,
 * split_row_auto) is not a real row (its 8-token tile split_row / 8 starts in padding; past m counts
 * as padding) goes to the 8-token launch, every other block to the 128-token one. */
static __device__ __forceinline__ bool contiguous_row_real(const hfp4_sm90_gemm_params &p, int64_t row) {
    if (row >= p.m) return false;
    const int32_t id = p.layout[row];
    return id >= 0 && id < p.num_groups;
}

/* The split row when the plan leaves it to the launch (p.split_row 0): 16 where at most
 * HFP4_SM90_SPLIT_AUTO_BLOCKS of the 128-row blocks have more than 8 rows, else 8. Both launches
 * count the same blocks of the same layout, so they agree.
 * NOTE: why (H200, V4-Flash without a hint, bench/RESULTS.md v20): row 16 sends blocks of 9-16 rows
 * to the 8-token launch as two tiles each; that wins where such blocks are few (T = 256, ~40 of 256
 * blocks: +5...+11 %; T = 128 w2 +3...+5 %) and loses where they are most blocks, each then
 * streaming its weights twice (T = 512, ~200: -13...-18 %; T = 1024 -4...-7 %). */
#define HFP4_SM90_SPLIT_AUTO_BLOCKS 96
static __device__ __forceinline__ int32_t split_row_auto(int32_t blocks_over_8) {
    return blocks_over_8 <= HFP4_SM90_SPLIT_AUTO_BLOCKS ? 16 : 8;
}

/* Whether item `item` (probe: its probe_layout value) can have anything to compute or write. Only
 * the masked layout's items are decided here (rows past masked_m are neither computed nor written:
 * most items of a decode batch over many experts), and the 128-token tile's narrow blocks under
 * the split (p.narrow 2: the 8-token launch writes them); the contiguous layout's all-padding tiles
 * must still be written as zeros. */
template <int BT>
static __device__ __forceinline__ bool work_item_live(const hfp4_sm90_gemm_params &p, int32_t item, int32_t probe,
                                                      int32_t split_row) {
    if (BT == 128 && p.narrow == 2 && p.grouping == HFP4_K_CONTIGUOUS)
        return contiguous_row_real(p, (int64_t)item_m_tile<BT>(p, item) * BT + split_row);
    if (p.grouping != HFP4_K_MASKED) return true;
    const int64_t m0 = (int64_t)item_m_tile<BT>(p, item) * BT;
    return m0 < min((int64_t)probe, p.m);
}

/* The masked layout's live items per group, as an exclusive prefix in shared memory (prefix[g] =
 * live items of groups < g; prefix[groups] = all), built by one warp at the kernel's start when
 * p.balanced == 1. A group's live items are its token tiles below masked_m (clamped to p.m, as
 * resolve_tile does) times the weight tiles.
 * NOTE: every load first (up to 12 per lane, coalesced), then one scan: the counts go through
 * shared memory so that each lane sums 12 consecutive groups and a single 5-step shuffle scan
 * joins the lanes. A scan per 32 groups (8 at 256 groups) was a chain of ~60 dependent shuffles
 * on every decode launch's start-up path (diag timeline, V4-Flash masked: set-up 2.3 us against
 * the contiguous layout's 1.4). */
template <int BT>
static __device__ __forceinline__ void build_live_prefix(const hfp4_sm90_gemm_params &p, int32_t *prefix, int lane) {
    constexpr int PER_LANE = HFP4_SM90_BALANCE_MAX_GROUPS / 32;
    static_assert(HFP4_SM90_BALANCE_MAX_GROUPS % 32 == 0, "the loads and the scan assume whole warps of groups");
    const int32_t groups = p.num_groups;
    int32_t masked[PER_LANE];
#pragma unroll
    for (int i = 0; i < PER_LANE; i++) masked[i] = 32 * i + lane < groups ? p.layout[32 * i + lane] : 0;
#pragma unroll
    for (int i = 0; i < PER_LANE; i++) {
        const int32_t g = 32 * i + lane;
        const int64_t rows = min((int64_t)masked[i], p.m);
        if (g < groups) prefix[g] = rows > 0 ? (int32_t)min((rows + BT - 1) / BT, p.tiles_m) * (int32_t)p.tiles_n : 0;
    }
    __syncwarp(); /* the counts, written by other lanes; each lane then rewrites only the 12 it read */
    int32_t cnt[PER_LANE], sum = 0;
#pragma unroll
    for (int j = 0; j < PER_LANE; j++) {
        const int32_t g = PER_LANE * lane + j;
        cnt[j] = g < groups ? prefix[g] : 0;
        sum += cnt[j];
    }
    const int32_t incl = warp_inclusive_sum(sum, lane);
    int32_t run = incl - sum;
#pragma unroll
    for (int j = 0; j < PER_LANE; j++) {
        const int32_t g = PER_LANE * lane + j;
        if (g < groups) prefix[g] = run;
        run += cnt[j];
    }
    if (lane == 31) prefix[groups] = incl;
}

/* The split's 8-token launch (p.narrow 3): of word w's two 128-row blocks (its tiles 0-15 and
 * 16-31), keeps the computing tiles of those whose split row is padding, and flags them (flag) for
 * zero_padding_tiles */
static __device__ __forceinline__ uint32_t narrow_blocks_of_word(int32_t *space, int32_t W, int32_t w, uint32_t bits,
                                                                 int32_t split_row, bool flag) {
    const uint32_t b0 = 1u << (split_row / 8), b1 = b0 << 16;
    const uint32_t narrow = (bits & b0 ? 0u : 1u) | (bits & b1 ? 0u : 2u);
    if (flag && narrow) atomicOr(&space[2 * W + 1 + w / 16], (int32_t)(narrow << (2 * (w % 16))));
    return bits & ((narrow & 1u ? 0xFFFFu : 0u) | (narrow & 2u ? 0xFFFF0000u : 0u));
}

/* The contiguous layout's computing token tiles (expert id of the tile's first row in [0, groups):
 * a tile starting in padding is all padding, segments being aligned to a multiple of the tile), as a
 * bitmask of words w < W = ceil(tiles_m / 32) at space[w], and the exclusive prefix of the words'
 * popcounts at space[W + w] (space[2W] = all), when p.balanced == 2. The mask is built by the whole
 * CTA (nthreads threads, tid; every warp runs the loop), the prefix by one warp after a barrier.
 * p.narrow == 3 (the 8-token launch of the narrow-block split, narrow_items.cuh): only the tiles of
 * narrow 128-row blocks (the block's tile split_row / 8 starts in padding: p.split_row, or where it
 * is 0 split_row_auto's row from the blocks counted after a first pass) compute here, and block b's flag,
 * bit b % 32 of space[2W + 1 + b / 32] (zeroed before, in the kernel's prologue), says the block is
 * this launch's, so that zero_padding_tiles zeroes only its padding tiles. */
template <int BT>
static __device__ __forceinline__ void build_compute_mask(const hfp4_sm90_gemm_params &p, int32_t *space, int tid,
                                                          int nthreads) {
    /* a warp per word: lane b loads tile 32 w + b's first id, a ballot makes the word; 4 words per
     * warp at a time, so 4 loads per lane are in flight (one CTA's start-up cost) */
    const int32_t tiles_m = (int32_t)p.tiles_m, W = (tiles_m + 31) / 32, warps = nthreads / 32;
    const int warp = tid / 32, lane = tid % 32;
    const bool auto_row = BT == 8 && p.narrow == 3 && p.split_row == 0; /* (the same in every thread) */
    for (int32_t w0 = warp; w0 < W; w0 += 4 * warps) {
        int32_t id[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int32_t t = 32 * (w0 + u * warps) + lane;
            id[u] = w0 + u * warps < W && t < tiles_m ? p.layout[(int64_t)t * BT] : -1;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            uint32_t bits = __ballot_sync(0xFFFFFFFFu, id[u] >= 0 && id[u] < p.num_groups);
            const int32_t w = w0 + u * warps;
            if constexpr (BT == 8) {
                if (p.narrow == 3 && !auto_row) { /* the split's 8-token launch: the word's two blocks, if narrow */
                    bits = narrow_blocks_of_word(space, W, w, bits, p.split_row, lane == 0 && w < W);
                }
            }
            if (lane == 0 && w < W) space[w] = (int32_t)bits;
        }
    }
    if constexpr (BT == 8) {
        if (auto_row) { /* the row from all the words first (every thread of the CTA is here) */
            static_assert((HFP4_SM90_SPLIT_MAX_TILES + 31) / 32 <= 384, "a word per thread of the CTA");
            __syncthreads();
            uint32_t bits = tid < W ? (uint32_t)space[tid] : 0u;
            const int32_t over8 = __syncthreads_count((bits & 2u) != 0) + __syncthreads_count((bits & (2u << 16)) != 0);
            if (tid < W) space[tid] = (int32_t)narrow_blocks_of_word(space, W, tid, bits, split_row_auto(over8), true);
        }
    }
}
static __device__ __forceinline__ void build_mask_prefix(const hfp4_sm90_gemm_params &p, int32_t *space, int lane) {
    const int32_t W = ((int32_t)p.tiles_m + 31) / 32;
    int32_t run = 0;
    for (int32_t w0 = 0; w0 < W; w0 += 32) {
        const int32_t w = w0 + lane;
        const int32_t cnt = w < W ? __popc((uint32_t)space[w]) : 0;
        const int32_t incl = warp_inclusive_sum(cnt, lane);
        if (w < W) space[W + w] = run + incl - cnt;
        run += __shfl_sync(0xFFFFFFFFu, incl, 31);
    }
    if (lane == 0) space[2 * W] = run;
}

/* The balanced walk's items (p.balanced 1: live, 2: computing), from its prefix; 0 without it */
static __device__ __forceinline__ int64_t balanced_items(const hfp4_sm90_gemm_params &p, const int32_t *prefix) {
    if (p.balanced == 1) return prefix[p.num_groups];
    if (p.balanced == 2) return (int64_t)prefix[2 * (((int32_t)p.tiles_m + 31) / 32)] * p.tiles_n;
    return 0;
}

/* The index of the k-th (from 0) set bit of `bits` (k < popcount). */
static __device__ __forceinline__ int32_t nth_set_bit(uint32_t bits, int32_t k) {
    for (int32_t i = 0; i < k; i++) bits &= bits - 1;
    return __ffs((int)bits) - 1;
}

/* The largest index i in [0, n) with prefix[i] <= r (the entry whose range holds rank r: an empty
 * entry's successor starts at the same rank, so the largest such index is never empty), for the
 * balanced walks, from a hint h with prefix[h] <= r (the owner of the CTA's
 * previous rank, or 0), by the whole warp: lane i tests entry h + 1 + i, and the entries at or
 * below r are the low lanes of the ballot (prefix non-decreasing). A CTA's ranks advance by the
 * grid size, a few entries at a time, so this is one shared load, a ballot and a popcount where the
 * binary search was log2(n) dependent loads per item (ncu, w13 masked T = 32: ~3 % of the
 * consumers' time; more for items of few chunks). All 32 lanes call it together. */
static __device__ __forceinline__ int32_t rank_owner_from(const int32_t *prefix, int32_t n, int32_t r, int32_t h) {
    const int32_t lane = (int32_t)(threadIdx.x % 32);
    for (;;) {
        const int32_t i = h + 1 + lane;
        const int32_t c = __popc(__ballot_sync(0xFFFFFFFFu, i < n && prefix[i] <= r));
        h += c;
        if (c < 32) return h;
    }
}

/* The contiguous layout's computing item of rank r (< the mask prefix's total x tiles_n; p.balanced
 * 2): its item index, and t, its token tile; hint: the word that held the previous rank (updated).
 * All 32 lanes call it (rank_owner_from). */
static __device__ __forceinline__ int32_t computing_item(const hfp4_sm90_gemm_params &p, const int32_t *prefix, int32_t r,
                                                         int32_t &hint, int32_t &t) {
    const int32_t W = ((int32_t)p.tiles_m + 31) / 32, tiles_n = (int32_t)p.tiles_n;
    const int32_t q = div_tiles_n(p, r), n = r - q * tiles_n; /* q: the tile's rank */
    const int32_t wi = rank_owner_from(prefix + W, W, q, hint);
    hint = wi;
    t = 32 * wi + nth_set_bit((uint32_t)prefix[wi], q - prefix[W + wi]);
    return t * tiles_n + n;
}

/* A CTA's walk over its work items. Either every G-th item (G = gridDim.x), in batches of 32: each
 * lane of the warp probes one item's layout value (one load round trip per 32 items instead of one
 * per item) and decides whether the item is live (work_item_live); the warp then takes the live
 * ones in order, skipping the rest at no cost. Or, when p.balanced (1: masked, 2: contiguous with
 * ids), every G-th live or computing item by rank, through build_live_prefix's prefix or
 * build_compute_mask's bitmask and word prefix.
 * NOTE: walking every item one by one (with the integer divisions of its resolution) cost ~40 % of
 * all instructions of a V4-Flash decode launch at T = 1 (8192 items, 192 routed; ncu). The ballot
 * does those divisions once per 32 items, in parallel.
 * Every lane of the warp must run the loop; producer and consumers walk the same items. */
struct sm90_walk {
    int32_t next;      /* ballot walk: first item of the next batch; balanced: the next live rank */
    int32_t batch;     /* ballot walk: first item of the current batch; balanced: the owner hint */
    int32_t probe;     /* this lane's probe value in the current batch                          */
    uint32_t live;     /* the current batch's live lanes still to visit                          */
    int32_t item, lay; /* the item handed out, and its probe_layout value                      */
    int32_t taken;     /* items taken so far (dynamic_walk.cuh only)                              */
};

/* walk_next with a stride of G walkers (the K-split's clusters walk as one: split_k.cuh) */
template <int BT>
static __device__ __forceinline__ bool walk_next_by(const hfp4_sm90_gemm_params &p, const int32_t *prefix, sm90_walk &w,
                                                    const int32_t G) {
    if (BT <= 64 && p.balanced == 1) { /* (tile_config.cuh BALANCE: the decode tiles only) */
        if (w.next >= prefix[p.num_groups]) return false;
        const int32_t g = rank_owner_from(prefix, p.num_groups, w.next, w.batch);
        w.batch = g;
        const int32_t within = w.next - prefix[g], tiles_n = (int32_t)p.tiles_n;
        const int32_t m = div_tiles_n(p, within);
        w.item = (g * (int32_t)p.tiles_m + m) * tiles_n + (within - m * tiles_n);
        w.lay = p.layout[g];
        w.next += G;
        return true;
    }
    if (BT <= 64 && p.balanced == 2) { /* computing items only: padding tiles, zero_padding_tiles */
        const int32_t W = ((int32_t)p.tiles_m + 31) / 32;
        if (w.next >= prefix[2 * W] * (int32_t)p.tiles_n) return false;
        int32_t t;
        w.item = computing_item(p, prefix, w.next, w.batch, t);
        w.lay = p.layout[(int64_t)t * BT];
        w.next += G;
        return true;
    }
    /* (the 128-token launch of the narrow-block split with the row left to it: the kernel's prologue
     * put its choice in prefix[0]) */
    const int32_t split_row = BT == 128 && p.narrow == 2 && p.split_row == 0 ? prefix[0] : p.split_row;
    while (w.live == 0) {
        if (w.next >= (int32_t)p.tiles_total) return false;
        /* (64-bit so that the last lanes' items do not overflow) */
        const int64_t own = w.next + (int64_t)(threadIdx.x % 32) * G;
        w.probe = own < p.tiles_total ? probe_layout<BT>(p, (int32_t)own) : 0;
        w.live = __ballot_sync(0xFFFFFFFFu, own < p.tiles_total && work_item_live<BT>(p, (int32_t)own, w.probe, split_row));
        w.batch = w.next;
        w.next += 32 * G;
    }
    const int32_t j = __ffs((int)w.live) - 1;
    w.live &= w.live - 1;
    w.item = w.batch + j * G;
    w.lay = __shfl_sync(0xFFFFFFFFu, w.probe, j);
    return true;
}

template <int BT>
static __device__ __forceinline__ bool walk_next(const hfp4_sm90_gemm_params &p, const int32_t *prefix, sm90_walk &w) {
    return walk_next_by<BT>(p, prefix, w, (int32_t)gridDim.x);
}

/* (the producer's loop over its items: FOR_EACH_ITEM, dynamic_walk.cuh) */

/* Work item -> (weight tile pair, token tile, group) in item_tiles' order; false when the item has
 * nothing to write. `lay` is probe_layout's value for the item. */
template <int BT>
static __device__ __forceinline__ bool resolve_tile(const hfp4_sm90_gemm_params &p, int32_t item, int32_t lay,
                                                    sm90_tile &t) {
    int32_t z;
    if constexpr (BT == 128) {
        int32_t m_tile;
        item_tiles(p, item, m_tile, t.n_tile, z);
        t.m0 = m_tile * BT;
    } else { /* (item_m_tile says why this form stays) */
        const int32_t tiles_n = (int32_t)p.tiles_n, tiles_m = (int32_t)p.tiles_m;
        const int32_t rest = div_tiles_n(p, item);
        t.n_tile = item - rest * tiles_n;
        z = div_tiles_m(p, rest);
        t.m0 = (rest - z * tiles_m) * BT;
    }
    t.expert = 0;
    t.a_group = 0;
    t.compute = 1;
    const int64_t tile_end = t.m0 + BT;
    if (p.grouping == HFP4_K_MASKED) {
        const int32_t g = z;
        /* device data cannot be validated without a host read: clamp, so a bad masked_m can
         * never make the kernel write past its group */
        const int64_t rows = min((int64_t)lay, p.m);
        if (t.m0 >= rows) return false;
        t.expert = t.a_group = g;
        t.valid_end = t.zero_end = min(tile_end, rows);
        return true;
    }
    if (t.m0 >= p.m) return false;
    if (p.grouping == HFP4_K_CONTIGUOUS) {
        const int32_t id = lay;
        const bool known = id >= 0 && id < p.num_groups; /* ids >= G are treated as padding */
        t.expert = known ? id : 0;
        t.compute = known;
        t.valid_end = t.zero_end = min(tile_end, p.m);
        return true;
    }
    if (p.grouping == HFP4_K_PSUM) {
        /* The last group whose aligned start is <= m0 (empty groups share starts; the last wins).
         * With A = m_alignment and m0_down = floor(m0 / A) * A (0 <= m0 < m <= 2^30 here):
         * align(e) = ceil(e / A) * A <= m0  <=>  ceil(e / A) <= floor(m0 / A)  <=>  e <= m0_down,
         * so each step compares the raw psum end with m0_down. (The former 64-bit round-up per
         * step truncated toward zero for e <= -A, giving a start <= 0 <= m0: true, as e <= m0_down
         * is; so every int32 value, garbage included, takes the same branch as before.)
         * NOTE: the round-up's 64-bit division at each step was ~20+ dependent instructions per
         * step, per item, on the consumers' critical path; m0_down is one multiply-high. */
        const int32_t A = p.m_alignment, m0_down = div_m_alignment(p, t.m0) * A;
        int32_t lo = 0, hi = p.num_groups - 1;
        while (lo < hi) {
            const int32_t mid = (lo + hi + 1) >> 1; /* (0 <= lo < hi: the halving needs no sign fix-up) */
            if (p.layout[mid - 1] <= m0_down) lo = mid;
            else hi = mid - 1;
        }
        const int32_t end = (int32_t)min((int64_t)p.layout[lo], p.m);
        t.expert = lo;
        /* nothing to write unless align(end) > m0, i.e. end > m0_down (as above; this also
         * excludes end <= 0, whose aligned end was <= 0). Past it zero_end > m0 (tile_end and m
         * are too), which the former zero_end <= m0 test checked after the fact. */
        if (end <= m0_down) return false;
        t.compute = t.m0 < end;
        t.valid_end = min(tile_end, (int64_t)end);
        const int64_t aligned_end = psum_aligned_end(p, end); /* (0 < end <= 2^30 here) */
        t.zero_end = min(min(tile_end, aligned_end), p.m);
        if (t.valid_end < t.m0) t.valid_end = t.m0;
        return true;
    }
    t.valid_end = t.zero_end = min(tile_end, p.m);
    return true;
}
