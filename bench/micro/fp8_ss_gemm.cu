/*
 * fp8_ss_gemm.cu - issue 5's "convert once, then an FP8 GEMM" route, measured before it is built into
 * the library.
 *
 * Why: the register-operand (RS) kernel converts a weight tile's FP4 for every token tile it meets:
 * 64 times over at dense 8192^3, 3 times at V4-Flash w13 T = 16384. Its consumer structure tops out at
 * ~1077 TFLOP/s without memory (bench/micro/consumer_structures) and ~700-745 in the real kernel,
 * below cuBLASLt FP8 (~960-1230 here). With both operands in shared memory (DeepGEMM's FP8 loop) the
 * same two warpgroups reach 1710 TFLOP/s-equivalent without memory (bench/micro/ss_swap), but a
 * converter inside the CTA competes for the issue slots (852-904). Converting each weight once per
 * GEMM, outside it, leaves the GEMM a plain FP8 x FP8 one; what remains to know is what that GEMM
 * reaches with real memory traffic, and what the conversion pass costs.
 *
 *   prep   FP4 e2m1 weights (two per byte, even k in the low nibble) with a UE8M0 scale per 32
 *          K-elements -> e4m3 with each group's exponent relative to its row's largest folded in,
 *          and one FP32 scale per row, 2^(e_max - 127 - 6): exact when a row's group exponents
 *          span at most 14 binades (0.5 x 2^(d + 6) and 1.5 x 2^(d + 6) stay multiples of 2^-9, e4m3's
 *          smallest subnormal, for d >= -14); rows beyond that are counted (the library would keep
 *          them on the RS path). Memory-bound: 0.5 + 1 byte a weight.
 *   gemm   D[m][n] = wscale[n] x sum over 128-K blocks kb of sa[kb][m] x (A_kb . B_kb), A the FP8
 *          activations [m][k] with 1x128 FP32 scales (MN-major, [k/128][m]), B the converted weights
 *          [n][k], D BF16: a persistent kernel, 128 x 128 tiles rastered in groups of 16 token tiles
 *          (so a wave's A and B slices stay in L2), 6 stages of TMA-loaded 128 x 128 tiles (128-byte
 *          swizzle), one producer thread, two consumer warpgroups each issuing 4 wgmma m64n128k32 SS
 *          per block and promoting with one FFMA per accumulator (the row's one scale is applied
 *          once, in the epilogue), D stored from the registers. Timed also without the stores
 *          (a timing-only copy), which says what a TMA-store epilogue could win.
 *
 * Checked first on a small problem against a naive kernel that computes D from the FP4 operand
 * directly (every element, |D - ref| <= 2^-10 sum|terms| + 2^-8 |ref|: the tensor cores' FP8
 * accumulation, ~13 bits a k32 step and three chained additions a block, as docs/TESTING.md's bound;
 * and BF16), then on sampled rows of the timed shapes. Compare its TFLOP/s with
 * `hfp4 bench --only dense` (cuBLASLt FP8 and the RS kernel) in the same device call.
 *
 * Build (here):  make BUILD=build-dev build-dev/fp8_ss_gemm
 * Run (device):  build-dev/fp8_ss_gemm        (~10 s)
 */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "micro_tensor_map.cuh"
#include "micro_timing.cuh"
#include "sm90/ptx.cuh"
#include "sm90/wgmma_fp8_ss.cuh"

#define BM 128 /* tokens per tile (two consumer warpgroups x 64) */
#define BN 128 /* weight rows per tile */
#define BK 128 /* K per stage (one promotion) */
#define STAGES 6
#define GROUP_M 16 /* token tiles per raster group */
#define TILE_BYTES (128 * 128)
#define SA_BYTES (BM * 4)
#define STAGE_TX (2 * TILE_BYTES + SA_BYTES)
#define THREADS 384
#define SMEM (1024 + STAGES * (2 * TILE_BYTES + SA_BYTES) + 2 * STAGES * 8)

static __device__ __forceinline__ void tma_load_2d(void *dst, const void *map, uint64_t *bar, int32_t c0, int32_t c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
            smem_addr(dst)),
        "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
        : "memory");
}

