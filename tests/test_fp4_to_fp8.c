/*
 * test_fp4_to_fp8.c - hfp4_fp4_weights_to_fp8 (the host form, the GPU form's reference): every
 * element's value kept exactly under the 128 x 128 block scales, for each scale storage, blocks
 * spanning up to 14 binades accepted and 15 refused, the refusals and argument errors, and the
 * FP8 form's GEMM equal to the FP4 form's (the CPU reference on both).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp4_to_fp8_fixture.h"
#include "harness.h"
#include "hfp4.h"

TEST(fp4_to_fp8_keeps_every_value) {
    static const hfp4_dtype dts[3] = {HFP4_DTYPE_UE8M0, HFP4_DTYPE_UE8M0_PACKED, HFP4_DTYPE_FP32};
    for (int v = 0; v < 6; v++) {
        /* n with a partial last block, padded rows of w and q; span 14 (the most FP8 holds) */
        const int64_t n = v < 3 ? 300 : 129, k = v < 3 ? 384 : 256, ld = k / 2 + 16 * (v % 2), ldq = k + 8 * (v % 2);
        f2f_weights f = f2f_make(n, k, ld, dts[v % 3], 14, 40 + v);
        const int fp32 = v % 2 == 0;
        uint8_t *q = (uint8_t *)malloc((size_t)(n * ldq));
        void *sf = calloc((size_t)(((n + 127) / 128) * (k / 128)), 4);
        hfp4_scales s = f2f_block_scales(sf, fp32, k / 128);
        CHECK_STATUS(hfp4_fp4_weights_to_fp8(&f.m, q, ldq, &s), HFP4_OK);
        CHECK_EQ_I64(f2f_mismatches(&f, q, ldq, sf, fp32, NULL), 0);
        /* no NaN is written; the sign bit is kept, -0 (code 8) included */
        int64_t nan = 0, sign_lost = 0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < k; c++) {
                const uint8_t code = (uint8_t)((f.w[r * ld + c / 2] >> (4 * (c & 1))) & 15);
                nan += (q[r * ldq + c] & 0x7F) == 0x7F;
                sign_lost += (q[r * ldq + c] >> 7) != (code >> 3);
            }
        CHECK_EQ_I64(nan, 0);
        CHECK_EQ_I64(sign_lost, 0);
        free(q);
        free(sf);
        f2f_free(&f);
    }
}

TEST(fp4_to_fp8_refuses_what_it_cannot_keep) {
    f2f_weights f = f2f_make(256, 256, 128, HFP4_DTYPE_UE8M0, 15, 50); /* every block spans 15 binades */
    uint8_t *q = (uint8_t *)malloc(256 * 256);
    float sf[4];
    hfp4_scales s = f2f_block_scales(sf, 1, 256 / 128);
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, q, 256, &s), HFP4_ERR_UNSUPPORTED, "block (0, 0)");
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, q, 256, &s), HFP4_ERR_UNSUPPORTED, "14 binades");
    f2f_free(&f);
    /* FP32 scales that are not powers of two */
    f = f2f_make(256, 256, 128, HFP4_DTYPE_FP32, 3, 51);
    ((float *)f.scales)[8 * 5 + 3] = 0.75f;
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, q, 256, &s), HFP4_ERR_UNSUPPORTED, "(row 5, K-group 3)");
    ((float *)f.scales)[8 * 5 + 3] = 0.0f;
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, q, 256, &s), HFP4_ERR_UNSUPPORTED, "power of two");
    f2f_free(&f);
    /* UE8M0 255 (NaN) */
    f = f2f_make(256, 256, 128, HFP4_DTYPE_UE8M0, 3, 52);
    ((uint8_t *)f.scales)[9] = 255;
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, q, 256, &s), HFP4_ERR_UNSUPPORTED, "NaN");
    f2f_free(&f);
    /* a block whose scale 2^(max - 6) falls below UE8M0's 2^-127: every exponent -125 */
    f = f2f_make(128, 128, 64, HFP4_DTYPE_UE8M0, 0, 57);
    memset(f.scales, 2, 128 * 4);
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, q, 128, &s), HFP4_ERR_UNSUPPORTED, "outside UE8M0's range");
    f2f_free(&f);
    /* k not a multiple of 128: UNSUPPORTED (a valid FP4 matrix the FP8 form has no blocks for) */
    f = f2f_make(128, 96, 48, HFP4_DTYPE_UE8M0, 3, 53);
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, q, 96, &s), HFP4_ERR_UNSUPPORTED, "k = 96");
    f2f_free(&f);
    free(q);
}

