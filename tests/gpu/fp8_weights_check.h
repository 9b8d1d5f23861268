/*
 * fp8_weights_check.h - what the FP8-weight GEMM tests share (test_fp8_weights_sm90.cu, dense;
 * test_fp8_weights_grouped_sm90.cu, m-grouped contiguous and masked): C uploaded in D's dtype, and D checked
 * element by element against the reference with docs/TESTING.md's bound (fp8_weights_bound.h); D's padding columns (ld > n) and the 64 guard rows past m
 * must keep the 0xFF poison; the relative Frobenius error at most 2e-3 (BF16) or 5e-4 (FP32).
 */
#ifndef HFP4_TEST_FP8_WEIGHTS_CHECK_H
#define HFP4_TEST_FP8_WEIGHTS_CHECK_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_weights_bound.h"
#include "harness.h"
#include "hfp4.h"

#define FW_GUARD_ROWS 64 /* poisoned rows of D past m: nothing may land there */

/* C's m x ldd values (FP32 or BF16-exact) on the device in D's dtype (esz 4: FP32, 2: BF16) */
static void *fw_upload_c(const float *cv, int64_t count, int esz) {
    uint8_t *tmp = (uint8_t *)malloc((size_t)count * esz);
    for (int64_t i = 0; i < count; i++) {
        if (esz == 4) memcpy(tmp + 4 * i, &cv[i], 4);
        else ((uint16_t *)tmp)[i] = hfp4_bf16_encode(cv[i]);
    }
    void *dc = NULL;
    CHECK(cudaMalloc(&dc, (size_t)count * esz) == cudaSuccess);
    cudaMemcpy(dc, tmp, (size_t)count * esz, cudaMemcpyHostToDevice);
    free(tmp);
    return dc;
}

/* The bytes of one activation-scale unit of dtype s (UE8M0 bytes; FP32 floats and packed words: 4) */
static inline int fw_scale_esz(hfp4_dtype s) { return s == HFP4_DTYPE_UE8M0 ? 1 : 4; }

/* An activation row's scale units along K (1 x 128 scales; packed words hold 4 K-groups) */
static inline int64_t fw_a_scale_units(hfp4_dtype s, int64_t k) {
    return s == HFP4_DTYPE_UE8M0_PACKED ? (k / 128 + 3) / 4 : k / 128;
}

/* x [rows, k] quantized per token with 1 x 128 scales of dtype a_scale: *qa malloc'ed [rows][k], sa's
 * data calloc'ed, MN-major [k units][align(rows, 4)] or K-major [rows][k units]. Returns the scales'
 * units. */
static inline int64_t fw_quantize_a(const float *x, int64_t rows, int64_t k, hfp4_dtype a_scale, int mn_major,
                                    uint8_t **qa, hfp4_scales *sa) {
    const int64_t units = fw_a_scale_units(a_scale, k), rows4 = (rows + 3) & ~(int64_t)3;
    const int64_t total = mn_major ? units * rows4 : rows * units;
    *qa = (uint8_t *)malloc(rows * k);
    memset(sa, 0, sizeof *sa);
    sa->data = calloc(total, fw_scale_esz(a_scale));
    sa->dtype = a_scale;
    sa->gran_mn = 1;
    sa->gran_k = 128;
    sa->stride_mn = mn_major ? 1 : units;
    sa->stride_k = mn_major ? rows4 : 1;
    CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, rows, k, k, a_scale != HFP4_DTYPE_FP32, *qa, k, sa),
                 HFP4_OK);
    return total;
}

/* Row r of A (k bytes a row) and its scales NaN (e4m3 0x7F; scale bytes and words 0xFF, NaN as
 * UE8M0): what rows no result may read hold */
static inline void fw_poison_a_row(uint8_t *qa, int64_t k, const hfp4_scales *sa, int64_t r) {
    const int esz = fw_scale_esz(sa->dtype);
    memset(qa + r * k, 0x7F, k);
    for (int64_t j = 0; j < fw_a_scale_units(sa->dtype, k); j++) {
        const int64_t u = r * sa->stride_mn + j * sa->stride_k;
        if (sa->dtype == HFP4_DTYPE_FP32) ((float *)sa->data)[u] = NAN;
        else memset((uint8_t *)sa->data + u * esz, 0xFF, esz);
    }
}

