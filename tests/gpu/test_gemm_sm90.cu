/*
 * test_gemm_sm90.cu - the SM90 FP8 x FP4 kernels against the exact CPU reference, every element,
 * on fresh random data, outputs poisoned first; plus GPU repack == CPU repack byte for byte.
 * Bounds (docs/TESTING.md): per element |d - r| <= 4e-3 |r| (BF16 output; 1e-5 |r| for FP32) +
 * 2^-10 sum_k |a_k w_k| (FP8 tensor-core accumulation over a folded chunk's 4 chained k32 steps;
 * 2^-12 where no chunk folds) + 1e-6 rms(R), and relative Frobenius error <= 2e-3 (5e-4 for FP32
 * output). Rows that must not be written must still hold the poison.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gemm_fixture.h"
#include "gpu_device.h"
#include "harness.h"
#include "sm90/bf16_fp4_gemm.h"
#include "sm90/dyn_slots.h"
#include "sm90/warp_decode.h"
#include "sm90/fp8_fp4_gemm_params.h"

static const char *const k_w_names[] = {"fp32", "ue8m0", "ue8m0-wide", "ue8m0-chunkbase", "ue8m0-mixed", "ue8m0-per32-at-33"}; /* by w_pow2 */

static void check_case(const gemm_case *cs, const char *label) {
    gemm_host h;
    fx_build(&h, cs);
    gemm_result r = fx_run(&h);
    printf("    %-34s m=%-6lld n=%-5lld k=%-5lld G=%-3d ga=%-3d %s w=%s d=%s%s: relF %.2e maxx %.2f bad %lld "
           "repack %s (%.3f ms)\n",
           label, (long long)h.cs.m, (long long)h.cs.n, (long long)h.cs.k, h.cs.groups, h.cs.a_gran,
           hfp4_dtype_name(h.cs.a_scale), k_w_names[h.cs.w_pow2], hfp4_dtype_name(h.cs.d_dtype),
           h.cs.with_c ? "+C" : "", r.rel_frob, r.max_excess, (long long)r.bad_elements,
           r.repack_match ? "==" : "DIFFERS", r.ms);
    CHECK_MSG(r.status == HFP4_OK, "%s: hfp4_gemm returned %s: %s", label, hfp4_status_name(r.status), hfp4_last_error());
    if (r.status == HFP4_OK) {
        CHECK_MSG(r.bad_elements == 0, "%s: %lld bad elements; first at row %lld col %lld: got %.6g want %.6g", label,
                  (long long)r.bad_elements, (long long)r.first_bad_row, (long long)r.first_bad_col, r.first_bad_got,
                  r.first_bad_want);
        const double frob_max = h.cs.d_dtype == HFP4_DTYPE_FP32 ? 5e-4 : 2e-3; /* FP32: no output rounding */
        CHECK_MSG(r.rel_frob <= frob_max, "%s: relative Frobenius error %.3e > %.0e", label, r.rel_frob, frob_max);
        CHECK_MSG(r.repack_match, "%s: GPU repack differs from CPU repack", label);
        CHECK_MSG(r.chain_bad == 0, "%s: %lld elements of the chained GEMM's output wrong", label,
                  (long long)r.chain_bad);
    }
    fx_free(&h);
}

static gemm_case base_case(hfp4_grouping g, int64_t m, int64_t n, int64_t k, int32_t groups, uint64_t seed) {
    gemm_case c;
    memset(&c, 0, sizeof c);
    c.grouping = g;
    c.m = m;
    c.n = n;
    c.k = k;
    c.groups = groups;
    c.a_gran = 128;
    c.a_scale = HFP4_DTYPE_FP32;
    c.w_pow2 = 1;
    c.d_dtype = HFP4_DTYPE_BF16;
    c.seed = seed;
    return c;
}

TEST(gpu_dense_shapes_and_tails) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const int64_t shapes[][3] = {{1, 128, 128}, {7, 200, 96},   {8, 4096, 4096}, {33, 1000, 160},
                                        {64, 512, 4096}, {129, 256, 2048}, {257, 4096, 2048}, {1000, 1024, 1024},
                                        {4096, 2048, 512}};
    for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        gemm_case c = base_case(HFP4_GROUPING_NONE, shapes[i][0], shapes[i][1], shapes[i][2], 1, 100 + i);
        check_case(&c, "dense");
    }
    /* the 128-token tile's raster groups of 16 token tiles (work_items.cuh item_tiles), which the
     * launcher takes for large weights only, forced: two whole groups; one whole and one of 6 token
     * tiles, the last a tail of 50 rows, with an N tail */
    char saved[16] = "";
    const char *was = getenv("HFP4_SM90_RASTER");
    if (was) snprintf(saved, sizeof saved, "%s", was);
    setenv("HFP4_SM90_RASTER", "1", 1);
    static const int64_t rastered[][3] = {{4096, 2048, 512}, {2738, 1000, 256}};
    for (unsigned i = 0; i < sizeof rastered / sizeof rastered[0]; i++) {
        gemm_case c = base_case(HFP4_GROUPING_NONE, rastered[i][0], rastered[i][1], rastered[i][2], 1, 120 + i);
        check_case(&c, "dense, raster groups");
    }
    if (was) setenv("HFP4_SM90_RASTER", saved, 1);
    else unsetenv("HFP4_SM90_RASTER");
}

TEST(gpu_output_row_strides_and_n_tails) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* D rows n + pad apart: 16-byte aligned rows with N % 8 != 0 (vector stores with an element
     * tail), unaligned rows (element stores), FP32 output and C; the pad must stay untouched */
    static const int64_t cfg[][3] = {{37, 100, 4}, {70, 1004, 4}, {33, 200, 3}, {129, 92, 0}, {16, 4100, 0}};
    for (unsigned i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        gemm_case c = base_case(HFP4_GROUPING_NONE, cfg[i][0], cfg[i][1], 256, 1, 170 + i);
        c.d_pad = (int32_t)cfg[i][2];
        c.d_dtype = i & 1 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
        c.with_c = i >= 2;
        check_case(&c, "dense, padded D rows");
    }
    gemm_case c = base_case(HFP4_GROUPING_MASKED, 5, 1004, 512, 4, 176);
    c.d_pad = 4;
    check_case(&c, "masked, padded D rows");
}

TEST(gpu_tma_store_tiles) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* the 128-token tile stores BF16 D without C by TMA where all of a tile's rows are written
     * (epilogue.cuh): D rows n + 8 apart (the map's row stride is not n), N and M tails the map
     * clips, masked groups whose masked_m ends inside a tile (those tiles take the vector stores;
     * the rows after masked_m and the pad must keep the poison) */
    static const int64_t dense[][2] = {{300, 200}, {128, 1000}, {4096 + 17, 264}};
    for (unsigned i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        gemm_case c = base_case(HFP4_GROUPING_NONE, dense[i][0], dense[i][1], 384, 1, 190 + i);
        c.d_pad = i == 1 ? 0 : 8;
        check_case(&c, "dense, TMA-stored tiles");
    }
    static const int32_t masked_rows[] = {300, 129, 256, 0, 77};
    gemm_case c = base_case(HFP4_GROUPING_MASKED, 300, 520, 512, 5, 195);
    c.rows = masked_rows;
    c.d_pad = 8;
    check_case(&c, "masked, TMA-stored tiles");
    /* (from the review of the TMA store) the 128-token tile over fewer rows than its box (masked
     * m = 100 with expected_m 200), masked groups ending on and just past a tile, a contiguous
     * alignment of 256, psum groups with rows after them, N below one warpgroup's 64 */
    c = base_case(HFP4_GROUPING_MASKED, 100, 300, 256, 3, 901);
    c.expected_m = 200;
    c.d_pad = 8;
    check_case(&c, "masked, m below the tile, TMA");
    static const int32_t masked_rows2[] = {260, 128, 255, 1};
    c = base_case(HFP4_GROUPING_MASKED, 260, 200, 256, 4, 902);
    c.rows = masked_rows2;
    c.expected_m = 200;
    c.d_pad = 16;
    check_case(&c, "masked, groups ending at tiles, TMA");
    c = base_case(HFP4_GROUPING_CONTIGUOUS, 2000, 264, 256, 5, 903);
    c.alignment = 256;
    c.d_pad = 8;
    check_case(&c, "contiguous, alignment 256, TMA");
    c = base_case(HFP4_GROUPING_CONTIGUOUS_PSUM, 1500, 264, 256, 5, 904);
    c.extra_rows = 300;
    c.d_pad = 8;
    check_case(&c, "psum, rows after the groups, TMA");
    c = base_case(HFP4_GROUPING_NONE, 300, 40, 256, 1, 905);
    c.d_pad = 8;
    check_case(&c, "dense, N = 40, TMA");
    c = base_case(HFP4_GROUPING_NONE, 385, 72, 256, 1, 906);
    check_case(&c, "dense, N = 72, TMA");
    /* rows 16-byte aligned (ld 104) with n % 8 = 4: the vector stores, since the TMA store clips a
     * row only to 16 bytes (the FP8-weight kernel wrote D's padding so, bench/RESULTS.md v40) */
    c = base_case(HFP4_GROUPING_NONE, 1000, 100, 256, 1, 907);
    c.d_pad = 4;
    check_case(&c, "dense, N = 100, ld 104");
    c = base_case(HFP4_GROUPING_CONTIGUOUS, 2000, 100, 256, 5, 908);
    c.d_pad = 4;
    check_case(&c, "contiguous, N = 100, ld 104");
}

