/*
 * scales.cuh - the scale values the SM90 kernels read: activation scales in every accepted form
 * (FP32, UE8M0 bytes, packed UE8M0 words) and the row scale of a folded weight chunk.
 */
#pragma once
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"

/* Activation scale of (row, k-group kg) of group g. */
static __device__ __forceinline__ float load_a_scale(const hfp4_sm90_gemm_params &p, int64_t g, int64_t row, int64_t kg) {
    const int64_t base = g * p.a_scale_stride_group + row * p.a_scale_stride_mn;
    float v;
    if (p.a_scale_dtype == 1 /* FP32 */) {
        v = ((const float *)p.a_scales)[base + kg * p.a_scale_stride_k];
    } else {
        uint32_t e;
        if (p.a_scale_dtype == 5 /* UE8M0 bytes */) e = ((const uint8_t *)p.a_scales)[base + kg * p.a_scale_stride_k];
        else e = (((const uint32_t *)p.a_scales)[base + (kg >> 2) * p.a_scale_stride_k] >> (8 * (kg & 3))) & 0xFF;
        v = e == 0 ? __uint_as_float(0x00400000u) : (e == 255 ? __uint_as_float(0x7FC00000u) : __uint_as_float(e << 23));
    }
    return v;
}

static __device__ __forceinline__ float ue8m0_to_float(uint32_t e) {
    return e == 0 ? __uint_as_float(0x00400000u) : (e == 255 ? __uint_as_float(0x7FC00000u) : __uint_as_float(e << 23));
}

/* 2^(e_max - 133): the row scale of a folded chunk (sm90_layout.h), exact down to 2^-149. */
static __device__ __forceinline__ float row_scale_from_emax(uint32_t e) {
    return e > 6 ? __uint_as_float((e - 6) << 23) : ue8m0_to_float(e) * 0.015625f;
}
