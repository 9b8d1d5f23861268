/*
 * fp8_fp8_gemm.cu - the SM90 GEMM for FP8 weights (fp8_fp8_gemm.h): D = A B^T (+ C) with A FP8 e4m3
 * under 1x128 activation scales and B FP8 e4m3 [N, K] under 128 x 128 block scales, dense; or B
 * [G, N, K] with A's rows in expert segments aligned to 128 (m-grouped contiguous) or A [G, m, K]
 * with masked_m rows a group (masked): the template's grouped forms (GM), 128-row tiles, each one
 * expert's (padding tiles and tiles past masked_m take no stages).
 *
 * DeepGEMM's FP8 structure, as measured first in bench/micro/fp8_ss_gemm.cu: a persistent kernel over
 * BM x 128 tiles of D (BM token rows: 128, or 192 for large M, hfp4__sm90_fp8w_pick_tile; 256 opt-in) rastered in groups of 16 token
 * tiles (a wave's A and B slices stay in L2); one producer thread loads BM x 128-byte tiles of A
 * (tokens) and 128 x 128-byte tiles of B (weight rows) with TMA (128-byte swizzle, zeros past m, n)
 * into 6 (5, 4) stages, and three more producer warps take turns writing each stage's BM promotion
 * factors next to them (the token's activation scale times the block's weight scale, one value for
 * the tile's 128 weight rows); BM / 64 consumer warpgroups (two at BM = 256, each twice) each run 4
 * wgmma m64n128k32 with both operands in shared memory a 128-K block (tokens 64 wg .. 64 wg + 63 of
 * the tile; at 256, 128 wg .. 128 wg + 127 as two sub-blocks, fw_consume_tile_sub2) and promote the
 * block's sums into FP32 with one FFMA per accumulator (at BM = 128 under the next block's wgmmas,
 * HFP4_FW_OVERLAP). BF16 D without C goes through a staging buffer a warpgroup to TMA stores
 * (fw_store_tile_tma); FP32 D, C, or rows that are not 16-byte aligned: stored from the registers.
 * Why the scales go through shared memory: read by the consumers from global memory a block ahead,
 * their L2 latency outlasted the block's wgmmas, and the kernel ran at 739 TFLOP/s at 8192^3 against
 * the micro's 1078 with its scales staged (RESULTS v24).
 * Why both operands in shared memory: nothing is converted, so the consumers' instruction stream is
 * the promotion alone (the FP4 kernel's register operands exist to convert FP4 in registers).
 */
#include "../../runtime/cuda_runtime.h"
#include "fp8_fp8_gemm.h"
#include "fp8_fp8_gemv.h"
#include "ptx.cuh"
#include "scales.cuh"
#include "wgmma_fp8_ss.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FW_TILE 128   /* weight rows (N) and K of a tile / block; the token rows are the tile's BM */
#define FW_GROUP_M 16 /* token tiles per raster group */
/* The kernel's forms (its GM template argument): dense, m-grouped contiguous (A's rows sorted by
 * expert in segments aligned to 128, layout[row] = expert or -1), masked (A [G, m, K], D [G, m, N],
 * layout[g] = masked_m[g]: group g's rows from masked_m[g] on are neither computed nor written) */
#define FW_DENSE 0
#define FW_CONTIGUOUS 1
#define FW_MASKED 2
#define FW_B_BYTES (FW_TILE * FW_TILE)
#ifndef HFP4_FW_SCALE_WARPS
#define HFP4_FW_SCALE_WARPS 3
#endif
#define FW_SCALE_WARPS HFP4_FW_SCALE_WARPS /* producer warps writing the promotion factors, in turn */
static_assert(FW_SCALE_WARPS >= 1 && FW_SCALE_WARPS <= 3, "1 to 3 factor warps (warps 1-3 of the producer warpgroup)");
/* HFP4_FW_OVERLAP=1 (default; 0 builds the 128-row tile without it, for A/Bs): the 128-row tile's
 * consumers promote a block's sums while their next block's wgmmas run (fw_consume_tile_overlapped).
 * NOTE: why: under ncu (H200 8192^3, bench/RESULTS.md v32) the 128-row form spent 927 cycles a block
 * where cuBLASLt's kernel of the same shape spends 572, with its tensor pipe 55 % busy against 90 %:
 * each warpgroup waited for its own wgmmas and then promoted with nothing of its own running. With
 * the overlap: 883-894 -> 941-948 TFLOP/s (3 interleaved rounds), 1.64 M cycles a launch. A first
 * form that released a block's stage only after the next block's wgmmas were out (the warpgroup held
 * two stages) gained 2 %: the producer then ran a stage less ahead, and the consumers waited for it. */
/* Timing-only builds (results wrong on purpose; bench/diag_gap_on_device.sh): -DHFP4_FW_DIAG_NO_FACTORS
 * has the factor warps write no promotion factors (no scale loads: they only wait for the stage and
 * arrive; the consumers read whatever the stage holds), -DHFP4_FW_DIAG_NO_STORES skips D's stores
 * behind a test the compiler cannot decide (p.m >= 0), so the sums are still computed.
 * -DHFP4_FW_DIAG_CONST_FACTORS (with NO_FACTORS): the factor warps write 1.0 for every row instead
 * of nothing, so the consumers' promotion multiplies real sums by a nonzero factor.
 * NOTE: why: at the power cap a rate follows the bits toggled, and a stage's unwritten factors are
 * whatever shared memory held (often zeros: then the sums, the promotion and D stay zero), so
 * NO_FACTORS alone cannot tell the factor path's cost from the zeros' (bench/RESULTS.md v42). */
#ifdef HFP4_FW_DIAG_NO_FACTORS
#define FW_DIAG_NO_FACTORS(p) ((p).m >= 0)
#else
#define FW_DIAG_NO_FACTORS(p) false
#endif
#ifdef HFP4_FW_DIAG_CONST_FACTORS
#define FW_DIAG_CONST_FACTORS 1
#else
#define FW_DIAG_CONST_FACTORS 0
#endif
/* -DHFP4_FW_DIAG_FACTOR_PART=1: the factor is the weight block's scale alone (no activation-scale
 * loads); =2: the activation scales alone (no weight-scale load); =3 (with NO_FACTORS and
 * CONST_FACTORS): the constant factor is 2^-16, the bench's, instead of 1.0 (bench/RESULTS.md v43) */
#ifndef HFP4_FW_DIAG_FACTOR_PART
#define HFP4_FW_DIAG_FACTOR_PART 0
#endif
#ifdef HFP4_FW_DIAG_NO_STORES
#define FW_DIAG_NO_STORES(p) ((p).m >= 0)
#else
#define FW_DIAG_NO_STORES(p) false
#endif

/* The grouped forms' SKIP kernels (the template's SKIP; the plan's skip_idle picks them, sm90_fp8_weights_plan.c): a consumer
 * warpgroup whose 64 rows of the tile are all padding (contiguous: its first row's layout entry is
 * -1, or past m) or past masked_m issues no wgmmas for the tile, only steps through its stages, and
 * the producer loads such a tile's A 64 rows only (a second tensor map, a_map64). At decode, where a
 * live tile holds a few rows, that is half of A's bytes and tensor work a tile: V4-Flash FP8 masked
 * w13 T = 8 +38 %, contiguous with D's padding left alone +12 % (bench/RESULTS.md v46). At prefill
 * the same kernel lost (w13 T = 16384 -7 %, T = 4096 -3 %; w2 level / +3 %), so it is a second
 * instantiation chosen by the problem's shape, not the only one. */
#ifndef HFP4_FW_OVERLAP
#define HFP4_FW_OVERLAP 1
#endif
/* the 192-row tile's stages with D stored from the registers (a stage fewer with the TMA store);
 * -DHFP4_FW_STAGES_192=4 builds the register stores with 4, to time the stage apart from the store */
#ifndef HFP4_FW_STAGES_192
#define HFP4_FW_STAGES_192 5
#endif
#define FW_STAGING_BYTES (64 * FW_TILE * 2) /* a consumer warpgroup's 64 x 128 BF16 tile of D */

/* The tile's shape: BM token rows, one consumer warpgroup per 64 of them (wgmma m64n128k32 each;
 * at BM = 256 one per 128, as two m64 sub-blocks),
 * one producer warpgroup; stages as shared memory allows; the setmaxnreg split within the
 * registers the CTA is launched with (more would make setmaxnreg.inc wait forever).
 * BM = 192 (hfp4__sm90_fp8w_pick_tile's choice for large M; +4-6 % at 8192^3, RESULTS v27): three consumer warpgroups
 * of fin + acc (128 registers) in 152 registers each, so the SM has 12 consumer warps where BM = 128
 * has 8, each weight tile's B reads serve 192 token rows, and the L2 reads per FLOP drop by 17 %.
 * BM = 256 (opt-in, HFP4_SM90_FP8_WEIGHTS_TILE=256; DeepGEMM's choice at 8192^3): two consumer
 * warpgroups of 128 token rows each, run as two m64 sub-blocks a K-block one after the other
 * (fw_consume_tile_sub2: fin 128 + acc 64 registers), so a B tile serves 256 token rows (B copies a
 * FLOP -25 % against 192) with 8 consumer warps; measured 5 % slower than 192 at 8192^3 (each
 * warpgroup's tensor work stops while it promotes, and two warpgroups fill less of it than three:
 * bench/RESULTS.md v40). Register stores only (its 32 KB staging buffers would leave 3 stages). */