TEST(gpu_persistent_items_with_k_chunks_not_multiple_of_4) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* many work items per CTA and K/128 = 7 or 11: the producer warps' chunk split must stay in
     * step across items (a review found a parity hazard here; K = 896 is Qwen's hidden size) */
    static const int64_t shapes[][3] = {{2048, 2048, 896}, {2048, 2048, 1408}, {4096, 1024, 640}, {1000, 4096, 96}};
    for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        gemm_case c = base_case(HFP4_GROUPING_NONE, shapes[i][0], shapes[i][1], shapes[i][2], 1, 150 + i);
        check_case(&c, "dense, many items per CTA");
    }
}

TEST(gpu_dense_scale_forms_and_outputs) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    for (int v = 0; v < 8; v++) {
        gemm_case c = base_case(HFP4_GROUPING_NONE, 77, 384, 1056, 1, 200 + v);
        c.a_gran = (v & 1) ? 32 : 128;
        c.a_scale = (v & 2) ? ((v & 4) ? HFP4_DTYPE_UE8M0_PACKED : HFP4_DTYPE_UE8M0) : HFP4_DTYPE_FP32;
        c.w_pow2 = (v & 4) ? 0 : 1;
        c.d_dtype = (v & 1) ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
        c.with_c = (v == 3 || v == 6);
        check_case(&c, "dense scale forms");
    }
}

TEST(gpu_mn_major_activation_scales) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* DeepGEMM's MN-major FP32 activation scales: the 128-token tile copies a full tile's scales
     * of a k-group as one block; partial tiles, padding rows, K not a multiple of 128 (1x32's last
     * chunk), a misaligned base and an unaligned k-group stride take the per-value copies. Every
     * layout, both granularities. */
    for (int v = 0; v < 10; v++) {
        const hfp4_grouping g = v < 3 || v >= 8 ? HFP4_GROUPING_NONE : v < 6 ? HFP4_GROUPING_CONTIGUOUS : HFP4_GROUPING_MASKED;
        gemm_case c = base_case(g, g == HFP4_GROUPING_NONE ? 300 : g == HFP4_GROUPING_CONTIGUOUS ? 1500 : 260, 256,
                                v == 1 || v == 4 ? 1056 : 1024, g == HFP4_GROUPING_NONE ? 1 : g == HFP4_GROUPING_CONTIGUOUS ? 5 : 3,
                                270 + v);
        c.a_gran = v & 1 ? 32 : 128;
        c.a_mn_major = v == 2 || v == 5 ? 2 : v >= 8 ? 3 : 1;
        if (v >= 8) c.m = 301; /* stride_k 301: the k-group blocks are 16-byte aligned every 4th chunk */
        if (g == HFP4_GROUPING_MASKED) c.expected_m = 200;
        check_case(&c, c.a_mn_major == 2 ? "MN-major scales, misaligned" : c.a_mn_major == 3 ? "MN-major scales, ld = m" : "MN-major scales");
    }
}

TEST(gpu_folded_and_per32_chunks_mixed) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* wide exponent spreads force per-32 chunks next to folded ones; zero groups are ignored */
    for (int v = 0; v < 4; v++) {
        gemm_case c = base_case(v < 2 ? HFP4_GROUPING_NONE : HFP4_GROUPING_MASKED, v < 2 ? 100 : 20, 512, 2048,
                                v < 2 ? 1 : 4, 250 + v);
        c.w_pow2 = 2;
        c.a_gran = v & 1 ? 32 : 128;
        c.a_scale = v == 3 ? HFP4_DTYPE_UE8M0_PACKED : HFP4_DTYPE_FP32;
        check_case(&c, "mixed folded/per-32");
    }
}

TEST(gpu_grouped_contiguous) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    for (int v = 0; v < 4; v++) {
        gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS, v < 2 ? 600 : 3000, 512, 1024, v < 2 ? 8 : 16, 300 + v);
        c.a_gran = v & 1 ? 32 : 128;
        c.alignment = v == 3 ? 64 : 0;
        c.w_pow2 = v != 2;
        check_case(&c, "contiguous ids");
    }
}

/* The contiguous layout's raster groups at the 128-token tile (work_items.cuh): ~500 token tiles in
 * segments of 1..9 tiles (partial last tiles, empty groups, two padding tiles after the last), with
 * expected_m so that the plan takes the 128-token tile without the narrow-block split: groups of 4
 * from tile 0 (groups that follow the experts measured no faster: bench/RESULTS.md v38). */
TEST(gpu_contiguous_raster_groups) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    enum { GROUPS = 100 };
    static int32_t rows[GROUPS];
    for (int g = 0; g < GROUPS; g++) rows[g] = g % 13 == 0 ? 0 : (g * 37 % 9 + 1) * 128 - (g % 5) * 17;
    gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS, 0, 192, 256, GROUPS, 410); /* (m: from the rows) */
    c.rows = rows;
    c.extra_rows = 256;
    c.expected_m = 512;
    check_case(&c, "contiguous, raster groups");
}

TEST(gpu_grouped_psum) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    for (int v = 0; v < 3; v++) {
        gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS_PSUM, 900, 256, 512, 6 + v, 400 + v);
        c.alignment = v == 2 ? 32 : 0;
        c.extra_rows = v == 1 ? 200 : 0; /* rows after every group must keep the poison */
        check_case(&c, "contiguous psum");
    }
    /* more items than CTAs, so the 128-token tile takes them in order from the launch's counter
     * (dynamic_walk.cuh), and 60 token tiles of rows after the groups, which must keep their
     * poison: the walk ends after the raster group of 4 token tiles the groups' rows end in
     * (psum_walk_items). Groups of 17 aligned token tiles (4 x 4 + 1), so that group's last 3 token
     * tiles have nothing to write and take a stage each (producer.cuh), 8 weight tiles, 160 items
     * to walk; with 1x32 scales too (the G32 kernel); then an alignment of 32 and random groups */
    static const int32_t rows17[8] = {300, 0, 257, 128, 500, 1, 383, 129};
    for (int v = 0; v < 3; v++) {
        gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS_PSUM, 3000, 1024, 512, 8, 403 + v);
        c.rows = v < 2 ? rows17 : NULL;
        c.alignment = v < 2 ? 128 : 32;
        c.extra_rows = 60 * 128;
        c.expected_m = 512;
        c.a_gran = v == 1 ? 32 : 128;
        check_case(&c, "contiguous psum, items in order, rows after the groups");
    }
}

/* The 128-token tile's narrow items (narrow_items.cuh): contiguous segments of 1..128 real rows, each
 * padded to 128, with no expected_m, so the plan takes the 128-token tile from m / groups (as for
 * DeepGEMM's contiguous API at decode): items whose rows end within 8 token columns load 8
 * activation rows and compute 8 columns, within 32 compute 32 (loading all), others the whole tile.
 * Segments of 1, 8, 9, 32, 33, 100, 128 and 0 rows, decode-like ones (0..7 rows), and 33-127 rows
 * at the 64- and 96-column boundaries; both scale
 * forms of the narrow loops (1x128 FP32, and 1x32 UE8M0 in the G32 kernel), BF16 D by TMA store and
 * FP32 D with C; K of 8, 7 and 32 chunks; real rows with holes (not one prefix of the tile); a
 * row-scaled weight set (not one-base: whole tiles); the psum layout; and with HFP4_SM90_NARROW=0. */
