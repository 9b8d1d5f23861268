/*
 * bf16_ceiling.cu - could BF16 tensor cores serve 1x32 activation scales faster than FP8 ones?
 *
 * With 1x32 activation scales the FP8 kernels promote after every k32 step (4 x 64 FFMA per 128 K
 * and thread at 128 tokens, on top of the conversion): ~365 TFLOP/s at prefill, where 1x128 scales
 * reach ~665 (bench/RESULTS.md v14). Transformers' scales are UE8M0 (powers of two), so a scaled
 * FP8 activation is exact in BF16, and so is an FP4 weight times its UE8M0 scale: a BF16 wgmma
 * then needs no promotion at all (its FP32 accumulator runs over all of K), at half the FP8
 * tensor rate. This microbenchmark times that consumer structure without memory traffic:
 *   0  8 RS wgmmas m64n128k16 (bf16) per 128-K "chunk", waited at the end only (the BF16 RS ceiling)
 *   1  + the next chunk's FP4 -> BF16 conversion (per-32 UE8M0 scale folded through byte tables)
 *      under the wgmmas, waited every chunk (the FP8 kernel's look-ahead)
 *   2  like 1 with two wgmma groups in flight (wait_group 1)
 *   3  like 1 with three consumer warpgroups (no FP32 running sum frees the registers)
 *   4  like 2 with three consumer warpgroups
 * One CTA per SM, one B tile in shared memory, fragments from constant words. Prints TFLOP/s.
 *
 * Build (here):  make BUILD=build-dev build-dev/bf16_ceiling
 * Run (device):  build-dev/bf16_ceiling            (a few seconds)
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "micro_timing.cuh"
#include "sm90/fp4_to_bf16.cuh"  /* convert_chunk_bf16 */
#include "sm90/wgmma_bf16_rs.cuh" /* wgmma_bf16_chunk */

#define BT 128
#define CHUNKS 1024

/* the B tile: BT tokens x 128 K of bf16 as two 64-K atoms of 128-byte swizzled rows (16 KB each) */
#define SMEM_BYTES (1024 + 2 * BT * 128)

/* a 128-K chunk's fragments from the thread's words and its rows' per-32 scale bytes (as the kernel
 * converts a per-32 chunk: fp4_to_bf16.cuh) */
static __device__ __forceinline__ void convert_chunk(uint32_t (&a)[8][4], uint4 q0, uint4 q1, uint32_t sg, uint32_t sr) {
    (void)convert_chunk_bf16(a, q0, q1, sg, sr, true);
}

/* the chunk's 8 k16 steps: the second 64-K atom 16 KB on */
static __device__ __forceinline__ void issue_chunk(float *acc, uint32_t (&a)[8][4], sm90_desc desc) {
    wgmma_bf16_chunk(acc, a, desc, BT * 128 >> 4, true);
}
static __device__ __forceinline__ void fence_frags(uint32_t (&a)[8][4]) {
#pragma unroll
    for (int k = 0; k < 8; k++)
#pragma unroll
        for (int r = 0; r < 4; r++) reg_fence(a[k][r]);
}

/* each chunk's words and scale parities differ, so no conversion can be hoisted out of the loop */
static __device__ __forceinline__ uint4 vary(uint4 q, int kc) {
    const uint32_t x = (uint32_t)kc * 0x11111111u & 0x11111111u;
    return make_uint4(q.x ^ x, q.y ^ x, q.z ^ x, q.w ^ x);
}

template <int V, int WGS>
__global__ void __launch_bounds__(128 * WGS, 1) bf16_kernel(const uint4 *wsrc, float *out) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *b_tile = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    for (int i = threadIdx.x; i < 2 * BT * 128 / 4; i += blockDim.x)
        ((uint32_t *)b_tile)[i] = 0x3F803F80u ^ (i * 0x00010001u & 0x007F007Fu); /* bf16 in [1, 2) */
    __syncthreads();
    const sm90_desc desc = smem_desc_k128_swizzle128(b_tile);
    const uint4 q0 = wsrc[threadIdx.x % 128], q1 = wsrc[128 + threadIdx.x % 128];
    const uint32_t sg = 0x7E7F7F80u, sr = 0x7F807E7Fu;
    float acc[BT / 2];
