/*
 * test_formats.c - exactness of every scalar codec in src/formats/codecs.c, against independent
 * formulas (not the codec's own arithmetic) and exhaustively where the format is small enough:
 * all 16 FP4 codes, all 256 FP8 bytes, all 256 UE8M0 bytes, all 65536 BF16 patterns.
 * docs/FORMATS.md states the rules these tests hold the codecs to.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "harness.h"

static uint32_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- FP4 e2m1 -------------------------------------------------------------------------------- */

/* The OCP e2m1 value of a code, written from the bit fields (bias 1, code 1 the subnormal 0.5). */
static double fp4_value_from_fields(int code) {
    int s = (code >> 3) & 1, e = (code >> 1) & 3, m = code & 1;
    double mag = e == 0 ? m * 0.5 : (1.0 + m * 0.5) * ldexp(1.0, e - 1);
    return s ? -mag : mag;
}

/* The FP4 code nearest to x, ties to the smaller magnitude, by brute force over the 8 magnitudes. */
static uint8_t fp4_nearest_brute(float x) {
    if (x != x) return 0;
    double a = fabs((double)x);
    int best = 0;
    for (int c = 1; c < 8; c++) {
        double d = fabs(a - fp4_value_from_fields(c)), dbest = fabs(a - fp4_value_from_fields(best));
        if (d < dbest) best = c; /* strict: a tie keeps the smaller magnitude */
    }
    return (uint8_t)(x < 0 && best != 0 ? best | 8 : best);
}

TEST(fp4_decode_table_all_16_codes) {
    static const float want[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    for (int c = 0; c < 16; c++) {
        float got = hfp4_fp4_decode((uint8_t)c);
        CHECK_MSG(got == want[c], "fp4_decode(0x%X) = %g, want %g", c, got, want[c]);
        CHECK_MSG((double)got == fp4_value_from_fields(c), "fp4_decode(0x%X) = %g disagrees with the bit fields", c,
                  got);
        /* only the low 4 bits count */
        CHECK_MSG(bits_of(hfp4_fp4_decode((uint8_t)(c | 0xA0))) == bits_of(got), "fp4_decode(0x%X) ignores high bits",
                  c | 0xA0);
    }
    /* -0 (0x8) decodes to +0: the sign bit of the float is clear, as DeepGEMM's decoder gives. */
    CHECK(bits_of(hfp4_fp4_decode(0x8)) == 0u);
    CHECK(!signbit(hfp4_fp4_decode(0x8)));
}

TEST(fp4_encode_round_trips_every_code) {
    for (int c = 0; c < 16; c++) {
        uint8_t got = hfp4_fp4_encode(hfp4_fp4_decode((uint8_t)c));
        uint8_t want = c == 8 ? 0 : (uint8_t)c; /* 0x8 decodes to +0, which encodes to 0 */
        CHECK_MSG(got == want, "fp4_encode(fp4_decode(0x%X)) = 0x%X, want 0x%X", c, got, want);
    }
}

TEST(fp4_encode_ties_go_to_the_smaller_magnitude) {
    /* Each midpoint between adjacent magnitudes, the code it must give (the smaller neighbour). */
    static const struct {
        float x;
        uint8_t code;
    } ties[] = {{0.25f, 0}, {0.75f, 1}, {1.25f, 2}, {1.75f, 3}, {2.5f, 4}, {3.5f, 5}, {5.0f, 6}};
    for (size_t i = 0; i < sizeof ties / sizeof ties[0]; i++) {
        float t = ties[i].x;
        uint8_t lo = ties[i].code;
        CHECK_MSG(hfp4_fp4_encode(t) == lo, "fp4_encode(%g) = 0x%X, want 0x%X", t, hfp4_fp4_encode(t), lo);
        uint8_t neg = lo == 0 ? 0 : (uint8_t)(lo | 8);
        CHECK_MSG(hfp4_fp4_encode(-t) == neg, "fp4_encode(%g) = 0x%X, want 0x%X", -t, hfp4_fp4_encode(-t), neg);
        /* the smallest float above the tie rounds up, the largest below stays down */
        float up = nextafterf(t, INFINITY), down = nextafterf(t, 0.0f);
        CHECK_MSG(hfp4_fp4_encode(up) == lo + 1, "fp4_encode(%.9g) = 0x%X, want 0x%X", up, hfp4_fp4_encode(up),
                  lo + 1);
        CHECK_MSG(hfp4_fp4_encode(-up) == ((lo + 1) | 8), "fp4_encode(%.9g) = 0x%X, want 0x%X", -up,
                  hfp4_fp4_encode(-up), (lo + 1) | 8);
        CHECK_MSG(hfp4_fp4_encode(down) == lo, "fp4_encode(%.9g) = 0x%X, want 0x%X", down, hfp4_fp4_encode(down), lo);
    }
}

TEST(fp4_encode_saturates_and_handles_specials) {
    static const float big[] = {5.0000005f, 5.5f, 6.0f, 6.5f, 7.0f, 100.0f, 1e30f, FLT_MAX, INFINITY};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        CHECK_MSG(hfp4_fp4_encode(big[i]) == 0x7, "fp4_encode(%g) = 0x%X, want 0x7", big[i], hfp4_fp4_encode(big[i]));
        CHECK_MSG(hfp4_fp4_encode(-big[i]) == 0xF, "fp4_encode(%g) = 0x%X, want 0xF", -big[i],
                  hfp4_fp4_encode(-big[i]));
    }
    CHECK(hfp4_fp4_encode(NAN) == 0);
    CHECK(hfp4_fp4_encode(-NAN) == 0);
    CHECK(hfp4_fp4_encode(float_of(0x7F800001u)) == 0); /* signalling NaN */
    CHECK(hfp4_fp4_encode(float_of(0xFFFFFFFFu)) == 0);
    /* Negative values that round to zero give +0 (code 0), never 0x8. */
    static const float tiny_neg[] = {-0.0f, -1e-45f, -1e-30f, -FLT_MIN, -0.1f, -0.2499f, -0.25f};
    for (size_t i = 0; i < sizeof tiny_neg / sizeof tiny_neg[0]; i++)
        CHECK_MSG(hfp4_fp4_encode(tiny_neg[i]) == 0, "fp4_encode(%g) = 0x%X, want 0", tiny_neg[i],
                  hfp4_fp4_encode(tiny_neg[i]));
    CHECK(hfp4_fp4_encode(0.0f) == 0);
}

