/*
 * test_fp8_weights_grouped_sm90.cu - hfp4_gemm with FP8 weights in the m-grouped contiguous layout
 * (G experts of [N, K] FP8 under 128 x 128 block scales; A's rows sorted by expert in segments
 * aligned to 128, -1 for padding rows) against the CPU reference: fresh random operands, A's padding
 * rows and their scales NaN (no other row may depend on them), D poisoned first, every element
 * checked (padding rows +0 without C, unless d_padding = ANY), D's padding columns and the rows past
 * m must keep the poison. The bound and the checks: fp8_weights_check.h.
 * (First run on a GPU: bench/RESULTS.md v45, with compute-sanitizer memcheck and racecheck.)
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_weights_check.h"
#include "gpu_device.h"
#include "harness.h"
#include "hfp4.h"

#define FG_MAX_GROUPS 16

typedef struct fg_case {
    int32_t groups;
    int32_t rows[FG_MAX_GROUPS]; /* real rows of each expert (0: no segment) */
    int64_t tail_pad;            /* all-padding rows after the last segment (a multiple of 128); -1: the
                                  * last segment not padded either (m ends inside a tile) */
    int32_t align;               /* m_alignment (0: the default, 128) */
    hfp4_dtype a_scale;          /* FP32, UE8M0 or UE8M0_PACKED (1 x 128) */
    int mn_major;                /* activation scales MN-major ([k/128][align(m, 4)], packed [k/512][..]) */
    int64_t n, k;
    hfp4_dtype b_scale;          /* FP32 or UE8M0 */
    hfp4_dtype d_dtype;          /* BF16 or FP32 */
    int with_c;
    int64_t d_pad;               /* D's ld = n + d_pad */
    int pad_any;                 /* d_padding = HFP4_D_PADDING_ANY: padding rows not checked */
    uint64_t salt;
} fg_case;

static void fg_run(const fg_case *c, const char *label) {
    const int64_t n = c->n, k = c->k, kg = k / 128, nb = (n + 127) / 128, ldd = n + c->d_pad;
    const int32_t G = c->groups;
    const int esz = c->d_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    const int64_t align = c->align ? c->align : 128;
    int64_t m = 0;
    for (int32_t g = 0; g < G; g++) m += (c->rows[g] + align - 1) / align * align;
    if (c->tail_pad >= 0) m += c->tail_pad;
    else /* the last segment ends m: the last tile is partial */
        for (int32_t g = G - 1; g >= 0; g--)
            if (c->rows[g] > 0) {
                m -= (c->rows[g] + align - 1) / align * align - c->rows[g];
                break;
            }
    int32_t *layout = (int32_t *)malloc(sizeof(int32_t) * m);
    {
        int64_t r = 0;
        for (int32_t g = 0; g < G; g++) {
            int64_t end = r + (c->rows[g] + align - 1) / align * align;
            if (end > m) end = m;
            for (int64_t i = 0; r < end; r++, i++) layout[r] = i < c->rows[g] ? g : -1;
        }
        for (; r < m; r++) layout[r] = -1;
    }
    hfp4_rng rng = hfp4_rng_make(c->salt);
    /* A: per-token FP8 with 1 x 128 scales; then the padding rows and their scales NaN (scale
     * bytes and words 0xFF: NaN as UE8M0) */
    float *x = (float *)malloc(sizeof(float) * m * k);
    for (int64_t i = 0; i < m * k; i++) x[i] = (float)(hfp4_rng_normal(&rng) * (1.0 + (i / k) % 7));
    uint8_t *qa;
    hfp4_scales sa;
    const int sa_esz = fw_scale_esz(c->a_scale);
    const int64_t sa_units = fw_quantize_a(x, m, k, c->a_scale, c->mn_major, &qa, &sa);
    void *sa_host = (void *)sa.data;
    for (int64_t r = 0; r < m; r++)
        if (layout[r] < 0) fw_poison_a_row(qa, k, &sa, r);
    /* B: G experts of per-block FP8, 128 x 128 scales [G][nb][kg] */
    hfp4_matrix b;
    fw_make_experts(&rng, G, n, k, c->b_scale, &b);
    const int sb_esz = c->b_scale == HFP4_DTYPE_UE8M0 ? 1 : 4;
    float *cv = c->with_c ? fw_make_c(&rng, m * ldd, c->d_dtype) : NULL;
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = HFP4_GROUPING_CONTIGUOUS;
    p.m = m;
    p.n = n;
    p.k = k;
    p.num_groups = G;
    p.layout = layout;
    p.m_alignment = c->align;
    p.d_padding = c->pad_any ? HFP4_D_PADDING_ANY : HFP4_D_PADDING_ZERO;
    p.a.data = qa;
    p.a.dtype = HFP4_DTYPE_FP8_E4M3;
    p.a.rows = m;
    p.a.cols = k;
    p.a.ld = k;
    p.a.scales = sa;
    p.b = b;
    p.d.ld = ldd;
    p.d.c = cv;
    const fw_sizes z = {(size_t)m * k, (size_t)G * n * k, (size_t)sa_units * sa_esz, (size_t)G * nb * kg * sb_esz,
                        (size_t)m * ldd * esz, (size_t)m};
    char what[160];
    snprintf(what, sizeof what, "%s (m=%lld n=%lld k=%lld G=%d)", label, (long long)m, (long long)n, (long long)k, G);
    fw_verify(what, p, &z, c->d_dtype, m, layout, c->pad_any);
    free(layout);
    free(x);
    free(qa);
    free((void *)b.data);
    free(sa_host);
    free((void *)b.scales.data);
    free(cv);
}

