/*
 * wgmma_fp8_ss.cuh - wgmma.m64n128k32.f32.e4m3.e4m3 with both operands in shared memory (SS form):
 * A (64 x 32 FP8) and B (128 x 32 FP8), both K-major through descriptors, D FP32 in 64 registers per
 * thread (row g / g + 8 of the thread's warp slab, columns (i / 4) 8 + 2 t4 + (i % 2): the same
 * fragment layout as the RS form). What an FP8 x FP8 GEMM runs (DeepGEMM's loop), and what the
 * "convert once, then FP8" route for prefill would (bench/micro/fp8_ss_gemm.cu).
 */
#pragma once
#include <stdint.h>

#include "ptx.cuh"

/* scale_d = 0 overwrites D, 1 accumulates */
static __device__ __forceinline__ void wgmma_m64n128k32_fp8_ss(float *d, sm90_desc a, sm90_desc b, int scale_d) {
    const uint64_t da = ((uint64_t)a.hi << 32) | a.lo, db = ((uint64_t)b.hi << 32) | b.lo;
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,"
        "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,"
        "%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(scale_d));
}

/* The 4 chained k32 steps of a 128-K chunk: a and b at the chunk's first 32 bytes of K (128-byte
 * swizzled K-major tiles, smem_desc_k128_swizzle128), D overwritten by the first step. The caller
 * fences (wgmma_fence), commits and waits. */
static __device__ __forceinline__ void wgmma_fp8_ss_chunk_n128(float *d, sm90_desc a, sm90_desc b) {
#pragma unroll
    for (int k = 0; k < 4; k++) wgmma_m64n128k32_fp8_ss(d, desc_advance_k32(a, k), desc_advance_k32(b, k), k > 0);
}

/* fin += acc x the activation scale of the thread's token row: s0 for row g (registers 4j, 4j + 1),
 * s1 for row g + 8 (4j + 2, 4j + 3); one FFMA per accumulator (DeepGEMM's promotion) */
static __device__ __forceinline__ void promote_token_rows_n128(float *fin, const float *acc, float s0, float s1) {
#pragma unroll
    for (int j = 0; j < 16; j++) {
        fin[4 * j + 0] += acc[4 * j + 0] * s0;
        fin[4 * j + 1] += acc[4 * j + 1] * s0;
        fin[4 * j + 2] += acc[4 * j + 2] * s1;
        fin[4 * j + 3] += acc[4 * j + 3] * s1;
    }
}
