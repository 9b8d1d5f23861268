/*
 * moe.c - the MoE glue (hfp4.h, "MoE glue"): argument checks shared by both forms, the CPU forms
 * (the reference), and the _gpu entry points, which check the same way and then launch
 * (moe_gpu.cu).
 *
 * The CPU route ranks rows in order inside each expert's segment; the GPU form ranks them with
 * atomics, in whatever order they arrive. Every row's GEMM result is independent of its neighbours,
 * so only the placement differs, never a number. row_pos is host data here and is checked (its
 * first bad entry named); on the device it cannot be read from the host, so the kernels skip rows
 * whose row_pos lies outside [0, layout_rows) instead.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moe_internal.h"
#include "swiglu_math.h"

int64_t hfp4_moe_layout_rows(int64_t routed_rows, int32_t num_experts, int32_t alignment) {
    if (routed_rows < 0 || num_experts < 1 || alignment < 1 || routed_rows > ((int64_t)1 << 40)) return -1;
    const int64_t hit = routed_rows < num_experts ? routed_rows : num_experts;
    return routed_rows + hit * (alignment - 1);
}

static hfp4_status check_route(const char *fn, const void *ids, int64_t routed_rows, int32_t num_experts,
                               int32_t alignment, const int32_t *row_pos, const int32_t *layout, int64_t layout_rows) {
    HFP4_CHECK_ARG(routed_rows >= 1 && routed_rows <= ((int64_t)1 << 30),
                   "%s: routed_rows = %lld must be in [1, 2^30]", fn, (long long)routed_rows);
    HFP4_CHECK_ARG(num_experts >= 1 && num_experts <= 65536, "%s: num_experts = %d must be in [1, 65536]", fn,
                   (int)num_experts);
    HFP4_CHECK_ARG(alignment >= 8 && alignment % 8 == 0, "%s: alignment = %d must be a positive multiple of 8", fn,
                   (int)alignment);
    const int64_t need = hfp4_moe_layout_rows(routed_rows, num_experts, alignment);
    HFP4_CHECK_ARG(layout_rows >= need && layout_rows <= ((int64_t)1 << 31) - 1,
                   "%s: layout_rows = %lld must be >= %lld (hfp4_moe_layout_rows) and < 2^31", fn,
                   (long long)layout_rows, (long long)need);
    HFP4_CHECK_ARG(ids != NULL && row_pos != NULL && layout != NULL, "%s: ids = %p, row_pos = %p, layout = %p: none "
                   "may be NULL", fn, ids, (const void *)row_pos, (const void *)layout);
    return HFP4_OK;
}

static hfp4_status check_quantize(const char *fn, const void *x, hfp4_dtype x_dtype, int64_t x_rows, int64_t k,
                                  int64_t ldx, int32_t row_div, const int32_t *row_pos, int64_t routed_rows,
                                  int32_t gran_k, const uint8_t *a, int64_t lda, const float *sf, int64_t layout_rows) {
    HFP4_CHECK_ARG(x != NULL && row_pos != NULL && a != NULL && sf != NULL,
                   "%s: x = %p, row_pos = %p, a = %p, sf = %p: none may be NULL", fn, x, (const void *)row_pos,
                   (const void *)a, (const void *)sf);
    HFP4_CHECK_ARG(x_dtype == HFP4_DTYPE_BF16 || x_dtype == HFP4_DTYPE_FP32, "%s: x_dtype = %s (%d) must be bf16 or fp32",
                   fn, hfp4_dtype_name(x_dtype), (int)x_dtype);
    HFP4_CHECK_ARG(gran_k == 32 || gran_k == 128, "%s: gran_k = %d must be 32 or 128", fn, (int)gran_k);
    HFP4_CHECK_ARG(k >= 1 && ldx >= k && lda >= k, "%s: k = %lld, ldx = %lld, lda = %lld: need k >= 1, ldx >= k and "
                   "lda >= k", fn, (long long)k, (long long)ldx, (long long)lda);
    HFP4_CHECK_ARG(routed_rows >= 1 && row_div >= 1, "%s: routed_rows = %lld and row_div = %d must be >= 1", fn,
                   (long long)routed_rows, (int)row_div);
    HFP4_CHECK_ARG(x_rows >= hfp4__ceil_div(routed_rows, row_div),
                   "%s: x_rows = %lld must be >= ceil(routed_rows / row_div) = %lld", fn, (long long)x_rows,
                   (long long)hfp4__ceil_div(routed_rows, row_div));
    HFP4_CHECK_ARG(layout_rows >= 1 && hfp4__extent_ok(x_rows, ldx, k) && hfp4__extent_ok(layout_rows, lda, k),
                   "%s: x [%lld x %lld elements] or a [%lld rows x %lld bytes] lies past 2^60", fn, (long long)x_rows,
                   (long long)ldx, (long long)layout_rows, (long long)lda);
    const uintptr_t x_align = x_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    HFP4_CHECK_ARG((uintptr_t)x % x_align == 0 && (uintptr_t)sf % 4 == 0,
                   "%s: x = %p (%s) and sf = %p (FP32) must be aligned to their element size", fn, x,
                   hfp4_dtype_name(x_dtype), (const void *)sf);
    return HFP4_OK;
}

static hfp4_status check_combine(const char *fn, const void *y, int64_t ldy, int64_t layout_rows, int64_t n,
                                 const int32_t *row_pos, const void *weights, hfp4_dtype weights_dtype, int64_t tokens,
                                 int32_t top_k, const void *out, hfp4_dtype out_dtype, int64_t ldo) {
    HFP4_CHECK_ARG(y != NULL && row_pos != NULL && weights != NULL && out != NULL,
                   "%s: y = %p, row_pos = %p, weights = %p, out = %p: none may be NULL", fn, y, (const void *)row_pos,
                   weights, out);
    HFP4_CHECK_ARG(weights_dtype == HFP4_DTYPE_FP32 || weights_dtype == HFP4_DTYPE_BF16,
                   "%s: weights_dtype = %s (%d) must be fp32 or bf16", fn, hfp4_dtype_name(weights_dtype),
                   (int)weights_dtype);
    HFP4_CHECK_ARG(out_dtype == HFP4_DTYPE_FP32 || out_dtype == HFP4_DTYPE_BF16,
                   "%s: out_dtype = %s (%d) must be fp32 or bf16", fn, hfp4_dtype_name(out_dtype), (int)out_dtype);
    HFP4_CHECK_ARG(tokens >= 1 && top_k >= 1 && n >= 1 && layout_rows >= 1,
                   "%s: tokens = %lld, top_k = %d, n = %lld, layout_rows = %lld must all be >= 1", fn,
                   (long long)tokens, (int)top_k, (long long)n, (long long)layout_rows);
    HFP4_CHECK_ARG(ldy >= n && ldo >= n, "%s: ldy = %lld and ldo = %lld must be >= n = %lld", fn, (long long)ldy,
                   (long long)ldo, (long long)n);
    HFP4_CHECK_ARG(hfp4__extent_ok(layout_rows, ldy, n) && hfp4__extent_ok(tokens, ldo, n) &&
                       tokens <= ((int64_t)1 << 40) / top_k,
                   "%s: y [%lld x %lld], out [%lld x %lld] or tokens x top_k lies past the index range", fn,
                   (long long)layout_rows, (long long)ldy, (long long)tokens, (long long)ldo);
    const uintptr_t w_align = weights_dtype == HFP4_DTYPE_FP32 ? 4 : 2, o_align = out_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    HFP4_CHECK_ARG((uintptr_t)y % 2 == 0 && (uintptr_t)weights % w_align == 0 && (uintptr_t)out % o_align == 0,
                   "%s: y = %p, weights = %p, out = %p must be aligned to their element sizes", fn, y, weights, out);
    /* A token's output row is written while other tokens' rows of y (and their row_pos and weights)
     * are still to be read, so out may share no byte with any input. Addresses only: the GPU form
     * is checked the same way. (The extents were bounded above: no overflow.) */
    const int64_t routed = tokens * top_k, out_bytes = ((tokens - 1) * ldo + n) * (int64_t)o_align;
    HFP4_CHECK_ARG(!hfp4__ranges_overlap(out, out_bytes, y, ((layout_rows - 1) * ldy + n) * 2),
                   "%s: out = %p overlaps y = %p (out must be a buffer of its own)", fn, out, y);
    HFP4_CHECK_ARG(!hfp4__ranges_overlap(out, out_bytes, row_pos, routed * 4),
                   "%s: out = %p overlaps row_pos = %p (out must be a buffer of its own)", fn, out, (const void *)row_pos);
    HFP4_CHECK_ARG(!hfp4__ranges_overlap(out, out_bytes, weights, routed * (int64_t)w_align),
                   "%s: out = %p overlaps weights = %p (out must be a buffer of its own)", fn, out, weights);
    return HFP4_OK;
}

