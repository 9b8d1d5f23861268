/*
 * moe_gpu.cu - the MoE glue's kernels (hfp4.h, "MoE glue"; checks and CPU forms in moe.c):
 *   hfp4_moe_route_kernel          one CTA: per-expert counts and ranks (shared-memory atomics), the
 *                                  aligned segment starts (one warp's scan), the layout
 *   hfp4_moe_quantize_rows_kernel  a warp per routed row and 128 columns: amax, scale, FP8 codes
 *   hfp4_moe_combine_kernel        a thread per token and 8 columns: the weighted sum of its rows
 * All three are small next to the GEMMs they sit between; what they save is the dozens of framework
 * kernels (sort, scatter, quantization, gather, index_add) that did the same in torch.
 * Rows whose row_pos lies outside [0, layout_rows) are skipped: device data cannot be checked from
 * the host, and a bad entry must never become an out-of-bounds write.
 */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "../runtime/cuda_runtime.h"
#include "moe_internal.h"

namespace {

constexpr int kRouteThreads = 1024;

__device__ __forceinline__ int64_t load_id(const void *ids, int ids_int64, int64_t i) {
    return ids_int64 ? ((const int64_t *)ids)[i] : ((const int32_t *)ids)[i];
}

/* One CTA: counts[e] then the rank of each row inside its expert (row_pos holds the rank until the
 * starts are known), the starts of the aligned segments by a warp's scan, the layout. */
__global__ void __launch_bounds__(kRouteThreads) hfp4_moe_route_kernel(const void *ids, int ids_int64,
                                                                      int64_t routed_rows, int32_t num_experts,
                                                                      int32_t alignment, int32_t *row_pos,
                                                                      int32_t *layout, int64_t layout_rows) {
    extern __shared__ int32_t counts[]; /* [num_experts]: counts, then segment starts */
    for (int e = threadIdx.x; e < num_experts; e += blockDim.x) counts[e] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < routed_rows; i += blockDim.x) {
        const int64_t e = load_id(ids, ids_int64, i);
        row_pos[i] = e >= 0 && e < num_experts ? atomicAdd(&counts[e], 1) : -1;
    }
    __syncthreads();
    if (threadIdx.x < 32) { /* exclusive scan of the aligned counts: each lane a run of experts */
        const int lane = threadIdx.x, per = (num_experts + 31) / 32, e0 = lane * per;
        const int e1 = e0 + per < num_experts ? e0 + per : num_experts;
        int32_t sum = 0;
        for (int e = e0; e < e1; e++) sum += (counts[e] + alignment - 1) / alignment * alignment;
        int32_t incl = sum;
        for (int o = 1; o < 32; o *= 2) {
            const int32_t v = __shfl_up_sync(0xFFFFFFFFu, incl, o);
            if (lane >= o) incl += v;
        }
        int32_t start = incl - sum;
        for (int e = e0; e < e1; e++) {
            const int32_t aligned = (counts[e] + alignment - 1) / alignment * alignment;
            counts[e] = start;
            start += aligned;
        }
    }
    for (int64_t r = threadIdx.x; r < layout_rows; r += blockDim.x) layout[r] = -1;
    __syncthreads(); /* (orders the -1s before the ids below, and the starts before their reads) */
    for (int64_t i = threadIdx.x; i < routed_rows; i += blockDim.x) {
        const int32_t rank = row_pos[i];
        if (rank < 0) continue;
        const int32_t e = (int32_t)load_id(ids, ids_int64, i), p = counts[e] + rank;
        row_pos[i] = p;
        layout[p] = e;
    }
}

__device__ __forceinline__ float load_x(const void *x, int fp32, int64_t i) {
    return fp32 ? ((const float *)x)[i] : __bfloat162float(((const __nv_bfloat16 *)x)[i]);
}

/* max that keeps NaN, as torch.amax (fmaxf would drop it) */
__device__ __forceinline__ float max_nan(float a, float b) { return (b > a || b != b) ? b : a; }

/* A warp per (routed row, 128 columns): lane l quantizes columns 4l .. 4l + 3 of the chunk; a group
 * of gran_k columns is 32 (gran 128) or 8 (gran 32) lanes, reduced with shuffles. The scale and the
 * codes are hfp4_quantize_fp8_per_token's: amax floored at 1e-4, sf = amax / 448, x * (1 / sf),
 * rounded to nearest even (|x / sf| <= 448: saturation never applies). */
__global__ void hfp4_moe_quantize_rows_kernel(const void *x, int x_fp32, int64_t k, int64_t ldx, int32_t row_div,
                                              const int32_t *row_pos, int64_t routed_rows, int32_t gran_k,
                                              uint8_t *a, int64_t lda, float *sf, int64_t layout_rows) {
    const int64_t chunks = (k + 127) / 128;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (warp >= routed_rows * chunks) return;
    const int64_t i = warp / chunks, c0 = (warp % chunks) * 128 + 4 * lane;
    const int32_t p = row_pos[i];
    if (p < 0 || p >= layout_rows) return; /* (the whole warp: p is the same for every lane) */
    const int64_t xrow = (i / row_div) * ldx;
    float v[4], amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        v[j] = c0 + j < k ? load_x(x, x_fp32, xrow + c0 + j) : 0.0f;
        amax = max_nan(amax, fabsf(v[j]));
    }
    const int span = gran_k == 128 ? 32 : 8; /* lanes of one group */
    for (int o = span / 2; o > 0; o /= 2) amax = max_nan(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    if (amax < 1e-4f) amax = 1e-4f; /* (NaN compares false and stays NaN, as torch.clamp) */
    const float s = amax / 448.0f, inv = 1.0f / s;
    uint8_t *arow = a + (int64_t)p * lda;
#pragma unroll
    for (int j = 0; j < 4; j++)
        if (c0 + j < k) arow[c0 + j] = (uint8_t)__nv_cvt_float_to_fp8(v[j] * inv, __NV_SATFINITE, __NV_E4M3);
    if (lane % span == 0 && c0 < k) sf[(int64_t)p * ((k + gran_k - 1) / gran_k) + c0 / gran_k] = s;
}

