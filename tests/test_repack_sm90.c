/*
 * test_repack_sm90.c - the SM90 weight repack on the CPU: every value decodes back exactly, folded
 * and per-32 chunks are chosen as documented (sm90_layout.h), sizes, and bad inputs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "../src/weights/repack_sm90.h"

typedef struct plain_weights {
    int32_t groups;
    int64_t n, k;
    uint8_t *codes; /* [G][n][k/2] */
    float *sf;      /* [G][n][k/32] */
    hfp4_matrix m;
} plain_weights;

static void make_plain(plain_weights *p, int32_t groups, int64_t n, int64_t k, int lo_exp, int hi_exp, int pow2,
                       uint64_t salt) {
    hfp4_rng r = hfp4_rng_make(salt);
    p->groups = groups;
    p->n = n;
    p->k = k;
    p->codes = malloc((size_t)groups * n * k / 2);
    p->sf = malloc(sizeof(float) * groups * n * (k / 32));
    for (int64_t i = 0; i < groups * n * k / 2; i++) p->codes[i] = (uint8_t)hfp4_rng_next(&r);
    for (int64_t i = 0; i < groups * n * (k / 32); i++) {
        int e = lo_exp + (int)(hfp4_rng_next(&r) % (uint64_t)(hi_exp - lo_exp + 1));
        p->sf[i] = pow2 ? ldexpf(1.0f, e) : ldexpf(1.0f + (float)hfp4_rng_uniform(&r), e);
    }
    memset(&p->m, 0, sizeof p->m);
    p->m.data = p->codes;
    p->m.dtype = HFP4_DTYPE_FP4_E2M1;
    p->m.rows = n;
    p->m.cols = k;
    p->m.ld = k / 2;
    p->m.stride_group = n * k / 2;
    p->m.scales = (hfp4_scales){p->sf, HFP4_DTYPE_FP32, 1, 32, k / 32, 1, n * (k / 32)};
}

static double plain_value(const plain_weights *p, int64_t g, int64_t n, int64_t k) {
    uint8_t byte = p->codes[(g * p->n + n) * (p->k / 2) + k / 2];
    uint8_t code = (k & 1) ? byte >> 4 : byte & 15;
    return (double)hfp4_fp4_decode(code) * p->sf[(g * p->n + n) * (p->k / 32) + k / 32];
}

/* Repacks and decodes every value back; returns the number of mismatches. */
static int64_t roundtrip(const plain_weights *p, hfp4_dtype sdt, int64_t *fast_chunks, int64_t *all_chunks) {
    size_t bytes = 0;
    CHECK_STATUS(hfp4_sm90_weights_size(p->groups, p->n, p->k, sdt, &bytes), HFP4_OK);
    uint8_t *buf = malloc(bytes);
    memset(buf, 0xA5, bytes);
    hfp4_matrix out;
    hfp4_status st = hfp4_ref_repack_sm90(&p->m, p->groups, sdt, buf, bytes, &out);
    CHECK_STATUS(st, HFP4_OK);
    int64_t bad = 0;
    if (st == HFP4_OK) {
        hfp4_sm90_geometry geo;
        hfp4__sm90_geometry_of(&out, p->groups, &geo);
        CHECK_EQ_I64(geo.total_bytes, (int64_t)bytes);
        for (int64_t g = 0; g < p->groups; g++)
            for (int64_t n = 0; n < p->n; n++)
                for (int64_t k = 0; k < p->k; k++) {
                    double want = plain_value(p, g, n, k), got = hfp4__sm90_weight_value(&out, &geo, g, n, k);
                    if (!(got == want)) {
                        if (bad == 0)
                            CHECK_MSG(0, "group %lld row %lld col %lld: got %g want %g", (long long)g, (long long)n,
                                      (long long)k, got, want);
                        bad++;
                    }
                }
        *fast_chunks = 0;
        *all_chunks = (int64_t)p->groups * geo.tiles * geo.chunks;
        for (int64_t i = 0; i < *all_chunks; i++) *fast_chunks += (buf[geo.mode_offset + i] & HFP4_SM90_MODE_PER32) == 0;
    }
    free(buf);
    return bad;
}

TEST(repack_sm90_roundtrip_folded) {
    plain_weights p;
    make_plain(&p, 3, 200, 416, -12, -2, 1, 1); /* spans of 10 binades: every chunk folds */
    int64_t fast = 0, all = 0;
    CHECK_EQ_I64(roundtrip(&p, HFP4_DTYPE_UE8M0, &fast, &all), 0);
    CHECK_EQ_I64(fast, all);
    CHECK(all > 0);
    free(p.codes);
    free(p.sf);
}

