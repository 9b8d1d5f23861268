/*
 * ss_swap.cu - would a converter warpgroup pay off with the operands swapped? Measures the two halves
 * of that design, and the two together, without memory traffic (stages filled once):
 *
 *   consumers   two consumer warpgroups run wgmma m64n128k32 with both operands in shared memory:
 *               A = 64 *tokens* of the activation tile (TMA layout, 128B swizzle), B = 128 converted
 *               weight rows (e4m3, same layout), then promote fin += acc x (activation scale of the
 *               thread's two token rows): 2 scalars per thread and chunk instead of the 16 8-byte
 *               scale loads of the register-operand kernel, no conversion. What DeepGEMM's FP8 loop
 *               does; the ceiling of the design.
 *   converter   NCONV converter warpgroups turn a stage's 128 x 128 FP4 weights (the repacked
 *               layout the kernel reads today) into e4m3 in the swizzled layout wgmma reads, into a
 *               ring of buffers, with fence.proxy.async and the buffer barriers, nobody consuming
 *               (the buffers are released at once): the converter's own rate.
 *   both        the two joined by the ring's full / empty barriers: the design's speed without memory.
 *
 * Compare with bench/micro/consumer_structures (the register-operand kernel's structure: 1041-1095
 * TFLOP/s there, ~720 in the real kernel). The converter stores 4-byte words (the repacked layout
 * gives each thread 4-byte pieces of rows r0, r0 + 8): 32 stores per thread and chunk.
 * Results are garbage; only the time means something.
 *
 * Build (here):  make BUILD=build-dev build-dev/ss_swap
 * Run (device):  build-dev/ss_swap        (a few seconds)
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "micro_timing.cuh"
#include "sm90/fp8_fp4_gemm.cuh" /* convert_folded_chunk, descriptors, mbarriers, setmaxnreg */
#include "sm90/wgmma_fp8_ss.cuh"

#define STAGES 4       /* activation / FP4 stages, filled once */
#define CONV_BUFS 4    /* converted-weight ring */
#define CHUNKS 2048
#define A_TILE (128 * 128)     /* 128 tokens x 128 K of e4m3 */
#define W_FP4 (2 * 4096)       /* both 64-row halves, 64 rows x 128 K of FP4 each */
#define WS_BYTES (2 * 256)     /* both halves' scale words */
#define SA_BYTES (128 * 4)     /* one activation scale per token */
#define STAGE (A_TILE + W_FP4 + WS_BYTES + SA_BYTES)
#define CONV (128 * 128)       /* 128 weight rows x 128 K of e4m3 */


static __device__ __forceinline__ void fence_proxy_async_smem(void) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* Byte offset of (row, K byte kb) in a 128-row x 128-byte e4m3 tile with the 128-byte swizzle. */
static __device__ __forceinline__ uint32_t swizzled(uint32_t row, uint32_t kb) {
    return (row / 8) * 1024 + (row % 8) * 128 + (((kb / 16) ^ (row % 8)) * 16) + kb % 16;
}

template <int NCONV>
struct swap_layout {
    static constexpr int CONSUMER_WGS = 2;
    static constexpr int THREADS = 128 * (CONSUMER_WGS + NCONV + 1); /* + one (idle) producer warpgroup */
    static constexpr int SMEM = 1024 + STAGES * STAGE + CONV_BUFS * CONV + 2 * CONV_BUFS * 8;
    static constexpr int LAUNCH = (65536 / THREADS) & ~7;
    static constexpr int PRODUCER = 24, CONVERTER = NCONV == 1 ? 88 : 72;
    static constexpr int WGS = CONSUMER_WGS + NCONV + 1;
    static constexpr int CONSUMER_RAW = (WGS * LAUNCH - PRODUCER - NCONV * CONVERTER) / 2;
    static constexpr int CONSUMER = (CONSUMER_RAW > 240 ? 240 : CONSUMER_RAW) & ~7;
};

template <int MODE>
static __device__ __forceinline__ void consume(const uint8_t *smem, const uint8_t *conv, uint64_t *full,
                                               uint64_t *empty, float *out, int wg, int warp, int g8);

