/*
 * consumer_structures.cu - which consumer structure can take the SM90 FP8 x FP4 kernel to FP8 speed?
 *
 * The kernel's consumer code runs at ~600-700 TFLOP/s even with no memory traffic at all (diagnostic
 * builds, bench/RESULTS.md v5): ~275 instructions per warp per 128-K chunk at ~0.2 IPC per warp,
 * with two consumer warps per scheduler, while the chunk's wgmmas take 256 cycles. This benchmark
 * runs the consumer loop with its real per-chunk work -- shared-memory loads of the repacked weights
 * and scale words from rotating stages, the folded conversion, the activation-scale loads, the
 * promotion -- but no producer traffic (the stages are filled once), for several structures:
 *
 *   NWG        consumer warpgroups per CTA (64 weight rows each; BT = 128 tokens): 2 (the kernel), 3, 4
 *   RESCALE    0: fin += acc x scale after every chunk (the kernel: fin and acc, 128 registers)
 *              1: the running sum stays in the accumulator, which is multiplied by the ratio of
 *                 consecutive scales before each chunk's wgmmas (64 FMUL instead of 64 FFMA and no
 *                 fin: 64 registers freed, which is what lets 3-4 warpgroups fit)
 *   LOOKAHEAD  chunk k+1 loaded and converted while chunk k's wgmmas run (two fragment sets)
 *   SA128      activation scales read as float4 from a per-thread permuted copy (8 LDS.128 per
 *              chunk) instead of float2 (16 LDS.64)
 * and the 256-token tile computed as 4 quarters of N = 64 (quarters_kernel) or 2 halves of N = 128
 * (halves_kernel) that share one converted A. MICRO_WARM_MS (micro_timing.cuh) times at the power cap.
 * NOTE: the rescaled rows measure speed only: a sum carried in the FP8 wgmma accumulator across K is
 * not exact enough (bench/RESULTS.md v5).
 * One producer warpgroup is present (it only gives back registers, as the kernel's would), so the
 * register split is the real one. Results are garbage; only the time means something.
 *
 * Build (here):  make BUILD=build-dev build-dev/consumer_structures
 * Run (device):  build-dev/consumer_structures        (a few seconds)
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "micro_timing.cuh"
#include "sm90/fp8_fp4_gemm.cuh" /* convert_folded_chunk, promote, the wgmma and PTX wrappers */

#define BT 128
#define STAGES 4
#define CHUNKS 1024
#define A_TILE (BT * 128)
#define W_WG 4096 /* 64 rows x 128 K of FP4 */
#define WS_WG 256 /* 64 rows x one scale word */

/* MICRO_RANDOM=1 (main sets it): the activation tiles hold pseudo-random e4m3 bytes (every sign,
 * exponent and mantissa; no NaN) instead of a pattern whose only varying bits are 3 mantissa bits.
 * Why: a tensor core's power depends on how much its operands toggle, and the loop's power at boost
 * (~570 W, bench/RESULTS.md v37) was read on the pattern. */
__device__ int g_random_operands;

