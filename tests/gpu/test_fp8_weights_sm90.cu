/*
 * test_fp8_weights_sm90.cu - hfp4_gemm with FP8 weights (b.dtype FP8_E4M3 under 128 x 128 block
 * scales, src/kernels/sm90/fp8_fp8_gemm.h) against the CPU reference: fresh random operands quantized
 * by the library's own casts, D poisoned first, every element checked, D's padding columns must keep
 * the poison; the bound and the checks: fp8_weights_check.h.
 * The path is on by default; HFP4_SM90_FP8_WEIGHTS=1 is set here all the same, so that a switch-off
 * in the caller's environment cannot skip these tests (each runs in a process of its own under
 * --fork, and the switch is read once).
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

typedef struct fw_case {
    int64_t m, n, k;
    hfp4_dtype a_scale; /* FP32, UE8M0 or UE8M0_PACKED (1 x 128) */
    hfp4_dtype b_scale; /* FP32 or UE8M0 (128 x 128) */
    hfp4_dtype d_dtype; /* BF16 or FP32 */
    int with_c;
    int64_t d_pad; /* D's ld = n + d_pad */
    uint64_t salt;
    int mn_major; /* scales MN-major: A's [k/128][align(m, 4)] as DeepGEMM's TMA-aligned layout (FP32 or
                   * UE8M0 bytes; packed words [k/512][align(m, 4)]), B's [k/128][n/128] */
    int64_t a_pad, b_pad; /* A's and B's row strides beyond k (bytes, multiples of 16; 0 in most cases) */
} fw_case;

/* rows x k bytes at src as rows of ld bytes (the rest of each row 0x7F, NaN in e4m3: never read) */
static uint8_t *fw_pad_rows(const uint8_t *src, int64_t rows, int64_t k, int64_t ld) {
    uint8_t *p = (uint8_t *)malloc(rows * ld);
    memset(p, 0x7F, rows * ld);
    for (int64_t r = 0; r < rows; r++) memcpy(p + r * ld, src + r * k, k);
    return p;
}

static void fw_run(const fw_case *c, const char *label) {
    const int64_t m = c->m, n = c->n, k = c->k, kg = k / 128, nb = (n + 127) / 128, ldd = n + c->d_pad;
    const int esz = c->d_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    hfp4_rng rng = hfp4_rng_make(c->salt);
    float *x = (float *)malloc(sizeof(float) * m * k), *w = (float *)malloc(sizeof(float) * n * k);
    for (int64_t i = 0; i < m * k; i++) x[i] = (float)(hfp4_rng_normal(&rng) * (1.0 + (i / k) % 7));
    for (int64_t i = 0; i < n * k; i++) w[i] = (float)(hfp4_rng_normal(&rng) * 0.05 * (1.0 + (i / k) % 5));
    /* A: per-token FP8, 1 x 128 scales */
    uint8_t *qa, *qb = (uint8_t *)malloc(n * k);
    hfp4_scales sa;
    const int64_t a_sf_units = fw_quantize_a(x, m, k, c->a_scale, c->mn_major, &qa, &sa);
    void *sa_host = (void *)sa.data;
    /* B: per-block FP8, 128 x 128 scales */
    void *sb_host = calloc(nb * kg, c->b_scale == HFP4_DTYPE_UE8M0 ? 1 : 4);
    hfp4_scales sb;
    memset(&sb, 0, sizeof sb);
    sb.data = sb_host;
    sb.dtype = c->b_scale;
    sb.gran_mn = 128;
    sb.gran_k = 128;
    sb.stride_mn = c->mn_major ? 1 : kg;
    sb.stride_k = c->mn_major ? nb : 1;
    CHECK_STATUS(hfp4_quantize_fp8_per_block(w, HFP4_DTYPE_FP32, n, k, k, c->b_scale == HFP4_DTYPE_UE8M0, qb, k, &sb),
                 HFP4_OK);
    float *cv = c->with_c ? fw_make_c(&rng, m * ldd, c->d_dtype) : NULL;
    const int64_t lda = k + c->a_pad, ldb = k + c->b_pad;
    if (c->a_pad) {
        uint8_t *t = fw_pad_rows(qa, m, k, lda);
        free(qa);
        qa = t;
    }
    if (c->b_pad) {
        uint8_t *t = fw_pad_rows(qb, n, k, ldb);
        free(qb);
        qb = t;
    }
    /* the reference: FP32 D (and C), host operands */
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = HFP4_GROUPING_NONE;
    p.m = m;
    p.n = n;
    p.k = k;
    p.num_groups = 1;
    p.a.data = qa;
    p.a.dtype = HFP4_DTYPE_FP8_E4M3;
    p.a.rows = m;
    p.a.cols = k;
    p.a.ld = lda;
    p.a.scales = sa;
    p.b.data = qb;
    p.b.dtype = HFP4_DTYPE_FP8_E4M3;
    p.b.rows = n;
    p.b.cols = k;
    p.b.ld = ldb;
    p.b.scales = sb;
    p.d.ld = ldd;
    p.d.c = cv;
    const fw_sizes z = {(size_t)m * lda, (size_t)n * ldb, (size_t)a_sf_units * fw_scale_esz(c->a_scale),
                        (size_t)nb * kg * fw_scale_esz(c->b_scale), (size_t)m * ldd * esz, 0};
    char what[160];
    snprintf(what, sizeof what, "%s (m=%lld n=%lld k=%lld)", label, (long long)m, (long long)n, (long long)k);
    fw_verify(what, p, &z, c->d_dtype, m, NULL, 0);
    free(x);
    free(w);
    free(qa);
    free(qb);
    free(sa_host);
    free(sb_host);
    free(cv);
}