template <int BM, bool DTMA>
struct fw_cfg {
    static_assert(BM == 128 || BM == 192 || BM == 256, "token tiles of 128, 192 or 256 rows");
    static constexpr int SUB = BM == 256 ? 2 : 1; /* m64 sub-blocks a consumer warpgroup */
    static_assert(!DTMA || SUB == 1, "the TMA store of D: 64-row warpgroups only");
    static constexpr int WG_ROWS = 64 * SUB;      /* token rows a consumer warpgroup */
    static constexpr int WGS = BM / WG_ROWS;
    static constexpr int THREADS = (WGS + 1) * 128;
    static constexpr int A_BYTES = BM * FW_TILE;
    static constexpr int STAGE_BYTES = A_BYTES + FW_B_BYTES + BM * 4; /* A, B, the BM promotion factors */
    /* DTMA: a stage fewer, for a 16 KB staging buffer of D a consumer warpgroup (fw_store_tile_tma) */
    static constexpr int STAGES = BM == 128 ? 6 - DTMA : BM == 192 ? HFP4_FW_STAGES_192 - DTMA : 4;
    static constexpr int STAGING_BYTES = DTMA ? WGS * FW_STAGING_BYTES : 0;
    static constexpr int SMEM = 1024 + STAGES * STAGE_BYTES + STAGING_BYTES + 2 * STAGES * 8;
    static constexpr int LAUNCH_REGS = (65536 / THREADS) & ~7; /* 168 or 128 */
    static constexpr int PRODUCER_REGS = BM == 128 ? 40 : 56; /* (192, 256: six, eight scale loads a lane in flight) */
    static constexpr int CONSUMER_REGS = BM == 128 ? 232 : BM == 192 ? 152 : 224;
    /* the consumers issue block kb + 1's wgmmas before they promote block kb's sums (two sets of
     * partial sums: 64 more registers, which only the 128-row tile's consumers have) */
    static constexpr bool OVERLAP = BM == 128 && HFP4_FW_OVERLAP;
    static_assert(PRODUCER_REGS + WGS * CONSUMER_REGS <= (WGS + 1) * LAUNCH_REGS, "setmaxnreg.inc would wait forever");
    /* the grouped form (128 rows only): its factor warps also skip padding tiles and keep the
     * tile's expert, which spilled at 40 registers; its consumers fit 224 */
    static constexpr int GROUPED_PRODUCER_REGS = 48, GROUPED_CONSUMER_REGS = 224;
    static_assert(GROUPED_PRODUCER_REGS + WGS * GROUPED_CONSUMER_REGS <= (WGS + 1) * LAUNCH_REGS || BM != 128,
                  "setmaxnreg.inc would wait forever");
    static_assert(SMEM <= 232448, "shared memory");
};

typedef struct sm90_fp8w_params {
    int64_t m, n, k;
    const void *a_scales; /* gran_mn 1, gran_k 128: FP32, UE8M0 bytes or packed UE8M0 words */
    int64_t a_scale_stride_mn, a_scale_stride_k;
    int32_t a_scale_dtype, b_scale_dtype;
    const void *b_scales; /* 128 x 128 blocks: FP32 or UE8M0 bytes */
    int64_t b_scale_stride_mn, b_scale_stride_k;
    void *d;
    const void *c;        /* NULL, or C with D's dtype and ld */
    int64_t ldd;          /* elements */
    int32_t d_fp32;       /* D (and C) FP32, else BF16 */
    int32_t d_pairs;      /* two adjacent columns may go as one store (ld even, D 8-byte aligned) */
    /* (grouped forms: FW_CONTIGUOUS, FW_MASKED) */
    const int32_t *layout;        /* CONTIGUOUS: the expert of each row of A, -1 for padding rows;
                                     MASKED: masked_m of each group */
    int64_t b_scale_stride_group; /* b_scales' units between experts */
    int32_t pad_zero;             /* CONTIGUOUS: padding rows of D are written +0 (without C) */
    int32_t groups;               /* MASKED: G (the live tiles: fw_masked_walk_to) */
    int64_t a_scale_stride_group; /* MASKED: a_scales' units between groups */
    int64_t d_stride_group;       /* MASKED: D's (and C's) elements between groups */
    CUtensorMap a_map64;          /* (SKIP kernels) A's map with a 64-row box: a tile whose second
                                     warpgroup is idle loads only its first 64 rows */
} sm90_fp8w_params;

/* SKIP kernels, grouped forms: whether the 64 rows from `row` (a consumer warpgroup's in its
 * tile) hold none to compute: past m or padding (contiguous: a warpgroup's rows are padding when its
 * first is), or past masked_m (masked: end). The consumers skip such a warpgroup's wgmmas; the
 * producer, where it is the tile's second (row = first + 64), loads A's first 64 rows only (the rest
 * of A's stage is then stale, and no wgmma reads it). */
template <int BM, int GM>
static __device__ __forceinline__ bool fw_wg_idle(const sm90_fp8w_params &p, int64_t row, int64_t end) {
    if constexpr (GM == FW_CONTIGUOUS) return row >= p.m || __ldg(p.layout + row) < 0;
    else return row >= end;
}

/* The weight scale of expert e's 128-row block nb in K-block kb (e = 0 when dense) */
static __device__ __forceinline__ float fw_b_scale(const sm90_fp8w_params &p, int64_t e, int64_t nb, int64_t kb) {
    const int64_t i = e * p.b_scale_stride_group + nb * p.b_scale_stride_mn + kb * p.b_scale_stride_k;
    return p.b_scale_dtype == HFP4_DTYPE_FP32 ? __ldg((const float *)p.b_scales + i)
                                              : ue8m0_to_float(__ldg((const uint8_t *)p.b_scales + i));
}

/* A factor warp's weight-block scales: the tile's weight-block row 32 K-blocks at a time (lane l
 * holds K-block base + l), a stage's taken by a shuffle. fetch() before the stage wait, get() after.
 * NOTE: why: one scale load a stage cost 5.5 % of the kernel's cycles at 8192^3 (a timing build
 * without it, ncu clock-free, bench/RESULTS.md v43), and not by its latency (issued an item earlier
 * it cost the same, v43). One coalesced load a tile row and 32 K-blocks: -4.7 % cycles at 8192^3,
 * -3.5 % at 16384 x 7168 x 2048, 8192^3 sustained 1089-1094 -> 1120-1121 TFLOP/s (v44, same call). */
typedef struct fw_bs_source {
    uint32_t chunk; /* the lane's scale of K-block base + lane, as bits */
    int32_t base;   /* the chunk's first K-block; -1: none yet for this tile */
} fw_bs_source;

static __device__ __forceinline__ void fw_bs_fetch(fw_bs_source &b, const sm90_fp8w_params &p, int64_t e, int64_t nt,
                                                   int32_t kb, int32_t kblocks, int lane) {
    if ((kb & ~31) != b.base) {
        b.base = kb & ~31;
        b.chunk = HFP4_FW_DIAG_FACTOR_PART == 2     ? 0x3f800000u /* (timing build: no weight-scale load) */
                  : b.base + lane < kblocks ? __float_as_uint(fw_b_scale(p, e, nt, b.base + lane))
                                            : 0u;
    }
}

static __device__ __forceinline__ float fw_bs_get(const fw_bs_source &b, int32_t kb) {
    return __uint_as_float(__shfl_sync(0xffffffffu, b.chunk, kb & 31));
}

/* Tile t's (token tile, weight tile): groups of FW_GROUP_M token tiles, weight tiles within a group */
static __device__ __forceinline__ void fw_tile(int64_t t, int64_t tiles_m, int64_t tiles_n, int64_t &mt, int64_t &nt) {
    const int64_t grp = t / (FW_GROUP_M * tiles_n), first = grp * FW_GROUP_M;
    const int64_t gm = min((int64_t)FW_GROUP_M, tiles_m - first), within = t - grp * FW_GROUP_M * tiles_n;
    mt = first + within % gm;
    nt = within / gm;
}

/* CONTIGUOUS: token tile mt's expert, the one of its first row (segments start at multiples of
 * 128 = BM, so a tile holds one expert's rows and padding, or padding alone: -1); 0 when dense */
template <int BM, bool CONTIGUOUS>
static __device__ __forceinline__ int32_t fw_expert(const sm90_fp8w_params &p, int64_t mt) {
    return CONTIGUOUS ? __ldg(p.layout + mt * BM) : 0;
}

/* CONTIGUOUS, HFP4_FW_LAYOUT_AHEAD: tile t's expert (its first row's layout entry) and the entry of
 * warpgroup wg's first row (-1 past m), read a tile ahead by the consumers so that the loads' latency
 * falls under the current tile's K-blocks. Without it each consumer waits for the expert's entry at
 * every tile start, and the SKIP kernels wait again for their idle test's entry, which is read
 * behind the branch on the expert: one or two exposed L2 round trips a tile of ~17 us at prefill.
 * NOTE: measured (H200, V4-Flash FP8 contiguous, 6 interleaved rounds in two calls, bench/RESULTS.md
 * v48), in the kernels the plan picks: the plain kernels (T = 16384) w13 +2...+4 % in every round,
 * w2 -1...0 %; the SKIP kernels (the plan's at T = 4096 and at decode) w13 T = 4096 -1...-2 %, w2
 * +0...+2 %, w2 T = 8 -2 %. So on (1) by default in the plain contiguous kernels only; the SKIP
 * kernels keep their tile-start reads. It did not level the SKIP kernels with the others (still
 * -7...-9 % at T = 16384): their idle test's round trip was not their loss (their DRAM traffic is,
 * bench/RESULTS.md v48-v49: CTAs drifting apart under the fixed stride; handing the tiles out in
 * order removed that traffic but bought the SKIP kernels <= 2 %, so it was not kept).
 * -DHFP4_FW_LAYOUT_AHEAD=0 builds the tile-start reads everywhere. */
