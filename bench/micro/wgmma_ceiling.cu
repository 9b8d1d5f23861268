/*
 * wgmma_ceiling.cu - how fast can the SM90 kernel's consumer structure go, with no memory traffic?
 *
 * The prefill kernel (src/kernels/sm90) keeps the tensor pipe ~34 % busy (ncu, w13 T = 16384) while
 * no single part of its instruction stream dominates. This microbenchmark times the consumer loop's
 * skeleton on data that never changes (one shared-memory B tile, constant A fragments), adding one
 * ingredient per variant, so the gaps between rows show what each costs:
 *   0  4 RS wgmmas m64nBTk32 per "chunk" into one accumulator, waited at the end only (RS ceiling)
 *   1  + wait for the wgmmas every chunk (the per-128-K promotion point)
 *   2  + promotion: one FFMA per accumulator with per-token scales from shared memory
 *   3  + conversion of the next chunk's fragments (prmt tables, as the kernel) before issuing
 *   4  like 3, but the conversion of chunk k+1 runs while chunk k's wgmmas do (the look-ahead)
 * and the same loop with the weights as wgmma's shared-memory operand (SS form, as an FP8 x FP8 GEMM
 * runs), which asks whether the register operand itself costs the tensor pipe:
 *   5  4 SS wgmmas per chunk from a fixed 64-row weight tile per warpgroup, + wait + promotion (row 2's SS twin)
 *   6  + each warpgroup converts the chunk's fragments (as 3) and writes them into its own weight tile
 *      by stmatrix (4 a chunk), fences them for the async proxy and syncs the warpgroup, then issues
 *   7  like 6, but chunk k+1 is converted and written into the other of two tiles while chunk k's
 *      wgmmas run (the look-ahead of 4 with the fragments in shared memory)
 * and the RS loop with two accumulators, so a warpgroup's tensor work never stops for its own promotion:
 *   8  chunk k+1's wgmmas go out before chunk k is waited (wait_group 1), then chunk k+2 is converted
 *      and chunk k promoted under them (fin 64 + 2 x 64 accumulators + 2 fragment sets)
 * Two consumer warpgroups per CTA, one CTA per SM, like the kernel. Prints TFLOP/s per variant.
 *
 * Build (here):  make BUILD=build-dev build-dev/wgmma_ceiling
 * Run (device):  build-dev/wgmma_ceiling            (a few seconds)
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "micro_timing.cuh"
#include "sm90/fp8_fp4_gemm.cuh" /* convert_folded_chunk, the wgmma and PTX wrappers */
#include "sm90/wgmma_fp8_ss.cuh"

#define BT 128
#define CHUNKS 2048

/* the B tile (BT tokens x 128 K of e4m3, 128B-swizzled rows), BT activation scales, and (SS rows)
 * two 64-row weight tiles (8 KB each, 1024-aligned) per warpgroup */
#define W_TILE (64 * 128)
#define SMEM_BYTES (1024 + BT * 128 + 4 * W_TILE + BT * 4 + 4 * 256 * 16)

/* stmatrix .x4 (not transposed): lane l gives the address of row l % 8 of matrix l / 8; register j
 * holds the thread's 4 bytes of matrix j (row lane / 4, bytes 4 (lane % 4)..+3): the RS fragment's
 * layout, so a converted k32 step goes to shared memory as one instruction */
static __device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
                 "r"(r2), "r"(r3)
                 : "memory");
}

/* A converted chunk (fragments a[4][4]) into a warpgroup's 64-row weight tile, K-major with the
 * 128-byte swizzle (16-byte chunk c of row R at R x 128 + ((c ^ R % 8) x 16)): per k32 step st, this
 * lane addresses row 16 warp + 8 ((lane / 8) & 1) + lane % 8, chunk 2 st + lane / 16 */
static __device__ __forceinline__ void store_fragments(uint32_t tile, const uint32_t (&a)[4][4], int warp, int lane) {
    const int ri = lane % 8, R = 16 * warp + 8 * ((lane / 8) & 1) + ri;
#pragma unroll
    for (int st = 0; st < 4; st++) {
        const int c = 2 * st + lane / 16;
        stmatrix_x4(tile + R * 128 + ((c ^ ri) << 4), a[st][0], a[st][1], a[st][2], a[st][3]);
    }
}

