/*
 * fp8_fp8_gemv.cu - FP8 x FP8 for a few token rows (fp8_fp8_gemv.h): V4's dense FP8 layers at decode,
 * and (opt-in: faster only with a few live groups, bench/RESULTS.md v47) FP8 experts in DeepGEMM's
 * masked layout at decode.
 *
 * Why a second kernel: the tile kernel (fp8_fp8_gemm.cu) gives a CTA a 128-row tile of weights, so a
 * decode-sized call runs n / 128 CTAs (32 at n = 4096, 56 at n = 7168) on 132 SMs and streams its
 * weights at a fraction of the HBM rate: 1 x 7168 x 2048 took 13.2 us where its 14.7 MB need 3.5 at
 * the copy rate, level with cuBLASLt FP8 and behind cuBLAS BF16 on twice the bytes (10.7 us;
 * bench/RESULTS.md v43). Here each 16 weight rows have up to 8 warps that split their K (a CTA of 8
 * warps takes 16 to 128 rows: hfp4__sm90_fp8_gemv_warps), so n = 4096 at K = 4096 gives 256 CTAs and 2048
 * warps, each streaming 4 K-blocks with two in flight.
 *
 * A warp's unit is a 128-K block of its 16 rows: each lane loads 2 x 16 bytes of each of its two
 * rows (g and g + 8, g = lane / 4) straight from global memory into registers, and 2 x 16 bytes of
 * its token's activations (token g of each set of 8), then runs four mma.sync m16n8k32 e4m3 (weights
 * as the 16-row operand, tokens as the 8 columns). The mma's K order inside a block is not memory's:
 * lane t of a row holds bytes 16 t .. 16 t + 15 and 64 + 16 t .. of the block, and step (h, s) takes
 * words 2s and 2s + 1 of half h as the fragment's columns 4t.. and 16 + 4t..; the activations'
 * fragments are loaded the same way, so each product pairs the same K, and the 16 steps of the lanes
 * cover the block's 128 K once. So every load is 16 contiguous bytes (a row's 64 bytes per four
 * lanes), and no shared memory is needed until the end.
 *
 * Numerics are the tile kernel's: a block's 128 products accumulate in the tensor core (FP32
 * accumulator, fresh for each block), then one FFMA per sum promotes it with the token's activation
 * scale times the block's weight scale; at the end the partial sums of a row group's warps are added
 * in shared memory (its first warp's, then the others' in order) and its first warp stores D (+ C).
 * The masked form (hfp4_sm90_fp8_fp8_gemm_few_rows_masked_kernel) runs the same body on each live group's
 * operands, 8 of its rows a pass.
 */
#include "../../runtime/cuda_runtime.h"
#include "fp8_fp8_gemv.h"
#include "ptx.cuh"
#include "scales.cuh"

#include <cuda_bf16.h>
#include <stdint.h>

#define FV_WARPS HFP4_FP8_GEMV_WARPS /* warps a CTA: kw of them split the K-blocks of each 16 of its rows */
#define FV_ROWS HFP4_FP8_GEMV_ROWS   /* weight rows a row group: the mma's 16 */

typedef struct fv_params {
    const uint8_t *a, *b;
    int64_t lda, ldb; /* bytes */
    const void *a_scales, *b_scales;
    int64_t a_stride_mn, a_stride_k; /* units of a_dtype's element (packed UE8M0: words) */
    int64_t b_stride_mn, b_stride_k;
    int32_t a_dtype, b_dtype;
    void *d;
    const void *c; /* NULL, or C with D's dtype and ld */
    int64_t ldd;   /* elements */
    int32_t d_fp32;
    int32_t m, n, kblocks;
    int32_t kw; /* warps a row group (1, 2, 4 or 8): the CTA takes 16 x 8 / kw rows (hfp4__sm90_fp8_gemv_warps) */
    /* the masked layout (hfp4_sm90_fp8_fp8_gemm_few_rows_masked_kernel): G groups, group g's rows below
     * masked_m[g] (at most m) of A [G][m][k], D and C [G][m][n]; strides between groups */
    int32_t groups;
    const int32_t *masked_m;
    int64_t a_group, b_group;   /* bytes */
    int64_t as_group, bs_group; /* units of the scales' dtype (packed: words) */
    int64_t d_group;            /* elements of D (and C) */
} fv_params;