TEST(gpu_fp8_weights_dense) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const fw_case cases[] = {
        /* m and n tails, 12 tiles; FP32 scales both sides, BF16 D */
        {300, 400, 1024, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 1, 0},
        /* UE8M0 scales, FP32 D with C, odd ld (single-column stores) */
        {256, 384, 2048, HFP4_DTYPE_UE8M0, HFP4_DTYPE_UE8M0, HFP4_DTYPE_FP32, 1, 3, 2, 0},
        /* packed activation scales (K-groups not a multiple of 4), BF16 D with C and padding */
        {1000, 1536, 768, HFP4_DTYPE_UE8M0_PACKED, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 1, 8, 3, 0},
        /* 180 tiles, more than the CTAs (the persistent loop, the 6-stage ring across tiles with 5
         * K-blocks each, a second and partial raster group: 18 token tiles) */
        {2304, 1280, 640, HFP4_DTYPE_FP32, HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 0, 0, 4, 0},
        /* MN-major scales (DeepGEMM's TMA-aligned activation layout, m not a multiple of 4) */
        {517, 640, 1152, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 6, 1},
        /* MN-major FP32 scales with m % 4 == 0: 7 token tiles of 192 rows or 10 of 128, the last of
         * 8 rows, with C (FP32 D) */
        {1160, 640, 1152, HFP4_DTYPE_FP32, HFP4_DTYPE_UE8M0, HFP4_DTYPE_FP32, 1, 0, 8, 1},
        /* the same layout with more tiles than CTAs (228 of 128 rows, 156 of 192): the stage ring
         * across tiles, a full tile before the last one of 4 rows */
        {2308, 1536, 640, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 9, 1},
        /* column tails inside an 8-column block, with C (the padding after n keeps the poison): BF16
         * n = 389, FP32 n = 390; and a BF16 ld of n + 2 */
        {200, 389, 512, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 1, 3, 10, 0},
        {200, 390, 512, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, 1, 2, 11, 0},
        {200, 512, 512, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 2, 12, 0},
        /* one row, one weight block: the smallest */
        {1, 128, 128, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, 0, 0, 5, 0},
        /* the same loop with the 192-row tile: 180 tiles of 192 x 128 (18 token tiles, two raster
         * groups), 5 K-blocks a tile against its 5 stages; m not a multiple of 192 */
        {3400, 1280, 640, HFP4_DTYPE_FP32, HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 0, 0, 7, 0},
        /* the 128-row tile's overlapped loop (two blocks a trip) at its ends: 2 K-blocks a tile (no
         * trip, then the last two) and 3 (one trip, then the last one), over more tiles than CTAs
         * (153 and 176 at 128 rows), so that the stage ring and its parity wrap at odd offsets */
        {2100, 1152, 256, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 13, 1},
        {2000, 1408, 384, HFP4_DTYPE_UE8M0, HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 1, 0, 14, 0},
        /* BF16 D without C, rows 16-byte aligned (ld 400) but n = 389 inside an 8-column block: the
         * register stores (the TMA store clips at 16 bytes: it wrote D's padding, v40); then the
         * TMA store with a 64-column box wholly past n (n = 328, ld 336) and rows past m */
        {333, 389, 512, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 11, 15, 0},
        {333, 328, 512, HFP4_DTYPE_FP32, HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 0, 8, 16, 0},
        /* the factor warps' own stepping (fw_factor_warp, v41) over more tiles than CTAs: one K-block
         * a tile (a warp's first stage in a later tile), packed scales K-major; 4 K-blocks a tile
         * with UE8M0 bytes MN-major; 6 with packed words MN-major */
        {2000, 1408, 128, HFP4_DTYPE_UE8M0_PACKED, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 17, 0},
        {2100, 1280, 512, HFP4_DTYPE_UE8M0, HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 0, 0, 18, 1},
        {2000, 1408, 768, HFP4_DTYPE_UE8M0_PACKED, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 19, 1},
    };
    /* every token tile forced (HFP4_SM90_FP8_WEIGHTS_TILE: 128, 192, 256: the opt-in tile of two
     * 64-row sub-blocks a warpgroup; the few-row kernel off, so the tile kernel also meets m = 1),
     * then the launcher's choice (192 for the cases with many token tiles, the few-row kernel for m =
     * 1); each with D's TMA store where D allows it (the default) and with the register stores
     * (HFP4_SM90_FP8_WEIGHTS_DTMA=0); the caller's settings are restored after */
    static const char *const names[3] = {"HFP4_SM90_FP8_WEIGHTS_TILE", "HFP4_SM90_FP8_WEIGHTS_DTMA",
                                         "HFP4_SM90_FP8_GEMV"};
    char saved[3][16] = {"", "", ""};
    int had[3];
    for (int e = 0; e < 3; e++) {
        const char *v = getenv(names[e]);
        had[e] = v != NULL;
        if (v) snprintf(saved[e], sizeof saved[e], "%s", v);
    }
    static const char *const tiles[] = {"128", "192", "256", "auto"}; /* (auto: the launcher's choice) */
    unsetenv("HFP4_SM90_FP8_GEMV_KW");
    for (unsigned t = 0; t < 4; t++) {
        if (t < 3) setenv(names[0], tiles[t], 1);
        else unsetenv(names[0]);
        if (t < 3) setenv(names[2], "0", 1);
        else unsetenv(names[2]);
        for (int dtma = 1; dtma >= 0; dtma--) {
            if (dtma) unsetenv(names[1]);
            else setenv(names[1], "0", 1);
            for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                char label[80];
                snprintf(label, sizeof label, "fp8 weights, tile %s, %s stores, case %u", tiles[t],
                         dtma ? "default" : "register", i);
                fw_run(&cases[i], label);
            }
        }
    }
    for (int e = 0; e < 3; e++) {
        if (had[e]) setenv(names[e], saved[e], 1);
        else unsetenv(names[e]);
    }
}

