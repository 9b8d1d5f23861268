/*
 * test_sf_layout.c - the scale-factor layout toolkit (include/hfp4_sf_layout.h) on the CPU.
 *
 * Every output is compared byte for byte, padding included, with an independent reference written
 * the way DeepGEMM's torch code states the layouts (zero-padded byte arrays viewed as int32, then
 * transposed; per-group packing; psum ranges tested against every group). Shapes, strides and
 * byte counts are checked for exhaustive small cases; DeepGEMM's worked example (PR #403) and the
 * rejections its SM120 tests list (§3.7 of the compat spec) are checked with their exact status and
 * message. Run: make test (or build/hfp4_tests --filter sf_).
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static int64_t align4(int64_t x) { return (x + 3) / 4 * 4; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A random exact UE8M0 value as FP32 bits (2^-127 included now and then). */
static uint32_t rand_pow2_bits(hfp4_rng *r) {
    uint64_t x = hfp4_rng_next(r);
    if (x % 61 == 0) return 0x00400000u;
    return (uint32_t)(1 + (x >> 8) % 254) << 23;
}

/* Input tensor layouts the tests feed. */
enum layout_kind {
    L_KMAJOR,   /* contiguous [G, mn, sf_k]                               */
    L_MNMAJOR,  /* contiguous [G, sf_k, mn] (MN-major, no padding)         */
    L_MNTMA,    /* MN-major TMA-aligned (the required layout itself)       */
    L_PADDED,   /* K-major with padded rows and padded groups              */
    L_INTERLEAVED, /* [mn, G, sf_k] memory order (groups inside rows)      */
    L_COUNT
};

typedef struct owned_tensor {
    hfp4_sf_tensor t;
    uint32_t *buf;
    int64_t words;
} owned_tensor;

/* Builds a tensor of the given layout; every word of the buffer (gaps included) is random. */
static owned_tensor make_tensor(hfp4_dtype dtype, int32_t groups, int64_t mn, int64_t sf_k, int kind, hfp4_rng *r,
                                int pow2) {
    owned_tensor o;
    memset(&o, 0, sizeof o);
    int64_t g = groups > 0 ? groups : 1, t = align4(mn);
    hfp4_sf_tensor *d = &o.t;
    d->dtype = dtype;
    d->num_groups = groups;
    d->mn = mn;
    d->sf_k = sf_k;
    switch (kind) {
    case L_KMAJOR: d->stride_k = 1, d->stride_mn = sf_k, d->stride_group = mn * sf_k; break;
    case L_MNMAJOR: d->stride_mn = 1, d->stride_k = mn, d->stride_group = mn * sf_k; break;
    case L_MNTMA: d->stride_mn = 1, d->stride_k = t, d->stride_group = t * sf_k; break;
    case L_PADDED: d->stride_k = 1, d->stride_mn = sf_k + 3, d->stride_group = mn * (sf_k + 3) + 5; break;
    case L_INTERLEAVED: d->stride_k = 1, d->stride_group = sf_k, d->stride_mn = g * sf_k; break;
    }
    if (groups == 0) d->stride_group = 0;
    o.words = (g - 1) * d->stride_group + (mn > 0 ? mn - 1 : 0) * d->stride_mn + (sf_k > 0 ? sf_k - 1 : 0) * d->stride_k + 1;
    if (kind == L_PADDED || kind == L_MNTMA) o.words += 8;
    o.buf = (uint32_t *)malloc((size_t)o.words * 4);
    for (int64_t i = 0; i < o.words; i++) o.buf[i] = pow2 ? rand_pow2_bits(r) : (uint32_t)hfp4_rng_next(r);
    d->data = o.buf;
    return o;
}

static uint32_t tget(const hfp4_sf_tensor *t, int64_t g, int64_t r, int64_t j) {
    return ((const uint32_t *)t->data)[g * t->stride_group + r * t->stride_mn + j * t->stride_k];
}

/* The UE8M0 byte DeepGEMM's packer produces (bits >> 23 of an exact value), or ceil_to_ue8m0's. */
static uint8_t ref_byte(uint32_t bits) {
    float f;
    memcpy(&f, &bits, 4);
    uint8_t e;
    if (hfp4_ue8m0_from_float(f, &e) == 0) return e;
    if (hfp4_ue8m0_from_float(hfp4_ceil_to_ue8m0(f), &e) == 0) return e;
    return 0xEE; /* unreachable: ceil_to_ue8m0 always gives a UE8M0 value */
}

static int check_desc(const hfp4_sf_tensor *got, hfp4_dtype dtype, int32_t groups, int64_t mn, int64_t sf_k,
                      int64_t sg, int64_t smn, int64_t sk) {
    return got->dtype == dtype && got->num_groups == groups && got->mn == mn && got->sf_k == sf_k &&
           got->stride_group == sg && got->stride_mn == smn && got->stride_k == sk;
}

/* ---- references ------------------------------------------------------------------------------ */

/* get_mn_major_tma_aligned_tensor: out[g][j][r] for r < T, zero padding. */
static uint32_t *ref_mn_major(const hfp4_sf_tensor *in, int64_t *words) {
    int64_t g = in->num_groups > 0 ? in->num_groups : 1, t = align4(in->mn);
    *words = g * t * in->sf_k;
    uint32_t *out = (uint32_t *)calloc((size_t)*words + 1, 4);
    for (int64_t b = 0; b < g; b++)
        for (int64_t r = 0; r < in->mn; r++)
            for (int64_t j = 0; j < in->sf_k; j++) out[b * t * in->sf_k + j * t + r] = tget(in, b, r, j);
    return out;
}

/* Row r of the output is read unless psum excludes it: DeepGEMM's kernel tests every group. */
static int ref_psum_valid(const int32_t *ends, int32_t n, int32_t alignment, int64_t r) {
    int valid = 0;
    for (int32_t g = 0; g < n; g++) {
        int64_t start = g == 0 ? 0 : cdiv(ends[g - 1], alignment) * alignment;
        valid |= r >= start && r < ends[g];
    }
    return valid;
}

/* get_mn_major_tma_aligned_packed_ue8m0_tensor as DeepGEMM's torch fallback states it: broadcast
 * rows (index_select), exponent bytes into a zeroed uint8 [B, T, align(sf_k, 4)], view as int32
 * [B, T, P], copy into the MN-major layout. */
static uint32_t *ref_pack(const hfp4_sf_tensor *in, int64_t mn, int32_t gran_mn, const int32_t *ends, int32_t n_ends,
                          int32_t alignment, int64_t *words) {
    int64_t g = in->num_groups > 0 ? in->num_groups : 1, t = align4(mn), ka = align4(in->sf_k), p = ka / 4;
    uint8_t *bytes = (uint8_t *)calloc((size_t)(g * t * ka) + 1, 1);
    for (int64_t b = 0; b < g; b++)
        for (int64_t r = 0; r < mn; r++) {
            if (ends && !ref_psum_valid(ends, n_ends, alignment, r)) continue;
            for (int64_t j = 0; j < in->sf_k; j++)
                bytes[(b * t + r) * ka + j] = ref_byte(tget(in, b, r / gran_mn, j));
        }
    *words = g * t * p;
    uint32_t *out = (uint32_t *)calloc((size_t)*words + 1, 4);
    for (int64_t b = 0; b < g; b++)
        for (int64_t r = 0; r < t; r++)
            for (int64_t q = 0; q < p; q++) {
                uint32_t w;
                memcpy(&w, bytes + (b * t + r) * ka + 4 * q, 4); /* little-endian view as int32 */
                out[b * p * t + q * t + r] = w;
            }
    free(bytes);
    return out;
}

/* The K-grouped form as DeepGEMM's test checks it: each group's rows packed on their own (missing
 * bytes zero) and stacked; rows after the last group zero. */
static uint32_t *ref_k_grouped(const hfp4_sf_tensor *in, const int32_t *ks, int32_t groups, int32_t gran_k,
                               int64_t packed, int64_t *words) {
    int64_t mn = in->mn, row = 0, q = 0;
    *words = packed * mn;
    uint32_t *out = (uint32_t *)calloc((size_t)*words + 1, 4);
    for (int32_t g = 0; g < groups; g++) {
        int64_t n = cdiv(ks[g], gran_k);
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < mn; c++) {
                uint32_t b = ref_byte(tget(in, 0, c, row + i));
                out[(q + i / 4) * mn + c] |= b << (8 * (i % 4));
            }
        row += n;
        q += cdiv(n, 4);
    }
    return out;
}

