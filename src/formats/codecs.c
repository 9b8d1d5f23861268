/*
 * codecs.c - exact scalar encoders and decoders of every number format hfp4 handles:
 * FP4 e2m1, FP8 e4m3fn, UE8M0, BF16. docs/FORMATS.md states the same rules in prose; the
 * exhaustive tests in tests/test_formats.c hold the two together.
 *
 * Everything here is plain integer and double arithmetic, so results do not depend on the host's
 * floating-point rounding mode or on compiler flags.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

static uint32_t float_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bits_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- FP4 e2m1 -------------------------------------------------------------------------------- */

static const float fp4_magnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float hfp4_fp4_decode(uint8_t code) {
    float m = fp4_magnitude[code & 7];
    /* NOTE: code 0x8 (-0) decodes to +0, as DeepGEMM's decoder does. */
    return (code & 8) && m != 0.0f ? -m : m;
}

uint8_t hfp4_fp4_encode(float x) {
    if (x != x) return 0; /* NaN -> 0, as DeepGEMM's threshold count does */
    float a = fabsf(x);
    /* DeepGEMM counts the thresholds strictly below |x|: ties go to the smaller magnitude. */
    static const float thresholds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    uint8_t code = 0;
    for (int i = 0; i < 7; i++) code += a > thresholds[i];
    if (x < 0.0f && code != 0) code |= 8;
    return code;
}

/* ---- FP8 e4m3fn ------------------------------------------------------------------------------ */

float hfp4_fp8_decode(uint8_t byte) {
    int sign = byte >> 7, exp = (byte >> 3) & 15, man = byte & 7;
    if (exp == 15 && man == 7) return NAN;
    double v = exp == 0 ? ldexp((double)man, -9) : ldexp(8.0 + man, exp - 10);
    return (float)(sign ? -v : v);
}

/* Round a non-negative double to the nearest integer, ties to even. */
static double round_half_even(double v) {
    double f = floor(v);
    double r = v - f;
    if (r > 0.5) return f + 1.0;
    if (r < 0.5) return f;
    return fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

uint8_t hfp4_fp8_encode(float x) {
    if (x != x) return 0x7F;
    uint8_t sign = (float_bits(x) >> 31) ? 0x80 : 0x00;
    double a = fabs((double)x);
    if (a >= 448.0) return sign | 0x7E; /* saturate (Inf too) */
    if (a < ldexp(1.0, -6)) {
        /* subnormal range: multiples of 2^-9; a result of 8 is the smallest normal, code 0x08 */
        double q = round_half_even(a * 512.0);
        return sign | (uint8_t)q;
    }
    int e;
    frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) => unbiased exponent e - 1 */
    int ue = e - 1;
    double q = round_half_even(ldexp(a, 3 - ue)); /* in [8, 16] */
    if (q >= 16.0) {
        q = 8.0;
        ue += 1;
    }
    if (ue > 8 || (ue == 8 && q > 14.0)) return sign | 0x7E; /* rounded past 448 */
    return sign | (uint8_t)(((ue + 7) << 3) | ((int)q - 8));
}

/* ---- UE8M0 ----------------------------------------------------------------------------------- */

float hfp4_ue8m0_decode(uint8_t e) {
    if (e == 255) return NAN;
    if (e == 0) return bits_float(0x00400000u); /* 2^-127, a float subnormal */
    return bits_float((uint32_t)e << 23);
}

float hfp4_ceil_to_ue8m0(float x) {
    uint32_t bits = float_bits(x) & 0x7FFFFFFFu;
    /* NaN and Inf have no UE8M0 power of two: the NaN scale (byte 255) keeps them visible, as
     * DeepGEMM's pow(2, ceil(log2|x|)) keeps them non-finite; clamping gave 2^127, a finite scale
     * that silently zeroed a quantizer's whole group */
    if (bits >= 0x7F800000u) return bits_float(0x7FC00000u);
    int32_t e = (int32_t)((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0);
    if (e < 1) e = 1;
    if (e > 254) e = 254;
    return bits_float((uint32_t)e << 23);
}

int hfp4_ue8m0_from_float(float x, uint8_t *e) {
    if (e == NULL) return -1;
    uint32_t bits = float_bits(x);
    if (bits == 0x00400000u) { /* 2^-127 */
        *e = 0;
        return 0;
    }
    uint32_t exp = (bits >> 23) & 0xFF;
    if ((bits >> 31) || (bits & 0x7FFFFF) || exp == 0 || exp == 255) return -1;
    *e = (uint8_t)exp;
    return 0;
}

/* ---- BF16 ------------------------------------------------------------------------------------ */

float hfp4_bf16_decode(uint16_t bits) { return bits_float((uint32_t)bits << 16); }

uint16_t hfp4_bf16_encode(float x) {
    uint32_t u = float_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040); /* quiet NaN */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- dtype metadata -------------------------------------------------------------------------- */

size_t hfp4_dtype_storage_bytes(hfp4_dtype dtype) {
    switch (dtype) {
    case HFP4_DTYPE_FP32: return 4;
    case HFP4_DTYPE_BF16: return 2;
    case HFP4_DTYPE_FP8_E4M3: return 1;
    case HFP4_DTYPE_FP4_E2M1: return 1;
    case HFP4_DTYPE_UE8M0: return 1;
    case HFP4_DTYPE_UE8M0_PACKED: return 4;
    case HFP4_DTYPE_INT32: return 4;
    case HFP4_DTYPE_FP4_E2M1_SM90: return 1;
    case HFP4_DTYPE_NONE: return 0;
    }
    return 0;
}

const char *hfp4_dtype_name(hfp4_dtype dtype) {
    switch (dtype) {
    case HFP4_DTYPE_NONE: return "none";
    case HFP4_DTYPE_FP32: return "fp32";
    case HFP4_DTYPE_BF16: return "bf16";
    case HFP4_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case HFP4_DTYPE_FP4_E2M1: return "fp4_e2m1";
    case HFP4_DTYPE_UE8M0: return "ue8m0";
    case HFP4_DTYPE_UE8M0_PACKED: return "ue8m0_packed";
    case HFP4_DTYPE_INT32: return "int32";
    case HFP4_DTYPE_FP4_E2M1_SM90: return "fp4_e2m1_sm90";
    }
    return "unknown";
}
