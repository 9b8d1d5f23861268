/*
 * fp4_to_fp8_gpu.cu - the GPU form of hfp4_fp4_weights_to_fp8 (include/hfp4.h; the host form in
 * fp4_to_fp8.c is its reference, byte for byte): one CTA a 128 x 128 block, 256 threads, two a
 * row: 32 bytes of FP4 in and 64 of FP8 out a thread, each pair's store instructions whole 32-byte
 * sectors where ldq is a multiple of 32 (16 mod 32: odd rows straddle two).
 * The pass moves 1.5 bytes a weight (fp8x4_of_codes keeps the conversion to <2 instructions an
 * element; 43 us at 8192^2, 2.4 TB/s, v41); the block's exponent range is found first
 * (shared-memory min / max over its 512 scales), so a refused block writes NaN and counts itself.
 */
#include <cuda_fp8.h>
#include <stdint.h>

#include "../runtime/cuda_runtime.h"
#include "fp4_to_fp8.h"

typedef struct fp4_to_fp8_params {
    const uint8_t *w;
    int64_t ldw, n;
    const void *ws; /* w's (1, 32) scales */
    int32_t ws_dtype;
    int64_t ws_stride_mn, ws_stride_k;
    uint8_t *q;
    int64_t ldq;
    void *sf; /* the 128 x 128 block scales written */
    int32_t sf_fp32;
    int64_t sf_stride_mn, sf_stride_k;
    int32_t *inexact;
} fp4_to_fp8_params;

/* The exponent e of scale (row, K-group j) = 2^e; invalid (NaN byte, FP32 not a power of two) sets
 * bad. WS: the scales' dtype (a template: no branch on it in the kernel) */
template <int WS>
static __device__ __forceinline__ int32_t scale_exponent(const fp4_to_fp8_params &p, int64_t row, int64_t j, int &bad) {
    if constexpr (WS == HFP4_DTYPE_FP32) {
        const uint32_t u = __float_as_uint(((const float *)p.ws)[row * p.ws_stride_mn + j * p.ws_stride_k]);
        const uint32_t ef = (u >> 23) & 255u;
        /* a positive normal power of two (sign 0, mantissa 0, exponent field 1..254) */
        if ((u & 0x807FFFFFu) != 0 || ef == 0 || ef == 255) bad = 1;
        return (int32_t)ef - 127;
    }
    uint8_t b;
    if constexpr (WS == HFP4_DTYPE_UE8M0_PACKED)
        b = (uint8_t)(((const uint32_t *)p.ws)[row * p.ws_stride_mn + (j >> 2) * p.ws_stride_k] >> (8 * (j & 3)));
    else
        b = ((const uint8_t *)p.ws)[row * p.ws_stride_mn + j * p.ws_stride_k];
    if (b == 255) bad = 1;
    return (int32_t)b - 127;
}

/* The e4m3 bytes of the 8 e2m1 magnitudes times 2^d (each product an e4m3 value for
 * -8 <= d <= 6): lo holds magnitudes 0-3, hi 4-7, as prmt's 8-byte table */
static __device__ __forceinline__ uint2 magnitude_table(int32_t d) {
    const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float step = __uint_as_float((uint32_t)(d + 127) << 23);
    uint32_t b[8];
#pragma unroll
    for (int i = 0; i < 8; i++) b[i] = (uint32_t)__nv_cvt_float_to_fp8(mag[i] * step, __NV_SATFINITE, __NV_E4M3);
    return make_uint2(b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24, b[4] | b[5] << 8 | b[6] << 16 | b[7] << 24);
}

/* PTX prmt.b32 (default mode: a selector nibble's bit 3 replicates the selected byte's top bit) */
static __device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

/* Four e2m1 codes (the low 16 bits of x, element i in nibble i) as four e4m3 bytes (element i in
 * byte i): the magnitude by table lookup (the code's low 3 bits as the byte selector), the sign bit
 * moved to the byte's top (code 8, -0, gives e4m3 -0: the same value)
 * NOTE: why a table: the arithmetic form (a table of floats, a multiply and a conversion an
 * element) compiled to 2032 instructions a thread against 504 (not timed: by count ~55 us of issue
 * at 8192^2, above the 23 us the bytes take at the copy rate). */