/* G experts of n x k FP8 weights from rng (~N(0, 0.05) times 1..5 by row and expert), each under
 * 128 x 128 block scales ([G][nb][kg], K-major, b_scale FP32 or UE8M0), into b (data, scales and
 * strides; qb and the scales malloc'ed, the caller frees b->data and b->scales.data) */
static inline void fw_make_experts(hfp4_rng *rng, int32_t G, int64_t n, int64_t k, hfp4_dtype b_scale, hfp4_matrix *b) {
    const int64_t kg = k / 128, nb = (n + 127) / 128;
    const int sb_esz = b_scale == HFP4_DTYPE_UE8M0 ? 1 : 4;
    float *w = (float *)malloc(sizeof(float) * n * k);
    uint8_t *qb = (uint8_t *)malloc((size_t)G * n * k);
    uint8_t *sb = (uint8_t *)calloc((size_t)G * nb * kg, sb_esz);
    for (int32_t g = 0; g < G; g++) {
        for (int64_t i = 0; i < n * k; i++) w[i] = (float)(hfp4_rng_normal(rng) * 0.05 * (1.0 + (i / k + g) % 5));
        hfp4_scales sg;
        memset(&sg, 0, sizeof sg);
        sg.data = sb + (size_t)g * nb * kg * sb_esz;
        sg.dtype = b_scale;
        sg.gran_mn = 128;
        sg.gran_k = 128;
        sg.stride_mn = kg;
        sg.stride_k = 1;
        CHECK_STATUS(hfp4_quantize_fp8_per_block(w, HFP4_DTYPE_FP32, n, k, k, b_scale == HFP4_DTYPE_UE8M0,
                                                 qb + (size_t)g * n * k, k, &sg),
                     HFP4_OK);
    }
    free(w);
    memset(b, 0, sizeof *b);
    b->data = qb;
    b->dtype = HFP4_DTYPE_FP8_E4M3;
    b->rows = n;
    b->cols = k;
    b->ld = k;
    b->stride_group = n * k;
    b->scales.data = sb;
    b->scales.dtype = b_scale;
    b->scales.gran_mn = 128;
    b->scales.gran_k = 128;
    b->scales.stride_mn = kg;
    b->scales.stride_k = 1;
    b->scales.stride_group = nb * kg;
}

/* C: count values from rng that D's dtype holds exactly (the FP32 reference adds the same numbers);
 * malloc'ed */
static inline float *fw_make_c(hfp4_rng *rng, int64_t count, hfp4_dtype d_dtype) {
    float *cv = (float *)malloc(sizeof(float) * count);
    for (int64_t i = 0; i < count; i++) {
        const float v = (float)hfp4_rng_normal(rng);
        cv[i] = d_dtype == HFP4_DTYPE_FP32 ? v : hfp4_bf16_decode(hfp4_bf16_encode(v));
    }
    return cv;
}

/* The bytes of the host problem's operands as the device run uploads them (layout: int32 entries,
 * 0 when none; d: D's elements' bytes, without the guard rows) */
typedef struct fw_sizes {
    size_t a, b, sa, sb, d, layout;
} fw_sizes;

/* Runs the host problem p (the reference's: FP32 D there) on the device with D in d_dtype: A, B,
 * their scales and the layout uploaded, D and FW_GUARD_ROWS guard rows of p->d.ld elements poisoned
 * (0xFF) first, C (c_count values cv, when p->d.c) in D's dtype. hfp4_gemm must return HFP4_OK.
 * Returns D and the guard rows as copied back (malloc'ed). */
