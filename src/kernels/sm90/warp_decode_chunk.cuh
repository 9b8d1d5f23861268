/*
 * warp_decode_chunk.cuh - one 128-K chunk of the warp path (warp_decode.cu): a thread's FP4 weight
 * words loaded straight from global memory into registers ahead of their use, the chunk's scales,
 * and its wgmmas with their promotion (folded chunks once, per-32 chunks every k32 step).
 */
#pragma once
#include <stdint.h>

#include "fp4_to_fp8.cuh"
#include "ptx.cuh"
#include "scales.cuh"
#include "warp_decode_config.cuh"
#include "wgmma_fp8_rs.cuh"

/* One chunk (128 K) of a thread's FP4 weight words (two 64-K pairs), loaded ahead of its use. */
typedef struct wd_chunk {
    uint4 q0, q1;
} wd_chunk;

static __device__ __forceinline__ void wd_load_chunk(wd_chunk &ch, const uint8_t *wq, int64_t c) {
    ch.q0 = ldg_stream_16(wq + (2 * c) * HFP4_SM90_PAIR_BYTES);
    ch.q1 = ldg_stream_16(wq + (2 * c + 1) * HFP4_SM90_PAIR_BYTES);
}

/* A chunk's weight scales for rows g and g + 8 and the tile's chunk mode, read from the unit's staged
 * copy in shared memory. */
template <bool W_FP32>
struct wd_scales {
    uint32_t sw0, sw1; /* UE8M0 scale words                      */
    float4 sf0, sf1;   /* FP32 weight scales (W_FP32)             */
    uint32_t mode;
};

/* The weight scale of 32-group j (0..3) of a chunk for a row, from its UE8M0 scale word. */
static __device__ __forceinline__ float wd_group_scale(uint32_t word, uint32_t mode, int j) {
    const uint32_t e = (mode & HFP4_SM90_MODE_PER32) ? (word >> (8 * j)) & 0xFFu
                                                     : ((word >> 16) & 0xFFu) + ((word >> (4 * j)) & 15u) - 12u;
    return ue8m0_to_float(e);
}

/* A folded chunk's sum into fin: rows g, g + 8 (scale words sw0, sw1: the row scales 2^(e_max - 133))
 * x tokens 2t, 2t + 1 (their activation scales at as2) */
static __device__ __forceinline__ void wd_promote_folded(const float (&acc)[4], uint32_t sw0, uint32_t sw1, const float *as2,
                                                         float (&fin)[4]) {
    const float2 s = *(const float2 *)as2;
    const float r0 = row_scale_from_emax((sw0 >> 16) & 0xFFu), r1 = row_scale_from_emax((sw1 >> 16) & 0xFFu);
    fin[0] = fmaf(acc[0], r0 * s.x, fin[0]);
    fin[1] = fmaf(acc[1], r0 * s.y, fin[1]);
    fin[2] = fmaf(acc[2], r1 * s.x, fin[2]);
    fin[3] = fmaf(acc[3], r1 * s.y, fin[3]);
}

/* A chunk into fin (rows g, g + 8 of the warp's slice x tokens 2t, 2t + 1). as: the unit's staged
 * activation scales ([kgroup][8 tokens]); desc: the chunk's activation tile. Folded chunks (1x128
 * scales, UE8M0 weights): the relative exponents ride in the conversion tables, the 4 k32 steps chain
 * into one accumulator and one promotion; otherwise every step has its own accumulator and promotion
 * with its own weight and activation scales (per-32 chunks, FP32 weight scales, 1x32 scales). */
