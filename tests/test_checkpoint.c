/*
 * test_checkpoint.c - the safetensors reader, FP4 expert pairing and fold statistics, and the
 * HFP4SM90 container (src/checkpoint/), on small synthetic files written to a temporary directory:
 * parsing, exact statistics, a byte-exact repack round trip against hfp4_ref_repack_sm90, and
 * malformed files (each rejected with INVALID_ARGUMENT and a message naming the problem).
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"
#include "../src/checkpoint/json.h"
#include "../src/checkpoint/repack_experts.h"
#include "../src/weights/sm90_layout.h"

/* ---------------------------------------------------------------------------------------------- */
/* temporary files                                                                                 */

static int make_tmpdir(char dir[512]) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, 512, "%s/hfp4_ckpt_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static void remove_tmpdir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        remove(path);
    }
    closedir(d);
    rmdir(dir);
}

static const char *in_dir(const char *dir, const char *name) {
    static char path[4][1024];
    static int slot;
    slot = (slot + 1) % 4;
    snprintf(path[slot], sizeof path[slot], "%s/%s", dir, name);
    return path[slot];
}

static int write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(bytes, 1, n, f) : 0;
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* How many files in dir have names starting with prefix (temporary files left behind). */
static int files_starting(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += !strncmp(e->d_name, prefix, strlen(prefix));
    closedir(d);
    return n;
}

/* A safetensors file with the literal header text and data (header padded with spaces to 8). */
static int write_raw(const char *path, const char *header, const void *data, size_t data_bytes) {
    size_t h = strlen(header), padded = (h + 7) / 8 * 8;
    size_t total = 8 + padded + data_bytes;
    unsigned char *buf = malloc(total);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, header, h);
    memset(buf + 8 + h, ' ', padded - h);
    if (data_bytes) memcpy(buf + 8 + padded, data, data_bytes);
    int rc = write_bytes(path, buf, total);
    free(buf);
    return rc;
}

typedef struct st_entry {
    const char *name, *dtype;
    int ndim;
    int64_t shape[4];
    const void *data;
    size_t bytes;
} st_entry;

/* A well-formed file: entries laid out in order, data_offsets computed, optional metadata JSON. */
static int write_st(const char *path, const char *metadata, const st_entry *e, int n) {
    size_t cap = 256 + (metadata ? strlen(metadata) : 0) + (size_t)n * 512, used = 0, off = 0;
    for (int i = 0; i < n; i++) cap += strlen(e[i].name); /* (names of any length) */
    char *h = malloc(cap);
    used += (size_t)snprintf(h + used, cap - used, "{");
    if (metadata) used += (size_t)snprintf(h + used, cap - used, "\"__metadata__\":%s%s", metadata, n ? "," : "");
    for (int i = 0; i < n; i++) {
        used += (size_t)snprintf(h + used, cap - used, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", e[i].name,
                                 e[i].dtype);
        for (int d = 0; d < e[i].ndim; d++)
            used += (size_t)snprintf(h + used, cap - used, "%s%lld", d ? "," : "", (long long)e[i].shape[d]);
        used += (size_t)snprintf(h + used, cap - used, "],\"data_offsets\":[%zu,%zu]}", off, off + e[i].bytes);
        off += e[i].bytes;
    }
    snprintf(h + used, cap - used, "}");
    unsigned char *data = malloc(off ? off : 1);
    off = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].bytes) memcpy(data + off, e[i].data, e[i].bytes);
        off += e[i].bytes;
    }
    int rc = write_raw(path, h, data, off);
    free(h);
    free(data);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* synthetic FP4 experts                                                                           */

typedef struct expert {
    int32_t groups;
    int64_t n, k;
    uint8_t *w;  /* [groups][n][k/2]            */
    uint8_t *e;  /* [groups][n][k/32] UE8M0     */
    float *f;    /* FP32 scales (when fp32)     */
    int fp32;
} expert;

/* Random codes with every 32-group non-zero; every scale exponent = base. */
static void expert_make(expert *x, int32_t groups, int64_t n, int64_t k, int base, int fp32, uint64_t salt) {
    hfp4_rng r = hfp4_rng_make(salt);
    x->groups = groups;
    x->n = n;
    x->k = k;
    x->fp32 = fp32;
    size_t wb = (size_t)(groups * n * k / 2), sb = (size_t)(groups * n * k / 32);
    x->w = malloc(wb);
    x->e = malloc(sb);
    x->f = malloc(sb * sizeof(float));
    for (size_t i = 0; i < wb; i++) x->w[i] = (uint8_t)hfp4_rng_next(&r);
    for (size_t i = 0; i < wb; i += 16) x->w[i] |= 1; /* first code of each group non-zero */
    for (size_t i = 0; i < sb; i++) x->e[i] = (uint8_t)base;
}

static void expert_free(expert *x) {
    free(x->w);
    free(x->e);
    free(x->f);
}

static uint8_t *wgroup(expert *x, int g, int64_t row, int64_t j) { return x->w + (g * x->n + row) * (x->k / 2) + j * 16; }
static uint8_t *escale(expert *x, int g, int64_t row, int64_t j) { return x->e + (g * x->n + row) * (x->k / 32) + j; }

/* FP32 scales = 2^(e - 127) (call after setting exponents; tests then perturb single values). */
static void expert_f32_from_e(expert *x) {
    for (int64_t i = 0; i < x->groups * x->n * x->k / 32; i++) x->f[i] = hfp4_ue8m0_decode(x->e[i]);
}

static hfp4_matrix expert_matrix(const expert *x) {
    hfp4_matrix m;
    memset(&m, 0, sizeof m);
    m.data = x->w;
    m.dtype = HFP4_DTYPE_FP4_E2M1;
    m.rows = x->n;
    m.cols = x->k;
    m.ld = x->k / 2;
    m.stride_group = x->n * x->k / 2;
    m.scales = (hfp4_scales){x->fp32 ? (const void *)x->f : (const void *)x->e,
                             x->fp32 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_UE8M0,
                             1,
                             32,
                             x->k / 32,
                             1,
                             x->n * x->k / 32};
    return m;
}

static st_entry weight_entry(const char *name, const expert *x, const char *dtype) {
    st_entry e = {name, dtype, 0, {0}, x->w, (size_t)(x->groups * x->n * x->k / 2)};
    int f4 = !strcmp(dtype, "F4");
    if (x->groups > 1) e.shape[e.ndim++] = x->groups;
    e.shape[e.ndim++] = x->n;
    e.shape[e.ndim++] = f4 ? x->k : x->k / 2;
    return e;
}

static st_entry scale_entry(const char *name, const expert *x) {
    st_entry e = {name, x->fp32 ? "F32" : "F8_E8M0", 0, {0}, x->fp32 ? (const void *)x->f : (const void *)x->e,
                  (size_t)(x->groups * x->n * x->k / 32) * (x->fp32 ? 4 : 1)};
    if (x->groups > 1) e.shape[e.ndim++] = x->groups;
    e.shape[e.ndim++] = x->n;
    e.shape[e.ndim++] = x->k / 32;
    return e;
}

/* The experts of the main test file (see each for what its statistics must be). */
typedef struct fixture {
    char dir[512], path[1024];
    expert a, b, c, d, e, s, f4, l7a, l7c, l8a, l8b;
    uint16_t bf16[32];
    uint8_t fp8[128], fp8s[1], i8[16];
    int64_t i64[6];
    int count;
} fixture;

