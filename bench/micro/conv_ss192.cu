/*
 * conv_ss192.cu - can a CTA convert its own FP4 weights to FP8 in shared memory and still feed SS
 * wgmmas at FP8 speed? The question behind issue 5's grouped rows (docs/FP8_ROUTE.md "The grouped
 * layouts"): each weight there meets ~384 token rows, so it must be converted inside the GEMM, and
 * v5's micro (ss_swap: 128-token tiles, a converter warpgroup, 4-byte stores) landed at 852-904
 * TFLOP/s-equivalent. This one asks it of today's FP8 x FP8 kernel's structure (fp8_fp8_gemm.cu,
 * 192-token tiles), without memory traffic (stages filled once):
 *
 *   consumers   three consumer warpgroups (152 registers), 64 token rows each, wgmma m64n128k32
 *               with both operands in shared memory (A: the stage's 192 x 128 activation tile, B: a
 *               converted 128 x 128 FP8 weight tile), wait, release, one FFMA per accumulator:
 *               the 192-row tile's loop (the real kernel reaches ~1120 TFLOP/s sustained at 8192^3).
 *   converters  the producer warpgroup's four warps (56 registers) turn the stage's FP4 tile (the
 *               pre-signed words of sm90_layout.h, rows r and r + 8 in one word, a 4-bit relative
 *               exponent per row and 32-group) into e4m3 in the 128-byte-swizzled layout the
 *               wgmmas read, with the library's exact conversion (fp4_to_fp8.cuh: ~1 instruction a
 *               weight), 16-byte loads and stores, into a ring of FP8 buffers; each warp releases
 *               its part of a buffer (fence.proxy.async, an arrival) and goes on to the next, so
 *               several buffers are in flight.
 *   half        each CTA converts 64 of the 128 weight rows and stores every result twice: what a
 *               2-CTA cluster sharing an expert's weight tile (each converting half, writing both
 *               CTAs' buffers) costs the SM in conversion and shared-memory stores (not the
 *               distributed-shared-memory latency).
 *
 * The real kernel's producer warps also issue the TMA copies and write the promotion factors (not
 * here). Results are garbage; only the time means something.
 *
 * Outcome (bench/RESULTS.md v44): the halves do not overlap, their times add (consumers 432 ns a
 * chunk, converters 274, both 757; half tile 611), with 3 or 4 converter warps, 16- or 4-byte
 * stores, with or without the proxy fence; the arithmetic alone and the shared traffic alone each
 * add about their own time. So a converting grouped kernel would run at ~0.62-0.75x cuBLASLt.
 *
 * Build (here):  make BUILD=build-dev build-dev/conv_ss192 (timing-only forms: the same nvcc line
 *                with -DCONV_SS_NO_FENCE, -DCONV_SS_PART=1 or =2)
 * Run (device):  build-dev/conv_ss192; MICRO_WARM_MS=3000 build-dev/conv_ss192 (at the power cap)
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "micro_timing.cuh"
#include "sm90/fp4_to_fp8.cuh"
#include "sm90/fp8_fp4_gemm.cuh" /* descriptors, mbarriers, setmaxnreg */
#include "sm90/wgmma_fp8_ss.cuh"

#define BM 192                  /* token rows a tile */
#define STAGES 4                /* activation / FP4 stages, filled once */
#define CONV_BUFS 4             /* converted-weight ring */
#define CHUNKS 2048             /* K-blocks a CTA and launch */
#define A_TILE (BM * 128)       /* 192 tokens x 128 K of e4m3 */
#define W_FP4 (128 * 64)        /* 128 weight rows x 128 K of FP4 */
#define W_EXP (128 * 4)         /* a word a row: 4-bit relative exponents of its 4 groups */
#define STAGE (A_TILE + W_FP4 + W_EXP)
#define CONV (128 * 128)        /* 128 weight rows x 128 K of e4m3 */
#define THREADS 512             /* 3 consumer warpgroups + the producer warpgroup */
#define SMEM (1024 + STAGES * STAGE + CONV_BUFS * CONV + BM * 4 + 2 * CONV_BUFS * 8)
#define CONSUMER_REGS 152
#define PRODUCER_REGS 56
static_assert(3 * CONSUMER_REGS + PRODUCER_REGS == 4 * 128, "setmaxnreg split of 128 registers a thread");
static_assert(SMEM <= 232448, "shared memory");

