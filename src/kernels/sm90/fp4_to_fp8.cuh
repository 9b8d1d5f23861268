/*
 * fp4_to_fp8.cuh - exact FP4 (e2m1) -> FP8 (e4m3) conversion in registers for the SM90 kernels: a
 * prmt table lookup per 4 values of the pre-signed words of the repacked layout (sm90_layout.h),
 * with a folded chunk's relative exponent carried by the table; and a folded chunk's fragments.
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

/* The 4 row-g and the 4 row-(g+8) values of a pre-signed word (sm90_layout.h) as 4 e4m3 bytes each,
 * through the rows' tables: one mask of the 8 magnitudes serves both prmt selectors (row g+8's in
 * the high half; prmt reads only a selector's low 16 bits), and each row's signs are or-ed in. */
static __device__ __forceinline__ void fp4x8_rows_to_fp8(uint32_t q, uint32_t lo0, uint32_t hi0, uint32_t lo1,
                                                         uint32_t hi1, uint32_t &row_g, uint32_t &row_g8) {
    const uint32_t mag = q & 0x77777777u;
    row_g = prmt(lo0, hi0, mag) | (q & 0x80808080u);
    row_g8 = prmt(lo1, hi1, mag >> 16) | ((q << 4) & 0x80808080u);
}

/* The e4m3 register fragments of k32 steps FIRST .. FIRST + COUNT - 1 (all 4 by default) of a folded
 * chunk from this thread's two 16-byte words (q0, q1) and its rows' scale words (e0, e1: the
 * relative exponent of each 32-group, sm90_layout.h): words of step st are (k 4t..4t+3,
 * k 16+4t..16+4t+3) for rows (g, g+8). */
template <int FIRST = 0, int COUNT = 4>
static __device__ __forceinline__ void convert_folded_chunk(uint32_t (&a)[4][4], uint4 q0, uint4 q1, uint32_t e0,
                                                            uint32_t e1) {
    static_assert(FIRST >= 0 && COUNT >= 1 && FIRST + COUNT <= 4, "a chunk has 4 k32 steps");
    const uint32_t wlo[4] = {q0.x, q0.z, q1.x, q1.z};
    const uint32_t whi[4] = {q0.y, q0.w, q1.y, q1.w};
#pragma unroll
    for (int st = FIRST; st < FIRST + COUNT; st++) {
        uint32_t lo0, hi0, lo1, hi1;
        fp8_table((e0 >> (4 * st)) & 15, lo0, hi0);
        fp8_table((e1 >> (4 * st)) & 15, lo1, hi1);
        fp4x8_rows_to_fp8(wlo[st], lo0, hi0, lo1, hi1, a[st][0], a[st][1]);
        fp4x8_rows_to_fp8(whi[st], lo0, hi0, lo1, hi1, a[st][2], a[st][3]);
    }
}
