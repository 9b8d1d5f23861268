/*
 * test_quantize.c - the CPU quantizers (src/quant/quantize.c): hand-worked rows whose scales and
 * codes are computed on paper (in the comments), K tails, packed UE8M0 words with their 127
 * padding bytes, MN-major scale layouts, a per-block cast with block-max checks, a large random
 * cast (threaded) against a model and an error bound, and every argument rejection with proof
 * that nothing was written.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef hfp4_status (*quant_fn)(const void *x, hfp4_dtype x_dtype, int64_t m, int64_t k, int64_t ldx, int use_ue8m0,
                                uint8_t *q, int64_t ldq, const hfp4_scales *sf);

static hfp4_scales kmajor(void *data, hfp4_dtype dtype, int32_t gran_mn, int32_t gran_k, int64_t stride_mn) {
    hfp4_scales s = {data, dtype, gran_mn, gran_k, stride_mn, 1, 0};
    return s;
}

/* ---- per-token FP8, hand-worked ------------------------------------------------------------- */

/* k = 8 < gran_k = 32: one group per row, zero-padded to 32 (padding never changes amax). */
static const float fp8_rows[4][8] = {
    /* amax 448 -> sf = 1: codes are fp8(x). 17 = 1.0625*16 is a tie 16/18 -> even 16 (0x58);
     * 0.001 = 0.512 subnormal steps -> 1 (0x01). */
    {448.0f, -1.0f, 0.5f, 3.0f, 0.0f, -448.0f, 17.0f, 0.001f},
    /* amax 896 -> sf = 2, x * 0.5: 448, 0.5, -1, 50 (1.5625*32: tie m=4/5 -> m=4 = 48, 0x64) */
    {896.0f, 1.0f, -2.0f, 100.0f, 0.0f, 0.0f, 0.0f, 0.0f},
    /* all zero: amax clamps to 1e-4, codes 0 */
    {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
    /* amax 1e-5 < 1e-4: sf = 1e-4/448, x * inv = 44.8 -> 44 (1.375*32, 0x63) */
    {1e-5f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, -1e-5f},
};
static const uint8_t fp8_rows_codes[4][8] = {
    {0x7E, 0xB8, 0x30, 0x44, 0x00, 0xFE, 0x58, 0x01},
    {0x7E, 0x30, 0xB8, 0x64, 0x00, 0x00, 0x00, 0x00},
    {0, 0, 0, 0, 0, 0, 0, 0},
    {0x63, 0, 0, 0, 0, 0, 0, 0xE3},
};

TEST(quant_fp8_per_token_fp32_scales_hand_worked) {
    uint8_t q[4 * 10];
    memset(q, 0xA5, sizeof q);
    float sf[4 * 2];
    for (int i = 0; i < 8; i++) sf[i] = -7.0f;
    hfp4_scales s = kmajor(sf, HFP4_DTYPE_FP32, 1, 32, 2); /* stride_mn 2: column 1 must stay untouched */
    CHECK_STATUS(hfp4_quantize_fp8_per_token(fp8_rows, HFP4_DTYPE_FP32, 4, 8, 8, 0, q, 10, &s), HFP4_OK);
    const float want_sf[4] = {1.0f, 2.0f, 1e-4f / 448.0f, 1e-4f / 448.0f};
    for (int r = 0; r < 4; r++) {
        CHECK_MSG(sf[2 * r] == want_sf[r], "row %d: sf = %.9g, want %.9g", r, sf[2 * r], want_sf[r]);
        CHECK(sf[2 * r + 1] == -7.0f);
        for (int c = 0; c < 8; c++)
            CHECK_MSG(q[r * 10 + c] == fp8_rows_codes[r][c], "q[%d][%d] = 0x%02X, want 0x%02X", r, c, q[r * 10 + c],
                      fp8_rows_codes[r][c]);
        CHECK(q[r * 10 + 8] == 0xA5 && q[r * 10 + 9] == 0xA5); /* ldq padding untouched */
    }
    CHECK(want_sf[2] > 2.2e-7f && want_sf[2] < 2.3e-7f); /* 1e-4 / 448 */
}

TEST(quant_fp8_per_token_ue8m0_hand_worked) {
    /* amax 1344 -> sf = 1344/448 = 3 -> ceil 4 (byte 129), x * 0.25:
     *   1344 -> 336: tie 320 (m=2) / 352 (m=3) -> 320 = 0x7A
     *   -672 -> -168: tie 160/176 -> -160 = 0xF2
     *   100 -> 25: tie 24/26 -> 24 = 0x5C
     *   1 -> 0.25 = 0x28
     * zero row: sf = 1e-4/448 = 2.23e-7 -> ceil 2^-22 (byte 105). */
    const float x[2][4] = {{1344.0f, -672.0f, 100.0f, 1.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    const uint8_t want_q[4] = {0x7A, 0xF2, 0x5C, 0x28};
    const uint8_t want_e[2] = {129, 105};
    const float want_sf[2] = {4.0f, ldexpf(1.0f, -22)};
    for (int gran = 32; gran <= 128; gran += 96) {
        /* FP32 storage of power-of-two scales */
        uint8_t q[8];
        float sf32[2];
        hfp4_scales s = kmajor(sf32, HFP4_DTYPE_FP32, 1, gran, 1);
        CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, 2, 4, 4, 1, q, 4, &s), HFP4_OK);
        CHECK(sf32[0] == want_sf[0] && sf32[1] == want_sf[1]);
        for (int c = 0; c < 4; c++) CHECK_MSG(q[c] == want_q[c], "q[%d] = 0x%02X", c, q[c]);
        for (int c = 4; c < 8; c++) CHECK(q[c] == 0);
        /* UE8M0 bytes */
        uint8_t e[2] = {0, 0};
        s = kmajor(e, HFP4_DTYPE_UE8M0, 1, gran, 1);
        memset(q, 0xA5, sizeof q);
        CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, 2, 4, 4, 1, q, 4, &s), HFP4_OK);
        CHECK(e[0] == want_e[0] && e[1] == want_e[1]);
        for (int c = 0; c < 4; c++) CHECK(q[c] == want_q[c]);
        /* packed: one group, so bytes 1..3 of each word are the 127 padding */
        uint32_t w[2] = {0, 0};
        s = kmajor(w, HFP4_DTYPE_UE8M0_PACKED, 1, gran, 1);
        CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, 2, 4, 4, 1, q, 4, &s), HFP4_OK);
        CHECK_MSG(w[0] == 0x7F7F7F81u && w[1] == 0x7F7F7F69u, "words 0x%08X 0x%08X", w[0], w[1]);
    }
}