TEST(repack_sm90_roundtrip_wide_spread_uses_per32_chunks) {
    plain_weights p;
    make_plain(&p, 2, 130, 256, -40, 0, 1, 2); /* spans up to 40 binades: most chunks per-32 */
    int64_t fast = 0, all = 0;
    CHECK_EQ_I64(roundtrip(&p, HFP4_DTYPE_UE8M0, &fast, &all), 0);
    CHECK(fast < all);
    free(p.codes);
    free(p.sf);
}

TEST(repack_sm90_zero_groups_do_not_block_folding) {
    plain_weights p;
    make_plain(&p, 1, 64, 128, -6, -3, 1, 3);
    /* row 5, group 2: all zero codes with a scale 100 binades away */
    memset(p.codes + 5 * 64 + 32, 0x80, 16);
    p.sf[5 * 4 + 2] = ldexpf(1.0f, -110);
    int64_t fast = 0, all = 0;
    CHECK_EQ_I64(roundtrip(&p, HFP4_DTYPE_UE8M0, &fast, &all), 0);
    CHECK_EQ_I64(fast, all);
    free(p.codes);
    free(p.sf);
}

/* Repacks p (UE8M0 storage) and checks the one-base bit of every tile (layout v3): set exactly in
 * the tiles expected (want_one_base(tile)), only on folded chunks, and then every row keeps one
 * e_max in all chunks. */
static void check_one_base(const plain_weights *p, int (*want_one_base)(int64_t group, int64_t tile)) {
    size_t bytes = 0;
    CHECK_STATUS(hfp4_sm90_weights_size(p->groups, p->n, p->k, HFP4_DTYPE_UE8M0, &bytes), HFP4_OK);
    uint8_t *buf = malloc(bytes);
    hfp4_matrix out;
    CHECK_STATUS(hfp4_ref_repack_sm90(&p->m, p->groups, HFP4_DTYPE_UE8M0, buf, bytes, &out), HFP4_OK);
    hfp4_sm90_geometry geo;
    hfp4__sm90_geometry_of(&out, p->groups, &geo);
    for (int64_t g = 0; g < p->groups; g++)
        for (int64_t t = 0; t < geo.tiles; t++) {
            const uint8_t *modes = buf + geo.mode_offset + (g * geo.tiles + t) * geo.chunks;
            const int want = want_one_base(g, t);
            for (int64_t c = 0; c < geo.chunks; c++) {
                CHECK_MSG(((modes[c] & HFP4_SM90_MODE_ONE_BASE) != 0) == want, "group %lld tile %lld chunk %lld: mode %d",
                          (long long)g, (long long)t, (long long)c, modes[c]);
                CHECK_MSG(!(modes[c] & HFP4_SM90_MODE_ONE_BASE) || !(modes[c] & HFP4_SM90_MODE_PER32),
                          "one-base on a per-32 chunk");
            }
            if (!want) continue;
            const uint32_t *words = (const uint32_t *)(buf + geo.scale_offset + g * geo.scale_bytes_per_group);
            for (int64_t r = 0; r < 64; r++) {
                const uint32_t e0 = (words[hfp4_sm90_scale_index(&geo, t * 64 + r, 0)] >> 16) & 255;
                for (int64_t c = 1; c < geo.chunks; c++)
                    CHECK_MSG(((words[hfp4_sm90_scale_index(&geo, t * 64 + r, c * 4)] >> 16) & 255) == e0,
                              "tile %lld row %lld: e_max changes at chunk %lld", (long long)t, (long long)r, (long long)c);
            }
        }
    free(buf);
}

static int all_tiles(int64_t group, int64_t tile) { return (void)group, (void)tile, 1; }
static int only_empty_tiles(int64_t group, int64_t tile) { return (void)group, tile * 64 >= 130; } /* rows past N: zeros */
static int all_but_tile_one(int64_t group, int64_t tile) { return (void)group, tile != 1; }