/* ---- get_tma_aligned_size -------------------------------------------------------------------- */

TEST(sf_tma_aligned_size) {
    int64_t a = -1;
    for (int64_t x = 0; x < 70; x++) {
        CHECK_STATUS(hfp4_sf_get_tma_aligned_size(x, 4, &a), HFP4_OK);
        CHECK_EQ_I64(a, (x + 3) / 4 * 4);
        CHECK_STATUS(hfp4_sf_get_tma_aligned_size(x, 2, &a), HFP4_OK);
        CHECK_EQ_I64(a, (x + 7) / 8 * 8);
        CHECK_STATUS(hfp4_sf_get_tma_aligned_size(x, 1, &a), HFP4_OK);
        CHECK_EQ_I64(a, (x + 15) / 16 * 16);
        CHECK_STATUS(hfp4_sf_get_tma_aligned_size(x, 16, &a), HFP4_OK);
        CHECK_EQ_I64(a, x);
    }
    CHECK_REJECT(hfp4_sf_get_tma_aligned_size(5, 3, &a), HFP4_ERR_INVALID_ARGUMENT, "element_size = 3");
    CHECK_REJECT(hfp4_sf_get_tma_aligned_size(5, 0, &a), HFP4_ERR_INVALID_ARGUMENT, "element_size");
    CHECK_REJECT(hfp4_sf_get_tma_aligned_size(5, 32, &a), HFP4_ERR_INVALID_ARGUMENT, "element_size");
    CHECK_REJECT(hfp4_sf_get_tma_aligned_size(-1, 4, &a), HFP4_ERR_INVALID_ARGUMENT, "x = -1 must be in [0, 2^56)");
    /* a huge x is named with the real range (it said "must be >= 0"; found by an API review) */
    CHECK_REJECT(hfp4_sf_get_tma_aligned_size((int64_t)1 << 60, 4, &a), HFP4_ERR_INVALID_ARGUMENT,
                 "x = 1152921504606846976 must be in [0, 2^56)");
    CHECK_STATUS(hfp4_sf_get_tma_aligned_size(((int64_t)1 << 56) - 4, 4, &a), HFP4_OK);
    CHECK_REJECT(hfp4_sf_get_tma_aligned_size(1, 4, NULL), HFP4_ERR_INVALID_ARGUMENT, "NULL");
}

/* ---- MN-major TMA-aligned copy --------------------------------------------------------------- */

static const int64_t mn_list[] = {1,   2,   3,   4,   5,   6,   7,   8,   9,   10,  11,  12,  13,  14,  15,  16,
                                  17,  18,  19,  20,  21,  23,  24,  25,  31,  32,  33,  47,  48,  49,  63,  64,
                                  65,  66,  67,  68,  127, 128, 129, 130, 131, 132, 191, 255, 256, 257};
#define N_MN (int)(sizeof mn_list / sizeof mn_list[0])

/* Runs query + call on `in`, compares with the reference and checks shape/strides/bytes. */
static void check_mn_major_case(const hfp4_sf_tensor *in, int kind) {
    hfp4_sf_tensor qd, od;
    size_t qbytes = 12345;
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_tensor_query(in, &qd, &qbytes), HFP4_OK);
    int64_t g = in->num_groups > 0 ? in->num_groups : 1, t = align4(in->mn);
    /* DeepGEMM's no-copy rule, restated: strides exactly (T*sf_k, 1, T) */
    int pass = (in->num_groups == 0 || in->stride_group == t * in->sf_k) && in->stride_mn == 1 && in->stride_k == t;
    CHECK(pass || kind != L_MNTMA);
    if (pass) {
        CHECK_MSG(qbytes == 0 && qd.data == in->data, "pass-through expected (mn %lld sf_k %lld)", (long long)in->mn,
                  (long long)in->sf_k);
    } else {
        CHECK_EQ_I64(qbytes, g * t * in->sf_k * 4);
        CHECK(qd.data == NULL);
        CHECK(check_desc(&qd, in->dtype, in->num_groups, in->mn, in->sf_k, in->num_groups ? t * in->sf_k : 0, 1, t));
    }
    int64_t words;
    uint32_t *want = ref_mn_major(in, &words);
    uint32_t *dst = (uint32_t *)malloc((size_t)words * 4 + 16);
    memset(dst, 0xA5, (size_t)words * 4 + 16);
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_tensor(in, NULL, dst, (size_t)words * 4, &od), HFP4_OK);
    if (pass) {
        CHECK(od.data == in->data && od.stride_k == in->stride_k);
        for (int64_t i = 0; i < words; i++) CHECK_MSG(dst[i] == 0xA5A5A5A5u, "pass-through wrote dst[%lld]", (long long)i);
    } else {
        CHECK(od.data == dst);
        CHECK(check_desc(&od, qd.dtype, qd.num_groups, qd.mn, qd.sf_k, qd.stride_group, qd.stride_mn, qd.stride_k));
        CHECK_MSG(memcmp(dst, want, (size_t)words * 4) == 0, "mn-major bytes differ: mn %lld sf_k %lld G %d kind %d",
                  (long long)in->mn, (long long)in->sf_k, (int)in->num_groups, kind);
        CHECK(dst[words] == 0xA5A5A5A5u); /* nothing past the output */
    }
    free(want);
    free(dst);
}

TEST(sf_mn_major_exhaustive_small) {
    hfp4_rng r = hfp4_rng_make(1);
    static const int64_t ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 33};
    for (int mi = 0; mi < N_MN; mi++)
        for (int ki = 0; ki < 9; ki++)
            for (int32_t g = 0; g <= 3; g++)
                for (int kind = 0; kind < L_COUNT; kind++) {
                    if (hfp4_test_failed()) return;
                    owned_tensor o = make_tensor(kind % 2 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_INT32, g, mn_list[mi], ks[ki],
                                                 kind, &r, 0);
                    check_mn_major_case(&o.t, kind);
                    free(o.buf);
                }
}

TEST(sf_mn_major_passthrough_rule_is_exact) {
    /* DeepGEMM copies unless the strides are exactly (T*sf_k, 1, T): a 3D tensor whose group stride
     * is larger is copied, and so is an MN-major tensor without padding when mn % 4 != 0. */
    float buf[64 * 4];
    for (int i = 0; i < 64 * 4; i++) buf[i] = (float)i;
    hfp4_sf_tensor t = {buf, HFP4_DTYPE_FP32, 2, 6, 3, 8 * 3 + 4, 1, 8};
    hfp4_sf_tensor out;
    size_t bytes;
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_tensor_query(&t, &out, &bytes), HFP4_OK);
    CHECK_EQ_I64(bytes, 2 * 8 * 3 * 4);
    t.stride_group = 8 * 3;
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_tensor_query(&t, &out, &bytes), HFP4_OK);
    CHECK_EQ_I64(bytes, 0);
    CHECK(out.data == buf);
    hfp4_sf_tensor u = {buf, HFP4_DTYPE_FP32, 0, 6, 3, 0, 1, 6};
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_tensor_query(&u, &out, &bytes), HFP4_OK);
    CHECK_EQ_I64(bytes, 8 * 3 * 4);
    CHECK(out.stride_group == 0 && out.stride_mn == 1 && out.stride_k == 8);
}

/* ---- packed UE8M0 ---------------------------------------------------------------------------- */

static void check_pack_case(const hfp4_sf_tensor *in, int64_t mn, int32_t gran_mn, const hfp4_sf_psum *psum) {
    hfp4_sf_tensor qd, od;
    size_t qbytes = 0;
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(in, mn, gran_mn, psum, &qd, &qbytes),
                 HFP4_OK);
    int64_t g = in->num_groups > 0 ? in->num_groups : 1, t = align4(mn), p = cdiv(in->sf_k, 4);
    CHECK_EQ_I64(qbytes, g * t * p * 4);
    CHECK(check_desc(&qd, HFP4_DTYPE_INT32, in->num_groups, mn, p, in->num_groups ? t * p : 0, 1, t));
    int64_t words;
    uint32_t *want = ref_pack(in, mn, gran_mn, psum ? psum->ends : NULL, psum ? psum->num_groups : 0,
                              psum ? (psum->alignment ? psum->alignment : 128) : 0, &words);
    CHECK_EQ_I64(words * 4, (int64_t)qbytes);
    uint32_t *dst = (uint32_t *)malloc((size_t)words * 4 + 16);
    memset(dst, 0x5A, (size_t)words * 4 + 16);
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(in, mn, gran_mn, psum, NULL, dst, qbytes, &od),
                 HFP4_OK);
    CHECK(od.data == dst);
    CHECK(check_desc(&od, qd.dtype, qd.num_groups, qd.mn, qd.sf_k, qd.stride_group, qd.stride_mn, qd.stride_k));
    CHECK_MSG(memcmp(dst, want, (size_t)words * 4) == 0, "packed bytes differ: mn %lld gran_mn %d sf_k %lld G %d psum %d",
              (long long)mn, (int)gran_mn, (long long)in->sf_k, (int)in->num_groups, psum != NULL);
    CHECK(dst[words] == 0x5A5A5A5Au);
    free(want);
    free(dst);
}

