/*
 * fp4_to_fp8.c - FP4 weights as FP8 under 128 x 128 block scales, exactly (hfp4_fp4_weights_to_fp8,
 * include/hfp4.h): the host form, which is the reference of the GPU form (fp4_to_fp8_gpu.cu), and
 * the argument checks both share.
 * Why: the FP8 x FP8 GEMM (src/kernels/sm90/fp8_fp8_gemm.cu) runs dense shapes at cuBLASLt FP8's
 * rate, where the FP4 kernel's in-register conversion caps it near 0.7x (docs/FP8_ROUTE.md); the
 * conversion moves 1.5 bytes a weight, ~100 MB at 8192^2. Exactness decides, block by block, from
 * the scales alone: a block whose scales span more than HFP4_FP8_BLOCK_SPAN binades is refused,
 * never rounded.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fp4_to_fp8.h"
#include "scale_access.h"

hfp4_status hfp4__fp4_to_fp8_check(const char *fn, const hfp4_matrix *w, const uint8_t *q, int64_t ldq,
                                   const hfp4_scales *sf) {
    HFP4_CHECK_ARG(w != NULL, "%s: w is NULL", fn);
    HFP4_CHECK_ARG(q != NULL, "%s: q is NULL", fn);
    HFP4_CHECK_ARG(sf != NULL, "%s: sf is NULL", fn);
    HFP4_CHECK_ARG(w->data != NULL, "%s: w->data is NULL", fn);
    HFP4_CHECK_ARG(w->dtype == HFP4_DTYPE_FP4_E2M1,
                   "%s: w->dtype = %s (%d) must be fp4_e2m1 (the checkpoint's packed form; repacked weights are "
                   "not converted)",
                   fn, hfp4_dtype_name(w->dtype), (int)w->dtype);
    const int64_t n = w->rows, k = w->cols;
    HFP4_CHECK_ARG(n >= 1, "%s: w->rows (n) = %lld must be >= 1", fn, (long long)n);
    HFP4_CHECK_ARG(k >= 2 && k % 2 == 0, "%s: w->cols (k) = %lld must be even and >= 2", fn, (long long)k);
    HFP4_CHECK_ARG(w->ld >= k / 2, "%s: w->ld = %lld bytes must be >= k / 2 = %lld", fn, (long long)w->ld,
                   (long long)(k / 2));
    HFP4_CHECK_ARG(ldq >= k, "%s: ldq = %lld bytes must be >= k = %lld", fn, (long long)ldq, (long long)k);
    HFP4_CHECK_ARG(hfp4__extent_ok(n, w->ld, k / 2), "%s: n = %lld rows of w->ld = %lld: w's last byte lies past 2^60",
                   fn, (long long)n, (long long)w->ld);
    HFP4_CHECK_ARG(hfp4__extent_ok(n, ldq, k), "%s: n = %lld rows of ldq = %lld: q's last byte lies past 2^60", fn,
                   (long long)n, (long long)ldq);
    HFP4_TRY(hfp4__check_scales(fn, "w->scales", &w->scales,
                                (1u << HFP4_DTYPE_FP32) | (1u << HFP4_DTYPE_UE8M0) | (1u << HFP4_DTYPE_UE8M0_PACKED), 1,
                                n, k, 1, 32));
    HFP4_TRY(hfp4__check_scales(fn, "sf", sf, (1u << HFP4_DTYPE_FP32) | (1u << HFP4_DTYPE_UE8M0), 1, n, k, 128, 128));
    /* q and sf are written: neither may share a byte with w, its scales, or each other */
    const int64_t w_bytes = (n - 1) * w->ld + k / 2, q_bytes = (n - 1) * ldq + k;
    const int64_t ws_bytes = hfp4__scales_bytes(&w->scales, 1, n, k), sf_bytes = hfp4__scales_bytes(sf, 1, n, k);
    HFP4_CHECK_ARG(!hfp4__ranges_overlap(q, q_bytes, w->data, w_bytes) &&
                       !hfp4__ranges_overlap(q, q_bytes, w->scales.data, ws_bytes) &&
                       !hfp4__ranges_overlap(q, q_bytes, sf->data, sf_bytes),
                   "%s: q = %p (%lld bytes) overlaps w, w->scales or sf", fn, (const void *)q, (long long)q_bytes);
    HFP4_CHECK_ARG(!hfp4__ranges_overlap(sf->data, sf_bytes, w->data, w_bytes) &&
                       !hfp4__ranges_overlap(sf->data, sf_bytes, w->scales.data, ws_bytes),
                   "%s: sf.data = %p (%lld bytes) overlaps w or w->scales", fn, sf->data, (long long)sf_bytes);
    HFP4_REQUIRE(k % 128 == 0,
                 "%s: k = %lld is not a multiple of 128: the FP8 form's 128 x 128 blocks need whole K-blocks (keep "
                 "the FP4 GEMM)",
                 fn, (long long)k);
    return HFP4_OK;
}

