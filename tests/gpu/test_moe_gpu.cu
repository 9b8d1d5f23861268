/*
 * test_moe_gpu.cu - the MoE glue's GPU forms against its CPU forms (tests/test_moe.c checks those):
 * the route's layout bit for bit and each expert's positions as a set (the GPU ranks rows inside a
 * segment in arrival order), the row quantizer and the combine bit for bit on the GPU route's
 * positions, with the outputs poisoned first (rows nobody routes must keep the poison).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_device.h"
#include "harness.h"
#include "hfp4.h"

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

enum { MOE_IDS32 = 1, MOE_ROWS_ROUTED = 2, MOE_WIDE = 4 };

/* tokens x top_k ids over E experts (each token's distinct, some sentinels), routed on both sides,
 * then the quantizer on x (BF16 [tokens, k], row_div = top_k; MOE_ROWS_ROUTED: FP32 [S, k], row_div
 * 1) and the combine of y [layout_rows, n]. MOE_IDS32: int32 ids; MOE_WIDE: 40 more layout rows than
 * needed, row strides past k and n, BF16 routing weights. */
static void moe_case(int64_t tokens, int32_t top_k, int32_t E, int64_t k, int32_t gran, int64_t n, uint64_t salt,
                     int variant) {
    const int wide = (variant & MOE_WIDE) != 0, routed = (variant & MOE_ROWS_ROUTED) != 0;
    const int64_t S = tokens * top_k, rows = hfp4_moe_layout_rows(S, E, 128) + (wide ? 40 : 0);
    const int64_t sfc = (k + gran - 1) / gran, ldx = k + (wide ? 3 : 0), lda = k + (wide ? 16 : 0);
    const int64_t ldy = n + (wide ? 5 : 0), ldo = n + (wide ? 2 : 0), x_rows = routed ? S : tokens;
    const int32_t row_div = routed ? 1 : top_k;
    hfp4_rng rng = hfp4_rng_make(salt);
    int64_t *ids = (int64_t *)malloc(sizeof(int64_t) * S);
    for (int64_t t = 0; t < tokens; t++)
        for (int32_t j = 0; j < top_k; j++) {
            int64_t e;
            int again;
            do { /* distinct experts per token, as a router picks them */
                e = (int64_t)(hfp4_rng_next(&rng) % (uint64_t)(E + 1)) - (hfp4_rng_next(&rng) % 50 == 0 ? E + 1 : 0);
                again = 0;
                for (int32_t jj = 0; jj < j; jj++) again |= ids[t * top_k + jj] == e && e >= 0 && e < E;
            } while (again);
            ids[t * top_k + j] = e; /* E and negatives: sentinels */
        }
    int32_t *pos_c = (int32_t *)malloc(sizeof(int32_t) * S), *pos_g = (int32_t *)malloc(sizeof(int32_t) * S);
    int32_t *lay_c = (int32_t *)malloc(sizeof(int32_t) * rows), *lay_g = (int32_t *)malloc(sizeof(int32_t) * rows);
    const int ids64 = (variant & MOE_IDS32) == 0;
    int32_t *ids32 = (int32_t *)malloc(sizeof(int32_t) * S);
    for (int64_t i = 0; i < S; i++) ids32[i] = (int32_t)ids[i];
    const void *ids_h = ids64 ? (const void *)ids : (const void *)ids32;
    const size_t id_bytes = (ids64 ? sizeof(int64_t) : sizeof(int32_t)) * S;
    CHECK_STATUS(hfp4_moe_route(ids_h, ids64, S, E, 128, pos_c, lay_c, rows), HFP4_OK);
    void *d_ids;
    int32_t *d_pos, *d_lay;
    cudaMalloc(&d_ids, id_bytes);
    cudaMalloc(&d_pos, sizeof(int32_t) * S);
    cudaMalloc(&d_lay, sizeof(int32_t) * rows);
    cudaMemcpy(d_ids, ids_h, id_bytes, cudaMemcpyHostToDevice);
    cudaMemset(d_pos, 0x7F, sizeof(int32_t) * S);
    cudaMemset(d_lay, 0x7F, sizeof(int32_t) * rows);
    CHECK_STATUS(hfp4_moe_route_gpu(d_ids, ids64, S, E, 128, d_pos, d_lay, rows, NULL), HFP4_OK);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    cudaMemcpy(pos_g, d_pos, sizeof(int32_t) * S, cudaMemcpyDeviceToHost);
    cudaMemcpy(lay_g, d_lay, sizeof(int32_t) * rows, cudaMemcpyDeviceToHost);
    CHECK(memcmp(lay_c, lay_g, sizeof(int32_t) * rows) == 0);
    int32_t *a_set = (int32_t *)malloc(sizeof(int32_t) * S), *b_set = (int32_t *)malloc(sizeof(int32_t) * S);
    for (int32_t e = -1; e < E; e++) { /* per expert (and the sentinels, -1): the same positions */
        int64_t na = 0, nb = 0;
        for (int64_t i = 0; i < S; i++) {
            const int32_t ei = ids[i] >= 0 && ids[i] < E ? (int32_t)ids[i] : -1;
            if (ei != e) continue;
            a_set[na++] = pos_c[i];
            b_set[nb++] = pos_g[i];
        }
        qsort(a_set, (size_t)na, sizeof(int32_t), cmp_i32);
        qsort(b_set, (size_t)nb, sizeof(int32_t), cmp_i32);
        CHECK(na == nb && memcmp(a_set, b_set, sizeof(int32_t) * na) == 0);
    }
    /* the quantizer on the GPU's positions: BF16 tokens (row_div top_k) or FP32 routed rows */
    const size_t xsz = routed ? sizeof(float) : sizeof(uint16_t), x_bytes = xsz * (size_t)(x_rows * ldx);
    void *x = malloc(x_bytes);
    for (int64_t i = 0; i < x_rows * ldx; i++) {
        const float v = (float)(hfp4_rng_normal(&rng) * (i % 5 ? 1 : 40));
        if (routed) ((float *)x)[i] = v;
        else ((uint16_t *)x)[i] = hfp4_bf16_encode(v);
    }
    const hfp4_dtype x_dtype = routed ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
    const size_t a_bytes = (size_t)(rows * lda), sf_bytes = sizeof(float) * (size_t)(rows * sfc);
    uint8_t *a_c = (uint8_t *)malloc(a_bytes), *a_g = (uint8_t *)malloc(a_bytes);
    float *sf_c = (float *)malloc(sf_bytes), *sf_g = (float *)malloc(sf_bytes);
    memset(a_c, 0x5A, a_bytes);
    memset(sf_c, 0x5A, sf_bytes);
    CHECK_STATUS(hfp4_moe_quantize_rows(x, x_dtype, x_rows, k, ldx, row_div, pos_g, S, gran, a_c, lda, sf_c, rows),
                 HFP4_OK);
    void *d_x;
    uint8_t *d_a;
    float *d_sf;
    cudaMalloc(&d_x, x_bytes);
    cudaMalloc(&d_a, a_bytes);
    cudaMalloc(&d_sf, sf_bytes);
    cudaMemcpy(d_x, x, x_bytes, cudaMemcpyHostToDevice);
    cudaMemset(d_a, 0x5A, a_bytes);
    cudaMemset(d_sf, 0x5A, sf_bytes);
    CHECK_STATUS(hfp4_moe_quantize_rows_gpu(d_x, x_dtype, x_rows, k, ldx, row_div, d_pos, S, gran, d_a, lda, d_sf, rows,
                                            NULL),
                 HFP4_OK);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    cudaMemcpy(a_g, d_a, a_bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(sf_g, d_sf, sf_bytes, cudaMemcpyDeviceToHost);
    CHECK(memcmp(a_c, a_g, a_bytes) == 0);
    CHECK(memcmp(sf_c, sf_g, sf_bytes) == 0);
    /* the fused SwiGLU + quantization on the first GEMM's stand-in: y1 [rows, 2k (+6 wide)] BF16,
     * values past the limit (7; MOE_WIDE: none, INFINITY), gate|up stacked and interleaved, into the
     * same a and sf */
    for (int layout = 0; layout < 2; layout++) {
        const hfp4_gate_up gu = layout ? HFP4_GATE_UP_INTERLEAVED : HFP4_GATE_UP_STACKED;
        const int64_t ldy1 = 2 * k + (wide ? 6 : 0);
        const float limit = wide ? INFINITY : 7.0f;
        uint16_t *y1 = (uint16_t *)malloc(sizeof(uint16_t) * rows * ldy1);
        for (int64_t i = 0; i < rows * ldy1; i++) y1[i] = hfp4_bf16_encode((float)(hfp4_rng_normal(&rng) * 4.0));
        memset(a_c, 0x5A, a_bytes);
        memset(sf_c, 0x5A, sf_bytes);
        CHECK_STATUS(hfp4_moe_swiglu_quantize_rows(y1, ldy1, k, gu, limit, pos_g, S, gran, a_c, lda, sf_c, rows),
                     HFP4_OK);
        uint16_t *d_y1;
        cudaMalloc(&d_y1, sizeof(uint16_t) * rows * ldy1);
        cudaMemcpy(d_y1, y1, sizeof(uint16_t) * rows * ldy1, cudaMemcpyHostToDevice);
        cudaMemset(d_a, 0x5A, a_bytes);
        cudaMemset(d_sf, 0x5A, sf_bytes);
        CHECK_STATUS(
            hfp4_moe_swiglu_quantize_rows_gpu(d_y1, ldy1, k, gu, limit, d_pos, S, gran, d_a, lda, d_sf, rows, NULL),
            HFP4_OK);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        cudaMemcpy(a_g, d_a, a_bytes, cudaMemcpyDeviceToHost);
        cudaMemcpy(sf_g, d_sf, sf_bytes, cudaMemcpyDeviceToHost);
        CHECK(memcmp(a_c, a_g, a_bytes) == 0);
        CHECK(memcmp(sf_c, sf_g, sf_bytes) == 0);
        cudaFree(d_y1);
        free(y1);
    }
    /* the combine: FP32 weights (MOE_WIDE: BF16), BF16 and FP32 out */
    const hfp4_dtype w_dtype = wide ? HFP4_DTYPE_BF16 : HFP4_DTYPE_FP32;
    uint16_t *y = (uint16_t *)malloc(sizeof(uint16_t) * rows * ldy);
    for (int64_t i = 0; i < rows * ldy; i++) y[i] = hfp4_bf16_encode((float)hfp4_rng_normal(&rng));
    float *w = (float *)malloc(sizeof(float) * S);
    for (int64_t i = 0; i < S; i++) {
        const float v = (float)hfp4_rng_uniform(&rng);
        if (wide) ((uint16_t *)w)[i] = hfp4_bf16_encode(v);
        else w[i] = v;
    }
    const size_t o_n = (size_t)(tokens * ldo);
    float *o_c = (float *)calloc(o_n, sizeof(float)), *o_g = (float *)malloc(sizeof(float) * o_n);
    uint16_t *ob_c = (uint16_t *)calloc(o_n, sizeof(uint16_t)), *ob_g = (uint16_t *)malloc(sizeof(uint16_t) * o_n);
    memset(o_c, 0xFF, sizeof(float) * o_n);
    memset(ob_c, 0xFF, sizeof(uint16_t) * o_n);
    CHECK_STATUS(hfp4_moe_combine(y, ldy, rows, n, pos_g, w, w_dtype, tokens, top_k, o_c, HFP4_DTYPE_FP32, ldo),
                 HFP4_OK);
    CHECK_STATUS(hfp4_moe_combine(y, ldy, rows, n, pos_g, w, w_dtype, tokens, top_k, ob_c, HFP4_DTYPE_BF16, ldo),
                 HFP4_OK);
    uint16_t *d_y, *d_ob;
    float *d_w, *d_o;
    cudaMalloc(&d_y, sizeof(uint16_t) * rows * ldy);
    cudaMalloc(&d_w, sizeof(float) * S);
    cudaMalloc(&d_o, sizeof(float) * o_n);
    cudaMalloc(&d_ob, sizeof(uint16_t) * o_n);
    cudaMemcpy(d_y, y, sizeof(uint16_t) * rows * ldy, cudaMemcpyHostToDevice);
    cudaMemcpy(d_w, w, sizeof(float) * S, cudaMemcpyHostToDevice);
    cudaMemset(d_o, 0xFF, sizeof(float) * o_n); /* (the stride's gap must keep it) */
    cudaMemset(d_ob, 0xFF, sizeof(uint16_t) * o_n);
    CHECK_STATUS(hfp4_moe_combine_gpu(d_y, ldy, rows, n, d_pos, d_w, w_dtype, tokens, top_k, d_o, HFP4_DTYPE_FP32, ldo,
                                      NULL),
                 HFP4_OK);
    CHECK_STATUS(hfp4_moe_combine_gpu(d_y, ldy, rows, n, d_pos, d_w, w_dtype, tokens, top_k, d_ob, HFP4_DTYPE_BF16,
                                      ldo, NULL),
                 HFP4_OK);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    cudaMemcpy(o_g, d_o, sizeof(float) * o_n, cudaMemcpyDeviceToHost);
    cudaMemcpy(ob_g, d_ob, sizeof(uint16_t) * o_n, cudaMemcpyDeviceToHost);
    CHECK(memcmp(o_c, o_g, sizeof(float) * o_n) == 0);
    CHECK(memcmp(ob_c, ob_g, sizeof(uint16_t) * o_n) == 0);
    cudaFree(d_ids), cudaFree(d_pos), cudaFree(d_lay), cudaFree(d_x), cudaFree(d_a), cudaFree(d_sf);
    cudaFree(d_y), cudaFree(d_w), cudaFree(d_o), cudaFree(d_ob);
    free(ids32), free(ids), free(pos_c), free(pos_g), free(lay_c), free(lay_g), free(a_set), free(b_set), free(x), free(a_c);
    free(a_g), free(sf_c), free(sf_g), free(y), free(w), free(o_c), free(o_g), free(ob_c), free(ob_g);
}

/* Every BF16 gate value through both forms of the fused SwiGLU: one routed row of 65536 groups of
 * 32 columns, group i's first gate column the value i, the rest 0 (silu(0) x up = 0), up 1.5, so
 * each group's scale is |h_i| / 448 and shows h_i's bits; at limits 7 (BF16), 7.3 (rounded to BF16
 * first) and none, and at 7 with gate|up interleaved. A NaN h only has to stay NaN. */
TEST(gpu_moe_swiglu_every_bf16_gate) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    const int64_t groups = 65536, n = groups * 32, ldy = 2 * n;
    uint16_t *y = (uint16_t *)malloc(sizeof(uint16_t) * ldy);
    for (int64_t c = 0; c < n; c++) {
        y[c] = c % 32 == 0 ? (uint16_t)(c / 32) : 0;
        y[n + c] = hfp4_bf16_encode(1.5f);
    }
    const int32_t pos = 0;
    uint8_t *a_c = (uint8_t *)malloc((size_t)n), *a_g = (uint8_t *)malloc((size_t)n);
    float *s_c = (float *)malloc(sizeof(float) * groups), *s_g = (float *)malloc(sizeof(float) * groups);
    uint16_t *d_y;
    int32_t *d_pos;
    uint8_t *d_a;
    float *d_s;
    cudaMalloc(&d_y, sizeof(uint16_t) * ldy);
    cudaMalloc(&d_pos, sizeof(int32_t));
    cudaMalloc(&d_a, (size_t)n);
    cudaMalloc(&d_s, sizeof(float) * groups);
    cudaMemcpy(d_y, y, sizeof(uint16_t) * ldy, cudaMemcpyHostToDevice);
    cudaMemcpy(d_pos, &pos, sizeof(int32_t), cudaMemcpyHostToDevice);
    const float limits[3] = {7.0f, 7.3f, INFINITY};
    for (int li = 0; li < 4; li++) {
        /* (li 3: limit 7 with gate|up interleaved: y rearranged so, the same values) */
        const hfp4_gate_up gu = li == 3 ? HFP4_GATE_UP_INTERLEAVED : HFP4_GATE_UP_STACKED;
        const float limit = limits[li % 3];
        if (li == 3) {
            uint16_t *yi = (uint16_t *)malloc(sizeof(uint16_t) * ldy);
            for (int64_t c = 0; c < n; c++) yi[2 * c] = y[c], yi[2 * c + 1] = y[n + c];
            memcpy(y, yi, sizeof(uint16_t) * ldy);
            free(yi);
            cudaMemcpy(d_y, y, sizeof(uint16_t) * ldy, cudaMemcpyHostToDevice);
        }
        CHECK_STATUS(hfp4_moe_swiglu_quantize_rows(y, ldy, n, gu, limit, &pos, 1, 32, a_c, n, s_c, 1), HFP4_OK);
        CHECK_STATUS(hfp4_moe_swiglu_quantize_rows_gpu(d_y, ldy, n, gu, limit, d_pos, 1, 32, d_a, n, d_s, 1, NULL),
                     HFP4_OK);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        cudaMemcpy(a_g, d_a, (size_t)n, cudaMemcpyDeviceToHost);
        cudaMemcpy(s_g, d_s, sizeof(float) * groups, cudaMemcpyDeviceToHost);
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < groups; i++) {
            const int nan_c = s_c[i] != s_c[i], nan_g = s_g[i] != s_g[i];
            const int same = nan_c || nan_g ? nan_c && nan_g
                                            : memcmp(&s_c[i], &s_g[i], sizeof(float)) == 0 &&
                                                  memcmp(a_c + 32 * i, a_g + 32 * i, 32) == 0;
            if (!same && bad++ == 0) first = i;
        }
        CHECK_MSG(bad == 0, "limit %g, gate_up %d: %lld gate values differ, the first 0x%04llx (scale %a vs %a)",
                  (double)limit, (int)gu, (long long)bad, (long long)first, first >= 0 ? (double)s_c[first] : 0.0,
                  first >= 0 ? (double)s_g[first] : 0.0);
    }
    cudaFree(d_y), cudaFree(d_pos), cudaFree(d_a), cudaFree(d_s);
    free(y), free(a_c), free(a_g), free(s_c), free(s_g);
}