TEST(sf_pack_exhaustive_small) {
    hfp4_rng r = hfp4_rng_make(2);
    /* sf_k = ceil(K / gran_k) for K tails: 1..9 K-groups, 17 and 33 */
    static const int64_t ks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 33};
    for (int mi = 0; mi < N_MN; mi++)
        for (int ki = 0; ki < 11; ki++)
            for (int32_t g = 0; g <= 3; g++)
                for (int kind = 0; kind < L_COUNT; kind++) {
                    if (hfp4_test_failed()) return;
                    owned_tensor o = make_tensor(HFP4_DTYPE_FP32, g, mn_list[mi], ks[ki], kind, &r, 1);
                    check_pack_case(&o.t, mn_list[mi], 1, NULL);
                    free(o.buf);
                }
}

TEST(sf_pack_broadcast_rows) {
    hfp4_rng r = hfp4_rng_make(3);
    static const int32_t grans[] = {2, 3, 4, 32, 128};
    for (int gi = 0; gi < 5; gi++)
        for (int mi = 0; mi < N_MN; mi++)
            for (int32_t g = 0; g <= 2; g++) {
                if (hfp4_test_failed()) return;
                int64_t mn = mn_list[mi];
                owned_tensor o = make_tensor(HFP4_DTYPE_FP32, g, cdiv(mn, grans[gi]), 1 + (mi % 9), mi % L_COUNT, &r, 1);
                check_pack_case(&o.t, mn, grans[gi], NULL);
                free(o.buf);
            }
}

TEST(sf_pack_psum_zeroes_rows_outside_groups) {
    hfp4_rng r = hfp4_rng_make(4);
    for (int trial = 0; trial < 400; trial++) {
        if (hfp4_test_failed()) return;
        int32_t ngroups = 1 + (int32_t)(hfp4_rng_next(&r) % 8);
        int32_t alignment = (int32_t[]){0, 4, 32, 128}[trial % 4];
        int32_t a = alignment ? alignment : 128;
        int32_t ends[8];
        int64_t cur = 0;
        for (int32_t g = 0; g < ngroups; g++) {
            int64_t start = g == 0 ? 0 : cdiv(cur, a) * a;
            int64_t len = (int64_t)(hfp4_rng_next(&r) % 70);
            if (g > 0 && hfp4_rng_next(&r) % 5 == 0) start = cur, len = 0; /* empty group after an unaligned end */
            cur = start + len;
            ends[g] = (int32_t)cur;
        }
        int64_t mn = cur + (int64_t)(hfp4_rng_next(&r) % 9); /* a tail beyond the last group */
        if (mn == 0) mn = 1;
        int64_t sf_k = 1 + (int64_t)(hfp4_rng_next(&r) % 9);
        owned_tensor o = make_tensor(HFP4_DTYPE_FP32, trial % 2, mn, sf_k, trial % L_COUNT, &r, 1);
        /* rows outside every group hold garbage that is not even a power of two: never read */
        for (int64_t row = 0; row < mn; row++)
            if (!ref_psum_valid(ends, ngroups, a, row))
                for (int64_t j = 0; j < sf_k; j++)
                    o.buf[row * o.t.stride_mn + j * o.t.stride_k] = 0x7FC00001u; /* NaN */
        hfp4_sf_psum ps = {ends, ngroups, alignment};
        check_pack_case(&o.t, mn, 1, &ps);
        free(o.buf);
    }
}

TEST(sf_pack_refuses_non_power_of_two) {
    float sf[2][6][4];
    for (int g = 0; g < 2; g++)
        for (int r = 0; r < 6; r++)
            for (int j = 0; j < 4; j++) sf[g][r][j] = 1.0f;
    sf[1][5][2] = 0.3f;
    sf[1][5][3] = 3.0f;
    hfp4_sf_tensor t = {sf, HFP4_DTYPE_FP32, 2, 6, 4, 24, 4, 1};
    uint32_t dst[2 * 8 + 1];
    for (int i = 0; i < 17; i++) dst[i] = 0xCDCDCDCDu;
    hfp4_sf_tensor out;
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 6, 1, NULL, NULL, dst, sizeof dst, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "sf(group = 1, mn = 5, sf_k = 2) = 0.300000012");
    CHECK(hfp4_test_contains(hfp4_last_error(), "HFP4_SF_ROUND_UP"));
    for (int i = 0; i < 17; i++) CHECK(dst[i] == 0xCDCDCDCDu); /* nothing written */
    /* Zero, negative, NaN, Inf and float subnormals other than 2^-127 are refused too. */
    static const uint32_t bad[] = {0x00000000u, 0x80000000u, 0xBF800000u, 0x7FC00000u, 0x7F800000u, 0x00200000u,
                                   0x3F800001u};
    for (int i = 0; i < 7; i++) {
        sf[1][5][2] = 1.0f;
        sf[1][5][3] = 1.0f;
        memcpy(&sf[0][1][1], &bad[i], 4);
        CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 6, 1, NULL, NULL, dst, sizeof dst, &out),
                     HFP4_ERR_INVALID_ARGUMENT, "sf(group = 0, mn = 1, sf_k = 1)");
    }
    /* 2^-127 (a float subnormal) is exactly UE8M0 byte 0 and is accepted. */
    uint32_t tiny = 0x00400000u;
    memcpy(&sf[0][1][1], &tiny, 4);
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 6, 1, NULL, NULL, dst, sizeof dst, &out),
                 HFP4_OK);
    CHECK_EQ_I64(dst[0 * 8 + 1], 0x7F7F007Fu); /* row 1, word 0: bytes 127, 0, 127, 127 */
    /* With HFP4_SF_ROUND_UP: ceil_to_ue8m0, so 0.3 -> 0.5 (126) and 3 -> 4 (129). */
    sf[1][5][2] = 0.3f;
    sf[1][5][3] = 3.0f;
    hfp4_sf_options opts = {HFP4_SF_ROUND_UP, 1, NULL};
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 6, 1, NULL, &opts, dst, sizeof dst, &out),
                 HFP4_OK);
    CHECK_EQ_I64(dst[8 + 5], 0x817E7F7Fu);
    CHECK_EQ_I64(dst[8 + 6], 0); /* padding rows */
    CHECK_EQ_I64(dst[8 + 7], 0);
    /* HFP4_SF_ROUND_UP rounds finite positive values only: zero, negatives, NaN and Inf stay
     * INVALID_ARGUMENT with it (they were packed as 2^-126 or 2^127, silently finite; found by an
     * API review), while a subnormal or FLT_MAX rounds (clamped to bytes 1..254) */
    for (int i = 0; i < 5; i++) {
        memcpy(&sf[0][1][1], &bad[i], 4);
        CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 6, 1, NULL, &opts, dst, sizeof dst, &out),
                     HFP4_ERR_INVALID_ARGUMENT, "sf(group = 0, mn = 1, sf_k = 1) = ");
        CHECK_MSG(hfp4_test_contains(hfp4_last_error(), "is not a finite positive value"), "bits 0x%08x: %s", bad[i],
                  hfp4_last_error());
    }
    static const uint32_t positive[] = {0x00200000u, 0x00000001u, 0x7F7FFFFFu, 0x3F800001u};
    static const uint32_t rounded[] = {1, 1, 254, 128};
    for (int i = 0; i < 4; i++) {
        memcpy(&sf[0][1][1], &positive[i], 4);
        CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 6, 1, NULL, &opts, dst, sizeof dst, &out),
                     HFP4_OK);
        CHECK_EQ_I64((dst[0 * 8 + 1] >> 8) & 0xFF, rounded[i]);
    }
    sf[0][1][1] = 1.0f;
    hfp4_sf_options badflags = {0x10, 0, NULL};
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 6, 1, NULL, &badflags, dst, sizeof dst, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "flags");
}

