/*
 * test_sm90_fp8_weights_plan.c - the FP8-weight path's launch rules (src/plan/sm90_fp8_weights_plan.c),
 * which need no GPU: the dense token tile, the few-row kernel's choice and its warps a row group, the
 * grouped forms' SKIP kernel, the TMA store of D, and the comparison switches that force each. The
 * expected values are the choices the H200 measurements in that file made.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sm90_fp8_weights_plan.h"

#define H200_SMS 132

static uint8_t fake[256] __attribute__((aligned(256)));

static const char *const switches[] = {"HFP4_SM90_FP8_WEIGHTS_TILE", "HFP4_SM90_FP8_WEIGHTS_DTMA",
                                       "HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE", "HFP4_SM90_FP8_GEMV",
                                       "HFP4_SM90_FP8_GEMV_MASKED", "HFP4_SM90_FP8_GEMV_KW"};

static void clear_switches(void) {
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++) unsetenv(switches[i]);
}

/* What the plan reads of a problem: grouping, sizes, the hint, and D (BF16 [m, n], no C, aligned) */
static hfp4_gemm_problem fp8w_problem(hfp4_grouping grouping, int64_t m, int64_t n, int64_t k, int32_t groups) {
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = grouping;
    p.m = m;
    p.n = n;
    p.k = k;
    p.num_groups = groups;
    p.d = (hfp4_output){fake, HFP4_DTYPE_BF16, n, grouping == HFP4_GROUPING_MASKED ? m * n : 0, NULL};
    return p;
}

static hfp4_sm90_fp8w_plan plan_of(const hfp4_gemm_problem *p) {
    hfp4_sm90_fp8w_plan plan;
    hfp4__sm90_fp8w_plan(p, H200_SMS, &plan);
    return plan;
}

TEST(fp8w_plan_dense_tile_by_waves) {
    CHECK_EQ_I64(hfp4__sm90_fp8w_pick_tile(8192, 8192, H200_SMS), 192);
    CHECK_EQ_I64(hfp4__sm90_fp8w_pick_tile(16384, 7168, H200_SMS), 192);
    CHECK_EQ_I64(hfp4__sm90_fp8w_pick_tile(256, 4096, H200_SMS), 128); /* 2 tiles of 192 for 256 rows */
    CHECK_EQ_I64(hfp4__sm90_fp8w_pick_tile(128, 4096, H200_SMS), 128);
    CHECK_EQ_I64(hfp4__sm90_fp8w_pick_tile(8192, 8192, 0), 192); /* (no SM count: one) */
}

TEST(fp8w_plan_gemv_warps_match_the_measured_best) {
    /* bench/RESULTS.md v46's table at m = 1: n, K-blocks -> the count the rule picks */
    CHECK_EQ_I64(hfp4__sm90_fp8_gemv_warps(7168, 16), 4);
    CHECK_EQ_I64(hfp4__sm90_fp8_gemv_warps(4096, 32), 8);
    CHECK_EQ_I64(hfp4__sm90_fp8_gemv_warps(32768, 8), 1);
    CHECK_EQ_I64(hfp4__sm90_fp8_gemv_warps(2048, 56), 8);
    CHECK_EQ_I64(hfp4__sm90_fp8_gemv_warps(12288, 32), 4);
    CHECK_EQ_I64(hfp4__sm90_fp8_gemv_warps(24576, 32), 4);
    CHECK_EQ_I64(hfp4__sm90_fp8_gemv_warps(6144, 56), 8);
    /* never more warps than K-blocks */
    CHECK_EQ_I64(hfp4__sm90_fp8_gemv_warps(4096, 1), 1);
    CHECK_EQ_I64(hfp4__sm90_fp8_gemv_warps(4096, 2), 2);
    CHECK_EQ_I64(hfp4__sm90_fp8_gemv_warps(16, 3), 2);
}

TEST(fp8w_plan_few_rows_for_dense_decode) {
    clear_switches();
    hfp4_gemm_problem p = fp8w_problem(HFP4_GROUPING_NONE, 1, 7168, 2048, 1);
    hfp4_sm90_fp8w_plan plan = plan_of(&p);
    CHECK_EQ_I64(plan.kernel, HFP4_FP8W_FEW_ROWS);
    CHECK_EQ_I64(plan.warps_per_rows, 4);
    p.m = 8;
    CHECK_EQ_I64(plan_of(&p).kernel, HFP4_FP8W_FEW_ROWS);
    /* m = 9..16 only below n = 8192 (the boundary the GPU test also runs: m = 12, n = 8320) */
    p.m = 12;
    p.n = 8000;
    CHECK_EQ_I64(plan_of(&p).kernel, HFP4_FP8W_FEW_ROWS);
    p.n = 8320;
    CHECK_EQ_I64(plan_of(&p).kernel, HFP4_FP8W_TILES);
    p.m = 17;
    p.n = 4096;
    CHECK_EQ_I64(plan_of(&p).kernel, HFP4_FP8W_TILES);
    /* HFP4_SM90_FP8_GEMV=0 keeps the tile kernel; _KW forces the warps */
    p.m = 1;
    setenv("HFP4_SM90_FP8_GEMV", "0", 1);
    CHECK_EQ_I64(plan_of(&p).kernel, HFP4_FP8W_TILES);
    unsetenv("HFP4_SM90_FP8_GEMV");
    setenv("HFP4_SM90_FP8_GEMV_KW", "2", 1);
    CHECK_EQ_I64(plan_of(&p).warps_per_rows, 2);
    setenv("HFP4_SM90_FP8_GEMV_KW", "3", 1); /* (not a count: the rule's) */
    CHECK_EQ_I64(plan_of(&p).warps_per_rows, hfp4__sm90_fp8_gemv_warps(4096, 16)); /* (n = 4096 since the m = 17 case) */
    clear_switches();
}

