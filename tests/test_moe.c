/*
 * test_moe.c - the MoE glue's CPU forms (hfp4.h, "MoE glue"): the route's layout and positions
 * (segments aligned and in expert order, ranks in row order, sentinels -1), the row quantizer bit
 * for bit against hfp4_quantize_fp8_per_token, the combine against a sum in double, and the
 * argument checks. The GPU forms are checked against these in tests/gpu/test_moe_gpu.cu.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hfp4.h"
#include "../src/moe/swiglu_math.h"

TEST(moe_layout_rows_bound) {
    CHECK_EQ_I64(hfp4_moe_layout_rows(48, 256, 128), 48 + 48 * 127);
    CHECK_EQ_I64(hfp4_moe_layout_rows(24576, 256, 128), 24576 + 256 * 127);
    CHECK_EQ_I64(hfp4_moe_layout_rows(0, 8, 128), 0);
    CHECK_EQ_I64(hfp4_moe_layout_rows(-1, 8, 128), -1);
    CHECK_EQ_I64(hfp4_moe_layout_rows(5, 0, 128), -1);
}

TEST(moe_route_segments) {
    /* int64 ids with sentinels (-1, E) and an expert hit by no row */
    const int64_t ids[] = {2, 0, 5, 2, -1, 0, 2, 3};
    const int32_t E = 5, A = 8;
    const int64_t S = 8, rows = hfp4_moe_layout_rows(S, E, A);
    int32_t pos[8], *layout = (int32_t *)malloc(sizeof(int32_t) * (size_t)rows);
    CHECK_STATUS(hfp4_moe_route(ids, 1, S, E, A, pos, layout, rows), HFP4_OK);
    /* expert 0 at rows 0, 1 (rows 1 and 5 in order), expert 2 at 8.. (rows 0, 3, 6), expert 3 at 16 */
    const int32_t want[] = {8, 0, -1, 9, -1, 1, 10, 16};
    for (int i = 0; i < 8; i++) CHECK_EQ_I64(pos[i], want[i]);
    for (int64_t r = 0; r < rows; r++) {
        const int32_t e = r < 2 ? 0 : r >= 8 && r < 11 ? 2 : r == 16 ? 3 : -1;
        CHECK_EQ_I64(layout[r], e);
    }
    /* int32 ids: the same */
    const int32_t ids32[] = {2, 0, 5, 2, -1, 0, 2, 3};
    int32_t pos32[8];
    CHECK_STATUS(hfp4_moe_route(ids32, 0, S, E, A, pos32, layout, rows), HFP4_OK);
    CHECK(memcmp(pos, pos32, sizeof pos) == 0);
    free(layout);
}

TEST(moe_route_rejections) {
    const int32_t ids[4] = {0, 1, 0, 1};
    int32_t pos[4], layout[64];
    CHECK_REJECT(hfp4_moe_route(ids, 0, 4, 2, 8, pos, layout, 9), HFP4_ERR_INVALID_ARGUMENT,
                 "layout_rows = 9 must be >= 18");
    CHECK_REJECT(hfp4_moe_route(ids, 0, 4, 2, 12, pos, layout, 64), HFP4_ERR_INVALID_ARGUMENT, "alignment = 12");
    CHECK_REJECT(hfp4_moe_route(ids, 0, 0, 2, 8, pos, layout, 64), HFP4_ERR_INVALID_ARGUMENT, "routed_rows = 0");
    CHECK_REJECT(hfp4_moe_route(ids, 0, 4, 0, 8, pos, layout, 64), HFP4_ERR_INVALID_ARGUMENT, "num_experts = 0");
    CHECK_REJECT(hfp4_moe_route(NULL, 0, 4, 2, 8, pos, layout, 64), HFP4_ERR_INVALID_ARGUMENT, "ids = (nil)");
}

static uint16_t bf16_of(double v) { return hfp4_bf16_encode((float)v); }

