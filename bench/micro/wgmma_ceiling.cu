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

#define BT 128
#define CHUNKS 2048

/* the B tile (BT tokens x 128 K of e4m3, 128B-swizzled rows) and BT activation scales */
#define SMEM_BYTES (1024 + BT * 128 + BT * 4)

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
    /* one chunk on fragments cur; with V == 4 the next chunk's fragments are converted into nxt
     * while the wgmmas run (two named register sets, as the kernel's look-ahead: copying one set
     * into the other makes ptxas serialize the wgmmas) */
    auto chunk = [&](int kc, uint32_t (&cur)[4][4], uint32_t (&nxt)[4][4]) {
        if (V == 3) convert_folded_chunk(cur, make_uint4(q0.x ^ kc, q0.y, q0.z, q0.w), q1, e0, e1); /* in series */
        wgmma_fp8_rs_chunk<BT>(acc, cur, desc, V == 0 && kc > 0);
        if (V == 4) convert_folded_chunk(nxt, make_uint4(q0.x ^ kc, q0.y, q0.z, q0.w), q1, e0, e1); /* overlapped */
        if (V >= 1) {
            wgmma_wait<0>();
            wgmma_chunk_waited<BT>(acc, cur);
        }
        if (V >= 2) {
#pragma unroll
            for (int j = 0; j < BT / 8; j++) {
                const float2 s2 = *(const float2 *)(sa + 8 * j + 2 * t4);
                fin[4 * j + 0] += acc[4 * j + 0] * s2.x;
                fin[4 * j + 1] += acc[4 * j + 1] * s2.y;
                fin[4 * j + 2] += acc[4 * j + 2] * s2.x;
                fin[4 * j + 3] += acc[4 * j + 3] * s2.y;
            }
        }
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
                                  "+ conversion in series", "conversion overlapped (look-ahead)"};
    double tf[5];
    tf[0] = run<0>(sms, w, out);
    tf[1] = run<1>(sms, w, out);
    tf[2] = run<2>(sms, w, out);
    tf[3] = run<3>(sms, w, out);
    tf[4] = run<4>(sms, w, out);
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        fprintf(stderr, "wgmma_ceiling: %s\n", cudaGetErrorString(err));
        return 1;
    }
    printf("# m64n%dk32 e4m3 RS wgmma, 2 consumer warpgroups per CTA, %d CTAs, %d chunks of 128 K\n", BT, sms, CHUNKS);
    for (int v = 0; v < 5; v++) printf("%d  %-36s %7.1f TFLOP/s\n", v, names[v], tf[v]);
    cudaFree(w);
    cudaFree(out);
    return 0;
}