#ifndef CONV_SS_PART /* timing-only builds: 1 the converter's arithmetic alone, 2 its shared-memory traffic alone */
#define CONV_SS_PART 0
#endif

enum { MODE_CONSUMERS = 0, MODE_CONVERTERS = 1, MODE_BOTH = 2 };

template <int MODE>
static __device__ __forceinline__ void consume(const uint8_t *smem, const uint8_t *conv, const float *factors,
                                               uint64_t *full, uint64_t *empty, float *out, int wg, int warp,
                                               int lane);

static __device__ __forceinline__ void fence_proxy_async_smem(void) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* Shared-window byte offset of (row, 16-byte chunk j) in a 128-row x 128-byte e4m3 tile with the
 * 128-byte swizzle (wgmma's K-major SW128 layout) */
static __device__ __forceinline__ uint32_t swizzled_chunk(uint32_t row, uint32_t j) {
    return row * 128u + ((j ^ (row & 7u)) << 4);
}

/* Converter warp w's (of NW) part of chunk kc: units of rows (r, r + 8) x 16 bytes of K (a 16-byte
 * word of the FP4 stage), unit u to lane u % 32 of warp (u / 32) % NW; HALF: rows 0..63 only, each
 * result stored also 64 rows further */
template <int NW, bool HALF>
static __device__ __forceinline__ void convert_part(const uint8_t *stage, uint32_t dst, int w, int lane) {
    constexpr int UNITS = HALF ? 256 : 512;
    constexpr int ITERS = (UNITS + NW * 32 - 1) / (NW * 32);
    const uint32_t *exps = (const uint32_t *)(stage + A_TILE + W_FP4);
#pragma unroll
    for (int it = 0; it < ITERS; it++) {
        const uint32_t u = (uint32_t)(it * NW * 32 + w * 32 + lane);
        if (UNITS % (NW * 32) != 0 && u >= UNITS) break;
        const uint32_t pair = u >> 3, j = u & 7u; /* rows (r, r + 8), 16-byte chunk j of K */
        const uint32_t r = (pair >> 3) * 16u + (pair & 7u);
#if CONV_SS_PART == 1 /* (timing-only: the conversion's arithmetic alone, on words that change per call) */
        const uint4 q = make_uint4(u ^ dst, u * 3u ^ dst, u * 5u ^ dst, u * 7u ^ dst);
        const uint32_t e0w = dst >> 3, e1w = dst >> 5;
#else
        const uint4 q = *(const uint4 *)(stage + A_TILE + u * 16u);
        const uint32_t e0w = exps[r], e1w = exps[r + 8];
#endif
        const uint32_t sh = 4u * (j >> 1); /* the chunk's 32-group */
        uint32_t lo0, hi0, lo1, hi1;
        fp8_table((e0w >> sh) & 15u, lo0, hi0);
        fp8_table((e1w >> sh) & 15u, lo1, hi1);
        uint32_t a[4], b[4]; /* rows r and r + 8, 16 bytes each */
#if CONV_SS_PART == 2 /* (timing-only: the shared-memory traffic alone, no conversion) */
        a[0] = q.x; a[1] = q.y; a[2] = q.z; a[3] = q.w;
        b[0] = lo0; b[1] = hi0; b[2] = lo1; b[3] = hi1;
#else
        fp4x8_rows_to_fp8(q.x, lo0, hi0, lo1, hi1, a[0], b[0]);
        fp4x8_rows_to_fp8(q.y, lo0, hi0, lo1, hi1, a[1], b[1]);
        fp4x8_rows_to_fp8(q.z, lo0, hi0, lo1, hi1, a[2], b[2]);
        fp4x8_rows_to_fp8(q.w, lo0, hi0, lo1, hi1, a[3], b[3]);
#endif
#if CONV_SS_PART == 1 /* one 4-byte store a unit keeps the arithmetic live */
        asm volatile("st.shared.b32 [%0], %1;" ::"r"(dst + (u & 127u) * 4u),
                     "r"(a[0] ^ a[1] ^ a[2] ^ a[3] ^ b[0] ^ b[1] ^ b[2] ^ b[3]) : "memory");
        continue;
#endif
        const uint32_t o0 = dst + swizzled_chunk(r, j), o1 = dst + swizzled_chunk(r + 8, j);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(o0), "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])
                     : "memory");
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(o1), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3])
                     : "memory");
        if (HALF) { /* the peer's half, as its stores would arrive here */
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(o0 + 64u * 128u), "r"(a[0]), "r"(a[1]),
                         "r"(a[2]), "r"(a[3])
                         : "memory");
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(o1 + 64u * 128u), "r"(b[0]), "r"(b[1]),
                         "r"(b[2]), "r"(b[3])
                         : "memory");
        }
    }
}

