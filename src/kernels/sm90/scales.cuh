/*
 * scales.cuh - the scale values the SM90 kernels read: activation scales in every accepted form
 * (FP32, UE8M0 bytes, packed UE8M0 words) and the row scale of a folded weight chunk.
 */
#pragma once
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"

static __device__ __forceinline__ float ue8m0_to_float(uint32_t e) {
    return e == 0 ? __uint_as_float(0x00400000u) : (e == 255 ? __uint_as_float(0x7FC00000u) : __uint_as_float(e << 23));
}

/* Element index of the activation scale of (row, k-group kg) of group g, for FP32 and UE8M0-byte
 * scales (packed words: the word holding it is at kg / 4). */
static __device__ __forceinline__ int64_t a_scale_index(const hfp4_sm90_gemm_params &p, int64_t g, int64_t row, int64_t kg) {
    return g * p.a_scale_stride_group + row * p.a_scale_stride_mn + kg * p.a_scale_stride_k;
}

/* Activation scale of (row, k-group kg) of group g. */
static __device__ __forceinline__ float load_a_scale(const hfp4_sm90_gemm_params &p, int64_t g, int64_t row, int64_t kg) {
    if (p.a_scale_dtype == 1 /* FP32 */) return ((const float *)p.a_scales)[a_scale_index(p, g, row, kg)];
    const uint32_t e = p.a_scale_dtype == 5 /* UE8M0 bytes */
                           ? ((const uint8_t *)p.a_scales)[a_scale_index(p, g, row, kg)]
                           : (((const uint32_t *)p.a_scales)[a_scale_index(p, g, row, kg >> 2)] >> (8 * (kg & 3))) & 0xFF;
    return ue8m0_to_float(e);
}

/* 2^(e_max - 133): the row scale of a folded chunk (sm90_layout.h), exact down to 2^-149. */
static __device__ __forceinline__ float row_scale_from_emax(uint32_t e) {
    return e > 6 ? __uint_as_float((e - 6) << 23) : ue8m0_to_float(e) * 0.015625f;
}
