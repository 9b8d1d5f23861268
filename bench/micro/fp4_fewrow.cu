/*
 * fp4_fewrow.cu - would the few-row FP8 kernel's structure (src/kernels/sm90/fp8_fp8_gemv.cu: row
 * groups of 16 weight rows, 1-8 warps a group splitting K, operands loaded straight into registers,
 * mma.sync, two chunks in flight) stream FP4 weights at decode fast enough for issue 4's T = 1 goal?
 * Timing only (results not checked): the repacked FP4 layout's folded chunks (sm90_layout.h: a
 * warp's 16-row slice of a 64-row tile is exactly the mma.sync m16n8k32 A fragment), converted by the
 * library's fp4_to_fp8.cuh, one token, random weights, scale words and activations.
 *
 * Why: the FP4 decode kernels reach 1.99 TB/s at V4-Flash w13 T = 1 (six experts, 50 MB) where a
 * read-only kernel launched the same way reaches 3.03 (bench/RESULTS.md v45); the FP8 few-row
 * kernel streams 50 MB of FP8 at 1 x 12288 x 4096 in 18.2 us (2.8 TB/s with its launch, v46). Here
 * the same structure with FP4's conversion, next to a read-only form of it (same loads, no math) as
 * its floor. Dense rows stand in for a masked launch's live experts (6 x 4096 rows = 24576).
 *   make build/fp4_fewrow && build/fp4_fewrow      (an SM90 GPU)
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sm90/fp4_to_fp8.cuh"
#include "micro_timing.cuh"
#include "sm90/scales.cuh"

#define FR_WARPS 8

typedef struct fr_args {
    const uint8_t *w;   /* [tiles][pairs][128 threads][16 bytes] */
    const uint32_t *sw; /* [tiles][chunks][64 rows] folded scale words */
    const uint8_t *a;   /* one token's K FP8 bytes */
    const float *as;    /* its [chunks] scales */
    float *d;           /* [n] */
    int n, k, kw, read_only;
} fr_args;

typedef struct fr_chunk {
    uint4 q0, q1;
    uint32_t e0, e1;
} fr_chunk;

static __device__ __forceinline__ void fr_load(fr_chunk &o, const uint8_t *wq, const uint32_t *sq, int64_t c) {
    o.q0 = ldg_stream_16(wq + (2 * c) * 2048);
    o.q1 = ldg_stream_16(wq + (2 * c + 1) * 2048);
    o.e0 = __ldg(sq + c * 64);
    o.e1 = __ldg(sq + c * 64 + 8);
}

/* DEPTH: chunks a warp has in flight (its ring of loads) */
template <int DEPTH>
__global__ void __launch_bounds__(FR_WARPS * 32, 2) fr_kernel(const fr_args p) {
    __shared__ float4 partial[FR_WARPS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int share = warp % p.kw;
    const int64_t rg = (int64_t)blockIdx.x * (FR_WARPS / p.kw) + warp / p.kw; /* 16-row group */
    const int64_t tile = rg / 4, slice = rg % 4, pairs = p.k / 64, chunks = p.k / 128;
    const int64_t c0 = share * chunks / p.kw, c1 = (share + 1) * chunks / p.kw;
    const uint8_t *wq = p.w + ((tile * pairs) * 128 + slice * 32 + lane) * 16;
    const uint32_t *sq = p.sw + tile * chunks * 64 + slice * 16 + g;
    float fin[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    uint32_t x = 0;
    if (rg * 16 < p.n && c0 < c1) {
        fr_chunk ring[DEPTH];
#pragma unroll
        for (int i = 0; i < DEPTH; i++)
            if (c0 + i < c1) fr_load(ring[i], wq, sq, c0 + i);
        for (int64_t cb = c0; cb < c1; cb += DEPTH)
#pragma unroll
        for (int i = 0; i < DEPTH; i++) {
            const int64_t c = cb + i;
            if (c >= c1) break;
            const fr_chunk cur = ring[i];
            if (c + DEPTH < c1) fr_load(ring[i], wq, sq, c + DEPTH);
            if (p.read_only) {
                x ^= cur.q0.x ^ cur.q0.y ^ cur.q0.z ^ cur.q0.w ^ cur.q1.x ^ cur.q1.y ^ cur.q1.z ^ cur.q1.w ^ cur.e0 ^ cur.e1;
                continue;
            }
            uint32_t af[4][4];
            convert_folded_chunk(af, cur.q0, cur.q1, cur.e0, cur.e1);
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int st = 0; st < 4; st++) {
                /* the token's K bytes of step st in the fragment's order (token g = 0 only: T = 1) */
                const uint32_t b0 = g == 0 ? __ldg((const uint32_t *)(p.a + c * 128 + 32 * st + 4 * t)) : 0u;
                const uint32_t b1 = g == 0 ? __ldg((const uint32_t *)(p.a + c * 128 + 32 * st + 16 + 4 * t)) : 0u;
                mma_e4m3_m16n8k32(acc, af[st][0], af[st][1], af[st][2], af[st][3], b0, b1);
            }
            const float s = __ldg(p.as + c);
            const float r0 = row_scale_from_emax((cur.e0 >> 16) & 0xFFu), r1 = row_scale_from_emax((cur.e1 >> 16) & 0xFFu);
            fin[0] = fmaf(acc[0], r0 * s, fin[0]);
            fin[1] = fmaf(acc[1], r0 * s, fin[1]);
            fin[2] = fmaf(acc[2], r1 * s, fin[2]);
            fin[3] = fmaf(acc[3], r1 * s, fin[3]);
        }
    }
    if (p.read_only) fin[0] = __uint_as_float(x & 0x3F800000u);
    if (share > 0) partial[warp] = make_float4(fin[0], fin[1], fin[2], fin[3]);
    __syncthreads();
    if (share != 0 || rg * 16 >= p.n) return;
    for (int w = warp + 1; w < warp + p.kw; w++) {
        const float4 q = partial[w];
        fin[0] += q.x;
        fin[2] += q.z;
    }
    if (t == 0) { /* token 0: columns 2t = 0 */
        p.d[rg * 16 + g] = fin[0];
        p.d[rg * 16 + g + 8] = fin[2];
    }
}

__global__ void fr_fill(uint32_t *p, int64_t words, uint32_t salt, uint32_t mask, uint32_t add) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < words; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ salt;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        p[i] = (h & mask) + add;
    }
}

