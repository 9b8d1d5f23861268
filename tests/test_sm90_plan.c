/*
 * test_sm90_plan.c - the SM90 support matrix and tile choice (src/plan/sm90_plan.c), which need no
 * GPU: which requests are UNSUPPORTED (with the reason), which are INVALID, and the grid/tile plan.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sm90_plan.h"
#include "../src/weights/repack_sm90.h"

static uint8_t fake[1 << 16] __attribute__((aligned(256)));

/* A valid dense problem: FP8 A [m, k] with (1,128) FP32 scales, repacked B [n, k], BF16 D. */
static hfp4_gemm_problem valid_problem(int64_t m, int64_t n, int64_t k) {
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = HFP4_GROUPING_NONE;
    p.m = m;
    p.n = n;
    p.k = k;
    p.num_groups = 1;
    p.a = (hfp4_matrix){fake, HFP4_DTYPE_FP8_E4M3, m, k, k, 0, {fake, HFP4_DTYPE_FP32, 1, 128, (k + 127) / 128, 1, 0}};
    /* the descriptor the repack returns (the buffer itself is never read by the plan) */
    hfp4_sm90_geometry geo = hfp4_sm90_geometry_make(1, n, k, 0);
    hfp4__sm90_describe(&geo, fake, &p.b);
    p.d = (hfp4_output){fake, HFP4_DTYPE_BF16, n, 0, NULL};
    return p;
}

TEST(sm90_plan_token_tile_follows_rows_and_alignment) {
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(1, 0), 8);
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(8, 0), 8);
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(9, 0), 16);
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(32, 0), 32);
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(33, 0), 64);
    unsetenv("HFP4_SM90_MAX_TOKEN_TILE");
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(65, 0), 128);
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(100000, 0), 128);
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(100000, 128), 128);
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(100000, 64), 64);  /* must divide the alignment */
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(100000, 32), 32);
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(100000, 8), 8);
    setenv("HFP4_SM90_MAX_TOKEN_TILE", "64", 1); /* the comparison cap */
    CHECK_EQ_I64(hfp4__sm90_pick_block_tokens(100000, 0), 64);
    unsetenv("HFP4_SM90_MAX_TOKEN_TILE");
}

TEST(sm90_plan_fills_the_work_items) {
    hfp4_gemm_problem p = valid_problem(300, 1000, 4096);
    hfp4_sm90_plan plan;
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 128);
    CHECK_EQ_I64(plan.params.tiles_n, 8);  /* align(1000, 128) / 128 */
    CHECK_EQ_I64(plan.params.tiles_m, 3);  /* ceil(300 / 128) */
    CHECK_EQ_I64(plan.params.tiles_total, 24);
    CHECK_EQ_I64(plan.params.w_chunks, 32);
    CHECK_EQ_I64(plan.params.w_pairs, 64);
    CHECK_EQ_I64(plan.a_dims[0], 4096);
    CHECK_EQ_I64(plan.a_dims[1], 300);
}

/* The kernels divide item indices by tiles_n and tiles_m with hfp4_sm90_divisor's constants (x <
 * 2^30, the plan's item limit; the formula holds to 2^31): every divisor up to 2^16 and a spread
 * of larger ones, at x around every multiple on a geometric spread of quotients and at the ends. */
static int fast_div_ok(uint32_t d, uint32_t x) {
    uint32_t mul, shift;
    hfp4_sm90_divisor(d, &mul, &shift);
    const uint32_t hi = (uint32_t)(((uint64_t)x * mul) >> 32);
    return ((hi + x) >> shift) == x / d;
}

TEST(sm90_plan_fast_division_by_the_tile_counts) {
    const uint32_t limit = 0x7FFFFFFFu;
    for (uint32_t d = 1; d <= (1u << 20); d = d < 65536 ? d + 1 : d * 3 + 1) {
        int bad = 0;
        for (uint64_t q = 0; q * d <= limit && !bad; q = q < 64 ? q + 1 : q + q / 8) {
            const uint64_t x = q * d;
            bad |= !fast_div_ok(d, (uint32_t)x);
            if (x > 0) bad |= !fast_div_ok(d, (uint32_t)(x - 1));
            if (x + 1 <= limit) bad |= !fast_div_ok(d, (uint32_t)(x + 1));
            if (x + d - 1 <= limit) bad |= !fast_div_ok(d, (uint32_t)(x + d - 1));
        }
        bad |= !fast_div_ok(d, (1u << 30) - 1) || !fast_div_ok(d, limit);
        CHECK_MSG(!bad, "hfp4_sm90_divisor(%u) divides wrongly", d);
        if (bad) break;
    }
}