#ifndef HFP4_FW_LAYOUT_AHEAD
#define HFP4_FW_LAYOUT_AHEAD 1
#endif
typedef struct fw_tile_ahead {
    int64_t mt, nt;      /* the tile's place (fw_tile), so that the loop does not divide again          */
    int32_t e, wg_entry; /* its expert and warpgroup wg's first-row entry (-1 past m)                  */
    int32_t row_entry[2]; /* the thread's rows r0 and r0 + 8 (0 past m): the epilogue's padding test */
} fw_tile_ahead;
template <int BM>
static __device__ __forceinline__ fw_tile_ahead fw_layout_ahead(const sm90_fp8w_params &p, int64_t t, int64_t tiles,
                                                                int64_t tiles_m, int64_t tiles_n, int wg, int r0) {
    fw_tile_ahead a = {0, 0, -1, -1, {0, 0}};
    if (t >= tiles) return a;
    fw_tile(t, tiles_m, tiles_n, a.mt, a.nt);
    const int64_t first = a.mt * BM, row = first + 64 * wg;
    a.e = __ldg(p.layout + first);
    a.wg_entry = row < p.m ? __ldg(p.layout + row) : -1;
#pragma unroll
    for (int h = 0; h < 2; h++) a.row_entry[h] = first + r0 + 8 * h < p.m ? __ldg(p.layout + first + r0 + 8 * h) : 0;
    return a;
}

/* MASKED: a tile's group e, its first row within the group, and end, the row bound its loads and
 * stores keep below: min(masked_m, m). The dense and contiguous forms use fw_expert, mt BM and m,
 * written out where they are used.
 * NOTE: why apart: with one struct for all three forms the contiguous kernel was scheduled
 * differently and ran ~1 % slower (V4-Flash T = 16384, 17 interleaved rounds, 14-15 of 17 slower,
 * the FP4 rows level: bench/RESULTS.md v45); written so, the dense and contiguous kernels' SASS is
 * instruction for instruction what it was before the masked form came. */
typedef struct fw_masked_tile {
    int32_t e;
    int64_t first, end;
} fw_masked_tile;

/* MASKED: the tiles in a compact order, group after group, each group's live tiles only (its
 * ceil(min(masked_m, m) / 128) token tiles x the weight tiles, token tiles inner, so CTAs side by side
 * share a weight tile), so no role steps over dead tiles. A warp walks the groups 32 at a time (a
 * lane a group: one load, a scan, a ballot) as its tile index grows; each role walks on its own.
 * NOTE: why: in the G x ceil(m / 128) x ceil(N / 128) grid every role stepped over the dead tiles one
 * at a time, each a masked_m read and 64-bit divisions: ~2000 a CTA at G = 256, m = 4096, N = 4096
 * (DeepGEMM's test shape), tens of µs at decode where the GEMM itself takes ~10-100. */
typedef struct fw_masked_walk {
    int64_t start, next; /* the group's first tile; the next group's first tile */
    int32_t g;           /* the group (-1 before the first) */
    int32_t live, rows;  /* its live token tiles; its rows, min(masked_m, m) */
} fw_masked_walk;

static __device__ __forceinline__ fw_masked_walk fw_masked_walk_start() {
    fw_masked_walk w;
    w.start = w.next = 0;
    w.g = -1;
    w.live = w.rows = 0;
    return w;
}

/* Moves the warp's walk w to the group that holds tile t; false where t is past the last tile. Every
 * lane of the warp calls it with the same t, never smaller than at the call before. */
template <int BM>
static __device__ __forceinline__ bool fw_masked_walk_to(fw_masked_walk &w, const sm90_fp8w_params &p, int64_t t,
                                                        int64_t tiles_n) {
    const int lane = threadIdx.x % 32;
    while (t >= w.next) {
        if (w.g + 1 >= p.groups) return false;
        const int32_t g = w.g + 1 + lane;
        int32_t rows = 0;
        if (g < p.groups) { /* (masked_m clamped to [0, m]: rows past m do not exist) */
            const int32_t masked = __ldg(p.layout + g);
            rows = masked < 0 ? 0 : (int64_t)masked > p.m ? (int32_t)p.m : masked;
        }
        const int32_t live = (rows + BM - 1) / BM;
        int64_t ends = (int64_t)live * tiles_n; /* the lane's group's last tile + 1, after w.next */
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int64_t v = __shfl_up_sync(0xffffffffu, ends, o);
            if (lane >= o) ends += v;
        }
        const uint32_t hit = __ballot_sync(0xffffffffu, w.next + ends > t); /* (a group with tiles: first) */
        if (hit) {
            const int j = __ffs(hit) - 1;
            w.g += 1 + j;
            w.live = __shfl_sync(0xffffffffu, live, j);
            w.rows = __shfl_sync(0xffffffffu, rows, j);
            w.next += __shfl_sync(0xffffffffu, ends, j);
            w.start = w.next - (int64_t)w.live * tiles_n;
        } else {
            w.g += 32;
            w.next += __shfl_sync(0xffffffffu, ends, 31);
            w.start = w.next;
        }
    }
    return true;
}

/* MASKED: tile t of the walk's group (fw_masked_walk_to(w, t) was true) as its tile rows and weight
 * tile nt */
template <int BM>
static __device__ __forceinline__ fw_masked_tile fw_masked_place(const fw_masked_walk &w, int64_t t, int64_t &nt) {
    const int64_t u = t - w.start;
    int64_t ml;
    if (u >> 32 == 0) { /* (32-bit division where it fits: the usual case) */
        ml = (uint32_t)u % (uint32_t)w.live;
        nt = (uint32_t)u / (uint32_t)w.live;
    } else {
        ml = u % w.live;
        nt = u / w.live;
    }
    fw_masked_tile r;
    r.e = w.g;
    r.first = ml * BM;
    r.end = w.rows;
    return r;
}

/* MASKED: the walk's first tile from t on (stepping by the grid; every tile of the compact order is
 * live), or tiles when there is none */
template <int BM>
static __device__ __forceinline__ int64_t fw_masked_next(fw_masked_walk &w, const sm90_fp8w_params &p, int64_t t,
                                                        int64_t tiles, int64_t tiles_n) {
    return t < tiles && fw_masked_walk_to<BM>(w, p, t, tiles_n) ? t : tiles;
}

/* CONTIGUOUS: the first tile from t on (t included, stepping by the grid) that takes stages, or one
 * >= tiles; t itself when dense (MASKED: fw_masked_next). The factor warps count stages only in such
 * tiles, as the producer and the consumers do (a padding tile takes no stages). */
template <int BM, int GM>
static __device__ __forceinline__ int64_t fw_live_tile(const sm90_fp8w_params &p, int64_t t, int64_t tiles,
                                                       int64_t tiles_m, int64_t tiles_n) {
    static_assert(GM != FW_MASKED, "the masked form's tiles: fw_masked_next");
    if constexpr (GM != FW_DENSE) {
        for (; t < tiles; t += gridDim.x) {
            int64_t mt, nt;
            fw_tile(t, tiles_m, tiles_n, mt, nt);
            if (fw_expert<BM, true>(p, mt) >= 0) break;
        }
    }
    return t;
}

/* The first tile from t on (stepping by the grid) that takes stages, or tiles when there is none:
 * fw_masked_next (walk) for the masked form, fw_live_tile for the others */
template <int BM, int GM>
static __device__ __forceinline__ int64_t fw_next_tile(fw_masked_walk &walk, const sm90_fp8w_params &p, int64_t t,
                                                       int64_t tiles, int64_t tiles_m, int64_t tiles_n) {
    if constexpr (GM == FW_MASKED) return fw_masked_next<BM>(walk, p, t, tiles, tiles_n);
    else return fw_live_tile<BM, GM>(p, t, tiles, tiles_m, tiles_n);
}

/* D's element (row, col) past element goff (masked: the group's first) (+ C's unless !with_c), one
 * or two adjacent columns */
static __device__ __forceinline__ void fw_store(const sm90_fp8w_params &p, int64_t goff, int64_t row, int64_t col,
                                                float v0, float v1, bool with_c = true) {
    const int64_t i = goff + row * p.ldd + col;
    const bool two = col + 1 < p.n;
    if (p.d_fp32) {
        if (p.c && with_c) {
            v0 += ((const float *)p.c)[i];
            if (two) v1 += ((const float *)p.c)[i + 1];
        }
        float *d = (float *)p.d + i;
        if (two && p.d_pairs) *(float2 *)d = make_float2(v0, v1);
        else {
            d[0] = v0;
            if (two) d[1] = v1;
        }
    } else {
        if (p.c && with_c) {
            v0 += __bfloat162float(((const __nv_bfloat16 *)p.c)[i]);
            if (two) v1 += __bfloat162float(((const __nv_bfloat16 *)p.c)[i + 1]);
        }
        __nv_bfloat16 *d = (__nv_bfloat16 *)p.d + i;
        if (two && p.d_pairs) *(__nv_bfloat162 *)d = __floats2bfloat162_rn(v0, v1);
        else {
            d[0] = __float2bfloat16_rn(v0);
            if (two) d[1] = __float2bfloat16_rn(v1);
        }
    }
}