/* The exponent e of w's scale (row, K-group j) = 2^e, or 0 with a message if it is not a power of two */
static int scale_exponent(const char *fn, const hfp4_scales *s, int64_t row, int64_t j, int32_t *e) {
    if (s->dtype != HFP4_DTYPE_FP32) {
        const uint8_t b = hfp4__scale_get_ue8m0(s, 0, row, j);
        if (b == 255) {
            hfp4__fail(HFP4_ERR_UNSUPPORTED, "%s: w->scales (row %lld, K-group %lld) is UE8M0 255 (NaN)", fn,
                       (long long)row, (long long)j);
            return 0;
        }
        *e = (int32_t)b - 127;
        return 1;
    }
    const float v = hfp4__scale_get(s, 0, row, j);
    int ex = 0;
    const float m = frexpf(v, &ex); /* v = m 2^ex, 0.5 <= m < 1 */
    if (!(v > 0.0f) || !isnormal(v) || m != 0.5f) {
        hfp4__fail(HFP4_ERR_UNSUPPORTED,
                   "%s: w->scales (row %lld, K-group %lld) = %g is not a positive normal power of two (the FP8 form "
                   "folds exponents only; keep the FP4 GEMM)",
                   fn, (long long)row, (long long)j, (double)v);
        return 0;
    }
    *e = ex - 1;
    return 1;
}

typedef struct convert_job {
    const hfp4_matrix *w;
    uint8_t *q;
    int64_t ldq;
    const hfp4_scales *sf;
    const int32_t *base; /* each block's 2^base scale, row-major over [n/128][k/128] blocks */
    int64_t blocks_k;
} convert_job;

/* Block index's values and scale (its base checked already) */
static void convert_block(void *arg, int64_t index) {
    const convert_job *jb = (const convert_job *)arg;
    const hfp4_matrix *w = jb->w;
    const int64_t bi = index / jb->blocks_k, bj = index % jb->blocks_k;
    const int32_t base = jb->base[index];
    hfp4__scale_put(jb->sf, 0, bi, bj, ldexpf(1.0f, base), (uint8_t)(base + 127));
    const int64_t row_end = (bi + 1) * 128 < w->rows ? (bi + 1) * 128 : w->rows;
    for (int64_t r = bi * 128; r < row_end; r++) {
        const uint8_t *src = (const uint8_t *)w->data + r * w->ld;
        uint8_t *dst = jb->q + r * jb->ldq;
        for (int64_t jg = 4 * bj; jg < 4 * bj + 4; jg++) {
            int32_t e = 0;
            (void)scale_exponent("", &w->scales, r, jg, &e); /* (checked: a power of two) */
            const float step = ldexpf(1.0f, e - base);
            for (int64_t c = 32 * jg; c < 32 * jg + 32; c++) {
                const uint8_t code = (uint8_t)((src[c / 2] >> (4 * (c & 1))) & 15);
                /* the sign bit kept as is: code 8 (-0) gives e4m3 -0 (0x80), the same value */
                dst[c] = (uint8_t)(((code & 8u) << 4) | hfp4_fp8_encode(hfp4_fp4_decode(code & 7u) * step));
            }
        }
    }
}