static int fixture_make(fixture *fx) {
    if (make_tmpdir(fx->dir) != 0) return -1;
    /* A: layer 3 expert 0 w1, [128, K 512], exponents 112..121 everywhere: everything folds */
    expert_make(&fx->a, 1, 128, 512, 0, 0, 1);
    hfp4_rng r = hfp4_rng_make(2);
    for (int64_t i = 0; i < 128 * 16; i++) fx->a.e[i] = (uint8_t)(112 + hfp4_rng_next(&r) % 10);
    *escale(&fx->a, 0, 0, 0) = 112;
    *escale(&fx->a, 0, 1, 0) = 121;
    /* B: layer 3 expert 1 w1, same shape, exponent 120 with exceptions (tile, chunk) */
    expert_make(&fx->b, 1, 128, 512, 120, 0, 3);
    *escale(&fx->b, 0, 5, 6) = 100;    /* tile 0 chunk 1: span 20 -> per-32              */
    *escale(&fx->b, 0, 70, 13) = 131;  /* tile 1 chunk 3: span 11 -> still folds          */
    *escale(&fx->b, 0, 100, 9) = 132;  /* tile 1 chunk 2: span 12 -> per-32              */
    memset(wgroup(&fx->b, 0, 3, 0), 0, 16);
    *escale(&fx->b, 0, 3, 0) = 90;     /* all-zero group: does not count, tile 0 chunk 0 folds */
    /* C: layer 3 expert 2 w2, [100, K 160]: partial tile and chunk, zero groups */
    expert_make(&fx->c, 1, 100, 160, 125, 0, 4);
    r = hfp4_rng_make(5);
    for (int64_t i = 0; i < 100 * 5; i++) fx->c.e[i] = (uint8_t)(125 + hfp4_rng_next(&r) % 3);
    *escale(&fx->c, 0, 0, 1) = 127;
    for (int row = 0; row < 10; row++) {
        memset(wgroup(&fx->c, 0, row, 0), 0x00, 16); /* +0 codes */
        *escale(&fx->c, 0, row, 0) = 1;
    }
    memset(wgroup(&fx->c, 0, 50, 4), 0x88, 16); /* -0 codes count as zero */
    *escale(&fx->c, 0, 50, 4) = 1;
    for (int i = 0; i < 16; i++) wgroup(&fx->c, 0, 99, 4)[i] = i % 2 ? 0x80 : 0x08;
    *escale(&fx->c, 0, 99, 4) = 1;
    memset(wgroup(&fx->c, 0, 20, 2), 0, 16);
    wgroup(&fx->c, 0, 20, 2)[15] = 0x10; /* only the last code non-zero: not a zero group */
    *escale(&fx->c, 0, 20, 2) = 126;
    memset(wgroup(&fx->c, 0, 70, 1), 0, 16);
    wgroup(&fx->c, 0, 70, 1)[0] = 0x09; /* only the first code (-0.5): counts, span >= 25 */
    *escale(&fx->c, 0, 70, 1) = 100;
    /* D, E: layer 4 experts 0, 1 w1 with FP32 scales [64, K 128]; E has one non-power of two */
    expert_make(&fx->d, 1, 64, 128, 0, 1, 6);
    for (int64_t i = 0; i < 64 * 4; i++) fx->d.e[i] = (uint8_t)(117 + i % 6);
    expert_f32_from_e(&fx->d);
    expert_make(&fx->e, 1, 64, 128, 120, 1, 7);
    expert_f32_from_e(&fx->e);
    fx->e.f[37] = 0.75f * 0x1p-8f;
    /* S: transformers stacked gate_up_proj [2, 64, K 128] with _scale_inv */
    expert_make(&fx->s, 2, 64, 128, 0, 0, 8);
    for (int64_t i = 0; i < 2 * 64 * 4; i++) fx->s.e[i] = (uint8_t)(120 + i % 6);
    /* F4: layer 6 expert 0 w2 stored as F4 [64, 128] (4-bit elements) */
    expert_make(&fx->f4, 1, 64, 128, 119, 0, 9);
    /* layer 7: experts 0 and 2 (a gap); layer 8: experts 0 and 1 of different K */
    expert_make(&fx->l7a, 1, 64, 128, 120, 0, 10);
    expert_make(&fx->l7c, 1, 64, 128, 120, 0, 11);
    expert_make(&fx->l8a, 1, 64, 128, 120, 0, 12);
    expert_make(&fx->l8b, 1, 64, 64, 120, 0, 13);
    for (int i = 0; i < 32; i++) fx->bf16[i] = hfp4_bf16_encode((float)i);
    for (int i = 0; i < 128; i++) fx->fp8[i] = (uint8_t)i;
    fx->fp8s[0] = 127;
    for (int i = 0; i < 16; i++) fx->i8[i] = (uint8_t)i;
    for (int i = 0; i < 6; i++) fx->i64[i] = i * 1000000007LL;

    st_entry e[] = {
        {"layers.3.attn.wq_a.weight", "F8_E4M3", 2, {4, 32}, fx->fp8, 128},
        {"layers.3.attn.wq_a.scale", "F8_E8M0", 2, {1, 1}, fx->fp8s, 1},
        {"layers.3.ffn.gate.weight", "BF16", 2, {4, 8}, fx->bf16, 64},
        weight_entry("layers.3.ffn.experts.0.w1.weight", &fx->a, "I8"),
        scale_entry("layers.3.ffn.experts.0.w1.scale", &fx->a),
        weight_entry("layers.3.ffn.experts.1.w1.weight", &fx->b, "I8"),
        scale_entry("layers.3.ffn.experts.1.w1.scale", &fx->b),
        weight_entry("layers.3.ffn.experts.2.w2.weight", &fx->c, "U8"),
        scale_entry("layers.3.ffn.experts.2.w2.scale", &fx->c),
        {"layers.3.ffn.gate.tid2eid", "I64", 2, {3, 2}, fx->i64, 48},
        weight_entry("layers.4.ffn.experts.0.w1.weight", &fx->d, "I8"),
        scale_entry("layers.4.ffn.experts.0.w1.scale", &fx->d),
        weight_entry("layers.4.ffn.experts.1.w1.weight", &fx->e, "I8"),
        scale_entry("layers.4.ffn.experts.1.w1.scale", &fx->e),
        weight_entry("model.layers.5.mlp.experts.gate_up_proj", &fx->s, "I8"),
        scale_entry("model.layers.5.mlp.experts.gate_up_proj_scale_inv", &fx->s),
        weight_entry("layers.6.ffn.experts.0.w2.weight", &fx->f4, "F4"),
        scale_entry("layers.6.ffn.experts.0.w2.scale", &fx->f4),
        weight_entry("layers.7.ffn.experts.0.w1.weight", &fx->l7a, "I8"),
        scale_entry("layers.7.ffn.experts.0.w1.scale", &fx->l7a),
        weight_entry("layers.7.ffn.experts.2.w1.weight", &fx->l7c, "I8"),
        scale_entry("layers.7.ffn.experts.2.w1.scale", &fx->l7c),
        weight_entry("layers.8.ffn.experts.0.w1.weight", &fx->l8a, "I8"),
        scale_entry("layers.8.ffn.experts.0.w1.scale", &fx->l8a),
        weight_entry("layers.8.ffn.experts.1.w1.weight", &fx->l8b, "I8"),
        scale_entry("layers.8.ffn.experts.1.w1.scale", &fx->l8b),
        {"misc.int8_without_scale", "I8", 2, {4, 4}, fx->i8, 16},
    };
    fx->count = (int)(sizeof e / sizeof e[0]);
    snprintf(fx->path, sizeof fx->path, "%s/model.safetensors", fx->dir);
    return write_st(fx->path, "{\"format\":\"pt\",\"note\":\"hfp4 test\"}", e, fx->count);
}

static void fixture_free(fixture *fx) {
    expert *all[] = {&fx->a, &fx->b, &fx->c, &fx->d, &fx->e, &fx->s, &fx->f4, &fx->l7a, &fx->l7c, &fx->l8a, &fx->l8b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) expert_free(all[i]);
    remove_tmpdir(fx->dir);
}

/* ---------------------------------------------------------------------------------------------- */
/* parsing                                                                                          */

TEST(checkpoint_safetensors_parse) {
    fixture fx;
    if (fixture_make(&fx) != 0) SKIP("cannot write a temporary file");
    hfp4__st_file *f = NULL;
    CHECK_STATUS(hfp4__st_open(fx.path, &f), HFP4_OK);
    if (!f) {
        fixture_free(&fx);
        return;
    }
    CHECK_EQ_I64(f->count, fx.count);
    CHECK_EQ_I64(f->meta_count, 2);
    CHECK(f->meta_count == 2 && !strcmp(f->meta_keys[0], "format") && !strcmp(f->meta_values[0], "pt"));
    CHECK(f->meta_count == 2 && !strcmp(f->meta_keys[1], "note") && !strcmp(f->meta_values[1], "hfp4 test"));
    CHECK_EQ_I64(f->header_bytes % 8, 0);
    CHECK_EQ_I64(f->data_start, 8 + f->header_bytes);
    CHECK_EQ_I64(f->file_bytes, f->data_start + f->data_bytes);

    const hfp4__st_tensor *t = hfp4__st_find(f, "layers.3.ffn.gate.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK(t->dtype == HFP4__ST_BF16);
        CHECK_EQ_I64(t->ndim, 2);
        CHECK_EQ_I64(t->shape[0], 4);
        CHECK_EQ_I64(t->shape[1], 8);
        CHECK_EQ_I64(t->numel, 32);
        CHECK_EQ_I64(t->bytes, 64);
        uint16_t back[32];
        CHECK_STATUS(hfp4__st_read(f, t, 0, 64, back), HFP4_OK);
        CHECK(memcmp(back, fx.bf16, 64) == 0);
        uint16_t part[4];
        CHECK_STATUS(hfp4__st_read(f, t, 20, 8, part), HFP4_OK);
        CHECK(memcmp(part, fx.bf16 + 10, 8) == 0);
        CHECK_REJECT(hfp4__st_read(f, t, 60, 8, part), HFP4_ERR_INVALID_ARGUMENT, "outside its 64 bytes");
        char sh[64];
        CHECK(!strcmp(hfp4__st_shape_string(t, sh, sizeof sh), "[4, 8]"));
    }
    t = hfp4__st_find(f, "layers.6.ffn.experts.0.w2.weight");
    CHECK(t && t->dtype == HFP4__ST_F4 && t->shape[1] == 128 && t->numel == 64 * 128 && t->bytes == 64 * 64);
    t = hfp4__st_find(f, "layers.3.ffn.gate.tid2eid");
    int64_t i64[6];
    CHECK(t && hfp4__st_read(f, t, 0, 48, i64) == HFP4_OK && memcmp(i64, fx.i64, 48) == 0);
    t = hfp4__st_find(f, "layers.3.ffn.experts.1.w1.scale");
    CHECK(t && t->dtype == HFP4__ST_F8_E8M0 && t->bytes == 128 * 16);
    CHECK(hfp4__st_find(f, "layers.3.ffn.experts.1.w1") == NULL);
    CHECK(hfp4__st_find(f, "") == NULL);
    /* file order = data order */
    for (size_t i = 1; i < f->count; i++) CHECK(f->tensors[i].begin == f->tensors[i - 1].end);
    CHECK(!strcmp(hfp4__st_dtype_name(HFP4__ST_F8_E8M0), "F8_E8M0") && hfp4__st_dtype_bits(HFP4__ST_F4) == 4);

    /* candidates: exactly the FP4 weights that have a scale tensor */
    int candidates = 0;
    for (size_t i = 0; i < f->count; i++) candidates += hfp4__fp4_expert_candidate(f, &f->tensors[i]);
    CHECK_EQ_I64(candidates, 11);
    CHECK(!hfp4__fp4_expert_candidate(f, hfp4__st_find(f, "misc.int8_without_scale")));
    CHECK(!hfp4__fp4_expert_candidate(f, hfp4__st_find(f, "layers.3.attn.wq_a.weight")));

    hfp4__fp4_expert e;
    CHECK_STATUS(hfp4__fp4_expert_pair(f, "model.layers.5.mlp.experts.gate_up_proj", &e), HFP4_OK);
    CHECK(e.groups == 2 && e.n == 64 && e.k == 128 && e.scale_dtype == HFP4_DTYPE_UE8M0);
    CHECK_STATUS(hfp4__fp4_expert_pair(f, "layers.6.ffn.experts.0.w2.weight", &e), HFP4_OK);
    CHECK(e.groups == 1 && e.n == 64 && e.k == 128);
    CHECK_STATUS(hfp4__fp4_expert_pair(f, "layers.4.ffn.experts.0.w1.weight", &e), HFP4_OK);
    CHECK(e.scale_dtype == HFP4_DTYPE_FP32 && e.k == 128);
    hfp4__st_close(f);
    fixture_free(&fx);
}