static uint8_t *fw_run_on_device(const char *label, const hfp4_gemm_problem *p, const fw_sizes *z, hfp4_dtype d_dtype,
                                 const float *cv, int64_t c_count) {
    const int esz = d_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    const size_t guard = (size_t)FW_GUARD_ROWS * p->d.ld * esz;
    void *da, *db, *dsa, *dsb, *dd, *dc = NULL, *dl = NULL;
    CHECK(cudaMalloc(&da, z->a) == cudaSuccess && cudaMalloc(&db, z->b) == cudaSuccess &&
          cudaMalloc(&dsa, z->sa) == cudaSuccess && cudaMalloc(&dsb, z->sb) == cudaSuccess &&
          cudaMalloc(&dd, z->d + guard) == cudaSuccess &&
          (z->layout == 0 || cudaMalloc(&dl, sizeof(int32_t) * z->layout) == cudaSuccess));
    cudaMemcpy(da, p->a.data, z->a, cudaMemcpyHostToDevice);
    cudaMemcpy(db, p->b.data, z->b, cudaMemcpyHostToDevice);
    cudaMemcpy(dsa, p->a.scales.data, z->sa, cudaMemcpyHostToDevice);
    cudaMemcpy(dsb, p->b.scales.data, z->sb, cudaMemcpyHostToDevice);
    if (dl) cudaMemcpy(dl, p->layout, sizeof(int32_t) * z->layout, cudaMemcpyHostToDevice);
    cudaMemset(dd, 0xFF, z->d + guard); /* NaN in BF16 and FP32 */
    if (p->d.c) dc = fw_upload_c(cv, c_count, esz);
    hfp4_gemm_problem pd = *p;
    pd.layout = (const int32_t *)dl;
    pd.a.data = da;
    pd.a.scales.data = dsa;
    pd.b.data = db;
    pd.b.scales.data = dsb;
    pd.d.data = dd;
    pd.d.dtype = d_dtype;
    pd.d.c = dc;
    CHECK_STATUS(hfp4_gemm(&pd, NULL), HFP4_OK);
    CHECK_MSG(cudaDeviceSynchronize() == cudaSuccess, "%s: %s", label, cudaGetErrorString(cudaGetLastError()));
    uint8_t *out = (uint8_t *)malloc(z->d + guard);
    cudaMemcpy(out, dd, z->d + guard, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dsa);
    cudaFree(dsb);
    cudaFree(dd);
    if (dl) cudaFree(dl);
    if (dc) cudaFree(dc);
    return out;
}

/* The FP8-weight kernel's comparison switches for the runs that follow (read at each call): dtma 1
 * the TMA store of D where D allows (the default), 0 the register stores; skip 1 / 0 the grouped
 * forms' kernel that skips idle warpgroups or the one that computes them all, -1 the launcher's
 * choice (the plan's skip_idle, sm90_fp8_weights_plan.c) */
static inline void fw_set_modes(int dtma, int skip) {
    if (dtma) unsetenv("HFP4_SM90_FP8_WEIGHTS_DTMA");
    else setenv("HFP4_SM90_FP8_WEIGHTS_DTMA", "0", 1);
    if (skip < 0) unsetenv("HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE");
    else setenv("HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE", skip ? "1" : "0", 1);
}

/* The bound's sum_k |a_k b_k| for each element of the host reference problem p (FP8 A and B of
 * a_bytes and b_bytes, D d_elems elements: m x ld, or masked G x stride_group): the reference on the
 * operands with their sign bits cleared (the scales are positive), without C. A malloc'ed FP32 array
 * of d_elems (elements the reference does not write: 0). */
static float *fw_sum_abs_products(const hfp4_gemm_problem *p, int64_t a_bytes, int64_t b_bytes, int64_t d_elems) {
    float *l1 = (float *)calloc((size_t)d_elems, sizeof(float));
    CHECK_STATUS(fw_abs_products(p, a_bytes, b_bytes, l1), HFP4_OK);
    return l1;
}

/* D's m x ldd elements and FW_GUARD_ROWS guard rows as copied back (`out`) against the FP32
 * reference `ref` and the bound's sum_k |a_k b_k| `l1`. layout (NULL when dense): the expert of each
 * row, -1 for padding rows, whose elements must be exactly +0 unless pad_any (then unchecked), -2
 * for rows that must not be written (masked: past masked_m; they keep the 0xFF poison). */
