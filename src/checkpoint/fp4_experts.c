/*
 * fp4_experts.c - see fp4_experts.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../weights/sm90_layout.h"
#include "fp4_experts.h"
#include "scale_access.h"

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

int hfp4__fp4_scale_name(const char *weight_name, char *buf, size_t cap) {
    size_t n = strlen(weight_name);
    int w = ends_with(weight_name, ".weight")
                ? snprintf(buf, cap, "%.*s.scale", (int)(n - strlen(".weight")), weight_name)
                : snprintf(buf, cap, "%s_scale_inv", weight_name);
    return w < 0 || (size_t)w >= cap ? -1 : 0;
}

static int is_fp4_dtype(hfp4__st_dtype d) { return d == HFP4__ST_I8 || d == HFP4__ST_U8 || d == HFP4__ST_F4; }

/* The scale tensor's name for weight_name in a buffer of its own (NULL when out of memory); the
 * caller frees it. (A fixed buffer skipped weights with names over 1 KB without a word.) */
static char *scale_name_of(const char *weight_name) {
    const size_t cap = strlen(weight_name) + sizeof "_scale_inv";
    char *buf = malloc(cap);
    if (buf && hfp4__fp4_scale_name(weight_name, buf, cap) != 0) {
        free(buf);
        buf = NULL;
    }
    return buf;
}

int hfp4__fp4_expert_candidate(const hfp4__st_file *file, const hfp4__st_tensor *t) {
    if (!is_fp4_dtype(t->dtype) || (t->ndim != 2 && t->ndim != 3)) return 0;
    char *scale = scale_name_of(t->name);
    const int found = scale != NULL && hfp4__st_find(file, scale) != NULL;
    free(scale);
    return found;
}

