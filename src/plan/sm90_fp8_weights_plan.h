/*
 * sm90_fp8_weights_plan.h - which SM90 kernel, tile and form an FP8-weight GEMM launches (FP8 x FP8
 * with 128 x 128 weight block scales: DeepGEMM's fp8_gemm_nt and m_grouped_fp8_gemm_nt_*). Pure C,
 * so CI tests the rules without a GPU, as sm90_plan.h does for FP4 weights; the kernels
 * (src/kernels/sm90/fp8_fp8_gemm.cu: tiles fed by TMA; fp8_fp8_gemv.cu: a few token rows) take
 * the plan as given. Each rule's measurements are in sm90_fp8_weights_plan.c.
 */
#ifndef HFP4_SM90_FP8_WEIGHTS_PLAN_H
#define HFP4_SM90_FP8_WEIGHTS_PLAN_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The few-row kernel's limits. Token rows: its mma has 8 columns, two sets of them; at 32 rows (four
 * sets: 206 registers, one CTA an SM) it ran 28 us at 32 x 7168 x 2048 against the tile kernel's 12
 * (bench/RESULTS.md v46). Masked: the live-group list it keeps in shared memory. */
#define HFP4_FP8_GEMV_MAX_M 16
#define HFP4_FP8_GEMV_MAX_GROUPS 1024
#define HFP4_FP8_GEMV_ROWS 16  /* weight rows a row group: the mma's 16                          */
#define HFP4_FP8_GEMV_WARPS 8  /* warps a CTA: warps_per_rows of them split each row group's K  */

enum {
    HFP4_FP8W_TILES = 0,   /* fp8_fp8_gemm.cu: 128-row weight tiles x block_m token rows */
    HFP4_FP8W_FEW_ROWS = 1 /* fp8_fp8_gemv.cu: 16-row weight groups, warps splitting K  */
};

typedef struct hfp4_sm90_fp8w_plan {
    int32_t kernel;         /* HFP4_FP8W_TILES or HFP4_FP8W_FEW_ROWS                                */
    int32_t block_m;        /* tiles: token rows a tile, 128, 192 or 256 (grouped: 128)             */
    int32_t tma_store;      /* tiles: D through shared memory to TMA stores                         */
    int32_t skip_idle;      /* tiles, grouped: the kernel that skips a tile's warpgroups without rows */
    int32_t warps_per_rows; /* few rows: warps a 16-row group, 1, 2, 4 or 8                         */
} hfp4_sm90_fp8w_plan;

/* The plan for `p` (an FP8-weight problem the launcher has checked: dense, contiguous or masked, k a
 * multiple of 128) on a device of `num_sms` SMs. Reads the comparison switches at each call:
 * HFP4_SM90_FP8_WEIGHTS_TILE (128, 192, 256), HFP4_SM90_FP8_WEIGHTS_DTMA=0,
 * HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE (0, 1), HFP4_SM90_FP8_GEMV=0, HFP4_SM90_FP8_GEMV_MASKED=1 and
 * HFP4_SM90_FP8_GEMV_KW (1, 2, 4, 8); other values mean the rules' own choice. */
void hfp4__sm90_fp8w_plan(const hfp4_gemm_problem *p, int num_sms, hfp4_sm90_fp8w_plan *plan);

/* The dense tile kernel's token tile for m x n on `num_sms` SMs: 192 or 128 */
int32_t hfp4__sm90_fp8w_pick_tile(int64_t m, int64_t n, int num_sms);

/* The few-row kernel's warps a 16-row group for n weight rows of `kblocks` 128-K blocks */
int32_t hfp4__sm90_fp8_gemv_warps(int64_t n, int64_t kblocks);

#ifdef __cplusplus
}
#endif

#endif