TEST(gpu_narrow_items) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const int32_t seg[8] = {1, 8, 9, 32, 33, 100, 128, 0};
    static const int32_t decode[8] = {3, 0, 5, 2, 7, 1, 4, 6};
    struct narrow_variant {
        int64_t k;
        int a_gran;
        hfp4_dtype a_scale, d;
        int with_c, holes, w_pow2;
        const int32_t *rows;
    };
    static const narrow_variant vs[] = {
        {1024, 128, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 1, seg},
        {1024, 32, HFP4_DTYPE_UE8M0_PACKED, HFP4_DTYPE_BF16, 0, 0, 1, seg},
        {896, 128, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, 1, 1, 1, decode},
        {4096, 32, HFP4_DTYPE_UE8M0_PACKED, HFP4_DTYPE_BF16, 0, 1, 1, decode},
        {1024, 128, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 3, seg},
        {1024, 32, HFP4_DTYPE_UE8M0, HFP4_DTYPE_FP32, 0, 1, 1, seg},
    };
    /* each three times: with the narrow-block split at row 8 and at row 32 (the 8-token launch takes
     * the blocks whose row 8 or 32 is padding, the 128-token launch the rest) and without (every
     * block in the 128-token launch) */
    for (unsigned v = 0; v < 3 * sizeof vs / sizeof vs[0]; v++) {
        const narrow_variant &nv = vs[v / 3];
        if (v % 3 == 2) setenv("HFP4_SM90_NARROW_SPLIT", "0", 1); /* (read by every plan) */
        setenv("HFP4_SM90_SPLIT_ROW", v % 3 == 1 ? "32" : "8", 1);
        gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS, 1024, 640, nv.k, 8, 1200 + v);
        c.a_gran = nv.a_gran;
        c.a_scale = nv.a_scale;
        c.d_dtype = nv.d;
        c.with_c = nv.with_c;
        c.holes = nv.holes;
        c.w_pow2 = nv.w_pow2;
        c.rows = nv.rows;
        c.alignment = 128;
        check_case(&c, v % 3 == 2   ? "contiguous, narrow items, no split"
                       : v % 3 == 1 ? "contiguous, narrow items, split at row 32"
                                    : "contiguous, narrow items, split at row 8");
        unsetenv("HFP4_SM90_NARROW_SPLIT");
        unsetenv("HFP4_SM90_SPLIT_ROW");
    }
    /* segments of 33-127 rows: items ending within 64 or 96 token columns compute m64n64 or m64n96,
     * at the boundaries; BF16 and FP32 D, contiguous (with the split, without, with holes) and psum,
     * 1x128 FP32 and (v >= 4, the G32 kernel's halves and single steps) 1x32 UE8M0 scales */
    static const int32_t wide[8] = {40, 64, 65, 96, 97, 127, 33, 90};
    for (int v = 0; v < 6; v++) {
        if (v == 1) setenv("HFP4_SM90_NARROW_SPLIT", "0", 1);
        const bool psum = v == 3 || v == 5;
        /* (K of 9 chunks where v is odd: the loop's last single step at 64 and 96 columns) */
        gemm_case c = base_case(psum ? HFP4_GROUPING_CONTIGUOUS_PSUM : HFP4_GROUPING_CONTIGUOUS, 1024, 512,
                                v & 1 ? 1152 : 1024, 8, 1260 + v);
        c.rows = wide;
        c.alignment = 128;
        c.holes = v == 2;
        c.d_dtype = v & 1 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
        if (v >= 4) {
            c.a_gran = 32;
            c.a_scale = v == 4 ? HFP4_DTYPE_UE8M0_PACKED : HFP4_DTYPE_UE8M0;
        }
        check_case(&c, psum ? "psum, items of 33-127 rows" : "contiguous, items of 33-127 rows");
        unsetenv("HFP4_SM90_NARROW_SPLIT");
    }
    /* weights over 2 MB (n x k > 2^22): the plan leaves the split row to the launches, which take 16
     * here (5 of the 8 blocks have more than 8 rows: work_items.cuh split_row_auto), so the block of
     * 9 rows goes to the 8-token launch as two tiles (the other cases' small weights take 32 unless
     * HFP4_SM90_SPLIT_ROW says otherwise) */
    {
        gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS, 1024, 2048, 2304, 8, 1258);
        c.rows = seg;
        c.alignment = 128;
        check_case(&c, "contiguous, narrow items, split at the launches' row (16)");
    }
    for (int v = 0; v < 2; v++) {
        gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS_PSUM, 1024, 512, 1024, 8, 1230 + v);
        c.rows = v ? decode : seg;
        c.alignment = 128;
        c.a_gran = v ? 32 : 128;
        check_case(&c, "psum, narrow items");
    }
    /* many blocks (several words of the 8-token launch's block flags), mostly narrow, every tenth
     * segment wide, every tenth of 9-32 rows (narrow at row 32, not at row 8); after the last
     * segment two all-padding blocks and a block of 4 rows (row 8 past m); D rows not 16-byte
     * aligned (element stores) in one of them */
    static int32_t many[200], many_mid[200];
    for (int g = 0; g < 200; g++) many[g] = g % 10 == 0 ? 40 + g % 90 : g % 10 == 5 ? 9 + g % 24 : g % 9;
    /* and the launches' own row (auto): 16 for `many` (40 blocks of more than 8 rows), 8 for
     * `many_mid` (most blocks of 9-20 rows, some of 1-8 and 33+: over HFP4_SM90_SPLIT_AUTO_BLOCKS) */
    for (int g = 0; g < 200; g++) many_mid[g] = g % 7 == 0 ? g % 9 : g % 11 == 0 ? 33 + g % 60 : 9 + g % 12;
    for (int v = 0; v < 8; v++) { /* (v < 2: the split at row 32, the plan's choice for these small weights) */
        if (v >= 2) setenv("HFP4_SM90_SPLIT_ROW", v < 4 ? "8" : "auto", 1);
        gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS, 1024, 256, 512, 200, 1240 + v);
        c.rows = v >= 6 ? many_mid : many;
        c.alignment = 128;
        c.extra_rows = 2 * 128 + 4;
        c.d_pad = v & 1;
        c.a_gran = v & 1 ? 32 : 128;
        c.a_scale = v & 1 ? HFP4_DTYPE_UE8M0_PACKED : HFP4_DTYPE_FP32;
        check_case(&c, v >= 6   ? "contiguous, narrow blocks, many of 9-20 rows, the launches' row (8)"
                       : v >= 4 ? "contiguous, narrow blocks, many, the launches' row (16)"
                       : v >= 2 ? "contiguous, narrow blocks, many, split at row 8"
                                : "contiguous, narrow blocks, many");
        unsetenv("HFP4_SM90_SPLIT_ROW");
    }
    /* the opt-in BF16 path (1x32 UE8M0 scales) has no split: it takes every block where the rows per
     * group pick the 128-token tile (seg), and leaves the split decode problems (32 groups, 8 of
     * them routed: m / groups 32) to the split */
    static const int32_t routed8[32] = {3, 0, 0, 1, 0, 0, 0, 5, 0, 0, 2, 0, 0, 0, 0, 7,
                                        0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 6, 0};
    hfp4__sm90_bf16_set(1);
    for (int v = 0; v < 2; v++) {
        gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS, 1024, 512, 1024, v ? 32 : 8, 1250 + v);
        c.rows = v ? routed8 : seg;
        c.alignment = 128;
        c.a_gran = 32;
        c.a_scale = HFP4_DTYPE_UE8M0_PACKED;
        check_case(&c, v ? "contiguous, bf16 path on, split" : "contiguous, bf16 path on, no split");
    }
    hfp4__sm90_bf16_set(0);
    setenv("HFP4_SM90_NARROW", "0", 1); /* (read by every plan) */
    gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS, 1024, 640, 1024, 8, 1220);
    c.rows = decode;
    c.holes = 1;
    c.alignment = 128;
    check_case(&c, "contiguous, narrow items off");
    unsetenv("HFP4_SM90_NARROW");
}

TEST(gpu_grouped_masked) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const int64_t cfg[][3] = {{1, 6, 4096}, {5, 32, 2048}, {24, 8, 1024}, {128, 4, 512}, {200, 3, 256}};
    for (unsigned i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        gemm_case c = base_case(HFP4_GROUPING_MASKED, cfg[i][0], 4096 / (i + 1), cfg[i][2], (int32_t)cfg[i][1], 500 + i);
        c.a_gran = i & 1 ? 32 : 128;
        check_case(&c, "masked");
    }
}

TEST(gpu_deepseek_v4_flash_decode_shapes) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* 256 experts, masked, a few rows each: w13 and w2 of V4-Flash */
    gemm_case c = base_case(HFP4_GROUPING_MASKED, 2, 4096, 4096, 256, 600);
    check_case(&c, "v4-flash w13 masked");
    c = base_case(HFP4_GROUPING_MASKED, 2, 4096, 2048, 256, 601);
    check_case(&c, "v4-flash w2 masked");
}

/* Launches with more live items than SMs but fewer than the decode tile's CTAs (V4-Flash T = 1: 192
 * items, 264 CTAs on an H200): the shapes the measured and dropped splits of such launches changed
 * (the helper split, f4fb6f4; the stream-K split, bench/patches/v31-stream-k.patch), kept for
 * whoever tries the next one. 16 groups, so the grid is not capped at the items; live items on a
 * 132-SM GPU: 192, 140 (K = 1024: 8 chunks an item), 198, 224, and K = 1152 (9 chunks); masked
 * with one row in a few groups (and at 192 items the other chunk paths: FP32 weight scales, folded
 * chunks of moving levels, 1x32 UE8M0 activation scales), and contiguous 8-row segments with ids and
 * padding rows after them. */
TEST(gpu_decode_more_items_than_sms) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const int32_t six[16] = {0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1};
    static const int32_t seven[16] = {1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0};
    static const int64_t cfg[][3] = {{6, 4096, 4096}, {6, 4096, 2048}, {7, 2560, 1024}, {6, 4224, 1024},
                                     {7, 4096, 1024}, {6, 4096, 1152}};
    for (unsigned i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        gemm_case c = base_case(HFP4_GROUPING_MASKED, 1, cfg[i][1], cfg[i][2], 16, 640 + i);
        c.rows = cfg[i][0] == 6 ? six : seven;
        check_case(&c, "masked, one row in a few groups (more items than SMs)");
    }
    /* the other chunk paths at 192 items: FP32 weight scales (the general loop), a chunk's groups in a
     * narrow band whose level moves (folded, not one-base), 1x32 UE8M0 activation scales (G32) */
    for (int v = 0; v < 3; v++) {
        gemm_case c = base_case(HFP4_GROUPING_MASKED, 1, 4096, 2048, 16, 660 + v);
        c.rows = six;
        if (v == 0) c.w_pow2 = 0;
        if (v == 1) c.w_pow2 = 3;
        if (v == 2) {
            c.a_gran = 32;
            c.a_scale = HFP4_DTYPE_UE8M0_PACKED;
        }
        check_case(&c, v == 0 ? "masked, FP32 weight scales (more items than SMs)"
                       : v == 1 ? "masked, folded chunks of moving levels (more items than SMs)"
                                : "masked, 1x32 UE8M0 activation scales (more items than SMs)");
    }
    static const int32_t segs[6] = {1, 3, 8, 2, 5, 1};
    gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS, 48, 4096, 2048, 6, 650);
    c.rows = segs;
    c.alignment = 8;
    c.extra_rows = 400; /* (padding rows: the grid is not capped at the computing items) */
    check_case(&c, "contiguous 8-row segments (more items than SMs)");
}

