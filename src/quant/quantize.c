/*
 * quantize.c - the CPU quantizers: per-token FP8, per-block FP8 and per-token FP4 casts with
 * DeepGEMM's semantics (deep_gemm/utils/math.py; docs/FORMATS.md, "Quantizers").
 *
 * Every cast works on tiles: one row x gran_k columns (per-token) or 128 x 128 (per-block). A tile
 * is zero-padded in DeepGEMM, which never changes max|x|, so here a tile is simply clipped to the
 * matrix. Per tile, in FP32 exactly as torch evaluates it:
 *     amax = max|x| (NaN propagates, as torch.amax does), amax = max(amax, 1e-4f)
 *     sf   = amax / 448 (FP8) or amax / 6 (FP4); sf = ceil_to_ue8m0(sf) if use_ue8m0 (NaN, the
 *            UE8M0 byte 255, when amax is NaN or Inf)
 *     q    = encode(x * (1.0f / sf))      (the reciprocal first, then one FP32 product)
 * The rounding of each step matters: the tests compare codes bit for bit with DeepGEMM's.
 */
#include <math.h>

#include "scale_access.h"

/* Below this many elements the cast runs inline: thread start-up would cost more than it saves. */
enum { PARALLEL_MIN_ELEMENTS = 1 << 16 };

/* torch's clamp(1e-4) on an FP32 tensor compares against the scalar cast to float. */
#define AMAX_FLOOR 1e-4f

typedef enum quant_target { TARGET_FP8, TARGET_FP4 } quant_target;

/* Everything a worker needs; validated before any worker runs. */
typedef struct quant_job {
    const void *x;
    hfp4_dtype x_dtype;
    int64_t m, k, ldx;
    int use_ue8m0;
    uint8_t *q;
    int64_t ldq;
    const hfp4_scales *sf;
    quant_target target;
    int32_t tile_rows, tile_cols; /* 1 x gran_k per token, 128 x 128 per block */
    int64_t tiles_k;              /* ceil(k / tile_cols)                       */
} quant_job;

static inline float load_x(const quant_job *job, int64_t r, int64_t c) {
    int64_t i = r * job->ldx + c;
    if (job->x_dtype == HFP4_DTYPE_BF16) return hfp4_bf16_decode(((const uint16_t *)job->x)[i]);
    return ((const float *)job->x)[i];
}

/* One tile's scale: the FP32 value and, when use_ue8m0, its exponent byte. */
typedef struct tile_scale {
    float value;
    uint8_t e;
} tile_scale;

/* Quantizes rows [r0, r1) x columns [c0, c1) (already clipped to the matrix) and returns the scale.
 * For FP4, c0 and c1 are even (k is even and tiles are 32 or 128 wide), so pairs never straddle. */
static tile_scale quantize_tile(const quant_job *job, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    float amax = 0.0f;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) {
            float a = fabsf(load_x(job, r, c));
            if (a > amax || a != a) amax = a; /* once NaN, amax stays NaN: no a > NaN */
        }
    if (amax < AMAX_FLOOR) amax = AMAX_FLOOR; /* NaN compares false and stays NaN, as torch.clamp */

    tile_scale s = {0.0f, 0};
    s.value = job->target == TARGET_FP8 ? amax / 448.0f : amax / 6.0f;
    if (job->use_ue8m0) {
        s.value = hfp4_ceil_to_ue8m0(s.value);
        /* ceil_to_ue8m0 returns 2^(e-127) with e in 1..254, which converts exactly, or NaN for a
         * NaN or Inf amax: the UE8M0 NaN, byte 255, so the group dequantizes to NaN as with FP32
         * scales instead of vanishing */
        if (s.value != s.value) s.e = 255;
        else (void)hfp4_ue8m0_from_float(s.value, &s.e);
    }
    const float inv = 1.0f / s.value;

    for (int64_t r = r0; r < r1; r++) {
        uint8_t *qrow = job->q + r * job->ldq;
        if (job->target == TARGET_FP8) {
            for (int64_t c = c0; c < c1; c++) qrow[c] = hfp4_fp8_encode(load_x(job, r, c) * inv);
        } else {
            for (int64_t c = c0; c < c1; c += 2) {
                uint8_t lo = hfp4_fp4_encode(load_x(job, r, c) * inv);
                uint8_t hi = hfp4_fp4_encode(load_x(job, r, c + 1) * inv);
                qrow[c / 2] = (uint8_t)(lo | (hi << 4)); /* even index in the low nibble */
            }
        }
    }
    return s;
}