/* Chunk kc's conversion from words that all change with kc (one LOP a word and scale word), so that
 * ptxas cannot hoist any of it out of the loop (v5's rows 3 and 4 changed one word: most of the
 * conversion was hoisted and they understated its cost) */
static __device__ __forceinline__ void convert_chunk_words(uint32_t (&dst)[4][4], uint4 q0, uint4 q1, uint32_t e0,
                                                           uint32_t e1, int kc) {
    const uint32_t x = (uint32_t)kc * 0x01010101u & 0x33333333u;
    convert_folded_chunk(dst, make_uint4(q0.x ^ x, q0.y ^ x, q0.z ^ x, q0.w ^ x),
                         make_uint4(q1.x ^ x, q1.y ^ x, q1.z ^ x, q1.w ^ x), e0 ^ (x & 0x1111u), e1 ^ (x & 0x1010u));
}

/* wait_group 1 with the accumulator the wait completes as in-out operands (no instruction touches
 * them): reads of x cannot move above it, and no empty asm "defines" x while the other group runs */
static __device__ __forceinline__ void wgmma_wait1_acc64(float *x) {
    asm volatile("wgmma.wait_group.sync.aligned 1;\n"
                 : "+f"(x[0]), "+f"(x[1]), "+f"(x[2]), "+f"(x[3]), "+f"(x[4]), "+f"(x[5]), "+f"(x[6]), "+f"(x[7]),
                   "+f"(x[8]), "+f"(x[9]), "+f"(x[10]), "+f"(x[11]), "+f"(x[12]), "+f"(x[13]), "+f"(x[14]), "+f"(x[15]),
                   "+f"(x[16]), "+f"(x[17]), "+f"(x[18]), "+f"(x[19]), "+f"(x[20]), "+f"(x[21]), "+f"(x[22]), "+f"(x[23]),
                   "+f"(x[24]), "+f"(x[25]), "+f"(x[26]), "+f"(x[27]), "+f"(x[28]), "+f"(x[29]), "+f"(x[30]), "+f"(x[31]),
                   "+f"(x[32]), "+f"(x[33]), "+f"(x[34]), "+f"(x[35]), "+f"(x[36]), "+f"(x[37]), "+f"(x[38]), "+f"(x[39]),
                   "+f"(x[40]), "+f"(x[41]), "+f"(x[42]), "+f"(x[43]), "+f"(x[44]), "+f"(x[45]), "+f"(x[46]), "+f"(x[47]),
                   "+f"(x[48]), "+f"(x[49]), "+f"(x[50]), "+f"(x[51]), "+f"(x[52]), "+f"(x[53]), "+f"(x[54]), "+f"(x[55]),
                   "+f"(x[56]), "+f"(x[57]), "+f"(x[58]), "+f"(x[59]), "+f"(x[60]), "+f"(x[61]), "+f"(x[62]), "+f"(x[63])
                 :
                 : "memory");
}

template <int V>
__global__ void __launch_bounds__(256, 1) ceiling_kernel(const uint4 *wsrc, float *out) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *b_tile = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    float *sa = (float *)(b_tile + BT * 128);
    for (int i = threadIdx.x; i < BT * 128 / 4; i += blockDim.x)
        ((uint32_t *)b_tile)[i] = 0x38383838u ^ (i * 0x01010101u & 0x07070707u); /* small normal e4m3 */
    for (int i = threadIdx.x; i < BT; i += blockDim.x) sa[i] = 1.0f + i * 0x1p-10f;
    __syncthreads();
    const int t4 = threadIdx.x % 4;
    const sm90_desc desc = smem_desc_k128_swizzle128(b_tile);
    /* the thread's FP4 words and scale words (from global once: the compiler cannot fold them) */
    const uint4 q0 = wsrc[threadIdx.x % 128], q1 = wsrc[128 + threadIdx.x % 128];
    const uint32_t e0 = 0x00860666u, e1 = 0x00860606u;
    float fin[BT / 2];