/* A consumer warpgroup's 64 x 128 tile of D (BF16, no C) from fin through its staging buffer (16 KB,
 * 1024-aligned: two 64-column halves of 64 rows x 128 bytes, 16-byte chunks XOR-ed with the row's
 * index in its 8-row atom, the 128-byte swizzle of D's map) to two TMA stores of 64 x 64 boxes,
 * which clip rows past m and columns past n. The previous tile's stores have read the buffer before
 * it is written again (their issuing thread waits, then the warpgroup's barrier).
 * NOTE: why: D stored from the registers is 32 four-byte stores a thread and tile, each warp's
 * covering 8 rows x 16 bytes, with 64-bit address arithmetic, while the CTA's tensor pipe idles
 * (all its warpgroups finish a tile together); a timing build without the stores ran 10 % faster
 * at 8192^3 (1066 against 967 TFLOP/s sustained, bench/RESULTS.md v40). Here a thread issues 8
 * stmatrix and 32 packed conversions, and the stores run while the next tile's blocks do: 967 ->
 * 1043 TFLOP/s sustained at 8192^3, 790 -> 1005 at 16384 x 7168 x 2048 (v40, same call). */
static __device__ __forceinline__ void fw_store_tile_tma(const CUtensorMap *d_map, const float *fin, uint32_t staging,
                                                         int wg, int tid, int32_t col0, int32_t row0, int32_t z) {
    const int lane = tid % 32;
    if (tid == 0) bulk_wait_read();
    warpgroup_barrier<false>(wg);
    /* stmatrix x4: lanes 8i .. 8i + 7 address matrix i's rows; matrix i = column block j + i / 2,
     * rows + 8 if i is odd; registers: (row g, block j), (g + 8, j), (g, j + 1), (g + 8, j + 1) */
    const int r = (tid / 32) * 16 + 8 * ((lane >> 3) & 1) + (lane & 7);
    const uint32_t row_addr = staging + (uint32_t)r * 128u;
#pragma unroll
    for (int j = 0; j < 16; j += 2) {
        const int cb = j + (lane >> 4); /* the lane's column block (8 columns, 16 bytes) */
        const uint32_t addr = row_addr + (uint32_t)(cb >> 3) * 8192u + (uint32_t)(((cb & 7) ^ (lane & 7)) << 4);
        stmatrix_x4(addr, bf16x2_bits(fin[4 * j], fin[4 * j + 1]), bf16x2_bits(fin[4 * j + 2], fin[4 * j + 3]),
                    bf16x2_bits(fin[4 * j + 4], fin[4 * j + 5]), bf16x2_bits(fin[4 * j + 6], fin[4 * j + 7]));
    }
    fence_proxy_async_shared(); /* the writes, visible to the TMA unit */
    warpgroup_barrier<false>(wg);
    if (tid == 0) {
        tma_store_3d(d_map, staging, col0, row0, z);
        tma_store_3d(d_map, staging + 8192u, col0 + 64, row0, z);
        bulk_commit();
    }
}

/* The consumer loops step their stage and phase (rather than dividing a running count by STAGES,
 * 5 or 6, twice a block), count K blocks in 32 bits, and form their descriptors, barrier and factor
 * addresses from shared-window bases set once per kernel (fw_consumer_addrs), the stage in a
 * uniform register.
 * NOTE: why: at the H200's 700 W cap a kernel's rate is its energy a FLOP (bench/RESULTS.md v36), and
 * ncu counted 136 instructions a consumer warp and block in the 192-row tile's loop against
 * cuBLASLt's ~104 (64 FADD and mostly uniform-datapath overhead): the stage arithmetic (a division by
 * 5 as IMAD.WIDE), the shared-window base recomputed from the generic pointers (S2UR SR_CgaCtaId)
 * and the descriptors moved to uniform registers (R2UR) every block. Now 107 (the 128-row tile's
 * overlapped loop 251 -> 213 a warp and two blocks): 8192^3 sustained 930-938 -> 953-965 TFLOP/s
 * (192 rows), 901-914 -> 919-921 (128 rows forced). */

/* A consumer thread's shared-window addresses of what its loop reads, for stage 0 (stage s is a
 * stage stride further), set once per kernel */
typedef struct fw_consumer_addrs {
    uint32_t a_lo;    /* its warpgroup's first 64 rows of the A tile: descriptor low word */
    uint32_t b_lo;    /* the B tile: descriptor low word */
    uint32_t full;    /* the stage's full barrier (empty: STAGES x 8 bytes on) */
    uint32_t factors; /* the factor of its row r0 (r0 + 8: 32 bytes on; at BM = 256 r0 + 64: 256 bytes on) */
} fw_consumer_addrs;

/* The 4 wgmmas of stage su's block for the m64 rows a_off (16-byte units) past the warpgroup's first
 * in the A tile, into acc, committed */
template <int BM, bool DTMA>
static __device__ __forceinline__ void fw_issue_wgmmas(float *acc, const fw_consumer_addrs &ad, uint32_t su,
                                                       uint32_t a_off) {
    typedef fw_cfg<BM, DTMA> cfg;
    sm90_desc da, db;
    da.lo = ad.a_lo + su * (uint32_t)(cfg::A_BYTES >> 4) + a_off;
    da.hi = SM90_DESC_HI_K128_SWIZZLE128;
    db.lo = ad.b_lo + su * (uint32_t)(FW_B_BYTES >> 4);
    db.hi = SM90_DESC_HI_K128_SWIZZLE128;
    wgmma_fence();
    wgmma_fp8_ss_chunk_n128(acc, da, db);
    wgmma_commit();
}

/* A consumer warpgroup's K-block in stage su (a uniform register: the caller's warp_uniform): the
 * wait for the stage, its wgmmas into acc, committed */
template <int BM, bool DTMA>
static __device__ __forceinline__ void fw_block_issue(float *acc, const fw_consumer_addrs &ad, uint32_t su,
                                                      uint32_t phase) {
    mbar_wait_sa(ad.full + su * 8, phase);
    fw_issue_wgmmas<BM, DTMA>(acc, ad, su, 0);
}

/* Its end (its wgmmas the only ones running): the rows' factors, the wait for the wgmmas, the stage
 * released, (s, phase) stepped; the sums stay in acc for a later promotion */
template <int BM, bool DTMA>
static __device__ __forceinline__ void fw_block_finish(float *acc, const fw_consumer_addrs &ad, uint32_t su,
                                                       int &s, uint32_t &phase, float &f0, float &f1) {
    typedef fw_cfg<BM, DTMA> cfg;
    const uint32_t fa = ad.factors + su * (uint32_t)(BM * 4);
    f0 = *(const float *)smem_ptr(fa);
    f1 = *(const float *)smem_ptr(fa + 32);
    wgmma_wait<0>();
#pragma unroll
    for (int r = 0; r < 64; r++) reg_fence(acc[r]);
    mbar_arrive_sa(ad.full + (cfg::STAGES + su) * 8);
    if (++s == cfg::STAGES) {
        s = 0;
        phase ^= 1;
    }
}

/* One K-block (the 192-row tile's loop): issue, then finish */
template <int BM, bool DTMA>
static __device__ __forceinline__ void fw_block(float *acc, const fw_consumer_addrs &ad, int &s, uint32_t &phase,
                                                float &f0, float &f1) {
    const uint32_t su = (uint32_t)warp_uniform(s);
    fw_block_issue<BM, DTMA>(acc, ad, su, phase);
    fw_block_finish<BM, DTMA>(acc, ad, su, s, phase, f0, f1);
}

/* A tile's K-blocks for a warpgroup with no rows in it (SKIP kernels): each stage waited for
 * (so that its arrival counts for this round of the stage, not a later one) and released, (s, phase)
 * stepped as fw_block_finish steps them */
template <int BM, bool DTMA>
static __device__ __forceinline__ void fw_skip_tile(const fw_consumer_addrs &ad, int &s, uint32_t &phase,
                                                    int32_t kblocks) {
    typedef fw_cfg<BM, DTMA> cfg;
    for (int32_t kb = 0; kb < kblocks; kb++) {
        const uint32_t su = (uint32_t)warp_uniform(s);
        mbar_wait_sa(ad.full + su * 8, phase);
        mbar_arrive_sa(ad.full + (cfg::STAGES + su) * 8);
        if (++s == cfg::STAGES) {
            s = 0;
            phase ^= 1;
        }
    }
}

/* A tile's K-blocks with block kb's promotion after block kb + 1's wgmmas are issued, so that it runs
 * under them; each block's stage is released as soon as its own wgmmas are done. The two blocks'
 * sums are in two register sets taken in turn (the loop unrolled by two, no branch inside, so each
 * set stays in fixed registers: with a branch inside, ptxas serialized every wgmma). (s, phase): the
 * consumers' place in the CTA's stage sequence, stepped. */
template <int BM, bool DTMA>
static __device__ __forceinline__ void fw_consume_tile_overlapped(float *fin, const fw_consumer_addrs &ad, int &s,
                                                                  uint32_t &phase, int32_t kblocks) {
    float acc0[64], acc1[64], g0, g1, h0, h1; /* g: acc0's block's factors, h: acc1's */
    uint32_t su = (uint32_t)warp_uniform(s);
    fw_block_issue<BM, DTMA>(acc0, ad, su, phase);
    fw_block_finish<BM, DTMA>(acc0, ad, su, s, phase, g0, g1);
    int32_t kb = 1;
    for (; kb + 1 < kblocks; kb += 2) {
        su = (uint32_t)warp_uniform(s);
        fw_block_issue<BM, DTMA>(acc1, ad, su, phase);
        promote_token_rows_n128(fin, acc0, g0, g1);
        fw_block_finish<BM, DTMA>(acc1, ad, su, s, phase, h0, h1);
        su = (uint32_t)warp_uniform(s);
        fw_block_issue<BM, DTMA>(acc0, ad, su, phase);
        promote_token_rows_n128(fin, acc1, h0, h1);
        fw_block_finish<BM, DTMA>(acc0, ad, su, s, phase, g0, g1);
    }
    if (kb < kblocks) { /* an even number of blocks: the last one */
        su = (uint32_t)warp_uniform(s);
        fw_block_issue<BM, DTMA>(acc1, ad, su, phase);
        promote_token_rows_n128(fin, acc0, g0, g1);
        fw_block_finish<BM, DTMA>(acc1, ad, su, s, phase, h0, h1);
        promote_token_rows_n128(fin, acc1, h0, h1);
    } else {
        promote_token_rows_n128(fin, acc0, g0, g1);
    }
}