TEST(gpu_moe_glue_matches_the_cpu_forms) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    moe_case(1, 6, 256, 4096, 128, 512, 1, 0);                /* decode T = 1 */
    moe_case(37, 6, 256, 4096, 32, 1000, 2, MOE_IDS32);       /* decode, 1x32, int32 ids */
    moe_case(9, 3, 7, 300, 128, 64, 3, MOE_ROWS_ROUTED);      /* k with a partial group, FP32 routed rows */
    moe_case(9, 3, 33, 301, 32, 37, 5, MOE_WIDE);             /* k, n tails (a lane straddles k), 33 experts,
                                                                 strides, BF16 weights, spare layout rows */
    moe_case(4096, 6, 384, 512, 128, 64, 4, MOE_ROWS_ROUTED); /* prefill-sized routing: many rows a thread */
    moe_case(3, 70, 80, 2056, 128, 72, 6, 0);                 /* row_div 70 (> the 64 rows a CTA shares: a CTA
                                                                 per routed row), the wide loads with a k tail */
    moe_case(5, 2, 16, 2056, 32, 64, 7, MOE_ROWS_ROUTED);     /* FP32 wide loads, 1x32, a k tail */
}

/* The route's cluster kernel (many routed rows, prefill): its layout bit for bit and each expert's
 * places as a set, through moe_case; by default from 4096 routed rows, and every size with
 * HFP4_MOE_ROUTE_CLUSTER_ROWS=0 (fewer rows than CTAs, sentinels, int32 ids, 4096 experts: the
 * shared-memory limit) */