#pragma unroll
    for (int i = 0; i < BT / 2; i++) fin[i] = 0.0f;
    uint32_t a[4][4], b[4][4];
    convert_folded_chunk(a, q0, q1, e0, e1);
    float acc[BT / 2];
    const int wg = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    uint8_t *w_tiles = b_tile + BT * 128 + BT * 4 + 1024 - ((BT * 128 + BT * 4) & 1023); /* 1024-aligned */
    const uint32_t w_tile0 = smem_addr(w_tiles + wg * 2 * W_TILE), w_tile1 = w_tile0 + W_TILE;
    if (V == 8) {
        float acc2[BT / 2];
        auto promote_acc = [&](const float *x) { promote<BT, false>(fin, x, 1.0f, 1.0f, sa, t4); };
        /* the FP4 words from shared memory, 4 variants by chunk (registers are what this row lacks; the
         * kernel loads them from its stages too) */
        uint4 *wq = (uint4 *)(w_tiles + 4 * W_TILE);
        for (int i = threadIdx.x; i < 4 * 256; i += blockDim.x) {
            const uint32_t x = (uint32_t)(i / 256) * 0x01010101u & 0x33333333u;
            const uint4 v = wsrc[i % 256];
            wq[i] = make_uint4(v.x ^ x, v.y ^ x, v.z ^ x, v.w ^ x);
        }
        __syncthreads();
        const int tq = threadIdx.x % 128;
        auto convert_smem = [&](uint32_t (&dst)[4][4], int kc) {
            const uint4 *w = wq + (kc & 3) * 256;
            convert_folded_chunk(dst, w[tq], w[128 + tq], e0 ^ (kc & 0x11u), e1 ^ (kc & 0x10u));
        };
        /* 4 chunks a trip with nothing in flight across the loop's back edge (ptxas serializes every
         * wgmma (C7514) when an accumulator is read while a group issued in an earlier trip runs): the
         * trip's last promotion is the only one with no wgmma of this warpgroup under it */
        convert_smem(a, 0);
        convert_smem(b, 1);
        for (int kc = 0; kc < CHUNKS; kc += 4) { /* a, b: chunks kc, kc + 1 converted */
            wgmma_fp8_rs_chunk<BT>(acc, a, desc);  /* chunk kc */
            wgmma_fp8_rs_chunk<BT>(acc2, b, desc); /* chunk kc + 1 */
            wgmma_wait1_acc64(acc);
            wgmma_chunk_waited<BT>(acc, a);
            convert_smem(a, kc + 2);
            promote_acc(acc);
            wgmma_fp8_rs_chunk<BT>(acc, a, desc); /* chunk kc + 2 */
            wgmma_wait1_acc64(acc2);
            wgmma_chunk_waited<BT>(acc2, b);
            convert_smem(b, kc + 3);
            promote_acc(acc2);
            wgmma_fp8_rs_chunk<BT>(acc2, b, desc); /* chunk kc + 3 */
            wgmma_wait1_acc64(acc);
            wgmma_chunk_waited<BT>(acc, a);
            convert_smem(a, kc + 4);
            promote_acc(acc);
            wgmma_wait<0>();
            wgmma_chunk_waited<BT>(acc2, b);
            convert_smem(b, kc + 5);
            promote_acc(acc2);
        }
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < BT / 2; i++) sum += fin[i];
        out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
        return;
    }
    if (V >= 5) { /* both tiles hold the first chunk's fragments (row 5 reads only these) */
        store_fragments(w_tile0, a, warp, lane);
        store_fragments(w_tile1, a, warp, lane);
        fence_proxy_async_shared();
        warpgroup_barrier<false>(wg);
    }
    if (V >= 5) {
        /* SS: chunk kc reads tile kc % 2; 6 writes it first, 7 wrote it under chunk kc - 1's wgmmas */
        auto ss_chunk = [&](int kc) {
            const uint32_t cur = kc & 1 ? w_tile1 : w_tile0, nxt = kc & 1 ? w_tile0 : w_tile1;
            if (V == 6) {
                convert_chunk_words(b, q0, q1, e0, e1, kc);
                store_fragments(cur, b, warp, lane);
                fence_proxy_async_shared();
                warpgroup_barrier<false>(wg);
            }
            const sm90_desc da = smem_desc_k128_swizzle128(w_tiles + wg * 2 * W_TILE + (kc & 1) * W_TILE);
            wgmma_fence();
            wgmma_fp8_ss_chunk_n128(acc, da, desc);
            wgmma_commit();
            if (V == 7) { /* the next chunk into the other tile, which chunk kc - 1 read (waited) */
                convert_chunk_words(b, q0, q1, e0, e1, kc + 1);
                store_fragments(nxt, b, warp, lane);
            }
            wgmma_wait<0>();
#pragma unroll
            for (int r = 0; r < BT / 2; r++) reg_fence(acc[r]);
            promote<BT, false>(fin, acc, 1.0f, 1.0f, sa, t4); /* (the kernel's promotion, as rows 2-4) */
            if (V == 7) { /* the next tile's writes, visible to the next chunk's wgmmas */
                fence_proxy_async_shared();
                warpgroup_barrier<false>(wg);
            }
        };
        for (int kc = 0; kc < CHUNKS; kc++) ss_chunk(kc);
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < BT / 2; i++) sum += fin[i];
        out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
        return;
    }
    /* one chunk on fragments cur; with V == 4 the next chunk's fragments are converted into nxt
     * while the wgmmas run (two named register sets, as the kernel's look-ahead: copying one set
     * into the other makes ptxas serialize the wgmmas) */
    auto chunk = [&](int kc, uint32_t (&cur)[4][4], uint32_t (&nxt)[4][4]) {
        if (V == 3) convert_chunk_words(cur, q0, q1, e0, e1, kc); /* in series */
        wgmma_fp8_rs_chunk<BT>(acc, cur, desc, V == 0 && kc > 0);
        if (V == 4) convert_chunk_words(nxt, q0, q1, e0, e1, kc); /* overlapped */
        if (V >= 1) {
            wgmma_wait<0>();
            wgmma_chunk_waited<BT>(acc, cur);
        }
        if (V >= 2) promote<BT, false>(fin, acc, 1.0f, 1.0f, sa, t4); /* fin += acc x the token's scale */
    };
    for (int kc = 0; kc < CHUNKS; kc += 2) {
        chunk(kc, a, b);
        if (V == 4) chunk(kc + 1, b, a);
        else chunk(kc + 1, a, b);
    }
    wgmma_wait<0>();
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < BT / 2; i++) sum += (V >= 2 ? fin[i] : acc[i]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum; /* keeps everything live */
}