TEST(sf_pack_argument_errors) {
    float sf[8 * 4];
    for (int i = 0; i < 32; i++) sf[i] = 1.0f;
    hfp4_sf_tensor t = {sf, HFP4_DTYPE_FP32, 0, 8, 4, 0, 4, 1};
    hfp4_sf_tensor out;
    size_t bytes;
    uint32_t dst[64];
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t, 9, 1, NULL, &out, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "sf.mn = 8 must be ceil(mn / gran_mn)");
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t, 8, 0, NULL, &out, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "gran_mn = 0");
    hfp4_sf_tensor ti = t;
    ti.dtype = HFP4_DTYPE_INT32;
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(&ti, 8, 1, NULL, &out, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "must be fp32");
    hfp4_sf_tensor ov = t;
    ov.stride_mn = 3; /* rows of 4 scales 3 apart overlap */
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(&ov, 8, 1, NULL, &out, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "stride_mn = 3 is too small");
    ov.stride_mn = -4;
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(&ov, 8, 1, NULL, &out, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "must be >= 0");
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t, 8, 1, NULL, &out, &bytes), HFP4_OK);
    CHECK_EQ_I64(bytes, 8 * 1 * 4);
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 8, 1, NULL, NULL, dst, bytes - 1, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "too small");
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 8, 1, NULL, NULL, NULL, bytes, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "dst is NULL");
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 8, 1, NULL, NULL, (char *)dst + 2, bytes, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "aligned");
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 8, 1, NULL, NULL, sf + 4, bytes, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "overlaps the input");
    hfp4_sf_tensor nd = t;
    nd.data = NULL;
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&nd, 8, 1, NULL, NULL, dst, bytes, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "data is NULL");
    /* psum: needs one group, ordered ends within mn */
    int32_t ends[2] = {5, 3};
    hfp4_sf_psum ps = {ends, 2, 4};
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 8, 1, &ps, NULL, dst, bytes, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "must not decrease");
    ends[1] = 9;
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t, 8, 1, &ps, NULL, dst, bytes, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "psum.ends[1] = 9 must be in [0, mn = 8]");
    hfp4_sf_tensor t3 = {sf, HFP4_DTYPE_FP32, 2, 4, 4, 16, 4, 1};
    ends[1] = 4;
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t3, 4, 1, &ps, &out, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "single group");
    ps.num_groups = 0;
    CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t, 8, 1, &ps, &out, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "psum.num_groups = 0");
}

/* ---- K-grouped packed ------------------------------------------------------------------------ */

TEST(sf_k_grouped_random_groups) {
    hfp4_rng r = hfp4_rng_make(5);
    for (int trial = 0; trial < 600; trial++) {
        if (hfp4_test_failed()) return;
        int32_t groups = 1 + (int32_t)(hfp4_rng_next(&r) % 8);
        int32_t gran_k = trial % 2 ? 32 : 128;
        int use_psum = trial % 3 == 2, with_ks = !use_psum || trial % 2;
        int32_t k_alignment = use_psum ? (int32_t[]){32, 128, 160, 224}[(trial / 3) % 4] : gran_k;
        int32_t ks[8], layout[8];
        int64_t sf_k = 0, end = 0;
        for (int32_t g = 0; g < groups; g++) {
            /* K sizes with tails (not multiples of gran_k), and empty groups */
            int64_t k = (int64_t)(hfp4_rng_next(&r) % 7) * gran_k * 2 + (int64_t)(hfp4_rng_next(&r) % 3) * 17;
            if (hfp4_rng_next(&r) % 6 == 0) k = 0;
            ks[g] = (int32_t)k;
            sf_k += cdiv(k, gran_k);
            if (use_psum) {
                int64_t start = g == 0 ? 0 : cdiv(end, k_alignment) * k_alignment;
                if (k == 0) start = end; /* an empty group ends where the previous one did */
                end = start + k;
                layout[g] = (int32_t)end;
            } else {
                layout[g] = (int32_t)k;
            }
        }
        int64_t mn = 4 * (1 + (int64_t)(hfp4_rng_next(&r) % 20));
        owned_tensor o = make_tensor(HFP4_DTYPE_FP32, 0, mn, sf_k + (use_psum ? trial % 3 : 0),
                                     trial % 4 == 0 ? L_KMAJOR : L_MNMAJOR, &r, 1);
        hfp4_sf_k_groups kg = {layout, groups, with_ks ? ks : NULL, gran_k, k_alignment, use_psum};
        hfp4_sf_tensor qd, od;
        size_t bytes;
        CHECK_STATUS(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(&o.t, &kg, &qd, &bytes),
                     HFP4_OK);
        int64_t packed = 0;
        for (int32_t g = 0; g < groups; g++) packed += cdiv(ks[g], 4 * gran_k);
        if (!with_ks) packed = (o.t.sf_k + 3 * groups) / 4;
        CHECK_EQ_I64(bytes, packed * mn * 4);
        CHECK(check_desc(&qd, HFP4_DTYPE_INT32, 0, mn, packed, 0, 1, mn));
        int64_t words;
        uint32_t *want = ref_k_grouped(&o.t, ks, groups, gran_k, packed, &words);
        uint32_t *dst = (uint32_t *)malloc((size_t)words * 4 + 16);
        memset(dst, 0x3C, (size_t)words * 4 + 16);
        CHECK_STATUS(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(&o.t, &kg, NULL, dst, bytes, &od),
                     HFP4_OK);
        CHECK(od.data == dst || bytes == 0);
        CHECK_MSG(bytes == 0 || memcmp(dst, want, (size_t)words * 4) == 0,
                  "k-grouped bytes differ (trial %d, G %d, gran_k %d, psum %d)", trial, (int)groups, (int)gran_k,
                  use_psum);
        CHECK(dst[words] == 0x3C3C3C3Cu);
        free(want);
        free(dst);
        free(o.buf);
    }
}