/* The activation scale of token row `row`, K-block kb (FP32, UE8M0 bytes, or UE8M0 packed 4 a word) */
static __device__ __forceinline__ float fv_a_scale(const fv_params &p, int64_t row, int64_t kb) {
    if (p.a_dtype == HFP4_DTYPE_FP32)
        return __ldg((const float *)p.a_scales + row * p.a_stride_mn + kb * p.a_stride_k);
    if (p.a_dtype == HFP4_DTYPE_UE8M0)
        return ue8m0_to_float(__ldg((const uint8_t *)p.a_scales + row * p.a_stride_mn + kb * p.a_stride_k));
    const uint32_t w = __ldg((const uint32_t *)p.a_scales + row * p.a_stride_mn + (kb >> 2) * p.a_stride_k);
    return ue8m0_to_float((w >> (8 * (kb & 3))) & 255u);
}

static __device__ __forceinline__ float fv_b_scale(const fv_params &p, int64_t nb, int64_t kb) {
    const int64_t i = nb * p.b_stride_mn + kb * p.b_stride_k;
    return p.b_dtype == HFP4_DTYPE_FP32 ? __ldg((const float *)p.b_scales + i)
                                        : ue8m0_to_float(__ldg((const uint8_t *)p.b_scales + i));
}

/* One K-block's operands in a lane's registers: its two rows' 32 bytes each, its token's 32 bytes in
 * each set of 8 tokens (zeros past n or m) */
template <int NT>
struct fv_block {
    uint4 w[2][2]; /* [row g, g + 8][half] */
    uint4 x[NT][2];
};

template <int NT>
static __device__ __forceinline__ void fv_load_block(fv_block<NT> &o, const fv_params &p, const uint8_t *w_row0,
                                                     const uint8_t *w_row1, bool live0, bool live1, int g, int t,
                                                     int64_t kb) {
    const int64_t k0 = kb * 128 + 16 * t;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        o.w[0][h] = live0 ? ldg_stream_16(w_row0 + k0 + 64 * h) : make_uint4(0, 0, 0, 0);
        o.w[1][h] = live1 ? ldg_stream_16(w_row1 + k0 + 64 * h) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int s = 0; s < NT; s++) {
        const int token = 8 * s + g;
#pragma unroll
        for (int h = 0; h < 2; h++)
            o.x[s][h] = token < p.m ? __ldg((const uint4 *)(p.a + token * p.lda + k0 + 64 * h)) : make_uint4(0, 0, 0, 0);
    }
}

/* The block's products into sum (fresh: the tensor core's accumulation stays within a block), then
 * promoted into total with each token's activation scale times the block's weight scale bs */
template <int NT>
static __device__ __forceinline__ void fv_compute_block(float (*total)[4], const fv_block<NT> &o, const fv_params &p,
                                                        int t, int64_t kb, float bs) {
#pragma unroll
    for (int s = 0; s < NT; s++) {
        float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mma_e4m3_m16n8k32(sum, o.w[0][h].x, o.w[1][h].x, o.w[0][h].y, o.w[1][h].y, o.x[s][h].x, o.x[s][h].y);
            mma_e4m3_m16n8k32(sum, o.w[0][h].z, o.w[1][h].z, o.w[0][h].w, o.w[1][h].w, o.x[s][h].z, o.x[s][h].w);
        }
        /* sums: [0] row g token 8s + 2t, [1] row g token + 1, [2], [3] row g + 8 */
        const int tok = 8 * s + 2 * t;
        const float f0 = tok < p.m ? fv_a_scale(p, tok, kb) * bs : 0.0f;
        const float f1 = tok + 1 < p.m ? fv_a_scale(p, tok + 1, kb) * bs : 0.0f;
        total[s][0] = fmaf(sum[0], f0, total[s][0]);
        total[s][1] = fmaf(sum[1], f1, total[s][1]);
        total[s][2] = fmaf(sum[2], f0, total[s][2]);
        total[s][3] = fmaf(sum[3], f1, total[s][3]);
    }
}

static __device__ __forceinline__ void fv_store(const fv_params &p, int64_t token, int64_t col, float v) {
    if (token >= p.m || col >= p.n) return;
    const int64_t i = token * p.ldd + col;
    if (p.d_fp32) {
        if (p.c) v += ((const float *)p.c)[i];
        ((float *)p.d)[i] = v;
    } else {
        if (p.c) v += __bfloat162float(((const __nv_bfloat16 *)p.c)[i]);
        ((__nv_bfloat16 *)p.d)[i] = __float2bfloat16_rn(v);
    }
}

/* A CTA's rows: 8 / kw row groups of 16 weight rows from group cta_group, kw warps a group, each over its
 * share of the K-blocks (warp w: group w / kw, share w % kw), for NT sets of 8 token rows (m <= 8 NT);
 * the group's first warp adds the others' sums (in shared memory) and stores D */
