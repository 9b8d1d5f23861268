/*
 * wgmma_bf16_rs.cuh - wgmma.m64n128k16.f32.bf16.bf16 with A from registers (RS form): the BF16 path's
 * one shape (bf16_fp4_gemm.cu). A (64 x 16 BF16) is four 32-bit registers per thread (the weights,
 * converted in registers: fp4_to_bf16.cuh), B (128 tokens x 16 BF16, K-major) a shared-memory
 * descriptor, D 64 FP32 registers per thread with the same fragment layout as the FP8 m64n128k32's.
 * scale_d = 0 overwrites D, 1 accumulates.
 */
#pragma once
#include <stdint.h>

#include "ptx.cuh"

static __device__ __forceinline__ void wgmma_m64n128k16_bf16_rs(float *d, const uint32_t *a, sm90_desc desc_b,
                                                                int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %70, 0;\nmov.b64 desc, {%68, %69};\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
        "{%64,%65,%66,%67}, desc, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(desc_b.lo), "r"(desc_b.hi), "r"(scale_d));
}

/* A 128-K chunk's 8 k16 steps into d (fragments a[k], fenced so the conversion that made them is not
 * moved past the wgmmas), B at desc (two 64-K atoms of 128-byte swizzled rows, atom_units apart in
 * descriptor units: 16 bytes), committed as one group; accumulate: the first step adds to d too. The
 * caller waits (wgmma_wait) and must keep a unchanged until then. */
static __device__ __forceinline__ void wgmma_bf16_chunk(float *d, uint32_t (&a)[8][4], sm90_desc desc,
                                                        uint32_t atom_units, bool accumulate) {
#pragma unroll
    for (int k = 0; k < 8; k++)
#pragma unroll
        for (int r = 0; r < 4; r++) reg_fence(a[k][r]);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 8; k++) {
        sm90_desc dk = desc;
        dk.lo += (uint32_t)(k / 4) * atom_units + (uint32_t)(k % 4) * 2; /* 32 bytes a k16 step */
        wgmma_m64n128k16_bf16_rs(d, a[k], dk, k > 0 || accumulate);
    }
    wgmma_commit();
}