TEST(gpu_fp8_weights_contiguous) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const fg_case cases[] = {
        /* a segment with a 2-row tail tile, an expert without rows, one of 77 rows, two full tiles,
         * then a padding tile; BF16 D without C (the TMA store) */
        {4, {130, 0, 77, 256}, 128, 0, HFP4_DTYPE_FP32, 0, 384, 512, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 0, 1},
        /* the same with FP32 D and C (register stores: C not added to padding rows), UE8M0 scales
         * both sides, the activations' MN-major */
        {4, {130, 0, 77, 256}, 128, 0, HFP4_DTYPE_UE8M0, 1, 384, 512, HFP4_DTYPE_UE8M0, HFP4_DTYPE_FP32, 1, 3, 0, 2},
        /* a column tail (n = 200), 2 K-blocks a tile (the overlapped loop's ends), BF16 D with C,
         * m ending inside the last tile (no padding after the last segment), packed scales */
        {3, {1, 300, 129}, -1, 0, HFP4_DTYPE_UE8M0_PACKED, 0, 200, 256, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 1, 8, 0, 3},
        /* more tiles than CTAs (18 token tiles x 12 weight tiles), 3 K-blocks a tile: the stage ring
         * across tiles with padding tiles skipped in every role; FP32 scales MN-major */
        {8, {300, 384, 1, 257, 128, 0, 383, 200}, 256, 0, HFP4_DTYPE_FP32, 1, 1536, 384, HFP4_DTYPE_FP32,
         HFP4_DTYPE_BF16, 0, 0, 0, 4},
        /* padding rows may hold anything (d_padding = ANY): the padding tiles are not visited */
        {3, {100, 5, 250}, 128, 0, HFP4_DTYPE_FP32, 0, 256, 640, HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 0, 0, 1, 5},
        /* segments aligned to 256 with at most 128 rows each: every other token tile is padding, 32
         * token tiles x 10 weight tiles (more than the CTAs), so a CTA steps over padding tiles
         * between live ones; one K-block a tile (fewer than the three factor warps: their places
         * in the stage ring cross tiles), m ending inside the last tile */
        {16, {128, 100, 1, 128, 64, 128, 127, 2, 128, 128, 90, 128, 128, 3, 128, 70}, -1, 256, HFP4_DTYPE_FP32, 1,
         1280, 128, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 0, 6},
        /* the same layout with 2 K-blocks, FP32 D and C, UE8M0 activation scales */
        {16, {128, 100, 1, 128, 64, 128, 127, 2, 128, 128, 90, 128, 128, 3, 128, 70}, -1, 256, HFP4_DTYPE_UE8M0, 0,
         1280, 256, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, 1, 0, 0, 7},
    };
    /* each case with the TMA store and the register stores, each by the kernel that computes every
     * warpgroup and by the one that skips idle ones (the plan's skip_idle forced both ways) */
    for (int mode = 0; mode < 4; mode++) {
        const int dtma = mode % 2 == 0, skip = mode / 2;
        fw_set_modes(dtma, skip);
        for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char label[96];
            snprintf(label, sizeof label, "fp8 weights contiguous, %s stores, %s, case %u",
                     dtma ? "default" : "register", skip ? "idle skipped" : "all computed", i);
            fg_run(&cases[i], label);
        }
    }
    fw_set_modes(1, -1);
}