#pragma unroll
    for (int i = 0; i < BT / 2; i++) acc[i] = 0.0f;
    uint32_t a[8][4], b[8][4];
    convert_chunk(a, q0, q1, sg, sr);
    if (V == 0) {
        for (int kc = 0; kc < CHUNKS; kc++) issue_chunk(acc, a, desc);
    } else if (V == 1) { /* convert the next chunk under the wgmmas, wait every chunk */
        for (int kc = 0; kc < CHUNKS; kc += 2) {
            issue_chunk(acc, a, desc);
            convert_chunk(b, vary(q0, kc), vary(q1, kc), sg ^ (kc & 0x01010101u), sr ^ (kc & 0x01010101u));
            wgmma_wait<0>();
            fence_frags(a);
            issue_chunk(acc, b, desc);
            convert_chunk(a, vary(q0, kc + 1), vary(q1, kc + 1), sg ^ ((kc + 1) & 0x01010101u), sr ^ ((kc + 1) & 0x01010101u));
            wgmma_wait<0>();
            fence_frags(b);
        }
    } else { /* two groups in flight: chunk k + 1 is issued before chunk k is waited for */
        convert_chunk(b, vary(q0, 1), vary(q1, 1), sg ^ 1u, sr ^ 1u);
        issue_chunk(acc, a, desc);
        for (int kc = 0; kc < CHUNKS; kc += 2) {
            issue_chunk(acc, b, desc);
            wgmma_wait<1>(); /* chunk on a done */
            fence_frags(a);
            convert_chunk(a, vary(q0, kc), vary(q1, kc), sg ^ (kc & 0x01010101u), sr ^ (kc & 0x01010101u));
            issue_chunk(acc, a, desc);
            wgmma_wait<1>(); /* chunk on b done */
            fence_frags(b);
            convert_chunk(b, vary(q0, kc + 1), vary(q1, kc + 1), sg ^ ((kc + 1) & 0x01010101u), sr ^ ((kc + 1) & 0x01010101u));
        }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < BT / 2; i++) reg_fence(acc[i]);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < BT / 2; i++) sum += acc[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum; /* keeps everything live */
}

typedef struct bf16_args {
    int sms;
    const uint4 *w;
    float *out;
} bf16_args;

template <int V, int WGS>
static void launch_bf16(void *arg) {
    const bf16_args *x = (const bf16_args *)arg;
    bf16_kernel<V, WGS><<<x->sms, 128 * WGS, SMEM_BYTES>>>(x->w, x->out);
}

template <int V, int WGS>
static double run(int sms, const uint4 *w, float *out) {
    cudaFuncSetAttribute(bf16_kernel<V, WGS>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    bf16_args args = {sms, w, out};
    cudaError_t err; /* main checks the device afterwards */
    const float ms = micro_time_ms(launch_bf16<V, WGS>, &args, &err);
    const double flop = (double)sms * WGS * 64.0 * BT * 128.0 * 2.0 * (V == 2 ? CHUNKS + 1 : CHUNKS) * MICRO_REPS;
    return flop / (ms * 1e-3) / 1e12;
}

int main(void) {
    const int sms = micro_sm_count("bf16_ceiling");
    if (sms == 0) return 1;
    uint4 *w;
    float *out;
    cudaMalloc(&w, 256 * sizeof(uint4));
    cudaMemset(w, 0x35, 256 * sizeof(uint4));
    cudaMalloc(&out, (size_t)sms * 384 * sizeof(float));
    static const char *names[] = {"bf16 wgmma only (RS ceiling), 2 WGs", "+ conversion under wgmmas, 2 WGs",
                                  "+ two groups in flight, 2 WGs", "+ conversion under wgmmas, 3 WGs",
                                  "+ two groups in flight, 3 WGs", "bf16 wgmma only, 3 WGs"};
    double tf[6];
    tf[0] = run<0, 2>(sms, w, out);
    tf[1] = run<1, 2>(sms, w, out);
    tf[2] = run<2, 2>(sms, w, out);
    tf[3] = run<1, 3>(sms, w, out);
    tf[4] = run<2, 3>(sms, w, out);
    tf[5] = run<0, 3>(sms, w, out);
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        fprintf(stderr, "bf16_ceiling: %s\n", cudaGetErrorString(err));
        return 1;
    }
    printf("# m64n%dk16 bf16 RS wgmma, one CTA per SM, %d CTAs, %d chunks of 128 K\n", BT, sms, CHUNKS);
    for (int v = 0; v < 6; v++) printf("%d  %-40s %7.1f TFLOP/s\n", v, names[v], tf[v]);
    cudaFree(w);
    cudaFree(out);
    return 0;
}