/* ---------------------------------------------------------------------------------------------- */
/* statistics                                                                                       */

typedef struct want_stats {
    const char *name;
    int64_t chunk_tiles, folded, k_groups, zero_groups, non_pow2;
    int exp_min, exp_max;
} want_stats;

/* Chunk-tiles stored folded by hfp4_ref_repack_sm90 over the tiles with a real row; with
 * one_base, the tiles it marks one-base (chunk-mode bit 1) instead. */
static int64_t repack_count(const expert *x, int one_base) {
    hfp4_matrix m = expert_matrix(x), out;
    hfp4_dtype sdt;
    size_t bytes;
    if (hfp4_sm90_weights_scale_dtype(&m, x->groups, &sdt) != HFP4_OK) return -1;
    if (hfp4_sm90_weights_size(x->groups, x->n, x->k, sdt, &bytes) != HFP4_OK) return -1;
    uint8_t *buf = malloc(bytes);
    int64_t folded = -1;
    if (hfp4_ref_repack_sm90(&m, x->groups, sdt, buf, bytes, &out) == HFP4_OK) {
        hfp4_sm90_geometry geo = hfp4_sm90_geometry_make(x->groups, x->n, x->k, sdt == HFP4_DTYPE_FP32);
        folded = 0;
        for (int64_t g = 0; g < x->groups; g++)
            for (int64_t t = 0; t < (x->n + 63) / 64; t++)
                for (int64_t c = 0; c < geo.chunks; c++) {
                    const uint8_t mode = buf[geo.mode_offset + (g * geo.tiles + t) * geo.chunks + c];
                    if (one_base) folded += c == 0 && (mode & HFP4_SM90_MODE_ONE_BASE) != 0;
                    else folded += (mode & HFP4_SM90_MODE_PER32) == 0;
                }
    }
    free(buf);
    return folded;
}

TEST(checkpoint_fold_statistics) {
    fixture fx;
    if (fixture_make(&fx) != 0) SKIP("cannot write a temporary file");
    hfp4__st_file *f = NULL;
    CHECK_STATUS(hfp4__st_open(fx.path, &f), HFP4_OK);
    if (!f) {
        fixture_free(&fx);
        return;
    }
    const want_stats want[] = {
        {"layers.3.ffn.experts.0.w1.weight", 8, 8, 2048, 0, 0, 112, 121},
        {"layers.3.ffn.experts.1.w1.weight", 8, 6, 2048, 1, 0, 100, 132},
        {"layers.3.ffn.experts.2.w2.weight", 4, 3, 500, 12, 0, 100, 127},
        {"layers.4.ffn.experts.0.w1.weight", 1, 1, 256, 0, 0, 117, 122},
        {"layers.4.ffn.experts.1.w1.weight", 1, 0, 256, 0, 1, 118, 120},
        {"model.layers.5.mlp.experts.gate_up_proj", 2, 2, 512, 0, 0, 120, 125},
        {"layers.6.ffn.experts.0.w2.weight", 1, 1, 256, 0, 0, 119, 119},
    };
    expert *mem[] = {&fx.a, &fx.b, &fx.c, &fx.d, &fx.e, &fx.s, &fx.f4};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        hfp4__fp4_expert e;
        hfp4__fold_stats s;
        hfp4_status st = hfp4__fp4_expert_pair(f, want[i].name, &e);
        CHECK_STATUS(st, HFP4_OK);
        if (st == HFP4_OK) st = hfp4__fp4_expert_stats(f, &e, &s);
        CHECK_STATUS(st, HFP4_OK);
        if (st != HFP4_OK) continue;
        CHECK_MSG(s.chunk_tiles == want[i].chunk_tiles && hfp4__fold_stats_folded(&s) == want[i].folded &&
                      s.k_groups == want[i].k_groups && s.zero_groups == want[i].zero_groups &&
                      s.non_pow2_scales == want[i].non_pow2 && s.exp_min == want[i].exp_min && s.exp_max == want[i].exp_max,
                  "%s: chunk_tiles %lld folded %lld k_groups %lld zero %lld non_pow2 %lld exp %d..%d", want[i].name,
                  (long long)s.chunk_tiles, (long long)hfp4__fold_stats_folded(&s), (long long)s.k_groups,
                  (long long)s.zero_groups, (long long)s.non_pow2_scales, s.exp_min, s.exp_max);
        CHECK_EQ_I64(s.matrices, mem[i]->groups);
        /* the same rule as the repack: its chunk modes agree */
        CHECK_MSG(repack_count(mem[i], 0) == want[i].folded, "%s: repack folds %lld chunk-tiles, want %lld", want[i].name,
                  (long long)repack_count(mem[i], 0), (long long)want[i].folded);
        /* and the one-base tiles (layout v3): the stats' rule equals the repack's mode bit */
        CHECK_MSG(repack_count(mem[i], 1) == hfp4__fold_stats_one_base(&s), "%s: repack marks %lld tiles one-base, stats %lld",
                  want[i].name, (long long)repack_count(mem[i], 1), (long long)hfp4__fold_stats_one_base(&s));
        CHECK(s.tiles == s.matrices * ((mem[i]->n + 63) / 64));
    }
    /* E's exponent rule alone would fold its chunk; FP32 storage does not */
    hfp4__fold_stats s;
    hfp4__fold_stats_init(&s);
    hfp4_matrix m = expert_matrix(&fx.e);
    CHECK_STATUS(hfp4__fold_stats_add(&s, &m, 1), HFP4_OK);
    CHECK(s.folded_if_ue8m0 == 1 && hfp4__fold_stats_folded(&s) == 0);
    /* merging adds */
    hfp4__fold_stats two = s;
    hfp4__fold_stats_merge(&two, &s);
    CHECK(two.chunk_tiles == 2 && two.k_groups == 512 && two.exp_min == 118 && two.exp_max == 120);

    /* scales the repack rejects are rejected here too, by position */
    fx.a.e[3 * 16 + 5] = 255;
    m = expert_matrix(&fx.a);
    hfp4__fold_stats_init(&s);
    CHECK_REJECT(hfp4__fold_stats_add(&s, &m, 1), HFP4_ERR_INVALID_ARGUMENT, "row 3, k-group 5 is the UE8M0 NaN (255)");
    CHECK(s.chunk_tiles == 0);
    fx.d.f[2] = -1.0f;
    m = expert_matrix(&fx.d);
    CHECK_REJECT(hfp4__fold_stats_add(&s, &m, 1), HFP4_ERR_INVALID_ARGUMENT, "row 0, k-group 2 is -1");
    m.dtype = HFP4_DTYPE_FP8_E4M3;
    CHECK_REJECT(hfp4__fold_stats_add(&s, &m, 1), HFP4_ERR_INVALID_ARGUMENT, "expected fp4_e2m1");
    hfp4__st_close(f);
    fixture_free(&fx);
}

/* ---------------------------------------------------------------------------------------------- */
/* repack container round trip                                                                      */

/* Repacks `parts` to a container, reads it back, and compares with hfp4_ref_repack_sm90 on `ref`
 * (the same groups in memory). */
static void check_roundtrip(hfp4__st_file *f, const hfp4__fp4_expert *parts, int32_t count, const expert *ref,
                            const char *out_path, hfp4_dtype want_sdt, int64_t want_folded) {
    hfp4__repack_result res;
    hfp4_status st = hfp4__repack_experts_to_file(f, parts, count, out_path, &res);
    CHECK_STATUS(st, HFP4_OK);
    if (st != HFP4_OK) return;
    CHECK(res.header.scale_dtype == want_sdt);
    CHECK_EQ_I64(res.folded, want_folded);
    CHECK_EQ_I64(res.chunk_tiles, ref->groups * ((ref->n + 63) / 64) * ((ref->k + 127) / 128));

    hfp4__sm90_container h;
    void *payload = NULL;
    hfp4_matrix b;
    st = hfp4__sm90_container_load(out_path, &h, &payload, &b);
    CHECK_STATUS(st, HFP4_OK);
    if (st != HFP4_OK) return;
    CHECK(h.groups == ref->groups && h.n == ref->n && h.k == ref->k && h.scale_dtype == want_sdt);
    CHECK(h.layout_version == HFP4_SM90_WEIGHTS_VERSION && h.container_version == HFP4__SM90_CONTAINER_VERSION);
    size_t bytes = 0;
    CHECK_STATUS(hfp4_sm90_weights_size(ref->groups, ref->n, ref->k, want_sdt, &bytes), HFP4_OK);
    CHECK_EQ_I64(h.bytes, bytes);

    hfp4_matrix m = expert_matrix(ref), out;
    uint8_t *want = malloc(bytes);
    CHECK_STATUS(hfp4_ref_repack_sm90(&m, ref->groups, want_sdt, want, bytes, &out), HFP4_OK);
    CHECK_MSG(memcmp(payload, want, bytes) == 0, "%s: container payload differs from hfp4_ref_repack_sm90", out_path);
    /* the descriptor matches the repack's */
    CHECK(b.dtype == out.dtype && b.rows == out.rows && b.cols == out.cols && b.stride_group == out.stride_group);
    CHECK((const uint8_t *)b.scales.data - (const uint8_t *)b.data ==
          (const uint8_t *)out.scales.data - (const uint8_t *)out.data);
    CHECK(b.scales.dtype == out.scales.dtype && b.scales.stride_group == out.scales.stride_group);
    free(want);
    free(payload);
}