/* A thread per (token, 8 columns): FMAs over the token's rows in order of j, as the CPU form. */
__global__ void hfp4_moe_combine_kernel(const __nv_bfloat16 *y, int64_t ldy, int64_t layout_rows, int64_t n,
                                        const int32_t *row_pos, const void *weights, int w_fp32, int64_t tokens,
                                        int32_t top_k, void *out, int out_fp32, int64_t ldo) {
    const int64_t col_groups = (n + 7) / 8;
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= tokens * col_groups) return;
    const int64_t t = idx / col_groups, c0 = (idx % col_groups) * 8;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int32_t j = 0; j < top_k; j++) {
        const int64_t r = t * top_k + j;
        const int32_t p = row_pos[r];
        if (p < 0 || p >= layout_rows) continue;
        const float w = w_fp32 ? ((const float *)weights)[r] : __bfloat162float(((const __nv_bfloat16 *)weights)[r]);
        const __nv_bfloat16 *yrow = y + (int64_t)p * ldy;
#pragma unroll
        for (int e = 0; e < 8; e++)
            if (c0 + e < n) acc[e] = __fmaf_rn(w, __bfloat162float(yrow[c0 + e]), acc[e]);
    }
#pragma unroll
    for (int e = 0; e < 8; e++) {
        if (c0 + e >= n) break;
        if (out_fp32) ((float *)out)[t * ldo + c0 + e] = acc[e];
        else ((__nv_bfloat16 *)out)[t * ldo + c0 + e] = __float2bfloat16_rn(acc[e]);
    }
}

} // namespace

extern "C" hfp4_status hfp4__moe_route_launch(const char *fn, const void *ids, int ids_int64, int64_t routed_rows,
                                              int32_t num_experts, int32_t alignment, int32_t *row_pos,
                                              int32_t *layout, int64_t layout_rows, hfp4_stream stream) {
    hfp4_current_device dev;
    HFP4_TRY(hfp4__require_sm90(fn, &dev));
    hfp4_moe_route_kernel<<<1, kRouteThreads, (size_t)num_experts * sizeof(int32_t),
                            reinterpret_cast<cudaStream_t>(stream)>>>(ids, ids_int64, routed_rows, num_experts,
                                                                      alignment, row_pos, layout, layout_rows);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}

extern "C" hfp4_status hfp4__moe_quantize_rows_launch(const char *fn, const void *x, hfp4_dtype x_dtype, int64_t k,
                                                      int64_t ldx, int32_t row_div, int64_t x_rows,
                                                      const int32_t *row_pos, int64_t routed_rows, int32_t gran_k,
                                                      uint8_t *a, int64_t lda, float *sf, int64_t layout_rows,
                                                      hfp4_stream stream) {
    (void)x_rows;
    hfp4_current_device dev;
    HFP4_TRY(hfp4__require_sm90(fn, &dev));
    const int64_t warps = routed_rows * ((k + 127) / 128), blocks = (warps + 7) / 8;
    HFP4_REQUIRE(blocks < ((int64_t)1 << 31), "%s: %lld rows x %lld columns need more than 2^31 blocks", fn,
                 (long long)routed_rows, (long long)k);
    hfp4_moe_quantize_rows_kernel<<<(unsigned)blocks, 256, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        x, x_dtype == HFP4_DTYPE_FP32, k, ldx, row_div, row_pos, routed_rows, gran_k, a, lda, sf, layout_rows);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}

extern "C" hfp4_status hfp4__moe_combine_launch(const char *fn, const void *y, int64_t ldy, int64_t layout_rows,
                                                int64_t n, const int32_t *row_pos, const void *weights,
                                                hfp4_dtype weights_dtype, int64_t tokens, int32_t top_k, void *out,
                                                hfp4_dtype out_dtype, int64_t ldo, hfp4_stream stream) {
    hfp4_current_device dev;
    HFP4_TRY(hfp4__require_sm90(fn, &dev));
    const int64_t threads = tokens * ((n + 7) / 8), blocks = (threads + 255) / 256;
    HFP4_REQUIRE(blocks < ((int64_t)1 << 31), "%s: %lld tokens x %lld columns need more than 2^31 blocks", fn,
                 (long long)tokens, (long long)n);
    hfp4_moe_combine_kernel<<<(unsigned)blocks, 256, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        (const __nv_bfloat16 *)y, ldy, layout_rows, n, row_pos, weights, weights_dtype == HFP4_DTYPE_FP32, tokens,
        top_k, out, out_dtype == HFP4_DTYPE_FP32, ldo);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}