/* MODE 0: consumers only (the converted buffers are filled once); 1: converters only (consumers
 * idle, buffers released by the converters themselves); 2: both, joined by the ring's barriers. */
template <int NCONV, int MODE>
__global__ void __launch_bounds__(swap_layout<NCONV>::THREADS, 1) swap_kernel(float *out) {
    typedef swap_layout<NCONV> L;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    uint8_t *conv = smem + STAGES * STAGE;
    uint64_t *full = (uint64_t *)(conv + CONV_BUFS * CONV), *empty = full + CONV_BUFS;
    for (int s = 0; s < STAGES; s++) {
        uint8_t *st = smem + s * STAGE;
        for (int i = threadIdx.x; i < A_TILE / 4; i += blockDim.x)
            ((uint32_t *)st)[i] = 0x38383838u ^ ((i * 0x9E3779B1u >> 5) & 0x07070707u);
        for (int i = threadIdx.x; i < W_FP4 / 4; i += blockDim.x) ((uint32_t *)(st + A_TILE))[i] = (i + s) * 0x9E3779B1u;
        for (int i = threadIdx.x; i < WS_BYTES / 4; i += blockDim.x)
            ((uint32_t *)(st + A_TILE + W_FP4))[i] = 0x00860000u | (0x1111u * (1 + (i + s) % 12));
        for (int i = threadIdx.x; i < 128; i += blockDim.x)
            ((float *)(st + A_TILE + W_FP4 + WS_BYTES))[i] = 1.0f + ((i + s) % 7) * 0x1p-12f;
    }
    for (int i = threadIdx.x; i < CONV_BUFS * CONV / 4; i += blockDim.x)
        ((uint32_t *)conv)[i] = 0x30303030u ^ ((i * 0x9E3779B1u >> 7) & 0x07070707u);
    if (threadIdx.x == 0) {
        for (int c = 0; c < CONV_BUFS; c++) {
            mbar_init(&full[c], 128 * NCONV);
            mbar_init(&empty[c], MODE == 2 ? 256 : 128 * NCONV);
        }
        mbar_fence_init();
    }
    fence_proxy_async_smem();
    __syncthreads();
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, lane = threadIdx.x % 32;
    const int g8 = lane / 4, t4 = lane % 4, warp = tid / 32;
    if (wg == L::WGS - 1) { /* the producer: gives back registers, as the kernel's would */
        warpgroup_reg_dealloc<L::PRODUCER>();
        return;
    }
    if (wg >= 2) { /* converter ci: both halves (NCONV = 1) or half ci of every chunk */
        warpgroup_reg_dealloc<L::CONVERTER>();
        if (MODE == 0) return;
        const int ci = wg - 2;
        const int r0 = warp * 16 + g8;
        uint32_t phase = 0;
        for (int kc = 0; kc < CHUNKS; kc++) {
            const int c = kc % CONV_BUFS, s = kc % STAGES;
            if (kc >= CONV_BUFS) mbar_wait(&empty[c], phase ^ 1);
            const uint8_t *st = smem + s * STAGE;
            uint8_t *dst = conv + c * CONV;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (NCONV == 2 && h != ci) continue;
                const uint8_t *w = st + A_TILE + h * 4096 + tid * 16;
                const uint32_t *ws = (const uint32_t *)(st + A_TILE + W_FP4 + h * 256);
                uint32_t a[4][4];
                convert_folded_chunk(a, *(const uint4 *)w, *(const uint4 *)(w + 2048), ws[r0], ws[r0 + 8]);
                const uint32_t row = 64 * h + r0;
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const uint32_t kb = 32 * k + 4 * t4;
                    *(uint32_t *)(dst + swizzled(row, kb)) = a[k][0];
                    *(uint32_t *)(dst + swizzled(row + 8, kb)) = a[k][1];
                    *(uint32_t *)(dst + swizzled(row, kb + 16)) = a[k][2];
                    *(uint32_t *)(dst + swizzled(row + 8, kb + 16)) = a[k][3];
                }
            }
            fence_proxy_async_smem(); /* the stores, visible to the consumers' wgmmas */
            mbar_arrive(&full[c]);
            if (MODE == 1) mbar_arrive(&empty[c]); /* nobody consumes: release at once */
            if (c == CONV_BUFS - 1) phase ^= 1;
        }
        return;
    }
    /* consumer warpgroup wg: tokens 64 wg .. 64 wg + 63 of the tile, all 128 weight rows */
    warpgroup_reg_alloc<L::CONSUMER>();
    if constexpr (MODE != 1) consume<MODE>(smem, conv, full, empty, out, wg, warp, g8);
}

