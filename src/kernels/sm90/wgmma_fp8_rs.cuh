/*
 * wgmma_fp8_rs.cuh - wgmma.m64nNk32.f32.e4m3.e4m3 with A from registers (RS form), one wrapper per N.
 *
 * A (64 x 32 FP8) comes from four 32-bit registers per thread (the weights, converted in registers),
 * B (N x 32 FP8, K-major) from a shared-memory descriptor (the activation tile), D is FP32 in
 * registers (N/2 per thread). scale_d = 0 overwrites D, 1 accumulates. The operand lists are long
 * and regular, so each wrapper spells them out; besides them only the 4 chained k32 steps of a
 * 128-K chunk (wgmma_fp8_rs_chunk) and the G32 kernels' unchained forms (each step, a pair of steps
 * or all four into accumulators of their own: consumer_pipelined.cuh) live here.
 */
#pragma once
#include <stdint.h>

#include "ptx.cuh"
static __device__ __forceinline__ void wgmma_m64n8k32_fp8_rs(float *d, const uint32_t *a, sm90_desc desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %10, 0;\nmov.b64 desc, {%8, %9};\n"
        "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 "
        "{%0,%1,%2,%3}, "
        "{%4,%5,%6,%7}, desc, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(desc_b.lo), "r"(desc_b.hi), "r"(scale_d));
}
static __device__ __forceinline__ void wgmma_m64n16k32_fp8_rs(float *d, const uint32_t *a, sm90_desc desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %14, 0;\nmov.b64 desc, {%12, %13};\n"
        "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
        "{%0,%1,%2,%3,%4,%5,%6,%7}, "
        "{%8,%9,%10,%11}, desc, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(desc_b.lo), "r"(desc_b.hi), "r"(scale_d));
}
static __device__ __forceinline__ void wgmma_m64n32k32_fp8_rs(float *d, const uint32_t *a, sm90_desc desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %22, 0;\nmov.b64 desc, {%20, %21};\n"
        "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
        "{%16,%17,%18,%19}, desc, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(desc_b.lo), "r"(desc_b.hi), "r"(scale_d));
}
static __device__ __forceinline__ void wgmma_m64n64k32_fp8_rs(float *d, const uint32_t *a, sm90_desc desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %38, 0;\nmov.b64 desc, {%36, %37};\n"
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
        "{%32,%33,%34,%35}, desc, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(desc_b.lo), "r"(desc_b.hi), "r"(scale_d));
}
static __device__ __forceinline__ void wgmma_m64n96k32_fp8_rs(float *d, const uint32_t *a, sm90_desc desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %54, 0;\nmov.b64 desc, {%52, %53};\n"
        "wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47}, "
        "{%48,%49,%50,%51}, desc, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(desc_b.lo), "r"(desc_b.hi), "r"(scale_d));
}
static __device__ __forceinline__ void wgmma_m64n128k32_fp8_rs(float *d, const uint32_t *a, sm90_desc desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %70, 0;\nmov.b64 desc, {%68, %69};\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
        "{%64,%65,%66,%67}, desc, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(desc_b.lo), "r"(desc_b.hi), "r"(scale_d));
}
/* Dispatch on the compile-time tile width. */
template <int N>
static __device__ __forceinline__ void wgmma_fp8_rs(float *d, const uint32_t *a, sm90_desc desc_b, int scale_d) {
    if constexpr (N == 8) wgmma_m64n8k32_fp8_rs(d, a, desc_b, scale_d);
    else if constexpr (N == 16) wgmma_m64n16k32_fp8_rs(d, a, desc_b, scale_d);
    else if constexpr (N == 32) wgmma_m64n32k32_fp8_rs(d, a, desc_b, scale_d);
    else if constexpr (N == 64) wgmma_m64n64k32_fp8_rs(d, a, desc_b, scale_d);
    else if constexpr (N == 96) wgmma_m64n96k32_fp8_rs(d, a, desc_b, scale_d);
    else if constexpr (N == 128) wgmma_m64n128k32_fp8_rs(d, a, desc_b, scale_d);
}