/* A tile's K-blocks at BM = 256: each block's two m64 sub-blocks of the warpgroup's 128 token rows,
 * one after the other (4 wgmmas, the wait, the promotion into fin's half), the stage released after
 * the second; ad.a_lo and ad.factors point at the warpgroup's first sub-block. (s, phase) as in
 * fw_consume_tile_overlapped. */
static __device__ __forceinline__ void fw_consume_tile_sub2(float *fin, const fw_consumer_addrs &ad, int &s,
                                                            uint32_t &phase, int32_t kblocks) {
    typedef fw_cfg<256, false> cfg;
    float acc[64];
    for (int32_t kb = 0; kb < kblocks; kb++) {
        const uint32_t su = (uint32_t)warp_uniform(s);
        mbar_wait_sa(ad.full + su * 8, phase);
        const uint32_t fa = ad.factors + su * (uint32_t)(256 * 4);
#pragma unroll
        for (int sub = 0; sub < 2; sub++) {
            fw_issue_wgmmas<256, false>(acc, ad, su, (uint32_t)sub * 64u * 8u);
            const float f0 = *(const float *)smem_ptr(fa + sub * 256), f1 = *(const float *)smem_ptr(fa + sub * 256 + 32);
            wgmma_wait<0>();
#pragma unroll
            for (int r = 0; r < 64; r++) reg_fence(acc[r]);
            if (sub == 1) {
                mbar_arrive_sa(ad.full + (cfg::STAGES + su) * 8);
                if (++s == cfg::STAGES) {
                    s = 0;
                    phase ^= 1;
                }
            }
            promote_token_rows_n128(fin + 64 * sub, acc, f0, f1);
        }
    }
}

/* A factor warp's share of the stages: every FW_SCALE_WARPS-th of the CTA's stage sequence from its
 * own index sw, for each the BM token rows' activation scales (lane: rows 32 i + lane, all BM / 32
 * loads in flight at once) times the weight block's, into the stage's factors, then its arrival on
 * the stage's full barrier. SF: the activation scales' dtype; CONTIG: FP32 scales MN-major (a row's
 * scale next to the previous row's), so the loads take immediate offsets from one address a stage.
 * Rows past m load nothing: their factor is 0 (FP32) or 2^-127 (UE8M0), finite, and those rows of D
 * are never stored.
 * NOTE: why a function per scale form, stepping (tile, K-block, stage) by FW_SCALE_WARPS: the
 * general loop (every warp visiting every stage to skip the others', the dtype tested per row, a
 * 64-bit address and a bounds test per row) took ~3x the instructions a stage, and a timing build
 * whose factor warps only arrived ran 6 % faster at 8192^3 (bench/RESULTS.md v40). This form (~95
 * instructions a stage): 8192^3 1028 -> 1074 TFLOP/s sustained at the cap (+4.5 %); two factor
 * warps level with three, one -13 % (its loads for the next stage wait for this one's arrival); a
 * factor-free timing build still +4 % (v41). */
template <int BM, bool DTMA, int SF, bool CONTIG, int GM>
static __device__ __forceinline__ void fw_factor_warp(const sm90_fp8w_params &p, float *factors, uint64_t *full,
                                                      uint64_t *empty, int sw, int64_t tiles_m, int64_t tiles_n) {
    typedef fw_cfg<BM, DTMA> cfg;
    constexpr int R = BM / 32, BYTES = SF == HFP4_DTYPE_UE8M0 ? 1 : 4;
    static_assert(cfg::STAGES >= FW_SCALE_WARPS, "a step wraps the stage sequence at most once");
    const int lane = threadIdx.x % 32;
    const int64_t tiles = tiles_m * tiles_n;
    const int32_t kblocks = (int32_t)(p.k / FW_TILE);
    const int64_t row_step = CONTIG ? 32 * BYTES : 32 * p.a_scale_stride_mn * BYTES; /* bytes between i and i + 1 */
    /* (shared-window addresses, formed once: the lane's factor in stage 0, the barriers) */
    const uint32_t fac_sa = smem_addr(factors) + 4u * (uint32_t)lane, full_sa = smem_addr(full),
                   empty_sa = smem_addr(empty);
    fw_masked_walk walk = fw_masked_walk_start(); /* (MASKED) */
    int64_t t = fw_next_tile<BM, GM>(walk, p, blockIdx.x, tiles, tiles_m, tiles_n), nt = 0;
    int32_t kb = sw;
    while (kb >= kblocks) { /* (fewer K-blocks a tile than factor warps) */
        kb -= kblocks;
        t = fw_next_tile<BM, GM>(walk, p, t + gridDim.x, tiles, tiles_m, tiles_n);
    }
    const char *base = NULL; /* the tile's row lane, K-block 0 */
    int live = 0;            /* the tile's rows from lane on that exist */
    bool fresh = true;       /* t is a new tile */
    fw_bs_source bsrc = {0u, -1};
    int32_t e = 0;           /* (grouped forms) the tile's expert */
    int s = sw;              /* the stage; round: how often the stage sequence has wrapped */
    uint32_t round = 0;
    while (t < tiles) {
        if (fresh) {
            int64_t mt = 0;
            if constexpr (GM != FW_MASKED) fw_tile(t, tiles_m, tiles_n, mt, nt);
            if constexpr (GM == FW_MASKED) {
                const fw_masked_tile tr = fw_masked_place<BM>(walk, t, nt);
                e = tr.e;
                const int64_t left = tr.end - tr.first - lane;
                live = left > BM ? BM : (int)left;
                base = (const char *)p.a_scales + ((tr.first + lane) * p.a_scale_stride_mn + e * p.a_scale_stride_group) * BYTES;
            } else {
                e = fw_expert<BM, GM == FW_CONTIGUOUS>(p, mt); /* (>= 0: fw_live_tile) */
                const int64_t left = p.m - mt * BM - lane;
                live = left > BM ? BM : (int)left;
                base = (const char *)p.a_scales + (mt * BM + lane) * p.a_scale_stride_mn * BYTES;
            }
            fresh = false;
            bsrc.base = -1;
        }
        if (!FW_DIAG_NO_FACTORS(p)) {
            /* NOTE: the scales are loaded before the wait for the stage (they do not depend on it),
             * so their L2 round trip overlaps that wait instead of following it: loaded after it, the
             * factors held each stage's full barrier back by a round trip, and a timing build whose
             * factor warps only arrived ran 8 % faster (H200 8192^3, bench/RESULTS.md v31) */
            fw_bs_fetch(bsrc, p, e, nt, kb, kblocks, lane);
            const char *at = base + (int64_t)(SF == HFP4_DTYPE_UE8M0_PACKED ? kb >> 2 : kb) * p.a_scale_stride_k * BYTES;
            uint32_t raw[R];
            if (HFP4_FW_DIAG_FACTOR_PART == 1) {
#pragma unroll
                for (int i = 0; i < R; i++) raw[i] = 0x3f800000u;
            } else if (live > 32 * (R - 1)) { /* (every row of the lane: no tests) */
#pragma unroll
                for (int i = 0; i < R; i++)
                    raw[i] = BYTES == 1 ? (uint32_t)__ldg((const uint8_t *)(at + i * row_step))
                                        : __ldg((const uint32_t *)(at + i * row_step));
            } else { /* (the last token tile) */
#pragma unroll
                for (int i = 0; i < R; i++) {
                    raw[i] = 0;
                    if (32 * i < live)
                        raw[i] = BYTES == 1 ? (uint32_t)__ldg((const uint8_t *)(at + i * row_step))
                                            : __ldg((const uint32_t *)(at + i * row_step));
                }
            }
            if (round) mbar_wait_sleeping_sa(empty_sa + 8u * (uint32_t)s, (round - 1) & 1);
            const float bs = fw_bs_get(bsrc, kb);
            const uint32_t fs = fac_sa + (uint32_t)(s * BM * 4);
#pragma unroll
            for (int i = 0; i < R; i++) {
                const float a = SF == HFP4_DTYPE_FP32 ? __uint_as_float(raw[i])
                                : ue8m0_to_float(SF == HFP4_DTYPE_UE8M0_PACKED ? (raw[i] >> (8 * (kb & 3))) & 255u : raw[i]);
                *(float *)smem_ptr(fs + 128u * i) = a * bs;
            }
        } else { /* (timing-only builds: no factors, the wait and the arrival only; or factors of 1) */
            if (round) mbar_wait_sleeping_sa(empty_sa + 8u * (uint32_t)s, (round - 1) & 1);
            if (FW_DIAG_CONST_FACTORS) {
#pragma unroll
                for (int i = 0; i < R; i++) *(float *)smem_ptr(fac_sa + (uint32_t)(s * BM * 4) + 128u * i) =
                        HFP4_FW_DIAG_FACTOR_PART == 3 ? 1.0f / 65536 : 1.0f;
            }
        }
        mbar_arrive_sa(full_sa + 8u * (uint32_t)s); /* (release: the factors are visible to whoever sees the phase) */
        s += FW_SCALE_WARPS;
        if (s >= cfg::STAGES) {
            s -= cfg::STAGES;
            round++;
        }
        kb += FW_SCALE_WARPS;
        while (kb >= kblocks) {
            kb -= kblocks;
            t = fw_next_tile<BM, GM>(walk, p, t + gridDim.x, tiles, tiles_m, tiles_n);
            fresh = true;
        }
    }
}


