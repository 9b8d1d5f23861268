/*
 * repack_sm90.c - CPU repack of FP4 weights into the SM90 kernel layout (sm90_layout.h), its size
 * and scale-dtype queries, and the decoder the reference uses to read repacked weights back.
 *
 * The repack never loses precision: UE8M0 storage is chosen only when every scale is exactly a
 * power of two; otherwise the caller must store FP32 (exact for any finite scale).
 */
#include <math.h>
#include <string.h>

#include "repack_sm90.h"
#include "scale_access.h"

static hfp4_status check_source(const char *fn, const hfp4_matrix *w, int32_t groups) {
    HFP4_CHECK_ARG(w != NULL, "%s: w is NULL", fn);
    HFP4_CHECK_ARG(groups >= 1, "%s: num_groups = %d must be >= 1", fn, (int)groups);
    HFP4_CHECK_ARG(w->dtype == HFP4_DTYPE_FP4_E2M1, "%s: w->dtype = %s, expected fp4_e2m1 (packed)", fn,
                   hfp4_dtype_name(w->dtype));
    HFP4_CHECK_ARG(w->data != NULL, "%s: w->data is NULL", fn);
    HFP4_CHECK_ARG(w->rows >= 1, "%s: w->rows (N) = %lld must be >= 1", fn, (long long)w->rows);
    HFP4_CHECK_ARG(w->cols >= 1 && w->cols % 32 == 0, "%s: w->cols (K) = %lld must be a positive multiple of 32", fn,
                   (long long)w->cols);
    HFP4_CHECK_ARG(w->ld >= w->cols / 2, "%s: w->ld = %lld bytes is smaller than K/2 = %lld", fn, (long long)w->ld,
                   (long long)(w->cols / 2));
    HFP4_CHECK_ARG(hfp4_sm90_geometry_fits(groups, w->rows, w->cols),
                   "%s: num_groups = %d, N = %lld, K = %lld: the repacked weights would pass 2^59 bytes", fn,
                   (int)groups, (long long)w->rows, (long long)w->cols);
    /* N * ld <= stride_group, written without the product so that huge values cannot overflow */
    if (groups > 1)
        HFP4_CHECK_ARG(w->stride_group >= 1 && w->ld <= w->stride_group / w->rows,
                       "%s: w->stride_group = %lld bytes is smaller than N * ld = %lld * %lld", fn,
                       (long long)w->stride_group, (long long)w->rows, (long long)w->ld);
    HFP4_CHECK_ARG(hfp4__array_span(groups, w->stride_group, w->rows, w->ld, w->cols / 2) >= 0,
                   "%s: w->ld = %lld, stride_group = %lld: the weights' last byte lies past 2^60", fn,
                   (long long)w->ld, (long long)w->stride_group);
    unsigned allowed = (1u << HFP4_DTYPE_FP32) | (1u << HFP4_DTYPE_UE8M0) | (1u << HFP4_DTYPE_UE8M0_PACKED);
    return hfp4__check_scales(fn, "w->scales", &w->scales, allowed, groups, w->rows, w->cols, 1, 32);
}

hfp4_status hfp4_sm90_weights_size(int32_t num_groups, int64_t n, int64_t k, hfp4_dtype scale_dtype, size_t *bytes) {
    const char *fn = "hfp4_sm90_weights_size";
    HFP4_CHECK_ARG(bytes != NULL, "%s: bytes is NULL", fn);
    HFP4_CHECK_ARG(num_groups >= 1, "%s: num_groups = %d must be >= 1", fn, (int)num_groups);
    HFP4_CHECK_ARG(n >= 1, "%s: n = %lld must be >= 1", fn, (long long)n);
    HFP4_CHECK_ARG(k >= 1 && k % 32 == 0, "%s: k = %lld must be a positive multiple of 32", fn, (long long)k);
    HFP4_CHECK_ARG(scale_dtype == HFP4_DTYPE_UE8M0 || scale_dtype == HFP4_DTYPE_FP32,
                   "%s: scale_dtype = %s must be ue8m0 or fp32", fn, hfp4_dtype_name(scale_dtype));
    HFP4_CHECK_ARG(hfp4_sm90_geometry_fits(num_groups, n, k),
                   "%s: num_groups = %d, n = %lld, k = %lld: the repacked weights would pass 2^59 bytes", fn,
                   (int)num_groups, (long long)n, (long long)k);
    hfp4_sm90_geometry g = hfp4_sm90_geometry_make(num_groups, n, k, scale_dtype == HFP4_DTYPE_FP32);
    *bytes = (size_t)g.total_bytes;
    return HFP4_OK;
}