/* Concatenation of single-group experts (what --groups-from stacks). */
static expert concat(const expert *x, const expert *y) {
    expert c = *x;
    size_t wb = (size_t)(x->n * x->k / 2), sb = (size_t)(x->n * x->k / 32);
    c.groups = 2;
    c.w = malloc(2 * wb);
    c.e = malloc(2 * sb);
    c.f = malloc(2 * sb * sizeof(float));
    memcpy(c.w, x->w, wb);
    memcpy(c.w + wb, y->w, wb);
    memcpy(c.e, x->e, sb);
    memcpy(c.e + sb, y->e, sb);
    memcpy(c.f, x->f, sb * sizeof(float));
    memcpy(c.f + sb, y->f, sb * sizeof(float));
    return c;
}

TEST(checkpoint_repack_container_roundtrip) {
    fixture fx;
    if (fixture_make(&fx) != 0) SKIP("cannot write a temporary file");
    hfp4__st_file *f = NULL;
    CHECK_STATUS(hfp4__st_open(fx.path, &f), HFP4_OK);
    if (!f) {
        fixture_free(&fx);
        return;
    }
    hfp4__fp4_expert one, *parts = NULL;
    int32_t count = 0;
    int64_t first = -1;

    /* one weight, over an existing file (replaced whole, with the mode a new file gets) */
    CHECK_STATUS(hfp4__fp4_expert_pair(f, "layers.3.ffn.experts.1.w1.weight", &one), HFP4_OK);
    CHECK(write_bytes(in_dir(fx.dir, "b.bin"), "old bytes", 9) == 0);
    check_roundtrip(f, &one, 1, &fx.b, in_dir(fx.dir, "b.bin"), HFP4_DTYPE_UE8M0, 6);
    const mode_t mask = umask(022);
    umask(mask);
    struct stat info;
    CHECK(stat(in_dir(fx.dir, "b.bin"), &info) == 0 && (info.st_mode & 0777) == (0666 & ~mask));
    CHECK_EQ_I64(files_starting(fx.dir, "b.bin."), 0);
    /* partial tile and chunk, zero groups */
    CHECK_STATUS(hfp4__fp4_expert_pair(f, "layers.3.ffn.experts.2.w2.weight", &one), HFP4_OK);
    check_roundtrip(f, &one, 1, &fx.c, in_dir(fx.dir, "c.bin"), HFP4_DTYPE_UE8M0, 3);
    /* a stacked tensor: its groups */
    CHECK_STATUS(hfp4__fp4_expert_pair(f, "model.layers.5.mlp.experts.gate_up_proj", &one), HFP4_OK);
    check_roundtrip(f, &one, 1, &fx.s, in_dir(fx.dir, "s.bin"), HFP4_DTYPE_UE8M0, 2);
    /* F4 storage */
    CHECK_STATUS(hfp4__fp4_expert_pair(f, "layers.6.ffn.experts.0.w2.weight", &one), HFP4_OK);
    check_roundtrip(f, &one, 1, &fx.f4, in_dir(fx.dir, "f4.bin"), HFP4_DTYPE_UE8M0, 1);

    /* experts stacked as groups by a pattern */
    CHECK_STATUS(hfp4__fp4_expert_match(f, "layers.3.ffn.experts.*.w1.weight", &parts, &count, &first), HFP4_OK);
    CHECK(count == 2 && first == 0);
    if (count == 2) {
        CHECK(!strcmp(parts[0].weight->name, "layers.3.ffn.experts.0.w1.weight"));
        expert ab = concat(&fx.a, &fx.b);
        check_roundtrip(f, parts, count, &ab, in_dir(fx.dir, "ab.bin"), HFP4_DTYPE_UE8M0, 14);
        expert_free(&ab);
    }
    free(parts);
    /* FP32 scales: powers of two -> UE8M0; one that is not -> FP32 for every group */
    CHECK_STATUS(hfp4__fp4_expert_pair(f, "layers.4.ffn.experts.0.w1.weight", &one), HFP4_OK);
    check_roundtrip(f, &one, 1, &fx.d, in_dir(fx.dir, "d.bin"), HFP4_DTYPE_UE8M0, 1);
    CHECK_STATUS(hfp4__fp4_expert_match(f, "layers.4.ffn.experts.*.w1.weight", &parts, &count, &first), HFP4_OK);
    if (count == 2) {
        expert de = concat(&fx.d, &fx.e);
        check_roundtrip(f, parts, count, &de, in_dir(fx.dir, "de.bin"), HFP4_DTYPE_FP32, 0);
        expert_free(&de);
    }
    free(parts);

    /* pattern errors */
    CHECK_REJECT(hfp4__fp4_expert_match(f, "layers.3.ffn.experts.0.w1.weight", &parts, &count, &first),
                 HFP4_ERR_INVALID_ARGUMENT, "exactly one '*'");
    CHECK_REJECT(hfp4__fp4_expert_match(f, "layers.*.ffn.experts.*.w1.weight", &parts, &count, &first),
                 HFP4_ERR_INVALID_ARGUMENT, "exactly one '*'");
    CHECK_REJECT(hfp4__fp4_expert_match(f, "layers.9.ffn.experts.*.w1.weight", &parts, &count, &first),
                 HFP4_ERR_INVALID_ARGUMENT, "matches no tensor");
    CHECK_REJECT(hfp4__fp4_expert_match(f, "layers.7.ffn.experts.*.w1.weight", &parts, &count, &first),
                 HFP4_ERR_INVALID_ARGUMENT, "jump from 0 ('layers.7.ffn.experts.0.w1.weight') to 2");
    CHECK_REJECT(hfp4__fp4_expert_match(f, "layers.8.ffn.experts.*.w1.weight", &parts, &count, &first),
                 HFP4_ERR_INVALID_ARGUMENT, "groups must share a shape");
    CHECK_REJECT(hfp4__fp4_expert_match(f, "model.layers.*.mlp.experts.gate_up_proj", &parts, &count, &first),
                 HFP4_ERR_INVALID_ARGUMENT, "stacked (3-D)");
    CHECK(parts == NULL && count == 0);

    /* a rejected scale leaves no output file behind; the input is never the output */
    const char *bad = in_dir(fx.dir, "bad.bin");
    fx.c.e[7] = 255;
    hfp4__st_close(f);
    st_entry e[] = {weight_entry("x.weight", &fx.c, "I8"), scale_entry("x.scale", &fx.c)};
    const char *nan_path = in_dir(fx.dir, "nan.safetensors");
    CHECK(write_st(nan_path, NULL, e, 2) == 0);
    CHECK_STATUS(hfp4__st_open(nan_path, &f), HFP4_OK);
    if (f) {
        hfp4__repack_result res;
        CHECK_STATUS(hfp4__fp4_expert_pair(f, "x.weight", &one), HFP4_OK);
        CHECK_REJECT(hfp4__repack_experts_to_file(f, &one, 1, bad, &res), HFP4_ERR_INVALID_ARGUMENT, "'x.weight'");
        CHECK_REJECT(hfp4__repack_experts_to_file(f, &one, 1, bad, &res), HFP4_ERR_INVALID_ARGUMENT, "NaN (255)");
        CHECK(access(bad, F_OK) != 0);
        /* nor does it touch an existing output (it used to delete it): the container goes to a
         * temporary file beside it, renamed over it only when complete */
        const char *keep = in_dir(fx.dir, "keep.bin");
        CHECK(write_bytes(keep, "precious", 8) == 0);
        CHECK_REJECT(hfp4__repack_experts_to_file(f, &one, 1, keep, &res), HFP4_ERR_INVALID_ARGUMENT, "NaN (255)");
        char got[16] = {0};
        FILE *k = fopen(keep, "rb");
        CHECK(k && fread(got, 1, sizeof got, k) == 8 && !memcmp(got, "precious", 8));
        if (k) fclose(k);
        CHECK_EQ_I64(files_starting(fx.dir, "keep.bin."), 0);
        CHECK_EQ_I64(files_starting(fx.dir, "bad.bin."), 0);
        hfp4__fold_stats s;
        CHECK_REJECT(hfp4__fp4_expert_stats(f, &one, &s), HFP4_ERR_INVALID_ARGUMENT, "'x.scale': scale of row 1, k-group 2");
        CHECK_REJECT(hfp4__repack_experts_to_file(f, &one, 1, nan_path, &res), HFP4_ERR_INVALID_ARGUMENT,
                     "is the input file");
        CHECK_REJECT(hfp4__repack_experts_to_file(f, &one, 1, in_dir(fx.dir, "no/such/dir.bin"), &res),
                     HFP4_ERR_INVALID_ARGUMENT, "cannot create output");
        hfp4__st_close(f);
    }
    fixture_free(&fx);
}