TEST(quant_fp8_per_token_k_tail_and_packed_words) {
    /* k = 40, gran 32: group 0 = cols 0..31 (amax 896 -> sf 2), group 1 = cols 32..39, zero-padded to
     * 64 (amax 7 -> sf 7/448 = 2^-6 exactly, x * 64): 7 -> 448 (0x7E), -3.5 -> -224 (0xF6),
     * 2^-7 -> 0.5 (0x30). */
    float x[40] = {0};
    x[0] = 896.0f;
    x[1] = -3.0f; /* -1.5 -> 0xBC */
    x[32] = 7.0f;
    x[33] = -3.5f;
    x[34] = 0.0078125f;
    for (int use_ue8m0 = 0; use_ue8m0 <= 1; use_ue8m0++) {
        uint8_t q[40];
        float sf[2];
        hfp4_scales s = kmajor(sf, HFP4_DTYPE_FP32, 1, 32, 2);
        CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, 1, 40, 40, use_ue8m0, q, 40, &s), HFP4_OK);
        CHECK(sf[0] == 2.0f && sf[1] == 0.015625f); /* both powers of two: same either way */
        CHECK(q[0] == 0x7E && q[1] == 0xBC && q[32] == 0x7E && q[33] == 0xF6 && q[34] == 0x30);
        for (int c = 2; c < 32; c++) CHECK(q[c] == 0);
        for (int c = 35; c < 40; c++) CHECK(q[c] == 0);
    }
    uint32_t w = 0;
    uint8_t q[40];
    hfp4_scales s = kmajor(&w, HFP4_DTYPE_UE8M0_PACKED, 1, 32, 1);
    CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, 1, 40, 40, 1, q, 40, &s), HFP4_OK);
    CHECK_MSG(w == 0x7F7F7980u, "packed word 0x%08X, want bytes 128, 121, then 127 127", w);

    /* k = 200 gran 32: 7 groups -> 2 words per row; group j has amax 448 * 2^j -> byte 127 + j.
     * Word 0 = 127,128,129,130; word 1 = 131,132,133 and padding 127. Same with gran 128: 2 groups. */
    float x2[2 * 200];
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 200; c++) x2[r * 200 + c] = (c % 32 == 5) ? ldexpf(448.0f, c / 32) : 1.0f;
    uint32_t words[2 * 3];
    for (int i = 0; i < 6; i++) words[i] = 0xDEADBEEFu;
    uint8_t q2[2 * 200];
    s = kmajor(words, HFP4_DTYPE_UE8M0_PACKED, 1, 32, 3);
    CHECK_STATUS(hfp4_quantize_fp8_per_token(x2, HFP4_DTYPE_FP32, 2, 200, 200, 1, q2, 200, &s), HFP4_OK);
    for (int r = 0; r < 2; r++) {
        CHECK_MSG(words[3 * r] == 0x8281807Fu, "row %d word 0 = 0x%08X", r, words[3 * r]);
        CHECK_MSG(words[3 * r + 1] == 0x7F858483u, "row %d word 1 = 0x%08X", r, words[3 * r + 1]);
        CHECK(words[3 * r + 2] == 0xDEADBEEFu);
        for (int c = 0; c < 200; c++)
            CHECK(q2[r * 200 + c] == (c % 32 == 5 ? 0x7E : hfp4_fp8_encode(ldexpf(1.0f, -(c / 32)))));
    }
    /* gran 128: group 0 amax 448*2^3 (byte 130), group 1 (cols 128..199) amax 448*2^6 (byte 133) */
    uint32_t w128 = 0;
    s = kmajor(&w128, HFP4_DTYPE_UE8M0_PACKED, 1, 128, 1);
    CHECK_STATUS(hfp4_quantize_fp8_per_token(x2, HFP4_DTYPE_FP32, 1, 200, 200, 1, q2, 200, &s), HFP4_OK);
    CHECK_MSG(w128 == 0x7F7F8582u, "gran 128 word 0x%08X", w128);
}

TEST(quant_fp8_per_token_mn_major_scales) {
    /* DeepGEMM's MN-major TMA-aligned layout: stride_mn 1, stride_k align(m, 4). m = 5 -> 8; the three
     * alignment rows of each column are never written. Row r has amax 448 * 2^r in group 0 and
     * 448 * 2^-r in group 1 (k = 64, gran 32). */
    enum { M = 5, K = 64, T = 8 };
    float x[M * K];
    for (int r = 0; r < M; r++)
        for (int c = 0; c < K; c++) x[r * K + c] = c == 0 ? ldexpf(448.0f, r) : c == 32 ? ldexpf(448.0f, -r) : 0.0f;
    uint8_t q[M * K];
    float sf[2 * T];
    for (int i = 0; i < 2 * T; i++) sf[i] = -1.0f;
    hfp4_scales s = {sf, HFP4_DTYPE_FP32, 1, 32, 1, T, 0};
    CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, M, K, K, 0, q, K, &s), HFP4_OK);
    for (int r = 0; r < T; r++) {
        float w0 = r < M ? ldexpf(1.0f, r) : -1.0f, w1 = r < M ? ldexpf(1.0f, -r) : -1.0f;
        CHECK_MSG(sf[r] == w0 && sf[T + r] == w1, "row %d: %g %g", r, sf[r], sf[T + r]);
    }
    /* packed, MN-major: m = 5 rows x 1 word, stride_k = 8 (one column only) */
    uint32_t w[T];
    for (int i = 0; i < T; i++) w[i] = 0xDEADBEEFu;
    hfp4_scales sp = {w, HFP4_DTYPE_UE8M0_PACKED, 1, 32, 1, T, 0};
    CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, M, K, K, 1, q, K, &sp), HFP4_OK);
    for (int r = 0; r < T; r++) {
        uint32_t want = r < M ? (0x7F7F0000u | (uint32_t)(127 - r) << 8 | (uint32_t)(127 + r)) : 0xDEADBEEFu;
        CHECK_MSG(w[r] == want, "row %d word 0x%08X, want 0x%08X", r, w[r], want);
    }
}