template <bool W_FP32, bool G32>
static __device__ __forceinline__ void wd_compute_chunk(const wd_chunk &w, const wd_scales<W_FP32> &ch, const float *as,
                                                        int64_t c, sm90_desc desc, int t, float (&fin)[4]) {
    uint32_t a[4][4];
#ifdef HFP4_WD_NO_COMPUTE /* (a timing-only build: the loads consumed, no math; wrong results) */
    fin[0] += __uint_as_float((w.q0.x ^ w.q0.y ^ w.q0.z ^ w.q0.w ^ w.q1.x ^ w.q1.y ^ w.q1.z ^ w.q1.w ^ ch.sw0) & 0x3F800000u);
    return;
#endif
    if (!W_FP32 && !G32 && !(ch.mode & HFP4_SM90_MODE_PER32)) {
        convert_folded_chunk(a, w.q0, w.q1, ch.sw0, ch.sw1);
        float acc[4];
        wgmma_fp8_rs_chunk<8>(acc, a, desc);
        wgmma_wait<0>();
        wgmma_chunk_waited<8>(acc, a);
        wd_promote_folded(acc, ch.sw0, ch.sw1, as + c * 8 + 2 * t, fin);
        return;
    }
    convert_folded_chunk(a, w.q0, w.q1, 0x6666u, 0x6666u); /* off 6 in every step: the plain values */
    float acc[4][4];
    wgmma_fp8_rs_steps<8, 4>(acc, a, desc);
    wgmma_wait<0>();
    wgmma_steps_waited<8, 4>(acc, a);
    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* 1x128: the steps summed in activation-scale units */
#pragma unroll
    for (int s = 0; s < 4; s++) {
        float w0, w1;
        if constexpr (W_FP32) {
            const float f0[4] = {ch.sf0.x, ch.sf0.y, ch.sf0.z, ch.sf0.w}, f1[4] = {ch.sf1.x, ch.sf1.y, ch.sf1.z, ch.sf1.w};
            w0 = f0[s];
            w1 = f1[s];
        } else {
            w0 = wd_group_scale(ch.sw0, ch.mode, s);
            w1 = wd_group_scale(ch.sw1, ch.mode, s);
        }
        if constexpr (G32) {
            const float2 sa = *(const float2 *)(as + (4 * c + s) * 8 + 2 * t);
            fin[0] = fmaf(acc[s][0], w0 * sa.x, fin[0]);
            fin[1] = fmaf(acc[s][1], w0 * sa.y, fin[1]);
            fin[2] = fmaf(acc[s][2], w1 * sa.x, fin[2]);
            fin[3] = fmaf(acc[s][3], w1 * sa.y, fin[3]);
        } else {
            part[0] = fmaf(acc[s][0], w0, part[0]);
            part[1] = fmaf(acc[s][1], w0, part[1]);
            part[2] = fmaf(acc[s][2], w1, part[2]);
            part[3] = fmaf(acc[s][3], w1, part[3]);
        }
    }
    if constexpr (!G32) {
        const float2 s = *(const float2 *)(as + c * 8 + 2 * t);
        fin[0] = fmaf(part[0], s.x, fin[0]);
        fin[1] = fmaf(part[1], s.y, fin[1]);
        fin[2] = fmaf(part[2], s.x, fin[2]);
        fin[3] = fmaf(part[3], s.y, fin[3]);
    }
}

/* Two folded chunks at once: both converted (two independent chains), their 8 wgmmas in one group
 * with one wait, each promoted (H200, masked graph: +2-3 % over one chunk at a time at T = 1..32). */
static __device__ __forceinline__ void wd_compute_pair(const wd_chunk &w0, const wd_chunk &w1, const wd_scales<false> &s0,
                                                       const wd_scales<false> &s1, const float *as, int64_t c,
                                                       sm90_desc desc, int t, float (&fin)[4]) {
    uint32_t a0[4][4], a1[4][4];
    convert_folded_chunk(a0, w0.q0, w0.q1, s0.sw0, s0.sw1);
    convert_folded_chunk(a1, w1.q0, w1.q1, s1.sw0, s1.sw1);
    float acc0[4], acc1[4];
#pragma unroll
    for (int st = 0; st < 4; st++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            reg_fence(a0[st][r]);
            reg_fence(a1[st][r]);
        }
    wgmma_fence();
    const sm90_desc d1 = desc_advance_rows(desc, 8);
#pragma unroll
    for (int st = 0; st < 4; st++) wgmma_fp8_rs<8>(acc0, a0[st], desc_advance_k32(desc, st), st > 0);
#pragma unroll
    for (int st = 0; st < 4; st++) wgmma_fp8_rs<8>(acc1, a1[st], desc_advance_k32(d1, st), st > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_chunk_waited<8>(acc0, a0);
    wgmma_chunk_waited<8>(acc1, a1);
    /* (both chunks' scales read before either promotion: two wd_promote_folded calls schedule them
     * one after the other, a different SASS from the build the H200 measured and tested) */
    const float2 x0 = *(const float2 *)(as + c * 8 + 2 * t), x1 = *(const float2 *)(as + (c + 1) * 8 + 2 * t);
    const float r00 = row_scale_from_emax((s0.sw0 >> 16) & 0xFFu), r01 = row_scale_from_emax((s0.sw1 >> 16) & 0xFFu);
    const float r10 = row_scale_from_emax((s1.sw0 >> 16) & 0xFFu), r11 = row_scale_from_emax((s1.sw1 >> 16) & 0xFFu);
    fin[0] = fmaf(acc0[0], r00 * x0.x, fin[0]);
    fin[1] = fmaf(acc0[1], r00 * x0.y, fin[1]);
    fin[2] = fmaf(acc0[2], r01 * x0.x, fin[2]);
    fin[3] = fmaf(acc0[3], r01 * x0.y, fin[3]);
    fin[0] = fmaf(acc1[0], r10 * x1.x, fin[0]);
    fin[1] = fmaf(acc1[1], r10 * x1.y, fin[1]);
    fin[2] = fmaf(acc1[2], r11 * x1.x, fin[2]);
    fin[3] = fmaf(acc1[3], r11 * x1.y, fin[3]);
}
