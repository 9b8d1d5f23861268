/*
 * fp4_to_fp8_fixture.h - random FP4 weights for the tests of hfp4_fp4_weights_to_fp8 (host and
 * GPU): every e2m1 code, and power-of-two (1, 32) scales whose exponents span `span` binades in
 * each 128 x 128 block (the conversion is exact up to 14), stored as the scale dtype asks.
 */
#pragma once
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hfp4.h"

typedef struct f2f_weights {
    int64_t n, k, ld;   /* ld: bytes between rows (>= k / 2) */
    uint8_t *w;         /* [n][ld] packed codes */
    void *scales;       /* (1, 32) scales, K-major: [n][k / 32] (packed: [n][words]) */
    hfp4_matrix m;      /* describing w and scales (host pointers) */
    int32_t *exps;      /* [n][k / 32] the scales' exponents */
} f2f_weights;

/* Random weights: the exponent of (row, group) is base - u with u uniform in [0, span] per block
 * (one group of each block at base, one at base - span, so the span is exact), base varying per
 * block in [-20, 4]. */
static inline f2f_weights f2f_make(int64_t n, int64_t k, int64_t ld, hfp4_dtype scale_dtype, int span, uint64_t salt) {
    f2f_weights f;
    memset(&f, 0, sizeof f);
    f.n = n, f.k = k, f.ld = ld;
    hfp4_rng rng = hfp4_rng_make(salt);
    f.w = (uint8_t *)malloc((size_t)(n * ld));
    for (int64_t i = 0; i < n * ld; i++) f.w[i] = (uint8_t)(hfp4_rng_next(&rng) >> 24);
    const int64_t kg = k / 32, words = (kg + 3) / 4;
    f.exps = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n * kg));
    for (int64_t bi = 0; bi < (n + 127) / 128; bi++)
        for (int64_t bj = 0; bj < (kg + 3) / 4; bj++) {
            const int32_t base = (int32_t)(hfp4_rng_next(&rng) % 25) - 20;
            for (int64_t r = 128 * bi; r < n && r < 128 * bi + 128; r++)
                for (int64_t j = 4 * bj; j < kg && j < 4 * bj + 4; j++)
                    f.exps[r * kg + j] = base - (int32_t)(hfp4_rng_next(&rng) % (uint64_t)(span + 1));
            f.exps[128 * bi * kg + 4 * bj] = base;
            const int64_t last = (n < 128 * bi + 128 ? n : 128 * bi + 128) - 1;
            f.exps[last * kg + 4 * bj + (kg - 4 * bj > 1 ? 1 : 0)] = base - span;
        }
    f.m.data = f.w;
    f.m.dtype = HFP4_DTYPE_FP4_E2M1;
    f.m.rows = n;
    f.m.cols = k;
    f.m.ld = ld;
    f.m.scales.dtype = scale_dtype;
    f.m.scales.gran_mn = 1;
    f.m.scales.gran_k = 32;
    if (scale_dtype == HFP4_DTYPE_UE8M0_PACKED) {
        uint32_t *s = (uint32_t *)calloc((size_t)(n * words), 4);
        for (int64_t r = 0; r < n; r++)
            for (int64_t j = 0; j < kg; j++) s[r * words + j / 4] |= (uint32_t)(f.exps[r * kg + j] + 127) << (8 * (j % 4));
        f.scales = s;
        f.m.scales.stride_mn = words;
    } else if (scale_dtype == HFP4_DTYPE_UE8M0) {
        uint8_t *s = (uint8_t *)malloc((size_t)(n * kg));
        for (int64_t i = 0; i < n * kg; i++) s[i] = (uint8_t)(f.exps[i] + 127);
        f.scales = s;
        f.m.scales.stride_mn = kg;
    } else {
        float *s = (float *)malloc(sizeof(float) * (size_t)(n * kg));
        for (int64_t i = 0; i < n * kg; i++) s[i] = ldexpf(1.0f, f.exps[i]);
        f.scales = s;
        f.m.scales.stride_mn = kg;
    }
    f.m.scales.stride_k = 1;
    f.m.scales.data = f.scales;
    return f;
}