TEST(fp8w_plan_tile_switch_and_tma_store) {
    clear_switches();
    hfp4_gemm_problem p = fp8w_problem(HFP4_GROUPING_NONE, 8192, 8192, 8192, 1);
    hfp4_sm90_fp8w_plan plan = plan_of(&p);
    CHECK_EQ_I64(plan.kernel, HFP4_FP8W_TILES);
    CHECK_EQ_I64(plan.block_m, 192);
    CHECK_EQ_I64(plan.tma_store, 1);
    setenv("HFP4_SM90_FP8_WEIGHTS_TILE", "128", 1);
    CHECK_EQ_I64(plan_of(&p).block_m, 128);
    setenv("HFP4_SM90_FP8_WEIGHTS_TILE", "256", 1);
    plan = plan_of(&p);
    CHECK_EQ_I64(plan.block_m, 256);
    CHECK_EQ_I64(plan.tma_store, 0); /* (the 256-row tile stores from registers) */
    setenv("HFP4_SM90_FP8_WEIGHTS_TILE", "512", 1);
    CHECK_EQ_I64(plan_of(&p).block_m, 192);
    hfp4_gemm_problem small = fp8w_problem(HFP4_GROUPING_NONE, 256, 4096, 4096, 1);
    setenv("HFP4_SM90_FP8_WEIGHTS_TILE", "192", 1); /* (the rule picks 128 there) */
    CHECK_EQ_I64(plan_of(&small).block_m, 192);
    hfp4_gemm_problem grouped = fp8w_problem(HFP4_GROUPING_CONTIGUOUS, 4096, 4096, 4096, 8);
    CHECK_EQ_I64(plan_of(&grouped).block_m, 128); /* (grouped forms: 128-row segments, any switch) */
    unsetenv("HFP4_SM90_FP8_WEIGHTS_TILE");
    CHECK_EQ_I64(plan_of(&small).block_m, 128);
    /* the TMA store only where D allows it */
    setenv("HFP4_SM90_FP8_WEIGHTS_DTMA", "0", 1);
    CHECK_EQ_I64(plan_of(&p).tma_store, 0);
    setenv("HFP4_SM90_FP8_WEIGHTS_DTMA", "00", 1); /* (only "0" switches it off) */
    CHECK_EQ_I64(plan_of(&p).tma_store, 1);
    unsetenv("HFP4_SM90_FP8_WEIGHTS_DTMA");
    hfp4_gemm_problem q = p;
    q.n = 389; /* (it clipped a row only to 16 bytes: D's padding written, v40) */
    q.d.ld = 392;
    CHECK_EQ_I64(plan_of(&q).tma_store, 0);
    q = p;
    q.d.dtype = HFP4_DTYPE_FP32;
    CHECK_EQ_I64(plan_of(&q).tma_store, 0);
    q = p;
    q.d.c = fake;
    CHECK_EQ_I64(plan_of(&q).tma_store, 0);
    q = p;
    q.d.ld = 8196; /* rows 8196 x 2 bytes apart: not 16-byte multiples */
    CHECK_EQ_I64(plan_of(&q).tma_store, 0);
    q = p;
    q.d.data = fake + 2;
    CHECK_EQ_I64(plan_of(&q).tma_store, 0);
    clear_switches();
}

