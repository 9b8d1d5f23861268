/*
 * sm90_plan.h - what the SM90 FP8 x FP4 kernels can serve, and which tile to launch (pure C, so
 * CI tests it without a GPU). DeepGEMM keeps heuristics apart from kernels the same way.
 */
#ifndef HFP4_SM90_PLAN_H
#define HFP4_SM90_PLAN_H

#include "internal.h"
#include "../kernels/sm90/fp8_fp4_gemm_params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hfp4_sm90_plan {
    int32_t block_tokens;  /* BT: token rows per CTA (wgmma N): 8, 16, 32, 64 or 128 */
    int32_t w_fp32;        /* weight scales stored as FP32 (else UE8M0)              */
    int64_t grid_x, grid_y, grid_z; /* work items: 128-row weight tiles x token tiles x groups */
    int32_t warp_decode;   /* the warp path (warp_decode.cu; hfp4__sm90_warp_wanted): 1 runs it, 2 runs it
                              where it splits K 4 or 8 ways (dense GEMVs), 0 the main kernel does */
    int32_t warp_split;    /* the warp path's cluster size: 1 (no K-split), 2, 4 or 8 (hfp4__sm90_warp_split) */
    int32_t rows_tile;     /* the token tile the rows per group (or expected_m) pick, before the split's 128 */
    int32_t narrow_split;  /* 1: an 8-token launch (hfp4__sm90_plan_narrow_blocks) takes the contiguous
                              layout's narrow blocks first, this one the rest (narrow_items.cuh) */
    hfp4_sm90_gemm_params params;
    /* what the TMA descriptor of A needs */
    int64_t a_dims[3];     /* K, rows per group, groups                              */
    int64_t a_strides[2];  /* bytes: row, group                                      */
} hfp4_sm90_plan;

/* Validates `p` (hfp4_check_problem with device pointers), then checks that the SM90 kernels
 * serve it (UNSUPPORTED with the reason otherwise) and fills *plan. Does not touch the GPU. */
hfp4_status hfp4__sm90_plan(const char *fn, const hfp4_gemm_problem *p, hfp4_sm90_plan *plan);

/* Whether a problem takes the narrow-block split (plan->narrow_split; sm90_plan.c says when) */
int hfp4__sm90_split_wanted(const hfp4_gemm_problem *p, int32_t alignment);

/* The split's row (params.split_row: a 128-row block is narrow when that row is padding): 32 or 0
 * (the launches pick 16 or 8) from the weights' n x k (sm90_plan.c says why), or HFP4_SM90_SPLIT_ROW */
int32_t hfp4__sm90_split_row(int64_t n, int64_t k);

/* The 8-token launch of a narrow-block split (whole->narrow_split, whole: p's plan): the same problem
 * at the 8-token tile, the balanced walk over the computing tiles of narrow blocks only (params.narrow
 * 3), with whole's split row */
hfp4_status hfp4__sm90_plan_narrow_blocks(const char *fn, const hfp4_gemm_problem *p, const hfp4_sm90_plan *whole,
                                          hfp4_sm90_plan *narrow);

/* The warp path (src/kernels/sm90/warp_decode.cu; when it runs: hfp4__sm90_warp_wanted): groups of a
 * few rows as one warpgroup per 64-row weight tile. These are its limits and its shared memory (the
 * kernel's carve-up: alignment slack, the activation tiles, their scales, the weight scales, the
 * chunk modes, the group prefix). */
#define HFP4_SM90_WARP_TOKENS 8           /* tokens per unit (wgmma N): expected rows at most this */
#define HFP4_SM90_WARP_MAX_K 16384        /* the unit's activations (8 x K bytes) in shared memory  */
#define HFP4_SM90_WARP_MAX_GROUPS 4096    /* the group prefix in shared memory                      */
#define HFP4_SM90_WARP_MAX_SMEM (72 * 1024) /* so that 3 CTAs fit an SM (V4-Flash w13: ~43 KB)     */
#define HFP4_SM90_WARP_MAX_SPLIT 8        /* CTAs of a cluster that share a unit's K (portable size) */
#define HFP4_SM90_WARP_MIN_PIECE 4        /* chunks a CTA's part of a unit has at least, by the plan */
/* split: the cluster size (1: none); a cluster's leader gets split - 1 slots of 128 x 4 floats for its
 * partners' sums and two barriers */
int64_t hfp4__sm90_warp_smem_bytes(int64_t chunks, int gran32, int w_fp32, int64_t groups, int32_t split);

/* The warp path's K-split (warp_decode.cu): the cluster size its launch uses, from K alone: 8, 4 or 2
 * CTAs when each part keeps at least HFP4_SM90_WARP_MIN_PIECE chunks and the leader's slots fit the
 * 72 KB, else 1. The kernel splits only launches whose live units are few enough for all parts to run
 * at once (it counts them on the device, so the host's hint need not tell T = 1 from T = 32), with
 * fewer CTAs a unit if that is what fits. HFP4_SM90_WARP_SPLIT=0 turns it off, for comparison. */
int32_t hfp4__sm90_warp_split(int64_t chunks, int gran32, int w_fp32, int64_t groups);

/* (tests) Caps the warp path's cluster size (1 none, 2, 4, 8) or gives it back to the plan (-1). */
void hfp4__sm90_warp_split_set(int max_split);

/* Whether the warp path takes the planned problem: expected rows per group (the hint, or m for
 * dense) at most 8, K at most 16384, its shared memory within 72 KB, and
 * - with the switch on (HFP4_SM90_WARP_DECODE=1, read once; hfp4__sm90_warp_set overrides it): the
 *   masked layout or a dense GEMM (1);
 * - without a switch (unset, or any value but "1" and "0"): a dense GEMM (2), which the launcher
 *   runs on the warp path only where it splits K 4 or 8 ways (few units: a GEMV of N up to ~6000 at
 *   K >= 2048 on an H200; measured 7-30 % faster there, slower with 2 parts: bench/RESULTS.md v17;
 *   hfp4__sm90_plan drops the mark where K allows no such split);
 * - HFP4_SM90_WARP_DECODE=0: never (0).
 * The masked layout needs the switch: faster than the main kernel only at T = 1, slower from T = 8
 * (v16), and the hint cannot tell them apart. */
int hfp4__sm90_warp_wanted(const hfp4_gemm_problem *p, const hfp4_sm90_plan *plan);

/* (tests, bench) Turns the warp path on (1), off (0) or back to the switch's value (-1). */
void hfp4__sm90_warp_set(int on);

/* Token tile for `rows_per_group` expected rows, limited so it divides `alignment` (0 = none). */
int32_t hfp4__sm90_pick_block_tokens(int64_t rows_per_group, int32_t alignment);

#ifdef __cplusplus
}
#endif

#endif