hfp4_status hfp4__fp4_expert_pair(const hfp4__st_file *file, const char *weight_name, hfp4__fp4_expert *out) {
    HFP4_CHECK_ARG(file != NULL && weight_name != NULL && out != NULL, "hfp4__fp4_expert_pair: NULL argument");
    char shown_path[HFP4__SHOWN_CAP];
    const char *p = hfp4__shown(file->path, shown_path);
    const hfp4__st_tensor *w = hfp4__st_find(file, weight_name);
    HFP4_CHECK_ARG(w != NULL, "safetensors '%s': no tensor '%s'", p, HFP4__SHOWN(weight_name));
    char sh[160], ssh[160];
    hfp4__st_shape_string(w, sh, sizeof sh);
    HFP4_CHECK_ARG(is_fp4_dtype(w->dtype),
                   "safetensors '%s': tensor '%s': dtype %s is not packed FP4 (I8 or U8 with two e2m1 codes per byte, or F4)",
                   p, HFP4__SHOWN(weight_name), hfp4__st_dtype_name(w->dtype));
    HFP4_CHECK_ARG(w->ndim == 2 || w->ndim == 3,
                   "safetensors '%s': tensor '%s': shape %s has %d dimensions; FP4 expert weights are [N, K/2] or [E, N, K/2]",
                   p, HFP4__SHOWN(weight_name), sh, w->ndim);
    char *scale_name = scale_name_of(weight_name);
    if (scale_name == NULL)
        return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "safetensors '%s': tensor '%s': out of memory for its scale's name", p,
                          HFP4__SHOWN(weight_name));
    const hfp4__st_tensor *s = hfp4__st_find(file, scale_name);
    if (s == NULL) {
        hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "safetensors '%s': tensor '%s': no scale tensor '%s' in this file", p,
                   HFP4__SHOWN(weight_name), HFP4__SHOWN(scale_name));
        free(scale_name);
        return HFP4_ERR_INVALID_ARGUMENT;
    }
    free(scale_name);
    hfp4__st_shape_string(s, ssh, sizeof ssh);
    HFP4_CHECK_ARG(s->dtype == HFP4__ST_F8_E8M0 || s->dtype == HFP4__ST_F32,
                   "safetensors '%s': scale tensor '%s': dtype %s; FP4 expert scales are F8_E8M0 or F32", p,
                   HFP4__SHOWN(s->name), hfp4__st_dtype_name(s->dtype));

    int64_t groups = w->ndim == 3 ? w->shape[0] : 1;
    int64_t n = w->shape[w->ndim - 2], last = w->shape[w->ndim - 1];
    /* emptiness first: an empty tensor's other dimensions are unbounded (shape [0, 2^63 - 1] is a
     * valid 0-byte tensor) and 2 * last would overflow; with every dimension >= 1 the header's 64-bit
     * size check keeps last below 2^61 */
    HFP4_CHECK_ARG(groups >= 1 && n >= 1 && last >= 1, "safetensors '%s': tensor '%s': shape %s is empty", p,
                   HFP4__SHOWN(weight_name), sh);
    int64_t k = w->dtype == HFP4__ST_F4 ? last : 2 * last;
    HFP4_CHECK_ARG(groups <= INT32_MAX, "safetensors '%s': tensor '%s': shape %s has more than %d groups", p,
                   HFP4__SHOWN(weight_name), sh, INT32_MAX);
    HFP4_CHECK_ARG(k % 32 == 0,
                   "safetensors '%s': tensor '%s': shape %s gives K = %lld, not a multiple of 32 (one scale per 32 K-elements)",
                   p, HFP4__SHOWN(weight_name), sh, (long long)k);
    int shape_ok = s->ndim == w->ndim && s->shape[s->ndim - 2] == n && s->shape[s->ndim - 1] == k / 32 &&
                   (w->ndim == 2 || s->shape[0] == groups);
    HFP4_CHECK_ARG(shape_ok,
                   "safetensors '%s': scale tensor '%s': shape %s does not match weight '%s' %s (K = %lld): expected %s[%lld, "
                   "%lld]",
                   p, HFP4__SHOWN(s->name), ssh, HFP4__SHOWN(weight_name), sh, (long long)k, w->ndim == 3 ? "[E] + " : "",
                   (long long)n, (long long)(k / 32));
    out->weight = w;
    out->scale = s;
    out->groups = (int32_t)groups;
    out->n = n;
    out->k = k;
    out->scale_dtype = s->dtype == HFP4__ST_F32 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_UE8M0;
    return HFP4_OK;
}

uint64_t hfp4__fp4_expert_weight_bytes(const hfp4__fp4_expert *e, int32_t count) {
    return (uint64_t)count * (uint64_t)e->n * (uint64_t)(e->k / 2);
}

uint64_t hfp4__fp4_expert_scale_bytes(const hfp4__fp4_expert *e, int32_t count) {
    return (uint64_t)count * (uint64_t)e->n * (uint64_t)(e->k / 32) * (e->scale_dtype == HFP4_DTYPE_FP32 ? 4u : 1u);
}