TEST(gpu_moe_route_cluster) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    moe_case(16384, 6, 256, 256, 128, 64, 11, 0);             /* V4-Flash prefill routing: 98304 rows */
    moe_case(700, 6, 384, 256, 128, 64, 12, MOE_IDS32);       /* 4200 rows, int32 ids */
    setenv("HFP4_MOE_ROUTE_CLUSTER_ROWS", "0", 1);
    moe_case(1, 6, 256, 256, 128, 64, 13, 0);                 /* 6 rows over 8 CTAs */
    moe_case(9, 3, 7, 300, 128, 64, 14, MOE_ROWS_ROUTED);
    moe_case(37, 6, 256, 256, 32, 100, 15, MOE_IDS32);
    moe_case(2000, 4, 4096, 128, 128, 32, 16, 0);             /* 4096 experts */
    unsetenv("HFP4_MOE_ROUTE_CLUSTER_ROWS");
}

/* hfp4_moe_forward_gpu (a whole experts layer in one call) against hfp4_moe_forward (its CPU form,
 * bit for bit the steps: tests/test_moe_forward.c). The GEMMs' tensor-core sums differ from the
 * exact ones within docs/TESTING.md's bound, which can move a BF16 gate output across an FP8
 * rounding step before the second GEMM, so the layer is compared by token: every token within 15 %,
 * the whole within 3 % (a wrong expert, weight or row is off by ~100 %). Variants: 1x128 and 1x32
 * scales, gate|up stacked and interleaved, BF16 and FP32 x / weights / out, int32 and int64 ids,
 * sentinels, decode (T = 1, 8) and 4200 routed rows (the route's cluster kernel); out's untouched
 * stride gap keeps its poison. */