/* Host row_pos entries: -1 or a row of the layout (the CPU forms read them) */
static hfp4_status check_row_pos(const char *fn, const int32_t *row_pos, int64_t routed_rows, int64_t layout_rows) {
    for (int64_t i = 0; i < routed_rows; i++)
        HFP4_CHECK_ARG(row_pos[i] >= -1 && row_pos[i] < layout_rows,
                       "%s: row_pos[%lld] = %d must be -1 or a row of the layout (< layout_rows = %lld)", fn,
                       (long long)i, (int)row_pos[i], (long long)layout_rows);
    return HFP4_OK;
}

static int64_t load_id(const void *ids, int ids_int64, int64_t i) {
    return ids_int64 ? ((const int64_t *)ids)[i] : ((const int32_t *)ids)[i];
}

hfp4_status hfp4_moe_route(const void *ids, int ids_int64, int64_t routed_rows, int32_t num_experts, int32_t alignment,
                           int32_t *row_pos, int32_t *layout, int64_t layout_rows) {
    const char *fn = "hfp4_moe_route";
    HFP4_TRY(check_route(fn, ids, routed_rows, num_experts, alignment, row_pos, layout, layout_rows));
    int64_t *start = (int64_t *)calloc((size_t)num_experts, sizeof(int64_t));
    if (start == NULL) return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "%s: out of memory for %d counters", fn, (int)num_experts);
    for (int64_t i = 0; i < routed_rows; i++) { /* counts, then each row's rank in its expert */
        const int64_t e = load_id(ids, ids_int64, i);
        row_pos[i] = e >= 0 && e < num_experts ? (int32_t)start[e]++ : -1;
    }
    int64_t row = 0;
    for (int32_t e = 0; e < num_experts; e++) { /* segment starts, aligned, experts in order */
        const int64_t count = start[e];
        start[e] = row;
        row += hfp4__ceil_div(count, alignment) * alignment;
    }
    for (int64_t r = 0; r < layout_rows; r++) layout[r] = -1;
    for (int64_t i = 0; i < routed_rows; i++) {
        if (row_pos[i] < 0) continue;
        const int64_t e = load_id(ids, ids_int64, i);
        row_pos[i] = (int32_t)(start[e] + row_pos[i]);
        layout[row_pos[i]] = (int32_t)e;
    }
    free(start);
    return HFP4_OK;
}