static int host_little_endian(void) {
    uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

hfp4_status hfp4__fp4_expert_load(hfp4__st_file *file, const hfp4__fp4_expert *e, int32_t first, int32_t count,
                                  void *weights, void *scales, hfp4_matrix *out) {
    HFP4_CHECK_ARG(file && e && weights && scales && out, "hfp4__fp4_expert_load: NULL argument");
    HFP4_CHECK_ARG(first >= 0 && count >= 1 && count <= e->groups - first,
                   "safetensors '%s': tensor '%s': groups [%d, %d) are outside its %d groups", HFP4__SHOWN(file->path),
                   HFP4__SHOWN(e->weight->name), (int)first, (int)(first + count), (int)e->groups);
    /* safetensors data is little-endian; FP32 scales are used in place */
    HFP4_REQUIRE(e->scale_dtype != HFP4_DTYPE_FP32 || host_little_endian(),
                 "safetensors '%s': FP32 scales need a little-endian host", HFP4__SHOWN(file->path));
    HFP4_TRY(hfp4__st_read(file, e->weight, hfp4__fp4_expert_weight_bytes(e, first), hfp4__fp4_expert_weight_bytes(e, count),
                           weights));
    HFP4_TRY(hfp4__st_read(file, e->scale, hfp4__fp4_expert_scale_bytes(e, first), hfp4__fp4_expert_scale_bytes(e, count),
                           scales));
    memset(out, 0, sizeof *out);
    out->data = weights;
    out->dtype = HFP4_DTYPE_FP4_E2M1;
    out->rows = e->n;
    out->cols = e->k;
    out->ld = e->k / 2;
    out->stride_group = e->n * (e->k / 2);
    out->scales.data = scales;
    out->scales.dtype = e->scale_dtype;
    out->scales.gran_mn = 1;
    out->scales.gran_k = 32;
    out->scales.stride_mn = e->k / 32;
    out->scales.stride_k = 1;
    out->scales.stride_group = e->n * (e->k / 32);
    return HFP4_OK;
}

void hfp4__fold_stats_init(hfp4__fold_stats *s) {
    memset(s, 0, sizeof *s);
    s->exp_min = 256;
    s->exp_max = -1;
}

void hfp4__fold_stats_merge(hfp4__fold_stats *into, const hfp4__fold_stats *from) {
    into->matrices += from->matrices;
    into->chunk_tiles += from->chunk_tiles;
    into->folded_if_ue8m0 += from->folded_if_ue8m0;
    into->tiles += from->tiles;
    into->one_base_if_ue8m0 += from->one_base_if_ue8m0;
    into->k_groups += from->k_groups;
    into->zero_groups += from->zero_groups;
    into->non_pow2_scales += from->non_pow2_scales;
    if (from->exp_min < into->exp_min) into->exp_min = from->exp_min;
    if (from->exp_max > into->exp_max) into->exp_max = from->exp_max;
}

int64_t hfp4__fold_stats_folded(const hfp4__fold_stats *s) { return s->non_pow2_scales ? 0 : s->folded_if_ue8m0; }
int64_t hfp4__fold_stats_one_base(const hfp4__fold_stats *s) { return s->non_pow2_scales ? 0 : s->one_base_if_ue8m0; }

/* Exponent byte of scale (g, r, j), checked as the repack checks it; *pow2 = 0 for an FP32 scale
 * that is not a power of two (its exponent field is returned). */
static hfp4_status scale_exponent(const hfp4_matrix *w, int32_t groups, int64_t g, int64_t r, int64_t j, int *e,
                                  int *pow2) {
    char where[48] = "";
    if (groups > 1) snprintf(where, sizeof where, " of group %lld", (long long)g);
    *pow2 = 1;
    if (w->scales.dtype == HFP4_DTYPE_UE8M0) {
        uint8_t b = hfp4__scale_get_ue8m0(&w->scales, g, r, j);
        HFP4_CHECK_ARG(b != 255, "scale of row %lld, k-group %lld%s is the UE8M0 NaN (255)", (long long)r, (long long)j,
                       where);
        *e = b;
        return HFP4_OK;
    }
    float v = hfp4__scale_get(&w->scales, g, r, j);
    HFP4_CHECK_ARG(isfinite(v) && v > 0, "scale of row %lld, k-group %lld%s is %g; scales must be positive and finite",
                   (long long)r, (long long)j, where, (double)v);
    uint8_t b;
    if (hfp4_ue8m0_from_float(v, &b) == 0) {
        *e = b;
        return HFP4_OK;
    }
    uint32_t bits;
    memcpy(&bits, &v, 4);
    *e = (int)((bits >> 23) & 255);
    *pow2 = 0;
    return HFP4_OK;
}

/* 1 if 32-group j of row r of group g holds a code other than +-0 (the repack's test). */
static int group_nonzero(const hfp4_matrix *w, int64_t g, int64_t r, int64_t j) {
    const uint8_t *b = (const uint8_t *)w->data + g * w->stride_group + r * w->ld + j * 16;
    for (int i = 0; i < 16; i++)
        if (b[i] & 0x77) return 1;
    return 0;
}

hfp4_status hfp4__fold_stats_add(hfp4__fold_stats *s, const hfp4_matrix *w, int32_t groups) {
    HFP4_CHECK_ARG(s != NULL && w != NULL && w->data != NULL && w->scales.data != NULL, "hfp4__fold_stats_add: NULL argument");
    HFP4_CHECK_ARG(groups >= 1, "hfp4__fold_stats_add: groups = %d must be >= 1", (int)groups);
    HFP4_CHECK_ARG(w->dtype == HFP4_DTYPE_FP4_E2M1, "hfp4__fold_stats_add: w->dtype = %s, expected fp4_e2m1",
                   hfp4_dtype_name(w->dtype));
    HFP4_CHECK_ARG(w->rows >= 1 && w->cols >= 32 && w->cols % 32 == 0 && w->ld >= w->cols / 2,
                   "hfp4__fold_stats_add: w is [%lld, %lld] with ld %lld; need rows >= 1, K a positive multiple of 32, ld >= K/2",
                   (long long)w->rows, (long long)w->cols, (long long)w->ld);
    HFP4_CHECK_ARG(w->scales.dtype == HFP4_DTYPE_UE8M0 || w->scales.dtype == HFP4_DTYPE_FP32,
                   "hfp4__fold_stats_add: w->scales.dtype = %s, expected ue8m0 or fp32", hfp4_dtype_name(w->scales.dtype));
    HFP4_CHECK_ARG(w->scales.gran_mn == 1 && w->scales.gran_k == 32, "hfp4__fold_stats_add: scales must be (1, 32)");

    hfp4__fold_stats t;
    hfp4__fold_stats_init(&t);
    int64_t kg = w->cols / 32, chunks = hfp4__ceil_div(kg, 4), tiles = hfp4__ceil_div(w->rows, HFP4_SM90_ROW_TILE);
    for (int64_t g = 0; g < groups; g++) {
        t.matrices++;
        for (int64_t tile = 0; tile < tiles; tile++) {
            int64_t r0 = tile * HFP4_SM90_ROW_TILE;
            int64_t r1 = r0 + HFP4_SM90_ROW_TILE < w->rows ? r0 + HFP4_SM90_ROW_TILE : w->rows;
            /* each row's exponent range over all of K, for the one-base rule (the repack's row base) */
            int row_lo[HFP4_SM90_ROW_TILE], row_hi[HFP4_SM90_ROW_TILE];
            for (int i = 0; i < HFP4_SM90_ROW_TILE; i++) row_lo[i] = 256, row_hi[i] = -1;
            for (int64_t c = 0; c < chunks; c++) {
                int fold = 1;
                for (int64_t r = r0; r < r1; r++) {
                    int e[4], nz[4], emax = -1;
                    for (int j = 0; j < 4; j++) {
                        int64_t jj = c * 4 + j;
                        nz[j] = 0;
                        if (jj >= kg) continue;
                        int pow2;
                        HFP4_TRY(scale_exponent(w, groups, g, r, jj, &e[j], &pow2));
                        t.non_pow2_scales += !pow2;
                        t.k_groups++;
                        nz[j] = group_nonzero(w, g, r, jj);
                        if (!nz[j]) {
                            t.zero_groups++;
                            continue;
                        }
                        if (e[j] > emax) emax = e[j];
                        if (e[j] < t.exp_min) t.exp_min = e[j];
                        if (e[j] > t.exp_max) t.exp_max = e[j];
                        if (e[j] < row_lo[r - r0]) row_lo[r - r0] = e[j];
                        if (e[j] > row_hi[r - r0]) row_hi[r - r0] = e[j];
                    }
                    for (int j = 0; j < 4; j++)
                        if (nz[j] && emax - e[j] > HFP4_SM90_FOLD_SPAN) fold = 0;
                }
                t.chunk_tiles++;
                t.folded_if_ue8m0 += fold;
            }
            int one_base = 1; /* every row within the fold span over K, or all zero */
            for (int64_t r = r0; r < r1; r++)
                if (row_hi[r - r0] >= 0 && row_hi[r - r0] - row_lo[r - r0] > HFP4_SM90_FOLD_SPAN) one_base = 0;
            t.tiles++;
            t.one_base_if_ue8m0 += one_base;
        }
    }
    hfp4__fold_stats_merge(s, &t);
    return HFP4_OK;
}

hfp4_status hfp4__fp4_expert_stats(hfp4__st_file *file, const hfp4__fp4_expert *e, hfp4__fold_stats *out) {
    HFP4_CHECK_ARG(file && e && out, "hfp4__fp4_expert_stats: NULL argument");
    uint64_t wb = hfp4__fp4_expert_weight_bytes(e, 1), sb = hfp4__fp4_expert_scale_bytes(e, 1);
    HFP4_CHECK_ARG(wb <= SIZE_MAX && sb <= SIZE_MAX, "safetensors '%s': tensor '%s' is too large for this host",
                   HFP4__SHOWN(file->path), HFP4__SHOWN(e->weight->name));
    void *wbuf = malloc((size_t)wb), *sbuf = malloc((size_t)sb);
    hfp4_status st = HFP4_OK;
    if (!wbuf || !sbuf)
        st = hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "safetensors '%s': tensor '%s': out of memory for one group (%llu bytes)",
                        HFP4__SHOWN(file->path), HFP4__SHOWN(e->weight->name), (unsigned long long)(wb + sb));
    hfp4__fold_stats acc;
    hfp4__fold_stats_init(&acc);
    for (int32_t g = 0; g < e->groups && st == HFP4_OK; g++) {
        hfp4_matrix m;
        st = hfp4__fp4_expert_load(file, e, g, 1, wbuf, sbuf, &m);
        if (st != HFP4_OK) break;
        hfp4__fold_stats one;
        hfp4__fold_stats_init(&one);
        st = hfp4__fold_stats_add(&one, &m, 1);
        if (st != HFP4_OK) {
            /* name the file and tensor; the statistics named the group-relative position */
            char why[512];
            snprintf(why, sizeof why, "%s", hfp4_last_error());
            if (e->groups > 1)
                st = hfp4__fail(st, "safetensors '%s': tensor '%s' (group %d): %s", HFP4__SHOWN(file->path),
                                HFP4__SHOWN(e->scale->name), (int)g, why);
            else
                st = hfp4__fail(st, "safetensors '%s': tensor '%s': %s", HFP4__SHOWN(file->path), HFP4__SHOWN(e->scale->name),
                                why);
            break;
        }
        hfp4__fold_stats_merge(&acc, &one);
    }
    free(wbuf);
    free(sbuf);
    if (st == HFP4_OK) *out = acc;
    return st;
}

