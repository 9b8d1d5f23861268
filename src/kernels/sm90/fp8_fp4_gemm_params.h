/*
 * fp8_fp4_gemm_params.h - the plain-data parameter block the host passes to the SM90 FP8 x FP4
 * kernels (by value, as a __grid_constant__ argument). Plain C so host C code can fill it.
 */
#ifndef HFP4_FP8_FP4_GEMM_PARAMS_H
#define HFP4_FP8_FP4_GEMM_PARAMS_H

#include <stdint.h>

#define HFP4_SM90_BALANCE_MAX_GROUPS 384 /* groups whose live-item prefix fits the kernels' shared memory
                                           (V4-Pro's 384 experts; more would cost the 8-token tile a
                                           pipeline stage) */
#define HFP4_SM90_BALANCE_MAX_TILES 6144 /* token tiles whose bitmask + word prefix fit the same space */
#define HFP4_SM90_SPLIT_MAX_TILES 5984 /* the narrow-block split's 8-token tiles (narrow_items.cuh): the
                                         bitmask, word prefix and block flags in the same space */
#define HFP4_SM90_DYN_SLOTS 65536        /* dynamic-walk counters per device (dynamic_walk.cuh): 512 KB */
#define HFP4_SM90_DYN_STREAM_SLOTS 1024  /* of them, for streams (the rest: launches captured into graphs) */
#ifndef HFP4_SM90_DYN_PLAIN_SLOTS
#define HFP4_SM90_DYN_PLAIN_SLOTS 32768  /* of the captured ones, handed out first and never returned (dyn_slots.cu) */
#endif

typedef struct hfp4_sm90_gemm_params {
    /* problem */
    int32_t grouping;       /* hfp4_grouping                                              */
    const int32_t *layout;  /* device: ids / psum ends / masked_m                         */
    int32_t m_alignment;
    int32_t num_groups;
    int64_t tiles_n, tiles_m, tiles_total; /* work items: tiles_n x tiles_m x (groups or 1)      */
    /* division by tiles_n and tiles_m as a multiply-high, an add and a shift (hfp4_sm90_divisor):
     * an item's resolution divided by them at every item, ~20 dependent instructions per division */
    uint32_t tiles_n_mul, tiles_n_shift, tiles_m_mul, tiles_m_shift;
    /* and by m_alignment (psum: a token tile's aligned block and its group's aligned end) */
    uint32_t m_align_mul, m_align_shift;
    int32_t balanced;       /* token tile <= 64, the CTAs share the items that compute evenly
                               (work_items.cuh): 1 masked (<= HFP4_SM90_BALANCE_MAX_GROUPS groups),
                               2 contiguous with expert ids (<= HFP4_SM90_BALANCE_MAX_TILES token
                               tiles; padding tiles are zeroed apart, zero_padding_tiles)       */
    int64_t m, n, k;
    /* activation scales (A data itself goes through the TMA descriptor) */
    const void *a_scales;
    int32_t a_scale_dtype;  /* HFP4_DTYPE_FP32, _UE8M0, _UE8M0_PACKED                      */
    int32_t a_gran_k;       /* 32 or 128                                                  */
    int64_t a_scale_stride_mn, a_scale_stride_k, a_scale_stride_group;
    int64_t a_k_groups;     /* ceil(K / a_gran_k)                                         */
    /* repacked weights */
    const uint8_t *w;
    int64_t w_group_bytes;
    const void *w_scales;
    int64_t w_scale_group_elems; /* entries per group: one uint32 (UE8M0) or float4 (FP32) per row and 128-K chunk */
    int64_t w_pairs, w_chunks;   /* K_pad / 64, K_pad / 128                                   */
    int64_t w_tiles;             /* N_pad / 64                                                */
    const uint8_t *w_modes;      /* [G][tiles][chunks]: bit 0 per-32 scales (else folded), bit 1 one-base tile */
    int32_t w_evict_first;       /* 1: each weight tile is read by one token tile: stream it past L2 */
    /* output */
    void *d;
    const void *c;
    int32_t d_fp32;
    int32_t d_vec;          /* D (and C) rows and groups 16-byte aligned: vector stores    */
    int32_t d_tma;          /* 128-token tile, BF16 D without C, d_vec: tiles whose rows are all
                               written go out by TMA store (epilogue.cuh)                     */
    int32_t d_zero_padding; /* the contiguous forms' all-padding tiles are written as zeros (else
                               left alone: hfp4_gemm_problem.d_padding ANY)                   */
    int64_t ldd, d_stride_group;
    /* K-split (split_k.cuh; the two-CTA 8-token tile, launched in clusters of two): 2 when the launch
     * may split, 0 when not; the CTAs split when the live items are at most split_max_items */
    int32_t split, split_max_items;
    /* the dynamic walk (dynamic_walk.cuh): the plan allows it (dynamic), the launcher gives the launch
     * a counter slot of its own (dyn_slot, -1: none, the static walk) */
    int32_t dynamic, dyn_slot;
    /* narrow items and blocks (narrow_items.cuh): 0 none; 1 (the 128-token tile, contiguous and psum
     * layouts) an item whose computed rows end within its first 32 token columns loads and computes
     * only those; 2 the same, and the launch skips the contiguous layout's narrow blocks, which a
     * launch of the 8-token tile with 3 (only those blocks) takes before it; split_row (8, 16 or 32,
     * the same in both launches; 0: each launch picks 16 or 8 the same way, work_items.cuh
     * split_row_auto): a 128-row block is narrow when this row of it is padding */
    int32_t narrow, split_row;
    /* the 128-token tile's prefill launches whose items carry no group index (dense, contiguous,
     * psum; the launcher sets it): items run in groups of raster_m token tiles, token tile fastest
     * within a weight tile
     * (work_items.cuh item_tiles); 0: n-tile fastest. raster_m is a power of two (2^raster_shift);
     * (raster_per_mul, raster_per_shift) divide by raster_m x tiles_n (hfp4_sm90_divisor) */
    int32_t raster_m, raster_shift;
    uint32_t raster_per_mul, raster_per_shift;
} hfp4_sm90_gemm_params;