TEST(quant_bf16_input_matches_fp32_input) {
    /* The same bf16-exact values through both input types give identical codes and scales; ldx > k. */
    enum { M = 3, K = 96, LDX = 100 };
    hfp4_rng rng = hfp4_rng_make(21);
    float xf[M * LDX];
    uint16_t xb[M * LDX];
    for (int i = 0; i < M * LDX; i++) {
        xb[i] = hfp4_bf16_encode((float)(hfp4_rng_normal(&rng) * 10.0));
        xf[i] = hfp4_bf16_decode(xb[i]);
    }
    quant_fn fns[2] = {hfp4_quantize_fp8_per_token, hfp4_quantize_fp4_per_token};
    for (int f = 0; f < 2; f++) {
        int64_t ldq = f == 0 ? K : K / 2;
        uint8_t qa[M * K], qb[M * K];
        float sa[M * 3], sb[M * 3];
        memset(qa, 0x11, sizeof qa);
        memset(qb, 0x22, sizeof qb);
        hfp4_scales s_a = kmajor(sa, HFP4_DTYPE_FP32, 1, 32, 3), s_b = kmajor(sb, HFP4_DTYPE_FP32, 1, 32, 3);
        CHECK_STATUS(fns[f](xf, HFP4_DTYPE_FP32, M, K, LDX, 0, qa, ldq, &s_a), HFP4_OK);
        CHECK_STATUS(fns[f](xb, HFP4_DTYPE_BF16, M, K, LDX, 0, qb, ldq, &s_b), HFP4_OK);
        CHECK(memcmp(qa, qb, (size_t)(M * ldq)) == 0);
        CHECK(memcmp(sa, sb, sizeof sa) == 0);
        CHECK(sa[0] > 0.0f);
    }
}

/* ---- per-token FP4, hand-worked ------------------------------------------------------------- */

TEST(quant_fp4_per_token_hand_worked) {
    /* Row 0: amax 6 -> sf = 1; codes 6->7, -0.75->0x9 (tie to 0.5), 0.25->0, 1.75->3, 5->6, -5.5->0xF,
     *        2.5->4, 0.3->1. Bytes pack the even index low: 0x97 0x30 0xF6 0x14.
     * Row 1: amax 3 -> sf = 0.5, x*2: 3->6 (7), 1.25->2.5 (4), -0.125->-0.25 (0, not 0x8), 0.875->1.75 (3):
     *        0x47 0x30, rest zero. */
    const float x[2][8] = {{6.0f, -0.75f, 0.25f, 1.75f, 5.0f, -5.5f, 2.5f, 0.3f},
                           {3.0f, 1.25f, -0.125f, 0.875f, 0.0f, 0.0f, 0.0f, -0.0f}};
    const uint8_t want[2][4] = {{0x97, 0x30, 0xF6, 0x14}, {0x47, 0x30, 0x00, 0x00}};
    uint8_t q[2 * 5];
    memset(q, 0xA5, sizeof q);
    float sf[2];
    hfp4_scales s = kmajor(sf, HFP4_DTYPE_FP32, 1, 32, 1);
    CHECK_STATUS(hfp4_quantize_fp4_per_token(x, HFP4_DTYPE_FP32, 2, 8, 8, 0, q, 5, &s), HFP4_OK);
    CHECK(sf[0] == 1.0f && sf[1] == 0.5f);
    for (int r = 0; r < 2; r++) {
        for (int b = 0; b < 4; b++)
            CHECK_MSG(q[r * 5 + b] == want[r][b], "q[%d][%d] = 0x%02X, want 0x%02X", r, b, q[r * 5 + b], want[r][b]);
        CHECK(q[r * 5 + 4] == 0xA5);
    }
}

TEST(quant_fp4_per_token_ue8m0_hand_worked) {
    /* amax 7 -> sf = 7/6 -> ceil 2 (byte 128), x * 0.5: 7->3.5 (tie -> 3, code 5), -7 -> 0xD,
     * 1.5->0.75 (tie -> 0.5, code 1), -2.5->-1.25 (tie -> -1, 0xA). Bytes 0xD5 0xA1. */
    const float x[4] = {7.0f, -7.0f, 1.5f, -2.5f};
    uint8_t q[2];
    float sf;
    hfp4_scales s = kmajor(&sf, HFP4_DTYPE_FP32, 1, 32, 1);
    CHECK_STATUS(hfp4_quantize_fp4_per_token(x, HFP4_DTYPE_FP32, 1, 4, 4, 1, q, 2, &s), HFP4_OK);
    CHECK(sf == 2.0f);
    CHECK_MSG(q[0] == 0xD5 && q[1] == 0xA1, "q = 0x%02X 0x%02X", q[0], q[1]);
    /* without use_ue8m0 the scale is 7/6 in FP32 and 7 * (1/sf) rounds to exactly 6 or just above 5 */
    CHECK_STATUS(hfp4_quantize_fp4_per_token(x, HFP4_DTYPE_FP32, 1, 4, 4, 0, q, 2, &s), HFP4_OK);
    CHECK(sf == 7.0f / 6.0f);
    CHECK((q[0] & 0xF) == 0x7 && (q[0] >> 4) == 0xF);
    uint8_t e = 0;
    s = kmajor(&e, HFP4_DTYPE_UE8M0, 1, 32, 1);
    CHECK_STATUS(hfp4_quantize_fp4_per_token(x, HFP4_DTYPE_FP32, 1, 4, 4, 1, q, 2, &s), HFP4_OK);
    CHECK(e == 128);
}