hfp4_status hfp4_moe_route_gpu(const void *ids, int ids_int64, int64_t routed_rows, int32_t num_experts,
                               int32_t alignment, int32_t *row_pos, int32_t *layout, int64_t layout_rows,
                               hfp4_stream stream) {
    const char *fn = "hfp4_moe_route_gpu";
    HFP4_TRY(check_route(fn, ids, routed_rows, num_experts, alignment, row_pos, layout, layout_rows));
    HFP4_REQUIRE(num_experts <= HFP4_MOE_GPU_MAX_EXPERTS, "%s: num_experts = %d: the GPU form counts at most %d "
                 "experts (its counters live in shared memory); use hfp4_moe_route", fn, (int)num_experts,
                 HFP4_MOE_GPU_MAX_EXPERTS);
    return hfp4__moe_route_launch(fn, ids, ids_int64, routed_rows, num_experts, alignment, row_pos, layout,
                                  layout_rows, stream);
}

/* One row into row p of a and sf with FP32 scales per gran_k: hfp4_quantize_fp8_per_token's call,
 * which both quantizers use, so the kernels' bits have one reference */
static hfp4_status quantize_one_row(const void *row, hfp4_dtype dtype, int64_t k, int32_t gran_k, uint8_t *a,
                                    int64_t lda, float *sf, int32_t p) {
    const int64_t sf_cols = hfp4__ceil_div(k, gran_k);
    hfp4_scales s;
    memset(&s, 0, sizeof s);
    s.data = sf + (int64_t)p * sf_cols;
    s.dtype = HFP4_DTYPE_FP32;
    s.gran_mn = 1;
    s.gran_k = gran_k;
    s.stride_mn = sf_cols;
    s.stride_k = 1;
    return hfp4_quantize_fp8_per_token(row, dtype, 1, k, k, 0, a + (int64_t)p * lda, lda, &s);
}