TEST(moe_quantize_rows_match_the_per_token_cast) {
    /* tokens x top_k rows from BF16 hidden states (row_div = top_k), k with a partial last group */
    const int64_t tokens = 5, top_k = 3, S = tokens * top_k, k = 300;
    for (int g = 0; g < 2; g++) {
        const int32_t gran = g ? 32 : 128, E = 4, A = 8;
        const int64_t sfc = (k + gran - 1) / gran, rows = hfp4_moe_layout_rows(S, E, A);
        hfp4_rng rng = hfp4_rng_make(40 + g);
        uint16_t *x = (uint16_t *)malloc(sizeof(uint16_t) * tokens * k);
        for (int64_t i = 0; i < tokens * k; i++) x[i] = bf16_of(hfp4_rng_normal(&rng) * (i % 7 == 0 ? 30.0 : 1.0));
        int32_t ids[15], pos[15];
        for (int i = 0; i < S; i++) ids[i] = i == 4 ? 9 : (int32_t)(hfp4_rng_next(&rng) % (uint64_t)E);
        int32_t *layout = (int32_t *)malloc(sizeof(int32_t) * (size_t)rows);
        CHECK_STATUS(hfp4_moe_route(ids, 0, S, E, A, pos, layout, rows), HFP4_OK);
        uint8_t *a = (uint8_t *)malloc((size_t)(rows * k)), q[300];
        float *sf = (float *)malloc(sizeof(float) * (size_t)(rows * sfc)), sq[10];
        memset(a, 0xAB, (size_t)(rows * k));
        for (int64_t i = 0; i < rows * sfc; i++) sf[i] = -7.0f;
        CHECK_STATUS(hfp4_moe_quantize_rows(x, HFP4_DTYPE_BF16, tokens, k, k, (int32_t)top_k, pos, S, gran, a, k, sf,
                                            rows),
                     HFP4_OK);
        hfp4_scales s;
        memset(&s, 0, sizeof s);
        s.data = sq;
        s.dtype = HFP4_DTYPE_FP32;
        s.gran_mn = 1;
        s.gran_k = gran;
        s.stride_mn = sfc;
        s.stride_k = 1;
        for (int64_t i = 0; i < S; i++) {
            if (pos[i] < 0) continue;
            CHECK_STATUS(hfp4_quantize_fp8_per_token(x + (i / top_k) * k, HFP4_DTYPE_BF16, 1, k, k, 0, q, k, &s),
                         HFP4_OK);
            CHECK(memcmp(q, a + (int64_t)pos[i] * k, (size_t)k) == 0);
            CHECK(memcmp(sq, sf + (int64_t)pos[i] * sfc, sizeof(float) * (size_t)sfc) == 0);
        }
        for (int64_t r = 0; r < rows; r++) /* rows of no routed row: untouched */
            if (layout[r] < 0) CHECK(a[r * k] == 0xAB && sf[r * sfc] == -7.0f);
        CHECK_REJECT(hfp4_moe_quantize_rows(x, HFP4_DTYPE_BF16, tokens, k, k, (int32_t)top_k, pos, S, 64, a, k, sf,
                                            rows),
                     HFP4_ERR_INVALID_ARGUMENT, "gran_k = 64");
        CHECK_REJECT(hfp4_moe_quantize_rows(x, HFP4_DTYPE_BF16, tokens - 1, k, k, (int32_t)top_k, pos, S, gran, a, k,
                                            sf, rows),
                     HFP4_ERR_INVALID_ARGUMENT, "x_rows = 4 must be >= ceil(routed_rows / row_div) = 5");
        pos[2] = (int32_t)rows;
        CHECK_REJECT(hfp4_moe_quantize_rows(x, HFP4_DTYPE_BF16, tokens, k, k, (int32_t)top_k, pos, S, gran, a, k, sf,
                                            rows),
                     HFP4_ERR_INVALID_ARGUMENT, "row_pos[2]");
        free(x), free(layout), free(a), free(sf);
    }
}

