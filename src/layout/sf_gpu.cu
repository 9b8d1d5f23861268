/*
 * sf_gpu.cu - CUDA kernels of the SF layout toolkit and hfp4__sf_execute_gpu, which launches the
 * one a plan needs. Output is byte-identical to sf_cpu.c: both call the per-element rules of
 * sf_common.h, and every output word (padding included) is written.
 *
 * Kernels (names carry DeepGEMM's substrings, which its benchmarks look for; none has "gemm_"):
 *   hfp4_sf_transpose_fp32_kernel                     MN-major TMA-aligned copy of 4-byte scales
 *   hfp4_sf_transpose_and_pack_fp32_into_ue8m0_kernel FP32 -> packed UE8M0, MN-major (broadcast, psum)
 *   hfp4_sf_k_grouped_pack_fp32_into_ue8m0_kernel     FP32 -> K-grouped packed UE8M0
 *   hfp4_sf_utccp_permute_kernel                      the SM100 UTCCP row permutation
 * Memory traffic dominates. The MN-major kernels stage tiles in shared memory so that both the
 * loads (along the input's contiguous axis) and the stores (along MN) are coalesced 16-byte
 * accesses whenever the strides and pointers allow, else 4-byte ones (measured on an H200 for
 * 256 x 4096 x 128 FP32 K-major scales: pack 81 %, FP32 relayout 78 % of a device-to-device copy;
 * a tile-free variant with 4 or 8 rows per thread reached 77 % / 34-49 %). The K-grouped packer
 * reads and writes along MN directly, since its input is MN-major already.
 */
#include <stdint.h>

#include "../runtime/cuda_runtime.h"
#include "sf_internal.h"

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1 << 20;

/* How a block of the input is read. */
enum LoadMode : int {
    kLoadScalarK = 0,  /* 4-byte loads, K fastest (stride_k <= stride_mn)             */
    kLoadScalarMN = 1, /* 4-byte loads, MN fastest                                    */
    kLoadVecK = 2,     /* 16-byte loads of 4 K-consecutive values (K-major input)     */
    kLoadVecMN = 3     /* 16-byte loads of 4 MN-consecutive values (MN-major input)   */
};

struct InDesc {
    const uint32_t *data;
    int64_t sg, smn, sk; /* element strides                                          */
    int64_t rows, sf_k;  /* input rows and K columns                                 */
};

struct RowMap {
    int64_t mn;            /* output rows that exist (< mn); T = align(mn, 4) rows are written */
    int64_t t;             /* align(mn, 4)                                               */
    int32_t gran_mn;       /* output rows per input row                                  */
    const int32_t *psum;   /* NULL, or psum ends                                         */
    int32_t psum_groups, psum_alignment;
};

struct Flags {
    int32_t *error_flag; /* set to 1 on an inexact UE8M0 value unless round_up, and on a
                            non-positive or non-finite one in any case (sf_common.h) */
    int round_up;
};

/* what the CPU form rejects: any inexact value without round_up; NaN, Inf and values <= 0 always
 * (round_up only rounds finite positive values) */
__device__ __forceinline__ void report_inexact(int inexact, const Flags &f) {
    const int bad = (inexact & HFP4__SF_INVALID) || (inexact && !f.round_up);
    if (bad && f.error_flag != nullptr) *f.error_flag = 1;
}

__device__ __forceinline__ void store4(uint32_t *p, uint32_t a, uint32_t b, uint32_t c, uint32_t d, bool vec) {
    if (vec) {
        *reinterpret_cast<uint4 *>(p) = make_uint4(a, b, c, d);
    } else {
        p[0] = a, p[1] = b, p[2] = c, p[3] = d;
    }
}

__device__ __forceinline__ void store4(uint32_t *p, const uint32_t v[4], bool vec) {
    store4(p, v[0], v[1], v[2], v[3], vec);
}

/* ---- MN-major layouts through shared-memory tiles --------------------------------------------- */