typedef struct ceiling_args {
    int sms;
    const uint4 *w;
    float *out;
} ceiling_args;

template <int V>
static void launch_ceiling(void *arg) {
    const ceiling_args *x = (const ceiling_args *)arg;
    ceiling_kernel<V><<<x->sms, 256, SMEM_BYTES>>>(x->w, x->out);
}

template <int V>
static double run(int sms, const uint4 *w, float *out) {
    cudaFuncSetAttribute(ceiling_kernel<V>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    ceiling_args args = {sms, w, out};
    cudaError_t err; /* main checks the device afterwards */
    const float ms = micro_time_ms(launch_ceiling<V>, &args, &err);
    const double flop = (double)sms * 2 /* warpgroups */ * 64.0 * BT * 128.0 * 2.0 * CHUNKS * MICRO_REPS;
    return flop / (ms * 1e-3) / 1e12;
}

int main(void) {
    const int sms = micro_sm_count("wgmma_ceiling");
    if (sms == 0) return 1;
    uint4 *w;
    float *out;
    cudaMalloc(&w, 256 * sizeof(uint4));
    cudaMemset(w, 0x35, 256 * sizeof(uint4));
    cudaMalloc(&out, (size_t)sms * 256 * sizeof(float));
    static const char *names[] = {"wgmma only (RS ceiling)", "+ wait per chunk", "+ promotion (64 FFMA)",
                                  "+ conversion in series", "conversion overlapped (look-ahead)",
                                  "SS: wait + promotion (row 2's twin)", "SS: + conversion, stmatrix, sync",
                                  "SS: conversion overlapped (two tiles)",
                                  "RS: two accumulators, promotion under wgmmas"};
    double tf[9];
    tf[0] = run<0>(sms, w, out);
    tf[1] = run<1>(sms, w, out);
    tf[2] = run<2>(sms, w, out);
    tf[3] = run<3>(sms, w, out);
    tf[4] = run<4>(sms, w, out);
    tf[5] = run<5>(sms, w, out);
    tf[6] = run<6>(sms, w, out);
    tf[7] = run<7>(sms, w, out);
    tf[8] = run<8>(sms, w, out);
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        fprintf(stderr, "wgmma_ceiling: %s\n", cudaGetErrorString(err));
        return 1;
    }
    printf("# m64n%dk32 e4m3 RS (0-4) and SS (5-7) wgmma, 2 consumer warpgroups per CTA, %d CTAs, %d chunks of 128 K\n", BT, sms, CHUNKS);
    for (int v = 0; v < 9; v++) printf("%d  %-36s %7.1f TFLOP/s\n", v, names[v], tf[v]);
    cudaFree(w);
    cudaFree(out);
    return 0;
}