typedef struct fr_launch_arg {
    fr_args args;
    const uint8_t *w[8];
    const uint32_t *sw[8];
    int copies, next, depth;
    unsigned grid;
} fr_launch_arg;

static void fr_launch(void *v) {
    fr_launch_arg *l = (fr_launch_arg *)v;
    fr_args a = l->args;
    a.w = l->w[l->next];
    a.sw = l->sw[l->next];
    l->next = (l->next + 1) % l->copies;
    if (l->depth == 4) fr_kernel<4><<<l->grid, FR_WARPS * 32>>>(a);
    else fr_kernel<2><<<l->grid, FR_WARPS * 32>>>(a);
}

int main(void) {
    if (!micro_sm_count("fp4_fewrow")) return 1;
    static const int shapes[][2] = {{24576, 4096}, {24576, 2048}, {4096, 4096}, {7168, 2048}, {32768, 1024}};
    printf("%-14s %-9s %5s %3s %9s %8s\n", "n x k", "form", "depth", "kw", "us", "TB/s");
    for (unsigned s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int n = shapes[s][0], k = shapes[s][1];
        const int64_t wbytes = (int64_t)n * k / 2, sbytes = (int64_t)(n / 64) * (k / 128) * 64 * 4;
        fr_launch_arg l = {};
        l.copies = (int)((256LL << 20) / (wbytes + sbytes) + 1);
        if (l.copies > 8) l.copies = 8;
        if (l.copies < 2) l.copies = 2;
        for (int c = 0; c < l.copies; c++) {
            uint8_t *w;
            uint32_t *sw;
            cudaMalloc(&w, wbytes);
            cudaMalloc(&sw, sbytes);
            fr_fill<<<1024, 256>>>((uint32_t *)w, wbytes / 4, 17u + c, 0xFFFFFFFFu, 0u);
            /* folded words: offsets 1..8 in the low 16 bits (0x7777 + 0x1111), e_max 133 */
            fr_fill<<<1024, 256>>>(sw, sbytes / 4, 91u + c, 0x7777u, 0x1111u + (133u << 16));
            l.w[c] = w;
            l.sw[c] = sw;
        }
        uint8_t *a;
        float *as, *d;
        cudaMalloc(&a, k);
        cudaMalloc(&as, (k / 128) * 4);
        cudaMalloc(&d, (size_t)n * 4);
        fr_fill<<<64, 256>>>((uint32_t *)a, k / 4, 5u, 0x37373737u, 0u); /* (e4m3 bytes below 2^-1: no NaN) */
        fr_fill<<<1, 256>>>((uint32_t *)as, k / 128, 7u, 0x007FFFFFu, 0x3F800000u);
        l.args.a = a;
        l.args.as = as;
        l.args.d = d;
        l.args.n = n;
        l.args.k = k;
        for (int ro = 0; ro < 2; ro++)
            for (int depth = 2; depth <= 4; depth *= 2)
            for (int kw = 1; kw <= FR_WARPS; kw *= 2) {
                l.depth = depth;
                l.args.kw = kw;
                l.args.read_only = ro;
                l.grid = (unsigned)((n / 16 + FR_WARPS / kw - 1) / (FR_WARPS / kw));
                cudaError_t err;
                const float ms = micro_time_ms(fr_launch, &l, &err);
                if (err != cudaSuccess) {
                    fprintf(stderr, "fp4_fewrow: %s\n", cudaGetErrorString(err));
                    return 1;
                }
                const double us = ms * 1000.0 / MICRO_REPS;
                printf("%6d x %-5d %-9s %5d %3d %9.2f %8.3f\n", n, k, ro ? "read-only" : "convert", depth, kw, us,
                       (wbytes + sbytes) / us * 1e-6);
            }
        for (int c = 0; c < l.copies; c++) {
            cudaFree((void *)l.w[c]);
            cudaFree((void *)l.sw[c]);
        }
        cudaFree(a);
        cudaFree(as);
        cudaFree(d);
    }
    return 0;
}