TEST(gpu_masked_two_chunk_items) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* V4-Flash's TP8 w2 shard at decode: N = 4096, K = 256 (items of two chunks), 256 experts with
     * 0-2 rows each, so thousands of short items and producer warps that lag posting their headers.
     * A first cut of the landing window (producer.cuh, HFP4_SM90_LAND_WINDOW) hung on this shape in
     * the bench (masked T = 32); several launches, since a lag is a matter of timing, and the
     * producer's three paths: FP32 activation scales, UE8M0 ones, 1x32 ones (the G32 kernel) */
    for (int r = 0; r < 6; r++) {
        gemm_case c = base_case(HFP4_GROUPING_MASKED, 2, 4096, 256, 256, 630 + r);
        if (r >= 2) c.a_scale = HFP4_DTYPE_UE8M0_PACKED;
        if (r >= 4) c.a_gran = 32;
        check_case(&c, r >= 4   ? "masked, two-chunk items (V4-Flash TP8 w2), 1x32 UE8M0 scales"
                       : r >= 2 ? "masked, two-chunk items (V4-Flash TP8 w2), UE8M0 scales"
                                : "masked, two-chunk items (V4-Flash TP8 w2)");
    }
}

TEST(gpu_deepseek_v4_pro_expert_shapes) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* V4-Pro experts (w13 N=6144 K=7168, w2 N=7168 K=3072) with a few experts (the weights of all
     * 384 would be 8 GB on the host): decode (masked, a few rows) and prefill (contiguous, the
     * 128-token tile) */
    gemm_case c = base_case(HFP4_GROUPING_MASKED, 3, 6144, 7168, 4, 610);
    check_case(&c, "v4-pro w13 masked");
    c = base_case(HFP4_GROUPING_MASKED, 3, 7168, 3072, 4, 611);
    check_case(&c, "v4-pro w2 masked");
    c = base_case(HFP4_GROUPING_CONTIGUOUS, 1200, 7168, 3072, 3, 612);
    check_case(&c, "v4-pro w2 contiguous");
}

TEST(gpu_384_groups) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* as many experts as V4-Pro, on small matrices: masked (some empty, masked_m = 0) and
     * contiguous with 8-row segments */
    gemm_case c = base_case(HFP4_GROUPING_MASKED, 4, 256, 512, 384, 620);
    check_case(&c, "384 groups masked");
    c = base_case(HFP4_GROUPING_CONTIGUOUS, 3000, 256, 512, 384, 621);
    c.alignment = 8;
    check_case(&c, "384 groups contiguous");
}

TEST(gpu_decode_tile_chunk_pairs) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* the 8-token tile takes folded chunks two at a time: odd chunk counts (K = 1408: 11 chunks),
     * folded chunks next to per-32 ones (wide spreads), 1x32 activation scales, UE8M0 scales */
    static const int64_t ks[] = {1408, 4096, 384, 128};
    for (int v = 0; v < 8; v++) {
        gemm_case c = base_case(HFP4_GROUPING_MASKED, 3, 512, ks[v % 4], 5, 700 + v);
        c.w_pow2 = v < 4 ? 1 : 2;
        c.a_gran = v % 3 == 2 ? 32 : 128;
        c.a_scale = v == 5 ? HFP4_DTYPE_UE8M0 : HFP4_DTYPE_FP32;
        check_case(&c, "decode tile, chunk pairs");
    }
    /* many items per CTA (64 experts x 32 weight tiles): an odd chunk count carried across items */
    for (int v = 0; v < 2; v++) {
        gemm_case c = base_case(HFP4_GROUPING_MASKED, 3, 4096, v ? 384 : 1408, 64, 710 + v);
        c.w_pow2 = 2 - v;
        check_case(&c, "decode tile, chunk pairs across items");
    }
}

TEST(gpu_decode_k_split) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* the 8-token tile's K-split (split_k.cuh, HFP4_SM90_SPLIT=1): the two CTAs of a cluster take
     * halves of each item's chunks and the leader adds the partner's sums. Forced on for every launch
     * (HFP4_SM90_SPLIT_ITEMS large), at the default bound (these small cases then stay unsplit), and
     * forced off in the split kernel (0): odd chunk counts (K = 1152: 4 + 5 chunks, 1408: 5 + 6),
     * per-32 chunks, a row base that moves over K, FP32 output with C, UE8M0 activation scales,
     * masked groups with no rows, and the contiguous layout with 8-row segments (its padding tiles
     * zeroed apart); FP32 weight scales (v = 4) take the plain kernel (the plan splits UE8M0 only) */
    static const char *bounds[] = {"1000000", NULL, "0"};
    static const int32_t rows[6] = {1, 0, 3, 2, 0, 1};
    setenv("HFP4_SM90_SPLIT", "1", 1); /* (off by default: sm90_plan.c) */
    for (int b = 0; b < 3; b++) {
        if (bounds[b]) setenv("HFP4_SM90_SPLIT_ITEMS", bounds[b], 1);
        else unsetenv("HFP4_SM90_SPLIT_ITEMS");
        for (int v = 0; v < 6; v++) {
            gemm_case c = base_case(HFP4_GROUPING_MASKED, 3, 512 + 64 * (v % 2), v % 2 ? 1408 : 1152, 6, 730 + 10 * b + v);
            c.w_pow2 = v == 2 ? 2 : v == 3 ? 3 : v == 4 ? 0 : 1;
            c.d_dtype = v == 1 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
            c.with_c = v == 1 || v == 5;
            c.a_scale = v == 5 ? HFP4_DTYPE_UE8M0 : HFP4_DTYPE_FP32;
            c.rows = v == 0 ? rows : NULL;
            check_case(&c, "decode tile, K-split");
        }
        gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS, 40, 1024, 2048, 6, 760 + b);
        c.alignment = 8;
        check_case(&c, "decode tile, K-split, contiguous");
    }
    unsetenv("HFP4_SM90_SPLIT_ITEMS");
    unsetenv("HFP4_SM90_SPLIT");
}

TEST(gpu_v4_flash_w13_k_split) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* gpu_decode_k_split at V4-Flash w13's size (256 experts, 8192 items: split only when forced);
     * a test of its own so that compute-sanitizer can run the small cases alone (--filter
     * gpu_decode_k_split) */
    static const char *bounds[] = {"1000000", NULL};
    setenv("HFP4_SM90_SPLIT", "1", 1);
    for (int b = 0; b < 2; b++) {
        if (bounds[b]) setenv("HFP4_SM90_SPLIT_ITEMS", bounds[b], 1);
        else unsetenv("HFP4_SM90_SPLIT_ITEMS");
        gemm_case c = base_case(HFP4_GROUPING_MASKED, 2, 4096, 4096, 256, 770 + b);
        check_case(&c, "decode tile, K-split, v4-flash w13 masked");
    }
    unsetenv("HFP4_SM90_SPLIT_ITEMS");
    unsetenv("HFP4_SM90_SPLIT");
}

TEST(gpu_folded_items_whose_row_base_changes) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* every chunk folded, so the look-ahead loop runs, but a row's base exponent moves from chunk
     * to chunk (scale mode 3): the item's sums change units mid-item. K = 1408: 11 chunks, odd for
     * the loop's pairs. Masked max_m picks the token tile: 3 -> 8, 12 -> 16, 20 -> 32, 40 -> 64;
     * dense m = 300 -> 128. Mode 1 (one base per row) at the same shapes covers the odd chunk
     * counts of the 16-, 32- and 64-token tiles. */
    static const int64_t max_m[] = {3, 12, 20, 40};
    for (int mode = 3; mode >= 1; mode -= 2) {
        for (unsigned i = 0; i < sizeof max_m / sizeof max_m[0]; i++) {
            gemm_case c = base_case(HFP4_GROUPING_MASKED, max_m[i], 1024, 1408, 6, 700 + 10 * mode + i);
            c.w_pow2 = mode;
            c.d_dtype = i == 1 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
            check_case(&c, mode == 3 ? "masked, row base per chunk" : "masked, odd chunk count");
        }
        gemm_case c = base_case(HFP4_GROUPING_NONE, 300, 1024, 1408, 1, 720 + mode);
        c.w_pow2 = mode;
        check_case(&c, mode == 3 ? "dense, row base per chunk" : "dense, odd chunk count");
    }
}

TEST(gpu_tiles_with_folded_and_per32_chunks) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* scale mode 4: every third 128-row weight tile alternates folded and per-32 chunks (the
     * general loop), the others are all folded (the look-ahead loop), so CTAs switch between the
     * two loops from item to item */
    gemm_case c = base_case(HFP4_GROUPING_MASKED, 3, 4096, 384, 64, 730);
    c.w_pow2 = 4;
    check_case(&c, "masked, mixed tiles");
    c = base_case(HFP4_GROUPING_NONE, 2048, 2048, 896, 1, 731);
    c.w_pow2 = 4;
    check_case(&c, "dense, mixed tiles");
    c = base_case(HFP4_GROUPING_MASKED, 40, 1024, 1408, 8, 732);
    c.w_pow2 = 4;
    c.d_dtype = HFP4_DTYPE_FP32;
    check_case(&c, "masked, mixed tiles, 64-token tile");
}

TEST(gpu_per32_chunks_every_token_tile) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* per-32 chunks issue 4 (tiles <= 32 tokens), 2 (64) or 1 (128) k32 steps at a time into as
     * many accumulators: FP32 weight scales (mode 0) and wide UE8M0 spreads (mode 2), with 1x32 and
     * 1x128 activation scales, at every token tile */
    static const int64_t max_m[] = {3, 12, 20, 40, 100};
    for (int v = 0; v < 4; v++) {
        for (unsigned i = 0; i < sizeof max_m / sizeof max_m[0]; i++) {
            gemm_case c = base_case(HFP4_GROUPING_MASKED, max_m[i], 512, 1056, 4, 740 + 10 * v + i);
            c.w_pow2 = v & 1 ? 2 : 0;
            c.a_gran = v & 2 ? 32 : 128;
            c.d_dtype = (i & 1) ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
            check_case(&c, "masked, per-32 chunks");
        }
    }
}