TEST(quant_fp4_per_token_k_tail_packed) {
    /* k = 40: group 0 (cols 0..31) amax 12 -> sf 2: 12 -> 6 (7), 1 -> 0.5 (1): byte 0 = 0x17.
     * group 1 (cols 32..39, zero-padded to 64) amax 1.5 -> sf 0.25: 1.5 -> 6 (7), -0.375 -> -1.5 (0xB):
     * byte 16 = 0xB7. UE8M0 bytes 128 and 125, packed word 0x7F7F7D80. */
    float x[40] = {0};
    x[0] = 12.0f;
    x[1] = 1.0f;
    x[32] = 1.5f;
    x[33] = -0.375f;
    uint8_t q[20];
    float sf[2];
    hfp4_scales s = kmajor(sf, HFP4_DTYPE_FP32, 1, 32, 2);
    CHECK_STATUS(hfp4_quantize_fp4_per_token(x, HFP4_DTYPE_FP32, 1, 40, 40, 0, q, 20, &s), HFP4_OK);
    CHECK(sf[0] == 2.0f && sf[1] == 0.25f);
    CHECK_MSG(q[0] == 0x17 && q[16] == 0xB7, "q[0] = 0x%02X q[16] = 0x%02X", q[0], q[16]);
    for (int b = 1; b < 20; b++)
        if (b != 16) CHECK(q[b] == 0);
    uint32_t w = 0;
    s = kmajor(&w, HFP4_DTYPE_UE8M0_PACKED, 1, 32, 1);
    CHECK_STATUS(hfp4_quantize_fp4_per_token(x, HFP4_DTYPE_FP32, 1, 40, 40, 1, q, 20, &s), HFP4_OK);
    CHECK_MSG(w == 0x7F7F7D80u, "packed word 0x%08X", w);
    CHECK(q[0] == 0x17 && q[16] == 0xB7);
}

TEST(quant_nan_input_propagates_like_torch) {
    /* torch.amax propagates NaN and clamp keeps it: the FP32 scale is NaN and the group's codes are
     * NaN (FP8 0x7F) or 0 (FP4); the other group is unaffected. */
    float x[64] = {0};
    x[3] = NAN;
    x[4] = 1.0f;
    x[40] = 448.0f;
    uint8_t q[64];
    float sf[2];
    hfp4_scales s = kmajor(sf, HFP4_DTYPE_FP32, 1, 32, 2);
    CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, 1, 64, 64, 0, q, 64, &s), HFP4_OK);
    CHECK(isnan(sf[0]) && sf[1] == 1.0f);
    CHECK(q[3] == 0x7F && q[4] == 0x7F && q[0] == 0x7F && q[40] == 0x7E);
    CHECK_STATUS(hfp4_quantize_fp4_per_token(x, HFP4_DTYPE_FP32, 1, 64, 64, 0, q, 32, &s), HFP4_OK);
    CHECK(isnan(sf[0]) && sf[1] == 448.0f / 6.0f);
    CHECK(q[1] == 0x00 && q[2] == 0x00 && (q[20] & 0xF) == 0x7);
}

/* With use_ue8m0 a NaN or Inf amax gave ceil_to_ue8m0's clamp, 2^127 (byte 254): a finite scale
 * under which the whole group quantized to zeros (found by an API review). It now gets the UE8M0
 * NaN (byte 255; NaN as FP32), so the group dequantizes to NaN as it does with FP32 scales. */
TEST(quant_ue8m0_non_finite_amax_gives_the_nan_scale) {
    float x[96];
    for (int i = 0; i < 96; i++) x[i] = 1.0f + (float)i;
    uint8_t q[96];
    for (int bad = 0; bad < 3; bad++) {
        const float v = bad == 0 ? INFINITY : bad == 1 ? -INFINITY : NAN;
        x[5] = v; /* group 0 of three (gran 32) */
        uint8_t e[3] = {0, 0, 0};
        hfp4_scales s = kmajor(e, HFP4_DTYPE_UE8M0, 1, 32, 3);
        CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, 1, 96, 96, 1, q, 96, &s), HFP4_OK);
        /* (groups 1 and 2: amax 64 and 96, / 448 -> 2^-2) */
        CHECK_MSG(e[0] == 255 && e[1] == 127 - 2 && e[2] == 127 - 2, "x[5] = %g: bytes %u %u %u", (double)v, e[0], e[1],
                  e[2]);
        CHECK(isnan(hfp4_fp8_decode(q[0]) * hfp4_ue8m0_decode(e[0])));
        CHECK(isnan(hfp4_fp8_decode(q[31]) * hfp4_ue8m0_decode(e[0])));
        CHECK(hfp4_fp8_decode(q[63]) * hfp4_ue8m0_decode(e[1]) == 64.0f); /* other groups unaffected */
        float f[3];
        s = kmajor(f, HFP4_DTYPE_FP32, 1, 32, 3);
        CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, 1, 96, 96, 1, q, 96, &s), HFP4_OK);
        CHECK(isnan(f[0]) && f[1] == 0.25f && f[2] == 0.25f);
        uint32_t w = 0;
        s = kmajor(&w, HFP4_DTYPE_UE8M0_PACKED, 1, 32, 1);
        CHECK_STATUS(hfp4_quantize_fp4_per_token(x, HFP4_DTYPE_FP32, 1, 96, 96, 1, q, 48, &s), HFP4_OK);
        CHECK_MSG((w & 0xFFu) == 255 && ((w >> 24) & 0xFFu) == 127, "packed word 0x%08X", w);
        CHECK(q[0] == 0 && q[15] == 0); /* FP4 codes of NaN x (1/NaN) are 0: NaN times the NaN scale */
    }
    x[5] = 6.0f;
    /* per block: the 128 x 128 block holding an Inf */
    float *xb = calloc(130 * 130, sizeof(float));
    uint8_t *qb = malloc(130 * 130), eb[4];
    for (int i = 0; i < 130 * 130; i++) xb[i] = 1.0f;
    xb[129 * 130 + 2] = INFINITY; /* block (1, 0) */
    hfp4_scales sb = {eb, HFP4_DTYPE_UE8M0, 128, 128, 2, 1, 0};
    CHECK_STATUS(hfp4_quantize_fp8_per_block(xb, HFP4_DTYPE_FP32, 130, 130, 130, 1, qb, 130, &sb), HFP4_OK);
    CHECK_MSG(eb[2] == 255 && eb[0] == 127 - 8 && eb[1] == 127 - 8 && eb[3] == 127 - 8, "block bytes %u %u %u %u", eb[0],
              eb[1], eb[2], eb[3]);
    free(xb);
    free(qb);
}