hfp4_status hfp4_sm90_weights_scale_dtype(const hfp4_matrix *w, int32_t num_groups, hfp4_dtype *scale_dtype) {
    const char *fn = "hfp4_sm90_weights_scale_dtype";
    HFP4_TRY(check_source(fn, w, num_groups));
    HFP4_CHECK_ARG(scale_dtype != NULL, "%s: scale_dtype is NULL", fn);
    if (w->scales.dtype != HFP4_DTYPE_FP32) {
        *scale_dtype = HFP4_DTYPE_UE8M0;
        return HFP4_OK;
    }
    int64_t groups32 = w->cols / 32;
    for (int64_t g = 0; g < num_groups; g++)
        for (int64_t r = 0; r < w->rows; r++)
            for (int64_t j = 0; j < groups32; j++) {
                uint8_t e;
                if (hfp4_ue8m0_from_float(hfp4__scale_get(&w->scales, g, r, j), &e) != 0) {
                    *scale_dtype = HFP4_DTYPE_FP32;
                    return HFP4_OK;
                }
            }
    *scale_dtype = HFP4_DTYPE_UE8M0;
    return HFP4_OK;
}

/* Checks every scale against the storage dtype; names the first that does not fit. */
static hfp4_status check_scale_values(const char *fn, const hfp4_matrix *w, int32_t groups, int fp32) {
    int64_t groups32 = w->cols / 32;
    for (int64_t g = 0; g < groups; g++)
        for (int64_t r = 0; r < w->rows; r++)
            for (int64_t j = 0; j < groups32; j++) {
                if (w->scales.dtype != HFP4_DTYPE_FP32) {
                    uint8_t e = hfp4__scale_get_ue8m0(&w->scales, g, r, j);
                    HFP4_CHECK_ARG(e != 255, "%s: w->scales[group %lld, row %lld, k-group %lld] is the UE8M0 NaN (255)",
                                   fn, (long long)g, (long long)r, (long long)j);
                    continue;
                }
                float v = hfp4__scale_get(&w->scales, g, r, j);
                uint8_t e;
                HFP4_CHECK_ARG(isfinite(v), "%s: w->scales[group %lld, row %lld, k-group %lld] = %g is not finite", fn,
                               (long long)g, (long long)r, (long long)j, (double)v);
                HFP4_CHECK_ARG(fp32 || hfp4_ue8m0_from_float(v, &e) == 0,
                               "%s: w->scales[group %lld, row %lld, k-group %lld] = %.9g is not a power of two, so it "
                               "cannot be stored as UE8M0 without loss; use scale_dtype fp32",
                               fn, (long long)g, (long long)r, (long long)j, (double)v);
            }
    return HFP4_OK;
}

typedef struct repack_job {
    const hfp4_matrix *w;
    hfp4_sm90_geometry geo;
    uint8_t *dst;
} repack_job;