/* The round-up method is exact for every x < 2^32 when 2^(32+l) <= (2^32 + mul) d <= 2^(32+l) + 2^l
 * (l = shift): every divisor up to 2^22, and a pseudo-random sample up to 2^30 (the plan's bound). */
static int divisor_bound_ok(uint32_t d) {
    uint32_t mul, shift;
    hfp4_sm90_divisor(d, &mul, &shift);
    const uint64_t prod = (((uint64_t)1 << 32) + mul) * (uint64_t)d, lo = (uint64_t)1 << (32 + shift);
    return shift <= 31 && prod >= lo && prod <= lo + ((uint64_t)1 << shift);
}

TEST(sm90_plan_fast_division_bound) {
    uint32_t first_bad = 0;
    for (uint32_t d = 1; d <= (1u << 22) && !first_bad; d++)
        if (!divisor_bound_ok(d)) first_bad = d;
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 200000 && !first_bad; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const uint32_t d = (uint32_t)(state >> 34) + 1; /* 1 .. 2^30 */
        if (!divisor_bound_ok(d)) first_bad = d;
    }
    CHECK_MSG(first_bad == 0, "hfp4_sm90_divisor(%u) misses the round-up method's bound", first_bad);
    CHECK(divisor_bound_ok(1u << 30) && divisor_bound_ok((1u << 30) - 1) && divisor_bound_ok(1u << 31));
}

/* The 128-token tile's raster order (hfp4_sm90_raster_tiles, which work_items.cuh runs): every item of
 * tiles_m x tiles_n maps to its own (token tile, weight tile), in range, in the order plain division
 * gives (groups of tiles_n x G items, token tile fastest within one), for groups of 4 and 16 (the
 * launcher's) with whole and shorter last groups, up to the V4-Flash T = 16384 contiguous shape
 * (~900 x 32) and dense 8192^3's 64 x 64. */
TEST(sm90_raster_order_is_a_bijection) {
    static const int32_t ms[] = {5, 17, 18, 32, 33, 64, 100, 129, 903};
    static const int32_t ns[] = {1, 2, 7, 32, 56, 64, 100};
    static uint8_t seen[903 * 100];
    for (int si = 0; si < 2; si++)
        for (unsigned a = 0; a < sizeof ms / sizeof ms[0]; a++)
            for (unsigned b = 0; b < sizeof ns / sizeof ns[0]; b++) {
                const int shift = si ? 4 : 2;
                if (ms[a] <= (1 << shift)) continue;
                hfp4_sm90_gemm_params k;
                memset(&k, 0, sizeof k);
                k.tiles_m = ms[a];
                k.tiles_n = ns[b];
                hfp4_sm90_set_raster(&k, shift);
                memset(seen, 0, sizeof seen);
                int bad = 0;
                const int32_t g = 1 << shift, per = g * ns[b];
                for (int32_t item = 0; item < ms[a] * ns[b] && !bad; item++) {
                    int32_t m, n;
                    hfp4_sm90_raster_tiles(item, (int32_t)k.tiles_m, (int32_t)k.tiles_n, k.raster_m, k.raster_shift,
                                           k.raster_per_mul, k.raster_per_shift, &m, &n);
                    bad = m < 0 || m >= ms[a] || n < 0 || n >= ns[b] || seen[m * ns[b] + n]++;
                    /* the order itself, by plain division: group item / per, token tile fastest in it
                     * (a last group of fewer tiles cycles over those) */
                    const int32_t grp = item / per, within = item % per;
                    const int32_t len = ms[a] - grp * g < g ? ms[a] - grp * g : g;
                    bad = bad || n != within / len || m != grp * g + within % len;
                }
                CHECK_MSG(!bad, "raster of %d x %d token x weight tiles, groups of %d", ms[a], ns[b], 1 << shift);
                if (bad) return;
            }
}

/* The plan's vector-store decision for p (-1 if p does not plan). */
static int planned_d_vec(const hfp4_gemm_problem *p) {
    hfp4_sm90_plan plan;
    return hfp4__sm90_plan("t", p, &plan) == HFP4_OK ? plan.params.d_vec : -1;
}