TEST(moe_combine_sums_each_tokens_rows) {
    const int64_t tokens = 4, n = 37, rows = 40, ldy = 40;
    const int32_t top_k = 3;
    hfp4_rng rng = hfp4_rng_make(50);
    uint16_t *y = (uint16_t *)malloc(sizeof(uint16_t) * rows * ldy);
    for (int64_t i = 0; i < rows * ldy; i++) y[i] = bf16_of(hfp4_rng_normal(&rng));
    const int32_t pos[12] = {3, 17, -1, 0, 1, 2, -1, -1, -1, 39, 5, 5};
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = (float)hfp4_rng_uniform(&rng);
    float out[4 * 37];
    uint16_t outb[4 * 40];
    CHECK_STATUS(hfp4_moe_combine(y, ldy, rows, n, pos, w, HFP4_DTYPE_FP32, tokens, top_k, out, HFP4_DTYPE_FP32, n),
                 HFP4_OK);
    CHECK_STATUS(hfp4_moe_combine(y, ldy, rows, n, pos, w, HFP4_DTYPE_FP32, tokens, top_k, outb, HFP4_DTYPE_BF16, 40),
                 HFP4_OK);
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t c = 0; c < n; c++) {
            double want = 0;
            for (int j = 0; j < top_k; j++)
                if (pos[t * top_k + j] >= 0) want += (double)w[t * top_k + j] * hfp4_bf16_decode(y[pos[t * top_k + j] * ldy + c]);
            CHECK(fabs(out[t * n + c] - want) <= 1e-5 * (1 + fabs(want)));
            CHECK(outb[t * 40 + c] == hfp4_bf16_encode(out[t * n + c]));
        }
    for (int64_t c = 0; c < n; c++) CHECK(out[2 * n + c] == 0.0f); /* token 2: no routed row */
    int32_t bad[12];
    memcpy(bad, pos, sizeof bad);
    bad[7] = -2;
    CHECK_REJECT(hfp4_moe_combine(y, ldy, rows, n, bad, w, HFP4_DTYPE_FP32, tokens, top_k, out, HFP4_DTYPE_FP32, n),
                 HFP4_ERR_INVALID_ARGUMENT, "row_pos[7] = -2");
    CHECK_REJECT(hfp4_moe_combine(y, ldy, rows, n, pos, w, HFP4_DTYPE_FP8_E4M3, tokens, top_k, out, HFP4_DTYPE_FP32,
                                  n),
                 HFP4_ERR_INVALID_ARGUMENT, "weights_dtype");
    CHECK_REJECT(hfp4_moe_combine(y, 30, rows, n, pos, w, HFP4_DTYPE_FP32, tokens, top_k, out, HFP4_DTYPE_FP32, n),
                 HFP4_ERR_INVALID_ARGUMENT, "ldy = 30");
    free(y);
}

/* out written over y summed rows already overwritten (found by an API review: in-place combine
 * returned HFP4_OK with out[1][0] = 27 where 14 was exact); out over row_pos or weights likewise.
 * Both forms reject it: the check compares addresses only. */
TEST(moe_combine_rejects_out_overlapping_an_input) {
    uint16_t y[4 * 4];
    for (int i = 0; i < 16; i++) y[i] = hfp4_bf16_encode(1.0f + (float)i);
    int32_t rp[4] = {1, 2, 0, 3};
    float w[4] = {1, 1, 1, 1};
    uint16_t before[16];
    memcpy(before, y, sizeof y);
    CHECK_REJECT(hfp4_moe_combine(y, 4, 4, 4, rp, w, HFP4_DTYPE_FP32, 2, 2, y, HFP4_DTYPE_BF16, 4),
                 HFP4_ERR_INVALID_ARGUMENT, "overlaps y = ");
    CHECK_MSG(memcmp(before, y, sizeof y) == 0, "a rejected combine wrote out");
    CHECK_REJECT(hfp4_moe_combine_gpu(y, 4, 4, 4, rp, w, HFP4_DTYPE_FP32, 2, 2, y, HFP4_DTYPE_BF16, 4, NULL),
                 HFP4_ERR_INVALID_ARGUMENT, "hfp4_moe_combine_gpu: out = ");
    /* out's last row reaching into y's first: out = y - 3 elements, rows of 4 with ld 4 */
    uint16_t big[64];
    memcpy(big + 8, y, sizeof y);
    CHECK_REJECT(hfp4_moe_combine(big + 8, 4, 4, 4, rp, w, HFP4_DTYPE_FP32, 2, 2, big + 1, HFP4_DTYPE_BF16, 4),
                 HFP4_ERR_INVALID_ARGUMENT, "overlaps y");
    /* right before y: apart */
    CHECK_STATUS(hfp4_moe_combine(big + 8, 4, 4, 4, rp, w, HFP4_DTYPE_FP32, 2, 2, big, HFP4_DTYPE_BF16, 4), HFP4_OK);
    /* out over the routing or the weights */
    float buf[16];
    int32_t *rp2 = (int32_t *)buf;
    memcpy(rp2, rp, sizeof rp);
    CHECK_REJECT(hfp4_moe_combine(y, 4, 4, 4, rp2, w, HFP4_DTYPE_FP32, 2, 2, buf + 2, HFP4_DTYPE_FP32, 4),
                 HFP4_ERR_INVALID_ARGUMENT, "overlaps row_pos");
    memcpy(buf, w, sizeof w);
    CHECK_REJECT(hfp4_moe_combine(y, 4, 4, 4, rp, buf, HFP4_DTYPE_FP32, 2, 2, buf + 3, HFP4_DTYPE_FP32, 4),
                 HFP4_ERR_INVALID_ARGUMENT, "overlaps weights");
}