TEST(quant_multiplies_by_the_fp32_reciprocal) {
    /* torch computes x * (1/sf), not x / sf; the two differ by an ulp, which decides ties. The inputs
     * below were found by search so that x * (1/sf) lands exactly on a tie and x / sf just above. */
    uint32_t xb4 = 0x403BBBBCu, xb8 = 0x37A63797u;
    float x4[2], x8[2];
    x4[0] = 7.04f; /* FP4: sf = 7.04/6 */
    memcpy(&x4[1], &xb4, sizeof(float));
    x8[0] = 1.01f; /* FP8: sf = 1.01/448 */
    memcpy(&x8[1], &xb8, sizeof(float));
    const float sf4 = 7.04f / 6.0f, sf8 = 1.01f / 448.0f;
    /* preconditions: the reciprocal product is the tie, the quotient is not */
    CHECK(x4[1] * (1.0f / sf4) == 2.5f && x4[1] / sf4 > 2.5f);
    CHECK(x8[1] * (1.0f / sf8) == 4.5f * ldexpf(1.0f, -9) && x8[1] / sf8 > 4.5f * ldexpf(1.0f, -9));
    uint8_t q[2];
    float sf;
    hfp4_scales s = kmajor(&sf, HFP4_DTYPE_FP32, 1, 32, 1);
    CHECK_STATUS(hfp4_quantize_fp4_per_token(x4, HFP4_DTYPE_FP32, 1, 2, 2, 0, q, 1, &s), HFP4_OK);
    CHECK(sf == sf4);
    CHECK_MSG(q[0] == 0x47, "q = 0x%02X, want 0x47 (2.5 ties down to 2.0, code 4)", q[0]);
    CHECK_STATUS(hfp4_quantize_fp8_per_token(x8, HFP4_DTYPE_FP32, 1, 2, 2, 0, q, 2, &s), HFP4_OK);
    CHECK(sf == sf8);
    CHECK_MSG(q[1] == 0x04, "q = 0x%02X, want 0x04 (4.5 subnormal steps tie to even 4)", q[1]);
}

/* ---- a large random cast: threaded path, model and error bounds ------------------------------ */

/* The quantizer's contract for one group, restated: returns the scale (FP32) it must have written. */
static float model_scale(const float *row, int64_t c0, int64_t c1, float qmax, int use_ue8m0, int64_t *argmax) {
    float amax = 0.0f;
    *argmax = c0;
    for (int64_t c = c0; c < c1; c++)
        if (fabsf(row[c]) > amax) {
            amax = fabsf(row[c]);
            *argmax = c;
        }
    float sf = fmaxf(amax, 1e-4f) / qmax;
    return use_ue8m0 ? hfp4_ceil_to_ue8m0(sf) : sf;
}