TEST(checkpoint_container_rejects_malformed) {
    char dir[512];
    if (make_tmpdir(dir) != 0) SKIP("cannot create a temporary directory");
    hfp4__sm90_container h;
    CHECK_STATUS(hfp4__sm90_container_make(2, 100, 160, HFP4_DTYPE_UE8M0, &h), HFP4_OK);
    size_t total = HFP4__SM90_CONTAINER_HEADER_BYTES + (size_t)h.bytes;
    unsigned char *file = calloc(1, total + 8);
    hfp4__sm90_container_encode(&h, file);
    const char *p = in_dir(dir, "c.bin");
    void *payload = NULL;
    hfp4_matrix b;
    hfp4__sm90_container got;

    CHECK(write_bytes(p, file, total) == 0);
    CHECK_STATUS(hfp4__sm90_container_load(p, &got, &payload, &b), HFP4_OK);
    free(payload);
    CHECK(got.groups == 2 && got.n == 100 && got.k == 160 && got.bytes == h.bytes);
    /* a layout version 2 file (before the one-base bit) still loads: its bytes are valid v3 bytes */
    {
        unsigned char saved = file[12];
        file[12] = 2;
        CHECK(write_bytes(p, file, total) == 0);
        CHECK_STATUS(hfp4__sm90_container_load(p, &got, &payload, &b), HFP4_OK);
        free(payload);
        payload = NULL;
        CHECK(got.layout_version == 2);
        file[12] = saved;
    }

    struct {
        int offset;
        unsigned char value;
        const char *needle;
    } cases[] = {
        {0, 'X', "magic"},
        {8, 2, "container version 2"},
        {12, 1, "SM90 layout version 1"},
        {16, 0, "G = 0"},
        {20, 9, "scale dtype 9"},
        {20, 1, "byte count"}, /* FP32 storage needs more bytes */
        {32, 161, "K = 161"},
        {50, 1, "reserved header byte 50"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char saved = file[cases[i].offset];
        file[cases[i].offset] = cases[i].value;
        CHECK(write_bytes(p, file, total) == 0);
        CHECK_REJECT(hfp4__sm90_container_load(p, &got, &payload, &b), HFP4_ERR_INVALID_ARGUMENT, cases[i].needle);
        CHECK(payload == NULL);
        file[cases[i].offset] = saved;
    }
    CHECK(write_bytes(p, file, total - 1) == 0);
    CHECK_REJECT(hfp4__sm90_container_load(p, &got, &payload, &b), HFP4_ERR_INVALID_ARGUMENT, "truncated or padded");
    CHECK(write_bytes(p, file, total + 8) == 0);
    CHECK_REJECT(hfp4__sm90_container_load(p, &got, &payload, &b), HFP4_ERR_INVALID_ARGUMENT, "truncated or padded");
    CHECK(write_bytes(p, file, 40) == 0);
    CHECK_REJECT(hfp4__sm90_container_load(p, &got, &payload, &b), HFP4_ERR_INVALID_ARGUMENT, "shorter than the 64-byte");
    /* a huge N claims more than the file holds (and must not overflow the size arithmetic) */
    file[24 + 4] = 1; /* N = 100 + 2^32 */
    CHECK(write_bytes(p, file, total) == 0);
    CHECK_REJECT(hfp4__sm90_container_load(p, &got, &payload, &b), HFP4_ERR_INVALID_ARGUMENT, "needs more bytes");
    file[24 + 4] = 0x80; /* N = 100 + 2^39 */
    file[32 + 4] = 0x80; /* K = 160 + 2^39: N_pad * K_pad / 2 alone exceeds 64 bits */
    CHECK(write_bytes(p, file, total) == 0);
    CHECK_REJECT(hfp4__sm90_container_load(p, &got, &payload, &b), HFP4_ERR_INVALID_ARGUMENT, "needs more bytes");
    CHECK_REJECT(hfp4__sm90_container_load(in_dir(dir, "missing.bin"), &got, &payload, &b), HFP4_ERR_INVALID_ARGUMENT,
                 "cannot open");
    /* a FIFO with no writer is refused at once (opening it used to wait forever), a directory too */
    const char *fifo = in_dir(dir, "fifo.bin");
    if (mkfifo(fifo, 0600) == 0) {
        CHECK_REJECT(hfp4__sm90_container_load(fifo, &got, &payload, &b), HFP4_ERR_INVALID_ARGUMENT, "not a regular file");
        CHECK_MSG(strstr(hfp4_last_error(), fifo) != NULL, "message: %s", hfp4_last_error());
    }
    CHECK_REJECT(hfp4__sm90_container_load(dir, &got, &payload, &b), HFP4_ERR_INVALID_ARGUMENT, "not a regular file");
    free(file);
    remove_tmpdir(dir);
}

/* ---------------------------------------------------------------------------------------------- */
/* FP4 pairs that are not right                                                                     */

TEST(checkpoint_fp4_pair_errors) {
    char dir[512];
    if (make_tmpdir(dir) != 0) SKIP("cannot create a temporary directory");
    expert x;
    expert_make(&x, 1, 64, 128, 120, 0, 20);
    static uint8_t buf[16384];
    st_entry e[] = {
        {"a.weight", "I8", 2, {64, 64}, x.w, 4096},      {"a.scale", "F8_E8M0", 2, {64, 3}, x.e, 192},
        {"b.weight", "I8", 2, {64, 64}, x.w, 4096},      {"b.scale", "BF16", 2, {64, 4}, buf, 512},
        {"c.weight", "I8", 2, {64, 40}, x.w, 2560},      {"c.scale", "F8_E8M0", 2, {64, 2}, x.e, 128},
        {"d.weight", "I8", 2, {64, 64}, x.w, 4096},      {"e.weight", "BF16", 2, {64, 32}, buf, 4096},
        {"f.weight", "I8", 4, {2, 2, 2, 2}, x.w, 16},    {"f.scale", "F8_E8M0", 1, {1}, x.e, 1},
        {"g.weight", "I8", 3, {2, 64, 64}, buf, 8192},   {"g.weight_scale", "F8_E8M0", 1, {1}, x.e, 1},
        {"h", "I8", 3, {2, 64, 64}, buf, 8192},          {"h_scale_inv", "F8_E8M0", 3, {3, 64, 4}, buf, 768},
        {"z.weight", "I8", 2, {0, 64}, buf, 0},          {"z.scale", "F8_E8M0", 2, {0, 4}, buf, 0},
        /* empty, with a last dimension whose K = 2 * last overflows int64 (a fuzzing review) */
        {"y.weight", "U8", 2, {0, INT64_MAX}, buf, 0},   {"y.scale", "F8_E8M0", 2, {0, 1}, buf, 0},
        {"x", "I8", 3, {0, 64, INT64_MAX}, buf, 0},      {"x_scale_inv", "F8_E8M0", 3, {0, 64, 1}, buf, 0},
    };
    const char *p = in_dir(dir, "pairs.safetensors");
    CHECK(write_st(p, NULL, e, (int)(sizeof e / sizeof e[0])) == 0);
    hfp4__st_file *f = NULL;
    CHECK_STATUS(hfp4__st_open(p, &f), HFP4_OK);
    if (f) {
        hfp4__fp4_expert pe;
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "a.weight", &pe), HFP4_ERR_INVALID_ARGUMENT,
                     "scale tensor 'a.scale': shape [64, 3] does not match weight 'a.weight' [64, 64] (K = 128): expected [64, 4]");
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "b.weight", &pe), HFP4_ERR_INVALID_ARGUMENT, "dtype BF16; FP4 expert scales are");
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "c.weight", &pe), HFP4_ERR_INVALID_ARGUMENT, "K = 80, not a multiple of 32");
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "d.weight", &pe), HFP4_ERR_INVALID_ARGUMENT, "no scale tensor 'd.scale'");
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "e.weight", &pe), HFP4_ERR_INVALID_ARGUMENT, "dtype BF16 is not packed FP4");
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "f.weight", &pe), HFP4_ERR_INVALID_ARGUMENT, "has 4 dimensions");
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "g.weight", &pe), HFP4_ERR_INVALID_ARGUMENT, "no scale tensor 'g.scale'");
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "h", &pe), HFP4_ERR_INVALID_ARGUMENT, "expected [E] + [64, 4]");
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "z.weight", &pe), HFP4_ERR_INVALID_ARGUMENT, "shape [0, 64] is empty");
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "y.weight", &pe), HFP4_ERR_INVALID_ARGUMENT,
                     "shape [0, 9223372036854775807] is empty");
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "x", &pe), HFP4_ERR_INVALID_ARGUMENT, "shape [0, 64, 9223372036854775807] is empty");
        CHECK_REJECT(hfp4__fp4_expert_pair(f, "nope.weight", &pe), HFP4_ERR_INVALID_ARGUMENT, "no tensor 'nope.weight'");
        CHECK(hfp4__fp4_expert_candidate(f, hfp4__st_find(f, "a.weight")));
        CHECK(!hfp4__fp4_expert_candidate(f, hfp4__st_find(f, "d.weight")));
        CHECK(!hfp4__fp4_expert_candidate(f, hfp4__st_find(f, "f.weight"))); /* 4-D */
        hfp4__st_close(f);
    }
    expert_free(&x);
    remove_tmpdir(dir);
}

/* A weight whose name is longer than any fixed buffer still pairs with its scale (it used to be
 * skipped as "no FP4 expert weights" past ~1 KB; a fuzzing review) */
TEST(checkpoint_long_tensor_names_pair) {
    char dir[512];
    if (make_tmpdir(dir) != 0) SKIP("cannot create a temporary directory");
    expert x;
    expert_make(&x, 1, 64, 64, 120, 0, 40);
    static char wname[2100], sname[2100];
    memset(wname, 'x', 2000);
    strcpy(wname + 2000, ".weight");
    memset(sname, 'x', 2000);
    strcpy(sname + 2000, ".scale");
    st_entry e[] = {{wname, "I8", 2, {64, 32}, x.w, 2048}, {sname, "F8_E8M0", 2, {64, 2}, x.e, 128}};
    const char *p = in_dir(dir, "long.safetensors");
    CHECK(write_st(p, NULL, e, 2) == 0);
    hfp4__st_file *f = NULL;
    CHECK_STATUS(hfp4__st_open(p, &f), HFP4_OK);
    if (f) {
        hfp4__fp4_expert pe;
        CHECK(hfp4__fp4_expert_candidate(f, hfp4__st_find(f, wname)));
        CHECK_STATUS(hfp4__fp4_expert_pair(f, wname, &pe), HFP4_OK);
        hfp4__st_close(f);
    }
    expert_free(&x);
    remove_tmpdir(dir);
}

/* Long names and paths are shown as their first 120 and last 60 bytes, so that the rest of a
 * message (field, value, expectation) survives; the last-error buffer holds 2 KiB (it held 512,
 * and a 700-byte name cut off the part naming the problem; a fuzzing review) */
