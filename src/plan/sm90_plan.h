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
    hfp4_sm90_gemm_params params;
    /* what the TMA descriptor of A needs */
    int64_t a_dims[3];     /* K, rows per group, groups                              */
    int64_t a_strides[2];  /* bytes: row, group                                      */
} hfp4_sm90_plan;

/* Validates `p` (hfp4_check_problem with device pointers), then checks that the SM90 kernels
 * serve it (UNSUPPORTED with the reason otherwise) and fills *plan. Does not touch the GPU. */
hfp4_status hfp4__sm90_plan(const char *fn, const hfp4_gemm_problem *p, hfp4_sm90_plan *plan);

/* Token tile for `rows_per_group` expected rows, limited so it divides `alignment` (0 = none). */
int32_t hfp4__sm90_pick_block_tokens(int64_t rows_per_group, int32_t alignment);

#ifdef __cplusplus
}
#endif

#endif