TEST(repack_sm90_one_base_tiles) {
    /* every row within 10 binades over all of K (8 chunks): every tile one-base; 130 rows: tile 2
     * holds 2 rows, tile 3 only rows past N (N_pad = 256), which are zeros */
    plain_weights p;
    make_plain(&p, 2, 130, 1024, -12, -2, 1, 11);
    check_one_base(&p, all_tiles);
    /* an all-zero row keeps the tile one-base */
    memset(p.codes + 7 * 512, 0, 512);
    check_one_base(&p, all_tiles);
    /* each chunk within 3 binades but the row drifts 3 binades per chunk (21 over K): every chunk
     * folds, no row keeps one base: only the empty tile is one-base */
    for (int64_t g = 0; g < 2; g++)
        for (int64_t n = 0; n < 130; n++)
            for (int64_t j = 0; j < 32; j++) p.sf[(g * 130 + n) * 32 + j] = ldexpf(1.0f, -30 + 3 * (int)(j / 4) + (int)(j % 3));
    check_one_base(&p, only_empty_tiles);
    /* one drifting row in tile 1 only (rows 64..127): every tile but 1 one-base */
    for (int64_t g = 0; g < 2; g++)
        for (int64_t n = 0; n < 130; n++)
            for (int64_t j = 0; j < 32; j++)
                p.sf[(g * 130 + n) * 32 + j] = ldexpf(1.0f, n == 70 ? -30 + 3 * (int)(j / 4) : -8 + (int)(j % 5));
    check_one_base(&p, all_but_tile_one);
    free(p.codes);
    free(p.sf);
}

TEST(repack_sm90_roundtrip_fp32_scales) {
    plain_weights p;
    make_plain(&p, 2, 70, 96, -8, 3, 0, 4); /* arbitrary FP32 scales */
    int64_t fast = 0, all = 0;
    CHECK_EQ_I64(roundtrip(&p, HFP4_DTYPE_FP32, &fast, &all), 0);
    CHECK_EQ_I64(fast, 0);
    hfp4_dtype chosen = HFP4_DTYPE_NONE;
    CHECK_STATUS(hfp4_sm90_weights_scale_dtype(&p.m, 2, &chosen), HFP4_OK);
    CHECK_EQ_I64(chosen, HFP4_DTYPE_FP32);
    free(p.codes);
    free(p.sf);
}