TEST(fp4_to_fp8_argument_errors) {
    f2f_weights f = f2f_make(128, 256, 128, HFP4_DTYPE_UE8M0, 3, 54);
    uint8_t *q = (uint8_t *)malloc(128 * 256);
    float sf[2];
    hfp4_scales s = f2f_block_scales(sf, 1, 256 / 128);
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(NULL, q, 256, &s), HFP4_ERR_INVALID_ARGUMENT, "w is NULL");
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, NULL, 256, &s), HFP4_ERR_INVALID_ARGUMENT, "q is NULL");
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, q, 256, NULL), HFP4_ERR_INVALID_ARGUMENT, "sf is NULL");
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, q, 255, &s), HFP4_ERR_INVALID_ARGUMENT, "ldq = 255");
    hfp4_matrix w = f.m;
    w.dtype = HFP4_DTYPE_FP8_E4M3;
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&w, q, 256, &s), HFP4_ERR_INVALID_ARGUMENT, "w->dtype");
    w = f.m;
    w.ld = 127;
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&w, q, 256, &s), HFP4_ERR_INVALID_ARGUMENT, "w->ld = 127");
    w = f.m;
    w.scales.gran_k = 128;
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&w, q, 256, &s), HFP4_ERR_INVALID_ARGUMENT, "w->scales");
    hfp4_scales bad = s;
    bad.gran_mn = 1;
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, q, 256, &bad), HFP4_ERR_INVALID_ARGUMENT, "sf");
    bad = s;
    bad.dtype = HFP4_DTYPE_UE8M0_PACKED;
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, q, 256, &bad), HFP4_ERR_INVALID_ARGUMENT, "sf");
    /* q over w's bytes */
    CHECK_REJECT(hfp4_fp4_weights_to_fp8(&f.m, f.w + 64, 256, &s), HFP4_ERR_INVALID_ARGUMENT, "overlaps");
    /* the GPU form checks the same, and wants its counter */
    CHECK_REJECT(hfp4_fp4_weights_to_fp8_gpu(&f.m, q, 255, &s, NULL, NULL), HFP4_ERR_INVALID_ARGUMENT, "ldq = 255");
    CHECK_REJECT(hfp4_fp4_weights_to_fp8_gpu(&f.m, q, 256, &s, NULL, NULL), HFP4_ERR_INVALID_ARGUMENT,
                 "inexact_blocks");
    CHECK_REJECT(hfp4_fp4_weights_to_fp8_gpu(&f.m, q, 256, &s, (int32_t *)(void *)(q + 64), NULL),
                 HFP4_ERR_INVALID_ARGUMENT, "overlaps q");
    free(q);
    f2f_free(&f);
}

TEST(fp4_to_fp8_gemm_equals_the_fp4_gemm) {
    /* the CPU reference on FP8 activations x the FP4 weights, and x their FP8 form: the same real
     * products, so the same D up to the order of the FP32 sums */
    const int64_t m = 37, n = 200, k = 512;
    f2f_weights f = f2f_make(n, k, k / 2, HFP4_DTYPE_UE8M0, 14, 55);
    f2f_gemm g = f2f_gemm_make(&f, m, 56);
    uint8_t *qb = (uint8_t *)malloc(n * k);
    float *sb = (float *)malloc(sizeof(float) * ((n + 127) / 128) * (k / 128));
    hfp4_scales sbs = f2f_block_scales(sb, 1, k / 128);
    CHECK_STATUS(hfp4_fp4_weights_to_fp8(&f.m, qb, k, &sbs), HFP4_OK);
    hfp4_gemm_problem p = g.p;
    float *d4 = (float *)malloc(sizeof(float) * m * n), *d8 = (float *)malloc(sizeof(float) * m * n);
    p.d.data = d4;
    CHECK_STATUS(hfp4_ref_gemm(&p, 1), HFP4_OK);
    p.b.data = qb;
    p.b.dtype = HFP4_DTYPE_FP8_E4M3;
    p.b.ld = k;
    p.b.scales = sbs;
    p.d.data = d8;
    CHECK_STATUS(hfp4_ref_gemm(&p, 1), HFP4_OK);
    int64_t bad = 0;
    for (int64_t i = 0; i < m * n; i++) bad += fabsf(d4[i] - d8[i]) > 1e-5f * (1.0f + fabsf(d4[i]));
    CHECK_EQ_I64(bad, 0);
    free(qb), free(sb), free(d4), free(d8);
    f2f_gemm_free(&g);
    f2f_free(&f);
}