TEST(sf_k_grouped_errors) {
    float sf[4 * 8];
    for (int i = 0; i < 32; i++) sf[i] = 2.0f;
    hfp4_sf_tensor t = {sf, HFP4_DTYPE_FP32, 0, 8, 4, 0, 1, 8}; /* [sf_k = 4, mn = 8] contiguous */
    int32_t ks[2] = {64, 64}, layout[2] = {64, 64};
    hfp4_sf_k_groups kg = {layout, 2, ks, 32, 32, 0};
    hfp4_sf_tensor out;
    size_t bytes;
    uint32_t dst[64];
    CHECK_STATUS(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t, &kg, &out, &bytes), HFP4_OK);
    CHECK_EQ_I64(bytes, 2 * 8 * 4);
    CHECK_STATUS(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(&t, &kg, NULL, dst, bytes, &out),
                 HFP4_OK);
    CHECK_EQ_I64(dst[0], 0x00008080u); /* two K-groups of 2.0 (byte 128), the rest zero */
    kg.gran_k = 64;
    CHECK_REJECT(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t, &kg, &out, &bytes),
                 HFP4_ERR_UNSUPPORTED, "gran_k = 64");
    kg.gran_k = 32;
    kg.k_alignment = 48;
    CHECK_REJECT(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t, &kg, &out, &bytes),
                 HFP4_ERR_UNSUPPORTED, "k_alignment = 48");
    kg.k_alignment = 0;
    CHECK_REJECT(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t, &kg, &out, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "k_alignment = 0");
    kg.k_alignment = 32;
    hfp4_sf_tensor t6 = {sf, HFP4_DTYPE_FP32, 0, 6, 4, 0, 1, 6};
    CHECK_REJECT(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t6, &kg, &out, &bytes),
                 HFP4_ERR_UNSUPPORTED, "mn = 6");
    ks[1] = 96;
    CHECK_REJECT(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t, &kg, &out, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "sf.sf_k = 4 must equal sum_g ceil(ks[g] / 32) = 5");
    ks[1] = 64;
    layout[1] = 32; /* disagrees with ks */
    CHECK_REJECT(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(&t, &kg, NULL, dst, bytes, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "groups.ks[1] = 64 disagrees");
    layout[1] = 64;
    kg.ks = NULL;
    CHECK_REJECT(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t, &kg, &out, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "use_psum");
    /* psum without ks: the bound (sf_k + 3G) / 4; ends 64 then 150 need 2 + 3 rows > sf_k = 4 */
    kg.use_psum = 1;
    layout[1] = 150;
    CHECK_STATUS(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t, &kg, &out, &bytes), HFP4_OK);
    CHECK_EQ_I64(out.sf_k, (4 + 6) / 4);
    CHECK_REJECT(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(&t, &kg, NULL, dst, bytes, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "need 5 K-group rows");
    layout[1] = 70; /* starts at align(64, 32) = 64 fine, ends 70: k = 6 */
    CHECK_STATUS(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(&t, &kg, NULL, dst, bytes, &out),
                 HFP4_OK);
    layout[0] = 50;
    layout[1] = 60; /* starts at align(50, 32) = 64 after its end */
    CHECK_REJECT(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(&t, &kg, NULL, dst, bytes, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "ends before its group starts");
    sf[3] = 3.0f; /* row 0, column 3 */
    layout[1] = 64;
    CHECK_REJECT(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(&t, &kg, NULL, dst, bytes, &out),
                 HFP4_ERR_INVALID_ARGUMENT, "sf(mn = 3, sf_k = 0) = 3");
    hfp4_sf_tensor t3 = t;
    t3.num_groups = 1;
    CHECK_REJECT(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t3, &kg, &out, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "2D");
}

/* ---- UTCCP ----------------------------------------------------------------------------------- */

TEST(sf_utccp_permutation) {
    hfp4_rng r = hfp4_rng_make(6);
    for (int32_t g = 0; g <= 2; g++)
        for (int64_t mn = 128; mn <= 384; mn += 128)
            for (int64_t p = 1; p <= 5; p += 2)
                for (int kind = 0; kind < L_COUNT; kind++) {
                    owned_tensor o = make_tensor(HFP4_DTYPE_INT32, g, mn, p, kind, &r, 0);
                    hfp4_sf_tensor qd, od;
                    size_t bytes;
                    CHECK_STATUS(hfp4_sf_transpose_for_utccp_query(&o.t, &qd, &bytes), HFP4_OK);
                    int64_t ng = g ? g : 1;
                    CHECK_EQ_I64(bytes, ng * mn * p * 4);
                    CHECK(check_desc(&qd, HFP4_DTYPE_INT32, g, mn, p, g ? mn * p : 0, 1, mn));
                    uint32_t *dst = (uint32_t *)malloc(bytes);
                    CHECK_STATUS(hfp4_sf_transpose_for_utccp(&o.t, NULL, dst, bytes, &od), HFP4_OK);
                    /* [G, mn/128, 4, 32, P].transpose(2, 3): out[g, c, i, j] = in[g, c, j, i] */
                    for (int64_t b = 0; b < ng; b++)
                        for (int64_t c = 0; c < mn / 128; c++)
                            for (int64_t i = 0; i < 32; i++)
                                for (int64_t j = 0; j < 4; j++)
                                    for (int64_t w = 0; w < p; w++)
                                        CHECK(dst[b * mn * p + w * mn + c * 128 + i * 4 + j] ==
                                              tget(&o.t, b, c * 128 + j * 32 + i, w));
                    free(dst);
                    free(o.buf);
                }
    int32_t buf[96 * 2];
    hfp4_sf_tensor t = {buf, HFP4_DTYPE_INT32, 0, 96, 2, 0, 1, 96};
    hfp4_sf_tensor out;
    size_t bytes;
    CHECK_REJECT(hfp4_sf_transpose_for_utccp_query(&t, &out, &bytes), HFP4_ERR_UNSUPPORTED, "mn = 96");
    t.dtype = HFP4_DTYPE_FP32;
    CHECK_REJECT(hfp4_sf_transpose_for_utccp_query(&t, &out, &bytes), HFP4_ERR_INVALID_ARGUMENT, "int32");
}

/* ---- recipes and check_sf_layout ------------------------------------------------------------- */

static int recipe_is(const hfp4_sf_recipe *r, int a, int b, int k) {
    return r->size == 3 && r->gran[0] == a && r->gran[1] == b && r->gran[2] == k;
}

TEST(sf_default_recipe) {
    hfp4_sf_recipe r;
    CHECK_STATUS(hfp4_sf_get_default_recipe(HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, 90, &r), HFP4_OK);
    CHECK(recipe_is(&r, 1, 128, 128));
    CHECK_REJECT(hfp4_sf_get_default_recipe(HFP4_DTYPE_FP32, HFP4_DTYPE_INT32, 90, &r), HFP4_ERR_UNSUPPORTED,
                 "sm_90");
    static const int32_t archs[] = {100, 103, 120, 121};
    for (int i = 0; i < 4; i++) {
        CHECK_STATUS(hfp4_sf_get_default_recipe(HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, archs[i], &r), HFP4_OK);
        CHECK(recipe_is(&r, 1, 128, 128));
        CHECK_STATUS(hfp4_sf_get_default_recipe(HFP4_DTYPE_INT32, HFP4_DTYPE_INT32, archs[i], &r), HFP4_OK);
        CHECK(recipe_is(&r, 1, 1, 128));
        CHECK_STATUS(hfp4_sf_get_default_recipe(HFP4_DTYPE_FP32, HFP4_DTYPE_UE8M0_PACKED, archs[i], &r), HFP4_OK);
        CHECK(recipe_is(&r, 1, 1, 128));
    }
    CHECK_REJECT(hfp4_sf_get_default_recipe(HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, 80, &r), HFP4_ERR_UNSUPPORTED,
                 "unknown recipe");
    CHECK_REJECT(hfp4_sf_get_default_recipe(HFP4_DTYPE_FP32, HFP4_DTYPE_FP32, 9, &r), HFP4_ERR_INVALID_ARGUMENT,
                 "arch = 9");
    CHECK_REJECT(hfp4_sf_get_default_recipe(HFP4_DTYPE_BF16, HFP4_DTYPE_FP32, 90, &r), HFP4_ERR_INVALID_ARGUMENT,
                 "bf16");
}

TEST(sf_check_layout) {
    float buf[3 * 8 * 4];
    hfp4_sf_tensor t = {buf, HFP4_DTYPE_FP32, 0, 6, 2, 0, 1, 8}; /* MN-major TMA-aligned [6, 2] */
    CHECK_STATUS(hfp4_sf_check_layout(&t, 6, 256, 1, 128, 0, HFP4_SF_CHECK_TMA_STRIDE, HFP4_DTYPE_FP32), HFP4_OK);
    CHECK_STATUS(hfp4_sf_check_layout(&t, 6, 129, 1, 128, 0, 0, HFP4_DTYPE_NONE), HFP4_OK);
    CHECK_REJECT(hfp4_sf_check_layout(&t, 6, 257, 1, 128, 0, 0, HFP4_DTYPE_NONE), HFP4_ERR_INVALID_ARGUMENT,
                 "sf.sf_k = 2 must be ceil(k / 128)");
    CHECK_REJECT(hfp4_sf_check_layout(&t, 7, 256, 1, 128, 0, 0, HFP4_DTYPE_NONE), HFP4_ERR_INVALID_ARGUMENT,
                 "sf.mn = 6 must be ceil(mn / gran_mn)");
    CHECK_REJECT(hfp4_sf_check_layout(&t, 6, 256, 1, 128, 2, 0, HFP4_DTYPE_NONE), HFP4_ERR_INVALID_ARGUMENT,
                 "num_groups = 2");
    CHECK_REJECT(hfp4_sf_check_layout(&t, 6, 256, 1, 128, 0, 0, HFP4_DTYPE_INT32), HFP4_ERR_INVALID_ARGUMENT,
                 "must be int32");
    CHECK_REJECT(hfp4_sf_check_layout(&t, 6, 256, 0, 128, 0, 0, HFP4_DTYPE_NONE), HFP4_ERR_INVALID_ARGUMENT,
                 "must be > 0");
    CHECK_REJECT(hfp4_sf_check_layout(&t, 6, 256, 1, 128, 0, HFP4_SF_CHECK_SM90_SFB, HFP4_DTYPE_NONE),
                 HFP4_ERR_INVALID_ARGUMENT, "contiguous K-major");
    CHECK_REJECT(hfp4_sf_check_layout(&t, 6, 256, 1, 128, 0, 8, HFP4_DTYPE_NONE), HFP4_ERR_INVALID_ARGUMENT,
                 "unknown bits");
    /* type_check itself is validated: an unknown value named the descriptor's dtype as wrong
     * ("sf.dtype = fp32 must be unknown"; found by an API review) */
    CHECK_REJECT(hfp4_sf_check_layout(&t, 6, 256, 1, 128, 0, 0, (hfp4_dtype)42), HFP4_ERR_INVALID_ARGUMENT,
                 "type_check = unknown (42) must be none, fp32, int32 or ue8m0_packed");
    CHECK_REJECT(hfp4_sf_check_layout(&t, 6, 256, 1, 128, 0, 0, HFP4_DTYPE_BF16), HFP4_ERR_INVALID_ARGUMENT,
                 "type_check = bf16 (2)");
    CHECK_REJECT(hfp4_sf_check_layout(&t, 6, 256, 1, 128, 0, 0, (hfp4_dtype)-1), HFP4_ERR_INVALID_ARGUMENT,
                 "type_check = unknown (-1)");
    CHECK_REJECT(hfp4_sf_check_layout(&t, 6, 256, 1, 128, 0, 0, HFP4_DTYPE_UE8M0_PACKED), HFP4_ERR_INVALID_ARGUMENT,
                 "sf.dtype = fp32 must be ue8m0_packed");
    /* int32: one word per 4 * gran_k */
    hfp4_sf_tensor ti = {buf, HFP4_DTYPE_INT32, 3, 6, 2, 16, 1, 8};
    CHECK_STATUS(hfp4_sf_check_layout(&ti, 6, 1024, 1, 128, 3, HFP4_SF_CHECK_TMA_STRIDE, HFP4_DTYPE_INT32), HFP4_OK);
    CHECK_STATUS(hfp4_sf_check_layout(&ti, 6, 250, 1, 32, 3, HFP4_SF_CHECK_TMA_STRIDE, HFP4_DTYPE_INT32), HFP4_OK);
    ti.stride_group = 20;
    CHECK_REJECT(hfp4_sf_check_layout(&ti, 6, 1024, 1, 128, 3, HFP4_SF_CHECK_TMA_STRIDE, HFP4_DTYPE_NONE),
                 HFP4_ERR_INVALID_ARGUMENT, "stride_group = 20");
    hfp4_sf_tensor tk = {buf, HFP4_DTYPE_INT32, 0, 6, 2, 0, 2, 1}; /* K-major */
    CHECK_REJECT(hfp4_sf_check_layout(&tk, 6, 1024, 1, 128, 0, HFP4_SF_CHECK_TMA_STRIDE, HFP4_DTYPE_NONE),
                 HFP4_ERR_INVALID_ARGUMENT, "stride_mn = 2 must be 1");
    CHECK_STATUS(hfp4_sf_check_layout(&tk, 6, 1024, 1, 128, 0, HFP4_SF_CHECK_SM90_SFB, HFP4_DTYPE_NONE), HFP4_OK);
}

/* ---- transform: branch table ----------------------------------------------------------------- */

/* What the branch table of the header says, restated: 0 = UNSUPPORTED, 1 = FP32/INT32 MN-major copy,
 * 2 = SM90 SFB pass-through, 3 = pack, 4 = packed pass-through. */
static int expected_branch(int fp32, int gran_mn, int gran_k, int arch, int disable) {
    int major = arch / 10, sm90 = major == 9, sm100 = major == 10 || major == 12;
    if (fp32 && gran_mn == 1 && gran_k == 128 && (sm90 || disable)) return 1;
    if (fp32 && gran_mn == 128 && gran_k == 128 && (sm90 || disable)) return 2;
    if (fp32 && gran_mn == 1 && gran_k == 32 && sm90) return 1;
    if (!fp32 && gran_mn == 1 && (gran_k == 32 || gran_k == 128) && sm90) return 1;
    if (fp32 && (gran_k == 32 || gran_k == 128) && sm100) return disable ? 0 : 3;
    if (!fp32 && gran_mn == 1 && (gran_k == 32 || gran_k == 128) && sm100) return 4;
    return 0;
}

TEST(sf_transform_branch_table) {
    hfp4_rng rng = hfp4_rng_make(7);
    static const int32_t archs[] = {80, 89, 90, 100, 103, 110, 120, 121};
    static const int32_t gmns[] = {1, 2, 64, 128};
    static const int32_t gks[] = {16, 32, 64, 128};
    int checked = 0;
    for (int ai = 0; ai < 8; ai++)
        for (int fp32 = 0; fp32 <= 1; fp32++)
            for (int gi = 0; gi < 4; gi++)
                for (int ki = 0; ki < 4; ki++)
                    for (int disable = 0; disable <= 1; disable++)
                        for (int32_t groups = 0; groups <= 2; groups += 2) {
                            if (hfp4_test_failed()) return;
                            int32_t gran_mn = gmns[gi], gran_k = gks[ki], arch = archs[ai];
                            int64_t mn = 130, k = 1000;
                            int64_t sf_rows = cdiv(mn, gran_mn), sf_k = cdiv(k, gran_k * (fp32 ? 1 : 4));
                            int branch = expected_branch(fp32, gran_mn, gran_k, arch, disable);
                            /* inputs in the layout the pass-through branches promise */
                            int kind = branch == 4 ? L_MNTMA : (branch == 2 ? L_KMAJOR : (int)(checked % 2 ? L_KMAJOR : L_PADDED));
                            owned_tensor o = make_tensor(fp32 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_INT32, groups, sf_rows, sf_k,
                                                         kind, &rng, fp32);
                            if (branch == 4) { /* TMA-aligned for the logical mn */
                                o.t.stride_k = align4(mn);
                                o.t.stride_group = align4(mn) * sf_k;
                            }
                            hfp4_sf_transform_request req;
                            memset(&req, 0, sizeof req);
                            req.sf = &o.t;
                            req.mn = mn;
                            req.k = k;
                            req.recipe = hfp4_sf_recipe2(gran_mn, gran_k);
                            req.num_groups = groups;
                            req.disable_ue8m0_cast = disable;
                            req.arch = arch;
                            hfp4_sf_tensor qd, od;
                            size_t bytes = 0;
                            hfp4_status want = branch ? HFP4_OK : HFP4_ERR_UNSUPPORTED;
                            hfp4_status got = hfp4_sf_transform_into_required_layout_query(&req, &qd, &bytes);
                            CHECK_MSG(got == want, "arch %d %s (%d,%d) disable %d: got %s want %s (%s)", (int)arch,
                                      fp32 ? "fp32" : "int32", (int)gran_mn, (int)gran_k, disable,
                                      hfp4_status_name(got), hfp4_status_name(want), hfp4_last_error());
                            if (!branch) {
                                char frag[96];
                                snprintf(frag, sizeof frag, "%s scales with gran_mn = %d, gran_k = %d on sm_%d",
                                         fp32 ? "fp32" : "int32", (int)gran_mn, (int)gran_k, (int)arch);
                                CHECK_MSG(hfp4_test_contains(hfp4_last_error(), frag), "message \"%s\" lacks \"%s\"",
                                          hfp4_last_error(), frag);
                            }
                            if (got == HFP4_OK) {
                                uint32_t *dst = (uint32_t *)malloc(bytes + 4);
                                CHECK_STATUS(hfp4_sf_transform_into_required_layout(&req, NULL, dst, bytes, &od), HFP4_OK);
                                int64_t words = 0;
                                uint32_t *want_buf = NULL;
                                if (branch == 1) want_buf = ref_mn_major(&o.t, &words);
                                if (branch == 3) want_buf = ref_pack(&o.t, mn, gran_mn, NULL, 0, 0, &words);
                                if (branch == 2 || branch == 4) {
                                    CHECK(bytes == 0 && od.data == o.t.data && qd.data == o.t.data);
                                } else {
                                    CHECK_EQ_I64(words * 4, (int64_t)bytes);
                                    CHECK(memcmp(dst, want_buf, bytes) == 0);
                                    int64_t t = align4(mn), p = branch == 3 ? cdiv(k, 4 * gran_k) : sf_k;
                                    CHECK(check_desc(&od, branch == 3 ? HFP4_DTYPE_INT32 : o.t.dtype, groups, mn, p,
                                                     groups ? t * p : 0, 1, t));
                                }
                                free(want_buf);
                                free(dst);
                            }
                            free(o.buf);
                            checked++;
                        }
    CHECK_EQ_I64(checked, 8 * 2 * 4 * 4 * 2 * 2);
}

TEST(sf_transform_recipe_contract) {
    float sf[8 * 2];
    for (int i = 0; i < 16; i++) sf[i] = 1.0f;
    hfp4_sf_tensor t = {sf, HFP4_DTYPE_FP32, 0, 8, 2, 0, 2, 1};
    hfp4_sf_transform_request req;
    memset(&req, 0, sizeof req);
    req.sf = &t;
    req.mn = 8;
    req.k = 256;
    req.arch = 90;
    hfp4_sf_tensor out;
    size_t bytes;
    CHECK_REJECT(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "recipe");
    req.recipe = hfp4_sf_recipe3(1, 128, 128);
    CHECK_REJECT(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "needs is_sfa");
    req.is_sfa = HFP4_SF_OPERAND_A;
    CHECK_STATUS(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_OK);
    CHECK(out.stride_k == 8 && out.dtype == HFP4_DTYPE_FP32);
    req.is_sfa = HFP4_SF_OPERAND_B; /* gran_mn 128: sf must have 1 row */
    CHECK_REJECT(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "sf.mn = 8 must be ceil(mn / gran_mn) = ceil(8 / 128) = 1");
    req.recipe = hfp4_sf_recipe2(1, 128);
    CHECK_REJECT(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "is_sfa must be unset");
    req.is_sfa = HFP4_SF_OPERAND_UNSET;
    req.arch = 9;
    CHECK_REJECT(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "arch = 9");
    req.arch = 90;
    req.num_groups = 1;
    CHECK_REJECT(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "num_groups");
    req.num_groups = 0;
    req.k = -1;
    CHECK_REJECT(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "k = -1");
    /* branch 2 pass-through requires a contiguous layout */
    float blk[4 * 3 + 8];
    hfp4_sf_tensor b = {blk, HFP4_DTYPE_FP32, 0, 2, 3, 0, 4, 1}; /* padded K-major rows */
    req.sf = &b;
    req.mn = 256;
    req.k = 384;
    req.recipe = hfp4_sf_recipe2(128, 128);
    CHECK_REJECT(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "contiguous K-major");
    b.stride_mn = 3;
    CHECK_STATUS(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_OK);
    CHECK(bytes == 0 && out.data == blk);
    b.stride_mn = 1;
    b.stride_k = 2; /* MN-major without padding */
    CHECK_STATUS(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_OK);
    /* branch 6 pass-through requires the TMA layout */
    int32_t packed[16];
    hfp4_sf_tensor p = {packed, HFP4_DTYPE_INT32, 0, 6, 1, 0, 1, 6};
    req.sf = &p;
    req.mn = 6;
    req.k = 128;
    req.recipe = hfp4_sf_recipe2(1, 32);
    req.arch = 100;
    CHECK_REJECT(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "stride_k = 6 must be align(mn, 4) = 8");
    p.stride_k = 8;
    CHECK_STATUS(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_OK);
    CHECK(out.data == packed && bytes == 0);
    /* ... while the SM90 branch for packed scales relayouts them */
    p.stride_k = 1;
    p.stride_mn = 1;
    p.sf_k = 1;
    req.arch = 90;
    CHECK_STATUS(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_OK);
    CHECK_EQ_I64(bytes, 8 * 4);
    /* psum reaches the packing branch only; it needs one group there */
    float s3[2 * 4 * 1];
    for (int i = 0; i < 8; i++) s3[i] = 1.0f;
    hfp4_sf_tensor g3 = {s3, HFP4_DTYPE_FP32, 2, 4, 1, 4, 1, 1};
    int32_t ends[1] = {4};
    hfp4_sf_psum ps = {ends, 1, 0};
    req.sf = &g3;
    req.mn = 4;
    req.k = 32;
    req.num_groups = 2;
    req.psum = &ps;
    req.arch = 100;
    CHECK_REJECT(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "single group");
    req.arch = 90; /* ignored by the SM90 branch */
    CHECK_STATUS(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_OK);
}

/* DeepGEMM PR #403: transform_sf_into_required_layout(torch.ones(4, 128, 8), 128, 256, (1, 1, 32),
 * num_groups=4, is_sfa=False) -> int32 shape (4, 128, 2), stride (256, 1, 128). */
TEST(sf_transform_pr403_example) {
    static float ones[4 * 128 * 8];
    for (int i = 0; i < 4 * 128 * 8; i++) ones[i] = 1.0f;
    hfp4_sf_tensor t = {ones, HFP4_DTYPE_FP32, 4, 128, 8, 128 * 8, 8, 1};
    static const int32_t archs[] = {100, 120};
    for (int ai = 0; ai < 2; ai++) {
        hfp4_sf_transform_request req;
        memset(&req, 0, sizeof req);
        req.sf = &t;
        req.mn = 128;
        req.k = 256;
        req.recipe = hfp4_sf_recipe3(1, 1, 32);
        req.num_groups = 4;
        req.is_sfa = HFP4_SF_OPERAND_B;
        req.arch = archs[ai];
        hfp4_sf_tensor out;
        size_t bytes;
        CHECK_STATUS(hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes), HFP4_OK);
        CHECK(check_desc(&out, HFP4_DTYPE_INT32, 4, 128, 2, 256, 1, 128));
        CHECK_EQ_I64(bytes, 4 * 128 * 2 * 4);
        static uint32_t dst[4 * 256];
        CHECK_STATUS(hfp4_sf_transform_into_required_layout(&req, NULL, dst, sizeof dst, &out), HFP4_OK);
        CHECK(check_desc(&out, HFP4_DTYPE_INT32, 4, 128, 2, 256, 1, 128));
        for (int i = 0; i < 4 * 256; i++) CHECK_MSG(dst[i] == 0x7F7F7F7Fu, "word %d = 0x%08x", i, dst[i]);
    }
}