TEST(fp4_encode_matches_brute_force_nearest) {
    /* Every multiple of 1/256 in [-8, 8] (all ties and both sides of them) plus random floats. */
    int checked = 0;
    for (int i = -2048; i <= 2048; i++) {
        float x = (float)i / 256.0f;
        uint8_t got = hfp4_fp4_encode(x), want = fp4_nearest_brute(x);
        CHECK_MSG(got == want, "fp4_encode(%g) = 0x%X, want 0x%X", x, got, want);
        checked++;
    }
    hfp4_rng rng = hfp4_rng_make(4);
    for (int i = 0; i < 100000; i++) {
        float x = (float)(hfp4_rng_normal(&rng) * 3.0);
        uint8_t got = hfp4_fp4_encode(x), want = fp4_nearest_brute(x);
        CHECK_MSG(got == want, "fp4_encode(%.9g) = 0x%X, want 0x%X", x, got, want);
        checked++;
    }
    CHECK_EQ_I64(checked, 4097 + 100000);
}

/* ---- FP8 e4m3fn ------------------------------------------------------------------------------ */

/* The e4m3fn value of a byte from the OCP definition: (1 + m/8) * 2^(e-7), subnormal m/8 * 2^-6. */
static double fp8_value_from_fields(int b) {
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    double mag = e == 0 ? (m / 8.0) * pow(2.0, -6) : (1.0 + m / 8.0) * pow(2.0, e - 7);
    return s ? -mag : mag;
}

/* Brute-force RNE with saturation: the nearest of the 127 non-negative finite values (0x00..0x7E,
 * increasing with the byte), ties to the even byte; beyond 448 saturates. */
static uint8_t fp8_nearest_brute(float x) {
    double a = fabs((double)x);
    uint8_t sign = signbit(x) ? 0x80 : 0;
    if (a >= 448.0) return sign | 0x7E;
    int best = 0;
    for (int b = 1; b <= 0x7E; b++) {
        double d = fabs(a - fp8_value_from_fields(b)), dbest = fabs(a - fp8_value_from_fields(best));
        if (d < dbest || (d == dbest && (b & 1) == 0)) best = b;
    }
    return sign | (uint8_t)best;
}