/* A block stages a tile of kTileRows rows x kTileCols K columns of raw 32-bit values: the loads
 * run along the input's contiguous axis (128-byte lines per warp), the stores along MN (each warp
 * writes 512 contiguous bytes of one output column). Quads of rows are XOR-swizzled by K so that
 * both the 4-byte writes of K-major loads and the 16-byte reads of the stores are free of bank
 * conflicts. */
constexpr int kTileRows = 128, kTileCols = 32;

struct TileSmem {
    uint32_t v[kTileCols][kTileRows];
    int64_t roff[kTileRows]; /* input offset of each tile row                     */
    int ok[kTileRows];       /* row is read (< mn, inside a psum group)           */
};

/* Position of (K column k, tile row r) within s.v[k]. */
__device__ __forceinline__ int swz(int k, int r) { return ((((r >> 2) ^ (k >> 2)) & 31) << 2) | (r & 3); }

/* ROWMAP: rows may be broadcast (gran_mn > 1) or filtered by psum. Without it no 64-bit division
 * is compiled in, which keeps the kernels free of call frames and spills. */
template <int MODE, bool ROWMAP>
__device__ __forceinline__ void load_tile(TileSmem &s, const InDesc &in, const RowMap &map, int64_t g, int64_t r0,
                                          int64_t j0) {
    for (int i = threadIdx.x; i < kTileRows; i += kThreads) {
        const int64_t row = r0 + i;
        int ok = row < map.mn;
        if (ROWMAP && ok && map.psum != nullptr)
            ok = hfp4__sf_psum_row_valid(map.psum, map.psum_groups, map.psum_alignment, row);
        s.ok[i] = ok;
        s.roff[i] = (ROWMAP ? row / map.gran_mn : row) * in.smn;
    }
    __syncthreads();
    const uint32_t *base = in.data + g * in.sg;
    constexpr int kIters = kTileRows * kTileCols / 4 / kThreads;
    if (MODE == kLoadVecK) {
        /* item = (row, quad of 4 K columns); all loads issued before the first smem write */
        uint4 w[kIters];
#pragma unroll
        for (int it = 0; it < kIters; it++) {
            const int idx = threadIdx.x + it * kThreads, lr = idx >> 3, q = idx & 7;
            const int64_t j = j0 + 4 * q;
            w[it] = make_uint4(0, 0, 0, 0);
            if (s.ok[lr]) {
                const uint32_t *p = base + s.roff[lr] + j;
                if (j + 3 < in.sf_k) {
                    w[it] = __ldg(reinterpret_cast<const uint4 *>(p));
                } else {
                    w[it].x = j < in.sf_k ? __ldg(p) : 0u;
                    w[it].y = j + 1 < in.sf_k ? __ldg(p + 1) : 0u;
                    w[it].z = j + 2 < in.sf_k ? __ldg(p + 2) : 0u;
                }
            }
        }
#pragma unroll
        for (int it = 0; it < kIters; it++) {
            const int idx = threadIdx.x + it * kThreads, lr = idx >> 3, k = 4 * (idx & 7);
            s.v[k][swz(k, lr)] = w[it].x;
            s.v[k + 1][swz(k + 1, lr)] = w[it].y;
            s.v[k + 2][swz(k + 2, lr)] = w[it].z;
            s.v[k + 3][swz(k + 3, lr)] = w[it].w;
        }
    } else if (MODE == kLoadVecMN) {
        /* item = (K column, quad of 4 rows); only with gran_mn = 1, so the rows are contiguous */
        uint4 w[kIters];
#pragma unroll
        for (int it = 0; it < kIters; it++) {
            const int idx = threadIdx.x + it * kThreads, q = idx & 31, k = idx >> 5;
            const int64_t j = j0 + k;
            w[it] = make_uint4(0, 0, 0, 0);
            if (j < in.sf_k) {
                const int a = s.ok[4 * q], b = s.ok[4 * q + 1], c = s.ok[4 * q + 2], d = s.ok[4 * q + 3];
                const uint32_t *p = base + r0 + 4 * q + j * in.sk;
                if (a && b && c && d) {
                    w[it] = __ldg(reinterpret_cast<const uint4 *>(p));
                } else {
                    w[it].x = a ? __ldg(p) : 0u;
                    w[it].y = b ? __ldg(p + 1) : 0u;
                    w[it].z = c ? __ldg(p + 2) : 0u;
                    w[it].w = d ? __ldg(p + 3) : 0u;
                }
            }
        }
#pragma unroll
        for (int it = 0; it < kIters; it++) {
            const int idx = threadIdx.x + it * kThreads, q = idx & 31, k = idx >> 5;
            *reinterpret_cast<uint4 *>(&s.v[k][swz(k, 4 * q)]) = w[it];
        }
    } else {
        for (int idx = threadIdx.x; idx < kTileRows * kTileCols; idx += kThreads) {
            int lr, k;
            if (MODE == kLoadScalarK) lr = idx >> 5, k = idx & 31;
            else lr = idx & (kTileRows - 1), k = idx >> 7;
            const int64_t j = j0 + k;
            s.v[k][swz(k, lr)] = s.ok[lr] && j < in.sf_k ? __ldg(base + s.roff[lr] + j * in.sk) : 0u;
        }
    }
    __syncthreads();
}