TEST(sm90_plan_vector_stores_need_aligned_rows) {
    /* the epilogue stores 8 outputs at once only when every row (and group) of D and C starts
     * 16-byte aligned; otherwise element stores */
    hfp4_gemm_problem p = valid_problem(64, 1000, 256);
    CHECK_EQ_I64(planned_d_vec(&p), 1); /* BF16, ld 1000 */
    p.d.ld = 1004;
    CHECK_EQ_I64(planned_d_vec(&p), 0); /* 2008-byte rows */
    p.d.dtype = HFP4_DTYPE_FP32;
    CHECK_EQ_I64(planned_d_vec(&p), 1); /* 4016-byte rows */
    p.d.ld = 1002;
    CHECK_EQ_I64(planned_d_vec(&p), 0);
    p = valid_problem(64, 1000, 256);
    p.d.data = fake + 2; /* D itself off by 2 bytes */
    CHECK_EQ_I64(planned_d_vec(&p), 0);
    p.d.data = fake;
    p.d.c = fake + 1024;
    CHECK_EQ_I64(planned_d_vec(&p), 1); /* C aligned */
    p.d.c = fake + 1026;
    CHECK_EQ_I64(planned_d_vec(&p), 0); /* C off by 2 bytes */
    /* masked with one group: the group stride is never used, so it does not matter */
    p = valid_problem(64, 1000, 256);
    p.grouping = HFP4_GROUPING_MASKED;
    p.layout = (const int32_t *)fake;
    p.d.stride_group = 4;
    CHECK_EQ_I64(planned_d_vec(&p), 1);
}

/* The plan's TMA-store decision for p (-1 if p does not plan). */
static int planned_d_tma(const hfp4_gemm_problem *p) {
    hfp4_sm90_plan plan;
    return hfp4__sm90_plan("t", p, &plan) == HFP4_OK ? plan.params.d_tma : -1;
}

TEST(sm90_plan_tma_store_only_for_the_128_token_tile_bf16_without_c) {
    /* D goes out by TMA store (epilogue.cuh) at the 128-token tile, BF16 D without C, rows aligned
     * as for the vector stores, n a multiple of 8; everything else keeps the vector or element stores */
    hfp4_gemm_problem p = valid_problem(300, 1000, 256);
    CHECK_EQ_I64(planned_d_tma(&p), 1);
    p.d.ld = 1008; /* padded rows, still 16-byte multiples */
    CHECK_EQ_I64(planned_d_tma(&p), 1);
    p.d.ld = 1004; /* not 16-byte rows */
    CHECK_EQ_I64(planned_d_tma(&p), 0);
    p = valid_problem(300, 996, 256); /* n % 8 = 4 with 16-byte rows: the map would clip at 16 bytes */
    p.d.ld = 1000;
    CHECK_EQ_I64(planned_d_tma(&p), 0);
    p = valid_problem(300, 1000, 256);
    p.d.dtype = HFP4_DTYPE_FP32;
    CHECK_EQ_I64(planned_d_tma(&p), 0);
    p = valid_problem(300, 1000, 256);
    p.d.c = fake + 1024;
    CHECK_EQ_I64(planned_d_tma(&p), 0);
    p = valid_problem(64, 1000, 256); /* the 64-token tile */
    CHECK_EQ_I64(planned_d_tma(&p), 0);
    p = valid_problem(300, 1000, 256);
    setenv("HFP4_SM90_TMA_STORE", "0", 1);
    CHECK_EQ_I64(planned_d_tma(&p), 0);
    unsetenv("HFP4_SM90_TMA_STORE");
    CHECK_EQ_I64(planned_d_tma(&p), 1);
}

/* A grouped problem (masked: G groups of m rows; contiguous: m rows over G experts) with n x k
 * weights on the fake buffers: the plan reads no device memory. */
static hfp4_gemm_problem grouped_problem_nk(hfp4_grouping g, int64_t m, int32_t groups, int64_t expected_m, int64_t n,
                                            int64_t k) {
    hfp4_gemm_problem p = valid_problem(m, n, k);
    p.grouping = g;
    p.num_groups = groups;
    p.layout = (const int32_t *)fake;
    p.expected_m = expected_m;
    hfp4_sm90_geometry geo = hfp4_sm90_geometry_make(groups, n, k, 0);
    hfp4__sm90_describe(&geo, fake, &p.b);
    if (g == HFP4_GROUPING_MASKED) {
        p.a.stride_group = m * k;
        p.a.scales.stride_group = m * ((k + 127) / 128);
        p.d.stride_group = m * n;
    }
    return p;
}
/* the same with 256 x 256 weights */
static hfp4_gemm_problem grouped_problem(hfp4_grouping g, int64_t m, int32_t groups, int64_t expected_m) {
    return grouped_problem_nk(g, m, groups, expected_m, 256, 256);
}

