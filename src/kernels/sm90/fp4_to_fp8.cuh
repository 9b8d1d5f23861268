/*
 * fp4_to_fp8.cuh - exact FP4 (e2m1) -> FP8 (e4m3) conversion in registers for the SM90 kernels: a
 * prmt table lookup per 4 values of the pre-signed words of the repacked layout (sm90_layout.h),
 * with a folded chunk's relative exponent carried by the table.
 */
#pragma once
#include <stdint.h>

#include "ptx.cuh"

/* The 8-entry e4m3 table of the e2m1 magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} x 2^(off - 6), for off in
 * 1..12 (all entries normal or zero, so exact): entry i is byte i of (lo, hi). off = 6 gives the
 * plain values. The table is linear in off because only the exponent field moves. */
static __device__ __forceinline__ void fp8_table(uint32_t off, uint32_t &lo, uint32_t &hi) {
    lo = off * 0x08080800u + 0x0C080000u;
    hi = off * 0x08080808u + 0x1C181410u;
}

/* Converts the 4 row-g values of a pre-signed word (sm90_layout.h) to 4 e4m3 bytes. */
static __device__ __forceinline__ uint32_t fp4x4_row_lo_to_fp8(uint32_t q, uint32_t lo, uint32_t hi) {
    return prmt(lo, hi, q & 0x7777u) | (q & 0x80808080u);
}
/* Converts the 4 row-(g+8) values of a pre-signed word to 4 e4m3 bytes. */
static __device__ __forceinline__ uint32_t fp4x4_row_hi_to_fp8(uint32_t q, uint32_t lo, uint32_t hi) {
    return prmt(lo, hi, (q >> 16) & 0x7777u) | ((q << 4) & 0x80808080u);
}
