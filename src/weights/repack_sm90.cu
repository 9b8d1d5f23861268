/*
 * repack_sm90.cu - GPU repack of FP4 weights into the SM90 layout (sm90_layout.h); byte-identical
 * to hfp4_ref_repack_sm90. One thread writes one 16-byte weight chunk; one thread writes the four
 * scales of one (row, 128-K chunk).
 */
#include "../runtime/cuda_runtime.h"
#include "repack_sm90.h"

struct repack_args {
    const uint8_t *src;
    int64_t ld, src_group_stride;
    const void *scales;
    int32_t scale_dtype;
    int64_t s_mn, s_k, s_group;
    int64_t n, k;
    hfp4_sm90_geometry geo;
    uint8_t *dst;
};

static __device__ __forceinline__ uint32_t code_at(const repack_args &a, int64_t g, int64_t row, int64_t col) {
    if (row >= a.n || col >= a.k) return 0;
    const uint8_t byte = a.src[g * a.src_group_stride + row * a.ld + col / 2];
    uint32_t c = (col & 1) ? (byte >> 4) : (byte & 15);
    return c == 8 ? 0 : c; /* canonical +0, as the CPU repack */
}

__global__ void hfp4_sm90_repack_weights_kernel(const __grid_constant__ repack_args a) {
    const int64_t total = a.geo.groups * a.geo.tiles * a.geo.pairs * 128;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (int64_t)gridDim.x * blockDim.x) {
        const int th = (int)(idx % 128);
        const int64_t pair = (idx / 128) % a.geo.pairs;
        const int64_t tile = (idx / 128 / a.geo.pairs) % a.geo.tiles;
        const int64_t g = idx / 128 / a.geo.pairs / a.geo.tiles;
        const int w = th / 32, gr = (th % 32) / 4, t = th % 4;
        const int64_t r0 = tile * 64 + w * 16 + gr, r1 = r0 + 8;
        uint32_t words[4];
        for (int s = 0; s < 2; s++)
            for (int half = 0; half < 2; half++) {
                const int64_t kb = pair * 64 + s * 32 + half * 16 + 4 * t;
                uint32_t word = 0;
                for (int j = 0; j < 4; j++) { /* sm90_layout.h: magnitudes by row, signs pre-placed */
                    const uint32_t c0 = code_at(a, g, r0, kb + j), c1 = code_at(a, g, r1, kb + j);
                    word |= (c0 & 7) << (4 * j) | (c0 >> 3) << (8 * j + 7);
                    word |= (c1 & 7) << (16 + 4 * j) | (c1 >> 3) << (8 * j + 3);
                }
                words[s * 2 + half] = word;
            }
        *(uint4 *)(a.dst + idx * 16) = make_uint4(words[0], words[1], words[2], words[3]);
    }
}

static __device__ __forceinline__ uint32_t src_scale_bits(const repack_args &a, int64_t g, int64_t row, int64_t j) {
    const int64_t base = g * a.s_group + row * a.s_mn;
    if (a.scale_dtype == HFP4_DTYPE_FP32) return __float_as_uint(((const float *)a.scales)[base + j * a.s_k]);
    uint32_t e;
    if (a.scale_dtype == HFP4_DTYPE_UE8M0) e = ((const uint8_t *)a.scales)[base + j * a.s_k];
    else e = (((const uint32_t *)a.scales)[base + (j >> 2) * a.s_k] >> (8 * (j & 3))) & 0xFF;
    return e; /* a UE8M0 byte */
}