hfp4_status hfp4_moe_quantize_rows(const void *x, hfp4_dtype x_dtype, int64_t x_rows, int64_t k, int64_t ldx,
                                   int32_t row_div, const int32_t *row_pos, int64_t routed_rows, int32_t gran_k,
                                   uint8_t *a, int64_t lda, float *sf, int64_t layout_rows) {
    const char *fn = "hfp4_moe_quantize_rows";
    HFP4_TRY(check_quantize(fn, x, x_dtype, x_rows, k, ldx, row_div, row_pos, routed_rows, gran_k, a, lda, sf,
                            layout_rows));
    HFP4_TRY(check_row_pos(fn, row_pos, routed_rows, layout_rows));
    const int64_t esz = x_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    for (int64_t i = 0; i < routed_rows; i++) {
        if (row_pos[i] < 0) continue;
        const char *row = (const char *)x + (i / row_div) * ldx * esz;
        HFP4_TRY(quantize_one_row(row, x_dtype, k, gran_k, a, lda, sf, row_pos[i]));
    }
    return HFP4_OK;
}

hfp4_status hfp4_moe_quantize_rows_gpu(const void *x, hfp4_dtype x_dtype, int64_t x_rows, int64_t k, int64_t ldx,
                                       int32_t row_div, const int32_t *row_pos, int64_t routed_rows, int32_t gran_k,
                                       uint8_t *a, int64_t lda, float *sf, int64_t layout_rows, hfp4_stream stream) {
    const char *fn = "hfp4_moe_quantize_rows_gpu";
    HFP4_TRY(check_quantize(fn, x, x_dtype, x_rows, k, ldx, row_div, row_pos, routed_rows, gran_k, a, lda, sf,
                            layout_rows));
    return hfp4__moe_quantize_rows_launch(fn, x, x_dtype, k, ldx, row_div, x_rows, row_pos, routed_rows, gran_k, a,
                                          lda, sf, layout_rows, stream);
}

static hfp4_status check_swiglu(const char *fn, const void *y, int64_t ldy, int64_t n, hfp4_gate_up gate_up,
                                float limit,
                                const int32_t *row_pos, int64_t routed_rows, int32_t gran_k, const uint8_t *a,
                                int64_t lda, const float *sf, int64_t layout_rows) {
    HFP4_CHECK_ARG(y != NULL && row_pos != NULL && a != NULL && sf != NULL,
                   "%s: y = %p, row_pos = %p, a = %p, sf = %p: none may be NULL", fn, y, (const void *)row_pos,
                   (const void *)a, (const void *)sf);
    HFP4_CHECK_ARG(gate_up == HFP4_GATE_UP_STACKED || gate_up == HFP4_GATE_UP_INTERLEAVED,
                   "%s: gate_up = %d must be HFP4_GATE_UP_STACKED (0) or HFP4_GATE_UP_INTERLEAVED (1)", fn,
                   (int)gate_up);
    HFP4_CHECK_ARG(limit > 0.0f, "%s: limit = %g must be > 0 (INFINITY for no clamp)", fn, (double)limit);
    HFP4_CHECK_ARG(gran_k == 32 || gran_k == 128, "%s: gran_k = %d must be 32 or 128", fn, (int)gran_k);
    HFP4_CHECK_ARG(n >= 1 && n <= ((int64_t)1 << 40) && ldy >= 2 * n && lda >= n,
                   "%s: n = %lld, ldy = %lld, lda = %lld: need n >= 1, ldy >= 2 n and lda >= n", fn, (long long)n,
                   (long long)ldy, (long long)lda);
    HFP4_CHECK_ARG(routed_rows >= 1 && layout_rows >= 1, "%s: routed_rows = %lld and layout_rows = %lld must be >= 1",
                   fn, (long long)routed_rows, (long long)layout_rows);
    HFP4_CHECK_ARG(hfp4__extent_ok(layout_rows, ldy, 2 * n) && hfp4__extent_ok(layout_rows, lda, n),
                   "%s: y [%lld x %lld elements] or a [%lld rows x %lld bytes] lies past 2^60", fn,
                   (long long)layout_rows, (long long)ldy, (long long)layout_rows, (long long)lda);
    HFP4_CHECK_ARG((uintptr_t)y % 2 == 0 && (uintptr_t)sf % 4 == 0,
                   "%s: y = %p (BF16) and sf = %p (FP32) must be aligned to their element size", fn, y,
                   (const void *)sf);
    return HFP4_OK;
}