TEST(quant_large_random_matches_model) {
    enum { M = 300, K = 1000, LDX = 1003 };
    float *x = malloc(sizeof(float) * M * LDX);
    uint8_t *q8 = malloc((size_t)M * K), *q4 = malloc((size_t)M * K / 2);
    float *sf8 = malloc(sizeof(float) * M * 8);
    uint32_t *sf4 = malloc(sizeof(uint32_t) * 8 * 300); /* MN-major packed: T = 300, 8 words */
    CHECK(x && q8 && q4 && sf8 && sf4);
    if (!x || !q8 || !q4 || !sf8 || !sf4) goto done;
    hfp4_rng rng = hfp4_rng_make(33);
    for (int i = 0; i < M * LDX; i++) x[i] = (float)(hfp4_rng_normal(&rng) * pow(10.0, (i / 97) % 7 - 3));

    /* FP8, gran 128, FP32 scales K-major */
    hfp4_scales s8 = kmajor(sf8, HFP4_DTYPE_FP32, 1, 128, 8);
    CHECK_STATUS(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, M, K, LDX, 0, q8, K, &s8), HFP4_OK);
    int64_t bad = 0, checked = 0;
    for (int r = 0; r < M; r++)
        for (int j = 0; j < 8; j++) {
            int64_t c0 = j * 128, c1 = c0 + 128 < K ? c0 + 128 : K, am;
            float sf = model_scale(x + r * LDX, c0, c1, 448.0f, 0, &am);
            bad += sf8[r * 8 + j] != sf;
            bad += (q8[r * K + am] & 0x7F) != 0x7E; /* the group max maps to +-448 */
            float inv = 1.0f / sf;
            for (int64_t c = c0; c < c1; c++) {
                float y = x[r * LDX + c] * inv;
                uint8_t got = q8[r * K + c];
                bad += got != hfp4_fp8_encode(y);
                /* e4m3 error: half a step, 2^-4 relative for normals, 2^-10 absolute for subnormals */
                double err = fabs((double)hfp4_fp8_decode(got) - y);
                bad += err > fmax(fabs(y) * 0.0625, ldexp(1.0, -10));
                checked++;
            }
        }
    CHECK_EQ_I64(bad, 0);
    CHECK_EQ_I64(checked, (int64_t)M * K);

    /* FP4, gran 32, UE8M0 packed MN-major (stride_mn 1, stride_k align(300, 4) = 300) */
    hfp4_scales s4 = {sf4, HFP4_DTYPE_UE8M0_PACKED, 1, 32, 1, 300, 0};
    CHECK_STATUS(hfp4_quantize_fp4_per_token(x, HFP4_DTYPE_FP32, M, K, LDX, 1, q4, K / 2, &s4), HFP4_OK);
    bad = checked = 0;
    for (int r = 0; r < M; r++)
        for (int j = 0; j < 32; j++) { /* ceil(1000/32) = 32 groups, the last has 8 columns */
            int64_t c0 = j * 32, c1 = c0 + 32 < K ? c0 + 32 : K, am;
            float sf = model_scale(x + r * LDX, c0, c1, 6.0f, 1, &am);
            uint8_t e = (uint8_t)(sf4[(j / 4) * 300 + r] >> (8 * (j % 4)));
            bad += hfp4_ue8m0_decode(e) != sf;
            float inv = 1.0f / sf;
            float ymax = fabsf(x[r * LDX + am] * inv);
            bad += !(ymax > 3.0f && ymax <= 6.0f); /* a power-of-two scale puts the max in (3, 6] */
            for (int64_t c = c0; c < c1; c++) {
                float y = x[r * LDX + c] * inv;
                uint8_t got = (q4[r * (K / 2) + c / 2] >> (4 * (c & 1))) & 0xF;
                bad += got != hfp4_fp4_encode(y);
                double half_gap = fabs(y) <= 2.0 ? 0.25 : fabs(y) <= 4.0 ? 0.5 : 1.0;
                bad += fabs((double)hfp4_fp4_decode(got) - y) > half_gap;
                checked++;
            }
        }
    CHECK_EQ_I64(bad, 0);
    CHECK_EQ_I64(checked, (int64_t)M * K);
done:
    free(x);
    free(q8);
    free(q4);
    free(sf8);
    free(sf4);
}

/* ---- per-block FP8 ---------------------------------------------------------------------------- */

TEST(quant_fp8_per_block_130x200) {
    /* 130 x 200: 2 x 2 blocks, the last row block 2 rows tall and the last column block 72 wide.
     * Each block gets its own magnitude so the four scales differ; block (1, 1) is all zero. */
    enum { M = 130, K = 200, LDQ = 208 };
    float *x = malloc(sizeof(float) * M * K);
    uint8_t *q = malloc((size_t)M * LDQ);
    CHECK(x && q);
    if (!x || !q) goto done;
    hfp4_rng rng = hfp4_rng_make(44);
    const double mag[2][2] = {{1.0, 1000.0}, {0.01, 0.0}};
    for (int r = 0; r < M; r++)
        for (int c = 0; c < K; c++) x[r * K + c] = (float)(hfp4_rng_normal(&rng) * mag[r / 128][c / 128]);
    for (int use_ue8m0 = 0; use_ue8m0 <= 1; use_ue8m0++) {
        memset(q, 0xA5, (size_t)M * LDQ);
        float sf32[4] = {-1, -1, -1, -1};
        uint8_t sfe[8];
        memset(sfe, 0xA5, sizeof sfe);
        /* FP32 K-major [2, 2]; UE8M0 MN-major TMA-aligned: stride_mn 1, stride_k align(2, 4) = 4 */
        hfp4_scales s = use_ue8m0 ? (hfp4_scales){sfe, HFP4_DTYPE_UE8M0, 128, 128, 1, 4, 0}
                                  : kmajor(sf32, HFP4_DTYPE_FP32, 128, 128, 2);
        CHECK_STATUS(hfp4_quantize_fp8_per_block(x, HFP4_DTYPE_FP32, M, K, K, use_ue8m0, q, LDQ, &s), HFP4_OK);
        for (int br = 0; br < 2; br++)
            for (int bc = 0; bc < 2; bc++) {
                float amax = 0.0f;
                int ar = br * 128, ac = bc * 128;
                for (int r = br * 128; r < M && r < br * 128 + 128; r++)
                    for (int c = bc * 128; c < K && c < bc * 128 + 128; c++)
                        if (fabsf(x[r * K + c]) > amax) {
                            amax = fabsf(x[r * K + c]);
                            ar = r;
                            ac = c;
                        }
                float want = fmaxf(amax, 1e-4f) / 448.0f;
                float got;
                if (use_ue8m0) {
                    want = hfp4_ceil_to_ue8m0(want);
                    got = hfp4_ue8m0_decode(sfe[bc * 4 + br]);
                } else {
                    got = sf32[br * 2 + bc];
                }
                CHECK_MSG(got == want, "block (%d,%d): sf %.9g, want %.9g", br, bc, got, want);
                uint8_t qmax = q[ar * LDQ + ac];
                if (amax == 0.0f) {
                    CHECK(got > 0.0f && (use_ue8m0 || got == 1e-4f / 448.0f));
                } else if (!use_ue8m0) {
                    CHECK_MSG((qmax & 0x7F) == 0x7E, "block (%d,%d) max -> 0x%02X, want +-448", br, bc, qmax);
                } else {
                    float d = fabsf(hfp4_fp8_decode(qmax));
                    CHECK_MSG(d >= 224.0f && d <= 448.0f, "block (%d,%d) max -> %g", br, bc, d);
                }
                CHECK((qmax >> 7) == (signbit(x[ar * K + ac]) != 0)); /* -0 encodes to 0x80 */
                int64_t bad = 0;
                float inv = 1.0f / want;
                for (int r = br * 128; r < M && r < br * 128 + 128; r++)
                    for (int c = bc * 128; c < K && c < bc * 128 + 128; c++)
                        bad += q[r * LDQ + c] != hfp4_fp8_encode(x[r * K + c] * inv);
                CHECK_EQ_I64(bad, 0);
            }
        for (int r = 0; r < M; r++)
            for (int c = K; c < LDQ; c++) CHECK(q[r * LDQ + c] == 0xA5);
        if (use_ue8m0)
            for (int i = 0; i < 8; i++)
                if (i % 4 >= 2) CHECK(sfe[i] == 0xA5); /* the TMA alignment rows */
    }
done:
    free(x);
    free(q);
}