TEST(sm90_plan_balances_the_decode_walk) {
    unsetenv("HFP4_SM90_BALANCE");
    hfp4_sm90_plan plan;
    /* masked decode (8-token tile): balanced by live item, up to HFP4_SM90_BALANCE_MAX_GROUPS */
    hfp4_gemm_problem p = grouped_problem(HFP4_GROUPING_MASKED, 16, 256, 1);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 8);
    CHECK_EQ_I64(plan.params.balanced, 1);
    p = grouped_problem(HFP4_GROUPING_MASKED, 16, HFP4_SM90_BALANCE_MAX_GROUPS + 1, 1);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.params.balanced, 0); /* too many groups for the shared-memory prefix */
    p = grouped_problem(HFP4_GROUPING_MASKED, 4096, 4, 1000);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 128);
    CHECK_EQ_I64(plan.params.balanced, 0); /* prefill tiles keep the strided walk */
    /* contiguous decode: balanced by computing tile, up to HFP4_SM90_BALANCE_MAX_TILES tiles */
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 2);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 8);
    CHECK_EQ_I64(plan.params.balanced, 2);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 8 * (HFP4_SM90_BALANCE_MAX_TILES + 1), 8, 2);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.params.balanced, 0);
    /* the comparison switch */
    setenv("HFP4_SM90_BALANCE", "0", 1);
    p = grouped_problem(HFP4_GROUPING_MASKED, 16, 256, 1);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.params.balanced, 0);
    unsetenv("HFP4_SM90_BALANCE");
}

/* The dynamic walk (dynamic_walk.cuh): the balanced decode walks, and the 128-token tile of the
 * contiguous and psum layouts (items in raster order, bench/RESULTS.md v49-v50), not the contiguous
 * layout's narrow-block split's launch, masked or dense prefill; HFP4_SM90_DYNAMIC=0 turns it off.
 * (The launcher then takes a counter only with more items than CTAs: the GPU tests.) */
TEST(sm90_plan_dynamic_walk_where_items_differ_in_length) {
    unsetenv("HFP4_SM90_DYNAMIC");
    unsetenv("HFP4_SM90_BALANCE");
    hfp4_sm90_plan plan;
    hfp4_gemm_problem p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 2); /* decode, balanced */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 8);
    CHECK_EQ_I64(plan.params.dynamic, 1);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 4096, 8, 512); /* prefill, with a hint */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 128);
    CHECK_EQ_I64(plan.narrow_split, 0);
    CHECK_EQ_I64(plan.params.dynamic, 1);
    CHECK_EQ_I64(plan.params.dyn_slot, -1); /* (the launcher's) */
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 0); /* the narrow-block split's 128-token launch */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.narrow_split, 1);
    CHECK_EQ_I64(plan.params.dynamic, 0);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS_PSUM, 4096, 8, 0);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 128);
    CHECK_EQ_I64(plan.params.dynamic, 1);
    p = grouped_problem(HFP4_GROUPING_MASKED, 4096, 4, 1000);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 128);
    CHECK_EQ_I64(plan.params.dynamic, 0);
    p = valid_problem(4096, 1024, 256);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.params.dynamic, 0);
    setenv("HFP4_SM90_DYNAMIC", "0", 1);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 4096, 8, 512);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.params.dynamic, 0);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 2);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.params.dynamic, 0);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS_PSUM, 4096, 8, 0);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.params.dynamic, 0);
    unsetenv("HFP4_SM90_DYNAMIC");
}

/* Narrow items (narrow_items.cuh): the 128-token tile of the contiguous and psum layouts, with or
 * without a hint, and nothing else; HFP4_SM90_NARROW=0 turns them off. */
TEST(sm90_plan_narrow_items_for_the_contiguous_128_token_tile) {
    unsetenv("HFP4_SM90_NARROW");
    hfp4_sm90_plan plan;
    hfp4_gemm_problem p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 0); /* m / groups = 128 */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 128);
    CHECK_EQ_I64(plan.params.narrow, 2); /* (2: and the narrow-block split, below) */
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS_PSUM, 1024, 8, 0);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.params.narrow, 1);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 2); /* the hint's 8-token tile */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 8);
    CHECK_EQ_I64(plan.params.narrow, 0);
    p = grouped_problem(HFP4_GROUPING_MASKED, 4096, 4, 1000); /* masked and dense: never */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 128);
    CHECK_EQ_I64(plan.params.narrow, 0);
    p = valid_problem(300, 1000, 256);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.params.narrow, 0);
    setenv("HFP4_SM90_NARROW", "0", 1);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 0);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.params.narrow, 0);
    CHECK_EQ_I64(plan.narrow_split, 0);
    unsetenv("HFP4_SM90_NARROW");
}

/* The narrow-block split (narrow_items.cuh): contiguous ids without a hint at the 128-token tile,
 * while the 8-token launch's bitmask, prefix and block flags fit (m <= 8 x HFP4_SM90_SPLIT_MAX_TILES);
 * that launch's plan is the 8-token tile, balanced, params.narrow 3. */