/* A 256 x 256 x 256 problem of two experts with FP8 weights on static host buffers (hfp4_gemm_supported
 * reads no data): contiguous, or masked (A and D [2][256][256]) */
static hfp4_gemm_problem fw_small_grouped_problem(hfp4_grouping g) {
    static uint8_t a[2 * 256 * 256], b[2 * 256 * 256];
    static float sfa[2 * 256 * 2], sfb[2 * 2 * 2];
    static uint16_t d[2 * 256 * 256];
    static int32_t layout[256];
    const int masked = g == HFP4_GROUPING_MASKED;
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = g;
    p.m = 256;
    p.n = 256;
    p.k = 256;
    p.num_groups = 2;
    p.layout = layout;
    p.a.data = a;
    p.a.dtype = HFP4_DTYPE_FP8_E4M3;
    p.a.rows = 256;
    p.a.cols = 256;
    p.a.ld = 256;
    p.a.stride_group = masked ? 256 * 256 : 0;
    p.a.scales.data = sfa;
    p.a.scales.dtype = HFP4_DTYPE_FP32;
    p.a.scales.gran_mn = 1;
    p.a.scales.gran_k = 128;
    p.a.scales.stride_mn = 2;
    p.a.scales.stride_k = 1;
    p.a.scales.stride_group = masked ? 512 : 0;
    p.b = p.a;
    p.b.data = b;
    p.b.stride_group = 256 * 256;
    p.b.scales.data = sfb;
    p.b.scales.gran_mn = 128;
    p.b.scales.stride_mn = 2;
    p.b.scales.stride_group = 4;
    p.d.data = d;
    p.d.dtype = HFP4_DTYPE_BF16;
    p.d.ld = 256;
    p.d.stride_group = masked ? 256 * 256 : 0;
    return p;
}

TEST(gpu_fp8_weights_grouped_rejections) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    setenv("HFP4_SM90_FP8_WEIGHTS", "1", 1);
    hfp4_gemm_problem p = fw_small_grouped_problem(HFP4_GROUPING_CONTIGUOUS);
    CHECK_STATUS(hfp4_gemm_supported(&p), HFP4_OK);
    p.m_alignment = 64; /* segments the 128-row tiles cannot follow */
    CHECK_REJECT(hfp4_gemm_supported(&p), HFP4_ERR_UNSUPPORTED, "m_alignment");
    p.m_alignment = 256;
    CHECK_STATUS(hfp4_gemm_supported(&p), HFP4_OK);
    p = fw_small_grouped_problem(HFP4_GROUPING_MASKED);
    CHECK_STATUS(hfp4_gemm_supported(&p), HFP4_OK);
    p.a.stride_group = 256 * 256 + 8; /* groups of A the TMA loads cannot address */
    CHECK_REJECT(hfp4_gemm_supported(&p), HFP4_ERR_UNSUPPORTED, "a.stride_group");
}

/* The masked layout: A [G][m + a_gap][k] (a_gap rows between groups: a.stride_group beyond m rows),
 * D and C [G][m + d_gap][ldd]; group g's rows from masked[g] on, A's and their scales NaN, must
 * neither be computed into another row nor written (D keeps the poison there, and in the gap rows) */
#define FM_MAX_GROUPS 80

typedef struct fm_case {
    int32_t groups;
    int64_t m;                      /* rows a group (DeepGEMM's max_m) */
    int32_t masked[FM_MAX_GROUPS];  /* masked_m of each group, in [0, m] */
    int64_t a_gap, d_gap;           /* rows between groups past m, in A and in D / C */
    hfp4_dtype a_scale;             /* FP32, UE8M0 or UE8M0_PACKED (1 x 128) */
    int mn_major;                   /* activation scales MN-major: [G][k units][align(m + a_gap, 4)] */
    int64_t n, k;
    hfp4_dtype b_scale;             /* FP32 or UE8M0 */
    hfp4_dtype d_dtype;             /* BF16 or FP32 */
    int with_c;
    int64_t d_pad;                  /* D's ld = n + d_pad */
    uint64_t salt;
} fm_case;