/* Code of (row n, column k) of group g of the plain source, with -0 made +0. */
static uint8_t source_code(const hfp4_matrix *w, int64_t g, int64_t n, int64_t k) {
    const uint8_t *src = (const uint8_t *)w->data + g * w->stride_group;
    uint8_t byte = src[n * w->ld + k / 2];
    uint8_t code = (k & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
    return code == 8 ? 0 : code;
}

/* UE8M0 exponent of (row n, 32-group j) of the source (FP32 scales were checked to be powers of two). */
static uint8_t source_exponent(const hfp4_matrix *w, int64_t g, int64_t n, int64_t j) {
    uint8_t e = 127;
    if (w->scales.dtype == HFP4_DTYPE_FP32) hfp4_ue8m0_from_float(hfp4__scale_get(&w->scales, g, n, j), &e);
    else e = hfp4__scale_get_ue8m0(&w->scales, g, n, j);
    return e;
}

/* One (group, 64-row tile): weights, scales and chunk modes. */
static void repack_tile(void *arg, int64_t index) {
    const repack_job *job = (const repack_job *)arg;
    const hfp4_sm90_geometry *geo = &job->geo;
    const hfp4_matrix *w = job->w;
    int64_t group = index / geo->tiles, tile = index % geo->tiles;
    uint8_t *wdst = job->dst + group * (geo->n_pad * geo->k_pad / 2);
    uint8_t *sdst = job->dst + geo->scale_offset + group * geo->scale_bytes_per_group;
    uint8_t *mdst = job->dst + geo->mode_offset + (group * geo->tiles + tile) * geo->chunks;
    int64_t groups32 = w->cols / 32;
    int64_t rows = w->rows - tile * 64 < 64 ? w->rows - tile * 64 : 64;

    for (int64_t r = 0; r < rows; r++) {
        int64_t n = tile * 64 + r;
        for (int64_t k = 0; k < w->cols; k++) {
            uint8_t code = source_code(w, group, n, k);
            int ms, ss;
            int64_t off = hfp4_sm90_value_bits(geo, n, k, &ms, &ss);
            uint32_t word;
            memcpy(&word, wdst + off, 4);
            word |= (uint32_t)(code & 7) << ms;
            word |= (uint32_t)(code >> 3) << ss;
            memcpy(wdst + off, &word, 4);
        }
    }
    /* each row's base exponent for the whole K: its largest non-zero group's, if every non-zero
     * group is within HFP4_SM90_FOLD_SPAN binades of it, else -1 (per-chunk bases) */
    int row_base[64], one_base = 1; /* one_base: every row keeps one e_max over all of K */
    for (int64_t r = 0; r < 64; r++) {
        int lo = 256, hi = -1;
        for (int64_t jj = 0; r < rows && !geo->scale_fp32 && jj < groups32; jj++) {
            int nz = 0;
            for (int64_t k = jj * 32; k < jj * 32 + 32 && !nz; k++) nz = (source_code(w, group, tile * 64 + r, k) & 7) != 0;
            if (!nz) continue;
            int ej = source_exponent(w, group, tile * 64 + r, jj);
            if (ej < lo) lo = ej;
            if (ej > hi) hi = ej;
        }
        row_base[r] = hi >= 0 && hi - lo <= HFP4_SM90_FOLD_SPAN ? hi : -1;
        if (row_base[r] < 0 && hi >= 0) one_base = 0; /* an all-zero row keeps 127 in every chunk */
    }
    for (int64_t c = 0; c < geo->chunks; c++) {
        if (geo->scale_fp32) {
            mdst[c] = 1;
            for (int64_t r = 0; r < rows; r++)
                for (int j = 0; j < 4; j++) {
                    int64_t jj = c * 4 + j;
                    if (jj >= groups32) continue; /* padding stays 1.0 */
                    float v = hfp4__scale_get(&w->scales, group, tile * 64 + r, jj);
                    memcpy(sdst + hfp4_sm90_scale_index(geo, tile * 64 + r, jj) * 4, &v, 4);
                }
            continue;
        }
        /* UE8M0: fold when every row's non-zero groups lie within HFP4_SM90_FOLD_SPAN binades of
         * the row's base: the row's largest exponent over the whole K when all of them fit (so the
         * kernel sees one base per row and promotes with one FFMA), else the chunk's largest */
        uint8_t e[64][4];
        int nonzero[64][4], emax[64], fast = 1;
        for (int64_t r = 0; r < 64; r++) {
            emax[r] = -1;
            for (int j = 0; j < 4; j++) {
                int64_t jj = c * 4 + j;
                e[r][j] = 127;
                nonzero[r][j] = 0;
                if (r >= rows || jj >= groups32) continue;
                e[r][j] = source_exponent(w, group, tile * 64 + r, jj);
                for (int64_t k = jj * 32; k < jj * 32 + 32 && !nonzero[r][j]; k++)
                    nonzero[r][j] = (source_code(w, group, tile * 64 + r, k) & 7) != 0;
                if (nonzero[r][j] && e[r][j] > emax[r]) emax[r] = e[r][j];
            }
            for (int j = 0; j < 4; j++)
                if (nonzero[r][j] && emax[r] - e[r][j] > HFP4_SM90_FOLD_SPAN) fast = 0;
        }
        mdst[c] = fast ? (one_base ? HFP4_SM90_MODE_ONE_BASE : 0) : HFP4_SM90_MODE_PER32;
        for (int64_t r = 0; r < 64; r++) {
            uint32_t word = 0;
            if (fast) {
                int base = row_base[r] >= 0 ? row_base[r] : emax[r] < 0 ? 127 : emax[r];
                for (int j = 0; j < 4; j++) {
                    uint32_t off = nonzero[r][j] ? (uint32_t)(e[r][j] - base + 12) : 12u;
                    word |= off << (4 * j);
                }
                word |= (uint32_t)base << 16;
            } else {
                for (int j = 0; j < 4; j++) word |= (uint32_t)e[r][j] << (8 * j);
            }
            memcpy(sdst + ((tile * geo->chunks + c) * 64 + r) * 4, &word, 4);
        }
    }
}

void hfp4__sm90_describe(const hfp4_sm90_geometry *geo, void *dst, hfp4_matrix *out) {
    memset(out, 0, sizeof *out);
    out->data = dst;
    out->dtype = HFP4_DTYPE_FP4_E2M1_SM90;
    out->rows = geo->n;
    out->cols = geo->k;
    out->ld = 0;
    out->stride_group = geo->n_pad * geo->k_pad / 2;
    out->scales.data = (uint8_t *)dst + geo->scale_offset;
    out->scales.dtype = geo->scale_fp32 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_UE8M0;
    out->scales.gran_mn = 1;
    out->scales.gran_k = 32;
    out->scales.stride_group = geo->scale_bytes_per_group / 4; /* uint32 words (UE8M0) or floats (FP32) */
}

hfp4_status hfp4__sm90_check_repack_args(const char *fn, const hfp4_matrix *w, int32_t num_groups,
                                         hfp4_dtype scale_dtype, const void *dst, size_t dst_bytes,
                                         const hfp4_matrix *out, hfp4_sm90_geometry *geo) {
    HFP4_TRY(check_source(fn, w, num_groups));
    HFP4_CHECK_ARG(scale_dtype == HFP4_DTYPE_UE8M0 || scale_dtype == HFP4_DTYPE_FP32,
                   "%s: scale_dtype = %s must be ue8m0 or fp32", fn, hfp4_dtype_name(scale_dtype));
    HFP4_CHECK_ARG(dst != NULL, "%s: dst is NULL", fn);
    HFP4_CHECK_ARG(out != NULL, "%s: out is NULL", fn);
    *geo = hfp4_sm90_geometry_make(num_groups, w->rows, w->cols, scale_dtype == HFP4_DTYPE_FP32);
    HFP4_CHECK_ARG(dst_bytes >= (size_t)geo->total_bytes, "%s: dst_bytes = %zu is smaller than the %lld bytes needed",
                   fn, dst_bytes, (long long)geo->total_bytes);
    /* dst is cleared first and then written tile by tile while the source is still read, so it may
     * share no byte with the weights or their scales (an in-place repack returned HFP4_OK with
     * garbage). Addresses only, so the GPU form checks it too; check_source bounded both spans. */
    const int64_t w_bytes = hfp4__array_span(num_groups, w->stride_group, w->rows, w->ld, w->cols / 2);
    HFP4_CHECK_ARG(!hfp4__ranges_overlap(dst, geo->total_bytes, w->data, w_bytes),
                   "%s: dst = %p (%lld bytes) overlaps the source weights w->data = %p", fn, dst,
                   (long long)geo->total_bytes, w->data);
    HFP4_CHECK_ARG(!hfp4__ranges_overlap(dst, geo->total_bytes, w->scales.data,
                                         hfp4__scales_bytes(&w->scales, num_groups, w->rows, w->cols)),
                   "%s: dst = %p (%lld bytes) overlaps the source scales w->scales.data = %p", fn, dst,
                   (long long)geo->total_bytes, w->scales.data);
    return HFP4_OK;
}

hfp4_status hfp4_ref_repack_sm90(const hfp4_matrix *w, int32_t num_groups, hfp4_dtype scale_dtype, void *dst,
                                 size_t dst_bytes, hfp4_matrix *out) {
    const char *fn = "hfp4_ref_repack_sm90";
    hfp4_sm90_geometry geo;
    HFP4_TRY(hfp4__sm90_check_repack_args(fn, w, num_groups, scale_dtype, dst, dst_bytes, out, &geo));
    HFP4_TRY(check_scale_values(fn, w, num_groups, geo.scale_fp32));

    uint8_t *d = (uint8_t *)dst;
    memset(d, 0, (size_t)geo.total_bytes); /* weights (code 0), gaps and modes start as zeros */
    /* Scale padding is 1.0 so padded (all-zero) weights stay exact zeros. */
    for (int64_t g = 0; g < num_groups; g++) {
        uint8_t *s = d + geo.scale_offset + g * geo.scale_bytes_per_group;
        if (geo.scale_fp32) {
            float one = 1.0f;
            for (int64_t i = 0; i < geo.scale_bytes_per_group / 4; i++) memcpy(s + 4 * i, &one, 4);
        } /* UE8M0 words are all written by repack_tile */
    }
    repack_job job = {w, geo, d};
    hfp4__parallel_for(hfp4__thread_count(0, num_groups * geo.tiles), num_groups * geo.tiles, repack_tile, &job);
    hfp4__sm90_describe(&geo, dst, out);
    return HFP4_OK;
}

hfp4_status hfp4__sm90_geometry_of(const hfp4_matrix *b, int32_t num_groups, hfp4_sm90_geometry *geo) {
    *geo = hfp4_sm90_geometry_make(num_groups, b->rows, b->cols, b->scales.dtype == HFP4_DTYPE_FP32);
    return HFP4_OK;
}

double hfp4__sm90_weight_value(const hfp4_matrix *b, const hfp4_sm90_geometry *geo, int64_t group, int64_t n, int64_t k) {
    int ms, ss;
    int64_t off = hfp4_sm90_value_bits(geo, n, k, &ms, &ss);
    uint32_t word;
    memcpy(&word, (const uint8_t *)b->data + group * b->stride_group + off, 4);
    uint8_t code = (uint8_t)(((word >> ms) & 7) | (((word >> ss) & 1) << 3));
    double v = (double)hfp4_fp4_decode(code);
    int64_t j = k / 32, idx = hfp4_sm90_scale_index(geo, n, j);
    if (geo->scale_fp32) return v * (double)((const float *)b->scales.data)[group * b->scales.stride_group + idx];
    uint32_t sw = ((const uint32_t *)b->scales.data)[group * b->scales.stride_group + idx];
    /* the modes follow the scales (hfp4__sm90_describe keeps the whole buffer reachable from data) */
    const uint8_t *modes = (const uint8_t *)b->data + geo->mode_offset;
    uint8_t mode = modes[(group * geo->tiles + n / 64) * geo->chunks + j / 4];
    if (mode & HFP4_SM90_MODE_PER32) return v * (double)hfp4_ue8m0_decode((uint8_t)(sw >> (8 * (j % 4))));
    int o = (int)((sw >> (4 * (j % 4))) & 15), emax = (int)((sw >> 16) & 255);
    return v * ldexp(1.0, o - 12) * (double)hfp4_ue8m0_decode((uint8_t)emax);
}