TEST(sm90_plan_narrow_block_split) {
    unsetenv("HFP4_SM90_NARROW_SPLIT");
    hfp4_sm90_plan plan, narrow;
    hfp4_gemm_problem p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 0);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.narrow_split, 1);
    CHECK_EQ_I64(plan.params.narrow, 2);
    CHECK_STATUS(hfp4__sm90_plan_narrow_blocks("t", &p, &plan, &narrow), HFP4_OK);
    CHECK_EQ_I64(narrow.block_tokens, 8);
    CHECK_EQ_I64(narrow.params.balanced, 2);
    CHECK_EQ_I64(narrow.params.narrow, 3);
    CHECK_EQ_I64(narrow.narrow_split, 0);
    CHECK_EQ_I64(narrow.grid_y, 1024 / 8);
    CHECK_EQ_I64(narrow.params.w_evict_first, 1); /* (one 8-token tile a group expected) */
    /* the split row: 32 for experts of at most 2 MB of weights (this one: 256 x 256), the same in
     * both launches; 0 beyond (the launches pick 16 or 8); HFP4_SM90_SPLIT_ROW overrides */
    CHECK_EQ_I64(plan.params.split_row, 32);
    CHECK_EQ_I64(narrow.params.split_row, 32);
    CHECK_EQ_I64(hfp4__sm90_split_row(512, 4096), 32);   /* V4-Flash TP8 w13 */
    CHECK_EQ_I64(hfp4__sm90_split_row(4096, 256), 32);   /* TP8 w2 */
    CHECK_EQ_I64(hfp4__sm90_split_row(4096, 1025), 0);   /* (0: the launches pick 16 or 8) */
    CHECK_EQ_I64(hfp4__sm90_split_row(4096, 2048), 0);   /* V4-Flash w2 */
    CHECK_EQ_I64(hfp4__sm90_split_row(6144, 7168), 0);   /* V4-Pro w13 */
    { /* weights over 2 MB, end to end: both plans leave the row to the launches (0) */
        const hfp4_gemm_problem q = grouped_problem_nk(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 0, 2048, 2304);
        CHECK_STATUS(hfp4__sm90_plan("t", &q, &plan), HFP4_OK);
        CHECK_EQ_I64(plan.narrow_split, 1);
        CHECK_STATUS(hfp4__sm90_plan_narrow_blocks("t", &q, &plan, &narrow), HFP4_OK);
        CHECK_EQ_I64(plan.params.split_row, 0);
        CHECK_EQ_I64(narrow.params.split_row, 0);
    }
    setenv("HFP4_SM90_SPLIT_ROW", "8", 1);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_STATUS(hfp4__sm90_plan_narrow_blocks("t", &p, &plan, &narrow), HFP4_OK);
    CHECK_EQ_I64(plan.params.split_row, 8);
    CHECK_EQ_I64(narrow.params.split_row, 8);
    setenv("HFP4_SM90_SPLIT_ROW", "32", 1);
    CHECK_EQ_I64(hfp4__sm90_split_row(4096, 2048), 32);
    setenv("HFP4_SM90_SPLIT_ROW", "16", 1);
    CHECK_EQ_I64(hfp4__sm90_split_row(4096, 2048), 16);
    setenv("HFP4_SM90_SPLIT_ROW", "auto", 1);
    CHECK_EQ_I64(hfp4__sm90_split_row(512, 4096), 0);
    setenv("HFP4_SM90_SPLIT_ROW", "24", 1); /* (not a choice: the plan's) */
    CHECK_EQ_I64(hfp4__sm90_split_row(4096, 2048), 0);
    unsetenv("HFP4_SM90_SPLIT_ROW");
    setenv("HFP4_SM90_SPLIT_EVICT_FIRST", "0", 1);
    CHECK_STATUS(hfp4__sm90_plan_narrow_blocks("t", &p, &plan, &narrow), HFP4_OK);
    CHECK_EQ_I64(narrow.params.w_evict_first, 0);
    unsetenv("HFP4_SM90_SPLIT_EVICT_FIRST");
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 8 * HFP4_SM90_SPLIT_MAX_TILES, 8, 0); /* the largest */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.narrow_split, 1);
    CHECK_EQ_I64(plan.rows_tile, 128);
    CHECK_STATUS(hfp4__sm90_plan_narrow_blocks("t", &p, &plan, &narrow), HFP4_OK);
    CHECK_EQ_I64(narrow.grid_y, HFP4_SM90_SPLIT_MAX_TILES);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 8 * HFP4_SM90_SPLIT_MAX_TILES - 3, 8, 0); /* m % 8 != 0 */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.narrow_split, 1);
    CHECK_STATUS(hfp4__sm90_plan_narrow_blocks("t", &p, &plan, &narrow), HFP4_OK);
    CHECK_EQ_I64(narrow.grid_y, HFP4_SM90_SPLIT_MAX_TILES);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 8 * HFP4_SM90_SPLIT_MAX_TILES + 8, 8, 0); /* past it */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.narrow_split, 0);
    CHECK_REJECT(hfp4__sm90_plan_narrow_blocks("t", &p, &plan, &narrow), HFP4_ERR_INTERNAL, "narrow-block");
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 0);
    p.m_alignment = 256; /* 128-row blocks still aligned */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.narrow_split, 1);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 8 * HFP4_SM90_SPLIT_MAX_TILES + 128, 8, 0);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.narrow_split, 0);
    CHECK_EQ_I64(plan.params.narrow, 1);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 100); /* a hint: its tile, no split */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 128);
    CHECK_EQ_I64(plan.narrow_split, 0);
    CHECK_EQ_I64(plan.params.narrow, 1);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 6144, 256, 0); /* m / groups 24 (T = 8 under transformers) */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 128);
    CHECK_EQ_I64(plan.rows_tile, 32); /* (the opt-in BF16 path leaves it to the split: fp8_fp4_gemm.cu) */
    CHECK_EQ_I64(plan.narrow_split, 1);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 768, 256, 0); /* m / groups 3 (T = 1): the 8-token tile */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 8);
    CHECK_EQ_I64(plan.narrow_split, 0);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 6144, 256, 0);
    p.m_alignment = 64; /* blocks not 128-row aligned: the tile follows m / groups */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 32);
    CHECK_EQ_I64(plan.narrow_split, 0);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 6144, 256, 0);
    setenv("HFP4_SM90_MAX_TOKEN_TILE", "64", 1);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.block_tokens, 32);
    CHECK_EQ_I64(plan.narrow_split, 0);
    unsetenv("HFP4_SM90_MAX_TOKEN_TILE");
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS_PSUM, 1024, 8, 0); /* psum: narrow items only */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.narrow_split, 0);
    setenv("HFP4_SM90_NARROW_SPLIT", "0", 1);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 0);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.narrow_split, 0);
    CHECK_EQ_I64(plan.params.narrow, 1);
    unsetenv("HFP4_SM90_NARROW_SPLIT");
    setenv("HFP4_SM90_BALANCE", "0", 1); /* the 8-token launch needs the balanced walk */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.narrow_split, 0);
    unsetenv("HFP4_SM90_BALANCE");
}