static __device__ __forceinline__ uint32_t activation_word(int i, int s) {
    if (!g_random_operands) return 0x38383838u ^ ((i * 0x9E3779B1u >> 5) & 0x07070707u); /* small normal e4m3 */
    uint32_t h = (uint32_t)i * 0x9E3779B1u ^ (uint32_t)s * 0x85EBCA6Bu;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    const uint32_t nan = (((h & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u); /* bytes whose low 7 bits are all set */
    return h ^ (nan >> 7);                                                     /* -> 0x7E: the largest finite */
}

template <int NWG>
struct micro_layout {
    static constexpr int STAGE = A_TILE + NWG * W_WG + NWG * WS_WG + BT * 4;
    static constexpr int SMEM = 1024 + STAGES * STAGE;
    static constexpr int THREADS = 128 * (NWG + 1);
    /* setmaxnreg split: launch registers = 65536 / THREADS rounded down to 8; the producer keeps
     * 24; the consumers take what it frees (see tile_config.cuh: more would hang) */
    static constexpr int LAUNCH = (65536 / THREADS) & ~7;
    static constexpr int PRODUCER = 24;
    static constexpr int CONSUMER_RAW = LAUNCH + (LAUNCH - PRODUCER) / NWG;
    static constexpr int CONSUMER = (CONSUMER_RAW > 240 ? 240 : CONSUMER_RAW) & ~7;
};

/* acc *= r (the ratio for the next chunk) per token column: rows (g, g+8) x columns 8j + 2t4 + {0,1} */
template <bool SA128>
static __device__ __forceinline__ void scale_pass(float *acc, float *fin, const float *sa, int t4, bool rescale) {
    if constexpr (SA128) {
        const float4 *s4 = (const float4 *)(sa + t4 * (BT / 4));
#pragma unroll
        for (int jj = 0; jj < BT / 16; jj++) {
            const float4 v = s4[jj];
            const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int j = 2 * jj + h;
                if (rescale) {
                    acc[4 * j + 0] *= x[2 * h];
                    acc[4 * j + 1] *= x[2 * h + 1];
                    acc[4 * j + 2] *= x[2 * h];
                    acc[4 * j + 3] *= x[2 * h + 1];
                } else {
                    fin[4 * j + 0] += acc[4 * j + 0] * x[2 * h];
                    fin[4 * j + 1] += acc[4 * j + 1] * x[2 * h + 1];
                    fin[4 * j + 2] += acc[4 * j + 2] * x[2 * h];
                    fin[4 * j + 3] += acc[4 * j + 3] * x[2 * h + 1];
                }
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < BT / 8; j++) {
            const float2 s2 = *(const float2 *)(sa + 8 * j + 2 * t4);
            if (rescale) {
                acc[4 * j + 0] *= s2.x;
                acc[4 * j + 1] *= s2.y;
                acc[4 * j + 2] *= s2.x;
                acc[4 * j + 3] *= s2.y;
            } else {
                fin[4 * j + 0] += acc[4 * j + 0] * s2.x;
                fin[4 * j + 1] += acc[4 * j + 1] * s2.y;
                fin[4 * j + 2] += acc[4 * j + 2] * s2.x;
                fin[4 * j + 3] += acc[4 * j + 3] * s2.y;
            }
        }
    }
}

template <int NWG>
static __device__ __forceinline__ void load_convert(const uint8_t *smem, int s, int wg, int tid, int r0,
                                                    uint32_t (&dst)[4][4]) {
    typedef micro_layout<NWG> L;
    const uint8_t *st = smem + s * L::STAGE;
    const uint8_t *w = st + A_TILE + wg * W_WG + tid * 16;
    const uint4 q0 = *(const uint4 *)w;
    const uint4 q1 = *(const uint4 *)(w + 2048);
    const uint32_t *ws = (const uint32_t *)(st + A_TILE + NWG * W_WG + wg * WS_WG);
    convert_folded_chunk(dst, q0, q1, ws[r0], ws[r0 + 8]);
}

template <int NWG, bool RESCALE, bool LOOKAHEAD, bool SA128>
__global__ void __launch_bounds__(128 * (NWG + 1), 1) structure_kernel(float *out) {
    typedef micro_layout<NWG> L;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    /* stages filled once: small normal e4m3 activations, FP4 codes, fold words with offsets 1..12,
     * scales near 1 */
    for (int s = 0; s < STAGES; s++) {
        uint8_t *st = smem + s * L::STAGE;
        for (int i = threadIdx.x; i < A_TILE / 4; i += blockDim.x)
            ((uint32_t *)st)[i] = activation_word(i, s);
        for (int i = threadIdx.x; i < NWG * W_WG / 4; i += blockDim.x)
            ((uint32_t *)(st + A_TILE))[i] = (i + s) * 0x9E3779B1u;
        for (int i = threadIdx.x; i < NWG * WS_WG / 4; i += blockDim.x)
            ((uint32_t *)(st + A_TILE + NWG * W_WG))[i] = 0x00860000u | (0x1111u * (1 + (i + s) % 12));
        for (int i = threadIdx.x; i < BT; i += blockDim.x)
            ((float *)(st + A_TILE + NWG * (W_WG + WS_WG)))[i] = 1.0f + ((i + s) % 7) * 0x1p-12f;
    }
    __syncthreads();
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, lane = threadIdx.x % 32;
    if (wg == NWG) {
        warpgroup_reg_dealloc<L::PRODUCER>();
        return;
    }
    warpgroup_reg_alloc<L::CONSUMER>();
    const int t4 = lane % 4, r0 = (tid / 32) * 16 + lane / 4;
    float acc[BT / 2];
    float fin[RESCALE ? 1 : BT / 2];
#pragma unroll
    for (int i = 0; i < (RESCALE ? 1 : BT / 2); i++) fin[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < BT / 2; i++) acc[i] = 0.0f;
    uint32_t fa[4][4], fb[4][4];
    auto sa_of = [&](int s) { return (const float *)(smem + s * L::STAGE + A_TILE + NWG * (W_WG + WS_WG)); };
    auto desc_of = [&](int s) { return smem_desc_k128_swizzle128(smem + s * L::STAGE); };
    /* one chunk: cur holds its fragments (look-ahead) or is converted here; nxt gets chunk kc+1 */
    auto chunk = [&](int kc, uint32_t (&cur)[4][4], uint32_t (&nxt)[4][4]) {
        const int s = kc % STAGES, s1 = (kc + 1) % STAGES;
        if (!LOOKAHEAD) load_convert<NWG>(smem, s, wg, tid, r0, cur);
        wgmma_fp8_rs_chunk<BT>(acc, cur, desc_of(s), RESCALE);
        if (LOOKAHEAD) load_convert<NWG>(smem, s1, wg, tid, r0, nxt);
        wgmma_wait<0>();
        wgmma_chunk_waited<BT>(acc, cur);
        /* fin += acc x scale(kc), or acc *= scale(kc+1) / scale(kc) (a stored ratio) */
        scale_pass<SA128>(acc, fin, sa_of(RESCALE ? s1 : s), t4, RESCALE);
    };
    if (LOOKAHEAD) load_convert<NWG>(smem, 0, wg, tid, r0, fa);
    for (int kc = 0; kc < CHUNKS; kc += 2) {
        chunk(kc, fa, fb);
        chunk(kc + 1, fb, fa);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < BT / 2; i++) sum += RESCALE ? acc[i] : fin[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum; /* keeps everything live */
}

/* The 256-token tile as NQ = 4 quarters of N = 64 sharing one converted A: per chunk and quarter,
 * 4 k32 wgmmas into one 32-register accumulator, a wait, and the quarter's promotion into fin (128
 * registers). Conversion per FLOP halves against the 128-token tile; promotion per FLOP does not.
 * Two consumer warpgroups, stages of BT2 = 256 token rows. */
#define BT2 256
#define STAGE2 (BT2 * 128 + 2 * W_WG + 2 * WS_WG + BT2 * 4)
#define SMEM2 (1024 + STAGES * STAGE2)
/* The 256-token kernels' stages, filled once (as structure_kernel's), by the whole CTA */
static __device__ void fill_stages_256(uint8_t *smem) {
    for (int s = 0; s < STAGES; s++) {
        uint8_t *st = smem + s * STAGE2;
        for (int i = threadIdx.x; i < BT2 * 128 / 4; i += blockDim.x)
            ((uint32_t *)st)[i] = activation_word(i, s);
        for (int i = threadIdx.x; i < 2 * W_WG / 4; i += blockDim.x) ((uint32_t *)(st + BT2 * 128))[i] = (i + s) * 0x9E3779B1u;
        for (int i = threadIdx.x; i < 2 * WS_WG / 4; i += blockDim.x)
            ((uint32_t *)(st + BT2 * 128 + 2 * W_WG))[i] = 0x00860000u | (0x1111u * (1 + (i + s) % 12));
        for (int i = threadIdx.x; i < BT2; i += blockDim.x)
            ((float *)(st + BT2 * 128 + 2 * (W_WG + WS_WG)))[i] = 1.0f + ((i + s) % 7) * 0x1p-12f;
    }
    __syncthreads();
}

template <bool LOOKAHEAD>
__global__ void __launch_bounds__(384, 1) quarters_kernel(float *out) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    fill_stages_256(smem);
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, lane = threadIdx.x % 32;
    if (wg == 2) {
        warpgroup_reg_dealloc<24>();
        return;
    }
    warpgroup_reg_alloc<240>();
    const int t4 = lane % 4, r0 = (tid / 32) * 16 + lane / 4;
    float fin[BT2 / 2];
#pragma unroll
    for (int i = 0; i < BT2 / 2; i++) fin[i] = 0.0f;
    uint32_t fa[4][4], fb[4][4];
    auto load_convert2 = [&](int s, uint32_t (&dst)[4][4]) {
        const uint8_t *st = smem + s * STAGE2;
        const uint8_t *w = st + BT2 * 128 + wg * W_WG + tid * 16;
        const uint32_t *ws = (const uint32_t *)(st + BT2 * 128 + 2 * W_WG + wg * WS_WG);
        convert_folded_chunk(dst, *(const uint4 *)w, *(const uint4 *)(w + 2048), ws[r0], ws[r0 + 8]);
    };
    auto chunk = [&](int kc, uint32_t (&cur)[4][4], uint32_t (&nxt)[4][4]) {
        const int s = kc % STAGES;
        if (!LOOKAHEAD) load_convert2(s, cur);
        const sm90_desc d0 = smem_desc_k128_swizzle128(smem + s * STAGE2);
        const float *sa = (const float *)(smem + s * STAGE2 + BT2 * 128 + 2 * (W_WG + WS_WG));
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float acc[32];
            sm90_desc dq = d0;
            dq.lo += (uint32_t)(q * 64 * 128 >> 4); /* quarter q: token rows 64q.. (8 KB further) */
            wgmma_fp8_rs_chunk<64>(acc, cur, dq);
            if (LOOKAHEAD && q == 0) load_convert2((kc + 1) % STAGES, nxt);
            wgmma_wait<0>();
            wgmma_chunk_waited<64>(acc, cur);
            promote<64, false>(fin + 32 * q, acc, 1.0f, 1.0f, sa + 64 * q, t4);
        }
    };
    if (LOOKAHEAD) load_convert2(0, fa);
    for (int kc = 0; kc < CHUNKS; kc += 2) {
        chunk(kc, fa, fb);
        chunk(kc + 1, fb, fa);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < BT2 / 2; i++) sum += fin[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

/* The 256-token tile as 2 halves of N = 128 sharing one converted A: per chunk, half 0's 4 k32
 * wgmmas into one 64-register accumulator, a wait, its promotion into fin[0..63], then half 1 the
 * same way into fin[64..127]. Conversion (and the chunk's loop and stage overhead) per FLOP halve
 * against the 128-token tile, with two waits a chunk where the quarters take four. fin 128 + acc 64
 * + fragments 16. LOOKAHEAD: chunk k + 1's raw words (10 registers) are loaded under half 1's wgmmas
 * and converted after its promotion (converted fragments under half 0 spill: 20 bytes at 240).
 * (The prologue repeats quarters_kernel's: two variants of a micro-benchmark.) */
template <bool LOOKAHEAD>
__global__ void __launch_bounds__(384, 1) halves_kernel(float *out) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    fill_stages_256(smem);
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, lane = threadIdx.x % 32;
    if (wg == 2) {
        warpgroup_reg_dealloc<24>();
        return;
    }
    warpgroup_reg_alloc<240>();
    const int t4 = lane % 4, r0 = (tid / 32) * 16 + lane / 4;
    float fin[BT2 / 2];
#pragma unroll
    for (int i = 0; i < BT2 / 2; i++) fin[i] = 0.0f;
    uint32_t cur[4][4];
    uint4 q0, q1;
    uint32_t e0, e1;
    auto load2 = [&](int s) {
        const uint8_t *st = smem + s * STAGE2;
        const uint8_t *w = st + BT2 * 128 + wg * W_WG + tid * 16;
        const uint32_t *ws = (const uint32_t *)(st + BT2 * 128 + 2 * W_WG + wg * WS_WG);
        q0 = *(const uint4 *)w;
        q1 = *(const uint4 *)(w + 2048);
        e0 = ws[r0];
        e1 = ws[r0 + 8];
    };
    auto chunk = [&](int kc) {
        const int s = kc % STAGES;
        if (!LOOKAHEAD) load2(s);
        convert_folded_chunk(cur, q0, q1, e0, e1);
        const sm90_desc d0 = smem_desc_k128_swizzle128(smem + s * STAGE2);
        const float *sa = (const float *)(smem + s * STAGE2 + BT2 * 128 + 2 * (W_WG + WS_WG));
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float acc[64];
            sm90_desc dh = d0;
            dh.lo += (uint32_t)(h * 128 * 128 >> 4); /* half h: token rows 128h.. (16 KB further) */
            wgmma_fp8_rs_chunk<128>(acc, cur, dh);
            if (LOOKAHEAD && h == 1) load2((kc + 1) % STAGES);
            wgmma_wait<0>();
            wgmma_chunk_waited<128>(acc, cur);
            promote<128, false>(fin + 64 * h, acc, 1.0f, 1.0f, sa + 128 * h, t4);
        }
    };
    if (LOOKAHEAD) load2(0);
    for (int kc = 0; kc < CHUNKS; kc++) chunk(kc);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < BT2 / 2; i++) sum += fin[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

/* what the launch functions need (micro_time_ms passes it through) */
typedef struct micro_args {
    int sms;
    float *out;
} micro_args;

template <bool LOOKAHEAD>
static void launch_quarters(void *arg) {
    const micro_args *x = (const micro_args *)arg;
    quarters_kernel<LOOKAHEAD><<<x->sms, 384, SMEM2>>>(x->out);
}

template <bool LOOKAHEAD>
static void run_quarters(const char *name, int sms, float *out) {
    cudaFuncSetAttribute(quarters_kernel<LOOKAHEAD>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM2);
    micro_args args = {sms, out};
    cudaError_t err;
    const float ms = micro_time_ms(launch_quarters<LOOKAHEAD>, &args, &err);
    const double flop = (double)sms * 2 * 64.0 * BT2 * 128.0 * 2.0 * CHUNKS * MICRO_REPS;
    printf("%-44s NWG=2 BT=256  %7.1f TFLOP/s%s%s\n", name, err == cudaSuccess ? flop / (ms * 1e-3) / 1e12 : 0.0,
           err == cudaSuccess ? "" : "  ERROR ", err == cudaSuccess ? "" : cudaGetErrorString(err));
}

template <bool LOOKAHEAD>
static void launch_halves(void *arg) {
    const micro_args *x = (const micro_args *)arg;
    halves_kernel<LOOKAHEAD><<<x->sms, 384, SMEM2>>>(x->out);
}

template <bool LOOKAHEAD>
static void run_halves(const char *name, int sms, float *out) {
    cudaFuncSetAttribute(halves_kernel<LOOKAHEAD>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM2);
    micro_args args = {sms, out};
    cudaError_t err;
    const float ms = micro_time_ms(launch_halves<LOOKAHEAD>, &args, &err);
    const double flop = (double)sms * 2 * 64.0 * BT2 * 128.0 * 2.0 * CHUNKS * MICRO_REPS;
    printf("%-44s NWG=2 BT=256  %7.1f TFLOP/s%s%s\n", name, err == cudaSuccess ? flop / (ms * 1e-3) / 1e12 : 0.0,
           err == cudaSuccess ? "" : "  ERROR ", err == cudaSuccess ? "" : cudaGetErrorString(err));
}

template <int NWG, bool RESCALE, bool LOOKAHEAD, bool SA128>
static void launch_structure(void *arg) {
    typedef micro_layout<NWG> L;
    const micro_args *x = (const micro_args *)arg;
    structure_kernel<NWG, RESCALE, LOOKAHEAD, SA128><<<x->sms, L::THREADS, L::SMEM>>>(x->out);
}

template <int NWG, bool RESCALE, bool LOOKAHEAD, bool SA128>
static void run(const char *name, int sms, float *out) {
    typedef micro_layout<NWG> L;
    cudaFuncSetAttribute(structure_kernel<NWG, RESCALE, LOOKAHEAD, SA128>,
                         cudaFuncAttributeMaxDynamicSharedMemorySize, L::SMEM);
    micro_args args = {sms, out};
    cudaError_t err;
    const float ms = micro_time_ms(launch_structure<NWG, RESCALE, LOOKAHEAD, SA128>, &args, &err);
    const double flop = (double)sms * NWG * 64.0 * BT * 128.0 * 2.0 * CHUNKS * MICRO_REPS;
    printf("%-44s NWG=%d regs %3d/%3d  %7.1f TFLOP/s%s%s\n", name, NWG, L::PRODUCER, L::CONSUMER,
           err == cudaSuccess ? flop / (ms * 1e-3) / 1e12 : 0.0, err == cudaSuccess ? "" : "  ERROR ",
           err == cudaSuccess ? "" : cudaGetErrorString(err));
}

int main(void) {
    const int sms = micro_sm_count("consumer_structures");
    if (sms == 0) return 1;
    float *out;
    cudaMalloc(&out, (size_t)sms * 640 * sizeof(float));
    const char *rnd = getenv("MICRO_RANDOM");
    const int random_operands = rnd && rnd[0] == '1';
    cudaMemcpyToSymbol(g_random_operands, &random_operands, sizeof random_operands);
    printf("# BT=%d, %d chunks of 128 K per CTA, %d CTAs, stages in shared memory filled once, activations %s\n", BT,
           CHUNKS, sms, random_operands ? "random e4m3 (MICRO_RANDOM=1)" : "a pattern");
    run<2, false, true, false>("fin + acc, look-ahead (the kernel today)", sms, out);
    run<2, false, true, true>("fin + acc, look-ahead, scales LDS.128", sms, out);
    run<2, true, true, false>("rescaled acc, look-ahead", sms, out);
    run<3, true, true, false>("rescaled acc, look-ahead", sms, out);
    run<3, true, true, true>("rescaled acc, look-ahead, scales LDS.128", sms, out);
    run<3, true, false, true>("rescaled acc, no look-ahead, LDS.128", sms, out);
    run<4, true, false, false>("rescaled acc, no look-ahead", sms, out);
    run<4, true, false, true>("rescaled acc, no look-ahead, scales LDS.128", sms, out);
    run_quarters<false>("256 tokens as 4 x n64, fin 128, no look-ahead", sms, out);
    run_quarters<true>("256 tokens as 4 x n64, fin 128, look-ahead", sms, out);
    run_halves<false>("256 tokens as 2 x n128, fin 128, no look-ahead", sms, out);
    run_halves<true>("256 tokens as 2 x n128, fin 128, words early", sms, out);
    cudaFree(out);
    return 0;
}