TEST(gpu_contiguous_padding_tiles) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* a small expected_m picks the 8-token tile for the contiguous layout, so most tiles are all
     * padding and are written as zeros without computing: 16-byte stores (BF16 and FP32, N = 1000),
     * element stores for the N tail (N = 1001, padded rows) and for rows that are not 16-byte
     * aligned (ld = n + 1) */
    static const int64_t ns[] = {1000, 1001, 1000, 1000};
    static const int32_t pads[] = {0, 7, 1, 0};
    for (int v = 0; v < 4; v++) {
        gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS, 1024, ns[v], 256, 8, 790 + v);
        c.expected_m = 4;
        c.d_pad = pads[v];
        c.d_dtype = v == 1 || v == 3 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
        c.with_c = v == 3;
        check_case(&c, "contiguous, padding tiles");
    }
}

/* d_padding ANY (DeepGEMM's ensure_zero_padding=False): D's padding rows may keep the poison or be
 * zeros, every real row as always; through the 8-token tile's balanced walk (expected_m 4), the
 * narrow-block split (no hint, 128-row segments of a few rows), the 128-token tile, and psum */
TEST(gpu_contiguous_padding_left_alone) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const int32_t few[16] = {3, 1, 0, 2, 5, 1, 1, 8, 2, 0, 1, 3, 7, 1, 2, 1};
    for (int v = 0; v < 4; v++) {
        gemm_case c = base_case(v == 3 ? HFP4_GROUPING_CONTIGUOUS_PSUM : HFP4_GROUPING_CONTIGUOUS,
                                v == 2 ? 1024 : 16 * 128, 1000, 512, v == 2 ? 8 : 16, 820 + v);
        if (v < 2) c.rows = few;
        c.expected_m = v == 0 ? 4 : 0;
        c.d_pad = v == 1 ? 8 : 0;
        c.extra_rows = v == 1 || v == 2 ? 256 : 0; /* all-padding tiles after the last segment */
        c.d_padding_any = 1;
        check_case(&c, "contiguous, d_padding ANY");
    }
}

/* The 8-token tile's direct stores (epilogue.cuh: store_tile_direct8; the carry loop's one-base
 * items with BF16 D, 16-byte aligned rows, no C and the warpgroup's 64 rows inside N) next to the
 * transpose it replaces: N = 64 mod 128, so the last weight tile's second warpgroup (past N) and
 * rows 8 elements apart (d_pad 8 keeps them aligned; d_pad 1 sends every item to store_tile); real
 * rows with holes (contiguous), masked_m that ends inside an 8-token tile, and the one-base items
 * mixed with per-32 ones (w_pow2 4: those take store_tile) */
TEST(gpu_decode_direct_stores) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const int32_t masked_rows[6] = {1, 7, 8, 9, 15, 3};
    for (int v = 0; v < 6; v++) {
        const int masked = v >= 3;
        gemm_case c = base_case(masked ? HFP4_GROUPING_MASKED : HFP4_GROUPING_CONTIGUOUS, masked ? 16 : 768,
                                v % 2 ? 192 : 320, 512, 6, 880 + v);
        c.expected_m = 4; /* the 8-token tile */
        c.d_pad = v == 2 ? 1 : v == 4 ? 0 : 8;
        c.holes = !masked;
        if (masked) c.rows = masked_rows;
        if (v == 5) c.w_pow2 = 4;
        check_case(&c, masked ? "masked, direct stores" : "contiguous, direct stores");
    }
}

/* Two GEMMs launched back to back on one stream (programmatic dependent launch lets the second start
 * while the first runs): the second reads the first's D as its C, or overwrites the first's C. */
TEST(gpu_chained_launches) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const int32_t masked_rows[6] = {3, 0, 8, 1, 5, 2};
    for (int chain = 1; chain <= 2; chain++) {
        gemm_case c = base_case(HFP4_GROUPING_NONE, 300, 1000, 4096, 1, 900 + chain); /* 128-token tile */
        c.chain = chain;
        c.with_c = chain == 2;
        check_case(&c, chain == 1 ? "chained dense, D -> C" : "chained dense, over C");
        c = base_case(HFP4_GROUPING_MASKED, 8, 512, 2048, 6, 910 + chain); /* the 8-token decode tile */
        c.rows = masked_rows;
        c.expected_m = 4;
        c.chain = chain;
        c.with_c = chain == 2;
        check_case(&c, chain == 1 ? "chained masked, D -> C" : "chained masked, over C");
        c = base_case(HFP4_GROUPING_CONTIGUOUS, 512, 640, 1024, 4, 920 + chain);
        c.alignment = 128;
        c.chain = chain;
        c.with_c = chain == 2;
        check_case(&c, chain == 1 ? "chained contiguous, D -> C" : "chained contiguous, over C");
    }
}

/* HFP4_GEMM_OVERLAP_PREVIOUS (hfp4_gemm_flags): the kernel reads the layout and loads its first
 * weights before the wait for the kernel before it, and A, its scales, C and D only after. Every
 * case runs behind a kernel that lets it start at once and writes A and its scales ~50 us later
 * (late_a: read early, they would be other values), then as chains whose second GEMM reads the
 * first's D as C or writes over the first's C. The EARLY kernels (the two-CTA 8-token tile, 1x128
 * and 1x32 scales): masked and contiguous, more items than CTAs, items with fewer chunks than
 * stages (K = 256), FP32 and UE8M0 activation scales; and launches that ignore the flag (16-,
 * 64- and 128-token tiles, FP32 weight scales), which must still be right. */
TEST(gpu_overlap_previous) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const int32_t masked_rows[6] = {3, 0, 8, 1, 5, 2};
    int32_t many_rows[80]; /* 14 groups of 1-2 rows: 448 items of 32 weight tiles (the grid: 264 CTAs on an H200) */
    for (int g = 0; g < 80; g++) many_rows[g] = g == 0 ? 2 : g % 6 == 0 ? 1 : 0;
    const uint32_t ovl = HFP4_GEMM_OVERLAP_PREVIOUS;
    gemm_case shapes[4];
    shapes[0] = base_case(HFP4_GROUPING_MASKED, 8, 1024, 2048, 6, 1300);
    shapes[0].rows = masked_rows;
    shapes[0].expected_m = 4; /* the 8-token tile */
    shapes[1] = base_case(HFP4_GROUPING_MASKED, 2, 4096, 1024, 80, 1310); /* more items than CTAs */
    shapes[1].rows = many_rows;
    shapes[2] = base_case(HFP4_GROUPING_NONE, 300, 1000, 4096, 1, 1320); /* the 128-token tile */
    shapes[3] = base_case(HFP4_GROUPING_CONTIGUOUS, 512, 640, 1024, 4, 1330);
    shapes[3].alignment = 128;
    static const char *const shape_names[4] = {"masked 8-token", "masked, 448 items", "dense 128-token", "contiguous"};
    for (int late = 1; late >= 0; late--) {
        for (int chain = 0; chain <= 2; chain++) {
            if (late && chain) continue; /* (the chains' second GEMM follows an hfp4 GEMM) */
            const char *how = late ? "late A" : chain == 1 ? "chained D -> C" : chain == 2 ? "chained over C" : "";
            for (int i = 0; i < 4; i++) {
                gemm_case c = shapes[i];
                c.seed += (uint64_t)chain;
                c.flags = ovl;
                c.late_a = late;
                c.chain = chain;
                c.with_c = chain == 2;
                char label[96];
                snprintf(label, sizeof label, "overlap: %s, %s", shape_names[i], how);
                check_case(&c, label);
            }
        }
    }
    for (int v = 0; v < 8; v++) { /* behind the late writer: the other paths */
        gemm_case c = base_case(HFP4_GROUPING_MASKED, v < 4 ? 8 : 40, 2048, v == 2 ? 256 : 1408, 24, 1340 + v);
        c.expected_m = v < 4 ? 4 : 36; /* 8-token tile; then 16 or 64 (v == 7: contiguous below) */
        c.flags = ovl;
        c.late_a = 1;
        const char *what = "";
        switch (v) {
        case 0: c.a_scale = HFP4_DTYPE_UE8M0_PACKED; what = "UE8M0 activation scales"; break;
        case 1: c.a_gran = 32; what = "1x32 scales (G32)"; break;
        case 2: what = "K = 256 (2 chunks an item)"; break;
        case 3: c.w_pow2 = 0; what = "FP32 weight scales"; break;
        case 4: c.a_gran = 32; c.a_scale = HFP4_DTYPE_UE8M0; what = "64-token, 1x32 UE8M0"; break;
        case 5: c.w_pow2 = 2; what = "64-token, per-32 chunks"; break;
        case 6: c.expected_m = 12; what = "16-token"; break;
        case 7:
            c = base_case(HFP4_GROUPING_CONTIGUOUS, 48, 4096, 2048, 6, 1347);
            c.alignment = 8;
            c.extra_rows = 400; /* padding tiles first in some CTAs' walks */
            c.expected_m = 4;
            c.flags = ovl;
            c.late_a = 1;
            what = "contiguous 8-row segments, padding after";
            break;
        }
        char label[96];
        snprintf(label, sizeof label, "overlap, late A: %s", what);
        check_case(&c, label);
    }
    /* a flag hfp4.h does not define is an invalid argument, named */
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    CHECK(hfp4_gemm_flags(&p, 0x80u, NULL) == HFP4_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(hfp4_last_error(), "flags = 0x80") != NULL, "message: %s", hfp4_last_error());
}