/* Per-token worker: one row, all its K-groups. Packed UE8M0 words are assembled whole and stored
 * once, so missing groups of the last word get byte 127 (1.0) like DeepGEMM's python helper, and
 * the destination is never read. */
static void per_token_row(void *arg, int64_t r) {
    const quant_job *job = (const quant_job *)arg;
    const hfp4_scales *sf = job->sf;
    uint32_t word = 0;
    for (int64_t j = 0; j < job->tiles_k; j++) {
        int64_t c0 = j * job->tile_cols;
        int64_t c1 = c0 + job->tile_cols < job->k ? c0 + job->tile_cols : job->k;
        tile_scale s = quantize_tile(job, r, r + 1, c0, c1);
        if (sf->dtype != HFP4_DTYPE_UE8M0_PACKED) {
            hfp4__scale_put(sf, 0, r, j, s.value, s.e);
            continue;
        }
        word |= (uint32_t)s.e << (8 * (j & 3));
        int last = j == job->tiles_k - 1;
        if ((j & 3) == 3 || last) {
            for (int64_t pad = (j & 3) + 1; pad < 4; pad++) word |= 127u << (8 * pad);
            int byte;
            int64_t off = hfp4__scale_offset(sf, 0, r, j & ~(int64_t)3, &byte);
            ((uint32_t *)sf->data)[off] = word;
            word = 0;
        }
    }
}

/* Per-block worker: one 128 x 128 block, index = block_row * tiles_k + block_col. */
static void per_block_tile(void *arg, int64_t index) {
    const quant_job *job = (const quant_job *)arg;
    int64_t br = index / job->tiles_k, bc = index % job->tiles_k;
    int64_t r0 = br * job->tile_rows, c0 = bc * job->tile_cols;
    int64_t r1 = r0 + job->tile_rows < job->m ? r0 + job->tile_rows : job->m;
    int64_t c1 = c0 + job->tile_cols < job->k ? c0 + job->tile_cols : job->k;
    tile_scale s = quantize_tile(job, r0, r1, c0, c1);
    hfp4__scale_put(job->sf, 0, br, bc, s.value, s.e);
}

/* The checks every cast shares; q_row_bytes is the number of bytes one row of q needs. */
static hfp4_status check_common(const char *fn, const void *x, hfp4_dtype x_dtype, int64_t m, int64_t k, int64_t ldx,
                                const uint8_t *q, int64_t ldq, const hfp4_scales *sf, quant_target target) {
    HFP4_CHECK_ARG(x != NULL, "%s: x is NULL", fn);
    HFP4_CHECK_ARG(q != NULL, "%s: q is NULL", fn);
    HFP4_CHECK_ARG(sf != NULL, "%s: sf is NULL", fn);
    HFP4_CHECK_ARG(x_dtype == HFP4_DTYPE_FP32 || x_dtype == HFP4_DTYPE_BF16,
                   "%s: x_dtype = %s (%d) must be fp32 or bf16", fn, hfp4_dtype_name(x_dtype), (int)x_dtype);
    HFP4_CHECK_ARG(m > 0, "%s: m = %lld must be > 0", fn, (long long)m);
    HFP4_CHECK_ARG(k > 0, "%s: k = %lld must be > 0", fn, (long long)k);
    const uintptr_t x_align = x_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    HFP4_CHECK_ARG((uintptr_t)x % x_align == 0, "%s: x = %p must be %d-byte aligned for %s", fn, x, (int)x_align,
                   hfp4_dtype_name(x_dtype));
    HFP4_CHECK_ARG(sf->dtype == HFP4_DTYPE_UE8M0 || sf->data == NULL || (uintptr_t)sf->data % 4 == 0,
                   "%s: sf.data = %p must be 4-byte aligned for %s scales", fn, sf->data, hfp4_dtype_name(sf->dtype));
    if (target == TARGET_FP4) HFP4_CHECK_ARG(k % 2 == 0, "%s: k = %lld must be even", fn, (long long)k);
    HFP4_CHECK_ARG(ldx >= k, "%s: ldx = %lld must be >= k = %lld", fn, (long long)ldx, (long long)k);
    int64_t row_bytes = target == TARGET_FP8 ? k : k / 2;
    HFP4_CHECK_ARG(ldq >= row_bytes, "%s: ldq = %lld must be >= %lld (bytes of one row of q for k = %lld)", fn,
                   (long long)ldq, (long long)row_bytes, (long long)k);
    HFP4_CHECK_ARG(hfp4__extent_ok(m, ldx, k), "%s: m = %lld rows of ldx = %lld: x's last element lies past 2^60", fn,
                   (long long)m, (long long)ldx);
    HFP4_CHECK_ARG(hfp4__extent_ok(m, ldq, row_bytes), "%s: m = %lld rows of ldq = %lld: q's last byte lies past 2^60",
                   fn, (long long)m, (long long)ldq);
    return HFP4_OK;
}