typedef struct numbered {
    int64_t number;
    const hfp4__st_tensor *t;
} numbered;

static int by_number(const void *a, const void *b) {
    const numbered *x = a, *y = b;
    return x->number < y->number ? -1 : x->number > y->number;
}

hfp4_status hfp4__fp4_expert_match(const hfp4__st_file *file, const char *pattern, hfp4__fp4_expert **parts,
                                   int32_t *count, int64_t *first_number) {
    HFP4_CHECK_ARG(file && pattern && parts && count && first_number, "hfp4__fp4_expert_match: NULL argument");
    *parts = NULL;
    *count = 0;
    const char *star = strchr(pattern, '*');
    HFP4_CHECK_ARG(star != NULL && strchr(star + 1, '*') == NULL,
                   "pattern '%s' must contain exactly one '*' (standing for the expert number)", HFP4__SHOWN(pattern));
    size_t pre = (size_t)(star - pattern), suf = strlen(star + 1);
    numbered *hits = malloc((file->count ? file->count : 1) * sizeof *hits);
    if (!hits) return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "pattern '%s': out of memory", HFP4__SHOWN(pattern));
    size_t found = 0;
    for (size_t i = 0; i < file->count; i++) {
        const char *name = file->tensors[i].name;
        size_t len = strlen(name);
        if (len <= pre + suf || strncmp(name, pattern, pre) != 0 || strcmp(name + len - suf, star + 1) != 0) continue;
        size_t digits = len - pre - suf;
        int ok = digits <= 9;
        int64_t v = 0;
        for (size_t d = 0; d < digits && ok; d++) {
            char c = name[pre + d];
            ok = c >= '0' && c <= '9';
            v = v * 10 + (c - '0');
        }
        if (ok) hits[found++] = (numbered){v, &file->tensors[i]};
    }
    hfp4_status st = HFP4_OK;
    if (found == 0)
        st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "pattern '%s' matches no tensor in '%s'", HFP4__SHOWN(pattern),
                        HFP4__SHOWN(file->path));
    if (found > (size_t)INT32_MAX)
        st =
            hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "pattern '%s' matches more than %d tensors", HFP4__SHOWN(pattern), INT32_MAX);
    if (st == HFP4_OK) qsort(hits, found, sizeof *hits, by_number);
    for (size_t i = 1; i < found && st == HFP4_OK; i++) {
        if (hits[i].number == hits[i - 1].number)
            st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "pattern '%s': tensors '%s' and '%s' have the same number %lld",
                            HFP4__SHOWN(pattern), HFP4__SHOWN(hits[i - 1].t->name), HFP4__SHOWN(hits[i].t->name),
                            (long long)hits[i].number);
        else if (hits[i].number != hits[i - 1].number + 1)
            st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT,
                            "pattern '%s': numbers jump from %lld ('%s') to %lld ('%s'); groups must be consecutive experts",
                            HFP4__SHOWN(pattern), (long long)hits[i - 1].number, HFP4__SHOWN(hits[i - 1].t->name),
                            (long long)hits[i].number, HFP4__SHOWN(hits[i].t->name));
    }
    hfp4__fp4_expert *out = NULL;
    if (st == HFP4_OK) {
        out = calloc(found, sizeof *out);
        if (!out) st = hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "pattern '%s': out of memory", HFP4__SHOWN(pattern));
    }
    for (size_t i = 0; i < found && st == HFP4_OK; i++) {
        st = hfp4__fp4_expert_pair(file, hits[i].t->name, &out[i]);
        if (st != HFP4_OK) break;
        if (out[i].groups != 1 || hits[i].t->ndim != 2)
            st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT,
                            "pattern '%s': tensor '%s' is stacked (3-D); the pattern collects 2-D per-expert weights",
                            HFP4__SHOWN(pattern), HFP4__SHOWN(hits[i].t->name));
        else if (i > 0 && (out[i].n != out[0].n || out[i].k != out[0].k))
            st = hfp4__fail(
                HFP4_ERR_INVALID_ARGUMENT,
                "pattern '%s': tensor '%s' is [N %lld, K %lld] but '%s' is [N %lld, K %lld]; groups must share a shape",
                HFP4__SHOWN(pattern), HFP4__SHOWN(hits[i].t->name), (long long)out[i].n, (long long)out[i].k,
                HFP4__SHOWN(hits[0].t->name), (long long)out[0].n, (long long)out[0].k);
    }
    if (st == HFP4_OK) {
        *parts = out;
        *count = (int32_t)found;
        *first_number = hits[0].number;
    } else {
        free(out);
    }
    free(hits);
    return st;
}