template <int MODE>
__global__ void __launch_bounds__(kThreads)
    hfp4_sf_transpose_fp32_kernel(InDesc in, RowMap map, int64_t groups, uint32_t *out, int vec_store) {
    /* the copy never broadcasts rows nor uses psum */
    __shared__ TileSmem s;
    const int64_t r0 = (int64_t)blockIdx.x * kTileRows, plane = map.t * in.sf_k;
    const int64_t ktiles = (in.sf_k + kTileCols - 1) / kTileCols;
    for (int64_t g = blockIdx.z; g < groups; g += gridDim.z)
        for (int64_t tk = blockIdx.y; tk < ktiles; tk += gridDim.y) {
            const int64_t j0 = tk * kTileCols;
            load_tile<MODE, false>(s, in, map, g, r0, j0);
#pragma unroll
            for (int it = 0; it < kTileRows * kTileCols / 4 / kThreads; it++) {
                const int idx = threadIdx.x + it * kThreads, q = idx & 31, k = idx >> 5;
                const int64_t j = j0 + k, r = r0 + 4 * q;
                if (j >= in.sf_k || r >= map.t) continue;
                const uint4 w = *reinterpret_cast<const uint4 *>(&s.v[k][swz(k, 4 * q)]);
                store4(out + g * plane + j * map.t + r, w.x, w.y, w.z, w.w, vec_store);
            }
            __syncthreads();
        }
}