/* The warp path (warp_decode.cu) is opt-in for the masked layout, automatic for dense GEMVs, and takes
 * only what it serves: at most 8 expected rows per group, K <= 16384 and 72 KB of shared memory. */
TEST(sm90_plan_warp_path_is_opt_in_and_bounded) {
    hfp4_sm90_plan plan;
    hfp4_gemm_problem p = grouped_problem(HFP4_GROUPING_MASKED, 16, 256, 1);
    hfp4__sm90_warp_set(-1);
    if (!getenv("HFP4_SM90_WARP_DECODE")) { /* off unless asked for */
        CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
        CHECK_EQ_I64(plan.warp_decode, 0);
    }
    hfp4__sm90_warp_set(1);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.warp_decode, 1);
    p = grouped_problem(HFP4_GROUPING_MASKED, 16, 256, 8);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.warp_decode, 1);
    p = grouped_problem(HFP4_GROUPING_MASKED, 16, 256, 9); /* more rows expected than a unit holds */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.warp_decode, 0);
    p = grouped_problem(HFP4_GROUPING_MASKED, 8, 256, 0); /* no hint: m decides */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.warp_decode, 1);
    p = grouped_problem(HFP4_GROUPING_MASKED, 16, 256, 0);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.warp_decode, 0);
    p = grouped_problem(HFP4_GROUPING_CONTIGUOUS, 1024, 8, 2); /* contiguous: the main kernel */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.warp_decode, 0);
    p = valid_problem(1, 4096, 4096); /* a dense GEMV: 32 chunks, ~42 KB */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.warp_decode, 1);
    p = valid_problem(9, 4096, 4096);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.warp_decode, 0);
    p = valid_problem(1, 256, 16384); /* within K, but 128 KB of activation tiles */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.warp_decode, 0);
    /* the shared memory: V4-Flash w13 (32 chunks, 1x128, UE8M0, 256 experts) and the FP32-scale limit */
    CHECK_EQ_I64(hfp4__sm90_warp_smem_bytes(32, 0, 0, 256, 1), 1024 + 32768 + 1024 + 8192 + 32 + 4 * 257);
    CHECK(hfp4__sm90_warp_smem_bytes(34, 0, 1, 8, 1) <= HFP4_SM90_WARP_MAX_SMEM);  /* K 4352, FP32 scales */
    CHECK(hfp4__sm90_warp_smem_bytes(64, 0, 1, 8, 1) > HFP4_SM90_WARP_MAX_SMEM);   /* K 8192, FP32 scales */
    CHECK(hfp4__sm90_warp_smem_bytes(32, 1, 0, 384, 1) <= HFP4_SM90_WARP_MAX_SMEM); /* K 4096, 1x32 scales */
    CHECK(hfp4__sm90_warp_smem_bytes(64, 0, 0, 1, 1) > HFP4_SM90_WARP_MAX_SMEM);   /* K 8192: 64 KB of tiles */
    /* the K-split's slots (16-byte aligned after the prefix) and barriers: 7 partners at 8 */
    CHECK_EQ_I64(hfp4__sm90_warp_smem_bytes(32, 0, 0, 256, 8), 1024 + 32768 + 1024 + 8192 + 32 + 4 * 257 + 12 + 7 * 2048 + 16);
    /* the cluster size from K: parts of at least 4 chunks, at most 8 CTAs, within the 72 KB */
    CHECK_EQ_I64(hfp4__sm90_warp_split(32, 0, 0, 256), getenv("HFP4_SM90_WARP_SPLIT") ? hfp4__sm90_warp_split(32, 0, 0, 256) : 8);
    if (!getenv("HFP4_SM90_WARP_SPLIT")) {
        CHECK_EQ_I64(hfp4__sm90_warp_split(31, 0, 0, 256), 4);
        CHECK_EQ_I64(hfp4__sm90_warp_split(16, 0, 0, 256), 4);
        CHECK_EQ_I64(hfp4__sm90_warp_split(8, 0, 0, 1), 2);
        CHECK_EQ_I64(hfp4__sm90_warp_split(7, 0, 0, 1), 1);
        CHECK_EQ_I64(hfp4__sm90_warp_split(2, 0, 0, 1), 1);
        CHECK_EQ_I64(hfp4__sm90_warp_split(34, 0, 1, 8), 1); /* K 4352, FP32 scales: a slot would pass 72 KB */
        CHECK(hfp4__sm90_warp_smem_bytes(34, 0, 1, 8, 2) > HFP4_SM90_WARP_MAX_SMEM);
        CHECK_EQ_I64(hfp4__sm90_warp_split(32, 0, 1, 8), 2); /* K 4096, FP32 scales: one partner's slot fits */
        CHECK(hfp4__sm90_warp_smem_bytes(32, 0, 1, 8, 4) > HFP4_SM90_WARP_MAX_SMEM);
        hfp4__sm90_warp_split_set(2); /* (the tests' cap) */
        CHECK_EQ_I64(hfp4__sm90_warp_split(32, 0, 0, 256), 2);
        hfp4__sm90_warp_split_set(1);
        CHECK_EQ_I64(hfp4__sm90_warp_split(32, 0, 0, 256), 1);
        hfp4__sm90_warp_split_set(-1);
        p = valid_problem(1, 4096, 4096); /* the plan carries it for the warp path only */
        CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
        CHECK_EQ_I64(plan.warp_split, 8);
    }
    /* without a switch a dense GEMV is the launcher's to decide (2: where it splits 4 or 8 ways) */
    hfp4__sm90_warp_set(-1);
    if (!getenv("HFP4_SM90_WARP_DECODE")) {
        p = valid_problem(1, 4096, 4096);
        CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
        CHECK_EQ_I64(plan.warp_decode, getenv("HFP4_SM90_WARP_SPLIT") ? plan.warp_decode : 2);
        p = valid_problem(9, 4096, 4096);
        CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
        CHECK_EQ_I64(plan.warp_decode, 0);
        if (!getenv("HFP4_SM90_WARP_SPLIT")) {
            p = valid_problem(1, 4096, 1024); /* 8 chunks: a split of 2 at most, so not automatic */
            CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
            CHECK_EQ_I64(plan.warp_decode, 0);
            CHECK_EQ_I64(plan.warp_split, 1);
            p = valid_problem(1, 4096, 2048); /* 16 chunks: 4 */
            CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
            CHECK_EQ_I64(plan.warp_decode, 2);
            CHECK_EQ_I64(plan.warp_split, 4);
        }
    }
    hfp4__sm90_warp_set(0);
    p = grouped_problem(HFP4_GROUPING_MASKED, 16, 256, 1);
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.warp_decode, 0);
    CHECK_EQ_I64(plan.warp_split, 1);
    p = valid_problem(1, 4096, 4096); /* off: not even a dense GEMV */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    CHECK_EQ_I64(plan.warp_decode, 0);
    hfp4__sm90_warp_set(-1);
}