static __device__ __forceinline__ uint32_t fp8x4_of_codes(uint32_t x, uint32_t lo, uint32_t hi) {
    const uint32_t mags = prmt(lo, hi, x & 0x7777u);
    /* (PTX prmt: a selector nibble's bit 3 replicates the selected byte's top bit, so bytes of 0x80
     * give 0xFF where the code's sign is set and 0x80 where not; __byte_perm documents only bits 0-2) */
    const uint32_t sgn = prmt(0x80808080u, 0x80808080u, x & 0xFFFFu);
    return mags | (((sgn & 0x7F7F7F7Fu) << 1) & 0x80808080u);
}

#define F2F_TABLES (HFP4_FP8_BLOCK_SPAN + 1) /* d = HFP4_FP8_BLOCK_BOTTOM (-8) .. HFP4_FP8_BLOCK_TOP (6) */

template <int WS>
__global__ void __launch_bounds__(256) hfp4_fp4_to_fp8_kernel(const fp4_to_fp8_params p) {
    __shared__ int32_t lo_s, hi_s, bad_s;
    __shared__ uint2 tables[F2F_TABLES]; /* magnitude_table(d) at d - HFP4_FP8_BLOCK_BOTTOM */
    const int t = threadIdx.x, half = t % 2;
    /* (K-blocks fastest, so the CTAs running together cover whole rows) */
    const int64_t bj = blockIdx.x, bi = blockIdx.y;
    const int64_t row = bi * 128 + t / 2;
    /* A thread and its partner (t ^ 1) share a row of the block: in each of its 4 groups the thread
     * takes 16 elements (8 bytes in, 16 out), the even thread the first, so that each store
     * instruction of the pair covers a whole 32-byte sector.
     * NOTE: why: a thread that wrote 64 contiguous bytes as 4 x 16 left every store instruction
     * half-sectors, and the pass ran at ~1.7 TB/s at 8192^2 (59 us; the copy rate 4.26) whatever
     * the loads' order, the atomics or the grid's order (bench/RESULTS.md v40); with the pairs'
     * whole sectors, the 15 magnitude tables in shared memory and the scale dtype a template
     * (~280 instructions a thread against ~500): 60 -> 43 us (2.4 TB/s), 7168 x 2048 17.8 -> 12.8 us
     * (v41, 12 interleaved rounds) */
    uint2 in[4] = {make_uint2(0, 0), make_uint2(0, 0), make_uint2(0, 0), make_uint2(0, 0)};
    int32_t e2[2] = {0, 0}; /* the thread's own loads: groups 2 half, 2 half + 1 of the block */
    int bad = 0;
    if (row < p.n) {
        const uint8_t *src = p.w + row * p.ldw + bj * 64 + 8 * half;
#pragma unroll
        for (int j = 0; j < 4; j++) in[j] = *(const uint2 *)(src + 16 * j);
        e2[0] = scale_exponent<WS>(p, row, bj * 4 + 2 * half, bad);
        e2[1] = scale_exponent<WS>(p, row, bj * 4 + 2 * half + 1, bad);
    }
    if (t == 0) {
        lo_s = INT32_MAX;
        hi_s = INT32_MIN;
        bad_s = 0;
    }
    if (t < F2F_TABLES) tables[t] = magnitude_table(t + HFP4_FP8_BLOCK_BOTTOM);
    /* the row's four exponents: the partner loaded the other two */
    const int32_t o0 = __shfl_xor_sync(0xFFFFFFFFu, e2[0], 1), o1 = __shfl_xor_sync(0xFFFFFFFFu, e2[1], 1);
    const int32_t e[4] = {half ? o0 : e2[0], half ? o1 : e2[1], half ? e2[0] : o0, half ? e2[1] : o1};
    /* a warp's range first, then one shared atomic a warp */
    const int32_t lo_w = __reduce_min_sync(0xFFFFFFFFu, row < p.n ? min(e2[0], e2[1]) : INT32_MAX);
    const int32_t hi_w = __reduce_max_sync(0xFFFFFFFFu, row < p.n ? max(e2[0], e2[1]) : INT32_MIN);
    const int bad_w = __any_sync(0xFFFFFFFFu, bad);
    __syncthreads();
    if (t % 32 == 0) {
        atomicMin(&lo_s, lo_w);
        atomicMax(&hi_s, hi_w);
        if (bad_w) atomicOr(&bad_s, 1);
    }
    __syncthreads();
    const int32_t lo = lo_s, hi = hi_s, base = hi - HFP4_FP8_BLOCK_TOP;
    const bool inexact = bad_s != 0 || HFP4_FP8_BLOCK_REFUSED(hi - lo, base);
    if (t == 0) {
        const int64_t si = bi * p.sf_stride_mn + bj * p.sf_stride_k;
        if (p.sf_fp32) ((float *)p.sf)[si] = inexact ? 1.0f : ldexpf(1.0f, base);
        else ((uint8_t *)p.sf)[si] = inexact ? (uint8_t)127 : (uint8_t)(base + 127);
        if (inexact) atomicAdd(p.inexact, 1);
    }
    if (row >= p.n) return;
    uint8_t *dst = p.q + row * p.ldq + bj * 128 + 16 * half;
#pragma unroll
    for (int j = 0; j < 4; j++) { /* group j: 16 codes in, 16 bytes out */
        /* (d out of the tables' range only in a refused block) */
        const int32_t d = min(max(e[j] - base, HFP4_FP8_BLOCK_BOTTOM), HFP4_FP8_BLOCK_TOP);
        const uint2 tb = tables[d - HFP4_FP8_BLOCK_BOTTOM];
        uint4 out;
        out.x = fp8x4_of_codes(in[j].x, tb.x, tb.y);
        out.y = fp8x4_of_codes(in[j].x >> 16, tb.x, tb.y);
        out.z = fp8x4_of_codes(in[j].y, tb.x, tb.y);
        out.w = fp8x4_of_codes(in[j].y >> 16, tb.x, tb.y);
        if (inexact) out = make_uint4(0x7F7F7F7Fu, 0x7F7F7F7Fu, 0x7F7F7F7Fu, 0x7F7F7F7Fu);
        *(uint4 *)(dst + 32 * j) = out;
    }
}