/* UE8M0 storage can only hold powers of two, which only use_ue8m0 produces. */
static hfp4_status check_ue8m0_request(const char *fn, const hfp4_scales *sf, int use_ue8m0) {
    HFP4_CHECK_ARG(use_ue8m0 || sf->dtype == HFP4_DTYPE_FP32,
                   "%s: sf.dtype = %s needs use_ue8m0 = 1 (use_ue8m0 = 0 gives arbitrary scales: use fp32)", fn,
                   hfp4_dtype_name(sf->dtype));
    return HFP4_OK;
}

static void run_job(quant_job *job, int64_t items, void (*fn)(void *, int64_t)) {
    int threads = job->m * job->k >= PARALLEL_MIN_ELEMENTS ? hfp4__thread_count(0, items) : 1;
    /* A failed thread start still completes the work inline, so the result is ignored. */
    (void)hfp4__parallel_for(threads, items, fn, job);
}

static hfp4_status quantize_per_token(const char *fn, quant_target target, const void *x, hfp4_dtype x_dtype,
                                      int64_t m, int64_t k, int64_t ldx, int use_ue8m0, uint8_t *q, int64_t ldq,
                                      const hfp4_scales *sf) {
    HFP4_TRY(check_common(fn, x, x_dtype, m, k, ldx, q, ldq, sf, target));
    if (target == TARGET_FP8)
        HFP4_CHECK_ARG(sf->gran_k == 32 || sf->gran_k == 128, "%s: sf.gran_k = %d must be 32 or 128", fn,
                       (int)sf->gran_k);
    int32_t gran_k = target == TARGET_FP8 ? sf->gran_k : 32;
    unsigned allowed = (1u << HFP4_DTYPE_FP32) | (1u << HFP4_DTYPE_UE8M0) | (1u << HFP4_DTYPE_UE8M0_PACKED);
    HFP4_TRY(hfp4__check_scales(fn, "sf", sf, allowed, 1, m, k, 1, gran_k));
    HFP4_TRY(check_ue8m0_request(fn, sf, use_ue8m0));

    quant_job job = {x, x_dtype, m, k, ldx, use_ue8m0, q, ldq, sf, target, 1, gran_k, hfp4__ceil_div(k, gran_k)};
    run_job(&job, m, per_token_row);
    return HFP4_OK;
}

hfp4_status hfp4_quantize_fp8_per_token(const void *x, hfp4_dtype x_dtype, int64_t m, int64_t k, int64_t ldx,
                                        int use_ue8m0, uint8_t *q, int64_t ldq, const hfp4_scales *sf) {
    return quantize_per_token("hfp4_quantize_fp8_per_token", TARGET_FP8, x, x_dtype, m, k, ldx, use_ue8m0, q, ldq,
                              sf);
}

hfp4_status hfp4_quantize_fp4_per_token(const void *x, hfp4_dtype x_dtype, int64_t m, int64_t k, int64_t ldx,
                                        int use_ue8m0, uint8_t *q, int64_t ldq, const hfp4_scales *sf) {
    return quantize_per_token("hfp4_quantize_fp4_per_token", TARGET_FP4, x, x_dtype, m, k, ldx, use_ue8m0, q, ldq,
                              sf);
}

hfp4_status hfp4_quantize_fp8_per_block(const void *x, hfp4_dtype x_dtype, int64_t m, int64_t k, int64_t ldx,
                                        int use_ue8m0, uint8_t *q, int64_t ldq, const hfp4_scales *sf) {
    const char *fn = "hfp4_quantize_fp8_per_block";
    HFP4_TRY(check_common(fn, x, x_dtype, m, k, ldx, q, ldq, sf, TARGET_FP8));
    unsigned allowed = (1u << HFP4_DTYPE_FP32) | (1u << HFP4_DTYPE_UE8M0);
    HFP4_TRY(hfp4__check_scales(fn, "sf", sf, allowed, 1, m, k, 128, 128));
    HFP4_TRY(check_ue8m0_request(fn, sf, use_ue8m0));

    quant_job job = {x, x_dtype, m, k, ldx, use_ue8m0, q, ldq, sf, TARGET_FP8, 128, 128, hfp4__ceil_div(k, 128)};
    run_job(&job, hfp4__ceil_div(m, 128) * job.tiles_k, per_block_tile);
    return HFP4_OK;
}