static __device__ __forceinline__ uint64_t global_ns(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* A wait that gives up: this kernel has not run before, and a protocol mistake should end its first
 * call with a launch error (the trap after 2 s), not spend the device call hanging */
static __device__ __forceinline__ void wait_or_trap(uint64_t *bar, uint32_t parity, bool sleep) {
    if (mbar_try_wait(bar, parity)) return;
    const uint64_t t0 = global_ns();
    while (!mbar_try_wait(bar, parity)) {
        if (global_ns() - t0 > 2000000000ull) __trap();
        if (sleep) __nanosleep(64);
    }
}

typedef struct gemm_args {
    int m, n, k;
    const float *sa;     /* [k / 128][m] */
    const float *wscale; /* [n] */
    __nv_bfloat16 *d;    /* [m][n] */
} gemm_args;

/* Tile t's (token tile, weight tile): groups of GROUP_M token tiles, weight tiles within a group */
static __device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int &mt, int &nt) {
    const int grp = t / (GROUP_M * tiles_n), first = grp * GROUP_M;
    const int gm = min(GROUP_M, tiles_m - first), within = t - grp * GROUP_M * tiles_n;
    mt = first + within % gm;
    nt = within / gm;
}

/* STORE false: the epilogue's stores left out (timing only: how much of a tile the direct stores cost) */
template <bool STORE>
__global__ void __launch_bounds__(THREADS, 1) ss_gemm_kernel(const __grid_constant__ CUtensorMap a_map,
                                                             const __grid_constant__ CUtensorMap b_map,
                                                             const gemm_args x) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    uint8_t *a_tiles = smem, *b_tiles = smem + STAGES * TILE_BYTES;
    float *sa_s = (float *)(b_tiles + STAGES * TILE_BYTES);
    uint64_t *full = (uint64_t *)(sa_s + STAGES * BM), *empty = full + STAGES;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 1);    /* the producer's expect_tx arrival */
            mbar_init(&empty[s], 256); /* every consumer thread */
        }
        mbar_fence_init();
    }
    __syncthreads();
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    const int tiles_m = x.m / BM, tiles_n = x.n / BN, tiles = tiles_m * tiles_n, kblocks = x.k / BK;
    if (wg == 2) { /* the producer warpgroup: one thread issues every stage's copies */
        warpgroup_reg_dealloc<40>();
        if (tid == 0) {
            tma_prefetch_descriptor(&a_map);
            tma_prefetch_descriptor(&b_map);
            uint32_t it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int mt, nt;
                tile_coords(t, tiles_m, tiles_n, mt, nt);
                for (int kb = 0; kb < kblocks; kb++, it++) {
                    const int s = (int)(it % STAGES);
                    /* (sleeping: this thread's warp shares a scheduler with consumer warps) */
                    if (it >= STAGES) wait_or_trap(&empty[s], ((it / STAGES) - 1) & 1, true);
                    mbar_arrive_expect_tx(&full[s], STAGE_TX);
                    tma_load_2d(a_tiles + s * TILE_BYTES, &a_map, &full[s], kb * BK, mt * BM);
                    tma_load_2d(b_tiles + s * TILE_BYTES, &b_map, &full[s], kb * BK, nt * BN);
                    bulk_load(sa_s + s * BM, x.sa + (size_t)kb * x.m + (size_t)mt * BM, SA_BYTES, &full[s]);
                }
            }
        }
        return;
    }
    warpgroup_reg_alloc<232>();
    const int lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
    const int r0 = 64 * wg + warp * 16 + g; /* the thread's token rows r0 and r0 + 8 of the tile */
    uint32_t it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int mt, nt;
        tile_coords(t, tiles_m, tiles_n, mt, nt);
        float fin[64], acc[64], ws[32];
#pragma unroll
        for (int i = 0; i < 64; i++) fin[i] = 0.0f;
        /* the tile's weight-row scales, now: read after the stores below, they went out one pair
         * at a time (D might alias them) while the tensor cores idled */