/* The few-row kernel (fp8_fp8_gemv.cu: dense, m <= 8, and m <= 16 below n = 8192): its row groups
 * of 16 weight rows with K split among 1, 2, 4 or 8 warps (each forced, then the launcher's choice),
 * its token sets of 8, every scale form, n tails inside a group (rows g + 8 partly live: n = 205)
 * and groups wholly past n, row strides beyond k; and the launcher's boundary (m = 12 at n = 8320:
 * the tile kernel) */
TEST(gpu_fp8_weights_gemv) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    static const fw_case cases[] = {
        /* one token, V4's 4096 x 2048: 16 K-blocks, two a warp */
        {1, 4096, 2048, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 21, 0},
        /* n = 200 (the last CTA half full), 9 K-blocks (one warp with two), UE8M0 both sides, FP32 D
         * with C and an odd ld */
        {3, 200, 1152, HFP4_DTYPE_UE8M0, HFP4_DTYPE_UE8M0, HFP4_DTYPE_FP32, 1, 3, 22, 0},
        /* 3 K-blocks (five warps without any), packed activation scales, BF16 D with C, n = 389 */
        {8, 389, 384, HFP4_DTYPE_UE8M0_PACKED, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 1, 8, 23, 0},
        /* two token sets, the second with one token; MN-major scales */
        {9, 640, 512, HFP4_DTYPE_FP32, HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 0, 0, 24, 1},
        /* K = 7168 (56 blocks, 7 a warp), FP32 D, ld n + 1 */
        {16, 1000, 7168, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, 0, 1, 25, 0},
        /* 13 tokens, one K-block (more warps than blocks), UE8M0 activation scales MN-major, C */
        {13, 128, 128, HFP4_DTYPE_UE8M0, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 1, 0, 26, 1},
        /* the largest m, V4's 7168 x 2048 */
        {16, 7168, 2048, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_BF16, 0, 0, 27, 0},
        /* packed words MN-major, 5 K-blocks (K-groups not a multiple of 4), n = 136, FP32 D with C */
        {15, 136, 640, HFP4_DTYPE_UE8M0_PACKED, HFP4_DTYPE_UE8M0, HFP4_DTYPE_FP32, 1, 0, 28, 1},
        /* a wide GEMV: 32768 x 1024 (8 K-blocks: one warp a group by the launcher's rule) */
        {1, 32768, 1024, HFP4_DTYPE_FP32, HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 0, 0, 29, 0},
        /* n = 205 (the last group's rows g + 8 live for g < 5 only), A's rows 16 bytes and B's 48
         * bytes longer than k, packed scales K-major over 3 words (k = 1408) */
        {5, 205, 1408, HFP4_DTYPE_UE8M0_PACKED, HFP4_DTYPE_UE8M0, HFP4_DTYPE_BF16, 1, 2, 30, 0, 16, 48},
        /* m = 12 at n = 8320: the launcher's tile kernel (the few-row one stops at n = 8192 for m > 8),
         * FP32 scales MN-major over 3 x 65 blocks, padded rows */
        {12, 8320, 384, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, 0, 0, 31, 1, 32, 16},
    };
    unsetenv("HFP4_SM90_FP8_GEMV");
    static const char *const kws[] = {"1", "2", "4", "8", "auto"};
    for (unsigned j = 0; j < 5; j++) {
        if (j < 4) setenv("HFP4_SM90_FP8_GEMV_KW", kws[j], 1);
        else unsetenv("HFP4_SM90_FP8_GEMV_KW");
        for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char label[80];
            snprintf(label, sizeof label, "fp8 weights, few rows, %s warps a row group, case %u", kws[j], i);
            fw_run(&cases[i], label);
        }
    }
}