/* The psum layout's token tiles divide rows (< 2^30) by m_alignment with the plan's
 * hfp4_sm90_divisor constants (work_items.cuh: resolve_tile): any positive multiple of 8 the
 * problem check accepts, up to 2^31 - 8, beyond the bound test's sample of divisors up to 2^30. */
TEST(sm90_plan_divides_by_the_psum_alignment) {
    static const int32_t aligns[] = {0, 8, 24, 128, 384, 1 << 20, (1 << 30) + 8, 2147483640};
    for (int i = 0; i < (int)(sizeof aligns / sizeof aligns[0]); i++) {
        hfp4_gemm_problem p = grouped_problem(HFP4_GROUPING_CONTIGUOUS_PSUM, 1024, 8, 0);
        p.m_alignment = aligns[i];
        hfp4_sm90_plan plan;
        CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
        const uint32_t d = aligns[i] ? (uint32_t)aligns[i] : HFP4_DEFAULT_M_ALIGNMENT;
        CHECK_EQ_I64(plan.params.m_alignment, d);
        CHECK(divisor_bound_ok(d));
        const uint32_t xs[] = {0, 1, d - 1, d, d + 1, 2 * d - 1, 1000000007u % (1u << 30), (1u << 30) - 1};
        int bad = 0;
        for (int j = 0; j < (int)(sizeof xs / sizeof xs[0]); j++) {
            const uint32_t x = xs[j];
            if (x >= (1u << 30)) continue;
            const uint32_t hi = (uint32_t)(((uint64_t)x * plan.params.m_align_mul) >> 32);
            bad |= ((hi + x) >> plan.params.m_align_shift) != x / d;
        }
        CHECK_MSG(!bad, "the plan's constants divide wrongly by m_alignment = %u", d);
    }
    uint32_t first_bad = 0;
    uint64_t state = 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < 200000 && !first_bad; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const uint32_t d = (uint32_t)(state >> 34) + (1u << 30); /* 2^30 .. 2^31 - 1 */
        if (!divisor_bound_ok(d)) first_bad = d;
    }
    CHECK_MSG(first_bad == 0, "hfp4_sm90_divisor(%u) misses the round-up method's bound", first_bad);
}