#pragma unroll
        for (int j = 0; j < 16; j++) {
            ws[2 * j] = __ldg(x.wscale + nt * BN + 8 * j + 2 * t4);
            ws[2 * j + 1] = __ldg(x.wscale + nt * BN + 8 * j + 2 * t4 + 1);
        }
        for (int kb = 0; kb < kblocks; kb++, it++) {
            const int s = (int)(it % STAGES);
            wait_or_trap(&full[s], (it / STAGES) & 1, false);
            const sm90_desc da = desc_advance_rows(smem_desc_k128_swizzle128(a_tiles + s * TILE_BYTES), 64 * wg);
            const sm90_desc db = smem_desc_k128_swizzle128(b_tiles + s * TILE_BYTES);
            wgmma_fence();
            wgmma_fp8_ss_chunk_n128(acc, da, db);
            wgmma_commit();
            const float s0 = sa_s[s * BM + r0], s1 = sa_s[s * BM + r0 + 8]; /* under the wgmmas */
            wgmma_wait<0>();
#pragma unroll
            for (int r = 0; r < 64; r++) reg_fence(acc[r]);
            mbar_arrive(&empty[s]); /* the stage is read: wgmmas done, scales in registers */
            promote_token_rows_n128(fin, acc, s0, s1);
        }
        /* D = fin x the weight row's scale, BF16, from the registers (columns 8 j + 2 t4, + 1) */
        if (!STORE) { /* (keeps the sums live without a store per element) */
            float sum = 0.0f;
#pragma unroll
            for (int i = 0; i < 64; i++) sum += fin[i] * ws[i / 2];
            if (sum == 1234.5f) x.d[0] = __float2bfloat16(sum);
            continue;
        }
        const size_t row = (size_t)mt * BM + r0;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int col = nt * BN + 8 * j + 2 * t4;
            const float w0 = ws[2 * j], w1 = ws[2 * j + 1];
            *(__nv_bfloat162 *)(x.d + row * x.n + col) = __floats2bfloat162_rn(fin[4 * j] * w0, fin[4 * j + 1] * w1);
            *(__nv_bfloat162 *)(x.d + (row + 8) * x.n + col) =
                __floats2bfloat162_rn(fin[4 * j + 2] * w0, fin[4 * j + 3] * w1);
        }
    }
}

/* e2m1 code (sign in bit 3) as a float: exponent field e, mantissa bit mm; e = 0 is 0 or 0.5 */
static __device__ __forceinline__ float e2m1_value(uint32_t c) {
    const uint32_t e = (c >> 1) & 3u, mm = c & 1u;
    const float v = e ? __uint_as_float(((e + 126u) << 23) | (mm << 22)) : (mm ? 0.5f : 0.0f);
    return c & 8u ? -v : v;
}

/* prep (above): one warp per weight row */
__global__ void __launch_bounds__(256) fp4_to_fp8_rows(const uint8_t *w4, const uint8_t *sf, int n, int k, uint8_t *w8,
                                                       float *wscale, int *inexact_rows) {
    const int row = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32, groups = k / 32;
    if (row >= n) return;
    const uint8_t *srow = sf + (size_t)row * groups;
    int emax = 0;
    for (int gi = lane; gi < groups; gi += 32) emax = max(emax, (int)srow[gi]);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) emax = max(emax, __shfl_xor_sync(0xFFFFFFFFu, emax, o));
    bool inexact = false;
    for (int gi = lane; gi < groups; gi += 32) {
        const int d = (int)srow[gi] - emax + 6;
        inexact = inexact || d < -8;
        const float f = ldexpf(1.0f, d);
        const uint4 q = *(const uint4 *)(w4 + (size_t)row * (k / 2) + (size_t)gi * 16);
        const uint32_t words[4] = {q.x, q.y, q.z, q.w};
        uint32_t out[8];
#pragma unroll
        for (int wi = 0; wi < 4; wi++) {
            uint32_t packed[2];
#pragma unroll
            for (int h = 0; h < 2; h++) { /* 4 codes -> 4 e4m3 bytes */
                const uint32_t b = words[wi] >> (16 * h);
                const __nv_fp8x2_storage_t lo =
                    __nv_cvt_float2_to_fp8x2(make_float2(e2m1_value(b & 15) * f, e2m1_value((b >> 4) & 15) * f),
                                             __NV_SATFINITE, __NV_E4M3);
                const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(
                    make_float2(e2m1_value((b >> 8) & 15) * f, e2m1_value((b >> 12) & 15) * f), __NV_SATFINITE,
                    __NV_E4M3);
                packed[h] = (uint32_t)lo | ((uint32_t)hi << 16);
            }
            out[2 * wi] = packed[0];
            out[2 * wi + 1] = packed[1];
        }
        uint4 *dst = (uint4 *)(w8 + (size_t)row * k + (size_t)gi * 32);
        dst[0] = make_uint4(out[0], out[1], out[2], out[3]);
        dst[1] = make_uint4(out[4], out[5], out[6], out[7]);
    }
    if (__any_sync(0xFFFFFFFFu, inexact) && lane == 0) atomicAdd(inexact_rows, 1);
    if (lane == 0) wscale[row] = ldexpf(1.0f, emax - 127 - 6);
}