/* consumer warpgroup wg of swap_kernel (MODE 0 or 2) */
template <int MODE>
static __device__ __forceinline__ void consume(const uint8_t *smem, const uint8_t *conv, uint64_t *full,
                                               uint64_t *empty, float *out, int wg, int warp, int g8) {
    float fin[64], acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) fin[i] = 0.0f;
    uint32_t phase = 0;
    const int row0 = 64 * wg + warp * 16 + g8; /* the thread's token rows row0, row0 + 8 */
    for (int kc = 0; kc < CHUNKS; kc++) {
        const int c = kc % CONV_BUFS, s = kc % STAGES;
        if (MODE == 2) mbar_wait(&full[c], phase);
        const uint8_t *st = smem + s * STAGE;
        const sm90_desc da = desc_advance_rows(smem_desc_k128_swizzle128(st), 64 * wg);
        const sm90_desc db = smem_desc_k128_swizzle128(conv + c * CONV);
        const float *sa = (const float *)(st + A_TILE + W_FP4 + WS_BYTES);
        const float s0 = sa[row0], s1 = sa[row0 + 8]; /* before the wait: off the critical path */
        wgmma_fence();
        wgmma_fp8_ss_chunk_n128(acc, da, db);
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int r = 0; r < 64; r++) reg_fence(acc[r]);
        promote_token_rows_n128(fin, acc, s0, s1);
        if (MODE == 2) mbar_arrive(&empty[c]);
        if (c == CONV_BUFS - 1) phase ^= 1;
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; i++) sum += fin[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum; /* keeps everything live */
}

typedef struct swap_args {
    int sms;
    float *out;
} swap_args;

template <int NCONV, int MODE>
static void launch_swap(void *arg) {
    typedef swap_layout<NCONV> L;
    const swap_args *x = (const swap_args *)arg;
    swap_kernel<NCONV, MODE><<<x->sms, L::THREADS, L::SMEM>>>(x->out);
}

template <int NCONV, int MODE>
static void run(const char *name, float *out, int sms) {
    typedef swap_layout<NCONV> L;
    cudaFuncSetAttribute(swap_kernel<NCONV, MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, L::SMEM);
    swap_args args = {sms, out};
    cudaError_t err;
    const float ms = micro_time_ms(launch_swap<NCONV, MODE>, &args, &err);
    const double chunks = (double)sms * CHUNKS * MICRO_REPS;
    const double flop = chunks * 2.0 * 128 * 128 * 128; /* one chunk: 128 tokens x 128 rows x 128 K */
    printf("%-44s %s  %8.1f TFLOP/s-equivalent  %6.1f ns/chunk/SM  (%d threads, consumers %d regs)\n", name,
           err == cudaSuccess ? "ok " : cudaGetErrorString(err), flop / (ms * 1e-3) / 1e12,
           ms * 1e6 / (CHUNKS * MICRO_REPS), L::THREADS, L::CONSUMER);
}

int main(void) {
    const int sms = micro_sm_count("ss_swap");
    if (sms == 0) return 1;
    float *out = NULL;
    cudaMalloc(&out, (size_t)sms * 1024 * sizeof(float));
    run<1, 0>("consumers only (SS, tokens as A, 2-scalar promote)", out, sms);
    run<1, 1>("one converter warpgroup only", out, sms);
    run<2, 1>("two converter warpgroups only", out, sms);
    run<1, 2>("one converter + consumers", out, sms);
    run<2, 2>("two converters + consumers", out, sms);
    cudaFree(out);
    return 0;
}