hfp4_status hfp4_moe_swiglu_quantize_rows(const void *y, int64_t ldy, int64_t n, hfp4_gate_up gate_up, float limit,
                                          const int32_t *row_pos, int64_t routed_rows, int32_t gran_k, uint8_t *a,
                                          int64_t lda, float *sf, int64_t layout_rows) {
    const char *fn = "hfp4_moe_swiglu_quantize_rows";
    HFP4_TRY(check_swiglu(fn, y, ldy, n, gate_up, limit, row_pos, routed_rows, gran_k, a, lda, sf, layout_rows));
    HFP4_TRY(check_row_pos(fn, row_pos, routed_rows, layout_rows));
    uint16_t *h = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)n);
    if (h == NULL) return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "%s: out of memory for a row of %lld", fn, (long long)n);
    const uint16_t *yb = (const uint16_t *)y;
    hfp4_status st = HFP4_OK;
    for (int64_t i = 0; i < routed_rows && st == HFP4_OK; i++) {
        const int32_t p = row_pos[i];
        if (p < 0) continue;
        const uint16_t *row = yb + (int64_t)p * ldy;
        const int inter = gate_up == HFP4_GATE_UP_INTERLEAVED;
        const int64_t step = inter ? 2 : 1, up = inter ? 1 : n; /* (gate c at step c, up at step c + up) */
        for (int64_t c = 0; c < n; c++)
            h[c] = hfp4_bf16_encode(
                hfp4__swiglu_bf16(hfp4_bf16_decode(row[step * c]), hfp4_bf16_decode(row[step * c + up]), limit));
        st = quantize_one_row(h, HFP4_DTYPE_BF16, n, gran_k, a, lda, sf, p); /* (as hfp4_moe_quantize_rows) */
    }
    free(h);
    return st;
}

hfp4_status hfp4_moe_swiglu_quantize_rows_gpu(const void *y, int64_t ldy, int64_t n, hfp4_gate_up gate_up, float limit,
                                              const int32_t *row_pos, int64_t routed_rows, int32_t gran_k, uint8_t *a,
                                              int64_t lda, float *sf, int64_t layout_rows, hfp4_stream stream) {
    const char *fn = "hfp4_moe_swiglu_quantize_rows_gpu";
    HFP4_TRY(check_swiglu(fn, y, ldy, n, gate_up, limit, row_pos, routed_rows, gran_k, a, lda, sf, layout_rows));
    return hfp4__moe_swiglu_quantize_rows_launch(fn, y, ldy, n, gate_up, limit, row_pos, routed_rows, gran_k, a, lda,
                                                 sf, layout_rows, stream);
}

static float load_weight(const void *w, hfp4_dtype dtype, int64_t i) {
    return dtype == HFP4_DTYPE_FP32 ? ((const float *)w)[i] : hfp4_bf16_decode(((const uint16_t *)w)[i]);
}

hfp4_status hfp4_moe_combine(const void *y, int64_t ldy, int64_t layout_rows, int64_t n, const int32_t *row_pos,
                             const void *weights, hfp4_dtype weights_dtype, int64_t tokens, int32_t top_k, void *out,
                             hfp4_dtype out_dtype, int64_t ldo) {
    const char *fn = "hfp4_moe_combine";
    HFP4_TRY(check_combine(fn, y, ldy, layout_rows, n, row_pos, weights, weights_dtype, tokens, top_k, out, out_dtype,
                           ldo));
    HFP4_TRY(check_row_pos(fn, row_pos, tokens * top_k, layout_rows));
    const uint16_t *yb = (const uint16_t *)y;
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t c = 0; c < n; c++) {
            float acc = 0.0f;
            for (int32_t j = 0; j < top_k; j++) {
                const int32_t p = row_pos[t * top_k + j];
                if (p < 0) continue;
                acc = fmaf(load_weight(weights, weights_dtype, t * top_k + j), hfp4_bf16_decode(yb[p * ldy + c]), acc);
            }
            if (out_dtype == HFP4_DTYPE_FP32) ((float *)out)[t * ldo + c] = acc;
            else ((uint16_t *)out)[t * ldo + c] = hfp4_bf16_encode(acc);
        }
    return HFP4_OK;
}

hfp4_status hfp4_moe_combine_gpu(const void *y, int64_t ldy, int64_t layout_rows, int64_t n, const int32_t *row_pos,
                                 const void *weights, hfp4_dtype weights_dtype, int64_t tokens, int32_t top_k,
                                 void *out, hfp4_dtype out_dtype, int64_t ldo, hfp4_stream stream) {
    const char *fn = "hfp4_moe_combine_gpu";
    HFP4_TRY(check_combine(fn, y, ldy, layout_rows, n, row_pos, weights, weights_dtype, tokens, top_k, out, out_dtype,
                           ldo));
    return hfp4__moe_combine_launch(fn, y, ldy, layout_rows, n, row_pos, weights, weights_dtype, tokens, top_k, out,
                                    out_dtype, ldo, stream);
}