/* The producer thread's copies of the CTA's it-th stage: the wait for the stage to be free, then A's
 * rows a_row.. of group a_z (through a_map: half, a 64-row box, SKIP kernels) and the weight
 * tile nt of expert e, K-block kb, onto the stage's full barrier (whole boxes, zeros included) */
template <int BM, bool DTMA>
static __device__ __forceinline__ void fw_load_stage(uint8_t *a_tiles, uint8_t *b_tiles, uint64_t *full, uint64_t *empty,
                                                     uint32_t it, const CUtensorMap *a_map, bool half,
                                                     const CUtensorMap *b_map, int64_t kb, int64_t a_row, int32_t a_z,
                                                     int64_t nt, int32_t e) {
    typedef fw_cfg<BM, DTMA> cfg;
    const int s = (int)(it % cfg::STAGES);
    if (it >= cfg::STAGES) mbar_wait_sleeping(&empty[s], ((it / cfg::STAGES) - 1) & 1);
    mbar_arrive_expect_tx(&full[s], (half ? cfg::A_BYTES / 2 : cfg::A_BYTES) + FW_B_BYTES);
    tma_load_3d(a_tiles + s * cfg::A_BYTES, a_map, &full[s], (int32_t)(kb * FW_TILE), (int32_t)a_row, a_z);
    tma_load_3d(b_tiles + s * FW_B_BYTES, b_map, &full[s], (int32_t)(kb * FW_TILE), (int32_t)(nt * FW_TILE), e);
}

template <int BM, bool DTMA, int GM, bool SKIP>
__global__ void __launch_bounds__(fw_cfg<BM, DTMA>::THREADS, 1)
    hfp4_sm90_fp8_fp8_gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                                 const __grid_constant__ CUtensorMap d_map, const __grid_constant__ sm90_fp8w_params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef fw_cfg<BM, DTMA> cfg;
    constexpr bool GROUPED = GM != FW_DENSE;
    static_assert(!GROUPED || BM == 128, "the grouped forms: 128-row tiles, one expert's segment each");
    static_assert(!SKIP || GROUPED, "idle warpgroups: the grouped forms' padding and rows past masked_m");
    constexpr int STAGES = cfg::STAGES;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    uint8_t *a_tiles = smem, *b_tiles = smem + STAGES * cfg::A_BYTES;
    uint8_t *staging = b_tiles + STAGES * FW_B_BYTES; /* (DTMA: a consumer warpgroup's D tile each) */
    float *factors = (float *)(staging + cfg::STAGING_BYTES);
    uint64_t *full = (uint64_t *)(factors + STAGES * BM), *empty = full + STAGES;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 1 + 32); /* the TMA thread's expect_tx arrival, the factor lanes */
            mbar_init(&empty[s], cfg::WGS * 128); /* every consumer thread */
        }
        mbar_fence_init();
    }
    __syncthreads();
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    const int64_t tiles_m = (p.m + BM - 1) / BM * (GM == FW_MASKED ? p.groups : 1), tiles_n = (p.n + FW_TILE - 1) / FW_TILE;
    const int64_t tiles = tiles_m * tiles_n, kblocks = p.k / FW_TILE;
    if (wg == cfg::WGS) { /* the producer warpgroup: one thread issues every stage's two copies, warps 1-3 its factors */
        warpgroup_reg_dealloc<GROUPED ? cfg::GROUPED_PRODUCER_REGS : cfg::PRODUCER_REGS>();
        if (tid / 32 >= 1 && tid / 32 <= FW_SCALE_WARPS) {
            /* warps 1 .. FW_SCALE_WARPS take turns at the stages' factors (fw_factor_warp) */
            const int sw = tid / 32 - 1;
            if (p.a_scale_dtype == HFP4_DTYPE_FP32) {
                if (p.a_scale_stride_mn == 1)
                    fw_factor_warp<BM, DTMA, HFP4_DTYPE_FP32, true, GM>(p, factors, full, empty, sw, tiles_m, tiles_n);
                else
                    fw_factor_warp<BM, DTMA, HFP4_DTYPE_FP32, false, GM>(p, factors, full, empty, sw, tiles_m, tiles_n);
            } else if (p.a_scale_dtype == HFP4_DTYPE_UE8M0) {
                fw_factor_warp<BM, DTMA, HFP4_DTYPE_UE8M0, false, GM>(p, factors, full, empty, sw, tiles_m, tiles_n);
            } else {
                fw_factor_warp<BM, DTMA, HFP4_DTYPE_UE8M0_PACKED, false, GM>(p, factors, full, empty, sw, tiles_m, tiles_n);
            }
        }
        if constexpr (GM == FW_MASKED) {
            if (tid < 32) { /* (warp 0 walks the groups together; lane 0 issues) */
                if (tid == 0) {
                    tma_prefetch_descriptor(&a_map);
                    tma_prefetch_descriptor(&b_map);
                    if (SKIP) tma_prefetch_descriptor(&p.a_map64);
                }
                uint32_t it = 0;
                fw_masked_walk walk = fw_masked_walk_start();
                for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
                    if (!fw_masked_walk_to<BM>(walk, p, t, tiles_n)) break;
                    int64_t nt;
                    const fw_masked_tile tr = fw_masked_place<BM>(walk, t, nt);
                    if (tid == 0) {
                        const bool half = SKIP && fw_wg_idle<BM, GM>(p, tr.first + 64, tr.end);
                        for (int64_t kb = 0; kb < kblocks; kb++, it++)
                            fw_load_stage<BM, DTMA>(a_tiles, b_tiles, full, empty, it, half ? &p.a_map64 : &a_map, half,
                                                    &b_map, kb, tr.first, tr.e, nt, tr.e);
                    }
                    __syncwarp();
                }
            }
        } else if (tid == 0) {
            tma_prefetch_descriptor(&a_map);
            tma_prefetch_descriptor(&b_map);
            if (SKIP) tma_prefetch_descriptor(&p.a_map64);
            uint32_t it = 0;
            for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
                int64_t mt, nt;
                fw_tile(t, tiles_m, tiles_n, mt, nt);
                const int32_t e = fw_expert<BM, GM == FW_CONTIGUOUS>(p, mt);
                if (GROUPED && e < 0) continue; /* (a padding tile: no stages) */
                const bool half = SKIP && fw_wg_idle<BM, GM>(p, mt * BM + 64, p.m);
                for (int64_t kb = 0; kb < kblocks; kb++, it++)
                    fw_load_stage<BM, DTMA>(a_tiles, b_tiles, full, empty, it, half ? &p.a_map64 : &a_map, half, &b_map,
                                            kb, mt * BM, 0, nt, e);
            }
        }
        return;
    }
    warpgroup_reg_alloc<GROUPED ? cfg::GROUPED_CONSUMER_REGS : cfg::CONSUMER_REGS>();
    const int lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
    /* the thread's token rows r0 and r0 + 8 of the tile (and, at BM = 256, r0 + 64 and r0 + 72) */
    const int r0 = cfg::WG_ROWS * wg + warp * 16 + g;
    fw_consumer_addrs ad;
    ad.a_lo = (uint32_t)warp_uniform(
        (int32_t)(smem_desc_lo_k128(smem_addr(a_tiles) & 0x3FFFFu) + (uint32_t)cfg::WG_ROWS * wg * 8u));
    ad.b_lo = (uint32_t)warp_uniform((int32_t)smem_desc_lo_k128(smem_addr(b_tiles) & 0x3FFFFu));
    ad.full = (uint32_t)warp_uniform((int32_t)smem_addr(full));
    ad.factors = smem_addr(factors) + 4u * (uint32_t)r0;
    int stage = 0; /* the consumers' place in the CTA's stage sequence, as the producer counts it */
    uint32_t phase = 0;
    fw_masked_walk walk = fw_masked_walk_start(); /* (MASKED: each consumer warp walks on its own) */
    constexpr bool AHEAD = HFP4_FW_LAYOUT_AHEAD && GM == FW_CONTIGUOUS && !SKIP; /* (fw_layout_ahead says why) */
    fw_tile_ahead ahead = {0, 0, 0, 0, {0, 0}}, cur = ahead; /* (AHEAD: fw_layout_ahead) */
    if constexpr (AHEAD) ahead = fw_layout_ahead<BM>(p, blockIdx.x, tiles, tiles_m, tiles_n, wg, r0);
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        int64_t mt = 0, nt;
        fw_masked_tile mk = {0, 0, 0}; /* (MASKED: the tile's group, first row and row bound) */
        if constexpr (GM == FW_MASKED) {
            if (!fw_masked_walk_to<BM>(walk, p, t, tiles_n)) break;
            mk = fw_masked_place<BM>(walk, t, nt);
        } else if constexpr (AHEAD) {
            cur = ahead;
            mt = cur.mt;
            nt = cur.nt;
            ahead = fw_layout_ahead<BM>(p, t + gridDim.x, tiles, tiles_m, tiles_n, wg, r0);
        } else {
            fw_tile(t, tiles_m, tiles_n, mt, nt);
        }
        const int64_t row0 = (GM == FW_MASKED ? mk.first : mt * BM) + r0;
        const int32_t e = AHEAD ? cur.e : GM == FW_MASKED ? mk.e : fw_expert<BM, GM == FW_CONTIGUOUS>(p, mt);
        /* (a padding tile whose rows may hold anything: not visited; a masked tile is always live) */
        if (GROUPED && e < 0 && (GM == FW_MASKED || !p.pad_zero)) continue;
        float fin[64 * cfg::SUB];
