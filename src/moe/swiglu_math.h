/*
 * swiglu_math.h - the SwiGLU activation of hfp4_moe_swiglu_quantize_rows (hfp4.h, "MoE glue"),
 * compiled into both its CPU form (moe.c, C11) and its kernel (moe_gpu.cu): the same FP32
 * operations in the same order, fused multiply-adds written out, so both give the same bits (the
 * CPU form is the kernel's reference, compared bit for bit).
 *
 * Why an exp of our own: the C library's expf and CUDA's differ in the last bit for some inputs,
 * and a last bit of exp can move a BF16 rounding of silu. This one (Cody-Waite reduction by ln 2,
 * a degree-7 polynomial, a power-of-two scaling) is within 3 ulp of exp over FP32 (CUDA's expf: 2;
 * tests/test_moe.c), and has no library call.
 *
 * Rounding: as torch computes transformers' FP8Experts._apply_gate on BF16 tensors, each step's
 * FP32 result is rounded to BF16 (clamp, silu, the product), so this matches torch's glue except
 * where torch's exp and this one differ in a bit that a BF16 rounding then shows.
 */
#ifndef HFP4_SWIGLU_MATH_H
#define HFP4_SWIGLU_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define HFP4_HD __host__ __device__
#else
#define HFP4_HD
#endif

/* x rounded to the nearest BF16, ties to even, kept as a float; NaN stays NaN */
static HFP4_HD inline float hfp4__round_bf16(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return x;
    b += 0x7FFFu + ((b >> 16) & 1u);
    b &= 0xFFFF0000u;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* p x 2^k for |k| <= 151 with one rounding, as ldexpf (two exact power-of-two factors, each a normal
 * float, so only the second product can round): a few instructions where CUDA's ldexpf is a call */
static HFP4_HD inline float hfp4__scale2(float p, int k) {
    const int k1 = k / 2, k2 = k - k1;
    const uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
    float f1, f2;
    memcpy(&f1, &b1, sizeof f1);
    memcpy(&f2, &b2, sizeof f2);
    return p * f1 * f2;
}

/* e^x in FP32 */
static HFP4_HD inline float hfp4__expf(float x) {
    if (!(x == x)) return x;
    if (x > 88.7228394f) return INFINITY;
    if (x < -103.972084f) return 0.0f;
    const float k = rintf(x * 1.44269504f);    /* |k| <= 150 */
    float r = fmaf(k, -0.693359375f, x);       /* x - k ln 2, ln 2 in two parts (the first exact in k) */
    r = fmaf(k, 2.12194440e-4f, r);            /* |r| <= ~0.347 */
    float p = 1.98412698e-4f;                  /* 1/7!, then Horner down to 1 */
    p = fmaf(p, r, 1.38888889e-3f);
    p = fmaf(p, r, 8.33333333e-3f);
    p = fmaf(p, r, 4.16666667e-2f);
    p = fmaf(p, r, 1.66666667e-1f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    return hfp4__scale2(p, (int)k);
}

/* One element of silu(min(g, limit)) x clamp(u, -limit, limit), g and u BF16 values, each step
 * rounded to BF16 (the clamps keep NaN, as torch.clamp; limit = INFINITY: no clamp) */
static HFP4_HD inline float hfp4__swiglu_bf16(float g, float u, float limit) {
    g = hfp4__round_bf16(g > limit ? limit : g);
    u = hfp4__round_bf16(u > limit ? limit : (u < -limit ? -limit : u));
    /* (g / (1 + e^-g) where e^-g overflows to inf is -0, where it is 0, g: the same values, without
     * the division's and exp's special-operand paths, which random or huge inputs would hit) */
    const float s = g < -88.7228394f ? -0.0f : g > 103.972084f ? g : hfp4__round_bf16(g / (1.0f + hfp4__expf(-g)));
    return hfp4__round_bf16(s * u);
}

#endif /* HFP4_SWIGLU_MATH_H */