template <int MODE, bool ROWMAP>
__global__ void __launch_bounds__(kThreads)
    hfp4_sf_transpose_and_pack_fp32_into_ue8m0_kernel(InDesc in, RowMap map, int64_t groups, uint32_t *out,
                                                      int vec_store, Flags flags) {
    __shared__ TileSmem s;
    const int64_t r0 = (int64_t)blockIdx.x * kTileRows, words = (in.sf_k + 3) / 4, plane = map.t * words;
    const int64_t ktiles = (in.sf_k + kTileCols - 1) / kTileCols;
    int inexact = 0;
    for (int64_t g = blockIdx.z; g < groups; g += gridDim.z)
        for (int64_t tk = blockIdx.y; tk < ktiles; tk += gridDim.y) {
            const int64_t j0 = tk * kTileCols;
            load_tile<MODE, ROWMAP>(s, in, map, g, r0, j0);
            /* item = (word of 4 K columns, quad of 4 rows): 8 x 32 = one per thread */
            const int q = threadIdx.x & 31, pw = threadIdx.x >> 5;
            const int64_t p = j0 / 4 + pw, r = r0 + 4 * q;
            if (p < words && r < map.t) {
                const int cnt = (int)min((int64_t)4, in.sf_k - 4 * p);
                uint4 c[4];
#pragma unroll
                for (int b = 0; b < 4; b++) c[b] = *reinterpret_cast<const uint4 *>(&s.v[4 * pw + b][swz(4 * pw + b, 4 * q)]);
                const uint32_t r0v[4] = {c[0].x, c[1].x, c[2].x, c[3].x}, r1v[4] = {c[0].y, c[1].y, c[2].y, c[3].y};
                const uint32_t r2v[4] = {c[0].z, c[1].z, c[2].z, c[3].z}, r3v[4] = {c[0].w, c[1].w, c[2].w, c[3].w};
                /* rows that are not read (padding, psum gaps) are zero words, not packed zeros */
                const uint32_t w0 = s.ok[4 * q] ? hfp4__sf_pack4(r0v, cnt, &inexact) : 0u;
                const uint32_t w1 = s.ok[4 * q + 1] ? hfp4__sf_pack4(r1v, cnt, &inexact) : 0u;
                const uint32_t w2 = s.ok[4 * q + 2] ? hfp4__sf_pack4(r2v, cnt, &inexact) : 0u;
                const uint32_t w3 = s.ok[4 * q + 3] ? hfp4__sf_pack4(r3v, cnt, &inexact) : 0u;
                store4(out + g * plane + p * map.t + r, w0, w1, w2, w3, vec_store);
            }
            __syncthreads();
        }
    report_inexact(inexact, flags);
}

/* ---- K-grouped packing ------------------------------------------------------------------------ */

struct KGroups {
    const int32_t *layout;
    int32_t num_groups, gran_k, k_alignment, use_psum;
};

constexpr int kKgCols = kThreads * 4; /* output columns per block step */

/* Finds the input rows of packed output row q (warp 0, 32 groups per step with warp scans):
 * *row0 = first input row, *count = rows (0..4); count < 0 when q lies past every group. */
__device__ void k_group_lookup(const KGroups &kg, int64_t q, int64_t *row0, int *count) {
    const int lane = threadIdx.x & 31;
    int64_t rows_before = 0, packed_before = 0;
    for (int32_t base = 0; base < kg.num_groups; base += 32) {
        const int32_t g = base + lane;
        int64_t n = 0;
        if (g < kg.num_groups) {
            int64_t prev = g > 0 ? kg.layout[g - 1] : 0;
            n = (hfp4__sf_k_group_size(kg.use_psum, kg.layout[g], prev, kg.k_alignment) + kg.gran_k - 1) / kg.gran_k;
        }
        int64_t p = (n + 3) / 4, n_incl = n, p_incl = p;
        for (int d = 1; d < 32; d *= 2) {
            int64_t a = __shfl_up_sync(0xffffffffu, n_incl, d), b = __shfl_up_sync(0xffffffffu, p_incl, d);
            if (lane >= d) n_incl += a, p_incl += b;
        }
        unsigned hit = __ballot_sync(0xffffffffu, g < kg.num_groups && packed_before + p_incl > q);
        if (hit) {
            const int owner = __ffs(hit) - 1;
            int64_t n_o = __shfl_sync(0xffffffffu, n, owner), p_o = __shfl_sync(0xffffffffu, p, owner);
            int64_t n_start = __shfl_sync(0xffffffffu, n_incl, owner) - n_o;
            int64_t p_start = __shfl_sync(0xffffffffu, p_incl, owner) - p_o;
            int64_t within = q - (packed_before + p_start);
            *row0 = rows_before + n_start + 4 * within;
            *count = (int)min((int64_t)4, n_o - 4 * within);
            return;
        }
        rows_before += __shfl_sync(0xffffffffu, n_incl, 31);
        packed_before += __shfl_sync(0xffffffffu, p_incl, 31);
    }
    *row0 = 0;
    *count = -1;
}