TEST(sm90_plan_unsupported_requests_name_the_reason) {
    hfp4_gemm_problem p = valid_problem(8, 128, 128);
    hfp4_sm90_plan plan;
    p.b = (hfp4_matrix){fake, HFP4_DTYPE_FP4_E2M1, 128, 128, 64, 0, {fake, HFP4_DTYPE_UE8M0, 1, 32, 4, 1, 0}};
    CHECK_REJECT(hfp4__sm90_plan("t", &p, &plan), HFP4_ERR_UNSUPPORTED, "repack");
    p = valid_problem(8, 128, 128);
    p.a.dtype = HFP4_DTYPE_BF16;
    p.a.scales = (hfp4_scales){NULL, HFP4_DTYPE_NONE, 0, 0, 0, 0, 0};
    CHECK_REJECT(hfp4__sm90_plan("t", &p, &plan), HFP4_ERR_UNSUPPORTED, "bf16");
    p = valid_problem(8, 128, 160);
    p.a.ld = 168; /* >= k, but not a multiple of 16 bytes: TMA cannot load it */
    CHECK_REJECT(hfp4__sm90_plan("t", &p, &plan), HFP4_ERR_UNSUPPORTED, "multiple of 16");
    p = valid_problem(8, 128, 128);
    p.a.data = fake + 8;
    CHECK_REJECT(hfp4__sm90_plan("t", &p, &plan), HFP4_ERR_UNSUPPORTED, "16-byte aligned");
}

TEST(sm90_plan_rejects_weights_repacked_for_another_shape) {
    hfp4_gemm_problem p = valid_problem(8, 256, 512);
    hfp4_sm90_plan plan;
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_OK);
    p.n = p.b.rows = p.d.ld = 384; /* same buffer, other N: its scale region would be misplaced */
    CHECK_REJECT(hfp4__sm90_plan("t", &p, &plan), HFP4_ERR_INVALID_ARGUMENT, "repacked for");
    p = valid_problem(8, 256, 512);
    p.b.data = fake + 8;
    CHECK_REJECT(hfp4__sm90_plan("t", &p, &plan), HFP4_ERR_INVALID_ARGUMENT, "16-byte aligned");
}

TEST(sm90_plan_invalid_beats_unsupported) {
    /* a malformed request is INVALID_ARGUMENT even when it also has no kernel */
    hfp4_gemm_problem p = valid_problem(8, 128, 128);
    hfp4_sm90_plan plan;
    p.a.dtype = HFP4_DTYPE_BF16; /* unsupported ... */
    p.k = 100;                   /* ... and invalid */
    CHECK_STATUS(hfp4__sm90_plan("t", &p, &plan), HFP4_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(hfp4__sm90_plan("t", NULL, &plan), HFP4_ERR_INVALID_ARGUMENT);
}