/* The naive reference from the FP4 operand: rows r = i x row_step (i < grid rows), every column;
 * ref and sum |terms| in FP32 (products of e4m3 and e2m1 x 2^e are exact) */
__global__ void ref_kernel(const uint8_t *a, const float *sa, const uint8_t *w4, const uint8_t *sf, int m, int n, int k,
                           int row_step, float *ref, float *absref) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y, row = i * row_step;
    if (col >= n || row >= m) return;
    float sum = 0.0f, abs_sum = 0.0f;
    for (int kb = 0; kb < k / 128; kb++) {
        float part = 0.0f, abs_part = 0.0f;
        for (int kk = kb * 128; kk < kb * 128 + 128; kk++) {
            __nv_fp8_e4m3 av;
            av.__x = a[(size_t)row * k + kk];
            const uint8_t byte = w4[(size_t)col * (k / 2) + kk / 2];
            const float wv = e2m1_value(kk % 2 ? byte >> 4 : byte & 15) *
                             ldexpf(1.0f, (int)sf[(size_t)col * (k / 32) + kk / 32] - 127);
            part += (float)av * wv;
            abs_part += fabsf((float)av * wv);
        }
        const float s = sa[(size_t)kb * m + row];
        sum += part * s;
        abs_sum += abs_part * s;
    }
    ref[(size_t)i * n + col] = sum;
    absref[(size_t)i * n + col] = abs_sum;
}

/* ---- host ---------------------------------------------------------------------------------------- */


/* a [rows][k] e4m3 matrix as 128 x 128 boxes with the 128-byte swizzle */
static int make_map(encode_fn enc, CUtensorMap *map, void *base, int rows, int k) {
    const cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)k};
    const cuuint32_t box[2] = {128, 128}, estr[2] = {1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS
               ? 0
               : -1;
}

static uint32_t rng_state = 12345u;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

typedef struct problem {
    int m, n, k, sms;
    uint8_t *a, *w4, *sf, *w8;
    float *sa, *wscale;
    __nv_bfloat16 *d;
    int *inexact;
    CUtensorMap a_map, b_map;
} problem;

template <bool STORE>
static void launch_gemm(void *arg) {
    const problem *p = (const problem *)arg;
    const gemm_args x = {p->m, p->n, p->k, p->sa, p->wscale, p->d};
    const int tiles = (p->m / BM) * (p->n / BN);
    ss_gemm_kernel<STORE><<<tiles < p->sms ? tiles : p->sms, THREADS, SMEM>>>(p->a_map, p->b_map, x);
}

static void launch_prep(void *arg) {
    const problem *p = (const problem *)arg;
    fp4_to_fp8_rows<<<(p->n + 7) / 8, 256>>>(p->w4, p->sf, p->n, p->k, p->w8, p->wscale, p->inexact);
}

/* Random operands (activation bytes never NaN, exponent field 4..11; group exponents below),
 * device buffers, the prep and the tensor maps. 0 on success. */