static void fw_check_d(const char *label, const uint8_t *out, int64_t m, int64_t n, int64_t ldd, int esz,
                       const float *ref, const float *l1, const int32_t *layout, int pad_any) {
    const size_t d_bytes = (size_t)m * ldd * esz, guard = (size_t)FW_GUARD_ROWS * ldd * esz;
    int64_t guard_lost = 0;
    for (size_t i = d_bytes; i < d_bytes + guard; i++) guard_lost += out[i] != 0xFF;
    double ss = 0.0, es = 0.0;
    for (int64_t i = 0; i < m * ldd; i++)
        if (i % ldd < n && !(layout && layout[i / ldd] < 0)) ss += (double)ref[i] * ref[i];
    const double rms = sqrt(ss / (double)(m * n));
    int64_t bad = 0, poison_lost = 0, pad_bad = 0;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < ldd; j++) {
            const int64_t e = i * ldd + j;
            const double got = esz == 4 ? (double)((const float *)out)[e] : (double)hfp4_bf16_decode(((const uint16_t *)out)[e]);
            if (j >= n || (layout && layout[i] == -2)) {
                poison_lost += !isnan(got);
                continue;
            }
            if (layout && layout[i] < 0) { /* a padding row: +0 exactly (no C), unless it may hold anything */
                if (!pad_any) pad_bad += !(got == 0.0 && !signbit(got));
                continue;
            }
            const double want = ref[e], err = fabs(got - want);
            es += err * err;
            if (!fw_within_bound(got, want, l1[e], rms, esz)) {
                if (bad < 3)
                    fprintf(stderr, "    %s: D[%lld][%lld] = %.9g, want %.9g (sum|ab| %.3g)\n", label, (long long)i,
                            (long long)j, got, want, (double)l1[e]);
                bad++;
            }
        }
    }
    const double rel = ss > 0 ? sqrt(es / ss) : 0.0;
    printf("    %s: %lld bad, %lld padding elements not +0, rel frob %.2e\n", label, (long long)bad,
           (long long)pad_bad, rel);
    CHECK_MSG(bad == 0, "%s: %lld elements beyond the bound", label, (long long)bad);
    CHECK_MSG(pad_bad == 0, "%s: %lld elements of padding rows not +0", label, (long long)pad_bad);
    CHECK_MSG(poison_lost == 0, "%s: %lld elements of D's padding columns or unwritten rows written", label,
              (long long)poison_lost);
    CHECK_MSG(guard_lost == 0, "%s: %lld bytes written past D's last row", label, (long long)guard_lost);
    CHECK_MSG(rel <= (esz == 4 ? 5e-4 : 2e-3), "%s: relative Frobenius error %.3g", label, rel);
}

/* The whole check of host problem p on the device with D in d_dtype (z: the device run's sizes, z->d
 * covering d_rows rows of p->d.ld): the reference (FP32 D over p's C), the bound's sum_k |a_k b_k|,
 * the run (fw_run_on_device) and every element (fw_check_d with row_kinds and pad_any). p->d.data
 * and p->d.dtype are the reference's, set here; p->d.c (host, FP32) is also uploaded as C. */
static inline void fw_verify(const char *label, hfp4_gemm_problem p, const fw_sizes *z, hfp4_dtype d_dtype, int64_t d_rows,
                             const int32_t *row_kinds, int pad_any) {
    const int64_t d_elems = d_rows * p.d.ld;
    float *ref = (float *)calloc((size_t)d_elems, sizeof(float));
    p.d.data = ref;
    p.d.dtype = HFP4_DTYPE_FP32;
    CHECK_STATUS(hfp4_ref_gemm(&p, 0), HFP4_OK);
    float *l1 = fw_sum_abs_products(&p, (int64_t)z->a, (int64_t)z->b, d_elems); /* (the bound's accumulation term) */
    setenv("HFP4_SM90_FP8_WEIGHTS", "1", 1);
    uint8_t *out = fw_run_on_device(label, &p, z, d_dtype, (const float *)p.d.c, d_elems);
    fw_check_d(label, out, d_rows, p.n, p.d.ld, d_dtype == HFP4_DTYPE_FP32 ? 4 : 2, ref, l1, row_kinds, pad_any);
    free(ref);
    free(l1);
    free(out);
}

#endif