__global__ void __launch_bounds__(kThreads)
    hfp4_sf_k_grouped_pack_fp32_into_ue8m0_kernel(InDesc in, KGroups kg, int64_t packed_rows, uint32_t *out,
                                                  int vec_load, int vec_store, Flags flags) {
    __shared__ int64_t s_row0;
    __shared__ int s_count;
    const int64_t mn = in.rows, col_steps = (mn + kKgCols - 1) / kKgCols;
    int inexact = 0, out_of_range = 0;
    for (int64_t t = blockIdx.x; t < packed_rows * col_steps; t += gridDim.x) {
        const int64_t q = t / col_steps, c0 = (t % col_steps) * kKgCols;
        if (threadIdx.x < 32) {
            int64_t row0;
            int count;
            k_group_lookup(kg, q, &row0, &count);
            if (threadIdx.x == 0) s_row0 = row0, s_count = count;
        }
        __syncthreads();
        const int64_t row0 = s_row0;
        const int count = s_count;
        const int64_t c = c0 + 4 * threadIdx.x;
        if (c < mn) { /* mn % 4 == 0: a thread's 4 columns are all in or all out */
            uint32_t w[4] = {0, 0, 0, 0};
            if (count > 0) {
                uint32_t v[4][4]; /* [K-group b][column i] */
                for (int b = 0; b < 4; b++) {
                    const int64_t row = row0 + b;
                    const bool use = b < count && row < in.sf_k;
                    out_of_range |= b < count && row >= in.sf_k;
                    const uint32_t *p = in.data + row * in.sk + c * in.smn;
                    if (use && vec_load) {
                        uint4 x = __ldg(reinterpret_cast<const uint4 *>(p));
                        v[b][0] = x.x, v[b][1] = x.y, v[b][2] = x.z, v[b][3] = x.w;
                    } else {
                        for (int i = 0; i < 4; i++) v[b][i] = use ? __ldg(p + i * in.smn) : 0u;
                    }
                }
                for (int i = 0; i < 4; i++) {
                    uint32_t col[4] = {v[0][i], v[1][i], v[2][i], v[3][i]};
                    /* rows past sf_k (a layout the host could not check) count as missing */
                    int valid = count;
                    while (valid > 0 && row0 + valid - 1 >= in.sf_k) valid--;
                    w[i] = hfp4__sf_pack4(col, valid, &inexact);
                }
            }
            store4(out + q * mn + c, w, vec_store);
        }
        __syncthreads();
    }
    report_inexact(inexact, flags);
    if (out_of_range && flags.error_flag != nullptr) *flags.error_flag = 1;
}

/* ---- UTCCP permutation ------------------------------------------------------------------------ */

constexpr int kUtccpWords = 32; /* packed words (K columns) per tile */

template <bool VEC_LOAD>
__global__ void __launch_bounds__(kThreads)
    hfp4_sf_utccp_permute_kernel(InDesc in, int64_t groups, uint32_t *out, int vec_store) {
    __shared__ uint32_t s[kUtccpWords][128 + 4];
    const int64_t chunks = in.rows / 128, ksteps = (in.sf_k + kUtccpWords - 1) / kUtccpWords;
    const int64_t total = groups * chunks * ksteps;
    for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
        const int64_t g = t / (chunks * ksteps), rem = t % (chunks * ksteps);
        const int64_t c = rem % chunks, j0 = (rem / chunks) * kUtccpWords;
        const uint32_t *base = in.data + g * in.sg + c * 128 * in.smn;
        for (int idx = threadIdx.x; idx < kUtccpWords * 32; idx += kThreads) {
            const int q = idx % 32, jj = idx / 32; /* rows 4q..4q+3 of word column jj */
            const int64_t j = j0 + jj;
            uint32_t v[4] = {0, 0, 0, 0};
            if (j < in.sf_k) {
                const uint32_t *p = base + 4 * q * in.smn + j * in.sk;
                if (VEC_LOAD) {
                    uint4 x = __ldg(reinterpret_cast<const uint4 *>(p));
                    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
                } else {
                    for (int b = 0; b < 4; b++) v[b] = __ldg(p + b * in.smn);
                }
            }
            for (int b = 0; b < 4; b++) s[jj][4 * q + b] = v[b];
        }
        __syncthreads();
        /* out row o = 4i + b of the chunk <- in row 32b + i */
        for (int idx = threadIdx.x; idx < kUtccpWords * 32; idx += kThreads) {
            const int i = idx % 32, jj = idx / 32;
            const int64_t j = j0 + jj;
            if (j >= in.sf_k) continue;
            uint32_t v[4] = {s[jj][i], s[jj][32 + i], s[jj][64 + i], s[jj][96 + i]};
            store4(out + g * in.rows * in.sf_k + j * in.rows + c * 128 + 4 * i, v, vec_store);
        }
        __syncthreads();
    }
}