TEST(fp8_decode_all_256_bytes) {
    int nan_count = 0;
    for (int b = 0; b < 256; b++) {
        float got = hfp4_fp8_decode((uint8_t)b);
        double want = fp8_value_from_fields(b);
        if (want != want) {
            CHECK_MSG(got != got, "fp8_decode(0x%02X) = %g, want NaN", b, got);
            nan_count++;
        } else {
            CHECK_MSG((double)got == want, "fp8_decode(0x%02X) = %.9g, want %.9g", b, got, want);
        }
    }
    CHECK_EQ_I64(nan_count, 2); /* exactly 0x7F and 0xFF */
    CHECK(isnan(hfp4_fp8_decode(0x7F)) && isnan(hfp4_fp8_decode(0xFF)));
    /* Landmarks. */
    CHECK(hfp4_fp8_decode(0x7E) == 448.0f);
    CHECK(hfp4_fp8_decode(0xFE) == -448.0f);
    CHECK(hfp4_fp8_decode(0x38) == 1.0f);
    CHECK(hfp4_fp8_decode(0x08) == ldexpf(1.0f, -6)); /* smallest normal */
    CHECK(hfp4_fp8_decode(0x07) == 7.0f * ldexpf(1.0f, -9));
    CHECK(hfp4_fp8_decode(0x01) == ldexpf(1.0f, -9)); /* smallest subnormal */
    CHECK(hfp4_fp8_decode(0x00) == 0.0f && !signbit(hfp4_fp8_decode(0x00)));
    CHECK(hfp4_fp8_decode(0x80) == 0.0f && signbit(hfp4_fp8_decode(0x80))); /* exact: -0 */
}

TEST(fp8_encode_round_trips_every_non_nan_byte) {
    int checked = 0;
    for (int b = 0; b < 256; b++) {
        if ((b & 0x7F) == 0x7F) continue;
        uint8_t got = hfp4_fp8_encode(hfp4_fp8_decode((uint8_t)b));
        CHECK_MSG(got == b, "fp8_encode(fp8_decode(0x%02X)) = 0x%02X", b, got);
        checked++;
    }
    CHECK_EQ_I64(checked, 254);
    CHECK(hfp4_fp8_encode(NAN) == 0x7F);
    CHECK(hfp4_fp8_encode(-NAN) == 0x7F);
    CHECK(hfp4_fp8_encode(-0.0f) == 0x80);
    CHECK(hfp4_fp8_encode(0.0f) == 0x00);
}

TEST(fp8_encode_midpoints_round_to_even) {
    /* Bytes 0x00..0x7E increase in value; each midpoint between neighbours b and b+1 must give
     * the neighbour whose mantissa LSB (= byte bit 0) is 0, and a step off the midpoint must give
     * the nearer neighbour. Midpoints have at most 5 significant bits, so they are exact floats. */
    int checked = 0;
    for (int b = 0; b < 0x7E; b++) {
        double lo = fp8_value_from_fields(b), hi = fp8_value_from_fields(b + 1);
        CHECK(lo < hi);
        float mid = (float)((lo + hi) / 2.0);
        CHECK((double)mid == (lo + hi) / 2.0);
        uint8_t even = (uint8_t)((b & 1) == 0 ? b : b + 1);
        CHECK_MSG(hfp4_fp8_encode(mid) == even, "fp8_encode(%.9g) = 0x%02X, want 0x%02X", mid, hfp4_fp8_encode(mid),
                  even);
        CHECK_MSG(hfp4_fp8_encode(-mid) == (0x80 | even), "fp8_encode(%.9g) = 0x%02X, want 0x%02X", -mid,
                  hfp4_fp8_encode(-mid), 0x80 | even);
        CHECK_MSG(hfp4_fp8_encode(nextafterf(mid, INFINITY)) == b + 1, "just above %.9g", mid);
        CHECK_MSG(hfp4_fp8_encode(nextafterf(mid, 0.0f)) == b, "just below %.9g", mid);
        CHECK_MSG(hfp4_fp8_encode(-nextafterf(mid, INFINITY)) == (0x80 | (b + 1)), "just above %.9g", -mid);
        checked++;
    }
    CHECK_EQ_I64(checked, 126);
}

