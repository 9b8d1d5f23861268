/*
 * fp4_to_bf16.cuh - exact FP4 (e2m1) x UE8M0 -> BF16 conversion in registers for the BF16 path
 * (bf16_fp4_gemm.cu): the pre-signed words of the repacked layout (sm90_layout.h) become the register
 * fragments of wgmma m64nNk16 .bf16, with each 32-group's whole scale folded into the values (BF16
 * has FP32's exponent range, so e2m1 x 2^(s - 127) is exact for every scale byte s in [2, 252]).
 *
 * K order: the words hold, per k32 step, K offsets (4t..4t+3) and (16+4t..16+4t+3) of rows g and
 * g + 8 (the FP8 fragment); a BF16 k16 fragment holds K (2t, 2t+1) and (2t+8, 2t+9). Fragment
 * position p of a 32-group therefore takes the weight at K offset pi(p) = 16 (p / 16) + 4 ((p % 8) / 2)
 * + 2 ((p % 16) / 8) + p % 2, and the activations are stored with the same permutation inside each
 * 32-group (bf16_act_perm; a permutation of K on both operands leaves every sum as it was).
 */
#pragma once
#include <stdint.h>

#include "ptx.cuh"

/* pi(p): the K offset inside a 32-group whose value sits at BF16 fragment position p */
static __host__ __device__ __forceinline__ int bf16_act_perm(int p) {
    return 16 * (p / 16) + 4 * ((p % 8) / 2) + 2 * ((p % 16) / 8) + p % 2;
}

/* The byte tables of the 8 e2m1 magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} x 2^(s - 127) as BF16, for a
 * UE8M0 scale byte s in [2, 252] (bf16_scale_ok): (h0, h1) the high bytes (exponent >> 1; the sign
 * comes from the word), (l0, l1) the low bytes (the exponent's last bit, the mantissa). With
 * s = 2h + p, entries c = 1..7 have exponents s - 1, s, s, s + 1, s + 1, s + 2, s + 2, so the high
 * bytes are h plus a constant of the parity and the low bytes a constant of the parity. */
static __device__ __forceinline__ void bf16_tables(uint32_t s, uint32_t (&t)[4]) {
    const uint32_t h = s >> 1, odd = s & 1u;
    t[0] = h * 0x01010100u + (odd ? 0u : 0xFFFFFF00u);
    t[1] = h * 0x01010101u + (odd ? 0x01010101u : 0x01010000u);
    t[2] = odd ? 0xC0800000u : 0x40008000u;
    t[3] = odd ? 0xC0804000u : 0x4000C080u;
}
static __host__ __device__ __forceinline__ bool bf16_scale_ok(uint32_t s) { return s >= 2u && s <= 252u; }

/* One pre-signed word (4 values of row g in nibbles 0..3, signs at bits 8j + 7; 4 of row g + 8 in
 * nibbles 4..7, signs at bits 8j + 3; K offsets kk + 0..3) as BF16 pairs through the rows' tables:
 * g01 (row g, kk + 0, 1), g23 (kk + 2, 3), r01, r23 (row g + 8). 13 instructions for 8 values. */
static __device__ __forceinline__ void fp4x8_to_bf16(uint32_t q, const uint32_t (&tg)[4], const uint32_t (&tr)[4],
                                                     uint32_t &g01, uint32_t &g23, uint32_t &r01, uint32_t &r23) {
    const uint32_t mag = q & 0x77777777u, mag8 = mag >> 16;
    const uint32_t hg = prmt(tg[0], tg[1], mag) | (q & 0x80808080u), lg = prmt(tg[2], tg[3], mag);
    const uint32_t hr = prmt(tr[0], tr[1], mag8) | ((q << 4) & 0x80808080u), lr = prmt(tr[2], tr[3], mag8);
    g01 = prmt(lg, hg, 0x5140u);
    g23 = prmt(lg, hg, 0x7362u);
    r01 = prmt(lr, hr, 0x5140u);
    r23 = prmt(lr, hr, 0x7362u);
}

/* The UE8M0 byte of 32-group j of a chunk from a row's scale word (sm90_layout.h): a per-32 word holds
 * the bytes, a folded one the offset off_j and the row's e_max, whose scale is 2^(off_j + e_max - 139) */
static __device__ __forceinline__ uint32_t bf16_group_scale(uint32_t word, bool per32, int j) {
    return per32 ? (word >> (8 * j)) & 255u : ((word >> (4 * j)) & 15u) + ((word >> 16) & 255u) - 12u;
}

/* A 128-K chunk's 8 k16 fragments (a[k][0..3]: rows g, g + 8 of K (2t, 2t+1), then (2t+8, 2t+9), in
 * the permuted order above) from the thread's two 16-byte words (q0: K 0..63, q1: 64..127) and its
 * rows' scale words (eg: row g, er: row g + 8); per32: the chunk's mode bit 0. Returns false when a
 * non-zero value of this thread has a scale byte outside [2, 252] (not exact in BF16 through the
 * tables: the caller poisons its rows' sums); all-zero groups may carry any byte (a folded chunk's
 * zero groups and padding rows). */
static __device__ __forceinline__ bool convert_chunk_bf16(uint32_t (&a)[8][4], uint4 q0, uint4 q1, uint32_t eg,
                                                          uint32_t er, bool per32) {
    const uint32_t wlo[4] = {q0.x, q0.z, q1.x, q1.z};
    const uint32_t whi[4] = {q0.y, q0.w, q1.y, q1.w};
    uint32_t sg[4], sr[4];
    bool all_ok = true;
#pragma unroll
    for (int st = 0; st < 4; st++) {
        sg[st] = bf16_group_scale(eg, per32, st);
        sr[st] = bf16_group_scale(er, per32, st);
        all_ok &= bf16_scale_ok(sg[st]) & bf16_scale_ok(sr[st]);
    }
    bool exact = true;
    if (!all_ok) { /* (rare) which of them hold non-zero values; the tables are built from clamped bytes */
#pragma unroll
        for (int st = 0; st < 4; st++) {
            const uint32_t nz = (wlo[st] | whi[st]) & 0x77777777u;
            if (!bf16_scale_ok(sg[st]) && (nz & 0x7777u) != 0) exact = false;
            if (!bf16_scale_ok(sr[st]) && (nz >> 16) != 0) exact = false;
            sg[st] = min(max(sg[st], 2u), 252u);
            sr[st] = min(max(sr[st], 2u), 252u);
        }
    }
#pragma unroll
    for (int st = 0; st < 4; st++) {
        uint32_t tg[4], tr[4];
        bf16_tables(sg[st], tg);
        bf16_tables(sr[st], tr);
        fp4x8_to_bf16(wlo[st], tg, tr, a[2 * st][0], a[2 * st][2], a[2 * st][1], a[2 * st][3]);
        fp4x8_to_bf16(whi[st], tg, tr, a[2 * st + 1][0], a[2 * st + 1][2], a[2 * st + 1][1], a[2 * st + 1][3]);
    }
    return exact;
}