static void moe_forward_case(int64_t T, int32_t k, int32_t E, int64_t H, int64_t I, int variant, uint64_t salt) {
    const int gran = variant & 1 ? 32 : 128, interleaved = (variant & 2) != 0, wide = (variant & 4) != 0;
    const int64_t ldx = H + (wide ? 8 : 0), ldo = H + (wide ? 4 : 0), S = T * k;
    hfp4_rng rng = hfp4_rng_make(salt);
    const size_t w13_bytes = (size_t)(E * 2 * I * H / 2), w2_bytes = (size_t)(E * H * I / 2);
    uint8_t *w13 = (uint8_t *)malloc(w13_bytes), *w2 = (uint8_t *)malloc(w2_bytes);
    uint8_t *s13 = (uint8_t *)malloc(w13_bytes / 16), *s2 = (uint8_t *)malloc(w2_bytes / 16);
    for (size_t i = 0; i < w13_bytes; i++) w13[i] = (uint8_t)(hfp4_rng_next(&rng) & 0xFF);
    for (size_t i = 0; i < w2_bytes; i++) w2[i] = (uint8_t)(hfp4_rng_next(&rng) & 0xFF);
    for (size_t i = 0; i < w13_bytes / 16; i++) s13[i] = (uint8_t)(118 + hfp4_rng_next(&rng) % 6);
    for (size_t i = 0; i < w2_bytes / 16; i++) s2[i] = (uint8_t)(118 + hfp4_rng_next(&rng) % 6);
    const size_t xsz = wide ? 4 : 2;
    void *x = malloc(xsz * (size_t)(T * ldx));
    for (int64_t i = 0; i < T * ldx; i++) {
        const float v = (float)(hfp4_rng_normal(&rng) * 3.0);
        if (wide) ((float *)x)[i] = v;
        else ((uint16_t *)x)[i] = hfp4_bf16_encode(v);
    }
    int64_t *ids = (int64_t *)malloc(sizeof(int64_t) * S);
    int32_t *ids32 = (int32_t *)malloc(sizeof(int32_t) * S);
    float *wts = (float *)malloc(sizeof(float) * S);
    uint16_t *wts16 = (uint16_t *)malloc(sizeof(uint16_t) * S);
    for (int64_t t = 0; t < T; t++)
        for (int32_t j = 0; j < k; j++) {
            int64_t e = (t * 7 + j * 3 + (int64_t)(hfp4_rng_next(&rng) % 2)) % E; /* (distinct within a token) */
            e = (e + j) % E;
            if (hfp4_rng_next(&rng) % 23 == 0) e = hfp4_rng_next(&rng) % 2 ? E : -1; /* sentinels */
            ids[t * k + j] = e, ids32[t * k + j] = (int32_t)e;
            wts[t * k + j] = (float)(0.05 + 0.9 * hfp4_rng_uniform(&rng));
            wts16[t * k + j] = hfp4_bf16_encode(wts[t * k + j]);
            wts[t * k + j] = hfp4_bf16_decode(wts16[t * k + j]); /* (the same weights in both dtypes) */
        }
    hfp4_matrix m13, m2;
    memset(&m13, 0, sizeof m13), memset(&m2, 0, sizeof m2);
    m13.data = w13, m13.dtype = HFP4_DTYPE_FP4_E2M1, m13.rows = 2 * I, m13.cols = H, m13.ld = H / 2;
    m13.stride_group = 2 * I * H / 2;
    m13.scales.data = s13, m13.scales.dtype = HFP4_DTYPE_UE8M0, m13.scales.gran_mn = 1, m13.scales.gran_k = 32;
    m13.scales.stride_mn = H / 32, m13.scales.stride_k = 1, m13.scales.stride_group = 2 * I * H / 32;
    m2.data = w2, m2.dtype = HFP4_DTYPE_FP4_E2M1, m2.rows = H, m2.cols = I, m2.ld = I / 2, m2.stride_group = H * I / 2;
    m2.scales.data = s2, m2.scales.dtype = HFP4_DTYPE_UE8M0, m2.scales.gran_mn = 1, m2.scales.gran_k = 32;
    m2.scales.stride_mn = I / 32, m2.scales.stride_k = 1, m2.scales.stride_group = H * I / 32;
    hfp4_moe_forward_problem p;
    memset(&p, 0, sizeof p);
    p.tokens = T, p.top_k = k, p.num_experts = E;
    p.x = x, p.x_dtype = wide ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16, p.ldx = ldx;
    p.ids = wide ? (const void *)ids32 : (const void *)ids, p.ids_int64 = !wide;
    p.weights = wide ? (const void *)wts16 : (const void *)wts;
    p.weights_dtype = wide ? HFP4_DTYPE_BF16 : HFP4_DTYPE_FP32;
    p.w13 = m13, p.w2 = m2;
    p.gate_up = interleaved ? HFP4_GATE_UP_INTERLEAVED : HFP4_GATE_UP_STACKED;
    p.swiglu_limit = 7.0f, p.gran_k = gran;
    const size_t osz = wide ? 4 : 2, out_bytes = osz * (size_t)(T * ldo);
    p.out_dtype = wide ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16, p.ldo = ldo;
    size_t ws_bytes = 0;
    CHECK_STATUS(hfp4_moe_forward_workspace_size(&p, &ws_bytes), HFP4_OK);
    /* the CPU form */
    void *ref = malloc(out_bytes);
    p.out = ref, p.workspace = aligned_alloc(256, ws_bytes), p.workspace_bytes = ws_bytes;
    CHECK_STATUS(hfp4_moe_forward(&p), HFP4_OK);
    free(p.workspace);
    /* the GPU form: weights repacked on the GPU, every input on the device, out poisoned */
    hfp4_moe_forward_problem g = p;
    void *d_w13, *d_w2, *d_s13, *d_s2, *d_x, *d_ids, *d_wts, *d_out, *d_ws, *d_r13, *d_r2;
    size_t r13 = 0, r2 = 0;
    CHECK_STATUS(hfp4_sm90_weights_size(E, 2 * I, H, HFP4_DTYPE_UE8M0, &r13), HFP4_OK);
    CHECK_STATUS(hfp4_sm90_weights_size(E, H, I, HFP4_DTYPE_UE8M0, &r2), HFP4_OK);
    cudaMalloc(&d_w13, w13_bytes), cudaMalloc(&d_w2, w2_bytes), cudaMalloc(&d_s13, w13_bytes / 16);
    cudaMalloc(&d_s2, w2_bytes / 16), cudaMalloc(&d_r13, r13), cudaMalloc(&d_r2, r2);
    cudaMalloc(&d_x, xsz * (size_t)(T * ldx)), cudaMalloc(&d_ids, 8 * (size_t)S), cudaMalloc(&d_wts, 4 * (size_t)S);
    cudaMalloc(&d_out, out_bytes), cudaMalloc(&d_ws, ws_bytes);
    cudaMemcpy(d_w13, w13, w13_bytes, cudaMemcpyHostToDevice), cudaMemcpy(d_w2, w2, w2_bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_s13, s13, w13_bytes / 16, cudaMemcpyHostToDevice);
    cudaMemcpy(d_s2, s2, w2_bytes / 16, cudaMemcpyHostToDevice);
    cudaMemcpy(d_x, x, xsz * (size_t)(T * ldx), cudaMemcpyHostToDevice);
    cudaMemcpy(d_ids, p.ids, (wide ? 4 : 8) * (size_t)S, cudaMemcpyHostToDevice);
    cudaMemcpy(d_wts, p.weights, (wide ? 2 : 4) * (size_t)S, cudaMemcpyHostToDevice);
    cudaMemset(d_out, 0xFF, out_bytes), cudaMemset(d_ws, 0xFF, ws_bytes);
    hfp4_matrix src13 = m13, src2 = m2;
    src13.data = d_w13, src13.scales.data = d_s13, src2.data = d_w2, src2.scales.data = d_s2;
    CHECK_STATUS(hfp4_repack_sm90(&src13, E, HFP4_DTYPE_UE8M0, d_r13, r13, &g.w13, NULL), HFP4_OK);
    CHECK_STATUS(hfp4_repack_sm90(&src2, E, HFP4_DTYPE_UE8M0, d_r2, r2, &g.w2, NULL), HFP4_OK);
    g.x = d_x, g.ids = d_ids, g.weights = d_wts, g.out = d_out, g.workspace = d_ws;
    CHECK_STATUS(hfp4_moe_forward_gpu(&g, NULL), HFP4_OK);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    void *got = malloc(out_bytes);
    cudaMemcpy(got, d_out, out_bytes, cudaMemcpyDeviceToHost);
    double err2 = 0.0, ref2 = 0.0, worst = 0.0;
    int64_t bad_gap = 0;
    for (int64_t t = 0; t < T; t++) {
        double e2 = 0.0, r2t = 0.0;
        for (int64_t c = 0; c < ldo; c++) {
            const int64_t i = t * ldo + c;
            const double a = wide ? ((float *)got)[i] : hfp4_bf16_decode(((uint16_t *)got)[i]);
            const double b = wide ? ((float *)ref)[i] : hfp4_bf16_decode(((uint16_t *)ref)[i]);
            if (c >= H) { /* (the stride gap: never written) */
                bad_gap += !isnan(a);
                continue;
            }
            e2 += (a - b) * (a - b), r2t += b * b;
        }
        err2 += e2, ref2 += r2t;
        if (r2t > 0.0 && sqrt(e2 / r2t) > worst) worst = sqrt(e2 / r2t);
        if (r2t == 0.0) worst = e2 > 0.0 ? 1.0 : worst; /* (a token with no routed row: zeros both sides) */
    }
    CHECK_MSG(bad_gap == 0 && sqrt(err2) <= 3e-2 * sqrt(ref2) && worst <= 0.15,
              "T %lld k %d E %d variant %d: relative error %.3g, worst token %.3g, %lld gap elements written",
              (long long)T, (int)k, (int)E, variant, sqrt(err2 / (ref2 > 0 ? ref2 : 1)), worst, (long long)bad_gap);
    cudaFree(d_w13), cudaFree(d_w2), cudaFree(d_s13), cudaFree(d_s2), cudaFree(d_r13), cudaFree(d_r2);
    cudaFree(d_x), cudaFree(d_ids), cudaFree(d_wts), cudaFree(d_out), cudaFree(d_ws);
    free(w13), free(w2), free(s13), free(s2), free(x), free(ids), free(ids32), free(wts), free(wts16);
    free(ref), free(got);
}

TEST(gpu_moe_forward_matches_the_cpu_form) {
    if (!gpu_current_is_sm90()) SKIP("no SM90 (Hopper) GPU");
    moe_forward_case(1, 6, 16, 512, 256, 0, 31);     /* decode, 1x128, stacked */
    moe_forward_case(8, 6, 16, 512, 256, 3, 32);     /* 1x32, interleaved */
    moe_forward_case(8, 4, 8, 256, 128, 4, 33);      /* FP32 x and out, BF16 weights, int32 ids, strides */
    moe_forward_case(700, 6, 32, 256, 128, 1, 34);   /* 4200 routed rows: the route's cluster kernel */
    moe_forward_case(300, 2, 8, 512, 256, 6, 35);    /* 128-token tiles, interleaved, FP32 in and out */
}