/* convert_part from the FP4 kernel's own repacked layout (sm90_layout.h v3: a thread's 16 bytes are
 * rows (r0, r0 + 8) at K 4t.., 16 + 4t.., 32 + 4t.., 48 + 4t.. of a 64-K pair), so the weights need no
 * second repack: each converted word is 4 bytes of one row, stored by itself (8 four-byte stores a
 * 16-byte load instead of 2 sixteen-byte ones; conflict-free: lanes g, t hit chunk c ^ g, bank 4(c ^ g) + t) */
template <int NW, bool HALF>
static __device__ __forceinline__ void convert_part_rs(const uint8_t *stage, uint32_t dst, int w, int lane) {
    constexpr int UNITS = HALF ? 256 : 512; /* [64-row tile h][pair p][thread th], 16 bytes each */
    constexpr int ITERS = (UNITS + NW * 32 - 1) / (NW * 32);
    const uint32_t *exps = (const uint32_t *)(stage + A_TILE + W_FP4);
#pragma unroll
    for (int it = 0; it < ITERS; it++) {
        const uint32_t u = (uint32_t)(it * NW * 32 + w * 32 + lane);
        if (UNITS % (NW * 32) != 0 && u >= UNITS) break;
        const uint32_t h = u >> 8, p = (u >> 7) & 1u, th = u & 127u;
        const uint32_t g = (th & 31u) >> 2, t = th & 3u;
        const uint32_t r = 64u * h + 16u * (th >> 5) + g;
        const uint4 q = *(const uint4 *)(stage + A_TILE + u * 16u);
        const uint32_t e0 = exps[r], e1 = exps[r + 8];
        uint32_t lo0, hi0, lo1, hi1, a[4], b[4];
        fp8_table((e0 >> (8u * p)) & 15u, lo0, hi0); /* group 2p: the pair's first k32 step */
        fp8_table((e1 >> (8u * p)) & 15u, lo1, hi1);
        fp4x8_rows_to_fp8(q.x, lo0, hi0, lo1, hi1, a[0], b[0]);
        fp4x8_rows_to_fp8(q.y, lo0, hi0, lo1, hi1, a[1], b[1]);
        fp8_table((e0 >> (8u * p + 4u)) & 15u, lo0, hi0); /* group 2p + 1 */
        fp8_table((e1 >> (8u * p + 4u)) & 15u, lo1, hi1);
        fp4x8_rows_to_fp8(q.z, lo0, hi0, lo1, hi1, a[2], b[2]);
        fp4x8_rows_to_fp8(q.w, lo0, hi0, lo1, hi1, a[3], b[3]);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t k = 64u * p + 16u * (uint32_t)i + 4u * t; /* the word's first K byte */
            const uint32_t o0 = dst + swizzled_chunk(r, k >> 4) + (k & 15u);
            const uint32_t o1 = dst + swizzled_chunk(r + 8, k >> 4) + (k & 15u);
            asm volatile("st.shared.b32 [%0], %1;" ::"r"(o0), "r"(a[i]) : "memory");
            asm volatile("st.shared.b32 [%0], %1;" ::"r"(o1), "r"(b[i]) : "memory");
            if (HALF) {
                asm volatile("st.shared.b32 [%0], %1;" ::"r"(o0 + 64u * 128u), "r"(a[i]) : "memory");
                asm volatile("st.shared.b32 [%0], %1;" ::"r"(o1 + 64u * 128u), "r"(b[i]) : "memory");
            }
        }
    }
}