/* The (mul, shift) that divide any 0 <= x < 2^31 by 1 <= d <= 2^31 as (umulhi(x, mul) + x) >>
 * shift (Granlund and Montgomery's round-up method: shift = ceil(log2 d) <= 31, mul = floor(2^32
 * (2^shift - d) / d) + 1; the 32-bit add cannot overflow, umulhi(x, mul) < x); test_sm90_plan.c
 * checks the method's bound for every divisor up to 2^22 and a sample up to 2^30, and quotients
 * around every multiple for divisors up to 2^16. */
static inline void hfp4_sm90_divisor(uint32_t d, uint32_t *mul, uint32_t *shift) {
    uint32_t l = 0;
    while (l < 32 && ((uint64_t)1 << l) < d) l++;
    *shift = l;
    *mul = (uint32_t)((((uint64_t)1 << 32) * ((((uint64_t)1 << l) - d)) / d) + 1);
}

/* Host-and-device functions of this header (plain C on the host) */
#if defined(__CUDACC__)
#define HFP4_SM90_HD __host__ __device__
#else
#define HFP4_SM90_HD
#endif

/* Sets raster groups of 2^shift token tiles (work_items.cuh item_tiles) on k, whose tiles_n and
 * tiles_m are set; the caller has checked tiles_m > 2^shift (so a group's items, 2^shift x tiles_n,
 * stay below the plan's 2^30 items) */
static inline void hfp4_sm90_set_raster(hfp4_sm90_gemm_params *k, int shift) {
    k->raster_m = 1 << shift;
    k->raster_shift = shift;
    hfp4_sm90_divisor((uint32_t)(k->raster_m * k->tiles_n), &k->raster_per_mul, &k->raster_per_shift);
}

/* Item -> (token tile, weight tile) in raster groups of raster_m = 2^raster_shift token tiles (the
 * fields of hfp4_sm90_set_raster, by value: through a pointer to the kernel's parameter block the
 * 128-token kernels' code came out differently): the group by a multiply-high (a runtime division is
 * ~20 dependent instructions, bench/RESULTS.md v10), the tiles within it by a shift, but in a shorter
 * last group, whose items divide by its length. Token tile fastest within a weight tile. A bijection
 * on [0, tiles_m x tiles_n) (test_sm90_plan.c). */
static inline HFP4_SM90_HD void hfp4_sm90_raster_tiles(int32_t item, int32_t tiles_m, int32_t tiles_n, int32_t raster_m,
                                                      int32_t raster_shift, uint32_t per_mul, uint32_t per_shift,
                                                      int32_t *m_tile, int32_t *n_tile) {
    const uint32_t x = (uint32_t)item;
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(x, per_mul); /* (as div_tiles_n) */
#else
    const uint32_t hi = (uint32_t)(((uint64_t)x * per_mul) >> 32);
#endif
    const int32_t grp = (int32_t)((hi + x) >> per_shift);
    const int32_t within = item - grp * raster_m * tiles_n, left = tiles_m - grp * raster_m;
    if (left >= raster_m) {
        *n_tile = within >> raster_shift;
        *m_tile = grp * raster_m + (within & (raster_m - 1));
    } else {
        *n_tile = within / left;
        *m_tile = grp * raster_m + within - *n_tile * left;
    }
}

#endif