/* ---- launch helpers --------------------------------------------------------------------------- */

bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

InDesc in_desc(const hfp4_sf_tensor &t) {
    InDesc d;
    d.data = static_cast<const uint32_t *>(t.data);
    d.sg = t.num_groups > 0 ? t.stride_group : 0;
    d.smn = t.stride_mn;
    d.sk = t.stride_k;
    d.rows = t.mn;
    d.sf_k = t.sf_k;
    return d;
}

int blocks_for(int64_t work, const hfp4_current_device &dev) {
    int64_t cap = (int64_t)dev.num_sms * 16;
    if (cap > kMaxBlocks) cap = kMaxBlocks;
    return (int)(work < cap ? (work > 0 ? work : 1) : cap);
}

/* The load mode of an MN-major tile for input `in` (rows mapped by gran_mn). */
int pick_mode(const InDesc &in, int32_t gran_mn) {
    const bool base16 = aligned16(in.data), sg4 = in.sg % 4 == 0;
    if (in.sk == 1 && in.smn % 4 == 0 && sg4 && base16 && in.sf_k >= 4) return kLoadVecK;
    if (in.smn == 1 && gran_mn == 1 && in.sk % 4 == 0 && sg4 && base16 && in.rows >= 4) return kLoadVecMN;
    /* K-major-ish inputs keep lanes along K, MN-major-ish along MN */
    return in.sk <= in.smn || in.rows == 1 ? kLoadScalarK : kLoadScalarMN;
}

hfp4_status launch_mn_major(const char *fn, const hfp4__sf_plan *plan, const Flags &flags, cudaStream_t stream) {
    const bool pack = plan->op == HFP4__SF_OP_PACK;
    InDesc in = in_desc(plan->in);
    RowMap map;
    map.mn = pack ? plan->mn : plan->in.mn;
    map.t = plan->out.stride_k;
    map.gran_mn = pack ? plan->gran_mn : 1;
    map.psum = pack && plan->has_psum ? plan->psum.ends : nullptr;
    map.psum_groups = pack && plan->has_psum ? plan->psum.num_groups : 0;
    map.psum_alignment = pack && plan->has_psum ? plan->psum.alignment : 1;
    const int mode = pick_mode(in, map.gran_mn);
    const int64_t groups = plan->out.num_groups > 0 ? plan->out.num_groups : 1;
    uint32_t *out = static_cast<uint32_t *>(plan->out.data);
    const int vec_store = aligned16(out);
    const int64_t rtiles = (map.t + kTileRows - 1) / kTileRows, ktiles = (in.sf_k + kTileCols - 1) / kTileCols;
    dim3 grid((unsigned)rtiles, (unsigned)min((int64_t)65535, ktiles), (unsigned)min((int64_t)65535, groups));
    const bool rowmap = map.gran_mn != 1 || map.psum != nullptr;
#define HFP4_SF_LAUNCH(M)                                                                                     \
    do {                                                                                                     \
        if (pack && rowmap)                                                                                  \
            hfp4_sf_transpose_and_pack_fp32_into_ue8m0_kernel<M, true>                                       \
                <<<grid, kThreads, 0, stream>>>(in, map, groups, out, vec_store, flags);                     \
        else if (pack)                                                                                       \
            hfp4_sf_transpose_and_pack_fp32_into_ue8m0_kernel<M, false>                                      \
                <<<grid, kThreads, 0, stream>>>(in, map, groups, out, vec_store, flags);                     \
        else                                                                                                 \
            hfp4_sf_transpose_fp32_kernel<M><<<grid, kThreads, 0, stream>>>(in, map, groups, out, vec_store); \
    } while (0)
    switch (mode) {
    case kLoadVecK: HFP4_SF_LAUNCH(kLoadVecK); break;
    case kLoadVecMN: HFP4_SF_LAUNCH(kLoadVecMN); break;
    case kLoadScalarK: HFP4_SF_LAUNCH(kLoadScalarK); break;
    default: HFP4_SF_LAUNCH(kLoadScalarMN); break;
    }
#undef HFP4_SF_LAUNCH
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}