TEST(gpu_fp8_weights_rejections) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    setenv("HFP4_SM90_FP8_WEIGHTS", "1", 1);
    /* what the path does not cover yet is UNSUPPORTED (callers fall back), named in the message;
     * hfp4_gemm_supported reads no operand */
    static uint8_t a[256 * 256], b[256 * 256];
    static float sfa[256 * 8], sfb[256 * 2];
    static uint16_t d[256 * 256];
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = HFP4_GROUPING_NONE;
    p.m = 256;
    p.n = 256;
    p.k = 256;
    p.num_groups = 1;
    p.a.data = a;
    p.a.dtype = HFP4_DTYPE_FP8_E4M3;
    p.a.rows = 256;
    p.a.cols = 256;
    p.a.ld = 256;
    p.a.scales.data = sfa;
    p.a.scales.dtype = HFP4_DTYPE_FP32;
    p.a.scales.gran_mn = 1;
    p.a.scales.gran_k = 128;
    p.a.scales.stride_mn = 2;
    p.a.scales.stride_k = 1;
    p.b = p.a;
    p.b.data = b;
    p.b.scales.data = sfb;
    p.b.scales.gran_mn = 128;
    p.b.scales.stride_mn = 2;
    p.d.data = d;
    p.d.dtype = HFP4_DTYPE_BF16;
    p.d.ld = 256;
    CHECK_STATUS(hfp4_gemm_supported(&p), HFP4_OK);
    p.b.scales.gran_mn = 1; /* per-row weight scales: valid, not covered yet */
    CHECK_REJECT(hfp4_gemm_supported(&p), HFP4_ERR_UNSUPPORTED, "128 x 128");
    p.b.scales.gran_mn = 128;
    p.a.scales.gran_k = 32; /* 1x32 activation scales */
    p.a.scales.stride_mn = 8;
    CHECK_REJECT(hfp4_gemm_supported(&p), HFP4_ERR_UNSUPPORTED, "1x128");
}