/* NW: converter warps (4: the producer warpgroup's; 3: warp 0 left to issue the copies); RSL: from
 * the FP4 kernel's repacked layout with 4-byte stores (convert_part_rs) */
template <int MODE, bool HALF, int NW, bool RSL>
__global__ void __launch_bounds__(THREADS, 1) conv_kernel(float *out) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    uint8_t *conv = smem + STAGES * STAGE;
    float *factors = (float *)(conv + CONV_BUFS * CONV);
    uint64_t *full = (uint64_t *)(factors + BM), *empty = full + CONV_BUFS;
    for (int s = 0; s < STAGES; s++) {
        uint8_t *st = smem + s * STAGE;
        for (int i = threadIdx.x; i < A_TILE / 4; i += blockDim.x)
            ((uint32_t *)st)[i] = 0x38383838u ^ ((i * 0x9E3779B1u >> 5) & 0x07070707u);
        for (int i = threadIdx.x; i < W_FP4 / 4; i += blockDim.x) ((uint32_t *)(st + A_TILE))[i] = (i + s) * 0x9E3779B1u;
        for (int i = threadIdx.x; i < 128; i += blockDim.x)
            ((uint32_t *)(st + A_TILE + W_FP4))[i] = 0x6666u + 0x1111u * ((i + s) % 5); /* offsets 6..10 */
    }
    for (int i = threadIdx.x; i < CONV_BUFS * CONV / 4; i += blockDim.x)
        ((uint32_t *)conv)[i] = 0x30303030u ^ ((i * 0x9E3779B1u >> 7) & 0x07070707u);
    for (int i = threadIdx.x; i < BM; i += blockDim.x) factors[i] = 1.0f + (i % 7) * 0x1p-12f;
    if (threadIdx.x == 0) {
        for (int c = 0; c < CONV_BUFS; c++) {
            mbar_init(&full[c], 32 * NW); /* every converter thread */
            mbar_init(&empty[c], 3 * 128); /* every consumer thread */
        }
        mbar_fence_init();
    }
    fence_proxy_async_smem();
    __syncthreads();
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128, lane = threadIdx.x % 32, warp = tid / 32;
    if (wg == 3) { /* the producer warpgroup: its four warps convert */
        warpgroup_reg_dealloc<PRODUCER_REGS>();
        if (MODE == MODE_CONSUMERS || warp >= NW) return;
        uint32_t phase = 0;
        for (int kc = 0; kc < CHUNKS; kc++) {
            const int c = kc % CONV_BUFS, s = kc % STAGES;
            if (MODE == MODE_BOTH && kc >= CONV_BUFS) mbar_wait_sleeping(&empty[c], phase ^ 1);
            if (RSL) convert_part_rs<NW, HALF>(smem + s * STAGE, smem_addr(conv + c * CONV), warp, lane);
            else convert_part<NW, HALF>(smem + s * STAGE, smem_addr(conv + c * CONV), warp, lane);
#ifndef CONV_SS_NO_FENCE /* (-DCONV_SS_NO_FENCE: a timing-only build, wrong by the proxy rule) */
            fence_proxy_async_smem(); /* the stores, visible to the consumers' wgmmas */
#endif
            mbar_arrive(&full[c]);
            if (c == CONV_BUFS - 1) phase ^= 1;
        }
        return;
    }
    warpgroup_reg_alloc<CONSUMER_REGS>();
    if constexpr (MODE != MODE_CONVERTERS) consume<MODE>(smem, conv, factors, full, empty, out, wg, warp, lane);
}