hfp4_status launch_k_grouped(const char *fn, const hfp4__sf_plan *plan, const Flags &flags,
                             const hfp4_current_device &dev, cudaStream_t stream) {
    InDesc in = in_desc(plan->in);
    KGroups kg;
    kg.layout = plan->kg.layout;
    kg.num_groups = plan->kg.num_groups;
    kg.gran_k = plan->kg.gran_k;
    kg.k_alignment = plan->kg.k_alignment;
    kg.use_psum = plan->kg.use_psum;
    uint32_t *out = static_cast<uint32_t *>(plan->out.data);
    const int64_t rows = plan->out.sf_k, steps = rows * ((in.rows + kKgCols - 1) / kKgCols);
    const int vec_load = in.smn == 1 && in.sk % 4 == 0 && aligned16(in.data);
    hfp4_sf_k_grouped_pack_fp32_into_ue8m0_kernel<<<blocks_for(steps, dev), kThreads, 0, stream>>>(
        in, kg, rows, out, vec_load, aligned16(out), flags);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}

hfp4_status launch_utccp(const char *fn, const hfp4__sf_plan *plan, const hfp4_current_device &dev,
                         cudaStream_t stream) {
    InDesc in = in_desc(plan->in);
    const int64_t groups = plan->in.num_groups > 0 ? plan->in.num_groups : 1;
    const int64_t work = groups * (in.rows / 128) * ((in.sf_k + kUtccpWords - 1) / kUtccpWords);
    uint32_t *out = static_cast<uint32_t *>(plan->out.data);
    const bool vec_load = in.smn == 1 && in.sk % 4 == 0 && in.sg % 4 == 0 && aligned16(in.data);
    if (vec_load)
        hfp4_sf_utccp_permute_kernel<true><<<blocks_for(work, dev), kThreads, 0, stream>>>(in, groups, out, aligned16(out));
    else
        hfp4_sf_utccp_permute_kernel<false><<<blocks_for(work, dev), kThreads, 0, stream>>>(in, groups, out, aligned16(out));
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}

} // namespace

extern "C" hfp4_status hfp4__sf_execute_gpu(const char *fn, const hfp4__sf_plan *plan, const hfp4_sf_options *opts,
                                            hfp4_stream stream) {
    if (plan->op == HFP4__SF_OP_NONE) return HFP4_OK;
    hfp4_current_device dev;
    HFP4_TRY(hfp4__require_sm90(fn, &dev));
    Flags flags;
    flags.error_flag = opts != NULL ? opts->error_flag : NULL;
    flags.round_up = opts != NULL && (opts->flags & HFP4_SF_ROUND_UP);
    cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
    switch (plan->op) {
    case HFP4__SF_OP_MN_MAJOR:
    case HFP4__SF_OP_PACK: return launch_mn_major(fn, plan, flags, s);
    case HFP4__SF_OP_K_GROUPED: return launch_k_grouped(fn, plan, flags, dev, s);
    case HFP4__SF_OP_UTCCP: return launch_utccp(fn, plan, dev, s);
    case HFP4__SF_OP_NONE: break;
    }
    return HFP4_OK;
}
