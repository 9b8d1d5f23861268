/*
 * sf_common.h - the per-element rules of the scale-factor layouts, written once for both the CPU
 * code (C) and the CUDA kernels (nvcc): UE8M0 packing, psum row membership, K-group sizes.
 *
 * Byte-identical CPU and GPU output rests on both sides calling exactly these functions.
 */
#ifndef HFP4_SF_COMMON_H
#define HFP4_SF_COMMON_H

#include <stdint.h>

#if defined(__CUDACC__)
#define HFP4_SF_HD static __host__ __device__ __forceinline__
#else
#define HFP4_SF_HD static inline
#endif
#if defined(__CUDA_ARCH__)
#define HFP4_SF_UNROLL _Pragma("unroll")
#else
#define HFP4_SF_UNROLL
#endif

/* Default psum / contiguous-layout row alignment (DeepGEMM's mk alignment). */
#define HFP4__SF_DEFAULT_ALIGNMENT 128

HFP4_SF_HD int64_t hfp4__sf_align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/* Bits a packing ORs into its *inexact flag (an int): */
#define HFP4__SF_INEXACT 1 /* a finite positive value that is not a UE8M0 value: HFP4_SF_ROUND_UP rounds it up */
#define HFP4__SF_INVALID 2 /* NaN, Inf, zero or negative: no UE8M0 scale means it, HFP4_SF_ROUND_UP or not */

/* The UE8M0 byte for the FP32 value with bit pattern `bits`.
 * Exact UE8M0 values (positive powers of two 2^-126..2^127, and 2^-127 whose float is the subnormal
 * 0x00400000) give their exponent byte, as DeepGEMM's `bits >> 23` packing does. Anything else ORs
 * HFP4__SF_INEXACT (finite positive) or HFP4__SF_INVALID (the rest) into *inexact and gives
 * ceil_to_ue8m0(|x|): exponent + (mantissa != 0), clamped to 1..254 (so zero, NaN and Inf never
 * produce the NaN byte 255; the CPU forms reject them, the GPU forms raise their error flag). */
HFP4_SF_HD uint32_t hfp4__sf_ue8m0_byte(uint32_t bits, int *inexact) {
    uint32_t exp = (bits >> 23) & 0xFFu;
    if (bits == 0x00400000u) return 0;
    if ((bits & 0x807FFFFFu) == 0 && exp != 0 && exp != 255) return exp;
    /* (sign set, +-0, or exponent 255: NaN or Inf) */
    *inexact |= (bits >> 31) || (bits & 0x7FFFFFFFu) == 0 || exp == 255 ? HFP4__SF_INVALID : HFP4__SF_INEXACT;
    uint32_t mag = bits & 0x7FFFFFFFu;
    uint32_t e = ((mag >> 23) & 0xFFu) + ((mag & 0x7FFFFFu) != 0);
    return e < 1 ? 1 : (e > 254 ? 254 : e);
}

/* Packs the FP32 bit patterns of K-groups 4p..4p+count-1 into one word, byte b = K-group 4p+b
 * (little-endian, DeepGEMM's (v0>>23) | (v1>>15) | (v2>>7) | (v3<<1)). Bytes of missing K-groups
 * (count < 4 at the K tail) stay 0, as DeepGEMM's kernels write them. */
HFP4_SF_HD uint32_t hfp4__sf_pack4(const uint32_t v[4], int count, int *inexact) {
    uint32_t w = 0;
    /* NOTE: a constant trip count lets nvcc keep v[] in registers */
    HFP4_SF_UNROLL
    for (int b = 0; b < 4; b++)
        if (b < count) w |= hfp4__sf_ue8m0_byte(v[b], inexact) << (8 * b);
    return w;
}

/* Is output row r inside a psum group? Group g covers [start_g, ends[g]) with start_0 = 0 and
 * start_g = align(ends[g-1], alignment). For non-decreasing ends the only candidate is the first g
 * with ends[g] > r (every later group starts at or after ends[g] > r), found by binary search.
 * Out-of-order ends (possible only on the GPU, which cannot validate them) give some answer
 * without reading outside ends[0..G). */
HFP4_SF_HD int hfp4__sf_psum_row_valid(const int32_t *ends, int32_t num_groups, int64_t alignment, int64_t r) {
    int32_t lo = 0, hi = num_groups;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if ((int64_t)ends[mid] > r) hi = mid;
        else lo = mid + 1;
    }
    if (lo == num_groups) return 0;
    int64_t start = lo == 0 ? 0 : hfp4__sf_align_up(ends[lo - 1] < 0 ? 0 : ends[lo - 1], alignment);
    return r >= start;
}

/* K size of K-group g from the grouped layout: the value itself, or with psum
 * end_g - align(end_{g-1}, k_alignment); negative results count as empty groups. */
HFP4_SF_HD int64_t hfp4__sf_k_group_size(int use_psum, int64_t value, int64_t prev_end, int64_t k_alignment) {
    int64_t k = value;
    if (use_psum) k = value - hfp4__sf_align_up(prev_end < 0 ? 0 : prev_end, k_alignment);
    return k < 0 ? 0 : k;
}

#endif