static inline void f2f_free(f2f_weights *f) {
    free(f->w);
    free(f->scales);
    free(f->exps);
}

/* Block scales sf for the conversion: [n / 128] rows of `stride` entries, K-major (FP32 or UE8M0) */
static inline hfp4_scales f2f_block_scales(void *data, int fp32, int64_t stride) {
    hfp4_scales s;
    memset(&s, 0, sizeof s);
    s.data = data;
    s.dtype = fp32 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_UE8M0;
    s.gran_mn = 128;
    s.gran_k = 128;
    s.stride_mn = stride;
    s.stride_k = 1;
    return s;
}

/* The value of w's element (r, c) */
static inline double f2f_value(const f2f_weights *f, int64_t r, int64_t c) {
    const uint8_t code = (uint8_t)((f->w[r * f->ld + c / 2] >> (4 * (c & 1))) & 15);
    return ldexp((double)hfp4_fp4_decode(code), f->exps[r * (f->k / 32) + c / 32]);
}

/* The count of q's elements (row stride ldq) under block scales sf (FP32 or UE8M0, K-major
 * [n / 128][k / 128]) that differ from w's values, skipping blocks where skip(bi, bj) is set */
static inline int64_t f2f_mismatches(const f2f_weights *f, const uint8_t *q, int64_t ldq, const void *sf, int sf_fp32,
                                     const uint8_t *skip_block) {
    const int64_t bk = f->k / 128;
    int64_t bad = 0;
    for (int64_t r = 0; r < f->n; r++)
        for (int64_t c = 0; c < f->k; c++) {
            const int64_t b = (r / 128) * bk + c / 128;
            if (skip_block && skip_block[b]) continue;
            const double s = sf_fp32 ? (double)((const float *)sf)[b] : ldexp(1.0, (int)((const uint8_t *)sf)[b] - 127);
            const double got = (double)hfp4_fp8_decode(q[r * ldq + c]) * s;
            if (got != f2f_value(f, r, c)) bad++;
        }
    return bad;
}

/* Random FP8 activations [m, k] (1 x 128 FP32 scales, the library's own cast) against f's FP4
 * weights: the GEMM problem (dense, FP32 D [m, n] unset: the caller points d.data) on host memory */
typedef struct f2f_gemm {
    uint8_t *qa;
    float *sa;
    hfp4_gemm_problem p;
} f2f_gemm;

static inline f2f_gemm f2f_gemm_make(const f2f_weights *f, int64_t m, uint64_t salt) {
    f2f_gemm g;
    memset(&g, 0, sizeof g);
    const int64_t k = f->k;
    hfp4_rng rng = hfp4_rng_make(salt);
    float *x = (float *)malloc(sizeof(float) * (size_t)(m * k));
    for (int64_t i = 0; i < m * k; i++) x[i] = (float)hfp4_rng_normal(&rng);
    g.qa = (uint8_t *)malloc((size_t)(m * k));
    g.sa = (float *)malloc(sizeof(float) * (size_t)(m * (k / 128)));
    hfp4_scales sas;
    memset(&sas, 0, sizeof sas);
    sas.data = g.sa;
    sas.dtype = HFP4_DTYPE_FP32;
    sas.gran_mn = 1;
    sas.gran_k = 128;
    sas.stride_mn = k / 128;
    sas.stride_k = 1;
    CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, m, k, k, 0, g.qa, k, &sas), HFP4_OK);
    free(x);
    g.p.grouping = HFP4_GROUPING_NONE;
    g.p.m = m, g.p.n = f->n, g.p.k = k, g.p.num_groups = 1;
    g.p.a.data = g.qa;
    g.p.a.dtype = HFP4_DTYPE_FP8_E4M3;
    g.p.a.rows = m, g.p.a.cols = k, g.p.a.ld = k;
    g.p.a.scales = sas;
    g.p.b = f->m;
    g.p.d.dtype = HFP4_DTYPE_FP32;
    g.p.d.ld = f->n;
    return g;
}

static inline void f2f_gemm_free(f2f_gemm *g) {
    free(g->qa);
    free(g->sa);
}