/* The 4 k32 steps of a 128-K chunk chained into one accumulator: fragments a[st] (fenced, so the
 * conversion that made them is not moved past the wgmmas), B at desc advanced st k32 steps (32 bytes in
 * the 128B-swizzled tile), issued and committed as one group; the caller waits (wgmma_wait) and must
 * keep a unchanged until then (wgmma_chunk_waited). accumulate: the first step adds to d too. */
template <int N>
static __device__ __forceinline__ void wgmma_fp8_rs_chunk(float *d, uint32_t (&a)[4][4], sm90_desc desc_b,
                                                          int accumulate = 0) {
#pragma unroll
    for (int st = 0; st < 4; st++)
#pragma unroll
        for (int r = 0; r < 4; r++) reg_fence(a[st][r]);
    wgmma_fence();
#pragma unroll
    for (int st = 0; st < 4; st++) wgmma_fp8_rs<N>(d, a[st], desc_advance_k32(desc_b, st), st > 0 || accumulate);
    wgmma_commit();
}

/* After wgmma_wait for a chunk issued by wgmma_fp8_rs_chunk: d is final from here on and a may be
 * reused; the fences keep the compiler from reading d or overwriting a any earlier. */
template <int N>
static __device__ __forceinline__ void wgmma_chunk_waited(float *d, uint32_t (&a)[4][4]) {
#pragma unroll
    for (int r = 0; r < N / 2; r++) reg_fence(d[r]);
#pragma unroll
    for (int st = 0; st < 4; st++)
#pragma unroll
        for (int r = 0; r < 4; r++) reg_fence(a[st][r]);
}

/* Steps ST0 .. ST0 + NA - 1 of a chunk into NA accumulators of their own (d[i] := step ST0 + i),
 * issued and committed as one group: for 1x32 activation scales, where each step's sum is promoted
 * with its own k-group's scales (consumer_pipelined.cuh, G32): all 4 at once where they fit, pairs
 * (the two-CTA 8-token tile's 96 registers, the 64-token tile's 4 x 32), or one at a time (the
 * 128-token tile: an accumulator is 64 registers). FENCE_D: d is fenced too (a group issued after
 * the caller promoted from the same registers). The caller waits (wgmma_wait) and must keep a
 * unchanged until then (wgmma_steps_waited). */
template <int N, int NA, int ST0 = 0, bool FENCE_D = true>
static __device__ __forceinline__ void wgmma_fp8_rs_steps(float (&d)[NA][N / 2], uint32_t (&a)[4][4], sm90_desc desc_b) {
    static_assert(ST0 >= 0 && NA >= 1 && ST0 + NA <= 4, "a chunk has 4 k32 steps");
#pragma unroll
    for (int st = ST0; st < ST0 + NA; st++)
#pragma unroll
        for (int r = 0; r < 4; r++) reg_fence(a[st][r]);
    if constexpr (FENCE_D)
#pragma unroll
        for (int i = 0; i < NA; i++)
#pragma unroll
            for (int r = 0; r < N / 2; r++) reg_fence(d[i][r]);
    wgmma_fence();
#pragma unroll
    for (int i = 0; i < NA; i++) wgmma_fp8_rs<N>(d[i], a[ST0 + i], desc_advance_k32(desc_b, ST0 + i), 0);
    wgmma_commit();
}
template <int N, int NA, int ST0 = 0>
static __device__ __forceinline__ void wgmma_steps_waited(float (&d)[NA][N / 2], uint32_t (&a)[4][4]) {
#pragma unroll
    for (int i = 0; i < NA; i++) {
#pragma unroll
        for (int r = 0; r < N / 2; r++) reg_fence(d[i][r]);
#pragma unroll
        for (int r = 0; r < 4; r++) reg_fence(a[ST0 + i][r]);
    }
}