/* The decode tiles' dynamic walk takes items from a counter of the launch's own (dynamic_walk.cuh,
 * dyn_slots.h): a slot per stream, the legacy stream's one slot under both its names, a new slot for
 * every launch captured into a graph, and never a captured launch's slot for a stream's. */
TEST(gpu_dyn_slots) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    const int dev = gpu_current_device(); /* (the current one: --devices) */
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess);
    const int32_t a = hfp4__sm90_dyn_slot(dev, s1), b = hfp4__sm90_dyn_slot(dev, s2);
    CHECK_MSG(a >= 0 && b >= 0 && a != b && a < HFP4_SM90_DYN_STREAM_SLOTS && b < HFP4_SM90_DYN_STREAM_SLOTS,
              "two streams: slots %d and %d", (int)a, (int)b);
    CHECK(hfp4__sm90_dyn_slot(dev, s1) == a && hfp4__sm90_dyn_slot(dev, s2) == b);
    const int32_t l0 = hfp4__sm90_dyn_slot(dev, NULL), l1 = hfp4__sm90_dyn_slot(dev, cudaStreamLegacy);
    CHECK_MSG(l0 >= 0 && l0 == l1 && l0 != a && l0 != b, "legacy stream: slots %d and %d", (int)l0, (int)l1);
    CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    const int32_t c0 = hfp4__sm90_dyn_slot(dev, s1), c1 = hfp4__sm90_dyn_slot(dev, s1);
    cudaGraph_t g = NULL;
    CHECK(cudaStreamEndCapture(s1, &g) == cudaSuccess);
    if (g) cudaGraphDestroy(g);
    CHECK_MSG(c0 >= HFP4_SM90_DYN_STREAM_SLOTS && c1 >= HFP4_SM90_DYN_STREAM_SLOTS && c0 != c1,
              "captured launches: slots %d and %d", (int)c0, (int)c1);
    CHECK(hfp4__sm90_dyn_slot(dev, s1) == a); /* after the capture, the stream's own again */
    CHECK(hfp4__sm90_dyn_slot(1 << 20, s1) == -1);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

/* Captured launches take the plain range first (slots never given back, so the graph holds no user
 * object: dyn_slots.cu), one after the other from its start, then, once it is spent, slots that come
 * back, below it (this test runs before gpu_dyn_slots_returned, which spends the plain range). */
TEST(gpu_dyn_slots_plain) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    enum { PLAIN_START = HFP4_SM90_DYN_SLOTS - HFP4_SM90_DYN_PLAIN_SLOTS };
    const int dev = gpu_current_device(); /* (the current one: --devices) */
    cudaStream_t s1;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
    int32_t x[3] = {-1, -1, -1};
    for (int i = 0; i < 3 && !hfp4_test_failed(); i++) {
        if (i == 2) hfp4__sm90_dyn_plain_slots_spend(dev);
        CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
        x[i] = hfp4__sm90_dyn_slot(dev, s1);
        cudaGraph_t g = NULL;
        CHECK(cudaStreamEndCapture(s1, &g) == cudaSuccess);
        if (g) cudaGraphDestroy(g);
        if (i == 0 && x[0] >= HFP4_SM90_DYN_STREAM_SLOTS && x[0] < PLAIN_START) {
            /* (the plain range is spent once a process: a device listed twice in --devices) */
            cudaStreamDestroy(s1);
            SKIP("this device's plain slots were spent by an earlier pass of this process");
        }
    }
    CHECK_MSG(x[0] >= PLAIN_START && x[0] < HFP4_SM90_DYN_SLOTS && x[1] == x[0] + 1,
              "plain captured slots %d, %d (range from %d)", (int)x[0], (int)x[1], (int)PLAIN_START);
    CHECK_MSG(x[2] >= HFP4_SM90_DYN_STREAM_SLOTS && x[2] < PLAIN_START, "after the plain range: slot %d", (int)x[2]);
    cudaStreamDestroy(s1);
}

/* Holds its launch pending until the host sets *release (mapped host memory), or at most 2 s of the
 * GPU's global timer, so a test that fails to release it still ends */
static __global__ void hold_until_released(const volatile int *release) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (*release == 0 && t - t0 < 2000000000ull);
}

static void sleep_ms(long ms) {
    const struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A graph captured on `s` that holds one captured launch's slot (*slot; -1: none), NULL on failure */
static cudaGraph_t capture_one_slot(cudaStream_t s, int32_t *slot) {
    *slot = -1;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return NULL;
    *slot = hfp4__sm90_dyn_slot(gpu_current_device(), s);
    cudaGraph_t g = NULL;
    if (cudaStreamEndCapture(s, &g) != cudaSuccess) return NULL;
    return g;
}

/* A captured launch's slot comes back once its graph, the graph's instance and the instance's launch
 * are all gone (dyn_slots.cu: the graph holds a user object whose destructor returns it): not while
 * the launch is still pending after graph and instance were destroyed, and within a bounded wait
 * once it completed (CUDA runs the destructor asynchronously, so the test polls); graphs alive at
 * the same time never share a slot. */
TEST(gpu_dyn_slots_returned) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    enum { MAX_HELD = 2048, PENDING_ROUNDS = 50, POLL_MS = 1000 };
    static cudaGraph_t held[MAX_HELD]; /* graphs kept alive to the end, so their slots stay taken */
    static int32_t held_slot[MAX_HELD];
    int n_held = 0, x_back = 0;
    cudaStream_t s1 = NULL, s2 = NULL;
    int *release_h = NULL, *release_d = NULL;
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    int32_t x = -1;
    const int dev = gpu_current_device(); /* (the current one: --devices) */
    hfp4__sm90_dyn_plain_slots_spend(dev); /* (the slots this test follows are those that come back) */
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cudaHostAlloc((void **)&release_h, sizeof(int), cudaHostAllocMapped) == cudaSuccess);
    if (release_h) {
        *(volatile int *)release_h = 0;
        CHECK(cudaHostGetDevicePointer((void **)&release_d, release_h, 0) == cudaSuccess);
    }
    if (!hfp4_test_failed()) {
        /* a graph of one launch with a captured slot, launched, then instance and graph destroyed
         * while the launch is still held */
        CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
        x = hfp4__sm90_dyn_slot(dev, s1);
        hold_until_released<<<1, 1, 0, s1>>>(release_d);
        CHECK(cudaStreamEndCapture(s1, &g) == cudaSuccess && g != NULL);
        CHECK_MSG(x >= HFP4_SM90_DYN_STREAM_SLOTS && x < HFP4_SM90_DYN_SLOTS, "captured launch: slot %d", (int)x);
        if (g) CHECK(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess);
        if (exec) CHECK(cudaGraphLaunch(exec, s1) == cudaSuccess);
        if (exec) CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
        if (g) CHECK(cudaGraphDestroy(g) == cudaSuccess);
    }
    if (!hfp4_test_failed()) {
        /* while the launch is pending its slot must not be given again */
        for (int i = 0; i < PENDING_ROUNDS && n_held < MAX_HELD; i++) {
            int32_t y;
            cudaGraph_t h = capture_one_slot(s2, &y);
            CHECK_MSG(h != NULL && y >= 0, "capture %d while the launch is pending: graph %p, slot %d", i, (void *)h,
                      (int)y);
            if (!h) break;
            held[n_held] = h;
            held_slot[n_held++] = y;
            sleep_ms(1);
        }
        const cudaError_t q = cudaStreamQuery(s1);
        (void)cudaGetLastError(); /* (cudaErrorNotReady is the expected answer, not an error) */
        CHECK_MSG(q == cudaErrorNotReady, "the held launch ended early (%s): the check that its slot %d was not "
                  "given again while it was pending proves nothing", cudaGetErrorString(q), (int)x);
        for (int i = 0; i < n_held; i++)
            CHECK_MSG(held_slot[i] != x, "slot %d given again while the launch that uses it was pending", (int)x);
    }
    if (release_h) __atomic_store_n((volatile int *)release_h, 1, __ATOMIC_SEQ_CST);
    CHECK(cudaStreamSynchronize(s1) == cudaSuccess);
    if (!hfp4_test_failed()) {
        /* it completed: the slot comes back, asynchronously. Each round takes one slot and keeps its
         * graph, so slots returned earlier (by other tests) are used up before x comes round, and the
         * fresh ones taken while the destructor has not run yet are simply held too. */
        for (int ms = 0; ms < POLL_MS && n_held < MAX_HELD && !x_back; ms++) {
            CHECK(cudaDeviceSynchronize() == cudaSuccess);
            int32_t y;
            cudaGraph_t h = capture_one_slot(s2, &y);
            CHECK_MSG(h != NULL && y >= 0, "capture after the launch completed: graph %p, slot %d", (void *)h, (int)y);
            if (!h) break;
            held[n_held] = h;
            held_slot[n_held++] = y;
            x_back = y == x;
            if (!x_back) sleep_ms(1);
        }
        CHECK_MSG(x_back, "slot %d not given again within %d ms after its graph, instance and launch were gone "
                  "(%d captures meanwhile): CUDA did not run the user object's destructor, or it did not return "
                  "the slot", (int)x, (int)POLL_MS, n_held);
        /* every held graph is alive: no two share a slot */
        for (int i = 0; i < n_held; i++) {
            CHECK_MSG(held_slot[i] >= HFP4_SM90_DYN_STREAM_SLOTS, "captured launch %d: slot %d", i, (int)held_slot[i]);
            for (int j = 0; j < i; j++)
                if (held_slot[i] == held_slot[j]) {
                    CHECK_MSG(false, "graphs %d and %d, alive at once, share slot %d", j, i, (int)held_slot[i]);
                    break;
                }
        }
    }
    for (int i = 0; i < n_held; i++) cudaGraphDestroy(held[i]);
    if (release_h) cudaFreeHost(release_h);
    if (s1) cudaStreamDestroy(s1);
    if (s2) cudaStreamDestroy(s2);
    CHECK_MSG(cudaGetLastError() == cudaSuccess, "an error was left behind");
}