TEST(fp8_encode_saturates_at_448) {
    /* Everything from 448 up, Inf included, is +-448 (0x7E / 0xFE): never NaN. */
    for (int v = 448; v <= 2000; v++) {
        CHECK_MSG(hfp4_fp8_encode((float)v) == 0x7E, "fp8_encode(%d) = 0x%02X", v, hfp4_fp8_encode((float)v));
        CHECK_MSG(hfp4_fp8_encode((float)-v) == 0xFE, "fp8_encode(%d) = 0x%02X", -v, hfp4_fp8_encode((float)-v));
    }
    for (double v = 1e3; v <= 1e30; v *= 10.0) {
        CHECK(hfp4_fp8_encode((float)v) == 0x7E);
        CHECK(hfp4_fp8_encode((float)-v) == 0xFE);
    }
    CHECK(hfp4_fp8_encode(nextafterf(448.0f, INFINITY)) == 0x7E);
    CHECK(hfp4_fp8_encode(464.0f) == 0x7E); /* the would-be midpoint 448..480 */
    CHECK(hfp4_fp8_encode(479.99f) == 0x7E);
    CHECK(hfp4_fp8_encode(480.0f) == 0x7E);
    CHECK(hfp4_fp8_encode(FLT_MAX) == 0x7E);
    CHECK(hfp4_fp8_encode(-FLT_MAX) == 0xFE);
    CHECK(hfp4_fp8_encode(INFINITY) == 0x7E);
    CHECK(hfp4_fp8_encode(-INFINITY) == 0xFE);
    /* below 448 ordinary rounding applies: 432 is the 416..448 midpoint, ties to 448 (mantissa 6) */
    CHECK(hfp4_fp8_encode(432.0f) == 0x7E);
    CHECK(hfp4_fp8_encode(nextafterf(432.0f, 0.0f)) == 0x7D); /* 416 */
}

TEST(fp8_encode_subnormals) {
    const float q = ldexpf(1.0f, -9); /* subnormal step */
    for (int m = 0; m <= 8; m++) CHECK_MSG(hfp4_fp8_encode(m * q) == m, "fp8_encode(%d * 2^-9)", m);
    CHECK(hfp4_fp8_encode(0.5f * q) == 0x00);  /* tie 0 / 2^-9 -> even 0 */
    CHECK(hfp4_fp8_encode(-0.5f * q) == 0x80); /* rounds to -0 */
    CHECK(hfp4_fp8_encode(1.5f * q) == 0x02);  /* tie 1 / 2 -> even 2 */
    CHECK(hfp4_fp8_encode(2.5f * q) == 0x02);  /* tie 2 / 3 -> even 2 */
    CHECK(hfp4_fp8_encode(7.5f * q) == 0x08);  /* tie 7 / smallest normal -> 0x08 */
    CHECK(hfp4_fp8_encode(nextafterf(0.5f * q, 1.0f)) == 0x01);
    CHECK(hfp4_fp8_encode(1e-30f) == 0x00);
    CHECK(hfp4_fp8_encode(-1e-30f) == 0x80);
    CHECK(hfp4_fp8_encode(float_of(1u)) == 0x00); /* smallest float subnormal */
    CHECK(hfp4_fp8_encode(FLT_MIN) == 0x00);
}

TEST(fp8_encode_matches_brute_force_nearest) {
    hfp4_rng rng = hfp4_rng_make(8);
    int checked = 0;
    for (int i = 0; i < 50000; i++) {
        /* log-uniform magnitudes over 2^-12 .. 2^10 covers zero-flush, subnormals, normals, saturation */
        double mag = ldexp(1.0, -12) * pow(2.0, 22.0 * hfp4_rng_uniform(&rng));
        float x = (float)((hfp4_rng_next(&rng) & 1) ? -mag : mag);
        uint8_t got = hfp4_fp8_encode(x), want = fp8_nearest_brute(x);
        CHECK_MSG(got == want, "fp8_encode(%.9g) = 0x%02X, want 0x%02X", x, got, want);
        checked++;
    }
    CHECK_EQ_I64(checked, 50000);
}

/* ---- UE8M0 ----------------------------------------------------------------------------------- */