#pragma unroll
        for (int i = 0; i < 64 * cfg::SUB; i++) fin[i] = 0.0f;
        if (!GROUPED || e >= 0) { /* (a padding tile takes no stages: its rows are written +0) */
            /* (SKIP: this warpgroup's 64 rows all padding, past m or past masked_m; the same in every
             * lane, and said so through warp_uniform: read from layout as a plain bool, the branch
             * on it made ptxas keep (stage, phase) in per-thread registers, and the overlapped loop
             * moved each descriptor to a uniform register (R2UR) before its wgmma: 37 R2UR in the
             * contiguous TMA-store kernel against 17 without SKIP, 19 now, none between the
             * loop's wgmmas; a suspect for the SKIP kernel's -7 % at prefill, bench/RESULTS.md v46) */
            bool idle = false;
            if constexpr (SKIP && AHEAD) idle = warp_uniform((int32_t)(cur.wg_entry < 0)) != 0;
            else if constexpr (SKIP)
                idle = warp_uniform((int32_t)fw_wg_idle<BM, GM>(p, (GM == FW_MASKED ? mk.first : mt * BM) + 64 * wg,
                                                                mk.end)) != 0;
            if (idle) {
                fw_skip_tile<BM, DTMA>(ad, stage, phase, (int32_t)kblocks);
            } else if constexpr (cfg::SUB == 2) {
                fw_consume_tile_sub2(fin, ad, stage, phase, (int32_t)kblocks);
            } else if constexpr (cfg::OVERLAP) {
                fw_consume_tile_overlapped<BM, DTMA>(fin, ad, stage, phase, (int32_t)kblocks);
            } else { /* (the 192-row tile: its consumers have no registers for a second set) */
                float acc[64];
                const int32_t kb32 = (int32_t)kblocks;
                for (int32_t kb = 0; kb < kb32; kb++) {
                    float f0, f1;
                    fw_block<BM, DTMA>(acc, ad, stage, phase, f0, f1);
                    promote_token_rows_n128(fin, acc, f0, f1);
                }
            }
        }
        /* CONTIGUOUS: the thread's padding rows (row0: registers 4j, 4j + 1; row0 + 8: 4j + 2, 4j + 3)
         * are written +0 without C where pad_zero asks (their sums may be NaN: A's padding rows and
         * scales may hold anything) */
        bool pad[2] = {false, false};
        if constexpr (GM == FW_CONTIGUOUS) {
#pragma unroll
            for (int h = 0; h < 2; h++)
                pad[h] = p.pad_zero && (e < 0 || (AHEAD ? cur.row_entry[h] < 0
                                                        : row0 + 8 * h < p.m && __ldg(p.layout + row0 + 8 * h) < 0));
#pragma unroll
            for (int j = 0; j < 16; j++) {
                if (pad[0]) fin[4 * j] = fin[4 * j + 1] = 0.0f;
                if (pad[1]) fin[4 * j + 2] = fin[4 * j + 3] = 0.0f;
            }
        }
        if (FW_DIAG_NO_STORES(p)) continue; /* (timing-only builds) */
        if constexpr (DTMA && GM != FW_MASKED) {
            fw_store_tile_tma(&d_map, fin, smem_addr(staging) + (uint32_t)(wg * FW_STAGING_BYTES), wg, tid,
                              (int32_t)(nt * FW_TILE), (int32_t)(mt * BM + 64 * wg), 0);
        } else {
            /* MASKED: the TMA store clips only at m, so a warpgroup whose 64 rows cross masked_m
             * stores from the registers (rows from masked_m on are left as they were) */
            if (DTMA && mk.first + 64 * wg + 64 <= mk.end) {
                fw_store_tile_tma(&d_map, fin, smem_addr(staging) + (uint32_t)(wg * FW_STAGING_BYTES), wg, tid,
                                  (int32_t)(nt * FW_TILE), (int32_t)(mk.first + 64 * wg), e);
                continue;
            }
            const int64_t end = GM == FW_MASKED ? mk.end : p.m, goff = GM == FW_MASKED ? e * p.d_stride_group : 0;
            /* D from the registers: rows row0 (registers 4j, 4j + 1) and row0 + 8 (4j + 2, 4j + 3),
             * columns 8 j + 2 t4 and + 1 of the tile */
#pragma unroll
            for (int sub = 0; sub < cfg::SUB; sub++) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int64_t row = row0 + 64 * sub + 8 * h;
                    if (row >= end) continue;
#pragma unroll
                    for (int j = 0; j < 16; j++) {
                        const int64_t col = nt * FW_TILE + 8 * j + 2 * t4;
                        if (col < p.n)
                            fw_store(p, goff, row, col, fin[64 * sub + 4 * j + 2 * h],
                                     fin[64 * sub + 4 * j + 2 * h + 1], !pad[h]);
                    }
                }
            }
        }
    }
    if (DTMA && tid == 0) bulk_wait_all(); /* (the last stores' reads of shared memory, before the CTA ends) */
#else
    __trap(); /* built for another architecture: never launched there (the host checks the device) */
#endif
}

/* The launch of the BM-row tile's kernel (the caller checked its shared memory against the device);
 * DTMA: D through shared memory to TMA stores (BF16 D, no C, ld and D 16-byte multiples, checked by
 * the caller), or, where the driver rejects D's map, the same tile storing from the registers;
 * SKIP: the grouped forms' kernel that skips idle warpgroups (the plan's skip_idle) */
template <int BM, bool DTMA, int GM = FW_DENSE, bool SKIP = false>
static hfp4_status fw_launch(const char *fn, const hfp4_gemm_problem *p, const hfp4_current_device *dev,
                             const sm90_fp8w_params *k, cudaStream_t stream) {
    typedef fw_cfg<BM, DTMA> cfg;
    CUtensorMap a_map, b_map, d_map;
    const uint32_t a_box[3] = {FW_TILE, BM, 1}, b_box[3] = {FW_TILE, FW_TILE, 1};
    constexpr bool GROUPED = GM != FW_DENSE, MASKED = GM == FW_MASKED;
    /* A as [1][m][k] (MASKED: [G][m][k], the group the copies' third coordinate) */
    const int64_t groups = MASKED ? p->num_groups : 1;
    const int64_t a_dims[3] = {p->k, p->m, groups},
                  a_strides[2] = {p->a.ld, MASKED && groups > 1 ? p->a.stride_group : p->a.ld * p->m};
    /* B as [G][n][k] (grouped forms: the expert is the copies' third coordinate) */
    const int64_t b_dims[3] = {p->k, p->n, GROUPED ? p->num_groups : 1},
                  b_strides[2] = {p->b.ld, GROUPED && p->num_groups > 1 ? p->b.stride_group : p->b.ld * p->n};
    HFP4_TRY(hfp4__make_tensor_map_u8_3d(fn, &a_map, p->a.data, a_dims, a_strides, a_box));
    sm90_fp8w_params k64 = *k; /* (SKIP: with A's 64-row box) */
    if (SKIP) {
        const uint32_t a_box64[3] = {FW_TILE, 64, 1};
        HFP4_TRY(hfp4__make_tensor_map_u8_3d(fn, &k64.a_map64, p->a.data, a_dims, a_strides, a_box64));
    }
    HFP4_TRY(hfp4__make_tensor_map_u8_3d(fn, &b_map, p->b.data, b_dims, b_strides, b_box));
    d_map = a_map; /* (unused without the TMA store) */
    if (DTMA) {
        /* D as [1][m][n] BF16; a consumer warpgroup's box: 64 columns (128 bytes, the swizzle's row)
         * x its 64 token rows, two a tile */
        const int64_t d_dims[3] = {p->n, p->m, groups},
                      d_strides[2] = {p->d.ld * 2, (MASKED && groups > 1 ? p->d.stride_group : p->d.ld * p->m) * 2};
        const uint32_t d_box[3] = {64, 64, 1};
        if (hfp4__make_tensor_map_bf16_3d(fn, "D", &d_map, p->d.data, d_dims, d_strides, d_box) != HFP4_OK) {
            hfp4_clear_error(); /* (the call succeeds: no stale message) */
            return fw_launch<BM, false, GM, SKIP>(fn, p, dev, k, stream);
        }
    }
    auto kernel = hfp4_sm90_fp8_fp8_gemm_kernel<BM, DTMA, GM, SKIP>;
    HFP4_CUDA_TRY(fn, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cfg::SMEM));
    static int built_regs = 0; /* (per instantiation) */
    HFP4_TRY(hfp4__require_kernel_regs(fn, "fp8-weights kernel", (const void *)kernel, &built_regs, cfg::WGS + 1,
                                       GROUPED ? cfg::GROUPED_PRODUCER_REGS + cfg::WGS * cfg::GROUPED_CONSUMER_REGS
                                               : cfg::PRODUCER_REGS + cfg::WGS * cfg::CONSUMER_REGS));
    const int64_t tiles = ((p->m + BM - 1) / BM) * groups * ((p->n + FW_TILE - 1) / FW_TILE);
    const int grid = (int)(tiles < dev->num_sms ? tiles : dev->num_sms);
    kernel<<<grid, cfg::THREADS, cfg::SMEM, stream>>>(a_map, b_map, d_map, k64);
    HFP4_CUDA_TRY(fn, cudaGetLastError());
    return HFP4_OK;
}