/* ---- pair transform and DeepGEMM's SM120 rejections (§3.7) ----------------------------------- */

typedef struct pair_fixture {
    float sfa[32 * 5], sfb[32 * 5];
    hfp4_sf_tensor a, b;
    hfp4_sf_pair_request req;
} pair_fixture;

/* m = n = 32, k = 128, per-row FP32 scales for gran_k 32 ([32, 4], K-major) as the test builds. */
static void pair_init(pair_fixture *f, int32_t arch) {
    for (int i = 0; i < 32 * 5; i++) f->sfa[i] = f->sfb[i] = 0.25f;
    hfp4_sf_tensor a = {f->sfa, HFP4_DTYPE_FP32, 0, 32, 4, 0, 4, 1};
    f->a = a;
    f->b = a;
    f->b.data = f->sfb;
    memset(&f->req, 0, sizeof f->req);
    f->req.sfa = &f->a;
    f->req.sfb = &f->b;
    f->req.m = f->req.n = 32;
    f->req.k = 128;
    f->req.arch = arch;
}

static hfp4_status pair_run(pair_fixture *f) {
    static uint32_t da[4096], db[4096];
    hfp4_sf_pair_result res;
    hfp4_status q = hfp4_sf_transform_pair_into_required_layout_query(&f->req, &res);
    char qmsg[512];
    snprintf(qmsg, sizeof qmsg, "%s", hfp4_last_error());
    hfp4_status s = hfp4_sf_transform_pair_into_required_layout(&f->req, NULL, da, sizeof da, db, sizeof db, &res);
    CHECK_MSG(q == s, "query said %s (%s), call said %s", hfp4_status_name(q), qmsg, hfp4_status_name(s));
    return s;
}