TEST(repack_sm90_rejects_lossy_and_bad_requests) {
    plain_weights p;
    make_plain(&p, 1, 64, 128, -8, 3, 0, 5);
    size_t bytes = 0;
    CHECK_STATUS(hfp4_sm90_weights_size(1, 64, 128, HFP4_DTYPE_UE8M0, &bytes), HFP4_OK);
    uint8_t *buf = malloc(bytes + 64);
    memset(buf, 0x5A, bytes + 64);
    hfp4_matrix out;
    CHECK_REJECT(hfp4_ref_repack_sm90(&p.m, 1, HFP4_DTYPE_UE8M0, buf, bytes, &out), HFP4_ERR_INVALID_ARGUMENT,
                 "not a power of two");
    int untouched = 1;
    for (size_t i = 0; i < bytes + 64; i++) untouched &= buf[i] == 0x5A;
    CHECK_MSG(untouched, "a rejected repack wrote to dst");
    CHECK_REJECT(hfp4_ref_repack_sm90(&p.m, 1, HFP4_DTYPE_FP32, buf, 10, &out), HFP4_ERR_INVALID_ARGUMENT, "dst_bytes");
    CHECK_REJECT(hfp4_ref_repack_sm90(&p.m, 0, HFP4_DTYPE_FP32, buf, bytes, &out), HFP4_ERR_INVALID_ARGUMENT, "num_groups");
    CHECK_REJECT(hfp4_ref_repack_sm90(&p.m, 1, HFP4_DTYPE_BF16, buf, bytes, &out), HFP4_ERR_INVALID_ARGUMENT, "scale_dtype");
    CHECK_REJECT(hfp4_ref_repack_sm90(NULL, 1, HFP4_DTYPE_FP32, buf, bytes, &out), HFP4_ERR_INVALID_ARGUMENT, "w is NULL");
    hfp4_matrix bad = p.m;
    bad.cols = 100;
    CHECK_REJECT(hfp4_ref_repack_sm90(&bad, 1, HFP4_DTYPE_FP32, buf, bytes, &out), HFP4_ERR_INVALID_ARGUMENT, "multiple of 32");
    bad = p.m;
    bad.ld = 10;
    CHECK_REJECT(hfp4_ref_repack_sm90(&bad, 1, HFP4_DTYPE_FP32, buf, bytes, &out), HFP4_ERR_INVALID_ARGUMENT, "ld");
    p.sf[7] = NAN;
    size_t bytes32 = 0;
    CHECK_STATUS(hfp4_sm90_weights_size(1, 64, 128, HFP4_DTYPE_FP32, &bytes32), HFP4_OK);
    uint8_t *buf32 = malloc(bytes32);
    CHECK_REJECT(hfp4_ref_repack_sm90(&p.m, 1, HFP4_DTYPE_FP32, buf32, bytes32, &out), HFP4_ERR_INVALID_ARGUMENT,
                 "not finite");
    free(buf32);
    CHECK_REJECT(hfp4_sm90_weights_size(1, 64, 100, HFP4_DTYPE_FP32, &bytes), HFP4_ERR_INVALID_ARGUMENT, "k = 100");
    /* sizes and strides whose products would overflow (a fuzzing review: a wrapped size came back OK) */
    CHECK_REJECT(hfp4_sm90_weights_size(1, (int64_t)1 << 56, 128, HFP4_DTYPE_UE8M0, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "would pass 2^59 bytes");
    CHECK_REJECT(hfp4_sm90_weights_size(INT32_MAX, (int64_t)1 << 31, (int64_t)1 << 31, HFP4_DTYPE_FP32, &bytes),
                 HFP4_ERR_INVALID_ARGUMENT, "would pass 2^59 bytes");
    CHECK_REJECT(hfp4_sm90_weights_size(1, INT64_MAX, 32, HFP4_DTYPE_FP32, &bytes), HFP4_ERR_INVALID_ARGUMENT,
                 "would pass 2^59 bytes");
    bad = p.m;
    bad.ld = (int64_t)1 << 62;
    CHECK_REJECT(hfp4_ref_repack_sm90(&bad, 1, HFP4_DTYPE_FP32, buf, bytes, &out), HFP4_ERR_INVALID_ARGUMENT,
                 "lies past 2^60");
    bad = p.m;
    bad.scales.stride_k = (int64_t)1 << 62;
    CHECK_REJECT(hfp4_ref_repack_sm90(&bad, 1, HFP4_DTYPE_FP32, buf, bytes, &out), HFP4_ERR_INVALID_ARGUMENT,
                 "past 2^60");
    /* FP32 source scales not 4-byte aligned: the GPU repack's loads would fault after HFP4_OK (found
     * by an API review); both forms check the source the same way */
    bad = p.m;
    bad.scales.data = (const char *)p.sf + 2;
    CHECK_REJECT(hfp4_ref_repack_sm90(&bad, 1, HFP4_DTYPE_FP32, buf, bytes, &out), HFP4_ERR_INVALID_ARGUMENT,
                 "w->scales.data = ");
    CHECK_REJECT(hfp4_repack_sm90(&bad, 1, HFP4_DTYPE_FP32, buf, bytes, &out, NULL), HFP4_ERR_INVALID_ARGUMENT,
                 "must be 4-byte aligned for fp32 scales");
    CHECK_REJECT(hfp4_sm90_weights_scale_dtype(&bad, 1, &(hfp4_dtype){HFP4_DTYPE_NONE}), HFP4_ERR_INVALID_ARGUMENT,
                 "must be 4-byte aligned for fp32 scales");
    /* dst on top of the source: the repack clears dst first, so an in-place repack returned HFP4_OK
     * with garbage (found by an API review); rejected, and the source is untouched */
    size_t src_bytes = 64 * 64;
    uint8_t *big = malloc(bytes32 + src_bytes + 64 * 4 * 4);
    memcpy(big, p.codes, src_bytes);
    bad = p.m;
    bad.data = big;
    CHECK_REJECT(hfp4_ref_repack_sm90(&bad, 1, HFP4_DTYPE_FP32, big, bytes32, &out), HFP4_ERR_INVALID_ARGUMENT,
                 "overlaps the source weights w->data");
    CHECK_MSG(memcmp(big, p.codes, src_bytes) == 0, "a rejected repack wrote over its source");
    CHECK_REJECT(hfp4_repack_sm90(&bad, 1, HFP4_DTYPE_FP32, big, bytes32, &out, NULL), HFP4_ERR_INVALID_ARGUMENT,
                 "hfp4_repack_sm90: dst = ");
    /* dst ending inside the source's last byte; then right after it: apart */
    bad.data = big + bytes32 - 1;
    CHECK_REJECT(hfp4_ref_repack_sm90(&bad, 1, HFP4_DTYPE_FP32, big, bytes32, &out), HFP4_ERR_INVALID_ARGUMENT,
                 "overlaps the source weights");
    bad.data = big + bytes32;
    p.sf[7] = 1.0f;
    CHECK_STATUS(hfp4_ref_repack_sm90(&bad, 1, HFP4_DTYPE_FP32, big, bytes32, &out), HFP4_OK);
    /* dst over the source scales */
    bad = p.m;
    float *sf_in_dst = (float *)(big + ((bytes32 - 16) & ~(size_t)3)); /* (4-byte aligned) */
    memcpy(sf_in_dst, p.sf, 64 * 4 * 4);
    bad.scales.data = sf_in_dst;
    CHECK_REJECT(hfp4_ref_repack_sm90(&bad, 1, HFP4_DTYPE_FP32, big, bytes32, &out), HFP4_ERR_INVALID_ARGUMENT,
                 "overlaps the source scales w->scales.data");
    free(big);
    /* UE8M0 bytes have no alignment to keep */
    uint8_t *e8 = malloc(64 * 4 + 1);
    memset(e8, 127, 64 * 4 + 1);
    bad = p.m;
    bad.scales = (hfp4_scales){e8 + 1, HFP4_DTYPE_UE8M0, 1, 32, 4, 1, 0};
    CHECK_STATUS(hfp4_ref_repack_sm90(&bad, 1, HFP4_DTYPE_UE8M0, buf, bytes, &out), HFP4_OK);
    free(e8);
    free(buf);
    free(p.codes);
    free(p.sf);
}

/* The reference reads repacked weights back exactly: a GEMM on them equals the GEMM on the plain
 * weights bit for bit (FP32 output, same summation order). */
TEST(ref_gemm_on_repacked_weights_equals_plain) {
    for (int variant = 0; variant < 2; variant++) {
        plain_weights w;
        make_plain(&w, 3, 96, 256, variant ? -40 : -9, -3, variant == 0, 10 + variant);
        hfp4_dtype sdt = variant == 0 ? HFP4_DTYPE_UE8M0 : HFP4_DTYPE_FP32;
        size_t bytes = 0;
        CHECK_STATUS(hfp4_sm90_weights_size(3, 96, 256, sdt, &bytes), HFP4_OK);
        uint8_t *buf = malloc(bytes);
        hfp4_matrix packed;
        CHECK_STATUS(hfp4_ref_repack_sm90(&w.m, 3, sdt, buf, bytes, &packed), HFP4_OK);
        enum { M = 5 };
        hfp4_rng r = hfp4_rng_make(77 + variant);
        uint8_t a[3 * M * 256];
        float asf[3 * M * 2];
        for (size_t i = 0; i < sizeof a; i++) a[i] = hfp4_fp8_encode((float)hfp4_rng_normal(&r) * 8.0f);
        for (size_t i = 0; i < 3 * M * 2; i++) asf[i] = (float)(hfp4_rng_uniform(&r) + 0.5);
        int32_t masked[3] = {M, 2, 0};
        float d_plain[3 * M * 96], d_packed[3 * M * 96];
        hfp4_gemm_problem p;
        memset(&p, 0, sizeof p);
        p.grouping = HFP4_GROUPING_MASKED;
        p.m = M;
        p.n = 96;
        p.k = 256;
        p.num_groups = 3;
        p.layout = masked;
        p.a = (hfp4_matrix){a, HFP4_DTYPE_FP8_E4M3, M, 256, 256, M * 256, {asf, HFP4_DTYPE_FP32, 1, 128, 2, 1, M * 2}};
        p.b = w.m;
        p.d = (hfp4_output){d_plain, HFP4_DTYPE_FP32, 96, M * 96, NULL};
        memset(d_plain, 0, sizeof d_plain);
        memset(d_packed, 0, sizeof d_packed);
        CHECK_STATUS(hfp4_ref_gemm(&p, 2), HFP4_OK);
        p.b = packed;
        p.d.data = d_packed;
        CHECK_STATUS(hfp4_ref_gemm(&p, 2), HFP4_OK);
        CHECK_MSG(memcmp(d_plain, d_packed, sizeof d_plain) == 0, "variant %d: repacked result differs", variant);
        /* a D on top of the repacked buffer (weights, scales or modes) is rejected like any input */
        hfp4_gemm_problem q = p;
        q.d.data = buf + bytes - 4 * 96; /* (its first row overlaps the chunk modes at the end) */
        CHECK_REJECT(hfp4_ref_gemm(&q, 1), HFP4_ERR_INVALID_ARGUMENT, "overlaps the repacked weights b.data");
        free(buf);
        free(w.codes);
        free(w.sf);
    }
}