TEST(ue8m0_decode) {
    CHECK(hfp4_ue8m0_decode(0) == ldexpf(1.0f, -127));
    CHECK(hfp4_ue8m0_decode(0) > 0.0f && hfp4_ue8m0_decode(0) < FLT_MIN); /* a float subnormal */
    CHECK(hfp4_ue8m0_decode(1) == FLT_MIN);
    CHECK(hfp4_ue8m0_decode(127) == 1.0f);
    CHECK(hfp4_ue8m0_decode(128) == 2.0f);
    CHECK(hfp4_ue8m0_decode(126) == 0.5f);
    CHECK(hfp4_ue8m0_decode(254) == ldexpf(1.0f, 127));
    CHECK(isnan(hfp4_ue8m0_decode(255)));
    for (int e = 0; e < 255; e++)
        CHECK_MSG((double)hfp4_ue8m0_decode((uint8_t)e) == ldexp(1.0, e - 127), "ue8m0_decode(%d) = %g", e,
                  hfp4_ue8m0_decode((uint8_t)e));
}

TEST(ceil_to_ue8m0) {
    /* powers of two are fixed points over the whole normal range */
    for (int p = -126; p <= 127; p++) {
        float x = ldexpf(1.0f, p);
        CHECK_MSG(hfp4_ceil_to_ue8m0(x) == x, "ceil_to_ue8m0(2^%d) = %g", p, hfp4_ceil_to_ue8m0(x));
        CHECK_MSG(hfp4_ceil_to_ue8m0(-x) == x, "ceil_to_ue8m0(-2^%d) = %g", p, hfp4_ceil_to_ue8m0(-x));
    }
    CHECK(hfp4_ceil_to_ue8m0(3.0f) == 4.0f);
    CHECK(hfp4_ceil_to_ue8m0(5.0f) == 8.0f);
    CHECK(hfp4_ceil_to_ue8m0(0.75f) == 1.0f);
    CHECK(hfp4_ceil_to_ue8m0(nextafterf(1.0f, 2.0f)) == 2.0f);
    CHECK(hfp4_ceil_to_ue8m0(nextafterf(1.0f, 0.0f)) == 1.0f);
    CHECK(hfp4_ceil_to_ue8m0(-3.0f) == 4.0f);                /* |x| */
    /* clamped below at 2^-126 (byte 1): zero and every subnormal */
    CHECK(hfp4_ceil_to_ue8m0(0.0f) == FLT_MIN);
    CHECK(hfp4_ceil_to_ue8m0(-0.0f) == FLT_MIN);
    CHECK(hfp4_ceil_to_ue8m0(ldexpf(1.0f, -127)) == FLT_MIN);
    CHECK(hfp4_ceil_to_ue8m0(float_of(1u)) == FLT_MIN);
    CHECK(hfp4_ceil_to_ue8m0(1e-40f) == FLT_MIN);
    CHECK(hfp4_ceil_to_ue8m0(nextafterf(FLT_MIN, 1.0f)) == 2.0f * FLT_MIN);
    /* finite values clamped above at 2^127 (byte 254): never Inf */
    const float top = ldexpf(1.0f, 127);
    CHECK(hfp4_ceil_to_ue8m0(nextafterf(top, INFINITY)) == top);
    CHECK(hfp4_ceil_to_ue8m0(FLT_MAX) == top);
    CHECK(hfp4_ceil_to_ue8m0(-FLT_MAX) == top);
    /* NaN and Inf give the UE8M0 NaN (they gave 2^127, a finite scale; found by an API review) */
    CHECK(bits_of(hfp4_ceil_to_ue8m0(INFINITY)) == 0x7FC00000u);
    CHECK(bits_of(hfp4_ceil_to_ue8m0(-INFINITY)) == 0x7FC00000u);
    CHECK(bits_of(hfp4_ceil_to_ue8m0(NAN)) == 0x7FC00000u);
    CHECK(bits_of(hfp4_ceil_to_ue8m0(float_of(0xFF812345u))) == 0x7FC00000u); /* any payload, either sign */
    CHECK(isnan(hfp4_ue8m0_decode(255)));
    /* random non-powers: the result is the smallest power of two >= |x| */
    hfp4_rng rng = hfp4_rng_make(12);
    for (int i = 0; i < 20000; i++) {
        float x = (float)(ldexp(1.0, -100) * pow(2.0, 200.0 * hfp4_rng_uniform(&rng)));
        float r = hfp4_ceil_to_ue8m0(x);
        CHECK_MSG((bits_of(r) & 0x807FFFFFu) == 0 && r >= x && r / 2.0f < x, "ceil_to_ue8m0(%.9g) = %.9g", x, r);
    }
}