TEST(sf_pair_sm120_rejections) {
    static const int32_t archs[] = {120, 100};
    for (int ai = 0; ai < 2; ai++) {
        pair_fixture f;
        /* recipe_a without recipe_b */
        pair_init(&f, archs[ai]);
        f.req.recipe_a = hfp4_sf_recipe2(1, 32);
        CHECK_REJECT(pair_run(&f), HFP4_ERR_INVALID_ARGUMENT, "recipe_a and recipe_b must be given together");
        /* recipe together with recipe_a and recipe_b */
        pair_init(&f, archs[ai]);
        f.req.recipe = hfp4_sf_recipe3(1, 1, 32);
        f.req.recipe_a = hfp4_sf_recipe2(1, 32);
        f.req.recipe_b = hfp4_sf_recipe2(1, 32);
        CHECK_REJECT(pair_run(&f), HFP4_ERR_INVALID_ARGUMENT, "not both");
        /* recipe (0, 1, 32) */
        pair_init(&f, archs[ai]);
        f.req.recipe = hfp4_sf_recipe3(0, 1, 32);
        CHECK_REJECT(pair_run(&f), HFP4_ERR_INVALID_ARGUMENT, "gran_mn = 0, gran_k = 32) must be > 0");
        /* recipe (1, 1, 64): with scales shaped for it, a well-formed request without a layout */
        pair_init(&f, archs[ai]);
        f.req.recipe = hfp4_sf_recipe3(1, 1, 64);
        f.a.sf_k = f.b.sf_k = 2;
        f.a.stride_mn = f.b.stride_mn = 2;
        CHECK_REJECT(pair_run(&f), HFP4_ERR_UNSUPPORTED, "gran_mn = 1, gran_k = 64 on sm_1");
        /* ... and with the gran-32 scales DeepGEMM's test passes, the shape check fires first */
        pair_init(&f, archs[ai]);
        f.req.recipe = hfp4_sf_recipe3(1, 1, 64);
        CHECK_REJECT(pair_run(&f), HFP4_ERR_INVALID_ARGUMENT, "(sfa): sf.sf_k = 4 must be ceil(k / 64)");
        /* (1, 1, 32) with disable_ue8m0_cast */
        pair_init(&f, archs[ai]);
        f.req.recipe = hfp4_sf_recipe3(1, 1, 32);
        f.req.disable_ue8m0_cast = 1;
        CHECK_REJECT(pair_run(&f), HFP4_ERR_UNSUPPORTED, "gran_mn = 1, gran_k = 32 on sm_1");
        CHECK(hfp4_test_contains(hfp4_last_error(), "disable_ue8m0_cast"));
        /* K = 130 with FP4 B (FP8 A): scales [32, 5] */
        pair_init(&f, archs[ai]);
        f.req.k = 130;
        f.a.sf_k = f.b.sf_k = 5;
        f.a.stride_mn = f.b.stride_mn = 5;
        f.req.recipe = hfp4_sf_recipe3(1, 1, 32);
        f.req.a_dtype = HFP4_DTYPE_FP8_E4M3;
        f.req.b_dtype = HFP4_DTYPE_FP4_E2M1;
        CHECK_REJECT(pair_run(&f), HFP4_ERR_INVALID_ARGUMENT, "k = 130 must be a multiple of 32 for an FP4 operand");
        f.req.b_dtype = HFP4_DTYPE_FP8_E4M3; /* the same K with FP8 B is fine */
        CHECK_STATUS(pair_run(&f), HFP4_OK);
        /* block recipe_a (128, 32) with packed SF: sf[:1] packed -> int32 [1, 1] */
        pair_init(&f, archs[ai]);
        hfp4_sf_tensor row0 = f.a;
        row0.mn = 1;
        static uint32_t packed[4];
        hfp4_sf_tensor pk;
        CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&row0, 1, 1, NULL, NULL, packed, sizeof packed,
                                                                          &pk),
                     HFP4_OK);
        CHECK(check_desc(&pk, HFP4_DTYPE_INT32, 0, 1, 1, 0, 1, 4));
        f.req.sfa = &pk;
        f.req.recipe_a = hfp4_sf_recipe2(128, 32);
        f.req.recipe_b = hfp4_sf_recipe2(1, 32);
        CHECK_REJECT(pair_run(&f), HFP4_ERR_UNSUPPORTED, "(sfa): no SF layout for int32 scales with gran_mn = 128, gran_k = 32");
    }
}