/* The shared memory the BM-row tile may launch with: with the TMA store (dtma), the larger of its
 * kernel and the register-store one, which fw_launch falls back to where the driver rejects D's map */
template <int BM>
static int fw_smem_needed(bool dtma) {
    if constexpr (BM == 256) return fw_cfg<256, false>::SMEM;
    else return dtma && fw_cfg<BM, true>::SMEM > fw_cfg<BM, false>::SMEM ? fw_cfg<BM, true>::SMEM : fw_cfg<BM, false>::SMEM;
}

hfp4_status hfp4__sm90_fp8_weights_gemm(const char *fn, const hfp4_gemm_problem *p, cudaStream_t stream, int launch) {
    HFP4_TRY(hfp4_check_problem(p, 1));
    static int switch_cache = -1;
    HFP4_REQUIRE(hfp4__env_switch("HFP4_SM90_FP8_WEIGHTS", 1, &switch_cache),
                 "%s: b.dtype = fp8_e4m3: the SM90 kernel for FP8 weights is switched off by the environment "
                 "(HFP4_SM90_FP8_WEIGHTS=0); use FP4 weights or another backend",
                 fn);
    /* dense, m-grouped contiguous (expert ids) or masked (bench/RESULTS.md v45, v46) */
    const int contiguous = p->grouping == HFP4_GROUPING_CONTIGUOUS, masked = p->grouping == HFP4_GROUPING_MASKED;
    const int grouped = contiguous || masked;
    HFP4_REQUIRE(p->grouping == HFP4_GROUPING_NONE || grouped,
                 "%s: fp8 weights: grouping %d has no kernel (dense, contiguous and masked have)", fn,
                 (int)p->grouping);
    if (contiguous)
        HFP4_REQUIRE(p->m_alignment == 0 || p->m_alignment % 128 == 0,
                     "%s: fp8 weights, contiguous: m_alignment = %d; the kernel's 128-row tiles need segments "
                     "aligned to a multiple of 128",
                     fn, (int)p->m_alignment);
    if (grouped)
        HFP4_REQUIRE(p->num_groups == 1 || (p->b.stride_group % 16 == 0 && p->b.stride_group < ((int64_t)1 << 40)),
                     "%s: fp8 weights, grouped: b.stride_group = %lld bytes must be a multiple of 16 below "
                     "2^40 for the TMA loads",
                     fn, (long long)p->b.stride_group);
    if (masked)
        HFP4_REQUIRE(p->num_groups == 1 || (p->a.stride_group % 16 == 0 && p->a.stride_group < ((int64_t)1 << 40)),
                     "%s: fp8 weights, masked: a.stride_group = %lld bytes must be a multiple of 16 below "
                     "2^40 for the TMA loads",
                     fn, (long long)p->a.stride_group);
    HFP4_REQUIRE(p->a.dtype == HFP4_DTYPE_FP8_E4M3 && p->a.scales.gran_k == 128,
                 "%s: fp8 weights: a.dtype = %s with gran_k = %d; the kernel takes FP8 activations with 1x128 scales",
                 fn, hfp4_dtype_name(p->a.dtype), (int)p->a.scales.gran_k);
    HFP4_REQUIRE(p->b.scales.gran_mn == 128 && p->b.scales.gran_k == 128,
                 "%s: fp8 weights: b.scales (%d, %d); the kernel takes 128 x 128 block scales", fn,
                 (int)p->b.scales.gran_mn, (int)p->b.scales.gran_k);
    HFP4_REQUIRE(p->k % FW_TILE == 0, "%s: fp8 weights: k = %lld must be a multiple of 128 for this kernel", fn,
                 (long long)p->k);
    HFP4_REQUIRE(p->a.ld % 16 == 0 && p->b.ld % 16 == 0 && (uintptr_t)p->a.data % 16 == 0 &&
                     (uintptr_t)p->b.data % 16 == 0,
                 "%s: fp8 weights: a.ld = %lld, b.ld = %lld (bytes) and a.data = %p, b.data = %p must be 16-byte "
                 "multiples / aligned for the TMA loads",
                 fn, (long long)p->a.ld, (long long)p->b.ld, p->a.data, p->b.data);
    HFP4_REQUIRE(p->m <= ((int64_t)1 << 30) && p->n <= ((int64_t)1 << 30) && p->k <= ((int64_t)1 << 30),
                 "%s: fp8 weights: m = %lld, n = %lld, k = %lld exceed the 2^30 TMA coordinate range", fn,
                 (long long)p->m, (long long)p->n, (long long)p->k);
    /* (the tensor maps' outer stride, ld x rows, must stay below 2^40 bytes: checked here, so that
     * hfp4_gemm_supported answers what the launch would) */
    HFP4_REQUIRE(p->a.ld * p->m < ((int64_t)1 << 40) && p->b.ld * p->n < ((int64_t)1 << 40),
                 "%s: fp8 weights: a (%lld x %lld bytes) or b (%lld x %lld) exceeds the 2^40-byte TMA stride range",
                 fn, (long long)p->m, (long long)p->a.ld, (long long)p->n, (long long)p->b.ld);
    /* (the element alignment of the scales, D and C, which the kernel reads and writes as words, is
     * a contract rule: hfp4_check_problem above rejects a misaligned pointer as INVALID_ARGUMENT) */
    const int esz = p->d.dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    hfp4_current_device dev;
    HFP4_TRY(hfp4__require_sm90(fn, &dev));
    /* the kernel, tile and form (sm90_fp8_weights_plan.c: the rules and their measurements) */
    hfp4_sm90_fp8w_plan plan;
    hfp4__sm90_fp8w_plan(p, dev.num_sms, &plan);
    const int bm = plan.block_m, dtma = plan.tma_store;
    const int smem = bm == 256 ? fw_smem_needed<256>(false) : bm == 192 ? fw_smem_needed<192>(dtma) : fw_smem_needed<128>(dtma);
    HFP4_REQUIRE(smem <= dev.max_smem_optin, "%s: fp8 weights: the kernel needs %d bytes of shared memory, the "
                 "device has %d", fn, smem, dev.max_smem_optin);
    if (!launch) return HFP4_OK;
    /* a few token rows (dense; masked when opted in): the kernel whose warps split K (fp8_fp8_gemv.cu) */
    if (plan.kernel == HFP4_FP8W_FEW_ROWS) return hfp4__sm90_fp8_gemv(fn, p, plan.warps_per_rows, dev.num_sms, stream);

    sm90_fp8w_params k;
    memset(&k, 0, sizeof k);
    k.m = p->m;
    k.n = p->n;
    k.k = p->k;
    k.a_scales = p->a.scales.data;
    k.a_scale_dtype = (int32_t)p->a.scales.dtype;
    k.a_scale_stride_mn = p->a.scales.stride_mn;
    k.a_scale_stride_k = p->a.scales.stride_k;
    k.b_scales = p->b.scales.data;
    k.b_scale_dtype = (int32_t)p->b.scales.dtype;
    k.b_scale_stride_mn = p->b.scales.stride_mn;
    k.b_scale_stride_k = p->b.scales.stride_k;
    k.d = p->d.data;
    k.c = p->d.c;
    k.ldd = p->d.ld;
    k.d_fp32 = p->d.dtype == HFP4_DTYPE_FP32;
    k.d_pairs = p->d.ld % 2 == 0 && (uintptr_t)p->d.data % (2 * esz) == 0 &&
                (p->d.c == NULL || (uintptr_t)p->d.c % (2 * esz) == 0);
    if (grouped) {
        k.layout = p->layout;
        k.b_scale_stride_group = p->b.scales.stride_group;
        k.pad_zero = p->d_padding != HFP4_D_PADDING_ANY;
        k.groups = p->num_groups;
        k.a_scale_stride_group = p->a.scales.stride_group;
        k.d_stride_group = p->d.stride_group;
        const int skip = plan.skip_idle;
        if (masked && skip)
            return dtma ? fw_launch<128, true, FW_MASKED, true>(fn, p, &dev, &k, stream)
                        : fw_launch<128, false, FW_MASKED, true>(fn, p, &dev, &k, stream);
        if (masked)
            return dtma ? fw_launch<128, true, FW_MASKED>(fn, p, &dev, &k, stream)
                        : fw_launch<128, false, FW_MASKED>(fn, p, &dev, &k, stream);
        if (skip)
            return dtma ? fw_launch<128, true, FW_CONTIGUOUS, true>(fn, p, &dev, &k, stream)
                        : fw_launch<128, false, FW_CONTIGUOUS, true>(fn, p, &dev, &k, stream);
        return dtma ? fw_launch<128, true, FW_CONTIGUOUS>(fn, p, &dev, &k, stream)
                    : fw_launch<128, false, FW_CONTIGUOUS>(fn, p, &dev, &k, stream);
    }
    if (bm == 256) return fw_launch<256, false>(fn, p, &dev, &k, stream);
    if (bm == 192) return dtma ? fw_launch<192, true>(fn, p, &dev, &k, stream) : fw_launch<192, false>(fn, p, &dev, &k, stream);
    return dtma ? fw_launch<128, true>(fn, p, &dev, &k, stream) : fw_launch<128, false>(fn, p, &dev, &k, stream);
}