/* silu(x) = x / (1 + e^-x) in double, for the SwiGLU's reference */
static double silu_ref(double x) { return x / (1.0 + exp(-x)); }

TEST(moe_swiglu_exp_is_close_to_exp) {
    /* swiglu_math.h's exp against the double one over FP32's range, every 2^-7 step and around the
     * ends: within 3 ulp (CUDA's expf: 2) */
    double worst = 0.0;
    for (float x = -103.0f; x <= 88.7f; x += 0.0078125f) {
        const double want = exp((double)x), got = hfp4__expf(x);
        if (want < 1.2e-38) continue; /* (subnormal results: not used by silu, where 1 + e^-x is 1) */
        const double ulp = ldexp(1.0, ilogb(want) - 23), err = fabs(got - want) / ulp;
        if (err > worst) worst = err;
    }
    CHECK_MSG(worst <= 3.0, "hfp4__expf: %.2f ulp", worst);
    CHECK(hfp4__expf(100.0f) == INFINITY && hfp4__expf(-200.0f) == 0.0f && hfp4__expf(0.0f) == 1.0f);
    CHECK(isnan(hfp4__expf(NAN)));
}

/* The SwiGLU as swiglu_math.h first defined it: -g clamped to the general exp's whole range, that
 * exp (hfp4__expf_in_range: two-step scaling), and g itself selected past it */
static float swiglu_general(float g, float u, float limit) {
    const float lim = hfp4__round_bf16(limit);
    g = g > lim ? lim : g;
    u = u > lim ? lim : (u < -lim ? -lim : u);
    float t = -g;
    t = t >= HFP4_EXP_MIN ? t : HFP4_EXP_MIN;
    t = t <= HFP4_EXP_MAX ? t : HFP4_EXP_MAX;
    const float q = hfp4__round_bf16(g / (1.0f + hfp4__expf_in_range(t)));
    const float s = g < -HFP4_EXP_MAX ? -0.0f : (g > -HFP4_EXP_MIN ? g : q);
    return hfp4__round_bf16(s * u);
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

TEST(moe_swiglu_fast_forms_equal_the_general_ones) {
    /* hfp4__expf_mid is hfp4__expf_in_range bit for bit over its range (every FP32 value there
     * with a 2^-5 stride in the bit pattern, and both ends), and the SwiGLU with -g clamped at
     * HFP4_SWIGLU_T_MIN gives the general form's bits for every BF16 gate (NaN, infinities and
     * subnormals included) against up values of both signs and magnitudes, with and without a limit */
    int64_t bad = 0, n = 0;
    for (uint32_t b = 0; b < 0x80000000u; b += 32) {
        for (int sign = 0; sign < 2; sign++) {
            const uint32_t bits = b | (sign ? 0x80000000u : 0u);
            float x;
            memcpy(&x, &bits, sizeof x);
            if (!(x >= HFP4_SWIGLU_T_MIN && x <= HFP4_EXP_MAX)) continue;
            n++;
            bad += !same_bits(hfp4__expf_mid(x), hfp4__expf_in_range(x));
        }
    }
    CHECK(same_bits(hfp4__expf_mid(HFP4_SWIGLU_T_MIN), hfp4__expf_in_range(HFP4_SWIGLU_T_MIN)));
    CHECK(same_bits(hfp4__expf_mid(HFP4_EXP_MAX), hfp4__expf_in_range(HFP4_EXP_MAX)));
    CHECK_MSG(bad == 0, "hfp4__expf_mid differs from hfp4__expf_in_range on %lld of %lld inputs", (long long)bad,
              (long long)n);
    static const float ups[] = {1.0f, -1.0f, 0.0f, -0.0f, 3.140625f, -250.0f, 1e-30f, 65280.0f, INFINITY, NAN};
    static const float limits[] = {INFINITY, 10.0f, 7.0f};
    int64_t bad2 = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const uint32_t bits = h << 16;
        float g;
        memcpy(&g, &bits, sizeof g);
        for (size_t i = 0; i < sizeof ups / sizeof ups[0]; i++)
            for (size_t j = 0; j < sizeof limits / sizeof limits[0]; j++) {
                const float got = hfp4__swiglu_bf16(g, ups[i], limits[j]), want = swiglu_general(g, ups[i], limits[j]);
                if (!same_bits(got, want) && !(isnan(got) && isnan(want))) {
                    if (bad2++ < 5)
                        hfp4_test_fail(__FILE__, __LINE__, "g = %a (0x%04x), u = %g, limit = %g: %a, general %a",
                                       (double)g, (unsigned)h, (double)ups[i], (double)limits[j], (double)got,
                                       (double)want);
                }
            }
    }
    CHECK(bad2 == 0);
}