TEST(checkpoint_long_names_elided_in_messages) {
    char buf[HFP4__SHOWN_CAP];
    CHECK(!strcmp(hfp4__shown("short.weight", buf), "short.weight"));
    static char s[3001];
    for (int i = 0; i < 3000; i++) s[i] = (char)('a' + i % 26);
    const char *e = hfp4__shown(s, buf);
    CHECK_MSG(strlen(e) < HFP4__SHOWN_CAP && !strncmp(e, s, 120) && strstr(e, "...(3000 bytes)...") &&
                  !strcmp(e + strlen(e) - 60, s + 3000 - 60),
              "got '%s'", e);
    memcpy(s + 119, "\xc3\xa9", 2); /* an e-acute across the cut is dropped whole, not cut */
    e = hfp4__shown(s, buf);
    CHECK_MSG(!strncmp(e, s, 119) && !strncmp(e + 119, "...(", 4), "got '%.130s'", e);
    char big[1600];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "%s", big);
    CHECK_EQ_I64(strlen(hfp4_last_error()), sizeof big - 1);

    char dir[512];
    if (make_tmpdir(dir) != 0) SKIP("cannot create a temporary directory");
    /* a 3000-byte tensor name and a ~1 KB path: the message still ends with what is wrong */
    static char header[4096];
    memset(s, 'n', 3000);
    snprintf(header, sizeof header, "{\"%s\":{\"dtype\":\"F12\",\"shape\":[2],\"data_offsets\":[0,8]}}", s);
    char path[1400];
    snprintf(path, sizeof path, "%s", dir);
    for (int d = 0; d < 5 && strlen(path) + 202 < sizeof path; d++) {
        size_t n = strlen(path);
        path[n] = '/';
        memset(path + n + 1, 'd', 200);
        path[n + 201] = '\0';
        if (mkdir(path, 0700) != 0) break;
    }
    strcat(path, "/x.safetensors");
    static unsigned char data[8];
    CHECK(write_raw(path, header, data, 8) == 0);
    hfp4__st_file *f = NULL;
    CHECK_REJECT(hfp4__st_open(path, &f), HFP4_ERR_INVALID_ARGUMENT, "': dtype 'F12' is not a safetensors dtype");
    const char *msg = hfp4_last_error();
    CHECK_MSG(strlen(msg) < 600 && strstr(msg, "...(3000 bytes)...") && strstr(msg, "dddd/x.safetensors': tensor 'nnnn"),
              "message: %s", msg);
    /* the nested directories go deepest first */
    remove(path);
    for (char *slash; (slash = strrchr(path, '/')) != NULL && strlen(path) > strlen(dir);) {
        *slash = '\0';
        if (strlen(path) > strlen(dir)) rmdir(path);
    }
    remove_tmpdir(dir);
}

/* F32 scales that are zero, negative or not finite: `hfp4 repack` refuses them as `hfp4 inspect`
 * does (it used to write a container; a fuzzing review) */
TEST(checkpoint_repack_rejects_nonpositive_fp32_scales) {
    char dir[512];
    if (make_tmpdir(dir) != 0) SKIP("cannot create a temporary directory");
    static const float bad[3] = {-2.0f, 0.0f, INFINITY};
    static const char *const said[3] = {"is -2; scales must be positive and finite", "is 0; scales must be positive",
                                        "is inf; scales must be positive"};
    for (int v = 0; v < 3; v++) {
        expert x;
        expert_make(&x, 1, 64, 64, 120, 1, 30 + v);
        expert_f32_from_e(&x);
        x.f[5] = bad[v]; /* row 2, k-group 1 */
        st_entry e[] = {{"e.0.weight", "I8", 2, {64, 32}, x.w, 2048}, {"e.0.scale", "F32", 2, {64, 2}, x.f, 512}};
        const char *p = in_dir(dir, "neg.safetensors");
        CHECK(write_st(p, NULL, e, 2) == 0);
        hfp4__st_file *f = NULL;
        CHECK_STATUS(hfp4__st_open(p, &f), HFP4_OK);
        if (f) {
            hfp4__fp4_expert pe;
            CHECK_STATUS(hfp4__fp4_expert_pair(f, "e.0.weight", &pe), HFP4_OK);
            hfp4__repack_result res;
            CHECK_REJECT(hfp4__repack_experts_to_file(f, &pe, 1, in_dir(dir, "neg.bin"), &res),
                         HFP4_ERR_INVALID_ARGUMENT, said[v]);
            CHECK_MSG(strstr(hfp4_last_error(), "row 2, k-group 1") != NULL, "message: %s", hfp4_last_error());
            hfp4__st_close(f);
        }
        expert_free(&x);
    }
    remove_tmpdir(dir);
}

/* Names and metadata from a file go to the terminal escaped (`hfp4 inspect`): control bytes and the
 * backslash as \\xNN, everything else (UTF-8 included) as is */
TEST(checkpoint_names_print_escaped) {
    FILE *t = tmpfile();
    if (!t) SKIP("no temporary file");
    hfp4__st_fputs_printable(t, "model.layers.0\x1b[2J\n\tx\\y\x7f\xc3\xa9.weight");
    rewind(t);
    char buf[128] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, t);
    fclose(t);
    buf[n] = '\0';
    CHECK_MSG(strcmp(buf, "model.layers.0\\x1B[2J\\x0A\\x09x\\x5Cy\\x7F\xc3\xa9.weight") == 0, "got '%s'", buf);
    /* C1 controls (CSI U+009B, NEL U+0085) and bidi controls (RLO U+202E, RLI U+2067) too; their
     * neighbours (U+00A0, U+202F, U+2065, U+206A) and cut sequences as they are */
    t = tmpfile();
    if (!t) SKIP("no temporary file");
    hfp4__st_fputs_printable(t, "a\xc2\x9b" "2J\xc2\x85\xc2\xa0|\xe2\x80\xae" "cba\xe2\x81\xa7|\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa|\xe2\x80");
    rewind(t);
    memset(buf, 0, sizeof buf);
    n = fread(buf, 1, sizeof buf - 1, t);
    fclose(t);
    buf[n] = '\0';
    CHECK_MSG(strcmp(buf, "a\\u009B2J\\u0085\xc2\xa0|\\u202Ecba\\u2067|\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa|\xe2\x80") == 0,
              "got '%s'", buf);
}

/* Runs the `hfp4` command built beside this test binary with args (shell words) and the output of
 * both streams in out; its exit status, or -1 when there is no such command (then the test skips). */
static int run_tool(const char *args, char *out, size_t cap) {
    char self[1024], cmd[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return -1;
    strcpy(slash + 1, "hfp4");
    if (access(self, X_OK) != 0) return -1;
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", self, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t got = fread(out, 1, cap - 1, p);
    out[got] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* `hfp4 inspect` and `hfp4 repack` print the library's messages escaped (they quote tensor names,
 * which reached the terminal raw), and a layer number past long's range is no layer number (it
 * was shown as 9223372036854775807) */
TEST(checkpoint_tools_escape_messages) {
    char dir[512];
    if (make_tmpdir(dir) != 0) SKIP("cannot create a temporary directory");
    expert x;
    expert_make(&x, 2, 64, 64, 120, 0, 50);
    /* a scale of the wrong shape: the pair's error message quotes both names */
    st_entry e[] = {
        {"evil\\u001b]0;title\\u0007\\u001b[2J.weight", "I8", 2, {64, 32}, x.w, 2048},
        {"evil\\u001b]0;title\\u0007\\u001b[2J.scale", "F8_E8M0", 2, {64, 3}, x.e, 192},
        {"model.layers.99999999999999999999.mlp.experts.gate_up_proj", "I8", 3, {2, 64, 32}, x.w, 4096},
        {"model.layers.99999999999999999999.mlp.experts.gate_up_proj_scale_inv", "F8_E8M0", 3, {2, 64, 2}, x.e, 256},
    };
    char path[600], args[2048];
    snprintf(path, sizeof path, "%s/evil.safetensors", dir);
    CHECK(write_st(path, NULL, e, 4) == 0);
    static char out[65536];
    snprintf(args, sizeof args, "inspect '%s'", path);
    int rc = run_tool(args, out, sizeof out);
    if (rc < 0) {
        expert_free(&x);
        remove_tmpdir(dir);
        SKIP("no hfp4 command beside the test binary");
    }
    CHECK_EQ_I64(rc, 2);
    CHECK_MSG(strchr(out, '\x1b') == NULL && strchr(out, '\x07') == NULL, "raw control bytes in: %s", out);
    CHECK_MSG(strstr(out, "hfp4 inspect: safetensors '") && strstr(out, "scale tensor 'evil\\x1B]0;title\\x07\\x1B[2J.scale'"),
              "output: %s", out);
    CHECK_MSG(!strstr(out, "9223372036854775807") && strstr(out, "  model.layers.99999999999999999999.mlp.experts.gate_up_proj: "),
              "output: %s", out);
    snprintf(args, sizeof args, "repack '%s' '%s/o.bin' --tensor \"$(printf 'evil\\033]0;title\\007\\033[2J.weight')\"", path,
             dir);
    CHECK_EQ_I64(run_tool(args, out, sizeof out), 2);
    CHECK_MSG(strchr(out, '\x1b') == NULL && strstr(out, "hfp4 repack: --tensor: safetensors '") &&
                  strstr(out, "weight 'evil\\x1B]0;title\\x07\\x1B[2J.weight'"),
              "output: %s", out);
    expert_free(&x);
    remove_tmpdir(dir);
}

/* ---------------------------------------------------------------------------------------------- */
/* malformed safetensors files                                                                      */