TEST(ue8m0_from_float) {
    for (int p = -127; p <= 127; p++) {
        uint8_t e = 0xAB;
        CHECK_MSG(hfp4_ue8m0_from_float(ldexpf(1.0f, p), &e) == 0, "ue8m0_from_float(2^%d) failed", p);
        CHECK_MSG(e == p + 127, "ue8m0_from_float(2^%d) = %d", p, e);
        CHECK(hfp4_ue8m0_decode(e) == ldexpf(1.0f, p));
    }
    static const float bad[] = {3.0f, 1.5f, 0.0f, -0.0f, -1.0f, -2.0f, -0.5f, 0.75f};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t e = 0xAB;
        CHECK_MSG(hfp4_ue8m0_from_float(bad[i], &e) == -1, "ue8m0_from_float(%g) accepted", bad[i]);
        CHECK(e == 0xAB);
    }
    const float bad_special[] = {NAN, -NAN, INFINITY, -INFINITY, ldexpf(1.0f, -128), ldexpf(1.0f, -149),
                                 1e-40f, float_of(0x00400001u), -ldexpf(1.0f, -127)};
    for (size_t i = 0; i < sizeof bad_special / sizeof bad_special[0]; i++) {
        uint8_t e = 0xAB;
        CHECK_MSG(hfp4_ue8m0_from_float(bad_special[i], &e) == -1, "ue8m0_from_float(bits 0x%08X) accepted",
                  bits_of(bad_special[i]));
        CHECK(e == 0xAB);
    }
    CHECK_MSG(hfp4_ue8m0_from_float(1.0f, NULL) == -1, "ue8m0_from_float(1, NULL) accepted"); /* (no write through NULL) */
}

/* ---- BF16 ------------------------------------------------------------------------------------ */

static int bf16_is_nan(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x007F) != 0; }

/* Independent RNE: the two bf16 neighbours of x (truncation, and one step further from zero, Inf
 * counted as 2^128 as IEEE overflow rounding does), the nearer wins, ties to the even one. */
static uint16_t bf16_nearest_brute(float x) {
    uint32_t u = bits_of(x);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double vlo = hfp4_bf16_decode(lo), vx = x;
    double vhi = (hi & 0x7FFF) == 0x7F80 ? ((hi & 0x8000) ? -ldexp(1.0, 128) : ldexp(1.0, 128))
                                         : (double)hfp4_bf16_decode(hi);
    double dlo = fabs(vx - vlo), dhi = fabs(vhi - vx);
    if (dlo < dhi) return lo;
    if (dhi < dlo) return hi;
    return (lo & 1) ? hi : lo;
}

TEST(bf16_round_to_nearest_even) {
    CHECK(hfp4_bf16_encode(float_of(0x3F808000u)) == 0x3F80); /* tie, 0x3F80 even */
    CHECK(hfp4_bf16_encode(float_of(0x3F818000u)) == 0x3F82); /* tie, 0x3F81 odd */
    CHECK(hfp4_bf16_encode(float_of(0x3F808001u)) == 0x3F81);
    CHECK(hfp4_bf16_encode(float_of(0x3F807FFFu)) == 0x3F80);
    CHECK(hfp4_bf16_encode(float_of(0xBF808000u)) == 0xBF80);
    CHECK(hfp4_bf16_encode(float_of(0xBF818000u)) == 0xBF82);
    CHECK(hfp4_bf16_encode(float_of(0x007F8000u)) == 0x0080); /* subnormal tie rounds up to FLT_MIN */
    CHECK(hfp4_bf16_encode(float_of(0x00008000u)) == 0x0000); /* tie between 0 and 1 ulp */
    CHECK(hfp4_bf16_encode(float_of(0x7F7F7FFFu)) == 0x7F7F);
    CHECK(hfp4_bf16_encode(float_of(0x7F7F8000u)) == 0x7F80); /* tie at the top: overflows to Inf */
    CHECK(hfp4_bf16_encode(FLT_MAX) == 0x7F80);
    CHECK(hfp4_bf16_encode(-FLT_MAX) == 0xFF80);
    CHECK(hfp4_bf16_encode(INFINITY) == 0x7F80);
    CHECK(hfp4_bf16_encode(-INFINITY) == 0xFF80);
    CHECK(hfp4_bf16_encode(-0.0f) == 0x8000);
    CHECK(hfp4_bf16_encode(1.0f) == 0x3F80);
    hfp4_rng rng = hfp4_rng_make(16);
    int checked = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)hfp4_rng_next(&rng);
        if (i & 1) u = (u & 0xFFFF0000u) | 0x8000u; /* half the samples are exact ties */
        if ((u & 0x7FFFFFFFu) > 0x7F800000u) continue;
        uint16_t got = hfp4_bf16_encode(float_of(u)), want = bf16_nearest_brute(float_of(u));
        CHECK_MSG(got == want, "bf16_encode(bits 0x%08X) = 0x%04X, want 0x%04X", u, got, want);
        checked++;
    }
    CHECK(checked > 190000);
}