/* ---- rejections: exact status, message names the argument, nothing written ------------------- */

static float bad_x[8 * 256];
static uint8_t bad_q[8 * 256];
static uint32_t bad_sf[512];

static void fill_sentinels(void) {
    memset(bad_q, 0xA5, sizeof bad_q);
    memset(bad_sf, 0x5A, sizeof bad_sf);
}

static int outputs_untouched(void) {
    for (size_t i = 0; i < sizeof bad_q; i++)
        if (bad_q[i] != 0xA5) return 0;
    const uint8_t *s = (const uint8_t *)bad_sf;
    for (size_t i = 0; i < sizeof bad_sf; i++)
        if (s[i] != 0x5A) return 0;
    return 1;
}

typedef struct qcall {
    quant_fn fn;
    const void *x;
    hfp4_dtype x_dtype;
    int64_t m, k, ldx;
    int use_ue8m0;
    uint8_t *q;
    int64_t ldq;
    hfp4_scales sf;
    int sf_null;
} qcall;

static hfp4_status run_call(const qcall *c) {
    return c->fn(c->x, c->x_dtype, c->m, c->k, c->ldx, c->use_ue8m0, c->q, c->ldq, c->sf_null ? NULL : &c->sf);
}

#define EXPECT_REJECT(call, needle)                                                                  \
    do {                                                                                             \
        qcall c_ = (call);                                                                           \
        fill_sentinels();                                                                            \
        CHECK_REJECT(run_call(&c_), HFP4_ERR_INVALID_ARGUMENT, needle);                              \
        CHECK_MSG(outputs_untouched(), "a rejected call (\"%s\") wrote its outputs", needle);        \
    } while (0)

/* Valid calls for 4 x 64 inputs, checked to succeed (and write) before their mutations are tried. */
static qcall base_fp8_per_token(void) {
    qcall c = {hfp4_quantize_fp8_per_token, bad_x, HFP4_DTYPE_FP32, 4, 64, 64, 0, bad_q, 64,
               {bad_sf, HFP4_DTYPE_FP32, 1, 32, 2, 1, 0}, 0};
    return c;
}
static qcall base_fp4_per_token(void) {
    qcall c = {hfp4_quantize_fp4_per_token, bad_x, HFP4_DTYPE_FP32, 4, 64, 64, 0, bad_q, 32,
               {bad_sf, HFP4_DTYPE_FP32, 1, 32, 2, 1, 0}, 0};
    return c;
}
static qcall base_fp8_per_block(void) {
    qcall c = {hfp4_quantize_fp8_per_block, bad_x, HFP4_DTYPE_FP32, 8, 256, 256, 0, bad_q, 256,
               {bad_sf, HFP4_DTYPE_FP32, 128, 128, 2, 1, 0}, 0};
    return c;
}

static void check_base_succeeds(qcall c) {
    for (size_t i = 0; i < sizeof bad_x / sizeof bad_x[0]; i++) bad_x[i] = (float)(i % 13) - 6.0f;
    fill_sentinels();
    CHECK_STATUS(run_call(&c), HFP4_OK);
    CHECK(!outputs_untouched());
}