hfp4_status hfp4_fp4_weights_to_fp8(const hfp4_matrix *w, uint8_t *q, int64_t ldq, const hfp4_scales *sf) {
    const char *fn = "hfp4_fp4_weights_to_fp8";
    HFP4_TRY(hfp4__fp4_to_fp8_check(fn, w, q, ldq, sf));
    const int64_t blocks_n = hfp4__ceil_div(w->rows, 128), blocks_k = w->cols / 128;
    HFP4_CHECK_ARG(blocks_n * blocks_k <= ((int64_t)1 << 40), "%s: %lld x %lld blocks", fn, (long long)blocks_n,
                   (long long)blocks_k);
    int32_t *base = (int32_t *)malloc(sizeof(int32_t) * (size_t)(blocks_n * blocks_k));
    if (base == NULL) return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "%s: no host memory for %lld block exponents", fn,
                                        (long long)(blocks_n * blocks_k));
    /* first every block's exponent range (so that a refusal writes nothing), then the values */
    for (int64_t bi = 0; bi < blocks_n; bi++) {
        const int64_t row_end = (bi + 1) * 128 < w->rows ? (bi + 1) * 128 : w->rows;
        for (int64_t bj = 0; bj < blocks_k; bj++) {
            int32_t lo = INT32_MAX, hi = INT32_MIN;
            for (int64_t r = bi * 128; r < row_end; r++)
                for (int64_t jg = 4 * bj; jg < 4 * bj + 4; jg++) {
                    int32_t e = 0;
                    if (!scale_exponent(fn, &w->scales, r, jg, &e)) {
                        free(base);
                        return HFP4_ERR_UNSUPPORTED;
                    }
                    lo = e < lo ? e : lo;
                    hi = e > hi ? e : hi;
                }
            const int32_t b = hi - HFP4_FP8_BLOCK_TOP;
            if (HFP4_FP8_BLOCK_REFUSED(hi - lo, b)) {
                free(base);
                return hfp4__fail(HFP4_ERR_UNSUPPORTED,
                                  "%s: block (%lld, %lld) (rows %lld.., K %lld..) has scales from 2^%d to 2^%d: "
                                  "%s (keep the FP4 GEMM, exact for any scales)",
                                  fn, (long long)bi, (long long)bj, (long long)(bi * 128), (long long)(bj * 128),
                                  (int)lo, (int)hi,
                                  hi - lo > HFP4_FP8_BLOCK_SPAN ? "more than the 14 binades FP8 holds exactly"
                                                                : "its scale 2^(max - 6) is outside UE8M0's range");
            }
            base[bi * blocks_k + bj] = b;
        }
    }
    convert_job job = {w, q, ldq, sf, base, blocks_k};
    const int64_t items = blocks_n * blocks_k;
    const int threads = w->rows * w->cols >= ((int64_t)1 << 20) ? hfp4__thread_count(0, items) : 1;
    (void)hfp4__parallel_for(threads, items, convert_block, &job); /* (a failed thread start runs inline) */
    free(base);
    return HFP4_OK;
}

hfp4_status hfp4_fp4_weights_to_fp8_gpu(const hfp4_matrix *w, uint8_t *q, int64_t ldq, const hfp4_scales *sf,
                                        int32_t *inexact_blocks, hfp4_stream stream) {
    const char *fn = "hfp4_fp4_weights_to_fp8_gpu";
    HFP4_TRY(hfp4__fp4_to_fp8_check(fn, w, q, ldq, sf));
    HFP4_CHECK_ARG(inexact_blocks != NULL, "%s: inexact_blocks is NULL (the count of refused blocks goes there)", fn);
    HFP4_CHECK_ARG((uintptr_t)inexact_blocks % 4 == 0, "%s: inexact_blocks = %p must be 4-byte aligned", fn,
                   (void *)inexact_blocks);
    /* (the counter is reset and counted while q and sf are written: it may share no byte with them
     * or with what is read) */
    const int64_t n = w->rows, k = w->cols;
    HFP4_CHECK_ARG(!hfp4__ranges_overlap(inexact_blocks, 4, q, (n - 1) * ldq + k) &&
                       !hfp4__ranges_overlap(inexact_blocks, 4, sf->data, hfp4__scales_bytes(sf, 1, n, k)) &&
                       !hfp4__ranges_overlap(inexact_blocks, 4, w->data, (n - 1) * w->ld + k / 2) &&
                       !hfp4__ranges_overlap(inexact_blocks, 4, w->scales.data,
                                             hfp4__scales_bytes(&w->scales, 1, n, k)),
                   "%s: inexact_blocks = %p overlaps q, sf, w or w->scales", fn, (void *)inexact_blocks);
    return hfp4__fp4_to_fp8_launch(fn, w, q, ldq, sf, inexact_blocks, stream);
}