static void fm_run(const fm_case *c, const char *label) {
    const int64_t n = c->n, k = c->k, kg = k / 128, nb = (n + 127) / 128, ldd = n + c->d_pad, m = c->m;
    const int32_t G = c->groups;
    const int esz = c->d_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    const int64_t am = m + c->a_gap, dm = m + c->d_gap; /* rows a group in A's and D's storage */
    const int64_t a_rows = (int64_t)G * am, d_rows = (int64_t)G * dm;
    hfp4_rng rng = hfp4_rng_make(c->salt);
    /* A: every stored row quantized per token (K-major scales), then re-laid MN-major per group if
     * asked; rows past masked_m (and the gap rows) NaN with NaN scales */
    float *x = (float *)malloc(sizeof(float) * a_rows * k);
    for (int64_t i = 0; i < a_rows * k; i++) x[i] = (float)(hfp4_rng_normal(&rng) * (1.0 + (i / k) % 7));
    uint8_t *qa;
    hfp4_scales sa;
    const int sa_esz = fw_scale_esz(c->a_scale);
    const int64_t k_units = fw_a_scale_units(c->a_scale, k), am4 = (am + 3) & ~(int64_t)3;
    fw_quantize_a(x, a_rows, k, c->a_scale, 0, &qa, &sa); /* (K-major [G * am][k_units]) */
    uint8_t *sk = (uint8_t *)sa.data;
    for (int64_t r = 0; r < a_rows; r++)
        if (r % am >= c->masked[r / am]) fw_poison_a_row(qa, k, &sa, r);
    const int64_t sa_units = c->mn_major ? G * k_units * am4 : a_rows * k_units;
    uint8_t *sa_host = sk;
    if (c->mn_major) {
        sa_host = (uint8_t *)calloc(sa_units, sa_esz);
        for (int64_t r = 0; r < a_rows; r++)
            for (int64_t j = 0; j < k_units; j++)
                memcpy(sa_host + ((r / am) * k_units * am4 + j * am4 + r % am) * sa_esz, sk + (r * k_units + j) * sa_esz,
                       sa_esz);
        sa.stride_mn = 1;
        sa.stride_k = am4;
        sa.stride_group = k_units * am4;
    } else {
        sa.stride_group = am * k_units;
    }
    sa.data = sa_host;
    /* B: G experts of per-block FP8, 128 x 128 scales [G][nb][kg] */
    hfp4_matrix b;
    fw_make_experts(&rng, G, n, k, c->b_scale, &b);
    const int sb_esz = c->b_scale == HFP4_DTYPE_UE8M0 ? 1 : 4;
    float *cv = c->with_c ? fw_make_c(&rng, d_rows * ldd, c->d_dtype) : NULL;
    int32_t *masked = (int32_t *)malloc(sizeof(int32_t) * G);
    int32_t *row_kind = (int32_t *)malloc(sizeof(int32_t) * d_rows); /* fw_check_d's layout: g, or -2 */
    for (int32_t g = 0; g < G; g++) masked[g] = c->masked[g];
    for (int64_t r = 0; r < d_rows; r++) row_kind[r] = r % dm < c->masked[r / dm] ? (int32_t)(r / dm) : -2;
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = HFP4_GROUPING_MASKED;
    p.m = m;
    p.n = n;
    p.k = k;
    p.num_groups = G;
    p.layout = masked;
    p.a.data = qa;
    p.a.dtype = HFP4_DTYPE_FP8_E4M3;
    p.a.rows = m;
    p.a.cols = k;
    p.a.ld = k;
    p.a.stride_group = am * k;
    p.a.scales = sa;
    p.b = b;
    p.d.ld = ldd;
    p.d.stride_group = dm * ldd;
    p.d.c = cv;
    const fw_sizes z = {(size_t)a_rows * k, (size_t)G * n * k, (size_t)sa_units * sa_esz, (size_t)G * nb * kg * sb_esz,
                        (size_t)d_rows * ldd * esz, (size_t)G};
    char what[160];
    snprintf(what, sizeof what, "%s (G=%d m=%lld n=%lld k=%lld)", label, G, (long long)m, (long long)n, (long long)k);
    fw_verify(what, p, &z, c->d_dtype, d_rows, row_kind, 0);
    if (sa_host != sk) free(sa_host);
    free(sk);
    free(x);
    free(qa);
    free((void *)b.data);
    free((void *)b.scales.data);
    free(cv);
    free(masked);
    free(row_kind);
}