static void check_bad_header(const char *dir, const char *header, size_t data_bytes, const char *needle, int line) {
    static unsigned char data[256];
    const char *p = in_dir(dir, "bad.safetensors");
    if (write_raw(p, header, data, data_bytes) != 0) {
        hfp4_test_fail(__FILE__, line, "cannot write %s", p);
        return;
    }
    hfp4__st_file *f = (hfp4__st_file *)1;
    hfp4_status st = hfp4__st_open(p, &f);
    if (st != HFP4_ERR_INVALID_ARGUMENT)
        hfp4_test_fail(__FILE__, line, "header %s: got %s, want HFP4_ERR_INVALID_ARGUMENT (%s)", header, hfp4_status_name(st),
                       hfp4_last_error());
    else if (!hfp4_test_contains(hfp4_last_error(), needle))
        hfp4_test_fail(__FILE__, line, "header %s: message \"%s\" does not mention \"%s\"", header, hfp4_last_error(), needle);
    else if (!hfp4_test_contains(hfp4_last_error(), p))
        hfp4_test_fail(__FILE__, line, "message \"%s\" does not name the file", hfp4_last_error());
    if (f != NULL) hfp4_test_fail(__FILE__, line, "*out not cleared on failure");
    if (st == HFP4_OK) hfp4__st_close(f);
}
#define BAD(header, data_bytes, needle) check_bad_header(dir, header, data_bytes, needle, __LINE__)

#define T1(extra) "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]" extra "}}"

TEST(checkpoint_safetensors_rejects_malformed) {
    char dir[512];
    if (make_tmpdir(dir) != 0) SKIP("cannot create a temporary directory");
    hfp4__st_file *f = NULL;

    /* the reference is well-formed */
    const char *p = in_dir(dir, "ok.safetensors");
    static unsigned char data[64];
    CHECK(write_raw(p, T1(""), data, 8) == 0);
    CHECK_STATUS(hfp4__st_open(p, &f), HFP4_OK);
    hfp4__st_close(f);

    /* length field and file size */
    CHECK_REJECT(hfp4__st_open(in_dir(dir, "missing.safetensors"), &f), HFP4_ERR_INVALID_ARGUMENT, "cannot open");
    CHECK_REJECT(hfp4__st_open(dir, &f), HFP4_ERR_INVALID_ARGUMENT, "not a regular file");
    const char *fifo = in_dir(dir, "fifo.safetensors"); /* refused at once: opening it used to wait for a writer */
    if (mkfifo(fifo, 0600) == 0) CHECK_REJECT(hfp4__st_open(fifo, &f), HFP4_ERR_INVALID_ARGUMENT, "not a regular file");
    remove(fifo);
    CHECK(write_bytes(p, "\x10\0\0\0\0", 5) == 0);
    CHECK_REJECT(hfp4__st_open(p, &f), HFP4_ERR_INVALID_ARGUMENT, "the file is 5 bytes, shorter than the 8-byte header length");
    unsigned char trunc[8 + 50] = {100};
    memcpy(trunc + 8, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 50);
    CHECK(write_bytes(p, trunc, sizeof trunc) == 0);
    CHECK_REJECT(hfp4__st_open(p, &f), HFP4_ERR_INVALID_ARGUMENT, "header length 100 runs past the end of the file (58 bytes");
    unsigned char huge[16] = {0, 0, 0, 0, 0, 1, 0, 0, '{', '}'};
    CHECK(write_bytes(p, huge, sizeof huge) == 0);
    CHECK_REJECT(hfp4__st_open(p, &f), HFP4_ERR_INVALID_ARGUMENT, "header length 1099511627776 exceeds the safetensors limit");
    /* the index of a sharded checkpoint given instead of a shard */
    const char *index = "{\n  \"metadata\": {\"total_size\": 16},\n  \"weight_map\": {\"t\": \"model-00001-of-00002.safetensors\"}\n}\n";
    CHECK(write_bytes(p, index, strlen(index)) == 0);
    CHECK_REJECT(hfp4__st_open(p, &f), HFP4_ERR_INVALID_ARGUMENT,
                 "starts with '{': it looks like JSON text, not a safetensors file (the index of a sharded checkpoint, "
                 "model.safetensors.index.json?); pass one of the shards it lists");
    /* a real header 123 (0x7B, '{') bytes long is still a safetensors file */
    unsigned char curly[8 + 123 + 8] = {0x7B};
    memset(curly + 8, ' ', 123);
    memcpy(curly + 8, T1(""), strlen(T1("")));
    CHECK(write_bytes(p, curly, sizeof curly) == 0);
    CHECK_STATUS(hfp4__st_open(p, &f), HFP4_OK);
    hfp4__st_close(f);
    f = NULL;
    unsigned char tiny[9] = {1, 0, 0, 0, 0, 0, 0, 0, '{'};
    CHECK(write_bytes(p, tiny, sizeof tiny) == 0);
    CHECK_REJECT(hfp4__st_open(p, &f), HFP4_ERR_INVALID_ARGUMENT, "too short for a JSON object");

    /* JSON */
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "JSON object is not closed");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],}}", 8, "JSON trailing comma at byte 53");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2,],\"data_offsets\":[0,8]}}", 8, "trailing comma");
    BAD("{\"t\" {\"dtype\":\"F32\"}}", 0, "expected ':' after an object key at byte 5");
    BAD("{\"t\":{\"dtype\":\"F32\" \"shape\":[2]}}", 0, "expected ',' or '}' in an object");
    BAD("{\"t\":{\"dtype\":\"F\\q32\"}}", 0, "invalid escape sequence");
    BAD("{\"t\":{\"dtype\":\"F\t32\"}}", 0, "control character inside a string");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "not an integer");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[1e3],\"data_offsets\":[0,8]}}", 8, "not an integer");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, "leading zero");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}", 8, "int64 range");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[-],\"data_offsets\":[0,8]}}", 8, "invalid number");
    BAD("{\"t\":true}", 0, "true/false/null");
    BAD("{\"t\":{\"dtype\":\"\\ud800x\"}}", 0, "unpaired high surrogate");
    BAD("{\"t\":{\"dtype\":\"\\udc00\"}}", 0, "unpaired low surrogate");
    BAD("{\"t\":{\"dtype\":\"\\u12g4\"}}", 0, "invalid \\u escape");
    BAD("{} x", 0, "text after the top-level value at byte 3");
    BAD("{}}", 0, "text after the top-level value");
    BAD("[1,2]", 0, "header is not a JSON object");
    BAD("{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", 0, "nesting deeper than 32");
    BAD("{\"t\xff\":{}}", 0, "header is not valid UTF-8 (byte 3)");
    BAD("{\"t\xc0\x80\":{}}", 0, "not valid UTF-8 (byte 3)"); /* overlong */
    BAD("{\"t\xed\xa0\x80\":{}}", 0, "not valid UTF-8");      /* encoded surrogate */
    BAD("{\"t\xe2\x82", 0, "not valid UTF-8");                /* cut sequence */
    BAD("{\"t", 0, "string is not terminated");
    BAD("{\"t\":", 0, "unexpected end of text");
    BAD("{3:{}}", 0, "expected a string key");

    /* schema */
    BAD("{\"t\":{\"dtype\":\"F12\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 't': dtype 'F12' is not a safetensors dtype");
    BAD("{\"t\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype 'f32' is not");
    BAD("{\"t\":{\"dtype\":3,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype is not a string");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape[0] is not an integer >= 0");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8, "shape[0] is not an integer");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "shape is not an array");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
        "17 dimensions (at most 16)");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8, "overflows 64-bit");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, "data_offsets is not an array of two integers");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-1,8]}}", 8, "entries must be integers >= 0");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, "data_offsets [8, 0] end before they begin");
    BAD("{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 't': missing field 'dtype'");
    BAD("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "missing field 'shape'");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "missing field 'data_offsets'");
    BAD(T1(",\"extra\":1"), 8, "unknown field 'extra'");
    BAD(T1(",\"dtype\":\"F32\""), 8, "field 'dtype' appears twice");
    BAD("{\"t\":[1]}", 0, "tensor 't': entry is not a JSON object");
    BAD("{\"__metadata__\":{\"a\":1}}", 0, "\"__metadata__\" value of key 'a' is not a string");
    BAD("{\"__metadata__\":[]}", 0, "\"__metadata__\" is not a JSON object");
    BAD("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "\"__metadata__\" appears twice");
    BAD("{\"t\\u0000x\":{}}", 0, "a key contains a NUL character");
    /* NULs the C strings would cut off: a field key passing for "dtype", metadata cut short */
    BAD("{\"t\":{\"dtype\\u0000junk\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
        "tensor 't': field key 'dtype' contains a NUL character");
    BAD("{\"t\":{\"dtype\":\"F32\\u0000x\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
        "tensor 't': dtype 'F32' contains a NUL character");
    BAD("{\"__metadata__\":{\"k\\u0000x\":\"v\"}}", 0, "\"__metadata__\" key 'k' or its value contains a NUL character");
    BAD("{\"__metadata__\":{\"k\":\"v\\u0000w\"}}", 0, "\"__metadata__\" key 'k' or its value contains a NUL character");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
        16, "tensor name 't' appears twice");

    /* offsets vs dtype x shape, range, overlap, coverage */
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
        "tensor 't': data_offsets [0, 4] span 4 bytes but dtype F32 x shape [2] needs 8");
    BAD("{\"t\":{\"dtype\":\"BF16\",\"shape\":[3, 2],\"data_offsets\":[0,24]}}", 24, "needs 12");
    BAD("{\"t\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "12 bits, not whole bytes");
    BAD("{\"t\":{\"dtype\":\"F6_E2M3\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "18 bits, not whole bytes");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
        "data_offsets end 8 is beyond the data section (4 bytes");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[100,116]}}", 8, "beyond the data section");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
        12, "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]");
    BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]},"
        "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
        16, "overlap tensor 'a'");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
        12, "bytes [4, 8) before tensor 'b' belong to no tensor");
    BAD(T1(""), 12, "4 trailing bytes belong to no tensor");
    /* an empty tensor must sit where the previous one ends too (the reference's rule; one inside
     * another tensor or past a gap used to be accepted) */
    BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]},"
        "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]}}",
        16, "tensor 'z': data_offsets [4, 4] overlap tensor 'a' [0, 16]");
    BAD("{\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[5,5]}}", 5, "bytes [0, 5) before tensor 'z' belong to no tensor");
    BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
        "\"z\":{\"dtype\":\"U8\",\"shape\":[0,2],\"data_offsets\":[6,6]}}",
        6, "bytes [4, 6) before tensor 'z' belong to no tensor");
    BAD("{}", 4, "data section is 4 bytes but its tensors end at 0");

    /* well-formed edge cases: empty header, empty tensor, scalar, escapes in names, reverse order */
    const char *edge =
        "{\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]},"
        "\"s\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[4,8]},"
        "\"caf\\u00e9\\ud83d\\ude00\\n\\\"\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
        "\"f4\":{\"dtype\":\"F4\",\"shape\":[2,8],\"data_offsets\":[8,16]}}";
    CHECK(write_raw(p, edge, data, 16) == 0);
    CHECK_STATUS(hfp4__st_open(p, &f), HFP4_OK);
    if (f) {
        CHECK_EQ_I64(f->count, 4);
        const hfp4__st_tensor *t = hfp4__st_find(f, "caf\xc3\xa9\xf0\x9f\x98\x80\n\"");
        CHECK(t && t->dtype == HFP4__ST_U8 && t->begin == 0);
        CHECK(!strcmp(f->tensors[0].name, "caf\xc3\xa9\xf0\x9f\x98\x80\n\"")); /* data order */
        t = hfp4__st_find(f, "s");
        CHECK(t && t->ndim == 0 && t->numel == 1 && t->bytes == 4);
        t = hfp4__st_find(f, "e");
        CHECK(t && t->numel == 0 && t->bytes == 0);
        hfp4__st_close(f);
    }
    /* empty tensors at the start, between two tensors and at the end */
    CHECK(write_raw(p,
                    "{\"z0\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                    "\"z1\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]},"
                    "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},"
                    "\"z2\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[8,8]}}",
                    data, 8) == 0);
    CHECK_STATUS(hfp4__st_open(p, &f), HFP4_OK);
    if (f) CHECK_EQ_I64(f->count, 5);
    hfp4__st_close(f);
    CHECK(write_raw(p, "{}", NULL, 0) == 0);
    CHECK_STATUS(hfp4__st_open(p, &f), HFP4_OK);
    if (f) {
        CHECK_EQ_I64(f->count, 0);
        CHECK(hfp4__st_find(f, "x") == NULL);
        hfp4__st_close(f);
    }
    CHECK(write_raw(p, " \n{ \"__metadata__\" : { } }\t", NULL, 0) == 0);
    CHECK_STATUS(hfp4__st_open(p, &f), HFP4_OK);
    hfp4__st_close(f);

    /* the densest valid header (16 one-digit dimensions, short names, no spaces: one value per 3.8
     * bytes) stays under the parser's value cap */
    {
        enum { CAP = 1 << 16 };
        char *dense = malloc(CAP);
        size_t n = 0;
        dense[n++] = '{';
        for (int t = 0; t < 500; t++)
            n += (size_t)snprintf(dense + n, CAP - n,
                                  "%s\"%d\":{\"dtype\":\"U8\",\"shape\":[0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,0]}",
                                  t ? "," : "", t);
        snprintf(dense + n, CAP - n, "}");
        CHECK(write_raw(p, dense, NULL, 0) == 0);
        CHECK_STATUS(hfp4__st_open(p, &f), HFP4_OK);
        if (f) CHECK_EQ_I64(f->count, 500);
        hfp4__st_close(f);
        free(dense);
    }

    /* the file shrinking after it was opened: a read reports it (64 KiB, more than stdio buffers) */
    enum { BIG = 65536 };
    unsigned char *big = calloc(1, BIG);
    CHECK(write_raw(p, "{\"t\":{\"dtype\":\"U8\",\"shape\":[65536],\"data_offsets\":[0,65536]}}", big, BIG) == 0);
    CHECK_STATUS(hfp4__st_open(p, &f), HFP4_OK);
    if (f) {
        CHECK(truncate(p, (off_t)(f->data_start + 4)) == 0);
        CHECK_REJECT(hfp4__st_read(f, &f->tensors[0], 0, BIG, big), HFP4_ERR_INVALID_ARGUMENT, "the file ended after");
        CHECK_REJECT(hfp4__st_read(f, &f->tensors[0], 0, BIG, big), HFP4_ERR_INVALID_ARGUMENT,
                     "of the 65536 bytes of tensor 't' (it changed since it was opened?)");
        hfp4__st_close(f);
    }
    free(big);
    hfp4__st_close(NULL);
    CHECK_REJECT(hfp4__st_open(NULL, &f), HFP4_ERR_INVALID_ARGUMENT, "path is NULL");
    remove_tmpdir(dir);
}