TEST(quant_fp8_per_token_rejects_bad_arguments) {
    check_base_succeeds(base_fp8_per_token());
    qcall c;
    c = base_fp8_per_token(); c.x = NULL;
    EXPECT_REJECT(c, "hfp4_quantize_fp8_per_token: x is NULL");
    c = base_fp8_per_token(); c.q = NULL;
    EXPECT_REJECT(c, "q is NULL");
    c = base_fp8_per_token(); c.sf_null = 1;
    EXPECT_REJECT(c, "sf is NULL");
    c = base_fp8_per_token(); c.sf.data = NULL;
    EXPECT_REJECT(c, "sf.data is NULL");
    c = base_fp8_per_token(); c.x_dtype = HFP4_DTYPE_FP8_E4M3;
    EXPECT_REJECT(c, "x_dtype = fp8_e4m3 (3) must be fp32 or bf16");
    c = base_fp8_per_token(); c.m = 0;
    EXPECT_REJECT(c, "m = 0 must be > 0");
    c = base_fp8_per_token(); c.m = -3;
    EXPECT_REJECT(c, "m = -3 must be > 0");
    c = base_fp8_per_token(); c.k = 0;
    EXPECT_REJECT(c, "k = 0 must be > 0");
    c = base_fp8_per_token(); c.ldx = 63;
    EXPECT_REJECT(c, "ldx = 63 must be >= k = 64");
    c = base_fp8_per_token(); c.ldq = 63;
    EXPECT_REJECT(c, "ldq = 63 must be >= 64");
    c = base_fp8_per_token(); c.sf.gran_k = 64;
    EXPECT_REJECT(c, "sf.gran_k = 64 must be 32 or 128");
    c = base_fp8_per_token(); c.sf.gran_mn = 128;
    EXPECT_REJECT(c, "sf.gran_mn = 128, expected 1");
    c = base_fp8_per_token(); c.sf.dtype = HFP4_DTYPE_BF16;
    EXPECT_REJECT(c, "sf.dtype = bf16 (2) is not an accepted scale dtype");
    c = base_fp8_per_token(); c.sf.dtype = HFP4_DTYPE_UE8M0;
    EXPECT_REJECT(c, "sf.dtype = ue8m0 needs use_ue8m0 = 1");
    c = base_fp8_per_token(); c.sf.dtype = HFP4_DTYPE_UE8M0_PACKED;
    EXPECT_REJECT(c, "sf.dtype = ue8m0_packed needs use_ue8m0 = 1");
    c = base_fp8_per_token(); c.sf.stride_mn = 1; /* 4 rows x 2 groups cannot share stride 1 */
    EXPECT_REJECT(c, "sf strides (mn 1, k 1) are too small for 4 scale rows x 2 scale columns");
    c = base_fp8_per_token(); c.sf.stride_k = -1;
    EXPECT_REJECT(c, "must be >= 0");
    /* strides and sizes whose offsets would overflow int64 (a fuzzing review's crashes) */
    c = base_fp8_per_token(); c.ldx = (int64_t)1 << 62;
    EXPECT_REJECT(c, "x's last element lies past 2^60");
    c = base_fp8_per_token(); c.ldq = (int64_t)1 << 62;
    EXPECT_REJECT(c, "q's last byte lies past 2^60");
    c = base_fp8_per_token(); c.k = INT64_MAX - 1; c.ldx = INT64_MAX; c.ldq = INT64_MAX;
    EXPECT_REJECT(c, "lies past 2^60");
    c = base_fp8_per_token(); c.sf.stride_mn = (int64_t)1 << 62;
    EXPECT_REJECT(c, "the last scale lies past 2^60");
    c = base_fp8_per_token(); c.x = (const char *)c.x + 2;
    EXPECT_REJECT(c, "must be 4-byte aligned for fp32");
    c = base_fp8_per_token(); c.sf.data = (const char *)c.sf.data + 1;
    EXPECT_REJECT(c, "sf.data");
}

TEST(quant_fp4_per_token_rejects_bad_arguments) {
    check_base_succeeds(base_fp4_per_token());
    qcall c;
    c = base_fp4_per_token(); c.k = 33; c.ldx = 64; c.ldq = 32;
    EXPECT_REJECT(c, "hfp4_quantize_fp4_per_token: k = 33 must be even");
    c = base_fp4_per_token(); c.ldq = 31;
    EXPECT_REJECT(c, "ldq = 31 must be >= 32");
    c = base_fp4_per_token(); c.ldx = 10;
    EXPECT_REJECT(c, "ldx = 10 must be >= k = 64");
    c = base_fp4_per_token(); c.sf.gran_k = 128;
    EXPECT_REJECT(c, "sf.gran_k = 128, expected 32");
    c = base_fp4_per_token(); c.x = NULL;
    EXPECT_REJECT(c, "hfp4_quantize_fp4_per_token: x is NULL");
    c = base_fp4_per_token(); c.x_dtype = HFP4_DTYPE_NONE;
    EXPECT_REJECT(c, "x_dtype = none (0)");
    c = base_fp4_per_token(); c.sf.dtype = HFP4_DTYPE_UE8M0;
    EXPECT_REJECT(c, "sf.dtype = ue8m0 needs use_ue8m0 = 1");
    /* MN-major with stride_k smaller than the 4 rows */
    c = base_fp4_per_token(); c.sf.stride_mn = 1; c.sf.stride_k = 3;
    EXPECT_REJECT(c, "sf strides (mn 1, k 3) are too small");
}

TEST(quant_fp8_per_block_rejects_bad_arguments) {
    check_base_succeeds(base_fp8_per_block());
    qcall c;
    c = base_fp8_per_block(); c.sf.gran_mn = 1;
    EXPECT_REJECT(c, "hfp4_quantize_fp8_per_block: sf.gran_mn = 1, expected 128");
    c = base_fp8_per_block(); c.sf.gran_k = 32;
    EXPECT_REJECT(c, "sf.gran_k = 32, expected 128");
    c = base_fp8_per_block(); c.sf.dtype = HFP4_DTYPE_UE8M0_PACKED; c.use_ue8m0 = 1;
    EXPECT_REJECT(c, "sf.dtype = ue8m0_packed (6) is not an accepted scale dtype");
    c = base_fp8_per_block(); c.sf.dtype = HFP4_DTYPE_UE8M0;
    EXPECT_REJECT(c, "sf.dtype = ue8m0 needs use_ue8m0 = 1");
    c = base_fp8_per_block(); c.m = 0;
    EXPECT_REJECT(c, "m = 0 must be > 0");
    c = base_fp8_per_block(); c.k = -128;
    EXPECT_REJECT(c, "k = -128 must be > 0");
    c = base_fp8_per_block(); c.ldq = 255;
    EXPECT_REJECT(c, "ldq = 255 must be >= 256");
    c = base_fp8_per_block(); c.q = NULL;
    EXPECT_REJECT(c, "hfp4_quantize_fp8_per_block: q is NULL");
    c = base_fp8_per_block(); c.sf.stride_mn = 1; /* 1 scale row x 2 columns: K-major stride_k 1 is fine... */
    c.sf.stride_k = 0;                            /* ...but stride_k 0 aliases the two columns */
    EXPECT_REJECT(c, "sf strides (mn 1, k 0) are too small for 1 scale rows x 2 scale columns");
}