extern "C" hfp4_status hfp4__fp4_to_fp8_launch(const char *fn, const hfp4_matrix *w, uint8_t *q, int64_t ldq,
                                               const hfp4_scales *sf, int32_t *inexact_blocks, hfp4_stream stream) {
    HFP4_REQUIRE(w->ld % 16 == 0 && ldq % 16 == 0 && (uintptr_t)w->data % 16 == 0 && (uintptr_t)q % 16 == 0,
                 "%s: w->ld = %lld, ldq = %lld (bytes), w->data = %p and q = %p must be 16-byte multiples / aligned "
                 "for the GPU form (the host form takes any)",
                 fn, (long long)w->ld, (long long)ldq, w->data, (void *)q);
    const int64_t blocks_n = (w->rows + 127) / 128, blocks_k = w->cols / 128;
    HFP4_REQUIRE(blocks_k < ((int64_t)1 << 31) && blocks_n <= 65535,
                 "%s: %lld x %lld blocks exceed the launch grid (n / 128 <= 65535, k / 128 < 2^31)", fn,
                 (long long)blocks_n, (long long)blocks_k);
    hfp4_current_device dev;
    HFP4_TRY(hfp4__require_sm90(fn, &dev));
    fp4_to_fp8_params p;
    p.w = (const uint8_t *)w->data;
    p.ldw = w->ld;
    p.n = w->rows;
    p.ws = w->scales.data;
    p.ws_dtype = (int32_t)w->scales.dtype;
    p.ws_stride_mn = w->scales.stride_mn;
    p.ws_stride_k = w->scales.stride_k;
    p.q = q;
    p.ldq = ldq;
    p.sf = (void *)sf->data;
    p.sf_fp32 = sf->dtype == HFP4_DTYPE_FP32;
    p.sf_stride_mn = sf->stride_mn;
    p.sf_stride_k = sf->stride_k;
    p.inexact = inexact_blocks;
    cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
    HFP4_CUDA_TRY(fn, cudaMemsetAsync(inexact_blocks, 0, sizeof(int32_t), s));
    const dim3 grid((unsigned)blocks_k, (unsigned)blocks_n);
    if (w->scales.dtype == HFP4_DTYPE_FP32) hfp4_fp4_to_fp8_kernel<HFP4_DTYPE_FP32><<<grid, 256, 0, s>>>(p);
    else if (w->scales.dtype == HFP4_DTYPE_UE8M0_PACKED)
        hfp4_fp4_to_fp8_kernel<HFP4_DTYPE_UE8M0_PACKED><<<grid, 256, 0, s>>>(p);
    else hfp4_fp4_to_fp8_kernel<HFP4_DTYPE_UE8M0><<<grid, 256, 0, s>>>(p);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}