TEST(checkpoint_json_parser) {
    hfp4__json_doc doc;
    memset(&doc, 0, sizeof doc);
    const char *text = "{\"a\":[1,-2,9223372036854775807],\"b\":\"x\\/y\\u0041\",\"c\":{}}";
    CHECK_STATUS(hfp4__json_parse("test", text, strlen(text), &doc), HFP4_OK);
    if (doc.count >= 1) {
        const hfp4__json_node *top = &doc.nodes[0];
        CHECK(top->kind == HFP4__JSON_OBJECT && top->count == 3);
        const hfp4__json_node *a = &doc.nodes[top->first_child];
        CHECK(!strcmp(hfp4__json_key(&doc, a), "a") && a->kind == HFP4__JSON_ARRAY && a->count == 3);
        const hfp4__json_node *a0 = &doc.nodes[a->first_child], *a1 = &doc.nodes[a0->next], *a2 = &doc.nodes[a1->next];
        CHECK(a0->integer == 1 && a1->integer == -2 && a2->integer == INT64_MAX && a2->next == HFP4__JSON_NONE);
        const hfp4__json_node *b = &doc.nodes[a->next];
        CHECK(b->kind == HFP4__JSON_STRING && !strcmp(hfp4__json_str(&doc, b), "x/yA") && b->str_len == 4);
        const hfp4__json_node *c = &doc.nodes[b->next];
        CHECK(c->kind == HFP4__JSON_OBJECT && c->count == 0 && c->first_child == HFP4__JSON_NONE);
    }
    hfp4__json_free(&doc);
    CHECK_REJECT(hfp4__json_parse("ctx", "9223372036854775808", 19, &doc), HFP4_ERR_INVALID_ARGUMENT, "ctx: JSON integer beyond");
    hfp4__json_free(&doc);
    CHECK_REJECT(hfp4__json_parse("ctx", "", 0, &doc), HFP4_ERR_INVALID_ARGUMENT, "unexpected end of text");
    hfp4__json_free(&doc);

    /* memory bounds (a fuzzing review: 100 MB of "[0,0,..." took 4 GB of nodes) */
    CHECK(sizeof(hfp4__json_node) <= 32);
    enum { CAP = 1 << 16 };
    char *big = malloc(CAP);
    size_t n = 0;
    big[n++] = '[';
    for (int i = 0; i < 64; i++) n += (size_t)snprintf(big + n, CAP - n, i ? ",%d" : "%d", i);
    big[n++] = ']';
    CHECK_STATUS(hfp4__json_parse("ctx", big, n, &doc), HFP4_OK); /* 64 elements are fine */
    hfp4__json_free(&doc);
    memcpy(big + n - 1, ",0]", 3);
    CHECK_REJECT(hfp4__json_parse("ctx", big, n + 2, &doc), HFP4_ERR_INVALID_ARGUMENT,
                 "ctx: JSON array longer than 64 elements (a safetensors header's longest, a shape, has at most 16) at byte 183");
    hfp4__json_free(&doc);
    /* arrays of 64 one-digit values in an object: one value per ~2 bytes, past the node cap */
    n = 0;
    big[n++] = '{';
    for (int a = 0; a < 200; a++) {
        n += (size_t)snprintf(big + n, CAP - n, a ? ",\"\":[0" : "\"\":[0");
        for (int i = 1; i < 64; i++) n += (size_t)snprintf(big + n, CAP - n, ",0");
        big[n++] = ']';
    }
    big[n++] = '}';
    CHECK_REJECT(hfp4__json_parse("ctx", big, n, &doc), HFP4_ERR_INVALID_ARGUMENT,
                 "ctx: JSON has more values than a safetensors header of this length can (over");
    CHECK(doc.cap <= n / HFP4__JSON_BYTES_PER_VALUE + 64); /* and the node array never grew past the cap */
    hfp4__json_free(&doc);
    free(big);

    size_t bad = 0;
    CHECK(hfp4__utf8_valid("a\xc3\xa9\xf4\x8f\xbf\xbf", 7, &bad));
    CHECK(!hfp4__utf8_valid("a\xf4\x90\x80\x80", 5, &bad) && bad == 1); /* > U+10FFFF */
    CHECK(!hfp4__utf8_valid("ab\x80", 3, &bad) && bad == 2);
}

/* `--help` (or -h) after a subcommand prints its usage to stdout and exits 0; a usage error exits
 * 2; bench names an unknown option as such (it said "needs a value" for any last option) */
TEST(tools_subcommand_help) {
    static char out[16384];
    static const char *const cmds[] = {"inspect --help", "repack -h", "bench --help"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const int rc = run_tool(cmds[i], out, sizeof out);
        if (rc == -1) SKIP("no hfp4 command beside the test binary");
        if (i == 2 && strstr(out, "no CUDA")) continue; /* (a build without CUDA has no bench) */
        CHECK_MSG(rc == 0 && strncmp(out, "usage: hfp4 ", 12) == 0, "hfp4 %s: rc %d, '%.80s'", cmds[i], rc, out);
    }
    CHECK_EQ_I64(run_tool("inspect", out, sizeof out), 2);
    const int rc = run_tool("bench --no-such-option", out, sizeof out);
    if (!strstr(out, "no CUDA")) {
        CHECK_EQ_I64(rc, 2);
        CHECK_MSG(strstr(out, "bad option '--no-such-option'") != NULL, "got '%.120s'", out);
    }
}