template <int NT>
static __device__ __forceinline__ void fv_cta_rows(const fv_params &p, int64_t cta_group) {
    __shared__ float4 partial[FV_WARPS][NT][32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int share = warp % p.kw;
    const int64_t row0 = (cta_group + warp / p.kw) * FV_ROWS;
    const bool live0 = row0 + g < p.n, live1 = row0 + g + 8 < p.n;
    const uint8_t *w_row0 = p.b + (row0 + g) * p.ldb, *w_row1 = p.b + (row0 + g + 8) * p.ldb;
    /* the warp's K-blocks [kb0, kb1): the group's split as evenly as whole blocks allow */
    const int64_t kb0 = (int64_t)share * p.kblocks / p.kw, kb1 = (int64_t)(share + 1) * p.kblocks / p.kw;
    const int64_t nb = row0 / 128; /* (16 divides 128: a group's rows share their weight-scale row) */
    float total[NT][4];
#pragma unroll
    for (int s = 0; s < NT; s++) total[s][0] = total[s][1] = total[s][2] = total[s][3] = 0.0f;
    if (kb0 < kb1 && row0 < p.n) {
        /* two blocks in flight: the next block's loads go out before this one's products */
        fv_block<NT> cur, next;
        fv_load_block<NT>(next, p, w_row0, w_row1, live0, live1, g, t, kb0);
        for (int64_t kb = kb0; kb < kb1; kb++) {
            cur = next;
            if (kb + 1 < kb1) fv_load_block<NT>(next, p, w_row0, w_row1, live0, live1, g, t, kb + 1);
            fv_compute_block<NT>(total, cur, p, t, kb, fv_b_scale(p, nb, kb));
        }
    }
    if (share > 0) {
#pragma unroll
        for (int s = 0; s < NT; s++)
            partial[warp][s][lane] = make_float4(total[s][0], total[s][1], total[s][2], total[s][3]);
    }
    __syncthreads();
    if (share != 0) return; /* (the group's first warp adds the others' sums, in order, and stores) */
#pragma unroll
    for (int s = 0; s < NT; s++) {
        for (int w = warp + 1; w < warp + p.kw; w++) {
            const float4 q = partial[w][s][lane];
            total[s][0] += q.x;
            total[s][1] += q.y;
            total[s][2] += q.z;
            total[s][3] += q.w;
        }
        const int64_t tok = 8 * s + 2 * t;
        fv_store(p, tok, row0 + g, total[s][0]);
        fv_store(p, tok + 1, row0 + g, total[s][1]);
        fv_store(p, tok, row0 + g + 8, total[s][2]);
        fv_store(p, tok + 1, row0 + g + 8, total[s][3]);
    }
}

/* Dense: CTA blockIdx.x takes row groups (8 / kw) blockIdx.x .. (fv_cta_rows) */
template <int NT>
__global__ void __launch_bounds__(FV_WARPS * 32, NT == 1 ? 3 : 2) hfp4_sm90_fp8_fp8_gemm_few_rows_kernel(const __grid_constant__ fv_params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    fv_cta_rows<NT>(p, (int64_t)blockIdx.x * (FV_WARPS / p.kw));
#else
    __trap(); /* built for another architecture: never launched there (the host checks the device) */
#endif
}

/* Masked (DeepGEMM's m_grouped_fp8_gemm_nt_masked at decode): every CTA lists the live groups
 * (masked_m > 0) in shared memory, then the persistent grid takes the (live group, CTA rows) units in
 * turn; a unit runs its group's rows 8 at a time (one pass at decode, where a group holds a few
 * rows) through fv_cta_rows on the group's operands. */
#define FV_MAX_GROUPS HFP4_FP8_GEMV_MAX_GROUPS
__global__ void __launch_bounds__(FV_WARPS * 32, 2) hfp4_sm90_fp8_fp8_gemm_few_rows_masked_kernel(const __grid_constant__ fv_params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    __shared__ int32_t live[FV_MAX_GROUPS];
    __shared__ int32_t warp_live[FV_WARPS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    /* the live groups in order, 256 a round (one load a thread: at G = 256 one L2 round trip): each
     * warp's ballot, then the warps' counts before it */
    int32_t live_count = 0;
    for (int32_t base = 0; base < p.groups; base += FV_WARPS * 32) {
        const int32_t gi = base + warp * 32 + lane;
        const bool on = gi < p.groups && __ldg(p.masked_m + gi) > 0;
        const uint32_t mask = __ballot_sync(0xFFFFFFFFu, on);
        if (lane == 0) warp_live[warp] = __popc(mask);
        __syncthreads();
        int32_t before = live_count;
        for (int w = 0; w < warp; w++) before += warp_live[w];
        if (on) live[before + __popc(mask & ((1u << lane) - 1u))] = gi;
        for (int w = 0; w < FV_WARPS; w++) live_count += warp_live[w];
        __syncthreads(); /* (live complete; warp_live free for the next round) */
    }
    const int64_t cta_groups = FV_WARPS / p.kw, row_groups = (p.n + FV_ROWS - 1) / FV_ROWS;
    const int64_t blocks = (row_groups + cta_groups - 1) / cta_groups, units = (int64_t)live_count * blocks;
    const int a_esz = p.a_dtype == HFP4_DTYPE_UE8M0 ? 1 : 4, b_esz = p.b_dtype == HFP4_DTYPE_UE8M0 ? 1 : 4;
    const int d_esz = p.d_fp32 ? 4 : 2;
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        const int32_t grp = live[u / blocks];
        const int64_t cta_group = (u % blocks) * cta_groups;
        const int32_t rows = min(__ldg(p.masked_m + grp), p.m);
        fv_params q = p; /* the group's operands */
        q.b = p.b + grp * p.b_group;
        q.b_scales = (const uint8_t *)p.b_scales + grp * p.bs_group * b_esz;
        for (int32_t t0 = 0; t0 < rows; t0 += 8) {
            q.m = min(8, rows - t0);
            q.a = p.a + grp * p.a_group + t0 * p.lda;
            q.a_scales = (const uint8_t *)p.a_scales + (grp * p.as_group + t0 * p.a_stride_mn) * a_esz;
            q.d = (uint8_t *)p.d + (grp * p.d_group + t0 * p.ldd) * d_esz;
            q.c = p.c ? (const uint8_t *)p.c + (grp * p.d_group + t0 * p.ldd) * d_esz : NULL;
            fv_cta_rows<1>(q, cta_group);
            __syncthreads(); /* (the sums' slots are written again by the next pass) */
        }
    }
#else
    __trap(); /* built for another architecture: never launched there (the host checks the device) */
#endif
}

hfp4_status hfp4__sm90_fp8_gemv(const char *fn, const hfp4_gemm_problem *pr, int warps_per_rows, int num_sms,
                                cudaStream_t stream) {
    fv_params k;
    k.a = (const uint8_t *)pr->a.data;
    k.b = (const uint8_t *)pr->b.data;
    k.lda = pr->a.ld;
    k.ldb = pr->b.ld;
    k.a_scales = pr->a.scales.data;
    k.b_scales = pr->b.scales.data;
    k.a_stride_mn = pr->a.scales.stride_mn;
    k.a_stride_k = pr->a.scales.stride_k;
    k.b_stride_mn = pr->b.scales.stride_mn;
    k.b_stride_k = pr->b.scales.stride_k;
    k.a_dtype = (int32_t)pr->a.scales.dtype;
    k.b_dtype = (int32_t)pr->b.scales.dtype;
    k.d = pr->d.data;
    k.c = pr->d.c;
    k.ldd = pr->d.ld;
    k.d_fp32 = pr->d.dtype == HFP4_DTYPE_FP32;
    k.m = (int32_t)pr->m;
    k.n = (int32_t)pr->n;
    k.kblocks = (int32_t)(pr->k / 128);
    const int masked = pr->grouping == HFP4_GROUPING_MASKED;
    k.groups = masked ? pr->num_groups : 1;
    k.masked_m = masked ? pr->layout : NULL;
    k.a_group = masked ? pr->a.stride_group : 0;
    k.b_group = masked ? pr->b.stride_group : 0;
    k.as_group = masked ? pr->a.scales.stride_group : 0;
    k.bs_group = masked ? pr->b.scales.stride_group : 0;
    k.d_group = masked ? pr->d.stride_group : 0;
    k.kw = warps_per_rows; /* (hfp4__sm90_fp8_gemv_warps, or forced: sm90_fp8_weights_plan.c) */
    const int64_t cta_rows = (int64_t)FV_ROWS * (FV_WARPS / k.kw);
    const unsigned grid = (unsigned)((pr->n + cta_rows - 1) / cta_rows);
    if (masked) {
        /* persistent: 2 CTAs an SM (128 registers: at 80 it spilled), or fewer when all units are fewer */
        const int64_t all = (int64_t)grid * pr->num_groups, cap = 2 * (int64_t)num_sms;
        hfp4_sm90_fp8_fp8_gemm_few_rows_masked_kernel<<<(unsigned)(all < cap ? all : cap), FV_WARPS * 32, 0, stream>>>(k);
    } else if (pr->m <= 8) hfp4_sm90_fp8_fp8_gemm_few_rows_kernel<1><<<grid, FV_WARPS * 32, 0, stream>>>(k);
    else hfp4_sm90_fp8_fp8_gemm_few_rows_kernel<2><<<grid, FV_WARPS * 32, 0, stream>>>(k);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}
