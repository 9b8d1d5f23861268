/*
 * swiglu_math.h - the SwiGLU activation of hfp4_moe_swiglu_quantize_rows (hfp4.h, "MoE glue"),
 * compiled into both its CPU form (moe.c, C11) and its kernel (moe_gpu.cu): the same FP32
 * operations in the same order, fused multiply-adds written out, so both give the same bits (the
 * CPU form is the kernel's reference, compared bit for bit).
 *
 * Why an exp of our own: the C library's expf and CUDA's differ in the last bit for some inputs,
 * and a last bit of exp can move a BF16 rounding of silu. This one (Cody-Waite reduction by ln 2,
 * a degree-7 polynomial, a power-of-two scaling) is within 1 ulp of exp over FP32's normal results
 * (CUDA's expf: 2; tests/test_moe.c checks 3 on a coarse sweep), and has no library call.
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
#include <cuda_bf16.h>
#define HFP4_HD __host__ __device__
#else
#define HFP4_HD
#endif

/* A product and a sum each rounded on its own: nvcc contracts a * b + c into one FMA by default,
 * also across inlined functions, where the C side (built with -ffp-contract=off, Makefile) rounds
 * twice; the _rn intrinsics are never contracted. */
#ifdef __CUDA_ARCH__
#define HFP4_MUL(a, b) __fmul_rn((a), (b))
#define HFP4_ADD(a, b) __fadd_rn((a), (b))
#else
#define HFP4_MUL(a, b) ((a) * (b))
#define HFP4_ADD(a, b) ((a) + (b))
#endif

/* e^x overflows to inf above this, and is 0 below its negative counterpart (hfp4__expf) */
#define HFP4_EXP_MAX (88.7228394f)
#define HFP4_EXP_MIN (-103.972084f)

/* x rounded to the nearest BF16, ties to even, kept as a float; NaN stays NaN (on the device the
 * conversion instruction: the same rounding, one instruction where the integer form takes six;
 * only a NaN's payload can differ, which hfp4.h allows) */
static HFP4_HD inline float hfp4__round_bf16(float x) {
#ifdef __CUDA_ARCH__
    return __bfloat162float(__float2bfloat16_rn(x));
#else
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return x;
    b += 0x7FFFu + ((b >> 16) & 1u);
    b &= 0xFFFF0000u;
    memcpy(&x, &b, sizeof x);
    return x;
#endif
}

/* p x 2^k for |k| <= 151 with one rounding, as ldexpf (two exact power-of-two factors, each a normal
 * float, so only the second product can round): a few instructions where CUDA's ldexpf is a call */
static HFP4_HD inline float hfp4__scale2(float p, int k) {
    const int k1 = k / 2, k2 = k - k1;
    const uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
    float f1, f2;
    memcpy(&f1, &b1, sizeof f1);
    memcpy(&f2, &b2, sizeof f2);
    return HFP4_MUL(HFP4_MUL(p, f1), f2);
}

/* e^x in FP32 for x in [HFP4_EXP_MIN, HFP4_EXP_MAX] (not NaN): the polynomial alone, no checks */
static HFP4_HD inline float hfp4__expf_in_range(float x) {
    const float k = rintf(HFP4_MUL(x, 1.44269504f)); /* |k| <= 150 */
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

/* hfp4__expf_in_range's value for x in [HFP4_SWIGLU_T_MIN, HFP4_EXP_MAX], every bit the same, in
 * fewer instructions: the polynomial with its coefficients doubled (exact: powers of two) gives 2p,
 * and one multiply by 2^(k - 1), a normal float for every k there (-29..128), scales it, where
 * hfp4__scale2 needs two and the halving of k for the subnormal results below this range. Both
 * round p x 2^k once. */
#define HFP4_SWIGLU_T_MIN (-20.0f)
static HFP4_HD inline float hfp4__expf_mid(float x) {
    const float k = rintf(HFP4_MUL(x, 1.44269504f)); /* -29 <= k <= 128 */
    float r = fmaf(k, -0.693359375f, x);
    r = fmaf(k, 2.12194440e-4f, r);
    float p = 2.0f * 1.98412698e-4f; /* 2 x hfp4__expf_in_range's coefficients */
    p = fmaf(p, r, 2.0f * 1.38888889e-3f);
    p = fmaf(p, r, 2.0f * 8.33333333e-3f);
    p = fmaf(p, r, 2.0f * 4.16666667e-2f);
    p = fmaf(p, r, 2.0f * 1.66666667e-1f);
    p = fmaf(p, r, 2.0f * 0.5f);
    p = fmaf(p, r, 2.0f);
    p = fmaf(p, r, 2.0f);
    const uint32_t b = (uint32_t)((int)k - 1 + 127) << 23;
    float f;
    memcpy(&f, &b, sizeof f);
    return HFP4_MUL(p, f);
}

/* e^x in FP32 */
static HFP4_HD inline float hfp4__expf(float x) {
    if (!(x == x)) return x;
    if (x > HFP4_EXP_MAX) return INFINITY;
    if (x < HFP4_EXP_MIN) return 0.0f;
    return hfp4__expf_in_range(x);
}

/* One element of silu(min(g, limit)) x clamp(u, -limit, limit), g and u BF16 values, each step
 * rounded to BF16 (the clamps keep NaN, as torch.clamp; limit = INFINITY: no clamp). The clamps
 * compare with the limit rounded to BF16 first: for a BF16 value v, min(v, round(L)) =
 * round(min(v, L)) (rounding is monotonic and leaves v alone), so no rounding is left after them.
 * Straight-line code, every step computed and the answer selected (the kernel is issue-bound at
 * prefill, where branches around each element's exp and division cost more than the work). */
static HFP4_HD inline float hfp4__swiglu_bf16(float g, float u, float limit) {
    const float lim = hfp4__round_bf16(limit);
    g = g > lim ? lim : g;
    u = u > lim ? lim : (u < -lim ? -lim : u);
    /* silu(g) = g / (1 + e^-g). Where e^-g overflows to inf it is -0 (selected). Below
     * HFP4_SWIGLU_T_MIN, e^-g < 2^-28 and 1 + e^-g is 1 in FP32 whatever its exact value, so -g is
     * clamped there (g itself comes out, as it must; so do g = +inf and the g whose e^-g is 0, where
     * the general exp would have been needed); a NaN g becomes the range's end and gives NaN in the
     * division. The exp then only sees its fast range (hfp4__expf_mid). */
    float t = -g;
    t = t >= HFP4_SWIGLU_T_MIN ? t : HFP4_SWIGLU_T_MIN; /* (NaN: false) */
    t = t <= HFP4_EXP_MAX ? t : HFP4_EXP_MAX;
    const float q = hfp4__round_bf16(g / HFP4_ADD(1.0f, hfp4__expf_mid(t)));
    const float s = g < -HFP4_EXP_MAX ? -0.0f : q;
    return hfp4__round_bf16(HFP4_MUL(s, u));
}

#endif /* HFP4_SWIGLU_MATH_H */