/* The same GEMM on two streams at once, with enough items for the dynamic walk (>= 3 a CTA, 8 chunks
 * each): 64 groups x 32 weight tiles of the 8-token tile, K = 1024. */
TEST(gpu_two_streams_at_once) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    gemm_case c = base_case(HFP4_GROUPING_MASKED, 8, 4096, 1024, 64, 930);
    c.expected_m = 4;
    c.chain = 3;
    check_case(&c, "masked, a second stream at once");
    c = base_case(HFP4_GROUPING_CONTIGUOUS, 2048, 4096, 1024, 64, 931);
    c.alignment = 8;
    c.expected_m = 4;
    c.chain = 3;
    check_case(&c, "contiguous, a second stream at once");
}

/* 1x32 activation scales take the G32 kernels (consumer_pipelined.cuh, a promotion per k32 step
 * in the look-ahead loop): the 8-token tile (two CTAs an SM, no item headers: the consumers vote on
 * the chunk modes), 16, 32 and 64 tokens (headers, and the carry from item to item: 24 experts x 16
 * weight tiles, ~3 items a CTA; 64 in halves), 128 tokens (one step at a time). One-base items with
 * 8 and 11 chunks (K = 1408) and every activation scale form; wide spreads (general items only);
 * one-base and per-32 tiles in one launch (w_pow2 4: the carry's break, a CTA switching paths); a
 * tile whose only per-32 chunk is its 34th (w_pow2 5, K = 4352: the vote and the header read more
 * than 32 mode bytes); K not a multiple of 128; the contiguous layout; dense. */
TEST(gpu_1x32_activation_scales_g32) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const int64_t ms[] = {8, 16, 32, 64};
    for (int v = 0; v < 12; v++) {
        gemm_case c = base_case(HFP4_GROUPING_MASKED, ms[v % 4], 2048, v < 4 ? 1024 : 1408, 24, 960 + v);
        c.a_gran = 32;
        c.expected_m = ms[v % 4] - 2; /* (tiles of 8, 16, 32 and 64 tokens) */
        c.w_pow2 = v < 8 ? 1 : 2;
        c.a_scale = v % 3 == 1 ? HFP4_DTYPE_UE8M0 : v % 3 == 2 ? HFP4_DTYPE_UE8M0_PACKED : HFP4_DTYPE_FP32;
        check_case(&c, "masked, 1x32 scales");
    }
    static const int64_t mixed_ms[] = {8, 16, 64, 200};
    for (int v = 0; v < 4; v++) {
        gemm_case c = base_case(HFP4_GROUPING_MASKED, mixed_ms[v], 1024, 1024, 16, 980 + v);
        c.a_gran = 32;
        c.expected_m = mixed_ms[v] - 2;
        c.w_pow2 = 4;
        check_case(&c, "masked, 1x32 scales, mixed tiles");
    }
    for (int v = 0; v < 2; v++) {
        gemm_case c = base_case(HFP4_GROUPING_MASKED, v ? 16 : 8, 512, 4352, 4, 984 + v);
        c.a_gran = 32;
        c.expected_m = v ? 14 : 6;
        c.w_pow2 = 5;
        check_case(&c, "masked, 1x32 scales, per-32 chunk 34");
        c = base_case(HFP4_GROUPING_MASKED, v ? 16 : 8, 512, 1056, 6, 986 + v);
        c.a_gran = 32;
        c.expected_m = v ? 14 : 6;
        check_case(&c, "masked, 1x32 scales, K % 128 != 0");
    }
    gemm_case c = base_case(HFP4_GROUPING_CONTIGUOUS, 1024, 1024, 1024, 16, 970);
    c.a_gran = 32;
    c.alignment = 16;
    c.expected_m = 12;
    check_case(&c, "contiguous, 1x32 scales");
    /* the 128-token tile (one step at a time): masked, odd chunk count; dense with a token tail */
    c = base_case(HFP4_GROUPING_MASKED, 200, 1024, 1408, 5, 971);
    c.a_gran = 32;
    c.expected_m = 190;
    check_case(&c, "masked, 1x32 scales, 128 tokens");
    c = base_case(HFP4_GROUPING_NONE, 300, 1000, 1024, 1, 972);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0;
    check_case(&c, "dense, 1x32 scales");
}

/* The BF16 path (bf16_fp4_gemm.cu, opt-in): 128-token tiles with 1x32 UE8M0 activation scales
 * through BF16 tensor cores, against the reference: dense with token and N tails, masked with an odd
 * chunk count, contiguous, per-32 and mixed weight chunks, K % 128 != 0, both UE8M0 forms. */
TEST(gpu_bf16_path_1x32) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    hfp4__sm90_bf16_set(1);
    gemm_case c = base_case(HFP4_GROUPING_NONE, 300, 1000, 1024, 1, 1972);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0;
    check_case(&c, "bf16 path: dense, token and N tails");
    c = base_case(HFP4_GROUPING_MASKED, 200, 1024, 1408, 5, 1971);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0_PACKED;
    c.expected_m = 190;
    check_case(&c, "bf16 path: masked, 11 chunks");
    c = base_case(HFP4_GROUPING_MASKED, 256, 512, 1056, 3, 1973);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0;
    c.expected_m = 250;
    c.w_pow2 = 4;
    check_case(&c, "bf16 path: masked, mixed chunks, K % 128 != 0");
    c = base_case(HFP4_GROUPING_MASKED, 160, 512, 4352, 2, 1974);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0;
    c.expected_m = 150;
    c.w_pow2 = 5;
    check_case(&c, "bf16 path: masked, a per-32 chunk past the 32nd");
    c = base_case(HFP4_GROUPING_CONTIGUOUS, 1024, 1024, 1024, 4, 1975);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0_PACKED;
    c.expected_m = 256;
    check_case(&c, "bf16 path: contiguous");
    c = base_case(HFP4_GROUPING_NONE, 256, 512, 2048, 1, 1976);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0;
    c.w_pow2 = 2;
    check_case(&c, "bf16 path: dense, wide weight scales");
    c = base_case(HFP4_GROUPING_NONE, 130, 384, 512, 1, 1977);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0;
    c.d_dtype = HFP4_DTYPE_FP32;
    c.with_c = 1;
    check_case(&c, "bf16 path: dense, FP32 D with C");
    c = base_case(HFP4_GROUPING_NONE, 130, 384, 512, 1, 1978);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0;
    c.with_c = 1;
    check_case(&c, "bf16 path: dense, BF16 D with C");
    /* more items than CTAs (each CTA carries its stage phases from tile to tile, and releases each
     * tile's last stage after its TMA store), with an odd chunk count; one and two chunks */
    c = base_case(HFP4_GROUPING_NONE, 2048, 2048, 1408, 1, 1979);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0_PACKED;
    check_case(&c, "bf16 path: dense, 256 items, 11 chunks");
    for (int v = 0; v < 2; v++) {
        c = base_case(HFP4_GROUPING_NONE, 256, 512, v ? 256 : 128, 1, 1980 + v);
        c.a_gran = 32;
        c.a_scale = HFP4_DTYPE_UE8M0;
        check_case(&c, v ? "bf16 path: dense, 2 chunks" : "bf16 path: dense, 1 chunk");
    }
    c = base_case(HFP4_GROUPING_CONTIGUOUS_PSUM, 1000, 512, 1024, 4, 1982);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0;
    c.expected_m = 250;
    check_case(&c, "bf16 path: psum");
    hfp4__sm90_bf16_set(0);
}

/* The warp path (warp_decode.cu) against the reference: masked decode batches (groups with no rows,
 * groups past 8 rows: several token blocks of one tile), N and K tails, every weight-scale form
 * (folded, per-32, mixed, FP32), 1x32 activation scales in every form, FP32 D and C, dense GEMVs,
 * 256 experts with a few routed, a chained launch (PDL) reading the first's output, launches with
 * more units than CTAs, the K-split (most masked cases above run in clusters of 2 and split when
 * their units are few; the K-split's own cases below), and a problem it leaves to the main kernel. */