TEST(gpu_fp8_weights_masked) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const fm_case cases[] = {
        /* a full group (300 rows: a 44-row last tile), an empty one, 129 rows (the second tile's first
         * warpgroup crosses masked_m: register stores), 64 (the tile's second warpgroup has none);
         * BF16 D without C (the TMA store where a warpgroup's 64 rows are all below masked_m) */
        {4, 300, {300, 0, 129, 64}, 0, 0, HFP4_DTYPE_FP32, 0, 384, 512, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 1},
        /* the same with gaps between the groups in A (5 rows) and D (3 rows), FP32 D and C, UE8M0
         * scales both sides, the activations' MN-major, D's ld = n + 3 */
        {4, 300, {300, 0, 129, 64}, 5, 3, HFP4_DTYPE_UE8M0, 1, 384, 512, HFP4_DTYPE_UE8M0, HFP4_DTYPE_FP32, 1, 3, 2},
        /* more tiles than CTAs (12 groups x 4 token tiles x 12 weight tiles), 3 K-blocks a tile: the
         * stage ring across tiles with dead tiles skipped in every role; packed activation scales */
        {12, 512, {512, 1, 200, 0, 511, 128, 256, 7, 384, 300, 64, 65}, 0, 0, HFP4_DTYPE_UE8M0_PACKED, 0, 1536, 384,
         HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 3},
        /* one K-block a tile (fewer than the three factor warps), a column tail (n = 200), BF16 D with
         * C (register stores), FP32 scales MN-major, m not a multiple of 4 */
        {3, 130, {130, 127, 1}, 2, 0, HFP4_DTYPE_FP32, 1, 200, 128, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 1, 8, 4},
        /* decode-like: 16 groups of at most 8 rows in m = 256 (one live tile a group), 2 K-blocks */
        {16, 256, {1, 8, 0, 3, 2, 1, 6, 0, 4, 8, 1, 1, 5, 2, 7, 3}, 0, 0, HFP4_DTYPE_FP32, 1, 512, 256,
         HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 0, 0, 5},
    };
    /* the kernel walks the groups 32 at a time: 70 groups, most of them empty, live ones on either
     * side of the 32- and 64-group windows (the first at group 3, the last at 69), m = 1000 (8 token
     * tiles a group, most of them dead) and more live tiles than CTAs (30 token tiles x 5 weight
     * tiles); then every group empty
     * (nothing may be written) */
    fm_case many = {70, 1000, {0}, 0, 0, HFP4_DTYPE_FP32, 0, 640, 256, HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 0, 0, 6};
    static const int32_t live_groups[][2] = {{3, 5},    {31, 1000}, {32, 129}, {33, 1},  {40, 640},
                                             {63, 128}, {64, 300},  {65, 2},   {69, 999}};
    for (unsigned i = 0; i < sizeof live_groups / sizeof live_groups[0]; i++)
        many.masked[live_groups[i][0]] = live_groups[i][1];
    fm_case none = many;
    memset(none.masked, 0, sizeof none.masked);
    none.salt = 7;
    /* 80 groups, 70 of them live with 1-16 rows (two passes of 8 for some), k = 1024: the few-row
     * kernel's persistent grid (2 CTAs an SM) meets more (group, rows) units than CTAs */
    fm_case wide = {80, 16, {0}, 0, 0, HFP4_DTYPE_FP32, 0, 1536, 1024, HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 0, 0, 8};
    for (int32_t g = 0; g < 80; g++) wide.masked[g] = g % 8 == 3 ? 0 : 1 + (g * 7) % 16;
    /* modes 0-3 as the contiguous test's; modes 4 and 5 the few-row kernel (fp8_fp8_gemv.cu's masked
     * form, opt-in: HFP4_SM90_FP8_GEMV_MASKED=1), whose groups of more than 8 rows take several
     * passes, with its own warps a row group and with 8 (HFP4_SM90_FP8_GEMV_KW) */
    for (int mode = 0; mode < 6; mode++) {
        const int dtma = mode % 2 == 0, skip = mode / 2, few = mode >= 4;
        fw_set_modes(dtma, few ? -1 : skip);
        if (few) setenv("HFP4_SM90_FP8_GEMV_MASKED", "1", 1);
        if (mode == 5) setenv("HFP4_SM90_FP8_GEMV_KW", "8", 1);
        const unsigned count = sizeof cases / sizeof cases[0];
        for (unsigned i = 0; i < count + 3; i++) {
            char label[96];
            snprintf(label, sizeof label, "fp8 weights masked, %s, case %u",
                     mode == 5 ? "few-row kernel, 8 warps a row group"
                     : few     ? "few-row kernel"
                     : !dtma   ? (skip ? "register stores, idle skipped" : "register stores")
                               : (skip ? "idle skipped" : "all computed"),
                     i);
            fm_run(i < count ? &cases[i] : i == count ? &many : i == count + 1 ? &none : &wide, label);
        }
        unsetenv("HFP4_SM90_FP8_GEMV_MASKED");
        unsetenv("HFP4_SM90_FP8_GEMV_KW");
    }
    fw_set_modes(1, -1);
}