TEST(moe_swiglu_quantize_rows_match_the_activation_then_quantize_rows) {
    /* y [rows, ldy] BF16 (gate | up | stride gap), values past the limit both ways; routed rows on
     * some rows of the layout. The fused call's a and sf against: h by the SwiGLU of a double
     * reference (within a BF16 ulp, each step rounded as torch's), and bit for bit against
     * hfp4_moe_quantize_rows on the h the same function gives (its CPU form is the kernel's
     * reference) */
    const int64_t n = 300, ldy = 2 * n + 5, rows = 12, lda = n + 4, S = 5;
    const float limit = 7.0f;
    const hfp4_gate_up ST = HFP4_GATE_UP_STACKED;
    const int32_t pos[5] = {3, -1, 0, 11, 6};
    hfp4_rng rng = hfp4_rng_make(91);
    uint16_t *y = (uint16_t *)malloc(sizeof(uint16_t) * rows * ldy), *h = (uint16_t *)malloc(sizeof(uint16_t) * S * n);
    for (int64_t i = 0; i < rows * ldy; i++) y[i] = bf16_of(hfp4_rng_normal(&rng) * 4.0);
    for (int64_t i = 0; i < S; i++) {
        if (pos[i] < 0) continue;
        const uint16_t *row = y + pos[i] * ldy;
        for (int64_t c = 0; c < n; c++) {
            const float g = hfp4_bf16_decode(row[c]), u = hfp4_bf16_decode(row[n + c]);
            h[i * n + c] = hfp4_bf16_encode(hfp4__swiglu_bf16(g, u, limit));
            /* the reference: clamp, silu in double rounded to BF16, the product rounded to BF16 */
            const double gc = g > limit ? limit : g, uc = u > limit ? limit : (u < -limit ? -limit : u);
            const double want = hfp4_bf16_decode(bf16_of(hfp4_bf16_decode(bf16_of(silu_ref(gc))) * uc));
            const double got = hfp4_bf16_decode(h[i * n + c]);
            CHECK_MSG(fabs(got - want) <= fabs(want) * 0x1p-7, "h[%lld][%lld] = %g, want %g", (long long)i,
                      (long long)c, got, want);
        }
    }
    for (int gi = 0; gi < 2; gi++) {
        const int32_t gran = gi ? 32 : 128;
        const int64_t sfc = (n + gran - 1) / gran;
        uint8_t *a1 = (uint8_t *)malloc((size_t)(rows * lda)), *a2 = (uint8_t *)malloc((size_t)(rows * lda));
        float *s1 = (float *)malloc(sizeof(float) * rows * sfc), *s2 = (float *)malloc(sizeof(float) * rows * sfc);
        memset(a1, 0x5A, (size_t)(rows * lda)), memset(a2, 0x5A, (size_t)(rows * lda));
        memset(s1, 0x5A, sizeof(float) * rows * sfc), memset(s2, 0x5A, sizeof(float) * rows * sfc);
        CHECK_STATUS(hfp4_moe_swiglu_quantize_rows(y, ldy, n, ST, limit, pos, S, gran, a1, lda, s1,
                                                   rows),
                     HFP4_OK);
        CHECK_STATUS(hfp4_moe_quantize_rows(h, HFP4_DTYPE_BF16, S, n, n, 1, pos, S, gran, a2, lda, s2, rows), HFP4_OK);
        CHECK(memcmp(a1, a2, (size_t)(rows * lda)) == 0);
        CHECK(memcmp(s1, s2, sizeof(float) * rows * sfc) == 0);
        /* the same rows with gate and up interleaved (gate 2c, up 2c + 1): the same bits */
        uint16_t *yi = (uint16_t *)malloc(sizeof(uint16_t) * rows * ldy);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < n; c++) {
                yi[r * ldy + 2 * c] = y[r * ldy + c];
                yi[r * ldy + 2 * c + 1] = y[r * ldy + n + c];
            }
        memset(a2, 0x5A, (size_t)(rows * lda)), memset(s2, 0x5A, sizeof(float) * rows * sfc);
        CHECK_STATUS(hfp4_moe_swiglu_quantize_rows(yi, ldy, n, HFP4_GATE_UP_INTERLEAVED, limit, pos, S, gran, a2, lda,
                                                   s2, rows),
                     HFP4_OK);
        CHECK(memcmp(a1, a2, (size_t)(rows * lda)) == 0);
        CHECK(memcmp(s1, s2, sizeof(float) * rows * sfc) == 0);
        free(yi);
        free(a1), free(a2), free(s1), free(s2);
    }
    /* no limit: INFINITY */
    uint8_t a[4 * 300];
    float sf[4 * 3];
    CHECK_STATUS(hfp4_moe_swiglu_quantize_rows(y, ldy, n, ST, INFINITY, pos, 1, 128, a, n, sf, 4), HFP4_OK);
    /* rejections, each naming its argument */
    CHECK_REJECT(hfp4_moe_swiglu_quantize_rows(y, ldy, n, ST, 0.0f, pos, 1, 128, a, n, sf, 4), HFP4_ERR_INVALID_ARGUMENT,
                 "limit = 0");
    CHECK_REJECT(hfp4_moe_swiglu_quantize_rows(y, ldy, n, ST, NAN, pos, 1, 128, a, n, sf, 4), HFP4_ERR_INVALID_ARGUMENT,
                 "limit = nan");
    CHECK_REJECT(hfp4_moe_swiglu_quantize_rows(y, n, n, ST, limit, pos, 1, 128, a, n, sf, 4), HFP4_ERR_INVALID_ARGUMENT,
                 "ldy = 300");
    CHECK_REJECT(hfp4_moe_swiglu_quantize_rows(y, ldy, n, ST, limit, pos, 1, 64, a, n, sf, 4), HFP4_ERR_INVALID_ARGUMENT,
                 "gran_k = 64");
    CHECK_REJECT(hfp4_moe_swiglu_quantize_rows(y, ldy, n, ST, limit, pos, 1, 128, a, n, sf, 2), HFP4_ERR_INVALID_ARGUMENT,
                 "row_pos[0] = 3");
    CHECK_REJECT(hfp4_moe_swiglu_quantize_rows(NULL, ldy, n, ST, limit, pos, 1, 128, a, n, sf, 4),
                 HFP4_ERR_INVALID_ARGUMENT, "y = (nil)");
    CHECK_REJECT(hfp4_moe_swiglu_quantize_rows(y, ldy, n, (hfp4_gate_up)2, limit, pos, 1, 128, a, n, sf, 4),
                 HFP4_ERR_INVALID_ARGUMENT, "gate_up = 2");
    free(y), free(h);
}