TEST(bf16_nan_stays_nan) {
    static const uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu,
                                    0x7F80FFFFu, 0x7FBF0000u, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t b = hfp4_bf16_encode(float_of(nans[i]));
        CHECK_MSG(bf16_is_nan(b) && (b & 0x0040), "bf16_encode(NaN 0x%08X) = 0x%04X, not a quiet NaN", nans[i], b);
        CHECK_MSG((b >> 15) == (nans[i] >> 31), "bf16_encode(NaN 0x%08X) = 0x%04X lost the sign", nans[i], b);
    }
}

TEST(bf16_exhaustive_round_trip) {
    int finite = 0, nan = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float x = hfp4_bf16_decode((uint16_t)b);
        CHECK_MSG(bits_of(x) == b << 16, "bf16_decode(0x%04X) bits 0x%08X", b, bits_of(x));
        if (bf16_is_nan((uint16_t)b)) {
            CHECK_MSG(x != x && bf16_is_nan(hfp4_bf16_encode(x)), "bf16 NaN 0x%04X", b);
            nan++;
            continue;
        }
        CHECK_MSG(hfp4_bf16_encode(x) == b, "bf16_encode(bf16_decode(0x%04X)) = 0x%04X", b, hfp4_bf16_encode(x));
        finite++;
    }
    CHECK_EQ_I64(nan, 2 * 127);
    CHECK_EQ_I64(finite, 65536 - 2 * 127);
}

/* ---- dtype metadata -------------------------------------------------------------------------- */

TEST(dtype_storage_bytes_and_names) {
    static const struct {
        hfp4_dtype dtype;
        size_t bytes;
        const char *name;
    } want[] = {
        {HFP4_DTYPE_NONE, 0, "none"},          {HFP4_DTYPE_FP32, 4, "fp32"},
        {HFP4_DTYPE_BF16, 2, "bf16"},          {HFP4_DTYPE_FP8_E4M3, 1, "fp8_e4m3"},
        {HFP4_DTYPE_FP4_E2M1, 1, "fp4_e2m1"},  {HFP4_DTYPE_UE8M0, 1, "ue8m0"},
        {HFP4_DTYPE_UE8M0_PACKED, 4, "ue8m0_packed"}, {HFP4_DTYPE_INT32, 4, "int32"},
        {HFP4_DTYPE_FP4_E2M1_SM90, 1, "fp4_e2m1_sm90"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK_MSG(hfp4_dtype_storage_bytes(want[i].dtype) == want[i].bytes, "storage_bytes(%d) = %zu, want %zu",
                  (int)want[i].dtype, hfp4_dtype_storage_bytes(want[i].dtype), want[i].bytes);
        CHECK_MSG(strcmp(hfp4_dtype_name(want[i].dtype), want[i].name) == 0, "dtype_name(%d) = %s, want %s",
                  (int)want[i].dtype, hfp4_dtype_name(want[i].dtype), want[i].name);
    }
    CHECK(hfp4_dtype_storage_bytes((hfp4_dtype)99) == 0);
    CHECK(strcmp(hfp4_dtype_name((hfp4_dtype)99), "unknown") == 0);
    CHECK(strcmp(hfp4_dtype_name((hfp4_dtype)-1), "unknown") == 0);
}