/* consumer warpgroup wg of conv_kernel (MODE_CONSUMERS or MODE_BOTH) */
template <int MODE>
static __device__ __forceinline__ void consume(const uint8_t *smem, const uint8_t *conv, const float *factors,
                                               uint64_t *full, uint64_t *empty, float *out, int wg, int warp,
                                               int lane) {
    /* consumer warpgroup wg: token rows 64 wg .. 64 wg + 63 of the tile, all 128 weight rows */
    float fin[64], acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) fin[i] = 0.0f;
    uint32_t phase = 0;
    const int row0 = 64 * wg + warp * 16 + lane / 4;
    for (int kc = 0; kc < CHUNKS; kc++) {
        const int c = kc % CONV_BUFS, s = kc % STAGES;
        const float s0 = factors[row0], s1 = factors[row0 + 8];
        if (MODE == MODE_BOTH) mbar_wait(&full[c], phase);
        const sm90_desc da = desc_advance_rows(smem_desc_k128_swizzle128(smem + s * STAGE), 64 * wg);
        const sm90_desc db = smem_desc_k128_swizzle128(conv + c * CONV);
        wgmma_fence();
        wgmma_fp8_ss_chunk_n128(acc, da, db);
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int r = 0; r < 64; r++) reg_fence(acc[r]);
        if (MODE == MODE_BOTH) mbar_arrive(&empty[c]);
        promote_token_rows_n128(fin, acc, s0, s1);
        if (c == CONV_BUFS - 1) phase ^= 1;
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; i++) sum += fin[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum; /* keeps everything live */
}

typedef struct conv_args {
    int sms;
    float *out;
} conv_args;

template <int MODE, bool HALF, int NW, bool RSL>
static void launch_conv(void *arg) {
    const conv_args *x = (const conv_args *)arg;
    conv_kernel<MODE, HALF, NW, RSL><<<x->sms, THREADS, SMEM>>>(x->out);
}

template <int MODE, bool HALF, int NW = 4, bool RSL = false>
static void run(const char *name, float *out, int sms) {
    cudaFuncSetAttribute(conv_kernel<MODE, HALF, NW, RSL>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    conv_args args = {sms, out};
    cudaError_t err;
    const float ms = micro_time_ms(launch_conv<MODE, HALF, NW, RSL>, &args, &err);
    const double chunks = (double)sms * CHUNKS * MICRO_REPS;
    const double flop = chunks * 2.0 * BM * 128 * 128; /* a chunk: 192 tokens x 128 rows x 128 K */
    printf("%-52s %s  %8.1f TFLOP/s-equivalent  %6.1f ns/chunk/SM\n", name,
           err == cudaSuccess ? "ok " : cudaGetErrorString(err), flop / (ms * 1e-3) / 1e12,
           ms * 1e6 / (CHUNKS * MICRO_REPS));
}

int main(void) {
    const int sms = micro_sm_count("conv_ss192");
    if (sms == 0) return 1;
    float *out = NULL;
    cudaMalloc(&out, (size_t)sms * THREADS * sizeof(float));
    run<MODE_CONSUMERS, false>("consumers only (192 rows, SS, FFMA promotion)", out, sms);
    run<MODE_CONVERTERS, false>("converters only, whole tile", out, sms);
    run<MODE_CONVERTERS, true>("converters only, half tile stored twice", out, sms);
    run<MODE_BOTH, false>("consumers + converters, whole tile", out, sms);
    run<MODE_BOTH, true>("consumers + converters, half tile stored twice", out, sms);
    run<MODE_CONVERTERS, false, 3>("3 converter warps only, whole tile", out, sms);
    run<MODE_BOTH, false, 3>("consumers + 3 converter warps, whole tile", out, sms);
    run<MODE_BOTH, true, 3>("consumers + 3 converter warps, half tile twice", out, sms);
    run<MODE_CONVERTERS, false, 4, true>("RS layout, 4-byte stores: converters only", out, sms);
    run<MODE_BOTH, false, 4, true>("RS layout, 4-byte stores: + consumers, whole", out, sms);
    run<MODE_BOTH, true, 4, true>("RS layout, 4-byte stores: + consumers, half x2", out, sms);
    cudaFree(out);
    return 0;
}