static int setup(problem *p, encode_fn enc) {
    const size_t m = p->m, n = p->n, k = p->k;
    uint8_t *ha = (uint8_t *)malloc(m * k), *hw = (uint8_t *)malloc(n * k / 2), *hs = (uint8_t *)malloc(n * k / 32);
    float *hsa = (float *)malloc(k / 128 * m * sizeof(float));
    if (!ha || !hw || !hs || !hsa) return -1;
    for (size_t i = 0; i < m * k; i++) {
        const uint32_t r = rnd();
        ha[i] = (uint8_t)((r & 0x80u) | ((4u + (r >> 8) % 8u) << 3) | ((r >> 16) & 7u));
    }
    for (size_t i = 0; i < n * k / 2; i++) hw[i] = (uint8_t)rnd();
    for (size_t r = 0; r < n; r++) { /* a base per row (100..149) and a span of 0..14 binades: wscale varies,
                                       * the pass's subnormal end (d = -8) is reached, every row is exact */
        const uint32_t base = 100u + rnd() % 50u, span = rnd() % 15u;
        for (size_t gi = 0; gi < k / 32; gi++) hs[r * (k / 32) + gi] = (uint8_t)(base + rnd() % (span + 1u));
    }
    for (size_t i = 0; i < k / 128 * m; i++) hsa[i] = 0.5f + (float)(rnd() % 1024u) / 1024.0f;
    int rc = -1;
    if (cudaMalloc(&p->a, m * k) || cudaMalloc(&p->w4, n * k / 2) || cudaMalloc(&p->sf, n * k / 32) ||
        cudaMalloc(&p->w8, n * k) || cudaMalloc(&p->sa, k / 128 * m * sizeof(float)) ||
        cudaMalloc(&p->wscale, n * sizeof(float)) || cudaMalloc(&p->d, m * n * 2) || cudaMalloc(&p->inexact, sizeof(int)))
        goto out;
    cudaMemcpy(p->a, ha, m * k, cudaMemcpyHostToDevice);
    cudaMemcpy(p->w4, hw, n * k / 2, cudaMemcpyHostToDevice);
    cudaMemcpy(p->sf, hs, n * k / 32, cudaMemcpyHostToDevice);
    cudaMemcpy(p->sa, hsa, k / 128 * m * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(p->inexact, 0, sizeof(int));
    launch_prep(p);
    if (make_map(enc, &p->a_map, p->a, p->m, p->k) || make_map(enc, &p->b_map, p->w8, p->n, p->k)) goto out;
    rc = cudaDeviceSynchronize() == cudaSuccess ? 0 : -1;
out:
    free(ha);
    free(hw);
    free(hs);
    free(hsa);
    return rc;
}

static void release(problem *p) {
    cudaFree(p->a);
    cudaFree(p->w4);
    cudaFree(p->sf);
    cudaFree(p->w8);
    cudaFree(p->sa);
    cudaFree(p->wscale);
    cudaFree(p->d);
    cudaFree(p->inexact);
}

/* D (poisoned, then computed) against the reference on rows 0, row_step, ...: failures, or -1 */
static long check(problem *p, int row_step, double *max_rel) {
    const int rows = (p->m + row_step - 1) / row_step;
    float *ref = NULL, *absref = NULL;
    const size_t cnt = (size_t)rows * p->n;
    if (cudaMalloc(&ref, cnt * 4) || cudaMalloc(&absref, cnt * 4)) {
        cudaFree(ref);
        return -1;
    }
    cudaMemset(p->d, 0xFF, (size_t)p->m * p->n * 2); /* NaN poison */
    launch_gemm<true>(p);
    ref_kernel<<<dim3((p->n + 127) / 128, rows), 128>>>(p->a, p->sa, p->w4, p->sf, p->m, p->n, p->k, row_step, ref,
                                                         absref);
    float *hr = (float *)malloc(cnt * 4), *ha = (float *)malloc(cnt * 4);
    __nv_bfloat16 *hd = (__nv_bfloat16 *)malloc((size_t)p->n * 2);
    long bad = -1;
    if (hr && ha && hd && cudaDeviceSynchronize() == cudaSuccess) {
        cudaMemcpy(hr, ref, cnt * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(ha, absref, cnt * 4, cudaMemcpyDeviceToHost);
        bad = 0;
        *max_rel = 0.0;
        for (int i = 0; i < rows; i++) {
            cudaMemcpy(hd, p->d + (size_t)i * row_step * p->n, (size_t)p->n * 2, cudaMemcpyDeviceToHost);
            for (int c = 0; c < p->n; c++) {
                const double got = (double)__bfloat162float(hd[c]), want = hr[(size_t)i * p->n + c];
                const double tol = ldexp((double)ha[(size_t)i * p->n + c], -10) + ldexp(fabs(want), -8);
                const double err = fabs(got - want);
                if (!(err <= tol)) {
                    if (bad < 3)
                        fprintf(stderr, "  row %d col %d: got %g want %g (tol %g)\n", i * row_step, c, got, want, tol);
                    bad++;
                }
                if (ha[(size_t)i * p->n + c] > 0) {
                    const double rel = err / ha[(size_t)i * p->n + c];
                    if (rel > *max_rel) *max_rel = rel;
                }
            }
        }
    }
    free(hr);
    free(ha);
    free(hd);
    cudaFree(ref);
    cudaFree(absref);
    return bad;
}

static int run(encode_fn enc, int sms, int m, int n, int k, int row_step) {
    problem p = {m, n, k, sms};
    if (setup(&p, enc) != 0) {
        fprintf(stderr, "fp8_ss_gemm: setup of %dx%dx%d failed: %s\n", m, n, k, cudaGetErrorString(cudaGetLastError()));
        release(&p);
        return 1;
    }
    int inexact = 0;
    cudaMemcpy(&inexact, p.inexact, sizeof(int), cudaMemcpyDeviceToHost);
    double max_rel = 0.0;
    const long bad = check(&p, row_step, &max_rel);
    cudaError_t e1, e2;
    const float gemm_ms = micro_time_ms(launch_gemm<true>, &p, &e1) / MICRO_REPS;
    cudaError_t e3;
    const float nostore_ms = micro_time_ms(launch_gemm<false>, &p, &e3) / MICRO_REPS;
    const float prep_ms = micro_time_ms(launch_prep, &p, &e2) / MICRO_REPS;
    const double tflops = 2.0 * m * n * k / (gemm_ms * 1e-3) / 1e12;
    const double prep_tbps = ((double)n * k * 1.5 + (double)n * k / 32) / (prep_ms * 1e-3) / 1e12;
    printf("%5d x %5d x %5d  check %s (%ld bad, rows every %d, max err/sum|terms| %.2e, inexact rows %d)  "
           "gemm %8.1f us %7.1f TFLOP/s (no stores %7.1f) | prep %6.1f us %5.2f TB/s | prep + gemm %7.1f TFLOP/s  %s\n",
           m, n, k, bad == 0 ? "ok" : "FAIL", bad, row_step, max_rel, inexact, gemm_ms * 1e3, tflops,
           2.0 * m * n * k / (nostore_ms * 1e-3) / 1e12, prep_ms * 1e3,
           prep_tbps, 2.0 * m * n * k / ((gemm_ms + prep_ms) * 1e-3) / 1e12,
           e1 == cudaSuccess && e2 == cudaSuccess && e3 == cudaSuccess
               ? ""
               : cudaGetErrorString(e1 != cudaSuccess ? e1 : e2 != cudaSuccess ? e2 : e3));
    fflush(stdout);
    release(&p);
    return bad == 0 && inexact == 0 && e1 == cudaSuccess && e2 == cudaSuccess && e3 == cudaSuccess ? 0 : 1;
}

int main(void) {
    const int sms = micro_sm_count("fp8_ss_gemm");
    if (sms == 0) return 1;
    const encode_fn enc = micro_tensor_map_encoder("fp8_ss_gemm");
    if (!enc) return 1;
    if (cudaFuncSetAttribute(ss_gemm_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM) != cudaSuccess ||
        cudaFuncSetAttribute(ss_gemm_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM) != cudaSuccess) {
        fprintf(stderr, "fp8_ss_gemm: %d bytes of shared memory refused\n", SMEM);
        return 1;
    }
    int fails = 0;
    fails += run(enc, sms, 384, 640, 1024, 1);     /* every element; 15 tiles, fewer than the SMs */
    fails += run(enc, sms, 2048, 1536, 2176, 1);   /* every element; several tiles per CTA; 17 blocks, so the
                                                    * stage ring carries over between a CTA's tiles */
    fails += run(enc, sms, 8192, 8192, 8192, 61);  /* issue 5's dense shape */
    fails += run(enc, sms, 4096, 4096, 4096, 31);  /* (32 MB of operands: L2-warm across the repeats) */
    fails += run(enc, sms, 16384, 4096, 4096, 127); /* a V4-Flash w13-sized dense stand-in */
    return fails ? 1 : 0;
}