/* FP32 storage: one warp per (group, tile, chunk); lane l handles rows l and l + 32 of the tile. */
__global__ void hfp4_sm90_repack_scales_fp32_kernel(const __grid_constant__ repack_args a) {
    const int64_t total = a.geo.groups * a.geo.tiles * a.geo.chunks;
    const int lane = threadIdx.x % 32;
    const int64_t kgroups = a.k / 32;
    for (int64_t idx = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x / 32) {
        const int64_t chunk = idx % a.geo.chunks;
        const int64_t tile = (idx / a.geo.chunks) % a.geo.tiles;
        const int64_t g = idx / a.geo.chunks / a.geo.tiles;
        uint8_t *sdst = a.dst + a.geo.scale_offset + g * a.geo.scale_bytes_per_group;
        {
            for (int h = 0; h < 2; h++) {
                const int r = lane + 32 * h;
                const int64_t row = tile * 64 + r;
                float v[4];
                for (int j = 0; j < 4; j++) {
                    const int64_t jj = chunk * 4 + j;
                    v[j] = 1.0f;
                    if (row < a.n && jj < kgroups) {
                        const uint32_t bits = src_scale_bits(a, g, row, jj);
                        if (a.scale_dtype == HFP4_DTYPE_FP32) v[j] = __uint_as_float(bits);
                        else v[j] = bits == 0     ? __uint_as_float(0x00400000u)
                                    : bits == 255 ? __uint_as_float(0x7FC00000u) /* UE8M0 NaN stays NaN */
                                                  : __uint_as_float(bits << 23);
                    }
                }
                *(float4 *)(sdst + ((tile * a.geo.chunks + chunk) * 64 + r) * 16) = make_float4(v[0], v[1], v[2], v[3]);
            }
            if (lane == 0) a.dst[a.geo.mode_offset + idx] = 1;
        }
    }
}

/* Whether the 32 codes of (row, 32-group jj) hold a non-zero magnitude. */
static __device__ bool group_nonzero(const repack_args &a, int64_t g, int64_t row, int64_t jj) {
    for (int kk = 0; kk < 32; kk++)
        if ((code_at(a, g, row, jj * 32 + kk) & 7) != 0) return true;
    return false;
}

/* UE8M0 storage: one warp per (group, tile); lane l handles rows l and l + 32. A first pass over
 * the whole K finds each row's base (its largest non-zero group's exponent when every non-zero
 * group is within HFP4_SM90_FOLD_SPAN binades of it, as the host repack decides), the second
 * writes every chunk's words and mode. */
__global__ void hfp4_sm90_repack_scales_kernel(const __grid_constant__ repack_args a) {
    const int64_t total = a.geo.groups * a.geo.tiles;
    const int lane = threadIdx.x % 32;
    const int64_t kgroups = a.k / 32;
    for (int64_t tidx = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; tidx < total;
         tidx += (int64_t)gridDim.x * blockDim.x / 32) {
        const int64_t tile = tidx % a.geo.tiles;
        const int64_t g = tidx / a.geo.tiles;
        uint8_t *sdst = a.dst + a.geo.scale_offset + g * a.geo.scale_bytes_per_group;
        int row_base[2], one_base = 1; /* every row of the tile keeps one e_max over all of K */
        for (int h = 0; h < 2; h++) {
            const int64_t row = tile * 64 + lane + 32 * h;
            int lo = 256, hi = -1, nan = 0;
            for (int64_t jj = 0; row < a.n && jj < kgroups; jj++) {
                const int ej = (int)src_scale_bits(a, g, row, jj);
                if (!group_nonzero(a, g, row, jj)) continue;
                nan |= ej == 255;
                lo = ej < lo ? ej : lo;
                hi = ej > hi ? ej : hi;
            }
            row_base[h] = !nan && hi >= 0 && hi - lo <= HFP4_SM90_FOLD_SPAN ? hi : -1;
            one_base &= row_base[h] >= 0 || hi < 0; /* an all-zero row keeps 127 in every chunk */
        }
        one_base = __all_sync(0xFFFFFFFFu, one_base);
        for (int64_t chunk = 0; chunk < a.geo.chunks; chunk++) {
            const int64_t idx = tidx * a.geo.chunks + chunk; /* (group, tile, chunk) */
            uint32_t e[2][4], nz[2][4];
            int emax[2], ok = 1;
            for (int h = 0; h < 2; h++) {
                const int64_t row = tile * 64 + lane + 32 * h;
                emax[h] = -1;
                for (int j = 0; j < 4; j++) {
                    const int64_t jj = chunk * 4 + j;
                    e[h][j] = 127;
                    nz[h][j] = 0;
                    if (row >= a.n || jj >= kgroups) continue;
                    e[h][j] = src_scale_bits(a, g, row, jj);
                    for (int kk = 0; kk < 32 && !nz[h][j]; kk++) nz[h][j] = (code_at(a, g, row, jj * 32 + kk) & 7) != 0;
                    if (nz[h][j] && (int)e[h][j] > emax[h]) emax[h] = (int)e[h][j];
                }
                for (int j = 0; j < 4; j++) {
                    if (nz[h][j] && emax[h] - (int)e[h][j] > HFP4_SM90_FOLD_SPAN) ok = 0;
                    /* the host repack rejects the UE8M0 NaN (255); here it cannot, so the chunk keeps
                     * per-32 scales, which the kernel decodes to NaN: visible, never a finite value */
                    if (e[h][j] == 255 && row < a.n && chunk * 4 + j < kgroups) ok = 0;
                }
            }
            const int fast = __all_sync(0xFFFFFFFFu, ok);
            for (int h = 0; h < 2; h++) {
                uint32_t word = 0;
                if (fast) {
                    const int base = row_base[h] >= 0 ? row_base[h] : emax[h] < 0 ? 127 : emax[h];
                    for (int j = 0; j < 4; j++) word |= (nz[h][j] ? (uint32_t)((int)e[h][j] - base + 12) : 12u) << (4 * j);
                    word |= (uint32_t)base << 16;
                } else {
                    for (int j = 0; j < 4; j++) word |= e[h][j] << (8 * j);
                }
                *(uint32_t *)(sdst + ((tile * a.geo.chunks + chunk) * 64 + lane + 32 * h) * 4) = word;
            }
            if (lane == 0)
                a.dst[a.geo.mode_offset + idx] = fast ? (one_base ? HFP4_SM90_MODE_ONE_BASE : 0) : HFP4_SM90_MODE_PER32;
        }
    }
}