TEST(moe_gpu_forms_without_a_gpu) {
    /* the same checks first; then NO_DEVICE (no GPU, or a build without CUDA) or OK on a GPU:
     * here only the argument checks are tested, with bad arguments */
    const int32_t ids[4] = {0, 1, 0, 1};
    int32_t pos[4], layout[64];
    CHECK_REJECT(hfp4_moe_route_gpu(ids, 0, 4, 2, 8, pos, layout, 9, NULL), HFP4_ERR_INVALID_ARGUMENT,
                 "layout_rows = 9");
    CHECK_REJECT(hfp4_moe_route_gpu(ids, 0, 4, 5000, 8, pos, layout, 40000, NULL), HFP4_ERR_UNSUPPORTED,
                 "num_experts = 5000");
    float sf[4];
    uint8_t a[4];
    CHECK_REJECT(hfp4_moe_quantize_rows_gpu(ids, HFP4_DTYPE_FP8_E4M3, 1, 4, 4, 1, pos, 1, 128, a, 4, sf, 1, NULL),
                 HFP4_ERR_INVALID_ARGUMENT, "x_dtype");
    CHECK_REJECT(hfp4_moe_combine_gpu(ids, 4, 4, 4, pos, sf, HFP4_DTYPE_FP32, 0, 1, sf, HFP4_DTYPE_FP32, 4, NULL),
                 HFP4_ERR_INVALID_ARGUMENT, "tokens = 0");
    CHECK_REJECT(hfp4_moe_swiglu_quantize_rows_gpu(ids, 8, 4, HFP4_GATE_UP_STACKED, -1.0f, pos, 1, 128, a, 4, sf, 1,
                                                   NULL),
                 HFP4_ERR_INVALID_ARGUMENT, "limit = -1");
}