TEST(sf_pair_defaults_and_outputs) {
    pair_fixture f;
    /* SM90 FP8 x FP4 (§5.6): recipe_a (1, 128), recipe_b (1, 32), FP32 scales, disable_ue8m0_cast */
    pair_init(&f, 90);
    f.a.sf_k = 1;
    f.a.stride_mn = 1;
    f.req.recipe_a = hfp4_sf_recipe2(1, 128);
    f.req.recipe_b = hfp4_sf_recipe2(1, 32);
    f.req.disable_ue8m0_cast = 1;
    f.req.b_dtype = HFP4_DTYPE_FP4_E2M1;
    hfp4_sf_pair_result res;
    CHECK_STATUS(hfp4_sf_transform_pair_into_required_layout_query(&f.req, &res), HFP4_OK);
    CHECK(res.gran_k_a == 128 && res.gran_k_b == 32);
    CHECK(check_desc(&res.sfa, HFP4_DTYPE_FP32, 0, 32, 1, 0, 1, 32));
    CHECK(check_desc(&res.sfb, HFP4_DTYPE_FP32, 0, 32, 4, 0, 1, 32));
    CHECK(res.sfa_bytes == 32 * 4 && res.sfb_bytes == 32 * 4 * 4);
    /* Default recipe on SM90: (1, 128, 128) -> SFB must be a 128x128 block tensor */
    pair_init(&f, 90);
    f.a.sf_k = 1;
    f.a.stride_mn = 1;
    f.b.mn = 1;
    f.b.sf_k = 1;
    f.b.stride_mn = 1;
    CHECK_STATUS(hfp4_sf_transform_pair_into_required_layout_query(&f.req, &res), HFP4_OK);
    CHECK(res.gran_k_a == 128 && res.gran_k_b == 128 && res.sfb_bytes == 0 && res.sfb.data == f.sfb);
    /* Default recipe on SM100 with int32 SFB: (1, 1, 128) -> both must be packed pass-through */
    pair_init(&f, 100);
    int32_t pa[32], pb[32];
    hfp4_sf_tensor ta = {pa, HFP4_DTYPE_INT32, 0, 32, 1, 0, 1, 32}, tb = ta;
    tb.data = pb;
    f.req.sfa = &ta;
    f.req.sfb = &tb;
    CHECK_STATUS(hfp4_sf_transform_pair_into_required_layout_query(&f.req, &res), HFP4_OK);
    CHECK(res.sfa.data == pa && res.sfb.data == pb && res.gran_k_a == 128);
    /* SM100 FP4 path: recipe_a (1, 128), recipe_b (1, 32) with UE8M0-valued FP32 scales */
    pair_init(&f, 120);
    f.a.sf_k = 1;
    f.a.stride_mn = 1;
    f.req.recipe_a = hfp4_sf_recipe2(1, 128);
    f.req.recipe_b = hfp4_sf_recipe2(1, 32);
    static uint32_t da[64], db[64];
    memset(da, 0xEE, sizeof da);
    memset(db, 0xEE, sizeof db);
    f.sfb[31 * 4 + 3] = 0.2f; /* not a power of two: nothing may be written, not even SFA */
    CHECK_REJECT(hfp4_sf_transform_pair_into_required_layout(&f.req, NULL, da, sizeof da, db, sizeof db, &res),
                 HFP4_ERR_INVALID_ARGUMENT, "(sfb): sf(mn = 31, sf_k = 3) = 0.200000003");
    for (int i = 0; i < 64; i++) CHECK(da[i] == 0xEEEEEEEEu && db[i] == 0xEEEEEEEEu);
    f.sfb[31 * 4 + 3] = 0.25f;
    CHECK_STATUS(hfp4_sf_transform_pair_into_required_layout(&f.req, NULL, da, sizeof da, db, sizeof db, &res), HFP4_OK);
    CHECK(res.sfa.data == da && res.sfb.data == db && res.sfa_bytes == 32 * 4 && res.sfb_bytes == 32 * 4);
    CHECK(da[0] == 0x0000007Du && db[0] == 0x7D7D7D7Du); /* 0.25 = 2^-2 -> byte 125 */
    CHECK_REJECT(hfp4_sf_transform_pair_into_required_layout(&f.req, NULL, da, sizeof da, da + 16, sizeof da, &res),
                 HFP4_ERR_INVALID_ARGUMENT, "dst_a and dst_b overlap");
    CHECK_REJECT(hfp4_sf_transform_pair_into_required_layout(&f.req, NULL, da, sizeof da, f.sfa, sizeof da, &res),
                 HFP4_ERR_INVALID_ARGUMENT, "dst_b overlaps");
    /* default recipe with int32 scales on SM90 has no default */
    pair_init(&f, 90);
    f.req.sfa = &ta;
    f.req.sfb = &tb;
    CHECK_REJECT(pair_run(&f), HFP4_ERR_UNSUPPORTED, "no default recipe");
    /* operand dtypes outside the list */
    pair_init(&f, 90);
    f.req.a_dtype = HFP4_DTYPE_INT32;
    CHECK_REJECT(pair_run(&f), HFP4_ERR_INVALID_ARGUMENT, "a_dtype = int32");
}