extern "C" hfp4_status hfp4_repack_sm90(const hfp4_matrix *w, int32_t num_groups, hfp4_dtype scale_dtype, void *dst,
                                        size_t dst_bytes, hfp4_matrix *out, hfp4_stream stream) {
    const char *fn = "hfp4_repack_sm90";
    hfp4_sm90_geometry geo;
    HFP4_TRY(hfp4__sm90_check_repack_args(fn, w, num_groups, scale_dtype, dst, dst_bytes, out, &geo));
    /* NOTE: FP32 -> UE8M0 would need every value checked for being a power of two, which the GPU
     * cannot report without a host read; refusing keeps precision loss impossible. */
    HFP4_REQUIRE(!(w->scales.dtype == HFP4_DTYPE_FP32 && scale_dtype == HFP4_DTYPE_UE8M0),
                 "%s: FP32 scales -> UE8M0 storage is not done on the GPU (it cannot prove the scales are powers of "
                 "two); use scale_dtype fp32, or hfp4_ref_repack_sm90 on the host",
                 fn);
    /* (a contract rule of this call, include/hfp4.h: the 16-byte stores would fault on the device) */
    HFP4_CHECK_ARG(((uintptr_t)dst) % 16 == 0, "%s: dst = %p must be 16-byte aligned", fn, dst);
    hfp4_current_device dev;
    HFP4_TRY(hfp4__current_device(fn, &dev));
    repack_args a;
    a.src = (const uint8_t *)w->data;
    a.ld = w->ld;
    a.src_group_stride = w->stride_group;
    a.scales = w->scales.data;
    a.scale_dtype = (int32_t)w->scales.dtype;
    a.s_mn = w->scales.stride_mn;
    a.s_k = w->scales.stride_k;
    a.s_group = w->scales.stride_group;
    a.n = w->rows;
    a.k = w->cols;
    a.geo = geo;
    a.dst = (uint8_t *)dst;
    cudaStream_t s = (cudaStream_t)stream;
    const int blocks = dev.num_sms * 8;
    hfp4_sm90_repack_weights_kernel<<<blocks, 256, 0, s>>>(a);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    if (geo.scale_fp32) hfp4_sm90_repack_scales_fp32_kernel<<<blocks, 256, 0, s>>>(a);
    else hfp4_sm90_repack_scales_kernel<<<blocks, 256, 0, s>>>(a);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    /* the alignment gaps are zero, as on the CPU */
    if (geo.scale_offset > geo.weight_bytes)
        HFP4_CUDA_TRY(fn, cudaMemsetAsync((uint8_t *)dst + geo.weight_bytes, 0, (size_t)(geo.scale_offset - geo.weight_bytes), s));
    const int64_t scale_end = geo.scale_offset + geo.groups * geo.scale_bytes_per_group;
    if (geo.mode_offset > scale_end)
        HFP4_CUDA_TRY(fn, cudaMemsetAsync((uint8_t *)dst + scale_end, 0, (size_t)(geo.mode_offset - scale_end), s));
    hfp4__sm90_describe(&geo, dst, out);
    return HFP4_OK;
}