TEST(gpu_warp_decode) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    hfp4__sm90_warp_set(1);
    gemm_case c = base_case(HFP4_GROUPING_MASKED, 8, 512, 1024, 6, 2001);
    c.expected_m = 2;
    check_case(&c, "warp: masked, 8 rows");
    c = base_case(HFP4_GROUPING_MASKED, 21, 1000, 1056, 5, 2002);
    c.expected_m = 4;
    check_case(&c, "warp: masked, 21 rows, N and K tails");
    static const int pows[] = {0, 2, 3, 4};
    for (int i = 0; i < 4; i++) {
        c = base_case(HFP4_GROUPING_MASKED, 6, 384, i == 3 ? 4352 : 2048, 4, 2003 + i);
        c.expected_m = 3;
        c.w_pow2 = pows[i];
        check_case(&c, "warp: masked, weight-scale forms");
    }
    static const hfp4_dtype a_forms[] = {HFP4_DTYPE_FP32, HFP4_DTYPE_UE8M0, HFP4_DTYPE_UE8M0_PACKED};
    for (int i = 0; i < 3; i++) {
        c = base_case(HFP4_GROUPING_MASKED, 9, 512, 1056, 3, 2010 + i);
        c.expected_m = 5;
        c.a_gran = 32;
        c.a_scale = a_forms[i];
        c.w_pow2 = i == 2 ? 4 : 1;
        check_case(&c, "warp: masked, 1x32 scales");
        c = base_case(HFP4_GROUPING_MASKED, 7, 256, 640, 3, 2020 + i);
        c.expected_m = 5;
        c.a_scale = a_forms[i];
        c.a_mn_major = i == 0;
        check_case(&c, "warp: masked, 1x128 scale forms");
    }
    c = base_case(HFP4_GROUPING_MASKED, 5, 640, 512, 3, 2030);
    c.expected_m = 5;
    c.d_dtype = HFP4_DTYPE_FP32;
    c.with_c = 1;
    c.d_pad = 3;
    check_case(&c, "warp: masked, FP32 D with C, padded rows");
    c = base_case(HFP4_GROUPING_MASKED, 5, 640, 512, 3, 2031);
    c.expected_m = 5;
    c.with_c = 1;
    c.w_pow2 = 0;
    check_case(&c, "warp: masked, BF16 D with C, FP32 w scales");
    static const int64_t dense[][3] = {{1, 4096, 4096}, {5, 1000, 160}, {8, 4096, 1024}, {3, 128, 32}};
    for (int i = 0; i < 4; i++) {
        c = base_case(HFP4_GROUPING_NONE, dense[i][0], dense[i][1], dense[i][2], 1, 2040 + i);
        check_case(&c, "warp: dense GEMV");
    }
    c = base_case(HFP4_GROUPING_MASKED, 4, 2048, 4096, 256, 2050);
    c.expected_m = 1;
    check_case(&c, "warp: masked, 256 experts");
    c = base_case(HFP4_GROUPING_MASKED, 6, 512, 1024, 5, 2051);
    c.expected_m = 2;
    c.chain = 1;
    check_case(&c, "warp: masked, chained launch");
    /* more units than CTAs (~1300 on 396): each CTA runs a range of units, reusing the staged
     * activations across a group's tiles and restaging at group and token-block changes, with an
     * odd chunk count (the pairs' single last chunk); every weight-scale form x both activation
     * granularities (FP32 weight scales with 1x32 activation scales among them) */
    static const int multi_pows[] = {1, 2, 0};
    for (int i = 0; i < 6; i++) {
        c = base_case(HFP4_GROUPING_MASKED, 12, 1024, 1408, 64, 2060 + i);
        c.expected_m = 2;
        c.w_pow2 = multi_pows[i % 3];
        c.a_gran = i < 3 ? 128 : 32;
        check_case(&c, "warp: masked, many units a CTA");
    }
    /* the K-split (a cluster's CTAs share each unit's K when the units are few; the leader adds the
     * partners' sums): a tensor-parallel shard at T = 1 (6 of 256 experts routed, 8 tiles each: 48
     * units; masked launches split 2 ways) in every weight-scale form, 1x32 scales, FP32 D with C;
     * odd chunk counts (34 in 2 and in 8 parts); dense GEMVs split 8 ways, (64 units) 4 ways and (16
     * chunks) 4 ways; a chained launch; and the same shard with the split off (the cap) */
    static int32_t shard_rows[256];
    for (int i = 0; i < 256; i++) shard_rows[i] = (i % 41 == 3) && i < 240 ? 1 : 0; /* 6 groups of one row */
    static const int split_pows[] = {1, 2, 0, 4};
    for (int i = 0; i < 4; i++) {
        c = base_case(HFP4_GROUPING_MASKED, 1, 512, 4096, 256, 2070 + i);
        c.expected_m = 1;
        c.rows = shard_rows;
        c.w_pow2 = split_pows[i];
        check_case(&c, "warp split: TP8 w13 shard, T = 1");
    }
    c = base_case(HFP4_GROUPING_MASKED, 1, 512, 4096, 256, 2074);
    c.expected_m = 1;
    c.rows = shard_rows;
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0_PACKED;
    check_case(&c, "warp split: shard, 1x32 scales");
    c = base_case(HFP4_GROUPING_MASKED, 1, 512, 4096, 256, 2075);
    c.expected_m = 1;
    c.rows = shard_rows;
    c.d_dtype = HFP4_DTYPE_FP32;
    c.with_c = 1;
    check_case(&c, "warp split: shard, FP32 D with C");
    static const int32_t odd_rows[3] = {1, 0, 5};
    c = base_case(HFP4_GROUPING_MASKED, 5, 256, 4352, 3, 2076);
    c.expected_m = 2;
    c.rows = odd_rows;
    c.w_pow2 = 5; /* (a per-32 chunk at 33: in the last part) */
    check_case(&c, "warp split: masked, 34 chunks in 2 parts");
    c = base_case(HFP4_GROUPING_NONE, 3, 256, 4352, 1, 2081);
    c.w_pow2 = 5;
    check_case(&c, "warp split: dense, 34 chunks in 8 parts");
    static const int64_t split_dense[][3] = {{1, 512, 4096}, {2, 4096, 4096}, {7, 200, 2048}};
    for (int i = 0; i < 3; i++) {
        c = base_case(HFP4_GROUPING_NONE, split_dense[i][0], split_dense[i][1], split_dense[i][2], 1, 2077 + i);
        check_case(&c, "warp split: dense GEMV");
    }
    c = base_case(HFP4_GROUPING_MASKED, 1, 512, 4096, 256, 2080);
    c.expected_m = 1;
    c.rows = shard_rows;
    c.chain = 1;
    check_case(&c, "warp split: shard, chained launch");
    /* 8 parts under 1x32 activation scales (the per-step path), 2 under FP32 weight scales */
    c = base_case(HFP4_GROUPING_NONE, 1, 512, 4096, 1, 2082);
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_UE8M0;
    check_case(&c, "warp split: dense, 1x32 scales, 8 parts");
    c = base_case(HFP4_GROUPING_NONE, 1, 4096, 4096, 1, 2083);
    c.w_pow2 = 0;
    check_case(&c, "warp split: dense, FP32 weight scales, 2 parts");
    /* forced (the test hook): many units a walker (the FREE barrier's waits and the phase bit over
     * units), and 2 parts in clusters of 8 (leaders at ranks 2, 4, 6 too), dense and masked */
    hfp4__sm90_warp_split_test(8, 16);
    c = base_case(HFP4_GROUPING_NONE, 2, 4096, 4096, 1, 2084);
    check_case(&c, "warp split: forced 8 parts, 32 units a walker");
    hfp4__sm90_warp_split_test(2, 32);
    c = base_case(HFP4_GROUPING_NONE, 2, 4096, 4096, 1, 2085);
    c.w_pow2 = 2;
    check_case(&c, "warp split: forced 2 parts in clusters of 8");
    hfp4__sm90_warp_split_test(2, 8);
    c = base_case(HFP4_GROUPING_MASKED, 1, 512, 4096, 256, 2086);
    c.expected_m = 1;
    c.rows = shard_rows;
    c.a_gran = 32;
    c.a_scale = HFP4_DTYPE_FP32;
    check_case(&c, "warp split: forced, masked, 12 units a walker");
    hfp4__sm90_warp_split_test(0, 0);
    hfp4__sm90_warp_split_set(1);
    c = base_case(HFP4_GROUPING_MASKED, 1, 512, 4096, 256, 2070);
    c.expected_m = 1;
    c.rows = shard_rows;
    check_case(&c, "warp split: shard with the split off");
    hfp4__sm90_warp_split_set(-1);
    /* beyond what the warp path takes (its staged FP32 weight scales would not fit): the main kernel */
    c = base_case(HFP4_GROUPING_MASKED, 4, 256, 8192, 3, 2052);
    c.expected_m = 2;
    c.w_pow2 = 0;
    check_case(&c, "warp: masked, refused (FP32 scales, K 8192)");
    hfp4__sm90_warp_set(-1);
}

TEST(gpu_unsupported_is_reported) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    /* plain FP4 B has no kernel: UNSUPPORTED, never a wrong answer */
    gemm_case cs = base_case(HFP4_GROUPING_NONE, 8, 128, 128, 1, 700);
    gemm_host h;
    fx_build(&h, &cs);
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = HFP4_GROUPING_NONE;
    p.m = 8;
    p.n = 128;
    p.k = 128;
    p.num_groups = 1;
    void *dev = NULL;
    cudaMalloc(&dev, 1 << 20);
    p.a.data = dev;
    p.a.dtype = HFP4_DTYPE_FP8_E4M3;
    p.a.rows = 8;
    p.a.cols = 128;
    p.a.ld = 128;
    p.a.scales.data = dev;
    p.a.scales.dtype = HFP4_DTYPE_FP32;
    p.a.scales.gran_mn = 1;
    p.a.scales.gran_k = 128;
    p.a.scales.stride_mn = 1;
    p.a.scales.stride_k = 8;
    p.b.data = dev;
    p.b.dtype = HFP4_DTYPE_FP4_E2M1;
    p.b.rows = 128;
    p.b.cols = 128;
    p.b.ld = 64;
    p.b.scales.data = dev;
    p.b.scales.dtype = HFP4_DTYPE_UE8M0;
    p.b.scales.gran_mn = 1;
    p.b.scales.gran_k = 32;
    p.b.scales.stride_mn = 4;
    p.b.scales.stride_k = 1;
    p.d.data = dev;
    p.d.dtype = HFP4_DTYPE_BF16;
    p.d.ld = 128;
    CHECK_REJECT(hfp4_gemm(&p, NULL), HFP4_ERR_UNSUPPORTED, "repack");
    CHECK_REJECT(hfp4_gemm_supported(&p), HFP4_ERR_UNSUPPORTED, "repack");
    cudaFree(dev);
    fx_free(&h);
}