TEST(fp8w_plan_grouped_skip_idle_at_decode) {
    clear_switches();
    /* contiguous: at most 128 rows an expert on average (V4-Flash: T = 8 -> 48 rows + padding of 256
     * experts; T = 4096 -> 24576 + padding; T = 16384 -> ~114688) */
    hfp4_gemm_problem p = fp8w_problem(HFP4_GROUPING_CONTIGUOUS, 48 * 128, 4096, 4096, 256);
    hfp4_sm90_fp8w_plan plan = plan_of(&p);
    CHECK_EQ_I64(plan.kernel, HFP4_FP8W_TILES);
    CHECK_EQ_I64(plan.block_m, 128);
    CHECK_EQ_I64(plan.skip_idle, 1);
    p.m = 128 * 256;
    CHECK_EQ_I64(plan_of(&p).skip_idle, 1);
    p.m = 128 * 256 + 1;
    CHECK_EQ_I64(plan_of(&p).skip_idle, 0);
    p.m = 114688;
    CHECK_EQ_I64(plan_of(&p).skip_idle, 0);
    setenv("HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE", "1", 1);
    CHECK_EQ_I64(plan_of(&p).skip_idle, 1);
    setenv("HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE", "2", 1); /* (not 0 or 1: the rule's) */
    CHECK_EQ_I64(plan_of(&p).skip_idle, 0);
    p.m = 48 * 128;
    CHECK_EQ_I64(plan_of(&p).skip_idle, 1);
    setenv("HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE", "0", 1);
    CHECK_EQ_I64(plan_of(&p).skip_idle, 0);
    unsetenv("HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE");
    /* masked: expected_m, else m, at most 128 */
    hfp4_gemm_problem q = fp8w_problem(HFP4_GROUPING_MASKED, 256, 4096, 4096, 256);
    q.expected_m = 1;
    CHECK_EQ_I64(plan_of(&q).skip_idle, 1);
    q.expected_m = 129;
    CHECK_EQ_I64(plan_of(&q).skip_idle, 0);
    q.expected_m = 0; /* (no hint: m = 256 rows a group) */
    CHECK_EQ_I64(plan_of(&q).skip_idle, 0);
    q.m = 128;
    CHECK_EQ_I64(plan_of(&q).skip_idle, 1);
    /* dense problems never take it */
    hfp4_gemm_problem d = fp8w_problem(HFP4_GROUPING_NONE, 64, 4096, 4096, 1);
    CHECK_EQ_I64(plan_of(&d).skip_idle, 0);
    clear_switches();
}

TEST(fp8w_plan_masked_few_rows_is_opt_in) {
    clear_switches();
    hfp4_gemm_problem p = fp8w_problem(HFP4_GROUPING_MASKED, 16, 4096, 4096, 256);
    p.expected_m = 1;
    CHECK_EQ_I64(plan_of(&p).kernel, HFP4_FP8W_TILES); /* (faster at T = 1 only: v47) */
    setenv("HFP4_SM90_FP8_GEMV_MASKED", "yes", 1); /* (only "1" opts in) */
    CHECK_EQ_I64(plan_of(&p).kernel, HFP4_FP8W_TILES);
    setenv("HFP4_SM90_FP8_GEMV_MASKED", "1", 1);
    hfp4_sm90_fp8w_plan plan = plan_of(&p);
    CHECK_EQ_I64(plan.kernel, HFP4_FP8W_FEW_ROWS);
    /* its warps count min(groups, 6) groups' rows (a decode step's top-6 experts), at shapes where
     * n alone, a constant 6 and all the groups give different counts */
    CHECK_EQ_I64(plan.warps_per_rows, hfp4__sm90_fp8_gemv_warps(6 * 4096, 32));
    p.k = 2048;
    p.num_groups = 2; /* 2 x 4096 rows: 4 (six groups' rows would give 2) */
    CHECK_EQ_I64(plan_of(&p).warps_per_rows, 4);
    p.n = 512;
    p.num_groups = 256; /* 6 x 512 rows: 8 (n alone 8 too, all 256 groups' rows 2) */
    CHECK_EQ_I64(plan_of(&p).warps_per_rows, 8);
    p.num_groups = 1; /* 512 rows: 8 */
    CHECK_EQ_I64(plan_of(&p).warps_per_rows, 8);
    p.n = 4096;
    p.k = 4096;
    p.num_groups = HFP4_FP8_GEMV_MAX_GROUPS + 1; /* (its live-group list holds 1024) */
    CHECK_EQ_I64(plan_of(&p).kernel, HFP4_FP8W_TILES);
    /* contiguous calls never take it */
    hfp4_gemm_problem c = fp8w_problem(HFP4_GROUPING_CONTIGUOUS, 256, 4096, 4096, 8);
    CHECK_EQ_I64(plan_of(&c).kernel, HFP4_FP8W_TILES);
    /* masked TMA stores need each group's start 16-byte aligned */
    unsetenv("HFP4_SM90_FP8_GEMV_MASKED");
    p.num_groups = 4;
    CHECK_EQ_I64(plan_of(&p).tma_store, 1);
    p.d.stride_group = 16 * 4096 + 4;
    CHECK_EQ_I64(plan_of(&p).tma_store, 0);
    p.d.stride_group = (int64_t)1 << 40; /* (2 bytes an element: beyond the TMA's 2^40-byte stride) */
    CHECK_EQ_I64(plan_of(&p).tma_store, 0);
    p.num_groups = 1; /* (one group: its stride is never used) */
    CHECK_EQ_I64(plan_of(&p).tma_store, 1);
    clear_switches();
}
